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
//! state's value and permits), made at its first use, so a later call on a known limiter makes
//! none: it takes another reference to each.
//!
//! Bounded: a fixed table of [`SLOTS`] entries indexed by a hash of the database and the name;
//! a new entry takes its slot from whatever held it, unless that entry was used since it was
//! kept: then it keeps the slot once (a second chance, as in CLOCK), so a limiter in use is not
//! pushed out by one read twice in a long while.
//!
//! Kept at the second read, not the first: keeping an entry costs about as much as reading the
//! hash (three strings made, the slot's old ones freed), so a limiter read once in a long while
//! (one of hundreds of thousands called at random) must not pay it on every call to evict
//! another just as cold. A read only marks the name in a table of [`SEEN`] fingerprints; a
//! read that finds its mark keeps the entry. A busy limiter is kept from its second call on.
//!
//! In use only while calls come back to the same limiters: a lookup samples which limiter each
//! slot saw last (see [`spread`]), and unless nearly all samples find their own (31 in 32 to
//! go into use, 30 to stay), nothing is looked up or kept. Calls spread over thousands of
//! limiters or more (a limiter per user) then pay a counter, not the table's memory.
//!
//! Where the server has hash field TTLs it does not show to modules (Redis 7.4, Valkey 9), an
//! entry is kept with a [`Check::Pending`]: the store asks the server at the entry's
//! [`CHECKED_AT_USE`]th use whether the fields read are still there without a TTL, and uses it
//! only then. A name that passed is remembered as checked until an event forgets it, so an
//! entry kept for it again needs no check. That rests on two things the server guarantees: a
//! TTL given to a field, and a field added, is an event of the hash class (`hexpire`, `hset`);
//! and a field deleted when its TTL passes (whose `hexpired` event is of the expired class, to
//! which the store does not subscribe there) changes the hash's field count, which a use
//! compares.

#![forbid(unsafe_code)]

use std::hash::{BuildHasher, RandomState};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock, PoisonError};

use redis_module::{Context, RedisString};

use crate::events;
use crate::ffi::key::KeptString;
use crate::ffi::server;
use crate::keyspace::StateKeys;
use crate::limiter::Config;

mod spread;
use spread::Spread;

/// Entries kept at most: enough for the limiters a server is busy with at once, at about 100
/// bytes each (names longer than [`MAX_NAME`] are not kept).
pub const SLOTS: usize = 4096;

/// The longest name kept, in bytes.
pub const MAX_NAME: usize = 256;

/// Fingerprints of names read once (four bytes each): a name whose fingerprint is still here
/// when it is read again is kept.
pub const SEEN: usize = 16 * 1024;

struct Entry {
    db: i32,
    name: Box<[u8]>,
    /// The hash's field count when it was read.
    fields: usize,
    config: Config,
    check: Check,
    /// Made at the entry's first use, not when it is kept: most entries of a server with many
    /// more limiters than slots are never used before another takes their slot, and making
    /// and freeing their strings would cost those calls what the hits save. None until then,
    /// and where the server cannot make strings (unit tests).
    names: Option<Names>,
}

/// What is left to check before a kept configuration is used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Check {
    /// Nothing: the server has no field TTLs, or showed that the hash has none.
    Done,
    /// The server has field TTLs it does not show to modules (Redis 7.4, Valkey 9): it is asked
    /// (`HPTTL`) whether the fields read are still there without a TTL, at the entry's
    /// [`CHECKED_AT_USE`]th use, and the entry is not used before. Not when it is kept: with many
    /// more limiters than slots, most entries are replaced before they are used, and asking for
    /// each would cost those calls more than the hits save.
    Pending {
        /// The fields found when the configuration was read, one bit each.
        present: u8,
        /// Uses so far, each of which read the hash as if nothing were kept.
        uses: u8,
    },
}

/// The use of an entry at which its [`Check::Pending`] is made: an entry used once is as likely
/// as not to be replaced before another use (one of 50 000 limiters at random), while one used
/// twice is busy; asking at the first use cost 1.14x-1.29x a call with nothing kept there.
pub const CHECKED_AT_USE: u8 = 2;

