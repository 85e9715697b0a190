//! An open Redis key with the typed operations the limiter needs, safe over the raw module API.
//!
//! Every write method also replicates its effect as a plain Redis command (`SET`, `HSET`, `ZADD`,
//! `ZREMRANGEBYSCORE`, `PEXPIREAT`, `DEL` ...). Writing through this type is the only way the
//! module writes, so no write can reach the dataset without reaching replicas and the AOF, and
//! replicas never re-run the time- and random-dependent logic.

use std::ffi::CStr;
use std::ops::ControlFlow;
use std::os::raw::{c_int, c_void};
use std::ptr::{self, NonNull};

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

pub struct Key<'c> {
    ctx: &'c Context,
    ptr: *mut raw::RedisModuleKey,
    name: RedisString,
}

impl Drop for Key<'_> {
    fn drop(&mut self) {
        if !self.ptr.is_null() {
            raw::close_key(self.ptr);
        }
    }
}

impl<'c> Key<'c> {
    pub fn open(ctx: &'c Context, name: &[u8], access: Access) -> Self {
        let name = RedisString::create_from_slice(ctx.ctx, name);
        let mode = match access {
            Access::Read => raw::KeyMode::READ,
            Access::Write => raw::KeyMode::READ | raw::KeyMode::WRITE,
        };
        let ptr = raw::open_key(ctx.ctx, name.inner, mode);
        Key { ctx, ptr, name }
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

    /// Stores a string value in place, keeping the key's TTL. Replicated as `SET key v KEEPTTL`.
    pub fn set_string(&self, value: &[u8]) {
        // SAFETY: key opened for writing; truncate creates or resizes the string, DMA gives
        // `value.len()` writable bytes.
        unsafe {
            let _ = call(raw::RedisModule_StringTruncate, |f| {
                f(self.ptr, value.len())
            });
            let mut len: usize = 0;
            if let Some(buf) = call(raw::RedisModule_StringDMA, |f| {
                f(self.ptr, &mut len, raw::REDISMODULE_WRITE as c_int)
            }) {
                if !buf.is_null() && len == value.len() {
                    ptr::copy_nonoverlapping(value.as_ptr(), buf.cast::<u8>(), len);
                }
            }
        }
        self.replicate("SET", &[value, b"KEEPTTL"]);
    }

    /// A hash field, if this is a hash and the field is present.
    pub fn hash_get(&self, field: &CStr) -> Option<RedisString> {
        if self.kind() != Kind::Hash {
            return None;
        }
        let mut out: *mut raw::RedisModuleString = ptr::null_mut();
        // SAFETY: variadic HashGet with C-string field names, terminated by NULL.
        unsafe {
            call(raw::RedisModule_HashGet, |f| {
                f(
                    self.ptr,
                    raw::REDISMODULE_HASH_CFIELDS as c_int,
                    field.as_ptr(),
                    &mut out as *mut *mut raw::RedisModuleString,
                    ptr::null_mut::<c_void>(),
                )
            });
        }
        if out.is_null() {
            None
        } else {
            // HashGet returned a new string we own; RedisString frees it on drop.
            Some(RedisString::from_redis_module_string(self.ctx.ctx, out))
        }
    }

    /// Sets hash fields. Replicated as one `HSET key f v [f v ...]`.
    pub fn hash_set(&self, fields: &[(&CStr, &[u8])]) {
        if fields.is_empty() {
            return;
        }
        let mut args: Vec<&[u8]> = Vec::with_capacity(fields.len() * 2);
        for &(field, bytes) in fields {
            let value = RedisString::create_from_slice(self.ctx.ctx, bytes);
            // SAFETY: variadic HashSet with a C-string field and a RedisModuleString value.
            unsafe {
                call(raw::RedisModule_HashSet, |f| {
                    f(
                        self.ptr,
                        raw::REDISMODULE_HASH_CFIELDS as c_int,
                        field.as_ptr(),
                        value.inner,
                        ptr::null_mut::<c_void>(),
                    )
                });
            }
            args.push(field.to_bytes());
            args.push(bytes);
        }
        self.replicate("HSET", &args);
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
        let start = match order {
            Order::OldestFirst => unsafe { raw::RedisModule_ZsetFirstInScoreRange },
            Order::NewestFirst => unsafe { raw::RedisModule_ZsetLastInScoreRange },
        };
        let step = match order {
            Order::OldestFirst => unsafe { raw::RedisModule_ZsetRangeNext },
            Order::NewestFirst => unsafe { raw::RedisModule_ZsetRangePrev },
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

    /// The number of members of a zset (0 if missing or of another type). O(1).
    pub fn zcard(&self) -> usize {
        if self.kind() != Kind::ZSet {
            return 0;
        }
        // SAFETY: ValueLength accepts any open key.
        unsafe { call(raw::RedisModule_ValueLength, |f| f(self.ptr)) }.unwrap_or(0)
    }

    /// Whether a zset member is present.
    pub fn zcontains(&self, member: &[u8]) -> bool {
        if self.kind() != Kind::ZSet {
            return false;
        }
        let element = RedisString::create_from_slice(self.ctx.ctx, member);
        let mut score = 0f64;
        // SAFETY: a zset key; ZsetScore only reads.
        let found = unsafe {
            call(raw::RedisModule_ZsetScore, |f| {
                f(self.ptr, element.inner, &mut score)
            })
        };
        found == Some(raw::REDISMODULE_OK as c_int)
    }

    /// Adds a member that is not already present. Returns false (and writes nothing) if it is.
    /// Replicated as `ZADD key score member`.
    pub fn zadd_new(&self, score: i64, member: &[u8]) -> bool {
        let element = RedisString::create_from_slice(self.ctx.ctx, member);
        let mut flags: c_int = raw::REDISMODULE_ZADD_NX as c_int;
        // SAFETY: key opened for writing (creates the zset if empty).
        let status = unsafe {
            call(raw::RedisModule_ZsetAdd, |f| {
                f(self.ptr, score as f64, element.inner, &mut flags)
            })
        };
        let added = status == Some(raw::REDISMODULE_OK as c_int)
            && flags & raw::REDISMODULE_ZADD_ADDED as c_int != 0;
        if added {
            self.replicate("ZADD", &[score.to_string().as_bytes(), member]);
        }
        added
    }

    /// Removes one member. Replicated as `ZREM key member`.
    pub fn zrem(&self, member: &[u8]) -> bool {
        let element = RedisString::create_from_slice(self.ctx.ctx, member);
        let mut deleted: c_int = 0;
        // SAFETY: key opened for writing.
        unsafe {
            call(raw::RedisModule_ZsetRem, |f| {
                f(self.ptr, element.inner, &mut deleted)
            })
        };
        if deleted != 0 {
            self.replicate("ZREM", &[member]);
        }
        deleted != 0
    }

    /// Removes every member scored at or below `cutoff`, oldest first, one at a time (the module
    /// API has no range removal). Replicated as one `ZREMRANGEBYSCORE key -inf cutoff`.
    pub fn zrem_up_to(&self, cutoff: i64) -> usize {
        let mut removed = 0;
        loop {
            let mut oldest: Option<Vec<u8>> = None;
            let _ = self.zscan::<()>(Span::UpTo(cutoff), Order::OldestFirst, |_, member| {
                oldest = Some(member.to_vec());
                Ok(ControlFlow::Break(()))
            });
            let Some(member) = oldest else { break };
            let element = RedisString::create_from_slice(self.ctx.ctx, &member);
            let mut deleted: c_int = 0;
            // SAFETY: key opened for writing.
            unsafe {
                call(raw::RedisModule_ZsetRem, |f| {
                    f(self.ptr, element.inner, &mut deleted)
                })
            };
            if deleted == 0 {
                break;
            }
            removed += 1;
        }
        if removed > 0 {
            self.replicate(
                "ZREMRANGEBYSCORE",
                &[b"-inf", cutoff.to_string().as_bytes()],
            );
        }
        removed
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

    /// Sets a relative TTL on an existing key. Replicated as `PEXPIREAT` with the absolute time
    /// Redis stored, so replicas expire the key at the same instant.
    pub fn set_ttl(&self, ms: i64) -> bool {
        if !self.exists() {
            return false;
        }
        // SAFETY: key opened for writing.
        let ok = unsafe { call(raw::RedisModule_SetExpire, |f| f(self.ptr, ms)) }
            == Some(raw::REDISMODULE_OK as c_int);
        if ok {
            if let Some(at) = self.expires_at() {
                self.replicate("PEXPIREAT", &[at.to_string().as_bytes()]);
            }
        }
        ok
    }

    /// Sets an absolute expiry (unix ms) on an existing key. Replicated as `PEXPIREAT`.
    pub fn set_expires_at(&self, at: i64) -> bool {
        if !self.exists() {
            return false;
        }
        // SAFETY: key opened for writing.
        let ok = unsafe { call(raw::RedisModule_SetAbsExpire, |f| f(self.ptr, at)) }
            == Some(raw::REDISMODULE_OK as c_int);
        if ok {
            self.replicate("PEXPIREAT", &[at.to_string().as_bytes()]);
        }
        ok
    }

    /// Removes the TTL. Replicated as `PERSIST`. False if there was none.
    pub fn persist(&self) -> bool {
        if self.ttl_ms().is_none() {
            return false;
        }
        // SAFETY: key opened for writing; NO_EXPIRE removes the TTL.
        let ok = unsafe {
            call(raw::RedisModule_SetExpire, |f| {
                f(self.ptr, raw::REDISMODULE_NO_EXPIRE as i64)
            })
        } == Some(raw::REDISMODULE_OK as c_int);
        if ok {
            self.replicate("PERSIST", &[]);
        }
        ok
    }

    /// Deletes the key. Replicated as `DEL`. False if it did not exist.
    pub fn delete(&self) -> bool {
        if !self.exists() {
            return false;
        }
        // SAFETY: key opened for writing.
        let ok = unsafe { call(raw::RedisModule_DeleteKey, |f| f(self.ptr)) }
            == Some(raw::REDISMODULE_OK as c_int);
        if ok {
            self.replicate("DEL", &[]);
        }
        ok
    }

    /// Replicates `command key args...`.
    fn replicate(&self, command: &str, args: &[&[u8]]) {
        let mut argv: Vec<&[u8]> = Vec::with_capacity(args.len() + 1);
        argv.push(self.name());
        argv.extend_from_slice(args);
        self.ctx.replicate(command, argv.as_slice());
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
