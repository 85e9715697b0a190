//! The most-refused names: a Space-Saving heavy-hitters sketch of fixed size per window, two
//! windows kept (the one filling and the last full one). Pure: knows nothing of Redis.
//!
//! Space-Saving keeps `CAPACITY` counters. A name already counted adds one; a new name takes a
//! free counter, or else replaces the smallest, inheriting its count plus one. So within one
//! window a reported count is never below the name's true count and exceeds it by at most the
//! smallest counter, which is at most N / CAPACITY for N refusals counted; every name refused
//! more than N / CAPACITY times is reported. Two windows' counts are added: a name pushed out
//! of one of them loses at most N / CAPACITY of it.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// Counters per window.
pub const CAPACITY: usize = 512;
/// A name longer than this is counted under its first this many bytes (memory stays bounded:
/// two windows of `CAPACITY` names of at most this length, about 300 KiB at most).
pub const MAX_NAME: usize = 200;
/// How long a window fills before it becomes the last full one.
pub const WINDOW_MS: i64 = 60_000;

/// One Space-Saving summary: counters in slots, a min-heap of slot numbers by count (each slot
/// knows its place in it, so moving one hashes nothing), and each name's slot by a keyed 64-bit
/// hash of the name (hashed once per call; slots reuse their name's buffer).
#[derive(Debug, Default, Clone)]
pub struct SpaceSaving {
    slots: Vec<Slot>,
    heap: Vec<usize>,
    slot_of: HashMap<u64, usize, BuildHasherDefault<Identity>>,
    /// The slot counted last: a name refused again and again is found without hashing.
    last: usize,
    total: u64,
    seed: u64,
}

#[derive(Debug, Clone)]
struct Slot {
    count: u64,
    name: Vec<u8>,
    hash: u64,
    /// Where in `heap` this slot is.
    at: usize,
}

impl SpaceSaving {
    /// An empty summary whose names are hashed with `seed` (random per server: clients cannot
    /// choose names that collide).
    pub fn with_seed(seed: u64) -> Self {
        SpaceSaving {
            seed,
            ..SpaceSaving::default()
        }
    }

    pub fn add(&mut self, name: &[u8]) {
        let name = &name[..name.len().min(MAX_NAME)];
        self.total += 1;
        let last = self.last;
        let found = match self.slots.get(last) {
            Some(s) if s.name == name => Some(last),
            _ => {
                let hash = keyed_hash(self.seed, name);
                // Two names with one hash (about 2^-64 for names not chosen knowing the seed)
                // share a counter.
                match self.slot_of.get(&hash).copied() {
                    Some(slot) => Some(slot),
                    None => {
                        self.insert(name, hash);
                        None
                    }
                }
            }
        };
        if let Some(slot) = found {
            self.last = slot;
            if let Some(s) = self.slots.get_mut(slot) {
                s.count += 1;
                let at = s.at;
                self.sift_down(at);
            }
        }
    }

    /// Counts a name not held: in a free slot, or in the smallest counter's, replacing its name.
    fn insert(&mut self, name: &[u8], hash: u64) {
        if self.slots.len() < CAPACITY {
            let slot = self.slots.len();
            let at = self.heap.len();
            self.slots.push(Slot {
                count: 1,
                name: name.to_vec(),
                hash,
                at,
            });
            self.heap.push(slot);
            self.slot_of.insert(hash, slot);
            self.last = slot;
            self.sift_up(at);
            return;
        }
        let Some(&slot) = self.heap.first() else {
            return;
        };
        let Some(s) = self.slots.get_mut(slot) else {
            return;
        };
        let old = s.hash;
        s.name.clear();
        s.name.extend_from_slice(name);
        s.hash = hash;
        s.count += 1;
        self.slot_of.remove(&old);
        self.slot_of.insert(hash, slot);
        self.last = slot;
        self.sift_down(0);
    }

