//! A real `redis-server` on a free loopback port, killed (and its directory removed) when the
//! `Server` is dropped.
//!
//! One implementation for the tests (`tests/it/common/mod.rs`, whose `Server::start*` load the debug
//! build of the module and panic on failure) and the benchmark (`examples/bench/server.rs`, which
//! loads the release build, may run the server under valgrind, and returns errors). Both include
//! this file as a module, so it depends on nothing of either.
// Each including crate uses its own subset of these methods.
#![allow(dead_code)]

use std::fs;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

pub struct Server {
    child: Child,
    pub port: u16,
    pub dir: PathBuf,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        // A failing test keeps the server's directory (its log, its AOF) for a post-mortem.
        if std::thread::panicking() {
            eprintln!(
                "kept the failed test's server directory: {}",
                self.dir.display()
            );
        } else {
            let _ = fs::remove_dir_all(&self.dir);
        }
    }
}

impl Server {
    /// Runs `command` (the server binary, or a wrapper such as `valgrind ... redis-server`) with
    /// a free loopback port, no persistence, its own directory `<root>/redis-<port>` and log
    /// file there, then `args` (`--loadmodule <path> <module args>`, more server options), and
    /// waits up to `ready_within` for it to answer PING. Retries on a port taken in between; on
    /// failure returns the last server's log (or why it could not run).
    pub fn spawn(
        command: &[String],
        args: &[String],
        root: &Path,
        ready_within: Duration,
    ) -> Result<Server, String> {
        let (program, pre) = command
            .split_first()
            .ok_or_else(|| "no server command".to_string())?;
        let mut last_log = String::new();
        for _ in 0..5 {
            let port = free_port()?;
            let dir = root.join(format!("redis-{port}"));
            let _ = fs::remove_dir_all(&dir);
            fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
            let log = dir.join("redis.log");
            let child = Command::new(program)
                .args(pre)
                .arg("--port")
                .arg(port.to_string())
                .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
                .arg("--dir")
                .arg(&dir)
                .arg("--logfile")
                .arg(&log)
                .args(args)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .map_err(|e| format!("cannot run {program}: {e}"))?;
            let mut server = Server { child, port, dir };
            if server.wait_ready(ready_within) {
                return Ok(server);
            }
            last_log = fs::read_to_string(&log).unwrap_or_default();
        }
        Err(last_log)
    }

    fn wait_ready(&mut self, within: Duration) -> bool {
        let deadline = Instant::now() + within;
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return false;
            }
            if let Ok(mut con) = self.client().get_connection() {
                if redis::cmd("PING").query::<String>(&mut con).is_ok() {
                    return true;
                }
            }
            thread::sleep(Duration::from_millis(20));
        }
        false
    }

    /// Asks the server to exit (`SHUTDOWN NOSAVE`) and waits up to `within` for it; dropping
    /// then kills whatever is left. For a server under valgrind, which writes its last output
    /// on a clean exit.
    pub fn shutdown(mut self, within: Duration) {
        if let Ok(mut con) = self.client().get_connection() {
            let _: Result<(), _> = redis::cmd("SHUTDOWN").arg("NOSAVE").query(&mut con);
        }
        self.wait_exit(within);
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    pub fn client(&self) -> redis::Client {
        redis::Client::open(self.url()).expect("valid url")
    }

    /// The server's log so far, for assertion messages.
    pub fn log(&self) -> String {
        fs::read_to_string(self.dir.join("redis.log")).unwrap_or_default()
    }

    /// Whether the process is still running (a module panic aborts it).
    pub fn is_alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends a signal (`STOP`, `CONT`, `KILL` ...) to the server process.
    pub fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(self.pid().to_string())
            .status()
            .expect("kill");
        assert!(status.success(), "kill -{signal} {}", self.pid());
    }

    /// Waits for the process to exit on its own; its exit status, or None if it still runs.
    pub fn wait_exit(&mut self, within: Duration) -> Option<std::process::ExitStatus> {
        let deadline = Instant::now() + within;
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status);
            }
            if Instant::now() >= deadline {
                return None;
            }
            thread::sleep(Duration::from_millis(10));
        }
    }
}

/// The server binary: `$REDIS_SERVER`, or `redis-server` (set it to `valkey-server` for Valkey).
pub fn server_binary() -> String {
    std::env::var("REDIS_SERVER").unwrap_or_else(|_| "redis-server".into())
}

/// A free loopback port any server can take, a cluster node included: at most 55535 (a node's
/// bus port is 10 000 above its own, and the server refuses a port beyond that), with that bus
/// port free too. The kernel's own pick (port 0) comes from the ephemeral range, up to 60999, and
/// in sequence: once above 55535, every retry would be too.
fn free_port() -> Result<u16, String> {
    let bindable = |port: u16| TcpListener::bind(("127.0.0.1", port)).is_ok();
    for _ in 0..200 {
        let port = rand::random_range(20000..=55535u16);
        if bindable(port) && bindable(port + 10000) {
            return Ok(port);
        }
    }
    Err("no free loopback port from 20000 to 55535 with its bus port free".into())
}
