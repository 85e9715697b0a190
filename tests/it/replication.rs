//! Effects replication against real servers: a master with the module feeding one replica with
//! the module and one without it. Thousands of pseudo-random writes later, all three hold the
//! same bytes and expiries; a refusal that has nothing to refresh replicates nothing; and no
//! replica ever runs a module command.

use std::thread;
use std::time::{Duration, Instant};

use crate::common::*;

/// Limiter names: plain, with a `{` (unwrapped suffixes), with a hash tag, and `hot`, which
/// keeps a long window so its log grows past the listpack limit (128) into a skiplist zset.
const NAMES: [&str; 6] = ["api", "login", "tag{x}", "{pc}", "u:{7}", "hot"];
const HOT: &str = "hot";
const HOT_INTERVAL: u64 = 600_000;
const CLIENTS: [&str; 3] = ["c1", "c2", "3f2504e0-4f89-11d3-9a0c-0305e82c3301"];
const INTERVALS: [u64; 4] = [100, 1000, 3000, 10_000];

/// Keyword spelled in upper or lower case (options are case-insensitive).
fn kw(rng: &mut Rng, word: &str) -> String {
    if rng.chance(20) {
        word.to_ascii_lowercase()
    } else {
        word.to_string()
    }
}

fn push_client(rng: &mut Rng, words: &mut Vec<String>, percent: u64) {
    if rng.chance(percent) {
        words.push(kw(rng, "CLIENT"));
        words.push(rng.pick(&CLIENTS).to_string());
    }
}

/// Any TTL the workload sets is at least a minute of real time, so no key expires while the
/// servers are compared; non-positive EXPIRE deletes instead.
fn setrate(rng: &mut Rng, name: &str) -> Vec<String> {
    let hot = name == HOT;
    let (rate, interval) = if hot {
        (100_000, HOT_INTERVAL)
    } else {
        (1 + rng.below(8), *rng.pick(&INTERVALS))
    };
    let mut words = vec![
        "RATELIMIT.SETRATE".to_string(),
        name.to_string(),
        rate.to_string(),
        interval.to_string(),
    ];
    match (hot, rng.below(3)) {
        (_, 0) => {}
        (true, _) | (false, 1) => words.push(kw(rng, "OVERALL")),
        (false, _) => words.push(kw(rng, "PER_CLIENT")),
    }
    match rng.below(10) {
        0..=4 => {}
        5 => {
            words.push(kw(rng, "KEEPALIVE"));
            words.push("0".into());
        }
        _ => {
            words.push(kw(rng, "KEEPALIVE"));
            let base = if hot { HOT_INTERVAL } else { 60_000 };
            words.push((base + rng.below(60_000)).to_string());
        }
    }
    let condition = match rng.below(5) {
        0 => Some("NX"),
        1 => Some("XX"),
        _ => None,
    };
    if let Some(condition) = condition {
        words.push(kw(rng, condition));
    }
    // `hot` keeps its state, so its log keeps growing.
    if condition != Some("NX") && (hot || rng.chance(40)) {
        words.push(kw(rng, "KEEPSTATE"));
    }
    push_client(rng, &mut words, 50);
    words
}

fn acquire_like(rng: &mut Rng, command: &str, name: &str) -> Vec<String> {
    let mut words = vec![command.to_string(), name.to_string()];
    if rng.chance(70) {
        let max = if name == HOT { 2 } else { 3 };
        words.push((1 + rng.below(max)).to_string());
    }
    if command == "RATELIMIT.ACQUIRE" {
        // A refusal waits one real millisecond, then answers the hint: never stuck.
        words.push(kw(rng, "TIMEOUT"));
        words.push("1".into());
    }
    push_client(rng, &mut words, 60);
    words
}

fn expire(rng: &mut Rng, name: &str) -> Vec<String> {
    let ms: i64 = match rng.below(20) {
        0 | 1 => -5,
        2 => 0,
        _ => 60_000 + rng.below(600_000) as i64,
    };
    let mut words = vec![
        "RATELIMIT.EXPIRE".to_string(),
        name.to_string(),
        ms.to_string(),
    ];
    let conditions: [&[&str]; 7] = [
        &[],
        &["NX"],
        &["XX"],
        &["GT"],
        &["LT"],
        &["XX", "GT"],
        &["LT", "XX"],
    ];
    for condition in *rng.pick(&conditions) {
        words.push(kw(rng, condition));
    }
    push_client(rng, &mut words, 40);
    words
}

