//! Instructions per call under valgrind's callgrind, phase by phase, counted inside the
//! measured command only (bench/README.md, "Instructions per call").
//!
//! The server runs under `valgrind --tool=callgrind --separate-callers1=call` with
//! instrumentation off during setup. For each phase the counters are zeroed, `calls` pipelined
//! calls are driven, and callgrind dumps. From each dump:
//!
//! - **in the command**: the inclusive count of the call edge from `call'processCommand` (Redis's
//!   `call()` as `processCommand` runs it, i.e. a top-level command; `--separate-callers1=call`
//!   gives it a context of its own) to the command's proc: `RedisModuleCommandDispatcher` for a
//!   module command (the module's handler, the module API calls it makes, replies into the
//!   client buffer, effects handed to `alsoPropagate`), `evalShaCommand` for the script (the Lua
//!   VM and every `redis.call` with its own `call()`), `incrCommand`. The edge's call count is
//!   checked to be exactly the phase's calls: nothing else ran as that command at top level.
//!   The grant phase moves the module's clock with `RATELIMIT.DEBUG ADVANCE 1` inside
//!   `MULTI`/`EXEC`, so the server runs it from `execCommand` (context `call'2'execCommand`), not
//!   from `processCommand`: it is not in the count. Not counted, for any command alike: reading
//!   and parsing the request, `call()`'s own bookkeeping (stats, slowlog), propagating the
//!   effects after the proc returns, writing the reply to the socket;
//! - **whole server**: every instruction in the dump (both of the above, the event loop, the
//!   cron, and in the module's grant phase the `MULTI`/`ADVANCE`/`EXEC` around each call), per
//!   call.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::thread;
use std::time::Duration;

use serde::Serialize;

use crate::calls::{
    incrs, lua_grants, lua_refusals, module_grants, module_grants_from, module_refusals_from,
    Advance, LUA,
};
use crate::cell;
use crate::limiter::{fill_window, set_clock, Ids};
use crate::report::round;
use crate::server::{self, which};
use crate::{flush, Res, T0};

/// What `make bench` measures: the steady 1 000-entry window, 2 000 calls per phase.
pub const WINDOW: i64 = 1_000;
pub const CALLS: usize = 2_000;

/// The caller context whose call edges are the top-level commands.
pub(crate) const TOP_LEVEL: &str = "call'processCommand";
pub(crate) const MODULE_PROC: &str = "RedisModuleCommandDispatcher";
/// Valkey's name for it.
const VALKEY_MODULE_PROC: &str = "ValkeyModuleCommandDispatcher";

/// Whether a function is one of the module API's: callgrind names them `RM_*` in Redis and
/// `VM_*` in Valkey.
pub(crate) fn is_module_api(function: &str) -> bool {
    function.starts_with("RM_") || function.starts_with("VM_")
}

/// The phases, in the order they run.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Kind {
    ModuleGrant,
    LuaGrant,
    Incr,
    ModuleRefusal,
    LuaRefusal,
    CellAllowed,
    CellRefused,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::ModuleGrant => "module-grant",
            Kind::LuaGrant => "lua-grant",
            Kind::Incr => "incr",
            Kind::ModuleRefusal => "module-refusal",
            Kind::LuaRefusal => "lua-refusal",
            Kind::CellAllowed => "cell-allowed",
            Kind::CellRefused => "cell-refused",
        }
    }

    /// The command's proc, as `call()` invokes it.
    fn proc_name(self) -> &'static str {
        match self {
            Kind::LuaGrant | Kind::LuaRefusal => "evalShaCommand",
            Kind::Incr => "incrCommand",
            _ => MODULE_PROC,
        }
    }
}

/// One phase's counts: instructions over all its calls.
pub struct Phase {
    pub kind: Kind,
    pub in_command: u64,
    pub whole_server: u64,
}

/// The counts of one run.
pub struct Instructions {
    pub window: i64,
    pub calls: usize,
    pub phases: Vec<Phase>,
    /// Where the dumps are (callgrind_annotate reads them).
    pub dumps: Vec<(Kind, PathBuf)>,
}

