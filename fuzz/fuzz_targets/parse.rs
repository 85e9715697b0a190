//! Every argument parser and the permit-log member decoder on arbitrary bytes: none may panic
//! (a panic inside a command takes the whole Redis server down), and what they accept must be
//! in range.
//!
//! Input layout: the first byte is a separator; the rest, split on it, are the command's
//! arguments after its name (so any byte, NUL and CR/LF included, can appear in an argument).

#![no_main]

use libfuzzer_sys::fuzz_target;
use ratelimit::args::{self, Tokens, MAX_DURATION_MS, MAX_PERMITS};
use ratelimit::commands::{
    acquire, allow, allowall, available, cancel, config, debug, delete, expire, gcra, gcraallow,
    peek, persist, release, setrate, stats, throttle, toprefused, tryacquire,
};
use ratelimit::keyspace::{self, StateKeys};
use ratelimit::observe::{self, groups::Rule, refused::SpaceSaving};
use ratelimit::packed_log::PackedLog;
use ratelimit::sliding_log::{self, Reset};

fuzz_target!(|data: &[u8]| {
    let Some((&separator, rest)) = data.split_first() else {
        return;
    };
    let words: Vec<&[u8]> = rest.split(|&b| b == separator).collect();

    if let Ok(request) = setrate::parse(&words) {
        let change = &request.change;
        let config = &change.config;
        assert!((1..=config.interval).contains(&config.precision));
        assert!((1..=MAX_PERMITS).contains(&config.rate));
        assert!((1..=MAX_DURATION_MS).contains(&config.interval));
        assert!((0..=MAX_DURATION_MS).contains(&config.keep_alive));
        assert!(config.keep_alive == 0 || config.keep_alive >= config.interval);
        assert!(change.client.is_none_or(|c| !c.is_empty()));
        assert_eq!(request.key, words[0]);
    }
    if let Ok(request) = throttle::parse(&words) {
        assert_eq!(request.key, words[0]);
        // Any accepted request computes without panicking, at any clock and stored TAT.
        for (tat, now) in [
            (None, 0),
            (Some(0), i64::MAX / 2_000_000),
            (Some(i64::MAX), 1),
        ] {
            let _ = request.throttle.call(tat, now, request.quantity);
        }
    }
    if let Ok(request) = gcra::parse(&words) {
        assert!(request.tokens >= 1);
        for (tat, now) in [(None, 0), (Some(1), i64::MAX / 2_000), (Some(i64::MAX), 1)] {
            let _ = request.gcra.call(tat, now, request.tokens);
        }
    }
    if let Ok(request) = gcraallow::parse(&words) {
        assert_eq!(request.key, words[0]);
        if let ratelimit::gcra::allow::Take::AtMost(n) = request.take {
            assert!(n >= 0);
        }
        for (tat, now) in [(None, 0), (Some(1), i64::MAX / 2_000), (Some(i64::MAX), 1)] {
            if let Ok(outcome) = request.bucket.call(tat, now, request.take) {
                assert!(outcome.reset_after >= 0);
                assert!(outcome.remaining >= 0 && outcome.remaining <= outcome.burst);
            }
        }
    }
    // Whatever a key holds, reading it as a TAT never panics.
    let _ = gcraallow::stored_tat(rest);
    // Nor as a ONEKEY limiter's state: the whole input, and each argument.
    for bytes in std::iter::once(rest).chain(words.iter().copied()) {
        onekey_state(bytes);
    }
    let _ = args::parse_double(rest);
    let _ = stats::parse(&words);
    if let Ok(count) = toprefused::parse(&words) {
        assert!((1..=2 * observe::refused::CAPACITY).contains(&count));
    }
    // A group is a prefix of the name, whatever the separator and depth.
    if let [separator, names @ ..] = &words[..] {
        if observe::valid_separator(separator).is_ok() {
            let rule = Rule {
                separator: separator.to_vec(),
                depth: 1 + usize::from(separator[0] % 16),
            };
            let mut sketch = SpaceSaving::default();
            for name in names {
                assert!(name.starts_with(rule.group_of(name)));
                sketch.add(name);
            }
            let counted: u64 = sketch.counts().map(|(_, n)| n).sum();
            assert_eq!(counted, sketch.total());
        }
    }
    if let Ok(request) = tryacquire::parse(&words) {
        assert!(request.permits >= 1);
        assert!(request.client.is_none_or(|c| !c.is_empty()));
        assert_eq!(request.key, words[0]);
    }
    if let Ok(request) = acquire::parse(&words) {
        assert!(request.permits >= 1);
        assert!((0..=MAX_DURATION_MS).contains(&request.timeout_ms));
        assert!(request.client.is_none_or(|c| !c.is_empty()));
    }
    for create in [
        tryacquire::parse(&words).ok().and_then(|r| r.create),
        acquire::parse(&words).ok().and_then(|r| r.create),
        allow::parse(&words).ok().and_then(|r| r.create),
    ]
    .into_iter()
    .flatten()
    {
        assert!((1..=MAX_PERMITS).contains(&create.rate));
        assert!((1..=MAX_DURATION_MS).contains(&create.interval));
        assert!(create.keep_alive == 0 || create.keep_alive >= create.interval);
    }
    if let Ok(request) = allowall::parse(&words) {
        assert!(!request.keys.is_empty());
        assert!(request.keys.len() as i64 <= allowall::MAX_KEYS);
        assert!(request.permits >= 1);
        let mut distinct = request.keys.clone();
        distinct.sort_unstable();
        distinct.dedup();
        assert_eq!(distinct.len(), request.keys.len(), "a key listed twice");
    }
    // Every command's parser: `key [CLIENT id]`, RELEASE, CONFIG and DEBUG too.
    for target in [
        available::parse(&words),
        delete::parse(&words),
        persist::parse(&words),
    ]
    .into_iter()
    .flatten()
    {
        assert_eq!(target.key, words[0]);
        assert!(target.client.is_none_or(|c| !c.is_empty()));
    }
    if let Ok(request) = peek::parse(&words) {
        assert!(request.permits >= 1);
        assert!(request.client.is_none_or(|c| !c.is_empty()));
        assert_eq!(request.key, words[0]);
    }
    if let Ok(request) = release::parse(&words) {
        assert!(request.permits >= 1);
        assert!(request.client.is_none_or(|c| !c.is_empty()));
    }
    if let Ok(request) = cancel::parse(&words) {
        assert_eq!(request.key, words[0]);
        assert!((1..=64).contains(&request.ticket.len()));
        assert!(request.client.is_none_or(|c| !c.is_empty()));
    }
    if let Ok(request) = config::parse(&words) {
        assert_eq!(words.len(), 1);
        assert_eq!(request.key, words[0]);
    }
    if let Ok(debug::Request::SetClock(ms) | debug::Request::Advance(ms)) = debug::parse(&words) {
        assert!(ms >= 0);
    }
    if let Ok(request) = expire::parse(&words) {
        assert!((-MAX_DURATION_MS..=MAX_DURATION_MS).contains(&request.ms));
        let when = request.when;
        assert!(!(when.nx && (when.xx || when.gt || when.lt)));
        assert!(!(when.gt && when.lt));
        let _ = when.allows(None, request.ms);
        let _ = when.allows(Some(i64::MIN), i64::MAX);
    }

    // The building blocks, on each argument.
    let mut tokens = Tokens::new(&words);
    while tokens.next_if_numeric().is_some() || tokens.next_arg().is_some() {}
    let _ = Tokens::new(&words).value_of_option("OPTION");
    for word in &words {
        // Strict decimal: whatever is accepted is the canonical spelling of its value.
        if let Some(n) = args::parse_i64(word) {
            assert_eq!(n.to_string().as_bytes(), *word);
        }
        if let Ok(n) = args::integer(word, "n", -5, 5) {
            assert!((-5..=5).contains(&n));
        }
        if let Ok(p) = args::permits(word) {
            assert!(p >= 1);
        }
        let _ = args::client_id(word);
        let _ = args::is_keyword(word, "KEEPSTATE");

        // The member decoder: accepts exactly the members whose length fits a Redisson layout
        // (checked here in u128, so no sum can wrap), reads their last 4 bytes, and a split
        // re-encoded from the id decodes again.
        let fits = fits_a_layout(word);
        match keyspace::decode_member(word) {
            Ok(member) => {
                assert!(fits, "{word:?} accepted");
                let tail: [u8; 4] = word[word.len() - 4..].try_into().expect("4 bytes");
                assert_eq!(member.permits, u32::from_le_bytes(tail));
                if let Some(again) = keyspace::reencode_member(member.id, 7) {
                    assert_eq!(keyspace::decode_member(&again).map(|m| m.permits), Ok(7));
                }
            }
            Err(_) => assert!(!fits, "{word:?} rejected"),
        }

        // Key names derived from arbitrary names and client ids.
        let overall = StateKeys::overall(word);
        let client = StateKeys::client(word, word);
        let _ = keyspace::hash_slot(&overall.value);
        let _ = keyspace::hash_slot(&client.permits);
        assert!(keyspace::hash_slot(word) < 16384);
    }
});

