//! Lost state by failover. Replication is asynchronous: a master that dies can take its last
//! grants with it, and the promoted replica admits them again. A test kills a master under load
//! and counts what its replica lacks; with `WAIT 1` after each call, none is lost. Clients
//! blocked in ACQUIRE on a master that a Sentinel-managed failover demotes get an error at once.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use crate::common::waiters::{blocked, reply_of, spawn, wait_blocked, Reply};
use crate::common::*;

/// Clients granting on one limiter (big enough to grant every call) until the master dies,
/// killed once they were told of `kill_at` grants (counted, however long they take); with
/// `wait`, each call is followed by `WAIT 1 0` (until acknowledged, or the master is gone) and counts only once acknowledged.
/// Returns (grants acknowledged to the clients, microseconds per acknowledged grant).
fn grant_until_killed(master: &Server, wait: bool, kill_at: u64) -> (u64, f64) {
    let stop = Arc::new(AtomicBool::new(false));
    let told = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let clients: Vec<_> = (0..4)
        .map(|_| {
            let mut con = master.conn();
            con.set_read_timeout(Some(HANG)).unwrap();
            let (stop, told) = (Arc::clone(&stop), Arc::clone(&told));
            thread::spawn(move || {
                let mut acknowledged = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let granted: Result<Value, _> = line(&mut con, "RATELIMIT.TRYACQUIRE api");
                    if !matches!(granted, Ok(Value::Nil)) {
                        break;
                    }
                    if wait {
                        match line::<i64>(&mut con, "WAIT 1 0") {
                            Ok(1) => {}
                            _ => break,
                        }
                    }
                    acknowledged += 1;
                    told.fetch_add(1, Ordering::Relaxed);
                }
                acknowledged
            })
        })
        .collect();
    let deadline = Instant::now() + HANG;
    while told.load(Ordering::Relaxed) < kill_at {
        assert!(
            Instant::now() < deadline,
            "the clients stopped granting at {}",
            told.load(Ordering::Relaxed)
        );
        thread::sleep(Duration::from_millis(1));
    }
    master.signal("KILL");
    let elapsed = started.elapsed();
    stop.store(true, Ordering::Relaxed);
    let total: u64 = clients.into_iter().map(|c| c.join().unwrap()).sum();
    let per_grant = elapsed.as_micros() as f64 * 4.0 / total.max(1) as f64;
    (total, per_grant)
}

/// Promotes `replica` and sums the permits its log holds.
fn promote_and_count(replica: &Server) -> u64 {
    let mut con = replica.conn();
    let _: () = line(&mut con, "REPLICAOF NO ONE").unwrap();
    u64::from(logged_permits(&mut con, "{api}:permits"))
}

fn pair() -> (Server, Server) {
    let master = Server::start_with(&[], &[]);
    let _: i64 = line(
        &mut master.conn(),
        "RATELIMIT.SETRATE api 4000000000 3600000",
    )
    .unwrap();
    let replica = Server::start_replica(&master, true);
    (master, replica)
}

#[test]
fn a_promoted_replica_lacks_the_last_grants_unless_each_waits_for_it() {
    // Asynchronous: whatever was in flight when the master died is lost (often nothing on
    // loopback, sometimes a few): counted, and never more grants logged than acknowledged
    // plus the calls still in flight.
    let (master, replica) = pair();
    let (acknowledged, plain_us) = grant_until_killed(&master, false, 20_000);
    let logged = promote_and_count(&replica);
    let lost = acknowledged.saturating_sub(logged);
    assert!(
        logged <= acknowledged + 4,
        "{logged} logged, {acknowledged} acknowledged"
    );
    drop((master, replica));

    // WAIT 1 after each grant: every grant a client was told of is on the replica.
    let (master, replica) = pair();
    let (acknowledged_waited, waited_us) = grant_until_killed(&master, true, 200);
    let logged_waited = promote_and_count(&replica);
    assert!(
        logged_waited >= acknowledged_waited,
        "with WAIT, {acknowledged_waited} acknowledged but only {logged_waited} on the promoted replica"
    );
    eprintln!(
        "failover under load (4 clients, loopback, SIGKILL of the master): without WAIT \
         {acknowledged} grants acknowledged, {logged} on the promoted replica, {lost} lost, \
         {plain_us:.1} us per grant; with WAIT 1: {acknowledged_waited} acknowledged, \
         {logged_waited} on the replica, none lost, {waited_us:.1} us per grant"
    );
}

