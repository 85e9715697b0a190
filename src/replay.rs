//! Replaying a script of commands on an in-memory dataset: each parsed by its command's own
//! parser, then run by the store's job for it (CANCEL's give-back included), with foreign
//! writes and a moving clock between them. What the store fuzz target drives; none may panic,
//! and an untouched limiter never admits more than its rate.
//!
//! Script layout: the first byte separates a command's words, the second separates commands;
//! each command's first byte picks it, the rest are its words.

use std::collections::{BTreeMap, HashMap};
use std::ops::ControlFlow;

use crate::commands::{acquire, cancel, parse_target, peek, release, setrate, tryacquire};
use crate::key::{Effect, Read, Write};
use crate::keyspace::StateKeys;
use crate::packed_log::PackedLog;
use crate::sliding_log::{Order, PermitLog, Reset, Span};
use crate::store::memory::{Memory, Value};
use crate::store::{Acquisition, Logged, OpenKey, Turn, Verdict};

/// A start on the module's debug clock's usual epoch.
const START: i64 = 1_767_225_600_000;

/// What a script did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Tally {
    pub granted: i64,
    pub refused: usize,
    pub given_back: i64,
    pub released: i64,
    /// Grants after which the limiter's log was summed from its keys and found within its rate.
    pub checked: usize,
}

/// Runs `script` (see the module's doc) on an empty dataset.
pub fn replay(script: &[u8]) -> Tally {
    let [word_separator, command_separator, rest @ ..] = script else {
        return Tally::default();
    };
    let mut run = Run {
        memory: Memory::at(START),
        now: START,
        tickets: HashMap::new(),
        tampered: Vec::new(),
        tally: Tally::default(),
    };
    for command in rest.split(|b| b == command_separator) {
        let Some((&pick, words)) = command.split_first() else {
            continue;
        };
        let words: Vec<&[u8]> = words.split(|b| b == word_separator).collect();
        run.command(pick, &words);
    }
    run.tally
}

/// A ticket as the ticket table keys it: the limiter, the client, the ticket.
type Ticket = (Vec<u8>, Option<Vec<u8>>, Vec<u8>);

struct Run {
    memory: Memory,
    now: i64,
    /// ACQUIRE's grants by limiter, client and ticket, as the ticket table keeps them.
    tickets: HashMap<Ticket, Logged>,
    /// The keys written by anything but the module's own acquiring (a client's raw write, a
    /// SETRATE keeping its state under a new rate): a limiter whose name one of them contains
    /// (itself, `{name}:permits`, ...) may then hold more than its rate.
    tampered: Vec<Vec<u8>>,
    tally: Tally,
}

impl Run {
    fn command(&mut self, pick: u8, words: &[&[u8]]) {
        self.memory.set_now(self.now);
        match pick % 11 {
            0 => self.set_rate(words),
            1 => self.try_acquire(words, Reset::NotWanted),
            2 => self.try_acquire(words, Reset::Wanted),
            3 => self.acquire(words),
            4 => self.cancel(words),
            5 => self.release(words),
            6 => self.peek(words),
            7 => self.available(words),
            8 => self.delete(words),
            9 => self.foreign_write(words),
            _ => self.advance(words),
        }
    }

    fn set_rate(&mut self, words: &[&[u8]]) {
        let Ok(request) = setrate::parse(words) else {
            return;
        };
        if request.change.keep_state {
            self.tampered.push(request.key.to_vec());
        }
        if let Ok(limiter) = self.memory.limiter::<Write>(request.key) {
            if let Ok(reply) = limiter.set_rate(&request.change, self.now) {
                assert!(reply == 0 || reply == 1);
            }
        }
    }

    fn try_acquire(&mut self, words: &[&[u8]], reset: Reset) {
        let Ok(request) = tryacquire::parse(words) else {
            return;
        };
        let acquisition = Acquisition {
            permits: request.permits,
            turn: Turn::BehindWaiters,
            queued: None,
            reset,
            now: self.now,
        };
        let _ = self.decide(
            request.key,
            request.create.as_ref(),
            request.client,
            acquisition,
        );
    }

    /// ACQUIRE as its first attempt runs it: granted, or the wait a timeout would reply.
    fn acquire(&mut self, words: &[&[u8]]) {
        let Ok(request) = acquire::parse(words) else {
            return;
        };
        let acquisition = Acquisition {
            permits: request.permits,
            turn: Turn::Queueing,
            queued: None,
            reset: Reset::NotWanted,
            now: self.now,
        };
        let verdict = self.decide(
            request.key,
            request.create.as_ref(),
            request.client,
            acquisition,
        );
        match (verdict, request.ticket) {
            (
                Some(Verdict {
                    logged: Some(logged),
                    ..
                }),
                Some(ticket),
            ) => {
                let held = (
                    request.key.to_vec(),
                    request.client.map(<[u8]>::to_vec),
                    ticket.to_vec(),
                );
                self.tickets.insert(held, logged);
            }
            (Some(_), _) => {}
            (None, _) => {
                let Ok(limiter) = self.memory.limiter::<Read>(request.key) else {
                    return;
                };
                if let Ok(resolved) = limiter.resolve_existing(request.client) {
                    if let Ok(wait) = resolved.wait_hint(request.permits, 0, self.now) {
                        assert!(wait >= 1, "a wait hint of {wait}");
                    }
                }
            }
        }
    }

