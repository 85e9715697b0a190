//! Every command's parser (through the module's one fuzzing entry), the number grammar, the
//! permit-log member decoder, the ONEKEY state's decoder (and the state it keeps decoded) and the
//! observability sketches (from `ratelimit-core`) on arbitrary bytes: none may panic (a panic
//! inside a command takes the whole Redis server down), and what they accept must be in range.
//!
//! Input layout: the first byte is a separator; the rest, split on it, are the command's
//! arguments after its name (so any byte, NUL and CR/LF included, can appear in an argument).

#![no_main]

use libfuzzer_sys::fuzz_target;
use ratelimit_core::keyspace::{self, StateKeys};
use ratelimit_core::last_decoded;
use ratelimit_core::number::{self, MAX_DURATION_MS, MAX_PERMITS};
use ratelimit_core::observe::{groups::Rule, refused::SpaceSaving};
use ratelimit_core::packed_log::PackedLog;
use ratelimit_core::sliding_log::{self, Reset};

fuzz_target!(|data: &[u8]| {
    let Some((&separator, rest)) = data.split_first() else {
        return;
    };
    let words: Vec<&[u8]> = rest.split(|&b| b == separator).collect();

    // Every command's parser, CANCEL's included, and the helpers they share.
    ratelimit::fuzzing::parse_commands(&words);

    // Whatever a key holds, reading it as a ONEKEY limiter's state never panics: the whole
    // input, and each argument.
    for bytes in std::iter::once(rest).chain(words.iter().copied()) {
        onekey_state(bytes);
    }
    let _ = number::parse_double(rest);
    // A group is a prefix of the name, whatever the separator and depth.
    if let [separator, names @ ..] = &words[..] {
        if !separator.is_empty() {
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
    // The building blocks, on each argument.
    for word in &words {
        // Strict decimal: whatever is accepted is the canonical spelling of its value.
        if let Some(n) = number::parse_i64(word) {
            assert_eq!(n.to_string().as_bytes(), *word);
        }
        let _ = number::parse_i64_lenient(word);
        let _ = number::parse_double(word);

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
    // The state kept answers only its own bytes: through it, the same as decoding, when the
    // bytes are seen, kept and copied (inputs in turn replace it).
    for _ in 0..3 {
        assert_eq!(last_decoded::decode(bytes), PackedLog::decode(bytes));
    }
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
