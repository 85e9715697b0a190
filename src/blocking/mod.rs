//! The clients blocked in RATELIMIT.ACQUIRE: blocking one, waking its queue, and each way a
//! waiter leaves it. Serving a queue is in `serve`, the pause rule in `pause`, CANCEL in
//! `cancel`, a ticket's waits in `ticketed`; what those three ask of the server is the `Host`
//! trait in `host` (the unit tests run them on a fake over the in-memory dataset, in `tests`).
//!
//! No polling: each queue has one timer, set for the moment its head's permits are free again.
//! Anything that may free permits earlier nudges the queue with a 0 ms timer: RELEASE, CANCEL,
//! SETRATE, DELETE and EXPIRE, the debug clock's ADVANCE, keyspace events on the limiter's keys
//! (a Redisson client's release, a DEL) and FLUSHALL/FLUSHDB.
//!
//! Every blocked client is unblocked exactly once: by a grant or an error, by its TIMEOUT timer,
//! by RATELIMIT.CANCEL of its ticket, by CLIENT UNBLOCK (the timeout callback) or by its
//! disconnection, whichever removes it from the queue first; the others find it gone and do
//! nothing.

mod cancel;
mod host;
mod pause;
mod serve;
mod ticketed;

pub(crate) use cancel::cancel;
pub use ticketed::remember_grant;

use std::any::Any;

use redis_module::{Context, ContextFlags, RedisError, RedisResult, RedisValue, Status};

use crate::error::Error;
use crate::events;
use crate::ffi::blocked::{self, BlockedClient, Blocker};
use crate::ffi::server;
use crate::ffi::timer::{self, Timer};
use crate::key::{self, OpenMode, Read};
use crate::keyspace::StateId;
use crate::queue::{self, QueueId, Removed, Request, WaiterId};
use crate::sliding_log::Config;
use crate::stats::{self, Decision, Stat};
use crate::store::{self, Resolved};
use crate::tickets::{self, Fate};
use host::Host;
use serve::serve;

/// What a blocked client is finally told.
#[derive(Debug, PartialEq)]
pub(crate) enum Served {
    Acquired,
    Wait(i64),
    Failed(String),
}

/// Whether the calling client may block: a transaction or a script cannot, and there ACQUIRE
/// answers as TRYACQUIRE does.
pub fn can_block(ctx: &Context) -> bool {
    !ctx.get_flags()
        .intersects(ContextFlags::MULTI | ContextFlags::LUA | ContextFlags::DENY_BLOCKING)
}

/// Permits the clients blocked in ACQUIRE on `resolved`'s state wait for, if any wait: what a
/// new request counts as taken (it is refused while they wait).
pub fn queued<M: OpenMode, D: store::Dataset>(resolved: &Resolved<'_, M, D>) -> Option<u64> {
    if queue::is_empty() {
        return None;
    }
    queue::queued_permits(resolved.id())
}

/// An ACQUIRE refused now that queues to wait for its turn.
pub struct Wait {
    /// The state it waits on and the keys whose writes may free its permits.
    pub state: StateId,
    pub watched: [Vec<u8>; 3],
    /// The configuration it was refused under, kept with its queue for serving when it may be
    /// (not one the request created, nor one with fields of their own TTL).
    pub config: Option<Config>,
    pub request: Request,
    /// 0 waits forever.
    pub timeout_ms: i64,
    /// The wait its refusal hinted at: when the queue's head is tried again, if it is the first.
    pub hint_ms: i64,
}

/// Blocks the caller in its state's queue. A client the server cannot block is refused with
/// the wait hint.
pub fn block(ctx: &Context, wait: Wait) -> RedisResult {
    let Some(bc) = blocked::block::<Waiters>(ctx) else {
        stats::decided(&wait.request.name, Decision::Refused);
        return Ok(RedisValue::Integer(wait.hint_ms));
    };
    let (queue, waiter, first) =
        queue::enqueue(wait.state, wait.watched, bc, wait.request, wait.config);
    stats::add(Stat::Waits);
    stats::add(Stat::BlockedClients);
    if wait.timeout_ms > 0 {
        if let Some(timer) = timer::start::<Deadline>(ctx, wait.timeout_ms, waiter) {
            queue::set_deadline(waiter, timer);
        }
    }
    // From the first client blocked on, writes to the watched keys and keys leaving.
    events::watch_for_waiters(ctx);
    if first {
        schedule(ctx, queue, wait.hint_ms);
    }
    Ok(RedisValue::NoReply)
}

