//! The store: one SQLite database (`$HERMES_HOME/gateway.db`, WAL) owned by one dedicated
//! thread. Async code sends it closures and awaits their results, so no SQLite call ever runs
//! on a runtime worker thread.
//!
//! Each table family has its own file (`inbox`, `outbox`, `sessions`, `pairing`, `cursors`)
//! with the queries as `impl Store` methods; `migrations` owns the schema.

mod approvals;
mod checkpoint;
pub mod copy;
mod cron;
mod cursors;
mod db;
mod delegations;
mod earlier;
mod history;
mod inbox;
mod leases;
mod listen;
mod migrations;
mod outbox;
mod pairing;
mod processes;
mod retention;
mod search;
mod sessions;
mod settings;
mod status;
mod todos;
mod turns;
mod usage;

pub use approvals::{AllowlistEntry, PendingApproval};
pub use cron::CronJob;
pub use delegations::RecordedDelegation;
pub use earlier::{EarlierSession, Resumed};
pub use history::{HIDDEN_COMPRESSED, HIDDEN_UNDONE, LiveMessage, SUMMARY_OPENING, Undone};
pub use inbox::{InboxRow, InboxState};
pub use leases::{Fence, FenceOf, LeaseRow, NodeRow};
pub use outbox::{NewOutboxRow, OutboxRow, Settled};
pub use pairing::{PairingApproval, PairingError, PairingRequest, PairingRequestOutcome};
pub use processes::RecordedProcess;
pub use retention::{Pruned, Retention};
pub use search::SessionHit;
pub(crate) use sessions::civil_from_days;
pub use sessions::{SearchHit, SessionRow, StoredMessage};
pub use status::StatusCounts;
pub use todos::{Kept, SessionKept};
pub use turns::TurnRecord;

use std::path::Path;
use std::sync::{Arc, mpsc};
use std::thread;
use std::time::{SystemTime, UNIX_EPOCH};

use hermes_adapter::{ChatKind, ChatRef, Platform};
use rusqlite::Connection;
use tokio::sync::oneshot;

use crate::config::PgTarget;
use crate::state_key::StateKey;
use db::{Db, Pg};

/// Errors from the store.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("database error: {0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error("database error: {}", postgres_error(.0))]
    Postgres(#[from] postgres::Error),
    #[error("could not reach the PostgreSQL store at {url}: {}", postgres_error(.source))]
    Connect {
        url: String,
        source: postgres::Error,
    },
    #[error("the query returned no row")]
    NoRow,
    #[error(
        "this node no longer holds the lease {0} (another node took it over): the write is refused"
    )]
    Fenced(String),
    #[error("could not open the database at {path}: {source}")]
    Open {
        path: String,
        source: rusqlite::Error,
    },
    #[error("the database was written by a newer hermes-gateway (schema {found}, we know {known})")]
    TooNew { found: i64, known: i64 },
    #[error("the store thread has stopped")]
    Closed,
    #[error("stored data is invalid: {0}")]
    Invalid(String),
    #[error("the gateway's state key: {0}")]
    Key(std::io::Error),
}

impl StoreError {
    /// Whether trying again may succeed: a locked or full disk, an I/O error, a constraint
    /// (a trigger) may pass; a damaged database, a value too big or bad data will not.
    pub fn may_pass(&self) -> bool {
        use rusqlite::ErrorCode::*;
        match self {
            StoreError::Sqlite(rusqlite::Error::SqliteFailure(e, _)) => !matches!(
                e.code,
                DatabaseCorrupt
                    | NotADatabase
                    | TooBig
                    | TypeMismatch
                    | ApiMisuse
                    | ParameterOutOfRange
                    | ReadOnly
            ),
            StoreError::Postgres(e) => postgres_may_pass(e),
            StoreError::Sqlite(_)
            | StoreError::Invalid(_)
            | StoreError::TooNew { .. }
            | StoreError::NoRow
            | StoreError::Fenced(_) => false,
            StoreError::Open { .. } | StoreError::Connect { .. } => true,
            StoreError::Closed | StoreError::Key(_) => false,
        }
    }
}

