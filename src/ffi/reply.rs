//! Replies written straight into the client's buffer, for the shapes a `RedisValue` cannot keep
//! (a map in a documented order) or would allocate for (a few integers). The caller writes
//! exactly as many elements as it announced.
//!
//! Each calls the module API directly, without the crate's wrapper turning the status into a
//! `Status` nobody reads (a reply always succeeds): an ALLOW writes eleven.

use std::ffi::CStr;
use std::os::raw::{c_char, c_int, c_long};
use std::ptr;
use std::sync::atomic::{AtomicPtr, Ordering::Relaxed};

use redis_module::{raw, Context};

use super::detached;

/// A map of `pairs` name-value pairs (a flat array of twice as many in RESP2); each name and
/// value follows as its own reply. On a server without maps in its API, the flat array.
pub(crate) fn map(ctx: &Context, pairs: usize) {
    let pairs = c_long::try_from(pairs).unwrap_or(c_long::MAX);
    match (
        api!(RedisModule_ReplyWithMap),
        api!(RedisModule_ReplyWithArray),
    ) {
        // SAFETY: a command's context; its elements follow.
        (Some(map), _) => unsafe {
            map(ctx.ctx, pairs);
        },
        // SAFETY: as above.
        (None, Some(array)) => unsafe {
            array(ctx.ctx, pairs.saturating_mul(2));
        },
        (None, None) => {}
    }
}

/// An array of `len` elements, each following as its own reply.
pub(crate) fn array(ctx: &Context, len: usize) {
    if let Some(array) = api!(RedisModule_ReplyWithArray) {
        // SAFETY: a command's context; its elements follow.
        unsafe { array(ctx.ctx, c_long::try_from(len).unwrap_or(c_long::MAX)) };
    }
}

pub(crate) fn integer(ctx: &Context, n: i64) {
    if let Some(integer) = api!(RedisModule_ReplyWithLongLong) {
        // SAFETY: a command's context.
        unsafe { integer(ctx.ctx, n) };
    }
}

pub(crate) fn null(ctx: &Context) {
    if let Some(null) = api!(RedisModule_ReplyWithNull) {
        // SAFETY: a command's context.
        unsafe { null(ctx.ctx) };
    }
}

/// A bulk string of `bytes`.
pub(crate) fn bulk(ctx: &Context, bytes: &[u8]) {
    if let Some(bulk) = api!(RedisModule_ReplyWithStringBuffer) {
        // SAFETY: a command's context, and `bytes.len()` bytes at `bytes`, which the server
        // copies during the call.
        unsafe { bulk(ctx.ctx, bytes.as_ptr().cast::<c_char>(), bytes.len()) };
    }
}

/// Bulk strings that commands reply with on every call (the names of a map's fields), each made
/// once at load as the reply of an `ECHO`, then written with one append to the client's buffer
/// where [`bulk`] makes three (the length, the bytes, the CRLF). An ALLOW names five fields:
/// about a thousand instructions a call fewer (see docs/performance.md). A name that could not
/// be made (no detached context, `ECHO` renamed away) is written by [`bulk`]: the same bytes.
pub(crate) struct Names<const N: usize> {
    texts: [&'static CStr; N],
    made: [AtomicPtr<raw::RedisModuleCallReply>; N],
}

impl<const N: usize> Names<N> {
    pub(crate) const fn new(texts: [&'static CStr; N]) -> Self {
        Names {
            texts,
            made: [const { AtomicPtr::new(ptr::null_mut()) }; N],
        }
    }

    pub(crate) const fn len(&self) -> usize {
        N
    }

    /// The text of name `i`.
    pub(crate) fn text(&self, i: usize) -> Option<&'static CStr> {
        self.texts.get(i).copied()
    }

    /// Makes the names with the module's detached context, at load on the main thread; how
    /// many were made. Each is kept only if its reply is exactly the bulk string of its text.
    pub(crate) fn make(&self) -> usize {
        let module = detached::context();
        let (Some(call), Some(proto), Some(free)) = (
            api!(RedisModule_Call),
            api!(RedisModule_CallReplyProto),
            api!(RedisModule_FreeCallReply),
        ) else {
            return 0;
        };
        if module.is_null() {
            return 0;
        }
        let mut made = 0;
        for (text, slot) in self.texts.iter().zip(&self.made) {
            // SAFETY: RM_Call with format "c" (one C-string argument) on the module's detached
            // context, from the main thread (which holds the lock); it returns a reply that is
            // ours until freed (the context has no automatic memory), or NULL.
            let reply = unsafe { call(module, c"ECHO".as_ptr(), c"c".as_ptr(), text.as_ptr()) };
            if reply.is_null() {
                continue;
            }
            let mut len = 0;
            // SAFETY: a live reply; its protocol bytes live as long as it does, and are read
            // before it is freed or kept.
            let exact = unsafe {
                let bytes = proto(reply, &mut len);
                !bytes.is_null()
                    && std::slice::from_raw_parts(bytes.cast::<u8>(), len)
                        == bulk_string(text.to_bytes()).as_slice()
            };
            if exact {
                // Null until now: `free` empties the slots at unload and on a failed load.
                slot.store(reply, Relaxed);
                made += 1;
            } else {
                // SAFETY: a reply of RM_Call, not kept, freed once.
                unsafe { free(reply) };
            }
        }
        made
    }

    /// Writes name `i`, made or not.
    pub(crate) fn reply(&self, ctx: &Context, i: usize) {
        let made = self
            .made
            .get(i)
            .map_or(ptr::null_mut(), |slot| slot.load(Relaxed));
        if let (false, Some(with)) = (made.is_null(), api!(RedisModule_ReplyWithCallReply)) {
            // SAFETY: a command's context and a reply kept from load until `free` (at unload):
            // a RESP2 bulk string, the same bytes in RESP3, which the server copies. It refuses
            // only a RESP3 reply to a RESP2 client, and then writes nothing.
            if unsafe { with(ctx.ctx, made) } == raw::REDISMODULE_OK as c_int {
                return;
            }
        }
        if let Some(text) = self.text(i) {
            bulk(ctx, text.to_bytes());
        }
    }

    /// Frees the names made, at unload or when the load fails: before the detached context,
    /// which each reply refers to.
    pub(crate) fn free(&self) {
        for slot in &self.made {
            let reply = slot.swap(ptr::null_mut(), Relaxed);
            if let (false, Some(free)) = (reply.is_null(), api!(RedisModule_FreeCallReply)) {
                // SAFETY: a reply `make` kept, freed once (swapped out), while the detached
                // context it was made with is still alive.
                unsafe { free(reply) };
            }
        }
    }
}

/// The RESP bulk string of `bytes`: `$`, its length, CRLF, the bytes, CRLF.
fn bulk_string(bytes: &[u8]) -> Vec<u8> {
    let mut out = format!("${}\r\n", bytes.len()).into_bytes();
    out.extend_from_slice(bytes);
    out.extend_from_slice(b"\r\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bulk_string_is_its_length_then_its_bytes() {
        assert_eq!(bulk_string(b"retry_after"), b"$11\r\nretry_after\r\n");
        assert_eq!(bulk_string(b""), b"$0\r\n\r\n");
    }
}
