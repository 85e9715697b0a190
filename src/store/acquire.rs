//! Acquiring: reading and deciding an acquisition (TRYACQUIRE, ACQUIRE, ALLOW, ALLOWALL), then
//! committing it; AVAILABLE and the wait hint read the same way without writing.

use super::dataset::{Dataset, Server};
use super::{Condition, LimiterKeys, RateChange, Resolved, Stored};
use crate::error::Error;
use crate::key::{OpenMode, Writable};
use crate::sliding_log::{self, AcquirePlan, Config, Entry, Logging, Outcome, Prune, Reset};

/// Where an acquisition stands with respect to the clients blocked in ACQUIRE on the same state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Turn {
    /// A new request that does not wait (TRYACQUIRE, or ACQUIRE inside MULTI or a script):
    /// refused while anyone is queued, so a large request at the head is never starved by small
    /// ones arriving after it.
    BehindWaiters,
    /// A new ACQUIRE that joins the queue if refused.
    Queueing,
    /// The head of the queue, being served.
    FirstInLine,
}

/// What an acquisition asks of a resolved limiter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Acquisition {
    pub permits: u32,
    pub turn: Turn,
    /// Permits the clients blocked in ACQUIRE on the state wait for, if any wait (never
    /// counted for the head being served): the waiters' side tells (`blocking::queued`), the
    /// store knows nothing of them.
    pub queued: Option<u64>,
    /// Whether the verdict must say when the whole log frees (ALLOW's `reset_after`).
    pub reset: Reset,
    pub now: i64,
}

/// An acquisition read and decided, not yet written (see [`LimiterKeys::attempt`]).
pub struct Attempt<'r, 'c, M: OpenMode, D: Dataset = Server<'c>> {
    resolved: &'r Resolved<'c, M, D>,
    acquisition: Acquisition,
    plan: AcquirePlan,
    /// Permits queued ahead by blocked ACQUIRE clients.
    queued: u64,
}

impl<M: OpenMode, D: Dataset> Attempt<'_, '_, M, D> {
    /// Whether the attempt would take its permits.
    pub fn grants(&self) -> bool {
        self.plan.append.is_some()
    }

    /// What the attempt would reply if committed as it is, with nothing logged (PEEK).
    pub(super) fn verdict_unwritten(&self) -> Verdict {
        Verdict::of(&self.plan, self.resolved.config(), self.queued, None)
    }
}

/// What an acquisition did, with what an HTTP API needs to answer it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Verdict {
    /// `Acquired`, or the wait; `Wait(0)` for permits free here but not taken because another
    /// limiter of an all-or-nothing acquisition refused.
    pub outcome: Outcome,
    pub limit: i64,
    /// Permits a new request could take right after this call, within `0..=limit`, counting
    /// what queued ACQUIRE clients wait for as taken.
    pub remaining: i64,
    /// Milliseconds until every permit logged has expired; 0 if none is.
    pub reset_after: i64,
    /// Where a grant was logged, for RATELIMIT.CANCEL to give back exactly that.
    pub logged: Option<Logged>,
}

impl Verdict {
    /// What `INFO ratelimit` counts of it.
    pub fn decision(&self) -> crate::stats::Decision {
        match self.outcome {
            Outcome::Acquired => crate::stats::Decision::Granted {
                limit: self.limit,
                remaining: self.remaining,
            },
            Outcome::Wait(_) => crate::stats::Decision::Refused,
        }
    }
}

/// Where a grant was logged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Logged {
    /// Its score, and the permits this grant added to the entry.
    pub entry: Entry,
    /// The fingerprint of the entry's id ([`super::writes::id_print`]): other grants of the
    /// same millisecond or PRECISION bucket may share it, and a limiter created anew may log a
    /// new entry at the same score. A ONEKEY limiter's entries have no id: its epoch instead.
    pub member: u64,
    /// When its permits free.
    pub frees_at: i64,
}

impl<'c, M: OpenMode, D: Dataset> LimiterKeys<'c, M, D> {
    /// Decides `acquisition` on `resolved` and commits it: the one step TRYACQUIRE, ALLOW,
    /// ACQUIRE and the serving of a waiter take.
    pub fn acquire(
        &self,
        resolved: &Resolved<'c, M, D>,
        acquisition: Acquisition,
    ) -> Result<Verdict, Error>
    where
        M: Writable,
    {
        let attempt = self.attempt(resolved, acquisition)?;
        self.commit(&attempt, true)
    }

