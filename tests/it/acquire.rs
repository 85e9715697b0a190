//! RATELIMIT.ACQUIRE against a real server: blocking until permits are free or TIMEOUT runs out,
//! first come first served, woken by module timers and by writes that free permits, no state left
//! behind by waiters that leave, effects replicated, no blocking inside MULTI or Lua.
//!
//! Tests where a client is served "at once", by a write, freeze the debug clock: then no timer can
//! have served it. Tests of the timers run on the real clock and check the order of events on the
//! server's clock (a grant's log score), never how long a wait took on the test's watch.

use std::io::Write;
use std::net::TcpStream;
use std::time::Instant;

use crate::common::waiters::*;
use crate::common::*;

/// Redisson's text, then the limiter's name.
fn not_initialized(name: &str) -> String {
    format!("ERR RateLimiter is not initialized (limiter '{name}')")
}
const EXCEEDS_RATE: &str = "ERR Requested permits amount cannot exceed defined rate";

/// A waiter that left (timed out, disconnected...) left no ghost in the queue: on the 2-permit
/// limiter `api`, releasing one permit lets a new request take it at once.
fn no_waiter_left_behind(con: &mut Connection) {
    assert_eq!(line::<i64>(con, "RATELIMIT.RELEASE api 1").unwrap(), 1);
    assert_eq!(try_acquire(con, "api", 1), None);
}

fn setrate(con: &mut Connection, args: &str) {
    let created: i64 = line(con, &format!("RATELIMIT.SETRATE {args}")).expect("SETRATE");
    assert_eq!(created, 1, "SETRATE {args}");
}

fn cpu_seconds(con: &mut Connection) -> f64 {
    let cpu = info(con, "cpu");
    field(&cpu, "used_cpu_sys") + field(&cpu, "used_cpu_user")
}

// ---- acquiring at once, errors at once --------------------------------------------------------

#[test]
fn acquires_at_once_when_it_can_and_errors_come_at_once() {
    let server = Server::start();
    let mut con = server.conn();
    // A call that blocked would never return (nothing frees a permit): the read fails instead.
    con.set_read_timeout(Some(HANG)).unwrap();
    setrate(&mut con, "api 3 60000");
    for permits in [1, 2] {
        let reply = reply_of(line(&mut con, &format!("RATELIMIT.ACQUIRE api {permits}")));
        assert_eq!(reply, Reply::Acquired);
    }
    assert_eq!(logged_permits(&mut con, "{api}:permits"), 3);
    assert_eq!(stat(&mut con, "waits"), 0, "nothing blocked");

    for (command, expected) in [
        ("RATELIMIT.ACQUIRE nope", not_initialized("nope")),
        ("RATELIMIT.ACQUIRE nope TIMEOUT 0", not_initialized("nope")),
        ("RATELIMIT.ACQUIRE api 4", EXCEEDS_RATE.into()),
        ("RATELIMIT.ACQUIRE api 4 TIMEOUT 5000", EXCEEDS_RATE.into()),
        (
            "RATELIMIT.ACQUIRE api TIMEOUT",
            "ERR syntax error, TIMEOUT needs a value".into(),
        ),
        (
            "RATELIMIT.ACQUIRE api BOGUS",
            "ERR syntax error, unknown option 'BOGUS'".into(),
        ),
    ] {
        assert_eq!(error_of(&mut con, command), expected, "{command}");
        assert_eq!(stat(&mut con, "waits"), 0, "{command} blocked");
    }
    setrate(&mut con, "pc 1 60000 PER_CLIENT");
    let _: () = line(&mut con, "SET plain x").unwrap();
    for (command, expected) in [
        (
            "RATELIMIT.ACQUIRE pc",
            "ERR the limiter is PER_CLIENT: CLIENT id is required",
        ),
        (
            "RATELIMIT.ACQUIRE plain TIMEOUT 0",
            "WRONGTYPE key 'plain' holds a string that is not a ONEKEY rate limiter",
        ),
    ] {
        assert_eq!(error_of(&mut con, command), expected, "{command}");
        assert_eq!(stat(&mut con, "waits"), 0, "{command} blocked");
    }
    let bad_timeout = error_of(&mut con, "RATELIMIT.ACQUIRE api TIMEOUT -1");
    assert!(bad_timeout.contains("TIMEOUT"), "{bad_timeout}");
    assert_eq!(blocked(&mut con), (0, 0));
    assert_eq!(stat(&mut con, "waits"), 0, "no error blocks");
    assert_eq!(
        logged_permits(&mut con, "{api}:permits"),
        3,
        "errors write nothing"
    );
}

// ---- timers --------------------------------------------------------------------------------

#[test]
fn a_waiter_wakes_when_the_permit_expires() {
    let server = Server::start();
    let mut con = server.conn();
    setrate(&mut con, "api 1 500");
    assert_eq!(try_acquire(&mut con, "api", 1), None);
    let last_grant = |con: &mut Connection| {
        let log = log_entries(con, "{api}:permits");
        assert_eq!(log.len(), 1, "each grant pruned the entry it replaced");
        log[0].1
    };
    let mut scores = vec![last_grant(&mut con)];

    // TIMEOUT 0 waits forever: it must not mean "give up at once".
    let first = spawn(&server, "RATELIMIT.ACQUIRE api TIMEOUT 0").join();
    scores.push(last_grant(&mut con));
    // A TIMEOUT longer than the wait does not matter: served at the permit's expiry.
    let second = spawn(&server, "RATELIMIT.ACQUIRE api 1 TIMEOUT 5000").join();
    scores.push(last_grant(&mut con));
    eprintln!(
        "1 permit per 500 ms: waiters served after {} ms and {} ms; grants {:?} ms apart",
        first.elapsed_ms(),
        second.elapsed_ms(),
        scores.windows(2).map(|p| p[1] - p[0]).collect::<Vec<_>>()
    );
    // Nothing but the module's timer could serve them: nobody else wrote.
    for served in [&first, &second] {
        assert_eq!(served.reply, Reply::Acquired);
    }
    // On the server's clock, no grant came before the previous permit expired.
    for pair in scores.windows(2) {
        let gap = pair[1] - pair[0];
        assert!(
            gap >= 500,
            "grants {gap} ms apart, inside the 500 ms interval: {scores:?}"
        );
    }
    assert_eq!(stat(&mut con, "waits"), 2);
    assert_eq!(stat(&mut con, "acquired"), 3);
    assert_eq!(stat(&mut con, "timeouts"), 0);
    assert_eq!(blocked(&mut con), (0, 0));
}

