//! A ONEKEY limiter's key: reading its state once per request, and writing it back whole, with
//! its TTL, as one `SET`.

use super::ttl::expiry_in;
use super::LimiterKeys;
use crate::args;
use crate::error::Error;
use crate::key::{Effect, KeyType, OpenMode, Writable};
use crate::packed_log::{FormatError, PackedLog};

impl<M: OpenMode> LimiterKeys<'_, M> {
    /// The ONEKEY limiter's state if the key holds one (decoded on first use, then kept for the
    /// request); None if the key holds no string. A string that is not one is an error naming
    /// the key: never read as an empty limiter, never overwritten.
    pub(super) fn packed(&self) -> Result<Option<&PackedLog>, Error> {
        if let Some(log) = self.packed.get() {
            return Ok(Some(log));
        }
        if self.hash.key_type() != KeyType::String {
            return Ok(None);
        }
        let decoded = self
            .hash
            .read_string(PackedLog::decode)
            .unwrap_or(Err(FormatError::Foreign));
        match decoded {
            Ok(log) => Ok(Some(self.packed.get_or_init(|| log))),
            Err(FormatError::Foreign) => Err(Error::NotALimiter {
                key: self.hash.name().to_vec(),
            }),
            Err(e) => Err(Error::corrupt(self.hash.name(), e.to_string())),
        }
    }

    /// Writes a ONEKEY limiter's state back with the TTL rule of the three-key form: with a
    /// keep-alive, `SET key state PXAT` (now + keep-alive + `waiting`, the time a blocked client
    /// waits for its turn); without one, `SET key state KEEPTTL`. A state that did not change
    /// (`changed` false) is not written again: only a keep-alive is refreshed (`PEXPIREAT`).
    pub(super) fn write_packed(&self, log: &PackedLog, changed: bool, waiting: i64)
    where
        M: Writable,
    {
        let keep_alive = log.config().keep_alive;
        if keep_alive > 0 {
            let ttl = keep_alive
                .saturating_add(waiting.max(0))
                .min(args::MAX_DURATION_MS);
            let at = expiry_in(ttl);
            if changed {
                self.hash.apply(Effect::SetPacked {
                    value: &log.encode(),
                    at: Some(at),
                });
            } else {
                self.hash.apply(Effect::PExpireAt(at));
            }
        } else if changed {
            self.hash.apply(Effect::SetPacked {
                value: &log.encode(),
                at: None,
            });
        }
    }
}
