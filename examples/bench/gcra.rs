//! The GCRA drop-ins (`bench --gcra`, and a section of `make bench`): the module's
//! `CL.THROTTLE` against redis-cell 0.5.0's, and the module's `GCRA` against a GCRA Lua script
//! (`bench/gcra.lua`, what go-redis/redis_rate and valkey-go's limiter run), on one hot key and
//! on many keys at random, allowed and limited; server CPU per call from `INFO commandstats`,
//! instructions per call under callgrind, memory per key. bench/README.md, "GCRA", says how.
//!
//! Two servers of the same binary: one with the module alone (its `CL.THROTTLE`, its `GCRA`,
//! the script), one with redis-cell loaded first (the module loaded after it leaves it the name).
//! Both run on the real clock: redis-cell has no other, and the paths are chosen so that time
//! does not move a call from one path to the other:
//! - allowed: a burst of 10^6 at one per hour: every call is allowed and writes, and the key
//!   stays (its TAT an hour further on per call);
//! - limited: a burst of 0, one per day: the first call on a key is allowed, every later one
//!   limited (read only).

use std::fmt::Write as _;
use std::fs;
use std::path::Path;
use std::thread;
use std::time::Duration;

use redis::{Connection, Value};
use serde::Serialize;

use crate::callgrind::{self, control, dump_files, top_level_calls, Dump, MODULE_PROC};
use crate::limiter::{memory_usage, used_memory};
use crate::measure::command_stats;
use crate::report::{targets_line, verdict};
use crate::server::{self, Server};
use crate::{flush, Res};

/// The script, as the module's rival for `GCRA`.
pub const SCRIPT: &str = include_str!("../../bench/gcra.lua");

/// Commands per pipelined round trip.
const BATCH: usize = 1_000;

/// Who answers.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Contender {
    /// The module's `CL.THROTTLE`.
    Throttle,
    /// redis-cell 0.5.0's `CL.THROTTLE`.
    Cell,
    /// The module's `GCRA`.
    Gcra,
    /// `bench/gcra.lua` by EVALSHA.
    Lua,
}

const CONTENDERS: [Contender; 4] = [
    Contender::Throttle,
    Contender::Cell,
    Contender::Gcra,
    Contender::Lua,
];

impl Contender {
    fn name(self) -> &'static str {
        match self {
            Contender::Throttle => "module cl.throttle",
            Contender::Cell => "redis-cell cl.throttle",
            Contender::Gcra => "module gcra",
            Contender::Lua => "lua gcra",
        }
    }

    /// The command as commandstats names it.
    fn stat(self) -> &'static str {
        match self {
            Contender::Throttle | Contender::Cell => "cl.throttle",
            Contender::Gcra => "gcra",
            Contender::Lua => "evalsha",
        }
    }

    fn prefix(self) -> &'static str {
        match self {
            Contender::Throttle => "bt",
            Contender::Cell => "bc",
            Contender::Gcra => "bg",
            Contender::Lua => "bl",
        }
    }

    /// One call on `key`, allowed path or limited path.
    fn command(self, sha: &str, key: &str, allowed: bool) -> redis::Cmd {
        let (burst, rate, period) = if allowed {
            ("1000000", "1", "3600")
        } else {
            ("0", "1", "86400")
        };
        match self {
            Contender::Throttle | Contender::Cell => {
                let mut cmd = redis::cmd("CL.THROTTLE");
                cmd.arg(key).arg(burst).arg(rate).arg(period).arg(1);
                cmd
            }
            Contender::Gcra => {
                let mut cmd = redis::cmd("GCRA");
                cmd.arg(key).arg(burst).arg(rate).arg(period);
                cmd
            }
            Contender::Lua => {
                let mut cmd = redis::cmd("EVALSHA");
                cmd.arg(sha)
                    .arg(1)
                    .arg(key)
                    .arg(burst)
                    .arg(rate)
                    .arg(period)
                    .arg(1);
                cmd
            }
        }
    }
}

/// Where the calls go: one key, or keys drawn at random from many.
#[derive(Clone, Copy)]
struct Keys {
    count: usize,
}

