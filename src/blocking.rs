//! Serving the clients blocked in RATELIMIT.ACQUIRE.
//!
//! No polling: each queue has one timer, set for the moment its head's permits are free again.
//! Anything that may free permits earlier nudges the queue with a 0 ms timer: RELEASE, SETRATE,
//! DELETE and EXPIRE, the debug clock's ADVANCE, keyspace events on the limiter's keys (a
//! Redisson client's release, a DEL) and FLUSHALL/FLUSHDB. A grant runs `Limiter::try_acquire`
//! for the head, so it is applied and replicated as effects exactly like a TRYACQUIRE.
//!
//! The server may pause writes (CLIENT PAUSE WRITE|ALL, FAILOVER, CLUSTER FAILOVER, SHUTDOWN
//! waiting for replicas) while timers keep firing; a write then would abort the server. So a
//! queue is served only while writes are allowed: during a pause its timer retries every
//! [`PAUSED_RETRY_MS`], and a server that has become a replica fails its waiters instead.
//!
//! Every blocked client is unblocked exactly once: by a grant or an error, by its TIMEOUT timer,
//! by CLIENT UNBLOCK (the timeout callback) or by its disconnection, whichever removes it from
//! the queue first; the others find it gone and do nothing.

use std::os::raw::{c_char, c_int, c_void};
use std::ptr;
use std::sync::atomic::{AtomicBool, Ordering};

use redis_module::{raw, Context, ContextFlags, RedisError, RedisResult, RedisString, RedisValue};

use crate::clock;
use crate::config_cache;
use crate::error::Error;
use crate::key::{self, Read, Write};
use crate::limiter::Outcome;
use crate::queue::{self, QueueId, Removed, Request, TimerId, WaiterId};
use crate::stats;
use crate::store::{self, Creation, Limiter, Turn};

/// How often a queue whose time has come checks whether a write pause has ended.
const PAUSED_RETRY_MS: i64 = 10;

/// What a blocked client is finally told.
enum Served {
    Acquired,
    Wait(i64),
    Failed(String),
}

/// An ACQUIRE as parsed by `commands::acquire`.
pub struct Acquire<'a> {
    pub key: &'a [u8],
    pub permits: u32,
    /// 0 waits forever.
    pub timeout_ms: i64,
    pub client: Option<&'a [u8]>,
    /// Creates the limiter on first use.
    pub create: Option<Creation>,
}

/// ACQUIRE: acquire now, or block the caller in the limiter's queue.
pub fn acquire(ctx: &Context, request: &Acquire<'_>) -> RedisResult {
    let now = clock::now_ms();
    // A transaction or a script cannot block: there ACQUIRE answers as TRYACQUIRE does.
    let can_block = !ctx
        .get_flags()
        .intersects(ContextFlags::MULTI | ContextFlags::LUA | ContextFlags::DENY_BLOCKING);
    let turn = if can_block {
        Turn::Queueing
    } else {
        Turn::BehindWaiters
    };
    let limiter = Limiter::<Write>::open(ctx, request.key)?;
    let verdict = limiter.try_acquire(
        request.client,
        request.permits,
        now,
        turn,
        request.create.as_ref(),
    )?;
    let wait = match verdict.outcome {
        Outcome::Acquired => {
            stats::add(&stats::ACQUIRED);
            return Ok(RedisValue::Null);
        }
        Outcome::Wait(ms) => ms,
    };
    if !can_block {
        stats::add(&stats::REFUSED);
        return Ok(RedisValue::Integer(wait));
    }
    let (state, watched) = limiter.waiting_state(request.client)?;
    drop(limiter);
    // SAFETY: a command context; the callbacks below follow the blocked-client contract.
    let bc = unsafe {
        raw::RedisModule_BlockClient.map(|block| {
            block(
                ctx.ctx,
                Some(reply),
                Some(unblocked_by_command),
                Some(free_served),
                0,
            )
        })
    };
    let Some(bc) = bc.filter(|bc| !bc.is_null()) else {
        stats::add(&stats::REFUSED);
        return Ok(RedisValue::Integer(wait));
    };
    // SAFETY: a live blocked-client handle.
    unsafe {
        if let Some(set) = raw::RedisModule_SetDisconnectCallback {
            set(bc, Some(disconnected));
        }
    }
    let (queue, waiter, first) = queue::enqueue(
        state,
        watched,
        bc,
        Request {
            name: request.key.to_vec(),
            client: request.client.map(<[u8]>::to_vec),
            permits: request.permits,
        },
    );
    stats::add(&stats::WAITS);
    stats::add(&stats::BLOCKED_CLIENTS);
    if request.timeout_ms > 0 {
        if let Some(timer) = create_timer(ctx, request.timeout_ms, deadline_reached, waiter) {
            queue::set_deadline(waiter, timer);
        }
    }
    watch_keyspace(ctx);
    if first {
        schedule(ctx, queue, wait);
    }
    Ok(RedisValue::NoReply)
}

