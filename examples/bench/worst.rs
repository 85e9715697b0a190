//! Worst cases: ONE command on a big permit log, per heavy path.
//!
//! For each size N, a limiter with rate = N and a 10 s interval gets a log of N members in
//! Redisson's format, one per acquisition (`0x10`, 16 random id bytes, permits = 1 as u32 LE;
//! score = the acquisition's ms), spread over the 5 s before `now`, and a value of 0 (= rate -
//! live permits): the window is full. It is loaded with pipelined ZADDs once per size and kept
//! in stash keys; every measured call gets a fresh copy by `COPY stash live REPLACE` (in-server,
//! much faster than reloading, and the same memory layout for every sample). Then one call is
//! timed, `REPS` times (medians reported):
//!
//! - wall: the client's round trip of that one call;
//! - call: the call's `usec` in INFO commandstats (after CONFIG RESETSTAT): wall time inside the
//!   command, without reading the request and writing the reply, but with any time the thread
//!   was preempted on a busy machine;
//! - cpu: the server main thread's CPU time across the call (below), immune to preemption; it
//!   also counts what the server does for the call after the command (feeding the backlog);
//! - repl: how far `master_repl_offset` moved, i.e. the bytes of the effects the call
//!   replicates (what the replicas receive and, alike, what the AOF appends).
//!
//! The blocked ACQUIRE re-check runs in a module timer that ADVANCE's nudge sets, after the
//! command itself, where commandstats, SLOWLOG and LATENCY do not see it. It is measured as the
//! server main thread's CPU time (`used_cpu_user_main_thread + used_cpu_sys_main_thread`, INFO
//! cpu: getrusage(RUSAGE_THREAD), printed to the microsecond; the kernel brings a thread's
//! runtime up to date when it sleeps, and the server sleeps between our requests) across
//! `ADVANCE 1` with one waiter parked, minus the same across `ADVANCE 1` with nobody waiting.
//! The 0 ms timer fires in the same event-loop iteration as ADVANCE, before its reply is
//! written, so ADVANCE's round trip includes it too (the two agree).
//!
//! The server here is its own, with a replication backlog: Redis creates one only when a
//! replica first syncs, so a client sends `PSYNC ? -1` once at start and hangs up; with
//! `repl-backlog-ttl 0` the backlog then stays, and master_repl_offset counts every byte
//! propagated.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::time::{Duration, Instant};

use redis::{Connection, Value};

use serde::Serialize;

use crate::limiter::{keys, set_clock, Ids};
use crate::machine::LoadMeter;
use crate::measure::{command_stats, median};
use crate::report::{percent, round};
use crate::server::{self, Server};
use crate::{flush, Res, T0};

/// Log sizes of the full run, and of `--quick`.
pub const SIZES: [i64; 3] = [10_000, 100_000, 1_000_000];
pub const QUICK_SIZES: [i64; 2] = [10_000, 100_000];
/// The limiter's interval; the log spans the `SPAN` ms before `now`, so ADVANCE can move the
/// clock for the waiter's re-checks without any entry expiring.
const INTERVAL: i64 = 10_000;
const SPAN: i64 = INTERVAL / 2;
/// The measured limiter, and the keys its prepared state is kept in.
const NAME: &str = "bench:worst";
const STASH: &str = "bench:worst-stash";
/// Calls measured per path and size (each on a fresh copy of the log; medians reported), and
/// re-check samples with a waiter parked; baseline samples without one.
const REPS: usize = 3;
const RECHECKS: usize = 3;
const BASELINES: usize = 5;

/// One heavy path.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Case {
    Refused,
    KeepState,
    Expired,
    ReleaseAll,
    Delete,
    Reset,
    Recheck,
}

impl Case {
    const ALL: [Case; 7] = [
        Case::Refused,
        Case::KeepState,
        Case::Expired,
        Case::ReleaseAll,
        Case::Delete,
        Case::Reset,
        Case::Recheck,
    ];

