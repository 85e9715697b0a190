//! The limiter's Redis keys: opening and type-checking them, decoding the configuration and the
//! log, and applying the plans of [`crate::limiter`] with the TTL rule. Writes go through
//! [`Key`], which replicates each of them as its effect.

use std::ops::ControlFlow;
use std::os::raw::c_int;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Mutex, PoisonError};

use rand::RngCore;
use redis_module::{raw, Context, ContextFlags, RedisString, RedisValue};

use crate::args;
use crate::clock;
use crate::config_cache::{self, Check, Known};
use crate::error::Error;
use crate::ffi::acl::User;
use crate::ffi::events::{self, KeyWatcher, RemovalWatcher};
use crate::ffi::server;
use crate::key::{self, Access, Effect, Key, Kind, OpenMode, StaticString, Writable};
use crate::keyspace::{self, StateKeys};
use crate::limiter::{
    self, Acquire, Config, Entry, Mode, Order, Outcome, PermitLog, Prune, Reset, Span,
};
use crate::migration;
use crate::queue::{self, StateId};

/// Attempts at drawing a member id not already in the log. A 128-bit collision is practically
/// impossible; the bound only guarantees termination.
const ID_ATTEMPTS: usize = 8;

/// A limiter: its configuration hash, open for reading or writing.
pub struct Limiter<'c, M: OpenMode> {
    ctx: &'c Context,
    name: &'c [u8],
    hash: Key<'c, M>,
    caller: Caller,
    db: i32,
    /// What was kept of this limiter (see [`config_cache`]), if anything.
    known: Option<Known>,
}

/// Where an acquisition stands with respect to the clients blocked in ACQUIRE on the same state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Turn {
    /// A new request that does not wait (TRYACQUIRE, or ACQUIRE inside MULTI or a script):
    /// refused while anyone is queued, so a large request at the head is never starved by small
    /// ones arriving after it.
    BehindWaiters,
    /// A new ACQUIRE that joins the queue if refused.
    Queueing,
    /// The head of the queue, being served.
    FirstInLine,
}

/// One state of a limiter: the value string and permits zset, overall or of one client.
pub struct State<'c, M: OpenMode> {
    value: Key<'c, M>,
    permits: Key<'c, M>,
}

/// The raw fields of a limiter hash, before validation.
struct Fields {
    rate: Option<RedisString>,
    interval: Option<RedisString>,
    kind: Option<RedisString>,
    keep_alive: Option<RedisString>,
    precision: Option<RedisString>,
}

impl Fields {
    /// The fields found, a bit each in [`CONFIG_FIELDS`]' order.
    fn present(&self) -> u8 {
        [
            &self.rate,
            &self.interval,
            &self.kind,
            &self.keep_alive,
            &self.precision,
        ]
        .into_iter()
        .enumerate()
        .filter(|(_, field)| field.is_some())
        .fold(0, |bits, (i, _)| bits | (1 << i))
    }
}

/// A configuration decoded from its hash, with the fields found ([`Fields::present`]).
struct ReadConfig {
    config: Config,
    present: u8,
}

/// What a call does with the configuration kept for its limiter.
enum KeptUse {
    Use(Config),
    /// Reads the hash as if nothing were kept, and keeps nothing new.
    ReadInstead,
}

/// The hash's field names, as strings made once (see [`StaticString`]).
static FIELD_NAMES: [StaticString; 5] = [
    StaticString::new(keyspace::FIELD_RATE.to_bytes()),
    StaticString::new(keyspace::FIELD_INTERVAL.to_bytes()),
    StaticString::new(keyspace::FIELD_TYPE.to_bytes()),
    StaticString::new(keyspace::FIELD_KEEP_ALIVE.to_bytes()),
    StaticString::new(keyspace::FIELD_PRECISION.to_bytes()),
];

/// What SETRATE was asked to do; built by `commands::setrate`.
#[derive(Debug)]
pub struct RateChange<'a> {
    pub rate: i64,
    pub interval: i64,
    pub mode: Mode,
    pub keep_alive: i64,
    pub precision: i64,
    pub condition: Option<Condition>,
    pub keep_state: bool,
    pub client: Option<&'a [u8]>,
}

/// A limiter to create on first use (the `RATE` option of the acquiring commands), exactly as
/// `SETRATE key rate interval [mode] [KEEPALIVE ms] NX` would.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Creation {
    pub rate: i64,
    pub interval: i64,
    pub mode: Mode,
    pub keep_alive: i64,
    pub precision: i64,
}

impl Creation {
    fn config(&self) -> Config {
        Config {
            rate: self.rate,
            interval: self.interval,
            mode: self.mode,
            keep_alive: self.keep_alive,
            precision: self.precision,
        }
    }
}

/// An acquisition read and decided, not yet written (see [`Limiter::attempt`]).
pub struct Attempt<'c, M: OpenMode> {
    config: Config,
    created: Option<Creation>,
    state: State<'c, M>,
    plan: Acquire,
    turn: Turn,
    now: i64,
    /// Permits queued ahead by blocked ACQUIRE clients.
    queued: u64,
}

impl<M: OpenMode> Attempt<'_, M> {
    /// Whether the attempt would take its permits.
    pub fn grants(&self) -> bool {
        self.plan.append.is_some()
    }

    /// Whether it acts on a state sharing a key with `other`'s: limiters whose names derive the
    /// same keys (`a` and `{a}`, or a client id that makes one name's keys another's).
    pub fn shares_state_with(&self, other: &Self) -> bool {
        let mine = [self.state.value.name(), self.state.permits.name()];
        let theirs = [other.state.value.name(), other.state.permits.name()];
        mine.iter().any(|key| theirs.contains(key))
    }
}

