//! Raw key access: an open key and the module API calls on it, each safe to call with any
//! argument; what a write means (which command it stands for, its replication and event) is
//! decided above, in `key.rs`. Also the strings the module keeps across commands, replication
//! and keyspace notification.
//!
//! Every optional API pointer is read through `api!` (in `ffi/mod.rs`): a server that lacks a
//! call (an older version) makes it fail, never crash.

use std::cell::Cell;
use std::ffi::CStr;
use std::os::raw::{c_char, c_int, c_void};
use std::ptr::{self, NonNull};

use redis_module::{raw, Context, RedisString};

/// What a key holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum KeyType {
    Empty,
    String,
    Hash,
    ZSet,
    Other,
}

/// An open key, closed on drop. Opened for reading, a missing key has no handle (the server
/// returns none); every call on it then answers as for an empty key.
pub(crate) struct RawKey {
    ptr: *mut raw::RedisModuleKey,
    /// Set while a [`ZsetRange`] walks the key: the module API forbids changing a zset under its
    /// range, so every write fails meanwhile.
    walking: Cell<bool>,
    /// The key's type as last asked, forgotten by every write (a command runs alone, so only
    /// its own writes change the key while it is open).
    known_type: Cell<Option<KeyType>>,
}

impl Drop for RawKey {
    fn drop(&mut self) {
        if let Some(close) = api!(RedisModule_CloseKey) {
            if !self.ptr.is_null() {
                // SAFETY: a key this type opened, closed once (no range outlives the key: it
                // borrows it).
                unsafe { close(self.ptr) };
            }
        }
    }
}

impl RawKey {
    /// Opens `name` in the context's database, for writing too if `write`.
    pub(crate) fn open(ctx: &Context, name: &RedisString, write: bool) -> RawKey {
        let mode = if write {
            raw::REDISMODULE_READ | raw::REDISMODULE_WRITE
        } else {
            raw::REDISMODULE_READ
        };
        let ptr = match api!(RedisModule_OpenKey) {
            // SAFETY: a live context and key name string; the handle is closed on drop.
            Some(open) => unsafe { open(ctx.ctx, name.inner, mode as c_int) }.cast(),
            None => ptr::null_mut(),
        };
        RawKey {
            ptr,
            walking: Cell::new(false),
            known_type: Cell::new(None),
        }
    }

    fn handle(&self) -> Option<*mut raw::RedisModuleKey> {
        (!self.ptr.is_null()).then_some(self.ptr)
    }

    /// The handle for a write: none while a range walks the key. The write may change the
    /// key's type, so the type is asked anew after it.
    fn writable(&self) -> Option<*mut raw::RedisModuleKey> {
        if self.walking.get() {
            return None;
        }
        self.known_type.set(None);
        self.handle()
    }

    pub(crate) fn key_type(&self) -> KeyType {
        if let Some(known) = self.known_type.get() {
            return known;
        }
        let (Some(key), Some(key_type)) = (self.handle(), api!(RedisModule_KeyType)) else {
            return KeyType::Empty;
        };
        // SAFETY: an open key.
        let found = match unsafe { key_type(key) } as isize {
            raw::REDISMODULE_KEYTYPE_EMPTY => KeyType::Empty,
            raw::REDISMODULE_KEYTYPE_STRING => KeyType::String,
            raw::REDISMODULE_KEYTYPE_HASH => KeyType::Hash,
            raw::REDISMODULE_KEYTYPE_ZSET => KeyType::ZSet,
            _ => KeyType::Other,
        };
        self.known_type.set(Some(found));
        found
    }

    /// Reads a string key's bytes with `read`; None for any other type. The bytes are the
    /// server's own buffer, valid only until the key is written or closed, so they never leave
    /// `read`.
    pub(crate) fn read_string<R>(&self, read: impl FnOnce(&[u8]) -> R) -> Option<R> {
        if self.key_type() != KeyType::String {
            return None;
        }
        let (key, dma) = (self.handle()?, api!(RedisModule_StringDMA)?);
        let mut len: usize = 0;
        // SAFETY: a string key opened at least for reading; DMA READ returns its buffer.
        let data = unsafe { dma(key, &mut len, raw::REDISMODULE_READ as c_int) };
        if data.is_null() {
            return Some(read(&[]));
        }
        // SAFETY: the server guarantees `len` readable bytes at `data` while the key stays open
        // and unmodified: nothing can write the key while `read` runs (it gets no key), and
        // the slice does not outlive it.
        Some(read(unsafe {
            std::slice::from_raw_parts(data.cast::<u8>(), len)
        }))
    }

