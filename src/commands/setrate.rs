//! `RATELIMIT.SETRATE key rate interval [OVERALL | PER_CLIENT | ONEKEY] [KEEPALIVE ms] [PRECISION ms]
//! [NX | XX] [KEEPSTATE] [CLIENT id]`: create or reconfigure a limiter (Redisson `trySetRate`
//! with NX, `setRate` without a flag, `updateRate` with XX).

use redis_module::{Context, RedisResult, RedisValue};

use super::doc::{
    Arg, ArgType, Doc, Keys, CLIENT, KEEPALIVE, KEY, MODE, PRECISION, RATE_ARGS, UPDATE,
};
use super::ConfigOptions;
use crate::args::{self, Tokens};
use crate::blocking;
use crate::clock;
use crate::error::Error;
use crate::key::Write;
use crate::store::{Condition, LimiterKeys, RateChange};

pub const DOC: Doc = Doc {
    name: c"ratelimit.setrate",
    summary: c"Creates or reconfigures a rate limiter (Redisson trySetRate with NX, setRate, updateRate with XX).",
    complexity: c"O(1); a reset unlinks the state, big logs freed in the background. With KEEPSTATE O(log(N) + B) plus O(log(N)) per entry pruned, B being the entries between the old and the new cutoff; O(N) to repair a missing value or an unreadable configuration.",
    arity: -4,
    flags: c"write deny-oom",
    acl_categories: c"write slow",
    key: Keys::First(UPDATE),
    args: &[
        KEY,
        RATE_ARGS[0],
        RATE_ARGS[1],
        MODE,
        KEEPALIVE,
        PRECISION,
        Arg::new(
            c"condition",
            ArgType::OneOf(&[Arg::token(c"nx", c"NX"), Arg::token(c"xx", c"XX")]),
        )
        .optional(),
        Arg::token(c"keepstate", c"KEEPSTATE").optional(),
        CLIENT,
    ],
};

#[derive(Debug)]
pub struct Request<'a> {
    pub key: &'a [u8],
    pub change: RateChange<'a>,
}