/// What an acquisition did, with what an HTTP API needs to answer it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Verdict {
    /// `Acquired`, or the wait; `Wait(0)` for permits free here but not taken because another
    /// limiter of an all-or-nothing acquisition refused.
    pub outcome: Outcome,
    pub limit: i64,
    /// Permits a new request could take right after this call, within `0..=limit`, counting
    /// what queued ACQUIRE clients wait for as taken.
    pub remaining: i64,
    /// Milliseconds until every permit logged has expired; 0 if none is.
    pub reset_after: i64,
}

/// SETRATE's NX / XX.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Condition {
    /// Only the fields that are absent (Redisson `trySetRate`).
    IfAbsent,
    /// Only if the limiter exists (Redisson `updateRate`).
    IfExists,
}

impl<'c, M: OpenMode> Limiter<'c, M> {
    pub fn open(ctx: &'c Context, name: &'c [u8]) -> Result<Self, Error> {
        refuse_cross_slot(name)?;
        Self::open_as(ctx, name, Caller::current(ctx))
    }

    /// Opens a limiter only to read its configuration: CONFIG touches nothing but the declared
    /// key, so it answers even for a name whose derived keys are in another cluster slot.
    pub fn open_config(ctx: &'c Context, name: &'c [u8]) -> Result<Self, Error> {
        Self::open_as(ctx, name, Caller::current(ctx))
    }

    /// Opens a limiter on behalf of a client blocked in ACQUIRE, from a timer or callback
    /// context that has no user of its own: its ACL was checked when it blocked.
    pub fn open_for_waiter(ctx: &'c Context, name: &'c [u8]) -> Result<Self, Error> {
        Self::open_as(ctx, name, Caller(None))
    }

    fn open_as(ctx: &'c Context, name: &'c [u8], caller: Caller) -> Result<Self, Error> {
        let db = selected_db(ctx);
        let mut known = config_cache::lookup(ctx, db, name);
        let hash = match known.as_mut().and_then(|known| known.hash.take()) {
            Some(string) => Key::open_named(ctx, string),
            None => Key::open(ctx, name),
        };
        expect_kind(&hash, Kind::Hash)?;
        Ok(Limiter {
            ctx,
            name,
            hash,
            caller,
            db,
            known,
        })
    }

