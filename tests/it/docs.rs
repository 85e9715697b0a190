//! The documentation cannot rot: every redis-cli session in `README.md` and `docs/**/*.md` runs
//! here, on a real server with the module, and every reply must read exactly as the page shows
//! it; every relative link and `#anchor` must resolve.
//!
//! # The convention the pages follow
//!
//! A session is a fenced block whose info string starts with `redis-cli`, made of prompt lines
//! (`127.0.0.1:6380> COMMAND ...`, or `127.0.0.1:6380(TX)> ...` inside `MULTI`) each followed by
//! the reply as redis-cli prints it on a terminal: `(integer) 1`, `(nil)`, `"bulk"`, `OK`,
//! `(error) ERR ...`, numbered arrays with nesting, RESP3 maps as `1# "k" => v`, and `INFO` raw.
//! Words after `redis-cli` in the info string:
//!
//! - `continue`: the block goes on with the server (and sessions) of the previous block of the
//!   same page; otherwise it gets a fresh server (module loaded with `debug-commands yes`, real
//!   clock until the block freezes it with `RATELIMIT.DEBUG SETCLOCK`).
//! - `session=N`: the block is typed in redis-cli session N (default 1) of that server: the
//!   multi-client examples (ACQUIRE's queue) are several blocks, one per session.
//! - `resp3`: the session speaks RESP3 (`redis-cli -3`).
//! - `cluster`: the server is a one-node Redis Cluster that owns every slot.
//! - `unchecked`: the block is not run. Rare, and each one is listed in [`UNCHECKED`] with the
//!   reason; the test fails if the list and the pages disagree.
//!
//! A command whose prompt line ends a block without a reply is blocked (ACQUIRE waiting): the
//! test sends it, waits until the server counts one more blocked client, and reads its reply
//! where a later block of the same session repeats the command with the reply under it.
//!
//! Any other fenced block that contains a prompt line fails the test, so no session can slip
//! in unchecked by accident. Replies that depend on the real clock must not appear in a checked
//! block: freeze the clock, or leave the number out.

use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::thread;
use std::time::{Duration, Instant};

use crate::common::{Server, HANG};

/// The blocks that are not run, by page and first command, and why. Each is an example of
/// something a single scripted run cannot show truthfully.
const UNCHECKED: &[(&str, &str, &str)] = &[
    (
        "docs/commands/acquire.md",
        "RATELIMIT.SETRATE jobs 2 1000",
        "ACQUIRE on the real clock, with the wait times redis-cli prints: the point is the real \
         waiting, which a frozen clock would hide (the same steps run checked on the debug \
         clock in the blocks after it)",
    ),
    (
        "docs/operations.md",
        "COMMAND DOCS ratelimit.acquire",
        "COMMAND DOCS differs by server: Redis 7.2+ and Valkey add a display_text to every argument",
    ),
];

const PROMPT: &str = "127.0.0.1:6380> ";
const PROMPT_TX: &str = "127.0.0.1:6380(TX)> ";

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// README.md and every page under docs/, sorted, as paths relative to the repository root.
fn pages() -> Vec<String> {
    fn walk(dir: &Path, out: &mut Vec<String>) {
        let Ok(entries) = fs::read_dir(dir) else {
            return;
        };
        for entry in entries.filter_map(Result::ok) {
            let path = entry.path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "md") {
                let relative = path.strip_prefix(root()).expect("under the root");
                out.push(relative.to_string_lossy().into_owned());
            }
        }
    }
    let mut out = vec!["README.md".to_string()];
    walk(&root().join("docs"), &mut out);
    out.sort();
    out
}

// ---------------------------------------------------------------------------------------------
// Parsing the pages

#[derive(Debug, Default, Clone)]
struct Options {
    checked: bool,
    continues: bool,
    session: usize,
    resp3: bool,
    cluster: bool,
}

#[derive(Debug)]
struct Step {
    line: usize,
    command: String,
    /// The reply lines; None when the prompt line ends the block without one (blocked).
    expected: Option<String>,
}

#[derive(Debug)]
struct Block {
    page: String,
    line: usize,
    options: Options,
    steps: Vec<Step>,
}

