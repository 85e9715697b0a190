//! One file per command: parse the arguments into a request, call the store, shape the reply.

pub mod acquire;
pub mod allow;
pub mod allowall;
pub mod available;
pub mod cancel;
pub mod config;
pub mod debug;
pub mod delete;
pub mod doc;
pub mod expire;
pub mod gcra;
pub mod gcraallow;
pub mod peek;
pub mod persist;
pub mod release;
pub mod setrate;
pub mod stats;
pub mod throttle;
pub mod toprefused;
pub mod tryacquire;

use std::ffi::CStr;

use redis_module::{Context, RedisValue};

use crate::args::{self, Tokens, MAX_DURATION_MS, MAX_PERMITS};
use crate::error::Error;
use crate::ffi::names::Names;
use crate::ffi::reply;
use crate::packed_log;
use crate::sliding_log::{Config, Mode, Outcome};
use crate::store::Verdict;

/// The reply of TRYACQUIRE (and ACQUIRE): nil when acquired, else the wait in ms.
fn outcome_reply(outcome: Outcome) -> RedisValue {
    match outcome {
        Outcome::Acquired => RedisValue::Null,
        Outcome::Wait(ms) => RedisValue::Integer(ms),
    }
}

/// A field of the maps ALLOW, ALLOWALL and PEEK reply with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Field {
    Allowed,
    Limit,
    Remaining,
    RetryAfter,
    ResetAfter,
    LimitedBy,
    OldestAfter,
}

impl Field {
    /// Every field, in the order of their discriminants (which index [`FIELD_NAMES`]).
    const ALL: [Field; 7] = [
        Field::Allowed,
        Field::Limit,
        Field::Remaining,
        Field::RetryAfter,
        Field::ResetAfter,
        Field::LimitedBy,
        Field::OldestAfter,
    ];

    const fn name(self) -> &'static CStr {
        match self {
            Field::Allowed => c"allowed",
            Field::Limit => c"limit",
            Field::Remaining => c"remaining",
            Field::RetryAfter => c"retry_after",
            Field::ResetAfter => c"reset_after",
            Field::LimitedBy => c"limited_by",
            Field::OldestAfter => c"oldest_after",
        }
    }

    /// Its name, as an element of the reply.
    fn reply(self, ctx: &Context) {
        FIELD_NAMES.reply(ctx, self as usize);
    }
}

/// The fields' names, made at load ([`Names`]): written on every ALLOW and PEEK.
pub(crate) static FIELD_NAMES: Names<7> = Names::new({
    let mut names = [c""; 7];
    let mut i = 0;
    while i < names.len() {
        names[i] = Field::ALL[i].name();
        i += 1;
    }
    names
});

/// Replies a verdict as ALLOW does: a map (a flat array in RESP2) in the documented order,
/// which a sorted map type would not keep; with `limited_by` for ALLOWALL.
fn reply_verdict(ctx: &Context, verdict: &Verdict, limited_by: Option<Option<&[u8]>>) {
    let (allowed, retry_after) = match verdict.outcome {
        Outcome::Acquired => (1, 0),
        Outcome::Wait(ms) => (0, ms),
    };
    let fields = if limited_by.is_some() { 6 } else { 5 };
    reply::map(ctx, fields);
    for (field, value) in [
        (Field::Allowed, allowed),
        (Field::Limit, verdict.limit),
        (Field::Remaining, verdict.remaining),
        (Field::RetryAfter, retry_after),
        (Field::ResetAfter, verdict.reset_after),
    ] {
        field.reply(ctx);
        reply::integer(ctx, value);
    }
    if let Some(key) = limited_by {
        Field::LimitedBy.reply(ctx);
        match key {
            Some(key) => reply::bulk(ctx, key),
            None => reply::null(ctx),
        }
    }
}

/// Parses the trailing `[CLIENT id]` that most commands take; anything else is a syntax error.
fn client_option<'a>(tokens: &mut Tokens<'a>) -> Result<Option<&'a [u8]>, Error> {
    let mut client = None;
    while let Some(token) = tokens.next_arg() {
        if args::is_keyword(token, "CLIENT") {
            let id = args::client_id(tokens.value_of_option("CLIENT")?)?;
            args::set_once(&mut client, id, "CLIENT")?;
        } else {
            return Err(Error::unknown_option(token));
        }
    }
    Ok(client)
}