    /// Opens the value and permits keys of one state. The server checked only the declared
    /// `key`; these are derived from it, so this is where the module refuses, before touching
    /// anything, a key outside the caller's ACL (the cluster slot was checked at open) or a
    /// state split from its hash by a slot migration.
    fn open_state(&self, keys: &StateKeys) -> Result<State<'c, M>, Error> {
        self.check_state(Key::open(self.ctx, &keys.value), || {
            Key::open(self.ctx, &keys.permits)
        })
    }

    /// The OVERALL state's keys, opened with the names kept for them if there are.
    fn open_overall(&self) -> Result<State<'c, M>, Error> {
        let kept = self.known.as_ref().and_then(|known| {
            let value = known.value.as_ref()?.safe_clone(self.ctx);
            let permits = known.permits.as_ref()?.safe_clone(self.ctx);
            Some((value, permits))
        });
        match kept {
            Some((value, permits)) => self.check_state(Key::open_named(self.ctx, value), || {
                Key::open_named(self.ctx, permits)
            }),
            None => self.open_state(&StateKeys::overall(self.name)),
        }
    }

    fn check_state(
        &self,
        value: Key<'c, M>,
        permits: impl FnOnce() -> Key<'c, M>,
    ) -> Result<State<'c, M>, Error> {
        self.caller.check(&value)?;
        expect_kind(&value, Kind::String)?;
        let permits = permits();
        self.caller.check(&permits)?;
        expect_kind(&permits, Kind::ZSet)?;
        self.refuse_split(&[&self.hash, &value, &permits])?;
        Ok(State { value, permits })
    }

    /// A state split from its hash by a slot migration, refused (see [`migration`]); nothing to
    /// check outside cluster mode.
    fn refuse_split(&self, keys: &[&Key<'_, M>]) -> Result<(), Error> {
        if !CLUSTER.load(Ordering::Relaxed) {
            return Ok(());
        }
        migration::refuse_split(self.ctx, self.name, keys)
    }

    /// The configuration; `None` if the limiter does not exist. Kept once read (see
    /// [`config_cache`]), so a busy limiter's hash is decoded again only when it changed.
    pub fn config(&self) -> Result<Option<Config>, Error> {
        if !self.hash.exists() {
            return Ok(None);
        }
        let fields = self.hash.hash_len();
        let mut may_keep = true;
        if let Some(known) = self.known.as_ref().filter(|known| known.fields == fields) {
            match self.kept_use(known) {
                KeptUse::Use(config) => return Ok(Some(config)),
                KeptUse::ReadInstead => may_keep = false,
            }
        }
        let config = self.read_config()?;
        // Admitted before subscribing: a server whose table is out of use does not subscribe
        // to events it would then be called back for on every write (on Redis 7.0, each
        // keep-alive's expiries).
        let keep = may_keep && config_cache::admits(self.db, self.name) && watch_hashes(self.ctx);
        if keep {
            // A field with a TTL of its own can expire with no event until the server deletes it.
            let check = match field_ttls(self.ctx) {
                FieldTtls::None => Some(Check::Done),
                FieldTtls::Shown => (!self.hash.has_field_ttls()).then_some(Check::Done),
                FieldTtls::Asked => Some(Check::Pending {
                    present: config.present,
                    uses: 0,
                }),
            };
            if let Some(check) = check {
                config_cache::remember(self.db, self.name, fields, config.config, check);
            }
        }
        Ok(Some(config.config))
    }

    /// Whether this call uses the configuration kept for the limiter, whose hash has the field
    /// count it had: yes once its check, if any, has passed (made here when due); otherwise the
    /// hash is read instead, and what is kept stays as it is (a pending entry is not kept anew,
    /// nor one whose check just failed: it would only be checked again).
    fn kept_use(&self, known: &Known) -> KeptUse {
        match known.check {
            Check::Done => KeptUse::Use(known.config),
            check if !check.due() => {
                config_cache::used_unchecked(self.db, self.name);
                KeptUse::ReadInstead
            }
            Check::Pending { present, .. } if self.fields_still(present) => {
                config_cache::passed_check(self.db, self.name);
                KeptUse::Use(known.config)
            }
            Check::Pending { .. } => {
                config_cache::forget(self.db, self.name);
                KeptUse::ReadInstead
            }
        }
    }

    /// Whether the configuration's fields found when it was kept (`present`, a bit each in
    /// [`CONFIG_FIELDS`]' order) are all still there without a TTL of their own, asked of the
    /// server (`HPTTL`) where it does not show field TTLs to modules (Redis 7.4, Valkey 9). A
    /// field that had a TTL when it was read may have expired since, with no event until the
    /// server deletes it: HPTTL then answers -2. From the check on, a TTL set on a field, and a
    /// field added, is a hash event, which forgets the configuration.
    fn fields_still(&self, present: u8) -> bool {
        let found: Vec<&[u8]> = CONFIG_FIELDS
            .iter()
            .enumerate()
            .filter(|(i, _)| present & (1 << i) != 0)
            .map(|(_, field)| *field)
            .collect();
        let count = found.len().to_string();
        let mut args: Vec<&[u8]> = vec![self.name, b"FIELDS", count.as_bytes()];
        args.extend(&found);
        match self.ctx.call("HPTTL", args.as_slice()) {
            Ok(RedisValue::Array(ttls)) => {
                ttls.len() == found.len() && ttls.iter().all(|ttl| *ttl == RedisValue::Integer(-1))
            }
            _ => false,
        }
    }

    /// The configuration decoded from the hash, which exists, and the fields found.
    fn read_config(&self) -> Result<ReadConfig, Error> {
        let fields = self.fields();
        let (Some(rate), Some(interval), Some(kind)) =
            (&fields.rate, &fields.interval, &fields.kind)
        else {
            return Err(Error::NotInitialized);
        };
        let number = |field: &str, bytes: &[u8], min: i64| {
            args::parse_i64(bytes).filter(|n| *n >= min).ok_or_else(|| {
                Error::corrupt(
                    self.hash.name(),
                    format!("field '{field}' is not an integer >= {min}"),
                )
            })
        };
        let config = Config {
            rate: number("rate", rate.as_slice(), 0)?,
            interval: number("interval", interval.as_slice(), 1)?,
            mode: mode_of(kind.as_slice()),
            // Bounded like SETRATE's KEEPALIVE: it becomes a TTL, and a TTL past the clock's
            // range would overflow in Redis and expire the keys at once.
            keep_alive: match &fields.keep_alive {
                Some(bytes) => args::parse_i64(bytes.as_slice())
                    .filter(|n| (0..=args::MAX_DURATION_MS).contains(n))
                    .ok_or_else(|| {
                        Error::corrupt(
                            self.hash.name(),
                            format!(
                                "field 'keepAliveTime' is not an integer between 0 and {}",
                                args::MAX_DURATION_MS
                            ),
                        )
                    })?,
                None => 0,
            },
            precision: 1,
        };
        Ok(ReadConfig {
            config: self.with_precision(config, &fields)?,
            present: fields.present(),
        })
    }

    /// The configuration with its `precision` field: an integer >= 1, used up to the interval.
    /// A Redisson client's setRate rewrites rate, interval and type but leaves the module's own
    /// field, so a precision above a shortened interval is not corrupt: the interval bounds it.
    fn with_precision(&self, config: Config, fields: &Fields) -> Result<Config, Error> {
        let precision = match &fields.precision {
            Some(bytes) => args::parse_i64(bytes.as_slice())
                .filter(|n| *n >= 1)
                .ok_or_else(|| {
                    Error::corrupt(self.hash.name(), "field 'precision' is not an integer >= 1")
                })?
                .min(config.interval),
            None => 1,
        };
        Ok(Config {
            precision,
            ..config
        })
    }

    /// The configuration of a limiter that must exist. Its callers go on to the derived keys,
    /// so a missing hash may be one a slot migration has moved away from them.
    pub fn require_config(&self) -> Result<Config, Error> {
        let config = self.config()?;
        if config.is_none() {
            self.refuse_split(&[&self.hash])?;
        }
        config.ok_or(Error::NotInitialized)
    }

    /// The configuration's fields. `precision`, which only this module writes, is asked only
    /// when the hash has more fields than the four others found: a Redisson limiter, or one
    /// made with the default precision, is read without looking for a field it does not have
    /// (a walk of the whole hash).
    fn fields(&self) -> Fields {
        let [rate, interval, kind, keep_alive] = self.hash.hash_get([
            &FIELD_NAMES[0],
            &FIELD_NAMES[1],
            &FIELD_NAMES[2],
            &FIELD_NAMES[3],
        ]);
        let found = [&rate, &interval, &kind, &keep_alive]
            .into_iter()
            .filter(|field| field.is_some())
            .count();
        let precision = if self.hash.hash_len() > found {
            let [precision] = self.hash.hash_get([&FIELD_NAMES[4]]);
            precision
        } else {
            None
        };
        Fields {
            rate,
            interval,
            kind,
            keep_alive,
            precision,
        }
    }

    /// The state a command acts on: the OVERALL keys, or the given client's for PER_CLIENT.
    pub fn state(&self, config: &Config, client: Option<&[u8]>) -> Result<State<'c, M>, Error> {
        match (config.mode, client) {
            (Mode::Overall, _) => self.open_overall(),
            (Mode::PerClient, Some(client)) => {
                self.open_state(&StateKeys::client(self.name, client))
            }
            (Mode::PerClient, None) => Err(Error::ClientRequired),
        }
    }

    /// TRYACQUIRE: take `permits` now or say how long to wait.
    pub fn try_acquire(
        &self,
        client: Option<&[u8]>,
        permits: u32,
        now: i64,
        turn: Turn,
        create: Option<&Creation>,
        reset: Reset,
    ) -> Result<Verdict, Error>
    where
        M: Writable,
    {
        let attempt = self.attempt(client, permits, now, turn, create, reset)?;
        self.commit(&attempt, true)
    }

    /// Reads and decides an acquisition without writing anything: the plan, and whether the
    /// limiter must first be created (`create`, when its hash does not exist).
    pub fn attempt(
        &self,
        client: Option<&[u8]>,
        permits: u32,
        now: i64,
        turn: Turn,
        create: Option<&Creation>,
        reset: Reset,
    ) -> Result<Attempt<'c, M>, Error>
    where
        M: Writable,
    {
        let (config, created) = match (self.config()?, create) {
            (Some(config), _) => (config, None),
            (None, Some(creation)) => {
                self.refuse_split(&[&self.hash])?;
                (creation.config(), Some(*creation))
            }
            (None, None) => {
                return Err(self.require_config().err().unwrap_or(Error::NotInitialized))
            }
        };
        if i64::from(permits) > config.rate {
            return Err(Error::PermitsExceedRate);
        }
        let state = self.state(&config, client)?;
        let stored = state.stored_value()?;
        let queued = match turn {
            Turn::FirstInLine => None,
            Turn::BehindWaiters | Turn::Queueing => self.queued_permits(&state),
        };
        let plan = match queued {
            // Take nothing while others wait; hint at when they and this request could fit.
            Some(ahead) => {
                let wait = hint(&config, stored, &state, now, ahead, permits)?;
                let (available, reset_after) = limiter::status(&config, stored, &state, now)?;
                Acquire::waiting(wait, available, reset_after)
            }
            None => limiter::try_acquire(&config, stored, &state, now, permits, reset)?,
        };
        Ok(Attempt {
            config,
            created,
            state,
            plan,
            turn,
            now,
            queued: queued.unwrap_or(0),
        })
    }

    /// Applies an attempt: the limiter's creation if it was created on first use, the prune,
    /// the grant if `grant` (an all-or-nothing acquisition refused elsewhere passes false), the
    /// value and the TTL rule.
    pub fn commit(&self, attempt: &Attempt<'_, M>, grant: bool) -> Result<Verdict, Error>
    where
        M: Writable,
    {
        let Attempt {
            config,
            created,
            state,
            turn,
            now,
            queued,
            ..
        } = attempt;
        let plan = if grant {
            attempt.plan
        } else {
            attempt.plan.without_grant(*now, config.interval)
        };
        if let Some(creation) = created {
            self.create(creation)?;
        }
        match (plan.prune, plan.append) {
            (Prune::UpTo(cutoff), Some(entry))
                if !plan.may_merge() && state.recycle(cutoff, entry) =>
            {
                // Whatever else expired (none, in a steady window) goes as usual.
                state.prune(plan.prune);
            }
            (prune, append) => {
                state.prune(prune);
                if let Some(entry) = append {
                    state.log(entry, plan.may_merge())?;
                }
            }
        }
        // A refusal that leaves a client waiting keeps the limiter alive until its turn.
        let waiting = match (plan.outcome, turn) {
            (Outcome::Wait(ms), Turn::Queueing | Turn::FirstInLine) => ms,
            (Outcome::Wait(ms), Turn::BehindWaiters) if *queued > 0 => ms,
            _ => 0,
        };
        self.write_value_and_ttls(config, state, plan.value, waiting);
        let ahead = i64::try_from(*queued).unwrap_or(i64::MAX);
        Ok(Verdict {
            outcome: if plan.append.is_some() {
                Outcome::Acquired
            } else {
                match plan.outcome {
                    Outcome::Wait(ms) => Outcome::Wait(ms),
                    Outcome::Acquired => Outcome::Wait(0),
                }
            },
            limit: config.rate,
            remaining: plan
                .available_after
                .saturating_sub(ahead)
                .clamp(0, config.rate.max(0)),
            reset_after: plan.reset_after,
        })
    }

    /// Writes the hash of a limiter created on first use: exactly what SETRATE NX does.
    fn create(&self, creation: &Creation) -> Result<(), Error>
    where
        M: Writable,
    {
        let change = RateChange {
            rate: creation.rate,
            interval: creation.interval,
            mode: creation.mode,
            keep_alive: creation.keep_alive,
            precision: creation.precision,
            condition: Some(Condition::IfAbsent),
            keep_state: false,
            client: None,
        };
        // NX reads no clock and touches no state.
        self.set_rate(&change, 0).map(|_| ())
    }

    /// The wait TRYACQUIRE would reply now, computed without writing (for an ACQUIRE that times out).
    pub fn wait_hint(&self, client: Option<&[u8]>, permits: u32, now: i64) -> Result<i64, Error> {
        let config = self.require_config()?;
        if i64::from(permits) > config.rate {
            return Err(Error::PermitsExceedRate);
        }
        let state = self.state(&config, client)?;
        let ahead = self.queued_permits(&state).unwrap_or(0);
        hint(&config, state.stored_value()?, &state, now, ahead, permits)
    }

    /// Permits requested by the clients blocked in ACQUIRE on this state, if any are.
    fn queued_permits(&self, state: &State<'_, M>) -> Option<u64> {
        if queue::is_empty() {
            return None;
        }
        queue::queued_permits(&self.state_id(state))
    }

    /// The state an ACQUIRE on `client` waits on, and the keys whose writes may free permits.
    pub fn waiting_state(&self, client: Option<&[u8]>) -> Result<(StateId, [Vec<u8>; 3]), Error> {
        let config = self.require_config()?;
        let state = self.state(&config, client)?;
        let watched = [
            self.name.to_vec(),
            state.value.name().to_vec(),
            state.permits.name().to_vec(),
        ];
        Ok((self.state_id(&state), watched))
    }

    fn state_id(&self, state: &State<'_, M>) -> StateId {
        StateId {
            db: self.db,
            permits_key: state.permits.name().to_vec(),
        }
    }

    /// AVAILABLE: permits a new request could take now, computed without writing: what queued
    /// ACQUIRE clients wait for counts as taken (a new request is refused while they wait).
    pub fn available(&self, client: Option<&[u8]>, now: i64) -> Result<i64, Error> {
        let config = self.require_config()?;
        let state = self.state(&config, client)?;
        let available = limiter::available(&config, state.stored_value()?, &state, now)?;
        let queued = self.queued_permits(&state).unwrap_or(0);
        Ok(available
            .saturating_sub(i64::try_from(queued).unwrap_or(i64::MAX))
            .max(0))
    }

    /// RELEASE: give back up to `permits` of the newest acquisitions. Returns how many.
    pub fn release(&self, client: Option<&[u8]>, permits: u32, now: i64) -> Result<i64, Error>
    where
        M: Writable,
    {
        let config = self.require_config()?;
        let state = self.state(&config, client)?;
        let plan = limiter::release(&config, state.stored_value()?, &state, now, permits)?;
        // The entry to split, read before anything is written: the newest one after the prune
        // (which only removes older entries) and the removals.
        let mut shrink = None;
        if let Some(permits) = plan.shrink_newest_to {
            let mut skip = plan.remove_newest;
            state
                .permits
                .zscan(Span::Everything, Order::NewestFirst, |score, member| {
                    if skip > 0 {
                        skip -= 1;
                        return Ok::<_, Error>(ControlFlow::Continue(()));
                    }
                    let id = keyspace::decode_member(member)
                        .map_err(|e| state.corrupt_member(e))?
                        .id;
                    let replacement = keyspace::reencode_member(id, permits).ok_or_else(|| {
                        Error::corrupt(state.permits.name(), "permit entry id too long")
                    })?;
                    shrink = Some((member.to_vec(), score_ms(score), replacement));
                    Ok(ControlFlow::Break(()))
                })?;
        }
        state.prune(plan.prune);
        if plan.remove_newest > 0 {
            state.permits.apply(Effect::ZRemNewest(plan.remove_newest));
        }
        if let Some((old, score, new)) = shrink {
            // Added before the old one goes, so the log never empties (and keeps its TTL). An
            // identical member already there (a degenerate foreign id) gets the permits kept
            // under a fresh id instead: the old member never goes without its replacement.
            let added = state.permits.apply(Effect::ZAdd {
                score,
                member: &new,
            }) || state
                .log(
                    Entry {
                        score,
                        permits: keyspace::decode_member(&new).map_or(0, |m| m.permits),
                    },
                    false,
                )
                .is_ok();
            if added {
                state.permits.apply(Effect::ZRem(&old));
            }
        }
        if plan.released > 0 || plan.prune != Prune::Nothing || plan.value.is_some() {
            self.write_value_and_ttls(&config, &state, plan.value, 0);
        }
        Ok(plan.released)
    }

    /// SETRATE. Returns the reply: 1 if applied (NX: if the limiter was created), else 0.
    pub fn set_rate(&self, change: &RateChange<'_>, now: i64) -> Result<i64, Error>
    where
        M: Writable,
    {
        let fields = self.fields();
        let new_type = type_field(change.mode);
        let rate = change.rate.to_string();
        let interval = change.interval.to_string();
        let keep_alive = change.keep_alive.to_string();
        let precision = change.precision.to_string();

        if change.condition == Some(Condition::IfAbsent) {
            let mut set: Vec<(&std::ffi::CStr, &[u8])> = Vec::new();
            if fields.rate.is_none() {
                set.push((keyspace::FIELD_RATE, rate.as_bytes()));
            }
            if fields.interval.is_none() {
                set.push((keyspace::FIELD_INTERVAL, interval.as_bytes()));
            }
            if fields.keep_alive.is_none() {
                set.push((keyspace::FIELD_KEEP_ALIVE, keep_alive.as_bytes()));
            }
            let created = fields.kind.is_none();
            if created {
                set.push((keyspace::FIELD_TYPE, new_type));
            }
            // A missing precision means 1: the field is written only when it says more.
            if fields.precision.is_none() && change.precision != 1 {
                set.push((keyspace::FIELD_PRECISION, precision.as_bytes()));
            }
            if !set.is_empty() {
                self.hash.apply(Effect::HSet(&set));
            }
            if created && change.keep_alive > 0 {
                self.hash
                    .apply(Effect::PExpireAt(expiry_in(change.keep_alive)));
            }
            return Ok(i64::from(created));
        }
        if change.condition == Some(Condition::IfExists) && !self.hash.exists() {
            return Ok(0);
        }

        // Open and check every key this change may touch before writing any of them.
        // Modes are compared, not bytes: any `type` but `1` is OVERALL.
        let mode_changed = fields
            .kind
            .as_ref()
            .is_some_and(|old| mode_of(old.as_slice()) != change.mode);
        let overall = self.open_state(&StateKeys::overall(self.name))?;
        let client = match change.client {
            Some(id) => Some(self.open_state(&StateKeys::client(self.name, id))?),
            None => None,
        };
        let target = match change.mode {
            Mode::Overall => Some(&overall),
            Mode::PerClient => client.as_ref(),
        };
        let keep = match target {
            Some(state) if change.keep_state && !mode_changed => {
                // The permits logged are read off the value under the configuration in force;
                // if either is unreadable, the log is summed instead (a repair).
                let previous = match (self.config(), state.stored_value()) {
                    (Ok(Some(config)), Ok(stored)) => Some((config, stored)),
                    _ => None,
                };
                Some(limiter::keep_state(
                    previous.as_ref().map(|(config, stored)| (config, *stored)),
                    change.rate,
                    change.interval,
                    state,
                    now,
                )?)
            }
            _ => None,
        };

        self.hash.apply(Effect::HSet(&[
            (keyspace::FIELD_RATE, rate.as_bytes()),
            (keyspace::FIELD_INTERVAL, interval.as_bytes()),
            (keyspace::FIELD_TYPE, new_type),
            (keyspace::FIELD_KEEP_ALIVE, keep_alive.as_bytes()),
        ]));
        if change.precision == 1 {
            self.hash.apply(Effect::HDel(keyspace::FIELD_PRECISION));
        } else {
            self.hash.apply(Effect::HSet(&[(
                keyspace::FIELD_PRECISION,
                precision.as_bytes(),
            )]));
        }
        if change.keep_alive > 0 {
            self.hash
                .apply(Effect::PExpireAt(expiry_in(change.keep_alive)));
        }
        if mode_changed {
            overall.delete();
            if let Some(client) = &client {
                client.delete();
            }
        } else if let Some(state) = target {
            match keep {
                None => state.delete(),
                Some(plan) => {
                    state.prune(plan.prune);
                    let config = Config {
                        rate: change.rate,
                        interval: change.interval,
                        mode: change.mode,
                        keep_alive: change.keep_alive,
                        precision: change.precision,
                    };
                    self.write_value_and_ttls(&config, state, Some(plan.value), 0);
                }
            }
        }
        Ok(1)
    }

    /// Applies `act` to each key DELETE, EXPIRE and PERSIST act on: the hash, the OVERALL
    /// state and the given client's state, all type-checked before the first is touched.
    /// Returns how many keys `act` changed.
    pub fn for_each_key(
        &self,
        client: Option<&[u8]>,
        mut act: impl FnMut(&Key<'c, M>) -> bool,
    ) -> Result<i64, Error>
    where
        M: Writable,
    {
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

    /// The value, if it changed, and the TTL rule, after every acquisition (granted or not),
    /// release and KEEPSTATE: with a keep-alive, refresh it on all three keys; otherwise give the
    /// state keys the hash's expiry. `waiting` is how long a client blocked in ACQUIRE waits for
    /// its turn: the keep-alive runs from then, so a limiter never expires under its waiters.
    /// A value written takes its expiry in the same `SET ... PXAT`: on a grant, one write and one
    /// replicated command fewer than a `SET` and a `PEXPIREAT`.
    fn write_value_and_ttls(
        &self,
        config: &Config,
        state: &State<'_, M>,
        value: Option<i64>,
        waiting: i64,
    ) where
        M: Writable,
    {
        // A keep-alive moves every call; the hash's own expiry rarely does, so it is compared
        // before it is written.
        let (expiry, unless_same) = if config.keep_alive > 0 {
            let ttl = config
                .keep_alive
                .saturating_add(waiting.max(0))
                .min(args::MAX_DURATION_MS);
            let at = expiry_in(ttl);
            self.hash.apply(Effect::PExpireAt(at));
            (Some(at), false)
        } else {
            (self.hash.expires_at(), true)
        };
        let expire = |key: &Key<'_, M>, at: i64| {
            if !(unless_same && key.expires_at() == Some(at)) {
                key.apply(Effect::PExpireAt(at));
            }
        };
        match (value, expiry) {
            // The value already expiring then (the hash's own TTL, unchanged): only the value.
            (Some(value), Some(at)) if unless_same && state.value.expires_at() == Some(at) => {
                state.value.apply(Effect::Set(value.to_string().as_bytes()));
            }
            (Some(value), Some(at)) => {
                state.value.apply(Effect::SetExpiringAt { value, at });
            }
            (Some(value), None) => {
                state.value.apply(Effect::Set(value.to_string().as_bytes()));
            }
            (None, Some(at)) => expire(&state.value, at),
            (None, None) => {}
        }
        if let Some(at) = expiry {
            expire(&state.permits, at);
        }
    }
}

impl<M: OpenMode> State<'_, M> {
    /// The value string, if present; an error naming the key if it is not an integer.
    fn stored_value(&self) -> Result<Option<i64>, Error> {
        match self.value.read_string(args::parse_i64) {
            None => Ok(None),
            Some(parsed) => parsed
                .map(Some)
                .ok_or_else(|| Error::corrupt(self.value.name(), "value is not an integer")),
        }
    }

    /// Logs an acquisition. Grants scored alike (the same millisecond, or the same precision
    /// bucket) share one entry: one already logged at that score has its permits raised, under
    /// the same id (ZREM + ZADD); otherwise a new entry gets a fresh random id. ZADD NX never
    /// overwrites a member, so an id already in the log (a 2^-128 chance) is redrawn instead of
    /// losing an acquisition.
    fn log(&self, entry: Entry, may_merge: bool) -> Result<(), Error>
    where
        M: Writable,
    {
        if may_merge && self.merge(entry) {
            return Ok(());
        }
        let mut rng = rand::rng();
        for _ in 0..ID_ATTEMPTS {
            let mut id = [0u8; keyspace::ID_LEN];
            rng.fill_bytes(&mut id);
            let member = keyspace::encode_member(&id, entry.permits);
            if self.permits.apply(Effect::ZAdd {
                score: entry.score,
                member: &member,
            }) {
                return Ok(());
            }
        }
        Err(Error::corrupt(
            self.permits.name(),
            "could not draw a unique permit id",
        ))
    }

    /// Adds `entry`'s permits to the entry already logged at its score, if there is one this
    /// module can read and the sum fits the member's 32 bits. False if nothing was merged.
    fn merge(&self, entry: Entry) -> bool
    where
        M: Writable,
    {
        let mut found = None;
        let _ = self.permits.zscan::<()>(
            Span::Between(entry.score.saturating_sub(1), entry.score),
            Order::NewestFirst,
            |_, member| {
                found = Some(member.to_vec());
                Ok(ControlFlow::Break(()))
            },
        );
        let Some(old) = found else {
            return false;
        };
        let Ok(decoded) = keyspace::decode_member(&old) else {
            return false;
        };
        let Some(permits) = decoded.permits.checked_add(entry.permits) else {
            return false;
        };
        let Some(merged) = keyspace::reencode_member(decoded.id, permits) else {
            return false;
        };
        // Added before the old one goes, so the log never empties (and keeps its TTL). An
        // identical member already there (a degenerate foreign id) leaves the grant to an entry
        // of its own.
        if !self.permits.apply(Effect::ZAdd {
            score: entry.score,
            member: &merged,
        }) {
            return false;
        }
        self.permits.apply(Effect::ZRem(&old));
        true
    }

    /// Logs `entry` by moving the oldest expired entry to its score (one `ZADD XX`) instead of
    /// pruning that entry and adding a fresh one (`ZREMRANGEBYSCORE` + `ZADD`): only when that
    /// entry holds exactly `entry`'s permits in the layout a fresh one would have, so the log
    /// reads the same to everyone (ids only keep entries apart, and an expired id is free). A
    /// steady limiter, where each grant replaces one expired grant, then makes one write per
    /// grant. False if nothing was moved; the caller then logs as usual.
    fn recycle(&self, cutoff: i64, entry: Entry) -> bool
    where
        M: Writable,
    {
        if entry.score <= cutoff {
            return false;
        }
        let mut oldest = None;
        let _ = self
            .permits
            .zscan::<()>(Span::UpTo(cutoff), Order::OldestFirst, |_, member| {
                oldest = keyspace::fresh_layout(member, entry.permits);
                Ok(ControlFlow::Break(()))
            });
        oldest.is_some_and(|member| {
            self.permits.apply(Effect::ZRescore {
                score: entry.score,
                member: &member,
            })
        })
    }

    /// Removes what a plan prunes: expired entries, or the whole log in O(1).
    fn prune(&self, prune: Prune)
    where
        M: Writable,
    {
        match prune {
            Prune::Nothing => {}
            Prune::UpTo(cutoff) => {
                self.permits.apply(Effect::ZRemRangeByScore(cutoff));
            }
            Prune::All => {
                self.permits.apply(Effect::Unlink);
            }
        }
    }

    fn corrupt_member(&self, e: keyspace::MemberError) -> Error {
        Error::corrupt(self.permits.name(), e.to_string())
    }

    fn delete(&self)
    where
        M: Writable,
    {
        self.value.apply(Effect::Unlink);
        self.permits.apply(Effect::Unlink);
    }
}

impl<M: OpenMode> PermitLog for State<'_, M> {
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

/// The user running the command, for ACL checks on derived keys. None when the context has no
/// user (a module timer, for instance): those run on behalf of a command already checked.
struct Caller(Option<User>);

impl Caller {
    fn current(ctx: &Context) -> Self {
        Caller(User::current(ctx))
    }

    fn check<M: OpenMode>(&self, key: &Key<'_, M>) -> Result<(), Error> {
        match &self.0 {
            Some(user) if !user.may_access(key.name_string(), M::ACCESS == Access::Write) => {
                Err(Error::NoPermission {
                    key: key.name().to_vec(),
                })
            }
            _ => Ok(()),
        }
    }
}

/// The wait before `permits` could be taken after the `ahead` permits queued before them (their
/// sum capped at the rate, since no request can exceed it); at least 1. Writes nothing.
fn hint<M: OpenMode>(
    config: &Config,
    stored: Option<i64>,
    state: &State<'_, M>,
    now: i64,
    ahead: u64,
    permits: u32,
) -> Result<i64, Error> {
    let rate = u64::try_from(config.rate).unwrap_or(0);
    let wanted = ahead
        .saturating_add(u64::from(permits))
        .min(rate)
        .min(u64::from(u32::MAX)) as u32;
    Ok(
        match limiter::try_acquire(config, stored, state, now, wanted, Reset::NotWanted)?.outcome {
            Outcome::Wait(ms) => ms,
            Outcome::Acquired => 1,
        },
    )
}

/// A zset score as whole milliseconds. Scores this module and Redisson write are integers; a
/// fractional one is rounded up, so its entry is never freed early.
fn score_ms(score: f64) -> i64 {
    score.ceil() as i64
}

/// In a cluster, keys in another slot may live on another node: a name whose derived keys do
/// not share its slot is refused before anything is read or written (SETRATE NX included, so
/// no unusable limiter is ever created).
fn refuse_cross_slot(name: &[u8]) -> Result<(), Error> {
    if CLUSTER.load(Ordering::Relaxed) && !keyspace::derived_keys_share_slot(name) {
        return Err(Error::CrossSlot {
            name: name.to_vec(),
        });
    }
    Ok(())
}

/// The absolute expiry, on the server's clock, of a TTL of `ms` set now.
fn expiry_in(ms: i64) -> i64 {
    clock::server_ms().saturating_add(ms)
}

/// The `type` field a mode is stored as.
fn type_field(mode: Mode) -> &'static [u8] {
    match mode {
        Mode::Overall => keyspace::TYPE_OVERALL,
        Mode::PerClient => keyspace::TYPE_PER_CLIENT,
    }
}

