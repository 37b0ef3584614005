//! The inbox: every inbound event, recorded before the platform is acknowledged, de-duplicated
//! by the platform's event id, and moved to an end state once handled (invariant 1).
//! The event itself (its text, files, author) is kept in `inbox_payloads` only until it is
//! handled, so the inbox keeps no one's words for longer than that, and never twice: an
//! answered message's words are in the conversation's history. `retention` prunes handled
//! rows, keeping their event ids in `seen_events` while the platform may redeliver them.

use hermes_adapter::{Author, ChatRef, Inbound, InboundKind, InboundMessage, Press};
use rusqlite::params;

use super::db::{Db, Optional, Row};

use super::{Store, StoreError, chat_from_row, now_ms};

/// Where an inbox row stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InboxState {
    /// Recorded, not yet handled (re-dispatched after a restart).
    Received,
    /// Answered.
    Done,
    /// Deliberately not answered (group message not addressed to the bot, unauthorised group
    /// member): nothing was owed to anyone.
    Ignored,
    /// Refused with a reason the sender saw (pairing code, unsupported content).
    Refused,
    /// Failed with an error the sender saw.
    Failed,
}

impl InboxState {
    pub fn as_str(self) -> &'static str {
        match self {
            InboxState::Received => "received",
            InboxState::Done => "done",
            InboxState::Ignored => "ignored",
            InboxState::Refused => "refused",
            InboxState::Failed => "failed",
        }
    }
}

/// A recorded event with its inbox id.
#[derive(Debug, Clone)]
pub struct InboxRow {
    pub id: i64,
    pub event: Inbound,
}

impl Store {
    /// Record an event. Returns `Some(id)` when it is new, `None` when this event id was
    /// recorded before (a redelivery, also of a row pruned since). The whole event is kept
    /// as a versioned JSON payload until it is handled; the inbox's columns are for queries
    /// and people reading the database, and hold no text.
    pub async fn inbox_record(&self, event: Inbound) -> Result<Option<i64>, StoreError> {
        self.inbox_record_as(event, false).await
    }

    /// [`Store::inbox_record`], answered before the record is synced to disk: for events of
    /// one batch, followed by [`Store::sync`] before the platform is told we have them.
    pub async fn inbox_record_unsynced(&self, event: Inbound) -> Result<Option<i64>, StoreError> {
        self.inbox_record_as(event, true).await
    }

