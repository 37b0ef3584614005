//! On a store several nodes share, one node at a time does the work: it runs the turns and
//! sends (it holds the `work` lease); every node receives. An event a node records while
//! another does the work stays open in the inbox, and the working node picks it up at once
//! (told by the store: `LISTEN`/`NOTIFY`), or within [`LOOK_EVERY`] if the notice is lost.
//! A node that takes the work over first recovers what the last one left,
//! as a single node does after a crash: rows caught mid-send, approvals left waiting,
//! background processes, the events left open. A node that loses the lease (a pause, a
//! partition) stops at once (exit status 75) rather than run a turn or send beside the
//! node that took over; its service manager starts it again as a receiver.
//!
//! Conversations are not spread over the nodes yet: one node runs them all
//! (docs/scaling.md).

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::parts::WayOut;
use crate::cluster::Cluster;
use crate::router::Router;
use crate::store::Store;

/// How often the working node looks for events other nodes recorded, besides when the
/// store tells it one was (`Store::watch_inbox`), and how often it checks its lease.
const LOOK_EVERY: Duration = Duration::from_millis(100);

/// The lease of the node that does the work.
pub(super) const WORK: &str = "work";

/// The exit status of a node that lost the work lease (EX_TEMPFAIL).
const LOST_THE_WORK: i32 = 75;

/// The open events this node has handed to its router, or is recording, so none is
/// handed over twice: the sink hands over the events it records, [`work`] those other
/// nodes recorded. Keyed by event id, so an event can be spoken for before its row exists.
///
/// - The sink reserves an event before writing it ([`Dispatched::reserve`]): until the
///   reservation is settled, a look that reads its row (committed, while the rest of a
///   batch is still being written) leaves it to the sink. Without this, a look could hand
///   the row over, its turn end, a later look forget it, and the sink hand it over again
///   once its batch was written: the turn ran twice.
/// - Each event handed over is kept with the number of the look during which it was: a
///   look forgets only events handed over before it began and missing from what it read
///   (a row handed over while it read may have committed after its read).
///
/// Until the worker's first look after taking the work over has handed over what was left
/// open ([`Dispatched::caught_up`]), the sink hands nothing over itself: a new message
/// must not overtake an older one of its chat left open by the node that died.
#[derive(Default)]
pub(super) struct Dispatched {
    handed: Mutex<Handed>,
    caught_up: AtomicBool,
}

#[derive(Default)]
struct Handed {
    /// The number of the latest look.
    look: u64,
    events: HashMap<String, Event>,
}

#[derive(Default)]
struct Event {
    /// Writes of this event under way on this node (a redelivery may race the first).
    writing: u32,
    /// The look during which it was handed to the router.
    handed_in: Option<u64>,
}

impl Dispatched {
    fn handed(&self) -> std::sync::MutexGuard<'_, Handed> {
        self.handed.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The sink is about to write `event_id`: no look hands its row over until the
    /// returned reservation is settled or dropped.
    pub(super) fn reserve(self: &Arc<Self>, event_id: &str) -> Reserved {
        self.handed()
            .events
            .entry(event_id.to_owned())
            .or_default()
            .writing += 1;
        Reserved {
            dispatched: self.clone(),
            event_id: event_id.to_owned(),
            handed: false,
        }
    }

    /// Whether a look may hand `event_id` over (it is taken now): not while it is being
    /// written, nor when it was handed over already.
    fn claim(&self, event_id: &str) -> bool {
        let mut handed = self.handed();
        let look = handed.look;
        match handed.events.entry(event_id.to_owned()) {
            std::collections::hash_map::Entry::Occupied(_) => false,
            std::collections::hash_map::Entry::Vacant(event) => {
                event.insert(Event {
                    writing: 0,
                    handed_in: Some(look),
                });
                true
            }
        }
    }

    /// Whether the worker has handed over what was open when this node took the work over.
    pub(super) fn caught_up(&self) -> bool {
        self.caught_up.load(Ordering::Acquire)
    }

    /// A look begins (before it reads the open rows): its number.
    fn begin_look(&self) -> u64 {
        let mut handed = self.handed();
        handed.look += 1;
        handed.look
    }

    /// Forget the events handed over before look `look` that it did not find open.
    fn keep_only(&self, open: &HashSet<String>, look: u64) {
        self.handed().events.retain(|id, event| {
            event.writing > 0
                || open.contains(id)
                || event.handed_in.is_some_and(|handed_in| handed_in >= look)
        });
    }

    /// The events of `open` neither handed over nor being written.
    fn unknown(&self, open: &HashSet<String>) -> Vec<String> {
        let handed = self.handed();
        open.iter()
            .filter(|id| !handed.events.contains_key(*id))
            .cloned()
            .collect()
    }
}

