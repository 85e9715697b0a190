//! Many limiters (`bench --many`, and a section of `make bench`): the workload most users run,
//! an API with a limiter per user, each call on a user drawn at random from 500, 1 000, 10 000,
//! 200 000 and 1 000 000 of them (500 in the config cache's reach, 1 000 and more beyond it). bench/README.md, "Many limiters", says how; in short:
//!
//! - every user is a limiter of 100 permits a minute, created by its first call
//!   (`ALLOW u RATE 100 60000 KEEPALIVE 3600000`, the call an API middleware makes), so each
//!   has its three keys and their TTLs, as in production;
//! - on each server size, rounds alternate the contenders on the same users and the same random
//!   sequence: the module's TRYACQUIRE (the config cache on, then off), its ALLOW, and the
//!   script (`bench/tryacquire.lua`, Redisson's calls, on each user's own keys); every reply is
//!   checked to be a grant; first use is ALLOW on users never seen;
//! - memory per limiter: used_memory grown per user created, and MEMORY USAGE of each key;
//! - a hot limiter for comparison (the config cache on and off), and a burst of grants in one
//!   millisecond (the debug clock frozen, PRECISION 1 merging them) against the script, by
//!   redis-benchmark's pipelined throughput;
//! - where a call's cost goes: callgrind on 20 000 users, instructions per call in the command,
//!   split by the module API functions it calls (the rest is the module's own code, the
//!   dispatcher and the allocator calls the module makes itself).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::fs;
use std::path::Path;
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use redis::{Connection, Value};
use serde::Serialize;

use crate::callgrind::{
    self, control, dump_files, is_module_api, top_level_calls, Dump, MODULE_PROC,
};
use crate::calls::LUA;
use crate::limiter::{keys, memory_usage, set_clock, used_memory, Ids};
use crate::measure::{command_stats, median};
use crate::report::{targets_line, verdict};
use crate::server::{self, which};
use crate::{flush, Res, T0};

/// Every user's limiter: 100 permits a minute, kept an hour after its last call (longer than
/// any run, so no user expires between its creation and its measured calls).
const RATE: &str = "100";
const INTERVAL: &str = "60000";
const KEEP_ALIVE: &str = "3600000";

/// Commands per pipelined round trip.
const BATCH: usize = 1_000;

/// Calls of a phase's command, unmeasured, before it is measured.
const WARM_UP: usize = 1_000;

/// AVAILABLE calls on users at random before each phase: they fill the config cache as a
/// steady stream of calls would (four calls a user on 10 000 users, enough for most to have been
/// cached and, on Valkey 9 and Redis 7.4, checked for field TTLs).
const PRIMER: usize = 40_000;

/// Users the callgrind breakdown draws from (fewer than the CPU runs: valgrind is slow, and an
/// instruction count does not depend on the caches).
const CALLGRIND_USERS: usize = 20_000;

/// What a run measures.
pub struct Plan {
    pub sizes: Vec<usize>,
    pub calls: usize,
    pub reps: usize,
    pub callgrind_calls: usize,
    pub burst_requests: usize,
}

impl Plan {
    pub fn new(quick: bool) -> Plan {
        if quick {
            Plan {
                sizes: vec![500, 10_000, 50_000],
                calls: 5_000,
                reps: 4,
                callgrind_calls: 500,
                burst_requests: 100_000,
            }
        } else {
            Plan {
                sizes: vec![500, 1_000, 10_000, 200_000, 1_000_000],
                calls: 20_000,
                reps: 6,
                callgrind_calls: 2_000,
                burst_requests: 1_000_000,
            }
        }
    }
}

/// One measured kind of call.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Call {
    /// `RATELIMIT.TRYACQUIRE u`, the config cache on.
    TryAcquire,
    /// The same with `CONFIG SET ratelimit.config-cache no`.
    TryAcquireUncached,
    /// `RATELIMIT.ALLOW u RATE 100 60000 KEEPALIVE 3600000` on an existing user.
    Allow,
    /// `bench/tryacquire.lua` on the user's keys.
    Script,
    /// The same ALLOW on a user never seen: creates the limiter and grants.
    FirstUse,
    /// `RATELIMIT.TRYACQUIRE` of a burst in one millisecond (the callgrind breakdown only): the
    /// clock frozen, PRECISION 1, so every grant merges into the entry logged before it.
    Burst,
}

/// A round: the module's grants on existing users, TRYACQUIRE with the config cache on and
/// off in turn first (on first in even rounds, off first in odd ones: the two compared are
/// measured in the same places equally often), then ALLOW; then the script; then first use,
/// which adds keys (see [`settle`]). Whatever follows the script runs a little slower (it leaves
/// the caches cold): here that is first use, whose target is the harder for it.
fn round(rep: usize) -> [Call; 5] {
    let (first, second) = if rep.is_multiple_of(2) {
        (Call::TryAcquire, Call::TryAcquireUncached)
    } else {
        (Call::TryAcquireUncached, Call::TryAcquire)
    };
    [first, second, Call::Allow, Call::Script, Call::FirstUse]
}

