//! The numbers `/status` shows: open sessions, messages being handled, approvals waiting,
//! background processes running, and the outbox's backlog and its oldest row's age: one
//! read on the store's thread, asked for by a person or a monitor now and then.

pub use crate::metrics::StatusCounts;

use super::{Store, StoreError, now_ms};
use rusqlite::params;

impl Store {
    pub async fn status_counts(&self) -> Result<StatusCounts, StoreError> {
        self.call(|conn| {
            let count = |sql: &str| -> Result<i64, StoreError> {
                conn.prepare_cached(sql)?.query_row(params![], |r| r.get(0))
            };
            let oldest: Option<i64> = conn
                .prepare_cached("SELECT min(created_at) FROM outbox WHERE state = 'pending'")?
                .query_row(params![], |r| r.get(0))?;
            Ok(StatusCounts {
                sessions: count("SELECT count(*) FROM sessions WHERE ended_at IS NULL")?,
                inbox_open: count("SELECT count(*) FROM inbox WHERE state = 'received'")?,
                approvals_pending: count("SELECT count(*) FROM approvals WHERE state = 'pending'")?,
                processes_running: count(
                    "SELECT count(*) FROM background_processes WHERE state = 'running'",
                )?,
                outbox_pending: count("SELECT count(*) FROM outbox WHERE state = 'pending'")?,
                outbox_oldest_s: oldest.map(|at| (now_ms() - at).max(0) / 1000),
            })
        })
        .await
    }
}
