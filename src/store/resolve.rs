//! Resolving a limiter for one request: its configuration read once, then the state the request
//! acts on and that state's identity. Everything after (the attempt, the commit, the wait hint,
//! a give-back, a ticket's lookup) reads these instead of the hash again.

use std::cell::OnceCell;

use super::config::Origin;
use super::dataset::{Dataset, OpenKey, Server};
use super::{LimiterKeys, Stored};
use crate::error::Error;
use crate::key::OpenMode;
use crate::keyspace::StateId;
use crate::sliding_log::{Config, Mode};

/// A limiter's configuration as one request finds it: decoded from its hash (or taken from the
/// config cache) once, or the one the request's `RATE` option creates it with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Configuration {
    pub config: Config,
    /// Where it was found; `Created` when the hash is absent and the request creates the
    /// limiter when it commits.
    origin: Origin,
}

impl Configuration {
    /// Whether the limiter's hash exists (it is not created by this request).
    pub fn exists(&self) -> bool {
        self.origin != Origin::Created
    }

    /// A request of `permits` is refused outright when it exceeds the rate: no wait would ever
    /// let it through.
    pub fn check_permits(&self, permits: u32) -> Result<(), Error> {
        if i64::from(permits) > self.config.rate {
            return Err(Error::PermitsExceedRate);
        }
        Ok(())
    }

    /// The configuration written when the request commits, if it creates the limiter.
    pub(super) fn created(&self) -> Option<&Config> {
        (self.origin == Origin::Created).then_some(&self.config)
    }
}

/// A limiter resolved for one request: its configuration and the state (OVERALL, or the
/// request's client's) the request acts on, opened and checked.
pub struct Resolved<'c, M: OpenMode, D: Dataset = Server<'c>> {
    configuration: Configuration,
    pub(super) state: Stored<M, D>,
    /// The limiter's name: a ONEKEY limiter's one key.
    name: &'c [u8],
    db: i32,
    /// Made on first use: most requests never need it (no waiter, no ticket).
    id: OnceCell<StateId>,
}

impl<M: OpenMode, D: Dataset> Resolved<'_, M, D> {
    pub fn configuration(&self) -> &Configuration {
        &self.configuration
    }

    pub fn config(&self) -> &Config {
        &self.configuration.config
    }

    /// The state's identity: what the queue of its waiters and its tickets are keyed by.
    pub fn id(&self) -> &StateId {
        self.id.get_or_init(|| StateId {
            db: self.db,
            permits_key: self.state_keys()[1].to_vec(),
        })
    }

    /// The keys whose writes may free this state's permits: the limiter's hash (named `name`),
    /// the state's value and its permits; a ONEKEY limiter's one key.
    pub fn watched(&self, name: &[u8]) -> [Vec<u8>; 3] {
        let [value, permits] = self.state_keys();
        [name.to_vec(), value.to_vec(), permits.to_vec()]
    }

    /// Whether it acts on a state sharing a key with `other`'s: limiters whose names derive the
    /// same keys (`a` and `{a}`, or a client id that makes one name's keys another's).
    pub fn shares_state_with(&self, other: &Self) -> bool {
        let theirs = other.state_keys();
        self.state_keys().iter().any(|key| theirs.contains(key))
    }

    /// The keys holding the state: the value and the permits; a ONEKEY limiter's key twice.
    fn state_keys(&self) -> [&[u8]; 2] {
        match &self.state {
            Stored::Keys(state) => [state.value.name(), state.permits.name()],
            Stored::Packed(_) => [self.name, self.name],
        }
    }
}

impl<'c, M: OpenMode, D: Dataset> LimiterKeys<'c, M, D> {
    /// The configuration a request acts under: the limiter's, or `create` (the request's `RATE`
    /// option) when its hash is absent; otherwise the limiter is not initialized. A missing
    /// hash may be one a slot migration moved away from the derived keys: refused as such.
    pub fn configuration(&self, create: Option<&Config>) -> Result<Configuration, Error> {
        match (self.found_config()?, create) {
            (Some((config, origin)), _) => Ok(Configuration { config, origin }),
            (None, create) => {
                // A ONEKEY limiter is its one key: nothing of it can be split off.
                if create.is_none_or(|config| config.mode != Mode::OneKey) {
                    self.refuse_split(&[&self.hash])?;
                }
                let config = create.ok_or_else(|| Error::not_initialized(self.name))?;
                Ok(Configuration {
                    config: *config,
                    origin: Origin::Created,
                })
            }
        }
    }

    /// Opens and checks the state `client` acts on under `configuration`.
    pub fn resolve(
        &self,
        configuration: Configuration,
        client: Option<&[u8]>,
    ) -> Result<Resolved<'c, M, D>, Error> {
        Ok(Resolved {
            state: self.state(&configuration.config, client)?,
            configuration,
            name: self.name,
            db: self.data.db(),
            id: OnceCell::new(),
        })
    }

    /// Resolves for a request of `permits`, checked in the order every acquiring command
    /// checks: the configuration (or its creation), the permits against its rate, the state.
    pub fn resolve_for(
        &self,
        create: Option<&Config>,
        client: Option<&[u8]>,
        permits: u32,
    ) -> Result<Resolved<'c, M, D>, Error> {
        let configuration = self.configuration(create)?;
        configuration.check_permits(permits)?;
        self.resolve(configuration, client)
    }

    /// Resolves a limiter for `client` with a configuration resolved earlier and kept while no
    /// event said the limiter changed (a queue of waiters keeps one): the hash is not read
    /// again. A limiter whose key is gone is resolved afresh, and fails as not initialized.
    pub fn resolve_kept(
        &self,
        config: Config,
        client: Option<&[u8]>,
    ) -> Result<Resolved<'c, M, D>, Error> {
        if !self.hash.exists() {
            return self.resolve_existing(client);
        }
        let configuration = Configuration {
            config,
            origin: Origin::WithoutFieldTtls,
        };
        self.resolve(configuration, client)
    }

    /// The configuration a queue of waiters may keep for `resolved` until an event says the
    /// limiter changed (see `resolve_kept`): not one the request itself created, since its hash
    /// may then be made another way (the module's own writes report nothing to the waiters);
    /// not one read from a hash whose fields have TTLs of their own, which may pass with no
    /// event until the server deletes the field: asked as the config cache asks, on every
    /// server (see [`Dataset::without_field_ttls`]).
    pub fn config_to_keep(&self, resolved: &Resolved<'_, M, D>) -> Option<Config> {
        let configuration = resolved.configuration();
        let keep = match configuration.origin {
            Origin::Created | Origin::WithFieldTtls => false,
            Origin::WithoutFieldTtls => true,
            Origin::Hash { present } => self.without_field_ttls(present),
        };
        keep.then_some(configuration.config)
    }

    /// Resolves a limiter that must exist, for `client`.
    pub fn resolve_existing(&self, client: Option<&[u8]>) -> Result<Resolved<'c, M, D>, Error> {
        let configuration = self.configuration(None)?;
        self.resolve(configuration, client)
    }
}