impl Call {
    fn label(self) -> &'static str {
        match self {
            Call::TryAcquire => "tryacquire",
            Call::TryAcquireUncached => "tryacquire, config-cache no",
            Call::Allow => "allow",
            Call::Script => "script",
            Call::FirstUse => "first use (allow ... RATE)",
            Call::Burst => "burst, merged grant",
        }
    }

    /// The command as commandstats names it.
    fn stat(self) -> &'static str {
        match self {
            Call::TryAcquire | Call::TryAcquireUncached | Call::Burst => "ratelimit.tryacquire",
            Call::Allow | Call::FirstUse => "ratelimit.allow",
            Call::Script => "evalsha",
        }
    }

    fn command(self, sha: &str, user: &str, ids: &mut Ids) -> redis::Cmd {
        match self {
            Call::TryAcquire | Call::TryAcquireUncached | Call::Burst => {
                let mut cmd = redis::cmd("RATELIMIT.TRYACQUIRE");
                cmd.arg(user);
                cmd
            }
            Call::Allow | Call::FirstUse => allow(user),
            Call::Script => {
                let mut cmd = redis::cmd("EVALSHA");
                cmd.arg(sha)
                    .arg(5)
                    .arg(&keys(user)[..])
                    .arg(1)
                    .arg(now_ms())
                    .arg(&ids.id()[..]);
                cmd
            }
        }
    }

    /// Whether `reply` is a grant.
    fn granted(self, reply: &Value) -> bool {
        match self {
            Call::TryAcquire | Call::TryAcquireUncached | Call::Script | Call::Burst => {
                *reply == Value::Nil
            }
            // allowed, 1, limit, ...
            Call::Allow | Call::FirstUse => match reply {
                Value::Array(items) => items.get(1) == Some(&Value::Int(1)),
                Value::Map(pairs) => pairs.first().map(|p| &p.1) == Some(&Value::Int(1)),
                _ => false,
            },
        }
    }
}

fn allow(user: &str) -> redis::Cmd {
    let mut cmd = redis::cmd("RATELIMIT.ALLOW");
    cmd.arg(user)
        .arg("RATE")
        .arg(RATE)
        .arg(INTERVAL)
        .arg("KEEPALIVE")
        .arg(KEEP_ALIVE);
    cmd
}

/// The caller's clock, as Redisson passes it to the script.
fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

fn user(index: usize) -> String {
    format!("u:{index}")
}

/// A seeded xorshift: the same users in the same order for every contender of a round.
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

/// `names.len()` pipelined calls of `call`, each reply checked to be a grant.
fn drive(con: &mut Connection, call: Call, sha: &str, names: &[String], ids: &mut Ids) -> Res<()> {
    for batch in names.chunks(BATCH) {
        let mut pipe = redis::pipe();
        for name in batch {
            pipe.add_command(call.command(sha, name, ids));
        }
        let replies: Vec<Value> = pipe.query(con)?;
        if let Some(reply) = replies.iter().find(|r| !call.granted(r)) {
            return Err(format!(
                "{}: unexpected reply {reply:?}: not the grant being measured",
                call.label()
            )
            .into());
        }
    }
    Ok(())
}

/// `RATELIMIT.AVAILABLE` on each of `names`, pipelined: a read of each configuration.
fn available(con: &mut Connection, names: &[String]) -> Res<()> {
    for batch in names.chunks(BATCH) {
        let mut pipe = redis::pipe();
        for name in batch {
            pipe.cmd("RATELIMIT.AVAILABLE").arg(name).ignore();
        }
        let _: () = pipe.query(con)?;
    }
    Ok(())
}

/// Server CPU per call of `call` over `names`, from INFO commandstats.
fn cpu_per_call(
    con: &mut Connection,
    call: Call,
    sha: &str,
    names: &[String],
    ids: &mut Ids,
) -> Res<f64> {
    let uncached = call == Call::TryAcquireUncached;
    if uncached {
        config_cache(con, false)?;
    }
    let _: () = redis::cmd("CONFIG").arg("RESETSTAT").query(con)?;
    drive(con, call, sha, names, ids)?;
    let (calls, usec) = command_stats(con, call.stat())?;
    if uncached {
        config_cache(con, true)?;
    }
    if calls != names.len() as u64 {
        return Err(format!(
            "{}: {calls} calls counted, {} made",
            call.label(),
            names.len()
        )
        .into());
    }
    Ok(usec as f64 / calls as f64)
}

fn config_cache(con: &mut Connection, on: bool) -> Res<()> {
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("ratelimit.config-cache")
        .arg(if on { "yes" } else { "no" })
        .query(con)?;
    Ok(())
}

