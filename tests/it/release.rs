//! RATELIMIT.RELEASE: the newest log entries worth `permits` are removed (the last one split),
//! the value is raised by as many (capped at the rate), the reply says how many were released,
//! and released permits are never counted twice.

use crate::common::*;

fn release(con: &mut Connection, text: &str) -> i64 {
    line(con, &format!("RATELIMIT.RELEASE {text}")).expect("RELEASE")
}

/// (score, permits) of every entry, oldest first.
fn decoded(con: &mut Connection, log: &str) -> Vec<(i64, u32)> {
    log_entries(con, log)
        .iter()
        .map(|(m, s)| (*s, member_permits(m)))
        .collect()
}

#[test]
fn removes_the_newest_entries_and_splits_the_last_one() {
    let server = Server::start();
    let mut con = server.conn();
    set_clock(&mut con, T0);
    line::<i64>(&mut con, "RATELIMIT.SETRATE api 10 1000").unwrap();
    assert_eq!(try_acquire(&mut con, "api", 2), None);
    advance(&mut con, 10);
    assert_eq!(try_acquire(&mut con, "api", 3), None);
    advance(&mut con, 10);
    assert_eq!(try_acquire(&mut con, "api", 4), None);
    let before = log_entries(&mut con, "{api}:permits");
    assert_eq!(get(&mut con, "{api}:value").as_deref(), Some("1"));

    // 5 = the 4 of the newest entry + 1 of the 3 before it.
    assert_eq!(release(&mut con, "api 5"), 5);
    let after = log_entries(&mut con, "{api}:permits");
    assert_eq!(after.len(), 2);
    assert_eq!(after[0], before[0], "the oldest entry is untouched");
    let (split, score) = &after[1];
    assert_eq!(*score, T0 + 10, "the split entry keeps its score");
    assert_eq!(split.len(), 21);
    assert_eq!(split[0], 0x10);
    assert_eq!(&split[1..17], &before[1].0[1..17], "and its 16-byte id");
    assert_eq!(member_permits(split), 2);
    assert_eq!(get(&mut con, "{api}:value").as_deref(), Some("6"));
    assert_eq!(available(&mut con, "api"), 6);
}

#[test]
fn releasing_whole_entries_leaves_no_zero_permit_member() {
    let server = Server::start();
    let mut con = server.conn();
    set_clock(&mut con, T0);
    line::<i64>(&mut con, "RATELIMIT.SETRATE api 10 1000").unwrap();
    for (permits, gap) in [(1, 5), (2, 5), (3, 0)] {
        assert_eq!(try_acquire(&mut con, "api", permits), None);
        advance(&mut con, gap);
    }
    assert_eq!(release(&mut con, "api 5"), 5);
    assert_eq!(decoded(&mut con, "{api}:permits"), vec![(T0, 1)]);
    assert_eq!(get(&mut con, "{api}:value").as_deref(), Some("9"));
}

#[test]
fn replies_less_when_less_is_logged() {
    let server = Server::start();
    let mut con = server.conn();
    set_clock(&mut con, T0);
    line::<i64>(&mut con, "RATELIMIT.SETRATE api 10 1000").unwrap();
    assert_eq!(try_acquire(&mut con, "api", 2), None);
    assert_eq!(try_acquire(&mut con, "api", 1), None);
    assert_eq!(release(&mut con, "api 10"), 3);
    assert_eq!(
        line::<i64>(&mut con, "ZCARD {api}:permits").unwrap(),
        0,
        "the whole log was given back"
    );
    assert_eq!(get(&mut con, "{api}:value").as_deref(), Some("10"));
    // Nothing logged: nothing to release, and nothing is written.
    let before = snapshot(&mut con);
    assert_eq!(release(&mut con, "api 1"), 0);
    assert_eq!(snapshot(&mut con), before);
    assert_eq!(release(&mut con, "api 4294967295"), 0);
    assert_eq!(snapshot(&mut con), before);
}

