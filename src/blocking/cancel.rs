//! RATELIMIT.CANCEL: a caller gave up the wait its ticket names. Its grant is given back
//! exactly, its waiters leave their queue with the TIMEOUT's reply, and the ticket is
//! remembered as cancelled so that an ACQUIRE with it arriving later takes nothing.

use super::ticketed::waiters_with_ticket;
use super::{after_leaving, nudge, queued, take, Host, Served};
use crate::error::Error;
use crate::key::Write;
use crate::stats::{self, Decision, Stat};
use crate::tickets::{self, Fate};

/// RATELIMIT.CANCEL: ends the wait `ticket` names on the limiter's state (of `client`). A grant
/// it got is given back exactly (its own log entry, see [`crate::store::LimiterKeys::give_back`]); a waiter
/// carrying it leaves the queue and is told the wait hint, as when its TIMEOUT runs out; an
/// ACQUIRE with it arriving later is refused. Returns the permits given back.
pub(crate) fn cancel<H: Host>(
    host: &H,
    key: &[u8],
    ticket: &[u8],
    client: Option<&[u8]>,
) -> Result<i64, Error> {
    let now = host.now_ms();
    let limiter = host.limiter::<Write>(key)?;
    let resolved = limiter.resolve_existing(client)?;
    let state = resolved.id();
    // Given back before anything else changes: an error reading the log leaves all as it was.
    let given_back = match tickets::fate(ticket, state, now) {
        Some(Fate::Granted { entry, member }) => {
            limiter.give_back(&resolved, entry, member, now)?
        }
        _ => 0,
    };
    let _ = tickets::cancel(ticket, state, now);
    let mut ended = 0;
    for waiter in waiters_with_ticket(resolved.config().mode, key, ticket, state) {
        if let Some(removed) = take(host, waiter) {
            ended += 1;
            // On this very state (so this limiter, resolved once), and its ticket cancelled
            // just now: it is told the wait hint, as when its TIMEOUT runs out.
            let queued = queued(&resolved).unwrap_or(0);
            let served = match resolved.wait_hint(removed.request.permits, queued, now) {
                Ok(ms) => {
                    stats::decided(&removed.request.name, Decision::WaitEnded);
                    Served::Wait(ms)
                }
                Err(e) => Served::Failed(e.to_string()),
            };
            host.unblock(removed.bc, served);
            after_leaving(host, &removed);
        }
    }
    drop(resolved);
    drop(limiter);
    if given_back > 0 || ended > 0 {
        stats::add(Stat::Cancels);
    }
    if given_back > 0 {
        nudge(host, key);
    }
    Ok(given_back)
}
