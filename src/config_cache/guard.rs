//! What keeps a configuration the cache hands out from being stale: the events that forget it
//! (the listeners registered with the events owner), and what may be kept at all: not the
//! configuration of a hash with a field TTL (asked of the server, `HPTTL`, where it does not show
//! them to modules), the one check a queue of waiters makes too before it keeps one.

use std::sync::atomic::{AtomicU8, Ordering};

use redis_module::{Context, RedisValue};

use crate::events;
use crate::ffi::server;
use crate::key;
use crate::keyspace;
use crate::sliding_log::Config;

/// Keeps a configuration just read from the hash of `name` in `db`, of `fields` fields, if the
/// table admits it and `without_field_ttls` says none of the fields read has a TTL of its own
/// (the store asks [`fields_without_ttls`] through its dataset).
pub fn keep(
    ctx: &Context,
    db: i32,
    name: &[u8],
    fields: usize,
    config: Config,
    without_field_ttls: impl FnOnce() -> bool,
) {
    // Admitted before subscribing: a server whose table is out of use does not subscribe to
    // events it would then be called back for on every write (on Redis 7.0, each keep-alive's
    // expiries).
    if !(super::admits(db, name) && watch(ctx)) {
        return;
    }
    if without_field_ttls() {
        super::remember(db, name, fields, config);
    }
}

/// Whether the configuration's fields just read from the hash `name` (`present`, a bit each in
/// [`CONFIG_FIELDS`]' order) have no TTL of their own, as the server tells: asked of the hash
/// (`shown`) where the server shows field TTLs to modules, of the server (`HPTTL`) where it does
/// not. Only such a configuration may be kept, by this cache or by a queue of waiters: a field
/// with a TTL can expire with no event until the server deletes it.
pub fn fields_without_ttls(
    ctx: &Context,
    name: &[u8],
    present: u8,
    shown: impl FnOnce() -> bool,
) -> bool {
    without_field_ttls(field_ttls(ctx), shown, || {
        asked_without_field_ttls(ctx, name, present)
    })
}

/// Whether the fields just read have no TTL of their own, on a server with `ttls`: a field with
/// one can expire with no event until the server deletes it, so its configuration is not kept.
/// One without is kept until an event forgets it: from then on a TTL set on a field, and a field
/// added, is a hash event. `shown` asks the hash, where the server shows field TTLs; `asked`
/// asks the server (`HPTTL`) where it does not.
fn without_field_ttls(
    ttls: FieldTtls,
    shown: impl FnOnce() -> bool,
    asked: impl FnOnce() -> bool,
) -> bool {
    match ttls {
        FieldTtls::None => true,
        FieldTtls::Shown => !shown(),
        FieldTtls::Asked => asked(),
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

/// Whether the configuration's fields just read (`present`, a bit each in [`CONFIG_FIELDS`]'
/// order) have no TTL of their own, asked of the server (`HPTTL`) where it does not show field
/// TTLs to modules (Redis 7.4, Valkey 9).
fn asked_without_field_ttls(ctx: &Context, name: &[u8], present: u8) -> bool {
    let asked: Vec<&[u8]> = CONFIG_FIELDS
        .iter()
        .enumerate()
        .filter(|(i, _)| present & (1 << i) != 0)
        .map(|(_, field)| *field)
        .collect();
    let count = asked.len().to_string();
    let mut args: Vec<&[u8]> = vec![name, b"FIELDS", count.as_bytes()];
    args.extend(&asked);
    answers_no_ttl(ctx.call("HPTTL", args.as_slice()).ok(), asked.len())
}

/// Whether HPTTL's reply says each of the `asked` fields is there without a TTL (-1 each): a
/// field with a TTL answers its milliseconds left, and one gone (expired, perhaps not yet
/// deleted) -2.
fn answers_no_ttl(reply: Option<RedisValue>, asked: usize) -> bool {
    match reply {
        Some(RedisValue::Array(ttls)) => {
            ttls.len() == asked && ttls.iter().all(|ttl| *ttl == RedisValue::Integer(-1))
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

/// At load (see [`crate::globals::reset`]): the server may be another.
pub(super) fn forget_field_ttls() {
    FIELD_TTLS.store(0, Ordering::Relaxed);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_configuration_is_kept_only_where_the_server_says_its_fields_have_no_ttl() {
        let never = || -> bool { panic!("not asked on this server") };
        assert!(without_field_ttls(FieldTtls::None, never, never));
        assert!(without_field_ttls(FieldTtls::Shown, || false, never));
        assert!(!without_field_ttls(FieldTtls::Shown, || true, never));
        assert!(without_field_ttls(FieldTtls::Asked, never, || true));
        assert!(!without_field_ttls(FieldTtls::Asked, never, || false));
    }

    #[test]
    fn hpttl_answers_no_ttl_only_with_minus_one_for_each_field_asked() {
        let reply = |ttls: &[i64]| {
            Some(RedisValue::Array(
                ttls.iter().map(|ttl| RedisValue::Integer(*ttl)).collect(),
            ))
        };
        assert!(answers_no_ttl(reply(&[-1, -1, -1]), 3));
        assert!(!answers_no_ttl(reply(&[-1, 5000, -1]), 3), "a TTL");
        assert!(!answers_no_ttl(reply(&[-1, -2, -1]), 3), "a field gone");
        assert!(!answers_no_ttl(reply(&[-1, -1]), 3), "a field missing");
        assert!(!answers_no_ttl(None, 3), "an error");
        assert!(!answers_no_ttl(Some(RedisValue::Integer(-1)), 1));
    }

    #[test]
    fn only_a_ttl_change_keeps_a_configuration() {
        assert!(keeps_config(b"expire") && keeps_config(b"persist"));
        assert!(!keeps_config(b"hset") && !keeps_config(b"del") && !keeps_config(b"expired"));
        // A field's TTL is part of what a check found.
        assert!(!keeps_config(b"hexpire") && !keeps_config(b"hpersist"));
    }
}
