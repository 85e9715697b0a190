//! The module keeps a limiter's configuration once read (docs/performance.md, "What a call
//! costs"). Every way a limiter's hash can change must reach the next call: each case here warms
//! that memory with two reads, changes the hash without the module, and checks the next call
//! sees the new configuration. A limiter with an empty log has exactly its rate available.
//! Among them, replacements that fire no per-key event: a replica resynced from another master, a
//! reloaded module, names of any length and bytes.

use std::thread;
use std::time::{Duration, Instant};

use crate::common::*;

/// The rate the module sees for a limiter with an empty log, read twice so the second read is
/// answered from what the first kept (kept configurations are in use: these tests call back on
/// few limiters).
fn seen_rate(con: &mut Connection, name: &str) -> i64 {
    let first = available(con, name);
    assert_eq!(available(con, name), first, "a second read disagreed");
    assert_eq!(configs_in_use(con), "1", "kept configurations in use");
    first
}

fn run_line(con: &mut Connection, text: &str) {
    line::<Value>(con, text).unwrap_or_else(|e| panic!("{text}: {e}"));
}

fn select(con: &mut Connection, db: i64) {
    run_line(con, &format!("SELECT {db}"));
}

#[test]
fn every_change_to_a_limiter_hash_reaches_the_next_call() {
    let server = Server::start_with(
        &["debug-commands", "yes"],
        &["--enable-debug-command", "yes"],
    );
    let mut con = server.conn();
    set_clock(&mut con, T0);
    run_line(&mut con, "RATELIMIT.SETRATE api 5 1000");
    assert_eq!(seen_rate(&mut con, "api"), 5);
    assert_eq!(
        configs_kept(&mut con),
        "1",
        "kept: else no change below could meet a stale configuration"
    );

    // Plain hash commands, as a script, in a transaction.
    run_line(&mut con, "HSET api rate 6");
    assert_eq!(seen_rate(&mut con, "api"), 6);
    run_line(&mut con, "HINCRBY api rate 1");
    assert_eq!(seen_rate(&mut con, "api"), 7);
    let _: Value = redis::cmd("EVAL")
        .arg("redis.call('hset', KEYS[1], 'rate', ARGV[1], 'interval', ARGV[2], 'type', '0')")
        .arg(1)
        .arg("api")
        .arg(8)
        .arg(1000)
        .query(&mut con)
        .unwrap();
    assert_eq!(seen_rate(&mut con, "api"), 8);
    run_line(&mut con, "MULTI");
    run_line(&mut con, "HSET api rate 9");
    run_line(&mut con, "EXEC");
    assert_eq!(seen_rate(&mut con, "api"), 9);
    // The module's own SETRATE.
    run_line(&mut con, "RATELIMIT.SETRATE api 10 1000");
    assert_eq!(seen_rate(&mut con, "api"), 10);
    // A field removed: the limiter is not initialized any more.
    run_line(&mut con, "HDEL api rate");
    assert!(error_of(&mut con, "RATELIMIT.AVAILABLE api").contains("not initialized"));
    run_line(&mut con, "HSET api rate 10");
    assert_eq!(seen_rate(&mut con, "api"), 10);

    // The hash deleted and made again by hand; replaced by RENAME, COPY and RESTORE.
    run_line(&mut con, "DEL api");
    run_line(&mut con, "HSET api rate 11 interval 1000 type 0");
    assert_eq!(seen_rate(&mut con, "api"), 11);
    run_line(&mut con, "RATELIMIT.SETRATE other 12 1000");
    run_line(&mut con, "RENAME other api");
    assert_eq!(seen_rate(&mut con, "api"), 12);
    run_line(&mut con, "RATELIMIT.SETRATE other 13 1000");
    run_line(&mut con, "COPY other api REPLACE");
    assert_eq!(seen_rate(&mut con, "api"), 13);
    run_line(&mut con, "RATELIMIT.SETRATE other 14 1000");
    let payload = dump(&mut con, "other").unwrap();
    let _: String = redis::cmd("RESTORE")
        .arg("api")
        .arg(0)
        .arg(payload)
        .arg("REPLACE")
        .query(&mut con)
        .unwrap();
    assert_eq!(seen_rate(&mut con, "api"), 14);

    // Expired and made again.
    run_line(&mut con, "PEXPIRE api 1");
    while exists(&mut con, "api") {
        thread::sleep(Duration::from_millis(2));
    }
    run_line(&mut con, "HSET api rate 15 interval 1000 type 0");
    assert_eq!(seen_rate(&mut con, "api"), 15);

    // Databases: each has its own; MOVE and SWAPDB exchange them.
    // (Same fields as db 0's, so only the event can tell them apart.)
    select(&mut con, 1);
    run_line(&mut con, "HSET api rate 16 interval 1000 type 0");
    assert_eq!(seen_rate(&mut con, "api"), 16);
    select(&mut con, 0);
    assert_eq!(seen_rate(&mut con, "api"), 15);
    run_line(&mut con, "SWAPDB 0 1");
    assert_eq!(seen_rate(&mut con, "api"), 16);
    select(&mut con, 1);
    assert_eq!(seen_rate(&mut con, "api"), 15);
    run_line(&mut con, "DEL api");
    select(&mut con, 0);
    run_line(&mut con, "MOVE api 1");
    assert!(error_of(&mut con, "RATELIMIT.AVAILABLE api").contains("not initialized"));
    select(&mut con, 1);
    assert_eq!(seen_rate(&mut con, "api"), 16);
    select(&mut con, 0);

    // A dataset loaded from disk replaces the hash without a per-key event.
    run_line(&mut con, "RATELIMIT.SETRATE api 17 1000");
    run_line(&mut con, "SAVE");
    run_line(&mut con, "HSET api rate 18");
    assert_eq!(seen_rate(&mut con, "api"), 18);
    run_line(&mut con, "DEBUG RELOAD NOSAVE");
    assert_eq!(seen_rate(&mut con, "api"), 17);
    // So does FLUSHALL, without a per-key event; nothing is left to read.
    run_line(&mut con, "FLUSHALL");
    assert!(error_of(&mut con, "RATELIMIT.AVAILABLE api").contains("not initialized"));

    // TRYACQUIRE acts on what it sees: an interval shortened by hand frees a permit sooner.
    run_line(&mut con, "RATELIMIT.SETRATE api 1 1000");
    assert_eq!(try_acquire(&mut con, "api", 1), None);
    advance(&mut con, 500);
    assert_eq!(try_acquire(&mut con, "api", 1), Some(500));
    run_line(&mut con, "HSET api interval 400");
    assert_eq!(try_acquire(&mut con, "api", 1), None);
}