#[derive(Default)]
struct Tally {
    commands: usize,
    ok: usize,
    errors: usize,
    advances: usize,
    served_waiters: usize,
}

fn exec(con: &mut Connection, words: &[String], tally: &mut Tally) -> Option<Value> {
    let bytes: Vec<&[u8]> = words.iter().map(|w| w.as_bytes()).collect();
    tally.commands += 1;
    match run::<Value>(con, &bytes) {
        Ok(v) => {
            tally.ok += 1;
            Some(v)
        }
        Err(e) => {
            let line = error_line(&e);
            // Only the module's own refusals are expected; anything else is a broken server.
            assert!(
                line.starts_with("ERR ") || line.starts_with("WRONGTYPE"),
                "`{}` failed unexpectedly: {line}",
                words.join(" ")
            );
            tally.errors += 1;
            None
        }
    }
}

fn repl_offset(con: &mut Connection) -> i64 {
    info_field(con, "replication", "master_repl_offset")
        .expect("master_repl_offset")
        .parse()
        .expect("an integer offset")
}

fn config_rate(v: &Value) -> Option<i64> {
    let Value::Array(items) = v else { return None };
    match items.as_slice() {
        [Value::BulkString(name), Value::Int(rate), ..] if name == b"rate" => Some(*rate),
        _ => None,
    }
}

fn config_interval(v: &Value) -> Option<i64> {
    let Value::Array(items) = v else { return None };
    match items.get(3) {
        Some(Value::Int(interval)) => Some(*interval),
        _ => None,
    }
}

/// A blocking ACQUIRE on a second connection, served from the module's timer when the clock
/// moves: its grant is written (and replicated) outside any client command.
fn blocked_acquire_served(
    server: &Server,
    con: &mut Connection,
    side: &mut Connection,
    rng: &mut Rng,
    tally: &mut Tally,
) {
    let name = *rng.pick(&NAMES[..5]);
    let client = *rng.pick(&CLIENTS);
    let Some(config) = exec(
        con,
        &["RATELIMIT.CONFIG".to_string(), name.to_string()],
        tally,
    ) else {
        return;
    };
    let (Some(rate), Some(interval)) = (config_rate(&config), config_interval(&config)) else {
        return;
    };
    // A TRYACQUIRE of the whole rate refused now means the same ACQUIRE right after (same
    // frozen clock, nobody queued) blocks; a grant is just one more write.
    let probe = exec(
        con,
        &[
            "RATELIMIT.TRYACQUIRE".to_string(),
            name.to_string(),
            rate.to_string(),
            "CLIENT".to_string(),
            client.to_string(),
        ],
        tally,
    );
    if !matches!(probe, Some(Value::Int(_))) {
        return;
    }
    let acquire = redis::cmd("RATELIMIT.ACQUIRE")
        .arg(name)
        .arg(rate)
        .arg("CLIENT")
        .arg(client)
        .get_packed_command();
    side.send_packed_command(&acquire).expect("send ACQUIRE");
    tally.commands += 1;
    let deadline = Instant::now() + HANG;
    while info_field(con, "clients", "blocked_clients").as_deref() != Some("1") {
        if Instant::now() > deadline {
            let got = side.recv_response();
            panic!(
                "ACQUIRE {name} {rate} CLIENT {client} did not block after TRYACQUIRE was \
                 refused ({probe:?}): {got:?}\n{}",
                server.log()
            );
        }
        thread::sleep(Duration::from_millis(1));
    }
    advance(con, interval);
    tally.commands += 1;
    tally.advances += 1;
    let reply = side.recv_response().expect("the blocked ACQUIRE is served");
    assert_eq!(reply, Value::Nil, "ACQUIRE {name} {rate} CLIENT {client}");
    tally.ok += 1;
    tally.served_waiters += 1;
}

fn assert_same_dataset(what: &str, master: &[Snapshot], other: &[Snapshot]) {
    for (m, o) in master.iter().zip(other) {
        assert_eq!(
            m,
            o,
            "{what}: first difference at key {:?}",
            String::from_utf8_lossy(&m.0)
        );
    }
    assert_eq!(
        master.len(),
        other.len(),
        "{what}: key counts differ\nmaster: {:?}\n{what}: {:?}",
        names(master),
        names(other)
    );
}

