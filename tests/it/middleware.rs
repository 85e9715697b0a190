//! The HTTP middleware examples of `examples/middleware` (docs/application-guide.md), each run as
//! the real app, with its real Redis client, against a real server: a user's first `LIMIT`
//! requests get 200 and the right `X-RateLimit-*` headers, the next gets 429 and `Retry-After`,
//! other users are independent, the limiters exist in Redis as `RATE ... KEEPALIVE` made them,
//! `/report`'s ACQUIRE gives up on its `TIMEOUT` without leaving a waiter behind, and `/search`'s
//! ALLOWALL takes from a user's two search limits together or from neither.
//!
//! The apps' packages come from `make deps-examples` (`make test` runs it). A missing toolchain
//! or package fails the test with what to install: the examples are part of what we ship.
//!
//! Each also runs pointed at a real 3-master cluster (`REDIS_CLUSTER`): the same checks, on the
//! master of each key's slot, users whose limiters live on every master, and no command sent to a
//! node that does not serve its key (`errorstat_MOVED` absent from every node's `INFO errorstats`).
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

use crate::common::cluster::Cluster;
use crate::common::waiters::{field, info};
use crate::common::*;

/// The examples' limit: 10 requests a minute per user; KEEPALIVE is the interval.
const LIMIT: i64 = 10;
const INTERVAL_MS: i64 = 60_000;

const INSTALL: &str = "run `make deps-examples` (`make test` does)";

#[test]
fn python_middleware() {
    exercise("python", python(), &mut Backend::server());
}

#[test]
fn node_middleware() {
    exercise("node", node(), &mut Backend::server());
}

#[test]
fn go_middleware() {
    exercise("go", go("single"), &mut Backend::server());
}

#[test]
fn java_middleware() {
    exercise("java", java(), &mut Backend::server());
}

#[test]
fn python_middleware_in_a_cluster() {
    in_a_cluster("python", python());
}

#[test]
fn node_middleware_in_a_cluster() {
    in_a_cluster("node", node());
}

#[test]
fn go_middleware_in_a_cluster() {
    in_a_cluster("go", go("cluster"));
}

#[test]
fn java_middleware_in_a_cluster() {
    in_a_cluster("java", java());
}

fn python() -> Command {
    let dir = example_dir("python");
    let python = repo().join("target/examples-venv/bin/python");
    require(&python, "the Python venv with redis-py");
    let mut cmd = Command::new(python);
    cmd.arg("app.py").current_dir(dir);
    cmd
}

fn node() -> Command {
    let dir = example_dir("node");
    require(&dir.join("node_modules/ioredis"), "ioredis in node_modules");
    let mut cmd = Command::new("node");
    cmd.arg("app.js").current_dir(dir);
    cmd
}

/// The Go example built into a binary of its own for each test (`name`), so that two tests
/// building at once do not write the same file.
fn go(name: &str) -> Command {
    let dir = example_dir("go");
    let binary = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("middleware-go-{name}"));
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
    Command::new(binary)
}

fn java() -> Command {
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
    cmd
}

/// What the app talks to: one server, or a cluster, where each key is looked up on the master
/// that serves its slot.
enum Backend {
    Server(Server, Connection),
    Cluster(Cluster),
}

impl Backend {
    fn server() -> Backend {
        let server = Server::start_with(&[], &[]);
        let con = server.conn();
        Backend::Server(server, con)
    }

    /// The environment that points the app here.
    fn env(&self) -> (&'static str, String) {
        match self {
            Backend::Server(server, _) => {
                ("REDIS_URL", format!("redis://127.0.0.1:{}", server.port))
            }
            Backend::Cluster(cluster) => {
                let seeds: Vec<String> = cluster
                    .nodes
                    .iter()
                    .map(|n| format!("127.0.0.1:{}", n.port))
                    .collect();
                ("REDIS_CLUSTER", seeds.join(","))
            }
        }
    }

    /// A connection to the node that serves `key`.
    fn con(&mut self, key: &str) -> &mut Connection {
        match self {
            Backend::Server(_, con) => con,
            Backend::Cluster(cluster) => {
                let node = cluster.owner(key.as_bytes());
                &mut cluster.conns[node]
            }
        }
    }

    fn all(&mut self) -> Vec<&mut Connection> {
        match self {
            Backend::Server(_, con) => vec![con],
            Backend::Cluster(cluster) => cluster.conns.iter_mut().collect(),
        }
    }
}

