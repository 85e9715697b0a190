//! Clients blocked in RATELIMIT.ACQUIRE, queued per limiter state, first come first served.
//!
//! Plain bookkeeping with no Redis calls: the serving logic lives in `blocking`. It holds the
//! handles of blocked clients and timers (ffi's types) but calls nothing on them. Everything here
//! runs on Redis's main thread (commands, timers and blocked-client callbacks all do), so the
//! registry is a thread-local: the waiters' room of the module's state (see [`crate::globals`]).

#![forbid(unsafe_code)]

use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};

use crate::ffi::blocked::BlockedClient;
use crate::ffi::timer::TimerId;
use crate::keyspace::StateId;
use crate::sliding_log::Config;

pub type QueueId = u64;
pub type WaiterId = u64;

/// What a waiter asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub name: Vec<u8>,
    pub client: Option<Vec<u8>>,
    pub permits: u32,
    /// The caller's id of this wait (ACQUIRE's TICKET), which RATELIMIT.CANCEL names.
    pub ticket: Option<Vec<u8>>,
}

struct Waiter {
    id: WaiterId,
    bc: BlockedClient,
    request: Request,
    deadline: Option<TimerId>,
}

struct Queue {
    state: StateId,
    /// The limiter's hash, value and permits keys: a write to any of them may free permits.
    watched: [Vec<u8>; 3],
    waiters: VecDeque<Waiter>,
    /// The permits all its waiters asked for, kept as they come and go: a new request checks
    /// the queue in O(1), however many wait.
    permits: u64,
    wake: Option<TimerId>,
    /// The configuration its limiter was last resolved with, so serving does not read the hash
    /// again; None once an event said the limiter may have changed (see [`touched`]).
    resolved: Option<Config>,
}

#[derive(Default)]
struct Registry {
    next_id: u64,
    queues: HashMap<QueueId, Queue>,
    by_state: HashMap<StateId, QueueId>,
    waiter_queue: HashMap<WaiterId, QueueId>,
    by_client: HashMap<BlockedClient, WaiterId>,
    /// Ticket -> the waiters carrying it (more than one while a resend waits beside the wait of
    /// a connection not yet seen closed).
    by_ticket: HashMap<Vec<u8>, Vec<WaiterId>>,
    /// db -> watched key -> queues: a keyspace event on any key costs one lookup.
    watchers: HashMap<i32, HashMap<Vec<u8>, Vec<QueueId>>>,
}

thread_local! {
    static REGISTRY: RefCell<Registry> = RefCell::default();
}

fn with<R>(f: impl FnOnce(&mut Registry) -> R) -> R {
    REGISTRY.with(|registry| f(&mut registry.borrow_mut()))
}

/// The head of a queue, as the server needs it to try serving it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Head {
    pub waiter: WaiterId,
    pub state: StateId,
    pub request: Request,
    /// The configuration the queue's limiter was last resolved with, while no event said it
    /// changed (see [`touched`]).
    pub resolved: Option<Config>,
}

/// A waiter taken out of its queue.
#[derive(Debug)]
pub struct Removed {
    pub bc: BlockedClient,
    pub request: Request,
    pub queue: QueueId,
    pub db: i32,
    /// Its TIMEOUT timer, to stop.
    pub deadline: Option<TimerId>,
    /// Whether it was first in line (the next one may now be servable).
    pub was_head: bool,
    /// The queue's wake timer, to stop, when the queue is now empty and gone.
    pub emptied_wake: Option<TimerId>,
}

/// Forgets every queue (a fresh load of the module: see [`crate::globals`]).
pub fn reset() {
    with(|r| *r = Registry::default());
}

pub fn is_empty() -> bool {
    with(|r| r.queues.is_empty())
}

/// Permits requested by the clients queued on a state, if any are.
pub fn queued_permits(state: &StateId) -> Option<u64> {
    with(|r| {
        let queue = r.queues.get(r.by_state.get(state)?)?;
        Some(queue.permits)
    })
}