/// A fenced block: its info string, the line of its opening fence, its lines (indent removed).
struct Fence {
    info: String,
    line: usize,
    lines: Vec<String>,
}

fn fences(text: &str) -> Vec<Fence> {
    let mut out = Vec::new();
    let mut open: Option<(usize, Fence)> = None;
    for (i, raw) in text.lines().enumerate() {
        let trimmed = raw.trim_start();
        let indent = raw.len() - trimmed.len();
        match open.take() {
            None => {
                if let Some(info) = trimmed.strip_prefix("```") {
                    open = Some((
                        indent,
                        Fence {
                            info: info.trim().to_string(),
                            line: i + 1,
                            lines: Vec::new(),
                        },
                    ));
                }
            }
            Some((fence_indent, mut fence)) => {
                if trimmed.starts_with("```") {
                    out.push(fence);
                } else {
                    let cut = raw
                        .char_indices()
                        .take_while(|(n, c)| *n < fence_indent && *c == ' ')
                        .count();
                    fence.lines.push(raw[cut..].to_string());
                    open = Some((fence_indent, fence));
                }
            }
        }
    }
    assert!(open.is_none(), "a fenced block is never closed");
    out
}

fn prompt_command(line: &str) -> Option<&str> {
    line.strip_prefix(PROMPT)
        .or_else(|| line.strip_prefix(PROMPT_TX))
}

fn parse_options(page: &str, line: usize, info: &str) -> Options {
    let mut options = Options {
        checked: true,
        session: 1,
        ..Options::default()
    };
    for word in info.split_whitespace().skip(1) {
        match word {
            "continue" => options.continues = true,
            "resp3" => options.resp3 = true,
            "cluster" => options.cluster = true,
            "unchecked" => options.checked = false,
            _ => match word.strip_prefix("session=").and_then(|n| n.parse().ok()) {
                Some(n) => options.session = n,
                None => panic!("{page}:{line}: unknown redis-cli block option '{word}'"),
            },
        }
    }
    options
}

fn blocks(page: &str) -> Vec<Block> {
    let text = fs::read_to_string(root().join(page)).unwrap_or_else(|e| panic!("{page}: {e}"));
    blocks_of(page, &text)
}

/// The redis-cli blocks of a page's text.
fn blocks_of(page: &str, text: &str) -> Vec<Block> {
    let mut out = Vec::new();
    for fence in fences(text) {
        let is_session = fence.info.split_whitespace().next() == Some("redis-cli");
        if !is_session {
            if let Some(n) = fence.lines.iter().position(|l| prompt_command(l).is_some()) {
                panic!(
                    "{page}:{}: a redis-cli session in a block not marked ```redis-cli",
                    fence.line + 1 + n
                );
            }
            continue;
        }
        let options = parse_options(page, fence.line, &fence.info);
        let mut steps: Vec<Step> = Vec::new();
        let mut reply: Vec<String> = Vec::new();
        for (n, text) in fence.lines.iter().enumerate() {
            let line = fence.line + 1 + n;
            if let Some(command) = prompt_command(text) {
                if let Some(last) = steps.last_mut() {
                    last.expected = Some(reply.join("\n"));
                    assert!(
                        !reply.is_empty(),
                        "{page}:{}: '{}' shows no reply (only the last command of a block may \
                         be left blocked)",
                        last.line,
                        last.command
                    );
                }
                reply.clear();
                steps.push(Step {
                    line,
                    command: command.to_string(),
                    expected: None,
                });
            } else {
                assert!(
                    !steps.is_empty(),
                    "{page}:{line}: a redis-cli block must start with a prompt"
                );
                reply.push(text.clone());
            }
        }
        if let Some(last) = steps.last_mut() {
            if !reply.is_empty() {
                last.expected = Some(reply.join("\n"));
            }
        }
        assert!(
            !steps.is_empty(),
            "{page}:{}: empty redis-cli block",
            fence.line
        );
        out.push(Block {
            page: page.to_string(),
            line: fence.line,
            options,
            steps,
        });
    }
    out
}

