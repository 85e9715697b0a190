//! Serving the clients blocked in RATELIMIT.ACQUIRE.
//!
//! No polling: each queue has one timer, set for the moment its head's permits are free again.
//! Anything that may free permits earlier nudges the queue with a 0 ms timer: RELEASE, CANCEL,
//! SETRATE, DELETE and EXPIRE, the debug clock's ADVANCE, keyspace events on the limiter's keys
//! (a Redisson client's release, a DEL) and FLUSHALL/FLUSHDB. A grant runs
//! `LimiterKeys::try_acquire` for the head, so it is applied and replicated as effects exactly
//! like a TRYACQUIRE; the grant of a ticketed waiter is remembered ([`tickets`]) for a resend and
//! for CANCEL.
//!
//! The server may pause writes (CLIENT PAUSE WRITE|ALL, FAILOVER, CLUSTER FAILOVER, SHUTDOWN
//! waiting for replicas) while timers keep firing; a write then would abort the server. So a
//! queue is served only while writes are allowed: during a pause its timer retries every
//! [`PAUSED_RETRY_MS`], and a server that has become a replica fails its waiters instead.
//!
//! Every blocked client is unblocked exactly once: by a grant or an error, by its TIMEOUT timer,
//! by RATELIMIT.CANCEL of its ticket, by CLIENT UNBLOCK (the timeout callback) or by its
//! disconnection, whichever removes it from the queue first; the others find it gone and do
//! nothing.

use std::any::Any;

use redis_module::{Context, ContextFlags, RedisError, RedisResult, RedisValue, Status};

use crate::clock;
use crate::error::Error;
use crate::events;
use crate::ffi::blocked::{self, BlockedClient, Blocker};
use crate::ffi::server;
use crate::ffi::timer::{self, Timer};
use crate::key::{self, OpenMode, Read, Write};
use crate::queue::{self, QueueId, Removed, Request, StateId, WaiterId};
use crate::sliding_log::{Config, Outcome, Reset};
use crate::stats::{self, Decision};
use crate::store::{self, LimiterKeys, Turn, Verdict};
use crate::tickets::{self, Fate};

/// How often a queue whose time has come checks whether a write pause has ended.
const PAUSED_RETRY_MS: i64 = 10;

/// What a blocked client is finally told.
enum Served {
    Acquired,
    Wait(i64),
    Failed(String),
}

/// An ACQUIRE as parsed by `commands::acquire`.
pub struct AcquireRequest<'a> {
    pub key: &'a [u8],
    pub permits: u32,
    /// 0 waits forever.
    pub timeout_ms: i64,
    pub client: Option<&'a [u8]>,
    /// Creates the limiter on first use.
    pub create: Option<Config>,
    /// The caller's id of this wait: a resend answers from its grant, and RATELIMIT.CANCEL
    /// names it.
    pub ticket: Option<&'a [u8]>,
}

/// ACQUIRE: acquire now, or block the caller in the limiter's queue.
pub fn acquire(ctx: &Context, request: &AcquireRequest<'_>) -> RedisResult {
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
    let limiter = LimiterKeys::<Write>::open(ctx, request.key)?;
    if let Some(ticket) = request.ticket {
        // A resend of a wait already granted, or one cancelled: answered without taking.
        let known = limiter
            .waiting_state(request.client)
            .ok()
            .and_then(|(state, _)| tickets::fate(ticket, &state, now));
        match known {
            Some(Fate::Granted { .. }) => return Ok(RedisValue::Null),
            Some(Fate::Cancelled) => {
                stats::decided(request.key, Decision::Refused);
                let wait = limiter.wait_hint(request.client, request.permits, now)?;
                return Ok(RedisValue::Integer(wait));
            }
            None => {}
        }
    }
    let verdict = limiter.try_acquire(
        request.client,
        request.permits,
        now,
        turn,
        request.create.as_ref(),
        Reset::NotWanted,
    )?;
    let wait = match verdict.outcome {
        Outcome::Acquired => {
            stats::decided(request.key, verdict.decision());
            if let Some(ticket) = request.ticket {
                if let Ok((state, _)) = limiter.waiting_state(request.client) {
                    remember_grant(ticket, state, &verdict, now);
                }
            }
            return Ok(RedisValue::Null);
        }
        Outcome::Wait(ms) => ms,
    };
    if !can_block {
        stats::decided(request.key, Decision::Refused);
        return Ok(RedisValue::Integer(wait));
    }
    let (state, watched) = limiter.waiting_state(request.client)?;
    drop(limiter);
    let Some(bc) = blocked::block::<Waiters>(ctx) else {
        stats::decided(request.key, Decision::Refused);
        return Ok(RedisValue::Integer(wait));
    };
    let (queue, waiter, first) = queue::enqueue(
        state,
        watched,
        bc,
        Request {
            name: request.key.to_vec(),
            client: request.client.map(<[u8]>::to_vec),
            permits: request.permits,
            ticket: request.ticket.map(<[u8]>::to_vec),
        },
    );
    stats::add(&stats::WAITS);
    stats::add(&stats::BLOCKED_CLIENTS);
    if request.timeout_ms > 0 {
        if let Some(timer) = timer::start::<Deadline>(ctx, request.timeout_ms, waiter) {
            queue::set_deadline(waiter, timer);
        }
    }
    // From the first client blocked on, writes to the watched keys and keys leaving.
    events::watch_for_waiters(ctx);
    if first {
        schedule(ctx, queue, wait);
    }
    Ok(RedisValue::NoReply)
}