    /// The refusals counted.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// Every counted name with its count (an overestimate by at most `total / CAPACITY`).
    pub fn counts(&self) -> impl Iterator<Item = (&[u8], u64)> {
        self.slots.iter().map(|s| (&s.name[..], s.count))
    }

    fn count_at(&self, at: usize) -> u64 {
        self.heap
            .get(at)
            .and_then(|&slot| self.slots.get(slot))
            .map_or(u64::MAX, |s| s.count)
    }

    fn swap(&mut self, a: usize, b: usize) {
        self.heap.swap(a, b);
        for at in [a, b] {
            if let Some(s) = self.heap.get(at).and_then(|&slot| self.slots.get_mut(slot)) {
                s.at = at;
            }
        }
    }

    fn sift_up(&mut self, mut at: usize) {
        while at > 0 {
            let parent = (at - 1) / 2;
            if self.count_at(parent) <= self.count_at(at) {
                break;
            }
            self.swap(at, parent);
            at = parent;
        }
    }

    fn sift_down(&mut self, mut at: usize) {
        loop {
            let (left, right) = (2 * at + 1, 2 * at + 2);
            let mut smallest = at;
            if self.count_at(left) < self.count_at(smallest) {
                smallest = left;
            }
            if self.count_at(right) < self.count_at(smallest) {
                smallest = right;
            }
            if smallest == at {
                return;
            }
            self.swap(at, smallest);
            at = smallest;
        }
    }
}

/// A keyed 64-bit hash of a name: 8 bytes at a time, multiply and rotate, then murmur's final
/// mix; a few instructions a byte where SipHash costs about a hundred a name.
pub fn keyed_hash(seed: u64, bytes: &[u8]) -> u64 {
    const K: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut h = seed ^ (bytes.len() as u64).wrapping_mul(K);
    let mut chunks = bytes.chunks_exact(8);
    for chunk in &mut chunks {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        h = (h ^ u64::from_le_bytes(word))
            .wrapping_mul(K)
            .rotate_left(29);
    }
    let mut tail = [0u8; 8];
    let rest = chunks.remainder();
    tail[..rest.len()].copy_from_slice(rest);
    h = (h ^ u64::from_le_bytes(tail))
        .wrapping_mul(K)
        .rotate_left(29);
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^ (h >> 33)
}

/// The map's hasher for keys that are hashes already.
#[derive(Debug, Default, Clone, Copy)]
pub struct Identity(u64);

impl Hasher for Identity {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8) | u64::from(b);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// The sketch over time: refusals go into the window filling now; the top names are read over
/// it and the last full window, so they cover the last one to two windows.
#[derive(Debug, Default)]
pub struct Refused {
    filling: SpaceSaving,
    last: SpaceSaving,
    /// Which window (now / WINDOW_MS) `filling` is.
    window: i64,
    seed: u64,
}

impl Refused {
    /// An empty sketch hashing names with `seed`.
    pub fn with_seed(seed: u64) -> Self {
        Refused {
            filling: SpaceSaving::with_seed(seed),
            seed,
            ..Refused::default()
        }
    }

    pub fn add(&mut self, name: &[u8], now_ms: i64) {
        self.roll(now_ms);
        self.filling.add(name);
    }

    fn roll(&mut self, now_ms: i64) {
        let window = now_ms.div_euclid(WINDOW_MS);
        if window == self.window {
            return;
        }
        let fresh = SpaceSaving::with_seed(self.seed);
        self.last = if window == self.window + 1 {
            std::mem::replace(&mut self.filling, fresh)
        } else {
            self.filling = fresh;
            SpaceSaving::with_seed(self.seed)
        };
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

    #[test]
    fn long_names_are_cut() {
        let mut s = SpaceSaving::default();
        let long = vec![b'x'; MAX_NAME + 50];
        s.add(&long);
        assert_eq!(s.counts().next().unwrap().0.len(), MAX_NAME);
    }
}
