//! The tickets of ACQUIRE calls that carried one: which were granted, and at which log score,
//! and which were cancelled, so a resend after a reconnect is answered from the first grant and
//! RATELIMIT.CANCEL gives back exactly the grant of a caller that gave up.
//!
//! Memory of this server only, as the queue is: a replica or a restarted server starts empty,
//! where a CANCEL finds nothing to give back (the grant stays logged until it expires: the
//! limiter admits less for one interval, never more). Bounded: at most [`CAPACITY`] tickets. A
//! lapsed ticket is dropped lazily: when looked up, when it is the oldest, or, the table being
//! full, by a sweep of all lapsed ones before the oldest live ticket is forgotten. Forgetting a
//! grant early can only make the limiter admit less. About 280 bytes a ticket (a 36-byte UUID;
//! the limiter's name is not kept, only a fingerprint of its state), so about 18 MB at the cap;
//! the memory goes back to the server when the table, emptied to a quarter, shrinks. Everything
//! here runs on Redis's main thread, so the table is a thread-local.

// Pure logic: no FFI here.
#![forbid(unsafe_code)]

use std::cell::RefCell;
use std::collections::hash_map::RandomState;
use std::collections::{HashMap, VecDeque};
use std::hash::BuildHasher;
use std::rc::Rc;

use crate::error::Error;
use crate::keyspace::StateId;
use crate::sliding_log::Entry;

/// The most tickets remembered at once.
pub const CAPACITY: usize = 65_536;

/// How many tickets are remembered between two sweeps of the lapsed ones from a full table.
const SWEEP_EVERY: usize = CAPACITY / 8;

/// The table's room (in tickets) below which it is never shrunk.
const SHRINK_ABOVE: usize = 1024;

/// The longest ticket, in bytes: room for a UUID in any spelling, and little memory per ticket.
pub const MAX_LEN: usize = 64;

/// How long a cancelled ticket is remembered: an ACQUIRE with it arriving later (sent before the
/// CANCEL on another connection, or resent after a reconnect) is refused instead of taking
/// permits for a caller that gave up.
pub const CANCELLED_FOR_MS: i64 = 10 * 60 * 1000;

/// A caller-chosen id of one wait, 1 ..= [`MAX_LEN`] bytes.
pub fn parse(arg: &[u8]) -> Result<&[u8], Error> {
    if arg.is_empty() || arg.len() > MAX_LEN {
        Err(Error::BadTicket { max: MAX_LEN })
    } else {
        Ok(arg)
    }
}

/// What became of a ticketed ACQUIRE on one limiter state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fate {
    /// Granted: its permits were logged in `entry` (the score they were written at), in the log
    /// entry whose id has the fingerprint `member`.
    Granted { entry: Entry, member: u64 },
    /// Cancelled before or after a grant (given back then).
    Cancelled,
}

struct Remembered {
    /// The limiter state's fingerprint ([`TicketTable::fingerprint`]): a ticket is looked up by its
    /// bytes, so the state only has to tell one limiter from another for the same ticket, and
    /// its key name (often longer than the ticket) is not kept per ticket.
    state: u64,
    fate: Fate,
    /// When it is forgotten: a grant's entry frees then.
    lapses_at: i64,
    /// Its place in `TicketTable::order`.
    seq: u64,
}

#[derive(Default)]
struct TicketTable {
    /// Remembers until the next sweep of lapsed tickets may run: a full table sweeps at most
    /// once per [`SWEEP_EVERY`] tickets remembered, O(1) amortized.
    sweep_in: usize,
    tickets: HashMap<Rc<[u8]>, Remembered>,
    /// Keyed anew for each load of the module, as a HashMap's own hashing is.
    states: RandomState,
    /// Tickets oldest first, each with the `seq` it was remembered under: a ticket forgotten or
    /// remembered again leaves a stale place here, skipped.
    order: VecDeque<(u64, Rc<[u8]>)>,
    next_seq: u64,
}

thread_local! {
    static TABLE: RefCell<TicketTable> = RefCell::default();
}

fn with<R>(f: impl FnOnce(&mut TicketTable) -> R) -> R {
    TABLE.with(|table| f(&mut table.borrow_mut()))
}

/// Forgets every ticket (whole databases changed, or a fresh load: see [`crate::globals`]).
pub fn forget_all() {
    with(|t| *t = TicketTable::default());
}

/// How many tickets are remembered now.
pub fn len() -> usize {
    with(|t| t.tickets.len())
}

