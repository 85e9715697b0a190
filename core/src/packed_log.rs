//! A ONEKEY limiter's whole state, its configuration and its permit log, packed into the bytes of
//! one Redis string, independent of Redis.
//!
//! The three-key form keeps Redisson's hash, value and permits zset, so that Redisson clients
//! share the limiter. A limiter no Redisson client reads (most per-user limiters) needs none of
//! that: the same sliding log ([`crate::sliding_log`], the same plans) fits in one string a few
//! dozen bytes long, written with one `SET ... PXAT`, which a replica or an AOF without the
//! module restores.
//!
//! The log's entries are PRECISION buckets: a grant at `t` is logged at the last millisecond of
//! its bucket, as in the three-key form, so an entry is the bucket's number and its permits.
//! Sorted by score, each entry is stored as the distance in buckets from the one before, so a
//! window of `interval / precision` buckets costs about a byte per bucket used.
//!
//! The bytes, integers in unsigned LEB128 ("varint") unless said otherwise:
//! - `MAGIC` (2 bytes), then the format's version (1 byte);
//! - the configuration: `rate`, `interval`, `precision`, `keep_alive` (ms);
//! - the limiter's epoch: a random `u32`, little-endian, drawn when the state is created or
//!   reset, so that a grant a CANCEL gives back is taken only off the log it was granted in;
//! - the number of entries, then the entries, oldest first: for each, a varint `distance << 1 |
//!   more`, where `distance` is its bucket less the previous entry's (the first entry's bucket
//!   itself, zigzag-encoded as it may be negative) and `more` says that a varint with its
//!   permits follows; without it the entry holds 1 permit;
//! - zeros, up to the length [`stored_len`] gives;
//! - a Fletcher-16 checksum of every byte before it, little-endian: a state changed by hand
//!   (`SETRANGE`, `APPEND`) is refused as corrupt, not read as another limiter.

// Pure logic: no FFI here.
#![forbid(unsafe_code)]

use std::cell::RefCell;
use std::convert::Infallible;
use std::fmt;
use std::ops::ControlFlow;

use byteorder::{ByteOrder, LittleEndian};

use crate::number::{MAX_DURATION_MS, MAX_PERMITS};
use crate::sliding_log::{
    AcquirePlan, Config, Entry, GiveBackPlan, KeepStatePlan, Mode, Order, PermitLog, Prune,
    ReleasePlan, Span,
};

/// The first bytes of every ONEKEY limiter. Not ASCII, so no number or text a client stores (a
/// GCRA key holds a number) is ever read as one.
pub const MAGIC: [u8; 2] = [0xF5, b'L'];
/// The version of the layout after the magic.
pub const VERSION: u8 = 1;

/// Buckets in a window when SETRATE or `RATE` gives no PRECISION: a minute's limit frees its
/// permits at most a second late, and its log never holds more than 61 entries.
pub const DEFAULT_BUCKETS: i64 = 60;

/// The most entries a ONEKEY limiter's configuration lets its log hold: each call decodes and
/// encodes the whole log, so its cost is bounded by bounding the log. A log holds at most one
/// entry per bucket of its window and one per permit, so a configuration is accepted when
/// `min(rate, interval / precision)` is at most this ([`PackedLog::bounded`]).
pub const MAX_ENTRIES: i64 = 4096;

/// The longest string read as a ONEKEY limiter's state: far above what [`MAX_ENTRIES`] entries
/// take (a few bytes each), so a string written by hand cannot make a call read megabytes.
pub const MAX_LEN: usize = 256 * 1024;

/// The precision a ONEKEY limiter of `interval` gets when none is given.
pub fn default_precision(interval: i64) -> i64 {
    (interval / DEFAULT_BUCKETS).max(1)
}

/// Why bytes are not a ONEKEY limiter's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FormatError {
    /// Not one at all: the string holds something else (a number, text, a GCRA key).
    Foreign,
    /// A version this build does not read.
    Version(u8),
    /// The bytes end inside a field.
    Truncated,
    /// A configuration field outside what SETRATE accepts.
    OutOfRange(&'static str),
    /// An entry holding 0 permits, or one whose score does not fit the clock.
    BadEntry,
    /// The bytes do not match their checksum: changed since the module wrote them.
    Checksum,
}

impl fmt::Display for FormatError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FormatError::Foreign => f.write_str("not a ONEKEY limiter"),
            FormatError::Version(v) => write!(f, "ONEKEY layout version {v} is not known"),
            FormatError::Truncated => f.write_str("the ONEKEY state ends inside a field"),
            FormatError::OutOfRange(field) => write!(f, "ONEKEY field '{field}' is out of range"),
            FormatError::BadEntry => f.write_str("a ONEKEY log entry is invalid"),
            FormatError::Checksum => f.write_str("the ONEKEY state fails its checksum"),
        }
    }
}

/// A ONEKEY limiter's configuration and log, decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PackedLog {
    config: Config,
    epoch: u32,
    /// Sorted by score, oldest first; scores are bucket ends of `config.precision`.
    entries: Vec<Entry>,
}