/// Something may have freed permits of limiter `name` (in the context's database).
pub fn nudge(ctx: &Context, name: &[u8]) {
    if queue::is_empty() {
        return;
    }
    for queue in queue::watching(store::selected_db(ctx), name) {
        schedule(ctx, queue, 0);
    }
}

/// The debug clock moved: let every queue check whether its time has come.
pub fn nudge_all(ctx: &Context) {
    for queue in queue::all() {
        schedule(ctx, queue, 0);
    }
}

/// Stops every timer, for module unload (refused anyway while clients are blocked).
pub fn stop_all_timers(ctx: &Context) {
    for timer in queue::timers() {
        stop_timer(ctx, timer);
    }
}

/// Forgets everything a previous load of the module left in its statics: a module unloaded and
/// loaded again may find its library still mapped, statics and all.
pub fn reset() {
    queue::reset();
    SUBSCRIBED.store(false, Ordering::Relaxed);
}

/// Sets the queue's wake-up `ms` from now. With the debug clock frozen, time moves only with
/// ADVANCE, which nudges every queue, so no timer is set for a later moment.
fn schedule(ctx: &Context, queue: QueueId, ms: i64) {
    let timer = if ms > 0 && clock::is_frozen() {
        None
    } else {
        create_timer(ctx, ms.max(0), wake, queue)
    };
    if let Some(previous) = queue::set_wake(queue, timer) {
        stop_timer(ctx, previous);
    }
}

/// Serves a queue from its head for as long as the head can be granted, if the server can
/// write now.
fn serve(ctx: &Context, queue: QueueId) {
    if ctx.get_flags().contains(ContextFlags::SLAVE) {
        // Only a master writes; a client blocked on a server that became a replica is told so.
        while let Some(removed) = queue::head(queue).and_then(|head| take(ctx, head.waiter)) {
            unblock(removed.bc, Served::Failed(READONLY.into()));
        }
        return;
    }
    if writes_paused() {
        // Whatever is due is served once the pause ends.
        if let Some(previous) =
            queue::set_wake(queue, create_timer(ctx, PAUSED_RETRY_MS, wake, queue))
        {
            stop_timer(ctx, previous);
        }
        return;
    }
    while let Some(head) = queue::head(queue) {
        select_db(ctx, head.db);
        let request = &head.request;
        let result = Limiter::<Write>::open_for_waiter(ctx, &request.name).and_then(|limiter| {
            limiter.try_acquire(
                request.client.as_deref(),
                request.permits,
                clock::now_ms(),
                Turn::FirstInLine,
                None,
            )
        });
        let served = match result.map(|verdict| verdict.outcome) {
            Ok(Outcome::Wait(ms)) => return schedule(ctx, queue, ms),
            Ok(Outcome::Acquired) => {
                stats::add(&stats::ACQUIRED);
                Served::Acquired
            }
            // Deleted or reconfigured under the waiter: it gets the error TRYACQUIRE would give.
            Err(e) => Served::Failed(e.to_string()),
        };
        if let Some(removed) = take(ctx, head.waiter) {
            unblock(removed.bc, served);
        }
    }
}

/// The error a waiter gets when its server is no longer a master.
const READONLY: &str = "READONLY You can't write against a read only replica.";

