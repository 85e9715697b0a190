//! CPU per call: the server's own accounting (`INFO commandstats`) around a batch of calls.

use std::time::Instant;

use redis::Connection;

use crate::calls::{incrs, lua_grants, lua_refusals, module_grants, module_refusals};
use crate::cell;
use crate::limiter::{check_steady, delete, fill_window, memory, Ids, Memory};
use crate::{flush, Plan, Res};

/// Window sizes (entries logged = rate = interval in ms) of the CPU-per-call measurement. 1 000
/// is the window the project's targets name (and the one callgrind counts).
const WINDOWS: [i64; 4] = [100, 1_000, 10_000, 1_000_000];

/// Server CPU per call of one measured phase, in microseconds: the median over repetitions.
#[derive(Default)]
pub struct Cpu {
    pub samples: Vec<f64>,
}

impl Cpu {
    pub fn median(&self) -> f64 {
        median(&self.samples)
    }
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
pub fn command_stats(con: &mut Connection, command: &str) -> Res<(u64, u64)> {
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

pub fn median(samples: &[f64]) -> f64 {
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

/// CPU per call of one window size, on both paths, for the module and the script.
#[derive(Default)]
pub struct WindowResult {
    pub window: i64,
    pub module_grant: Cpu,
    pub lua_grant: Cpu,
    pub module_refuse: Cpu,
    pub lua_refuse: Cpu,
    /// redis-cell's CL.THROTTLE, allowed and refused (empty without `$REDIS_CELL`): it has no
    /// window, so these are its figures measured alongside this window's, rep by rep.
    pub cell_grant: Cpu,
    pub cell_refuse: Cpu,
    pub memory: Memory,
}

/// For each of [`WINDOWS`]: fills a full window, warms both paths up, then measures the grant
/// path (module, Lua, and INCR as the floor) and the refusal path, `plan.reps` times each, and
/// checks the window is still full. Only one big window is in memory at a time. With `cell`
/// (redis-cell loaded) CL.THROTTLE's allowed and refused paths are measured in the same reps.
/// Returns the windows and INCR's CPU per call.
pub fn cpu_per_call(
    con: &mut Connection,
    sha: &str,
    plan: &Plan,
    clock: &mut i64,
    ids: &mut Ids,
    cell: bool,
) -> Res<(Vec<WindowResult>, Cpu)> {
    let mut windows = Vec::new();
    let mut incr = Cpu::default();
    for &window in &WINDOWS {
        let name = format!("bench:w{window}");
        print!("window {window:>9}: filling ... ");
        flush();
        let fill_started = Instant::now();
        fill_window(con, &name, window, *clock, ids)?;
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
        module_grants(con, &name, 1_000.min(plan.calls), clock)?;
        lua_grants(con, sha, &name, 1_000.min(plan.calls), clock, ids)?;
        result.memory = memory(con, &name)?;
        for _ in 0..plan.reps {
            result.module_grant.samples.push(measure(
                con,
                "ratelimit.tryacquire",
                plan.calls,
                |con| module_grants(con, &name, plan.calls, clock),
            )?);
            result
                .lua_grant
                .samples
                .push(measure(con, "evalsha", plan.calls, |con| {
                    lua_grants(con, sha, &name, plan.calls, clock, ids)
                })?);
            incr.samples.push(measure(con, "incr", plan.calls, |con| {
                incrs(con, plan.calls)
            })?);
            if cell {
                result
                    .cell_grant
                    .samples
                    .push(measure(con, cell::COMMAND, plan.calls, |con| {
                        cell::calls(con, &cell::ALLOWED, plan.calls, false)
                    })?);
            }
        }
        for _ in 0..plan.reps {
            result.module_refuse.samples.push(measure(
                con,
                "ratelimit.tryacquire",
                plan.calls,
                |con| module_refusals(con, &name, plan.calls, *clock),
            )?);
            result
                .lua_refuse
                .samples
                .push(measure(con, "evalsha", plan.calls, |con| {
                    lua_refusals(con, sha, &name, plan.calls, *clock)
                })?);
            if cell {
                result
                    .cell_refuse
                    .samples
                    .push(measure(con, cell::COMMAND, plan.calls, |con| {
                        cell::calls(con, &cell::REFUSED, plan.calls, true)
                    })?);
            }
        }
        check_steady(con, &name, window)?;
        delete(con, &name)?;
        println!("done");
        windows.push(result);
    }
    Ok((windows, incr))
}
