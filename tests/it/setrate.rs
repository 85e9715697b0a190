//! RATELIMIT.SETRATE against a real server: the hash it writes, NX (trySetRate), XX (updateRate),
//! the state reset, KEEPSTATE, and mode switches between OVERALL and PER_CLIENT.

use std::collections::HashMap;

use crate::common::*;

/// The limiter hash as field -> value.
fn fields(con: &mut Connection, key: &str) -> HashMap<String, String> {
    line(con, &format!("HGETALL {key}")).expect("HGETALL")
}

/// The expected hash, from (field, value) pairs.
fn expect(pairs: &[(&str, &str)]) -> HashMap<String, String> {
    pairs
        .iter()
        .map(|(f, v)| (f.to_string(), v.to_string()))
        .collect()
}

/// A permit-log member as the keyspace contract encodes it: 0x10, a 16-byte id, u32 LE permits.
fn member(id: u8, permits: u32) -> Vec<u8> {
    let mut m = vec![0x10];
    m.extend_from_slice(&[id; 16]);
    m.extend_from_slice(&permits.to_le_bytes());
    m
}

/// Plants a value and a one-entry log under the given key names, as another writer would.
fn plant_state(con: &mut Connection, value_key: &str, permits_key: &str, score: i64) {
    let _: () = redis::cmd("SET")
        .arg(value_key)
        .arg("1")
        .query(con)
        .expect("SET");
    let _: i64 = redis::cmd("ZADD")
        .arg(permits_key)
        .arg(score)
        .arg(member(7, 2))
        .query(con)
        .expect("ZADD");
}

fn setrate(con: &mut Connection, args: &str) -> i64 {
    line(con, &format!("RATELIMIT.SETRATE {args}")).expect("SETRATE")
}

// ---- no flag (Redisson setRate) --------------------------------------------------------------

#[test]
fn setrate_writes_exactly_the_four_fields_as_decimal_strings() {
    let server = Server::start();
    let mut con = server.conn();
    assert_eq!(setrate(&mut con, "api 10 1000"), 1);
    assert_eq!(
        fields(&mut con, "api"),
        expect(&[
            ("rate", "10"),
            ("interval", "1000"),
            ("type", "0"),
            ("keepAliveTime", "0")
        ])
    );
    assert_eq!(pttl(&mut con, "api"), -1, "no KEEPALIVE: no TTL");

    assert_eq!(
        setrate(
            &mut con,
            "pc 4294967295 86400000 per_client KEEPALIVE 90000000"
        ),
        1
    );
    assert_eq!(
        fields(&mut con, "pc"),
        expect(&[
            ("rate", "4294967295"),
            ("interval", "86400000"),
            ("type", "1"),
            ("keepAliveTime", "90000000")
        ])
    );
    // Setting a rate creates no state keys.
    let keys: Vec<String> = line(&mut con, "KEYS *").unwrap();
    let mut keys = keys;
    keys.sort();
    assert_eq!(keys, vec!["api".to_string(), "pc".to_string()]);
}

#[test]
fn setrate_overwrites_every_field_of_an_existing_limiter() {
    let server = Server::start();
    let mut con = server.conn();
    assert_eq!(
        setrate(&mut con, "api 10 1000 PER_CLIENT KEEPALIVE 5000"),
        1
    );
    assert_eq!(setrate(&mut con, "api 3 200"), 1);
    assert_eq!(
        fields(&mut con, "api"),
        expect(&[
            ("rate", "3"),
            ("interval", "200"),
            ("type", "0"),
            ("keepAliveTime", "0")
        ])
    );
}

#[test]
fn setrate_resets_the_overall_state() {
    let server = Server::start();
    let mut con = server.conn();
    set_clock(&mut con, T0);
    setrate(&mut con, "api 3 1000");
    assert_eq!(try_acquire(&mut con, "api", 3), None);
    assert!(exists(&mut con, "{api}:value"));
    assert_eq!(log_entries(&mut con, "{api}:permits").len(), 1);
    assert_eq!(try_acquire(&mut con, "api", 1), Some(1000));

    assert_eq!(setrate(&mut con, "api 3 1000"), 1);
    assert!(!exists(&mut con, "{api}:value"), "value deleted");
    assert!(!exists(&mut con, "{api}:permits"), "log deleted");
    // The whole budget is back at the same instant.
    assert_eq!(try_acquire(&mut con, "api", 3), None);
}

