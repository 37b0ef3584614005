//! The outbox: every message the gateway sends, and every edit of one, is written here
//! before it is sent and marked with the platform's message id once sent (invariant 2).
//! Rows of one chat are sent in id order, so an edit can never overtake the message it
//! edits. A row with choices is claimed (`sending`) right before it is sent, so a decision
//! about it (a prompt decided before it went out) either rewrites it first or becomes an
//! edit after it.
//! Pending rows survive restarts; rows caught mid-send by a crash are sent again.

use hermes_adapter::{ChatRef, Choice, DeliveryStatus, MessageBody, OutboundFile, Platform};
use rusqlite::params;

use super::db::{Db, Optional, Row};

use super::{Store, StoreError, chat_from_row, collect_checked, now_ms};

/// A message to be queued.
#[derive(Debug, Clone)]
pub struct NewOutboxRow {
    pub chat: ChatRef,
    pub body: MessageBody,
    pub reply_to: Option<String>,
    pub choices: Vec<Choice>,
    /// A file to send instead of a text (`body` then says what it is, for people reading
    /// the database).
    pub file: Option<OutboundFile>,
    /// An edit of the message of this earlier row instead of a new message.
    pub edit_of: Option<i64>,
}

/// A queued message or edit.
#[derive(Debug, Clone)]
pub struct OutboxRow {
    pub id: i64,
    pub chat: ChatRef,
    pub body: MessageBody,
    pub reply_to: Option<String>,
    pub choices: Vec<Choice>,
    /// For an edit: the outbox row whose platform message it changes.
    pub edit_of: Option<i64>,
    /// A file to send.
    pub file: Option<OutboundFile>,
    pub attempts: i64,
    /// When it was queued (ms since the epoch): how long it has waited.
    pub created_at: i64,
}

/// What settling a message writes: `body` replaces it while it has not gone out; `later`
/// follows it once it has (an edit of it, or on a platform without edits a new message).
pub struct Settled {
    pub body: MessageBody,
    pub later: MessageBody,
}

/// The pending rows of a chat, oldest first (a lane's query, once per message sent).
const PENDING_OF_CHAT: &str = "SELECT * FROM outbox
     WHERE state = 'pending' AND platform = ?1 AND chat_id = ?2 AND account IS NOT DISTINCT FROM ?3
     ORDER BY id";

impl Store {
    /// Queue messages (all or none), returning their ids in order.
    pub async fn outbox_enqueue(&self, rows: Vec<NewOutboxRow>) -> Result<Vec<i64>, StoreError> {
        self.call(move |conn| {
            let tx = conn.transaction()?;
            let ids = enqueue_in(&tx, &rows)?;
            tx.commit()?;
            Ok(ids)
        })
        .await
    }

    /// The pending rows of a chat, oldest first.
    pub async fn outbox_pending(&self, chat: &ChatRef) -> Result<Vec<OutboxRow>, StoreError> {
        let chat = chat.clone();
        self.call(move |conn| {
            let mut stmt = conn.prepare_cached(PENDING_OF_CHAT)?;
            let rows = stmt.query_map(
                params![chat.platform.as_str(), chat.chat_id, chat.account],
                row_to_outbox,
            )?;
            collect_checked(rows)
        })
        .await
    }

    /// Claim one pending row for sending (`pending` → `sending`), as it reads now; `None`
    /// when it is no longer pending. Rows with choices are claimed before they are sent, so
    /// a decision taken meanwhile either rewrites them first or edits them after
    /// ([`Store::outbox_settle`]).
    pub async fn outbox_claim(&self, id: i64) -> Result<Option<OutboxRow>, StoreError> {
        let fence = self.fence();
        self.call(move |conn| {
            let tx = conn.transaction()?;
            let row = tx
                .prepare_cached(
                    "UPDATE outbox SET state = 'sending' WHERE id = ?1 AND state = 'pending'
                     RETURNING *",
                )?
                .query_row([id], row_to_outbox)
                .optional()?
                .transpose()
                .map_err(StoreError::Invalid)?;
            // Claimed only under the share of its chat (dropped unclaimed otherwise).
            if let Some(row) = &row {
                super::leases::check_fences(&tx, &fence, [&row.chat])?;
            }
            tx.commit()?;
            Ok(row)
        })
        .await
    }