/// A PostgreSQL error with what the server said (its own `Display` says only "db error").
fn postgres_error(e: &postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => match db.detail() {
            Some(detail) => format!("{} ({}; {detail})", db.message(), db.code().code()),
            None => format!("{} ({})", db.message(), db.code().code()),
        },
        None => match std::error::Error::source(e) {
            Some(source) => format!("{e}: {source}"),
            None => e.to_string(),
        },
    }
}

/// Whether a PostgreSQL failure may pass: a lost connection, a server shutting down or out
/// of resources, a serialization failure or deadlock may; a constraint, bad SQL, a value out of
/// range will not.
fn postgres_may_pass(e: &postgres::Error) -> bool {
    if e.is_closed() {
        return true;
    }
    match e.code() {
        // No SQLSTATE: the socket failed.
        None => true,
        Some(code) => {
            let code = code.code();
            ["08", "40", "53", "57", "58"]
                .iter()
                .any(|class| code.starts_with(class))
                || code == "55P03"
        }
    }
}

/// Work for the store thread: it runs on the connection and returns whether it succeeded
/// and how to hand its result back (held until the result is durable).
struct Job {
    /// When it is answered: relaxed (cursor saves, inbox records a sync will cover before
    /// the platform is told), durable, or a barrier ([`Store::sync`]).
    durability: Durability,
    run: Box<dyn FnOnce(&mut Db) -> Done + Send>,
}

/// When a job is answered (see [`run_group`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Durability {
    /// At once: what it wrote may be lost on power loss.
    Relaxed,
    /// Once what it wrote is on disk.
    Durable,
    /// Once everything written before it is on disk.
    Barrier,
}

/// A job that has run.
struct Done {
    ok: bool,
    answer: Box<dyn FnOnce() + Send>,
}

/// The WAL's size on disk once checkpointed (`journal_size_limit`).
const WAL_KEPT_BYTES: i64 = 4 * 1024 * 1024;

/// How many waiting jobs run before the group's one sync.
const GROUP_MAX: usize = 64;

/// A handle to the store thread. Cheap to clone; the thread ends when every handle is gone.
#[derive(Clone)]
pub struct Store {
    jobs: mpsc::Sender<Job>,
    /// Keeps the WAL checkpoint thread running while the store is in use (none in memory).
    _checkpointer: Option<Arc<checkpoint::Checkpointer>>,
    /// Signs and checks the standing decisions (allowlist, paired people).
    key: StateKey,
    /// The leases the end of a turn is written under, on a store several nodes share.
    fence: Arc<std::sync::RwLock<Option<leases::FenceOf>>>,
    /// Where the PostgreSQL store is, for a listening connection of its own.
    pg_target: Option<Arc<PgTarget>>,
    /// What this store's notices are signed with, so its own listener passes over them
    /// (hex: safe inside SQL).
    origin: Arc<str>,
}

impl Store {
    /// Open (creating if needed) the database at `path`, apply migrations, and start the
    /// owning thread.
    /// The state key is the one in the database's directory (the home), made there on
    /// first use.
    pub fn open(path: &Path) -> Result<Store, StoreError> {
        let home = path.parent().unwrap_or(Path::new("."));
        let (key, key_is_new) = StateKey::load_or_create(home).map_err(StoreError::Key)?;
        let conn = Connection::open(path).map_err(|source| StoreError::Open {
            path: path.display().to_string(),
            source,
        })?;
        configure(&conn)?;
        let mut db = Db::Sqlite(conn);
        migrations::apply_then(&mut db, |tx, from| {
            if from >= migrations::SIGNED_ROWS {
                return Ok(());
            }
            // What an older gateway decided is signed now, once: when it had no key yet.
            // A key already there with an older schema means the signatures were taken
            // out of the database (to have forged rows signed): nothing is signed.
            if key_is_new {
                let signed =
                    approvals::sign_existing(tx, &key)? + pairing::sign_existing(tx, &key)?;
                if signed > 0 {
                    tracing::warn!(
                        rows = signed,
                        "standing approvals and paired people from before this version were signed as the gateway's; check them with `hermes-gateway approvals list` and `pairing list`"
                    );
                }
            } else {
                tracing::error!(
                    "the database's schema is older than its signatures, so the signatures were taken out of it: its standing approvals and paired people are not honoured; give them again"
                );
            }
            Ok(())
        })?;
        let checkpointer = checkpoint::start(path)?;
        let mut store = Store::spawn(db, key);
        store._checkpointer = Some(Arc::new(checkpointer));
        Ok(store)
    }

