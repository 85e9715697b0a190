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
use std::os::raw::{c_char, c_int, c_void};
use std::ptr::{self, NonNull};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

use redis_module::{raw, Context, RedisString};

use crate::limiter::{Order, Span};

/// What a key holds, as far as the limiter cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Empty,
    String,
    Hash,
    ZSet,
    Other,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    Read,
    Write,
}

/// How a key is opened, as a type: a key opened for reading has no `apply`, so writing through
/// it does not compile.
pub trait OpenMode {
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
    ptr: *mut raw::RedisModuleKey,
    name: RedisString,
    mode: PhantomData<M>,
}

impl<M: OpenMode> Drop for Key<'_, M> {
    fn drop(&mut self) {
        if !self.ptr.is_null() {
            raw::close_key(self.ptr);
        }
    }
}

impl<'c, M: OpenMode> Key<'c, M> {
    pub fn open(ctx: &'c Context, name: &[u8]) -> Self {
        let name = RedisString::create_from_slice(ctx.ctx, name);
        let mode = match M::ACCESS {
            Access::Read => raw::KeyMode::READ,
            Access::Write => raw::KeyMode::READ | raw::KeyMode::WRITE,
        };
        let ptr = raw::open_key(ctx.ctx, name.inner, mode);
        Key {
            ctx,
            ptr,
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

    pub fn kind(&self) -> Kind {
        if self.ptr.is_null() {
            return Kind::Empty;
        }
        // SAFETY: ptr is an open key of this context.
        let t = unsafe { call(raw::RedisModule_KeyType, |f| f(self.ptr)) }.unwrap_or(0);
        match t as isize {
            raw::REDISMODULE_KEYTYPE_EMPTY => Kind::Empty,
            raw::REDISMODULE_KEYTYPE_STRING => Kind::String,
            raw::REDISMODULE_KEYTYPE_HASH => Kind::Hash,
            raw::REDISMODULE_KEYTYPE_ZSET => Kind::ZSet,
            _ => Kind::Other,
        }
    }

    pub fn exists(&self) -> bool {
        self.kind() != Kind::Empty
    }

    /// The string value, if this is a string key. Borrowed until the key is written or closed.
    pub fn read_string(&self) -> Option<&[u8]> {
        if self.kind() != Kind::String {
            return None;
        }
        let mut len: usize = 0;
        // SAFETY: a string key opened at least for reading; DMA READ returns its buffer.
        let data = unsafe {
            call(raw::RedisModule_StringDMA, |f| {
                f(self.ptr, &mut len, raw::REDISMODULE_READ as c_int)
            })
        }?;
        if data.is_null() {
            return Some(&[]);
        }
        // SAFETY: Redis guarantees `len` readable bytes at `data` while the key stays open and unmodified.
        Some(unsafe { std::slice::from_raw_parts(data.cast::<u8>(), len) })
    }

    /// Several hash fields in one call (absent fields are None). Field names are RedisModule
    /// strings made once per process, so a read allocates nothing for them.
    pub fn hash_get5(&self, fields: [&FieldName; 5]) -> [Option<RedisString>; 5] {
        let mut out: [*mut raw::RedisModuleString; 5] = [ptr::null_mut(); 5];
        if self.kind() == Kind::Hash {
            let [a, b, c, d, e] = fields.map(FieldName::string);
            let [oa, ob, oc, od, oe] = &mut out;
            // SAFETY: variadic HashGet with (field, &mut out) pairs, terminated by NULL.
            unsafe {
                call(raw::RedisModule_HashGet, |f| {
                    f(
                        self.ptr,
                        raw::REDISMODULE_HASH_NONE as c_int,
                        a,
                        oa as *mut *mut raw::RedisModuleString,
                        b,
                        ob as *mut *mut raw::RedisModuleString,
                        c,
                        oc as *mut *mut raw::RedisModuleString,
                        d,
                        od as *mut *mut raw::RedisModuleString,
                        e,
                        oe as *mut *mut raw::RedisModuleString,
                        ptr::null_mut::<c_void>(),
                    )
                });
            }
        }
        // Each non-null result is a new string we own; RedisString frees it on drop.
        out.map(|p| (!p.is_null()).then(|| RedisString::from_redis_module_string(self.ctx.ctx, p)))
    }

    /// Visits `(score, member)` pairs of a zset in a score span. Empty or missing: no visits.
    pub fn zscan<E>(
        &self,
        span: Span,
        order: Order,
        mut visit: impl FnMut(f64, &[u8]) -> Result<ControlFlow<()>, E>,
    ) -> Result<(), E> {
        if self.kind() != Kind::ZSet {
            return Ok(());
        }
        let (min, max, min_ex, max_ex) = bounds(span);
        // SAFETY: the API pointers are written once, by RedisModule_Init at load, before any
        // command runs; reading them is a plain copy.
        let (start, step) = unsafe {
            match order {
                Order::OldestFirst => (
                    raw::RedisModule_ZsetFirstInScoreRange,
                    raw::RedisModule_ZsetRangeNext,
                ),
                Order::NewestFirst => (
                    raw::RedisModule_ZsetLastInScoreRange,
                    raw::RedisModule_ZsetRangePrev,
                ),
            }
        };
        // SAFETY: a zset key; the range is stopped below on every path.
        let started = unsafe { call(start, |f| f(self.ptr, min, max, min_ex, max_ex)) };
        if started != Some(raw::REDISMODULE_OK as c_int) {
            return Ok(());
        }
        let _stop = RangeGuard(self.ptr);
        loop {
            // SAFETY: the range iterator is active on this key.
            let ended = unsafe { call(raw::RedisModule_ZsetRangeEndReached, |f| f(self.ptr)) };
            if ended != Some(0) {
                return Ok(());
            }
            let mut score = 0f64;
            // SAFETY: returns a new string (owned below) or NULL.
            let element = unsafe {
                call(raw::RedisModule_ZsetRangeCurrentElement, |f| {
                    f(self.ptr, &mut score)
                })
            }
            .and_then(NonNull::new);
            let Some(element) = element else {
                return Ok(());
            };
            // We own the returned string; RedisString frees it.
            let member = RedisString::from_redis_module_string(self.ctx.ctx, element.as_ptr());
            if visit(score, member.as_slice())?.is_break() {
                return Ok(());
            }
            // SAFETY: the iterator is active; a 0 return means no more elements.
            if unsafe { call(step, |f| f(self.ptr)) } != Some(1) {
                return Ok(());
            }
        }
    }

    /// Whether a zset has a member in a score span, found without reading one. Missing or of
    /// another type: false.
    pub fn any_in(&self, span: Span) -> bool {
        if self.kind() != Kind::ZSet {
            return false;
        }
        let (min, max, min_ex, max_ex) = bounds(span);
        // SAFETY: a zset key; the range is stopped at once.
        let started = unsafe {
            call(raw::RedisModule_ZsetFirstInScoreRange, |f| {
                f(self.ptr, min, max, min_ex, max_ex)
            })
        };
        if started != Some(raw::REDISMODULE_OK as c_int) {
            return false;
        }
        let _stop = RangeGuard(self.ptr);
        // SAFETY: the range iterator is active on this key.
        let ended = unsafe { call(raw::RedisModule_ZsetRangeEndReached, |f| f(self.ptr)) };
        ended == Some(0)
    }

    /// The number of members of a zset (0 if missing or of another type). O(1).
    pub fn zcard(&self) -> usize {
        if self.kind() != Kind::ZSet {
            return 0;
        }
        // SAFETY: ValueLength accepts any open key.
        unsafe { call(raw::RedisModule_ValueLength, |f| f(self.ptr)) }.unwrap_or(0)
    }

    /// The number of fields of a hash (0 if missing or of another type). O(1).
    pub fn hash_len(&self) -> usize {
        if self.kind() != Kind::Hash {
            return 0;
        }
        // SAFETY: ValueLength accepts any open key.
        unsafe { call(raw::RedisModule_ValueLength, |f| f(self.ptr)) }.unwrap_or(0)
    }

    /// Whether a hash has a field with a TTL of its own (Redis 7.4+ `HEXPIRE`); false where the
    /// server has no field TTLs.
    pub fn has_field_ttls(&self) -> bool {
        if self.kind() != Kind::Hash {
            return false;
        }
        // SAFETY: HashFieldMinExpire accepts an open hash key.
        let min = unsafe { call(raw::RedisModule_HashFieldMinExpire, |f| f(self.ptr)) };
        min.is_some_and(|at| at != raw::REDISMODULE_NO_EXPIRE as i64)
    }

    /// Remaining TTL in ms, or None when the key has none (or does not exist).
    pub fn ttl_ms(&self) -> Option<i64> {
        // SAFETY: GetExpire accepts any open key.
        let ttl = unsafe { call(raw::RedisModule_GetExpire, |f| f(self.ptr)) }?;
        (ttl >= 0 && self.exists()).then_some(ttl)
    }

    /// The absolute expiry in unix ms, or None.
    pub fn expires_at(&self) -> Option<i64> {
        // SAFETY: GetAbsExpire accepts any open key.
        let at = unsafe { call(raw::RedisModule_GetAbsExpire, |f| f(self.ptr)) }?;
        (at >= 0 && self.exists()).then_some(at)
    }
}

impl<M: Writable> Key<'_, M> {
    /// Applies one write and, only if it changed something, replicates it as the Redis command
    /// of the same effect and fires that command's keyspace event: the one place the module
    /// writes, so no write reaches the dataset without reaching replicas, the AOF and keyspace
    /// consumers. Every API status is checked before the effect is replicated. Returns whether
    /// anything changed.
    pub fn apply(&self, effect: Effect<'_>) -> bool {
        let Some(done) = self.write(effect) else {
            return false;
        };
        self.replicate_effect(effect, &done);
        let (class, event) = effect.event();
        self.notify(class, event);
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

    /// The write itself; `None` if it changed nothing.
    fn write<'e>(&self, effect: Effect<'e>) -> Option<Done<'e>> {
        match effect {
            Effect::Set(value) => self.write_string(value).then_some(Done::Plain),
            Effect::HSet(fields) => {
                let mut set: Vec<&'e [u8]> = Vec::with_capacity(fields.len() * 2);
                for &(field, bytes) in fields {
                    let value = RedisString::create_from_slice(self.ctx.ctx, bytes);
                    // SAFETY: variadic HashSet with a C-string field and a RedisModuleString
                    // value. Its count is of fields updated (0 for an insert), so success is
                    // read from the key: a hash after the call.
                    let called = unsafe {
                        call(raw::RedisModule_HashSet, |f| {
                            f(
                                self.ptr,
                                raw::REDISMODULE_HASH_CFIELDS as c_int,
                                field.as_ptr(),
                                value.inner,
                                ptr::null_mut::<c_void>(),
                            )
                        })
                    };
                    if called.is_some() && self.kind() == Kind::Hash {
                        set.push(field.to_bytes());
                        set.push(bytes);
                    }
                }
                (!set.is_empty()).then_some(Done::Fields(set))
            }
            Effect::HDel(field) => {
                if self.kind() != Kind::Hash {
                    return None;
                }
                // SAFETY: variadic HashSet with a C-string field and REDISMODULE_HASH_DELETE as
                // its value, which deletes the field; it returns how many were deleted.
                let deleted = unsafe {
                    call(raw::RedisModule_HashSet, |f| {
                        f(
                            self.ptr,
                            raw::REDISMODULE_HASH_CFIELDS as c_int,
                            field.as_ptr(),
                            raw::REDISMODULE_HASH_DELETE as *mut raw::RedisModuleString,
                            ptr::null_mut::<c_void>(),
                        )
                    })
                };
                (deleted.unwrap_or(0) > 0).then_some(Done::Plain)
            }
            Effect::ZAdd { score, member } => {
                let element = RedisString::create_from_slice(self.ctx.ctx, member);
                let mut flags: c_int = raw::REDISMODULE_ZADD_NX as c_int;
                // SAFETY: key opened for writing (creates the zset if empty).
                let status = unsafe {
                    call(raw::RedisModule_ZsetAdd, |f| {
                        f(self.ptr, score as f64, element.inner, &mut flags)
                    })
                };
                (status == Some(raw::REDISMODULE_OK as c_int)
                    && flags & raw::REDISMODULE_ZADD_ADDED as c_int != 0)
                    .then_some(Done::Plain)
            }
            Effect::ZRescore { score, member } => {
                let element = RedisString::create_from_slice(self.ctx.ctx, member);
                let mut flags: c_int = raw::REDISMODULE_ZADD_XX as c_int;
                // SAFETY: key opened for writing; XX only updates a member already there.
                let status = unsafe {
                    call(raw::RedisModule_ZsetAdd, |f| {
                        f(self.ptr, score as f64, element.inner, &mut flags)
                    })
                };
                (status == Some(raw::REDISMODULE_OK as c_int)
                    && flags & raw::REDISMODULE_ZADD_UPDATED as c_int != 0)
                    .then_some(Done::Plain)
            }
            Effect::ZRem(member) => self
                .remove_member(&RedisString::create_from_slice(self.ctx.ctx, member))
                .then_some(Done::Plain),
            Effect::ZRemRangeByScore(cutoff) => {
                // One range scan collects them, then each is removed: the module API has no
                // range removal, and a zset must not change under its iterator.
                let removed = self.remove_all(Span::UpTo(cutoff), Order::OldestFirst, usize::MAX);
                (removed > 0).then_some(Done::Removed(removed))
            }
            Effect::ZRemNewest(count) => {
                let removed = self.remove_all(Span::Everything, Order::NewestFirst, count);
                (removed > 0).then_some(Done::Removed(removed))
            }
            Effect::PExpireAt(at) => {
                if !self.exists() {
                    return None;
                }
                // SAFETY: key opened for writing.
                let ok = unsafe { call(raw::RedisModule_SetAbsExpire, |f| f(self.ptr, at)) }
                    == Some(raw::REDISMODULE_OK as c_int);
                ok.then_some(Done::Plain)
            }
            Effect::Persist => {
                self.ttl_ms()?;
                // SAFETY: key opened for writing; NO_EXPIRE removes the TTL.
                let ok = unsafe {
                    call(raw::RedisModule_SetExpire, |f| {
                        f(self.ptr, raw::REDISMODULE_NO_EXPIRE as i64)
                    })
                } == Some(raw::REDISMODULE_OK as c_int);
                ok.then_some(Done::Plain)
            }
            Effect::Unlink => {
                if !self.exists() {
                    return None;
                }
                // SAFETY: key opened for writing; UnlinkKey exists since Redis 4.0.7,
                // DeleteKey always.
                let ok = unsafe {
                    match raw::RedisModule_UnlinkKey {
                        Some(unlink) => unlink(self.ptr),
                        None => call(raw::RedisModule_DeleteKey, |f| f(self.ptr))
                            .unwrap_or(raw::REDISMODULE_ERR as c_int),
                    }
                } == raw::REDISMODULE_OK as c_int;
                ok.then_some(Done::Plain)
            }
        }
    }

