//! RATELIMIT.CONFIG against a real server: reply shapes in RESP2 and RESP3, nil for a missing
//! limiter, how hashes written by others (HSET) are read, and incomplete hashes.

use crate::common::*;

/// A reply element: text (bulk or simple string) or integer. Anything else fails the test.
#[derive(Debug, PartialEq, Eq)]
enum Item {
    Text(String),
    Int(i64),
}

fn item(v: &Value) -> Item {
    match v {
        Value::BulkString(bytes) => Item::Text(String::from_utf8(bytes.clone()).expect("utf-8")),
        Value::SimpleString(s) => Item::Text(s.clone()),
        Value::Int(n) => Item::Int(*n),
        other => panic!("unexpected reply element {other:?}"),
    }
}

fn text(s: &str) -> Item {
    Item::Text(s.to_string())
}

/// The expected (field, value) pairs, in the documented order.
fn expected(rate: i64, interval: i64, kind: &str, keep_alive: i64) -> Vec<(Item, Item)> {
    vec![
        (text("rate"), Item::Int(rate)),
        (text("interval"), Item::Int(interval)),
        (text("type"), text(kind)),
        (text("keepAliveTime"), Item::Int(keep_alive)),
    ]
}

/// CONFIG over RESP2: must be a flat array; returned as pairs in reply order.
fn config_resp2(con: &mut Connection, key: &str) -> Vec<(Item, Item)> {
    match line::<Value>(con, &format!("RATELIMIT.CONFIG {key}")).expect("CONFIG") {
        Value::Array(items) => {
            assert_eq!(items.len(), 8, "flat array of 4 pairs: {items:?}");
            items
                .chunks(2)
                .map(|pair| (item(&pair[0]), item(&pair[1])))
                .collect()
        }
        other => panic!("RESP2 CONFIG must be a flat array, got {other:?}"),
    }
}

/// CONFIG over RESP3: must be a map; returned as pairs in reply order.
fn config_resp3(con: &mut Connection, key: &str) -> Vec<(Item, Item)> {
    match line::<Value>(con, &format!("RATELIMIT.CONFIG {key}")).expect("CONFIG") {
        Value::Map(pairs) => pairs.iter().map(|(k, v)| (item(k), item(v))).collect(),
        other => panic!("RESP3 CONFIG must be a map, got {other:?}"),
    }
}

#[test]
fn resp2_reply_is_a_flat_array_in_documented_order() {
    let server = Server::start();
    let mut con = server.conn();
    let _: i64 = line(
        &mut con,
        "RATELIMIT.SETRATE pc 10 1000 PER_CLIENT KEEPALIVE 5000",
    )
    .unwrap();
    assert_eq!(
        config_resp2(&mut con, "pc"),
        expected(10, 1000, "PER_CLIENT", 5000)
    );
    let _: i64 = line(&mut con, "RATELIMIT.SETRATE ov 4294967295 86400000").unwrap();
    assert_eq!(
        config_resp2(&mut con, "ov"),
        expected(4_294_967_295, 86_400_000, "OVERALL", 0)
    );
}

#[test]
fn resp3_reply_is_a_map_in_documented_order() {
    let server = Server::start();
    let mut con = server.conn_resp3();
    let _: i64 = line(
        &mut con,
        "RATELIMIT.SETRATE pc 10 1000 PER_CLIENT KEEPALIVE 5000",
    )
    .unwrap();
    assert_eq!(
        config_resp3(&mut con, "pc"),
        expected(10, 1000, "PER_CLIENT", 5000)
    );
    let _: i64 = line(&mut con, "RATELIMIT.SETRATE ov 7 250").unwrap();
    assert_eq!(config_resp3(&mut con, "ov"), expected(7, 250, "OVERALL", 0));
}

#[test]
fn config_follows_updates() {
    let server = Server::start();
    let mut con = server.conn();
    let _: i64 = line(&mut con, "RATELIMIT.SETRATE api 10 1000").unwrap();
    let _: i64 = line(
        &mut con,
        "RATELIMIT.SETRATE api 3 2000 PER_CLIENT KEEPALIVE 9000 XX",
    )
    .unwrap();
    assert_eq!(
        config_resp2(&mut con, "api"),
        expected(3, 2000, "PER_CLIENT", 9000)
    );
}

