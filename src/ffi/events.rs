//! Subscribing to keyspace and server events, and the callbacks the server calls for them,
//! which reach the subscriber through the traits here.

use std::ffi::CStr;
use std::os::raw::{c_char, c_int, c_void};

use redis_module::{raw, Context, RedisString};

/// What the server calls for the keyspace events [`watch_keys::<W>`](watch_keys) subscribes to;
/// implemented by the layer that watches. It runs on the main thread, inside the command (or
/// expiry) that fired the event, where the module must not write.
pub(crate) trait KeyWatcher {
    /// An event named `event` (`hset`, `del`, `expired` ...) on `key`.
    fn key_event(ctx: &Context, event: &[u8], key: &[u8]);
}

/// Subscribes `W` to the keyspace events of `classes` (`REDISMODULE_NOTIFY_*`). A subscription
/// lasts as long as the module is loaded, so call this once per load. False if the server
/// refused.
pub(crate) fn watch_keys<W: KeyWatcher>(ctx: &Context, classes: c_int) -> bool {
    // SAFETY: a module context and a callback of the signature the server calls.
    unsafe {
        raw::RedisModule_SubscribeToKeyspaceEvents
            .map(|subscribe| subscribe(ctx.ctx, classes, Some(key_event::<W>)))
    }
    .is_some_and(|status| status == raw::REDISMODULE_OK as c_int)
}

/// The keyspace-event callback. Its return value is ignored by the server.
extern "C" fn key_event<W: KeyWatcher>(
    ctx: *mut raw::RedisModuleCtx,
    _type: c_int,
    event: *const c_char,
    key: *mut raw::RedisModuleString,
) -> c_int {
    if !key.is_null() && !event.is_null() {
        // SAFETY: the server passes the event's name as a C string, live during the call.
        let event = unsafe { CStr::from_ptr(event) };
        W::key_event(
            &Context::new(ctx),
            event.to_bytes(),
            RedisString::string_as_slice(key),
        );
    }
    raw::REDISMODULE_OK as c_int
}

/// What the server calls when keys change without a per-key event; implemented by the layer
/// that watches.
pub(crate) trait DatasetWatcher {
    /// Whole databases changed: a FLUSHALL or FLUSHDB finished, a SWAPDB, a dataset loaded
    /// (a restart's or DEBUG RELOAD's, a replica's full sync, an asynchronous replica load),
    /// or keys trimmed after a slot migration (Redis 8.2+).
    fn dataset_changed(ctx: &Context);
}

/// Subscribes `W` to the server events that change whole databases. They are rare, so
/// subscribing at load costs nothing; an event an older server does not know is refused,
/// harmlessly. Call once per load: a second subscription to an event replaces the first.
pub(crate) fn watch_datasets<W: DatasetWatcher>(ctx: &Context) {
    let events = [
        raw::REDISMODULE_EVENT_FLUSHDB,
        raw::REDISMODULE_EVENT_SWAPDB,
        raw::REDISMODULE_EVENT_LOADING,
        raw::REDISMODULE_EVENT_REPL_ASYNC_LOAD,
        raw::REDISMODULE_EVENT_CLUSTER_SLOT_MIGRATION_TRIM,
    ];
    for id in events {
        let event = raw::RedisModuleEvent { id, dataver: 1 };
        // SAFETY: a module context and a callback of the signature the server calls; the event
        // is a plain description the server reads during the call.
        unsafe {
            if let Some(subscribe) = raw::RedisModule_SubscribeToServerEvent {
                subscribe(ctx.ctx, event, Some(dataset_event::<W>));
            }
        }
    }
}

/// The server-event callback. A flush is reported when it has ended, when the keys are gone.
extern "C" fn dataset_event<W: DatasetWatcher>(
    ctx: *mut raw::RedisModuleCtx,
    event: raw::RedisModuleEvent,
    subevent: u64,
    _data: *mut c_void,
) {
    if event.id == raw::REDISMODULE_EVENT_FLUSHDB
        && subevent != raw::REDISMODULE_SUBEVENT_FLUSHDB_END
    {
        return;
    }
    W::dataset_changed(&Context::new(ctx));
}

/// What the server calls when a key leaves the keyspace (deleted, expired, evicted, or
/// overwritten by a key of any type); implemented by the layer that watches.
pub(crate) trait RemovalWatcher {
    fn key_removed(ctx: &Context, db: i32, key: &[u8]);
}

/// Subscribes `W` to the removal of every key (the KEY server event, Redis 7.2+ and Valkey).
/// The server runs it with a context of its own: unlike a keyspace event's, it never touches the
/// client running the command (Valkey 8.1 leaves that client in the event's database after a
/// keyspace event on another one: MOVE, COPY ... DB). False where the server has no such event.
/// Call once per load: a second subscription replaces the first.
pub(crate) fn watch_removals<W: RemovalWatcher>(ctx: &Context) -> bool {
    let event = raw::RedisModuleEvent {
        id: raw::REDISMODULE_EVENT_KEY,
        dataver: 1,
    };
    // SAFETY: a module context and a callback of the signature the server calls; the event is a
    // plain description the server reads during the call.
    unsafe {
        raw::RedisModule_SubscribeToServerEvent
            .map(|subscribe| subscribe(ctx.ctx, event, Some(removed::<W>)))
    }
    .is_some_and(|status| status == raw::REDISMODULE_OK as c_int)
}

/// The KEY server event's callback.
extern "C" fn removed<W: RemovalWatcher>(
    ctx: *mut raw::RedisModuleCtx,
    _event: raw::RedisModuleEvent,
    _subevent: u64,
    data: *mut c_void,
) {
    let info = data.cast::<raw::RedisModuleKeyInfoV1>();
    if info.is_null() {
        return;
    }
    // SAFETY: for the KEY event the server passes a RedisModuleKeyInfoV1, live during the call.
    let key = unsafe { (*info).key };
    // SAFETY: the API pointers are written once, by RedisModule_Init at load.
    let (name_of, db_of) = unsafe {
        (
            raw::RedisModule_GetKeyNameFromModuleKey,
            raw::RedisModule_GetDbIdFromModuleKey,
        )
    };
    let (Some(name_of), Some(db_of)) = (name_of, db_of) else {
        return;
    };
    if key.is_null() {
        return;
    }
    // SAFETY: the event's open key, live during the call.
    let (name, db) = unsafe { (name_of(key), db_of(key)) };
    if name.is_null() {
        return;
    }
    W::key_removed(&Context::new(ctx), db, RedisString::string_as_slice(name));
}
