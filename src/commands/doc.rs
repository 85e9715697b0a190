//! What `COMMAND DOCS` and `COMMAND INFO` say about each command: summary, complexity, arity,
//! key spec and argument tree. Each command file declares its [`Doc`]; [`describe`] hands it to
//! the server at load (Redis 7.0+, which copies everything it is given).

use std::ffi::{CStr, CString};
use std::os::raw::c_int;

use redis_module::{raw, Context, Status};

use crate::ffi::command::{self, Applied, ArgKind, ArgSpec, Argument, Info, KeySpec};

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
pub enum ArgType {
    Key,
    Integer,
    Double,
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
    pub kind: ArgType,
    pub token: Option<&'static CStr>,
    pub optional: bool,
    pub multiple: bool,
}

impl Arg {
    pub const fn new(name: &'static CStr, kind: ArgType) -> Self {
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
            kind: ArgType::Token,
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
pub const KEY: Arg = Arg::new(c"key", ArgType::Key);
/// `[CLIENT id]`.
pub const CLIENT: Arg = Arg::new(c"id", ArgType::String).after(c"CLIENT").optional();
/// `rate interval [OVERALL | PER_CLIENT | ONEKEY] [KEEPALIVE ms] [PRECISION ms]`: a limiter's configuration,
/// as SETRATE takes it and as `RATE` creates a limiter on first use.
pub const RATE_ARGS: [Arg; 2] = [
    Arg::new(c"rate", ArgType::Integer),
    Arg::new(c"interval", ArgType::Integer),
];
pub const MODE: Arg = Arg::new(
    c"mode",
    ArgType::OneOf(&[
        Arg::token(c"overall", c"OVERALL"),
        Arg::token(c"per_client", c"PER_CLIENT"),
        Arg::token(c"onekey", c"ONEKEY"),
    ]),
)
.optional();
pub const KEEPALIVE: Arg = Arg::new(c"ms", ArgType::Integer)
    .after(c"KEEPALIVE")
    .optional();
pub const PRECISION: Arg = Arg::new(c"precision", ArgType::Integer)
    .after(c"PRECISION")
    .optional();
/// `key [permits] [CLIENT id] [RATE ...]`: what TRYACQUIRE and ALLOW take.
pub const ACQUISITION_ARGS: [Arg; 4] = [
    KEY,
    Arg::new(c"permits", ArgType::Integer).optional(),
    CLIENT,
    RATE,
];
/// `[RATE rate interval [OVERALL | PER_CLIENT | ONEKEY] [KEEPALIVE ms] [PRECISION ms]]`: create on first
/// use.
pub const RATE: Arg = Arg::new(
    c"create",
    ArgType::Block(&[RATE_ARGS[0], RATE_ARGS[1], MODE, KEEPALIVE, PRECISION]),
)
.after(c"RATE")
.optional();

pub const READ: u32 = raw::REDISMODULE_CMD_KEY_RO | raw::REDISMODULE_CMD_KEY_ACCESS;
pub const UPDATE: u32 =
    raw::REDISMODULE_CMD_KEY_RW | raw::REDISMODULE_CMD_KEY_ACCESS | raw::REDISMODULE_CMD_KEY_UPDATE;

/// Registers a command's documentation. A server without the API (before 7.0) keeps the
/// legacy key positions given at creation, which still route and check the key.
pub fn describe(ctx: &Context, doc: &Doc) -> Status {
    let keys = match doc.key {
        Keys::None => KeySpec::None,
        Keys::First(flags) => KeySpec::First(flags),
        Keys::Numkeys(flags) => KeySpec::Numkeys(flags),
    };
    let info = Info {
        summary: doc.summary,
        complexity: doc.complexity,
        since: SINCE,
        arity: doc.arity,
        keys,
        args: doc.args,
    };
    command::set_info(ctx, doc.name, &info)
}

impl Argument for Arg {
    fn spec(&self) -> ArgSpec<'_, Self> {
        let kind = match self.kind {
            ArgType::Key => ArgKind::Key,
            ArgType::Integer => ArgKind::Integer,
            ArgType::Double => ArgKind::Double,
            ArgType::String => ArgKind::String,
            ArgType::Token => ArgKind::PureToken,
            ArgType::OneOf(children) => ArgKind::OneOf(children),
            ArgType::Block(children) => ArgKind::Block(children),
        };
        ArgSpec {
            name: self.name,
            kind,
            token: self.token,
            optional: self.optional,
            multiple: self.multiple,
        }
    }
}

/// The ACL category every command of the module is in, where the server supports module
/// categories (Redis 7.4+, Valkey 8).
pub const CATEGORY: &CStr = c"ratelimit";

/// Adds the module's ACL category; false where the server cannot (Redis before 7.4) or has it
/// already (a module loaded again after MODULE UNLOAD).
pub fn add_category(ctx: &Context) -> bool {
    command::add_acl_category(ctx, CATEGORY)
}

/// Puts a command in its ACL categories and in `ratelimit`, where the server supports command
/// categories (Redis 7.2+, Valkey); without the `ratelimit` category where the server does not
/// know it. A server without the API (7.0) leaves the command in none: it still loads.
pub fn categorize(ctx: &Context, doc: &Doc) -> Status {
    let usual = doc.acl_categories.to_string_lossy();
    let with_own = format!("{usual} {}", CATEGORY.to_string_lossy());
    for categories in [with_own.as_str(), usual.as_ref()] {
        let Ok(categories) = CString::new(categories) else {
            return Status::Err;
        };
        match command::set_acl_categories(ctx, doc.name, &categories) {
            Applied::Done | Applied::Unsupported => return Status::Ok,
            Applied::Refused => {}
        }
    }
    Status::Err
}