#[test]
fn expired_entries_are_not_released_again() {
    let server = Server::start();
    let mut con = server.conn();
    set_clock(&mut con, T0);
    line::<i64>(&mut con, "RATELIMIT.SETRATE api 10 1000").unwrap();
    assert_eq!(try_acquire(&mut con, "api", 4), None);
    advance(&mut con, 500);
    assert_eq!(try_acquire(&mut con, "api", 3), None);
    advance(&mut con, 500);
    // The 4 from T0 are already free (T0 + 1000): only the 3 still logged can be released.
    assert_eq!(release(&mut con, "api 5"), 3);
    assert_eq!(line::<i64>(&mut con, "ZCARD {api}:permits").unwrap(), 0);
    assert_eq!(get(&mut con, "{api}:value").as_deref(), Some("10"));
    assert_eq!(available(&mut con, "api"), 10);
}

#[test]
fn the_value_is_raised_but_capped_at_the_rate() {
    let server = Server::start();
    let mut con = server.conn();
    set_clock(&mut con, T0);
    line::<i64>(&mut con, "RATELIMIT.SETRATE api 10 1000").unwrap();
    assert_eq!(try_acquire(&mut con, "api", 4), None);
    // A Redisson client's release script raised the value without touching the log. The value
    // is the account of what is logged: it says 1 permit is in use, so releasing 3 releases
    // that one and drops the whole log in O(1), leaving value and log in step.
    line::<()>(&mut con, "SET {api}:value 9").unwrap();
    assert_eq!(release(&mut con, "api 3"), 1);
    assert!(!exists(&mut con, "{api}:permits"));
    assert_eq!(get(&mut con, "{api}:value").as_deref(), Some("10"));
    assert_eq!(available(&mut con, "api"), 10);
    // Below what is in use, the newest entries go and the value is raised, capped at the rate.
    assert_eq!(try_acquire(&mut con, "api", 4), None);
    line::<()>(&mut con, "SET {api}:value 5").unwrap();
    assert_eq!(release(&mut con, "api 3"), 3);
    assert_eq!(decoded(&mut con, "{api}:permits"), vec![(T0, 1)]);
    assert_eq!(get(&mut con, "{api}:value").as_deref(), Some("8"));
}

#[test]
fn released_permits_can_be_taken_again_but_never_more_than_the_rate() {
    let server = Server::start();
    let mut con = server.conn();
    set_clock(&mut con, T0);
    line::<i64>(&mut con, "RATELIMIT.SETRATE api 10 1000").unwrap();
    assert_eq!(try_acquire(&mut con, "api", 6), None);
    advance(&mut con, 500);
    // Give back 3 of the 6: 3 stay logged at T0, 7 are free.
    assert_eq!(release(&mut con, "api 3"), 3);
    assert_eq!(decoded(&mut con, "{api}:permits"), vec![(T0, 3)]);
    assert_eq!(available(&mut con, "api"), 7);
    assert_eq!(try_acquire(&mut con, "api", 7), None);
    assert_eq!(try_acquire(&mut con, "api", 1), Some(500));
    assert_eq!(get(&mut con, "{api}:value").as_deref(), Some("0"));
    advance(&mut con, 500);
    // Only the 3 still logged at T0 come back: the released ones are not counted a second time.
    assert_eq!(available(&mut con, "api"), 3);
    assert_eq!(try_acquire(&mut con, "api", 4), Some(500));
    assert_eq!(try_acquire(&mut con, "api", 3), None);
    assert_eq!(try_acquire(&mut con, "api", 1), Some(500));
    let window: u32 = decoded(&mut con, "{api}:permits")
        .iter()
        .filter(|(score, _)| *score > T0 + 1000 - 1000)
        .map(|(_, p)| p)
        .sum();
    assert_eq!(window, 10);
}

/// A small deterministic generator (xorshift64).
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