/// `key [CLIENT id]`: what AVAILABLE, DELETE and PERSIST take.
#[derive(Debug, PartialEq, Eq)]
pub struct Target<'a> {
    pub key: &'a [u8],
    pub client: Option<&'a [u8]>,
}

pub fn parse_target<'a>(args: &'a [&'a [u8]]) -> Result<Target<'a>, Error> {
    let mut tokens = Tokens::new(args);
    let key = tokens.next_arg().ok_or(Error::WrongArity)?;
    let client = client_option(&mut tokens)?;
    Ok(Target { key, client })
}

/// The options of the acquiring commands (TRYACQUIRE, ACQUIRE, ALLOW), after `key [permits]`:
/// `[CLIENT id] [RATE rate interval [OVERALL | PER_CLIENT | ONEKEY] [KEEPALIVE ms] [PRECISION ms]]`, and
/// `[TIMEOUT ms]`
/// where the command takes it.
/// A parsing step of each command's request, not a request itself.
#[derive(Debug, Default, PartialEq, Eq)]
struct AcquireOptions<'a> {
    client: Option<&'a [u8]>,
    create: Option<Config>,
    timeout: Option<i64>,
    ticket: Option<&'a [u8]>,
}

fn acquire_options<'a>(tokens: &mut Tokens<'a>, blocks: bool) -> Result<AcquireOptions<'a>, Error> {
    let mut options = AcquireOptions::default();
    while let Some(token) = tokens.next_arg() {
        if args::is_keyword(token, "CLIENT") {
            let id = args::client_id(tokens.value_of_option("CLIENT")?)?;
            args::set_once(&mut options.client, id, "CLIENT")?;
        } else if args::is_keyword(token, "RATE") {
            args::set_once(&mut options.create, rate_option(tokens)?, "RATE")?;
        } else if blocks && args::is_keyword(token, "TIMEOUT") {
            let ms = args::integer(
                tokens.value_of_option("TIMEOUT")?,
                "TIMEOUT",
                0,
                MAX_DURATION_MS,
            )?;
            args::set_once(&mut options.timeout, ms, "TIMEOUT")?;
        } else if blocks && args::is_keyword(token, "TICKET") {
            let ticket = crate::tickets::parse(tokens.value_of_option("TICKET")?)?;
            args::set_once(&mut options.ticket, ticket, "TICKET")?;
        } else {
            return Err(Error::unknown_option(token));
        }
    }
    Ok(options)
}

/// `RATE rate interval [OVERALL | PER_CLIENT | ONEKEY] [KEEPALIVE ms] [PRECISION ms]`, after the `RATE`
/// keyword: exactly what SETRATE takes, ending at the first token that is not one of its options.
fn rate_option(tokens: &mut Tokens<'_>) -> Result<Config, Error> {
    let (Some(rate), Some(interval)) = (tokens.next_arg(), tokens.next_arg()) else {
        return Err(Error::incomplete_option("RATE", "a rate and an interval"));
    };
    let mut options = ConfigOptions::new(rate, interval)?;
    while options.take(tokens)? {}
    options.config()
}

/// A limiter's configuration as SETRATE and the `RATE` option give it: `rate interval`, then
/// `[OVERALL | PER_CLIENT | ONEKEY] [KEEPALIVE ms] [PRECISION ms]` in any order, each at most once.
pub(crate) struct ConfigOptions {
    rate: i64,
    interval: i64,
    mode: Option<(Mode, &'static str)>,
    keep_alive: Option<i64>,
    precision: Option<i64>,
}

impl ConfigOptions {
    /// Starts from the rate and the interval, each checked and named in its error.
    pub(crate) fn new(rate: &[u8], interval: &[u8]) -> Result<Self, Error> {
        Ok(ConfigOptions {
            rate: args::integer(rate, "rate", 1, MAX_PERMITS)?,
            interval: args::integer(interval, "interval", 1, MAX_DURATION_MS)?,
            mode: None,
            keep_alive: None,
            precision: None,
        })
    }

