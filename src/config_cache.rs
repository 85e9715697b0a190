//! The configurations of limiters read recently, so a call on a busy limiter does not decode its
//! hash again: reading five fields costs about a quarter of a refused TRYACQUIRE.
//!
//! An entry may only be used while nothing can have changed its hash since it was read, so it is
//! forgotten on every way a hash changes: the store subscribes to the keyspace events of hashes
//! and of keys as a whole before it keeps the first entry, and each event naming a hash forgets
//! it (the module's own writes fire the same events); FLUSHALL, FLUSHDB, SWAPDB, loading a
//! dataset and a slot trim forget everything. A use also checks that the hash still has the
//! number of fields it had. A TTL change (`expire`, `persist`) is the one event that keeps an
//! entry: the configuration does not include the TTL, and a keep-alive limiter refreshes its
//! TTL on every call.
//!
//! An entry also keeps the limiter's key names as server strings (the hash and the OVERALL
//! state's value and permits), so a call on a known limiter makes none: it takes another
//! reference to each.
//!
//! Bounded: a fixed table of [`SLOTS`] entries indexed by a hash of the database and the name;
//! a new entry takes its slot from whatever held it.

#![forbid(unsafe_code)]

use std::sync::{Mutex, MutexGuard, PoisonError};

use redis_module::{Context, RedisString};

use crate::ffi::key::KeptString;
use crate::keyspace::StateKeys;
use crate::limiter::Config;

/// Entries kept at most: enough for the limiters a server is busy with at once, at about 100
/// bytes each (names longer than [`MAX_NAME`] are not kept).
pub const SLOTS: usize = 4096;

/// The longest name kept, in bytes.
pub const MAX_NAME: usize = 256;

struct Entry {
    db: i32,
    name: Box<[u8]>,
    /// The hash's field count when it was read.
    fields: usize,
    config: Config,
    /// None where the server cannot make strings (unit tests).
    names: Option<Names>,
}

/// A limiter's key names as server strings.
struct Names {
    hash: KeptString,
    value: KeptString,
    permits: KeptString,
}

impl Names {
    fn of(name: &[u8]) -> Option<Names> {
        let state = StateKeys::overall(name);
        Some(Names {
            hash: KeptString::new(name)?,
            value: KeptString::new(&state.value)?,
            permits: KeptString::new(&state.permits)?,
        })
    }
}

/// What is known of a limiter: its configuration if its hash still has `fields` fields, and
/// references to its key names for the command at hand.
pub struct Known {
    pub config: Config,
    pub fields: usize,
    pub hash: Option<RedisString>,
    /// The OVERALL state's keys.
    pub value: Option<RedisString>,
    pub permits: Option<RedisString>,
}

/// Empty until the first entry is kept.
static TABLE: Mutex<Vec<Option<Entry>>> = Mutex::new(Vec::new());

fn table() -> MutexGuard<'static, Vec<Option<Entry>>> {
    // Nothing panics while holding the lock; were it poisoned, the table is still consistent
    // (every write is a whole-slot assignment).
    TABLE.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The slot of a name: a multiplicative hash over the database and the name, eight bytes at a
/// time (the table only needs names spread over its slots, not a hash safe against chosen
/// collisions: a collision costs one more read of a hash).
fn slot(db: i32, name: &[u8]) -> usize {
    const K: u64 = 0x517c_c1b7_2722_0a95;
    let mix = |hash: u64, word: u64| (hash.rotate_left(5) ^ word).wrapping_mul(K);
    let mut hash = mix(name.len() as u64, db as u64);
    let mut chunks = name.chunks_exact(8);
    for chunk in &mut chunks {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        hash = mix(hash, u64::from_le_bytes(word));
    }
    let mut tail = [0u8; 8];
    let rest = chunks.remainder();
    if let Some(place) = tail.get_mut(..rest.len()) {
        place.copy_from_slice(rest);
    }
    hash = mix(hash, u64::from_le_bytes(tail));
    // The high bits are the best mixed.
    (hash >> 52) as usize % SLOTS
}

/// What is kept for `name` in `db`; its strings are references owned by `ctx`'s command.
pub fn lookup(ctx: &Context, db: i32, name: &[u8]) -> Option<Known> {
    let table = table();
    match table.get(slot(db, name)) {
        Some(Some(entry)) if entry.db == db && *entry.name == *name => {
            let names = entry.names.as_ref();
            Some(Known {
                config: entry.config,
                fields: entry.fields,
                hash: names.and_then(|n| n.hash.hold(ctx)),
                value: names.and_then(|n| n.value.hold(ctx)),
                permits: names.and_then(|n| n.permits.hold(ctx)),
            })
        }
        _ => None,
    }
}

