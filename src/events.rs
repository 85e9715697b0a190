//! The one owner of the module's event subscriptions: it makes every subscription to keyspace
//! events and server events, and hands each event to the listeners registered at load (the
//! config cache, the waiters blocked in ACQUIRE, the eviction counter), without knowing them.
//!
//! | subscription | classes or event | made | listeners |
//! |---|---|---|---|
//! | config cache | hash events (+ generic, expired, evicted where the server has no KEY event) | when the first configuration is kept | [`Listeners::config_cache`] |
//! | waiters | string, hash and zset events (+ the same fallback) | when the first client blocks | [`Listeners::waiters`] |
//! | removals | the KEY server event (Redis 7.2+, Valkey) | with either of the above | config cache, then waiters |
//! | datasets | FLUSHALL/FLUSHDB, SWAPDB, loading, slot trims | at load | config cache, then waiters |
//! | evictions | evicted events | at load | [`Listeners::evicted`] |
//!
//! Keyspace subscriptions stay one per listener: the server filters each by its classes for
//! free, so a listener is never called for events it does not want (every string write would
//! otherwise reach the config cache). A server event has one callback per module: that one is
//! fanned out. Subscriptions made on demand are made once per load, so a server that never
//! keeps a configuration or blocks a client pays nothing for their events.

use std::os::raw::c_int;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

use redis_module::{raw, Context};

use crate::ffi::events::{self as server_events, DatasetWatcher, KeyWatcher, RemovalWatcher};

/// What a listener hears of one key: an event named `event` (`hset`, `del`, `expired` ...) on
/// `key`, in the context's selected database. It runs inside the command (or expiry) that fired
/// the event, where the module must not write.
pub type KeyListener = fn(ctx: &Context, event: &[u8], key: &[u8]);

/// A key left the keyspace in `db` (deleted, expired, evicted, or overwritten by a key of any
/// type).
pub type RemovalListener = fn(ctx: &Context, db: i32, key: &[u8]);

/// Whole databases changed at once (see [`DatasetWatcher`]).
pub type DatasetListener = fn(ctx: &Context);

/// What one listener of keys hears.
pub struct Listener {
    pub key_event: KeyListener,
    pub removed: RemovalListener,
    pub dataset_changed: DatasetListener,
}

/// Every listener, registered once at load by the module's entry point.
pub struct Listeners {
    pub config_cache: Listener,
    pub waiters: Listener,
    /// A limiter key may have been evicted (`maxmemory`).
    pub evicted: KeyListener,
}

/// The listeners registered. Set at the first load: a later load of the same library (after
/// MODULE UNLOAD, where the library stays mapped) registers the same functions, so the first
/// registration stands. Read on every event: one load, no lock.
static LISTENERS: OnceLock<&'static Listeners> = OnceLock::new();

/// Whether this load has subscribed, for the config cache, to the events of hashes.
static CONFIG_CACHE: AtomicBool = AtomicBool::new(false);
/// Whether this load has subscribed, for the waiters, to writes to keys.
static WAITERS: AtomicBool = AtomicBool::new(false);
/// Whether this load has subscribed to the removal of keys (the KEY server event).
static REMOVALS: AtomicBool = AtomicBool::new(false);

/// Nothing subscribed yet (a fresh load; see [`crate::globals::reset`]): the server drops a
/// module's subscriptions when it unloads it.
pub(crate) fn reset() {
    CONFIG_CACHE.store(false, Ordering::Relaxed);
    WAITERS.store(false, Ordering::Relaxed);
    REMOVALS.store(false, Ordering::Relaxed);
}

/// At load, after [`reset`]: registers the listeners, and subscribes to the server events of
/// whole databases and to evictions. False if the server refused evictions (the eviction
/// counter then stays 0).
pub fn init(ctx: &Context, listeners: &'static Listeners) -> bool {
    let _ = LISTENERS.set(listeners);
    server_events::watch_datasets::<Datasets>(ctx);
    server_events::watch_keys::<Evicted>(ctx, raw::REDISMODULE_NOTIFY_EVICTED as c_int)
}