/// Splits a command line into arguments as redis-cli does (`"..."` with `\"`, `\\`, `\n`,
/// `\xHH` escapes; `'...'` with `\'`; otherwise runs of non-blanks).
fn split_args(line: &str) -> Result<Vec<Vec<u8>>, String> {
    let bytes = line.as_bytes();
    let mut args = Vec::new();
    let mut i = 0;
    loop {
        while i < bytes.len() && bytes[i].is_ascii_whitespace() {
            i += 1;
        }
        if i == bytes.len() {
            return Ok(args);
        }
        let mut arg = Vec::new();
        match bytes[i] {
            b'"' => {
                i += 1;
                loop {
                    match bytes.get(i) {
                        None => return Err("unbalanced \"".into()),
                        Some(b'"') => {
                            i += 1;
                            break;
                        }
                        Some(b'\\') => {
                            let next = bytes.get(i + 1).copied().ok_or("trailing \\")?;
                            let hex = bytes
                                .get(i + 2..i + 4)
                                .and_then(|h| std::str::from_utf8(h).ok())
                                .and_then(|h| u8::from_str_radix(h, 16).ok());
                            match (next, hex) {
                                (b'x', Some(byte)) => {
                                    arg.push(byte);
                                    i += 4;
                                    continue;
                                }
                                (b'n', _) => arg.push(b'\n'),
                                (b'r', _) => arg.push(b'\r'),
                                (b't', _) => arg.push(b'\t'),
                                (b'b', _) => arg.push(8),
                                (b'a', _) => arg.push(7),
                                (other, _) => arg.push(other),
                            }
                            i += 2;
                        }
                        Some(&c) => {
                            arg.push(c);
                            i += 1;
                        }
                    }
                }
            }
            b'\'' => {
                i += 1;
                loop {
                    match bytes.get(i) {
                        None => return Err("unbalanced '".into()),
                        Some(b'\'') => {
                            i += 1;
                            break;
                        }
                        Some(b'\\') if bytes.get(i + 1) == Some(&b'\'') => {
                            arg.push(b'\'');
                            i += 2;
                        }
                        Some(&c) => {
                            arg.push(c);
                            i += 1;
                        }
                    }
                }
            }
            _ => {
                while i < bytes.len() && !bytes[i].is_ascii_whitespace() {
                    arg.push(bytes[i]);
                    i += 1;
                }
            }
        }
        if i < bytes.len() && !bytes[i].is_ascii_whitespace() {
            return Err("a closing quote must be followed by a space".into());
        }
        args.push(arg);
    }
}

// ---------------------------------------------------------------------------------------------
// A RESP2/RESP3 client that keeps every detail redis-cli shows (simple vs bulk strings, maps).

#[derive(Debug)]
enum Reply {
    Simple(String),
    Error(String),
    Integer(i64),
    Bulk(Vec<u8>),
    Nil,
    Array(Vec<Reply>),
    Set(Vec<Reply>),
    Map(Vec<(Reply, Reply)>),
    Double(String),
    Boolean(bool),
    BigNumber(String),
    Verbatim(Vec<u8>),
}

struct Session {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
    resp3: bool,
    /// A command sent whose reply is still to come (a blocked ACQUIRE).
    pending: Option<String>,
}

impl Session {
    fn connect(port: u16) -> Session {
        let stream = TcpStream::connect(("127.0.0.1", port)).expect("connect");
        stream.set_read_timeout(Some(HANG)).expect("read timeout");
        Session {
            reader: BufReader::new(stream.try_clone().expect("clone stream")),
            writer: stream,
            resp3: false,
            pending: None,
        }
    }

    fn send(&mut self, args: &[Vec<u8>]) {
        let mut out = format!("*{}\r\n", args.len()).into_bytes();
        for arg in args {
            out.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
            out.extend_from_slice(arg);
            out.extend_from_slice(b"\r\n");
        }
        self.writer.write_all(&out).expect("send");
    }

    fn call(&mut self, words: &[&str]) -> Reply {
        let args: Vec<Vec<u8>> = words.iter().map(|w| w.as_bytes().to_vec()).collect();
        self.send(&args);
        self.read()
    }