/// The mode a `type` field means: exactly `1` is PER_CLIENT, anything else OVERALL.
fn mode_of(kind: &[u8]) -> Mode {
    if kind == keyspace::TYPE_PER_CLIENT {
        Mode::PerClient
    } else {
        Mode::Overall
    }
}

/// Whether this load of the module has subscribed to the keyspace events that forget a kept
/// configuration.
static WATCHING_HASHES: AtomicBool = AtomicBool::new(false);

/// Subscribes, once per load, to the events that change a hash or remove a key, which forget
/// the configuration kept for it: before the first configuration is kept, so a server whose
/// limiters are never read twice pays nothing for them. False if configurations are not kept
/// (`config-cache no`) or the server refused.
fn watch_hashes(ctx: &Context) -> bool {
    if !config_cache::on() {
        return false;
    }
    if WATCHING_HASHES.load(Ordering::Relaxed) {
        return true;
    }
    let mut classes = raw::REDISMODULE_NOTIFY_HASH;
    if !watch_removals(ctx) {
        // Redis 7.0 has no KEY event: keys leaving are seen through their keyspace events.
        classes |= raw::REDISMODULE_NOTIFY_GENERIC
            | raw::REDISMODULE_NOTIFY_EXPIRED
            | raw::REDISMODULE_NOTIFY_EVICTED;
    }
    let subscribed = events::watch_keys::<KeptConfigs>(ctx, classes as c_int);
    WATCHING_HASHES.store(subscribed, Ordering::Relaxed);
    subscribed
}