/// Waits for both replicas, then compares every key on the three servers. Returns the count.
fn compare_all(con: &mut Connection, with_module: &Server, plain: &Server) -> usize {
    wait_replicas(con, 2);
    let on_master = snapshot(con);
    assert_same_dataset(
        "replica with the module",
        &on_master,
        &snapshot(&mut with_module.conn()),
    );
    assert_same_dataset(
        "replica without the module",
        &on_master,
        &snapshot(&mut plain.conn()),
    );
    on_master.len()
}

type Snapshot = (Vec<u8>, Vec<u8>, i64);

fn names(keys: &[Snapshot]) -> Vec<String> {
    keys.iter()
        .map(|k| String::from_utf8_lossy(&k.0).into_owned())
        .collect()
}

fn read_timeout(con: &Connection) {
    con.set_read_timeout(Some(HANG)).expect("read timeout");
}

#[test]
fn thousands_of_mixed_writes_leave_master_and_both_replicas_identical() {
    let master = Server::start();
    let with_module = Server::start_replica(&master, true);
    let plain = Server::start_replica(&master, false);
    let mut con = master.conn();
    let mut side = master.conn();
    read_timeout(&con);
    read_timeout(&side);
    set_clock(&mut con, T0);

    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut tally = Tally::default();
    const STEPS: usize = 4000;
    let mut checkpoints = 0;
    let mut keys_compared = 0;
    for step in 0..STEPS {
        if step > 0 && step % 1000 == 0 {
            keys_compared += compare_all(&mut con, &with_module, &plain);
            checkpoints += 1;
        }
        let name = if rng.chance(25) {
            HOT
        } else {
            *rng.pick(&NAMES[..5])
        };
        let roll = rng.below(100);
        let words = match roll {
            0..=13 => setrate(&mut rng, name),
            14..=51 => acquire_like(&mut rng, "RATELIMIT.TRYACQUIRE", name),
            52..=55 => acquire_like(&mut rng, "RATELIMIT.ACQUIRE", name),
            56..=63 => {
                let mut w = vec![
                    "RATELIMIT.RELEASE".to_string(),
                    name.to_string(),
                    (1 + rng.below(4)).to_string(),
                ];
                push_client(&mut rng, &mut w, 60);
                w
            }
            // `hot` is never deleted, so its log keeps growing.
            64..=66 if name != HOT => {
                let mut w = vec!["RATELIMIT.DELETE".to_string(), name.to_string()];
                push_client(&mut rng, &mut w, 50);
                w
            }
            67..=74 if name != HOT => expire(&mut rng, name),
            67..=74 => {
                let ms = 60_000 + rng.below(600_000);
                vec!["RATELIMIT.EXPIRE".into(), HOT.into(), ms.to_string()]
            }
            75..=79 => {
                let mut w = vec!["RATELIMIT.PERSIST".to_string(), name.to_string()];
                push_client(&mut rng, &mut w, 50);
                w
            }
            80..=89 => {
                let ms = if rng.chance(10) {
                    rng.below(15_000)
                } else {
                    rng.below(300)
                };
                advance(&mut con, ms as i64);
                tally.commands += 1;
                tally.advances += 1;
                continue;
            }
            90..=91 => {
                blocked_acquire_served(&master, &mut con, &mut side, &mut rng, &mut tally);
                continue;
            }
            92..=95 => {
                let mut w = vec!["RATELIMIT.AVAILABLE".to_string(), name.to_string()];
                push_client(&mut rng, &mut w, 60);
                w
            }
            _ => vec!["RATELIMIT.CONFIG".to_string(), name.to_string()],
        };
        exec(&mut con, &words, &mut tally);
    }

    keys_compared += compare_all(&mut con, &with_module, &plain);
    checkpoints += 1;
    let on_master = snapshot(&mut con);

    let with_ttl = on_master.iter().filter(|k| k.2 > 0).count();
    let mut largest_log = 0usize;
    for (key, _, _) in &on_master {
        let kind: String = redis::cmd("TYPE").arg(key).query(&mut con).unwrap();
        if kind == "zset" {
            let n: usize = redis::cmd("ZCARD").arg(key).query(&mut con).unwrap();
            largest_log = largest_log.max(n);
        }
    }
    eprintln!(
        "replication: {} commands ({} replied, {} errors, {} clock moves, {} blocked ACQUIREs \
         served by timer); {} keys compared on 3 servers over {} checkpoints; at the end {} keys \
         ({} with a TTL, {} without), largest log {} entries",
        tally.commands,
        tally.ok,
        tally.errors,
        tally.advances,
        tally.served_waiters,
        keys_compared,
        checkpoints,
        on_master.len(),
        with_ttl,
        on_master.len() - with_ttl,
        largest_log
    );
    // The workload must have produced something worth comparing.
    assert!(on_master.len() >= 10, "{:?}", names(&on_master));
    assert!(with_ttl > 0 && with_ttl < on_master.len());
    assert!(largest_log > 128, "no log grew into a skiplist zset");
    assert!(tally.served_waiters > 0, "no blocked ACQUIRE was served");
    assert!(tally.ok > tally.errors);

    // The replicas applied effects, never the module's commands.
    let master_stats: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(&mut con)
        .unwrap();
    assert!(master_stats.contains("cmdstat_ratelimit.tryacquire:"));
    let replica_stats: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(&mut with_module.conn())
        .unwrap();
    assert!(
        !replica_stats.contains("cmdstat_ratelimit"),
        "the replica ran module commands:\n{replica_stats}"
    );
    for effect in [
        "cmdstat_zadd:",
        "cmdstat_hset:",
        "cmdstat_set:",
        "cmdstat_pexpireat:",
    ] {
        assert!(
            replica_stats.contains(effect),
            "no {effect} on the replica:\n{replica_stats}"
        );
    }
    assert_eq!(
        info_field(&mut with_module.conn(), "ratelimit", "ratelimit_acquired"),
        Some("0".into()),
        "the module on the replica counted acquisitions"
    );
}

