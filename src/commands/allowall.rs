//! `RATELIMIT.ALLOWALL numkeys key [key ...] [PERMITS n] [CLIENT id]`: several limits at once,
//! all or nothing. `n` permits are taken from every listed limiter, or from none; a refusal
//! charges nothing anywhere. Replies as ALLOW, plus `limited_by`.

use redis_module::{Context, RedisResult, RedisValue};

use super::doc::{Arg, ArgType, Doc, Keys, CLIENT, UPDATE};
use super::reply_verdict;
use crate::args::{self, Tokens};
use crate::blocking;
use crate::clock;
use crate::error::Error;
use crate::ffi::command;
use crate::key::Write;
use crate::sliding_log::{Outcome, Reset};
use crate::stats;
use crate::store::{Acquisition, LimiterKeys, Turn, Verdict};

pub const DOC: Doc = Doc {
    name: c"ratelimit.allowall",
    summary: c"Takes permits from every listed limiter or from none, and replies as RATELIMIT.ALLOW plus limited_by.",
    complexity: c"O(L) times the cost of RATELIMIT.ALLOW, L being the limiters listed.",
    arity: -3,
    flags: c"write deny-oom getkeys-api",
    acl_categories: c"write slow",
    key: Keys::Numkeys(UPDATE),
    args: &[
        Arg::new(c"numkeys", ArgType::Integer),
        Arg::new(c"key", ArgType::Key).multiple(),
        Arg::new(c"n", ArgType::Integer).after(c"PERMITS").optional(),
        CLIENT,
    ],
};

/// The most limiters one call may list.
pub const MAX_KEYS: i64 = 1024;

#[derive(Debug, PartialEq, Eq)]
pub struct Request<'a> {
    pub keys: Vec<&'a [u8]>,
    pub permits: u32,
    pub client: Option<&'a [u8]>,
}

