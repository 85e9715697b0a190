//! The generic cell rate algorithm (GCRA): one number per limiter, its theoretical arrival time
//! (TAT), and O(1) arithmetic on it. Plain Rust that knows nothing of Redis: the clock and the
//! stored TAT come in, a decision and what to store go out.
//!
//! Two flavours share the decision and differ in units and rounding, each copied exactly from
//! the command it stands in for:
//! - [`Throttle`], redis-cell 0.5's `CL.THROTTLE`: nanoseconds, the emission interval divided as
//!   f64 and truncated, `remaining` divided as f64 over microseconds, times in seconds rounded up
//!   only when a whole millisecond of the last second remains, negative quantities refund;
//! - [`Gcra`], Redis's `GCRA` (as of #14950): microseconds, the emission interval rounded to the
//!   nearest microsecond (at least 1), overflow refused with Redis's texts, `remaining` by integer
//!   division, times in seconds by a true ceiling.

// Pure logic: no FFI here.
#![forbid(unsafe_code)]

/// go-redis/redis_rate's flavour (RATELIMIT.GCRAALLOW), on the same key as `GCRA`.
pub mod allow;

/// The shared core: the emission interval T and the delay variation tolerance, in one unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Bucket {
    emission: i64,
    tolerance: i64,
}

/// What the core decided for one request of `increment` at `now`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Decision {
    allowed: bool,
    /// The TAT to store when allowed.
    new_tat: i64,
    /// How far the (new, if allowed) TAT is ahead of now: when the bucket is full again.
    ttl: i64,
    /// When limited and the request can ever pass: how long until it would.
    retry: Option<i64>,
}

impl Decision {
    /// The five integers and the write: the new TAT, if allowed and `store`, expiring at its
    /// millisecond (`units_per_ms` of the flavour's unit), times in seconds by `seconds`.
    fn outcome(
        self,
        limit: i64,
        remaining: i64,
        store: bool,
        (units_per_ms, now_ms): (i64, i64),
        seconds: fn(i64) -> i64,
    ) -> Outcome {
        let write = if self.allowed && store {
            TatWrite::Store {
                tat: self.new_tat,
                expires_at: expiry_ms(self.new_tat.div_euclid(units_per_ms), now_ms),
            }
        } else {
            TatWrite::Nothing
        };
        Outcome {
            limited: !self.allowed,
            limit,
            remaining,
            retry_after: self.retry.map_or(-1, seconds),
            reset_after: seconds(self.ttl),
            write,
        }
    }
}

impl Bucket {
    /// The decision, or None when a sum would overflow.
    ///
    /// A stored TAT behind now counts as now: an empty bucket, as if there were no key. Both
    /// references read it so because their key expires at the TAT's millisecond, so a TAT
    /// behind now is never read there (Redis's `gcra.c` takes `ttl_us = tat_us - now` when
    /// limited, which would count the time past as tokens: `remaining` above the limit). Ours
    /// can still be read: its key lives a millisecond longer when the TAT falls inside the
    /// millisecond it was written in, and the debug clock does not expire keys.
    fn decide(self, tat: Option<i64>, now: i64, increment: i64) -> Option<Decision> {
        let tat = tat.map_or(now, |tat| tat.max(now));
        let new_tat = now.max(tat).checked_add(increment)?;
        let allow_at = new_tat.checked_sub(self.tolerance)?;
        let diff = now.checked_sub(allow_at)?;
        if diff < 0 {
            Some(Decision {
                allowed: false,
                new_tat,
                ttl: tat.checked_sub(now)?,
                retry: (increment <= self.tolerance).then_some(-diff),
            })
        } else {
            Some(Decision {
                allowed: true,
                new_tat,
                ttl: new_tat.checked_sub(now)?,
                retry: None,
            })
        }
    }

    /// What is left of the tolerance once `ttl` is taken, if more than minus one interval.
    fn left(self, ttl: i64) -> Option<i64> {
        let next = self.tolerance.checked_sub(ttl)?;
        (next > -self.emission).then_some(next)
    }
}

/// The five integers both commands reply, and the write the call makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outcome {
    pub limited: bool,
    pub limit: i64,
    pub remaining: i64,
    /// Seconds, -1 when allowed (or when the request can never pass).
    pub retry_after: i64,
    /// Seconds until the bucket is full again.
    pub reset_after: i64,
    pub write: TatWrite,
}

