//! On a store several nodes share, one node at a time does the work: it runs the turns and
//! sends (it holds the `work` lease); every node receives. An event a node records while
//! another does the work stays open in the inbox, and the working node picks it up within
//! [`LOOK_EVERY`]. A node that takes the work over first recovers what the last one left,
//! as a single node does after a crash: rows caught mid-send, approvals left waiting,
//! background processes, the events left open. A node that loses the lease (a pause, a
//! partition) stops at once (exit status 75) rather than run a turn or send beside the
//! node that took over; its service manager starts it again as a receiver.
//!
//! Conversations are not spread over the nodes yet: one node runs them all
//! (docs/scaling.md).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::parts::WayOut;
use crate::cluster::Cluster;
use crate::router::Router;
use crate::store::{InboxRow, Store};

/// How often the working node looks for events other nodes recorded, besides when the
/// store tells it one was (`Store::watch_inbox`), and how often it checks its lease.
const LOOK_EVERY: Duration = Duration::from_millis(100);

/// The lease of the node that does the work.
pub(super) const WORK: &str = "work";

/// The exit status of a node that lost the work lease (EX_TEMPFAIL).
const LOST_THE_WORK: i32 = 75;

/// The open inbox rows this node has handed to its router, so none is handed twice (the
/// sink hands the events it records; [`work`] those other nodes recorded). Each is kept
/// with the number of the look during which it was handed over: a look forgets only rows
/// handed over before it began and missing from what it read, since a row handed over
/// while it read may have committed after its read (it would be handed over again).
#[derive(Default)]
pub(super) struct Dispatched(Mutex<Handed>);

#[derive(Default)]
struct Handed {
    /// The number of the latest look.
    look: u64,
    /// Row → the look it was handed over in.
    rows: HashMap<i64, u64>,
}

impl Dispatched {
    fn handed(&self) -> std::sync::MutexGuard<'_, Handed> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether `id` is new to this node (it is taken now).
    pub(super) fn claim(&self, id: i64) -> bool {
        let mut handed = self.handed();
        let look = handed.look;
        match handed.rows.entry(id) {
            std::collections::hash_map::Entry::Occupied(_) => false,
            std::collections::hash_map::Entry::Vacant(row) => {
                row.insert(look);
                true
            }
        }
    }

    /// A look begins (before it reads the open rows): its number.
    fn begin_look(&self) -> u64 {
        let mut handed = self.handed();
        handed.look += 1;
        handed.look
    }

    /// Forget the rows handed over before look `look` that it did not find open.
    fn keep_only(&self, open: &HashSet<i64>, look: u64) {
        self.handed()
            .rows
            .retain(|id, handed_in| open.contains(id) || *handed_in >= look);
    }

    /// Whether every row of `open` has been handed over.
    fn has_all(&self, open: &HashSet<i64>) -> bool {
        let handed = self.handed();
        open.iter().all(|id| handed.rows.contains_key(id))
    }
}

/// Wait for the work lease; then recover, and hand over what other nodes record, until
/// `stop`.
pub(super) async fn work(
    cluster: Arc<Cluster>,
    store: Store,
    router: Arc<Router>,
    out: WayOut,
    dispatched: Arc<Dispatched>,
    stop: CancellationToken,
) {
    let lease = cluster.exclusive(WORK);
    let token = tokio::select! {
        _ = stop.cancelled() => return,
        token = lease.acquired() => token,
    };
    // The end of every turn is written only while this node still holds the lease.
    if let Some(node) = cluster.node_id() {
        store.fence_with(WORK, node, token as i64);
    }
    tracing::info!("cluster: this node does the work now; it recovers what was left open");
    out.delivery.recover().await;
    out.approvals.expire_leftovers().await;
    out.processes.reap_orphans().await;
    out.delivery.wake_all_pending().await;
    // Not woken by the store's notices (`Store::watch_inbox`) yet: under load, looks at
    // every commit doubled replies on PostgreSQL (hermes-bench --postgres, 1,000 chats);
    // the cause is not found yet (docs/scaling.md).
    let recorded: Option<Arc<tokio::sync::Notify>> = None;
    loop {
        if !cluster.holds(WORK) {
            tracing::error!(
                "cluster: this node lost the work lease (paused, or cut off from the store); it stops at once so the node that took over is the only one working"
            );
            std::process::exit(LOST_THE_WORK);
        }
        if let Err(e) = hand_over_new(&store, &router, &dispatched).await {
            tracing::warn!(error = %e, "cluster: could not look for events other nodes recorded");
        }
        let heard = async {
            match &recorded {
                Some(recorded) => recorded.notified().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = heard => {}
            _ = tokio::time::sleep(LOOK_EVERY) => {}
        }
    }
}

/// Hand the router every open event it has not had.
async fn hand_over_new(
    store: &Store,
    router: &Arc<Router>,
    dispatched: &Dispatched,
) -> Result<(), crate::store::StoreError> {
    let look = dispatched.begin_look();
    let open: HashSet<i64> = store.inbox_open_ids().await?.into_iter().collect();
    dispatched.keep_only(&open, look);
    if dispatched.has_all(&open) {
        return Ok(());
    }
    let rows: Vec<InboxRow> = store.inbox_unfinished().await?;
    for row in rows {
        if dispatched.claim(row.id) {
            crate::metrics::message_in(row.event.chat.platform);
            router.submit(row);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_row_handed_over_while_a_look_reads_is_not_forgotten_by_it() {
        let dispatched = Dispatched::default();
        assert!(dispatched.claim(1));
        // A look begins and reads the open rows: 1 only.
        let look = dispatched.begin_look();
        let open: HashSet<i64> = [1].into();
        // Meanwhile the sink records row 2 (committed after the read) and hands it over.
        assert!(dispatched.claim(2));
        dispatched.keep_only(&open, look);
        assert!(!dispatched.claim(2), "row 2 would be handed over twice");
        assert!(!dispatched.claim(1));
        // The next look finds neither open: both ended, both forgotten.
        let look = dispatched.begin_look();
        dispatched.keep_only(&HashSet::new(), look);
        assert!(dispatched.handed().rows.is_empty());
    }
}
