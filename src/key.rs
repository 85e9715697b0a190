//! An open Redis key with the typed operations the limiter needs, safe over the raw module API.
//!
//! Every write method also replicates its effect as a plain Redis command (`SET`, `HSET`, `ZADD`,
//! `ZREMRANGEBYSCORE`, `PEXPIREAT`, `UNLINK` ...) and fires the keyspace event that command fires.
//! Writing through this type is the only way the module writes, so no write can reach the
//! dataset without reaching replicas and the AOF, replicas never re-run the time- and
//! random-dependent logic, and keyspace-event consumers see what they would see for Redisson's
//! scripts (or on a replica applying the effects).

use std::ffi::CStr;
use std::marker::PhantomData;
use std::ops::ControlFlow;
use std::os::raw::c_int;
use std::sync::atomic::{AtomicBool, Ordering};

use redis_module::{raw, Context, RedisString, RedisValue};

pub(crate) use crate::ffi::key::shows_field_ttls;
use crate::ffi::key::{self as ffi_key, Arg, RawKey, ScoreBounds, ZAdd};
pub(crate) use crate::ffi::key::{KeyType, StaticString};
use crate::sliding_log::{Order, Span};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    Read,
    Write,
}

/// How a key is opened, as a type: a key opened for reading has no `apply`, so writing through
/// it does not compile.
pub trait OpenMode: 'static {
    const ACCESS: Access;
}

/// The modes that may write.
pub trait Writable: OpenMode {}

/// Opened for reading only.
pub enum Read {}

/// Opened for reading and writing.
pub enum Write {}

impl OpenMode for Read {
    const ACCESS: Access = Access::Read;
}

impl OpenMode for Write {
    const ACCESS: Access = Access::Write;
}

impl Writable for Write {}

pub struct Key<'c, M: OpenMode> {
    ctx: &'c Context,
    raw: RawKey,
    name: RedisString,
    mode: PhantomData<M>,
}

/// Words the replicated commands use, made once.
static KEEPTTL: StaticString = StaticString::new(b"KEEPTTL");
static PXAT: StaticString = StaticString::new(b"PXAT");
static XX: StaticString = StaticString::new(b"XX");
static MINUS_INF: StaticString = StaticString::new(b"-inf");
static MINUS_ONE: StaticString = StaticString::new(b"-1");

impl<'c, M: OpenMode> Key<'c, M> {
    /// Opens the key `name`: named by another reference to the command's own argument when
    /// `name` is the key it was given, else by a copy.
    pub fn open(ctx: &'c Context, name: &[u8]) -> Self {
        let name = crate::ffi::command::held_argument(ctx, name)
            .unwrap_or_else(|| RedisString::create_from_slice(ctx.ctx, name));
        Self::open_named(ctx, name)
    }

    /// Opens the key of a name string the caller already has.
    pub fn open_named(ctx: &'c Context, name: RedisString) -> Self {
        let raw = RawKey::open(ctx, &name, M::ACCESS == Access::Write);
        Key {
            ctx,
            raw,
            name,
            mode: PhantomData,
        }
    }

    pub fn name(&self) -> &[u8] {
        self.name.as_slice()
    }

    pub fn name_string(&self) -> &RedisString {
        &self.name
    }

    pub fn key_type(&self) -> KeyType {
        self.raw.key_type()
    }

    pub fn exists(&self) -> bool {
        self.key_type() != KeyType::Empty
    }

    /// Reads the string value with `read`, if this is a string key.
    pub fn read_string<R>(&self, read: impl FnOnce(&[u8]) -> R) -> Option<R> {
        self.raw.read_string(read)
    }

    /// Several hash fields in one call (absent fields are None). Field names are strings made
    /// once per process, so a read allocates nothing for them.
    pub fn hash_get<const N: usize>(&self, fields: [&StaticString; N]) -> [Option<RedisString>; N] {
        self.raw.hash_get(self.ctx, fields)
    }

    /// Visits `(score, member)` pairs of a zset in a score span. Empty or missing: no visits.
    pub fn zscan<E>(
        &self,
        span: Span,
        order: Order,
        mut visit: impl FnMut(f64, &[u8]) -> Result<ControlFlow<()>, E>,
    ) -> Result<(), E> {
        self.walk(span, order, |score, member| visit(score, member.as_slice()))
    }

