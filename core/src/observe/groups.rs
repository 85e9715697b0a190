//! Counters per rule: a limiter's name cut to its group (a prefix, by a separator and a depth),
//! and a bounded table of groups counting grants, refusals and near-limit grants. Pure: knows
//! nothing of Redis.

use std::collections::HashMap;
use std::hash::Hasher;

/// Groups kept by name; calls of any further group count under [`OVERFLOW`].
pub const MAX_GROUPS: usize = 256;
/// The name the groups past [`MAX_GROUPS`] count under.
pub const OVERFLOW: &[u8] = b"_overflow";
/// A group name longer than this is cut here (the table's memory stays bounded).
pub const MAX_GROUP_NAME: usize = 128;

/// How a limiter's name is cut to its group: `api:user:42` with `:` and depth 2 is `api:user`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    pub separator: Vec<u8>,
    pub depth: usize,
}

impl Default for Rule {
    fn default() -> Self {
        Rule {
            separator: b":".to_vec(),
            depth: 2,
        }
    }
}

impl Rule {
    /// The group of `name`: its first `depth` parts, and never the whole name when it has a
    /// separator (its last part is the caller's own: `login:alice` is `login`). A name
    /// without the separator is its own group.
    pub fn group_of<'a>(&self, name: &'a [u8]) -> &'a [u8] {
        let (group, _) = self.cut(name);
        &group[..group.len().min(MAX_GROUP_NAME)]
    }

    /// The group of `name` before it is shortened to [`MAX_GROUP_NAME`], and whether it was cut
    /// at the rule's depth (false: at the name's last separator, or no separator at all).
    fn cut<'a>(&self, name: &'a [u8]) -> (&'a [u8], bool) {
        let sep = &self.separator[..];
        let mut cut = None;
        let mut parts = 0;
        let mut at = 0;
        if !sep.is_empty() {
            while let Some(found) = find(&name[at..], sep) {
                cut = Some(at + found);
                parts += 1;
                if parts == self.depth {
                    break;
                }
                at += found + sep.len();
            }
        }
        match cut {
            Some(end) => (&name[..end], parts == self.depth),
            None => (name, false),
        }
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    match needle {
        [byte] => find_byte(haystack, *byte),
        _ => haystack.windows(needle.len()).position(|w| w == needle),
    }
}

/// The first `byte` in `haystack`, 8 bytes at a time (the usual zero-byte test on the word
/// XOR the byte repeated): every refusal of a new name cuts it to its group.
fn find_byte(haystack: &[u8], byte: u8) -> Option<usize> {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    let repeated = ONES.wrapping_mul(u64::from(byte));
    let mut words = haystack.chunks_exact(8);
    let mut at = 0;
    for chunk in &mut words {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        let x = u64::from_le_bytes(word) ^ repeated;
        let found = x.wrapping_sub(ONES) & !x & HIGHS;
        if found != 0 {
            return Some(at + (found.trailing_zeros() / 8) as usize);
        }
        at += 8;
    }
    words
        .remainder()
        .iter()
        .position(|&b| b == byte)
        .map(|i| at + i)
}

/// One group's counts.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    pub grants: u64,
    pub refusals: u64,
    /// Grants after which at most a tenth of the limit remained.
    pub near_limit: u64,
}

impl Counts {
    fn add(&mut self, granted: bool, near: bool) {
        if granted {
            self.grants += 1;
            if near {
                self.near_limit += 1;
            }
        } else {
            self.refusals += 1;
        }
    }
}

/// Whether a grant leaving `remaining` of `limit` ran near the limit (at most 10% remains).
pub fn near_limit(limit: i64, remaining: i64) -> bool {
    limit > 0 && remaining.saturating_mul(10) <= limit
}

/// The table of groups: at most [`MAX_GROUPS`] by name, then the overflow group.
#[derive(Debug, Default)]
pub struct Groups {
    index: HashMap<Box<[u8]>, usize>,
    named: Vec<(Box<[u8]>, Counts)>,
    /// The group counted last: calls come in runs of one rule, found without hashing.
    last: usize,
    /// The group of the name counted last and the separator after it, when its name was cut
    /// there (see [`Groups::count_name`]); that group's place (`None`: the overflow group); and
    /// whether it was cut at the rule's depth (else at the name's last separator).
    last_prefix: Vec<u8>,
    last_place: Option<Option<usize>>,
    last_at_depth: bool,
    overflow: Counts,
    overflowed: Distinct,
}