#[test]
fn a_grant_that_replaces_an_expired_grant_of_as_many_permits_takes_over_its_entry() {
    let master = Server::start_with(&["debug-commands", "yes"], &[]);
    let replica = Server::start_replica(&master, false);
    let mut con = master.conn();
    read_timeout(&con);
    set_clock(&mut con, T0);
    line::<i64>(&mut con, "RATELIMIT.SETRATE api 3 1000").unwrap();
    assert_eq!(try_acquire(&mut con, "api", 1), None);
    advance(&mut con, 10);
    assert_eq!(try_acquire(&mut con, "api", 1), None);
    let before = log_entries(&mut con, "{api}:permits");
    let [(first, t0), (second, t10)] = [before[0].clone(), before[1].clone()];
    assert_eq!((t0, t10), (T0, T0 + 10));
    wait_replicas(&mut con, 1);
    let _: () = redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query(&mut replica.conn())
        .unwrap();

    // The entry of T0 has expired: the grant moves it, bytes unchanged, to its own score.
    advance(&mut con, 990);
    assert_eq!(try_acquire(&mut con, "api", 1), None);
    assert_eq!(
        log_entries(&mut con, "{api}:permits"),
        vec![(second.clone(), T0 + 10), (first.clone(), T0 + 1000)]
    );
    assert_eq!(line::<String>(&mut con, "GET {api}:value").unwrap(), "1");
    assert_eq!(line::<i64>(&mut con, "RATELIMIT.AVAILABLE api").unwrap(), 1);
    wait_replicas(&mut con, 1);
    let mut plain = replica.conn();
    assert_eq!(command_calls(&mut plain, "zadd"), 1);
    assert_eq!(command_calls(&mut plain, "zremrangebyscore"), 0);
    assert_eq!(command_calls(&mut plain, "set"), 0);

    // The entry of T0 + 10 has expired, but a grant of 2 cannot take over an entry of 1: it
    // is pruned by score and a fresh entry logs the 2 permits.
    advance(&mut con, 20);
    assert_eq!(try_acquire(&mut con, "api", 2), None);
    let after = log_entries(&mut con, "{api}:permits");
    assert_eq!(after.len(), 2);
    assert_eq!(after[0], (first.clone(), T0 + 1000));
    assert_eq!(after[1].1, T0 + 1020);
    assert!(after[1].0 != first && after[1].0 != second);
    assert_eq!(line::<String>(&mut con, "GET {api}:value").unwrap(), "0");
    wait_replicas(&mut con, 1);
    assert_eq!(command_calls(&mut plain, "zremrangebyscore"), 1);
    assert_eq!(command_calls(&mut plain, "zadd"), 2);
    assert_same_dataset(
        "replica without the module",
        &snapshot(&mut con),
        &snapshot(&mut plain),
    );
}

