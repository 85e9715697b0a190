//! The module's clock: the Redis server's milliseconds, or a frozen debug clock.
//!
//! Every command reads it once, so all callers of one server share one clock. The debug clock
//! exists only when the module was loaded with `debug-commands yes` (see `commands::debug`).

use std::sync::atomic::{AtomicI64, Ordering};

use crate::ffi::server;

/// Sentinel meaning "not frozen". No real unix-ms timestamp takes this value.
const REAL: i64 = i64::MIN;

static FROZEN_AT: AtomicI64 = AtomicI64::new(REAL);

/// Now, in unix milliseconds.
pub fn now_ms() -> i64 {
    match FROZEN_AT.load(Ordering::Relaxed) {
        REAL => server_ms(),
        frozen => frozen,
    }
}

/// The server's wall clock, regardless of the debug clock (TTLs always run on this one).
pub fn server_ms() -> i64 {
    server::milliseconds()
}

/// Whether the debug clock is frozen: then time moves only with ADVANCE.
pub fn is_frozen() -> bool {
    FROZEN_AT.load(Ordering::Relaxed) != REAL
}

pub fn freeze_at(ms: i64) {
    FROZEN_AT.store(ms, Ordering::Relaxed);
}

/// Moves a frozen clock forward; `None` if the clock is not frozen or would overflow.
pub fn advance(ms: i64) -> Option<i64> {
    let at = FROZEN_AT.load(Ordering::Relaxed);
    if at == REAL {
        return None;
    }
    let next = at.checked_add(ms)?;
    FROZEN_AT.store(next, Ordering::Relaxed);
    Some(next)
}

/// Back to the server's clock (also a fresh load's state; see [`crate::globals::reset`]).
pub fn unfreeze() {
    FROZEN_AT.store(REAL, Ordering::Relaxed);
}