    /// Open the store the configuration names: PostgreSQL at `postgres`, or else SQLite at
    /// `home/gateway.db`.
    pub fn open_at(home: &Path, postgres: Option<PgTarget>) -> Result<Store, StoreError> {
        match postgres {
            Some(target) => {
                let shown = target.shown().to_owned();
                let store = Store::open_postgres(target, home)?;
                tracing::info!(url = %shown, "store: PostgreSQL");
                Ok(store)
            }
            None => Store::open(&home.join("gateway.db")),
        }
    }

    /// Open the PostgreSQL store at `target`, bring its schema up to date, and start the
    /// owning thread. The state key is the one in `home`: every node of one store must have
    /// the same (`docs/scaling.md`). The connection is made on the store thread: the
    /// blocking client runs a runtime of its own, which may not start inside the daemon's.
    pub fn open_postgres(target: PgTarget, home: &Path) -> Result<Store, StoreError> {
        let (key, _) = StateKey::load_or_create(home).map_err(StoreError::Key)?;
        let target = Arc::new(target);
        let kept = target.clone();
        let mut store = Store::spawn_opening(
            move || {
                let mut db = connect_postgres(target)?;
                // A PostgreSQL store starts at a schema with the signatures: nothing to sign.
                migrations::apply(&mut db)?;
                Ok(db)
            },
            key,
        )?;
        store.pg_target = Some(kept);
        Ok(store)
    }

    /// A store in memory, for unit tests.
    #[cfg(test)]
    pub fn open_in_memory() -> Result<Store, StoreError> {
        let conn = Connection::open_in_memory()?;
        prepare_once(&conn)?;
        let mut db = Db::Sqlite(conn);
        migrations::apply(&mut db)?;
        Ok(Store::spawn(
            db,
            StateKey::from_bytes(&rand::random::<[u8; 32]>()),
        ))
    }

    fn spawn(db: Db, key: StateKey) -> Store {
        Store::spawn_opening(move || Ok(db), key).expect("opening an open database")
    }

    /// Start the store thread on the database `open` makes there; its error is returned.
    fn spawn_opening(
        open: impl FnOnce() -> Result<Db, StoreError> + Send + 'static,
        key: StateKey,
    ) -> Result<Store, StoreError> {
        let (jobs, rx) = mpsc::channel::<Job>();
        let (opened_tx, opened) = mpsc::sync_channel::<Result<(), StoreError>>(1);
        thread::Builder::new()
            .name("hermes-store".into())
            .spawn(move || {
                let mut db = match open() {
                    Ok(db) => {
                        let _ = opened_tx.send(Ok(()));
                        db
                    }
                    Err(e) => {
                        let _ = opened_tx.send(Err(e));
                        return;
                    }
                };
                let mut state = SyncState::default();
                while let Ok(first) = rx.recv() {
                    let mut group = vec![first];
                    group.extend(rx.try_iter().take(GROUP_MAX - 1));
                    run_group(&mut db, group, &mut state);
                }
            })
            .map_err(|e| StoreError::Invalid(format!("cannot start the store thread: {e}")))?;
        opened.recv().map_err(|_| StoreError::Closed)??;
        Ok(Store {
            jobs,
            _checkpointer: None,
            key,
            fence: Arc::default(),
            pg_target: None,
            origin: format!("{:016x}", rand::random::<u64>()).into(),
        })
    }

