//! redis-cell's `CL.THROTTLE`, measured beside the module when `$REDIS_CELL` names a build of
//! it (`libredis_cell.so`; never part of this project): loaded into the same server with a second
//! `--loadmodule`, and driven on its allowed and its refused path.
//!
//! redis-cell is GCRA on one string key per limiter and reads the real clock (it has no debug
//! clock), so its two paths are set up to stay put whatever the time:
//!
//! - **allowed**: `CL.THROTTLE bench:cell:allowed 1000000000 1000 1 1`, 1 000 per second with a
//!   burst of 10^9: no run comes near using the burst up, so every call is allowed, and each one
//!   reads the key, moves its theoretical arrival time on by 1 ms and writes it back with a new
//!   expiry: redis-cell's write path;
//! - **refused**: `CL.THROTTLE bench:cell:refused 999 1000 86400000 1`, a burst of 1 000 and then
//!   one call a day: after the 1 000 warm-up calls every call is refused: a read, no write.
//!
//! Every reply is checked (its first element: 0 allowed, 1 refused).

use std::env;
use std::path::PathBuf;

use redis::{Connection, Value};

use crate::Res;

/// The command as commandstats names it.
pub const COMMAND: &str = "cl.throttle";

/// `CL.THROTTLE key max_burst count_per_period period_s quantity` of the allowed path.
pub const ALLOWED: [&str; 6] = [
    "CL.THROTTLE",
    "bench:cell:allowed",
    "1000000000",
    "1000",
    "1",
    "1",
];

/// The same for the refused path (its burst of 1 000 used up by [`prepare`]).
pub const REFUSED: [&str; 6] = [
    "CL.THROTTLE",
    "bench:cell:refused",
    "999",
    "1000",
    "86400000",
    "1",
];

/// The database redis-cell's keys live in: its own, so that its keys (which carry TTLs) do not
/// change what a key lookup in the module's and the script's database costs (a database with
/// no TTL at all skips the expiry lookup), and each contender is measured as it runs alone.
pub const DB: &str = "1";

/// The burst the refused limiter lets through before it refuses.
const REFUSED_BURST: usize = 1_000;

/// Commands per pipelined round trip.
const BATCH: usize = 500;

/// `$REDIS_CELL`, if set: the path of a redis-cell build to load beside the module. A path
/// that does not exist is an error, not a silent skip: the caller asked for the comparison.
/// Unset, redis-cell 0.5.0 as `.ci/fetch-shared redis-cell` builds it from the sources kept
/// beside the project, where they are (a user's clone has none: then it is not measured).
pub fn path() -> Res<Option<PathBuf>> {
    match env::var_os("REDIS_CELL") {
        None => Ok(shared_build()),
        Some(p) if p.is_empty() => Ok(None),
        Some(p) => {
            let path = PathBuf::from(&p);
            if !path.is_file() {
                return Err(format!("REDIS_CELL={}: no such file", path.display()).into());
            }
            // redis-server resolves a relative --loadmodule path after moving into its --dir.
            Ok(Some(std::fs::canonicalize(&path)?))
        }
    }
}

/// redis-cell 0.5.0 built by `.ci/fetch-shared` (cached under target/), if the sources are here.
fn shared_build() -> Option<PathBuf> {
    let project = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    if !project.join("../shared/servers").is_dir() {
        return None;
    }
    let output = std::process::Command::new(project.join(".ci/fetch-shared"))
        .arg("redis-cell")
        .stderr(std::process::Stdio::inherit())
        .output()
        .ok()?;
    let path = PathBuf::from(String::from_utf8_lossy(&output.stdout).trim());
    (output.status.success() && path.is_file()).then_some(path)
}

/// The server options that load it (before the module: its `CL.THROTTLE` then stays
/// redis-cell's, and the module skips the name).
pub fn load_args(path: &std::path::Path) -> [String; 2] {
    ["--loadmodule".into(), path.to_string_lossy().into_owned()]
}

/// Puts both limiters in their steady state: the allowed one exists (its first call takes the
/// create branch, every later one the compare-and-swap), the refused one has used its burst.
pub fn prepare(con: &mut Connection) -> Res<()> {
    let _: () = redis::pipe()
        .cmd("SELECT")
        .arg(DB)
        .ignore()
        .cmd("DEL")
        .arg(ALLOWED[1])
        .arg(REFUSED[1])
        .ignore()
        .cmd("SELECT")
        .arg(0)
        .ignore()
        .query(con)?;
    calls(con, &ALLOWED, 100, false)?;
    calls(con, &REFUSED, REFUSED_BURST, false)?;
    calls(con, &REFUSED, 10, true)
}

/// `n` pipelined calls of `command` in [`DB`]; every reply must say `throttled` (1) or allowed
/// (0). The connection is back in database 0 afterwards.
pub fn calls(con: &mut Connection, command: &[&str], n: usize, throttled: bool) -> Res<()> {
    let mut left = n;
    while left > 0 {
        let batch = left.min(BATCH);
        let mut pipe = redis::pipe();
        pipe.cmd("SELECT").arg(DB).ignore();
        for _ in 0..batch {
            pipe.cmd(command[0]).arg(&command[1..]);
        }
        pipe.cmd("SELECT").arg(0).ignore();
        let replies: Vec<Value> = pipe.query(con)?;
        check(&replies, batch, throttled)?;
        left -= batch;
    }
    Ok(())
}

fn check(replies: &[Value], n: usize, throttled: bool) -> Res<()> {
    let path = if throttled { "refused" } else { "allowed" };
    if replies.len() != n {
        return Err(format!(
            "cl.throttle {path}: {} replies for {n} calls",
            replies.len()
        )
        .into());
    }
    let want = Value::Int(i64::from(throttled));
    for reply in replies {
        let first = match reply {
            Value::Array(items) => items.first(),
            _ => None,
        };
        if first != Some(&want) {
            return Err(format!(
                "cl.throttle {path}: unexpected reply {reply:?}: not the path being measured"
            )
            .into());
        }
    }
    Ok(())
}