    /// Put a claimed row back in the queue (the platform is unreachable for now).
    pub async fn outbox_release(&self, id: i64) -> Result<(), StoreError> {
        self.call(move |conn| {
            conn.prepare_cached(
                "UPDATE outbox SET state = 'pending' WHERE id = ?1 AND state = 'sending'",
            )?
            .execute([id])?;
            Ok(())
        })
        .await
    }

    /// Startup (or a share of the work taken over): the rows of the chats `mine` keeps
    /// that a crash caught mid-send go back in the queue; returns how many.
    pub async fn outbox_requeue_interrupted(
        &self,
        mine: impl Fn(&ChatRef) -> bool + Send + 'static,
    ) -> Result<usize, StoreError> {
        self.call(move |conn| {
            let tx = conn.transaction()?;
            let caught = chats_of_rows(&tx, "state = 'sending'")?;
            let mut requeued = 0;
            for (id, chat) in caught {
                if chat.as_ref().is_none_or(&mine) {
                    requeued += tx
                        .prepare_cached(
                            "UPDATE outbox SET state = 'pending' WHERE id = ?1 AND state = 'sending'",
                        )?
                        .execute([id])?;
                }
            }
            tx.commit()?;
            Ok(requeued)
        })
        .await
    }

    /// The oldest pending row of each chat `mine` keeps: the only rows a lane (which sends
    /// a chat's rows one at a time, in order) can have had in flight when the last run
    /// ended.
    pub async fn outbox_heads(
        &self,
        mine: impl Fn(&ChatRef) -> bool + Send + 'static,
    ) -> Result<Vec<i64>, StoreError> {
        self.call(move |conn| {
            let heads = chats_of_rows(
                conn,
                "id IN (SELECT min(id) FROM outbox WHERE state = 'pending'
                        GROUP BY platform, chat_id, account)",
            )?;
            Ok(heads
                .into_iter()
                .filter(|(_, chat)| chat.as_ref().is_none_or(&mine))
                .map(|(id, _)| id)
                .collect())
        })
        .await
    }

    /// Pending rows of one chat, oldest first.
    #[cfg(test)]
    pub async fn outbox_pending_for(
        &self,
        platform: Platform,
        chat_id: &str,
    ) -> Result<Vec<OutboxRow>, StoreError> {
        let chat_id = chat_id.to_owned();
        self.call(move |conn| {
            let mut stmt = conn.prepare_cached(
                "SELECT * FROM outbox WHERE state = 'pending' AND platform = ?1 AND chat_id = ?2
                 ORDER BY id",
            )?;
            let rows = stmt.query_map(params![platform.as_str(), chat_id], row_to_outbox)?;
            collect_checked(rows)
        })
        .await
    }

    /// Every chat that has pending messages (what delivery picks up at start and on sweeps).
    pub async fn outbox_pending_chats(&self) -> Result<Vec<ChatRef>, StoreError> {
        self.call(|conn| {
            let mut stmt = conn.prepare_cached(
                "SELECT o.platform, o.account, o.chat_id, o.thread_id, o.chat_kind FROM outbox o
                 JOIN (SELECT MIN(id) AS id FROM outbox WHERE state = 'pending'
                       GROUP BY platform, account, chat_id) head ON o.id = head.id
                 ORDER BY o.id",
            )?;
            let rows = stmt.query_map(params![], chat_from_row)?;
            collect_checked(rows)
        })
        .await
    }

    /// Mark a row sent, with the platform's id for the message.
    pub async fn outbox_mark_sent(
        &self,
        id: i64,
        platform_message_id: Option<String>,
    ) -> Result<(), StoreError> {
        self.call(move |conn| {
            conn.prepare_cached(
                "UPDATE outbox SET state = 'sent', platform_message_id = ?1, sent_at = ?2,
                    attempts = attempts + 1
                 WHERE id = ?3",
            )?
            .execute(params![platform_message_id, now_ms(), id])?;
            Ok(())
        })
        .await
    }

    /// Count a failed attempt; with `give_up` the row leaves the queue as `failed`.
    pub async fn outbox_mark_attempt(
        &self,
        id: i64,
        error: String,
        give_up: bool,
    ) -> Result<(), StoreError> {
        self.call(move |conn| {
            conn.prepare_cached(
                "UPDATE outbox SET attempts = attempts + 1, last_error = ?1,
                    state = CASE WHEN ?2 THEN 'failed' ELSE state END
                 WHERE id = ?3",
            )?
            .execute(params![error, give_up, id])?;
            Ok(())
        })
        .await
    }

    /// Change what a message says once a decision about it is known (an approval prompt
    /// that was answered or expired), dropping its choices. A row still queued is rewritten
    /// in place, so it never goes out with live choices; a row sent (or being sent) gets an
    /// edit queued behind it; a row that never went out is followed by a new message.
    /// `rewrite` gets the row's chat and Markdown and returns the new body. Returns the chat
    /// to wake.
    pub async fn outbox_settle(
        &self,
        id: i64,
        rewrite: impl FnOnce(&ChatRef, &str) -> Settled + Send + 'static,
    ) -> Result<ChatRef, StoreError> {
        self.call(move |conn| {
            let tx = conn.transaction()?;
            let row = tx
                .prepare_cached("SELECT * FROM outbox WHERE id = ?1")?
                .query_row([id], |r| {
                    Ok((row_to_outbox(r)?, r.get::<_, String>("state")?))
                })
                .optional()?;
            let Some((row, state)) = row else {
                return Err(StoreError::Invalid(format!("no outbox row {id}")));
            };
            let row = row.map_err(StoreError::Invalid)?;
            let Settled { body, later } = rewrite(&row.chat, &row.body.plain);
            let rewrite_in_place = |tx: &Db| {
                tx.prepare_cached(
                    "UPDATE outbox SET markup = ?1, plain = ?2, choices = NULL WHERE id = ?3",
                )?
                .execute(params![body.markup, body.plain, id])
            };
            match state.as_str() {
                "pending" => {
                    rewrite_in_place(&tx)?;
                }
                "sending" => {
                    // A retry picks up the settled text; an attempt already on its way is
                    // corrected by the edit.
                    rewrite_in_place(&tx)?;
                    insert_in(&tx, &row.chat, &later, None, &[], Some(id))?;
                }
                "sent" => {
                    // Its choices are dead: if the platform hands it back (a held report),
                    // it goes out again without them.
                    tx.prepare_cached("UPDATE outbox SET choices = NULL WHERE id = ?1")?
                        .execute([id])?;
                    insert_in(&tx, &row.chat, &later, None, &[], Some(id))?;
                }
                _ => {
                    // The prompt never went out: the outcome goes with it.
                    insert_in(&tx, &row.chat, &body, None, &[], None)?;
                }
            }
            tx.commit()?;
            Ok(row.chat)
        })
        .await
    }

    /// Change what the message of row `id` says: an edit queued behind it, or, when an edit
    /// of it is still waiting to go out, that edit rewritten (only the latest text matters,
    /// so a message edited often queues one edit at a time). Returns the chat to wake.
    pub async fn outbox_edit(&self, id: i64, body: MessageBody) -> Result<ChatRef, StoreError> {
        self.call(move |conn| {
            let tx = conn.transaction()?;
            let row = tx
                .prepare_cached("SELECT * FROM outbox WHERE id = ?1")?
                .query_row([id], row_to_outbox)
                .optional()?
                .ok_or_else(|| StoreError::Invalid(format!("no outbox row {id}")))?
                .map_err(StoreError::Invalid)?;
            let rewritten = tx
                .prepare_cached(
                    "UPDATE outbox SET markup = ?1, plain = ?2
                     WHERE edit_of = ?3 AND state = 'pending'",
                )?
                .execute(params![body.markup, body.plain, id])?;
            if rewritten == 0 {
                insert_in(&tx, &row.chat, &body, None, &[], Some(id))?;
            }
            tx.commit()?;
            Ok(row.chat)
        })
        .await
    }

    /// Queue the rows of a streamed answer to inbox row `inbox_id`, the first tied to it in
    /// the same transaction, so a turn run again after a crash finds it and edits it instead
    /// of sending a second copy.
    pub async fn outbox_enqueue_streamed(
        &self,
        rows: Vec<NewOutboxRow>,
        inbox_id: Option<i64>,
    ) -> Result<Vec<i64>, StoreError> {
        self.call(move |conn| {
            let tx = conn.transaction()?;
            let ids = enqueue_in(&tx, &rows)?;
            if let (Some(first), Some(inbox)) = (ids.first(), inbox_id) {
                tx.prepare_cached("UPDATE outbox SET stream_for = ?1 WHERE id = ?2")?
                    .execute([inbox, *first])?;
            }
            tx.commit()?;
            Ok(ids)
        })
        .await
    }

    /// The latest streamed answer to any of these inbox rows.
    pub async fn outbox_stream_row(&self, inbox_ids: Vec<i64>) -> Result<Option<i64>, StoreError> {
        self.call(move |conn| {
            let mut stmt = conn.prepare_cached(
                "SELECT MAX(id) FROM outbox WHERE stream_for = ?1 AND action = 'message'",
            )?;
            let mut latest = None;
            for inbox in inbox_ids {
                let found: Option<i64> = stmt.query_row([inbox], |r| r.get(0))?;
                latest = latest.max(found);
            }
            Ok(latest)
        })
        .await
    }

    /// What a row says now (a row being retried may have been settled meanwhile).
    pub async fn outbox_content(
        &self,
        id: i64,
    ) -> Result<Option<(MessageBody, Vec<Choice>)>, StoreError> {
        self.call(move |conn| {
            let row = conn
                .prepare_cached("SELECT * FROM outbox WHERE id = ?1")?
                .query_row([id], row_to_outbox)
                .optional()?;
            let row = row.transpose().map_err(StoreError::Invalid)?;
            Ok(row.map(|r| (r.body, r.choices)))
        })
        .await
    }

    /// The platform message id of a sent row (what an edit of it refers to).
    pub async fn outbox_platform_id(&self, id: i64) -> Result<Option<String>, StoreError> {
        self.call(move |conn| {
            Ok(conn
                .prepare_cached("SELECT platform_message_id FROM outbox WHERE id = ?1")?
                .query_row([id], |r| r.get(0))
                .optional()?
                .flatten())
        })
        .await
    }

    /// Record what the platform said became of a sent message: the row's chat, `None` when
    /// no row has that platform id. A [`DeliveryStatus::Held`] message younger than
    /// `requeue_within` goes back in its chat's queue (pending again, without its platform
    /// id), ahead of what was queued after it, and the answer says so (the caller wakes the
    /// chat); an older one is recorded as failed.
    pub async fn outbox_delivery_report(
        &self,
        platform: Platform,
        platform_message_id: String,
        status: DeliveryStatus,
        requeue_within: std::time::Duration,
    ) -> Result<Option<(ChatRef, bool)>, StoreError> {
        self.call(move |conn| {
            let tx = conn.transaction()?;
            let row = tx
                .prepare_cached(
                    "SELECT * FROM outbox WHERE platform = ?1 AND platform_message_id = ?2",
                )?
                .query_row(
                    params![platform.as_str(), platform_message_id],
                    row_to_outbox,
                )
                .optional()?;
            let Some(row) = row else {
                return Ok(None);
            };
            let row = row.map_err(StoreError::Invalid)?;
            let young = now_ms() - row.created_at < requeue_within.as_millis() as i64;
            let (status, requeue) = match status {
                DeliveryStatus::Held(why) if !young => (
                    DeliveryStatus::Failed(format!("{why}; too old to send again")),
                    false,
                ),
                DeliveryStatus::Held(why) => (DeliveryStatus::Held(why), true),
                other => (other, false),
            };
            let detail = match &status {
                DeliveryStatus::Failed(why) | DeliveryStatus::Held(why) => Some(why.clone()),
                _ => None,
            };
            tx.prepare_cached(
                "UPDATE outbox SET delivery_status = ?1, delivery_detail = ?2,
                    state = CASE WHEN ?3 THEN 'pending' ELSE state END,
                    platform_message_id = CASE WHEN ?3 THEN NULL ELSE platform_message_id END,
                    sent_at = CASE WHEN ?3 THEN NULL ELSE sent_at END
                 WHERE id = ?4",
            )?
            .execute(params![status.as_str(), detail, requeue, row.id])?;
            tx.commit()?;
            Ok(Some((row.chat, requeue)))
        })
        .await
    }
}

