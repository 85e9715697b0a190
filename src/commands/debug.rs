//! `RATELIMIT.DEBUG SETCLOCK unix-ms | ADVANCE ms | REALCLOCK`: a frozen clock for deterministic
//! tests. Registered only when the module is loaded with `debug-commands yes`.

use redis_module::{Context, RedisResult, RedisString, RedisValue};

use super::byte_args;
use super::doc::{Arg, Doc, Keys, Kind};
use crate::args::{self, MAX_DURATION_MS};
use crate::blocking;
use crate::clock;
use crate::error::Error;

pub const DOC: Doc = Doc {
    name: c"ratelimit.debug",
    summary: c"Freezes, advances or releases the module's clock (only with the load option debug-commands yes).",
    complexity: c"O(1), plus serving blocked ACQUIRE callers whose time has come.",
    arity: -2,
    acl_categories: c"admin slow dangerous",
    key: Keys::None,
    args: &[Arg::new(
        c"subcommand",
        Kind::OneOf(&[
            Arg::new(c"unix-ms", Kind::Integer).after(c"SETCLOCK"),
            Arg::new(c"ms", Kind::Integer).after(c"ADVANCE"),
            Arg::token(c"realclock", c"REALCLOCK"),
        ]),
    )],
};

/// Largest clock value: scores stay exact integers in a zset's f64 below 2^53.
const MAX_CLOCK_MS: i64 = (1 << 53) - 1;

pub fn run(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    let reply = clock_command(&args)?;
    // Time may have moved: blocked ACQUIRE callers whose time has come are served.
    blocking::nudge_all(ctx);
    Ok(reply)
}

fn clock_command(args: &[RedisString]) -> RedisResult {
    let args = byte_args(args);
    match args.as_slice() {
        [sub, ms] if args::is_keyword(sub, "SETCLOCK") => {
            clock::freeze_at(args::integer(ms, "unix-ms", 0, MAX_CLOCK_MS)?);
            Ok(RedisValue::SimpleStringStatic("OK"))
        }
        [sub, ms] if args::is_keyword(sub, "ADVANCE") => {
            let ms = args::integer(ms, "ms", 0, MAX_DURATION_MS)?;
            match clock::advance(ms) {
                Some(now) if now <= MAX_CLOCK_MS => Ok(RedisValue::Integer(now)),
                Some(_) | None => Err(Error::Debug(
                    "the clock is not frozen (use SETCLOCK) or would overflow",
                )
                .into()),
            }
        }
        [sub] if args::is_keyword(sub, "REALCLOCK") => {
            clock::unfreeze();
            Ok(RedisValue::SimpleStringStatic("OK"))
        }
        [] => Err(Error::WrongArity.into()),
        _ => Err(
            Error::Debug("unknown subcommand: use SETCLOCK unix-ms, ADVANCE ms or REALCLOCK")
                .into(),
        ),
    }
}
