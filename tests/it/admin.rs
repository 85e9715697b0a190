//! AVAILABLE, DELETE, EXPIRE, PERSIST, the DEBUG command and the module's load options.

use std::panic;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::common::*;

fn int(con: &mut Connection, text: &str) -> i64 {
    line(con, text).unwrap_or_else(|e| panic!("`{text}`: {e}"))
}

fn pexpiretime(con: &mut Connection, key: &str) -> i64 {
    int(con, &format!("PEXPIRETIME {key}"))
}

fn exists(con: &mut Connection, key: &str) -> bool {
    int(con, &format!("EXISTS {key}")) == 1
}

/// Keys of the OVERALL limiter `api` (rate 10, interval 1000) after 3 + 4 permits taken.
const API_KEYS: [&str; 3] = ["api", "{api}:value", "{api}:permits"];

fn api_limiter(con: &mut Connection) {
    set_clock(con, T0);
    assert_eq!(int(con, "RATELIMIT.SETRATE api 10 1000"), 1);
    assert_eq!(try_acquire(con, "api", 3), None);
    advance(con, 400);
    assert_eq!(try_acquire(con, "api", 4), None);
    for key in API_KEYS {
        assert!(exists(con, key), "{key}");
    }
}

#[test]
fn available_counts_expired_permits_without_writing_anything() {
    let server = Server::start();
    let mut con = server.conn();
    api_limiter(&mut con);
    let far = server_ms(&mut con) + 3_600_000;
    // Distinct expiries: stripping, refreshing or copying a TTL would show in the snapshot.
    for (i, key) in API_KEYS.iter().enumerate() {
        assert_eq!(
            int(&mut con, &format!("PEXPIREAT {key} {}", far + i as i64)),
            1
        );
    }
    let before = snapshot(&mut con);
    assert_eq!(int(&mut con, "RATELIMIT.AVAILABLE api"), 3);
    advance(&mut con, 600);
    // The 3 taken at T0 are free at T0 + 1000: counted, but not pruned.
    assert_eq!(int(&mut con, "RATELIMIT.AVAILABLE api"), 6);
    assert_eq!(snapshot(&mut con), before);
    assert_eq!(int(&mut con, "ZCARD {api}:permits"), 2);
    advance(&mut con, 400);
    assert_eq!(int(&mut con, "RATELIMIT.AVAILABLE api"), 10);
    assert_eq!(snapshot(&mut con), before);
}

#[test]
fn available_stays_within_zero_and_the_rate() {
    let server = Server::start();
    let mut con = server.conn();
    api_limiter(&mut con);
    // 7 logged in the window. A stored value is trusted up to the rate (SPEC step 2) and
    // recomputed from the log above it.
    for (stored, expected) in [("-5", 0), ("999", 3), ("11", 3), ("10", 10), ("2", 2)] {
        line::<()>(&mut con, &format!("SET {{api}}:value {stored}")).unwrap();
        let before = snapshot(&mut con);
        let avail = int(&mut con, "RATELIMIT.AVAILABLE api");
        assert_eq!(avail, expected, "value {stored}");
        assert!((0..=10).contains(&avail));
        assert_eq!(snapshot(&mut con), before, "value {stored}");
    }
    line::<()>(&mut con, "DEL {api}:value").unwrap();
    assert_eq!(int(&mut con, "RATELIMIT.AVAILABLE api"), 3);
    assert!(
        !exists(&mut con, "{api}:value"),
        "AVAILABLE created the value"
    );
}

#[test]
fn available_is_declared_readonly() {
    let server = Server::start();
    let mut con = server.conn();
    let info: Vec<Value> = line(&mut con, "COMMAND INFO RATELIMIT.AVAILABLE").unwrap();
    let Value::Array(entry) = &info[0] else {
        panic!("no COMMAND INFO for RATELIMIT.AVAILABLE: {info:?}")
    };
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
}

