//! Leases and nodes: what lets several daemons share one store (docs/scaling.md). A lease
//! names something only one node may do at a time (poll Telegram for one bot, run a
//! Discord shard); it is held until `expires_at` by the store's clock, renewed by its
//! holder, and taken by another node once it lapses. Its `token` grows whenever it changes
//! hands, so work done under an older token can be told from the holder's (fencing).
//! Each node also says it is alive (`nodes`), for `status --cluster`.

use std::collections::HashSet;
use std::sync::Arc;

use hermes_adapter::ChatRef;
use rusqlite::params;

use super::db::{Db, Optional};
use super::{Store, StoreError};

/// A lease as the store has it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseRow {
    pub name: String,
    pub holder: String,
    pub token: i64,
    /// Milliseconds it has held it.
    pub held_ms: i64,
    /// Milliseconds left (negative: lapsed).
    pub left_ms: i64,
}

/// A node as the store has it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeRow {
    pub id: String,
    pub version: String,
    /// Milliseconds since it started.
    pub age_ms: i64,
    /// Milliseconds since it last said it was alive.
    pub silent_ms: i64,
}

/// A lease writes are made under: they are refused once this node no longer holds it with
/// this token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fence {
    lease: String,
    holder: String,
    token: i64,
}

impl Fence {
    pub fn new(lease: &str, holder: &str, token: i64) -> Fence {
        Fence {
            lease: lease.to_owned(),
            holder: holder.to_owned(),
            token,
        }
    }
}

/// The fence a chat's turns are written under on a store several nodes share (the lease
/// of the chat's share of the work); `None` when this node may not write them at all.
pub type FenceOf = Arc<dyn Fn(&ChatRef) -> Option<Fence> + Send + Sync>;

/// Refuse the transaction's writes unless `fence` still holds. On PostgreSQL the lease's
/// row is locked against a taker until the transaction ends (`FOR SHARE`), so no node can
/// take the lease between the check and the commit.
fn check_fence(conn: &Db, fence: &Fence) -> Result<(), StoreError> {
    let now = conn.clock_ms_sql();
    let lock = if conn.is_postgres() { " FOR SHARE" } else { "" };
    let sql = format!(
        "SELECT 1 FROM leases WHERE name = ?1 AND holder = ?2 AND token = ?3
           AND expires_at >= {now}{lock}"
    );
    let held = conn
        .prepare_cached(&sql)?
        .query_row(params![fence.lease, fence.holder, fence.token], |_| Ok(()))
        .optional()?;
    match held {
        Some(()) => Ok(()),
        None => Err(StoreError::Fenced(fence.lease.clone())),
    }
}

/// Refuse the transaction's writes unless this node still holds the fences of `chats`
/// (each lease checked once).
pub(super) fn check_fences<'a>(
    conn: &Db,
    fence_of: &Option<FenceOf>,
    chats: impl IntoIterator<Item = &'a ChatRef>,
) -> Result<(), StoreError> {
    let Some(fence_of) = fence_of else {
        return Ok(());
    };
    let mut checked = HashSet::new();
    for chat in chats {
        let Some(fence) = fence_of(chat) else {
            return Err(StoreError::Fenced(format!(
                "the share of the work of {}",
                chat.conversation()
            )));
        };
        if checked.insert(fence.lease.clone()) {
            check_fence(conn, &fence)?;
        }
    }
    Ok(())
}

/// [`Store::lease_take`] on a connection.
fn take_in(conn: &Db, name: &str, holder: &str, ttl_ms: i64) -> Result<Option<i64>, StoreError> {
    let now = conn.clock_ms_sql();
    let sql = format!(
        "INSERT INTO leases (name, holder, token, taken_at, expires_at)
         VALUES (?1, ?2, 1, {now}, {now} + ?3)
         ON CONFLICT (name) DO UPDATE SET
            token = CASE WHEN leases.holder = excluded.holder AND leases.expires_at >= {now}
                 THEN leases.token ELSE leases.token + 1 END,
            taken_at = CASE WHEN leases.holder = excluded.holder AND leases.expires_at >= {now}
            THEN leases.taken_at ELSE excluded.taken_at END,
            holder = excluded.holder,
            expires_at = excluded.expires_at
         WHERE leases.holder = excluded.holder OR leases.expires_at < {now}
         RETURNING token"
    );
    let mut stmt = conn.prepare_cached(&sql)?;
    let token = stmt
        .query_map(params![name, holder, ttl_ms], |r| r.get(0))?
        .next();
    Ok(token.transpose()?)
}

impl Store {
    /// From now on, the end of a turn (and a claim of a row with choices) is written only
    /// under the fence `fence_of` gives for its chat: a node that lost the chat's share of
    /// the work (a pause, a partition) cannot write a turn's answer beside the node that
    /// took over.
    pub fn fence_by(&self, fence_of: FenceOf) {
        *self.fence.write().unwrap_or_else(|e| e.into_inner()) = Some(fence_of);
    }

