//! Every command inside MULTI/EXEC and from Lua (`redis.call` / `redis.pcall`) against real
//! servers: the same replies in the same order as the same sequence run command by command on
//! another server with the same frozen clock, errors as entries that abort nothing, and ACQUIRE
//! answering at once instead of blocking.

use crate::common::*;
use redis::ConnectionLike;

/// A reply, or the error line a client sees.
#[derive(Debug, Clone, PartialEq)]
enum Reply {
    Value(Value),
    Error(String),
}

impl Reply {
    fn of(result: redis::RedisResult<Value>) -> Reply {
        match result {
            Ok(Value::ServerError(e)) => Reply::Error(error_line(&redis::RedisError::from(e))),
            Ok(v) => Reply::Value(v),
            Err(e) => Reply::Error(error_line(&e)),
        }
    }

    fn is_error(&self) -> bool {
        matches!(self, Reply::Error(_))
    }
}

/// Groups of commands; the clock moves between groups (outside any transaction or script).
/// ACQUIRE here never blocks: inside MULTI or a script it answers as TRYACQUIRE does.
const GROUPS: [(i64, &[&str]); 3] = [
    (
        0,
        &[
            "RATELIMIT.CONFIG api",
            "RATELIMIT.TRYACQUIRE api",
            "RATELIMIT.AVAILABLE api",
            "RATELIMIT.SETRATE api 3 1000",
            "RATELIMIT.SETRATE api 5 2000 NX",
            "RATELIMIT.SETRATE ghost 5 1000 XX",
            "RATELIMIT.CONFIG api",
            "RATELIMIT.TRYACQUIRE api 2",
            "RATELIMIT.ACQUIRE api 1",
            "RATELIMIT.ACQUIRE api 1",
            "RATELIMIT.ACQUIRE api 2 TIMEOUT 0",
            "RATELIMIT.AVAILABLE api",
            "RATELIMIT.TRYACQUIRE api 4",
            "RATELIMIT.RELEASE api 1",
            "RATELIMIT.AVAILABLE api",
            "RATELIMIT.TRYACQUIRE api 1",
            "RATELIMIT.TRYACQUIRE api 1",
            "RATELIMIT.SETRATE pc 2 500 PER_CLIENT KEEPALIVE 60000",
            "RATELIMIT.TRYACQUIRE pc 1",
            "RATELIMIT.TRYACQUIRE pc 2 CLIENT c1",
            "RATELIMIT.ACQUIRE pc 1 CLIENT c1 TIMEOUT 5000",
            "RATELIMIT.AVAILABLE pc CLIENT c2",
            "RATELIMIT.CONFIG pc",
            "RATELIMIT.TRYACQUIRE str",
            "RATELIMIT.SETRATE api 0 1000",
            "RATELIMIT.TRYACQUIRE api 1 BOGUS",
            "RATELIMIT.EXPIRE api 1000 NX GT",
        ],
    ),
    (
        600,
        &[
            "RATELIMIT.TRYACQUIRE api 1",
            "RATELIMIT.TRYACQUIRE pc 1 CLIENT c1",
            "RATELIMIT.EXPIRE api 60000",
            "RATELIMIT.EXPIRE api 90000 NX",
            "RATELIMIT.EXPIRE api 90000 GT",
            "RATELIMIT.PERSIST api",
            "RATELIMIT.PERSIST api",
            "RATELIMIT.EXPIRE pc 120000 XX CLIENT c1",
            "RATELIMIT.RELEASE pc 5 CLIENT c1",
            "RATELIMIT.AVAILABLE pc CLIENT c1",
            "RATELIMIT.DELETE pc CLIENT c1",
            "RATELIMIT.DELETE pc CLIENT c1",
            "RATELIMIT.TRYACQUIRE pc 1 CLIENT c1",
            "RATELIMIT.SETRATE api 4 1000 KEEPSTATE",
            "RATELIMIT.AVAILABLE api",
            "RATELIMIT.EXPIRE ghost 0",
        ],
    ),
    (
        1000,
        &[
            "RATELIMIT.ACQUIRE api 4",
            "RATELIMIT.ACQUIRE api",
            "RATELIMIT.SETRATE api 4 1000 XX",
            "RATELIMIT.ACQUIRE api 4 TIMEOUT 100",
            "RATELIMIT.EXPIRE api -1",
            "RATELIMIT.CONFIG api",
            "RATELIMIT.DELETE api",
            "RATELIMIT.SETRATE api 2 1000 PER_CLIENT",
            "RATELIMIT.ACQUIRE api 3 CLIENT c9",
            "RATELIMIT.ACQUIRE api 2 CLIENT c9",
            "RATELIMIT.RELEASE api 1 CLIENT c9",
            "RATELIMIT.CONFIG api",
        ],
    ),
];