    fn read_line(&mut self) -> String {
        let mut line = String::new();
        self.reader.read_line(&mut line).expect("read a reply");
        assert!(line.ends_with("\r\n"), "truncated reply line {line:?}");
        line.truncate(line.len() - 2);
        line
    }

    fn read_bytes(&mut self, len: usize) -> Vec<u8> {
        let mut data = vec![0; len + 2];
        self.reader.read_exact(&mut data).expect("read a bulk");
        data.truncate(len);
        data
    }

    fn read(&mut self) -> Reply {
        let line = self.read_line();
        let (kind, rest) = line.split_at(1);
        let count = || -> i64 { rest.parse().expect("a length") };
        match kind {
            "+" => Reply::Simple(rest.to_string()),
            "-" => Reply::Error(rest.to_string()),
            ":" => Reply::Integer(rest.parse().expect("an integer")),
            "_" => Reply::Nil,
            "," => Reply::Double(rest.to_string()),
            "#" => Reply::Boolean(rest == "t"),
            "(" => Reply::BigNumber(rest.to_string()),
            "$" | "!" | "=" if count() < 0 => Reply::Nil,
            "$" => Reply::Bulk(self.read_bytes(count() as usize)),
            "!" => Reply::Error(String::from_utf8_lossy(&self.read_bytes(count() as usize)).into()),
            "=" => {
                let data = self.read_bytes(count() as usize);
                Reply::Verbatim(data.get(4..).unwrap_or_default().to_vec())
            }
            "*" | "~" | ">" if count() < 0 => Reply::Nil,
            "*" | ">" => Reply::Array((0..count()).map(|_| self.read()).collect()),
            "~" => Reply::Set((0..count()).map(|_| self.read()).collect()),
            "%" => Reply::Map((0..count()).map(|_| (self.read(), self.read())).collect()),
            other => panic!("unknown reply type {other:?} in {line:?}"),
        }
    }
}

/// A bulk string as redis-cli quotes it (`sdscatrepr`).
fn quoted(bytes: &[u8]) -> String {
    let mut out = String::from("\"");
    for &b in bytes {
        match b {
            b'\\' => out.push_str("\\\\"),
            b'"' => out.push_str("\\\""),
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            b'\t' => out.push_str("\\t"),
            7 => out.push_str("\\a"),
            8 => out.push_str("\\b"),
            0x20..=0x7e => out.push(b as char),
            _ => out.push_str(&format!("\\x{b:02x}")),
        }
    }
    out.push('"');
    out
}

/// A reply as redis-cli prints it on a terminal (`cliFormatReplyTTY`), without the final
/// newline; `prefix` is the indentation of nested aggregates.
fn render(reply: &Reply, prefix: &str) -> String {
    let items: Vec<(&Reply, Option<&Reply>)> = match reply {
        Reply::Simple(s) => return s.clone(),
        Reply::Error(e) => return format!("(error) {e}"),
        Reply::Integer(n) => return format!("(integer) {n}"),
        Reply::Bulk(b) => return quoted(b),
        Reply::Nil => return "(nil)".into(),
        Reply::Double(d) => return format!("(double) {d}"),
        Reply::Boolean(b) => return format!("({b})"),
        Reply::BigNumber(n) => return format!("(big number) {n}"),
        Reply::Verbatim(v) => return String::from_utf8_lossy(v).into_owned(),
        Reply::Array(a) | Reply::Set(a) => a.iter().map(|r| (r, None)).collect(),
        Reply::Map(m) => m.iter().map(|(k, v)| (k, Some(v))).collect(),
    };
    let (empty, separator) = match reply {
        Reply::Set(_) => ("(empty set)", '~'),
        Reply::Map(_) => ("(empty hash)", '#'),
        _ => ("(empty array)", ')'),
    };
    if items.is_empty() {
        return empty.into();
    }
    // The index width is that of the last index (a map's counts its pairs, as redis-cli 7.0
    // prints `1# "allowed" => ...` for ALLOW's five).
    let width = items.len().to_string().len();
    let nested = format!("{prefix}{}", " ".repeat(width + 2));
    let mut out = String::new();
    for (i, (item, value)) in items.iter().enumerate() {
        if i > 0 {
            out.push('\n');
            out.push_str(prefix);
        }
        out.push_str(&format!("{:>width$}{separator} ", i + 1));
        out.push_str(&render(item, &nested));
        if let Some(value) = value {
            out.push_str(" => ");
            out.push_str(&render(value, &nested));
        }
    }
    out
}

