//! A bounded randomized attack: ten thousand RATELIMIT.* commands with random, binary,
//! malformed and conflicting arguments (and wrong arities; ACQUIRE's TICKETs and CANCELs of
//! them among them), directly, inside MULTI and from Lua, against a dataset with planted corrupt
//! keys; blocking ACQUIREs are unblocked, timed out or disconnected. Every command that replies with an error must leave the dataset unchanged; at
//! the end the server is alive and its log has no panic.
//!
//! The seed is fixed and printed; `RATELIMIT_HOSTILE_SEED=<n>` replays another one.

use std::collections::{BTreeMap, VecDeque};
use std::fmt::Write as _;
use std::io::{self, BufRead, BufReader, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use crate::common::*;

const DEFAULT_SEED: u64 = 0x7261_7465_6c69_6d74;
/// The commands of one run, however long they take (a slow machine takes longer, and proves
/// as much).
const COMMANDS: usize = 10_000;
/// Commands between two resets of the dataset (FLUSHALL and planting again).
const EPOCH: usize = 500;
/// Distinct problems reported at most (the run goes on after one, to find others).
const MAX_PROBLEMS: usize = 12;

// ---- the planted dataset ------------------------------------------------------------------------

/// Limiters with sane state, which the commands mostly hit so that state really changes.
const GOOD_NAMES: [&[u8]; 12] = [
    b"k0",
    b"one0",
    b"one1",
    b"x{one",
    b"k1",
    b"k2",
    b"pc0",
    b"pc1",
    b"a{b",
    b"{t}z",
    b"\xff\xfe\x00k",
    b"",
];

/// Limiters whose keys hold something this module did not write.
const CORRUPT_NAMES: [&[u8]; 29] = [
    b"wt-h",
    b"wt-v",
    b"wt-p",
    b"wt-c",
    b"bad-r",
    b"bad-i",
    b"bad-k",
    b"part",
    b"bad-t",
    b"huge-r",
    b"zero-r",
    b"max-cfg",
    b"bad-v",
    b"big-v",
    b"neg-v",
    b"empty-v",
    b"bad-m",
    b"trunc-m",
    b"empty-m",
    b"inf-m",
    b"max-m",
    b"fut-m",
    b"frac-m",
    b"long-id",
    b"pc-bad",
    b"one-byte",
    b"one-cut",
    b"one-text",
    b"one-gcra",
];

const CLIENTS: [&[u8]; 7] = [
    b"c1",
    b"c2",
    b"\x00",
    b"\xff\x80\x00\r\n",
    b"6f1c5a3e-6d7b-4c3e-9a8f-1d2c3b4a5e6f",
    b"",
    b"a b}{",
];

const SMALL: [&[u8]; 8] = [b"1", b"2", b"3", b"4", b"5", b"10", b"100", b"1000"];

const WEIRD_NUMBERS: [&[u8]; 27] = [
    b"0",
    b"-1",
    b"-0",
    b"+1",
    b"1e9",
    b"99999999999999999999",
    b"",
    b"4294967295",
    b"4294967296",
    b"9223372036854775807",
    b"-9223372036854775808",
    b"9223372036854775808",
    b"3153600000000",
    b"3153600000001",
    b"-3153600000000",
    b" 1",
    b"1 ",
    b"01",
    b"0x10",
    b"1.5",
    b"\x00",
    b"1\x00",
    b"abc",
    b"\xff",
    b"-",
    b"18446744073709551616",
    b"9007199254740991",
];

const TOKENS: [&[u8]; 25] = [
    b"OVERALL",
    b"ONEKEY",
    b"onekey",
    b"PER_CLIENT",
    b"KEEPALIVE",
    b"NX",
    b"XX",
    b"GT",
    b"LT",
    b"KEEPSTATE",
    b"CLIENT",
    b"TIMEOUT",
    b"TICKET",
    b"SETCLOCK",
    b"ADVANCE",
    b"nx",
    b"Client",
    b"keepalive",
    b"per_client",
    b"overall ",
    b"CLIENT\x00",
    b"timeout",
    b"keepState",
    b"xX",
    b"gt",
];

/// A member as this module writes it, with a random id.
fn member(rng: &mut Rng, permits: u32) -> Vec<u8> {
    let mut out = vec![16u8];
    for _ in 0..16 {
        out.push(rng.next() as u8);
    }
    out.extend_from_slice(&permits.to_le_bytes());
    out
}

fn ok(con: &mut Connection, words: &[&[u8]]) {
    if let Err(e) = run::<Value>(con, words) {
        panic!("planting {:?}: {e}", show(words));
    }
}

fn okl(con: &mut Connection, text: &str) {
    if let Err(e) = line::<Value>(con, text) {
        panic!("planting `{text}`: {e}");
    }
}

/// Empties the server and plants the dataset of one epoch, the clock frozen at `now`.
fn plant(con: &mut Connection, rng: &mut Rng, now: i64, odd: &[Vec<u8>]) {
    okl(con, "FLUSHALL");
    set_clock(con, now);
    let past = (now - 5_000 - rng.index(100_000) as i64).to_string();
    let past = past.as_bytes();
    let nows = now.to_string();
    let nowb = nows.as_bytes();
    let future = (now + 1_000_000_000).to_string();

    // Sane limiters, some with state.
    okl(con, "RATELIMIT.SETRATE k0 5 1000");
    okl(con, "RATELIMIT.TRYACQUIRE k0 2");
    okl(con, "RATELIMIT.SETRATE k1 3 100 KEEPALIVE 3600000");
    okl(con, "RATELIMIT.SETRATE k2 1000000 60000");
    okl(con, "RATELIMIT.TRYACQUIRE k2 77777");
    okl(con, "RATELIMIT.SETRATE pc0 4 1000 PER_CLIENT");
    okl(con, "RATELIMIT.TRYACQUIRE pc0 CLIENT c1");
    okl(con, "RATELIMIT.SETRATE pc1 2 10 PER_CLIENT");
    ok(con, &[b"RATELIMIT.SETRATE", b"a{b", b"2", b"1000"]);
    ok(con, &[b"RATELIMIT.SETRATE", b"{t}z", b"9", b"500"]);
    ok(
        con,
        &[b"RATELIMIT.SETRATE", b"\xff\xfe\x00k", b"4", b"1000"],
    );
    ok(con, &[b"RATELIMIT.TRYACQUIRE", b"\xff\xfe\x00k", b"3"]);
    ok(con, &[b"RATELIMIT.SETRATE", b"", b"2", b"1000"]);
    // ONEKEY limiters: one with a log, one with a keep-alive, one whose name has a brace.
    okl(con, "RATELIMIT.SETRATE one0 5 1000 ONEKEY PRECISION 10");
    okl(con, "RATELIMIT.TRYACQUIRE one0 3");
    okl(
        con,
        "RATELIMIT.SETRATE one1 3 60000 ONEKEY KEEPALIVE 3600000",
    );
    okl(con, "RATELIMIT.SETRATE x{one 4 100 ONEKEY");
    for name in odd {
        ok(con, &[b"RATELIMIT.SETRATE", name, b"3", b"250"]);
    }

    // Wrong types.
    okl(con, "RPUSH wt-h x");
    okl(con, "RATELIMIT.SETRATE wt-v 5 1000");
    okl(con, "HSET {wt-v}:value f 1");
    okl(con, "RATELIMIT.SETRATE wt-p 5 1000");
    okl(con, "SET {wt-p}:permits 1");
    okl(con, "RATELIMIT.SETRATE wt-c 5 1000 PER_CLIENT");
    okl(con, "RPUSH {wt-c}:value:c1 x");
    okl(con, "SADD {wt-c}:permits:c2 m");

    // Configurations that do not parse, or parse to extremes.
    okl(
        con,
        "HSET bad-r rate abc interval 1000 type 0 keepAliveTime 0",
    );
    okl(con, "HSET bad-i rate 5 interval 0 type 0");
    okl(
        con,
        "HSET bad-k rate 5 interval 1000 type 0 keepAliveTime soon",
    );
    okl(con, "HSET part rate 5");
    okl(
        con,
        "HSET bad-t rate 5 interval 1000 type 2 keepAliveTime 0",
    );
    okl(con, "HSET huge-r rate 99999999999 interval 1000 type 0");
    okl(con, "HSET zero-r rate 0 interval 1000 type 0");
    okl(
        con,
        "HSET max-cfg rate 9223372036854775807 interval 9223372036854775807 type 0 \
         keepAliveTime 3153600000000",
    );

    // Values that are not integers, or are extreme integers.
    for (name, value) in [
        ("bad-v", &b"12abc"[..]),
        ("big-v", b"9223372036854775807"),
        ("neg-v", b"-9223372036854775808"),
        ("empty-v", b""),
    ] {
        okl(con, &format!("RATELIMIT.SETRATE {name} 5 1000"));
        okl(con, &format!("RATELIMIT.TRYACQUIRE {name}"));
        ok(
            con,
            &[b"SET", format!("{{{name}}}:value").as_bytes(), value],
        );
    }

    // Permit logs the module must decode: scored in the past (pruned, so decoded), with the
    // value deleted (summed, so decoded), or otherwise odd.
    okl(con, "RATELIMIT.SETRATE bad-m 5 1000");
    let undecodable = {
        let mut m = vec![16u8];
        m.extend(rng.bytes(10));
        m
    };
    ok(con, &[b"ZADD", b"{bad-m}:permits", past, &undecodable]);

    okl(con, "RATELIMIT.SETRATE trunc-m 5 1000");
    okl(con, "RATELIMIT.TRYACQUIRE trunc-m 2");
    let truncated = {
        let mut m = member(rng, 1);
        // Any length short of the member's 21 bytes, except 8 (which reads as `fI`).
        let len = 1 + rng.index(19);
        m.truncate(if len == 8 { 7 } else { len });
        m
    };
    ok(con, &[b"ZADD", b"{trunc-m}:permits", past, &truncated]);

    okl(con, "RATELIMIT.SETRATE empty-m 5 1000");
    ok(con, &[b"ZADD", b"{empty-m}:permits", past, b""]);
    okl(con, "SET {empty-m}:value 3");

    okl(con, "RATELIMIT.SETRATE inf-m 5 1000");
    let (a, b) = (member(rng, 1), member(rng, 2));
    ok(
        con,
        &[b"ZADD", b"{inf-m}:permits", b"+inf", &a, b"-inf", &b],
    );

    okl(con, "RATELIMIT.SETRATE max-m 4294967295 1000");
    for _ in 0..3 {
        let m = member(rng, u32::MAX);
        ok(con, &[b"ZADD", b"{max-m}:permits", nowb, &m]);
    }

    okl(con, "RATELIMIT.SETRATE fut-m 5 1000");
    let m = member(rng, 3);
    ok(con, &[b"ZADD", b"{fut-m}:permits", future.as_bytes(), &m]);
    okl(con, "SET {fut-m}:value 2");

    okl(con, "RATELIMIT.SETRATE frac-m 5 1000");
    let m = member(rng, 1);
    let fractional = format!("{}.5", now - 999);
    ok(
        con,
        &[b"ZADD", b"{frac-m}:permits", fractional.as_bytes(), &m],
    );
    let m = member(rng, 0);
    ok(con, &[b"ZADD", b"{frac-m}:permits", nowb, &m]);

    okl(con, "RATELIMIT.SETRATE long-id 5 1000");
    let mut long = vec![255u8];
    long.extend([7u8; 255]);
    long.extend_from_slice(&3u32.to_le_bytes());
    ok(con, &[b"ZADD", b"{long-id}:permits", nowb, &long]);

    // ONEKEY keys changed by hand: a byte, cut short, text after the magic, a GCRA key's TAT.
    for name in ["one-byte", "one-cut"] {
        okl(con, &format!("RATELIMIT.SETRATE {name} 5 1000 ONEKEY"));
        okl(con, &format!("RATELIMIT.TRYACQUIRE {name} 2"));
    }
    let at = (5 + rng.index(8)).to_string();
    let byte = [rng.next() as u8];
    ok(con, &[b"SETRANGE", b"one-byte", at.as_bytes(), &byte]);
    let len = (rng.index(12)).to_string();
    ok(
        con,
        &[
            b"EVAL",
            b"redis.call('SET', KEYS[1], string.sub(redis.call('GET', KEYS[1]), 1, ARGV[1]))",
            b"1",
            b"one-cut",
            len.as_bytes(),
        ],
    );
    ok(con, &[b"SET", b"one-text", b"\xf5Lhello"]);
    ok(con, &[b"SET", b"one-gcra", b"1800000000206000"]);

    okl(con, "RATELIMIT.SETRATE pc-bad 5 1000 PER_CLIENT");
    ok(con, &[b"ZADD", b"{pc-bad}:permits:c1", past, b"\x05ab"]);
    okl(con, "SET {pc-bad}:value:c2 x1");
}

// ---- random commands ----------------------------------------------------------------------------

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
enum Cmd {
    SetRate,
    TryAcquire,
    Acquire,
    Allow,
    AllowAll,
    Config,
    Available,
    Peek,
    Release,
    Cancel,
    Delete,
    Expire,
    Persist,
    Debug,
    GcraAllow,
    Chaos,
    /// RATELIMIT.STATS and RATELIMIT.TOPREFUSED.
    Observe,
}

const WEIGHTS: [(Cmd, usize); 17] = [
    (Cmd::SetRate, 12),
    (Cmd::TryAcquire, 18),
    (Cmd::Acquire, 10),
    (Cmd::Allow, 8),
    (Cmd::AllowAll, 6),
    (Cmd::Config, 5),
    (Cmd::Available, 10),
    (Cmd::Peek, 6),
    (Cmd::Release, 10),
    (Cmd::Cancel, 6),
    (Cmd::Delete, 4),
    (Cmd::Expire, 6),
    (Cmd::Persist, 4),
    (Cmd::Debug, 7),
    (Cmd::GcraAllow, 6),
    (Cmd::Chaos, 8),
    (Cmd::Observe, 3),
];

struct Gen<'a> {
    rng: &'a mut Rng,
    odd: &'a [Vec<u8>],
}

