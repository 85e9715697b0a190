//! The most-refused names: a Space-Saving heavy-hitters sketch of fixed size per window, two
//! windows kept (the one filling and the last full one). Pure: knows nothing of Redis.
//!
//! Space-Saving keeps `CAPACITY` counters. A name already counted adds one; a new name takes a
//! free counter, or else replaces the smallest, inheriting its count plus one. So within one
//! window a reported count is never below the name's true count and exceeds it by at most the
//! smallest counter, which is at most N / CAPACITY for N refusals counted; every name refused
//! more than N / CAPACITY times is reported. Two windows' counts are added: a name pushed out
//! of one of them loses at most N / CAPACITY of it.
//!
//! It is laid out as Metwally's Stream-Summary, so that a refusal costs the same few steps
//! whatever the counts: the counters hang in buckets of equal count, the buckets in a list by
//! count, so adding one moves a counter to the next bucket and the smallest counter is the
//! first bucket's. Names are found by a keyed hash in an open-addressing table of fixed size.
//! Once a window's counters are all in use nothing more is allocated: a counter that takes a
//! new name keeps its buffer, and a window that starts over reuses the counters, buckets and
//! table of the one it replaces, so after the first two windows a refusal allocates nothing.

use std::collections::HashMap;

/// Counters per window.
pub const CAPACITY: usize = 512;
/// A name longer than this is counted under its first this many bytes (memory stays bounded:
/// two windows of `CAPACITY` names of at most this length, with their counters, buckets and
/// tables: about 300 KiB at most).
pub const MAX_NAME: usize = 200;
/// How long a window fills before it becomes the last full one.
pub const WINDOW_MS: i64 = 60_000;

/// A counter's name buffer holds at least this many bytes, so that the names of one rule, of
/// lengths that differ by a digit or two, replace one another without growing it.
const NAME_BUFFER: usize = 48;

/// A copy of `name` in a buffer of at least [`NAME_BUFFER`] bytes.
fn name_buffer(name: &[u8]) -> Vec<u8> {
    let mut buffer = Vec::with_capacity(name.len().max(NAME_BUFFER));
    buffer.extend_from_slice(name);
    buffer
}

/// No counter or bucket (the end of a list).
const NIL: u16 = u16::MAX;
/// The name table: 2^BITS entries, four per counter, so a lookup of a name not held ends
/// after one or two probes.
const BITS: u32 = 11;
const TABLE: usize = 1 << BITS;
const MASK: usize = TABLE - 1;
/// An entry keeps the high 48 bits of its name's hash (which place it: [`home`]) and, in the
/// low 16, its counter plus one (0 is an empty entry).
const TAG: u64 = !0xFFFF;

/// One Space-Saving summary in Stream-Summary layout.
#[derive(Debug)]
pub struct SpaceSaving {
    /// The counters in use are the first `used`; those after them are spares kept from an
    /// earlier window, each with its name's buffer.
    counters: Vec<Counter>,
    used: usize,
    /// Buckets by place; a free one is on `free_buckets`. At most one per counter.
    buckets: Vec<Bucket>,
    free_buckets: Vec<u16>,
    /// The bucket of the smallest count (NIL while nothing is counted).
    min: u16,
    /// Each held name's entry, by the hash of the name (linear probing).
    table: Box<[u64; TABLE]>,
    /// The counter counted last: a name refused again and again is found without hashing.
    last: u16,
    total: u64,
    seed: u64,
}

#[derive(Debug)]
struct Counter {
    name: Vec<u8>,
    hash: u64,
    bucket: u16,
    /// The other counters of the bucket.
    prev: u16,
    next: u16,
}

#[derive(Debug, Clone, Copy)]
struct Bucket {
    count: u64,
    /// Its first counter.
    head: u16,
    /// The buckets of the next smaller and next larger counts.
    prev: u16,
    next: u16,
}

