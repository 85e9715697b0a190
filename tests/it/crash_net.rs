//! Every command, with every option, on every kind of key state a limiter can be in: missing,
//! fresh, used, full, a key of it missing, expired, carrying TTLs, PER_CLIENT, keys of the wrong
//! type, bytes written by someone else, ONEKEY limiters and strings posing as one. The server
//! must stay up through all of them (a module crash takes it down: since Redis 8.2 an expire
//! getter on a missing key does), each reply must be a reply or a clean error, and a command
//! that fails must have written nothing.
//!
//! Run on every server CI tests (`REDIS_SERVER=...`). To cover a new command, add its argument
//! vectors to [`COMMANDS`]; a new kind of state, to [`STATES`].

use crate::common::{error_line, run, set_clock, snapshot, Connection, Server, Value, T0};

/// A state: its name and the commands that make it (after FLUSHALL, the clock at T0).
type State = (&'static str, &'static [&'static str]);

const STATES: &[State] = &[
    ("missing", &[]),
    ("fresh", &["RATELIMIT.SETRATE lim 5 1000"]),
    (
        "used",
        &["RATELIMIT.SETRATE lim 5 1000", "RATELIMIT.TRYACQUIRE lim 3"],
    ),
    (
        "full",
        &["RATELIMIT.SETRATE lim 2 1000", "RATELIMIT.TRYACQUIRE lim 2"],
    ),
    (
        "value missing",
        &[
            "RATELIMIT.SETRATE lim 5 1000",
            "RATELIMIT.TRYACQUIRE lim 3",
            "DEL {lim}:value",
        ],
    ),
    (
        "log missing",
        &[
            "RATELIMIT.SETRATE lim 5 1000",
            "RATELIMIT.TRYACQUIRE lim 3",
            "DEL {lim}:permits",
        ],
    ),
    (
        "log expired",
        &[
            "RATELIMIT.SETRATE lim 5 1000",
            "RATELIMIT.TRYACQUIRE lim 3",
            "RATELIMIT.DEBUG ADVANCE 5000",
        ],
    ),
    (
        "keepalive",
        &[
            "RATELIMIT.SETRATE lim 5 1000 KEEPALIVE 5000",
            "RATELIMIT.TRYACQUIRE lim 1",
        ],
    ),
    (
        "TTL on every key",
        &[
            "RATELIMIT.SETRATE lim 5 1000",
            "RATELIMIT.TRYACQUIRE lim 2",
            "PEXPIRE lim 100000",
            "PEXPIRE {lim}:value 100000",
            "PEXPIRE {lim}:permits 100000",
        ],
    ),
    (
        "TTL on the hash only",
        &[
            "RATELIMIT.SETRATE lim 5 1000",
            "RATELIMIT.TRYACQUIRE lim 2",
            "PERSIST {lim}:value",
            "PERSIST {lim}:permits",
            "PEXPIRE lim 100000",
        ],
    ),
    (
        "TTL on the log only",
        &[
            "RATELIMIT.SETRATE lim 5 1000",
            "RATELIMIT.TRYACQUIRE lim 2",
            "PEXPIRE {lim}:permits 100000",
        ],
    ),
    (
        "per-client",
        &[
            "RATELIMIT.SETRATE lim 5 1000 PER_CLIENT",
            "RATELIMIT.TRYACQUIRE lim 2 CLIENT c1",
        ],
    ),
    (
        "per-client with TTLs",
        &[
            "RATELIMIT.SETRATE lim 5 1000 PER_CLIENT KEEPALIVE 5000",
            "RATELIMIT.TRYACQUIRE lim 2 CLIENT c1",
        ],
    ),
    (
        "per-client, client state missing",
        &["RATELIMIT.SETRATE lim 5 1000 PER_CLIENT"],
    ),
    (
        "per-client, client log missing",
        &[
            "RATELIMIT.SETRATE lim 5 1000 PER_CLIENT",
            "RATELIMIT.TRYACQUIRE lim 2 CLIENT c1",
            "DEL {lim}:permits:c1",
        ],
    ),
    ("hash of another type", &["SET lim x"]),
    (
        "value of another type",
        &[
            "RATELIMIT.SETRATE lim 5 1000",
            "RATELIMIT.TRYACQUIRE lim 1",
            "DEL {lim}:value",
            "RPUSH {lim}:value x",
        ],
    ),
    (
        "log of another type",
        &[
            "RATELIMIT.SETRATE lim 5 1000",
            "RATELIMIT.TRYACQUIRE lim 1",
            "DEL {lim}:permits",
            "SET {lim}:permits x",
        ],
    ),
    (
        "client keys of another type",
        &[
            "RATELIMIT.SETRATE lim 5 1000 PER_CLIENT",
            "SADD {lim}:value:c1 x",
            "HSET {lim}:permits:c1 a b",
        ],
    ),
    (
        "rate not a number",
        &["HSET lim rate abc interval 1000 type 0"],
    ),
    ("interval zero", &["HSET lim rate 5 interval 0 type 0"]),
    (
        "rate huge",
        &["HSET lim rate 99999999999999999999 interval 1000 type 0"],
    ),
    ("hash incomplete", &["HSET lim rate 5"]),
    ("hash of unknown fields", &["HSET lim foo bar"]),
    (
        "value not an integer",
        &[
            "RATELIMIT.SETRATE lim 5 1000",
            "RATELIMIT.TRYACQUIRE lim 1",
            "SET {lim}:value abc",
        ],
    ),
    (
        "value above the rate",
        &[
            "RATELIMIT.SETRATE lim 5 1000",
            "RATELIMIT.TRYACQUIRE lim 1",
            "SET {lim}:value 999",
        ],
    ),
    (
        "value empty",
        &[
            "RATELIMIT.SETRATE lim 5 1000",
            "RATELIMIT.TRYACQUIRE lim 1",
            "SET {lim}:value \"\"",
        ],
    ),
    (
        "member that does not decode",
        &[
            "RATELIMIT.SETRATE lim 5 1000",
            "RATELIMIT.TRYACQUIRE lim 1",
            "ZADD {lim}:permits 1767225600000 garbage",
        ],
    ),
    (
        "member in the future",
        &[
            "RATELIMIT.SETRATE lim 5 1000",
            "RATELIMIT.TRYACQUIRE lim 1",
            "ZADD {lim}:permits 1767225900000 \\x10aaaaaaaaaaaaaaaa\\x01\\x00\\x00\\x00",
        ],
    ),
    (
        "debt after a lowered rate",
        &[
            "RATELIMIT.SETRATE lim 5 1000",
            "RATELIMIT.TRYACQUIRE lim 5",
            "RATELIMIT.SETRATE lim 2 1000 KEEPSTATE",
        ],
    ),
    (
        "merged members",
        &[
            "RATELIMIT.SETRATE lim 100 1000 PRECISION 100",
            "RATELIMIT.TRYACQUIRE lim 3",
            "RATELIMIT.TRYACQUIRE lim 4",
        ],
    ),
    (
        "GCRA state",
        &["GCRA lim 5 10 60", "CL.THROTTLE {lim}:value 5 10 60"],
    ),
    ("GCRA foreign value", &["SET lim -5", "SET {lim}:value abc"]),
    ("onekey fresh", &["RATELIMIT.SETRATE lim 5 1000 ONEKEY"]),
    (
        "onekey used",
        &[
            "RATELIMIT.SETRATE lim 5 1000 ONEKEY PRECISION 10",
            "RATELIMIT.TRYACQUIRE lim 3",
            "RATELIMIT.DEBUG ADVANCE 10",
            "RATELIMIT.TRYACQUIRE lim 1",
        ],
    ),
    (
        "onekey full with keepalive",
        &[
            "RATELIMIT.SETRATE lim 2 1000 ONEKEY KEEPALIVE 5000",
            "RATELIMIT.TRYACQUIRE lim 2",
        ],
    ),
    (
        "onekey log expired",
        &[
            "RATELIMIT.SETRATE lim 5 1000 ONEKEY",
            "RATELIMIT.TRYACQUIRE lim 3",
            "RATELIMIT.DEBUG ADVANCE 5000",
        ],
    ),
    (
        "onekey with a TTL",
        &[
            "RATELIMIT.SETRATE lim 5 1000 ONEKEY",
            "RATELIMIT.TRYACQUIRE lim 2",
            "PEXPIRE lim 100000",
        ],
    ),
    (
        "onekey debt after a lowered rate",
        &[
            "RATELIMIT.SETRATE lim 5 1000 ONEKEY",
            "RATELIMIT.TRYACQUIRE lim 5",
            "RATELIMIT.SETRATE lim 2 1000 KEEPSTATE ONEKEY",
        ],
    ),
    (
        "onekey byte changed",
        &[
            "RATELIMIT.SETRATE lim 5 1000 ONEKEY",
            "RATELIMIT.TRYACQUIRE lim 1",
            "SETRANGE lim 4 \\x00",
        ],
    ),
    (
        "onekey appended",
        &[
            "RATELIMIT.SETRATE lim 5 1000 ONEKEY",
            "RATELIMIT.TRYACQUIRE lim 1",
            "APPEND lim x",
        ],
    ),
    ("onekey truncated", &["SET lim \\xf5L\\x01"]),
    (
        "onekey unknown version",
        &["SET lim \\xf5L\\x09\\x05\\x01\\x01\\x00\\x00\\x00\\x00\\x00\\x12\\x34"],
    ),
    ("onekey magic, then text", &["SET lim \\xf5Lhello"]),
    (
        "onekey beside a three-key state left behind",
        &[
            "RATELIMIT.SETRATE lim 5 1000",
            "RATELIMIT.TRYACQUIRE lim 2",
            "DEL lim",
            "RATELIMIT.SETRATE lim 5 1000 ONEKEY",
            "RATELIMIT.TRYACQUIRE lim 1",
        ],
    ),
    (
        "redis_rate's value",
        &["SET lim 316771200.20612 PX 5000", "SET {lim}:value 3.1e+08"],
    ),
];

/// Every command and option, as one line each (a `\xNN` escape is a byte).
const COMMANDS: &[&str] = &[
    "RATELIMIT.SETRATE lim 5 1000",
    "RATELIMIT.SETRATE lim 5 1000 NX",
    "RATELIMIT.SETRATE lim 5 1000 XX",
    "RATELIMIT.SETRATE lim 3 2000 KEEPSTATE",
    "RATELIMIT.SETRATE lim 3 2000 XX KEEPSTATE",
    "RATELIMIT.SETRATE lim 5 1000 KEEPALIVE 2000",
    "RATELIMIT.SETRATE lim 5 1000 NX KEEPALIVE 2000",
    "RATELIMIT.SETRATE lim 50 1000 PRECISION 10",
    "RATELIMIT.SETRATE lim 5 1000 PER_CLIENT",
    "RATELIMIT.SETRATE lim 5 1000 PER_CLIENT CLIENT c1",
    "RATELIMIT.SETRATE lim 5 1000 PER_CLIENT KEEPSTATE CLIENT c1",
    "RATELIMIT.SETRATE lim 5 1000 OVERALL CLIENT c1",
    "RATELIMIT.SETRATE lim 0 1000",
    "RATELIMIT.SETRATE lim 5 1000 NX XX",
    "RATELIMIT.SETRATE lim 5 1000 ONEKEY",
    "RATELIMIT.SETRATE lim 5 1000 ONEKEY NX",
    "RATELIMIT.SETRATE lim 3 2000 ONEKEY XX KEEPSTATE PRECISION 100",
    "RATELIMIT.SETRATE lim 5 1000 ONEKEY KEEPALIVE 2000 CLIENT c1",
    "RATELIMIT.SETRATE lim 5 1000 ONEKEY PER_CLIENT",
    "RATELIMIT.TRYACQUIRE lim",
    "RATELIMIT.TRYACQUIRE lim 2",
    "RATELIMIT.TRYACQUIRE lim 1 CLIENT c1",
    "RATELIMIT.TRYACQUIRE lim 100",
    "RATELIMIT.TRYACQUIRE lim 1 RATE 5 1000",
    "RATELIMIT.TRYACQUIRE lim 1 CLIENT c1 RATE 5 1000 PER_CLIENT KEEPALIVE 2000 PRECISION 10",
    "RATELIMIT.ACQUIRE lim 1 TIMEOUT 1",
    "RATELIMIT.ACQUIRE lim 1 TIMEOUT 1 CLIENT c1",
    "RATELIMIT.ACQUIRE lim 1 TIMEOUT 1 RATE 5 1000 KEEPALIVE 2000",
    "RATELIMIT.ACQUIRE lim 1 TIMEOUT 1 RATE 5 1000 ONEKEY KEEPALIVE 2000",
    "RATELIMIT.TRYACQUIRE lim 1 RATE 5 1000 ONEKEY",
    "RATELIMIT.ALLOW lim 1 RATE 5 1000 ONEKEY PRECISION 10",
    "RATELIMIT.ACQUIRE lim 1 TIMEOUT 1 TICKET t1",
    "RATELIMIT.ACQUIRE lim 2 TIMEOUT 1 CLIENT c1 TICKET t2",
    "RATELIMIT.CANCEL lim t1",
    "RATELIMIT.CANCEL lim t2 CLIENT c1",
    "RATELIMIT.CANCEL lim unknown",
    "RATELIMIT.ALLOW lim",
    "RATELIMIT.ALLOW lim 2 CLIENT c1",
    "RATELIMIT.ALLOW lim 1 RATE 5 1000",
    "RATELIMIT.ALLOW lim 1 CLIENT c1 RATE 5 1000 PER_CLIENT KEEPALIVE 2000 PRECISION 10",
    "RATELIMIT.ALLOWALL 1 lim",
    "RATELIMIT.ALLOWALL 2 lim other PERMITS 1 CLIENT c1",
    "RATELIMIT.CONFIG lim",
    "RATELIMIT.AVAILABLE lim",
    "RATELIMIT.AVAILABLE lim CLIENT c1",
    "RATELIMIT.PEEK lim",
    "RATELIMIT.PEEK lim 2 CLIENT c1",
    "RATELIMIT.PEEK lim 100",
    "RATELIMIT.RELEASE lim 1",
    "RATELIMIT.RELEASE lim 3 CLIENT c1",
    "RATELIMIT.RELEASE lim 4294967295",
    "RATELIMIT.DELETE lim",
    "RATELIMIT.DELETE lim CLIENT c1",
    "RATELIMIT.EXPIRE lim 5000",
    "RATELIMIT.EXPIRE lim 5000 NX",
    "RATELIMIT.EXPIRE lim 5000 XX",
    "RATELIMIT.EXPIRE lim 5000 GT",
    "RATELIMIT.EXPIRE lim 5000 LT",
    "RATELIMIT.EXPIRE lim 0",
    "RATELIMIT.EXPIRE lim 5000 CLIENT c1",
    "RATELIMIT.PERSIST lim",
    "RATELIMIT.PERSIST lim CLIENT c1",
    "RATELIMIT.DEBUG ADVANCE 0",
    "CL.THROTTLE lim 5 10 60",
    "CL.THROTTLE lim 5 10 60 0",
    "CL.THROTTLE lim 5 10 60 -3",
    "CL.THROTTLE {lim}:value 0 1 1 2",
    "CL.THROTTLE {lim}:permits 5 10 60",
    "GCRA lim 5 10 60",
    "GCRA lim 5 10 0.5 TOKENS 3",
    "GCRA {lim}:value 0 1 1",
    "GCRA {lim}:permits 5 10 60 TOKENS 1",
    "RATELIMIT.GCRAALLOW lim 5 10 60",
    "RATELIMIT.GCRAALLOW lim 5 10 0.5 TOKENS 3",
    "RATELIMIT.GCRAALLOW lim 5 10 60 TOKENS 0",
    "RATELIMIT.GCRAALLOW lim 5 10 60 TOKENS -2",
    "RATELIMIT.GCRAALLOW lim 0 1 1 ATMOST 4",
    "RATELIMIT.GCRAALLOW {lim}:value 5 10 60 ATMOST 100",
    "RATELIMIT.GCRAALLOW {lim}:permits 5 10 60",
    "RATELIMIT.STATS",
    "RATELIMIT.TOPREFUSED",
    "RATELIMIT.TOPREFUSED 1024",
    "RATELIMIT.TOPREFUSED 0",
];

/// `text` as words, `\xNN` in a word standing for that byte and `""` for an empty word.
fn words(text: &str) -> Vec<Vec<u8>> {
    text.split_whitespace()
        .map(|word| {
            if word == "\"\"" {
                return Vec::new();
            }
            let bytes = word.as_bytes();
            let mut out = Vec::new();
            let mut i = 0;
            while i < bytes.len() {
                if bytes[i] == b'\\' && bytes.get(i + 1) == Some(&b'x') && i + 4 <= bytes.len() {
                    let hex = std::str::from_utf8(&bytes[i + 2..i + 4]).expect("hex");
                    out.push(u8::from_str_radix(hex, 16).expect("a hex byte"));
                    i += 4;
                } else {
                    out.push(bytes[i]);
                    i += 1;
                }
            }
            out
        })
        .collect()
}

fn call(con: &mut Connection, text: &str) -> Result<Value, String> {
    let words = words(text);
    let refs: Vec<&[u8]> = words.iter().map(Vec::as_slice).collect();
    run::<Value>(con, &refs).map_err(|e| error_line(&e))
}

/// The server answers PING on a fresh connection (a crash closes every connection).
fn alive(server: &mut Server) -> bool {
    server.is_alive()
        && server
            .client()
            .get_connection()
            .ok()
            .and_then(|mut con| redis::cmd("PING").query::<String>(&mut con).ok())
            .is_some()
}

#[test]
fn every_command_on_every_state_keeps_the_server_up() {
    let mut server = Server::start();
    let mut con = server.conn();
    let mut failures = Vec::new();
    let mut combinations = 0;
    for &(state, setup) in STATES {
        for &command in COMMANDS {
            let _: () = redis::cmd("FLUSHALL").query(&mut con).expect("FLUSHALL");
            set_clock(&mut con, T0);
            for step in setup {
                // Some steps of a state fail on purpose (a rate above what is stored, say).
                let _ = call(&mut con, step);
            }
            let before = snapshot(&mut con);
            let reply = call(&mut con, command);
            combinations += 1;
            if !alive(&mut server) {
                panic!(
                    "the server died on `{command}` in state '{state}':\n{}",
                    server.log()
                );
            }
            match &reply {
                Err(line) => {
                    if line.is_empty()
                        || !line.chars().next().is_some_and(|c| c.is_ascii_uppercase())
                    {
                        failures.push(format!("'{state}' `{command}`: odd error line {line:?}"));
                    }
                    let after = snapshot(&mut con);
                    if after != before {
                        failures.push(format!(
                            "'{state}' `{command}` failed ({line}) but wrote: {before:?} -> {after:?}"
                        ));
                    }
                }
                Ok(Value::ServerError(e)) => {
                    failures.push(format!("'{state}' `{command}`: error inside a reply {e:?}"));
                }
                Ok(_) => {}
            }
            if command.starts_with("RATELIMIT.PEEK") && snapshot(&mut con) != before {
                failures.push(format!("'{state}' `{command}` wrote"));
            }
        }
    }
    // The keys of every command are named in the tables above: a state or command dropped by
    // mistake would shrink this.
    assert_eq!(combinations, STATES.len() * COMMANDS.len());
    assert!(combinations >= 1_500, "{combinations} combinations");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
