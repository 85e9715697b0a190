//! PEEK: what ALLOW would answer now, read without taking or writing anything, and when the
//! oldest permit still logged frees (what a moving window's start is computed from).

use std::ops::ControlFlow;

use super::acquire::{Acquisition, Verdict};
use super::{LimiterKeys, Resolved};
use crate::error::Error;
use crate::key::OpenMode;
use crate::sliding_log::{Order, PermitLog, Span};

/// ALLOW's verdict for a request not made, and the wait until the oldest live permit frees.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Peek {
    /// What ALLOW would reply for the same permits now (nothing logged: `logged` is None).
    pub verdict: Verdict,
    /// Milliseconds until the oldest entry still in the window expires; 0 if none is live.
    pub oldest_after: i64,
}

impl<'c, M: OpenMode> LimiterKeys<'c, M> {
    /// Decides `acquisition` on `resolved` exactly as ALLOW would (the same read path: behind
    /// queued ACQUIRE clients, with `reset_after` when wanted), and applies none of it.
    pub fn peek(
        &self,
        resolved: &Resolved<'c, M>,
        acquisition: Acquisition,
    ) -> Result<Peek, Error> {
        let attempt = self.attempt(resolved, acquisition)?;
        let verdict = attempt.verdict_unwritten();
        let config = resolved.config();
        let now = acquisition.now;
        let cutoff = now.saturating_sub(config.interval);
        let mut oldest = None;
        resolved
            .state
            .scan(Span::After(cutoff), Order::OldestFirst, &mut |entry| {
                oldest = Some(entry.score);
                ControlFlow::Break(())
            })?;
        let oldest_after = oldest.map_or(0, |score| {
            score
                .saturating_add(config.interval)
                .saturating_sub(now)
                .max(1)
        });
        Ok(Peek {
            verdict,
            oldest_after,
        })
    }
}
