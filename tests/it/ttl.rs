//! The TTL rule of TRYACQUIRE, granted and refused: keepAliveTime > 0 refreshes the hash, value
//! and log; keepAliveTime 0 copies the hash's expiry onto value and log; no TTL means none.
//! Key TTLs run on the server's real clock, so relative TTLs are checked as ranges and copied
//! expiries as exact PEXPIRETIME equality.

use crate::common::*;

fn expire_time(con: &mut Connection, key: &str) -> i64 {
    line(con, &format!("PEXPIRETIME {key}")).expect("PEXPIRETIME")
}

fn shorten(con: &mut Connection, keys: &[&str], ms: i64) {
    for key in keys {
        let set: i64 = line(con, &format!("PEXPIRE {key} {ms}")).expect("PEXPIRE");
        assert_eq!(set, 1, "{key} exists");
    }
}

fn assert_ttl_near(con: &mut Connection, keys: &[&str], ms: i64) {
    for key in keys {
        let ttl = pttl(con, key);
        assert!(
            (ms - 5_000..=ms).contains(&ttl),
            "{key}: PTTL {ttl}, expected about {ms}"
        );
    }
}

const OVERALL_KEYS: [&str; 3] = ["api", "{api}:value", "{api}:permits"];

#[test]
fn keepalive_refreshes_hash_value_and_log_on_a_grant() {
    let server = Server::start();
    let mut con = server.conn();
    set_clock(&mut con, T0);
    let _: i64 = line(&mut con, "RATELIMIT.SETRATE api 5 1000 KEEPALIVE 600000").unwrap();
    assert_eq!(try_acquire(&mut con, "api", 1), None);
    assert_ttl_near(&mut con, &OVERALL_KEYS, 600_000);
    // Shorten every TTL; the next grant refreshes all three.
    shorten(&mut con, &OVERALL_KEYS, 20_000);
    advance(&mut con, 10);
    assert_eq!(try_acquire(&mut con, "api", 1), None);
    assert_ttl_near(&mut con, &OVERALL_KEYS, 600_000);
}

#[test]
fn keepalive_refreshes_hash_value_and_log_on_a_refusal() {
    let server = Server::start();
    let mut con = server.conn();
    set_clock(&mut con, T0);
    let _: i64 = line(&mut con, "RATELIMIT.SETRATE api 1 1000 KEEPALIVE 600000").unwrap();
    assert_eq!(try_acquire(&mut con, "api", 1), None);
    shorten(&mut con, &OVERALL_KEYS, 20_000);
    advance(&mut con, 10);
    // A refusal that changes nothing else still applies the rule.
    assert_eq!(try_acquire(&mut con, "api", 1), Some(990));
    assert_ttl_near(&mut con, &OVERALL_KEYS, 600_000);
}

#[test]
fn without_keepalive_the_hash_expiry_is_copied_on_grant_and_refusal() {
    let server = Server::start();
    let mut con = server.conn();
    set_clock(&mut con, T0);
    let _: i64 = line(&mut con, "RATELIMIT.SETRATE api 2 1000").unwrap();
    let at = server_ms(&mut con) + 300_000;
    let _: i64 = line(&mut con, &format!("PEXPIREAT api {at}")).unwrap();
    assert_eq!(try_acquire(&mut con, "api", 2), None);
    for key in OVERALL_KEYS {
        assert_eq!(expire_time(&mut con, key), at, "{key} after a grant");
    }
    // Move the hash's expiry; a refusal copies the new one.
    let later = at + 123_457;
    let _: i64 = line(&mut con, &format!("PEXPIREAT api {later}")).unwrap();
    advance(&mut con, 1);
    assert_eq!(try_acquire(&mut con, "api", 1), Some(999));
    for key in OVERALL_KEYS {
        assert_eq!(expire_time(&mut con, key), later, "{key} after a refusal");
    }
}

#[test]
fn no_ttl_anywhere_leaves_none() {
    let server = Server::start();
    let mut con = server.conn();
    set_clock(&mut con, T0);
    let _: i64 = line(&mut con, "RATELIMIT.SETRATE api 1 1000").unwrap();
    assert_eq!(try_acquire(&mut con, "api", 1), None);
    for key in OVERALL_KEYS {
        assert_eq!(pttl(&mut con, key), -1, "{key} after a grant");
    }
    advance(&mut con, 1);
    assert_eq!(try_acquire(&mut con, "api", 1), Some(999));
    for key in OVERALL_KEYS {
        assert_eq!(pttl(&mut con, key), -1, "{key} after a refusal");
    }
    // An entry expiring and a new grant (prune + rewrite) still sets no TTL.
    advance(&mut con, 999);
    assert_eq!(try_acquire(&mut con, "api", 1), None);
    for key in OVERALL_KEYS {
        assert_eq!(pttl(&mut con, key), -1, "{key} after a refill");
    }
}

