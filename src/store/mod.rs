//! The store: a limiter's Redis keys ([`LimiterKeys`]) and what the commands do to them, a file
//! per job; this file holds the keys of a limiter and of its states, and reads the permit log
//! from its zset. The keys are a [`Dataset`]'s: on the server, each write goes through
//! [`crate::key::Key::apply`], which replicates it as its effect.

mod acquire;
mod config;
mod dataset;
#[cfg(any(test, fuzzing))]
#[cfg_attr(not(test), allow(dead_code))]
pub(crate) mod memory;
mod open;
mod packed;
mod peek;
mod release;
mod resolve;
mod setrate;
#[cfg(test)]
mod tests;
mod ttl;
mod writes;

/// Where a grant was logged: what the replay (src/replay.rs) checks ticketed grants by.
#[cfg(any(test, fuzzing))]
pub use acquire::Logged;
pub use acquire::{Acquisition, Turn, Verdict};
pub use dataset::{Dataset, OpenKey, Server};
pub use peek::Peek;
pub use resolve::Resolved;
pub use setrate::{Condition, RateChange};

use std::ops::ControlFlow;

use std::sync::atomic::Ordering;

use redis_module::{Context, ContextFlags};

use crate::args;
use crate::error::Error;
use crate::ffi::server;
use crate::key::{Effect, OpenMode, Writable};
use crate::keyspace::{self, StateKeys};
use crate::packed_log::PackedLog;
use crate::sliding_log::{Config, Entry, Mode, Order, PermitLog, Span};

/// A limiter: its configuration hash, open for reading or writing, in a dataset (the server's,
/// or in the unit tests one in memory).
pub struct LimiterKeys<'c, M: OpenMode, D: Dataset = Server<'c>> {
    data: D,
    name: &'c [u8],
    hash: D::Key<M>,
    /// A ONEKEY limiter's state, decoded from the key on first use; the state a request
    /// resolves takes it (see [`LimiterKeys::take_packed`]).
    packed: std::cell::Cell<Option<PackedLog>>,
}

/// The state a request acts on: Redisson's value and permits keys, or the log a ONEKEY
/// limiter holds in its own key, decoded (written back whole by [`LimiterKeys`]).
pub enum Stored<M: OpenMode, D: Dataset> {
    Keys(State<M, D>),
    Packed(PackedLog),
}

/// One state of a limiter: the value string and permits zset, overall or of one client.
pub struct State<M: OpenMode, D: Dataset> {
    value: D::Key<M>,
    permits: D::Key<M>,
}

impl<'c, M: OpenMode, D: Dataset> LimiterKeys<'c, M, D> {
    /// The state a command acts on: the OVERALL keys, or the given client's for PER_CLIENT.
    pub fn state(&self, config: &Config, client: Option<&[u8]>) -> Result<Stored<M, D>, Error> {
        match (config.mode, client) {
            (Mode::Overall, _) => self.open_overall().map(Stored::Keys),
            (Mode::PerClient, Some(client)) => self
                .open_state(&StateKeys::client(self.name, client))
                .map(Stored::Keys),
            (Mode::PerClient, None) => Err(Error::ClientRequired),
            (Mode::OneKey, _) => Ok(Stored::Packed(match self.take_packed()? {
                Some(log) => log,
                None => PackedLog::new(*config, rand::random()),
            })),
        }
    }

    /// Applies `act` to each key DELETE, EXPIRE and PERSIST act on: the hash, the OVERALL
    /// state and the given client's state, all type-checked before the first is touched.
    /// Returns how many keys `act` changed.
    pub fn for_each_key(
        &self,
        client: Option<&[u8]>,
        mut act: impl FnMut(&D::Key<M>) -> bool,
    ) -> Result<i64, Error>
    where
        M: Writable,
    {
        // A ONEKEY limiter's one key, also when its bytes no longer decode: as for a three-key
        // limiter whose hash is corrupt, DELETE is how a user clears it.
        match self.packed_config() {
            Ok(Some(_)) | Err(Error::Corrupt { .. }) => return Ok(i64::from(act(&self.hash))),
            Ok(None) => {}
            Err(e) => return Err(e),
        }
        let overall = self.open_state(&StateKeys::overall(self.name))?;
        let client = match client {
            Some(id) => Some(self.open_state(&StateKeys::client(self.name, id))?),
            None => None,
        };
        let mut keys = vec![&self.hash, &overall.value, &overall.permits];
        if let Some(state) = &client {
            keys.extend([&state.value, &state.permits]);
        }
        Ok(keys.into_iter().filter(|key| act(key)).count() as i64)
    }
}