impl Gen<'_> {
    fn key(&mut self) -> Vec<u8> {
        match self.rng.index(20) {
            0..=8 => self.rng.pick(&GOOD_NAMES).to_vec(),
            9..=16 => self.rng.pick(&CORRUPT_NAMES).to_vec(),
            17 | 18 => self.rng.pick(self.odd).clone(),
            _ => self.rng.bytes(6),
        }
    }

    fn client(&mut self) -> Vec<u8> {
        if self.rng.one_in(8) {
            self.rng.bytes(5)
        } else {
            self.rng.pick(&CLIENTS).to_vec()
        }
    }

    fn number(&mut self) -> Vec<u8> {
        match self.rng.index(10) {
            0..=5 => self.rng.pick(&SMALL).to_vec(),
            6..=8 => self.rng.pick(&WEIRD_NUMBERS).to_vec(),
            _ => {
                let n = self.rng.next() >> self.rng.index(64);
                if self.rng.one_in(3) {
                    format!("-{n}").into_bytes()
                } else {
                    n.to_string().into_bytes()
                }
            }
        }
    }

    fn from(&mut self, sane: &[&[u8]]) -> Vec<u8> {
        if self.rng.one_in(4) {
            self.number()
        } else {
            self.rng.pick(sane).to_vec()
        }
    }

    fn word(&mut self) -> Vec<u8> {
        match self.rng.index(4) {
            0 => self.rng.pick(&TOKENS).to_vec(),
            1 => self.number(),
            2 => self.key(),
            _ => self.rng.bytes(4),
        }
    }

    /// A TICKET: a few shared ones (so CANCELs meet grants and waiters), rarely a bad one.
    fn ticket(&mut self) -> Vec<u8> {
        match self.rng.index(12) {
            0 => Vec::new(),
            1 => vec![b't'; 65],
            2 => self.rng.bytes(64),
            _ => self.rng.pick(&[&b"t1"[..], b"t2", b"t3"]).to_vec(),
        }
    }

    /// `[CLIENT id]` half the time.
    fn client_option(&mut self, words: &mut Vec<Vec<u8>>) {
        if self.rng.one_in(2) {
            words.push(b"CLIENT".to_vec());
            words.push(self.client());
        }
    }

    /// `RATE rate interval [OVERALL | PER_CLIENT] [KEEPALIVE ms]`, sometimes malformed.
    fn rate_option(&mut self, words: &mut Vec<Vec<u8>>) {
        words.push(b"RATE".to_vec());
        words.push(self.from(&[b"1", b"3", b"10", b"0", b"-2"]));
        words.push(self.from(&[b"10", b"1000", b"60000", b"0", b"x"]));
        if self.rng.one_in(3) {
            words.push(self.from(&[b"PER_CLIENT", b"overall", b"per_client", b"ONEKEY"]));
        }
        if self.rng.one_in(3) {
            words.push(b"KEEPALIVE".to_vec());
            words.push(self.from(&[b"60000", b"1000", b"5", b"0"]));
        }
        if self.rng.one_in(3) {
            words.push(b"PRECISION".to_vec());
            words.push(self.from(&[b"1", b"10", b"100", b"0", b"x"]));
        }
    }

    fn command(&mut self) -> (Cmd, Vec<Vec<u8>>) {
        let total: usize = WEIGHTS.iter().map(|w| w.1).sum();
        let mut roll = self.rng.index(total);
        let cmd = WEIGHTS
            .iter()
            .find(|(_, w)| {
                if roll < *w {
                    true
                } else {
                    roll -= w;
                    false
                }
            })
            .map(|w| w.0)
            .expect("a command");
        let name: &[u8] = match cmd {
            Cmd::SetRate => b"RATELIMIT.SETRATE",
            Cmd::TryAcquire => b"RATELIMIT.TRYACQUIRE",
            Cmd::Acquire => b"RATELIMIT.ACQUIRE",
            Cmd::Allow => b"RATELIMIT.ALLOW",
            Cmd::AllowAll => b"RATELIMIT.ALLOWALL",
            Cmd::Config => b"RATELIMIT.CONFIG",
            Cmd::Available => b"RATELIMIT.AVAILABLE",
            Cmd::Peek => b"RATELIMIT.PEEK",
            Cmd::Release => b"RATELIMIT.RELEASE",
            Cmd::Cancel => b"RATELIMIT.CANCEL",
            Cmd::Delete => b"RATELIMIT.DELETE",
            Cmd::Expire => b"RATELIMIT.EXPIRE",
            Cmd::Persist => b"RATELIMIT.PERSIST",
            Cmd::Debug => b"RATELIMIT.DEBUG",
            Cmd::GcraAllow => b"RATELIMIT.GCRAALLOW",
            Cmd::Observe => [&b"RATELIMIT.STATS"[..], b"RATELIMIT.TOPREFUSED"][self.rng.index(2)],
            Cmd::Chaos => [
                &b"RATELIMIT.SETRATE"[..],
                b"RATELIMIT.TRYACQUIRE",
                b"RATELIMIT.CONFIG",
                b"RATELIMIT.AVAILABLE",
                b"RATELIMIT.RELEASE",
                b"RATELIMIT.DELETE",
                b"RATELIMIT.EXPIRE",
                b"RATELIMIT.PERSIST",
                b"RATELIMIT.DEBUG",
                b"ratelimit.tryacquire",
                b"RateLimit.SetRate",
            ][self.rng.index(11)],
        };
        let mut words = vec![name.to_vec()];
        match cmd {
            Cmd::SetRate => {
                words.push(self.key());
                words.push(self.from(&[b"1", b"2", b"3", b"5", b"10", b"4294967295"]));
                words.push(self.from(&[b"1", b"10", b"100", b"1000", b"60000", b"3153600000000"]));
                let mut options: Vec<Vec<Vec<u8>>> = Vec::new();
                match self.rng.index(4) {
                    0 => options.push(vec![b"OVERALL".to_vec()]),
                    1 => options.push(vec![b"PER_CLIENT".to_vec()]),
                    2 => options.push(vec![b"ONEKEY".to_vec()]),
                    _ => {}
                }
                if self.rng.one_in(4) {
                    let ms = self.from(&[b"0", b"3600000", b"86400000", b"3153600000000"]);
                    options.push(vec![b"KEEPALIVE".to_vec(), ms]);
                }
                if self.rng.one_in(4) {
                    let ms = self.from(&[b"1", b"10", b"100", b"0", b"99999999999999"]);
                    options.push(vec![b"PRECISION".to_vec(), ms]);
                }
                match self.rng.index(4) {
                    0 => options.push(vec![b"NX".to_vec()]),
                    1 => options.push(vec![b"XX".to_vec()]),
                    _ => {}
                }
                if self.rng.one_in(3) {
                    options.push(vec![b"KEEPSTATE".to_vec()]);
                }
                if self.rng.one_in(3) {
                    options.push(vec![b"CLIENT".to_vec(), self.client()]);
                }
                // Options in any order.
                for i in (1..options.len()).rev() {
                    let j = self.rng.index(i + 1);
                    options.swap(i, j);
                }
                words.extend(options.into_iter().flatten());
            }
            Cmd::TryAcquire | Cmd::Acquire | Cmd::Allow => {
                words.push(self.key());
                if self.rng.index(3) > 0 {
                    words.push(self.from(&[b"1", b"1", b"2", b"3", b"5"]));
                }
                if cmd == Cmd::Acquire && self.rng.index(3) > 0 {
                    words.push(b"TIMEOUT".to_vec());
                    words.push(self.from(&[b"0", b"1", b"3", b"10", b"25"]));
                }
                if cmd == Cmd::Acquire && self.rng.one_in(2) {
                    words.push(b"TICKET".to_vec());
                    words.push(self.ticket());
                }
                self.client_option(&mut words);
                if self.rng.one_in(3) {
                    self.rate_option(&mut words);
                }
            }
            Cmd::AllowAll => {
                let n = 1 + self.rng.index(3);
                words.push(if self.rng.one_in(15) {
                    self.from(&[b"0", b"4", b"-1", b"x", b"1025"])
                } else {
                    n.to_string().into_bytes()
                });
                for _ in 0..n {
                    words.push(self.key());
                }
                if self.rng.chance(50) {
                    words.push(b"PERMITS".to_vec());
                    words.push(self.from(&[b"1", b"2", b"3", b"0", b"99999999999"]));
                }
                self.client_option(&mut words);
            }
            Cmd::Config => words.push(self.key()),
            Cmd::Observe => {
                if self.rng.chance(60) {
                    words
                        .push(self.from(&[b"1", b"3", b"10", b"1024", b"0", b"-1", b"1025", b"x"]));
                }
                if self.rng.one_in(8) {
                    words.push(self.key());
                }
            }
            Cmd::Available | Cmd::Delete | Cmd::Persist => {
                words.push(self.key());
                self.client_option(&mut words);
            }
            Cmd::Peek => {
                words.push(self.key());
                if self.rng.one_in(2) {
                    words.push(self.from(&[b"1", b"2", b"3", b"1000", b"0"]));
                }
                self.client_option(&mut words);
            }
            Cmd::Release => {
                words.push(self.key());
                words.push(self.from(&[b"1", b"2", b"3", b"1000"]));
                self.client_option(&mut words);
            }
            Cmd::Cancel => {
                words.push(self.key());
                words.push(self.ticket());
                self.client_option(&mut words);
            }
            Cmd::Expire => {
                words.push(self.key());
                words.push(self.from(&[
                    b"3600000",
                    b"86400000",
                    b"0",
                    b"-1",
                    b"-100",
                    b"3153600000000",
                    b"-3153600000000",
                ]));
                for flag in [&b"NX"[..], b"XX", b"GT", b"LT"] {
                    if self.rng.one_in(5) {
                        words.push(flag.to_vec());
                    }
                }
                self.client_option(&mut words);
            }
            Cmd::Debug => match self.rng.index(8) {
                0..=4 => {
                    words.push(b"ADVANCE".to_vec());
                    words.push(self.from(&[b"0", b"1", b"10", b"100", b"999", b"1000", b"5000"]));
                }
                5 => {
                    words.push(b"SETCLOCK".to_vec());
                    words.push(self.number());
                }
                6 => {
                    words.push(self.rng.pick(&TOKENS).to_vec());
                    words.push(self.number());
                }
                _ => {
                    words.push(b"REALCLOCK".to_vec());
                    words.push(self.word()); // never the bare REALCLOCK: the clock stays frozen
                }
            },
            Cmd::GcraAllow => {
                words.push(self.key());
                words.push(self.from(&[b"0", b"1", b"5", b"10", b"4294967295"]));
                words.push(self.from(&[b"1", b"3", b"10", b"1000000"]));
                words.push(self.from(&[b"1", b"0.5", b"60", b"0.001", b"1e-7", b"86400"]));
                match self.rng.index(4) {
                    0 => {
                        words.push(b"TOKENS".to_vec());
                        words.push(self.from(&[b"0", b"1", b"2", b"-1", b"-100", b"1000"]));
                    }
                    1 => {
                        words.push(b"ATMOST".to_vec());
                        words.push(self.from(&[b"0", b"1", b"3", b"1000"]));
                    }
                    _ => {}
                }
                if self.rng.one_in(8) {
                    words[2 + self.rng.index(3)] = self.number();
                }
            }
            Cmd::Chaos => {
                for _ in 0..self.rng.index(8) {
                    let word = self.word();
                    words.push(word);
                }
            }
        }
        // Mutations: wrong arity, repeated and conflicting options, junk.
        if cmd != Cmd::Chaos && self.rng.one_in(6) {
            for _ in 0..=self.rng.index(2) {
                let at = 1 + self.rng.index(words.len());
                match self.rng.index(5) {
                    0 if words.len() > 1 => {
                        words.remove(at.min(words.len() - 1));
                    }
                    1 if words.len() > 1 => {
                        let copy = words[1 + self.rng.index(words.len() - 1)].clone();
                        words.insert(at, copy);
                    }
                    2 => {
                        let extra = self.word();
                        words.insert(at, extra);
                    }
                    3 => words.truncate(at),
                    _ => {
                        let token = self.rng.pick(&TOKENS).to_vec();
                        words.push(token);
                    }
                }
            }
        }
        // The debug clock must stay frozen (reproducible runs, no real-time wake-ups).
        if words.len() == 2
            && words[0].eq_ignore_ascii_case(b"RATELIMIT.DEBUG")
            && words[1].eq_ignore_ascii_case(b"REALCLOCK")
        {
            words.push(b"x".to_vec());
        }
        (cmd, words)
    }
}