impl Check {
    /// Whether the use of an entry at hand must make its check before the entry is used; if
    /// not, a pending entry is not used this time (see [`used_unchecked`]).
    pub fn due(self) -> bool {
        match self {
            Check::Done => false,
            Check::Pending { uses, .. } => uses.saturating_add(1) >= CHECKED_AT_USE,
        }
    }
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
    pub check: Check,
    pub hash: Option<RedisString>,
    /// The OVERALL state's keys.
    pub value: Option<RedisString>,
    pub permits: Option<RedisString>,
}

/// The entries; beside them, each slot's tag (the full hash of the name it holds, 0 if none),
/// which a lookup compares before it touches the entry: on a server with many more limiters
/// than slots nearly every lookup misses, and a miss then reads one word of a 32 KiB array
/// rather than an entry and its name elsewhere in memory. Whether each slot's entry was used
/// since it was kept or last kept its slot (see [`remember`]). And the marks of names read once,
/// and of names whose [`Check::Pending`] found no field TTL: the name's full hash at its mark's
/// place, so an entry kept for it again (after another took its slot) is used at once, until
/// an event forgets the name. All empty until the first read. And how calls spread.
struct Table {
    entries: Vec<Option<Entry>>,
    tags: Vec<u64>,
    used: Vec<bool>,
    seen: Vec<u32>,
    checked: Vec<u64>,
    spread: Spread,
}

static TABLE: Mutex<Table> = Mutex::new(Table {
    entries: Vec::new(),
    tags: Vec::new(),
    used: Vec::new(),
    seen: Vec::new(),
    checked: Vec::new(),
    spread: Spread::new(),
});

fn table() -> MutexGuard<'static, Table> {
    // Nothing panics while holding the lock; were it poisoned, the table is still consistent
    // (every write is a whole-slot or whole-mark assignment).
    TABLE.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Where a name goes: its entry's slot and tag, its mark's place and the mark.
struct Place {
    slot: usize,
    tag: u64,
    mark: usize,
    fingerprint: u32,
}

impl Place {
    fn of(db: i32, name: &[u8]) -> Place {
        let hash = hash(db, name);
        // The high bits are the best mixed: the slot from the top twelve, the mark's place
        // from the next fourteen, the fingerprint from the low half (never 0, an empty mark).
        Place {
            slot: (hash >> 52) as usize % SLOTS,
            tag: hash | 1,
            mark: (hash >> 38) as usize % SEEN,
            fingerprint: (hash as u32) | 1,
        }
    }
}

/// A multiplicative hash over the database and the name, eight bytes at a time (the table only
/// needs names spread over its slots, not a hash safe against chosen collisions: a collision
/// costs one more read of a hash).
fn hash(db: i32, name: &[u8]) -> u64 {
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
    mix(hash, u64::from_le_bytes(tail))
}

/// The slot of a name, if its tag is there: the entry may be the name's.
fn tagged(table: &Table, place: &Place) -> Option<usize> {
    (table.tags.get(place.slot) == Some(&place.tag)).then_some(place.slot)
}

/// What is kept for `name` in `db`, while configurations are kept and in use (see [`spread`]);
/// its strings are references owned by `ctx`'s command. Found, the entry counts as used (for
/// its second chance in [`remember`]), whatever the command does with it.
pub fn lookup(ctx: &Context, db: i32, name: &[u8]) -> Option<Known> {
    if !on() {
        return None;
    }
    let place = Place::of(db, name);
    let mut table = table();
    if !table.spread.count(place.slot, place.fingerprint) {
        return None;
    }
    known(&mut table, ctx, db, name, &place)
}

/// What is kept for `name`, at `place`.
fn known(table: &mut Table, ctx: &Context, db: i32, name: &[u8], place: &Place) -> Option<Known> {
    let slot = tagged(table, place)?;
    let Table { entries, used, .. } = table;
    match entries.get_mut(slot) {
        Some(Some(entry)) if entry.db == db && *entry.name == *name => {
            if let Some(used) = used.get_mut(slot) {
                *used = true;
            }
            // An entry still to be checked is not used yet, and may never be.
            if entry.names.is_none() && entry.check == Check::Done {
                entry.names = Names::of(name);
            }
            let names = entry.names.as_ref();
            Some(Known {
                config: entry.config,
                fields: entry.fields,
                check: entry.check,
                hash: names.and_then(|n| n.hash.hold(ctx)),
                value: names.and_then(|n| n.value.hold(ctx)),
                permits: names.and_then(|n| n.permits.hold(ctx)),
            })
        }
        _ => None,
    }
}