#[test]
fn missing_limiter_is_nil_and_nothing_is_created() {
    let server = Server::start();
    let mut con = server.conn();
    assert_eq!(
        line::<Value>(&mut con, "RATELIMIT.CONFIG nope").unwrap(),
        Value::Nil
    );
    let mut con3 = server.conn_resp3();
    assert_eq!(
        line::<Value>(&mut con3, "RATELIMIT.CONFIG nope").unwrap(),
        Value::Nil
    );
    assert!(snapshot(&mut con).is_empty());
}

#[test]
fn type_is_compared_as_a_string() {
    let server = Server::start();
    let mut con = server.conn();
    for (key, kind, shown) in [
        ("t0", "0", "OVERALL"),
        ("t1", "1", "PER_CLIENT"),
        ("t2", "2", "OVERALL"),
        ("t01", "01", "OVERALL"),
        ("tword", "PER_CLIENT", "OVERALL"),
    ] {
        let _: i64 = line(
            &mut con,
            &format!("HSET {key} rate 3 interval 100 type {kind} keepAliveTime 0"),
        )
        .unwrap();
        assert_eq!(
            config_resp2(&mut con, key),
            expected(3, 100, shown, 0),
            "type {kind}"
        );
    }
    // The reading drives behaviour: type 2 is OVERALL (no CLIENT needed, shared keys), type 1
    // needs CLIENT.
    set_clock(&mut con, T0);
    assert_eq!(try_acquire(&mut con, "t2", 1), None);
    let value: String = line(&mut con, "GET {t2}:value").unwrap();
    assert_eq!(value, "2");
    let before = snapshot(&mut con);
    let err = error_of(&mut con, "RATELIMIT.TRYACQUIRE t1 1");
    assert!(err.starts_with("ERR ") && err.contains("CLIENT"), "{err}");
    assert_eq!(snapshot(&mut con), before);
}

#[test]
fn hash_without_keepalivetime_reads_as_zero() {
    let server = Server::start();
    let mut con = server.conn();
    let _: i64 = line(&mut con, "HSET old rate 5 interval 1000 type 0").unwrap();
    assert_eq!(
        config_resp2(&mut con, "old"),
        expected(5, 1000, "OVERALL", 0)
    );
    let mut con3 = server.conn_resp3();
    assert_eq!(
        config_resp3(&mut con3, "old"),
        expected(5, 1000, "OVERALL", 0)
    );
    // And the limiter works, with no TTL rule kicking in.
    set_clock(&mut con, T0);
    assert_eq!(try_acquire(&mut con, "old", 5), None);
    let ttl: i64 = line(&mut con, "PTTL {old}:value").unwrap();
    assert_eq!(ttl, -1);
}

#[test]
fn hash_lacking_rate_interval_or_type_is_not_initialized() {
    let server = Server::start();
    let mut con = server.conn();
    set_clock(&mut con, T0);
    for (key, fields) in [
        ("norate", "interval 1000 type 0 keepAliveTime 0"),
        ("nointerval", "rate 5 type 0 keepAliveTime 0"),
        ("notype", "rate 5 interval 1000 keepAliveTime 0"),
        ("other", "foo bar"),
    ] {
        let _: i64 = line(&mut con, &format!("HSET {key} {fields}")).unwrap();
        let before = snapshot(&mut con);
        assert_eq!(
            error_of(&mut con, &format!("RATELIMIT.CONFIG {key}")),
            format!("ERR RateLimiter is not initialized (limiter '{key}')"),
            "{key}"
        );
        assert_eq!(
            error_of(&mut con, &format!("RATELIMIT.TRYACQUIRE {key} 1")),
            format!("ERR RateLimiter is not initialized (limiter '{key}')"),
            "{key}"
        );
        assert_eq!(snapshot(&mut con), before, "{key}: nothing written");
    }
    // A missing hash is also not initialized for TRYACQUIRE (CONFIG says nil instead).
    assert_eq!(
        error_of(&mut con, "RATELIMIT.TRYACQUIRE missing 1"),
        "ERR RateLimiter is not initialized (limiter 'missing')"
    );
}