/// `INFO` is printed raw by redis-cli: the bulk as it is, lines without their `\r`.
fn render_for(command: &[Vec<u8>], reply: &Reply) -> String {
    let raw = command
        .first()
        .is_some_and(|name| name.eq_ignore_ascii_case(b"info"));
    match reply {
        Reply::Bulk(b) if raw => String::from_utf8_lossy(b)
            .replace("\r\n", "\n")
            .trim_end()
            .to_string(),
        _ => render(reply, ""),
    }
}

// ---------------------------------------------------------------------------------------------
// Running the blocks

struct Env {
    server: Server,
    /// Asks the server how many clients are blocked; never part of an example.
    admin: Session,
    sessions: HashMap<usize, Session>,
}

impl Env {
    fn start(cluster: bool) -> Env {
        let server = if cluster {
            Server::start_with(
                &["debug-commands", "yes"],
                &[
                    "--cluster-enabled",
                    "yes",
                    "--cluster-config-file",
                    "nodes.conf",
                ],
            )
        } else {
            Server::start()
        };
        let mut admin = Session::connect(server.port);
        if cluster {
            let reply = admin.call(&["CLUSTER", "ADDSLOTSRANGE", "0", "16383"]);
            assert!(
                matches!(reply, Reply::Simple(_)),
                "ADDSLOTSRANGE: {reply:?}"
            );
            let deadline = Instant::now() + HANG;
            loop {
                let info = render_for(&[b"info".to_vec()], &admin.call(&["CLUSTER", "INFO"]));
                if info.contains("cluster_state:ok") {
                    break;
                }
                assert!(Instant::now() < deadline, "cluster never ok:\n{info}");
                thread::sleep(Duration::from_millis(20));
            }
        }
        Env {
            server,
            admin,
            sessions: HashMap::new(),
        }
    }

    fn blocked_clients(&mut self) -> i64 {
        let info = render_for(&[b"info".to_vec()], &self.admin.call(&["INFO", "clients"]));
        info.lines()
            .find_map(|l| l.strip_prefix("blocked_clients:"))
            .and_then(|n| n.trim().parse().ok())
            .expect("blocked_clients in INFO clients")
    }
}

/// Runs one block; a mismatch is returned as a message naming the page and line.
fn run_block(block: &Block, env: &mut Env) -> Result<(), String> {
    let port = env.server.port;
    let session = env
        .sessions
        .entry(block.options.session)
        .or_insert_with(|| Session::connect(port));
    if session.resp3 != block.options.resp3 {
        let version = if block.options.resp3 { "3" } else { "2" };
        if let Reply::Error(e) = session.call(&["HELLO", version]) {
            return Err(format!(
                "{}:{}: HELLO {version}: {e}",
                block.page, block.line
            ));
        }
        session.resp3 = block.options.resp3;
    }
    for (n, step) in block.steps.iter().enumerate() {
        let at = format!("{}:{}", block.page, step.line);
        let args = split_args(&step.command).map_err(|e| format!("{at}: {e}"))?;
        let session = env
            .sessions
            .get_mut(&block.options.session)
            .expect("the session");
        let resumed = n == 0 && session.pending.as_deref() == Some(step.command.as_str());
        if let Some(pending) = &session.pending {
            if !resumed {
                return Err(format!(
                    "{at}: session {} still waits for the reply to '{pending}'; repeat that \
                     command with its reply first",
                    block.options.session
                ));
            }
        }
        let Some(expected) = &step.expected else {
            // Left blocked: send it, and go on once the server has blocked it.
            let before = env.blocked_clients();
            let session = env
                .sessions
                .get_mut(&block.options.session)
                .expect("the session");
            session.send(&args);
            session.pending = Some(step.command.clone());
            let deadline = Instant::now() + HANG;
            while env.blocked_clients() <= before {
                if Instant::now() > deadline {
                    return Err(format!(
                        "{at}: '{}' shows no reply but never blocked",
                        step.command
                    ));
                }
                thread::sleep(Duration::from_millis(5));
            }
            continue;
        };
        if resumed {
            session.pending = None;
        } else {
            session.send(&args);
        }
        let got = render_for(&args, &session.read());
        if &got != expected {
            return Err(format!(
                "{at}: {}\n--- the page shows:\n{expected}\n--- the server replied:\n{got}\n",
                step.command
            ));
        }
    }
    Ok(())
}

