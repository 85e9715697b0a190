//! What `INFO ratelimit` and `RATELIMIT.TOPREFUSED` count, as values: the module's `observe`
//! keeps the one instance of each and feeds it.

pub mod groups;
pub mod refused;
