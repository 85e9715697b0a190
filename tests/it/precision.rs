//! Bounded memory: grants of one state within one PRECISION bucket share one log member, scored
//! at the bucket's last millisecond, whose permits are the sum. PRECISION 1 (the default) merges
//! only grants of the same millisecond. The limiter never admits more than its rate in any
//! window of real grant times, and Lua's `struct.unpack` (Redisson's reader) reads the sums.

use crate::common::*;

fn setrate(con: &mut Connection, args: &str) -> i64 {
    line(con, &format!("RATELIMIT.SETRATE {args}")).unwrap_or_else(|e| panic!("{args}: {e}"))
}

fn hget(con: &mut Connection, key: &str, field: &str) -> Option<String> {
    line(con, &format!("HGET {key} {field}")).unwrap()
}

/// (score, permits) of each member, decoded by Lua's `struct.unpack('Bc0I', ...)`.
fn unpacked_by_lua(con: &mut Connection, log: &str) -> Vec<(i64, i64)> {
    let script = "
        local out = {}
        local members = redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES')
        for i = 1, #members, 2 do
            local _, permits = struct.unpack('Bc0I', members[i])
            table.insert(out, tonumber(members[i + 1]))
            table.insert(out, permits)
        end
        return out";
    let flat: Vec<i64> = redis::cmd("EVAL")
        .arg(script)
        .arg(1)
        .arg(log)
        .query(con)
        .expect("EVAL");
    flat.chunks(2).map(|p| (p[0], p[1])).collect()
}

#[test]
fn precision_is_stored_as_the_modules_own_field() {
    let server = Server::start();
    let mut con = server.conn();
    assert_eq!(setrate(&mut con, "p 10 1000 PRECISION 100"), 1);
    assert_eq!(hget(&mut con, "p", "precision").as_deref(), Some("100"));
    // CONFIG keeps the four fields Redisson knows.
    let config: Vec<Value> = line(&mut con, "RATELIMIT.CONFIG p").unwrap();
    assert_eq!(config.len(), 8);
    // NX sets it only if absent; without PRECISION (= 1) nothing is written for it.
    assert_eq!(setrate(&mut con, "p 10 1000 PRECISION 10 NX"), 0);
    assert_eq!(hget(&mut con, "p", "precision").as_deref(), Some("100"));
    assert_eq!(setrate(&mut con, "q 10 1000 NX"), 1);
    let fields: Vec<String> = line(&mut con, "HKEYS q").unwrap();
    assert_eq!(fields, ["rate", "interval", "keepAliveTime", "type"]);
    // SETRATE without PRECISION sets it back to 1: the field goes.
    assert_eq!(setrate(&mut con, "p 10 1000"), 1);
    assert_eq!(hget(&mut con, "p", "precision"), None);
    // 1 ..= interval.
    for (args, error) in [
        (
            "p 10 1000 PRECISION 0",
            "ERR PRECISION must be an integer between 1 and 1000",
        ),
        (
            "p 10 1000 PRECISION 1001",
            "ERR PRECISION must be an integer between 1 and 1000",
        ),
        (
            "p 10 1000 PRECISION 5 PRECISION 5",
            "ERR syntax error, PRECISION specified multiple times",
        ),
        (
            "p 10 1000 PRECISION",
            "ERR syntax error, PRECISION needs a value",
        ),
    ] {
        assert_eq!(
            error_of(&mut con, &format!("RATELIMIT.SETRATE {args}")),
            error
        );
    }
    // RATE creates with it.
    let _: Value = line(&mut con, "RATELIMIT.ALLOW r RATE 5 1000 PRECISION 50").unwrap();
    assert_eq!(hget(&mut con, "r", "precision").as_deref(), Some("50"));
    assert_eq!(
        error_of(&mut con, "RATELIMIT.ALLOW s RATE 5 1000 PRECISION 2000"),
        "ERR PRECISION must be an integer between 1 and 1000"
    );
    // A foreign precision that is not an integer >= 1 is corrupt data.
    for bad in ["x", "0", "-5"] {
        let _: i64 = line(&mut con, &format!("HSET q precision {bad}")).unwrap();
        assert_eq!(
            error_of(&mut con, "RATELIMIT.TRYACQUIRE q"),
            "ERR corrupt rate limiter key 'q': field 'precision' is not an integer >= 1"
        );
    }
    // One above the interval (a Redisson setRate shortened the interval and left the module's
    // field) is bounded by the interval: grants of one interval share an entry.
    let _: i64 = line(&mut con, "HSET q precision 5000").unwrap();
    let _: () = line(&mut con, "DEL {q}:value {q}:permits").unwrap_or(());
    assert_eq!(try_acquire(&mut con, "q", 1), None);
    assert_eq!(try_acquire(&mut con, "q", 2), None);
    let log = log_entries(&mut con, "{q}:permits");
    assert_eq!(log.len(), 1);
    assert_eq!(member_permits(&log[0].0), 3);
    assert_eq!(
        (log[0].1 + 1) % 1000,
        0,
        "scored at the end of a 1000 ms bucket"
    );
}

