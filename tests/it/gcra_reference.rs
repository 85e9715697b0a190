//! `CL.THROTTLE` and `GCRA` against the real thing: redis-cell 0.5.0 and Redis's own `GCRA`
//! (the commit that has it), run side by side with the module, every call at the same instant
//! (libfaketime holds the reference's clock, the debug clock the module's). Same calls must give
//! the same five integers and leave the same stored value and expiry; keys one side wrote are
//! read by the other. See tests/it/common/reference.rs for how the references are built and run.

use crate::common::reference::{civil_from_days, Reference};
use crate::common::{error_line, set_clock, Connection, Rng, Server, Value};

/// 2027-01-15 08:00:00.206 UTC: later than the machine's real clock, so the absolute expiries
/// the module writes on its debug clock are in the future for its server too.
const START: i64 = 1_800_000_000_206;

/// What a key holds, as a client of that server sees it at the frozen instant: its value and
/// absolute expiry (ms), or None when it is absent or its expiry has passed on that clock.
type State = Option<(Vec<u8>, i64)>;

/// The two servers at one instant.
struct Pair {
    reference: Reference,
    theirs: Connection,
    _module: Server,
    ours: Connection,
    now: i64,
}

impl Pair {
    fn start() -> Option<Pair> {
        let reference = Reference::start(START)?;
        let theirs = reference.server.conn();
        let module = Server::start();
        let mut ours = module.conn();
        set_clock(&mut ours, START);
        Some(Pair {
            reference,
            theirs,
            _module: module,
            ours,
            now: START,
        })
    }

    fn advance(&mut self, ms: i64) {
        self.at(self.now + ms);
    }

    fn at(&mut self, ms: i64) {
        self.now = ms;
        self.reference.set_time(ms);
        set_clock(&mut self.ours, ms);
    }

    /// Runs `words` on both; each side's reply or error line.
    fn both(&mut self, words: &[String]) -> (Result<Value, String>, Result<Value, String>) {
        (query(&mut self.theirs, words), query(&mut self.ours, words))
    }

    /// Runs `words` on both and asserts the same reply (errors: the same line when
    /// `same_errors`, else only that both failed) and the same state of `key` afterwards.
    fn same(&mut self, words: &[String], same_errors: bool, context: &str) -> Option<Value> {
        let (theirs, ours) = self.both(words);
        let key = &words[1];
        if let Some(quantity) = self.redis_cell_differs(words, &theirs, &ours) {
            // What the module does better on purpose, checked, then the reference set back to
            // the module's state so that the sequence goes on comparable.
            self.check_difference(key, quantity, &ours, context);
            return ours.ok();
        }
        match (&theirs, &ours) {
            (Err(_), Err(_)) if !same_errors => {}
            _ => assert_eq!(
                theirs,
                ours,
                "{context}: `{}` at {} replied differently (reference, module)",
                words.join(" "),
                instant(self.now)
            ),
        }
        let per_ms = tat_per_ms(&words[0]);
        let (their_state, our_state) = (self.their_state(key, per_ms), self.our_state(key, per_ms));
        assert_eq!(
            their_state,
            our_state,
            "{context}: after `{}` at {} the key differs (reference, module)",
            words.join(" "),
            instant(self.now)
        );
        ours.ok()
    }

    /// The quantity of a `CL.THROTTLE` whose outcome differs from redis-cell's by design: a peek
    /// (quantity 0), which redis-cell still writes (the same TAT, a new TTL), and a refund that
    /// empties the bucket, where redis-cell fails ("Error while setting key expire") or keeps a
    /// key that never expires. None for every other call.
    fn redis_cell_differs(
        &mut self,
        words: &[String],
        theirs: &Result<Value, String>,
        ours: &Result<Value, String>,
    ) -> Option<i64> {
        if !words[0].eq_ignore_ascii_case("CL.THROTTLE") || words.len() != 6 {
            return None;
        }
        let quantity: i64 = words[5].parse().ok()?;
        let key = &words[1];
        let states_differ = self.their_state(key, NS_PER_MS) != self.our_state(key, NS_PER_MS);
        match quantity {
            0 => (theirs == ours && states_differ).then_some(0),
            q if q < 0 => {
                let failed =
                    matches!(theirs, Err(e) if e.contains("Error while setting key expire"));
                let kept_forever =
                    theirs.is_ok() && self.their_state(key, NS_PER_MS).is_some_and(|(_, e)| e < 0);
                (ours.is_ok() && (failed || kept_forever || (theirs == ours && states_differ)))
                    .then_some(q)
            }
            _ => None,
        }
    }