    fn label(self) -> &'static str {
        match self {
            Case::Refused => "TRYACQUIRE rate permits, full: refused",
            Case::KeepState => "SETRATE rate/2 KEEPSTATE",
            Case::Expired => "TRYACQUIRE 1 after the log expired",
            Case::ReleaseAll => "RELEASE rate permits",
            Case::Delete => "DELETE",
            Case::Reset => "SETRATE rate/2 (state reset)",
            Case::Recheck => "ACQUIRE waiter re-check (timer)",
        }
    }

    fn key(self) -> &'static str {
        match self {
            Case::Refused => "tryacquire_refused",
            Case::KeepState => "setrate_keepstate",
            Case::Expired => "tryacquire_after_expiry",
            Case::ReleaseAll => "release_all",
            Case::Delete => "delete",
            Case::Reset => "setrate_reset",
            Case::Recheck => "acquire_recheck",
        }
    }
}

pub struct Row {
    case: Case,
    members: i64,
    /// The client's round trip.
    wall_ms: f64,
    /// INFO commandstats usec of the call (wall time inside the command); None for the
    /// re-check, which is no command.
    call_ms: Option<f64>,
    /// The server main thread's CPU across the call (see `main_thread_cpu`).
    cpu_ms: f64,
    repl_bytes: u64,
}

impl Row {
    /// Medians of the samples; they must agree on the bytes replicated.
    fn median_of(case: Case, members: i64, samples: &[Row]) -> Res<Row> {
        let pick = |f: fn(&Row) -> f64| median(&samples.iter().map(f).collect::<Vec<_>>());
        let repl_bytes = samples.first().map_or(0, |r| r.repl_bytes);
        if samples.iter().any(|r| r.repl_bytes != repl_bytes) {
            return Err(format!(
                "{}: the samples replicated different byte counts",
                case.label()
            )
            .into());
        }
        Ok(Row {
            case,
            members,
            wall_ms: pick(|r| r.wall_ms),
            call_ms: Some(pick(|r| r.call_ms.unwrap_or(f64::NAN))),
            cpu_ms: pick(|r| r.cpu_ms),
            repl_bytes,
        })
    }
}

/// The re-check's baseline at one size: ADVANCE 1 with nobody waiting (medians).
pub struct Baseline {
    members: i64,
    wall_ms: f64,
    cpu_ms: f64,
}

pub struct Worst {
    rows: Vec<Row>,
    baselines: Vec<Baseline>,
    /// Seconds spent loading each size's log (pipelined ZADDs).
    load_seconds: Vec<(i64, f64)>,
    /// Share of the CPUs other processes used during the section.
    busy: Option<f64>,
    seconds: f64,
}

/// Runs the worst cases on a server of their own, for each of `sizes`.
pub fn run(module: &Path, sizes: &[i64]) -> Res<Worst> {
    let started = Instant::now();
    let server = server::start(
        module,
        &[],
        &["--repl-backlog-size", "16mb", "--repl-backlog-ttl", "0"],
    )?;
    let mut con = server::connect(&server)?;
    create_backlog(&server, &mut con)?;
    let load = LoadMeter::start(&mut con);
    let mut ids = Ids::new(0x0bad_5eed);
    let mut worst = Worst {
        rows: Vec::new(),
        baselines: Vec::new(),
        load_seconds: Vec::new(),
        busy: None,
        seconds: 0.0,
    };
    for &n in sizes {
        print!("worst cases, {n:>7} members: loading ... ");
        flush();
        let loading = Instant::now();
        set_clock(&mut con, T0)?;
        prepare(&mut con, n, &mut ids)?;
        let load_seconds = loading.elapsed().as_secs_f64();
        worst.load_seconds.push((n, load_seconds));
        print!("{load_seconds:.1}s, measuring ");
        flush();
        for case in Case::ALL {
            if case == Case::Recheck {
                restore(&mut con, n)?;
                set_clock(&mut con, T0)?;
                let (row, baseline) = recheck(&server, &mut con, n)?;
                worst.rows.push(row);
                worst.baselines.push(baseline);
            } else {
                let mut samples = Vec::new();
                for _ in 0..REPS {
                    // Every sample on a fresh copy, so all see the same memory layout.
                    restore(&mut con, n)?;
                    set_clock(&mut con, T0)?;
                    samples.push(one_call(&mut con, case, n)?);
                }
                worst.rows.push(Row::median_of(case, n, &samples)?);
            }
            print!(".");
            flush();
        }
        // Free this size's logs before loading the next (DEL: synchronous, not on the
        // lazyfree thread while the next size is measured).
        let mut del = redis::cmd("DEL");
        for key in live_keys().iter().chain(stash_keys().iter()) {
            del.arg(key);
        }
        let _: () = del.query(&mut con)?;
        println!(" done");
    }
    worst.busy = load.others(&mut con);
    worst.seconds = started.elapsed().as_secs_f64();
    server::stop(server);
    Ok(worst)
}

