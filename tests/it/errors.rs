//! Every error of SPEC §3-4 with its exact text, and for every failing command: nothing written
//! (the whole dataset, TTLs included, is byte-identical before and after) and the server alive.

use crate::common::*;

const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";
/// Redisson's text, which clients match on, then the limiter's name.
fn not_initialized(name: &str) -> String {
    format!("ERR RateLimiter is not initialized (limiter '{name}')")
}

/// Redis's text, then the derived key that holds another type.
fn wrongtype_of(key: &str) -> String {
    format!("{WRONGTYPE} (key '{key}')")
}
const SYNTAX: &str = "ERR syntax error";
const RATE_ERR: &str = "ERR rate must be an integer between 1 and 4294967295";
const INTERVAL_ERR: &str = "ERR interval must be an integer between 1 and 3153600000000";
const KEEPALIVE_ERR: &str = "ERR KEEPALIVE must be an integer between 0 and 3153600000000";
const PERMITS_ERR: &str = "ERR permits must be an integer between 1 and 4294967295";
const TIMEOUT_ERR: &str = "ERR TIMEOUT must be an integer between 0 and 3153600000000";
const MS_ERR: &str = "ERR milliseconds must be an integer between -3153600000000 and 3153600000000";
const NX_CONFLICT: &str = "ERR NX and XX, GT or LT options at the same time are not compatible";
const GT_LT_CONFLICT: &str = "ERR GT and LT options at the same time are not compatible";

/// Runs a command that must fail; asserts that it changed nothing (keys, contents, expiries)
/// and that the server still answers. Returns the error line.
fn fails_words(server: &mut Server, con: &mut Connection, words: &[&[u8]]) -> String {
    let shown = words
        .iter()
        .map(|w| String::from_utf8_lossy(w).into_owned())
        .collect::<Vec<_>>()
        .join(" ");
    let before = snapshot(con);
    let err = match run::<Value>(con, words) {
        Ok(v) => panic!("`{shown}` succeeded with {v:?}, expected an error"),
        Err(e) => error_line(&e),
    };
    assert_eq!(
        snapshot(con),
        before,
        "`{shown}` failed with `{err}` but changed the dataset"
    );
    assert!(server.is_alive(), "`{shown}` killed the server");
    assert_eq!(line::<String>(con, "PING").unwrap(), "PONG");
    err
}

fn fails(server: &mut Server, con: &mut Connection, text: &str) -> String {
    let words: Vec<&[u8]> = text.split_whitespace().map(str::as_bytes).collect();
    fails_words(server, con, &words)
}

fn fails_with(server: &mut Server, con: &mut Connection, text: &str, expected: &str) {
    assert_eq!(fails(server, con, text), expected, "`{text}`");
}

/// A dataset where any stray write shows: an OVERALL limiter `api` (rate 10, 3 permits taken)
/// and a PER_CLIENT limiter `pc` (client c1 took 2), every key with a fixed far-away expiry, so
/// a refreshed TTL, a reset state or a pruned log would change the snapshot.
fn populated(con: &mut Connection) {
    set_clock(con, T0);
    line::<i64>(con, "RATELIMIT.SETRATE api 10 1000 KEEPALIVE 60000").unwrap();
    assert_eq!(try_acquire(con, "api", 3), None);
    line::<i64>(con, "RATELIMIT.SETRATE pc 5 1000 PER_CLIENT").unwrap();
    assert_eq!(
        line::<Option<i64>>(con, "RATELIMIT.TRYACQUIRE pc 2 CLIENT c1").unwrap(),
        None
    );
    advance(con, 100);
    freeze_expiries(con);
}

/// Gives every key the same absolute expiry, an hour past the server's clock.
fn freeze_expiries(con: &mut Connection) {
    let (secs, _): (i64, i64) = redis::cmd("TIME").query(con).unwrap();
    let at = (secs + 3600) * 1000;
    let keys: Vec<Vec<u8>> = redis::cmd("KEYS").arg("*").query(con).unwrap();
    assert!(!keys.is_empty());
    for key in keys {
        let set: i64 = redis::cmd("PEXPIREAT")
            .arg(&key)
            .arg(at)
            .query(con)
            .unwrap();
        assert_eq!(set, 1);
    }
}

#[test]
fn wrong_arity_for_every_command() {
    let mut server = Server::start();
    let mut con = server.conn();
    populated(&mut con);
    for (text, name) in [
        ("RATELIMIT.SETRATE", "ratelimit.setrate"),
        ("RATELIMIT.SETRATE api", "ratelimit.setrate"),
        ("RATELIMIT.SETRATE api 10", "ratelimit.setrate"),
        ("RATELIMIT.TRYACQUIRE", "ratelimit.tryacquire"),
        ("RATELIMIT.ACQUIRE", "ratelimit.acquire"),
        ("RATELIMIT.CONFIG", "ratelimit.config"),
        ("RATELIMIT.CONFIG api extra", "ratelimit.config"),
        ("RATELIMIT.AVAILABLE", "ratelimit.available"),
        ("RATELIMIT.PEEK", "ratelimit.peek"),
        ("RATELIMIT.RELEASE", "ratelimit.release"),
        ("RATELIMIT.RELEASE api", "ratelimit.release"),
        ("RATELIMIT.CANCEL", "ratelimit.cancel"),
        ("RATELIMIT.CANCEL api", "ratelimit.cancel"),
        ("RATELIMIT.DELETE", "ratelimit.delete"),
        ("RATELIMIT.EXPIRE", "ratelimit.expire"),
        ("RATELIMIT.EXPIRE api", "ratelimit.expire"),
        ("RATELIMIT.PERSIST", "ratelimit.persist"),
        ("RATELIMIT.DEBUG", "ratelimit.debug"),
    ] {
        fails_with(
            &mut server,
            &mut con,
            text,
            &format!("ERR wrong number of arguments for '{name}' command"),
        );
    }
}

