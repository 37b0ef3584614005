//! Editing a conversation's history without losing it: `/undo` and `/retry` take the last
//! exchange out of the model's context, compression puts a summary in the place of the
//! messages it summarises; either way the originals stay in the database (hidden, still
//! found by search). Also the session's title (`/title`).

use rusqlite::{OptionalExtension, params};

use super::{Store, StoreError, StoredMessage};

/// A message still in the model's context, with its row id.
#[derive(Debug, Clone)]
pub struct LiveMessage {
    pub id: i64,
    pub message: StoredMessage,
}

/// Why a message left the context (`messages.hidden`).
pub const HIDDEN_UNDONE: &str = "undone";
pub const HIDDEN_COMPRESSED: &str = "compressed";

impl Store {
    /// The messages of session `session_id` in the model's context, with their ids, oldest
    /// first.
    pub async fn session_live(&self, session_id: &str) -> Result<Vec<LiveMessage>, StoreError> {
        let session_id = session_id.to_owned();
        self.call(move |conn| {
            let mut stmt = conn.prepare_cached(
                "SELECT id, role, content, tool_calls, tool_call_id, tool_name FROM messages
                 WHERE session_id = ?1 AND hidden IS NULL ORDER BY id",
            )?;
            let rows = stmt.query_map([session_id], |r| {
                Ok(LiveMessage {
                    id: r.get(0)?,
                    message: StoredMessage {
                        role: r.get(1)?,
                        content: r.get(2)?,
                        tool_calls: r.get(3)?,
                        tool_call_id: r.get(4)?,
                        tool_name: r.get(5)?,
                    },
                })
            })?;
            Ok(rows.collect::<Result<Vec<_>, _>>()?)
        })
        .await
    }

    /// Take the last exchange out of the context: the person's last message and all that
    /// came after it. Returns that message's text, or `None` when there is none.
    pub async fn session_undo(&self, session_id: &str) -> Result<Option<String>, StoreError> {
        let session_id = session_id.to_owned();
        self.call(move |conn| {
            let tx = conn.transaction()?;
            let last: Option<(i64, Option<String>)> = tx
                .prepare_cached(
                    "SELECT id, content FROM messages
                     WHERE session_id = ?1 AND hidden IS NULL AND role = 'user'
                     ORDER BY id DESC LIMIT 1",
                )?
                .query_row([&session_id], |r| Ok((r.get(0)?, r.get(1)?)))
                .optional()?;
            let Some((id, text)) = last else {
                return Ok(None);
            };
            tx.prepare_cached(
                "UPDATE messages SET hidden = ?1
                 WHERE session_id = ?2 AND hidden IS NULL AND id >= ?3",
            )?
            .execute(params![HIDDEN_UNDONE, session_id, id])?;
            tx.commit()?;
            Ok(Some(text.unwrap_or_default()))
        })
        .await
    }

