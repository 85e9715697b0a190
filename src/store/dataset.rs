//! The seam under the store: what it reads and writes of a key ([`OpenKey`]) and what it asks of
//! the server around the keys ([`Dataset`]), implemented by the server's [`Key`] and [`Server`],
//! and in the unit tests by an in-memory dataset.
//!
//! Both are used through generics, never `dyn`: the server's store compiles to the same calls
//! as if it named [`Key`] itself.

use std::ops::{ControlFlow, Deref};
use std::sync::atomic::Ordering;

use redis_module::{Context, RedisString};

use super::open::Caller;
use crate::config_cache::{self, Known};
use crate::error::Error;
use crate::key::{Effect, Key, KeyType, OpenMode, StaticString, Writable};
use crate::migration;
use crate::sliding_log::{Config, Order, Span};

/// A key as the store reads and writes it: a limiter's hash or ONEKEY string, a state's value
/// string or permits zset. Reads of a key of another type answer as for a missing key. Writes
/// are [`Effect`]s, made only through a key opened for writing.
pub trait OpenKey<M: OpenMode> {
    /// A hash field's value as read.
    type Field: Deref<Target = [u8]>;

    fn name(&self) -> &[u8];
    fn key_type(&self) -> KeyType;
    fn exists(&self) -> bool {
        self.key_type() != KeyType::Empty
    }
    /// Reads the string value with `read`, if this is a string key.
    fn read_string<R>(&self, read: impl FnOnce(&[u8]) -> R) -> Option<R>;
    /// Several hash fields (absent fields are None).
    fn hash_get<const N: usize>(&self, fields: [&StaticString; N]) -> [Option<Self::Field>; N];
    /// The number of fields of a hash.
    fn hash_len(&self) -> usize;
    /// Visits `(score, member)` pairs of a zset in a score span, in `order`.
    fn zscan<E>(
        &self,
        span: Span,
        order: Order,
        visit: impl FnMut(f64, &[u8]) -> Result<ControlFlow<()>, E>,
    ) -> Result<(), E>;
    /// Whether a zset has a member in a score span.
    fn any_in(&self, span: Span) -> bool;
    /// The number of members of a zset.
    fn zcard(&self) -> usize;
    /// The absolute expiry in unix ms, or None.
    fn expires_at(&self) -> Option<i64>;
    /// Applies one write; whether it changed anything (see [`Key::apply`]).
    fn apply(&self, effect: Effect<'_>) -> bool
    where
        M: Writable;
}

/// What the store asks of the server beside its keys: opening them, the caller's ACL, a slot
/// migration's split, the configurations kept (see [`config_cache`]), the database and the
/// clock TTLs run on. Nothing here decides: the store's jobs run the same on any dataset.
pub trait Dataset {
    type Key<M: OpenMode>: OpenKey<M>;

    /// The key named `name`.
    fn open<M: OpenMode>(&self, name: &[u8]) -> Self::Key<M>;
    /// The OVERALL state's value key, and how to open its permits key, by the names kept with
    /// the configuration, if they were kept (saving making their names again). The permits key
    /// is opened only once the value key passed its checks.
    #[allow(clippy::type_complexity)] // A pair, the second opened on demand.
    fn open_kept_overall<M: OpenMode>(
        &self,
    ) -> Option<(Self::Key<M>, impl FnOnce() -> Self::Key<M> + '_)>;
    /// Refuses a key derived from the limiter's name that the caller may not access.
    fn check_access<M: OpenMode>(&self, key: &Self::Key<M>) -> Result<(), Error>;
    /// Refuses a limiter of `name` whose `keys` a slot migration split (see [`migration`]).
    fn refuse_split<M: OpenMode>(&self, name: &[u8], keys: &[&Self::Key<M>]) -> Result<(), Error>;
    /// The configuration kept for this limiter, if its hash still has `fields` fields.
    fn kept_config(&self, fields: usize) -> Option<Config>;
    /// Offers a configuration just read from the limiter's hash to be kept, if
    /// `without_field_ttls` (asked only then: see [`Dataset::without_field_ttls`]).
    fn keep_config(
        &self,
        name: &[u8],
        fields: usize,
        config: Config,
        without_field_ttls: impl FnOnce() -> bool,
    );
    /// Whether the configuration's fields just read from the limiter's `hash` (`present`, a bit
    /// each in `config_cache::CONFIG_FIELDS`' order) have no TTL of their own: the one check
    /// before a configuration is kept, by the config cache or by a queue of waiters, since such
    /// a TTL can pass with no event until the server deletes the field.
    fn without_field_ttls<M: OpenMode>(&self, hash: &Self::Key<M>, present: u8) -> bool;
    /// The database the keys are in.
    fn db(&self) -> i32;
    /// The server's clock, in unix ms: what TTLs run on.
    fn server_ms(&self) -> i64;
}

/// The running server's selected database, as one limiter's request sees it: who calls, and
/// what the config cache keeps of the limiter.
pub struct Server<'c> {
    pub(super) ctx: &'c Context,
    pub(super) caller: Caller,
    pub(super) db: i32,
    pub(super) known: Option<Known>,
}

impl<'c> Dataset for Server<'c> {
    type Key<M: OpenMode> = Key<'c, M>;

