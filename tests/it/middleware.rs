//! The HTTP middleware examples of `examples/middleware` (docs/application-guide.md), each run as
//! the real app, with its real Redis client, against a real server: a user's first `LIMIT`
//! requests get 200 and the right `X-RateLimit-*` headers, the next gets 429 and `Retry-After`,
//! other users are independent, the limiters exist in Redis as `RATE ... KEEPALIVE` made them, and
//! `/report`'s ACQUIRE gives up on its `TIMEOUT` without leaving a waiter behind.
//!
//! The apps' packages come from `make deps-examples` (`make test` runs it). A missing toolchain
//! or package fails the test with what to install: the examples are part of what we ship.
//!
//! Time is the real clock here (the apps cannot drive the debug clock): header values are checked
//! against bounds computed from the permit log's timestamps and the server's `TIME` read just
//! before and just after each request, never against how long something took.

use std::fmt;
use std::fs;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use crate::common::waiters::{field, info};
use crate::common::*;

/// The examples' limit: 10 requests a minute per user; KEEPALIVE is the interval.
const LIMIT: i64 = 10;
const INTERVAL_MS: i64 = 60_000;

const INSTALL: &str = "run `make deps-examples` (`make test` does)";

#[test]
fn python_middleware() {
    let dir = example_dir("python");
    let python = repo().join("target/examples-venv/bin/python");
    require(&python, "the Python venv with redis-py");
    let mut cmd = Command::new(python);
    cmd.arg("app.py").current_dir(dir);
    exercise("python", cmd);
}

#[test]
fn node_middleware() {
    let dir = example_dir("node");
    require(&dir.join("node_modules/ioredis"), "ioredis in node_modules");
    let mut cmd = Command::new("node");
    cmd.arg("app.js").current_dir(dir);
    exercise("node", cmd);
}

