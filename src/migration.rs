//! Live resharding: a limiter whose keys a slot migration has split between two nodes.
//!
//! A cluster moves a slot one key at a time (MIGRATE). Meanwhile a limiter can have its hash on
//! one node and its value or permits on the other. Commands declare only the hash, so the server
//! routes them by it and cannot see the split: the node serving the hash would find no state,
//! take the limiter for a fresh one and grant its whole rate again. For a multi-key command the
//! server answers `-TRYAGAIN` instead; [`refuse_split`] gives the module the same answer.
//!
//! The module API says nothing about a slot being MIGRATING or IMPORTING, but `RM_Call` runs the
//! server's own routing check (`getNodeByQuery`, with the caller's ASKING and READONLY flags) on
//! the command it is asked to run, and fails when the keys are not all served here. So a key
//! missing locally is checked by calling `EXISTS` over the missing keys. That costs one
//! `RM_Call` (a pooled client, a command lookup, a few dictionary lookups) and is paid only in
//! cluster mode and only when a key the command opens is missing; a limiter with all its keys
//! never pays it.
//!
//! Why only the missing keys, plus a probe key: the outcome of the routing check does not depend
//! on which of the keys exist, only on whether some are missing (a MIGRATING node refuses any
//! request missing a key: TRYAGAIN if it has others, ASK if none) and whether there are several
//! distinct keys (an IMPORTING node, under ASKING, refuses several keys of which some are
//! missing). A probe key of the same slot, distinct from the missing ones, keeps "several" true.
//! And `EXISTS` on a key deletes it if it has expired: outside a command (a module timer) the
//! server's clock can tick between the module opening a key and the call, so a key the module
//! holds open must never be passed to it. Missing keys stay missing, and the probe is never held.

use redis_module::{CallOptionsBuilder, CallReply, CallResult, Context, ContextFlags, RedisString};

use crate::error::Error;
use crate::key::{Key, OpenMode};
use crate::keyspace::{self, StateKeys};

/// Appended to a derived key name to make the probe. A NUL makes a clash with a real key name
/// unlikely; a clash would only make the probe exist, which changes nothing.
const PROBE_SUFFIX: &[u8] = b"\0slot-probe";

/// Tries of a numbered probe, for a name whose derived keys share its slot without a hash tag
/// (a CRC16 coincidence): about one in 16384 numbers hits the slot.
const PROBE_ATTEMPTS: u32 = 1 << 20;

/// Refuses with TRYAGAIN, before anything is written, when some of `keys` (open keys of limiter
/// `name`, all in its slot) are missing because a slot migration has moved them, or the slot is
/// not served here for a caller without a client (a timer). Free when every key exists or
/// outside cluster mode.
pub fn refuse_split<M: OpenMode>(
    ctx: &Context,
    name: &[u8],
    keys: &[&Key<'_, M>],
) -> Result<(), Error> {
    let missing: Vec<&RedisString> = keys
        .iter()
        .filter(|key| !key.exists())
        .map(|key| key.name_string())
        .collect();
    if missing.is_empty() || !ctx.get_flags().contains(ContextFlags::CLUSTER) {
        return Ok(());
    }
    let Some(probe) = probe(name) else {
        return Err(Error::SlotMigrating);
    };
    let probe = RedisString::create_from_slice(ctx.ctx, &probe);
    let mut args = missing;
    args.push(&probe);
    // "E": a refused call comes back as an error reply instead of NULL with errno (7.0+).
    let options = CallOptionsBuilder::new().errors_as_replies().build();
    let reply: CallResult = ctx.call_ext("EXISTS", &options, args.as_slice());
    match reply {
        Ok(CallReply::I64(_)) => Ok(()),
        _ => Err(Error::SlotMigrating),
    }
}

/// A key name in `name`'s slot that is none of the limiter's own keys.
fn probe(name: &[u8]) -> Option<Vec<u8>> {
    let slot = keyspace::hash_slot(name);
    let mut probe = StateKeys::overall(name).value.to_vec();
    probe.extend_from_slice(PROBE_SUFFIX);
    if keyspace::hash_slot(&probe) == slot {
        return Some(probe);
    }
    // No hash tag: the whole name is hashed, so search for a numbered probe that lands in it.
    let base = probe.len();
    (0..PROBE_ATTEMPTS).find_map(|n| {
        probe.truncate(base);
        probe.extend_from_slice(n.to_string().as_bytes());
        (keyspace::hash_slot(&probe) == slot).then(|| probe.clone())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_probe_shares_the_slot_and_is_no_key_of_the_limiter() {
        for name in [&b"lim"[..], b"{tag}x", b"a{b}c", b"\xff\x00", b"x:value"] {
            let probe = probe(name).expect("a probe");
            assert_eq!(keyspace::hash_slot(&probe), keyspace::hash_slot(name));
            let overall = StateKeys::overall(name);
            assert_ne!(probe, name);
            assert_ne!(probe[..], overall.value[..]);
            assert_ne!(probe[..], overall.permits[..]);
        }
    }

    #[test]
    fn an_untagged_name_gets_a_numbered_probe_in_its_slot() {
        // `a{b` has no complete tag: its derived keys hash whole, like the probe.
        let probe = probe(b"a{b").expect("a probe");
        assert_eq!(keyspace::hash_slot(&probe), keyspace::hash_slot(b"a{b"));
    }
}
