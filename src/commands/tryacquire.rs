//! `RATELIMIT.TRYACQUIRE key [permits] [CLIENT id] [RATE rate interval [OVERALL | PER_CLIENT]
//! [KEEPALIVE ms] [PRECISION ms]]`: take permits now, or reply how long to wait; `RATE` creates
//! the limiter on first use.

use redis_module::{Context, RedisResult};

use super::doc::{Doc, Keys, ACQUISITION_ARGS, UPDATE};
use super::{acquire_now, outcome_reply, parse_acquisition, Acquisition};
use crate::error::Error;
use crate::sliding_log::Reset;

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

pub fn parse<'a>(args: &'a [&'a [u8]]) -> Result<Acquisition<'a>, Error> {
    parse_acquisition(args)
}

pub fn run(ctx: &Context, args: &[&[u8]]) -> RedisResult {
    let request = parse(args)?;
    let verdict = acquire_now(ctx, &request, Reset::NotWanted)?;
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
        assert_eq!(parse(&args), Err(Error::Syntax));
        let args: [&[u8]; 0] = [];
        assert_eq!(parse(&args), Err(Error::WrongArity));
    }
}
