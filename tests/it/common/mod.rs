//! Test harness: a real `redis-server` with the built module, on a free loopback port, stopped
//! (and its directory removed) when the `Server` is dropped (`server.rs`, shared with the
//! benchmark). Time comes from the module's debug clock (`RATELIMIT.DEBUG SETCLOCK/ADVANCE`),
//! never from sleeps.
#![allow(dead_code)]

use std::fs;
use std::path::{Path, PathBuf};
use std::thread;
use std::time::{Duration, Instant, SystemTime};

pub use redis::{Connection, RedisError, Value};

pub mod cluster;
pub mod reference;
pub mod server;
pub mod waiters;

pub use server::{server_binary, Server};

/// A unix-ms instant the tests freeze the clock at: 2026-01-01T00:00:00Z.
pub const T0: i64 = 1_767_225_600_000;

/// How long a test waits for something it is sure will happen (a reply, a replica's link, a
/// count in INFO) before calling it a hang. Only a hang: no test asserts how long anything
/// took, so a slow or busy machine passes the same tests as an idle one.
pub const HANG: Duration = Duration::from_secs(60);

impl Server {
    /// A server with the module and its debug commands.
    pub fn start() -> Server {
        Server::start_with(&["debug-commands", "yes"], &[])
    }

    /// A server with the module loaded with `module_args`, and extra `redis-server` arguments
    /// (`["--appendonly", "yes"]`).
    pub fn start_with(module_args: &[&str], server_args: &[&str]) -> Server {
        let module = module_path();
        let mut load = vec![module.to_string_lossy().into_owned()];
        load.extend(module_args.iter().map(|s| s.to_string()));
        let mut args: Vec<String> = vec!["--loadmodule".into()];
        args.extend(load);
        args.extend(server_args.iter().map(|s| s.to_string()));
        launch(&args)
    }

    /// A plain server without the module (a replica that must not need it, for instance).
    pub fn start_plain(server_args: &[&str]) -> Server {
        let args: Vec<String> = server_args.iter().map(|s| s.to_string()).collect();
        launch(&args)
    }

    /// A replica of `master`, with the module (loaded without debug commands) or without it
    /// (a plain redis-server, which must still end up identical: effects replication). Returns
    /// once its link to the master is up.
    pub fn start_replica(master: &Server, with_module: bool) -> Server {
        Server::start_replica_with(master, with_module, &[])
    }

    /// As [`Server::start_replica`], with extra `redis-server` arguments.
    pub fn start_replica_with(master: &Server, with_module: bool, extra: &[&str]) -> Server {
        // The default waits 5 s for more replicas before a diskless full sync.
        let _: () = redis::cmd("CONFIG")
            .arg("SET")
            .arg("repl-diskless-sync-delay")
            .arg(0)
            .query(&mut master.conn())
            .expect("CONFIG SET");
        let port = master.port.to_string();
        let mut args = vec!["--replicaof", "127.0.0.1", port.as_str()];
        args.extend_from_slice(extra);
        let replica = if with_module {
            Server::start_with(&[], &args)
        } else {
            Server::start_plain(&args)
        };
        let mut con = replica.conn();
        let deadline = Instant::now() + HANG;
        loop {
            let info: String = redis::cmd("INFO")
                .arg("replication")
                .query(&mut con)
                .expect("INFO");
            if info.contains("master_link_status:up") {
                return replica;
            }
            assert!(
                Instant::now() < deadline,
                "replica never synced:\n{info}\n{}",
                replica.log()
            );
            thread::sleep(Duration::from_millis(20));
        }
    }

    /// A RESP2 connection.
    pub fn conn(&self) -> Connection {
        self.client().get_connection().expect("connect")
    }

    /// A RESP3 connection (`HELLO 3`).
    pub fn conn_resp3(&self) -> Connection {
        redis::Client::open(format!("{}?protocol=resp3", self.url()))
            .expect("valid url")
            .get_connection()
            .expect("connect")
    }
}

