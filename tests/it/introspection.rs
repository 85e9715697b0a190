//! What the server says about the module: COMMAND DOCS, COMMAND INFO (arity, flags, key specs),
//! COMMAND GETKEYS, server-side arity checks, and the `INFO ratelimit` counters.

use std::collections::BTreeSet;
use std::thread;
use std::time::{Duration, Instant};

use crate::common::*;

const COMMANDS: [&str; 18] = [
    "ratelimit.setrate",
    "ratelimit.tryacquire",
    "ratelimit.acquire",
    "ratelimit.allow",
    "ratelimit.allowall",
    "ratelimit.config",
    "ratelimit.available",
    "ratelimit.peek",
    "ratelimit.release",
    "ratelimit.cancel",
    "ratelimit.delete",
    "ratelimit.expire",
    "ratelimit.persist",
    "ratelimit.stats",
    "ratelimit.toprefused",
    "cl.throttle",
    "gcra",
    "ratelimit.gcraallow",
];

/// `[RATE rate interval [OVERALL | PER_CLIENT | ONEKEY] [KEEPALIVE ms]]` as rendered.
const RATE: &str = "[RATE create(block: rate(integer) | interval(integer) | \
    [mode(oneof: OVERALL overall(pure-token) | PER_CLIENT per_client(pure-token) | \
    ONEKEY onekey(pure-token))] | \
    [KEEPALIVE ms(integer)] | [PRECISION precision(integer)])]";

fn text(value: &Value) -> String {
    match value {
        Value::BulkString(bytes) => String::from_utf8_lossy(bytes).into_owned(),
        Value::SimpleString(s) => s.clone(),
        Value::Okay => "OK".into(),
        Value::Int(n) => n.to_string(),
        other => panic!("not a string: {other:?}"),
    }
}

fn items(value: &Value) -> &[Value] {
    match value {
        Value::Array(items) => items,
        other => panic!("not an array: {other:?}"),
    }
}

/// A field of a RESP2 flat map (`[name, value, name, value, ...]`).
fn field<'a>(map: &'a Value, name: &str) -> Option<&'a Value> {
    items(map)
        .chunks(2)
        .find(|pair| text(&pair[0]) == name)
        .map(|pair| &pair[1])
}

fn field_text(map: &Value, name: &str) -> Option<String> {
    field(map, name).map(text)
}

/// Renders a COMMAND DOCS argument list in one line: `[TOKEN name(type: child | child)]`,
/// brackets for optional arguments; keys also show their key-spec index.
fn render_args(args: &Value) -> Vec<String> {
    items(args)
        .iter()
        .map(|arg| {
            let mut out = String::new();
            if let Some(token) = field_text(arg, "token") {
                out.push_str(&token);
                out.push(' ');
            }
            out.push_str(&field_text(arg, "name").expect("an argument has a name"));
            out.push('(');
            out.push_str(&field_text(arg, "type").expect("an argument has a type"));
            if let Some(index) = field_text(arg, "key_spec_index") {
                out.push_str(&format!(" #{index}"));
            }
            if let Some(children) = field(arg, "arguments") {
                out.push_str(": ");
                out.push_str(&render_args(children).join(" | "));
            }
            out.push(')');
            let flags: Vec<String> = field(arg, "flags")
                .map(|f| items(f).iter().map(text).collect())
                .unwrap_or_default();
            for flag in &flags {
                assert!(
                    flag == "optional" || flag == "multiple",
                    "unexpected argument flag {flag} in {out}"
                );
            }
            if flags.iter().any(|f| f == "multiple") {
                out.push_str(" ...");
            }
            if flags.iter().any(|f| f == "optional") {
                format!("[{out}]")
            } else {
                out
            }
        })
        .collect()
}

/// The docs of one command: (summary, since, complexity, group, module, rendered arguments).
fn docs(con: &mut Connection, name: &str) -> Option<[String; 6]> {
    let reply: Value = line(con, &format!("COMMAND DOCS {name}")).unwrap();
    let entries = items(&reply);
    if entries.is_empty() {
        return None;
    }
    assert_eq!(entries.len(), 2, "{reply:?}");
    assert_eq!(text(&entries[0]), name);
    let doc = &entries[1];
    let get = |f: &str| field_text(doc, f).unwrap_or_else(|| panic!("{name} has no {f}"));
    Some([
        get("summary"),
        get("since"),
        get("complexity"),
        get("group"),
        get("module"),
        render_args(field(doc, "arguments").expect("arguments")).join(" "),
    ])
}

