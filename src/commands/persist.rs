//! `RATELIMIT.PERSIST key [CLIENT id]`: remove the TTL of the limiter's keys (Redisson
//! `clearExpire`). Replies 1 if any key had a TTL, else 0, as PERSIST does.

use redis_module::{Context, RedisResult, RedisValue};

use super::doc::{Doc, Keys, CLIENT, KEY, UPDATE};
use super::{parse_target, Target};
use crate::error::Error;
use crate::key::{Effect, Write};
use crate::store::LimiterKeys;

pub const DOC: Doc = Doc {
    name: c"ratelimit.persist",
    summary: c"Removes the TTL of every key of a limiter.",
    complexity: c"O(1)",
    arity: -2,
    flags: c"write fast",
    acl_categories: c"write fast keyspace",
    key: Keys::First(UPDATE),
    args: &[KEY, CLIENT],
};

pub fn parse<'a>(args: &'a [&'a [u8]]) -> Result<Target<'a>, Error> {
    parse_target(args)
}

pub fn run(ctx: &Context, args: &[&[u8]]) -> RedisResult {
    let Target { key, client } = parse(args)?;
    let limiter = LimiterKeys::<Write>::open(ctx, key)?;
    let changed = limiter.for_each_key(client, |key| key.apply(Effect::Persist))?;
    Ok(RedisValue::Integer(i64::from(changed > 0)))
}
