//! Review probes for the kept configurations (src/config_cache.rs): ways a limiter's hash can be
//! replaced that tests/config_changes.rs does not exercise. Each warms the module's memory of a
//! configuration with two reads, replaces the hash with one of the same field count by a path
//! that fires no per-key event, and checks the next read sees the new configuration.

mod common;

use std::thread;
use std::time::{Duration, Instant};

use common::*;

fn run_line(con: &mut Connection, text: &str) {
    line::<Value>(con, text).unwrap_or_else(|e| panic!("{text}: {e}"));
}

/// The rate the module sees for a limiter with an empty log, read twice (the second read is
/// answered from what the first kept).
fn seen_rate_of(con: &mut Connection, name: &[u8]) -> i64 {
    let first: i64 = run(con, &[b"RATELIMIT.AVAILABLE", name]).expect("AVAILABLE");
    let second: i64 = run(con, &[b"RATELIMIT.AVAILABLE", name]).expect("AVAILABLE");
    assert_eq!(first, second, "a second read disagreed");
    let in_use = info_field(con, "ratelimit", "ratelimit_configs_in_use");
    assert_eq!(in_use.as_deref(), Some("1"), "kept configurations in use");
    first
}

fn seen_rate(con: &mut Connection, name: &str) -> i64 {
    seen_rate_of(con, name.as_bytes())
}

/// Waits until `con`'s server is a replica with its link up and nothing loading.
fn wait_synced(con: &mut Connection, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let info: String = redis::cmd("INFO").arg("all").query(con).expect("INFO");
        if info.contains("master_link_status:up")
            && info.contains("loading:0")
            && info.contains("master_sync_in_progress:0")
        {
            return;
        }
        assert!(Instant::now() < deadline, "{what}: never synced:\n{info}");
        thread::sleep(Duration::from_millis(20));
    }
}

/// A replica that full-syncs from another master has its whole dataset replaced by a load:
/// whatever it kept of the old dataset's hashes must be forgotten, for each way a replica can
/// load (to disk first, straight into an empty database, or into a side database swapped in).
#[test]
fn a_replica_resynced_from_another_master_sees_that_masters_hashes() {
    for mode in ["disabled", "on-empty-db", "swapdb"] {
        let first = Server::start();
        let second = Server::start();
        let mut on_first = first.conn();
        let mut on_second = second.conn();
        run_line(&mut on_first, "RATELIMIT.SETRATE api 5 1000");
        run_line(&mut on_second, "RATELIMIT.SETRATE api 9 1000");
        run_line(&mut on_second, "CONFIG SET repl-diskless-sync-delay 0");
        let replica = Server::start_replica_with(&first, true, &["--repl-diskless-load", mode]);
        let mut on_replica = replica.conn();
        wait_replicas(&mut on_first, 1);
        assert_eq!(seen_rate(&mut on_replica, "api"), 5, "{mode}: first master");
        run_line(
            &mut on_replica,
            &format!("REPLICAOF 127.0.0.1 {}", second.port),
        );
        wait_synced(&mut on_replica, mode);
        let info: String = redis::cmd("INFO")
            .arg("replication")
            .query(&mut on_replica)
            .expect("INFO");
        assert!(
            info.contains(&format!("master_port:{}", second.port)),
            "{mode}: {info}"
        );
        wait_replicas(&mut on_second, 1);
        assert_eq!(
            seen_rate(&mut on_replica, "api"),
            9,
            "{mode}: after a full sync from the second master"
        );
    }
}

/// MODULE UNLOAD removes the module's subscriptions; while it is unloaded nothing forgets. A
/// load after that must not use what the earlier load kept (the library may stay mapped).
#[test]
fn a_reloaded_module_does_not_use_what_it_kept_before() {
    let server = Server::start_with(
        &["debug-commands", "yes"],
        &["--enable-module-command", "yes"],
    );
    let mut con = server.conn();
    run_line(&mut con, "RATELIMIT.SETRATE api 5 1000");
    assert_eq!(seen_rate(&mut con, "api"), 5);
    if let Err(e) = line::<Value>(&mut con, "MODULE UNLOAD ratelimit") {
        eprintln!("the server refused MODULE UNLOAD ({e}): nothing to check");
        return;
    }
    run_line(&mut con, "HSET api rate 6");
    let path = module_path();
    let _: Value = redis::cmd("MODULE")
        .arg("LOAD")
        .arg(path.to_string_lossy().as_ref())
        .arg("debug-commands")
        .arg("yes")
        .query(&mut con)
        .expect("MODULE LOAD");
    assert_eq!(seen_rate(&mut con, "api"), 6);
    run_line(&mut con, "HSET api rate 7");
    assert_eq!(seen_rate(&mut con, "api"), 7, "events reach the new load");
}

/// Names of every length around the longest kept, with any byte in them (NUL, 0xff, a space,
/// braces), are told apart and forgotten on change.
#[test]
fn names_of_any_length_and_bytes_are_kept_apart_and_forgotten() {
    let server = Server::start();
    let mut con = server.conn();
    // Calls on many limiters in a row, which would take kept configurations out of use.
    run_line(&mut con, "RATELIMIT.DEBUG CONFIGCACHE ALWAYS");
    let mut names: Vec<Vec<u8>> = Vec::new();
    for len in [1usize, 7, 8, 9, 95, 96, 97, 255, 256, 257, 300, 4096] {
        for fill in [0u8, 0xff, b' '] {
            let mut name: Vec<u8> = (0..len).map(|i| fill ^ (i as u8 % 3)).collect();
            if len > 2 {
                name[len / 2] = b'{';
            }
            names.push(name);
        }
    }
    // Twins that differ in the last byte only.
    let mut twin = names[names.len() - 1].clone();
    *twin.last_mut().unwrap() ^= 1;
    names.push(twin);
    names.sort();
    names.dedup();
    for (i, name) in names.iter().enumerate() {
        let rate = (i + 2).to_string();
        let _: i64 = run(
            &mut con,
            &[b"RATELIMIT.SETRATE", name, rate.as_bytes(), b"1000"],
        )
        .expect("SETRATE");
    }
    for (i, name) in names.iter().enumerate() {
        assert_eq!(seen_rate_of(&mut con, name), i as i64 + 2, "name {i}");
    }
    for (i, name) in names.iter().enumerate() {
        let rate = (i + 1000).to_string();
        let _: i64 = run(&mut con, &[b"HSET", name, b"rate", rate.as_bytes()]).expect("HSET");
    }
    for (i, name) in names.iter().enumerate() {
        assert_eq!(seen_rate_of(&mut con, name), i as i64 + 1000, "name {i}");
    }
}
