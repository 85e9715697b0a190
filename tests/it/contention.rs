//! Many clients on one limiter at once: the server runs each command atomically, so the
//! permits granted add up to the rate exactly, and no two acquisitions in the same millisecond
//! overwrite each other's log entry.

use std::sync::{Arc, Barrier};
use std::thread;

use crate::common::*;

const THREADS: usize = 8;
const INTERVAL: i64 = 60_000;

/// Runs `work(thread index, connection)` on THREADS threads started together; returns results.
fn hammer<T: Send + 'static>(
    server: &Server,
    work: impl Fn(usize, &mut Connection) -> T + Send + Sync + 'static,
) -> Vec<T> {
    let barrier = Arc::new(Barrier::new(THREADS));
    let work = Arc::new(work);
    let handles: Vec<_> = (0..THREADS)
        .map(|i| {
            let mut con = server.conn();
            let barrier = Arc::clone(&barrier);
            let work = Arc::clone(&work);
            thread::spawn(move || {
                barrier.wait();
                work(i, &mut con)
            })
        })
        .collect();
    handles
        .into_iter()
        .map(|h| h.join().expect("worker thread"))
        .collect()
}

fn logged(con: &mut Connection, log: &str) -> (usize, u64) {
    let entries = log_entries(con, log);
    let sum = entries
        .iter()
        .map(|(m, _)| u64::from(member_permits(m)))
        .sum();
    (entries.len(), sum)
}

#[test]
fn single_permits_granted_add_up_to_the_rate_exactly() {
    let server = Server::start();
    let mut con = server.conn();
    set_clock(&mut con, T0);
    let rate = 500;
    line::<i64>(
        &mut con,
        &format!("RATELIMIT.SETRATE api {rate} {INTERVAL}"),
    )
    .unwrap();
    let grants = hammer(&server, |_, con| {
        let mut granted = 0u64;
        loop {
            match try_acquire(con, "api", 1) {
                None => granted += 1,
                Some(wait) => {
                    assert!((1..=INTERVAL).contains(&wait), "wait {wait}");
                    return granted;
                }
            }
            assert!(granted <= 500, "granted past the rate");
        }
    });
    let total: u64 = grants.iter().sum();
    assert_eq!(total, rate, "per thread: {grants:?}");
    assert!(
        grants.iter().filter(|&&g| g > 0).count() > 1,
        "the threads did not overlap: {grants:?}"
    );
    // All in the same millisecond: merged into one member, no grant lost or overwritten.
    assert_eq!(logged(&mut con, "{api}:permits"), (1, rate));
    assert!(log_entries(&mut con, "{api}:permits")
        .iter()
        .all(|(m, s)| m.len() == 21 && *s == T0));
    assert_eq!(get(&mut con, "{api}:value").as_deref(), Some("0"));
    assert_eq!(line::<i64>(&mut con, "RATELIMIT.AVAILABLE api").unwrap(), 0);
}

/// A small deterministic generator (xorshift64).
fn next(seed: &mut u64) -> u64 {
    *seed ^= *seed << 13;
    *seed ^= *seed >> 7;
    *seed ^= *seed << 17;
    *seed
}

#[test]
fn random_permit_sizes_never_exceed_the_rate() {
    let server = Server::start();
    let mut con = server.conn();
    set_clock(&mut con, T0);
    let rate: u64 = 500;
    line::<i64>(
        &mut con,
        &format!("RATELIMIT.SETRATE api {rate} {INTERVAL}"),
    )
    .unwrap();
    let results = hammer(&server, |i, con| {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64 ^ (i as u64 + 1).wrapping_mul(0x1000_0001);
        let (mut sum, mut grants) = (0u64, 0usize);
        for _ in 0..80 {
            let permits = 1 + next(&mut seed) % 9;
            if try_acquire(con, "api", permits as u32).is_none() {
                sum += permits;
                grants += 1;
            }
        }
        (sum, grants)
    });
    let sum: u64 = results.iter().map(|r| r.0).sum();
    let grants: usize = results.iter().map(|r| r.1).sum();
    assert!(sum <= rate, "granted {sum} permits with rate {rate}");
    assert!(sum > rate - 9, "only {sum} granted: refused with room left");
    assert!(grants > 0);
    assert_eq!(
        logged(&mut con, "{api}:permits"),
        (1, sum),
        "one millisecond, one entry"
    );
    let left = rate - sum;
    assert_eq!(
        get(&mut con, "{api}:value"),
        Some(left.to_string()),
        "value"
    );
    // What is left can be taken, one by one, and not one more.
    for _ in 0..left {
        assert_eq!(try_acquire(&mut con, "api", 1), None);
    }
    assert!(try_acquire(&mut con, "api", 1).is_some());
    assert_eq!(logged(&mut con, "{api}:permits").1, rate);
}

#[test]
fn per_client_limits_hold_under_contention() {
    // Eight threads, two per client: each client gets exactly its own rate.
    let server = Server::start();
    let mut con = server.conn();
    set_clock(&mut con, T0);
    let rate = 60u64;
    line::<i64>(
        &mut con,
        &format!("RATELIMIT.SETRATE pc {rate} {INTERVAL} PER_CLIENT"),
    )
    .unwrap();
    let grants = hammer(&server, |i, con| {
        let cmd = format!("RATELIMIT.TRYACQUIRE pc CLIENT client-{}", i % 4);
        let mut granted = 0u64;
        while line::<Option<i64>>(con, &cmd).unwrap().is_none() {
            granted += 1;
            assert!(granted <= 60, "granted past the rate");
        }
        granted
    });
    for client in 0..4 {
        let total = grants[client] + grants[client + 4];
        assert_eq!(total, rate, "client-{client}: {grants:?}");
        assert_eq!(
            logged(&mut con, &format!("{{pc}}:permits:client-{client}")),
            (1, rate)
        );
        assert_eq!(
            get(&mut con, &format!("{{pc}}:value:client-{client}")).as_deref(),
            Some("0")
        );
    }
}
