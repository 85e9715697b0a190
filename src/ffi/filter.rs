//! A command filter: the server shows the module every command before running it (how the
//! module learns of CONFIG RESETSTAT, for which no server event exists). Registered only while
//! it is wanted, since the server pays for it on every command it runs.

use std::os::raw::c_int;
use std::ptr;
use std::sync::atomic::{AtomicPtr, Ordering::Relaxed};

use redis_module::raw;

/// What a filter does with a command. It must be cheap: it runs before every command the
/// server executes, so it reads only the arguments it needs.
pub(crate) trait Filter {
    fn command(command: &FilteredCommand);
}

/// A command the server is about to run, as its filter sees it.
pub(crate) struct FilteredCommand(*mut raw::RedisModuleCommandFilterCtx);

impl FilteredCommand {
    /// The bytes of argument `pos` (0 is the command's name), if there is one.
    pub(crate) fn arg(&self, pos: c_int) -> Option<&[u8]> {
        let get = api!(RedisModule_CommandFilterArgGet)?;
        let ptr_len = api!(RedisModule_StringPtrLen)?;
        // SAFETY: the filter context is valid for the callback's duration, which outlives
        // `self` (made and dropped in `filtered`), and ArgGet checks the position (null past
        // the end); the bytes are borrowed from `self`, so read only within the callback.
        unsafe {
            let string = get(self.0, pos);
            if string.is_null() {
                return None;
            }
            let mut len = 0;
            let p = ptr_len(string, &mut len);
            if p.is_null() {
                return None;
            }
            Some(std::slice::from_raw_parts(p.cast::<u8>(), len))
        }
    }
}

extern "C" fn filtered<F: Filter>(fctx: *mut raw::RedisModuleCommandFilterCtx) {
    F::command(&FilteredCommand(fctx));
}

/// The registered filter, null while there is none.
static REGISTERED: AtomicPtr<raw::RedisModuleCommandFilter> = AtomicPtr::new(ptr::null_mut());

/// Forgets a filter of an earlier load (the server drops the module's filters at unload).
/// Called from OnLoad and at unload.
pub(crate) fn reset() {
    REGISTERED.store(ptr::null_mut(), Relaxed);
}

/// Registers `F` (`on`) or removes it, skipping the module's own calls. Only on the main thread,
/// outside any filter's callback (a setting's change, or OnLoad). False if the server refused.
pub(crate) fn watch<F: Filter>(on: bool) -> bool {
    let module = super::detached::context();
    let registered = REGISTERED.load(Relaxed);
    let already = !registered.is_null();
    if module.is_null() || on == already {
        return !module.is_null();
    }
    if on {
        let Some(register) = api!(RedisModule_RegisterCommandFilter) else {
            return false;
        };
        // SAFETY: `module` is the module's detached context (alive until unload) and the
        // callback has the API's signature; the server keeps the filter until it is removed
        // below or the module unloads.
        let filter = unsafe {
            register(
                module,
                Some(filtered::<F>),
                raw::REDISMODULE_CMDFILTER_NOSELF as c_int,
            )
        };
        REGISTERED.store(filter, Relaxed);
        !filter.is_null()
    } else {
        let Some(unregister) = api!(RedisModule_UnregisterCommandFilter) else {
            return false;
        };
        // SAFETY: `registered` was returned by RegisterCommandFilter for this module and not
        // removed since (it is cleared here); we are not inside a filter callback, so the
        // server's list of filters is not being walked.
        let status = unsafe { unregister(module, registered) };
        REGISTERED.store(ptr::null_mut(), Relaxed);
        status == raw::REDISMODULE_OK as c_int
    }
}
