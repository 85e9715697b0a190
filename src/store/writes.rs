//! The log writes a plan makes to a state: entries merged, recycled or new, and the prune.

use std::hash::{BuildHasher, BuildHasherDefault, DefaultHasher};
use std::ops::ControlFlow;

use rand::RngCore;

use super::dataset::{Dataset, OpenKey};
use super::State;
use crate::error::Error;
use crate::key::{Effect, OpenMode, Writable};
use crate::keyspace;
use crate::sliding_log::{self, Entry, Order, Prune, Span};

/// Attempts at drawing a member id not already in the log. A 128-bit collision is practically
/// impossible; the bound only guarantees termination.
pub(super) const ID_ATTEMPTS: usize = 8;

/// A fingerprint of a log entry's id, to find the entry a grant went into again (RATELIMIT.CANCEL):
/// ids are random, so two entries of one log share a fingerprint with a chance of 2^-64.
pub fn id_print(id: &[u8]) -> u64 {
    BuildHasherDefault::<DefaultHasher>::default().hash_one(id)
}

/// The fingerprint of a member's id, if it is one this module can read.
pub fn member_print(member: &[u8]) -> Option<u64> {
    keyspace::decode_member(member)
        .ok()
        .map(|decoded| id_print(decoded.id))
}

impl<M: OpenMode, D: Dataset> State<M, D> {
    /// Logs an acquisition; returns the fingerprint ([`id_print`]) of the entry it went into.
    /// Grants scored alike (the same millisecond, or the same precision bucket) share one
    /// entry: one already logged at that score has its permits raised, under
    /// the same id (ZREM + ZADD); otherwise a new entry gets a fresh random id. ZADD NX never
    /// overwrites a member, so an id already in the log (a 2^-128 chance) is redrawn instead of
    /// losing an acquisition.
    pub(super) fn log(&self, entry: Entry, may_merge: bool) -> Result<u64, Error>
    where
        M: Writable,
    {
        if may_merge {
            if let Some(print) = self.merge(entry) {
                return Ok(print);
            }
        }
        let mut rng = rand::rng();
        for _ in 0..ID_ATTEMPTS {
            let mut id = [0u8; keyspace::ID_LEN];
            rng.fill_bytes(&mut id);
            let member = keyspace::encode_member(&id, entry.permits);
            if self.permits.apply(Effect::ZAdd {
                score: entry.score,
                member: &member,
            }) {
                return Ok(id_print(&id));
            }
        }
        Err(Error::corrupt(
            self.permits.name(),
            "could not draw a unique permit id",
        ))
    }

    /// Adds `entry`'s permits to the entry already logged at its score, if there is one it may
    /// join (see [`sliding_log::merged_member`]); returns that entry's fingerprint. None if
    /// nothing was merged.
    pub(super) fn merge(&self, entry: Entry) -> Option<u64>
    where
        M: Writable,
    {
        let mut found = None;
        let _ = self.permits.zscan::<()>(
            Span::Between(entry.score.saturating_sub(1), entry.score),
            Order::NewestFirst,
            |_, member| {
                found = Some(member.to_vec());
                Ok(ControlFlow::Break(()))
            },
        );
        let old = found?;
        let merged = sliding_log::merged_member(&old, entry.permits)?;
        let print = member_print(&merged)?;
        // Added before the old one goes, so the log never empties (and keeps its TTL). An
        // identical member already there (a degenerate foreign id) leaves the grant to an entry
        // of its own.
        if !self.permits.apply(Effect::ZAdd {
            score: entry.score,
            member: &merged,
        }) {
            return None;
        }
        self.permits.apply(Effect::ZRem(&old));
        Some(print)
    }

    /// Logs `entry` by moving the oldest expired entry (at or below `cutoff`) to its score (one
    /// `ZADD XX`) instead of pruning that entry and adding a fresh one (`ZREMRANGEBYSCORE` +
    /// `ZADD`), where [`sliding_log::recycled_member`] allows it. A steady limiter, where each grant
    /// replaces one expired grant, then makes one write per grant. Returns the fingerprint of
    /// the entry moved; None if nothing was moved, and the caller then logs as usual.
    pub(super) fn recycle(&self, cutoff: i64, entry: Entry) -> Option<u64>
    where
        M: Writable,
    {
        let mut oldest = None;
        let _ = self
            .permits
            .zscan::<()>(Span::UpTo(cutoff), Order::OldestFirst, |_, member| {
                oldest = sliding_log::recycled_member(member, entry.permits);
                Ok(ControlFlow::Break(()))
            });
        let member = oldest?;
        let print = member_print(&member)?;
        self.permits
            .apply(Effect::ZRescore {
                score: entry.score,
                member: &member,
            })
            .then_some(print)
    }

    /// Replaces the entry `old` by `new`, the same id with the fewer permits of `kept` (an entry
    /// given back in part). Added before the old one goes, so the log never empties (and keeps
    /// its TTL). An identical member already there (a degenerate foreign id) gets the permits
    /// kept under a fresh id instead: the old member never goes without its replacement.
    pub(super) fn split(&self, old: &[u8], new: &[u8], kept: Entry)
    where
        M: Writable,
    {
        let added = self.permits.apply(Effect::ZAdd {
            score: kept.score,
            member: new,
        }) || self.log(kept, false).is_ok();
        if added {
            self.permits.apply(Effect::ZRem(old));
        }
    }

    /// Removes what a plan prunes: expired entries, or the whole log in O(1).
    pub(super) fn prune(&self, prune: Prune)
    where
        M: Writable,
    {
        match prune {
            Prune::Nothing => {}
            Prune::UpTo(cutoff) => {
                self.permits.apply(Effect::ZRemRangeByScore(cutoff));
            }
            Prune::All => {
                self.permits.apply(Effect::Unlink);
            }
        }
    }
}
