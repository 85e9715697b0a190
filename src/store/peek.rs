//! PEEK: what ALLOW would answer now, read without taking or writing anything, and when the
//! oldest permit still logged frees (what a moving window's start is computed from).

use std::ops::ControlFlow;

use super::acquire::{Turn, Verdict};
use super::LimiterKeys;
use crate::error::Error;
use crate::key::OpenMode;
use crate::sliding_log::{Order, PermitLog, Reset, Span};

/// ALLOW's verdict for a request not made, and the wait until the oldest live permit frees.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Peek {
    /// What ALLOW would reply for the same permits now (nothing logged: `logged` is None).
    pub verdict: Verdict,
    /// Milliseconds until the oldest entry still in the window expires; 0 if none is live.
    pub oldest_after: i64,
}

impl<M: OpenMode> LimiterKeys<'_, M> {
    /// Decides an acquisition of `permits` exactly as ALLOW would (behind queued ACQUIRE
    /// clients, with `reset_after`), through the same read path, and applies none of it.
    pub fn peek(&self, client: Option<&[u8]>, permits: u32, now: i64) -> Result<Peek, Error> {
        let attempt = self.attempt(
            client,
            permits,
            now,
            Turn::BehindWaiters,
            None,
            Reset::Wanted,
        )?;
        let verdict = Verdict::of(&attempt.plan, &attempt.config, attempt.queued, None);
        let cutoff = now.saturating_sub(attempt.config.interval);
        let mut oldest = None;
        attempt
            .state
            .scan(Span::After(cutoff), Order::OldestFirst, &mut |entry| {
                oldest = Some(entry.score);
                ControlFlow::Break(())
            })?;
        let oldest_after = oldest.map_or(0, |score| {
            score
                .saturating_add(attempt.config.interval)
                .saturating_sub(attempt.now)
                .max(1)
        });
        Ok(Peek {
            verdict: Verdict {
                logged: None,
                ..verdict
            },
            oldest_after,
        })
    }
}