#[test]
fn a_refusal_with_nothing_to_refresh_replicates_nothing() {
    // No replication PING for a minute: the offset moves only with writes.
    let master = Server::start_with(
        &["debug-commands", "yes"],
        &["--repl-ping-replica-period", "60"],
    );
    let replica = Server::start_replica(&master, false);
    let mut con = master.conn();
    read_timeout(&con);
    set_clock(&mut con, T0);
    line::<i64>(&mut con, "RATELIMIT.SETRATE api 2 1000").unwrap();
    assert_eq!(try_acquire(&mut con, "api", 2), None);
    wait_replicas(&mut con, 1);

    let before = repl_offset(&mut con);
    assert_eq!(try_acquire(&mut con, "api", 1), Some(1000));
    advance(&mut con, 100);
    assert_eq!(try_acquire(&mut con, "api", 2), Some(900));
    assert_eq!(line::<i64>(&mut con, "RATELIMIT.AVAILABLE api").unwrap(), 0);
    assert_eq!(repl_offset(&mut con), before, "a refusal replicated writes");

    // The hash's TTL is copied onto the state once; later refusals find it there already.
    assert_eq!(
        line::<i64>(&mut con, "RATELIMIT.EXPIRE api 600000").unwrap(),
        1
    );
    let expired = repl_offset(&mut con);
    assert!(expired > before, "EXPIRE replicated nothing");
    assert_eq!(try_acquire(&mut con, "api", 1), Some(900));
    assert_eq!(
        repl_offset(&mut con),
        expired,
        "a refusal replicated writes"
    );

    // The measure does see a write as small as a TTL refresh: with a keep-alive, a refusal
    // refreshes the TTLs (PEXPIREAT), as the TTL rule says.
    line::<i64>(&mut con, "RATELIMIT.SETRATE ka 1 1000 KEEPALIVE 60000").unwrap();
    assert_eq!(try_acquire(&mut con, "ka", 1), None);
    let kept = repl_offset(&mut con);
    assert_eq!(try_acquire(&mut con, "ka", 1), Some(1000));
    assert!(
        repl_offset(&mut con) > kept,
        "the keep-alive refresh was not replicated"
    );

    // A grant is replicated.
    advance(&mut con, 900);
    let refused = repl_offset(&mut con);
    assert_eq!(try_acquire(&mut con, "api", 1), None);
    assert!(
        repl_offset(&mut con) > refused,
        "a grant replicated nothing"
    );

    wait_replicas(&mut con, 1);
    assert_same_dataset(
        "replica without the module",
        &snapshot(&mut con),
        &snapshot(&mut replica.conn()),
    );
}

#[test]
fn effects_made_inside_multi_and_scripts_replicate_to_a_plain_replica() {
    // Inside MULTI/EXEC and from redis.call, the module's writes join the transaction's or the
    // script's effects; a replica without the module must still end up identical.
    let master = Server::start();
    let plain = Server::start_replica(&master, false);
    let mut con = master.conn();
    set_clock(&mut con, T0);
    line::<i64>(&mut con, "RATELIMIT.SETRATE tx 5 1000 KEEPALIVE 60000").unwrap();
    line::<i64>(&mut con, "RATELIMIT.SETRATE pc 2 1000 PER_CLIENT").unwrap();
    for round in 0..20 {
        let replies: redis::Value = redis::pipe()
            .atomic()
            .cmd("RATELIMIT.TRYACQUIRE")
            .arg("tx")
            .arg(1 + round % 2)
            .cmd("RATELIMIT.ACQUIRE")
            .arg("pc")
            .arg("CLIENT")
            .arg("c1")
            .cmd("RATELIMIT.RELEASE")
            .arg("tx")
            .arg(1)
            .query(&mut con)
            .unwrap();
        assert!(
            matches!(replies, redis::Value::Array(ref r) if r.len() == 3),
            "{replies:?}"
        );
        let _: redis::Value = redis::cmd("EVAL")
            .arg(
                "local a = redis.call('RATELIMIT.TRYACQUIRE', KEYS[1], 2) \
                 local b = redis.pcall('RATELIMIT.TRYACQUIRE', KEYS[2], 1, 'CLIENT', 'c2') \
                 redis.call('RATELIMIT.EXPIRE', KEYS[1], 90000, 'GT') \
                 return {a or -1, type(b) == 'table' and -2 or (b or -1)}",
            )
            .arg(2)
            .arg("tx")
            .arg("pc")
            .query(&mut con)
            .unwrap();
        advance(&mut con, 150);
    }
    wait_replicas(&mut con, 1);
    let on_master = snapshot(&mut con);
    assert!(
        on_master.len() >= 5,
        "too little state to compare: {}",
        on_master.len()
    );
    assert_eq!(snapshot(&mut plain.conn()), on_master);
}