/// The fields of a limiter's configuration, as `HPTTL` takes them.
const CONFIG_FIELDS: [&[u8]; 5] = [
    keyspace::FIELD_RATE.to_bytes(),
    keyspace::FIELD_INTERVAL.to_bytes(),
    keyspace::FIELD_TYPE.to_bytes(),
    keyspace::FIELD_KEEP_ALIVE.to_bytes(),
    keyspace::FIELD_PRECISION.to_bytes(),
];

/// How the module learns whether a hash field has a TTL of its own (HEXPIRE).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FieldTtls {
    /// The server has no field TTLs.
    None,
    /// The server shows them to modules (Redis 8's HashFieldMinExpire).
    Shown,
    /// The server has them but does not show them (Redis 7.4, Valkey 9): `HPTTL` tells.
    Asked,
}

/// Asked once per load: the answer is the server's.
fn field_ttls(ctx: &Context) -> FieldTtls {
    const NONE: u8 = 1;
    const SHOWN: u8 = 2;
    const ASKED: u8 = 3;
    match FIELD_TTLS.load(Ordering::Relaxed) {
        NONE => return FieldTtls::None,
        SHOWN => return FieldTtls::Shown,
        ASKED => return FieldTtls::Asked,
        _ => {}
    }
    let found = if key::shows_field_ttls() {
        FieldTtls::Shown
    } else {
        let reply = ctx.call("COMMAND", &["INFO", "HPTTL"]);
        let has_hpttl = matches!(reply, Ok(RedisValue::Array(items)) if items.iter().any(|item| *item != RedisValue::Null));
        if has_hpttl {
            FieldTtls::Asked
        } else {
            FieldTtls::None
        }
    };
    let code = match found {
        FieldTtls::None => NONE,
        FieldTtls::Shown => SHOWN,
        FieldTtls::Asked => ASKED,
    };
    FIELD_TTLS.store(code, Ordering::Relaxed);
    found
}

