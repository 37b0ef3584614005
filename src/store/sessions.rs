//! Sessions (one conversation's history under a session key) and their messages, with an FTS5
//! index over message content.

use std::ops::ControlFlow;

use hermes_adapter::ChatRef;
use rusqlite::params;

use super::db::{Db, Optional, Row};

use super::{Store, StoreError, now_ms};

/// A conversation under one session key.
#[derive(Debug, Clone)]
pub struct SessionRow {
    pub id: String,
    pub session_key: String,
    pub started_at: i64,
    pub updated_at: i64,
    pub message_count: i64,
}

/// One message of a conversation, in the shape the LLM API uses.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredMessage {
    /// `user`, `assistant` or `tool`.
    pub role: String,
    pub content: Option<String>,
    /// The assistant's tool calls, as the JSON array the API returned.
    pub tool_calls: Option<String>,
    /// For `tool` messages: the call this result answers.
    pub tool_call_id: Option<String>,
    pub tool_name: Option<String>,
}

impl StoredMessage {
    pub fn user(text: impl Into<String>) -> Self {
        StoredMessage {
            role: "user".into(),
            content: Some(text.into()),
            tool_calls: None,
            tool_call_id: None,
            tool_name: None,
        }
    }

    pub fn assistant(text: impl Into<String>) -> Self {
        StoredMessage {
            role: "assistant".into(),
            content: Some(text.into()),
            tool_calls: None,
            tool_call_id: None,
            tool_name: None,
        }
    }
}

/// A full-text search hit.
#[derive(Debug, Clone)]
pub struct SearchHit {
    pub session_id: String,
    pub role: String,
    pub snippet: String,
}

