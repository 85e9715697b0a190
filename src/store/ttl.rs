//! The TTL rule, applied after every acquisition (granted or not), release and KEEPSTATE, with
//! the value it writes: with a keep-alive, refresh it on all three keys; otherwise give the state
//! keys the hash's expiry.

use std::marker::PhantomData;

use super::dataset::{Dataset, OpenKey};
use super::{LimiterKeys, State};
use crate::args;
use crate::key::{Effect, OpenMode, Writable};
use crate::sliding_log::Config;

impl<M: OpenMode, D: Dataset> LimiterKeys<'_, M, D> {
    /// The value, if it changed, and the TTL rule (see [`apply`]) on the limiter's hash and
    /// `state`.
    pub(super) fn write_value_and_ttls(
        &self,
        config: &Config,
        state: &State<M, D>,
        value: Option<i64>,
        waiting: i64,
    ) where
        M: Writable,
    {
        apply(
            config.keep_alive,
            waiting,
            || self.data.server_ms(),
            &Ttl::of(&self.hash),
            &Ttl::of(&state.value),
            &Ttl::of(&state.permits),
            value,
        );
    }

    /// The absolute expiry, on the server's clock, of a TTL of `ms` set now.
    pub(super) fn expiry_in(&self, ms: i64) -> i64 {
        self.data.server_ms().saturating_add(ms)
    }
}

/// A key the TTL rule writes to.
pub(super) struct Ttl<'k, K, M>(&'k K, PhantomData<M>);

impl<'k, K: OpenKey<M>, M: Writable> Ttl<'k, K, M> {
    fn of(key: &'k K) -> Self {
        Ttl(key, PhantomData)
    }
}

/// What the TTL rule reads of a key and writes to it; a store's key, as [`Ttl`], is the one the
/// store uses.
pub(super) trait Expiring {
    /// The key's absolute expiry in ms, if it has one.
    fn expires_at(&self) -> Option<i64>;
    fn expire_at(&self, at: i64);
}

/// The value string's writes, beside its expiry.
pub(super) trait ValueKey: Expiring {
    fn set(&self, value: i64);
    /// `SET ... PXAT`: the value and its expiry in one write.
    fn set_expiring(&self, value: i64, at: i64);
}

impl<K: OpenKey<M>, M: Writable> Expiring for Ttl<'_, K, M> {
    #[inline]
    fn expires_at(&self) -> Option<i64> {
        self.0.expires_at()
    }
    #[inline]
    fn expire_at(&self, at: i64) {
        self.0.apply(Effect::PExpireAt(at));
    }
}

impl<K: OpenKey<M>, M: Writable> ValueKey for Ttl<'_, K, M> {
    #[inline]
    fn set(&self, value: i64) {
        self.0.apply(Effect::Set(value.to_string().as_bytes()));
    }
    #[inline]
    fn set_expiring(&self, value: i64, at: i64) {
        self.0.apply(Effect::SetExpiringAt { value, at });
    }
}

/// The TTL rule. `waiting` is how long a client blocked in ACQUIRE waits for its turn: the
/// keep-alive runs from then, so a limiter never expires under its waiters. A value written
/// takes its expiry in the same `SET ... PXAT`: on a grant, one write and one replicated command
/// fewer than a `SET` and a `PEXPIREAT`. `now` is the server's clock, read only for a keep-alive.
#[inline]
pub(super) fn apply(
    keep_alive: i64,
    waiting: i64,
    now: impl FnOnce() -> i64,
    hash: &impl Expiring,
    value_key: &impl ValueKey,
    permits: &impl Expiring,
    value: Option<i64>,
) {
    // A keep-alive moves every call; the hash's own expiry rarely does, so it is compared
    // before it is written.
    let (expiry, unless_same) = if keep_alive > 0 {
        let ttl = keep_alive
            .saturating_add(waiting.max(0))
            .min(args::MAX_DURATION_MS);
        let at = now().saturating_add(ttl);
        hash.expire_at(at);
        (Some(at), false)
    } else {
        (hash.expires_at(), true)
    };
    match (value, expiry) {
        // The value already expiring then (the hash's own TTL, unchanged): only the value.
        (Some(value), Some(at)) if unless_same && value_key.expires_at() == Some(at) => {
            value_key.set(value);
        }
        (Some(value), Some(at)) => value_key.set_expiring(value, at),
        (Some(value), None) => value_key.set(value),
        (None, Some(at)) => expire(value_key, at, unless_same),
        (None, None) => {}
    }
    if let Some(at) = expiry {
        expire(permits, at, unless_same);
    }
}

