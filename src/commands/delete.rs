//! `RATELIMIT.DELETE key [CLIENT id]`: delete the hash, the OVERALL state and the given client's
//! state. Replies the number of keys deleted, as DEL does.

use redis_module::{raw, Context, RedisResult, RedisValue};

use super::doc::{Doc, Keys, CLIENT, KEY};
use super::{parse_target, Target};
use crate::blocking;
use crate::error::Error;
use crate::key::{Effect, Write};
use crate::store::LimiterKeys;

pub const DOC: Doc = Doc {
    name: c"ratelimit.delete",
    summary: c"Deletes a limiter: its hash, its OVERALL state and the given client's state.",
    complexity: c"O(1) per key: keys are unlinked, big logs freed in the background.",
    arity: -2,
    flags: c"write",
    acl_categories: c"write slow keyspace",
    key: Keys::First(raw::REDISMODULE_CMD_KEY_RM | raw::REDISMODULE_CMD_KEY_DELETE),
    args: &[KEY, CLIENT],
};

pub fn parse<'a>(args: &'a [&'a [u8]]) -> Result<Target<'a>, Error> {
    parse_target(args)
}

pub fn run(ctx: &Context, args: &[&[u8]]) -> RedisResult {
    let Target { key, client } = parse(args)?;
    let limiter = LimiterKeys::<Write>::open(ctx, key)?;
    let deleted = limiter.for_each_key(client, |key| key.apply(Effect::Unlink))?;
    drop(limiter);
    blocking::nudge(ctx, key);
    Ok(RedisValue::Integer(deleted))
}
