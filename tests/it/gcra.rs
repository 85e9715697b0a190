//! `CL.THROTTLE` and `GCRA` as Redis citizens: effects replicated as `SET key tat PXAT ms` to
//! a replica and an AOF that have no module, nothing written or replicated when a call is
//! limited or peeks, keyspace events like a SET's, the module's clock deciding a key's expiry,
//! MULTI and Lua, key declaration (ACL, COMMAND GETKEYS), errors, and loading beside a server
//! or a module that already has one of the names. Replies against the real references:
//! tests/it/gcra_reference.rs.

use std::path::PathBuf;

use crate::common::reference::shared_build;
use crate::common::*;

/// 2027-01-15 08:00:00.206 UTC: later than the real clock, so the absolute expiries written on
/// the debug clock lie ahead for the server too.
const START: i64 = 1_800_000_000_206;

fn ints(con: &mut Connection, text: &str) -> Vec<i64> {
    line(con, text).unwrap_or_else(|e| panic!("{text}: {e}"))
}

/// The workload: allowed, limited, peeking and refunding calls on both commands.
const CALLS: &[(i64, &str)] = &[
    (0, "CL.THROTTLE t1 2 10 60"),
    (0, "CL.THROTTLE t1 2 10 60 2"),
    (0, "CL.THROTTLE t1 2 10 60"),
    (0, "CL.THROTTLE t1 2 10 60 0"),
    (1_500, "CL.THROTTLE t1 2 10 60 -1"),
    (0, "CL.THROTTLE t2 0 1 1"),
    (0, "CL.THROTTLE t2 0 1 1"),
    (0, "GCRA g1 5 10 60"),
    (0, "GCRA g1 5 10 60 TOKENS 5"),
    (0, "GCRA g1 5 10 60"),
    (250, "GCRA g2 1 4 0.25 TOKENS 2"),
    (0, "GCRA g2 1 4 0.25"),
    (0, "CL.THROTTLE t1 2 10 60 -100"),
];