/// Appends a waiter; returns its queue, its id, and whether it is first in line.
/// `config` is the configuration the request was just resolved with, if the queue may keep it
/// (see `store`'s `config_to_keep`); `None` makes the queue's next serving read it again.
pub fn enqueue(
    state: StateId,
    watched: [Vec<u8>; 3],
    bc: BlockedClient,
    request: Request,
    config: Option<Config>,
) -> (QueueId, WaiterId, bool) {
    with(|r| {
        r.next_id += 1;
        let waiter_id = r.next_id;
        let queue_id = match r.by_state.get(&state) {
            Some(&id) => id,
            None => {
                r.next_id += 1;
                let id = r.next_id;
                r.by_state.insert(state.clone(), id);
                let keys = r.watchers.entry(state.db).or_default();
                for key in &watched {
                    keys.entry(key.clone()).or_default().push(id);
                }
                r.queues.insert(
                    id,
                    Queue {
                        state,
                        watched,
                        waiters: VecDeque::new(),
                        permits: 0,
                        wake: None,
                        resolved: None,
                    },
                );
                id
            }
        };
        let mut first = false;
        if let Some(ticket) = &request.ticket {
            r.by_ticket
                .entry(ticket.clone())
                .or_default()
                .push(waiter_id);
        }
        if let Some(queue) = r.queues.get_mut(&queue_id) {
            queue.resolved = config;
            first = queue.waiters.is_empty();
            queue.permits = queue.permits.saturating_add(u64::from(request.permits));
            queue.waiters.push_back(Waiter {
                id: waiter_id,
                bc,
                request,
                deadline: None,
            });
        }
        r.waiter_queue.insert(waiter_id, queue_id);
        r.by_client.insert(bc, waiter_id);
        (queue_id, waiter_id, first)
    })
}

pub fn set_deadline(waiter: WaiterId, timer: TimerId) {
    with(|r| {
        let Some(queue) = r
            .waiter_queue
            .get(&waiter)
            .and_then(|q| r.queues.get_mut(q))
        else {
            return;
        };
        // Set just after the waiter was queued: it is at (or near) the back.
        if let Some(w) = queue.waiters.iter_mut().rev().find(|w| w.id == waiter) {
            w.deadline = Some(timer);
        }
    });
}

pub fn head(queue: QueueId) -> Option<Head> {
    with(|r| {
        let q = r.queues.get(&queue)?;
        let w = q.waiters.front()?;
        Some(Head {
            waiter: w.id,
            state: q.state.clone(),
            request: w.request.clone(),
            resolved: q.resolved,
        })
    })
}

/// Takes a waiter out of its queue; an emptied queue is dropped.
pub fn remove(waiter: WaiterId) -> Option<Removed> {
    with(|r| {
        let queue_id = r.waiter_queue.remove(&waiter)?;
        let queue = r.queues.get_mut(&queue_id)?;
        let position = queue.waiters.iter().position(|w| w.id == waiter)?;
        let w = queue.waiters.remove(position)?;
        queue.permits = queue.permits.saturating_sub(u64::from(w.request.permits));
        r.by_client.remove(&w.bc);
        if let Some(ticket) = &w.request.ticket {
            if let Some(waiters) = r.by_ticket.get_mut(ticket) {
                waiters.retain(|&id| id != waiter);
                if waiters.is_empty() {
                    r.by_ticket.remove(ticket);
                }
            }
        }
        let db = queue.state.db;
        let emptied_wake = if queue.waiters.is_empty() {
            let wake = queue.wake;
            let state = queue.state.clone();
            let watched = std::mem::take(&mut queue.watched);
            r.queues.remove(&queue_id);
            r.by_state.remove(&state);
            if let Some(keys) = r.watchers.get_mut(&state.db) {
                for key in &watched {
                    if let Some(queues) = keys.get_mut(key.as_slice()) {
                        queues.retain(|&q| q != queue_id);
                        if queues.is_empty() {
                            keys.remove(key.as_slice());
                        }
                    }
                }
                if keys.is_empty() {
                    r.watchers.remove(&state.db);
                }
            }
            wake
        } else {
            None
        };
        Some(Removed {
            bc: w.bc,
            request: w.request,
            queue: queue_id,
            db,
            deadline: w.deadline,
            was_head: position == 0,
            emptied_wake,
        })
    })
}

