//! On a store several nodes share, the work is split into shares (`cluster::shares`): the
//! node holding a chat's share runs its turns and sends its messages; every node
//! receives. An event a node records for a share another node holds stays open in the
//! inbox, and the holder picks it up at once (told by the store: `LISTEN`/`NOTIFY`), or
//! within [`LOOK_EVERY`] if the notice is lost. A node that takes a share over first
//! recovers what the last holder left in it, as a single node does after a crash: rows
//! caught mid-send, approvals left waiting, background processes, the events left open.
//! A node that holds more than its fair part gives shares up once they are quiet on it.
//! A node that loses a share it did not give up (a pause, a partition) stops at once (exit
//! status 75) rather than run a turn or send beside the node that took over; its service
//! manager starts it again.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use hermes_adapter::ChatRef;

use super::background::ResumeDelegations;
use super::parts::WayOut;
use crate::cluster::shares::Stage;
use crate::cluster::{Cluster, WorkShares};
use crate::router::Router;
use crate::store::{Fence, Store};

/// How often a node looks for events other nodes recorded, besides when the store tells
/// it one was (`Store::watch_inbox`), and how often it checks its shares.
const LOOK_EVERY: Duration = Duration::from_millis(100);

/// The exit status of a node that lost a share of the work (EX_TEMPFAIL).
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
/// Until the first look after taking a share over has handed over what was left open in
/// it (`Stage::CaughtUp`), the sink hands nothing of it over itself: a new message must
/// not overtake an older one of its chat left open by the node that died.
#[derive(Default)]
pub(super) struct Dispatched {
    handed: Mutex<Handed>,
}

#[derive(Default)]
struct Handed {
    /// The number of the latest look.
    look: u64,
    events: HashMap<String, Event>,
    /// Open events of shares this node did not hold when a look read them, with their
    /// share: not read again at every look while their share is another node's.
    elsewhere: HashMap<String, u32>,
}

#[derive(Default)]
struct Event {
    /// The share of the work its chat falls in.
    share: u32,
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
    pub(super) fn reserve(self: &Arc<Self>, event_id: &str, share: u32) -> Reserved {
        let mut handed = self.handed();
        let event = handed.events.entry(event_id.to_owned()).or_default();
        event.share = share;
        event.writing += 1;
        drop(handed);
        Reserved {
            dispatched: self.clone(),
            event_id: event_id.to_owned(),
            handed: false,
        }
    }

    /// Whether a look may hand `event_id` over (it is taken now): not while it is being
    /// written, nor when it was handed over already.
    fn claim(&self, event_id: &str, share: u32) -> bool {
        let mut handed = self.handed();
        let look = handed.look;
        match handed.events.entry(event_id.to_owned()) {
            std::collections::hash_map::Entry::Occupied(_) => false,
            std::collections::hash_map::Entry::Vacant(event) => {
                event.insert(Event {
                    share,
                    writing: 0,
                    handed_in: Some(look),
                });
                true
            }
        }
    }

    /// Whether an event of `share` is being written, or was handed over and is still open
    /// as far as the last look knows (its turn may be running).
    fn busy(&self, share: u32) -> bool {
        self.handed().events.values().any(|e| e.share == share)
    }

    /// A look begins (before it reads the open rows): its number.
    fn begin_look(&self) -> u64 {
        let mut handed = self.handed();
        handed.look += 1;
        handed.look
    }

    /// Forget the events handed over before look `look` that it did not find open.
    fn keep_only(&self, open: &HashSet<String>, look: u64) {
        let mut handed = self.handed();
        handed.events.retain(|id, event| {
            event.writing > 0
                || open.contains(id)
                || event.handed_in.is_some_and(|handed_in| handed_in >= look)
        });
        handed.elsewhere.retain(|id, _| open.contains(id));
    }

    /// A look read open event `event_id` of `share`, which is not among the shares it
    /// hands over.
    fn elsewhere(&self, event_id: String, share: u32) {
        self.handed().elsewhere.insert(event_id, share);
    }

