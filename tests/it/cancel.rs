//! RATELIMIT.CANCEL and ACQUIRE's TICKET against a real server: a caller that gave up leaves no
//! permit taken. A queued wait ends with its TIMEOUT's reply and writes nothing; a grant is given
//! back exactly (its own log entry, reduced where others share it); a resend of a granted wait
//! takes nothing; the replica's log follows. Every test runs on the frozen debug clock: nothing
//! but the commands sent can serve a waiter.

use crate::common::waiters::*;
use crate::common::*;

fn setrate(con: &mut Connection, args: &str) {
    let created: i64 = line(con, &format!("RATELIMIT.SETRATE {args}")).expect("SETRATE");
    assert_eq!(created, 1, "SETRATE {args}");
}

fn acquire(con: &mut Connection, args: &str) -> Reply {
    reply_of(line(con, &format!("RATELIMIT.ACQUIRE {args}")))
}

fn cancel(con: &mut Connection, args: &str) -> i64 {
    line(con, &format!("RATELIMIT.CANCEL {args}")).expect("CANCEL")
}

fn scores(con: &mut Connection, key: &str) -> Vec<i64> {
    log_entries(con, key).into_iter().map(|(_, s)| s).collect()
}

#[test]
fn cancel_ends_a_queued_wait_with_the_timeout_reply_and_writes_nothing() {
    let server = Server::start();
    let mut con = server.conn();
    set_clock(&mut con, T0);
    setrate(&mut con, "api 1 60000");
    assert_eq!(try_acquire(&mut con, "api", 1), None);
    let first = park(&server, &mut con, "RATELIMIT.ACQUIRE api TICKET a");
    let middle = park(
        &server,
        &mut con,
        "RATELIMIT.ACQUIRE api TICKET b TIMEOUT 0",
    );
    let last = park(&server, &mut con, "RATELIMIT.ACQUIRE api");
    let before = snapshot(&mut con);

    assert_eq!(
        cancel(&mut con, "api b"),
        0,
        "a wait ended gives nothing back"
    );
    assert_eq!(served(middle).reply, Reply::Wait(60_000));
    wait_blocked(&mut con, 2);
    assert_eq!(snapshot(&mut con), before, "nothing written");
    assert_eq!(stat(&mut con, "cancels"), 1);
    assert_eq!(stat(&mut con, "timeouts"), 0, "not a TIMEOUT that ran out");
    // The others keep their order: the head first, the last after it.
    advance(&mut con, 60_000);
    assert_eq!(served(first).reply, Reply::Acquired);
    // Served in the same pass as the head: still blocked once the head has its reply.
    wait_blocked(&mut con, 1);
    assert!(!last.is_done(), "served with no permit free");
    // A grant given back goes to the head of the queue at once.
    let behind = park(&server, &mut con, "RATELIMIT.ACQUIRE api TICKET c");
    advance(&mut con, 30_000);
    assert!(!last.is_done());
    assert_eq!(
        cancel(&mut con, "api a"),
        1,
        "a's grant, still in its window"
    );
    assert_eq!(served(last).reply, Reply::Acquired, "the permit given back");
    assert_eq!(cancel(&mut con, "api c"), 0);
    assert_eq!(served(behind).reply, Reply::Wait(60_000));
    wait_blocked(&mut con, 0);
    // A ticket cancelled is refused when it comes (again) later, at once and taking nothing.
    let before = snapshot(&mut con);
    assert_eq!(
        acquire(&mut con, "api TICKET c TIMEOUT 0"),
        Reply::Wait(60_000)
    );
    assert_eq!(snapshot(&mut con), before);
    assert_eq!(blocked(&mut con), (0, 0));
}

