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

use std::collections::HashSet;
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
/// sink hands the events it records; [`work`] those other nodes recorded).
#[derive(Default)]
pub(super) struct Dispatched(Mutex<HashSet<i64>>);

impl Dispatched {
    /// Whether `id` is new to this node (it is taken now).
    pub(super) fn claim(&self, id: i64) -> bool {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).insert(id)
    }

    /// Forget the rows no longer open.
    fn keep_only(&self, open: &HashSet<i64>) {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|id| open.contains(id));
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
    let recorded = match store.watch_inbox() {
        Ok(recorded) => recorded,
        Err(e) => {
            tracing::warn!(error = %e, "cluster: cannot listen for other nodes' events; looking every 100 ms");
            None
        }
    };
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
    let open: HashSet<i64> = store.inbox_open_ids().await?.into_iter().collect();
    dispatched.keep_only(&open);
    let new = {
        let known = dispatched.0.lock().unwrap_or_else(|e| e.into_inner());
        open.iter().any(|id| !known.contains(id))
    };
    if !new {
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
