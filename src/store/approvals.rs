//! Approval requests for dangerous commands (one row per prompt, with its decision) and the
//! standing allowlist of pattern classes approved "always": for everyone (an admin's) or
//! for one person's own commands (`owner`, `platform:user_id`).

use hermes_adapter::ChatRef;
use rusqlite::params;

use super::db::Db;

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
    /// Whose commands it covers (`platform:user_id`); empty: everyone's.
    pub owner: String,
    /// Its MAC verifies: the gateway wrote it. A row that does not is never honoured.
    pub signed: bool,
}

/// The allowlist's table, as its rows are signed.
const ALLOWLIST: &str = "approval_allowlist";

/// The fields of an allowlist row that its MAC covers (the owner only when there is one,
/// so the rows signed before owners existed still verify).
fn allowlist_fields(
    key: &str,
    description: &str,
    example: &str,
    added_by: &str,
    at: i64,
    owner: &str,
) -> Vec<String> {
    let mut fields = vec![
        key.into(),
        description.into(),
        example.into(),
        added_by.into(),
        at.to_string(),
    ];
    if !owner.is_empty() {
        fields.push(owner.into());
    }
    fields
}

/// Sign every allowlist row (the upgrade that added the MACs).
pub(super) fn sign_existing(
    tx: &Db,
    key: &crate::state_key::StateKey,
) -> Result<usize, StoreError> {
    let rows: Vec<(String, String, String, String, i64)> = tx
        .prepare(
            "SELECT pattern_key, description, example, added_by, added_at FROM approval_allowlist",
        )?
        .query_map(params![], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
        })?
        .collect::<Result<_, _>>()?;
    let count = rows.len();
    for (pattern, description, example, added_by, at) in rows {
        let mac = key.sign(
            ALLOWLIST,
            &allowlist_fields(&pattern, &description, &example, &added_by, at, ""),
        );
        tx.execute(
            "UPDATE approval_allowlist SET mac = ?1 WHERE pattern_key = ?2",
            params![mac, pattern],
        )?;
    }
    Ok(count)
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
            conn.last_insert_rowid()
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
        use super::db::Optional;
        self.call(move |conn| {
            conn.prepare_cached("SELECT state FROM approvals WHERE id = ?1")?
                .query_row([id], |r| r.get(0))
                .optional()
        })
        .await
    }

    pub async fn approvals_pending(&self) -> Result<Vec<PendingApproval>, StoreError> {
        self.call(|conn| {
            let mut stmt =
                conn.prepare_cached("SELECT * FROM approvals WHERE state = 'pending' ORDER BY id")?;
            let rows = stmt.query_map(params![], |r| {
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

    /// Whether every key is on the standing allowlist for `owner`'s commands (a row for
    /// everyone, or one of theirs), by a row the gateway signed; a row that does not verify
    /// covers nothing and is reported.
    pub async fn allowlist_covers(&self, keys: &[&str], owner: &str) -> Result<bool, StoreError> {
        let keys: Vec<String> = keys.iter().map(|k| k.to_string()).collect();
        let owner = owner.to_owned();
        let signer = self.key.clone();
        self.call(move |conn| {
            let mut stmt = conn.prepare_cached(
                "SELECT description, example, added_by, added_at, mac, owner FROM approval_allowlist
                 WHERE pattern_key = ?1 AND owner IN ('', ?2)",
            )?;
            for key in &keys {
                let rows: Vec<(String, String, String, i64, String, String)> = stmt
                    .query_map(params![key, owner], |r| {
                        Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?))
                    })?
                    .collect::<Result<_, _>>()?;
                let mut covered = false;
                for (description, example, added_by, at, mac, row_owner) in rows {
                    let fields =
                        allowlist_fields(key, &description, &example, &added_by, at, &row_owner);
                    if signer.verifies(ALLOWLIST, &fields, &mac) {
                        covered = true;
                    } else {
                        tracing::error!(
                            pattern = %key,
                            "a standing approval in the database was not written by the gateway (its signature does not verify): it is ignored and the command asks; remove it with `hermes-gateway approvals revoke`"
                        );
                    }
                }
                if !covered {
                    return Ok(false);
                }
            }
            Ok(true)
        })
        .await
    }

    /// A standing approval of the class `key`, for `owner`'s commands (`platform:user_id`)
    /// or, with an empty owner, for everyone's.
    pub async fn allowlist_add(
        &self,
        key: &str,
        description: &str,
        example: &str,
        added_by: &str,
        owner: &str,
    ) -> Result<(), StoreError> {
        let (key, description, example, added_by, owner) = (
            key.to_owned(),
            description.to_owned(),
            example.to_owned(),
            added_by.to_owned(),
            owner.to_owned(),
        );
        let signer = self.key.clone();
        self.call(move |conn| {
            let at = now_ms();
            let fields = allowlist_fields(&key, &description, &example, &added_by, at, &owner);
            let mac = signer.sign(ALLOWLIST, &fields);
            conn.prepare_cached(
                "INSERT INTO approval_allowlist (pattern_key, description, example, added_by, added_at, mac, owner)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
                 ON CONFLICT (pattern_key, owner) DO UPDATE SET description = excluded.description,
                    example = excluded.example, added_by = excluded.added_by,
                    added_at = excluded.added_at, mac = excluded.mac",
            )?
            .execute(params![key, description, example, added_by, at, mac, owner])?;
            Ok(())
        })
        .await
    }

    pub async fn allowlist_list(&self) -> Result<Vec<AllowlistEntry>, StoreError> {
        let signer = self.key.clone();
        self.call(move |conn| {
            let mut stmt = conn.prepare_cached(
                "SELECT pattern_key, description, example, added_by, added_at, mac, owner FROM approval_allowlist ORDER BY added_at",
            )?;
            let rows = stmt.query_map(params![], |r| {
                let (pattern_key, description, example, added_by): (String, String, String, String) =
                    (r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?);
                let owner: String = r.get(6)?;
                let fields = allowlist_fields(&pattern_key, &description, &example, &added_by, r.get(4)?, &owner);
                let signed = signer.verifies(ALLOWLIST, &fields, &r.get::<_, String>(5)?);
                Ok(AllowlistEntry { pattern_key, description, example, added_by, owner, signed })
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

    /// Whether `key` is on the standing allowlist for `owner`'s commands.
    async fn covers(store: &Store, key: &str, owner: &str) -> bool {
        store.allowlist_covers(&[key], owner).await.unwrap()
    }
    use hermes_adapter::{ChatKind, Platform};

    /// A standing approval made for one person covers their commands only, and turning
    /// it into everyone's in the database breaks its signature.
    async fn a_persons_standing_approval_covers_only_their_commands(store: Store) {
        store
            .allowlist_add(
                "rm-recursive",
                "recursive delete",
                "rm -rf x",
                "Ada",
                "telegram:1",
            )
            .await
            .unwrap();
        assert!(covers(&store, "rm-recursive", "telegram:1").await);
        assert!(!covers(&store, "rm-recursive", "telegram:2").await);
        assert!(!covers(&store, "rm-recursive", "discord:1").await);
        store
            .call(|conn| {
                conn.execute("UPDATE approval_allowlist SET owner = ''", params![])?;
                Ok(())
            })
            .await
            .unwrap();
        assert!(
            !covers(&store, "rm-recursive", "telegram:2").await,
            "made everyone's behind the gateway's back"
        );
        store
            .allowlist_add("rm-recursive", "recursive delete", "rm -rf y", "Root", "")
            .await
            .unwrap();
        assert!(covers(&store, "rm-recursive", "telegram:2").await);
        let owners: Vec<String> = store
            .allowlist_list()
            .await
            .unwrap()
            .into_iter()
            .filter(|e| e.signed)
            .map(|e| e.owner)
            .collect();
        assert_eq!(owners, [""]);
    }

    async fn a_standing_approval_the_gateway_did_not_write_covers_nothing(store: Store) {
        store
            .allowlist_add("rm-recursive", "recursive delete", "rm -rf x", "Ada", "")
            .await
            .unwrap();
        assert!(covers(&store, "rm-recursive", "telegram:1").await);
        // Rows as a command with the database open would write them: without a MAC, with
        // another row's MAC, or a signed row changed.
        store
            .call(|conn| {
                conn.execute_batch(
                    "INSERT INTO approval_allowlist (pattern_key, description, example, added_by, added_at)
                     VALUES ('read-secrets', 'x', 'cat .env', 'model', 0);
                     INSERT INTO approval_allowlist (pattern_key, description, example, added_by, added_at, mac)
                     SELECT 'curl-pipe-sh', description, example, added_by, added_at, mac
                     FROM approval_allowlist WHERE pattern_key = 'rm-recursive';",
                )?;
                Ok(())
            })
            .await
            .unwrap();
        assert!(!covers(&store, "read-secrets", "telegram:1").await);
        assert!(!covers(&store, "curl-pipe-sh", "telegram:1").await);
        store
            .call(|conn| {
                conn.execute(
                    "UPDATE approval_allowlist SET added_by = 'someone else' WHERE pattern_key = 'rm-recursive'",
                    params![],
                )?;
                Ok(())
            })
            .await
            .unwrap();
        assert!(!covers(&store, "rm-recursive", "telegram:1").await);
        let listed = store.allowlist_list().await.unwrap();
        assert_eq!(listed.len(), 3);
        assert!(listed.iter().all(|e| !e.signed), "{listed:?}");
    }

    /// A database of schema 10 (before signatures) with one standing approval and one
    /// paired person.
    fn older_database(path: &std::path::Path) {
        let mut conn = rusqlite::Connection::open(path).unwrap();
        conn.execute_batch("CREATE TABLE schema_version (version INTEGER NOT NULL);")
            .unwrap();
        let tx = conn.transaction().unwrap();
        for step in &super::super::migrations::MIGRATIONS_FOR_TESTS[..10] {
            tx.execute_batch(step).unwrap();
        }
        tx.execute_batch(
            "INSERT INTO schema_version VALUES (10);
             INSERT INTO approval_allowlist (pattern_key, description, example, added_by, added_at)
             VALUES ('rm-recursive', 'recursive delete', 'rm -rf x', 'Ada', 5);
             INSERT INTO paired_users (platform, user_id, user_name, approved_at)
             VALUES ('telegram', '42', 'Bo', 6);",
        )
        .unwrap();
        tx.commit().unwrap();
    }

    #[test]
    fn signatures_taken_out_of_the_database_sign_nothing_again() {
        // The key exists, but the schema says "before signatures": someone dropped the
        // column and the version to have forged rows signed.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("gateway.db");
        crate::state_key::StateKey::load_or_create(dir.path()).unwrap();
        older_database(&path);
        let runtime = tokio::runtime::Runtime::new().unwrap();
        runtime.block_on(async {
            let store = Store::open(&path).unwrap();
            assert!(!covers(&store, "rm-recursive", "telegram:1").await);
            assert!(!store.pairing_is_approved("telegram", "42").await.unwrap());
        });
    }

    #[test]
    fn an_upgrade_signs_the_rows_an_older_gateway_wrote() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("gateway.db");
        older_database(&path);
        let runtime = tokio::runtime::Runtime::new().unwrap();
        runtime.block_on(async {
            let store = Store::open(&path).unwrap();
            assert!(covers(&store, "rm-recursive", "telegram:1").await);
            assert!(store.pairing_is_approved("telegram", "42").await.unwrap());
            assert!(dir.path().join(crate::state_key::FILE).exists());
        });
    }

    async fn approvals_record_decisions_and_the_allowlist_persists(store: Store) {
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

        assert!(!covers(&store, "rm-recursive", "telegram:1").await);
        store
            .allowlist_add("rm-recursive", "recursive delete", "rm -rf x", "Ada", "")
            .await
            .unwrap();
        assert!(covers(&store, "rm-recursive", "telegram:1").await);
        assert!(
            !store
                .allowlist_covers(&["rm-recursive", "mkfs"], "telegram:1")
                .await
                .unwrap()
        );
        assert_eq!(store.allowlist_list().await.unwrap().len(), 1);
        assert!(store.allowlist_remove("rm-recursive").await.unwrap());
    }

    crate::store::on_both_engines!(
        a_persons_standing_approval_covers_only_their_commands,
        a_standing_approval_the_gateway_did_not_write_covers_nothing,
        approvals_record_decisions_and_the_allowlist_persists,
    );
}
