//! `make bench`: the module's RATELIMIT.TRYACQUIRE against the equivalent Lua script
//! (`bench/tryacquire.lua`, the calls Redisson's tryAcquire makes) and plain INCR, side by side
//! on one redis-server started here. See `bench/README.md` for what is measured and how.
//!
//! ```text
//! cargo run --release --example bench                       # the full benchmark (make bench)
//! cargo run --release --example bench -- --quick            # fewer calls, a smoke run
//! cargo run --release --example bench -- --worst [--quick]  # only the worst cases
//!                                                           # (examples/bench/worst.rs)
//! cargo run --release --example bench -- profile [--window N] [--calls N] [--top N]
//!                                                           # instructions per call (callgrind)
//! ```
//!
//! The module is `$RATELIMIT_MODULE`, else `$CARGO_TARGET_DIR/release/libratelimit.so`, else
//! `target/release/libratelimit.so`; the server is `$REDIS_SERVER` (default `redis-server`).
//! Results go to stdout and to `bench/results/latest.json` (git-ignored).
//!
//! This is a measurement, not a test: nothing here asserts a time. It does check that every call
//! took the path it claims to measure (granted, refused), and fails loudly if not.

use std::collections::BTreeMap;
use std::env;
use std::error::Error;
use std::fmt::Write as _;
use std::fs;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use redis::{Connection, Value};

// The crate root is examples/bench.rs, so its modules would be looked up in examples/, where
// cargo would take them for examples of their own.
#[path = "bench/worst.rs"]
mod worst;

type Res<T> = Result<T, Box<dyn Error>>;

/// The frozen clock starts here: 2026-01-01T00:00:00Z in unix ms.
const T0: i64 = 1_767_225_600_000;
/// Window sizes (entries logged = rate = interval in ms) of the CPU-per-call measurement.
const WINDOWS: [i64; 3] = [100, 10_000, 1_000_000];
/// The Lua port, sent once with SCRIPT LOAD and run with EVALSHA.
const LUA: &str = include_str!("../bench/tryacquire.lua");
/// Commands per pipelined round trip while driving the measured calls.
const BATCH: usize = 500;
/// The client id in the script's per-client key names (unused: the limiters are OVERALL).
const CLIENT: &str = "bench";
/// Window of the limiter the throughput runs hammer (full, clock frozen: every call refused).
const THROUGHPUT_WINDOW: i64 = 1_000;
const CLIENTS: usize = 50;

fn main() {
    let args: Vec<String> = env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("profile") => profile(&args[1..]),
        Some("-h" | "--help") => {
            println!(
                "usage: bench [--quick] [--worst] | bench profile [--window N] [--calls N] [--top N]"
            );
            Ok(())
        }
        _ => full(&args),
    };
    if let Err(e) = result {
        eprintln!("bench: {e}");
        std::process::exit(1);
    }
}

// ------------------------------------------------------------------------------------------
// The full benchmark
// ------------------------------------------------------------------------------------------

struct Plan {
    /// Measured calls per repetition, and repetitions (the median is reported).
    calls: usize,
    reps: usize,
    /// redis-benchmark requests per run at pipeline 1 / 16, and rounds (median reported).
    requests_p1: usize,
    requests_p16: usize,
    rounds: usize,
}

/// Server CPU per call of one measured phase, in microseconds: the median over repetitions.
#[derive(Default)]
struct Cpu {
    samples: Vec<f64>,
}

impl Cpu {
    fn median(&self) -> f64 {
        median(&self.samples)
    }
}

#[derive(Default)]
struct WindowResult {
    window: i64,
    module_grant: Cpu,
    lua_grant: Cpu,
    module_refuse: Cpu,
    lua_refuse: Cpu,
    memory: Memory,
}

#[derive(Default)]
struct Memory {
    hash: i64,
    value: i64,
    permits: i64,
    encoding: String,
}

impl Memory {
    fn total(&self) -> i64 {
        self.hash + self.value + self.permits
    }
}

fn full(args: &[String]) -> Res<()> {
    let quick = args.iter().any(|a| a == "--quick");
    let worst_only = args.iter().any(|a| a == "--worst");
    if let Some(bad) = args.iter().find(|a| *a != "--quick" && *a != "--worst") {
        return Err(format!("unknown argument '{bad}' (try --help)").into());
    }
    let worst_sizes: &[i64] = if quick {
        &worst::QUICK_SIZES
    } else {
        &worst::SIZES
    };
    if worst_only {
        return worst_cases(quick, worst_sizes);
    }
    let plan = if quick {
        Plan {
            calls: 5_000,
            reps: 3,
            requests_p1: 20_000,
            requests_p16: 100_000,
            rounds: 1,
        }
    } else {
        Plan {
            calls: 20_000,
            reps: 5,
            requests_p1: 100_000,
            requests_p16: 1_000_000,
            rounds: 5,
        }
    };
    let started = Instant::now();
    let machine = Machine::probe();
    let module = module_path();
    println!("ratelimit bench: module {}", module.display());
    println!(
        "machine: {} CPUs, {}; {}",
        machine.cpus, machine.cpu_model, machine.redis_version
    );
    let busy_before = wait_until_quiet(Duration::from_secs(if quick { 0 } else { 120 }));
    let server = Server::start(&module, &[], &[])?;
    let mut con = server.conn()?;
    set_clock(&mut con, T0)?;
    let mut clock = T0;
    let sha: String = redis::cmd("SCRIPT").arg("LOAD").arg(LUA).query(&mut con)?;
    let mut ids = Ids::new(0x5eed);
    let load = LoadMeter::start(&mut con);

    // CPU per call, window by window (only one big window in memory at a time).
    let mut windows = Vec::new();
    let mut incr = Cpu::default();
    for &window in &WINDOWS {
        let name = format!("bench:w{window}");
        print!("window {window:>9}: filling ... ");
        flush();
        let fill_started = Instant::now();
        fill_window(&mut con, &name, window, clock, &mut ids)?;
        print!(
            "{:.1}s, measuring ... ",
            fill_started.elapsed().as_secs_f64()
        );
        flush();
        let mut result = WindowResult {
            window,
            ..WindowResult::default()
        };
        // Warm up both paths (the first TRYACQUIRE also converts the value string in place).
        module_grants(&mut con, &name, 1_000.min(plan.calls), &mut clock)?;
        lua_grants(
            &mut con,
            &sha,
            &name,
            1_000.min(plan.calls),
            &mut clock,
            &mut ids,
        )?;
        result.memory = memory(&mut con, &name)?;
        for _ in 0..plan.reps {
            result.module_grant.samples.push(measure(
                &mut con,
                "ratelimit.tryacquire",
                plan.calls,
                |con| module_grants(con, &name, plan.calls, &mut clock),
            )?);
            result
                .lua_grant
                .samples
                .push(measure(&mut con, "evalsha", plan.calls, |con| {
                    lua_grants(con, &sha, &name, plan.calls, &mut clock, &mut ids)
                })?);
            incr.samples
                .push(measure(&mut con, "incr", plan.calls, |con| {
                    incrs(con, plan.calls)
                })?);
        }
        for _ in 0..plan.reps {
            result.module_refuse.samples.push(measure(
                &mut con,
                "ratelimit.tryacquire",
                plan.calls,
                |con| module_refusals(con, &name, plan.calls, clock),
            )?);
            result
                .lua_refuse
                .samples
                .push(measure(&mut con, "evalsha", plan.calls, |con| {
                    lua_refusals(con, &sha, &name, plan.calls, clock)
                })?);
        }
        check_steady(&mut con, &name, window)?;
        delete(&mut con, &name)?;
        println!("done");
        windows.push(result);
    }

    // Throughput with redis-benchmark.
    let throughput = match which("redis-benchmark") {
        Some(tool) => Some(throughput(
            &mut con, &server, &tool, &sha, &plan, &mut clock, &mut ids,
        )?),
        None => {
            println!("redis-benchmark not found (Debian: apt-get install redis-tools): skipping throughput");
            None
        }
    };
    let busy_during = load.others(&mut con);
    drop(server);

    // The worst cases, on a server of their own (with a replication backlog).
    let worst = worst::run(&module, worst_sizes)?;

    let report = Report {
        machine,
        plan,
        windows,
        incr,
        throughput,
        worst,
        busy: (busy_before, busy_during),
        seconds: started.elapsed().as_secs_f64(),
    };
    let text = report.table();
    println!("\n{text}");
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("bench/results");
    fs::create_dir_all(&dir)?;
    let json_path = dir.join("latest.json");
    fs::write(&json_path, report.json())?;
    fs::write(dir.join("latest.txt"), &text)?;
    println!("written: {}", json_path.display());
    Ok(())
}