/// Outside a transaction a refused ACQUIRE would block: its non-blocking twin is TRYACQUIRE,
/// which is what ACQUIRE must behave as inside MULTI and scripts.
fn outside_twin(command: &str) -> String {
    let words: Vec<&str> = command.split_whitespace().collect();
    if words[0] != "RATELIMIT.ACQUIRE" {
        return command.to_string();
    }
    let mut out = vec!["RATELIMIT.TRYACQUIRE"];
    let mut rest = words[1..].iter();
    while let Some(word) = rest.next() {
        if word.eq_ignore_ascii_case("TIMEOUT") {
            rest.next();
        } else {
            out.push(word);
        }
    }
    out.join(" ")
}

fn cmd_of(text: &str) -> redis::Cmd {
    let mut words = text.split_whitespace();
    let mut cmd = redis::cmd(words.next().expect("a command"));
    for word in words {
        cmd.arg(word);
    }
    cmd
}

fn fresh(server: &Server) -> Connection {
    let mut con = server.conn();
    con.set_read_timeout(Some(HANG)).expect("read timeout");
    set_clock(&mut con, T0);
    let _: () = redis::cmd("SET")
        .arg("str")
        .arg("x")
        .query(&mut con)
        .unwrap();
    con
}

/// Each command on its own.
fn run_outside(con: &mut Connection, commands: &[&str]) -> Vec<Reply> {
    commands
        .iter()
        .map(|c| Reply::of(cmd_of(&outside_twin(c)).query(con)))
        .collect()
}

/// All of them in one MULTI/EXEC (`pipe().atomic()`), keeping the error entries of EXEC's reply.
fn run_in_multi(con: &mut Connection, commands: &[&str]) -> Vec<Reply> {
    let mut pipe = redis::pipe();
    pipe.atomic();
    for c in commands {
        pipe.add_command(cmd_of(c));
    }
    let mut replies = con
        .req_packed_commands(&pipe.get_packed_pipeline(), commands.len() + 1, 1)
        .expect("every command queued, EXEC ran");
    let Some(Value::Array(items)) = replies.pop() else {
        panic!("EXEC did not reply an array: {replies:?}");
    };
    items.into_iter().map(|v| Reply::of(Ok(v))).collect()
}

/// Each command from a script, through `redis.pcall` (errors come back as error replies).
fn run_in_script(con: &mut Connection, commands: &[&str]) -> Vec<Reply> {
    commands
        .iter()
        .map(|c| Reply::of(eval("pcall", c).query(con)))
        .collect()
}

/// `EVAL "return redis.<call>(ARGV[1], KEYS[1], unpack(ARGV, 2))" 1 key name args...`.
fn eval(call: &str, command: &str) -> redis::Cmd {
    let words: Vec<&str> = command.split_whitespace().collect();
    let mut cmd = redis::cmd("EVAL");
    cmd.arg(format!(
        "return redis.{call}(ARGV[1], KEYS[1], unpack(ARGV, 2))"
    ))
    .arg(1)
    .arg(words[1])
    .arg(words[0]);
    for word in &words[2..] {
        cmd.arg(*word);
    }
    cmd
}