#[test]
fn command_docs_describe_every_command_and_its_argument_tree() {
    let server = Server::start();
    let mut con = server.conn();
    let expected = [
        (
            "ratelimit.setrate",
            "key(key #0) rate(integer) interval(integer) \
             [mode(oneof: OVERALL overall(pure-token) | PER_CLIENT per_client(pure-token) | \
             ONEKEY onekey(pure-token))] \
             [KEEPALIVE ms(integer)] [PRECISION precision(integer)] \
             [condition(oneof: NX nx(pure-token) | XX xx(pure-token))] \
             [KEEPSTATE keepstate(pure-token)] [CLIENT id(string)]",
        ),
        (
            "ratelimit.tryacquire",
            &format!("key(key #0) [permits(integer)] [CLIENT id(string)] {RATE}"),
        ),
        (
            "ratelimit.acquire",
            &format!(
                "key(key #0) [permits(integer)] [TIMEOUT ms(integer)] [CLIENT id(string)] \
                 [TICKET ticket(string)] {RATE}"
            ),
        ),
        (
            "ratelimit.allow",
            &format!("key(key #0) [permits(integer)] [CLIENT id(string)] {RATE}"),
        ),
        (
            "ratelimit.allowall",
            "numkeys(integer) key(key #0) ... [PERMITS n(integer)] [CLIENT id(string)]",
        ),
        ("ratelimit.config", "key(key #0)"),
        ("ratelimit.available", "key(key #0) [CLIENT id(string)]"),
        (
            "ratelimit.peek",
            "key(key #0) [permits(integer)] [CLIENT id(string)]",
        ),
        (
            "ratelimit.release",
            "key(key #0) permits(integer) [CLIENT id(string)]",
        ),
        (
            "ratelimit.cancel",
            "key(key #0) ticket(string) [CLIENT id(string)]",
        ),
        ("ratelimit.delete", "key(key #0) [CLIENT id(string)]"),
        (
            "ratelimit.expire",
            "key(key #0) milliseconds(integer) \
             [condition(oneof: NX nx(pure-token) | XX xx(pure-token) | GT gt(pure-token) | LT lt(pure-token))] \
             [CLIENT id(string)]",
        ),
        ("ratelimit.persist", "key(key #0) [CLIENT id(string)]"),
        (
            "cl.throttle",
            "key(key #0) max_burst(integer) count_per_period(integer) period(integer) \
             [quantity(integer)]",
        ),
        (
            "gcra",
            "key(key #0) max-burst(integer) tokens-per-period(integer) period(double) \
             [TOKENS count(integer)]",
        ),
        (
            "ratelimit.gcraallow",
            "key(key #0) burst(integer) tokens-per-period(integer) period(double) \
             [take(oneof: TOKENS count(integer) | ATMOST most(integer))]",
        ),
        (
            "ratelimit.debug",
            "subcommand(oneof: SETCLOCK unix-ms(integer) | ADVANCE ms(integer) | \
             REALCLOCK realclock(pure-token) | \
             CONFIGCACHE mode(oneof: ALWAYS always(pure-token) | AUTO auto(pure-token)))",
        ),
    ];
    let mut summaries = BTreeSet::new();
    for (name, args) in expected {
        let args = args.to_string();
        let [summary, since, complexity, group, module, rendered] =
            docs(&mut con, name).unwrap_or_else(|| panic!("no COMMAND DOCS for {name}"));
        assert!(summary.len() > 20, "{name}: summary {summary:?}");
        assert!(summaries.insert(summary), "{name} shares another's summary");
        assert_eq!(since, "1.0.0", "{name}");
        assert!(
            complexity.contains("O("),
            "{name}: complexity {complexity:?}"
        );
        assert_eq!(group, "module", "{name}");
        assert_eq!(module, "ratelimit", "{name}");
        assert_eq!(rendered, args, "{name}: arguments");
    }
    // The module registers exactly these commands.
    let mut listed: Vec<String> = line(&mut con, "COMMAND LIST FILTERBY MODULE ratelimit").unwrap();
    listed.sort();
    let mut all: Vec<String> = COMMANDS
        .iter()
        .chain(&["ratelimit.debug"])
        .map(|s| s.to_string())
        .collect();
    all.sort();
    assert_eq!(listed, all);
}

