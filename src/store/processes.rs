//! Background processes the daemon started, so that after a crash the next start can stop
//! the ones still running and tell their chats.

use hermes_adapter::ChatRef;
use rusqlite::params;

use super::{Store, StoreError, chat_from_row, collect_checked, now_ms};

/// A process recorded as running.
#[derive(Debug, Clone)]
pub struct RecordedProcess {
    pub id: String,
    pub chat: ChatRef,
    pub command: String,
    pub pgid: i32,
    /// Kernel start time of the group leader (`/proc/<pid>/stat` field 22), to tell a reused
    /// pid from ours.
    pub start_ticks: Option<u64>,
}

impl Store {
    pub async fn process_started(
        &self,
        p: RecordedProcess,
        session_key: &str,
    ) -> Result<(), StoreError> {
        let session_key = session_key.to_owned();
        self.call(move |conn| {
            conn.prepare_cached(
                "INSERT INTO background_processes (id, session_key, platform, chat_id,
                    thread_id, chat_kind, command, pgid, start_ticks, started_at, account)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)
                 ON CONFLICT (id) DO UPDATE SET session_key = excluded.session_key,
                    platform = excluded.platform, chat_id = excluded.chat_id,
                    thread_id = excluded.thread_id, chat_kind = excluded.chat_kind,
                    command = excluded.command, pgid = excluded.pgid,
                    start_ticks = excluded.start_ticks, state = 'running',
                    started_at = excluded.started_at, ended_at = NULL, account = excluded.account",
            )?
            .execute(params![
                p.id,
                session_key,
                p.chat.platform.as_str(),
                p.chat.chat_id,
                p.chat.thread_id,
                p.chat.kind.as_str(),
                p.command,
                p.pgid,
                p.start_ticks.map(|t| t as i64),
                now_ms(),
                p.chat.account,
            ])?;
            Ok(())
        })
        .await
    }

    /// `finished` (it ended by itself or was killed by a person) or `stopped` (by the gateway).
    pub async fn process_ended(&self, id: &str, state: &str) -> Result<(), StoreError> {
        let (id, state) = (id.to_owned(), state.to_owned());
        self.call(move |conn| {
            conn.prepare_cached("UPDATE background_processes SET state = ?1, ended_at = ?2 WHERE id = ?3 AND state = 'running'")?
.execute(
                params![state, now_ms(), id],
            )?;
            Ok(())
        })
        .await
    }

    pub async fn processes_running(&self) -> Result<Vec<RecordedProcess>, StoreError> {
        self.call(|conn| {
            let mut stmt = conn.prepare_cached(
                "SELECT * FROM background_processes WHERE state = 'running' ORDER BY started_at",
            )?;
            let rows = stmt.query_map(params![], |r| {
                Ok(match chat_from_row(r)? {
                    Ok(chat) => Ok(RecordedProcess {
                        id: r.get("id")?,
                        chat,
                        command: r.get("command")?,
                        pgid: r.get("pgid")?,
                        start_ticks: r.get::<_, Option<i64>>("start_ticks")?.map(|t| t as u64),
                    }),
                    Err(e) => Err(e),
                })
            })?;
            collect_checked(rows)
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hermes_adapter::{ChatKind, Platform};

    async fn running_processes_are_listed_until_they_end(store: Store) {
        let chat = ChatRef {
            platform: Platform::Telegram,
            account: None,
            chat_id: "3".into(),
            thread_id: None,
            kind: ChatKind::Group,
        };
        let p = RecordedProcess {
            id: "proc_1".into(),
            chat: chat.clone(),
            command: "sleep 9".into(),
            pgid: 42,
            start_ticks: Some(7),
        };
        store.process_started(p, "k").await.unwrap();
        let running = store.processes_running().await.unwrap();
        assert_eq!(running.len(), 1);
        assert_eq!(running[0].chat, chat);
        assert_eq!(running[0].start_ticks, Some(7));
        store.process_ended("proc_1", "finished").await.unwrap();
        assert!(store.processes_running().await.unwrap().is_empty());
    }

    crate::store::on_both_engines!(running_processes_are_listed_until_they_end,);
}