    /// Reads and decides an acquisition without writing anything. The permits were checked
    /// against the rate when the limiter was resolved ([`LimiterKeys::resolve_for`]).
    /// Read-only keys do: PEEK answers what ALLOW would.
    pub fn attempt<'r>(
        &self,
        resolved: &'r Resolved<'c, M, D>,
        acquisition: Acquisition,
    ) -> Result<Attempt<'r, 'c, M, D>, Error> {
        let Acquisition {
            permits,
            turn,
            queued,
            reset,
            now,
        } = acquisition;
        let config = resolved.config();
        let state = &resolved.state;
        let stored = state.stored_value()?;
        let queued = match turn {
            Turn::FirstInLine => None,
            Turn::BehindWaiters | Turn::Queueing => queued,
        };
        let plan = match queued {
            // Take nothing while others wait; hint at when they and this request could fit.
            Some(ahead) => {
                let wait = hint(config, stored, state, now, ahead, permits)?;
                let (available, reset_after) = sliding_log::status(config, stored, state, now)?;
                AcquirePlan::waiting(wait, available, reset_after)
            }
            None => sliding_log::try_acquire(config, stored, state, now, permits, reset)?,
        };
        Ok(Attempt {
            resolved,
            acquisition,
            plan,
            queued: queued.unwrap_or(0),
        })
    }

    /// Applies an attempt: the limiter's creation if it was created on first use, the prune,
    /// the grant if `grant` (an all-or-nothing acquisition refused elsewhere passes false), the
    /// value and the TTL rule. Its verdict is the decision, as every acquiring command sees it.
    pub fn commit(&self, attempt: &Attempt<'_, 'c, M, D>, grant: bool) -> Result<Verdict, Error>
    where
        M: Writable,
    {
        let Attempt {
            resolved,
            acquisition: Acquisition { turn, now, .. },
            queued,
            ..
        } = *attempt;
        let config = resolved.config();
        let plan = if grant {
            attempt.plan
        } else {
            attempt.plan.without_grant(now, config.interval)
        };
        let waiting = waiting(&plan, turn, queued);
        let state = match &resolved.state {
            Stored::Keys(state) => state,
            Stored::Packed(log) => {
                let created = resolved.configuration().created().is_some();
                let changed = created || plan.prune != Prune::Nothing || plan.append.is_some();
                if !changed {
                    // A refusal with nothing to prune: a read, so no copy of the log either.
                    return Ok(Verdict::of(&plan, config, queued, None));
                }
                let log = log.acquired(&plan);
                self.write_packed(&log, waiting);
                let member = plan.append.map(|_| u64::from(log.epoch()));
                return Ok(Verdict::of(&plan, config, queued, member));
            }
        };
        if let Some(creation) = resolved.configuration().created() {
            self.create(creation)?;
        }
        let logging = plan.logging();
        // The entry the grant goes into, by its id's fingerprint.
        let mut member = match logging {
            Some(Logging::Recycle { cutoff, entry }) => state.recycle(cutoff, entry),
            _ => None,
        };
        // Whatever else expired (none, in a steady window, when recycled) goes as usual.
        state.prune(plan.prune);
        if let (None, Some(logging)) = (member, logging) {
            let may_merge = matches!(logging, Logging::Merge(_));
            member = Some(state.log(logging.entry(), may_merge)?);
        }
        self.write_value_and_ttls(config, state, plan.value, waiting);
        Ok(Verdict::of(&plan, config, queued, member))
    }

    /// Writes the hash of a limiter created on first use: exactly what SETRATE NX does.
    pub(super) fn create(&self, config: &Config) -> Result<(), Error>
    where
        M: Writable,
    {
        let change = RateChange {
            config: *config,
            condition: Some(Condition::IfAbsent),
            keep_state: false,
            client: None,
        };
        // NX reads no clock and touches no state.
        self.set_rate(&change, 0).map(|_| ())
    }
}

impl<M: OpenMode, D: Dataset> Resolved<'_, M, D> {
    /// AVAILABLE: permits a new request could take now, computed without writing: the
    /// `queued` permits blocked ACQUIRE clients wait for count as taken (a new request is
    /// refused while they wait).
    pub fn available(&self, queued: u64, now: i64) -> Result<i64, Error> {
        let state = &self.state;
        let available = sliding_log::available(self.config(), state.stored_value()?, state, now)?;
        Ok(available
            .saturating_sub(i64::try_from(queued).unwrap_or(i64::MAX))
            .max(0))
    }

    /// The wait TRYACQUIRE would reply now, behind the `queued` permits blocked ACQUIRE
    /// clients wait for, computed without writing (for an ACQUIRE that times out or is
    /// cancelled).
    pub fn wait_hint(&self, permits: u32, queued: u64, now: i64) -> Result<i64, Error> {
        self.configuration().check_permits(permits)?;
        let state = &self.state;
        hint(
            self.config(),
            state.stored_value()?,
            state,
            now,
            queued,
            permits,
        )
    }
}