/// `$REDIS_SERVER` with `args`, its directory under cargo's temporary directory for tests.
fn launch(args: &[String]) -> Server {
    let root = Path::new(env!("CARGO_TARGET_TMPDIR"));
    Server::spawn(&[server_binary()], args, root, HANG)
        .unwrap_or_else(|log| panic!("redis-server did not start:\n{log}"))
}

/// `target/<profile>/libratelimit.so`, next to this test binary's `deps/` folder, or
/// `$RATELIMIT_MODULE`. Refuses a module older than the sources: `cargo test` does not rebuild a
/// cdylib, so a stale one would test old code (`make test` builds it first).
pub fn module_path() -> PathBuf {
    if let Ok(path) = std::env::var("RATELIMIT_MODULE") {
        return PathBuf::from(path);
    }
    let exe = std::env::current_exe().expect("test binary path");
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("target/<profile>/deps/<test>");
    let module = profile_dir.join("libratelimit.so");
    let built = fs::metadata(&module)
        .and_then(|m| m.modified())
        .unwrap_or_else(|_| {
            panic!(
                "{} is missing: run `make test` (or `cargo build` first)",
                module.display()
            )
        });
    // The module's sources and the core crate's, which it links.
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let newest = [root.join("src"), root.join("core/src")]
        .iter()
        .filter_map(|dir| newest_mtime(dir))
        .max();
    if let Some(newest) = newest {
        assert!(
            newest <= built,
            "{} is older than src/ or core/src/: run `make test` (or `cargo build` first)",
            module.display()
        );
    }
    module
}

fn newest_mtime(dir: &Path) -> Option<SystemTime> {
    fs::read_dir(dir)
        .ok()?
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let path = entry.path();
            if path.is_dir() {
                newest_mtime(&path)
            } else {
                entry.metadata().and_then(|m| m.modified()).ok()
            }
        })
        .max()
}

/// Blocks until `replicas` replicas acknowledged every write made so far on `con`'s master.
pub fn wait_replicas(con: &mut Connection, replicas: usize) {
    let acked: usize = redis::cmd("WAIT")
        .arg(replicas)
        .arg(HANG.as_millis() as u64)
        .query(con)
        .expect("WAIT");
    assert!(
        acked >= replicas,
        "only {acked} of {replicas} replicas acknowledged"
    );
}

/// Freezes the module clock at `ms`.
pub fn set_clock(con: &mut Connection, ms: i64) {
    let _: String = redis::cmd("RATELIMIT.DEBUG")
        .arg("SETCLOCK")
        .arg(ms)
        .query(con)
        .expect("SETCLOCK");
}

/// Moves the frozen clock forward.
pub fn advance(con: &mut Connection, ms: i64) {
    let _: i64 = redis::cmd("RATELIMIT.DEBUG")
        .arg("ADVANCE")
        .arg(ms)
        .query(con)
        .expect("ADVANCE");
}

/// Runs a command given as words; binary-safe arguments.
pub fn run<T: redis::FromRedisValue>(
    con: &mut Connection,
    words: &[&[u8]],
) -> redis::RedisResult<T> {
    let (name, rest) = words.split_first().expect("a command name");
    let mut cmd = redis::cmd(std::str::from_utf8(name).expect("ascii command name"));
    for word in rest {
        cmd.arg(*word);
    }
    cmd.query(con)
}

/// Runs a command given as one space-separated line (arguments without spaces).
pub fn line<T: redis::FromRedisValue>(con: &mut Connection, text: &str) -> redis::RedisResult<T> {
    let words: Vec<&[u8]> = text.split_whitespace().map(str::as_bytes).collect();
    run(con, &words)
}

/// TRYACQUIRE's reply: None = acquired, Some(ms) = wait.
pub fn try_acquire(con: &mut Connection, key: &str, permits: u32) -> Option<i64> {
    line(con, &format!("RATELIMIT.TRYACQUIRE {key} {permits}")).expect("TRYACQUIRE")
}