#[test]
fn keepalive_sets_the_hash_ttl() {
    let server = Server::start();
    let mut con = server.conn();
    assert_eq!(setrate(&mut con, "api 10 1000 keepalive 60000"), 1);
    let ttl = pttl(&mut con, "api");
    assert!((55_000..=60_000).contains(&ttl), "PTTL {ttl}");
    assert_eq!(fields(&mut con, "api")["keepAliveTime"], "60000");
    // A later setRate with another KEEPALIVE replaces the TTL.
    assert_eq!(setrate(&mut con, "api 10 1000 KEEPALIVE 7200000"), 1);
    let ttl = pttl(&mut con, "api");
    assert!((7_100_000..=7_200_000).contains(&ttl), "PTTL {ttl}");
}

// ---- NX (Redisson trySetRate) ----------------------------------------------------------------

#[test]
fn nx_creates_a_missing_limiter_and_replies_1() {
    let server = Server::start();
    let mut con = server.conn();
    assert_eq!(
        setrate(&mut con, "api 5 1000 PER_CLIENT KEEPALIVE 30000 NX"),
        1
    );
    assert_eq!(
        fields(&mut con, "api"),
        expect(&[
            ("rate", "5"),
            ("interval", "1000"),
            ("type", "1"),
            ("keepAliveTime", "30000")
        ])
    );
    let ttl = pttl(&mut con, "api");
    assert!(
        (25_000..=30_000).contains(&ttl),
        "created: TTL set, PTTL {ttl}"
    );

    // A second trySetRate changes nothing, not even the TTL, and replies 0.
    let before = snapshot(&mut con);
    assert_eq!(setrate(&mut con, "api 9 2000 KEEPALIVE 900000 nx"), 0);
    assert_eq!(snapshot(&mut con), before);
}

#[test]
fn nx_sets_only_the_absent_fields_and_replies_by_type() {
    let server = Server::start();
    let mut con = server.conn();
    // `type` present: not created, reply 0, the absent fields are filled, no TTL.
    let _: i64 = line(&mut con, "HSET a rate 7 type 1").unwrap();
    assert_eq!(setrate(&mut con, "a 5 2000 KEEPALIVE 3000 NX"), 0);
    assert_eq!(
        fields(&mut con, "a"),
        expect(&[
            ("rate", "7"),
            ("interval", "2000"),
            ("type", "1"),
            ("keepAliveTime", "3000")
        ])
    );
    assert_eq!(pttl(&mut con, "a"), -1, "not created: no TTL");

    // `type` absent: created, reply 1, the present fields kept, the KEEPALIVE TTL applied.
    let _: i64 = line(&mut con, "HSET b rate 7 interval 500").unwrap();
    assert_eq!(
        setrate(&mut con, "b 5 2000 PER_CLIENT KEEPALIVE 3000 NX"),
        1
    );
    assert_eq!(
        fields(&mut con, "b"),
        expect(&[
            ("rate", "7"),
            ("interval", "500"),
            ("type", "1"),
            ("keepAliveTime", "3000")
        ])
    );
    let ttl = pttl(&mut con, "b");
    assert!((1..=3000).contains(&ttl), "created: PTTL {ttl}");

    // An old hash without keepAliveTime gets only that field.
    let _: i64 = line(&mut con, "HSET c rate 4 interval 100 type 0").unwrap();
    assert_eq!(setrate(&mut con, "c 9 9000 NX"), 0);
    assert_eq!(
        fields(&mut con, "c"),
        expect(&[
            ("rate", "4"),
            ("interval", "100"),
            ("type", "0"),
            ("keepAliveTime", "0")
        ])
    );
}

#[test]
fn nx_never_touches_the_value_or_the_log() {
    let server = Server::start();
    let mut con = server.conn();
    set_clock(&mut con, T0);
    // Leftover state of a limiter whose hash is gone: creating it with NX keeps the state.
    plant_state(&mut con, "{api}:value", "{api}:permits", T0);
    let value_before = dump(&mut con, "{api}:value");
    let log_before = dump(&mut con, "{api}:permits");
    assert_eq!(setrate(&mut con, "api 5 1000 KEEPALIVE 60000 NX"), 1);
    assert_eq!(dump(&mut con, "{api}:value"), value_before);
    assert_eq!(dump(&mut con, "{api}:permits"), log_before);
    assert_eq!(pttl(&mut con, "{api}:value"), -1);
    assert_eq!(pttl(&mut con, "{api}:permits"), -1);

    // On an existing limiter with state, NX writes nothing at all.
    assert_eq!(try_acquire(&mut con, "api", 1), None, "the planted value 1");
    let before = snapshot(&mut con);
    assert_eq!(setrate(&mut con, "api 50 100 NX"), 0);
    assert_eq!(setrate(&mut con, "api 50 100 PER_CLIENT NX CLIENT c"), 0);
    assert_eq!(snapshot(&mut con), before);
}

