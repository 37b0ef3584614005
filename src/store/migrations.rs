//! Versioned schema migrations. Each entry runs once, in order; the steps pending at a start
//! run in one transaction, and the version reached is kept in `schema_version`.

use super::StoreError;
use super::db::{Db, params0};

mod postgres;
mod sqlite;
use postgres::{POSTGRES_FROM, POSTGRES_SCHEMA, POSTGRES_STEPS};
use sqlite::SCHEMA;

/// The schema, one step per version. Never edit a released step; append a new one.
const MIGRATIONS: &[&str] = &[
    // 1: sessions, messages + FTS, inbox, outbox, cursors, pairing.
    r#"
    CREATE TABLE sessions (
        id            TEXT PRIMARY KEY,
        session_key   TEXT NOT NULL,
        platform      TEXT NOT NULL,
        chat_id       TEXT NOT NULL,
        thread_id     TEXT,
        chat_kind     TEXT NOT NULL,
        user_id       TEXT,
        started_at    INTEGER NOT NULL,
        updated_at    INTEGER NOT NULL,
        ended_at      INTEGER,
        end_reason    TEXT,
        message_count INTEGER NOT NULL DEFAULT 0
    );
    CREATE INDEX sessions_by_key ON sessions(session_key, ended_at);

    CREATE TABLE messages (
        id           INTEGER PRIMARY KEY,
        session_id   TEXT NOT NULL REFERENCES sessions(id),
        role         TEXT NOT NULL,
        content      TEXT,
        tool_calls   TEXT,
        tool_call_id TEXT,
        tool_name    TEXT,
        created_at   INTEGER NOT NULL
    );
    CREATE INDEX messages_by_session ON messages(session_id, id);
    CREATE VIRTUAL TABLE messages_fts USING fts5(content, content=messages, content_rowid=id);
    CREATE TRIGGER messages_fts_insert AFTER INSERT ON messages BEGIN
        INSERT INTO messages_fts(rowid, content) VALUES (new.id, new.content);
    END;
    CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages BEGIN
        INSERT INTO messages_fts(messages_fts, rowid, content) VALUES ('delete', old.id, old.content);
    END;
    CREATE TRIGGER messages_fts_update AFTER UPDATE ON messages BEGIN
        INSERT INTO messages_fts(messages_fts, rowid, content) VALUES ('delete', old.id, old.content);
        INSERT INTO messages_fts(rowid, content) VALUES (new.id, new.content);
    END;

    CREATE TABLE inbox (
        id           INTEGER PRIMARY KEY,
        event_id     TEXT NOT NULL UNIQUE,
        platform     TEXT NOT NULL,
        chat_id      TEXT NOT NULL,
        thread_id    TEXT,
        chat_kind    TEXT NOT NULL,
        user_id      TEXT NOT NULL,
        user_name    TEXT NOT NULL,
        username     TEXT,
        is_bot       INTEGER NOT NULL DEFAULT 0,
        kind         TEXT NOT NULL,
        message_id   TEXT,
        text         TEXT,
        addressed    INTEGER NOT NULL DEFAULT 0,
        unsupported  TEXT,
        press_id     TEXT,
        button_data  TEXT,
        state        TEXT NOT NULL,
        outcome      TEXT,
        received_at  INTEGER NOT NULL,
        updated_at   INTEGER NOT NULL
    );
    CREATE INDEX inbox_open ON inbox(state) WHERE state = 'received';

    CREATE TABLE outbox (
        id                  INTEGER PRIMARY KEY,
        platform            TEXT NOT NULL,
        chat_id             TEXT NOT NULL,
        thread_id           TEXT,
        chat_kind           TEXT NOT NULL,
        reply_to            TEXT,
        markup              TEXT,
        plain               TEXT NOT NULL,
        buttons             TEXT,
        state               TEXT NOT NULL DEFAULT 'pending',
        attempts            INTEGER NOT NULL DEFAULT 0,
        last_error          TEXT,
        platform_message_id TEXT,
        created_at          INTEGER NOT NULL,
        sent_at             INTEGER
    );
    CREATE INDEX outbox_pending ON outbox(platform, chat_id, id) WHERE state = 'pending';

    CREATE TABLE cursors (
        platform TEXT PRIMARY KEY,
        value    TEXT NOT NULL
    );

    CREATE TABLE pairing_requests (
        platform   TEXT NOT NULL,
        code       TEXT NOT NULL,
        user_id    TEXT NOT NULL,
        user_name  TEXT NOT NULL,
        chat_id    TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        expires_at INTEGER NOT NULL,
        reminded_at INTEGER NOT NULL,
        PRIMARY KEY (platform, code)
    );
    CREATE TABLE paired_users (
        platform    TEXT NOT NULL,
        user_id     TEXT NOT NULL,
        user_name   TEXT NOT NULL,
        approved_at INTEGER NOT NULL,
        PRIMARY KEY (platform, user_id)
    );
    CREATE TABLE pairing_failures (
        platform TEXT NOT NULL,
        at       INTEGER NOT NULL
    );
    "#,
    // 2: dangerous-command approvals and the standing allowlist.
    r#"
    CREATE TABLE approvals (
        id               INTEGER PRIMARY KEY,
        session_key      TEXT NOT NULL,
        platform         TEXT NOT NULL,
        chat_id          TEXT NOT NULL,
        thread_id        TEXT,
        chat_kind        TEXT NOT NULL,
        command          TEXT NOT NULL,
        pattern_keys     TEXT NOT NULL,
        state            TEXT NOT NULL DEFAULT 'pending',
        decided_by       TEXT,
        prompt_outbox_id INTEGER,
        created_at       INTEGER NOT NULL,
        decided_at       INTEGER
    );
    CREATE INDEX approvals_pending ON approvals(state) WHERE state = 'pending';
    CREATE TABLE approval_allowlist (
        pattern_key TEXT PRIMARY KEY,
        description TEXT NOT NULL,
        example     TEXT NOT NULL,
        added_by    TEXT NOT NULL,
        added_at    INTEGER NOT NULL
    );
    "#,
    // 3: background processes, so a crash cannot leave them running untracked.
    r#"
    CREATE TABLE background_processes (
        id          TEXT PRIMARY KEY,
        session_key TEXT NOT NULL,
        platform    TEXT NOT NULL,
        chat_id     TEXT NOT NULL,
        thread_id   TEXT,
        chat_kind   TEXT NOT NULL,
        command     TEXT NOT NULL,
        pgid        INTEGER NOT NULL,
        start_ticks INTEGER,
        state       TEXT NOT NULL DEFAULT 'running',
        started_at  INTEGER NOT NULL,
        ended_at    INTEGER
    );
    CREATE INDEX background_running ON background_processes(state) WHERE state = 'running';
    "#,
    // 4: the four-platform contract. Chats name their account (Slack team, Discord guild,
    // WhatsApp number); inbound events keep their whole JSON payload (new contract fields
    // need no migration); the outbox carries edits as rows of their own (queued in the
    // chat's order), claims a row while sending it, and records delivery reports.
    r#"
    ALTER TABLE inbox ADD COLUMN account TEXT;
    ALTER TABLE inbox ADD COLUMN payload TEXT;
    ALTER TABLE outbox ADD COLUMN account TEXT;
    ALTER TABLE outbox RENAME COLUMN buttons TO choices;
    ALTER TABLE outbox ADD COLUMN action TEXT NOT NULL DEFAULT 'message';
    ALTER TABLE outbox ADD COLUMN edit_of INTEGER;
    ALTER TABLE outbox ADD COLUMN delivery_status TEXT;
    ALTER TABLE outbox ADD COLUMN delivery_detail TEXT;
    CREATE INDEX outbox_by_platform_id ON outbox(platform, platform_message_id)
        WHERE platform_message_id IS NOT NULL;
    ALTER TABLE sessions ADD COLUMN account TEXT;
    ALTER TABLE approvals ADD COLUMN account TEXT;
    ALTER TABLE background_processes ADD COLUMN account TEXT;
    "#,
    // 5: cursors are kept per bot (a new token must not resume at another bot's offset).
    // The cursor of schema 4 does not say whose it is: it is kept under the empty key,
    // which no adapter uses.
    r#"
    CREATE TABLE cursors_by_key (
        platform TEXT NOT NULL,
        key      TEXT NOT NULL,
        value    TEXT NOT NULL,
        PRIMARY KEY (platform, key)
    );
    INSERT INTO cursors_by_key (platform, key, value) SELECT platform, '', value FROM cursors;
    DROP TABLE cursors;
    ALTER TABLE cursors_by_key RENAME TO cursors;
    "#,
    // 6: the outbox carries files (`action = 'file'`, the file as JSON).
    r#"
    ALTER TABLE outbox ADD COLUMN file TEXT;
    "#,
    // 7: a streamed answer names the inbox row it answers, so a turn run again after a
    // crash edits it instead of sending a second copy.
    r#"
    ALTER TABLE outbox ADD COLUMN stream_for INTEGER;
    CREATE INDEX outbox_stream ON outbox(stream_for) WHERE stream_for IS NOT NULL;
    "#,
    // 8: the tokens each turn took (`/usage`).
    r#"
    CREATE TABLE usage (
        id          INTEGER PRIMARY KEY,
        session_id  TEXT NOT NULL,
        at          INTEGER NOT NULL,
        model       TEXT NOT NULL,
        prompt      INTEGER NOT NULL,
        completion  INTEGER NOT NULL,
        cached      INTEGER NOT NULL
    );
    CREATE INDEX usage_by_session ON usage(session_id);
    CREATE INDEX usage_by_time ON usage(at);
    "#,
    // 9: what a turn cost (cache writes, money); messages taken out of the model's context
    // (summarised by compression, or undone) but kept for search, and the turn each
    // message belongs to (the id of the turn's first message); session titles; per-chat
    // settings (`/model`, `/personality`, `/verbose`); home channels set with `/sethome`;
    // each session's todo list, and the memory snapshot its system prompt carries;
    // scheduled jobs.
    r#"
    ALTER TABLE usage ADD COLUMN cache_write INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE usage ADD COLUMN cost_micros INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE messages ADD COLUMN hidden TEXT;
    ALTER TABLE messages ADD COLUMN hidden_by INTEGER;
    ALTER TABLE messages ADD COLUMN turn INTEGER;
    ALTER TABLE sessions ADD COLUMN title TEXT;
    CREATE TABLE chat_settings (
        session_key TEXT NOT NULL,
        name        TEXT NOT NULL,
        value       TEXT NOT NULL,
        updated_at  INTEGER NOT NULL,
        PRIMARY KEY (session_key, name)
    );
    CREATE TABLE home_channels (
        platform TEXT PRIMARY KEY,
        chat     TEXT NOT NULL,
        set_by   TEXT NOT NULL,
        set_at   INTEGER NOT NULL
    );
    CREATE TABLE todos (
        session_id TEXT PRIMARY KEY,
        items      TEXT NOT NULL,
        updated_at INTEGER NOT NULL
    );
    ALTER TABLE sessions ADD COLUMN memory TEXT;
    CREATE TABLE cron_jobs (
        id          TEXT PRIMARY KEY,
        name        TEXT NOT NULL,
        prompt      TEXT NOT NULL,
        schedule    TEXT NOT NULL,
        deliver     TEXT NOT NULL,
        author      TEXT NOT NULL,
        origin_key  TEXT NOT NULL,
        repeat      INTEGER,
        runs        INTEGER NOT NULL DEFAULT 0,
        paused      INTEGER NOT NULL DEFAULT 0,
        catch_up    INTEGER NOT NULL DEFAULT 1,
        next_run_at INTEGER,
        last_run_at INTEGER,
        created_at  INTEGER NOT NULL
    );
    "#,
    // 10: delegations running in the background (`delegate_task`), so a restart runs them
    // again and their results still reach the conversation; where and with whom a session
    // is, kept from its first turn (its system prompt stays the same bytes).
    r#"
    ALTER TABLE sessions ADD COLUMN context TEXT;
    CREATE TABLE delegations (
        id          TEXT PRIMARY KEY,
        session_key TEXT NOT NULL,
        session_id  TEXT NOT NULL,
        chat        TEXT NOT NULL,
        author      TEXT NOT NULL,
        tasks       TEXT NOT NULL,
        state       TEXT NOT NULL DEFAULT 'running',
        attempts    INTEGER NOT NULL DEFAULT 1,
        created_at  INTEGER NOT NULL,
        ended_at    INTEGER
    );
    "#,
    // 11: standing approvals and paired people carry the MAC of their contents under the
    // home's state key (`crate::state_key`); the rows an upgrade finds are signed then.
    r#"
    ALTER TABLE approval_allowlist ADD COLUMN mac TEXT NOT NULL DEFAULT '';
    ALTER TABLE paired_users ADD COLUMN mac TEXT NOT NULL DEFAULT '';
    "#,
    // 12: a standing approval covers everyone's commands (an admin's; `owner` empty, as
    // every row before) or one person's own (`owner` = `platform:user_id`), so its key
    // is the pattern with its owner.
    r#"
    ALTER TABLE approval_allowlist RENAME TO approval_allowlist_before_owners;
    CREATE TABLE approval_allowlist (
        pattern_key TEXT NOT NULL,
        description TEXT NOT NULL,
        example     TEXT NOT NULL,
        added_by    TEXT NOT NULL,
        added_at    INTEGER NOT NULL,
        mac TEXT NOT NULL DEFAULT '',
        owner TEXT NOT NULL DEFAULT '',
        PRIMARY KEY (pattern_key, owner)
    );
    INSERT INTO approval_allowlist (pattern_key, description, example, added_by, added_at, mac)
        SELECT pattern_key, description, example, added_by, added_at, mac
        FROM approval_allowlist_before_owners;
    DROP TABLE approval_allowlist_before_owners;
    "#,
    // 13: retention. An event id outlives its pruned inbox row while the platform may still
    // redeliver it (`seen_events`). An event's payload is kept beside its row only until it
    // is handled (`inbox_payloads`), and the inbox keeps no text: the `text` and `payload`
    // columns stay for rows of schema 1–3 still open, and are empty otherwise.
    r#"
    CREATE TABLE seen_events (
        event_id    TEXT PRIMARY KEY,
        received_at INTEGER NOT NULL
    ) WITHOUT ROWID;
    CREATE TABLE inbox_payloads (
        inbox_id INTEGER PRIMARY KEY,
        payload  TEXT NOT NULL
    );
    INSERT INTO inbox_payloads (inbox_id, payload)
        SELECT id, payload FROM inbox WHERE state = 'received' AND payload IS NOT NULL;
    UPDATE inbox SET payload = NULL WHERE payload IS NOT NULL;
    UPDATE inbox SET text = NULL WHERE text IS NOT NULL
        AND (state != 'received' OR id IN (SELECT inbox_id FROM inbox_payloads));
    "#,
    // 14: several nodes on one store (docs/scaling.md). A lease is held by one node until
    // `expires_at` (ms, the store's clock); `token` grows each time it changes hands (the
    // fencing token). Each node says it is alive in `nodes`. `profile` keeps room for
    // several Hermes profiles served from one store.
    r#"
    CREATE TABLE leases (
        name       TEXT PRIMARY KEY,
        holder     TEXT NOT NULL,
        token      INTEGER NOT NULL,
        taken_at   INTEGER NOT NULL,
        expires_at INTEGER NOT NULL,
        profile    TEXT NOT NULL DEFAULT ''
    );
    CREATE TABLE nodes (
        id         TEXT PRIMARY KEY,
        version    TEXT NOT NULL,
        started_at INTEGER NOT NULL,
        seen_at    INTEGER NOT NULL,
        profile    TEXT NOT NULL DEFAULT ''
    );
    "#,
    // 15: what an adapter must remember between an event and its answer, whichever node
    // (or restart) handles the answer: a Slack press's presser, a slash command's
    // `response_url`, the threads the bot answered in. Each entry lapses at `expires_at`
    // (ms); retention deletes the lapsed ones.
    r#"
    CREATE TABLE adapter_memory (
        platform   TEXT NOT NULL,
        key        TEXT NOT NULL,
        value      TEXT NOT NULL,
        expires_at INTEGER NOT NULL,
        profile    TEXT NOT NULL DEFAULT '',
        PRIMARY KEY (platform, key)
    );
    CREATE INDEX adapter_memory_by_expiry ON adapter_memory(expires_at);
    "#,
];

