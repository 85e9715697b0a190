//! What `INFO ratelimit` reports: the version (section `ratelimit_module`) and the counters
//! (section `ratelimit_stats`).
//!
//! The counters are plain numbers of the module's state, so atomics (see [`crate::globals`]).

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use redis_module::RedisResult;

use crate::clock;
use crate::config_cache;
use crate::ffi::info::{self, Info};
use crate::observe;
use crate::tickets;

/// A counter of `INFO ratelimit`'s `ratelimit_stats` section.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stat {
    /// Requests granted: TRYACQUIRE, ACQUIRE (at once or after waiting), ALLOW, ALLOWALL,
    /// CL.THROTTLE and GCRA. Counted by [`decided`] where a client's request is decided, never
    /// in the store, so the server re-checking a blocked waiter counts nothing until it is
    /// answered.
    Acquired,
    /// Requests refused (by [`decided`]): the same commands answered with a wait hint or
    /// limited at once. A blocked ACQUIRE answered with a wait hint counts in `timeouts` (or
    /// nowhere, after CANCEL or CLIENT UNBLOCK) as before, and as a refusal of its group.
    Refused,
    /// Commands that replied with an error.
    Errors,
    /// Clients blocked in ACQUIRE right now (a gauge).
    BlockedClients,
    /// ACQUIRE calls that blocked, ever.
    Waits,
    /// ACQUIRE calls whose TIMEOUT ran out before their permits were granted.
    Timeouts,
    /// RATELIMIT.CANCEL calls that ended a wait or gave a grant back.
    Cancels,
    /// Keys of limiters the server evicted (maxmemory), ever.
    EvictedKeys,
}

impl Stat {
    /// Every counter, in INFO's order, with its field name.
    const ALL: [(Stat, &'static str); 8] = [
        (Stat::Acquired, "acquired"),
        (Stat::Refused, "refused"),
        (Stat::Errors, "errors"),
        (Stat::BlockedClients, "blocked_clients"),
        (Stat::Waits, "waits"),
        (Stat::Timeouts, "timeouts"),
        (Stat::Cancels, "cancels"),
        (Stat::EvictedKeys, "evicted_keys"),
    ];
}

/// The counters, indexed by `Stat as usize`.
static COUNTS: [AtomicU64; 8] = [const { AtomicU64::new(0) }; 8];

/// The server's `total_commands_processed` + 1 when a CONFIG RESETSTAT was seen and not yet
/// checked, else 0; and its `total_connections_received` then (see [`ResetWatch`]).
static RESET_PENDING: AtomicU64 = AtomicU64::new(0);
static RESET_CONNECTIONS: AtomicU64 = AtomicU64::new(0);

/// A counter's value now.
pub fn get(counter: Stat) -> u64 {
    COUNTS[counter as usize].load(Relaxed)
}

pub fn add(counter: Stat) {
    COUNTS[counter as usize].fetch_add(1, Relaxed);
}

pub fn sub(counter: Stat) {
    let _ = COUNTS[counter as usize].fetch_update(Relaxed, Relaxed, |n| n.checked_sub(1));
}

/// What a deciding command decided for one limiter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Granted, leaving `remaining` of `limit` (what ALLOW replies).
    Granted { limit: i64, remaining: i64 },
    /// Refused at once: a wait hint, or a GCRA drop-in's limited.
    Refused,
    /// A blocked ACQUIRE answered with a wait hint (its TIMEOUT, CANCEL, CLIENT UNBLOCK): a
    /// refusal of its group; `INFO`'s `refused` keeps its meaning and leaves it out.
    WaitEnded,
}

/// The one place a request's decision is counted: in `acquired` or `refused` always, and per
/// group and in the most-refused sketch while `ratelimit.stats` is yes. Called once per request
/// answered (a blocked ACQUIRE when it is answered), never for one that fails.
pub fn decided(name: &[u8], decision: Decision) {
    match decision {
        Decision::Granted { limit, remaining } => {
            add(Stat::Acquired);
            observe::granted(name, limit, remaining);
        }
        Decision::Refused | Decision::WaitEnded => {
            if decision == Decision::Refused {
                add(Stat::Refused);
            }
            observe::refused(name, clock::now_ms);
        }
    }
}

/// CONFIG RESETSTAT: zeroes what Redis's own stats would (the counters of events, the groups,
/// the sketch), not the gauges (`blocked_clients`, `tickets`, the config cache's).
pub fn reset_stats() {
    for (counter, _) in Stat::ALL {
        if counter != Stat::BlockedClients {
            COUNTS[counter as usize].store(0, Relaxed);
        }
    }
    observe::reset_counts();
}

/// Zeroes every counter and forgets a CONFIG RESETSTAT not yet checked (a fresh load; see
/// [`crate::globals::reset`]).
pub(crate) fn reset() {
    for counter in &COUNTS {
        counter.store(0, Relaxed);
    }
    RESET_PENDING.store(0, Relaxed);
    RESET_CONNECTIONS.store(0, Relaxed);
}