/// Runs every checked block of a page, in order; returns the failures.
fn run_page(blocks: &[Block]) -> Vec<String> {
    let mut failures = Vec::new();
    let mut env: Option<Env> = None;
    // A failed block leaves the server in a state the page does not describe: the blocks that
    // continue it are skipped (the failure is reported once).
    let mut broken = false;
    for block in blocks.iter().filter(|b| b.options.checked) {
        if !block.options.continues {
            env = Some(Env::start(block.options.cluster));
            broken = false;
        }
        let Some(current) = env.as_mut() else {
            assert!(
                broken,
                "{}:{}: 'continue' with no block before it",
                block.page, block.line
            );
            continue;
        };
        if let Err(failure) = run_block(block, current) {
            failures.push(failure);
            env = None;
            broken = true;
        }
    }
    if let Some(mut env) = env {
        for (n, session) in &env.sessions {
            if let Some(pending) = &session.pending {
                failures.push(format!(
                    "session {n} of a block ends blocked in '{pending}', whose reply no block shows"
                ));
            }
        }
        assert!(
            env.server.is_alive(),
            "the server died:\n{}",
            env.server.log()
        );
    }
    failures
}

#[test]
fn every_redis_cli_example_replies_as_the_page_shows() {
    let mut failures = Vec::new();
    let mut checked = 0;
    let mut unchecked = Vec::new();
    for page in pages() {
        let blocks = blocks(&page);
        for block in &blocks {
            if block.options.checked {
                checked += 1;
            } else {
                unchecked.push((page.clone(), block.steps[0].command.clone()));
            }
        }
        failures.extend(run_page(&blocks));
    }
    assert!(
        failures.is_empty(),
        "{} of {checked} checked examples differ from the server:\n\n{}",
        failures.len(),
        failures.join("\n")
    );
    let listed: Vec<(String, String)> = UNCHECKED
        .iter()
        .map(|(page, command, _)| (page.to_string(), command.to_string()))
        .collect();
    assert_eq!(
        unchecked, listed,
        "the unchecked blocks (page, first command) must be exactly those listed, with a reason, \
         in UNCHECKED"
    );
    // The pages hold many sessions: a parser that found none would check nothing.
    assert!(checked >= 40, "only {checked} checked blocks found");
    eprintln!(
        "{checked} redis-cli blocks checked, {} unchecked",
        unchecked.len()
    );
}

// ---------------------------------------------------------------------------------------------
// Links

/// Files linked that another branch adds. Tolerated only while missing: once a file exists, its
/// entry must go, and the link is checked like any other.
const PENDING_FILES: &[&str] = &[];

/// A heading's anchor as GitHub makes it: lower case, punctuation dropped (but `-` and `_`),
/// spaces to `-`, and `-1`, `-2` ... on repeats.
fn anchors(text: &str) -> Vec<String> {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut out = Vec::new();
    let mut in_fence = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            in_fence = !in_fence;
            continue;
        }
        if in_fence {
            continue;
        }
        let Some(title) = line
            .strip_prefix('#')
            .map(|l| l.trim_start_matches('#'))
            .filter(|l| l.starts_with(' '))
        else {
            continue;
        };
        let slug: String = title
            .trim()
            .to_lowercase()
            .chars()
            .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
            .map(|c| if c == ' ' { '-' } else { c })
            .collect();
        let count = seen.entry(slug.clone()).or_insert(0);
        out.push(if *count == 0 {
            slug.clone()
        } else {
            format!("{slug}-{count}")
        });
        *count += 1;
    }
    out
}

