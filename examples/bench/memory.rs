//! The memory a limiter's log takes at a steady grant rate: one zset member per grant (what
//! Redisson writes), against the module's merged members, exact (`PRECISION 1`: the grants of
//! one millisecond share a member) and coarser (`PRECISION 100`).
//!
//! Each limiter allows far more than it is asked for, over a 1 s interval; one second of grants
//! at `rate` a second fills its window. The module's are made by real TRYACQUIREs on the debug
//! clock (pipelined, the clock advanced 1 ms at a time); Redisson's one-member-per-grant log is
//! loaded with ZADDs of the same members a script would write. `MEMORY USAGE ... SAMPLES 0`
//! measures the whole zset.

use std::fmt::Write as _;
use std::path::Path;

use serde::Serialize;

use crate::limiter::{set_clock, Ids};
use crate::{flush, server, Res, T0};

/// Grants a second measured by a full run, and by `--quick`.
pub const RATES: [i64; 3] = [1_000, 10_000, 100_000];
pub const QUICK_RATES: [i64; 2] = [1_000, 10_000];
/// The coarser precision compared with the exact one, in ms.
const COARSE: i64 = 100;
const INTERVAL: i64 = 1_000;

#[derive(Debug, Clone, Copy, Serialize)]
pub struct Log {
    pub members: i64,
    pub bytes: i64,
}

#[derive(Debug, Serialize)]
pub struct Row {
    pub grants_per_second: i64,
    pub one_member_per_grant: Log,
    pub precision_1: Log,
    pub precision_100: Log,
}

pub struct Memory {
    pub rows: Vec<Row>,
}

pub fn run(module: &Path, rates: &[i64]) -> Res<Memory> {
    let server = server::start(module, &[], &[])?;
    let mut con = server::connect(&server)?;
    let mut rows = Vec::new();
    for &rate in rates {
        print!("memory, {rate:>6} grants/s: ");
        flush();
        let row = Row {
            grants_per_second: rate,
            one_member_per_grant: one_member_per_grant(&mut con, rate)?,
            precision_1: merged(&mut con, rate, 1)?,
            precision_100: merged(&mut con, rate, COARSE)?,
        };
        println!("done");
        rows.push(row);
    }
    server::stop(server);
    Ok(Memory { rows })
}

/// A second of grants, one member each, scored as they would be.
fn one_member_per_grant(con: &mut redis::Connection, rate: i64) -> Res<Log> {
    let log = "{redisson}:permits";
    let _: () = redis::cmd("DEL").arg(log).query(con)?;
    let mut ids = Ids::new(0x6d65_6d6f + rate as u64);
    let mut pipe = redis::pipe();
    for i in 0..rate {
        pipe.cmd("ZADD")
            .arg(log)
            .arg(T0 + i * INTERVAL / rate)
            .arg(&ids.member(1)[..])
            .ignore();
        if pipe.cmd_iter().count() >= 10_000 {
            pipe.query::<()>(con)?;
            pipe.clear();
        }
    }
    pipe.query::<()>(con)?;
    measure(con, log, rate)
}

/// A second of grants by TRYACQUIRE on a limiter with this precision.
fn merged(con: &mut redis::Connection, rate: i64, precision: i64) -> Res<Log> {
    let name = format!("merged{precision}");
    let log = format!("{{{name}}}:permits");
    let _: () = redis::cmd("DEL")
        .arg(&name)
        .arg(format!("{{{name}}}:value"))
        .arg(&log)
        .query(con)?;
    set_clock(con, T0)?;
    let created: i64 = redis::cmd("RATELIMIT.SETRATE")
        .arg(&name)
        .arg(u32::MAX)
        .arg(INTERVAL)
        .arg("PRECISION")
        .arg(precision)
        .query(con)?;
    if created != 1 {
        return Err(format!("SETRATE {name} replied {created}").into());
    }
    let per_ms = rate / INTERVAL;
    let mut pipe = redis::pipe();
    for ms in 0..INTERVAL {
        for _ in 0..per_ms.max(1) {
            pipe.cmd("RATELIMIT.TRYACQUIRE").arg(&name);
        }
        pipe.cmd("RATELIMIT.DEBUG").arg("ADVANCE").arg(1).ignore();
        if ms % 10 == 9 {
            check_granted(pipe.query(con)?, &name)?;
            pipe.clear();
        }
    }
    check_granted(pipe.query(con)?, &name)?;
    measure(con, &log, rate)
}

/// Every TRYACQUIRE of a pipeline replied nil (granted).
fn check_granted(replies: Vec<redis::Value>, name: &str) -> Res<()> {
    match replies.iter().find(|r| **r != redis::Value::Nil) {
        Some(other) => Err(format!("TRYACQUIRE {name} replied {other:?}, not a grant").into()),
        None => Ok(()),
    }
}

/// The zset's members and bytes, after checking it holds a second of grants.
fn measure(con: &mut redis::Connection, log: &str, rate: i64) -> Res<Log> {
    let members: i64 = redis::cmd("ZCARD").arg(log).query(con)?;
    let bytes: i64 = redis::cmd("MEMORY")
        .arg("USAGE")
        .arg(log)
        .arg("SAMPLES")
        .arg(0)
        .query(con)?;
    // The permits logged add up to the grants made, however they are merged.
    let script = "local sum = 0 \
        for _, m in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do \
            local _, p = struct.unpack('Bc0I', m) sum = sum + p end return sum";
    let logged: i64 = redis::cmd("EVAL").arg(script).arg(1).arg(log).query(con)?;
    let expected = (rate / INTERVAL).max(1) * INTERVAL;
    if logged != expected && logged != rate {
        return Err(format!("{log} logs {logged} permits, not a second of grants").into());
    }
    Ok(Log { members, bytes })
}

impl Memory {
    pub fn table(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "Memory of one limiter's log after a full window of grants (interval 1 s): MEMORY USAGE\n\
             of the permits zset. Redisson: one member per grant; the module: PRECISION 1 merges\n\
             the grants of one millisecond, PRECISION {COARSE} those of one {COARSE} ms bucket."
        );
        let _ = writeln!(
            s,
            "{:>10}  {:>22}  {:>22}  {:>22}",
            "grants/s", "one member per grant", "PRECISION 1", "PRECISION 100"
        );
        for row in &self.rows {
            let cell = |log: &Log| format!("{} members, {}", log.members, human(log.bytes));
            let _ = writeln!(
                s,
                "{:>10}  {:>22}  {:>22}  {:>22}",
                row.grants_per_second,
                cell(&row.one_member_per_grant),
                cell(&row.precision_1),
                cell(&row.precision_100)
            );
        }
        s
    }

    pub fn json(&self) -> &[Row] {
        &self.rows
    }
}

fn human(bytes: i64) -> String {
    match bytes {
        b if b >= 1 << 20 => format!("{:.1} MB", b as f64 / f64::from(1 << 20)),
        b if b >= 1 << 10 => format!("{:.1} kB", b as f64 / f64::from(1 << 10)),
        b => format!("{b} B"),
    }
}
