//! ratelimit: Redisson's `RRateLimiter` as native Redis commands. This file: the load options,
//! who listens to which events, and the registration of every command.
//!
//! Layers, each importing only the ones below it:
//! 1. `lib.rs`: registration (each command created from its `commands::*::DOC`); `globals`:
//!    the rule the module's state is kept by, and the one reset a load runs; under
//!    `--cfg fuzzing` or in tests, `fuzzing` and `replay` (commands parsed, then run by the
//!    store on its in-memory dataset).
//! 2. `commands/`: a file per command: parse, call the store (or `tat`), shape the reply.
//! 3. `blocking/`: the clients blocked in ACQUIRE: blocking, serving the queues, the pause
//!    rule, CANCEL.
//! 4. `store/`: a limiter's keys: open and check them, resolve a request once (configuration,
//!    state, identity), apply the sliding log's plans with the TTL rule; it knows nothing of
//!    waiters (the permits they wait for are handed to it). `tat`: a GCRA drop-in's key.
//!    `migration`: the slot-migration checks of cluster mode.
//! 5. `config_cache/` (configurations kept between calls), `events` (the one owner of event
//!    subscriptions: the others register listeners with it at load and it imports none of
//!    them), `queue` (the waiters' bookkeeping), `tickets` (the table of tickets' fates),
//!    `evictions`, `stats` (INFO, and the one place a decision is counted) and `observe`
//!    (the counting per group and the most-refused sketch, which `stats` feeds).
//! 6. `key`: typed key access; `Key::apply` is the one place writes are made, replicated and
//!    notified.
//! 7. `clock` (the module's clock over the server's), `error` (every error and its text, as a
//!    `RedisError` too), `args` (the commands' argument grammar, failing with `error`'s values).
//! 8. `ffi/`: the server's C API behind small safe functions, and the callbacks the server
//!    calls, which reach up through traits their callers implement: the one module with unsafe
//!    code, importing none of the others.
//!
//! Under them all, the crate `ratelimit-core` (core/): the code that knows nothing of Redis,
//! used here under the paths it had as modules of this crate (`crate::sliding_log`):
//! `sliding_log`, `packed_log` (and `last_decoded`, a state kept decoded), `gcra`,
//! `keyspace` (names, member bytes, a state's identity),
//! `number` (through `args`) and the sketches of `observe`. The fuzz target reaches this crate
//! through `fuzzing` alone, under `--cfg fuzzing`; every other module is private, so the
//! compiler sees dead code.

// Unsafe code lives in `ffi` alone, where every block says why it is sound.
#![deny(unsafe_code)]

mod args;
mod blocking;
mod clock;
mod commands;
mod config_cache;
mod error;
mod events;
mod evictions;
#[allow(unsafe_code)]
mod ffi;
mod globals;
mod key;
mod migration;
mod observe;
mod queue;
mod stats;
mod store;
mod tat;
mod tickets;

/// The fuzz targets' one way in (fuzz/): every command's parser on arbitrary arguments, and
/// whole store jobs on an in-memory dataset.
#[cfg(fuzzing)]
pub mod fuzzing;
/// Scripts of whole commands run by the store on an in-memory dataset: for the store fuzz target
/// and a unit test. Above the commands, whose parsers it runs.
#[cfg(any(test, fuzzing))]
mod replay;

// The pure parts, from the core crate, under the paths the module has always used
// (`crate::sliding_log::Config`).
use ratelimit_core::{gcra, keyspace, last_decoded, packed_log, sliding_log};

use std::ffi::CStr;
use std::sync::atomic::{AtomicBool, Ordering};

use commands::doc::{Doc, Keys};
use ffi::command::Handler;
use redis_module::{redis_module, Context, RedisString, Status};

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

/// A step of a command's registration, after its creation.
type Step = fn(&Context, &Doc) -> Status;

/// The server's handler for a command's `run`; its error replies are counted in `INFO ratelimit`.
macro_rules! handler {
    ($run:path) => {
        ffi::command::handler!($run, stats::counted)
    };
}

/// Options given after the module path in `loadmodule`.
#[derive(Debug, PartialEq, Eq)]
struct LoadOptions {
    debug_commands: bool,
    /// The config cache: keep limiters' configurations between calls (docs/operations.md).
    config_cache: bool,
    /// Counters per group and the most-refused names (docs/observability.md).
    stats: bool,
    group_separator: Vec<u8>,
    group_depth: i64,
}

impl Default for LoadOptions {
    fn default() -> Self {
        LoadOptions {
            debug_commands: false,
            config_cache: true,
            stats: true,
            group_separator: b":".to_vec(),
            group_depth: 2,
        }
    }
}