/// Every unknown, repeated, conflicting or incomplete option: `ERR syntax error, ` (the prefix
/// clients match on) and what is wrong, naming the word the parser stopped at.
#[test]
fn unknown_repeated_and_incomplete_options_are_syntax_errors() {
    let mut server = Server::start();
    let mut con = server.conn();
    populated(&mut con);
    for (text, detail) in [
        // SETRATE: conflicts, repeats, unknown words, options missing their value.
        (
            "RATELIMIT.SETRATE api 10 1000 NX XX",
            "NX and XX options at the same time are not compatible",
        ),
        (
            "RATELIMIT.SETRATE api 10 1000 xx nx",
            "XX and NX options at the same time are not compatible",
        ),
        (
            "RATELIMIT.SETRATE api 10 1000 NX KEEPSTATE",
            "NX and KEEPSTATE options at the same time are not compatible",
        ),
        (
            "RATELIMIT.SETRATE api 10 1000 KEEPSTATE nx",
            "NX and KEEPSTATE options at the same time are not compatible",
        ),
        (
            "RATELIMIT.SETRATE api 10 1000 OVERALL PER_CLIENT",
            "OVERALL and PER_CLIENT options at the same time are not compatible",
        ),
        (
            "RATELIMIT.SETRATE api 10 1000 per_client OVERALL",
            "PER_CLIENT and OVERALL options at the same time are not compatible",
        ),
        (
            "RATELIMIT.SETRATE api 10 1000 OVERALL overall",
            "OVERALL specified multiple times",
        ),
        (
            "RATELIMIT.SETRATE api 10 1000 XX XX",
            "XX specified multiple times",
        ),
        (
            "RATELIMIT.SETRATE api 10 1000 NX NX",
            "NX specified multiple times",
        ),
        (
            "RATELIMIT.SETRATE api 10 1000 KEEPSTATE KEEPSTATE",
            "KEEPSTATE specified multiple times",
        ),
        (
            "RATELIMIT.SETRATE api 10 1000 KEEPALIVE 2000 KEEPALIVE 2000",
            "KEEPALIVE specified multiple times",
        ),
        (
            "RATELIMIT.SETRATE api 10 1000 CLIENT a CLIENT b",
            "CLIENT specified multiple times",
        ),
        (
            "RATELIMIT.SETRATE api 10 1000 CLIENT a CLIENT a",
            "CLIENT specified multiple times",
        ),
        (
            "RATELIMIT.SETRATE api 10 1000 KEEPALIVE",
            "KEEPALIVE needs a value",
        ),
        (
            "RATELIMIT.SETRATE api 10 1000 PRECISION",
            "PRECISION needs a value",
        ),
        (
            "RATELIMIT.SETRATE api 10 1000 CLIENT",
            "CLIENT needs a value",
        ),
        (
            "RATELIMIT.SETRATE api 10 1000 FAST",
            "unknown option 'FAST'",
        ),
        ("RATELIMIT.SETRATE api 10 1000 10", "unknown option '10'"),
        (
            "RATELIMIT.SETRATE api 10 1000 OVERALL KEEPSTATE XX CLIENT c1 junk",
            "unknown option 'junk'",
        ),
        // TRYACQUIRE: a word where permits go that is no number is read as an option.
        ("RATELIMIT.TRYACQUIRE login abc", "unknown option 'abc'"),
        ("RATELIMIT.TRYACQUIRE api 1 2", "unknown option '2'"),
        ("RATELIMIT.TRYACQUIRE api FOO", "unknown option 'FOO'"),
        ("RATELIMIT.TRYACQUIRE api 1 FOO", "unknown option 'FOO'"),
        (
            "RATELIMIT.TRYACQUIRE api TIMEOUT 10",
            "unknown option 'TIMEOUT'",
        ),
        ("RATELIMIT.TRYACQUIRE api CLIENT", "CLIENT needs a value"),
        ("RATELIMIT.TRYACQUIRE api 1 CLIENT", "CLIENT needs a value"),
        (
            "RATELIMIT.TRYACQUIRE api CLIENT a CLIENT b",
            "CLIENT specified multiple times",
        ),
        (
            "RATELIMIT.TRYACQUIRE api 1 CLIENT a extra",
            "unknown option 'extra'",
        ),
        (
            "RATELIMIT.TRYACQUIRE pc CLIENT c1 CLIENT c1",
            "CLIENT specified multiple times",
        ),
        (
            "RATELIMIT.TRYACQUIRE new RATE 10",
            "RATE needs a rate and an interval",
        ),
        (
            "RATELIMIT.TRYACQUIRE new RATE",
            "RATE needs a rate and an interval",
        ),
        (
            "RATELIMIT.TRYACQUIRE new RATE 10 1000 RATE 10 1000",
            "RATE specified multiple times",
        ),
        (
            "RATELIMIT.TRYACQUIRE new RATE 10 1000 OVERALL PER_CLIENT",
            "OVERALL and PER_CLIENT options at the same time are not compatible",
        ),
        (
            "RATELIMIT.TRYACQUIRE new RATE 10 1000 KEEPALIVE",
            "KEEPALIVE needs a value",
        ),
        (
            "RATELIMIT.TRYACQUIRE new RATE 10 1000 NX",
            "unknown option 'NX'",
        ),
        // ACQUIRE
        ("RATELIMIT.ACQUIRE api 1 2", "unknown option '2'"),
        ("RATELIMIT.ACQUIRE api FOO", "unknown option 'FOO'"),
        ("RATELIMIT.ACQUIRE api 1 TIMEOUT", "TIMEOUT needs a value"),
        (
            "RATELIMIT.ACQUIRE api TIMEOUT 10 TIMEOUT 10",
            "TIMEOUT specified multiple times",
        ),
        ("RATELIMIT.ACQUIRE api TIMEOUT 10 10", "unknown option '10'"),
        ("RATELIMIT.ACQUIRE api CLIENT", "CLIENT needs a value"),
        (
            "RATELIMIT.ACQUIRE api CLIENT a CLIENT b",
            "CLIENT specified multiple times",
        ),
        ("RATELIMIT.ACQUIRE api TICKET", "TICKET needs a value"),
        (
            "RATELIMIT.ACQUIRE api TICKET a TICKET a",
            "TICKET specified multiple times",
        ),
        // ALLOW, PEEK and ALLOWALL
        ("RATELIMIT.ALLOW api 1 2", "unknown option '2'"),
        ("RATELIMIT.ALLOW api TIMEOUT 10", "unknown option 'TIMEOUT'"),
        ("RATELIMIT.PEEK api RATE 10 1000", "unknown option 'RATE'"),
        ("RATELIMIT.PEEK api CLIENT", "CLIENT needs a value"),
        ("RATELIMIT.ALLOWALL 1 api FOO", "unknown option 'FOO'"),
        ("RATELIMIT.ALLOWALL 1 api PERMITS", "PERMITS needs a value"),
        (
            "RATELIMIT.ALLOWALL 1 api PERMITS 1 permits 1",
            "PERMITS specified multiple times",
        ),
        (
            "RATELIMIT.ALLOWALL 1 api CLIENT a CLIENT a",
            "CLIENT specified multiple times",
        ),
        // AVAILABLE
        ("RATELIMIT.AVAILABLE api FOO", "unknown option 'FOO'"),
        ("RATELIMIT.AVAILABLE api 1", "unknown option '1'"),
        ("RATELIMIT.AVAILABLE api CLIENT", "CLIENT needs a value"),
        (
            "RATELIMIT.AVAILABLE api CLIENT a CLIENT b",
            "CLIENT specified multiple times",
        ),
        // RELEASE
        ("RATELIMIT.RELEASE api 1 FOO", "unknown option 'FOO'"),
        ("RATELIMIT.RELEASE api 1 2", "unknown option '2'"),
        ("RATELIMIT.RELEASE api 1 CLIENT", "CLIENT needs a value"),
        (
            "RATELIMIT.RELEASE pc 1 CLIENT c1 CLIENT c2",
            "CLIENT specified multiple times",
        ),
        // CANCEL
        ("RATELIMIT.CANCEL api t FOO", "unknown option 'FOO'"),
        ("RATELIMIT.CANCEL api t 1", "unknown option '1'"),
        ("RATELIMIT.CANCEL api t CLIENT", "CLIENT needs a value"),
        (
            "RATELIMIT.CANCEL pc t CLIENT c1 CLIENT c2",
            "CLIENT specified multiple times",
        ),
        // DELETE
        ("RATELIMIT.DELETE api FOO", "unknown option 'FOO'"),
        ("RATELIMIT.DELETE api CLIENT", "CLIENT needs a value"),
        (
            "RATELIMIT.DELETE api CLIENT a CLIENT b",
            "CLIENT specified multiple times",
        ),
        // EXPIRE
        ("RATELIMIT.EXPIRE api 1000 FOO", "unknown option 'FOO'"),
        (
            "RATELIMIT.EXPIRE api 1000 NX NX",
            "NX specified multiple times",
        ),
        (
            "RATELIMIT.EXPIRE api 1000 XX xx",
            "XX specified multiple times",
        ),
        (
            "RATELIMIT.EXPIRE api 1000 GT GT",
            "GT specified multiple times",
        ),
        (
            "RATELIMIT.EXPIRE api 1000 LT LT",
            "LT specified multiple times",
        ),
        ("RATELIMIT.EXPIRE api 1000 CLIENT", "CLIENT needs a value"),
        (
            "RATELIMIT.EXPIRE api 1000 CLIENT a CLIENT b",
            "CLIENT specified multiple times",
        ),
        ("RATELIMIT.EXPIRE api 1000 1000", "unknown option '1000'"),
        // PERSIST
        ("RATELIMIT.PERSIST api FOO", "unknown option 'FOO'"),
        ("RATELIMIT.PERSIST api CLIENT", "CLIENT needs a value"),
        (
            "RATELIMIT.PERSIST api CLIENT a CLIENT b",
            "CLIENT specified multiple times",
        ),
        // GCRAALLOW and TOPREFUSED
        ("RATELIMIT.GCRAALLOW g 1 1 1 FOO 1", "unknown option 'FOO'"),
        ("RATELIMIT.GCRAALLOW g 1 1 1 FOO", "unknown option 'FOO'"),
        ("RATELIMIT.GCRAALLOW g 1 1 1 TOKENS", "TOKENS needs a value"),
        ("RATELIMIT.GCRAALLOW g 1 1 1 atmost", "ATMOST needs a value"),
        ("RATELIMIT.TOPREFUSED 10 20", "unknown option '20'"),
    ] {
        let error = fails(&mut server, &mut con, text);
        assert!(error.starts_with(SYNTAX), "`{text}`: {error}");
        assert_eq!(error, format!("{SYNTAX}, {detail}"), "`{text}`");
    }
    // The word is shown as the other errors show names: escaped, and cut after 256 bytes.
    let long = vec![b'x'; 300];
    assert_eq!(
        fails_words(
            &mut server,
            &mut con,
            &[b"RATELIMIT.TRYACQUIRE", b"api", b"a\r\nb'"]
        ),
        "ERR syntax error, unknown option 'a\\x0d\\x0ab\\x27'"
    );
    assert_eq!(
        fails_words(
            &mut server,
            &mut con,
            &[b"RATELIMIT.AVAILABLE", b"api", &long]
        ),
        format!(
            "ERR syntax error, unknown option '{}...(44 more bytes)'",
            "x".repeat(256)
        )
    );
}

