//! Searching a person's past conversations (`session_search`): the FTS5 index over every
//! stored message (those compression or `/undo` took out of the context included), ranked,
//! one hit per session, with the session's title and when it was.

use rusqlite::params;

use super::{Store, StoreError};

/// A session that matched.
#[derive(Debug, Clone)]
pub struct SessionHit {
    pub session_id: String,
    pub title: Option<String>,
    pub started_at: i64,
    /// The best matching message, matches in `[…]`.
    pub snippet: String,
}

impl Store {
    /// The sessions of `user_id` on `platform` (not `except`) whose messages match the
    /// words of `query`, best first.
    pub async fn search_own_sessions(
        &self,
        query: &str,
        platform: &str,
        user_id: &str,
        except: &str,
        only_chat: Option<&str>,
        limit: usize,
    ) -> Result<Vec<SessionHit>, StoreError> {
        let only_chat = only_chat.map(str::to_owned);
        let Some(query) = fts_query(query) else {
            return Ok(Vec::new());
        };
        let platform = platform.to_owned();
        let user_id = user_id.to_owned();
        let except = except.to_owned();
        self.call(move |conn| {
            let mut stmt = conn.prepare_cached(
                "SELECT s.id, s.title, s.started_at,
                        snippet(messages_fts, 0, '[', ']', '…', 16), rank
                 FROM messages_fts
                 JOIN messages m ON m.id = messages_fts.rowid
                 JOIN sessions s ON s.id = m.session_id
                 WHERE messages_fts MATCH ?1 AND s.platform = ?2 AND s.user_id = ?3
                   AND (s.id != ?4 OR m.hidden IS NOT NULL) AND (?5 IS NULL OR s.chat_id = ?5)
                 ORDER BY rank LIMIT 200",
            )?;
            let rows =
                stmt.query_map(params![query, platform, user_id, except, only_chat], |r| {
                    Ok(SessionHit {
                        session_id: r.get(0)?,
                        title: r.get(1)?,
                        started_at: r.get(2)?,
                        snippet: r.get(3)?,
                    })
                })?;
            let mut hits: Vec<SessionHit> = Vec::new();
            for hit in rows {
                let hit = hit?;
                if !hits.iter().any(|h| h.session_id == hit.session_id) {
                    hits.push(hit);
                }
                if hits.len() == limit {
                    break;
                }
            }
            Ok(hits)
        })
        .await
    }
}

/// The words of `text` as an FTS5 query that matches them all (each quoted, so no word is
/// read as FTS syntax); `None` when it has no words.
fn fts_query(text: &str) -> Option<String> {
    let words: Vec<String> = text
        .split(|c: char| !c.is_alphanumeric() && c != '_' && c != '-')
        .filter(|w| !w.is_empty())
        .take(16)
        .map(|w| format!("\"{}\"", w.replace('"', "")))
        .collect();
    (!words.is_empty()).then(|| words.join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::StoredMessage;
    use hermes_adapter::{ChatKind, ChatRef, Platform};

    #[tokio::test]
    async fn only_the_persons_own_other_sessions_are_found() {
        let store = Store::open_in_memory().unwrap();
        let chat = |id: &str| ChatRef {
            platform: Platform::Telegram,
            account: None,
            chat_id: id.into(),
            thread_id: None,
            kind: ChatKind::Direct,
        };
        let ana_old = store
            .session_open("a", &chat("1"), Some("ana"))
            .await
            .unwrap();
        store
            .session_append(
                &ana_old.id,
                vec![StoredMessage::user("the zebra project budget")],
            )
            .await
            .unwrap();
        store.session_set_title(&ana_old.id, "Zebra").await.unwrap();
        store.session_end("a", "reset").await.unwrap();
        let ana_now = store
            .session_open("a", &chat("1"), Some("ana"))
            .await
            .unwrap();
        store
            .session_append(&ana_now.id, vec![StoredMessage::user("zebra again")])
            .await
            .unwrap();
        let bob = store
            .session_open("b", &chat("2"), Some("bob"))
            .await
            .unwrap();
        store
            .session_append(&bob.id, vec![StoredMessage::user("bob's zebra secret")])
            .await
            .unwrap();
        let hits = store
            .search_own_sessions("Zebra budget?", "telegram", "ana", &ana_now.id, None, 5)
            .await
            .unwrap();
        assert_eq!(hits.len(), 1);
        assert_eq!(hits[0].session_id, ana_old.id);
        assert_eq!(hits[0].title.as_deref(), Some("Zebra"));
        assert!(hits[0].snippet.contains("[zebra]"), "{}", hits[0].snippet);
        // FTS syntax in the words is only words.
        assert!(
            store
                .search_own_sessions("\"zebra OR (", "telegram", "ana", "", None, 5)
                .await
                .is_ok()
        );
        assert!(fts_query("  ?! ").is_none());

        // What compression summarised in the current conversation is found in it too.
        let id = ana_now.id.clone();
        store
            .call(move |conn| {
                conn.execute(
                    "UPDATE messages SET hidden = 'compressed' WHERE session_id = ?1",
                    [id],
                )?;
                Ok(())
            })
            .await
            .unwrap();
        let hits = store
            .search_own_sessions("zebra again", "telegram", "ana", &ana_now.id, None, 5)
            .await
            .unwrap();
        assert_eq!(hits.len(), 1);
        assert_eq!(hits[0].session_id, ana_now.id);
    }
}