/// What became of `ticket` on `state`, unless it has lapsed by `now`.
pub fn fate(ticket: &[u8], state: &StateId, now: i64) -> Option<Fate> {
    with(|t| {
        let state = t.fingerprint(state);
        let remembered = t.tickets.get(ticket)?;
        if remembered.lapses_at <= now {
            t.tickets.remove(ticket);
            return None;
        }
        (remembered.state == state).then(|| remembered.fate.clone())
    })
}

/// Remembers a grant of `ticket`, until its entry frees at `frees_at`.
pub fn granted(ticket: &[u8], state: StateId, entry: Entry, member: u64, frees_at: i64, now: i64) {
    remember(
        ticket,
        &state,
        Fate::Granted { entry, member },
        frees_at,
        now,
    );
}

/// Remembers that `ticket` was cancelled on `state`; returns its grant, if one was remembered and
/// has not lapsed, for the caller to give back.
pub fn cancel(ticket: &[u8], state: &StateId, now: i64) -> Option<(Entry, u64)> {
    let previous = fate(ticket, state, now);
    if previous.is_none() && with(|t| t.tickets.contains_key(ticket)) {
        // Remembered on another state: that one's, left alone.
        return None;
    }
    remember(
        ticket,
        state,
        Fate::Cancelled,
        now.saturating_add(CANCELLED_FOR_MS),
        now,
    );
    match previous? {
        Fate::Granted { entry, member } => Some((entry, member)),
        Fate::Cancelled => None,
    }
}

fn remember(ticket: &[u8], state: &StateId, fate: Fate, lapses_at: i64, now: i64) {
    with(|t| {
        let state = t.fingerprint(state);
        t.next_seq += 1;
        let seq = t.next_seq;
        let ticket: Rc<[u8]> = Rc::from(ticket);
        t.tickets.insert(
            Rc::clone(&ticket),
            Remembered {
                state,
                fate,
                lapses_at,
                seq,
            },
        );
        t.order.push_back((seq, ticket));
        t.sweep_in = t.sweep_in.saturating_sub(1);
        t.trim(now);
    });
}

impl TicketTable {
    /// Drops the oldest tickets while lapsed (or, `over_capacity`, while the table is over its
    /// capacity), and the stale places in front of `order`.
    fn drop_oldest(&mut self, now: i64, over_capacity: bool) {
        while let Some((seq, ticket)) = self.order.front() {
            let current = self.tickets.get(ticket).filter(|r| r.seq == *seq);
            let drop_it = match current {
                None => true,
                Some(r) => r.lapses_at <= now || (over_capacity && self.tickets.len() > CAPACITY),
            };
            if !drop_it {
                break;
            }
            if current.is_some() {
                self.tickets.remove(ticket);
            }
            self.order.pop_front();
        }
    }

    /// Drops the places in `order` of tickets forgotten or remembered again since.
    fn compact_order(&mut self) {
        let tickets = &self.tickets;
        self.order
            .retain(|(seq, ticket)| tickets.get(ticket).is_some_and(|r| r.seq == *seq));
    }

    fn fingerprint(&self, state: &StateId) -> u64 {
        self.states.hash_one(state)
    }

