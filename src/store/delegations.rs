//! Delegations running in the background (`delegate_task`): who asked, where, and the
//! tasks, so that after a restart the next start runs them again and their results still
//! come back into the conversation.

use hermes_adapter::{Author, ChatRef};
use rusqlite::params;

use super::{Store, StoreError, now_ms};

/// A delegation that went on in the background.
#[derive(Debug, Clone)]
pub struct RecordedDelegation {
    pub id: String,
    pub session_key: String,
    /// The session that delegated (its usage counts the children's tokens).
    pub session_id: String,
    pub chat: ChatRef,
    pub author: Author,
    /// The tasks as the tool took them (JSON).
    pub tasks: serde_json::Value,
}

impl Store {
    pub async fn delegation_started(&self, d: RecordedDelegation) -> Result<(), StoreError> {
        self.call(move |conn| {
            conn.prepare_cached(
                "INSERT INTO delegations (id, session_key, session_id, chat, author,
                    tasks, state, created_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, 'running', ?7)
                 ON CONFLICT (id) DO UPDATE SET session_key = excluded.session_key,
                    session_id = excluded.session_id, chat = excluded.chat,
                    author = excluded.author, tasks = excluded.tasks, state = 'running',
                    attempts = 1, created_at = excluded.created_at, ended_at = NULL",
            )?
            .execute(params![
                d.id,
                d.session_key,
                d.session_id,
                serde_json::to_string(&d.chat).unwrap_or_default(),
                serde_json::to_string(&d.author).unwrap_or_default(),
                d.tasks.to_string(),
                now_ms(),
            ])?;
            Ok(())
        })
        .await
    }

    /// `reported` (its results are in the inbox) or `stopped` (by `/stop` or `/new`).
    pub async fn delegation_ended(&self, id: &str, state: &str) -> Result<(), StoreError> {
        let (id, state) = (id.to_owned(), state.to_owned());
        self.call(move |conn| {
            conn.prepare_cached(
                "UPDATE delegations SET state = ?1, ended_at = ?2
                 WHERE id = ?3 AND state = 'running'",
            )?
            .execute(params![state, now_ms(), id])?;
            Ok(())
        })
        .await
    }

    /// Delegation `id` is run once more (after a restart); how many runs it has had.
    pub async fn delegation_run_again(&self, id: &str) -> Result<i64, StoreError> {
        let id = id.to_owned();
        self.call(move |conn| {
            conn.prepare_cached("UPDATE delegations SET attempts = attempts + 1 WHERE id = ?1")?
                .execute([&id])?;
            conn.prepare_cached("SELECT attempts FROM delegations WHERE id = ?1")?
                .query_row([&id], |r| r.get(0))
        })
        .await
    }

    /// The delegations still running, oldest first (rows that cannot be read are skipped
    /// with a log line: nothing could be done with them).
    pub async fn delegations_running(&self) -> Result<Vec<RecordedDelegation>, StoreError> {
        self.call(|conn| {
            let mut stmt = conn.prepare_cached(
                "SELECT id, session_key, session_id, chat, author, tasks FROM delegations
                 WHERE state = 'running' ORDER BY created_at",
            )?;
            let rows = stmt.query_map(params![], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, String>(3)?,
                    r.get::<_, String>(4)?,
                    r.get::<_, String>(5)?,
                ))
            })?;
            let mut out = Vec::new();
            for row in rows {
                let (id, session_key, session_id, chat, author, tasks) = row?;
                let parsed = (
                    serde_json::from_str(&chat),
                    serde_json::from_str(&author),
                    serde_json::from_str(&tasks),
                );
                match parsed {
                    (Ok(chat), Ok(author), Ok(tasks)) => out.push(RecordedDelegation {
                        id,
                        session_key,
                        session_id,
                        chat,
                        author,
                        tasks,
                    }),
                    _ => tracing::error!(delegation = %id, "store: a delegation cannot be read; skipped"),
                }
            }
            Ok(out)
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn a_running_delegation_is_listed_until_it_ends(store: Store) {
        let chat = hermes_adapter::ChatRef {
            platform: hermes_adapter::Platform::Telegram,
            account: None,
            chat_id: "1".into(),
            thread_id: None,
            kind: hermes_adapter::ChatKind::Direct,
        };
        let author = hermes_adapter::Author {
            user_id: "1".into(),
            display_name: "Tess".into(),
            username: None,
            is_bot: false,
        };
        store
            .delegation_started(RecordedDelegation {
                id: "d1".into(),
                session_key: "test".into(),
                session_id: "s-test".into(),
                chat: chat.clone(),
                author,
                tasks: serde_json::json!([{"goal": "look"}]),
            })
            .await
            .unwrap();
        let running = store.delegations_running().await.unwrap();
        assert_eq!(running.len(), 1);
        assert_eq!(running[0].chat, chat);
        assert_eq!(running[0].tasks[0]["goal"], "look");
        assert_eq!(store.delegation_run_again("d1").await.unwrap(), 2);
        store.delegation_ended("d1", "reported").await.unwrap();
        assert!(store.delegations_running().await.unwrap().is_empty());
    }

    crate::store::on_both_engines!(a_running_delegation_is_listed_until_it_ends,);
}