#[test]
fn a_replica_sees_the_changes_its_master_makes() {
    let master = Server::start();
    let replica = Server::start_replica(&master, true);
    let mut con = master.conn();
    let mut on_replica = replica.conn();
    run_line(&mut con, "RATELIMIT.SETRATE api 5 1000");
    wait_replicas(&mut con, 1);
    assert_eq!(seen_rate(&mut on_replica, "api"), 5);
    run_line(&mut con, "HSET api rate 6");
    wait_replicas(&mut con, 1);
    assert_eq!(seen_rate(&mut on_replica, "api"), 6);
    run_line(&mut con, "DEL api");
    run_line(&mut con, "HSET api rate 7 interval 1000 type 0");
    wait_replicas(&mut con, 1);
    assert_eq!(seen_rate(&mut on_replica, "api"), 7);
}

/// The module's HPTTL calls so far (they show in commandstats like any command's).
fn checks(con: &mut Connection) -> i64 {
    command_calls(con, "hpttl")
}

/// A server with hash field TTLs, its active expiry off (so only a read can find a field gone
/// while the server has not deleted it), and the limiter `api` of 5 permits; None on a server
/// without field TTLs.
fn limiter_on_a_server_with_field_ttls() -> Option<(Server, Connection, FieldTtls)> {
    let server = Server::start_with(
        &["debug-commands", "yes"],
        &["--enable-debug-command", "yes"],
    );
    let mut con = server.conn();
    let ttls = field_ttls(&mut con);
    if ttls == FieldTtls::None {
        return None;
    }
    run_line(&mut con, "DEBUG SET-ACTIVE-EXPIRE 0");
    run_line(&mut con, "RATELIMIT.SETRATE api 5 1000 KEEPALIVE 60000");
    Some((server, con, ttls))
}

/// Gives `api`'s rate field a TTL of `ttl_ms`: the instant, on the server's clock, it expires.
fn expire_rate_field(con: &mut Connection, ttl_ms: i64) -> i64 {
    run_line(con, &format!("HPEXPIRE api {ttl_ms} FIELDS 1 rate"));
    let at: Vec<i64> = redis::cmd("HPEXPIRETIME")
        .arg("api")
        .arg("FIELDS")
        .arg(1)
        .arg("rate")
        .query(con)
        .expect("HPEXPIRETIME");
    at[0]
}