/// Makes the server create its replication backlog: Redis does so when a replica first asks
/// for a sync. One PSYNC, read up to its +FULLRESYNC, then hang up; the backlog stays (TTL 0).
fn create_backlog(server: &Server, con: &mut Connection) -> Res<()> {
    let mut replica = TcpStream::connect(("127.0.0.1", server.port))?;
    replica.set_read_timeout(Some(Duration::from_secs(10)))?;
    replica.write_all(b"PSYNC ? -1\r\n")?;
    let mut seen = Vec::new();
    let mut buf = [0u8; 256];
    while !seen.windows(11).any(|w| w == b"+FULLRESYNC") {
        let got = replica.read(&mut buf)?;
        if got == 0 {
            return Err("the server closed the PSYNC connection before +FULLRESYNC".into());
        }
        seen.extend_from_slice(&buf[..got]);
    }
    drop(replica);
    // The sync started a BGSAVE (of an empty dataset): let it finish before measuring.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let persistence: String = redis::cmd("INFO").arg("persistence").query(con)?;
        if info_field(&persistence, "rdb_bgsave_in_progress") == Some(0.0) {
            break;
        }
        if Instant::now() > deadline {
            return Err("the BGSAVE of the PSYNC did not finish".into());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let replication: String = redis::cmd("INFO").arg("replication").query(con)?;
    if info_field(&replication, "repl_backlog_active") != Some(1.0) {
        return Err("no replication backlog after PSYNC: repl bytes cannot be measured".into());
    }
    // A probe write must move the offset, or the repl column would read 0 for everything.
    let before = repl_offset(con)?;
    let _: () = redis::cmd("SET").arg("bench:probe").arg(1).query(con)?;
    if repl_offset(con)? <= before {
        return Err("master_repl_offset does not grow: repl bytes cannot be measured".into());
    }
    Ok(())
}

fn live_keys() -> [String; 3] {
    let [hash, value, _, permits, _] = keys(NAME);
    [hash, value, permits]
}

fn stash_keys() -> [String; 3] {
    let [hash, value, _, permits, _] = keys(STASH);
    [hash, value, permits]
}

/// Creates the limiter (rate = n, interval 10 s), loads its log of n one-permit members scored
/// over the SPAN ms before T0, sets the value to 0, checks it, and copies it to the stash.
fn prepare(con: &mut Connection, n: i64, ids: &mut Ids) -> Res<()> {
    let [hash, value, permits] = live_keys();
    let _: () = redis::cmd("DEL")
        .arg(&hash)
        .arg(&value)
        .arg(&permits)
        .query(con)?;
    let _: i64 = redis::cmd("RATELIMIT.SETRATE")
        .arg(NAME)
        .arg(n)
        .arg(INTERVAL)
        .query(con)?;
    const PER_ZADD: i64 = 1_000;
    const ZADDS_PER_TRIP: i64 = 50;
    let mut i = 0;
    while i < n {
        let mut pipe = redis::pipe();
        for _ in 0..ZADDS_PER_TRIP {
            if i >= n {
                break;
            }
            let cmd = pipe.cmd("ZADD").arg(&permits);
            let end = (i + PER_ZADD).min(n);
            for j in i..end {
                cmd.arg(T0 - SPAN + 1 + j * SPAN / n)
                    .arg(&ids.member(1)[..]);
            }
            i = end;
            cmd.ignore();
        }
        let _: () = pipe.query(con)?;
    }
    let _: () = redis::cmd("SET").arg(&value).arg(0).query(con)?;
    check_prepared(con, n)?;
    let mut pipe = redis::pipe();
    for (from, to) in live_keys().iter().zip(stash_keys().iter()) {
        pipe.cmd("COPY").arg(from).arg(to).arg("REPLACE").ignore();
    }
    let _: () = pipe.query(con)?;
    Ok(())
}

/// A fresh copy of the prepared limiter, from the stash.
fn restore(con: &mut Connection, n: i64) -> Res<()> {
    let mut pipe = redis::pipe();
    for (from, to) in stash_keys().iter().zip(live_keys().iter()) {
        pipe.cmd("COPY").arg(from).arg(to).arg("REPLACE").ignore();
    }
    let _: () = pipe.query(con)?;
    check_prepared(con, n)
}

/// The limiter is as prepared: rate n, n members logged, value 0.
fn check_prepared(con: &mut Connection, n: i64) -> Res<()> {
    let (rate, logged, value) = limiter_state(con)?;
    if rate != Some(n) || logged != n || value.as_deref() != Some("0") {
        return Err(format!(
            "{NAME}: expected rate {n}, {n} logged, value 0; found rate {rate:?}, {logged} logged, value {value:?}"
        )
        .into());
    }
    Ok(())
}

/// (rate, members logged, value) of the live limiter.
fn limiter_state(con: &mut Connection) -> Res<(Option<i64>, i64, Option<String>)> {
    let [hash, value, permits] = live_keys();
    let (rate, logged, value): (Option<i64>, i64, Option<String>) = redis::pipe()
        .cmd("HGET")
        .arg(&hash)
        .arg("rate")
        .cmd("ZCARD")
        .arg(&permits)
        .cmd("GET")
        .arg(&value)
        .query(con)?;
    Ok((rate, logged, value))
}

/// The one measured call of `case` on a fresh limiter of n members, and a check that it took
/// the path it is named for.
fn one_call(con: &mut Connection, case: Case, n: i64) -> Res<Row> {
    let half = n / 2;
    let (command, call) = match case {
        Case::Refused => (
            "ratelimit.tryacquire",
            redis::cmd("RATELIMIT.TRYACQUIRE").arg(NAME).arg(n).clone(),
        ),
        Case::KeepState => (
            "ratelimit.setrate",
            redis::cmd("RATELIMIT.SETRATE")
                .arg(NAME)
                .arg(half)
                .arg(INTERVAL)
                .arg("KEEPSTATE")
                .clone(),
        ),
        Case::Expired => {
            // Every entry is free again at its score + interval; the newest is scored T0.
            set_clock(con, T0 + INTERVAL)?;
            (
                "ratelimit.tryacquire",
                redis::cmd("RATELIMIT.TRYACQUIRE").arg(NAME).clone(),
            )
        }
        Case::ReleaseAll => (
            "ratelimit.release",
            redis::cmd("RATELIMIT.RELEASE").arg(NAME).arg(n).clone(),
        ),
        Case::Delete => (
            "ratelimit.delete",
            redis::cmd("RATELIMIT.DELETE").arg(NAME).clone(),
        ),
        Case::Reset => (
            "ratelimit.setrate",
            redis::cmd("RATELIMIT.SETRATE")
                .arg(NAME)
                .arg(half)
                .arg(INTERVAL)
                .clone(),
        ),
        Case::Recheck => return Err("the re-check is measured by `recheck`".into()),
    };
    let _: () = redis::cmd("CONFIG").arg("RESETSTAT").query(con)?;
    let offset = repl_offset(con)?;
    let cpu = main_thread_cpu(con)?;
    let started = Instant::now();
    let reply: Value = call.query(con)?;
    let wall = started.elapsed();
    let cpu = main_thread_cpu(con)? - cpu;
    let repl_bytes = repl_offset(con)? - offset;
    let (calls, usec) = command_stats(con, command)?;
    if calls != 1 {
        return Err(format!("{command}: commandstats counted {calls} calls, not 1").into());
    }
    let after = limiter_state(con)?;
    let expected = match case {
        Case::Refused => {
            matches!(reply, Value::Int(ms) if ms > 0) && after == (Some(n), n, Some("0".into()))
        }
        // The window holds n permits against a rate of n/2: the value keeps the debt.
        Case::KeepState => {
            reply == Value::Int(1) && after == (Some(half), n, Some((half - n).to_string()))
        }
        Case::Expired => reply == Value::Nil && after == (Some(n), 1, Some((n - 1).to_string())),
        Case::ReleaseAll => reply == Value::Int(n) && after == (Some(n), 0, Some(n.to_string())),
        Case::Delete => reply == Value::Int(3) && after == (None, 0, None),
        Case::Reset => reply == Value::Int(1) && after == (Some(half), 0, None),
        Case::Recheck => false,
    };
    if !expected {
        return Err(format!(
            "{}: reply {reply:?}, then (rate, logged, value) = {after:?}: not the path being measured",
            case.label()
        )
        .into());
    }
    Ok(Row {
        case,
        members: n,
        wall_ms: wall.as_secs_f64() * 1e3,
        call_ms: Some(usec as f64 / 1e3),
        cpu_ms: cpu * 1e3,
        repl_bytes,
    })
}

/// The timer's re-check of one ACQUIRE waiter for all n permits on the full log: the main
/// thread's CPU across `ADVANCE 1` (which nudges the queue: a 0 ms timer that re-checks the
/// waiter, which stays blocked) minus the same with nobody waiting.
fn recheck(server: &Server, con: &mut Connection, n: i64) -> Res<(Row, Baseline)> {
    let mut base_wall = Vec::new();
    let mut base_cpu = Vec::new();
    for _ in 0..BASELINES {
        let (wall, cpu, _) = advance_sample(con)?;
        base_wall.push(wall);
        base_cpu.push(cpu);
    }
    let mut waiter = server::connect(server)?;
    let waiter_id: i64 = redis::cmd("CLIENT").arg("ID").query(&mut waiter)?;
    waiter.send_packed_command(
        &redis::cmd("RATELIMIT.ACQUIRE")
            .arg(NAME)
            .arg(n)
            .arg("TIMEOUT")
            .arg(0)
            .get_packed_command(),
    )?;
    wait_blocked(con, 1)?;
    let mut walls = Vec::new();
    let mut cpus = Vec::new();
    let mut repl = 0;
    for _ in 0..RECHECKS {
        let (wall, cpu, bytes) = advance_sample(con)?;
        walls.push(wall);
        cpus.push(cpu);
        repl = repl.max(bytes);
        // Still waiting: the re-check refused it, as it must on a full window.
        wait_blocked(con, 1)?;
    }
    let unblocked: i64 = redis::cmd("CLIENT")
        .arg("UNBLOCK")
        .arg(waiter_id)
        .query(con)?;
    let reply = waiter.recv_response()?;
    if unblocked != 1 || !matches!(reply, Value::Int(ms) if ms > 0) {
        return Err(format!(
            "the parked ACQUIRE: CLIENT UNBLOCK replied {unblocked}, the waiter got {reply:?}"
        )
        .into());
    }
    let baseline = Baseline {
        members: n,
        wall_ms: median(&base_wall),
        cpu_ms: median(&base_cpu),
    };
    let row = Row {
        case: Case::Recheck,
        members: n,
        wall_ms: median(&walls),
        call_ms: None,
        cpu_ms: median(&cpus) - baseline.cpu_ms,
        repl_bytes: repl,
    };
    Ok((row, baseline))
}

/// (wall ms of ADVANCE 1, main-thread CPU ms across it, repl bytes across it). A 0 ms timer
/// set by ADVANCE fires in the same event-loop iteration, before the reply is written, so
/// the wall time includes the timer's work too.
fn advance_sample(con: &mut Connection) -> Res<(f64, f64, u64)> {
    let offset = repl_offset(con)?;
    let cpu = main_thread_cpu(con)?;
    let started = Instant::now();
    let _: i64 = redis::cmd("RATELIMIT.DEBUG")
        .arg("ADVANCE")
        .arg(1)
        .query(con)?;
    let wall = started.elapsed().as_secs_f64() * 1e3;
    let cpu = (main_thread_cpu(con)? - cpu) * 1e3;
    let bytes = repl_offset(con)? - offset;
    Ok((wall, cpu, bytes))
}

/// Waits until `INFO ratelimit` reports `clients` blocked in ACQUIRE.
fn wait_blocked(con: &mut Connection, clients: u64) -> Res<()> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let info: String = redis::cmd("INFO").arg("ratelimit").query(con)?;
        if info_field(&info, "ratelimit_blocked_clients") == Some(clients as f64) {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!("expected {clients} client(s) blocked in ACQUIRE:\n{info}").into());
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Seconds of CPU of the server's main thread (getrusage RUSAGE_THREAD, to the microsecond).
fn main_thread_cpu(con: &mut Connection) -> Res<f64> {
    let info: String = redis::cmd("INFO").arg("cpu").query(con)?;
    match (
        info_field(&info, "used_cpu_user_main_thread"),
        info_field(&info, "used_cpu_sys_main_thread"),
    ) {
        (Some(user), Some(sys)) => Ok(user + sys),
        _ => Err("INFO cpu has no used_cpu_*_main_thread (Redis >= 6.2 needed)".into()),
    }
}

fn repl_offset(con: &mut Connection) -> Res<u64> {
    let info: String = redis::cmd("INFO").arg("replication").query(con)?;
    info_field(&info, "master_repl_offset")
        .map(|v| v as u64)
        .ok_or_else(|| "no master_repl_offset in INFO replication".into())
}

fn info_field(info: &str, name: &str) -> Option<f64> {
    info.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))?
        .trim()
        .parse()
        .ok()
}