#[test]
fn available_answers_on_a_replica() {
    let master = Server::start();
    let replica = Server::start_replica(&master, true);
    let mut con = master.conn();
    // Real clocks on both sides; a long interval keeps the permits live meanwhile.
    assert_eq!(int(&mut con, "RATELIMIT.SETRATE api 10 3600000"), 1);
    assert_eq!(try_acquire(&mut con, "api", 3), None);
    wait_replicas(&mut con, 1);
    let mut rcon = replica.conn();
    assert_eq!(int(&mut rcon, "RATELIMIT.AVAILABLE api"), 7);
    let err = error_of(&mut rcon, "RATELIMIT.TRYACQUIRE api");
    assert!(err.starts_with("READONLY"), "{err}");
}

#[test]
fn delete_removes_the_hash_the_overall_state_and_the_given_client_only() {
    let server = Server::start();
    let mut con = server.conn();
    set_clock(&mut con, T0);
    assert_eq!(int(&mut con, "RATELIMIT.SETRATE pc 10 1000 PER_CLIENT"), 1);
    for client in ["c1", "c2"] {
        let r: Option<i64> = line(
            &mut con,
            &format!("RATELIMIT.TRYACQUIRE pc 2 CLIENT {client}"),
        )
        .unwrap();
        assert_eq!(r, None);
    }
    // Leftover OVERALL state (from before a mode change) and unrelated neighbours.
    line::<()>(&mut con, "SET {pc}:value 7").unwrap();
    line::<()>(&mut con, "ZADD {pc}:permits 1 leftover").unwrap();
    line::<()>(&mut con, "SET {pc}:other x").unwrap();
    line::<()>(&mut con, "SET pc2 x").unwrap();
    assert_eq!(int(&mut con, "RATELIMIT.DELETE pc CLIENT c1"), 5);
    let mut left: Vec<String> = line(&mut con, "KEYS *").unwrap();
    left.sort();
    assert_eq!(
        left,
        vec!["pc2", "{pc}:other", "{pc}:permits:c2", "{pc}:value:c2"]
    );
    assert_eq!(int(&mut con, "RATELIMIT.DELETE pc CLIENT c1"), 0);
    assert_eq!(int(&mut con, "RATELIMIT.DELETE pc CLIENT c2"), 2);
    assert_eq!(int(&mut con, "RATELIMIT.DELETE nope"), 0);
    let mut left: Vec<String> = line(&mut con, "KEYS *").unwrap();
    left.sort();
    assert_eq!(left, vec!["pc2", "{pc}:other"]);
}

#[test]
fn delete_counts_only_existing_keys() {
    let server = Server::start();
    let mut con = server.conn();
    api_limiter(&mut con);
    assert_eq!(int(&mut con, "RATELIMIT.DELETE api"), 3);
    for key in API_KEYS {
        assert!(!exists(&mut con, key));
    }
    assert_eq!(int(&mut con, "RATELIMIT.SETRATE api 10 1000"), 1);
    assert_eq!(
        int(&mut con, "RATELIMIT.DELETE api"),
        1,
        "only the hash exists"
    );
    // After DELETE the limiter is gone.
    assert_eq!(
        error_of(&mut con, "RATELIMIT.TRYACQUIRE api"),
        "ERR RateLimiter is not initialized (limiter 'api')"
    );
}

#[test]
fn expire_sets_one_absolute_expiry_on_every_key() {
    let server = Server::start();
    let mut con = server.conn();
    api_limiter(&mut con);
    // The debug clock is frozen in the past: TTLs must still run on the server's clock.
    let before = server_ms(&mut con);
    assert_eq!(int(&mut con, "RATELIMIT.EXPIRE api 50000"), 1);
    let after = server_ms(&mut con);
    let at = pexpiretime(&mut con, "api");
    assert!(
        (before + 50_000..=after + 50_000).contains(&at),
        "{at} not within [{}, {}]",
        before + 50_000,
        after + 50_000
    );
    for key in API_KEYS {
        assert_eq!(pexpiretime(&mut con, key), at, "{key}");
    }
    assert_eq!(int(&mut con, "RATELIMIT.EXPIRE nope 50000"), 0);
}