impl LoadOptions {
    fn parse(args: &[&[u8]]) -> Result<Self, String> {
        let mut options = LoadOptions::default();
        for pair in args.chunks(2) {
            let (name, value) = match pair {
                [name, value] => (*name, *value),
                _ => (pair.first().copied().unwrap_or_default(), &b""[..]),
            };
            if pair.len() == 2 && name.eq_ignore_ascii_case(b"group-separator") {
                observe::valid_separator(value)?;
                options.group_separator = value.to_vec();
                continue;
            }
            if pair.len() == 2 && name.eq_ignore_ascii_case(b"group-depth") {
                options.group_depth = args::parse_i64(value)
                    .filter(|d| (1..=observe::MAX_DEPTH).contains(d))
                    .ok_or(format!("group-depth takes 1 to {}", observe::MAX_DEPTH))?;
                continue;
            }
            let setting = if name.eq_ignore_ascii_case(b"debug-commands") {
                &mut options.debug_commands
            } else if name.eq_ignore_ascii_case(b"config-cache") {
                &mut options.config_cache
            } else if name.eq_ignore_ascii_case(b"stats") {
                &mut options.stats
            } else {
                return Err(format!(
                    "unknown or incomplete load option '{}'; the options are: debug-commands yes|no, config-cache yes|no, stats yes|no, group-separator s, group-depth n",
                    error::Printable(name)
                ));
            };
            *setting = match &value.to_ascii_lowercase()[..] {
                b"yes" => true,
                b"no" => false,
                _ => return Err(format!("{} takes yes or no", error::Printable(name))),
            };
        }
        Ok(options)
    }
}

/// `ratelimit.config-cache yes|no` (default yes): keep limiters' configurations between calls.
/// Changeable at run time.
enum ConfigCacheSetting {}

impl ffi::config::BoolSetting for ConfigCacheSetting {
    const NAME: &'static CStr = c"config-cache";
    const IMMUTABLE: bool = false;
    fn get() -> bool {
        config_cache::on()
    }
    fn set(value: bool) {
        config_cache::turn(value);
    }
}

/// `ratelimit.stats yes|no` (default yes): count grants, refusals and near-limit grants per
/// group and the most-refused names. Changeable at run time.
enum Stats {}

impl ffi::config::BoolSetting for Stats {
    const NAME: &'static CStr = c"stats";
    const IMMUTABLE: bool = false;
    fn get() -> bool {
        observe::on()
    }
    fn set(value: bool) {
        stats::turn_counting(value);
    }
}

/// `ratelimit.group-separator` (default `:`): what a limiter's name is cut at for its group.
enum GroupSeparator {}

impl ffi::config::StringSetting for GroupSeparator {
    const NAME: &'static CStr = c"group-separator";
    fn get() -> Vec<u8> {
        observe::separator()
    }
    fn set(value: &[u8]) -> Result<(), String> {
        observe::set_separator(value)
    }
}

/// `ratelimit.group-depth` (default 2): how many parts of a name make its group.
enum GroupDepth {}

impl ffi::config::NumericSetting for GroupDepth {
    const NAME: &'static CStr = c"group-depth";
    const MIN: i64 = 1;
    const MAX: i64 = observe::MAX_DEPTH;
    fn get() -> i64 {
        i64::try_from(observe::depth()).unwrap_or(i64::MAX)
    }
    fn set(value: i64) -> Result<(), String> {
        observe::set_depth(value)
    }
}

/// `ratelimit.debug-commands yes|no` (default no): create RATELIMIT.DEBUG. Load time only: a
/// client must never be able to turn on a command that moves the clock.
enum DebugCommands {}

/// Whether this load has RATELIMIT.DEBUG (set by each load).
static DEBUG_COMMANDS: AtomicBool = AtomicBool::new(false);

impl ffi::config::BoolSetting for DebugCommands {
    const NAME: &'static CStr = c"debug-commands";
    const IMMUTABLE: bool = true;
    fn get() -> bool {
        DEBUG_COMMANDS.load(Ordering::Relaxed)
    }
    fn set(value: bool) {
        DEBUG_COMMANDS.store(value, Ordering::Relaxed);
    }
}

fn init(ctx: &Context, args: &[RedisString]) -> Status {
    let status = load(ctx, args);
    if status == Status::Err {
        // A failed load gets no deinit: what was kept with the detached context is freed here.
        free_detached();
    }
    status
}