    /// Stores a string value in place, keeping the key's TTL; true only if all of it is stored.
    fn write_string(&self, value: &[u8]) -> bool {
        // SAFETY: key opened for writing; truncate creates or resizes the string, DMA gives
        // `value.len()` writable bytes, which are written only when it gives exactly that many.
        unsafe {
            let truncated = call(raw::RedisModule_StringTruncate, |f| {
                f(self.ptr, value.len())
            });
            let mut len: usize = 0;
            let buf = call(raw::RedisModule_StringDMA, |f| {
                f(self.ptr, &mut len, raw::REDISMODULE_WRITE as c_int)
            });
            match buf {
                Some(buf)
                    if truncated == Some(raw::REDISMODULE_OK as c_int)
                        && !buf.is_null()
                        && len == value.len() =>
                {
                    ptr::copy_nonoverlapping(value.as_ptr(), buf.cast::<u8>(), len);
                    true
                }
                _ => false,
            }
        }
    }

    /// Removes up to `limit` members of `span`, visited in `order`; how many were removed.
    fn remove_all(&self, span: Span, order: Order, limit: usize) -> usize {
        let mut members: Vec<RedisString> = Vec::new();
        if limit > 0 {
            let _ = self.zscan::<()>(span, order, |_, member| {
                members.push(RedisString::create_from_slice(self.ctx.ctx, member));
                Ok(if members.len() < limit {
                    ControlFlow::Continue(())
                } else {
                    ControlFlow::Break(())
                })
            });
        }
        members.iter().filter(|m| self.remove_member(m)).count()
    }

