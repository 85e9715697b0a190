//! Replies written straight into the client's buffer, for the shapes a `RedisValue` cannot keep
//! (a map in a documented order) or would allocate for (a few integers). The caller writes
//! exactly as many elements as it announced.
//!
//! Each calls the module API directly, without the crate's wrapper turning the status into a
//! `Status` nobody reads (a reply always succeeds): an ALLOW writes eleven.

use std::os::raw::{c_char, c_long};

use redis_module::Context;

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