impl Groups {
    /// Counts a decision of limiter `name`, whose group `rule` gives.
    ///
    /// A name that starts with the last group cut and the separator after it is in that group
    /// too when the cut stopped there: the cut finds the same separators up to there, then
    /// either stops at the rule's depth or, for a group cut at its name's last separator, finds
    /// no other in the rest of the name. So calls of one rule, one limiter or many, are counted
    /// without cutting their names again (`login:alice`, `login:bob`: a search of the rest).
    pub fn count_name(&mut self, rule: &Rule, name: &[u8], granted: bool, near: bool) {
        if let Some(place) = self.last_place {
            if let Some(rest) = name.strip_prefix(&self.last_prefix[..]) {
                if self.last_at_depth || find(rest, &rule.separator).is_none() {
                    let counts = match place {
                        Some(i) => self.named.get_mut(i).map(|(_, counts)| counts),
                        None => Some(&mut self.overflow),
                    };
                    if let Some(counts) = counts {
                        counts.add(granted, near);
                        return;
                    }
                }
            }
        }
        let (group, at_depth) = rule.cut(name);
        let kept = &group[..group.len().min(MAX_GROUP_NAME)];
        let place = self.count(kept, granted, near);
        // Cut at a separator (a name without one is its own group), and kept whole.
        if group.len() < name.len() && kept.len() == group.len() {
            self.last_prefix.clear();
            self.last_prefix.extend_from_slice(group);
            self.last_prefix.extend_from_slice(&rule.separator);
            self.last_place = Some(place);
            self.last_at_depth = at_depth;
        } else {
            self.last_place = None;
        }
    }

    /// Counts a decision of a limiter whose group is `group`; returns the group's place (None:
    /// the overflow group).
    pub fn count(&mut self, group: &[u8], granted: bool, near: bool) -> Option<usize> {
        let last = self.last;
        let found = match self.named.get(last) {
            Some((name, _)) if &name[..] == group => Some(last),
            _ => self.index.get(group).copied(),
        };
        let (place, counts) = match found {
            Some(i) => {
                self.last = i;
                (Some(i), &mut self.named[i].1)
            }
            None if self.named.len() < MAX_GROUPS => {
                let i = self.named.len();
                self.index.insert(group.into(), i);
                self.named.push((group.into(), Counts::default()));
                (Some(i), &mut self.named[i].1)
            }
            None => {
                self.overflowed.add(group);
                (None, &mut self.overflow)
            }
        };
        counts.add(granted, near);
        place
    }

    /// The named groups in the order they were first seen.
    pub fn named(&self) -> impl Iterator<Item = (&[u8], Counts)> {
        self.named.iter().map(|(name, counts)| (&name[..], *counts))
    }

    /// The overflow group's counts, and an estimate of how many distinct groups went there.
    pub fn overflow(&self) -> (Counts, u64) {
        (self.overflow, self.overflowed.estimate())
    }
}

/// How many distinct group names went to the overflow group: linear counting over a fixed
/// bitmap (512 bytes), within a few percent up to about 10 000 names, a lower bound beyond.
#[derive(Debug, Clone)]
pub struct Distinct {
    bits: [u64; Distinct::WORDS],
}

impl Default for Distinct {
    fn default() -> Self {
        Distinct {
            bits: [0; Distinct::WORDS],
        }
    }
}

impl Distinct {
    const WORDS: usize = 64;
    const BITS: usize = Self::WORDS * 64;

    pub fn add(&mut self, name: &[u8]) {
        let bit = (fnv1a(name) % Self::BITS as u64) as usize;
        if let Some(word) = self.bits.get_mut(bit / 64) {
            *word |= 1 << (bit % 64);
        }
    }

    pub fn estimate(&self) -> u64 {
        let set: u32 = self.bits.iter().map(|w| w.count_ones()).sum();
        let m = Self::BITS as f64;
        let zero = m - f64::from(set);
        if zero < 1.0 {
            // Saturated: at least this many.
            return (m * m.ln()) as u64;
        }
        (m * (m / zero).ln()).round() as u64
    }
}

/// FNV-1a, 64 bits: a fixed hash, so the bitmap's estimate does not vary between runs.
pub fn fnv1a(bytes: &[u8]) -> u64 {
    let mut hash = FnvHasher::default();
    hash.write(bytes);
    hash.finish()
}

/// FNV-1a, for the overflow bitmap only: the tables keep the standard library's keyed hash,
/// since limiter names come from clients and a fixed hash would let them be chosen to collide.
#[derive(Debug, Clone, Copy)]
struct FnvHasher(u64);

impl Default for FnvHasher {
    fn default() -> Self {
        FnvHasher(0xcbf2_9ce4_8422_2325)
    }
}