#[test]
fn expire_condition_conflicts_use_redis_own_messages() {
    let mut server = Server::start();
    let mut con = server.conn();
    populated(&mut con);
    for text in [
        "RATELIMIT.EXPIRE api 1000 NX XX",
        "RATELIMIT.EXPIRE api 1000 NX GT",
        "RATELIMIT.EXPIRE api 1000 lt nx",
        "RATELIMIT.EXPIRE api 1000 XX GT NX",
    ] {
        fails_with(&mut server, &mut con, text, NX_CONFLICT);
    }
    for text in [
        "RATELIMIT.EXPIRE api 1000 GT LT",
        "RATELIMIT.EXPIRE api 1000 lt gt",
        "RATELIMIT.EXPIRE api 1000 XX GT LT",
    ] {
        fails_with(&mut server, &mut con, text, GT_LT_CONFLICT);
    }
}

#[test]
fn malformed_or_out_of_range_numbers_name_their_argument() {
    let mut server = Server::start();
    let mut con = server.conn();
    populated(&mut con);
    let malformed = ["0", "-1", "1.5", "abc", "+1", "01", "-0", "1e3", "0x10"];
    for bad in malformed
        .iter()
        .chain(&["4294967296", "99999999999999999999"])
    {
        fails_with(
            &mut server,
            &mut con,
            &format!("RATELIMIT.SETRATE api {bad} 1000"),
            RATE_ERR,
        );
        fails_with(
            &mut server,
            &mut con,
            &format!("RATELIMIT.RELEASE api {bad}"),
            PERMITS_ERR,
        );
    }
    for bad in malformed
        .iter()
        .chain(&["3153600000001", "99999999999999999999"])
    {
        fails_with(
            &mut server,
            &mut con,
            &format!("RATELIMIT.SETRATE api 10 {bad}"),
            INTERVAL_ERR,
        );
    }
    // A numeric-looking permits argument is a malformed permits count, not an option.
    for bad in [
        "0",
        "-1",
        "1.5",
        "+1",
        "01",
        "-0",
        "1e3",
        "4294967296",
        "99999999999999999999",
    ] {
        fails_with(
            &mut server,
            &mut con,
            &format!("RATELIMIT.TRYACQUIRE api {bad}"),
            PERMITS_ERR,
        );
        fails_with(
            &mut server,
            &mut con,
            &format!("RATELIMIT.ACQUIRE api {bad} TIMEOUT 1000"),
            PERMITS_ERR,
        );
    }
    for bad in [
        "-1",
        "1.5",
        "abc",
        "+1",
        "01",
        "-0",
        "3153600000001",
        "99999999999999999999",
    ] {
        fails_with(
            &mut server,
            &mut con,
            &format!("RATELIMIT.ACQUIRE api 1 TIMEOUT {bad}"),
            TIMEOUT_ERR,
        );
    }
    for bad in [
        "-1",
        "1.5",
        "abc",
        "+1",
        "01",
        "-0",
        "3153600000001",
        "99999999999999999999",
    ] {
        fails_with(
            &mut server,
            &mut con,
            &format!("RATELIMIT.SETRATE api 10 1000 KEEPALIVE {bad}"),
            KEEPALIVE_ERR,
        );
    }
    for bad in [
        "abc",
        "1.5",
        "+1",
        "01",
        "-0",
        "3153600000001",
        "-3153600000001",
    ] {
        fails_with(
            &mut server,
            &mut con,
            &format!("RATELIMIT.EXPIRE api {bad}"),
            MS_ERR,
        );
    }
    // The empty string, sent binary-safe.
    assert_eq!(
        fails_words(
            &mut server,
            &mut con,
            &[b"RATELIMIT.SETRATE", b"api", b"", b"1000"]
        ),
        RATE_ERR
    );
    assert_eq!(
        fails_words(
            &mut server,
            &mut con,
            &[b"RATELIMIT.SETRATE", b"api", b"10", b""]
        ),
        INTERVAL_ERR
    );
    assert_eq!(
        fails_words(&mut server, &mut con, &[b"RATELIMIT.RELEASE", b"api", b""]),
        PERMITS_ERR
    );
    // Bounds themselves are accepted (checked on a fresh key).
    assert_eq!(
        line::<i64>(&mut con, "RATELIMIT.SETRATE edge 4294967295 3153600000000").unwrap(),
        1
    );
    assert_eq!(try_acquire(&mut con, "edge", 4294967295), None);
}