impl<M: OpenMode, D: Dataset> State<M, D> {
    /// The value string, if present; an error naming the key if it is not an integer.
    pub(super) fn stored_value(&self) -> Result<Option<i64>, Error> {
        match self.value.read_string(args::parse_i64) {
            None => Ok(None),
            Some(parsed) => parsed
                .map(Some)
                .ok_or_else(|| Error::corrupt(self.value.name(), "value is not an integer")),
        }
    }

    pub(super) fn corrupt_member(&self, e: keyspace::MemberError) -> Error {
        Error::corrupt(self.permits.name(), e.to_string())
    }

    pub(super) fn delete(&self)
    where
        M: Writable,
    {
        self.value.apply(Effect::Unlink);
        self.permits.apply(Effect::Unlink);
    }
}

impl<M: OpenMode, D: Dataset> Stored<M, D> {
    /// The value string of the three-key form; a ONEKEY limiter keeps none (its log decides).
    pub(super) fn stored_value(&self) -> Result<Option<i64>, Error> {
        match self {
            Stored::Keys(state) => state.stored_value(),
            Stored::Packed(_) => Ok(None),
        }
    }
}

impl<M: OpenMode, D: Dataset> PermitLog for Stored<M, D> {
    type Error = Error;

    fn entry_count(&self) -> Result<usize, Error> {
        match self {
            Stored::Keys(state) => state.entry_count(),
            Stored::Packed(log) => log.entry_count().map_err(|never| match never {}),
        }
    }

    fn scan(
        &self,
        span: Span,
        order: Order,
        visit: &mut dyn FnMut(Entry) -> ControlFlow<()>,
    ) -> Result<(), Error> {
        match self {
            Stored::Keys(state) => state.scan(span, order, visit),
            Stored::Packed(log) => log.scan(span, order, visit).map_err(|never| match never {}),
        }
    }

    fn any_in(&self, span: Span) -> Result<bool, Error> {
        match self {
            Stored::Keys(state) => state.any_in(span),
            Stored::Packed(log) => log.any_in(span).map_err(|never| match never {}),
        }
    }

    fn newest_score(&self, span: Span) -> Result<Option<i64>, Error> {
        match self {
            Stored::Keys(state) => state.newest_score(span),
            Stored::Packed(log) => log.newest_score(span).map_err(|never| match never {}),
        }
    }
}

impl<M: OpenMode, D: Dataset> PermitLog for State<M, D> {
    type Error = Error;

    fn entry_count(&self) -> Result<usize, Error> {
        Ok(self.permits.zcard())
    }

    fn scan(
        &self,
        span: Span,
        order: Order,
        visit: &mut dyn FnMut(Entry) -> ControlFlow<()>,
    ) -> Result<(), Error> {
        self.permits.zscan(span, order, |score, member| {
            let decoded = keyspace::decode_member(member).map_err(|e| self.corrupt_member(e))?;
            Ok(visit(Entry {
                score: score_ms(score),
                permits: decoded.permits,
            }))
        })
    }

    fn any_in(&self, span: Span) -> Result<bool, Error> {
        Ok(self.permits.any_in(span))
    }

    fn newest_score(&self, span: Span) -> Result<Option<i64>, Error> {
        let mut newest = None;
        self.permits
            .zscan::<Error>(span, Order::NewestFirst, |score, _| {
                newest = Some(score_ms(score));
                Ok(ControlFlow::Break(()))
            })?;
        Ok(newest)
    }
}

/// A zset score as whole milliseconds. Scores this module and Redisson write are integers; a
/// fractional one is rounded up, so its entry is never freed early.
fn score_ms(score: f64) -> i64 {
    score.ceil() as i64
}

/// The database the context has selected.
pub fn selected_db(ctx: &Context) -> i32 {
    server::selected_db(ctx)
}

/// At load: notes whether the server is a cluster node.
pub fn init(ctx: &Context) {
    open::CLUSTER.store(
        ctx.get_flags().contains(ContextFlags::CLUSTER),
        Ordering::Relaxed,
    );
}
