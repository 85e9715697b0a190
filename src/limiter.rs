//! The sliding-log rate limiter, independent of Redis.
//!
//! The state is a `value` (permits available now, a cache the log can rebuild) and a log of
//! acquisitions `(score = unix ms, permits)`. The invariant: at any `now`, the permits logged with a
//! score in `(now - interval, now]` never add up to more than `rate`; an entry scored `t` is free
//! again at exactly `t + interval`.
//!
//! Each operation reads through [`PermitLog`] and returns a *plan* of the writes to make. Nothing
//! is written while reading, so a log entry that fails to decode aborts the command before any
//! write: the store applies a plan only once it is complete.

use std::ops::ControlFlow;

/// Whether a limiter is shared by all callers or kept per client id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Overall,
    PerClient,
}

/// A limiter's configuration as stored in its hash.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Config {
    /// Permits per interval. Non-negative; a rate of 0 refuses every request.
    pub rate: i64,
    /// Window length in milliseconds, at least 1.
    pub interval: i64,
    pub mode: Mode,
    /// TTL refreshed on every acquisition, in milliseconds; 0 = none.
    pub keep_alive: i64,
}

/// One acquisition in the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    pub score: i64,
    pub permits: u32,
}

/// Which part of the log to visit, relative to a cutoff `now - interval`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Span {
    /// Expired entries: score <= cutoff.
    UpTo(i64),
    /// Entries still counting: score > cutoff.
    After(i64),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    OldestFirst,
    NewestFirst,
}

/// Read access to a permit log. Entries of equal score are visited in one fixed order, the same
/// the store uses when it applies a plan.
pub trait PermitLog {
    type Error;

    /// How many entries the log holds, expired or not (O(1) in Redis).
    fn entry_count(&self) -> Result<usize, Self::Error>;

    /// Calls `visit` for each entry of `span` in `order` until it breaks.
    fn scan(
        &self,
        span: Span,
        order: Order,
        visit: &mut dyn FnMut(Entry) -> ControlFlow<()>,
    ) -> Result<(), Self::Error>;
}

/// The result of an acquisition attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Acquired,
    /// Milliseconds until enough permits are free, at least 1.
    Wait(i64),
}

/// The writes an acquisition makes: prune, then append, then store the value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Acquire {
    pub outcome: Outcome,
    /// Remove every entry scored at or below this.
    pub prune_up_to: Option<i64>,
    pub append: Option<Entry>,
    /// The new value, when it differs from what is stored.
    pub value: Option<i64>,
}

/// The writes a release makes: prune, remove the newest entries, shrink the next one, store the value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Release {
    pub released: i64,
    pub prune_up_to: Option<i64>,
    /// How many of the newest (live) entries to remove whole.
    pub remove_newest: usize,
    /// After those removals, the newest entry keeps only this many permits.
    pub shrink_newest_to: Option<u32>,
    pub value: Option<i64>,
}

/// The writes of a reconfiguration that keeps the state (SETRATE KEEPSTATE).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeepState {
    pub prune_up_to: Option<i64>,
    pub value: i64,
}

/// The state at `now`, before any write.
struct Refreshed {
    cutoff: i64,
    /// Whether any entry has expired and should be pruned.
    prune: bool,
    /// Permits available now, as the stored value says once expired entries are added back.
    /// May be negative if someone stored a negative value.
    available: i64,
}

/// Steps 1-2 of an acquisition: add expired permits back to the value, or derive the value from
/// the log when it is missing or would exceed the rate. And one rule the log makes cheap: when it
/// holds no live entry, no permit is in use, so the whole rate is available whatever a stale
/// value says (a value lowered by hand, or one whose log was deleted, can never stick).
fn refresh<L: PermitLog>(
    config: &Config,
    stored: Option<i64>,
    log: &L,
    now: i64,
) -> Result<Refreshed, L::Error> {
    let cutoff = now.saturating_sub(config.interval);
    let (expired_entries, expired_permits) = sum(log, Span::UpTo(cutoff))?;
    let from_log = || -> Result<i64, L::Error> {
        let (_, live) = sum(log, Span::After(cutoff))?;
        Ok(config.rate.saturating_sub(live).max(0))
    };
    let available = match stored {
        None => from_log()?,
        Some(value) => {
            let refilled = value.saturating_add(expired_permits);
            if refilled > config.rate {
                from_log()?
            } else if refilled < config.rate && log.entry_count()? <= expired_entries {
                config.rate.max(0)
            } else {
                refilled
            }
        }
    };
    Ok(Refreshed {
        cutoff,
        prune: expired_entries > 0,
        available,
    })
}