/// One server size's medians, microseconds of server CPU per call.
#[derive(Serialize, Clone)]
pub struct Size {
    pub limiters: usize,
    pub usec: BTreeMap<&'static str, f64>,
    /// Every round's figure, in the order of the rounds.
    pub rounds: BTreeMap<&'static str, Vec<f64>>,
    /// used_memory grown per limiter created (its first call), bytes.
    pub bytes_per_limiter: f64,
}

impl Size {
    /// The medians the table and the targets read: TRYACQUIRE, ALLOW, the script, first use,
    /// and TRYACQUIRE without the config cache.
    fn medians(&self) -> (f64, f64, f64, f64, f64) {
        let get = |call: Call| self.usec.get(call.label()).copied().unwrap_or(f64::NAN);
        (
            get(Call::TryAcquire),
            get(Call::Allow),
            get(Call::Script),
            get(Call::FirstUse),
            get(Call::TryAcquireUncached),
        )
    }

    /// What the config cache costs against none: the median of each round's ratio. The two
    /// run back to back in every round, so the machine's drift from round to round (a fifth
    /// here at times) cancels, where a ratio of the two medians keeps it.
    fn cache_cost(&self) -> f64 {
        let rounds = |call: Call| self.rounds.get(call.label()).cloned().unwrap_or_default();
        let (on, off) = (rounds(Call::TryAcquire), rounds(Call::TryAcquireUncached));
        let ratios: Vec<f64> = on.iter().zip(&off).map(|(on, off)| on / off).collect();
        if ratios.is_empty() {
            f64::NAN
        } else {
            median(&ratios)
        }
    }
}

/// What one limiter's keys take: MEMORY USAGE of each, and what the server adds per key.
#[derive(Serialize, Clone, Default)]
pub struct Parts {
    pub hash: i64,
    pub hash_encoding: String,
    pub hash_fields: i64,
    pub value: i64,
    pub value_encoding: String,
    pub permits: i64,
    pub permits_encoding: String,
}

/// The hot limiter: TRYACQUIRE on one limiter with the config cache on and off.
#[derive(Serialize, Clone)]
pub struct Hot {
    pub grant: (f64, f64),
    pub refusal: (f64, f64),
}

/// A burst of grants in one millisecond: redis-benchmark requests per second (median of the
/// rounds) and server CPU per call, module and script.
#[derive(Serialize, Clone)]
pub struct Burst {
    pub module_rps: f64,
    pub script_rps: f64,
    pub module_usec: f64,
    pub script_usec: f64,
    /// INCR's throughput the same way: what any command gets here, the ceiling of the ratio.
    pub incr_rps: f64,
}

/// Per call, in the command: the total, and the module API functions it calls.
#[derive(Serialize, Clone)]
pub struct Breakdown {
    pub label: String,
    pub total: f64,
    pub parts: Vec<(String, f64)>,
}

#[derive(Serialize)]
pub struct Report {
    pub calls_per_rep: usize,
    pub reps: usize,
    pub sizes: Vec<Size>,
    pub parts: Parts,
    pub hot: Hot,
    pub burst: Option<Burst>,
    pub breakdown: Result<Vec<Breakdown>, String>,
}

/// Waits for the server to finish growing its key tables after keys were added: a table being
/// rehashed makes every lookup probe two tables and every command move some buckets, which
/// would fall on whichever calls are measured next. The server's cron finishes it within a few
/// seconds at these sizes; `DEBUG HTSTATS` says when (the servers here allow DEBUG from
/// loopback), else a fixed wait stands in.
fn settle(con: &mut Connection) -> Res<()> {
    for _ in 0..600 {
        let stats: Result<String, _> = redis::cmd("DEBUG").arg("HTSTATS").arg(0).query(con);
        match stats {
            // Both Redis's dict and Valkey's hashtable list a second table, the "rehashing
            // target", only while one is being grown (Valkey also prints a "rehashing index"
            // line always).
            Ok(text) if text.contains("rehashing target") => {
                thread::sleep(Duration::from_millis(100));
            }
            Ok(_) => return Ok(()),
            Err(_) => {
                thread::sleep(Duration::from_millis(3000));
                return Ok(());
            }
        }
    }
    Err("the server's key tables were still being rehashed after a minute".into())
}

/// The options of every server here: DEBUG allowed from loopback, for [`settle`].
const SERVER_OPTIONS: [&str; 2] = ["--enable-debug-command", "local"];

/// Fewer users than this share the run's calls among too few limiters for 100 permits a minute
/// to grant them all: theirs are set up by [`create`] with more.
const FEW_USERS: usize = 10_000;

