//! Blocked clients: blocking a command's caller, unblocking it with what it is to be told, and
//! the server's callbacks for it.
//!
//! The server requires `UnblockClient` exactly once for every blocked client; the caller's
//! bookkeeping (the waiters' queue) guarantees that, these functions cannot.

use std::any::Any;
use std::os::raw::{c_int, c_void};
use std::ptr;

use redis_module::{raw, Context, Status};

/// A client blocked by [`block`]. Only this module makes one from a server pointer, so every
/// handle outside it is one the server gave.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct BlockedClient(*mut raw::RedisModuleBlockedClient);

#[cfg(test)]
impl BlockedClient {
    /// A handle for bookkeeping tests, which never give it to the server.
    pub(crate) fn for_test(n: usize) -> Self {
        BlockedClient(n as *mut raw::RedisModuleBlockedClient)
    }
}

/// What the server calls for a client blocked by [`block::<B>`](block); implemented by the layer
/// that blocks clients. Each runs on the main thread.
pub(crate) trait Blocker {
    /// Sends the client its reply after [`unblock`]: `outcome` is what was given there (None
    /// when nothing was).
    fn reply(ctx: &Context, outcome: Option<&dyn Any>) -> Status;
    /// The server's timeout callback, reached only through CLIENT UNBLOCK since [`block`] sets
    /// no server-side timeout. It replies to the client itself.
    fn timed_out(ctx: &Context, client: BlockedClient) -> Status;
    /// The client disconnected while blocked.
    fn disconnected(ctx: &Context, client: BlockedClient);
}

/// Blocks the calling client with `B`'s callbacks and no server-side timeout. None when the
/// server cannot block it.
pub(crate) fn block<B: Blocker>(ctx: &Context) -> Option<BlockedClient> {
    // SAFETY: a command context; the callbacks follow the blocked-client contract (see each).
    let client = unsafe {
        raw::RedisModule_BlockClient.map(|block| {
            block(
                ctx.ctx,
                Some(reply::<B>),
                Some(timed_out::<B>),
                Some(free_outcome),
                0,
            )
        })
    };
    let client = client.filter(|client| !client.is_null())?;
    // SAFETY: a live blocked-client handle, just created.
    unsafe {
        if let Some(set) = raw::RedisModule_SetDisconnectCallback {
            set(client, Some(disconnected::<B>));
        }
    }
    Some(BlockedClient(client))
}

/// Unblocks `client`, whose reply callback then gets `outcome`. The caller calls this, or
/// [`unblock_without_outcome`], exactly once per client.
pub(crate) fn unblock<T: Any>(client: BlockedClient, outcome: T) {
    let outcome: Box<dyn Any> = Box::new(outcome);
    let data = Box::into_raw(Box::new(outcome)).cast::<c_void>();
    // SAFETY: a handle the server gave, unblocked once (the caller's contract); the server hands
    // `data` to `reply` and then to `free_outcome`, which frees it.
    unsafe {
        if let Some(unblock) = raw::RedisModule_UnblockClient {
            unblock(client.0, data);
        }
    }
}

/// Unblocks `client` with nothing for its reply callback: from the timeout callback, which
/// replied already, or after a disconnection. Exactly once per client, as [`unblock`].
pub(crate) fn unblock_without_outcome(client: BlockedClient) {
    // SAFETY: a handle the server gave, unblocked once (the caller's contract).
    unsafe {
        if let Some(unblock) = raw::RedisModule_UnblockClient {
            unblock(client.0, ptr::null_mut());
        }
    }
}

/// The reply callback: lends `B` the outcome [`unblock`] gave.
unsafe extern "C" fn reply<B: Blocker>(
    ctx: *mut raw::RedisModuleCtx,
    _argv: *mut *mut raw::RedisModuleString,
    _argc: c_int,
) -> c_int {
    // SAFETY: a blocked-client reply context, whose private data the server keeps for us.
    let data =
        unsafe { raw::RedisModule_GetBlockedClientPrivateData.map_or(ptr::null_mut(), |f| f(ctx)) };
    // SAFETY: non-null private data is only ever the Box<Box<dyn Any>> made by `unblock`, still
    // owned by the server: it is freed by `free_outcome`, after this callback.
    let outcome = unsafe { data.cast::<Box<dyn Any>>().as_ref() };
    B::reply(&Context::new(ctx), outcome.map(|outcome| &**outcome)) as c_int
}

/// The timeout callback: hands `B` the client's handle.
unsafe extern "C" fn timed_out<B: Blocker>(
    ctx: *mut raw::RedisModuleCtx,
    _argv: *mut *mut raw::RedisModuleString,
    _argc: c_int,
) -> c_int {
    // SAFETY: a blocked-client context, whose handle the server gives back.
    let client =
        unsafe { raw::RedisModule_GetBlockedClientHandle.map_or(ptr::null_mut(), |f| f(ctx)) };
    B::timed_out(&Context::new(ctx), BlockedClient(client)) as c_int
}

/// The disconnect callback.
extern "C" fn disconnected<B: Blocker>(
    ctx: *mut raw::RedisModuleCtx,
    client: *mut raw::RedisModuleBlockedClient,
) {
    B::disconnected(&Context::new(ctx), BlockedClient(client));
}

/// Frees what [`unblock`] gave the server, once the reply is sent (or the client is gone).
unsafe extern "C" fn free_outcome(_ctx: *mut raw::RedisModuleCtx, data: *mut c_void) {
    if !data.is_null() {
        // SAFETY: made by Box::into_raw in `unblock`; the server calls this once per unblock.
        drop(unsafe { Box::from_raw(data.cast::<Box<dyn Any>>()) });
    }
}