impl Worst {
    pub fn table(&self) -> String {
        use std::fmt::Write as _;
        let mut s = String::new();
        let _ = writeln!(
            s,
            "Worst cases: ONE call on a log of N members in Redisson's format (1 permit each, rate = N,\n\
             interval {} s, entries over the last {} s, value 0: the window full), each on a fresh copy;\n\
             median of {REPS} calls. wall = the client's round trip; call = INFO commandstats usec (wall\n\
             time inside the command: includes time the thread was preempted); cpu = the server main\n\
             thread's CPU across the call (INFO cpu; also counts feeding the replication backlog after\n\
             the command); repl = master_repl_offset growth: bytes replicated (an AOF appends alike).\n\
             Re-check (no command: a timer): cpu = main-thread CPU across ADVANCE 1 with one ACQUIRE of\n\
             N permits parked, minus the same with none; wall = ADVANCE 1's round trip, timer included.",
            INTERVAL / 1000,
            SPAN / 1000
        );
        let _ = writeln!(
            s,
            "{:<40} {:>9} {:>9} {:>9} {:>9} {:>11}",
            "path", "members", "wall ms", "call ms", "cpu ms", "repl bytes"
        );
        for case in Case::ALL {
            for row in self.rows.iter().filter(|r| r.case == case) {
                let call = row.call_ms.map_or("-".into(), |ms| format!("{ms:.2}"));
                let _ = writeln!(
                    s,
                    "{:<40} {:>9} {:>9.2} {:>9} {:>9.2} {:>11}",
                    case.label(),
                    row.members,
                    row.wall_ms,
                    call,
                    row.cpu_ms,
                    row.repl_bytes
                );
            }
        }
        let baselines: Vec<String> = self
            .baselines
            .iter()
            .map(|b| {
                format!(
                    "{}: {:.3} ms cpu, {:.3} ms wall",
                    b.members, b.cpu_ms, b.wall_ms
                )
            })
            .collect();
        let _ = writeln!(
            s,
            "(re-check: median of {RECHECKS}; its baseline, ADVANCE 1 with nobody waiting, median of {BASELINES}: {})",
            baselines.join("; ")
        );
        let loads: Vec<String> = self
            .load_seconds
            .iter()
            .map(|(n, secs)| format!("{n}: {secs:.1}s"))
            .collect();
        let _ = writeln!(
            s,
            "(loading each log by pipelined ZADD: {}; section took {:.0}s; CPU used by other processes: {})",
            loads.join(", "),
            self.seconds,
            percent(self.busy)
        );
        s
    }

