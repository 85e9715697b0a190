//! `RATELIMIT.DELETE key [CLIENT id]`: delete the hash, the OVERALL state and the given client's
//! state. Replies the number of keys deleted, as DEL does.

use redis_module::{raw, Context, RedisResult, RedisString, RedisValue};

use super::doc::{Doc, Keys, CLIENT, KEY};
use super::{byte_args, client_option};
use crate::args::Tokens;
use crate::blocking;
use crate::error::Error;
use crate::key::{Access, Key};
use crate::store::Limiter;

pub const DOC: Doc = Doc {
    name: c"ratelimit.delete",
    summary: c"Deletes a limiter: its hash, its OVERALL state and the given client's state.",
    complexity: c"O(1) per key: keys are unlinked, big logs freed in the background.",
    arity: -2,
    acl_categories: c"write slow keyspace",
    key: Keys::First(raw::REDISMODULE_CMD_KEY_RM | raw::REDISMODULE_CMD_KEY_DELETE),
    args: &[KEY, CLIENT],
};

pub fn run(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    let args = byte_args(&args);
    let mut tokens = Tokens::new(&args);
    let key = tokens.next_arg().ok_or(Error::WrongArity)?;
    let client = client_option(&mut tokens)?;
    let limiter = Limiter::open(ctx, key, Access::Write)?;
    let deleted = limiter.for_each_key(client, Key::delete)?;
    drop(limiter);
    blocking::nudge(ctx, key);
    Ok(RedisValue::Integer(deleted))
}