    /// Resolves and acquires; the verdict, None if refused or failed.
    fn decide(
        &mut self,
        key: &[u8],
        create: Option<&crate::sliding_log::Config>,
        client: Option<&[u8]>,
        acquisition: Acquisition,
    ) -> Option<Verdict> {
        let limiter = self.memory.limiter::<Write>(key).ok()?;
        let resolved = limiter
            .resolve_for(create, client, acquisition.permits)
            .ok()?;
        let verdict = limiter.acquire(&resolved, acquisition).ok()?;
        assert!((0..=verdict.limit.max(0)).contains(&verdict.remaining));
        assert!(verdict.reset_after >= 0);
        let Some(logged) = verdict.logged else {
            assert!(!matches!(
                verdict.outcome,
                crate::sliding_log::Outcome::Acquired
            ));
            self.tally.refused += 1;
            return None;
        };
        self.tally.granted += i64::from(logged.entry.permits);
        assert_eq!(logged.entry.permits, acquisition.permits);
        if client.is_none() && !self.is_tampered(key) {
            let live = self.live_permits(key);
            assert!(
                live <= verdict.limit,
                "{live} permits live in a window of {}",
                verdict.limit
            );
            self.tally.checked += 1;
        }
        Some(verdict)
    }

    /// Whether a key holding `limiter`'s name was written by other than its acquisitions.
    fn is_tampered(&self, limiter: &[u8]) -> bool {
        self.tampered.iter().any(|written| {
            limiter.is_empty() || written.windows(limiter.len()).any(|part| part == limiter)
        })
    }

    /// The permits logged in the window of the limiter `key`'s OVERALL state, summed from what
    /// the dataset holds (its zset or its ONEKEY string), not from the store's own arithmetic.
    fn live_permits(&self, key: &[u8]) -> i64 {
        match self.memory.get(key) {
            Some(Value::String(bytes)) => {
                let Ok(log) = PackedLog::decode(&bytes) else {
                    return 0;
                };
                let cutoff = self.now.saturating_sub(log.config().interval);
                let mut live = 0;
                let _ = log.scan(Span::After(cutoff), Order::OldestFirst, &mut |entry| {
                    live += i64::from(entry.permits);
                    ControlFlow::Continue(())
                });
                live
            }
            Some(Value::Hash(hash)) => {
                let interval = hash
                    .get(&b"interval"[..])
                    .and_then(|bytes| crate::args::parse_i64(bytes))
                    .unwrap_or(1);
                let cutoff = self.now.saturating_sub(interval);
                let permits = StateKeys::overall(key).permits;
                let Some(Value::ZSet(members)) = self.memory.get(&permits) else {
                    return 0;
                };
                members
                    .iter()
                    .filter(|(score, _)| *score > cutoff as f64)
                    .filter_map(|(_, member)| crate::keyspace::decode_member(member).ok())
                    .map(|member| i64::from(member.permits))
                    .sum()
            }
            _ => 0,
        }
    }

    fn cancel(&mut self, words: &[&[u8]]) {
        let Ok(request) = cancel::parse(words) else {
            return;
        };
        let held = (
            request.key.to_vec(),
            request.client.map(<[u8]>::to_vec),
            request.ticket.to_vec(),
        );
        let Some(logged) = self.tickets.remove(&held) else {
            return;
        };
        let Ok(limiter) = self.memory.limiter::<Write>(request.key) else {
            return;
        };
        let Ok(resolved) = limiter.resolve_existing(request.client) else {
            return;
        };
        if let Ok(given) = limiter.give_back(&resolved, logged.entry, logged.member, self.now) {
            assert!((0..=i64::from(logged.entry.permits)).contains(&given));
            self.tally.given_back += given;
        }
    }

    fn release(&mut self, words: &[&[u8]]) {
        let Ok(request) = release::parse(words) else {
            return;
        };
        let Ok(limiter) = self.memory.limiter::<Write>(request.key) else {
            return;
        };
        if let Ok(released) = limiter.release(request.client, request.permits, self.now) {
            assert!((0..=i64::from(request.permits)).contains(&released));
            self.tally.released += released;
        }
    }

