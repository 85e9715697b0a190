//! Module timers that carry a plain id.

use std::os::raw::c_void;
use std::ptr;

use redis_module::{raw, Context};

/// A timer as the server names it.
pub(crate) type TimerId = raw::RedisModuleTimerID;

/// What a kind of timer does when it fires; implemented by the layer that sets it.
pub(crate) trait Timer {
    /// Runs on the main thread, with the timer's context and the id given to [`start`].
    fn fired(ctx: &Context, id: u64);
}

/// Sets a timer that fires `ms` from now with `id`; None where the server lacks the API. The id
/// travels as the timer's data pointer but is never dereferenced, so there is nothing to free
/// when the timer fires or is stopped.
pub(crate) fn start<T: Timer>(ctx: &Context, ms: i64, id: u64) -> Option<TimerId> {
    // SAFETY: a module context and a callback that never dereferences its data; CreateTimer
    // copies the pointer-sized id.
    unsafe {
        raw::RedisModule_CreateTimer
            .map(|create| create(ctx.ctx, ms, Some(fire::<T>), id as usize as *mut c_void))
    }
}

/// Stops a timer. Stopping one that has fired or was stopped already does nothing.
pub(crate) fn stop(ctx: &Context, timer: TimerId) {
    let mut data: *mut c_void = ptr::null_mut();
    // SAFETY: StopTimer returns an error for an unknown or fired timer; `data` is a valid place
    // for it to write the stopped timer's (never dereferenced) id.
    unsafe {
        if let Some(stop) = raw::RedisModule_StopTimer {
            stop(ctx.ctx, timer, &mut data);
        }
    }
}

/// The server's callback for every timer set by [`start`]: hands the id back to `T`.
extern "C" fn fire<T: Timer>(ctx: *mut raw::RedisModuleCtx, data: *mut c_void) {
    T::fired(&Context::new(ctx), data as usize as u64);
}