fn load(ctx: &Context, args: &[RedisString]) -> Status {
    // MODULE UNLOAD may leave the library mapped: start from a clean slate, as a first load.
    globals::reset();
    let args: Vec<&[u8]> = args.iter().map(RedisString::as_slice).collect();
    let options = match LoadOptions::parse(&args) {
        Ok(options) => options,
        Err(message) => {
            ctx.log_warning(&format!("ratelimit: {message}"));
            return Status::Err;
        }
    };
    // Replicas and the AOF get the module's writes as plain commands, which the server replicates
    // only under their own names: one renamed (rename-command), they would silently miss the
    // writes made as it, and a failover would forget those grants.
    match key::unknown_replicated_commands(ctx) {
        Some(unknown) if !unknown.is_empty() => {
            ctx.log_warning(&format!(
                "ratelimit: not loaded: the module replicates its writes as {}, and this server \
                 does not know {} by that name (rename-command?)",
                key::REPLICATED_AS.join(", "),
                unknown.join(", ")
            ));
            return Status::Err;
        }
        Some(_) => {}
        None => ctx.log_warning(
            "ratelimit: COMMAND INFO did not answer: could not check that this server knows the \
             commands the module replicates its writes as",
        ),
    }
    store::init(ctx);
    if !key::init(ctx) {
        ctx.log_notice("ratelimit: a refusal signals its key modified (WATCH), as every write");
    }
    config_cache::turn(options.config_cache);
    ffi::filter::reset();
    if !ffi::detached::init(ctx) {
        ctx.log_warning(
            "ratelimit: no detached context: CONFIG RESETSTAT will not zero INFO ratelimit",
        );
    }
    if commands::FIELD_NAMES.make() < commands::FIELD_NAMES.len() {
        ctx.log_notice(
            "ratelimit: field names not made at load (ECHO renamed?): replies write them as \
             plain bulk strings (the same bytes, at more cost)",
        );
    }
    stats::turn_counting(options.stats);
    // Checked when parsed.
    let _ = observe::set_separator(&options.group_separator);
    let _ = observe::set_depth(options.group_depth);
    let separator = std::ffi::CString::new(options.group_separator.clone()).unwrap_or_default();
    // The load arguments are the configurations' defaults; redis.conf and MODULE LOADEX ...
    // CONFIG override them.
    DEBUG_COMMANDS.store(options.debug_commands, Ordering::Relaxed);
    let registered = ffi::config::register_bool::<ConfigCacheSetting>(ctx, options.config_cache)
        && ffi::config::register_bool::<DebugCommands>(ctx, options.debug_commands)
        && ffi::config::register_bool::<Stats>(ctx, options.stats)
        && ffi::config::register_string::<GroupSeparator>(ctx, &separator)
        && ffi::config::register_numeric::<GroupDepth>(ctx, options.group_depth);
    if registered && !ffi::config::load(ctx) {
        ctx.log_warning("ratelimit: a ratelimit.* configuration was refused");
        return Status::Err;
    }
    // RATELIMIT.DEBUG exists only with `debug-commands yes`.
    let debug = if DEBUG_COMMANDS.load(Ordering::Relaxed) {
        ctx.log_notice("ratelimit: debug commands enabled (RATELIMIT.DEBUG); not for production");
        Some(DEBUG)
    } else {
        None
    };
    if !events::init(ctx, &LISTENERS) {
        ctx.log_warning(
            "ratelimit: could not watch evictions: INFO ratelimit_evicted_keys stays 0",
        );
    }
    // Where the category exists already (a reload), commands are still put in it.
    let _ = commands::doc::add_category(ctx);
    for (doc, handler) in DROP_INS {
        // A name the server or a module loaded earlier already has (a Redis build with GCRA,
        // redis-cell's CL.THROTTLE) stays theirs; the module serves everything else.
        if create(ctx, doc, handler) == Status::Err {
            ctx.log_notice(&format!(
                "ratelimit: {} is already a command here (the server's or another module's): \
                 left to it, not registered",
                doc.name.to_string_lossy().to_uppercase()
            ));
            continue;
        }
        if commands::doc::categorize(ctx, doc) == Status::Err
            || commands::doc::describe(ctx, doc) == Status::Err
        {
            ctx.log_warning(&format!(
                "ratelimit: could not set the ACL categories or docs of {}",
                doc.name.to_string_lossy()
            ));
            return Status::Err;
        }
    }
    for (doc, handler) in COMMANDS.into_iter().chain(debug) {
        let steps: [(Step, &str); 2] = [
            (commands::doc::categorize, "ACL categories"),
            (commands::doc::describe, "docs"),
        ];
        if create(ctx, doc, handler) == Status::Err {
            ctx.log_warning(&format!(
                "ratelimit: could not create {}",
                doc.name.to_string_lossy()
            ));
            return Status::Err;
        }
        for (step, what) in steps {
            if step(ctx, doc) == Status::Err {
                ctx.log_warning(&format!(
                    "ratelimit: could not set the {what} of {}",
                    doc.name.to_string_lossy()
                ));
                return Status::Err;
            }
        }
    }
    // Replaces the crate's default (empty) INFO callback with ours.
    ffi::info::register::<stats::Report>(ctx);
    Status::Ok
}