impl Store {
    /// The open session under `key`, creating one if there is none.
    pub async fn session_open(
        &self,
        key: &str,
        chat: &ChatRef,
        user_id: Option<&str>,
    ) -> Result<SessionRow, StoreError> {
        let key = key.to_owned();
        let chat = chat.clone();
        let user_id = user_id.map(str::to_owned);
        self.call(move |conn| {
            let existing = conn
                .prepare_cached(
                    "SELECT * FROM sessions WHERE session_key = ?1 AND ended_at IS NULL
                     ORDER BY started_at DESC LIMIT 1",
                )?
                .query_row([&key], row_to_session)
                .optional()?;
            if let Some(row) = existing {
                return Ok(row);
            }
            let now = now_ms();
            let id = new_session_id(now);
            conn.prepare_cached(
                "INSERT INTO sessions (id, session_key, platform, chat_id, thread_id, chat_kind,
                    user_id, started_at, updated_at, account)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?8, ?9)",
            )?
            .execute(params![
                id,
                key,
                chat.platform.as_str(),
                chat.chat_id,
                chat.thread_id,
                chat.kind.as_str(),
                user_id,
                now,
                chat.account,
            ])?;
            Ok(SessionRow {
                id,
                session_key: key,
                started_at: now,
                updated_at: now,
                message_count: 0,
            })
        })
        .await
    }

    /// Close the open session under `key` (the next message starts a fresh one).
    pub async fn session_end(&self, key: &str, reason: &str) -> Result<bool, StoreError> {
        let key = key.to_owned();
        let reason = reason.to_owned();
        self.call(move |conn| {
            let n = conn
                .prepare_cached(
                    "UPDATE sessions SET ended_at = ?1, end_reason = ?2
                 WHERE session_key = ?3 AND ended_at IS NULL",
                )?
                .execute(params![now_ms(), reason, key])?;
            Ok(n > 0)
        })
        .await
    }

    /// The messages of a session in the model's context, oldest first.
    pub async fn session_messages(
        &self,
        session_id: &str,
    ) -> Result<Vec<StoredMessage>, StoreError> {
        self.session_tail(session_id, usize::MAX).await
    }

    /// The newest messages of a session whose text adds up to at most `max_bytes` (oldest
    /// first): a long conversation is not read whole for a turn that can use only its end.
    pub async fn session_tail(
        &self,
        session_id: &str,
        max_bytes: usize,
    ) -> Result<Vec<StoredMessage>, StoreError> {
        let session_id = session_id.to_owned();
        self.call(move |conn| {
            let mut stmt = conn.prepare_cached(
                "SELECT role, content, tool_calls, tool_call_id, tool_name FROM messages
                 WHERE session_id = ?1 AND hidden IS NULL ORDER BY id DESC",
            )?;
            let mut tail = Vec::new();
            let mut bytes = 0usize;
            stmt.for_each_row([session_id], |r| {
                let message = StoredMessage {
                    role: r.get(0)?,
                    content: r.get(1)?,
                    tool_calls: r.get(2)?,
                    tool_call_id: r.get(3)?,
                    tool_name: r.get(4)?,
                };
                bytes = bytes.saturating_add(
                    message.content.as_ref().map_or(0, String::len)
                        + message.tool_calls.as_ref().map_or(0, String::len),
                );
                if bytes > max_bytes {
                    return Ok(ControlFlow::Break(()));
                }
                tail.push(message);
                Ok(ControlFlow::Continue(()))
            })?;
            tail.reverse();
            Ok(tail)
        })
        .await
    }

    /// Append a turn's messages to a session in one transaction.
    pub async fn session_append(
        &self,
        session_id: &str,
        messages: Vec<StoredMessage>,
    ) -> Result<(), StoreError> {
        let session_id = session_id.to_owned();
        self.call(move |conn| {
            let tx = conn.transaction()?;
            append_in(&tx, &session_id, &messages)?;
            tx.commit()?;
            Ok(())
        })
        .await
    }

    /// Full-text search over every stored message, best match first.
    pub async fn search_messages(
        &self,
        query: &str,
        limit: usize,
    ) -> Result<Vec<SearchHit>, StoreError> {
        let query = query.to_owned();
        self.call(move |conn| {
            let mut stmt = conn.prepare_cached(if conn.is_postgres() {
                // Free text, quotes and `or` as a search box reads them.
                "SELECT m.session_id, m.role, ts_headline('simple', m.content, q,
                        'StartSel=[, StopSel=], MaxWords=12, MinWords=4, ShortWord=1')
                 FROM messages m, websearch_to_tsquery('simple', ?1) q
                 WHERE to_tsvector('simple', m.content) @@ q
                 ORDER BY ts_rank(to_tsvector('simple', m.content), q) DESC, m.id DESC LIMIT ?2"
            } else {
                "SELECT m.session_id, m.role, snippet(messages_fts, 0, '[', ']', '…', 12)
                 FROM messages_fts JOIN messages m ON m.id = messages_fts.rowid
                 WHERE messages_fts MATCH ?1 ORDER BY rank LIMIT ?2"
            })?;
            let rows = stmt.query_map(params![query, limit as i64], |r| {
                Ok(SearchHit {
                    session_id: r.get(0)?,
                    role: r.get(1)?,
                    snippet: r.get(2)?,
                })
            })?;
            Ok(rows.collect::<Result<Vec<_>, _>>()?)
        })
        .await
    }
}

/// Append messages inside a caller's transaction.
pub(super) fn append_in(
    tx: &Db,
    session_id: &str,
    messages: &[StoredMessage],
) -> Result<(), StoreError> {
    let now = now_ms();
    // The messages appended together are one turn, named by the id of its first message
    // (`/undo` takes back a whole turn).
    let mut turn: Option<i64> = None;
    for m in messages {
        tx.prepare_cached(
            "INSERT INTO messages (session_id, role, content, tool_calls, tool_call_id,
                tool_name, created_at, turn)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
        )?
        .execute(params![
            session_id,
            m.role,
            m.content,
            m.tool_calls,
            m.tool_call_id,
            m.tool_name,
            now,
            turn
        ])?;
        if turn.is_none() {
            let id = tx.last_insert_rowid()?;
            tx.prepare_cached("UPDATE messages SET turn = ?1 WHERE id = ?1")?
                .execute([id])?;
            turn = Some(id);
        }
    }
    tx.prepare_cached(
        "UPDATE sessions SET updated_at = ?1, message_count = message_count + ?2 WHERE id = ?3",
    )?
    .execute(params![now, messages.len() as i64, session_id])?;
    Ok(())
}