impl PackedLog {
    /// A new limiter's state: `config` and an empty log.
    pub fn new(config: Config, epoch: u32) -> Self {
        PackedLog {
            config: Config {
                mode: Mode::OneKey,
                ..config
            },
            epoch,
            entries: Vec::new(),
        }
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Drawn when the state was created or last reset: a grant's ticket remembers it, so that a
    /// give-back never takes permits off a log created anew since.
    pub fn epoch(&self) -> u32 {
        self.epoch
    }

    /// A state of parts taken from one decoded ([`crate::last_decoded`] keeps them), its entries
    /// copied into a spare buffer as decoding would.
    pub(crate) fn from_parts(config: Config, epoch: u32, entries: &[Entry]) -> Self {
        let mut buffer = entry_buffer(entries.len());
        buffer.extend_from_slice(entries);
        PackedLog {
            config,
            epoch,
            entries: buffer,
        }
    }

    /// The log's entries, oldest first.
    pub(crate) fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// Whether a configuration keeps a ONEKEY log within [`MAX_ENTRIES`] entries.
    pub fn bounded(config: &Config) -> bool {
        let buckets = config.interval / config.precision.max(1);
        config.rate.min(buckets) <= MAX_ENTRIES
    }

    /// The permits of the entry scored `score`, if there is one.
    pub fn held_at(&self, score: i64) -> Option<u32> {
        self.entries
            .iter()
            .find(|entry| entry.score == score)
            .map(|entry| entry.permits)
    }

    /// Whether a string's bytes are, by their first bytes, a ONEKEY limiter's (whatever the
    /// rest holds).
    pub fn is_packed(bytes: &[u8]) -> bool {
        bytes.starts_with(&MAGIC)
    }

    /// Reads bytes [`PackedLog::encode`] wrote; never panics, whatever the bytes.
    pub fn decode(bytes: &[u8]) -> Result<Self, FormatError> {
        let body = bytes.strip_prefix(&MAGIC).ok_or(FormatError::Foreign)?;
        let (&version, _) = body.split_first().ok_or(FormatError::Truncated)?;
        if bytes.len() > MAX_LEN {
            return Err(FormatError::OutOfRange("length"));
        }
        if version != VERSION {
            return Err(FormatError::Version(version));
        }
        let (checked, sum) = bytes
            .split_last_chunk::<2>()
            .filter(|(checked, _)| checked.len() > MAGIC.len())
            .ok_or(FormatError::Truncated)?;
        if LittleEndian::read_u16(sum) != fletcher16(checked) {
            return Err(FormatError::Checksum);
        }
        let body = checked.get(MAGIC.len() + 1..).unwrap_or_default();
        let mut reader = Reader(body);
        let rate = reader.bounded("rate", 0, MAX_PERMITS)?;
        let interval = reader.bounded("interval", 1, MAX_DURATION_MS)?;
        let precision = reader.bounded("precision", 1, interval)?;
        let keep_alive = reader.bounded("keep_alive", 0, MAX_DURATION_MS)?;
        if keep_alive != 0 && keep_alive < interval {
            return Err(FormatError::OutOfRange("keep_alive"));
        }
        let epoch = reader.u32()?;
        let config = Config {
            rate,
            interval,
            mode: Mode::OneKey,
            keep_alive,
            precision,
        };
        let count = reader.varint()?;
        // Each entry takes a byte at least: a count beyond the bytes left is corrupt.
        let count = usize::try_from(count)
            .ok()
            .filter(|&n| n <= reader.0.len())
            .ok_or(FormatError::BadEntry)?;
        let mut entries = entry_buffer(count);
        let mut bucket: Option<i64> = None;
        for _ in 0..count {
            let token = reader.varint()?;
            let (distance, more) = (token >> 1, token & 1 == 1);
            let this = match bucket {
                None => unzigzag(distance),
                Some(previous) => i64::try_from(distance)
                    .ok()
                    .and_then(|d| previous.checked_add(d))
                    .ok_or(FormatError::BadEntry)?,
            };
            let permits = if more {
                u32::try_from(reader.varint()?).map_err(|_| FormatError::BadEntry)?
            } else {
                1
            };
            if permits == 0 {
                return Err(FormatError::BadEntry);
            }
            let score = bucket_end(this, precision).ok_or(FormatError::BadEntry)?;
            entries.push(Entry { score, permits });
            bucket = Some(this);
        }
        if reader.0.iter().any(|&byte| byte != 0) {
            return Err(FormatError::BadEntry);
        }
        Ok(PackedLog {
            config,
            epoch,
            entries,
        })
    }

    /// The bytes of this state, read back by [`PackedLog::decode`].
    pub fn encode(&self) -> Vec<u8> {
        let mut out = vec![0; max_encoded_len(self.entries.len())];
        match self.encode_into(&mut out) {
            Ok(len) => out.truncate(len),
            // Never with the bound as it is; if a format change ever broke it, the exact length
            // the first pass counted always fits.
            Err(needed) => {
                out = vec![0; needed];
                let len = self.encode_into(&mut out).unwrap_or(needed);
                out.truncate(len);
            }
        }
        out
    }

    /// Hands `write` this state's bytes ([`PackedLog::encode`]'s), encoded on the stack when a
    /// log of its length always fits there: a state is a few dozen bytes, and its write then
    /// allocates nothing.
    pub fn with_encoded<R>(&self, write: impl FnOnce(&[u8]) -> R) -> R {
        let mut stack = [0u8; STACK_ENCODING];
        if max_encoded_len(self.entries.len()) <= stack.len() {
            if let Ok(len) = self.encode_into(&mut stack) {
                return write(stack.get(..len).unwrap_or_default());
            }
        }
        write(&self.encode())
    }

    /// Encodes into `buf`, which [`max_encoded_len`] bytes always fit, and returns the length;
    /// or, if `buf` was too short after all, the length it needed (nothing it wrote is to be
    /// used: a truncated state would read as corrupt, or worse as an empty limiter).
    fn encode_into(&self, buf: &mut [u8]) -> Result<usize, usize> {
        let c = &self.config;
        let mut out = Writer { buf, len: 0 };
        out.put(&MAGIC);
        out.put(&[VERSION]);
        for field in [c.rate, c.interval, c.precision, c.keep_alive] {
            out.varint(field.max(0).unsigned_abs());
        }
        let mut epoch = [0u8; 4];
        LittleEndian::write_u32(&mut epoch, self.epoch);
        out.put(&epoch);
        out.varint(self.entries.len() as u64);
        let mut previous: Option<i64> = None;
        for entry in &self.entries {
            let bucket = bucket_of(entry.score, c.precision);
            let distance = match previous {
                None => zigzag(bucket),
                // Sorted: never negative.
                Some(p) => bucket.saturating_sub(p).max(0).unsigned_abs(),
            };
            let more = entry.permits != 1;
            out.varint(distance << 1 | u64::from(more));
            if more {
                out.varint(u64::from(entry.permits));
            }
            previous = Some(bucket);
        }
        let checked = stored_len(out.len + 2) - 2;
        out.zeros_to(checked);
        let mut sum = [0u8; 2];
        LittleEndian::write_u16(&mut sum, fletcher16(out.written()));
        out.put(&sum);
        if out.len <= out.buf.len() {
            Ok(out.len)
        } else {
            Err(out.len)
        }
    }

    /// Applies what an acquisition plan writes: the prune, then the grant, which joins the
    /// entry already at its score.
    pub fn apply_acquire(&mut self, plan: &AcquirePlan) {
        *self = self.acquired(plan);
    }

    /// The state an acquisition plan leaves, in one buffer with room for the grant (a spare one,
    /// so mostly no allocation): the entries the prune keeps (the oldest go, the log being
    /// sorted), then the grant, which joins the entry already at its score. The state read stays
    /// as it was.
    pub fn acquired(&self, plan: &AcquirePlan) -> PackedLog {
        let kept = match plan.prune {
            Prune::Nothing => &self.entries[..],
            Prune::UpTo(cutoff) => self
                .entries
                .get(self.entries.partition_point(|entry| entry.score <= cutoff)..)
                .unwrap_or_default(),
            Prune::All => &[],
        };
        let mut entries = entry_buffer(kept.len() + 1);
        entries.extend_from_slice(kept);
        let mut log = PackedLog {
            config: self.config,
            epoch: self.epoch,
            entries,
        };
        if let Some(entry) = plan.append {
            log.add(entry);
        }
        log
    }

    /// Applies what a RELEASE plan writes: the prune, the newest entries removed, and the newest
    /// left shrunk.
    pub fn apply_release(&mut self, plan: &ReleasePlan) {
        self.prune(plan.prune);
        let kept = self.entries.len().saturating_sub(plan.remove_newest);
        self.entries.truncate(kept);
        if let (Some(permits), Some(newest)) = (plan.shrink_newest_to, self.entries.last_mut()) {
            newest.permits = permits;
        }
    }

    /// Applies what a give-back of the grant logged at `score` writes: the prune, then that
    /// entry reduced or removed.
    pub fn apply_give_back(&mut self, plan: &GiveBackPlan, score: i64) {
        self.prune(plan.prune);
        let Some(at) = self.entries.iter().position(|entry| entry.score == score) else {
            return;
        };
        match plan.entry_keeps {
            Some(permits) => {
                if let Some(entry) = self.entries.get_mut(at) {
                    entry.permits = permits;
                }
            }
            None => {
                self.entries.remove(at);
            }
        }
    }

    /// SETRATE: `config` from now on. With a KEEPSTATE plan the log stays (pruned by the new
    /// interval; entries moved to the end of their bucket of a new precision, so none frees
    /// early); without one it is emptied and the state gets the new `epoch`.
    pub fn reconfigure(&mut self, config: Config, keep: Option<KeepStatePlan>, epoch: u32) {
        let config = Config {
            mode: Mode::OneKey,
            ..config
        };
        match keep {
            Some(plan) => {
                self.prune(plan.prune);
                if config.precision != self.config.precision {
                    let mut moved = std::mem::take(&mut self.entries);
                    for entry in &mut moved {
                        entry.score = config.entry_score(entry.score);
                    }
                    self.config = config;
                    for entry in moved {
                        self.add(entry);
                    }
                }
            }
            None => {
                self.entries.clear();
                self.epoch = epoch;
            }
        }
        self.config = config;
    }

    /// Adds an entry in score order; one at the same score takes its permits instead, unless
    /// their sum does not fit (the grant then gets an entry of its own at that score).
    fn add(&mut self, entry: Entry) {
        let at = self.entries.partition_point(|e| e.score <= entry.score);
        if let Some(same) = at
            .checked_sub(1)
            .and_then(|i| self.entries.get_mut(i))
            .filter(|e| e.score == entry.score)
        {
            if let Some(sum) = same.permits.checked_add(entry.permits) {
                same.permits = sum;
                return;
            }
        }
        self.entries.insert(at, entry);
    }

    fn prune(&mut self, prune: Prune) {
        match prune {
            Prune::Nothing => {}
            Prune::UpTo(cutoff) => self.entries.retain(|entry| entry.score > cutoff),
            Prune::All => self.entries.clear(),
        }
    }

    /// The entries of `span`, oldest first.
    fn span(&self, span: Span) -> &[Entry] {
        // Where entries scored after `t` start. The ends are looked at first: a call's spans
        // mostly cut at its window's start, before the oldest entry while nothing expired.
        let after = |t: i64| match (self.entries.first(), self.entries.last()) {
            (Some(oldest), _) if oldest.score > t => 0,
            (_, Some(newest)) if newest.score <= t => self.entries.len(),
            _ => self.entries.partition_point(|e| e.score <= t),
        };
        let (from, to) = match span {
            Span::UpTo(t) => (0, after(t)),
            Span::After(t) => (after(t), self.entries.len()),
            Span::Between(low, high) => (after(low), after(high).max(after(low))),
            Span::Everything => (0, self.entries.len()),
        };
        self.entries.get(from..to).unwrap_or_default()
    }
}

impl PermitLog for PackedLog {
    type Error = Infallible;