/// The targets of the inline links `[text](target)` of a page, outside code.
fn links(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut in_fence = false;
    for (n, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            in_fence = !in_fence;
            continue;
        }
        if in_fence {
            continue;
        }
        // Drop inline code spans, where brackets are not links.
        let prose: String = line
            .split('`')
            .enumerate()
            .filter(|(i, _)| i % 2 == 0)
            .map(|(_, s)| s)
            .collect::<Vec<_>>()
            .join(" ");
        let mut rest = prose.as_str();
        while let Some(at) = rest.find("](") {
            let after = &rest[at + 2..];
            let Some(end) = after.find(')') else {
                break;
            };
            out.push((n + 1, after[..end].to_string()));
            rest = &after[end..];
        }
    }
    out
}

#[test]
fn every_relative_link_and_anchor_resolves() {
    let mut broken = Vec::new();
    let mut checked = 0;
    let mut pending_used = Vec::new();
    for page in pages() {
        let text = fs::read_to_string(root().join(&page)).expect("read page");
        let dir = Path::new(&page).parent().unwrap_or(Path::new(""));
        for (line, target) in links(&text) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            checked += 1;
            let (path, anchor) = match target.split_once('#') {
                Some((path, anchor)) => (path, Some(anchor)),
                None => (target.as_str(), None),
            };
            let file = if path.is_empty() {
                PathBuf::from(&page)
            } else {
                normalize(&dir.join(path))
            };
            let file_name = file.to_string_lossy().into_owned();
            if !root().join(&file).exists() {
                if PENDING_FILES.contains(&file_name.as_str()) && anchor.is_none() {
                    pending_used.push(file_name);
                } else {
                    broken.push(format!("{page}:{line}: {target}: no file {file_name}"));
                }
                continue;
            }
            if let Some(anchor) = anchor {
                let target_text = fs::read_to_string(root().join(&file)).unwrap_or_default();
                if !anchors(&target_text).iter().any(|a| a == anchor) {
                    broken.push(format!("{page}:{line}: {target}: no heading #{anchor}"));
                }
            }
        }
    }
    for pending in PENDING_FILES {
        assert!(
            !root().join(pending).exists(),
            "{pending} exists now: remove it from PENDING_FILES so its links are checked"
        );
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
    assert!(checked >= 50, "only {checked} relative links found");
    eprintln!(
        "{checked} relative links checked ({} to a file another branch adds)",
        pending_used.len()
    );
}

/// `docs/commands/../keyspace.md` -> `docs/keyspace.md`.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            std::path::Component::ParentDir => {
                out.pop();
            }
            std::path::Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// The checker checks: its own parts, on known inputs.