/// Rate 2: G at 0 given up, H at 10. Giving back the newest entry (H's) would leave G's entry at
/// 0; at 1001 two more would fit while H, at 10, still counts: 3 in one window. CANCEL removes
/// G's own entry.
#[test]
fn cancel_gives_back_the_grant_own_entry_and_the_window_stays_within_the_rate() {
    let server = Server::start();
    let mut con = server.conn();
    set_clock(&mut con, T0);
    setrate(&mut con, "api 2 1000");
    assert_eq!(acquire(&mut con, "api TICKET g"), Reply::Acquired);
    advance(&mut con, 10);
    assert_eq!(acquire(&mut con, "api TICKET h"), Reply::Acquired);
    assert_eq!(scores(&mut con, "{api}:permits"), vec![T0, T0 + 10]);

    assert_eq!(cancel(&mut con, "api g"), 1);
    assert_eq!(
        scores(&mut con, "{api}:permits"),
        vec![T0 + 10],
        "G's entry went"
    );
    assert_eq!(get(&mut con, "{api}:value").as_deref(), Some("1"));
    assert_eq!(cancel(&mut con, "api g"), 0, "given back once");
    advance(&mut con, 991);
    assert_eq!(try_acquire(&mut con, "api", 1), None, "the one at 10 freed");
    assert_eq!(try_acquire(&mut con, "api", 1), Some(9), "H still counts");
    assert!(permits_in_window(&mut con, "{api}:permits", T0 + 1001, 1000) <= 2);
    assert_eq!(stat(&mut con, "cancels"), 1);
}

#[test]
fn a_precision_entry_shared_with_other_grants_is_reduced_not_removed() {
    let server = Server::start();
    let mut con = server.conn();
    set_clock(&mut con, T0);
    setrate(&mut con, "api 10 1000 PRECISION 100");
    assert_eq!(try_acquire(&mut con, "api", 2), None);
    advance(&mut con, 5);
    assert_eq!(acquire(&mut con, "api 3 TICKET t"), Reply::Acquired);
    advance(&mut con, 5);
    assert_eq!(try_acquire(&mut con, "api", 1), None);
    let log = log_entries(&mut con, "{api}:permits");
    assert_eq!(log.len(), 1, "one entry per 100 ms bucket");
    assert_eq!(member_permits(&log[0].0), 6);

    assert_eq!(cancel(&mut con, "api t"), 3);
    let after = log_entries(&mut con, "{api}:permits");
    assert_eq!(after.len(), 1);
    assert_eq!(member_permits(&after[0].0), 3, "the other grants stay");
    assert_eq!(after[0].1, log[0].1, "at the same score");
    assert_eq!(
        after[0].0[1..after[0].0.len() - 4],
        log[0].0[1..log[0].0.len() - 4],
        "the same id"
    );
    assert_eq!(available(&mut con, "api"), 7);
}

#[test]
fn a_resend_of_a_granted_ticket_replies_nil_and_writes_nothing() {
    let server = Server::start();
    let mut con = server.conn();
    con.set_read_timeout(Some(HANG)).unwrap();
    set_clock(&mut con, T0);
    setrate(&mut con, "api 1 60000");
    assert_eq!(acquire(&mut con, "api TICKET r TIMEOUT 0"), Reply::Acquired);
    let before = snapshot(&mut con);
    // The limiter is full: without the ticket this would block.
    assert_eq!(acquire(&mut con, "api TICKET r TIMEOUT 0"), Reply::Acquired);
    assert_eq!(snapshot(&mut con), before, "nothing written");
    assert_eq!(logged_permits(&mut con, "{api}:permits"), 1);
    assert_eq!(stat(&mut con, "acquired"), 1, "one acquisition");
    // Another ticket, or another limiter, is not answered from it.
    assert_eq!(
        acquire(&mut con, "api TICKET other TIMEOUT 1"),
        Reply::Wait(60_000)
    );
    setrate(&mut con, "b 1 60000");
    assert_eq!(acquire(&mut con, "b TICKET r"), Reply::Acquired);
    assert_eq!(logged_permits(&mut con, "{b}:permits"), 1);
}

#[test]
fn two_waiters_with_one_ticket_take_one_permit() {
    two_waiters_with_one_ticket(false);
}

