//! The module's calls into the server's C API that need `unsafe`, each behind a small safe
//! function or type whose doc says which contract of the API it upholds. This is the one module
//! allowed unsafe code (the crate root denies it everywhere else, `key` and `store` included),
//! and every unsafe block in it says why it is sound.
//!
//! The server calls back into the module through the `extern "C"` trampolines here. They call up
//! into safe Rust through traits the caller implements ([`timer::Timer`],
//! [`blocked::Blocker`], [`events::KeyWatcher`] and its siblings, [`info::Report`], and the
//! command handlers [`command::handler`] makes): dispatched statically, and
//! this module imports no layer above it.

/// Reads an API pointer: `None` when the server does not export the call.
macro_rules! api {
    ($name:ident) => {{
        // SAFETY: the API pointers are written once, by RedisModule_Init at load, before any
        // command runs; reading one is a plain copy.
        unsafe { redis_module::raw::$name }
    }};
}

pub(crate) mod acl;
pub(crate) mod blocked;
pub(crate) mod command;
pub(crate) mod config;
pub(crate) mod detached;
pub(crate) mod events;
pub(crate) mod filter;
pub(crate) mod info;
pub(crate) mod key;
pub(crate) mod names;
pub(crate) mod reply;
pub(crate) mod server;
pub(crate) mod timer;