/// Whether a configuration just read for `name` should be kept: true if configurations are kept
/// and in use, and the name was read recently (see the module's doc); otherwise the read is
/// marked (while in use) and false.
pub fn admits(db: i32, name: &[u8]) -> bool {
    if !on() || name.len() > MAX_NAME {
        return false;
    }
    let place = Place::of(db, name);
    let mut table = table();
    if !table.spread.in_use() {
        return false;
    }
    if table.seen.is_empty() {
        table.seen.resize(SEEN, 0);
    }
    match table.seen.get_mut(place.mark) {
        Some(mark) if *mark == place.fingerprint => true,
        Some(mark) => {
            *mark = place.fingerprint;
            false
        }
        None => false,
    }
}

/// Keeps a configuration just read from a hash of `fields` fields (which [`admits`] let in),
/// with what is left to check before it is used, unless its slot holds another limiter's entry
/// used since it was kept: that entry keeps the slot once (it is then unused again), so a
/// limiter in use is not pushed out by one read twice in a long while. With calls spread at
/// random over more limiters than slots, replacing on every admission had most entries
/// replaced before any use (a third of the calls on 10 000 limiters kept one, a quarter used
/// one). The caller has made sure the events that forget it are subscribed to.
pub fn remember(db: i32, name: &[u8], fields: usize, config: Config, check: Check) {
    if name.len() > MAX_NAME {
        return;
    }
    let place = Place::of(db, name);
    let mut table = table();
    if table.entries.is_empty() {
        table.entries.resize_with(SLOTS, || None);
        table.tags.resize(SLOTS, 0);
        table.used.resize(SLOTS, false);
    }
    let Table {
        entries,
        tags,
        used,
        checked,
        ..
    } = &mut *table;
    let check = match (check, checked.get(place.mark)) {
        (Check::Pending { .. }, Some(&mark)) if mark != 0 && mark == checked_key(db, name) => {
            Check::Done
        }
        (check, _) => check,
    };
    let (Some(slot), Some(tag), Some(used)) = (
        entries.get_mut(place.slot),
        tags.get_mut(place.slot),
        used.get_mut(place.slot),
    ) else {
        return;
    };
    let another = slot
        .as_ref()
        .is_some_and(|entry| entry.db != db || *entry.name != *name);
    if another && *used {
        *used = false;
        return;
    }
    let replaced = slot.replace(Entry {
        db,
        name: name.into(),
        fields,
        config,
        check,
        names: None,
    });
    *tag = place.tag;
    *used = false;
    drop(table);
    // The entry replaced is freed outside the lock.
    drop(replaced);
}

/// Counts a use of the entry of `name` in `db` that did not use it: its check is not due yet.
pub fn used_unchecked(db: i32, name: &[u8]) {
    let mut table = table();
    if let Some(entry) = entry_mut(&mut table, db, name) {
        if let Check::Pending { present, uses } = entry.check {
            entry.check = Check::Pending {
                present,
                uses: uses.saturating_add(1),
            };
        }
    }
}

/// The check of the entry of `name` in `db` passed: the entry is used from now on, and the name
/// is remembered as checked. Only while the entry is still there and pending: an event that
/// forgot it since it was looked up may have changed what was checked.
pub fn passed_check(db: i32, name: &[u8]) {
    let mut table = table();
    let pending = match entry_mut(&mut table, db, name) {
        Some(entry) if entry.check != Check::Done => {
            entry.check = Check::Done;
            true
        }
        _ => false,
    };
    if !pending {
        return;
    }
    if table.checked.is_empty() {
        table.checked.resize(SEEN, 0);
    }
    let mark = Place::of(db, name).mark;
    if let Some(checked) = table.checked.get_mut(mark) {
        *checked = checked_key(db, name);
    }
}

/// The entry of `name` in `db`, if it is kept.
fn entry_mut<'t>(table: &'t mut Table, db: i32, name: &[u8]) -> Option<&'t mut Entry> {
    let slot = tagged(table, &Place::of(db, name))?;
    match table.entries.get_mut(slot) {
        Some(Some(entry)) if entry.db == db && *entry.name == *name => Some(entry),
        _ => None,
    }
}