    /// Replicates an applied effect as its Redis command.
    fn replicate_effect(&self, effect: Effect<'_>, done: &Done<'_>) {
        match (effect, done) {
            (Effect::Set(value), _) =>
            // SAFETY: the format string matches the arguments: "sbc" = key, (buffer,
            // length), C string.
            unsafe {
                if let Some(replicate) = raw::RedisModule_Replicate {
                    replicate(
                        self.ctx.ctx,
                        c"SET".as_ptr(),
                        c"sbc".as_ptr(),
                        self.name.inner,
                        value.as_ptr().cast::<c_char>(),
                        value.len(),
                        c"KEEPTTL".as_ptr(),
                    );
                }
            },
            (Effect::ZAdd { score, member }, _) =>
            // SAFETY: "slb" = key, long long, (buffer, length).
            unsafe {
                if let Some(replicate) = raw::RedisModule_Replicate {
                    replicate(
                        self.ctx.ctx,
                        c"ZADD".as_ptr(),
                        c"slb".as_ptr(),
                        self.name.inner,
                        score,
                        member.as_ptr().cast::<c_char>(),
                        member.len(),
                    );
                }
            },
            (Effect::ZRescore { score, member }, _) =>
            // SAFETY: "sclb" = key, C string, long long, (buffer, length).
            unsafe {
                if let Some(replicate) = raw::RedisModule_Replicate {
                    replicate(
                        self.ctx.ctx,
                        c"ZADD".as_ptr(),
                        c"sclb".as_ptr(),
                        self.name.inner,
                        c"XX".as_ptr(),
                        score,
                        member.as_ptr().cast::<c_char>(),
                        member.len(),
                    );
                }
            },
            (Effect::ZRemRangeByScore(cutoff), _) =>
            // SAFETY: "scl" = key, C string, long long.
            unsafe {
                if let Some(replicate) = raw::RedisModule_Replicate {
                    replicate(
                        self.ctx.ctx,
                        c"ZREMRANGEBYSCORE".as_ptr(),
                        c"scl".as_ptr(),
                        self.name.inner,
                        c"-inf".as_ptr(),
                        cutoff,
                    );
                }
            },
            (Effect::HSet(_), Done::Fields(fields)) => self.replicate("HSET", fields),
            (Effect::HSet(_), _) => {}
            (Effect::HDel(field), _) => self.replicate("HDEL", &[field.to_bytes()]),
            (Effect::ZRem(member), _) => self.replicate("ZREM", &[member]),
            (Effect::ZRemNewest(_), done) => {
                let removed = match done {
                    Done::Removed(n) => *n,
                    _ => 0,
                };
                let from = format!("-{removed}");
                self.replicate("ZREMRANGEBYRANK", &[from.as_bytes(), b"-1"]);
            }
            (Effect::PExpireAt(at), _) => self.replicate_with_number(c"PEXPIREAT", at),
            (Effect::Persist, _) => self.replicate("PERSIST", &[]),
            (Effect::Unlink, _) => self.replicate("UNLINK", &[]),
        }
    }