    async fn inbox_record_as(
        &self,
        event: Inbound,
        relaxed: bool,
    ) -> Result<Option<i64>, StoreError> {
        let payload = serde_json::to_string(&Payload {
            v: PAYLOAD_VERSION,
            event: &event,
        })
        .map_err(|e| StoreError::Invalid(format!("event not serialisable: {e}")))?;
        let origin = self.origin.clone();
        let record = move |conn: &mut Db| {
            let now = now_ms();
            let (kind, message_id) = match &event.kind {
                InboundKind::Message(m) => ("message", Some(m.message_id.as_str())),
                InboundKind::Press(p) => ("press", p.message_id.as_deref()),
                InboundKind::Command(c) => ("command", c.respond_via.as_deref()),
                InboundKind::Wakeup(_) => ("wakeup", None),
            };
            // The row and its payload land together or not at all: a row without its
            // payload would be a duplicate to every redelivery and unreadable after a
            // restart.
            let tx = conn.transaction()?;
            let inserted = tx
                .prepare_cached(
                    "INSERT INTO inbox (event_id, platform, account, chat_id, thread_id, chat_kind,
                    user_id, user_name, username, is_bot, kind, message_id, state, received_at,
                    updated_at)
                 SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, 'received', ?13, ?13
                 WHERE NOT EXISTS (SELECT 1 FROM seen_events WHERE event_id = ?1)
                 ON CONFLICT(event_id) DO NOTHING",
                )?
                .execute(params![
                    event.event_id,
                    event.chat.platform.as_str(),
                    event.chat.account,
                    event.chat.chat_id,
                    event.chat.thread_id,
                    event.chat.kind.as_str(),
                    event.author.user_id,
                    event.author.display_name,
                    event.author.username,
                    event.author.is_bot,
                    kind,
                    message_id,
                    now,
                ])?;
            if inserted == 0 {
                return Ok(None);
            }
            let id = tx.last_insert_rowid()?;
            tx.prepare_cached("INSERT INTO inbox_payloads (inbox_id, payload) VALUES (?1, ?2)")?
                .execute(params![id, payload])?;
            if tx.is_postgres() {
                // Heard by the node doing the work at the commit (`listen.rs`).
                tx.execute_batch(&format!(
                    "NOTIFY {}, '{origin}'",
                    super::listen::INBOX_CHANNEL
                ))?;
            }
            tx.commit()?;
            Ok(Some(id))
        };
        if relaxed {
            self.call_relaxed(record).await
        } else {
            self.call(record).await
        }
    }

    /// Move rows to an end state, with a short note on the outcome.
    pub async fn inbox_finish(
        &self,
        ids: Vec<i64>,
        state: InboxState,
        outcome: impl Into<String>,
    ) -> Result<(), StoreError> {
        let outcome = outcome.into();
        self.call(move |conn| {
            let tx = conn.transaction()?;
            finish_in(&tx, &ids, state, &outcome)?;
            tx.commit()?;
            Ok(())
        })
        .await
    }

    /// The event ids of the rows not yet handled (cheap: no payloads).
    pub async fn inbox_open_events(&self) -> Result<Vec<String>, StoreError> {
        self.call(|conn| {
            let mut stmt = conn.prepare_cached(
                "SELECT event_id FROM inbox WHERE state = 'received' ORDER BY id",
            )?;
            let ids = stmt.query_map(params![], |r| r.get(0))?;
            Ok(ids.collect::<rusqlite::Result<Vec<String>>>()?)
        })
        .await
    }

    /// Rows still waiting to be handled, oldest first (what a restart must pick up again).
    pub async fn inbox_unfinished(&self) -> Result<Vec<InboxRow>, StoreError> {
        self.call(|conn| {
            let mut stmt = conn.prepare_cached(
                "SELECT inbox.*, inbox_payloads.payload AS open_payload FROM inbox
                 LEFT JOIN inbox_payloads ON inbox_payloads.inbox_id = inbox.id
                 WHERE state = 'received' ORDER BY id",
            )?;
            let rows: Vec<(i64, Result<Inbound, String>)> = stmt
                .query_map(params![], row_to_inbox)?
                .collect::<Result<_, _>>()?;
            drop(stmt);
            readable(conn, rows)
        })
        .await
    }

    /// The rows of these events still waiting to be handled, oldest first (an event
    /// handled meanwhile, or never recorded, is left out).
    pub async fn inbox_open_rows(
        &self,
        event_ids: Vec<String>,
    ) -> Result<Vec<InboxRow>, StoreError> {
        self.call(move |conn| {
            let mut stmt = conn.prepare_cached(
                "SELECT inbox.*, inbox_payloads.payload AS open_payload FROM inbox
                 LEFT JOIN inbox_payloads ON inbox_payloads.inbox_id = inbox.id
                 WHERE inbox.event_id = ?1 AND state = 'received'",
            )?;
            let mut rows: Vec<(i64, Result<Inbound, String>)> = Vec::new();
            for event_id in event_ids {
                for row in stmt.query_map([event_id], row_to_inbox)? {
                    rows.push(row?);
                }
            }
            drop(stmt);
            rows.sort_by_key(|(id, _)| *id);
            readable(conn, rows)
        })
        .await
    }

    /// The state of one event; `"pruned"` for one handled and pruned while its id is kept
    /// for redeliveries, `None` when it was never recorded (or forgotten since).
    pub async fn inbox_state(&self, event_id: &str) -> Result<Option<String>, StoreError> {
        let event_id = event_id.to_owned();
        self.call(move |conn| {
            use super::db::Optional;
            conn.prepare_cached(
                "SELECT state FROM inbox WHERE event_id = ?1
                     UNION ALL SELECT 'pruned' FROM seen_events WHERE event_id = ?1 LIMIT 1",
            )?
            .query_row([event_id], |r| r.get(0))
            .optional()
        })
        .await
    }
}

/// The chats of inbox rows `ids`, inside a caller's transaction.
pub(super) fn chats_in(conn: &Db, ids: &[i64]) -> Result<Vec<ChatRef>, StoreError> {
    let mut stmt = conn.prepare_cached(
        "SELECT platform, account, chat_id, thread_id, chat_kind FROM inbox WHERE id = ?1",
    )?;
    let mut chats = Vec::with_capacity(ids.len());
    for id in ids {
        if let Some(chat) = stmt.query_row([id], chat_from_row).optional()? {
            chats.push(chat.map_err(StoreError::Invalid)?);
        }
    }
    Ok(chats)
}

