//! Keyspace and server events.

use std::os::raw::{c_char, c_int, c_void};

use redis_module::{raw, Context, RedisString};

/// What the server calls for the events [`watch::<W>`](watch) subscribes to; implemented by the
/// layer that watches. Each runs on the main thread, where the module must not write.
pub(crate) trait Watcher {
    /// A keyspace event of the subscribed classes on `key`.
    fn key_event(ctx: &Context, key: &[u8]);
    /// A FLUSHALL or FLUSHDB has finished: keys went without a per-key event.
    fn flushed(ctx: &Context);
    /// A SWAPDB exchanged two databases, without a per-key event.
    fn swapped(ctx: &Context);
}

/// Subscribes `W` to the keyspace events of `classes` (`REDISMODULE_NOTIFY_*`), then to the
/// FLUSHDB and SWAPDB server events. Subscriptions last as long as the module is loaded, so call
/// this once per load.
pub(crate) fn watch<W: Watcher>(ctx: &Context, classes: c_int) {
    // SAFETY: a module context and callbacks of the signatures the server calls; the events are
    // static descriptions the server reads during the call.
    unsafe {
        if let Some(subscribe) = raw::RedisModule_SubscribeToKeyspaceEvents {
            subscribe(ctx.ctx, classes, Some(key_event::<W>));
        }
        if let Some(subscribe) = raw::RedisModule_SubscribeToServerEvent {
            let flush = raw::RedisModuleEvent {
                id: raw::REDISMODULE_EVENT_FLUSHDB,
                dataver: 1,
            };
            subscribe(ctx.ctx, flush, Some(flushed::<W>));
            let swap = raw::RedisModuleEvent {
                id: raw::REDISMODULE_EVENT_SWAPDB,
                dataver: 1,
            };
            subscribe(ctx.ctx, swap, Some(swapped::<W>));
        }
    }
}

/// The keyspace-event callback. Its return value is ignored by the server.
extern "C" fn key_event<W: Watcher>(
    ctx: *mut raw::RedisModuleCtx,
    _type: c_int,
    _event: *const c_char,
    key: *mut raw::RedisModuleString,
) -> c_int {
    if !key.is_null() {
        W::key_event(&Context::new(ctx), RedisString::string_as_slice(key));
    }
    raw::REDISMODULE_OK as c_int
}

/// The FLUSHDB server event: `W` hears of its end only, when the keys are gone.
extern "C" fn flushed<W: Watcher>(
    ctx: *mut raw::RedisModuleCtx,
    _event: raw::RedisModuleEvent,
    subevent: u64,
    _data: *mut c_void,
) {
    if subevent == raw::REDISMODULE_SUBEVENT_FLUSHDB_END {
        W::flushed(&Context::new(ctx));
    }
}

/// The SWAPDB server event.
extern "C" fn swapped<W: Watcher>(
    ctx: *mut raw::RedisModuleCtx,
    _event: raw::RedisModuleEvent,
    _subevent: u64,
    _data: *mut c_void,
) {
    W::swapped(&Context::new(ctx));
}