#[test]
fn keepalive_shorter_than_the_interval_is_refused() {
    let mut server = Server::start();
    let mut con = server.conn();
    populated(&mut con);
    for text in [
        "RATELIMIT.SETRATE api 10 1000 KEEPALIVE 999",
        "RATELIMIT.SETRATE api 10 1000 KEEPALIVE 1",
        "RATELIMIT.SETRATE api 10 1000 KEEPALIVE 999 NX",
        "RATELIMIT.SETRATE fresh 10 1000 KEEPALIVE 999 XX",
    ] {
        fails_with(
            &mut server,
            &mut con,
            text,
            "ERR KEEPALIVE must be 0 or at least the interval",
        );
    }
    // 0 (none) and exactly the interval are accepted.
    assert_eq!(
        line::<i64>(&mut con, "RATELIMIT.SETRATE other 10 1000 KEEPALIVE 0").unwrap(),
        1
    );
    assert_eq!(
        line::<i64>(&mut con, "RATELIMIT.SETRATE other 10 1000 KEEPALIVE 1000").unwrap(),
        1
    );
}

#[test]
fn permits_above_the_rate_are_refused_with_redissons_message() {
    let mut server = Server::start();
    let mut con = server.conn();
    populated(&mut con);
    let msg = "ERR Requested permits amount cannot exceed defined rate";
    fails_with(&mut server, &mut con, "RATELIMIT.TRYACQUIRE api 11", msg);
    fails_with(&mut server, &mut con, "RATELIMIT.ACQUIRE api 11", msg);
    fails_with(
        &mut server,
        &mut con,
        "RATELIMIT.ACQUIRE pc 6 TIMEOUT 1000 CLIENT c1",
        msg,
    );
    fails_with(
        &mut server,
        &mut con,
        "RATELIMIT.TRYACQUIRE api 4294967295",
        msg,
    );
    fails_with(
        &mut server,
        &mut con,
        "RATELIMIT.TRYACQUIRE pc 6 CLIENT c1",
        msg,
    );
    fails_with(
        &mut server,
        &mut con,
        "RATELIMIT.TRYACQUIRE pc 6 CLIENT someone-new",
        msg,
    );
    // Exactly the rate is allowed (7 are free: the check is on the rate, not what is left).
    assert_eq!(try_acquire(&mut con, "api", 10), Some(900));
}