// ---- XX (Redisson updateRate) ----------------------------------------------------------------

#[test]
fn xx_on_a_missing_limiter_replies_0_and_creates_nothing() {
    let server = Server::start();
    let mut con = server.conn();
    set_clock(&mut con, T0);
    assert_eq!(setrate(&mut con, "api 5 1000 XX"), 0);
    assert_eq!(
        setrate(
            &mut con,
            "api 5 1000 PER_CLIENT KEEPALIVE 2000 xx KEEPSTATE CLIENT c"
        ),
        0
    );
    assert!(snapshot(&mut con).is_empty(), "nothing created");

    // Leftover state keys without a hash: still no limiter, nothing touched.
    plant_state(&mut con, "{api}:value", "{api}:permits", T0);
    plant_state(&mut con, "{api}:value:c", "{api}:permits:c", T0);
    let before = snapshot(&mut con);
    assert_eq!(setrate(&mut con, "api 5 1000 XX"), 0);
    assert_eq!(setrate(&mut con, "api 5 1000 PER_CLIENT XX CLIENT c"), 0);
    assert_eq!(snapshot(&mut con), before);
}

#[test]
fn xx_on_an_existing_limiter_behaves_as_setrate() {
    let server = Server::start();
    let mut con = server.conn();
    set_clock(&mut con, T0);
    setrate(&mut con, "api 3 1000");
    assert_eq!(try_acquire(&mut con, "api", 3), None);
    assert_eq!(setrate(&mut con, "api 6 2000 KEEPALIVE 5000 XX"), 1);
    assert_eq!(
        fields(&mut con, "api"),
        expect(&[
            ("rate", "6"),
            ("interval", "2000"),
            ("type", "0"),
            ("keepAliveTime", "5000")
        ])
    );
    let ttl = pttl(&mut con, "api");
    assert!((1..=5000).contains(&ttl), "PTTL {ttl}");
    assert!(!exists(&mut con, "{api}:value"), "state reset");
    assert!(!exists(&mut con, "{api}:permits"), "state reset");
    assert_eq!(try_acquire(&mut con, "api", 6), None);

    // XX KEEPSTATE keeps the log: 6 logged, the new rate 8 leaves 2.
    advance(&mut con, 100);
    assert_eq!(setrate(&mut con, "api 8 2000 XX KEEPSTATE"), 1);
    let value: String = line(&mut con, "GET {api}:value").unwrap();
    assert_eq!(value, "2");
    assert_eq!(log_entries(&mut con, "{api}:permits").len(), 1);
}

// ---- KEEPSTATE -------------------------------------------------------------------------------

#[test]
fn keepstate_prunes_by_the_new_interval_and_rederives_the_value_on_a_rate_increase() {
    let server = Server::start();
    let mut con = server.conn();
    set_clock(&mut con, T0);
    setrate(&mut con, "api 10 1000");
    assert_eq!(try_acquire(&mut con, "api", 2), None); // T0
    advance(&mut con, 300);
    assert_eq!(try_acquire(&mut con, "api", 3), None); // T0+300
    advance(&mut con, 400);
    assert_eq!(try_acquire(&mut con, "api", 1), None); // T0+700
    let value: String = line(&mut con, "GET {api}:value").unwrap();
    assert_eq!(value, "4");

    // New interval 400 at T0+700: the cutoff is T0+300, inclusive, so the entries at T0 and
    // T0+300 expire; 1 permit is still logged, so 20 - 1 = 19 are available.
    assert_eq!(setrate(&mut con, "api 20 400 KEEPSTATE"), 1);
    let entries = log_entries(&mut con, "{api}:permits");
    let scores: Vec<i64> = entries.iter().map(|(_, s)| *s).collect();
    assert_eq!(scores, vec![T0 + 700]);
    assert_eq!(member_permits(&entries[0].0), 1);
    let value: String = line(&mut con, "GET {api}:value").unwrap();
    assert_eq!(value, "19");
    assert_eq!(fields(&mut con, "api")["rate"], "20");
    assert_eq!(fields(&mut con, "api")["interval"], "400");

    assert_eq!(try_acquire(&mut con, "api", 19), None);
    // The kept entry at T0+700 frees at T0+1100 under the new interval.
    assert_eq!(try_acquire(&mut con, "api", 1), Some(400));
}

