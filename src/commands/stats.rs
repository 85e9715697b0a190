//! `RATELIMIT.STATS`: this server's counters per group (rule), as a map (a flat array of name,
//! value pairs in RESP2): `stats` (1 while counting), `groups` (a map of group name to its
//! `grants`, `refusals`, `near_limit`), `overflow` (the groups past the bound, counted as one)
//! and `overflow_groups` (about how many went there).

use redis_module::{Context, RedisResult, RedisValue};

use super::doc::{Doc, Keys};
use crate::error::Error;
use crate::ffi::reply;
use crate::observe::{self, groups::Counts};

pub const DOC: Doc = Doc {
    name: c"ratelimit.stats",
    summary: c"Returns this server's grants, refusals and near-limit grants per group of limiters (the prefix of their names).",
    complexity: c"O(G), G being the groups counted (at most 256).",
    arity: 1,
    flags: c"readonly fast allow-loading allow-stale",
    acl_categories: c"read fast",
    key: Keys::None,
    args: &[],
};

pub fn parse(args: &[&[u8]]) -> Result<(), Error> {
    match args {
        [] => Ok(()),
        _ => Err(Error::WrongArity),
    }
}

pub fn run(ctx: &Context, args: &[&[u8]]) -> RedisResult {
    parse(args)?;
    let snapshot = observe::snapshot();
    reply::map(ctx, 4);
    reply::bulk(ctx, b"stats");
    reply::integer(ctx, i64::from(observe::on()));
    reply::bulk(ctx, b"groups");
    reply::map(ctx, snapshot.named.len());
    for (name, counts) in &snapshot.named {
        reply::bulk(ctx, name);
        counts_reply(ctx, counts);
    }
    reply::bulk(ctx, b"overflow");
    counts_reply(ctx, &snapshot.overflow);
    reply::bulk(ctx, b"overflow_groups");
    reply::integer(ctx, saturating(snapshot.overflow_groups));
    Ok(RedisValue::NoReply)
}

fn counts_reply(ctx: &Context, counts: &Counts) {
    reply::map(ctx, 3);
    for (field, value) in [
        ("grants", counts.grants),
        ("refusals", counts.refusals),
        ("near_limit", counts.near_limit),
    ] {
        reply::bulk(ctx, field.as_bytes());
        reply::integer(ctx, saturating(value));
    }
}

pub(crate) fn saturating(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}