/// The TIMEOUT runs on the real clock; the hint is exact on the frozen one. The head must still
/// be waiting when the second client queues behind it: an attempt where it timed out first
/// shows nothing and runs again with a longer TIMEOUT.
#[test]
fn timeout_replies_the_hint_and_lets_the_next_waiter_go() {
    for timeout in [300, 3_000, 30_000] {
        if timeout_then_the_next_is_served(timeout) {
            return;
        }
        eprintln!("TIMEOUT {timeout} ran out before the second client queued: again, longer");
    }
    panic!("the head timed out before a second client could queue, even with TIMEOUT 30000");
}

fn timeout_then_the_next_is_served(timeout: u64) -> bool {
    let server = Server::start();
    let mut con = server.conn();
    set_clock(&mut con, T0);
    setrate(&mut con, "api 2 5000");
    assert_eq!(try_acquire(&mut con, "api", 1), None);
    advance(&mut con, 1000);
    // Needs 2 of the 1 left: waits for the first permit's expiry at T0+5000, but gives up first.
    let command = format!("RATELIMIT.ACQUIRE api 2 TIMEOUT {timeout}");
    let Some(head) = try_park(&server, &mut con, &command) else {
        return false;
    };
    // Would fit now, but queues behind the head (first come, first served): both are blocked.
    // (Had the head timed out first, this one would have been served at once.)
    let Some(next) = try_park(&server, &mut con, "RATELIMIT.ACQUIRE api 1") else {
        return false;
    };
    let head = served(head);
    eprintln!("TIMEOUT {timeout}: replied {:?}", head.reply);
    assert_eq!(
        head.reply,
        Reply::Wait(4000),
        "the wait for the first permit"
    );

    // The head left: the one behind it fits and is served by that (the frozen clock serves
    // nothing by itself).
    let next = served(next);
    assert_eq!(next.reply, Reply::Acquired);
    assert_eq!(blocked(&mut con), (0, 0));
    assert_eq!(stat(&mut con, "timeouts"), 1);
    assert_eq!(stat(&mut con, "waits"), 2);
    assert_eq!(
        logged_permits(&mut con, "{api}:permits"),
        2,
        "the timed-out waiter took nothing"
    );
    no_waiter_left_behind(&mut con);
    true
}

// ---- fairness --------------------------------------------------------------------------------

#[test]
fn a_large_waiter_parked_first_is_served_first() {
    let server = Server::start();
    let mut con = server.conn();
    set_clock(&mut con, T0);
    setrate(&mut con, "api 10 1000");
    assert_eq!(try_acquire(&mut con, "api", 9), None);
    advance(&mut con, 100);
    // 1 permit is free: the 10-permit waiter blocks...
    let big = park(&server, &mut con, "RATELIMIT.ACQUIRE api 10");
    // ...and the 1-permit waiter behind it does not take that permit.
    let small = park(&server, &mut con, "RATELIMIT.ACQUIRE api 1 TIMEOUT 0");
    // The free permit is owed to the waiters: AVAILABLE agrees with what TRYACQUIRE does.
    assert_eq!(line::<i64>(&mut con, "RATELIMIT.AVAILABLE api").unwrap(), 0);
    // Neither do a later TRYACQUIRE, or an ACQUIRE inside a script.
    assert!(try_acquire(&mut con, "api", 1).is_some());
    let in_lua: Option<i64> = redis::cmd("EVAL")
        .arg("return redis.call('RATELIMIT.ACQUIRE', KEYS[1])")
        .arg(1)
        .arg("api")
        .query(&mut con)
        .unwrap();
    assert!(in_lua.is_some(), "a script took a permit a waiter is owed");
    assert_eq!(line::<i64>(&mut con, "RATELIMIT.AVAILABLE api").unwrap(), 0);
    assert!(!big.is_done() && !small.is_done());

    // The 9 permits expire: the head takes all 10, the small one still waits.
    advance(&mut con, 900);
    let big = served(big);
    assert_eq!(big.reply, Reply::Acquired);
    sleep_ms(100);
    assert!(!small.is_done(), "served with no permit free");
    assert_eq!(blocked(&mut con), (1, 1));
    assert_eq!(line::<i64>(&mut con, "RATELIMIT.AVAILABLE api").unwrap(), 0);

    advance(&mut con, 1000);
    let small = served(small);
    assert_eq!(small.reply, Reply::Acquired);
    assert!(big.returned < small.returned);
    let log = log_entries(&mut con, "{api}:permits");
    let granted: Vec<(u32, i64)> = log.iter().map(|(m, s)| (member_permits(m), *s)).collect();
    assert_eq!(
        granted,
        vec![(1, T0 + 2000)],
        "10 at T0+1000, pruned; 1 at T0+2000"
    );
    assert_eq!(blocked(&mut con), (0, 0));
}

/// The waiters are parked on the frozen clock (so a slow setup cannot serve the first before
/// the second arrives), set at the server's own time; then the real clock takes over and the
/// module's timers serve them.
#[test]
fn waiters_are_served_in_arrival_order_on_the_real_clock() {
    let server = Server::start();
    let mut con = server.conn();
    let start = server_ms(&mut con);
    set_clock(&mut con, start);
    setrate(&mut con, "api 10 600");
    assert_eq!(try_acquire(&mut con, "api", 10), None);
    let big = park(&server, &mut con, "RATELIMIT.ACQUIRE api 10");
    let small = park(&server, &mut con, "RATELIMIT.ACQUIRE api 1");
    let _: String = line(&mut con, "RATELIMIT.DEBUG REALCLOCK").unwrap();
    let big = big.join();
    let small = small.join();
    assert_eq!(big.reply, Reply::Acquired);
    assert_eq!(small.reply, Reply::Acquired);
    // The small request fits as soon as the first 10 expire (start + 600), but only the big one
    // may take them then; the small one fits one interval after the big one's grant. On the
    // server's clock: its grant is at start + 1200 or later.
    let log = log_entries(&mut con, "{api}:permits");
    let granted: Vec<(u32, i64)> = log.iter().map(|(m, s)| (member_permits(m), *s)).collect();
    eprintln!(
        "grants after the start: {:?}",
        granted
            .iter()
            .map(|(p, s)| (*p, s - start))
            .collect::<Vec<_>>()
    );
    let small_at = granted
        .iter()
        .find(|(permits, _)| *permits == 1)
        .map(|(_, at)| *at)
        .expect("the 1-permit grant in the log");
    assert!(
        small_at >= start + 1200,
        "the 1-permit waiter was served {} ms after the start, before the 10-permit one's permits \
         could expire",
        small_at - start
    );
}

