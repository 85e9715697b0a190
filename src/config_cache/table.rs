//! The config cache's table: a value with its own methods, so unit tests build one of their own;
//! the module holds one instance behind a lock (see [`super`]).
//!
//! Bounded: [`SLOTS`] entries indexed by a hash of the database and the name; a new entry takes
//! its slot from whatever held it, unless that entry was used since it was kept or last kept its
//! slot: then it keeps the slot once (a second chance, as in CLOCK). Without it, two busy
//! limiters sharing a slot pushed each other out on every call, each push a read of the hash, a
//! keep and, on Redis 7.4 and Valkey 9, an `HPTTL`: about twice `config-cache no` for them.
//!
//! Kept at the first read, while the table is in use: calls spread over more limiters than
//! slots take it out of use ([`super::spread`]) after its first window (about 64 lookups, which
//! keep what they read), so from then on a limiter read once in a long while is not kept at all;
//! in use, only the reads that miss keep (at most about 1 in 16: more takes it out of use).
//!
//! What may be kept is [`super::guard`]'s to decide (not a hash with a field TTL, asked of the
//! server where it does not show them): every entry here is used as it is, until an event
//! forgets it.

use redis_module::{Context, RedisString};

use super::spread::Spread;
use crate::ffi::key::KeptString;
use crate::keyspace::StateKeys;
use crate::sliding_log::Config;

/// Entries kept at most: enough for the limiters a server is busy with at once, at about 100
/// bytes each (names longer than [`MAX_NAME`] are not kept).
pub const SLOTS: usize = 4096;

/// The longest name kept, in bytes.
pub const MAX_NAME: usize = 256;

pub(super) struct KeptLimiter {
    db: i32,
    name: Box<[u8]>,
    /// The hash's field count when it was read.
    fields: usize,
    config: Config,
    /// Used since it was kept, or since it last kept its slot against another name (see
    /// [`Table::admits`]). Set when kept: a limiter is kept at its first read, so a rival read
    /// right after must not push it out before its second call.
    used: bool,
    /// Made at the entry's first use, not when it is kept: an entry replaced before any use
    /// (calls on more limiters than slots, before the table leaves use) costs no strings made
    /// and freed. None until then, and where the server cannot make strings (unit tests).
    names: Option<Names>,
}

