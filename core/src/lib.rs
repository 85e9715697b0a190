//! ratelimit's algorithms and encodings, as plain Rust that knows nothing of Redis: the module
//! (the crate at the repository's root) binds them to the server, and the fuzz target and the
//! unit tests use them without one. Nothing here reads a clock or a key: the time and the stored
//! bytes come in, a decision and what to write go out.
//!
//! - `sliding_log`: the sliding-log limiter, as pure functions that return a plan of writes;
//! - `packed_log`: a ONEKEY limiter's whole state in one string's bytes;
//! - `gcra`: GCRA's arithmetic for `CL.THROTTLE`, `GCRA` and `RATELIMIT.GCRAALLOW`;
//! - `keyspace`: the contract with Redisson (key names, hash fields, member bytes, a state's
//!   identity);
//! - `number`: numbers as clients spell them, and the bounds of a limiter's numbers;
//! - `observe`: the counters per group and the most-refused sketch, as values.

#![forbid(unsafe_code)]

pub mod gcra;
pub mod keyspace;
pub mod last_decoded;
pub mod number;
pub mod observe;
pub mod packed_log;
pub mod sliding_log;
