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

use std::collections::HashMap;
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

/// Take lease `name` and renew it every `renew` while this node runs; try again as often
/// while another node has it. At the stop, let it go, so another node takes over at once.
async fn keep(
    store: Store,
    name: String,
    node: String,
    timings: Timings,
    keeper: Arc<LeaseKeeper>,
    shutdown: CancellationToken,
) {
    let ttl_ms = timings.ttl.as_millis() as i64;
    loop {
        let sent = Instant::now();
        match store.lease_take(&name, &node, ttl_ms).await {
            Ok(Some(token)) => {
                let until = sent + timings.ttl.saturating_sub(timings.renew);
                let was = *keeper.state.borrow();
                if was.map(|h| h.token) != Some(token) {
                    tracing::info!(lease = %name, token, "cluster: this node holds the lease");
                }
                keeper.state.send_replace(Some(Held { token, until }));
            }
            Ok(None) => {
                if keeper.state.borrow().is_some() {
                    tracing::warn!(lease = %name, "cluster: another node holds the lease now");
                }
                keeper.state.send_replace(None);
            }
            // Kept until its local deadline: the store may answer again before it.
            Err(e) => tracing::warn!(lease = %name, error = %e, "cluster: could not renew"),
        }
        tokio::select! {
            _ = shutdown.cancelled() => break,
            _ = tokio::time::sleep(timings.renew) => {}
        }
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