/// What [`field_ttls`] found: 0 while not asked yet this load, else its code.
static FIELD_TTLS: AtomicU8 = AtomicU8::new(0);

/// Whether the server runs in cluster mode, which is fixed when it starts.
static CLUSTER: AtomicBool = AtomicBool::new(false);

/// Whether this load has subscribed to the removal of keys (the KEY server event).
static WATCHING_REMOVALS: AtomicBool = AtomicBool::new(false);

/// What the waiters do when a key leaves (in a database): set by `blocking` at load.
pub type RemovalHook = fn(&Context, i32, &[u8]);

static ON_REMOVAL: Mutex<Option<RemovalHook>> = Mutex::new(None);

/// Subscribes, once per load, to keys leaving the keyspace, for both the kept configurations
/// and the waiters (a server event has one callback per module; `hook` is what the waiters
/// do). False where the server has no KEY event (Redis 7.0): its callers then subscribe to the
/// keyspace events of keys as a whole instead.
pub fn watch_removals(ctx: &Context) -> bool {
    if WATCHING_REMOVALS.load(Ordering::Relaxed) {
        return true;
    }
    let subscribed = events::watch_removals::<KeptConfigs>(ctx);
    WATCHING_REMOVALS.store(subscribed, Ordering::Relaxed);
    subscribed
}