/// AVAILABLE of `api`, read in one transaction with the server's TIME: None if the server's
/// clock had reached `expires_at` (the read shows nothing about a field not yet expired).
fn available_before(con: &mut Connection, expires_at: i64) -> Option<i64> {
    let ((secs, micros), available): ((i64, i64), i64) = redis::pipe()
        .atomic()
        .cmd("TIME")
        .cmd("RATELIMIT.AVAILABLE")
        .arg("api")
        .query(con)
        .expect("TIME and AVAILABLE");
    (secs * 1000 + micros / 1000 < expires_at).then_some(available)
}

/// A field is seen gone as soon as its TTL passes, even while the server has not deleted it
/// yet (active expiry off), also when the module had kept the configuration, and checked it,
/// before the field got its TTL.
#[test]
fn a_hash_field_that_expires_is_seen_gone() {
    for ttl in FIELD_TTLS_MS {
        match a_field_expiring_after(ttl) {
            None => return eprintln!("no HPEXPIRE on this server: nothing to check"),
            Some(true) => return,
            Some(false) => eprintln!("the reads outlasted a {ttl} ms TTL: again, longer"),
        }
    }
    panic!("the reads outlasted every TTL tried: {FIELD_TTLS_MS:?} ms");
}

fn a_field_expiring_after(ttl: i64) -> Option<bool> {
    let (_server, mut con, ttls) = limiter_on_a_server_with_field_ttls()?;
    for _ in 0..3 {
        assert_eq!(seen_rate(&mut con, "api"), 5);
    }
    let checked = checks(&mut con);
    assert_eq!(
        checked > 0,
        ttls == FieldTtls::Hidden,
        "kept and checked where the server hides field TTLs ({ttls:?}), never elsewhere"
    );
    assert_eq!(
        configs_kept(&mut con),
        "1",
        "kept before the TTL: else nothing here could be stale"
    );
    let expires_at = expire_rate_field(&mut con, ttl);
    for _ in 0..4 {
        match available_before(&mut con, expires_at) {
            Some(available) => assert_eq!(available, 5),
            None => return Some(false),
        }
    }
    assert_eq!(configs_in_use(&mut con), "1", "kept configurations in use");
    assert_eq!(configs_kept(&mut con), "0", "a field with a TTL: not kept");
    if ttls == FieldTtls::Hidden {
        assert!(
            checks(&mut con) > checked,
            "the TTL forgot the configuration: the server is asked again"
        );
    }
    wait_for_server_time(&mut con, expires_at);
    assert!(error_of(&mut con, "RATELIMIT.AVAILABLE api").contains("not initialized"));
    Some(true)
}

/// A field whose TTL was set before the module read the configuration expires with no event
/// while the server has not deleted it, so such a configuration is never kept: Redis 8 shows
/// the TTL to the module; Redis 7.4 and Valkey 9 do not, and the module asks the server (HPTTL)
/// before it keeps a configuration. The expired field is seen gone.
#[test]
fn a_hash_field_with_a_ttl_before_the_configuration_was_kept_is_seen_gone() {
    for ttl in FIELD_TTLS_MS {
        match a_field_with_a_ttl_from_the_start(ttl) {
            None => return eprintln!("no HPEXPIRE on this server: nothing to check"),
            Some(true) => return,
            Some(false) => eprintln!("the reads outlasted a {ttl} ms TTL: again, longer"),
        }
    }
    panic!("the reads outlasted every TTL tried: {FIELD_TTLS_MS:?} ms");
}

fn a_field_with_a_ttl_from_the_start(ttl: i64) -> Option<bool> {
    let (_server, mut con, ttls) = limiter_on_a_server_with_field_ttls()?;
    let expires_at = expire_rate_field(&mut con, ttl);
    for _ in 0..3 {
        match available_before(&mut con, expires_at) {
            Some(available) => assert_eq!(available, 5),
            None => return Some(false),
        }
    }
    assert_eq!(configs_in_use(&mut con), "1", "kept configurations in use");
    assert_eq!(configs_kept(&mut con), "0", "a field with a TTL: not kept");
    assert_eq!(
        checks(&mut con) > 0,
        ttls == FieldTtls::Hidden,
        "the server asked where it hides field TTLs ({ttls:?}), never elsewhere"
    );
    wait_for_server_time(&mut con, expires_at);
    assert!(error_of(&mut con, "RATELIMIT.AVAILABLE api").contains("not initialized"));
    Some(true)
}

fn configs_kept(con: &mut Connection) -> String {
    info_field(con, "ratelimit", "ratelimit_configs_kept").expect("ratelimit_configs_kept")
}

