//! Replies written straight into the client's buffer, for the shapes a `RedisValue` cannot keep
//! (a map in a documented order) or would allocate for (a few integers). The caller writes
//! exactly as many elements as it announced.

use std::os::raw::{c_char, c_long};

use redis_module::{raw, Context};

/// A map of `pairs` name-value pairs (a flat array of twice as many in RESP2); each name and
/// value follows as its own reply.
pub(crate) fn map(ctx: &Context, pairs: usize) {
    raw::reply_with_map(ctx.ctx, c_long::try_from(pairs).unwrap_or(c_long::MAX));
}

/// An array of `len` elements, each following as its own reply.
pub(crate) fn array(ctx: &Context, len: usize) {
    raw::reply_with_array(ctx.ctx, c_long::try_from(len).unwrap_or(c_long::MAX));
}

pub(crate) fn integer(ctx: &Context, n: i64) {
    raw::reply_with_long_long(ctx.ctx, n);
}

pub(crate) fn null(ctx: &Context) {
    raw::reply_with_null(ctx.ctx);
}

/// A bulk string of `bytes`.
pub(crate) fn bulk(ctx: &Context, bytes: &[u8]) {
    raw::reply_with_string_buffer(ctx.ctx, bytes.as_ptr().cast::<c_char>(), bytes.len());
}