/// The dataset with what differs by design taken out: log members (random ids) are reduced
/// to the permits logged per millisecond, expiries (EXPIRE and KEEPALIVE run on the real clock) to present/absent.
fn state(con: &mut Connection) -> Vec<(String, String)> {
    let mut keys: Vec<String> = redis::cmd("KEYS").arg("*").query(con).unwrap();
    keys.sort();
    keys.into_iter()
        .map(|key| {
            let kind: String = redis::cmd("TYPE").arg(&key).query(con).unwrap();
            let content = match kind.as_str() {
                "string" => redis::cmd("GET").arg(&key).query::<String>(con).unwrap(),
                "hash" => {
                    let mut fields: Vec<(String, String)> =
                        redis::cmd("HGETALL").arg(&key).query(con).unwrap();
                    fields.sort();
                    format!("{fields:?}")
                }
                "zset" => {
                    // Permits per score: which of several same-millisecond entries RELEASE
                    // trims depends on their random ids.
                    let mut per_ms = std::collections::BTreeMap::<i64, u32>::new();
                    for (member, score) in log_entries(con, &key) {
                        *per_ms.entry(score).or_default() += member_permits(&member);
                    }
                    format!("{per_ms:?}")
                }
                other => other.to_string(),
            };
            let ttl: i64 = redis::cmd("PTTL").arg(&key).query(con).unwrap();
            (key, format!("{kind} {content} ttl:{}", ttl > 0))
        })
        .collect()
}

#[test]
fn multi_exec_replies_as_the_commands_run_one_by_one() {
    let (outside, inside) = (Server::start(), Server::start());
    let (mut a, mut b) = (fresh(&outside), fresh(&inside));
    let mut errors = 0;
    for (step, (ms, commands)) in GROUPS.iter().enumerate() {
        advance(&mut a, *ms);
        advance(&mut b, *ms);
        let expected = run_outside(&mut a, commands);
        let got = run_in_multi(&mut b, commands);
        assert_eq!(got.len(), commands.len());
        for ((command, e), g) in commands.iter().zip(&expected).zip(&got) {
            assert_eq!(g, e, "group {step}: `{command}` inside MULTI");
        }
        assert_eq!(state(&mut b), state(&mut a), "after group {step}");
        errors += got.iter().filter(|r| r.is_error()).count();
    }
    // Errors were entries of EXEC's reply, and the commands queued after them still ran.
    let first = run_in_multi(
        &mut b,
        &[
            "RATELIMIT.TRYACQUIRE nope",
            "RATELIMIT.SETRATE late 1 1000",
            "RATELIMIT.CONFIG late",
        ],
    );
    assert_eq!(
        first[0],
        Reply::Error("ERR RateLimiter is not initialized (limiter 'nope')".into())
    );
    assert_eq!(first[1], Reply::Value(Value::Int(1)));
    assert!(matches!(&first[2], Reply::Value(Value::Array(a)) if a.len() == 8));
    assert!(errors >= 8, "the sequence must exercise errors ({errors})");
}

#[test]
fn scripts_reply_as_the_commands_run_one_by_one() {
    let (outside, scripted) = (Server::start(), Server::start());
    let (mut a, mut b) = (fresh(&outside), fresh(&scripted));
    for (step, (ms, commands)) in GROUPS.iter().enumerate() {
        advance(&mut a, *ms);
        advance(&mut b, *ms);
        let expected = run_outside(&mut a, commands);
        let got = run_in_script(&mut b, commands);
        for ((command, e), g) in commands.iter().zip(&expected).zip(&got) {
            assert_eq!(g, e, "group {step}: `{command}` from redis.pcall");
        }
        assert_eq!(state(&mut b), state(&mut a), "after group {step}");
    }
}