    /// Stores `value` as the key's string, creating it or replacing what it held (its TTL is
    /// kept); true only if all of it is stored.
    pub(crate) fn set_string(&self, value: &[u8]) -> bool {
        let (Some(key), Some(truncate), Some(dma)) = (
            self.writable(),
            api!(RedisModule_StringTruncate),
            api!(RedisModule_StringDMA),
        ) else {
            return false;
        };
        // SAFETY: a key opened for writing; truncate creates or resizes the string.
        if unsafe { truncate(key, value.len()) } != raw::REDISMODULE_OK as c_int {
            return false;
        }
        let mut len: usize = 0;
        // SAFETY: DMA WRITE on the string just sized.
        let buf = unsafe { dma(key, &mut len, raw::REDISMODULE_WRITE as c_int) };
        if buf.is_null() || len != value.len() {
            return false;
        }
        // SAFETY: the server gave `len` writable bytes at `buf`, exactly `value.len()`.
        unsafe { ptr::copy_nonoverlapping(value.as_ptr(), buf.cast::<u8>(), len) };
        true
    }

    /// Replaces the key's value by the string `value`, allocated to its exact length (where
    /// [`RawKey::set_string`] grows a new string greedily, to twice its length). The server drops
    /// the key's TTL with its old value: the caller sets the one it wants.
    pub(crate) fn replace_string(&self, value: &RedisString) -> bool {
        let (Some(key), Some(set)) = (self.writable(), api!(RedisModule_StringSet)) else {
            return false;
        };
        // SAFETY: a key opened for writing and a live string; the server takes a reference to
        // the string, which outlives the call.
        unsafe { set(key, value.inner) == raw::REDISMODULE_OK as c_int }
    }

    /// Up to five fields of a hash in one call (absent fields are None); asking more does not
    /// compile. None of them for a key of another type.
    pub(crate) fn hash_get<const N: usize>(
        &self,
        ctx: &Context,
        fields: [&StaticString; N],
    ) -> [Option<RedisString>; N] {
        const { assert!(N <= 5, "hash_get asks at most five fields") };
        let mut out: [*mut raw::RedisModuleString; 5] = [ptr::null_mut(); 5];
        // The fields asked, then NULLs: the first NULL field ends the server's list.
        let mut asked: [*mut raw::RedisModuleString; 5] = [ptr::null_mut(); 5];
        for (slot, field) in asked.iter_mut().zip(fields) {
            *slot = field.as_ptr();
        }
        if let (KeyType::Hash, Some(key), Some(get)) =
            (self.key_type(), self.handle(), api!(RedisModule_HashGet))
        {
            let [a, b, c, d, e] = asked;
            let [oa, ob, oc, od, oe] = &mut out;
            // SAFETY: variadic HashGet on a hash key with (field, &mut out) pairs, terminated
            // by NULL; the first NULL field (one not asked, or one the server could not make)
            // ends the list, so the pairs after it are never read.
            unsafe {
                get(
                    key,
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
                );
            }
        }
        // Each non-null result is a new string owned here; RedisString frees it on drop.
        let mut strings = out
            .map(|p| (!p.is_null()).then(|| RedisString::from_redis_module_string(ctx.ctx, p)))
            .into_iter();
        std::array::from_fn(|_| strings.next().flatten())
    }

    /// Sets one hash field (creating the hash). Its count is of fields updated (0 for an
    /// insert), so success is read from the key: a hash after the call.
    pub(crate) fn hash_set(&self, field: &CStr, value: &RedisString) -> bool {
        let (Some(key), Some(set)) = (self.writable(), api!(RedisModule_HashSet)) else {
            return false;
        };
        // SAFETY: variadic HashSet on a key opened for writing, with a C-string field and a
        // string value, terminated by NULL.
        unsafe {
            set(
                key,
                raw::REDISMODULE_HASH_CFIELDS as c_int,
                field.as_ptr(),
                value.inner,
                ptr::null_mut::<c_void>(),
            );
        }
        self.key_type() == KeyType::Hash
    }

