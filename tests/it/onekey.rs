//! ONEKEY limiters against real servers: a sliding log whose whole state is one string key.
//! Every command on one; ALLOW, TRYACQUIRE, PEEK and AVAILABLE reply exactly what the three-key
//! form replies to the same calls; at most `rate` in any window over a long randomized run and
//! across rate changes; the TTL rule; the key replicated and rewritten into an AOF as plain
//! `SET`s that a server without the module restores byte for byte; keyspace events; ACL on the
//! one key; a cluster name without a hash tag; every error; and bytes changed by hand, which are
//! refused without a crash or a write.
//!
//! The format is read here by a decoder of its own ([`Packed`]), written from the layout the
//! module documents (magic, version, varint configuration, epoch, varint entries, Fletcher-16),
//! not from the module's code. Time is the debug clock only.

use std::collections::BTreeMap;

use crate::common::waiters::{park, served, wait_blocked, Reply};
use crate::common::*;

// ---- the format, read and written independently of the module ----------------------------------

const MAGIC: [u8; 2] = [0xF5, b'L'];

/// A ONEKEY state, decoded: its configuration, epoch and entries `(score, permits)`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Packed {
    rate: u64,
    interval: u64,
    precision: u64,
    keep_alive: u64,
    epoch: u32,
    entries: Vec<(i64, u64)>,
}

fn fletcher16(bytes: &[u8]) -> u16 {
    let (mut low, mut high) = (0u32, 0u32);
    for &b in bytes {
        low = (low + u32::from(b)) % 255;
        high = (high + low) % 255;
    }
    ((high << 8) | low) as u16
}