// ---- hundreds of waiters ---------------------------------------------------------------------

#[test]
fn hundreds_of_waiters_cost_no_cpu_and_are_served_at_the_rate_in_order() {
    const WAITERS: usize = 300;
    const RATE: usize = 100;
    let server = Server::start();
    let mut con = server.conn();
    setrate(&mut con, "load 1 60000");
    assert_eq!(try_acquire(&mut con, "load", 1), None);
    let mut waiters = Vec::with_capacity(WAITERS);
    for _ in 0..WAITERS {
        let waiter = spawn(&server, "RATELIMIT.ACQUIRE load");
        waiters.push(waiter);
        // One at a time, so the arrival order is known.
        wait_blocked(&mut con, waiters.len() as i64);
    }

    // Exhausted for a minute: the server must sit idle, not poll.
    let cpu_before = cpu_seconds(&mut con);
    let wall = Instant::now();
    sleep_ms(2000);
    let cpu = cpu_seconds(&mut con) - cpu_before;
    let per_second = cpu / wall.elapsed().as_secs_f64();
    eprintln!(
        "{WAITERS} blocked waiters: server used {cpu:.4} s CPU in {:.2} s wall ({per_second:.4} s/s)",
        wall.elapsed().as_secs_f64()
    );
    assert!(
        per_second < 0.2,
        "server busy while waiters wait: {per_second:.3} s CPU per second"
    );
    assert_eq!(blocked(&mut con), (WAITERS as i64, WAITERS as i64));
    assert!(
        waiters.iter().all(|w| !w.is_done()),
        "served with no permit"
    );

    // Raise the rate to 100 per second (state reset): 100 at once, then 100 per second.
    let raised = Instant::now();
    setrate(&mut con, &format!("load {RATE} 1000"));
    let served: Vec<Served> = waiters.into_iter().map(Waiter::join).collect();
    let after_ms = |s: &Served| s.returned.duration_since(raised).as_millis();
    for (i, s) in served.iter().enumerate() {
        assert_eq!(s.reply, Reply::Acquired, "waiter {i}");
    }
    let batch_ms = |batch: usize| {
        let ms: Vec<u128> = served[batch * RATE..(batch + 1) * RATE]
            .iter()
            .map(after_ms)
            .collect();
        (*ms.iter().min().unwrap(), *ms.iter().max().unwrap())
    };
    let batches: Vec<(u128, u128)> = (0..WAITERS / RATE).map(batch_ms).collect();
    eprintln!("batches of {RATE} served after (first, last) ms: {batches:?}");
    // Arrival order: no waiter of batch k is served before one interval after batch k-1 could
    // be (a waiter's reply is read after it was sent, so a busy machine only makes these later).
    assert!(
        batches[1].0 >= 950 && batches[2].0 >= 1950,
        "a later batch was served an interval early: {batches:?}"
    );

    // On the server's clock: each batch was granted as the previous one expired (pruning it),
    // so the log holds exactly the last RATE grants.
    let permits = logged_permits(&mut con, "{load}:permits");
    assert_eq!(permits as usize, RATE, "the log holds the last batch only");
    assert_eq!(
        line::<i64>(&mut con, "RATELIMIT.AVAILABLE load").unwrap(),
        0
    );

    assert_eq!(blocked(&mut con), (0, 0));
    assert_eq!(stat(&mut con, "waits"), WAITERS as i64);
    assert_eq!(stat(&mut con, "acquired"), WAITERS as i64 + 1);
    assert_eq!(stat(&mut con, "timeouts"), 0);
}

// ---- leaving the queue -----------------------------------------------------------------------

#[test]
fn a_disconnected_waiter_leaves_nothing_and_the_next_is_served() {
    let server = Server::start();
    let mut con = server.conn();
    set_clock(&mut con, T0);
    setrate(&mut con, "api 2 60000");
    assert_eq!(try_acquire(&mut con, "api", 1), None);

    // A raw socket, so the test really closes the connection while the command is blocked.
    let mut socket = TcpStream::connect(("127.0.0.1", server.port)).expect("connect");
    let before = blocked(&mut con).1;
    socket
        .write_all(
            &redis::cmd("RATELIMIT.ACQUIRE")
                .arg("api")
                .arg(2)
                .get_packed_command(),
        )
        .unwrap();
    wait_blocked(&mut con, before + 1);
    let next = park(&server, &mut con, "RATELIMIT.ACQUIRE api 1");
    // A waiter in the middle of a queue may disconnect too.
    let mut middle = TcpStream::connect(("127.0.0.1", server.port)).expect("connect");
    middle
        .write_all(
            &redis::cmd("RATELIMIT.ACQUIRE")
                .arg("api")
                .arg(1)
                .get_packed_command(),
        )
        .unwrap();
    wait_blocked(&mut con, 3);
    drop(middle);
    wait_blocked(&mut con, 2);
    assert!(!next.is_done(), "the head is still in line");

    drop(socket);
    // The head is gone: the permit it held back goes to the next waiter, at once.
    let next = served(next);
    assert_eq!(next.reply, Reply::Acquired);
    wait_blocked(&mut con, 0);
    assert_eq!(stat(&mut con, "waits"), 3);
    assert_eq!(stat(&mut con, "timeouts"), 0);
    assert_eq!(
        logged_permits(&mut con, "{api}:permits"),
        2,
        "the disconnected waiters took nothing"
    );
    no_waiter_left_behind(&mut con);
}

#[test]
fn client_unblock_replies_the_hint_and_leaves_nothing() {
    let server = Server::start();
    let mut con = server.conn();
    set_clock(&mut con, T0);
    setrate(&mut con, "api 2 60000");
    assert_eq!(try_acquire(&mut con, "api", 1), None);
    let head = park(&server, &mut con, "RATELIMIT.ACQUIRE api 2");
    let second = park(&server, &mut con, "RATELIMIT.ACQUIRE api 1");
    let third = park(&server, &mut con, "RATELIMIT.ACQUIRE api 1 TIMEOUT 0");

    let unblocked: i64 = line(&mut con, &format!("CLIENT UNBLOCK {}", head.id)).unwrap();
    assert_eq!(unblocked, 1);
    let head = served(head);
    match head.reply {
        Reply::Wait(ms) => assert!((55_000..=60_000).contains(&ms), "hint {ms}"),
        ref other => panic!("expected the wait hint, got {other:?}"),
    }
    // The head left: the next fits the free permit.
    let second = served(second);
    assert_eq!(second.reply, Reply::Acquired);
    sleep_ms(100);
    assert!(!third.is_done(), "served with no permit free");

    let unblocked: i64 = line(&mut con, &format!("CLIENT UNBLOCK {} ERROR", third.id)).unwrap();
    assert_eq!(unblocked, 1);
    let third = served(third);
    match &third.reply {
        Reply::Error(e) => assert!(e.starts_with("UNBLOCKED"), "{e}"),
        other => panic!("expected the UNBLOCKED error, got {other:?}"),
    }
    wait_blocked(&mut con, 0);
    assert_eq!(stat(&mut con, "waits"), 3);
    // No ghost in the queue.
    assert_eq!(line::<i64>(&mut con, "RATELIMIT.RELEASE api 2").unwrap(), 2);
    assert_eq!(try_acquire(&mut con, "api", 2), None);
}