/// Creates users `from..to` with their first call, pipelined. Out of `limiters` fewer than
/// [`FEW_USERS`], each user is first set to `100 * FEW_USERS / limiters` permits a minute
/// (2 000 at 500 users, so that every measured call is still a grant) with `PRECISION 1000`
/// (so that the log stays as short as 100 a minute keeps it); ALLOW's `RATE` then only
/// validates, as it does on an existing limiter.
fn create(con: &mut Connection, from: usize, to: usize, limiters: usize) -> Res<()> {
    let names: Vec<String> = (from..to).map(user).collect();
    if limiters < FEW_USERS {
        let rate = 100 * FEW_USERS / limiters.max(1);
        for batch in names.chunks(BATCH) {
            let mut pipe = redis::pipe();
            for name in batch {
                pipe.cmd("RATELIMIT.SETRATE")
                    .arg(name)
                    .arg(rate)
                    .arg(INTERVAL)
                    .arg("KEEPALIVE")
                    .arg(KEEP_ALIVE)
                    .arg("PRECISION")
                    .arg(1000)
                    .ignore();
            }
            let _: () = pipe.query(con)?;
        }
    }
    let mut ids = Ids::new(0);
    drive(con, Call::FirstUse, "", &names, &mut ids)
}

pub fn run(module: &Path, plan: &Plan) -> Res<Report> {
    let mut sizes = Vec::new();
    let mut parts = Parts::default();
    let mut hot = None;
    for &limiters in &plan.sizes {
        print!("many: {limiters} limiters: creating ");
        flush();
        let server = server::start(module, &[], &SERVER_OPTIONS)?;
        let mut con = server::connect(&server)?;
        let sha: String = redis::cmd("SCRIPT").arg("LOAD").arg(LUA).query(&mut con)?;
        let before = used_memory(&mut con)?;
        create(&mut con, 0, limiters, limiters)?;
        let after = used_memory(&mut con)?;
        let bytes_per_limiter = (after - before) as f64 / limiters as f64;
        settle(&mut con)?;
        parts = limiter_parts(&mut con, &user(0))?;
        print!("measuring ");
        flush();
        let mut samples: BTreeMap<&'static str, Vec<f64>> = BTreeMap::new();
        let mut ids = Ids::new(0x5eed);
        for rep in 0..plan.reps {
            let calls = round(rep);
            for (phase, &call) in calls.iter().enumerate() {
                // Each phase its own users at random (none of them warmed by the phase before),
                // after a warm-up of its own command on others.
                let mut draw = Draw(0x9e37_79b9 + (rep * calls.len() + phase) as u64);
                let mut users = |n: usize| -> Vec<String> {
                    (0..n).map(|_| user(draw.next(limiters))).collect()
                };
                let warm_up = users(WARM_UP);
                // The config cache as a server that never turned it off would have it (turning
                // it off empties it): AVAILABLE reads a configuration like a
                // grant does, takes no permit and writes nothing.
                let primer = users(PRIMER);
                let names = if call == Call::FirstUse {
                    (0..plan.calls).map(|i| format!("new:{rep}:{i}")).collect()
                } else {
                    users(plan.calls)
                };
                let warm_call = if call == Call::FirstUse {
                    Call::Allow
                } else {
                    call
                };
                config_cache(&mut con, call != Call::TryAcquireUncached)?;
                available(&mut con, &primer)?;
                drive(&mut con, warm_call, &sha, &warm_up, &mut ids)?;
                let usec = cpu_per_call(&mut con, call, &sha, &names, &mut ids)?;
                samples.entry(call.label()).or_default().push(usec);
                if call == Call::FirstUse {
                    settle(&mut con)?;
                }
            }
            print!(".");
            flush();
        }
        println!();
        if hot.is_none() {
            hot = Some(hot_limiter(&mut con, plan)?);
        }
        server::stop(server);
        sizes.push(Size {
            limiters,
            usec: samples
                .iter()
                .map(|(&label, v)| (label, median(v)))
                .collect(),
            rounds: samples,
            bytes_per_limiter,
        });
    }
    let hot = hot.ok_or("no size measured")?;
    let burst = match which("redis-benchmark") {
        Some(tool) => Some(burst(module, &tool, plan)?),
        None => {
            println!("many: redis-benchmark not found (apt-get install redis-tools): no burst");
            None
        }
    };
    let breakdown = match callgrind::missing_tool() {
        Some(tool) => Err(format!(
            "{tool} not found (Debian: apt-get install valgrind)"
        )),
        None => breakdown(module, plan).map_err(|e| e.to_string()),
    };
    Ok(Report {
        calls_per_rep: plan.calls,
        reps: plan.reps,
        sizes,
        parts,
        hot,
        burst,
        breakdown,
    })
}