#[test]
fn documented_tokens_are_the_ones_the_parsers_accept() {
    let server = Server::start();
    let mut con = server.conn();
    set_clock(&mut con, T0);
    for (text, reply) in [
        (
            "RATELIMIT.SETRATE d 5 1000 OVERALL KEEPALIVE 0 NX",
            Value::Int(1),
        ),
        (
            "RATELIMIT.SETRATE d 5 1000 PER_CLIENT KEEPALIVE 0 XX KEEPSTATE CLIENT c",
            Value::Int(1),
        ),
        ("RATELIMIT.SETRATE d 5 1000 overall", Value::Int(1)),
        ("RATELIMIT.TRYACQUIRE d 1 CLIENT c", Value::Nil),
        ("RATELIMIT.ACQUIRE d 1 TIMEOUT 10 CLIENT c", Value::Nil),
        ("RATELIMIT.AVAILABLE d CLIENT c", Value::Int(3)),
        ("RATELIMIT.RELEASE d 1 CLIENT c", Value::Int(1)),
        ("RATELIMIT.ACQUIRE d 1 TICKET t CLIENT c", Value::Nil),
        ("RATELIMIT.CANCEL d t CLIENT c", Value::Int(1)),
        ("RATELIMIT.EXPIRE d 100000 NX CLIENT c", Value::Int(1)),
        ("RATELIMIT.EXPIRE d 200000 XX", Value::Int(1)),
        ("RATELIMIT.EXPIRE d 300000 GT", Value::Int(1)),
        ("RATELIMIT.EXPIRE d 100000 LT", Value::Int(1)),
        ("RATELIMIT.PERSIST d CLIENT c", Value::Int(1)),
        ("RATELIMIT.DELETE d CLIENT c", Value::Int(3)),
        (
            "RATELIMIT.GCRAALLOW g 1 1 1 atmost 1",
            Value::Array(vec![
                Value::Int(1),
                Value::Int(1),
                Value::Int(0),
                Value::Int(-1),
                Value::Int(1_000_000),
            ]),
        ),
        (
            "RATELIMIT.GCRAALLOW g 1 1 1 Tokens -1",
            Value::Array(vec![
                Value::Int(-1),
                Value::Int(1),
                Value::Int(1),
                Value::Int(-1),
                Value::Int(0),
            ]),
        ),
        ("RATELIMIT.DEBUG ADVANCE 5", Value::Int(T0 + 5)),
        ("RATELIMIT.DEBUG REALCLOCK", Value::Okay),
    ] {
        let got = line::<Value>(&mut con, text).unwrap_or_else(|e| panic!("`{text}`: {e}"));
        assert_eq!(got, reply, "`{text}`");
    }
    // A token no doc mentions is not accepted.
    for (text, word) in [
        ("RATELIMIT.SETRATE d 5 1000 KEEPALIVES 0", "KEEPALIVES"),
        ("RATELIMIT.TRYACQUIRE d 1 TIMEOUT 10", "TIMEOUT"),
        ("RATELIMIT.EXPIRE d 1000 CLIENTS c", "CLIENTS"),
        ("RATELIMIT.GCRAALLOW g 1 1 1 COUNT 1", "COUNT"),
    ] {
        assert_eq!(
            error_of(&mut con, text),
            format!("ERR syntax error, unknown option '{word}'"),
            "`{text}`"
        );
    }
}

/// COMMAND INFO of one command: (arity, flags, first key, last key, step, key specs).
type Info = (i64, BTreeSet<String>, i64, i64, i64, Vec<Value>);

fn command_info(con: &mut Connection, name: &str) -> Option<Info> {
    let reply: Vec<Value> = line(con, &format!("COMMAND INFO {name}")).unwrap();
    assert_eq!(reply.len(), 1);
    if reply[0] == Value::Nil {
        return None;
    }
    let info = items(&reply[0]);
    assert_eq!(text(&info[0]), name);
    let int = |v: &Value| match v {
        Value::Int(n) => *n,
        other => panic!("not an integer: {other:?}"),
    };
    Some((
        int(&info[1]),
        items(&info[2]).iter().map(text).collect(),
        int(&info[3]),
        int(&info[4]),
        int(&info[5]),
        items(&info[8]).to_vec(),
    ))
}

fn set(words: &str) -> BTreeSet<String> {
    words.split_whitespace().map(str::to_string).collect()
}

