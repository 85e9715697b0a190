//! The store's jobs on an in-memory dataset: what each reads, decides and writes, with no server.

use super::memory::{Memory, Value};
use super::writes::member_print;
use super::{Acquisition, Condition, OpenKey, RateChange, Turn};
use crate::error::Error;
use crate::key::{Read, Write};
use crate::keyspace::{self, StateKeys};
use crate::packed_log::{self, PackedLog};
use crate::sliding_log::{Config, Entry, Mode, Outcome, Reset};

const NAME: &[u8] = b"lim";
const T0: i64 = 1_000_000;

fn three_key(rate: i64, keep_alive: i64) -> Config {
    Config {
        rate,
        interval: 1000,
        mode: Mode::Overall,
        keep_alive,
        precision: 1,
    }
}

fn one_key(rate: i64, keep_alive: i64) -> Config {
    Config {
        rate,
        interval: 1000,
        mode: Mode::OneKey,
        keep_alive,
        precision: packed_log::default_precision(1000),
    }
}

fn value_key() -> Vec<u8> {
    StateKeys::overall(NAME).value.to_vec()
}

fn permits_key() -> Vec<u8> {
    StateKeys::overall(NAME).permits.to_vec()
}

fn take(permits: u32, now: i64) -> Acquisition {
    Acquisition {
        permits,
        turn: Turn::BehindWaiters,
        queued: None,
        reset: Reset::Wanted,
        now,
    }
}

/// TRYACQUIRE of `permits` at `now`, creating the limiter with `create` if it is absent.
fn acquire(
    memory: &Memory,
    create: Option<&Config>,
    permits: u32,
    now: i64,
) -> Result<super::Verdict, Error> {
    memory.set_now(now);
    let limiter = memory.limiter::<Write>(NAME)?;
    let resolved = limiter.resolve_for(create, None, permits)?;
    limiter.acquire(&resolved, take(permits, now))
}

fn set_rate(memory: &Memory, config: Config, keep_state: bool, now: i64) -> Result<i64, Error> {
    memory.set_now(now);
    let change = RateChange {
        config,
        condition: None,
        keep_state,
        client: None,
    };
    memory.limiter::<Write>(NAME)?.set_rate(&change, now)
}

fn available(memory: &Memory, now: i64) -> i64 {
    memory.set_now(now);
    let limiter = memory.limiter::<Read>(NAME).expect("opens");
    let resolved = limiter.resolve_existing(None).expect("resolves");
    resolved.available(0, now).expect("reads")
}

/// The permits zset's members as (score, permits).
fn entries(memory: &Memory) -> Vec<(f64, u32)> {
    match memory.get(&permits_key()) {
        Some(Value::ZSet(members)) => members
            .iter()
            .map(|(score, member)| {
                let decoded = keyspace::decode_member(member).expect("a member the module wrote");
                (*score, decoded.permits)
            })
            .collect(),
        None => Vec::new(),
        other => panic!("permits key holds {other:?}"),
    }
}

fn string(memory: &Memory, name: &[u8]) -> Option<Vec<u8>> {
    match memory.get(name) {
        Some(Value::String(bytes)) => Some(bytes),
        _ => None,
    }
}

fn packed(memory: &Memory) -> PackedLog {
    PackedLog::decode(&string(memory, NAME).expect("a string")).expect("a ONEKEY limiter")
}

