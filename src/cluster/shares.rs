//! The work split into shares, when several nodes share a store (docs/scaling.md). Every
//! chat falls in one of [`SHARES`] shares (`ChatRef::work_share`), each kept under a lease
//! `work:<n>`: the node holding a share runs the turns of its chats and sends their
//! messages. Each node aims at its fair part (the shares divided by the nodes alive,
//! rounded up): it takes free shares while it has fewer, and has surplus ones given up,
//! once they are quiet on it, while it has more (`daemon/work.rs`). A share its holder
//! stops renewing lapses and is taken by another node, which recovers it as a single node
//! recovers after a crash.
//!
//! On its holder a share goes through three [`Stage`]s: taken (its recovery is not done:
//! nothing of it is sent or handed over), recovered (its lanes may send), caught up (the
//! first look handed over what was left open in it: from then on the sink hands its new
//! events over itself, so a new message cannot overtake an older one of its chat).

use std::collections::{BTreeMap, HashSet};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use hermes_adapter::{ChatRef, Platform};
use tokio_util::sync::CancellationToken;

use super::{Held, Timings};
use crate::store::Store;

/// How many shares the work is split into ([`hermes_adapter::WORK_SHARES`]).
pub const SHARES: u32 = hermes_adapter::WORK_SHARES;

/// The lease of share `share` (of the [`SHARES`] the work is split into).
pub fn lease_name(share: u32) -> String {
    format!("work:{share}")
}

/// How many shares a node holding `holding` should give up while every share has a
/// holder and the other nodes alive hold `theirs`: those beyond its fair part (the shares
/// over the nodes, rounded up), and one more while another node is short of the rounded
/// down part and this one has more than that (so 16 over 5 nodes end 4/3/3/3/3, never
/// 4/4/4/4/0).
fn surplus_of(holding: usize, theirs: &[usize]) -> usize {
    let nodes = theirs.len() as u32 + 1;
    let fair = SHARES.div_ceil(nodes) as usize;
    let least = (SHARES / nodes) as usize;
    let someone_short = theirs.iter().any(|&n| n < least);
    let beyond_fair = holding.saturating_sub(fair);
    beyond_fair.max(usize::from(someone_short && holding > least))
}

/// Whether lease `name` is one of the [`SHARES`] of the work (`work:<n>`).
fn is_share_of_the_work(name: &str) -> bool {
    name.strip_prefix("work:")
        .is_some_and(|n| n.parse::<u32>().is_ok())
}

/// The share of this node's own chats: its web chat's pages are served on this machine
/// only, so their chats are run and sent here, under this node's lease `work:node:<id>`,
/// never given up or taken by another node.
pub const NODE_SHARE: u32 = SHARES;
/// The share of another node's own chats: never held here.
pub const ELSEWHERE: u32 = SHARES + 1;

/// Where a share held by this node stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Stage {
    /// Just taken: what the last holder left is not recovered yet.
    Taken,
    /// Recovered: its lanes may send.
    Recovered,
    /// The first look handed over what was open: the sink hands its new events over.
    CaughtUp,
}

#[derive(Debug, Clone, Copy)]
struct Share {
    held: Held,
    stage: Stage,
    /// Being given up: its new events are left in the inbox for the next holder.
    leaving: bool,
    /// Events the sink recorded and left open for a look, before the share was caught up.
    left_open: u64,
}

/// This node's shares of the work.
pub struct WorkShares {
    shared: Option<Shared>,
}

struct Shared {
    store: Store,
    node: String,
    timings: Timings,
    held: Mutex<BTreeMap<u32, Share>>,
    /// A share this node held that lapsed or went to another node while it was held.
    lost: Mutex<Option<u32>>,
    /// How many shares this node holds beyond its fair part.
    surplus: AtomicUsize,
    /// Shares given up whose lease is not let go in the store yet: not free to take back.
    letting_go: Mutex<HashSet<u32>>,
    /// The shares found free at the last round: taken at the next one even beyond the
    /// fair part, so no share is left without a holder while the nodes' count is stale.
    free_before: Mutex<HashSet<u32>>,
    /// The nodes alive at the last round, this one included.
    alive: AtomicUsize,
}

impl WorkShares {
    /// The only node: every share is its own, always.
    pub fn single() -> WorkShares {
        WorkShares { shared: None }
    }