fn deinit(ctx: &Context) -> Status {
    blocking::stop_all_timers(ctx);
    // The tickets, the config cache's strings and the counting's tables, given back to the
    // server now rather than at a next load.
    globals::reset();
    free_detached();
    Status::Ok
}

/// Frees the field names made at load, forgets the command filter, and frees the detached
/// context they were made with.
fn free_detached() {
    commands::FIELD_NAMES.free();
    ffi::filter::reset();
    ffi::detached::deinit();
}

/// Who hears which events (see [`events`]).
static LISTENERS: events::Listeners = events::Listeners {
    config_cache: events::Listener {
        key_event: config_cache::key_event,
        removed: config_cache::key_removed,
        dataset_changed: config_cache::dataset_changed,
    },
    waiters: events::Listener {
        key_event: blocking::key_written,
        removed: blocking::key_removed,
        dataset_changed: blocking::dataset_changed,
    },
    evicted: evictions::key_evicted,
};

/// Every command: its [`Doc`] (name, flags, ACL categories, key spec, arguments, docs: each
/// said once) and its handler.
const COMMANDS: [(&Doc, Handler); 16] = [
    (&commands::setrate::DOC, handler!(commands::setrate::run)),
    (
        &commands::tryacquire::DOC,
        handler!(commands::tryacquire::run),
    ),
    (&commands::acquire::DOC, handler!(commands::acquire::run)),
    (&commands::allow::DOC, handler!(commands::allow::run)),
    (&commands::allowall::DOC, handler!(commands::allowall::run)),
    (&commands::config::DOC, handler!(commands::config::run)),
    (
        &commands::available::DOC,
        handler!(commands::available::run),
    ),
    (&commands::peek::DOC, handler!(commands::peek::run)),
    (&commands::release::DOC, handler!(commands::release::run)),
    (&commands::cancel::DOC, handler!(commands::cancel::run)),
    (&commands::delete::DOC, handler!(commands::delete::run)),
    (&commands::expire::DOC, handler!(commands::expire::run)),
    (&commands::persist::DOC, handler!(commands::persist::run)),
    (
        &commands::gcraallow::DOC,
        handler!(commands::gcraallow::run),
    ),
    (&commands::stats::DOC, handler!(commands::stats::run)),
    (
        &commands::toprefused::DOC,
        handler!(commands::toprefused::run),
    ),
];

/// The GCRA drop-ins, under the names their users' clients send: each is skipped, not an error,
/// where the name is taken.
const DROP_INS: [(&Doc, Handler); 2] = [
    (&commands::throttle::DOC, handler!(commands::throttle::run)),
    (&commands::gcra::DOC, handler!(commands::gcra::run)),
];

/// RATELIMIT.DEBUG, created only with `debug-commands yes`.
const DEBUG: (&Doc, Handler) = (&commands::debug::DOC, handler!(commands::debug::run));

/// Creates a command from its doc. A command whose only key is argument 1 gets the legacy key
/// positions (1, 1, 1), which route it and check its key on every server; the others declare
/// their keys by key spec and, for servers that route module commands by legacy positions only,
/// by answering the server's keys-position requests (`getkeys-api` in their flags).
fn create(ctx: &Context, doc: &Doc, handler: Handler) -> Status {
    let positions = match doc.key {
        Keys::First(_) => (1, 1, 1),
        Keys::Numkeys(_) | Keys::None => (0, 0, 0),
    };
    ffi::command::create(ctx, doc.name, handler, doc.flags, positions)
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
        assert!(LoadOptions::parse(&[]).unwrap().config_cache);
        let both =
            LoadOptions::parse(&[b"config-cache", b"No", b"debug-commands", b"yes"]).unwrap();
        assert!(!both.config_cache && both.debug_commands);
        assert!(LoadOptions::parse(&[b"config-cache", b"off"]).is_err());
        assert!(LoadOptions::parse(&[b"debug-commands", b"maybe"]).is_err());
        assert!(LoadOptions::parse(&[b"debug-commands"]).is_err());
        assert!(LoadOptions::parse(&[b"verbose", b"yes"]).is_err());
    }
}