    /// [`Key::zscan`] handing over each member's string.
    fn walk<E>(
        &self,
        span: Span,
        order: Order,
        mut visit: impl FnMut(f64, RedisString) -> Result<ControlFlow<()>, E>,
    ) -> Result<(), E> {
        let Some(mut range) = self
            .raw
            .zset_range(bounds(span), order == Order::NewestFirst)
        else {
            return Ok(());
        };
        while let Some((score, member)) = range.current(self.ctx) {
            if visit(score, member)?.is_break() || !range.advance() {
                break;
            }
        }
        Ok(())
    }

    /// Whether a zset has a member in a score span, found without reading one. Missing or of
    /// another type: false.
    pub fn any_in(&self, span: Span) -> bool {
        self.raw
            .zset_range(bounds(span), false)
            .is_some_and(|range| !range.at_end())
    }

    /// The number of members of a zset (0 if missing or of another type). O(1).
    pub fn zcard(&self) -> usize {
        if self.key_type() != KeyType::ZSet {
            return 0;
        }
        self.raw.value_length()
    }

    /// The number of fields of a hash (0 if missing or of another type). O(1).
    pub fn hash_len(&self) -> usize {
        if self.key_type() != KeyType::Hash {
            return 0;
        }
        self.raw.value_length()
    }

    /// Whether a hash has a field with a TTL of its own (Redis 7.4+ `HEXPIRE`); false where the
    /// server has no field TTLs.
    pub fn has_field_ttls(&self) -> bool {
        self.raw.has_field_ttls()
    }

    /// Remaining TTL in ms, or None when the key has none (or does not exist).
    pub fn ttl_ms(&self) -> Option<i64> {
        self.raw.ttl()
    }

    /// The absolute expiry in unix ms, or None.
    pub fn expires_at(&self) -> Option<i64> {
        self.raw.expires_at()
    }
}

/// At load: keys are signalled changed (WATCH, client-side caching) by [`Key::apply`] when it
/// writes, not by the server whenever a key opened for writing is closed. False where the server
/// cannot (it then signals every such key).
pub fn init(ctx: &Context) -> bool {
    ffi_key::signal_only_writes(ctx)
}

/// The commands [`Key::apply`] replicates its writes as. Replicas and the AOF replay them by
/// name, and the server refuses to replicate a command it does not know by that name.
pub const REPLICATED_AS: [&str; 10] = [
    "SET",
    "HSET",
    "HDEL",
    "ZADD",
    "ZREM",
    "ZREMRANGEBYSCORE",
    "ZREMRANGEBYRANK",
    "PEXPIREAT",
    "PERSIST",
    "UNLINK",
];

/// Those of [`REPLICATED_AS`] the server does not know by their names (`rename-command`): the
/// module's writes of that kind would reach no replica and no AOF. None if the server does not
/// say (`COMMAND` itself renamed).
pub fn unknown_replicated_commands(ctx: &Context) -> Option<Vec<&'static str>> {
    let mut args = vec!["INFO"];
    args.extend(REPLICATED_AS);
    match ctx.call("COMMAND", args.as_slice()) {
        Ok(RedisValue::Array(found)) if found.len() == REPLICATED_AS.len() => Some(
            REPLICATED_AS
                .iter()
                .zip(&found)
                .filter(|(_, info)| **info == RedisValue::Null)
                .map(|(name, _)| *name)
                .collect(),
        ),
        _ => None,
    }
}