/// Counts a command's error reply, and passes the result through.
pub fn counted(result: RedisResult) -> RedisResult {
    if result.is_err() {
        add(Stat::Errors);
    }
    result
}

/// The INFO report, registered at load: the module's version (Cargo.toml's, as `MODULE LIST`
/// and the release artifacts carry it) in `ratelimit_module`, the counters in
/// `ratelimit_stats`, then a line per group in `ratelimit_groups` (as Redis's `cmdstat_*`
/// lines). Each section is asked for on its own (`INFO ratelimit_groups`).
pub struct Report;

impl info::Report for Report {
    fn report(info: &mut Info) {
        if info.section("module") {
            info.text("version", env!("CARGO_PKG_VERSION"));
        }
        counters_info(info);
        groups_info(info);
    }
}

fn counters_info(info: &mut Info) {
    if !info.section("stats") {
        return;
    }
    for (counter, name) in Stat::ALL {
        info.count(name, get(counter));
    }
    // The gauges below read tables a crash may have come in the middle of changing (borrowed:
    // reading them would panic inside the crash report): left out of one.
    if info.for_crash_report() {
        return;
    }
    // The tickets of ACQUIRE calls remembered for a resend or a CANCEL.
    info.count("tickets", u64::try_from(tickets::len()).unwrap_or(u64::MAX));
    let kept = u64::try_from(config_cache::kept()).unwrap_or(u64::MAX);
    info.count("configs_kept", kept);
    // 1 while calls come back to few enough limiters for the config cache to pay.
    info.count("configs_in_use", u64::from(config_cache::in_use()));
}

/// `ratelimit_group_<name>:grants=..,refusals=..,near_limit=..` per group, then the overflow
/// group's line and `ratelimit_overflow_groups`. Left out of a crash report: the crash may have
/// come in the middle of counting, with the groups half updated.
fn groups_info(info: &mut Info) {
    if info.for_crash_report() || !info.section("groups") {
        return;
    }
    info.count("counting", u64::from(observe::on()));
    let snapshot = observe::snapshot();
    let overflow = (observe::groups::OVERFLOW.to_vec(), snapshot.overflow);
    for (name, counts) in snapshot.named.iter().chain(std::iter::once(&overflow)) {
        let field = format!("group_{}", observe::info_name(name));
        info.dict(
            &field,
            &[
                ("grants", counts.grants),
                ("refusals", counts.refusals),
                ("near_limit", counts.near_limit),
            ],
        );
    }
    info.count("overflow_groups", snapshot.overflow_groups);
}

/// Turns the counting per group and of the most-refused names on or off (`ratelimit.stats`),
/// and with it the watch for CONFIG RESETSTAT: a command filter costs the server about 140
/// instructions on every command it runs, ours or not, so it is there only while wanted.
pub fn turn_counting(on: bool) {
    observe::turn(on);
    if !crate::ffi::filter::watch::<ResetWatch>(on) {
        redis_module::logging::log_warning(
            "ratelimit: the command filter could not be changed: CONFIG RESETSTAT may not zero INFO ratelimit",
        );
    }
}

/// Watches for CONFIG RESETSTAT (a command filter: no server event tells a module of it).
/// The filter sees the command before the server checks it, so the counters are zeroed only
/// once the server's own stats show it ran: at the next command (not EXEC, which may be the
/// one running it), `total_commands_processed` or `total_connections_received` has dropped
/// below what it was before. The server zeroes both, then counts the RESETSTAT itself as one
/// command; so a RESETSTAT is missed only when nothing ran since the last one, when there is
/// nothing to zero (a refused RESETSTAT, as for a user without the right, is not counted).
pub enum ResetWatch {}

/// The server's commands processed and connections received, as INFO counts them.
fn server_counts() -> Option<(u64, u64)> {
    let [commands, connections] = crate::ffi::server::info_unsigned(
        c"stats",
        [c"total_commands_processed", c"total_connections_received"],
    )?;
    Some((commands, connections))
}

impl crate::ffi::filter::Filter for ResetWatch {
    fn command(command: &crate::ffi::filter::FilteredCommand) {
        let Some(name) = command.arg(0) else {
            return;
        };
        let pending = RESET_PENDING.load(Relaxed);
        if pending != 0 && !name.eq_ignore_ascii_case(b"exec") {
            RESET_PENDING.store(0, Relaxed);
            let connections = RESET_CONNECTIONS.load(Relaxed);
            if server_counts().is_some_and(|(c, n)| c < pending - 1 || n < connections) {
                reset_stats();
            }
        }
        if name.eq_ignore_ascii_case(b"config")
            && command
                .arg(1)
                .is_some_and(|arg| arg.eq_ignore_ascii_case(b"resetstat"))
        {
            if let Some((commands, connections)) = server_counts() {
                RESET_CONNECTIONS.store(connections, Relaxed);
                RESET_PENDING.store(commands.saturating_add(1), Relaxed);
            }
        }
    }
}