    fn check_difference(
        &mut self,
        key: &str,
        quantity: i64,
        ours: &Result<Value, String>,
        context: &str,
    ) {
        let our_state = self.our_state(key, NS_PER_MS);
        let their_state = self.their_state(key, NS_PER_MS);
        let now_ns = i128::from(self.now) * 1_000_000;
        let tat = |state: &State| -> Option<i128> {
            state
                .as_ref()
                .map(|(v, _)| String::from_utf8_lossy(v).parse().expect("a TAT"))
        };
        if quantity == 0 {
            // The same TAT, only not rewritten.
            assert_eq!(
                tat(&their_state).unwrap_or(now_ns).max(now_ns),
                tat(&our_state).unwrap_or(now_ns).max(now_ns),
                "{context}: a peek at {} left a different TAT",
                instant(self.now)
            );
        } else {
            let reply = ints(ours.as_ref().expect("a reply"));
            assert_eq!(
                (reply[0], reply[2], reply[3], reply[4]),
                (0, reply[1], -1, 0),
                "{context}: a refund past now at {} must reply an empty bucket",
                instant(self.now)
            );
            assert_eq!(our_state, None, "{context}: an empty bucket has no key");
        }
        let _: i64 = redis::cmd("DEL")
            .arg(key)
            .query(&mut self.theirs)
            .expect("DEL");
        if our_state.is_some() {
            copy_key(&mut self.ours, &mut self.theirs, key);
        }
    }

    fn their_state(&mut self, key: &str, per_ms: i64) -> State {
        state(&mut self.theirs, key, self.now, per_ms)
    }

    /// The module's server runs on the real clock: a key whose expiry the debug clock has
    /// passed is still stored there, but absent for the module's commands.
    fn our_state(&mut self, key: &str, per_ms: i64) -> State {
        state(&mut self.ours, key, self.now, per_ms)
    }
}

fn query(con: &mut Connection, words: &[String]) -> Result<Value, String> {
    let mut cmd = redis::cmd(&words[0]);
    for word in &words[1..] {
        cmd.arg(word.as_str());
    }
    cmd.query::<Value>(con).map_err(|e| error_line(&e))
}

/// `per_ms`: the units of the stored TAT in a millisecond (ns for `CL.THROTTLE`, µs for `GCRA`).
fn state(con: &mut Connection, key: &str, now: i64, per_ms: i64) -> State {
    let value: Option<Vec<u8>> = redis::cmd("GET").arg(key).query(con).expect("GET");
    let expiry: i64 = redis::cmd("PEXPIRETIME")
        .arg(key)
        .query(con)
        .expect("PEXPIRETIME");
    // A TAT behind now is an empty bucket on either side: the references' key is gone by then
    // (it expires at its TAT's millisecond), the module's is kept a millisecond longer when the
    // TAT fell inside the millisecond it was written in, and read as empty.
    let behind = |value: &[u8]| {
        std::str::from_utf8(value)
            .ok()
            .and_then(|text| text.parse::<i128>().ok())
            .is_some_and(|tat| tat < i128::from(now) * i128::from(per_ms))
    };
    match value {
        Some(value) if expiry >= 0 && behind(&value) => None,
        Some(value) if expiry < 0 => Some((value, expiry)),
        // An expiry of now is gone a millisecond later on either side; the module never
        // writes one at or before now (its keys expire at now + 1 at the earliest).
        Some(value) if expiry >= now => Some((value, expiry.max(now + 1))),
        _ => None,
    }
}

const NS_PER_MS: i64 = 1_000_000;