#[test]
fn keepstate_rate_decrease_below_what_is_logged_keeps_the_debt() {
    let server = Server::start();
    let mut con = server.conn();
    set_clock(&mut con, T0);
    setrate(&mut con, "api 10 1000");
    assert_eq!(try_acquire(&mut con, "api", 6), None);
    advance(&mut con, 100);
    assert_eq!(setrate(&mut con, "api 4 1000 KEEPSTATE"), 1);
    let value: String = line(&mut con, "GET {api}:value").unwrap();
    assert_eq!(value, "-2", "4 - 6: the debt is kept, paid as the 6 expire");
    assert_eq!(line::<i64>(&mut con, "RATELIMIT.AVAILABLE api").unwrap(), 0);
    let entries = log_entries(&mut con, "{api}:permits");
    assert_eq!(entries.len(), 1);
    assert_eq!(member_permits(&entries[0].0), 6);
    assert_eq!(try_acquire(&mut con, "api", 1), Some(900));
    advance(&mut con, 900);
    assert_eq!(try_acquire(&mut con, "api", 4), None);
}

#[test]
fn keepstate_with_keepalive_gives_hash_value_and_log_the_ttl() {
    let server = Server::start();
    let mut con = server.conn();
    set_clock(&mut con, T0);
    setrate(&mut con, "api 10 1000");
    assert_eq!(try_acquire(&mut con, "api", 1), None);
    for key in ["api", "{api}:value", "{api}:permits"] {
        assert_eq!(pttl(&mut con, key), -1, "{key}");
    }
    assert_eq!(
        setrate(&mut con, "api 10 1000 KEEPALIVE 60000 KEEPSTATE"),
        1
    );
    for key in ["api", "{api}:value", "{api}:permits"] {
        let ttl = pttl(&mut con, key);
        assert!((55_000..=60_000).contains(&ttl), "{key}: PTTL {ttl}");
    }
    let value: String = line(&mut con, "GET {api}:value").unwrap();
    assert_eq!(value, "9");
}

#[test]
fn keepstate_without_keepalive_copies_the_hash_expiry() {
    let server = Server::start();
    let mut con = server.conn();
    set_clock(&mut con, T0);
    setrate(&mut con, "api 10 1000");
    assert_eq!(try_acquire(&mut con, "api", 1), None);
    let time: Vec<i64> = line(&mut con, "TIME").unwrap();
    let at = time[0] * 1000 + 100_000;
    let _: i64 = line(&mut con, &format!("PEXPIREAT api {at}")).unwrap();
    assert_eq!(setrate(&mut con, "api 12 1000 KEEPSTATE"), 1);
    for key in ["api", "{api}:value", "{api}:permits"] {
        let expiry: i64 = line(&mut con, &format!("PEXPIRETIME {key}")).unwrap();
        assert_eq!(expiry, at, "{key}");
    }
    let value: String = line(&mut con, "GET {api}:value").unwrap();
    assert_eq!(value, "11");
}

// ---- mode switches ---------------------------------------------------------------------------

#[test]
fn overall_to_per_client_deletes_overall_and_named_client_state_even_with_keepstate() {
    let server = Server::start();
    let mut con = server.conn();
    set_clock(&mut con, T0);
    setrate(&mut con, "api 5 1000");
    assert_eq!(try_acquire(&mut con, "api", 2), None);
    plant_state(&mut con, "{api}:value:c1", "{api}:permits:c1", T0);
    plant_state(&mut con, "{api}:value:c2", "{api}:permits:c2", T0);
    let c2_value = dump(&mut con, "{api}:value:c2");
    let c2_log = dump(&mut con, "{api}:permits:c2");

    assert_eq!(
        setrate(&mut con, "api 5 1000 PER_CLIENT KEEPSTATE CLIENT c1"),
        1
    );
    assert_eq!(fields(&mut con, "api")["type"], "1");
    for key in [
        "{api}:value",
        "{api}:permits",
        "{api}:value:c1",
        "{api}:permits:c1",
    ] {
        assert!(!exists(&mut con, key), "{key} should be deleted");
    }
    assert_eq!(
        dump(&mut con, "{api}:value:c2"),
        c2_value,
        "other client kept"
    );
    assert_eq!(
        dump(&mut con, "{api}:permits:c2"),
        c2_log,
        "other client kept"
    );
}