// ---- the dataset, as the server sees it ---------------------------------------------------------

/// Every key with its DUMP and PEXPIRETIME in one round trip. With `normalize`, first pushes
/// every TTL under 10 minutes an hour further, so no key can expire between two snapshots (a
/// command that wrongly set a TTL still shows: its key's expiry differs from the one before).
const SNAPSHOT_LUA: &str = r#"
local keys = redis.call('KEYS', '*')
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local out = {}
for _, k in ipairs(keys) do
  local at = redis.call('PEXPIRETIME', k)
  if ARGV[1] == '1' and at >= 0 and at < now + 600000 then
    at = math.max(at, now) + 3600000
    redis.call('PEXPIREAT', k, at)
  end
  local d = redis.call('DUMP', k)
  if d then
    out[#out + 1] = k
    out[#out + 1] = d
    out[#out + 1] = at
  end
end
return out
"#;

type Dataset = Vec<(Vec<u8>, Vec<u8>, i64)>;

fn dataset(con: &mut Connection, sha: &str, normalize: bool) -> redis::RedisResult<Dataset> {
    let flat: Vec<Value> = redis::cmd("EVALSHA")
        .arg(sha)
        .arg(0)
        .arg(if normalize { "1" } else { "0" })
        .query(con)?;
    let mut out: Dataset = flat
        .chunks(3)
        .map(|c| match c {
            [Value::BulkString(k), Value::BulkString(d), Value::Int(at)] => {
                (k.clone(), d.clone(), *at)
            }
            other => panic!("snapshot entry {other:?}"),
        })
        .collect();
    out.sort();
    Ok(out)
}

fn diff(before: &Dataset, after: &Dataset) -> String {
    let b: BTreeMap<&[u8], (&[u8], i64)> = before
        .iter()
        .map(|(k, d, t)| (k.as_slice(), (d.as_slice(), *t)))
        .collect();
    let a: BTreeMap<&[u8], (&[u8], i64)> = after
        .iter()
        .map(|(k, d, t)| (k.as_slice(), (d.as_slice(), *t)))
        .collect();
    let mut out = String::new();
    for key in b
        .keys()
        .chain(a.keys())
        .collect::<std::collections::BTreeSet<_>>()
    {
        match (b.get(key), a.get(key)) {
            (Some(x), Some(y)) if x == y => {}
            (Some(x), Some(y)) if x.0 == y.0 => {
                let _ = write!(out, " {} ttl {}->{};", esc(key), x.1, y.1);
            }
            (Some(_), Some(_)) => {
                let _ = write!(out, " {} content changed;", esc(key));
            }
            (Some(x), None) => {
                let _ = write!(out, " {} deleted (its expiry was {});", esc(key), x.1);
            }
            (None, _) => {
                let _ = write!(out, " {} created;", esc(key));
            }
        }
    }
    out
}

fn esc(bytes: &[u8]) -> String {
    let mut out = String::new();
    for &b in bytes {
        if (0x21..0x7f).contains(&b) && b != b'\\' && b != b'"' {
            out.push(b as char);
        } else {
            let _ = write!(out, "\\x{b:02x}");
        }
    }
    format!("\"{out}\"")
}

fn show<W: AsRef<[u8]>>(words: &[W]) -> String {
    words
        .iter()
        .map(|w| esc(w.as_ref()))
        .collect::<Vec<_>>()
        .join(" ")
}

// ---- a raw connection for ACQUIREs that may block ---------------------------------------------

#[derive(Debug)]
enum Reply {
    Nil,
    Int(i64),
    Text(Vec<u8>),
    Error(String),
    Array(Vec<Reply>),
}

struct RawClient {
    stream: TcpStream,
    id: i64,
}

impl RawClient {
    fn connect(port: u16) -> RawClient {
        let stream = TcpStream::connect(("127.0.0.1", port)).expect("connect");
        let mut client = RawClient { stream, id: 0 };
        client.send(&[&b"CLIENT"[..], b"ID"]);
        match client.reply(HANG) {
            Some(Reply::Int(id)) => client.id = id,
            other => panic!("CLIENT ID: {other:?}"),
        }
        client
    }

    fn send<W: AsRef<[u8]>>(&mut self, words: &[W]) {
        let mut out = format!("*{}\r\n", words.len()).into_bytes();
        for w in words {
            let w = w.as_ref();
            out.extend(format!("${}\r\n", w.len()).into_bytes());
            out.extend_from_slice(w);
            out.extend_from_slice(b"\r\n");
        }
        self.stream.write_all(&out).expect("send");
    }

    /// The next reply, if one starts arriving within `wait`.
    fn reply(&mut self, wait: Duration) -> Option<Reply> {
        self.stream.set_read_timeout(Some(wait)).unwrap();
        let mut first = [0u8; 1];
        match self.stream.peek(&mut first) {
            Ok(0) => panic!("the server closed the connection"),
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                return None
            }
            Err(e) => panic!("read: {e}"),
        }
        self.stream.set_read_timeout(Some(HANG)).unwrap();
        // One reply is outstanding at a time, so a reader per reply never reads past it.
        let mut reader = BufReader::new(&self.stream);
        Some(parse(&mut reader).expect("a well-formed reply"))
    }
}

fn parse(r: &mut impl BufRead) -> io::Result<Reply> {
    let mut head = Vec::new();
    r.read_until(b'\n', &mut head)?;
    assert!(head.ends_with(b"\r\n"), "reply line {head:?}");
    head.truncate(head.len() - 2);
    let rest = String::from_utf8_lossy(&head[1..]).into_owned();
    Ok(match head[0] {
        b'+' => Reply::Text(head[1..].to_vec()),
        b'-' => Reply::Error(rest),
        b':' => Reply::Int(rest.parse().expect("integer")),
        b'$' => {
            let len: i64 = rest.parse().expect("length");
            if len < 0 {
                Reply::Nil
            } else {
                let mut body = vec![0u8; len as usize + 2];
                r.read_exact(&mut body)?;
                body.truncate(len as usize);
                Reply::Text(body)
            }
        }
        b'*' => {
            let len: i64 = rest.parse().expect("length");
            if len < 0 {
                Reply::Nil
            } else {
                let mut items = Vec::new();
                for _ in 0..len {
                    items.push(parse(r)?);
                }
                Reply::Array(items)
            }
        }
        other => panic!("unexpected reply type {other}"),
    })
}

// ---- the run ------------------------------------------------------------------------------------

#[derive(Default)]
struct Counts {
    commands: usize,
    by_command: BTreeMap<String, (usize, usize)>,
    errors: usize,
    compared: usize,
    in_multi: usize,
    in_lua: usize,
    blocked: usize,
    unblocked_timeout: usize,
    unblocked_error: usize,
    served_by_advance: usize,
    timed_out: usize,
    disconnected: usize,
    error_kinds: BTreeMap<String, usize>,
}

/// The first words of an error, without the quoted key names, to count kinds of errors.
fn error_kind(err: &str) -> String {
    let mut cut = err.find('\'').unwrap_or(err.len()).min(48);
    while !err.is_char_boundary(cut) {
        cut -= 1;
    }
    err[..cut].to_string()
}

/// What came back, as far as the checks care.
enum Outcome {
    Success(Value),
    /// A success whose reply is not checked.
    Unchecked,
    Failure(String),
}

fn value_of(reply: Reply) -> Outcome {
    match reply {
        Reply::Nil => Outcome::Success(Value::Nil),
        Reply::Int(n) => Outcome::Success(Value::Int(n)),
        Reply::Text(t) => Outcome::Success(Value::BulkString(t)),
        Reply::Error(e) => Outcome::Failure(e),
        Reply::Array(items) => {
            if let Some(e) = items.iter().find_map(|i| match i {
                Reply::Error(e) => Some(e.clone()),
                _ => None,
            }) {
                return Outcome::Failure(e);
            }
            Outcome::Success(Value::Array(vec![]))
        }
    }
}

/// Checks the shape of a successful reply; returns a problem if it is impossible.
fn check_success(words: &[Vec<u8>], value: &Value) -> Option<String> {
    let name = String::from_utf8_lossy(&words[0]).to_ascii_uppercase();
    let fine =
        match (name.as_str(), value) {
            ("RATELIMIT.TRYACQUIRE" | "RATELIMIT.ACQUIRE", Value::Nil) => true,
            ("RATELIMIT.TRYACQUIRE" | "RATELIMIT.ACQUIRE", Value::Int(n)) => *n >= 1,
            ("RATELIMIT.AVAILABLE", Value::Int(n)) => *n >= 0,
            ("RATELIMIT.ALLOW" | "RATELIMIT.ALLOWALL", Value::Array(fields)) => {
                allow_reply_is_sane(fields, name == "RATELIMIT.ALLOWALL")
            }
            // ALLOW's five fields, then the wait until the oldest logged permit frees.
            ("RATELIMIT.PEEK", Value::Array(fields)) => {
                fields.len() == 12
                    && allow_reply_is_sane(&fields[..10], false)
                    && fields[10] == Value::BulkString(b"oldest_after".to_vec())
                    && matches!(fields[11], Value::Int(n) if n >= 0)
            }
            ("RATELIMIT.RELEASE" | "RATELIMIT.CANCEL", Value::Int(n)) => *n >= 0,
            ("RATELIMIT.SETRATE" | "RATELIMIT.EXPIRE" | "RATELIMIT.PERSIST", Value::Int(n)) => {
                *n == 0 || *n == 1
            }
            ("RATELIMIT.DELETE", Value::Int(n)) => (0..=5).contains(n),
            ("RATELIMIT.CONFIG", Value::Nil | Value::Array(_)) => true,
            ("RATELIMIT.DEBUG", _) => true,
            ("RATELIMIT.GCRAALLOW", Value::Array(fields)) => gcraallow_reply_is_sane(words, fields),
            ("RATELIMIT.STATS", Value::Array(fields)) => fields.len() == 8,
            ("RATELIMIT.TOPREFUSED", Value::Array(pairs)) => pairs.len() % 2 == 0
                && pairs.chunks(2).all(
                    |p| matches!((&p[0], &p[1]), (Value::BulkString(_), Value::Int(n)) if *n >= 1),
                ),
            _ => false,
        };
    (!fine).then(|| format!("`{}` replied {value:?}", show(words)))
}

/// GCRAALLOW's five integers: the burst asked for; allowed with retry -1 (all of TOKENS n, at
/// most ATMOST n, 0 <= remaining <= burst) or limited (nothing taken, none left, a wait > 0);
/// reset_after >= 0.
fn gcraallow_reply_is_sane(words: &[Vec<u8>], fields: &[Value]) -> bool {
    let ints: Vec<i64> = fields
        .iter()
        .filter_map(|v| match v {
            Value::Int(n) => Some(*n),
            _ => None,
        })
        .collect();
    let number = |i: usize| {
        words
            .get(i)
            .and_then(|w| std::str::from_utf8(w).ok())
            .and_then(|t| t.parse::<i64>().ok())
    };
    let [allowed, burst, remaining, retry, reset] = ints[..] else {
        return false;
    };
    let take = words.get(5).map(|w| w.to_ascii_uppercase());
    let count = number(6).unwrap_or(1);
    let taken_fits = match take.as_deref() {
        Some(b"ATMOST") => (0..=count).contains(&allowed),
        _ => allowed == count,
    };
    fields.len() == 5
        && Some(burst) == number(2)
        && reset >= 0
        && if retry == -1 {
            taken_fits && (0..=burst).contains(&remaining)
        } else {
            allowed == 0 && remaining == 0 && retry > 0
        }
}

/// ALLOW's fields in order, each in its range: allowed 0/1, 0 <= remaining <= limit,
/// retry_after 0 exactly when allowed, reset_after >= 0; ALLOWALL's limited_by nil exactly when
/// allowed.
fn allow_reply_is_sane(fields: &[Value], all: bool) -> bool {
    let names = [
        "allowed",
        "limit",
        "remaining",
        "retry_after",
        "reset_after",
        "limited_by",
    ];
    let expected = if all { 6 } else { 5 };
    if fields.len() != expected * 2 {
        return false;
    }
    let int = |i: usize| match fields.get(i * 2 + 1) {
        Some(Value::Int(n)) => Some(*n),
        _ => None,
    };
    let named = names
        .iter()
        .take(expected)
        .enumerate()
        .all(|(i, n)| fields[i * 2] == Value::BulkString(n.as_bytes().to_vec()));
    let (Some(allowed), Some(limit), Some(remaining), Some(retry), Some(reset)) =
        (int(0), int(1), int(2), int(3), int(4))
    else {
        return false;
    };
    let limited_by_fits = !all || (allowed == 1) == (fields[11] == Value::Nil);
    named
        && (allowed == 0 || allowed == 1)
        && (0..=limit).contains(&remaining)
        && ((allowed == 1) == (retry == 0))
        && reset >= 0
        && limited_by_fits
}

struct Run {
    rng: Rng,
    seed: u64,
    server: Server,
    con: Connection,
    sha: String,
    acquirer: RawClient,
    counts: Counts,
    problems: Vec<String>,
    recent: VecDeque<String>,
}

impl Run {
    fn problem(&mut self, text: String) {
        eprintln!("PROBLEM (seed {:#x}): {text}", self.seed);
        if self.problems.len() < MAX_PROBLEMS {
            self.problems.push(text);
        }
    }

    /// Fails at once if the server is gone, with the commands that led there.
    fn expect_alive(&mut self, what: &str) {
        if !self.server.is_alive() {
            let log = self.server.log();
            let tail: Vec<&str> = log.lines().rev().take(40).collect();
            panic!(
                "the server died after {what} (seed {:#x}, command #{})\nlast commands:\n{}\n\
                 log tail:\n{}",
                self.seed,
                self.counts.commands,
                self.recent.iter().cloned().collect::<Vec<_>>().join("\n"),
                tail.into_iter().rev().collect::<Vec<_>>().join("\n")
            );
        }
    }

    fn snapshot(&mut self, normalize: bool, what: &str) -> Dataset {
        match dataset(&mut self.con, &self.sha, normalize) {
            Ok(d) => d,
            Err(e) => {
                self.expect_alive(what);
                panic!("snapshot after {what}: {e}");
            }
        }
    }

    fn remember(&mut self, text: String) {
        if self.recent.len() == 20 {
            self.recent.pop_front();
        }
        self.recent.push_back(text);
    }

    /// Runs one command on the main connection: directly, in MULTI, or from Lua.
    /// An ACQUIRE (`may_block`) goes only into MULTI or Lua here, where it cannot block.
    fn on_main(&mut self, words: &[Vec<u8>], may_block: bool) -> Outcome {
        let refs: Vec<&[u8]> = words.iter().map(Vec::as_slice).collect();
        let how = if may_block {
            self.rng.index(2)
        } else {
            self.rng.index(12)
        };
        match how {
            0 => {
                self.counts.in_multi += 1;
                let _: () = line(&mut self.con, "MULTI").expect("MULTI");
                let queued = run::<Value>(&mut self.con, &refs);
                let exec = line::<Value>(&mut self.con, "EXEC");
                match (queued, exec) {
                    (Err(e), _) => Outcome::Failure(error_line(&e)),
                    (_, Err(e)) => Outcome::Failure(error_line(&e)),
                    (Ok(_), Ok(Value::Array(mut replies))) if replies.len() == 1 => {
                        match replies.remove(0) {
                            Value::ServerError(e) => {
                                Outcome::Failure(error_line(&RedisError::from(e)))
                            }
                            v => Outcome::Success(v),
                        }
                    }
                    (Ok(_), Ok(other)) => panic!("EXEC replied {other:?}"),
                }
            }
            1 => {
                self.counts.in_lua += 1;
                let mut cmd = redis::cmd("EVAL");
                cmd.arg("return redis.pcall(unpack(ARGV))").arg(0);
                for w in &refs {
                    cmd.arg(*w);
                }
                match cmd.query::<Value>(&mut self.con) {
                    Ok(Value::ServerError(e)) => Outcome::Failure(error_line(&RedisError::from(e))),
                    // Lua turns integers into doubles: a large reply comes back rounded.
                    Ok(_) => Outcome::Unchecked,
                    Err(e) => Outcome::Failure(error_line(&e)),
                }
            }
            _ => match run::<Value>(&mut self.con, &refs) {
                Ok(Value::ServerError(e)) => Outcome::Failure(error_line(&RedisError::from(e))),
                Ok(v) => Outcome::Success(v),
                Err(e) => Outcome::Failure(error_line(&e)),
            },
        }
    }

    /// An ACQUIRE on the raw connection: if it blocks, it is unblocked (CLIENT UNBLOCK with
    /// TIMEOUT or ERROR), served (the clock advanced), or its client disconnects.
    /// Returns the outcome and whether a failure must have left the dataset unchanged.
    fn acquire(&mut self, words: &[Vec<u8>]) -> (Outcome, bool) {
        self.acquirer.send(words);
        if let Some(reply) = self.acquirer.reply(Duration::from_millis(3)) {
            return (value_of(reply), true);
        }
        let deadline = Instant::now() + HANG;
        let mut clean = true;
        let how = self.rng.index(8);
        let has_timeout = words.iter().any(|w| w.eq_ignore_ascii_case(b"TIMEOUT"));
        if has_timeout && how >= 3 {
            // Let its TIMEOUT (at most 25 ms when valid) run out.
            if let Some(reply) = self.acquirer.reply(Duration::from_millis(100)) {
                self.counts.timed_out += 1;
                return (value_of(reply), false);
            }
        }
        let mut advanced = false;
        loop {
            assert!(
                Instant::now() < deadline,
                "`{}` neither replied nor could be unblocked (seed {:#x})",
                show(words),
                self.seed
            );
            if how == 0 {
                // Hang up while blocked: the waiter must leave nothing behind.
                self.counts.disconnected += 1;
                let old = self.acquirer.id;
                self.acquirer = RawClient::connect(self.server.port);
                let gone = Instant::now() + HANG;
                loop {
                    let list: String =
                        line(&mut self.con, &format!("CLIENT LIST ID {old}")).unwrap_or_default();
                    if list.trim().is_empty() {
                        break;
                    }
                    assert!(Instant::now() < gone, "client {old} never went away");
                    std::thread::sleep(Duration::from_millis(1));
                }
                return (Outcome::Unchecked, false);
            }
            if how == 1 && !advanced {
                advanced = true;
                clean = false;
                let _: Value =
                    line(&mut self.con, "RATELIMIT.DEBUG ADVANCE 100000").expect("ADVANCE");
                if let Some(reply) = self.acquirer.reply(Duration::from_millis(50)) {
                    self.counts.served_by_advance += 1;
                    return (value_of(reply), false);
                }
                continue;
            }
            let error = how == 2;
            let id = self.acquirer.id.to_string();
            let unblocked: i64 = line(
                &mut self.con,
                &format!(
                    "CLIENT UNBLOCK {id} {}",
                    if error { "ERROR" } else { "TIMEOUT" }
                ),
            )
            .expect("CLIENT UNBLOCK");
            if unblocked == 1 {
                self.counts.blocked += 1;
                if error {
                    self.counts.unblocked_error += 1;
                    // Its first attempt may have pruned the log before it blocked.
                    clean = false;
                } else {
                    self.counts.unblocked_timeout += 1;
                }
            }
            let wait = if unblocked == 1 { 10_000 } else { 20 };
            if let Some(reply) = self.acquirer.reply(Duration::from_millis(wait)) {
                return (value_of(reply), clean);
            }
        }
    }
}

#[test]
fn random_hostile_commands_never_crash_and_failures_write_nothing() {
    let seed = std::env::var("RATELIMIT_HOSTILE_SEED")
        .ok()
        .and_then(|s| {
            s.strip_prefix("0x")
                .map_or_else(|| s.parse().ok(), |h| u64::from_str_radix(h, 16).ok())
        })
        .unwrap_or(DEFAULT_SEED)
        .max(1);
    println!("hostile: seed {seed:#x} (RATELIMIT_HOSTILE_SEED={seed:#x} replays it)");
    let server = Server::start();
    let mut con = server.conn();
    con.set_read_timeout(Some(HANG)).unwrap();
    let sha: String = redis::cmd("SCRIPT")
        .arg("LOAD")
        .arg(SNAPSHOT_LUA)
        .query(&mut con)
        .expect("SCRIPT LOAD");
    let acquirer = RawClient::connect(server.port);
    let mut run = Run {
        rng: Rng(seed),
        seed,
        server,
        con,
        sha,
        acquirer,
        counts: Counts::default(),
        problems: Vec::new(),
        recent: VecDeque::new(),
    };
    let odd: Vec<Vec<u8>> = (0..3)
        .map(|i| {
            let mut name = vec![b'\x80' + i, 0, b'\r', b'\n'];
            name.extend(run.rng.bytes(4));
            name
        })
        .collect();

    let started = Instant::now();
    let mut now = T0;
    let mut before = Dataset::new();
    let mut in_snapshots = Duration::ZERO;
    while run.counts.commands < COMMANDS {
        if run.counts.commands.is_multiple_of(EPOCH) {
            now += 10_000_000;
            plant(&mut run.con, &mut run.rng, now, &odd);
            before = run.snapshot(true, "planting");
        }
        let (cmd, words) = Gen {
            rng: &mut run.rng,
            odd: &odd,
        }
        .command();
        run.counts.commands += 1;
        let shown = show(&words);
        run.remember(shown.clone());
        let (outcome, must_be_clean) = if cmd == Cmd::Acquire && run.rng.index(4) > 0 {
            run.acquire(&words)
        } else {
            (run.on_main(&words, cmd == Cmd::Acquire), true)
        };
        run.expect_alive(&shown);
        // The state after this command is the state before the next one.
        let snapshot_started = Instant::now();
        let after = run.snapshot(true, &shown);
        in_snapshots += snapshot_started.elapsed();
        let entry = run.counts.by_command.entry(format!("{cmd:?}")).or_default();
        entry.0 += 1;
        match outcome {
            Outcome::Success(value) => {
                if let Some(p) = check_success(&words, &value) {
                    run.problem(p);
                }
            }
            Outcome::Unchecked => {}
            Outcome::Failure(err) => {
                entry.1 += 1;
                run.counts.errors += 1;
                *run.counts.error_kinds.entry(error_kind(&err)).or_default() += 1;
                if !(err.starts_with("ERR ")
                    || err.starts_with("WRONGTYPE ")
                    || err.starts_with("UNBLOCKED ")
                    || err.starts_with("EXECABORT "))
                {
                    run.problem(format!("`{shown}` failed with an odd error: {err}"));
                }
                if err.contains("panic") || err.contains("no reply for the blocked client") {
                    run.problem(format!("`{shown}` failed with: {err}"));
                }
                if must_be_clean {
                    run.counts.compared += 1;
                    if after != before {
                        let changes = diff(&before, &after);
                        run.problem(format!(
                            "`{shown}` failed with `{err}` but changed the dataset:{changes}"
                        ));
                    }
                }
            }
        }
        before = after;
    }
    let elapsed = started.elapsed();

    // The end: alive, answering, nobody left blocked, no panic in the log.
    run.expect_alive("the run");
    let pong: String = line(&mut run.con, "PING").expect("PING");
    assert_eq!(pong, "PONG");
    let info: String = line(&mut run.con, "INFO ratelimit").unwrap();
    assert!(info.contains("ratelimit_blocked_clients:0"), "{info}");
    let log = run.server.log();
    for bad in [
        "panicked",
        "panic",
        "RUST_BACKTRACE",
        "crashed by signal",
        "ASSERTION",
    ] {
        assert!(
            !log.contains(bad),
            "the server log mentions `{bad}`:\n{log}"
        );
    }

    let c = &run.counts;
    println!(
        "hostile: seed {seed:#x}: {} commands in {:.1}s ({:.1}s of it in snapshots; {} in MULTI, {} from Lua), {} errors, \
         {} failures compared before/after; ACQUIRE: {} unblocked (timeout {}, error {}), {} \
         served by ADVANCE, {} timed out, {} disconnected while blocked",
        c.commands,
        elapsed.as_secs_f64(),
        in_snapshots.as_secs_f64(),
        c.in_multi,
        c.in_lua,
        c.errors,
        c.compared,
        c.blocked,
        c.unblocked_timeout,
        c.unblocked_error,
        c.served_by_advance,
        c.timed_out,
        c.disconnected
    );
    for (name, (n, errors)) in &c.by_command {
        println!("hostile:   {name:<10} {n:>6} runs, {errors:>6} errors");
    }
    for (kind, n) in &c.error_kinds {
        println!("hostile:   {n:>6} x {kind}");
    }
    assert!(
        run.problems.is_empty(),
        "seed {seed:#x}: {} problem(s):\n{}",
        run.problems.len(),
        run.problems.join("\n")
    );
    // The run exercised what it claims to.
    assert!(c.compared > 1_000, "{} failures compared", c.compared);
    assert!(c.errors < c.commands, "every command failed");
    assert!(c.blocked > 0, "no ACQUIRE ever blocked");
}
