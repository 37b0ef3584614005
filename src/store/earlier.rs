//! A conversation's earlier sessions (`/sessions`, `/resume`): listed newest first, found by
//! title or id, and taken up again. Only sessions under the conversation's own session key
//! are ever listed or resumed, so a person never reaches another person's or another
//! chat's conversation this way (the key names the chat, and the person where sessions are
//! per person).

use rusqlite::params;

use super::db::Optional;
use super::{Store, StoreError, now_ms};

/// How many of a conversation's newest sessions a listing or a search looks through.
const LOOKED_THROUGH: i64 = 500;

/// One earlier session, as `/sessions` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EarlierSession {
    pub id: String,
    pub title: Option<String>,
    pub started_at: i64,
    /// The person's first words in it (up to 60 characters).
    pub preview: Option<String>,
    /// How many messages the person wrote in it.
    pub asked: i64,
}

/// What `/resume` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resumed {
    /// The session is the conversation's again (the one that was open ended).
    Now(EarlierSession),
    /// It is the conversation's open session already.
    AlreadyOpen(EarlierSession),
    /// No session of this conversation has that id.
    NotFound,
}

impl Store {
    /// The sessions under `key` other than the open one, newest first: titled ones only
    /// unless `untitled`; with `search`, those whose title or id holds it (any case).
    pub async fn earlier_sessions(
        &self,
        key: &str,
        search: Option<&str>,
        untitled: bool,
        limit: usize,
    ) -> Result<Vec<EarlierSession>, StoreError> {
        let key = key.to_owned();
        let search = search.map(|s| s.trim().to_lowercase());
        self.call(move |conn| {
            let rows = conn
                .prepare_cached(
                    "SELECT s.id, s.title, s.started_at,
                        (SELECT m.content FROM messages m WHERE m.session_id = s.id
                           AND m.role = 'user' ORDER BY m.id LIMIT 1),
                        (SELECT count(*) FROM messages m WHERE m.session_id = s.id
                           AND m.role = 'user')
                     FROM sessions s
                     WHERE s.session_key = ?1 AND s.ended_at IS NOT NULL
                     ORDER BY s.started_at DESC, s.id DESC LIMIT ?2",
                )?
                .query_map(params![key, LOOKED_THROUGH], |r| {
                    Ok(EarlierSession {
                        id: r.get(0)?,
                        title: r.get(1)?,
                        started_at: r.get(2)?,
                        preview: r.get::<_, Option<String>>(3)?.map(|t| preview(&t)),
                        asked: r.get(4)?,
                    })
                })?
                .collect::<Result<Vec<_>, _>>()?;
            Ok(rows
                .into_iter()
                .filter(|s| match &search {
                    Some(q) => {
                        s.id.to_lowercase().contains(q)
                            || s.title
                                .as_ref()
                                .is_some_and(|t| t.to_lowercase().contains(q))
                    }
                    None => untitled || s.title.is_some(),
                })
                .take(limit)
                .collect())
        })
        .await
    }

    /// Make session `id` the open session under `key` again, ending the one open now (with
    /// the reason `resumed`). One transaction: the conversation never has two open
    /// sessions, nor none it did not choose.
    pub async fn session_resume(&self, key: &str, id: &str) -> Result<Resumed, StoreError> {
        let key = key.to_owned();
        let id = id.to_owned();
        self.call(move |conn| {
            let tx = conn.transaction()?;
            let found = tx
                .prepare_cached(
                    "SELECT s.id, s.title, s.started_at, s.ended_at,
                        (SELECT m.content FROM messages m WHERE m.session_id = s.id
                           AND m.role = 'user' ORDER BY m.id LIMIT 1),
                        (SELECT count(*) FROM messages m WHERE m.session_id = s.id
                           AND m.role = 'user')
                     FROM sessions s WHERE s.id = ?1 AND s.session_key = ?2",
                )?
                .query_row(params![id, key], |r| {
                    Ok((
                        EarlierSession {
                            id: r.get(0)?,
                            title: r.get(1)?,
                            started_at: r.get(2)?,
                            preview: r.get::<_, Option<String>>(4)?.map(|t| preview(&t)),
                            asked: r.get(5)?,
                        },
                        r.get::<_, Option<i64>>(3)?,
                    ))
                })
                .optional()?;
            let Some((session, ended_at)) = found else {
                return Ok(Resumed::NotFound);
            };
            if ended_at.is_none() {
                return Ok(Resumed::AlreadyOpen(session));
            }
            let now = now_ms();
            tx.prepare_cached(
                "UPDATE sessions SET ended_at = ?1, end_reason = 'resumed'
                 WHERE session_key = ?2 AND ended_at IS NULL",
            )?
            .execute(params![now, key])?;
            tx.prepare_cached(
                "UPDATE sessions SET ended_at = NULL, end_reason = NULL, updated_at = ?1
                 WHERE id = ?2",
            )?
            .execute(params![now, id])?;
            tx.commit()?;
            Ok(Resumed::Now(session))
        })
        .await
    }
}

