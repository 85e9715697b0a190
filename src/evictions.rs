//! Limiter keys the server evicts (a `maxmemory` policy other than `noeviction`): counted in
//! `INFO ratelimit` (`ratelimit_evicted_keys`), and the first one logged, so an operator learns
//! that limiters lose state (docs/operations.md, "Lost state").
//!
//! The module subscribes at load to the `evicted` keyspace events alone, which the server fires
//! only when it evicts: nothing else pays for them. The key is gone by then, so a value or
//! permits key is known by its name, and a hash by the state keys its name derives that are
//! still there.

use std::sync::atomic::{AtomicBool, Ordering};

use redis_module::{raw, Context};

use crate::ffi::events::{self, KeyWatcher};
use crate::key::{Key, Read};
use crate::keyspace::{self, StateKeys};
use crate::stats;

enum Evictions {}

impl KeyWatcher for Evictions {
    fn key_event(ctx: &Context, _event: &[u8], key: &[u8]) {
        if !is_limiter_key(ctx, key) {
            return;
        }
        stats::add(&stats::EVICTED_KEYS);
        if !LOGGED.swap(true, Ordering::Relaxed) {
            ctx.log_warning(&format!(
                "ratelimit: a limiter key was evicted ('{}'): with maxmemory, limiters lose state \
                 and may admit more than their rate; use maxmemory-policy noeviction (INFO \
                 ratelimit counts them in ratelimit_evicted_keys; logged once)",
                crate::error::Printable(key)
            ));
        }
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

/// At load: subscribes to evictions. False if the server refused.
pub fn watch(ctx: &Context) -> bool {
    LOGGED.store(false, Ordering::Relaxed);
    events::watch_keys::<Evictions>(ctx, raw::REDISMODULE_NOTIFY_EVICTED)
}
