//! Bounded cost: on logs of a million members in Redisson's format (one member per
//! acquisition), no command and no waiter's re-check walks the log, expired or released logs
//! are dropped whole and freed in the background, and what reaches replicas is a few commands.
//!
//! Nothing here times anything. A walk is caught by a corrupt member planted in the middle of
//! each log: a path that read it would fail with the corrupt-data error. What the server did is
//! read from a plain replica's command statistics and the master's lazy-free counter.

use crate::common::waiters::*;
use crate::common::*;

const MILLION: i64 = 1_000_000;
const INTERVAL: i64 = 10_000;

/// Fills `{name}:permits` with `members` one-permit members in Redisson's 3.17+ layout, scored
/// from `T0 - INTERVAL / 2` on, 200 to the millisecond, plus one undecodable member in the
/// middle; the hash says rate = `members`, and the value that nothing is left.
fn build(con: &mut Connection, name: &str, members: i64) {
    const FILL: &str = "
        local from, to, base = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
        for i = from, to do
            local member = string.char(16) .. string.format('%016d', i) .. string.char(1, 0, 0, 0)
            redis.call('ZADD', KEYS[1], base + math.floor(i / 200), member)
        end
        return to - from + 1";
    let log = format!("{{{name}}}:permits");
    let base = T0 - INTERVAL / 2;
    let chunk = 100_000;
    for from in (0..members).step_by(chunk as usize) {
        let to = (from + chunk).min(members) - 1;
        let added: i64 = redis::cmd("EVAL")
            .arg(FILL)
            .arg(1)
            .arg(&log)
            .arg(from)
            .arg(to)
            .arg(base)
            .query(con)
            .expect("fill the log");
        assert_eq!(added, to - from + 1);
    }
    let middle = (base + members / 400).to_string();
    let _: i64 = run(
        con,
        &[b"ZADD", log.as_bytes(), middle.as_bytes(), b"\x10bad"],
    )
    .unwrap();
    let rate = members.to_string();
    let _: i64 = run(
        con,
        &[
            b"HSET",
            name.as_bytes(),
            b"rate",
            rate.as_bytes(),
            b"interval",
            INTERVAL.to_string().as_bytes(),
            b"type",
            b"0",
            b"keepAliveTime",
            b"0",
        ],
    )
    .unwrap();
    let _: () = line(con, &format!("SET {{{name}}}:value 0")).unwrap();
}

fn lazyfreed(con: &mut Connection) -> i64 {
    info_field(con, "memory", "lazyfreed_objects")
        .and_then(|v| v.parse().ok())
        .expect("lazyfreed_objects")
}

/// Waits until the background thread has freed `count` objects in all (it frees them after
/// the command returns).
fn wait_lazyfreed(con: &mut Connection, count: i64) {
    let deadline = std::time::Instant::now() + HANG;
    while lazyfreed(con) < count {
        assert!(
            std::time::Instant::now() < deadline,
            "lazyfreed_objects stayed at {} (expected {count}): the log was not unlinked",
            lazyfreed(con)
        );
        sleep_ms(5);
    }
    assert_eq!(lazyfreed(con), count);
}

fn repl_offset(con: &mut Connection) -> i64 {
    info_field(con, "replication", "master_repl_offset")
        .and_then(|v| v.parse().ok())
        .expect("master_repl_offset")
}

/// The replica's command counts before and after `act`, for the given commands.
fn replicated(
    master: &mut Connection,
    replica: &mut Connection,
    commands: &[&str],
    act: impl FnOnce(&mut Connection),
) -> Vec<i64> {
    wait_replicas(master, 1);
    let before: Vec<i64> = commands.iter().map(|c| command_calls(replica, c)).collect();
    act(master);
    wait_replicas(master, 1);
    commands
        .iter()
        .zip(before)
        .map(|(c, b)| command_calls(replica, c) - b)
        .collect()
}