/// The module's command may have freed permits of limiter `name` (in the context's database),
/// or changed it: its queues resolve it again (SETRATE and DELETE change it with the module's
/// own writes, which [`key_written`] leaves to this; RELEASE, CANCEL and EXPIRE, which change
/// no configuration, pay the same one read of the hash at the next serving), and are checked.
pub(crate) fn nudge<H: Host>(host: &H, name: &[u8]) {
    if queue::is_empty() {
        return;
    }
    for queue in queue::touched(host.selected_db(), name) {
        schedule(host, queue, 0);
    }
}

/// Whole databases changed (FLUSHALL, FLUSHDB, SWAPDB, a dataset loaded): the tickets' grants
/// may be gone, or another database's now, where a CANCEL must not take permits off entries
/// that are not theirs; so every ticket is forgotten (a CANCEL then gives nothing back: the
/// limiter admits less, never more). And every queue checks its limiter.
pub fn dataset_changed(ctx: &Context) {
    tickets::forget_all();
    queue::forget_all_resolved();
    nudge_all(ctx);
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
        timer::stop(ctx, timer);
    }
}

/// The waiters' and the tickets' rooms back to empty (see [`crate::globals::reset`]).
pub(crate) fn reset() {
    queue::reset();
    tickets::forget_all();
}

/// Sets the queue's wake-up `ms` from now. With the debug clock frozen, time moves only with
/// ADVANCE, which nudges every queue, so no timer is set for a later moment.
fn schedule<H: Host>(host: &H, queue: QueueId, ms: i64) {
    let timer = if ms > 0 && host.clock_frozen() {
        None
    } else {
        host.wake_in(ms.max(0), queue)
    };
    if let Some(previous) = queue::set_wake(queue, timer) {
        host.stop_timer(previous);
    }
}

/// Takes a waiter out of its queue and stops its timers. None if it was already gone.
fn take<H: Host>(host: &H, waiter: WaiterId) -> Option<Removed> {
    let removed = queue::remove(waiter)?;
    for timer in removed.deadline.into_iter().chain(removed.emptied_wake) {
        host.stop_timer(timer);
    }
    stats::sub(Stat::BlockedClients);
    Some(removed)
}

/// After a waiter left otherwise than by a grant: if it was first in line, the next may fit now.
fn after_leaving<H: Host>(host: &H, removed: &Removed) {
    if removed.was_head && queue::exists(removed.queue) {
        schedule(host, removed.queue, 0);
    }
}

/// What a waiter that leaves without a grant of its own is told: the wait hint, or nil if its
/// ticket was granted meanwhile to the same wait on another connection (it then takes nothing).
fn hint_for<H: Host>(host: &H, removed: &Removed) -> Served {
    host.select_db(removed.db);
    let request = &removed.request;
    let client = request.client.as_deref();
    let now = host.now_ms();
    let hint = host
        .limiter_for_waiter::<Read>(&request.name)
        .and_then(|limiter| {
            // Resolved once. Errors come in the order TRYACQUIRE gives them (the configuration,
            // the permits, the state), except that a ticket granted meanwhile answers nil whatever
            // the permits.
            let configuration = limiter.configuration(None)?;
            let mut resolved = None;
            if let Some(ticket) = &request.ticket {
                let found = limiter.resolve(configuration, client);
                if let Ok(on) = &found {
                    if let Some(Fate::Granted { .. }) = tickets::fate(ticket, on.id(), now) {
                        return Ok(None);
                    }
                }
                resolved = Some(found);
            }
            configuration.check_permits(request.permits)?;
            let resolved = match resolved {
                Some(found) => found?,
                None => limiter.resolve(configuration, client)?,
            };
            let queued = queued(&resolved).unwrap_or(0);
            resolved.wait_hint(request.permits, queued, now).map(Some)
        });
    match hint {
        Ok(Some(ms)) => {
            stats::decided(&request.name, Decision::WaitEnded);
            Served::Wait(ms)
        }
        Ok(None) => Served::Acquired,
        Err(e) => Served::Failed(e.to_string()),
    }
}

// ---- what the server calls back: each runs on the main thread --------------------------------

/// A queue's wake-up timer.
struct Wake;

impl Timer for Wake {
    fn fired(ctx: &Context, queue: QueueId) {
        // This timer has fired: forget it rather than stop it.
        queue::set_wake(queue, None);
        serve(ctx, queue);
    }
}

/// A waiter's TIMEOUT timer.
struct Deadline;