/// `--worst`: only the worst cases. Written to bench/results/worst.json (and worst.txt), so a
/// full run's latest.json is kept.
fn worst_cases(quick: bool, sizes: &[i64]) -> Res<()> {
    let started = Instant::now();
    let machine = Machine::probe();
    let module = module_path();
    println!("ratelimit bench --worst: module {}", module.display());
    let busy_before = wait_until_quiet(Duration::from_secs(if quick { 0 } else { 120 }));
    let worst = worst::run(&module, sizes)?;
    let mut text = worst.table();
    let _ = writeln!(
        text,
        "\nMachine: {} CPUs, {}; {}; source {}; run took {:.0}s; CPU used by other processes before the run: {}",
        machine.cpus,
        machine.cpu_model,
        machine.redis_version,
        machine.source,
        started.elapsed().as_secs_f64(),
        percent(busy_before)
    );
    println!("\n{text}");
    let json = format!(
        "{{\n  \"machine\": {},\n  \"worst_cases\": {},\n  \"other_load_before\": {}\n}}\n",
        machine.json(),
        worst.json(),
        busy_before.map_or("null".into(), |b| format!("{b:.3}"))
    );
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("bench/results");
    fs::create_dir_all(&dir)?;
    let json_path = dir.join("worst.json");
    fs::write(&json_path, json)?;
    fs::write(dir.join("worst.txt"), &text)?;
    println!("written: {}", json_path.display());
    Ok(())
}

/// Runs `drive` (which makes `calls` calls of `command`) between CONFIG RESETSTAT and INFO
/// commandstats, and returns the server's microseconds per call of `command`.
fn measure(
    con: &mut Connection,
    command: &str,
    calls: usize,
    drive: impl FnOnce(&mut Connection) -> Res<()>,
) -> Res<f64> {
    let _: () = redis::cmd("CONFIG").arg("RESETSTAT").query(con)?;
    drive(con)?;
    let (counted, usec) = command_stats(con, command)?;
    if counted != calls as u64 {
        return Err(
            format!("expected {calls} calls of {command}, commandstats has {counted}").into(),
        );
    }
    Ok(usec as f64 / counted as f64)
}

/// `(calls, usec)` of one command from INFO commandstats.
fn command_stats(con: &mut Connection, command: &str) -> Res<(u64, u64)> {
    let info: String = redis::cmd("INFO").arg("commandstats").query(con)?;
    let prefix = format!("cmdstat_{command}:");
    let line = info
        .lines()
        .find(|l| l.starts_with(&prefix))
        .ok_or_else(|| format!("no {prefix} in INFO commandstats"))?;
    let field = |name: &str| -> Res<u64> {
        line[prefix.len()..]
            .split(',')
            .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('='))
            .ok_or_else(|| format!("no {name} in '{line}'"))?
            .parse::<u64>()
            .map_err(|e| format!("{name} in '{line}': {e}").into())
    };
    Ok((field("calls")?, field("usec")?))
}

// ------------------------------------------------------------------------------------------
// Limiter setup and the measured calls
// ------------------------------------------------------------------------------------------

/// The five keys Redisson passes to its script, for an OVERALL limiter named `name`.
fn keys(name: &str) -> [String; 5] {
    [
        name.to_string(),
        format!("{{{name}}}:value"),
        format!("{{{name}}}:value:{CLIENT}"),
        format!("{{{name}}}:permits"),
        format!("{{{name}}}:permits:{CLIENT}"),
    ]
}

/// Random ids for log members (deterministic, so runs are repeatable).
struct Ids(u64);

impl Ids {
    fn new(seed: u64) -> Self {
        Ids(seed)
    }
    /// splitmix64
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn id(&mut self) -> [u8; 16] {
        let mut id = [0u8; 16];
        id[..8].copy_from_slice(&self.next_u64().to_le_bytes());
        id[8..].copy_from_slice(&self.next_u64().to_le_bytes());
        id
    }
    /// A 21-byte log member: 0x10, 16 id bytes, permits as u32 little-endian.
    fn member(&mut self, permits: u32) -> [u8; 21] {
        let mut m = [0u8; 21];
        m[0] = 16;
        m[1..17].copy_from_slice(&self.id());
        m[17..].copy_from_slice(&permits.to_le_bytes());
        m
    }
}

/// Creates limiter `name` with rate = `window` permits per `window` ms and a full window at
/// `now`: `window` entries of 1 permit scored `now - window + 1 ..= now` (1 ms apart), value 0.
/// Filled with pipelined ZADDs rather than `window` acquisitions.
fn fill_window(con: &mut Connection, name: &str, window: i64, now: i64, ids: &mut Ids) -> Res<()> {
    let [hash, value, _, permits, _] = keys(name);
    let _: () = redis::cmd("DEL")
        .arg(&hash)
        .arg(&value)
        .arg(&permits)
        .query(con)?;
    let _: i64 = redis::cmd("RATELIMIT.SETRATE")
        .arg(&hash)
        .arg(window)
        .arg(window)
        .query(con)?;
    const PER_ZADD: i64 = 1_000;
    const ZADDS_PER_TRIP: i64 = 50;
    let mut score = now - window + 1;
    while score <= now {
        let mut pipe = redis::pipe();
        for _ in 0..ZADDS_PER_TRIP {
            if score > now {
                break;
            }
            let cmd = pipe.cmd("ZADD").arg(&permits);
            let end = (score + PER_ZADD - 1).min(now);
            for s in score..=end {
                cmd.arg(s).arg(&ids.member(1)[..]);
            }
            score = end + 1;
            cmd.ignore();
        }
        let _: () = pipe.query(con)?;
    }
    let _: () = redis::cmd("SET").arg(&value).arg(0).query(con)?;
    check_steady(con, name, window)
}