#[test]
fn expire_with_a_client_covers_that_clients_keys_only() {
    let server = Server::start();
    let mut con = server.conn();
    set_clock(&mut con, T0);
    assert_eq!(int(&mut con, "RATELIMIT.SETRATE pc 10 1000 PER_CLIENT"), 1);
    for client in ["c1", "c2"] {
        let r: Option<i64> = line(
            &mut con,
            &format!("RATELIMIT.TRYACQUIRE pc 2 CLIENT {client}"),
        )
        .unwrap();
        assert_eq!(r, None);
    }
    assert_eq!(int(&mut con, "RATELIMIT.EXPIRE pc 50000 CLIENT c1"), 1);
    let at = pexpiretime(&mut con, "pc");
    assert!(at > 0);
    for key in ["{pc}:value:c1", "{pc}:permits:c1"] {
        assert_eq!(pexpiretime(&mut con, key), at, "{key}");
    }
    for key in ["{pc}:value:c2", "{pc}:permits:c2"] {
        assert_eq!(pexpiretime(&mut con, key), -1, "{key}");
    }
    // PERSIST with the client clears exactly those.
    assert_eq!(int(&mut con, "RATELIMIT.PERSIST pc CLIENT c1"), 1);
    for key in ["pc", "{pc}:value:c1", "{pc}:permits:c1"] {
        assert_eq!(pexpiretime(&mut con, key), -1, "{key}");
    }
    // Without CLIENT, only the hash and the OVERALL keys are covered: c2's TTL stays.
    assert_eq!(int(&mut con, "RATELIMIT.EXPIRE pc 50000 CLIENT c2"), 1);
    assert_eq!(
        int(&mut con, "RATELIMIT.PERSIST pc"),
        1,
        "the hash had a TTL"
    );
    assert_eq!(pexpiretime(&mut con, "pc"), -1);
    for key in ["{pc}:value:c2", "{pc}:permits:c2"] {
        assert!(pexpiretime(&mut con, key) > 0, "{key}");
    }
    assert_eq!(int(&mut con, "RATELIMIT.PERSIST pc"), 0);
}

/// Sets the expiry of each of the API keys: Some(ms from the server's now) or None = persistent.
fn set_expiries(con: &mut Connection, now: i64, ttls: [Option<i64>; 3]) {
    for (key, ttl) in API_KEYS.iter().zip(ttls) {
        match ttl {
            Some(ms) => assert_eq!(int(con, &format!("PEXPIREAT {key} {}", now + ms)), 1),
            None => {
                int(con, &format!("PERSIST {key}"));
            }
        }
    }
}

fn expiries(con: &mut Connection) -> [i64; 3] {
    API_KEYS.map(|key| pexpiretime(con, key))
}