/// A resend queued behind another waiter, not next to the wait it repeats: the grant of the old
/// wait answers it at once, not when it reaches the head of the queue.
#[test]
fn a_resend_queued_behind_others_is_answered_by_the_first_grant_at_once() {
    two_waiters_with_one_ticket(true);
}

/// The wait of a connection not yet seen closed, and its resend, queued next to it or behind
/// another waiter: one grant answers both, one permit taken.
fn two_waiters_with_one_ticket(resend_behind_other: bool) {
    let server = Server::start();
    let mut con = server.conn();
    set_clock(&mut con, T0);
    setrate(&mut con, "api 1 60000");
    assert_eq!(try_acquire(&mut con, "api", 1), None);
    let old = park(&server, &mut con, "RATELIMIT.ACQUIRE api TICKET dup");
    let resend = "RATELIMIT.ACQUIRE api TICKET dup TIMEOUT 600000";
    let (resent, other) = if resend_behind_other {
        let other = park(&server, &mut con, "RATELIMIT.ACQUIRE api");
        (park(&server, &mut con, resend), other)
    } else {
        let resent = park(&server, &mut con, resend);
        (resent, park(&server, &mut con, "RATELIMIT.ACQUIRE api"))
    };
    advance(&mut con, 60_000);
    assert_eq!(served(old).reply, Reply::Acquired);
    assert_eq!(
        served(resent).reply,
        Reply::Acquired,
        "from the first grant"
    );
    wait_blocked(&mut con, 1);
    assert!(!other.is_done(), "the resend took no permit");
    assert_eq!(logged_permits(&mut con, "{api}:permits"), 1);
    assert_eq!(stat(&mut con, "timeouts"), 0);
    advance(&mut con, 60_000);
    assert_eq!(served(other).reply, Reply::Acquired);
    assert_eq!(stat(&mut con, "acquired"), 3);
}

#[test]
fn cancel_after_the_grant_lapsed_or_of_an_unknown_ticket_does_nothing() {
    let server = Server::start();
    let mut con = server.conn();
    set_clock(&mut con, T0);
    setrate(&mut con, "api 2 1000");
    setrate(&mut con, "other 2 1000");
    assert_eq!(acquire(&mut con, "api TICKET l"), Reply::Acquired);
    assert_eq!(acquire(&mut con, "other TICKET o"), Reply::Acquired);
    let before = snapshot(&mut con);
    assert_eq!(cancel(&mut con, "api unknown"), 0);
    assert_eq!(cancel(&mut con, "api o"), 0, "a ticket of another limiter");
    assert_eq!(snapshot(&mut con), before, "nothing written");
    advance(&mut con, 1000);
    assert_eq!(try_acquire(&mut con, "api", 2), None, "l's permit freed");
    let before = snapshot(&mut con);
    assert_eq!(cancel(&mut con, "api l"), 0, "lapsed: nothing to give back");
    assert_eq!(snapshot(&mut con), before);
    assert_eq!(stat(&mut con, "cancels"), 0);
}

#[test]
fn per_client_tickets_belong_to_their_client_state() {
    let server = Server::start();
    let mut con = server.conn();
    set_clock(&mut con, T0);
    setrate(&mut con, "pc 1 1000 PER_CLIENT");
    assert_eq!(acquire(&mut con, "pc CLIENT a TICKET t"), Reply::Acquired);
    assert_eq!(
        cancel(&mut con, "pc t CLIENT b"),
        0,
        "b's state has no such grant"
    );
    assert_eq!(logged_permits(&mut con, "{pc}:permits:a"), 1);
    assert_eq!(cancel(&mut con, "pc t CLIENT a"), 1);
    assert!(!exists(&mut con, "{pc}:permits:a"), "its only entry went");
    assert_eq!(try_acquire_client(&mut con, "pc", "a"), None);
}