#[test]
fn per_client_to_overall_deletes_overall_and_named_client_state_even_with_keepstate() {
    let server = Server::start();
    let mut con = server.conn();
    set_clock(&mut con, T0);
    setrate(&mut con, "api 5 1000 PER_CLIENT");
    let acquired: Option<i64> = line(&mut con, "RATELIMIT.TRYACQUIRE api 2 CLIENT c1").unwrap();
    assert_eq!(acquired, None);
    let acquired: Option<i64> = line(&mut con, "RATELIMIT.TRYACQUIRE api 3 CLIENT c2").unwrap();
    assert_eq!(acquired, None);
    plant_state(&mut con, "{api}:value", "{api}:permits", T0);
    let c2_value = dump(&mut con, "{api}:value:c2");
    let c2_log = dump(&mut con, "{api}:permits:c2");
    assert!(c2_value.is_some() && c2_log.is_some());

    assert_eq!(
        setrate(&mut con, "api 5 1000 OVERALL KEEPSTATE CLIENT c1"),
        1
    );
    assert_eq!(fields(&mut con, "api")["type"], "0");
    for key in [
        "{api}:value",
        "{api}:permits",
        "{api}:value:c1",
        "{api}:permits:c1",
    ] {
        assert!(!exists(&mut con, key), "{key} should be deleted");
    }
    assert_eq!(
        dump(&mut con, "{api}:value:c2"),
        c2_value,
        "other client kept"
    );
    assert_eq!(
        dump(&mut con, "{api}:permits:c2"),
        c2_log,
        "other client kept"
    );
    // The OVERALL budget starts full.
    assert_eq!(try_acquire(&mut con, "api", 5), None);
}

#[test]
fn per_client_to_overall_without_client_deletes_only_the_overall_state() {
    let server = Server::start();
    let mut con = server.conn();
    set_clock(&mut con, T0);
    setrate(&mut con, "api 5 1000 PER_CLIENT");
    let acquired: Option<i64> = line(&mut con, "RATELIMIT.TRYACQUIRE api 2 CLIENT c1").unwrap();
    assert_eq!(acquired, None);
    plant_state(&mut con, "{api}:value", "{api}:permits", T0);
    let c1_value = dump(&mut con, "{api}:value:c1");
    let c1_log = dump(&mut con, "{api}:permits:c1");

    assert_eq!(setrate(&mut con, "api 5 1000 KEEPSTATE"), 1);
    assert!(!exists(&mut con, "{api}:value"));
    assert!(!exists(&mut con, "{api}:permits"));
    assert_eq!(dump(&mut con, "{api}:value:c1"), c1_value);
    assert_eq!(dump(&mut con, "{api}:permits:c1"), c1_log);
}

#[test]
fn per_client_setrate_without_client_changes_the_configuration_only() {
    let server = Server::start();
    let mut con = server.conn();
    set_clock(&mut con, T0);
    setrate(&mut con, "api 5 1000 PER_CLIENT");
    let acquired: Option<i64> = line(&mut con, "RATELIMIT.TRYACQUIRE api 2 CLIENT c1").unwrap();
    assert_eq!(acquired, None);
    // Leftover OVERALL keys of a PER_CLIENT limiter are not its state either.
    plant_state(&mut con, "{api}:value", "{api}:permits", T0);
    let state = |con: &mut Connection| {
        snapshot(con)
            .into_iter()
            .filter(|(k, _, _)| k.as_slice() != b"api")
            .collect::<Vec<_>>()
    };
    let before = state(&mut con);
    assert_eq!(before.len(), 4);

    assert_eq!(setrate(&mut con, "api 8 2000 PER_CLIENT"), 1);
    assert_eq!(state(&mut con), before);
    assert_eq!(setrate(&mut con, "api 9 3000 PER_CLIENT KEEPSTATE"), 1);
    assert_eq!(state(&mut con), before);
    assert_eq!(setrate(&mut con, "api 9 3000 PER_CLIENT XX"), 1);
    assert_eq!(state(&mut con), before);
    assert_eq!(
        fields(&mut con, "api"),
        expect(&[
            ("rate", "9"),
            ("interval", "3000"),
            ("type", "1"),
            ("keepAliveTime", "0")
        ])
    );
}