/// Tries to take `permits` at `now`. The caller has checked `permits <= rate`.
pub fn try_acquire<L: PermitLog>(
    config: &Config,
    stored: Option<i64>,
    log: &L,
    now: i64,
    permits: u32,
) -> Result<Acquire, L::Error> {
    let state = refresh(config, stored, log, now)?;
    let wanted = i64::from(permits);
    let available = state.available;
    let wait = if available >= wanted {
        None
    } else {
        // Live entries that can never cover the request (the value was lowered by hand): the
        // request fits once the log is empty, when the rate is available again.
        let hint = wait_until_free(log, state.cutoff, available, wanted, now, config.interval)?;
        Some(match hint {
            Some(ms) => ms,
            None => wait_until_empty(log, state.cutoff, now, config.interval)?,
        })
    };
    let (outcome, append, value) = match wait {
        None => (
            Outcome::Acquired,
            Some(Entry {
                score: now,
                permits,
            }),
            available - wanted,
        ),
        Some(ms) => (Outcome::Wait(ms), None, available),
    };
    Ok(Acquire {
        outcome,
        prune_up_to: state.prune.then_some(state.cutoff),
        append,
        value: value_to_write(stored, value, outcome == Outcome::Acquired),
    })
}

/// Permits available now, within `0..=rate`, without writing anything.
pub fn available<L: PermitLog>(
    config: &Config,
    stored: Option<i64>,
    log: &L,
    now: i64,
) -> Result<i64, L::Error> {
    let state = refresh(config, stored, log, now)?;
    Ok(state.available.clamp(0, config.rate.max(0)))
}

/// Gives back up to `permits` by removing the newest live entries (splitting the last one if
/// needed), so released permits are not counted twice, and raises the value by as many, capped
/// at the rate.
pub fn release<L: PermitLog>(
    config: &Config,
    stored: Option<i64>,
    log: &L,
    now: i64,
    permits: u32,
) -> Result<Release, L::Error> {
    let state = refresh(config, stored, log, now)?;
    let mut remaining = permits;
    let mut remove_newest = 0;
    let mut shrink_newest_to = None;
    log.scan(
        Span::After(state.cutoff),
        Order::NewestFirst,
        &mut |entry| {
            if entry.permits <= remaining {
                remove_newest += 1;
                remaining -= entry.permits;
                // Stop as soon as enough is released: older entries are not even decoded.
                if remaining == 0 {
                    ControlFlow::Break(())
                } else {
                    ControlFlow::Continue(())
                }
            } else {
                shrink_newest_to = Some(entry.permits - remaining);
                remaining = 0;
                ControlFlow::Break(())
            }
        },
    )?;
    let released = i64::from(permits - remaining);
    let value = state.available.saturating_add(released).min(config.rate);
    Ok(Release {
        released,
        prune_up_to: state.prune.then_some(state.cutoff),
        remove_newest,
        shrink_newest_to,
        value: value_to_write(stored, value, released > 0),
    })
}

/// Reconfiguring with KEEPSTATE: prune what the new interval expires, and set the value to what
/// the new rate leaves after the permits still logged.
pub fn keep_state<L: PermitLog>(
    rate: i64,
    interval: i64,
    log: &L,
    now: i64,
) -> Result<KeepState, L::Error> {
    let cutoff = now.saturating_sub(interval);
    let (expired_entries, _) = sum(log, Span::UpTo(cutoff))?;
    let (_, live) = sum(log, Span::After(cutoff))?;
    Ok(KeepState {
        prune_up_to: (expired_entries > 0).then_some(cutoff),
        value: rate.saturating_sub(live).max(0),
    })
}

