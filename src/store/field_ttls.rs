//! Whether the server has hash-field TTLs (HEXPIRE), and how a module learns of them:
//! asked once per load.

use std::sync::atomic::{AtomicU8, Ordering};

use redis_module::{Context, RedisValue};

use crate::key;
use crate::keyspace;

/// The fields of a limiter's configuration, as `HPTTL` takes them.
pub(super) const CONFIG_FIELDS: [&[u8]; 5] = [
    keyspace::FIELD_RATE.to_bytes(),
    keyspace::FIELD_INTERVAL.to_bytes(),
    keyspace::FIELD_TYPE.to_bytes(),
    keyspace::FIELD_KEEP_ALIVE.to_bytes(),
    keyspace::FIELD_PRECISION.to_bytes(),
];

/// How the module learns whether a hash field has a TTL of its own (HEXPIRE).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum FieldTtls {
    /// The server has no field TTLs.
    None,
    /// The server shows them to modules (Redis 8's HashFieldMinExpire).
    Shown,
    /// The server has them but does not show them (Redis 7.4, Valkey 9): `HPTTL` tells.
    Asked,
}

/// Asked once per load: the answer is the server's.
pub(super) fn field_ttls(ctx: &Context) -> FieldTtls {
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
pub(super) static FIELD_TTLS: AtomicU8 = AtomicU8::new(0);

/// At load: the server may be another.
pub(super) fn forget() {
    FIELD_TTLS.store(0, Ordering::Relaxed);
}