    /// The same store over a connection (and a thread) of its own, for the cluster's
    /// leases and heartbeats: their renewals must not wait behind the turns' writes, or a
    /// busy node would lose its leases. On SQLite (one node) the store itself. Blocks
    /// while it connects.
    pub fn of_its_own(&self) -> Result<Store, StoreError> {
        let Some(target) = self.pg_target.clone() else {
            return Ok(self.clone());
        };
        let connecting = target.clone();
        let mut store =
            Store::spawn_opening(move || connect_postgres(connecting), self.key.clone())?;
        store.pg_target = Some(target);
        Ok(store)
    }

    /// Run `f` on the store thread and return its result. Only the store's own table
    /// modules reach SQLite: the rest of the daemon calls their methods, which say what they
    /// do, not how SQLite does it (a second backend implements those).
    async fn call<T, F>(&self, f: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&mut Db) -> Result<T, StoreError> + Send + 'static,
    {
        self.submit(f, Durability::Durable).await
    }

    /// [`Store::call`] for a write that may be lost on power loss (it is answered before it
    /// is on disk): what is redone or refetched harmlessly, like a polling cursor.
    async fn call_relaxed<T, F>(&self, f: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&mut Db) -> Result<T, StoreError> + Send + 'static,
    {
        self.submit(f, Durability::Relaxed).await
    }

    /// Tests of other modules look at a row directly.
    #[cfg(test)]
    pub(crate) async fn sql_for_tests<T, F>(&self, f: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&mut Db) -> Result<T, StoreError> + Send + 'static,
    {
        self.call(f).await
    }

    /// Returns once every write so far is on disk (relaxed ones included).
    pub async fn sync(&self) -> Result<(), StoreError> {
        self.submit(|_| Ok(()), Durability::Barrier).await
    }

    async fn submit<T, F>(&self, f: F, durability: Durability) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&mut Db) -> Result<T, StoreError> + Send + 'static,
    {
        let (reply, answer) = oneshot::channel();
        let job = Job {
            durability,
            run: Box::new(move |conn| {
                let result = f(conn);
                Done {
                    ok: result.is_ok(),
                    answer: Box::new(move || {
                        let _ = reply.send(result);
                    }),
                }
            }),
        };
        self.jobs.send(job).map_err(|_| StoreError::Closed)?;
        answer.await.map_err(|_| StoreError::Closed)?
    }
}

