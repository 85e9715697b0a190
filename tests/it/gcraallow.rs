//! `RATELIMIT.GCRAALLOW` (go-redis/redis_rate's GCRA, behind the Go package in go/) as a Redis
//! citizen: effects replicated as `SET key tat PXAT ms` (or `UNLINK`) to a replica without the
//! module, nothing written by a limited call or a peek, `GCRA`'s key read and written both ways,
//! a key redis_rate's script wrote read mid-flight, MULTI and Lua, clean errors that write
//! nothing. redis_rate's own tests run against it in go/ (`make test-go`).

use crate::common::*;

/// 2027-01-15 08:00:00.206 UTC (as tests/it/gcra.rs): ahead of the real clock, so expiries
/// written on the debug clock lie ahead for the server too.
const START: i64 = 1_800_000_000_206;
/// 2017-01-01, the epoch of redis_rate's script, in seconds.
const REDIS_RATE_EPOCH: i64 = 1_483_228_800;

fn ints(con: &mut Connection, text: &str) -> Vec<i64> {
    line(con, text).unwrap_or_else(|e| panic!("{text}: {e}"))
}

#[test]
fn redis_rate_per_second_10_exactly() {
    let server = Server::start();
    let mut con = server.conn();
    set_clock(&mut con, START);
    let k = "rate:test_id";
    assert_eq!(
        ints(
            &mut con,
            &format!("RATELIMIT.GCRAALLOW {k} 10 10 1 TOKENS 0")
        ),
        [0, 10, 10, -1, 0]
    );
    assert!(!exists(&mut con, k), "a peek writes nothing");
    assert_eq!(
        ints(&mut con, &format!("RATELIMIT.GCRAALLOW {k} 10 10 1")),
        [1, 10, 9, -1, 100_000]
    );
    assert_eq!(
        ints(
            &mut con,
            &format!("RATELIMIT.GCRAALLOW {k} 10 10 1 TOKENS 2")
        ),
        [2, 10, 7, -1, 300_000]
    );
    advance(&mut con, 1);
    assert_eq!(
        ints(
            &mut con,
            &format!("RATELIMIT.GCRAALLOW {k} 10 10 1 ATMOST 10")
        ),
        [7, 10, 0, -1, 999_000]
    );
    assert_eq!(
        ints(
            &mut con,
            &format!("RATELIMIT.GCRAALLOW {k} 10 10 1 ATMOST 1000")
        ),
        [0, 10, 0, 99_000, 999_000]
    );
    assert_eq!(
        ints(
            &mut con,
            &format!("RATELIMIT.GCRAALLOW {k} 10 10 1 TOKENS 1000")
        ),
        [0, 10, 0, 99_999_000, 999_000]
    );
    // The TAT is GCRA's: microseconds, expiring at its millisecond.
    assert_eq!(get(&mut con, k), Some(((START + 1_000) * 1000).to_string()));
    let expiry: i64 = line(&mut con, &format!("PEXPIRETIME {k}")).unwrap();
    assert_eq!(expiry, START + 1_000);
    // Burst 0 admits nothing and writes nothing.
    assert_eq!(
        ints(&mut con, "RATELIMIT.GCRAALLOW zero 0 10 1"),
        [0, 0, 0, 100_000, 0]
    );
    assert!(!exists(&mut con, "zero"));
}

#[test]
fn gcra_keys_are_shared_both_ways() {
    let server = Server::start();
    let mut con = server.conn();
    set_clock(&mut con, START);
    // GCRA's max_burst 4 is burst 5 here.
    assert_eq!(ints(&mut con, "GCRA g 4 5 1 TOKENS 2"), [0, 5, 3, -1, 1]);
    assert_eq!(
        ints(&mut con, "RATELIMIT.GCRAALLOW g 5 5 1 TOKENS 0"),
        [0, 5, 3, -1, 400_000]
    );
    assert_eq!(
        ints(&mut con, "RATELIMIT.GCRAALLOW g 5 5 1 ATMOST 9"),
        [3, 5, 0, -1, 1_000_000]
    );
    assert_eq!(ints(&mut con, "GCRA g 4 5 1"), [1, 5, 0, 1, 1]);
    assert_eq!(
        ints(&mut con, "RATELIMIT.GCRAALLOW g 5 5 1 TOKENS -5"),
        [-5, 5, 5, -1, 0]
    );
    assert!(
        !exists(&mut con, "g"),
        "a bucket given back in full has no key"
    );
    assert_eq!(ints(&mut con, "GCRA g 4 5 1"), [0, 5, 4, -1, 1]);
}

