//! What `INFO ratelimit` reports: the version (section `ratelimit_module`) and the counters
//! (section `ratelimit_stats`).
//!
//! Commands run on Redis's main thread; atomics only make the statics safe to declare.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use redis_module::RedisResult;

use crate::config_cache;
use crate::ffi::info::{self, Info};
use crate::tickets;

/// Acquisitions granted (TRYACQUIRE, and ACQUIRE at once or after waiting). Counted where a
/// client's request is decided, never in the store, so the server re-checking a blocked
/// waiter counts nothing until the waiter is served.
pub static ACQUIRED: AtomicU64 = AtomicU64::new(0);
/// Requests answered with a wait hint: TRYACQUIRE, and ACQUIRE where it cannot block.
pub static REFUSED: AtomicU64 = AtomicU64::new(0);
/// Commands that replied with an error.
pub static ERRORS: AtomicU64 = AtomicU64::new(0);
/// Clients blocked in ACQUIRE right now.
pub static BLOCKED_CLIENTS: AtomicU64 = AtomicU64::new(0);
/// ACQUIRE calls that blocked, ever.
pub static WAITS: AtomicU64 = AtomicU64::new(0);
/// ACQUIRE calls whose TIMEOUT ran out before their permits were granted.
pub static TIMEOUTS: AtomicU64 = AtomicU64::new(0);
/// RATELIMIT.CANCEL calls that ended a wait or gave a grant back.
pub static CANCELS: AtomicU64 = AtomicU64::new(0);
/// Keys of limiters the server evicted (maxmemory), ever.
pub static EVICTED_KEYS: AtomicU64 = AtomicU64::new(0);

/// Zeroes every counter (a fresh load of the module).
pub fn reset() {
    for counter in [
        &ACQUIRED,
        &REFUSED,
        &ERRORS,
        &BLOCKED_CLIENTS,
        &WAITS,
        &TIMEOUTS,
        &CANCELS,
        &EVICTED_KEYS,
    ] {
        counter.store(0, Relaxed);
    }
}

pub fn add(counter: &AtomicU64) {
    counter.fetch_add(1, Relaxed);
}

pub fn sub(counter: &AtomicU64) {
    let _ = counter.fetch_update(Relaxed, Relaxed, |n| n.checked_sub(1));
}

/// Counts a command's error reply, and passes the result through.
pub fn counted(result: RedisResult) -> RedisResult {
    if result.is_err() {
        add(&ERRORS);
    }
    result
}

/// The INFO report, registered at load: the module's version (Cargo.toml's, as `MODULE LIST`
/// and the release artifacts carry it) in `ratelimit_module`, then the counters.
pub struct Report;

impl info::Report for Report {
    fn report(info: &mut Info) {
        if info.section("module") {
            info.text("version", env!("CARGO_PKG_VERSION"));
        }
        if !info.section("stats") {
            return;
        }
        for (name, counter) in [
            ("acquired", &ACQUIRED),
            ("refused", &REFUSED),
            ("errors", &ERRORS),
            ("blocked_clients", &BLOCKED_CLIENTS),
            ("waits", &WAITS),
            ("timeouts", &TIMEOUTS),
            ("cancels", &CANCELS),
            ("evicted_keys", &EVICTED_KEYS),
        ] {
            info.count(name, counter.load(Relaxed));
        }
        // The tickets of ACQUIRE calls remembered for a resend or a CANCEL.
        info.count("tickets", u64::try_from(tickets::len()).unwrap_or(u64::MAX));
        let kept = u64::try_from(config_cache::kept()).unwrap_or(u64::MAX);
        info.count("configs_kept", kept);
        // 1 while calls come back to few enough limiters for the config cache to pay.
        info.count("configs_in_use", u64::from(config_cache::in_use()));
    }
}