/// Run a group of jobs that were waiting together, answering each (but relaxed ones) only
/// once everything it wrote, and everything committed before it, is on disk, power loss
/// included: the platform is told we have an update, and a message goes out, only after
/// that. One sync serves the group: every job commits without syncing (`synchronous =
/// NORMAL`) except the last one that is not relaxed, which commits with it (`FULL`); in WAL
/// mode a synced commit makes every commit before it durable too. When that job wrote
/// nothing (a read, a failure) while a durable write of the group is not yet on disk, or
/// the group holds a sync barrier ([`Store::sync`]) while anything is unsynced, a tiny
/// synced write stands in for it. A read alone does not sync what relaxed jobs wrote
/// before it (a relaxed write may be lost by definition; syncing it for every read was an
/// fsync per reply). `state` carries unsynced (relaxed) commits over to the next group.
fn run_group(db: &mut Db, group: Vec<Job>, state: &mut SyncState) {
    if let Db::Postgres(pg) = db {
        // Every PostgreSQL commit is durable when it returns: each job is answered at once.
        if let Err(e) = pg.reconnect_if_closed() {
            tracing::error!(error = %e, "store: the PostgreSQL connection is lost");
        }
        for job in group {
            ((job.run)(db).answer)();
        }
        return;
    }
    let last_durable = group
        .iter()
        .rposition(|job| job.durability != Durability::Relaxed);
    // A durable write of this group, or a barrier, waits for a sync not yet made.
    let mut owed = false;
    let mut answers = Vec::with_capacity(group.len());
    for (i, job) in group.into_iter().enumerate() {
        let full = Some(i) == last_durable;
        let Db::Sqlite(conn) = &*db else { return };
        state.level(conn, full);
        let before = conn.total_changes();
        let done = (job.run)(db);
        let Db::Sqlite(conn) = &*db else { return };
        if !conn.is_autocommit() {
            // A job left its transaction open (a failed COMMIT may do that): end it, or every
            // later write would join it and be lost with it.
            tracing::error!("store: a transaction was left open; rolling it back");
            let _ = conn.execute_batch("ROLLBACK");
        }
        if conn.total_changes() != before {
            let synced = full && done.ok;
            state.dirty = !synced;
            if synced {
                // Everything committed before it is on disk with it.
                owed = false;
            } else if job.durability != Durability::Relaxed {
                owed = true;
            }
        }
        match job.durability {
            Durability::Relaxed => (done.answer)(),
            Durability::Durable => answers.push(done.answer),
            Durability::Barrier => {
                owed = true;
                answers.push(done.answer);
            }
        }
    }
    if owed
        && state.dirty
        && let Db::Sqlite(conn) = db
    {
        state.level(conn, true);
        match sync(conn) {
            Ok(()) => state.dirty = false,
            // Answered anyway: the writes are committed, only not yet forced to disk (a
            // retry could double what is not idempotent).
            Err(e) => tracing::error!(error = %e, "store: could not sync the database to disk"),
        }
    }
    answers.into_iter().for_each(|answer| answer());
}

/// What the store thread knows between groups.
#[derive(Default)]
struct SyncState {
    /// Commits since the last sync may still be only in the page cache.
    dirty: bool,
    /// The connection's `synchronous` level (`true`: FULL), once set: set again only when
    /// it changes, not for every job.
    full: Option<bool>,
}

impl SyncState {
    fn level(&mut self, conn: &Connection, full: bool) {
        if self.full == Some(full) {
            return;
        }
        let level = if full { "FULL" } else { "NORMAL" };
        match conn.pragma_update(None, "synchronous", level) {
            Ok(()) => self.full = Some(full),
            Err(e) => {
                self.full = None;
                tracing::error!(error = %e, "store: cannot set synchronous = {level}");
            }
        }
    }
}

/// Force every commit so far to disk: a synced commit that rewrites the header's
/// `user_version` (unused by the store) with its own value.
/// (`synchronous` must be FULL: see [`SyncState::level`].)
fn sync(conn: &mut Connection) -> Result<(), StoreError> {
    let version: i64 = conn.pragma_query_value(None, "user_version", |r| r.get(0))?;
    // A transaction value rolls back if the commit fails.
    let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
    tx.pragma_update(None, "user_version", version)?;
    tx.commit()?;
    Ok(())
}

fn configure(conn: &Connection) -> Result<(), StoreError> {
    conn.pragma_update(None, "journal_mode", "WAL")?;
    // Per group of jobs, NORMAL or FULL (see `run_group`).
    conn.pragma_update(None, "synchronous", "FULL")?;
    conn.pragma_update(None, "foreign_keys", "ON")?;
    conn.busy_timeout(std::time::Duration::from_secs(10))?;
    prepare_once(conn)?;
    // Checkpoints run on their own thread (`checkpoint`); this one is the safety net.
    conn.pragma_update(None, "wal_autocheckpoint", checkpoint::SAFETY_NET_PAGES)?;
    // Once checkpointed and restarted, the WAL is cut back to this size: without a limit it
    // keeps its largest size until the stop (20 MiB after 200 replies, `hermes-bench` store).
    conn.pragma_update(None, "journal_size_limit", WAL_KEPT_BYTES)?;
    Ok(())
}