/// The full error line a client sees, e.g. `ERR syntax error` or `WRONGTYPE Operation ...`.
pub fn error_line(e: &RedisError) -> String {
    match (e.code(), e.detail()) {
        (Some(code), Some(detail)) => format!("{code} {detail}"),
        (Some(code), None) => code.to_string(),
        _ => e.to_string(),
    }
}

/// Runs a command that must fail and returns its error line.
pub fn error_of(con: &mut Connection, text: &str) -> String {
    match line::<Value>(con, text) {
        Ok(v) => panic!("`{text}` succeeded with {v:?}, expected an error"),
        Err(e) => error_line(&e),
    }
}

/// Every key with its DUMP payload and its absolute expiry: the whole dataset, comparable
/// across servers and before/after a failed command.
pub fn snapshot(con: &mut Connection) -> Vec<(Vec<u8>, Vec<u8>, i64)> {
    let mut keys: Vec<Vec<u8>> = redis::cmd("KEYS").arg("*").query(con).expect("KEYS");
    keys.sort();
    keys.into_iter()
        .map(|key| {
            let dump: Vec<u8> = redis::cmd("DUMP").arg(&key).query(con).expect("DUMP");
            let at: i64 = redis::cmd("PEXPIRETIME")
                .arg(&key)
                .query(con)
                .expect("PEXPIRETIME");
            (key, dump, at)
        })
        .collect()
}

/// Members of a permits zset with their scores, oldest first.
pub fn log_entries(con: &mut Connection, key: &str) -> Vec<(Vec<u8>, i64)> {
    redis::cmd("ZRANGE")
        .arg(key)
        .arg(0)
        .arg(-1)
        .arg("WITHSCORES")
        .query(con)
        .expect("ZRANGE")
}

/// The permits logged in a permits zset, each member decoded.
pub fn logged_permits(con: &mut Connection, key: &str) -> u32 {
    log_entries(con, key)
        .iter()
        .map(|(member, _)| member_permits(member))
        .sum()
}

/// The permits of one member, decoded as the keyspace contract says: its length must fit one of
/// Redisson's layouts (`fI`: 8 bytes, `Bc0I`: 1 + byte 0 + 4, `Lc0I`: 8 + u64le(bytes 0..8) + 4),
/// and the permits are its last 4 bytes, little-endian.
pub fn member_permits(member: &[u8]) -> u32 {
    let len = member.len() as u128;
    let bc0i = 1 + u128::from(member[0]) + 4 == len;
    let lc0i = member.len() >= 8
        && 8 + u128::from(u64::from_le_bytes(member[..8].try_into().expect("8 bytes"))) + 4 == len;
    assert!(len == 8 || bc0i || lc0i, "{member:?} fits no layout");
    u32::from_le_bytes(member[member.len() - 4..].try_into().expect("4 bytes"))
}

/// xorshift64: a deterministic pseudo-random sequence for workloads, so a failing run can be
/// replayed from its seed (no crate needed).
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    /// In `0..n` (`n` > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// An index in `0..n` (`n` > 0).
    pub fn index(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    pub fn one_in(&mut self, n: usize) -> bool {
        self.index(n) == 0
    }

    /// True `percent` times in a hundred.
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.index(items.len())]
    }

    /// Up to `max_len` random bytes.
    pub fn bytes(&mut self, max_len: usize) -> Vec<u8> {
        let len = self.index(max_len + 1);
        (0..len).map(|_| self.next() as u8).collect()
    }
}

/// GET as a string.
pub fn get(con: &mut Connection, key: &str) -> Option<String> {
    line(con, &format!("GET {key}")).expect("GET")
}

pub fn exists(con: &mut Connection, key: &str) -> bool {
    line::<i64>(con, &format!("EXISTS {key}")).expect("EXISTS") == 1
}

pub fn pttl(con: &mut Connection, key: &str) -> i64 {
    line(con, &format!("PTTL {key}")).expect("PTTL")
}

pub fn dump(con: &mut Connection, key: &str) -> Option<Vec<u8>> {
    line(con, &format!("DUMP {key}")).expect("DUMP")
}