/// The waiters carrying `ticket`, each with its database and request.
pub fn with_ticket(ticket: &[u8]) -> Vec<(WaiterId, i32, Request)> {
    with(|r| {
        let Some(waiters) = r.by_ticket.get(ticket) else {
            return Vec::new();
        };
        waiters
            .iter()
            .filter_map(|&id| {
                let queue = r.queues.get(r.waiter_queue.get(&id)?)?;
                let waiter = queue.waiters.iter().find(|w| w.id == id)?;
                Some((id, queue.state.db, waiter.request.clone()))
            })
            .collect()
    })
}

pub fn waiter_of(bc: BlockedClient) -> Option<WaiterId> {
    with(|r| r.by_client.get(&bc).copied())
}

/// Replaces a queue's wake timer; returns the previous one, to stop.
pub fn set_wake(queue: QueueId, timer: Option<TimerId>) -> Option<TimerId> {
    with(|r| {
        let q = r.queues.get_mut(&queue)?;
        std::mem::replace(&mut q.wake, timer)
    })
}

/// Keeps the configuration `queue`'s limiter was just resolved with.
pub fn keep_resolved(queue: QueueId, config: Config) {
    with(|r| {
        if let Some(q) = r.queues.get_mut(&queue) {
            q.resolved = Some(config);
        }
    });
}

/// `key` in `db` was written or left: the queues watching it (see [`watching`]), of which those
/// whose limiter's own key it is (its hash, a ONEKEY limiter's one key) resolve it again when
/// next served. A write to a state's value or permits changes no configuration.
pub fn touched(db: i32, key: &[u8]) -> Vec<QueueId> {
    with(|r| {
        let Some(queues) = r.watchers.get(&db).and_then(|keys| keys.get(key)) else {
            return Vec::new();
        };
        for id in queues {
            if let Some(q) = r.queues.get_mut(id) {
                if q.watched[0] == key {
                    q.resolved = None;
                }
            }
        }
        queues.clone()
    })
}

/// Whole databases changed: every queue resolves its limiter again when next served.
pub fn forget_all_resolved() {
    with(|r| {
        for q in r.queues.values_mut() {
            q.resolved = None;
        }
    });
}

pub fn exists(queue: QueueId) -> bool {
    with(|r| r.queues.contains_key(&queue))
}

/// Queues that a write to `key` in `db` may concern.
pub fn watching(db: i32, key: &[u8]) -> Vec<QueueId> {
    with(|r| {
        r.watchers
            .get(&db)
            .and_then(|keys| keys.get(key))
            .cloned()
            .unwrap_or_default()
    })
}

pub fn all() -> Vec<QueueId> {
    with(|r| r.queues.keys().copied().collect())
}