#[test]
fn uninitialized_limiters_are_refused() {
    let mut server = Server::start();
    let mut con = server.conn();
    populated(&mut con);
    for text in [
        "RATELIMIT.TRYACQUIRE nope",
        "RATELIMIT.TRYACQUIRE nope 3",
        "RATELIMIT.TRYACQUIRE nope CLIENT c1",
        "RATELIMIT.ACQUIRE nope TIMEOUT 1000",
        "RATELIMIT.ACQUIRE nope",
        "RATELIMIT.AVAILABLE nope",
        "RATELIMIT.RELEASE nope 1",
        "RATELIMIT.CANCEL nope t",
    ] {
        fails_with(&mut server, &mut con, text, &not_initialized("nope"));
    }
    // Leftover state without a hash does not make a limiter either.
    line::<()>(&mut con, "SET {ghost}:value 5").unwrap();
    line::<()>(&mut con, "HSET ghost unrelated 1").unwrap();
    fails_with(
        &mut server,
        &mut con,
        "RATELIMIT.TRYACQUIRE ghost",
        &not_initialized("ghost"),
    );
    // A hash missing any one of rate, interval, type.
    for (name, fields) in [
        ("norate", "interval 1000 type 0 keepAliveTime 0"),
        ("nointerval", "rate 10 type 0 keepAliveTime 0"),
        ("notype", "rate 10 interval 1000 keepAliveTime 0"),
    ] {
        line::<()>(&mut con, &format!("HSET {name} {fields}")).unwrap();
        for cmd in [
            format!("RATELIMIT.TRYACQUIRE {name}"),
            format!("RATELIMIT.ACQUIRE {name} TIMEOUT 1000"),
            format!("RATELIMIT.AVAILABLE {name}"),
            format!("RATELIMIT.RELEASE {name} 1"),
        ] {
            fails_with(&mut server, &mut con, &cmd, &not_initialized(name));
        }
    }
    // A binary name is shown escaped, as every error shows names.
    assert_eq!(
        fails_words(&mut server, &mut con, &[b"RATELIMIT.TRYACQUIRE", b"a\r\n'"]),
        "ERR RateLimiter is not initialized (limiter 'a\\x0d\\x0a\\x27')"
    );
}

#[test]
fn per_client_limiters_need_a_non_empty_client_id() {
    let mut server = Server::start();
    let mut con = server.conn();
    populated(&mut con);
    let required = "ERR the limiter is PER_CLIENT: CLIENT id is required";
    for text in [
        "RATELIMIT.TRYACQUIRE pc",
        "RATELIMIT.TRYACQUIRE pc 1",
        "RATELIMIT.ACQUIRE pc TIMEOUT 1000",
        "RATELIMIT.AVAILABLE pc",
        "RATELIMIT.RELEASE pc 1",
    ] {
        fails_with(&mut server, &mut con, text, required);
    }
    let empty = "ERR CLIENT id must not be empty";
    for words in [
        &[&b"RATELIMIT.TRYACQUIRE"[..], b"pc", b"CLIENT", b""][..],
        &[
            b"RATELIMIT.ACQUIRE",
            b"pc",
            b"TIMEOUT",
            b"1000",
            b"CLIENT",
            b"",
        ],
        &[b"RATELIMIT.AVAILABLE", b"pc", b"CLIENT", b""],
        &[b"RATELIMIT.RELEASE", b"pc", b"1", b"CLIENT", b""],
        &[b"RATELIMIT.SETRATE", b"pc", b"5", b"1000", b"CLIENT", b""],
        &[b"RATELIMIT.DELETE", b"pc", b"CLIENT", b""],
        &[b"RATELIMIT.EXPIRE", b"pc", b"1000", b"CLIENT", b""],
        &[b"RATELIMIT.PERSIST", b"pc", b"CLIENT", b""],
    ] {
        assert_eq!(fails_words(&mut server, &mut con, words), empty);
    }
}