impl Keys {
    fn name(self, contender: Contender, allowed: bool, index: usize) -> String {
        let path = if allowed { "a" } else { "l" };
        format!("{}:{path}:{index}", contender.prefix())
    }
}

/// The two servers and their connections.
struct Servers {
    module: Server,
    cell: Option<Server>,
    module_con: Connection,
    cell_con: Option<Connection>,
    sha: String,
}

impl Servers {
    fn con(&mut self, contender: Contender) -> &mut Connection {
        match (contender, self.cell_con.as_mut()) {
            (Contender::Cell, Some(con)) => con,
            _ => &mut self.module_con,
        }
    }
}

/// `calls` pipelined calls of `contender` on the path, keys drawn by `draw`; every reply's
/// first element must say the path (0 allowed, 1 limited).
fn drive(
    con: &mut Connection,
    contender: Contender,
    sha: &str,
    allowed: bool,
    keys: Keys,
    calls: usize,
    draw: &mut impl FnMut(usize) -> usize,
) -> Res<()> {
    let mut left = calls;
    while left > 0 {
        let batch = left.min(BATCH);
        let mut pipe = redis::pipe();
        for _ in 0..batch {
            let key = keys.name(contender, allowed, draw(keys.count));
            pipe.add_command(contender.command(sha, &key, allowed));
        }
        let replies: Vec<Value> = pipe.query(con)?;
        let want = Value::Int(i64::from(!allowed));
        for reply in &replies {
            let first = match reply {
                Value::Array(items) => items.first(),
                _ => None,
            };
            if first != Some(&want) {
                return Err(format!(
                    "{} ({}): unexpected reply {reply:?}: not the path being measured",
                    contender.name(),
                    if allowed { "allowed" } else { "limited" }
                )
                .into());
            }
        }
        left -= batch;
    }
    Ok(())
}

/// Creates every key of a path with one call each (allowed: the first call of each key is
/// allowed on both paths), so that the measured calls find them.
fn warm(
    con: &mut Connection,
    contender: Contender,
    sha: &str,
    allowed: bool,
    keys: Keys,
) -> Res<()> {
    let mut next = 0;
    let mut in_order = |_: usize| {
        next += 1;
        next - 1
    };
    // Allowed-path keys stay allowed; limited-path keys are allowed exactly once.
    let mut left = keys.count;
    while left > 0 {
        let batch = left.min(BATCH);
        let mut pipe = redis::pipe();
        for _ in 0..batch {
            let key = keys.name(contender, allowed, in_order(0));
            pipe.add_command(contender.command(sha, &key, allowed))
                .ignore();
        }
        let _: () = pipe.query(con)?;
        left -= batch;
    }
    Ok(())
}

/// A seeded xorshift: the same keys in the same order for every contender.
struct Draw(u64);

impl Draw {
    fn next(&mut self, n: usize) -> usize {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        (x % n as u64) as usize
    }
}

/// What a run measures.
pub struct Plan {
    pub many: usize,
    pub calls: usize,
    pub reps: usize,
    pub callgrind_calls: usize,
}

impl Plan {
    pub fn new(quick: bool) -> Plan {
        if quick {
            Plan {
                many: 20_000,
                calls: 5_000,
                reps: 3,
                callgrind_calls: 500,
            }
        } else {
            Plan {
                many: 200_000,
                calls: 20_000,
                reps: 5,
                callgrind_calls: 2_000,
            }
        }
    }
}

/// One path's medians, microseconds of server CPU per call, by contender (None: not run).
#[derive(Serialize, Clone, Default)]
pub struct Row {
    pub path: String,
    pub throttle: Option<f64>,
    pub cell: Option<f64>,
    pub gcra: Option<f64>,
    pub lua: Option<f64>,
}

impl Row {
    fn set(&mut self, contender: Contender, value: f64) {
        let slot = match contender {
            Contender::Throttle => &mut self.throttle,
            Contender::Cell => &mut self.cell,
            Contender::Gcra => &mut self.gcra,
            Contender::Lua => &mut self.lua,
        };
        *slot = Some(value);
    }
}

