//! Retention: how long the delivery bookkeeping is kept. Handled inbox rows, outbox rows that
//! went out (or gave up), decided approvals, ended background processes and delegations, and
//! old pairing failures are deleted once older than the configured age, a small batch per
//! call so the one store thread every chat shares is never held for long. An event id outlives
//! its inbox row in `seen_events` while the platform may still redeliver the event, so a
//! redelivery is still recognised. The newest row of a table whose ids are referred to
//! elsewhere (inbox, outbox, approvals) always stays: SQLite gives a new row the largest id
//! plus one, so deleting the largest would hand its id out again, and an old approval
//! button or an `/undo` mark would then name a new row. Conversation history is not
//! touched: it lives as long as its session (`/new`, the session's reset policy), and
//! `session_search` reads it.

use std::time::Duration;

use rusqlite::params;

use super::db::Db;

use super::{Store, StoreError, now_ms};

/// Rows one batch deleted, per kind.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Pruned {
    pub inbox: usize,
    pub outbox: usize,
    /// Event ids whose redelivery window has passed.
    pub seen: usize,
    /// Decided approvals, ended processes and delegations, old pairing failures, lapsed
    /// adapter memories.
    pub other: usize,
}

impl Pruned {
    pub fn total(&self) -> usize {
        self.inbox + self.outbox + self.seen + self.other
    }

    fn add(&mut self, other: Pruned) {
        self.inbox += other.inbox;
        self.outbox += other.outbox;
        self.seen += other.seen;
        self.other += other.other;
    }
}

/// How long a row is kept, and how long its event id must still recognise a redelivery.
#[derive(Debug, Clone, Copy)]
pub struct Retention {
    /// Age after which handled rows go.
    pub keep: Duration,
    /// How long a platform may redeliver an event (Meta retries WhatsApp webhooks for up to
    /// seven days).
    pub redelivery: Duration,
}

impl Store {
    /// Delete at most `batch` rows of each kind older than `retention.keep`. Relaxed: what a
    /// power loss undoes is pruned again next time.
    pub async fn prune_batch(
        &self,
        retention: Retention,
        batch: usize,
    ) -> Result<Pruned, StoreError> {
        let now = now_ms();
        let before = now - retention.keep.as_millis() as i64;
        let seen_after = now - retention.redelivery.as_millis() as i64;
        let batch = batch as i64;
        self.call_relaxed(move |conn| {
            let tx = conn.transaction()?;
            let pruned = Pruned {
                inbox: prune_inbox(&tx, before, seen_after, batch)?,
                outbox: prune_outbox(&tx, before, batch)?,
                seen: tx
                    .prepare_cached(
                        "DELETE FROM seen_events WHERE event_id IN
                            (SELECT event_id FROM seen_events WHERE received_at < ?1 LIMIT ?2)",
                    )?
                    .execute(params![seen_after, batch])?,
                other: prune_ended(&tx, before, batch)?
                    + tx.prepare_cached(
                        "DELETE FROM adapter_memory WHERE (platform, key) IN
                            (SELECT platform, key FROM adapter_memory WHERE expires_at <= ?1 LIMIT ?2)",
                    )?
                    .execute(params![now, batch])?,
            };
            tx.commit()?;
            Ok(pruned)
        })
        .await
    }

    /// Prune in batches until nothing is left to prune, letting other work in between.
    pub async fn prune(&self, retention: Retention, batch: usize) -> Result<Pruned, StoreError> {
        let mut all = Pruned::default();
        loop {
            let pruned = self.prune_batch(retention, batch).await?;
            all.add(pruned);
            let full = [pruned.inbox, pruned.outbox, pruned.seen, pruned.other]
                .iter()
                .any(|&n| n >= batch);
            if !full {
                return Ok(all);
            }
            tokio::task::yield_now().await;
        }
    }
}

/// Handled rows last changed before `before`; the ids of those received after `seen_after`
/// stay in `seen_events`.
fn prune_inbox(tx: &Db, before: i64, seen_after: i64, batch: i64) -> Result<usize, StoreError> {
    let old: Vec<(i64, String, i64)> = tx
        .prepare_cached(
            "SELECT id, event_id, received_at FROM inbox
             WHERE state != 'received' AND updated_at < ?1
               AND id < (SELECT max(id) FROM inbox)
             ORDER BY id LIMIT ?2",
        )?
        .query_map(params![before, batch], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?))
        })?
        .collect::<Result<_, _>>()?;
    for (id, event_id, received_at) in &old {
        if *received_at >= seen_after {
            tx.prepare_cached(
                "INSERT INTO seen_events (event_id, received_at) VALUES (?1, ?2)
                 ON CONFLICT DO NOTHING",
            )?
            .execute(params![event_id, received_at])?;
        }
        tx.prepare_cached("DELETE FROM inbox WHERE id = ?1")?
            .execute([id])?;
    }
    Ok(old.len())
}

/// Rows that went out or gave up before `before`, except one a queued edit or a waiting
/// approval prompt still refers to, or one streaming the answer of a turn still running
/// (a turn may outlast the retention).
fn prune_outbox(tx: &Db, before: i64, batch: i64) -> Result<usize, StoreError> {
    tx.prepare_cached(
        "DELETE FROM outbox WHERE id IN (
                SELECT id FROM outbox
                WHERE state IN ('sent', 'failed') AND created_at < ?1
                  AND id < (SELECT max(id) FROM outbox)
                  AND (stream_for IS NULL
                       OR stream_for NOT IN (SELECT id FROM inbox WHERE state = 'received'))
                  AND id NOT IN (SELECT edit_of FROM outbox
                                 WHERE state IN ('pending', 'sending') AND edit_of IS NOT NULL)
                  AND id NOT IN (SELECT prompt_outbox_id FROM approvals
                                 WHERE state = 'pending' AND prompt_outbox_id IS NOT NULL)
                ORDER BY id LIMIT ?2)",
    )?
    .execute(params![before, batch])
}

/// Decided approvals, ended background processes and delegations, and pairing failures
/// from before `before`.
fn prune_ended(tx: &Db, before: i64, batch: i64) -> Result<usize, StoreError> {
    const ENDED: [&str; 4] = [
        "DELETE FROM approvals WHERE id IN (SELECT id FROM approvals
            WHERE state != 'pending' AND COALESCE(decided_at, created_at) < ?1
              AND id < (SELECT max(id) FROM approvals) LIMIT ?2)",
        "DELETE FROM background_processes WHERE id IN (SELECT id FROM background_processes
            WHERE state != 'running' AND ended_at < ?1 LIMIT ?2)",
        "DELETE FROM delegations WHERE id IN (SELECT id FROM delegations
            WHERE state != 'running' AND ended_at < ?1 LIMIT ?2)",
        // No key: the batch is the oldest moments (a moment shared by more rows takes them all).
        "DELETE FROM pairing_failures WHERE at IN (SELECT at FROM pairing_failures
            WHERE at < ?1 ORDER BY at LIMIT ?2)",
    ];
    let mut deleted = 0;
    for sql in ENDED {
        deleted += tx.prepare_cached(sql)?.execute(params![before, batch])?;
    }
    Ok(deleted)
}

#[cfg(test)]
mod tests;