fn limiter_parts(con: &mut Connection, name: &str) -> Res<Parts> {
    let [hash, value, _, permits, _] = keys(name);
    let encoding = |con: &mut Connection, key: &str| -> Res<String> {
        Ok(redis::cmd("OBJECT").arg("ENCODING").arg(key).query(con)?)
    };
    let usage = |con: &mut Connection, key: &str| -> Res<i64> {
        memory_usage(con, key)?.ok_or_else(|| format!("{key} is missing").into())
    };
    Ok(Parts {
        hash: usage(con, &hash)?,
        hash_encoding: encoding(con, &hash)?,
        hash_fields: redis::cmd("HLEN").arg(&hash).query(con)?,
        value: usage(con, &value)?,
        value_encoding: encoding(con, &value)?,
        permits: usage(con, &permits)?,
        permits_encoding: encoding(con, &permits)?,
    })
}

/// One hot limiter, the config cache on and off: grants (a rate no run uses up, PRECISION
/// 60000 so the log stays one merged member a minute) and refusals (one permit a day, used).
fn hot_limiter(con: &mut Connection, plan: &Plan) -> Res<Hot> {
    let grant = "hot:grant";
    let refusal = "hot:refusal";
    let _: i64 = redis::cmd("RATELIMIT.SETRATE")
        .arg(grant)
        .arg(1_000_000_000)
        .arg(INTERVAL)
        .arg("PRECISION")
        .arg(INTERVAL)
        .query(con)?;
    let _: i64 = redis::cmd("RATELIMIT.SETRATE")
        .arg(refusal)
        .arg(1)
        .arg(86_400_000)
        .query(con)?;
    let first: Value = redis::cmd("RATELIMIT.TRYACQUIRE").arg(refusal).query(con)?;
    if first != Value::Nil {
        return Err(format!("hot refusal limiter: first call refused ({first:?})").into());
    }
    let mut ids = Ids::new(1);
    let grants: Vec<String> = vec![grant.to_string(); plan.calls];
    let refusals: Vec<String> = vec![refusal.to_string(); plan.calls];
    let mut measured: [Vec<f64>; 4] = Default::default();
    for _ in 0..plan.reps {
        measured[0].push(cpu_per_call(con, Call::TryAcquire, "", &grants, &mut ids)?);
        measured[1].push(cpu_per_call(
            con,
            Call::TryAcquireUncached,
            "",
            &grants,
            &mut ids,
        )?);
        measured[2].push(refused_cpu(con, &refusals, true)?);
        measured[3].push(refused_cpu(con, &refusals, false)?);
    }
    Ok(Hot {
        grant: (median(&measured[0]), median(&measured[1])),
        refusal: (median(&measured[2]), median(&measured[3])),
    })
}

/// CPU per refused TRYACQUIRE, every reply checked to be a wait.
fn refused_cpu(con: &mut Connection, names: &[String], cached: bool) -> Res<f64> {
    config_cache(con, cached)?;
    let _: () = redis::cmd("CONFIG").arg("RESETSTAT").query(con)?;
    for batch in names.chunks(BATCH) {
        let mut pipe = redis::pipe();
        for name in batch {
            pipe.cmd("RATELIMIT.TRYACQUIRE").arg(name);
        }
        let replies: Vec<Value> = pipe.query(con)?;
        if let Some(reply) = replies
            .iter()
            .find(|r| !matches!(r, Value::Int(ms) if *ms > 0))
        {
            return Err(format!("hot refusal: unexpected reply {reply:?}").into());
        }
    }
    let (calls, usec) = command_stats(con, "ratelimit.tryacquire")?;
    config_cache(con, true)?;
    if calls != names.len() as u64 {
        return Err(format!("hot refusal: {calls} calls counted, {} made", names.len()).into());
    }
    Ok(usec as f64 / calls as f64)
}