#[test]
fn go_middleware() {
    let dir = example_dir("go");
    let binary = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("middleware-go");
    // GOPROXY=off: a module missing from the cache fails here rather than being fetched.
    let output = Command::new("go")
        .args(["build", "-o"])
        .arg(&binary)
        .arg(".")
        .current_dir(&dir)
        .env("GOPROXY", "off")
        .env("GOFLAGS", "-mod=readonly")
        .output()
        .unwrap_or_else(|e| panic!("cannot run `go` ({e}): install Go 1.26, then {INSTALL}"));
    assert!(
        output.status.success(),
        "go build failed ({INSTALL}):\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    exercise("go", Command::new(binary));
}

#[test]
fn java_middleware() {
    let dir = example_dir("java");
    let lib = dir.join("target/lib");
    let jedis = fs::read_dir(&lib)
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .any(|entry| entry.file_name().to_string_lossy().starts_with("jedis-"));
    assert!(jedis, "Jedis is missing from {}: {INSTALL}", lib.display());
    // The source-file launcher compiles App.java as it is now, against the jars Maven fetched.
    let mut cmd = Command::new("java");
    cmd.arg("-cp")
        .arg(lib.join("*"))
        .arg("src/main/java/example/App.java")
        .current_dir(dir);
    exercise("java", cmd);
}

/// Starts the app on a free port against a fresh server, and checks everything it promises.
fn exercise(lang: &str, cmd: Command) {
    let server = Server::start_with(&[], &[]);
    let mut app = App::start(lang, cmd, &server);
    let mut con = server.conn();

    // One user's first LIMIT requests: 200, counting down. Right after a grant the newest
    // permit is this one, so everything logged expires one whole interval from now.
    for i in 1..=LIMIT {
        let r = app.get("/", Some("alice"));
        assert_eq!(r.status, 200, "{lang}: request {i} of alice:\n{r}");
        assert!(r.body.contains("hello alice"), "{lang}:\n{r}");
        assert_eq!(r.int("X-RateLimit-Limit"), LIMIT, "{lang}:\n{r}");
        assert_eq!(r.int("X-RateLimit-Remaining"), LIMIT - i, "{lang}:\n{r}");
        assert_eq!(
            r.int("X-RateLimit-Reset"),
            INTERVAL_MS / 1000,
            "{lang}:\n{r}"
        );
        assert_eq!(r.header("Retry-After"), None, "{lang}:\n{r}");
    }

    // The next one: 429. Retry-After is when alice's oldest permit leaves the window,
    // X-RateLimit-Reset when her newest does, both in seconds rounded up.
    let log = log_entries(&mut con, "{api:user:alice}:permits");
    let (oldest, newest) = (log[0].1, log[log.len() - 1].1);
    let before = server_ms(&mut con);
    let r = app.get("/", Some("alice"));
    let after = server_ms(&mut con);
    assert_eq!(
        r.status,
        429,
        "{lang}: request {} of alice:\n{r}",
        LIMIT + 1
    );
    assert_eq!(r.int("X-RateLimit-Limit"), LIMIT, "{lang}:\n{r}");
    assert_eq!(r.int("X-RateLimit-Remaining"), 0, "{lang}:\n{r}");
    assert_seconds(lang, &r, "Retry-After", oldest + INTERVAL_MS, before, after);
    assert_seconds(
        lang,
        &r,
        "X-RateLimit-Reset",
        newest + INTERVAL_MS,
        before,
        after,
    );
    assert_eq!(
        logged_permits(&mut con, "{api:user:alice}:permits"),
        LIMIT as u32,
        "{lang}: a refused request must take nothing"
    );

    // Another user has a limiter of his own.
    let r = app.get("/", Some("bob"));
    assert_eq!(r.status, 200, "{lang}:\n{r}");
    assert!(r.body.contains("hello bob"), "{lang}:\n{r}");
    assert_eq!(r.int("X-RateLimit-Remaining"), LIMIT - 1, "{lang}:\n{r}");

    // Without X-User, the remote address is the user.
    let r = app.get("/", None);
    assert_eq!(r.status, 200, "{lang}:\n{r}");
    assert_eq!(r.int("X-RateLimit-Remaining"), LIMIT - 1, "{lang}:\n{r}");

    // Each limiter was made by its first ALLOW's RATE: OVERALL, KEEPALIVE = interval, and the
    // TTL that KEEPALIVE sets.
    for (user, permits) in [("alice", LIMIT), ("bob", 1), ("127.0.0.1", 1)] {
        let key = format!("api:user:{user}");
        assert_eq!(
            config_of(&mut con, &key),
            limiter_config(LIMIT, INTERVAL_MS),
            "{lang}: {key}"
        );
        let ttl: i64 = redis::cmd("PTTL").arg(&key).query(&mut con).unwrap();
        assert!(0 < ttl && ttl <= INTERVAL_MS, "{lang}: PTTL {key} = {ttl}");
        let log = format!("{{{key}}}:permits");
        assert_eq!(
            logged_permits(&mut con, &log),
            permits as u32,
            "{lang}: {log}"
        );
    }

    // /report: RATELIMIT.ACQUIRE on the shared `reports` limiter (1 a minute), behind the same
    // per-user middleware. The first takes the permit; the second waits its TIMEOUT (1 s) in
    // the server and gets 503 with the hint as Retry-After.
    let r = app.get("/report", Some("carol"));
    assert_eq!(r.status, 200, "{lang}:\n{r}");
    assert!(r.body.contains("report for carol"), "{lang}:\n{r}");
    assert_eq!(r.int("X-RateLimit-Remaining"), LIMIT - 1, "{lang}:\n{r}");
    let taken = log_entries(&mut con, "{reports}:permits")[0].1;
    let before = server_ms(&mut con);
    let r = app.get("/report", Some("carol"));
    let after = server_ms(&mut con);
    assert_eq!(r.status, 503, "{lang}:\n{r}");
    assert!(r.body.contains("busy"), "{lang}:\n{r}");
    assert_eq!(r.int("X-RateLimit-Remaining"), LIMIT - 2, "{lang}:\n{r}");
    assert_seconds(lang, &r, "Retry-After", taken + INTERVAL_MS, before, after);
    assert_eq!(config_of(&mut con, "reports"), limiter_config(1, 60_000));
    assert_eq!(logged_permits(&mut con, "{reports}:permits"), 1, "{lang}");
    // The waiter left with its reply: none is queued to take a permit nobody would use.
    let blocked = field(&info(&mut con, "clients"), "blocked_clients");
    assert_eq!(blocked, 0.0, "{lang}: a waiter is still queued");

    assert!(app.is_alive(), "{lang}: the app exited:\n{}", app.log());
}

/// `header` is `at` - now in seconds, rounded up, for a `now` between `before` and `after`.
fn assert_seconds(lang: &str, r: &Response, header: &str, at: i64, before: i64, after: i64) {
    let ceil = |ms: i64| (ms + 999).div_euclid(1000);
    let (low, high) = (ceil(at - after), ceil(at - before));
    let got = r.int(header);
    assert!(
        low <= got && got <= high && got >= 1,
        "{lang}: {header} = {got}, expected {low}..={high} (ms rounded up to seconds):\n{r}"
    );
}

/// A limiter hash as SETRATE (or RATE) writes it: rate, interval, type 0 (OVERALL), keepAliveTime.
fn limiter_config(rate: i64, interval: i64) -> Vec<(String, String)> {
    let mut fields = vec![
        ("interval".to_string(), interval.to_string()),
        ("keepAliveTime".to_string(), interval.to_string()),
        ("rate".to_string(), rate.to_string()),
        ("type".to_string(), "0".to_string()),
    ];
    fields.sort();
    fields
}

fn config_of(con: &mut Connection, key: &str) -> Vec<(String, String)> {
    let mut fields: Vec<(String, String)> = redis::cmd("HGETALL").arg(key).query(con).unwrap();
    fields.sort();
    fields
}

/// The server's clock in unix ms (the module's real clock reads the same system time).
fn server_ms(con: &mut Connection) -> i64 {
    let (secs, micros): (i64, i64) = redis::cmd("TIME").query(con).unwrap();
    secs * 1000 + micros / 1000
}

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn example_dir(lang: &str) -> PathBuf {
    repo().join("examples/middleware").join(lang)
}

fn require(path: &Path, what: &str) {
    assert!(
        path.exists(),
        "{what} is missing ({} does not exist): {INSTALL}",
        path.display()
    );
}

/// An example app on a free loopback port; killed when dropped.
struct App {
    lang: String,
    child: Child,
    port: u16,
    log: PathBuf,
}

impl Drop for App {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl App {
    fn start(lang: &str, mut cmd: Command, server: &Server) -> App {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .expect("a free loopback port");
        let log = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("middleware-{lang}.log"));
        let out = fs::File::create(&log).expect("app log");
        let err = out.try_clone().expect("app log");
        let program = cmd.get_program().to_string_lossy().into_owned();
        let child = cmd
            .env("REDIS_URL", format!("redis://127.0.0.1:{}", server.port))
            .env("PORT", port.to_string())
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .unwrap_or_else(|e| {
                panic!("{lang}: cannot run `{program}` ({e}): install it, then {INSTALL}")
            });
        let mut app = App {
            lang: lang.to_string(),
            child,
            port,
            log,
        };
        // Java compiles App.java first, and the machine may be busy: be generous.
        let deadline = Instant::now() + HANG;
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                app.is_alive(),
                "{lang}: the app exited before listening ({INSTALL}):\n{}",
                app.log()
            );
            assert!(
                Instant::now() < deadline,
                "{lang}: the app is not listening on {port} after 60 s:\n{}",
                app.log()
            );
            thread::sleep(Duration::from_millis(50));
        }
        app
    }

    fn is_alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    fn log(&self) -> String {
        fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// One HTTP/1.1 GET on a connection of its own, read to the end.
    fn get(&self, path: &str, user: Option<&str>) -> Response {
        let mut stream = TcpStream::connect(("127.0.0.1", self.port)).expect("connect to the app");
        stream.set_read_timeout(Some(HANG)).unwrap();
        let user = user.map_or(String::new(), |u| format!("X-User: {u}\r\n"));
        let request = format!(
            "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\n{user}Connection: close\r\n\r\n",
            self.port
        );
        stream.write_all(request.as_bytes()).unwrap();
        let mut raw = Vec::new();
        stream
            .read_to_end(&mut raw)
            .unwrap_or_else(|e| panic!("{}: GET {path}: {e}\n{}", self.lang, self.log()));
        Response::parse(&String::from_utf8_lossy(&raw))
            .unwrap_or_else(|| panic!("{}: GET {path}: not an HTTP response", self.lang))
    }
}

struct Response {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Response {
    fn parse(raw: &str) -> Option<Response> {
        let (head, body) = raw.split_once("\r\n\r\n")?;
        let mut lines = head.split("\r\n");
        let status = lines.next()?.split(' ').nth(1)?.parse().ok()?;
        let headers = lines
            .filter_map(|line| line.split_once(':'))
            .map(|(name, value)| (name.trim().to_string(), value.trim().to_string()))
            .collect();
        Some(Response {
            status,
            headers,
            body: body.to_string(),
        })
    }

    /// A header's value; names are case-insensitive.
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// A header that must be there and hold an integer.
    fn int(&self, name: &str) -> i64 {
        self.header(name)
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no integer {name} header:\n{self}"))
    }
}

impl fmt::Display for Response {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        writeln!(f, "HTTP {}", self.status)?;
        for (name, value) in &self.headers {
            writeln!(f, "{name}: {value}")?;
        }
        write!(f, "\n{}", self.body)
    }
}
