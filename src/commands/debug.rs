//! `RATELIMIT.DEBUG SETCLOCK unix-ms | ADVANCE ms | REALCLOCK | CONFIGCACHE ALWAYS|AUTO`: a
//! frozen clock for deterministic tests, and the config cache held in use for tests of what it
//! keeps. Registered only when the module is loaded with `debug-commands yes`.

use redis_module::{Context, RedisResult, RedisValue};

use super::doc::{Arg, ArgType, Doc, Keys};
use crate::args::{self, MAX_DURATION_MS};
use crate::blocking;
use crate::clock;
use crate::config_cache;
use crate::error::Error;

pub const DOC: Doc = Doc {
    name: c"ratelimit.debug",
    summary: c"Freezes, advances or releases the module's clock, or holds the config cache in use (only with the load option debug-commands yes).",
    complexity: c"O(1), plus serving blocked ACQUIRE callers whose time has come.",
    arity: -2,
    flags: c"admin",
    acl_categories: c"admin slow dangerous",
    key: Keys::None,
    args: &[Arg::new(
        c"subcommand",
        ArgType::OneOf(&[
            Arg::new(c"unix-ms", ArgType::Integer).after(c"SETCLOCK"),
            Arg::new(c"ms", ArgType::Integer).after(c"ADVANCE"),
            Arg::token(c"realclock", c"REALCLOCK"),
            Arg::new(
                c"mode",
                ArgType::OneOf(&[
                    Arg::token(c"always", c"ALWAYS"),
                    Arg::token(c"auto", c"AUTO"),
                ]),
            )
            .after(c"CONFIGCACHE"),
        ]),
    )],
};

/// Largest clock value: scores stay exact integers in a zset's f64 below 2^53.
const MAX_CLOCK_MS: i64 = (1 << 53) - 1;

/// A RATELIMIT.DEBUG subcommand.
#[derive(Debug, PartialEq, Eq)]
pub enum Request {
    SetClock(i64),
    Advance(i64),
    RealClock,
    /// The config cache in use whatever the calls' spread (ALWAYS), or as it decides (AUTO).
    ConfigCache {
        always: bool,
    },
}

const UNKNOWN: &str =
    "unknown subcommand: use SETCLOCK unix-ms, ADVANCE ms, REALCLOCK or CONFIGCACHE ALWAYS|AUTO";

pub fn parse(args: &[&[u8]]) -> Result<Request, Error> {
    match args {
        [sub, ms] if args::is_keyword(sub, "SETCLOCK") => Ok(Request::SetClock(args::integer(
            ms,
            "unix-ms",
            0,
            MAX_CLOCK_MS,
        )?)),
        [sub, ms] if args::is_keyword(sub, "ADVANCE") => Ok(Request::Advance(args::integer(
            ms,
            "ms",
            0,
            MAX_DURATION_MS,
        )?)),
        [sub] if args::is_keyword(sub, "REALCLOCK") => Ok(Request::RealClock),
        [sub, mode] if args::is_keyword(sub, "CONFIGCACHE") => {
            if args::is_keyword(mode, "ALWAYS") {
                Ok(Request::ConfigCache { always: true })
            } else if args::is_keyword(mode, "AUTO") {
                Ok(Request::ConfigCache { always: false })
            } else {
                Err(Error::Debug("CONFIGCACHE takes ALWAYS or AUTO"))
            }
        }
        [] => Err(Error::WrongArity),
        _ => Err(Error::Debug(UNKNOWN)),
    }
}

pub fn run(ctx: &Context, args: &[&[u8]]) -> RedisResult {
    let reply = match parse(args)? {
        Request::SetClock(ms) => {
            clock::freeze_at(ms);
            RedisValue::SimpleStringStatic("OK")
        }
        Request::Advance(ms) => match clock::advance(ms) {
            Some(now) if now <= MAX_CLOCK_MS => RedisValue::Integer(now),
            Some(_) | None => {
                return Err(Error::Debug(
                    "the clock is not frozen (use SETCLOCK) or would overflow",
                )
                .into())
            }
        },
        Request::RealClock => {
            clock::unfreeze();
            RedisValue::SimpleStringStatic("OK")
        }
        Request::ConfigCache { always } => {
            config_cache::hold_in_use(always);
            return Ok(RedisValue::SimpleStringStatic("OK"));
        }
    };
    // Time may have moved: blocked ACQUIRE callers whose time has come are served.
    blocking::nudge_all(ctx);
    Ok(reply)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subcommands_and_their_numbers() {
        let args: [&[u8]; 2] = [b"setclock", b"5"];
        assert_eq!(parse(&args), Ok(Request::SetClock(5)));
        let args: [&[u8]; 2] = [b"ADVANCE", b"-1"];
        assert!(matches!(parse(&args), Err(Error::Number { arg: "ms", .. })));
        let args: [&[u8]; 1] = [b"RealClock"];
        assert_eq!(parse(&args), Ok(Request::RealClock));
        let args: [&[u8]; 1] = [b"SETCLOCK"];
        assert!(matches!(parse(&args), Err(Error::Debug(_))));
        let args: [&[u8]; 2] = [b"configcache", b"Always"];
        assert_eq!(parse(&args), Ok(Request::ConfigCache { always: true }));
        let args: [&[u8]; 2] = [b"CONFIGCACHE", b"auto"];
        assert_eq!(parse(&args), Ok(Request::ConfigCache { always: false }));
        let args: [&[u8]; 2] = [b"CONFIGCACHE", b"never"];
        assert!(matches!(parse(&args), Err(Error::Debug(_))));
        let args: [&[u8]; 0] = [];
        assert_eq!(parse(&args), Err(Error::WrongArity));
    }
}