    fn peek(&mut self, words: &[&[u8]]) {
        let Ok(request) = peek::parse(words) else {
            return;
        };
        let Ok(limiter) = self.memory.limiter::<Read>(request.key) else {
            return;
        };
        let Ok(resolved) = limiter.resolve_existing(request.client) else {
            return;
        };
        let peeked = match request.ask {
            peek::Ask::Nothing => limiter.look(&resolved, None, self.now),
            peek::Ask::Permits(permits) => {
                if resolved.configuration().check_permits(permits).is_err() {
                    return;
                }
                let acquisition = Acquisition {
                    permits,
                    turn: Turn::BehindWaiters,
                    queued: None,
                    reset: Reset::Wanted,
                    now: self.now,
                };
                limiter.peek(&resolved, acquisition)
            }
        };
        if let Ok(peeked) = peeked {
            assert!(peeked.oldest_after >= 0);
            assert_eq!(peeked.verdict.logged, None);
        }
    }

    fn available(&mut self, words: &[&[u8]]) {
        let Ok(target) = parse_target(words) else {
            return;
        };
        let Ok(limiter) = self.memory.limiter::<Read>(target.key) else {
            return;
        };
        if let Ok(resolved) = limiter.resolve_existing(target.client) {
            if let Ok(available) = resolved.available(0, self.now) {
                assert!(available >= 0);
            }
        }
    }

    fn delete(&mut self, words: &[&[u8]]) {
        let Ok(target) = parse_target(words) else {
            return;
        };
        let Ok(limiter) = self.memory.limiter::<Write>(target.key) else {
            return;
        };
        let _ = limiter.for_each_key(target.client, |key| key.apply(Effect::Unlink));
    }

    /// A client's raw write: `key kind bytes [bytes]`, kind picking a string, a hash field, a
    /// zset member (scored by the clock) or a value of another type.
    fn foreign_write(&mut self, words: &[&[u8]]) {
        let [key, kind, rest @ ..] = words else {
            return;
        };
        self.tampered.push(key.to_vec());
        let first = rest.first().copied().unwrap_or_default();
        let second = rest.get(1).copied().unwrap_or_default();
        let value = match kind.first().copied().unwrap_or(0) % 4 {
            0 => Value::String(first.to_vec()),
            1 => {
                let mut hash = match self.memory.get(key) {
                    Some(Value::Hash(hash)) => hash,
                    _ => BTreeMap::new(),
                };
                hash.insert(first.to_vec(), second.to_vec());
                Value::Hash(hash)
            }
            2 => {
                let mut members = match self.memory.get(key) {
                    Some(Value::ZSet(members)) => members,
                    _ => Vec::new(),
                };
                let offset = i64::from(second.first().copied().unwrap_or(0)) * 10;
                members.retain(|(_, member)| member != first);
                members.push(((self.now - offset) as f64, first.to_vec()));
                members.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
                Value::ZSet(members)
            }
            _ => Value::Other,
        };
        self.memory.put(key, value);
    }

    /// Moves the clock by up to a day of milliseconds, written in digits.
    fn advance(&mut self, words: &[&[u8]]) {
        let ms = words
            .first()
            .and_then(|word| crate::args::parse_i64(word))
            .filter(|ms| (0..=86_400_000).contains(ms));
        self.now += ms.unwrap_or(0);
    }
}

#[cfg(test)]
mod tests {
    use super::replay;

    /// A script of commands: words separated by b' ', commands by b'\n'.
    fn script(lines: &[&str]) -> Vec<u8> {
        let mut bytes = vec![b' ', b'\n'];
        bytes.extend(lines.join("\n").bytes());
        bytes
    }

    #[test]
    fn a_script_of_every_command_runs() {
        // Command bytes: 0 SETRATE, 1 TRYACQUIRE, 2 ALLOW, 3 ACQUIRE, 4 CANCEL, 5 RELEASE,
        // 6 PEEK, 7 AVAILABLE, 8 DELETE, 9 a foreign write, 10 the clock (here 21, as 10 is b'\n').
        let lines = [
            "\u{0}a 5 1000",
            "\u{1}a 3",
            "\u{3}a 2 TICKET t1",
            "\u{3}a 1 TICKET t2",
            "\u{4}a t1",
            "\u{2}a 4",
            "\u{5}a 1",
            "\u{6}a 2",
            "\u{6}a 0",
            "\u{7}a",
            "\u{15}1000",
            "\u{1}o 2 RATE 4 1000 ONEKEY",
            "\u{3}o 2 TICKET t3",
            "\u{4}o t3",
            "\u{0}a 2 1000 KEEPSTATE",
            "\u{9}{a}:permits \u{2} junk",
            "\u{1}a",
            "\u{9}o \u{0} garbage",
            "\u{1}o",
            "\u{8}a",
            "\u{8}o",
        ];
        // Granted: a 3 and 2, o 2 and 2, then a 1 once its window moved (the junk member
        // neither counts nor breaks the grant). Refused: a 1 while a 2+3 hold the rate of 5,
        // a 4 with 2 left. Given back: t1's 2 and t3's 2.
        let tally = replay(&script(&lines));
        let expected = super::Tally {
            granted: 10,
            refused: 2,
            given_back: 4,
            released: 1,
            checked: 4,
        };
        assert_eq!(tally, expected);
    }