#[test]
fn wrongtype_when_the_hash_holds_another_type() {
    let mut server = Server::start();
    let mut con = server.conn();
    populated(&mut con);
    line::<()>(&mut con, "SET str hello").unwrap();
    line::<()>(&mut con, "RPUSH lst a b").unwrap();
    for (key, expected) in [
        (
            "str",
            "WRONGTYPE key 'str' holds a string that is not a ONEKEY rate limiter",
        ),
        ("lst", WRONGTYPE),
    ] {
        for cmd in [
            format!("RATELIMIT.SETRATE {key} 10 1000"),
            format!("RATELIMIT.SETRATE {key} 10 1000 NX"),
            format!("RATELIMIT.SETRATE {key} 10 1000 XX"),
            format!("RATELIMIT.SETRATE {key} 10 1000 KEEPSTATE"),
            format!("RATELIMIT.TRYACQUIRE {key}"),
            format!("RATELIMIT.ACQUIRE {key} TIMEOUT 1000"),
            format!("RATELIMIT.CONFIG {key}"),
            format!("RATELIMIT.AVAILABLE {key}"),
            format!("RATELIMIT.RELEASE {key} 1"),
            format!("RATELIMIT.CANCEL {key} t"),
            format!("RATELIMIT.DELETE {key}"),
            format!("RATELIMIT.EXPIRE {key} 1000"),
            format!("RATELIMIT.EXPIRE {key} 0"),
            format!("RATELIMIT.PERSIST {key}"),
            format!("RATELIMIT.SETRATE {key} 10 1000 ONEKEY"),
            format!("RATELIMIT.SETRATE {key} 10 1000 ONEKEY NX"),
        ] {
            fails_with(&mut server, &mut con, &cmd, expected);
        }
    }
}

#[test]
fn wrongtype_when_the_value_or_the_permits_key_holds_another_type() {
    let mut server = Server::start();
    let mut con = server.conn();
    set_clock(&mut con, T0);
    for (name, setup) in [
        ("v1", "RPUSH {v1}:value 5"),
        ("v2", "ZADD {v2}:value 1 x"),
        ("v3", "HSET {v3}:value f 1"),
        ("p1", "SET {p1}:permits 5"),
        ("p2", "HSET {p2}:permits f 1"),
        ("p3", "SADD {p3}:permits m"),
    ] {
        line::<i64>(&mut con, &format!("RATELIMIT.SETRATE {name} 10 1000")).unwrap();
        line::<()>(&mut con, setup).unwrap();
    }
    freeze_expiries(&mut con);
    for (name, key) in [
        ("v1", "{v1}:value"),
        ("v2", "{v2}:value"),
        ("v3", "{v3}:value"),
        ("p1", "{p1}:permits"),
        ("p2", "{p2}:permits"),
        ("p3", "{p3}:permits"),
    ] {
        for cmd in [
            format!("RATELIMIT.TRYACQUIRE {name}"),
            format!("RATELIMIT.ACQUIRE {name} TIMEOUT 1000"),
            format!("RATELIMIT.AVAILABLE {name}"),
            format!("RATELIMIT.RELEASE {name} 1"),
            format!("RATELIMIT.CANCEL {name} t"),
            format!("RATELIMIT.SETRATE {name} 20 1000"),
            format!("RATELIMIT.SETRATE {name} 20 1000 KEEPSTATE"),
            format!("RATELIMIT.SETRATE {name} 20 1000 XX"),
            format!("RATELIMIT.SETRATE {name} 20 1000 PER_CLIENT CLIENT c1"),
            format!("RATELIMIT.DELETE {name}"),
            format!("RATELIMIT.EXPIRE {name} 1000"),
            format!("RATELIMIT.EXPIRE {name} -1"),
            format!("RATELIMIT.PERSIST {name}"),
            format!("RATELIMIT.PEEK {name}"),
            format!("RATELIMIT.ALLOW {name}"),
        ] {
            fails_with(&mut server, &mut con, &cmd, &wrongtype_of(key));
        }
    }
}

#[test]
fn wrongtype_on_a_clients_keys() {
    let mut server = Server::start();
    let mut con = server.conn();
    populated(&mut con);
    // c1 has real state; c2's value and c3's log hold other types.
    line::<()>(&mut con, "RPUSH {pc}:value:c2 1").unwrap();
    line::<()>(&mut con, "SET {pc}:permits:c3 1").unwrap();
    freeze_expiries(&mut con);
    for (client, key) in [("c2", "{pc}:value:c2"), ("c3", "{pc}:permits:c3")] {
        for cmd in [
            format!("RATELIMIT.TRYACQUIRE pc CLIENT {client}"),
            format!("RATELIMIT.ACQUIRE pc TIMEOUT 1000 CLIENT {client}"),
            format!("RATELIMIT.AVAILABLE pc CLIENT {client}"),
            format!("RATELIMIT.RELEASE pc 1 CLIENT {client}"),
            format!("RATELIMIT.SETRATE pc 5 1000 PER_CLIENT CLIENT {client}"),
            format!("RATELIMIT.SETRATE pc 5 1000 PER_CLIENT KEEPSTATE CLIENT {client}"),
            format!("RATELIMIT.SETRATE pc 5 1000 OVERALL CLIENT {client}"),
            format!("RATELIMIT.DELETE pc CLIENT {client}"),
            format!("RATELIMIT.EXPIRE pc 1000 CLIENT {client}"),
            format!("RATELIMIT.PERSIST pc CLIENT {client}"),
        ] {
            fails_with(&mut server, &mut con, &cmd, &wrongtype_of(key));
        }
    }
    // The healthy client is still served.
    assert_eq!(
        line::<Option<i64>>(&mut con, "RATELIMIT.TRYACQUIRE pc 3 CLIENT c1").unwrap(),
        None
    );
}

