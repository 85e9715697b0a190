//! `RATELIMIT.TRYACQUIRE key [permits] [CLIENT id] [RATE rate interval [OVERALL | PER_CLIENT | ONEKEY]
//! [KEEPALIVE ms] [PRECISION ms]]`: take permits now, or reply how long to wait; `RATE` creates
//! the limiter on first use.

use redis_module::{Context, RedisResult};

use super::doc::{Doc, Keys, ACQUISITION_ARGS, UPDATE};
use super::{acquire_options, outcome_reply};
use crate::args::{self, Tokens};
use crate::blocking;
use crate::clock;
use crate::error::Error;
use crate::key::Write;
use crate::sliding_log::{Config, Reset};
use crate::stats;
use crate::store::{Acquisition, LimiterKeys, Turn, Verdict};

pub const DOC: Doc = Doc {
    name: c"ratelimit.tryacquire",
    summary: c"Takes permits now if the limiter has them; otherwise replies the milliseconds to wait.",
    complexity: c"O(log(N)) to log a grant plus O(log(N)) per expired entry pruned while live entries remain (a fully expired log is dropped in O(1)), N being the entries in the log. A refusal walks the log from the nearer end: O(1) for the whole rate, O(N/2) at worst. O(N) to repair a missing value or one above the rate.",
    arity: -2,
    flags: c"write deny-oom",
    acl_categories: c"write slow",
    key: Keys::First(UPDATE),
    args: &ACQUISITION_ARGS,
};

/// A TRYACQUIRE (and an ALLOW, which takes the same arguments), from its arguments to its
/// verdict.
#[derive(Debug, PartialEq, Eq)]
pub struct Request<'a> {
    pub key: &'a [u8],
    pub permits: u32,
    pub client: Option<&'a [u8]>,
    /// Creates the limiter on first use.
    pub create: Option<Config>,
}

/// `key [permits] [CLIENT id] [RATE ...]`.
pub fn parse<'a>(args: &'a [&'a [u8]]) -> Result<Request<'a>, Error> {
    let mut tokens = Tokens::new(args);
    let key = tokens.next_arg().ok_or(Error::WrongArity)?;
    let permits = match tokens.next_if_numeric() {
        Some(arg) => args::permits(arg)?,
        None => 1,
    };
    let options = acquire_options(&mut tokens, false)?;
    Ok(Request {
        key,
        permits,
        client: options.client,
        create: options.create,
    })
}

impl Request<'_> {
    /// Acquires now, behind any queued ACQUIRE clients, counted in `INFO ratelimit`; with
    /// `reset` wanted for ALLOW's `reset_after`.
    pub fn decide(&self, ctx: &Context, reset: Reset) -> Result<Verdict, Error> {
        let limiter = LimiterKeys::<Write>::open(ctx, self.key)?;
        let resolved = limiter.resolve_for(self.create.as_ref(), self.client, self.permits)?;
        let verdict = limiter.acquire(
            &resolved,
            Acquisition {
                permits: self.permits,
                turn: Turn::BehindWaiters,
                queued: blocking::queued(&resolved),
                reset,
                now: clock::now_ms(),
            },
        )?;
        stats::decided(self.key, verdict.decision());
        Ok(verdict)
    }
}

pub fn run(ctx: &Context, args: &[&[u8]]) -> RedisResult {
    let verdict = parse(args)?.decide(ctx, Reset::NotWanted)?;
    Ok(outcome_reply(verdict.outcome))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permits_default_to_one() {
        let args: [&[u8]; 1] = [b"k"];
        assert_eq!(parse(&args).unwrap().permits, 1);
        let args: [&[u8]; 3] = [b"k", b"CLIENT", b"c"];
        let request = parse(&args).unwrap();
        assert_eq!((request.permits, request.client), (1, Some(&b"c"[..])));
    }

    #[test]
    fn permits_are_validated() {
        for bad in [&b"0"[..], b"-1", b"4294967296", b"1.5"] {
            let args: [&[u8]; 2] = [b"k", bad];
            assert!(matches!(
                parse(&args),
                Err(Error::Number { arg: "permits", .. })
            ));
        }
        let args: [&[u8]; 3] = [b"k", b"2", b"3"];
        assert_eq!(parse(&args), Err(Error::unknown_option(b"3")));
        let args: [&[u8]; 2] = [b"login", b"abc"];
        assert_eq!(parse(&args), Err(Error::unknown_option(b"abc")));
        let args: [&[u8]; 0] = [];
        assert_eq!(parse(&args), Err(Error::WrongArity));
    }
}