    fn remove_member(&self, element: &RedisString) -> bool {
        let mut deleted: c_int = 0;
        // SAFETY: key opened for writing; no range iterator is active on it here.
        unsafe {
            call(raw::RedisModule_ZsetRem, |f| {
                f(self.ptr, element.inner, &mut deleted)
            })
        };
        deleted != 0
    }

    /// Fires the keyspace event the equivalent Redis command fires on this key. The module's
    /// own subscriber ignores these (see [`is_own_event`]): its writes never wake itself.
    fn notify(&self, class: c_int, event: &CStr) {
        OWN_EVENT.store(true, Ordering::Relaxed);
        // SAFETY: a command or timer context, a static event name and the key's name string.
        unsafe {
            call(raw::RedisModule_NotifyKeyspaceEvent, |f| {
                f(self.ctx.ctx, class, event.as_ptr(), self.name.inner)
            });
        }
        OWN_EVENT.store(false, Ordering::Relaxed);
    }

    /// Replicates `command key args...` with byte-string arguments (used by the rarer writes).
    fn replicate(&self, command: &str, args: &[&[u8]]) {
        let mut argv: Vec<&[u8]> = Vec::with_capacity(args.len() + 1);
        argv.push(self.name());
        argv.extend_from_slice(args);
        self.ctx.replicate(command, argv.as_slice());
    }