/// Every query prepared once and reused: re-parsing the same SQL was a tenth of the
/// daemon's CPU (docs/performance.md, step 3).
fn prepare_once(conn: &Connection) -> Result<(), StoreError> {
    conn.set_prepared_statement_cache_capacity(64);
    // Plans do not depend on the values bound: without this, SQLite re-prepared a cached
    // statement whenever a bound value might change its plan (the outbox lane's query, the
    // session's), a fourteenth of the daemon's CPU per reply in step 18's profile.
    conn.set_db_config(
        rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG,
        true,
    )?;
    Ok(())
}

/// A connection to the PostgreSQL store at `target` (on the thread that will own it).
fn connect_postgres(target: Arc<PgTarget>) -> Result<Db, StoreError> {
    let pg = Pg::connect(Box::new(move || {
        target.connect().map_err(|source| StoreError::Connect {
            url: target.shown().to_owned(),
            source,
        })
    }))?;
    Ok(Db::Postgres(Box::new(pg)))
}

/// The chat of a row, from the `platform`, `account`, `chat_id`, `thread_id` and
/// `chat_kind` columns every table that refers to a chat has. The inner error names values the store does not
/// know (a newer version's platform, a damaged row).
fn chat_from_row(row: &db::Row<'_>) -> rusqlite::Result<Result<ChatRef, String>> {
    let platform: String = row.get("platform")?;
    let kind: String = row.get("chat_kind")?;
    Ok(match (Platform::parse(&platform), ChatKind::parse(&kind)) {
        (Some(platform), Some(kind)) => Ok(ChatRef {
            platform,
            account: row.get("account")?,
            chat_id: row.get("chat_id")?,
            thread_id: row.get("thread_id")?,
            kind,
        }),
        _ => Err(format!("unknown chat {platform:?}/{kind:?} in the store")),
    })
}

/// Rows whose reading can fail on content, collected or the first such failure.
fn collect_checked<T>(
    rows: impl Iterator<Item = rusqlite::Result<Result<T, String>>>,
) -> Result<Vec<T>, StoreError> {
    let mut out = Vec::new();
    for row in rows {
        out.push(row?.map_err(StoreError::Invalid)?);
    }
    Ok(out)
}

/// Each named test (an `async fn(Store)` of the calling module) run twice: on SQLite in
/// memory (`<name>::sqlite`) and on a new database of the tests' PostgreSQL server
/// (`<name>::postgres`). A test written but not named here is dead code, which the lints
/// refuse.
#[cfg(test)]
macro_rules! on_both_engines {
    ($($name:ident),* $(,)?) => {
        $(
            mod $name {
                #[tokio::test]
                async fn sqlite() {
                    super::$name(crate::store::Store::open_in_memory().unwrap()).await;
                }

                #[tokio::test]
                async fn postgres() {
                    let Some(db) = crate::store::tests::PostgresStore::new() else {
                        return;
                    };
                    super::$name(db.store.clone()).await;
                }
            }
        )*
    };
}
#[cfg(test)]
pub(crate) use on_both_engines;