/// Queue rows inside a caller's transaction.
pub(super) fn enqueue_in(tx: &Db, rows: &[NewOutboxRow]) -> Result<Vec<i64>, StoreError> {
    rows.iter()
        .map(|row| {
            let id = insert_in(
                tx,
                &row.chat,
                &row.body,
                row.reply_to.as_deref(),
                &row.choices,
                row.edit_of,
            )?;
            if let Some(file) = &row.file {
                let json =
                    serde_json::to_string(file).map_err(|e| StoreError::Invalid(e.to_string()))?;
                tx.prepare_cached("UPDATE outbox SET action = 'file', file = ?1 WHERE id = ?2")?
                    .execute(params![json, id])?;
            }
            Ok(id)
        })
        .collect()
}

fn insert_in(
    tx: &Db,
    chat: &ChatRef,
    body: &MessageBody,
    reply_to: Option<&str>,
    choices: &[Choice],
    edit_of: Option<i64>,
) -> Result<i64, StoreError> {
    let choices = (!choices.is_empty())
        .then(|| serde_json::to_string(choices))
        .transpose()
        .map_err(|e| StoreError::Invalid(e.to_string()))?;
    tx.prepare_cached(
        "INSERT INTO outbox (platform, account, chat_id, thread_id, chat_kind, reply_to, markup,
            plain, choices, action, edit_of, created_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
    )?
    .execute(params![
        chat.platform.as_str(),
        chat.account,
        chat.chat_id,
        chat.thread_id,
        chat.kind.as_str(),
        reply_to,
        body.markup,
        body.plain,
        choices,
        if edit_of.is_some() { "edit" } else { "message" },
        edit_of,
        now_ms(),
    ])?;
    tx.last_insert_rowid()
}