/// The units of a stored TAT in a millisecond, by the command that wrote it.
fn tat_per_ms(command: &str) -> i64 {
    if command.eq_ignore_ascii_case("CL.THROTTLE") {
        NS_PER_MS
    } else {
        1000
    }
}

fn instant(ms: i64) -> String {
    let (y, m, d) = civil_from_days(ms.div_euclid(86_400_000));
    let in_day = ms.rem_euclid(86_400_000);
    format!(
        "{y}-{m:02}-{d:02} {:02}:{:02}:{:02}.{:03} ({ms})",
        in_day / 3_600_000,
        in_day / 60_000 % 60,
        in_day / 1000 % 60,
        in_day % 1000
    )
}

fn words(text: &str) -> Vec<String> {
    text.split_whitespace().map(str::to_string).collect()
}

fn ints(value: &Value) -> Vec<i64> {
    match value {
        Value::Array(items) => items
            .iter()
            .map(|item| match item {
                Value::Int(n) => *n,
                other => panic!("not an integer: {other:?}"),
            })
            .collect(),
        other => panic!("not an array: {other:?}"),
    }
}

#[test]
fn instants_are_written_as_libfaketime_reads_them() {
    assert_eq!(civil_from_days(0), (1970, 1, 1));
    assert_eq!(civil_from_days(11_016), (2000, 2, 29));
    assert_eq!(instant(START), "2027-01-15 08:00:00.206 (1800000000206)");
}

/// The reference's clock really is held: TIME answers the instant written.
#[test]
fn the_reference_clock_is_frozen_to_the_millisecond() {
    let Some(mut pair) = Pair::start() else {
        return;
    };
    for ms in [START, START + 1, START + 333, START + 86_400_001] {
        pair.at(ms);
        let time: Vec<String> = redis::cmd("TIME").query(&mut pair.theirs).expect("TIME");
        let micros: i64 =
            time[0].parse::<i64>().unwrap() * 1_000_000 + time[1].parse::<i64>().unwrap();
        assert_eq!(micros / 1000, ms, "TIME at {}", instant(ms));
    }
}

// ---------------------------------------------------------------------------------------------
// CL.THROTTLE against redis-cell 0.5.0

/// redis-cell rounds a time up only when a whole millisecond of the last second remains: the
/// fifth call 333 ms after four replies a retry of 0 s, not 1 s.
#[test]
fn throttle_rounds_as_redis_cell_does() {
    let Some(mut pair) = Pair::start() else {
        return;
    };
    let call = words("CL.THROTTLE k 3 3 1");
    for _ in 0..4 {
        pair.same(&call, false, "burst");
    }
    pair.advance(333);
    let reply = pair.same(&call, false, "333 ms later").expect("a reply");
    assert_eq!(ints(&reply), [1, 4, 0, 0, 1]);
}

#[test]
fn throttle_readme_example() {
    let Some(mut pair) = Pair::start() else {
        return;
    };
    let reply = pair
        .same(&words("CL.THROTTLE user123 15 30 60"), false, "README")
        .expect("a reply");
    assert_eq!(ints(&reply), [0, 16, 15, -1, 2]);
}