fn row_to_session(row: &Row<'_>) -> rusqlite::Result<SessionRow> {
    Ok(SessionRow {
        id: row.get("id")?,
        session_key: row.get("session_key")?,
        started_at: row.get("started_at")?,
        updated_at: row.get("updated_at")?,
        message_count: row.get("message_count")?,
    })
}

/// `YYYYMMDD_HHMMSS_<8 hex>` (UTC), the Hermes session id format.
fn new_session_id(now_ms: i64) -> String {
    let secs = now_ms.div_euclid(1000);
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}{m:02}{d:02}_{:02}{:02}{:02}_{:08x}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        rand::random::<u32>()
    )
}

/// Days since 1970-01-01 to a (year, month, day) date (Howard Hinnant's algorithm).
pub(crate) fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use hermes_adapter::{ChatKind, Platform};

    #[test]
    fn session_ids_use_the_hermes_format() {
        // 2026-11-22 07:10:07 UTC
        let id = new_session_id(1_795_331_407_000);
        assert!(id.starts_with("20261122_071007_"), "{id}");
        assert_eq!(id.len(), 24);
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
    }

    async fn messages_append_in_order_search_finds_them_and_end_starts_fresh(store: Store) {
        let chat = ChatRef {
            platform: Platform::Telegram,
            account: None,
            chat_id: "1".into(),
            thread_id: None,
            kind: ChatKind::Direct,
        };
        let s = store.session_open("k", &chat, Some("7")).await.unwrap();
        store
            .session_append(
                &s.id,
                vec![
                    StoredMessage::user("zebra crossing"),
                    StoredMessage::assistant("ok"),
                ],
            )
            .await
            .unwrap();
        let again = store.session_open("k", &chat, Some("7")).await.unwrap();
        assert_eq!(again.id, s.id);
        assert_eq!(again.message_count, 2);
        assert_eq!(
            store.session_messages(&s.id).await.unwrap()[1].role,
            "assistant"
        );
        let hits = store.search_messages("zebra", 5).await.unwrap();
        assert_eq!(hits.len(), 1);
        assert!(hits[0].snippet.contains("[zebra]"));

        assert!(store.session_end("k", "reset").await.unwrap());
        let fresh = store.session_open("k", &chat, Some("7")).await.unwrap();
        assert_ne!(fresh.id, s.id);
        assert!(store.session_messages(&fresh.id).await.unwrap().is_empty());
    }

    async fn a_turn_reads_only_the_tail_of_a_long_history(store: Store) {
        let chat = ChatRef {
            platform: Platform::Telegram,
            account: None,
            chat_id: "1".into(),
            thread_id: None,
            kind: ChatKind::Direct,
        };
        let s = store.session_open("k", &chat, None).await.unwrap();
        let messages = (0..100)
            .map(|i| StoredMessage::user(format!("{i:03} {}", "x".repeat(96))))
            .collect();
        store.session_append(&s.id, messages).await.unwrap();
        let tail = store.session_tail(&s.id, 1_050).await.unwrap();
        let firsts: Vec<&str> = tail
            .iter()
            .map(|m| &m.content.as_deref().unwrap()[..3])
            .collect();
        assert_eq!(
            firsts,
            [
                "090", "091", "092", "093", "094", "095", "096", "097", "098", "099"
            ]
        );
        assert_eq!(store.session_messages(&s.id).await.unwrap().len(), 100);
    }

    crate::store::on_both_engines!(
        messages_append_in_order_search_finds_them_and_end_starts_fresh,
        a_turn_reads_only_the_tail_of_a_long_history,
    );
}