impl Timer for Deadline {
    /// The TIMEOUT ran out before the waiter's permits were granted.
    fn fired(ctx: &Context, waiter: WaiterId) {
        let Some(mut removed) = queue::remove(waiter) else {
            return;
        };
        // This deadline timer has fired; only a wake timer of an emptied queue is left to stop.
        if let Some(timer) = removed.emptied_wake.take() {
            timer::stop(ctx, timer);
        }
        stats::sub(Stat::BlockedClients);
        let served = hint_for(ctx, &removed);
        // A waiter whose ticket was granted meanwhile is answered as acquired: not a timeout.
        if matches!(served, Served::Wait(_)) {
            stats::add(Stat::Timeouts);
        }
        ctx.unblock(removed.bc, served);
        after_leaving(ctx, &removed);
    }
}

/// The clients blocked in ACQUIRE, and the writes that may let them through.
struct Waiters;

impl Blocker for Waiters {
    /// Sends a served waiter its reply.
    fn reply(ctx: &Context, outcome: Option<&dyn Any>) -> Status {
        let result = match outcome.and_then(<dyn Any>::downcast_ref::<Served>) {
            Some(Served::Acquired) => Ok(RedisValue::Null),
            Some(Served::Wait(ms)) => Ok(RedisValue::Integer(*ms)),
            Some(Served::Failed(message)) => Err(RedisError::String(message.clone())),
            None => Err(Error::Debug("no reply for the blocked client").into()),
        };
        ctx.reply(stats::counted(result))
    }

    /// Reached only through CLIENT UNBLOCK, since ACQUIRE blocks without a Redis-side timeout
    /// (its TIMEOUT is a module timer, precise to the millisecond).
    fn timed_out(ctx: &Context, bc: BlockedClient) -> Status {
        let removed = queue::waiter_of(bc).and_then(|waiter| take(ctx, waiter));
        let Some(removed) = removed else {
            return ctx.reply(Err(RedisError::Str("ERR the request was already served")));
        };
        let result = match hint_for(ctx, &removed) {
            Served::Wait(ms) => Ok(RedisValue::Integer(ms)),
            Served::Acquired => Ok(RedisValue::Null),
            Served::Failed(message) => Err(RedisError::String(message)),
        };
        let status = ctx.reply(stats::counted(result));
        // Taken from the queue just now, so unblocked exactly once.
        blocked::unblock_without_outcome(removed.bc);
        after_leaving(ctx, &removed);
        status
    }

    /// The client disconnected while waiting: it leaves nothing behind.
    fn disconnected(ctx: &Context, bc: BlockedClient) {
        let Some(removed) = queue::waiter_of(bc).and_then(|waiter| take(ctx, waiter)) else {
            // Already granted or timed out, and unblocked then.
            return;
        };
        // Taken from the queue just now, so unblocked exactly once.
        blocked::unblock_without_outcome(removed.bc);
        after_leaving(ctx, &removed);
    }
}

/// A write to some key (see [`events::KeyListener`]): if it is a key a queue watches, that
/// queue may be servable now, and if it is a limiter's own key (its hash, or a ONEKEY
/// limiter's one key), the queues of its states resolve it again when next served. Writing is
/// not allowed here, so it only sets a 0 ms timer.
///
/// The limiter's configuration changes with any event on its key but a TTL change (the config
/// cache's rule). A key replaced or gone is also [`key_removed`]; SWAPDB, FLUSHALL and FLUSHDB
/// are [`dataset_changed`].
pub fn key_written(ctx: &Context, event: &[u8], name: &[u8]) {
    // The module's own writes free nothing it does not already know of, and the commands whose
    // writes change a limiter (SETRATE, DELETE) [`nudge`] its queues themselves: a grant's
    // writes, three or so per waiter served, cost nothing here.
    if queue::is_empty() || key::is_own_event() {
        return;
    }
    let db = server::selected_db(ctx);
    let queues = if matches!(event, b"expire" | b"persist") {
        queue::watching(db, name)
    } else {
        queue::touched(db, name)
    };
    for queue in queues {
        schedule(ctx, queue, 0);
    }
}

/// A key left the keyspace (deleted, expired, evicted, overwritten, moved or renamed away): the
/// queues watching it may be servable now, or their limiter gone. Writing is not allowed here,
/// so it only sets 0 ms timers.
pub fn key_removed(ctx: &Context, db: i32, key: &[u8]) {
    if queue::is_empty() {
        return;
    }
    for queue in queue::touched(db, key) {
        schedule(ctx, queue, 0);
    }
}

#[cfg(test)]
mod tests;