#[derive(Serialize)]
pub struct Report {
    pub many_keys: usize,
    pub calls_per_rep: usize,
    pub reps: usize,
    /// Server CPU per call (INFO commandstats usec / calls), medians.
    pub cpu_usec: Vec<Row>,
    /// Instructions per call inside the command (callgrind), hot key.
    pub instructions: Result<Vec<Row>, String>,
    /// MEMORY USAGE of one key, and used_memory per key over the many keys, by contender.
    pub memory: Vec<(String, i64, f64)>,
}

fn median(samples: &mut [f64]) -> f64 {
    samples.sort_by(|a, b| a.total_cmp(b));
    samples[samples.len() / 2]
}

fn start(module: &Path, cell: Option<&Path>, wrapper: &[String]) -> Res<Servers> {
    start_two(module, cell, wrapper, wrapper)
}

/// The module's server under `wrapper`, redis-cell's under `cell_wrapper`.
fn start_two(
    module: &Path,
    cell: Option<&Path>,
    wrapper: &[String],
    cell_wrapper: &[String],
) -> Res<Servers> {
    let server = server::start(module, wrapper, &[])?;
    let mut module_con = server::connect(&server)?;
    let sha: String = redis::cmd("SCRIPT")
        .arg("LOAD")
        .arg(SCRIPT)
        .query(&mut module_con)?;
    let (cell_server, cell_con) = match cell {
        Some(path) => {
            let path = path.to_string_lossy().into_owned();
            let cell_server =
                server::start_after(&["--loadmodule", &path], module, cell_wrapper, &[])?;
            let con = server::connect(&cell_server)?;
            (Some(cell_server), Some(con))
        }
        None => (None, None),
    };
    Ok(Servers {
        module: server,
        cell: cell_server,
        module_con,
        cell_con,
        sha,
    })
}

fn contenders(servers: &Servers) -> Vec<Contender> {
    CONTENDERS
        .into_iter()
        .filter(|c| *c != Contender::Cell || servers.cell.is_some())
        .collect()
}

/// The GCRA section: CPU per call, memory per key, then instructions per call.
pub fn run(module: &Path, cell: Option<&Path>, plan: &Plan) -> Res<Report> {
    print!("gcra: starting servers ... ");
    flush();
    let mut servers = start(module, cell, &[])?;
    let who = contenders(&servers);
    let sha = servers.sha.clone();
    let hot = Keys { count: 1 };
    let many = Keys { count: plan.many };
    // Every key of every path exists before anything is measured; memory per key from the
    // many-keys limited path (one call each: the key of one allowed call), created alone.
    let mut memory = Vec::new();
    print!("warming {} keys per path ", plan.many);
    flush();
    for &contender in &who {
        let con = servers.con(contender);
        let before = used_memory(con)?;
        warm(con, contender, &sha, false, many)?;
        let after = used_memory(con)?;
        let usage = memory_usage(con, &many.name(contender, false, 0))?;
        memory.push((
            contender.name().to_string(),
            usage.ok_or("the key measured is missing")?,
            (after - before) as f64 / plan.many as f64,
        ));
        warm(con, contender, &sha, true, many)?;
        warm(con, contender, &sha, true, hot)?;
        warm(con, contender, &sha, false, hot)?;
        print!(".");
        flush();
    }
    println!();
    let paths = [
        ("hot key, allowed", hot, true),
        ("hot key, limited", hot, false),
        ("200k keys, allowed", many, true),
        ("200k keys, limited", many, false),
    ];
    let mut rows = Vec::new();
    for (label, keys, allowed) in paths {
        let label = label.replace("200k", &format!("{}k", keys.count / 1000));
        print!("gcra: {label} ");
        flush();
        let mut samples: Vec<Vec<f64>> = vec![Vec::new(); who.len()];
        for rep in 0..plan.reps {
            // Alternating contenders, each rep the same key sequence for all.
            for (i, &contender) in who.iter().enumerate() {
                let mut draw = Draw(0x9e37_79b9 + rep as u64);
                let con = servers.con(contender);
                let _: () = redis::cmd("CONFIG").arg("RESETSTAT").query(con)?;
                drive(con, contender, &sha, allowed, keys, plan.calls, &mut |n| {
                    draw.next(n)
                })?;
                let (calls, usec) = command_stats(con, contender.stat())?;
                if calls != plan.calls as u64 {
                    return Err(format!(
                        "{}: {calls} calls counted, {} made",
                        contender.name(),
                        plan.calls
                    )
                    .into());
                }
                samples[i].push(usec as f64 / calls as f64);
            }
            print!(".");
            flush();
        }
        println!();
        let mut row = Row {
            path: label,
            ..Row::default()
        };
        for (i, &contender) in who.iter().enumerate() {
            row.set(contender, median(&mut samples[i]));
        }
        rows.push(row);
    }
    drop(servers);
    let instructions = match callgrind::missing_tool() {
        Some(tool) => Err(format!(
            "{tool} not found (Debian: apt-get install valgrind)"
        )),
        None => instructions(module, cell, plan).map_err(|e| e.to_string()),
    };
    Ok(Report {
        many_keys: plan.many,
        calls_per_rep: plan.calls,
        reps: plan.reps,
        cpu_usec: rows,
        instructions,
        memory,
    })
}

