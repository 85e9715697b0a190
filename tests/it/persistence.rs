//! Persistence against real servers: the AOF holds the module's effects, so a server WITHOUT the
//! module replays it after a SIGKILL into the very dataset the master had; an RDB saved with the
//! module loads back byte-identical and the limiter carries on from its restored log.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::thread;
use std::time::{Duration, Instant};

use crate::common::*;

const NAMES: [&str; 4] = ["api", "tag{x}", "{pc}", "big"];
const CLIENTS: [&str; 2] = ["c1", "3f2504e0-4f89-11d3-9a0c-0305e82c3301"];

/// A mixed workload of every writing command. TTLs are at least a minute of real time, so no
/// key expires between the snapshot and the reload. Returns (commands, errors).
fn workload(con: &mut Connection, rng: &mut Rng, steps: usize) -> (usize, usize) {
    let mut errors = 0;
    for _ in 0..steps {
        let name = *rng.pick(&NAMES);
        let client = *rng.pick(&CLIENTS);
        let (rate, interval) = if name == "big" {
            (1000, 600_000)
        } else {
            (1 + rng.below(6), *rng.pick(&[100u64, 1000, 5000]))
        };
        let text = match rng.below(24) {
            0 => format!("RATELIMIT.SETRATE {name} {rate} {interval} KEEPSTATE CLIENT {client}"),
            1 => format!(
                "RATELIMIT.SETRATE {name} {rate} {interval} PER_CLIENT KEEPALIVE 600000 CLIENT {client}"
            ),
            2 => format!("RATELIMIT.SETRATE {name} {rate} {interval} NX KEEPALIVE 600000"),
            3 => format!("RATELIMIT.SETRATE {name} {rate} {interval} XX KEEPSTATE"),
            4..=10 => format!(
                "RATELIMIT.TRYACQUIRE {name} {} CLIENT {client}",
                1 + rng.below(2)
            ),
            11 => format!("RATELIMIT.RELEASE {name} {} CLIENT {client}", 1 + rng.below(3)),
            12 if name != "big" => format!("RATELIMIT.DELETE {name} CLIENT {client}"),
            13 => format!(
                "RATELIMIT.EXPIRE {name} {} {}",
                120_000 + rng.below(600_000),
                rng.pick(&["", "NX", "XX", "GT", "LT"])
            ),
            14 if name != "big" => format!("RATELIMIT.EXPIRE {name} -1 CLIENT {client}"),
            15 => format!("RATELIMIT.PERSIST {name} CLIENT {client}"),
            16 | 17 => {
                advance(con, rng.below(700) as i64);
                continue;
            }
            // Created on first use, merged entries, several limits at once.
            20 => format!(
                "RATELIMIT.ALLOW {name} {} CLIENT {client} RATE {rate} {interval} PRECISION 10",
                1 + rng.below(2)
            ),
            21 => {
                let other = *rng.pick(&NAMES);
                if other == name {
                    continue;
                }
                format!("RATELIMIT.ALLOWALL 2 {name} {other} CLIENT {client}")
            }
            22 => format!("RATELIMIT.SETRATE {name} {rate} {interval} PRECISION 50 KEEPSTATE"),
            _ => format!("RATELIMIT.TRYACQUIRE {name} CLIENT {client}"),
        };
        if let Err(e) = line::<Value>(con, &text) {
            let line = error_line(&e);
            assert!(line.starts_with("ERR "), "`{text}`: {line}");
            errors += 1;
        }
    }
    (steps, errors)
}

/// A fresh directory under the cargo tmpdir, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!(
            "persistence-{tag}-{}-{:?}",
            std::process::id(),
            thread::current().id()
        ));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).expect("create temp dir");
        TempDir(dir)
    }

    fn path(&self) -> &str {
        self.0.to_str().expect("utf-8 path")
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to).expect("mkdir");
    for entry in fs::read_dir(from).expect("read dir") {
        let entry = entry.expect("dir entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("file type").is_dir() {
            copy_dir(&entry.path(), &target);
        } else if entry.file_name() != "redis.log" {
            fs::copy(entry.path(), &target).expect("copy");
        }
    }
}

fn kill_9(server: &mut Server) {
    let pid = info_field(&mut server.conn(), "server", "process_id").expect("process_id");
    let status = Command::new("kill")
        .args(["-9", &pid])
        .status()
        .expect("run kill");
    assert!(status.success(), "kill -9 {pid} failed");
    let deadline = Instant::now() + HANG;
    while server.is_alive() {
        assert!(Instant::now() < deadline, "pid {pid} survived SIGKILL");
        thread::sleep(Duration::from_millis(10));
    }
}