impl<M: Writable> Key<'_, M> {
    /// Applies one write and, only if it changed something, replicates it as the Redis command
    /// of the same effect and fires that command's keyspace event: the one place the module
    /// writes, so no write reaches the dataset without reaching replicas, the AOF and keyspace
    /// consumers. Every API status is checked before the effect is replicated. Returns whether
    /// anything changed.
    pub fn apply(&self, effect: Effect<'_>) -> bool {
        if !self.write_and_replicate(effect) {
            return false;
        }
        // WATCH and client-side caching hear of writes only: the server is told at load not to
        // signal every key opened for writing, which a refusal opens and leaves unchanged.
        ffi_key::signal_modified(self.ctx, &self.name);
        let (class, event) = effect.event();
        self.notify(class, event);
        if matches!(
            effect,
            Effect::SetExpiringAt { .. } | Effect::SetPacked { at: Some(_), .. }
        ) {
            self.notify(raw::REDISMODULE_NOTIFY_GENERIC, c"expire");
        }
        // Emptying a hash or a zset deletes it, and the command says so too.
        if matches!(
            effect,
            Effect::HDel(_) | Effect::ZRem(_) | Effect::ZRemRangeByScore(_) | Effect::ZRemNewest(_)
        ) && !self.exists()
        {
            self.notify(raw::REDISMODULE_NOTIFY_GENERIC, c"del");
        }
        true
    }

    /// The write itself and, if it changed something, its replication; whether it did.
    fn write_and_replicate(&self, effect: Effect<'_>) -> bool {
        let key = Arg::String(&self.name);
        match effect {
            Effect::Set(value) => {
                let done = self.raw.set_string(value);
                if done {
                    let value = self.string(value);
                    self.replicate(c"SET", &[key, Arg::String(&value), Arg::Static(&KEEPTTL)]);
                }
                done
            }
            Effect::SetExpiringAt { value, at } => {
                let value = self.number(value);
                if !self.raw.set_string(value.as_slice()) {
                    return false;
                }
                // The expiry is set on the value just written: the key exists. Were the server
                // to refuse it (no supported one does), the value written still reaches the
                // replicas, with the TTL the key kept.
                if self.raw.set_expires_at(at) {
                    let at = self.number(at);
                    self.replicate(
                        c"SET",
                        &[
                            key,
                            Arg::String(&value),
                            Arg::Static(&PXAT),
                            Arg::String(&at),
                        ],
                    );
                } else {
                    self.replicate(c"SET", &[key, Arg::String(&value), Arg::Static(&KEEPTTL)]);
                }
                true
            }
            Effect::SetPacked { value, at } => {
                // A state (never an embedded string: see packed_log::MIN_STORED_LEN) of the
                // length the key holds is rewritten in place, which keeps the key's TTL; any
                // other gets a string of its exact length, which drops it. A new key's string is
                // made at its length and written in place too: a string set whole may be
                // embedded with its key (Valkey 9.1 embeds up to 128 bytes with it), and the
                // next read would copy it; one made at its length never is.
                let in_place = match self.key_type() {
                    KeyType::String => self.raw.value_length() == value.len(),
                    KeyType::Empty => true,
                    _ => false,
                };
                // The TTL to restore: read only when no new one is given and a new string
                // drops the old one.
                let kept = if at.is_none() && !in_place {
                    self.expires_at()
                } else {
                    None
                };
                let string = self.string(value);
                let written = if in_place {
                    self.raw.set_string(value)
                } else {
                    self.raw.replace_string(&string)
                };
                if !written {
                    return false;
                }
                match (at, kept) {
                    (Some(at), _) if self.raw.set_expires_at(at) => {
                        let at = self.number(at);
                        self.replicate(
                            c"SET",
                            &[
                                key,
                                Arg::String(&string),
                                Arg::Static(&PXAT),
                                Arg::String(&at),
                            ],
                        );
                    }
                    (at, kept) => {
                        // The TTL the key had, which a new string dropped, as KEEPTTL keeps it.
                        if let (None, Some(kept)) = (at, kept) {
                            self.raw.set_expires_at(kept);
                        }
                        self.replicate(c"SET", &[key, Arg::String(&string), Arg::Static(&KEEPTTL)]);
                    }
                }
                true
            }
            Effect::HSet(fields) => {
                let mut set: Vec<(RedisString, RedisString)> = Vec::with_capacity(fields.len());
                for &(field, bytes) in fields {
                    let value = self.string(bytes);
                    if self.raw.hash_set(field, &value) {
                        set.push((self.string(field.to_bytes()), value));
                    }
                }
                if !set.is_empty() {
                    let mut args = vec![key];
                    for (field, value) in &set {
                        args.extend([Arg::String(field), Arg::String(value)]);
                    }
                    self.replicate(c"HSET", &args);
                }
                !set.is_empty()
            }
            Effect::HDel(field) => {
                let done = self.raw.hash_delete(field);
                if done {
                    let field = self.string(field.to_bytes());
                    self.replicate(c"HDEL", &[key, Arg::String(&field)]);
                }
                done
            }
            Effect::ZAdd { score, member } => self.zadd(score, member, ZAdd::IfNew),
            Effect::ZRescore { score, member } => self.zadd(score, member, ZAdd::IfPresent),
            Effect::ZRem(member) => {
                let element = self.string(member);
                let done = self.raw.zset_remove(&element);
                if done {
                    self.replicate(c"ZREM", &[key, Arg::String(&element)]);
                }
                done
            }
            Effect::ZRemRangeByScore(cutoff) => {
                // One range walk collects them, then each is removed: the module API has no
                // range removal, and a zset must not change under its range.
                let removed = self.remove_all(Span::UpTo(cutoff), Order::OldestFirst, usize::MAX);
                if removed > 0 {
                    let cutoff = self.number(cutoff);
                    self.replicate(
                        c"ZREMRANGEBYSCORE",
                        &[key, Arg::Static(&MINUS_INF), Arg::String(&cutoff)],
                    );
                }
                removed > 0
            }
            Effect::ZRemNewest(count) => {
                let removed = self.remove_all(Span::Everything, Order::NewestFirst, count);
                if removed > 0 {
                    let from = self.number(-i64::try_from(removed).unwrap_or(i64::MAX));
                    self.replicate(
                        c"ZREMRANGEBYRANK",
                        &[key, Arg::String(&from), Arg::Static(&MINUS_ONE)],
                    );
                }
                removed > 0
            }
            Effect::PExpireAt(at) => {
                let done = self.exists() && self.raw.set_expires_at(at);
                if done {
                    let at = self.number(at);
                    self.replicate(c"PEXPIREAT", &[key, Arg::String(&at)]);
                }
                done
            }
            Effect::Persist => {
                let done = self.ttl_ms().is_some() && self.raw.persist();
                if done {
                    self.replicate(c"PERSIST", &[key]);
                }
                done
            }
            Effect::Unlink => {
                let done = self.exists() && self.raw.unlink();
                if done {
                    self.replicate(c"UNLINK", &[key]);
                }
                done
            }
        }
    }

    /// ZADD of a new member (NX), or ZADD XX moving one already logged; replicated as the ZADD
    /// of the same effect.
    fn zadd(&self, score: i64, member: &[u8], mode: ZAdd) -> bool {
        let element = self.string(member);
        let done = self.raw.zset_add(score as f64, &element, mode);
        if done {
            let score = self.number(score);
            let (key, score, element) = (
                Arg::String(&self.name),
                Arg::String(&score),
                Arg::String(&element),
            );
            match mode {
                ZAdd::IfNew => self.replicate(c"ZADD", &[key, score, element]),
                ZAdd::IfPresent => {
                    self.replicate(c"ZADD", &[key, Arg::Static(&XX), score, element]);
                }
            }
        }
        done
    }

    /// Removes up to `limit` members of `span`, visited in `order`; how many were removed.
    fn remove_all(&self, span: Span, order: Order, limit: usize) -> usize {
        let mut members: Vec<RedisString> = Vec::new();
        if limit > 0 {
            let _ = self.walk::<()>(span, order, |_, member| {
                members.push(member);
                Ok(if members.len() < limit {
                    ControlFlow::Continue(())
                } else {
                    ControlFlow::Break(())
                })
            });
        }
        members
            .iter()
            .filter(|member| self.raw.zset_remove(member))
            .count()
    }

    fn string(&self, bytes: &[u8]) -> RedisString {
        RedisString::create_from_slice(self.ctx.ctx, bytes)
    }

    /// A number as a string argument, formatted by the server (its `ll2string`, as its own
    /// commands format the numbers they replicate).
    fn number(&self, n: i64) -> RedisString {
        ffi_key::decimal(self.ctx, n).unwrap_or_else(|| self.string(n.to_string().as_bytes()))
    }

    fn replicate(&self, command: &CStr, args: &[Arg<'_>]) {
        ffi_key::replicate(self.ctx, command, args);
    }

    /// Fires the keyspace event the equivalent Redis command fires on this key. The module's
    /// own subscriber ignores these (see [`is_own_event`]): its writes never wake itself.
    fn notify(&self, class: c_int, event: &CStr) {
        OWN_EVENT.store(true, Ordering::Relaxed);
        ffi_key::notify(self.ctx, class, event, &self.name);
        OWN_EVENT.store(false, Ordering::Relaxed);
    }
}

