//! go-redis/redis_rate's GCRA (v10's `AllowN` and `AllowAtMost`), computed exactly: integer
//! microseconds where redis_rate's script counts float seconds since 2017 (which, at today's
//! dates, loses enough precision to report 8 tokens left where 9 are). Plain Rust that knows
//! nothing of Redis: the clock and the stored TAT come in, a decision and what to store go out.
//!
//! The TAT is the one `GCRA` stores (microseconds), and the emission interval is rounded as
//! `GCRA` rounds it, so both commands read each other's keys. What redis_rate adds and `GCRA`
//! cannot say: `burst` is the bucket's size (0 admits nothing), a request of 0 peeks, a negative
//! one gives tokens back, the at-most form takes what is there, and a request above the burst is
//! told its wait rather than "never".

// Pure logic: no FFI here.
#![forbid(unsafe_code)]

use super::{expiry_ms, TatWrite};

/// What a call takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Take {
    /// `AllowN`: exactly `n` tokens or none (0 peeks, negative gives tokens back).
    Exactly(i64),
    /// `AllowAtMost`: up to `n` (>= 0) tokens, as many as there are, or none if not even one.
    AtMost(i64),
}

/// redis_rate's `Limit`: `burst` tokens at most, `tokens_per_period` every `period`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bucket {
    burst: i64,
    /// The emission interval T in µs (>= 1).
    emission: i64,
    /// T * burst: how far ahead of now the TAT may be.
    tolerance: i64,
}

/// A product or sum beyond 64-bit microseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Overflow;

/// redis_rate's `Result` (but the limit, which the caller has): the reply and the write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outcome {
    /// Tokens taken: n, or fewer for the at-most form; 0 when limited (or peeking).
    pub allowed: i64,
    pub burst: i64,
    /// Whole tokens left after this call; 0 when limited, as redis_rate says.
    pub remaining: i64,
    /// µs until this request (at-most: one token) would pass; -1 when allowed.
    pub retry_after: i64,
    /// µs until the bucket is full again.
    pub reset_after: i64,
    pub write: TatWrite,
}

impl Outcome {
    pub fn reply(&self) -> [i64; 5] {
        [
            self.allowed,
            self.burst,
            self.remaining,
            self.retry_after,
            self.reset_after,
        ]
    }
}

impl Bucket {
    /// `burst` >= 0, `tokens_per_period` >= 1, 0 < `period_s` < 1e12 (checked by the caller).
    /// T is rounded to the nearest microsecond, at least 1, exactly as `GCRA` rounds it.
    pub fn new(burst: i64, tokens_per_period: i64, period_s: f64) -> Result<Bucket, Overflow> {
        let emission = ((period_s * 1_000_000.0 / tokens_per_period as f64 + 0.5) as i64).max(1);
        let tolerance = emission.checked_mul(burst).ok_or(Overflow)?;
        Ok(Bucket {
            burst,
            emission,
            tolerance,
        })
    }

    /// One call at `now_ms` on a stored TAT in µs (None: no key).
    pub fn call(&self, tat_us: Option<i64>, now_ms: i64, take: Take) -> Result<Outcome, Overflow> {
        let now = now_ms.checked_mul(1000).ok_or(Overflow)?;
        // A TAT behind now is an empty bucket, as if there were no key.
        let tat = tat_us.map_or(now, |tat| tat.max(now));
        let ttl = tat.checked_sub(now).ok_or(Overflow)?;
        match take {
            Take::Exactly(n) => self.exactly(tat_us.is_some(), tat, now, ttl, n),
            Take::AtMost(n) => self.at_most(tat, now, ttl, n),
        }
    }

    fn limited(&self, retry_after: i64, ttl: i64) -> Outcome {
        Outcome {
            allowed: 0,
            burst: self.burst,
            remaining: 0,
            retry_after,
            reset_after: ttl,
            write: TatWrite::Nothing,
        }
    }

    /// Stores `new_tat`, expiring at its millisecond (never at or before now).
    fn store(new_tat: i64, now_ms: i64) -> TatWrite {
        TatWrite::Store {
            tat: new_tat,
            expires_at: expiry_ms(new_tat.div_euclid(1000), now_ms),
        }
    }

