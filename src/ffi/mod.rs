//! The module's calls into the server's C API that need `unsafe`, each behind a small safe
//! function or type whose doc says which contract of the API it upholds, and every unsafe block
//! in it says why it is sound. It imports no layer above it.

pub(crate) mod command;
