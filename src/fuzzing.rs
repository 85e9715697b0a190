//! The fuzz targets' one way into the module (fuzz/, built with `--cfg fuzzing` only): every
//! command's parser, and the argument helpers they share, on arbitrary arguments; and scripts of
//! whole commands run by the store on an in-memory dataset. The parsers
//! live beside their commands' replies (a file per command), so they are reached through this
//! entry rather than through public modules; the pure parts are fuzzed from `ratelimit-core`.

use crate::args::{self, Tokens, MAX_DURATION_MS, MAX_PERMITS};
use crate::commands::{
    acquire, allow, allowall, available, cancel, config, debug, delete, expire, gcra, gcraallow,
    peek, persist, release, setrate, stats, throttle, toprefused, tryacquire,
};
use crate::observe;

/// Runs every command's parser on `words` (a command's arguments after its name) and panics if
/// any panics or accepts something out of range: inside a command, a panic takes the whole Redis
/// server down.
pub fn parse_commands(words: &[&[u8]]) {
    if let Ok(request) = setrate::parse(words) {
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
    if let Ok(request) = throttle::parse(words) {
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
    if let Ok(request) = gcra::parse(words) {
        assert!(request.tokens >= 1);
        for (tat, now) in [(None, 0), (Some(1), i64::MAX / 2_000), (Some(i64::MAX), 1)] {
            let _ = request.gcra.call(tat, now, request.tokens);
        }
    }
    if let Ok(request) = gcraallow::parse(words) {
        assert_eq!(request.key, words[0]);
        if let crate::gcra::allow::Take::AtMost(n) = request.take {
            assert!(n >= 0);
        }
        for (tat, now) in [(None, 0), (Some(1), i64::MAX / 2_000), (Some(i64::MAX), 1)] {
            if let Ok(outcome) = request.bucket.call(tat, now, request.take) {
                assert!(outcome.reset_after >= 0);
                assert!(outcome.remaining >= 0 && outcome.remaining <= outcome.burst);
            }
        }
    }
    let _ = stats::parse(words);
    if let Ok(count) = toprefused::parse(words) {
        assert!((1..=2 * observe::refused::CAPACITY).contains(&count));
    }
    if let Ok(request) = tryacquire::parse(words) {
        assert!(request.permits >= 1);
        assert!(request.client.is_none_or(|c| !c.is_empty()));
        assert_eq!(request.key, words[0]);
    }
    if let Ok(request) = acquire::parse(words) {
        assert!(request.permits >= 1);
        assert!((0..=MAX_DURATION_MS).contains(&request.timeout_ms));
        assert!(request.client.is_none_or(|c| !c.is_empty()));
    }
    for create in [
        tryacquire::parse(words).ok().and_then(|r| r.create),
        acquire::parse(words).ok().and_then(|r| r.create),
        allow::parse(words).ok().and_then(|r| r.create),
    ]
    .into_iter()
    .flatten()
    {
        assert!((1..=MAX_PERMITS).contains(&create.rate));
        assert!((1..=MAX_DURATION_MS).contains(&create.interval));
        assert!(create.keep_alive == 0 || create.keep_alive >= create.interval);
    }
    if let Ok(request) = allowall::parse(words) {
        assert!(!request.keys.is_empty());
        assert!(request.keys.len() as i64 <= allowall::MAX_KEYS);
        assert!(request.permits >= 1);
        let mut distinct = request.keys.clone();
        distinct.sort_unstable();
        distinct.dedup();
        assert_eq!(distinct.len(), request.keys.len(), "a key listed twice");
    }
    // Every command's parser: `key [CLIENT id]`, RELEASE, CANCEL, CONFIG and DEBUG too.
    for target in [
        available::parse(words),
        delete::parse(words),
        persist::parse(words),
    ]
    .into_iter()
    .flatten()
    {
        assert_eq!(target.key, words[0]);
        assert!(target.client.is_none_or(|c| !c.is_empty()));
    }
    if let Ok(request) = peek::parse(words) {
        // `0` asks for nothing; any other count is a permit count.
        if let peek::Ask::Permits(permits) = request.ask {
            assert!(permits >= 1);
        }
        assert!(request.client.is_none_or(|c| !c.is_empty()));
        assert_eq!(request.key, words[0]);
    }
    if let Ok(request) = release::parse(words) {
        assert!(request.permits >= 1);
        assert!(request.client.is_none_or(|c| !c.is_empty()));
    }
    if let Ok(request) = cancel::parse(words) {
        assert_eq!(request.key, words[0]);
        assert!((1..=64).contains(&request.ticket.len()));
        assert!(request.client.is_none_or(|c| !c.is_empty()));
    }
    if let Ok(request) = config::parse(words) {
        assert_eq!(words.len(), 1);
        assert_eq!(request.key, words[0]);
    }
    if let Ok(debug::Request::SetClock(ms) | debug::Request::Advance(ms)) = debug::parse(words) {
        assert!(ms >= 0);
    }
    if let Ok(request) = expire::parse(words) {
        assert!((-MAX_DURATION_MS..=MAX_DURATION_MS).contains(&request.ms));
        let when = request.when;
        assert!(!(when.nx && (when.xx || when.gt || when.lt)));
        assert!(!(when.gt && when.lt));
        let _ = when.allows(None, request.ms);
        let _ = when.allows(Some(i64::MIN), i64::MAX);
    }

    // The helpers the parsers share, on each argument.
    let mut tokens = Tokens::new(words);
    while tokens.next_if_numeric().is_some() || tokens.next_arg().is_some() {}
    let _ = Tokens::new(words).value_of_option("OPTION");
    for word in words {
        if let Ok(n) = args::integer(word, "n", -5, 5) {
            assert!((-5..=5).contains(&n));
        }
        if let Ok(p) = args::permits(word) {
            assert!(p >= 1);
        }
        let _ = args::client_id(word);
        let _ = args::is_keyword(word, "KEEPSTATE");
        // Whatever a key holds, reading it as a TAT never panics.
        let _ = gcraallow::stored_tat(word);
    }
}

/// Runs a script of commands through the store on an in-memory dataset (`replay`): none
/// may panic, and a limiter no one else wrote never holds more than its rate.
pub fn replay(script: &[u8]) {
    let _ = crate::replay::replay(script);
}