#[test]
fn delete_fails_the_waiters_and_leaves_nothing() {
    let server = Server::start();
    let mut con = server.conn();
    set_clock(&mut con, T0);
    setrate(&mut con, "api 1 60000");
    assert_eq!(try_acquire(&mut con, "api", 1), None);
    let errors = stat(&mut con, "errors");
    let a = park(&server, &mut con, "RATELIMIT.ACQUIRE api");
    let b = park(&server, &mut con, "RATELIMIT.ACQUIRE api 1 TIMEOUT 30000");
    assert_eq!(line::<i64>(&mut con, "RATELIMIT.DELETE api").unwrap(), 3);
    for waiter in [a, b] {
        let served = served(waiter);
        assert_eq!(served.reply, Reply::Error(not_initialized("api")));
    }
    wait_blocked(&mut con, 0);
    assert_eq!(stat(&mut con, "errors"), errors + 2);
    assert_eq!(stat(&mut con, "timeouts"), 0);
    assert!(
        snapshot(&mut con).is_empty(),
        "the failed waiters wrote nothing"
    );
    // A new limiter of the same name starts clean: no ghost waiter.
    setrate(&mut con, "api 1 60000");
    assert_eq!(try_acquire(&mut con, "api", 1), None);
}

#[test]
fn a_plain_del_of_the_hash_fails_the_waiter() {
    let server = Server::start();
    let mut con = server.conn();
    set_clock(&mut con, T0);
    setrate(&mut con, "api 1 60000");
    assert_eq!(try_acquire(&mut con, "api", 1), None);
    let waiter = park(&server, &mut con, "RATELIMIT.ACQUIRE api");
    assert_eq!(line::<i64>(&mut con, "DEL api").unwrap(), 1);
    let served = served(waiter);
    assert_eq!(served.reply, Reply::Error(not_initialized("api")));
    wait_blocked(&mut con, 0);
}

#[test]
fn setrate_below_a_waiters_permits_fails_it_and_serves_the_rest() {
    let server = Server::start();
    let mut con = server.conn();
    set_clock(&mut con, T0);
    setrate(&mut con, "api 5 60000");
    assert_eq!(try_acquire(&mut con, "api", 5), None);
    let five = park(&server, &mut con, "RATELIMIT.ACQUIRE api 5");
    let two = park(&server, &mut con, "RATELIMIT.ACQUIRE api 2 TIMEOUT 30000");
    // A new rate of 3 (state reset): 5 can never fit, 2 fits at once.
    setrate(&mut con, "api 3 60000");
    let five = served(five);
    assert_eq!(five.reply, Reply::Error(EXCEEDS_RATE.into()));
    let two = served(two);
    assert_eq!(two.reply, Reply::Acquired);
    wait_blocked(&mut con, 0);
    assert_eq!(line::<i64>(&mut con, "RATELIMIT.AVAILABLE api").unwrap(), 1);
    assert_eq!(try_acquire(&mut con, "api", 1), None, "no ghost waiter");
}

#[test]
fn setrate_raising_the_rate_serves_waiters_at_once() {
    let server = Server::start();
    let mut con = server.conn();
    // Frozen: no timer serves anyone, only the rate change can.
    set_clock(&mut con, T0);
    setrate(&mut con, "api 2 60000");
    assert_eq!(try_acquire(&mut con, "api", 2), None);
    let a = park(&server, &mut con, "RATELIMIT.ACQUIRE api");
    let b = park(&server, &mut con, "RATELIMIT.ACQUIRE api 2");
    let c = park(&server, &mut con, "RATELIMIT.ACQUIRE api TIMEOUT 0");
    // KEEPSTATE: 2 of the new 5 are still logged, 3 are free: a (1) and b (2) fit, c does not.
    setrate(&mut con, "api 5 60000 KEEPSTATE");
    for waiter in [a, b] {
        assert_eq!(served(waiter).reply, Reply::Acquired);
    }
    sleep_ms(100);
    assert!(!c.is_done(), "served with no permit free");
    assert_eq!(blocked(&mut con), (1, 1));
    // A rate change without KEEPSTATE resets the state: c fits.
    setrate(&mut con, "api 5 60000");
    let c = served(c);
    assert_eq!(c.reply, Reply::Acquired);
    wait_blocked(&mut con, 0);
}

// ---- woken by writes of other clients ------------------------------------------------------

#[test]
fn release_by_another_client_serves_the_waiter_at_once() {
    let server = Server::start();
    let mut con = server.conn();
    set_clock(&mut con, T0);
    setrate(&mut con, "api 1 60000");
    assert_eq!(try_acquire(&mut con, "api", 1), None);
    let waiter = park(&server, &mut con, "RATELIMIT.ACQUIRE api");
    sleep_ms(100);
    assert!(!waiter.is_done());
    assert_eq!(line::<i64>(&mut con, "RATELIMIT.RELEASE api 1").unwrap(), 1);
    let served = served(waiter);
    assert_eq!(served.reply, Reply::Acquired);
    wait_blocked(&mut con, 0);
    assert_eq!(log_entries(&mut con, "{api}:permits").len(), 1);
}