#[test]
fn command_info_gives_arity_flags_and_key_specs() {
    let server = Server::start();
    let mut con = server.conn();
    let rw = "RW access update";
    let expected = [
        ("ratelimit.setrate", -4, "write denyoom module", rw),
        ("ratelimit.tryacquire", -2, "write denyoom module", rw),
        ("ratelimit.acquire", -2, "write denyoom blocking module", rw),
        ("ratelimit.allow", -2, "write denyoom module", rw),
        ("ratelimit.config", 2, "readonly fast module", "RO access"),
        ("ratelimit.available", -2, "readonly module", "RO access"),
        ("ratelimit.peek", -2, "readonly module", "RO access"),
        ("ratelimit.release", -3, "write denyoom module", rw),
        ("ratelimit.cancel", -3, "write module", rw),
        ("ratelimit.delete", -2, "write module", "RM delete"),
        ("ratelimit.expire", -3, "write fast module", rw),
        ("ratelimit.persist", -2, "write fast module", rw),
    ];
    for (name, arity, flags, key_flags) in expected {
        let (got_arity, got_flags, first, last, step, specs) =
            command_info(&mut con, name).unwrap_or_else(|| panic!("no COMMAND INFO for {name}"));
        assert_eq!(got_arity, arity, "{name}: arity");
        assert_eq!(got_flags, set(flags), "{name}: flags");
        assert_eq!(
            (first, last, step),
            (1, 1, 1),
            "{name}: legacy key positions"
        );
        assert_eq!(specs.len(), 1, "{name}: one key spec");
        let spec = &specs[0];
        let spec_flags: BTreeSet<String> = items(field(spec, "flags").expect("flags"))
            .iter()
            .map(text)
            .collect();
        assert_eq!(spec_flags, set(key_flags), "{name}: key spec flags");
        let begin = field(spec, "begin_search").expect("begin_search");
        assert_eq!(
            field_text(begin, "type").as_deref(),
            Some("index"),
            "{name}"
        );
        let index = field(field(begin, "spec").expect("spec"), "index").map(text);
        assert_eq!(index.as_deref(), Some("1"), "{name}: begin_search index");
        let find = field(spec, "find_keys").expect("find_keys");
        assert_eq!(field_text(find, "type").as_deref(), Some("range"), "{name}");
        let range = field(find, "spec").expect("spec");
        assert_eq!(
            ["lastkey", "keystep", "limit"].map(|f| field_text(range, f).unwrap()),
            ["0", "1", "0"],
            "{name}: one key"
        );
    }
    // ALLOWALL's keys follow numkeys: the server finds them (movable keys).
    let (arity, flags, _, _, _, specs) =
        command_info(&mut con, "ratelimit.allowall").expect("RATELIMIT.ALLOWALL");
    assert_eq!(arity, -3);
    assert_eq!(flags, set("write denyoom module movablekeys"));
    assert_eq!(specs.len(), 1);
    let find = field(&specs[0], "find_keys").expect("find_keys");
    assert_eq!(field_text(find, "type").as_deref(), Some("keynum"));
    let keys: Vec<String> = line(
        &mut con,
        "COMMAND GETKEYS RATELIMIT.ALLOWALL 3 a b c PERMITS 2 CLIENT x",
    )
    .unwrap();
    assert_eq!(keys, ["a", "b", "c"]);
    let (arity, flags, first, last, step, specs) =
        command_info(&mut con, "ratelimit.debug").expect("RATELIMIT.DEBUG is loaded");
    assert_eq!(arity, -2);
    assert_eq!(flags, set("admin module"));
    assert_eq!((first, last, step), (0, 0, 0));
    assert!(specs.is_empty());
}

