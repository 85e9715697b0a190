//! `RATELIMIT.GCRAALLOW key burst tokens_per_period period [TOKENS count | ATMOST count]`:
//! go-redis/redis_rate's `AllowN` and `AllowAtMost` in one command, on `GCRA`'s key (the TAT in
//! microseconds), replying `[allowed, burst, remaining, retry_after_us, reset_after_us]`. What
//! `GCRA`'s reply cannot say (microsecond times, a peek, a refund, the at-most form, a burst of
//! 0, the wait of a request above the burst) without changing `GCRA`, whose replies are Redis's.
//! A key redis_rate's own script wrote (float seconds since 2017) is read, so a service can
//! switch while its limits are in flight.

use redis_module::{Context, RedisResult, RedisValue};

use super::doc::{Arg, ArgType, Doc, Keys, KEY, UPDATE};
use crate::args::{self, is_keyword, parse_double, parse_i64};
use crate::clock;
use crate::error::Error;
use crate::gcra::allow::{Bucket, Overflow, Take};
use crate::tat::TatKey;

pub const DOC: Doc = Doc {
    name: c"ratelimit.gcraallow",
    summary: c"go-redis/redis_rate's GCRA: takes count tokens (TOKENS: exactly, 0 peeks, negative gives back; ATMOST: as many as there are) from a bucket of burst tokens refilled tokens_per_period every period seconds; replies allowed, burst, remaining, retry_after and reset_after in microseconds.",
    complexity: c"O(1)",
    arity: -5,
    flags: c"write deny-oom fast",
    acl_categories: c"write fast",
    key: Keys::First(UPDATE),
    args: &[
        KEY,
        Arg::new(c"burst", ArgType::Integer),
        Arg::new(c"tokens-per-period", ArgType::Integer),
        Arg::new(c"period", ArgType::Double),
        Arg::new(
            c"take",
            ArgType::OneOf(&[
                Arg::new(c"count", ArgType::Integer).after(c"TOKENS"),
                Arg::new(c"most", ArgType::Integer).after(c"ATMOST"),
            ]),
        )
        .optional(),
    ],
};

const PERIOD: &str = "period must be a number of seconds above 0 and below 1e12";
const OVERFLOW: &str =
    "burst, tokens_per_period, period and the count overflow 64-bit microseconds";

/// 2017-01-01T00:00:00Z, the epoch of redis_rate's script, in µs since the Unix epoch.
const REDIS_RATE_EPOCH_US: i64 = 1_483_228_800_000_000;
/// A stored integer below this (1970-01-12 in µs) is not a µs TAT: redis_rate's seconds.
const MIN_TAT_US: i64 = 1_000_000_000_000;

#[derive(Debug, PartialEq)]
pub struct Request<'a> {
    pub key: &'a [u8],
    pub bucket: Bucket,
    pub take: Take,
}

