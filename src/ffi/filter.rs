//! A command filter: the server shows the module every command before running it (how the
//! module learns of CONFIG RESETSTAT, for which no server event exists).

use std::os::raw::c_int;

use redis_module::{raw, Context};

/// What a filter does with a command's name and first argument. It must be cheap: it runs
/// before every command the server executes.
pub(crate) trait Filter {
    fn command(name: &[u8], first: Option<&[u8]>);
}

/// The bytes of a filtered command's argument `pos`, if there is one.
fn arg<'a>(fctx: *mut raw::RedisModuleCommandFilterCtx, pos: c_int) -> Option<&'a [u8]> {
    let get = api!(RedisModule_CommandFilterArgGet)?;
    let ptr_len = api!(RedisModule_StringPtrLen)?;
    // SAFETY: the filter context is valid for the callback's duration, and ArgGet checks the
    // position (null past the end); the bytes are read only within the callback.
    unsafe {
        let string = get(fctx, pos);
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

extern "C" fn filtered<F: Filter>(fctx: *mut raw::RedisModuleCommandFilterCtx) {
    let Some(name) = arg(fctx, 0) else {
        return;
    };
    F::command(name, arg(fctx, 1));
}

/// Registers `F`, skipping the module's own calls. False if the server refused.
pub(crate) fn register<F: Filter>(ctx: &Context) -> bool {
    let Some(register) = api!(RedisModule_RegisterCommandFilter) else {
        return false;
    };
    // SAFETY: called from OnLoad with the module's context and a callback of the API's
    // signature; the server keeps the filter until the module unloads.
    let filter = unsafe {
        register(
            ctx.ctx,
            Some(filtered::<F>),
            raw::REDISMODULE_CMDFILTER_NOSELF as c_int,
        )
    };
    !filter.is_null()
}