    /// The fences writes are made under, if any.
    pub(super) fn fence(&self) -> Option<FenceOf> {
        self.fence.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Take lease `name` for `holder` for `ttl_ms`, or renew it when `holder` has it:
    /// its token, or `None` while another node holds it. A lapsed lease is taken with a
    /// new token, also by its last holder (what it did under the old one may have been
    /// overtaken).
    pub async fn lease_take(
        &self,
        name: &str,
        holder: &str,
        ttl_ms: i64,
    ) -> Result<Option<i64>, StoreError> {
        let (name, holder) = (name.to_owned(), holder.to_owned());
        self.call(move |conn| take_in(conn, &name, &holder, ttl_ms))
            .await
    }

    /// Renew (or take again) every lease of `names` for `holder`, in one trip to the
    /// store: each one's token, or `None` where another node holds it now. Under load, a
    /// share of the work renewed one by one could wait behind the turns' writes past
    /// its deadline.
    pub async fn lease_take_all(
        &self,
        names: Vec<String>,
        holder: &str,
        ttl_ms: i64,
    ) -> Result<Vec<Option<i64>>, StoreError> {
        let holder = holder.to_owned();
        self.call(move |conn| {
            names
                .iter()
                .map(|name| take_in(conn, name, &holder, ttl_ms))
                .collect()
        })
        .await
    }

    /// Let lease `name` go at once (a clean stop), if `holder` still has it with `token`;
    /// the token is kept, so the next holder's is higher.
    pub async fn lease_release(
        &self,
        name: &str,
        holder: &str,
        token: i64,
    ) -> Result<bool, StoreError> {
        let (name, holder) = (name.to_owned(), holder.to_owned());
        self.call(move |conn| {
            Ok(conn.execute(
                "UPDATE leases SET expires_at = 0 WHERE name = ?1 AND holder = ?2 AND token = ?3",
                params![name, holder, token],
            )? == 1)
        })
        .await
    }

    /// Every lease, by name.
    pub async fn leases(&self) -> Result<Vec<LeaseRow>, StoreError> {
        self.call(|conn| {
            let now = conn.clock_ms_sql();
            let sql = format!(
                "SELECT name, holder, token, {now} - taken_at, expires_at - {now}
                 FROM leases ORDER BY name"
            );
            let mut stmt = conn.prepare_cached(&sql)?;
            let rows = stmt.query_map(params![], |r| {
                Ok(LeaseRow {
                    name: r.get(0)?,
                    holder: r.get(1)?,
                    token: r.get(2)?,
                    held_ms: r.get(3)?,
                    left_ms: r.get(4)?,
                })
            })?;
            Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
        })
        .await
    }

    /// Node `id` (running `version`, started `started_ms` ago by its own count) is alive.
    pub async fn node_beat(&self, id: &str, version: &str, up_ms: i64) -> Result<(), StoreError> {
        let (id, version) = (id.to_owned(), version.to_owned());
        self.call_relaxed(move |conn| {
            let now = conn.clock_ms_sql();
            let sql = format!(
                "INSERT INTO nodes (id, version, started_at, seen_at) VALUES (?1, ?2, {now} - ?3, {now})
                 ON CONFLICT (id) DO UPDATE SET version = excluded.version,
                    started_at = excluded.started_at, seen_at = excluded.seen_at"
            );
            conn.prepare_cached(&sql)?
                .execute(params![id, version, up_ms])?;
            // Nodes silent for a day are gone (moved, renamed, or their home with them).
            conn.prepare_cached(&format!("DELETE FROM nodes WHERE seen_at < {now} - 86400000"))?
                .execute(params![])?;
            Ok(())
        })
        .await
    }

    /// Every node that has run on this store, the most recently seen first.
    pub async fn nodes(&self) -> Result<Vec<NodeRow>, StoreError> {
        self.call(|conn| {
            let now = conn.clock_ms_sql();
            let sql = format!(
                "SELECT id, version, {now} - started_at, {now} - seen_at FROM nodes
                 ORDER BY seen_at DESC, id"
            );
            let mut stmt = conn.prepare_cached(&sql)?;
            let rows = stmt.query_map(params![], |r| {
                Ok(NodeRow {
                    id: r.get(0)?,
                    version: r.get(1)?,
                    age_ms: r.get(2)?,
                    silent_ms: r.get(3)?,
                })
            })?;
            Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn a_lease_is_held_by_one_node_until_it_lapses_and_changes_hands_with_a_new_token(
        store: Store,
    ) {
        let a = store
            .lease_take("telegram:1:poll", "a", 60_000)
            .await
            .unwrap();
        assert_eq!(a, Some(1));
        assert_eq!(
            store
                .lease_take("telegram:1:poll", "b", 60_000)
                .await
                .unwrap(),
            None,
            "held by a"
        );
        assert_eq!(
            store
                .lease_take("telegram:1:poll", "a", 60_000)
                .await
                .unwrap(),
            Some(1),
            "renewed: the same token"
        );
        // It lapses (a short lease), and b takes it with a new token.
        store.lease_take("telegram:1:poll", "a", 1).await.unwrap();
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        assert_eq!(
            store
                .lease_take("telegram:1:poll", "b", 60_000)
                .await
                .unwrap(),
            Some(2)
        );
        // a, back from a pause, has lost it; its release of the old token does nothing.
        assert_eq!(
            store
                .lease_take("telegram:1:poll", "a", 60_000)
                .await
                .unwrap(),
            None
        );
        assert!(
            !store
                .lease_release("telegram:1:poll", "a", 1)
                .await
                .unwrap()
        );
        // b lets go; a takes it next with a higher token.
        assert!(
            store
                .lease_release("telegram:1:poll", "b", 2)
                .await
                .unwrap()
        );
        assert_eq!(
            store
                .lease_take("telegram:1:poll", "a", 60_000)
                .await
                .unwrap(),
            Some(3)
        );
        let leases = store.leases().await.unwrap();
        assert_eq!(leases.len(), 1);
        assert_eq!((leases[0].holder.as_str(), leases[0].token), ("a", 3));
        assert!(leases[0].left_ms > 50_000, "{leases:?}");
    }

    async fn nodes_say_they_are_alive(store: Store) {
        store.node_beat("a", "0.1.0", 5_000).await.unwrap();
        store.node_beat("b", "0.1.0", 1_000).await.unwrap();
        store.node_beat("a", "0.1.0", 6_000).await.unwrap();
        let nodes = store.nodes().await.unwrap();
        assert_eq!(nodes.len(), 2);
        let a = nodes.iter().find(|n| n.id == "a").unwrap();
        assert!((5_900..7_000).contains(&a.age_ms), "{a:?}");
        assert!(a.silent_ms < 1_000, "{a:?}");
    }

    async fn a_node_that_lost_a_chats_share_cannot_write_its_turns_end(store: Store) {
        use crate::store::tests::direct_message;
        use crate::store::{InboxState, NewOutboxRow, TurnRecord};
        // Ada's chat (Telegram 42) is written under lease `work:12`; no other chat is ours.
        let token = store
            .lease_take("work:12", "a", 60_000)
            .await
            .unwrap()
            .unwrap();
        store.fence_by(Arc::new(move |chat: &ChatRef| {
            (chat.chat_id == "42").then(|| Fence::new("work:12", "a", token))
        }));
        let mut first = Vec::new();
        for id in ["e1", "e2"] {
            first.push(
                store
                    .inbox_record(direct_message(id))
                    .await
                    .unwrap()
                    .unwrap(),
            );
        }
        let prompt = NewOutboxRow {
            chat: direct_message("e1").chat,
            body: hermes_adapter::MessageBody::plain("Run it?"),
            reply_to: None,
            choices: vec![hermes_adapter::Choice {
                id: "d:1".into(),
                label: "Deny".into(),
                short_label: None,
                style: hermes_adapter::ChoiceStyle::Danger,
            }],
            file: None,
            edit_of: None,
        };
        let answered =
            |id: i64| TurnRecord::outcome(vec![id], InboxState::Done, "ok", vec![prompt.clone()]);
        let rows = store.finish_turn(answered(first[0])).await.unwrap();
        // A notice to a chat of another share (no event answered) is refused.
        let mut elsewhere = prompt.clone();
        elsewhere.chat.chat_id = "43".into();
        let refused = store
            .finish_turn(TurnRecord::outcome(
                Vec::new(),
                InboxState::Done,
                "ok",
                vec![elsewhere],
            ))
            .await
            .unwrap_err();
        assert!(matches!(refused, StoreError::Fenced(_)), "{refused}");
        // a pauses; its lease lapses and b takes the share over.
        store.lease_take("work:12", "a", 1).await.unwrap();
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        assert!(
            store
                .lease_take("work:12", "b", 60_000)
                .await
                .unwrap()
                .is_some()
        );
        let refused = store.finish_turn(answered(first[1])).await.unwrap_err();
        assert!(
            matches!(refused, StoreError::Fenced(ref l) if l == "work:12"),
            "{refused}"
        );
        assert!(store.outbox_claim(rows[0]).await.is_err());
        // Nothing of the refused writes stayed: the event is open, the prompt unclaimed.
        let open = store.inbox_open_events().await.unwrap();
        assert_eq!(open, ["e2"]);
        assert_eq!(store.outbox_pending(&prompt.chat).await.unwrap().len(), 1);
    }

    crate::store::on_both_engines!(
        a_node_that_lost_a_chats_share_cannot_write_its_turns_end,
        a_lease_is_held_by_one_node_until_it_lapses_and_changes_hands_with_a_new_token,
        nodes_say_they_are_alive,
    );
}