pub fn parse<'a>(args: &'a [&'a [u8]]) -> Result<Request<'a>, Error> {
    let (key, burst, per_period, period, rest) = match args {
        [key, b, t, p, rest @ ..] if rest.len() <= 2 => (*key, *b, *t, *p, rest),
        _ => return Err(Error::WrongArity),
    };
    let burst = args::integer(burst, "burst", 0, i64::MAX)?;
    let per_period = args::integer(per_period, "tokens_per_period", 1, i64::MAX)?;
    let period = parse_double(period)
        .filter(|p| *p > 0.0 && *p < 1e12)
        .ok_or(Error::Message(PERIOD))?;
    let take = match rest {
        [] => Take::Exactly(1),
        [word, n] if is_keyword(word, "TOKENS") => {
            Take::Exactly(args::integer(n, "TOKENS", i64::MIN, i64::MAX)?)
        }
        [word, n] if is_keyword(word, "ATMOST") => {
            Take::AtMost(args::integer(n, "ATMOST", 0, i64::MAX)?)
        }
        [word] if is_keyword(word, "TOKENS") => {
            return Err(Error::incomplete_option("TOKENS", "a value"))
        }
        [word] if is_keyword(word, "ATMOST") => {
            return Err(Error::incomplete_option("ATMOST", "a value"))
        }
        [word, ..] => return Err(Error::unknown_option(word)),
    };
    let bucket = Bucket::new(burst, per_period, period).map_err(overflow)?;
    Ok(Request { key, bucket, take })
}

fn overflow(_: Overflow) -> Error {
    Error::Message(OVERFLOW)
}

/// The stored TAT in µs: `GCRA`'s integer microseconds, or redis_rate's float seconds since
/// 2017 (`tostring` of a Lua number: `311345678.12346`, or an integer when it has no fraction).
pub fn stored_tat(bytes: &[u8]) -> Option<i64> {
    if let Some(us) = parse_i64(bytes).filter(|us| *us >= MIN_TAT_US) {
        return Some(us);
    }
    let text = std::str::from_utf8(bytes).ok()?;
    if !text
        .bytes()
        .all(|b| b.is_ascii_digit() || b"+-.eE".contains(&b))
    {
        return None;
    }
    let seconds: f64 = text
        .parse()
        .ok()
        .filter(|s: &f64| s.is_finite() && *s > 0.0)?;
    // Far beyond any date (1e11 s is year 5186): not a time.
    if seconds >= 1e11 {
        return None;
    }
    Some(REDIS_RATE_EPOCH_US + (seconds * 1e6).round() as i64)
}

pub fn run(ctx: &Context, args: &[&[u8]]) -> RedisResult {
    let request = parse(args)?;
    let now = clock::now_ms();
    let key = TatKey::open(ctx, request.key);
    let tat = key.read(clock::is_frozen().then_some(now), |bytes| {
        stored_tat(bytes).ok_or_else(|| {
            Error::corrupt(
                request.key,
                "not a GCRA TAT (microseconds) nor redis_rate's (seconds since 2017)",
            )
        })
    })?;
    let outcome = request
        .bucket
        .call(tat, now, request.take)
        .map_err(overflow)?;
    key.write(outcome.write);
    let asked = match request.take {
        Take::Exactly(n) | Take::AtMost(n) => n,
    };
    super::count_gcra(
        request.key,
        asked,
        outcome.allowed == 0,
        outcome.burst,
        outcome.remaining,
    );
    super::reply_integers(ctx, &outcome.reply());
    Ok(RedisValue::NoReply)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error(args: &[&[u8]]) -> String {
        match parse(args) {
            Err(e) => e.to_string(),
            Ok(r) => panic!("parsed {r:?}"),
        }
    }

    #[test]
    fn arguments() {
        let r = parse(&[b"k", b"10", b"10", b"1"]).unwrap();
        assert_eq!((r.key, r.take), (&b"k"[..], Take::Exactly(1)));
        assert_eq!(r.bucket, Bucket::new(10, 10, 1.0).unwrap());
        let r = parse(&[b"k", b"0", b"1", b"0.001", b"tokens", b"-3"]).unwrap();
        assert_eq!(r.take, Take::Exactly(-3));
        let r = parse(&[b"k", b"5", b"1", b"60", b"AtMost", b"0"]).unwrap();
        assert_eq!(r.take, Take::AtMost(0));
        assert_eq!(
            error(&[b"k", b"-1", b"1", b"1"]),
            "ERR burst must be an integer between 0 and 9223372036854775807"
        );
        assert_eq!(
            error(&[b"k", b"1", b"0", b"1"]),
            "ERR tokens_per_period must be an integer between 1 and 9223372036854775807"
        );
        for period in [&b"0"[..], b"-1", b"1e12", b"inf", b"nan", b"x", b""] {
            assert_eq!(error(&[b"k", b"1", b"1", period]), format!("ERR {PERIOD}"));
        }
        assert_eq!(
            error(&[b"k", b"1", b"1", b"1", b"ATMOST", b"-1"]),
            "ERR ATMOST must be an integer between 0 and 9223372036854775807"
        );
        assert!(error(&[b"k", b"1", b"1", b"1", b"TOKENS", b"x"]).starts_with("ERR TOKENS must"));
        assert_eq!(
            error(&[b"k", b"1", b"1", b"1", b"TOKENS"]),
            "ERR syntax error, TOKENS needs a value"
        );
        assert_eq!(
            error(&[b"k", b"1", b"1", b"1", b"COUNT", b"1"]),
            "ERR syntax error, unknown option 'COUNT'"
        );
        assert_eq!(parse(&[b"k", b"1", b"1"]), Err(Error::WrongArity));
        assert_eq!(
            parse(&[b"k", b"1", b"1", b"1", b"TOKENS", b"1", b"ATMOST"]),
            Err(Error::WrongArity)
        );
        assert_eq!(
            error(&[b"k", b"9223372036854775807", b"1", b"1"]),
            format!("ERR {OVERFLOW}")
        );
    }

    #[test]
    fn stored_tats_of_gcra_and_of_redis_rate() {
        assert_eq!(stored_tat(b"1800000000206000"), Some(1_800_000_000_206_000));
        // redis_rate's script: tostring() of seconds since 2017 (%.14g).
        assert_eq!(
            stored_tat(b"316771200.20612"),
            Some(REDIS_RATE_EPOCH_US + 316_771_200_206_120)
        );
        assert_eq!(
            stored_tat(b"316771200"),
            Some(REDIS_RATE_EPOCH_US + 316_771_200_000_000)
        );
        assert_eq!(
            stored_tat(b"3.1677120020612e+08"),
            stored_tat(b"316771200.20612")
        );
        for foreign in [
            &b"abc"[..],
            b"",
            b"0",
            b"-5",
            b"-1.5",
            b"nan",
            b"inf",
            b"1e300",
            b" 1",
            b"0x10",
        ] {
            assert_eq!(stored_tat(foreign), None, "{foreign:?}");
        }
    }
}
