//! `RATELIMIT.AVAILABLE key [CLIENT id]`: permits available now. Read-only: it computes what
//! pruning would give instead of pruning, so it answers on replicas and never touches a TTL.

use redis_module::{Context, RedisResult, RedisString, RedisValue};

use super::doc::{Doc, Keys, CLIENT, KEY, READ};
use super::{byte_args, client_option};
use crate::args::Tokens;
use crate::clock;
use crate::error::Error;
use crate::key::Access;
use crate::store::Limiter;

pub const DOC: Doc = Doc {
    name: c"ratelimit.available",
    summary: c"Returns the permits available now, without writing anything.",
    complexity: c"O(log(N)) when no entry is live; otherwise O(log(N)) plus O(1) per expired entry, N being the entries in the log. O(N) to repair a missing value or one above the rate.",
    arity: -2,
    acl_categories: c"read slow",
    key: Keys::First(READ),
    args: &[KEY, CLIENT],
};

pub fn run(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    let args = byte_args(&args);
    let mut tokens = Tokens::new(&args);
    let key = tokens.next_arg().ok_or(Error::WrongArity)?;
    let client = client_option(&mut tokens)?;
    let now = clock::now_ms();
    let limiter = Limiter::open(ctx, key, Access::Read)?;
    Ok(RedisValue::Integer(limiter.available(client, now)?))
}