/// The window is full: `window` entries logged and a value of 0.
fn check_steady(con: &mut Connection, name: &str, window: i64) -> Res<()> {
    let [_, value, _, permits, _] = keys(name);
    let logged: i64 = redis::cmd("ZCARD").arg(&permits).query(con)?;
    let stored: Option<String> = redis::cmd("GET").arg(&value).query(con)?;
    if logged != window || stored.as_deref() != Some("0") {
        return Err(format!(
            "{name}: expected a full window ({window} logged, value 0), found {logged} logged, value {stored:?}"
        )
        .into());
    }
    Ok(())
}

fn delete(con: &mut Connection, name: &str) -> Res<()> {
    let [hash, value, _, permits, _] = keys(name);
    // DEL, not UNLINK: freeing a 1M-entry zset on the lazyfree thread would compete for the
    // CPU with the next measurement.
    let _: () = redis::cmd("DEL")
        .arg(hash)
        .arg(value)
        .arg(permits)
        .query(con)?;
    Ok(())
}

fn set_clock(con: &mut Connection, ms: i64) -> Res<()> {
    let _: () = redis::cmd("RATELIMIT.DEBUG")
        .arg("SETCLOCK")
        .arg(ms)
        .query(con)?;
    Ok(())
}

/// `calls` TRYACQUIREs on the grant path of a steady full window: before each, the debug clock
/// moves 1 ms (RATELIMIT.DEBUG ADVANCE 1, its own command in commandstats), so each call prunes
/// the oldest entry and logs one. Every reply must be nil (acquired).
fn module_grants(con: &mut Connection, name: &str, calls: usize, clock: &mut i64) -> Res<()> {
    set_clock(con, *clock)?;
    let mut left = calls;
    while left > 0 {
        let n = left.min(BATCH);
        let mut pipe = redis::pipe();
        for _ in 0..n {
            pipe.cmd("RATELIMIT.DEBUG").arg("ADVANCE").arg(1).ignore();
            pipe.cmd("RATELIMIT.TRYACQUIRE").arg(name);
        }
        let replies: Vec<Value> = pipe.query(con)?;
        expect_all(&replies, n, "module grant", |v| matches!(v, Value::Nil))?;
        left -= n;
        *clock += n as i64;
    }
    Ok(())
}

/// The same for the Lua script, which takes `now` as ARGV[2] (one more ms per call) and a fresh
/// 16-byte random id as ARGV[3], as Redisson sends them.
fn lua_grants(
    con: &mut Connection,
    sha: &str,
    name: &str,
    calls: usize,
    clock: &mut i64,
    ids: &mut Ids,
) -> Res<()> {
    let keys = keys(name);
    let mut left = calls;
    while left > 0 {
        let n = left.min(BATCH);
        let mut pipe = redis::pipe();
        for i in 1..=n {
            pipe.cmd("EVALSHA")
                .arg(sha)
                .arg(5)
                .arg(&keys[..])
                .arg(1)
                .arg(*clock + i as i64)
                .arg(&ids.id()[..]);
        }
        let replies: Vec<Value> = pipe.query(con)?;
        expect_all(&replies, n, "lua grant", |v| matches!(v, Value::Nil))?;
        left -= n;
        *clock += n as i64;
    }
    // Keep the module's clock in step with the script's.
    set_clock(con, *clock)
}

/// `calls` TRYACQUIREs refused: the window is full and the clock does not move.
fn module_refusals(con: &mut Connection, name: &str, calls: usize, clock: i64) -> Res<()> {
    set_clock(con, clock)?;
    let mut left = calls;
    while left > 0 {
        let n = left.min(BATCH);
        let mut pipe = redis::pipe();
        for _ in 0..n {
            pipe.cmd("RATELIMIT.TRYACQUIRE").arg(name);
        }
        let replies: Vec<Value> = pipe.query(con)?;
        expect_all(&replies, n, "module refusal", |v| {
            matches!(v, Value::Int(_))
        })?;
        left -= n;
    }
    Ok(())
}

fn lua_refusals(con: &mut Connection, sha: &str, name: &str, calls: usize, clock: i64) -> Res<()> {
    let keys = keys(name);
    let mut left = calls;
    while left > 0 {
        let n = left.min(BATCH);
        let mut pipe = redis::pipe();
        for _ in 0..n {
            pipe.cmd("EVALSHA")
                .arg(sha)
                .arg(5)
                .arg(&keys[..])
                .arg(1)
                .arg(clock)
                .arg("refused-never-logged");
        }
        let replies: Vec<Value> = pipe.query(con)?;
        expect_all(&replies, n, "lua refusal", |v| matches!(v, Value::Int(_)))?;
        left -= n;
    }
    Ok(())
}

fn incrs(con: &mut Connection, calls: usize) -> Res<()> {
    let mut left = calls;
    while left > 0 {
        let n = left.min(BATCH);
        let mut pipe = redis::pipe();
        for _ in 0..n {
            pipe.cmd("INCR").arg("bench:counter");
        }
        let replies: Vec<Value> = pipe.query(con)?;
        expect_all(&replies, n, "incr", |v| matches!(v, Value::Int(_)))?;
        left -= n;
    }
    Ok(())
}

fn expect_all(replies: &[Value], n: usize, what: &str, ok: impl Fn(&Value) -> bool) -> Res<()> {
    if replies.len() != n {
        return Err(format!("{what}: {} replies for {n} calls", replies.len()).into());
    }
    match replies.iter().find(|v| !ok(v)) {
        None => Ok(()),
        Some(v) => {
            Err(format!("{what}: unexpected reply {v:?}: not the path being measured").into())
        }
    }
}

/// MEMORY USAGE (exact: SAMPLES 0) of the limiter's three keys.
fn memory(con: &mut Connection, name: &str) -> Res<Memory> {
    let [hash, value, _, permits, _] = keys(name);
    let mut usage = |key: &str| -> Res<i64> {
        let bytes: Option<i64> = redis::cmd("MEMORY")
            .arg("USAGE")
            .arg(key)
            .arg("SAMPLES")
            .arg(0)
            .query(con)?;
        Ok(bytes.unwrap_or(0))
    };
    Ok(Memory {
        hash: usage(&hash)?,
        value: usage(&value)?,
        permits: usage(&permits)?,
        encoding: redis::cmd("OBJECT")
            .arg("ENCODING")
            .arg(&permits)
            .query(con)?,
    })
}

// ------------------------------------------------------------------------------------------
// Throughput (redis-benchmark)
// ------------------------------------------------------------------------------------------

struct Throughput {
    /// pipeline -> target -> requests per second of each round
    rps: BTreeMap<usize, BTreeMap<&'static str, Vec<f64>>>,
    requests: BTreeMap<usize, usize>,
    rounds: usize,
    /// The module's (acquired, refused) counters over all its runs, from INFO ratelimit.
    counters: Option<(u64, u64)>,
}