#[test]
fn a_grant_creates_the_limiter_and_logs_its_permits_in_redissons_keys() {
    let memory = Memory::at(T0);
    let verdict = acquire(&memory, Some(&three_key(10, 0)), 3, T0).expect("granted");
    assert_eq!(verdict.outcome, Outcome::Acquired);
    assert_eq!((verdict.limit, verdict.remaining), (10, 7));
    // Redisson's hash, value (the permits left) and permits zset.
    let Some(Value::Hash(hash)) = memory.get(NAME) else {
        panic!("no hash")
    };
    assert_eq!(hash.get(&b"rate"[..]).map(Vec::as_slice), Some(&b"10"[..]));
    assert_eq!(
        hash.get(&b"interval"[..]).map(Vec::as_slice),
        Some(&b"1000"[..])
    );
    assert_eq!(hash.get(&b"type"[..]).map(Vec::as_slice), Some(&b"0"[..]));
    assert_eq!(string(&memory, &value_key()), Some(b"7".to_vec()));
    assert_eq!(entries(&memory), [(T0 as f64, 3)]);
    // The grant says where it was logged, for CANCEL.
    let logged = verdict.logged.expect("a grant is logged");
    assert_eq!(
        logged.entry,
        Entry {
            score: T0,
            permits: 3
        }
    );
    assert_eq!(logged.frees_at, T0 + 1000);
    let Some(Value::ZSet(members)) = memory.get(&permits_key()) else {
        panic!("no zset")
    };
    assert_eq!(member_print(&members[0].1), Some(logged.member));
    // A second grant in the same millisecond joins the same entry.
    acquire(&memory, None, 2, T0).expect("granted");
    assert_eq!(logged_sum(&memory), 5);
    assert_eq!(string(&memory, &value_key()), Some(b"5".to_vec()));
}

fn logged_sum(memory: &Memory) -> u32 {
    entries(memory).iter().map(|(_, permits)| permits).sum()
}

#[test]
fn a_refusal_says_when_the_permits_free_and_logs_nothing() {
    let memory = Memory::at(T0);
    acquire(&memory, Some(&three_key(2, 0)), 2, T0).expect("granted");
    memory.take_writes();
    let verdict = acquire(&memory, None, 1, T0 + 300).expect("decided");
    assert_eq!(verdict.outcome, Outcome::Wait(700));
    assert_eq!((verdict.remaining, verdict.logged), (0, None));
    assert_eq!(entries(&memory), [(T0 as f64, 2)]);
    assert_eq!(
        memory.take_writes(),
        Vec::<String>::new(),
        "a refusal writes nothing here"
    );
    // The hint an ACQUIRE that times out replies, also behind permits queued ahead.
    let limiter = memory.limiter::<Read>(NAME).expect("opens");
    let resolved = limiter.resolve_existing(None).expect("resolves");
    assert_eq!(resolved.wait_hint(1, 0, T0 + 300), Ok(700));
    assert_eq!(
        resolved.wait_hint(3, 0, T0 + 300),
        Err(Error::PermitsExceedRate)
    );
    // Once the window moved past the grant, the permits are back and the old entry goes.
    let verdict = acquire(&memory, None, 2, T0 + 1000).expect("granted");
    assert_eq!(verdict.outcome, Outcome::Acquired);
    assert_eq!(entries(&memory), [((T0 + 1000) as f64, 2)]);
}

#[test]
fn permits_queued_by_waiters_are_counted_as_taken() {
    let memory = Memory::at(T0);
    acquire(&memory, Some(&three_key(10, 0)), 4, T0).expect("granted");
    let limiter = memory.limiter::<Write>(NAME).expect("opens");
    let resolved = limiter.resolve_existing(None).expect("resolves");
    let behind = Acquisition {
        queued: Some(5),
        ..take(2, T0 + 10)
    };
    let verdict = limiter.acquire(&resolved, behind).expect("decided");
    assert!(
        matches!(verdict.outcome, Outcome::Wait(ms) if ms > 0),
        "{verdict:?}"
    );
    assert_eq!(verdict.remaining, 1, "6 available less the 5 queued");
    assert_eq!(logged_sum(&memory), 4);
    // The head of the queue being served is not behind itself.
    let head = Acquisition {
        turn: Turn::FirstInLine,
        queued: Some(5),
        ..take(5, T0 + 10)
    };
    assert_eq!(
        limiter.acquire(&resolved, head).expect("decided").outcome,
        Outcome::Acquired
    );
    assert_eq!(logged_sum(&memory), 9);
}

