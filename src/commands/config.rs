//! `RATELIMIT.CONFIG key`: the limiter's configuration as a map (a flat array in RESP2):
//! `rate`, `interval`, `type` (`OVERALL` | `PER_CLIENT`), `keepAliveTime`; nil if it does not exist.

use redis_module::{Context, RedisResult, RedisValue};

use super::doc::{Doc, Keys, KEY, READ};
use crate::error::Error;
use crate::ffi::reply;
use crate::key::Read;
use crate::sliding_log::{Config, Mode};
use crate::store::LimiterKeys;

pub const DOC: Doc = Doc {
    name: c"ratelimit.config",
    summary: c"Returns a limiter's rate, interval, type and keepAliveTime.",
    complexity: c"O(1)",
    arity: 2,
    flags: c"readonly fast",
    acl_categories: c"read fast",
    key: Keys::First(READ),
    args: &[KEY],
};

#[derive(Debug, PartialEq, Eq)]
pub struct Request<'a> {
    pub key: &'a [u8],
}

pub fn parse<'a>(args: &'a [&'a [u8]]) -> Result<Request<'a>, Error> {
    match args {
        [key] => Ok(Request { key }),
        _ => Err(Error::WrongArity),
    }
}

pub fn run(ctx: &Context, args: &[&[u8]]) -> RedisResult {
    let Request { key } = parse(args)?;
    let limiter = LimiterKeys::<Read>::open_config(ctx, key)?;
    match limiter.config()? {
        None => Ok(RedisValue::Null),
        Some(config) => {
            reply_map(ctx, &config);
            Ok(RedisValue::NoReply)
        }
    }
}

/// Replies in the documented field order, which a sorted map type would not keep.
fn reply_map(ctx: &Context, config: &Config) {
    let kind: &str = match config.mode {
        Mode::Overall => "OVERALL",
        Mode::PerClient => "PER_CLIENT",
        Mode::OneKey => "ONEKEY",
    };
    reply::map(ctx, 4);
    for (field, value) in [
        ("rate", Field::Int(config.rate)),
        ("interval", Field::Int(config.interval)),
        ("type", Field::Text(kind)),
        ("keepAliveTime", Field::Int(config.keep_alive)),
    ] {
        reply::bulk(ctx, field.as_bytes());
        match value {
            Field::Int(n) => reply::integer(ctx, n),
            Field::Text(text) => reply::bulk(ctx, text.as_bytes()),
        }
    }
}

enum Field {
    Int(i64),
    Text(&'static str),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exactly_one_key() {
        let args: [&[u8]; 1] = [b"k"];
        assert_eq!(parse(&args), Ok(Request { key: b"k" }));
        let args: [&[u8]; 2] = [b"k", b"x"];
        assert_eq!(parse(&args), Err(Error::WrongArity));
        let args: [&[u8]; 0] = [];
        assert_eq!(parse(&args), Err(Error::WrongArity));
    }
}