/// Peeks, refunds (down to an empty bucket), requests above the limit, and the instants around
/// a retry time and a key's expiry.
#[test]
fn throttle_edge_cases() {
    let Some(mut pair) = Pair::start() else {
        return;
    };
    let steps: &[(i64, &str)] = &[
        (0, "CL.THROTTLE e 2 10 60 0"),
        (0, "CL.THROTTLE e 2 10 60"),
        (0, "CL.THROTTLE e 2 10 60 0"),
        (0, "CL.THROTTLE e 2 10 60 2"),
        (0, "CL.THROTTLE e 2 10 60"),
        (0, "CL.THROTTLE e 2 10 60 0"),
        (5_999, "CL.THROTTLE e 2 10 60"),
        (1, "CL.THROTTLE e 2 10 60"),
        (0, "CL.THROTTLE e 2 10 60 -1"),
        (0, "CL.THROTTLE e 2 10 60 -2"),
        (0, "CL.THROTTLE e 2 10 60"),
        (0, "CL.THROTTLE e 2 10 60 4"),
        (0, "CL.THROTTLE e 2 10 60 3"),
        (17_999, "CL.THROTTLE e 2 10 60 0"),
        (1, "CL.THROTTLE e 2 10 60 0"),
        (1, "CL.THROTTLE e 2 10 60 0"),
        (0, "CL.THROTTLE e 2 10 60 3"),
        (0, "CL.THROTTLE e 2 10 60 -100"),
        (0, "CL.THROTTLE e 2 10 60"),
        (0, "CL.THROTTLE f 0 1 1"),
        (0, "CL.THROTTLE f 0 1 1"),
        (999, "CL.THROTTLE f 0 1 1"),
        (1, "CL.THROTTLE f 0 1 1"),
        (0, "CL.THROTTLE g 5 1000 1 6"),
        (0, "CL.THROTTLE g 5 1000 1"),
        (1, "CL.THROTTLE g 5 1000 1"),
        (0, "CL.THROTTLE h 100 7 3600 50"),
        (1_234, "CL.THROTTLE h 100 7 3600 50"),
        (0, "CL.THROTTLE h 100 7 3600 52"),
        (0, "CL.THROTTLE h 100 7 3600 -60"),
    ];
    for (gap, call) in steps {
        pair.advance(*gap);
        pair.same(&words(call), false, "edge");
    }
}

/// Seeded random sequences: parameters, gaps, quantities (peeks, refunds, too many).
#[test]
fn throttle_random_sequences_match_redis_cell() {
    let Some(mut pair) = Pair::start() else {
        return;
    };
    let mut rng = Rng(0x6c65_6c6c);
    for round in 0..24 {
        let burst = *rng.pick(&[0i64, 1, 2, 5, 15, 100]);
        let count = *rng.pick(&[1i64, 2, 3, 7, 10, 30, 60, 1000]);
        let period = *rng.pick(&[1i64, 2, 10, 60, 3600]);
        let emission_ms = (period * 1000 / count).max(1);
        let key = format!("cell:{round}");
        for _ in 0..60 {
            let gap = match rng.below(10) {
                0..=2 => 0,
                3..=7 => rng.below((emission_ms * 2) as u64) as i64,
                8 => rng.below(1000) as i64,
                _ => rng.below((period * 2000) as u64) as i64,
            };
            pair.advance(gap);
            let quantity = match rng.below(20) {
                0..=10 => 1,
                11..=12 => 0,
                13..=15 => 2 + rng.below(4) as i64,
                16..=17 => -1 - rng.below(3) as i64,
                18 => burst + 2,
                _ => burst + 1,
            };
            let call = format!("CL.THROTTLE {key} {burst} {count} {period} {quantity}");
            pair.same(&words(&call), false, &format!("round {round}"));
        }
    }
}

/// A key redis-cell wrote is read by the module, and the other way round: the value and its
/// expiry carried across at the same instant, the sequence goes on the same on both.
#[test]
fn throttle_keys_carry_over_both_ways() {
    let Some(mut pair) = Pair::start() else {
        return;
    };
    let call = words("CL.THROTTLE swap 4 10 60 2");
    // redis-cell writes; the module takes over its key.
    let _: Value = query(&mut pair.theirs, &call).expect("redis-cell");
    let _: Value = query(&mut pair.theirs, &call).expect("redis-cell");
    copy_key(&mut pair.theirs, &mut pair.ours, "swap");
    for gap in [0, 1_000, 5_000, 0, 12_345] {
        pair.advance(gap);
        pair.same(&call, false, "after redis-cell's key");
    }
    // The module writes; redis-cell takes over its key.
    let _: Value = query(&mut pair.ours, &call).expect("module");
    copy_key(&mut pair.ours, &mut pair.theirs, "swap");
    for gap in [0, 3_000, 0, 60_000] {
        pair.advance(gap);
        pair.same(&call, false, "after the module's key");
    }
}