    /// Deletes one hash field; true if it was there.
    pub(crate) fn hash_delete(&self, field: &CStr) -> bool {
        if self.key_type() != KeyType::Hash {
            return false;
        }
        let (Some(key), Some(set)) = (self.writable(), api!(RedisModule_HashSet)) else {
            return false;
        };
        // SAFETY: variadic HashSet with a C-string field and REDISMODULE_HASH_DELETE as its
        // value, which deletes the field; it returns how many were deleted.
        let deleted = unsafe {
            set(
                key,
                raw::REDISMODULE_HASH_CFIELDS as c_int,
                field.as_ptr(),
                raw::REDISMODULE_HASH_DELETE as *mut raw::RedisModuleString,
                ptr::null_mut::<c_void>(),
            )
        };
        deleted > 0
    }

    /// Fields of a hash, members of a zset, bytes of a string; 0 when missing. O(1).
    pub(crate) fn value_length(&self) -> usize {
        let (Some(key), Some(length)) = (self.handle(), api!(RedisModule_ValueLength)) else {
            return 0;
        };
        // SAFETY: ValueLength accepts any open key.
        unsafe { length(key) }
    }

    /// Whether a hash has a field with a TTL of its own (Redis 7.4+); false on servers without
    /// field TTLs.
    pub(crate) fn has_field_ttls(&self) -> bool {
        if self.key_type() != KeyType::Hash {
            return false;
        }
        let (Some(key), Some(min_expire)) = (self.handle(), api!(RedisModule_HashFieldMinExpire))
        else {
            return false;
        };
        // SAFETY: an open hash key.
        let min = unsafe { min_expire(key) };
        min != raw::REDISMODULE_NO_EXPIRE as i64
    }

    /// Adds `element` with `score` (NX: only if new) or moves it (XX: only if there). Whether it
    /// did.
    pub(crate) fn zset_add(&self, score: f64, element: &RedisString, mode: ZAdd) -> bool {
        let (Some(key), Some(add)) = (self.writable(), api!(RedisModule_ZsetAdd)) else {
            return false;
        };
        let (flags, done) = match mode {
            ZAdd::IfNew => (raw::REDISMODULE_ZADD_NX, raw::REDISMODULE_ZADD_ADDED),
            ZAdd::IfPresent => (raw::REDISMODULE_ZADD_XX, raw::REDISMODULE_ZADD_UPDATED),
        };
        let mut flags = flags as c_int;
        // SAFETY: a key opened for writing (an empty one becomes a zset) and a live element.
        let status = unsafe { add(key, score, element.inner, &mut flags) };
        status == raw::REDISMODULE_OK as c_int && flags & done as c_int != 0
    }

    /// Removes `element`; true if it was there. No range may be active on the key.
    pub(crate) fn zset_remove(&self, element: &RedisString) -> bool {
        let (Some(key), Some(remove)) = (self.writable(), api!(RedisModule_ZsetRem)) else {
            return false;
        };
        let mut deleted: c_int = 0;
        // SAFETY: a key opened for writing, with no range active (`writable`).
        unsafe { remove(key, element.inner, &mut deleted) };
        deleted != 0
    }