fn row_to_outbox(row: &Row<'_>) -> rusqlite::Result<Result<OutboxRow, String>> {
    let chat = match chat_from_row(row)? {
        Ok(chat) => chat,
        Err(e) => return Ok(Err(e)),
    };
    let choices = match row.get::<_, Option<String>>("choices")? {
        Some(json) => match decode_choices(&json) {
            Some(choices) => choices,
            None => return Ok(Err(format!("unreadable choices {json:?}"))),
        },
        None => Vec::new(),
    };
    let file = match row.get::<_, Option<String>>("file")? {
        Some(json) => match serde_json::from_str(&json) {
            Ok(file) => Some(file),
            Err(e) => return Ok(Err(format!("unreadable file {json:?}: {e}"))),
        },
        None => None,
    };
    Ok(Ok(OutboxRow {
        id: row.get("id")?,
        chat,
        body: MessageBody {
            markup: row.get("markup")?,
            plain: row.get("plain")?,
        },
        reply_to: row.get("reply_to")?,
        choices,
        edit_of: row.get("edit_of")?,
        file,
        attempts: row.get("attempts")?,
        created_at: row.get("created_at")?,
    }))
}

/// Choices as stored: JSON objects, or the `[label, data]` pairs of schema 1–3 (read first:
/// serde would also take a pair as a struct's fields in order).
fn decode_choices(json: &str) -> Option<Vec<Choice>> {
    if let Ok(pairs) = serde_json::from_str::<Vec<[String; 2]>>(json) {
        let legacy = pairs.into_iter().map(|[label, id]| Choice {
            id,
            label,
            short_label: None,
            style: Default::default(),
        });
        return Some(legacy.collect());
    }
    serde_json::from_str::<Vec<Choice>>(json).ok()
}