#[test]
fn million_member_logs_are_served_without_walking_them() {
    let server = Server::start();
    let mut con = server.conn();
    set_clock(&mut con, T0);
    build(&mut con, "big", MILLION);
    build(&mut con, "all", MILLION);
    build(&mut con, "gone", 100_000);
    build(&mut con, "reset", 100_000);
    let replica = Server::start_replica(&server, false);
    let mut rcon = replica.conn();

    // A refusal for the whole rate reads the newest entry: free when it expires.
    assert_eq!(try_acquire(&mut con, "big", MILLION as u32), Some(9_999));
    assert_eq!(line::<i64>(&mut con, "RATELIMIT.AVAILABLE big").unwrap(), 0);
    // A waiter re-checked by its timer reads as little: it times out with a hint, it is not
    // failed by the corrupt member.
    let waiter = park(&server, &mut con, "RATELIMIT.ACQUIRE big 1000 TIMEOUT 300");
    advance(&mut con, 1);
    let served = served(waiter);
    assert!(matches!(served.reply, Reply::Wait(_)), "{:?}", served.reply);

    // KEEPSTATE reads what is logged off the value: the debt of a halved rate.
    assert_eq!(
        line::<i64>(&mut con, "RATELIMIT.SETRATE big 500000 10000 KEEPSTATE").unwrap(),
        1
    );
    assert_eq!(get(&mut con, "{big}:value").as_deref(), Some("-500000"));

    // RELEASE of a few: one rank range to the replica, not one ZREM per member.
    let counts = replicated(&mut con, &mut rcon, &["zremrangebyrank", "zrem"], |con| {
        assert_eq!(line::<i64>(con, "RATELIMIT.RELEASE big 5").unwrap(), 5)
    });
    assert_eq!(counts, vec![1, 0]);
    assert_eq!(get(&mut con, "{big}:value").as_deref(), Some("-499995"));

    // The first call after the whole log expired drops it whole, freed in the background.
    advance(&mut con, 2 * INTERVAL);
    let freed = lazyfreed(&mut con);
    let counts = replicated(
        &mut con,
        &mut rcon,
        &["unlink", "zremrangebyscore", "zrem"],
        |con| assert_eq!(try_acquire(con, "big", 1), None),
    );
    assert_eq!(counts, vec![1, 0, 0]);
    wait_lazyfreed(&mut con, freed + 1);
    assert_eq!(log_entries(&mut con, "{big}:permits").len(), 1);
    assert_eq!(get(&mut con, "{big}:value").as_deref(), Some("499999"));

    // Releasing everything logged: one UNLINK, a few bytes to the replicas.
    set_clock(&mut con, T0);
    let freed = lazyfreed(&mut con);
    let offset = repl_offset(&mut con);
    let counts = replicated(&mut con, &mut rcon, &["unlink", "zrem"], |con| {
        let released: i64 = line(con, &format!("RATELIMIT.RELEASE all {MILLION}")).unwrap();
        assert_eq!(released, MILLION);
    });
    assert_eq!(counts, vec![1, 0]);
    assert!(repl_offset(&mut con) - offset < 1_000);
    wait_lazyfreed(&mut con, freed + 1);
    assert!(!exists(&mut con, "{all}:permits"));
    assert_eq!(available(&mut con, "all"), MILLION);

    // DELETE and SETRATE's reset unlink too.
    let freed = lazyfreed(&mut con);
    let counts = replicated(&mut con, &mut rcon, &["unlink", "del"], |con| {
        assert_eq!(line::<i64>(con, "RATELIMIT.DELETE gone").unwrap(), 3);
        assert_eq!(
            line::<i64>(con, "RATELIMIT.SETRATE reset 10 1000").unwrap(),
            1
        );
    });
    assert_eq!(counts, vec![5, 0]);
    wait_lazyfreed(&mut con, freed + 2);
    assert!(!exists(&mut con, "{reset}:permits"));

    wait_replicas(&mut con, 1);
    assert_eq!(snapshot(&mut con), snapshot(&mut rcon));
}

#[test]
fn an_error_line_shows_at_most_256_bytes_of_a_name() {
    let server = Server::start();
    let mut con = server.conn();
    set_clock(&mut con, T0);
    assert_eq!(
        line::<i64>(&mut con, "RATELIMIT.SETRATE pc 5 1000 PER_CLIENT").unwrap(),
        1
    );
    let client: Vec<u8> = (0..1_000_000u32).map(|i| (i % 251) as u8).collect();
    let mut value = b"{pc}:value:".to_vec();
    value.extend_from_slice(&client);
    let _: () = run(&mut con, &[b"SET", &value, b"not a number"]).unwrap();
    let err = match run::<Value>(
        &mut con,
        &[b"RATELIMIT.TRYACQUIRE", b"pc", b"CLIENT", &client],
    ) {
        Ok(v) => panic!("succeeded with {v:?}"),
        Err(e) => error_line(&e),
    };
    assert!(
        err.starts_with("ERR corrupt rate limiter key '{pc}:value:\\x00\\x01"),
        "{}",
        &err[..err.len().min(200)]
    );
    assert!(err.contains("...(999755 more bytes)"), "{}", err.len());
    assert!(err.len() < 2_000, "an error line of {} bytes", err.len());
}