    /// Starts a walk of a zset's members with a score in `[min, max]` (each end exclusive if
    /// said), from the low end or the high end; None if there is none.
    pub(crate) fn zset_range(&self, bounds: ScoreBounds, from_high: bool) -> Option<ZsetRange<'_>> {
        if self.key_type() != KeyType::ZSet {
            return None;
        }
        let key = self.handle()?;
        let start = if from_high {
            api!(RedisModule_ZsetLastInScoreRange)?
        } else {
            api!(RedisModule_ZsetFirstInScoreRange)?
        };
        let ScoreBounds {
            min,
            max,
            min_exclusive,
            max_exclusive,
        } = bounds;
        // SAFETY: a zset key; the range is stopped when the ZsetRange drops.
        let status = unsafe {
            start(
                key,
                min,
                max,
                c_int::from(min_exclusive),
                c_int::from(max_exclusive),
            )
        };
        if status != raw::REDISMODULE_OK as c_int {
            return None;
        }
        self.walking.set(true);
        Some(ZsetRange {
            key: self,
            from_high,
        })
    }

    /// Remaining TTL in ms, or None when the key has none (or does not exist).
    ///
    /// The key's type is asked first: since Redis 8.2 (keys and values in one object)
    /// GetExpire and GetAbsExpire read the value before they check that there is one, so on a
    /// missing key they crash the server.
    pub(crate) fn ttl(&self) -> Option<i64> {
        if self.key_type() == KeyType::Empty {
            return None;
        }
        let (key, get) = (self.handle()?, api!(RedisModule_GetExpire)?);
        // SAFETY: GetExpire on an open key that exists (checked above).
        let ttl = unsafe { get(key) };
        (ttl >= 0).then_some(ttl)
    }

    /// The absolute expiry in unix ms, or None (no TTL, or no key: see [`RawKey::ttl`]).
    pub(crate) fn expires_at(&self) -> Option<i64> {
        if self.key_type() == KeyType::Empty {
            return None;
        }
        let (key, get) = (self.handle()?, api!(RedisModule_GetAbsExpire)?);
        // SAFETY: GetAbsExpire on an open key that exists (checked above).
        let at = unsafe { get(key) };
        (at >= 0).then_some(at)
    }

    /// Sets the absolute expiry; false if the key is missing or the server refused. A missing
    /// key is never handed to the server's expire setters (as with the getters, newer servers
    /// read the value first).
    pub(crate) fn set_expires_at(&self, at: i64) -> bool {
        if self.key_type() == KeyType::Empty {
            return false;
        }
        let (Some(key), Some(set)) = (self.writable(), api!(RedisModule_SetAbsExpire)) else {
            return false;
        };
        // SAFETY: a key opened for writing that exists (checked above).
        unsafe { set(key, at) == raw::REDISMODULE_OK as c_int }
    }

    /// Removes the TTL; false if the key is missing or the server refused.
    pub(crate) fn persist(&self) -> bool {
        if self.key_type() == KeyType::Empty {
            return false;
        }
        let (Some(key), Some(set)) = (self.writable(), api!(RedisModule_SetExpire)) else {
            return false;
        };
        // SAFETY: a key opened for writing that exists (checked above); NO_EXPIRE removes the
        // TTL.
        unsafe { set(key, raw::REDISMODULE_NO_EXPIRE as i64) == raw::REDISMODULE_OK as c_int }
    }

    /// Deletes the key, its value freed in the background where the server can (UNLINK).
    pub(crate) fn unlink(&self) -> bool {
        let Some(key) = self.writable() else {
            return false;
        };
        // UnlinkKey exists since Redis 4.0.7, DeleteKey always.
        let status = match (api!(RedisModule_UnlinkKey), api!(RedisModule_DeleteKey)) {
            // SAFETY: a key opened for writing.
            (Some(unlink), _) => unsafe { unlink(key) },
            // SAFETY: a key opened for writing.
            (None, Some(delete)) => unsafe { delete(key) },
            (None, None) => raw::REDISMODULE_ERR as c_int,
        };
        status == raw::REDISMODULE_OK as c_int
    }
}

/// Whether the server tells a module a hash's field TTLs (HashFieldMinExpire, Redis 8+).
pub(crate) fn shows_field_ttls() -> bool {
    api!(RedisModule_HashFieldMinExpire).is_some()
}

/// ZADD's condition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ZAdd {
    /// NX.
    IfNew,
    /// XX.
    IfPresent,
}

/// Score bounds of a zset range.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct ScoreBounds {
    pub(crate) min: f64,
    pub(crate) max: f64,
    pub(crate) min_exclusive: bool,
    pub(crate) max_exclusive: bool,
}

/// A walk of a zset range, stopped on drop. Its key refuses writes while it is active (the
/// module API forbids changing a zset under its range).
pub(crate) struct ZsetRange<'k> {
    key: &'k RawKey,
    from_high: bool,
}