/// `make bench`'s callgrind section: measured, or why not.
pub enum Section {
    Measured(Instructions),
    Skipped(String),
}

impl Instructions {
    /// In-command instructions per call of a phase, if it ran.
    pub fn in_command(&self, kind: Kind) -> Option<f64> {
        self.phase(kind)
            .map(|p| p.in_command as f64 / self.calls as f64)
    }

    pub fn whole_server(&self, kind: Kind) -> Option<f64> {
        self.phase(kind)
            .map(|p| p.whole_server as f64 / self.calls as f64)
    }

    fn phase(&self, kind: Kind) -> Option<&Phase> {
        self.phases.iter().find(|p| p.kind == kind)
    }

    /// Lua's in-command count over the module's, on the grant or the refusal path.
    pub fn lua_over_module(&self, grant: bool) -> Option<f64> {
        let (m, l) = if grant {
            (Kind::ModuleGrant, Kind::LuaGrant)
        } else {
            (Kind::ModuleRefusal, Kind::LuaRefusal)
        };
        Some(self.in_command(l)? / self.in_command(m)?)
    }

    pub fn table(&self) -> String {
        let mut s = String::new();
        let cell = self.phase(Kind::CellAllowed).is_some();
        let _ = writeln!(
            s,
            "Instructions per call (valgrind callgrind; window {}, {} calls per phase). In command:\n\
             inclusive count of the command's proc run by call() at top level (module:\n\
             RedisModuleCommandDispatcher, lua: evalShaCommand, incr: incrCommand), exactly the\n\
             measured calls; whole server: everything the server ran in the phase / calls",
            self.window, self.calls
        );
        let _ = write!(
            s,
            "{:<24} {:>10} {:>10} {:>10}",
            "path", "module", "lua", "incr"
        );
        if cell {
            let _ = write!(s, " {:>12}", "cl.throttle");
        }
        let _ = writeln!(s, " {:>11}", "lua/module");
        let rows = [
            ("grant, in command", true, true),
            ("refusal, in command", false, true),
            ("grant, whole server", true, false),
            ("refusal, whole server", false, false),
        ];
        for (label, grant, inside) in rows {
            let count = |kind: Kind| {
                if inside {
                    self.in_command(kind)
                } else {
                    self.whole_server(kind)
                }
            };
            let (m, l, c) = if grant {
                (Kind::ModuleGrant, Kind::LuaGrant, Kind::CellAllowed)
            } else {
                (Kind::ModuleRefusal, Kind::LuaRefusal, Kind::CellRefused)
            };
            let (m, l) = (count(m), count(l));
            let _ = write!(
                s,
                "{:<24} {:>10} {:>10} {:>10}",
                label,
                show(m),
                show(l),
                show(count(Kind::Incr))
            );
            if cell {
                let _ = write!(s, " {:>12}", show(count(c)));
            }
            let ratio = match (l, m) {
                (Some(l), Some(m)) => format!("{:.1}x", l / m),
                _ => "-".into(),
            };
            let _ = writeln!(s, " {ratio:>11}");
        }
        if cell {
            let _ = writeln!(
                s,
                "(cl.throttle: grant = allowed, refusal = refused; see bench/README.md for its setup)"
            );
        }
        s
    }

    pub fn json(&self) -> InstructionsJson {
        InstructionsJson {
            tool: "valgrind --tool=callgrind --separate-callers1=call",
            window: self.window,
            calls_per_phase: self.calls,
            in_command: "inclusive instructions of the call edge call'processCommand -> the command's proc (RedisModuleCommandDispatcher, evalShaCommand, incrCommand), per call",
            whole_server: "every instruction of the phase, per call",
            phases: self
                .phases
                .iter()
                .map(|p| PhaseJson {
                    phase: p.kind.name(),
                    command_proc: p.kind.proc_name(),
                    in_command: round(p.in_command as f64 / self.calls as f64, 0),
                    whole_server: round(p.whole_server as f64 / self.calls as f64, 0),
                })
                .collect(),
            grant_lua_over_module: self.lua_over_module(true).map(|r| round(r, 3)),
            refusal_lua_over_module: self.lua_over_module(false).map(|r| round(r, 3)),
        }
    }
}

