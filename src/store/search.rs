//! Searching a person's past conversations (`session_search`): the FTS5 index over every
//! stored message (those compression or `/undo` took out of the context included), ranked,
//! one hit per session, with the session's title and when it was. Only the person's
//! [`RANKED_MATCHES`] newest matches are ranked, so a common word costs what a rare one does.

use rusqlite::params;

use super::db::Db;
use super::{Store, StoreError};

/// How many of the person's newest matching messages are ranked: a search for a common
/// word looks at this many of its latest mentions, a rare word's are all ranked.
const RANKED_MATCHES: i64 = 2_000;

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
        let query_text = query.to_owned();
        let Some(query) = fts_query(query) else {
            return Ok(Vec::new());
        };
        let platform = platform.to_owned();
        let user_id = user_id.to_owned();
        let except = except.to_owned();
        let words = query_words(&query_text).join(" ");
        self.call(move |conn| {
            if conn.is_postgres() {
                return search_postgres(
                    conn, &words, &platform, &user_id, &except, only_chat, limit,
                );
            }
            // bm25 costs about a microsecond a row, and a word in every fifth message of a
            // long history would be ranked over tens of thousands of rows on each call: past
            // `RANKED_MATCHES` matches (anyone's; counting them is cheap), only the person's
            // newest that many are ranked. Under it the window would hold every match
            // anyway, and FTS5's own rank order joins only the rows it hands out.
            let matches: i64 = conn
                .prepare_cached("SELECT count(*) FROM messages_fts WHERE messages_fts MATCH ?1")?
                .query_row([&query], |r| r.get(0))?;
            let windowed = matches > RANKED_MATCHES;
            let mut stmt = conn.prepare_cached(if !windowed {
                "SELECT m.id, s.id, s.title, s.started_at
                 FROM messages_fts
                 JOIN messages m ON m.id = messages_fts.rowid
                 JOIN sessions s ON s.id = m.session_id
                 WHERE messages_fts MATCH ?1 AND s.platform = ?2 AND s.user_id = ?3
                   AND (s.id != ?4 OR m.hidden IS NOT NULL) AND (CAST(?5 AS TEXT) IS NULL OR s.chat_id = ?5)
                 ORDER BY rank LIMIT 200"
            } else {
                "SELECT id, session_id, title, started_at FROM (
                     SELECT m.id AS id, s.id AS session_id, s.title AS title,
                            s.started_at AS started_at, rank AS rank
                     FROM messages_fts
                     JOIN messages m ON m.id = messages_fts.rowid
                     JOIN sessions s ON s.id = m.session_id
                     WHERE messages_fts MATCH ?1 AND s.platform = ?2 AND s.user_id = ?3
                       AND (s.id != ?4 OR m.hidden IS NOT NULL)
                       AND (CAST(?5 AS TEXT) IS NULL OR s.chat_id = ?5)
                     ORDER BY messages_fts.rowid DESC LIMIT ?6)
                 ORDER BY rank LIMIT 200"
            })?;
            let mut bound =
                params![query, platform, user_id, except, only_chat, RANKED_MATCHES].to_vec();
            if !windowed {
                bound.pop();
            }
            let rows = stmt.query_map(bound.as_slice(), |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    SessionHit {
                        session_id: r.get(1)?,
                        title: r.get(2)?,
                        started_at: r.get(3)?,
                        snippet: String::new(),
                    },
                ))
            })?;
            let mut hits: Vec<(i64, SessionHit)> = Vec::new();
            for hit in rows {
                let hit = hit?;
                if !hits.iter().any(|(_, h)| h.session_id == hit.1.session_id) {
                    hits.push(hit);
                }
                if hits.len() == limit {
                    break;
                }
            }
            // Snippets for the few hits kept only, not for every row ranked.
            let mut snippet = conn.prepare_cached(
                "SELECT snippet(messages_fts, 0, '[', ']', '…', 16) FROM messages_fts
                 WHERE messages_fts MATCH ?1 AND rowid = ?2",
            )?;
            let mut found = Vec::with_capacity(hits.len());
            for (message_id, mut hit) in hits {
                hit.snippet = snippet.query_row(params![query, message_id], |r| r.get(0))?;
                found.push(hit);
            }
            Ok(found)
        })
        .await
    }
}