#[test]
fn redis_call_raises_the_error_and_redis_pcall_returns_it() {
    let server = Server::start();
    let mut con = fresh(&server);
    line::<i64>(&mut con, "RATELIMIT.SETRATE api 2 1000").unwrap();
    for (command, error) in [
        (
            "RATELIMIT.TRYACQUIRE nope",
            "ERR RateLimiter is not initialized (limiter 'nope')",
        ),
        (
            "RATELIMIT.TRYACQUIRE api 3",
            "ERR Requested permits amount cannot exceed defined rate",
        ),
        (
            "RATELIMIT.ACQUIRE api 1 BOGUS",
            "ERR syntax error, unknown option 'BOGUS'",
        ),
        (
            "RATELIMIT.RELEASE str 1",
            "WRONGTYPE key 'str' holds a string that is not a ONEKEY rate limiter",
        ),
    ] {
        let before = snapshot(&mut con);
        assert_eq!(
            Reply::of(eval("pcall", command).query(&mut con)),
            Reply::Error(error.into()),
            "{command} via redis.pcall"
        );
        let raised = Reply::of(eval("call", command).query(&mut con));
        let Reply::Error(raised) = raised else {
            panic!("{command} via redis.call did not raise: {raised:?}");
        };
        assert!(
            raised.starts_with(error) && raised.contains("script"),
            "{command} via redis.call: {raised}"
        );
        assert_eq!(snapshot(&mut con), before, "{command} wrote something");
    }
    // A script goes on after a pcall error, and the error is a Lua table with `err`.
    let script = "local r = redis.pcall('RATELIMIT.TRYACQUIRE', KEYS[1], 5) \
                  return {r['err'], redis.call('RATELIMIT.AVAILABLE', KEYS[1])}";
    let reply: (String, i64) = redis::cmd("EVAL")
        .arg(script)
        .arg(1)
        .arg("api")
        .query(&mut con)
        .unwrap();
    assert_eq!(
        reply,
        (
            "ERR Requested permits amount cannot exceed defined rate".to_string(),
            2
        )
    );
}

#[test]
fn acquire_in_a_script_or_transaction_never_blocks() {
    let server = Server::start();
    let mut con = fresh(&server);
    line::<i64>(&mut con, "RATELIMIT.SETRATE api 3 1000").unwrap();
    // ACQUIRE (no TIMEOUT: outside it would wait forever) until it answers a wait.
    let script = "local n = 0 \
                  while redis.call('RATELIMIT.ACQUIRE', KEYS[1]) == false do n = n + 1 end \
                  return {n, redis.call('RATELIMIT.ACQUIRE', KEYS[1])}";
    let reply: (i64, i64) = redis::cmd("EVAL")
        .arg(script)
        .arg(1)
        .arg("api")
        .query(&mut con)
        .expect("the script returned instead of blocking");
    assert_eq!(reply, (3, 1000));
    let replies = run_in_multi(
        &mut con,
        &["RATELIMIT.ACQUIRE api", "RATELIMIT.ACQUIRE api 2 TIMEOUT 0"],
    );
    assert_eq!(
        replies,
        vec![
            Reply::Value(Value::Int(1000)),
            Reply::Value(Value::Int(1000))
        ]
    );
    let blocked: String = redis::cmd("INFO").arg("clients").query(&mut con).unwrap();
    assert!(blocked.contains("blocked_clients:0"), "{blocked}");
    // Three permits logged, none by the refusals.
    assert_eq!(logged_permits(&mut con, "{api}:permits"), 3);
}

/// Whether `call` (TRYACQUIRE or ALLOW) granted, from its reply.
fn granted(reply: &Value) -> bool {
    match reply {
        Value::Nil => true,
        Value::Int(_) => false,
        Value::Array(fields) => fields.get(1) == Some(&Value::Int(1)),
        Value::Map(fields) => fields.first().map(|(_, v)| v) == Some(&Value::Int(1)),
        other => panic!("not a TRYACQUIRE or ALLOW reply: {other:?}"),
    }
}