/// A service switching from redis_rate while its limits are in flight: the float seconds since
/// 2017 its script wrote count, and the first call that takes tokens rewrites them in µs.
#[test]
fn a_key_redis_rates_script_wrote_is_read() {
    let server = Server::start();
    let mut con = server.conn();
    set_clock(&mut con, START);
    // 0.5 s ahead of the clock, as the script writes it (tostring, 14 significant digits).
    let seconds = (START - REDIS_RATE_EPOCH * 1000) as f64 / 1000.0 + 0.5;
    let written = format!("{seconds:.5}");
    assert_eq!(written, "316771200.70600");
    // Its expiry on the module's clock (the script's EX, whole seconds, rounded up).
    let expiry = START + 1_000;
    let _: () = line(&mut con, &format!("SET rate:k {written} PXAT {expiry}")).unwrap();
    assert_eq!(
        ints(&mut con, "RATELIMIT.GCRAALLOW rate:k 10 10 1 TOKENS 0"),
        [0, 10, 5, -1, 500_000]
    );
    assert_eq!(get(&mut con, "rate:k"), Some(written));
    assert_eq!(
        ints(&mut con, "RATELIMIT.GCRAALLOW rate:k 10 10 1"),
        [1, 10, 4, -1, 600_000]
    );
    assert_eq!(
        get(&mut con, "rate:k"),
        Some(((START + 600) * 1000).to_string())
    );
    // GCRA keeps Redis's reply for such a value.
    let _: () = line(&mut con, "SET rate:old 316771200.706").unwrap();
    assert_eq!(
        error_of(&mut con, "GCRA rate:old 9 10 1"),
        "ERR Invalid GCRA key"
    );
}

#[test]
fn effects_reach_a_replica_without_the_module_and_limited_calls_write_nothing() {
    let master = Server::start_with(&["debug-commands", "yes"], &[]);
    let replica = Server::start_replica(&master, false);
    let mut con = master.conn();
    set_clock(&mut con, START);
    for call in [
        "RATELIMIT.GCRAALLOW a 3 1 60 TOKENS 3",
        "RATELIMIT.GCRAALLOW b 10 10 1 ATMOST 4",
        "RATELIMIT.GCRAALLOW c 2 1 1",
        "RATELIMIT.GCRAALLOW c 2 1 1 TOKENS -1",
    ] {
        assert_ne!(ints(&mut con, call)[3], 0, "{call}");
    }
    wait_replicas(&mut con, 1);
    let dirty = info_field(&mut con, "persistence", "rdb_changes_since_last_save");
    let offset = info_field(&mut con, "replication", "master_repl_offset");
    let before = snapshot(&mut con);
    for call in [
        "RATELIMIT.GCRAALLOW a 3 1 60",
        "RATELIMIT.GCRAALLOW a 3 1 60 ATMOST 2",
        "RATELIMIT.GCRAALLOW a 3 1 60 TOKENS 0",
        "RATELIMIT.GCRAALLOW b 10 10 1 ATMOST 0",
        "RATELIMIT.GCRAALLOW fresh 3 1 60 TOKENS -1",
        "RATELIMIT.GCRAALLOW fresh 0 1 60",
    ] {
        let reply = ints(&mut con, call);
        assert!(reply[0] <= 0, "{call}: {reply:?}");
    }
    assert_eq!(snapshot(&mut con), before);
    assert_eq!(
        info_field(&mut con, "persistence", "rdb_changes_since_last_save"),
        dirty
    );
    assert_eq!(
        info_field(&mut con, "replication", "master_repl_offset"),
        offset
    );
    // c was given back in full: no key, on both.
    let keys: Vec<Vec<u8>> = before.iter().map(|(k, _, _)| k.clone()).collect();
    assert_eq!(keys, [b"a".to_vec(), b"b".to_vec()]);
    assert_eq!(snapshot(&mut replica.conn()), before);
    assert_eq!(command_calls(&mut replica.conn(), "ratelimit.gcraallow"), 0);
}