/// Every timer still set, for module unload.
pub fn timers() -> Vec<TimerId> {
    with(|r| {
        r.queues
            .values()
            .flat_map(|q| {
                q.wake
                    .into_iter()
                    .chain(q.waiters.iter().filter_map(|w| w.deadline))
            })
            .collect()
    })
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

    fn request(permits: u32) -> Request {
        Request {
            name: b"api".to_vec(),
            client: None,
            permits,
            ticket: None,
        }
    }

    fn watched() -> [Vec<u8>; 3] {
        [
            b"api".to_vec(),
            b"{api}:value".to_vec(),
            b"{api}:permits".to_vec(),
        ]
    }

    fn config() -> Config {
        Config {
            rate: 10,
            interval: 1000,
            mode: crate::sliding_log::Mode::Overall,
            keep_alive: 0,
            precision: 1,
        }
    }

    fn bc(n: usize) -> BlockedClient {
        BlockedClient::for_test(n)
    }

    #[test]
    fn waiters_are_served_in_arrival_order() {
        let (q, first, is_first) =
            enqueue(state("a"), watched(), bc(8), request(10), Some(config()));
        let (q2, second, is_second_first) =
            enqueue(state("a"), watched(), bc(16), request(1), Some(config()));
        assert_eq!(q, q2);
        assert!(is_first && !is_second_first);
        assert_eq!(queued_permits(&state("a")), Some(11));
        assert_eq!(head(q).unwrap().waiter, first);
        assert_eq!(
            queued_permits(&state("b")),
            None,
            "another state has no queue"
        );
        assert_eq!(watching(0, b"{api}:value"), vec![q]);
        assert!(watching(1, b"{api}:value").is_empty());

        let removed = remove(first).unwrap();
        assert!(removed.was_head && removed.emptied_wake.is_none());
        assert_eq!(
            queued_permits(&state("a")),
            Some(1),
            "the total follows removals"
        );
        assert_eq!(head(q).unwrap().waiter, second);
        assert_eq!(waiter_of(bc(16)), Some(second));

        set_wake(q, Some(77));
        let last = remove(second).unwrap();
        assert!(
            watching(0, b"{api}:value").is_empty(),
            "an emptied queue is unwatched"
        );
        assert_eq!(
            last.emptied_wake,
            Some(77),
            "the emptied queue hands back its timer"
        );
        assert!(!exists(q));
        assert_eq!(queued_permits(&state("a")), None);
        assert!(is_empty());
        assert!(remove(second).is_none(), "a waiter is removed once");
    }

    #[test]
    fn removing_from_the_middle_keeps_the_head() {
        let (q, a, _) = enqueue(state("m"), watched(), bc(24), request(1), Some(config()));
        let (_, b, _) = enqueue(state("m"), watched(), bc(32), request(2), Some(config()));
        set_deadline(b, 5);
        let removed = remove(b).unwrap();
        assert!(!removed.was_head);
        assert_eq!(removed.deadline, Some(5));
        assert_eq!(head(q).unwrap().waiter, a);
        remove(a);
        assert!(timers().is_empty());
    }

    fn ids(found: Vec<(WaiterId, i32, Request)>) -> Vec<WaiterId> {
        found.into_iter().map(|(id, ..)| id).collect()
    }

    #[test]
    fn waiters_are_found_by_ticket() {
        let ticketed = |ticket: &str| Request {
            ticket: Some(ticket.as_bytes().to_vec()),
            ..request(1)
        };
        let (_, a, _) = enqueue(state("t"), watched(), bc(40), ticketed("x"), Some(config()));
        let (_, b, _) = enqueue(state("t"), watched(), bc(48), request(1), Some(config()));
        let (_, c, _) = enqueue(state("t"), watched(), bc(56), ticketed("x"), Some(config()));
        let (_, d, _) = enqueue(state("u"), watched(), bc(64), ticketed("x"), Some(config()));
        assert_eq!(ids(with_ticket(b"x")), vec![a, c, d]);
        assert_eq!(with_ticket(b"x")[0], (a, 0, ticketed("x")));
        assert!(with_ticket(b"y").is_empty());
        remove(a);
        assert_eq!(ids(with_ticket(b"x")), vec![c, d]);
        for w in [b, c, d] {
            remove(w);
        }
        assert!(with_ticket(b"x").is_empty());
        with(|r| assert!(r.by_ticket.is_empty()));
    }

    #[test]
    fn a_queue_keeps_its_resolution_until_its_limiter_changes() {
        let (q, a, _) = enqueue(state("k"), watched(), bc(72), request(1), Some(config()));
        assert_eq!(
            head(q).unwrap().resolved,
            Some(config()),
            "resolved when the waiter blocked"
        );
        assert_eq!(touched(0, b"{api}:value"), vec![q]);
        assert!(touched(1, b"api").is_empty());
        assert_eq!(
            head(q).unwrap().resolved,
            Some(config()),
            "a state key's write, or another database's limiter, changes no configuration"
        );
        assert_eq!(touched(0, b"api"), vec![q]);
        assert_eq!(
            head(q).unwrap().resolved,
            None,
            "a write to the limiter's hash"
        );
        keep_resolved(q, config());
        assert_eq!(head(q).unwrap().resolved, Some(config()));
        forget_all_resolved();
        assert_eq!(head(q).unwrap().resolved, None, "whole databases changed");
        remove(a);
    }
}