fn show(count: Option<f64>) -> String {
    count.map_or("-".into(), |c| format!("{c:.0}"))
}

#[derive(Serialize)]
pub struct InstructionsJson {
    tool: &'static str,
    window: i64,
    calls_per_phase: usize,
    in_command: &'static str,
    whole_server: &'static str,
    phases: Vec<PhaseJson>,
    grant_lua_over_module: Option<f64>,
    refusal_lua_over_module: Option<f64>,
}

#[derive(Serialize)]
struct PhaseJson {
    phase: &'static str,
    command_proc: &'static str,
    in_command: f64,
    whole_server: f64,
}

/// The tools a run needs, and the first one missing.
pub fn missing_tool() -> Option<&'static str> {
    ["valgrind", "callgrind_control"]
        .into_iter()
        .find(|tool| which(tool).is_none())
}

/// Where the dumps go: bench/results/callgrind/, emptied first.
fn dump_dir() -> Res<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("bench/results/callgrind");
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir)?;
    Ok(dir)
}

/// `make bench`'s section: [`run`] on [`WINDOW`] with [`CALLS`] calls, or skipped (and said
/// so) when valgrind is not installed or the run fails (e.g. a server whose functions are named
/// otherwise): the rest of the run's results are kept either way.
pub fn section(module: &Path, cell: Option<&Path>) -> Section {
    let why = match missing_tool() {
        Some(tool) => format!("{tool} not found (Debian: apt-get install valgrind)"),
        None => match run(module, cell, WINDOW, CALLS) {
            Ok(counts) => return Section::Measured(counts),
            Err(e) => format!("the callgrind run failed: {e}"),
        },
    };
    println!("instructions per call: skipped, {why}");
    Section::Skipped(why)
}

