//! This daemon among the nodes sharing one PostgreSQL store (docs/scaling.md): it says it is
//! alive every `store.lease_renew`, keeps the leases of what only one node may do at a
//! time ([`hermes_adapter::Exclusive`]: Telegram's poller for a bot, a Discord shard), and
//! its shares of the work ([`shares`]: the chats whose turns it runs and whose messages it
//! sends). On SQLite the daemon is the only node, and everything is its own without asking
//! the store.
//!
//! A lease is this node's until a local deadline: the moment the statement that took or
//! renewed it was sent, plus `lease_ttl`, minus `lease_renew`. The monotonic clock keeps
//! counting while the process is stopped, so a node that resumes after a pause longer than
//! that sees the deadline passed and stops before the store says another node has it.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hermes_adapter::{AlwaysOurs, Exclusive, async_trait};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::store::Store;

pub mod shares;

pub use shares::WorkShares;

/// How this node takes part.
pub struct Cluster {
    shared: Option<Shared>,
    shares: Arc<WorkShares>,
}

struct Shared {
    store: Store,
    node_id: String,
    ttl: Duration,
    renew: Duration,
    keepers: Mutex<HashMap<String, Arc<LeaseKeeper>>>,
    groups: Mutex<HashMap<String, Arc<Group>>>,
    shutdown: CancellationToken,
    tasks: TaskTracker,
}

/// The timings of a shared store's leases.
#[derive(Debug, Clone, Copy)]
pub struct Timings {
    pub ttl: Duration,
    pub renew: Duration,
}

impl Cluster {
    /// The only node (SQLite).
    pub fn single() -> Arc<Cluster> {
        Arc::new(Cluster {
            shared: None,
            shares: Arc::new(WorkShares::single()),
        })
    }

    /// Node `node_id` of a shared store: it says it is alive until `shutdown`.
    pub fn shared(
        store: Store,
        node_id: String,
        timings: Timings,
        shutdown: CancellationToken,
        tasks: TaskTracker,
    ) -> Arc<Cluster> {
        let started = Instant::now();
        let (beat_store, beat_id, beat_stop) = (store.clone(), node_id.clone(), shutdown.clone());
        tasks.spawn(async move {
            say_other_nodes(&beat_store, &beat_id, timings).await;
            loop {
                let up = started.elapsed().as_millis() as i64;
                if let Err(e) = beat_store
                    .node_beat(&beat_id, env!("CARGO_PKG_VERSION"), up)
                    .await
                {
                    tracing::warn!(error = %e, "cluster: could not say this node is alive");
                }
                tokio::select! {
                    _ = beat_stop.cancelled() => return,
                    _ = tokio::time::sleep(timings.renew) => {}
                }
            }
        });
        let shares = Arc::new(WorkShares::shared(store.clone(), node_id.clone(), timings));
        let (keeping, keep_stop) = (shares.clone(), shutdown.clone());
        tasks.spawn(async move { keeping.keep(keep_stop).await });
        Arc::new(Cluster {
            shares,
            shared: Some(Shared {
                store,
                node_id,
                ttl: timings.ttl,
                renew: timings.renew,
                keepers: Mutex::new(HashMap::new()),
                groups: Mutex::new(HashMap::new()),
                shutdown,
                tasks,
            }),
        })
    }

    /// This node's id among the store's (none on SQLite).
    pub fn node_id(&self) -> Option<&str> {
        self.shared.as_ref().map(|s| s.node_id.as_str())
    }

    /// This node's shares of the work.
    pub fn shares(&self) -> &Arc<WorkShares> {
        &self.shares
    }

    /// The names of the leases this node holds now, with their tokens.
    pub fn held(&self) -> Vec<(String, i64)> {
        let Some(shared) = &self.shared else {
            return Vec::new();
        };
        let keepers = shared.keepers.lock().unwrap_or_else(|e| e.into_inner());
        let mut held: Vec<(String, i64)> = keepers
            .iter()
            .filter_map(|(name, keeper)| keeper.current().map(|h| (name.clone(), h.token)))
            .collect();
        held.extend(self.shares.leases());
        held.sort();
        held
    }