impl ZsetRange<'_> {
    /// The member the walk is at and its score, or None once past the end.
    pub(crate) fn current(&self, ctx: &Context) -> Option<(f64, RedisString)> {
        let key = self.key.handle()?;
        let (ended, element) = (
            api!(RedisModule_ZsetRangeEndReached)?,
            api!(RedisModule_ZsetRangeCurrentElement)?,
        );
        // SAFETY: the range is active on this key.
        if unsafe { ended(key) } != 0 {
            return None;
        }
        let mut score = 0f64;
        // SAFETY: the range is active; the result is a new string (owned below) or NULL.
        let member = NonNull::new(unsafe { element(key, &mut score) })?;
        Some((
            score,
            RedisString::from_redis_module_string(ctx.ctx, member.as_ptr()),
        ))
    }

    /// Whether the walk is past its last member (at once, for an empty range).
    pub(crate) fn at_end(&self) -> bool {
        let (Some(key), Some(ended)) = (self.key.handle(), api!(RedisModule_ZsetRangeEndReached))
        else {
            return true;
        };
        // SAFETY: the range is active on this key.
        unsafe { ended(key) != 0 }
    }

    /// Moves to the next member in the walk's direction; false at the end.
    pub(crate) fn advance(&mut self) -> bool {
        let Some(key) = self.key.handle() else {
            return false;
        };
        let step = if self.from_high {
            api!(RedisModule_ZsetRangePrev)
        } else {
            api!(RedisModule_ZsetRangeNext)
        };
        // SAFETY: the range is active; a 0 return means no more members.
        step.is_some_and(|step| unsafe { step(key) } != 0)
    }
}

impl Drop for ZsetRange<'_> {
    fn drop(&mut self) {
        if let (Some(key), Some(stop)) = (self.key.handle(), api!(RedisModule_ZsetRangeStop)) {
            // SAFETY: stopping a range is valid whether or not it reached its end.
            unsafe { stop(key) };
        }
        self.key.walking.set(false);
    }
}

/// A module string the module keeps across commands: made without a context, so the server
/// never frees it on its own; freed on drop.
pub(crate) struct KeptString(NonNull<raw::RedisModuleString>);

// SAFETY: a kept string is a heap object only the server's main thread touches: the module
// runs no threads of its own, and commands, timers and events all run there. Statics need Send
// and Sync to hold one.
unsafe impl Send for KeptString {}
// SAFETY: as for Send.
unsafe impl Sync for KeptString {}

impl KeptString {
    /// None where the server cannot make strings (no server: unit tests).
    pub(crate) fn new(bytes: &[u8]) -> Option<KeptString> {
        let create = api!(RedisModule_CreateString)?;
        // SAFETY: a NULL context makes a string no automatic memory management frees.
        let string = unsafe {
            create(
                ptr::null_mut(),
                bytes.as_ptr().cast::<c_char>(),
                bytes.len(),
            )
        };
        NonNull::new(string).map(KeptString)
    }

    fn as_ptr(&self) -> *mut raw::RedisModuleString {
        self.0.as_ptr()
    }

    /// Another reference to the same string, for a command to use and drop: the string lives
    /// until both are gone. None where the server cannot hold strings (Redis < 6.0.7).
    pub(crate) fn hold(&self, ctx: &Context) -> Option<RedisString> {
        let hold = api!(RedisModule_HoldString)?;
        // SAFETY: a live string; with a NULL context, no automatic memory management is
        // involved and the reference is released by the RedisString's drop.
        let held = unsafe { hold(ptr::null_mut(), self.as_ptr()) };
        NonNull::new(held).map(|held| RedisString::from_redis_module_string(ctx.ctx, held.as_ptr()))
    }
}

impl Drop for KeptString {
    fn drop(&mut self) {
        if let Some(free) = api!(RedisModule_FreeString) {
            // SAFETY: made with a NULL context, freed once, with a NULL context.
            unsafe { free(ptr::null_mut(), self.as_ptr()) };
        }
    }
}

/// A string made once and kept for the life of the process: hash field names, replication
/// keywords.
pub(crate) struct StaticString {
    bytes: &'static [u8],
    string: std::sync::OnceLock<Option<KeptString>>,
}

impl StaticString {
    pub(crate) const fn new(bytes: &'static [u8]) -> Self {
        StaticString {
            bytes,
            string: std::sync::OnceLock::new(),
        }
    }

    /// Its bytes, for the store's in-memory dataset (unit tests and the fuzz target).
    #[cfg(any(test, fuzzing))]
    pub(crate) const fn bytes(&self) -> &'static [u8] {
        self.bytes
    }

    fn kept(&self) -> Option<&KeptString> {
        self.string
            .get_or_init(|| KeptString::new(self.bytes))
            .as_ref()
    }

    fn as_ptr(&self) -> *mut raw::RedisModuleString {
        self.kept().map_or(ptr::null_mut(), KeptString::as_ptr)
    }
}

