//! WAL checkpoints off the store thread. SQLite's automatic checkpoint runs inside whichever
//! commit crosses the threshold, so every thousandth page or so one reply waited several
//! milliseconds for the database file to be written and synced (docs/performance.md). A
//! second connection on its own thread checkpoints once a second instead (`PASSIVE`: it
//! never blocks the store thread's writes); the automatic checkpoint stays as a safety net
//! at a higher threshold. A clean stop after a burst folds the whole WAL in and empties its
//! file ([`Store::checkpoint_at_stop`]).

use std::path::Path;
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use rusqlite::Connection;

use super::{Store, StoreError};

/// How often the WAL is copied into the database.
const EVERY: Duration = Duration::from_secs(1);
/// The store thread's own checkpoint, for when this thread cannot keep up (pages, 4 KiB each).
pub(super) const SAFETY_NET_PAGES: i64 = 8192;

/// Stops the checkpointer (after a last checkpoint) when dropped with the last store handle.
pub(super) struct Checkpointer {
    _stop: mpsc::Sender<()>,
    /// The WAL file, whose size says whether a stop should empty it.
    wal: std::path::PathBuf,
}

/// Start checkpointing the database at `path` every [`EVERY`].
pub(super) fn start(path: &Path) -> Result<Checkpointer, StoreError> {
    let conn = Connection::open(path).map_err(|source| StoreError::Open {
        path: path.display().to_string(),
        source,
    })?;
    conn.busy_timeout(Duration::from_secs(10))?;
    let (stop, stopped) = mpsc::channel::<()>();
    thread::Builder::new()
        .name("hermes-checkpoint".into())
        .spawn(move || {
            loop {
                let last = matches!(
                    stopped.recv_timeout(EVERY),
                    Err(mpsc::RecvTimeoutError::Disconnected)
                );
                // The last one, when the store is closed, also empties the WAL file.
                let mode = if last { "TRUNCATE" } else { "PASSIVE" };
                let checkpoint = format!("PRAGMA wal_checkpoint({mode})");
                if let Err(e) = conn.query_row(&checkpoint, [], |_| Ok(())) {
                    tracing::warn!(error = %e, "store: checkpoint failed; the store's own checkpoint takes over");
                }
                if last {
                    return;
                }
            }
        })
        .map_err(|e| StoreError::Invalid(format!("cannot start the checkpoint thread: {e}")))?;
    let mut wal = path.as_os_str().to_owned();
    wal.push("-wal");
    Ok(Checkpointer {
        _stop: stop,
        wal: wal.into(),
    })
}

use super::db::params0;

impl Store {
    /// At a clean stop, when the WAL file is larger than it is kept
    /// ([`super::WAL_KEPT_BYTES`]; 20–33 MiB after a burst otherwise, until the next
    /// start): everything in it is copied into the database and the file emptied. A small
    /// one is left, so an idle daemon's stop does not wait for a sync.
    pub async fn checkpoint_at_stop(&self) -> Result<(), StoreError> {
        let Some(checkpointer) = &self._checkpointer else {
            return Ok(());
        };
        let wal = checkpointer.wal.clone();
        // The file's size is read on the store thread, with the checkpoint: no file system
        // call on the runtime.
        self.call(move |conn| {
            let wal_bytes = std::fs::metadata(&wal).map_or(0, |m| m.len());
            if wal_bytes > super::WAL_KEPT_BYTES as u64 {
                conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", params0(), |_| Ok(()))?;
            }
            Ok(())
        })
        .await
    }
}
