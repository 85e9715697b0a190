//! TEMP

use std::os::raw::c_int;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Mutex, PoisonError};

use redis_module::{raw, Context, ContextFlags, RedisValue};

use super::open::CLUSTER;
use super::selected_db;
use crate::config_cache;
use crate::ffi::events::{self, KeyWatcher, RemovalWatcher};
use crate::key;
use crate::keyspace;

/// Whether this load of the module has subscribed to the keyspace events that forget a kept
/// configuration.
pub(super) static WATCHING_HASHES: AtomicBool = AtomicBool::new(false);

/// Subscribes, once per load, to the events that change a hash or remove a key, which forget
/// the configuration kept for it: before the first configuration is kept, so a server whose
/// limiters are never read twice pays nothing for them. False if configurations are not kept
/// (`config-cache no`) or the server refused.
pub(super) fn watch_hashes(ctx: &Context) -> bool {
    if !config_cache::on() {
        return false;
    }
    if WATCHING_HASHES.load(Ordering::Relaxed) {
        return true;
    }
    let mut classes = raw::REDISMODULE_NOTIFY_HASH;
    if !watch_removals(ctx) {
        // Redis 7.0 has no KEY event: keys leaving are seen through their keyspace events.
        classes |= raw::REDISMODULE_NOTIFY_GENERIC
            | raw::REDISMODULE_NOTIFY_EXPIRED
            | raw::REDISMODULE_NOTIFY_EVICTED;
    }
    let subscribed = events::watch_keys::<KeptConfigs>(ctx, classes as c_int);
    WATCHING_HASHES.store(subscribed, Ordering::Relaxed);
    subscribed
}

/// The fields of a limiter's configuration, as `HPTTL` takes them.
pub(super) const CONFIG_FIELDS: [&[u8]; 5] = [
    keyspace::FIELD_RATE.to_bytes(),
    keyspace::FIELD_INTERVAL.to_bytes(),
    keyspace::FIELD_TYPE.to_bytes(),
    keyspace::FIELD_KEEP_ALIVE.to_bytes(),
    keyspace::FIELD_PRECISION.to_bytes(),
];

/// How the module learns whether a hash field has a TTL of its own (HEXPIRE).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum FieldTtls {
    /// The server has no field TTLs.
    None,
    /// The server shows them to modules (Redis 8's HashFieldMinExpire).
    Shown,
    /// The server has them but does not show them (Redis 7.4, Valkey 9): `HPTTL` tells.
    Asked,
}

/// Asked once per load: the answer is the server's.
pub(super) fn field_ttls(ctx: &Context) -> FieldTtls {
    const NONE: u8 = 1;
    const SHOWN: u8 = 2;
    const ASKED: u8 = 3;
    match FIELD_TTLS.load(Ordering::Relaxed) {
        NONE => return FieldTtls::None,
        SHOWN => return FieldTtls::Shown,
        ASKED => return FieldTtls::Asked,
        _ => {}
    }
    let found = if key::shows_field_ttls() {
        FieldTtls::Shown
    } else {
        let reply = ctx.call("COMMAND", &["INFO", "HPTTL"]);
        let has_hpttl = matches!(reply, Ok(RedisValue::Array(items)) if items.iter().any(|item| *item != RedisValue::Null));
        if has_hpttl {
            FieldTtls::Asked
        } else {
            FieldTtls::None
        }
    };
    let code = match found {
        FieldTtls::None => NONE,
        FieldTtls::Shown => SHOWN,
        FieldTtls::Asked => ASKED,
    };
    FIELD_TTLS.store(code, Ordering::Relaxed);
    found
}

/// What [`field_ttls`] found: 0 while not asked yet this load, else its code.
pub(super) static FIELD_TTLS: AtomicU8 = AtomicU8::new(0);

/// Whether this load has subscribed to the removal of keys (the KEY server event).
pub(super) static WATCHING_REMOVALS: AtomicBool = AtomicBool::new(false);

/// What the waiters do when a key leaves (in a database): set by `blocking` at load.
pub type RemovalHook = fn(&Context, i32, &[u8]);

pub(super) static ON_REMOVAL: Mutex<Option<RemovalHook>> = Mutex::new(None);

/// Subscribes, once per load, to keys leaving the keyspace, for both the kept configurations
/// and the waiters (a server event has one callback per module; `hook` is what the waiters
/// do). False where the server has no KEY event (Redis 7.0): its callers then subscribe to the
/// keyspace events of keys as a whole instead.
pub fn watch_removals(ctx: &Context) -> bool {
    if WATCHING_REMOVALS.load(Ordering::Relaxed) {
        return true;
    }
    let subscribed = events::watch_removals::<KeptConfigs>(ctx);
    WATCHING_REMOVALS.store(subscribed, Ordering::Relaxed);
    subscribed
}

/// At load: notes whether the server is a cluster node and whether to keep configurations at
/// all, forgets what an earlier load of the module subscribed to and kept, and takes what the
/// waiters do when a key leaves.
pub fn init(ctx: &Context, on_removal: RemovalHook, keep_configs: bool) {
    config_cache::turn(keep_configs);
    CLUSTER.store(
        ctx.get_flags().contains(ContextFlags::CLUSTER),
        Ordering::Relaxed,
    );
    WATCHING_HASHES.store(false, Ordering::Relaxed);
    WATCHING_REMOVALS.store(false, Ordering::Relaxed);
    FIELD_TTLS.store(0, Ordering::Relaxed);
    *ON_REMOVAL.lock().unwrap_or_else(PoisonError::into_inner) = Some(on_removal);
    config_cache::reset();
}

/// The configurations kept in [`config_cache`], as a watcher of the keys they were read from.
pub(super) enum KeptConfigs {}

impl KeyWatcher for KeptConfigs {
    /// A key changed: the configuration kept for it, if it is a limiter's hash, is no longer
    /// known.
    fn key_event(ctx: &Context, event: &[u8], key: &[u8]) {
        if !config_cache::keeps_config(event) {
            config_cache::forget(selected_db(ctx), key);
        }
    }
}

impl RemovalWatcher for KeptConfigs {
    /// A key left: forget its configuration, and tell the waiters.
    fn key_removed(ctx: &Context, db: i32, key: &[u8]) {
        config_cache::forget(db, key);
        let hook = *ON_REMOVAL.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(hook) = hook {
            hook(ctx, db, key);
        }
    }
}
