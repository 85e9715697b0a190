//! What `COMMAND DOCS` and `COMMAND INFO` say about each command: summary, complexity, arity,
//! key spec and argument tree. Each command file declares its [`Doc`]; [`describe`] hands it to
//! `RedisModule_SetCommandInfo` at load (Redis 7.0+, which copies everything it is given).

use std::ffi::CStr;
use std::os::raw::c_int;
use std::ptr;

use redis_module::{raw, Context, Status};

/// The version every command first shipped in: this one, the module's first release. Taken from
/// Cargo.toml, the one place the version is written.
pub const SINCE: &CStr =
    match CStr::from_bytes_with_nul(concat!(env!("CARGO_PKG_VERSION"), "\0").as_bytes()) {
        Ok(version) => version,
        Err(_) => panic!("the crate version has no NUL"),
    };

pub struct Doc {
    pub name: &'static CStr,
    pub summary: &'static CStr,
    pub complexity: &'static CStr,
    /// Redis arity: the exact count including the name, or -N for at least N.
    pub arity: c_int,
    /// The command flags it is created with (`write deny-oom`, `readonly fast` ...).
    pub flags: &'static CStr,
    /// The usual ACL categories it belongs in (`ratelimit` is added where the server can).
    pub acl_categories: &'static CStr,
    /// Where the command's keys are.
    pub key: Keys,
    pub args: &'static [Arg],
}

/// A command's keys, each with its `REDISMODULE_CMD_KEY_*` flags.
#[derive(Clone, Copy)]
pub enum Keys {
    None,
    /// `key` is argument 1.
    First(u32),
    /// `numkeys key [key ...]` from argument 1.
    Numkeys(u32),
}