    /// Whether this node holds lease `name` now (always, on a node of its own).
    pub fn holds(&self, name: &str) -> bool {
        let Some(shared) = &self.shared else {
            return true;
        };
        let keepers = shared.keepers.lock().unwrap_or_else(|e| e.into_inner());
        keepers.get(name).is_some_and(|k| k.current().is_some())
    }

    /// Whether this node shares its store with others.
    pub fn is_shared(&self) -> bool {
        self.shared.is_some()
    }

    /// What only one node may do, by name: kept under a lease on a shared store.
    pub fn exclusive(&self, name: &str) -> Arc<dyn Exclusive> {
        self.keeper(name, None)
    }

    /// Member `index` of a group of `size` exclusive things spread over the nodes (a
    /// bot's Discord shards): kept under the lease `<group>:<index>`, taken beyond this
    /// node's fair part of the group only when it stays free for a round, and let go while
    /// this node holds more than its fair part and every member has a holder.
    pub fn exclusive_in(&self, group: &str, index: u32, size: u32) -> Arc<dyn Exclusive> {
        let Some(shared) = &self.shared else {
            return Arc::new(AlwaysOurs);
        };
        let group = {
            let mut groups = shared.groups.lock().unwrap_or_else(|e| e.into_inner());
            groups
                .entry(group.to_owned())
                .or_insert_with(|| {
                    Arc::new(Group {
                        name: group.to_owned(),
                        size: size.max(1),
                        held: Mutex::new(HashSet::new()),
                        letting_go: AtomicBool::new(false),
                    })
                })
                .clone()
        };
        let member = Member {
            group,
            index,
            shares: self.shares.clone(),
        };
        self.keeper(&member.lease(), Some(member))
    }

    fn keeper(&self, name: &str, member: Option<Member>) -> Arc<dyn Exclusive> {
        let Some(shared) = &self.shared else {
            return Arc::new(AlwaysOurs);
        };
        let mut keepers = shared.keepers.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(keeper) = keepers.get(name) {
            return keeper.clone();
        }
        let (state, _) = watch::channel(None);
        let keeper = Arc::new(LeaseKeeper { state });
        keepers.insert(name.to_owned(), keeper.clone());
        shared.tasks.spawn(keep(
            shared.store.clone(),
            name.to_owned(),
            shared.node_id.clone(),
            Timings {
                ttl: shared.ttl,
                renew: shared.renew,
            },
            keeper.clone(),
            member,
            shared.shutdown.clone(),
        ));
        keeper
    }
}

/// Said once at the start: the other nodes alive on the store, if any.
async fn say_other_nodes(store: &Store, me: &str, timings: Timings) {
    let alive_within = (timings.ttl * 2).as_millis() as i64;
    match store.nodes().await {
        Ok(nodes) => {
            let others: Vec<String> = nodes
                .into_iter()
                .filter(|n| n.id != me && n.silent_ms <= alive_within)
                .map(|n| n.id)
                .collect();
            if !others.is_empty() {
                tracing::info!(
                    others = %others.join(", "),
                    "cluster: other nodes are alive on this store; the work is shared out among them"
                );
            }
        }
        Err(e) => tracing::warn!(error = %e, "cluster: could not list the store's nodes"),
    }
}

/// A lease this node holds: its token, and until when by this node's monotonic clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Held {
    token: i64,
    until: Instant,
}

/// One lease, taken and renewed by its task ([`keep`]).
pub struct LeaseKeeper {
    state: watch::Sender<Option<Held>>,
}

impl LeaseKeeper {
    /// The lease, while its local deadline has not passed.
    fn current(&self) -> Option<Held> {
        (*self.state.borrow()).filter(|held| Instant::now() < held.until)
    }
}

