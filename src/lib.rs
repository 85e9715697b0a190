//! ratelimit: Redisson's `RRateLimiter` as native Redis commands.
//!
//! Layers, each importing only the ones below it:
//! `lib.rs` (registration) -> `commands/` (a file per command) -> `store` (the limiter's keys) ->
//! `key` (raw key API, replicates every write) / `limiter` (the pure sliding log) /
//! `keyspace` (names and member bytes) -> `args`, `error`, `clock`.

// Public only so that the fuzz targets (fuzz/) can reach the parsers and the member decoder.
pub mod args;
mod blocking;
mod clock;
pub mod commands;
pub mod error;
mod key;
pub mod keyspace;
pub mod limiter;
mod migration;
mod queue;
mod stats;
mod store;

use std::os::raw::c_int;

use redis_module::{raw, redis_module, Context, RedisString, Status};

/// Unit tests and fuzz targets run without a server, where Redis's allocator does not exist.
#[cfg(not(any(test, fuzzing)))]
macro_rules! allocator {
    () => {
        redis_module::alloc::RedisAlloc
    };
}
#[cfg(any(test, fuzzing))]
macro_rules! allocator {
    () => {
        std::alloc::System
    };
}

/// A command handler whose error replies are counted in `INFO ratelimit`.
macro_rules! counted {
    ($run:path) => {
        |ctx: &Context, args: Vec<RedisString>| stats::counted($run(ctx, args))
    };
}

/// Options given after the module path in `loadmodule`.
#[derive(Debug, Default, PartialEq, Eq)]
struct LoadOptions {
    debug_commands: bool,
}

impl LoadOptions {
    fn parse(args: &[&[u8]]) -> Result<Self, String> {
        let mut options = LoadOptions::default();
        let mut pairs = args.chunks(2);
        for pair in &mut pairs {
            match pair {
                [name, value] if name.eq_ignore_ascii_case(b"debug-commands") => {
                    options.debug_commands = match &value.to_ascii_lowercase()[..] {
                        b"yes" => true,
                        b"no" => false,
                        _ => return Err("debug-commands takes yes or no".into()),
                    };
                }
                _ => {
                    return Err(format!(
                        "unknown load option '{}'; the only option is: debug-commands yes|no",
                        error::Printable(pair.first().copied().unwrap_or_default())
                    ))
                }
            }
        }
        Ok(options)
    }
}

fn init(ctx: &Context, args: &[RedisString]) -> Status {
    // MODULE UNLOAD may leave the library mapped: start from a clean slate, as a first load.
    stats::reset();
    blocking::reset();
    clock::unfreeze();
    let args: Vec<&[u8]> = args.iter().map(RedisString::as_slice).collect();
    let options = match LoadOptions::parse(&args) {
        Ok(options) => options,
        Err(message) => {
            ctx.log_warning(&format!("ratelimit: {message}"));
            return Status::Err;
        }
    };
    if options.debug_commands {
        ctx.log_notice("ratelimit: debug commands enabled (RATELIMIT.DEBUG); not for production");
        if register_debug_command(ctx) == Status::Err {
            return Status::Err;
        }
    }
    // Where the category exists already (a reload), commands are still put in it.
    let _ = commands::doc::add_category(ctx);
    let debug = options.debug_commands.then_some(&commands::debug::DOC);
    for doc in DOCS.into_iter().chain(debug) {
        if commands::doc::categorize(ctx, doc) == Status::Err {
            ctx.log_warning(&format!(
                "ratelimit: could not set the ACL categories of {}",
                doc.name.to_string_lossy()
            ));
            return Status::Err;
        }
    }
    for doc in DOCS {
        if commands::doc::describe(ctx, doc) == Status::Err {
            ctx.log_warning(&format!(
                "ratelimit: could not set the docs of {}",
                doc.name.to_string_lossy()
            ));
            return Status::Err;
        }
    }
    if options.debug_commands && commands::doc::describe(ctx, &commands::debug::DOC) == Status::Err
    {
        return Status::Err;
    }
    // Replaces the crate's default (empty) INFO callback with ours.
    raw::register_info_function(ctx.ctx, Some(stats::info));
    Status::Ok
}

fn deinit(ctx: &Context) -> Status {
    blocking::stop_all_timers(ctx);
    Status::Ok
}

