//! Module configurations (`RedisModule_RegisterBoolConfig`, Redis 7.0+ and Valkey): the server
//! lists them in `CONFIG GET ratelimit.*`, sets them with `CONFIG SET`, from `redis.conf` and from
//! `MODULE LOADEX ... CONFIG`, and calls back here to read and change them.

use std::ffi::CStr;
use std::os::raw::{c_char, c_int, c_void};
use std::ptr;

use redis_module::{raw, Context};

/// A yes/no configuration the module keeps itself; the server reaches it through the
/// [`BoolSetting`] the caller implements.
pub(crate) trait BoolSetting {
    /// The name after the module's (`config-cache` is `ratelimit.config-cache`).
    const NAME: &'static CStr;
    /// Changeable only at load time (CONFIG SET refuses it).
    const IMMUTABLE: bool;
    fn get() -> bool;
    fn set(value: bool);
}

extern "C" fn get_bool<S: BoolSetting>(_name: *const c_char, _privdata: *mut c_void) -> c_int {
    c_int::from(S::get())
}

extern "C" fn set_bool<S: BoolSetting>(
    _name: *const c_char,
    value: c_int,
    _privdata: *mut c_void,
    _err: *mut *mut raw::RedisModuleString,
) -> c_int {
    S::set(value != 0);
    raw::REDISMODULE_OK as c_int
}

/// Registers `S` with `default` (what it holds until the server applies a value given in the
/// configuration file or `MODULE LOADEX`). False if the server refused or lacks the API.
pub(crate) fn register_bool<S: BoolSetting>(ctx: &Context, default: bool) -> bool {
    let Some(register) = api!(RedisModule_RegisterBoolConfig) else {
        return false;
    };
    let flags = if S::IMMUTABLE {
        raw::REDISMODULE_CONFIG_IMMUTABLE
    } else {
        raw::REDISMODULE_CONFIG_DEFAULT
    };
    // SAFETY: called from OnLoad with the module's context; the name is a NUL-terminated static
    // string (the server copies it), the callbacks match the API's signatures and ignore the
    // null private data, and no apply callback is given.
    let status = unsafe {
        register(
            ctx.ctx,
            S::NAME.as_ptr(),
            c_int::from(default),
            flags,
            Some(get_bool::<S>),
            Some(set_bool::<S>),
            None,
            ptr::null_mut(),
        )
    };
    status == raw::REDISMODULE_OK as c_int
}

/// Applies what the configuration file or `MODULE LOADEX` gave for the registered
/// configurations (their defaults otherwise). False if a value was refused.
pub(crate) fn load(ctx: &Context) -> bool {
    let Some(load) = api!(RedisModule_LoadConfigs) else {
        return false;
    };
    // SAFETY: called from OnLoad with the module's context, after the registrations.
    unsafe { load(ctx.ctx) == raw::REDISMODULE_OK as c_int }
}
