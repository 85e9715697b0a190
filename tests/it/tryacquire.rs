//! RATELIMIT.TRYACQUIRE against a real server: grants, refusals, wait hints, the window boundary.

use crate::common::*;

#[test]
fn grants_up_to_rate_then_replies_the_wait() {
    let server = Server::start();
    let mut con = server.conn();
    set_clock(&mut con, T0);
    assert_eq!(
        line::<i64>(&mut con, "RATELIMIT.SETRATE api 3 1000").unwrap(),
        1
    );
    for _ in 0..3 {
        assert_eq!(try_acquire(&mut con, "api", 1), None);
    }
    assert_eq!(try_acquire(&mut con, "api", 1), Some(1000));
    advance(&mut con, 250);
    assert_eq!(try_acquire(&mut con, "api", 1), Some(750));
    let value: String = line(&mut con, "GET {api}:value").unwrap();
    assert_eq!(value, "0");
    // The three grants of T0 share one entry (PRECISION 1 merges the same millisecond).
    let log = log_entries(&mut con, "{api}:permits");
    assert_eq!(log.len(), 1);
    assert_eq!((member_permits(&log[0].0), log[0].1), (3, T0));
}

#[test]
fn an_entry_is_free_again_at_exactly_t_plus_interval() {
    let server = Server::start();
    let mut con = server.conn();
    set_clock(&mut con, T0);
    line::<i64>(&mut con, "RATELIMIT.SETRATE api 1 1000").unwrap();
    assert_eq!(try_acquire(&mut con, "api", 1), None);
    advance(&mut con, 999);
    assert_eq!(try_acquire(&mut con, "api", 1), Some(1));
    advance(&mut con, 1);
    assert_eq!(try_acquire(&mut con, "api", 1), None);
    let entries = log_entries(&mut con, "{api}:permits");
    assert_eq!(entries.len(), 1, "the expired entry was pruned");
    assert_eq!(entries[0].1, T0 + 1000);
}

#[test]
fn members_are_21_bytes_with_le_permits_and_decode_in_lua() {
    let server = Server::start();
    let mut con = server.conn();
    set_clock(&mut con, T0);
    line::<i64>(&mut con, "RATELIMIT.SETRATE api 100000 1000").unwrap();
    assert_eq!(try_acquire(&mut con, "api", 70000), None);
    let entries = log_entries(&mut con, "{api}:permits");
    let (member, score) = &entries[0];
    assert_eq!(member.len(), 21);
    assert_eq!(member[0], 0x10);
    assert_eq!(&member[17..], &70000u32.to_le_bytes());
    assert_eq!(*score, T0);
    // Redisson's own decoder, run by Redis's Lua.
    let decoded: Vec<i64> = redis::cmd("EVAL")
        .arg("local id, p = struct.unpack('Bc0I', redis.call('zrange', KEYS[1], 0, 0)[1]); return {string.len(id), p}")
        .arg(1)
        .arg("{api}:permits")
        .query(&mut con)
        .unwrap();
    assert_eq!(decoded, vec![16, 70000]);
}

#[test]
fn a_replica_without_the_module_ends_up_identical() {
    let master = Server::start();
    let plain = Server::start_replica(&master, false);
    let mut con = master.conn();
    set_clock(&mut con, T0);
    line::<i64>(&mut con, "RATELIMIT.SETRATE api 3 1000 KEEPALIVE 60000").unwrap();
    for _ in 0..5 {
        try_acquire(&mut con, "api", 1);
        advance(&mut con, 400);
    }
    wait_replicas(&mut con, 1);
    let on_master = snapshot(&mut con);
    assert_eq!(on_master.len(), 3);
    assert_eq!(snapshot(&mut plain.conn()), on_master);
}

#[test]
fn available_and_tryacquire_agree_when_the_log_is_empty() {
    // A client's value left at 4 after its log emptied, then the rate raised without CLIENT:
    // with no live entry nothing is in use, so both see the new rate of 6.
    let server = Server::start();
    let mut con = server.conn();
    set_clock(&mut con, T0);
    line::<i64>(&mut con, "RATELIMIT.SETRATE pc 4 1000 PER_CLIENT").unwrap();
    assert_eq!(
        line::<Option<i64>>(&mut con, "RATELIMIT.TRYACQUIRE pc 1 CLIENT c1").unwrap(),
        None
    );
    assert_eq!(
        line::<i64>(&mut con, "RATELIMIT.RELEASE pc 1 CLIENT c1").unwrap(),
        1
    );
    line::<i64>(&mut con, "RATELIMIT.SETRATE pc 6 3000 PER_CLIENT XX").unwrap();
    let value: String = line(&mut con, "GET {pc}:value:c1").unwrap();
    assert_eq!(value, "4", "the stale value is still stored");
    assert_eq!(
        line::<i64>(&mut con, "RATELIMIT.AVAILABLE pc CLIENT c1").unwrap(),
        6
    );
    assert_eq!(
        line::<Option<i64>>(&mut con, "RATELIMIT.TRYACQUIRE pc 5 CLIENT c1").unwrap(),
        None
    );
    assert_eq!(
        line::<i64>(&mut con, "RATELIMIT.AVAILABLE pc CLIENT c1").unwrap(),
        1
    );
    // A stale value with live entries is not trusted past the log: 0 available, 1 logged,
    // rate 6 asks for 3: it fits once the log is empty, at T0 + 3000.
    let _: String = line(&mut con, "SET {pc}:value:c1 0").unwrap();
    assert_eq!(
        line::<i64>(&mut con, "RATELIMIT.AVAILABLE pc CLIENT c1").unwrap(),
        0
    );
    assert_eq!(
        line::<Option<i64>>(&mut con, "RATELIMIT.TRYACQUIRE pc 3 CLIENT c1").unwrap(),
        Some(3000)
    );
}