#[test]
fn replies_render_as_redis_cli_prints_them() {
    let array = Reply::Array(vec![
        Reply::Bulk(b"ratelimit.acquire".to_vec()),
        Reply::Array(
            (0..10)
                .map(Reply::Integer)
                .chain([Reply::Array(vec![Reply::Simple("optional".into())])])
                .collect(),
        ),
    ]);
    let want = "1) \"ratelimit.acquire\"\n\
                2)  1) (integer) 0\n    \
                    2) (integer) 1\n    \
                    3) (integer) 2\n    \
                    4) (integer) 3\n    \
                    5) (integer) 4\n    \
                    6) (integer) 5\n    \
                    7) (integer) 6\n    \
                    8) (integer) 7\n    \
                    9) (integer) 8\n   \
                   10) (integer) 9\n   \
                   11) 1) optional";
    assert_eq!(render(&array, ""), want);
    let map = Reply::Map(vec![
        (Reply::Bulk(b"rate".to_vec()), Reply::Integer(100)),
        (Reply::Simple("type".into()), Reply::Nil),
    ]);
    assert_eq!(
        render(&map, ""),
        "1# \"rate\" => (integer) 100\n2# type => (nil)"
    );
    assert_eq!(
        render(&Reply::Bulk(b"\x10k\"\\\n\x00".to_vec()), ""),
        "\"\\x10k\\\"\\\\\\n\\x00\""
    );
    assert_eq!(render(&Reply::Error("ERR x".into()), ""), "(error) ERR x");
    assert_eq!(render(&Reply::Array(vec![]), ""), "(empty array)");
    assert_eq!(
        split_args(r#"EVAL "return {'a', \"b\"}" 1 {x}:y '\'q'"#).unwrap(),
        vec![
            b"EVAL".to_vec(),
            b"return {'a', \"b\"}".to_vec(),
            b"1".to_vec(),
            b"{x}:y".to_vec(),
            b"'q".to_vec()
        ]
    );
    assert!(split_args("GET \"a\"b").is_err());
}

#[test]
fn a_wrong_reply_on_a_page_is_caught() {
    // The same parser and runner as the pages, on a page whose second reply is wrong.
    let text = "Text.\n\n\
                ```redis-cli\n\
                127.0.0.1:6380> SET k v\n\
                OK\n\
                127.0.0.1:6380> GET k\n\
                \"w\"\n\
                ```\n";
    let blocks = blocks_of("fixture.md", text);
    assert_eq!(blocks.len(), 1);
    assert_eq!(blocks[0].steps.len(), 2);
    let failures = run_page(&blocks);
    assert_eq!(failures.len(), 1, "{failures:?}");
    assert!(
        failures[0].starts_with("fixture.md:6: GET k"),
        "{}",
        failures[0]
    );
    assert!(failures[0].contains("\"v\""), "{}", failures[0]);
    // A session outside a redis-cli block is refused.
    let untagged = "```\n127.0.0.1:6380> PING\nPONG\n```\n";
    assert!(std::panic::catch_unwind(|| blocks_of("fixture.md", untagged)).is_err());
}

/// The commands a table lists in its first column, by the names `name_of` reads off each cell,
/// from the rows after the header line `header` up to the first line that is not a row.
fn table_commands(text: &str, header: &str, name_of: impl Fn(&str) -> Vec<String>) -> Vec<String> {
    let mut lines = text.lines().skip_while(|line| line.trim() != header);
    assert!(lines.next().is_some(), "no table headed {header:?}");
    lines
        .skip(1) // |---|---|
        .take_while(|line| line.starts_with('|'))
        .flat_map(|line| {
            let cell = line.split('|').nth(1).unwrap_or_default();
            name_of(cell)
        })
        .collect()
}

/// A table that leaves a command out, or lists one the module does not register, misleads:
/// the README's list of commands and the ACL table of docs/operations.md each name every
/// command the module registers (DEBUG with `debug-commands yes`), exactly once.
#[test]
fn every_table_of_commands_lists_each_registered_command() {
    let server = Server::start();
    let mut registered: Vec<String> = redis::cmd("COMMAND")
        .arg("LIST")
        .arg("FILTERBY")
        .arg("MODULE")
        .arg("ratelimit")
        .query::<Vec<String>>(&mut server.conn())
        .expect("COMMAND LIST")
        .into_iter()
        .map(|name| name.to_uppercase())
        .collect();
    registered.sort();
    assert!(registered.len() >= 15, "registered: {registered:?}");
    let short = |name: &str| name.trim_start_matches("RATELIMIT.").to_string();

    let readme = fs::read_to_string(root().join("README.md")).expect("README.md");
    let mut listed = table_commands(&readme, "| command | what it does |", |cell| {
        // `[RATELIMIT.SETRATE](docs/commands/setrate.md)`
        let name = cell.trim().trim_start_matches('[');
        vec![name.split(']').next().unwrap_or_default().to_uppercase()]
    });
    listed.sort();
    assert_eq!(listed, registered, "README.md's table of commands");

    let operations = fs::read_to_string(root().join("docs/operations.md")).expect("operations");
    let mut listed = table_commands(&operations, "| command | categories |", |cell| {
        // `SETRATE, TRYACQUIRE`, or `DEBUG (only with ...)`
        let names = cell.split('(').next().unwrap_or_default();
        names
            .split(',')
            .map(|name| name.trim().to_uppercase())
            .collect()
    });
    listed.sort();
    let mut expected: Vec<String> = registered.iter().map(|name| short(name)).collect();
    expected.sort();
    assert_eq!(listed, expected, "docs/operations.md's ACL table");
}