fn copy_key(from: &mut Connection, to: &mut Connection, key: &str) {
    let value: Vec<u8> = redis::cmd("GET").arg(key).query(from).expect("GET");
    let expiry: i64 = redis::cmd("PEXPIRETIME")
        .arg(key)
        .query(from)
        .expect("PEXPIRETIME");
    assert!(expiry > 0, "{key} has no expiry");
    let _: () = redis::cmd("SET")
        .arg(key)
        .arg(value)
        .arg("PXAT")
        .arg(expiry)
        .query(to)
        .expect("SET");
}

// ---------------------------------------------------------------------------------------------
// GCRA against Redis's own

#[test]
fn gcra_burst_then_limited() {
    let Some(mut pair) = Pair::start() else {
        return;
    };
    let call = words("GCRA api:user:123 5 10 60");
    let first = pair.same(&call, true, "first").expect("a reply");
    assert_eq!(ints(&first), [0, 6, 5, -1, 6]);
    for _ in 0..5 {
        pair.same(&call, true, "burst");
    }
    let limited = pair.same(&call, true, "limited").expect("a reply");
    assert_eq!(ints(&limited)[0], 1);
}

#[test]
fn gcra_edge_cases() {
    let Some(mut pair) = Pair::start() else {
        return;
    };
    let steps: &[(i64, &str)] = &[
        (0, "GCRA a 0 1 1"),
        (0, "GCRA a 0 1 1"),
        (999, "GCRA a 0 1 1"),
        (1, "GCRA a 0 1 1"),
        (0, "GCRA b 2 4 1 TOKENS 3"),
        (0, "GCRA b 2 4 1 tokens 1"),
        (0, "GCRA b 2 4 1 TOKENS 4"),
        (249, "GCRA b 2 4 1"),
        (1, "GCRA b 2 4 1"),
        (0, "GCRA c 1 3 1"),
        (0, "GCRA c 1 3 1"),
        (0, "GCRA c 1 3 1"),
        (333, "GCRA c 1 3 1"),
        (1, "GCRA c 1 3 1"),
        (0, "GCRA d 3 2 0.25"),
        (0, "GCRA d 3 2 .5"),
        (0, "GCRA d 3 2 5."),
        (0, "GCRA d 3 2 1e0"),
        (0, "GCRA d 3 2 0x10"),
        (0, "GCRA e 10 7 3600 TOKENS 11"),
        (0, "GCRA e 10 7 3600 TOKENS 12"),
        (1_000, "GCRA e 10 7 3600"),
        (0, "GCRA f 9223372036854775806 1 1"),
        (0, "GCRA g 0 9223372036854775807 999999999999"),
    ];
    for (gap, call) in steps {
        pair.advance(*gap);
        pair.same(&words(call), true, "edge");
    }
}

/// Bad arguments: the same error line as Redis's `GCRA`, and nothing written.
#[test]
fn gcra_errors_match_redis() {
    let Some(mut pair) = Pair::start() else {
        return;
    };
    let calls = [
        "GCRA k",
        "GCRA k 1 1",
        "GCRA k 1 1 1 TOKENS",
        "GCRA k 1 1 1 TOKENS 1 extra",
        "GCRA k 1 1 1 COUNT 1",
        "GCRA k -1 1 1",
        "GCRA k x 1 1",
        "GCRA k 1.5 1 1",
        "GCRA k 1 0 1",
        "GCRA k 1 -3 1",
        "GCRA k 1 x 1",
        "GCRA k 1 1 0",
        "GCRA k 1 1 -1",
        "GCRA k 1 1 1e12",
        "GCRA k 1 1 inf",
        "GCRA k 1 1 nan",
        "GCRA k 1 1 abc",
        "GCRA k 1 1 1 TOKENS 0",
        "GCRA k 1 1 1 TOKENS -1",
        "GCRA k 1 1 1 TOKENS x",
        "GCRA k 1 1 1 TOKENS 9223372036854775808",
        "GCRA k 1 1 999999999999 TOKENS 9223372036854775807",
        "GCRA k 9223372036854775806 1 999999999999",
        "GCRA k 92233720368547758 1 1",
    ];
    for call in calls {
        pair.same(&words(call), true, "error");
    }
    // Spaces inside the period: sent as one argument.
    let spaced = vec![
        "GCRA".into(),
        "k".into(),
        "1".into(),
        "1".into(),
        " 1".into(),
    ];
    pair.same(&spaced, true, "spaced period");
}

