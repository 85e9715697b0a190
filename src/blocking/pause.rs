//! The pause rule: a queue is served only while the server may write.
//!
//! The server may pause writes (CLIENT PAUSE WRITE|ALL, FAILOVER, CLUSTER FAILOVER, SHUTDOWN
//! waiting for replicas) while timers keep firing; a write then would abort the server. So
//! during a pause a queue's timer retries every [`PAUSED_RETRY_MS`], and a server that has
//! become a replica fails its waiters instead.

use super::{take, Host, Served};
use crate::queue::{self, QueueId};

/// How often a queue whose time has come checks whether a write pause has ended.
const PAUSED_RETRY_MS: i64 = 10;

/// The error a waiter gets when its server is no longer a master.
const READONLY: &str = "READONLY You can't write against a read only replica.";

/// Whether `queue` may be served now. If not, it has been dealt with: on a replica its waiters
/// are failed (only a master writes), during a write pause it is tried again in
/// [`PAUSED_RETRY_MS`].
pub(super) fn may_serve<H: Host>(host: &H, queue: QueueId) -> bool {
    if host.is_replica() {
        while let Some(removed) = queue::head(queue).and_then(|head| take(host, head.waiter)) {
            host.unblock(removed.bc, Served::Failed(READONLY.into()));
        }
        return false;
    }
    if host.writes_paused() {
        // Whatever is due is served once the pause ends.
        if let Some(previous) = queue::set_wake(queue, host.wake_in(PAUSED_RETRY_MS, queue)) {
            host.stop_timer(previous);
        }
        return false;
    }
    true
}
