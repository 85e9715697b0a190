//! `RATELIMIT.PEEK key [permits] [CLIENT id]`: what ALLOW would reply for `permits` now, taking
//! and writing nothing, plus `oldest_after`, the milliseconds until the oldest permit still
//! logged frees. Read-only, so it answers on replicas (with the replica's clock).

use redis_module::{Context, RedisResult, RedisValue};

use super::client_option;
use super::doc::{Arg, ArgType, Doc, Keys, CLIENT, KEY, READ};
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

/// `key [permits] [CLIENT id]`.
#[derive(Debug, PartialEq, Eq)]
pub struct Request<'a> {
    pub key: &'a [u8],
    pub permits: u32,
    pub client: Option<&'a [u8]>,
}

pub fn parse<'a>(args: &'a [&'a [u8]]) -> Result<Request<'a>, Error> {
    let mut tokens = Tokens::new(args);
    let key = tokens.next_arg().ok_or(Error::WrongArity)?;
    let permits = match tokens.next_if_numeric() {
        Some(arg) => args::permits(arg)?,
        None => 1,
    };
    let client = client_option(&mut tokens)?;
    Ok(Request {
        key,
        permits,
        client,
    })
}

pub fn run(ctx: &Context, args: &[&[u8]]) -> RedisResult {
    let request = parse(args)?;
    let limiter = LimiterKeys::<Read>::open(ctx, request.key)?;
    // Resolved and decided as ALLOW's request is (tryacquire::Request::decide), never created.
    let resolved = limiter.resolve_for(None, request.client, request.permits)?;
    let acquisition = Acquisition {
        permits: request.permits,
        turn: Turn::BehindWaiters,
        queued: blocking::queued(&resolved),
        reset: Reset::Wanted,
        now: clock::now_ms(),
    };
    let peek = limiter.peek(&resolved, acquisition)?;
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
        ("allowed", allowed),
        ("limit", verdict.limit),
        ("remaining", verdict.remaining),
        ("retry_after", retry_after),
        ("reset_after", verdict.reset_after),
        ("oldest_after", peek.oldest_after),
    ];
    reply::map(ctx, fields.len());
    for (name, value) in fields {
        reply::bulk(ctx, name.as_bytes());
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
                permits: 3,
                client: Some(b"c"),
            })
        );
        let args: [&[u8]; 1] = [b"k"];
        assert_eq!(parse(&args).map(|r| r.permits), Ok(1));
        let args: [&[u8]; 0] = [];
        assert_eq!(parse(&args), Err(Error::WrongArity));
        let args: [&[u8]; 2] = [b"k", b"0"];
        assert!(matches!(parse(&args), Err(Error::Number { .. })));
        let args: [&[u8]; 3] = [b"k", b"RATE", b"1"];
        assert_eq!(parse(&args), Err(Error::unknown_option(b"RATE")));
        let args: [&[u8]; 3] = [b"k", b"1", b"2"];
        assert_eq!(parse(&args), Err(Error::unknown_option(b"2")));
    }
}