/// Gives `key` the expiry `at`, unless `unless_same` and it already has it.
fn expire(key: &impl Expiring, at: i64, unless_same: bool) {
    if !(unless_same && key.expires_at() == Some(at)) {
        key.expire_at(at);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::{Cell, RefCell};

    /// A key that records the writes made to it.
    #[derive(Default)]
    struct FakeKey {
        expiry: Cell<Option<i64>>,
        writes: RefCell<Vec<String>>,
    }

    impl FakeKey {
        fn expiring(at: i64) -> Self {
            let key = FakeKey::default();
            key.expiry.set(Some(at));
            key
        }
        fn writes(&self) -> Vec<String> {
            self.writes.take()
        }
    }

    impl Expiring for FakeKey {
        fn expires_at(&self) -> Option<i64> {
            self.expiry.get()
        }
        fn expire_at(&self, at: i64) {
            self.expiry.set(Some(at));
            self.writes.borrow_mut().push(format!("PEXPIREAT {at}"));
        }
    }

    impl ValueKey for FakeKey {
        fn set(&self, value: i64) {
            self.writes.borrow_mut().push(format!("SET {value}"));
        }
        fn set_expiring(&self, value: i64, at: i64) {
            self.expiry.set(Some(at));
            self.writes
                .borrow_mut()
                .push(format!("SET {value} PXAT {at}"));
        }
    }

    const NOW: i64 = 1_000_000;

    fn no_clock() -> i64 {
        panic!("the clock is read only for a keep-alive")
    }

    #[test]
    fn a_keep_alive_refreshes_all_three_keys_from_the_waiters_turn() {
        let (hash, value, permits) = (FakeKey::default(), FakeKey::default(), FakeKey::default());
        apply(500, 200, || NOW, &hash, &value, &permits, Some(3));
        assert_eq!(hash.writes(), ["PEXPIREAT 1000700"]);
        assert_eq!(value.writes(), ["SET 3 PXAT 1000700"]);
        assert_eq!(permits.writes(), ["PEXPIREAT 1000700"]);
        // Refreshed even when already expiring then: a keep-alive moves on every call.
        apply(500, 200, || NOW, &hash, &value, &permits, None);
        assert_eq!(value.writes(), ["PEXPIREAT 1000700"]);
        assert_eq!(permits.writes(), ["PEXPIREAT 1000700"]);
    }

    #[test]
    fn a_keep_alive_is_capped_at_the_longest_duration() {
        let (hash, value, permits) = (FakeKey::default(), FakeKey::default(), FakeKey::default());
        apply(
            args::MAX_DURATION_MS,
            10,
            || NOW,
            &hash,
            &value,
            &permits,
            None,
        );
        let at = NOW + args::MAX_DURATION_MS;
        assert_eq!(hash.writes(), [format!("PEXPIREAT {at}")]);
    }

    #[test]
    fn without_a_keep_alive_the_state_takes_the_hashs_expiry_once() {
        let hash = FakeKey::expiring(5000);
        let (value, permits) = (FakeKey::default(), FakeKey::expiring(5000));
        apply(0, 0, no_clock, &hash, &value, &permits, Some(7));
        assert!(
            hash.writes().is_empty(),
            "the hash's own expiry is not rewritten"
        );
        assert_eq!(value.writes(), ["SET 7 PXAT 5000"]);
        assert!(permits.writes().is_empty(), "already expiring then");
        // The value already expiring then: only the value is written.
        apply(0, 0, no_clock, &hash, &value, &permits, Some(6));
        assert_eq!(value.writes(), ["SET 6"]);
        apply(0, 0, no_clock, &hash, &value, &permits, None);
        assert!(value.writes().is_empty() && permits.writes().is_empty());
    }

    #[test]
    fn without_any_expiry_only_the_value_is_written() {
        let (hash, value, permits) = (FakeKey::default(), FakeKey::default(), FakeKey::default());
        apply(0, 0, no_clock, &hash, &value, &permits, Some(2));
        assert_eq!(value.writes(), ["SET 2"]);
        assert!(hash.writes().is_empty() && permits.writes().is_empty());
        apply(0, 0, no_clock, &hash, &value, &permits, None);
        assert!(value.writes().is_empty());
    }
}