#[async_trait]
impl Exclusive for LeaseKeeper {
    async fn acquired(&self) -> u64 {
        let mut changes = self.state.subscribe();
        loop {
            if let Some(held) = self.current() {
                return held.token as u64;
            }
            // Woken by the keeper's next answer, or when the local deadline may have been
            // renewed in between (checked again at most every 100 ms).
            let _ = tokio::time::timeout(Duration::from_millis(100), changes.changed()).await;
        }
    }

    async fn lost(&self, turn: u64) {
        let mut changes = self.state.subscribe();
        loop {
            let until = match self.current() {
                Some(held) if held.token as u64 == turn => held.until,
                _ => return,
            };
            // Renewed (a change) or lapsed (its local deadline), whichever comes first.
            let _ = tokio::time::timeout_at(until.into(), changes.changed()).await;
        }
    }
}

/// A group of exclusive things the nodes spread among themselves (a bot's Discord shards).
struct Group {
    name: String,
    size: u32,
    /// The members this node holds now.
    held: Mutex<HashSet<u32>>,
    /// A member is being let go (one at a time, so a node does not drop below its part).
    letting_go: AtomicBool,
}

/// One member of a [`Group`], as its lease's keeper sees it.
struct Member {
    group: Arc<Group>,
    index: u32,
    /// Where the count of nodes alive comes from.
    shares: Arc<WorkShares>,
}

/// What a member's keeper does at a round.
#[derive(Debug, PartialEq, Eq)]
enum Round {
    /// Take the lease, or renew it.
    Take,
    /// Leave it to the other nodes this round.
    Wait,
    /// Let it go: this node holds more than its part and another will take it.
    LetGo,
}

impl Member {
    fn lease(&self) -> String {
        format!("{}:{}", self.group.name, self.index)
    }

    fn mine(&self) -> usize {
        self.group
            .held
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .len()
    }

    fn note(&self, held: bool) {
        let mut mine = self.group.held.lock().unwrap_or_else(|e| e.into_inner());
        if held {
            mine.insert(self.index);
        } else {
            mine.remove(&self.index);
        }
    }

    /// This round's move. `free_before`: whether the lease was free at this member's last
    /// look (a member free for a whole round is taken even beyond the fair part, so none
    /// stays without a holder while the count of nodes is stale).
    async fn round(&self, store: &Store, holding: bool, free_before: &mut bool) -> Round {
        let alive = self.shares.nodes_alive() as u32;
        let fair = self.group.size.div_ceil(alive) as usize;
        let mine = self.mine();
        if (holding && mine <= fair) || (!holding && mine < fair) {
            *free_before = false;
            return Round::Take;
        }
        let leases = match store.leases().await {
            Ok(leases) => leases,
            // Held ones are renewed; free ones wait for a store that answers.
            Err(e) => {
                tracing::warn!(error = %e, "cluster: could not read the leases");
                return if holding { Round::Take } else { Round::Wait };
            }
        };
        let held_by_anyone = |name: &str| leases.iter().any(|l| l.name == name && l.left_ms >= 0);
        if holding {
            // Above the fair part: while every member has a holder, some node alive holds
            // fewer than its part and takes this one once it is let go.
            let group = &self.group;
            let all_held = (0..group.size).all(|i| held_by_anyone(&format!("{}:{i}", group.name)));
            if all_held && !group.letting_go.swap(true, Ordering::SeqCst) {
                return Round::LetGo;
            }
            return Round::Take;
        }
        let free_now = !held_by_anyone(&self.lease());
        let was_free = std::mem::replace(free_before, free_now);
        if free_now && was_free {
            Round::Take
        } else {
            Round::Wait
        }
    }
}

