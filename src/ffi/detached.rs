//! The module's detached context, kept from load to unload for what the server ties to a
//! context beyond one command: the command filter ([`super::filter`]) and the reply names made
//! at load ([`super::names::Names`]).

use std::ptr;
use std::sync::atomic::{AtomicPtr, Ordering::Relaxed};

use redis_module::{raw, Context};

static MODULE: AtomicPtr<raw::RedisModuleCtx> = AtomicPtr::new(ptr::null_mut());

/// Detaches the module's context. Called from OnLoad. False if the server refused.
pub(crate) fn init(ctx: &Context) -> bool {
    let Some(detach) = api!(RedisModule_GetDetachedThreadSafeContext) else {
        return false;
    };
    // SAFETY: called from OnLoad with the module's context; the detached context it returns
    // belongs to the module and is freed in `deinit` (at unload, or when the load fails).
    let module = unsafe { detach(ctx.ctx) };
    MODULE.store(module, Relaxed);
    !module.is_null()
}

/// The detached context, null before [`init`] and after [`deinit`]. Only for calls made on the
/// main thread (it is not locked).
pub(crate) fn context() -> *mut raw::RedisModuleCtx {
    MODULE.load(Relaxed)
}

/// Frees the context [`init`] kept, at unload or when the load fails: after whatever was made
/// with it is freed.
pub(crate) fn deinit() {
    let module = MODULE.swap(ptr::null_mut(), Relaxed);
    if module.is_null() {
        return;
    }
    if let Some(free) = api!(RedisModule_FreeThreadSafeContext) {
        // SAFETY: `module` came from GetDetachedThreadSafeContext and is freed once (swapped out).
        unsafe { free(module) };
    }
}