/// Starts redis-server under callgrind (with redis-cell too if `cell` is given), fills a full
/// `window`, warms every path up, then runs the phases and reads their dumps.
pub fn run(module: &Path, cell: Option<&Path>, window: i64, calls: usize) -> Res<Instructions> {
    let dir = dump_dir()?;
    let out_file = dir.join("callgrind.out");
    let wrapper = wrapper(&out_file);
    let cell_args = cell.map(cell::load_args);
    let extra: Vec<&str> = cell_args
        .iter()
        .flat_map(|a| a.iter().map(String::as_str))
        .collect();
    print!("instructions per call: starting redis-server under callgrind ... ");
    flush();
    let server = server::start_after(&extra, module, &wrapper, &[])?;
    let pid = server.pid().to_string();
    let mut con = server::connect(&server)?;
    set_clock(&mut con, T0)?;
    let mut clock = T0;
    let sha: String = redis::cmd("SCRIPT").arg("LOAD").arg(LUA).query(&mut con)?;
    let mut ids = Ids::new(0x5eed);
    let name = format!("bench:w{window}");
    fill_window(&mut con, &name, window, clock, &mut ids)?;
    module_grants(&mut con, &name, 200, &mut clock)?;
    lua_grants(&mut con, &sha, &name, 200, &mut clock, &mut ids)?;
    incrs(&mut con, 200)?;
    if cell.is_some() {
        cell::prepare(&mut con)?;
    }
    control(&pid, &["-i", "on"])?;
    print!("phases ");
    flush();
    let mut kinds = vec![
        Kind::ModuleGrant,
        Kind::LuaGrant,
        Kind::Incr,
        Kind::ModuleRefusal,
        Kind::LuaRefusal,
    ];
    if cell.is_some() {
        kinds.extend([Kind::CellAllowed, Kind::CellRefused]);
    }
    for &kind in &kinds {
        // Setup of the phase first (it must not count), then a PING so the zeroing lands while
        // the server is idle between commands.
        if matches!(kind, Kind::ModuleGrant | Kind::ModuleRefusal) {
            set_clock(&mut con, clock)?;
        }
        let _: String = redis::cmd("PING").query(&mut con)?;
        control(&pid, &["-z"])?;
        match kind {
            Kind::ModuleGrant => {
                module_grants_from(&mut con, &name, calls, &mut clock, Advance::InMulti)?
            }
            Kind::LuaGrant => lua_grants(&mut con, &sha, &name, calls, &mut clock, &mut ids)?,
            Kind::Incr => incrs(&mut con, calls)?,
            Kind::ModuleRefusal => module_refusals_from(&mut con, &name, calls)?,
            Kind::LuaRefusal => lua_refusals(&mut con, &sha, &name, calls, clock)?,
            Kind::CellAllowed => cell::calls(&mut con, &cell::ALLOWED, calls, false)?,
            Kind::CellRefused => cell::calls(&mut con, &cell::REFUSED, calls, true)?,
        }
        control(&pid, &[&format!("--dump={}", kind.name())])?;
        print!("{} ", kind.name());
        flush();
    }
    server::stop(server);
    thread::sleep(Duration::from_millis(200));
    let mut phases = Vec::new();
    let mut dumps = Vec::new();
    for file in dump_files(&dir)? {
        let dump = Dump::parse(&fs::read_to_string(&file)?);
        let Some(kind) = kinds.iter().copied().find(|k| dump.trigger == k.name()) else {
            continue;
        };
        let (edge_calls, in_command) = dump
            .edges
            .get(&(TOP_LEVEL.to_string(), kind.proc_name().to_string()))
            .copied()
            .unwrap_or((0, 0));
        if edge_calls != calls as u64 {
            return Err(format!(
                "{}: {edge_calls} calls of {TOP_LEVEL} -> {} in {}, expected exactly {calls}",
                kind.name(),
                kind.proc_name(),
                file.display()
            )
            .into());
        }
        phases.push(Phase {
            kind,
            in_command,
            whole_server: dump.total,
        });
        dumps.push((kind, file));
    }
    if let Some(kind) = kinds.iter().find(|k| !phases.iter().any(|p| p.kind == **k)) {
        return Err(format!("no callgrind dump for phase {}", kind.name()).into());
    }
    phases.sort_by_key(|p| kinds.iter().position(|k| *k == p.kind));
    println!("done");
    Ok(Instructions {
        window,
        calls,
        phases,
        dumps,
    })
}

/// valgrind's command line for a server whose dumps go to `out_file`.N.
pub(crate) fn wrapper(out_file: &Path) -> Vec<String> {
    vec![
        "valgrind".to_string(),
        "--tool=callgrind".into(),
        "--instr-atstart=no".into(),
        // `call` gets one context per caller: top-level commands (from processCommand) apart
        // from those run by EXEC, a script or RM_Call.
        "--separate-callers1=call".into(),
        // Every name and position in full, so the dumps parse line by line.
        "--compress-strings=no".into(),
        "--compress-pos=no".into(),
        format!("--callgrind-out-file={}", out_file.display()),
    ]
}

/// The dumps callgrind wrote (`callgrind.out.N`), in order.
pub(crate) fn dump_files(dir: &Path) -> Res<Vec<PathBuf>> {
    let mut files: Vec<PathBuf> = fs::read_dir(dir)?
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
    Ok(files)
}

/// What one dump says: its trigger (the phase name given to `--dump=`), its total instruction
/// count, and per call edge (caller, callee) the calls and their inclusive instructions.
pub(crate) struct Dump {
    pub trigger: String,
    pub total: u64,
    pub edges: HashMap<(String, String), (u64, u64)>,
}