#[test]
fn a_onekey_limiter_keeps_its_whole_state_in_its_one_key() {
    let memory = Memory::at(T0);
    let config = one_key(5, 0);
    let verdict = acquire(&memory, Some(&config), 3, T0).expect("granted");
    assert_eq!(verdict.outcome, Outcome::Acquired);
    assert_eq!(verdict.remaining, 2);
    assert_eq!(
        memory.names(),
        [NAME.to_vec()],
        "one key, no hash or state keys"
    );
    let log = packed(&memory);
    assert_eq!(*log.config(), config);
    let logged = verdict.logged.expect("a grant is logged");
    assert_eq!(logged.member, u64::from(log.epoch()));
    assert_eq!(log.held_at(logged.entry.score), Some(3));
    // Refused: the wait until the grant frees, and no write.
    memory.take_writes();
    let verdict = acquire(&memory, None, 3, T0 + 100).expect("decided");
    let Outcome::Wait(wait) = verdict.outcome else {
        panic!("granted past the limit: {verdict:?}")
    };
    assert!((1..=1000).contains(&wait), "{wait}");
    assert_eq!(memory.take_writes(), Vec::<String>::new());
    assert_eq!(available(&memory, T0 + 100), 2);
}

#[test]
fn setrate_keepstate_keeps_the_permits_taken_and_without_it_starts_afresh() {
    let memory = Memory::at(T0);
    acquire(&memory, Some(&three_key(10, 0)), 4, T0).expect("granted");
    assert_eq!(set_rate(&memory, three_key(20, 0), true, T0 + 10), Ok(1));
    assert_eq!(available(&memory, T0 + 10), 16);
    assert_eq!(string(&memory, &value_key()), Some(b"16".to_vec()));
    assert_eq!(logged_sum(&memory), 4, "the log is kept");
    // Lowered below what is taken: a debt, nothing available.
    assert_eq!(set_rate(&memory, three_key(3, 0), true, T0 + 20), Ok(1));
    assert_eq!(available(&memory, T0 + 20), 0);
    // Without KEEPSTATE the state goes.
    assert_eq!(set_rate(&memory, three_key(3, 0), false, T0 + 30), Ok(1));
    assert_eq!(available(&memory, T0 + 30), 3);
    assert_eq!(memory.names(), [NAME.to_vec()]);
}

#[test]
fn setrate_keepstate_on_a_onekey_limiter_keeps_its_log() {
    let memory = Memory::at(T0);
    acquire(&memory, Some(&one_key(5, 0)), 4, T0).expect("granted");
    let epoch = packed(&memory).epoch();
    assert_eq!(set_rate(&memory, one_key(8, 0), true, T0 + 10), Ok(1));
    assert_eq!(packed(&memory).config().rate, 8);
    assert_eq!(packed(&memory).epoch(), epoch, "the same log");
    assert_eq!(available(&memory, T0 + 10), 4);
    assert_eq!(set_rate(&memory, one_key(8, 0), false, T0 + 20), Ok(1));
    assert_eq!(available(&memory, T0 + 20), 8);
    // NX leaves an existing limiter alone; a change of form is refused.
    let nx = RateChange {
        config: one_key(1, 0),
        condition: Some(Condition::IfAbsent),
        keep_state: false,
        client: None,
    };
    let limiter = memory.limiter::<Write>(NAME).expect("opens");
    assert_eq!(limiter.set_rate(&nx, T0 + 30), Ok(0));
    assert_eq!(packed(&memory).config().rate, 8);
    assert!(matches!(
        set_rate(&memory, three_key(8, 0), false, T0 + 30),
        Err(Error::FormChange { one_key: true, .. })
    ));
}