/// Instructions per call inside the command, on a hot key and on 10 000 keys at random, under
/// callgrind (the counts do not depend on the machine's load).
fn instructions(module: &Path, cell: Option<&Path>, plan: &Plan) -> Res<Vec<Row>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("bench/results/callgrind-gcra");
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir)?;
    print!("gcra: instructions per call under callgrind ... ");
    flush();
    // One dump directory per server: callgrind numbers its dumps per process.
    let (module_dir, cell_dir) = (dir.join("module"), dir.join("cell"));
    fs::create_dir_all(&module_dir)?;
    fs::create_dir_all(&cell_dir)?;
    let mut servers = start_two(
        module,
        cell,
        &callgrind::wrapper(&module_dir.join("callgrind.out")),
        &callgrind::wrapper(&cell_dir.join("callgrind.out")),
    )?;
    let who = contenders(&servers);
    let sha = servers.sha.clone();
    let paths = [
        ("hot key, allowed", Keys { count: 1 }, true),
        ("hot key, limited", Keys { count: 1 }, false),
        ("10k keys, allowed", Keys { count: 10_000 }, true),
        ("10k keys, limited", Keys { count: 10_000 }, false),
    ];
    for &contender in &who {
        for (_, keys, allowed) in paths {
            warm(servers.con(contender), contender, &sha, allowed, keys)?;
        }
    }
    let pids: Vec<(Contender, String)> = who
        .iter()
        .map(|&c| {
            let server = match (c, servers.cell.as_ref()) {
                (Contender::Cell, Some(cell)) => cell,
                _ => &servers.module,
            };
            (c, server.pid().to_string())
        })
        .collect();
    let mut phases = Vec::new();
    for (p, (_, keys, allowed)) in paths.iter().enumerate() {
        for &(contender, ref pid) in &pids {
            let trigger = format!("p{p}-{}", contender.prefix());
            let con = servers.con(contender);
            control(pid, &["-i", "on"])?;
            let _: String = redis::cmd("PING").query(con)?;
            control(pid, &["-z"])?;
            let mut draw = Draw(0x5eed);
            drive(
                con,
                contender,
                &sha,
                *allowed,
                *keys,
                plan.callgrind_calls,
                &mut |n| draw.next(n),
            )?;
            control(pid, &[&format!("--dump={trigger}")])?;
            control(pid, &["-i", "off"])?;
            phases.push((p, contender, trigger));
        }
    }
    let Servers { module, cell, .. } = servers;
    server::stop(module);
    if let Some(cell) = cell {
        server::stop(cell);
    }
    thread::sleep(Duration::from_millis(200));
    let mut dumps: Vec<Dump> = Vec::new();
    for dir in [&module_dir, &cell_dir] {
        for file in dump_files(dir)? {
            dumps.push(Dump::parse(&fs::read_to_string(file)?));
        }
    }
    let mut rows: Vec<Row> = paths
        .iter()
        .map(|(label, _, _)| Row {
            path: label.to_string(),
            ..Row::default()
        })
        .collect();
    for (p, contender, trigger) in phases {
        let proc_name = if contender == Contender::Lua {
            "evalShaCommand"
        } else {
            MODULE_PROC
        };
        let (_, calls, count) = top_level_calls(&dumps, &trigger, proc_name, plan.callgrind_calls)?;
        rows[p].set(contender, count as f64 / calls as f64);
    }
    println!("done");
    Ok(rows)
}

