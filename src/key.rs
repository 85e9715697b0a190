//! An open Redis key with the typed operations the limiter needs, safe over the raw module API.
//!
//! Every write method also replicates its effect as a plain Redis command (`SET`, `HSET`, `ZADD`,
//! `ZREMRANGEBYSCORE`, `PEXPIREAT`, `UNLINK` ...) and fires the keyspace event that command fires.
//! Writing through this type is the only way the module writes, so no write can reach the
//! dataset without reaching replicas and the AOF, replicas never re-run the time- and
//! random-dependent logic, and keyspace-event consumers see what they would see for Redisson's
//! scripts (or on a replica applying the effects).

use std::ffi::CStr;
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

    /// Stores a string value in place, keeping the key's TTL. Replicated as `SET key v KEEPTTL`,
    /// only once the value is really stored.
    pub fn set_string(&self, value: &[u8]) -> bool {
        // SAFETY: key opened for writing; truncate creates or resizes the string, DMA gives
        // `value.len()` writable bytes, which are written only when it gives exactly that many.
        let stored = unsafe {
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
        };
        if !stored {
            return false;
        }
        // SAFETY: format "sbc" = key, (buffer, length), C string.
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
        }
        self.notify(raw::REDISMODULE_NOTIFY_STRING, c"set");
        true
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

    /// Sets hash fields. Replicated as one `HSET key f v [f v ...]` of the fields really set.
    pub fn hash_set(&self, fields: &[(&CStr, &[u8])]) {
        let mut args: Vec<&[u8]> = Vec::with_capacity(fields.len() * 2);
        for &(field, bytes) in fields {
            let value = RedisString::create_from_slice(self.ctx.ctx, bytes);
            // SAFETY: variadic HashSet with a C-string field and a RedisModuleString value;
            // it returns the number of fields updated or inserted, 0 on failure (which a key
            // opened for writing with a hash or nothing in it never gives).
            let set = unsafe {
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
            if set.is_some() && self.kind() == Kind::Hash {
                args.push(field.to_bytes());
                args.push(bytes);
            }
        }
        if !args.is_empty() {
            self.replicate("HSET", &args);
            self.notify(raw::REDISMODULE_NOTIFY_HASH, c"hset");
        }
    }

    /// Deletes a hash field if present. Replicated as `HDEL key field`.
    pub fn hash_del(&self, field: &CStr) -> bool {
        if self.kind() != Kind::Hash {
            return false;
        }
        // SAFETY: variadic HashSet with a C-string field and REDISMODULE_HASH_DELETE as its
        // value, which deletes the field; it returns how many fields were deleted.
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
        if deleted.unwrap_or(0) <= 0 {
            return false;
        }
        self.replicate("HDEL", &[field.to_bytes()]);
        self.notify(raw::REDISMODULE_NOTIFY_HASH, c"hdel");
        if !self.exists() {
            self.notify(raw::REDISMODULE_NOTIFY_GENERIC, c"del");
        }
        true
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

    /// The number of members of a zset (0 if missing or of another type). O(1).
    pub fn zcard(&self) -> usize {
        if self.kind() != Kind::ZSet {
            return 0;
        }
        // SAFETY: ValueLength accepts any open key.
        unsafe { call(raw::RedisModule_ValueLength, |f| f(self.ptr)) }.unwrap_or(0)
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
            // SAFETY: format "slb" = key, long long score, (buffer, length) member.
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
            }
            self.notify(raw::REDISMODULE_NOTIFY_ZSET, c"zadd");
        }
        added
    }

    /// Removes one member. Replicated as `ZREM key member`.
    pub fn zrem(&self, member: &[u8]) -> bool {
        if !self.remove_member(&RedisString::create_from_slice(self.ctx.ctx, member)) {
            return false;
        }
        self.replicate("ZREM", &[member]);
        self.notify_removed(c"zrem");
        true
    }

    /// Removes the `count` members of highest rank: the newest entries. Replicated as one
    /// `ZREMRANGEBYRANK key -count -1`, however many they are.
    pub fn zrem_newest(&self, count: usize) -> usize {
        let mut newest: Vec<RedisString> = Vec::with_capacity(count);
        if count > 0 {
            let _ = self.zscan::<()>(Span::Everything, Order::NewestFirst, |_, member| {
                newest.push(RedisString::create_from_slice(self.ctx.ctx, member));
                Ok(if newest.len() < count {
                    ControlFlow::Continue(())
                } else {
                    ControlFlow::Break(())
                })
            });
        }
        let removed = newest.iter().filter(|m| self.remove_member(m)).count();
        if removed > 0 {
            let from = format!("-{removed}");
            self.replicate("ZREMRANGEBYRANK", &[from.as_bytes(), b"-1"]);
            self.notify_removed(c"zremrangebyrank");
        }
        removed
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

    /// The events of a removal from a zset: the command's own, then `del` if the zset emptied
    /// (the module API deletes an emptied zset, as ZREM does).
    fn notify_removed(&self, event: &CStr) {
        self.notify(raw::REDISMODULE_NOTIFY_ZSET, event);
        if !self.exists() {
            self.notify(raw::REDISMODULE_NOTIFY_GENERIC, c"del");
        }
    }

    /// Removes every member scored at or below `cutoff`: one range scan collects them, then
    /// each is removed (the module API has no range removal, and a zset must not change under
    /// its iterator). Replicated as one `ZREMRANGEBYSCORE key -inf cutoff`.
    pub fn zrem_up_to(&self, cutoff: i64) -> usize {
        let mut expired: Vec<RedisString> = Vec::new();
        let _ = self.zscan::<()>(Span::UpTo(cutoff), Order::OldestFirst, |_, member| {
            expired.push(RedisString::create_from_slice(self.ctx.ctx, member));
            Ok(ControlFlow::Continue(()))
        });
        let removed = expired.iter().filter(|m| self.remove_member(m)).count();
        if removed > 0 {
            // SAFETY: format "scl" = key, C string, long long.
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
            }
            self.notify_removed(c"zremrangebyscore");
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
                self.replicate_with_number(c"PEXPIREAT", at);
                self.notify(raw::REDISMODULE_NOTIFY_GENERIC, c"expire");
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
            self.replicate_with_number(c"PEXPIREAT", at);
            self.notify(raw::REDISMODULE_NOTIFY_GENERIC, c"expire");
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
            self.notify(raw::REDISMODULE_NOTIFY_GENERIC, c"persist");
        }
        ok
    }

    /// Deletes the key the way UNLINK does: a large value is freed in the background, so even
    /// a log of a million entries goes in O(1). Replicated as `UNLINK`. False if it did not exist.
    pub fn delete(&self) -> bool {
        if !self.exists() {
            return false;
        }
        // SAFETY: key opened for writing; UnlinkKey exists since Redis 4.0.7, DeleteKey always.
        let ok = unsafe {
            match raw::RedisModule_UnlinkKey {
                Some(unlink) => unlink(self.ptr),
                None => call(raw::RedisModule_DeleteKey, |f| f(self.ptr))
                    .unwrap_or(raw::REDISMODULE_ERR as c_int),
            }
        } == raw::REDISMODULE_OK as c_int;
        if ok {
            self.replicate("UNLINK", &[]);
            self.notify(raw::REDISMODULE_NOTIFY_GENERIC, c"del");
        }
        ok
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
