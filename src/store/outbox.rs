//! The outbox: every message the gateway sends is written here before it is sent and marked
//! with the platform's message id once sent (invariant 2). Pending rows survive restarts.

use hermes_adapter::{Button, ChatRef, MessageBody, Platform};
use rusqlite::{Row, params};

use super::{Store, StoreError, chat_from_row, collect_checked, now_ms};

/// A message to be queued.
#[derive(Debug, Clone)]
pub struct NewOutboxRow {
    pub chat: ChatRef,
    pub body: MessageBody,
    pub reply_to: Option<String>,
    pub buttons: Vec<Button>,
}

/// A queued message.
#[derive(Debug, Clone)]
pub struct OutboxRow {
    pub id: i64,
    pub chat: ChatRef,
    pub body: MessageBody,
    pub reply_to: Option<String>,
    pub buttons: Vec<Button>,
    pub attempts: i64,
}

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

    /// Pending messages of one chat, oldest first.
    pub async fn outbox_pending_for(
        &self,
        platform: Platform,
        chat_id: &str,
    ) -> Result<Vec<OutboxRow>, StoreError> {
        let chat_id = chat_id.to_owned();
        self.call(move |conn| {
            let mut stmt = conn.prepare(
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
            let mut stmt = conn.prepare(
                "SELECT platform, chat_id, thread_id, chat_kind FROM outbox WHERE state = 'pending'
                 GROUP BY platform, chat_id ORDER BY MIN(id)",
            )?;
            let rows = stmt.query_map([], chat_from_row)?;
            collect_checked(rows)
        })
        .await
    }

    /// Mark a message sent, with the platform's id for it.
    pub async fn outbox_mark_sent(
        &self,
        id: i64,
        platform_message_id: Option<String>,
    ) -> Result<(), StoreError> {
        self.call(move |conn| {
            conn.execute(
                "UPDATE outbox SET state = 'sent', platform_message_id = ?1, sent_at = ?2,
                    attempts = attempts + 1
                 WHERE id = ?3",
                params![platform_message_id, now_ms(), id],
            )?;
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
            conn.execute(
                "UPDATE outbox SET attempts = attempts + 1, last_error = ?1,
                    state = CASE WHEN ?2 THEN 'failed' ELSE state END
                 WHERE id = ?3",
                params![error, give_up, id],
            )?;
            Ok(())
        })
        .await
    }

    /// Withdraw a row that was not sent yet (a prompt that no longer applies); returns
    /// whether it was still pending.
    pub async fn outbox_withdraw(&self, id: i64, reason: &str) -> Result<bool, StoreError> {
        let reason = reason.to_owned();
        self.call(move |conn| {
            Ok(conn.execute(
                "UPDATE outbox SET state = 'withdrawn', last_error = ?1 WHERE id = ?2 AND state = 'pending'",
                params![reason, id],
            )? > 0)
        })
        .await
    }

    /// The platform message id of a sent row (approval prompts are edited through it).
    pub async fn outbox_platform_id(&self, id: i64) -> Result<Option<String>, StoreError> {
        self.call(move |conn| {
            Ok(conn.query_row(
                "SELECT platform_message_id FROM outbox WHERE id = ?1",
                [id],
                |r| r.get(0),
            )?)
        })
        .await
    }
}

/// Queue rows inside a caller's transaction.
pub(super) fn enqueue_in(
    tx: &rusqlite::Transaction<'_>,
    rows: &[NewOutboxRow],
) -> Result<Vec<i64>, StoreError> {
    let mut ids = Vec::with_capacity(rows.len());
    for row in rows {
        let buttons = (!row.buttons.is_empty()).then(|| encode_buttons(&row.buttons));
        tx.execute(
            "INSERT INTO outbox (platform, chat_id, thread_id, chat_kind, reply_to, markup,
                plain, buttons, created_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
            params![
                row.chat.platform.as_str(),
                row.chat.chat_id,
                row.chat.thread_id,
                row.chat.kind.as_str(),
                row.reply_to,
                row.body.markup,
                row.body.plain,
                buttons,
                now_ms(),
            ],
        )?;
        ids.push(tx.last_insert_rowid());
    }
    Ok(ids)
}

fn row_to_outbox(row: &Row<'_>) -> rusqlite::Result<Result<OutboxRow, String>> {
    let chat = match chat_from_row(row)? {
        Ok(chat) => chat,
        Err(e) => return Ok(Err(e)),
    };
    let buttons: Option<String> = row.get("buttons")?;
    Ok(Ok(OutboxRow {
        id: row.get("id")?,
        chat,
        body: MessageBody {
            markup: row.get("markup")?,
            plain: row.get("plain")?,
        },
        reply_to: row.get("reply_to")?,
        buttons: buttons.map(|b| decode_buttons(&b)).unwrap_or_default(),
        attempts: row.get("attempts")?,
    }))
}

fn encode_buttons(buttons: &[Button]) -> String {
    let list: Vec<[&str; 2]> = buttons
        .iter()
        .map(|b| [b.label.as_str(), b.data.as_str()])
        .collect();
    serde_json::to_string(&list).unwrap_or_default()
}

fn decode_buttons(text: &str) -> Vec<Button> {
    serde_json::from_str::<Vec<[String; 2]>>(text)
        .unwrap_or_default()
        .into_iter()
        .map(|[label, data]| Button { label, data })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use hermes_adapter::ChatKind;

    fn chat() -> ChatRef {
        ChatRef {
            platform: Platform::Telegram,
            chat_id: "42".into(),
            thread_id: None,
            kind: ChatKind::Direct,
        }
    }

    #[tokio::test]
    async fn pending_rows_stay_until_sent_and_keep_their_order() {
        let store = Store::open_in_memory().unwrap();
        let rows = ["one", "two"].map(|t| NewOutboxRow {
            chat: chat(),
            body: MessageBody::plain(t),
            reply_to: None,
            buttons: vec![Button {
                label: "Deny".into(),
                data: "d:1".into(),
            }],
        });
        let ids = store.outbox_enqueue(rows.to_vec()).await.unwrap();
        assert_eq!(store.outbox_pending_chats().await.unwrap(), vec![chat()]);
        store
            .outbox_mark_sent(ids[0], Some("m1".into()))
            .await
            .unwrap();
        let pending = store
            .outbox_pending_for(Platform::Telegram, "42")
            .await
            .unwrap();
        assert_eq!(pending.len(), 1);
        assert_eq!(pending[0].body.plain, "two");
        assert_eq!(pending[0].buttons[0].data, "d:1");
        store
            .outbox_mark_attempt(ids[1], "boom".into(), true)
            .await
            .unwrap();
        assert!(
            !store.outbox_withdraw(ids[0], "late").await.unwrap(),
            "a sent row stays sent"
        );
        assert!(
            !store.outbox_withdraw(ids[1], "late").await.unwrap(),
            "a failed row stays failed"
        );
        assert!(store.outbox_pending_chats().await.unwrap().is_empty());
        assert_eq!(
            store.outbox_platform_id(ids[0]).await.unwrap().as_deref(),
            Some("m1")
        );
    }
}
