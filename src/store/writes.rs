//! The writes a plan makes to a state: log entries (merged, recycled or new), the prune, the
//! value and the TTL rule.

use std::ops::ControlFlow;

use rand::RngCore;

use super::{Limiter, State};
use crate::args;
use crate::clock;
use crate::error::Error;
use crate::key::{Effect, Key, OpenMode, Writable};
use crate::keyspace::{self};
use crate::limiter::{Config, Entry, Order, Prune, Span};

/// Attempts at drawing a member id not already in the log. A 128-bit collision is practically
/// impossible; the bound only guarantees termination.
pub(super) const ID_ATTEMPTS: usize = 8;

impl<M: OpenMode> Limiter<'_, M> {
    /// The value, if it changed, and the TTL rule, after every acquisition (granted or not),
    /// release and KEEPSTATE: with a keep-alive, refresh it on all three keys; otherwise give the
    /// state keys the hash's expiry. `waiting` is how long a client blocked in ACQUIRE waits for
    /// its turn: the keep-alive runs from then, so a limiter never expires under its waiters.
    /// A value written takes its expiry in the same `SET ... PXAT`: on a grant, one write and one
    /// replicated command fewer than a `SET` and a `PEXPIREAT`.
    pub(super) fn write_value_and_ttls(
        &self,
        config: &Config,
        state: &State<'_, M>,
        value: Option<i64>,
        waiting: i64,
    ) where
        M: Writable,
    {
        // A keep-alive moves every call; the hash's own expiry rarely does, so it is compared
        // before it is written.
        let (expiry, unless_same) = if config.keep_alive > 0 {
            let ttl = config
                .keep_alive
                .saturating_add(waiting.max(0))
                .min(args::MAX_DURATION_MS);
            let at = expiry_in(ttl);
            self.hash.apply(Effect::PExpireAt(at));
            (Some(at), false)
        } else {
            (self.hash.expires_at(), true)
        };
        let expire = |key: &Key<'_, M>, at: i64| {
            if !(unless_same && key.expires_at() == Some(at)) {
                key.apply(Effect::PExpireAt(at));
            }
        };
        match (value, expiry) {
            // The value already expiring then (the hash's own TTL, unchanged): only the value.
            (Some(value), Some(at)) if unless_same && state.value.expires_at() == Some(at) => {
                state.value.apply(Effect::Set(value.to_string().as_bytes()));
            }
            (Some(value), Some(at)) => {
                state.value.apply(Effect::SetExpiringAt { value, at });
            }
            (Some(value), None) => {
                state.value.apply(Effect::Set(value.to_string().as_bytes()));
            }
            (None, Some(at)) => expire(&state.value, at),
            (None, None) => {}
        }
        if let Some(at) = expiry {
            expire(&state.permits, at);
        }
    }
}

impl<M: OpenMode> State<'_, M> {
    /// Logs an acquisition. Grants scored alike (the same millisecond, or the same precision
    /// bucket) share one entry: one already logged at that score has its permits raised, under
    /// the same id (ZREM + ZADD); otherwise a new entry gets a fresh random id. ZADD NX never
    /// overwrites a member, so an id already in the log (a 2^-128 chance) is redrawn instead of
    /// losing an acquisition.
    pub(super) fn log(&self, entry: Entry, may_merge: bool) -> Result<(), Error>
    where
        M: Writable,
    {
        if may_merge && self.merge(entry) {
            return Ok(());
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
                return Ok(());
            }
        }
        Err(Error::corrupt(
            self.permits.name(),
            "could not draw a unique permit id",
        ))
    }

    /// Adds `entry`'s permits to the entry already logged at its score, if there is one this
    /// module can read and the sum fits the member's 32 bits. False if nothing was merged.
    pub(super) fn merge(&self, entry: Entry) -> bool
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
        let Some(old) = found else {
            return false;
        };
        let Ok(decoded) = keyspace::decode_member(&old) else {
            return false;
        };
        let Some(permits) = decoded.permits.checked_add(entry.permits) else {
            return false;
        };
        let Some(merged) = keyspace::reencode_member(decoded.id, permits) else {
            return false;
        };
        // Added before the old one goes, so the log never empties (and keeps its TTL). An
        // identical member already there (a degenerate foreign id) leaves the grant to an entry
        // of its own.
        if !self.permits.apply(Effect::ZAdd {
            score: entry.score,
            member: &merged,
        }) {
            return false;
        }
        self.permits.apply(Effect::ZRem(&old));
        true
    }

    /// Logs `entry` by moving the oldest expired entry to its score (one `ZADD XX`) instead of
    /// pruning that entry and adding a fresh one (`ZREMRANGEBYSCORE` + `ZADD`): only when that
    /// entry holds exactly `entry`'s permits in the layout a fresh one would have, so the log
    /// reads the same to everyone (ids only keep entries apart, and an expired id is free). A
    /// steady limiter, where each grant replaces one expired grant, then makes one write per
    /// grant. False if nothing was moved; the caller then logs as usual.
    pub(super) fn recycle(&self, cutoff: i64, entry: Entry) -> bool
    where
        M: Writable,
    {
        if entry.score <= cutoff {
            return false;
        }
        let mut oldest = None;
        let _ = self
            .permits
            .zscan::<()>(Span::UpTo(cutoff), Order::OldestFirst, |_, member| {
                oldest = keyspace::fresh_layout(member, entry.permits);
                Ok(ControlFlow::Break(()))
            });
        oldest.is_some_and(|member| {
            self.permits.apply(Effect::ZRescore {
                score: entry.score,
                member: &member,
            })
        })
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

/// The absolute expiry, on the server's clock, of a TTL of `ms` set now.
pub(super) fn expiry_in(ms: i64) -> i64 {
    clock::server_ms().saturating_add(ms)
}
