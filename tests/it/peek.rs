//! RATELIMIT.PEEK: ALLOW's answer for a request not made, and when the oldest logged permit
//! frees; nothing taken, written or replicated, and it answers on a replica. Exact values on the
//! debug clock.

use crate::common::waiters::*;
use crate::common::*;

/// A reply of ALLOW or PEEK as its fields' names and integers, from RESP2's flat array.
fn fields(con: &mut Connection, text: &str) -> Vec<(String, i64)> {
    let reply: Vec<Value> = line(con, text).unwrap_or_else(|e| panic!("{text}: {e}"));
    reply
        .chunks(2)
        .map(|pair| match pair {
            [Value::BulkString(name), Value::Int(n)] => (String::from_utf8_lossy(name).into(), *n),
            other => panic!("{text}: not a name and an integer: {other:?}"),
        })
        .collect()
}

/// PEEK's reply, checked against what ALLOW then replies on the same clock, and that PEEK
/// changed nothing; returns PEEK's six integers.
fn peek_then_allow(con: &mut Connection, args: &str) -> [i64; 6] {
    let before = snapshot(con);
    let peeked = fields(con, &format!("RATELIMIT.PEEK {args}"));
    assert_eq!(snapshot(con), before, "PEEK {args} wrote");
    let names: Vec<&str> = peeked.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "allowed",
            "limit",
            "remaining",
            "retry_after",
            "reset_after",
            "oldest_after"
        ]
    );
    let allowed = fields(con, &format!("RATELIMIT.ALLOW {args}"));
    assert_eq!(
        allowed[..],
        peeked[..5],
        "PEEK {args} is not what ALLOW answered"
    );
    let mut out = [0; 6];
    for (slot, (_, n)) in out.iter_mut().zip(&peeked) {
        *slot = *n;
    }
    out
}

#[test]
fn peek_answers_what_allow_then_answers_and_when_the_oldest_permit_frees() {
    let server = Server::start();
    let mut con = server.conn();
    set_clock(&mut con, T0);
    line::<i64>(&mut con, "RATELIMIT.SETRATE api 3 1000 KEEPALIVE 5000").unwrap();
    // An empty log: the whole rate, nothing to free.
    assert_eq!(peek_then_allow(&mut con, "api"), [1, 3, 2, 0, 1000, 0]);
    advance(&mut con, 200);
    assert_eq!(peek_then_allow(&mut con, "api 2"), [1, 3, 0, 0, 1000, 800]);
    advance(&mut con, 100);
    // Full: refused until the entry of T0 frees (700 ms), the last frees at T0 + 1200.
    assert_eq!(peek_then_allow(&mut con, "api"), [0, 3, 0, 700, 900, 700]);
    assert_eq!(peek_then_allow(&mut con, "api 3"), [0, 3, 0, 900, 900, 700]);
    advance(&mut con, 700);
    // The entry of T0 has expired (not yet pruned: PEEK prunes nothing); 2 permits remain logged.
    assert_eq!(peek_then_allow(&mut con, "api 2"), [0, 3, 1, 200, 200, 200]);
    assert_eq!(peek_then_allow(&mut con, "api"), [1, 3, 0, 0, 1000, 200]);
    advance(&mut con, 5_000);
    assert_eq!(peek_then_allow(&mut con, "api"), [1, 3, 2, 0, 1000, 0]);
}

#[test]
fn peek_takes_the_state_of_the_client_of_a_per_client_limiter() {
    let server = Server::start();
    let mut con = server.conn();
    set_clock(&mut con, T0);
    line::<i64>(&mut con, "RATELIMIT.SETRATE pc 2 1000 PER_CLIENT").unwrap();
    assert_eq!(
        peek_then_allow(&mut con, "pc 2 CLIENT a"),
        [1, 2, 0, 0, 1000, 0]
    );
    advance(&mut con, 10);
    assert_eq!(
        peek_then_allow(&mut con, "pc CLIENT a"),
        [0, 2, 0, 990, 990, 990]
    );
    assert_eq!(
        peek_then_allow(&mut con, "pc CLIENT b"),
        [1, 2, 1, 0, 1000, 0]
    );
}

#[test]
fn peek_counts_permits_waited_for_in_acquire_as_taken_as_allow_does() {
    let server = Server::start();
    let mut con = server.conn();
    set_clock(&mut con, T0);
    line::<i64>(&mut con, "RATELIMIT.SETRATE api 3 1000").unwrap();
    assert_eq!(try_acquire(&mut con, "api", 2), None);
    let waiter = park(&server, &mut con, "RATELIMIT.ACQUIRE api 2");
    // One permit is free, but a waiter is ahead: ALLOW would refuse, and so does PEEK.
    assert_eq!(
        peek_then_allow(&mut con, "api"),
        [0, 3, 0, 1000, 1000, 1000]
    );
    advance(&mut con, 1000);
    assert_eq!(served(waiter).reply, Reply::Acquired);
}