/// Whether the server pauses writes now (CLIENT PAUSE WRITE or ALL, FAILOVER, CLUSTER
/// FAILOVER, SHUTDOWN waiting for replicas): the module API's documented signal that background
/// work must not write, on every server this module supports.
fn writes_paused() -> bool {
    // SAFETY: AvoidReplicaTraffic takes no argument and only reads server state.
    unsafe { raw::RedisModule_AvoidReplicaTraffic.is_some_and(|f| f() != 0) }
}

/// Takes a waiter out of its queue and stops its timers. None if it was already gone.
fn take(ctx: &Context, waiter: WaiterId) -> Option<Removed> {
    let removed = queue::remove(waiter)?;
    for timer in removed.deadline.into_iter().chain(removed.emptied_wake) {
        stop_timer(ctx, timer);
    }
    stats::sub(&stats::BLOCKED_CLIENTS);
    Some(removed)
}

/// After a waiter left otherwise than by a grant: if it was first in line, the next may fit now.
fn after_leaving(ctx: &Context, removed: &Removed) {
    if removed.was_head && queue::exists(removed.queue) {
        schedule(ctx, removed.queue, 0);
    }
}

/// The wait hint a waiter that gives up is told.
fn hint_for(ctx: &Context, removed: &Removed) -> Served {
    select_db(ctx, removed.db);
    let request = &removed.request;
    let hint = Limiter::<Read>::open_for_waiter(ctx, &request.name).and_then(|limiter| {
        limiter.wait_hint(request.client.as_deref(), request.permits, clock::now_ms())
    });
    match hint {
        Ok(ms) => Served::Wait(ms),
        Err(e) => Served::Failed(e.to_string()),
    }
}

fn unblock(bc: queue::BlockedClient, served: Served) {
    let data = Box::into_raw(Box::new(served)).cast::<c_void>();
    // SAFETY: `bc` was removed from the queue just now, so this is its one and only unblock;
    // Redis hands `data` to `reply` and then to `free_served`.
    unsafe {
        if let Some(unblock) = raw::RedisModule_UnblockClient {
            unblock(bc, data);
        }
    }
}

// ---- callbacks: each runs on the main thread -------------------------------------------------

/// A queue's wake-up timer.
extern "C" fn wake(ctx: *mut raw::RedisModuleCtx, data: *mut c_void) {
    let ctx = Context::new(ctx);
    let queue = data as usize as QueueId;
    // This timer has fired: forget it rather than stop it.
    queue::set_wake(queue, None);
    serve(&ctx, queue);
}

/// A waiter's TIMEOUT ran out before its permits were granted.
extern "C" fn deadline_reached(ctx: *mut raw::RedisModuleCtx, data: *mut c_void) {
    let ctx = Context::new(ctx);
    let waiter = data as usize as WaiterId;
    let Some(mut removed) = queue::remove(waiter) else {
        return;
    };
    // This deadline timer has fired; only a wake timer of an emptied queue is left to stop.
    if let Some(timer) = removed.emptied_wake.take() {
        stop_timer(&ctx, timer);
    }
    stats::sub(&stats::BLOCKED_CLIENTS);
    stats::add(&stats::TIMEOUTS);
    unblock(removed.bc, hint_for(&ctx, &removed));
    after_leaving(&ctx, &removed);
}

/// Redis's timeout callback: reached only through CLIENT UNBLOCK, since ACQUIRE blocks without
/// a Redis-side timeout (its TIMEOUT is a module timer, precise to the millisecond).
unsafe extern "C" fn unblocked_by_command(
    ctx: *mut raw::RedisModuleCtx,
    _argv: *mut *mut raw::RedisModuleString,
    _argc: c_int,
) -> c_int {
    let context = Context::new(ctx);
    // SAFETY: a blocked-client context, whose handle Redis gives back.
    let bc = unsafe { raw::RedisModule_GetBlockedClientHandle.map_or(ptr::null_mut(), |f| f(ctx)) };
    let removed = queue::waiter_of(bc).and_then(|waiter| take(&context, waiter));
    let Some(removed) = removed else {
        return context.reply(Err(RedisError::Str("ERR the request was already served"))) as c_int;
    };
    let result = match hint_for(&context, &removed) {
        Served::Wait(ms) => Ok(RedisValue::Integer(ms)),
        Served::Acquired => Ok(RedisValue::Null),
        Served::Failed(message) => Err(RedisError::String(message)),
    };
    let status = context.reply(stats::counted(result));
    // SAFETY: taken from the queue just now, so unblocked exactly once.
    unsafe {
        if let Some(unblock) = raw::RedisModule_UnblockClient {
            unblock(removed.bc, ptr::null_mut());
        }
    }
    after_leaving(&context, &removed);
    status as c_int
}