/// Move rows to an end state inside a caller's transaction; their payloads go (only a row
/// still to be handled is read back).
pub(super) fn finish_in(
    tx: &Db,
    ids: &[i64],
    state: InboxState,
    outcome: &str,
) -> Result<(), StoreError> {
    for id in ids {
        tx.prepare_cached(
            "UPDATE inbox SET state = ?1, outcome = ?2, updated_at = ?3 WHERE id = ?4",
        )?
        .execute(params![state.as_str(), outcome, now_ms(), id])?;
        tx.prepare_cached("DELETE FROM inbox_payloads WHERE inbox_id = ?1")?
            .execute([id])?;
    }
    Ok(())
}

/// The open rows that can be read; one that cannot (a newer version's payload, damage) is
/// ended as failed and said, instead of holding every start back.
fn readable(
    conn: &mut Db,
    rows: Vec<(i64, Result<Inbound, String>)>,
) -> Result<Vec<InboxRow>, StoreError> {
    let mut open = Vec::with_capacity(rows.len());
    for (id, event) in rows {
        match event {
            Ok(event) => open.push(InboxRow { id, event }),
            Err(why) => {
                tracing::error!(
                    row = id,
                    why,
                    "inbox: a message left open cannot be read; it is ended as failed"
                );
                let tx = conn.transaction()?;
                finish_in(&tx, &[id], InboxState::Failed, "unreadable after a restart")?;
                tx.commit()?;
            }
        }
    }
    Ok(open)
}

/// The payload's format version; bump it only for a change `#[serde(default)]` cannot absorb.
const PAYLOAD_VERSION: u32 = 1;

/// What a payload holds.
#[derive(serde::Serialize)]
struct Payload<'a> {
    v: u32,
    event: &'a Inbound,
}

#[derive(serde::Deserialize)]
struct StoredPayload {
    v: u32,
    event: Inbound,
}

fn row_to_inbox(row: &Row<'_>) -> rusqlite::Result<(i64, Result<Inbound, String>)> {
    let id = row.get("id")?;
    // A row recorded since schema 13 has its payload beside it; one before, in its own
    // column (schema 4–12) or only its columns (1–3).
    let payload = match row.get::<_, Option<String>>("open_payload")? {
        Some(json) => Some(json),
        None => row.get::<_, Option<String>>("payload")?,
    };
    let event = match payload {
        Some(json) => match serde_json::from_str::<StoredPayload>(&json) {
            Ok(p) if p.v <= PAYLOAD_VERSION => Ok(p.event),
            Ok(p) => Err(format!(
                "inbox row {id}: payload version {} is newer than ours",
                p.v
            )),
            Err(e) => Err(format!("inbox row {id}: unreadable payload: {e}")),
        },
        None => legacy_event(row)?,
    };
    Ok((id, event))
}