const TARGETS: [&str; 3] = ["module", "lua", "incr"];

#[allow(clippy::too_many_arguments)]
fn throughput(
    con: &mut Connection,
    server: &Server,
    tool: &Path,
    sha: &str,
    plan: &Plan,
    clock: &mut i64,
    ids: &mut Ids,
) -> Res<Throughput> {
    let name = "bench:throughput";
    *clock += 1;
    set_clock(con, *clock)?;
    fill_window(con, name, THROUGHPUT_WINDOW, *clock, ids)?;
    let keys = keys(name);
    let now = clock.to_string();
    let module_cmd: Vec<String> = vec!["RATELIMIT.TRYACQUIRE".into(), name.into()];
    let mut lua_cmd: Vec<String> = vec!["EVALSHA".into(), sha.into(), "5".into()];
    lua_cmd.extend(keys.iter().cloned());
    lua_cmd.extend(["1".into(), now, "0123456789abcdef".into()]);
    let incr_cmd: Vec<String> = vec!["INCR".into(), "bench:counter".into()];
    // Each command must take the refusal path (module, Lua) or succeed (INCR) before we time it:
    // redis-benchmark would happily time error replies.
    for cmd in [&module_cmd, &lua_cmd] {
        let mut c = redis::cmd(&cmd[0]);
        for a in &cmd[1..] {
            c.arg(a);
        }
        let reply: Value = c.query(con)?;
        if !matches!(reply, Value::Int(_)) {
            return Err(format!("{} is not refused before the run: {reply:?}", cmd[0]).into());
        }
    }
    let mut samples: BTreeMap<(usize, &str), Vec<f64>> = BTreeMap::new();
    let mut requests = BTreeMap::new();
    let before = module_counters(con)?;
    for pipeline in [1usize, 16] {
        let n = if pipeline == 1 {
            plan.requests_p1
        } else {
            plan.requests_p16
        };
        requests.insert(pipeline, n);
        for _ in 0..plan.rounds {
            for (target, cmd) in TARGETS.iter().zip([&module_cmd, &lua_cmd, &incr_cmd]) {
                print!("redis-benchmark -c {CLIENTS} -P {pipeline:>2} -n {n}: {target:<6} ... ");
                flush();
                let rps = redis_benchmark(tool, server.port, pipeline, n, cmd)?;
                println!("{rps:>10.0} req/s");
                samples.entry((pipeline, *target)).or_default().push(rps);
            }
        }
    }
    // Nothing was granted: the log still holds exactly the window it was filled with, and the
    // module's own counters (INFO ratelimit) saw only refusals.
    check_steady(con, name, THROUGHPUT_WINDOW)?;
    let after = module_counters(con)?;
    let module_requests: usize = requests.values().map(|n| n * plan.rounds).sum();
    let counters = match (before, after) {
        (Some((a0, r0)), Some((a1, r1))) => {
            if a1 != a0 || r1 - r0 != module_requests as u64 {
                return Err(format!(
                    "INFO ratelimit during the throughput runs: {} acquired, {} refused; expected 0 and {module_requests}",
                    a1 - a0,
                    r1 - r0
                )
                .into());
            }
            Some((a1 - a0, r1 - r0))
        }
        _ => None,
    };
    delete(con, name)?;
    let mut rps: BTreeMap<usize, BTreeMap<&'static str, Vec<f64>>> = BTreeMap::new();
    for ((pipeline, target), s) in samples {
        let target = TARGETS
            .iter()
            .find(|t| **t == target)
            .copied()
            .unwrap_or("?");
        rps.entry(pipeline).or_default().insert(target, s);
    }
    Ok(Throughput {
        rps,
        requests,
        rounds: plan.rounds,
        counters,
    })
}

impl Throughput {
    /// Median requests per second of `target` at `pipeline`.
    fn median(&self, pipeline: usize, target: &str) -> f64 {
        self.rps
            .get(&pipeline)
            .and_then(|r| r.get(target))
            .map_or(f64::NAN, |s| median(s))
    }

    /// Median over rounds of `a / b`: each round runs the targets back to back, so the ratio
    /// within a round is steadier than the ratio of medians when the machine's speed drifts.
    fn ratio(&self, pipeline: usize, a: &str, b: &str) -> f64 {
        let Some(r) = self.rps.get(&pipeline) else {
            return f64::NAN;
        };
        match (r.get(a), r.get(b)) {
            (Some(x), Some(y)) => {
                let ratios: Vec<f64> = x.iter().zip(y).map(|(x, y)| x / y).collect();
                median(&ratios)
            }
            _ => f64::NAN,
        }
    }
}

/// `(acquired, refused)` from INFO ratelimit, if this build of the module reports them.
fn module_counters(con: &mut Connection) -> Res<Option<(u64, u64)>> {
    let info: String = redis::cmd("INFO").arg("ratelimit").query(con)?;
    let field = |name: &str| {
        info.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
            .and_then(|v| v.trim().parse::<u64>().ok())
    };
    Ok(field("ratelimit_acquired").zip(field("ratelimit_refused")))
}