/// One write the module makes to a key, named for the Redis command with the same effect: what
/// [`Key::apply`] writes, replicates and notifies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effect<'a> {
    /// `SET key value KEEPTTL`.
    Set(&'a [u8]),
    /// `SET key number PXAT unix-ms`: a number and its absolute expiry in one write (a GCRA
    /// limiter's TAT), firing `set` and `expire` as that SET does.
    SetExpiringAt { value: i64, at: i64 },
    /// A ONEKEY limiter's whole state: `SET key bytes PXAT unix-ms` with an expiry,
    /// `SET key bytes KEEPTTL` without one.
    SetPacked { value: &'a [u8], at: Option<i64> },
    /// `HSET key field value ...`.
    HSet(&'a [(&'a CStr, &'a [u8])]),
    /// `HDEL key field`.
    HDel(&'a CStr),
    /// `ZADD key score member`, only if the member is not there yet.
    ZAdd { score: i64, member: &'a [u8] },
    /// `ZADD key XX score member`: a member already logged moves to a new score.
    ZRescore { score: i64, member: &'a [u8] },
    /// `ZREM key member`.
    ZRem(&'a [u8]),
    /// `ZREMRANGEBYSCORE key -inf cutoff`.
    ZRemRangeByScore(i64),
    /// The newest `n` members: `ZREMRANGEBYRANK key -n -1`.
    ZRemNewest(usize),
    /// `PEXPIREAT key unix-ms`: an absolute time, so replicas expire the key at the same instant.
    PExpireAt(i64),
    /// `PERSIST key`.
    Persist,
    /// `UNLINK key`: a large value is freed in the background, so even a log of a million
    /// entries goes in O(1).
    Unlink,
}

impl Effect<'_> {
    /// The keyspace event the equivalent command fires.
    fn event(&self) -> (c_int, &'static CStr) {
        match self {
            Effect::Set(_) | Effect::SetExpiringAt { .. } | Effect::SetPacked { .. } => {
                (raw::REDISMODULE_NOTIFY_STRING, c"set")
            }
            Effect::HSet(_) => (raw::REDISMODULE_NOTIFY_HASH, c"hset"),
            Effect::HDel(_) => (raw::REDISMODULE_NOTIFY_HASH, c"hdel"),
            Effect::ZAdd { .. } | Effect::ZRescore { .. } => {
                (raw::REDISMODULE_NOTIFY_ZSET, c"zadd")
            }
            Effect::ZRem(_) => (raw::REDISMODULE_NOTIFY_ZSET, c"zrem"),
            Effect::ZRemRangeByScore(_) => (raw::REDISMODULE_NOTIFY_ZSET, c"zremrangebyscore"),
            Effect::ZRemNewest(_) => (raw::REDISMODULE_NOTIFY_ZSET, c"zremrangebyrank"),
            Effect::PExpireAt(_) => (raw::REDISMODULE_NOTIFY_GENERIC, c"expire"),
            Effect::Persist => (raw::REDISMODULE_NOTIFY_GENERIC, c"persist"),
            Effect::Unlink => (raw::REDISMODULE_NOTIFY_GENERIC, c"del"),
        }
    }
}

/// Set while the module fires a keyspace event of its own (subscribers run synchronously).
///
/// Who honours it: the waiters ignore the module's own writes (a grant or a release the module
/// makes frees nothing it does not already know of, and it nudges the queues itself). The
/// config cache deliberately does not: a SETRATE, a limiter created by `RATE`, a DELETE are the
/// module's own writes, and each must forget the configuration kept for the hash it changes.
static OWN_EVENT: AtomicBool = AtomicBool::new(false);

/// Whether the keyspace event being delivered was fired by the module's own write.
pub fn is_own_event() -> bool {
    OWN_EVENT.load(Ordering::Relaxed)
}

/// The score bounds of a span.
fn bounds(span: Span) -> ScoreBounds {
    let (min, max, min_exclusive) = match span {
        Span::UpTo(cutoff) => (f64::NEG_INFINITY, cutoff as f64, false),
        Span::After(cutoff) => (cutoff as f64, f64::INFINITY, true),
        Span::Between(low, high) => (low as f64, high as f64, true),
        Span::Everything => (f64::NEG_INFINITY, f64::INFINITY, false),
    };
    ScoreBounds {
        min,
        max,
        min_exclusive,
        max_exclusive: false,
    }
}

#[cfg(test)]
mod tests {
    use super::REPLICATED_AS;

    /// Every command this file replicates a write as is in [`REPLICATED_AS`], which the module
    /// checks the server knows at load.
    #[test]
    fn every_replicated_command_is_checked_at_load() {
        let source = include_str!("key.rs");
        let mut named: Vec<&str> = source
            .split("self.replicate(")
            .skip(1)
            .filter_map(|call| call.trim_start().strip_prefix("c\""))
            .filter_map(|rest| rest.split('"').next())
            .collect();
        named.sort_unstable();
        named.dedup();
        let mut checked = REPLICATED_AS.to_vec();
        checked.sort_unstable();
        assert_eq!(named, checked);
    }
}
