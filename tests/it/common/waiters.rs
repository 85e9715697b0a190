//! Clients blocked in a command, each on its own thread and connection, and the server's counts
//! of blocked clients: shared by the tests of ACQUIRE and of operations with waiters.

use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use super::*;

/// What a client calling ACQUIRE was told.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    Acquired,
    Wait(i64),
    Error(String),
}

pub fn reply_of(result: redis::RedisResult<Value>) -> Reply {
    match result {
        Ok(Value::Nil) => Reply::Acquired,
        Ok(Value::Int(ms)) => Reply::Wait(ms),
        Ok(other) => Reply::Error(format!("unexpected reply {other:?}")),
        Err(e) => Reply::Error(error_line(&e)),
    }
}

/// A client blocked (or about to block) in a command, on its own thread and connection.
pub struct Waiter {
    /// Its CLIENT ID.
    pub id: i64,
    handle: JoinHandle<Served>,
}

/// How a waiter's command ended.
#[derive(Debug)]
pub struct Served {
    pub reply: Reply,
    pub sent: Instant,
    pub returned: Instant,
}

impl Served {
    pub fn elapsed_ms(&self) -> u128 {
        (self.returned - self.sent).as_millis()
    }
}

impl Waiter {
    pub fn join(self) -> Served {
        self.handle.join().expect("waiter thread")
    }

    pub fn is_done(&self) -> bool {
        self.handle.is_finished()
    }
}

/// Sends `command` (one space-separated line) on a new connection from a new thread; a reply
/// that never comes fails the read after [`HANG`].
pub fn spawn(server: &Server, command: &str) -> Waiter {
    spawn_with_timeout(server, command, HANG)
}

pub fn spawn_with_timeout(server: &Server, command: &str, read_timeout: Duration) -> Waiter {
    let mut con = server.conn();
    con.set_read_timeout(Some(read_timeout))
        .expect("read timeout");
    let id: i64 = line(&mut con, "CLIENT ID").expect("CLIENT ID");
    let command = command.to_string();
    let handle = thread::spawn(move || {
        let sent = Instant::now();
        let reply = reply_of(line::<Value>(&mut con, &command));
        Served {
            reply,
            sent,
            returned: Instant::now(),
        }
    });
    Waiter { id, handle }
}

/// Sends `command` and waits until the server counts one more blocked client.
pub fn park(server: &Server, con: &mut Connection, command: &str) -> Waiter {
    let before = blocked(con).1;
    let waiter = spawn(server, command);
    wait_blocked(con, before + 1);
    waiter
}

pub fn info(con: &mut Connection, section: &str) -> String {
    redis::cmd("INFO").arg(section).query(con).expect("INFO")
}

pub fn field(info: &str, name: &str) -> f64 {
    info.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
        .unwrap_or_else(|| panic!("no {name} in INFO:\n{info}"))
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("{name} is not a number in INFO:\n{info}"))
}

/// A counter of `INFO ratelimit` (`ratelimit_<name>`).
pub fn stat(con: &mut Connection, name: &str) -> i64 {
    field(&info(con, "ratelimit"), &format!("ratelimit_{name}")) as i64
}

/// (`INFO clients` blocked_clients, `INFO ratelimit` ratelimit_blocked_clients).
pub fn blocked(con: &mut Connection) -> (i64, i64) {
    let clients = field(&info(con, "clients"), "blocked_clients") as i64;
    (clients, stat(con, "blocked_clients"))
}

/// As [`park`], for a command that a slow setup may let through without blocking (its permit
/// freed on the real clock meanwhile): None if it was served instead of blocking.
pub fn try_park(server: &Server, con: &mut Connection, command: &str) -> Option<Waiter> {
    let before = blocked(con).1;
    let waiter = spawn(server, command);
    let deadline = Instant::now() + HANG;
    loop {
        if blocked(con) == (before + 1, before + 1) {
            return Some(waiter);
        }
        if waiter.is_done() {
            return None;
        }
        assert!(
            Instant::now() < deadline,
            "`{command}` neither blocked nor returned"
        );
        thread::sleep(Duration::from_millis(2));
    }
}

/// Waits until both blocked-client counts are `n` (a hang after [`HANG`]).
pub fn wait_blocked(con: &mut Connection, n: i64) {
    let deadline = Instant::now() + HANG;
    loop {
        let counts = blocked(con);
        if counts == (n, n) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "blocked clients (INFO clients, INFO ratelimit) = {counts:?}, expected {n} in both"
        );
        thread::sleep(Duration::from_millis(2));
    }
}

/// Waits until `waiter` has its reply (a hang after [`HANG`]). That a reply came "at once" is
/// shown by what else could have served it: on a frozen debug clock no timer grants anything.
pub fn served(waiter: Waiter) -> Served {
    let deadline = Instant::now() + HANG;
    while !waiter.is_done() {
        assert!(
            Instant::now() < deadline,
            "the waiter had no reply within {HANG:?}: a hang"
        );
        thread::sleep(Duration::from_millis(2));
    }
    waiter.join()
}

pub fn sleep_ms(ms: u64) {
    thread::sleep(Duration::from_millis(ms));
}
