//! `RATELIMIT.EXPIRE key ms [NX | XX | GT | LT] [CLIENT id]`: PEXPIRE on every key of the
//! limiter (Redisson `expire`). Conditions are checked per key as PEXPIRE checks them; a
//! non-positive `ms` deletes, as PEXPIRE does. Replies 1 if any key changed, else 0.

use redis_module::{Context, RedisResult, RedisValue};

use super::doc::{Arg, ArgType, Doc, Keys, CLIENT, KEY, UPDATE};
use crate::args::{self, Tokens, MAX_DURATION_MS};
use crate::blocking;
use crate::clock;
use crate::error::Error;
use crate::key::{Effect, Key, Write};
use crate::store::LimiterKeys;

pub const DOC: Doc = Doc {
    name: c"ratelimit.expire",
    summary: c"Sets a TTL in milliseconds on every key of a limiter, as PEXPIRE does.",
    complexity: c"O(1)",
    arity: -3,
    flags: c"write fast",
    acl_categories: c"write fast keyspace",
    key: Keys::First(UPDATE),
    args: &[
        KEY,
        Arg::new(c"milliseconds", ArgType::Integer),
        Arg::new(
            c"condition",
            ArgType::OneOf(&[
                Arg::token(c"nx", c"NX"),
                Arg::token(c"xx", c"XX"),
                Arg::token(c"gt", c"GT"),
                Arg::token(c"lt", c"LT"),
            ]),
        )
        .optional(),
        CLIENT,
    ],
};

/// PEXPIRE's conditions. XX combines with GT or LT; NX combines with none.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct When {
    pub nx: bool,
    pub xx: bool,
    pub gt: bool,
    pub lt: bool,
}

impl When {
    /// Whether a key whose expiry is `current` (None = persistent) may get expiry `at`.
    /// A persistent key counts as an infinite TTL for GT and LT, as in Redis.
    pub fn allows(&self, current: Option<i64>, at: i64) -> bool {
        (!self.nx || current.is_none())
            && (!self.xx || current.is_some())
            && (!self.gt || current.is_some_and(|c| at > c))
            && (!self.lt || current.is_none_or(|c| at < c))
    }
}

#[derive(Debug, PartialEq, Eq)]
pub struct Request<'a> {
    pub key: &'a [u8],
    pub ms: i64,
    pub when: When,
    pub client: Option<&'a [u8]>,
}

pub fn parse<'a>(args: &'a [&'a [u8]]) -> Result<Request<'a>, Error> {
    let mut tokens = Tokens::new(args);
    let (Some(key), Some(ms)) = (tokens.next_arg(), tokens.next_arg()) else {
        return Err(Error::WrongArity);
    };
    let ms = args::integer(ms, "milliseconds", -MAX_DURATION_MS, MAX_DURATION_MS)?;
    let mut when = When::default();
    let mut client = None;
    while let Some(token) = tokens.next_arg() {
        let (flag, name) = if args::is_keyword(token, "NX") {
            (&mut when.nx, "NX")
        } else if args::is_keyword(token, "XX") {
            (&mut when.xx, "XX")
        } else if args::is_keyword(token, "GT") {
            (&mut when.gt, "GT")
        } else if args::is_keyword(token, "LT") {
            (&mut when.lt, "LT")
        } else if args::is_keyword(token, "CLIENT") {
            let id = args::client_id(tokens.value_of_option("CLIENT")?)?;
            args::set_once(&mut client, id, "CLIENT")?;
            continue;
        } else {
            return Err(Error::unknown_option(token));
        };
        if *flag {
            return Err(Error::repeated_option(name));
        }
        *flag = true;
    }
    if when.nx && (when.xx || when.gt || when.lt) {
        return Err(Error::IncompatibleExpireOptions(
            "NX and XX, GT or LT options at the same time are not compatible",
        ));
    }
    if when.gt && when.lt {
        return Err(Error::IncompatibleExpireOptions(
            "GT and LT options at the same time are not compatible",
        ));
    }
    Ok(Request {
        key,
        ms,
        when,
        client,
    })
}

pub fn run(ctx: &Context, args: &[&[u8]]) -> RedisResult {
    let request = parse(args)?;
    // TTLs run on the server's clock, never on the debug clock.
    let now = clock::server_ms();
    let at = now
        .checked_add(request.ms)
        .ok_or(Error::InvalidExpireTime)?;
    let limiter = LimiterKeys::<Write>::open(ctx, request.key)?;
    let changed = limiter.for_each_key(request.client, |key: &Key<'_, Write>| {
        if !key.exists() || !request.when.allows(key.expires_at(), at) {
            return false;
        }
        if at <= now {
            key.apply(Effect::Unlink)
        } else {
            key.apply(Effect::PExpireAt(at))
        }
    })?;
    drop(limiter);
    blocking::nudge(ctx, request.key);
    Ok(RedisValue::Integer(i64::from(changed > 0)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn when(args: &[&[u8]]) -> Result<When, Error> {
        let mut full: Vec<&[u8]> = vec![b"k", b"1000"];
        full.extend_from_slice(args);
        parse(&full).map(|r| r.when)
    }

    #[test]
    fn conditions_follow_pexpire() {
        let nx = when(&[b"nx"]).unwrap();
        assert!(nx.allows(None, 5) && !nx.allows(Some(1), 5));
        let xx_gt = when(&[b"XX", b"GT"]).unwrap();
        assert!(xx_gt.allows(Some(1), 5) && !xx_gt.allows(Some(9), 5) && !xx_gt.allows(None, 5));
        let lt = when(&[b"LT"]).unwrap();
        assert!(lt.allows(None, 5) && lt.allows(Some(9), 5) && !lt.allows(Some(1), 5));
        assert!(When::default().allows(None, 5));
    }

    #[test]
    fn conflicting_and_repeated_options_are_errors() {
        assert!(matches!(
            when(&[b"NX", b"GT"]),
            Err(Error::IncompatibleExpireOptions(_))
        ));
        assert!(matches!(
            when(&[b"GT", b"LT"]),
            Err(Error::IncompatibleExpireOptions(_))
        ));
        assert_eq!(when(&[b"NX", b"nx"]), Err(Error::repeated_option("NX")));
        assert_eq!(when(&[b"SOON"]), Err(Error::unknown_option(b"SOON")));
    }
}