#[test]
fn release_gives_back_the_newest_permits_only_up_to_those_taken() {
    let memory = Memory::at(T0);
    acquire(&memory, Some(&three_key(10, 0)), 3, T0).expect("granted");
    acquire(&memory, None, 4, T0 + 5).expect("granted");
    let limiter = memory.limiter::<Write>(NAME).expect("opens");
    assert_eq!(limiter.release(None, 5, T0 + 10), Ok(5));
    // The newest entry (4) went whole; the older one was split to keep 2.
    assert_eq!(entries(&memory), [(T0 as f64, 2)]);
    assert_eq!(available(&memory, T0 + 10), 8);
    let limiter = memory.limiter::<Write>(NAME).expect("opens");
    assert_eq!(limiter.release(None, 9, T0 + 10), Ok(2));
    assert_eq!(available(&memory, T0 + 10), 10);
    // On a ONEKEY limiter too.
    let memory = Memory::at(T0);
    acquire(&memory, Some(&one_key(5, 0)), 4, T0).expect("granted");
    let limiter = memory.limiter::<Write>(NAME).expect("opens");
    assert_eq!(limiter.release(None, 3, T0 + 1), Ok(3));
    assert_eq!(available(&memory, T0 + 1), 4);
}

#[test]
fn cancel_gives_back_exactly_its_own_grant() {
    let memory = Memory::at(T0);
    let first = acquire(&memory, Some(&three_key(10, 0)), 2, T0).expect("granted");
    // Same millisecond: the second grant joins the first one's entry.
    acquire(&memory, None, 3, T0).expect("granted");
    let logged = first.logged.expect("logged");
    let limiter = memory.limiter::<Write>(NAME).expect("opens");
    let resolved = limiter.resolve_existing(None).expect("resolves");
    // Another entry's fingerprint gives nothing back.
    assert_eq!(
        limiter.give_back(&resolved, logged.entry, logged.member ^ 1, T0 + 10),
        Ok(0)
    );
    assert_eq!(
        limiter.give_back(&resolved, logged.entry, logged.member, T0 + 10),
        Ok(2)
    );
    assert_eq!(
        entries(&memory),
        [(T0 as f64, 3)],
        "the other grant's permits stay"
    );
    assert_eq!(available(&memory, T0 + 10), 7);
    // Once its permits freed, there is nothing left to give back.
    let late = limiter.resolve_existing(None).expect("resolves");
    let second = Entry {
        score: T0,
        permits: 3,
    };
    assert_eq!(
        limiter.give_back(&late, second, logged.member, T0 + 1000),
        Ok(0)
    );
}

#[test]
fn cancel_on_a_onekey_limiter_gives_back_only_in_the_same_epoch() {
    let memory = Memory::at(T0);
    let verdict = acquire(&memory, Some(&one_key(5, 0)), 3, T0).expect("granted");
    let logged = verdict.logged.expect("logged");
    let limiter = memory.limiter::<Write>(NAME).expect("opens");
    let resolved = limiter.resolve_existing(None).expect("resolves");
    let other_epoch = logged.member.wrapping_add(1);
    assert_eq!(
        limiter.give_back(&resolved, logged.entry, other_epoch, T0 + 1),
        Ok(0)
    );
    assert_eq!(
        limiter.give_back(&resolved, logged.entry, logged.member, T0 + 1),
        Ok(3)
    );
    assert_eq!(available(&memory, T0 + 1), 5);
}

#[test]
fn a_keep_alive_expires_all_three_keys_together_after_the_last_call() {
    let memory = Memory::at(T0);
    acquire(&memory, Some(&three_key(10, 5000)), 1, T0).expect("granted");
    for key in [NAME.to_vec(), value_key(), permits_key()] {
        assert_eq!(memory.expiry(&key), Some(T0 + 5000), "{key:?}");
    }
    acquire(&memory, None, 1, T0 + 2000).expect("granted");
    for key in [NAME.to_vec(), value_key(), permits_key()] {
        assert_eq!(memory.expiry(&key), Some(T0 + 7000), "{key:?}");
    }
    memory.set_now(T0 + 7000);
    assert!(memory.names().is_empty(), "the limiter expired whole");
}