impl KeptLimiter {
    fn is(&self, db: i32, name: &[u8]) -> bool {
        self.db == db && *self.name == *name
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
    pub hash: Option<RedisString>,
    /// The OVERALL state's keys.
    pub value: Option<RedisString>,
    pub permits: Option<RedisString>,
}

/// The entries; beside them, each slot's tag (the full hash of the name it holds, 0 if none),
/// which a lookup compares before it touches the entry: a miss then reads one word of a 32 KiB
/// array rather than an entry and its name elsewhere in memory. Both empty until the first entry
/// is kept. And how calls spread.
pub struct Table {
    entries: Vec<Option<KeptLimiter>>,
    tags: Vec<u64>,
    spread: Spread,
}

/// Where a name goes: its entry's slot and tag, and its fingerprint in how calls spread.
struct Place {
    slot: usize,
    tag: u64,
    fingerprint: u32,
}

impl Place {
    fn of(db: i32, name: &[u8]) -> Place {
        let hash = hash(db, name);
        // The high bits are the best mixed: the slot from the top twelve, the fingerprint from
        // the low half (never 0, an empty one).
        Place {
            slot: (hash >> 52) as usize % SLOTS,
            tag: hash | 1,
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

impl Table {
    /// An empty table, in use until calls show otherwise; it takes memory at its first entry.
    pub const fn new() -> Table {
        Table {
            entries: Vec::new(),
            tags: Vec::new(),
            spread: Spread::new(SLOTS),
        }
    }

    /// The slot of a name, if its tag is there: the entry may be the name's.
    fn tagged(&self, place: &Place) -> Option<usize> {
        (self.tags.get(place.slot) == Some(&place.tag)).then_some(place.slot)
    }

    /// What is kept for `name` in `db`, while the table is in use (see [`super::spread`]),
    /// counting the lookup in how calls spread; its strings are references owned by `ctx`'s
    /// command.
    #[inline]
    pub fn lookup(&mut self, ctx: &Context, db: i32, name: &[u8]) -> Option<Known> {
        let place = Place::of(db, name);
        if !self.spread.count(place.slot, place.fingerprint) {
            return None;
        }
        self.known(ctx, db, name, &place)
    }

    /// What is kept for `name`, at `place`.
    fn known(&mut self, ctx: &Context, db: i32, name: &[u8], place: &Place) -> Option<Known> {
        let slot = self.tagged(place)?;
        match self.entries.get_mut(slot) {
            Some(Some(entry)) if entry.is(db, name) => {
                entry.used = true;
                if entry.names.is_none() {
                    entry.names = Names::of(name);
                }
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

    /// Whether a configuration just read for `name` in `db` should be kept: while the table is in
    /// use, unless the name is too long or its slot holds another limiter's entry used since it
    /// was kept: that entry keeps the slot this once, and is then unused until its next use, so
    /// one gone cold yields at the next read of a rival. Asked before anything else is done to
    /// keep it (the `HPTTL` of [`super::guard`]).
    pub fn admits(&mut self, db: i32, name: &[u8]) -> bool {
        if name.len() > MAX_NAME || !self.spread.in_use() {
            return false;
        }
        match self.entries.get_mut(Place::of(db, name).slot) {
            Some(Some(entry)) if entry.used && !entry.is(db, name) => {
                entry.used = false;
                false
            }
            _ => true,
        }
    }

    /// Keeps a configuration just read from a hash of `fields` fields (which [`Table::admits`]
    /// let in), in place of whatever its slot held. Returns the entry replaced, for the caller
    /// to free outside its lock.
    #[must_use]
    pub(super) fn remember(
        &mut self,
        db: i32,
        name: &[u8],
        fields: usize,
        config: Config,
    ) -> Option<KeptLimiter> {
        if name.len() > MAX_NAME {
            return None;
        }
        let place = Place::of(db, name);
        if self.entries.is_empty() {
            self.entries.resize_with(SLOTS, || None);
            self.tags.resize(SLOTS, 0);
        }
        let (Some(slot), Some(tag)) = (
            self.entries.get_mut(place.slot),
            self.tags.get_mut(place.slot),
        ) else {
            return None;
        };
        let replaced = slot.replace(KeptLimiter {
            db,
            name: name.into(),
            fields,
            config,
            used: true,
            names: None,
        });
        *tag = place.tag;
        replaced
    }

    /// Forgets the entry of `name` in `db`, if one is kept: its hash changed or is gone.
    /// Returns the entry, for the caller to free outside its lock.
    #[must_use]
    pub(super) fn forget(&mut self, db: i32, name: &[u8]) -> Option<KeptLimiter> {
        let slot = self.tagged(&Place::of(db, name))?;
        let (Some(entry), Some(tag)) = (self.entries.get_mut(slot), self.tags.get_mut(slot)) else {
            return None;
        };
        if !entry.as_ref().is_some_and(|entry| entry.is(db, name)) {
            return None;
        }
        *tag = 0;
        entry.take()
    }

    /// Forgets every entry: a whole database changed at once. Not how calls spread, which is
    /// the same after.
    pub fn forget_all(&mut self) {
        self.entries.iter_mut().for_each(|entry| *entry = None);
        self.tags.iter_mut().for_each(|tag| *tag = 0);
    }

    /// Holds the table in use whatever the calls' spread, or lets the spread decide again from
    /// a new window.
    pub fn hold_in_use(&mut self, held: bool) {
        self.spread.hold(held);
    }

    /// Whether calls come back to few enough limiters for the table to be in use.
    pub fn in_use(&self) -> bool {
        self.spread.in_use()
    }

    /// How many configurations are kept. O(slots): for INFO, not a command.
    pub fn kept(&self) -> usize {
        self.entries.iter().filter(|entry| entry.is_some()).count()
    }
}

#[cfg(test)]
mod tests {
    use super::super::spread;
    use super::*;
    use crate::sliding_log::Mode;

    impl Table {
        /// The configuration kept, if its hash has `fields` fields (what the store checks).
        fn config_for(&mut self, db: i32, name: &[u8], fields: usize) -> Option<Config> {
            self.known_now(db, name)
                .filter(|known| known.fields == fields)
                .map(|known| known.config)
        }

        /// What a lookup finds while the table is in use, not counted in its spread (which
        /// these tests' thousands of names would take out of use).
        fn known_now(&mut self, db: i32, name: &[u8]) -> Option<Known> {
            self.known(&Context::dummy(), db, name, &Place::of(db, name))
        }

        /// The configuration kept for `name`, without using it.
        fn peek(&self, db: i32, name: &[u8]) -> Option<Config> {
            let slot = self.tagged(&Place::of(db, name))?;
            match self.entries.get(slot) {
                Some(Some(entry)) if entry.is(db, name) => Some(entry.config),
                _ => None,
            }
        }

        /// A read of `name`'s configuration, as the store makes it.
        fn read(&mut self, db: i32, name: &[u8], fields: usize, config: Config) {
            if self.admits(db, name) {
                self.keep(db, name, fields, config);
            }
        }

        fn keep(&mut self, db: i32, name: &[u8], fields: usize, config: Config) {
            drop(self.remember(db, name, fields, config));
        }

        fn drop_entry(&mut self, db: i32, name: &[u8]) {
            drop(self.forget(db, name));
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

    /// Names enough to share slots.
    fn names() -> Vec<Vec<u8>> {
        (0..SLOTS * 4)
            .map(|i| format!("n{i}").into_bytes())
            .collect()
    }

    /// Two names of one slot.
    fn twins(names: &[Vec<u8>]) -> (&[u8], &[u8]) {
        let first = &names[0];
        let twin = names
            .iter()
            .skip(1)
            .find(|n| Place::of(0, n).slot == Place::of(0, first).slot)
            .expect("a name sharing the first one's slot");
        (first, twin)
    }

    #[test]
    fn an_entry_is_kept_at_the_first_read_for_its_database_name_and_field_count() {
        let mut table = Table::new();
        assert_eq!(table.config_for(0, b"api", 3), None, "nothing read yet");
        table.read(0, b"api", 3, config(10));
        assert_eq!(
            table.config_for(0, b"api", 3),
            Some(config(10)),
            "the first read keeps"
        );
        assert_eq!(table.config_for(0, b"api", 4), None, "a field was added");
        assert_eq!(table.config_for(1, b"api", 3), None, "another database");
        assert_eq!(table.config_for(0, b"apj", 3), None);
        table.read(0, b"api", 3, config(20));
        assert_eq!(
            table.config_for(0, b"api", 3),
            Some(config(20)),
            "the newest wins"
        );
        let long = vec![b'x'; MAX_NAME + 1];
        table.read(0, &long, 3, config(10));
        assert_eq!(
            table.config_for(0, &long, 3),
            None,
            "long names are not kept"
        );
    }

    #[test]
    fn forgetting_is_per_database_and_name_and_forgetting_all_forgets_every_entry() {
        let mut table = Table::new();
        table.read(0, b"api", 3, config(10));
        table.drop_entry(1, b"api");
        assert_eq!(
            table.config_for(0, b"api", 3),
            Some(config(10)),
            "another db's"
        );
        table.drop_entry(0, b"api");
        assert_eq!(table.config_for(0, b"api", 3), None);
        table.read(0, b"api", 3, config(10));
        table.read(1, b"web", 3, config(10));
        table.forget_all();
        assert_eq!(table.config_for(0, b"api", 3), None);
        assert_eq!(table.config_for(1, b"web", 3), None);
        assert_eq!(table.kept(), 0);
    }

    #[test]
    fn names_sharing_a_slot_replace_each_other_and_are_never_taken_for_each_other() {
        let names = names();
        let (first, twin) = twins(&names);
        let mut table = Table::new();
        table.read(0, first, 3, config(1));
        table.read(0, twin, 3, config(2));
        assert_eq!(
            table.config_for(0, twin, 3),
            None,
            "the first keeps its slot once"
        );
        table.read(0, twin, 3, config(2));
        assert_eq!(table.config_for(0, first, 3), None);
        assert_eq!(table.config_for(0, twin, 3), Some(config(2)));
        table.drop_entry(0, first);
        assert_eq!(
            table.config_for(0, twin, 3),
            Some(config(2)),
            "the twin stays"
        );
    }

    #[test]
    fn each_name_read_twice_is_kept_until_another_of_its_slot_is_read_twice() {
        let names = names();
        let mut table = Table::new();
        for (i, name) in names.iter().enumerate() {
            table.read(0, name, 3, config(i as i64));
            table.read(0, name, 3, config(i as i64));
            assert_eq!(table.peek(0, name), Some(config(i as i64)), "{name:?}");
        }
        // Unused since, each entry gave its slot to the next name of the slot at that name's
        // second read: the last name read of each slot is what is left.
        let mut last = vec![None; SLOTS];
        for (i, name) in names.iter().enumerate() {
            last[Place::of(0, name).slot] = Some(i);
        }
        for (i, name) in names.iter().enumerate() {
            let kept = table.peek(0, name).is_some();
            assert_eq!(kept, last[Place::of(0, name).slot] == Some(i), "{name:?}");
        }
        assert_eq!(table.kept(), last.iter().flatten().count());
    }

    #[test]
    fn an_entry_in_use_keeps_its_slot_against_a_rival_and_one_gone_cold_yields() {
        let names = names();
        let (first, twin) = twins(&names);
        let mut table = Table::new();
        table.read(0, first, 3, config(1));
        // Two busy limiters of one slot, called in turn: the first stays kept, the twin is
        // read every time and never kept (no keep, no HPTTL on each of its calls).
        for _ in 0..5 {
            assert!(
                !table.admits(0, twin),
                "turned away while the first is in use"
            );
            assert_eq!(table.peek(0, twin), None);
            assert_eq!(table.config_for(0, first, 3), Some(config(1)), "a use");
        }
        // The first goes cold: the twin's next read finds it unused and takes the slot.
        table.read(0, twin, 3, config(2));
        assert_eq!(table.peek(0, first), Some(config(1)), "its last chance");
        table.read(0, twin, 3, config(2));
        assert_eq!(table.peek(0, twin), Some(config(2)));
        assert_eq!(table.peek(0, first), None);
        // The first read again is kept again when the twin in turn goes cold.
        assert!(!table.admits(0, first));
        assert!(table.admits(0, first));
        assert!(
            table.admits(0, twin),
            "a name is never turned away by its own entry"
        );
    }

    #[test]
    fn calls_over_many_limiters_take_the_table_out_of_use_and_few_bring_it_back() {
        let mut table = Table::new();
        let phase = |table: &mut Table, calls: usize, name: &dyn Fn(usize) -> Vec<u8>| {
            for i in 0..calls {
                table.lookup(&Context::dummy(), 0, &name(i));
            }
            table.in_use()
        };
        // Each phase holds two whole windows (in use after two that find enough), wherever the
        // last one started.
        let calls = (3 * spread::SAMPLE_ONE_IN * spread::WINDOW) as usize;
        let many = |i: usize| format!("user:{}", (i * 7919) % 50_000).into_bytes();
        let few = |i: usize| format!("api:{}", i % 8).into_bytes();
        assert!(table.in_use(), "in use from the start");
        let first = (2 * spread::SAMPLE_ONE_IN * spread::FIRST_WINDOW) as usize;
        assert!(
            !phase(&mut table, first, &many),
            "the first decision comes early"
        );
        assert!(phase(&mut table, calls, &few), "in use on few limiters");
        assert!(!phase(&mut table, calls, &many), "out of use on many");
        table.read(0, b"api", 3, config(10));
        assert_eq!(table.peek(0, b"api"), None, "nothing kept out of use");
        assert!(!phase(&mut table, calls, &|i| many(i + calls)), "still out");
        assert!(phase(&mut table, calls, &few), "back in use");
        table.read(0, b"api", 3, config(10));
        assert_eq!(table.peek(0, b"api"), Some(config(10)), "kept in use");
        table.keep(0, b"web", 3, config(10));
        assert!(
            !phase(&mut table, calls, &|i| many(i + 2 * calls)),
            "out again"
        );
        let found = table.lookup(&Context::dummy(), 0, b"web");
        assert!(found.is_none(), "a kept entry is not handed out out of use");
        assert!(table.peek(0, b"web").is_some(), "but stays");
    }
}
