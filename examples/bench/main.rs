//! `make bench`: the module's RATELIMIT.TRYACQUIRE against the equivalent Lua script
//! (`bench/tryacquire.lua`, the calls Redisson's tryAcquire makes) and plain INCR, side by side
//! on one redis-server started here, and redis-cell's CL.THROTTLE too when `$REDIS_CELL` names
//! a build of it. See `bench/README.md` for what is measured and how.
//!
//! ```text
//! cargo run --release --example bench                       # the full benchmark (make bench)
//! cargo run --release --example bench -- --quick            # fewer calls, a smoke run
//! cargo run --release --example bench -- --memory [--quick] # only the memory table
//! cargo run --release --example bench -- --worst [--quick]  # only the worst cases
//!                                                           # (worst.rs)
//! cargo run --release --example bench -- --gcra [--quick]   # only the GCRA drop-ins
//!                                                           # (gcra.rs)
//! cargo run --release --example bench -- --many [--quick]   # only the many limiters
//!                                                           # (many.rs)
//! cargo run --release --example bench -- profile [--window N] [--calls N] [--top N]
//!                                                           # instructions per call (callgrind)
//! ```
//!
//! The module is `$RATELIMIT_MODULE`, else `$CARGO_TARGET_DIR/release/libratelimit.so`, else
//! `target/release/libratelimit.so`; the server is `$REDIS_SERVER` (default `redis-server`);
//! `$REDIS_CELL`, if set, is a `libredis_cell.so` loaded beside the module. Results go to stdout
//! and to `bench/results/latest.json` (git-ignored).
//!
//! The modules: `server` (the redis-server, shared with the tests), `limiter` (the limiters and
//! their keys), `calls` (the measured calls: module, Lua, INCR), `cell` (redis-cell's calls),
//! `measure` (CPU per call), `throughput` (redis-benchmark), `callgrind` (instructions per call,
//! in the command), `worst` (one call on a big log), `machine` (the machine and its load),
//! `report` (tables and JSON), `profile` (the callgrind phases with their top functions).
//!
//! This is a measurement, not a test: nothing here asserts a time. It does check that every call
//! took the path it claims to measure (granted, refused), and fails loudly if not.

use std::env;
use std::error::Error;
use std::time::{Duration, Instant};

use calls::LUA;
use limiter::{set_clock, Ids};
use machine::{wait_until_quiet, LoadMeter, Machine};
use server::{module_path, which};

// One job per module; `main` only reads the arguments and runs the sections in order.
mod callgrind;
mod calls;
mod cell;
mod gcra;
mod limiter;
mod machine;
mod many;
mod measure;
mod memory;
mod profile;
mod report;
mod server;
mod throughput;
mod worst;

/// Every failure ends the run with its message: a measurement that went wrong is no result.
type Res<T> = Result<T, Box<dyn Error>>;

/// The frozen clock starts here: 2026-01-01T00:00:00Z in unix ms.
const T0: i64 = 1_767_225_600_000;

