//! The config cache: the configurations of limiters read recently, so a call on a busy limiter
//! does not decode its hash again (docs/operations.md, "Config cache"; what it saves is in
//! docs/performance.md).
//!
//! An entry may only be used while nothing can have changed its hash since it was read, so it is
//! forgotten on every way a hash changes ([`guard`]): the cache subscribes, through the events
//! owner, to the keyspace events of hashes and of keys as a whole before it keeps the first
//! entry, and each event naming a hash forgets it (the module's own writes fire the same events);
//! FLUSHALL, FLUSHDB, SWAPDB, loading a dataset and a slot trim forget everything. A use also
//! checks that the hash still has the number of fields it had. A TTL change (`expire`,
//! `persist`) is the one event that keeps an entry: the configuration does not include the TTL,
//! and a keep-alive limiter refreshes its TTL on every call. A hash whose fields have TTLs of
//! their own is not kept: where the server does not show them to modules, it is asked when a
//! configuration would be kept.
//!
//! An entry also keeps the limiter's key names as server strings (the hash and the OVERALL
//! state's value and permits), made at its first use, so a later call on a known limiter makes
//! none: it takes another reference to each.
//!
//! In use only while calls come back to the same limiters: a lookup samples which limiter each
//! slot saw last ([`spread`]), and unless nearly all samples find their own, nothing is looked
//! up or kept. Calls spread over thousands of limiters or more (a limiter per user) then pay a
//! counter, not the table's memory. The table itself is [`table::Table`]; the module holds one
//! instance, a main-thread thread-local (see [`crate::globals`]).

#![forbid(unsafe_code)]

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, Ordering};

use redis_module::Context;

mod guard;
mod spread;
mod table;

pub use guard::{dataset_changed, fields_without_ttls, keep, key_event, key_removed};
pub use table::Known;
use table::Table;

thread_local! {
    /// The module's one table (a structure: see [`crate::globals`]).
    static TABLE: RefCell<Table> = const { RefCell::new(Table::new()) };
}

/// Whether configurations are kept at all (`ratelimit.config-cache`).
static ON: AtomicBool = AtomicBool::new(true);

/// Runs `f` on the table. Nothing `f` does fires an event or calls back into this module, so
/// the table is never borrowed twice; entries it hands back are dropped after the borrow.
fn table<T>(f: impl FnOnce(&mut Table) -> T) -> T {
    TABLE.with(|table| f(&mut table.borrow_mut()))
}

pub fn on() -> bool {
    ON.load(Ordering::Relaxed)
}

/// Turns the config cache on or off: off forgets every configuration kept, so none can go stale
/// while nothing watches for changes.
pub fn turn(on: bool) {
    ON.store(on, Ordering::Relaxed);
    if !on {
        forget_all();
    }
}

/// At the module's load (see [`crate::globals::reset`]): on, nothing kept, in use until calls
/// show otherwise, and the server's field TTLs to be asked again.
pub(crate) fn reset() {
    ON.store(true, Ordering::Relaxed);
    let kept = TABLE.with(|table| table.replace(Table::new()));
    drop(kept);
    guard::forget_field_ttls();
}

/// What is kept for `name` in `db`, while the cache is on and in use; its strings are
/// references owned by `ctx`'s command.
pub fn lookup(ctx: &Context, db: i32, name: &[u8]) -> Option<Known> {
    if !on() {
        return None;
    }
    table(|t| t.lookup(ctx, db, name))
}

/// Whether a configuration just read for `name` in `db` should be kept (see [`Table::admits`]).
fn admits(db: i32, name: &[u8]) -> bool {
    on() && table(|t| t.admits(db, name))
}

/// Keeps a configuration read from a hash of `fields` fields (see [`Table::remember`]).
fn remember(db: i32, name: &[u8], fields: usize, config: crate::sliding_log::Config) {
    let replaced = table(|t| t.remember(db, name, fields, config));
    // The entry replaced is freed outside the borrow.
    drop(replaced);
}

/// Forgets what is kept for `name` in `db`: its hash changed or is gone.
fn forget(db: i32, name: &[u8]) {
    let forgotten = table(|t| t.forget(db, name));
    drop(forgotten);
}

/// Forgets every configuration kept: a whole database changed at once.
pub fn forget_all() {
    table(Table::forget_all);
}

/// Holds the table in use whatever the calls' spread, or lets the spread decide again from a new
/// window (`RATELIMIT.DEBUG CONFIGCACHE ALWAYS|AUTO`): for tests of what is kept, which call on
/// many limiters in a row.
pub fn hold_in_use(held: bool) {
    table(|t| t.hold_in_use(held));
}

/// Whether the config cache is in use now (INFO ratelimit): on, and calls come back to few
/// enough limiters (see [`spread`]).
pub fn in_use() -> bool {
    on() && table(|t| t.in_use())
}

/// How many configurations are kept now (INFO ratelimit). O(slots): for INFO, not a command.
pub fn kept() -> usize {
    table(|t| t.kept())
}