#[test]
fn without_a_keep_alive_the_state_takes_the_hashs_own_ttl() {
    let memory = Memory::at(T0);
    acquire(&memory, Some(&three_key(10, 0)), 1, T0).expect("granted");
    assert_eq!(memory.expiry(NAME), None);
    assert_eq!(memory.expiry(&value_key()), None);
    // A client's PEXPIREAT on the hash: the next call gives the state the same expiry.
    let limiter = memory.limiter::<Write>(NAME).expect("opens");
    limiter
        .for_each_key(None, |key| {
            key.name() == NAME && key.apply(crate::key::Effect::PExpireAt(T0 + 9000))
        })
        .expect("applies");
    acquire(&memory, None, 1, T0 + 1).expect("granted");
    assert_eq!(memory.expiry(&value_key()), Some(T0 + 9000));
    assert_eq!(memory.expiry(&permits_key()), Some(T0 + 9000));
}

#[test]
fn a_onekey_keep_alive_is_set_with_the_state_and_a_refusal_leaves_it() {
    let memory = Memory::at(T0);
    acquire(&memory, Some(&one_key(1, 3000)), 1, T0).expect("granted");
    assert_eq!(memory.expiry(NAME), Some(T0 + 3000));
    acquire(&memory, None, 1, T0 + 10).expect("refused");
    assert_eq!(memory.expiry(NAME), Some(T0 + 3000));
    memory.set_now(T0 + 3000);
    assert!(memory.names().is_empty());
}

/// Reads a key of the store's, and checks it wrote nothing.
fn refused_without_a_write(memory: &Memory, create: Option<&Config>) -> Error {
    memory.take_writes();
    let error = acquire(memory, create, 1, T0).expect_err("refused");
    assert_eq!(memory.take_writes(), Vec::<String>::new(), "{error:?}");
    error
}

#[test]
fn a_limiter_key_of_another_type_is_wrongtype() {
    let memory = Memory::at(T0);
    memory.put(NAME, Value::Other);
    assert_eq!(
        refused_without_a_write(&memory, Some(&three_key(1, 0))),
        Error::WrongType
    );
    let memory = Memory::at(T0);
    memory.put(NAME, Value::ZSet(Vec::new()));
    assert!(memory.limiter::<Read>(NAME).is_err());
}

#[test]
fn a_state_key_of_another_type_is_named_in_the_error() {
    let memory = Memory::at(T0);
    acquire(&memory, Some(&three_key(5, 0)), 1, T0).expect("granted");
    memory.put(&permits_key(), Value::String(b"x".to_vec()));
    assert_eq!(
        refused_without_a_write(&memory, None),
        Error::WrongTypeDerived { key: permits_key() }
    );
}

#[test]
fn corrupt_onekey_bytes_and_foreign_strings_are_never_overwritten() {
    let memory = Memory::at(T0);
    let mut bytes = PackedLog::new(one_key(5, 0), 7).encode();
    bytes.truncate(bytes.len() - 1);
    memory.put(NAME, Value::String(bytes.clone()));
    assert!(matches!(
        refused_without_a_write(&memory, Some(&one_key(5, 0))),
        Error::Corrupt { key, .. } if key == NAME
    ));
    assert_eq!(string(&memory, NAME), Some(bytes));
    memory.put(NAME, Value::String(b"42".to_vec()));
    assert_eq!(
        refused_without_a_write(&memory, Some(&one_key(5, 0))),
        Error::NotALimiter { key: NAME.to_vec() }
    );
    assert!(matches!(
        set_rate(&memory, one_key(5, 0), false, T0),
        Err(Error::NotALimiter { .. })
    ));
    assert_eq!(string(&memory, NAME), Some(b"42".to_vec()));
}

#[test]
fn a_garbage_hash_field_is_corrupt_not_a_default() {
    for (field, bytes) in [
        (&b"rate"[..], &b"ten"[..]),
        (b"interval", b"0"),
        (b"keepAliveTime", b"-5"),
        (b"precision", b"x"),
    ] {
        let memory = Memory::at(T0);
        acquire(&memory, Some(&three_key(5, 0)), 1, T0).expect("granted");
        let Some(Value::Hash(mut hash)) = memory.get(NAME) else {
            panic!("no hash")
        };
        hash.insert(field.to_vec(), bytes.to_vec());
        memory.put(NAME, Value::Hash(hash));
        let error = refused_without_a_write(&memory, None);
        let field = String::from_utf8_lossy(field);
        assert!(
            matches!(&error, Error::Corrupt { key, problem } if key == NAME && problem.contains(&*field)),
            "{field}: {error:?}"
        );
    }
}