/// The wait before `permits` could be taken after the `ahead` permits queued before them (their
/// sum capped at the rate, since no request can exceed it); at least 1. Writes nothing.
pub(super) fn hint<M: OpenMode, D: Dataset>(
    config: &Config,
    stored: Option<i64>,
    state: &Stored<M, D>,
    now: i64,
    ahead: u64,
    permits: u32,
) -> Result<i64, Error> {
    let rate = u64::try_from(config.rate).unwrap_or(0);
    let wanted = ahead
        .saturating_add(u64::from(permits))
        .min(rate)
        .min(u64::from(u32::MAX)) as u32;
    Ok(
        match sliding_log::try_acquire(config, stored, state, now, wanted, Reset::NotWanted)?
            .outcome
        {
            Outcome::Wait(ms) => ms,
            Outcome::Acquired => 1,
        },
    )
}

/// How long the client of an acquisition waits for its turn, for the TTL rule: a refusal that
/// leaves a client waiting keeps the limiter alive until its turn.
fn waiting(plan: &AcquirePlan, turn: Turn, queued: u64) -> i64 {
    match (plan.outcome, turn) {
        (Outcome::Wait(ms), Turn::Queueing | Turn::FirstInLine) => ms,
        (Outcome::Wait(ms), Turn::BehindWaiters) if queued > 0 => ms,
        _ => 0,
    }
}

impl Verdict {
    /// What a plan applied answers on a limiter of `rate`, with `queued` permits waited for by
    /// blocked ACQUIRE clients (counted as taken).
    fn of(plan: &AcquirePlan, config: &Config, queued: u64, member: Option<u64>) -> Verdict {
        let rate = config.rate;
        let ahead = i64::try_from(queued).unwrap_or(i64::MAX);
        Verdict {
            outcome: if plan.append.is_some() {
                Outcome::Acquired
            } else {
                match plan.outcome {
                    Outcome::Wait(ms) => Outcome::Wait(ms),
                    Outcome::Acquired => Outcome::Wait(0),
                }
            },
            limit: rate,
            remaining: plan
                .available_after
                .saturating_sub(ahead)
                .clamp(0, rate.max(0)),
            reset_after: plan.reset_after,
            logged: plan.append.zip(member).map(|(entry, member)| Logged {
                entry,
                member,
                frees_at: entry.score.saturating_add(config.interval),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rated(rate: i64) -> Config {
        Config {
            rate,
            interval: 1000,
            mode: sliding_log::Mode::Overall,
            keep_alive: 0,
            precision: 1,
        }
    }

    fn refusal(wait: i64) -> AcquirePlan {
        AcquirePlan::waiting(wait, 2, 300)
    }

    #[test]
    fn only_a_refusal_that_leaves_a_client_waiting_extends_the_ttl() {
        assert_eq!(waiting(&refusal(40), Turn::Queueing, 0), 40);
        assert_eq!(waiting(&refusal(40), Turn::FirstInLine, 0), 40);
        assert_eq!(waiting(&refusal(40), Turn::BehindWaiters, 0), 0);
        assert_eq!(waiting(&refusal(40), Turn::BehindWaiters, 3), 40);
    }

    #[test]
    fn a_verdict_counts_queued_permits_as_taken_within_the_rate() {
        let verdict = Verdict::of(&refusal(40), &rated(10), 1, None);
        assert_eq!(verdict.outcome, Outcome::Wait(40));
        assert_eq!(
            (verdict.limit, verdict.remaining, verdict.reset_after),
            (10, 1, 300)
        );
        assert_eq!(Verdict::of(&refusal(40), &rated(10), 5, None).remaining, 0);
        assert_eq!(
            Verdict::of(&refusal(40), &rated(10), u64::MAX, None).remaining,
            0
        );
        assert_eq!(
            Verdict::of(&AcquirePlan::waiting(1, 50, 0), &rated(10), 0, None).remaining,
            10
        );
        assert_eq!(
            Verdict::of(&AcquirePlan::waiting(1, 5, 0), &rated(-1), 0, None).remaining,
            0
        );
    }
}