/// The app pointed at a 3-master cluster: everything [`exercise`] checks, then users whose
/// limiters live on each master, and not one command sent to a node that does not serve its key:
/// a client that does not know where a command's key is sends it to any master, which answers
/// MOVED (the client follows it, so only the error counts show it).
fn in_a_cluster(lang: &str, cmd: Command) {
    let mut backend = Backend::Cluster(Cluster::start_on_real_clock());
    for con in backend.all() {
        let _: () = redis::cmd("CONFIG").arg("RESETSTAT").query(con).unwrap();
    }
    let mut app = exercise(lang, cmd, &mut backend);
    let Backend::Cluster(cluster) = &mut backend else {
        unreachable!("a cluster backend")
    };
    for node in 0..cluster.nodes.len() {
        let user = (0..)
            .map(|i| format!("user{i}"))
            .find(|user| cluster.owner(format!("api:user:{user}").as_bytes()) == node)
            .expect("a user on every master");
        for i in 1..=2 {
            let r = app.get("/", Some(&user));
            assert_eq!(r.status, 200, "{lang}: {user} on node {node}:\n{r}");
            assert_eq!(r.int("X-RateLimit-Remaining"), LIMIT - i, "{lang}:\n{r}");
        }
        let log = format!("{{api:user:{user}}}:permits");
        assert_eq!(
            logged_permits(&mut cluster.conns[node], &log),
            2,
            "{lang}: {log}"
        );
    }
    for (node, con) in cluster.conns.iter_mut().enumerate() {
        let errors = info(con, "errorstats");
        assert!(
            !errors.contains("errorstat_MOVED") && !errors.contains("errorstat_ASK"),
            "{lang}: node {node} redirected commands sent to it:\n{errors}"
        );
        let calls = info(con, "commandstats");
        assert!(
            calls.contains("cmdstat_ratelimit.allow:"),
            "{lang}: node {node} served no RATELIMIT.ALLOW:\n{calls}"
        );
    }
    assert!(app.is_alive(), "{lang}: the app exited:\n{}", app.log());
}

/// Starts the app on a free port against `backend`, and checks everything it promises; the app,
/// still running.
fn exercise(lang: &str, cmd: Command, backend: &mut Backend) -> App {
    let mut app = App::start(lang, cmd, backend.env());

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
    let log = log_entries(
        backend.con("{api:user:alice}:permits"),
        "{api:user:alice}:permits",
    );
    let (oldest, newest) = (log[0].1, log[log.len() - 1].1);
    let before = server_ms(backend.con("alice"));
    let r = app.get("/", Some("alice"));
    let after = server_ms(backend.con("alice"));
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
        logged_permits(
            backend.con("{api:user:alice}:permits"),
            "{api:user:alice}:permits"
        ),
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
            config_of(backend.con(&key), &key),
            limiter_config(LIMIT, INTERVAL_MS),
            "{lang}: {key}"
        );
        let ttl: i64 = redis::cmd("PTTL")
            .arg(&key)
            .query(backend.con(&key))
            .unwrap();
        assert!(0 < ttl && ttl <= INTERVAL_MS, "{lang}: PTTL {key} = {ttl}");
        let log = format!("{{{key}}}:permits");
        assert_eq!(
            logged_permits(backend.con(&log), &log),
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
    let taken = log_entries(backend.con("{reports}:permits"), "{reports}:permits")[0].1;
    let before = server_ms(backend.con("alice"));
    let r = app.get("/report", Some("carol"));
    let after = server_ms(backend.con("alice"));
    assert_eq!(r.status, 503, "{lang}:\n{r}");
    assert!(r.body.contains("busy"), "{lang}:\n{r}");
    assert_eq!(r.int("X-RateLimit-Remaining"), LIMIT - 2, "{lang}:\n{r}");
    assert_seconds(lang, &r, "Retry-After", taken + INTERVAL_MS, before, after);
    assert_eq!(
        config_of(backend.con("reports"), "reports"),
        limiter_config(1, 60_000)
    );
    assert_eq!(
        logged_permits(backend.con("{reports}:permits"), "{reports}:permits"),
        1,
        "{lang}"
    );
    // The waiter left with its reply: none is queued to take a permit nobody would use.
    let blocked: f64 = backend
        .all()
        .into_iter()
        .map(|con| field(&info(con, "clients"), "blocked_clients"))
        .sum();
    assert_eq!(blocked, 0.0, "{lang}: a waiter is still queued");

    // /search: RATELIMIT.ALLOWALL on the user's own two search limits (3 a minute, 100 a day),
    // made by SETRATE ... NX on first use: three pass, the fourth is refused by the minute limit
    // and charges the day limit nothing.
    for i in 1..=3 {
        let r = app.get("/search", Some("dave"));
        assert_eq!(r.status, 200, "{lang}: search {i} of dave:\n{r}");
        assert!(r.body.contains("results for dave"), "{lang}:\n{r}");
    }
    let r = app.get("/search", Some("dave"));
    assert_eq!(r.status, 429, "{lang}: search 4 of dave:\n{r}");
    assert!(
        r.body
            .contains("search limit reached: {search:dave}:minute"),
        "{lang}:\n{r}"
    );
    assert!(r.int("Retry-After") >= 1, "{lang}:\n{r}");
    for (limit, rate, interval) in [("minute", 3, 60_000), ("day", 100, 86_400_000)] {
        let key = format!("{{search:dave}}:{limit}");
        let mut config = limiter_config(rate, interval);
        for (field, value) in &mut config {
            if field == "keepAliveTime" {
                *value = "86400000".to_string();
            }
        }
        assert_eq!(config_of(backend.con(&key), &key), config, "{lang}: {key}");
        let log = format!("{key}:permits");
        assert_eq!(logged_permits(backend.con(&log), &log), 3, "{lang}: {log}");
    }

    assert!(app.is_alive(), "{lang}: the app exited:\n{}", app.log());
    app
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
    fn start(lang: &str, mut cmd: Command, (variable, value): (&str, String)) -> App {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .expect("a free loopback port");
        let log = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("middleware-{lang}.log"));
        let out = fs::File::create(&log).expect("app log");
        let err = out.try_clone().expect("app log");
        let program = cmd.get_program().to_string_lossy().into_owned();
        let child = cmd
            .env_remove("REDIS_URL")
            .env_remove("REDIS_CLUSTER")
            .env(variable, value)
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
