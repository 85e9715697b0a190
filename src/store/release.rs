//! RELEASE: giving back permits of the newest acquisitions.

use std::ops::ControlFlow;

use super::dataset::{Dataset, OpenKey};
use super::writes::id_print;
use super::{score_ms, LimiterKeys, Resolved, Stored};
use crate::error::Error;
use crate::key::{Effect, OpenMode, Writable};
use crate::keyspace;
use crate::packed_log::PackedLog;
use crate::sliding_log::{self, Entry, Order, Prune, Span};

impl<M: OpenMode, D: Dataset> LimiterKeys<'_, M, D> {
    /// RELEASE: give back up to `permits` of the newest acquisitions. Returns how many.
    pub fn release(&self, client: Option<&[u8]>, permits: u32, now: i64) -> Result<i64, Error>
    where
        M: Writable,
    {
        let resolved = self.resolve_existing(client)?;
        let (config, state) = match &resolved.state {
            Stored::Keys(state) => (resolved.config(), state),
            Stored::Packed(log) => {
                let plan = sliding_log::release(log.config(), None, log, now, permits)
                    .map_err(|never| match never {})?;
                if plan.released > 0 || plan.prune != Prune::Nothing {
                    let mut log = log.clone();
                    log.apply_release(&plan);
                    self.write_packed(&log, 0);
                }
                return Ok(plan.released);
            }
        };
        let plan = sliding_log::release(config, state.stored_value()?, state, now, permits)?;
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
            self.write_value_and_ttls(config, state, plan.value, 0);
        }
        Ok(plan.released)
    }
}

impl<'c, M: OpenMode, D: Dataset> LimiterKeys<'c, M, D> {
    /// RATELIMIT.CANCEL of a granted ticket: gives back exactly the grant logged as `grant` on
    /// the resolved state, in the entry whose id has the fingerprint `member` (see
    /// [`sliding_log::give_back`]). Returns how many permits.
    pub fn give_back(
        &self,
        resolved: &Resolved<'c, M, D>,
        grant: Entry,
        member: u64,
        now: i64,
    ) -> Result<i64, Error>
    where
        M: Writable,
    {
        let (config, state) = match &resolved.state {
            Stored::Keys(state) => (resolved.config(), state),
            Stored::Packed(log) => return Ok(self.give_back_packed(log, grant, member, now)),
        };
        // The grant's entry: at its score, under the id it was logged with. A member this module
        // cannot read is not one it logged a grant in.
        let mut found = None;
        state.permits.zscan::<Error>(
            Span::Between(grant.score.saturating_sub(1), grant.score),
            Order::OldestFirst,
            |_, bytes| {
                let Ok(decoded) = keyspace::decode_member(bytes) else {
                    return Ok(ControlFlow::Continue(()));
                };
                if id_print(decoded.id) != member {
                    return Ok(ControlFlow::Continue(()));
                }
                found = Some((bytes.to_vec(), decoded.permits));
                Ok(ControlFlow::Break(()))
            },
        )?;
        let in_entry = found.as_ref().map(|(_, permits)| *permits);
        let stored = state.stored_value()?;
        let Some(plan) = sliding_log::give_back(config, stored, state, now, grant, in_entry)?
        else {
            return Ok(0);
        };
        let Some((old, _)) = found else {
            return Ok(0);
        };
        // Read and encoded before anything is written.
        let kept = match plan.entry_keeps {
            Some(permits) => {
                let new = sliding_log::split_member(&old, permits)
                    .map_err(|e| Error::corrupt(state.permits.name(), e.to_string()))?;
                Some((new, permits))
            }
            None => None,
        };
        state.prune(plan.prune);
        match kept {
            Some((new, permits)) => {
                let entry = Entry {
                    score: grant.score,
                    permits,
                };
                state.split(&old, &new, entry);
            }
            None => {
                state.permits.apply(Effect::ZRem(&old));
            }
        }
        self.write_value_and_ttls(config, state, plan.value, 0);
        Ok(plan.given_back)
    }
}

impl<M: OpenMode, D: Dataset> LimiterKeys<'_, M, D> {
    /// [`LimiterKeys::give_back`] on a ONEKEY limiter: its entries have no ids, so the grant's
    /// entry is the one at its score in the log of the same epoch (`member`); a log created
    /// anew since has another, and gives nothing back.
    fn give_back_packed(&self, log: &PackedLog, grant: Entry, member: u64, now: i64) -> i64
    where
        M: Writable,
    {
        let in_entry = if u64::from(log.epoch()) == member {
            log.held_at(grant.score)
        } else {
            None
        };
        let Ok(Some(plan)) = sliding_log::give_back(log.config(), None, log, now, grant, in_entry)
        else {
            return 0;
        };
        let mut log = log.clone();
        log.apply_give_back(&plan, grant.score);
        self.write_packed(&log, 0);
        plan.given_back
    }
}