    /// Replicates `command key n`, straight through RM_Replicate: no string objects are built
    /// for the arguments (the hot path replicates ZADD and ZREMRANGEBYSCORE on every call).
    fn replicate_with_number(&self, command: &CStr, number: i64) {
        // SAFETY: format "sl" = the key's RedisModuleString, then a long long.
        unsafe {
            if let Some(replicate) = raw::RedisModule_Replicate {
                replicate(
                    self.ctx.ctx,
                    command.as_ptr(),
                    c"sl".as_ptr(),
                    self.name.inner,
                    number,
                );
            }
        }
    }
}

/// One write the module makes to a key, named for the Redis command with the same effect: what
/// [`Key::apply`] writes, replicates and notifies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effect<'a> {
    /// `SET key value KEEPTTL`.
    Set(&'a [u8]),
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
            Effect::Set(_) => (raw::REDISMODULE_NOTIFY_STRING, c"set"),
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

/// What a write did, where its replication depends on it.
enum Done<'a> {
    Plain,
    /// The HSET fields and values really set.
    Fields(Vec<&'a [u8]>),
    /// Members removed.
    Removed(usize),
}

/// Set while the module fires a keyspace event of its own (subscribers run synchronously).
static OWN_EVENT: AtomicBool = AtomicBool::new(false);

/// Whether the keyspace event being delivered was fired by the module's own write.
pub fn is_own_event() -> bool {
    OWN_EVENT.load(Ordering::Relaxed)
}

/// A hash field name as a RedisModule string created once and kept for the life of the process.
pub struct FieldName {
    name: &'static CStr,
    string: OnceLock<usize>,
}

impl FieldName {
    pub const fn new(name: &'static CStr) -> Self {
        FieldName {
            name,
            string: OnceLock::new(),
        }
    }

    fn string(&self) -> *mut raw::RedisModuleString {
        *self.string.get_or_init(|| {
            let bytes = self.name.to_bytes();
            // SAFETY: a string with no context is never freed automatically; it lives as long
            // as the process, and only its address is kept.
            unsafe {
                raw::RedisModule_CreateString.map_or(0, |create| {
                    create(
                        ptr::null_mut(),
                        bytes.as_ptr().cast::<c_char>(),
                        bytes.len(),
                    ) as usize
                })
            }
        }) as *mut raw::RedisModuleString
    }
}

/// Stops an active zset range iterator when dropped, on every exit path.
struct RangeGuard(*mut raw::RedisModuleKey);

impl Drop for RangeGuard {
    fn drop(&mut self) {
        // SAFETY: stopping an iterator is valid whether or not it reached its end.
        unsafe {
            call(raw::RedisModule_ZsetRangeStop, |f| f(self.0));
        }
    }
}

/// Score bounds of a span: (min, max, min exclusive, max exclusive).
fn bounds(span: Span) -> (f64, f64, c_int, c_int) {
    match span {
        Span::UpTo(cutoff) => (f64::NEG_INFINITY, cutoff as f64, 0, 0),
        Span::After(cutoff) => (cutoff as f64, f64::INFINITY, 1, 0),
        Span::Between(low, high) => (low as f64, high as f64, 1, 0),
        Span::Everything => (f64::NEG_INFINITY, f64::INFINITY, 0, 0),
    }
}

/// Calls an optional module API function: `None` when the server does not export it, so an
/// older server degrades instead of crashing on an `unwrap`.
///
/// # Safety
/// `f` must be a module API pointer filled in by `RedisModule_Init`, and `body` must respect its contract.
unsafe fn call<F: Copy, R>(f: Option<F>, body: impl FnOnce(F) -> R) -> Option<R> {
    f.map(body)
}