impl Outcome {
    pub fn reply(&self) -> [i64; 5] {
        [
            i64::from(self.limited),
            self.limit,
            self.remaining,
            self.retry_after,
            self.reset_after,
        ]
    }
}

/// The write a call makes: none when limited or peeking.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TatWrite {
    Nothing,
    /// Store the TAT (in the flavour's unit), expiring at `expires_at` (unix ms).
    Store {
        tat: i64,
        expires_at: i64,
    },
    /// The bucket is empty again (a refund past now): no key.
    Delete,
}

/// The absolute expiry of a stored TAT: its millisecond (rounded down, as both references
/// do), but never at or before now: a key whose expiry equals now is gone at once, and with it a
/// TAT still a fraction of a millisecond ahead.
fn expiry_ms(tat_ms: i64, now_ms: i64) -> i64 {
    tat_ms.max(now_ms.saturating_add(1))
}

/// Why a `CL.THROTTLE` cannot be computed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ThrottleError {
    /// `count_per_period` and `period` give an emission interval of 0 ns (or less).
    ZeroRate,
    /// A product or sum beyond 64-bit nanoseconds.
    Overflow,
}

/// redis-cell 0.5's `CL.THROTTLE`: a limit of `max_burst + 1`, `count` per `period` seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Throttle {
    bucket: Bucket,
    limit: i64,
}

const NS_PER_MS: i64 = 1_000_000;
const NS_PER_S: i64 = 1_000_000_000;

impl Throttle {
    pub fn new(max_burst: i64, count: i64, period_s: i64) -> Result<Throttle, ThrottleError> {
        if count <= 0 || period_s <= 0 || max_burst < 0 {
            return Err(ThrottleError::ZeroRate);
        }
        let period_ns = period_s
            .checked_mul(NS_PER_S)
            .ok_or(ThrottleError::Overflow)?;
        // redis-cell divides as f64 and truncates.
        let emission = (period_ns as f64 / count as f64) as i64;
        if emission <= 0 {
            return Err(ThrottleError::ZeroRate);
        }
        let limit = max_burst.checked_add(1).ok_or(ThrottleError::Overflow)?;
        let tolerance = emission.checked_mul(limit).ok_or(ThrottleError::Overflow)?;
        Ok(Throttle {
            bucket: Bucket {
                emission,
                tolerance,
            },
            limit,
        })
    }

    /// One call of `quantity` (0 peeks, negative refunds) at `now_ms` on a stored TAT in ns.
    pub fn call(
        &self,
        tat_ns: Option<i64>,
        now_ms: i64,
        quantity: i64,
    ) -> Result<Outcome, ThrottleError> {
        let now = now_ms
            .checked_mul(NS_PER_MS)
            .ok_or(ThrottleError::Overflow)?;
        let increment = self
            .bucket
            .emission
            .checked_mul(quantity)
            .ok_or(ThrottleError::Overflow)?;
        let decision = self
            .bucket
            .decide(tat_ns, now, increment)
            .ok_or(ThrottleError::Overflow)?;
        if decision.allowed && decision.ttl <= 0 {
            // A refund that puts the TAT at or before now: the bucket is empty.
            return Ok(Outcome {
                limited: false,
                limit: self.limit,
                remaining: self.limit,
                retry_after: -1,
                reset_after: 0,
                write: if tat_ns.is_some() && quantity < 0 {
                    TatWrite::Delete
                } else {
                    TatWrite::Nothing
                },
            });
        }
        let remaining = match self.bucket.left(decision.ttl) {
            // Microseconds, truncated, divided as f64 and truncated again.
            Some(next) => ((next / 1000) as f64 / (self.bucket.emission / 1000) as f64) as i64,
            None => 0,
        };
        // A peek (quantity 0) writes nothing.
        Ok(decision.outcome(
            self.limit,
            remaining,
            quantity != 0,
            (NS_PER_MS, now_ms),
            cell_seconds,
        ))
    }
}

/// redis-cell's seconds: the duration as f64 seconds truncated, plus one if at least a whole
/// millisecond of the last second remains (`subsec_milliseconds() > 0`).
fn cell_seconds(ns: i64) -> i64 {
    let (whole, sub) = (ns / NS_PER_S, ns % NS_PER_S);
    let seconds = (whole as f64 + sub as f64 / 1e9) as i64;
    seconds + i64::from(sub / NS_PER_MS > 0)
}

