//! How calls spread over limiters, which decides whether the config cache is in use: it pays
//! only while calls come back to few limiters. With calls at random over thousands of limiters,
//! keeping and looking up entries cost more than a call with `config-cache no` (the measurements
//! are in docs/performance.md): the table's own memory read on every call, for hits that saved
//! less, the limiters' keys being out of the CPU's caches anyway.
//!
//! A direct-mapped record of the last limiter sampled in each slot (a fingerprint: no entry, no
//! name), so a sample costs one word of a 16 KiB array whether or not anything is kept. A sample
//! that finds its own fingerprint is a limiter come back.

/// One lookup in this many is sampled, on average. Which ones is drawn from a hash of the
/// lookup's number, not every fourth: calls that alternate between a few limiters (a global one
/// and a per-user one on each request) would otherwise have only some of them sampled.
pub const SAMPLE_ONE_IN: u32 = 4;

/// Samples between two decisions: enough that the share found varies by about 2% from window to
/// window where it is near the line, so the table does not go in and out of use.
pub const WINDOW: u32 = 256;

/// Samples before the first decision after the module loads: few, so a server whose calls
/// spread over many limiters leaves use before it keeps much (on Redis 7.0, keeping the first
/// configuration subscribes the module to events that cost every write from then on). A few
/// busy limiters go out of use there too (a limiter's first sample in its slot finds nothing)
/// and come back after two windows.
pub const FIRST_WINDOW: u32 = 16;

/// [`IN_USE_AT`] and [`STAYS_IN_USE_AT`] are in 32nds of a window's samples.
const PARTS: u32 = 32;

/// The share of a window's samples that must find the limiter their slot saw last for the table
/// to go into use: 31 in 32. With calls at random over n limiters, a share of about
/// `(1 - e^-x) / x` does, where `x = n / SLOTS` (more or less, as their names fall in the
/// slots): 0.97 at 250 limiters, 0.94 at 500, 0.89 at 1 000, 0.37 at 10 000. The line sits
/// between 500 and 1 000 limiters at random, where the measurements (docs/performance.md, made
/// by `make bench-config-cache`) found the table stop paying by CPU time (on Redis 7.0 the
/// events it subscribes to cost every write); counting instructions alone misses the cache
/// misses of memory it adds.
pub const IN_USE_AT: u32 = 31;

/// The share that keeps the table in use once it is: 30 in 32, so a share that sits on the
/// line to go into use does not have the table go in and out, keeping entries anew each time
/// (which cost more than none, measured with a single line), while one that falls to where in
/// use stops paying (1 000 limiters at random) takes it out.
pub const STAYS_IN_USE_AT: u32 = 30;

/// Whether the lookup numbered `lookup` is sampled: one in [`SAMPLE_ONE_IN`], by where a
/// multiplicative hash of its number falls.
fn sampled(lookup: u32) -> bool {
    lookup.wrapping_mul(0x9e37_79b9) < u32::MAX / SAMPLE_ONE_IN
}

pub struct Spread {
    in_use: bool,
    /// Whether the last window found [`IN_USE_AT`]: the table goes into use after two such
    /// windows in a row (one window in use subscribes the module for good on Redis 7.0), and
    /// out after one under [`STAYS_IN_USE_AT`].
    enough: bool,
    /// Whether the first decision is made.
    decided: bool,
    /// In use whatever the samples say (`RATELIMIT.DEBUG CONFIGCACHE ALWAYS`).
    held: bool,
    lookups: u32,
    samples: u32,
    /// Samples this window that found their own fingerprint in their slot.
    returns: u32,
    /// The slots of the table the limiters' fingerprints fall in (the config cache's).
    slots: usize,
    last: Vec<u32>,
}

impl Spread {
    /// In use, so a limiter read after the module loads is kept at once, as it is while calls
    /// come back to few limiters (and stays in use if its first window finds enough). The
    /// fingerprints sampled fall in `slots` slots.
    pub const fn new(slots: usize) -> Spread {
        Spread {
            in_use: true,
            enough: true,
            decided: false,
            held: false,
            lookups: 0,
            samples: 0,
            returns: 0,
            slots,
            last: Vec::new(),
        }
    }

    pub fn in_use(&self) -> bool {
        self.in_use
    }

    /// Counts a lookup of the limiter whose slot and fingerprint are given, sampling one in
    /// [`SAMPLE_ONE_IN`]. Whether the table is in use.
    pub fn count(&mut self, slot: usize, fingerprint: u32) -> bool {
        if self.held {
            return true;
        }
        self.lookups = self.lookups.wrapping_add(1);
        if sampled(self.lookups) {
            self.sample(slot, fingerprint);
        }
        self.in_use
    }

