//! Approval requests for dangerous commands (one row per prompt, with its decision) and the
//! standing allowlist of pattern classes approved "always".

use hermes_adapter::ChatRef;
use rusqlite::{OptionalExtension, params};

use super::{Store, StoreError, chat_from_row, collect_checked, now_ms};

/// An approval still pending in the store (found at startup: a restart expires them).
#[derive(Debug, Clone)]
pub struct PendingApproval {
    pub id: i64,
    pub chat: ChatRef,
    pub command: String,
    pub prompt_outbox_id: Option<i64>,
}

/// One standing "always" approval.
#[derive(Debug, Clone)]
pub struct AllowlistEntry {
    pub pattern_key: String,
    pub description: String,
    pub example: String,
    pub added_by: String,
}

impl Store {
    pub async fn approval_create(
        &self,
        session_key: &str,
        chat: &ChatRef,
        command: &str,
        pattern_keys: &[&str],
    ) -> Result<i64, StoreError> {
        let (key, chat, command) = (session_key.to_owned(), chat.clone(), command.to_owned());
        let keys = pattern_keys.join(",");
        self.call(move |conn| {
            conn.prepare_cached("INSERT INTO approvals (session_key, platform, account, chat_id, thread_id, chat_kind, command,
                    pattern_keys, created_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)")?
.execute(
                params![key, chat.platform.as_str(), chat.account, chat.chat_id, chat.thread_id, chat.kind.as_str(), command, keys, now_ms()],
            )?;
            Ok(conn.last_insert_rowid())
        })
        .await
    }

    pub async fn approval_set_prompt(&self, id: i64, outbox_id: i64) -> Result<(), StoreError> {
        self.call(move |conn| {
            conn.prepare_cached("UPDATE approvals SET prompt_outbox_id = ?1 WHERE id = ?2")?
                .execute(params![outbox_id, id])?;
            Ok(())
        })
        .await
    }

    /// Record the decision (`approved_once`, `approved_session`, `approved_always`, `denied`,
    /// `expired`, `cancelled`).
    pub async fn approval_decide(
        &self,
        id: i64,
        state: &str,
        decided_by: Option<String>,
    ) -> Result<(), StoreError> {
        let state = state.to_owned();
        self.call(move |conn| {
            conn.prepare_cached("UPDATE approvals SET state = ?1, decided_by = ?2, decided_at = ?3 WHERE id = ?4 AND state = 'pending'")?
.execute(
                params![state, decided_by, now_ms(), id],
            )?;
            Ok(())
        })
        .await
    }

    #[cfg(test)]
    pub async fn approval_state(&self, id: i64) -> Result<Option<String>, StoreError> {
        self.call(move |conn| {
            Ok(conn
                .prepare_cached("SELECT state FROM approvals WHERE id = ?1")?
                .query_row([id], |r| r.get(0))
                .optional()?)
        })
        .await
    }

    pub async fn approvals_pending(&self) -> Result<Vec<PendingApproval>, StoreError> {
        self.call(|conn| {
            let mut stmt =
                conn.prepare_cached("SELECT * FROM approvals WHERE state = 'pending' ORDER BY id")?;
            let rows = stmt.query_map([], |r| {
                Ok(match chat_from_row(r)? {
                    Ok(chat) => Ok(PendingApproval {
                        id: r.get("id")?,
                        chat,
                        command: r.get("command")?,
                        prompt_outbox_id: r.get("prompt_outbox_id")?,
                    }),
                    Err(e) => Err(e),
                })
            })?;
            collect_checked(rows)
        })
        .await
    }

    /// Whether every key is on the standing allowlist.
    pub async fn allowlist_covers(&self, keys: &[&str]) -> Result<bool, StoreError> {
        let keys: Vec<String> = keys.iter().map(|k| k.to_string()).collect();
        self.call(move |conn| {
            for key in &keys {
                let found = conn
                    .prepare_cached("SELECT 1 FROM approval_allowlist WHERE pattern_key = ?1")?
                    .query_row([key], |_| Ok(()))
                    .optional()?;
                if found.is_none() {
                    return Ok(false);
                }
            }
            Ok(true)
        })
        .await
    }

    pub async fn allowlist_add(
        &self,
        key: &str,
        description: &str,
        example: &str,
        added_by: &str,
    ) -> Result<(), StoreError> {
        let (key, description, example, added_by) = (
            key.to_owned(),
            description.to_owned(),
            example.to_owned(),
            added_by.to_owned(),
        );
        self.call(move |conn| {
            conn.prepare_cached("INSERT OR REPLACE INTO approval_allowlist (pattern_key, description, example, added_by, added_at)
                 VALUES (?1, ?2, ?3, ?4, ?5)")?
.execute(
                params![key, description, example, added_by, now_ms()],
            )?;
            Ok(())
        })
        .await
    }

    pub async fn allowlist_list(&self) -> Result<Vec<AllowlistEntry>, StoreError> {
        self.call(|conn| {
            let mut stmt = conn.prepare_cached(
                "SELECT pattern_key, description, example, added_by FROM approval_allowlist ORDER BY added_at",
            )?;
            let rows = stmt.query_map([], |r| {
                Ok(AllowlistEntry { pattern_key: r.get(0)?, description: r.get(1)?, example: r.get(2)?, added_by: r.get(3)? })
            })?;
            Ok(rows.collect::<Result<Vec<_>, _>>()?)
        })
        .await
    }

    pub async fn allowlist_remove(&self, key: &str) -> Result<bool, StoreError> {
        let key = key.to_owned();
        self.call(move |conn| {
            Ok(conn
                .prepare_cached("DELETE FROM approval_allowlist WHERE pattern_key = ?1")?
                .execute([key])?
                > 0)
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hermes_adapter::{ChatKind, Platform};

    #[tokio::test]
    async fn approvals_record_decisions_and_the_allowlist_persists() {
        let store = Store::open_in_memory().unwrap();
        let chat = ChatRef {
            platform: Platform::Telegram,
            account: None,
            chat_id: "5".into(),
            thread_id: None,
            kind: ChatKind::Group,
        };
        let id = store
            .approval_create("k", &chat, "rm -rf /tmp/x", &["rm-recursive"])
            .await
            .unwrap();
        store.approval_set_prompt(id, 77).await.unwrap();
        let pending = store.approvals_pending().await.unwrap();
        assert_eq!(pending.len(), 1);
        assert_eq!(pending[0].chat, chat);
        assert_eq!(pending[0].prompt_outbox_id, Some(77));
        store
            .approval_decide(id, "denied", Some("Ada".into()))
            .await
            .unwrap();
        store.approval_decide(id, "expired", None).await.unwrap();
        assert_eq!(
            store.approval_state(id).await.unwrap().as_deref(),
            Some("denied"),
            "the first decision stands"
        );

        assert!(!store.allowlist_covers(&["rm-recursive"]).await.unwrap());
        store
            .allowlist_add("rm-recursive", "recursive delete", "rm -rf x", "Ada")
            .await
            .unwrap();
        assert!(store.allowlist_covers(&["rm-recursive"]).await.unwrap());
        assert!(
            !store
                .allowlist_covers(&["rm-recursive", "mkfs"])
                .await
                .unwrap()
        );
        assert_eq!(store.allowlist_list().await.unwrap().len(), 1);
        assert!(store.allowlist_remove("rm-recursive").await.unwrap());
    }
}
