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