/// The sink's hold on an event it is writing (see [`Dispatched`]); dropped unsettled (the
/// write failed, or found a duplicate) it lets the event go to whoever finds it open.
pub(super) struct Reserved {
    dispatched: Arc<Dispatched>,
    event_id: String,
    handed: bool,
}

impl Reserved {
    /// The sink wrote the event's row and hands it to the router now.
    pub(super) fn hand_over(mut self) {
        self.handed = true;
    }
}

impl Drop for Reserved {
    fn drop(&mut self) {
        let mut handed = self.dispatched.handed();
        let look = handed.look;
        let Some(event) = handed.events.get_mut(&self.event_id) else {
            return;
        };
        event.writing = event.writing.saturating_sub(1);
        if self.handed {
            event.handed_in = Some(look);
        } else if event.writing == 0 && event.handed_in.is_none() {
            handed.events.remove(&self.event_id);
        }
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
    // Woken at once when another node records an event; the interval makes up for a
    // notice lost with its connection.
    let listening = store.clone();
    let recorded = match tokio::task::spawn_blocking(move || listening.watch_inbox()).await {
        Ok(Ok(recorded)) => recorded,
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "cluster: cannot listen for the events other nodes record; looking every {} ms", LOOK_EVERY.as_millis());
            None
        }
        Err(e) => {
            tracing::warn!(error = %e, "cluster: the listener could not start; looking every {} ms", LOOK_EVERY.as_millis());
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
        match hand_over_new(&store, &router, &dispatched).await {
            // From now on the sink hands over what it records, after what was open.
            Ok(()) => dispatched.caught_up.store(true, Ordering::Release),
            Err(e) => {
                tracing::warn!(error = %e, "cluster: could not look for events other nodes recorded");
            }
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
    let open: HashSet<String> = store.inbox_open_events().await?.into_iter().collect();
    dispatched.keep_only(&open, look);
    let unknown = dispatched.unknown(&open);
    if unknown.is_empty() {
        return Ok(());
    }
    // Only the new rows' payloads are read: a backlog of open rows is not read again at
    // every look.
    for row in store.inbox_open_rows(unknown).await? {
        if dispatched.claim(&row.event.event_id) {
            crate::metrics::message_in(row.event.chat.platform);
            router.submit(row);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn open(ids: &[&str]) -> HashSet<String> {
        ids.iter().map(|id| id.to_string()).collect()
    }

    #[test]
    fn a_row_handed_over_while_a_look_reads_is_not_forgotten_by_it() {
        let dispatched = Arc::new(Dispatched::default());
        assert!(dispatched.claim("e1"));
        // A look begins and reads the open rows: e1 only.
        let look = dispatched.begin_look();
        // Meanwhile the sink records e2 (committed after the read) and hands it over.
        dispatched.reserve("e2").hand_over();
        dispatched.keep_only(&open(&["e1"]), look);
        assert!(!dispatched.claim("e2"), "e2 would be handed over twice");
        assert!(!dispatched.claim("e1"));
        // The next look finds neither open: both ended, both forgotten.
        let look = dispatched.begin_look();
        dispatched.keep_only(&HashSet::new(), look);
        assert!(dispatched.handed().events.is_empty());
    }

    #[test]
    fn a_row_of_a_batch_being_written_is_left_to_the_sink() {
        let dispatched = Arc::new(Dispatched::default());
        // The sink writes a batch: e1's row is committed, the rest is still being written.
        let e1 = dispatched.reserve("e1");
        // A look finds e1 open and leaves it to the sink.
        let look = dispatched.begin_look();
        dispatched.keep_only(&open(&["e1"]), look);
        assert!(!dispatched.claim("e1"), "the look took a row being written");
        // Looks that do not find it open (its turn has not begun) keep it reserved.
        let look = dispatched.begin_look();
        dispatched.keep_only(&HashSet::new(), look);
        assert!(!dispatched.claim("e1"));
        // The batch is written: the sink hands e1 over, and no look takes it again.
        e1.hand_over();
        let look = dispatched.begin_look();
        dispatched.keep_only(&open(&["e1"]), look);
        assert!(!dispatched.claim("e1"), "e1 would be handed over twice");
    }

    #[test]
    fn an_event_the_sink_did_not_hand_over_is_left_to_the_looks() {
        let dispatched = Arc::new(Dispatched::default());
        // A redelivery of an event another node recorded: the write finds a duplicate.
        drop(dispatched.reserve("e1"));
        assert!(dispatched.handed().events.is_empty());
        assert!(
            dispatched.claim("e1"),
            "the open row would never be handed over"
        );
        // An event a look handed over stays handed when a redelivery of it is written.
        drop(dispatched.reserve("e1"));
        assert!(!dispatched.claim("e1"));
    }
}
