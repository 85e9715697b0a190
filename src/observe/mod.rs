//! Who is being limited: counters per rule (group) and the most-refused names, fed by
//! `stats::decided` (the one place a decision is counted) while `ratelimit.stats` is yes.
//! Kept in this server's memory only: nothing here is replicated or written to the keyspace.

pub use ratelimit_core::observe::{groups, refused};

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

use groups::{Counts, Groups, Rule};
use refused::Refused;

/// The rule, the groups and the sketch.
struct State {
    rule: Rule,
    groups: Groups,
    refused: Refused,
}

impl Default for State {
    fn default() -> Self {
        State {
            rule: Rule::default(),
            groups: Groups::default(),
            refused: Refused::with_seed(rand::random()),
        }
    }
}

thread_local! {
    /// The counting's structure (see [`crate::globals`]), made at first use: its sketch's seed
    /// is random.
    static STATE: RefCell<Option<State>> = const { RefCell::new(None) };
}

/// `ratelimit.stats`.
static ON: AtomicBool = AtomicBool::new(true);

/// Runs `f` on the state. Nothing `f` does calls back into this module, so the state is never
/// borrowed twice.
fn with<T>(f: impl FnOnce(&mut State) -> T) -> T {
    STATE.with(|state| f(state.borrow_mut().get_or_insert_with(State::default)))
}

/// Whether decisions are counted per group and in the sketch (`ratelimit.stats`).
pub fn on() -> bool {
    ON.load(Relaxed)
}

/// Turns the counting on or off; what was counted stays until a reset.
pub fn turn(on: bool) {
    ON.store(on, Relaxed);
}

/// Counts a grant on limiter `name` leaving `remaining` of `limit`, while counting is on.
pub fn granted(name: &[u8], limit: i64, remaining: i64) {
    if on() {
        count_grant(name, limit, remaining);
    }
}

/// Counts a refusal on limiter `name`, in its group and in the sketch's window of `now_ms`,
/// while counting is on.
pub fn refused(name: &[u8], now_ms: impl FnOnce() -> i64) {
    if on() {
        count_refusal(name, now_ms());
    }
}

// The counting itself, kept out of line: a call costs nothing measurable when counting is on,
// and `make bench-stats` finds the feature's whole cost under these two names.

#[inline(never)]
fn count_grant(name: &[u8], limit: i64, remaining: i64) {
    with(|state| {
        let near = groups::near_limit(limit, remaining);
        state.groups.count_name(&state.rule, name, true, near);
    });
}

#[inline(never)]
fn count_refusal(name: &[u8], now_ms: i64) {
    with(|state| {
        state.groups.count_name(&state.rule, name, false, false);
        state.refused.add(name, now_ms);
    });
}

/// Zeroes the groups and the sketch (CONFIG RESETSTAT), keeping the rule.
pub fn reset_counts() {
    with(|state| {
        state.groups = Groups::default();
        state.refused = Refused::with_seed(rand::random());
    });
}

/// Forgets everything, the rule included, and counts again (a fresh load; see
/// [`crate::globals::reset`]): the load sets the rule and the setting again.
pub(crate) fn reset() {
    ON.store(true, Relaxed);
    let state = STATE.with(|state| state.replace(None));
    drop(state);
}

pub fn separator() -> Vec<u8> {
    with(|state| state.rule.separator.clone())
}

pub fn depth() -> usize {
    with(|state| state.rule.depth)
}

/// The longest separator taken.
pub const MAX_SEPARATOR: usize = 8;
/// The deepest group taken.
pub const MAX_DEPTH: i64 = 16;

/// Checks a separator: 1 to [`MAX_SEPARATOR`] bytes.
pub fn valid_separator(separator: &[u8]) -> Result<(), String> {
    if separator.is_empty() || separator.len() > MAX_SEPARATOR || separator.contains(&0) {
        return Err(format!(
            "group-separator must be 1 to {MAX_SEPARATOR} bytes, none of them NUL"
        ));
    }
    Ok(())
}

/// Sets the separator; the groups counted under the old rule are dropped.
pub fn set_separator(separator: &[u8]) -> Result<(), String> {
    valid_separator(separator)?;
    with(|state| {
        if state.rule.separator != separator {
            state.rule.separator = separator.to_vec();
            state.groups = Groups::default();
        }
    });
    Ok(())
}

/// Sets the depth (1 to [`MAX_DEPTH`]); the groups counted under the old rule are dropped.
pub fn set_depth(depth: i64) -> Result<(), String> {
    let depth = usize::try_from(depth)
        .ok()
        .filter(|d| (1..=MAX_DEPTH as usize).contains(d))
        .ok_or_else(|| format!("group-depth must be 1 to {MAX_DEPTH}"))?;
    with(|state| {
        if state.rule.depth != depth {
            state.rule.depth = depth;
            state.groups = Groups::default();
        }
    });
    Ok(())
}

/// What the groups counted: each named group, the overflow group's counts and how many
/// distinct groups went there (an estimate).
pub struct Snapshot {
    pub named: Vec<(Vec<u8>, Counts)>,
    pub overflow: Counts,
    pub overflow_groups: u64,
}

pub fn snapshot() -> Snapshot {
    with(|state| {
        let (overflow, overflow_groups) = state.groups.overflow();
        Snapshot {
            named: state
                .groups
                .named()
                .map(|(name, counts)| (name.to_vec(), counts))
                .collect(),
            overflow,
            overflow_groups,
        }
    })
}

/// The `count` names refused most over the last one to two windows, and the refusals counted.
pub fn top_refused(count: usize, now_ms: i64) -> (Vec<(Vec<u8>, u64)>, u64) {
    with(|state| state.refused.top(count, now_ms))
}

/// A group's name as an INFO field name: bytes other than letters, digits, `_`, `-` and `.`
/// as `%XX`, so that no name can break the `field:value` line (`api:user` is `api%3Auser`).
pub fn info_name(name: &[u8]) -> String {
    let mut out = String::with_capacity(name.len());
    for &b in name {
        if b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn info_names_are_safe() {
        assert_eq!(info_name(b"api:user"), "api%3Auser");
        assert_eq!(info_name(b"a b,c=d\r\n"), "a%20b%2Cc%3Dd%0D%0A");
        assert_eq!(info_name(b"ok_name-1.2"), "ok_name-1.2");
        assert_eq!(info_name(b"\xff"), "%FF");
    }

    #[test]
    fn rule_options_are_checked() {
        assert!(valid_separator(b"").is_err());
        assert!(valid_separator(b"123456789").is_err());
        assert!(valid_separator(b"::").is_ok());
    }
}
