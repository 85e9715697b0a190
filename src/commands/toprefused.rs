//! `RATELIMIT.TOPREFUSED [count]`: the limiters refused most on this server over the last one
//! to two minutes, most first, as a map of name to refusals (a flat array in RESP2); from a
//! fixed-size Space-Saving sketch, so a count may exceed the truth by at most the refusals
//! counted over those minutes divided by 512 (docs/observability.md).

use redis_module::{Context, RedisResult, RedisValue};

use super::doc::{Arg, ArgType, Doc, Keys};
use super::stats::saturating;
use crate::args;
use crate::clock;
use crate::error::Error;
use crate::ffi::reply;
use crate::observe::{self, refused::CAPACITY};

pub const DOC: Doc = Doc {
    name: c"ratelimit.toprefused",
    summary: c"Returns the limiters refused most on this server over the last one to two minutes, most first, with their refusals.",
    complexity: c"O(K log K), K being the names the sketch holds (at most 1024).",
    arity: -1,
    flags: c"readonly allow-loading allow-stale",
    acl_categories: c"read slow",
    key: Keys::None,
    args: &[Arg::new(c"count", ArgType::Integer).optional()],
};

/// How many names by default.
pub const DEFAULT_COUNT: i64 = 10;

pub fn parse(args: &[&[u8]]) -> Result<usize, Error> {
    let count = match args {
        [] => DEFAULT_COUNT,
        [count] => args::integer(count, "count", 1, 2 * CAPACITY as i64)?,
        [_, extra, ..] => return Err(Error::unknown_option(extra)),
    };
    Ok(usize::try_from(count).unwrap_or(0))
}

pub fn run(ctx: &Context, args: &[&[u8]]) -> RedisResult {
    let count = parse(args)?;
    let (top, _) = observe::top_refused(count, clock::now_ms());
    reply::map(ctx, top.len());
    for (name, refusals) in &top {
        reply::bulk(ctx, name);
        reply::integer(ctx, saturating(*refusals));
    }
    Ok(RedisValue::NoReply)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn count_is_checked() {
        assert_eq!(parse(&[]), Ok(10));
        assert_eq!(parse(&[b"3"]), Ok(3));
        assert!(matches!(
            parse(&[b"0"]),
            Err(Error::Number { arg: "count", .. })
        ));
        assert!(parse(&[b"x"]).is_err());
        assert_eq!(parse(&[b"1", b"2"]), Err(Error::unknown_option(b"2")));
    }
}
