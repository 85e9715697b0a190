//! A ONEKEY limiter's key: reading its state once per request, and writing it back whole, with
//! its TTL, as one `SET`.

use super::dataset::{Dataset, OpenKey};
use super::LimiterKeys;
use crate::args;
use crate::error::Error;
use crate::key::{Effect, KeyType, OpenMode, Writable};
use crate::last_decoded;
use crate::packed_log::{FormatError, PackedLog};
use crate::sliding_log::Config;

impl<M: OpenMode, D: Dataset> LimiterKeys<'_, M, D> {
    /// The ONEKEY limiter's state if the key holds one, decoded on first use and taken: the
    /// state a request resolves owns it (a later call decodes the key again). None if the key
    /// holds no string. A string that is not one is an error naming the key: never read as an
    /// empty limiter, never overwritten.
    pub(super) fn take_packed(&self) -> Result<Option<PackedLog>, Error> {
        if let Some(log) = self.packed.take() {
            return Ok(Some(log));
        }
        if self.hash.key_type() != KeyType::String {
            return Ok(None);
        }
        let decoded = self
            .hash
            .read_string(last_decoded::decode)
            .unwrap_or(Err(FormatError::Foreign));
        match decoded {
            Ok(log) => Ok(Some(log)),
            Err(FormatError::Foreign) => Err(Error::NotALimiter {
                key: self.hash.name().to_vec(),
            }),
            Err(e) => Err(Error::corrupt(self.hash.name(), e.to_string())),
        }
    }

    /// The ONEKEY limiter's configuration if the key holds one (its state is kept decoded for
    /// the request).
    pub(super) fn packed_config(&self) -> Result<Option<Config>, Error> {
        let log = self.take_packed()?;
        let config = log.as_ref().map(|log| *log.config());
        self.packed.set(log);
        Ok(config)
    }

    /// Writes a ONEKEY limiter's state back with the keep-alive rule of the three-key form: with
    /// a keep-alive, `SET key state PXAT` (now + keep-alive + `waiting`, the time a blocked
    /// client waits for its turn); without one, `SET key state KEEPTTL`.
    ///
    /// Its caller writes only a call that changed something: a refusal with nothing to prune
    /// writes nothing, not even the keep-alive the three-key form refreshes. A refusal means a
    /// permit still in the window, logged by a write whose keep-alive (at least the interval)
    /// outlives it, and the waiter's turn comes when such a permit frees. The key therefore never
    /// expires while its log still counts, and a hot limiter's refusals stay reads.
    pub(super) fn write_packed(&self, log: &PackedLog, waiting: i64)
    where
        M: Writable,
    {
        let keep_alive = log.config().keep_alive;
        let at = (keep_alive > 0).then(|| {
            let ttl = keep_alive
                .saturating_add(waiting.max(0))
                .min(args::MAX_DURATION_MS);
            self.expiry_in(ttl)
        });
        log.with_encoded(|value| self.hash.apply(Effect::SetPacked { value, at }));
    }
}