#[test]
fn grants_in_one_bucket_share_one_member_read_by_lua() {
    let server = Server::start();
    let replica = Server::start_replica(&server, false);
    let mut con = server.conn();
    // T0 is a multiple of 100: the bucket of T0 + 0..99 ends at T0 + 99.
    set_clock(&mut con, T0 + 10);
    assert_eq!(setrate(&mut con, "m 100 1000 PRECISION 100"), 1);
    for step in 0..10 {
        assert_eq!(try_acquire(&mut con, "m", 1 + step % 2), None);
        advance(&mut con, 8);
    }
    // T0 + 90: still the first bucket.
    assert_eq!(unpacked_by_lua(&mut con, "{m}:permits"), [(T0 + 99, 15)]);
    advance(&mut con, 20);
    assert_eq!(try_acquire(&mut con, "m", 4), None);
    assert_eq!(
        unpacked_by_lua(&mut con, "{m}:permits"),
        [(T0 + 99, 15), (T0 + 199, 4)]
    );
    assert_eq!(available(&mut con, "m"), 81);
    // The first bucket's permits are free at T0 + 99 + 1000, not before.
    set_clock(&mut con, T0 + 1098);
    assert_eq!(available(&mut con, "m"), 81);
    advance(&mut con, 1);
    assert_eq!(available(&mut con, "m"), 96);
    // The member kept its 16-byte id and Redisson's layout.
    let log = log_entries(&mut con, "{m}:permits");
    assert!(log
        .iter()
        .all(|(member, _)| member.len() == 21 && member[0] == 16));
    wait_replicas(&mut con, 1);
    assert_eq!(snapshot(&mut con), snapshot(&mut replica.conn()));
}

#[test]
fn grants_of_the_same_millisecond_share_one_member_by_default() {
    let server = Server::start();
    let mut con = server.conn();
    set_clock(&mut con, T0);
    assert_eq!(setrate(&mut con, "same 500 1000"), 1);
    for _ in 0..500 {
        assert_eq!(try_acquire(&mut con, "same", 1), None);
    }
    assert_eq!(try_acquire(&mut con, "same", 1), Some(1000));
    assert_eq!(unpacked_by_lua(&mut con, "{same}:permits"), [(T0, 500)]);
    advance(&mut con, 1);
    assert_eq!(try_acquire(&mut con, "same", 1), Some(999));
}

#[test]
fn the_log_holds_at_most_one_member_per_bucket_of_the_window() {
    let server = Server::start();
    let mut con = server.conn();
    set_clock(&mut con, T0);
    assert_eq!(setrate(&mut con, "mem 1000000 1000 PRECISION 100"), 1);
    let mut most = 0;
    for _ in 0..5000 {
        let _: Value = line(&mut con, "RATELIMIT.ALLOW mem").unwrap();
        advance(&mut con, 1);
        let members: usize = line(&mut con, "ZCARD {mem}:permits").unwrap();
        most = most.max(members);
    }
    assert!(most <= 1000 / 100 + 1, "{most} members");
    assert!(most >= 10, "{most} members: the window was never full");
    assert_eq!(logged_permits(&mut con, "{mem}:permits"), 1000);
}

#[test]
fn merged_logs_never_admit_more_than_the_rate_in_any_window_of_real_grants() {
    for precision in [1, 100] {
        let server = Server::start();
        let mut con = server.conn();
        let mut now = T0;
        set_clock(&mut con, now);
        let (rate, interval) = (20i64, 1000i64);
        assert_eq!(
            setrate(
                &mut con,
                &format!("w {rate} {interval} PRECISION {precision}")
            ),
            1
        );
        let mut rng = Rng(0x9e1_5e7 + precision as u64);
        let mut grants: Vec<(i64, i64)> = Vec::new();
        for _ in 0..3000 {
            let ms = rng.below(12) as i64;
            advance(&mut con, ms);
            now += ms;
            let permits = 1 + rng.below(4) as i64;
            let reply: Vec<Value> =
                line(&mut con, &format!("RATELIMIT.ALLOW w {permits}")).unwrap();
            if reply[1] != Value::Int(1) {
                continue;
            }
            grants.push((now, permits));
            let in_window: i64 = grants
                .iter()
                .filter(|(t, _)| *t > now - interval)
                .map(|(_, p)| p)
                .sum();
            assert!(
                in_window <= rate,
                "PRECISION {precision}: {in_window} permits granted within {interval} ms"
            );
        }
        assert!(
            grants.len() > 100,
            "PRECISION {precision}: {} grants",
            grants.len()
        );
    }
}
