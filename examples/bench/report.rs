//! The report: the tables printed and saved as text, the targets, and the JSON (serde views of
//! the results, with values rounded as the tables print them), written to bench/results/.

use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::callgrind::{InstructionsJson, Kind, Section};
use crate::machine::Machine;
use crate::measure::{Cpu, WindowResult};
use crate::memory::{self, Memory};
use crate::throughput::{Throughput, CLIENTS, THROUGHPUT_WINDOW};
use crate::worst::{Worst, WorstJson};
use crate::{Plan, Res};

/// One target of a section (`--gcra`, `--many`), held or missed, as its report lists it.
pub(crate) fn verdict(label: String, held: bool) -> String {
    format!("[{}] {label}", if held { "ok" } else { "MISS" })
}

/// A section report's last line: its targets' verdicts, if it has any.
pub(crate) fn targets_line(verdicts: &[String]) -> String {
    if verdicts.is_empty() {
        String::new()
    } else {
        format!("\nTargets: {}\n", verdicts.join("; "))
    }
}

/// A full run.
pub struct Report {
    pub machine: Machine,
    pub plan: Plan,
    pub windows: Vec<WindowResult>,
    pub incr: Cpu,
    pub throughput: Option<Throughput>,
    /// Instructions per call under callgrind, or why not.
    pub instructions: Section,
    /// The redis-cell build measured beside the module (`$REDIS_CELL`), if any.
    pub cell: Option<PathBuf>,
    pub worst: Worst,
    pub memory: Memory,
    /// Share of all CPUs used by other processes just before and during the run.
    pub busy: (Option<f64>, Option<f64>),
    pub seconds: f64,
}

/// One of the project's performance targets, and whether this run met it (`None`: this run
/// could not measure it).
#[derive(Serialize)]
struct Target {
    #[serde(rename = "target")]
    name: String,
    wanted: String,
    measured: String,
    holds: Option<bool>,
}