/// A stored value that is not a TAT: Redis's error texts; a key of another type: WRONGTYPE.
#[test]
fn gcra_foreign_values_match_redis() {
    let Some(mut pair) = Pair::start() else {
        return;
    };
    for (key, value) in [
        ("v1", "abc"),
        ("v2", " 12"),
        ("v3", "1.5"),
        ("v4", "0"),
        ("v5", "-5"),
        ("v6", "18446744073709551616"),
    ] {
        for con in [&mut pair.theirs, &mut pair.ours] {
            let _: () = redis::cmd("SET")
                .arg(key)
                .arg(value)
                .query(con)
                .expect("SET");
        }
        pair.same(&words(&format!("GCRA {key} 1 1 1")), true, value);
    }
    for con in [&mut pair.theirs, &mut pair.ours] {
        let _: () = redis::cmd("RPUSH")
            .arg("list")
            .arg("x")
            .query(con)
            .expect("RPUSH");
    }
    let (theirs, ours) = pair.both(&words("GCRA list 1 1 1"));
    assert_eq!(theirs, ours);
}

#[test]
fn gcra_random_sequences_match_redis() {
    let Some(mut pair) = Pair::start() else {
        return;
    };
    let mut rng = Rng(0x6763_7261);
    for round in 0..24 {
        let burst = *rng.pick(&[0i64, 1, 2, 5, 20]);
        let tokens = *rng.pick(&[1i64, 2, 3, 10, 100]);
        let period = *rng.pick(&["1", "0.25", "1.5", "10", "60"]);
        let period_ms: f64 = period.parse().unwrap();
        let emission_ms = ((period_ms * 1000.0) / tokens as f64).max(1.0) as u64;
        let key = format!("gcra:{round}");
        for _ in 0..60 {
            let gap = match rng.below(10) {
                0..=2 => 0,
                3..=7 => rng.below(emission_ms * 2 + 1) as i64,
                8 => rng.below(1000) as i64,
                _ => rng.below((period_ms * 2000.0) as u64 + 1) as i64,
            };
            pair.advance(gap);
            let count = match rng.below(10) {
                0..=5 => 1,
                6..=8 => 1 + rng.below(4) as i64,
                _ => burst + 1 + rng.below(2) as i64,
            };
            let call = if count == 1 && rng.chance(50) {
                format!("GCRA {key} {burst} {tokens} {period}")
            } else {
                format!("GCRA {key} {burst} {tokens} {period} TOKENS {count}")
            };
            pair.same(&words(&call), true, &format!("round {round}"));
        }
    }
}

/// A key Redis's `GCRA` wrote is read by the module, and the other way round.
#[test]
fn gcra_keys_carry_over_both_ways() {
    let Some(mut pair) = Pair::start() else {
        return;
    };
    let call = words("GCRA swap 3 5 10 TOKENS 2");
    let _: Value = query(&mut pair.theirs, &call).expect("Redis");
    copy_key(&mut pair.theirs, &mut pair.ours, "swap");
    for gap in [0, 0, 1_500, 4_000] {
        pair.advance(gap);
        pair.same(&call, true, "after Redis's key");
    }
    let _: Value = query(&mut pair.ours, &call).expect("module");
    copy_key(&mut pair.ours, &mut pair.theirs, "swap");
    for gap in [0, 2_000, 0, 30_000] {
        pair.advance(gap);
        pair.same(&call, true, "after the module's key");
    }
}