/// Keeps a configuration just read from a hash of `fields` fields. The caller has made sure the
/// events that forget it are subscribed to.
pub fn remember(db: i32, name: &[u8], fields: usize, config: Config) {
    if name.len() > MAX_NAME {
        return;
    }
    let names = Names::of(name);
    let mut table = table();
    if table.is_empty() {
        table.resize_with(SLOTS, || None);
    }
    if let Some(place) = table.get_mut(slot(db, name)) {
        *place = Some(Entry {
            db,
            name: name.into(),
            fields,
            config,
            names,
        });
    }
}

/// Forgets the entry of `name` in `db`, if one is kept: its hash changed or is gone.
pub fn forget(db: i32, name: &[u8]) {
    let mut table = table();
    if let Some(place) = table.get_mut(slot(db, name)) {
        if place
            .as_ref()
            .is_some_and(|entry| entry.db == db && *entry.name == *name)
        {
            *place = None;
        }
    }
}

/// Forgets every entry: a whole database changed at once.
pub fn forget_all() {
    let mut table = table();
    for place in table.iter_mut() {
        *place = None;
    }
}

/// How many configurations are kept now (INFO ratelimit). O(slots): for INFO, not a command.
pub fn kept() -> usize {
    table().iter().filter(|entry| entry.is_some()).count()
}

/// Whether a keyspace event leaves a hash's configuration as it was: only a TTL change does.
pub fn keeps_config(event: &[u8]) -> bool {
    matches!(event, b"expire" | b"persist")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limiter::Mode;

    /// The configuration kept, if its hash has `fields` fields (what the store checks).
    fn lookup(db: i32, name: &[u8], fields: usize) -> Option<Config> {
        super::lookup(&Context::dummy(), db, name)
            .filter(|known| known.fields == fields)
            .map(|known| known.config)
    }

    fn config(rate: i64) -> Config {
        Config {
            rate,
            interval: 1000,
            mode: Mode::Overall,
            keep_alive: 0,
            precision: 1,
        }
    }

    // One test, since the table is shared by the whole process.
    #[test]
    fn entries_are_found_only_for_their_database_name_and_field_count_until_forgotten() {
        forget_all();
        remember(0, b"api", 3, config(10));
        assert_eq!(lookup(0, b"api", 3), Some(config(10)));
        assert_eq!(lookup(0, b"api", 4), None, "a field was added");
        assert_eq!(lookup(1, b"api", 3), None, "another database");
        assert_eq!(lookup(0, b"apj", 3), None);
        forget(1, b"api");
        assert_eq!(
            lookup(0, b"api", 3),
            Some(config(10)),
            "forgot another db's"
        );
        forget(0, b"api");
        assert_eq!(lookup(0, b"api", 3), None);

        remember(0, b"api", 3, config(10));
        remember(0, b"api", 3, config(20));
        assert_eq!(
            lookup(0, b"api", 3),
            Some(config(20)),
            "the newest read wins"
        );
        forget_all();
        assert_eq!(lookup(0, b"api", 3), None);

        let long = vec![b'x'; MAX_NAME + 1];
        remember(0, &long, 3, config(10));
        assert_eq!(lookup(0, &long, 3), None, "long names are not kept");

        // Names sharing a slot replace each other; neither is ever taken for the other.
        let names: Vec<Vec<u8>> = (0..SLOTS * 4)
            .map(|i| format!("n{i}").into_bytes())
            .collect();
        let first = &names[0];
        let twin = names
            .iter()
            .skip(1)
            .find(|n| slot(0, n) == slot(0, first))
            .expect("a name sharing the first one's slot");
        remember(0, first, 3, config(1));
        remember(0, twin, 3, config(2));
        assert_eq!(lookup(0, first, 3), None);
        assert_eq!(lookup(0, twin, 3), Some(config(2)));
        forget(0, first);
        assert_eq!(
            lookup(0, twin, 3),
            Some(config(2)),
            "forgetting a twin keeps the entry"
        );

        assert!(keeps_config(b"expire") && keeps_config(b"persist"));
        assert!(!keeps_config(b"hset") && !keeps_config(b"del") && !keeps_config(b"expired"));
        forget_all();
    }
}
