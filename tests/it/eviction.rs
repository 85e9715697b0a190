//! Lost state by eviction. With a `volatile-*` policy only keys with a TTL can be evicted, so a
//! TTL on exactly one key of a limiter makes the server evict exactly that key once memory runs
//! out: each test loses one kind of key for real and shows what the limiter does next, and that
//! `INFO ratelimit` counts it (and the log says so once).

use crate::common::*;

/// Runs out of memory with only `victim` evictable, then lifts the limit: the server evicts it.
fn evict(con: &mut Connection, victim: &str) {
    let _: i64 = line(con, &format!("PEXPIRE {victim} 600000")).unwrap();
    let used: i64 = info_field(con, "memory", "used_memory")
        .unwrap()
        .parse()
        .unwrap();
    let _: () = line(con, &format!("CONFIG SET maxmemory {}", used + 200_000)).unwrap();
    // A request past the limit (its own buffer counts): the server evicts what it can first,
    // then refuses the write if that was not enough.
    let _: Result<Value, _> = redis::cmd("SET")
        .arg("filler")
        .arg(vec![b'x'; 400_000])
        .query(con);
    let _: () = line(con, "CONFIG SET maxmemory 0").unwrap();
    let _: i64 = line(con, "DEL filler").unwrap();
    assert!(!exists(con, victim), "{victim} was not evicted");
}

fn evicted_counted(con: &mut Connection) -> i64 {
    info_field(con, "ratelimit", "ratelimit_evicted_keys")
        .expect("ratelimit_evicted_keys")
        .parse()
        .unwrap()
}

fn start() -> (Server, Connection) {
    let server = Server::start_with(
        &["debug-commands", "yes"],
        &["--maxmemory-policy", "volatile-lru"],
    );
    let mut con = server.conn();
    set_clock(&mut con, T0);
    (server, con)
}

/// 5 a second, 3 taken.
fn used_limiter(con: &mut Connection) {
    let _: i64 = line(con, "RATELIMIT.SETRATE lim 5 1000").unwrap();
    assert_eq!(try_acquire(con, "lim", 3), None);
}

#[test]
fn a_lost_log_readmits_up_to_the_rate() {
    let (server, mut con) = start();
    used_limiter(&mut con);
    assert_eq!(evicted_counted(&mut con), 0);
    evict(&mut con, "{lim}:permits");
    assert_eq!(evicted_counted(&mut con), 1);
    // The grants logged are forgotten: the whole rate again, within the same second.
    assert_eq!(available(&mut con, "lim"), 5);
    assert_eq!(try_acquire(&mut con, "lim", 5), None);
    let lines = server
        .log()
        .lines()
        .filter(|l| l.contains("ratelimit: a limiter key was evicted"))
        .count();
    assert_eq!(
        lines,
        1,
        "one log line for the first eviction:\n{}",
        server.log()
    );
}

#[test]
fn a_lost_value_is_rebuilt_from_the_log() {
    let (_server, mut con) = start();
    used_limiter(&mut con);
    evict(&mut con, "{lim}:value");
    assert_eq!(evicted_counted(&mut con), 1);
    assert_eq!(available(&mut con, "lim"), 2, "5 less the 3 still logged");
    assert_eq!(try_acquire(&mut con, "lim", 2), None);
    assert!(try_acquire(&mut con, "lim", 1).is_some());
}

#[test]
fn a_lost_hash_uninitializes_the_limiter_and_rate_recreates_it_keeping_the_state() {
    let (_server, mut con) = start();
    used_limiter(&mut con);
    evict(&mut con, "lim");
    assert_eq!(evicted_counted(&mut con), 1);
    assert_eq!(
        error_of(&mut con, "RATELIMIT.TRYACQUIRE lim"),
        "ERR RateLimiter is not initialized (limiter 'lim')"
    );
    // RATE re-creates it; the 3 still logged count.
    let reply: Vec<Value> = line(&mut con, "RATELIMIT.ALLOW lim 1 RATE 5 1000").unwrap();
    assert_eq!(reply[1], Value::Int(1));
    assert_eq!(reply[5], Value::Int(1), "remaining: 5 - 3 logged - 1");
}

#[test]
fn a_lost_client_state_readmits_that_client_only() {
    let (_server, mut con) = start();
    let _: i64 = line(&mut con, "RATELIMIT.SETRATE lim 4 1000 PER_CLIENT").unwrap();
    for client in ["c1", "c2"] {
        let _: Value = line(
            &mut con,
            &format!("RATELIMIT.TRYACQUIRE lim 4 CLIENT {client}"),
        )
        .unwrap();
    }
    evict(&mut con, "{lim}:permits:c1");
    assert_eq!(evicted_counted(&mut con), 1);
    assert_eq!(available_of(&mut con, "c1"), 4);
    assert_eq!(available_of(&mut con, "c2"), 0);
}

fn available_of(con: &mut Connection, client: &str) -> i64 {
    line(con, &format!("RATELIMIT.AVAILABLE lim CLIENT {client}")).unwrap()
}

/// Keys that are not a limiter's are not counted.
#[test]
fn other_keys_evicted_are_not_counted() {
    let (_server, mut con) = start();
    used_limiter(&mut con);
    let _: () = line(&mut con, "SET plain 1").unwrap();
    let _: i64 = line(&mut con, "HSET profile name x").unwrap();
    evict(&mut con, "plain");
    evict(&mut con, "profile");
    assert_eq!(evicted_counted(&mut con), 0);
    assert_eq!(available(&mut con, "lim"), 2);
}
