//! `RATELIMIT.AVAILABLE key [CLIENT id]`: permits available now. Read-only: it computes what
//! pruning would give instead of pruning, so it answers on replicas and never touches a TTL.

use redis_module::{Context, RedisResult, RedisValue};

use super::doc::{Doc, Keys, CLIENT, KEY, READ};
use super::{parse_target, Target};
use crate::blocking;
use crate::clock;
use crate::error::Error;
use crate::key::Read;
use crate::store::LimiterKeys;

pub const DOC: Doc = Doc {
    name: c"ratelimit.available",
    summary: c"Returns the permits available now, without writing anything.",
    complexity: c"O(log(N)) when no entry is live; otherwise O(log(N)) plus O(1) per expired entry, N being the entries in the log. O(N) to repair a missing value or one above the rate.",
    arity: -2,
    flags: c"readonly",
    acl_categories: c"read slow",
    key: Keys::First(READ),
    args: &[KEY, CLIENT],
};

pub fn parse<'a>(args: &'a [&'a [u8]]) -> Result<Target<'a>, Error> {
    parse_target(args)
}

pub fn run(ctx: &Context, args: &[&[u8]]) -> RedisResult {
    let Target { key, client } = parse(args)?;
    let now = clock::now_ms();
    let limiter = LimiterKeys::<Read>::open(ctx, key)?;
    let resolved = limiter.resolve_existing(client)?;
    let queued = blocking::queued(&resolved).unwrap_or(0);
    Ok(RedisValue::Integer(resolved.available(queued, now)?))
}