    /// The events of `open` neither handed over nor being written, nor known to be of a
    /// share outside `shares`.
    fn unknown(&self, open: &HashSet<String>, shares: &[u32]) -> Vec<String> {
        let handed = self.handed();
        open.iter()
            .filter(|id| !handed.events.contains_key(*id))
            .filter(|id| {
                handed
                    .elsewhere
                    .get(*id)
                    .is_none_or(|share| shares.contains(share))
            })
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

/// Take shares of the work and recover them; hand over what other nodes record for them,
/// and give surplus ones up when they are quiet, until `stop`.
pub(super) async fn work(
    cluster: Arc<Cluster>,
    store: Store,
    router: Arc<Router>,
    out: WayOut,
    resume_delegations: ResumeDelegations,
    dispatched: Arc<Dispatched>,
    stop: CancellationToken,
) {
    let shares = cluster.shares().clone();
    // The end of every turn is written only while this node holds its chat's share.
    if let Some(node) = cluster.node_id() {
        let (node, fencing) = (node.to_owned(), shares.clone());
        store.fence_by(Arc::new(move |chat: &ChatRef| {
            fencing
                .fence(chat)
                .map(|(lease, token)| Fence::new(&lease, &node, token))
        }));
    }
    // Woken at once when another node records an event; the interval makes up for a
    // notice lost with its connection.
    // Connected beside the first look, not before it: a node that starts alone answers at
    // once.
    let listening = store.clone();
    let mut listener = Some(tokio::task::spawn_blocking(move || listening.watch_inbox()));
    let mut recorded: Option<Arc<tokio::sync::Notify>> = None;
    loop {
        if let Some(share) = shares.lost() {
            tracing::error!(
                share,
                "cluster: this node lost a share of the work (paused, or cut off from the store); it stops at once so the node that took it over is the only one working on it"
            );
            std::process::exit(LOST_THE_WORK);
        }
        let taken = shares.at(Stage::Taken);
        if !taken.is_empty() {
            recover(&out, &shares, &taken, &resume_delegations).await;
            shares.reached(&taken, Stage::Recovered);
        }
        let ready = shares.ready();
        let mut again = false;
        if !ready.is_empty() {
            let left_open = shares.left_open(&ready);
            match hand_over_new(&store, &router, &dispatched, &shares, &ready).await {
                // From now on the sink hands over what it records for them, after what was
                // open; a share the sink left an event open in meanwhile is looked at again
                // at once.
                Ok(()) => again = !shares.caught_up(&left_open),
                Err(e) => {
                    tracing::warn!(error = %e, "cluster: could not look for events other nodes recorded");
                }
            }
        }
        give_up_quiet(&shares, &dispatched, &out);
        let heard = async {
            match &recorded {
                Some(recorded) => recorded.notified().await,
                None => std::future::pending().await,
            }
        };
        let connected = async {
            match listener.as_mut() {
                Some(connecting) => connecting.await,
                None => std::future::pending().await,
            }
        };
        let next_look = if again { Duration::ZERO } else { LOOK_EVERY };
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = heard => {}
            _ = tokio::time::sleep(next_look) => {}
            started = connected => {
                listener = None;
                recorded = listening_from(started);
            }
        }
    }
}

/// The listener's notices, or none (looking every [`LOOK_EVERY`] then) when it could not
/// start.
fn listening_from(
    started: Result<
        Result<Option<Arc<tokio::sync::Notify>>, crate::store::StoreError>,
        tokio::task::JoinError,
    >,
) -> Option<Arc<tokio::sync::Notify>> {
    match started {
        Ok(Ok(recorded)) => recorded,
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "cluster: cannot listen for the events other nodes record; looking every {} ms", LOOK_EVERY.as_millis());
            None
        }
        Err(e) => {
            tracing::warn!(error = %e, "cluster: the listener could not start; looking every {} ms", LOOK_EVERY.as_millis());
            None
        }
    }
}

/// Whether `chat` falls in one of `among`.
fn in_shares(shares: &WorkShares, among: &[u32], chat: &ChatRef) -> bool {
    among.contains(&shares.of(chat))
}

/// Shares just taken: what their last holder left is recovered as after a crash (rows
/// caught mid-send, approvals left waiting, its background processes, its delegations,
/// which run again), and their chats with messages waiting get their lanes.
async fn recover(
    out: &WayOut,
    shares: &Arc<WorkShares>,
    taken: &[u32],
    resume_delegations: &ResumeDelegations,
) {
    tracing::info!(shares = ?taken, "cluster: this node takes shares of the work over; it recovers what was left in them");
    let mine = {
        let (shares, taken) = (shares.clone(), taken.to_vec());
        move |chat: &ChatRef| in_shares(&shares, &taken, chat)
    };
    out.delivery.recover(mine.clone()).await;
    out.approvals.expire_leftovers(&mine).await;
    out.processes.reap_orphans(&mine).await;
    out.delivery.wake_all_pending(&mine).await;
    resume_delegations(Arc::new(mine)).await;
}