/// Take lease `name` and renew it every `renew` while this node runs; try again as often
/// while another node has it. At the stop, let it go, so another node takes over at once.
/// A member of a group takes and lets go as [`Member::round`] says.
async fn keep(
    store: Store,
    name: String,
    node: String,
    timings: Timings,
    keeper: Arc<LeaseKeeper>,
    member: Option<Member>,
    shutdown: CancellationToken,
) {
    let ttl_ms = timings.ttl.as_millis() as i64;
    let mut free_before = false;
    loop {
        let round = match &member {
            Some(member) => {
                let holding = keeper.current().is_some();
                member.round(&store, holding, &mut free_before).await
            }
            None => Round::Take,
        };
        if round == Round::LetGo
            && let Some(member) = &member
        {
            if let Some(held) = keeper.current() {
                tracing::info!(lease = %name, "cluster: this node lets the lease go (it holds more than its part of them)");
                // The connection kept under it closes at once (`Exclusive::lost`).
                keeper.state.send_replace(None);
                if let Err(e) = store.lease_release(&name, &node, held.token).await {
                    tracing::warn!(lease = %name, error = %e, "cluster: could not let the lease go");
                }
            }
            member.note(false);
            member.group.letting_go.store(false, Ordering::SeqCst);
        }
        if round != Round::Take {
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = tokio::time::sleep(timings.renew) => {}
            }
            continue;
        }
        let sent = Instant::now();
        match store.lease_take(&name, &node, ttl_ms).await {
            Ok(Some(token)) => {
                let until = sent + timings.ttl.saturating_sub(timings.renew);
                let was = *keeper.state.borrow();
                if was.map(|h| h.token) != Some(token) {
                    tracing::info!(lease = %name, token, "cluster: this node holds the lease");
                }
                keeper.state.send_replace(Some(Held { token, until }));
                if let Some(member) = &member {
                    member.note(true);
                }
            }
            Ok(None) => {
                if keeper.state.borrow().is_some() {
                    tracing::warn!(lease = %name, "cluster: another node holds the lease now");
                }
                keeper.state.send_replace(None);
                if let Some(member) = &member {
                    member.note(false);
                }
            }
            // Kept until its local deadline: the store may answer again before it.
            Err(e) => tracing::warn!(lease = %name, error = %e, "cluster: could not renew"),
        }
        tokio::select! {
            _ = shutdown.cancelled() => break,
            _ = tokio::time::sleep(timings.renew) => {}
        }
    }
    if let Some(member) = &member {
        member.note(false);
    }
    if let Some(held) = keeper.current() {
        keeper.state.send_replace(None);
        if let Err(e) = store.lease_release(&name, &node, held.token).await {
            tracing::warn!(lease = %name, error = %e, "cluster: could not let the lease go");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn holding(token: i64, for_ms: u64) -> Option<Held> {
        Some(Held {
            token,
            until: Instant::now() + Duration::from_millis(for_ms),
        })
    }

    #[tokio::test]
    async fn a_connection_kept_under_a_lease_hears_at_once_when_it_lapses_or_changes_hands() {
        let (state, _) = watch::channel(holding(3, 200));
        let keeper = LeaseKeeper { state };
        let bound = Duration::from_secs(5);
        // Another turn's connection is told at once.
        tokio::time::timeout(Duration::from_millis(50), keeper.lost(2))
            .await
            .expect("an older turn was lost already");
        // Renewed in time, it is kept past its first deadline.
        let started = Instant::now();
        let renewing = async {
            tokio::time::sleep(Duration::from_millis(100)).await;
            keeper.state.send_replace(holding(3, 300));
        };
        let ((), ()) = tokio::join!(
            async {
                tokio::time::timeout(bound, keeper.lost(3)).await.unwrap();
            },
            renewing
        );
        assert!(
            started.elapsed() >= Duration::from_millis(390),
            "lost before the renewed deadline: {:?}",
            started.elapsed()
        );
        // Taken by another node (a new token): told at once.
        keeper.state.send_replace(holding(4, 10_000));
        tokio::time::timeout(Duration::from_millis(50), keeper.lost(3))
            .await
            .expect("the lease changed hands");
        assert_eq!(
            tokio::time::timeout(bound, keeper.acquired())
                .await
                .unwrap(),
            4
        );
    }
}
