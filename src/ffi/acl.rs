//! The ACL user a command runs as, for checking the keys the server cannot check itself.

use std::os::raw::c_int;
use std::ptr::NonNull;

use redis_module::{raw, Context, ContextFlags, RedisString};

/// The user running the current command; freed on drop. It lives no longer than the command:
/// an ACL change between commands may delete the user it points to.
pub(crate) struct User(NonNull<raw::RedisModuleUser>);

impl User {
    /// The user the command runs as. None for the server's own clients, which have no user
    /// ("root"): a module's call without the `C` flag, a timer, the master link. Those are never
    /// asked for their user's name directly: Redis 7.0 reads a missing user there and crashes.
    pub(crate) fn current(ctx: &Context) -> Option<User> {
        let lookup = api!(RedisModule_GetModuleUserFromUserName)?;
        // A command a client sent, outside a transaction or a script, runs on that client,
        // which has a user; the others (DENY_BLOCKING: a transaction, a script, a module's
        // call) may be the server's own, which have none.
        let name = if ctx.get_flags().contains(ContextFlags::DENY_BLOCKING) {
            listed_client_user(ctx).or_else(|| script_user(ctx))?
        } else {
            connection_user(ctx)?
        };
        // SAFETY: a live name string (freed when `name` drops); returns a new user handle or
        // NULL.
        let user = unsafe { lookup(name.inner) };
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

/// The user name of the client that sent the command, which has a user: the server's own clients
/// (no user) run commands only in a transaction, a script or a module's call.
fn connection_user(ctx: &Context) -> Option<RedisString> {
    let name_of = api!(RedisModule_GetCurrentUserName)?;
    // SAFETY: a client's own command, outside a transaction, script or module call: the client
    // has a user (see above).
    let name = NonNull::new(unsafe { name_of(ctx.ctx) })?;
    Some(RedisString::from_redis_module_string(
        ctx.ctx,
        name.as_ptr(),
    ))
}

/// The user name of the context's client if it is one the server lists (a connection) and has a
/// user. The server looks the client up by id and checks for a user before reading it.
fn listed_client_user(ctx: &Context) -> Option<RedisString> {
    let (client_id, name_by_id) = (
        api!(RedisModule_GetClientId)?,
        api!(RedisModule_GetClientUserNameById)?,
    );
    // SAFETY: GetClientId accepts any context (0 for none).
    let id = unsafe { client_id(ctx.ctx) };
    // SAFETY: returns a new string, or NULL for an unknown client or one with no user.
    let name = NonNull::new(unsafe { name_by_id(ctx.ctx, id) })?;
    Some(RedisString::from_redis_module_string(
        ctx.ctx,
        name.as_ptr(),
    ))
}

/// In a script, the command's client is the script's own, unlisted, and carries the user of the
/// client that ran the script (the server checks each of the script's commands against it).
/// That user is missing when a module ran the script without the `C` flag, as root, and asking
/// for a missing user's name crashes Redis 7.0. So the server is first asked to run a command
/// as that user (`ACL WHOAMI` with the `C` flag), which it refuses with ENOTSUP, and nothing
/// else, when there is no user; any other outcome (the reply, or a refusal on the user's
/// permissions) means the user exists.
fn script_user(ctx: &Context) -> Option<RedisString> {
    if !ctx.get_flags().contains(ContextFlags::LUA) {
        return None;
    }
    let (call, free_reply, name_of) = (
        api!(RedisModule_Call)?,
        api!(RedisModule_FreeCallReply)?,
        api!(RedisModule_GetCurrentUserName)?,
    );
    // SAFETY: RM_Call with format "Cc" (run as the context's user; one C-string argument);
    // returns a reply to free, or NULL with errno set.
    let reply = unsafe { call(ctx.ctx, c"ACL".as_ptr(), c"Cc".as_ptr(), c"WHOAMI".as_ptr()) };
    if reply.is_null() {
        if std::io::Error::last_os_error().raw_os_error() == Some(libc_enotsup()) {
            return None;
        }
    } else {
        // SAFETY: a reply of RM_Call, freed once.
        unsafe { free_reply(reply) };
    }
    // SAFETY: the context's client has a user (see above).
    let name = NonNull::new(unsafe { name_of(ctx.ctx) })?;
    Some(RedisString::from_redis_module_string(
        ctx.ctx,
        name.as_ptr(),
    ))
}

/// ENOTSUP on Linux (the only platform the server's module API is built for here).
const fn libc_enotsup() -> i32 {
    95
}