/// Every step, for tests that build an older database.
#[cfg(test)]
pub const MIGRATIONS_FOR_TESTS: &[&str] = MIGRATIONS;

/// The step whose upgrade signs the rows already there.
pub const SIGNED_ROWS: i64 = 11;

/// The newest schema version (both engines).
fn known() -> i64 {
    MIGRATIONS.len() as i64
}

/// Bring the schema up to date.
pub fn apply(db: &mut Db) -> Result<(), StoreError> {
    apply_then(db, |_, _| Ok(()))
}

/// Bring the schema up to date; `upgraded` runs in the same transaction with the version
/// the database had (not for a new one), for what SQL alone cannot migrate.
pub fn apply_then(
    db: &mut Db,
    upgraded: impl FnOnce(&Db, i64) -> Result<(), StoreError>,
) -> Result<(), StoreError> {
    let postgres = db.is_postgres();
    if postgres {
        // Nodes starting together: one migrates, the others wait for it, then find the
        // schema current. The lock is the session's, let go at the end of this call.
        db.execute_batch(
            "SELECT pg_advisory_lock(4835127);
             CREATE TABLE IF NOT EXISTS schema_version (version BIGINT NOT NULL);",
        )?;
    } else {
        db.execute_batch("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL);")?;
    }
    let result = migrate(db, upgraded);
    if postgres {
        db.execute_batch("SELECT pg_advisory_unlock(4835127)")?;
    }
    result
}

