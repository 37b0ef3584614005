//! `hermes-gateway store migrate --to postgres://…`: an existing SQLite home's state copied
//! into an empty PostgreSQL store, table by table in one transaction, then checked: each
//! table's rows counted and digested on both sides (a sum of per-row hashes, so the
//! engines' different orders do not matter). FTS5's index is not copied: PostgreSQL's is
//! built from the messages.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::path::Path;

use rusqlite::types::Value;

use super::db::{Db, Pg, params0};
use super::{StoreError, configure, migrations};
use crate::config::PgTarget;

/// Tables in the order their rows can be inserted (a message refers to its session).
/// `schema_version` is each store's own; FTS5's tables are SQLite's.
fn tables(db: &Db) -> Result<Vec<String>, StoreError> {
    let mut stmt = db.prepare(
        "SELECT name FROM sqlite_schema WHERE type = 'table'
           AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' AND name NOT LIKE 'messages\\_fts%' ESCAPE '\\'
           AND name != 'schema_version'
         ORDER BY CASE name WHEN 'sessions' THEN 0 ELSE 1 END, name",
    )?;
    let names = stmt.query_map(params0(), |r| r.get(0))?;
    Ok(names.collect::<rusqlite::Result<Vec<String>>>()?)
}

fn columns(db: &Db, table: &str) -> Result<Vec<String>, StoreError> {
    let mut stmt = db.prepare("SELECT name FROM pragma_table_info(?1) ORDER BY cid")?;
    let names = stmt.query_map([table], |r| r.get(0))?;
    Ok(names.collect::<rusqlite::Result<Vec<String>>>()?)
}

/// What was copied: each table with its row count.
#[derive(Debug, Default)]
pub struct Copied {
    pub tables: Vec<(String, u64)>,
}

impl Copied {
    pub fn rows(&self) -> u64 {
        self.tables.iter().map(|(_, n)| n).sum()
    }
}

/// Copy the SQLite database at `path` into the PostgreSQL store at `target`, which must
/// hold no state yet, and check the copy. Blocking: run it off the runtime.
pub fn sqlite_to_postgres(path: &Path, target: &PgTarget) -> Result<Copied, StoreError> {
    if !path.exists() {
        return Err(StoreError::Invalid(format!(
            "there is no database at {}",
            path.display()
        )));
    }
    let conn = rusqlite::Connection::open(path).map_err(|source| StoreError::Open {
        path: path.display().to_string(),
        source,
    })?;
    configure(&conn)?;
    let mut from = Db::Sqlite(conn);
    migrations::apply(&mut from)?;
    let client = target.connect().map_err(|source| StoreError::Connect {
        url: target.shown().to_owned(),
        source,
    })?;
    let target_for_reconnect = target.clone();
    let pg = Pg::connect_with(
        client,
        Box::new(move || {
            target_for_reconnect
                .connect()
                .map_err(|source| StoreError::Connect {
                    url: target_for_reconnect.shown().to_owned(),
                    source,
                })
        }),
    );
    let mut to = Db::Postgres(Box::new(pg));
    migrations::apply(&mut to)?;
    let tables = tables(&from)?;
    for table in &tables {
        let rows: i64 = to.query_row(&format!("SELECT count(*) FROM {table}"), params0(), |r| {
            r.get(0)
        })?;
        if rows > 0 {
            return Err(StoreError::Invalid(format!(
                "the PostgreSQL store is not empty ({table} has {rows} rows): copy only into a new one"
            )));
        }
    }
    let mut copied = Copied::default();
    let tx = to.transaction()?;
    for table in &tables {
        let columns = columns(&from, table)?;
        let select = format!("SELECT {} FROM {table}", columns.join(", "));
        let insert = format!(
            "INSERT INTO {table} ({}) VALUES ({})",
            columns.join(", "),
            (1..=columns.len())
                .map(|i| format!("?{i}"))
                .collect::<Vec<_>>()
                .join(", ")
        );
        let mut read = from.prepare(&select)?;
        let mut write = tx.prepare(&insert)?;
        let mut count = 0u64;
        let mut failed = None;
        read.for_each_row(params0(), |row| {
            let values = (0..columns.len())
                .map(|i| row.get::<_, Value>(i))
                .collect::<rusqlite::Result<Vec<Value>>>()?;
            let args: Vec<&dyn rusqlite::ToSql> =
                values.iter().map(|v| v as &dyn rusqlite::ToSql).collect();
            match write.execute(args.as_slice()) {
                Ok(_) => {
                    count += 1;
                    Ok(std::ops::ControlFlow::Continue(()))
                }
                Err(e) => {
                    failed = Some(StoreError::Invalid(format!(
                        "{table}: a row could not be copied: {e}"
                    )));
                    Ok(std::ops::ControlFlow::Break(()))
                }
            }
        })?;
        if let Some(e) = failed {
            return Err(e);
        }
        if columns.first().is_some_and(|c| c == "id") && is_identity(&tx, table)? {
            // The next generated id follows the copied ones.
            tx.execute_batch(&format!(
                "SELECT setval(pg_get_serial_sequence('{table}', 'id'),
                               GREATEST((SELECT max(id) FROM {table}), 1),
                               (SELECT max(id) FROM {table}) IS NOT NULL)"
            ))?;
        }
        copied.tables.push((table.clone(), count));
    }
    tx.commit()?;
    for table in &tables {
        let columns = columns(&from, table)?;
        let (rows_from, digest_from) = digest(&from, table, &columns)?;
        let (rows_to, digest_to) = digest(&to, table, &columns)?;
        if (rows_from, digest_from) != (rows_to, digest_to) {
            return Err(StoreError::Invalid(format!(
                "the copy of {table} differs: {rows_from} rows in SQLite, {rows_to} in PostgreSQL{}",
                if rows_from == rows_to {
                    ", their contents differ"
                } else {
                    ""
                }
            )));
        }
    }
    Ok(copied)
}