fn redis_benchmark(tool: &Path, port: u16, pipeline: usize, n: usize, cmd: &[String]) -> Res<f64> {
    let out = Command::new(tool)
        .args(["-h", "127.0.0.1", "-p", &port.to_string()])
        .args(["-c", &CLIENTS.to_string(), "-P", &pipeline.to_string()])
        .args(["-n", &n.to_string(), "-e", "--csv"])
        .args(cmd)
        .stdin(Stdio::null())
        .output()?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() || stdout.contains("ERR") || stdout.contains("Error") {
        return Err(format!(
            "redis-benchmark failed: {}\n{stdout}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        )
        .into());
    }
    // "test","rps",... then one line per test: "<command>","<rps>",...
    let line = stdout
        .lines()
        .filter(|l| !l.starts_with("\"test\""))
        .find(|l| l.starts_with('"'))
        .ok_or_else(|| format!("no result in redis-benchmark output:\n{stdout}"))?;
    let rps = line
        .split("\",\"")
        .nth(1)
        .map(|s| s.trim_matches('"'))
        .ok_or_else(|| format!("cannot parse '{line}'"))?;
    Ok(rps.parse::<f64>()?)
}

// ------------------------------------------------------------------------------------------
// Report
// ------------------------------------------------------------------------------------------

struct Report {
    machine: Machine,
    plan: Plan,
    windows: Vec<WindowResult>,
    incr: Cpu,
    throughput: Option<Throughput>,
    worst: worst::Worst,
    /// Share of all CPUs used by other processes just before and during the run.
    busy: (Option<f64>, Option<f64>),
    seconds: f64,
}

struct Target {
    name: String,
    wanted: String,
    measured: String,
    holds: bool,
}

impl Report {
    fn targets(&self) -> Vec<Target> {
        let mut out = Vec::new();
        let worst = self
            .windows
            .iter()
            .map(|w| (w.window, w.lua_grant.median() / w.module_grant.median()))
            .min_by(|a, b| a.1.total_cmp(&b.1));
        if let Some((window, ratio)) = worst {
            out.push(Target {
                name: "CPU/call, steady window: module <= 1/10 of Lua".into(),
                wanted: "Lua/module >= 10".into(),
                measured: format!("Lua/module {ratio:.1}x at worst (window {window})"),
                holds: ratio >= 10.0,
            });
        }
        let at = |size: i64| {
            self.windows
                .iter()
                .find(|w| w.window == size)
                .map(|w| w.module_grant.median())
        };
        if let (Some(small), Some(big)) = (at(100), at(1_000_000)) {
            let ratio = big / small;
            out.push(Target {
                name: "CPU/call, module: 1M entries <= 1.5x 100 entries".into(),
                wanted: "<= 1.50x".into(),
                measured: format!("{ratio:.2}x ({big:.2} vs {small:.2} usec)"),
                holds: ratio <= 1.5,
            });
        }
        if let Some(t) = &self.throughput {
            if t.rps.contains_key(&16) {
                let over_lua = t.ratio(16, "module", "lua");
                let over_incr = t.ratio(16, "module", "incr");
                out.push(Target {
                    name: "throughput, pipeline 16: module >= 4x Lua".into(),
                    wanted: ">= 4.00x".into(),
                    measured: format!("{over_lua:.2}x"),
                    holds: over_lua >= 4.0,
                });
                out.push(Target {
                    name: "throughput, pipeline 16: module >= 1/2 INCR".into(),
                    wanted: ">= 0.50x".into(),
                    measured: format!("{over_incr:.2}x"),
                    holds: over_incr >= 0.5,
                });
            }
        }
        out
    }

    fn table(&self) -> String {
        let mut s = String::new();
        let p = &self.plan;
        let incr = self.incr.median();
        let _ = writeln!(
            s,
            "Server CPU per call, usec (INFO commandstats usec/calls after CONFIG RESETSTAT;\n\
             median of {} reps x {} calls; window = entries logged = rate = interval ms)",
            p.reps, p.calls
        );
        let _ = writeln!(
            s,
            "{:<16} {:>9} {:>9} {:>9} {:>9} {:>11} {:>12}",
            "path", "window", "module", "lua", "incr", "lua/module", "module/incr"
        );
        for (label, pick) in [("grant (steady)", 0usize), ("refusal (full)", 1usize)] {
            for w in &self.windows {
                let (m, l) = if pick == 0 {
                    (w.module_grant.median(), w.lua_grant.median())
                } else {
                    (w.module_refuse.median(), w.lua_refuse.median())
                };
                let _ = writeln!(
                    s,
                    "{:<16} {:>9} {:>9.2} {:>9.2} {:>9.2} {:>10.1}x {:>11.2}x",
                    label,
                    w.window,
                    m,
                    l,
                    incr,
                    l / m,
                    m / incr
                );
            }
        }
        if let Some((last, smaller)) = self.windows.split_last() {
            for w in smaller {
                let _ = writeln!(
                    s,
                    "module CPU/call at window {} vs {}: grant {:.2}x, refusal {:.2}x",
                    last.window,
                    w.window,
                    last.module_grant.median() / w.module_grant.median(),
                    last.module_refuse.median() / w.module_refuse.median()
                );
            }
        }
        if let Some(t) = &self.throughput {
            let _ = writeln!(
                s,
                "\nThroughput, req/s (redis-benchmark -c {CLIENTS}, median of {} rounds; every\n\
                 TRYACQUIRE and script call REFUSED: a full {}-entry window, clock frozen. Refusal is\n\
                 what a limiter does under overload, the load that needs throughput, and the only\n\
                 steady state redis-benchmark can drive for the script: it sends a fixed `now`, so\n\
                 granted calls would never expire and the log would grow without bound)",
                t.rounds, THROUGHPUT_WINDOW
            );
            let _ = writeln!(
                s,
                "{:<9} {:>9} {:>12} {:>12} {:>12} {:>11} {:>12}",
                "pipeline", "requests", "module", "lua", "incr", "module/lua", "module/incr"
            );
            for &pipeline in t.rps.keys() {
                let _ = writeln!(
                    s,
                    "{:<9} {:>9} {:>12.0} {:>12.0} {:>12.0} {:>10.2}x {:>11.2}x",
                    pipeline,
                    t.requests[&pipeline],
                    t.median(pipeline, "module"),
                    t.median(pipeline, "lua"),
                    t.median(pipeline, "incr"),
                    t.ratio(pipeline, "module", "lua"),
                    t.ratio(pipeline, "module", "incr")
                );
            }
            let _ = writeln!(
                s,
                "(req/s: median of the rounds; ratios: median of the per-round ratios)"
            );
            if let Some((acquired, refused)) = t.counters {
                let _ = writeln!(
                    s,
                    "(INFO ratelimit over the module's runs: {refused} refused, {acquired} acquired)"
                );
            }
        }
        let _ = writeln!(
            s,
            "\nMemory, bytes (MEMORY USAGE ... SAMPLES 0, after warm-up)"
        );
        let _ = writeln!(
            s,
            "{:>9} {:>7} {:>7} {:>11} {:>11} {:>11} {:>10}",
            "window", "hash", "value", "permits", "total", "bytes/entry", "encoding"
        );
        for w in &self.windows {
            let m = &w.memory;
            let _ = writeln!(
                s,
                "{:>9} {:>7} {:>7} {:>11} {:>11} {:>11.1} {:>10}",
                w.window,
                m.hash,
                m.value,
                m.permits,
                m.total(),
                m.permits as f64 / w.window as f64,
                m.encoding
            );
        }
        let _ = writeln!(s, "\n{}", self.worst.table().trim_end());
        let _ = writeln!(s, "\nTargets");
        for t in self.targets() {
            let _ = writeln!(
                s,
                "  [{}] {:<50} want {:<17} got {}",
                if t.holds { "ok  " } else { "MISS" },
                t.name,
                t.wanted,
                t.measured
            );
        }
        let _ = writeln!(
            s,
            "\nMachine: {} CPUs, {}; {}; source {}; run took {:.0}s; \
             CPU used by other processes before/during the run: {} / {}",
            self.machine.cpus,
            self.machine.cpu_model,
            self.machine.redis_version,
            self.machine.source,
            self.seconds,
            percent(self.busy.0),
            percent(self.busy.1)
        );
        if [self.busy.0, self.busy.1]
            .iter()
            .flatten()
            .any(|b| *b >= 0.15)
        {
            let _ = writeln!(
                s,
                "WARNING: other processes were using the CPUs: these numbers are noisy, rerun on a quiet machine"
            );
        }
        s
    }

    fn json(&self) -> String {
        let mut j = String::from("{\n");
        let _ = writeln!(j, "  \"machine\": {},", self.machine.json());
        let _ = writeln!(
            j,
            "  \"cpu_per_call\": {{\"unit\": \"usec\", \"source\": \"INFO commandstats usec/calls\", \"reps\": {}, \"calls_per_rep\": {}, \"incr\": {:.4}, \"windows\": [",
            self.plan.reps,
            self.plan.calls,
            self.incr.median()
        );
        let incr = self.incr.median();
        let rows: Vec<String> = self
            .windows
            .iter()
            .map(|w| {
                let (mg, lg, mr, lr) = (
                    w.module_grant.median(),
                    w.lua_grant.median(),
                    w.module_refuse.median(),
                    w.lua_refuse.median(),
                );
                format!(
                    "    {{\"window\": {}, \"grant\": {{\"module\": {:.4}, \"lua\": {:.4}, \"lua_over_module\": {:.3}, \"module_over_incr\": {:.3}, \"module_samples\": {}, \"lua_samples\": {}}}, \"refusal\": {{\"module\": {:.4}, \"lua\": {:.4}, \"lua_over_module\": {:.3}, \"module_over_incr\": {:.3}}}, \"memory\": {{\"hash\": {}, \"value\": {}, \"permits\": {}, \"total\": {}, \"permits_encoding\": {}}}}}",
                    w.window, mg, lg, lg / mg, mg / incr, floats(&w.module_grant.samples), floats(&w.lua_grant.samples),
                    mr, lr, lr / mr, mr / incr,
                    w.memory.hash, w.memory.value, w.memory.permits, w.memory.total(), quote(&w.memory.encoding)
                )
            })
            .collect();
        let _ = writeln!(j, "{}\n  ]}},", rows.join(",\n"));
        match &self.throughput {
            None => j.push_str("  \"throughput\": null,\n"),
            Some(t) => {
                let _ = writeln!(
                    j,
                    "  \"throughput\": {{\"tool\": \"redis-benchmark\", \"clients\": {CLIENTS}, \"rounds\": {}, \"path\": \"refused (full {}-entry window, frozen clock)\", \"module_counters\": {}, \"pipelines\": [",
                    t.rounds,
                    THROUGHPUT_WINDOW,
                    match t.counters {
                        Some((a, r)) => format!("{{\"acquired\": {a}, \"refused\": {r}}}"),
                        None => "null".into(),
                    }
                );
                let rows: Vec<String> = t
                    .rps
                    .iter()
                    .map(|(&p, r)| {
                        let rounds = |target: &str| r.get(target).map_or("[]".into(), |v| floats(v));
                        format!(
                            "    {{\"pipeline\": {p}, \"requests\": {}, \"module\": {:.0}, \"lua\": {:.0}, \"incr\": {:.0}, \"module_over_lua\": {:.3}, \"module_over_incr\": {:.3}, \"rounds\": {{\"module\": {}, \"lua\": {}, \"incr\": {}}}}}",
                            t.requests[&p],
                            t.median(p, "module"),
                            t.median(p, "lua"),
                            t.median(p, "incr"),
                            t.ratio(p, "module", "lua"),
                            t.ratio(p, "module", "incr"),
                            rounds("module"),
                            rounds("lua"),
                            rounds("incr")
                        )
                    })
                    .collect();
                let _ = writeln!(j, "{}\n  ]}},", rows.join(",\n"));
            }
        }
        let _ = writeln!(j, "  \"worst_cases\": {},", self.worst.json());
        let targets: Vec<String> = self
            .targets()
            .iter()
            .map(|t| {
                format!(
                    "    {{\"target\": {}, \"wanted\": {}, \"measured\": {}, \"holds\": {}}}",
                    quote(&t.name),
                    quote(&t.wanted),
                    quote(&t.measured),
                    t.holds
                )
            })
            .collect();
        let _ = writeln!(j, "  \"targets\": [\n{}\n  ],", targets.join(",\n"));
        let _ = writeln!(
            j,
            "  \"other_load\": {{\"before\": {}, \"during\": {}}},",
            self.busy.0.map_or("null".into(), |b| format!("{b:.3}")),
            self.busy.1.map_or("null".into(), |b| format!("{b:.3}"))
        );
        let _ = writeln!(j, "  \"seconds\": {:.1}\n}}", self.seconds);
        j
    }
}

fn percent(share: Option<f64>) -> String {
    share.map_or("n/a".into(), |b| format!("{:.0}%", b * 100.0))
}

fn floats(v: &[f64]) -> String {
    let items: Vec<String> = v.iter().map(|x| format!("{x:.4}")).collect();
    format!("[{}]", items.join(", "))
}

fn quote(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn median(samples: &[f64]) -> f64 {
    if samples.is_empty() {
        return f64::NAN;
    }
    let mut v = samples.to_vec();
    v.sort_by(f64::total_cmp);
    let mid = v.len() / 2;
    if v.len() % 2 == 1 {
        v[mid]
    } else {
        (v[mid - 1] + v[mid]) / 2.0
    }
}

struct Machine {
    cpus: usize,
    cpu_model: String,
    redis_version: String,
    /// The repository's commit, "+dirty" if src/ or Cargo.toml differ from it.
    source: String,
}

impl Machine {
    fn json(&self) -> String {
        format!(
            "{{\"cpus\": {}, \"cpu_model\": {}, \"redis_version\": {}, \"source\": {}}}",
            self.cpus,
            quote(&self.cpu_model),
            quote(&self.redis_version),
            quote(&self.source)
        )
    }

    fn probe() -> Machine {
        let cpus = thread::available_parallelism().map_or(0, |n| n.get());
        let cpu_model = Command::new("lscpu")
            .output()
            .ok()
            .and_then(|o| {
                String::from_utf8_lossy(&o.stdout)
                    .lines()
                    .find_map(|l| l.strip_prefix("Model name:").map(|m| m.trim().to_string()))
            })
            .unwrap_or_else(|| "unknown CPU".into());
        let redis_version = Command::new(server_binary())
            .arg("--version")
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .unwrap_or_else(|_| "unknown redis-server".into());
        let root = env!("CARGO_MANIFEST_DIR");
        let git = |args: &[&str]| {
            Command::new("git")
                .arg("-C")
                .arg(root)
                .args(args)
                .output()
                .ok()
                .filter(|o| o.status.success())
                .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        };
        let source = match git(&["rev-parse", "--short", "HEAD"]) {
            Some(commit) => {
                let dirty = git(&["status", "--porcelain", "--", "src", "Cargo.toml"])
                    .is_some_and(|s| !s.is_empty());
                format!("{commit}{}", if dirty { "+dirty" } else { "" })
            }
            None => "unknown".into(),
        };
        Machine {
            cpus,
            cpu_model,
            redis_version,
            source,
        }
    }
}

/// Share of the machine's CPU time spent busy over `window`, from /proc/stat (Linux); measured
/// while this program is idle, so it is other processes' load.
fn busy_fraction(window: Duration) -> Option<f64> {
    fn sample() -> Option<(u64, u64)> {
        let stat = fs::read_to_string("/proc/stat").ok()?;
        let cpu = stat.lines().next()?.strip_prefix("cpu ")?;
        let ticks: Vec<u64> = cpu
            .split_whitespace()
            .filter_map(|t| t.parse().ok())
            .collect();
        let idle = ticks.get(3)? + ticks.get(4).copied().unwrap_or(0);
        Some((ticks.iter().sum(), idle))
    }
    let (total0, idle0) = sample()?;
    thread::sleep(window);
    let (total1, idle1) = sample()?;
    let total = total1.saturating_sub(total0);
    (total > 0).then(|| 1.0 - idle1.saturating_sub(idle0) as f64 / total as f64)
}

/// How much CPU other processes took while the benchmark ran: the machine's busy time
/// (/proc/stat) minus this program's, its children's (redis-benchmark) and the server's.
struct LoadMeter {
    machine: Option<(u64, u64)>,
    own: Option<u64>,
    server: Option<f64>,
}

/// Clock ticks per second of /proc/stat and /proc/<pid>/stat (USER_HZ, 100 on Linux).
const TICKS: f64 = 100.0;

impl LoadMeter {
    fn start(con: &mut Connection) -> LoadMeter {
        LoadMeter {
            machine: machine_ticks(),
            own: own_ticks(),
            server: server_cpu(con),
        }
    }

    /// Share of the machine's CPU time since `start` used by other processes.
    fn others(&self, con: &mut Connection) -> Option<f64> {
        let (busy0, total0) = self.machine?;
        let (busy1, total1) = machine_ticks()?;
        let ours = (own_ticks()? - self.own?) as f64 + (server_cpu(con)? - self.server?) * TICKS;
        let total = total1.saturating_sub(total0) as f64;
        (total > 0.0).then(|| ((busy1 - busy0) as f64 - ours).max(0.0) / total)
    }
}

/// (busy, total) ticks of all CPUs: busy = user + nice + system + steal.
fn machine_ticks() -> Option<(u64, u64)> {
    let stat = fs::read_to_string("/proc/stat").ok()?;
    let ticks: Vec<u64> = stat
        .lines()
        .next()?
        .strip_prefix("cpu ")?
        .split_whitespace()
        .filter_map(|t| t.parse().ok())
        .collect();
    let at = |i: usize| ticks.get(i).copied().unwrap_or(0);
    Some((at(0) + at(1) + at(2) + at(7), ticks.iter().take(8).sum()))
}

/// This process's CPU ticks plus those of its children it has waited for.
fn own_ticks() -> Option<u64> {
    let stat = fs::read_to_string("/proc/self/stat").ok()?;
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    // After the command name: state is field 3, utime..cstime are fields 14..=17.
    (11..=14).map(|i| fields.get(i)?.parse::<u64>().ok()).sum()
}

/// The server's CPU seconds (all threads), from INFO cpu.
fn server_cpu(con: &mut Connection) -> Option<f64> {
    let info: String = redis::cmd("INFO").arg("cpu").query(con).ok()?;
    let field = |name: &str| -> Option<f64> {
        info.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))?
            .trim()
            .parse()
            .ok()
    };
    Some(field("used_cpu_sys")? + field("used_cpu_user")?)
}