/// The window the targets name: "the steady 1k window".
const TARGET_WINDOW: i64 = 1_000;
/// Lua/module at least this, on the steady 1k window (CPU per call and instructions).
const TARGET_RATIO: f64 = 5.0;
/// Instructions per refusal, in the command, at most this.
const TARGET_REFUSAL_INSTRUCTIONS: f64 = 8_000.0;

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
                holds: Some(ratio >= 10.0),
            });
        }
        let one_k = self.windows.iter().find(|w| w.window == TARGET_WINDOW);
        if let Some(w) = one_k {
            let (m, l) = (w.module_grant.median(), w.lua_grant.median());
            out.push(Target {
                name: "CPU/call, steady 1k window: Lua/module >= 5".into(),
                wanted: format!("Lua/module >= {TARGET_RATIO:.0}"),
                measured: format!("{:.1}x ({m:.2} vs {l:.2} usec)", l / m),
                holds: Some(l / m >= TARGET_RATIO),
            });
        }
        let (grant_name, refusal_name) = (
            "instructions, grant on the 1k window: Lua/module >= 5",
            "instructions per refusal <= 8000",
        );
        match &self.instructions {
            Section::Measured(counts) if counts.window == TARGET_WINDOW => {
                let (m, l) = (
                    counts.in_command(Kind::ModuleGrant),
                    counts.in_command(Kind::LuaGrant),
                );
                if let (Some(m), Some(l)) = (m, l) {
                    out.push(Target {
                        name: grant_name.into(),
                        wanted: format!("Lua/module >= {TARGET_RATIO:.0}"),
                        measured: format!("{:.1}x ({m:.0} vs {l:.0}, in command)", l / m),
                        holds: Some(l / m >= TARGET_RATIO),
                    });
                }
                if let Some(r) = counts.in_command(Kind::ModuleRefusal) {
                    out.push(Target {
                        name: refusal_name.into(),
                        wanted: format!("<= {TARGET_REFUSAL_INSTRUCTIONS:.0}"),
                        measured: format!("{r:.0} (in command)"),
                        holds: Some(r <= TARGET_REFUSAL_INSTRUCTIONS),
                    });
                }
            }
            Section::Measured(_) => {}
            Section::Skipped(why) => {
                for (name, wanted) in [
                    (grant_name, format!("Lua/module >= {TARGET_RATIO:.0}")),
                    (refusal_name, format!("<= {TARGET_REFUSAL_INSTRUCTIONS:.0}")),
                ] {
                    out.push(Target {
                        name: name.into(),
                        wanted,
                        measured: format!("not measured: {why}"),
                        holds: None,
                    });
                }
            }
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
                holds: Some(ratio <= 1.5),
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
                    holds: Some(over_lua >= 4.0),
                });
                out.push(Target {
                    name: "throughput, pipeline 16: module >= 1/2 INCR".into(),
                    wanted: ">= 0.50x".into(),
                    measured: format!("{over_incr:.2}x"),
                    holds: Some(over_incr >= 0.5),
                });
            }
        }
        out
    }

    pub fn table(&self) -> String {
        let mut s = String::new();
        let p = &self.plan;
        let incr = self.incr.median();
        let _ = writeln!(
            s,
            "Server CPU per call, usec (INFO commandstats usec/calls after CONFIG RESETSTAT;\n\
             median of {} reps x {} calls; window = entries logged = rate = interval ms)",
            p.reps, p.calls
        );
        let cell = self.cell.is_some();
        let _ = write!(
            s,
            "{:<16} {:>9} {:>9} {:>9} {:>9}",
            "path", "window", "module", "lua", "incr"
        );
        if cell {
            let _ = write!(s, " {:>12}", "cl.throttle");
        }
        let _ = writeln!(s, " {:>11} {:>12}", "lua/module", "module/incr");
        for (label, pick) in [("grant (steady)", 0usize), ("refusal (full)", 1usize)] {
            for w in &self.windows {
                let (m, l, c) = if pick == 0 {
                    (
                        w.module_grant.median(),
                        w.lua_grant.median(),
                        w.cell_grant.median(),
                    )
                } else {
                    (
                        w.module_refuse.median(),
                        w.lua_refuse.median(),
                        w.cell_refuse.median(),
                    )
                };
                let _ = write!(
                    s,
                    "{:<16} {:>9} {:>9.2} {:>9.2} {:>9.2}",
                    label, w.window, m, l, incr
                );
                if cell {
                    let _ = write!(s, " {c:>12.2}");
                }
                let _ = writeln!(s, " {:>10.1}x {:>11.2}x", l / m, m / incr);
            }
        }
        if cell {
            let _ = writeln!(
                s,
                "(cl.throttle: redis-cell, no window; grant rows = its allowed path, refusal rows =\n\
                 its refused path, measured in the same reps as each window's)"
            );
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
        match &self.instructions {
            Section::Measured(counts) => {
                let _ = write!(s, "\n{}", counts.table());
            }
            Section::Skipped(why) => {
                let _ = writeln!(s, "\nInstructions per call (callgrind): skipped, {why}");
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
            let _ = write!(
                s,
                "{:<9} {:>9} {:>12} {:>12} {:>12}",
                "pipeline", "requests", "module", "lua", "incr"
            );
            if cell {
                let _ = write!(s, " {:>12}", "cl.throttle");
            }
            let _ = writeln!(s, " {:>11} {:>12}", "module/lua", "module/incr");
            for &pipeline in t.rps.keys() {
                let _ = write!(
                    s,
                    "{:<9} {:>9} {:>12.0} {:>12.0} {:>12.0}",
                    pipeline,
                    t.requests[&pipeline],
                    t.median(pipeline, "module"),
                    t.median(pipeline, "lua"),
                    t.median(pipeline, "incr"),
                );
                if cell {
                    let _ = write!(s, " {:>12.0}", t.median(pipeline, "cl.throttle"));
                }
                let _ = writeln!(
                    s,
                    " {:>10.2}x {:>11.2}x",
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
                "  [{}] {:<53} want {:<17} got {}",
                match t.holds {
                    Some(true) => "ok  ",
                    Some(false) => "MISS",
                    None => "n/a ",
                },
                t.name,
                t.wanted,
                t.measured
            );
        }
        let _ = writeln!(
            s,
            "\nMachine: {} CPUs, {}; {}; source {}; {}run took {:.0}s; \
             CPU used by other processes before/during the run: {} / {}",
            self.machine.cpus,
            self.machine.cpu_model,
            self.machine.redis_version,
            self.machine.source,
            self.cell
                .as_ref()
                .map_or(String::new(), |p| format!("redis-cell {}; ", p.display())),
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
        s.push('\n');
        s.push_str(&self.memory.table());
        s
    }

    pub fn json(&self) -> String {
        let incr = self.incr.median();
        let windows = self
            .windows
            .iter()
            .map(|w| {
                let (mg, lg, mr, lr) = (
                    w.module_grant.median(),
                    w.lua_grant.median(),
                    w.module_refuse.median(),
                    w.lua_refuse.median(),
                );
                WindowJson {
                    window: w.window,
                    grant: GrantJson {
                        module: round(mg, 4),
                        lua: round(lg, 4),
                        cl_throttle: cell_median(&w.cell_grant),
                        lua_over_module: round(lg / mg, 3),
                        module_over_incr: round(mg / incr, 3),
                        module_samples: rounded(&w.module_grant.samples, 4),
                        lua_samples: rounded(&w.lua_grant.samples, 4),
                    },
                    refusal: RefusalJson {
                        module: round(mr, 4),
                        lua: round(lr, 4),
                        cl_throttle: cell_median(&w.cell_refuse),
                        lua_over_module: round(lr / mr, 3),
                        module_over_incr: round(mr / incr, 3),
                    },
                    memory: MemoryJson {
                        hash: w.memory.hash,
                        value: w.memory.value,
                        permits: w.memory.permits,
                        total: w.memory.total(),
                        permits_encoding: w.memory.encoding.clone(),
                    },
                }
            })
            .collect();
        let throughput = self.throughput.as_ref().map(|t| ThroughputJson {
            tool: "redis-benchmark",
            clients: CLIENTS,
            rounds: t.rounds,
            path: format!("refused (full {THROUGHPUT_WINDOW}-entry window, frozen clock)"),
            module_counters: t
                .counters
                .map(|(acquired, refused)| Counters { acquired, refused }),
            pipelines: t
                .rps
                .iter()
                .map(|(&p, r)| {
                    let rounds = |target: &str| r.get(target).map_or(vec![], |v| rounded(v, 4));
                    PipelineJson {
                        pipeline: p,
                        requests: t.requests.get(&p).copied().unwrap_or(0),
                        module: round(t.median(p, "module"), 0),
                        lua: round(t.median(p, "lua"), 0),
                        incr: round(t.median(p, "incr"), 0),
                        cl_throttle: self
                            .cell
                            .as_ref()
                            .map(|_| round(t.median(p, "cl.throttle"), 0)),
                        module_over_lua: round(t.ratio(p, "module", "lua"), 3),
                        module_over_incr: round(t.ratio(p, "module", "incr"), 3),
                        rounds: Rounds {
                            module: rounds("module"),
                            lua: rounds("lua"),
                            incr: rounds("incr"),
                            cl_throttle: self.cell.as_ref().map(|_| rounds("cl.throttle")),
                        },
                    }
                })
                .collect(),
        });
        to_json(&ReportJson {
            machine: &self.machine,
            cpu_per_call: CpuPerCall {
                unit: "usec",
                source: "INFO commandstats usec/calls",
                reps: self.plan.reps,
                calls_per_rep: self.plan.calls,
                incr: round(incr, 4),
                windows,
            },
            throughput,
            instructions_per_call: match &self.instructions {
                Section::Measured(counts) => InstructionsSection::Measured(counts.json()),
                Section::Skipped(why) => InstructionsSection::Skipped {
                    skipped: why.clone(),
                },
            },
            redis_cell: self.cell.as_ref().map(|p| p.display().to_string()),
            worst_cases: self.worst.json(),
            memory: self.memory.json(),
            targets: self.targets(),
            other_load: OtherLoad {
                before: self.busy.0.map(|b| round(b, 3)),
                during: self.busy.1.map(|b| round(b, 3)),
            },
            seconds: round(self.seconds, 1),
        })
    }
}

/// `--worst`: the worst cases alone.
pub struct WorstReport {
    pub machine: Machine,
    pub worst: Worst,
    /// Share of all CPUs used by other processes just before the run.
    pub busy_before: Option<f64>,
    pub seconds: f64,
}

impl WorstReport {
    pub fn table(&self) -> String {
        let mut text = self.worst.table();
        let m = &self.machine;
        let _ = writeln!(
            text,
            "\nMachine: {} CPUs, {}; {}; source {}; run took {:.0}s; CPU used by other processes before the run: {}",
            m.cpus,
            m.cpu_model,
            m.redis_version,
            m.source,
            self.seconds,
            percent(self.busy_before)
        );
        text
    }

    pub fn json(&self) -> String {
        to_json(&WorstReportJson {
            machine: &self.machine,
            worst_cases: self.worst.json(),
            other_load_before: self.busy_before.map(|b| round(b, 3)),
        })
    }
}

/// Writes `<name>.json` and `<name>.txt` to bench/results/ and says where.
pub fn save(name: &str, json: &str, text: &str) -> Res<()> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("bench/results");
    fs::create_dir_all(&dir)?;
    let json_path = dir.join(format!("{name}.json"));
    fs::write(&json_path, json)?;
    fs::write(dir.join(format!("{name}.txt")), text)?;
    println!("written: {}", json_path.display());
    Ok(())
}

pub fn percent(share: Option<f64>) -> String {
    share.map_or("n/a".into(), |b| format!("{:.0}%", b * 100.0))
}

/// `x` to `places` decimals, as the tables print it: the JSON carries the same figures, not
/// float noise. (NaN, a ratio with nothing measured, becomes null in the JSON.)
pub fn round(x: f64, places: i32) -> f64 {
    let scale = 10f64.powi(places);
    (x * scale).round() / scale
}

/// redis-cell's median, if it was measured.
fn cell_median(cpu: &Cpu) -> Option<f64> {
    (!cpu.samples.is_empty()).then(|| round(cpu.median(), 4))
}

fn rounded(v: &[f64], places: i32) -> Vec<f64> {
    v.iter().map(|&x| round(x, places)).collect()
}

/// Pretty-printed, with a final newline. Serializing these plain structs cannot fail (no maps
/// with non-string keys, no custom serializers); if it ever did, the file says so.
fn to_json(value: &impl Serialize) -> String {
    let mut json = serde_json::to_string_pretty(value)
        .unwrap_or_else(|e| format!("{{\"error\": \"cannot serialize the report: {e}\"}}"));
    json.push('\n');
    json
}

#[derive(Serialize)]
struct ReportJson<'a> {
    machine: &'a Machine,
    cpu_per_call: CpuPerCall,
    throughput: Option<ThroughputJson>,
    instructions_per_call: InstructionsSection,
    /// The redis-cell build measured beside the module (`$REDIS_CELL`), if any.
    redis_cell: Option<String>,
    worst_cases: WorstJson,
    memory: &'a [memory::Row],
    targets: Vec<Target>,
    other_load: OtherLoad,
    seconds: f64,
}

/// Instructions per call (callgrind), or why they were not measured.
#[derive(Serialize)]
#[serde(untagged)]
enum InstructionsSection {
    Measured(InstructionsJson),
    Skipped { skipped: String },
}

#[derive(Serialize)]
struct WorstReportJson<'a> {
    machine: &'a Machine,
    worst_cases: WorstJson,
    other_load_before: Option<f64>,
}

