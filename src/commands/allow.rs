//! `RATELIMIT.ALLOW key [permits] [CLIENT id] [RATE ...]`: acquires exactly like TRYACQUIRE and
//! replies what an HTTP API needs for its status code and headers, as a map (a flat array of
//! name, value pairs in RESP2): `allowed`, `limit`, `remaining`, `retry_after`, `reset_after`.

use redis_module::{Context, RedisResult, RedisValue};

use super::doc::{Doc, Keys, ACQUISITION_ARGS, UPDATE};
use super::reply_verdict;
use super::tryacquire;
use crate::error::Error;
use crate::sliding_log::Reset;

pub const DOC: Doc = Doc {
    name: c"ratelimit.allow",
    summary: c"Takes permits now if the limiter has them, and replies allowed, limit, remaining, retry_after and reset_after.",
    complexity: c"As RATELIMIT.TRYACQUIRE: O(log(N)) to log the acquisition plus O(log(N)) per expired entry pruned, N being the entries in the log.",
    arity: -2,
    flags: c"write deny-oom",
    acl_categories: c"write slow",
    key: Keys::First(UPDATE),
    args: &ACQUISITION_ARGS,
};

/// An ALLOW: TRYACQUIRE's request, deciding with `reset_after` wanted.
pub type Request<'a> = tryacquire::Request<'a>;

pub fn parse<'a>(args: &'a [&'a [u8]]) -> Result<Request<'a>, Error> {
    tryacquire::parse(args)
}

pub fn run(ctx: &Context, args: &[&[u8]]) -> RedisResult {
    let verdict = parse(args)?.decide(ctx, Reset::Wanted)?;
    reply_verdict(ctx, &verdict, None);
    Ok(RedisValue::NoReply)
}