/// A burst of grants in one millisecond: the debug clock frozen, the module's limiter with
/// PRECISION 1 (the burst's grants merge into one member), the script on a limiter of its own
/// given the same instant; redis-benchmark, 50 clients, pipeline 16, alternating rounds.
fn burst(module: &Path, tool: &Path, plan: &Plan) -> Res<Burst> {
    print!("many: a burst in one millisecond ");
    flush();
    let server = server::start(module, &[], &SERVER_OPTIONS)?;
    let mut con = server::connect(&server)?;
    set_clock(&mut con, T0)?;
    let sha: String = redis::cmd("SCRIPT").arg("LOAD").arg(LUA).query(&mut con)?;
    let rate = 1_000_000_000i64;
    for (name, precision) in [("burst:module", Some(1)), ("burst:script", None)] {
        let mut cmd = redis::cmd("RATELIMIT.SETRATE");
        cmd.arg(name).arg(rate).arg(1000);
        if let Some(p) = precision {
            cmd.arg("PRECISION").arg(p);
        }
        let _: i64 = cmd.query(&mut con)?;
    }
    let module_cmd: Vec<String> = vec!["RATELIMIT.TRYACQUIRE".into(), "burst:module".into()];
    let mut script_cmd: Vec<String> = vec!["EVALSHA".into(), sha.clone(), "5".into()];
    script_cmd.extend(keys("burst:script"));
    // redis-benchmark repeats one command: one id for all of the script's grants, so its log
    // keeps one member too (the same work a merge does, with no id drawn).
    script_cmd.extend(["1".into(), T0.to_string(), "0123456789abcdef".into()]);
    let incr_cmd: Vec<String> = vec!["INCR".into(), "burst:counter".into()];
    let rounds = plan.reps;
    let (mut module_rps, mut script_rps, mut incr_rps) = (Vec::new(), Vec::new(), Vec::new());
    let (mut module_cpu, mut script_cpu, mut incr_cpu) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..rounds {
        for (command, rps, cpu, stat) in [
            (
                &module_cmd,
                &mut module_rps,
                &mut module_cpu,
                "ratelimit.tryacquire",
            ),
            (&script_cmd, &mut script_rps, &mut script_cpu, "evalsha"),
            (&incr_cmd, &mut incr_rps, &mut incr_cpu, "incr"),
        ] {
            let _: () = redis::cmd("CONFIG").arg("RESETSTAT").query(&mut con)?;
            rps.push(benchmark(tool, &server, command, plan.burst_requests)?);
            let (calls, usec) = command_stats(&mut con, stat)?;
            cpu.push(usec as f64 / calls.max(1) as f64);
        }
        print!(".");
        flush();
    }
    println!();
    // Every call was a grant: the values fell by exactly the calls made.
    for name in ["burst:module", "burst:script"] {
        let left: i64 = redis::cmd("RATELIMIT.AVAILABLE")
            .arg(name)
            .query(&mut con)?;
        let taken = (plan.burst_requests * rounds) as i64;
        if left != rate - taken {
            return Err(format!("{name}: {left} permits left, expected {}", rate - taken).into());
        }
    }
    server::stop(server);
    Ok(Burst {
        module_rps: median(&module_rps),
        script_rps: median(&script_rps),
        module_usec: median(&module_cpu),
        script_usec: median(&script_cpu),
        incr_rps: median(&incr_rps),
    })
}

/// redis-benchmark's requests per second for `command`, 50 clients, pipeline 16.
fn benchmark(
    tool: &Path,
    server: &server::Server,
    command: &[String],
    requests: usize,
) -> Res<f64> {
    let output = Command::new(tool)
        .args(["-h", "127.0.0.1", "-p", &server.port.to_string()])
        .args(["-c", "50", "-P", "16", "-n", &requests.to_string(), "--csv"])
        .args(command)
        .stderr(Stdio::null())
        .output()?;
    let text = String::from_utf8_lossy(&output.stdout);
    // "name","rps",...: the second field of the last line.
    text.lines()
        .last()
        .and_then(|l| l.split(',').nth(1))
        .and_then(|f| f.trim_matches('"').parse::<f64>().ok())
        .ok_or_else(|| format!("redis-benchmark printed no rate: {text}").into())
}