/// At load: notes whether the server is a cluster node and whether to keep configurations at
/// all, forgets what an earlier load of the module subscribed to and kept, and takes what the
/// waiters do when a key leaves.
pub fn init(ctx: &Context, on_removal: RemovalHook, keep_configs: bool) {
    config_cache::turn(keep_configs);
    CLUSTER.store(
        ctx.get_flags().contains(ContextFlags::CLUSTER),
        Ordering::Relaxed,
    );
    WATCHING_HASHES.store(false, Ordering::Relaxed);
    WATCHING_REMOVALS.store(false, Ordering::Relaxed);
    FIELD_TTLS.store(0, Ordering::Relaxed);
    *ON_REMOVAL.lock().unwrap_or_else(PoisonError::into_inner) = Some(on_removal);
    config_cache::reset();
}

/// The configurations kept in [`config_cache`], as a watcher of the keys they were read from.
enum KeptConfigs {}

impl KeyWatcher for KeptConfigs {
    /// A key changed: the configuration kept for it, if it is a limiter's hash, is no longer
    /// known.
    fn key_event(ctx: &Context, event: &[u8], key: &[u8]) {
        if !config_cache::keeps_config(event) {
            config_cache::forget(selected_db(ctx), key);
        }
    }
}

impl RemovalWatcher for KeptConfigs {
    /// A key left: forget its configuration, and tell the waiters.
    fn key_removed(ctx: &Context, db: i32, key: &[u8]) {
        config_cache::forget(db, key);
        let hook = *ON_REMOVAL.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(hook) = hook {
            hook(ctx, db, key);
        }
    }
}

/// The database the context has selected.
pub fn selected_db(ctx: &Context) -> i32 {
    server::selected_db(ctx)
}

fn expect_kind<M: OpenMode>(key: &Key<'_, M>, kind: Kind) -> Result<(), Error> {
    match key.kind() {
        Kind::Empty => Ok(()),
        k if k == kind => Ok(()),
        _ => Err(Error::WrongType),
    }
}