/// A queue keeps the state it was made on; after SETRATE changes the mode, its waiters are
/// granted on the state the new mode gives them, and their tickets belong to that state: CANCEL
/// naming it finds the waiter, and a grant made there is given back.
#[test]
fn after_a_change_of_mode_a_ticket_belongs_to_the_state_its_wait_is_granted_on() {
    let server = Server::start();
    let mut con = server.conn();
    set_clock(&mut con, T0);
    let mode = |con: &mut Connection, args: &str| {
        let _: i64 = line(con, &format!("RATELIMIT.SETRATE md 1 60000 {args}")).expect("SETRATE");
    };
    mode(&mut con, "PER_CLIENT");
    assert_eq!(try_acquire_client(&mut con, "md", "c"), None);
    mode(&mut con, "");
    assert_eq!(try_acquire(&mut con, "md", 1), None);
    // Queued on the OVERALL state, then the limiter becomes PER_CLIENT again.
    let given_up = park(
        &server,
        &mut con,
        "RATELIMIT.ACQUIRE md CLIENT c TICKET w2 TIMEOUT 0",
    );
    let granted = park(
        &server,
        &mut con,
        "RATELIMIT.ACQUIRE md CLIENT c TICKET w3 TIMEOUT 0",
    );
    mode(&mut con, "PER_CLIENT");
    assert_eq!(cancel(&mut con, "md w2 CLIENT c"), 0);
    assert_eq!(served(given_up).reply, Reply::Wait(60_000));
    wait_blocked(&mut con, 1);
    advance(&mut con, 60_000);
    assert_eq!(served(granted).reply, Reply::Acquired, "on c's state");
    assert_eq!(cancel(&mut con, "md w3 CLIENT c"), 1, "given back");
    assert_eq!(try_acquire_client(&mut con, "md", "c"), None);
}

fn try_acquire_client(con: &mut Connection, key: &str, client: &str) -> Option<i64> {
    line(con, &format!("RATELIMIT.TRYACQUIRE {key} CLIENT {client}")).expect("TRYACQUIRE")
}

#[test]
fn errors_name_the_problem_and_write_nothing() {
    let server = Server::start();
    let mut con = server.conn();
    con.set_read_timeout(Some(HANG)).unwrap();
    set_clock(&mut con, T0);
    setrate(&mut con, "api 2 1000");
    setrate(&mut con, "pc 1 1000 PER_CLIENT");
    assert_eq!(acquire(&mut con, "api TICKET t"), Reply::Acquired);
    let _: () = line(&mut con, "SET plain x").unwrap();
    let long = "x".repeat(65);
    let before = snapshot(&mut con);
    for (command, expected) in [
        (
            "RATELIMIT.CANCEL".to_string(),
            "ERR wrong number of arguments for 'ratelimit.cancel' command",
        ),
        (
            "RATELIMIT.CANCEL api".to_string(),
            "ERR wrong number of arguments for 'ratelimit.cancel' command",
        ),
        (
            "RATELIMIT.CANCEL plain t".to_string(),
            "WRONGTYPE key 'plain' holds a string that is not a ONEKEY rate limiter",
        ),
        (
            "RATELIMIT.CANCEL nope t".to_string(),
            "ERR RateLimiter is not initialized (limiter 'nope')",
        ),
        (
            "RATELIMIT.CANCEL pc t".to_string(),
            "ERR the limiter is PER_CLIENT: CLIENT id is required",
        ),
        (
            format!("RATELIMIT.CANCEL api {long}"),
            "ERR TICKET must be 1 to 64 bytes",
        ),
        (
            format!("RATELIMIT.ACQUIRE api TICKET {long}"),
            "ERR TICKET must be 1 to 64 bytes",
        ),
        (
            "RATELIMIT.CANCEL api t FOO".to_string(),
            "ERR syntax error, unknown option 'FOO'",
        ),
        (
            "RATELIMIT.CANCEL api t CLIENT".to_string(),
            "ERR syntax error, CLIENT needs a value",
        ),
        (
            "RATELIMIT.ACQUIRE api TICKET".to_string(),
            "ERR syntax error, TICKET needs a value",
        ),
        (
            "RATELIMIT.ACQUIRE api TICKET a TICKET b".to_string(),
            "ERR syntax error, TICKET specified multiple times",
        ),
        (
            "RATELIMIT.TRYACQUIRE api TICKET a".to_string(),
            "ERR syntax error, unknown option 'TICKET'",
        ),
    ] {
        assert_eq!(error_of(&mut con, &command), expected, "{command}");
    }
    for empty in [
        &[&b"RATELIMIT.CANCEL"[..], b"api", b""][..],
        &[b"RATELIMIT.ACQUIRE", b"api", b"TICKET", b""],
    ] {
        let e = run::<Value>(&mut con, empty).unwrap_err();
        assert_eq!(error_line(&e), "ERR TICKET must be 1 to 64 bytes");
    }
    assert_eq!(snapshot(&mut con), before, "errors write nothing");
    // The failed CANCELs left the grant remembered.
    assert_eq!(cancel(&mut con, "api t"), 1);
}

