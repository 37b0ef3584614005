//! SQLite's newest schema in one piece (the steps it folds are in `migrations.rs`).

/// The newest schema in one piece, for a new database: the same tables, columns (in the
/// same order), indexes and triggers as running every step of [`MIGRATIONS`], which
/// `a_new_database_has_the_shape_the_steps_give` checks. A new step is added there and
/// folded in here. (Replaying the steps would cost a new database ~3 ms of `ALTER TABLE`.)
pub(super) const SCHEMA: &str = r#"
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
        message_count INTEGER NOT NULL DEFAULT 0,
        account TEXT,
        title TEXT,
        memory TEXT,
        context TEXT
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
        created_at   INTEGER NOT NULL,
        hidden       TEXT,
        hidden_by    INTEGER,
        turn         INTEGER
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
        updated_at   INTEGER NOT NULL,
        account TEXT,
        payload TEXT
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
        choices             TEXT,
        state               TEXT NOT NULL DEFAULT 'pending',
        attempts            INTEGER NOT NULL DEFAULT 0,
        last_error          TEXT,
        platform_message_id TEXT,
        created_at          INTEGER NOT NULL,
        sent_at             INTEGER,
        account TEXT,
        action TEXT NOT NULL DEFAULT 'message',
        edit_of INTEGER,
        delivery_status TEXT,
        delivery_detail TEXT,
        file TEXT,
        stream_for INTEGER
    );
    CREATE INDEX outbox_pending ON outbox(platform, chat_id, id) WHERE state = 'pending';

    CREATE TABLE cursors (
        platform TEXT NOT NULL,
        key      TEXT NOT NULL,
        value    TEXT NOT NULL,
        PRIMARY KEY (platform, key)
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
        mac TEXT NOT NULL DEFAULT '',
        PRIMARY KEY (platform, user_id)
    );
    CREATE TABLE pairing_failures (
        platform TEXT NOT NULL,
        at       INTEGER NOT NULL
    );
    

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
        decided_at       INTEGER,
        account TEXT
    );
    CREATE INDEX approvals_pending ON approvals(state) WHERE state = 'pending';
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
        ended_at    INTEGER,
        account TEXT
    );
    CREATE INDEX background_running ON background_processes(state) WHERE state = 'running';
    
    CREATE INDEX outbox_by_platform_id ON outbox(platform, platform_message_id)
        WHERE platform_message_id IS NOT NULL;
    CREATE INDEX outbox_stream ON outbox(stream_for) WHERE stream_for IS NOT NULL;

    CREATE TABLE usage (
        id          INTEGER PRIMARY KEY,
        session_id  TEXT NOT NULL,
        at          INTEGER NOT NULL,
        model       TEXT NOT NULL,
        prompt      INTEGER NOT NULL,
        completion  INTEGER NOT NULL,
        cached      INTEGER NOT NULL,
        cache_write INTEGER NOT NULL DEFAULT 0,
        cost_micros INTEGER NOT NULL DEFAULT 0
    );
    CREATE INDEX usage_by_session ON usage(session_id);
    CREATE INDEX usage_by_time ON usage(at);

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
    CREATE TABLE seen_events (
        event_id    TEXT PRIMARY KEY,
        received_at INTEGER NOT NULL
    ) WITHOUT ROWID;
    CREATE TABLE inbox_payloads (
        inbox_id INTEGER PRIMARY KEY,
        payload  TEXT NOT NULL
    );
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
    CREATE TABLE adapter_memory (
        platform   TEXT NOT NULL,
        key        TEXT NOT NULL,
        value      TEXT NOT NULL,
        expires_at INTEGER NOT NULL,
        profile    TEXT NOT NULL DEFAULT '',
        PRIMARY KEY (platform, key)
    );
    CREATE INDEX adapter_memory_by_expiry ON adapter_memory(expires_at);
"#;