/// Why a `GCRA` call fails after its arguments parsed: Redis's own messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GcraError {
    /// `T * TOKENS` or `TAT + increment` beyond 64 bits.
    TokensOverflow,
    /// `T * (max_burst + 1)` beyond 64 bits.
    BurstOverflow,
}

impl GcraError {
    pub fn message(self) -> &'static str {
        match self {
            GcraError::TokensOverflow => "GCRA limiting uses microsecond accuracy. Combination of period, tokens_per_period and TOKENS would cause an overflow",
            GcraError::BurstOverflow => "GCRA limiting uses microsecond accuracy. Combination of period, tokens_per_period and max_burst would cause an overflow",
        }
    }
}

/// Redis's `GCRA key max_burst tokens_per_period period`: a limit of `max_burst + 1`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Gcra {
    /// max_burst + 1 (Redis leaves i64::MAX as it is).
    limit: i64,
    emission: i64,
}

impl Gcra {
    /// `max_burst` >= 0, `tokens_per_period` >= 1, 0 < `period_s` < 1e12: checked by the caller.
    pub fn new(max_burst: i64, tokens_per_period: i64, period_s: f64) -> Gcra {
        let limit = if max_burst < i64::MAX {
            max_burst + 1
        } else {
            max_burst
        };
        let period_us = period_s * 1_000_000.0;
        // C's `(long long)(x + 0.5)`: truncation toward zero of a positive number.
        let emission = ((period_us / tokens_per_period as f64 + 0.5) as i64).max(1);
        Gcra { limit, emission }
    }

    /// One call of `tokens` (>= 1) at `now_ms` on a stored TAT in µs (> 0: checked by the caller).
    pub fn call(
        &self,
        tat_us: Option<i64>,
        now_ms: i64,
        tokens: i64,
    ) -> Result<Outcome, GcraError> {
        // Redis's order of checks: TOKENS first, then the burst.
        if self.emission > i64::MAX / tokens.max(1) {
            return Err(GcraError::TokensOverflow);
        }
        if self.emission > i64::MAX / self.limit.max(1) {
            return Err(GcraError::BurstOverflow);
        }
        let bucket = Bucket {
            emission: self.emission,
            tolerance: self.emission * self.limit,
        };
        let increment = self.emission * tokens;
        let now = now_ms.saturating_mul(1000);
        let base = now.max(tat_us.unwrap_or(now));
        if base.checked_add(increment).is_none() {
            return Err(GcraError::TokensOverflow);
        }
        let decision = bucket
            .decide(tat_us, now, increment)
            .ok_or(GcraError::TokensOverflow)?;
        let remaining = bucket
            .left(decision.ttl)
            .map_or(0, |next| next / self.emission);
        Ok(decision.outcome(self.limit, remaining, true, (1000, now_ms), ceil_seconds))
    }
}