#[test]
fn expire_conditions_are_checked_per_key_like_pexpire() {
    let server = Server::start();
    let mut con = server.conn();
    api_limiter(&mut con);
    let now = server_ms(&mut con);
    let near = |at: i64, ttl: i64| (now + ttl..=now + ttl + 10_000).contains(&at);

    // NX: only the keys without a TTL get one.
    set_expiries(&mut con, now, [Some(100_000), None, None]);
    assert_eq!(int(&mut con, "RATELIMIT.EXPIRE api 50000 NX"), 1);
    let [h, v, p] = expiries(&mut con);
    assert_eq!(h, now + 100_000);
    assert!(near(v, 50_000) && v == p, "{v} {p}");
    let before = snapshot(&mut con);
    assert_eq!(int(&mut con, "RATELIMIT.EXPIRE api 70000 nx"), 0);
    assert_eq!(snapshot(&mut con), before);

    // XX: only the keys that have one.
    set_expiries(&mut con, now, [Some(100_000), None, None]);
    assert_eq!(int(&mut con, "RATELIMIT.EXPIRE api 50000 XX"), 1);
    let [h, v, p] = expiries(&mut con);
    assert!(near(h, 50_000), "{h}");
    assert_eq!((v, p), (-1, -1));
    set_expiries(&mut con, now, [None, None, None]);
    assert_eq!(int(&mut con, "RATELIMIT.EXPIRE api 50000 XX"), 0);
    assert_eq!(expiries(&mut con), [-1, -1, -1]);

    // GT: only where the new expiry is later; a persistent key counts as infinite.
    set_expiries(&mut con, now, [Some(100_000), Some(10_000), None]);
    assert_eq!(int(&mut con, "RATELIMIT.EXPIRE api 50000 GT"), 1);
    let [h, v, p] = expiries(&mut con);
    assert_eq!(h, now + 100_000);
    assert!(near(v, 50_000), "{v}");
    assert_eq!(p, -1);
    let before = snapshot(&mut con);
    assert_eq!(int(&mut con, "RATELIMIT.EXPIRE api 5000 GT"), 0);
    assert_eq!(snapshot(&mut con), before);

    // LT: only where the new expiry is sooner; a persistent key always qualifies.
    set_expiries(&mut con, now, [Some(100_000), Some(10_000), None]);
    assert_eq!(int(&mut con, "RATELIMIT.EXPIRE api 50000 LT"), 1);
    let [h, v, p] = expiries(&mut con);
    assert!(near(h, 50_000) && h == p, "{h} {p}");
    assert_eq!(v, now + 10_000);

    // XX with LT: a persistent key is skipped.
    set_expiries(&mut con, now, [Some(100_000), Some(10_000), None]);
    assert_eq!(int(&mut con, "RATELIMIT.EXPIRE api 50000 XX LT"), 1);
    let [h, v, p] = expiries(&mut con);
    assert!(near(h, 50_000), "{h}");
    assert_eq!((v, p), (now + 10_000, -1));
}

#[test]
fn expire_with_a_non_positive_time_deletes() {
    let server = Server::start();
    let mut con = server.conn();
    api_limiter(&mut con);
    assert_eq!(int(&mut con, "RATELIMIT.EXPIRE api 0"), 1);
    assert!(snapshot(&mut con).is_empty());
    assert_eq!(int(&mut con, "RATELIMIT.EXPIRE api 0"), 0);

    api_limiter(&mut con);
    assert_eq!(int(&mut con, "RATELIMIT.EXPIRE api -1000"), 1);
    assert!(snapshot(&mut con).is_empty());

    // With a condition, only the keys it allows are deleted.
    api_limiter(&mut con);
    let now = server_ms(&mut con);
    set_expiries(&mut con, now, [Some(100_000), None, None]);
    assert_eq!(int(&mut con, "RATELIMIT.EXPIRE api 0 NX"), 1);
    assert!(exists(&mut con, "api"));
    assert!(!exists(&mut con, "{api}:value"));
    assert!(!exists(&mut con, "{api}:permits"));
}

#[test]
fn persist_removes_every_ttl_and_replies_like_persist() {
    let server = Server::start();
    let mut con = server.conn();
    api_limiter(&mut con);
    assert_eq!(int(&mut con, "RATELIMIT.PERSIST api"), 0, "no TTL yet");
    let now = server_ms(&mut con);
    set_expiries(&mut con, now, [None, Some(50_000), None]);
    assert_eq!(int(&mut con, "RATELIMIT.PERSIST api"), 1);
    assert_eq!(expiries(&mut con), [-1, -1, -1]);
    assert_eq!(int(&mut con, "RATELIMIT.EXPIRE api 50000"), 1);
    assert_eq!(int(&mut con, "RATELIMIT.PERSIST api"), 1);
    assert_eq!(expiries(&mut con), [-1, -1, -1]);
    assert_eq!(int(&mut con, "RATELIMIT.PERSIST api"), 0);
    assert_eq!(int(&mut con, "RATELIMIT.PERSIST nope"), 0);
    // The state survived all of it.
    assert_eq!(int(&mut con, "RATELIMIT.AVAILABLE api"), 3);
}

