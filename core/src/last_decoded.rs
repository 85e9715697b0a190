//! A ONEKEY state decoded twice in a row, kept beside its bytes: a limiter's refusals write
//! nothing, so a hot limiter's next call reads the very bytes its last one did, and comparing
//! them replaces decoding them.
//!
//! Decoding is a pure function of the bytes, so a state kept is right for any key that holds
//! those bytes, whatever happened to the key in between: the kept state is never stale, only
//! unused. One state per thread (the server runs commands on one).

use std::cell::RefCell;

use crate::packed_log::{FormatError, PackedLog};
use crate::sliding_log::{Config, Entry};

/// The longest state kept: every log of the default precision (at most 61 entries) is shorter,
/// and comparing this many bytes costs a fraction of decoding them. As each entry takes a byte
/// at least, the most kept is these bytes and about 16 KiB of entries, until the module unloads.
pub const MAX_KEPT_LEN: usize = 1024;

/// A state's bytes and what they decode to, in buffers of its own (not the spare ones a
/// decoded state returns when dropped), reused by the next state kept.
struct Kept {
    mark: Mark,
    bytes: Vec<u8>,
    config: Config,
    epoch: u32,
    entries: Vec<Entry>,
}

/// The length and checksum (its last two bytes) of a state's bytes: equal for the same bytes,
/// and cheap to take from any, so that bytes of another state (at random, every call's) are
/// told apart without comparing them whole.
type Mark = (usize, [u8; 2]);

fn mark(bytes: &[u8]) -> Option<Mark> {
    bytes.last_chunk::<2>().map(|&sum| (bytes.len(), sum))
}

struct Last {
    kept: Option<Kept>,
    /// The mark of the bytes decoded last and not kept. A state is kept when its bytes are
    /// decoded twice in a row: at random every call decodes another state, and keeping each
    /// costs more than noting its mark (server CPU at 200 000 keys, A/B: 1.24x to 1.27x `GCRA`
    /// keeping each state, 1.17x and 1.18x keeping those seen twice, 1.13x to 1.22x keeping none).
    seen: Option<Mark>,
}

thread_local! {
    static LAST: RefCell<Last> = const { RefCell::new(Last { kept: None, seen: None }) };
}

/// [`PackedLog::decode`] of `bytes`: a copy of the state kept when these are its bytes;
/// otherwise decoded, and kept when they were also the bytes decoded just before (and are no
/// longer than [`MAX_KEPT_LEN`]).
pub fn decode(bytes: &[u8]) -> Result<PackedLog, FormatError> {
    LAST.try_with(|last| match last.try_borrow_mut() {
        Ok(mut last) => last.decode(bytes),
        Err(_) => PackedLog::decode(bytes),
    })
    .unwrap_or_else(|_| PackedLog::decode(bytes))
}

impl Last {
    fn decode(&mut self, bytes: &[u8]) -> Result<PackedLog, FormatError> {
        let mark = mark(bytes);
        if let Some(kept) = &self.kept {
            if Some(kept.mark) == mark && kept.bytes == bytes {
                #[cfg(test)]
                tests::COPIES.with(|copies| copies.set(copies.get() + 1));
                return Ok(PackedLog::from_parts(
                    kept.config,
                    kept.epoch,
                    &kept.entries,
                ));
            }
        }
        let log = PackedLog::decode(bytes)?;
        if let (Some(mark), true) = (mark, bytes.len() <= MAX_KEPT_LEN) {
            if self.seen.replace(mark) == Some(mark) {
                self.seen = None;
                self.keep(mark, bytes, &log);
            }
        }
        Ok(log)
    }