fn main() {
    let args: Vec<String> = env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("profile") => profile::run(&args[1..]),
        Some("-h" | "--help") => {
            println!(
                "usage: bench [--quick] [--worst | --memory | --gcra | --many] | bench profile [--window N] [--calls N] [--top N]"
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

/// How many calls, requests and repetitions a run makes (`--quick`: fewer).
pub struct Plan {
    /// Measured calls per repetition, and repetitions (the median is reported).
    pub calls: usize,
    pub reps: usize,
    /// redis-benchmark requests per run at pipeline 1 / 16, and rounds (median reported).
    pub requests_p1: usize,
    pub requests_p16: usize,
    pub rounds: usize,
}

impl Plan {
    fn new(quick: bool) -> Plan {
        if quick {
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
        }
    }
}

fn full(args: &[String]) -> Res<()> {
    let quick = args.iter().any(|a| a == "--quick");
    let worst_only = args.iter().any(|a| a == "--worst");
    let memory_only = args.iter().any(|a| a == "--memory");
    let gcra_only = args.iter().any(|a| a == "--gcra");
    let many_only = args.iter().any(|a| a == "--many");
    if let Some(bad) = args.iter().find(|a| {
        !matches!(
            a.as_str(),
            "--quick" | "--worst" | "--memory" | "--gcra" | "--many"
        )
    }) {
        return Err(format!("unknown argument '{bad}' (try --help)").into());
    }
    let worst_sizes: &[i64] = if quick {
        &worst::QUICK_SIZES
    } else {
        &worst::SIZES
    };
    let memory_rates: &[i64] = if quick {
        &memory::QUICK_RATES
    } else {
        &memory::RATES
    };
    if worst_only {
        return worst_cases(quick, worst_sizes);
    }
    if gcra_only {
        return gcra_section(quick);
    }
    if many_only {
        return many_section(quick);
    }
    if memory_only {
        let memory = memory::run(&module_path(), memory_rates)?;
        let text = memory.table();
        println!("\n{text}");
        let json = serde_json::to_string_pretty(memory.json())?;
        return report::save("memory", &json, &text);
    }
    let plan = Plan::new(quick);
    let started = Instant::now();
    let machine = Machine::probe();
    let module = module_path();
    println!("ratelimit bench: module {}", module.display());
    println!(
        "machine: {} CPUs, {}; {}",
        machine.cpus, machine.cpu_model, machine.redis_version
    );
    let cell = cell::path()?;
    match &cell {
        Some(path) => println!(
            "redis-cell: {} (REDIS_CELL), loaded beside the module",
            path.display()
        ),
        None => println!("redis-cell: not measured (set REDIS_CELL=/path/to/libredis_cell.so)"),
    }
    let busy_before = wait_until_quiet(Duration::from_secs(if quick { 0 } else { 120 }));
    let cell_args = cell.as_deref().map(cell::load_args);
    let extra: Vec<&str> = cell_args
        .iter()
        .flat_map(|a| a.iter().map(String::as_str))
        .collect();
    let server = server::start_after(&extra, &module, &[], &[])?;
    let mut con = server::connect(&server)?;
    set_clock(&mut con, T0)?;
    let mut clock = T0;
    let sha: String = redis::cmd("SCRIPT").arg("LOAD").arg(LUA).query(&mut con)?;
    let mut ids = Ids::new(0x5eed);
    if cell.is_some() {
        cell::prepare(&mut con)?;
    }
    let load = LoadMeter::start(&mut con);

    let (windows, incr) =
        measure::cpu_per_call(&mut con, &sha, &plan, &mut clock, &mut ids, cell.is_some())?;
    let throughput = match which("redis-benchmark") {
        Some(tool) => Some(throughput::run(
            &mut con,
            &server,
            &tool,
            &sha,
            &plan,
            &mut clock,
            &mut ids,
            cell.is_some(),
        )?),
        None => {
            println!("redis-benchmark not found (Debian: apt-get install redis-tools): skipping throughput");
            None
        }
    };
    let busy_during = load.others(&mut con);
    server::stop(server);

    // Instructions per call under callgrind, on a server of its own (skipped without valgrind).
    let instructions = callgrind::section(&module, cell.as_deref());

    // The worst cases, on a server of their own (with a replication backlog).
    let worst = worst::run(&module, worst_sizes)?;
    // The memory of merged logs, on a server of its own.
    let memory = memory::run(&module, memory_rates)?;

    let report = report::Report {
        machine,
        plan,
        windows,
        incr,
        throughput,
        instructions,
        cell,
        worst,
        memory,
        busy: (busy_before, busy_during),
        seconds: started.elapsed().as_secs_f64(),
    };
    let text = report.table();
    println!("\n{text}");
    report::save("latest", &report.json(), &text)?;
    many_section(quick)?;
    gcra_section(quick)
}

/// A limiter per user, many of them, against the script: bench/results/many.json (and .txt).
fn many_section(quick: bool) -> Res<()> {
    let report = many::run(&module_path(), &many::Plan::new(quick))?;
    let text = report.table();
    println!("\n{text}");
    report::save(
        "many",
        &serde_json::to_string_pretty(&report.json())?,
        &text,
    )
}

/// The GCRA drop-ins against redis-cell and a GCRA script: bench/results/gcra.json (and .txt).
fn gcra_section(quick: bool) -> Res<()> {
    let module = module_path();
    let cell = cell::path()?;
    if cell.is_none() {
        println!("gcra: redis-cell not measured (set REDIS_CELL=/path/to/libredis_cell.so)");
    }
    let report = gcra::run(&module, cell.as_deref(), &gcra::Plan::new(quick))?;
    let text = report.table();
    println!("\n{text}");
    report::save(
        "gcra",
        &serde_json::to_string_pretty(&report.json())?,
        &text,
    )
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
    let report = report::WorstReport {
        machine,
        worst,
        busy_before,
        seconds: started.elapsed().as_secs_f64(),
    };
    let text = report.table();
    println!("\n{text}");
    report::save("worst", &report.json(), &text)
}

/// Shows a progress line's start before the slow part that follows it.
fn flush() {
    use std::io::Write;
    let _ = std::io::stdout().flush();
}
