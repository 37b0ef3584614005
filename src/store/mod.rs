//! The store: one SQLite database (`$HERMES_HOME/gateway.db`, WAL) owned by one dedicated
//! thread. Async code sends it closures and awaits their results, so no SQLite call ever runs
//! on a runtime worker thread.
//!
//! Each table family has its own file (`inbox`, `outbox`, `sessions`, `pairing`, `cursors`)
//! with the queries as `impl Store` methods; `migrations` owns the schema.

mod approvals;
mod checkpoint;
mod cursors;
mod inbox;
mod migrations;
mod outbox;
mod pairing;
mod processes;
mod sessions;
mod turns;

pub use approvals::{AllowlistEntry, PendingApproval};
pub use inbox::{InboxRow, InboxState};
pub use outbox::{NewOutboxRow, OutboxRow};
pub use pairing::{PairingApproval, PairingError, PairingRequest, PairingRequestOutcome};
pub use processes::RecordedProcess;
pub use sessions::{SearchHit, SessionRow, StoredMessage};
pub use turns::TurnRecord;

use std::path::Path;
use std::sync::{Arc, mpsc};
use std::thread;
use std::time::{SystemTime, UNIX_EPOCH};

use hermes_adapter::{ChatKind, ChatRef, Platform};
use rusqlite::Connection;
use tokio::sync::oneshot;

/// Errors from the store.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("database error: {0}")]
    Sqlite(#[from] rusqlite::Error),
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
}

type Job = Box<dyn FnOnce(&mut Connection) + Send>;

/// A handle to the store thread. Cheap to clone; the thread ends when every handle is gone.
#[derive(Clone)]
pub struct Store {
    jobs: mpsc::Sender<Job>,
    /// Keeps the WAL checkpoint thread running while the store is in use (none in memory).
    _checkpointer: Option<Arc<checkpoint::Checkpointer>>,
}

impl Store {
    /// Open (creating if needed) the database at `path`, apply migrations, and start the
    /// owning thread.
    pub fn open(path: &Path) -> Result<Store, StoreError> {
        let mut conn = Connection::open(path).map_err(|source| StoreError::Open {
            path: path.display().to_string(),
            source,
        })?;
        configure(&conn)?;
        migrations::apply(&mut conn)?;
        let checkpointer = checkpoint::start(path)?;
        let mut store = Store::spawn(conn);
        store._checkpointer = Some(Arc::new(checkpointer));
        Ok(store)
    }

    /// A store in memory, for unit tests.
    #[cfg(test)]
    pub fn open_in_memory() -> Result<Store, StoreError> {
        let mut conn = Connection::open_in_memory()?;
        migrations::apply(&mut conn)?;
        Ok(Store::spawn(conn))
    }

    fn spawn(mut conn: Connection) -> Store {
        let (jobs, rx) = mpsc::channel::<Job>();
        thread::Builder::new()
            .name("hermes-store".into())
            .spawn(move || {
                while let Ok(job) = rx.recv() {
                    job(&mut conn);
                }
            })
            .expect("spawning the store thread");
        Store {
            jobs,
            _checkpointer: None,
        }
    }

    /// Run `f` on the store thread and return its result.
    pub async fn call<T, F>(&self, f: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection) -> Result<T, StoreError> + Send + 'static,
    {
        let (reply, answer) = oneshot::channel();
        let job: Job = Box::new(move |conn| {
            let _ = reply.send(f(conn));
        });
        self.jobs.send(job).map_err(|_| StoreError::Closed)?;
        answer.await.map_err(|_| StoreError::Closed)?
    }
}

fn configure(conn: &Connection) -> Result<(), StoreError> {
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    conn.pragma_update(None, "foreign_keys", "ON")?;
    conn.busy_timeout(std::time::Duration::from_secs(10))?;
    // Every query is prepared once and reused: re-parsing the same SQL was a tenth of the
    // daemon's CPU (docs/performance.md).
    conn.set_prepared_statement_cache_capacity(64);
    // Checkpoints run on their own thread (`checkpoint`); this one is the safety net.
    conn.pragma_update(None, "wal_autocheckpoint", checkpoint::SAFETY_NET_PAGES)?;
    Ok(())
}

/// The chat of a row, from the `platform`, `account`, `chat_id`, `thread_id` and
/// `chat_kind` columns every table that refers to a chat has. The inner error names values the store does not
/// know (a newer version's platform, a damaged row).
fn chat_from_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<Result<ChatRef, String>> {
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

/// Milliseconds since the Unix epoch: the time unit of every stored timestamp.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}