#[test]
fn effects_reach_a_replica_and_an_aof_without_the_module() {
    let master = Server::start_with(
        &["debug-commands", "yes"],
        &[
            "--appendonly",
            "yes",
            "--appendfsync",
            "always",
            "--notify-keyspace-events",
            "KEA",
        ],
    );
    let replica = Server::start_replica(&master, false);
    let _: String = line(&mut replica.conn(), "CONFIG SET notify-keyspace-events KEA").unwrap();
    let mut master_sub = master.conn();
    let mut replica_sub = replica.conn();
    let mut on_master = master_sub.as_pubsub();
    on_master.psubscribe("__keyevent@0__:*").unwrap();
    let mut on_replica = replica_sub.as_pubsub();
    on_replica.psubscribe("__keyevent@0__:*").unwrap();
    let mut con = master.conn();
    set_clock(&mut con, START);
    let mut limited = 0;
    for (gap, call) in CALLS {
        advance(&mut con, *gap);
        limited += ints(&mut con, call)[0];
    }
    assert!(limited >= 3, "the workload must include limited calls");
    let _: () = line(&mut con, "SET sentinel 1").unwrap();
    wait_replicas(&mut con, 1);
    let master_events = keyevents_until_sentinel(on_master);
    let replica_events = keyevents_until_sentinel(on_replica);
    assert_eq!(master_events, replica_events);
    let events: Vec<&str> = master_events.iter().map(|(e, _)| e.as_str()).collect();
    for expected in ["set", "expire", "del"] {
        assert!(events.contains(&expected), "no {expected} in {events:?}");
    }
    let on_master = snapshot(&mut con);
    assert_eq!(on_master, snapshot(&mut replica.conn()));
    // t1 was emptied by the refund; the others hold a TAT, expiring at it.
    let keys: Vec<String> = on_master
        .iter()
        .map(|(k, _, _)| String::from_utf8_lossy(k).into_owned())
        .collect();
    assert_eq!(keys, ["g1", "g2", "sentinel", "t2"]);
    assert_eq!(
        get(&mut con, "t2"),
        Some(((START + 2_500) * 1_000_000).to_string())
    );
    let t2_expiry: i64 = line(&mut con, "PEXPIRETIME t2").unwrap();
    assert_eq!(t2_expiry, START + 2_500);
    // No replica ran a module command: it has none.
    assert_eq!(command_calls(&mut replica.conn(), "gcra"), 0);
    assert!(command_calls(&mut replica.conn(), "set") >= 4);

    // The AOF replays on a plain server to the same dataset.
    let aof_dir = master.dir.join("appendonlydir");
    let mut aof = Vec::new();
    for entry in std::fs::read_dir(&aof_dir).unwrap() {
        aof.extend(std::fs::read(entry.unwrap().path()).unwrap());
    }
    let text = String::from_utf8_lossy(&aof).to_ascii_lowercase();
    assert!(text.contains("pxat"), "the AOF lacks SET ... PXAT");
    assert!(!text.contains("cl.throttle") && !text.contains("\r\ngcra\r\n"));
    let copy = std::env::temp_dir().join(format!("gcra-aof-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&copy);
    std::fs::create_dir_all(copy.join("appendonlydir")).unwrap();
    for entry in std::fs::read_dir(&aof_dir).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(
            entry.path(),
            copy.join("appendonlydir").join(entry.file_name()),
        )
        .unwrap();
    }
    let plain = Server::start_plain(&["--appendonly", "yes", "--dir", copy.to_str().unwrap()]);
    assert_eq!(snapshot(&mut plain.conn()), on_master);
    drop(plain);
    let _ = std::fs::remove_dir_all(&copy);
}

/// A limited call and a peek change nothing: no dirty key, no replication, no event.
#[test]
fn limited_calls_and_peeks_write_nothing() {
    let master = Server::start_with(
        &["debug-commands", "yes"],
        &["--notify-keyspace-events", "KEA"],
    );
    let _replica = Server::start_replica(&master, false);
    let mut con = master.conn();
    set_clock(&mut con, START);
    assert_eq!(ints(&mut con, "GCRA g 0 1 60")[0], 0);
    assert_eq!(ints(&mut con, "CL.THROTTLE t 0 1 60")[0], 0);
    wait_replicas(&mut con, 1);
    let mut sub_con = master.conn();
    let mut sub = sub_con.as_pubsub();
    sub.psubscribe("__keyevent@0__:*").unwrap();
    let dirty = info_field(&mut con, "persistence", "rdb_changes_since_last_save");
    let offset = info_field(&mut con, "replication", "master_repl_offset");
    let before = snapshot(&mut con);
    for call in [
        "GCRA g 0 1 60",
        "GCRA g 0 1 60 TOKENS 2",
        "CL.THROTTLE t 0 1 60",
        "CL.THROTTLE t 0 1 60 0",
        "CL.THROTTLE fresh 0 1 60 0",
        "CL.THROTTLE t 0 1 60 5",
    ] {
        let reply = ints(&mut con, call);
        assert!(reply[0] == 1 || call.ends_with(" 0"), "{call}: {reply:?}");
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
    let _: () = line(&mut con, "SET sentinel 1").unwrap();
    assert_eq!(
        keyevents_until_sentinel(sub),
        Vec::<(String, Vec<u8>)>::new()
    );
}

/// A key counts while the module's clock is at or before its expiry, whatever the server's
/// clock says: the debug clock past it finds the bucket full again.
#[test]
fn the_module_clock_decides_when_a_key_has_expired() {
    let server = Server::start();
    let mut con = server.conn();
    set_clock(&mut con, START);
    assert_eq!(ints(&mut con, "GCRA g 0 1 1"), [0, 1, 0, -1, 1]);
    assert_eq!(ints(&mut con, "GCRA g 0 1 1"), [1, 1, 0, 1, 1]);
    assert_eq!(ints(&mut con, "CL.THROTTLE t 0 1 1"), [0, 1, 0, -1, 1]);
    assert_eq!(ints(&mut con, "CL.THROTTLE t 0 1 1")[0], 1);
    advance(&mut con, 1_000);
    // At the expiry itself the key still counts: its TAT is now, so a call passes.
    assert_eq!(ints(&mut con, "GCRA g 0 1 1"), [0, 1, 0, -1, 1]);
    advance(&mut con, 1_001);
    assert!(
        exists(&mut con, "t"),
        "the server's clock has not reached the expiry"
    );
    assert_eq!(ints(&mut con, "CL.THROTTLE t 0 1 1"), [0, 1, 0, -1, 1]);
    // A TAT within the current millisecond expires one millisecond later, never at now.
    assert_eq!(ints(&mut con, "GCRA tiny 0 10000000 1"), [0, 1, 0, -1, 1]);
    let expiry: i64 = line(&mut con, "PEXPIRETIME tiny").unwrap();
    assert_eq!(expiry, START + 2_001 + 1);
}

#[test]
fn multi_and_lua_run_them() {
    let server = Server::start();
    let mut con = server.conn();
    set_clock(&mut con, START);
    let replies: Vec<Vec<i64>> = redis::pipe()
        .atomic()
        .cmd("GCRA")
        .arg("m")
        .arg(1)
        .arg(1)
        .arg(1)
        .cmd("CL.THROTTLE")
        .arg("c")
        .arg(1)
        .arg(1)
        .arg(1)
        .cmd("GCRA")
        .arg("m")
        .arg(1)
        .arg(1)
        .arg(1)
        .cmd("GCRA")
        .arg("m")
        .arg(1)
        .arg(1)
        .arg(1)
        .query(&mut con)
        .unwrap();
    assert_eq!(replies[0], [0, 2, 1, -1, 1]);
    assert_eq!(replies[1], [0, 2, 1, -1, 1]);
    assert_eq!(replies[3][0], 1);
    // Redisson 4.7's RGcra runs GCRA from a script.
    let reply: Vec<i64> = redis::cmd("EVAL")
        .arg("return redis.call('GCRA', KEYS[1], ARGV[1], ARGV[2], ARGV[3], 'TOKENS', ARGV[4])")
        .arg(1)
        .arg("lua")
        .arg(2)
        .arg(4)
        .arg("1")
        .arg(3)
        .query(&mut con)
        .unwrap();
    assert_eq!(reply, [0, 3, 0, -1, 1]);
    let reply: Vec<i64> = redis::cmd("EVAL")
        .arg("return redis.call('CL.THROTTLE', KEYS[1], 0, 1, 60, -1)")
        .arg(1)
        .arg("c")
        .query(&mut con)
        .unwrap();
    assert_eq!(reply[0], 0);
}

#[test]
fn errors_are_clean_and_write_nothing() {
    let server = Server::start();
    let mut con = server.conn();
    set_clock(&mut con, START);
    let _: () = line(&mut con, "RPUSH list x").unwrap();
    let _: () = line(&mut con, "SET text abc").unwrap();
    let before = snapshot(&mut con);
    for (call, error) in [
        (
            "GCRA list 1 1 1",
            "WRONGTYPE Operation against a key holding the wrong kind of value",
        ),
        (
            "CL.THROTTLE list 1 1 1",
            "WRONGTYPE Operation against a key holding the wrong kind of value",
        ),
        ("GCRA text 1 1 1", "ERR Invalid GCRA key"),
        (
            "CL.THROTTLE text 1 1 1",
            "ERR corrupt rate limiter key 'text': not a CL.THROTTLE TAT (decimal nanoseconds)",
        ),
        (
            "CL.THROTTLE k 1 1",
            "ERR wrong number of arguments for 'cl.throttle' command",
        ),
        (
            "CL.THROTTLE k -1 1 1",
            "ERR max_burst must be an integer between 0 and 9223372036854775807",
        ),
        (
            "CL.THROTTLE k 1 0 1",
            "ERR count_per_period must be an integer between 1 and 9223372036854775807",
        ),
        (
            "CL.THROTTLE k 1 1 1.5",
            "ERR period must be an integer between 1 and 9223372036854775807",
        ),
        (
            "CL.THROTTLE k 1 1 1 x",
            "ERR quantity must be an integer between -9223372036854775808 and 9223372036854775807",
        ),
        ("GCRA k 1 1 1 TOKENS", "ERR Missing TOKENS value"),
    ] {
        assert_eq!(error_of(&mut con, call), error, "{call}");
    }
    // Bytes that are not UTF-8, in every argument: an error or a reply, never a crash.
    for words in [
        vec![&b"CL.THROTTLE"[..], b"k\xff", b"\xff", b"1", b"1"],
        vec![b"CL.THROTTLE", b"k", b"1", b"1", b"1", b"\xc3\x28"],
        vec![b"GCRA", b"k", b"1", b"1", b"\xff\xfe"],
        vec![b"GCRA", b"k", b"1", b"1", b"1", b"TOK\xffENS", b"1"],
    ] {
        assert!(run::<Value>(&mut con, &words).is_err());
    }
    assert_eq!(snapshot(&mut con), before);
    let reply: Vec<i64> = run(&mut con, &[b"GCRA", b"\xff\x00key", b"1", b"1", b"1"]).unwrap();
    assert_eq!(reply[0], 0);
}

/// The key is the command's key: cluster clients route it, ACL checks it.
#[test]
fn the_key_is_declared() {
    let server = Server::start();
    let mut con = server.conn();
    for call in ["GCRA k1 1 1 1 TOKENS 1", "CL.THROTTLE k1 1 1 1 1"] {
        let mut words = vec!["COMMAND", "GETKEYS"];
        words.extend(call.split(' '));
        let keys: Vec<String> = line(&mut con, &words.join(" ")).unwrap();
        assert_eq!(keys, ["k1"], "{call}");
    }
    let _: String = line(&mut con, "ACL SETUSER limited on nopass ~allowed:* +@all").unwrap();
    let _: String = line(&mut con, "AUTH limited x").unwrap();
    let reply: Vec<i64> = line(&mut con, "GCRA allowed:1 1 1 1").unwrap();
    assert_eq!(reply[0], 0);
    for call in ["GCRA other 1 1 1", "CL.THROTTLE other 1 1 1"] {
        assert!(error_of(&mut con, call).starts_with("NOPERM"), "{call}");
    }
    let docs: Value = line(&mut con, "COMMAND DOCS gcra").unwrap();
    assert!(
        format!("{docs:?}").contains("tokens_per_period")
            || format!("{docs:?}").contains("tokens-per-period")
    );
}

fn log_has(server: &Server, text: &str) -> bool {
    server.log().lines().any(|l| l.contains(text))
}

/// A server that already has GCRA (the Redis build that shipped it) keeps its own; the module
/// loads and serves the rest.
#[test]
fn a_server_with_gcra_keeps_its_own() {
    let Some(binary) = shared_build("GCRA_REFERENCE_SERVER", "redis-gcra") else {
        return;
    };
    let module = module_path();
    let server = Server::spawn(
        &[binary.display().to_string()],
        &[
            "--loadmodule".into(),
            module.display().to_string(),
            "debug-commands".into(),
            "yes".into(),
        ],
        std::path::Path::new(env!("CARGO_TARGET_TMPDIR")),
        HANG,
    )
    .expect("the server with GCRA starts with the module");
    let mut con = server.conn();
    assert!(log_has(
        &server,
        "ratelimit: GCRA is already a command here"
    ));
    assert!(!log_has(&server, "CL.THROTTLE is already"));
    // GCRA is the server's (its own reply to a bad period, which the module words the same),
    // CL.THROTTLE and RATELIMIT.* are the module's.
    let info: Value = line(&mut con, "COMMAND INFO gcra").unwrap();
    assert!(!format!("{info:?}").contains("module"), "{info:?}");
    assert_eq!(ints(&mut con, "GCRA g 1 1 1")[0], 0);
    assert_eq!(ints(&mut con, "CL.THROTTLE t 1 1 1")[0], 0);
    assert_eq!(
        line::<i64>(&mut con, "RATELIMIT.SETRATE r 1 1000").unwrap(),
        1
    );
}

/// redis-cell loaded first keeps CL.THROTTLE; the module loads after it and serves the rest.
#[test]
fn redis_cell_loaded_first_keeps_cl_throttle() {
    let Some(cell) = shared_build("REDIS_CELL", "redis-cell") else {
        return;
    };
    let module: PathBuf = module_path();
    let server = Server::start_plain(&[
        "--loadmodule",
        cell.to_str().unwrap(),
        "--loadmodule",
        module.to_str().unwrap(),
        "debug-commands",
        "yes",
    ]);
    let mut con = server.conn();
    assert!(log_has(
        &server,
        "ratelimit: CL.THROTTLE is already a command here"
    ));
    let modules: Value = line(&mut con, "MODULE LIST").unwrap();
    let listed = format!("{modules:?}");
    assert!(
        listed.contains("redis-cell") && listed.contains("ratelimit"),
        "{listed}"
    );
    // redis-cell's own error text: the command is its.
    let error = error_of(&mut con, "CL.THROTTLE t 1 x 1");
    assert!(error.contains("Cell error"), "{error}");
    assert_eq!(ints(&mut con, "GCRA g 1 1 1")[0], 0);
    assert_eq!(
        line::<i64>(&mut con, "RATELIMIT.SETRATE r 1 1000").unwrap(),
        1
    );
}