#[test]
fn command_getkeys_returns_the_limiter_key() {
    let server = Server::start();
    let mut con = server.conn();
    let key: &[u8] = b"lim\x00\xff{x";
    for words in [
        vec![
            &b"RATELIMIT.SETRATE"[..],
            key,
            b"1",
            b"1000",
            b"PER_CLIENT",
            b"KEEPALIVE",
            b"1000",
        ],
        vec![b"RATELIMIT.TRYACQUIRE", key],
        vec![b"RATELIMIT.TRYACQUIRE", key, b"2", b"CLIENT", b"c"],
        vec![
            b"RATELIMIT.ACQUIRE",
            key,
            b"2",
            b"TIMEOUT",
            b"5",
            b"CLIENT",
            b"c",
        ],
        vec![b"RATELIMIT.CONFIG", key],
        vec![b"RATELIMIT.AVAILABLE", key, b"CLIENT", b"c"],
        vec![b"RATELIMIT.RELEASE", key, b"1"],
        vec![b"RATELIMIT.CANCEL", key, b"t", b"CLIENT", b"c"],
        vec![b"RATELIMIT.DELETE", key, b"CLIENT", b"c"],
        vec![b"RATELIMIT.EXPIRE", key, b"10", b"NX"],
        vec![b"RATELIMIT.PERSIST", key],
    ] {
        let mut command: Vec<&[u8]> = vec![b"COMMAND", b"GETKEYS"];
        command.extend(&words);
        let keys: Vec<Vec<u8>> = run(&mut con, &command).unwrap();
        assert_eq!(
            keys,
            vec![key.to_vec()],
            "{:?}",
            String::from_utf8_lossy(words[0])
        );
    }
    let err = error_of(&mut con, "COMMAND GETKEYS RATELIMIT.DEBUG SETCLOCK 1");
    assert!(err.starts_with("ERR"), "{err}");
}

