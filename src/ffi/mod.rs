//! The module's calls into the server's C API that need `unsafe`, each behind a small safe
//! function or type whose doc says which contract of the API it upholds. This is the one module
//! allowed unsafe code (the crate root denies it everywhere else; `key` and `store` keep theirs
//! until their raw key access moves here too), and every unsafe block in it says why it is sound.
//!
//! The server calls back into the module through the `extern "C"` trampolines here. They call up
//! into safe Rust through traits the caller implements ([`timer::Timer`],
//! [`blocked::Blocker`], [`events::Watcher`]): dispatched statically, so nothing is registered
//! or allocated at run time, and this module imports no layer above it.

pub(crate) mod acl;
pub(crate) mod blocked;
pub(crate) mod command;
pub(crate) mod config;
pub(crate) mod events;
pub(crate) mod key;
pub(crate) mod server;
pub(crate) mod timer;