/// C's `ceil(us / 1000000.)`.
fn ceil_seconds(us: i64) -> i64 {
    (us as f64 / 1_000_000.0).ceil() as i64
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_800_000_000_206;

    fn throttle(burst: i64, count: i64, period: i64) -> Throttle {
        Throttle::new(burst, count, period).unwrap()
    }

    /// Runs calls of a throttle at (ms offset, quantity), carrying the stored TAT; the replies.
    fn run_throttle(t: &Throttle, calls: &[(i64, i64)]) -> Vec<[i64; 5]> {
        let mut tat = None;
        calls
            .iter()
            .map(|&(at, quantity)| {
                let outcome = t.call(tat, NOW + at, quantity).unwrap();
                match outcome.write {
                    TatWrite::Store { tat: v, .. } => tat = Some(v),
                    TatWrite::Delete => tat = None,
                    TatWrite::Nothing => {}
                }
                outcome.reply()
            })
            .collect()
    }

    #[test]
    fn throttle_readme_example() {
        let t = throttle(15, 30, 60);
        assert_eq!(t.call(None, NOW, 1).unwrap().reply(), [0, 16, 15, -1, 2]);
    }

    /// Four calls of `CL.THROTTLE k 3 3 1`, then one 333 ms later: the wait left is 0.33 ms,
    /// less than a whole millisecond, so redis-cell replies 0 s, not 1 s.
    #[test]
    fn throttle_rounds_up_only_from_a_whole_millisecond() {
        let t = throttle(3, 3, 1);
        let replies = run_throttle(&t, &[(0, 1), (0, 1), (0, 1), (0, 1), (333, 1)]);
        assert_eq!(replies[0], [0, 4, 3, -1, 1]);
        assert_eq!(replies[3], [0, 4, 0, -1, 2]);
        assert_eq!(replies[4], [1, 4, 0, 0, 1]);
        assert_eq!(cell_seconds(999_999), 0);
        assert_eq!(cell_seconds(1_000_000), 1);
        assert_eq!(cell_seconds(1_000_999_999), 1);
        assert_eq!(cell_seconds(1_001_000_000), 2);
    }

    #[test]
    fn throttle_peek_writes_nothing() {
        let t = throttle(2, 10, 60);
        let peek = t.call(None, NOW, 0).unwrap();
        assert_eq!(peek.write, TatWrite::Nothing);
        assert_eq!(peek.reply(), [0, 3, 3, -1, 0]);
        let tat = NOW * NS_PER_MS + 6 * NS_PER_S;
        let peek = t.call(Some(tat), NOW, 0).unwrap();
        assert_eq!(
            (peek.write, peek.reply()),
            (TatWrite::Nothing, [0, 3, 2, -1, 6])
        );
    }

    #[test]
    fn throttle_refunds_and_empties() {
        let t = throttle(2, 10, 60);
        let tat = NOW * NS_PER_MS + 12 * NS_PER_S;
        let refund = t.call(Some(tat), NOW, -1).unwrap();
        assert_eq!(refund.reply(), [0, 3, 2, -1, 6]);
        assert_eq!(
            refund.write,
            TatWrite::Store {
                tat: tat - 6 * NS_PER_S,
                expires_at: NOW + 6_000
            }
        );
        let emptied = t.call(Some(tat), NOW, -100).unwrap();
        assert_eq!(
            (emptied.reply(), emptied.write),
            ([0, 3, 3, -1, 0], TatWrite::Delete)
        );
        let nothing_stored = t.call(None, NOW, -1).unwrap();
        assert_eq!(nothing_stored.write, TatWrite::Nothing);
    }

    #[test]
    fn throttle_above_the_limit_never_passes() {
        let t = throttle(2, 10, 60);
        let outcome = t.call(None, NOW, 4).unwrap();
        assert_eq!(outcome.reply(), [1, 3, 3, -1, 0]);
        assert_eq!(outcome.write, TatWrite::Nothing);
    }

    #[test]
    fn throttle_rejects_zero_rates_and_overflow() {
        assert_eq!(Throttle::new(1, 0, 1), Err(ThrottleError::ZeroRate));
        assert_eq!(Throttle::new(1, 1, 0), Err(ThrottleError::ZeroRate));
        assert_eq!(
            Throttle::new(1, 2_000_000_000, 1),
            Err(ThrottleError::ZeroRate)
        );
        assert_eq!(Throttle::new(1, 1, i64::MAX), Err(ThrottleError::Overflow));
        assert_eq!(Throttle::new(i64::MAX, 1, 1), Err(ThrottleError::Overflow));
        let t = throttle(1, 1, 1);
        assert_eq!(t.call(None, NOW, i64::MAX), Err(ThrottleError::Overflow));
    }

    #[test]
    fn gcra_burst_then_limited() {
        let g = Gcra::new(5, 10, 60.0);
        let mut tat = None;
        for i in 0..6 {
            let outcome = g.call(tat, NOW, 1).unwrap();
            assert!(!outcome.limited, "call {i}");
            if let TatWrite::Store { tat: v, .. } = outcome.write {
                tat = Some(v);
            }
            if i == 0 {
                assert_eq!(outcome.reply(), [0, 6, 5, -1, 6]);
            }
        }
        let limited = g.call(tat, NOW, 1).unwrap();
        assert_eq!(limited.reply(), [1, 6, 0, 6, 36]);
        assert_eq!(limited.write, TatWrite::Nothing);
    }

    #[test]
    fn gcra_rounds_and_stores_like_redis() {
        // T = 333 333 us (rounded), tolerance 666 666 us.
        let g = Gcra::new(1, 3, 1.0);
        let first = g.call(None, NOW, 1).unwrap();
        assert_eq!(first.reply(), [0, 2, 1, -1, 1]);
        assert_eq!(
            first.write,
            TatWrite::Store {
                tat: NOW * 1000 + 333_333,
                expires_at: NOW + 333
            }
        );
        // T below 1 us is 1 us; a TAT inside the current ms expires 1 ms later.
        let tiny = Gcra::new(0, 10_000_000, 1.0);
        let outcome = tiny.call(None, NOW, 1).unwrap();
        assert_eq!(
            outcome.write,
            TatWrite::Store {
                tat: NOW * 1000 + 1,
                expires_at: NOW + 1
            }
        );
        // More tokens than the burst: limited, never retryable.
        let too_many = Gcra::new(2, 4, 1.0).call(None, NOW, 4).unwrap();
        assert_eq!(too_many.reply(), [1, 3, 3, -1, 0]);
    }

    /// Issue 23: T rounds to 1 µs, tolerance 3 µs; the TAT written a millisecond ago is 999 µs
    /// behind now, and a request above the limit finds a full bucket (3), not 1002.
    #[test]
    fn gcra_tat_behind_now_is_an_empty_bucket() {
        let g = Gcra::new(2, 973, 0.0001);
        let written = g.call(None, NOW, 1).unwrap();
        assert_eq!(written.reply(), [0, 3, 2, -1, 1]);
        let TatWrite::Store { tat, .. } = written.write else {
            panic!("an allowed call stores");
        };
        assert_eq!(tat, NOW * 1000 + 1);
        let later = NOW + 1;
        let limited = g.call(Some(tat), later, 1000).unwrap();
        assert_eq!(limited.reply(), [1, 3, 3, -1, 0]);
        assert_eq!(limited.write, TatWrite::Nothing);
        // The same as no key at all, for every count, at the limit and above it.
        for tokens in [1, 2, 3, 4, 1000] {
            for stale in [tat, 1, later * 1000 - 1] {
                assert_eq!(
                    g.call(Some(stale), later, tokens),
                    g.call(None, later, tokens),
                    "TOKENS {tokens} on a TAT at {stale}"
                );
            }
        }
        // A TAT exactly at now or ahead of it is read as it is.
        let at_now = Gcra::new(0, 1, 1.0)
            .call(Some(later * 1000), later, 2)
            .unwrap();
        assert_eq!(at_now.reply(), [1, 1, 1, -1, 0]);
        let ahead = Gcra::new(0, 1, 1.0)
            .call(Some(later * 1000 + 1), later, 2)
            .unwrap();
        assert_eq!(ahead.reply(), [1, 1, 0, -1, 1]);
    }

    /// The same for redis-cell's flavour: a request above the limit on a TAT behind now.
    #[test]
    fn throttle_tat_behind_now_is_an_empty_bucket() {
        let t = throttle(2, 1_000_000, 1);
        let stale = NOW * NS_PER_MS + 1_000 - NS_PER_MS;
        for quantity in [-1, 0, 1, 3, 4, 1000] {
            let fresh = t.call(None, NOW, quantity).unwrap();
            let behind = t.call(Some(stale), NOW, quantity).unwrap();
            assert_eq!(behind.reply(), fresh.reply(), "quantity {quantity}");
        }
        assert_eq!(
            t.call(Some(stale), NOW, 1000).unwrap().reply(),
            [1, 3, 3, -1, 0]
        );
    }

    #[test]
    fn gcra_overflow_is_refused_with_redis_texts() {
        let g = Gcra::new(0, 1, 999_999_999_999.0);
        assert_eq!(g.call(None, NOW, i64::MAX), Err(GcraError::TokensOverflow));
        let g = Gcra::new(i64::MAX - 1, 1, 1.0);
        assert_eq!(g.call(None, NOW, 1), Err(GcraError::BurstOverflow));
        let g = Gcra::new(0, 1, 1.0);
        assert_eq!(
            g.call(Some(i64::MAX - 10), NOW, 1),
            Err(GcraError::TokensOverflow)
        );
        // Any clock, however far off, computes without overflowing.
        for now in [i64::MIN, -1, 0, i64::MAX] {
            let _ = g.call(None, now, 1);
            let _ = g.call(Some(1), now, 1);
            let _ = Throttle::new(0, 1, 1).unwrap().call(Some(0), now, -1);
        }
        assert!(GcraError::BurstOverflow.message().contains("max_burst"));
    }
}
