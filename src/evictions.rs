//! Limiter keys the server evicts (a `maxmemory` policy other than `noeviction`): counted in
//! `INFO ratelimit` (`ratelimit_evicted_keys`), and the first one logged, so an operator learns
//! that limiters lose state (docs/operations.md, "Lost state").
//!
//! The events owner subscribes at load to the `evicted` keyspace events alone for it, which the
//! server fires only when it evicts: nothing else pays for them. The key is gone by then, so a value or
//! permits key is known by its name, and a hash by the state keys its name derives that are
//! still there.

use std::sync::atomic::{AtomicBool, Ordering};

use redis_module::Context;

use crate::key::{Key, Read};
use crate::keyspace::{self, StateKeys};
use crate::stats::{self, Stat};

/// A key was evicted (an [`events::KeyListener`](crate::events::KeyListener)): counted, and
/// the first one logged, if it was a limiter's.
pub fn key_evicted(ctx: &Context, _event: &[u8], key: &[u8]) {
    if !is_limiter_key(ctx, key) {
        return;
    }
    stats::add(Stat::EvictedKeys);
    if !LOGGED.swap(true, Ordering::Relaxed) {
        ctx.log_warning(&format!(
            "ratelimit: a limiter key was evicted ('{}'): with maxmemory, limiters lose state \
             and may admit more than their rate; use maxmemory-policy noeviction (INFO \
             ratelimit counts them in ratelimit_evicted_keys; logged once)",
            crate::error::Printable(key)
        ));
    }
}

/// Whether an evicted key was a limiter's: named as a value or permits key, or a hash whose
/// derived state keys are still there.
fn is_limiter_key(ctx: &Context, key: &[u8]) -> bool {
    if keyspace::is_state_key_name(key) {
        return true;
    }
    let state = StateKeys::overall(key);
    let derived_exists = [&*state.value, &*state.permits]
        .into_iter()
        .any(|name| Key::<Read>::open(ctx, name).exists());
    derived_exists
}

/// Whether the first eviction was logged (this load).
static LOGGED: AtomicBool = AtomicBool::new(false);

/// At load: the first eviction of this load is logged again (see [`crate::globals::reset`]).
pub(crate) fn reset() {
    LOGGED.store(false, Ordering::Relaxed);
}