    fn exactly(
        &self,
        stored: bool,
        tat: i64,
        now: i64,
        ttl: i64,
        n: i64,
    ) -> Result<Outcome, Overflow> {
        let increment = self.emission.checked_mul(n).ok_or(Overflow)?;
        let new_tat = tat.checked_add(increment).ok_or(Overflow)?;
        let ahead = new_tat.checked_sub(now).ok_or(Overflow)?;
        let diff = self.tolerance.checked_sub(ahead).ok_or(Overflow)?;
        if diff < 0 {
            // Also above the burst: the wait is what redis_rate reports, though it never passes.
            return Ok(self.limited(-diff, ttl));
        }
        let now_ms = now / 1000;
        if ahead <= 0 {
            // A peek or a refund that leaves the bucket full: no key (a refund removes it).
            return Ok(Outcome {
                allowed: n,
                burst: self.burst,
                remaining: self.burst,
                retry_after: -1,
                reset_after: 0,
                write: if stored && n < 0 {
                    TatWrite::Delete
                } else {
                    TatWrite::Nothing
                },
            });
        }
        Ok(Outcome {
            allowed: n,
            burst: self.burst,
            remaining: diff / self.emission,
            retry_after: -1,
            reset_after: ahead,
            write: if n == 0 {
                TatWrite::Nothing
            } else {
                Self::store(new_tat, now_ms)
            },
        })
    }

