//! PER_CLIENT limiters against a real server: one state and one budget per client id, CLIENT
//! required for PER_CLIENT and ignored for OVERALL, SETRATE acting on the named client only, and
//! exact multi-permit wait hints (per client and overall).

use crate::common::*;

fn acquire_as(con: &mut Connection, key: &str, permits: u32, client: &str) -> Option<i64> {
    line(
        con,
        &format!("RATELIMIT.TRYACQUIRE {key} {permits} CLIENT {client}"),
    )
    .expect("TRYACQUIRE")
}

#[test]
fn each_client_has_its_own_keys_and_budget() {
    let server = Server::start();
    let mut con = server.conn();
    set_clock(&mut con, T0);
    let _: i64 = line(&mut con, "RATELIMIT.SETRATE api 2 1000 PER_CLIENT").unwrap();
    let uuid = "6f1c2b9e-0d4a-4c3e-9a57-2f0b8d1e7c44";
    assert_eq!(acquire_as(&mut con, "api", 2, "a"), None);
    assert_eq!(acquire_as(&mut con, "api", 1, "a"), Some(1000));
    advance(&mut con, 100);
    // Client a's exhausted budget does not affect client b.
    assert_eq!(acquire_as(&mut con, "api", 1, uuid), None);
    assert_eq!(acquire_as(&mut con, "api", 1, uuid), None);
    assert_eq!(acquire_as(&mut con, "api", 1, uuid), Some(1000));
    assert_eq!(acquire_as(&mut con, "api", 1, "a"), Some(900));

    assert_eq!(get(&mut con, "{api}:value:a").as_deref(), Some("0"));
    let log_a = log_entries(&mut con, "{api}:permits:a");
    assert_eq!(log_a.len(), 1);
    assert_eq!((member_permits(&log_a[0].0), log_a[0].1), (2, T0));
    assert_eq!(
        get(&mut con, &format!("{{api}}:value:{uuid}")).as_deref(),
        Some("0")
    );
    let log_b = log_entries(&mut con, &format!("{{api}}:permits:{uuid}"));
    // Two grants of the same millisecond share one entry.
    let entries: Vec<(u32, i64)> = log_b.iter().map(|(m, s)| (member_permits(m), *s)).collect();
    assert_eq!(entries, vec![(2, T0 + 100)]);
    assert!(!exists(&mut con, "{api}:value"), "no OVERALL state");
    assert!(!exists(&mut con, "{api}:permits"), "no OVERALL state");

    let available: i64 = line(&mut con, "RATELIMIT.AVAILABLE api CLIENT a").unwrap();
    assert_eq!(available, 0);
    let available: i64 = line(&mut con, "RATELIMIT.AVAILABLE api CLIENT fresh").unwrap();
    assert_eq!(available, 2, "an unknown client has the whole budget");
    advance(&mut con, 900);
    let available: i64 = line(&mut con, "RATELIMIT.AVAILABLE api CLIENT a").unwrap();
    assert_eq!(available, 2, "a's entry expired at T0+1000");
    let available: i64 = line(&mut con, &format!("RATELIMIT.AVAILABLE api CLIENT {uuid}")).unwrap();
    assert_eq!(available, 0, "b's entries expire at T0+1100");

    // RELEASE gives back to the named client only.
    let released: i64 = line(&mut con, &format!("RATELIMIT.RELEASE api 1 CLIENT {uuid}")).unwrap();
    assert_eq!(released, 1);
    let available: i64 = line(&mut con, &format!("RATELIMIT.AVAILABLE api CLIENT {uuid}")).unwrap();
    assert_eq!(available, 1);
    assert_eq!(
        log_entries(&mut con, &format!("{{api}}:permits:{uuid}")).len(),
        1
    );
}

#[test]
fn per_client_limiter_without_client_is_an_error_and_writes_nothing() {
    let server = Server::start();
    let mut con = server.conn();
    set_clock(&mut con, T0);
    let _: i64 = line(&mut con, "RATELIMIT.SETRATE api 5 1000 PER_CLIENT").unwrap();
    assert_eq!(acquire_as(&mut con, "api", 2, "a"), None);
    let before = snapshot(&mut con);
    for cmd in [
        "RATELIMIT.TRYACQUIRE api",
        "RATELIMIT.TRYACQUIRE api 1",
        "RATELIMIT.AVAILABLE api",
        "RATELIMIT.RELEASE api 1",
    ] {
        let err = error_of(&mut con, cmd);
        assert!(
            err.starts_with("ERR ") && err.contains("CLIENT"),
            "{cmd}: {err}"
        );
        assert_eq!(snapshot(&mut con), before, "{cmd} wrote something");
    }
}