/// The first 60 characters of a message, on one line.
fn preview(text: &str) -> String {
    let line: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match line.char_indices().nth(60) {
        Some((end, _)) => format!("{}…", &line[..end]),
        None => line,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::StoredMessage;
    use hermes_adapter::{ChatKind, ChatRef, Platform};

    fn chat() -> ChatRef {
        ChatRef {
            platform: Platform::Telegram,
            account: None,
            chat_id: "1".into(),
            thread_id: None,
            kind: ChatKind::Direct,
        }
    }

    /// A session under `key` with one question, titled, then ended.
    async fn past(store: &Store, key: &str, question: &str, title: Option<&str>) -> String {
        let id = store.session_open(key, &chat(), None).await.unwrap().id;
        store
            .session_append(&id, vec![StoredMessage::user(question)])
            .await
            .unwrap();
        if let Some(title) = title {
            store.session_set_title(&id, title).await.unwrap();
        }
        store.session_end(key, "reset").await.unwrap();
        // Session ids and start times are per millisecond.
        tokio::time::sleep(std::time::Duration::from_millis(3)).await;
        id
    }

    async fn a_conversations_earlier_sessions_are_listed_found_and_resumed(store: Store) {
        let plan = past(&store, "k", "plan the trip to Lisbon", Some("Lisbon trip")).await;
        let chores = past(&store, "k", "weekly chores", None).await;
        let budget = past(&store, "k", "the budget", Some("Budget 2027")).await;
        let theirs = past(&store, "other", "someone else's", Some("Lisbon notes")).await;
        let open = store.session_open("k", &chat(), None).await.unwrap().id;

        let titled = store.earlier_sessions("k", None, false, 10).await.unwrap();
        let ids: Vec<&str> = titled.iter().map(|s| s.id.as_str()).collect();
        assert_eq!(
            ids,
            [budget.as_str(), plan.as_str()],
            "newest first, titled"
        );
        assert_eq!(
            titled[1].preview.as_deref(),
            Some("plan the trip to Lisbon")
        );
        assert_eq!(titled[1].asked, 1);
        let all = store.earlier_sessions("k", None, true, 10).await.unwrap();
        assert_eq!(all.len(), 3, "and untitled with `full`");
        assert!(all.iter().all(|s| s.id != open), "never the open one");
        let found = store
            .earlier_sessions("k", Some("LISBON"), false, 10)
            .await
            .unwrap();
        assert_eq!(found.len(), 1, "only this conversation's: {found:?}");
        assert_eq!(found[0].id, plan);

        assert_eq!(
            store.session_resume("k", &theirs).await.unwrap(),
            Resumed::NotFound,
            "another conversation's session is not found from here"
        );
        match store.session_resume("k", &plan).await.unwrap() {
            Resumed::Now(s) => assert_eq!(s.id, plan),
            other => panic!("{other:?}"),
        }
        assert_eq!(
            store.session_open("k", &chat(), None).await.unwrap().id,
            plan
        );
        let earlier = store.earlier_sessions("k", None, true, 10).await.unwrap();
        assert!(
            earlier.iter().any(|s| s.id == open),
            "the one left is listed"
        );
        assert!(matches!(
            store.session_resume("k", &plan).await.unwrap(),
            Resumed::AlreadyOpen(_)
        ));
        let _ = chores;
    }

    crate::store::on_both_engines!(a_conversations_earlier_sessions_are_listed_found_and_resumed);
}