/// The client disconnected while waiting: it leaves nothing behind.
unsafe extern "C" fn disconnected(
    ctx: *mut raw::RedisModuleCtx,
    bc: *mut raw::RedisModuleBlockedClient,
) {
    let context = Context::new(ctx);
    let Some(removed) = queue::waiter_of(bc).and_then(|waiter| take(&context, waiter)) else {
        // Already granted or timed out, and unblocked then.
        return;
    };
    // SAFETY: taken from the queue just now, so unblocked exactly once.
    unsafe {
        if let Some(unblock) = raw::RedisModule_UnblockClient {
            unblock(removed.bc, ptr::null_mut());
        }
    }
    after_leaving(&context, &removed);
}

/// Sends a served waiter its reply.
unsafe extern "C" fn reply(
    ctx: *mut raw::RedisModuleCtx,
    _argv: *mut *mut raw::RedisModuleString,
    _argc: c_int,
) -> c_int {
    let context = Context::new(ctx);
    // SAFETY: the private data is the Box<Served> given to UnblockClient, still owned by Redis.
    let served = unsafe {
        raw::RedisModule_GetBlockedClientPrivateData
            .map_or(ptr::null_mut(), |f| f(ctx))
            .cast::<Served>()
            .as_ref()
    };
    let result = match served {
        Some(Served::Acquired) => Ok(RedisValue::Null),
        Some(Served::Wait(ms)) => Ok(RedisValue::Integer(*ms)),
        Some(Served::Failed(message)) => Err(RedisError::String(message.clone())),
        None => Err(Error::Debug("no reply for the blocked client").into()),
    };
    context.reply(stats::counted(result)) as c_int
}

unsafe extern "C" fn free_served(_ctx: *mut raw::RedisModuleCtx, data: *mut c_void) {
    if !data.is_null() {
        // SAFETY: created by Box::into_raw in `unblock`, freed once here.
        drop(unsafe { Box::from_raw(data.cast::<Served>()) });
    }
}

/// A write to some key: if it is a key a queue watches, that queue may be servable now.
/// Writing is not allowed here, so it only sets a 0 ms timer.
unsafe extern "C" fn keyspace_event(
    ctx: *mut raw::RedisModuleCtx,
    _type: c_int,
    _event: *const c_char,
    key: *mut raw::RedisModuleString,
) -> c_int {
    // The module's own writes free nothing it does not already know of.
    if queue::is_empty() || key.is_null() || key::is_own_event() {
        return raw::REDISMODULE_OK as c_int;
    }
    let context = Context::new(ctx);
    let name = RedisString::string_as_slice(key);
    for queue in queue::watching(store::selected_db(&context), name) {
        schedule(&context, queue, 0);
    }
    raw::REDISMODULE_OK as c_int
}

/// Whether this load of the module has subscribed to keyspace and server events.
static SUBSCRIBED: AtomicBool = AtomicBool::new(false);

/// Subscribes to keyspace events the first time a client blocks, so a server that never uses
/// ACQUIRE pays nothing for them.
fn watch_keyspace(ctx: &Context) {
    if SUBSCRIBED.swap(true, Ordering::Relaxed) {
        return;
    }
    let types = raw::REDISMODULE_NOTIFY_GENERIC
        | raw::REDISMODULE_NOTIFY_STRING
        | raw::REDISMODULE_NOTIFY_HASH
        | raw::REDISMODULE_NOTIFY_ZSET
        | raw::REDISMODULE_NOTIFY_EXPIRED
        | raw::REDISMODULE_NOTIFY_EVICTED;
    // SAFETY: a module context; the callback only reads and sets timers.
    unsafe {
        if let Some(subscribe) = raw::RedisModule_SubscribeToKeyspaceEvents {
            subscribe(ctx.ctx, types, Some(keyspace_event));
        }
    }
}