/// Server CPU per call, usec: medians over the repetitions.
#[derive(Serialize)]
struct CpuPerCall {
    unit: &'static str,
    source: &'static str,
    reps: usize,
    calls_per_rep: usize,
    incr: f64,
    windows: Vec<WindowJson>,
}

#[derive(Serialize)]
struct WindowJson {
    window: i64,
    grant: GrantJson,
    refusal: RefusalJson,
    memory: MemoryJson,
}

#[derive(Serialize)]
struct GrantJson {
    module: f64,
    lua: f64,
    /// redis-cell's allowed path, if measured.
    cl_throttle: Option<f64>,
    lua_over_module: f64,
    module_over_incr: f64,
    module_samples: Vec<f64>,
    lua_samples: Vec<f64>,
}

#[derive(Serialize)]
struct RefusalJson {
    module: f64,
    lua: f64,
    /// redis-cell's refused path, if measured.
    cl_throttle: Option<f64>,
    lua_over_module: f64,
    module_over_incr: f64,
}

/// MEMORY USAGE of the limiter's keys, bytes.
#[derive(Serialize)]
struct MemoryJson {
    hash: i64,
    value: i64,
    permits: i64,
    total: i64,
    permits_encoding: String,
}

#[derive(Serialize)]
struct ThroughputJson {
    tool: &'static str,
    clients: usize,
    rounds: usize,
    path: String,
    /// INFO ratelimit over the module's runs, if this build of the module reports it.
    module_counters: Option<Counters>,
    pipelines: Vec<PipelineJson>,
}

#[derive(Serialize)]
struct Counters {
    acquired: u64,
    refused: u64,
}

/// Requests per second at one pipeline depth: medians, ratios, and every round.
#[derive(Serialize)]
struct PipelineJson {
    pipeline: usize,
    requests: usize,
    module: f64,
    lua: f64,
    incr: f64,
    cl_throttle: Option<f64>,
    module_over_lua: f64,
    module_over_incr: f64,
    rounds: Rounds,
}

#[derive(Serialize)]
struct Rounds {
    module: Vec<f64>,
    lua: Vec<f64>,
    incr: Vec<f64>,
    cl_throttle: Option<Vec<f64>>,
}

#[derive(Serialize)]
struct OtherLoad {
    before: Option<f64>,
    during: Option<f64>,
}
