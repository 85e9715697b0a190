//! `RATELIMIT.PEEK key [permits] [CLIENT id]`: what ALLOW would reply for `permits` now (or, for
//! 0, the limiter as it stands), taking and writing nothing, plus `oldest_after`, the
//! milliseconds until the oldest permit still logged frees. Read-only, so it answers on replicas
//! (with the replica's clock).

use redis_module::{Context, RedisResult, RedisValue};

use super::doc::{Arg, ArgType, Doc, Keys, CLIENT, KEY, READ};
use super::{client_option, Field};
use crate::args::{self, Tokens};
use crate::blocking;
use crate::clock;
use crate::error::Error;
use crate::ffi::reply;
use crate::key::Read;
use crate::sliding_log::{Outcome, Reset};
use crate::store::{Acquisition, LimiterKeys, Peek, Turn};

pub const DOC: Doc = Doc {
    name: c"ratelimit.peek",
    summary: c"Replies what RATELIMIT.ALLOW would for the permits now, and when the oldest logged permit frees, without taking or writing anything.",
    complexity: c"As a refusal of RATELIMIT.TRYACQUIRE, without its writes: O(log(N)) plus the walk of the live log a refusal makes, N being the entries in the log.",
    arity: -2,
    flags: c"readonly",
    acl_categories: c"read slow",
    key: Keys::First(READ),
    args: &[KEY, PERMITS, CLIENT],
};

const PERMITS: Arg = Arg::new(c"permits", ArgType::Integer).optional();

/// What a PEEK asks about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ask {
    /// `0`: nothing, the limiter as it stands (the permits available now, when the logged ones
    /// free): what a store's read of a client's window needs, which no request for a permit
    /// says exactly (a granted one counts its own grant in `remaining` and `reset_after`).
    Nothing,
    /// What ALLOW would reply for these permits (1 ..= 4294967295).
    Permits(u32),
}

/// `key [permits] [CLIENT id]`.
#[derive(Debug, PartialEq, Eq)]
pub struct Request<'a> {
    pub key: &'a [u8],
    pub ask: Ask,
    pub client: Option<&'a [u8]>,
}

pub fn parse<'a>(args: &'a [&'a [u8]]) -> Result<Request<'a>, Error> {
    let mut tokens = Tokens::new(args);
    let key = tokens.next_arg().ok_or(Error::WrongArity)?;
    let ask = match tokens.next_if_numeric() {
        Some(arg) => match args::integer(arg, "permits", 0, args::MAX_PERMITS)? {
            0 => Ask::Nothing,
            n => Ask::Permits(u32::try_from(n).map_err(|_| Error::Number {
                arg: "permits",
                min: 0,
                max: args::MAX_PERMITS,
            })?),
        },
        None => Ask::Permits(1),
    };
    let client = client_option(&mut tokens)?;
    Ok(Request { key, ask, client })
}

pub fn run(ctx: &Context, args: &[&[u8]]) -> RedisResult {
    let request = parse(args)?;
    let limiter = LimiterKeys::<Read>::open(ctx, request.key)?;
    let permits = match request.ask {
        Ask::Nothing => 0,
        Ask::Permits(permits) => permits,
    };
    // Resolved and decided as ALLOW's request is (tryacquire::Request::decide), never created.
    let resolved = limiter.resolve_for(None, request.client, permits)?;
    let queued = blocking::queued(&resolved);
    let now = clock::now_ms();
    let peek = match request.ask {
        Ask::Nothing => limiter.look(&resolved, queued, now)?,
        Ask::Permits(permits) => {
            let acquisition = Acquisition {
                permits,
                turn: Turn::BehindWaiters,
                queued,
                reset: Reset::Wanted,
                now,
            };
            limiter.peek(&resolved, acquisition)?
        }
    };
    reply(ctx, &peek);
    Ok(RedisValue::NoReply)
}

/// ALLOW's five fields in ALLOW's order, then `oldest_after`: a map (RESP3) or a flat array of
/// name, value pairs (RESP2).
fn reply(ctx: &Context, peek: &Peek) {
    let verdict = &peek.verdict;
    let (allowed, retry_after) = match verdict.outcome {
        Outcome::Acquired => (1, 0),
        Outcome::Wait(ms) => (0, ms),
    };
    let fields = [
        (Field::Allowed, allowed),
        (Field::Limit, verdict.limit),
        (Field::Remaining, verdict.remaining),
        (Field::RetryAfter, retry_after),
        (Field::ResetAfter, verdict.reset_after),
        (Field::OldestAfter, peek.oldest_after),
    ];
    reply::map(ctx, fields.len());
    for (field, value) in fields {
        field.reply(ctx);
        reply::integer(ctx, value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_key_permits_and_client() {
        let args: [&[u8]; 4] = [b"k", b"3", b"CLIENT", b"c"];
        assert_eq!(
            parse(&args),
            Ok(Request {
                key: b"k",
                ask: Ask::Permits(3),
                client: Some(b"c"),
            })
        );
        let args: [&[u8]; 1] = [b"k"];
        assert_eq!(parse(&args).map(|r| r.ask), Ok(Ask::Permits(1)));
        let args: [&[u8]; 0] = [];
        assert_eq!(parse(&args), Err(Error::WrongArity));
        let args: [&[u8]; 2] = [b"k", b"4294967295"];
        assert_eq!(parse(&args).map(|r| r.ask), Ok(Ask::Permits(u32::MAX)));
        let args: [&[u8]; 3] = [b"k", b"RATE", b"1"];
        assert_eq!(parse(&args), Err(Error::unknown_option(b"RATE")));
        let args: [&[u8]; 3] = [b"k", b"1", b"2"];
        assert_eq!(parse(&args), Err(Error::unknown_option(b"2")));
    }

    #[test]
    fn zero_permits_asks_for_nothing() {
        let args: [&[u8]; 2] = [b"k", b"0"];
        assert_eq!(parse(&args).map(|r| r.ask), Ok(Ask::Nothing));
        let args: [&[u8]; 4] = [b"k", b"0", b"CLIENT", b"c"];
        assert_eq!(
            parse(&args),
            Ok(Request {
                key: b"k",
                ask: Ask::Nothing,
                client: Some(b"c"),
            })
        );
        // The range named in the error starts at 0, PEEK's own.
        let number = Err(Error::Number {
            arg: "permits",
            min: 0,
            max: args::MAX_PERMITS,
        });
        let args: [&[u8]; 2] = [b"k", b"-1"];
        assert_eq!(parse(&args), number);
        let args: [&[u8]; 2] = [b"k", b"4294967296"];
        assert_eq!(parse(&args), number);
        let args: [&[u8]; 3] = [b"k", b"0", b"1"];
        assert_eq!(parse(&args), Err(Error::unknown_option(b"1")));
    }
}
