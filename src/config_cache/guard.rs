//! What keeps a configuration the cache hands out from being stale: the events that forget it
//! (the listeners registered with the events owner), the check of hash-field TTLs (`HPTTL`, once
//! per entry where the server does not show them to modules), and the rules the store follows
//! to use and keep configurations.

use std::sync::atomic::{AtomicU8, Ordering};

use redis_module::{Context, RedisValue};

use super::table::Check;
use super::Known;
use crate::events;
use crate::ffi::server;
use crate::key;
use crate::keyspace;
use crate::sliding_log::Config;

/// The configuration kept for the limiter `name` in `db`, `known` for a hash that still has the
/// field count it had, if this call may use it: yes once its check, if any, has passed (made
/// here when due); otherwise `None`, and the caller reads the hash instead and keeps nothing
/// new (a pending entry is not kept anew, nor one whose check just failed: it would only be
/// checked again).
#[inline]
pub fn use_kept(ctx: &Context, db: i32, name: &[u8], known: &Known) -> Option<Config> {
    match known.check {
        Check::Done => Some(known.config),
        check if !check.pending_and_due() => {
            super::table().used_unchecked(db, name);
            None
        }
        Check::Pending { present, .. } if fields_still(ctx, name, present) => {
            super::table().passed_check(db, name);
            Some(known.config)
        }
        Check::Pending { .. } => {
            super::forget(db, name);
            None
        }
    }
}

/// Keeps a configuration just read from the hash of `name` in `db`, of `fields` fields, with
/// the configuration's fields found (`present`, a bit each in [`CONFIG_FIELDS`]' order), if the
/// table admits it. `has_field_ttls` asks the hash, where the server shows field TTLs.
pub fn keep(
    ctx: &Context,
    db: i32,
    name: &[u8],
    fields: usize,
    config: Config,
    present: u8,
    has_field_ttls: impl FnOnce() -> bool,
) {
    // Admitted before subscribing: a server whose table is out of use does not subscribe to
    // events it would then be called back for on every write (on Redis 7.0, each keep-alive's
    // expiries).
    if !(super::admits(name) && watch(ctx)) {
        return;
    }
    // A field with a TTL of its own can expire with no event until the server deletes it.
    let check = match field_ttls(ctx) {
        FieldTtls::None => Some(Check::Done),
        FieldTtls::Shown => (!has_field_ttls()).then_some(Check::Done),
        FieldTtls::Asked => Some(Check::Pending { present, uses: 0 }),
    };
    if let Some(check) = check {
        super::remember(db, name, fields, config, check);
    }
}

/// Subscribes, once per load, to the events that forget a cached configuration: before the first
/// configuration is kept, so a server whose table is out of use before then pays nothing for
/// them. False if configurations are not kept (`config-cache no`) or the server refused.
fn watch(ctx: &Context) -> bool {
    super::on() && events::watch_for_config_cache(ctx)
}

/// A key changed (an [`events::KeyListener`]): the configuration kept for it, if it is a
/// limiter's hash, is no longer known. The module's own writes count too (SETRATE's among
/// them), unlike for the waiters: see [`crate::key::is_own_event`].
pub fn key_event(ctx: &Context, event: &[u8], key: &[u8]) {
    if !keeps_config(event) {
        super::forget(server::selected_db(ctx), key);
    }
}

/// A key left (an [`events::RemovalListener`]): its configuration is no longer known.
pub fn key_removed(_ctx: &Context, db: i32, key: &[u8]) {
    super::forget(db, key);
}

/// Whole databases changed (an [`events::DatasetListener`]): every configuration kept may be
/// of a hash that is gone or replaced.
pub fn dataset_changed(_ctx: &Context) {
    super::forget_all();
}

/// Whether a keyspace event leaves a hash's configuration as it was: only a TTL change does.
fn keeps_config(event: &[u8]) -> bool {
    matches!(event, b"expire" | b"persist")
}

/// The fields of a limiter's configuration, as `HPTTL` takes them.
pub const CONFIG_FIELDS: [&[u8]; 5] = [
    keyspace::FIELD_RATE.to_bytes(),
    keyspace::FIELD_INTERVAL.to_bytes(),
    keyspace::FIELD_TYPE.to_bytes(),
    keyspace::FIELD_KEEP_ALIVE.to_bytes(),
    keyspace::FIELD_PRECISION.to_bytes(),
];

/// Whether the configuration's fields found when it was kept (`present`, a bit each in
/// [`CONFIG_FIELDS`]' order) are all still there without a TTL of their own, asked of the
/// server (`HPTTL`) where it does not show field TTLs to modules (Redis 7.4, Valkey 9). A field
/// that had a TTL when it was read may have expired since, with no event until the server
/// deletes it: HPTTL then answers -2. From the check on, a TTL set on a field, and a field
/// added, is a hash event, which forgets the configuration.
fn fields_still(ctx: &Context, name: &[u8], present: u8) -> bool {
    let found: Vec<&[u8]> = CONFIG_FIELDS
        .iter()
        .enumerate()
        .filter(|(i, _)| present & (1 << i) != 0)
        .map(|(_, field)| *field)
        .collect();
    let count = found.len().to_string();
    let mut args: Vec<&[u8]> = vec![name, b"FIELDS", count.as_bytes()];
    args.extend(&found);
    match ctx.call("HPTTL", args.as_slice()) {
        Ok(RedisValue::Array(ttls)) => {
            ttls.len() == found.len() && ttls.iter().all(|ttl| *ttl == RedisValue::Integer(-1))
        }
        _ => false,
    }
}

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

/// At load: the server may be another.
pub(super) fn forget_field_ttls() {
    FIELD_TTLS.store(0, Ordering::Relaxed);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_ttl_change_keeps_a_configuration() {
        assert!(keeps_config(b"expire") && keeps_config(b"persist"));
        assert!(!keeps_config(b"hset") && !keeps_config(b"del") && !keeps_config(b"expired"));
        // A field's TTL is part of what a check found.
        assert!(!keeps_config(b"hexpire") && !keeps_config(b"hpersist"));
    }
}
