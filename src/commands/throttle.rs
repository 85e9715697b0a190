//! `CL.THROTTLE key max_burst count_per_period period [quantity]`: redis-cell 0.5's command,
//! reply for reply: `[limited, limit, remaining, retry_after, reset_after]`, the TAT stored as
//! decimal nanoseconds in a string key, as redis-cell stores it (so keys carry over both ways).

use redis_module::{Context, RedisResult, RedisValue};

use super::doc::{Arg, ArgType, Doc, Keys, KEY, UPDATE};
use crate::args::parse_i64_lenient;
use crate::clock;
use crate::error::Error;
use crate::gcra::{Throttle, ThrottleError};
use crate::tat::TatKey;

pub const DOC: Doc = Doc {
    name: c"cl.throttle",
    summary: c"redis-cell's GCRA rate limiter: takes quantity from a bucket of max_burst + 1 refilled count_per_period every period seconds; replies limited, limit, remaining, retry_after and reset_after.",
    complexity: c"O(1)",
    arity: -5,
    flags: c"write deny-oom fast",
    acl_categories: c"write fast",
    key: Keys::First(UPDATE),
    args: &[
        KEY,
        Arg::new(c"max_burst", ArgType::Integer),
        Arg::new(c"count_per_period", ArgType::Integer),
        Arg::new(c"period", ArgType::Integer),
        Arg::new(c"quantity", ArgType::Integer).optional(),
    ],
};

#[derive(Debug, PartialEq, Eq)]
pub struct Request<'a> {
    pub key: &'a [u8],
    pub throttle: Throttle,
    /// 0 peeks, a negative quantity gives permits back.
    pub quantity: i64,
}

fn number(arg: &[u8], name: &'static str, min: i64) -> Result<i64, Error> {
    parse_i64_lenient(arg)
        .filter(|n| *n >= min)
        .ok_or(Error::Number {
            arg: name,
            min,
            max: i64::MAX,
        })
}

pub fn parse<'a>(args: &'a [&'a [u8]]) -> Result<Request<'a>, Error> {
    let (key, max_burst, count, period, quantity) = match args {
        [key, b, c, p] => (*key, *b, *c, *p, None),
        [key, b, c, p, q] => (*key, *b, *c, *p, Some(*q)),
        _ => return Err(Error::WrongArity),
    };
    let max_burst = number(max_burst, "max_burst", 0)?;
    let count = number(count, "count_per_period", 1)?;
    let period = number(period, "period", 1)?;
    let quantity = match quantity {
        Some(q) => number(q, "quantity", i64::MIN)?,
        None => 1,
    };
    let throttle = Throttle::new(max_burst, count, period).map_err(throttle_error)?;
    Ok(Request {
        key,
        throttle,
        quantity,
    })
}

fn throttle_error(e: ThrottleError) -> Error {
    Error::Message(match e {
        ThrottleError::ZeroRate => {
            "zero rates are not supported: count_per_period is more than one per nanosecond of period"
        }
        ThrottleError::Overflow => {
            "max_burst, count_per_period, period and quantity overflow 64-bit nanoseconds"
        }
    })
}

pub fn run(ctx: &Context, args: &[&[u8]]) -> RedisResult {
    let request = parse(args)?;
    let now = clock::now_ms();
    let key = TatKey::open(ctx, request.key);
    let tat = key.read(clock::is_frozen().then_some(now), |bytes| {
        parse_i64_lenient(bytes)
            .filter(|tat| *tat >= 0)
            .ok_or_else(|| {
                Error::corrupt(request.key, "not a CL.THROTTLE TAT (decimal nanoseconds)")
            })
    })?;
    let outcome = request
        .throttle
        .call(tat, now, request.quantity)
        .map_err(throttle_error)?;
    key.write(outcome.write);
    super::count_gcra(
        request.key,
        request.quantity,
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

    #[test]
    fn arguments() {
        let args: [&[u8]; 4] = [b"k", b"15", b"30", b"60"];
        let request = parse(&args).unwrap();
        assert_eq!((request.key, request.quantity), (&b"k"[..], 1));
        let args: [&[u8]; 5] = [b"k", b"+1", b"010", b"1", b"-3"];
        assert_eq!(parse(&args).unwrap().quantity, -3);
        let args: [&[u8]; 3] = [b"k", b"1", b"1"];
        assert_eq!(parse(&args), Err(Error::WrongArity));
        for (args, arg) in [
            ([&b"k"[..], b"-1", b"1", b"1"], "max_burst"),
            ([&b"k"[..], b"1", b"0", b"1"], "count_per_period"),
            ([&b"k"[..], b"1", b"1", b"1.5"], "period"),
            ([&b"k"[..], b"1", b"\xff", b"1"], "count_per_period"),
        ] {
            assert!(
                matches!(parse(&args), Err(Error::Number { arg: a, .. }) if a == arg),
                "{arg}"
            );
        }
        let args: [&[u8]; 4] = [b"k", b"1", b"2000000000", b"1"];
        assert!(matches!(parse(&args), Err(Error::Message(_))));
    }
}
