//! Throughput: `redis-benchmark` against the module, the Lua script and INCR, each on the
//! refusal path of a full window (bench/README.md says why refusal).

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};

use redis::{Connection, Value};

use crate::cell;
use crate::limiter::{check_steady, delete, fill_window, keys, set_clock, Ids};
use crate::measure::median;
use crate::server::Server;
use crate::{flush, Plan, Res};

/// Window of the limiter the throughput runs hammer (full, clock frozen: every call refused).
pub const THROUGHPUT_WINDOW: i64 = 1_000;

pub const CLIENTS: usize = 50;

pub struct Throughput {
    /// pipeline -> target -> requests per second of each round
    pub rps: BTreeMap<usize, BTreeMap<&'static str, Vec<f64>>>,
    pub requests: BTreeMap<usize, usize>,
    pub rounds: usize,
    /// The module's (acquired, refused) counters over all its runs, from INFO ratelimit.
    pub counters: Option<(u64, u64)>,
}

/// The targets, in the order each round runs them; "cl.throttle" only with redis-cell loaded.
const TARGETS: [&str; 4] = ["module", "lua", "incr", "cl.throttle"];

#[allow(clippy::too_many_arguments)]
pub fn run(
    con: &mut Connection,
    server: &Server,
    tool: &Path,
    sha: &str,
    plan: &Plan,
    clock: &mut i64,
    ids: &mut Ids,
    with_cell: bool,
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
    // redis-cell on its refused path too (cell.rs): a used-up burst, one call a day.
    let cell_cmd: Vec<String> = cell::REFUSED.iter().map(|a| a.to_string()).collect();
    let commands = [&module_cmd, &lua_cmd, &incr_cmd, &cell_cmd];
    let runs = if with_cell { 4 } else { 3 };
    if with_cell {
        cell::calls(con, &cell::REFUSED, 1, true)?;
    }
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
            for (target, cmd) in TARGETS.iter().zip(commands).take(runs) {
                print!("redis-benchmark -c {CLIENTS} -P {pipeline:>2} -n {n}: {target:<11} ... ");
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
    if with_cell {
        cell::calls(con, &cell::REFUSED, 1, true)?;
    }
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
    pub fn median(&self, pipeline: usize, target: &str) -> f64 {
        self.rps
            .get(&pipeline)
            .and_then(|r| r.get(target))
            .map_or(f64::NAN, |s| median(s))
    }

    /// Median over rounds of `a / b`: each round runs the targets back to back, so the ratio
    /// within a round is steadier than the ratio of medians when the machine's speed drifts.
    pub fn ratio(&self, pipeline: usize, a: &str, b: &str) -> f64 {
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
    // redis-cell's command runs in its own database (cell.rs), as it does everywhere else.
    let db = if cmd.first().map(String::as_str) == Some(cell::ALLOWED[0]) {
        cell::DB
    } else {
        "0"
    };
    let out = Command::new(tool)
        .args(["-h", "127.0.0.1", "-p", &port.to_string(), "--dbnum", db])
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
