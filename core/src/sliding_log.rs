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

// Pure logic: no FFI here.
#![forbid(unsafe_code)]

use std::ops::ControlFlow;

use crate::keyspace;

/// Whether a limiter is shared by all callers or kept per client id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Overall,
    PerClient,
    /// Shared by all callers like `Overall`, with the whole state in one key of its own
    /// ([`crate::packed_log`]) instead of Redisson's three: for limiters no Redisson client reads.
    OneKey,
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
    /// Grants within one `precision`-aligned bucket of milliseconds share one log entry, scored
    /// at the bucket's last millisecond: the log holds at most `interval / precision + 1`
    /// entries, and permits free at most `precision - 1` ms late, never early. 1 is exact.
    pub precision: i64,
}

impl Config {
    /// The score of a grant at `now`: the last millisecond of its precision bucket.
    pub fn entry_score(&self, now: i64) -> i64 {
        let precision = self.precision.max(1);
        now.div_euclid(precision)
            .saturating_mul(precision)
            .saturating_add(precision - 1)
    }
}

/// One acquisition in the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    pub score: i64,
    pub permits: u32,
}

/// Which part of the log to visit, relative to cutoffs such as `now - interval`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Span {
    /// Expired entries: score <= cutoff.
    UpTo(i64),
    /// Entries still counting: score > cutoff.
    After(i64),
    /// Entries with `low < score <= high`.
    Between(i64, i64),
    /// Every entry.
    Everything,
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

    /// The score of the newest entry in `span`, without decoding its permits.
    fn newest_score(&self, span: Span) -> Result<Option<i64>, Self::Error>;

    /// Whether `span` holds any entry: a log may answer without reading one.
    fn any_in(&self, span: Span) -> Result<bool, Self::Error> {
        Ok(self.newest_score(span)?.is_some())
    }
}

/// Whether the caller uses an acquisition's `reset_after`. Only then does a refusal read the
/// newest live entry (a grant always does): TRYACQUIRE and ACQUIRE reply the wait alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reset {
    Wanted,
    NotWanted,
}

/// The result of an acquisition attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Acquired,
    /// Milliseconds until enough permits are free, at least 1.
    Wait(i64),
}

/// What to remove from the log before anything else is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Prune {
    Nothing,
    /// Every entry scored at or below this.
    UpTo(i64),
    /// The whole log: every entry has expired (or is released), so the key is dropped in O(1)
    /// instead of removing a possibly huge backlog member by member.
    All,
}

/// The writes an acquisition makes: prune, then append, then store the value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AcquirePlan {
    pub outcome: Outcome,
    pub prune: Prune,
    pub append: Option<Entry>,
    /// The new value, when it differs from what is stored.
    pub value: Option<i64>,
    /// Permits a new request could take right after this plan is applied (may be negative while
    /// a lowered rate is paid off).
    pub available_after: i64,
    /// Milliseconds until every permit logged after this plan has expired; 0 if none is, and
    /// on a refusal asked for with [`Reset::NotWanted`].
    pub reset_after: i64,
    /// What is stored and logged before the plan, for [`AcquirePlan::without_grant`].
    stored: Option<i64>,
    newest_live: Option<i64>,
}

impl AcquirePlan {
    /// Whether an entry may already be logged at the score of the grant's entry (which it then
    /// joins): only if the newest live entry is not older. Grants in increasing milliseconds,
    /// the usual case, skip looking.
    pub fn may_merge(&self) -> bool {
        match (self.append, self.newest_live) {
            (Some(entry), Some(newest)) => newest >= entry.score,
            _ => false,
        }
    }
}

impl AcquirePlan {
    /// How the grant's entry, if any, goes into the log: recycling an expired entry is tried
    /// only when the plan prunes up to a cutoff the entry is newer than and no entry may already
    /// be logged at its score; otherwise it joins one there if it may, or is new.
    pub fn logging(&self) -> Option<Logging> {
        let entry = self.append?;
        Some(match self.prune {
            _ if self.may_merge() => Logging::Merge(entry),
            Prune::UpTo(cutoff) if entry.score > cutoff => Logging::Recycle { cutoff, entry },
            _ => Logging::New(entry),
        })
    }
}

impl AcquirePlan {
    /// A request refused because clients blocked in ACQUIRE wait ahead of it: nothing written.
    pub fn waiting(wait: i64, available: i64, reset_after: i64) -> AcquirePlan {
        AcquirePlan {
            outcome: Outcome::Wait(wait),
            prune: Prune::Nothing,
            append: None,
            value: None,
            available_after: available,
            reset_after,
            stored: None,
            newest_live: None,
        }
    }

    /// The same attempt, refused: the prune and the refreshed value are kept, nothing is taken
    /// (an all-or-nothing acquisition over several limiters that one of them refuses).
    pub fn without_grant(&self, now: i64, interval: i64) -> AcquirePlan {
        let Some(entry) = self.append else {
            return *self;
        };
        let available = self
            .available_after
            .saturating_add(i64::from(entry.permits));
        AcquirePlan {
            append: None,
            value: value_to_write(self.stored, available, false),
            available_after: available,
            reset_after: self.newest_live.map_or(0, |t| free_in(t, now, interval)),
            ..*self
        }
    }
}

/// How a granted entry goes into the log, decided from the plan (see [`AcquirePlan::logging`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Logging {
    /// Move the oldest expired entry (scored at or below `cutoff`) to the entry's score instead
    /// of pruning it and adding a fresh one, if it holds exactly the entry's permits in the
    /// layout a fresh one would have ([`recycled_member`]); otherwise as [`Logging::New`].
    Recycle { cutoff: i64, entry: Entry },
    /// Join the entry already logged at the same score, if there is one ([`merged_member`]);
    /// otherwise as [`Logging::New`].
    Merge(Entry),
    /// A new entry under a fresh id.
    New(Entry),
}