fn cell_text(v: Option<f64>, places: usize) -> String {
    v.map_or("-".into(), |v| format!("{v:.places$}"))
}

fn ratio(a: Option<f64>, b: Option<f64>) -> String {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => format!("{:.2}x", a / b),
        _ => "-".into(),
    }
}

impl Report {
    fn rows(s: &mut String, rows: &[Row], places: usize) {
        let _ = writeln!(
            s,
            "{:<20} {:>10} {:>10} {:>10} {:>10} {:>11} {:>10}",
            "path", "throttle", "redis-cell", "gcra", "lua", "cell/thr.", "lua/gcra"
        );
        for r in rows {
            let _ = writeln!(
                s,
                "{:<20} {:>10} {:>10} {:>10} {:>10} {:>11} {:>10}",
                r.path,
                cell_text(r.throttle, places),
                cell_text(r.cell, places),
                cell_text(r.gcra, places),
                cell_text(r.lua, places),
                ratio(r.cell, r.throttle),
                ratio(r.lua, r.gcra)
            );
        }
    }

    pub fn table(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "GCRA drop-ins: server CPU per call, usec (INFO commandstats; medians of {} reps of {} \
             calls; {} keys at random). throttle = the module's CL.THROTTLE, redis-cell = \
             redis-cell 0.5.0's, gcra = the module's GCRA, lua = bench/gcra.lua",
            self.reps, self.calls_per_rep, self.many_keys
        );
        Report::rows(&mut s, &self.cpu_usec, 2);
        match &self.instructions {
            Ok(rows) => {
                let _ = writeln!(
                    s,
                    "\nInstructions per call in the command (callgrind; the command's proc run by \
                     call() at top level)"
                );
                Report::rows(&mut s, rows, 0);
            }
            Err(why) => {
                let _ = writeln!(s, "\nInstructions per call: skipped, {why}");
            }
        }
        let _ = writeln!(
            s,
            "\nMemory per key: MEMORY USAGE of one key, and used_memory grown per key over {} keys",
            self.many_keys
        );
        for (name, usage, per_key) in &self.memory {
            let _ = writeln!(s, "{name:<24} {usage:>6} B {per_key:>10.1} B");
        }
        s.push_str(&targets_line(&self.targets()));
        s
    }

    /// The targets, each held or not: the module's CL.THROTTLE costs no more than
    /// redis-cell's on any path (CPU per call and instructions), GCRA at least 3x below the
    /// script, about 120 bytes per key.
    fn targets(&self) -> Vec<String> {
        let mut out = Vec::new();
        let mut check = |label: String, ok: bool| out.push(verdict(label, ok));
        let mut tables: Vec<(&str, &[Row])> = vec![("cpu", &self.cpu_usec)];
        if let Ok(rows) = &self.instructions {
            tables.push(("instr", rows));
        }
        for (what, rows) in tables {
            for r in rows {
                if let (Some(t), Some(c)) = (r.throttle, r.cell) {
                    check(
                        format!(
                            "{what} {}: cl.throttle <= redis-cell ({:.2}x)",
                            r.path,
                            c / t
                        ),
                        t <= c,
                    );
                }
                if let (Some(g), Some(l)) = (r.gcra, r.lua) {
                    check(
                        format!("{what} {}: gcra >= 3x below lua ({:.2}x)", r.path, l / g),
                        l >= 3.0 * g,
                    );
                }
            }
        }
        for (name, usage, _) in &self.memory {
            if name.starts_with("module") {
                check(
                    format!("{name} key ~120 B ({usage} B)"),
                    (1..=130).contains(usage),
                );
            }
        }
        out
    }

    pub fn json(&self) -> serde_json::Value {
        let mut v = serde_json::to_value(self).unwrap_or_default();
        if let Some(map) = v.as_object_mut() {
            map.insert("targets".into(), serde_json::json!(self.targets()));
        }
        v
    }
}