    /// A random script: mostly well-formed commands on a few limiters (both forms, tickets,
    /// clients, rate changes, foreign writes, the clock), some with odd words mixed in. What a
    /// minute of the fuzz target reaches from its seed, in a run `cargo test` (and so CI)
    /// affords; `replay` itself checks that no untouched limiter admits more than its rate.
    fn random_script(rng: &mut impl rand::Rng) -> Vec<u8> {
        const NAMES: [&str; 5] = ["a", "b", "o", "{a}:permits", "{a}:value"];
        const ODD: [&str; 8] = ["0", "-1", "4294967296", "x", "RATE", "NX", "CLIENT", ""];
        let mut lines = Vec::new();
        for _ in 0..rng.random_range(1..60) {
            let name = NAMES[rng.random_range(0..NAMES.len())];
            let n = [1, 1, 2, 3, 5][rng.random_range(0..5)];
            let ticket = format!("TICKET t{}", rng.random_range(0..4));
            let client = if rng.random_bool(0.2) {
                " CLIENT c1"
            } else {
                ""
            };
            let form = ["", " ONEKEY", " PER_CLIENT", " OVERALL"][rng.random_range(0..4)];
            let rate = format!("RATE {} {}{form}", rng.random_range(1..6), 1000);
            let (pick, words) = match rng.random_range(0..11) {
                0 => (0, format!("{name} {} 1000{form}", rng.random_range(1..6))),
                1 => (1, format!("{name} {n} {rate}{client}")),
                2 => (2, format!("{name} {n} {rate}{client}")),
                3 => (3, format!("{name} {n} {ticket}{client}")),
                4 => (4, format!("{name} t{}{client}", rng.random_range(0..4))),
                5 => (5, format!("{name} {n}{client}")),
                6 => (6, format!("{name} {}", rng.random_range(0..3))),
                7 => (7, name.to_string()),
                8 => (8, name.to_string()),
                9 => (9, format!("{name} {} junk", rng.random_range(0..5))),
                _ => (
                    21,
                    format!("{}", [1, 10, 250, 999, 1000][rng.random_range(0..5)]),
                ),
            };
            let mut words: Vec<String> = words.split(' ').map(str::to_string).collect();
            if rng.random_bool(0.1) {
                let at = rng.random_range(0..=words.len());
                words.insert(at, ODD[rng.random_range(0..ODD.len())].to_string());
            }
            lines.push(format!("{}{}", char::from(pick), words.join(" ")));
        }
        let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
        script(&lines)
    }

    #[test]
    fn random_scripts_find_no_panic_and_no_over_admission() {
        use rand::SeedableRng;
        let mut rng = rand::rngs::StdRng::seed_from_u64(0x5eed);
        let mut total = super::Tally::default();
        for _ in 0..3_000 {
            let tally = replay(&random_script(&mut rng));
            total.granted += tally.granted;
            total.refused += tally.refused;
            total.given_back += tally.given_back;
            total.released += tally.released;
            total.checked += tally.checked;
        }
        // The scripts reach every outcome, not only parse errors.
        assert!(total.granted > 5_000, "{total:?}");
        assert!(total.refused > 300, "{total:?}");
        assert!(total.given_back > 10, "{total:?}");
        assert!(total.released > 300, "{total:?}");
        // Thousands of grants were checked against their limiter's rate, summed from its keys
        // (those of limiters no foreign write or SETRATE KEEPSTATE touched).
        assert!(total.checked > 2_000, "{total:?}");
    }

    #[test]
    fn an_untouched_limiter_is_checked_against_its_rate() {
        // Grants up to the rate, then refusals; the check after each grant reads the log.
        let mut lines = vec!["\u{1}a 1 RATE 3 1000"];
        lines.extend(["\u{1}a"; 6]);
        let tally = replay(&script(&lines));
        assert_eq!((tally.granted, tally.refused), (3, 4));
        // Arbitrary bytes: no panic.
        for seed in 0..200u32 {
            let bytes: Vec<u8> = (0..64u32)
                .map(|i| (seed.wrapping_mul(2_654_435_761).wrapping_add(i * 40_503) >> 7) as u8)
                .collect();
            replay(&bytes);
        }
    }
}