/// The machine may be shared: wait (up to `patience`) for other work to stay under 15% of the
/// CPUs, and return the last share seen. The report shows it, so a noisy run is visible.
fn wait_until_quiet(patience: Duration) -> Option<f64> {
    let deadline = Instant::now() + patience;
    let mut warned = false;
    loop {
        let busy = busy_fraction(Duration::from_secs(1))?;
        if busy < 0.15 || Instant::now() >= deadline {
            if warned || busy >= 0.15 {
                println!("machine is {:.0}% busy with other work", busy * 100.0);
            }
            return Some(busy);
        }
        if !warned {
            println!(
                "machine is {:.0}% busy with other work: waiting up to {}s for it to settle ...",
                busy * 100.0,
                patience.as_secs()
            );
            warned = true;
        }
    }
}

fn flush() {
    use std::io::Write;
    let _ = std::io::stdout().flush();
}

// ------------------------------------------------------------------------------------------
// Profile: instructions per call under valgrind --tool=callgrind
// ------------------------------------------------------------------------------------------

/// Starts redis-server under callgrind with instrumentation off, sets up a full window, then for
/// each phase (module grant, Lua grant, INCR, module refusal, Lua refusal) zeroes the counters,
/// drives `calls` calls and dumps. Prints instructions per call and each dump's top functions
/// (callgrind_annotate, inclusive), and leaves the dumps in bench/results/callgrind/.
fn profile(args: &[String]) -> Res<()> {
    let mut window = 10_000i64;
    let mut calls = 5_000usize;
    let mut top = 40usize;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{a} needs a value"));
        match a.as_str() {
            "--window" => window = value()?.parse()?,
            "--calls" => calls = value()?.parse()?,
            "--top" => top = value()?.parse()?,
            _ => return Err(format!("unknown argument '{a}'").into()),
        }
    }
    for tool in ["valgrind", "callgrind_control", "callgrind_annotate"] {
        which(tool)
            .ok_or_else(|| format!("{tool} not found (Debian: apt-get install valgrind)"))?;
    }
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("bench/results/callgrind");
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir)?;
    let out_file = dir.join("callgrind.out");
    let module = module_path();
    let wrapper = vec![
        "valgrind".to_string(),
        "--tool=callgrind".into(),
        "--instr-atstart=no".into(),
        format!("--callgrind-out-file={}", out_file.display()),
    ];
    let server = Server::start(&module, &wrapper, &[])?;
    let pid = server.child.id().to_string();
    let mut con = server.conn()?;
    set_clock(&mut con, T0)?;
    let mut clock = T0;
    let sha: String = redis::cmd("SCRIPT").arg("LOAD").arg(LUA).query(&mut con)?;
    let mut ids = Ids::new(0x5eed);
    let name = format!("bench:w{window}");
    println!("profile: window {window}, {calls} calls per phase, server pid {pid} under callgrind");
    fill_window(&mut con, &name, window, clock, &mut ids)?;
    module_grants(&mut con, &name, 200, &mut clock)?;
    lua_grants(&mut con, &sha, &name, 200, &mut clock, &mut ids)?;
    control(&pid, &["-i", "on"])?;
    type Phase<'a> = (&'a str, Box<dyn FnMut(&mut Connection) -> Res<()> + 'a>);
    let (name_ref, sha_ref) = (&name, &sha);
    let clock_cell = std::cell::Cell::new(clock);
    let ids_cell = std::cell::RefCell::new(ids);
    let phases: Vec<Phase> = vec![
        (
            "module-grant",
            Box::new(|con| {
                let mut c = clock_cell.get();
                module_grants(con, name_ref, calls, &mut c)?;
                clock_cell.set(c);
                Ok(())
            }),
        ),
        (
            "lua-grant",
            Box::new(|con| {
                let mut c = clock_cell.get();
                lua_grants(
                    con,
                    sha_ref,
                    name_ref,
                    calls,
                    &mut c,
                    &mut ids_cell.borrow_mut(),
                )?;
                clock_cell.set(c);
                Ok(())
            }),
        ),
        ("incr", Box::new(|con| incrs(con, calls))),
        (
            "module-refusal",
            Box::new(|con| module_refusals(con, name_ref, calls, clock_cell.get())),
        ),
        (
            "lua-refusal",
            Box::new(|con| lua_refusals(con, sha_ref, name_ref, calls, clock_cell.get())),
        ),
    ];
    let mut dumps = Vec::new();
    for (phase, mut drive) in phases {
        // A PING first, so the zeroing lands while the server is idle between commands.
        let _: String = redis::cmd("PING").query(&mut con)?;
        control(&pid, &["-z"])?;
        drive(&mut con)?;
        control(&pid, &[&format!("--dump={phase}")])?;
        dumps.push(phase);
    }
    drop(server);
    thread::sleep(Duration::from_millis(200));
    let mut files: Vec<PathBuf> = fs::read_dir(&dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("callgrind.out."))
        })
        .collect();
    files.sort_by_key(|p| {
        p.extension()
            .and_then(|e| e.to_str())
            .and_then(|e| e.parse::<u32>().ok())
            .unwrap_or(0)
    });
    for file in files {
        let text = fs::read_to_string(&file)?;
        let desc = text
            .lines()
            .find_map(|l| l.strip_prefix("desc: Trigger: dump "))
            .unwrap_or("?")
            .to_string();
        if !dumps.contains(&desc.as_str()) {
            continue;
        }
        let total: u64 = text
            .lines()
            .find_map(|l| {
                l.strip_prefix("summary: ")
                    .or_else(|| l.strip_prefix("totals: "))
            })
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(0);
        println!(
            "\n=== {desc}: {total} instructions / {calls} calls = {:.0} per call (whole server, incl. networking; {})",
            total as f64 / calls as f64,
            file.display()
        );
        let annotate = Command::new("callgrind_annotate")
            .args(["--inclusive=yes", "--threshold=99"])
            .arg(&file)
            .output()?;
        let listing = String::from_utf8_lossy(&annotate.stdout);
        println!("{:>10} {:>7}  function (inclusive)", "Ir/call", "share");
        let rows = listing.lines().filter_map(|l| {
            // "12,345 (12.34%)  ???:function [object]"
            let (count, rest) = l.trim_start().split_once(' ')?;
            let count: u64 = count.replace(',', "").parse().ok()?;
            let (share, function) = rest.trim_start().split_once(')')?;
            let function = function.trim().trim_start_matches("???:");
            let function = function.split(" [").next().unwrap_or(function);
            Some((
                count,
                share.trim_start_matches('(').to_string(),
                function.to_string(),
            ))
        });
        for (count, share, function) in rows.filter(|r| !r.2.contains("PROGRAM TOTALS")).take(top) {
            println!(
                "{:>10.0} {:>7}  {function}",
                count as f64 / calls as f64,
                share
            );
        }
    }
    Ok(())
}