#[test]
fn multi_lua_and_errors() {
    let server = Server::start();
    let mut con = server.conn();
    set_clock(&mut con, START);
    let replies: Vec<Vec<i64>> = redis::pipe()
        .atomic()
        .cmd("RATELIMIT.GCRAALLOW")
        .arg("m")
        .arg(2)
        .arg(2)
        .arg(1)
        .cmd("RATELIMIT.GCRAALLOW")
        .arg("m")
        .arg(2)
        .arg(2)
        .arg(1)
        .arg("ATMOST")
        .arg(5)
        .query(&mut con)
        .unwrap();
    assert_eq!(
        replies,
        [vec![1, 2, 1, -1, 500_000], vec![1, 2, 0, -1, 1_000_000]]
    );
    let reply: Vec<i64> = redis::cmd("EVAL")
        .arg("return redis.call('RATELIMIT.GCRAALLOW', KEYS[1], 2, 2, 1, 'TOKENS', ARGV[1])")
        .arg(1)
        .arg("m")
        .arg(-2)
        .query(&mut con)
        .unwrap();
    assert_eq!(reply, [-2, 2, 2, -1, 0]);
    let keys: Vec<String> = line(
        &mut con,
        "COMMAND GETKEYS RATELIMIT.GCRAALLOW k 1 1 1 ATMOST 3",
    )
    .unwrap();
    assert_eq!(keys, ["k"]);

    let _: () = line(&mut con, "RPUSH list x").unwrap();
    let _: () = line(&mut con, "SET text abc").unwrap();
    let _: () = line(&mut con, "SET zero 0").unwrap();
    let before = snapshot(&mut con);
    for (call, error) in [
        ("RATELIMIT.GCRAALLOW list 1 1 1", "WRONGTYPE Operation against a key holding the wrong kind of value"),
        (
            "RATELIMIT.GCRAALLOW text 1 1 1",
            "ERR corrupt rate limiter key 'text': not a GCRA TAT (microseconds) nor redis_rate's (seconds since 2017)",
        ),
        (
            "RATELIMIT.GCRAALLOW zero 1 1 1",
            "ERR corrupt rate limiter key 'zero': not a GCRA TAT (microseconds) nor redis_rate's (seconds since 2017)",
        ),
        ("RATELIMIT.GCRAALLOW k -1 1 1", "ERR burst must be an integer between 0 and 9223372036854775807"),
        ("RATELIMIT.GCRAALLOW k 1 0 1", "ERR tokens_per_period must be an integer between 1 and 9223372036854775807"),
        ("RATELIMIT.GCRAALLOW k 1 1 0", "ERR period must be a number of seconds above 0 and below 1e12"),
        ("RATELIMIT.GCRAALLOW k 1 1 1 ATMOST -1", "ERR ATMOST must be an integer between 0 and 9223372036854775807"),
        ("RATELIMIT.GCRAALLOW k 1 1 1 TOKENS", "ERR syntax error, TOKENS needs a value"),
        ("RATELIMIT.GCRAALLOW k 1 1 1 TOKENS 9223372036854775807", "ERR burst, tokens_per_period, period and the count overflow 64-bit microseconds"),
        ("RATELIMIT.GCRAALLOW k 1 1", "ERR wrong number of arguments for 'ratelimit.gcraallow' command"),
    ] {
        assert_eq!(error_of(&mut con, call), error, "{call}");
    }
    assert_eq!(snapshot(&mut con), before);
}
