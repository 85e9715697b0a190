//! RELEASE: giving back permits of the newest acquisitions.

use std::ops::ControlFlow;

use super::{score_ms, LimiterKeys};
use crate::error::Error;
use crate::key::{Effect, OpenMode, Writable};
use crate::sliding_log::{self, Entry, Order, Prune, Span};

impl<M: OpenMode> LimiterKeys<'_, M> {
    /// RELEASE: give back up to `permits` of the newest acquisitions. Returns how many.
    pub fn release(&self, client: Option<&[u8]>, permits: u32, now: i64) -> Result<i64, Error>
    where
        M: Writable,
    {
        let config = self.require_config()?;
        let state = self.state(&config, client)?;
        let plan = sliding_log::release(&config, state.stored_value()?, &state, now, permits)?;
        // The entry to split, read before anything is written: the newest one after the prune
        // (which only removes older entries) and the removals.
        let mut shrink = None;
        if let Some(permits) = plan.shrink_newest_to {
            let mut skip = plan.remove_newest;
            state
                .permits
                .zscan(Span::Everything, Order::NewestFirst, |score, member| {
                    if skip > 0 {
                        skip -= 1;
                        return Ok::<_, Error>(ControlFlow::Continue(()));
                    }
                    let replacement = sliding_log::split_member(member, permits)
                        .map_err(|e| Error::corrupt(state.permits.name(), e.to_string()))?;
                    shrink = Some((member.to_vec(), score_ms(score), replacement, permits));
                    Ok(ControlFlow::Break(()))
                })?;
        }
        state.prune(plan.prune);
        if plan.remove_newest > 0 {
            state.permits.apply(Effect::ZRemNewest(plan.remove_newest));
        }
        if let Some((old, score, new, permits)) = shrink {
            state.split(&old, &new, Entry { score, permits });
        }
        if plan.released > 0 || plan.prune != Prune::Nothing || plan.value.is_some() {
            self.write_value_and_ttls(&config, &state, plan.value, 0);
        }
        Ok(plan.released)
    }
}

impl<M: OpenMode> LimiterKeys<'_, M> {
    /// RATELIMIT.CANCEL of a granted ticket: gives back exactly the grant logged as `grant` on
    /// the state of `client` (see [`sliding_log::give_back`]). Returns how many permits.
    pub fn give_back(&self, client: Option<&[u8]>, grant: Entry, now: i64) -> Result<i64, Error>
    where
        M: Writable,
    {
        let config = self.require_config()?;
        let state = self.state(&config, client)?;
        let Some(plan) =
            sliding_log::give_back(&config, state.stored_value()?, &state, now, grant)?
        else {
            return Ok(0);
        };
        // The members to change, read before anything is written, in the order the plan counted
        // them.
        let mut removed = Vec::with_capacity(plan.remove);
        let mut shrink = None;
        state.permits.zscan(
            Span::Between(plan.score.saturating_sub(1), plan.score),
            Order::OldestFirst,
            |_, member| {
                if removed.len() < plan.remove {
                    removed.push(member.to_vec());
                    return Ok::<_, Error>(ControlFlow::Continue(()));
                }
                if let Some(permits) = plan.shrink_next_to {
                    let replacement = sliding_log::split_member(member, permits)
                        .map_err(|e| Error::corrupt(state.permits.name(), e.to_string()))?;
                    shrink = Some((member.to_vec(), replacement, permits));
                }
                Ok(ControlFlow::Break(()))
            },
        )?;
        state.prune(plan.prune);
        if let Some((old, new, permits)) = shrink {
            let kept = Entry {
                score: plan.score,
                permits,
            };
            state.split(&old, &new, kept);
        }
        for member in &removed {
            state.permits.apply(Effect::ZRem(member));
        }
        self.write_value_and_ttls(&config, &state, plan.value, 0);
        Ok(plan.given_back)
    }
}