    pub(super) fn shared(store: Store, node: String, timings: Timings) -> WorkShares {
        WorkShares {
            shared: Some(Shared {
                store,
                node,
                timings,
                held: Mutex::new(BTreeMap::new()),
                lost: Mutex::new(None),
                surplus: AtomicUsize::new(0),
                letting_go: Mutex::new(HashSet::new()),
                free_before: Mutex::new(HashSet::new()),
                alive: AtomicUsize::new(1),
            }),
        }
    }

    /// How many nodes were alive at the last round, this one included (1 on a node of its
    /// own).
    pub fn nodes_alive(&self) -> usize {
        self.shared
            .as_ref()
            .map_or(1, |s| s.alive.load(Ordering::Relaxed).max(1))
    }

    /// The share `chat` falls in: one of the [`SHARES`], or, for a web chat's chat (the
    /// page names the node that serves it), [`NODE_SHARE`] on that node and [`ELSEWHERE`]
    /// on the others.
    pub fn of(&self, chat: &ChatRef) -> u32 {
        self.of_parts(chat.platform, chat.account.as_deref(), &chat.chat_id)
    }

    /// [`WorkShares::of`] for a chat given by its parts (as delivery keys its lanes).
    pub fn of_parts(&self, platform: Platform, account: Option<&str>, chat_id: &str) -> u32 {
        if let (Some(shared), Some(account), Platform::Web) = (&self.shared, account, platform) {
            return if account == shared.node {
                NODE_SHARE
            } else {
                ELSEWHERE
            };
        }
        hermes_adapter::work_share(platform, account, chat_id, SHARES)
    }

    /// The lease share `share` is held under.
    fn lease_of(shared: &Shared, share: u32) -> String {
        if share == NODE_SHARE {
            format!("work:node:{}", shared.node)
        } else {
            lease_name(share)
        }
    }

    fn held(shared: &Shared) -> std::sync::MutexGuard<'_, BTreeMap<u32, Share>> {
        shared.held.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Share `share` as this node holds it, while its local deadline has not passed.
    fn current(&self, share: u32) -> Option<Share> {
        let shared = self.shared.as_ref()?;
        Self::held(shared)
            .get(&share)
            .copied()
            .filter(|s| Instant::now() < s.held.until)
    }

    /// Whether this node may send `chat`'s messages now.
    pub fn may_send(&self, chat: &ChatRef) -> bool {
        self.shared.is_none()
            || self
                .current(self.of(chat))
                .is_some_and(|s| s.stage >= Stage::Recovered)
    }

    /// Whether the sink may hand an event of `share` it just recorded to the router
    /// itself. An event of a share this node holds but has not caught up with is left for
    /// a look, and counted: a look that read the open events before it was written must
    /// not mark the share caught up (the sink would then hand a later event over before
    /// this one).
    pub fn sink_may_hand_over(&self, share: u32) -> bool {
        let Some(shared) = &self.shared else {
            return true;
        };
        let now = Instant::now();
        let mut held = Self::held(shared);
        match held.get_mut(&share) {
            Some(s) if now < s.held.until => {
                if s.stage == Stage::CaughtUp && !s.leaving {
                    return true;
                }
                s.left_open += 1;
                false
            }
            _ => false,
        }
    }

    /// Where the sink's count of events left open stands for each of `shares`, before a
    /// look reads the open events ([`WorkShares::caught_up`]).
    pub fn left_open(&self, shares: &[u32]) -> Vec<(u32, u64)> {
        let Some(shared) = &self.shared else {
            return Vec::new();
        };
        let held = Self::held(shared);
        shares
            .iter()
            .filter_map(|n| held.get(n).map(|s| (*n, s.left_open)))
            .collect()
    }

    /// A look handed over the open events it read: the shares the sink left nothing open
    /// in since `before` are caught up; the others wait for the next look, which reads
    /// what the sink left.
    pub fn caught_up(&self, before: &[(u32, u64)]) -> bool {
        let Some(shared) = &self.shared else {
            return true;
        };
        let mut held = Self::held(shared);
        let mut all = true;
        for (share, left_open) in before {
            if let Some(s) = held.get_mut(share) {
                if s.left_open == *left_open {
                    s.stage = s.stage.max(Stage::CaughtUp);
                } else {
                    all = false;
                }
            }
        }
        all
    }

    /// The lease `chat`'s turns are written under, and its token, while this node holds it.
    pub fn fence(&self, chat: &ChatRef) -> Option<(String, i64)> {
        let shared = self.shared.as_ref()?;
        let share = self.of(chat);
        self.current(share)
            .map(|s| (Self::lease_of(shared, share), s.held.token))
    }

    /// The shares held at `stage`.
    pub fn at(&self, stage: Stage) -> Vec<u32> {
        self.shares_where(|s| s.stage == stage)
    }

