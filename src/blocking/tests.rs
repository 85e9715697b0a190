//! Serving, the pause rule and CANCEL on the in-memory dataset, with a fake server that records
//! whom it answered and which timers it set.

use std::cell::{Cell, RefCell};

use super::host::Host;
use super::{cancel, serve, Served};
use crate::error::Error;
use crate::ffi::blocked::BlockedClient;
use crate::ffi::timer::TimerId;
use crate::key::{OpenMode, Read, Write};
use crate::keyspace::{self, StateId, StateKeys};
use crate::queue::{self, QueueId, Request, WaiterId};
use crate::sliding_log::{Config, Mode};
use crate::store::memory::{Memory, Value};
use crate::store::{LimiterKeys, RateChange};
use crate::tickets::{self, Fate};

const NAME: &[u8] = b"lim";
const T0: i64 = 1_000_000;
const READONLY: &str = "READONLY You can't write against a read only replica.";

/// A server that records what the rooms asked of it.
struct Fake {
    memory: Memory,
    /// The limiter's configuration, kept with its queue as ACQUIRE resolved it.
    config: Config,
    replica: bool,
    paused: bool,
    answered: RefCell<Vec<(BlockedClient, Served)>>,
    /// Wake-up timers set: the queue and its delay.
    woken: RefCell<Vec<(QueueId, i64)>>,
    stopped: RefCell<Vec<TimerId>>,
    next_timer: Cell<TimerId>,
}

impl Fake {
    /// A master at T0 with limiter NAME admitting `rate` permits a second, and no waiters.
    fn with_rate(rate: i64) -> Fake {
        super::reset();
        let fake = Fake {
            memory: Memory::at(T0),
            config: config(rate),
            replica: false,
            paused: false,
            answered: RefCell::default(),
            woken: RefCell::default(),
            stopped: RefCell::default(),
            next_timer: Cell::new(1000),
        };
        let change = RateChange {
            config: config(rate),
            condition: None,
            keep_state: false,
            client: None,
        };
        let limiter = fake.memory.limiter::<Write>(NAME).expect("opens");
        limiter.set_rate(&change, T0).expect("sets the rate");
        fake.memory.take_writes();
        fake
    }

    /// Queues a client `bc` asking for `permits` on NAME's state, as ACQUIRE does.
    fn wait(&self, bc: usize, permits: u32, ticket: Option<&[u8]>) -> (QueueId, WaiterId) {
        let request = Request {
            name: NAME.to_vec(),
            client: None,
            permits,
            ticket: ticket.map(<[u8]>::to_vec),
        };
        let keys = StateKeys::overall(NAME);
        let watched = [NAME.to_vec(), keys.value.to_vec(), keys.permits.to_vec()];
        let (queue, waiter, _) =
            queue::enqueue(state(), watched, client(bc), request, Some(self.config));
        (queue, waiter)
    }

    fn answered(&self) -> Vec<(BlockedClient, Served)> {
        self.answered.take()
    }

    /// The permits logged in NAME's permits zset: what its grants took.
    fn logged(&self) -> u64 {
        match self.memory.get(&permits_key()) {
            Some(Value::ZSet(members)) => members
                .iter()
                .map(|(_, member)| {
                    let entry = keyspace::decode_member(member).expect("a member the module wrote");
                    u64::from(entry.permits)
                })
                .sum(),
            None => 0,
            Some(other) => panic!("permits key holds {other:?}"),
        }
    }
}

impl Host for Fake {
    type Data<'h> = &'h Memory;

