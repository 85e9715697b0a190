//! The ACL user a command runs as, for checking the keys the server cannot check itself.

use std::os::raw::c_int;
use std::ptr::NonNull;

use redis_module::{raw, Context, RedisString};

/// Reads an API pointer: `None` when the server does not export the call.
macro_rules! api {
    ($name:ident) => {{
        // SAFETY: the API pointers are written once, by RedisModule_Init at load, before any
        // command runs; reading one is a plain copy.
        unsafe { raw::$name }
    }};
}

/// The user running the current command; freed on drop. It lives no longer than the command:
/// an ACL change between commands may delete the user it points to.
pub(crate) struct User(NonNull<raw::RedisModuleUser>);

impl User {
    /// The context's user; None when it has none (a timer's context) or the server cannot say.
    pub(crate) fn current(ctx: &Context) -> Option<User> {
        let (name_of, lookup, free) = (
            api!(RedisModule_GetCurrentUserName)?,
            api!(RedisModule_GetModuleUserFromUserName)?,
            api!(RedisModule_FreeString)?,
        );
        // SAFETY: accepts any context; returns a new string or NULL.
        let name = NonNull::new(unsafe { name_of(ctx.ctx) })?;
        // SAFETY: a live name string; returns a new user handle or NULL.
        let user = unsafe { lookup(name.as_ptr()) };
        // SAFETY: the name string was made for this call and is freed once.
        unsafe { free(ctx.ctx, name.as_ptr()) };
        NonNull::new(user).map(User)
    }

    /// Whether the user may read (and, if `write`, update) the key `name`. True where the
    /// server cannot check (no such API).
    pub(crate) fn may_access(&self, name: &RedisString, write: bool) -> bool {
        let Some(check) = api!(RedisModule_ACLCheckKeyPermissions) else {
            return true;
        };
        let mut flags = raw::REDISMODULE_CMD_KEY_ACCESS;
        if write {
            flags |= raw::REDISMODULE_CMD_KEY_UPDATE;
        }
        // SAFETY: a live user handle and a live key name string.
        let status = unsafe { check(self.0.as_ptr(), name.inner, flags as c_int) };
        status == raw::REDISMODULE_OK as c_int
    }
}

impl Drop for User {
    fn drop(&mut self) {
        if let Some(free) = api!(RedisModule_FreeModuleUser) {
            // SAFETY: the handle came from GetModuleUserFromUserName and is freed once.
            unsafe { free(self.0.as_ptr()) };
        }
    }
}