impl Logging {
    /// The entry logged, whichever way.
    pub fn entry(self) -> Entry {
        match self {
            Logging::Recycle { entry, .. } | Logging::Merge(entry) | Logging::New(entry) => entry,
        }
    }
}

/// The member an entry logged at a grant's score becomes when the grant's `permits` join it:
/// the same id, the sum of permits. `None` if this module cannot read the member, the sum does
/// not fit its 32 bits or the id its length byte: the grant then gets an entry of its own.
pub fn merged_member(old: &[u8], permits: u32) -> Option<Vec<u8>> {
    let decoded = keyspace::decode_member(old).ok()?;
    let sum = decoded.permits.checked_add(permits)?;
    keyspace::reencode_member(decoded.id, sum)
}

/// The member of the oldest expired entry, if a grant of `permits` may take it over: only one
/// holding exactly those permits in the layout a fresh entry would have, so the log reads the
/// same to everyone (ids only keep entries apart, and an expired id is free).
pub fn recycled_member(oldest: &[u8], permits: u32) -> Option<[u8; keyspace::MEMBER_LEN]> {
    keyspace::fresh_layout(oldest, permits)
}

/// Why RELEASE cannot split a log entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SplitError {
    Unreadable(keyspace::MemberError),
    /// An id over 255 bytes, which the layout this module writes cannot say.
    IdTooLong,
}

impl std::fmt::Display for SplitError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SplitError::Unreadable(e) => e.fmt(f),
            SplitError::IdTooLong => f.write_str("permit entry id too long"),
        }
    }
}

/// The member RELEASE leaves in place of the newest entry it splits ([`ReleasePlan::shrink_newest_to`]):
/// the same id with `permits` left, in the layout this module writes whatever layout it came in.
pub fn split_member(member: &[u8], permits: u32) -> Result<Vec<u8>, SplitError> {
    let id = keyspace::decode_member(member)
        .map_err(SplitError::Unreadable)?
        .id;
    keyspace::reencode_member(id, permits).ok_or(SplitError::IdTooLong)
}

/// The writes a release makes: prune, remove the newest entries, shrink the next one, store the value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReleasePlan {
    pub released: i64,
    pub prune: Prune,
    /// How many of the newest (live) entries to remove whole.
    pub remove_newest: usize,
    /// After those removals, the newest entry keeps only this many permits.
    pub shrink_newest_to: Option<u32>,
    pub value: Option<i64>,
}

/// The writes of a reconfiguration that keeps the state (SETRATE KEEPSTATE).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeepStatePlan {
    pub prune: Prune,
    /// The new rate less the permits still logged: negative when the window already holds more
    /// than a lowered rate. That debt is paid as entries expire, so nothing is granted until
    /// the window holds less than the new rate.
    pub value: i64,
}

/// The state at `now`, before any write.
struct Refreshed {
    cutoff: i64,
    prune: Prune,
    /// Permits available now: the stored value once expired entries are added back, or the
    /// rate less the permits logged. Negative while a lowered rate's debt is paid off.
    available: i64,
    /// Whether any entry still counts. The newest one is read only when needed.
    any_live: bool,
}

impl Refreshed {
    fn any_live(&self) -> bool {
        self.any_live
    }

    /// The score of the newest live entry, read from the log.
    fn newest_live<L: PermitLog>(&self, log: &L) -> Result<Option<i64>, L::Error> {
        if self.any_live {
            newest(log, Span::After(self.cutoff))
        } else {
            Ok(None)
        }
    }

    /// Permits the live entries hold, as the value accounts for them.
    fn live(&self, config: &Config) -> i64 {
        config.rate.saturating_sub(self.available)
    }
}

/// Steps 1-2 of an acquisition: add expired permits back to the value, or derive the value from
/// the log when it is missing or would exceed the rate. And one rule the log makes cheap: when it
/// holds no live entry, no permit is in use, so the whole rate is available whatever a stale
/// value says (a value lowered by hand, or one whose log was deleted, can never stick), and a
/// log of nothing but expired entries is dropped whole, in O(1), however long it is.
fn refresh<L: PermitLog>(
    config: &Config,
    stored: Option<i64>,
    log: &L,
    now: i64,
) -> Result<Refreshed, L::Error> {
    let cutoff = now.saturating_sub(config.interval);
    if !log.any_in(Span::After(cutoff))? {
        let prune = if log.entry_count()? > 0 {
            Prune::All
        } else {
            Prune::Nothing
        };
        return Ok(Refreshed {
            cutoff,
            prune,
            available: config.rate,
            any_live: false,
        });
    }
    let (expired_entries, expired_permits) = sum(log, Span::UpTo(cutoff))?;
    let from_log = || -> Result<i64, L::Error> {
        let (_, live) = sum(log, Span::After(cutoff))?;
        Ok(config.rate.saturating_sub(live))
    };
    let available = match stored {
        None => from_log()?,
        Some(value) => {
            let refilled = value.saturating_add(expired_permits);
            if refilled > config.rate {
                from_log()?
            } else {
                refilled
            }
        }
    };
    Ok(Refreshed {
        cutoff,
        prune: if expired_entries > 0 {
            Prune::UpTo(cutoff)
        } else {
            Prune::Nothing
        },
        available,
        any_live: true,
    })
}