/// The Sentinel's configuration for `master`, quorum 1.
fn sentinel_conf(dir: &std::path::Path, master: &Server) -> std::path::PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let file = dir.join("sentinel.conf");
    std::fs::write(
        &file,
        format!(
            "sentinel monitor rl 127.0.0.1 {} 1\n\
             sentinel down-after-milliseconds rl 1000\n\
             sentinel failover-timeout rl 5000\n",
            master.port
        ),
    )
    .unwrap();
    file
}

#[test]
fn a_sentinel_failover_unblocks_acquire_with_an_error() {
    let master = Server::start_with(&[], &[]);
    let mut con = master.conn();
    let _: i64 = line(&mut con, "RATELIMIT.SETRATE jobs 1 3600000").unwrap();
    assert_eq!(try_acquire(&mut con, "jobs", 1), None);
    let replica = Server::start_replica(&master, true);
    let dir = std::env::temp_dir().join(format!("ratelimit-sentinel-{}", std::process::id()));
    let conf = sentinel_conf(&dir, &master);
    let sentinel = Server::spawn(
        &[
            server_binary(),
            conf.display().to_string(),
            "--sentinel".to_string(),
        ],
        &[],
        std::path::Path::new(env!("CARGO_TARGET_TMPDIR")),
        HANG,
    )
    .expect("a Sentinel starts");
    let mut on_sentinel = sentinel.conn();

    // Two clients wait for a permit that is an hour away.
    let waiters: Vec<_> = (0..2)
        .map(|_| spawn(&master, "RATELIMIT.ACQUIRE jobs"))
        .collect();
    wait_blocked(&mut con, 2);

    // The Sentinel needs to have seen the replica before it can promote it.
    let deadline = Instant::now() + HANG;
    loop {
        match line::<String>(&mut on_sentinel, "SENTINEL FAILOVER rl") {
            Ok(_) => break,
            Err(e) => {
                assert!(Instant::now() < deadline, "no failover: {e}");
                thread::sleep(Duration::from_millis(200));
            }
        }
    }
    // Demoted, the old master unblocks its waiters with an error, at once (or the Sentinel's
    // CLIENT KILL, which it sends with the demotion, closes their connections first): never a
    // grant, never left waiting for the hour.
    let failed_over = Instant::now();
    for waiter in waiters {
        let served = waiter.join();
        match &served.reply {
            Reply::Error(e) => assert!(
                e.starts_with("UNBLOCKED")
                    || e.starts_with("READONLY")
                    || e.contains("end of file")
                    || e.contains("reset")
                    || e.contains("closed"),
                "{e}"
            ),
            other => panic!("a waiter on the demoted master got {other:?}"),
        }
    }
    eprintln!(
        "sentinel failover: the waiters had their error {} ms after SENTINEL FAILOVER returned",
        failed_over.elapsed().as_millis()
    );
    let deadline = Instant::now() + HANG;
    loop {
        // The Sentinel kills the clients of the instances it reconfigures: ask anew each time.
        let role: Option<Vec<Value>> = replica
            .client()
            .get_connection()
            .ok()
            .and_then(|mut c| line(&mut c, "ROLE").ok());
        if role.as_ref().and_then(|r| r.first()) == Some(&Value::BulkString(b"master".to_vec())) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the replica was not promoted: {role:?}"
        );
        thread::sleep(Duration::from_millis(100));
    }
    let mut con = master.conn();
    assert_eq!(blocked(&mut con).1, 0);
    // The new master has the limiter, and it is full.
    let mut promoted = replica.conn();
    assert!(try_acquire(&mut promoted, "jobs", 1).is_some());
    let reply = reply_of(line(&mut promoted, "RATELIMIT.ACQUIRE jobs TIMEOUT 10"));
    assert!(matches!(reply, Reply::Wait(_)), "{reply:?}");
    drop(sentinel);
    let _ = std::fs::remove_dir_all(&dir);
}