#[test]
fn the_replica_log_follows_a_give_back() {
    let master = Server::start();
    // A plain server: it replays the effects, knowing nothing of the module.
    let plain = Server::start_replica(&master, false);
    let replica = Server::start_replica(&master, true);
    let mut con = master.conn();
    set_clock(&mut con, T0);
    setrate(&mut con, "api 3 1000 PRECISION 10");
    assert_eq!(acquire(&mut con, "api TICKET g"), Reply::Acquired);
    assert_eq!(try_acquire(&mut con, "api", 1), None);
    advance(&mut con, 20);
    assert_eq!(acquire(&mut con, "api TICKET h"), Reply::Acquired);
    assert_eq!(cancel(&mut con, "api g"), 1);
    assert_eq!(cancel(&mut con, "api h"), 1);
    wait_replicas(&mut con, 2);
    let on_master = snapshot(&mut con);
    assert_eq!(logged_permits(&mut con, "{api}:permits"), 1);
    assert_eq!(snapshot(&mut plain.conn()), on_master);
    assert_eq!(snapshot(&mut replica.conn()), on_master);
    // The tickets are the master's memory: CANCEL is a write, refused by the replica.
    let e = error_of(&mut replica.conn(), "RATELIMIT.CANCEL api g");
    assert!(e.starts_with("READONLY"), "{e}");
}

#[test]
fn the_ticket_table_stays_within_its_cap_and_forgets_lapsed_grants() {
    const CAP: usize = 65_536;
    let server = Server::start();
    let mut con = server.conn();
    set_clock(&mut con, T0);
    setrate(&mut con, "api 4294967295 1000");
    let mut pipe = redis::pipe();
    for i in 0..CAP + 100 {
        pipe.cmd("RATELIMIT.ACQUIRE")
            .arg("api")
            .arg("TICKET")
            .arg(i)
            .ignore();
    }
    let () = pipe.query(&mut con).expect("pipeline");
    assert_eq!(stat(&mut con, "tickets"), CAP as i64);
    assert_eq!(stat(&mut con, "acquired"), (CAP + 100) as i64);
    // The oldest were forgotten (their grants stay logged), the newest are remembered.
    assert_eq!(cancel(&mut con, "api 0"), 0);
    assert_eq!(cancel(&mut con, &format!("api {}", CAP + 99)), 1);
    // Lapsed grants go as new tickets come.
    advance(&mut con, 1000);
    assert_eq!(acquire(&mut con, "api TICKET late"), Reply::Acquired);
    assert_eq!(stat(&mut con, "tickets"), 3, "two cancelled, one granted");
}