#[test]
fn acquisitions_minus_releases_never_exceed_the_rate_in_any_window() {
    // The test keeps its own ledger of (time, permits) taken and given back; whatever the order
    // of acquisitions, releases and clock moves, the net permits held within any window of
    // `interval` never exceed the rate, and the log holds exactly the ledger's live permits.
    let server = Server::start();
    let mut con = server.conn();
    let (rate, interval) = (8i64, 1000i64);
    let mut now = T0;
    set_clock(&mut con, now);
    line::<i64>(
        &mut con,
        &format!("RATELIMIT.SETRATE api {rate} {interval}"),
    )
    .unwrap();
    let mut ledger: Vec<(i64, i64)> = Vec::new(); // (score, net permits) newest last
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut released_total = 0;
    for step in 0..400 {
        if rng.below(3) == 0 {
            let gap = rng.below(300) as i64;
            advance(&mut con, gap);
            now += gap;
        }
        let cutoff = now - interval;
        let live: i64 = ledger
            .iter()
            .filter(|(s, _)| *s > cutoff)
            .map(|(_, p)| p)
            .sum();
        if rng.below(4) == 0 {
            let asked = 1 + rng.below(5) as i64;
            let got = release(&mut con, &format!("api {asked}"));
            assert_eq!(
                got,
                asked.min(live),
                "step {step}: release {asked} of {live}"
            );
            released_total += got;
            // Take it off the newest live entries, as the module must.
            let mut left = got;
            for entry in ledger.iter_mut().rev().filter(|(s, _)| *s > cutoff) {
                let take = left.min(entry.1);
                entry.1 -= take;
                left -= take;
            }
            ledger.retain(|(_, p)| *p > 0);
        } else {
            let permits = 1 + rng.below(4) as i64;
            let reply = try_acquire(&mut con, "api", permits as u32);
            assert_eq!(
                reply.is_none(),
                live + permits <= rate,
                "step {step}: {permits} with {live} held"
            );
            if reply.is_none() {
                ledger.push((now, permits));
            }
        }
        let held: i64 = ledger
            .iter()
            .filter(|(s, _)| *s > now - interval)
            .map(|(_, p)| p)
            .sum();
        assert!(held <= rate, "step {step}: {held} held");
        assert_eq!(
            available(&mut con, "api"),
            rate - held,
            "step {step}: available"
        );
        let logged: i64 = decoded(&mut con, "{api}:permits")
            .iter()
            .filter(|(s, _)| *s > now - interval)
            .map(|(_, p)| i64::from(*p))
            .sum();
        assert_eq!(logged, held, "step {step}: log");
    }
    assert!(released_total > 20, "released {released_total}");
}

#[test]
fn splitting_an_8_byte_id_member_keeps_its_id() {
    let server = Server::start();
    let mut con = server.conn();
    set_clock(&mut con, T0);
    line::<i64>(
        &mut con,
        "HSET legacy rate 10 interval 1000 type 0 keepAliveTime 0",
    )
    .unwrap();
    let _: i64 = redis::cmd("EVAL")
        .arg("return redis.call('zadd', KEYS[1], ARGV[1], struct.pack('Bc0I', 8, ARGV[2], 5))")
        .arg(1)
        .arg("{legacy}:permits")
        .arg(T0 - 100)
        .arg("olderid!")
        .query(&mut con)
        .unwrap();
    line::<()>(&mut con, "SET {legacy}:value 5").unwrap();
    assert_eq!(release(&mut con, "legacy 2"), 2);
    let log = log_entries(&mut con, "{legacy}:permits");
    assert_eq!(log.len(), 1);
    let (member, score) = &log[0];
    assert_eq!(*score, T0 - 100);
    let mut expected = vec![8u8];
    expected.extend_from_slice(b"olderid!");
    expected.extend_from_slice(&3u32.to_le_bytes());
    assert_eq!(member, &expected);
    assert_eq!(get(&mut con, "{legacy}:value").as_deref(), Some("7"));
}