pub fn parse<'a>(args: &'a [&'a [u8]]) -> Result<Request<'a>, Error> {
    let mut tokens = Tokens::new(args);
    let numkeys = tokens.next_arg().ok_or(Error::WrongArity)?;
    let numkeys = args::integer(numkeys, "numkeys", 1, MAX_KEYS)?;
    let mut keys = Vec::new();
    for _ in 0..numkeys {
        keys.push(tokens.next_arg().ok_or(Error::WrongArity)?);
    }
    let mut permits = None;
    let mut client = None;
    while let Some(token) = tokens.next_arg() {
        if args::is_keyword(token, "PERMITS") {
            let count = args::permits(tokens.value_of_option("PERMITS")?)?;
            args::set_once(&mut permits, count, "PERMITS")?;
        } else if args::is_keyword(token, "CLIENT") {
            let id = args::client_id(tokens.value_of_option("CLIENT")?)?;
            args::set_once(&mut client, id, "CLIENT")?;
        } else {
            return Err(Error::unknown_option(token));
        }
    }
    let mut sorted = keys.clone();
    sorted.sort_unstable();
    if let Some(pair) = sorted.windows(2).find(|pair| pair[0] == pair[1]) {
        return Err(Error::KeyListedTwice {
            key: pair[0].to_vec(),
        });
    }
    Ok(Request {
        keys,
        permits: permits.unwrap_or(1),
        client,
    })
}

pub fn run(ctx: &Context, args: &[&[u8]]) -> RedisResult {
    // The server asks where the keys are (the command is registered `getkeys-api`): the key spec
    // alone is not what Redis 7.0 uses to route a module command in a cluster.
    if command::is_keys_position_request(ctx) {
        declare_keys(ctx, args);
        return Ok(RedisValue::NoReply);
    }
    let request = parse(args)?;
    let now = clock::now_ms();
    // Every limiter is opened, resolved, read and decided before anything is written.
    let limiters = request
        .keys
        .iter()
        .map(|&key| LimiterKeys::<Write>::open(ctx, key).map_err(|e| e.of_limiter(key)))
        .collect::<Result<Vec<_>, Error>>()?;
    // Each limiter resolved once. Errors are told in the order of the limiters listed, each
    // limiter's in the order TRYACQUIRE gives them: a limiter's error reading its log comes
    // before a later limiter's error resolving.
    let resolved: Vec<Result<_, Error>> = limiters
        .iter()
        .map(|limiter| limiter.resolve_for(None, request.client, request.permits))
        .collect();
    let mut attempts = Vec::with_capacity(limiters.len());
    for ((limiter, found), &key) in limiters.iter().zip(&resolved).zip(&request.keys) {
        let one = found.as_ref().map_err(|e| e.clone().of_limiter(key))?;
        let acquisition = Acquisition {
            permits: request.permits,
            turn: Turn::BehindWaiters,
            queued: blocking::queued(one),
            reset: Reset::Wanted,
            now,
        };
        attempts.push(
            limiter
                .attempt(one, acquisition)
                .map_err(|e| e.of_limiter(key))?,
        );
    }
    // Names that derive the same keys (`a` and `{a}`) would take from one state twice.
    let named: Vec<_> = resolved.iter().flatten().zip(&request.keys).collect();
    for (i, &(one, &second)) in named.iter().enumerate() {
        let earlier = named.iter().take(i);
        if let Some(&(_, &first)) = earlier
            .into_iter()
            .find(|(other, _)| other.shares_state_with(one))
        {
            return Err(Error::SharedState {
                first: first.to_vec(),
                second: second.to_vec(),
            }
            .into());
        }
    }
    let all = attempts.iter().all(|attempt| attempt.grants());
    let verdicts = limiters
        .iter()
        .zip(&attempts)
        .map(|(limiter, attempt)| limiter.commit(attempt, all))
        .collect::<Result<Vec<_>, Error>>()?;
    let (verdict, limited_by) = combine(&verdicts, &request.keys, all);
    // One request, one decision: counted under the limiter the reply names (limited_by), or
    // the first that refused, or, granted, the one with the fewest permits left.
    let decided_by = limited_by
        .or_else(|| {
            let refusing = attempts.iter().position(|attempt| !attempt.grants());
            refusing.and_then(|i| request.keys.get(i).copied())
        })
        .or_else(|| {
            let tightest = verdicts.iter().enumerate().min_by_key(|(_, v)| v.remaining);
            tightest.and_then(|(i, _)| request.keys.get(i).copied())
        });
    if let Some(name) = decided_by {
        stats::decided(name, verdict.decision());
    }
    reply_verdict(ctx, &verdict, Some(limited_by));
    Ok(RedisValue::NoReply)
}

/// Tells the server the positions of `key [key ...]` after `numkeys`: nothing when numkeys is
/// not valid for the arguments given (the command then fails when it runs).
fn declare_keys(ctx: &Context, args: &[&[u8]]) {
    let Some(numkeys) = args.first() else {
        return;
    };
    let Ok(numkeys) = args::integer(numkeys, "numkeys", 1, MAX_KEYS) else {
        return;
    };
    let keys = numkeys as usize;
    if keys >= args.len() {
        return;
    }
    // Positions in the whole command: its name is 0, numkeys 1, the keys from 2.
    for position in 2..2 + keys {
        command::declare_key(ctx, args.len() + 1, position);
    }
}

/// One verdict for all: `limit` and `remaining` of the limiter with the fewest remaining (the
/// first listed on a tie), the longest wait among those that refused and the limiter it is
/// (None when all granted), the longest `reset_after`.
fn combine<'a>(verdicts: &[Verdict], keys: &[&'a [u8]], all: bool) -> (Verdict, Option<&'a [u8]>) {
    let mut tightest: Option<&Verdict> = None;
    let mut longest: Option<(i64, &'a [u8])> = None;
    let mut reset_after = 0;
    for (verdict, &key) in verdicts.iter().zip(keys) {
        if tightest.is_none_or(|t| verdict.remaining < t.remaining) {
            tightest = Some(verdict);
        }
        if let Outcome::Wait(ms) = verdict.outcome {
            if ms > 0 && longest.is_none_or(|(longest, _)| ms > longest) {
                longest = Some((ms, key));
            }
        }
        reset_after = reset_after.max(verdict.reset_after);
    }
    let (limit, remaining) = tightest.map_or((0, 0), |t| (t.limit, t.remaining));
    let outcome = match (all, longest) {
        (true, _) => Outcome::Acquired,
        (false, Some((ms, _))) => Outcome::Wait(ms),
        (false, None) => Outcome::Wait(1),
    };
    let verdict = Verdict {
        outcome,
        limit,
        remaining,
        reset_after,
        logged: None,
    };
    (
        verdict,
        if all {
            None
        } else {
            longest.map(|(_, key)| key)
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_then_options() {
        let args: [&[u8]; 7] = [b"2", b"a", b"b", b"permits", b"3", b"CLIENT", b"c"];
        let request = parse(&args).unwrap();
        assert_eq!(request.keys, vec![&b"a"[..], b"b"]);
        assert_eq!((request.permits, request.client), (3, Some(&b"c"[..])));
        let args: [&[u8]; 2] = [b"1", b"PERMITS"];
        assert_eq!(parse(&args).unwrap().keys, vec![&b"PERMITS"[..]]);
    }

    #[test]
    fn bad_lists_are_errors() {
        let args: [&[u8]; 2] = [b"2", b"a"];
        assert_eq!(parse(&args), Err(Error::WrongArity));
        let args: [&[u8]; 2] = [b"0", b"a"];
        assert!(matches!(
            parse(&args),
            Err(Error::Number { arg: "numkeys", .. })
        ));
        let args: [&[u8]; 4] = [b"3", b"a", b"b", b"a"];
        assert_eq!(
            parse(&args),
            Err(Error::KeyListedTwice { key: b"a".to_vec() })
        );
        let args: [&[u8]; 4] = [b"1", b"a", b"PERMITS", b"0"];
        assert!(matches!(
            parse(&args),
            Err(Error::Number { arg: "permits", .. })
        ));
        let args: [&[u8]; 3] = [b"1", b"a", b"NX"];
        assert_eq!(parse(&args), Err(Error::unknown_option(b"NX")));
        let args: [&[u8]; 3] = [b"1", b"a", b"PERMITS"];
        assert_eq!(
            parse(&args),
            Err(Error::incomplete_option("PERMITS", "a value"))
        );
        let args: [&[u8]; 6] = [b"1", b"a", b"PERMITS", b"1", b"permits", b"2"];
        assert_eq!(parse(&args), Err(Error::repeated_option("PERMITS")));
    }

    fn verdict(outcome: Outcome, remaining: i64, reset_after: i64) -> Verdict {
        Verdict {
            outcome,
            limit: 10 + remaining,
            remaining,
            reset_after,
            logged: None,
        }
    }

    #[test]
    fn the_tightest_limiter_and_the_longest_wait_answer() {
        let keys: [&[u8]; 3] = [b"a", b"b", b"c"];
        let verdicts = [
            verdict(Outcome::Wait(0), 4, 100),
            verdict(Outcome::Wait(300), 0, 900),
            verdict(Outcome::Wait(500), 0, 500),
        ];
        let (combined, by) = combine(&verdicts, &keys, false);
        assert_eq!(combined.outcome, Outcome::Wait(500));
        assert_eq!(by, Some(&b"c"[..]));
        assert_eq!(
            (combined.limit, combined.remaining),
            (10, 0),
            "b: first of the tie"
        );
        assert_eq!(combined.reset_after, 900);
        let granted = [
            verdict(Outcome::Acquired, 3, 10),
            verdict(Outcome::Acquired, 1, 20),
        ];
        let (combined, by) = combine(&granted, &keys[..2], true);
        assert_eq!((combined.outcome, by), (Outcome::Acquired, None));
        assert_eq!((combined.remaining, combined.reset_after), (1, 20));
    }
}