    /// The shares whose open events a look hands over: recovered, and not being given up.
    pub fn ready(&self) -> Vec<u32> {
        self.shares_where(|s| s.stage >= Stage::Recovered && !s.leaving)
    }

    /// Every share of the work held now ([`NODE_SHARE`] aside: it is never given up).
    pub fn all_held(&self) -> Vec<u32> {
        self.shares_where(|_| true)
            .into_iter()
            .filter(|&n| n != NODE_SHARE)
            .collect()
    }

    fn shares_where(&self, keep: impl Fn(&Share) -> bool) -> Vec<u32> {
        let Some(shared) = &self.shared else {
            return Vec::new();
        };
        let now = Instant::now();
        Self::held(shared)
            .iter()
            .filter(|(_, s)| now < s.held.until && keep(s))
            .map(|(n, _)| *n)
            .collect()
    }

    /// Move `shares` on to `stage` (a share given up meanwhile stays given up).
    pub fn reached(&self, shares: &[u32], stage: Stage) {
        let Some(shared) = &self.shared else {
            return;
        };
        let mut held = Self::held(shared);
        for share in shares {
            if let Some(s) = held.get_mut(share) {
                s.stage = s.stage.max(stage);
            }
        }
    }

    /// Mark `share` as being given up (`true`) or kept after all (`false`).
    pub fn leaving(&self, share: u32, leaving: bool) {
        if let Some(shared) = &self.shared
            && let Some(s) = Self::held(shared).get_mut(&share)
        {
            s.leaving = leaving;
        }
    }

    /// How many shares this node should give up, as they fall quiet.
    pub fn surplus(&self) -> usize {
        self.shared
            .as_ref()
            .map_or(0, |s| s.surplus.load(Ordering::Relaxed))
    }

