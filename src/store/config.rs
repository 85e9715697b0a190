//! Decoding a limiter's configuration from its hash, or taking the one the config cache keeps.

use std::cell::Cell;
use std::ops::Deref;

use super::dataset::{Dataset, OpenKey};
use super::LimiterKeys;
use crate::args;
use crate::error::Error;
use crate::key::{OpenMode, StaticString};
use crate::keyspace;
use crate::sliding_log::{Config, Mode};

/// The raw fields of a limiter hash, before validation.
pub(super) struct Fields<F> {
    pub(super) rate: Option<F>,
    pub(super) interval: Option<F>,
    pub(super) kind: Option<F>,
    pub(super) keep_alive: Option<F>,
    pub(super) precision: Option<F>,
}

impl<F> Fields<F> {
    /// The fields found, a bit each in the order of `rate`, `interval`, `type`,
    /// `keepAliveTime`, `precision` (the config cache's `CONFIG_FIELDS`).
    pub(super) fn present(&self) -> u8 {
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

/// Where a request's configuration was found, which says whether a queue of waiters may keep
/// it (see `LimiterKeys::config_to_keep`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Origin {
    /// Decoded from the limiter's hash, with the fields found ([`Fields::present`]), any of
    /// which may have a TTL of its own: not asked yet.
    Hash { present: u8 },
    /// Decoded from the limiter's hash, some of whose fields have TTLs of their own: never kept.
    WithFieldTtls,
    /// With no field TTL: a ONEKEY limiter's own key; a configuration the config cache kept,
    /// which keeps none whose fields have TTLs and forgets one on any change to its hash (a
    /// field's new TTL among them); one a queue kept, by the same rule; or one decoded from the
    /// hash, whose fields were just found without TTLs.
    WithoutFieldTtls,
    /// The request's `RATE` option: the request creates the limiter.
    Created,
}

/// A configuration decoded from its hash, with the fields found ([`Fields::present`]).
pub(super) struct ReadConfig {
    pub(super) config: Config,
    present: u8,
}

/// The hash's field names, as strings made once (see [`StaticString`]).
pub(super) static FIELD_NAMES: [StaticString; 5] = [
    StaticString::new(keyspace::FIELD_RATE.to_bytes()),
    StaticString::new(keyspace::FIELD_INTERVAL.to_bytes()),
    StaticString::new(keyspace::FIELD_TYPE.to_bytes()),
    StaticString::new(keyspace::FIELD_KEEP_ALIVE.to_bytes()),
    StaticString::new(keyspace::FIELD_PRECISION.to_bytes()),
];

impl<M: OpenMode, D: Dataset> LimiterKeys<'_, M, D> {
    /// The configuration; `None` if the limiter does not exist. Kept once read (see
    /// [`config_cache`]), so a busy limiter's hash is decoded again only when it changed.
    pub fn config(&self) -> Result<Option<Config>, Error> {
        Ok(self.found_config()?.map(|(config, _)| config))
    }

    /// The configuration and where it was found; `None` if the limiter does not exist.
    pub(super) fn found_config(&self) -> Result<Option<(Config, Origin)>, Error> {
        if let Some(config) = self.packed_config()? {
            return Ok(Some((config, Origin::WithoutFieldTtls)));
        }
        if !self.hash.exists() {
            return Ok(None);
        }
        let fields = self.hash.hash_len();
        if let Some(config) = self.data.kept_config(fields) {
            return Ok(Some((config, Origin::WithoutFieldTtls)));
        }
        let read = self.read_config()?;
        // The config cache may ask whether the fields have TTLs (HPTTL on some servers); its
        // answer is kept with the configuration, so a queue keeping it asks no second time.
        let answer = Cell::new(None);
        self.data.keep_config(self.name, fields, read.config, || {
            let without = self.without_field_ttls(read.present);
            answer.set(Some(without));
            without
        });
        let origin = match answer.get() {
            Some(true) => Origin::WithoutFieldTtls,
            Some(false) => Origin::WithFieldTtls,
            None => Origin::Hash {
                present: read.present,
            },
        };
        Ok(Some((read.config, origin)))
    }

    /// Whether the configuration's fields found in the hash (`present`, as
    /// [`Fields::present`]) have no TTL of their own (see [`Dataset::without_field_ttls`]).
    pub(super) fn without_field_ttls(&self, present: u8) -> bool {
        self.data.without_field_ttls(&self.hash, present)
    }

    /// The configuration decoded from the hash, which exists, and the fields found.
    pub(super) fn read_config(&self) -> Result<ReadConfig, Error> {
        self.decode(&self.fields())
    }

    /// The configuration `fields` (read from the hash) hold, and the fields found.
    pub(super) fn decode<F: Deref<Target = [u8]>>(
        &self,
        fields: &Fields<F>,
    ) -> Result<ReadConfig, Error> {
        let (Some(rate), Some(interval), Some(kind)) =
            (&fields.rate, &fields.interval, &fields.kind)
        else {
            return Err(Error::not_initialized(self.name));
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
            rate: number("rate", rate, 0)?,
            interval: number("interval", interval, 1)?,
            mode: mode_of(kind),
            // Bounded like SETRATE's KEEPALIVE: it becomes a TTL, and a TTL past the clock's
            // range would overflow in Redis and expire the keys at once.
            keep_alive: match &fields.keep_alive {
                Some(bytes) => args::parse_i64(bytes)
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
            config: self.with_precision(config, fields)?,
            present: fields.present(),
        })
    }

    /// The configuration with its `precision` field: an integer >= 1, used up to the interval.
    /// A Redisson client's setRate rewrites rate, interval and type but leaves the module's own
    /// field, so a precision above a shortened interval is not corrupt: the interval bounds it.
    pub(super) fn with_precision<F: Deref<Target = [u8]>>(
        &self,
        config: Config,
        fields: &Fields<F>,
    ) -> Result<Config, Error> {
        let precision = match &fields.precision {
            Some(bytes) => args::parse_i64(bytes)
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

    /// The configuration's fields. `precision`, which only this module writes, is asked only
    /// when the hash has more fields than the four others found: a Redisson limiter, or one
    /// made with the default precision, is read without looking for a field it does not have
    /// (a walk of the whole hash).
    pub(super) fn fields(&self) -> Fields<<D::Key<M> as OpenKey<M>>::Field> {
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
}

/// The `type` field a mode is stored as.
pub(super) fn type_field(mode: Mode) -> &'static [u8] {
    match mode {
        Mode::Overall => keyspace::TYPE_OVERALL,
        Mode::PerClient => keyspace::TYPE_PER_CLIENT,
        // Never in a hash: a ONEKEY limiter's configuration is in its own key.
        Mode::OneKey => keyspace::TYPE_OVERALL,
    }
}

/// The mode a `type` field means: exactly `1` is PER_CLIENT, anything else OVERALL.
pub(super) fn mode_of(kind: &[u8]) -> Mode {
    if kind == keyspace::TYPE_PER_CLIENT {
        Mode::PerClient
    } else {
        Mode::Overall
    }
}
