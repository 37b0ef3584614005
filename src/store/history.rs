//! Editing a conversation's history without losing it: `/undo` and `/retry` take the last
//! exchange out of the model's context, compression puts a summary in the place of the
//! messages it summarises; either way the originals stay in the database (hidden, still
//! found by search). Also the session's title (`/title`).

use rusqlite::params;

use super::db::Optional;

use super::{Store, StoreError, StoredMessage};

/// A message still in the model's context, with its row id.
#[derive(Debug, Clone)]
pub struct LiveMessage {
    pub id: i64,
    pub message: StoredMessage,
}

/// Opens a compression summary (stored as the person's message).
pub const SUMMARY_OPENING: &str = "[Summary of the earlier conversation";

fn is_summary(text: Option<&str>) -> bool {
    text.is_some_and(|t| t.starts_with(SUMMARY_OPENING))
}

/// What `/undo` (or `/retry`) took out of the context.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Undone {
    /// The exchange is out; the person's words in it (to ask again).
    Hidden(String),
    /// There is no exchange to take back.
    Nothing,
    /// The last exchange has no words to ask again; nothing was taken out.
    NoText,
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

    /// Take the last exchange out of the context for the command of inbox row `by`: the
    /// person's last message (the one that started a turn: not a summary, not words sent
    /// in the middle of a turn) and all that came after it. Run again for the same row
    /// (after a restart), it hides nothing more and says what it hid. With `needs_text`,
    /// an exchange with no words to ask again (a picture alone) is left as it is.
    pub async fn session_undo(
        &self,
        session_id: &str,
        by: i64,
        needs_text: bool,
    ) -> Result<Undone, StoreError> {
        let session_id = session_id.to_owned();
        self.call(move |conn| {
            let tx = conn.transaction()?;
            let words = |rows: &[(i64, String, Option<String>)]| {
                rows.iter()
                    .filter(|(_, role, text)| role == "user" && !is_summary(text.as_deref()))
                    .filter_map(|(_, _, text)| text.clone())
                    .collect::<Vec<_>>()
                    .join("\n\n")
            };
            let done: Vec<(i64, String, Option<String>)> = tx
                .prepare_cached(
                    "SELECT id, role, content FROM messages
                     WHERE session_id = ?1 AND hidden_by = ?2 ORDER BY id",
                )?
                .query_map(params![session_id, by], |r| {
                    Ok((r.get(0)?, r.get(1)?, r.get(2)?))
                })?
                .collect::<Result<_, _>>()?;
            if !done.is_empty() {
                return Ok(Undone::Hidden(words(&done)));
            }
            let live: Vec<(i64, String, Option<String>, Option<i64>)> = tx
                .prepare_cached(
                    "SELECT id, role, content, turn FROM messages
                     WHERE session_id = ?1 AND hidden IS NULL ORDER BY id",
                )?
                .query_map([&session_id], |r| {
                    Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
                })?
                .collect::<Result<_, _>>()?;
            // Never at or before the newest summary: it stands for all before it.
            let floor = live
                .iter()
                .rposition(|(_, role, text, _)| role == "user" && is_summary(text.as_deref()))
                .map_or(0, |i| i + 1);
            let start = match live.last() {
                // The last turn, as it was stored.
                Some((_, _, _, Some(turn))) => live
                    .iter()
                    .position(|(_, _, _, t)| t == &Some(*turn))
                    .filter(|&i| i >= floor),
                // Messages stored before turns were named: the last message of the person
                // that does not follow a tool result (words sent in the middle of a turn).
                _ => (floor..live.len()).rev().find(|&i| {
                    let (_, role, text, _) = &live[i];
                    role == "user"
                        && !is_summary(text.as_deref())
                        && (i == 0 || live[i - 1].1 != "tool")
                }),
            };
            let Some(start) = start else {
                return Ok(Undone::Nothing);
            };
            let live: Vec<(i64, String, Option<String>)> = live
                .into_iter()
                .map(|(id, role, text, _)| (id, role, text))
                .collect();
            let text = words(&live[start..]);
            if needs_text && text.trim().is_empty() {
                return Ok(Undone::NoText);
            }
            tx.prepare_cached(
                "UPDATE messages SET hidden = ?1, hidden_by = ?2
                 WHERE session_id = ?3 AND hidden IS NULL AND id >= ?4",
            )?
            .execute(params![HIDDEN_UNDONE, by, session_id, live[start].0])?;
            tx.commit()?;
            Ok(Undone::Hidden(text))
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
                    tool_call_id = NULL, tool_name = NULL, turn = NULL
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

    /// Whether session `session_id` is still to be titled automatically: it has no title
    /// and the person has written once or twice (Hermes titles the first exchanges).
    pub async fn session_wants_title(&self, session_id: &str) -> Result<bool, StoreError> {
        let session_id = session_id.to_owned();
        self.call(move |conn| {
            let found = conn
                .prepare_cached(
                    "SELECT title, (SELECT count(*) FROM (SELECT 1 FROM messages m
                        WHERE m.session_id = s.id AND m.role = 'user' LIMIT 3) AS asked)
                     FROM sessions s WHERE s.id = ?1",
                )?
                .query_row([session_id], |r| {
                    Ok((r.get::<_, Option<String>>(0)?, r.get::<_, i64>(1)?))
                })
                .optional()?;
            Ok(matches!(found, Some((None, 1..=2))))
        })
        .await
    }

    /// Title session `session_id` unless it has a title already (a person's `/title`, set
    /// while this one was written, stands); whether it was set.
    pub async fn session_title_if_none(
        &self,
        session_id: &str,
        title: &str,
    ) -> Result<bool, StoreError> {
        let session_id = session_id.to_owned();
        let title = title.to_owned();
        self.call(move |conn| {
            let n = conn
                .prepare_cached("UPDATE sessions SET title = ?1 WHERE id = ?2 AND title IS NULL")?
                .execute(params![title, session_id])?;
            Ok(n > 0)
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

    async fn undo_hides_the_last_exchange_and_search_still_finds_it(store: Store) {
        let id = session(&store).await;
        for (question, answer) in [("first", "one"), ("second zebra", "two")] {
            store
                .session_append(
                    &id,
                    vec![
                        StoredMessage::user(question),
                        StoredMessage::assistant(answer),
                    ],
                )
                .await
                .unwrap();
        }
        assert_eq!(
            store.session_undo(&id, 7, false).await.unwrap(),
            Undone::Hidden("second zebra".into())
        );
        // The same command run again (after a restart) takes nothing more.
        assert_eq!(
            store.session_undo(&id, 7, false).await.unwrap(),
            Undone::Hidden("second zebra".into())
        );
        assert_eq!(
            texts(&store.session_live(&id).await.unwrap()),
            ["first", "one"]
        );
        assert_eq!(store.session_messages(&id).await.unwrap().len(), 2);
        assert_eq!(store.search_messages("zebra", 5).await.unwrap().len(), 1);
        store.session_undo(&id, 8, false).await.unwrap();
        assert_eq!(
            store.session_undo(&id, 9, false).await.unwrap(),
            Undone::Nothing
        );
    }

    async fn undo_takes_a_whole_turn_and_never_a_summary(store: Store) {
        let id = session(&store).await;
        let tool = |text: &str| StoredMessage {
            role: "tool".into(),
            content: Some(text.into()),
            tool_calls: None,
            tool_call_id: Some("c".into()),
            tool_name: Some("terminal".into()),
        };
        store
            .session_append(
                &id,
                vec![StoredMessage::user(format!(
                    "{SUMMARY_OPENING} (3 messages)] …"
                ))],
            )
            .await
            .unwrap();
        // A stopped turn ends with a tool result; the next turn is its own.
        store
            .session_append(
                &id,
                vec![
                    StoredMessage::user("stopped one"),
                    StoredMessage::assistant("working"),
                    tool("cancelled"),
                ],
            )
            .await
            .unwrap();
        store
            .session_append(
                &id,
                vec![
                    StoredMessage::user("build it"),
                    StoredMessage::assistant("working"),
                    tool("built"),
                    // Two messages sent while the turn ran.
                    StoredMessage::user("and test it"),
                    StoredMessage::user("with coverage"),
                    tool("tested"),
                    StoredMessage::assistant("done"),
                ],
            )
            .await
            .unwrap();
        assert_eq!(
            store.session_undo(&id, 1, true).await.unwrap(),
            Undone::Hidden("build it\n\nand test it\n\nwith coverage".into())
        );
        assert_eq!(texts(&store.session_live(&id).await.unwrap()).len(), 4);
        assert_eq!(
            store.session_undo(&id, 4, true).await.unwrap(),
            Undone::Hidden("stopped one".into())
        );
        assert_eq!(texts(&store.session_live(&id).await.unwrap()).len(), 1);
        assert_eq!(
            store.session_undo(&id, 2, false).await.unwrap(),
            Undone::Nothing,
            "the summary stays"
        );
        // A picture alone has nothing to ask again: /retry leaves it.
        store
            .session_append(
                &id,
                vec![StoredMessage::user(""), StoredMessage::assistant("a cat")],
            )
            .await
            .unwrap();
        assert_eq!(
            store.session_undo(&id, 3, true).await.unwrap(),
            Undone::NoText
        );
        assert_eq!(texts(&store.session_live(&id).await.unwrap()).len(), 3);
    }

    async fn a_summary_takes_the_place_of_what_it_summarises(store: Store) {
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

    crate::store::on_both_engines!(
        undo_hides_the_last_exchange_and_search_still_finds_it,
        undo_takes_a_whole_turn_and_never_a_summary,
        a_summary_takes_the_place_of_what_it_summarises,
    );
}
