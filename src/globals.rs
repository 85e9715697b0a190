//! The module's state between calls: the one rule it is kept by, and the one reset.
//!
//! # One rule: state the server's main thread owns, each room in the file that owns it
//!
//! Every command, timer, keyspace or server event, blocked-client callback, command filter,
//! configuration callback and INFO callback the server calls the module from runs on its main
//! thread, and the module starts no thread of its own. So no room of state needs a lock, and
//! each is kept in the cheapest form that lets Rust declare it without `unsafe`, by one rule:
//! - a plain number or flag (INFO's counters, the debug clock, the settings, which
//!   subscriptions were made, whether an event is the module's own, cluster mode) is a `static`
//!   atomic, read and written `Relaxed`: a plain load or store, readable from any thread (a crash
//!   report's INFO runs on the crashing one);
//! - a structure (the waiters' queues, the tickets, the config cache's table, the counting's
//!   groups and sketch) is a `thread_local!` `RefCell` with a `const` initialiser where the type
//!   allows (a `HashMap`'s random keys do not), reached on the main thread only.
//!
//! Why not the others:
//! - a `static Mutex` pays a lock, an unlock and a poison check on every use (~57 instructions
//!   on the refused path for the counting), for threads that never come;
//! - a thread-local for every flag too: in a library the server loads with `dlopen`, each access
//!   is a call to `__tls_get_addr` (about 14 instructions with the call), where an atomic load or
//!   store is one. Measured with every room a thread-local: about 22 such calls per TRYACQUIRE,
//!   +300 instructions (+1%) per call, more than the counting's lock saved;
//! - one `Globals` struct for all rooms would make this file import every layer above it, and a
//!   room borrowed while an event re-enters another room would have to be borrowed whole.
//!
//! A structure is never borrowed across a call out of its file: the server fires keyspace
//! events synchronously inside writes, and their listeners reach other rooms (and may reach the
//! same file again), so each `with` runs plain code only and hands values out.
//!
//! Unit tests run on many threads: each test thread has its own structures, and shares the
//! atomics.
//!
//! # One reset
//!
//! MODULE UNLOAD may leave the library mapped, and its statics and thread-locals with it: a
//! later load would find the last load's state. [`reset`] puts every room back to its initial value, and
//! runs first when the module loads (and when it unloads, to give the memory back at once).
//!
//! What deliberately survives it:
//! - nothing a load sets: the load options and `ratelimit.*` configurations (config cache on or
//!   off, counting on or off, the groups' rule, `debug-commands`) and whether the server is a
//!   cluster node are set again by the load right after the reset, from its arguments and the
//!   server's configuration;
//! - the listeners registered with the events owner: the first load's stand, as every load
//!   registers the same functions;
//! - the constant strings the module makes once in the server's memory (`StaticString`: field
//!   names, `KEEPTTL` ...): constants, not state, valid for the server's life;
//! - the string a configuration getter last handed to the server (`ffi::config`), freed by the
//!   next getter call.
//!
//! What is not a reset: CONFIG RESETSTAT zeroes INFO's counters of events and the counting
//! per group ([`stats::reset_stats`]), keeping the gauges; whole databases changing (FLUSHALL,
//! SWAPDB ...) forgets the tickets and the configurations kept, keeping everything else.

use crate::{blocking, clock, config_cache, events, evictions, observe, stats};

/// Puts every room of the module's state back to its initial value (a fresh load).
pub fn reset() {
    stats::reset();
    crate::packed_log::free_spare_entries();
    crate::last_decoded::forget();
    observe::reset();
    clock::unfreeze();
    events::reset();
    evictions::reset();
    config_cache::reset();
    blocking::reset();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keyspace::StateId;
    use crate::sliding_log::Entry;
    use crate::stats::Stat;
    use crate::tickets;

    #[test]
    fn one_reset_puts_every_room_back() {
        // Counters no other unit test moves (tests run in parallel threads, and the atomics are
        // shared): a decision or a served waiter on the fake would move the others.
        stats::add(Stat::EvictedKeys);
        stats::add(Stat::Timeouts);
        observe::turn(false);
        clock::freeze_at(5);
        config_cache::turn(false);
        let state = StateId {
            db: 0,
            permits_key: b"{a}:permits".to_vec(),
        };
        let entry = Entry {
            score: 1,
            permits: 1,
        };
        tickets::granted(b"t", state, entry, 7, 10, 0);
        assert_eq!(tickets::len(), 1);

        reset();

        assert_eq!(stats::get(Stat::EvictedKeys), 0);
        assert_eq!(stats::get(Stat::Timeouts), 0);
        assert!(
            observe::on(),
            "counting is on until the load says otherwise"
        );
        assert!(!clock::is_frozen());
        assert!(config_cache::on());
        assert_eq!(tickets::len(), 0);
    }
}