/// Milliseconds since the Unix epoch: the time unit of every stored timestamp.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A direct message from Ada on Telegram, with event id `id`.
    pub(crate) fn direct_message(id: &str) -> hermes_adapter::Inbound {
        use hermes_adapter::{
            Author, ChatKind, ChatRef, Inbound, InboundKind, InboundMessage, Platform,
        };
        Inbound {
            event_id: id.into(),
            chat: ChatRef {
                platform: Platform::Telegram,
                account: None,
                chat_id: "42".into(),
                thread_id: None,
                kind: ChatKind::Direct,
            },
            author: Author {
                user_id: "7".into(),
                display_name: "Ada".into(),
                username: Some("ada".into()),
                is_bot: false,
            },
            kind: InboundKind::Message(InboundMessage {
                message_id: "100".into(),
                text: "hello".into(),
                addressed: true,
                ..Default::default()
            }),
        }
    }

    /// A store on a new database of the tests' shared PostgreSQL server.
    pub(crate) struct PostgresStore {
        pub store: Store,
        _home: tempfile::TempDir,
        _server: Arc<hermes_testkit::postgres::TestPostgres>,
    }

    /// An empty database of the tests' shared PostgreSQL server, not yet opened.
    pub(crate) struct EmptyPostgres {
        pub url: String,
        _server: Arc<hermes_testkit::postgres::TestPostgres>,
    }

    impl PostgresStore {
        /// A new database with no schema yet: `None` when PostgreSQL is not installed and
        /// the tests may skip it.
        pub fn empty() -> Option<EmptyPostgres> {
            let server = hermes_testkit::postgres::TestPostgres::shared()?;
            let database = server.create_database();
            Some(EmptyPostgres {
                url: server.url(&database),
                _server: server,
            })
        }

        /// `None` when PostgreSQL is not installed and the tests may skip it.
        pub fn new() -> Option<PostgresStore> {
            let server = hermes_testkit::postgres::TestPostgres::shared()?;
            let database = server.create_database();
            let home = tempfile::tempdir().unwrap();
            let target = PgTarget::parse(&server.url(&database), None).unwrap();
            let store = Store::open_postgres(target, home.path()).unwrap();
            Some(PostgresStore {
                store,
                _home: home,
                _server: server,
            })
        }
    }

    fn synchronous(conn: &Connection) -> i64 {
        conn.pragma_query_value(None, "synchronous", |r| r.get(0))
            .unwrap()
    }

    #[test]
    fn failures_that_may_pass_are_told_from_those_that_will_not() {
        let sqlite = |code| {
            StoreError::Sqlite(rusqlite::Error::SqliteFailure(
                rusqlite::ffi::Error::new(code),
                None,
            ))
        };
        for passing in [
            rusqlite::ffi::SQLITE_BUSY,
            rusqlite::ffi::SQLITE_LOCKED,
            rusqlite::ffi::SQLITE_FULL,
            rusqlite::ffi::SQLITE_IOERR,
            rusqlite::ffi::SQLITE_CONSTRAINT,
        ] {
            assert!(sqlite(passing).may_pass(), "{passing}");
        }
        for lasting in [
            rusqlite::ffi::SQLITE_CORRUPT,
            rusqlite::ffi::SQLITE_NOTADB,
            rusqlite::ffi::SQLITE_TOOBIG,
        ] {
            assert!(!sqlite(lasting).may_pass(), "{lasting}");
        }
        assert!(!StoreError::Invalid("bad row".into()).may_pass());
    }

    #[tokio::test]
    async fn a_write_is_answered_once_it_is_synced() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("gateway.db")).unwrap();
        let level = store
            .call(|conn| {
                conn.execute_batch("CREATE TABLE t (x)")?;
                Ok(synchronous(conn.sqlite().unwrap()))
            })
            .await
            .unwrap();
        assert_eq!(level, 2, "FULL: the commit syncs the WAL");
    }

    /// Jobs that note the `synchronous` level they ran under and when they ran and were
    /// answered, on a file database whose WAL growth counts the commits.
    struct Bench {
        conn: Db,
        path: std::path::PathBuf,
        seen: Arc<std::sync::Mutex<Vec<i64>>>,
        events: Arc<std::sync::Mutex<Vec<&'static str>>>,
        _dir: tempfile::TempDir,
    }

    impl Bench {
        fn new() -> Bench {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("gateway.db");
            let conn = Connection::open(&path).unwrap();
            configure(&conn).unwrap();
            conn.execute_batch("CREATE TABLE t (x)").unwrap();
            Bench {
                conn: Db::Sqlite(conn),
                path,
                seen: Default::default(),
                events: Default::default(),
                _dir: dir,
            }
        }

        fn job(&self, sql: &'static str, durability: Durability) -> Job {
            let (seen, events) = (self.seen.clone(), self.events.clone());
            Job {
                durability,
                run: Box::new(move |conn: &mut Db| {
                    seen.lock()
                        .unwrap()
                        .push(synchronous(conn.sqlite().unwrap()));
                    conn.execute_batch(sql).unwrap();
                    events.lock().unwrap().push("ran");
                    Done {
                        ok: true,
                        answer: Box::new(move || events.lock().unwrap().push("answered")),
                    }
                }),
            }
        }

        fn wal(&self) -> u64 {
            std::fs::metadata(self.path.with_extension("db-wal"))
                .unwrap()
                .len()
        }

        fn take(&self) -> (Vec<i64>, Vec<&'static str>) {
            (
                std::mem::take(&mut *self.seen.lock().unwrap()),
                std::mem::take(&mut *self.events.lock().unwrap()),
            )
        }
    }

    const FRAME: u64 = 4096 + 24;

    #[test]
    fn a_group_of_writes_shares_one_sync_and_a_read_at_its_end_gets_one_added() {
        let mut b = Bench::new();
        let mut state = SyncState::default();
        let before = b.wal();
        let group = vec![
            b.job("INSERT INTO t VALUES (1)", Durability::Durable),
            b.job("INSERT INTO t VALUES (2)", Durability::Durable),
            b.job("SELECT * FROM t", Durability::Durable),
        ];
        run_group(&mut b.conn, group, &mut state);
        let (seen, events) = b.take();
        assert_eq!(seen, [1, 1, 2]);
        assert_eq!(
            events,
            ["ran", "ran", "ran", "answered", "answered", "answered"],
            "answered only after the group's sync"
        );
        assert_eq!(
            b.wal() - before,
            3 * FRAME,
            "two unsynced commits and the sync that stands in for the read"
        );
        assert!(!state.dirty);

        let before = b.wal();
        let group = vec![
            b.job("INSERT INTO t VALUES (3)", Durability::Durable),
            b.job("INSERT INTO t VALUES (4)", Durability::Durable),
        ];
        run_group(&mut b.conn, group, &mut state);
        assert_eq!(b.take().0, [1, 2]);
        assert_eq!(
            b.wal() - before,
            2 * FRAME,
            "the last write's commit is the sync"
        );
    }

    #[test]
    fn relaxed_writes_are_answered_at_once_and_synced_by_the_next_durable_job() {
        let mut b = Bench::new();
        let mut state = SyncState::default();
        let before = b.wal();
        let group = vec![b.job("INSERT INTO t VALUES (1)", Durability::Relaxed)];
        run_group(&mut b.conn, group, &mut state);
        let (seen, events) = b.take();
        assert_eq!(seen, [1], "a relaxed write alone is not synced");
        assert_eq!(events, ["ran", "answered"]);
        assert!(state.dirty);
        assert_eq!(b.wal() - before, FRAME);

        // A read does not sync what relaxed jobs wrote (that was an fsync per reply).
        let before = b.wal();
        let group = vec![b.job("SELECT 1", Durability::Durable)];
        run_group(&mut b.conn, group, &mut state);
        assert!(state.dirty);
        assert_eq!(b.wal(), before, "no stand-in sync for a read");

        // A sync barrier does.
        let group = vec![b.job("SELECT 1", Durability::Barrier)];
        run_group(&mut b.conn, group, &mut state);
        assert!(!state.dirty);
        assert_eq!(b.wal() - before, FRAME, "the stand-in sync");

        // A durable write syncs the relaxed one with its own commit.
        let group = vec![b.job("INSERT INTO t VALUES (2)", Durability::Relaxed)];
        run_group(&mut b.conn, group, &mut state);
        assert!(state.dirty);
        let before = b.wal();
        let group = vec![b.job("INSERT INTO t VALUES (3)", Durability::Durable)];
        run_group(&mut b.conn, group, &mut state);
        assert_eq!(b.take().0, [2, 2, 1, 2]);
        assert!(!state.dirty);
        assert_eq!(b.wal() - before, FRAME, "its own commit is the sync");

        // Nothing outstanding: a barrier costs nothing.
        let before = b.wal();
        let group = vec![b.job("SELECT 1", Durability::Barrier)];
        run_group(&mut b.conn, group, &mut state);
        assert_eq!(b.wal(), before);
    }
}