impl Hasher for FnvHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 ^= u64::from(b);
            self.0 = self.0.wrapping_mul(0x0100_0000_01b3);
        }
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn find_byte_finds_the_first_as_position_does() {
        let bytes: Vec<u8> = (0..40_u8)
            .map(|i| [b':', b'a', 0x80, 0xff, 0, b'9'][usize::from(i) * 7 % 6])
            .collect();
        for start in 0..bytes.len() {
            for end in start..=bytes.len() {
                let hay = &bytes[start..end];
                for byte in [b':', b'a', 0x80, 0xff, 0, b'9', b'z'] {
                    assert_eq!(
                        find_byte(hay, byte),
                        hay.iter().position(|&b| b == byte),
                        "{hay:?} {byte}"
                    );
                }
            }
        }
    }

    fn rule(sep: &str, depth: usize) -> Rule {
        Rule {
            separator: sep.as_bytes().to_vec(),
            depth,
        }
    }

    #[test]
    fn groups_by_prefix() {
        let r = Rule::default();
        assert_eq!(r.group_of(b"api:user:42"), b"api:user");
        assert_eq!(r.group_of(b"api:user:42:extra"), b"api:user");
        assert_eq!(r.group_of(b"login:alice"), b"login");
        assert_eq!(r.group_of(b"login"), b"login");
        assert_eq!(r.group_of(b""), b"");
        assert_eq!(r.group_of(b":x"), b"");
        assert_eq!(rule(":", 1).group_of(b"api:user:42"), b"api");
        assert_eq!(rule("/", 3).group_of(b"a/b/c/d/e"), b"a/b/c");
        assert_eq!(rule("::", 1).group_of(b"a::b::c"), b"a");
        assert_eq!(rule("::", 2).group_of(b"a:b::c"), b"a:b");
        let long = vec![b'x'; 300];
        assert_eq!(r.group_of(&long).len(), MAX_GROUP_NAME);
    }

    #[test]
    fn counting_by_name_caches_the_last_group_only_as_a_shortcut() {
        let r = Rule::default();
        let mut g = Groups::default();
        for name in [
            &b"api:user:1"[..],
            b"api:user:1",
            b"api:user:2",
            b"api:user:",
            b"login:a",
            b"login:a:b",
            b"login:b",
            b"api:user:1:x",
            b"api:users:1",
            b"api:user",
        ] {
            g.count_name(&r, name, true, false);
        }
        let got: Vec<_> = g.named().map(|(n, c)| (n.to_vec(), c.grants)).collect();
        assert_eq!(
            got,
            vec![
                (b"api:user".to_vec(), 5),
                (b"login".to_vec(), 2),
                (b"login:a".to_vec(), 1),
                (b"api:users".to_vec(), 1),
                (b"api".to_vec(), 1),
            ]
        );
        // Whatever the rule and the order, the shortcut counts as cutting every name would.
        for (sep, depth) in [(":", 1), (":", 2), (":", 3), ("::", 2), ("ab", 2)] {
            let r = rule(sep, depth);
            let names: Vec<Vec<u8>> = (0..400_u32)
                .map(|i| {
                    let parts = ["a", "b", ":", "::", "ab", "x:", ":y", "aab", "abab"];
                    (0..1 + i % 5)
                        .map(|j| parts[((i * 7 + j * 3) % 9) as usize])
                        .collect::<String>()
                        .into_bytes()
                })
                .collect();
            // In that order, and sorted: runs of names sharing their first parts.
            let mut sorted = names.clone();
            sorted.sort();
            for names in [&names, &sorted] {
                let mut cached = Groups::default();
                let mut cut = Groups::default();
                for name in names {
                    cached.count_name(&r, name, false, false);
                    cut.count(r.group_of(name), false, false);
                }
                let of = |g: &Groups| g.named().map(|(n, c)| (n.to_vec(), c)).collect::<Vec<_>>();
                assert_eq!(of(&cached), of(&cut), "{sep:?} {depth}");
            }
        }
        // Past the bound, the same name keeps counting in the overflow group.
        let mut g = Groups::default();
        for i in 0..MAX_GROUPS {
            g.count(format!("g{i}").as_bytes(), true, false);
        }
        for _ in 0..3 {
            g.count_name(&r, b"late:x", false, false);
        }
        assert_eq!(g.overflow().0.refusals, 3);
    }

    #[test]
    fn near_limit_is_a_tenth_left() {
        assert!(near_limit(10, 1));
        assert!(near_limit(10, 0));
        assert!(!near_limit(10, 2));
        assert!(near_limit(100, 10));
        assert!(!near_limit(100, 11));
        assert!(!near_limit(0, 0));
    }

    #[test]
    fn bounded_with_overflow() {
        let mut g = Groups::default();
        for i in 0..MAX_GROUPS + 100 {
            let name = format!("g{i}");
            g.count(name.as_bytes(), true, false);
            g.count(name.as_bytes(), false, false);
        }
        g.count(b"g0", true, true);
        assert_eq!(g.named().count(), MAX_GROUPS);
        let first = g.named().next().unwrap();
        assert_eq!(
            first,
            (
                &b"g0"[..],
                Counts {
                    grants: 2,
                    refusals: 1,
                    near_limit: 1
                }
            )
        );
        let (overflow, names) = g.overflow();
        assert_eq!((overflow.grants, overflow.refusals), (100, 100));
        assert!((95..=105).contains(&names), "{names}");
    }

    #[test]
    fn distinct_estimate_within_a_few_percent() {
        for n in [1_u64, 10, 1000, 5000] {
            let mut d = Distinct::default();
            for i in 0..n {
                d.add(format!("tenant:{i}").as_bytes());
                d.add(format!("tenant:{i}").as_bytes());
            }
            let e = d.estimate() as f64;
            let n = n as f64;
            assert!((e - n).abs() <= 0.05 * n + 1.0, "{e} for {n}");
        }
    }
}