    /// Notes whether the limiter came back to its slot, and decides at the end of each window.
    fn sample(&mut self, slot: usize, fingerprint: u32) {
        if self.last.is_empty() {
            self.last.resize(self.slots, 0);
        }
        if let Some(last) = self.last.get_mut(slot) {
            if *last == fingerprint {
                self.returns += 1;
            }
            *last = fingerprint;
        }
        self.samples += 1;
        let window = if self.decided { WINDOW } else { FIRST_WINDOW };
        if self.samples >= window {
            let share_at = |parts: u32| self.returns * PARTS >= self.samples * parts;
            let enough = share_at(IN_USE_AT);
            self.in_use = if self.in_use {
                share_at(STAYS_IN_USE_AT)
            } else {
                enough && self.enough
            };
            self.enough = enough;
            self.decided = true;
            self.samples = 0;
            self.returns = 0;
        }
    }

    /// Holds the table in use whatever the samples say, or lets them decide again from a new
    /// window (`RATELIMIT.DEBUG CONFIGCACHE ALWAYS|AUTO`).
    pub fn hold(&mut self, held: bool) {
        self.held = held;
        if held {
            self.in_use = true;
        } else {
            self.enough = true;
            self.samples = 0;
            self.returns = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// As many slots as the config cache's table has.
    const SLOTS: usize = 4096;

    /// `samples` samples of limiters named by `name`, each at its own slot.
    fn feed(spread: &mut Spread, samples: u32, name: impl Fn(u32) -> u32) -> bool {
        for i in 0..samples {
            let limiter = name(i);
            spread.sample(limiter as usize % SLOTS, limiter | 1);
        }
        spread.in_use
    }

    #[test]
    fn into_use_after_two_windows_that_find_enough_out_under_a_lower_line() {
        let few = |i: u32| i % 8;
        let many = |i: u32| 100_000 + i;
        let mut spread = Spread::new(SLOTS);
        assert!(spread.in_use(), "in use from the start");
        assert!(
            !feed(&mut spread, FIRST_WINDOW, many),
            "out at the first decision"
        );
        assert!(
            !feed(&mut spread, WINDOW, few),
            "one window that finds enough"
        );
        assert!(feed(&mut spread, WINDOW, few), "two");
        assert!(
            !feed(&mut spread, WINDOW, |i| many(i + WINDOW)),
            "one short"
        );

        // Just under the line, then on it.
        // Each window's others are new limiters: none of them comes back.
        let round = std::cell::Cell::new(0);
        let share = |spread: &mut Spread, returns: u32| {
            round.set(round.get() + 1);
            let others = 200_000 + round.get() * WINDOW;
            feed(spread, WINDOW, |i| if i < returns { 7 } else { others + i })
        };
        let line = WINDOW * IN_USE_AT / PARTS;
        share(&mut spread, WINDOW);
        assert!(!share(&mut spread, line - 1));
        assert!(!share(&mut spread, line));
        assert!(share(&mut spread, line), "two windows on the line");

        // Once in use, it stays down to the lower line.
        let stays = WINDOW * STAYS_IN_USE_AT / PARTS;
        share(&mut spread, WINDOW);
        assert!(share(&mut spread, WINDOW), "in use");
        assert!(
            share(&mut spread, line - 1),
            "under the line to go into use: stays"
        );
        assert!(share(&mut spread, stays), "on the line to stay");
        assert!(!share(&mut spread, stays - 1), "under it: out");

        assert!(!feed(&mut spread, WINDOW, |i| many(i + 2 * WINDOW)));
        spread.hold(true);
        assert!(spread.in_use(), "held");
        for i in 0..WINDOW * SAMPLE_ONE_IN * 3 {
            assert!(spread.count(i as usize % SLOTS, 300_000 + i), "held");
        }
        spread.hold(false);
        assert!(spread.in_use(), "still in use until a window decides");
        assert!(
            !feed(&mut spread, WINDOW, |i| many(i + 3 * WINDOW)),
            "a new window"
        );
    }

    #[test]
    fn one_lookup_in_four_is_sampled_whatever_its_parity() {
        let sampled_of = |parity: u32| {
            (1..=8_000)
                .filter(|n| n % 2 == parity && sampled(*n))
                .count()
        };
        // Calls that alternate between two limiters: each is sampled about 1 000 times.
        for parity in [0, 1] {
            let n = sampled_of(parity);
            assert!((800..1_200).contains(&n), "parity {parity}: {n}");
        }
    }
}