    /// The section as JSON: how it measures, then one row per path and size.
    pub fn json(&self) -> WorstJson {
        WorstJson {
            interval_ms: INTERVAL,
            log_span_ms: SPAN,
            permits_per_member: 1,
            reps: REPS,
            rechecks: RECHECKS,
            wall_ms: "client round trip of the one call (median)",
            call_ms: "INFO commandstats usec of the call",
            cpu_ms: "server main thread CPU across the call (INFO cpu used_cpu_*_main_thread); \
                     acquire_recheck: across RATELIMIT.DEBUG ADVANCE 1 with one waiter parked, \
                     minus recheck_baselines",
            repl_bytes: "growth of master_repl_offset across the call",
            rows: self
                .rows
                .iter()
                .map(|r| RowJson {
                    path: r.case.key(),
                    label: r.case.label(),
                    members: r.members,
                    wall_ms: round(r.wall_ms, 3),
                    call_ms: r.call_ms.map(|ms| round(ms, 3)),
                    cpu_ms: round(r.cpu_ms, 3),
                    repl_bytes: r.repl_bytes,
                })
                .collect(),
            recheck_baselines: self
                .baselines
                .iter()
                .map(|b| BaselineJson {
                    members: b.members,
                    cpu_ms: round(b.cpu_ms, 3),
                    wall_ms: round(b.wall_ms, 3),
                })
                .collect(),
            other_load: self.busy.map(|b| round(b, 3)),
            seconds: round(self.seconds, 1),
        }
    }
}

/// `worst_cases` in the JSON reports.
#[derive(Serialize)]
pub struct WorstJson {
    interval_ms: i64,
    log_span_ms: i64,
    permits_per_member: u32,
    reps: usize,
    rechecks: usize,
    /// What each column of the rows means.
    wall_ms: &'static str,
    call_ms: &'static str,
    cpu_ms: &'static str,
    repl_bytes: &'static str,
    rows: Vec<RowJson>,
    recheck_baselines: Vec<BaselineJson>,
    other_load: Option<f64>,
    seconds: f64,
}

#[derive(Serialize)]
struct RowJson {
    path: &'static str,
    label: &'static str,
    members: i64,
    wall_ms: f64,
    call_ms: Option<f64>,
    cpu_ms: f64,
    repl_bytes: u64,
}

#[derive(Serialize)]
struct BaselineJson {
    members: i64,
    cpu_ms: f64,
    wall_ms: f64,
}
