//! The ONEKEY state decoded last, kept beside its bytes: a limiter's refusals write nothing, so a
//! hot limiter's next call reads the very bytes its last one did, and comparing them replaces
//! decoding them.
//!
//! Decoding is a pure function of the bytes, so a state kept is right for any key that holds
//! those bytes, whatever happened to the key in between: the kept state is never stale, only
//! unused. One state per thread (the server runs commands on one).

use std::cell::RefCell;

use crate::packed_log::{FormatError, PackedLog};
use crate::sliding_log::{Config, Entry};

/// The longest state kept: every log of the default precision (at most 61 entries) is shorter,
/// and comparing this many bytes costs a fraction of decoding them. As each entry takes a byte
/// at least, the most kept is this and about 16 KiB of entries, until the module unloads.
pub const MAX_KEPT_LEN: usize = 1024;

/// A state's bytes and what they decode to, in buffers of its own (not the spare ones a
/// decoded state returns when dropped), reused by the next state kept.
struct Kept {
    bytes: Vec<u8>,
    config: Config,
    epoch: u32,
    entries: Vec<Entry>,
}

thread_local! {
    static LAST: RefCell<Option<Kept>> = const { RefCell::new(None) };
}

/// [`PackedLog::decode`] of `bytes`: a copy of the state decoded last when these are its bytes;
/// otherwise decoded, and kept when they are a state no longer than [`MAX_KEPT_LEN`].
pub fn decode(bytes: &[u8]) -> Result<PackedLog, FormatError> {
    let copy = LAST.try_with(|last| {
        let last = last.try_borrow().ok()?;
        let kept = last.as_ref().filter(|kept| kept.bytes == bytes)?;
        Some(PackedLog::from_parts(
            kept.config,
            kept.epoch,
            &kept.entries,
        ))
    });
    if let Ok(Some(log)) = copy {
        return Ok(log);
    }
    let log = PackedLog::decode(bytes)?;
    if bytes.len() <= MAX_KEPT_LEN {
        keep(bytes, &log);
    }
    Ok(log)
}

/// Keeps `log` as the state of `bytes`, in the buffers of the state kept before it.
fn keep(bytes: &[u8], log: &PackedLog) {
    let _ = LAST.try_with(|last| {
        let Ok(mut last) = last.try_borrow_mut() else {
            return;
        };
        let kept = last.get_or_insert_with(|| Kept {
            bytes: Vec::new(),
            config: *log.config(),
            epoch: log.epoch(),
            entries: Vec::new(),
        });
        kept.bytes.clear();
        kept.bytes.extend_from_slice(bytes);
        kept.config = *log.config();
        kept.epoch = log.epoch();
        kept.entries.clear();
        // Exactly: the buffer grows to the longest log kept, not past it by doubling.
        kept.entries.reserve_exact(log.entries().len());
        kept.entries.extend_from_slice(log.entries());
    });
}

/// Forgets the state kept and frees its buffers (at the module's load and unload: nothing kept
/// from another).
pub fn forget() {
    let kept = LAST.try_with(|last| last.try_borrow_mut().map(|mut last| last.take()));
    drop(kept);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sliding_log::{self, Config, Mode, Reset};

    fn state(epoch: u32, grants: &[i64]) -> PackedLog {
        let config = Config {
            rate: 10,
            interval: 1000,
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
        LAST.with(|last| last.borrow().as_ref().map(|kept| kept.bytes.clone()))
    }

    #[test]
    fn the_same_bytes_give_the_same_state_kept_or_decoded() {
        forget();
        let (a, b) = (state(1, &[100, 200]), state(2, &[100]));
        let (bytes_a, bytes_b) = (a.encode(), b.encode());
        assert_eq!(decode(&bytes_a), Ok(a.clone()));
        assert_eq!(kept_bytes().as_deref(), Some(&bytes_a[..]));
        // Read again: the kept state, equal to a fresh decoding.
        assert_eq!(decode(&bytes_a), PackedLog::decode(&bytes_a));
        // Other bytes replace it, and the first are decoded anew, not confused with them.
        assert_eq!(decode(&bytes_b), Ok(b.clone()));
        assert_eq!(kept_bytes().as_deref(), Some(&bytes_b[..]));
        assert_eq!(decode(&bytes_a), Ok(a.clone()));
        assert_eq!(decode(&bytes_b), Ok(b));
        // Bytes that start as the kept ones, or that they start as, are not them.
        assert_eq!(decode(&bytes_a), Ok(a.clone()));
        let shorter = &bytes_a[..bytes_a.len() - 1];
        assert_eq!(decode(shorter), PackedLog::decode(shorter));
        assert!(decode(shorter).is_err());
        let longer = [&bytes_a[..], &[0]].concat();
        assert!(decode(&longer).is_err());
        // The same limiter (its epoch too) a grant later differs only in its log.
        let (one, two) = (state(1, &[100]), state(1, &[100, 200]));
        assert_eq!(decode(&one.encode()), Ok(one));
        assert_eq!(decode(&two.encode()), Ok(two));
    }

    #[test]
    fn errors_and_long_states_are_not_kept() {
        forget();
        let good = state(1, &[100]).encode();
        assert!(decode(&good).is_ok());
        let mut changed = good.clone();
        if let Some(byte) = changed.get_mut(5) {
            *byte ^= 1;
        }
        // A byte changed by hand is refused every time, though the state before it is kept.
        for _ in 0..2 {
            assert_eq!(decode(&changed), PackedLog::decode(&changed));
            assert!(decode(&changed).is_err());
        }
        assert_eq!(kept_bytes().as_deref(), Some(&good[..]));
        let grants: Vec<i64> = (0..10).map(|i| i * 100).collect();
        let mut long = state(3, &grants);
        while long.encode().len() <= MAX_KEPT_LEN {
            let next = long.config().rate * 2;
            long = PackedLog::new(
                Config {
                    rate: next,
                    interval: next * 100,
                    ..*long.config()
                },
                3,
            );
            let t: Vec<i64> = (0..next).map(|i| i * 100).collect();
            for &at in &t {
                let plan =
                    sliding_log::try_acquire(long.config(), None, &long, at, 1, Reset::NotWanted)
                        .expect("a plan");
                long = long.acquired(&plan);
            }
        }
        let bytes = long.encode();
        assert_eq!(decode(&bytes), Ok(long));
        assert_eq!(kept_bytes().as_deref(), Some(&good[..]));
        forget();
        assert_eq!(kept_bytes(), None);
    }
}
