//! `GCRA key max_burst tokens_per_period period [TOKENS count]`: the command Redis merged in
//! 2026 (#14950) and left out of 8.8, which Redisson's `RGcra` calls. The same arguments,
//! microsecond arithmetic, five-integer reply and error texts; the TAT stored in microseconds
//! in a string key, expiring at the TAT.

use redis_module::{Context, RedisResult, RedisValue};

use super::doc::{Arg, ArgType, Doc, Keys, KEY, UPDATE};
use crate::args::{is_keyword, parse_double, parse_i64};
use crate::clock;
use crate::error::Error;
use crate::gcra::Gcra;
use crate::tat::TatKey;

pub const DOC: Doc = Doc {
    name: c"gcra",
    summary: c"Rate limiting with GCRA: takes count tokens (default 1) from a bucket of max_burst + 1 refilled tokens_per_period every period seconds; replies limited, max tokens, available, retry after and full burst after.",
    complexity: c"O(1)",
    arity: -5,
    flags: c"write deny-oom fast",
    acl_categories: c"write fast",
    key: Keys::First(UPDATE),
    args: &[
        KEY,
        Arg::new(c"max-burst", ArgType::Integer),
        Arg::new(c"tokens-per-period", ArgType::Integer),
        Arg::new(c"period", ArgType::Double),
        Arg::new(c"count", ArgType::Integer)
            .after(c"TOKENS")
            .optional(),
    ],
};

/// Redis's texts, word for word.
const NOT_POSITIVE: &str = "value is out of range, must be positive";
const NOT_INTEGER: &str = "value is not an integer or out of range";
const BELOW_ONE: &str = "value is out of range, value must between 1 and 9223372036854775807";
const NOT_FLOAT: &str = "value is not a valid float";
const PERIOD_RANGE: &str = "period must be > 0 and < 1e12";
const MISSING_TOKENS: &str = "Missing TOKENS value";
/// Redis's `GCRA` says only this of a sixth argument that is not TOKENS; the drop-in answers as
/// it does (the other commands name the word).
const SYNTAX: &str = "syntax error";
const INVALID_KEY: &str = "Invalid GCRA key";
const NEGATIVE_TIME: &str = "Negative time is invalid value for GCRA";

#[derive(Debug, PartialEq)]
pub struct Request<'a> {
    pub key: &'a [u8],
    pub gcra: Gcra,
    pub tokens: i64,
}

/// A count of at least 1, as Redis's `getRangeLongFromObjectOrReply(.., 1, LONG_MAX, ..)`.
fn count(arg: &[u8]) -> Result<i64, Error> {
    let n = parse_i64(arg).ok_or(Error::Message(NOT_INTEGER))?;
    if n < 1 {
        return Err(Error::Message(BELOW_ONE));
    }
    Ok(n)
}

/// In Redis's order: arity, max_burst, tokens_per_period, period, TOKENS.
pub fn parse<'a>(args: &'a [&'a [u8]]) -> Result<Request<'a>, Error> {
    let (key, max_burst, per_period, period, rest) = match args {
        [key, b, t, p, rest @ ..] if rest.len() <= 2 => (*key, *b, *t, *p, rest),
        _ => return Err(Error::WrongArity),
    };
    let max_burst = parse_i64(max_burst)
        .filter(|n| *n >= 0)
        .ok_or(Error::Message(NOT_POSITIVE))?;
    let per_period = count(per_period)?;
    let period = parse_double(period).ok_or(Error::Message(NOT_FLOAT))?;
    if period <= 0.0 || period >= 1e12 {
        return Err(Error::Message(PERIOD_RANGE));
    }
    let tokens = match rest {
        [] => 1,
        [word, ..] if !is_keyword(word, "TOKENS") => return Err(Error::Message(SYNTAX)),
        [_] => return Err(Error::Message(MISSING_TOKENS)),
        [_, n] => count(n)?,
        _ => return Err(Error::WrongArity),
    };
    Ok(Request {
        key,
        gcra: Gcra::new(max_burst, per_period, period),
        tokens,
    })
}

pub fn run(ctx: &Context, args: &[&[u8]]) -> RedisResult {
    let request = parse(args)?;
    let now = clock::now_ms();
    let key = TatKey::open(ctx, request.key);
    let tat = key.read(clock::is_frozen().then_some(now), |bytes| {
        let tat = parse_i64(bytes).ok_or(Error::Message(INVALID_KEY))?;
        if tat <= 0 {
            return Err(Error::Message(NEGATIVE_TIME));
        }
        Ok(tat)
    })?;
    let outcome = request
        .gcra
        .call(tat, now, request.tokens)
        .map_err(|e| Error::Message(e.message()))?;
    key.write(outcome.write);
    super::count_gcra(
        request.key,
        request.tokens,
        outcome.limited,
        outcome.limit,
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
    fn arguments_and_errors_as_redis() {
        let request = parse(&[b"k", b"5", b"10", b"0.25", b"tokens", b"3"]).unwrap();
        assert_eq!(request.tokens, 3);
        assert_eq!(
            error(&[b"k", b"-1", b"1", b"1"]),
            format!("ERR {NOT_POSITIVE}")
        );
        assert_eq!(
            error(&[b"k", b"x", b"1", b"1"]),
            format!("ERR {NOT_POSITIVE}")
        );
        assert_eq!(
            error(&[b"k", b"1", b"x", b"1"]),
            format!("ERR {NOT_INTEGER}")
        );
        assert_eq!(error(&[b"k", b"1", b"0", b"1"]), format!("ERR {BELOW_ONE}"));
        assert_eq!(
            error(&[b"k", b"1", b"1", b"nan"]),
            format!("ERR {NOT_FLOAT}")
        );
        assert_eq!(
            error(&[b"k", b"1", b"1", b" 1"]),
            format!("ERR {NOT_FLOAT}")
        );
        assert_eq!(
            error(&[b"k", b"1", b"1", b"inf"]),
            format!("ERR {PERIOD_RANGE}")
        );
        assert_eq!(
            error(&[b"k", b"1", b"1", b"1e12"]),
            format!("ERR {PERIOD_RANGE}")
        );
        assert_eq!(
            error(&[b"k", b"1", b"1", b"1", b"COUNT", b"1"]),
            "ERR syntax error"
        );
        assert_eq!(
            error(&[b"k", b"1", b"1", b"1", b"TOKENS"]),
            format!("ERR {MISSING_TOKENS}")
        );
        assert_eq!(
            error(&[b"k", b"1", b"1", b"1", b"TOKENS", b"0"]),
            format!("ERR {BELOW_ONE}")
        );
        assert_eq!(parse(&[b"k", b"1", b"1"]), Err(Error::WrongArity));
        assert_eq!(
            parse(&[b"k", b"1", b"1", b"1", b"TOKENS", b"1", b"x"]),
            Err(Error::WrongArity)
        );
        for period in [&b".5"[..], b"5.", b"1e0", b"0x10", b"0x1p-2"] {
            assert!(parse(&[b"k", b"1", b"1", period]).is_ok(), "{period:?}");
        }
    }
}