    fn entry_count(&self) -> Result<usize, Infallible> {
        Ok(self.entries.len())
    }

    fn scan(
        &self,
        span: Span,
        order: Order,
        visit: &mut dyn FnMut(Entry) -> ControlFlow<()>,
    ) -> Result<(), Infallible> {
        let entries = self.span(span);
        let mut go = |entry: &Entry| visit(*entry).is_continue();
        match order {
            Order::OldestFirst => entries.iter().all(&mut go),
            Order::NewestFirst => entries.iter().rev().all(&mut go),
        };
        Ok(())
    }

    fn newest_score(&self, span: Span) -> Result<Option<i64>, Infallible> {
        Ok(self.span(span).last().map(|entry| entry.score))
    }
}

thread_local! {
    /// The entry buffers of the last states dropped, emptied, for the next ones: a call holds
    /// at most two states at once (the one it read and the one it writes), and a short log's
    /// allocation and free cost more than its decoding. One pair per thread (the server runs
    /// commands on one).
    static SPARE_ENTRIES: RefCell<[Vec<Entry>; 2]> = const { RefCell::new([Vec::new(), Vec::new()]) };
}

/// The longest buffer kept spare: a longer log's is freed, so that no more than this is kept.
const SPARE_MAX: usize = DEFAULT_BUCKETS as usize + 1;

/// An empty entry buffer with room for `count` entries: a spare one if there is one.
fn entry_buffer(count: usize) -> Vec<Entry> {
    let spare = SPARE_ENTRIES.try_with(|spares| {
        let mut spares = spares.try_borrow_mut().ok()?;
        spares
            .iter_mut()
            .find(|spare| spare.capacity() > 0)
            .map(std::mem::take)
    });
    let mut entries = spare.ok().flatten().unwrap_or_default();
    // Exactly: a spare grown past SPARE_MAX by doubling would be freed, not kept.
    entries.reserve_exact(count);
    entries
}

/// Frees the spare entry buffers (at the module's load and unload: nothing kept from another).
pub fn free_spare_entries() {
    let spares = SPARE_ENTRIES.try_with(|spares| {
        spares
            .try_borrow_mut()
            .map(|mut kept| std::mem::take(&mut *kept))
    });
    drop(spares);
}

impl Drop for PackedLog {
    /// Keeps the entries' buffer spare for the next state, unless it is long or two are kept.
    fn drop(&mut self) {
        let capacity = self.entries.capacity();
        if capacity == 0 || capacity > SPARE_MAX {
            return;
        }
        let mut entries = std::mem::take(&mut self.entries);
        entries.clear();
        // Without a free place it is freed here, after the borrow.
        let _ = SPARE_ENTRIES.try_with(|spares| {
            if let Ok(mut spares) = spares.try_borrow_mut() {
                if let Some(free) = spares.iter_mut().find(|spare| spare.capacity() == 0) {
                    *free = std::mem::take(&mut entries);
                }
            }
        });
    }
}

/// The bucket of an entry scored at a bucket's end.
fn bucket_of(score: i64, precision: i64) -> i64 {
    score
        .saturating_sub(precision.saturating_sub(1))
        .div_euclid(precision.max(1))
}

/// The last millisecond of `bucket`, if it fits.
fn bucket_end(bucket: i64, precision: i64) -> Option<i64> {
    bucket.checked_mul(precision)?.checked_add(precision - 1)
}

/// The shortest length a state is written at: one byte past the longest string Redis embeds in
/// its object (44 bytes). The module reads a state with DMA, and the server replaces an
/// embedded string with a copy of its own on such a read, even one that only reads: a state set
/// whole on every grant was copied again by the next call. A longer string lies apart from its
/// object, so it is read where it lies and, while its length stays, rewritten there. A limiter
/// of up to about 25 buckets pays 32 bytes for it (`MEMORY USAGE` 112 B where it was 80 B) and
/// saves about 3 000 instructions a call at random (see docs/performance.md). Valkey 8.1 and
/// 9.0 embed less than Redis; Valkey 9.1 embeds up to 128 bytes with the key when a string is
/// set whole, so there a state whose length changed is embedded and copied by its next read,
/// then rewritten in place (a new key's state is made at its length, not embedded: see key.rs).
pub const MIN_STORED_LEN: usize = 45;

/// The length a state of `len` bytes is written at, padded with zeros: at least
/// [`MIN_STORED_LEN`], and its allocation in Redis (the bytes, the string's header and its
/// terminating zero) rounded up to jemalloc's size class, which it would take anyway. A state
/// that gains an entry or two then keeps its length and is rewritten in place, instead of being
/// allocated anew with its TTL set again.
pub fn stored_len(len: usize) -> usize {
    let len = len.max(MIN_STORED_LEN);
    let padded = |overhead: usize| {
        let alloc = len + overhead;
        // Size classes: steps of 16 up to 128, then four classes between powers of two.
        let step = if alloc <= 128 {
            16
        } else {
            let below = 1usize << (usize::BITS - 1 - (alloc - 1).leading_zeros());
            below / 4
        };
        alloc.next_multiple_of(step) - overhead
    };
    // An sds string of up to 255 bytes has a 3-byte header, a longer one 5; and a zero.
    match padded(4) {
        short if short < 256 => short,
        _ => padded(6),
    }
}

/// Fletcher's 16-bit checksum: two running sums modulo 255, reduced once per block of bytes
/// short enough that the sums cannot overflow.
fn fletcher16(bytes: &[u8]) -> u16 {
    let (mut low, mut high) = (0u64, 0u64);
    for block in bytes.chunks(4096) {
        for &byte in block {
            low += u64::from(byte);
            high += low;
        }
        low %= 255;
        high %= 255;
    }
    ((high << 8) | low) as u16
}

fn zigzag(n: i64) -> u64 {
    ((n << 1) ^ (n >> 63)) as u64
}

fn unzigzag(n: u64) -> i64 {
    ((n >> 1) as i64) ^ -((n & 1) as i64)
}

/// The longest encoding [`PackedLog::with_encoded`] makes on the stack: room for the longest
/// log of 63 entries, so every log of the default precision (at most 61) is encoded there.
const STACK_ENCODING: usize = 1024;

/// The longest encoding of a state of `entries` entries, padding included: the header's fixed
/// bytes, each varint at its longest (10 bytes; an entry's two 15), the checksum; then padded as
/// [`stored_len`] pads.
fn max_encoded_len(entries: usize) -> usize {
    let body = 3 + 4 * 10 + 4 + 10 + entries.saturating_mul(15);
    stored_len(body + 2)
}

/// Writes an encoding into a buffer its caller sized by [`max_encoded_len`], so every byte
/// fits (a byte past the end would be dropped, never written out of bounds).
struct Writer<'b> {
    buf: &'b mut [u8],
    len: usize,
}