pub fn parse<'a>(args: &'a [&'a [u8]]) -> Result<Request<'a>, Error> {
    let mut tokens = Tokens::new(args);
    let (Some(key), Some(rate), Some(interval)) =
        (tokens.next_arg(), tokens.next_arg(), tokens.next_arg())
    else {
        return Err(Error::WrongArity);
    };
    let mut config = ConfigOptions::new(rate, interval)?;
    let mut condition = None;
    let mut keep_state = None;
    let mut client = None;
    while tokens.peek().is_some() {
        if config.take(&mut tokens)? {
            continue;
        }
        let Some(token) = tokens.next_arg() else {
            break;
        };
        if args::is_keyword(token, "NX") {
            args::set_one_of(&mut condition, Condition::IfAbsent, "NX")?;
        } else if args::is_keyword(token, "XX") {
            args::set_one_of(&mut condition, Condition::IfExists, "XX")?;
        } else if args::is_keyword(token, "KEEPSTATE") {
            args::set_once(&mut keep_state, (), "KEEPSTATE")?;
        } else if args::is_keyword(token, "CLIENT") {
            let id = args::client_id(tokens.value_of_option("CLIENT")?)?;
            args::set_once(&mut client, id, "CLIENT")?;
        } else {
            return Err(Error::unknown_option(token));
        }
    }
    let condition = condition.map(|(condition, _)| condition);
    if condition == Some(Condition::IfAbsent) && keep_state.is_some() {
        return Err(Error::conflicting_options("NX", "KEEPSTATE"));
    }
    Ok(Request {
        key,
        change: RateChange {
            config: config.config()?,
            condition,
            keep_state: keep_state.is_some(),
            client,
        },
    })
}

pub fn run(ctx: &Context, args: &[&[u8]]) -> RedisResult {
    let request = parse(args)?;
    let now = clock::now_ms();
    let limiter = LimiterKeys::<Write>::open(ctx, request.key)?;
    let reply = limiter.set_rate(&request.change, now)?;
    drop(limiter);
    blocking::nudge(ctx, request.key);
    Ok(RedisValue::Integer(reply))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sliding_log::Mode;

    fn parse_all(args: &[&[u8]]) -> Result<RateChange<'static>, Error> {
        let owned: Vec<&'static [u8]> = args
            .iter()
            .map(|a| &*Box::leak(a.to_vec().into_boxed_slice()))
            .collect();
        let owned: &'static [&'static [u8]] = Box::leak(owned.into_boxed_slice());
        parse(owned).map(|r| r.change)
    }

    #[test]
    fn defaults_are_overall_without_keepalive() {
        let change = parse_all(&[b"k", b"10", b"1000"]).unwrap();
        assert_eq!(change.config.mode, Mode::Overall);
        assert_eq!(change.config.keep_alive, 0);
        assert_eq!(change.condition, None);
        assert!(!change.keep_state);
        assert_eq!(change.client, None);
    }

    #[test]
    fn options_are_case_insensitive_and_in_any_order() {
        let change = parse_all(&[
            b"k",
            b"5",
            b"100",
            b"client",
            b"c1",
            b"keepstate",
            b"xx",
            b"keepalive",
            b"200",
            b"per_client",
        ])
        .unwrap();
        assert_eq!(change.config.mode, Mode::PerClient);
        assert_eq!(change.config.keep_alive, 200);
        assert_eq!(change.condition, Some(Condition::IfExists));
        assert!(change.keep_state);
        assert_eq!(change.client, Some(&b"c1"[..]));
    }

    #[test]
    fn conflicts_and_repeats_are_syntax_errors_naming_the_word() {
        for (args, error) in [
            (
                &[&b"k"[..], b"5", b"100", b"NX", b"XX"][..],
                Error::conflicting_options("NX", "XX"),
            ),
            (
                &[b"k", b"5", b"100", b"xx", b"nx"],
                Error::conflicting_options("XX", "NX"),
            ),
            (
                &[b"k", b"5", b"100", b"NX", b"KEEPSTATE"],
                Error::conflicting_options("NX", "KEEPSTATE"),
            ),
            (
                &[b"k", b"5", b"100", b"KEEPSTATE", b"NX"],
                Error::conflicting_options("NX", "KEEPSTATE"),
            ),
            (
                &[b"k", b"5", b"100", b"OVERALL", b"PER_CLIENT"],
                Error::conflicting_options("OVERALL", "PER_CLIENT"),
            ),
            (
                &[b"k", b"5", b"100", b"XX", b"xx"],
                Error::repeated_option("XX"),
            ),
            (
                &[b"k", b"5", b"100", b"KEEPSTATE", b"KEEPSTATE"],
                Error::repeated_option("KEEPSTATE"),
            ),
            (
                &[b"k", b"5", b"100", b"KEEPALIVE"],
                Error::incomplete_option("KEEPALIVE", "a value"),
            ),
            (
                &[b"k", b"5", b"100", b"FAST"],
                Error::unknown_option(b"FAST"),
            ),
        ] {
            assert_eq!(parse_all(args).unwrap_err(), error, "{args:?}");
        }
    }

    #[test]
    fn numbers_are_range_checked_by_name() {
        let err = |args: &[&[u8]]| parse_all(args).unwrap_err().to_string();
        assert_eq!(
            err(&[b"k", b"0", b"100"]),
            "ERR rate must be an integer between 1 and 4294967295"
        );
        assert_eq!(
            err(&[b"k", b"4294967296", b"100"]),
            "ERR rate must be an integer between 1 and 4294967295"
        );
        assert!(err(&[b"k", b"1", b"0"]).starts_with("ERR interval must be"));
        assert!(err(&[b"k", b"1", b"abc"]).starts_with("ERR interval must be"));
        assert!(err(&[b"k", b"1", b"10", b"KEEPALIVE", b"-1"]).starts_with("ERR KEEPALIVE must be"));
        assert_eq!(
            err(&[b"k", b"1", b"1000", b"KEEPALIVE", b"999"]),
            "ERR KEEPALIVE must be 0 or at least the interval"
        );
        assert!(parse_all(&[b"k", b"1", b"1000", b"KEEPALIVE", b"1000"]).is_ok());
        assert_eq!(parse_all(&[b"k", b"1"]).unwrap_err(), Error::WrongArity);
    }
}