/// The value to store, if any: nothing when it is unchanged, and nothing when it is missing and
/// nothing was taken or given (a missing value is derived from the log on the next call).
fn value_to_write(stored: Option<i64>, value: i64, state_changed: bool) -> Option<i64> {
    match stored {
        Some(current) if current == value => None,
        None if !state_changed => None,
        _ => Some(value),
    }
}

/// The wait until the oldest live entries whose permits, added to `available`, reach `wanted`
/// expire; `None` if all live entries together are not enough.
fn wait_until_free<L: PermitLog>(
    log: &L,
    cutoff: i64,
    available: i64,
    wanted: i64,
    now: i64,
    interval: i64,
) -> Result<Option<i64>, L::Error> {
    let mut freed = available;
    let mut wait = None;
    log.scan(Span::After(cutoff), Order::OldestFirst, &mut |entry| {
        freed = freed.saturating_add(i64::from(entry.permits));
        if freed >= wanted {
            let free_at = entry.score.saturating_add(interval);
            wait = Some(free_at.saturating_sub(now).max(1));
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    })?;
    Ok(wait)
}

/// The wait until every live entry has expired (at least 1; the interval for an empty log).
fn wait_until_empty<L: PermitLog>(
    log: &L,
    cutoff: i64,
    now: i64,
    interval: i64,
) -> Result<i64, L::Error> {
    let mut newest = None;
    log.scan(Span::After(cutoff), Order::NewestFirst, &mut |entry| {
        newest = Some(entry.score);
        ControlFlow::Break(())
    })?;
    Ok(match newest {
        Some(score) => score.saturating_add(interval).saturating_sub(now).max(1),
        None => interval.max(1),
    })
}

/// (entries, permits) in a span.
fn sum<L: PermitLog>(log: &L, span: Span) -> Result<(usize, i64), L::Error> {
    let (mut entries, mut permits) = (0usize, 0i64);
    log.scan(span, Order::OldestFirst, &mut |entry| {
        entries += 1;
        permits = permits.saturating_add(i64::from(entry.permits));
        ControlFlow::Continue(())
    })?;
    Ok((entries, permits))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::convert::Infallible;

    /// An in-memory log, kept sorted by score (ties in insertion order).
    #[derive(Default)]
    struct MemLog(Vec<Entry>);

    impl MemLog {
        fn with(entries: &[(i64, u32)]) -> Self {
            let mut log = MemLog::default();
            for &(score, permits) in entries {
                log.push(score, permits);
            }
            log
        }
        fn push(&mut self, score: i64, permits: u32) {
            let at = self.0.partition_point(|e| e.score <= score);
            self.0.insert(at, Entry { score, permits });
        }
        /// Applies an acquisition plan, as the store does.
        fn apply(&mut self, plan: &Acquire, value: &mut Option<i64>) {
            if let Some(cutoff) = plan.prune_up_to {
                self.0.retain(|e| e.score > cutoff);
            }
            if let Some(e) = plan.append {
                self.push(e.score, e.permits);
            }
            if let Some(v) = plan.value {
                *value = Some(v);
            }
        }
        fn live(&self, now: i64, interval: i64) -> i64 {
            self.0
                .iter()
                .filter(|e| e.score > now - interval && e.score <= now)
                .map(|e| i64::from(e.permits))
                .sum()
        }
    }

    impl PermitLog for MemLog {
        type Error = Infallible;
        fn entry_count(&self) -> Result<usize, Infallible> {
            Ok(self.0.len())
        }
        fn scan(
            &self,
            span: Span,
            order: Order,
            visit: &mut dyn FnMut(Entry) -> ControlFlow<()>,
        ) -> Result<(), Infallible> {
            let in_span = |e: &&Entry| match span {
                Span::UpTo(t) => e.score <= t,
                Span::After(t) => e.score > t,
            };
            let mut entries: Vec<&Entry> = self.0.iter().filter(in_span).collect();
            if order == Order::NewestFirst {
                entries.reverse();
            }
            for e in entries {
                if visit(*e).is_break() {
                    break;
                }
            }
            Ok(())
        }
    }

    fn overall(rate: i64, interval: i64) -> Config {
        Config {
            rate,
            interval,
            mode: Mode::Overall,
            keep_alive: 0,
        }
    }

    fn acquire(cfg: &Config, value: Option<i64>, log: &MemLog, now: i64, n: u32) -> Acquire {
        match try_acquire(cfg, value, log, now, n) {
            Ok(plan) => plan,
            Err(never) => match never {},
        }
    }

    #[test]
    fn first_acquisition_sets_value_and_logs_the_entry() {
        let cfg = overall(10, 1000);
        let plan = acquire(&cfg, None, &MemLog::default(), 5_000, 3);
        assert_eq!(plan.outcome, Outcome::Acquired);
        assert_eq!(plan.value, Some(7));
        assert_eq!(
            plan.append,
            Some(Entry {
                score: 5_000,
                permits: 3
            })
        );
        assert_eq!(plan.prune_up_to, None);
    }

    #[test]
    fn an_entry_is_free_again_at_exactly_t_plus_interval() {
        let cfg = overall(1, 1000);
        let log = MemLog::with(&[(0, 1)]);
        let before = acquire(&cfg, Some(0), &log, 999, 1);
        assert_eq!(before.outcome, Outcome::Wait(1));
        assert_eq!(before.prune_up_to, None);
        assert_eq!(
            before.value, None,
            "a refusal with nothing expired writes nothing"
        );
        let at = acquire(&cfg, Some(0), &log, 1000, 1);
        assert_eq!(at.outcome, Outcome::Acquired);
        assert_eq!(at.prune_up_to, Some(0));
        assert_eq!(
            at.value, None,
            "0 + 1 released - 1 taken leaves the value unchanged"
        );
    }

    #[test]
    fn wait_hint_covers_multi_permit_requests() {
        let cfg = overall(5, 1000);
        let log = MemLog::with(&[(0, 2), (100, 1), (200, 2)]);
        // 2 free at 1000 is not enough for 3; 2 + 1 free at 1100 is.
        let plan = acquire(&cfg, Some(0), &log, 300, 3);
        assert_eq!(plan.outcome, Outcome::Wait(800));
        // With one permit available, the first entry's 2 are enough.
        let plan = acquire(&cfg, Some(1), &MemLog::with(&[(0, 2), (100, 2)]), 300, 3);
        assert_eq!(plan.outcome, Outcome::Wait(700));
    }

    #[test]
    fn expired_permits_are_added_back_before_deciding() {
        let cfg = overall(5, 1000);
        let log = MemLog::with(&[(0, 3), (600, 2)]);
        let plan = acquire(&cfg, Some(0), &log, 1000, 3);
        assert_eq!(plan.outcome, Outcome::Acquired);
        assert_eq!(plan.prune_up_to, Some(0));
        assert_eq!(
            plan.value, None,
            "0 + 3 expired - 3 taken: unchanged, not rewritten"
        );
    }

    #[test]
    fn a_refusal_still_prunes_and_stores_the_refilled_value() {
        let cfg = overall(5, 1000);
        let log = MemLog::with(&[(0, 1), (600, 4)]);
        let plan = acquire(&cfg, Some(0), &log, 1000, 3);
        assert_eq!(plan.outcome, Outcome::Wait(600));
        assert_eq!(plan.prune_up_to, Some(0));
        assert_eq!(plan.value, Some(1));
        assert_eq!(plan.append, None);
    }

    #[test]
    fn missing_value_counts_leftover_log_entries() {
        let cfg = overall(5, 1000);
        let log = MemLog::with(&[(100, 1), (900, 3)]);
        // At 1100 the entry at 100 is expired; 3 are still logged, so 2 are available.
        let plan = acquire(&cfg, None, &log, 1100, 2);
        assert_eq!(plan.outcome, Outcome::Acquired);
        assert_eq!(plan.prune_up_to, Some(100));
        assert_eq!(plan.value, Some(0));
        let refused = acquire(&cfg, None, &log, 1100, 3);
        assert_eq!(refused.outcome, Outcome::Wait(800));
        assert_eq!(
            refused.value, None,
            "a missing value is not created by a refusal"
        );
    }

    #[test]
    fn value_above_the_rate_is_recomputed_from_the_log() {
        // A Redisson client's old release script raises the value without touching the log.
        let cfg = overall(5, 1000);
        let log = MemLog::with(&[(500, 4)]);
        let plan = acquire(&cfg, Some(9), &log, 1000, 2);
        assert_eq!(plan.outcome, Outcome::Wait(500));
        assert_eq!(plan.value, Some(1));
    }

    #[test]
    fn an_empty_log_means_the_whole_rate_is_available() {
        // Someone deleted the permits zset by hand while the value said 0.
        let cfg = overall(5, 1000);
        let plan = acquire(&cfg, Some(0), &MemLog::default(), 1000, 2);
        assert_eq!(plan.outcome, Outcome::Acquired);
        assert_eq!(plan.value, Some(3));
        // The same once the last entry expires, whatever the value says.
        let plan = acquire(&cfg, Some(-7), &MemLog::with(&[(0, 1)]), 1000, 5);
        assert_eq!(plan.outcome, Outcome::Acquired);
        assert_eq!(plan.prune_up_to, Some(0));
        assert_eq!(plan.value, Some(0));
        assert_eq!(available(&cfg, Some(1), &MemLog::default(), 1000), Ok(5));
    }

    #[test]
    fn a_stale_value_with_live_entries_waits_for_the_log_to_empty() {
        // 1 available and 1 logged can never cover 3 by expiry alone: the request fits once the
        // log is empty (at 900 + 1000), when the empty-log rule gives the whole rate back.
        let cfg = overall(5, 1000);
        let log = MemLog::with(&[(400, 1), (900, 1)]);
        let plan = acquire(&cfg, Some(0), &log, 1000, 3);
        assert_eq!(plan.outcome, Outcome::Wait(900));
        assert_eq!(plan.value, None);
        // Requests the value and expiries can cover still get their exact hint.
        let plan = acquire(&cfg, Some(0), &log, 1000, 2);
        assert_eq!(plan.outcome, Outcome::Wait(900));
        let plan = acquire(&cfg, Some(0), &log, 1000, 1);
        assert_eq!(plan.outcome, Outcome::Wait(400));
        // The answer does not depend on the request's size: AVAILABLE agrees.
        assert_eq!(available(&cfg, Some(0), &log, 1000), Ok(0));
    }

    #[test]
    fn a_negative_stored_value_is_healed_rather_than_stuck() {
        let cfg = overall(2, 1000);
        let log = MemLog::with(&[(500, 2)]);
        let plan = acquire(&cfg, Some(-7), &log, 1000, 1);
        assert_eq!(plan.outcome, Outcome::Wait(500));
        let mut later = MemLog::with(&[(500, 2)]);
        let mut value = Some(-7);
        later.apply(&plan, &mut value);
        let plan = acquire(&cfg, value, &later, 1500, 1);
        assert_eq!(plan.outcome, Outcome::Acquired, "the log emptied at 1500");
        assert_eq!(plan.value, Some(1));
    }

    #[test]
    fn rate_zero_refuses_without_looping() {
        let cfg = overall(0, 1000);
        let plan = acquire(&cfg, None, &MemLog::default(), 1000, 1);
        assert_eq!(plan.outcome, Outcome::Wait(1000));
    }

    #[test]
    fn entries_scored_in_the_future_still_count() {
        // A Redisson client whose clock runs ahead logs entries after the server's now.
        let cfg = overall(1, 1000);
        let plan = acquire(&cfg, Some(0), &MemLog::with(&[(1500, 1)]), 1000, 1);
        assert_eq!(plan.outcome, Outcome::Wait(1500));
    }

    #[test]
    fn never_admits_more_than_rate_in_any_window() {
        // A deterministic pseudo-random workload checked against the invariant at every step.
        let cfg = overall(7, 100);
        let mut log = MemLog::default();
        let mut value = None;
        let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut now = 0;
        let mut granted = 0;
        for _ in 0..20_000 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            now += (seed % 9) as i64;
            let wanted = 1 + (seed >> 8) as u32 % 7;
            let plan = acquire(&cfg, value, &log, now, wanted);
            if let Outcome::Wait(ms) = plan.outcome {
                assert!(ms >= 1);
                // The hint is exact: at now + ms the same request would succeed.
                let mut probe = MemLog(log.0.clone());
                let mut probe_value = value;
                probe.apply(&plan, &mut probe_value);
                let later = acquire(&cfg, probe_value, &probe, now + ms, wanted);
                assert_eq!(later.outcome, Outcome::Acquired, "hint {ms} at {now}");
                if ms > 1 {
                    let earlier = acquire(&cfg, probe_value, &probe, now + ms - 1, wanted);
                    assert!(matches!(earlier.outcome, Outcome::Wait(_)));
                }
            } else {
                granted += 1;
            }
            log.apply(&plan, &mut value);
            assert!(log.live(now, cfg.interval) <= cfg.rate);
        }
        assert!(granted > 1000, "the workload must exercise grants too");
    }

    #[test]
    fn available_adds_back_expired_permits_and_stays_in_range() {
        let cfg = overall(5, 1000);
        let log = MemLog::with(&[(0, 2), (600, 3)]);
        assert_eq!(available(&cfg, Some(0), &log, 1000), Ok(2));
        assert_eq!(available(&cfg, None, &log, 1000), Ok(2));
        assert_eq!(available(&cfg, None, &MemLog::default(), 1000), Ok(5));
        assert_eq!(
            available(&cfg, Some(-3), &MemLog::with(&[(900, 1)]), 1000),
            Ok(0)
        );
        assert_eq!(
            available(&cfg, Some(-3), &MemLog::default(), 1000),
            Ok(5),
            "an empty log means nothing is in use"
        );
        assert_eq!(available(&cfg, Some(50), &log, 1000), Ok(2));
    }

    #[test]
    fn release_removes_newest_entries_and_splits_the_last() {
        let cfg = overall(10, 1000);
        let log = MemLog::with(&[(100, 3), (200, 2), (300, 4)]);
        let plan = release(&cfg, Some(1), &log, 500, 5).unwrap();
        assert_eq!(plan.released, 5);
        assert_eq!(plan.remove_newest, 1, "the 4 at 300 goes whole");
        assert_eq!(plan.shrink_newest_to, Some(1), "the 2 at 200 keeps 1");
        assert_eq!(plan.value, Some(6));
        assert_eq!(plan.prune_up_to, None);
    }

    #[test]
    fn release_is_limited_to_what_is_logged_and_capped_at_rate() {
        let cfg = overall(5, 1000);
        let log = MemLog::with(&[(0, 9), (900, 2)]);
        // The entry at 0 is expired at 1000: it is pruned, not released.
        let plan = release(&cfg, Some(0), &log, 1000, 10).unwrap();
        assert_eq!(plan.released, 2);
        assert_eq!(plan.prune_up_to, Some(0));
        assert_eq!(plan.remove_newest, 1);
        assert_eq!(plan.shrink_newest_to, None);
        assert_eq!(
            plan.value,
            Some(5),
            "0 + 9 expired > 5 recomputes to 3, + 2 = 5"
        );
    }

    #[test]
    fn release_with_nothing_logged_writes_nothing() {
        let cfg = overall(5, 1000);
        let plan = release(&cfg, None, &MemLog::default(), 1000, 3).unwrap();
        assert_eq!(plan.released, 0);
        assert_eq!(plan.value, None);
        assert_eq!(plan.remove_newest, 0);
        let plan = release(&cfg, Some(5), &MemLog::default(), 1000, 3).unwrap();
        assert_eq!(plan.value, None);
    }

    #[test]
    fn release_stops_exactly_at_an_entry_boundary() {
        let cfg = overall(10, 1000);
        let log = MemLog::with(&[(100, 3), (200, 2)]);
        let plan = release(&cfg, Some(5), &log, 500, 2).unwrap();
        assert_eq!(plan.remove_newest, 1);
        assert_eq!(plan.shrink_newest_to, None);
        assert_eq!(plan.value, Some(7));
    }

    #[test]
    fn keep_state_prunes_by_the_new_interval_and_rederives_value() {
        let log = MemLog::with(&[(0, 2), (500, 3), (900, 1)]);
        let plan = keep_state(10, 600, &log, 1000).unwrap();
        assert_eq!(plan.prune_up_to, Some(400));
        assert_eq!(plan.value, 6);
        let shrunk = keep_state(3, 2000, &log, 1000).unwrap();
        assert_eq!(shrunk.prune_up_to, None);
        assert_eq!(shrunk.value, 0, "never negative");
    }
}