/// Subscribes the config cache, once per load, to the events that change a hash or remove a
/// key. Called before the first configuration is kept. False if the server refused.
pub fn watch_for_config_cache(ctx: &Context) -> bool {
    if CONFIG_CACHE.load(Ordering::Relaxed) {
        return true;
    }
    let subscribed =
        watch_keys_and_removals::<ConfigCacheKeys>(ctx, raw::REDISMODULE_NOTIFY_HASH as c_int);
    CONFIG_CACHE.store(subscribed, Ordering::Relaxed);
    subscribed
}

/// Subscribes the waiters, once per load, to writes to keys and keys leaving. Called the first
/// time a client blocks.
pub fn watch_for_waiters(ctx: &Context) {
    if WAITERS.swap(true, Ordering::Relaxed) {
        return;
    }
    let classes = raw::REDISMODULE_NOTIFY_STRING
        | raw::REDISMODULE_NOTIFY_HASH
        | raw::REDISMODULE_NOTIFY_ZSET;
    watch_keys_and_removals::<WaitersKeys>(ctx, classes as c_int);
}

/// Subscribes `W` to the keyspace events of `classes`, and to keys leaving: the KEY server
/// event where the server has it (shared by every listener), else (Redis 7.0) the keyspace
/// events of keys as a whole.
fn watch_keys_and_removals<W: KeyWatcher>(ctx: &Context, mut classes: c_int) -> bool {
    if !watch_removals(ctx) {
        classes |= (raw::REDISMODULE_NOTIFY_GENERIC
            | raw::REDISMODULE_NOTIFY_EXPIRED
            | raw::REDISMODULE_NOTIFY_EVICTED) as c_int;
    }
    server_events::watch_keys::<W>(ctx, classes)
}

/// Subscribes, once per load, to keys leaving the keyspace. False where the server has no KEY
/// event.
fn watch_removals(ctx: &Context) -> bool {
    if REMOVALS.load(Ordering::Relaxed) {
        return true;
    }
    let subscribed = server_events::watch_removals::<Removals>(ctx);
    REMOVALS.store(subscribed, Ordering::Relaxed);
    subscribed
}

fn listeners() -> Option<&'static Listeners> {
    LISTENERS.get().copied()
}

/// The config cache's keyspace subscription.
enum ConfigCacheKeys {}

impl KeyWatcher for ConfigCacheKeys {
    fn key_event(ctx: &Context, event: &[u8], key: &[u8]) {
        if let Some(listeners) = listeners() {
            (listeners.config_cache.key_event)(ctx, event, key);
        }
    }
}

/// The waiters' keyspace subscription.
enum WaitersKeys {}

impl KeyWatcher for WaitersKeys {
    fn key_event(ctx: &Context, event: &[u8], key: &[u8]) {
        if let Some(listeners) = listeners() {
            (listeners.waiters.key_event)(ctx, event, key);
        }
    }
}

/// The eviction counter's keyspace subscription.
enum Evicted {}

impl KeyWatcher for Evicted {
    fn key_event(ctx: &Context, event: &[u8], key: &[u8]) {
        if let Some(listeners) = listeners() {
            (listeners.evicted)(ctx, event, key);
        }
    }
}

/// The KEY server event, fanned out: the config cache forgets, then the waiters look.
enum Removals {}

impl RemovalWatcher for Removals {
    fn key_removed(ctx: &Context, db: i32, key: &[u8]) {
        if let Some(listeners) = listeners() {
            (listeners.config_cache.removed)(ctx, db, key);
            (listeners.waiters.removed)(ctx, db, key);
        }
    }
}

/// The server events of whole databases, fanned out: the config cache forgets everything,
/// then the waiters look again.
enum Datasets {}

impl DatasetWatcher for Datasets {
    fn dataset_changed(ctx: &Context) {
        if let Some(listeners) = listeners() {
            (listeners.config_cache.dataset_changed)(ctx);
            (listeners.waiters.dataset_changed)(ctx);
        }
    }
}
