//! Opening a limiter's keys with their checks: the cluster slot of the names it derives, the
//! caller's ACL on each derived key, each key's type, and a state split from its hash by a slot
//! migration.

use std::cell::OnceCell;
use std::sync::atomic::{AtomicBool, Ordering};

use redis_module::Context;

use super::dataset::{Dataset, OpenKey, Server};
use super::{selected_db, LimiterKeys, State};
use crate::config_cache;
use crate::error::Error;
use crate::ffi::acl::User;
use crate::key::{Access, Key, KeyType, OpenMode};
use crate::keyspace::{self, StateKeys};

impl<'c, M: OpenMode> LimiterKeys<'c, M, Server<'c>> {
    /// Opens a limiter for a command. Its derived keys' slot is checked when they are opened
    /// (a ONEKEY limiter has none: its one key is the command's declared key).
    pub fn open(ctx: &'c Context, name: &'c [u8]) -> Result<Self, Error> {
        Self::open_as(ctx, name, Caller::current())
    }

    /// Opens a limiter only to read its configuration: CONFIG touches nothing but the declared
    /// key, so it answers even for a name whose derived keys are in another cluster slot.
    pub fn open_config(ctx: &'c Context, name: &'c [u8]) -> Result<Self, Error> {
        Self::open_as(ctx, name, Caller::current())
    }

    /// Opens a limiter on behalf of a client blocked in ACQUIRE, from a timer or callback
    /// context that has no user of its own: its ACL was checked when it blocked.
    pub fn open_for_waiter(ctx: &'c Context, name: &'c [u8]) -> Result<Self, Error> {
        Self::open_as(ctx, name, Caller::Checked)
    }

    pub(super) fn open_as(ctx: &'c Context, name: &'c [u8], caller: Caller) -> Result<Self, Error> {
        let db = selected_db(ctx);
        let mut known = config_cache::lookup(ctx, db, name);
        let hash = match known.as_mut().and_then(|known| known.hash.take()) {
            Some(string) => Key::open_named(ctx, string),
            None => Key::open(ctx, name),
        };
        let server = Server {
            ctx,
            caller,
            db,
            known,
        };
        LimiterKeys::in_dataset(server, name, hash)
    }
}

impl<'c, M: OpenMode, D: Dataset> LimiterKeys<'c, M, D> {
    /// The limiter of `name` in `data`, whose key `hash` is already open.
    pub(super) fn in_dataset(data: D, name: &'c [u8], hash: D::Key<M>) -> Result<Self, Error> {
        // A hash is Redisson's form; a string, a ONEKEY limiter's state (checked when read).
        if hash.key_type() != KeyType::String {
            expect_kind(&hash, KeyType::Hash)?;
        }
        Ok(LimiterKeys {
            data,
            name,
            hash,
            packed: std::cell::Cell::new(None),
        })
    }

    /// Opens the value and permits keys of one state. The server checked only the declared
    /// `key`; these are derived from it, so this is where the module refuses, before touching
    /// anything, a key outside the caller's ACL (the cluster slot was checked at open) or a
    /// state split from its hash by a slot migration.
    pub(super) fn open_state(&self, keys: &StateKeys) -> Result<State<M, D>, Error> {
        refuse_cross_slot(self.name)?;
        self.check_state(self.data.open(&keys.value), || {
            self.data.open(&keys.permits)
        })
    }

    /// The OVERALL state's keys, opened with the names kept for them if there are.
    pub(super) fn open_overall(&self) -> Result<State<M, D>, Error> {
        refuse_cross_slot(self.name)?;
        match self.data.open_kept_overall() {
            Some((value, permits)) => self.check_state(value, permits),
            None => self.open_state(&StateKeys::overall(self.name)),
        }
    }

    pub(super) fn check_state(
        &self,
        value: D::Key<M>,
        permits: impl FnOnce() -> D::Key<M>,
    ) -> Result<State<M, D>, Error> {
        self.data.check_access(&value)?;
        expect_derived_kind(&value, KeyType::String)?;
        let permits = permits();
        self.data.check_access(&permits)?;
        expect_derived_kind(&permits, KeyType::ZSet)?;
        self.refuse_split(&[&self.hash, &value, &permits])?;
        Ok(State { value, permits })
    }

    /// A state split from its hash by a slot migration, refused (see [`crate::migration`]);
    /// nothing to check outside cluster mode.
    pub(super) fn refuse_split(&self, keys: &[&D::Key<M>]) -> Result<(), Error> {
        self.data.refuse_split(self.name, keys)
    }
}

/// The user running the command, for ACL checks on derived keys. Looked up on the first check,
/// not at open: a ONEKEY limiter derives no key, so its request never pays for the lookup. `Checked` when the context has no
/// user (a module timer, for instance): those run on behalf of a command already checked.
pub(super) enum Caller {
    Client(OnceCell<Option<User>>),
    Checked,
}

impl Caller {
    pub(super) fn current() -> Self {
        Caller::Client(OnceCell::new())
    }

    #[inline]
    pub(super) fn check<M: OpenMode>(&self, ctx: &Context, key: &Key<'_, M>) -> Result<(), Error> {
        let Caller::Client(user) = self else {
            return Ok(());
        };
        match user.get_or_init(|| User::current(ctx)) {
            Some(user) if !user.may_access(key.name_string(), M::ACCESS == Access::Write) => {
                Err(Error::NoPermission {
                    key: key.name().to_vec(),
                })
            }
            _ => Ok(()),
        }
    }
}

/// In a cluster, keys in another slot may live on another node: a name whose derived keys do
/// not share its slot is refused before anything is read or written (SETRATE NX included, so
/// no unusable limiter is ever created).
pub(super) fn refuse_cross_slot(name: &[u8]) -> Result<(), Error> {
    if CLUSTER.load(Ordering::Relaxed) && !keyspace::derived_keys_share_slot(name) {
        return Err(Error::CrossSlot {
            name: name.to_vec(),
        });
    }
    Ok(())
}

/// Whether the server runs in cluster mode, which is fixed when it starts.
pub(super) static CLUSTER: AtomicBool = AtomicBool::new(false);

pub(super) fn expect_kind<M: OpenMode>(key: &impl OpenKey<M>, kind: KeyType) -> Result<(), Error> {
    match key.key_type() {
        KeyType::Empty => Ok(()),
        k if k == kind => Ok(()),
        _ => Err(Error::WrongType),
    }
}

/// As [`expect_kind`] for a key derived from the limiter's name, which the error names: the
/// caller typed only the name, so Redis's bare text would not say which key is in the way.
pub(super) fn expect_derived_kind<M: OpenMode>(
    key: &impl OpenKey<M>,
    kind: KeyType,
) -> Result<(), Error> {
    expect_kind(key, kind).map_err(|_| Error::WrongTypeDerived {
        key: key.name().to_vec(),
    })
}
