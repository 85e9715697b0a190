//! `RATELIMIT.ACQUIRE key [permits] [TIMEOUT ms] [CLIENT id] [TICKET ticket] [RATE rate interval
//! [OVERALL | PER_CLIENT | ONEKEY] [KEEPALIVE ms] [PRECISION ms]]`: a blocking acquire served by the
//! server, first come first served; `RATE` creates the limiter on first use. Replies nil once
//! acquired, or the wait hint if TIMEOUT ran out first. Inside MULTI or a script it does not
//! block and answers as TRYACQUIRE. `TICKET` names this wait for RATELIMIT.CANCEL, and makes a
//! resend of a wait already granted answer nil without taking again.

use redis_module::{Context, RedisResult, RedisValue};

use super::acquire_options;
use super::doc::{Arg, ArgType, Doc, Keys, CLIENT, KEY, RATE, UPDATE};
use crate::args::{self, Tokens};
use crate::blocking::{self, Wait};
use crate::clock;
use crate::error::Error;
use crate::key::Write;
use crate::queue;
use crate::sliding_log::{Config, Outcome, Reset};
use crate::stats::{self, Decision};
use crate::store::{Acquisition, LimiterKeys, Resolved, Turn};
use crate::tickets::{self, Fate};

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

/// An ACQUIRE, from its arguments to its grant or its wait.
#[derive(Debug, PartialEq, Eq)]
pub struct Request<'a> {
    pub key: &'a [u8],
    pub permits: u32,
    /// 0 waits forever.
    pub timeout_ms: i64,
    pub client: Option<&'a [u8]>,
    /// Creates the limiter on first use.
    pub create: Option<Config>,
    /// The caller's id of this wait: a resend answers from its grant, and RATELIMIT.CANCEL
    /// names it.
    pub ticket: Option<&'a [u8]>,
}

pub fn parse<'a>(args: &'a [&'a [u8]]) -> Result<Request<'a>, Error> {
    let mut tokens = Tokens::new(args);
    let key = tokens.next_arg().ok_or(Error::WrongArity)?;
    let permits = match tokens.next_if_numeric() {
        Some(arg) => args::permits(arg)?,
        None => 1,
    };
    let options = acquire_options(&mut tokens, true)?;
    Ok(Request {
        key,
        permits,
        timeout_ms: options.timeout.unwrap_or(0),
        client: options.client,
        create: options.create,
        ticket: options.ticket,
    })
}

/// Acquires now, or blocks the caller in the limiter's queue.
pub fn run(ctx: &Context, args: &[&[u8]]) -> RedisResult {
    let request = parse(args)?;
    let now = clock::now_ms();
    let can_block = blocking::can_block(ctx);
    let turn = if can_block {
        Turn::Queueing
    } else {
        Turn::BehindWaiters
    };
    let limiter = LimiterKeys::<Write>::open(ctx, request.key)?;
    let resolved = match resolve(&limiter, &request, now)? {
        Ok(resolved) => resolved,
        Err(answer) => return Ok(answer),
    };
    let acquisition = Acquisition {
        permits: request.permits,
        turn,
        queued: blocking::queued(&resolved),
        reset: Reset::NotWanted,
        now,
    };
    let verdict = limiter.acquire(&resolved, acquisition)?;
    let hint_ms = match verdict.outcome {
        Outcome::Acquired => {
            stats::decided(request.key, verdict.decision());
            if let Some(ticket) = request.ticket {
                blocking::remember_grant(ticket, resolved.id(), &verdict, now);
            }
            return Ok(RedisValue::Null);
        }
        Outcome::Wait(ms) => ms,
    };
    if !can_block {
        stats::decided(request.key, Decision::Refused);
        return Ok(RedisValue::Integer(hint_ms));
    }
    let wait = Wait {
        state: resolved.id().clone(),
        watched: resolved.watched(request.key),
        config: limiter.config_to_keep(&resolved),
        request: queue::Request {
            name: request.key.to_vec(),
            client: request.client.map(<[u8]>::to_vec),
            permits: request.permits,
            ticket: request.ticket.map(<[u8]>::to_vec),
        },
        timeout_ms: request.timeout_ms,
        hint_ms,
    };
    drop(resolved);
    drop(limiter);
    blocking::block(ctx, wait)
}

/// The limiter resolved for this request, unless its ticket answers it: a resend of a wait
/// already granted answers nil, taking nothing; one cancelled is refused with the wait hint.
/// Errors come in the order TRYACQUIRE gives them (the configuration, the permits, the state),
/// except that a ticket already granted answers whatever the permits.
fn resolve<'c>(
    limiter: &LimiterKeys<'c, Write>,
    request: &Request<'_>,
    now: i64,
) -> Result<Result<Resolved<'c, Write>, RedisValue>, Error> {
    let configuration = limiter.configuration(request.create.as_ref())?;
    let mut resolved = None;
    // A limiter about to be created has no ticket to look up.
    if let Some(ticket) = request.ticket.filter(|_| configuration.exists()) {
        let found = limiter.resolve(configuration, request.client);
        if let Ok(on) = &found {
            match tickets::fate(ticket, on.id(), now) {
                Some(Fate::Granted { .. }) => return Ok(Err(RedisValue::Null)),
                Some(Fate::Cancelled) => {
                    let queued = blocking::queued(on).unwrap_or(0);
                    let wait = on.wait_hint(request.permits, queued, now)?;
                    stats::decided(request.key, Decision::Refused);
                    return Ok(Err(RedisValue::Integer(wait)));
                }
                None => {}
            }
        }
        resolved = Some(found);
    }
    configuration.check_permits(request.permits)?;
    match resolved {
        Some(found) => found.map(Ok),
        None => limiter.resolve(configuration, request.client).map(Ok),
    }
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
        assert_eq!(parse(&args).unwrap_err(), Error::repeated_option("TIMEOUT"));
        let args: [&[u8]; 5] = [b"k", b"TICKET", b"a", b"TICKET", b"b"];
        assert_eq!(parse(&args).unwrap_err(), Error::repeated_option("TICKET"));
        let args: [&[u8]; 3] = [b"k", b"TICKET", b""];
        assert!(matches!(parse(&args), Err(Error::BadTicket { max: 64 })));
        let args: [&[u8]; 2] = [b"k", b"TIMEOUT"];
        assert_eq!(
            parse(&args).unwrap_err(),
            Error::incomplete_option("TIMEOUT", "a value")
        );
    }
}