    /// Drops lapsed tickets and stale places in `order`, then, while over capacity, the oldest.
    /// A long-lived oldest ticket (a cancel, a grant on a long interval) keeps lapsed ones behind
    /// it, so a full table first sweeps out every lapsed ticket: a live one is forgotten only
    /// when the lapsed are gone (or lapsed since the last sweep).
    fn trim(&mut self, now: i64) {
        self.drop_oldest(now, false);
        if self.tickets.len() > CAPACITY && self.sweep_in == 0 {
            self.sweep_in = SWEEP_EVERY;
            self.tickets.retain(|_, r| r.lapses_at > now);
            self.compact_order();
        }
        self.drop_oldest(now, true);
        // Places made stale behind a long-lived oldest ticket: compacted once they outnumber
        // the tickets, so `order` stays within twice the capacity, at O(1) amortized.
        if self.order.len() > 2 * CAPACITY.max(self.tickets.len()) {
            self.compact_order();
        }
        // After a burst has lapsed, its memory goes back to the server (halving at most once per
        // as many removals as the table then holds: O(1) amortized).
        if self.tickets.capacity() > SHRINK_ABOVE
            && self.tickets.len() < self.tickets.capacity() / 4
        {
            self.tickets.shrink_to(self.tickets.len() * 2);
            self.order.shrink_to(self.order.len() * 2);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(key: &str) -> StateId {
        StateId {
            db: 0,
            permits_key: key.as_bytes().to_vec(),
        }
    }

    fn entry(score: i64) -> Entry {
        Entry { score, permits: 1 }
    }

    #[test]
    fn a_grant_is_remembered_on_its_state_until_it_lapses() {
        forget_all();
        granted(b"t", state("a"), entry(100), 7, 1100, 100);
        assert_eq!(
            fate(b"t", &state("a"), 1099),
            Some(Fate::Granted {
                entry: entry(100),
                member: 7
            })
        );
        assert_eq!(fate(b"t", &state("b"), 1099), None, "another state");
        assert_eq!(fate(b"u", &state("a"), 1099), None);
        assert_eq!(fate(b"t", &state("a"), 1100), None, "lapsed");
        assert_eq!(len(), 0, "a lapsed ticket is forgotten");
    }

    #[test]
    fn cancel_hands_back_the_grant_once_and_remembers_the_cancel() {
        forget_all();
        granted(b"t", state("a"), entry(5), 7, 1005, 5);
        assert_eq!(cancel(b"t", &state("a"), 10), Some((entry(5), 7)));
        assert_eq!(fate(b"t", &state("a"), 11), Some(Fate::Cancelled));
        assert_eq!(cancel(b"t", &state("a"), 12), None, "given back once");
        granted(b"o", state("b"), entry(5), 8, 1005, 5);
        assert_eq!(
            cancel(b"o", &state("a"), 12),
            None,
            "another state's ticket"
        );
        assert_eq!(
            fate(b"o", &state("b"), 12),
            Some(Fate::Granted {
                entry: entry(5),
                member: 8
            })
        );
        assert_eq!(cancel(b"new", &state("a"), 12), None);
        assert_eq!(fate(b"new", &state("a"), 13), Some(Fate::Cancelled));
        assert_eq!(fate(b"new", &state("a"), 12 + CANCELLED_FOR_MS), None);
        assert_eq!(
            len(),
            2,
            "t cancelled, and o lapsed but not yet looked up or trimmed"
        );
    }

    #[test]
    fn the_table_keeps_within_its_capacity_oldest_dropped_first() {
        forget_all();
        for i in 0..CAPACITY + 10 {
            let ticket = i.to_string();
            granted(ticket.as_bytes(), state("a"), entry(0), 1, 1000, 0);
            // Every other one remembered again: a stale place in the order.
            if i % 2 == 0 {
                granted(ticket.as_bytes(), state("a"), entry(0), 1, 1000, 0);
            }
        }
        assert_eq!(len(), CAPACITY);
        assert_eq!(
            fate(b"9", &state("a"), 1),
            None,
            "among the oldest: dropped"
        );
        assert!(fate(CAPACITY.to_string().as_bytes(), &state("a"), 1).is_some());
        with(|t| assert!(t.order.len() <= 2 * CAPACITY + 1));
        // Once they lapse, the next ticket remembered drops them and the memory goes back.
        granted(b"late", state("a"), entry(1000), 1, 2000, 1000);
        assert_eq!(len(), 1);
        with(|t| {
            assert!(
                t.tickets.capacity() <= SHRINK_ABOVE,
                "{}",
                t.tickets.capacity()
            );
            assert!(t.order.capacity() <= SHRINK_ABOVE, "{}", t.order.capacity());
        });
    }

    #[test]
    fn a_full_table_sweeps_out_lapsed_tickets_before_a_live_one() {
        forget_all();
        // A cancel, kept ten minutes, in front of grants lapsing at 100.
        assert_eq!(cancel(b"long", &state("a"), 0), None);
        for i in 1..CAPACITY {
            granted(i.to_string().as_bytes(), state("a"), entry(0), 1, 100, 0);
        }
        assert_eq!(len(), CAPACITY);
        granted(b"new", state("a"), entry(200), 1, 1200, 200);
        assert_eq!(len(), 2, "the lapsed went, not the live");
        assert_eq!(fate(b"long", &state("a"), 201), Some(Fate::Cancelled));
        with(|t| assert_eq!(t.order.len(), 2));
        // Full of live tickets: the oldest goes.
        forget_all();
        for i in 0..=CAPACITY {
            granted(i.to_string().as_bytes(), state("a"), entry(0), 1, 100, 0);
        }
        assert_eq!(len(), CAPACITY);
        assert_eq!(fate(b"0", &state("a"), 1), None, "the oldest, dropped");
        assert!(fate(b"1", &state("a"), 1).is_some());
    }

    #[test]
    fn tickets_are_one_to_64_bytes() {
        assert_eq!(parse(b""), Err(Error::BadTicket { max: MAX_LEN }));
        assert_eq!(parse(&[b'x'; 65]), Err(Error::BadTicket { max: MAX_LEN }));
        assert_eq!(parse(&[b'x'; 64]), Ok(&[b'x'; 64][..]));
    }
}