/// What marks a name as checked: a hash with keys drawn at random for the process (SipHash),
/// since a name whose mark matched would skip its check. [`hash`] is cheaper but easy to
/// collide on purpose: two names chosen to share its value would let one's check pass for the
/// other. Never 0, an empty mark.
fn checked_key(db: i32, name: &[u8]) -> u64 {
    static KEYS: OnceLock<RandomState> = OnceLock::new();
    KEYS.get_or_init(RandomState::new).hash_one((db, name)) | 1
}

/// Forgets the entry of `name` in `db`, if one is kept, and that its check was done: its hash
/// changed or is gone.
pub fn forget(db: i32, name: &[u8]) {
    let place = Place::of(db, name);
    let mut table = table();
    if let Some(mark) = table.checked.get_mut(place.mark) {
        if *mark != 0 && *mark == checked_key(db, name) {
            *mark = 0;
        }
    }
    let Some(slot) = tagged(&table, &place) else {
        return;
    };
    let Table {
        entries,
        tags,
        used,
        ..
    } = &mut *table;
    if let (Some(entry), Some(tag), Some(used)) = (
        entries.get_mut(slot),
        tags.get_mut(slot),
        used.get_mut(slot),
    ) {
        if entry
            .as_ref()
            .is_some_and(|entry| entry.db == db && *entry.name == *name)
        {
            *entry = None;
            *tag = 0;
            *used = false;
        }
    }
}

/// As at the module's load: nothing kept, and in use until calls show otherwise.
pub fn reset() {
    forget_all();
    table().spread = Spread::new();
}

/// Forgets every entry: a whole database changed at once. Not how calls spread, which is the
/// same after.
pub fn forget_all() {
    let mut table = table();
    for place in table.entries.iter_mut() {
        *place = None;
    }
    for tag in table.tags.iter_mut() {
        *tag = 0;
    }
    for used in table.used.iter_mut() {
        *used = false;
    }
    for mark in table.seen.iter_mut() {
        *mark = 0;
    }
    for mark in table.checked.iter_mut() {
        *mark = 0;
    }
}

/// Whether configurations are kept at all (`ratelimit.config-cache`).
static ON: AtomicBool = AtomicBool::new(true);

pub fn on() -> bool {
    ON.load(Ordering::Relaxed)
}

/// Turns keeping configurations on or off: off forgets every one kept, so none can go stale
/// while nothing watches for changes.
pub fn turn(on: bool) {
    ON.store(on, Ordering::Relaxed);
    if !on {
        forget_all();
    }
}

/// Holds the table in use whatever the calls' spread, or lets the spread decide again from a new
/// window (`RATELIMIT.DEBUG KEEPCONFIGS ALWAYS|AUTO`): for tests of what is kept, which call on
/// many limiters in a row.
pub fn hold_in_use(held: bool) {
    table().spread.hold(held);
}

/// Whether kept configurations are in use now (INFO ratelimit): on, and calls come back to few
/// enough limiters (see [`spread`]).
pub fn in_use() -> bool {
    on() && table().spread.in_use()
}

/// How many configurations are kept now (INFO ratelimit). O(slots): for INFO, not a command.
pub fn kept() -> usize {
    table()
        .entries
        .iter()
        .filter(|entry| entry.is_some())
        .count()
}

/// Whether a keyspace event leaves a hash's configuration as it was: only a TTL change does.
pub fn keeps_config(event: &[u8]) -> bool {
    matches!(event, b"expire" | b"persist")
}

/// Subscribes, once per load, to the events that forget a kept configuration: before the first
/// configuration is kept, so a server whose limiters are never read twice pays nothing for
/// them. False if configurations are not kept (`config-cache no`) or the server refused.
pub fn watch(ctx: &Context) -> bool {
    on() && events::watch_for_config_cache(ctx)
}

/// A key changed (an [`events::KeyListener`]): the configuration kept for it, if it is a
/// limiter's hash, is no longer known. The module's own writes count too (SETRATE's among
/// them), unlike for the waiters: see [`crate::key::is_own_event`].
pub fn key_event(ctx: &Context, event: &[u8], key: &[u8]) {
    if !keeps_config(event) {
        forget(server::selected_db(ctx), key);
    }
}

/// A key left (an [`events::RemovalListener`]): its configuration is no longer known.
pub fn key_removed(_ctx: &Context, db: i32, key: &[u8]) {
    forget(db, key);
}