/// An event recorded before payloads existed (schema 1–3), from its columns.
fn legacy_event(row: &Row<'_>) -> rusqlite::Result<Result<Inbound, String>> {
    let chat = match chat_from_row(row)? {
        Ok(chat) => chat,
        Err(e) => return Ok(Err(e)),
    };
    let kind: String = row.get("kind")?;
    let kind = match kind.as_str() {
        "message" => InboundKind::Message(InboundMessage {
            message_id: row
                .get::<_, Option<String>>("message_id")?
                .unwrap_or_default(),
            text: row.get::<_, Option<String>>("text")?.unwrap_or_default(),
            addressed: row.get("addressed")?,
            attachments: Vec::new(),
            unsupported: row.get("unsupported")?,
            reply_to: None,
        }),
        "button" => InboundKind::Press(Press {
            press_id: row
                .get::<_, Option<String>>("press_id")?
                .unwrap_or_default(),
            message_id: row.get("message_id")?,
            choice_id: row
                .get::<_, Option<String>>("button_data")?
                .unwrap_or_default(),
        }),
        other => return Ok(Err(format!("unknown inbox kind {other:?}"))),
    };
    Ok(Ok(Inbound {
        event_id: row.get("event_id")?,
        chat,
        author: Author {
            user_id: row.get("user_id")?,
            display_name: row.get("user_name")?,
            username: row.get("username")?,
            is_bot: row.get("is_bot")?,
        },
        kind,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::tests::direct_message as event;

    async fn an_event_whose_payload_cannot_be_written_is_not_recorded_at_all(store: Store) {
        store
            .sql_for_tests(|conn| {
                conn.execute_batch(if conn.is_postgres() {
                    "CREATE FUNCTION disk_full() RETURNS trigger LANGUAGE plpgsql AS
                         $$ BEGIN RAISE EXCEPTION 'could not extend file: No space left on device'
                            USING ERRCODE = 'disk_full'; END $$;
                     CREATE TRIGGER full_disk BEFORE INSERT ON inbox_payloads
                         FOR EACH ROW EXECUTE FUNCTION disk_full();"
                } else {
                    "CREATE TRIGGER full_disk BEFORE INSERT ON inbox_payloads
                     BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END;"
                })?;
                Ok(())
            })
            .await
            .unwrap();
        let failed = store.inbox_record(event("tg:1")).await.unwrap_err();
        assert!(failed.may_pass(), "a full disk may pass: {failed}");
        assert_eq!(store.inbox_state("tg:1").await.unwrap(), None);
        store
            .sql_for_tests(|conn| {
                conn.execute_batch(if conn.is_postgres() {
                    "DROP TRIGGER full_disk ON inbox_payloads"
                } else {
                    "DROP TRIGGER full_disk"
                })
            })
            .await
            .unwrap();
        assert!(
            store.inbox_record(event("tg:1")).await.unwrap().is_some(),
            "the platform's redelivery is recorded, not taken for a duplicate"
        );
        assert_eq!(store.inbox_unfinished().await.unwrap().len(), 1);
    }

    async fn a_row_left_open_that_cannot_be_read_is_ended_and_the_others_resume(store: Store) {
        store.inbox_record(event("tg:1")).await.unwrap();
        store.inbox_record(event("tg:2")).await.unwrap();
        store
            .sql_for_tests(|conn| {
                conn.execute(
                    "UPDATE inbox_payloads SET payload = '{\"v\":99}'
                     WHERE inbox_id = (SELECT id FROM inbox WHERE event_id = 'tg:1')",
                    params![],
                )?;
                Ok(())
            })
            .await
            .unwrap();
        let open = store.inbox_unfinished().await.unwrap();
        assert_eq!(open.len(), 1);
        assert_eq!(open[0].event.event_id, "tg:2");
        assert_eq!(
            store.inbox_state("tg:1").await.unwrap().as_deref(),
            Some("failed")
        );
    }

    async fn a_redelivered_event_is_recorded_once_and_survives_until_finished(store: Store) {
        let first = store.inbox_record(event("tg:1")).await.unwrap();
        assert!(first.is_some());
        assert_eq!(store.inbox_record(event("tg:1")).await.unwrap(), None);

        let open = store.inbox_unfinished().await.unwrap();
        assert_eq!(open.len(), 1);
        assert_eq!(open[0].event.author.display_name, "Ada");
        assert_eq!(open[0].event.kind, event("x").kind);

        store
            .inbox_finish(vec![first.unwrap()], InboxState::Done, "answered")
            .await
            .unwrap();
        assert!(store.inbox_unfinished().await.unwrap().is_empty());
        assert_eq!(
            store.inbox_state("tg:1").await.unwrap().as_deref(),
            Some("done")
        );
    }

    async fn the_open_rows_of_some_events_are_read_oldest_first(store: Store) {
        for id in ["e1", "e2", "e3"] {
            store.inbox_record(event(id)).await.unwrap().unwrap();
        }
        let e2 = store.inbox_unfinished().await.unwrap()[1].id;
        store
            .inbox_finish(vec![e2], InboxState::Done, "answered")
            .await
            .unwrap();
        let asked = ["e3", "e2", "never", "e1"].map(String::from).to_vec();
        let read: Vec<String> = store
            .inbox_open_rows(asked)
            .await
            .unwrap()
            .into_iter()
            .map(|row| row.event.event_id)
            .collect();
        assert_eq!(read, ["e1", "e3"], "open ones only, oldest first");
    }

    crate::store::on_both_engines!(
        the_open_rows_of_some_events_are_read_oldest_first,
        an_event_whose_payload_cannot_be_written_is_not_recorded_at_all,
        a_row_left_open_that_cannot_be_read_is_ended_and_the_others_resume,
        a_redelivered_event_is_recorded_once_and_survives_until_finished,
    );
}
