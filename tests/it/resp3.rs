//! Reply shapes under RESP3 (`HELLO 3`) and RESP2, against a real server: CONFIG is a map or a
//! flat array, TRYACQUIRE/ACQUIRE a null or an integer, AVAILABLE/RELEASE integers.

use crate::common::*;

fn bulk(text: &str) -> Value {
    Value::BulkString(text.as_bytes().to_vec())
}

fn config_fields(rate: i64, interval: i64, kind: &str, keep_alive: i64) -> Vec<(Value, Value)> {
    vec![
        (bulk("rate"), Value::Int(rate)),
        (bulk("interval"), Value::Int(interval)),
        (bulk("type"), bulk(kind)),
        (bulk("keepAliveTime"), Value::Int(keep_alive)),
    ]
}

fn flat(fields: Vec<(Value, Value)>) -> Value {
    Value::Array(fields.into_iter().flat_map(|(k, v)| [k, v]).collect())
}

fn value(con: &mut Connection, text: &str) -> Value {
    line(con, text).unwrap_or_else(|e| panic!("`{text}`: {e}"))
}

/// The same script of commands on one connection; `map` shapes CONFIG's expected reply.
fn check_shapes(con: &mut Connection, map: fn(Vec<(Value, Value)>) -> Value) {
    con.set_read_timeout(Some(HANG)).unwrap();
    set_clock(con, T0);
    assert_eq!(value(con, "RATELIMIT.CONFIG api"), Value::Nil);
    assert_eq!(value(con, "RATELIMIT.SETRATE api 2 1000"), Value::Int(1));
    assert_eq!(
        value(con, "RATELIMIT.CONFIG api"),
        map(config_fields(2, 1000, "OVERALL", 0))
    );
    assert_eq!(value(con, "RATELIMIT.AVAILABLE api"), Value::Int(2));
    assert_eq!(value(con, "RATELIMIT.TRYACQUIRE api"), Value::Nil);
    assert_eq!(value(con, "RATELIMIT.ACQUIRE api"), Value::Nil);
    assert_eq!(value(con, "RATELIMIT.TRYACQUIRE api"), Value::Int(1000));
    assert_eq!(
        value(con, "RATELIMIT.ACQUIRE api 1 TIMEOUT 1"),
        Value::Int(1000)
    );
    assert_eq!(value(con, "RATELIMIT.AVAILABLE api"), Value::Int(0));
    assert_eq!(value(con, "RATELIMIT.RELEASE api 1"), Value::Int(1));
    assert_eq!(value(con, "RATELIMIT.AVAILABLE api"), Value::Int(1));

    assert_eq!(
        value(con, "RATELIMIT.SETRATE pc 5 2000 PER_CLIENT KEEPALIVE 9000"),
        Value::Int(1)
    );
    assert_eq!(
        value(con, "RATELIMIT.CONFIG pc"),
        map(config_fields(5, 2000, "PER_CLIENT", 9000))
    );
    assert_eq!(
        value(con, "RATELIMIT.TRYACQUIRE pc 5 CLIENT c1"),
        Value::Nil
    );
    assert_eq!(
        value(con, "RATELIMIT.TRYACQUIRE pc 1 CLIENT c1"),
        Value::Int(2000)
    );
    assert_eq!(
        value(con, "RATELIMIT.RELEASE pc 9 CLIENT c1"),
        Value::Int(5)
    );
    assert_eq!(
        value(con, "RATELIMIT.AVAILABLE pc CLIENT c1"),
        Value::Int(5)
    );

    // The same shapes inside EXEC's reply.
    let exec: Value = redis::pipe()
        .atomic()
        .cmd("RATELIMIT.CONFIG")
        .arg("api")
        .cmd("RATELIMIT.TRYACQUIRE")
        .arg("api")
        .cmd("RATELIMIT.TRYACQUIRE")
        .arg("api")
        .query(con)
        .unwrap();
    assert_eq!(
        exec,
        Value::Array(vec![
            map(config_fields(2, 1000, "OVERALL", 0)),
            Value::Nil,
            Value::Int(1000),
        ])
    );
}

#[test]
fn resp3_config_is_a_map_and_a_grant_is_null() {
    let server = Server::start();
    let mut con = server.conn_resp3();
    let hello: Value = redis::cmd("HELLO").arg(3).query(&mut con).unwrap();
    assert!(
        matches!(hello, Value::Map(_)),
        "not a RESP3 connection: {hello:?}"
    );
    check_shapes(&mut con, Value::Map);
}

#[test]
fn resp2_config_is_a_flat_array_and_a_grant_is_nil() {
    let server = Server::start();
    let mut con = server.conn();
    check_shapes(&mut con, flat);
}

#[test]
fn lua_sees_resp2_or_resp3_as_it_asks() {
    let server = Server::start();
    let mut con = server.conn_resp3();
    let _: i64 = line(&mut con, "RATELIMIT.SETRATE api 4 500 KEEPALIVE 500").unwrap();
    // In a script that switched to RESP3, CONFIG is a Lua table with a `map` field.
    let script = "redis.setresp(3) \
                  local c = redis.call('RATELIMIT.CONFIG', KEYS[1]) \
                  return {c['map']['rate'], c['map']['interval'], c['map']['type'], c['map']['keepAliveTime']}";
    let got: (i64, i64, String, i64) = redis::cmd("EVAL")
        .arg(script)
        .arg(1)
        .arg("api")
        .query(&mut con)
        .unwrap();
    assert_eq!(got, (4, 500, "OVERALL".to_string(), 500));
    // By default a script speaks RESP2: a flat array of 8.
    let script = "return #redis.call('RATELIMIT.CONFIG', KEYS[1])";
    let n: i64 = redis::cmd("EVAL")
        .arg(script)
        .arg(1)
        .arg("api")
        .query(&mut con)
        .unwrap();
    assert_eq!(n, 8);
}