#[test]
fn client_is_ignored_for_overall_limiters() {
    let server = Server::start();
    let mut con = server.conn();
    set_clock(&mut con, T0);
    let _: i64 = line(&mut con, "RATELIMIT.SETRATE api 3 1000").unwrap();
    assert_eq!(acquire_as(&mut con, "api", 1, "a"), None);
    assert_eq!(acquire_as(&mut con, "api", 1, "b"), None);
    assert_eq!(try_acquire(&mut con, "api", 1), None);
    // One shared budget.
    assert_eq!(acquire_as(&mut con, "api", 1, "c"), Some(1000));
    assert_eq!(try_acquire(&mut con, "api", 1), Some(1000));
    assert_eq!(get(&mut con, "{api}:value").as_deref(), Some("0"));
    assert_eq!(logged_permits(&mut con, "{api}:permits"), 3);
    let available: i64 = line(&mut con, "RATELIMIT.AVAILABLE api CLIENT zzz").unwrap();
    assert_eq!(available, 0);
    let released: i64 = line(&mut con, "RATELIMIT.RELEASE api 1 CLIENT a").unwrap();
    assert_eq!(released, 1);
    assert_eq!(get(&mut con, "{api}:value").as_deref(), Some("1"));
    assert_eq!(logged_permits(&mut con, "{api}:permits"), 2);
    let mut keys: Vec<String> = line(&mut con, "KEYS *").unwrap();
    keys.sort();
    assert_eq!(keys, vec!["api", "{api}:permits", "{api}:value"]);
}

#[test]
fn setrate_with_client_resets_only_that_client() {
    let server = Server::start();
    let mut con = server.conn();
    set_clock(&mut con, T0);
    let _: i64 = line(&mut con, "RATELIMIT.SETRATE api 2 1000 PER_CLIENT").unwrap();
    assert_eq!(acquire_as(&mut con, "api", 2, "a"), None);
    assert_eq!(acquire_as(&mut con, "api", 2, "b"), None);
    let b_value = dump(&mut con, "{api}:value:b");
    let b_log = dump(&mut con, "{api}:permits:b");

    let reply: i64 = line(&mut con, "RATELIMIT.SETRATE api 2 1000 PER_CLIENT CLIENT a").unwrap();
    assert_eq!(reply, 1);
    assert!(!exists(&mut con, "{api}:value:a"));
    assert!(!exists(&mut con, "{api}:permits:a"));
    assert_eq!(dump(&mut con, "{api}:value:b"), b_value);
    assert_eq!(dump(&mut con, "{api}:permits:b"), b_log);
    assert_eq!(acquire_as(&mut con, "api", 2, "a"), None, "a starts over");
    assert_eq!(
        acquire_as(&mut con, "api", 1, "b"),
        Some(1000),
        "b does not"
    );
}

#[test]
fn setrate_keepstate_with_client_recomputes_only_that_client() {
    let server = Server::start();
    let mut con = server.conn();
    set_clock(&mut con, T0);
    let _: i64 = line(&mut con, "RATELIMIT.SETRATE api 3 1000 PER_CLIENT").unwrap();
    assert_eq!(acquire_as(&mut con, "api", 2, "a"), None);
    assert_eq!(acquire_as(&mut con, "api", 3, "b"), None);
    let b_value = dump(&mut con, "{api}:value:b");
    let b_log = dump(&mut con, "{api}:permits:b");
    advance(&mut con, 10);

    let reply: i64 = line(
        &mut con,
        "RATELIMIT.SETRATE api 10 1000 PER_CLIENT KEEPSTATE CLIENT a",
    )
    .unwrap();
    assert_eq!(reply, 1);
    assert_eq!(get(&mut con, "{api}:value:a").as_deref(), Some("8"));
    assert_eq!(log_entries(&mut con, "{api}:permits:a").len(), 1);
    // b's value is stale (0 under the old rate) but untouched; the log-based refill still works.
    assert_eq!(dump(&mut con, "{api}:value:b"), b_value);
    assert_eq!(dump(&mut con, "{api}:permits:b"), b_log);
    assert_eq!(acquire_as(&mut con, "api", 8, "a"), None);
    assert_eq!(acquire_as(&mut con, "api", 1, "a"), Some(990));
}