/// Instructions per call in the command on [`CALLGRIND_USERS`] users at random: TRYACQUIRE
/// with the config cache on and off, ALLOW and the script, each split by the module API
/// functions it calls (inclusive; the rest is the module's own code and the dispatcher).
fn breakdown(module: &Path, plan: &Plan) -> Res<Vec<Breakdown>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("bench/results/callgrind-many");
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir)?;
    print!("many: instructions per call under callgrind ... ");
    flush();
    let server = server::start(module, &callgrind::wrapper(&dir.join("callgrind.out")), &[])?;
    let pid = server.pid().to_string();
    let mut con = server::connect(&server)?;
    let sha: String = redis::cmd("SCRIPT").arg("LOAD").arg(LUA).query(&mut con)?;
    create(&mut con, 0, CALLGRIND_USERS, CALLGRIND_USERS)?;
    let mut ids = Ids::new(7);
    let phases = [
        Call::TryAcquire,
        Call::TryAcquireUncached,
        Call::Allow,
        Call::Script,
        Call::Burst,
        // Last: the keys it adds can grow the key table, and its rehashing would fall on the
        // lookups of whatever came next (it had doubled the burst's OpenKey).
        Call::FirstUse,
    ];
    let mut draw = Draw(0x5eed);
    for (p, &call) in phases.iter().enumerate() {
        let names: Vec<String> = if call == Call::FirstUse {
            (0..plan.callgrind_calls)
                .map(|i| format!("cg:{i}"))
                .collect()
        } else if call == Call::Burst {
            // The clock frozen (until the phase ends). The warm calls log the entry the others
            // merge into, and bring the config cache back into use (the primer's calls at
            // random took it out; two windows of 1 024 calls that come back put them in).
            set_clock(&mut con, T0)?;
            let _: i64 = redis::cmd("RATELIMIT.SETRATE")
                .arg("burst")
                .arg(1_000_000_000)
                .arg(1000)
                .arg("PRECISION")
                .arg(1)
                .query(&mut con)?;
            drive(
                &mut con,
                call,
                &sha,
                &vec!["burst".to_string(); 4_000],
                &mut ids,
            )?;
            vec!["burst".to_string(); plan.callgrind_calls]
        } else {
            (0..plan.callgrind_calls)
                .map(|_| user(draw.next(CALLGRIND_USERS)))
                .collect()
        };
        config_cache(&mut con, call != Call::TryAcquireUncached)?;
        if call != Call::Burst {
            // The config cache as in the CPU phases: a steady stream of calls, not a table
            // just emptied by the toggle.
            let primer: Vec<String> = (0..PRIMER)
                .map(|_| user(draw.next(CALLGRIND_USERS)))
                .collect();
            available(&mut con, &primer)?;
        }
        control(&pid, &["-i", "on"])?;
        let _: String = redis::cmd("PING").query(&mut con)?;
        control(&pid, &["-z"])?;
        drive(&mut con, call, &sha, &names, &mut ids)?;
        control(&pid, &[&format!("--dump=p{p}")])?;
        control(&pid, &["-i", "off"])?;
        if call == Call::Burst {
            let _: () = redis::cmd("RATELIMIT.DEBUG")
                .arg("REALCLOCK")
                .query(&mut con)?;
        }
    }
    config_cache(&mut con, true)?;
    server::stop(server);
    thread::sleep(Duration::from_millis(200));
    let dumps: Vec<Dump> = dump_files(&dir)?
        .iter()
        .map(|f| fs::read_to_string(f).map(|t| Dump::parse(&t)))
        .collect::<Result<_, _>>()?;
    let mut out = Vec::new();
    for (p, &call) in phases.iter().enumerate() {
        let trigger = format!("p{p}");
        let proc_name = if call == Call::Script {
            "evalShaCommand"
        } else {
            MODULE_PROC
        };
        let (dump, calls, total) =
            top_level_calls(&dumps, &trigger, proc_name, plan.callgrind_calls)?;
        let per_call = |n: u64| n as f64 / calls as f64;
        let mut parts = Vec::new();
        if call != Call::Script {
            // Every module API function the module called, from outside the API only, so that
            // nested API calls count once; the biggest first.
            let mut api: BTreeMap<&str, u64> = BTreeMap::new();
            for ((caller, callee), (_, cost)) in &dump.edges {
                if is_module_api(callee) && !is_module_api(caller) {
                    *api.entry(callee.as_str()).or_default() += cost;
                }
            }
            let mut api: Vec<(&str, u64)> = api.into_iter().collect();
            api.sort_by_key(|&(_, cost)| std::cmp::Reverse(cost));
            parts = api
                .into_iter()
                .map(|(name, cost)| (name.to_string(), per_call(cost)))
                .filter(|(_, n)| *n >= 50.0)
                .collect();
        }
        out.push(Breakdown {
            label: call.label().to_string(),
            total: per_call(total),
            parts,
        });
    }
    println!("done");
    Ok(out)
}

fn ratio(a: f64, b: f64) -> String {
    if b > 0.0 && a.is_finite() && b.is_finite() {
        format!("{:.2}x", a / b)
    } else {
        "-".into()
    }
}

/// The targets on this many users (the middle size of a full run).
const TARGET_SIZE: usize = 200_000;