/// Every file of a directory tree, concatenated.
fn all_bytes(dir: &Path) -> Vec<u8> {
    let mut out = Vec::new();
    for entry in fs::read_dir(dir).expect("read dir") {
        let path = entry.expect("dir entry").path();
        if path.is_dir() {
            out.extend(all_bytes(&path));
        } else {
            out.extend(fs::read(&path).expect("read"));
        }
    }
    out
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

#[test]
fn aof_after_sigkill_replays_on_a_server_without_the_module() {
    let mut master = Server::start_with(
        &["debug-commands", "yes"],
        &["--appendonly", "yes", "--appendfsync", "always"],
    );
    let mut con = master.conn();
    con.set_read_timeout(Some(HANG)).unwrap();
    set_clock(&mut con, T0);
    for name in NAMES {
        let setup = if name == "{pc}" {
            format!("RATELIMIT.SETRATE {name} 4 1000 PER_CLIENT")
        } else if name == "big" {
            format!("RATELIMIT.SETRATE {name} 1000 600000 KEEPALIVE 600000")
        } else {
            format!("RATELIMIT.SETRATE {name} 4 1000")
        };
        line::<i64>(&mut con, &setup).unwrap();
    }
    let mut rng = Rng(0x2545_F491_4F6C_DD1D);
    let (commands, errors) = workload(&mut con, &mut rng, 2500);
    let before = snapshot(&mut con);
    // Killed right after the workload: with appendfsync always, every reply above was preceded
    // by its fsync, so nothing acknowledged may be missing.
    kill_9(&mut master);

    let copy = TempDir::new("aof");
    copy_dir(&master.dir, &copy.0);
    let aof = all_bytes(&copy.0.join("appendonlydir"));
    assert!(
        contains(&aof, b"ZADD") && contains(&aof, b"PEXPIREAT"),
        "the AOF lacks the effects"
    );
    assert!(
        !contains(&aof.to_ascii_lowercase(), b"ratelimit."),
        "a module command reached the AOF"
    );
    drop(master);

    let plain = Server::start_plain(&["--appendonly", "yes", "--dir", copy.path()]);
    let mut restored = plain.conn();
    let after = snapshot(&mut restored);
    eprintln!(
        "aof: {commands} commands ({errors} errors), {} AOF bytes, {} keys compared after SIGKILL \
         and replay without the module ({} with a TTL)",
        aof.len(),
        before.len(),
        before.iter().filter(|k| k.2 > 0).count()
    );
    assert!(before.len() >= 8, "the workload left too little to compare");
    assert!(before.iter().any(|k| k.2 > 0) && before.iter().any(|k| k.2 < 0));
    assert_eq!(after.len(), before.len(), "key counts differ");
    for (b, a) in before.iter().zip(&after) {
        assert_eq!(b, a, "key {:?}", String::from_utf8_lossy(&b.0));
    }
}

#[test]
fn rdb_restores_the_limiter_which_keeps_counting_from_its_log() {
    let server = Server::start_with(
        &["debug-commands", "yes"],
        &["--dbfilename", "limiters.rdb"],
    );
    let mut con = server.conn();
    con.set_read_timeout(Some(HANG)).unwrap();
    set_clock(&mut con, T0);
    line::<i64>(&mut con, "RATELIMIT.SETRATE api 5 10000").unwrap();
    line::<i64>(
        &mut con,
        "RATELIMIT.SETRATE {pc} 3 10000 PER_CLIENT KEEPALIVE 600000",
    )
    .unwrap();
    line::<i64>(
        &mut con,
        "RATELIMIT.SETRATE big 1000 600000 KEEPALIVE 600000",
    )
    .unwrap();
    let mut rng = Rng(0xDEAD_BEEF_CAFE_F00D);
    workload(&mut con, &mut rng, 800);
    // A known state on top: `api` holds 3 of 5 permits, taken at known times.
    set_clock(&mut con, T0 + 3_600_000);
    line::<i64>(&mut con, "RATELIMIT.SETRATE api 5 10000").unwrap();
    assert_eq!(try_acquire(&mut con, "api", 2), None);
    advance(&mut con, 4000);
    assert_eq!(try_acquire(&mut con, "api", 1), None);
    let _: String = redis::cmd("SAVE").query(&mut con).unwrap();
    let before = snapshot(&mut con);

    let copy = TempDir::new("rdb");
    copy_dir(&server.dir, &copy.0);
    assert!(
        copy.0.join("limiters.rdb").is_file(),
        "SAVE wrote no limiters.rdb"
    );
    drop(server);
    let restored = Server::start_with(
        &["debug-commands", "yes"],
        &["--dir", copy.path(), "--dbfilename", "limiters.rdb"],
    );
    let mut con = restored.conn();
    con.set_read_timeout(Some(HANG)).unwrap();
    let after = snapshot(&mut con);
    eprintln!("rdb: {} keys compared after SAVE and reload", before.len());
    assert!(before.len() >= 5);
    assert_eq!(after, before);

    // Same frozen instant as before the save: 2 permits left, then the restored entries expire
    // at exactly their own time + interval.
    set_clock(&mut con, T0 + 3_604_000);
    assert_eq!(line::<i64>(&mut con, "RATELIMIT.AVAILABLE api").unwrap(), 2);
    assert_eq!(try_acquire(&mut con, "api", 2), None);
    assert_eq!(try_acquire(&mut con, "api", 1), Some(6000));
    // The restored 2 permits taken at T0 + 3 600 000 are free again; the 1 taken 4 s later is not.
    advance(&mut con, 6000);
    assert_eq!(try_acquire(&mut con, "api", 3), Some(4000));
    assert_eq!(try_acquire(&mut con, "api", 2), None);
    assert_eq!(try_acquire(&mut con, "api", 1), Some(4000));
    let logged: u32 = log_entries(&mut con, "{api}:permits")
        .iter()
        .map(|(m, _)| member_permits(m))
        .sum();
    assert_eq!(logged, 5, "the restored log and the new entries");
}

#[test]
fn aof_keeps_every_acknowledged_grant_when_killed_mid_workload() {
    // A writer acquires without pause while the server is SIGKILLed under it. With appendfsync
    // always, every acknowledged grant must be in the AOF; the one command in flight may or may
    // not be; and since a grant's effects (ZADD, SET) are one MULTI/EXEC in the AOF, the value
    // and the log replayed without the module must agree: value = rate - permits logged.
    const RATE: i64 = 1_000_000;
    let mut master = Server::start_with(
        &["debug-commands", "yes"],
        &["--appendonly", "yes", "--appendfsync", "always"],
    );
    let mut con = master.conn();
    set_clock(&mut con, T0);
    line::<i64>(&mut con, &format!("RATELIMIT.SETRATE burst {RATE} 3600000")).unwrap();

    let acked = std::sync::Arc::new(std::sync::atomic::AtomicI64::new(0));
    let writer = {
        let acked = acked.clone();
        let mut con = master.conn();
        con.set_read_timeout(Some(HANG)).unwrap();
        thread::spawn(move || {
            for i in 0u64.. {
                let permits = if i % 7 == 0 { 3 } else { 1 };
                match line::<Option<i64>>(
                    &mut con,
                    &format!("RATELIMIT.TRYACQUIRE burst {permits}"),
                ) {
                    Ok(None) => {
                        acked.fetch_add(permits, std::sync::atomic::Ordering::SeqCst);
                    }
                    Ok(Some(ms)) => panic!("refused ({ms}) with the window nowhere near full"),
                    // The server died under the request: this one was in flight.
                    Err(_) => return permits,
                }
            }
            unreachable!()
        })
    };
    let deadline = Instant::now() + HANG;
    while acked.load(std::sync::atomic::Ordering::SeqCst) < 300 {
        assert!(Instant::now() < deadline, "the writer made no progress");
        thread::sleep(Duration::from_millis(5));
    }
    kill_9(&mut master);
    let in_flight = writer.join().expect("writer");
    let acked = acked.load(std::sync::atomic::Ordering::SeqCst);

    let copy = TempDir::new("midway");
    copy_dir(&master.dir, &copy.0);
    drop(master);
    let plain = Server::start_plain(&["--appendonly", "yes", "--dir", copy.path()]);
    let mut restored = plain.conn();
    let entries = log_entries(&mut restored, "{burst}:permits");
    assert!(
        entries.iter().all(|(m, _)| m.len() == 21),
        "every member is 21 bytes"
    );
    let logged: i64 = entries
        .iter()
        .map(|(m, _)| i64::from(member_permits(m)))
        .sum();
    eprintln!(
        "aof mid-workload: {acked} permits acknowledged, {logged} replayed, {in_flight} in flight"
    );
    assert!(
        logged == acked || logged == acked + in_flight,
        "acknowledged {acked}, in flight {in_flight}, replayed {logged}"
    );
    let value: i64 = get(&mut restored, "{burst}:value")
        .expect("value key")
        .parse()
        .expect("integer value");
    assert_eq!(value, RATE - logged, "value and log replayed out of step");
}