    fn at_most(&self, tat: i64, now: i64, ttl: i64, n: i64) -> Result<Outcome, Overflow> {
        // What the tolerance leaves: whole tokens of T, the part of the next one kept.
        let diff = self.tolerance.checked_sub(ttl).ok_or(Overflow)?;
        if diff < self.emission {
            let retry_after = self.emission.checked_sub(diff).ok_or(Overflow)?;
            return Ok(self.limited(retry_after, ttl));
        }
        let available = diff / self.emission;
        let allowed = n.clamp(0, available);
        let new_tat = tat.checked_add(self.emission * allowed).ok_or(Overflow)?;
        Ok(Outcome {
            allowed,
            burst: self.burst,
            remaining: available - allowed,
            retry_after: -1,
            reset_after: new_tat - now,
            write: if allowed > 0 {
                Self::store(new_tat, now / 1000)
            } else {
                TatWrite::Nothing
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_800_000_000_206;
    const NOW_US: i64 = NOW * 1000;

    /// redis_rate's `PerSecond(10)`: burst 10, T = 100 ms.
    fn per_second_10() -> Bucket {
        Bucket::new(10, 10, 1.0).unwrap()
    }

    /// Runs calls at (ms after NOW, take), carrying the stored TAT; the replies.
    fn run(b: &Bucket, calls: &[(i64, Take)]) -> Vec<[i64; 5]> {
        let mut tat = None;
        calls
            .iter()
            .map(|&(at, take)| {
                let outcome = b.call(tat, NOW + at, take).unwrap();
                match outcome.write {
                    TatWrite::Store { tat: v, .. } => tat = Some(v),
                    TatWrite::Delete => tat = None,
                    TatWrite::Nothing => {}
                }
                outcome.reply()
            })
            .collect()
    }

    /// redis_rate's TestAllow, with the exact numbers where its script's floats drift.
    #[test]
    fn allow_n_as_redis_rate_means_it() {
        let replies = run(
            &per_second_10(),
            &[
                (0, Take::Exactly(1)),
                (0, Take::Exactly(2)),
                (0, Take::Exactly(7)),
                (0, Take::Exactly(1000)),
            ],
        );
        assert_eq!(replies[0], [1, 10, 9, -1, 100_000]);
        assert_eq!(replies[1], [2, 10, 7, -1, 300_000]);
        assert_eq!(replies[2], [7, 10, 0, -1, 1_000_000]);
        // Above the burst: the wait redis_rate reports (99.9 s later it still would not pass).
        assert_eq!(replies[3], [0, 10, 0, 100_000_000, 1_000_000]);
    }

    #[test]
    fn a_peek_writes_nothing() {
        let b = per_second_10();
        let fresh = b.call(None, NOW, Take::Exactly(0)).unwrap();
        assert_eq!(fresh.reply(), [0, 10, 10, -1, 0]);
        assert_eq!(fresh.write, TatWrite::Nothing);
        let used = b
            .call(Some(NOW_US + 300_000), NOW, Take::Exactly(0))
            .unwrap();
        assert_eq!(used.reply(), [0, 10, 7, -1, 300_000]);
        assert_eq!(used.write, TatWrite::Nothing);
        let at_most = b.call(None, NOW, Take::AtMost(0)).unwrap();
        assert_eq!(
            (at_most.reply(), at_most.write),
            (fresh.reply(), TatWrite::Nothing)
        );
    }

    /// redis_rate's TestAllowAtMost: takes what is there, keeps the part of the next token.
    #[test]
    fn at_most_takes_what_is_there() {
        let replies = run(
            &per_second_10(),
            &[
                (0, Take::Exactly(1)),
                (0, Take::AtMost(2)),
                (1, Take::AtMost(10)),
                (1, Take::AtMost(1000)),
                (1, Take::Exactly(0)),
            ],
        );
        assert_eq!(replies[1], [2, 10, 7, -1, 300_000]);
        // 1 ms later 7.01 tokens are there: 7 are taken, the 0.01 kept.
        assert_eq!(replies[2], [7, 10, 0, -1, 999_000]);
        assert_eq!(replies[3], [0, 10, 0, 99_000, 999_000]);
        assert_eq!(replies[4], [0, 10, 0, -1, 999_000]);
    }

    #[test]
    fn refunds_give_tokens_back_and_empty_the_bucket() {
        let b = per_second_10();
        let tat = NOW_US + 500_000;
        let back = b.call(Some(tat), NOW, Take::Exactly(-2)).unwrap();
        assert_eq!(back.reply(), [-2, 10, 7, -1, 300_000]);
        assert_eq!(
            back.write,
            TatWrite::Store {
                tat: NOW_US + 300_000,
                expires_at: NOW + 300
            }
        );
        let all = b.call(Some(tat), NOW, Take::Exactly(-100)).unwrap();
        assert_eq!(
            (all.reply(), all.write),
            ([-100, 10, 10, -1, 0], TatWrite::Delete)
        );
        let none = b.call(None, NOW, Take::Exactly(-1)).unwrap();
        assert_eq!(none.write, TatWrite::Nothing);
    }

    /// Burst 0 (redis_rate's `Limit{Burst: 0}`, which `GCRA` cannot say): nothing passes.
    #[test]
    fn burst_zero_admits_nothing() {
        let b = Bucket::new(0, 10, 1.0).unwrap();
        assert_eq!(
            b.call(None, NOW, Take::Exactly(1)).unwrap().reply(),
            [0, 0, 0, 100_000, 0]
        );
        assert_eq!(
            b.call(None, NOW, Take::AtMost(5)).unwrap().reply(),
            [0, 0, 0, 100_000, 0]
        );
        assert_eq!(
            b.call(None, NOW, Take::Exactly(0)).unwrap().reply(),
            [0, 0, 0, -1, 0]
        );
    }

    /// A key `GCRA k 9 10 1` wrote reads the same here with burst 10, and the other way round.
    #[test]
    fn reads_gcra_keys() {
        let gcra = super::super::Gcra::new(9, 10, 1.0);
        let written = gcra.call(None, NOW, 3).unwrap();
        let TatWrite::Store { tat, .. } = written.write else {
            panic!("allowed");
        };
        let here = per_second_10()
            .call(Some(tat), NOW, Take::Exactly(1))
            .unwrap();
        assert_eq!(here.reply(), [1, 10, 6, -1, 400_000]);
    }

    #[test]
    fn limited_retry_is_the_wait_in_microseconds() {
        // 1 per ms, burst 1 (redis_rate's TestRetryAfter): never more than 1 ms.
        let b = Bucket::new(1, 1, 0.001).unwrap();
        let replies = run(
            &b,
            &[
                (0, Take::Exactly(1)),
                (0, Take::Exactly(1)),
                (1, Take::Exactly(1)),
            ],
        );
        assert_eq!(replies[1], [0, 1, 0, 1_000, 1_000]);
        assert_eq!(replies[2][0], 1);
    }

    #[test]
    fn overflow_is_refused_and_any_clock_computes() {
        assert_eq!(Bucket::new(i64::MAX, 1, 1.0), Err(Overflow));
        let b = per_second_10();
        assert_eq!(b.call(None, NOW, Take::Exactly(i64::MAX)), Err(Overflow));
        assert_eq!(
            b.call(Some(i64::MAX - 1), NOW, Take::Exactly(1)),
            Err(Overflow)
        );
        for now in [i64::MIN, -1, 0, i64::MAX] {
            for take in [
                Take::Exactly(i64::MIN),
                Take::Exactly(1),
                Take::AtMost(i64::MAX),
            ] {
                let _ = b.call(None, now, take);
                let _ = b.call(Some(i64::MAX), now, take);
                let _ = b.call(Some(1), now, take);
            }
        }
        let _ = Bucket::new(i64::MAX / 2, 1, 999_999_999_999.0);
        // Burst 0 on a TAT at the end of time: the wait would pass i64.
        let none = Bucket::new(0, 10, 1.0).unwrap();
        assert_eq!(none.call(Some(i64::MAX), 0, Take::AtMost(1)), Err(Overflow));
        assert_eq!(
            none.call(Some(i64::MAX), 0, Take::Exactly(1)),
            Err(Overflow)
        );
    }
}
