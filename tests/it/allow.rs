//! One call answers an HTTP request: RATELIMIT.ALLOW's fields, limiters created on first use
//! with RATE (on ALLOW, TRYACQUIRE and ACQUIRE), and RATELIMIT.ALLOWALL's all or nothing over
//! several limiters. Exact values on the debug clock.

use crate::common::waiters::*;
use crate::common::*;

/// ALLOW's (or ALLOWALL's) reply as (name, value) pairs, in order, from RESP2's flat array.
fn allow(con: &mut Connection, text: &str) -> Vec<(String, Value)> {
    let reply: Vec<Value> = line(con, text).unwrap_or_else(|e| panic!("{text}: {e}"));
    reply
        .chunks(2)
        .map(|pair| match pair {
            [Value::BulkString(name), value] => {
                (String::from_utf8(name.clone()).unwrap(), value.clone())
            }
            other => panic!("{text}: not a name, value pair: {other:?}"),
        })
        .collect()
}

/// The five integer fields of an ALLOW reply: allowed, limit, remaining, retry_after, reset_after.
fn fields(con: &mut Connection, text: &str) -> [i64; 5] {
    let reply = allow(con, text);
    let names: Vec<&str> = reply.iter().map(|(n, _)| n.as_str()).take(5).collect();
    assert_eq!(
        names,
        [
            "allowed",
            "limit",
            "remaining",
            "retry_after",
            "reset_after"
        ],
        "{text}"
    );
    let mut out = [0; 5];
    for (slot, (_, value)) in out.iter_mut().zip(&reply) {
        *slot = match value {
            Value::Int(n) => *n,
            other => panic!("{text}: {other:?} is not an integer"),
        };
    }
    out
}

#[test]
fn allow_replies_every_field_an_api_needs() {
    let server = Server::start();
    let mut con = server.conn();
    set_clock(&mut con, T0);
    line::<i64>(&mut con, "RATELIMIT.SETRATE api 3 1000").unwrap();
    assert_eq!(fields(&mut con, "RATELIMIT.ALLOW api"), [1, 3, 2, 0, 1000]);
    advance(&mut con, 200);
    assert_eq!(
        fields(&mut con, "RATELIMIT.ALLOW api 2"),
        [1, 3, 0, 0, 1000]
    );
    advance(&mut con, 100);
    // Refused: the entry of T0 frees one permit at T0 + 1000, 700 ms from now; everything
    // logged has expired at T0 + 1200.
    assert_eq!(fields(&mut con, "RATELIMIT.ALLOW api"), [0, 3, 0, 700, 900]);
    assert_eq!(
        fields(&mut con, "RATELIMIT.ALLOW api 3"),
        [0, 3, 0, 900, 900]
    );
    advance(&mut con, 700);
    assert_eq!(fields(&mut con, "RATELIMIT.ALLOW api"), [1, 3, 0, 0, 1000]);
    // The same answers TRYACQUIRE and AVAILABLE give.
    assert_eq!(try_acquire(&mut con, "api", 1), Some(200));
    assert_eq!(available(&mut con, "api"), 0);
    // Errors as TRYACQUIRE's.
    assert_eq!(
        error_of(&mut con, "RATELIMIT.ALLOW api 4"),
        "ERR Requested permits amount cannot exceed defined rate"
    );
    assert_eq!(
        error_of(&mut con, "RATELIMIT.ALLOW missing"),
        "ERR RateLimiter is not initialized (limiter 'missing')"
    );
}

