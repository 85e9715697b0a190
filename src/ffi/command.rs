//! Commands: creating them, their COMMAND DOCS and COMMAND INFO entry, their ACL categories,
//! and answering the server's keys-position requests.
//!
//! The registration calls are meant for OnLoad; the server refuses them elsewhere.

use std::ffi::CStr;
use std::os::raw::c_int;
use std::ptr::{self, NonNull};
use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};

use redis_module::{raw, Context, RedisString, Status};

/// A command handler as the server calls it.
pub(crate) type Handler =
    extern "C" fn(*mut raw::RedisModuleCtx, *mut *mut raw::RedisModuleString, c_int) -> c_int;

/// The server's handler (an `extern "C"` trampoline) for a command's `$run`, whose result
/// `$reply` passes through before it is replied.
macro_rules! handler {
    ($run:path, $reply:path) => {{
        extern "C" fn handler(
            ctx: *mut redis_module::raw::RedisModuleCtx,
            argv: *mut *mut redis_module::raw::RedisModuleString,
            argc: std::os::raw::c_int,
        ) -> std::os::raw::c_int {
            let context = redis_module::Context::new(ctx);
            let result = $crate::ffi::command::with_args(argv, argc, |args| $run(&context, args));
            context.reply($reply(result)) as std::os::raw::c_int
        }
        handler as $crate::ffi::command::Handler
    }};
}
pub(crate) use handler;

/// Legacy key positions given at creation: first key, last key, step (0, 0, 0 for none).
pub(crate) type KeyPositions = (c_int, c_int, c_int);

/// Creates command `name` with its `flags` (`write deny-oom` ...) and legacy key positions.
pub(crate) fn create(
    ctx: &Context,
    name: &'static CStr,
    handler: Handler,
    flags: &'static CStr,
    (first, last, step): KeyPositions,
) -> Status {
    // SAFETY: a module context; the name and flags are C strings that outlive the module, and
    // the handler is a plain function of the signature the server calls.
    let created = unsafe {
        raw::RedisModule_CreateCommand.map(|create| {
            create(
                ctx.ctx,
                name.as_ptr(),
                Some(handler),
                flags.as_ptr(),
                first,
                last,
                step,
            )
        })
    };
    status(created)
}

/// A command's keys, as its key spec describes them, each with its `REDISMODULE_CMD_KEY_*`
/// flags.
#[derive(Clone, Copy)]
pub(crate) enum KeySpec {
    None,
    /// The key is argument 1.
    First(u32),
    /// `numkeys key [key ...]` from argument 1.
    Numkeys(u32),
}

/// The kind of an argument in COMMAND DOCS; a group holds its children.
pub(crate) enum ArgKind<'a, A> {
    Key,
    Integer,
    Double,
    String,
    PureToken,
    OneOf(&'a [A]),
    Block(&'a [A]),
}

/// One argument as COMMAND DOCS shows it.
pub(crate) struct ArgSpec<'a, A> {
    pub(crate) name: &'a CStr,
    pub(crate) kind: ArgKind<'a, A>,
    pub(crate) token: Option<&'a CStr>,
    pub(crate) optional: bool,
    pub(crate) multiple: bool,
}

/// An argument type that describes itself: the commands' own doc type implements it, so its
/// tree is walked here as it is, without a copy.
pub(crate) trait Argument: Sized {
    fn spec(&self) -> ArgSpec<'_, Self>;
}

/// A command's COMMAND DOCS and COMMAND INFO entry.
pub(crate) struct Info<'a, A> {
    pub(crate) summary: &'a CStr,
    pub(crate) complexity: &'a CStr,
    pub(crate) since: &'a CStr,
    /// The exact count including the name, or -N for at least N.
    pub(crate) arity: c_int,
    pub(crate) keys: KeySpec,
    pub(crate) args: &'a [A],
}