/// The words of a search (at most 16).
fn query_words(text: &str) -> Vec<&str> {
    text.split(|c: char| !c.is_alphanumeric() && c != '_' && c != '-')
        .filter(|w| !w.is_empty())
        .take(16)
        .collect()
}

/// The words of `text` as an FTS5 query that matches them all (each quoted, so no word is
/// read as FTS syntax); `None` when it has no words.
fn fts_query(text: &str) -> Option<String> {
    let words: Vec<String> = query_words(text)
        .into_iter()
        .map(|w| format!("\"{}\"", w.replace('"', "")))
        .collect();
    (!words.is_empty()).then(|| words.join(" "))
}

/// [`Store::search_own_sessions`] on PostgreSQL: the GIN index over each message's words
/// ('simple': no stemming, as FTS5's default tokenizer), ranked by `ts_rank` over the
/// person's newest [`RANKED_MATCHES`] matches, the snippet by `ts_headline`. The order of
/// equal hits may differ from FTS5's bm25; which sessions match does not.
fn search_postgres(
    conn: &Db,
    words: &str,
    platform: &str,
    user_id: &str,
    except: &str,
    only_chat: Option<String>,
    limit: usize,
) -> Result<Vec<SessionHit>, StoreError> {
    let mut stmt = conn.prepare_cached(
        "SELECT w.id, w.session_id, w.title, w.started_at,
                ts_headline('simple', w.content, q,
                    'StartSel=[, StopSel=], MaxWords=16, MinWords=6, ShortWord=1')
         FROM (
             SELECT m.id, m.content, s.id AS session_id, s.title, s.started_at
             FROM messages m JOIN sessions s ON s.id = m.session_id
             WHERE to_tsvector('simple', m.content) @@ plainto_tsquery('simple', ?1)
               AND s.platform = ?2 AND s.user_id = ?3
               AND (s.id != ?4 OR m.hidden IS NOT NULL)
               AND (CAST(?5 AS TEXT) IS NULL OR s.chat_id = ?5)
             ORDER BY m.id DESC LIMIT ?6) w,
             plainto_tsquery('simple', ?1) q
         ORDER BY ts_rank(to_tsvector('simple', w.content), q) DESC, w.id DESC LIMIT 200",
    )?;
    let rows = stmt.query_map(
        params![words, platform, user_id, except, only_chat, RANKED_MATCHES],
        |r| {
            Ok(SessionHit {
                session_id: r.get(1)?,
                title: r.get(2)?,
                started_at: r.get(3)?,
                snippet: r.get(4)?,
            })
        },
    )?;
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::StoredMessage;
    use hermes_adapter::{ChatKind, ChatRef, Platform};

    /// A Telegram direct chat.
    fn chat(id: &str) -> ChatRef {
        ChatRef {
            platform: Platform::Telegram,
            account: None,
            chat_id: id.into(),
            thread_id: None,
            kind: ChatKind::Direct,
        }
    }

    async fn only_the_persons_own_other_sessions_are_found(store: Store) {
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

    async fn a_common_word_is_ranked_over_the_newest_mentions_only(store: Store) {
        let chat = chat("1");
        // The best match by rank (the shortest text), but older than the newest
        // `RANKED_MATCHES` mentions.
        let old = store.session_open("a", &chat, Some("ana")).await.unwrap();
        store
            .session_append(&old.id, vec![StoredMessage::user("tonight")])
            .await
            .unwrap();
        store.session_end("a", "reset").await.unwrap();
        let newer = store.session_open("a", &chat, Some("ana")).await.unwrap();
        let chatter = "what shall we have for dinner tonight, something quick and warm";
        store
            .session_append(
                &newer.id,
                vec![StoredMessage::user(chatter); RANKED_MATCHES as usize],
            )
            .await
            .unwrap();
        store.session_end("a", "reset").await.unwrap();
        let now = store.session_open("a", &chat, Some("ana")).await.unwrap();
        let hits = store
            .search_own_sessions("tonight", "telegram", "ana", &now.id, None, 5)
            .await
            .unwrap();
        let found: Vec<&str> = hits.iter().map(|h| h.session_id.as_str()).collect();
        assert_eq!(found, [newer.id.as_str()]);
        assert!(hits[0].snippet.contains("[tonight]"), "{}", hits[0].snippet);
    }

    crate::store::on_both_engines!(
        only_the_persons_own_other_sessions_are_found,
        a_common_word_is_ranked_over_the_newest_mentions_only,
    );
}