/// Issue 23's sequence: T rounds to 1 µs, so each allowed call leaves a TAT less than a
/// millisecond ahead; a millisecond later that TAT is in the past (Redis's key, expiring at the
/// TAT's millisecond, is gone) and `TOKENS 1000`, above the limit, is limited. Redis counts the
/// full bucket, 3; the module once counted the TAT's 999 µs in the past as tokens too, 1002.
#[test]
fn gcra_above_the_limit_on_a_tat_just_past() {
    let Some(mut pair) = Pair::start() else {
        return;
    };
    const T0: i64 = 2_500_000_000_000;
    let steps: &[(i64, &str)] = &[
        (713_947_825, "GCRA g 2 973 0.0001 TOKENS 7"),
        (714_547_825, "GCRA g 2 973 0.0001"),
        (714_547_847, "GCRA g 2 973 0.0001"),
        (714_548_787, "GCRA g 2 973 0.0001"),
        (714_548_787, "GCRA g 2 973 0.0001 TOKENS 2"),
        (714_549_024, "GCRA g 2 973 0.0001"),
        (714_553_513, "GCRA g 2 973 0.0001"),
        (714_553_514, "GCRA g 2 973 0.0001 TOKENS 1000"),
    ];
    let mut last = None;
    for (at, call) in steps {
        pair.at(T0 + at);
        last = pair.same(&words(call), true, "issue 23");
    }
    assert_eq!(ints(&last.expect("a reply")), [1, 3, 3, -1, 0]);
}

/// What makes a stored TAT fall behind now while its key still counts: intervals below a
/// millisecond (the TAT lands inside the millisecond of the call), calls a millisecond apart,
/// and requests at, just above and far above the limit; burst 0 included.
#[test]
fn gcra_sweep_of_sub_millisecond_intervals_and_oversize_requests() {
    // (tokens_per_period, period): T = 1 µs, 103 µs, 143 µs, 667 µs, 1 ms, 1.25 ms, 100 ms.
    let rates: &[(i64, &str)] = &[
        (973, "0.0001"),
        (97, "0.01"),
        (7, "0.001"),
        (3, "0.002"),
        (1000, "1"),
        (800, "1"),
        (10, "1"),
    ];
    oversize_sweep(
        0x7461_7470,
        i64::from(u32::MAX),
        true,
        |rng, key, burst, tokens| {
            let (per_period, period) = *rng.pick(rates);
            format!("GCRA {key} {burst} {per_period} {period} TOKENS {tokens}")
        },
    );
}

/// The same for `CL.THROTTLE`: redis-cell's key, like Redis's, is gone once its TAT's
/// millisecond has passed, so a request above the limit then sees a full bucket. Peeks too.
#[test]
fn throttle_sweep_of_sub_millisecond_intervals_and_oversize_requests() {
    // count per 1 s: T = 1 µs, 200 µs, 667 µs, 1 ms, 1.25 ms, 100 ms.
    let counts: &[i64] = &[1_000_000, 5_000, 1_500, 1_000, 800, 10];
    oversize_sweep(0x6365_6c6c, 0, false, |rng, key, burst, quantity| {
        let count = *rng.pick(counts);
        format!("CL.THROTTLE {key} {burst} {count} 1 {quantity}")
    });
}

/// 40 keys of 40 calls each, both sides at once: a burst per key (0 often), gaps of mostly a
/// millisecond or two, amounts of 1, the limit, one more, 1000 and `other`; `call` writes the
/// command for the key, its burst and the amount.
fn oversize_sweep(
    seed: u64,
    other: i64,
    same_errors: bool,
    call: impl Fn(&mut Rng, &str, i64, i64) -> String,
) {
    let Some(mut pair) = Pair::start() else {
        return;
    };
    let mut rng = Rng(seed);
    for round in 0..40 {
        let burst = *rng.pick(&[0i64, 0, 1, 2, 3, 9]);
        let limit = burst + 1;
        let key = format!("sweep:{round}");
        // The key's rate, picked by `call` from a generator seeded the same for all its calls.
        let rate_seed = rng.next();
        for _ in 0..40 {
            let gap = *rng.pick(&[0i64, 0, 1, 1, 1, 2, 3, 7, 100, 1000]);
            pair.advance(gap);
            let amount = match rng.below(8) {
                0..=2 => 1,
                3 => limit,
                4 => limit + 1,
                5 => 1000,
                6 => 1 + rng.below(limit as u64 + 2) as i64,
                _ => other,
            };
            let words = words(&call(&mut Rng(rate_seed), &key, burst, amount));
            pair.same(&words, same_errors, &format!("round {round}"));
        }
    }
}