/// `calls` and `rejected_calls` of a command in INFO commandstats.
fn command_stats(con: &mut Connection, name: &str) -> (i64, i64) {
    let info: String = line(con, "INFO commandstats").unwrap();
    let prefix = format!("cmdstat_{name}:");
    let Some(stats) = info.lines().find_map(|l| l.strip_prefix(prefix.as_str())) else {
        return (0, 0);
    };
    let get = |f: &str| {
        stats
            .split(',')
            .find_map(|kv| kv.strip_prefix(&format!("{f}=")))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    (get("calls"), get("rejected_calls"))
}

#[test]
fn wrong_arity_is_rejected_by_the_server_before_the_module_runs() {
    let server = Server::start();
    let mut con = server.conn();
    for (name, text) in [
        ("ratelimit.setrate", "RATELIMIT.SETRATE k 1"),
        ("ratelimit.tryacquire", "RATELIMIT.TRYACQUIRE"),
        ("ratelimit.acquire", "RATELIMIT.ACQUIRE"),
        ("ratelimit.allow", "RATELIMIT.ALLOW"),
        ("ratelimit.allowall", "RATELIMIT.ALLOWALL 1"),
        ("ratelimit.config", "RATELIMIT.CONFIG"),
        ("ratelimit.config", "RATELIMIT.CONFIG k extra"),
        ("ratelimit.available", "RATELIMIT.AVAILABLE"),
        ("ratelimit.peek", "RATELIMIT.PEEK"),
        ("ratelimit.release", "RATELIMIT.RELEASE k"),
        ("ratelimit.cancel", "RATELIMIT.CANCEL k"),
        ("ratelimit.delete", "RATELIMIT.DELETE"),
        ("ratelimit.expire", "RATELIMIT.EXPIRE k"),
        ("ratelimit.persist", "RATELIMIT.PERSIST"),
        ("ratelimit.debug", "RATELIMIT.DEBUG"),
    ] {
        let errors_before = stats(&mut con)["errors"];
        let (calls, rejected) = command_stats(&mut con, name);
        assert_eq!(
            error_of(&mut con, text),
            format!("ERR wrong number of arguments for '{name}' command"),
            "`{text}`"
        );
        assert_eq!(
            command_stats(&mut con, name),
            (calls, rejected + 1),
            "`{text}` was not rejected by the server"
        );
        assert_eq!(stats(&mut con)["errors"], errors_before, "`{text}`");
    }
}

/// The `INFO ratelimit` counters, by name without the `ratelimit_` prefix (not
/// `configs_kept` and `configs_in_use`, gauges of what the module keeps, checked in
/// tests/it/config_cache.rs, nor `tickets`, checked in tests/it/cancel.rs).
fn stats(con: &mut Connection) -> std::collections::BTreeMap<String, i64> {
    let info: String = line(con, "INFO ratelimit").unwrap();
    let mut lines = info
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .skip_while(|l| *l != "# ratelimit_stats");
    assert_eq!(lines.next(), Some("# ratelimit_stats"), "{info}");
    let mut counters: std::collections::BTreeMap<String, i64> = lines
        .take_while(|l| !l.starts_with('#'))
        .map(|l| {
            let (name, value) = l.split_once(':').expect("name:value");
            let name = name.strip_prefix("ratelimit_").expect("ratelimit_ prefix");
            (name.to_string(), value.parse().expect("an integer"))
        })
        .collect();
    let names: Vec<&str> = counters.keys().map(String::as_str).collect();
    assert_eq!(
        names,
        [
            "acquired",
            "blocked_clients",
            "cancels",
            "configs_in_use",
            "configs_kept",
            "errors",
            "evicted_keys",
            "refused",
            "tickets",
            "timeouts",
            "waits"
        ]
    );
    counters.remove("configs_kept");
    counters.remove("configs_in_use");
    counters.remove("tickets");
    counters
}

/// Asserts the counters moved by exactly `deltas` (name, change) since `before`, and no other.
#[track_caller]
fn assert_moved(
    con: &mut Connection,
    before: &std::collections::BTreeMap<String, i64>,
    deltas: &[(&str, i64)],
    what: &str,
) -> std::collections::BTreeMap<String, i64> {
    let now = stats(con);
    let mut expected = before.clone();
    for (name, delta) in deltas {
        *expected.get_mut(*name).expect("a counter") += delta;
    }
    assert_eq!(now, expected, "after {what}");
    now
}

fn blocked_clients(con: &mut Connection) -> i64 {
    stats(con)["blocked_clients"]
}

fn wait_for_blocked(con: &mut Connection, n: i64) {
    let deadline = Instant::now() + HANG;
    while blocked_clients(con) != n {
        assert!(Instant::now() < deadline, "never {n} blocked clients");
        thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn info_ratelimit_counters_move_exactly_as_commands_run() {
    let server = Server::start();
    let mut con = server.conn();
    con.set_read_timeout(Some(HANG)).unwrap();
    set_clock(&mut con, T0);
    let zero = stats(&mut con);
    assert!(zero.values().all(|n| *n == 0), "{zero:?}");

    line::<i64>(&mut con, "RATELIMIT.SETRATE a 2 1000").unwrap();
    let s = assert_moved(&mut con, &zero, &[], "SETRATE");
    assert_eq!(try_acquire(&mut con, "a", 1), None);
    assert_eq!(try_acquire(&mut con, "a", 1), None);
    let s = assert_moved(&mut con, &s, &[("acquired", 2)], "two grants");
    assert_eq!(try_acquire(&mut con, "a", 1), Some(1000));
    let s = assert_moved(&mut con, &s, &[("refused", 1)], "a refusal");
    error_of(&mut con, "RATELIMIT.TRYACQUIRE missing");
    error_of(&mut con, "RATELIMIT.TRYACQUIRE a 3");
    error_of(&mut con, "RATELIMIT.SETRATE a 0 1000");
    error_of(&mut con, "RATELIMIT.TRYACQUIRE a 1 2");
    error_of(&mut con, "RATELIMIT.DEBUG NOSUCH");
    let s = assert_moved(&mut con, &s, &[("errors", 5)], "five error replies");
    line::<Value>(&mut con, "RATELIMIT.CONFIG missing").unwrap();
    assert_eq!(line::<i64>(&mut con, "RATELIMIT.AVAILABLE a").unwrap(), 0);
    line::<i64>(&mut con, "RATELIMIT.EXPIRE a 100000").unwrap();
    line::<i64>(&mut con, "RATELIMIT.PERSIST a").unwrap();
    let s = assert_moved(&mut con, &s, &[], "reads and TTL commands");

    // An ACQUIRE granted at once is an acquisition, not a wait.
    line::<i64>(&mut con, "RATELIMIT.SETRATE b 1 1000").unwrap();
    assert_eq!(
        line::<Option<i64>>(&mut con, "RATELIMIT.ACQUIRE b").unwrap(),
        None
    );
    let s = assert_moved(
        &mut con,
        &s,
        &[("acquired", 1)],
        "an ACQUIRE granted at once",
    );

    // A ticketed grant: its resend takes nothing and counts nothing; CANCEL gives it back (a
    // cancel, once); the ticket sent again after that is refused at once.
    line::<i64>(&mut con, "RATELIMIT.SETRATE c 1 1000").unwrap();
    for _ in 0..2 {
        let reply: Option<i64> = line(&mut con, "RATELIMIT.ACQUIRE c TICKET x").unwrap();
        assert_eq!(reply, None);
    }
    let s = assert_moved(&mut con, &s, &[("acquired", 1)], "a grant and its resend");
    assert_eq!(line::<i64>(&mut con, "RATELIMIT.CANCEL c x").unwrap(), 1);
    assert_eq!(line::<i64>(&mut con, "RATELIMIT.CANCEL c x").unwrap(), 0);
    let s = assert_moved(&mut con, &s, &[("cancels", 1)], "a grant given back");
    let reply: Option<i64> = line(&mut con, "RATELIMIT.ACQUIRE c TICKET x").unwrap();
    assert_eq!(
        reply,
        Some(1),
        "the hint, at least 1, though the permit is free"
    );
    let s = assert_moved(
        &mut con,
        &s,
        &[("refused", 1)],
        "a cancelled ticket sent again",
    );

    // An ACQUIRE that blocks, then is served when the clock moves far enough.
    let mut waiter = server.conn();
    waiter.set_read_timeout(Some(HANG)).unwrap();
    redis::cmd("RATELIMIT.ACQUIRE")
        .arg("a")
        .send_packed_command_helper(&mut waiter);
    wait_for_blocked(&mut con, 1);
    let blocked = stats(&mut con);
    advance(&mut con, 500); // not enough: the waiter stays blocked
    thread::sleep(Duration::from_millis(50));
    assert_eq!(blocked_clients(&mut con), 1);
    advance(&mut con, 500);
    let served: Option<i64> =
        redis::FromRedisValue::from_redis_value(&waiter.recv_response().unwrap()).unwrap();
    assert_eq!(served, None, "the waiter was granted");
    wait_for_blocked(&mut con, 0);
    let after = stats(&mut con);
    let delta = |a: &std::collections::BTreeMap<String, i64>, f: &str| a[f] - s[f];
    assert_eq!(
        (
            delta(&blocked, "blocked_clients"),
            delta(&blocked, "waits"),
            delta(&after, "acquired"),
            delta(&after, "waits"),
            delta(&after, "blocked_clients"),
            delta(&after, "errors"),
            delta(&after, "timeouts"),
        ),
        (1, 1, 1, 1, 0, 0, 0),
        "a blocked ACQUIRE, then served: blocked {blocked:?}, after {after:?}"
    );
    let s = after;

    // An ACQUIRE whose TIMEOUT runs out (the frozen clock never frees its permits): that it
    // waited and timed out is what the counters below say.
    let hint: Option<i64> = line(&mut waiter, "RATELIMIT.ACQUIRE a 2 TIMEOUT 50").unwrap();
    assert_eq!(hint, Some(1000));
    let after = stats(&mut con);
    assert_eq!(
        (
            after["waits"] - s["waits"],
            after["timeouts"] - s["timeouts"],
            after["blocked_clients"],
            after["acquired"] - s["acquired"],
            after["errors"] - s["errors"]
        ),
        (1, 1, 0, 0, 0),
        "a timed-out ACQUIRE: {after:?}"
    );
    let s = after;

    // A waiter whose limiter is deleted gets an error reply, counted as an error.
    redis::cmd("RATELIMIT.ACQUIRE")
        .arg("a")
        .arg(2)
        .send_packed_command_helper(&mut waiter);
    wait_for_blocked(&mut con, 1);
    assert_eq!(line::<i64>(&mut con, "RATELIMIT.DELETE a").unwrap(), 3);
    let reply = waiter.recv_response().and_then(Value::extract_error);
    let err = error_line(&reply.expect_err("the waiter gets an error"));
    assert_eq!(err, "ERR RateLimiter is not initialized (limiter 'a')");
    wait_for_blocked(&mut con, 0);
    let after = stats(&mut con);
    assert_eq!(
        (
            after["waits"] - s["waits"],
            after["errors"] - s["errors"],
            after["timeouts"] - s["timeouts"],
            after["acquired"] - s["acquired"],
        ),
        (1, 1, 0, 0),
        "a waiter whose limiter was deleted: {after:?}"
    );
}

#[test]
fn refused_counts_refused_requests_not_the_retries_of_a_blocked_acquire() {
    let server = Server::start();
    let mut con = server.conn();
    con.set_read_timeout(Some(HANG)).unwrap();
    set_clock(&mut con, T0);
    line::<i64>(&mut con, "RATELIMIT.SETRATE a 1 1000").unwrap();
    assert_eq!(try_acquire(&mut con, "a", 1), None);
    let start = stats(&mut con);
    assert_eq!(try_acquire(&mut con, "a", 1), Some(1000));
    let one_refusal = stats(&mut con);
    assert_eq!(one_refusal["refused"] - start["refused"], 1);

    // A client waits in ACQUIRE; the clock moves five times, never far enough; then it is served.
    let mut waiter = server.conn();
    waiter.set_read_timeout(Some(HANG)).unwrap();
    redis::cmd("RATELIMIT.ACQUIRE")
        .arg("a")
        .send_packed_command_helper(&mut waiter);
    wait_for_blocked(&mut con, 1);
    let blocked = stats(&mut con);
    for _ in 0..5 {
        advance(&mut con, 100);
        thread::sleep(Duration::from_millis(20));
        assert_eq!(blocked_clients(&mut con), 1);
    }
    let retried = stats(&mut con);
    advance(&mut con, 500);
    let served: Option<i64> =
        redis::FromRedisValue::from_redis_value(&waiter.recv_response().unwrap()).unwrap();
    assert_eq!(served, None);
    wait_for_blocked(&mut con, 0);
    let end = stats(&mut con);
    assert_eq!(
        (
            end["acquired"] - one_refusal["acquired"],
            end["waits"] - one_refusal["waits"]
        ),
        (1, 1)
    );
    // One TRYACQUIRE was refused. The ACQUIRE is counted in `waits`, then in `acquired`; the
    // module re-checking it on each clock move is not a request anyone made.
    assert_eq!(
        [&blocked, &retried, &end].map(|s| s["refused"] - start["refused"]),
        [1, 1, 1],
        "ratelimit_refused after the ACQUIRE blocked, after 5 retries, after it was served"
    );
}

/// Sends a command without waiting for its reply (for a client that blocks).
trait SendOnly {
    fn send_packed_command_helper(&self, con: &mut Connection);
}

impl SendOnly for redis::Cmd {
    fn send_packed_command_helper(&self, con: &mut Connection) {
        con.send_packed_command(&self.get_packed_command())
            .expect("send");
    }
}

#[test]
fn without_the_load_option_there_is_no_debug_command() {
    let server = Server::start_with(&[], &[]);
    let mut con = server.conn();
    assert!(docs(&mut con, "ratelimit.debug").is_none());
    assert!(command_info(&mut con, "ratelimit.debug").is_none());
    let err = error_of(&mut con, "RATELIMIT.DEBUG SETCLOCK 1");
    assert!(err.starts_with("ERR unknown command"), "{err}");
    let mut listed: Vec<String> = line(&mut con, "COMMAND LIST FILTERBY MODULE ratelimit").unwrap();
    listed.sort();
    let mut expected: Vec<String> = COMMANDS.iter().map(|s| s.to_string()).collect();
    expected.sort();
    assert_eq!(listed, expected);
    // Everything else is described as with it.
    for name in COMMANDS {
        assert!(docs(&mut con, name).is_some(), "{name}");
        assert!(command_info(&mut con, name).is_some(), "{name}");
    }
}

#[test]
fn one_version_everywhere() {
    // Cargo.toml's version, as MODULE LIST, INFO and COMMAND DOCS show it.
    let version = env!("CARGO_PKG_VERSION");
    let parts: Vec<i64> = version.split('.').map(|p| p.parse().unwrap()).collect();
    let server = Server::start();
    let mut con = server.conn();
    let modules: Vec<Value> = line(&mut con, "MODULE LIST").unwrap();
    let ours = modules
        .iter()
        .find(|m| field_text(m, "name").as_deref() == Some("ratelimit"))
        .expect("the module is listed");
    assert_eq!(
        field(ours, "ver"),
        Some(&Value::Int(parts[0] * 10000 + parts[1] * 100 + parts[2]))
    );
    let info: String = line(&mut con, "INFO ratelimit").unwrap();
    let module: Vec<&str> = info
        .lines()
        .map(str::trim)
        .take_while(|l| *l != "# ratelimit_stats")
        .filter(|l| !l.is_empty())
        .collect();
    assert_eq!(
        module,
        [
            "# ratelimit_module",
            &format!("ratelimit_version:{version}")
        ],
        "{info}"
    );
    for name in COMMANDS {
        let [_, since, ..] = docs(&mut con, name).unwrap();
        assert_eq!(since, version, "{name}");
    }
}
