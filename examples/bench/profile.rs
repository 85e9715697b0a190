//! `bench profile`: instructions per call under valgrind's callgrind, phase by phase.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::thread;
use std::time::Duration;

use redis::Connection;

use crate::calls::{incrs, lua_grants, lua_refusals, module_grants, module_refusals, LUA};
use crate::limiter::{fill_window, set_clock, Ids};
use crate::server::{self, module_path, which};
use crate::{Res, T0};

/// Starts redis-server under callgrind with instrumentation off, sets up a full window, then for
/// each phase (module grant, Lua grant, INCR, module refusal, Lua refusal) zeroes the counters,
/// drives `calls` calls and dumps. Prints instructions per call and each dump's top functions
/// (callgrind_annotate, inclusive), and leaves the dumps in bench/results/callgrind/.
pub fn run(args: &[String]) -> Res<()> {
    let mut window = 10_000i64;
    let mut calls = 5_000usize;
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
    for tool in ["valgrind", "callgrind_control", "callgrind_annotate"] {
        which(tool)
            .ok_or_else(|| format!("{tool} not found (Debian: apt-get install valgrind)"))?;
    }
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("bench/results/callgrind");
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir)?;
    let out_file = dir.join("callgrind.out");
    let module = module_path();
    let wrapper = vec![
        "valgrind".to_string(),
        "--tool=callgrind".into(),
        "--instr-atstart=no".into(),
        format!("--callgrind-out-file={}", out_file.display()),
    ];
    let server = server::start(&module, &wrapper, &[])?;
    let pid = server.pid().to_string();
    let mut con = server::connect(&server)?;
    set_clock(&mut con, T0)?;
    let mut clock = T0;
    let sha: String = redis::cmd("SCRIPT").arg("LOAD").arg(LUA).query(&mut con)?;
    let mut ids = Ids::new(0x5eed);
    let name = format!("bench:w{window}");
    println!("profile: window {window}, {calls} calls per phase, server pid {pid} under callgrind");
    fill_window(&mut con, &name, window, clock, &mut ids)?;
    module_grants(&mut con, &name, 200, &mut clock)?;
    lua_grants(&mut con, &sha, &name, 200, &mut clock, &mut ids)?;
    control(&pid, &["-i", "on"])?;
    type Phase<'a> = (&'a str, Box<dyn FnMut(&mut Connection) -> Res<()> + 'a>);
    let (name_ref, sha_ref) = (&name, &sha);
    let clock_cell = std::cell::Cell::new(clock);
    let ids_cell = std::cell::RefCell::new(ids);
    let phases: Vec<Phase> = vec![
        (
            "module-grant",
            Box::new(|con| {
                let mut c = clock_cell.get();
                module_grants(con, name_ref, calls, &mut c)?;
                clock_cell.set(c);
                Ok(())
            }),
        ),
        (
            "lua-grant",
            Box::new(|con| {
                let mut c = clock_cell.get();
                lua_grants(
                    con,
                    sha_ref,
                    name_ref,
                    calls,
                    &mut c,
                    &mut ids_cell.borrow_mut(),
                )?;
                clock_cell.set(c);
                Ok(())
            }),
        ),
        ("incr", Box::new(|con| incrs(con, calls))),
        (
            "module-refusal",
            Box::new(|con| module_refusals(con, name_ref, calls, clock_cell.get())),
        ),
        (
            "lua-refusal",
            Box::new(|con| lua_refusals(con, sha_ref, name_ref, calls, clock_cell.get())),
        ),
    ];
    let mut dumps = Vec::new();
    for (phase, mut drive) in phases {
        // A PING first, so the zeroing lands while the server is idle between commands.
        let _: String = redis::cmd("PING").query(&mut con)?;
        control(&pid, &["-z"])?;
        drive(&mut con)?;
        control(&pid, &[&format!("--dump={phase}")])?;
        dumps.push(phase);
    }
    server::stop(server);
    thread::sleep(Duration::from_millis(200));
    let mut files: Vec<PathBuf> = fs::read_dir(&dir)?
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
    for file in files {
        let text = fs::read_to_string(&file)?;
        let desc = text
            .lines()
            .find_map(|l| l.strip_prefix("desc: Trigger: dump "))
            .unwrap_or("?")
            .to_string();
        if !dumps.contains(&desc.as_str()) {
            continue;
        }
        let total: u64 = text
            .lines()
            .find_map(|l| {
                l.strip_prefix("summary: ")
                    .or_else(|| l.strip_prefix("totals: "))
            })
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(0);
        println!(
            "\n=== {desc}: {total} instructions / {calls} calls = {:.0} per call (whole server, incl. networking; {})",
            total as f64 / calls as f64,
            file.display()
        );
        let annotate = Command::new("callgrind_annotate")
            .args(["--inclusive=yes", "--threshold=99"])
            .arg(&file)
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
                count as f64 / calls as f64,
                share
            );
        }
    }
    Ok(())
}

fn control(pid: &str, args: &[&str]) -> Res<()> {
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