/// `n` in decimal as a new string, formatted by the server; None only without the call (every
/// server has had it since Redis 4.0).
pub(crate) fn decimal(ctx: &Context, n: i64) -> Option<RedisString> {
    let create = api!(RedisModule_CreateStringFromLongLong)?;
    // SAFETY: a live context; the new string is owned by the RedisString, whose drop frees it.
    let string = unsafe { create(ctx.ctx, n) };
    NonNull::new(string)
        .map(|string| RedisString::from_redis_module_string(ctx.ctx, string.as_ptr()))
}

/// One argument of a replicated command.
pub(crate) enum Arg<'a> {
    String(&'a RedisString),
    Static(&'a StaticString),
}

/// Replicates `command args...` (the first argument is the key) to replicas and the AOF, as the
/// effect of the running command. Up to twelve arguments: the module's longest, an HSET of
/// every field a limiter has, takes eleven.
pub(crate) fn replicate(ctx: &Context, command: &CStr, args: &[Arg<'_>]) {
    let mut argv: [*mut raw::RedisModuleString; 12] = [ptr::null_mut(); 12];
    debug_assert!(
        args.len() <= argv.len(),
        "{command:?} has {} arguments",
        args.len()
    );
    if args.len() > argv.len() {
        return;
    }
    for (slot, arg) in argv.iter_mut().zip(args) {
        *slot = match arg {
            Arg::String(string) => string.inner,
            Arg::Static(string) => string.as_ptr(),
        };
    }
    let argc = args.len().min(argv.len());
    if argv.iter().take(argc).any(|p| p.is_null()) {
        return;
    }
    let Some(replicate) = api!(RedisModule_Replicate) else {
        return;
    };
    let (ctx, name, vector) = (ctx.ctx, command.as_ptr(), argv.as_mut_ptr());
    // One "s" per argument: the server sizes its argument vector from the format, so it is
    // allocated once. "v" (an array and its length) makes it grow the vector again, a
    // reallocation on every write, so only commands of six arguments or more (an HSET of three
    // fields or more) use it.
    // SAFETY: each "s" takes one pointer to a live string, as many as the format has; "v" takes
    // a pointer to an array of `argc` live strings, then `argc` as a size_t. The server takes
    // its own reference to each string; the array is read during the call only.
    unsafe {
        match *argv.get(..argc).unwrap_or_default() {
            [a] => replicate(ctx, name, c"s".as_ptr(), a),
            [a, b] => replicate(ctx, name, c"ss".as_ptr(), a, b),
            [a, b, c] => replicate(ctx, name, c"sss".as_ptr(), a, b, c),
            [a, b, c, d] => replicate(ctx, name, c"ssss".as_ptr(), a, b, c, d),
            [a, b, c, d, e] => replicate(ctx, name, c"sssss".as_ptr(), a, b, c, d, e),
            _ => replicate(ctx, name, c"v".as_ptr(), vector, argc),
        };
    }
}

/// Tells the server `key` changed (WATCH, client-side caching), as a Redis command does after
/// its write. The module asks the server at load not to do it for every key it opened for
/// writing ([`signal_only_writes`]): a refusal writes nothing.
pub(crate) fn signal_modified(ctx: &Context, key: &RedisString) {
    if let Some(signal) = api!(RedisModule_SignalModifiedKey) {
        // SAFETY: a command or timer context with a database selected, and a live key name.
        unsafe { signal(ctx.ctx, key.inner) };
    }
}

/// At load: the server signals a key changed only when the module says so
/// ([`signal_modified`]), not whenever the module closes a key it opened for writing. False where
/// the server cannot (then every such key is signalled, as before Redis 6.2).
pub(crate) fn signal_only_writes(ctx: &Context) -> bool {
    let Some(set_options) = api!(RedisModule_SetModuleOptions) else {
        return false;
    };
    // SAFETY: the load's context; the options replace the module's, which sets no other.
    unsafe {
        set_options(
            ctx.ctx,
            raw::REDISMODULE_OPTION_NO_IMPLICIT_SIGNAL_MODIFIED as c_int,
        )
    };
    true
}

/// Fires the keyspace event `event` of `class` on `key`, as the equivalent command would.
pub(crate) fn notify(ctx: &Context, class: c_int, event: &CStr, key: &RedisString) {
    if let Some(notify) = api!(RedisModule_NotifyKeyspaceEvent) {
        // SAFETY: a command or timer context, a static event name and a live key name.
        unsafe { notify(ctx.ctx, class, event.as_ptr(), key.inner) };
    }
}