/// Builds a limiter `name` (rate 10, interval 1000, keep-alive 60000) with 4 permits logged by the
/// module, then lets `corrupt` damage it, then fixes every expiry so a TTL refresh would show.
fn corrupted(con: &mut Connection, name: &str, corrupt: &[&[&[u8]]]) {
    line::<i64>(
        con,
        &format!("RATELIMIT.SETRATE {name} 10 1000 KEEPALIVE 60000"),
    )
    .unwrap();
    assert_eq!(try_acquire(con, name, 3), None);
    assert_eq!(try_acquire(con, name, 1), None);
    for words in corrupt {
        run::<Value>(con, words).unwrap();
    }
    freeze_expiries(con);
}

fn assert_corrupt(err: &str, key: &str, what: &str) {
    let prefix = format!("ERR corrupt rate limiter key '{key}': ");
    assert!(
        err.starts_with(&prefix),
        "{what}: `{err}` should start with `{prefix}`"
    );
    assert!(
        err.len() > prefix.len(),
        "{what}: `{err}` should describe the problem"
    );
}

#[test]
fn corrupt_configuration_is_an_error_naming_the_hash() {
    let mut server = Server::start();
    let mut con = server.conn();
    set_clock(&mut con, T0);
    let cases: [(&str, &[u8], &[u8]); 8] = [
        ("r1", b"rate", b"abc"),
        ("r2", b"rate", b"-1"),
        ("r3", b"rate", b"1.5"),
        ("i1", b"interval", b"0"),
        ("i2", b"interval", b"ten"),
        ("i3", b"interval", b""),
        ("k1", b"keepAliveTime", b"soon"),
        ("k2", b"keepAliveTime", b"-5"),
    ];
    for (name, field, bad) in cases {
        corrupted(&mut con, name, &[&[b"HSET", name.as_bytes(), field, bad]]);
    }
    for (name, field, _) in cases {
        for cmd in [
            format!("RATELIMIT.TRYACQUIRE {name}"),
            format!("RATELIMIT.ACQUIRE {name} TIMEOUT 1000"),
            format!("RATELIMIT.AVAILABLE {name}"),
            format!("RATELIMIT.RELEASE {name} 1"),
            format!("RATELIMIT.CONFIG {name}"),
        ] {
            let err = fails(&mut server, &mut con, &cmd);
            assert_corrupt(&err, name, &cmd);
            let field = String::from_utf8_lossy(field).into_owned();
            assert!(err.contains(&field), "`{err}` should name field {field}");
        }
    }
}

#[test]
fn corrupt_value_is_an_error_naming_the_value_key() {
    let mut server = Server::start();
    let mut con = server.conn();
    set_clock(&mut con, T0);
    let cases: [(&str, &[u8]); 6] = [
        ("a", b"abc"),
        ("b", b""),
        ("c", b"1.5"),
        ("d", b" 3"),
        ("e", b"99999999999999999999"),
        ("f", b"\xff\x00\r\n"),
    ];
    for (name, bad) in cases {
        let value = format!("{{{name}}}:value");
        corrupted(&mut con, name, &[&[b"SET", value.as_bytes(), bad]]);
    }
    for (name, _) in cases {
        for cmd in [
            format!("RATELIMIT.TRYACQUIRE {name}"),
            format!("RATELIMIT.TRYACQUIRE {name} 10"),
            format!("RATELIMIT.ACQUIRE {name} TIMEOUT 1000"),
            format!("RATELIMIT.AVAILABLE {name}"),
            format!("RATELIMIT.RELEASE {name} 1"),
        ] {
            let err = fails(&mut server, &mut con, &cmd);
            assert_corrupt(&err, &format!("{{{name}}}:value"), &cmd);
        }
    }
}

/// Undecodable members: truncated by one byte, empty, a length byte larger than the member, the
/// permits field missing, the length byte alone.
fn bad_members() -> Vec<Vec<u8>> {
    let mut full = vec![0x10u8];
    full.extend_from_slice(&[0xab; 16]);
    full.extend_from_slice(&7u32.to_le_bytes());
    vec![
        full[..20].to_vec(),
        Vec::new(),
        b"\xff\x01\x02\x03\x04\x05".to_vec(),
        full[..17].to_vec(),
        vec![0u8],
    ]
}