/// Builds log entries of different sizes at different times on `key` (as `client`, if any):
/// rate 10 per 1000 ms; 3 at T0, 2 at T0+100, 4 at T0+250; the clock ends at T0+400 with 1
/// permit available.
fn build_mixed_log(con: &mut Connection, key: &str, client: Option<&str>) {
    let suffix = client.map(|c| format!(" CLIENT {c}")).unwrap_or_default();
    for (at, permits) in [(T0, 3), (T0 + 100, 2), (T0 + 250, 4)] {
        set_clock(con, at);
        let reply: Option<i64> = line(
            con,
            &format!("RATELIMIT.TRYACQUIRE {key} {permits}{suffix}"),
        )
        .unwrap();
        assert_eq!(reply, None, "{key}{suffix}: {permits} at {at}");
    }
    set_clock(con, T0 + 400);
}

/// (permits, wait from T0+400): the oldest entries whose permits, added to the 1 available,
/// reach the request, free at their score + 1000.
const HINTS: [(u32, i64); 6] = [(2, 600), (4, 600), (5, 700), (6, 700), (8, 850), (10, 850)];

#[test]
fn multi_permit_wait_hints_are_exact_per_client() {
    let server = Server::start();
    let mut con = server.conn();
    set_clock(&mut con, T0);
    let _: i64 = line(&mut con, "RATELIMIT.SETRATE api 10 1000 PER_CLIENT").unwrap();
    for (permits, _) in HINTS {
        build_mixed_log(&mut con, "api", Some(&format!("c{permits}")));
    }
    // A busy neighbour with other entries must not change anyone's hint.
    set_clock(&mut con, T0 + 50);
    assert_eq!(acquire_as(&mut con, "api", 10, "noisy"), None);
    set_clock(&mut con, T0 + 400);
    for (permits, hint) in HINTS {
        let client = format!("c{permits}");
        set_clock(&mut con, T0 + 400);
        assert_eq!(
            acquire_as(&mut con, "api", permits, &client),
            Some(hint),
            "{permits} permits"
        );
        set_clock(&mut con, T0 + 400 + hint - 1);
        assert_eq!(
            acquire_as(&mut con, "api", permits, &client),
            Some(1),
            "{permits} permits one ms early"
        );
        set_clock(&mut con, T0 + 400 + hint);
        assert_eq!(
            acquire_as(&mut con, "api", permits, &client),
            None,
            "{permits} permits at now + hint"
        );
    }
}

#[test]
fn multi_permit_wait_hints_are_exact_overall() {
    let server = Server::start();
    let mut con = server.conn();
    for (permits, _) in HINTS {
        let key = format!("api{permits}");
        let _: i64 = line(&mut con, &format!("RATELIMIT.SETRATE {key} 10 1000")).unwrap();
        build_mixed_log(&mut con, &key, None);
    }
    for (permits, hint) in HINTS {
        let key = format!("api{permits}");
        set_clock(&mut con, T0 + 400);
        assert_eq!(
            try_acquire(&mut con, &key, permits),
            Some(hint),
            "{permits} permits"
        );
        set_clock(&mut con, T0 + 400 + hint - 1);
        assert_eq!(
            try_acquire(&mut con, &key, permits),
            Some(1),
            "{permits} permits one ms early"
        );
        set_clock(&mut con, T0 + 400 + hint);
        assert_eq!(
            try_acquire(&mut con, &key, permits),
            None,
            "{permits} permits at now + hint"
        );
    }
    // After a grant the hint follows the new log: api4 took 4 at T0+1000, after the entry at T0
    // (3) expired; it now holds 2 at T0+100, 4 at T0+250, 4 at T0+1000, and 0 available.
    set_clock(&mut con, T0 + 1000);
    assert_eq!(try_acquire(&mut con, "api4", 6), Some(250));
    set_clock(&mut con, T0 + 1249);
    assert_eq!(try_acquire(&mut con, "api4", 6), Some(1));
    set_clock(&mut con, T0 + 1250);
    assert_eq!(try_acquire(&mut con, "api4", 6), None);
}
