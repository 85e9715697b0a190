//! PEEK: what ALLOW would answer now, read without taking or writing anything, and when the
//! oldest permit still logged frees (what a moving window's start is computed from).

use std::ops::ControlFlow;

use super::acquire::{Acquisition, Verdict};
use super::dataset::Dataset;
use super::{LimiterKeys, Resolved};
use crate::error::Error;
use crate::key::OpenMode;
use crate::sliding_log::{self, Order, Outcome, PermitLog, Span};

/// ALLOW's verdict for a request not made, and the wait until the oldest live permit frees.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Peek {
    /// What ALLOW would reply for the same permits now (nothing logged: `logged` is None).
    pub verdict: Verdict,
    /// Milliseconds until the oldest entry still in the window expires; 0 if none is live.
    pub oldest_after: i64,
}

impl<'c, M: OpenMode, D: Dataset> LimiterKeys<'c, M, D> {
    /// Decides `acquisition` on `resolved` exactly as ALLOW would (the same read path: behind
    /// queued ACQUIRE clients, with `reset_after` when wanted), and applies none of it.
    pub fn peek(
        &self,
        resolved: &Resolved<'c, M, D>,
        acquisition: Acquisition,
    ) -> Result<Peek, Error> {
        let attempt = self.attempt(resolved, acquisition)?;
        let verdict = attempt.verdict_unwritten();
        let oldest_after = oldest_after(resolved, acquisition.now)?;
        Ok(Peek {
            verdict,
            oldest_after,
        })
    }

    /// PEEK for no permits: the limiter as it stands, asking for nothing. Granted (nothing is
    /// asked), `remaining` the permits available now (those queued ACQUIRE clients wait for
    /// counted as taken, as ALLOW counts them) and `reset_after` when every logged permit frees.
    pub fn look(
        &self,
        resolved: &Resolved<'c, M, D>,
        queued: Option<u64>,
        now: i64,
    ) -> Result<Peek, Error> {
        let config = resolved.config();
        let state = &resolved.state;
        let (available, reset_after) =
            sliding_log::status(config, state.stored_value()?, state, now)?;
        let ahead = queued.map_or(0, |n| i64::try_from(n).unwrap_or(i64::MAX));
        let verdict = Verdict {
            outcome: Outcome::Acquired,
            limit: config.rate,
            remaining: available.saturating_sub(ahead).clamp(0, config.rate.max(0)),
            reset_after,
            logged: None,
        };
        Ok(Peek {
            verdict,
            oldest_after: oldest_after(resolved, now)?,
        })
    }
}

/// Milliseconds until the oldest entry still in the window frees; 0 if none is live.
fn oldest_after<M: OpenMode, D: Dataset>(
    resolved: &Resolved<'_, M, D>,
    now: i64,
) -> Result<i64, Error> {
    let interval = resolved.config().interval;
    let cutoff = now.saturating_sub(interval);
    let mut oldest = None;
    resolved
        .state
        .scan(Span::After(cutoff), Order::OldestFirst, &mut |entry| {
            oldest = Some(entry.score);
            ControlFlow::Break(())
        })?;
    Ok(oldest.map_or(0, |score| {
        score.saturating_add(interval).saturating_sub(now).max(1)
    }))
}
