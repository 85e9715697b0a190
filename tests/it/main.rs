//! The integration tests: one binary, a module per area, each against real servers the tests
//! start on free loopback ports (`common`). One binary links `common` once instead of once per
//! area; `cargo test -- acquire::` runs one area.

mod common;

mod acl;
mod acquire;
mod admin;
mod allow;
mod bounded;
mod cancel;
mod cluster;
mod config;
mod config_cache;
mod contention;
mod crash_net;
mod docs;
mod errors;
mod eviction;
mod failover;
mod gcra;
mod gcra_reference;
mod gcraallow;
mod interop;
mod introspection;
mod layouts;
mod middleware;
mod module_config;
mod names;
mod observe;
mod onekey;
mod oom;
mod operations;
mod peek;
mod per_client;
mod persistence;
mod precision;
mod random_commands;
mod release;
mod replication;
mod resp3;
mod setrate;
mod transactions;
mod tryacquire;
mod ttl;