fn control(pid: &str, args: &[&str]) -> Res<()> {
    let status = Command::new("callgrind_control")
        .args(args)
        .arg(pid)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()?;
    if !status.success() {
        return Err(format!("callgrind_control {args:?} {pid} failed").into());
    }
    Ok(())
}

// ------------------------------------------------------------------------------------------
// The server
// ------------------------------------------------------------------------------------------

struct Server {
    child: Child,
    port: u16,
    dir: PathBuf,
}

impl Drop for Server {
    fn drop(&mut self) {
        // Ask politely (callgrind writes its last dump on exit), then make sure.
        if let Ok(mut con) = self.conn() {
            let _: Result<(), _> = redis::cmd("SHUTDOWN").arg("NOSAVE").query(&mut con);
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                break;
            }
            thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = fs::remove_dir_all(&self.dir);
    }
}

impl Server {
    /// redis-server on a free loopback port, with the module and its debug commands, no
    /// persistence; `wrapper` runs it under another program (valgrind); `extra` are more
    /// server options.
    fn start(module: &Path, wrapper: &[String], extra: &[&str]) -> Res<Server> {
        if !module.exists() {
            return Err(format!(
                "{} is missing: run `make bench`, or `cargo build --release` first",
                module.display()
            )
            .into());
        }
        let mut last = String::new();
        for _ in 0..5 {
            let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
            let dir = env::temp_dir().join(format!("ratelimit-bench-{port}"));
            let _ = fs::remove_dir_all(&dir);
            fs::create_dir_all(&dir)?;
            let log = dir.join("redis.log");
            let (program, pre) = match wrapper.split_first() {
                Some((p, rest)) => (p.clone(), rest.to_vec()),
                None => (server_binary(), vec![]),
            };
            let mut cmd = Command::new(program);
            cmd.args(pre);
            if !wrapper.is_empty() {
                cmd.arg(server_binary_path());
            }
            let child = cmd
                .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
                .args(["--save", "", "--appendonly", "no"])
                .args(extra)
                .arg("--dir")
                .arg(&dir)
                .arg("--logfile")
                .arg(&log)
                .arg("--loadmodule")
                .arg(module)
                .args(["debug-commands", "yes"])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .map_err(|e| format!("cannot run {}: {e}", server_binary()))?;
            let mut server = Server { child, port, dir };
            let wait = if wrapper.is_empty() { 10 } else { 120 };
            if server.wait_ready(Duration::from_secs(wait)) {
                return Ok(server);
            }
            last = fs::read_to_string(&log).unwrap_or_default();
        }
        Err(format!("redis-server did not start:\n{last}").into())
    }