/// `PEEK key 0 ...`, checked to write nothing and to say what AVAILABLE says; its six integers.
fn look(con: &mut Connection, key: &str, client: &str) -> [i64; 6] {
    let before = snapshot(con);
    let peeked = fields(con, &format!("RATELIMIT.PEEK {key} 0 {client}"));
    assert_eq!(snapshot(con), before, "PEEK {key} 0 wrote");
    let available: i64 = line(con, &format!("RATELIMIT.AVAILABLE {key} {client}")).unwrap();
    let mut out = [0; 6];
    for (slot, (_, n)) in out.iter_mut().zip(&peeked) {
        *slot = *n;
    }
    assert_eq!(out[2], available, "PEEK {key} 0 {client}: {out:?}");
    out
}

#[test]
fn peek_of_no_permits_reads_the_limiter_as_it_stands_in_either_form() {
    let server = Server::start();
    let mut con = server.conn();
    for (key, form) in [
        ("three", ""),
        ("one", "ONEKEY PRECISION 1"),
        ("pc", "PER_CLIENT"),
    ] {
        set_clock(&mut con, T0);
        let client = if form == "PER_CLIENT" { "CLIENT c" } else { "" };
        line::<i64>(&mut con, &format!("RATELIMIT.SETRATE {key} 3 1000 {form}")).unwrap();
        // Nothing logged: the whole rate available, nothing to free; granted, as nothing is
        // asked. A PEEK for 1 permit would say 2 remaining and 1000 ms: its own grant's.
        assert_eq!(look(&mut con, key, client), [1, 3, 3, 0, 0, 0], "{key}");
        fields(&mut con, &format!("RATELIMIT.ALLOW {key} {client}"));
        advance(&mut con, 200);
        fields(&mut con, &format!("RATELIMIT.ALLOW {key} {client}"));
        // Two logged: the newest frees in 1000 ms, the oldest in 800.
        assert_eq!(
            look(&mut con, key, client),
            [1, 3, 1, 0, 1000, 800],
            "{key}"
        );
        advance(&mut con, 300);
        assert_eq!(look(&mut con, key, client), [1, 3, 1, 0, 700, 500], "{key}");
        fields(&mut con, &format!("RATELIMIT.ALLOW {key} {client}"));
        // Full: still granted (nothing is asked), none remaining.
        assert_eq!(
            look(&mut con, key, client),
            [1, 3, 0, 0, 1000, 500],
            "{key}"
        );
        advance(&mut con, 600);
        // The first entry has freed (not pruned: PEEK prunes nothing).
        assert_eq!(look(&mut con, key, client), [1, 3, 1, 0, 400, 100], "{key}");
        advance(&mut con, 400);
        assert_eq!(look(&mut con, key, client), [1, 3, 3, 0, 0, 0], "{key}");
    }
}

#[test]
fn peek_of_no_permits_counts_permits_waited_for_in_acquire_as_taken() {
    let server = Server::start();
    let mut con = server.conn();
    set_clock(&mut con, T0);
    for (key, form) in [("three", ""), ("one", "ONEKEY PRECISION 1")] {
        line::<i64>(&mut con, &format!("RATELIMIT.SETRATE {key} 3 1000 {form}")).unwrap();
        assert_eq!(try_acquire(&mut con, key, 2), None);
        let waiter = park(&server, &mut con, &format!("RATELIMIT.ACQUIRE {key} 2"));
        // One permit is free, but the waiter ahead wants two: none remains for a new request.
        let peeked = fields(&mut con, &format!("RATELIMIT.PEEK {key} 0"));
        let values: Vec<i64> = peeked.iter().map(|(_, n)| *n).collect();
        assert_eq!(values, [1, 3, 0, 0, 1000, 1000], "{key}");
        advance(&mut con, 1000);
        assert_eq!(served(waiter).reply, Reply::Acquired);
    }
}