/// Subscribes at load to the server events that change whole databases without a per-key
/// event: they forget every kept configuration and wake every waiter. They are rare, so every
/// server pays nothing for them. An event the server does not know is refused, harmlessly.
pub fn watch_server_events(ctx: &Context) {
    let events: [(u64, Callback); 5] = [
        (raw::REDISMODULE_EVENT_FLUSHDB, flushed),
        // SWAPDB exchanges whole databases.
        (raw::REDISMODULE_EVENT_SWAPDB, swapped),
        // A dataset loaded (DEBUG RELOAD, a replica's full sync), or swapped in by an
        // asynchronous load, or keys trimmed after a slot migration (Redis 8.2+).
        (raw::REDISMODULE_EVENT_LOADING, replaced),
        (raw::REDISMODULE_EVENT_REPL_ASYNC_LOAD, replaced),
        (raw::REDISMODULE_EVENT_CLUSTER_SLOT_MIGRATION_TRIM, replaced),
    ];
    for (id, callback) in events {
        let event = raw::RedisModuleEvent { id, dataver: 1 };
        // SAFETY: a module context at load; the callbacks only forget and set timers.
        unsafe {
            if let Some(subscribe) = raw::RedisModule_SubscribeToServerEvent {
                subscribe(ctx.ctx, event, Some(callback));
            }
        }
    }
}

/// A server event callback.
type Callback =
    unsafe extern "C" fn(*mut raw::RedisModuleCtx, raw::RedisModuleEvent, u64, *mut c_void);

/// Keys were replaced without a per-key event: what was kept of their configurations is not
/// known to hold any more.
unsafe extern "C" fn replaced(
    _ctx: *mut raw::RedisModuleCtx,
    _event: raw::RedisModuleEvent,
    _subevent: u64,
    _data: *mut c_void,
) {
    config_cache::forget_all();
}

/// A FLUSHALL or FLUSHDB finished: every waiter's limiter may be gone.
unsafe extern "C" fn flushed(
    ctx: *mut raw::RedisModuleCtx,
    _event: raw::RedisModuleEvent,
    subevent: u64,
    _data: *mut c_void,
) {
    config_cache::forget_all();
    if subevent == raw::REDISMODULE_SUBEVENT_FLUSHDB_END {
        nudge_all(&Context::new(ctx));
    }
}

/// A SWAPDB: the waiters of both databases may find another limiter, or none, under their name.
unsafe extern "C" fn swapped(
    ctx: *mut raw::RedisModuleCtx,
    _event: raw::RedisModuleEvent,
    _subevent: u64,
    _data: *mut c_void,
) {
    config_cache::forget_all();
    nudge_all(&Context::new(ctx));
}

fn select_db(ctx: &Context, db: i32) {
    // SAFETY: SelectDb on a module context.
    unsafe {
        if let Some(select) = raw::RedisModule_SelectDb {
            select(ctx.ctx, db);
        }
    }
}

/// A module timer carrying a plain id, so there is nothing to free when it is stopped.
fn create_timer(
    ctx: &Context,
    ms: i64,
    callback: extern "C" fn(*mut raw::RedisModuleCtx, *mut c_void),
    id: u64,
) -> Option<TimerId> {
    // SAFETY: CreateTimer copies the pointer-sized id; it is never dereferenced.
    unsafe {
        raw::RedisModule_CreateTimer
            .map(|create| create(ctx.ctx, ms, Some(callback), id as usize as *mut c_void))
    }
}

fn stop_timer(ctx: &Context, timer: TimerId) {
    let mut data: *mut c_void = ptr::null_mut();
    // SAFETY: stopping an unknown or fired timer just returns an error.
    unsafe {
        if let Some(stop) = raw::RedisModule_StopTimer {
            stop(ctx.ctx, timer, &mut data);
        }
    }
}