/// Give up as many surplus shares as are quiet on this node: no event of theirs being
/// written or handled, no approval of theirs waiting, no background process of theirs
/// running. A share is marked as
/// leaving before it is looked at, so the sink no longer hands its new events over (they
/// stay open for the next holder); its lease is let go once no send of its is under way.
fn give_up_quiet(shares: &Arc<WorkShares>, dispatched: &Dispatched, out: &WayOut) {
    let mut surplus = shares.surplus();
    for share in shares.all_held().into_iter().rev() {
        if surplus == 0 {
            return;
        }
        // A turn waiting for an approval counts: its event is closed, but a share moved
        // away would have its approval expire under the person.
        let quiet = || {
            let in_share = |chat: &ChatRef| shares.of(chat) == share;
            !dispatched.busy(share)
                && !out.processes.runs_in(in_share)
                && !out.approvals.waits_in(in_share)
        };
        // Looked at before it is marked, so a busy share is not marked at every look (an
        // event the sink left to a look meanwhile could be answered after a later one).
        if !quiet() {
            continue;
        }
        shares.leaving(share, true);
        if !quiet() {
            shares.leaving(share, false);
            continue;
        }
        let Some(token) = shares.stop_holding(share) else {
            continue;
        };
        surplus -= 1;
        // Let go in the store once no send of it is under way, in a task of its own: the
        // work loop goes on meanwhile.
        let (shares, delivery) = (shares.clone(), out.delivery.clone());
        tokio::spawn(async move {
            let sending = |platform, account: Option<&str>, chat_id: &str| {
                shares.of_parts(platform, account, chat_id) == share
            };
            let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
            while delivery.sends_in_flight(sending) {
                if tokio::time::Instant::now() >= deadline {
                    // Left to lapse: no other node takes it before the send is over or
                    // the lease's time has run out.
                    tracing::warn!(
                        share,
                        "cluster: a send is still under way in a share given up; its lease is left to lapse"
                    );
                    return;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            shares.release(share, token).await;
        });
    }
}

/// Hand the router every open event of `shares` it has not had.
async fn hand_over_new(
    store: &Store,
    router: &Arc<Router>,
    dispatched: &Dispatched,
    work_shares: &WorkShares,
    shares: &[u32],
) -> Result<(), crate::store::StoreError> {
    let look = dispatched.begin_look();
    // Ids only: the chats (so the shares) are read with the payloads of new rows. An event
    // is forgotten only once closed, whatever its share: an event of a share being given
    // up keeps it busy while its turn runs.
    let open: HashSet<String> = store.inbox_open_events().await?.into_iter().collect();
    dispatched.keep_only(&open, look);
    let unknown = dispatched.unknown(&open, shares);
    if unknown.is_empty() {
        return Ok(());
    }
    // Only the new rows' payloads are read: a backlog of open rows is not read again at
    // every look.
    for row in store.inbox_open_rows(unknown).await? {
        let share = work_shares.of(&row.event.chat);
        if !shares.contains(&share) {
            dispatched.elsewhere(row.event.event_id, share);
            continue;
        }
        if dispatched.claim(&row.event.event_id, share) {
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
        assert!(dispatched.claim("e1", 0));
        // A look begins and reads the open rows: e1 only.
        let look = dispatched.begin_look();
        // Meanwhile the sink records e2 (committed after the read) and hands it over.
        dispatched.reserve("e2", 0).hand_over();
        dispatched.keep_only(&open(&["e1"]), look);
        assert!(!dispatched.claim("e2", 0), "e2 would be handed over twice");
        assert!(!dispatched.claim("e1", 0));
        // The next look finds neither open: both ended, both forgotten.
        let look = dispatched.begin_look();
        dispatched.keep_only(&HashSet::new(), look);
        assert!(dispatched.handed().events.is_empty());
    }

    #[test]
    fn a_row_of_a_batch_being_written_is_left_to_the_sink() {
        let dispatched = Arc::new(Dispatched::default());
        // The sink writes a batch: e1's row is committed, the rest is still being written.
        let e1 = dispatched.reserve("e1", 0);
        // A look finds e1 open and leaves it to the sink.
        let look = dispatched.begin_look();
        dispatched.keep_only(&open(&["e1"]), look);
        assert!(
            !dispatched.claim("e1", 0),
            "the look took a row being written"
        );
        // Looks that do not find it open (its turn has not begun) keep it reserved.
        let look = dispatched.begin_look();
        dispatched.keep_only(&HashSet::new(), look);
        assert!(!dispatched.claim("e1", 0));
        // The batch is written: the sink hands e1 over, and no look takes it again.
        e1.hand_over();
        let look = dispatched.begin_look();
        dispatched.keep_only(&open(&["e1"]), look);
        assert!(!dispatched.claim("e1", 0), "e1 would be handed over twice");
    }

    #[test]
    fn an_event_the_sink_did_not_hand_over_is_left_to_the_looks() {
        let dispatched = Arc::new(Dispatched::default());
        // A redelivery of an event another node recorded: the write finds a duplicate.
        drop(dispatched.reserve("e1", 0));
        assert!(dispatched.handed().events.is_empty());
        assert!(
            dispatched.claim("e1", 0),
            "the open row would never be handed over"
        );
        // An event a look handed over stays handed when a redelivery of it is written.
        drop(dispatched.reserve("e1", 0));
        assert!(!dispatched.claim("e1", 0));
    }
}