/// Whole databases changed (an [`events::DatasetListener`]): every configuration kept may be
/// of a hash that is gone or replaced.
pub fn dataset_changed(_ctx: &Context) {
    forget_all();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limiter::Mode;

    /// The configuration kept, if its hash has `fields` fields (what the store checks).
    fn lookup(db: i32, name: &[u8], fields: usize) -> Option<Config> {
        known_now(db, name)
            .filter(|known| known.fields == fields)
            .map(|known| known.config)
    }

    /// What [`super::lookup`] finds while the table is in use; not counted in its spread, which
    /// these tests' thousands of names would take out of use.
    fn known_now(db: i32, name: &[u8]) -> Option<Known> {
        known(
            &mut table(),
            &Context::dummy(),
            db,
            name,
            &Place::of(db, name),
        )
    }

    /// The configuration kept for `name`, without using it.
    fn peek(db: i32, name: &[u8]) -> Option<Config> {
        let table = table();
        let slot = tagged(&table, &Place::of(db, name))?;
        match table.entries.get(slot) {
            Some(Some(entry)) if entry.db == db && *entry.name == *name => Some(entry.config),
            _ => None,
        }
    }

    /// A read of `name`'s configuration, as the store makes it.
    fn read(db: i32, name: &[u8], fields: usize, config: Config) {
        if admits(db, name) {
            remember(db, name, fields, config, Check::Done);
        }
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
        read(0, b"api", 3, config(10));
        assert_eq!(lookup(0, b"api", 3), None, "a first read is only marked");
        read(0, b"api", 3, config(10));
        assert_eq!(lookup(0, b"api", 3), Some(config(10)), "the second is kept");
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

        // A pending check is handed out until it passes, for this name only.
        let unchecked = Check::Pending {
            present: 0b111,
            uses: 0,
        };
        remember(0, b"api", 3, config(10), unchecked);
        remember(0, b"web", 3, config(10), unchecked);
        let check = |name: &[u8]| known_now(0, name).map(|k| k.check);
        assert_eq!(check(b"api"), Some(unchecked));
        used_unchecked(0, b"api");
        assert_eq!(
            check(b"api"),
            Some(Check::Pending {
                present: 0b111,
                uses: 1
            })
        );
        passed_check(0, b"api");
        passed_check(1, b"web");
        assert_eq!(check(b"api"), Some(Check::Done));
        assert_eq!(check(b"web"), Some(unchecked), "another name, another db");
        forget(0, b"api");
        forget(0, b"web");

        read(0, b"api", 3, config(10));
        read(0, b"api", 3, config(20));
        assert_eq!(
            lookup(0, b"api", 3),
            Some(config(20)),
            "the newest read wins"
        );
        forget_all();
        assert_eq!(lookup(0, b"api", 3), None);
        read(0, b"api", 3, config(10));
        assert_eq!(
            lookup(0, b"api", 3),
            None,
            "forget_all forgets the marks too"
        );

        let long = vec![b'x'; MAX_NAME + 1];
        read(0, &long, 3, config(10));
        read(0, &long, 3, config(10));
        assert_eq!(lookup(0, &long, 3), None, "long names are not kept");

        // Names sharing a slot replace each other; neither is ever taken for the other.
        let names: Vec<Vec<u8>> = (0..SLOTS * 4)
            .map(|i| format!("n{i}").into_bytes())
            .collect();
        let first = &names[0];
        let twin = names
            .iter()
            .skip(1)
            .find(|n| Place::of(0, n).slot == Place::of(0, first).slot)
            .expect("a name sharing the first one's slot");
        read(0, first, 3, config(1));
        read(0, first, 3, config(1));
        read(0, twin, 3, config(2));
        read(0, twin, 3, config(2));
        assert_eq!(lookup(0, first, 3), None);
        assert_eq!(lookup(0, twin, 3), Some(config(2)));
        forget(0, first);
        assert_eq!(
            lookup(0, twin, 3),
            Some(config(2)),
            "forgetting a twin keeps the entry"
        );

        // Of names read once each, a later read keeps those whose mark no other name took.
        forget_all();
        for name in &names {
            read(0, name, 3, config(1));
        }
        let kept_now = names.iter().filter(|n| lookup(0, n, 3).is_some()).count();
        assert_eq!(kept_now, 0, "names read once are not kept");
        let marked = |name: &[u8]| {
            let place = Place::of(0, name);
            table().seen.get(place.mark) == Some(&place.fingerprint)
        };
        let still_marked = names.iter().filter(|n| marked(n)).count();
        assert!(still_marked > 0 && still_marked < names.len());
        for name in &names {
            let was_marked = marked(name);
            read(0, name, 3, config(1));
            assert_eq!(peek(0, name).is_some(), was_marked, "{name:?}");
        }

        // An entry used since it was kept keeps its slot once against another name, then
        // yields to it.
        forget_all();
        read(0, first, 3, config(1));
        read(0, first, 3, config(1));
        assert_eq!(lookup(0, first, 3), Some(config(1)), "a use");
        read(0, twin, 3, config(2));
        read(0, twin, 3, config(2));
        assert_eq!(peek(0, first), Some(config(1)), "the used entry stays");
        assert_eq!(peek(0, twin), None);
        read(0, twin, 3, config(2));
        assert_eq!(peek(0, twin), Some(config(2)), "unused since, it yields");
        assert_eq!(peek(0, first), None);

        // A name whose check was done needs none when it is kept again, until it is forgotten.
        forget_all();
        let pending = Check::Pending {
            present: 0b111,
            uses: 0,
        };
        let check = |name: &[u8]| known_now(0, name).map(|k| k.check);
        remember(0, first, 3, config(1), pending);
        passed_check(0, first);
        remember(0, twin, 3, config(2), pending);
        assert_eq!(peek(0, first), None, "the twin took the slot");
        remember(0, first, 3, config(1), pending);
        assert_eq!(check(first), Some(Check::Done), "checked before");
        remember(0, twin, 3, config(2), pending);
        remember(0, twin, 3, config(2), pending);
        assert_eq!(check(twin), Some(pending), "never checked");
        forget(0, first);
        forget(0, twin);
        remember(0, first, 3, config(1), pending);
        assert_eq!(
            check(first),
            Some(pending),
            "forgotten, it is checked again"
        );

        // A check that passed for an entry forgotten meanwhile marks nothing.
        forget(0, first);
        passed_check(0, first);
        remember(0, first, 3, config(1), pending);
        assert_eq!(
            check(first),
            Some(pending),
            "forgotten before its check passed"
        );

        // Calls at random over many more limiters than slots take the table out of use; calls
        // back on a few put it in use again.
        reset();
        let lookups = |calls: u32, name: &dyn Fn(usize) -> Vec<u8>| {
            for i in 0..calls as usize {
                super::lookup(&Context::dummy(), 0, &name(i));
            }
            table().spread.in_use()
        };
        // Each phase holds two whole windows (in use after two that find enough), wherever the
        // last one started.
        let calls = 3 * spread::SAMPLE_ONE_IN * spread::WINDOW;
        let phase = |name: &dyn Fn(usize) -> Vec<u8>| lookups(calls, name);
        let many = |i: usize| format!("user:{}", (i * 7919) % 50_000).into_bytes();
        let few = |i: usize| format!("api:{}", i % 8).into_bytes();
        assert!(table().spread.in_use(), "in use from the start");
        assert!(
            !lookups(2 * spread::SAMPLE_ONE_IN * spread::FIRST_WINDOW, &many),
            "the first decision comes early"
        );
        let calls = calls as usize;
        assert!(phase(&few), "in use on few limiters");
        assert!(!phase(&many), "out of use on many");
        read(0, b"api", 3, config(10));
        read(0, b"api", 3, config(10));
        assert_eq!(peek(0, b"api"), None, "nothing kept out of use");
        assert!(!phase(&|i| many(i + calls)), "still out of use");
        assert!(phase(&few), "back in use");
        read(0, b"api", 3, config(10));
        read(0, b"api", 3, config(10));
        assert_eq!(peek(0, b"api"), Some(config(10)), "kept in use");
        remember(0, b"web", 3, config(10), Check::Done);
        assert!(!phase(&|i| many(i + 2 * calls)), "out of use again");
        assert_eq!(
            super::lookup(&Context::dummy(), 0, b"web").map(|k| k.config),
            None,
            "a kept entry is not handed out out of use"
        );
        assert!(peek(0, b"web").is_some(), "but stays");

        assert!(keeps_config(b"expire") && keeps_config(b"persist"));
        assert!(!keeps_config(b"hset") && !keeps_config(b"del") && !keeps_config(b"expired"));
        // A field's TTL is part of what a check found.
        assert!(!keeps_config(b"hexpire") && !keeps_config(b"hpersist"));
        reset();
    }
}