/// Whether a transaction on one connection, WATCHing `keys`, still commits after `call` ran on
/// another; and whether `call` granted.
fn commits_after(server: &Server, keys: &[&str], call: &str) -> (bool, bool) {
    let (mut watcher, mut other) = (server.conn(), server.conn());
    let mut watch = redis::cmd("WATCH");
    for key in keys {
        watch.arg(*key);
    }
    let _: () = watch.query(&mut watcher).unwrap();
    let reply: Value = line(&mut other, call).unwrap();
    let _: () = redis::cmd("MULTI").query(&mut watcher).unwrap();
    let _: () = redis::cmd("PING").query(&mut watcher).unwrap();
    let exec: Value = redis::cmd("EXEC").query(&mut watcher).unwrap();
    (exec != Value::Nil, granted(&reply))
}

/// A server with a limiter of each form, one permit a second: `solo` (ONEKEY) and `api` (three
/// keys); and a connection on it, its clock frozen.
fn both_forms_of_one_a_second() -> (Server, Connection) {
    let server = Server::start();
    let mut con = fresh(&server);
    line::<i64>(&mut con, "RATELIMIT.SETRATE solo 1 1000 ONEKEY").unwrap();
    line::<i64>(&mut con, "RATELIMIT.SETRATE api 1 1000").unwrap();
    (server, con)
}

/// WATCH on a limiter's keys is broken by a call that changes them, as by any Redis write, and
/// not by a refusal that leaves them as they were.
#[test]
fn watch_is_broken_by_a_grant_not_by_a_refusal() {
    let (server, mut con) = both_forms_of_one_a_second();
    let three = ["api", "{api}:value", "{api}:permits"];
    for (keys, name) in [(&["solo"][..], "solo"), (&three[..], "api")] {
        for call in ["RATELIMIT.TRYACQUIRE", "RATELIMIT.ALLOW"] {
            let call = format!("{call} {name}");
            assert_eq!(
                commits_after(&server, keys, &call),
                (false, true),
                "{call}: a grant"
            );
            assert_eq!(
                commits_after(&server, keys, &call),
                (true, false),
                "{call}: a refusal"
            );
            advance(&mut con, 1100);
        }
    }
}

/// Clients caching a limiter's key (CLIENT TRACKING) are told to drop it when a call writes it,
/// and not when a refusal leaves it as it was. Invalidations arrive in order, so a write to a
/// sentinel key after the refusal proves that none came before it.
#[test]
fn client_tracking_hears_of_grants_not_of_refusals() {
    let (server, mut con) = both_forms_of_one_a_second();
    let mut listener = server.conn();
    listener.set_read_timeout(Some(HANG)).expect("read timeout");
    let id: i64 = line(&mut listener, "CLIENT ID").unwrap();
    let mut pubsub = listener.as_pubsub();
    pubsub.subscribe("__redis__:invalidate").unwrap();
    let mut next_invalidated = || -> Vec<String> {
        let message = pubsub.get_message().expect("an invalidation");
        message.get_payload().expect("a list of keys")
    };
    let mut cache = server.conn();
    let _: () = line(&mut cache, &format!("CLIENT TRACKING on REDIRECT {id}")).unwrap();
    for (key, name) in [("solo", "solo"), ("{api}:value", "api")] {
        let call = format!("RATELIMIT.TRYACQUIRE {name}");
        let track = |cache: &mut Connection| {
            let _: Value = redis::cmd("GET").arg(key).query(cache).unwrap();
            let _: Value = redis::cmd("GET").arg("sentinel").query(cache).unwrap();
        };
        track(&mut cache);
        assert!(granted(&line(&mut con, &call).unwrap()), "{call}: a grant");
        assert_eq!(next_invalidated(), [key], "{call}: a grant");
        track(&mut cache);
        assert!(
            !granted(&line(&mut con, &call).unwrap()),
            "{call}: a refusal"
        );
        let _: () = line(&mut con, "SET sentinel x").unwrap();
        assert_eq!(next_invalidated(), ["sentinel"], "{call}: a refusal");
        advance(&mut con, 1100);
    }
}