/// The ids and chats of the rows `condition` picks, oldest first.
/// The ids and chats of the rows `condition` picks, oldest first; `None` for a chat the
/// store cannot read (a newer version's platform, a damaged row), which the caller treats
/// as its own rather than leave the row stuck.
fn chats_of_rows(conn: &Db, condition: &str) -> Result<Vec<(i64, Option<ChatRef>)>, StoreError> {
    let sql = format!(
        "SELECT id, platform, account, chat_id, thread_id, chat_kind FROM outbox
         WHERE {condition} ORDER BY id"
    );
    let mut stmt = conn.prepare_cached(&sql)?;
    let rows = stmt.query_map(params![], |r| {
        let id: i64 = r.get("id")?;
        Ok((id, chat_from_row(r)?.ok()))
    })?;
    Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use hermes_adapter::ChatKind;

    fn chat() -> ChatRef {
        ChatRef {
            platform: Platform::Telegram,
            account: None,
            chat_id: "42".into(),
            thread_id: None,
            kind: ChatKind::Direct,
        }
    }

    fn deny() -> Choice {
        Choice {
            id: "d:1".into(),
            label: "Deny".into(),
            short_label: None,
            style: hermes_adapter::ChoiceStyle::Danger,
        }
    }

    fn rows(texts: &[&str]) -> Vec<NewOutboxRow> {
        texts
            .iter()
            .map(|t| NewOutboxRow {
                chat: chat(),
                body: MessageBody::plain(*t),
                reply_to: None,
                choices: vec![deny()],
                file: None,
                edit_of: None,
            })
            .collect()
    }

    /// SQLite's: PostgreSQL plans a prepared statement generically after five runs anyway.
    #[tokio::test]
    async fn a_lane_query_is_prepared_once_whatever_it_is_bound_to() {
        let store = Store::open_in_memory().unwrap();
        store.outbox_enqueue(rows(&["one"])).await.unwrap();
        let other = ChatRef {
            account: Some("team".into()),
            chat_id: "7".into(),
            ..chat()
        };
        for _ in 0..3 {
            store.outbox_pending(&chat()).await.unwrap();
            store.outbox_pending(&other).await.unwrap();
        }
        let reprepared = store
            .sql_for_tests(|conn| {
                Ok(conn
                    .sqlite()
                    .unwrap()
                    .prepare_cached(PENDING_OF_CHAT)?
                    .get_status(rusqlite::StatementStatus::RePrepare))
            })
            .await
            .unwrap();
        assert_eq!(reprepared, 0, "re-prepared for its bound values");
    }

    async fn rows_are_claimed_in_order_and_stay_until_sent(store: Store) {
        let ids = store.outbox_enqueue(rows(&["one", "two"])).await.unwrap();
        assert_eq!(store.outbox_pending_chats().await.unwrap(), vec![chat()]);
        let pending = store.outbox_pending(&chat()).await.unwrap();
        assert_eq!(pending.iter().map(|r| r.id).collect::<Vec<_>>(), ids);
        assert_eq!(pending[0].body.plain, "one");
        assert_eq!(pending[0].choices, vec![deny()]);
        let claimed = store.outbox_claim(ids[0]).await.unwrap().unwrap();
        assert_eq!(claimed.id, ids[0]);
        assert!(
            store.outbox_claim(ids[0]).await.unwrap().is_none(),
            "claimed once"
        );
        store
            .outbox_mark_sent(ids[0], Some("m1".into()))
            .await
            .unwrap();
        store.outbox_claim(ids[1]).await.unwrap().unwrap();
        // A crash mid-send: the claimed row is queued again at the next start.
        assert_eq!(store.outbox_requeue_interrupted(|_| true).await.unwrap(), 1);
        let again = store.outbox_pending(&chat()).await.unwrap();
        assert_eq!(again.len(), 1);
        assert_eq!(again[0].id, ids[1]);
        store
            .outbox_mark_attempt(ids[1], "boom".into(), true)
            .await
            .unwrap();
        assert!(store.outbox_pending_chats().await.unwrap().is_empty());
        assert_eq!(
            store.outbox_platform_id(ids[0]).await.unwrap().as_deref(),
            Some("m1")
        );
    }

    async fn settling_a_queued_prompt_rewrites_it_and_a_sent_one_gets_an_edit_behind_it(
        store: Store,
    ) {
        let ids = store
            .outbox_enqueue(rows(&["first", "second"]))
            .await
            .unwrap();
        store.outbox_claim(ids[0]).await.unwrap().unwrap();
        store
            .outbox_mark_sent(ids[0], Some("m7".into()))
            .await
            .unwrap();

        // The first row was claimed and sent; settle it: an edit row follows.
        store
            .outbox_settle(ids[0], |_, md| same(format!("{md} — denied")))
            .await
            .unwrap();
        let (_, choices) = store.outbox_content(ids[0]).await.unwrap().unwrap();
        assert!(
            choices.is_empty(),
            "a sent prompt handed back later goes out without live choices"
        );
        // The second row is still queued: rewritten in place, without its choices.
        store
            .outbox_settle(ids[1], |_, md| same(format!("{md} — allowed")))
            .await
            .unwrap();
        let pending = store
            .outbox_pending_for(Platform::Telegram, "42")
            .await
            .unwrap();
        assert_eq!(pending.len(), 2);
        assert_eq!(pending[0].id, ids[1]);
        assert_eq!(pending[0].body.plain, "second — allowed");
        assert!(
            pending[0].choices.is_empty(),
            "no live choices after a decision"
        );
        assert_eq!(pending[1].edit_of, Some(ids[0]));
        assert_eq!(pending[1].body.plain, "first — denied");
    }

    /// A settlement that reads the same before and after the message went out.
    fn same(text: String) -> Settled {
        Settled {
            body: MessageBody::plain(text.clone()),
            later: MessageBody::plain(text),
        }
    }

    async fn settling_a_prompt_being_sent_rewrites_it_for_its_next_attempt_and_edits_after(
        store: Store,
    ) {
        let ids = store.outbox_enqueue(rows(&["prompt"])).await.unwrap();
        let claimed = store.outbox_claim(ids[0]).await.unwrap().unwrap();
        assert_eq!(claimed.choices, vec![deny()]);
        store
            .outbox_settle(ids[0], |_, md| Settled {
                body: MessageBody::plain(format!("{md} — allowed")),
                later: MessageBody::plain("allowed"),
            })
            .await
            .unwrap();
        let (body, choices) = store.outbox_content(ids[0]).await.unwrap().unwrap();
        assert_eq!(body.plain, "prompt — allowed");
        assert!(choices.is_empty(), "a retry goes out decided");
        let edit = store.outbox_pending(&chat()).await.unwrap();
        assert_eq!(edit.len(), 1);
        assert_eq!(
            edit[0].edit_of,
            Some(ids[0]),
            "and an attempt already on its way is corrected"
        );
        assert_eq!(
            edit[0].body.plain, "allowed",
            "by what follows a sent message"
        );
    }

    async fn delivery_reports_land_on_the_row_with_that_platform_id(store: Store) {
        let ids = store.outbox_enqueue(rows(&["hi"])).await.unwrap();
        store
            .outbox_mark_sent(ids[0], Some("wamid.1".into()))
            .await
            .unwrap();
        let found = store
            .outbox_delivery_report(
                Platform::Telegram,
                "wamid.1".into(),
                DeliveryStatus::Read,
                DAY,
            )
            .await
            .unwrap();
        assert!(found.is_some());
        let unknown = store
            .outbox_delivery_report(
                Platform::Telegram,
                "wamid.2".into(),
                DeliveryStatus::Failed("gone".into()),
                DAY,
            )
            .await
            .unwrap();
        assert!(unknown.is_none());
        let status: String = store
            .call(move |c| {
                c.prepare_cached("SELECT delivery_status FROM outbox WHERE id = ?1")?
                    .query_row([ids[0]], |r| r.get(0))
            })
            .await
            .unwrap();
        assert_eq!(status, "read");
    }

    const DAY: std::time::Duration = std::time::Duration::from_secs(86_400);

    async fn a_held_report_queues_a_young_message_again_and_fails_an_old_one(store: Store) {
        let ids = store.outbox_enqueue(rows(&["young", "old"])).await.unwrap();
        for (id, wamid) in [(ids[0], "wamid.Y"), (ids[1], "wamid.O")] {
            store
                .outbox_mark_sent(id, Some(wamid.into()))
                .await
                .unwrap();
        }
        let held = || DeliveryStatus::Held("Meta error 131047".into());
        let young = store
            .outbox_delivery_report(Platform::Telegram, "wamid.Y".into(), held(), DAY)
            .await
            .unwrap();
        assert_eq!(young.map(|(_, requeued)| requeued), Some(true));
        let old = store
            .outbox_delivery_report(
                Platform::Telegram,
                "wamid.O".into(),
                held(),
                std::time::Duration::ZERO,
            )
            .await
            .unwrap();
        assert_eq!(old.map(|(_, requeued)| requeued), Some(false));
        let pending = store.outbox_pending(&chat()).await.unwrap();
        assert_eq!(pending.len(), 1, "only the young one is queued again");
        assert_eq!(pending[0].id, ids[0]);
        let state: (String, String) = store
            .call(move |c| {
                c.prepare_cached("SELECT state, delivery_status FROM outbox WHERE id = ?1")?
                    .query_row([ids[1]], |r| Ok((r.get(0)?, r.get(1)?)))
            })
            .await
            .unwrap();
        assert_eq!(state, ("sent".to_owned(), "failed".to_owned()));
    }

    #[test]
    fn choices_stored_by_the_first_schema_still_read() {
        let old = decode_choices(r#"[["Deny","appr:1:d"]]"#).unwrap();
        assert_eq!(old[0].id, "appr:1:d");
        assert_eq!(old[0].label, "Deny");
    }

    async fn a_message_edited_often_queues_one_edit_at_a_time(store: Store) {
        let ids = store
            .outbox_enqueue(vec![NewOutboxRow {
                chat: chat(),
                body: MessageBody::plain("one"),
                reply_to: None,
                choices: vec![],
                file: None,
                edit_of: None,
            }])
            .await
            .unwrap();
        store
            .outbox_edit(ids[0], MessageBody::plain("one\ntwo"))
            .await
            .unwrap();
        store
            .outbox_edit(ids[0], MessageBody::plain("one\ntwo\nthree"))
            .await
            .unwrap();
        let pending = store.outbox_pending(&chat()).await.unwrap();
        assert_eq!(pending.len(), 2, "the message and one edit");
        assert_eq!(pending[1].edit_of, Some(ids[0]));
        assert_eq!(pending[1].body.plain, "one\ntwo\nthree");

        // Once that edit went out, the next one is a new row.
        store.outbox_mark_sent(pending[1].id, None).await.unwrap();
        store
            .outbox_edit(ids[0], MessageBody::plain("four"))
            .await
            .unwrap();
        let pending = store.outbox_pending(&chat()).await.unwrap();
        assert_eq!(pending.len(), 2);
        assert_eq!(pending[1].body.plain, "four");
    }

    crate::store::on_both_engines!(
        rows_are_claimed_in_order_and_stay_until_sent,
        settling_a_queued_prompt_rewrites_it_and_a_sent_one_gets_an_edit_behind_it,
        settling_a_prompt_being_sent_rewrites_it_for_its_next_attempt_and_edits_after,
        delivery_reports_land_on_the_row_with_that_platform_id,
        a_held_report_queues_a_young_message_again_and_fails_an_old_one,
        a_message_edited_often_queues_one_edit_at_a_time,
    );
}