/// Remembers where a ticketed ACQUIRE's grant was logged, for a resend and for CANCEL.
fn remember_grant(ticket: &[u8], state: StateId, verdict: &Verdict, now: i64) {
    if let Some(logged) = verdict.logged {
        tickets::granted(
            ticket,
            state,
            logged.entry,
            logged.member,
            logged.frees_at,
            now,
        );
    }
}

/// RATELIMIT.CANCEL: ends the wait `ticket` names on the limiter's state (of `client`). A grant
/// it got is given back exactly (its own log entry, see [`LimiterKeys::give_back`]); a waiter
/// carrying it leaves the queue and is told the wait hint, as when its TIMEOUT runs out; an
/// ACQUIRE with it arriving later is refused. Returns the permits given back.
pub fn cancel(
    ctx: &Context,
    key: &[u8],
    ticket: &[u8],
    client: Option<&[u8]>,
) -> Result<i64, Error> {
    let now = clock::now_ms();
    let limiter = LimiterKeys::<Write>::open(ctx, key)?;
    let (state, _) = limiter.waiting_state(client)?;
    // Given back before anything else changes: an error reading the log leaves all as it was.
    let given_back = match tickets::fate(ticket, &state, now) {
        Some(Fate::Granted { entry, member }) => limiter.give_back(client, entry, member, now)?,
        _ => 0,
    };
    let _ = tickets::cancel(ticket, &state, now);
    let waiters = waiters_with_ticket(&limiter, key, ticket, &state);
    drop(limiter);
    let mut ended = 0;
    for waiter in waiters {
        if let Some(removed) = take(ctx, waiter) {
            ended += 1;
            unblock(removed.bc, hint_for(ctx, &removed));
            after_leaving(ctx, &removed);
        }
    }
    if given_back > 0 || ended > 0 {
        stats::add(&stats::CANCELS);
    }
    if given_back > 0 {
        nudge(ctx, key);
    }
    Ok(given_back)
}

/// The waiters carrying `ticket` whose wait is on `state` of `limiter` (named `name`) now: a
/// queue keeps the state it was made on, which a SETRATE changing the mode (OVERALL or
/// PER_CLIENT) leaves behind; its waiters are granted on the state their CLIENT gives now.
fn waiters_with_ticket<M: OpenMode>(
    limiter: &LimiterKeys<'_, M>,
    name: &[u8],
    ticket: &[u8],
    state: &StateId,
) -> Vec<WaiterId> {
    queue::with_ticket(ticket)
        .into_iter()
        .filter(|(_, db, request)| {
            *db == state.db
                && request.name == name
                && limiter
                    .waiting_state(request.client.as_deref())
                    .is_ok_and(|(now_on, _)| now_on == *state)
        })
        .map(|(waiter, ..)| waiter)
        .collect()
}