impl Default for SpaceSaving {
    fn default() -> Self {
        SpaceSaving::with_seed(0)
    }
}

/// Where a hash's entry starts looking: its top bits, which the entry keeps.
fn home(hash: u64) -> usize {
    (hash >> (64 - BITS)) as usize
}

impl SpaceSaving {
    /// An empty summary whose names are hashed with `seed` (random per server: clients cannot
    /// choose names that collide).
    pub fn with_seed(seed: u64) -> Self {
        SpaceSaving {
            counters: Vec::new(),
            used: 0,
            buckets: Vec::new(),
            free_buckets: Vec::new(),
            min: NIL,
            table: Box::new([0; TABLE]),
            last: NIL,
            total: 0,
            seed,
        }
    }

    /// Empties the summary, keeping its memory for the next window.
    pub fn clear(&mut self) {
        self.used = 0;
        self.buckets.clear();
        self.free_buckets.clear();
        self.min = NIL;
        self.table.fill(0);
        self.last = NIL;
        self.total = 0;
    }

    pub fn add(&mut self, name: &[u8]) {
        let name = &name[..name.len().min(MAX_NAME)];
        self.total += 1;
        if self
            .counters
            .get(usize::from(self.last))
            .is_some_and(|c| c.name == name)
        {
            self.increment(self.last);
            return;
        }
        let hash = keyed_hash(self.seed, name);
        match self.find(hash) {
            // Two names whose hashes share their top 48 bits (about 2^-48 a pair, for names
            // not chosen knowing the seed) share a counter.
            Ok(counter) => {
                self.last = counter;
                self.increment(counter);
            }
            Err(empty) => self.insert(name, hash, empty),
        }
    }

    /// The counter holding `hash`, or the empty entry where it would go (there is always one:
    /// at most `CAPACITY` of the `TABLE` entries are in use).
    fn find(&self, hash: u64) -> Result<u16, usize> {
        let mut at = home(hash);
        for _ in 0..TABLE {
            let entry = self.table[at & MASK];
            if entry == 0 {
                break;
            }
            if entry & TAG == hash & TAG {
                return Ok(((entry & !TAG) as u16).wrapping_sub(1));
            }
            at += 1;
        }
        Err(at & MASK)
    }

    /// Counts a name not held, whose entry goes at `empty`: in a free counter, or in the
    /// smallest counter's, replacing its name.
    fn insert(&mut self, name: &[u8], hash: u64, empty: usize) {
        if self.used < CAPACITY {
            let counter = self.used as u16;
            match self.counters.get_mut(self.used) {
                Some(spare) => {
                    spare.name.clear();
                    spare.name.extend_from_slice(name);
                    spare.hash = hash;
                }
                None => self.counters.push(Counter {
                    name: name_buffer(name),
                    hash,
                    bucket: NIL,
                    prev: NIL,
                    next: NIL,
                }),
            }
            self.used += 1;
            self.table[empty & MASK] = (hash & TAG) | u64::from(counter + 1);
            self.last = counter;
            let ones = match self.buckets.get(usize::from(self.min)) {
                Some(b) if b.count == 1 => self.min,
                _ => {
                    let first = self.min;
                    let ones = self.new_bucket(1, NIL, first);
                    self.min = ones;
                    ones
                }
            };
            self.attach(counter, ones);
            return;
        }
        let Some(counter) = self.buckets.get(usize::from(self.min)).map(|b| b.head) else {
            return;
        };
        let Some(c) = self.counters.get_mut(usize::from(counter)) else {
            return;
        };
        let old = std::mem::replace(&mut c.hash, hash);
        c.name.clear();
        c.name.extend_from_slice(name);
        self.table[empty & MASK] = (hash & TAG) | u64::from(counter + 1);
        self.remove_entry(old, counter);
        self.last = counter;
        self.increment(counter);
    }