fn configs_in_use(con: &mut Connection) -> String {
    info_field(con, "ratelimit", "ratelimit_configs_in_use").expect("ratelimit_configs_in_use")
}

/// Calls spread over many more limiters than the module keeps take kept configurations out of
/// use: nothing is looked up or kept, and INFO says so, but what was kept is still forgotten
/// when its hash changes. `RATELIMIT.DEBUG CONFIGCACHE ALWAYS` holds them in use (for tests),
/// `AUTO` lets the spread decide again. Calls back on one limiter put them in use again, and
/// that limiter's hash, changed while they were out of use, is read anew.
#[test]
fn kept_configurations_leave_use_while_calls_spread_over_many_limiters() {
    let server = Server::start();
    let mut con = server.conn();
    assert_eq!(configs_in_use(&mut con), "1", "in use from the start");
    run_line(&mut con, "RATELIMIT.SETRATE api 5 1000");
    assert_eq!(seen_rate(&mut con, "api"), 5);
    assert_eq!(configs_kept(&mut con), "1");

    let mut pipe = redis::pipe();
    for i in 0..6_000 {
        pipe.cmd("RATELIMIT.SETRATE")
            .arg(format!("user:{i}"))
            .arg(5)
            .arg(1000)
            .ignore();
    }
    let () = pipe.query(&mut con).expect("SETRATE");
    assert_eq!(configs_in_use(&mut con), "0", "a call on each of 6 000");
    run_line(&mut con, "HSET api rate 9");
    assert_eq!(configs_kept(&mut con), "0", "forgotten out of use too");
    for _ in 0..3 {
        assert_eq!(available(&mut con, "user:1"), 5);
    }
    assert_eq!(configs_kept(&mut con), "0", "nothing kept out of use");

    run_line(&mut con, "RATELIMIT.DEBUG CONFIGCACHE ALWAYS");
    assert_eq!(configs_in_use(&mut con), "1", "held in use");
    for i in 0..2_000 {
        let name = format!("user:{i}");
        assert_eq!(available(&mut con, &name), 5);
        assert_eq!(available(&mut con, &name), 5);
    }
    assert_eq!(configs_in_use(&mut con), "1", "held, whatever the spread");
    assert_ne!(configs_kept(&mut con), "0", "kept while held");
    run_line(&mut con, "RATELIMIT.DEBUG CONFIGCACHE AUTO");
    for i in 2_000..6_000 {
        assert_eq!(available(&mut con, &format!("user:{i}")), 5);
    }
    assert_eq!(configs_in_use(&mut con), "0", "the spread decides again");

    // Two whole windows of about 1 024 lookups (in use after two that find enough), wherever
    // the last one started; every call sees the rate set while out of use.
    for _ in 0..3_100 {
        assert_eq!(available(&mut con, "api"), 9);
    }
    assert_eq!(configs_in_use(&mut con), "1", "3 100 calls back on one");
    run_line(&mut con, "HSET api rate 10");
    assert_eq!(seen_rate(&mut con, "api"), 10);
}

#[test]
fn info_counts_the_configurations_kept_and_config_cache_no_keeps_none() {
    let server = Server::start();
    let mut con = server.conn();
    assert_eq!(configs_kept(&mut con), "0");
    run_line(&mut con, "RATELIMIT.SETRATE api 5 1000");
    run_line(&mut con, "RATELIMIT.SETRATE web 5 1000");
    assert_eq!(seen_rate(&mut con, "api"), 5);
    assert_eq!(seen_rate(&mut con, "web"), 5);
    assert_eq!(configs_kept(&mut con), "2");
    run_line(&mut con, "DEL api");
    assert_eq!(configs_kept(&mut con), "1", "DEL forgot it");
    run_line(&mut con, "HSET web rate 6");
    assert_eq!(configs_kept(&mut con), "0", "HSET forgot it");

    let uncached = Server::start_with(&["debug-commands", "yes", "config-cache", "no"], &[]);
    let mut con = uncached.conn();
    run_line(&mut con, "RATELIMIT.SETRATE api 5 1000");
    assert_eq!(available(&mut con, "api"), 5);
    assert_eq!(available(&mut con, "api"), 5);
    assert_eq!(configs_kept(&mut con), "0");
    assert_eq!(configs_in_use(&mut con), "0", "config-cache no");
    run_line(&mut con, "HSET api rate 6");
    assert_eq!(available(&mut con, "api"), 6);
}

// ---- replacements without a per-key event ------------------------------------------------------

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

/// Waits until `con`'s server is a replica with its link up and nothing loading.
fn wait_synced(con: &mut Connection, what: &str) {
    let deadline = Instant::now() + HANG;
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