impl Report {
    pub fn table(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "Many limiters: server CPU per call, usec (INFO commandstats; medians of {} rounds \
             of {} calls, users at random; every call a grant)",
            self.reps, self.calls_per_rep
        );
        let _ = writeln!(
            s,
            "{:>10} {:>10} {:>10} {:>8} {:>8} {:>10} {:>11} {:>10} {:>9} {:>9}",
            "limiters",
            "tryacq.",
            "allow",
            "script",
            "first",
            "cache-off",
            "script/try",
            "script/all",
            "first/all",
            "on/off"
        );
        for size in &self.sizes {
            let (t, a, l, f, u) = size.medians();
            let _ = writeln!(
                s,
                "{:>10} {t:>10.2} {a:>10.2} {l:>8.2} {f:>8.2} {u:>10.2} {:>11} {:>10} {:>9} {:>8.2}x",
                size.limiters,
                ratio(l, t),
                ratio(l, a),
                ratio(f, a),
                size.cache_cost(),
            );
        }
        let _ = writeln!(
            s,
            "(on/off: the median of each round's ratio of tryacquire to cache-off, run back to back)"
        );
        let h = &self.hot;
        let _ = writeln!(
            s,
            "\nOne hot limiter, TRYACQUIRE: grant {:.2} usec (config-cache no {:.2}, {}), \
             refusal {:.2} usec (config-cache no {:.2}, {})",
            h.grant.0,
            h.grant.1,
            ratio(h.grant.0, h.grant.1),
            h.refusal.0,
            h.refusal.1,
            ratio(h.refusal.0, h.refusal.1)
        );
        if let Some(b) = &self.burst {
            let _ = writeln!(
                s,
                "\nA burst in one millisecond (redis-benchmark -c 50 -P 16): module {:.0} req/s \
                 ({:.2} usec/call), script {:.0} req/s ({:.2} usec/call): {} the throughput \
                 ({} the CPU); INCR {:.0} req/s, so no command can reach more than {} here",
                b.module_rps,
                b.module_usec,
                b.script_rps,
                b.script_usec,
                ratio(b.module_rps, b.script_rps),
                ratio(b.script_usec, b.module_usec),
                b.incr_rps,
                ratio(b.incr_rps, b.script_rps)
            );
        }
        let p = &self.parts;
        let _ = writeln!(
            s,
            "\nMemory per limiter after its first grant: hash {} B ({}, {} fields), value {} B \
             ({}), permits {} B ({}): {} B of MEMORY USAGE",
            p.hash,
            p.hash_encoding,
            p.hash_fields,
            p.value,
            p.value_encoding,
            p.permits,
            p.permits_encoding,
            p.hash + p.value + p.permits
        );
        for size in &self.sizes {
            let _ = writeln!(
                s,
                "  used_memory grown per limiter over {} limiters: {:.0} B",
                size.limiters, size.bytes_per_limiter
            );
        }
        match &self.breakdown {
            Ok(rows) => {
                let _ = writeln!(
                    s,
                    "\nInstructions per call in the command (callgrind, {CALLGRIND_USERS} users \
                     at random), and the module API calls among them:"
                );
                for row in rows {
                    let _ = write!(s, "{:<28} {:>8.0}", row.label, row.total);
                    let api: f64 = row.parts.iter().map(|(_, n)| n).sum();
                    if !row.parts.is_empty() {
                        let _ = write!(s, "  module's own {:.0};", row.total - api);
                    }
                    for (name, n) in &row.parts {
                        let _ = write!(
                            s,
                            " {} {n:.0}",
                            name.trim_start_matches("RM_").trim_start_matches("VM_")
                        );
                    }
                    let _ = writeln!(s);
                }
                // CPU time at a few percent is within the noise of a busy machine; the
                // instruction count is not.
                let total = |call: Call| {
                    rows.iter()
                        .find(|row| row.label == call.label())
                        .map(|row| row.total)
                };
                if let (Some(on), Some(off)) =
                    (total(Call::TryAcquire), total(Call::TryAcquireUncached))
                {
                    let _ = writeln!(
                        s,
                        "config cache: {} the instructions of none",
                        ratio(on, off)
                    );
                }
            }
            Err(why) => {
                let _ = writeln!(s, "\nInstructions per call: skipped, {why}");
            }
        }
        s.push_str(&targets_line(&self.targets()));
        s
    }

    /// The targets: on 200 000 users, TRYACQUIRE and ALLOW at least 3.5x below the script and
    /// first use at most 2x a grant; the config cache never more than 1.05x of none, at any
    /// size, and on the hot limiter at most 0.8x of none on a grant and 0.7x on a refusal; a
    /// burst at least 4x the script's throughput.
    fn targets(&self) -> Vec<String> {
        let mut out = Vec::new();
        let mut check = |label: String, ok: bool| out.push(verdict(label, ok));
        for size in &self.sizes {
            let (t, a, l, f, _) = size.medians();
            if size.limiters == TARGET_SIZE {
                check(
                    format!(
                        "{}: tryacquire >= 3.5x below the script ({})",
                        size.limiters,
                        ratio(l, t)
                    ),
                    l >= 3.5 * t,
                );
                check(
                    format!(
                        "{}: allow >= 3.5x below the script ({})",
                        size.limiters,
                        ratio(l, a)
                    ),
                    l >= 3.5 * a,
                );
                check(
                    format!(
                        "{}: first use <= 2x a grant ({})",
                        size.limiters,
                        ratio(f, a)
                    ),
                    f <= 2.0 * a,
                );
            }
            let cost = size.cache_cost();
            check(
                format!(
                    "{}: config cache <= 1.05x of none ({cost:.2}x)",
                    size.limiters,
                ),
                cost <= 1.05,
            );
        }
        let (on, off) = self.hot.grant;
        check(
            format!(
                "hot grant: config cache <= 0.8x of none ({})",
                ratio(on, off)
            ),
            on <= 0.8 * off,
        );
        let (on, off) = self.hot.refusal;
        check(
            format!(
                "hot refusal: config cache <= 0.7x of none ({})",
                ratio(on, off)
            ),
            on <= 0.7 * off,
        );
        if let Some(b) = &self.burst {
            check(
                format!(
                    "burst: >= 4x the script's throughput ({})",
                    ratio(b.module_rps, b.script_rps)
                ),
                b.module_rps >= 4.0 * b.script_rps,
            );
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