    /// Deletes the entry of `counter`, held under `hash`, closing the gap behind it as linear
    /// probing needs (no tombstones: the table never fills up with them).
    fn remove_entry(&mut self, hash: u64, counter: u16) {
        let wanted = (hash & TAG) | u64::from(counter + 1);
        let mut hole = home(hash);
        for _ in 0..TABLE {
            if self.table[hole & MASK] == wanted {
                break;
            }
            hole += 1;
        }
        let mut hole = hole & MASK;
        let mut at = hole;
        loop {
            at = (at + 1) & MASK;
            let entry = self.table[at];
            if entry == 0 {
                self.table[hole] = 0;
                return;
            }
            // The entry at `at` may fill the hole unless its home lies after the hole, up to
            // `at` (cyclically): then it must stay where a lookup from its home finds it.
            let from = home(entry);
            let stays = if hole <= at {
                hole < from && from <= at
            } else {
                hole < from || from <= at
            };
            if !stays {
                self.table[hole] = entry;
                hole = at;
            }
        }
    }

    /// Adds one to a counter: it moves to the bucket of the next count (the bucket itself
    /// counts up when the counter is alone in it).
    fn increment(&mut self, counter: u16) {
        let Some(c) = self.counters.get(usize::from(counter)) else {
            return;
        };
        let from = c.bucket;
        let alone = c.prev == NIL && c.next == NIL;
        let Some(&Bucket { count, next, .. }) = self.buckets.get(usize::from(from)) else {
            return;
        };
        let next_fits = self
            .buckets
            .get(usize::from(next))
            .is_some_and(|b| b.count == count + 1);
        if next_fits {
            self.detach(counter);
            self.attach(counter, next);
            if alone {
                self.free_bucket(from);
            }
        } else if alone {
            if let Some(b) = self.buckets.get_mut(usize::from(from)) {
                b.count += 1;
            }
        } else {
            self.detach(counter);
            let to = self.new_bucket(count + 1, from, next);
            self.attach(counter, to);
        }
    }

    /// A bucket of `count` linked between `prev` and `next`.
    fn new_bucket(&mut self, count: u64, prev: u16, next: u16) -> u16 {
        let bucket = Bucket {
            count,
            head: NIL,
            prev,
            next,
        };
        let at = match self.free_buckets.pop() {
            Some(at) => {
                if let Some(b) = self.buckets.get_mut(usize::from(at)) {
                    *b = bucket;
                }
                at
            }
            None => {
                self.buckets.push(bucket);
                (self.buckets.len() - 1) as u16
            }
        };
        if let Some(b) = self.buckets.get_mut(usize::from(prev)) {
            b.next = at;
        }
        if let Some(b) = self.buckets.get_mut(usize::from(next)) {
            b.prev = at;
        }
        at
    }

    /// Unlinks an empty bucket.
    fn free_bucket(&mut self, bucket: u16) {
        let Some(&Bucket { prev, next, .. }) = self.buckets.get(usize::from(bucket)) else {
            return;
        };
        match self.buckets.get_mut(usize::from(prev)) {
            Some(b) => b.next = next,
            None => self.min = next,
        }
        if let Some(b) = self.buckets.get_mut(usize::from(next)) {
            b.prev = prev;
        }
        self.free_buckets.push(bucket);
    }

    /// Takes a counter out of its bucket's list (the bucket may be left empty).
    fn detach(&mut self, counter: u16) {
        let Some(&Counter {
            bucket, prev, next, ..
        }) = self.counters.get(usize::from(counter))
        else {
            return;
        };
        match self.counters.get_mut(usize::from(prev)) {
            Some(c) => c.next = next,
            None => {
                if let Some(b) = self.buckets.get_mut(usize::from(bucket)) {
                    b.head = next;
                }
            }
        }
        if let Some(c) = self.counters.get_mut(usize::from(next)) {
            c.prev = prev;
        }
    }

