//! A ticket's waits: where its grant is remembered, and which waiters carry it now.

use crate::keyspace::{KeyName, StateId, StateKeys};
use crate::queue::{self, WaiterId};
use crate::sliding_log::Mode;
use crate::store::Verdict;
use crate::tickets;

/// Remembers where a ticketed ACQUIRE's grant was logged, for a resend and for CANCEL.
pub fn remember_grant(ticket: &[u8], state: &StateId, verdict: &Verdict, now: i64) {
    if let Some(logged) = verdict.logged {
        tickets::granted(
            ticket,
            state.clone(),
            logged.entry,
            logged.member,
            logged.frees_at,
            now,
        );
    }
}

/// The waiters carrying `ticket` whose wait is on `state` of limiter `name` now, its mode being
/// `mode`: a queue keeps the state it was made on, which a SETRATE changing the mode (OVERALL or
/// PER_CLIENT) leaves behind; its waiters are granted on the state their CLIENT gives now. Each
/// waiter's state is named from its CLIENT and the mode, without opening a key: one on `state`
/// has `state`'s keys, already opened and checked by the caller.
pub(super) fn waiters_with_ticket(
    mode: Mode,
    name: &[u8],
    ticket: &[u8],
    state: &StateId,
) -> Vec<WaiterId> {
    queue::with_ticket(ticket)
        .into_iter()
        .filter(|(_, db, request)| {
            *db == state.db
                && request.name == name
                && permits_key_of(name, mode, request.client.as_deref())
                    .is_some_and(|permits_key| *permits_key == *state.permits_key)
        })
        .map(|(waiter, ..)| waiter)
        .collect()
}

/// The permits key of the state a request of `client` on limiter `name` acts on under `mode`;
/// None for PER_CLIENT without a client (such a request fails).
fn permits_key_of(name: &[u8], mode: Mode, client: Option<&[u8]>) -> Option<KeyName> {
    match (mode, client) {
        (Mode::Overall, _) => Some(StateKeys::overall(name).permits),
        (Mode::PerClient, Some(client)) => Some(StateKeys::client(name, client).permits),
        (Mode::PerClient, None) => None,
        // Its one key stands for its permits (see `Resolved::id`).
        (Mode::OneKey, _) => Some(KeyName::Heap(name.to_vec())),
    }
}
