//! The machine the numbers come from, and how busy other processes kept it: the bench waits
//! for a quiet machine and reports the load it could not avoid.

use std::fs;
use std::process::Command;
use std::thread;
use std::time::{Duration, Instant};

use redis::Connection;
use serde::Serialize;

use crate::server::server_binary;

/// What the numbers were measured on, as the reports print it.
#[derive(Serialize)]
pub struct Machine {
    pub cpus: usize,
    pub cpu_model: String,
    pub redis_version: String,
    /// The repository's commit, "+dirty" if src/ or Cargo.toml differ from it.
    pub source: String,
}

impl Machine {
    pub fn probe() -> Machine {
        let cpus = thread::available_parallelism().map_or(0, |n| n.get());
        let cpu_model = Command::new("lscpu")
            .output()
            .ok()
            .and_then(|o| {
                String::from_utf8_lossy(&o.stdout)
                    .lines()
                    .find_map(|l| l.strip_prefix("Model name:").map(|m| m.trim().to_string()))
            })
            .unwrap_or_else(|| "unknown CPU".into());
        let redis_version = Command::new(server_binary())
            .arg("--version")
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .unwrap_or_else(|_| "unknown redis-server".into());
        let root = env!("CARGO_MANIFEST_DIR");
        let git = |args: &[&str]| {
            Command::new("git")
                .arg("-C")
                .arg(root)
                .args(args)
                .output()
                .ok()
                .filter(|o| o.status.success())
                .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        };
        let source = match git(&["rev-parse", "--short", "HEAD"]) {
            Some(commit) => {
                let dirty = git(&["status", "--porcelain", "--", "src", "Cargo.toml"])
                    .is_some_and(|s| !s.is_empty());
                format!("{commit}{}", if dirty { "+dirty" } else { "" })
            }
            None => "unknown".into(),
        };
        Machine {
            cpus,
            cpu_model,
            redis_version,
            source,
        }
    }
}

/// Share of the machine's CPU time spent busy over `window`, from /proc/stat (Linux); measured
/// while this program is idle, so it is other processes' load.
fn busy_fraction(window: Duration) -> Option<f64> {
    fn sample() -> Option<(u64, u64)> {
        let stat = fs::read_to_string("/proc/stat").ok()?;
        let cpu = stat.lines().next()?.strip_prefix("cpu ")?;
        let ticks: Vec<u64> = cpu
            .split_whitespace()
            .filter_map(|t| t.parse().ok())
            .collect();
        let idle = ticks.get(3)? + ticks.get(4).copied().unwrap_or(0);
        Some((ticks.iter().sum(), idle))
    }
    let (total0, idle0) = sample()?;
    thread::sleep(window);
    let (total1, idle1) = sample()?;
    let total = total1.saturating_sub(total0);
    (total > 0).then(|| 1.0 - idle1.saturating_sub(idle0) as f64 / total as f64)
}

/// How much CPU other processes took while the benchmark ran: the machine's busy time
/// (/proc/stat) minus this program's, its children's (redis-benchmark) and the server's.
pub struct LoadMeter {
    machine: Option<(u64, u64)>,
    own: Option<u64>,
    server: Option<f64>,
}

/// Clock ticks per second of /proc/stat and /proc/<pid>/stat (USER_HZ, 100 on Linux).
const TICKS: f64 = 100.0;

impl LoadMeter {
    pub fn start(con: &mut Connection) -> LoadMeter {
        LoadMeter {
            machine: machine_ticks(),
            own: own_ticks(),
            server: server_cpu(con),
        }
    }

    /// Share of the machine's CPU time since `start` used by other processes.
    pub fn others(&self, con: &mut Connection) -> Option<f64> {
        let (busy0, total0) = self.machine?;
        let (busy1, total1) = machine_ticks()?;
        let ours = (own_ticks()? - self.own?) as f64 + (server_cpu(con)? - self.server?) * TICKS;
        let total = total1.saturating_sub(total0) as f64;
        (total > 0.0).then(|| ((busy1 - busy0) as f64 - ours).max(0.0) / total)
    }
}

/// (busy, total) ticks of all CPUs: busy = user + nice + system + steal.
fn machine_ticks() -> Option<(u64, u64)> {
    let stat = fs::read_to_string("/proc/stat").ok()?;
    let ticks: Vec<u64> = stat
        .lines()
        .next()?
        .strip_prefix("cpu ")?
        .split_whitespace()
        .filter_map(|t| t.parse().ok())
        .collect();
    let at = |i: usize| ticks.get(i).copied().unwrap_or(0);
    Some((at(0) + at(1) + at(2) + at(7), ticks.iter().take(8).sum()))
}

/// This process's CPU ticks plus those of its children it has waited for.
fn own_ticks() -> Option<u64> {
    let stat = fs::read_to_string("/proc/self/stat").ok()?;
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    // After the command name: state is field 3, utime..cstime are fields 14..=17.
    (11..=14).map(|i| fields.get(i)?.parse::<u64>().ok()).sum()
}

/// The server's CPU seconds (all threads), from INFO cpu.
fn server_cpu(con: &mut Connection) -> Option<f64> {
    let info: String = redis::cmd("INFO").arg("cpu").query(con).ok()?;
    let field = |name: &str| -> Option<f64> {
        info.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))?
            .trim()
            .parse()
            .ok()
    };
    Some(field("used_cpu_sys")? + field("used_cpu_user")?)
}

/// The machine may be shared: wait (up to `patience`) for other work to stay under 15% of the
/// CPUs, and return the last share seen. The report shows it, so a noisy run is visible.
pub fn wait_until_quiet(patience: Duration) -> Option<f64> {
    let deadline = Instant::now() + patience;
    let mut warned = false;
    loop {
        let busy = busy_fraction(Duration::from_secs(1))?;
        if busy < 0.15 || Instant::now() >= deadline {
            if warned || busy >= 0.15 {
                println!("machine is {:.0}% busy with other work", busy * 100.0);
            }
            return Some(busy);
        }
        if !warned {
            println!(
                "machine is {:.0}% busy with other work: waiting up to {}s for it to settle ...",
                busy * 100.0,
                patience.as_secs()
            );
            warned = true;
        }
    }
}
