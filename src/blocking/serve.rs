//! Serving a queue, first come first served: its head is granted for as long as it fits, each
//! grant applied and replicated exactly like a TRYACQUIRE's; the grant of a ticketed waiter is
//! remembered for a resend and for CANCEL, and answers the same wait resent behind it.

use super::ticketed::{remember_grant, waiters_with_ticket};
use super::{after_leaving, hint_for, pause, schedule, take, Host, Served};
use crate::key::Write;
use crate::queue::{self, QueueId, WaiterId};
use crate::sliding_log::{Outcome, Reset};
use crate::stats;
use crate::store::{Acquisition, Turn, Verdict};
use crate::tickets::{self, Fate};

/// What serving a queue's head found.
enum Step {
    /// Its ticket was granted or cancelled on the state it waits on.
    Known(Fate),
    /// Tried; with a grant, the other waiters carrying its ticket (the same wait, resent).
    Tried(Verdict, Vec<WaiterId>),
}

/// Serves a queue from its head for as long as the head can be granted, if the server can
/// write now.
pub(super) fn serve<H: Host>(host: &H, queue: QueueId) {
    if !pause::may_serve(host, queue) {
        return;
    }
    while let Some(head) = queue::head(queue) {
        host.select_db(head.state.db);
        let request = &head.request;
        let client = request.client.as_deref();
        let ticket = request.ticket.as_deref();
        let now = host.now_ms();
        let step = host
            .limiter_for_waiter::<Write>(&request.name)
            .and_then(|limiter| {
                // Resolved once for this turn: the state it is granted on now, which a change of
                // mode may have made another than its queue's. Its ticket is looked up and
                // remembered there, where CANCEL looks. The configuration is the queue's, kept
                // until an event says the limiter changed; read from the hash only after one (the
                // opening just above may have been one: a hash expired then is gone, and
                // `resolve_kept` resolves afresh).
                let resolved = match head.resolved {
                    Some(config) => limiter.resolve_kept(config, client)?,
                    None => {
                        let resolved = limiter.resolve_existing(client)?;
                        if let Some(config) = limiter.config_to_keep(&resolved) {
                            queue::keep_resolved(queue, config);
                        }
                        resolved
                    }
                };
                let state = resolved.id();
                if let Some(fate) = ticket.and_then(|ticket| tickets::fate(ticket, state, now)) {
                    return Ok(Step::Known(fate));
                }
                resolved.configuration().check_permits(request.permits)?;
                let verdict = limiter.acquire(
                    &resolved,
                    Acquisition {
                        permits: request.permits,
                        turn: Turn::FirstInLine,
                        queued: None,
                        reset: Reset::NotWanted,
                        now,
                    },
                )?;
                let mut same_wait = Vec::new();
                if let (Outcome::Acquired, Some(ticket)) = (verdict.outcome, ticket) {
                    remember_grant(ticket, state, &verdict, now);
                    same_wait =
                        waiters_with_ticket(resolved.config().mode, &request.name, ticket, state);
                    same_wait.retain(|&waiter| waiter != head.waiter);
                }
                Ok(Step::Tried(verdict, same_wait))
            });
        match step {
            // The same wait, resent after a reconnect, was granted on the old connection.
            Ok(Step::Known(Fate::Granted { .. })) => {
                if let Some(removed) = take(host, head.waiter) {
                    host.unblock(removed.bc, Served::Acquired);
                }
            }
            // Cancelled after it was queued (CANCEL removes those it finds): it takes nothing.
            Ok(Step::Known(Fate::Cancelled)) => {
                if let Some(removed) = take(host, head.waiter) {
                    host.unblock(removed.bc, hint_for(host, &removed));
                }
            }
            Ok(Step::Tried(verdict, same_wait)) => {
                if let Outcome::Wait(ms) = verdict.outcome {
                    return schedule(host, queue, ms);
                }
                stats::decided(&request.name, verdict.decision());
                if let Some(removed) = take(host, head.waiter) {
                    host.unblock(removed.bc, Served::Acquired);
                }
                // The same wait resent and queued behind it (its first connection not yet seen
                // closed) is answered by this grant at once, taking nothing.
                for waiter in same_wait {
                    if let Some(removed) = take(host, waiter) {
                        host.unblock(removed.bc, Served::Acquired);
                        after_leaving(host, &removed);
                    }
                }
            }
            // Deleted or reconfigured under the waiter: it gets the error TRYACQUIRE would give.
            Err(e) => {
                if let Some(removed) = take(host, head.waiter) {
                    host.unblock(removed.bc, Served::Failed(e.to_string()));
                }
            }
        }
    }
}