#[test]
fn a_client_release_touches_only_that_client() {
    let server = Server::start();
    let mut con = server.conn();
    set_clock(&mut con, T0);
    line::<i64>(&mut con, "RATELIMIT.SETRATE pc 5 1000 PER_CLIENT").unwrap();
    for client in ["c1", "c2"] {
        let r: Option<i64> = line(
            &mut con,
            &format!("RATELIMIT.TRYACQUIRE pc 4 CLIENT {client}"),
        )
        .unwrap();
        assert_eq!(r, None);
    }
    let c2_before: Vec<_> = [
        log_entries(&mut con, "{pc}:permits:c2"),
        vec![(get(&mut con, "{pc}:value:c2").unwrap().into_bytes(), 0)],
    ]
    .concat();
    assert_eq!(
        line::<i64>(&mut con, "RATELIMIT.RELEASE pc 3 CLIENT c1").unwrap(),
        3
    );
    assert_eq!(decoded(&mut con, "{pc}:permits:c1"), vec![(T0, 1)]);
    assert_eq!(get(&mut con, "{pc}:value:c1").as_deref(), Some("4"));
    let c2_after: Vec<_> = [
        log_entries(&mut con, "{pc}:permits:c2"),
        vec![(get(&mut con, "{pc}:value:c2").unwrap().into_bytes(), 0)],
    ]
    .concat();
    assert_eq!(c2_after, c2_before);
    let exists: i64 = line(&mut con, "EXISTS {pc}:value {pc}:permits").unwrap();
    assert_eq!(exists, 0);
}

#[test]
fn a_release_with_the_value_key_missing_derives_it_from_the_log() {
    let server = Server::start();
    let mut con = server.conn();
    set_clock(&mut con, T0);
    line::<i64>(&mut con, "RATELIMIT.SETRATE api 10 1000").unwrap();
    assert_eq!(try_acquire(&mut con, "api", 3), None);
    assert_eq!(try_acquire(&mut con, "api", 4), None);
    line::<i64>(&mut con, "DEL {api}:value").unwrap();
    // 7 logged: 3 free; releasing 4 leaves 3 logged and 7 free.
    assert_eq!(release(&mut con, "api 4"), 4);
    let log = decoded(&mut con, "{api}:permits");
    assert_eq!(log.iter().map(|(_, p)| p).sum::<u32>(), 3);
    assert_eq!(get(&mut con, "{api}:value").as_deref(), Some("7"));
    assert_eq!(try_acquire(&mut con, "api", 7), None);
    assert_eq!(try_acquire(&mut con, "api", 1), Some(1000));
}

#[test]
fn release_decodes_no_entry_older_than_what_it_releases() {
    // A corrupt entry older than the two newest: releasing exactly those two never reads it.
    let server = Server::start();
    let mut con = server.conn();
    set_clock(&mut con, T0);
    line::<i64>(&mut con, "RATELIMIT.SETRATE r 10 10000").unwrap();
    assert_eq!(try_acquire(&mut con, "r", 1), None);
    let score = (T0 + 1).to_string();
    let _: i64 = run(
        &mut con,
        &[b"ZADD", b"{r}:permits", score.as_bytes(), b"\x10ab"],
    )
    .unwrap();
    for _ in 0..2 {
        advance(&mut con, 10);
        assert_eq!(try_acquire(&mut con, "r", 1), None);
    }
    assert_eq!(line::<i64>(&mut con, "RATELIMIT.RELEASE r 2").unwrap(), 2);
    // A RELEASE that reads entries reads the corrupt one: an error, nothing written.
    line::<()>(&mut con, "SET {r}:value 8").unwrap();
    let err = error_of(&mut con, "RATELIMIT.RELEASE r 1");
    assert!(
        err.starts_with("ERR corrupt rate limiter key '{r}:permits'"),
        "{err}"
    );
    // Releasing at least what the value says is logged drops the whole log unread.
    assert_eq!(line::<i64>(&mut con, "RATELIMIT.RELEASE r 2").unwrap(), 2);
    assert!(!exists(&mut con, "{r}:permits"));
    assert_eq!(get(&mut con, "{r}:value").as_deref(), Some("10"));
}
