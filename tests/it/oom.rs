//! Above `maxmemory` (policy noeviction), against a real server: the `deny-oom` writers refuse
//! with Redis's OOM error and write nothing; the readers answer; DELETE, EXPIRE and PERSIST,
//! flagged `write` without `deny-oom` like DEL / PEXPIRE / PERSIST, still run (they only free
//! memory or drop a TTL).

use crate::common::*;

const OOM: &str = "OOM command not allowed when used memory > 'maxmemory'.";

fn config_set(con: &mut Connection, name: &str, value: &str) {
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg(name)
        .arg(value)
        .query(con)
        .unwrap_or_else(|e| panic!("CONFIG SET {name} {value}: {e}"));
}

/// A server with three limiters in use, then pushed over its memory limit.
fn server_over_maxmemory() -> (Server, Connection) {
    let server = Server::start();
    let mut con = server.conn();
    con.set_read_timeout(Some(HANG)).unwrap();
    set_clock(&mut con, T0);
    for setup in [
        "RATELIMIT.SETRATE api 5 1000",
        "RATELIMIT.TRYACQUIRE api 2",
        "RATELIMIT.SETRATE pc 3 1000 PER_CLIENT",
        "RATELIMIT.TRYACQUIRE pc 1 CLIENT c1",
        "RATELIMIT.SETRATE ka 2 1000 KEEPALIVE 600000",
        "RATELIMIT.TRYACQUIRE ka 1",
    ] {
        line::<Value>(&mut con, setup).unwrap();
    }
    config_set(&mut con, "maxmemory-policy", "noeviction");
    config_set(&mut con, "maxmemory", "1");
    (server, con)
}

#[test]
fn deny_oom_writers_refuse_and_write_nothing() {
    let (_server, mut con) = server_over_maxmemory();
    let before = snapshot(&mut con);
    assert_eq!(before.len(), 9);
    for command in [
        "RATELIMIT.SETRATE api 9 1000",
        "RATELIMIT.SETRATE api 9 1000 KEEPSTATE",
        "RATELIMIT.SETRATE new 1 100 NX",
        "RATELIMIT.SETRATE api 9 1000 XX",
        "RATELIMIT.TRYACQUIRE api",
        "RATELIMIT.TRYACQUIRE api 5",
        "RATELIMIT.TRYACQUIRE pc 1 CLIENT c1",
        "RATELIMIT.TRYACQUIRE ka 2",
        "RATELIMIT.RELEASE api 1",
        "RATELIMIT.RELEASE pc 1 CLIENT c1",
        "RATELIMIT.ACQUIRE api",
        "RATELIMIT.ACQUIRE api 5 TIMEOUT 10",
        "RATELIMIT.ACQUIRE nope",
    ] {
        assert_eq!(error_of(&mut con, command), OOM, "{command}");
    }
    // A script gets the same refusal for a deny-oom command, as an error pcall hands back.
    let from_lua: String = redis::cmd("EVAL")
        .arg("return redis.pcall('RATELIMIT.TRYACQUIRE', KEYS[1])['err']")
        .arg(1)
        .arg("api")
        .query(&mut con)
        .expect("the script ran and returned pcall's error");
    assert_eq!(from_lua, OOM);
    assert_eq!(snapshot(&mut con), before, "a refused command wrote");

    // Readers answer.
    let config: Vec<Value> = line(&mut con, "RATELIMIT.CONFIG api").unwrap();
    assert_eq!(config.len(), 8);
    assert_eq!(config[1], Value::Int(5));
    assert_eq!(line::<i64>(&mut con, "RATELIMIT.AVAILABLE api").unwrap(), 3);
    assert_eq!(
        line::<i64>(&mut con, "RATELIMIT.AVAILABLE pc CLIENT c1").unwrap(),
        2
    );
    assert_eq!(snapshot(&mut con), before);

    // The limit was the only reason: lifted, the same writers work.
    config_set(&mut con, "maxmemory", "0");
    assert_eq!(try_acquire(&mut con, "api", 1), None);
    assert_eq!(line::<i64>(&mut con, "RATELIMIT.RELEASE api 1").unwrap(), 1);
    assert_eq!(
        line::<i64>(&mut con, "RATELIMIT.SETRATE api 9 1000").unwrap(),
        1
    );
}

#[test]
fn delete_expire_and_persist_still_run_like_del_pexpire_persist() {
    let (_server, mut con) = server_over_maxmemory();
    // Redis's own: DEL, PEXPIRE and PERSIST are not deny-oom either.
    config_set(&mut con, "maxmemory", "0");
    let _: () = redis::cmd("SET")
        .arg("plain")
        .arg("x")
        .query(&mut con)
        .unwrap();
    config_set(&mut con, "maxmemory", "1");
    assert_eq!(error_of(&mut con, "SET other y"), OOM);
    assert_eq!(line::<i64>(&mut con, "PEXPIRE plain 600000").unwrap(), 1);
    assert_eq!(line::<i64>(&mut con, "PERSIST plain").unwrap(), 1);
    assert_eq!(line::<i64>(&mut con, "DEL plain").unwrap(), 1);

    // What the module's three do above maxmemory: they run.
    // PERSIST drops the keep-alive TTL of `ka`'s hash, value and log.
    assert_eq!(line::<i64>(&mut con, "RATELIMIT.PERSIST ka").unwrap(), 1);
    for key in ["ka", "{ka}:value", "{ka}:permits"] {
        assert_eq!(
            line::<i64>(&mut con, &format!("PTTL {key}")).unwrap(),
            -1,
            "{key}"
        );
    }
    // EXPIRE sets a TTL on `api`'s three keys...
    assert_eq!(
        line::<i64>(&mut con, "RATELIMIT.EXPIRE api 600000").unwrap(),
        1
    );
    for key in ["api", "{api}:value", "{api}:permits"] {
        assert!(
            line::<i64>(&mut con, &format!("PTTL {key}")).unwrap() > 0,
            "{key}"
        );
    }
    // ...and a non-positive one deletes them, as PEXPIRE does.
    assert_eq!(line::<i64>(&mut con, "RATELIMIT.EXPIRE api 0").unwrap(), 1);
    // DELETE removes the hash and the client's state.
    assert_eq!(
        line::<i64>(&mut con, "RATELIMIT.DELETE pc CLIENT c1").unwrap(),
        3
    );
    let left: Vec<String> = snapshot(&mut con)
        .into_iter()
        .map(|(k, _, _)| String::from_utf8(k).unwrap())
        .collect();
    assert_eq!(left, vec!["ka", "{ka}:permits", "{ka}:value"]);
    // And the writers are still refused.
    assert_eq!(error_of(&mut con, "RATELIMIT.TRYACQUIRE ka"), OOM);
}