/// MODULE UNLOAD gives the table's memory back (20 000 tickets, several MB), and a load starts
/// with none remembered: a CANCEL
/// then finds nothing to give back, as after a restart (the permits stay logged until they
/// expire).
#[test]
fn a_module_reload_forgets_the_tickets() {
    let module = module_path();
    let server = Server::start_with(
        &["debug-commands", "yes"],
        &["--enable-module-command", "yes"],
    );
    let mut con = server.conn();
    set_clock(&mut con, T0);
    setrate(&mut con, "api 2 100000");
    setrate(&mut con, "many 4294967295 100000");
    assert_eq!(acquire(&mut con, "api TICKET kept"), Reply::Acquired);
    let used = |con: &mut Connection| field(&info(con, "memory"), "used_memory") as i64;
    let before = used(&mut con);
    let mut pipe = redis::pipe();
    for i in 0..20_000 {
        pipe.cmd("RATELIMIT.ACQUIRE")
            .arg("many")
            .arg("TICKET")
            .arg(format!("{i:036}"))
            .ignore();
    }
    let () = pipe.query(&mut con).expect("pipeline");
    assert_eq!(stat(&mut con, "tickets"), 20_001);
    let filled = used(&mut con);
    let ok: String = line(&mut con, "MODULE UNLOAD ratelimit").unwrap();
    assert_eq!(ok, "OK");
    let unloaded = used(&mut con);
    assert!(
        unloaded - before < (filled - before) / 4,
        "used_memory {before} before the tickets, {filled} with them, {unloaded} unloaded"
    );
    let ok: String = redis::cmd("MODULE")
        .arg("LOAD")
        .arg(module.to_str().unwrap())
        .query(&mut con)
        .unwrap();
    assert_eq!(ok, "OK");
    assert_eq!(stat(&mut con, "tickets"), 0);
    assert_eq!(cancel(&mut con, "api kept"), 0);
    assert_eq!(logged_permits(&mut con, "{api}:permits"), 1);
}

/// A flush (or SWAPDB) forgets every ticket: a grant remembered before it may be gone, or the
/// entries at its score another limiter's, which a CANCEL must not touch.
#[test]
fn a_flush_forgets_the_tickets() {
    let server = Server::start();
    let mut con = server.conn();
    set_clock(&mut con, T0);
    setrate(&mut con, "api 2 1000");
    assert_eq!(acquire(&mut con, "api TICKET before"), Reply::Acquired);
    let _: () = line(&mut con, "FLUSHALL").unwrap();
    assert_eq!(stat(&mut con, "tickets"), 0);
    // The same limiter anew, granted at the same millisecond.
    setrate(&mut con, "api 2 1000");
    assert_eq!(try_acquire(&mut con, "api", 1), None);
    assert_eq!(cancel(&mut con, "api before"), 0, "not the new grant");
    assert_eq!(logged_permits(&mut con, "{api}:permits"), 1);
    assert_eq!(acquire(&mut con, "api TICKET swapped"), Reply::Acquired);
    let _: () = line(&mut con, "SWAPDB 0 1").unwrap();
    assert_eq!(stat(&mut con, "tickets"), 0);
}

/// The grant is found by the id of the entry it went into, not by its score alone: a limiter
/// deleted and created anew, granted again in the same millisecond, keeps the new grant.
#[test]
fn a_grant_is_given_back_from_its_own_entry_not_another_at_its_score() {
    let server = Server::start();
    let mut con = server.conn();
    set_clock(&mut con, T0);
    setrate(&mut con, "api 2 1000");
    assert_eq!(acquire(&mut con, "api TICKET old"), Reply::Acquired);
    assert_eq!(line::<i64>(&mut con, "RATELIMIT.DELETE api").unwrap(), 3);
    setrate(&mut con, "api 2 1000");
    assert_eq!(try_acquire(&mut con, "api", 1), None);
    let before = snapshot(&mut con);
    assert_eq!(
        cancel(&mut con, "api old"),
        0,
        "its entry went with the limiter"
    );
    assert_eq!(snapshot(&mut con), before, "the new grant stays");
    // Its own entry, once others of the same millisecond joined it, is found all the same.
    assert_eq!(acquire(&mut con, "api TICKET new"), Reply::Acquired);
    let log = log_entries(&mut con, "{api}:permits");
    assert_eq!(log.len(), 1, "both grants of the millisecond in one entry");
    assert_eq!(member_permits(&log[0].0), 2);
    assert_eq!(cancel(&mut con, "api new"), 1);
    assert_eq!(logged_permits(&mut con, "{api}:permits"), 1);
}