impl Dump {
    /// Reads callgrind's format as written with `--compress-strings=no --compress-pos=no` and
    /// the one event (Ir): `fn=` names the function whose lines follow, `cfn=` the callee of the
    /// next `calls=<count> <target>` line, and the line after that holds `<position> <inclusive
    /// Ir>` of those calls.
    pub(crate) fn parse(text: &str) -> Dump {
        let mut dump = Dump {
            trigger: String::new(),
            total: 0,
            edges: HashMap::new(),
        };
        let (mut current, mut callee) = (String::new(), String::new());
        let mut pending_calls: Option<u64> = None;
        for line in text.lines() {
            if let Some(calls) = pending_calls.take() {
                let cost = line
                    .split_whitespace()
                    .nth(1)
                    .and_then(|c| c.parse::<u64>().ok())
                    .unwrap_or(0);
                let edge = dump
                    .edges
                    .entry((current.clone(), callee.clone()))
                    .or_default();
                edge.0 += calls;
                edge.1 += cost;
            } else if let Some(name) = line.strip_prefix("fn=") {
                current = name.to_string();
            } else if let Some(name) = line.strip_prefix("cfn=") {
                callee = name.to_string();
            } else if let Some(rest) = line.strip_prefix("calls=") {
                pending_calls = rest.split_whitespace().next().and_then(|c| c.parse().ok());
            } else if let Some(trigger) = line.strip_prefix("desc: Trigger: dump ") {
                dump.trigger = trigger.trim().to_string();
            } else if let Some(total) = line
                .strip_prefix("summary: ")
                .or_else(|| line.strip_prefix("totals: "))
            {
                if dump.total == 0 {
                    dump.total = total.trim().parse().unwrap_or(0);
                }
            }
        }
        dump
    }
}

/// The phase dumped as `trigger`: the calls of the top-level edge to `proc_name` (which must be
/// exactly `expected`) and their inclusive instructions.
pub(crate) fn top_level_calls<'d>(
    dumps: &'d [Dump],
    trigger: &str,
    proc_name: &str,
    expected: usize,
) -> Res<(&'d Dump, u64, u64)> {
    let dump = dumps
        .iter()
        .find(|d| d.trigger == trigger)
        .ok_or_else(|| format!("no callgrind dump {trigger}"))?;
    let edge = |proc_name: &str| {
        dump.edges
            .get(&(TOP_LEVEL.to_string(), proc_name.to_string()))
            .copied()
    };
    let (calls, total) = edge(proc_name)
        .or_else(|| {
            (proc_name == MODULE_PROC)
                .then(|| edge(VALKEY_MODULE_PROC))
                .flatten()
        })
        .unwrap_or((0, 0));
    if calls != expected as u64 {
        return Err(format!(
            "{trigger}: {calls} calls of {TOP_LEVEL} -> {proc_name}, expected {expected}"
        )
        .into());
    }
    Ok((dump, calls, total))
}

/// Runs `callgrind_control <args> <pid>`: it waits until the running server has done it.
pub(crate) fn control(pid: &str, args: &[&str]) -> Res<()> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_edges_totals_and_trigger() {
        let text = "desc: Trigger: dump module-grant\nsummary: 1000\n\
                    fn=call'processCommand\n0 5\ncfn=RedisModuleCommandDispatcher\ncalls=2 0\n0 300\n\
                    cfn=incrCommand\ncalls=1 0\n0 10\ncfn=RedisModuleCommandDispatcher\ncalls=1 0\n0 7\n\
                    fn=execCommand\ncfn=RedisModuleCommandDispatcher\ncalls=4 0\n0 99\ntotals: 1001\n";
        let dump = Dump::parse(text);
        assert_eq!(dump.trigger, "module-grant");
        assert_eq!(dump.total, 1000);
        let edge = |a: &str, b: &str| dump.edges.get(&(a.to_string(), b.to_string())).copied();
        assert_eq!(edge(TOP_LEVEL, MODULE_PROC), Some((3, 307)));
        assert_eq!(edge(TOP_LEVEL, "incrCommand"), Some((1, 10)));
        assert_eq!(edge("execCommand", MODULE_PROC), Some((4, 99)));
    }
}