#[test]
fn without_debug_commands_the_debug_command_does_not_exist() {
    for args in [
        &[][..],
        &["debug-commands", "no"],
        &["DEBUG-COMMANDS", "NO"],
    ] {
        let server = Server::start_with(args, &[]);
        let mut con = server.conn();
        for text in [
            "RATELIMIT.DEBUG SETCLOCK 1767225600000",
            "RATELIMIT.DEBUG REALCLOCK",
            "RATELIMIT.DEBUG",
        ] {
            let err = error_of(&mut con, text);
            assert!(
                err.starts_with("ERR unknown command"),
                "{args:?} `{text}`: {err}"
            );
        }
        let info: Vec<Value> = line(&mut con, "COMMAND INFO RATELIMIT.DEBUG").unwrap();
        assert_eq!(info, vec![Value::Nil], "{args:?}");
        // The rest of the module is there.
        assert_eq!(int(&mut con, "RATELIMIT.SETRATE api 1 1000"), 1);
    }
}

fn unix_ms_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

#[test]
fn debug_clock_setclock_advance_realclock() {
    let server = Server::start();
    let mut con = server.conn();
    assert_eq!(int(&mut con, "RATELIMIT.SETRATE api 100 3153600000000"), 1);
    let ok: String = line(&mut con, &format!("RATELIMIT.DEBUG SETCLOCK {T0}")).unwrap();
    assert_eq!(ok, "OK");
    assert_eq!(try_acquire(&mut con, "api", 1), None);
    assert_eq!(int(&mut con, "RATELIMIT.DEBUG ADVANCE 5"), T0 + 5);
    assert_eq!(int(&mut con, "RATELIMIT.DEBUG advance 0"), T0 + 5);
    assert_eq!(try_acquire(&mut con, "api", 1), None);
    let ok: String = line(&mut con, "RATELIMIT.DEBUG realclock").unwrap();
    assert_eq!(ok, "OK");
    let before = unix_ms_now();
    assert_eq!(try_acquire(&mut con, "api", 1), None);
    let after = unix_ms_now();
    let scores: Vec<i64> = log_entries(&mut con, "{api}:permits")
        .iter()
        .map(|(_, s)| *s)
        .collect();
    assert_eq!(scores[..2], [T0, T0 + 5]);
    assert!(
        (before - 1000..=after + 1000).contains(&scores[2]),
        "real clock score {} not near [{before}, {after}]",
        scores[2]
    );
    // ADVANCE needs a frozen clock.
    let err = error_of(&mut con, "RATELIMIT.DEBUG ADVANCE 5");
    assert!(err.starts_with("ERR "), "{err}");
    assert!(err.contains("not frozen"), "{err}");
    // Bad arguments are errors, not crashes.
    for text in [
        "RATELIMIT.DEBUG SETCLOCK -1",
        "RATELIMIT.DEBUG SETCLOCK abc",
        "RATELIMIT.DEBUG SETCLOCK 9007199254740992",
        "RATELIMIT.DEBUG SETCLOCK",
        "RATELIMIT.DEBUG ADVANCE -1",
        "RATELIMIT.DEBUG REALCLOCK now",
        "RATELIMIT.DEBUG WARP 5",
    ] {
        let err = error_of(&mut con, text);
        assert!(err.starts_with("ERR "), "`{text}`: {err}");
    }
    // The clock is frozen again and stays put until moved.
    set_clock(&mut con, T0 + 10_000);
    assert_eq!(int(&mut con, "RATELIMIT.DEBUG ADVANCE 1"), T0 + 10_001);
}

#[test]
fn an_unknown_load_option_keeps_the_server_from_starting() {
    for args in [
        &["verbose", "yes"][..],
        &["debug-commands", "maybe"],
        &["debug-commands"],
        &["debug-commands", "yes", "extra"],
    ] {
        let started = panic::catch_unwind(|| Server::start_with(args, &[]));
        match started {
            Ok(_) => panic!("redis-server started with load options {args:?}"),
            Err(payload) => {
                let message = payload
                    .downcast_ref::<String>()
                    .cloned()
                    .unwrap_or_default();
                assert!(
                    message.contains("redis-server did not start"),
                    "{args:?}: {message}"
                );
                assert!(message.contains("ratelimit"), "{args:?}: log {message}");
            }
        }
    }
}