#[test]
fn plain_writes_to_the_limiter_keys_serve_the_waiter_at_once() {
    let server = Server::start();
    let mut con = server.conn();
    set_clock(&mut con, T0);

    // DEL of the log: the value "0" is no longer backed by any entry, the permits are free.
    setrate(&mut con, "a 1 60000");
    assert_eq!(try_acquire(&mut con, "a", 1), None);
    let waiter = park(&server, &mut con, "RATELIMIT.ACQUIRE a");
    assert_eq!(line::<i64>(&mut con, "DEL {a}:permits").unwrap(), 1);
    assert_eq!(served(waiter).reply, Reply::Acquired);

    // DEL of value and log (a reset done by hand).
    setrate(&mut con, "b 1 60000");
    assert_eq!(try_acquire(&mut con, "b", 1), None);
    let waiter = park(&server, &mut con, "RATELIMIT.ACQUIRE b");
    assert_eq!(
        line::<i64>(&mut con, "DEL {b}:value {b}:permits").unwrap(),
        2
    );
    assert_eq!(served(waiter).reply, Reply::Acquired);

    // A Redisson client's release: its script raises the value with plain commands.
    setrate(&mut con, "c 1 60000");
    assert_eq!(try_acquire(&mut con, "c", 1), None);
    let waiter = park(&server, &mut con, "RATELIMIT.ACQUIRE c");
    let _: i64 = redis::cmd("EVAL")
        .arg("return redis.call('incrby', KEYS[1], ARGV[1])")
        .arg(1)
        .arg("{c}:value")
        .arg(1)
        .query(&mut con)
        .unwrap();
    assert_eq!(served(waiter).reply, Reply::Acquired);

    // An HSET raising `rate`, on a limiter whose value is to be derived from the log (missing,
    // as after a Redisson client's reset or its expiry): 1 permit logged, 2 of the new 3 free.
    setrate(&mut con, "d 1 60000");
    assert_eq!(try_acquire(&mut con, "d", 1), None);
    assert_eq!(line::<i64>(&mut con, "DEL {d}:value").unwrap(), 1);
    let waiter = park(&server, &mut con, "RATELIMIT.ACQUIRE d");
    sleep_ms(100);
    assert!(!waiter.is_done(), "served with no permit free");
    assert_eq!(line::<i64>(&mut con, "HSET d rate 3").unwrap(), 0);
    assert_eq!(served(waiter).reply, Reply::Acquired);

    // Writes that free nothing (the value deleted, the log still full) wake no one for nothing.
    setrate(&mut con, "e 1 60000");
    assert_eq!(try_acquire(&mut con, "e", 1), None);
    let waiter = park(&server, &mut con, "RATELIMIT.ACQUIRE e");
    assert_eq!(line::<i64>(&mut con, "DEL {e}:value").unwrap(), 1);
    sleep_ms(200);
    assert!(
        !waiter.is_done(),
        "served while the log says the permit is taken"
    );
    assert_eq!(line::<i64>(&mut con, "RATELIMIT.RELEASE e 1").unwrap(), 1);
    assert_eq!(served(waiter).reply, Reply::Acquired);
    wait_blocked(&mut con, 0);
    assert_eq!(stat(&mut con, "waits"), 5);
}

/// A value key that *appears* (RENAME, COPY, MOVE or RESTORE onto a missing key) can free
/// permits: a missing value is derived from the log. Only a generic `rename_to` / `copy_to` /
/// `move_to` / `restore` event says so, which the waiters hear on Redis 7.0 only (elsewhere the
/// module does not subscribe to that class: Valkey 8.1 leaves the client of MOVE or COPY ... DB in
/// the wrong database when a module does). docs/commands/acquire.md says so; the waiter is
/// served at its next check, here the clock's next move.
#[test]
fn a_value_key_renamed_into_place_frees_the_waiter_by_its_next_check() {
    let server = Server::start();
    let mut con = server.conn();
    set_clock(&mut con, T0);
    let set: i64 = line(&mut con, "RATELIMIT.SETRATE x 2 1000").unwrap();
    assert_eq!(set, 1);
    assert_eq!(try_acquire(&mut con, "x", 2), None);
    // A missing value is derived from the log: nothing is available.
    let deleted: i64 = line(&mut con, "DEL {x}:value").unwrap();
    assert_eq!(deleted, 1);
    assert_eq!(available(&mut con, "x"), 0);
    let waiter = park(&server, &mut con, "RATELIMIT.ACQUIRE x 1");
    assert!(!exists(&mut con, "{x}:value"), "a refusal writes no value");
    let ok: String = line(&mut con, "SET staged 1").unwrap();
    assert_eq!(ok, "OK");
    let ok: String = line(&mut con, "RENAME staged {x}:value").unwrap();
    assert_eq!(ok, "OK");
    // 1 ms later, far from when the log frees anything: only the value freed a permit.
    advance(&mut con, 1);
    assert_eq!(
        served(waiter).reply,
        Reply::Acquired,
        "the value written by RENAME frees a permit"
    );
}

#[test]
fn per_client_queues_are_independent() {
    let server = Server::start();
    let mut con = server.conn();
    set_clock(&mut con, T0);
    setrate(&mut con, "pc 1 60000 PER_CLIENT");
    assert_eq!(
        reply_of(line(&mut con, "RATELIMIT.TRYACQUIRE pc CLIENT a")),
        Reply::Acquired
    );
    let a = park(&server, &mut con, "RATELIMIT.ACQUIRE pc CLIENT a");
    // Client b has its own permit and its own (empty) queue: acquired at once.
    assert_eq!(
        reply_of(line(&mut con, "RATELIMIT.ACQUIRE pc CLIENT b")),
        Reply::Acquired
    );
    let b = park(&server, &mut con, "RATELIMIT.ACQUIRE pc CLIENT b");
    // Client a's later request queues behind a's waiter only.
    assert!(matches!(
        reply_of(line(&mut con, "RATELIMIT.TRYACQUIRE pc CLIENT a")),
        Reply::Wait(_)
    ));
    // A permit released by b goes to b's waiter, not a's.
    assert_eq!(
        line::<i64>(&mut con, "RATELIMIT.RELEASE pc 1 CLIENT b").unwrap(),
        1
    );
    let b = served(b);
    assert_eq!(b.reply, Reply::Acquired);
    sleep_ms(100);
    assert!(!a.is_done(), "a's waiter served by b's release");
    assert_eq!(blocked(&mut con), (1, 1));
    assert_eq!(
        line::<i64>(&mut con, "RATELIMIT.RELEASE pc 1 CLIENT a").unwrap(),
        1
    );
    let a = served(a);
    assert_eq!(a.reply, Reply::Acquired);
    wait_blocked(&mut con, 0);
    assert_eq!(log_entries(&mut con, "{pc}:permits:a").len(), 1);
    assert_eq!(log_entries(&mut con, "{pc}:permits:b").len(), 1);
}