/// What serving a queue's head found.
enum Step {
    /// Its ticket was granted or cancelled on the state it waits on.
    Known(Fate),
    /// Tried; with a grant, the other waiters carrying its ticket (the same wait, resent).
    Tried(Verdict, Vec<WaiterId>),
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

/// Whole databases changed (FLUSHALL, FLUSHDB, SWAPDB, a dataset loaded): the tickets' grants
/// may be gone, or another database's now, where a CANCEL must not take permits off entries
/// that are not theirs; so every ticket is forgotten (a CANCEL then gives nothing back: the
/// limiter admits less, never more). And every queue checks its limiter.
pub fn dataset_changed(ctx: &Context) {
    tickets::reset();
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

/// Forgets everything a previous load of the module left in its statics: a module unloaded and
/// loaded again may find its library still mapped, statics and all.
pub fn reset() {
    queue::reset();
    tickets::reset();
}

/// Sets the queue's wake-up `ms` from now. With the debug clock frozen, time moves only with
/// ADVANCE, which nudges every queue, so no timer is set for a later moment.
fn schedule(ctx: &Context, queue: QueueId, ms: i64) {
    let timer = if ms > 0 && clock::is_frozen() {
        None
    } else {
        timer::start::<Wake>(ctx, ms.max(0), queue)
    };
    if let Some(previous) = queue::set_wake(queue, timer) {
        timer::stop(ctx, previous);
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
    if server::writes_paused() {
        // Whatever is due is served once the pause ends.
        if let Some(previous) =
            queue::set_wake(queue, timer::start::<Wake>(ctx, PAUSED_RETRY_MS, queue))
        {
            timer::stop(ctx, previous);
        }
        return;
    }
    while let Some(head) = queue::head(queue) {
        server::select_db(ctx, head.state.db);
        let request = &head.request;
        let client = request.client.as_deref();
        let ticket = request.ticket.as_deref();
        let now = clock::now_ms();
        let step = LimiterKeys::<Write>::open_for_waiter(ctx, &request.name).and_then(|limiter| {
            // The state it is granted on now, which a change of mode may have made another than
            // its queue's: its ticket is looked up and remembered there, where CANCEL looks.
            let (state, _) = limiter.waiting_state(client)?;
            if let Some(fate) = ticket.and_then(|ticket| tickets::fate(ticket, &state, now)) {
                return Ok(Step::Known(fate));
            }
            let verdict = limiter.try_acquire(
                client,
                request.permits,
                now,
                Turn::FirstInLine,
                None,
                Reset::NotWanted,
            )?;
            let mut same_wait = Vec::new();
            if let (Outcome::Acquired, Some(ticket)) = (verdict.outcome, ticket) {
                remember_grant(ticket, state.clone(), &verdict, now);
                same_wait = waiters_with_ticket(&limiter, &request.name, ticket, &state);
                same_wait.retain(|&waiter| waiter != head.waiter);
            }
            Ok(Step::Tried(verdict, same_wait))
        });
        match step {
            // The same wait, resent after a reconnect, was granted on the old connection.
            Ok(Step::Known(Fate::Granted { .. })) => {
                if let Some(removed) = take(ctx, head.waiter) {
                    unblock(removed.bc, Served::Acquired);
                }
            }
            // Cancelled after it was queued (CANCEL removes those it finds): it takes nothing.
            Ok(Step::Known(Fate::Cancelled)) => {
                if let Some(removed) = take(ctx, head.waiter) {
                    unblock(removed.bc, hint_for(ctx, &removed));
                }
            }
            Ok(Step::Tried(verdict, same_wait)) => {
                if let Outcome::Wait(ms) = verdict.outcome {
                    return schedule(ctx, queue, ms);
                }
                stats::decided(&request.name, verdict.decision());
                if let Some(removed) = take(ctx, head.waiter) {
                    unblock(removed.bc, Served::Acquired);
                }
                // The same wait resent and queued behind it (its first connection not yet seen
                // closed) is answered by this grant at once, taking nothing.
                for waiter in same_wait {
                    if let Some(removed) = take(ctx, waiter) {
                        unblock(removed.bc, Served::Acquired);
                        after_leaving(ctx, &removed);
                    }
                }
            }
            // Deleted or reconfigured under the waiter: it gets the error TRYACQUIRE would give.
            Err(e) => {
                if let Some(removed) = take(ctx, head.waiter) {
                    unblock(removed.bc, Served::Failed(e.to_string()));
                }
            }
        }
    }
}

/// The error a waiter gets when its server is no longer a master.
const READONLY: &str = "READONLY You can't write against a read only replica.";

/// Takes a waiter out of its queue and stops its timers. None if it was already gone.
fn take(ctx: &Context, waiter: WaiterId) -> Option<Removed> {
    let removed = queue::remove(waiter)?;
    for timer in removed.deadline.into_iter().chain(removed.emptied_wake) {
        timer::stop(ctx, timer);
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

/// What a waiter that leaves without a grant of its own is told: the wait hint, or nil if its
/// ticket was granted meanwhile to the same wait on another connection (it then takes nothing).
/// A wait hint is its answer, so it is counted here as the request's refusal.
fn hint_for(ctx: &Context, removed: &Removed) -> Served {
    server::select_db(ctx, removed.db);
    let request = &removed.request;
    let client = request.client.as_deref();
    let now = clock::now_ms();
    let hint = LimiterKeys::<Read>::open_for_waiter(ctx, &request.name).and_then(|limiter| {
        if let Some(ticket) = &request.ticket {
            let fate = limiter
                .waiting_state(client)
                .ok()
                .and_then(|(state, _)| tickets::fate(ticket, &state, now));
            if let Some(Fate::Granted { .. }) = fate {
                return Ok(None);
            }
        }
        limiter.wait_hint(client, request.permits, now).map(Some)
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

/// Unblocks a waiter just taken from its queue (so unblocked exactly once) with its reply.
fn unblock(bc: BlockedClient, served: Served) {
    blocked::unblock(bc, served);
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
        stats::sub(&stats::BLOCKED_CLIENTS);
        let served = hint_for(ctx, &removed);
        // A waiter whose ticket was granted meanwhile is answered as acquired: not a timeout.
        if matches!(served, Served::Wait(_)) {
            stats::add(&stats::TIMEOUTS);
        }
        unblock(removed.bc, served);
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
/// queue may be servable now. Writing is not allowed here, so it only sets a 0 ms timer.
pub fn key_written(ctx: &Context, _event: &[u8], name: &[u8]) {
    // The module's own writes free nothing it does not already know of.
    if queue::is_empty() || key::is_own_event() {
        return;
    }
    for queue in queue::watching(server::selected_db(ctx), name) {
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
    for queue in queue::watching(db, key) {
        schedule(ctx, queue, 0);
    }
}