    /// Stop holding `share` here, at once: nothing of it is sent or written by this node
    /// from now on. Its lease stays this node's in the store until [`WorkShares::release`]
    /// (or until it lapses), so no other node takes it while a send is still under way.
    pub fn stop_holding(&self, share: u32) -> Option<i64> {
        let shared = self.shared.as_ref()?;
        let was = Self::held(shared).remove(&share)?;
        shared
            .letting_go
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(share);
        let _ = shared
            .surplus
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1));
        Some(was.held.token)
    }

    /// Let `share`'s lease go in the store, so another node takes it at once.
    pub async fn release(&self, share: u32, token: i64) {
        let Some(shared) = &self.shared else {
            return;
        };
        tracing::info!(
            share,
            "cluster: this node gives a share of the work up to even the load"
        );
        if let Err(e) = shared
            .store
            .lease_release(&Self::lease_of(shared, share), &shared.node, token)
            .await
        {
            tracing::warn!(share, error = %e, "cluster: could not let a share go; it lapses by itself");
        }
        shared
            .letting_go
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&share);
    }

    /// A share this node held and lost without giving it up (a pause, a partition): its
    /// local deadline passed, or the store says another node has it.
    pub fn lost(&self) -> Option<u32> {
        let shared = self.shared.as_ref()?;
        if let Some(share) = *shared.lost.lock().unwrap_or_else(|e| e.into_inner()) {
            return Some(share);
        }
        let now = Instant::now();
        Self::held(shared)
            .iter()
            .find(|(_, s)| now >= s.held.until)
            .map(|(n, _)| *n)
    }

    /// The shares' leases this node holds, with their tokens.
    pub fn leases(&self) -> Vec<(String, i64)> {
        let Some(shared) = &self.shared else {
            return Vec::new();
        };
        let now = Instant::now();
        Self::held(shared)
            .iter()
            .filter(|(_, s)| now < s.held.until)
            .map(|(n, s)| (Self::lease_of(shared, *n), s.held.token))
            .collect()
    }

    /// Renew the shares held, and take free ones up to the fair part, every
    /// `store.lease_renew` until `shutdown`; then let every share go.
    pub(super) async fn keep(&self, shutdown: CancellationToken) {
        let Some(shared) = &self.shared else {
            return;
        };
        loop {
            let round = tokio::time::Instant::now();
            self.renew(shared).await;
            self.balance(shared).await;
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = tokio::time::sleep_until(round + shared.timings.renew) => {}
            }
        }
        let held: Vec<(u32, Share)> = std::mem::take(&mut *Self::held(shared))
            .into_iter()
            .collect();
        for (share, s) in held {
            let _ = shared
                .store
                .lease_release(&Self::lease_of(shared, share), &shared.node, s.held.token)
                .await;
        }
    }

    async fn renew(&self, shared: &Shared) {
        let ttl = shared.timings.ttl;
        let held: Vec<(u32, i64)> = Self::held(shared)
            .iter()
            .map(|(n, s)| (*n, s.held.token))
            .collect();
        if held.is_empty() {
            return;
        }
        let names = held
            .iter()
            .map(|(n, _)| Self::lease_of(shared, *n))
            .collect();
        let sent = Instant::now();
        let until = sent + ttl.saturating_sub(shared.timings.renew);
        let tokens = match shared
            .store
            .lease_take_all(names, &shared.node, ttl.as_millis() as i64)
            .await
        {
            Ok(tokens) => tokens,
            // Kept until their local deadline: the store may answer again before it.
            Err(e) => {
                tracing::warn!(error = %e, "cluster: could not renew the shares of the work");
                return;
            }
        };
        for ((share, token), now) in held.into_iter().zip(tokens) {
            if now == Some(token) {
                if let Some(s) = Self::held(shared).get_mut(&share) {
                    s.held.until = until;
                }
            } else if Self::held(shared)
                .get(&share)
                .is_some_and(|s| s.held.token == token)
            {
                // Lapsed in between (a new token) or taken: whatever this node does with
                // it now may be overtaken. (A share given up meanwhile is not lost.)
                tracing::warn!(
                    share,
                    "cluster: a share of the work lapsed while this node held it"
                );
                *shared.lost.lock().unwrap_or_else(|e| e.into_inner()) = Some(share);
            }
        }
    }

    async fn balance(&self, shared: &Shared) {
        let ttl_ms = shared.timings.ttl.as_millis() as i64;
        let others: Vec<String> = match shared.store.nodes().await {
            Ok(nodes) => nodes
                .into_iter()
                .filter(|n| n.id != shared.node && n.silent_ms <= ttl_ms)
                .map(|n| n.id)
                .collect(),
            Err(e) => {
                tracing::warn!(error = %e, "cluster: could not count the nodes");
                return;
            }
        };
        let alive = others.len() + 1;
        shared.alive.store(alive, Ordering::Relaxed);
        let fair = SHARES.div_ceil(alive as u32) as usize;
        let leases = match shared.store.leases().await {
            Ok(leases) => leases,
            Err(e) => {
                tracing::warn!(error = %e, "cluster: could not read the leases");
                return;
            }
        };
        // A share held under this node's id but not in this process's hands was its last
        // run's (a restart in place): it is taken back at once.
        let taken: HashSet<u32> = leases
            .iter()
            .filter(|l| l.left_ms >= 0 && l.holder != shared.node)
            .filter_map(|l| l.name.strip_prefix("work:")?.parse().ok())
            .collect();
        // A share given up stays out of reach here until its lease is let go or has
        // lapsed in the store (taking it back under the same token would let the
        // pending release end it while this node holds it again).
        let letting_go = {
            let live_ours: HashSet<u32> = leases
                .iter()
                .filter(|l| l.left_ms >= 0 && l.holder == shared.node)
                .filter_map(|l| l.name.strip_prefix("work:")?.parse().ok())
                .collect();
            let mut letting_go = shared.letting_go.lock().unwrap_or_else(|e| e.into_inner());
            letting_go.retain(|n| live_ours.contains(n));
            letting_go.clone()
        };
        // This node's own share is not counted: it is not one of the work's.
        let (mine, ours): (usize, HashSet<u32>) = {
            let held = Self::held(shared);
            let ours: HashSet<u32> = held.keys().copied().collect();
            (ours.iter().filter(|&&n| n != NODE_SHARE).count(), ours)
        };
        // Each node starts looking at a different share, so nodes starting together do
        // not all race for the same ones.
        let start =
            hermes_adapter::work_share(hermes_adapter::Platform::Web, None, &shared.node, SHARES);
        let free: Vec<u32> = (0..SHARES)
            .map(|n| (start + n) % SHARES)
            .filter(|n| !taken.contains(n) && !ours.contains(n) && !letting_go.contains(n))
            .collect();
        let free_before = std::mem::replace(
            &mut *shared.free_before.lock().unwrap_or_else(|e| e.into_inner()),
            free.iter().copied().collect(),
        );
        // Up to the fair part, and those left free since the last round, taken in one trip.
        let mut wanted = Vec::new();
        let mut left_free = 0;
        for share in free {
            if mine + wanted.len() < fair || free_before.contains(&share) {
                wanted.push(share);
            } else {
                left_free += 1;
            }
        }
        let mut holding = mine;
        if !ours.contains(&NODE_SHARE) {
            wanted.push(NODE_SHARE);
        }
        if !wanted.is_empty() {
            let names = wanted.iter().map(|n| Self::lease_of(shared, *n)).collect();
            let sent = Instant::now();
            let until = sent + shared.timings.ttl.saturating_sub(shared.timings.renew);
            match shared
                .store
                .lease_take_all(names, &shared.node, ttl_ms)
                .await
            {
                Ok(tokens) => {
                    for (share, token) in wanted.into_iter().zip(tokens) {
                        let Some(token) = token else { continue };
                        tracing::info!(
                            share,
                            token,
                            "cluster: this node takes a share of the work"
                        );
                        Self::held(shared).insert(
                            share,
                            Share {
                                held: Held { token, until },
                                stage: Stage::Taken,
                                left_open: 0,
                                leaving: false,
                            },
                        );
                        if share != NODE_SHARE {
                            holding += 1;
                        }
                    }
                }
                Err(e) => {
                    left_free += wanted.len();
                    tracing::warn!(error = %e, "cluster: could not take shares of the work");
                }
            }
        }
        // Surplus shares are given up only while every share has a holder: while some are
        // free, the nodes' count may be stale (a node that died still counted), and giving
        // shares up would only leave more without one.
        let theirs: Vec<usize> = others
            .iter()
            .map(|node| {
                leases
                    .iter()
                    .filter(|l| {
                        l.left_ms >= 0 && l.holder == *node && is_share_of_the_work(&l.name)
                    })
                    .count()
            })
            .collect();
        let surplus = if left_free == 0 {
            surplus_of(holding, &theirs)
        } else {
            0
        };
        shared.surplus.store(surplus, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    /// Node a's shares on a store of its own, holding `share` at `stage`.
    fn holding(share: u32, stage: Stage) -> WorkShares {
        let store = Store::open_in_memory().unwrap();
        let timings = Timings {
            ttl: Duration::from_secs(10),
            renew: Duration::from_secs(1),
        };
        let shares = WorkShares::shared(store, "node-a".into(), timings);
        let shared = shares.shared.as_ref().unwrap();
        let held = Held {
            token: 1,
            until: Instant::now() + Duration::from_secs(60),
        };
        WorkShares::held(shared).insert(
            share,
            Share {
                held,
                stage,
                leaving: false,
                left_open: 0,
            },
        );
        shares
    }

    #[test]
    fn shares_are_given_up_until_no_node_is_short() {
        // Two nodes, one just started: half.
        assert_eq!(surplus_of(16, &[0]), 8);
        assert_eq!(surplus_of(8, &[8]), 0);
        // Five nodes: ⌈16/5⌉ = 4 each would leave the fifth with none.
        assert_eq!(surplus_of(4, &[4, 4, 4, 0]), 1);
        assert_eq!(surplus_of(4, &[4, 4, 3, 1]), 1);
        assert_eq!(surplus_of(4, &[3, 3, 3, 3]), 0);
        assert_eq!(surplus_of(3, &[4, 4, 4, 1]), 0, "at the rounded-down part");
        // Three nodes: 6/5/5.
        assert_eq!(surplus_of(6, &[5, 5]), 0);
        assert_eq!(surplus_of(6, &[6, 4]), 1);
        assert_eq!(surplus_of(7, &[5, 4]), 1);
    }

    /// A look reads a share's open events; meanwhile the sink records e1 and leaves it for
    /// a look. Were the share marked caught up at the end of that look, the sink would hand
    /// e2 over at once, before the next look hands e1 over.
    #[test]
    fn a_share_is_not_caught_up_by_a_look_that_missed_an_event_the_sink_left_open() {
        let shares = holding(3, Stage::Recovered);
        let before = shares.left_open(&[3]);
        assert!(!shares.sink_may_hand_over(3), "e1 is left for a look");
        assert!(!shares.caught_up(&before), "the look did not see e1");
        assert!(!shares.sink_may_hand_over(3), "e2 is left for a look too");
        // The next look reads both and hands them over in order.
        let before = shares.left_open(&[3]);
        assert!(shares.caught_up(&before));
        assert!(
            shares.sink_may_hand_over(3),
            "from now on the sink hands over"
        );
        // A share being given up, or another node's, is never the sink's to hand over.
        shares.leaving(3, true);
        assert!(!shares.sink_may_hand_over(3));
        assert!(!shares.sink_may_hand_over(4));
    }
}