    /// Puts a counter first in a bucket's list.
    fn attach(&mut self, counter: u16, bucket: u16) {
        let Some(b) = self.buckets.get_mut(usize::from(bucket)) else {
            return;
        };
        let head = std::mem::replace(&mut b.head, counter);
        if let Some(c) = self.counters.get_mut(usize::from(head)) {
            c.prev = counter;
        }
        if let Some(c) = self.counters.get_mut(usize::from(counter)) {
            c.bucket = bucket;
            c.prev = NIL;
            c.next = head;
        }
    }

    /// The refusals counted.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// Every counted name with its count (an overestimate by at most `total / CAPACITY`).
    pub fn counts(&self) -> impl Iterator<Item = (&[u8], u64)> {
        self.counters.iter().take(self.used).map(|c| {
            let count = self
                .buckets
                .get(usize::from(c.bucket))
                .map_or(0, |b| b.count);
            (&c.name[..], count)
        })
    }
}

/// A keyed 64-bit hash of a name: 8 bytes at a time, multiply and rotate, then murmur's final
/// mix; a few instructions a byte where SipHash costs about a hundred a name. The last word of
/// a name of 8 bytes or more is its last 8 bytes (overlapping the one before), so no byte is
/// copied.
pub fn keyed_hash(seed: u64, bytes: &[u8]) -> u64 {
    const K: u64 = 0x9E37_79B9_7F4A_7C15;
    let round = |h: u64, word: u64| (h ^ word).wrapping_mul(K).rotate_left(29);
    let mut h = seed ^ (bytes.len() as u64).wrapping_mul(K);
    let mut chunks = bytes.chunks_exact(8);
    for chunk in &mut chunks {
        h = round(h, le_word(chunk));
    }
    let rest = chunks.remainder();
    let last = if rest.is_empty() {
        0
    } else if let Some(tail) = bytes.rchunks_exact(8).next() {
        le_word(tail)
    } else {
        rest.iter()
            .rev()
            .fold(0, |word, &b| (word << 8) | u64::from(b))
    };
    h = round(h, last);
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^ (h >> 33)
}

/// The first 8 bytes of `bytes` (which has at least 8) as a little-endian word.
fn le_word(bytes: &[u8]) -> u64 {
    let mut word = [0u8; 8];
    if let Some(first) = bytes.get(..8) {
        word.copy_from_slice(first);
    }
    u64::from_le_bytes(word)
}

/// The sketch over time: refusals go into the window filling now; the top names are read over
/// it and the last full window, so they cover the last one to two windows.
#[derive(Debug, Default)]
pub struct Refused {
    filling: SpaceSaving,
    last: SpaceSaving,
    /// Which window (now / WINDOW_MS) `filling` is.
    window: i64,
}

impl Refused {
    /// An empty sketch hashing names with `seed`.
    pub fn with_seed(seed: u64) -> Self {
        Refused {
            filling: SpaceSaving::with_seed(seed),
            last: SpaceSaving::with_seed(seed),
            window: 0,
        }
    }

    pub fn add(&mut self, name: &[u8], now_ms: i64) {
        self.roll(now_ms);
        self.filling.add(name);
    }

    fn roll(&mut self, now_ms: i64) {
        // The common case, without a division: still in the window filling.
        let since_start = now_ms.wrapping_sub(self.window.wrapping_mul(WINDOW_MS));
        if (0..WINDOW_MS).contains(&since_start) {
            return;
        }
        let window = now_ms.div_euclid(WINDOW_MS);
        if window == self.window {
            return;
        }
        // The window that ends becomes the last full one, and the one before it is emptied to
        // fill next: no allocation.
        if window == self.window + 1 {
            std::mem::swap(&mut self.filling, &mut self.last);
        } else {
            self.last.clear();
        }
        self.filling.clear();
        self.window = window;
    }