#[test]
fn undecodable_log_members_are_an_error_naming_the_log() {
    // Each bad member is placed where the command has to decode it: expired (its permits must
    // be given back), live while the value key is missing (the log must be summed), the oldest
    // live entry (a small refused request's wait is computed from it, and a shorter KEEPSTATE
    // interval expires it), the newest entry (every command reads it; RELEASE removes it).
    let mut server = Server::start();
    let mut con = server.conn();
    set_clock(&mut con, T0);
    let expired = (T0 - 600_000).to_string();
    let live = (T0 - 500).to_string();
    let newest = (T0 + 1).to_string();
    let members = bad_members();
    let mut cases: Vec<(String, Vec<String>)> = Vec::new();
    for (i, member) in members.iter().enumerate() {
        let m = &member[..];
        let name = format!("exp{i}");
        let log = format!("{{{name}}}:permits");
        corrupted(
            &mut con,
            &name,
            &[&[b"ZADD", log.as_bytes(), expired.as_bytes(), m]],
        );
        cases.push((
            name.clone(),
            vec![
                format!("RATELIMIT.TRYACQUIRE {name}"),
                format!("RATELIMIT.TRYACQUIRE {name} 10"),
                format!("RATELIMIT.ACQUIRE {name} TIMEOUT 1000"),
                format!("RATELIMIT.AVAILABLE {name}"),
                format!("RATELIMIT.RELEASE {name} 1"),
                format!("RATELIMIT.SETRATE {name} 20 1000 KEEPSTATE"),
                format!("RATELIMIT.SETRATE {name} 20 500 KEEPSTATE KEEPALIVE 60000"),
            ],
        ));
        let name = format!("noval{i}");
        let log = format!("{{{name}}}:permits");
        let value = format!("{{{name}}}:value");
        corrupted(
            &mut con,
            &name,
            &[
                &[b"ZADD", log.as_bytes(), live.as_bytes(), m],
                &[b"DEL", value.as_bytes()],
            ],
        );
        cases.push((
            name.clone(),
            vec![
                format!("RATELIMIT.TRYACQUIRE {name}"),
                format!("RATELIMIT.ACQUIRE {name} TIMEOUT 1000"),
                format!("RATELIMIT.AVAILABLE {name}"),
                format!("RATELIMIT.RELEASE {name} 1"),
                format!("RATELIMIT.SETRATE {name} 20 1000 KEEPSTATE"),
            ],
        ));
        let name = format!("oldest{i}");
        let log = format!("{{{name}}}:permits");
        corrupted(
            &mut con,
            &name,
            &[&[b"ZADD", log.as_bytes(), live.as_bytes(), m]],
        );
        cases.push((
            name.clone(),
            vec![
                format!("RATELIMIT.TRYACQUIRE {name} 7"),
                format!("RATELIMIT.ACQUIRE {name} 7 TIMEOUT 1000"),
                format!("RATELIMIT.SETRATE {name} 20 400 KEEPSTATE"),
            ],
        ));
        let name = format!("newest{i}");
        let log = format!("{{{name}}}:permits");
        corrupted(
            &mut con,
            &name,
            &[&[b"ZADD", log.as_bytes(), newest.as_bytes(), m]],
        );
        // Releasing more than the value says is logged drops the whole log without reading
        // it (tested in release.rs); a KEEPSTATE that expires nothing reads no member either.
        cases.push((name.clone(), vec![format!("RATELIMIT.RELEASE {name} 1")]));
    }
    advance(&mut con, 100);
    for (name, commands) in cases {
        for cmd in commands {
            let err = fails(&mut server, &mut con, &cmd);
            assert_corrupt(&err, &format!("{{{name}}}:permits"), &cmd);
        }
    }
}

#[test]
fn corrupt_client_log_names_the_client_key() {
    let mut server = Server::start();
    let mut con = server.conn();
    populated(&mut con);
    let expired = (T0 - 600_000).to_string();
    run::<i64>(
        &mut con,
        &[b"ZADD", b"{pc}:permits:c1", expired.as_bytes(), b"\x10abc"],
    )
    .unwrap();
    freeze_expiries(&mut con);
    for cmd in [
        "RATELIMIT.TRYACQUIRE pc CLIENT c1",
        "RATELIMIT.ACQUIRE pc TIMEOUT 1000 CLIENT c1",
        "RATELIMIT.AVAILABLE pc CLIENT c1",
        "RATELIMIT.RELEASE pc 1 CLIENT c1",
        "RATELIMIT.SETRATE pc 5 1000 PER_CLIENT KEEPSTATE CLIENT c1",
    ] {
        let err = fails(&mut server, &mut con, cmd);
        assert_corrupt(&err, "{pc}:permits:c1", cmd);
    }
    // Another client of the same limiter is unaffected.
    assert_eq!(
        line::<Option<i64>>(&mut con, "RATELIMIT.TRYACQUIRE pc 5 CLIENT c2").unwrap(),
        None
    );
}

#[test]
fn a_binary_key_name_in_an_error_cannot_break_the_protocol() {
    let mut server = Server::start();
    let mut con = server.conn();
    run::<i64>(
        &mut con,
        &[
            b"HSET",
            b"a\r\nb\x00'",
            b"rate",
            b"x",
            b"interval",
            b"1000",
            b"type",
            b"0",
        ],
    )
    .unwrap();
    let err = fails_words(
        &mut server,
        &mut con,
        &[b"RATELIMIT.TRYACQUIRE", b"a\r\nb\x00'"],
    );
    assert_corrupt(&err, "a\\x0d\\x0ab\\x00\\x27", "binary key");
    // The connection is still in sync.
    assert_eq!(
        line::<String>(&mut con, "ECHO still-here").unwrap(),
        "still-here"
    );
}

#[test]
fn corrupt_data_does_not_block_the_admin_commands() {
    // DELETE, EXPIRE and PERSIST do not need to read the data, so a corrupt limiter can be removed.
    let server = Server::start();
    let mut con = server.conn();
    set_clock(&mut con, T0);
    corrupted(
        &mut con,
        "bad",
        &[
            &[b"HSET", b"bad", b"rate", b"abc"],
            &[b"SET", b"{bad}:value", b"xyz"],
            &[b"ZADD", b"{bad}:permits", b"1", b""],
        ],
    );
    assert_eq!(line::<i64>(&mut con, "RATELIMIT.PERSIST bad").unwrap(), 1);
    assert_eq!(line::<i64>(&mut con, "PTTL bad").unwrap(), -1);
    assert_eq!(line::<i64>(&mut con, "RATELIMIT.DELETE bad").unwrap(), 3);
    assert!(snapshot(&mut con).is_empty());
}
