//! The measured calls, pipelined: the module's TRYACQUIRE, the equivalent Lua script
//! (`bench/tryacquire.lua`) and INCR, on the grant and the refusal path. Every reply is checked
//! to be the path being measured.

use redis::{Connection, Value};

use crate::limiter::{keys, set_clock, Ids};
use crate::Res;

/// The Lua port, sent once with SCRIPT LOAD and run with EVALSHA.
pub const LUA: &str = include_str!("../../bench/tryacquire.lua");

/// Commands per pipelined round trip while driving the measured calls.
const BATCH: usize = 500;

/// How the grant path moves the module's debug clock 1 ms before each TRYACQUIRE.
#[derive(Clone, Copy)]
pub enum Advance {
    /// `RATELIMIT.DEBUG ADVANCE 1` as a command of its own: its own line in commandstats.
    Plain,
    /// The same inside `MULTI`/`EXEC`, so the server runs it from `execCommand`, not as a
    /// top-level command: callgrind then tells it apart from TRYACQUIRE (callgrind.rs).
    InMulti,
}

/// `calls` TRYACQUIREs on the grant path of a steady full window: before each, the debug clock
/// moves 1 ms (RATELIMIT.DEBUG ADVANCE 1, its own command in commandstats), so each call prunes
/// the oldest entry and logs one. Every reply must be nil (acquired).
pub fn module_grants(con: &mut Connection, name: &str, calls: usize, clock: &mut i64) -> Res<()> {
    set_clock(con, *clock)?;
    module_grants_from(con, name, calls, clock, Advance::Plain)
}

/// [`module_grants`] with the module's clock already at `clock`: nothing but the pipelined
/// calls (and their clock advances).
pub fn module_grants_from(
    con: &mut Connection,
    name: &str,
    calls: usize,
    clock: &mut i64,
    advance: Advance,
) -> Res<()> {
    let mut left = calls;
    while left > 0 {
        let n = left.min(BATCH);
        let mut pipe = redis::pipe();
        for _ in 0..n {
            match advance {
                Advance::Plain => {
                    pipe.cmd("RATELIMIT.DEBUG").arg("ADVANCE").arg(1).ignore();
                }
                Advance::InMulti => {
                    pipe.cmd("MULTI").ignore();
                    pipe.cmd("RATELIMIT.DEBUG").arg("ADVANCE").arg(1).ignore();
                    pipe.cmd("EXEC").ignore();
                }
            }
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
pub fn lua_grants(
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
pub fn module_refusals(con: &mut Connection, name: &str, calls: usize, clock: i64) -> Res<()> {
    set_clock(con, clock)?;
    module_refusals_from(con, name, calls)
}

/// [`module_refusals`] with the module's clock already set: nothing but the pipelined calls.
pub fn module_refusals_from(con: &mut Connection, name: &str, calls: usize) -> Res<()> {
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

pub fn lua_refusals(
    con: &mut Connection,
    sha: &str,
    name: &str,
    calls: usize,
    clock: i64,
) -> Res<()> {
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

pub fn incrs(con: &mut Connection, calls: usize) -> Res<()> {
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