fn is_identity(db: &Db, table: &str) -> Result<bool, StoreError> {
    let found: Option<String> = db.query_row(
        "SELECT CAST(pg_get_serial_sequence(?1, 'id') AS TEXT)",
        [table],
        |r| r.get(0),
    )?;
    Ok(found.is_some())
}

/// A table's row count and the sum of its rows' hashes.
fn digest(db: &Db, table: &str, columns: &[String]) -> Result<(u64, u64), StoreError> {
    let mut stmt = db.prepare(&format!("SELECT {} FROM {table}", columns.join(", ")))?;
    let (mut rows, mut sum) = (0u64, 0u64);
    stmt.for_each_row(params0(), |row| {
        let mut hasher = DefaultHasher::new();
        for i in 0..columns.len() {
            match row.get::<_, Value>(i)? {
                Value::Null => 0u8.hash(&mut hasher),
                Value::Integer(n) => (1u8, n).hash(&mut hasher),
                Value::Real(x) => (2u8, x.to_bits()).hash(&mut hasher),
                Value::Text(s) => (3u8, s).hash(&mut hasher),
                Value::Blob(b) => (4u8, b).hash(&mut hasher),
            }
        }
        rows += 1;
        sum = sum.wrapping_add(hasher.finish());
        Ok(std::ops::ControlFlow::Continue(()))
    })?;
    Ok((rows, sum))
}

#[cfg(test)]
mod tests {
    use hermes_adapter::{Author, ChatKind, ChatRef, MessageBody, Platform};

    use super::*;
    use crate::store::{CronJob, NewOutboxRow, PairingRequestOutcome, Store, StoredMessage};

    fn to_send(text: &str) -> Vec<NewOutboxRow> {
        vec![NewOutboxRow {
            chat: chat(),
            body: MessageBody::plain(text),
            reply_to: None,
            choices: Vec::new(),
            file: None,
            edit_of: None,
        }]
    }