/// RATELIMIT.AVAILABLE of an OVERALL limiter.
pub fn available(con: &mut Connection, name: &str) -> i64 {
    line(con, &format!("RATELIMIT.AVAILABLE {name}")).expect("AVAILABLE")
}

/// The permits a log holds with a score in the window `(now - interval, now]`.
pub fn permits_in_window(con: &mut Connection, log: &str, now: i64, interval: i64) -> i64 {
    log_entries(con, log)
        .iter()
        .filter(|(_, score)| *score > now - interval && *score <= now)
        .map(|(member, _)| i64::from(member_permits(member)))
        .sum()
}

/// The server's own clock in unix ms (TTLs run on it, not on the module's debug clock).
pub fn server_ms(con: &mut Connection) -> i64 {
    let (secs, micros): (i64, i64) = redis::cmd("TIME").query(con).expect("TIME");
    secs * 1000 + micros / 1000
}

/// One field of an INFO section.
pub fn info_field(con: &mut Connection, section: &str, field: &str) -> Option<String> {
    let info: String = redis::cmd("INFO").arg(section).query(con).expect("INFO");
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .map(|v| v.trim().to_string())
}

/// `calls` of a command in the server's INFO commandstats (0 if it never ran).
pub fn command_calls(con: &mut Connection, command: &str) -> i64 {
    let stats: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(con)
        .expect("INFO");
    stats
        .lines()
        .find_map(|l| l.strip_prefix(&format!("cmdstat_{command}:calls=")))
        .and_then(|rest| rest.split(',').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// Collects `__keyevent@0__` notifications (event, key) until the sentinel key is set.
pub fn keyevents_until_sentinel(mut pubsub: redis::PubSub<'_>) -> Vec<(String, Vec<u8>)> {
    let mut events = Vec::new();
    pubsub.set_read_timeout(Some(HANG)).unwrap();
    loop {
        let message = pubsub.get_message().expect("a keyspace event");
        let event = message
            .get_channel_name()
            .trim_start_matches("__keyevent@0__:")
            .to_string();
        let key: Vec<u8> = message.get_payload().unwrap();
        if key == b"sentinel" {
            return events;
        }
        events.push((event, key));
    }
}

/// How a server has hash field TTLs (HPEXPIRE, Redis 7.4+ and Valkey 9).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldTtls {
    None,
    /// Shown to modules (Redis 8).
    Shown,
    /// Hidden from modules (Redis 7.4, Valkey 9): the module asks HPTTL.
    Hidden,
}

pub fn field_ttls(con: &mut Connection) -> FieldTtls {
    let supported: Value = redis::cmd("COMMAND")
        .arg("INFO")
        .arg("HPEXPIRE")
        .query(con)
        .unwrap();
    if matches!(&supported, Value::Array(items) if items.iter().all(|v| *v == Value::Nil)) {
        return FieldTtls::None;
    }
    let valkey = info_field(con, "server", "valkey_version").is_some();
    let redis_major = info_field(con, "server", "redis_version")
        .and_then(|v| v.split('.').next().and_then(|m| m.parse::<u32>().ok()))
        .unwrap_or(0);
    if valkey || redis_major < 8 {
        FieldTtls::Hidden
    } else {
        FieldTtls::Shown
    }
}

/// Waits until the server's clock has passed `at` (a hang after HANG).
pub fn wait_for_server_time(con: &mut Connection, at: i64) {
    let deadline = Instant::now()
        + HANG
        + Duration::from_millis(u64::try_from(at - server_ms(con)).unwrap_or(0));
    while server_ms(con) <= at {
        assert!(
            Instant::now() < deadline,
            "the server's clock never passed {at}"
        );
        thread::sleep(Duration::from_millis(10));
    }
}

/// Field TTLs run on the server's real clock: each test of them acts before the field expires
/// and after. What it does before must all have been answered before the expiry (checked on the
/// server's clock); on a machine too slow for that, the attempt shows nothing and runs again
/// with a longer TTL.
pub const FIELD_TTLS_MS: [i64; 3] = [1000, 10_000, 60_000];