    #[inline]
    fn open<M: OpenMode>(&self, name: &[u8]) -> Key<'c, M> {
        Key::open(self.ctx, name)
    }

    #[inline]
    fn open_kept_overall<M: OpenMode>(
        &self,
    ) -> Option<(Key<'c, M>, impl FnOnce() -> Key<'c, M> + '_)> {
        let known = self.known.as_ref()?;
        let value = known.value.as_ref()?.safe_clone(self.ctx);
        let permits = known.permits.as_ref()?.safe_clone(self.ctx);
        Some((Key::open_named(self.ctx, value), move || {
            Key::open_named(self.ctx, permits)
        }))
    }

    #[inline]
    fn check_access<M: OpenMode>(&self, key: &Key<'c, M>) -> Result<(), Error> {
        self.caller.check(self.ctx, key)
    }

    #[inline]
    fn refuse_split<M: OpenMode>(&self, name: &[u8], keys: &[&Key<'c, M>]) -> Result<(), Error> {
        if !super::open::CLUSTER.load(Ordering::Relaxed) {
            return Ok(());
        }
        migration::refuse_split(self.ctx, name, keys)
    }

    #[inline]
    fn kept_config(&self, fields: usize) -> Option<Config> {
        self.known
            .as_ref()
            .filter(|known| known.fields == fields)
            .map(|known| known.config)
    }

    fn keep_config(
        &self,
        name: &[u8],
        fields: usize,
        config: Config,
        without_field_ttls: impl FnOnce() -> bool,
    ) {
        config_cache::keep(self.ctx, self.db, name, fields, config, without_field_ttls);
    }

    fn without_field_ttls<M: OpenMode>(&self, hash: &Key<'c, M>, present: u8) -> bool {
        config_cache::fields_without_ttls(self.ctx, Key::name(hash), present, || {
            hash.has_field_ttls()
        })
    }

    #[inline]
    fn db(&self) -> i32 {
        self.db
    }

    #[inline]
    fn server_ms(&self) -> i64 {
        crate::clock::server_ms()
    }
}

impl<'c, M: OpenMode> OpenKey<M> for Key<'c, M> {
    type Field = RedisString;

    #[inline]
    fn name(&self) -> &[u8] {
        Key::name(self)
    }
    #[inline]
    fn key_type(&self) -> KeyType {
        Key::key_type(self)
    }
    #[inline]
    fn exists(&self) -> bool {
        Key::exists(self)
    }
    #[inline]
    fn read_string<R>(&self, read: impl FnOnce(&[u8]) -> R) -> Option<R> {
        Key::read_string(self, read)
    }
    #[inline]
    fn hash_get<const N: usize>(&self, fields: [&StaticString; N]) -> [Option<RedisString>; N] {
        Key::hash_get(self, fields)
    }
    #[inline]
    fn hash_len(&self) -> usize {
        Key::hash_len(self)
    }
    #[inline]
    fn zscan<E>(
        &self,
        span: Span,
        order: Order,
        visit: impl FnMut(f64, &[u8]) -> Result<ControlFlow<()>, E>,
    ) -> Result<(), E> {
        Key::zscan(self, span, order, visit)
    }
    #[inline]
    fn any_in(&self, span: Span) -> bool {
        Key::any_in(self, span)
    }
    #[inline]
    fn zcard(&self) -> usize {
        Key::zcard(self)
    }
    #[inline]
    fn expires_at(&self) -> Option<i64> {
        Key::expires_at(self)
    }
    #[inline]
    fn apply(&self, effect: Effect<'_>) -> bool
    where
        M: Writable,
    {
        Key::apply(self, effect)
    }
}
