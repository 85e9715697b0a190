//! SETRATE: writing a limiter's configuration, with NX / XX and KEEPSTATE.

use super::config::{mode_of, type_field};
use super::dataset::{Dataset, OpenKey};
use super::open::refuse_cross_slot;
use super::LimiterKeys;
use crate::error::Error;
use crate::key::{Effect, KeyType, OpenMode, Writable};
use crate::keyspace::{self, StateKeys};
use crate::packed_log::PackedLog;
use crate::sliding_log::{self, Config, Mode};

/// What SETRATE was asked to do; built by `commands::setrate`.
#[derive(Debug)]
pub struct RateChange<'a> {
    pub config: Config,
    pub condition: Option<Condition>,
    pub keep_state: bool,
    pub client: Option<&'a [u8]>,
}

/// SETRATE's NX / XX.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Condition {
    /// Only the fields that are absent (Redisson `trySetRate`).
    IfAbsent,
    /// Only if the limiter exists (Redisson `updateRate`).
    IfExists,
}

impl<M: OpenMode, D: Dataset> LimiterKeys<'_, M, D> {
    /// SETRATE. Returns the reply: 1 if applied (NX: if the limiter was created), else 0.
    pub fn set_rate(&self, change: &RateChange<'_>, now: i64) -> Result<i64, Error>
    where
        M: Writable,
    {
        let config = &change.config;
        match (config.mode == Mode::OneKey, self.hash.key_type()) {
            (true, KeyType::Hash) | (false, KeyType::String) => {
                // A string that holds no limiter is an error of its own.
                self.packed_config()?;
                // NX leaves any limiter that exists as it is; the others would change its form.
                if change.condition == Some(Condition::IfAbsent) {
                    return Ok(0);
                }
                return Err(Error::FormChange {
                    key: self.name.to_vec(),
                    one_key: config.mode != Mode::OneKey,
                });
            }
            (true, _) => return self.set_rate_packed(change, now),
            (false, _) => refuse_cross_slot(self.name)?,
        }
        let fields = self.fields();
        let new_type = type_field(config.mode);
        let rate = config.rate.to_string();
        let interval = config.interval.to_string();
        let keep_alive = config.keep_alive.to_string();
        let precision = config.precision.to_string();

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
            if fields.precision.is_none() && config.precision != 1 {
                set.push((keyspace::FIELD_PRECISION, precision.as_bytes()));
            }
            if !set.is_empty() {
                self.hash.apply(Effect::HSet(&set));
            }
            if created && config.keep_alive > 0 {
                self.hash
                    .apply(Effect::PExpireAt(self.expiry_in(config.keep_alive)));
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
            .is_some_and(|old| mode_of(old) != config.mode);
        let overall = self.open_state(&StateKeys::overall(self.name))?;
        let client = match change.client {
            Some(id) => Some(self.open_state(&StateKeys::client(self.name, id))?),
            None => None,
        };
        let target = match config.mode {
            Mode::Overall | Mode::OneKey => Some(&overall),
            Mode::PerClient => client.as_ref(),
        };
        let keep = match target {
            Some(state) if change.keep_state && !mode_changed => {
                // The permits logged are read off the value under the configuration in force,
                // decoded from the fields read above (the hash is read once); if either is
                // unreadable, or the hash absent, the log is summed instead (a repair).
                let previous = match (self.decode(&fields), state.stored_value()) {
                    (Ok(old), Ok(stored)) => Some((old.config, stored)),
                    _ => None,
                };
                Some(sliding_log::keep_state(
                    previous.as_ref().map(|(old, stored)| (old, *stored)),
                    config.rate,
                    config.interval,
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
        if config.precision == 1 {
            self.hash.apply(Effect::HDel(keyspace::FIELD_PRECISION));
        } else {
            self.hash.apply(Effect::HSet(&[(
                keyspace::FIELD_PRECISION,
                precision.as_bytes(),
            )]));
        }
        if config.keep_alive > 0 {
            self.hash
                .apply(Effect::PExpireAt(self.expiry_in(config.keep_alive)));
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
                    self.write_value_and_ttls(&change.config, state, Some(plan.value), 0);
                }
            }
        }
        Ok(1)
    }
}

impl<M: OpenMode, D: Dataset> LimiterKeys<'_, M, D> {
    /// SETRATE of a ONEKEY limiter, whose key is absent or holds one: its configuration and
    /// log written whole. KEEPSTATE keeps the log, under the new configuration; otherwise the
    /// log starts empty, under a new epoch.
    fn set_rate_packed(&self, change: &RateChange<'_>, now: i64) -> Result<i64, Error>
    where
        M: Writable,
    {
        let existing = self.take_packed()?;
        match (change.condition, existing.is_some()) {
            (Some(Condition::IfAbsent), true) | (Some(Condition::IfExists), false) => return Ok(0),
            _ => {}
        }
        let config = change.config;
        let log = match existing {
            Some(old) => {
                let keep = if change.keep_state {
                    Some(
                        sliding_log::keep_state(
                            Some((old.config(), None)),
                            config.rate,
                            config.interval,
                            &old,
                            now,
                        )
                        .map_err(|never| match never {})?,
                    )
                } else {
                    None
                };
                let mut log = old;
                log.reconfigure(config, keep, rand::random());
                log
            }
            None => PackedLog::new(config, rand::random()),
        };
        self.write_packed(&log, 0);
        Ok(1)
    }
}