    /// Takes the next token, and its value, if it is one of the options: true if it was. A
    /// token that is not one is left for the caller.
    pub(crate) fn take(&mut self, tokens: &mut Tokens<'_>) -> Result<bool, Error> {
        let Some(token) = tokens.peek() else {
            return Ok(false);
        };
        if args::is_keyword(token, "OVERALL") {
            args::set_one_of(&mut self.mode, Mode::Overall, "OVERALL")?;
        } else if args::is_keyword(token, "PER_CLIENT") {
            args::set_one_of(&mut self.mode, Mode::PerClient, "PER_CLIENT")?;
        } else if args::is_keyword(token, "ONEKEY") {
            args::set_one_of(&mut self.mode, Mode::OneKey, "ONEKEY")?;
        } else if args::is_keyword(token, "KEEPALIVE") {
            tokens.next_arg();
            let value = tokens.value_of_option("KEEPALIVE")?;
            let ms = args::integer(value, "KEEPALIVE", 0, MAX_DURATION_MS)?;
            args::set_once(&mut self.keep_alive, ms, "KEEPALIVE")?;
            return Ok(true);
        } else if args::is_keyword(token, "PRECISION") {
            tokens.next_arg();
            let value = tokens.value_of_option("PRECISION")?;
            let ms = args::integer(value, "PRECISION", 1, self.interval)?;
            args::set_once(&mut self.precision, ms, "PRECISION")?;
            return Ok(true);
        } else {
            return Ok(false);
        }
        tokens.next_arg();
        Ok(true)
    }