/// A ONEKEY state decodes only from bytes that start with its magic, in range, and reads back
/// the same once encoded; the sliding log's plans run over it at any clock, and what they
/// leave encodes and decodes again.
fn onekey_state(bytes: &[u8]) {
    let Ok(log) = PackedLog::decode(bytes) else {
        return;
    };
    assert!(PackedLog::is_packed(bytes));
    let config = *log.config();
    assert!((0..=MAX_PERMITS).contains(&config.rate));
    assert!((1..=MAX_DURATION_MS).contains(&config.interval));
    assert!((1..=config.interval).contains(&config.precision));
    assert!(
        config.keep_alive == 0 || (config.interval..=MAX_DURATION_MS).contains(&config.keep_alive)
    );
    assert_eq!(PackedLog::decode(&log.encode()).as_ref(), Ok(&log));
    for now in [0, 1_800_000_000_000, MAX_DURATION_MS, i64::MAX / 4] {
        let mut next = log.clone();
        match sliding_log::try_acquire(&config, None, &next, now, 1, Reset::Wanted) {
            Ok(plan) => next.apply_acquire(&plan),
            Err(never) => match never {},
        }
        match sliding_log::release(&config, None, &next, now, 2) {
            Ok(plan) => next.apply_release(&plan),
            Err(never) => match never {},
        }
        assert_eq!(PackedLog::decode(&next.encode()).as_ref(), Ok(&next));
    }
}

/// The keyspace contract's rule, written independently of the decoder: 8 bytes (`fI`),
/// `1 + byte0 + 4` (`Bc0I`) or `8 + u64le(bytes 0..8) + 4` (`Lc0I`).
fn fits_a_layout(word: &[u8]) -> bool {
    let len = word.len() as u128;
    let bc0i = word.first().is_some_and(|&b| 1 + u128::from(b) + 4 == len);
    let lc0i = word.len() >= 8 && {
        let mut prefix = [0u8; 8];
        prefix.copy_from_slice(&word[..8]);
        8 + u128::from(u64::from_le_bytes(prefix)) + 4 == len
    };
    len == 8 || bc0i || lc0i
}