#[test]
fn an_overall_limiter_has_one_queue_whatever_the_client() {
    let server = Server::start();
    let mut con = server.conn();
    set_clock(&mut con, T0);
    setrate(&mut con, "api 1 60000");
    assert_eq!(try_acquire(&mut con, "api", 1), None);
    let x = park(&server, &mut con, "RATELIMIT.ACQUIRE api CLIENT x");
    let y = park(&server, &mut con, "RATELIMIT.ACQUIRE api CLIENT y");
    assert!(matches!(
        reply_of(line(&mut con, "RATELIMIT.TRYACQUIRE api CLIENT z")),
        Reply::Wait(_)
    ));
    assert_eq!(
        line::<i64>(&mut con, "RATELIMIT.RELEASE api 1 CLIENT y").unwrap(),
        1
    );
    let x = served(x);
    assert_eq!(
        x.reply,
        Reply::Acquired,
        "the first in line gets the permit"
    );
    sleep_ms(100);
    assert!(!y.is_done(), "served with no permit free");
    assert_eq!(line::<i64>(&mut con, "RATELIMIT.RELEASE api 1").unwrap(), 1);
    let y = served(y);
    assert_eq!(y.reply, Reply::Acquired);
    wait_blocked(&mut con, 0);
    assert_eq!(log_entries(&mut con, "{api}:permits").len(), 1);
}

// ---- the debug clock -----------------------------------------------------------------------

#[test]
fn advance_serves_waiters_whose_time_has_come() {
    let server = Server::start();
    let mut con = server.conn();
    set_clock(&mut con, T0);
    setrate(&mut con, "api 1 1000");
    assert_eq!(try_acquire(&mut con, "api", 1), None);
    let first = park(&server, &mut con, "RATELIMIT.ACQUIRE api");
    let second = park(&server, &mut con, "RATELIMIT.ACQUIRE api TIMEOUT 0");
    // The frozen clock does not move by itself: real time passes, nobody is served.
    sleep_ms(300);
    advance(&mut con, 999);
    sleep_ms(100);
    assert!(!first.is_done() && !second.is_done(), "served 1 ms early");
    assert_eq!(blocked(&mut con), (2, 2));

    advance(&mut con, 1);
    let first = served(first);
    assert_eq!(first.reply, Reply::Acquired);
    sleep_ms(100);
    assert!(!second.is_done());
    let log = log_entries(&mut con, "{api}:permits");
    assert_eq!(log.len(), 1);
    assert_eq!(log[0].1, T0 + 1000, "granted at the frozen clock's time");

    advance(&mut con, 1000);
    let second = served(second);
    assert_eq!(second.reply, Reply::Acquired);
    assert_eq!(log_entries(&mut con, "{api}:permits")[0].1, T0 + 2000);
    wait_blocked(&mut con, 0);
    assert_eq!(stat(&mut con, "waits"), 2);
}

// ---- no blocking in MULTI or Lua -------------------------------------------------------------

#[test]
fn multi_and_lua_answer_at_once_like_tryacquire() {
    let server = Server::start();
    let mut con = server.conn();
    // An ACQUIRE that blocked would never return (nothing frees the permit): the read fails.
    con.set_read_timeout(Some(HANG)).unwrap();
    set_clock(&mut con, T0);
    setrate(&mut con, "api 1 60000");

    let (first,): (Option<i64>,) = redis::pipe()
        .atomic()
        .cmd("RATELIMIT.ACQUIRE")
        .arg("api")
        .arg("TIMEOUT")
        .arg(0)
        .query(&mut con)
        .unwrap();
    assert_eq!(first, None, "acquired inside MULTI");
    let (second,): (Option<i64>,) = redis::pipe()
        .atomic()
        .cmd("RATELIMIT.ACQUIRE")
        .arg("api")
        .query(&mut con)
        .unwrap();
    let hint = second.expect("a wait hint from ACQUIRE inside MULTI");
    assert!((59_000..=60_000).contains(&hint), "hint {hint}");

    let in_lua: Option<i64> = redis::cmd("EVAL")
        .arg("return redis.call('RATELIMIT.ACQUIRE', KEYS[1], 1, 'TIMEOUT', 5000)")
        .arg(1)
        .arg("api")
        .query(&mut con)
        .unwrap();
    let hint = in_lua.expect("a wait hint from ACQUIRE in a script");
    assert!((59_000..=60_000).contains(&hint), "hint {hint}");
    // A function is a script too.
    let _: String = redis::cmd("FUNCTION")
        .arg("LOAD")
        .arg(
            "#!lua name=acq\n\
             redis.register_function('acq', function(keys) \
             return redis.call('RATELIMIT.ACQUIRE', keys[1]) end)",
        )
        .query(&mut con)
        .unwrap();
    let in_function: Option<i64> = redis::cmd("FCALL")
        .arg("acq")
        .arg(1)
        .arg("api")
        .query(&mut con)
        .unwrap();
    let hint = in_function.expect("a wait hint from ACQUIRE in a function");
    assert!((59_000..=60_000).contains(&hint), "hint {hint}");
    assert_eq!(stat(&mut con, "waits"), 0, "blocked");

    // Errors too come at once, as replies inside the transaction.
    let results: Vec<Value> = redis::pipe()
        .atomic()
        .cmd("RATELIMIT.ACQUIRE")
        .arg("api")
        .arg(2)
        .query(&mut con)
        .unwrap_or_else(|e| vec![Value::SimpleString(error_line(&e))]);
    assert!(
        format!("{results:?}").contains("cannot exceed defined rate"),
        "{results:?}"
    );
    assert_eq!(stat(&mut con, "waits"), 0);
    assert_eq!(blocked(&mut con), (0, 0));
    assert_eq!(log_entries(&mut con, "{api}:permits").len(), 1);
}

// ---- replication -----------------------------------------------------------------------------