    fn chat() -> ChatRef {
        ChatRef {
            platform: Platform::Telegram,
            account: None,
            chat_id: "42".into(),
            thread_id: None,
            kind: ChatKind::Direct,
        }
    }

    /// A home's store with a bit of everything a person would miss after a move.
    async fn lived_in(store: &Store) -> (String, i64) {
        let session = store.session_open("k", &chat(), Some("7")).await.unwrap();
        store
            .session_append(
                &session.id,
                vec![
                    StoredMessage::user("where did we put the zebra budget?"),
                    StoredMessage::assistant("In the shared drive."),
                ],
            )
            .await
            .unwrap();
        store
            .allowlist_add("rm-recursive", "rm -r", "rm -r build", "telegram:7", "")
            .await
            .unwrap();
        let PairingRequestOutcome::Issued(code) = store
            .pairing_request("telegram", "9", "Eve", "9")
            .await
            .unwrap()
        else {
            panic!("no code")
        };
        store.pairing_approve("telegram", &code).await.unwrap();
        store
            .cron_create(CronJob {
                id: "job1".into(),
                name: "standup".into(),
                prompt: "summarise".into(),
                schedule: "every 1d".into(),
                deliver: chat(),
                author: Author {
                    user_id: "7".into(),
                    display_name: "Ada".into(),
                    username: None,
                    is_bot: false,
                },
                origin_key: "k".into(),
                repeat: None,
                runs: 0,
                paused: false,
                catch_up: true,
                next_run_at: Some(1),
                last_run_at: None,
                created_at: 0,
            })
            .await
            .unwrap();
        let ids = store
            .outbox_enqueue(to_send("still to send"))
            .await
            .unwrap();
        (session.id, ids[0])
    }

    #[tokio::test]
    async fn a_sqlite_home_is_copied_whole_checked_and_only_into_an_empty_store() {
        let Some(pg) = crate::store::tests::PostgresStore::empty() else {
            return;
        };
        let home = tempfile::tempdir().unwrap();
        let path = home.path().join("gateway.db");
        let store = Store::open(&path).unwrap();
        let (session, pending) = lived_in(&store).await;
        drop(store);
        let target = PgTarget::parse(&pg.url, None).unwrap();

        let copy = {
            let (path, target) = (path.clone(), target.clone());
            tokio::task::spawn_blocking(move || sqlite_to_postgres(&path, &target))
        };
        let copied = copy.await.unwrap().unwrap();
        let rows = |table: &str| copied.tables.iter().find(|(t, _)| t == table).unwrap().1;
        assert_eq!(rows("messages"), 2);
        assert_eq!(rows("outbox"), 1);
        assert_eq!(rows("paired_users"), 1);

        // The same home (its state key) reads the copy as its own.
        let moved = Store::open_postgres(target.clone(), home.path()).unwrap();
        let tail = moved.session_tail(&session, 10_000).await.unwrap();
        assert_eq!(tail.len(), 2);
        assert_eq!(moved.search_messages("zebra", 5).await.unwrap().len(), 1);
        let allowed = moved.allowlist_list().await.unwrap();
        assert!(allowed[0].signed, "the signature still holds");
        let (_, paired) = moved.pairing_list().await.unwrap();
        assert!(paired[0].3, "the paired person is still signed");
        assert_eq!(moved.cron_list(None).await.unwrap().len(), 1);
        let queued = moved.outbox_pending(&chat()).await.unwrap();
        assert_eq!(queued[0].id, pending);
        // New rows get ids after the copied ones.
        let next = moved
            .outbox_enqueue(to_send("after the move"))
            .await
            .unwrap();
        assert!(next[0] > pending);
        drop(moved);

        // Twice is refused: the store is no longer empty.
        let again = tokio::task::spawn_blocking(move || sqlite_to_postgres(&path, &target))
            .await
            .unwrap()
            .unwrap_err();
        assert!(again.to_string().contains("not empty"), "{again}");
    }
}
