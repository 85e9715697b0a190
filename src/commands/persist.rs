//! `RATELIMIT.PERSIST key [CLIENT id]`: remove the TTL of the limiter's keys (Redisson
//! `clearExpire`). Replies 1 if any key had a TTL, else 0, as PERSIST does.

use redis_module::{Context, RedisResult, RedisString, RedisValue};

use super::doc::{Doc, Keys, CLIENT, KEY, UPDATE};
use super::{byte_args, client_option};
use crate::args::Tokens;
use crate::error::Error;
use crate::key::{Access, Key};
use crate::store::Limiter;

pub const DOC: Doc = Doc {
    name: c"ratelimit.persist",
    summary: c"Removes the TTL of every key of a limiter.",
    complexity: c"O(1)",
    arity: -2,
    acl_categories: c"write fast keyspace",
    key: Keys::First(UPDATE),
    args: &[KEY, CLIENT],
};

pub fn run(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    let args = byte_args(&args);
    let mut tokens = Tokens::new(&args);
    let key = tokens.next_arg().ok_or(Error::WrongArity)?;
    let client = client_option(&mut tokens)?;
    let limiter = Limiter::open(ctx, key, Access::Write)?;
    let changed = limiter.for_each_key(client, Key::persist)?;
    Ok(RedisValue::Integer(i64::from(changed > 0)))
}