#[test]
fn an_overall_limiter_with_a_nonstandard_type_is_not_a_mode_change() {
    // `type` other than `1` reads as OVERALL (section 1), so setting OVERALL again is not a mode
    // change and KEEPSTATE keeps the state.
    let server = Server::start();
    let mut con = server.conn();
    set_clock(&mut con, T0);
    let _: i64 = line(
        &mut con,
        "HSET api rate 5 interval 1000 type 2 keepAliveTime 0",
    )
    .unwrap();
    assert_eq!(try_acquire(&mut con, "api", 2), None);
    assert_eq!(log_entries(&mut con, "{api}:permits").len(), 1);
    advance(&mut con, 10);
    assert_eq!(setrate(&mut con, "api 5 1000 OVERALL KEEPSTATE"), 1);
    assert_eq!(
        log_entries(&mut con, "{api}:permits").len(),
        1,
        "KEEPSTATE without a mode change keeps the log"
    );
    let value: Option<String> = line(&mut con, "GET {api}:value").unwrap();
    assert_eq!(value.as_deref(), Some("3"));
}

#[test]
fn a_lowered_rate_grants_nothing_until_the_window_holds_less() {
    // Five grants 100 ms apart at rate 5, then the rate lowered to 3 with KEEPSTATE.
    let server = Server::start();
    let mut con = server.conn();
    set_clock(&mut con, T0);
    for name in ["x", "y"] {
        setrate(&mut con, &format!("{name} 5 1000"));
    }
    for _ in 0..5 {
        assert_eq!(try_acquire(&mut con, "x", 1), None);
        assert_eq!(try_acquire(&mut con, "y", 1), None);
        advance(&mut con, 100);
    }
    for name in ["x", "y"] {
        setrate(&mut con, &format!("{name} 3 1000 KEEPSTATE"));
        assert_eq!(
            get(&mut con, &format!("{{{name}}}:value")).as_deref(),
            Some("-2")
        );
        assert_eq!(available(&mut con, name), 0);
    }
    // A release while the window holds more than the rate gives back a logged permit, but no
    // credit: the window still holds 4 > 3.
    assert_eq!(line::<i64>(&mut con, "RATELIMIT.RELEASE y 1").unwrap(), 1);
    assert_eq!(get(&mut con, "{y}:value").as_deref(), Some("-1"));
    assert_eq!(logged_permits(&mut con, "{y}:permits"), 4);
    assert_eq!(available(&mut con, "y"), 0);
    assert_eq!(try_acquire(&mut con, "y", 1), Some(600));
    // At T0 + 1100 the entries of T0 and T0 + 100 have expired: three live, rate 3.
    advance(&mut con, 600);
    assert_eq!(available(&mut con, "x"), 0);
    assert_eq!(try_acquire(&mut con, "x", 2), Some(200));
    assert_eq!(try_acquire(&mut con, "x", 1), Some(100));
    advance(&mut con, 100);
    assert_eq!(try_acquire(&mut con, "x", 1), None);
    assert_eq!(try_acquire(&mut con, "x", 1), Some(100));
}

#[test]
fn rates_changed_with_keepstate_under_load_never_over_admit() {
    // Random grants, releases and KEEPSTATE rate and interval changes on the debug clock; after
    // every grant, the log's window ending at that grant holds at most the rate in force.
    let server = Server::start();
    let mut con = server.conn();
    let mut now = T0;
    set_clock(&mut con, now);
    let mut rng = Rng(0x5eed_0f4a_7e11);
    let (mut rate, mut interval) = (10i64, 500i64);
    setrate(&mut con, &format!("load {rate} {interval}"));
    let mut grants = 0;
    for step in 0..3000 {
        let ms = rng.below(40) as i64;
        advance(&mut con, ms);
        now += ms;
        if rng.one_in(40) {
            rate = 1 + rng.below(15) as i64;
            interval = 100 + rng.below(900) as i64;
            setrate(&mut con, &format!("load {rate} {interval} KEEPSTATE"));
            continue;
        }
        if rng.one_in(15) {
            let _: i64 = line(
                &mut con,
                &format!("RATELIMIT.RELEASE load {}", 1 + rng.below(3)),
            )
            .unwrap();
            continue;
        }
        let permits = 1 + rng.below(rate as u64) as u32;
        if try_acquire(&mut con, "load", permits).is_some() {
            continue;
        }
        grants += 1;
        let in_window = permits_in_window(&mut con, "{load}:permits", now, interval);
        assert!(
            in_window <= rate,
            "step {step}: {in_window} permits in the {interval} ms window at rate {rate}"
        );
    }
    assert!(grants > 300, "only {grants} grants");
}
