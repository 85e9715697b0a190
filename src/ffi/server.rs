//! Plain questions to the server and the database a context works on.

use redis_module::{raw, Context};

/// The server's wall clock in unix milliseconds; 0 where the API is missing.
pub(crate) fn milliseconds() -> i64 {
    // SAFETY: Milliseconds takes no argument and only reads the server's clock; the pointer is
    // filled in by RedisModule_Init before any command runs.
    unsafe { raw::RedisModule_Milliseconds.map_or(0, |f| f()) }
}

/// Whether the server pauses writes now (CLIENT PAUSE WRITE or ALL, FAILOVER, CLUSTER FAILOVER,
/// SHUTDOWN waiting for replicas): the module API's documented signal that background work must
/// not write, on every server this module supports.
pub(crate) fn writes_paused() -> bool {
    // SAFETY: AvoidReplicaTraffic takes no argument and only reads server state.
    unsafe { raw::RedisModule_AvoidReplicaTraffic.is_some_and(|f| f() != 0) }
}

/// Makes `db` the context's selected database. A number the server does not have is refused by
/// the server and leaves the selection as it was.
pub(crate) fn select_db(ctx: &Context, db: i32) {
    // SAFETY: SelectDb takes any module context and checks the number itself.
    unsafe {
        if let Some(select) = raw::RedisModule_SelectDb {
            select(ctx.ctx, db);
        }
    }
}

/// The database the context has selected.
pub(crate) fn selected_db(ctx: &Context) -> i32 {
    // SAFETY: GetSelectedDb accepts any module context.
    unsafe { raw::RedisModule_GetSelectedDb.map_or(0, |f| f(ctx.ctx)) }
}

/// Unsigned fields of a section of the server's INFO (`stats`: `total_connections_received`,
/// ...), from one build of the section, read without a command context; `None` if any is
/// missing. Costly (the server builds the section): for rare checks only.
pub(crate) fn info_unsigned<const N: usize>(
    section: &std::ffi::CStr,
    fields: [&std::ffi::CStr; N],
) -> Option<[u64; N]> {
    let get = api!(RedisModule_GetServerInfo)?;
    let read = api!(RedisModule_ServerInfoGetFieldUnsigned)?;
    let free = api!(RedisModule_FreeServerInfo)?;
    // SAFETY: GetServerInfo accepts a null context (then the caller frees the data, done here
    // before returning); the names are NUL-terminated; the data is read only while it lives.
    unsafe {
        let data = get(std::ptr::null_mut(), section.as_ptr());
        if data.is_null() {
            return None;
        }
        let mut values = [0; N];
        let mut missing = false;
        for (value, field) in values.iter_mut().zip(fields) {
            let mut err = 0;
            *value = read(data, field.as_ptr(), &mut err);
            missing |= err != 0;
        }
        free(std::ptr::null_mut(), data);
        (!missing).then_some(values)
    }
}
