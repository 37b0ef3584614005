//! Each session's todo list (the `todo` tool), kept as the JSON the tool reads back, and
//! the memory snapshot each session's system prompt carries (taken once, at its first turn,
//! so the prompt stays the same bytes).

use rusqlite::params;

use super::db::Optional;

use super::{Store, StoreError, now_ms};

impl Store {
    /// Session `session_id`'s todo list (a JSON array), if it has one.
    pub async fn todos(&self, session_id: &str) -> Result<Option<String>, StoreError> {
        let session_id = session_id.to_owned();
        self.call(move |conn| {
            conn.prepare_cached("SELECT items FROM todos WHERE session_id = ?1")?
                .query_row([session_id], |r| r.get(0))
                .optional()
        })
        .await
    }

    pub async fn set_todos(&self, session_id: &str, items: String) -> Result<(), StoreError> {
        let session_id = session_id.to_owned();
        self.call(move |conn| {
            conn.prepare_cached(
                "INSERT INTO todos (session_id, items, updated_at) VALUES (?1, ?2, ?3)
                 ON CONFLICT (session_id) DO UPDATE
                 SET items = excluded.items, updated_at = excluded.updated_at",
            )?
            .execute(params![session_id, items, now_ms()])?;
            Ok(())
        })
        .await
    }

    /// What session `session_id` kept at its first turn (each `None` until it did).
    pub async fn session_kept(&self, session_id: &str) -> Result<SessionKept, StoreError> {
        let session_id = session_id.to_owned();
        self.call(move |conn| {
            Ok(conn
                .prepare_cached("SELECT memory, context FROM sessions WHERE id = ?1")?
                .query_row([session_id], |r| {
                    Ok(SessionKept {
                        memory: r.get(0)?,
                        context: r.get(1)?,
                    })
                })
                .optional()?
                .unwrap_or_default())
        })
        .await
    }

    /// Keep `value` as session `session_id`'s `kept` unless it has one already; the one it
    /// keeps.
    pub async fn keep_for_session(
        &self,
        session_id: &str,
        kept: Kept,
        value: String,
    ) -> Result<String, StoreError> {
        let session_id = session_id.to_owned();
        self.call(move |conn| {
            let column = kept.column();
            conn.prepare_cached(&format!(
                "UPDATE sessions SET {column} = ?1 WHERE id = ?2 AND {column} IS NULL"
            ))?
            .execute(params![value, session_id])?;
            Ok(conn
                .prepare_cached(&format!("SELECT {column} FROM sessions WHERE id = ?1"))?
                .query_row([session_id], |r| r.get::<_, Option<String>>(0))
                .optional()?
                .flatten()
                .unwrap_or(value))
        })
        .await
    }
}

/// What a session kept from its first turn.
#[derive(Debug, Clone, Default)]
pub struct SessionKept {
    pub memory: Option<String>,
    pub context: Option<String>,
}

/// What a session keeps from its first turn, so its system prompt stays the same bytes
/// (and providers' prompt caches hit) for as long as it lasts.
#[derive(Debug, Clone, Copy)]
pub enum Kept {
    /// The memory snapshot (`MEMORY.md`, `USER.md`).
    Memory,
    /// Where the conversation happens and with whom (JSON).
    Context,
}

impl Kept {
    fn column(self) -> &'static str {
        match self {
            Kept::Memory => "memory",
            Kept::Context => "context",
        }
    }
}