    /// Up to `count` names refused most over the last one to two windows, most first (ties by
    /// name), with their counts, and the refusals counted over those windows. A count exceeds
    /// the true one by at most (that total) / CAPACITY.
    pub fn top(&mut self, count: usize, now_ms: i64) -> (Vec<(Vec<u8>, u64)>, u64) {
        self.roll(now_ms);
        let mut merged: HashMap<&[u8], u64> = HashMap::new();
        for sketch in [&self.filling, &self.last] {
            for (name, n) in sketch.counts() {
                *merged.entry(name).or_default() += n;
            }
        }
        let mut top: Vec<(Vec<u8>, u64)> = merged
            .into_iter()
            .map(|(name, n)| (name.to_vec(), n))
            .collect();
        top.sort_unstable_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        top.truncate(count);
        (top, self.filling.total() + self.last.total())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A skewed stream (Zipf-like: name i refused about 20 000 / i times, 5 000 names, in a
    /// scrambled order), its true counts known: every reported count is within N / CAPACITY
    /// above the truth, never below, and every name above N / CAPACITY is reported.
    #[test]
    fn error_bound_on_a_skewed_stream() {
        let names = 5000_u64;
        let mut stream = Vec::new();
        for i in 1..=names {
            for _ in 0..(20_000 / i).max(1) {
                stream.push(i);
            }
        }
        // A fixed scramble (multiplicative hashing of positions), no randomness needed.
        let len = stream.len() as u64;
        let mut order: Vec<u64> = (0..len).collect();
        order.sort_by_key(|&p| p.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 7);
        let mut sketch = SpaceSaving::default();
        let mut truth = HashMap::new();
        for p in order {
            let name = format!("user:{}", stream[p as usize]);
            sketch.add(name.as_bytes());
            *truth.entry(name).or_insert(0_u64) += 1;
        }
        let n = sketch.total();
        assert_eq!(n, len);
        let bound = n / CAPACITY as u64;
        let reported: HashMap<Vec<u8>, u64> =
            sketch.counts().map(|(k, v)| (k.to_vec(), v)).collect();
        assert_eq!(reported.len(), CAPACITY);
        for (name, &count) in &reported {
            let true_count = truth[std::str::from_utf8(name).unwrap()];
            assert!(count >= true_count, "under-counted");
            assert!(count - true_count <= bound, "{count} vs {true_count}");
        }
        for (name, &true_count) in &truth {
            if true_count > bound {
                assert!(reported.contains_key(name.as_bytes()), "{name} missing");
            }
        }
        // The heaviest are exact enough to rank: the top 10 are users 1..10 in order.
        let mut r = Refused::default();
        for (name, &count) in &reported {
            for _ in 0..count {
                r.add(name, 0);
            }
        }
        let (top, _) = r.top(10, 0);
        let want: Vec<Vec<u8>> = (1..=10).map(|i| format!("user:{i}").into_bytes()).collect();
        assert_eq!(top.into_iter().map(|t| t.0).collect::<Vec<_>>(), want);
    }

    /// The layout's invariants: every counter found by its hash and the table holding nothing
    /// else, the buckets in increasing count from `min`, each counter in its bucket's list once,
    /// the counts adding up to the total.
    fn check(s: &SpaceSaving) {
        let used = s.table.iter().filter(|&&e| e != 0).count();
        assert_eq!(used, s.used);
        for (i, c) in s.counters.iter().take(s.used).enumerate() {
            assert_eq!(s.find(c.hash), Ok(i as u16));
        }
        let mut seen = 0;
        let mut sum = 0;
        let (mut bucket, mut prev_bucket, mut prev_count) = (s.min, NIL, 0);
        while bucket != NIL {
            let b = s.buckets[usize::from(bucket)];
            assert!(b.count > prev_count, "buckets in increasing count");
            assert_eq!(b.prev, prev_bucket);
            assert_ne!(b.head, NIL, "no empty bucket in the list");
            let (mut counter, mut prev) = (b.head, NIL);
            while counter != NIL {
                let c = &s.counters[usize::from(counter)];
                assert_eq!((c.bucket, c.prev), (bucket, prev));
                seen += 1;
                sum += b.count;
                (prev, counter) = (counter, c.next);
            }
            (prev_bucket, prev_count, bucket) = (bucket, b.count, b.next);
        }
        assert_eq!(seen, s.used);
        assert_eq!(sum, s.total());
        assert_eq!(s.counts().map(|(_, n)| n).sum::<u64>(), s.total());
    }

    #[test]
    fn the_layout_holds_through_hot_names_and_many_new_ones() {
        let mut s = SpaceSaving::with_seed(42);
        check(&s);
        // A few hot names among many that come once: each new one replaces the smallest.
        let mut state = 1_u64;
        for i in 0..20_000_u64 {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            let name = if state >> 62 == 0 {
                format!("hot:{}", (state >> 40) % 8)
            } else {
                format!("login:ip:{}", state >> 44)
            };
            s.add(name.as_bytes());
            if i % 997 == 0 {
                check(&s);
            }
        }
        check(&s);
        assert_eq!(s.used, CAPACITY);
        // Every hot name (about 625 refusals each, far above 20 000 / 512) is held.
        let held: Vec<&[u8]> = s.counts().map(|(name, _)| name).collect();
        for i in 0..8 {
            assert!(held.contains(&format!("hot:{i}").as_bytes()), "hot:{i}");
        }
    }

    #[test]
    fn windows_roll() {
        let mut r = Refused::default();
        r.add(b"a", 0);
        r.add(b"a", 10);
        r.add(b"b", WINDOW_MS + 1);
        assert_eq!(
            r.top(10, WINDOW_MS + 2),
            (vec![(b"a".to_vec(), 2), (b"b".to_vec(), 1)], 3)
        );
        // Two windows on, "a" is gone.
        assert_eq!(r.top(10, 2 * WINDOW_MS), (vec![(b"b".to_vec(), 1)], 1));
        // Long idle: nothing.
        assert_eq!(r.top(10, 10 * WINDOW_MS), (vec![], 0));
        assert_eq!(r.top(0, 10 * WINDOW_MS).0.len(), 0);
    }

    /// A summary emptied for a new window counts from nothing again, on the memory it kept:
    /// its spare counters take the new names (no stale name is reported) and the layout holds.
    #[test]
    fn a_cleared_summary_reuses_its_memory() {
        let mut s = SpaceSaving::with_seed(7);
        for i in 0..3 * CAPACITY {
            s.add(format!("old:{i}").as_bytes());
        }
        let capacity = s.counters.capacity();
        s.clear();
        check(&s);
        assert_eq!(s.counts().count(), 0);
        for i in 0..10 {
            for _ in 0..=i {
                s.add(format!("new:{i}").as_bytes());
            }
            check(&s);
        }
        let mut counts: Vec<(String, u64)> = s
            .counts()
            .map(|(name, n)| (String::from_utf8_lossy(name).into_owned(), n))
            .collect();
        counts.sort();
        let want: Vec<(String, u64)> = (0..10).map(|i| (format!("new:{i}"), i + 1)).collect();
        assert_eq!(counts, want);
        assert_eq!(s.total(), 55);
        assert_eq!(
            s.counters.capacity(),
            capacity,
            "no counter allocated again"
        );
        // Filled up again past its capacity, it replaces the smallest as before.
        for i in 0..2 * CAPACITY {
            s.add(format!("more:{i}").as_bytes());
        }
        check(&s);
        assert_eq!(s.used, CAPACITY);
    }

    #[test]
    fn long_names_are_cut() {
        let mut s = SpaceSaving::default();
        let long = vec![b'x'; MAX_NAME + 50];
        s.add(&long);
        assert_eq!(s.counts().next().unwrap().0.len(), MAX_NAME);
    }
}
