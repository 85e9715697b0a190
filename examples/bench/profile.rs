//! `bench profile`: instructions per call under callgrind (callgrind.rs), on a window of your
//! choice, with each phase's top functions (callgrind_annotate, inclusive).

use std::process::Command;

use crate::callgrind::{self, Instructions};
use crate::cell;
use crate::server::{module_path, which};
use crate::Res;

/// Runs the callgrind phases (with redis-cell too when `$REDIS_CELL` is set), prints the table,
/// then each phase's top functions; the dumps stay in bench/results/callgrind/.
pub fn run(args: &[String]) -> Res<()> {
    let mut window = callgrind::WINDOW;
    let mut calls = callgrind::CALLS;
    let mut top = 40usize;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{a} needs a value"));
        match a.as_str() {
            "--window" => window = value()?.parse()?,
            "--calls" => calls = value()?.parse()?,
            "--top" => top = value()?.parse()?,
            _ => return Err(format!("unknown argument '{a}'").into()),
        }
    }
    if calls == 0 || window < 1 {
        return Err("--calls and --window must be at least 1".into());
    }
    let missing = callgrind::missing_tool().or_else(|| {
        which("callgrind_annotate")
            .is_none()
            .then_some("callgrind_annotate")
    });
    if let Some(tool) = missing {
        return Err(format!("{tool} not found (Debian: apt-get install valgrind)").into());
    }
    let cell = cell::path()?;
    let counts = callgrind::run(&module_path(), cell.as_deref(), window, calls)?;
    println!("\n{}", counts.table());
    listings(&counts, top)
}

/// Each phase's top `top` functions by inclusive count, per call.
fn listings(counts: &Instructions, top: usize) -> Res<()> {
    for (kind, file) in &counts.dumps {
        println!(
            "\n=== {}: {:.0} instructions per call in the command, {:.0} whole server ({})",
            kind.name(),
            counts.in_command(*kind).unwrap_or(f64::NAN),
            counts.whole_server(*kind).unwrap_or(f64::NAN),
            file.display()
        );
        let annotate = Command::new("callgrind_annotate")
            .args(["--inclusive=yes", "--threshold=99"])
            .arg(file)
            .output()?;
        let listing = String::from_utf8_lossy(&annotate.stdout);
        println!("{:>10} {:>7}  function (inclusive)", "Ir/call", "share");
        let rows = listing.lines().filter_map(|l| {
            // "12,345 (12.34%)  ???:function [object]"
            let (count, rest) = l.trim_start().split_once(' ')?;
            let count: u64 = count.replace(',', "").parse().ok()?;
            let (share, function) = rest.trim_start().split_once(')')?;
            let function = function.trim().trim_start_matches("???:");
            let function = function.split(" [").next().unwrap_or(function);
            Some((
                count,
                share.trim_start_matches('(').to_string(),
                function.to_string(),
            ))
        });
        for (count, share, function) in rows.filter(|r| !r.2.contains("PROGRAM TOTALS")).take(top) {
            println!(
                "{:>10.0} {:>7}  {function}",
                count as f64 / counts.calls as f64,
                share
            );
        }
    }
    Ok(())
}