#[test]
fn a_hash_without_its_fields_is_not_initialized() {
    let memory = Memory::at(T0);
    let mut hash = std::collections::BTreeMap::new();
    hash.insert(b"rate".to_vec(), b"5".to_vec());
    memory.put(NAME, Value::Hash(hash));
    assert_eq!(
        refused_without_a_write(&memory, None),
        Error::not_initialized(NAME)
    );
}

#[test]
fn corrupt_state_values_and_members_are_named() {
    let memory = Memory::at(T0);
    acquire(&memory, Some(&three_key(5, 0)), 1, T0).expect("granted");
    memory.put(&value_key(), Value::String(b"many".to_vec()));
    assert!(matches!(
        refused_without_a_write(&memory, None),
        Error::Corrupt { key, .. } if key == value_key()
    ));
    let memory = Memory::at(T0);
    acquire(&memory, Some(&three_key(5, 0)), 1, T0).expect("granted");
    memory.put(
        &permits_key(),
        Value::ZSet(vec![(T0 as f64, b"not a member".to_vec())]),
    );
    // A value that no longer matches the log is read from the log: the member is decoded.
    memory.put(&value_key(), Value::String(b"9".to_vec()));
    let error = refused_without_a_write(&memory, None);
    assert!(
        matches!(&error, Error::Corrupt { key, .. } if *key == permits_key()),
        "{error:?}"
    );
}

/// What a queue of waiters may keep of the configuration its request was resolved with.
fn kept_by_a_queue(memory: &Memory, create: Option<&Config>) -> Result<Option<Config>, Error> {
    let limiter = memory.limiter::<Write>(NAME)?;
    let resolved = limiter.resolve_for(create, None, 1)?;
    Ok(limiter.config_to_keep(&resolved))
}

/// A queue keeps a configuration until an event says its limiter changed, so never one read
/// from fields with TTLs of their own: such a TTL passes with no event until the field is
/// deleted. Nor one the request creates. A field written again loses its TTL, and is kept again.
#[test]
fn a_queue_keeps_no_configuration_whose_fields_have_ttls_of_their_own() {
    let config = three_key(5, 60_000);
    let memory = Memory::at(T0);
    assert_eq!(kept_by_a_queue(&memory, Some(&config)), Ok(None), "created");
    set_rate(&memory, config, false, T0).expect("set");
    assert_eq!(kept_by_a_queue(&memory, None), Ok(Some(config)));
    let Some(Value::Hash(hash)) = memory.get(NAME) else {
        panic!("no hash")
    };
    assert!(hash.contains_key(&b"keepAliveTime"[..]), "{hash:?}");
    for field in hash.keys() {
        let memory = Memory::at(T0);
        set_rate(&memory, config, false, T0).expect("set");
        assert!(memory.expire_field(NAME, field, T0 + 1000));
        let name = String::from_utf8_lossy(field);
        assert_eq!(kept_by_a_queue(&memory, None), Ok(None), "{name} has a TTL");
        set_rate(&memory, config, false, T0).expect("written again");
        assert_eq!(
            kept_by_a_queue(&memory, None),
            Ok(Some(config)),
            "{name} written again"
        );
    }
    // Once the TTL passes, the field is gone: the limiter it configured is not initialized.
    assert!(memory.expire_field(NAME, b"rate", T0 + 1000));
    memory.set_now(T0 + 1000);
    assert_eq!(
        kept_by_a_queue(&memory, None),
        Err(Error::not_initialized(NAME))
    );
    // A ONEKEY limiter's configuration is in its own string: kept.
    let memory = Memory::at(T0);
    set_rate(&memory, one_key(5, 0), false, T0).expect("set");
    assert_eq!(kept_by_a_queue(&memory, None), Ok(Some(one_key(5, 0))));
}