/// The module's timers grant outside any client's command: their effects must replicate too.
/// On the frozen clock, ADVANCE wakes the queues through a timer; the grants come in rounds, one
/// per interval.
#[test]
fn grants_made_by_timers_replicate_as_effects() {
    let master = Server::start();
    let plain = Server::start_replica(&master, false);
    let mut con = master.conn();
    set_clock(&mut con, T0);
    setrate(&mut con, "api 2 600 KEEPALIVE 60000");
    setrate(&mut con, "pc 1 600 PER_CLIENT");
    assert_eq!(try_acquire(&mut con, "api", 2), None);
    assert_eq!(
        reply_of(line(&mut con, "RATELIMIT.TRYACQUIRE pc CLIENT x")),
        Reply::Acquired
    );
    let mut waiters = Vec::new();
    for _ in 0..4 {
        waiters.push(park(&master, &mut con, "RATELIMIT.ACQUIRE api TIMEOUT 0"));
    }
    waiters.push(park(&master, &mut con, "RATELIMIT.ACQUIRE pc CLIENT x"));
    // One that times out, and writes nothing.
    let timed_out = spawn(&master, "RATELIMIT.ACQUIRE api 2 TIMEOUT 100");
    assert!(
        matches!(timed_out.join().reply, Reply::Wait(_)),
        "a waiter behind four on a frozen clock"
    );
    advance(&mut con, 600);
    advance(&mut con, 600);
    let replies: Vec<Reply> = waiters.into_iter().map(|w| served(w).reply).collect();
    assert!(replies.iter().all(|r| *r == Reply::Acquired), "{replies:?}");
    assert_eq!(stat(&mut con, "waits"), 6);

    wait_replicas(&mut con, 1);
    let on_master = snapshot(&mut con);
    assert_eq!(on_master.len(), 6, "api and pc: hash, value, log each");
    assert_eq!(
        logged_permits(&mut con, "{api}:permits"),
        2,
        "the last two grants, 600 ms after the first two"
    );
    assert_eq!(snapshot(&mut plain.conn()), on_master);
}

#[test]
fn flushall_fails_waiters_at_once() {
    // FLUSHALL deletes keys without per-key events; the module listens for the flush itself.
    let server = Server::start();
    let mut con = server.conn();
    set_clock(&mut con, T0);
    setrate(&mut con, "fl 1 600000");
    assert_eq!(try_acquire(&mut con, "fl", 1), None);
    let waiter = park(&server, &mut con, "RATELIMIT.ACQUIRE fl");
    let _: String = line(&mut con, "FLUSHALL").unwrap();
    let served = served(waiter);
    assert_eq!(served.reply, Reply::Error(not_initialized("fl")));
    wait_blocked(&mut con, 0);
}

#[test]
fn a_timed_out_waiter_is_told_the_wait_behind_the_queue() {
    // Full 3-per-second window: one permit frees at +1000, +1100 and +1200 each. A 2-permit
    // waiter is parked first; a 1-permit waiter behind it times out. Its own permit would free
    // at +1000 (hint 700), but the 2 ahead of it come first: 3 permits are free at +1200.
    let server = Server::start();
    let mut con = server.conn();
    set_clock(&mut con, T0);
    setrate(&mut con, "q 3 1000");
    for _ in 0..3 {
        assert_eq!(try_acquire(&mut con, "q", 1), None);
        advance(&mut con, 100);
    }
    let head = park(&server, &mut con, "RATELIMIT.ACQUIRE q 2");
    let behind = spawn(&server, "RATELIMIT.ACQUIRE q 1 TIMEOUT 100");
    assert_eq!(served(behind).reply, Reply::Wait(900));
    advance(&mut con, 900);
    let head = served(head);
    assert_eq!(head.reply, Reply::Acquired, "the head is served at +1200");
}

// ---- the limiter changed under its waiters ---------------------------------------------------

/// A queue keeps the configuration its limiter was resolved with between checks, and resolves
/// it again only when an event says the limiter changed. Each way of changing it: `api` allows
/// 2 per 60 s, both taken at T0, and a waiter has been checked once more by the clock (at
/// T0 + 1000, still refused under 60 s: the kept configuration in use). Then `change` makes the
/// window 1 s from another client, under which the T0 grants are out of it: the waiter must be
/// served at once by the new configuration (the frozen clock serves nothing by itself; under the
/// kept one it would wait till T0 + 60 000), its grant logged at T0 + 1000. `prepare` runs at
/// T0, before the waiter blocks.
fn waiter_served_by_the_changed_limiter(
    prepare: impl FnOnce(&Server),
    change: impl FnOnce(&Server, &mut Connection),
) {
    let server = Server::start();
    let mut con = server.conn();
    set_clock(&mut con, T0);
    prepare(&server);
    setrate(&mut con, "api 2 60000");
    assert_eq!(try_acquire(&mut con, "api", 2), None);
    let waiter = park(&server, &mut con, "RATELIMIT.ACQUIRE api");
    advance(&mut con, 1000);
    // The check ADVANCE asked for has run once this command is answered behind it.
    let _: String = line(&mut con, "PING").unwrap();
    assert_eq!(blocked(&mut con), (1, 1), "served under the 60 s window");
    change(&server, &mut con);
    assert_eq!(served(waiter).reply, Reply::Acquired);
    wait_blocked(&mut con, 0);
    let log = log_entries(&mut con, "{api}:permits");
    assert_eq!(log.last().map(|entry| entry.1), Some(T0 + 1000));
}

#[test]
fn waiters_are_served_by_the_configuration_a_plain_hset_writes() {
    waiter_served_by_the_changed_limiter(
        |_| {},
        |server, _| {
            let mut other = server.conn();
            assert_eq!(
                line::<i64>(&mut other, "HSET api interval 1000").unwrap(),
                0
            );
        },
    );
}

/// SETRATE KEEPSTATE rewrites the state for the new rate itself, so the waiter it must fail is
/// one the old rate would keep waiting: 2 permits, under a new rate of 1.
#[test]
fn waiters_are_served_by_the_configuration_setrate_writes() {
    let server = Server::start();
    let mut con = server.conn();
    set_clock(&mut con, T0);
    setrate(&mut con, "api 2 60000");
    assert_eq!(try_acquire(&mut con, "api", 2), None);
    let waiter = park(&server, &mut con, "RATELIMIT.ACQUIRE api 2");
    advance(&mut con, 1000);
    let _: String = line(&mut con, "PING").unwrap();
    assert_eq!(blocked(&mut con), (1, 1), "served under the 60 s window");
    let mut other = server.conn();
    let set: i64 = line(&mut other, "RATELIMIT.SETRATE api 1 60000 KEEPSTATE").unwrap();
    assert_eq!(set, 1);
    assert_eq!(served(waiter).reply, Reply::Error(EXCEEDS_RATE.into()));
    wait_blocked(&mut con, 0);
}

#[test]
fn waiters_are_served_by_the_configuration_a_redisson_script_writes() {
    // Redisson's setRate rewrites rate, interval and type with plain HSETs in its script (here
    // without deleting the state, which would free the permits by itself).
    waiter_served_by_the_changed_limiter(
        |_| {},
        |server, _| {
            let mut other = server.conn();
            let _: () = redis::cmd("EVAL")
                .arg(
                    "redis.call('hset', KEYS[1], 'rate', ARGV[1]); \
                 redis.call('hset', KEYS[1], 'interval', ARGV[2]); \
                 redis.call('hset', KEYS[1], 'type', ARGV[3])",
                )
                .arg(1)
                .arg("api")
                .arg(2)
                .arg(1000)
                .arg(0)
                .query(&mut other)
                .unwrap();
        },
    );
}