    /// The configuration: OVERALL, no keep-alive and a precision of 1 unless given (for
    /// ONEKEY, a sixtieth of the interval: [`packed_log::default_precision`]); a
    /// keep-alive, if any, at least the interval (a shorter one would expire the keys of a
    /// limiter whose permits still count).
    pub(crate) fn config(self) -> Result<Config, Error> {
        let keep_alive = self.keep_alive.unwrap_or(0);
        if keep_alive != 0 && keep_alive < self.interval {
            return Err(Error::KeepAliveBelowInterval);
        }
        let mode = self.mode.map_or(Mode::Overall, |(mode, _)| mode);
        let default_precision = match mode {
            Mode::OneKey => packed_log::default_precision(self.interval),
            Mode::Overall | Mode::PerClient => 1,
        };
        let config = Config {
            rate: self.rate,
            interval: self.interval,
            mode,
            keep_alive,
            precision: self.precision.unwrap_or(default_precision),
        };
        if mode == Mode::OneKey && !packed_log::PackedLog::bounded(&config) {
            return Err(Error::OneKeyTooFine {
                max: packed_log::MAX_ENTRIES,
            });
        }
        Ok(config)
    }
}

/// Counts a GCRA drop-in's call in `INFO ratelimit`: limited is a refusal. A call that asks for
/// no tokens (a peek, 0) or gives them back (negative) decides nothing and is not counted.
pub(crate) fn count_gcra(key: &[u8], tokens: i64, limited: bool, limit: i64, remaining: i64) {
    if tokens <= 0 {
        return;
    }
    crate::stats::decided(
        key,
        if limited {
            crate::stats::Decision::Refused
        } else {
            crate::stats::Decision::Granted { limit, remaining }
        },
    );
}

/// An array of integers, replied straight into the client's buffer (the same in RESP2 and
/// RESP3): the GCRA commands' five numbers, with nothing allocated for them.
pub(crate) fn reply_integers(ctx: &Context, numbers: &[i64]) {
    reply::array(ctx, numbers.len());
    for &n in numbers {
        reply::integer(ctx, n);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_field_indexes_its_own_name() {
        for (i, field) in Field::ALL.into_iter().enumerate() {
            assert_eq!(field as usize, i, "{field:?} out of order in Field::ALL");
            assert_eq!(FIELD_NAMES.text(i), Some(field.name()));
        }
        assert_eq!(FIELD_NAMES.text(Field::ALL.len()), None);
    }

    fn options(args: &[&'static [u8]]) -> Result<AcquireOptions<'static>, Error> {
        let args: &'static [&'static [u8]] = Box::leak(args.to_vec().into_boxed_slice());
        acquire_options(&mut Tokens::new(args), true)
    }

    #[test]
    fn rate_creates_with_the_setrate_defaults() {
        let parsed = options(&[b"RATE", b"10", b"1000"]).unwrap();
        assert_eq!(
            parsed.create,
            Some(Config {
                rate: 10,
                interval: 1000,
                mode: Mode::Overall,
                keep_alive: 0,
                precision: 1
            })
        );
        let parsed = options(&[
            b"rate",
            b"5",
            b"60000",
            b"per_client",
            b"keepalive",
            b"60000",
            b"CLIENT",
            b"c",
            b"TIMEOUT",
            b"7",
        ])
        .unwrap();
        let create = parsed.create.unwrap();
        assert_eq!((create.mode, create.keep_alive), (Mode::PerClient, 60000));
        assert_eq!((parsed.client, parsed.timeout), (Some(&b"c"[..]), Some(7)));
    }

    #[test]
    fn a_onekey_log_is_bounded_by_its_rate_or_its_buckets() {
        let precision =
            |args: &[&'static [u8]]| options(args).map(|o| o.create.map(|c| c.precision));
        // The default precision: 60 buckets; a small rate: as few entries, whatever the buckets.
        assert_eq!(
            precision(&[b"RATE", b"1000000", b"60000", b"ONEKEY"]),
            Ok(Some(1000))
        );
        assert_eq!(
            precision(&[b"RATE", b"4096", b"3600000", b"ONEKEY", b"PRECISION", b"1"]),
            Ok(Some(1))
        );
        assert_eq!(
            precision(&[b"RATE", b"1000000", b"4096", b"ONEKEY", b"PRECISION", b"1"]),
            Ok(Some(1))
        );
        let too_fine = Err(Error::OneKeyTooFine { max: 4096 });
        assert_eq!(
            precision(&[b"RATE", b"4097", b"4097", b"ONEKEY", b"PRECISION", b"1"]),
            too_fine
        );
        assert_eq!(
            precision(&[
                b"RATE",
                b"1000000",
                b"60000",
                b"ONEKEY",
                b"PRECISION",
                b"14"
            ]),
            too_fine
        );
        assert_eq!(
            precision(&[
                b"RATE",
                b"1000000",
                b"60000",
                b"ONEKEY",
                b"PRECISION",
                b"15"
            ]),
            Ok(Some(15))
        );
        // The three-key form's log is a zset, read in O(log N): no bound.
        assert_eq!(
            precision(&[b"RATE", b"1000000", b"60000", b"PRECISION", b"1"]),
            Ok(Some(1))
        );
    }

    #[test]
    fn rate_is_validated_like_setrate() {
        assert_eq!(
            options(&[b"RATE", b"10"]),
            Err(Error::incomplete_option("RATE", "a rate and an interval"))
        );
        assert!(matches!(
            options(&[b"RATE", b"0", b"1000"]),
            Err(Error::Number { arg: "rate", .. })
        ));
        assert!(matches!(
            options(&[b"RATE", b"1", b"x"]),
            Err(Error::Number {
                arg: "interval",
                ..
            })
        ));
        assert_eq!(
            options(&[b"RATE", b"1", b"1000", b"KEEPALIVE", b"10"]),
            Err(Error::KeepAliveBelowInterval)
        );
        assert_eq!(
            options(&[b"RATE", b"1", b"1000", b"PER_CLIENT", b"OVERALL"]),
            Err(Error::conflicting_options("PER_CLIENT", "OVERALL"))
        );
        assert_eq!(
            options(&[b"RATE", b"1", b"1000", b"RATE", b"1", b"1000"]),
            Err(Error::repeated_option("RATE"))
        );
        assert_eq!(
            options(&[b"RATE", b"1", b"1000", b"NX"]),
            Err(Error::unknown_option(b"NX"))
        );
        let no_timeout: &'static [&'static [u8]] = &[b"TIMEOUT", b"1"];
        assert_eq!(
            acquire_options(&mut Tokens::new(no_timeout), false),
            Err(Error::unknown_option(b"TIMEOUT"))
        );
    }

    #[test]
    fn client_option_parses_once() {
        let ok: [&[u8]; 2] = [b"client", b"id-1"];
        assert_eq!(client_option(&mut Tokens::new(&ok)), Ok(Some(&b"id-1"[..])));
        let repeated: [&[u8]; 4] = [b"CLIENT", b"a", b"CLIENT", b"b"];
        assert_eq!(
            client_option(&mut Tokens::new(&repeated)),
            Err(Error::repeated_option("CLIENT"))
        );
        let missing: [&[u8]; 1] = [b"CLIENT"];
        assert_eq!(
            client_option(&mut Tokens::new(&missing)),
            Err(Error::incomplete_option("CLIENT", "a value"))
        );
        let empty: [&[u8]; 2] = [b"CLIENT", b""];
        assert_eq!(
            client_option(&mut Tokens::new(&empty)),
            Err(Error::EmptyClient)
        );
        let unknown: [&[u8]; 1] = [b"FOO"];
        assert_eq!(
            client_option(&mut Tokens::new(&unknown)),
            Err(Error::unknown_option(b"FOO"))
        );
    }
}
