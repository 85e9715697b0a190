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

/// Sets `*err` to `message` for the server to reply (it frees the string).
fn set_error(err: *mut *mut raw::RedisModuleString, message: &str) {
    let Some(create) = api!(RedisModule_CreateString) else {
        return;
    };
    if err.is_null() {
        return;
    }
    // SAFETY: the server passes a valid out-pointer for the error; CreateString with a null
    // context makes a string the server takes ownership of and frees after replying.
    unsafe {
        *err = create(
            ptr::null_mut(),
            message.as_ptr().cast::<c_char>(),
            message.len(),
        );
    }
}

/// A number the module keeps itself, in `MIN..=MAX` (the server checks the range).
pub(crate) trait NumericSetting {
    const NAME: &'static CStr;
    const MIN: i64;
    const MAX: i64;
    fn get() -> i64;
    fn set(value: i64) -> Result<(), String>;
}

extern "C" fn get_numeric<S: NumericSetting>(
    _name: *const c_char,
    _privdata: *mut c_void,
) -> std::os::raw::c_longlong {
    S::get()
}

extern "C" fn set_numeric<S: NumericSetting>(
    _name: *const c_char,
    value: std::os::raw::c_longlong,
    _privdata: *mut c_void,
    err: *mut *mut raw::RedisModuleString,
) -> c_int {
    match S::set(value) {
        Ok(()) => raw::REDISMODULE_OK as c_int,
        Err(message) => {
            set_error(err, &message);
            raw::REDISMODULE_ERR as c_int
        }
    }
}

/// Registers `S` (changeable at run time) with `default`. False if refused or unsupported.
pub(crate) fn register_numeric<S: NumericSetting>(ctx: &Context, default: i64) -> bool {
    let Some(register) = api!(RedisModule_RegisterNumericConfig) else {
        return false;
    };
    // SAFETY: called from OnLoad with the module's context; the name is a NUL-terminated static
    // string, the callbacks match the API's signatures and ignore the null private data.
    let status = unsafe {
        register(
            ctx.ctx,
            S::NAME.as_ptr(),
            default,
            raw::REDISMODULE_CONFIG_DEFAULT,
            S::MIN,
            S::MAX,
            Some(get_numeric::<S>),
            Some(set_numeric::<S>),
            None,
            ptr::null_mut(),
        )
    };
    status == raw::REDISMODULE_OK as c_int
}

/// A string the module keeps itself.
pub(crate) trait StringSetting {
    const NAME: &'static CStr;
    fn get() -> Vec<u8>;
    fn set(value: &[u8]) -> Result<(), String>;
}

/// The string last handed to the server by a getter: the server reads it at once, and it is
/// freed when the next getter call replaces it (all on the main thread).
static LAST_GOT: std::sync::atomic::AtomicPtr<raw::RedisModuleString> =
    std::sync::atomic::AtomicPtr::new(ptr::null_mut());

extern "C" fn get_string<S: StringSetting>(
    _name: *const c_char,
    _privdata: *mut c_void,
) -> *mut raw::RedisModuleString {
    let (Some(create), Some(free)) = (api!(RedisModule_CreateString), api!(RedisModule_FreeString))
    else {
        return ptr::null_mut();
    };
    let value = S::get();
    // SAFETY: CreateString with a null context copies the bytes into a string the module owns;
    // the one it replaces was handed to the server by an earlier call, which has finished with
    // it (the server uses a getter's string before calling any getter again).
    unsafe {
        let string = create(
            ptr::null_mut(),
            value.as_ptr().cast::<c_char>(),
            value.len(),
        );
        let previous = LAST_GOT.swap(string, std::sync::atomic::Ordering::Relaxed);
        if !previous.is_null() {
            free(ptr::null_mut(), previous);
        }
        string
    }
}

extern "C" fn set_string<S: StringSetting>(
    _name: *const c_char,
    value: *mut raw::RedisModuleString,
    _privdata: *mut c_void,
    err: *mut *mut raw::RedisModuleString,
) -> c_int {
    let Some(ptr_len) = api!(RedisModule_StringPtrLen) else {
        return raw::REDISMODULE_ERR as c_int;
    };
    if value.is_null() {
        set_error(err, "a value is required");
        return raw::REDISMODULE_ERR as c_int;
    }
    let mut len = 0;
    // SAFETY: the server passes a valid string for the call's duration; the bytes are copied
    // out before returning.
    let bytes = unsafe {
        let p = ptr_len(value, &mut len);
        std::slice::from_raw_parts(p.cast::<u8>(), len).to_vec()
    };
    match S::set(&bytes) {
        Ok(()) => raw::REDISMODULE_OK as c_int,
        Err(message) => {
            set_error(err, &message);
            raw::REDISMODULE_ERR as c_int
        }
    }
}

/// Registers `S` (changeable at run time) with `default`. False if refused or unsupported.
pub(crate) fn register_string<S: StringSetting>(ctx: &Context, default: &CStr) -> bool {
    let Some(register) = api!(RedisModule_RegisterStringConfig) else {
        return false;
    };
    // SAFETY: called from OnLoad with the module's context; the name and default are
    // NUL-terminated strings the server copies; the callbacks match the API's signatures.
    let status = unsafe {
        register(
            ctx.ctx,
            S::NAME.as_ptr(),
            default.as_ptr(),
            raw::REDISMODULE_CONFIG_DEFAULT,
            Some(get_string::<S>),
            Some(set_string::<S>),
            None,
            ptr::null_mut(),
        )
    };
    status == raw::REDISMODULE_OK as c_int
}