/// The docs of the commands in the `redis_module!` list below.
const DOCS: [&commands::doc::Doc; 11] = [
    &commands::acquire::DOC,
    &commands::allow::DOC,
    &commands::allowall::DOC,
    &commands::setrate::DOC,
    &commands::tryacquire::DOC,
    &commands::config::DOC,
    &commands::available::DOC,
    &commands::release::DOC,
    &commands::delete::DOC,
    &commands::expire::DOC,
    &commands::persist::DOC,
];

/// RATELIMIT.DEBUG is registered here rather than in the static list below, so that without
/// `debug-commands yes` the command does not exist at all.
fn register_debug_command(ctx: &Context) -> Status {
    extern "C" fn debug_command(
        ctx: *mut raw::RedisModuleCtx,
        argv: *mut *mut raw::RedisModuleString,
        argc: c_int,
    ) -> c_int {
        let context = Context::new(ctx);
        let args = redis_module::decode_args(ctx, argv, argc);
        context.reply(stats::counted(commands::debug::run(&context, args))) as c_int
    }
    // SAFETY: called from OnLoad with the module's context; names and flags are static C strings.
    let created = unsafe {
        raw::RedisModule_CreateCommand.map(|create| {
            create(
                ctx.ctx,
                c"ratelimit.debug".as_ptr(),
                Some(debug_command),
                c"admin".as_ptr(),
                0,
                0,
                0,
            )
        })
    };
    if created == Some(raw::REDISMODULE_OK as c_int) {
        Status::Ok
    } else {
        Status::Err
    }
}

/// The module's version as `MODULE LIST` shows it: major * 10000 + minor * 100 + patch, from
/// Cargo.toml's version.
const MODULE_VERSION: i32 = {
    const fn number(digits: &str) -> i32 {
        let bytes = digits.as_bytes();
        let mut value = 0;
        let mut i = 0;
        while i < bytes.len() {
            value = value * 10 + (bytes[i] - b'0') as i32;
            i += 1;
        }
        value
    }
    number(env!("CARGO_PKG_VERSION_MAJOR")) * 10000
        + number(env!("CARGO_PKG_VERSION_MINOR")) * 100
        + number(env!("CARGO_PKG_VERSION_PATCH"))
};

redis_module! {
    name: "ratelimit",
    version: MODULE_VERSION,
    allocator: (allocator!(), allocator!()),
    data_types: [],
    init: init,
    deinit: deinit,
    commands: [
        ["ratelimit.setrate", counted!(commands::setrate::run), "write deny-oom", 1, 1, 1, ""],
        ["ratelimit.tryacquire", counted!(commands::tryacquire::run), "write deny-oom", 1, 1, 1, ""],
        ["ratelimit.acquire", counted!(commands::acquire::run), "write deny-oom blocking", 1, 1, 1, ""],
        ["ratelimit.allow", counted!(commands::allow::run), "write deny-oom", 1, 1, 1, ""],
        // Its keys (numkeys key [key ...]) are declared by a key spec set at load and, for the
        // cluster routing and ACL checks of servers that use only the legacy positions, by the
        // command itself when asked (getkeys-api).
        ["ratelimit.allowall", counted!(commands::allowall::run), "write deny-oom getkeys-api", 0, 0, 0, ""],
        ["ratelimit.config", counted!(commands::config::run), "readonly fast", 1, 1, 1, ""],
        ["ratelimit.available", counted!(commands::available::run), "readonly", 1, 1, 1, ""],
        ["ratelimit.release", counted!(commands::release::run), "write deny-oom", 1, 1, 1, ""],
        ["ratelimit.delete", counted!(commands::delete::run), "write", 1, 1, 1, ""],
        ["ratelimit.expire", counted!(commands::expire::run), "write fast", 1, 1, 1, ""],
        ["ratelimit.persist", counted!(commands::persist::run), "write fast", 1, 1, 1, ""],
    ],
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn load_options() {
        assert_eq!(LoadOptions::parse(&[]), Ok(LoadOptions::default()));
        assert!(
            LoadOptions::parse(&[b"debug-commands", b"YES"])
                .unwrap()
                .debug_commands
        );
        assert!(
            !LoadOptions::parse(&[b"debug-commands", b"no"])
                .unwrap()
                .debug_commands
        );
        assert!(LoadOptions::parse(&[b"debug-commands", b"maybe"]).is_err());
        assert!(LoadOptions::parse(&[b"debug-commands"]).is_err());
        assert!(LoadOptions::parse(&[b"verbose", b"yes"]).is_err());
    }
}