    /// Keeps `log` as the state of `bytes`, in the buffers of the state kept before it. Bytes of
    /// another state under the same mark, read just after, are kept as if read twice: harmless,
    /// as a copy is made only for bytes equal to the kept ones.
    fn keep(&mut self, mark: Mark, bytes: &[u8], log: &PackedLog) {
        let kept = self.kept.get_or_insert_with(|| Kept {
            mark,
            bytes: Vec::new(),
            config: *log.config(),
            epoch: log.epoch(),
            entries: Vec::new(),
        });
        kept.mark = mark;
        kept.bytes.clear();
        kept.bytes.reserve_exact(bytes.len());
        kept.bytes.extend_from_slice(bytes);
        kept.config = *log.config();
        kept.epoch = log.epoch();
        kept.entries.clear();
        // Exactly, as the bytes: a buffer grows to the longest kept, not past it by doubling.
        kept.entries.reserve_exact(log.entries().len());
        kept.entries.extend_from_slice(log.entries());
    }
}

/// Forgets the state kept and frees its buffers (at the module's load and unload: nothing kept
/// from another).
pub fn forget() {
    let kept = LAST.try_with(|last| {
        last.try_borrow_mut().map(|mut last| {
            last.seen = None;
            last.kept.take()
        })
    });
    drop(kept);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sliding_log::{self, Mode, Reset};
    use std::cell::Cell;

    thread_local! {
        /// The copies made of a kept state, on this test's thread.
        pub(super) static COPIES: Cell<u32> = const { Cell::new(0) };
    }

    fn copies() -> u32 {
        COPIES.with(Cell::get)
    }

    fn state(epoch: u32, rate: i64, grants: &[i64]) -> PackedLog {
        let config = Config {
            rate,
            interval: rate * 100,
            mode: Mode::OneKey,
            keep_alive: 0,
            precision: 1,
        };
        let mut log = PackedLog::new(config, epoch);
        for &t in grants {
            let plan = sliding_log::try_acquire(&config, None, &log, t, 1, Reset::NotWanted)
                .expect("a plan");
            log = log.acquired(&plan);
        }
        log
    }

    fn kept_bytes() -> Option<Vec<u8>> {
        LAST.with(|last| last.borrow().kept.as_ref().map(|kept| kept.bytes.clone()))
    }

    /// Decodes through the kept state, checked against decoding.
    fn read(bytes: &[u8]) -> Result<PackedLog, FormatError> {
        let through = decode(bytes);
        assert_eq!(through, PackedLog::decode(bytes));
        through
    }

    #[test]
    fn bytes_decoded_twice_in_a_row_are_kept_and_copied_after() {
        forget();
        let (a, b) = (state(1, 10, &[100, 200]), state(2, 10, &[100]));
        let (bytes_a, bytes_b) = (a.encode(), b.encode());
        let before = copies();
        assert_eq!(read(&bytes_a), Ok(a.clone()));
        assert_eq!(kept_bytes(), None, "seen once");
        assert_eq!(read(&bytes_a), Ok(a.clone()));
        assert_eq!(kept_bytes().as_deref(), Some(&bytes_a[..]), "seen twice");
        assert_eq!(copies(), before, "decoded both times");
        // Read again: copied from the kept state.
        assert_eq!(read(&bytes_a), Ok(a.clone()));
        assert_eq!(read(&bytes_a), Ok(a.clone()));
        assert_eq!(copies(), before + 2);
        // Other bytes, once, leave it kept; twice, replace it.
        assert_eq!(read(&bytes_b), Ok(b.clone()));
        assert_eq!(kept_bytes().as_deref(), Some(&bytes_a[..]));
        assert_eq!(read(&bytes_b), Ok(b.clone()));
        assert_eq!(kept_bytes().as_deref(), Some(&bytes_b[..]));
        // Bytes taking turns are never kept: as at random, every call decodes another state.
        for _ in 0..3 {
            assert_eq!(read(&bytes_a), Ok(a.clone()));
            assert_eq!(
                read(&state(3, 10, &[100]).encode()),
                Ok(state(3, 10, &[100]))
            );
        }
        assert_eq!(kept_bytes().as_deref(), Some(&bytes_b[..]));
        forget();
        assert_eq!(kept_bytes(), None);
    }

    #[test]
    fn only_the_kept_bytes_themselves_are_copied() {
        forget();
        let a = state(1, 10, &[100, 200]);
        let bytes_a = a.encode();
        for _ in 0..2 {
            assert_eq!(read(&bytes_a), Ok(a.clone()));
        }
        assert_eq!(kept_bytes().as_deref(), Some(&bytes_a[..]));
        // Bytes that start as the kept ones, or that they start as, are not them.
        let shorter = &bytes_a[..bytes_a.len() - 1];
        let longer = [&bytes_a[..], &[0]].concat();
        for _ in 0..2 {
            assert!(read(shorter).is_err());
            assert!(read(&longer).is_err());
        }
        // A byte changed by hand (so the checksum refuses it), read twice and more: refused.
        let mut changed = bytes_a.clone();
        if let Some(byte) = changed.get_mut(5) {
            *byte ^= 1;
        }
        for _ in 0..3 {
            assert!(read(&changed).is_err());
        }
        assert_eq!(kept_bytes().as_deref(), Some(&bytes_a[..]));
        // The same limiter (its epoch too) a grant later differs only in its log.
        let (one, two) = (state(1, 10, &[100]), state(1, 10, &[100, 200]));
        for _ in 0..2 {
            assert_eq!(read(&one.encode()), Ok(one.clone()));
        }
        assert_eq!(read(&two.encode()), Ok(two));
        // Other bytes under the kept bytes' mark (length and checksum) are not them: a padding
        // zero made 0xFF (Fletcher's sums are modulo 255, so the checksum stays) is refused.
        for _ in 0..2 {
            assert_eq!(read(&bytes_a), Ok(a.clone()));
        }
        let mut twin = bytes_a.clone();
        let n = twin.len();
        assert_eq!(twin.get(n - 3), Some(&0), "a padding byte");
        twin[n - 3] = 0xFF;
        let before = copies();
        assert!(read(&twin).is_err());
        assert_eq!(copies(), before);
        assert_eq!(kept_bytes().as_deref(), Some(&bytes_a[..]));
    }

    #[test]
    fn a_state_under_the_kept_ones_mark_is_decoded_and_kept_only_when_read_twice() {
        forget();
        // Epochs 0x0001 and 0xFF01: one byte 0x00 against 0xFF, the same length and checksum.
        let (a, twin) = (state(0x0001, 10, &[100]), state(0xFF01, 10, &[100]));
        let (bytes_a, bytes_twin) = (a.encode(), twin.encode());
        assert_ne!(bytes_a, bytes_twin);
        assert_eq!(mark(&bytes_a), mark(&bytes_twin));
        for _ in 0..2 {
            assert_eq!(read(&bytes_a), Ok(a.clone()));
        }
        assert_eq!(kept_bytes().as_deref(), Some(&bytes_a[..]));
        // Once: decoded, not copied, and the kept state stays (its mark was not left as seen).
        let before = copies();
        assert_eq!(read(&bytes_twin), Ok(twin.clone()));
        assert_eq!(copies(), before);
        assert_eq!(kept_bytes().as_deref(), Some(&bytes_a[..]));
        // Twice: kept in its place, and the first decoded anew, never copied from it.
        assert_eq!(read(&bytes_twin), Ok(twin.clone()));
        assert_eq!(kept_bytes().as_deref(), Some(&bytes_twin[..]));
        assert_eq!(read(&bytes_a), Ok(a));
        assert_eq!(read(&bytes_twin), Ok(twin));
        assert_eq!(copies(), before + 1);
    }

    #[test]
    fn a_state_longer_than_the_bound_is_not_kept() {
        forget();
        let small = state(1, 10, &[100]);
        for _ in 0..2 {
            assert_eq!(read(&small.encode()), Ok(small.clone()));
        }
        // A grant every 100 ms, each an entry of its own: two bytes or so each.
        let rate = 1000;
        let grants: Vec<i64> = (0..rate).map(|i| i * 100).collect();
        let long = state(3, rate, &grants);
        let bytes = long.encode();
        assert!(bytes.len() > MAX_KEPT_LEN, "{} bytes", bytes.len());
        for _ in 0..3 {
            assert_eq!(read(&bytes), Ok(long.clone()));
        }
        assert_eq!(kept_bytes(), Some(small.encode()));
    }
}
