//! The one key of a GCRA limiter: a string holding its theoretical arrival time (TAT), as
//! `CL.THROTTLE` and `GCRA` read and write it. Kept apart from the sliding log's `store`: the
//! two share nothing but [`Key`], through which every write is applied, replicated and notified.

use redis_module::Context;

use crate::error::Error;
use crate::gcra::TatWrite;
use crate::key::{Effect, Key, KeyType, Write};
use crate::packed_log::PackedLog;

pub struct TatKey<'c> {
    key: Key<'c, Write>,
}

impl<'c> TatKey<'c> {
    pub fn open(ctx: &'c Context, name: &[u8]) -> Self {
        TatKey {
            key: Key::open(ctx, name),
        }
    }

    /// The stored TAT, read by `parse`; None when there is no key, or its expiry has passed on
    /// the module's clock. A key of another type is `WRONGTYPE`, and so is a ONEKEY sliding-log
    /// limiter's string: its bytes are no TAT, and `parse` would call them corrupt.
    ///
    /// `frozen_at` is the module's clock when it is not the server's (the debug clock): then it
    /// decides a key's expiry as the server's clock decides a lookup (a key counts while now is
    /// at or before its expiry). On the server's clock the lookup has decided already, and the
    /// expiry is not read again.
    pub fn read<T>(
        &self,
        frozen_at: Option<i64>,
        parse: impl FnOnce(&[u8]) -> Result<T, Error>,
    ) -> Result<Option<T>, Error> {
        match self.key.key_type() {
            KeyType::Empty => return Ok(None),
            KeyType::String => {}
            _ => return Err(Error::WrongType),
        }
        if let Some(now_ms) = frozen_at {
            if self.key.expires_at().is_some_and(|at| at < now_ms) {
                return Ok(None);
            }
        }
        self.key
            .read_string(|bytes| {
                if PackedLog::is_packed(bytes) {
                    Err(Error::WrongType)
                } else {
                    parse(bytes)
                }
            })
            .unwrap_or(Err(Error::WrongType))
            .map(Some)
    }

    /// Makes the call's write: the new TAT as `SET key tat PXAT ms`, or the key's removal.
    pub fn write(&self, write: TatWrite) {
        match write {
            TatWrite::Nothing => {}
            TatWrite::Store { tat, expires_at } => {
                self.key.apply(Effect::SetExpiringAt {
                    value: tat,
                    at: expires_at,
                });
            }
            TatWrite::Delete => {
                self.key.apply(Effect::Unlink);
            }
        }
    }
}