/// Tries to take `permits` at `now`. The caller has checked `permits <= rate`.
pub fn try_acquire<L: PermitLog>(
    config: &Config,
    stored: Option<i64>,
    log: &L,
    now: i64,
    permits: u32,
    reset: Reset,
) -> Result<AcquirePlan, L::Error> {
    let state = refresh(config, stored, log, now)?;
    let wanted = i64::from(permits);
    let available = state.available;
    if available >= wanted {
        let score = config.entry_score(now);
        let newest_live = state.newest_live(log)?;
        let newest = newest_live.map_or(score, |t| t.max(score));
        return Ok(AcquirePlan {
            outcome: Outcome::Acquired,
            prune: state.prune,
            append: Some(Entry { score, permits }),
            value: value_to_write(stored, available - wanted, true),
            available_after: available - wanted,
            reset_after: free_in(newest, now, config.interval),
            stored,
            newest_live,
        });
    }
    // Live entries that can never cover the request (the value was lowered by hand): the
    // request fits once the log is empty, when the rate is available again.
    let wait = match wait_until_free(log, config, &state, wanted, now)? {
        Some(ms) => ms,
        None => wait_until_empty(state.newest_live(log)?, now, config.interval),
    };
    let newest_live = match reset {
        Reset::Wanted => state.newest_live(log)?,
        Reset::NotWanted => None,
    };
    Ok(AcquirePlan {
        outcome: Outcome::Wait(wait),
        prune: state.prune,
        append: None,
        value: value_to_write(stored, available, false),
        available_after: available,
        reset_after: newest_live.map_or(0, |t| free_in(t, now, config.interval)),
        stored,
        newest_live,
    })
}

