//! `RATELIMIT.RELEASE key permits [CLIENT id]`: give permits back. The newest log entries worth
//! `permits` are removed (the last one split if needed) and the value raised by as many, capped at
//! the rate, so released permits are not counted twice. Replies how many were released.

use redis_module::{Context, RedisResult, RedisValue};

use super::client_option;
use super::doc::{Arg, ArgType, Doc, Keys, CLIENT, KEY, UPDATE};
use crate::args::{self, Tokens};
use crate::blocking;
use crate::clock;
use crate::error::Error;
use crate::key::Write;
use crate::store::LimiterKeys;

pub const DOC: Doc = Doc {
    name: c"ratelimit.release",
    summary: c"Gives permits back by removing the newest log entries worth them.",
    complexity: c"O((E+K+1) log(N)), E being the expired entries pruned, K the entries released or split and N the entries in the log; releasing everything logged drops the log in O(1). O(N) to repair a missing value or one above the rate.",
    arity: -3,
    flags: c"write deny-oom",
    acl_categories: c"write slow",
    key: Keys::First(UPDATE),
    args: &[KEY, Arg::new(c"permits", ArgType::Integer), CLIENT],
};

#[derive(Debug, PartialEq, Eq)]
pub struct Request<'a> {
    pub key: &'a [u8],
    pub permits: u32,
    pub client: Option<&'a [u8]>,
}

pub fn parse<'a>(args: &'a [&'a [u8]]) -> Result<Request<'a>, Error> {
    let mut tokens = Tokens::new(args);
    let (Some(key), Some(permits)) = (tokens.next_arg(), tokens.next_arg()) else {
        return Err(Error::WrongArity);
    };
    let permits = args::permits(permits)?;
    let client = client_option(&mut tokens)?;
    Ok(Request {
        key,
        permits,
        client,
    })
}

pub fn run(ctx: &Context, args: &[&[u8]]) -> RedisResult {
    let Request {
        key,
        permits,
        client,
    } = parse(args)?;
    let now = clock::now_ms();
    let limiter = LimiterKeys::<Write>::open(ctx, key)?;
    let released = limiter.release(client, permits, now)?;
    drop(limiter);
    blocking::nudge(ctx, key);
    Ok(RedisValue::Integer(released))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permits_are_required_and_validated() {
        let args: [&[u8]; 4] = [b"k", b"3", b"CLIENT", b"c"];
        assert_eq!(
            parse(&args),
            Ok(Request {
                key: b"k",
                permits: 3,
                client: Some(b"c")
            })
        );
        let args: [&[u8]; 1] = [b"k"];
        assert_eq!(parse(&args), Err(Error::WrongArity));
        let args: [&[u8]; 2] = [b"k", b"0"];
        assert!(matches!(
            parse(&args),
            Err(Error::Number { arg: "permits", .. })
        ));
        let args: [&[u8]; 3] = [b"k", b"1", b"NX"];
        assert_eq!(parse(&args), Err(Error::unknown_option(b"NX")));
    }
}
