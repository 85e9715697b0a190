//! What serving, the pause rule and CANCEL ask of the server beside its keys: whether it is a
//! replica or pauses writes, its clock, the database, answering a waiter, a queue's timer.
//!
//! Used through generics, never `dyn`: the module's rooms compile to the same ffi calls as if
//! they named the server's [`Context`] themselves; the unit tests run them on a recording fake
//! over the in-memory dataset.

use redis_module::{Context, ContextFlags};

use super::{Served, Wake};
use crate::clock;
use crate::error::Error;
use crate::ffi::blocked::{self, BlockedClient};
use crate::ffi::server;
use crate::ffi::timer::{self, TimerId};
use crate::key::OpenMode;
use crate::queue::QueueId;
use crate::store::{self, Dataset, LimiterKeys, Server};

/// The server the waiters' rooms run in.
pub(crate) trait Host {
    /// Where limiters' keys are.
    type Data<'h>: Dataset
    where
        Self: 'h;

    /// Opens limiter `name` for the calling command (its ACL applies).
    fn limiter<'h, M: OpenMode>(
        &'h self,
        name: &'h [u8],
    ) -> Result<LimiterKeys<'h, M, Self::Data<'h>>, Error>;
    /// Opens limiter `name` for a blocked waiter, whose ACL was checked when it blocked.
    fn limiter_for_waiter<'h, M: OpenMode>(
        &'h self,
        name: &'h [u8],
    ) -> Result<LimiterKeys<'h, M, Self::Data<'h>>, Error>;
    /// Whether the server is a replica (only a master writes).
    fn is_replica(&self) -> bool;
    /// Whether the server pauses writes now.
    fn writes_paused(&self) -> bool;
    /// The module's clock (the debug clock when frozen), in unix ms.
    fn now_ms(&self) -> i64;
    /// Whether the debug clock is frozen (time then moves only with ADVANCE).
    fn clock_frozen(&self) -> bool;
    fn selected_db(&self) -> i32;
    fn select_db(&self, db: i32);
    /// Unblocks a waiter just taken from its queue with what it is told.
    fn unblock(&self, bc: BlockedClient, served: Served);
    /// Sets `queue`'s wake-up timer `ms` from now.
    fn wake_in(&self, ms: i64, queue: QueueId) -> Option<TimerId>;
    /// Stops a timer (one fired or stopped already is left alone).
    fn stop_timer(&self, timer: TimerId);
}

impl Host for Context {
    type Data<'h> = Server<'h>;

    #[inline]
    fn limiter<'h, M: OpenMode>(
        &'h self,
        name: &'h [u8],
    ) -> Result<LimiterKeys<'h, M, Server<'h>>, Error> {
        LimiterKeys::open(self, name)
    }
    #[inline]
    fn limiter_for_waiter<'h, M: OpenMode>(
        &'h self,
        name: &'h [u8],
    ) -> Result<LimiterKeys<'h, M, Server<'h>>, Error> {
        LimiterKeys::open_for_waiter(self, name)
    }
    #[inline]
    fn is_replica(&self) -> bool {
        self.get_flags().contains(ContextFlags::SLAVE)
    }
    #[inline]
    fn writes_paused(&self) -> bool {
        server::writes_paused()
    }
    #[inline]
    fn now_ms(&self) -> i64 {
        clock::now_ms()
    }
    #[inline]
    fn clock_frozen(&self) -> bool {
        clock::is_frozen()
    }
    #[inline]
    fn selected_db(&self) -> i32 {
        store::selected_db(self)
    }
    #[inline]
    fn select_db(&self, db: i32) {
        server::select_db(self, db);
    }
    #[inline]
    fn unblock(&self, bc: BlockedClient, served: Served) {
        blocked::unblock(bc, served);
    }
    #[inline]
    fn wake_in(&self, ms: i64, queue: QueueId) -> Option<TimerId> {
        timer::start::<Wake>(self, ms, queue)
    }
    #[inline]
    fn stop_timer(&self, timer: TimerId) {
        timer::stop(self, timer);
    }
}