    fn limiter<'h, M: OpenMode>(
        &'h self,
        name: &'h [u8],
    ) -> Result<LimiterKeys<'h, M, &'h Memory>, Error> {
        self.memory.limiter(name)
    }
    fn limiter_for_waiter<'h, M: OpenMode>(
        &'h self,
        name: &'h [u8],
    ) -> Result<LimiterKeys<'h, M, &'h Memory>, Error> {
        self.memory.limiter(name)
    }
    fn is_replica(&self) -> bool {
        self.replica
    }
    fn writes_paused(&self) -> bool {
        self.paused
    }
    fn now_ms(&self) -> i64 {
        T0
    }
    fn clock_frozen(&self) -> bool {
        false
    }
    fn selected_db(&self) -> i32 {
        0
    }
    fn select_db(&self, db: i32) {
        assert_eq!(db, 0, "the in-memory dataset has one database");
    }
    fn unblock(&self, bc: BlockedClient, served: Served) {
        self.answered.borrow_mut().push((bc, served));
    }
    fn wake_in(&self, ms: i64, queue: QueueId) -> Option<TimerId> {
        self.woken.borrow_mut().push((queue, ms));
        let timer = self.next_timer.get() + 1;
        self.next_timer.set(timer);
        Some(timer)
    }
    fn stop_timer(&self, timer: TimerId) {
        self.stopped.borrow_mut().push(timer);
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

fn permits_key() -> Vec<u8> {
    StateKeys::overall(NAME).permits.to_vec()
}

/// NAME's OVERALL state, as the store names it.
fn state() -> StateId {
    StateId {
        db: 0,
        permits_key: permits_key(),
    }
}

fn client(n: usize) -> BlockedClient {
    BlockedClient::for_test(n)
}

fn granted(n: usize) -> (BlockedClient, Served) {
    (client(n), Served::Acquired)
}

#[test]
fn the_store_names_the_state_the_tests_queue_on() {
    let fake = Fake::with_rate(1);
    let limiter = fake.memory.limiter::<Read>(NAME).expect("opens");
    let resolved = limiter.resolve_existing(None).expect("resolves");
    assert_eq!(*resolved.id(), state());
}

#[test]
fn waiters_are_granted_in_arrival_order_while_the_head_fits() {
    let fake = Fake::with_rate(3);
    let (queue, _) = fake.wait(1, 1, None);
    fake.wait(2, 2, None);
    let (_, third) = fake.wait(3, 1, None);

    serve(&fake, queue);

    assert_eq!(fake.answered(), vec![granted(1), granted(2)]);
    assert_eq!(fake.logged(), 3);
    assert!(!fake.memory.take_writes().is_empty());
    // The third waits, its queue woken when the first permits are free again.
    assert_eq!(queue::head(queue).map(|head| head.waiter), Some(third));
    assert_eq!(*fake.woken.borrow(), vec![(queue, 1000)]);
}

#[test]
fn a_head_that_does_not_fit_holds_back_those_behind_it() {
    let fake = Fake::with_rate(2);
    let (queue, _) = fake.wait(1, 1, None);
    let (_, second) = fake.wait(2, 2, None);
    fake.wait(3, 1, None);

    serve(&fake, queue);

    // One permit is left: the third's would fit, but the second is first in line.
    assert_eq!(fake.answered(), vec![granted(1)]);
    assert_eq!(fake.logged(), 1);
    assert_eq!(queue::head(queue).map(|head| head.waiter), Some(second));
    assert_eq!(queue::queued_permits(&state()), Some(3));
}

#[test]
fn a_ticketed_grant_is_remembered_and_answers_its_resent_wait() {
    let fake = Fake::with_rate(3);
    let (queue, _) = fake.wait(1, 1, Some(b"t1"));
    // Does not fit once the first is granted.
    let (_, blocker) = fake.wait(2, 3, None);
    // The same wait resent on a new connection while the first is not yet seen closed.
    fake.wait(3, 1, Some(b"t1"));

    serve(&fake, queue);

    // The resend is answered by the first's grant at once, not behind the second, and took
    // nothing.
    assert_eq!(fake.answered(), vec![granted(1), granted(3)]);
    assert_eq!(fake.logged(), 1);
    assert_eq!(queue::head(queue).map(|head| head.waiter), Some(blocker));
    assert!(matches!(
        tickets::fate(b"t1", &state(), T0),
        Some(Fate::Granted { .. })
    ));
    fake.memory.take_writes();

    // Resent once more, now first in line: answered at once, taking nothing.
    queue::remove(blocker);
    let (queue, _) = fake.wait(4, 1, Some(b"t1"));
    serve(&fake, queue);
    assert_eq!(fake.answered(), vec![granted(4)]);
    assert_eq!(fake.logged(), 1);
    assert_eq!(fake.memory.take_writes(), Vec::<String>::new());
}

#[test]
fn during_a_write_pause_nothing_is_written_and_the_queue_retries() {
    let mut fake = Fake::with_rate(3);
    fake.paused = true;
    let (queue, _) = fake.wait(1, 1, None);
    queue::set_wake(queue, Some(7));

    serve(&fake, queue);

    assert_eq!(fake.answered(), vec![]);
    assert_eq!(fake.memory.take_writes(), Vec::<String>::new());
    assert_eq!(fake.logged(), 0);
    // Retried in 10 ms, its earlier timer stopped.
    assert_eq!(*fake.woken.borrow(), vec![(queue, 10)]);
    assert_eq!(*fake.stopped.borrow(), vec![7]);
    assert_eq!(queue::queued_permits(&state()), Some(1));

    // Once the pause ends, the retry serves it.
    fake.paused = false;
    serve(&fake, queue);
    assert_eq!(fake.answered(), vec![granted(1)]);
    assert_eq!(fake.logged(), 1);
}

#[test]
fn on_a_replica_waiters_fail_with_readonly_and_nothing_is_written() {
    let mut fake = Fake::with_rate(3);
    fake.replica = true;
    let (queue, _) = fake.wait(1, 1, None);
    fake.wait(2, 1, None);

    serve(&fake, queue);

    let readonly = || Served::Failed(READONLY.into());
    assert_eq!(
        fake.answered(),
        vec![(client(1), readonly()), (client(2), readonly())]
    );
    assert_eq!(fake.memory.take_writes(), Vec::<String>::new());
    assert!(queue::is_empty());
}

#[test]
fn cancel_gives_back_exactly_a_granted_tickets_permits_once() {
    let fake = Fake::with_rate(5);
    let (queue, _) = fake.wait(1, 2, Some(b"t1"));
    fake.wait(2, 1, None);
    serve(&fake, queue);
    assert_eq!(fake.answered(), vec![granted(1), granted(2)]);
    assert_eq!(fake.logged(), 3);
    fake.memory.take_writes();

    assert_eq!(cancel(&fake, NAME, b"t1", None).ok(), Some(2));
    // Its own permits are back; the other grant's stay taken.
    assert_eq!(fake.logged(), 1);
    assert!(!fake.memory.take_writes().is_empty());
    assert!(matches!(
        tickets::fate(b"t1", &state(), T0),
        Some(Fate::Cancelled)
    ));

    // Cancelled again: nothing more is given back.
    assert_eq!(cancel(&fake, NAME, b"t1", None).ok(), Some(0));
    assert_eq!(fake.logged(), 1);
    assert_eq!(fake.memory.take_writes(), Vec::<String>::new());
}

#[test]
fn cancel_ends_a_waiting_ticket_with_the_wait_hint() {
    let fake = Fake::with_rate(1);
    let (queue, _) = fake.wait(1, 1, None);
    fake.wait(2, 1, Some(b"t2"));
    serve(&fake, queue);
    assert_eq!(fake.answered(), vec![granted(1)]);
    fake.memory.take_writes();

    assert_eq!(cancel(&fake, NAME, b"t2", None).ok(), Some(0));

    // Told when it would have fit, as when its TIMEOUT runs out; it took nothing.
    assert_eq!(fake.answered(), vec![(client(2), Served::Wait(1000))]);
    assert_eq!(queue::queued_permits(&state()), None);
    assert_eq!(fake.logged(), 1);
    assert_eq!(fake.memory.take_writes(), Vec::<String>::new());
    assert!(matches!(
        tickets::fate(b"t2", &state(), T0),
        Some(Fate::Cancelled)
    ));
    // A waiter ending leaves no timer of its queue running.
    assert_eq!(*fake.stopped.borrow(), vec![1001]);
}