#[test]
fn peek_fails_as_allow_does_and_writes_nothing() {
    let server = Server::start();
    let mut con = server.conn();
    line::<i64>(&mut con, "RATELIMIT.SETRATE api 3 1000").unwrap();
    line::<i64>(&mut con, "RATELIMIT.SETRATE pc 3 1000 PER_CLIENT").unwrap();
    line::<()>(&mut con, "SET str x").unwrap();
    let before = snapshot(&mut con);
    for (command, error) in [
        (
            "RATELIMIT.PEEK nope",
            "ERR RateLimiter is not initialized (limiter 'nope')",
        ),
        ("RATELIMIT.PEEK str", "WRONGTYPE"),
        (
            "RATELIMIT.PEEK pc",
            "ERR the limiter is PER_CLIENT: CLIENT id is required",
        ),
        (
            "RATELIMIT.PEEK api 4",
            "ERR Requested permits amount cannot exceed defined rate",
        ),
        (
            "RATELIMIT.PEEK api RATE 3 1000",
            "ERR syntax error, unknown option 'RATE'",
        ),
        (
            "RATELIMIT.PEEK api CLIENT",
            "ERR syntax error, CLIENT needs a value",
        ),
        (
            "RATELIMIT.PEEK",
            "ERR wrong number of arguments for 'ratelimit.peek' command",
        ),
    ] {
        let allow = command.replace("PEEK", "ALLOW");
        let err = error_of(&mut con, command);
        assert!(err.starts_with(error), "`{command}`: {err}");
        if !command.contains("RATE ") && command != "RATELIMIT.PEEK" {
            assert_eq!(error_of(&mut con, &allow), err, "`{allow}`");
        }
    }
    // PEEK's permits start at 0 (nothing asked), ALLOW's at 1.
    for permits in ["-1", "4294967296"] {
        let err = error_of(&mut con, &format!("RATELIMIT.PEEK api {permits}"));
        assert!(
            err.starts_with("ERR permits must be an integer between 0 and 4294967295"),
            "PEEK api {permits}: {err}"
        );
    }
    let err = error_of(&mut con, "RATELIMIT.ALLOW api 0");
    assert!(
        err.starts_with("ERR permits must be an integer between 1 and 4294967295"),
        "{err}"
    );
    for (command, error) in [
        (
            "RATELIMIT.PEEK nope 0",
            "ERR RateLimiter is not initialized",
        ),
        ("RATELIMIT.PEEK str 0", "WRONGTYPE"),
        (
            "RATELIMIT.PEEK pc 0",
            "ERR the limiter is PER_CLIENT: CLIENT id is required",
        ),
    ] {
        let err = error_of(&mut con, command);
        assert!(err.starts_with(error), "`{command}`: {err}");
    }
    let empty = run::<Value>(&mut con, &[b"RATELIMIT.PEEK", b"api", b"CLIENT", b""]);
    let err = error_line(&empty.expect_err("an empty CLIENT id"));
    assert!(err.starts_with("ERR CLIENT id must not be empty"), "{err}");
    assert_eq!(snapshot(&mut con), before);
}

#[test]
fn peek_is_readonly_answers_on_a_replica_and_replicates_nothing() {
    let master = Server::start();
    let replica = Server::start_replica(&master, true);
    let mut con = master.conn();
    let info: Vec<Value> = line(&mut con, "COMMAND INFO RATELIMIT.PEEK").unwrap();
    let Value::Array(entry) = &info[0] else {
        panic!("no COMMAND INFO for RATELIMIT.PEEK: {info:?}")
    };
    assert_eq!(entry[1], Value::Int(-2));
    let Value::Array(flags) = &entry[2] else {
        panic!("no flags: {entry:?}")
    };
    let flags: Vec<String> = flags
        .iter()
        .map(|f| match f {
            Value::SimpleString(s) => s.clone(),
            Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
            other => panic!("flag {other:?}"),
        })
        .collect();
    assert!(flags.iter().any(|f| f == "readonly"), "{flags:?}");
    assert!(!flags.iter().any(|f| f == "write"), "{flags:?}");
    // Real clocks on both sides; a long interval keeps the permits live meanwhile.
    line::<i64>(&mut con, "RATELIMIT.SETRATE api 10 3600000").unwrap();
    assert_eq!(try_acquire(&mut con, "api", 3), None);
    wait_replicas(&mut con, 1);
    let offset = info_field(&mut con, "replication", "master_repl_offset");
    for _ in 0..5 {
        let peeked = fields(&mut con, "RATELIMIT.PEEK api 2");
        assert_eq!(peeked[2], ("remaining".into(), 5));
    }
    assert_eq!(
        info_field(&mut con, "replication", "master_repl_offset"),
        offset
    );
    let mut rcon = replica.conn();
    let peeked = fields(&mut rcon, "RATELIMIT.PEEK api");
    assert_eq!(
        &peeked[..3],
        &[
            ("allowed".into(), 1),
            ("limit".into(), 10),
            ("remaining".into(), 6)
        ]
    );
}

#[test]
fn peek_replies_a_map_in_resp3() {
    let server = Server::start();
    let mut con = server.conn_resp3();
    set_clock(&mut con, T0);
    line::<Value>(&mut con, "RATELIMIT.ALLOW api RATE 2 1000").unwrap();
    let reply: Value = line(&mut con, "RATELIMIT.PEEK api").unwrap();
    let Value::Map(pairs) = reply else {
        panic!("not a map: {reply:?}")
    };
    let names: Vec<Value> = pairs.iter().map(|(k, _)| k.clone()).collect();
    assert_eq!(names.len(), 6);
    assert_eq!(
        pairs[5],
        (
            Value::BulkString(b"oldest_after".to_vec()),
            Value::Int(1000)
        )
    );
}