#[test]
fn waiters_are_served_by_the_configuration_a_del_and_hset_write() {
    waiter_served_by_the_changed_limiter(
        |_| {},
        |server, _| {
            let mut other = server.conn();
            let replies: Vec<redis::Value> = redis::pipe()
                .atomic()
                .cmd("DEL")
                .arg("api")
                .cmd("HSET")
                .arg(&["api", "rate", "2", "interval", "1000", "type", "0"])
                .query(&mut other)
                .unwrap();
            assert_eq!(replies.len(), 2);
        },
    );
}

#[test]
fn waiters_are_served_by_the_configuration_renamed_into_place() {
    waiter_served_by_the_changed_limiter(
        |_| {},
        |server, _| {
            let mut other = server.conn();
            setrate(&mut other, "other 2 1000");
            let _: String = line(&mut other, "RENAME other api").unwrap();
        },
    );
}

#[test]
fn waiters_are_served_by_the_configuration_swapdb_brings() {
    // Database 1's `api`: 1 s, both permits taken at T0 too, so only its configuration frees
    // the waiter, not an empty state.
    let prepare = |server: &Server| {
        let mut db1 = server.conn();
        let _: String = line(&mut db1, "SELECT 1").unwrap();
        setrate(&mut db1, "api 2 1000");
        assert_eq!(try_acquire(&mut db1, "api", 2), None);
    };
    waiter_served_by_the_changed_limiter(prepare, |server, _| {
        let mut other = server.conn();
        let _: String = line(&mut other, "SWAPDB 0 1").unwrap();
    });
}

#[test]
fn waiters_fail_when_their_limiter_expires() {
    let server = Server::start();
    let mut con = server.conn();
    set_clock(&mut con, T0);
    setrate(&mut con, "api 2 60000");
    assert_eq!(try_acquire(&mut con, "api", 2), None);
    let waiter = park(&server, &mut con, "RATELIMIT.ACQUIRE api");
    advance(&mut con, 1000);
    let _: String = line(&mut con, "PING").unwrap();
    // The hash expires on the server's clock; its expiry (active, or on the next check's
    // opening) forgets the configuration the queue kept.
    assert_eq!(line::<i64>(&mut con, "PEXPIRE api 1").unwrap(), 1);
    assert_eq!(served(waiter).reply, Reply::Error(not_initialized("api")));
    wait_blocked(&mut con, 0);
}

/// A field of the configuration gets a TTL of its own while a client waits: the queue, told by
/// the field's event, reads the configuration again, and must not keep it, since the TTL then
/// passes with no event (active expiry off here: only a read finds the field gone). Redis 8
/// shows the TTL to the module; Redis 7.4 and Valkey 9 do not, and the module asks the server,
/// as the config cache does. Once the `rate` field has expired, the waiter's next check (by the
/// debug clock, past the 60 s window that refused it) finds the limiter without a configuration
/// and fails it: under the configuration kept from before, it would be granted.
#[test]
fn waiters_are_served_by_the_configuration_a_field_ttl_leaves() {
    for ttl in FIELD_TTLS_MS {
        match waiter_after_a_field_ttl(ttl) {
            None => return eprintln!("no HPEXPIRE on this server: nothing to check"),
            Some(true) => return,
            Some(false) => eprintln!("the checks outlasted a {ttl} ms TTL: again, longer"),
        }
    }
    panic!("the checks outlasted every TTL tried: {FIELD_TTLS_MS:?} ms");
}

/// Where the server hides field TTLs from modules (Redis 7.4, Valkey 9), the module asks
/// `HPTTL` before it keeps a configuration read from the hash: a blocking ACQUIRE that reads it
/// asks once, for the config cache and for its queue alike.
#[test]
fn a_waiter_asks_about_field_ttls_once() {
    let server = Server::start_with(
        &["debug-commands", "yes"],
        &["--enable-debug-command", "yes"],
    );
    let mut con = server.conn();
    if field_ttls(&mut con) != FieldTtls::Hidden {
        return eprintln!("this server shows field TTLs to modules, or has none: nothing asked");
    }
    set_clock(&mut con, T0);
    setrate(&mut con, "api 2 60000");
    assert_eq!(try_acquire(&mut con, "api", 2), None);
    // A change by hand makes the config cache forget the configuration: the next call reads
    // the hash.
    assert_eq!(line::<i64>(&mut con, "HSET api rate 2").unwrap(), 0);
    let asked = command_calls(&mut con, "hpttl");
    let waiter = park(&server, &mut con, "RATELIMIT.ACQUIRE api");
    assert_eq!(command_calls(&mut con, "hpttl"), asked + 1);
    advance(&mut con, 60_000);
    assert_eq!(served(waiter).reply, Reply::Acquired);
}

fn waiter_after_a_field_ttl(ttl: i64) -> Option<bool> {
    let server = Server::start_with(
        &["debug-commands", "yes"],
        &["--enable-debug-command", "yes"],
    );
    let mut con = server.conn();
    if field_ttls(&mut con) == FieldTtls::None {
        return None;
    }
    let _: String = line(&mut con, "DEBUG SET-ACTIVE-EXPIRE 0").unwrap();
    set_clock(&mut con, T0);
    setrate(&mut con, "api 2 60000");
    assert_eq!(try_acquire(&mut con, "api", 2), None);
    let waiter = park(&server, &mut con, "RATELIMIT.ACQUIRE api");
    let mut other = server.conn();
    let set: Vec<i64> = line(&mut other, &format!("HPEXPIRE api {ttl} FIELDS 1 rate")).unwrap();
    assert_eq!(set, [1]);
    let expires_at: Vec<i64> = line(&mut other, "HPEXPIRETIME api FIELDS 1 rate").unwrap();
    // The check the field's event asked for has run once this command is answered behind it,
    // before the field expired if the server's clock says so.
    let _: String = line(&mut con, "PING").unwrap();
    if server_ms(&mut con) >= expires_at[0] {
        return Some(false);
    }
    assert_eq!(
        blocked(&mut con),
        (1, 1),
        "still refused under the 60 s window"
    );
    wait_for_server_time(&mut con, expires_at[0]);
    advance(&mut con, 60_000);
    assert_eq!(served(waiter).reply, Reply::Error(not_initialized("api")));
    wait_blocked(&mut con, 0);
    Some(true)
}