    fn wait_ready(&mut self, within: Duration) -> bool {
        let deadline = Instant::now() + within;
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return false;
            }
            if let Ok(mut con) = self.conn() {
                if redis::cmd("PING").query::<String>(&mut con).is_ok() {
                    return true;
                }
            }
            thread::sleep(Duration::from_millis(50));
        }
        false
    }

    fn conn(&self) -> Res<Connection> {
        let client = redis::Client::open(format!("redis://127.0.0.1:{}/", self.port))?;
        Ok(client.get_connection_with_timeout(Duration::from_secs(120))?)
    }
}

fn server_binary() -> String {
    env::var("REDIS_SERVER").unwrap_or_else(|_| "redis-server".into())
}

/// valgrind needs a path, not a name to look up.
fn server_binary_path() -> PathBuf {
    let name = server_binary();
    which(&name).unwrap_or_else(|| PathBuf::from(name))
}

fn which(tool: &str) -> Option<PathBuf> {
    if tool.contains('/') {
        let p = PathBuf::from(tool);
        return p.exists().then_some(p);
    }
    env::var_os("PATH").and_then(|paths| {
        env::split_paths(&paths)
            .map(|d| d.join(tool))
            .find(|p| p.is_file())
    })
}

/// `$RATELIMIT_MODULE`, else `$CARGO_TARGET_DIR/release/libratelimit.so`, else
/// `target/release/libratelimit.so` in this repository.
///
/// Always absolute: redis-server resolves a relative `--loadmodule` path after moving into its
/// own `--dir`.
fn module_path() -> PathBuf {
    let path = match env::var_os("RATELIMIT_MODULE") {
        Some(path) => PathBuf::from(path),
        None => {
            let root = Path::new(env!("CARGO_MANIFEST_DIR"));
            let target = env::var_os("CARGO_TARGET_DIR")
                .map(PathBuf::from)
                .unwrap_or_else(|| PathBuf::from("target"));
            root.join(target).join("release/libratelimit.so")
        }
    };
    std::fs::canonicalize(&path).unwrap_or(path)
}
