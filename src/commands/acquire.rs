//! `RATELIMIT.ACQUIRE key [permits] [TIMEOUT ms] [CLIENT id] [TICKET ticket] [RATE rate interval
//! [OVERALL | PER_CLIENT] [KEEPALIVE ms] [PRECISION ms]]`: a blocking acquire served by the
//! server, first come first served; `RATE` creates the limiter on first use. Replies nil once
//! acquired, or the wait hint if TIMEOUT ran out first. Inside MULTI or a script it does not
//! block and answers as TRYACQUIRE. `TICKET` names this wait for RATELIMIT.CANCEL, and makes a
//! resend of a wait already granted answer nil without taking again.

use redis_module::{Context, RedisResult};

use super::acquire_options;
use super::doc::{Arg, ArgType, Doc, Keys, CLIENT, KEY, RATE, UPDATE};
use crate::args::{self, Tokens};
use crate::blocking::{self, AcquireRequest};
use crate::error::Error;

pub const DOC: Doc = Doc {
    name: c"ratelimit.acquire",
    summary: c"Takes permits, blocking until they are free (first come, first served) or TIMEOUT runs out.",
    complexity: c"As RATELIMIT.TRYACQUIRE when it does not block; O(1) to queue a blocked client.",
    arity: -2,
    flags: c"write deny-oom blocking",
    acl_categories: c"write slow blocking",
    key: Keys::First(UPDATE),
    args: &[
        KEY,
        Arg::new(c"permits", ArgType::Integer).optional(),
        Arg::new(c"ms", ArgType::Integer).after(c"TIMEOUT").optional(),
        CLIENT,
        Arg::new(c"ticket", ArgType::String)
            .after(c"TICKET")
            .optional(),
        RATE,
    ],
};

pub fn parse<'a>(args: &'a [&'a [u8]]) -> Result<AcquireRequest<'a>, Error> {
    let mut tokens = Tokens::new(args);
    let key = tokens.next_arg().ok_or(Error::WrongArity)?;
    let permits = match tokens.next_if_numeric() {
        Some(arg) => args::permits(arg)?,
        None => 1,
    };
    let options = acquire_options(&mut tokens, true)?;
    Ok(AcquireRequest {
        key,
        permits,
        timeout_ms: options.timeout.unwrap_or(0),
        client: options.client,
        create: options.create,
        ticket: options.ticket,
    })
}

pub fn run(ctx: &Context, args: &[&[u8]]) -> RedisResult {
    let request = parse(args)?;
    blocking::acquire(ctx, &request)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_in_any_order() {
        let args: [&[u8]; 8] = [
            b"k", b"3", b"ticket", b"t", b"client", b"c", b"timeout", b"250",
        ];
        let request = parse(&args).unwrap();
        assert_eq!(request.ticket, Some(&b"t"[..]));
        assert_eq!(request.permits, 3);
        assert_eq!(request.timeout_ms, 250);
        assert_eq!(request.client, Some(&b"c"[..]));
        let args: [&[u8]; 1] = [b"k"];
        let request = parse(&args).unwrap();
        assert_eq!((request.permits, request.timeout_ms), (1, 0));
    }

    #[test]
    fn bad_timeouts_and_repeats_are_errors() {
        let args: [&[u8]; 3] = [b"k", b"TIMEOUT", b"-1"];
        assert!(matches!(
            parse(&args),
            Err(Error::Number { arg: "TIMEOUT", .. })
        ));
        let args: [&[u8]; 5] = [b"k", b"TIMEOUT", b"1", b"TIMEOUT", b"2"];
        assert!(matches!(parse(&args), Err(Error::Syntax)));
        let args: [&[u8]; 5] = [b"k", b"TICKET", b"a", b"TICKET", b"b"];
        assert!(matches!(parse(&args), Err(Error::Syntax)));
        let args: [&[u8]; 3] = [b"k", b"TICKET", b""];
        assert!(matches!(parse(&args), Err(Error::BadTicket)));
        let args: [&[u8]; 2] = [b"k", b"TIMEOUT"];
        assert!(matches!(parse(&args), Err(Error::Syntax)));
    }
}