/// Sets command `name`'s docs (SetCommandInfo, Redis 7.0+, which copies what it keeps). Ok
/// where the server lacks the API; Err when there is no such command or the server refuses.
pub(crate) fn set_info<A: Argument>(ctx: &Context, name: &CStr, info: &Info<'_, A>) -> Status {
    static VERSION: raw::RedisModuleCommandInfoVersion = raw::RedisModuleCommandInfoVersion {
        version: 1,
        sizeof_historyentry: std::mem::size_of::<raw::RedisModuleCommandHistoryEntry>(),
        sizeof_keyspec: std::mem::size_of::<raw::RedisModuleCommandKeySpec>(),
        sizeof_arg: std::mem::size_of::<raw::RedisModuleCommandArg>(),
    };
    // SAFETY: module API pointers filled in at init, read by value.
    let (get_command, set_info) =
        unsafe { (raw::RedisModule_GetCommand, raw::RedisModule_SetCommandInfo) };
    let (Some(get_command), Some(set_info)) = (get_command, set_info) else {
        return Status::Ok;
    };
    // SAFETY: a module context and a C string the server reads during the call.
    let command = unsafe { get_command(ctx.ctx, name.as_ptr()) };
    if command.is_null() {
        return Status::Err;
    }
    // SAFETY: an all-zero key spec (null notes, no flags, invalid search types, zero unions) is
    // a valid value of this plain C struct; the match below fills in what is used.
    let mut specs: [raw::RedisModuleCommandKeySpec; 2] = unsafe { std::mem::zeroed() };
    let key_specs = match info.keys {
        KeySpec::First(flags) => {
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
        KeySpec::Numkeys(flags) => {
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
        KeySpec::None => ptr::null_mut(),
    };
    let mut arena: Vec<Vec<raw::RedisModuleCommandArg>> = Vec::new();
    let args = raw_args(info.args, &mut arena);
    let raw_info = raw::RedisModuleCommandInfo {
        version: &VERSION,
        summary: info.summary.as_ptr(),
        complexity: info.complexity.as_ptr(),
        since: info.since.as_ptr(),
        history: ptr::null_mut(),
        tips: ptr::null(),
        arity: info.arity,
        key_specs,
        args,
    };
    // SAFETY: `command` is the server's; every pointer in `raw_info` points into `info`,
    // `specs`, `arena` or a static, all alive until SetCommandInfo returns, and the server
    // copies what it keeps.
    status(Some(unsafe { set_info(command, &raw_info) }))
}

/// A zero-terminated array of raw args, children first; `arena` owns every array (moving a Vec
/// into it leaves its elements where they are).
fn raw_args<A: Argument>(
    args: &[A],
    arena: &mut Vec<Vec<raw::RedisModuleCommandArg>>,
) -> *mut raw::RedisModuleCommandArg {
    let mut out: Vec<raw::RedisModuleCommandArg> = Vec::with_capacity(args.len() + 1);
    for arg in args {
        let spec = arg.spec();
        let (type_, subargs) = match spec.kind {
            ArgKind::Key => (
                raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_KEY,
                None,
            ),
            ArgKind::Integer => (
                raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_INTEGER,
                None,
            ),
            ArgKind::Double => (
                raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_DOUBLE,
                None,
            ),
            ArgKind::String => (
                raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_STRING,
                None,
            ),
            ArgKind::PureToken => (
                raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_PURE_TOKEN,
                None,
            ),
            ArgKind::OneOf(children) => (
                raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_ONEOF,
                Some(children),
            ),
            ArgKind::Block(children) => (
                raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_BLOCK,
                Some(children),
            ),
        };
        let mut flags = raw::REDISMODULE_CMD_ARG_NONE;
        if spec.optional {
            flags |= raw::REDISMODULE_CMD_ARG_OPTIONAL;
        }
        if spec.multiple {
            flags |= raw::REDISMODULE_CMD_ARG_MULTIPLE;
        }
        out.push(raw::RedisModuleCommandArg {
            name: spec.name.as_ptr(),
            type_,
            key_spec_index: if matches!(spec.kind, ArgKind::Key) {
                0
            } else {
                -1
            },
            token: spec.token.map_or(ptr::null(), CStr::as_ptr),
            summary: ptr::null(),
            since: ptr::null(),
            flags: flags as c_int,
            deprecated_since: ptr::null(),
            subargs: subargs.map_or(ptr::null_mut(), |children| raw_args(children, arena)),
            display_text: ptr::null(),
        });
    }
    out.push(TERMINATOR);
    let pointer = out.as_mut_ptr();
    arena.push(out);
    pointer
}

/// The all-zero arg that ends an array of args.
const TERMINATOR: raw::RedisModuleCommandArg = raw::RedisModuleCommandArg {
    name: ptr::null(),
    type_: 0,
    key_spec_index: 0,
    token: ptr::null(),
    summary: ptr::null(),
    since: ptr::null(),
    flags: 0,
    deprecated_since: ptr::null(),
    subargs: ptr::null_mut(),
    display_text: ptr::null(),
};

/// Adds ACL category `name`; false where the server cannot (Redis before 7.4), has it already,
/// or is not loading the module.
pub(crate) fn add_acl_category(ctx: &Context, name: &CStr) -> bool {
    // SAFETY: a module context and a C string the server copies; the server refuses the call
    // outside OnLoad.
    unsafe {
        raw::RedisModule_AddACLCategory
            .is_some_and(|add| add(ctx.ctx, name.as_ptr()) == raw::REDISMODULE_OK as c_int)
    }
}

/// What became of a request the server may not support.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Applied {
    Done,
    /// The server has no such API.
    Unsupported,
    /// No such command, or the server refused.
    Refused,
}

/// Puts command `name` in the space-separated ACL `categories` (Redis 7.2+, Valkey).
pub(crate) fn set_acl_categories(ctx: &Context, name: &CStr, categories: &CStr) -> Applied {
    // SAFETY: module API pointers filled in at init, read by value.
    let (get_command, set_categories) = unsafe {
        (
            raw::RedisModule_GetCommand,
            raw::RedisModule_SetCommandACLCategories,
        )
    };
    let (Some(get_command), Some(set_categories)) = (get_command, set_categories) else {
        return Applied::Unsupported;
    };
    // SAFETY: a module context and a C string the server reads during the call.
    let command = unsafe { get_command(ctx.ctx, name.as_ptr()) };
    if command.is_null() {
        return Applied::Refused;
    }
    // SAFETY: `command` is the server's; the server parses the string during the call.
    if unsafe { set_categories(command, categories.as_ptr()) } == raw::REDISMODULE_OK as c_int {
        Applied::Done
    } else {
        Applied::Refused
    }
}

/// Whether the server is asking the running command where its keys are (a command created
/// with `getkeys-api`) instead of running it.
pub(crate) fn is_keys_position_request(ctx: &Context) -> bool {
    // SAFETY: IsKeysPositionRequest only reads the context's flags.
    unsafe {
        raw::RedisModule_IsKeysPositionRequest.is_some_and(|is_request| is_request(ctx.ctx) != 0)
    }
}

/// Calls `run` with a command's arguments after its name, as byte slices: on the stack for up
/// to [`STACK_ARGS`] of them, so a call allocates nothing for its arguments.
pub(crate) fn with_args<R>(
    argv: *mut *mut raw::RedisModuleString,
    argc: c_int,
    run: impl FnOnce(&[&[u8]]) -> R,
) -> R {
    let count = usize::try_from(argc).unwrap_or(0);
    if argv.is_null() || count < 2 {
        return run(&[]);
    }
    // SAFETY: the server passes `argc` valid strings at `argv`, live for the whole call.
    let strings = unsafe { std::slice::from_raw_parts(argv.cast_const(), count) };
    let strings = strings.get(1..).unwrap_or_default();
    let bytes = |string: &*mut raw::RedisModuleString| RedisString::string_as_slice(*string);
    if strings.len() <= STACK_ARGS {
        let mut stack: [&[u8]; STACK_ARGS] = [&[]; STACK_ARGS];
        for (slot, string) in stack.iter_mut().zip(strings) {
            *slot = bytes(string);
        }
        let args = stack.get(..strings.len()).unwrap_or_default();
        with_first_argument(strings, args, || run(args))
    } else {
        let heap: Vec<&[u8]> = strings.iter().map(bytes).collect();
        with_first_argument(strings, &heap, || run(&heap))
    }
}

/// Arguments a command gets on the stack (more go to the heap).
const STACK_ARGS: usize = 16;

// The running command's first argument after its name, where every command with a key has it:
// its server string and where its bytes are, so that the key of that name is opened with
// another reference to the string rather than a copy of it ([`held_argument`]). Set for the
// command's run only, and put back after it: a command can run inside another (a script's
// `redis.call`, another module's RM_Call), and the outer one's argument is current again when
// the inner returns. Outside a command, none.
static FIRST_STRING: AtomicPtr<raw::RedisModuleString> = AtomicPtr::new(ptr::null_mut());
static FIRST_BYTES: AtomicPtr<u8> = AtomicPtr::new(ptr::null_mut());
static FIRST_LEN: AtomicUsize = AtomicUsize::new(0);

/// Runs `run` with the first of `strings`, whose bytes are the first of `args`, as the running
/// command's first argument.
fn with_first_argument<R>(
    strings: &[*mut raw::RedisModuleString],
    args: &[&[u8]],
    run: impl FnOnce() -> R,
) -> R {
    let (Some(&string), Some(&bytes)) = (strings.first(), args.first()) else {
        return run();
    };
    let saved = (
        FIRST_STRING.load(Ordering::Relaxed),
        FIRST_BYTES.load(Ordering::Relaxed),
        FIRST_LEN.load(Ordering::Relaxed),
    );
    FIRST_STRING.store(string, Ordering::Relaxed);
    FIRST_BYTES.store(bytes.as_ptr().cast_mut(), Ordering::Relaxed);
    FIRST_LEN.store(bytes.len(), Ordering::Relaxed);
    let result = run();
    FIRST_STRING.store(saved.0, Ordering::Relaxed);
    FIRST_BYTES.store(saved.1, Ordering::Relaxed);
    FIRST_LEN.store(saved.2, Ordering::Relaxed);
    result
}

/// Another reference to the running command's first argument's string, if `name` is that
/// argument's bytes (the very bytes, not equal ones: the slice the command was given): the key
/// a command names is opened without copying its name into a new string. None otherwise, and
/// where the server cannot hold strings (Redis < 6.0.7).
pub(crate) fn held_argument(ctx: &Context, name: &[u8]) -> Option<RedisString> {
    let string = FIRST_STRING.load(Ordering::Relaxed);
    if string.is_null()
        || !ptr::eq(FIRST_BYTES.load(Ordering::Relaxed), name.as_ptr())
        || FIRST_LEN.load(Ordering::Relaxed) != name.len()
    {
        return None;
    }
    let hold = api!(RedisModule_HoldString)?;
    // SAFETY: `string` is an argument of the command now running (set only for its run), which
    // the server keeps alive for the whole call; with a NULL context the reference is released
    // by the RedisString's drop (HoldString copies a string it may not share).
    let held = unsafe { hold(ptr::null_mut(), string) };
    NonNull::new(held).map(|held| RedisString::from_redis_module_string(ctx.ctx, held.as_ptr()))
}

/// Answers a keys-position request: argument `position` of a command of `argc` arguments (the
/// name at 0) is a key. A position outside them is not declared: the server would read that
/// argument.
pub(crate) fn declare_key(ctx: &Context, argc: usize, position: usize) {
    if position == 0 || position >= argc {
        return;
    }
    let Ok(position) = c_int::try_from(position) else {
        return;
    };
    // SAFETY: `position` is within the command's arguments, as KeyAtPos requires; outside a
    // keys-position request the server ignores the call.
    unsafe {
        if let Some(key_at) = raw::RedisModule_KeyAtPos {
            key_at(ctx.ctx, position);
        }
    }
}

fn status(result: Option<c_int>) -> Status {
    if result == Some(raw::REDISMODULE_OK as c_int) {
        Status::Ok
    } else {
        Status::Err
    }
}