    /// Put `summary` in the place of the live messages `first..=last` (row ids): they leave
    /// the context and stay searchable. The summary takes the first one's row id (so it
    /// sits where they were); that message is kept as a hidden copy. Returns how many
    /// messages it replaced.
    pub async fn session_summarise(
        &self,
        session_id: &str,
        first: i64,
        last: i64,
        summary: StoredMessage,
    ) -> Result<usize, StoreError> {
        let session_id = session_id.to_owned();
        self.call(move |conn| {
            let tx = conn.transaction()?;
            let copied = tx
                .prepare_cached(
                    "INSERT INTO messages (session_id, role, content, tool_calls, tool_call_id,
                        tool_name, created_at, hidden)
                     SELECT session_id, role, content, tool_calls, tool_call_id, tool_name,
                        created_at, ?1
                     FROM messages WHERE id = ?2 AND session_id = ?3 AND hidden IS NULL",
                )?
                .execute(params![HIDDEN_COMPRESSED, first, session_id])?;
            if copied == 0 {
                // Gone meanwhile (undone, or summarised by someone else): nothing to do.
                return Ok(0);
            }
            let hidden = tx
                .prepare_cached(
                    "UPDATE messages SET hidden = ?1
                     WHERE session_id = ?2 AND hidden IS NULL AND id > ?3 AND id <= ?4",
                )?
                .execute(params![HIDDEN_COMPRESSED, session_id, first, last])?;
            tx.prepare_cached(
                "UPDATE messages SET role = ?1, content = ?2, tool_calls = NULL,
                    tool_call_id = NULL, tool_name = NULL
                 WHERE id = ?3",
            )?
            .execute(params![summary.role, summary.content, first])?;
            tx.commit()?;
            Ok(hidden + 1)
        })
        .await
    }

    /// The title of session `session_id`, if it has one.
    pub async fn session_title(&self, session_id: &str) -> Result<Option<String>, StoreError> {
        let session_id = session_id.to_owned();
        self.call(move |conn| {
            Ok(conn
                .prepare_cached("SELECT title FROM sessions WHERE id = ?1")?
                .query_row([session_id], |r| r.get::<_, Option<String>>(0))
                .optional()?
                .flatten())
        })
        .await
    }

    pub async fn session_set_title(&self, session_id: &str, title: &str) -> Result<(), StoreError> {
        let session_id = session_id.to_owned();
        let title = title.to_owned();
        self.call(move |conn| {
            conn.prepare_cached("UPDATE sessions SET title = ?1 WHERE id = ?2")?
                .execute(params![title, session_id])?;
            Ok(())
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hermes_adapter::{ChatKind, ChatRef, Platform};

    async fn session(store: &Store) -> String {
        let chat = ChatRef {
            platform: Platform::Telegram,
            account: None,
            chat_id: "1".into(),
            thread_id: None,
            kind: ChatKind::Direct,
        };
        store.session_open("k", &chat, None).await.unwrap().id
    }

    fn texts(live: &[LiveMessage]) -> Vec<String> {
        live.iter()
            .map(|m| m.message.content.clone().unwrap_or_default())
            .collect()
    }

    #[tokio::test]
    async fn undo_hides_the_last_exchange_and_search_still_finds_it() {
        let store = Store::open_in_memory().unwrap();
        let id = session(&store).await;
        store
            .session_append(
                &id,
                vec![
                    StoredMessage::user("first"),
                    StoredMessage::assistant("one"),
                    StoredMessage::user("second zebra"),
                    StoredMessage::assistant("two"),
                ],
            )
            .await
            .unwrap();
        assert_eq!(
            store.session_undo(&id).await.unwrap().as_deref(),
            Some("second zebra")
        );
        assert_eq!(
            texts(&store.session_live(&id).await.unwrap()),
            ["first", "one"]
        );
        assert_eq!(store.session_messages(&id).await.unwrap().len(), 2);
        assert_eq!(store.search_messages("zebra", 5).await.unwrap().len(), 1);
        store.session_undo(&id).await.unwrap();
        assert_eq!(store.session_undo(&id).await.unwrap(), None);
    }

    #[tokio::test]
    async fn a_summary_takes_the_place_of_what_it_summarises() {
        let store = Store::open_in_memory().unwrap();
        let id = session(&store).await;
        let messages = (0..6)
            .map(|i| StoredMessage::user(format!("m{i}")))
            .collect();
        store.session_append(&id, messages).await.unwrap();
        let live = store.session_live(&id).await.unwrap();
        let replaced = store
            .session_summarise(
                &id,
                live[1].id,
                live[3].id,
                StoredMessage::user("[summary]"),
            )
            .await
            .unwrap();
        assert_eq!(replaced, 3);
        assert_eq!(
            texts(&store.session_live(&id).await.unwrap()),
            ["m0", "[summary]", "m4", "m5"]
        );
        for original in ["m1", "m2", "m3"] {
            assert_eq!(
                store.search_messages(original, 5).await.unwrap().len(),
                1,
                "{original} stays searchable"
            );
        }
    }
}