#[test]
fn allow_is_a_map_in_resp3() {
    let server = Server::start();
    let mut con = server.conn_resp3();
    set_clock(&mut con, T0);
    line::<i64>(&mut con, "RATELIMIT.SETRATE api 3 1000").unwrap();
    let reply: Value = line(&mut con, "RATELIMIT.ALLOW api").unwrap();
    let Value::Map(pairs) = reply else {
        panic!("not a map: {reply:?}");
    };
    let pairs: Vec<(String, i64)> = pairs
        .into_iter()
        .map(|(k, v)| match (k, v) {
            (Value::BulkString(k), Value::Int(v)) => (String::from_utf8(k).unwrap(), v),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(
        pairs,
        [
            ("allowed".to_string(), 1),
            ("limit".to_string(), 3),
            ("remaining".to_string(), 2),
            ("retry_after".to_string(), 0),
            ("reset_after".to_string(), 1000)
        ]
    );
    let reply: Value = line(&mut con, "RATELIMIT.ALLOWALL 1 api").unwrap();
    let Value::Map(pairs) = reply else {
        panic!("not a map: {reply:?}");
    };
    assert_eq!(pairs.len(), 6);
    assert_eq!(
        pairs[5],
        (Value::BulkString(b"limited_by".to_vec()), Value::Nil)
    );
}

#[test]
fn remaining_counts_what_queued_waiters_are_owed() {
    let server = Server::start();
    let mut con = server.conn();
    set_clock(&mut con, T0);
    line::<i64>(&mut con, "RATELIMIT.SETRATE api 5 1000").unwrap();
    assert_eq!(try_acquire(&mut con, "api", 4), None);
    let waiter = park(&server, &mut con, "RATELIMIT.ACQUIRE api 3");
    // One permit is free, but the waiter ahead is owed three: nothing for a new request.
    assert_eq!(
        fields(&mut con, "RATELIMIT.ALLOW api"),
        [0, 5, 0, 1000, 1000]
    );
    assert_eq!(available(&mut con, "api"), 0);
    advance(&mut con, 1000);
    assert_eq!(served(waiter).reply, Reply::Acquired);
    assert_eq!(fields(&mut con, "RATELIMIT.ALLOW api"), [1, 5, 1, 0, 1000]);
}

#[test]
fn rate_creates_the_limiter_on_first_use_exactly_as_setrate_nx() {
    let server = Server::start();
    let mut con = server.conn();
    set_clock(&mut con, T0);
    for (command, name) in [
        ("RATELIMIT.ALLOW", "a"),
        ("RATELIMIT.TRYACQUIRE", "t"),
        ("RATELIMIT.ACQUIRE", "q"),
    ] {
        let _: Value = line(
            &mut con,
            &format!("{command} {name} 2 RATE 10 60000 KEEPALIVE 60000"),
        )
        .unwrap();
        let _: i64 = line(
            &mut con,
            &format!("RATELIMIT.SETRATE nx-{name} 10 60000 KEEPALIVE 60000 NX"),
        )
        .unwrap();
        let created: Vec<String> = line(&mut con, &format!("HGETALL {name}")).unwrap();
        let by_setrate: Vec<String> = line(&mut con, &format!("HGETALL nx-{name}")).unwrap();
        assert_eq!(created, by_setrate, "{command}");
        assert!(
            pttl(&mut con, name) > 59_000,
            "{command}: the keep-alive TTL"
        );
        assert_eq!(logged_permits(&mut con, &format!("{{{name}}}:permits")), 2);
        assert_eq!(available(&mut con, name), 8);
    }
    // A limiter that exists keeps its configuration: RATE is only validated.
    assert_eq!(
        fields(&mut con, "RATELIMIT.ALLOW a RATE 1000 5"),
        [1, 10, 7, 0, 60000]
    );
    assert_eq!(
        error_of(&mut con, "RATELIMIT.ALLOW a RATE 0 5"),
        "ERR rate must be an integer between 1 and 4294967295"
    );
    let config: Vec<Value> = line(&mut con, "RATELIMIT.CONFIG a").unwrap();
    assert_eq!(config[1], Value::Int(10));
    // PER_CLIENT limiters are created too, and need CLIENT.
    assert_eq!(
        fields(
            &mut con,
            "RATELIMIT.ALLOW pc RATE 2 1000 PER_CLIENT CLIENT c1"
        ),
        [1, 2, 1, 0, 1000]
    );
    assert_eq!(get(&mut con, "{pc}:value:c1").as_deref(), Some("1"));
}

#[test]
fn a_creation_that_fails_writes_nothing() {
    let server = Server::start();
    let mut con = server.conn();
    set_clock(&mut con, T0);
    let _: i64 = line(&mut con, "HSET {wt}:value f v").unwrap();
    let _: () = line(&mut con, "SET {wt2}:permits x").unwrap();
    let before = snapshot(&mut con);
    for (command, error) in [
        (
            "RATELIMIT.ALLOW new 5 RATE 3 1000",
            "ERR Requested permits amount cannot exceed defined rate",
        ),
        (
            "RATELIMIT.TRYACQUIRE new RATE 3 1000 PER_CLIENT",
            "ERR the limiter is PER_CLIENT: CLIENT id is required",
        ),
        (
            "RATELIMIT.ACQUIRE new RATE 3 1000 KEEPALIVE 5",
            "ERR KEEPALIVE must be 0 or at least the interval",
        ),
        (
            "RATELIMIT.ALLOW wt RATE 3 1000",
            "WRONGTYPE Operation against a key holding the wrong kind of value (key '{wt}:value')",
        ),
        (
            "RATELIMIT.ALLOW wt2 RATE 3 1000",
            "WRONGTYPE Operation against a key holding the wrong kind of value (key '{wt2}:permits')",
        ),
        (
            "RATELIMIT.ALLOW new RATE 3",
            "ERR syntax error, RATE needs a rate and an interval",
        ),
        (
            "RATELIMIT.ALLOW new RATE 3 1000 NX",
            "ERR syntax error, unknown option 'NX'",
        ),
    ] {
        assert_eq!(error_of(&mut con, command), error, "{command}");
        assert_eq!(snapshot(&mut con), before, "{command} wrote something");
    }
}

#[test]
fn allowall_takes_from_every_limiter_or_from_none() {
    let server = Server::start();
    let mut con = server.conn();
    set_clock(&mut con, T0);
    line::<i64>(&mut con, "RATELIMIT.SETRATE {u}:second 2 1000").unwrap();
    line::<i64>(&mut con, "RATELIMIT.SETRATE {u}:day 3 86400000").unwrap();
    let both = "RATELIMIT.ALLOWALL 2 {u}:second {u}:day";
    assert_eq!(fields(&mut con, both), [1, 2, 1, 0, 86_400_000]);
    assert_eq!(fields(&mut con, both), [1, 2, 0, 0, 86_400_000]);
    // The second limit refuses: the day is not charged.
    let before = snapshot(&mut con);
    let reply = allow(&mut con, both);
    assert_eq!(
        reply,
        [
            ("allowed".into(), Value::Int(0)),
            ("limit".into(), Value::Int(2)),
            ("remaining".into(), Value::Int(0)),
            ("retry_after".into(), Value::Int(1000)),
            ("reset_after".into(), Value::Int(86_400_000)),
            (
                "limited_by".into(),
                Value::BulkString(b"{u}:second".to_vec())
            ),
        ]
    );
    assert_eq!(snapshot(&mut con), before, "a refusal charged something");
    assert_eq!(available(&mut con, "{u}:day"), 1);
    // A second later the second limit has room again; the day has one permit left.
    advance(&mut con, 1000);
    assert_eq!(fields(&mut con, both), [1, 3, 0, 0, 86_400_000]);
    // Now the day refuses, for most of a day; the second is not charged.
    let reply = allow(&mut con, &format!("{both} PERMITS 1"));
    assert_eq!(reply[0].1, Value::Int(0));
    assert_eq!(reply[3].1, Value::Int(86_399_000));
    assert_eq!(
        reply[5].1,
        Value::BulkString(b"{u}:day".to_vec()),
        "the longest wait names its limiter"
    );
    assert_eq!(available(&mut con, "{u}:second"), 1);
    // A limiter with nothing logged and a refusal elsewhere: reset_after is the longest.
    line::<i64>(&mut con, "RATELIMIT.SETRATE {u}:idle 5 1000").unwrap();
    let numbers = fields(&mut con, "RATELIMIT.ALLOWALL 2 {u}:idle {u}:day");
    assert_eq!(numbers, [0, 3, 0, 86_399_000, 86_400_000]);
    assert!(!exists(&mut con, "{u}:idle:permits"));
    assert_eq!(available(&mut con, "{u}:idle"), 5);
}

#[test]
fn allowall_errors_name_the_limiter_and_write_nothing() {
    let server = Server::start();
    let mut con = server.conn();
    set_clock(&mut con, T0);
    line::<i64>(&mut con, "RATELIMIT.SETRATE {u}:a 5 1000").unwrap();
    line::<i64>(&mut con, "RATELIMIT.SETRATE {u}:pc 5 1000 PER_CLIENT").unwrap();
    line::<i64>(&mut con, "RATELIMIT.SETRATE {u}:small 1 1000").unwrap();
    let _: () = line(&mut con, "SET {u}:str x").unwrap();
    line::<i64>(&mut con, "RATELIMIT.SETRATE {u}:bad 5 1000").unwrap();
    let _: () = line(&mut con, "SET {u}:bad:value x").unwrap();
    line::<i64>(&mut con, "RATELIMIT.SETRATE x 5 1000").unwrap();
    line::<i64>(&mut con, "RATELIMIT.SETRATE {x} 5 1000").unwrap();
    line::<i64>(&mut con, "RATELIMIT.SETRATE pcx 5 1000 PER_CLIENT").unwrap();
    line::<i64>(&mut con, "RATELIMIT.SETRATE {pcx}:value 5 1000").unwrap();
    let before = snapshot(&mut con);
    for (command, error) in [
        (
            "RATELIMIT.ALLOWALL 2 {u}:a {u}:none",
            "ERR RateLimiter is not initialized (limiter '{u}:none')",
        ),
        (
            "RATELIMIT.ALLOWALL 2 {u}:a {u}:small PERMITS 2",
            "ERR Requested permits amount cannot exceed defined rate (limiter '{u}:small')",
        ),
        (
            "RATELIMIT.ALLOWALL 2 {u}:a {u}:str",
            "WRONGTYPE key '{u}:str' holds a string that is not a ONEKEY rate limiter",
        ),
        (
            "RATELIMIT.ALLOWALL 2 {u}:a {u}:pc",
            "ERR the limiter is PER_CLIENT: CLIENT id is required (limiter '{u}:pc')",
        ),
        (
            "RATELIMIT.ALLOWALL 2 {u}:bad {u}:a",
            "ERR corrupt rate limiter key '{u}:bad:value': value is not an integer",
        ),
        (
            "RATELIMIT.ALLOWALL 2 {u}:a {u}:a",
            "ERR key '{u}:a' is listed more than once",
        ),
        // `x` and `{x}` are two hashes whose names derive the same state keys; a client id
        // can make one name's client keys another name's keys too.
        (
            "RATELIMIT.ALLOWALL 2 x {x}",
            "ERR limiters 'x' and '{x}' share the same state keys",
        ),
        (
            "RATELIMIT.ALLOWALL 2 pcx {pcx}:value CLIENT value",
            "ERR limiters 'pcx' and '{pcx}:value' share the same state keys",
        ),
        (
            "RATELIMIT.ALLOWALL 3 {u}:a {u}:pc",
            "ERR wrong number of arguments for 'ratelimit.allowall' command",
        ),
        (
            "RATELIMIT.ALLOWALL 1 {u}:a FOO",
            "ERR syntax error, unknown option 'FOO'",
        ),
        (
            "RATELIMIT.ALLOWALL 0 {u}:a",
            "ERR numkeys must be an integer between 1 and 1024",
        ),
    ] {
        assert_eq!(error_of(&mut con, command), error, "{command}");
        assert_eq!(snapshot(&mut con), before, "{command} wrote something");
    }
    // With CLIENT, the PER_CLIENT limiter takes from that client's state.
    assert_eq!(
        fields(&mut con, "RATELIMIT.ALLOWALL 2 {u}:a {u}:pc CLIENT c1"),
        [1, 5, 4, 0, 1000]
    );
    assert_eq!(get(&mut con, "{u}:pc:value:c1").as_deref(), Some("4"));
}

#[test]
fn allow_and_allowall_replicate_their_effects() {
    let server = Server::start();
    let replica = Server::start_replica(&server, false);
    let mut con = server.conn();
    set_clock(&mut con, T0);
    let _: Value = line(&mut con, "RATELIMIT.ALLOW {r}:s RATE 3 1000 KEEPALIVE 5000").unwrap();
    let _: Value = line(&mut con, "RATELIMIT.ALLOW {r}:d RATE 5 10000").unwrap();
    for step in 0..40 {
        let _: Value = line(&mut con, "RATELIMIT.ALLOWALL 2 {r}:s {r}:d PERMITS 1").unwrap();
        let _: Value = line(&mut con, "RATELIMIT.ALLOW {r}:s").unwrap();
        advance(&mut con, 97 * (step % 5));
    }
    wait_replicas(&mut con, 1);
    assert_eq!(snapshot(&mut con), snapshot(&mut replica.conn()));
}

#[test]
fn allow_and_allowall_inside_multi_and_lua() {
    let server = Server::start();
    let mut con = server.conn();
    set_clock(&mut con, T0);
    line::<i64>(&mut con, "RATELIMIT.SETRATE {m}:a 1 1000").unwrap();
    let _: () = line(&mut con, "MULTI").unwrap();
    let _: Value = line(&mut con, "RATELIMIT.ALLOW {m}:a").unwrap();
    let _: Value = line(&mut con, "RATELIMIT.ALLOWALL 1 {m}:a").unwrap();
    let replies: Vec<Vec<Value>> = line(&mut con, "EXEC").unwrap();
    assert_eq!(replies[0][1], Value::Int(1), "allowed");
    assert_eq!(replies[1][1], Value::Int(0), "refused");
    assert_eq!(replies[1][11], Value::BulkString(b"{m}:a".to_vec()));
    let reply: Vec<Value> = redis::cmd("EVAL")
        .arg("return redis.call('RATELIMIT.ALLOW', KEYS[1], 'RATE', '5', '1000')")
        .arg(1)
        .arg("{m}:lua")
        .query(&mut con)
        .unwrap();
    assert_eq!(reply[1], Value::Int(1));
    assert_eq!(reply[5], Value::Int(4));
}

#[test]
fn allow_and_allowall_never_admit_more_than_the_rate_in_any_window() {
    let server = Server::start();
    let mut con = server.conn();
    let mut now = T0;
    set_clock(&mut con, now);
    let limits = [("{w}:fast", 5i64, 100i64), ("{w}:slow", 20, 1000)];
    for (name, rate, interval) in limits {
        line::<i64>(
            &mut con,
            &format!("RATELIMIT.SETRATE {name} {rate} {interval}"),
        )
        .unwrap();
    }
    let mut rng = Rng(0xa110_a11a);
    let mut granted = 0;
    for _ in 0..3000 {
        let ms = rng.below(30) as i64;
        advance(&mut con, ms);
        now += ms;
        let permits = 1 + rng.below(3);
        let command = if rng.chance(50) {
            format!("RATELIMIT.ALLOWALL 2 {{w}}:fast {{w}}:slow PERMITS {permits}")
        } else {
            format!("RATELIMIT.ALLOW {{w}}:fast {permits}")
        };
        if fields(&mut con, &command)[0] == 0 {
            continue;
        }
        granted += 1;
        for (name, rate, interval) in limits {
            let in_window =
                permits_in_window(&mut con, &format!("{{{name}}}:permits"), now, interval);
            assert!(
                in_window <= rate,
                "{name}: {in_window} in a window of rate {rate}"
            );
        }
    }
    assert!(granted > 300, "only {granted} grants");
}