fn put_varint(out: &mut Vec<u8>, mut n: u64) {
    while n >= 0x80 {
        out.push(n as u8 | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

fn get_varint(bytes: &[u8], at: &mut usize) -> u64 {
    let mut n = 0u64;
    let mut shift = 0;
    loop {
        let byte = bytes[*at];
        *at += 1;
        n |= u64::from(byte & 0x7F) << shift;
        if byte & 0x80 == 0 {
            return n;
        }
        shift += 7;
    }
}

impl Packed {
    fn decode(bytes: &[u8]) -> Packed {
        assert_eq!(bytes[..2], MAGIC, "magic of {bytes:?}");
        assert_eq!(bytes[2], 1, "version");
        let (body, sum) = bytes.split_at(bytes.len() - 2);
        assert_eq!(
            u16::from_le_bytes([sum[0], sum[1]]),
            fletcher16(body),
            "checksum"
        );
        let mut at = 3;
        let rate = get_varint(body, &mut at);
        let interval = get_varint(body, &mut at);
        let precision = get_varint(body, &mut at);
        let keep_alive = get_varint(body, &mut at);
        let epoch = u32::from_le_bytes(body[at..at + 4].try_into().unwrap());
        at += 4;
        let count = get_varint(body, &mut at);
        let mut entries = Vec::new();
        let mut bucket: Option<i64> = None;
        for _ in 0..count {
            let token = get_varint(body, &mut at);
            let distance = token >> 1;
            let this = match bucket {
                None => ((distance >> 1) as i64) ^ -((distance & 1) as i64),
                Some(previous) => previous + distance as i64,
            };
            let permits = if token & 1 == 1 {
                get_varint(body, &mut at)
            } else {
                1
            };
            entries.push((this * precision as i64 + precision as i64 - 1, permits));
            bucket = Some(this);
        }
        // Padding: zeros up to the checksum, filling the string's allocation size class.
        assert!(body[at..].iter().all(|&b| b == 0), "padding of {bytes:?}");
        let alloc = bytes.len() + if bytes.len() < 256 { 4 } else { 6 };
        assert!(
            alloc <= 128 && alloc.is_multiple_of(16) || alloc > 128 && alloc.is_multiple_of(32),
            "{} bytes fill no size class",
            bytes.len()
        );
        Packed {
            rate,
            interval,
            precision,
            keep_alive,
            epoch,
            entries,
        }
    }

    /// Bytes in the layout, fields as given (out of range ones too), with a right checksum.
    fn encode(&self) -> Vec<u8> {
        let mut out = MAGIC.to_vec();
        out.push(1);
        for field in [self.rate, self.interval, self.precision, self.keep_alive] {
            put_varint(&mut out, field);
        }
        out.extend_from_slice(&self.epoch.to_le_bytes());
        put_varint(&mut out, self.entries.len() as u64);
        let p = self.precision.max(1) as i64;
        let mut previous: Option<i64> = None;
        for &(score, permits) in &self.entries {
            let bucket = score.div_euclid(p);
            let distance = match previous {
                None => ((bucket << 1) ^ (bucket >> 63)) as u64,
                Some(prev) => (bucket - prev) as u64,
            };
            put_varint(&mut out, distance << 1 | u64::from(permits != 1));
            if permits != 1 {
                put_varint(&mut out, permits);
            }
            previous = Some(bucket);
        }
        with_checksum(out)
    }

    fn permits_in_window(&self, now: i64) -> u64 {
        self.entries
            .iter()
            .filter(|(score, _)| *score > now - self.interval as i64 && *score <= now)
            .map(|e| e.1)
            .sum()
    }
}

fn with_checksum(mut bytes: Vec<u8>) -> Vec<u8> {
    let sum = fletcher16(&bytes);
    bytes.extend_from_slice(&sum.to_le_bytes());
    bytes
}

fn raw(con: &mut Connection, key: &str) -> Vec<u8> {
    let bytes: Option<Vec<u8>> = run(con, &[b"GET", key.as_bytes()]).expect("GET");
    bytes.unwrap_or_else(|| panic!("no key {key}"))
}

fn state(con: &mut Connection, key: &str) -> Packed {
    Packed::decode(&raw(con, key))
}

// ---- helpers -------------------------------------------------------------------------------------

fn ok<T: redis::FromRedisValue>(con: &mut Connection, text: &str) -> T {
    line(con, text).unwrap_or_else(|e| panic!("`{text}`: {e}"))
}

fn keys(con: &mut Connection) -> Vec<String> {
    let mut keys: Vec<String> = ok(con, "KEYS *");
    keys.sort();
    keys
}

/// A reply of name, value pairs (ALLOW, PEEK, ALLOWALL, CONFIG in RESP2) as a map.
fn fields(value: &Value) -> BTreeMap<String, Value> {
    let Value::Array(items) = value else {
        panic!("not pairs: {value:?}")
    };
    items
        .chunks(2)
        .map(|pair| {
            let name = match &pair[0] {
                Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
                Value::SimpleString(s) => s.clone(),
                other => panic!("field name {other:?}"),
            };
            (name, pair[1].clone())
        })
        .collect()
}

fn int(map: &BTreeMap<String, Value>, name: &str) -> i64 {
    match map.get(name) {
        Some(Value::Int(n)) => *n,
        other => panic!("{name}: {other:?} in {map:?}"),
    }
}

fn allow(con: &mut Connection, text: &str) -> BTreeMap<String, Value> {
    fields(&ok::<Value>(con, &format!("RATELIMIT.ALLOW {text}")))
}

/// Runs `text`, which must fail with exactly `expected`, writing nothing.
fn refused(con: &mut Connection, text: &str, expected: &str) {
    let before = snapshot(con);
    assert_eq!(error_of(con, text), expected, "`{text}`");
    assert_eq!(snapshot(con), before, "`{text}` failed but wrote");
}

/// ACQUIRE without blocking (inside a script it behaves as TRYACQUIRE), with a TICKET.
fn acquire_ticket(con: &mut Connection, key: &str, permits: u32, ticket: &str) -> Option<i64> {
    redis::cmd("EVAL")
        .arg("return redis.call('RATELIMIT.ACQUIRE', KEYS[1], ARGV[1], 'TICKET', ARGV[2])")
        .arg(1)
        .arg(key)
        .arg(permits)
        .arg(ticket)
        .query(con)
        .expect("ACQUIRE in a script")
}

// ---- every command -----------------------------------------------------------------------------

#[test]
fn setrate_writes_one_key_in_the_documented_layout() {
    let server = Server::start();
    let mut con = server.conn();
    set_clock(&mut con, T0);
    assert_eq!(
        ok::<i64>(&mut con, "RATELIMIT.SETRATE k 100 60000 ONEKEY"),
        1
    );
    assert_eq!(keys(&mut con), ["k"], "one key, no derived keys");
    assert_eq!(ok::<String>(&mut con, "TYPE k"), "string");
    assert_eq!(pttl(&mut con, "k"), -1, "no TTL without KEEPALIVE");
    let s = state(&mut con, "k");
    assert_eq!(
        (
            s.rate,
            s.interval,
            s.precision,
            s.keep_alive,
            s.entries.len()
        ),
        (100, 60_000, 1000, 0, 0),
        "the default precision is a sixtieth of the interval"
    );
    // The configuration as CONFIG replies it, type ONEKEY.
    let config = fields(&ok::<Value>(&mut con, "RATELIMIT.CONFIG k"));
    assert_eq!(int(&config, "rate"), 100);
    assert_eq!(int(&config, "interval"), 60_000);
    assert_eq!(int(&config, "keepAliveTime"), 0);
    assert_eq!(
        config.get("type"),
        Some(&Value::BulkString(b"ONEKEY".to_vec()))
    );
    // Short intervals get a precision of 1; an explicit one is kept; KEEPALIVE is stored.
    ok::<i64>(&mut con, "RATELIMIT.SETRATE short 3 59 ONEKEY");
    assert_eq!(state(&mut con, "short").precision, 1);
    ok::<i64>(
        &mut con,
        "RATELIMIT.SETRATE p 3 1000 PRECISION 7 KEEPALIVE 5000 ONEKEY",
    );
    let p = state(&mut con, "p");
    assert_eq!((p.precision, p.keep_alive), (7, 5000));
    // The three-key form keeps its default precision of 1 (no `precision` field).
    ok::<i64>(&mut con, "RATELIMIT.SETRATE three 3 60000");
    let fields: Vec<String> = ok(&mut con, "HKEYS three");
    assert!(!fields.contains(&"precision".to_string()), "{fields:?}");

    // Grants are logged as PRECISION buckets, scored at the bucket's last millisecond.
    assert_eq!(try_acquire(&mut con, "k", 2), None);
    advance(&mut con, 999);
    assert_eq!(try_acquire(&mut con, "k", 1), None);
    advance(&mut con, 1);
    assert_eq!(try_acquire(&mut con, "k", 5), None);
    let s = state(&mut con, "k");
    assert_eq!(s.entries, [(T0 + 999, 3), (T0 + 1999, 5)]);
    // 100 per minute, 50 grants spread over the window: a few dozen bytes, one per bucket used.
    ok::<i64>(&mut con, "RATELIMIT.SETRATE m 100 60000 ONEKEY");
    for _ in 0..50 {
        assert_eq!(try_acquire(&mut con, "m", 1), None);
        advance(&mut con, 1200);
    }
    let bytes = raw(&mut con, "m");
    assert_eq!(Packed::decode(&bytes).entries.len(), 50);
    assert!(bytes.len() <= 80, "{} bytes", bytes.len());
    eprintln!("onekey: 100/min with 50 grants: {} bytes", bytes.len());
}

/// A state is never a string Redis embeds in its object (44 bytes or less, `embstr`): a read
/// the module makes replaces an embedded string with a copy. Whatever its log, it is at least
/// 45 bytes, zeros after the log, and stays `raw` as calls rewrite it in place. A new key's
/// state is made at its length, so it is `raw` from its first call on every server (Valkey 9.1
/// embeds strings of up to 128 bytes with their key when they are set whole).
#[test]
fn a_state_is_never_an_embedded_string() {
    let server = Server::start();
    let mut con = server.conn();
    let encoding =
        |con: &mut Connection, key: &str| ok::<String>(con, &format!("OBJECT ENCODING {key}"));
    set_clock(&mut con, T0);
    ok::<i64>(&mut con, "RATELIMIT.SETRATE k 100 60000 ONEKEY");
    allow(&mut con, "e RATE 3 1000 ONEKEY KEEPALIVE 5000");
    let _: Value = ok(&mut con, "RATELIMIT.TRYACQUIRE t RATE 3 1000 ONEKEY");
    for key in ["k", "e", "t"] {
        // Short enough that Valkey 9.1 embeds it when set whole: the check below means
        // something there.
        let len = raw(&mut con, key).len();
        assert!((45..100).contains(&len), "{key}: {len} bytes");
        assert_eq!(encoding(&mut con, key), "raw", "{key}");
    }
    // Made at its length, the new key's TTL is the one its write gives (the keep-alive, on
    // the server's clock).
    assert!((1..=5000).contains(&ok::<i64>(&mut con, "PTTL e")));
    assert_eq!(ok::<i64>(&mut con, "PTTL k"), -1);
    for _ in 0..3 {
        allow(&mut con, "k");
        advance(&mut con, 1000);
        assert_eq!(encoding(&mut con, "k"), "raw");
    }
    assert_eq!(state(&mut con, "k").entries.len(), 3);
}

#[test]
fn setrate_nx_xx_and_keepstate() {
    let server = Server::start();
    let mut con = server.conn();
    set_clock(&mut con, T0);
    // XX creates nothing; NX creates.
    assert_eq!(
        ok::<i64>(&mut con, "RATELIMIT.SETRATE k 5 1000 XX ONEKEY"),
        0
    );
    assert!(keys(&mut con).is_empty());
    assert_eq!(
        ok::<i64>(&mut con, "RATELIMIT.SETRATE k 5 1000 NX PRECISION 1 ONEKEY"),
        1
    );
    assert_eq!(try_acquire(&mut con, "k", 3), None);
    let before = snapshot(&mut con);
    // NX on an existing limiter of either form: 0, nothing written.
    assert_eq!(
        ok::<i64>(&mut con, "RATELIMIT.SETRATE k 9 2000 NX ONEKEY"),
        0
    );
    assert_eq!(ok::<i64>(&mut con, "RATELIMIT.SETRATE k 9 2000 NX"), 0);
    assert_eq!(snapshot(&mut con), before);
    ok::<i64>(&mut con, "RATELIMIT.SETRATE h 5 1000");
    let before = snapshot(&mut con);
    assert_eq!(
        ok::<i64>(&mut con, "RATELIMIT.SETRATE h 9 2000 NX ONEKEY"),
        0
    );
    assert_eq!(snapshot(&mut con), before);

    // KEEPSTATE keeps the log (and the epoch); a raised rate admits the difference.
    let epoch = state(&mut con, "k").epoch;
    assert_eq!(
        ok::<i64>(
            &mut con,
            "RATELIMIT.SETRATE k 6 1000 XX KEEPSTATE PRECISION 1 ONEKEY"
        ),
        1
    );
    let s = state(&mut con, "k");
    assert_eq!(
        (s.rate, s.epoch, s.entries.clone()),
        (6, epoch, vec![(T0, 3)])
    );
    assert_eq!(available(&mut con, "k"), 3);
    // A lowered rate below what the window holds: nothing until it holds less.
    ok::<i64>(
        &mut con,
        "RATELIMIT.SETRATE k 2 1000 KEEPSTATE PRECISION 1 ONEKEY",
    );
    assert_eq!(available(&mut con, "k"), 0);
    assert_eq!(try_acquire(&mut con, "k", 1), Some(1000));
    advance(&mut con, 1000);
    assert_eq!(try_acquire(&mut con, "k", 2), None);
    assert_eq!(try_acquire(&mut con, "k", 1), Some(1000));
    // Without KEEPSTATE the log starts empty under a new epoch.
    ok::<i64>(&mut con, "RATELIMIT.SETRATE k 2 1000 PRECISION 1 ONEKEY");
    let s = state(&mut con, "k");
    assert!(s.entries.is_empty());
    assert_ne!(s.epoch, epoch);
    assert_eq!(try_acquire(&mut con, "k", 2), None);
    // A shorter interval with KEEPSTATE prunes what it no longer holds; a coarser precision
    // moves entries to the end of their new bucket: later, never earlier.
    advance(&mut con, 10);
    assert_eq!(try_acquire(&mut con, "k", 1), Some(990));
    ok::<i64>(&mut con, "RATELIMIT.SETRATE k 2 5 KEEPSTATE ONEKEY");
    assert!(state(&mut con, "k").entries.is_empty());
    assert_eq!(try_acquire(&mut con, "k", 2), None);
    ok::<i64>(
        &mut con,
        "RATELIMIT.SETRATE k 2 1000 PRECISION 100 KEEPSTATE ONEKEY",
    );
    let s = state(&mut con, "k");
    assert_eq!(s.entries, [(T0 + 1099, 2)], "moved to its bucket's end");
    assert_eq!(try_acquire(&mut con, "k", 1), Some(1089));
}

/// Rate, interval (shortened) and precision changes with KEEPSTATE, at random between random
/// grants: every grant keeps the window ending at it within the rate in force, counting the
/// real grant times (entries are logged at or after them, so they count at least as long).
#[test]
fn rate_changes_never_over_admit() {
    let server = Server::start();
    let mut con = server.conn();
    set_clock(&mut con, T0);
    let mut rng = Rng(0x0E4E_4B45_5952_4154);
    let mut now = T0;
    let (mut rate, mut interval) = (10i64, 1000i64);
    ok::<i64>(&mut con, "RATELIMIT.SETRATE k 10 1000 ONEKEY");
    let mut grants: Vec<(i64, i64)> = Vec::new();
    let (mut changes, mut granted) = (0, 0);
    for _ in 0..3000 {
        match rng.below(20) {
            0 => {
                rate = 1 + rng.below(15) as i64;
                // The interval never grows: what the log pruned under a shorter one is gone.
                interval = *rng.pick(&[interval, interval, (interval / 2).max(200)]);
                let precision = *rng.pick(&[1, 7, 50, 100, 200]);
                ok::<i64>(
                    &mut con,
                    &format!(
                        "RATELIMIT.SETRATE k {rate} {interval} PRECISION {precision} KEEPSTATE ONEKEY"
                    ),
                );
                changes += 1;
                if interval < 400 && rng.one_in(2) {
                    // And back up, on an empty log.
                    interval = 1000;
                    ok::<i64>(
                        &mut con,
                        &format!("RATELIMIT.SETRATE k {rate} {interval} ONEKEY"),
                    );
                    grants.clear();
                }
            }
            1..=6 => {
                let ms = rng.below(400) as i64;
                advance(&mut con, ms);
                now += ms;
            }
            _ => {
                let permits = 1 + rng.below(rate.min(3) as u64) as i64;
                let r = try_acquire(&mut con, "k", permits as u32);
                if r.is_none() {
                    let in_window: i64 = grants
                        .iter()
                        .filter(|(t, _)| *t > now - interval)
                        .map(|g| g.1)
                        .sum();
                    assert!(
                        in_window + permits <= rate,
                        "granted {permits} at {} with {in_window} in the window, rate {rate}",
                        now - T0
                    );
                    grants.push((now, permits));
                    granted += 1;
                }
            }
        }
    }
    assert!(
        changes > 100 && granted > 500,
        "{changes} changes, {granted} grants"
    );
}

#[test]
fn tryacquire_hint_and_allow_fields() {
    let server = Server::start();
    let mut con = server.conn();
    set_clock(&mut con, T0);
    ok::<i64>(&mut con, "RATELIMIT.SETRATE k 3 1000 PRECISION 1 ONEKEY");
    assert_eq!(try_acquire(&mut con, "k", 2), None);
    advance(&mut con, 300);
    let a = allow(&mut con, "k 1");
    assert_eq!(
        (int(&a, "allowed"), int(&a, "limit"), int(&a, "remaining")),
        (1, 3, 0)
    );
    assert_eq!((int(&a, "retry_after"), int(&a, "reset_after")), (0, 1000));
    // 2 permits need the grant at T0 to free: 700 ms; 1 permit too.
    assert_eq!(try_acquire(&mut con, "k", 2), Some(700));
    let a = allow(&mut con, "k 3");
    assert_eq!((int(&a, "allowed"), int(&a, "retry_after")), (0, 1000));
    assert_eq!(int(&a, "reset_after"), 1000);
    let refused = "RATELIMIT.TRYACQUIRE k 4";
    assert_eq!(
        error_of(&mut con, refused),
        "ERR Requested permits amount cannot exceed defined rate"
    );
    advance(&mut con, 700);
    assert_eq!(available(&mut con, "k"), 2);
    let peek = fields(&ok::<Value>(&mut con, "RATELIMIT.PEEK k 3"));
    assert_eq!((int(&peek, "allowed"), int(&peek, "retry_after")), (0, 300));
    assert_eq!(available(&mut con, "k"), 2, "PEEK took nothing");
    // Created by RATE, ONEKEY: one key.
    let a = allow(&mut con, "new 1 RATE 10 60000 KEEPALIVE 60000 ONEKEY");
    assert_eq!((int(&a, "allowed"), int(&a, "remaining")), (1, 9));
    assert_eq!(int(&a, "reset_after"), 60_999, "logged at its second's end");
    let s = state(&mut con, "new");
    assert_eq!((s.rate, s.precision, s.keep_alive), (10, 1000, 60_000));
    assert!(!exists(&mut con, "{new}:value") && !exists(&mut con, "{new}:permits"));
    // RATE only creates: on an existing limiter of the other form, that limiter is used.
    ok::<i64>(&mut con, "RATELIMIT.SETRATE three 2 1000");
    assert_eq!(
        ok::<Option<i64>>(&mut con, "RATELIMIT.TRYACQUIRE three 1 RATE 9 9000 ONEKEY"),
        None
    );
    assert_eq!(ok::<String>(&mut con, "TYPE three"), "hash");
    assert_eq!(logged_permits(&mut con, "{three}:permits"), 1);
    assert_eq!(
        ok::<Option<i64>>(&mut con, "RATELIMIT.TRYACQUIRE k 1 RATE 9 9000"),
        None
    );
    assert_eq!(state(&mut con, "k").rate, 3);
    assert!(!exists(&mut con, "{k}:value"));
    // CLIENT is ignored, as for OVERALL.
    assert_eq!(
        ok::<Option<i64>>(&mut con, "RATELIMIT.TRYACQUIRE k 1 CLIENT c1"),
        None
    );
    assert_eq!(
        keys(&mut con),
        ["k", "new", "three", "{three}:permits", "{three}:value"]
    );
}

/// A command sequence replayed on both forms: three-key `t`, ONEKEY `o`, with the same
/// configuration. Every reply must be the same.
fn same_replies_on_both_forms(precision: &str, seed: u64) {
    let server = Server::start();
    let mut con = server.conn();
    set_clock(&mut con, T0);
    let mut rng = Rng(seed);
    let (mut rate, mut interval) = (5u64, 6000u64);
    // ONEKEY without PRECISION: its default, a sixtieth (100 ms); the three-key form is told.
    let setup = |con: &mut Connection, rate: u64, interval: u64, extra: &str| {
        let default = (interval / 60).max(1);
        let p = if precision.is_empty() {
            format!("PRECISION {default}")
        } else {
            precision.to_string()
        };
        let t: i64 = ok(
            con,
            &format!("RATELIMIT.SETRATE t {rate} {interval} {p} {extra}"),
        );
        let o: i64 = ok(
            con,
            &format!("RATELIMIT.SETRATE o {rate} {interval} {precision} {extra} ONEKEY"),
        );
        assert_eq!(t, o);
    };
    setup(&mut con, rate, interval, "");
    let mut compared = 0;
    let mut tickets = 0;
    for step in 0..1200 {
        let permits = 1 + rng.below(rate.min(4));
        let call = match rng.below(20) {
            0..=5 => format!("RATELIMIT.ALLOW $ {permits}"),
            6..=8 => format!("RATELIMIT.TRYACQUIRE $ {permits}"),
            9 => "RATELIMIT.AVAILABLE $".to_string(),
            10 => format!("RATELIMIT.PEEK $ {permits}"),
            11 => format!("RATELIMIT.RELEASE $ {}", 1 + rng.below(3)),
            12 => {
                tickets += 1;
                // Tickets are the caller's: one name for one wait, whatever the limiter.
                let t = acquire_ticket(&mut con, "t", permits as u32, &format!("tx{tickets}"));
                let o = acquire_ticket(&mut con, "o", permits as u32, &format!("ox{tickets}"));
                assert_eq!(t, o, "step {step}: ACQUIRE in a script");
                continue;
            }
            13 if tickets > 0 => format!("RATELIMIT.CANCEL $ $x{}", 1 + rng.below(tickets)),
            14 => {
                // Rate and interval changes, kept state; the precision stays (a ONEKEY log
                // moves its entries to the end of a new precision's buckets, later than the
                // three-key form's, which it cannot store).
                rate = 1 + rng.below(8);
                if !precision.is_empty() {
                    interval = *rng.pick(&[3000, 6000, 9000]);
                }
                setup(&mut con, rate, interval, "KEEPSTATE");
                continue;
            }
            _ => {
                advance(&mut con, rng.below(interval / 3) as i64);
                continue;
            }
        };
        let t: Value = line(&mut con, &call.replace('$', "t")).unwrap_or_else(|e| panic!("{e}"));
        let o: Value = line(&mut con, &call.replace('$', "o")).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            t, o,
            "step {step}: `{call}` (seed {seed:#x}, {precision:?})"
        );
        compared += 1;
    }
    // The windows agree too: what each form holds in its log.
    let t_logged: i64 = permits_in_window(&mut con, "{t}:permits", i64::MAX / 2, i64::MAX);
    let o_logged: u64 = state(&mut con, "o").entries.iter().map(|e| e.1).sum();
    assert_eq!(t_logged as u64, o_logged);
    assert!(compared > 700, "{compared}");
}

#[test]
fn replies_equal_the_three_key_forms_at_precision_1() {
    same_replies_on_both_forms("PRECISION 1", 0x5EED_0001);
}

#[test]
fn replies_equal_the_three_key_forms_at_a_coarser_precision() {
    same_replies_on_both_forms("PRECISION 250", 0x5EED_0002);
    same_replies_on_both_forms("", 0x5EED_0003);
}

#[test]
fn acquire_queues_fairly_and_times_out() {
    let server = Server::start();
    let mut con = server.conn();
    con.set_read_timeout(Some(HANG)).unwrap();
    set_clock(&mut con, T0);
    ok::<i64>(&mut con, "RATELIMIT.SETRATE k 3 1000 PRECISION 1 ONEKEY");
    assert_eq!(try_acquire(&mut con, "k", 3), None);
    // A large request at the head is not starved by a small one behind it.
    let big = park(&server, &mut con, "RATELIMIT.ACQUIRE k 3");
    let small = park(&server, &mut con, "RATELIMIT.ACQUIRE k 1");
    assert_eq!(
        try_acquire(&mut con, "k", 1),
        Some(1000),
        "behind the queue"
    );
    advance(&mut con, 999);
    wait_blocked(&mut con, 2);
    advance(&mut con, 1);
    assert_eq!(served(big).reply, Reply::Acquired);
    wait_blocked(&mut con, 1);
    assert!(!small.is_done(), "3 of 3 taken by the head");
    assert_eq!(state(&mut con, "k").entries, [(T0 + 1000, 3)]);
    // RELEASE frees a permit: the waiter is served at once.
    assert_eq!(ok::<i64>(&mut con, "RATELIMIT.RELEASE k 1"), 1);
    assert_eq!(served(small).reply, Reply::Acquired);
    let s = state(&mut con, "k");
    assert_eq!(
        s.entries,
        [(T0 + 1000, 3)],
        "2 left, then 1 more in the same ms"
    );
    // TIMEOUT: the wait hint when it runs out first, nothing taken.
    let timed = park(&server, &mut con, "RATELIMIT.ACQUIRE k 2 TIMEOUT 400");
    let before = raw(&mut con, "k");
    advance(&mut con, 400);
    assert_eq!(served(timed).reply, Reply::Wait(600));
    assert_eq!(raw(&mut con, "k"), before);
    // A ticketed waiter cancelled ends with its TIMEOUT reply.
    let ticketed = park(&server, &mut con, "RATELIMIT.ACQUIRE k 1 TICKET w");
    assert_eq!(ok::<i64>(&mut con, "RATELIMIT.CANCEL k w"), 0);
    assert_eq!(served(ticketed).reply, Reply::Wait(600));
    assert_eq!(raw(&mut con, "k"), before);
    wait_blocked(&mut con, 0);
}

#[test]
fn cancel_gives_back_exactly_the_grant() {
    let server = Server::start();
    let mut con = server.conn();
    set_clock(&mut con, T0);
    ok::<i64>(&mut con, "RATELIMIT.SETRATE k 10 1000 PRECISION 100 ONEKEY");
    assert_eq!(try_acquire(&mut con, "k", 2), None);
    advance(&mut con, 5);
    assert_eq!(acquire_ticket(&mut con, "k", 3, "t"), None);
    advance(&mut con, 5);
    assert_eq!(try_acquire(&mut con, "k", 1), None);
    advance(&mut con, 100);
    assert_eq!(try_acquire(&mut con, "k", 1), None);
    assert_eq!(state(&mut con, "k").entries, [(T0 + 99, 6), (T0 + 199, 1)]);
    assert_eq!(ok::<i64>(&mut con, "RATELIMIT.CANCEL k t"), 3);
    assert_eq!(
        state(&mut con, "k").entries,
        [(T0 + 99, 3), (T0 + 199, 1)],
        "its own bucket reduced, the others kept"
    );
    let before = snapshot(&mut con);
    assert_eq!(ok::<i64>(&mut con, "RATELIMIT.CANCEL k t"), 0, "once");
    assert_eq!(ok::<i64>(&mut con, "RATELIMIT.CANCEL k nope"), 0);
    assert_eq!(snapshot(&mut con), before);

    // KEEPSTATE keeps the epoch: a grant is still given back.
    assert_eq!(acquire_ticket(&mut con, "k", 2, "u"), None);
    ok::<i64>(
        &mut con,
        "RATELIMIT.SETRATE k 12 1000 PRECISION 100 KEEPSTATE ONEKEY",
    );
    assert_eq!(ok::<i64>(&mut con, "RATELIMIT.CANCEL k u"), 2);
    // A limiter created anew since the grant (SETRATE, or DELETE and RATE) gives nothing back,
    // even with a grant of its own in the same bucket.
    for (ticket, recreate) in [
        ("v1", "RATELIMIT.SETRATE k 10 1000 PRECISION 100 ONEKEY"),
        ("v2", "RATELIMIT.DELETE k"),
    ] {
        assert_eq!(acquire_ticket(&mut con, "k", 2, ticket), None);
        let _: Value = ok(&mut con, recreate);
        assert_eq!(
            ok::<Option<i64>>(
                &mut con,
                "RATELIMIT.TRYACQUIRE k 4 RATE 10 1000 PRECISION 100 ONEKEY"
            ),
            None
        );
        let before = snapshot(&mut con);
        let cancel = format!("RATELIMIT.CANCEL k {ticket}");
        assert_eq!(ok::<i64>(&mut con, &cancel), 0, "after `{recreate}`");
        assert_eq!(snapshot(&mut con), before);
        assert_eq!(state(&mut con, "k").entries, [(T0 + 199, 4)]);
    }
    // A grant lapsed gives nothing back.
    assert_eq!(acquire_ticket(&mut con, "k", 1, "old"), None);
    // Logged at its bucket's end, it counts up to 99 ms longer than the interval.
    advance(&mut con, 1000);
    assert_eq!(ok::<i64>(&mut con, "RATELIMIT.CANCEL k old"), 1);
    assert_eq!(acquire_ticket(&mut con, "k", 1, "older"), None);
    advance(&mut con, 1099);
    assert_eq!(ok::<i64>(&mut con, "RATELIMIT.CANCEL k older"), 0);
}

#[test]
fn release_available_peek_and_config() {
    let server = Server::start();
    let mut con = server.conn();
    set_clock(&mut con, T0);
    ok::<i64>(&mut con, "RATELIMIT.SETRATE k 10 1000 PRECISION 1 ONEKEY");
    for ms in [0, 10, 20] {
        set_clock(&mut con, T0 + ms);
        assert_eq!(try_acquire(&mut con, "k", 3), None);
    }
    assert_eq!(available(&mut con, "k"), 1);
    // RELEASE takes the newest entries, splitting the last one reached.
    assert_eq!(ok::<i64>(&mut con, "RATELIMIT.RELEASE k 4"), 4);
    assert_eq!(state(&mut con, "k").entries, [(T0, 3), (T0 + 10, 2)]);
    assert_eq!(available(&mut con, "k"), 5);
    assert_eq!(ok::<i64>(&mut con, "RATELIMIT.RELEASE k 100"), 5);
    assert!(state(&mut con, "k").entries.is_empty());
    assert_eq!(
        ok::<i64>(&mut con, "RATELIMIT.RELEASE k 1"),
        0,
        "nothing logged"
    );
    // AVAILABLE, PEEK and CONFIG write nothing, and answer on a key held by a read-only user.
    assert_eq!(try_acquire(&mut con, "k", 10), None);
    let before = snapshot(&mut con);
    assert_eq!(available(&mut con, "k"), 0);
    let peek = fields(&ok::<Value>(&mut con, "RATELIMIT.PEEK k"));
    assert_eq!(int(&peek, "retry_after"), 1000);
    let _: Value = ok(&mut con, "RATELIMIT.CONFIG k");
    assert_eq!(snapshot(&mut con), before);
    assert_eq!(ok::<Value>(&mut con, "RATELIMIT.CONFIG nope"), Value::Nil);
    // CONFIG in RESP3: a map.
    let mut con3 = server.conn_resp3();
    let config: Value = ok(&mut con3, "RATELIMIT.CONFIG k");
    assert!(matches!(config, Value::Map(_)), "{config:?}");
}

#[test]
fn allowall_mixes_forms_all_or_nothing() {
    let server = Server::start();
    let mut con = server.conn();
    set_clock(&mut con, T0);
    ok::<i64>(&mut con, "RATELIMIT.SETRATE one 3 1000 PRECISION 1 ONEKEY");
    ok::<i64>(&mut con, "RATELIMIT.SETRATE three 2 1000");
    let all = |con: &mut Connection| fields(&ok::<Value>(con, "RATELIMIT.ALLOWALL 2 one three"));
    let a = all(&mut con);
    assert_eq!((int(&a, "allowed"), int(&a, "remaining")), (1, 1));
    let a = all(&mut con);
    assert_eq!(int(&a, "allowed"), 1);
    let before = snapshot(&mut con);
    let a = all(&mut con);
    assert_eq!(int(&a, "allowed"), 0);
    assert_eq!(
        a.get("limited_by"),
        Some(&Value::BulkString(b"three".to_vec()))
    );
    assert_eq!(snapshot(&mut con), before, "none taken from the ONEKEY one");
    assert_eq!(available(&mut con, "one"), 1);
    // The ONEKEY one limits: nothing taken from the other.
    advance(&mut con, 1000);
    assert_eq!(try_acquire(&mut con, "one", 3), None);
    let a = fields(&ok::<Value>(&mut con, "RATELIMIT.ALLOWALL 2 three one"));
    assert_eq!(
        a.get("limited_by"),
        Some(&Value::BulkString(b"one".to_vec()))
    );
    assert_eq!(available(&mut con, "three"), 2);
    assert_eq!(
        error_of(&mut con, "RATELIMIT.ALLOWALL 2 one one"),
        "ERR key 'one' is listed more than once"
    );
}

#[test]
fn delete_expire_and_persist_act_on_the_one_key() {
    let server = Server::start();
    let mut con = server.conn();
    set_clock(&mut con, T0);
    ok::<i64>(&mut con, "RATELIMIT.SETRATE k 3 1000 ONEKEY");
    assert_eq!(try_acquire(&mut con, "k", 1), None);
    assert_eq!(ok::<i64>(&mut con, "RATELIMIT.EXPIRE k 600000 XX"), 0);
    assert_eq!(ok::<i64>(&mut con, "RATELIMIT.EXPIRE k 600000"), 1);
    let at: i64 = ok(&mut con, "PEXPIRETIME k");
    assert!(at > 0);
    // A grant (no KEEPALIVE: no TTL of its own) keeps it, the state rewritten in place.
    let len: i64 = ok(&mut con, "STRLEN k");
    advance(&mut con, 100);
    assert_eq!(try_acquire(&mut con, "k", 1), None);
    assert_eq!(ok::<i64>(&mut con, "STRLEN k"), len);
    assert_eq!(ok::<i64>(&mut con, "PEXPIRETIME k"), at);
    assert_eq!(ok::<i64>(&mut con, "RATELIMIT.EXPIRE k 700000 LT"), 0);
    assert_eq!(
        ok::<i64>(&mut con, "RATELIMIT.EXPIRE k 700000 GT CLIENT c"),
        1
    );
    assert_eq!(ok::<i64>(&mut con, "RATELIMIT.PERSIST k"), 1);
    assert_eq!(pttl(&mut con, "k"), -1);
    assert_eq!(ok::<i64>(&mut con, "RATELIMIT.PERSIST k"), 0);
    assert_eq!(ok::<i64>(&mut con, "RATELIMIT.DELETE k CLIENT c"), 1);
    assert!(keys(&mut con).is_empty());
    assert_eq!(ok::<i64>(&mut con, "RATELIMIT.DELETE k"), 0);
    assert_eq!(
        error_of(&mut con, "RATELIMIT.TRYACQUIRE k"),
        "ERR RateLimiter is not initialized (limiter 'k')"
    );
    // An expiry in the past deletes it, as PEXPIRE does.
    ok::<i64>(&mut con, "RATELIMIT.SETRATE k 3 1000 ONEKEY");
    assert_eq!(ok::<i64>(&mut con, "RATELIMIT.EXPIRE k -1"), 1);
    assert!(!exists(&mut con, "k"));
}

// ---- at most `rate` in any window --------------------------------------------------------------

#[test]
fn at_most_rate_in_any_window_over_a_long_randomized_run() {
    let server = Server::start();
    let mut con = server.conn();
    set_clock(&mut con, T0);
    // (name, rate, interval): exact, default precision (83 ms), coarse.
    let limiters = [
        ("a", 7i64, 1000i64, "PRECISION 1"),
        ("b", 20, 5000, ""),
        ("c", 50, 3000, "PRECISION 500"),
    ];
    for (name, rate, interval, p) in limiters {
        ok::<i64>(
            &mut con,
            &format!("RATELIMIT.SETRATE {name} {rate} {interval} {p} ONEKEY"),
        );
    }
    let mut rng = Rng(0xA7_0057_4A7E);
    let mut now = T0;
    let mut grants: Vec<Vec<(i64, i64)>> = vec![Vec::new(); limiters.len()];
    let mut refusals = 0;
    for _ in 0..4000 {
        if rng.chance(30) {
            let ms = rng.below(300) as i64;
            advance(&mut con, ms);
            now += ms;
            continue;
        }
        let permits = 1 + rng.below(4) as i64;
        let i = rng.index(limiters.len());
        let name = limiters[i].0;
        let granted: Vec<usize> = match rng.below(3) {
            0 => {
                let j = (i + 1 + rng.index(limiters.len() - 1)) % limiters.len();
                let a = fields(&ok::<Value>(
                    &mut con,
                    &format!(
                        "RATELIMIT.ALLOWALL 2 {name} {} PERMITS {permits}",
                        limiters[j].0
                    ),
                ));
                if int(&a, "allowed") == 1 {
                    vec![i, j]
                } else {
                    vec![]
                }
            }
            1 => {
                let a = allow(&mut con, &format!("{name} {permits}"));
                if int(&a, "allowed") == 1 {
                    vec![i]
                } else {
                    vec![]
                }
            }
            _ => match try_acquire(&mut con, name, permits as u32) {
                None => vec![i],
                Some(_) => vec![],
            },
        };
        if granted.is_empty() {
            refusals += 1;
        }
        for g in granted {
            let (name, rate, interval, _) = limiters[g];
            grants[g].push((now, permits));
            let in_window: i64 = grants[g]
                .iter()
                .filter(|(t, _)| *t > now - interval)
                .map(|x| x.1)
                .sum();
            assert!(
                in_window <= rate,
                "{name}: {in_window} in the window ending at {}",
                now - T0
            );
        }
    }
    // The logs are bounded by interval / precision.
    for (name, rate, interval, _) in limiters {
        let s = state(&mut con, name);
        assert!(s.entries.len() as u64 <= interval as u64 / s.precision + 1);
        assert!(s.permits_in_window(now) <= rate as u64);
    }
    let total: usize = grants.iter().map(Vec::len).sum();
    assert!(
        total > 1000 && refusals > 500,
        "{total} grants, {refusals} refusals"
    );
}

// ---- TTL, replication, AOF, events ---------------------------------------------------------------

#[test]
fn the_ttl_rule() {
    let master = Server::start();
    let replica = Server::start_replica(&master, false);
    let mut con = master.conn();
    let mut rep = replica.conn();
    set_clock(&mut con, T0);
    // With KEEPALIVE: now + keep-alive on every write, on the server's clock.
    let before = server_ms(&mut con);
    ok::<i64>(
        &mut con,
        "RATELIMIT.SETRATE ka 1 60000 KEEPALIVE 600000 ONEKEY",
    );
    let after = server_ms(&mut con);
    let at: i64 = ok(&mut con, "PEXPIRETIME ka");
    assert!((before + 600_000..=after + 600_000).contains(&at), "{at}");
    assert_eq!(try_acquire(&mut con, "ka", 1), None);
    wait_replicas(&mut con, 1);
    // A refusal that changes nothing writes nothing, not even PEXPIREAT: the keep-alive set by
    // the grant that logged the refusing permit outlives it.
    let (sets, expires) = (
        command_calls(&mut rep, "set"),
        command_calls(&mut rep, "pexpireat"),
    );
    let bytes = raw(&mut con, "ka");
    let granted_until: i64 = ok(&mut con, "PEXPIRETIME ka");
    assert_eq!(try_acquire(&mut con, "ka", 1), Some(60_999));
    let at: i64 = ok(&mut con, "PEXPIRETIME ka");
    assert_eq!(at, granted_until);
    assert_eq!(raw(&mut con, "ka"), bytes);
    wait_replicas(&mut con, 1);
    assert_eq!(command_calls(&mut rep, "set"), sets);
    assert_eq!(command_calls(&mut rep, "pexpireat"), expires);
    // A queued waiter writes nothing either: its turn comes when the permit logged by the grant
    // frees, within the interval, well before that grant's keep-alive ends.
    let server = &master;
    let waiter = park(server, &mut con, "RATELIMIT.ACQUIRE ka 1 TIMEOUT 100");
    let at: i64 = ok(&mut con, "PEXPIRETIME ka");
    assert_eq!(at, granted_until);
    advance(&mut con, 100);
    assert!(matches!(served(waiter).reply, Reply::Wait(_)));

    // Without KEEPALIVE: no TTL; one given by EXPIRE is kept by every write (SET ... KEEPTTL).
    ok::<i64>(&mut con, "RATELIMIT.SETRATE nk 2 1000 ONEKEY");
    assert_eq!(pttl(&mut con, "nk"), -1);
    assert_eq!(try_acquire(&mut con, "nk", 1), None);
    assert_eq!(pttl(&mut con, "nk"), -1);
    ok::<i64>(&mut con, "RATELIMIT.EXPIRE nk 900000");
    let at: i64 = ok(&mut con, "PEXPIRETIME nk");
    let bytes = raw(&mut con, "nk");
    assert_eq!(try_acquire(&mut con, "nk", 1), None);
    assert_ne!(raw(&mut con, "nk"), bytes);
    assert_eq!(ok::<i64>(&mut con, "PEXPIRETIME nk"), at, "KEEPTTL");
    advance(&mut con, 5000);
    assert_eq!(
        try_acquire(&mut con, "nk", 2),
        None,
        "a longer state: a new string"
    );
    assert_eq!(ok::<i64>(&mut con, "PEXPIRETIME nk"), at);
    ok::<i64>(&mut con, "RATELIMIT.SETRATE nk 2 1000 KEEPSTATE ONEKEY");
    assert_eq!(ok::<i64>(&mut con, "PEXPIRETIME nk"), at, "SETRATE too");
    wait_replicas(&mut con, 1);
    assert_eq!(snapshot(&mut rep), snapshot(&mut con));
}

/// A workload of every writing command on ONEKEY limiters, with and without KEEPALIVE.
fn workload(con: &mut Connection, rng: &mut Rng, steps: usize) {
    let names = ["w1", "w2", "ka1", "ka2"];
    for name in names {
        let ka = if name.starts_with("ka") {
            "KEEPALIVE 900000"
        } else {
            ""
        };
        ok::<i64>(con, &format!("RATELIMIT.SETRATE {name} 5 2000 {ka} ONEKEY"));
    }
    for step in 0..steps {
        let name = *rng.pick(&names);
        let ka = if name.starts_with("ka") {
            "KEEPALIVE 900000"
        } else {
            ""
        };
        let text = match rng.below(16) {
            0 => format!(
                "RATELIMIT.SETRATE {name} {} 2000 {ka} KEEPSTATE ONEKEY",
                3 + rng.below(4)
            ),
            1 => format!("RATELIMIT.RELEASE {name} {}", 1 + rng.below(2)),
            2 => format!("RATELIMIT.EXPIRE {name} {}", 600_000 + rng.below(100_000)),
            3 => format!("RATELIMIT.PERSIST {name}"),
            4 => {
                let acquired: redis::RedisResult<Value> = redis::cmd("EVAL")
                    .arg("return redis.call('RATELIMIT.ACQUIRE', KEYS[1], 1, 'TICKET', ARGV[1])")
                    .arg(1)
                    .arg(name)
                    .arg(format!("s{step}"))
                    .query(con);
                if let Err(e) = acquired {
                    assert!(error_line(&e).contains("not initialized"), "{e}");
                }
                continue;
            }
            5 => format!(
                "RATELIMIT.CANCEL {name} s{}",
                step.saturating_sub(rng.index(20))
            ),
            6 => format!("RATELIMIT.ALLOWALL 2 w1 ka1 PERMITS {}", 1 + rng.below(2)),
            7 if rng.one_in(4) => format!("RATELIMIT.DELETE {name}"),
            8..=10 => {
                advance(con, rng.below(500) as i64);
                continue;
            }
            11 => format!("RATELIMIT.ALLOW {name} 1 RATE 5 2000 {ka} ONEKEY"),
            _ => format!("RATELIMIT.TRYACQUIRE {name} 1 RATE 5 2000 {ka} ONEKEY"),
        };
        match line::<Value>(con, &text) {
            Ok(_) => {}
            // ALLOWALL on a limiter deleted meanwhile.
            // A limiter deleted meanwhile (RATE creates it again).
            Err(e) if error_line(&e).contains("not initialized") => {}
            Err(e) => panic!("`{text}`: {e}"),
        }
    }
}

fn appendonly_dir_copy(master: &Server, tag: &str) -> std::path::PathBuf {
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("onekey-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("appendonlydir")).unwrap();
    for entry in std::fs::read_dir(master.dir.join("appendonlydir")).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(
            entry.path(),
            dir.join("appendonlydir").join(entry.file_name()),
        )
        .unwrap();
    }
    dir
}

fn replay_without_the_module(master: &Server, tag: &str) -> Vec<(Vec<u8>, Vec<u8>, i64)> {
    let dir = appendonly_dir_copy(master, tag);
    let plain = Server::start_plain(&["--appendonly", "yes", "--dir", dir.to_str().unwrap()]);
    let dataset = snapshot(&mut plain.conn());
    drop(plain);
    let _ = std::fs::remove_dir_all(&dir);
    dataset
}

#[test]
fn a_replica_and_an_aof_without_the_module_restore_it_byte_for_byte() {
    let master = Server::start_with(
        &["debug-commands", "yes"],
        &["--appendonly", "yes", "--appendfsync", "always"],
    );
    let replica = Server::start_replica(&master, false);
    let mut con = master.conn();
    con.set_read_timeout(Some(HANG)).unwrap();
    set_clock(&mut con, T0);
    let mut rng = Rng(0x0A0F_0123);
    workload(&mut con, &mut rng, 1500);
    wait_replicas(&mut con, 1);
    let on_master = snapshot(&mut con);
    assert_eq!(snapshot(&mut replica.conn()), on_master);
    assert!(on_master.len() >= 2, "{on_master:?}");
    assert!(
        on_master.iter().all(|(k, _, _)| !k.starts_with(b"{")),
        "no derived keys"
    );
    assert!(on_master.iter().any(|k| k.2 > 0), "some with a TTL");
    let mut rep = replica.conn();
    assert_eq!(command_calls(&mut rep, "ratelimit.tryacquire"), 0);
    assert!(command_calls(&mut rep, "set") > 100);
    for (key, _, _) in &on_master {
        let m: Vec<u8> = run(&mut con, &[b"GET", key]).unwrap();
        let r: Vec<u8> = run(&mut rep, &[b"GET", key]).unwrap();
        assert_eq!(m, r);
        Packed::decode(&m);
    }

    // The AOF as written, then rewritten, replays on a server without the module.
    let mut aof = Vec::new();
    for entry in std::fs::read_dir(master.dir.join("appendonlydir")).unwrap() {
        aof.extend(std::fs::read(entry.unwrap().path()).unwrap());
    }
    let text = String::from_utf8_lossy(&aof).to_ascii_lowercase();
    assert!(
        text.contains("pxat") && text.contains("keepttl"),
        "SET ... PXAT and KEEPTTL"
    );
    assert!(!text.contains("ratelimit."), "no module command in the AOF");
    assert_eq!(replay_without_the_module(&master, "aof"), on_master);
    let _: String = ok(&mut con, "BGREWRITEAOF");
    let deadline = std::time::Instant::now() + HANG;
    loop {
        let running = info_field(&mut con, "persistence", "aof_rewrite_in_progress");
        let scheduled = info_field(&mut con, "persistence", "aof_rewrite_scheduled");
        if running.as_deref() == Some("0") && scheduled.as_deref() == Some("0") {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the rewrite never ended"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // More writes on top of the rewritten base.
    workload(&mut con, &mut rng, 300);
    wait_replicas(&mut con, 1);
    let on_master = snapshot(&mut con);
    assert_eq!(snapshot(&mut replica.conn()), on_master);
    assert_eq!(replay_without_the_module(&master, "rewritten"), on_master);
    eprintln!("onekey: {} keys restored byte for byte", on_master.len());
}

#[test]
fn keyspace_events_are_a_sets() {
    let master = Server::start_with(
        &["debug-commands", "yes"],
        &["--notify-keyspace-events", "KEA"],
    );
    let replica = Server::start_replica(&master, false);
    let _: String = ok(&mut replica.conn(), "CONFIG SET notify-keyspace-events KEA");
    let mut master_sub = master.conn();
    let mut replica_sub = replica.conn();
    let mut on_master = master_sub.as_pubsub();
    on_master.psubscribe("__keyevent@0__:*").unwrap();
    let mut on_replica = replica_sub.as_pubsub();
    on_replica.psubscribe("__keyevent@0__:*").unwrap();
    let mut con = master.conn();
    set_clock(&mut con, T0);
    for text in [
        "RATELIMIT.SETRATE ka 1 1000 KEEPALIVE 5000 ONEKEY",
        "RATELIMIT.TRYACQUIRE ka",
        "RATELIMIT.TRYACQUIRE ka",
        "RATELIMIT.SETRATE n 1 1000 ONEKEY",
        "RATELIMIT.TRYACQUIRE n",
        "RATELIMIT.TRYACQUIRE n",
        "RATELIMIT.AVAILABLE n",
        "RATELIMIT.EXPIRE n 100000",
        "RATELIMIT.PERSIST n",
        "RATELIMIT.DELETE n",
    ] {
        let _: Value = ok(&mut con, text);
    }
    let _: () = ok(&mut con, "SET sentinel 1");
    wait_replicas(&mut con, 1);
    let master_events = keyevents_until_sentinel(on_master);
    let expected: Vec<(String, Vec<u8>)> = [
        ("set", "ka"),
        ("expire", "ka"),
        ("set", "ka"),
        ("expire", "ka"),
        // The refused TRYACQUIRE changed nothing and wrote nothing.
        ("set", "n"),
        ("set", "n"),
        ("expire", "n"),
        ("persist", "n"),
        ("del", "n"),
    ]
    .iter()
    .map(|(e, k)| (e.to_string(), k.as_bytes().to_vec()))
    .collect();
    assert_eq!(master_events, expected);
    assert_eq!(keyevents_until_sentinel(on_replica), expected);
}

// ---- ACL and cluster -----------------------------------------------------------------------------

#[test]
fn a_user_allowed_only_the_key_can_use_every_command() {
    let server = Server::start();
    let mut admin = server.conn();
    set_clock(&mut admin, T0);
    let _: () = ok(&mut admin, "ACL SETUSER only on >pw ~k ~three +@all");
    let _: () = ok(&mut admin, "ACL SETUSER reader on >pw %R~k +@all");
    let mut con = server.conn();
    let _: () = ok(&mut con, "AUTH only pw");
    for text in [
        "RATELIMIT.SETRATE k 5 1000 ONEKEY",
        "RATELIMIT.SETRATE k 5 1000 KEEPSTATE ONEKEY",
        "RATELIMIT.TRYACQUIRE k",
        "RATELIMIT.ALLOW k",
        "RATELIMIT.ALLOWALL 1 k",
        "RATELIMIT.ACQUIRE k 1 TICKET t",
        "RATELIMIT.CANCEL k t",
        "RATELIMIT.RELEASE k 1",
        "RATELIMIT.AVAILABLE k",
        "RATELIMIT.PEEK k",
        "RATELIMIT.CONFIG k",
        "RATELIMIT.EXPIRE k 100000",
        "RATELIMIT.PERSIST k",
        "RATELIMIT.DELETE k",
        "RATELIMIT.TRYACQUIRE k 1 RATE 5 1000 ONEKEY",
    ] {
        let _: Value = ok(&mut con, text);
    }
    // The three-key form needs its derived keys too.
    refused(
        &mut con,
        "RATELIMIT.SETRATE three 5 1000",
        "NOPERM this user has no permissions to access the limiter key '{three}:value'",
    );
    // Read-only on the key: the readers answer, the writers are refused by the server.
    let mut reader = server.conn();
    let _: () = ok(&mut reader, "AUTH reader pw");
    assert_eq!(ok::<i64>(&mut reader, "RATELIMIT.AVAILABLE k"), 4);
    let _: Value = ok(&mut reader, "RATELIMIT.PEEK k");
    let _: Value = ok(&mut reader, "RATELIMIT.CONFIG k");
    for text in [
        "RATELIMIT.TRYACQUIRE k",
        "RATELIMIT.SETRATE k 5 1000 ONEKEY",
    ] {
        let before = snapshot(&mut admin);
        assert!(error_of(&mut reader, text).starts_with("NOPERM"), "{text}");
        assert_eq!(snapshot(&mut admin), before);
    }
}

#[test]
fn in_a_cluster_any_name_is_one_key_on_its_slot() {
    let mut cluster = cluster::Cluster::start();
    for name in ["user:42", "a{b", "x}{y", "{}z"] {
        assert!(
            matches!(
                cluster.line(&format!("RATELIMIT.SETRATE {name} 2 1000 ONEKEY")),
                Ok(Value::Int(1))
            ),
            "{name}"
        );
        assert_eq!(
            cluster
                .line(&format!("RATELIMIT.TRYACQUIRE {name} 2"))
                .unwrap(),
            Value::Nil
        );
        let a = fields(&cluster.line(&format!("RATELIMIT.ALLOW {name}")).unwrap());
        assert_eq!(int(&a, "allowed"), 0, "{name}");
        let created = cluster.line(&format!("RATELIMIT.ALLOW n{name} 1 RATE 2 1000 ONEKEY"));
        assert_eq!(int(&fields(&created.unwrap()), "allowed"), 1);
    }
    // Each name is its one key, on the node owning its slot.
    let mut all: Vec<Vec<u8>> = Vec::new();
    for node in 0..3 {
        for key in cluster.keys_of(node) {
            assert_eq!(cluster.owner(&key), node);
            all.push(key);
        }
    }
    all.sort();
    let expected: Vec<&[u8]> = vec![
        b"a{b",
        b"na{b",
        b"nuser:42",
        b"nx}{y",
        b"n{}z",
        b"user:42",
        b"x}{y",
        b"{}z",
    ];
    assert_eq!(all, expected);
    // The three-key form of such a name is refused: its derived keys are elsewhere.
    let error = cluster.line("RATELIMIT.SETRATE c{d 2 1000").unwrap_err();
    assert!(error_line(&error).contains("c{d"), "{error}");
}

// ---- errors and foreign bytes -------------------------------------------------------------------

#[test]
fn errors_name_the_key_and_write_nothing() {
    let server = Server::start();
    let mut con = server.conn();
    set_clock(&mut con, T0);
    ok::<i64>(&mut con, "RATELIMIT.SETRATE one 5 1000 ONEKEY");
    ok::<i64>(&mut con, "RATELIMIT.SETRATE three 5 1000");
    let _: () = ok(&mut con, "SET text hello");
    // A GCRA key: a number (its TAT).
    let _: () = ok(&mut con, "SET g 1800000000206000");
    let form = |key: &str, what: &str| {
        let option = if what.contains("ONEKEY") {
            "with ONEKEY"
        } else {
            "without ONEKEY"
        };
        format!(
            "ERR limiter '{key}' is {what}: reconfigure it {option}, or RATELIMIT.DELETE it \
             first to change its form"
        )
    };
    for text in [
        "RATELIMIT.SETRATE one 5 1000",
        "RATELIMIT.SETRATE one 5 1000 OVERALL",
        "RATELIMIT.SETRATE one 5 1000 PER_CLIENT XX",
        "RATELIMIT.SETRATE one 5 1000 KEEPSTATE",
    ] {
        refused(&mut con, text, &form("one", "a ONEKEY limiter"));
    }
    for text in [
        "RATELIMIT.SETRATE three 5 1000 ONEKEY",
        "RATELIMIT.SETRATE three 5 1000 ONEKEY XX KEEPSTATE",
    ] {
        refused(
            &mut con,
            text,
            &form("three", "a three-key (Redisson) limiter"),
        );
    }
    refused(
        &mut con,
        "RATELIMIT.SETRATE x 5 1000 ONEKEY PER_CLIENT",
        "ERR syntax error, ONEKEY and PER_CLIENT options at the same time are not compatible",
    );
    refused(
        &mut con,
        "RATELIMIT.SETRATE x 5 1000 ONEKEY ONEKEY",
        "ERR syntax error, ONEKEY specified multiple times",
    );
    // Each call reads the whole log: a configuration whose log could outgrow 4 096 entries
    // (more permits than that, in more buckets) is refused, by SETRATE and by RATE alike.
    let too_fine = "ERR a ONEKEY limiter logs at most 4096 entries: with a rate above 4096, \
                    PRECISION must be at least interval/4096";
    for text in [
        "RATELIMIT.SETRATE x 1000000 60000 ONEKEY PRECISION 14",
        "RATELIMIT.ALLOW x RATE 4097 4097 ONEKEY PRECISION 1",
        "RATELIMIT.TRYACQUIRE x RATE 1000000 3600000 ONEKEY PRECISION 1",
    ] {
        refused(&mut con, text, too_fine);
    }
    assert_eq!(
        ok::<i64>(
            &mut con,
            "RATELIMIT.SETRATE x 1000000 60000 ONEKEY PRECISION 15"
        ),
        1
    );
    assert_eq!(
        ok::<i64>(
            &mut con,
            "RATELIMIT.SETRATE y 4096 3600000 ONEKEY PRECISION 1"
        ),
        1
    );
    refused(
        &mut con,
        "RATELIMIT.SETRATE x 5 1000 ONEKEY PRECISION 1001",
        "ERR PRECISION must be an integer between 1 and 1000",
    );
    refused(
        &mut con,
        "RATELIMIT.TRYACQUIRE x 1 RATE 5 1000 ONEKEY KEEPALIVE 10",
        "ERR KEEPALIVE must be 0 or at least the interval",
    );
    for key in ["text", "g"] {
        let wrongtype =
            format!("WRONGTYPE key '{key}' holds a string that is not a ONEKEY rate limiter");
        for text in [
            "RATELIMIT.TRYACQUIRE $",
            "RATELIMIT.TRYACQUIRE $ 1 RATE 5 1000 ONEKEY",
            "RATELIMIT.ALLOW $",
            "RATELIMIT.ALLOWALL 2 one $",
            "RATELIMIT.ACQUIRE $ 1 TIMEOUT 1",
            "RATELIMIT.AVAILABLE $",
            "RATELIMIT.PEEK $",
            "RATELIMIT.RELEASE $ 1",
            "RATELIMIT.CANCEL $ t",
            "RATELIMIT.CONFIG $",
            "RATELIMIT.SETRATE $ 5 1000 ONEKEY",
            "RATELIMIT.SETRATE $ 5 1000 ONEKEY NX",
            "RATELIMIT.DELETE $",
            "RATELIMIT.EXPIRE $ 1000",
            "RATELIMIT.PERSIST $",
        ] {
            let text = text.replace('$', key);
            let before = snapshot(&mut con);
            // ALLOWALL too: the message names the key, which is the limiter.
            assert_eq!(error_of(&mut con, &text), wrongtype, "`{text}`");
            assert_eq!(snapshot(&mut con), before);
        }
    }
    // The three-key form's SETRATE over a foreign string: WRONGTYPE, not "a ONEKEY limiter".
    for key in ["text", "g"] {
        refused(
            &mut con,
            &format!("RATELIMIT.SETRATE {key} 5 1000"),
            &format!("WRONGTYPE key '{key}' holds a string that is not a ONEKEY rate limiter"),
        );
    }
    // The GCRA commands on a ONEKEY limiter: WRONGTYPE, never a TAT read from its bytes.
    for text in [
        "GCRA one 5 10 60",
        "CL.THROTTLE one 5 10 60",
        "CL.THROTTLE one 5 10 60 0",
        "RATELIMIT.GCRAALLOW one 5 10 60",
    ] {
        refused(
            &mut con,
            text,
            "WRONGTYPE Operation against a key holding the wrong kind of value",
        );
    }
}

/// Every command on a key whose bytes were changed by hand, and on bytes with a right checksum
/// but fields out of range: an error (or, for DELETE, EXPIRE and PERSIST, the usual reply), no
/// crash, and a command that failed wrote nothing.
#[test]
fn corrupt_bytes_are_refused_and_never_crash() {
    let mut server = Server::start();
    let mut con = server.conn();
    set_clock(&mut con, T0);
    ok::<i64>(
        &mut con,
        "RATELIMIT.SETRATE k 1000 60000 KEEPALIVE 600000 ONEKEY",
    );
    for permits in [1, 3, 200] {
        assert_eq!(try_acquire(&mut con, "k", permits), None);
        advance(&mut con, 2500);
    }
    let good = raw(&mut con, "k");
    let good_state = Packed::decode(&good);
    assert_eq!(good_state.entries.len(), 3);
    let commands = [
        "RATELIMIT.TRYACQUIRE k",
        "RATELIMIT.TRYACQUIRE k 1 RATE 5 1000 ONEKEY",
        "RATELIMIT.ALLOW k",
        "RATELIMIT.ALLOWALL 1 k",
        "RATELIMIT.ACQUIRE k 1 TIMEOUT 1",
        "RATELIMIT.AVAILABLE k",
        "RATELIMIT.PEEK k",
        "RATELIMIT.RELEASE k 1",
        "RATELIMIT.CANCEL k t",
        "RATELIMIT.CONFIG k",
        "RATELIMIT.SETRATE k 5 1000 ONEKEY",
        "RATELIMIT.SETRATE k 5 1000 ONEKEY NX",
        "RATELIMIT.SETRATE k 5 1000 ONEKEY XX KEEPSTATE",
        "RATELIMIT.SETRATE k 5 1000",
        "GCRA k 5 10 60",
        "RATELIMIT.GCRAALLOW k 5 10 60",
        "RATELIMIT.EXPIRE k 700000",
        "RATELIMIT.PERSIST k",
        "RATELIMIT.DELETE k",
    ];
    // Planted values: every byte changed by one (the checksum always sees it), and bytes with
    // a right checksum that no SETRATE could have written.
    let mut planted: Vec<(String, Vec<u8>)> = Vec::new();
    for at in 0..good.len() {
        let mut bytes = good.clone();
        bytes[at] ^= 1;
        planted.push((format!("byte {at} ^ 1"), bytes));
    }
    let mut appended = good.clone();
    appended.push(b'x');
    planted.push(("APPEND".into(), appended));
    for len in [2, 3, 5, 10, good.len() - 1] {
        planted.push((format!("first {len} bytes"), good[..len].to_vec()));
    }
    let crafted = |change: &dyn Fn(&mut Packed)| {
        let mut s = good_state.clone();
        change(&mut s);
        s.encode()
    };
    planted.push(("precision 0".into(), crafted(&|s| s.precision = 0)));
    planted.push((
        "precision above the interval".into(),
        crafted(&|s| s.precision = 60_001),
    ));
    planted.push((
        "keep-alive below the interval".into(),
        crafted(&|s| s.keep_alive = 5),
    ));
    planted.push(("rate above 2^32".into(), crafted(&|s| s.rate = 1 << 33)));
    planted.push(("interval 0".into(), crafted(&|s| s.interval = 0)));
    planted.push((
        "an entry of 0 permits".into(),
        crafted(&|s| s.entries[1].1 = 0),
    ));
    planted.push((
        "an entry of 2^32 permits".into(),
        crafted(&|s| s.entries[1].1 = 1 << 32),
    ));
    let mut version = good[..good.len() - 2].to_vec();
    version[2] = 2;
    planted.push(("version 2".into(), with_checksum(version)));
    let mut overflow = good[..good.len() - 2].to_vec();
    overflow.extend_from_slice(&[0xFE; 9]);
    overflow.push(0x01);
    planted.push((
        "an entry far beyond the clock".into(),
        with_checksum(overflow),
    ));
    let mut long = good[..good.len() - 2].to_vec();
    long.extend_from_slice(&[0xFF; 11]);
    planted.push(("a varint of 11 bytes".into(), with_checksum(long)));
    planted.push((
        "magic only, checksummed".into(),
        with_checksum(MAGIC.to_vec()),
    ));

    let mut combinations = 0;
    for (what, bytes) in &planted {
        for command in commands {
            let _: () = ok(&mut con, "FLUSHALL");
            // The good bytes read twice first, so that the module keeps their state: bytes
            // changed since are decoded anew, never answered from it.
            let _: () = run(&mut con, &[b"SET", b"k", &good, b"PX", b"800000"]).unwrap();
            for _ in 0..2 {
                let _: Value = ok(&mut con, "RATELIMIT.PEEK k");
            }
            let _: () = run(&mut con, &[b"SET", b"k", bytes, b"PX", b"800000"]).unwrap();
            let before = snapshot(&mut con);
            let reply = line::<Value>(&mut con, command);
            combinations += 1;
            assert!(
                server.is_alive(),
                "died on `{command}` with {what}:\n{}",
                server.log()
            );
            match reply {
                Err(e) => {
                    let line = error_line(&e);
                    assert_eq!(
                        snapshot(&mut con),
                        before,
                        "`{command}` with {what}: {line}"
                    );
                    let magic_intact = bytes.starts_with(&MAGIC);
                    let expected = if command.starts_with("GCRA") || command.contains("GCRAALLOW") {
                        if magic_intact {
                            "WRONGTYPE"
                        } else {
                            "ERR"
                        }
                    } else if magic_intact {
                        "corrupt rate limiter key 'k': "
                    } else {
                        "WRONGTYPE key 'k' holds a string that is not a ONEKEY rate limiter"
                    };
                    assert!(line.contains(expected), "`{command}` with {what}: {line}");
                }
                Ok(value) => {
                    // Only the key-level commands act on a corrupt limiter; NX answers 0 as on
                    // any limiter that exists.
                    let key_level = ["EXPIRE", "PERSIST", "DELETE"]
                        .iter()
                        .any(|c| command.starts_with(&format!("RATELIMIT.{c}")));
                    let nx = command.ends_with(" NX") && value == Value::Int(0);
                    assert!(
                        key_level || nx || !bytes.starts_with(&MAGIC),
                        "`{command}` with {what} succeeded: {value:?}"
                    );
                    if !key_level {
                        assert_eq!(snapshot(&mut con), before, "`{command}` with {what}");
                    }
                }
            }
        }
    }
    eprintln!("onekey: {combinations} corrupt key and command pairs");
    // DELETE clears a corrupt limiter, which can then be created anew.
    let _: () = run(&mut con, &[b"SET", b"k", &planted[5].1]).unwrap();
    assert_eq!(ok::<i64>(&mut con, "RATELIMIT.DELETE k"), 1);
    assert_eq!(ok::<i64>(&mut con, "RATELIMIT.SETRATE k 5 1000 ONEKEY"), 1);
}