#[derive(Clone, Copy)]
pub enum Kind {
    Key,
    Integer,
    String,
    /// A bare keyword (`NX`).
    Token,
    OneOf(&'static [Arg]),
    /// Arguments that come together (`RATE rate interval ...`).
    Block(&'static [Arg]),
}

#[derive(Clone, Copy)]
pub struct Arg {
    pub name: &'static CStr,
    pub kind: Kind,
    pub token: Option<&'static CStr>,
    pub optional: bool,
    pub multiple: bool,
}

impl Arg {
    pub const fn new(name: &'static CStr, kind: Kind) -> Self {
        Arg {
            name,
            kind,
            token: None,
            optional: false,
            multiple: false,
        }
    }

    /// A bare keyword: its name is the keyword in lower case.
    pub const fn token(name: &'static CStr, token: &'static CStr) -> Self {
        Arg {
            name,
            kind: Kind::Token,
            token: Some(token),
            optional: false,
            multiple: false,
        }
    }

    pub const fn after(mut self, token: &'static CStr) -> Self {
        self.token = Some(token);
        self
    }

    pub const fn optional(mut self) -> Self {
        self.optional = true;
        self
    }

    /// Repeated one or more times.
    pub const fn multiple(mut self) -> Self {
        self.multiple = true;
        self
    }
}

/// The `key` argument every limiter command starts with.
pub const KEY: Arg = Arg::new(c"key", Kind::Key);
/// `[CLIENT id]`.
pub const CLIENT: Arg = Arg::new(c"id", Kind::String).after(c"CLIENT").optional();
/// `rate interval [OVERALL | PER_CLIENT] [KEEPALIVE ms] [PRECISION ms]`: a limiter's configuration,
/// as SETRATE takes it and as `RATE` creates a limiter on first use.
pub const RATE_ARGS: [Arg; 2] = [
    Arg::new(c"rate", Kind::Integer),
    Arg::new(c"interval", Kind::Integer),
];
pub const MODE: Arg = Arg::new(
    c"mode",
    Kind::OneOf(&[
        Arg::token(c"overall", c"OVERALL"),
        Arg::token(c"per_client", c"PER_CLIENT"),
    ]),
)
.optional();
pub const KEEPALIVE: Arg = Arg::new(c"ms", Kind::Integer)
    .after(c"KEEPALIVE")
    .optional();
pub const PRECISION: Arg = Arg::new(c"precision", Kind::Integer)
    .after(c"PRECISION")
    .optional();
/// `key [permits] [CLIENT id] [RATE ...]`: what TRYACQUIRE and ALLOW take.
pub const ACQUISITION_ARGS: [Arg; 4] = [
    KEY,
    Arg::new(c"permits", Kind::Integer).optional(),
    CLIENT,
    RATE,
];
/// `[RATE rate interval [OVERALL | PER_CLIENT] [KEEPALIVE ms] [PRECISION ms]]`: create on first
/// use.
pub const RATE: Arg = Arg::new(
    c"create",
    Kind::Block(&[RATE_ARGS[0], RATE_ARGS[1], MODE, KEEPALIVE, PRECISION]),
)
.after(c"RATE")
.optional();

pub const READ: u32 = raw::REDISMODULE_CMD_KEY_RO | raw::REDISMODULE_CMD_KEY_ACCESS;
pub const UPDATE: u32 =
    raw::REDISMODULE_CMD_KEY_RW | raw::REDISMODULE_CMD_KEY_ACCESS | raw::REDISMODULE_CMD_KEY_UPDATE;

/// Registers a command's documentation. A server without the API (before 7.0) keeps the
/// legacy key positions given at creation, which still route and check the key.
pub fn describe(ctx: &Context, doc: &Doc) -> Status {
    static VERSION: raw::RedisModuleCommandInfoVersion = raw::RedisModuleCommandInfoVersion {
        version: 1,
        sizeof_historyentry: std::mem::size_of::<raw::RedisModuleCommandHistoryEntry>(),
        sizeof_keyspec: std::mem::size_of::<raw::RedisModuleCommandKeySpec>(),
        sizeof_arg: std::mem::size_of::<raw::RedisModuleCommandArg>(),
    };
    // SAFETY: module API pointers filled in at init; every pointer handed over lives in `arena`
    // or `specs` (or is static) until SetCommandInfo returns, and Redis copies what it keeps.
    unsafe {
        let (Some(get_command), Some(set_info)) =
            (raw::RedisModule_GetCommand, raw::RedisModule_SetCommandInfo)
        else {
            return Status::Ok;
        };
        let command = get_command(ctx.ctx, doc.name.as_ptr());
        if command.is_null() {
            return Status::Err;
        }
        let mut specs: [raw::RedisModuleCommandKeySpec; 2] = std::mem::zeroed();
        let key_specs = match doc.key {
            Keys::First(flags) => {
                specs[0].flags = u64::from(flags);
                specs[0].begin_search_type =
                    raw::RedisModuleKeySpecBeginSearchType_REDISMODULE_KSPEC_BS_INDEX;
                specs[0].bs.index.pos = 1;
                specs[0].find_keys_type =
                    raw::RedisModuleKeySpecFindKeysType_REDISMODULE_KSPEC_FK_RANGE;
                specs[0].fk.range.lastkey = 0;
                specs[0].fk.range.keystep = 1;
                specs[0].fk.range.limit = 0;
                specs.as_mut_ptr()
            }
            Keys::Numkeys(flags) => {
                specs[0].flags = u64::from(flags);
                specs[0].begin_search_type =
                    raw::RedisModuleKeySpecBeginSearchType_REDISMODULE_KSPEC_BS_INDEX;
                specs[0].bs.index.pos = 1;
                specs[0].find_keys_type =
                    raw::RedisModuleKeySpecFindKeysType_REDISMODULE_KSPEC_FK_KEYNUM;
                specs[0].fk.keynum.keynumidx = 0;
                specs[0].fk.keynum.firstkey = 1;
                specs[0].fk.keynum.keystep = 1;
                specs.as_mut_ptr()
            }
            Keys::None => ptr::null_mut(),
        };
        let mut arena: Vec<Vec<raw::RedisModuleCommandArg>> = Vec::new();
        let args = raw_args(doc.args, &mut arena);
        let info = raw::RedisModuleCommandInfo {
            version: &VERSION,
            summary: doc.summary.as_ptr(),
            complexity: doc.complexity.as_ptr(),
            since: SINCE.as_ptr(),
            history: ptr::null_mut(),
            tips: ptr::null(),
            arity: doc.arity,
            key_specs,
            args,
        };
        if set_info(command, &info) == raw::REDISMODULE_OK as c_int {
            Status::Ok
        } else {
            Status::Err
        }
    }
}

/// The ACL category every command of the module is in, where the server supports module
/// categories (Redis 7.4+, Valkey 8).
pub const CATEGORY: &CStr = c"ratelimit";

/// Adds the module's ACL category; false where the server cannot (Redis before 7.4) or has it
/// already (a module loaded again after MODULE UNLOAD).
pub fn add_category(ctx: &Context) -> bool {
    // SAFETY: called from OnLoad, the only place AddACLCategory may be called.
    unsafe {
        raw::RedisModule_AddACLCategory
            .is_some_and(|add| add(ctx.ctx, CATEGORY.as_ptr()) == raw::REDISMODULE_OK as c_int)
    }
}

/// Puts a command in its ACL categories and in `ratelimit`, where the server supports command
/// categories (Redis 7.2+, Valkey); without the `ratelimit` category where the server does not
/// know it. A server without the API (7.0) leaves the command in none: it still loads.
pub fn categorize(ctx: &Context, doc: &Doc) -> Status {
    // SAFETY: module API pointers filled in at init, called from OnLoad; the strings live until
    // SetCommandACLCategories returns, and the server parses them there.
    unsafe {
        let (Some(get_command), Some(set_categories)) = (
            raw::RedisModule_GetCommand,
            raw::RedisModule_SetCommandACLCategories,
        ) else {
            return Status::Ok;
        };
        let command = get_command(ctx.ctx, doc.name.as_ptr());
        if command.is_null() {
            return Status::Err;
        }
        let usual = doc.acl_categories.to_string_lossy();
        let with_own = format!("{usual} {}", CATEGORY.to_string_lossy());
        for categories in [with_own.as_str(), usual.as_ref()] {
            let Ok(categories) = std::ffi::CString::new(categories) else {
                return Status::Err;
            };
            if set_categories(command, categories.as_ptr()) == raw::REDISMODULE_OK as c_int {
                return Status::Ok;
            }
        }
        Status::Err
    }
}

/// A zero-terminated array of raw args, children first; `arena` owns every array.
fn raw_args(
    args: &[Arg],
    arena: &mut Vec<Vec<raw::RedisModuleCommandArg>>,
) -> *mut raw::RedisModuleCommandArg {
    let mut out: Vec<raw::RedisModuleCommandArg> = Vec::with_capacity(args.len() + 1);
    for arg in args {
        let (type_, subargs) = match arg.kind {
            Kind::Key => (
                raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_KEY,
                None,
            ),
            Kind::Integer => (
                raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_INTEGER,
                None,
            ),
            Kind::String => (
                raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_STRING,
                None,
            ),
            Kind::Token => (
                raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_PURE_TOKEN,
                None,
            ),
            Kind::OneOf(children) => (
                raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_ONEOF,
                Some(children),
            ),
            Kind::Block(children) => (
                raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_BLOCK,
                Some(children),
            ),
        };
        let mut flags = raw::REDISMODULE_CMD_ARG_NONE;
        if arg.optional {
            flags |= raw::REDISMODULE_CMD_ARG_OPTIONAL;
        }
        if arg.multiple {
            flags |= raw::REDISMODULE_CMD_ARG_MULTIPLE;
        }
        out.push(raw::RedisModuleCommandArg {
            name: arg.name.as_ptr(),
            type_,
            key_spec_index: if matches!(arg.kind, Kind::Key) { 0 } else { -1 },
            token: arg.token.map_or(ptr::null(), CStr::as_ptr),
            summary: ptr::null(),
            since: ptr::null(),
            flags: flags as c_int,
            deprecated_since: ptr::null(),
            subargs: subargs.map_or(ptr::null_mut(), |children| raw_args(children, arena)),
            display_text: ptr::null(),
        });
    }
    // SAFETY: an all-zero RedisModuleCommandArg (null pointers, zero ints) is the terminator.
    out.push(unsafe { std::mem::zeroed() });
    let pointer = out.as_mut_ptr();
    arena.push(out);
    pointer
}