impl Writer<'_> {
    fn put(&mut self, bytes: &[u8]) {
        let end = self.len + bytes.len();
        if let Some(to) = self.buf.get_mut(self.len..end) {
            to.copy_from_slice(bytes);
        }
        self.len = end;
    }

    fn varint(&mut self, mut n: u64) {
        while n >= 0x80 {
            self.put(&[(n as u8) | 0x80]);
            n >>= 7;
        }
        self.put(&[n as u8]);
    }

    /// Zeros up to `len` bytes written.
    fn zeros_to(&mut self, len: usize) {
        if let Some(to) = self.buf.get_mut(self.len..len) {
            to.fill(0);
        }
        self.len = self.len.max(len);
    }

    fn written(&self) -> &[u8] {
        self.buf.get(..self.len).unwrap_or_default()
    }
}

/// Reads fields off the front of the bytes.
struct Reader<'a>(&'a [u8]);

// Inlined: a decode reads a dozen fields or so, most of them a byte or a few, and a call per
// field cost more than its reading.
impl Reader<'_> {
    #[inline(always)]
    fn varint(&mut self) -> Result<u64, FormatError> {
        let mut n = 0u64;
        for shift in (0..64).step_by(7) {
            let (&byte, rest) = self.0.split_first().ok_or(FormatError::Truncated)?;
            self.0 = rest;
            let bits = u64::from(byte & 0x7F);
            // The tenth byte may hold only the top bit.
            if shift == 63 && bits > 1 {
                return Err(FormatError::BadEntry);
            }
            n |= bits << shift;
            if byte & 0x80 == 0 {
                return Ok(n);
            }
        }
        Err(FormatError::BadEntry)
    }

    #[inline(always)]
    fn bounded(&mut self, field: &'static str, min: i64, max: i64) -> Result<i64, FormatError> {
        i64::try_from(self.varint()?)
            .ok()
            .filter(|n| (min..=max).contains(n))
            .ok_or(FormatError::OutOfRange(field))
    }

    fn u32(&mut self) -> Result<u32, FormatError> {
        let (field, rest) = self.0.split_at_checked(4).ok_or(FormatError::Truncated)?;
        self.0 = rest;
        Ok(LittleEndian::read_u32(field))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sliding_log::{self, Outcome, Reset};

    fn config(rate: i64, interval: i64, precision: i64) -> Config {
        Config {
            rate,
            interval,
            mode: Mode::OneKey,
            keep_alive: 0,
            precision,
        }
    }

    fn grant(log: &mut PackedLog, now: i64, permits: u32) -> Outcome {
        let plan =
            sliding_log::try_acquire(log.config(), None, log, now, permits, Reset::Wanted).unwrap();
        log.apply_acquire(&plan);
        plan.outcome
    }

    fn roundtrip(log: &PackedLog) -> PackedLog {
        let decoded = PackedLog::decode(&log.encode()).unwrap();
        assert_eq!(&decoded, log);
        decoded
    }

    #[test]
    fn a_state_reads_back_as_written() {
        let mut log = PackedLog::new(config(100, 60_000, 1000), 0xDEAD_BEEF);
        roundtrip(&log);
        for (i, permits) in [1, 1, 5, 1, 300].into_iter().enumerate() {
            log.add(Entry {
                score: log.config.entry_score(1_800_000_000_000 + 1200 * i as i64),
                permits,
            });
        }
        let decoded = roundtrip(&log);
        assert_eq!(decoded.epoch(), 0xDEAD_BEEF);
        assert_eq!(decoded.config().mode, Mode::OneKey);
        // Scores before the epoch of the clock and at its far end.
        let mut odd = PackedLog::new(config(3, 10, 3), 1);
        odd.add(Entry {
            score: odd.config.entry_score(-7),
            permits: 1,
        });
        odd.add(Entry {
            score: odd.config.entry_score(MAX_DURATION_MS),
            permits: u32::MAX,
        });
        roundtrip(&odd);
    }

    #[test]
    fn fifty_grants_of_a_minute_limit_take_about_a_byte_each() {
        let cfg = Config {
            keep_alive: 60_000,
            ..config(100, 60_000, default_precision(60_000))
        };
        let mut log = PackedLog::new(cfg, 7);
        let start = 1_800_000_000_000;
        for i in 0..50 {
            assert_eq!(grant(&mut log, start + i * 1200, 1), Outcome::Acquired);
        }
        let bytes = log.encode();
        assert_eq!(log.entries.len(), 50);
        // 16 bytes of header, a count, 5 for the first bucket, one a grant; padded to 76.
        assert_eq!(bytes.len(), stored_len(16 + 1 + 5 + 49 + 2));
        assert_eq!(bytes.len(), 76);
    }

    #[test]
    fn never_admits_more_than_the_rate_in_any_window() {
        // Grants at varied times, then every window of the interval is summed from the log.
        let mut log = PackedLog::new(config(7, 1000, 50), 1);
        let mut granted: Vec<(i64, u32)> = Vec::new();
        let mut now = 10_000;
        for step in 0..3000i64 {
            now += (step * 37) % 61;
            let permits = 1 + (step % 3) as u32;
            if grant(&mut log, now, permits) == Outcome::Acquired {
                granted.push((now, permits));
            }
            log = roundtrip(&log);
        }
        assert!(granted.len() > 100);
        for &(t, _) in &granted {
            let in_window: u32 = granted
                .iter()
                .filter(|&&(u, _)| u >= t && u < t + 1000)
                .map(|&(_, p)| p)
                .sum();
            assert!(in_window <= 7, "{in_window} granted in [{t}, {})", t + 1000);
        }
    }

    #[test]
    fn a_permit_frees_at_most_precision_minus_one_late_never_early() {
        let mut log = PackedLog::new(config(1, 1000, 100), 1);
        assert_eq!(grant(&mut log, 5_000, 1), Outcome::Acquired);
        // Logged at 5099: free at 6099.
        assert_eq!(grant(&mut log, 5_999, 1), Outcome::Wait(100));
        assert_eq!(grant(&mut log, 6_098, 1), Outcome::Wait(1));
        assert_eq!(grant(&mut log, 6_099, 1), Outcome::Acquired);
    }

    #[test]
    fn release_and_give_back_take_permits_off_the_log() {
        let mut log = PackedLog::new(config(10, 1000, 1), 1);
        for t in [100, 100, 200, 300] {
            grant(&mut log, t, 2);
        }
        assert_eq!(log.held_at(100), Some(4));
        let cfg = *log.config();
        let plan = sliding_log::release(&cfg, None, &log, 300, 3).unwrap();
        assert_eq!(plan.released, 3);
        log.apply_release(&plan);
        assert_eq!(log.entries, [e(100, 4), e(200, 1)]);
        let grant_at_100 = e(100, 2);
        let plan = sliding_log::give_back(&cfg, None, &log, 400, grant_at_100, log.held_at(100))
            .unwrap()
            .unwrap();
        log.apply_give_back(&plan, 100);
        assert_eq!(log.entries, [e(100, 2), e(200, 1)]);
        roundtrip(&log);
    }

    #[test]
    fn a_rate_change_keeps_the_debt_and_rebuckets_without_freeing_early() {
        let mut log = PackedLog::new(config(10, 1000, 1), 9);
        for t in [100, 150, 220] {
            grant(&mut log, t, 3);
        }
        let new = config(4, 1000, 100);
        let plan = sliding_log::keep_state(Some((log.config(), None)), 4, 1000, &log, 300).unwrap();
        log.reconfigure(new, Some(plan), 0);
        assert_eq!(log.epoch(), 9);
        assert_eq!(log.entries, [e(199, 6), e(299, 3)]);
        let plan =
            sliding_log::try_acquire(log.config(), None, &log, 300, 1, Reset::NotWanted).unwrap();
        assert_eq!(plan.outcome, Outcome::Wait(899));
        log.reconfigure(config(4, 1000, 1), None, 3);
        assert!(log.entries.is_empty());
        assert_eq!(log.epoch(), 3);
        roundtrip(&log);
    }

    #[test]
    fn foreign_and_corrupt_bytes_are_errors() {
        assert_eq!(PackedLog::decode(b"12345"), Err(FormatError::Foreign));
        assert_eq!(PackedLog::decode(b""), Err(FormatError::Foreign));
        assert_eq!(
            PackedLog::decode(&[0xF5, b'L']),
            Err(FormatError::Truncated)
        );
        assert_eq!(
            PackedLog::decode(&[0xF5, b'L', 2]),
            Err(FormatError::Version(2))
        );
        let good = PackedLog::new(config(5, 1000, 10), 1).encode();
        for cut in 3..good.len() {
            assert!(PackedLog::decode(&good[..cut]).is_err(), "cut at {cut}");
        }
        // Any byte changed, and bytes appended.
        for at in 3..good.len() {
            let mut changed = good.clone();
            changed[at] ^= 0x40;
            assert!(PackedLog::decode(&changed).is_err(), "byte {at} changed");
        }
        let mut longer = good.clone();
        longer.push(0);
        assert_eq!(PackedLog::decode(&longer), Err(FormatError::Checksum));
        // Checked bytes after the header (12 bytes here): the count, the entries, the padding.
        let sealed = |tail: &[u8]| {
            let mut bytes = good[..12].to_vec();
            bytes.extend_from_slice(tail);
            let sum = fletcher16(&bytes);
            bytes.extend(sum.to_le_bytes());
            PackedLog::decode(&bytes)
        };
        assert_eq!(sealed(&[0x00]), Ok(PackedLog::new(config(5, 1000, 10), 1)));
        assert_eq!(sealed(&[0x00, 0x00, 0x00]), sealed(&[0x00]));
        // An entry of zero permits, a varint past 64 bits, permits missing, more entries than
        // bytes, padding that is not zeros.
        assert_eq!(sealed(&[0x01, 0x01, 0x00]), Err(FormatError::BadEntry));
        assert!(
            sealed(&[0x01, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF])
                .is_err()
        );
        assert_eq!(sealed(&[0x01, 0x03]), Err(FormatError::Truncated));
        assert_eq!(sealed(&[0x05, 0x00]), Err(FormatError::BadEntry));
        assert_eq!(sealed(&[0x00, 0x07]), Err(FormatError::BadEntry));
        // A precision above the interval.
        let mut wide = PackedLog::new(config(5, 1000, 10), 1);
        wide.config.precision = 2000;
        assert_eq!(
            PackedLog::decode(&wide.encode()),
            Err(FormatError::OutOfRange("precision"))
        );
    }

    #[test]
    fn the_longest_states_fit_their_bound_and_the_stack() {
        // The longest fields and entries the configuration's bounds allow: a rate and precision
        // whose buckets are far apart, and permits that never fit the short form. Their varints
        // take 5 to 7 bytes; max_encoded_len counts 10 for every one (a u64's most).
        let wide = Config {
            keep_alive: MAX_DURATION_MS,
            ..config(MAX_PERMITS, MAX_DURATION_MS, 1)
        };
        let mut log = PackedLog::new(wide, u32::MAX);
        let mut fitted_on_the_stack = 0;
        for i in 0..70i64 {
            let encoded = log.encode();
            assert!(encoded.len() <= max_encoded_len(log.entries.len()), "{i}");
            assert_eq!(log.with_encoded(<[u8]>::to_vec), encoded);
            assert_eq!(PackedLog::decode(&encoded).as_ref(), Ok(&log));
            if max_encoded_len(log.entries.len()) <= STACK_ENCODING {
                fitted_on_the_stack += 1;
            }
            log.entries.push(Entry {
                score: (i + 1)
                    * if i % 2 == 0 {
                        -MAX_DURATION_MS
                    } else {
                        MAX_DURATION_MS
                    },
                permits: u32::MAX,
            });
            log.entries.sort_by_key(|entry| entry.score);
        }
        assert_eq!(fitted_on_the_stack, 64);
        assert!(max_encoded_len(DEFAULT_BUCKETS as usize + 1) <= STACK_ENCODING);
    }

    #[test]
    fn a_buffer_too_short_is_refused_with_the_length_needed() {
        let mut log = PackedLog::new(config(100, 60000, 1000), 7);
        for t in [1000, 5000, 9000] {
            log.entries.push(Entry {
                score: t,
                permits: 3,
            });
        }
        let encoded = log.encode();
        for short in [0, 1, encoded.len() / 2, encoded.len() - 1] {
            let mut buf = vec![0u8; short];
            assert_eq!(log.encode_into(&mut buf), Err(encoded.len()), "{short}");
        }
        let mut exact = vec![0u8; encoded.len()];
        assert_eq!(log.encode_into(&mut exact), Ok(encoded.len()));
        assert_eq!(exact, encoded);
    }

    #[test]
    fn the_two_states_of_a_call_leave_their_buffers_to_the_next_call() {
        free_spare_entries();
        let mut log = PackedLog::new(config(10, 1000, 1), 1);
        for t in [100, 200, 300] {
            grant(&mut log, t, 1);
        }
        let bytes = log.encode();
        drop(log);
        free_spare_entries();
        // Two states dropped leave two spares.
        drop((
            PackedLog::decode(&bytes).unwrap(),
            PackedLog::decode(&bytes).unwrap(),
        ));
        let spares =
            || SPARE_ENTRIES.with(|spares| spares.borrow().each_ref().map(|spare| spare.as_ptr()));
        let free = || {
            SPARE_ENTRIES.with(|spares| spares.borrow().each_ref().map(|spare| spare.capacity()))
        };
        assert!(free().iter().all(|&capacity| capacity > 0));
        // The next call's read and the state its grant leaves take both.
        let read = PackedLog::decode(&bytes).unwrap();
        assert_eq!(read.entries, [e(100, 1), e(200, 1), e(300, 1)]);
        let plan =
            sliding_log::try_acquire(read.config(), None, &read, 400, 1, Reset::Wanted).unwrap();
        let written = read.acquired(&plan);
        assert_eq!(
            written.entries,
            [e(100, 1), e(200, 1), e(300, 1), e(400, 1)]
        );
        assert_eq!(free(), [0, 0], "both spares taken");
        let taken = [read.entries.as_ptr(), written.entries.as_ptr()];
        // Dropped, they are the spares again; a third state's buffer is freed, not kept.
        let third = PackedLog::decode(&bytes).unwrap();
        drop((read, written, third));
        assert!(spares().iter().all(|buffer| taken.contains(buffer)));
        // A long log's buffer is not kept.
        free_spare_entries();
        let mut long = PackedLog::new(config(1000, 100_000, 1), 1);
        for t in 0..SPARE_MAX as i64 + 1 {
            grant(&mut long, 1000 + t, 1);
        }
        assert!(long.entries.capacity() > SPARE_MAX);
        let long_buffer = long.entries.as_ptr();
        drop(long);
        assert!(!spares().contains(&long_buffer));
    }

    #[test]
    fn a_state_fills_its_allocation_size_class() {
        // len + 4 (or + 6 past 255 bytes) on a jemalloc size class, never smaller than len.
        let classes = [
            16, 32, 48, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320, 384, 448, 512,
        ];
        for len in 1..500 {
            let stored = stored_len(len);
            let overhead = if stored < 256 { 4 } else { 6 };
            assert!(stored >= len, "{len}");
            assert!(
                classes.contains(&(stored + overhead)) || stored + overhead > 512,
                "{len} -> {stored}"
            );
        }
        // Never embedded in its object: 45 bytes at least, so 60 (64 with its header and zero).
        assert_eq!(stored_len(1), 60);
        assert_eq!(stored_len(20), 60);
        assert_eq!(stored_len(60), 60);
        assert_eq!(stored_len(61), 76);
        assert_eq!(stored_len(72), 76);
    }

    #[test]
    fn a_state_longer_than_any_bounded_log_is_not_read() {
        let mut bytes = PackedLog::new(config(5, 1000, 10), 1).encode();
        bytes.resize(MAX_LEN + 1, 0);
        assert_eq!(
            PackedLog::decode(&bytes),
            Err(FormatError::OutOfRange("length"))
        );
    }

    #[test]
    fn no_bytes_make_decoding_panic() {
        // Pseudo-random strings after the magic and version, sealed with their checksum so that
        // the fields are read: each decodes or is an error.
        let mut seed = 0x2545_F491_4F6C_DD1Du64;
        for len in 0..64 {
            for _ in 0..500 {
                let mut bytes = vec![0xF5, b'L', 1];
                for _ in 0..len {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    bytes.push(seed as u8);
                }
                let sum = fletcher16(&bytes);
                bytes.extend(sum.to_le_bytes());
                if let Ok(log) = PackedLog::decode(&bytes) {
                    assert_eq!(PackedLog::decode(&log.encode()), Ok(log));
                }
            }
        }
    }

    fn e(score: i64, permits: u32) -> Entry {
        Entry { score, permits }
    }
}