fn migrate(
    db: &mut Db,
    upgraded: impl FnOnce(&Db, i64) -> Result<(), StoreError>,
) -> Result<(), StoreError> {
    let current: i64 = db.query_row(
        "SELECT CAST(COALESCE(MAX(version), 0) AS BIGINT) FROM schema_version",
        params0(),
        |r| r.get(0),
    )?;
    let known = known();
    if current > known {
        return Err(StoreError::TooNew {
            found: current,
            known,
        });
    }
    if current == known {
        return Ok(());
    }
    // Every pending step in one transaction: an upgrade lands whole or not at all, and a
    // new database is created with one commit instead of one per step.
    let tx = db.transaction()?;
    match (tx.is_postgres(), current) {
        (false, 0) => tx.execute_batch(SCHEMA)?,
        (false, _) => {
            for step in &MIGRATIONS[current as usize..] {
                tx.execute_batch(step)?;
            }
        }
        (true, 0) => {
            tx.execute_batch(POSTGRES_SCHEMA)?;
            for step in POSTGRES_STEPS {
                tx.execute_batch(step)?;
            }
        }
        (true, _) => {
            for step in &POSTGRES_STEPS[(current - POSTGRES_FROM).max(0) as usize..] {
                tx.execute_batch(step)?;
            }
        }
    }
    if current != 0 {
        upgraded(&tx, current)?;
    }
    tx.execute("DELETE FROM schema_version", params0())?;
    tx.execute("INSERT INTO schema_version (version) VALUES (?1)", [known])?;
    tx.commit()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rusqlite::Connection;

    /// The upgraded database's store, and the one event it holds open.
    async fn the_one_open_event(conn: Db) -> (crate::store::Store, hermes_adapter::Inbound) {
        let store =
            crate::store::Store::spawn(conn, crate::state_key::StateKey::from_bytes(&[1; 32]));
        let mut open = store.inbox_unfinished().await.unwrap();
        assert_eq!(open.len(), 1);
        (store, open.remove(0).event)
    }

    /// The one number a `SELECT count(*)` gives.
    fn count(conn: &Db, sql: &str) -> i64 {
        conn.query_row(sql, params0(), |r| r.get(0)).unwrap()
    }

    #[test]
    fn migrations_are_idempotent_and_fts_works() {
        let mut conn = Db::Sqlite(Connection::open_in_memory().unwrap());
        apply(&mut conn).unwrap();
        apply(&mut conn).unwrap();
        conn.execute(
            "INSERT INTO sessions (id, session_key, platform, chat_id, chat_kind, started_at, updated_at)
             VALUES ('s1', 'k', 'telegram', '1', 'dm', 0, 0)",
            params0(),
        )
        .unwrap();
        conn.execute(
            "INSERT INTO messages (session_id, role, content, created_at) VALUES ('s1', 'user', 'the quick brown fox', 0)",
            params0(),
        )
        .unwrap();
        assert_eq!(
            count(
                &conn,
                "SELECT count(*) FROM messages_fts WHERE messages_fts MATCH 'brown'"
            ),
            1
        );
    }

    #[tokio::test]
    async fn a_database_of_the_first_shape_upgrades_and_its_open_work_still_reads() {
        let mut conn = Db::Sqlite(Connection::open_in_memory().unwrap());
        for step in &MIGRATIONS[..3] {
            conn.execute_batch(step).unwrap();
        }
        conn.execute_batch(
            "CREATE TABLE schema_version (version INTEGER NOT NULL);
             INSERT INTO schema_version VALUES (3);
             INSERT INTO inbox (event_id, platform, chat_id, chat_kind, user_id, user_name, kind,
                 message_id, press_id, button_data, state, received_at, updated_at)
             VALUES ('telegram:7', 'telegram', '42', 'dm', '7', 'Ada', 'button', '100', 'cbq',
                 'appr:1:o', 'received', 0, 0);
             INSERT INTO outbox (platform, chat_id, chat_kind, plain, buttons, created_at)
             VALUES ('telegram', '42', 'dm', 'prompt', '[[\"Deny\",\"appr:1:d\"]]', 0);
             INSERT INTO cursors (platform, value) VALUES ('telegram', '12345');",
        )
        .unwrap();
        apply(&mut conn).unwrap();
        let (store, open) = the_one_open_event(conn).await;
        let hermes_adapter::InboundKind::Press(press) = &open.kind else {
            panic!("{:?}", open.kind);
        };
        assert_eq!(press.choice_id, "appr:1:o");
        assert_eq!(open.author.display_name, "Ada");
        let chat = open.chat.clone();
        let rows = store.outbox_pending(&chat).await.unwrap();
        assert_eq!(rows[0].choices[0].id, "appr:1:d");
        // A cursor that does not say whose it is resumes no bot.
        assert_eq!(store.load_cursor("telegram", "bot1").await.unwrap(), None);
        assert_eq!(
            store.load_cursor("telegram", "").await.unwrap().as_deref(),
            Some("12345")
        );
    }

    #[tokio::test]
    async fn an_open_event_of_schema_12_is_read_after_the_upgrade_and_handled_ones_lose_their_words()
     {
        let mut conn = Db::Sqlite(Connection::open_in_memory().unwrap());
        conn.execute_batch("CREATE TABLE schema_version (version INTEGER NOT NULL);")
            .unwrap();
        for step in &MIGRATIONS[..12] {
            conn.execute_batch(step).unwrap();
        }
        let event = hermes_adapter::Inbound {
            event_id: "telegram:9".into(),
            chat: hermes_adapter::ChatRef {
                platform: hermes_adapter::Platform::Telegram,
                account: None,
                chat_id: "42".into(),
                thread_id: None,
                kind: hermes_adapter::ChatKind::Direct,
            },
            author: hermes_adapter::Author {
                user_id: "7".into(),
                display_name: "Ada".into(),
                username: None,
                is_bot: false,
            },
            kind: hermes_adapter::InboundKind::Message(hermes_adapter::InboundMessage {
                message_id: "100".into(),
                text: "still open".into(),
                addressed: true,
                ..Default::default()
            }),
        };
        let payload = serde_json::json!({ "v": 1, "event": event }).to_string();
        conn.execute(
            "INSERT INTO inbox (event_id, platform, chat_id, chat_kind, user_id, user_name, kind,
                 message_id, text, payload, state, received_at, updated_at)
             VALUES ('telegram:9', 'telegram', '42', 'dm', '7', 'Ada', 'message', '100',
                 'still open', ?1, 'received', 0, 0),
                ('telegram:8', 'telegram', '42', 'dm', '7', 'Ada', 'message', '99',
                 'answered', ?1, 'done', 0, 0)",
            [payload],
        )
        .unwrap();
        conn.execute("INSERT INTO schema_version VALUES (12)", params0())
            .unwrap();
        apply(&mut conn).unwrap();
        let words = count(
            &conn,
            "SELECT count(*) FROM inbox WHERE text IS NOT NULL OR payload IS NOT NULL",
        );
        assert_eq!(words, 0);
        let (_, open) = the_one_open_event(conn).await;
        let hermes_adapter::InboundKind::Message(m) = &open.kind else {
            panic!("{:?}", open.kind);
        };
        assert_eq!(m.text, "still open");
    }

    /// Tables, columns, indexes and triggers, as SQLite describes them.
    fn shape(conn: &Connection) -> Vec<String> {
        let mut shape = Vec::new();
        let mut objects = conn
            .prepare("SELECT type, name, tbl_name FROM sqlite_schema ORDER BY type, name")
            .unwrap();
        let objects: Vec<(String, String, String)> = objects
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        for (kind, name, table) in objects {
            shape.push(format!("{kind} {name} on {table}"));
            if kind == "table" {
                let mut columns = conn
                    .prepare(&format!("SELECT name, type, \"notnull\", dflt_value, pk FROM pragma_table_info('{name}')"))
                    .unwrap();
                let columns = columns
                    .query_map([], |r| {
                        Ok(format!(
                            "  {} {} notnull={} default={:?} pk={}",
                            r.get::<_, String>(0)?,
                            r.get::<_, String>(1)?,
                            r.get::<_, i64>(2)?,
                            r.get::<_, Option<String>>(3)?,
                            r.get::<_, i64>(4)?
                        ))
                    })
                    .unwrap()
                    .map(Result::unwrap);
                shape.extend(columns);
            }
        }
        shape
    }

    #[test]
    fn a_new_database_has_the_shape_the_steps_give() {
        let mut fresh = Db::Sqlite(Connection::open_in_memory().unwrap());
        apply(&mut fresh).unwrap();
        let stepped = Connection::open_in_memory().unwrap();
        stepped
            .execute_batch("CREATE TABLE schema_version (version INTEGER NOT NULL);")
            .unwrap();
        for step in MIGRATIONS {
            stepped.execute_batch(step).unwrap();
        }
        assert_eq!(shape(fresh.sqlite().unwrap()), shape(&stepped));
    }

    #[test]
    fn a_newer_schema_is_refused() {
        let mut conn = Db::Sqlite(Connection::open_in_memory().unwrap());
        apply(&mut conn).unwrap();
        conn.execute("UPDATE schema_version SET version = 99", params0())
            .unwrap();
        assert!(matches!(
            apply(&mut conn),
            Err(StoreError::TooNew { found: 99, .. })
        ));
    }

    /// Tables with their columns in order, and indexes, as either engine lists them (the
    /// engines' own: FTS5's tables, primary keys and unique constraints, the GIN index).
    fn outline(db: &mut Db) -> Result<Vec<String>, StoreError> {
        let (tables, columns, indexes) = if db.is_postgres() {
            (
                "SELECT CAST(table_name AS TEXT) FROM information_schema.tables
                 WHERE table_schema = current_schema() ORDER BY 1",
                "SELECT CAST(column_name AS TEXT) FROM information_schema.columns
                 WHERE table_schema = current_schema() AND table_name = ?1 ORDER BY ordinal_position",
                "SELECT CAST(indexname AS TEXT) FROM pg_indexes WHERE schemaname = current_schema()
                   AND indexname NOT IN (SELECT conname FROM pg_constraint)
                   AND indexname != 'messages_search' ORDER BY 1",
            )
        } else {
            (
                "SELECT name FROM sqlite_schema WHERE type = 'table'
                   AND name NOT LIKE 'messages\\_fts%' ESCAPE '\\' ORDER BY 1",
                "SELECT name FROM pragma_table_info(?1) ORDER BY cid",
                "SELECT name FROM sqlite_schema WHERE type = 'index' AND sql IS NOT NULL ORDER BY 1",
            )
        };
        let names = |sql: &str, arg: Option<&str>| -> Result<Vec<String>, StoreError> {
            let mut stmt = db.prepare(sql)?;
            let rows = match arg {
                Some(arg) => stmt.query_map([arg], |r| r.get(0))?,
                None => stmt.query_map(params0(), |r| r.get(0))?,
            };
            Ok(rows.collect::<rusqlite::Result<Vec<String>>>()?)
        };
        let mut outline = Vec::new();
        for table in names(tables, None)? {
            outline.push(format!(
                "{table}: {}",
                names(columns, Some(&table))?.join(", ")
            ));
        }
        outline.extend(
            names(indexes, None)?
                .into_iter()
                .map(|i| format!("index {i}")),
        );
        Ok(outline)
    }

    #[tokio::test]
    async fn postgres_has_the_tables_columns_and_indexes_sqlite_has() {
        let Some(pg) = crate::store::tests::PostgresStore::new() else {
            return;
        };
        let sqlite = crate::store::Store::open_in_memory().unwrap();
        let on_sqlite = sqlite.sql_for_tests(outline).await.unwrap();
        let on_postgres = pg.store.sql_for_tests(outline).await.unwrap();
        assert!(on_sqlite.len() > 20, "{on_sqlite:#?}");
        assert_eq!(on_postgres, on_sqlite);
    }

    #[test]
    fn postgres_has_a_twin_of_every_sqlite_step_after_its_start() {
        assert_eq!(POSTGRES_FROM + POSTGRES_STEPS.len() as i64, known());
    }
}