#[test]
fn keepalive_applies_to_the_named_clients_keys() {
    let server = Server::start();
    let mut con = server.conn();
    set_clock(&mut con, T0);
    let _: i64 = line(
        &mut con,
        "RATELIMIT.SETRATE api 1 1000 PER_CLIENT KEEPALIVE 600000",
    )
    .unwrap();
    let acquired: Option<i64> = line(&mut con, "RATELIMIT.TRYACQUIRE api 1 CLIENT b").unwrap();
    assert_eq!(acquired, None);
    let b_before = (
        expire_time(&mut con, "{api}:value:b"),
        expire_time(&mut con, "{api}:permits:b"),
    );
    shorten(&mut con, &["api"], 20_000);
    let a_keys = ["api", "{api}:value:a", "{api}:permits:a"];
    let acquired: Option<i64> = line(&mut con, "RATELIMIT.TRYACQUIRE api 1 CLIENT a").unwrap();
    assert_eq!(acquired, None);
    assert_ttl_near(&mut con, &a_keys, 600_000);
    shorten(&mut con, &a_keys, 20_000);
    let refused: Option<i64> = line(&mut con, "RATELIMIT.TRYACQUIRE api 1 CLIENT a").unwrap();
    assert_eq!(refused, Some(1000));
    assert_ttl_near(&mut con, &a_keys, 600_000);
    // Client b's keys were not touched by a's calls.
    assert_eq!(
        (
            expire_time(&mut con, "{api}:value:b"),
            expire_time(&mut con, "{api}:permits:b"),
        ),
        b_before
    );
}

#[test]
fn without_keepalive_the_hash_expiry_is_copied_to_the_clients_keys() {
    let server = Server::start();
    let mut con = server.conn();
    set_clock(&mut con, T0);
    let _: i64 = line(&mut con, "RATELIMIT.SETRATE api 1 1000 PER_CLIENT").unwrap();
    let at = server_ms(&mut con) + 400_000;
    let _: i64 = line(&mut con, &format!("PEXPIREAT api {at}")).unwrap();
    let acquired: Option<i64> = line(&mut con, "RATELIMIT.TRYACQUIRE api 1 CLIENT a").unwrap();
    assert_eq!(acquired, None);
    for key in ["api", "{api}:value:a", "{api}:permits:a"] {
        assert_eq!(expire_time(&mut con, key), at, "{key}");
    }
    let refused: Option<i64> = line(&mut con, "RATELIMIT.TRYACQUIRE api 1 CLIENT a").unwrap();
    assert_eq!(refused, Some(1000));
    for key in ["{api}:value:a", "{api}:permits:a"] {
        assert_eq!(expire_time(&mut con, key), at, "{key} after a refusal");
    }
    assert_eq!(expire_time(&mut con, "{api}:value"), -2, "no OVERALL keys");
}

/// Found by the random commands (random_commands.rs, planted `keepAliveTime 9223372036854775807`): a keep-alive read from
/// a hash someone else wrote is handed to Redis unchecked, `now + ms` overflows in the server,
/// and the limiter's keys get an expiry in the past (PEXPIRETIME 0): the limiter vanishes
/// right after a granted acquisition. Such a field must be refused as corrupt (nothing written)
/// or clamped to an expiry in the future.
#[test]
fn a_keepalive_beyond_the_clock_in_a_foreign_hash_does_not_destroy_the_limiter() {
    let mut server = Server::start();
    let mut con = server.conn();
    con.set_read_timeout(Some(HANG)).unwrap();
    set_clock(&mut con, T0);
    for (name, keep_alive) in [
        // The expiry fits: now + ms is below i64::MAX.
        ("ka0", "9223370000000000000"),
        // It does not.
        ("ka1", "9223372036854775807"),
        ("ka2", "9223372036854000000"),
    ] {
        let _: i64 = line(
            &mut con,
            &format!("HSET {name} rate 5 interval 1000 type 0 keepAliveTime {keep_alive}"),
        )
        .unwrap();
        for command in [
            format!("RATELIMIT.TRYACQUIRE {name} 2"),
            format!("RATELIMIT.RELEASE {name} 1"),
            format!("RATELIMIT.ACQUIRE {name} 1 TIMEOUT 10"),
        ] {
            let before = snapshot(&mut con);
            match line::<Value>(&mut con, &command) {
                Err(e) => {
                    let err = error_line(&e);
                    assert!(
                        err.starts_with(&format!("ERR corrupt rate limiter key '{name}'")),
                        "`{command}`: {err}"
                    );
                    assert_eq!(snapshot(&mut con), before, "`{command}` failed but wrote");
                }
                Ok(reply) => {
                    let (secs, _): (i64, i64) = redis::cmd("TIME").query(&mut con).unwrap();
                    let value = format!("{{{name}}}:value");
                    let permits = format!("{{{name}}}:permits");
                    for key in [name, value.as_str(), permits.as_str()] {
                        let at: i64 = redis::cmd("PEXPIRETIME").arg(key).query(&mut con).unwrap();
                        assert!(
                            at == -1 || at > secs * 1000,
                            "keepAliveTime {keep_alive}: `{command}` replied {reply:?} and \
                             left {key} with PEXPIRETIME {at} (now {}000)",
                            secs
                        );
                    }
                    let exists: i64 =
                        line(&mut con, &format!("EXISTS {name} {value} {permits}")).unwrap();
                    assert_eq!(exists, 3, "`{command}` replied {reply:?}; keys gone");
                }
            }
        }
    }
    assert!(server.is_alive());
}