/// What a limiter's state says now, without writing: the permits available (unclamped: negative
/// while a lowered rate's debt is paid) and the milliseconds until every logged permit expired.
pub fn status<L: PermitLog>(
    config: &Config,
    stored: Option<i64>,
    log: &L,
    now: i64,
) -> Result<(i64, i64), L::Error> {
    let state = refresh(config, stored, log, now)?;
    let reset = state
        .newest_live(log)?
        .map_or(0, |t| free_in(t, now, config.interval));
    Ok((state.available, reset))
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
/// at the rate. Releasing at least everything logged drops the log whole, in O(1).
pub fn release<L: PermitLog>(
    config: &Config,
    stored: Option<i64>,
    log: &L,
    now: i64,
    permits: u32,
) -> Result<ReleasePlan, L::Error> {
    let state = refresh(config, stored, log, now)?;
    let live = state.live(config);
    if state.any_live() && live > 0 && i64::from(permits) >= live {
        return Ok(ReleasePlan {
            released: live,
            prune: Prune::All,
            remove_newest: 0,
            shrink_newest_to: None,
            value: value_to_write(stored, config.rate, true),
        });
    }
    let taken = if state.any_live() {
        take_off(log, Span::After(state.cutoff), Order::NewestFirst, permits)?
    } else {
        TakenOff::default()
    };
    let released = i64::from(taken.permits);
    let value = state.available.saturating_add(released).min(config.rate);
    Ok(ReleasePlan {
        released,
        prune: state.prune,
        remove_newest: taken.remove,
        shrink_newest_to: taken.shrink_next_to,
        value: value_to_write(stored, value, released > 0),
    })
}

/// How up to `permits` come off the entries of `span`, visited in `order`.
#[derive(Debug, Default)]
struct TakenOff {
    /// The first entries, removed whole.
    remove: usize,
    /// After those, the next entry keeps only this many.
    shrink_next_to: Option<u32>,
    /// The permits taken off: fewer than asked when the span holds fewer.
    permits: u32,
}

fn take_off<L: PermitLog>(
    log: &L,
    span: Span,
    order: Order,
    permits: u32,
) -> Result<TakenOff, L::Error> {
    let mut taken = TakenOff::default();
    let mut remaining = permits;
    log.scan(span, order, &mut |entry| {
        if entry.permits <= remaining {
            taken.remove += 1;
            remaining -= entry.permits;
            // Stop as soon as enough is taken: the entries after are not even decoded.
            if remaining == 0 {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        } else {
            taken.shrink_next_to = Some(entry.permits - remaining);
            remaining = 0;
            ControlFlow::Break(())
        }
    })?;
    taken.permits = permits - remaining;
    Ok(taken)
}

/// The writes that give back one grant exactly (RATELIMIT.CANCEL of a ticket granted to a
/// caller that gave up): its permits come off the very log entry it was logged in, never off
/// newer ones as a RELEASE would take them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GiveBackPlan {
    pub given_back: i64,
    pub prune: Prune,
    /// The grant's entry keeps this many permits (other grants of the same millisecond or
    /// PRECISION bucket joined it); `None`: it goes whole.
    pub entry_keeps: Option<u32>,
    pub value: Option<i64>,
}

/// Gives back `grant` (its score and permits), logged in an entry that holds `in_entry` permits
/// now (`None` if that entry is gone: released, deleted). Up to the grant's permits come off that
/// entry, which is reduced, not removed, when others joined it, and the value is raised by as
/// many, capped at the rate.
///
/// Taking them from a newer entry instead would leave the grant's older score logged: once the
/// newer one's window moved on, that older entry would have expired earlier than the newer one,
/// and the window after it would admit one more than the rate while the newer grant still
/// counts. Taking them from another entry at the same score is exact only while the log is the
/// one the grant was written to: a limiter deleted and created anew in the same millisecond
/// would lose a grant that is not the caller's. `None` when there is nothing to give back: the
/// grant has expired (it counts no more) or its entry is gone; nothing is then written.
pub fn give_back<L: PermitLog>(
    config: &Config,
    stored: Option<i64>,
    log: &L,
    now: i64,
    grant: Entry,
    in_entry: Option<u32>,
) -> Result<Option<GiveBackPlan>, L::Error> {
    let cutoff = now.saturating_sub(config.interval);
    let given = in_entry.map_or(0, |held| held.min(grant.permits));
    if grant.score <= cutoff || given == 0 {
        return Ok(None);
    }
    let entry_keeps = in_entry
        .filter(|&held| held > given)
        .map(|held| held - given);
    let given_back = i64::from(given);
    let state = refresh(config, stored, log, now)?;
    let value = state.available.saturating_add(given_back).min(config.rate);
    Ok(Some(GiveBackPlan {
        given_back,
        prune: state.prune,
        entry_keeps,
        value: value_to_write(stored, value, true),
    }))
}

/// Reconfiguring with KEEPSTATE: prune what the new interval expires, and set the value to what
/// the new rate leaves after the permits still logged, a debt (negative) if they exceed it.
///
/// With the previous configuration readable, the permits logged are read off the value (the
/// old rate less what is available, once refreshed), corrected by the entries between the old
/// and the new cutoff: O(entries between the cutoffs), never the whole log. Without it (the hash
/// is missing or unreadable) the log is summed, a repair of state left behind.
pub fn keep_state<L: PermitLog>(
    previous: Option<(&Config, Option<i64>)>,
    rate: i64,
    interval: i64,
    log: &L,
    now: i64,
) -> Result<KeepStatePlan, L::Error> {
    let cutoff = now.saturating_sub(interval);
    let live = match previous {
        Some((old, stored)) => {
            let state = refresh(old, stored, log, now)?;
            let live = state.live(old);
            if cutoff > state.cutoff {
                live.saturating_sub(sum(log, Span::Between(state.cutoff, cutoff))?.1)
            } else if cutoff < state.cutoff {
                live.saturating_add(sum(log, Span::Between(cutoff, state.cutoff))?.1)
            } else {
                live
            }
        }
        None => sum(log, Span::After(cutoff))?.1,
    };
    let prune = if log.entry_count()? == 0 {
        Prune::Nothing
    } else if newest(log, Span::After(cutoff))?.is_none() {
        Prune::All
    } else if newest(log, Span::UpTo(cutoff))?.is_some() {
        Prune::UpTo(cutoff)
    } else {
        Prune::Nothing
    };
    Ok(KeepStatePlan {
        prune,
        value: rate.saturating_sub(live),
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

/// The wait until the oldest live entries whose permits, added to what is available, cover
/// `wanted`; `None` if all live entries together are not enough.
///
/// The live entries hold `live` permits (the rate less what is available), so the entry that
/// frees the request is found from either end: from the oldest, summing up to the `need`
/// permits missing; or from the newest, summing the `live - need` permits that stay logged
/// after it. The walk starts from the end with fewer permits to sum: a refusal for the whole
/// rate reads only the newest entry.
fn wait_until_free<L: PermitLog>(
    log: &L,
    config: &Config,
    state: &Refreshed,
    wanted: i64,
    now: i64,
) -> Result<Option<i64>, L::Error> {
    let need = wanted.saturating_sub(state.available);
    let live = state.live(config);
    let keep = live.saturating_sub(need);
    if keep >= need {
        return Ok(
            oldest_covering(log, state.cutoff, need)?.map(|t| free_in(t, now, config.interval))
        );
    }
    if keep < 0 {
        // Even every live permit would not be enough.
        return Ok(None);
    }
    // From the newest: the oldest entry with at most `keep` permits logged after it.
    let (mut free_at, mut newer, mut walked_all) = (None, 0i64, true);
    log.scan(
        Span::After(state.cutoff),
        Order::NewestFirst,
        &mut |entry| {
            // At most `keep` permits are logged after this entry (or the walk had stopped).
            free_at = Some(entry.score);
            newer = newer.saturating_add(i64::from(entry.permits));
            if newer > keep {
                // No older entry qualifies: stop before decoding one more.
                walked_all = false;
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        },
    )?;
    if walked_all && newer != live {
        // The value disagrees with the log (it was changed by hand): the log decides, as in
        // any repair, and the whole log has just been read anyway.
        free_at = oldest_covering(log, state.cutoff, need)?;
    }
    Ok(free_at.map(|t| free_in(t, now, config.interval)))
}

/// The score of the oldest live entry at which the live permits, summed from the oldest,
/// reach `need`; `None` if they never do.
fn oldest_covering<L: PermitLog>(log: &L, cutoff: i64, need: i64) -> Result<Option<i64>, L::Error> {
    let (mut freed, mut at) = (0i64, None);
    log.scan(Span::After(cutoff), Order::OldestFirst, &mut |entry| {
        freed = freed.saturating_add(i64::from(entry.permits));
        if freed >= need {
            at = Some(entry.score);
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    })?;
    Ok(at)
}

/// The wait until every live entry has expired (at least 1; the interval for an empty log).
fn wait_until_empty(newest_live: Option<i64>, now: i64, interval: i64) -> i64 {
    match newest_live {
        Some(score) => free_in(score, now, interval),
        None => interval.max(1),
    }
}

/// Milliseconds from `now` until an entry scored `score` is free again; at least 1.
fn free_in(score: i64, now: i64, interval: i64) -> i64 {
    score.saturating_add(interval).saturating_sub(now).max(1)
}

/// The score of the newest entry in a span.
fn newest<L: PermitLog>(log: &L, span: Span) -> Result<Option<i64>, L::Error> {
    log.newest_score(span)
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

    /// An in-memory log, kept sorted by score (ties in insertion order), counting the entries
    /// each scan reads.
    #[derive(Default)]
    struct MemLog(Vec<Entry>, std::cell::Cell<usize>);

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
        fn apply(&mut self, plan: &AcquirePlan, value: &mut Option<i64>) {
            self.prune(plan.prune);
            if let Some(e) = plan.append {
                self.push(e.score, e.permits);
            }
            if let Some(v) = plan.value {
                *value = Some(v);
            }
        }
        fn prune(&mut self, prune: Prune) {
            match prune {
                Prune::Nothing => {}
                Prune::UpTo(cutoff) => self.0.retain(|e| e.score > cutoff),
                Prune::All => self.0.clear(),
            }
        }
        /// Entries read by scans since the last call.
        fn reads(&self) -> usize {
            self.1.replace(0)
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
                Span::Between(low, high) => e.score > low && e.score <= high,
                Span::Everything => true,
            };
            let mut entries: Vec<&Entry> = self.0.iter().filter(in_span).collect();
            if order == Order::NewestFirst {
                entries.reverse();
            }
            for e in entries {
                self.1.set(self.1.get() + 1);
                if visit(*e).is_break() {
                    break;
                }
            }
            Ok(())
        }
        /// Like the store's, reads no entry's permits: not counted as a read.
        fn newest_score(&self, span: Span) -> Result<Option<i64>, Infallible> {
            let reads = self.1.get();
            let mut newest = None;
            self.scan(span, Order::NewestFirst, &mut |entry| {
                newest = Some(entry.score);
                ControlFlow::Break(())
            })?;
            self.1.set(reads);
            Ok(newest)
        }
    }

    fn overall(rate: i64, interval: i64) -> Config {
        Config {
            rate,
            interval,
            mode: Mode::Overall,
            keep_alive: 0,
            precision: 1,
        }
    }

    fn acquire(cfg: &Config, value: Option<i64>, log: &MemLog, now: i64, n: u32) -> AcquirePlan {
        match try_acquire(cfg, value, log, now, n, Reset::Wanted) {
            Ok(plan) => plan,
            Err(never) => match never {},
        }
    }

    #[test]
    fn a_refusal_reads_the_newest_entry_only_for_a_caller_that_wants_reset_after() {
        let cfg = overall(2, 1000);
        let log = MemLog::with(&[(5_000, 1), (5_400, 1)]);
        let run = |reset| match try_acquire(&cfg, Some(0), &log, 5_500, 1, reset) {
            Ok(plan) => plan,
            Err(never) => match never {},
        };
        let wanted = run(Reset::Wanted);
        let not_wanted = run(Reset::NotWanted);
        assert_eq!(wanted.outcome, Outcome::Wait(500));
        assert_eq!(wanted.reset_after, 900, "free at 5400 + 1000");
        assert_eq!(not_wanted.reset_after, 0);
        assert_eq!(
            AcquirePlan {
                reset_after: 0,
                newest_live: None,
                ..wanted
            },
            not_wanted,
            "the same plan otherwise"
        );
    }

    #[test]
    fn a_grant_recycles_an_expired_entry_joins_one_at_its_score_or_is_new() {
        let cfg = overall(10, 1000);
        let fresh = acquire(&cfg, None, &MemLog::default(), 5_000, 1);
        assert_eq!(
            fresh.logging(),
            Some(Logging::New(Entry {
                score: 5_000,
                permits: 1
            }))
        );
        // A steady window: an expired entry to move, none at the grant's score.
        let steady = acquire(
            &cfg,
            Some(9),
            &MemLog::with(&[(3_900, 1), (4_500, 1)]),
            5_000,
            1,
        );
        assert_eq!(
            steady.logging(),
            Some(Logging::Recycle {
                cutoff: 4_000,
                entry: Entry {
                    score: 5_000,
                    permits: 1
                }
            })
        );
        // An entry already at the grant's score: joined, never recycled.
        let same = acquire(
            &cfg,
            Some(8),
            &MemLog::with(&[(3_900, 1), (5_000, 1)]),
            5_000,
            1,
        );
        assert!(matches!(same.logging(), Some(Logging::Merge(_))));
        // A refusal logs nothing.
        let full = acquire(&cfg, Some(0), &MemLog::with(&[(4_500, 10)]), 5_000, 1);
        assert_eq!(full.logging(), None);
    }

    #[test]
    fn members_merge_only_when_readable_and_the_sum_fits() {
        let member = keyspace::encode_member(&[7; keyspace::ID_LEN], 3);
        let merged = merged_member(&member, 2).unwrap();
        let decoded = keyspace::decode_member(&merged).unwrap();
        assert_eq!(
            (decoded.id, decoded.permits),
            (&[7; keyspace::ID_LEN][..], 5)
        );
        let full = keyspace::encode_member(&[7; keyspace::ID_LEN], u32::MAX);
        assert_eq!(merged_member(&full, 1), None, "the sum overflows 32 bits");
        assert_eq!(merged_member(b"", 1), None);
        assert_eq!(merged_member(b"not a member", 1), None);
    }

    #[test]
    fn only_an_entry_in_a_fresh_layout_with_the_same_permits_is_recycled() {
        let member = keyspace::encode_member(&[1; keyspace::ID_LEN], 2);
        assert_eq!(recycled_member(&member, 2), Some(member));
        assert_eq!(recycled_member(&member, 3), None);
        // Redisson 3.13's `fI` layout, 8 bytes: read, but never taken over.
        let old = [0, 0, 0x80, 0x3f, 2, 0, 0, 0];
        assert_eq!(recycled_member(&old, 2), None);
    }

    #[test]
    fn a_split_keeps_the_id_in_the_layout_this_module_writes() {
        let old = [9, 9, 9, 9, 4, 0, 0, 0];
        let split = split_member(&old, 1).unwrap();
        assert_eq!(split, [4, 9, 9, 9, 9, 1, 0, 0, 0]);
        assert_eq!(
            split_member(b"", 1),
            Err(SplitError::Unreadable(keyspace::MemberError::Empty))
        );
        assert_eq!(
            split_member(&[1, 2, 3], 1).unwrap_err().to_string(),
            "permit entry of 3 bytes fits no Redisson member layout"
        );
        // Redisson 3.16.4's `Lc0I` layout can hold an id a length byte cannot say.
        let mut long = 300u64.to_le_bytes().to_vec();
        long.extend([5; 300]);
        long.extend(1u32.to_le_bytes());
        assert_eq!(split_member(&long, 1), Err(SplitError::IdTooLong));
        assert_eq!(
            SplitError::IdTooLong.to_string(),
            "permit entry id too long"
        );
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
        assert_eq!(plan.prune, Prune::Nothing);
    }

    #[test]
    fn an_entry_is_free_again_at_exactly_t_plus_interval() {
        let cfg = overall(1, 1000);
        let log = MemLog::with(&[(0, 1)]);
        let before = acquire(&cfg, Some(0), &log, 999, 1);
        assert_eq!(before.outcome, Outcome::Wait(1));
        assert_eq!(before.prune, Prune::Nothing);
        assert_eq!(
            before.value, None,
            "a refusal with nothing expired writes nothing"
        );
        let at = acquire(&cfg, Some(0), &log, 1000, 1);
        assert_eq!(at.outcome, Outcome::Acquired);
        assert_eq!(
            at.prune,
            Prune::All,
            "nothing live is left: the log goes whole"
        );
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
        assert_eq!(plan.prune, Prune::UpTo(0));
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
        assert_eq!(plan.prune, Prune::UpTo(0));
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
        assert_eq!(plan.prune, Prune::UpTo(100));
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
        assert_eq!(plan.prune, Prune::All);
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
                let mut probe = MemLog(log.0.clone(), Default::default());
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

    /// Applies a give-back plan as the store does, to the entry at `index`.
    fn apply_give_back(
        log: &mut MemLog,
        index: usize,
        plan: &GiveBackPlan,
        value: &mut Option<i64>,
    ) {
        match plan.entry_keeps {
            Some(p) => log.0[index].permits = p,
            None => {
                log.0.remove(index);
            }
        }
        log.prune(plan.prune);
        if let Some(v) = plan.value {
            *value = Some(v);
        }
    }

    fn grant(score: i64, permits: u32) -> Entry {
        Entry { score, permits }
    }

    #[test]
    fn give_back_removes_the_grant_own_entry_not_the_newest() {
        // Rate 2 per 1000: G at 0 (given up), H at 10.
        let cfg = overall(2, 1000);
        let mut log = MemLog::with(&[(0, 1), (10, 1)]);
        let mut value = Some(0);
        let plan = give_back(&cfg, value, &log, 20, grant(0, 1), Some(1))
            .unwrap()
            .unwrap();
        assert_eq!((plan.given_back, plan.entry_keeps), (1, None));
        assert_eq!(plan.value, Some(1));
        apply_give_back(&mut log, 0, &plan, &mut value);
        assert_eq!(log.0, vec![grant(10, 1)], "H stays, G's entry went");
        // At 1001 (G's entry would have freed), one more fits, and only one: H still counts.
        let i = try_acquire(&cfg, value, &log, 1001, 1, Reset::NotWanted).unwrap();
        assert_eq!(i.outcome, Outcome::Acquired);
        log.apply(&i, &mut value);
        let j = try_acquire(&cfg, value, &log, 1001, 1, Reset::NotWanted).unwrap();
        assert_eq!(
            j.outcome,
            Outcome::Wait(9),
            "H at 10 and I at 1001 fill the window"
        );
        assert!(log.live(1001, 1000) <= 2);
    }

    #[test]
    fn give_back_reduces_an_entry_other_grants_joined() {
        let cfg = overall(10, 1000);
        let mut log = MemLog::with(&[(99, 5), (150, 1)]);
        let mut value = Some(4);
        let plan = give_back(&cfg, value, &log, 150, grant(99, 2), Some(5))
            .unwrap()
            .unwrap();
        assert_eq!(plan.entry_keeps, Some(3));
        assert_eq!(plan.value, Some(6));
        apply_give_back(&mut log, 0, &plan, &mut value);
        assert_eq!(log.0, vec![grant(99, 3), grant(150, 1)]);
    }

    #[test]
    fn give_back_is_limited_to_what_the_entry_still_holds_and_capped_at_the_rate() {
        let cfg = overall(10, 1000);
        let log = MemLog::with(&[(50, 1), (70, 5)]);
        // A RELEASE split the grant's entry: what is left of it.
        let plan = give_back(&cfg, Some(4), &log, 80, grant(50, 3), Some(1))
            .unwrap()
            .unwrap();
        assert_eq!((plan.given_back, plan.entry_keeps), (1, None));
        assert_eq!(plan.value, Some(5));
        let plan = give_back(&cfg, Some(10), &log, 80, grant(70, 5), Some(5))
            .unwrap()
            .unwrap();
        assert_eq!(plan.value, None, "already at the rate: nothing to write");
    }

    #[test]
    fn give_back_of_an_expired_or_missing_grant_writes_nothing() {
        let cfg = overall(2, 1000);
        let log = MemLog::with(&[(0, 1), (500, 1)]);
        assert_eq!(
            give_back(&cfg, Some(0), &log, 1000, grant(0, 1), Some(1)),
            Ok(None)
        );
        assert_eq!(
            give_back(&cfg, Some(0), &log, 600, grant(300, 1), None),
            Ok(None),
            "its entry is gone"
        );
        assert_eq!(
            give_back(&cfg, Some(0), &log, 600, grant(500, 0), Some(1)),
            Ok(None)
        );
        // Expired entries still logged are pruned with a give-back, as every write does.
        let plan = give_back(&cfg, Some(0), &log, 1200, grant(500, 1), Some(1))
            .unwrap()
            .unwrap();
        assert_eq!(plan.prune, Prune::UpTo(200));
        assert_eq!(plan.value, Some(2));
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
        assert_eq!(plan.prune, Prune::Nothing);
    }

    #[test]
    fn release_is_limited_to_what_is_logged_and_capped_at_rate() {
        let cfg = overall(5, 1000);
        let log = MemLog::with(&[(0, 9), (900, 2)]);
        // The entry at 0 is expired at 1000: it is pruned, not released.
        let plan = release(&cfg, Some(0), &log, 1000, 10).unwrap();
        assert_eq!(
            plan.released, 2,
            "0 + 9 expired > 5 recomputes: 2 are logged"
        );
        assert_eq!(
            plan.prune,
            Prune::All,
            "releasing everything logged drops the log whole"
        );
        assert_eq!(plan.remove_newest, 0);
        assert_eq!(plan.shrink_newest_to, None);
        assert_eq!(plan.value, Some(5));
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
        // Without a readable previous configuration the log is summed.
        let plan = keep_state(None, 10, 600, &log, 1000).unwrap();
        assert_eq!(plan.prune, Prune::UpTo(400));
        assert_eq!(plan.value, 6);
        let shrunk = keep_state(None, 3, 2000, &log, 1000).unwrap();
        assert_eq!(shrunk.prune, Prune::Nothing);
        assert_eq!(
            shrunk.value, -3,
            "the debt is kept: 6 logged against a rate of 3"
        );
    }

    #[test]
    fn keep_state_reads_the_logged_permits_off_the_value() {
        // Rate 10 over 2000: all 6 permits logged count, the value says 4 are left.
        let old = overall(10, 2000);
        let log = MemLog::with(&[(0, 2), (500, 3), (900, 1)]);
        // Same interval, lower rate: nothing but the newest entry need be read.
        let same = keep_state(Some((&old, Some(4))), 4, 2000, &log, 1000).unwrap();
        assert_eq!((same.prune, same.value), (Prune::Nothing, -2));
        assert!(log.reads() <= 2, "O(1): the log is not summed");
        // A shorter interval subtracts what it expires: the 2 at 0.
        let shorter = keep_state(Some((&old, Some(4))), 4, 600, &log, 1000).unwrap();
        assert_eq!((shorter.prune, shorter.value), (Prune::UpTo(400), 0));
        // A longer one adds back entries the old interval had already expired.
        let old = overall(10, 600);
        let longer = keep_state(Some((&old, Some(9))), 10, 2000, &log, 1000).unwrap();
        assert_eq!((longer.prune, longer.value), (Prune::Nothing, 4));
        // Nothing left in the new window: the whole log goes.
        let gone = keep_state(Some((&old, Some(9))), 10, 50, &log, 1000).unwrap();
        assert_eq!((gone.prune, gone.value), (Prune::All, 10));
    }

    #[test]
    fn a_lowered_rate_keeps_its_debt_until_the_window_holds_less() {
        // The run: five grants 100 ms apart at rate 5, then the rate lowered to 3.
        let cfg5 = overall(5, 1000);
        let mut log = MemLog::default();
        let mut value = None;
        for t in [0, 100, 200, 300, 400] {
            let plan = acquire(&cfg5, value, &log, t, 1);
            assert_eq!(plan.outcome, Outcome::Acquired);
            log.apply(&plan, &mut value);
        }
        let keep = keep_state(Some((&cfg5, value)), 3, 1000, &log, 450).unwrap();
        assert_eq!(keep.value, -2);
        value = Some(keep.value);
        let cfg3 = overall(3, 1000);
        // At 1100 the entries of 0 and 100 have expired: 3 live, rate 3, nothing available.
        assert_eq!(available(&cfg3, value, &log, 1100), Ok(0));
        let plan = acquire(&cfg3, value, &log, 1100, 2);
        assert_eq!(
            plan.outcome,
            Outcome::Wait(200),
            "free when 200 and 300 expire"
        );
        assert_eq!(plan.value, Some(0));
        // A release after the decrease gives back logged permits but no credit beyond them.
        let released = release(&cfg3, Some(-2), &log, 450, 1).unwrap();
        assert_eq!((released.released, released.value), (1, Some(-1)));
    }

    #[test]
    fn a_refusal_for_the_whole_rate_reads_only_the_newest_entry() {
        let cfg = overall(1000, 10_000);
        let entries: Vec<(i64, u32)> = (0..1000).map(|t| (t, 1)).collect();
        let log = MemLog::with(&entries);
        log.reads();
        let plan = acquire(&cfg, Some(0), &log, 5_000, 1000);
        assert_eq!(plan.outcome, Outcome::Wait(5_999));
        assert!(log.reads() <= 1, "the newest entry only, not the whole log");
        // A small request reads from the oldest end, just as few entries.
        let plan = acquire(&cfg, Some(0), &log, 5_000, 2);
        assert_eq!(plan.outcome, Outcome::Wait(5_001));
        assert!(log.reads() <= 4);
    }

    #[test]
    fn a_grant_is_scored_at_the_end_of_its_precision_bucket() {
        let cfg = Config {
            precision: 100,
            ..overall(5, 1000)
        };
        assert_eq!(cfg.entry_score(0), 99);
        assert_eq!(cfg.entry_score(99), 99);
        assert_eq!(cfg.entry_score(100), 199);
        assert_eq!(cfg.entry_score(-1), -1);
        assert_eq!(overall(5, 1000).entry_score(1234), 1234, "1 is exact");
        let plan = acquire(&cfg, None, &MemLog::default(), 1234, 2);
        assert_eq!(
            plan.append,
            Some(Entry {
                score: 1299,
                permits: 2
            })
        );
        assert_eq!(plan.reset_after, 1065, "free at 1299 + 1000");
        // Such an entry frees late, never early: at 2298 it still counts.
        let log = MemLog::with(&[(1299, 5)]);
        assert_eq!(
            acquire(&cfg, Some(0), &log, 2298, 1).outcome,
            Outcome::Wait(1)
        );
        assert_eq!(
            acquire(&cfg, Some(0), &log, 2299, 1).outcome,
            Outcome::Acquired
        );
    }

    #[test]
    fn coarse_precision_never_admits_more_than_rate_in_any_window_of_real_grants() {
        for precision in [1, 7, 100] {
            let cfg = Config {
                precision,
                ..overall(9, 300)
            };
            let mut log = MemLog::default();
            let mut value = None;
            let mut grants: Vec<(i64, i64)> = Vec::new();
            let mut seed: u64 = 0x51_7cc1_b727_220a ^ precision as u64;
            let mut now = 0;
            for _ in 0..20_000 {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                now += (seed % 11) as i64;
                let wanted = 1 + (seed >> 8) as u32 % 4;
                let plan = acquire(&cfg, value, &log, now, wanted);
                if plan.outcome == Outcome::Acquired {
                    grants.push((now, i64::from(wanted)));
                    // The window of real grant times ending now holds at most the rate.
                    let in_window: i64 = grants
                        .iter()
                        .filter(|(t, _)| *t > now - cfg.interval)
                        .map(|(_, p)| p)
                        .sum();
                    assert!(in_window <= cfg.rate, "P={precision} at {now}: {in_window}");
                }
                log.apply(&plan, &mut value);
            }
            assert!(grants.len() > 500, "P={precision}: {} grants", grants.len());
        }
    }

    #[test]
    fn only_a_grant_scored_no_later_than_the_newest_entry_looks_for_one_to_join() {
        let cfg = Config {
            precision: 100,
            ..overall(10, 1000)
        };
        let fresh = acquire(&cfg, None, &MemLog::default(), 1234, 1);
        assert!(!fresh.may_merge(), "nothing logged");
        let same_bucket = acquire(&cfg, Some(9), &MemLog::with(&[(1299, 1)]), 1250, 1);
        assert!(same_bucket.may_merge());
        let next_bucket = acquire(&cfg, Some(9), &MemLog::with(&[(1299, 1)]), 1300, 1);
        assert!(!next_bucket.may_merge());
        let exact = acquire(&overall(10, 1000), Some(9), &MemLog::with(&[(5, 1)]), 5, 1);
        assert!(exact.may_merge(), "the same millisecond");
    }

    #[test]
    fn a_grant_declined_keeps_the_prune_and_takes_nothing() {
        let cfg = overall(5, 1000);
        let log = MemLog::with(&[(0, 2), (600, 1)]);
        let plan = acquire(&cfg, Some(2), &log, 1000, 3);
        assert_eq!(plan.outcome, Outcome::Acquired);
        assert_eq!((plan.available_after, plan.reset_after), (1, 1000));
        let declined = plan.without_grant(1000, 1000);
        assert_eq!(declined.append, None);
        assert_eq!(declined.prune, Prune::UpTo(0));
        assert_eq!(declined.value, Some(4), "2 + 2 expired");
        assert_eq!((declined.available_after, declined.reset_after), (4, 600));
        let refused = acquire(&cfg, Some(0), &log, 700, 3);
        assert_eq!(refused.without_grant(700, 1000), refused);
        assert_eq!(status(&cfg, Some(2), &log, 1000), Ok((4, 600)));
        assert_eq!(status(&cfg, None, &MemLog::default(), 1000), Ok((5, 0)));
    }

    #[test]
    fn a_fully_expired_log_is_dropped_without_reading_it() {
        let cfg = overall(1000, 100);
        let entries: Vec<(i64, u32)> = (0..1000).map(|t| (t, 1)).collect();
        let log = MemLog::with(&entries);
        log.reads();
        let plan = acquire(&cfg, Some(0), &log, 10_000, 1);
        assert_eq!(plan.outcome, Outcome::Acquired);
        assert_eq!(plan.prune, Prune::All);
        assert_eq!(plan.value, Some(999));
        assert!(log.reads() <= 1);
        // Releasing everything logged does not read the log either.
        let log = MemLog::with(&entries);
        let plan = release(&overall(1000, 100_000), Some(0), &log, 1000, 5000).unwrap();
        assert_eq!(
            (plan.released, plan.prune, plan.value),
            (1000, Prune::All, Some(1000))
        );
        assert!(log.reads() <= 1);
    }

    #[test]
    fn rates_lowered_and_raised_with_keep_state_never_over_admit() {
        let mut cfg = overall(8, 100);
        let mut log = MemLog::default();
        let mut value = None;
        let mut seed: u64 = 0x2545_f491_4f6c_dd1d;
        let mut now = 0;
        let mut granted = 0;
        for step in 0..20_000 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            now += (seed % 7) as i64;
            if step % 50 == 0 {
                let rate = 1 + (seed >> 20) as i64 % 12;
                let interval = 50 + (seed >> 30) as i64 % 100;
                let plan = keep_state(Some((&cfg, value)), rate, interval, &log, now).unwrap();
                log.prune(plan.prune);
                value = Some(plan.value);
                cfg = overall(rate, interval);
                continue;
            }
            let wanted = 1 + (seed >> 8) as u32 % cfg.rate as u32;
            let plan = acquire(&cfg, value, &log, now, wanted);
            if plan.outcome == Outcome::Acquired {
                granted += 1;
            }
            log.apply(&plan, &mut value);
            if plan.outcome == Outcome::Acquired {
                assert!(
                    log.live(now, cfg.interval) <= cfg.rate,
                    "step {step}: the window ending at this grant holds more than the rate"
                );
            }
            let live = log.live(now, cfg.interval);
            assert_eq!(
                available(&cfg, value, &log, now),
                Ok((cfg.rate - live).clamp(0, cfg.rate)),
                "step {step}: AVAILABLE agrees with the log"
            );
        }
        assert!(granted > 1000);
    }
}
