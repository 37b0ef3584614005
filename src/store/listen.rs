//! Hearing at once what another node records (PostgreSQL's `LISTEN`/`NOTIFY`): recording an
//! event notifies `hermes_inbox` in its transaction (delivered at its commit), and a node
//! that does the work listens on a connection of its own, on a thread of its own, and wakes
//! its look at the inbox. The store stays the truth: a notice lost (the connection broke) is
//! made up for by the look's own interval.

use std::sync::{Arc, Weak};
use std::time::Duration;

use postgres::fallible_iterator::FallibleIterator;
use tokio::sync::Notify;

use super::{Store, StoreError};
use crate::config::PgTarget;

/// The channel events are announced on.
pub(super) const INBOX_CHANNEL: &str = "hermes_inbox";

/// How long the listener waits for a notice before it checks whether anyone still wants
/// them, and how long before it connects again after a failure.
const CHECK_EVERY: Duration = Duration::from_secs(1);

impl Store {
    /// Woken whenever another store (another node) records an event (on PostgreSQL;
    /// `None` on SQLite, where this process is the only writer): what this store records,
    /// its own sink has already. Listening when it returns; the listener ends once the
    /// returned handle is dropped.
    pub fn watch_inbox(&self) -> Result<Option<Arc<Notify>>, StoreError> {
        let Some(target) = self.pg_target.clone() else {
            return Ok(None);
        };
        let woken = Arc::new(Notify::new());
        let weak = Arc::downgrade(&woken);
        let (ready_tx, ready) = std::sync::mpsc::sync_channel(1);
        std::thread::Builder::new()
            .name("hermes-listen".into())
            .spawn({
                let origin = self.origin.clone();
                move || listen(&target, &origin, weak, ready_tx)
            })
            .map_err(|e| StoreError::Invalid(format!("cannot start the listener: {e}")))?;
        ready.recv().map_err(|_| StoreError::Closed)??;
        Ok(Some(woken))
    }
}

/// Listen until nobody holds `woken`, passing over the notices signed `own`; `ready`
/// hears how the first connection went.
fn listen(
    target: &PgTarget,
    own: &str,
    woken: Weak<Notify>,
    ready: std::sync::mpsc::SyncSender<Result<(), StoreError>>,
) {
    let mut ready = Some(ready);
    while woken.strong_count() > 0 {
        let connected = target
            .connect()
            .map_err(|source| StoreError::Connect {
                url: target.shown().to_owned(),
                source,
            })
            .and_then(|mut client| {
                client.batch_execute(&format!("LISTEN {INBOX_CHANNEL}"))?;
                Ok(client)
            });
        let mut client = match connected {
            Ok(client) => client,
            Err(e) => {
                if let Some(ready) = ready.take() {
                    let _ = ready.send(Err(e));
                    return;
                }
                tracing::warn!(error = %e, "store: cannot listen for other nodes' events; looking on a timer");
                std::thread::sleep(CHECK_EVERY);
                continue;
            }
        };
        if let Some(ready) = ready.take() {
            let _ = ready.send(Ok(()));
        }
        'connected: while let Some(notify) = woken.upgrade() {
            let mut notifications = client.notifications();
            let mut heard = notifications.timeout_iter(CHECK_EVERY);
            loop {
                match heard.next() {
                    Ok(Some(heard)) if heard.payload() == own => {}
                    Ok(Some(_)) => notify.notify_one(),
                    Ok(None) => break,
                    Err(e) => {
                        tracing::warn!(error = %e, "store: the listening connection broke; connecting again");
                        break 'connected;
                    }
                }
            }
            drop(notify);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_node_hears_at_once_what_another_records_and_not_its_own() {
        let Some(pg) = crate::store::tests::PostgresStore::empty() else {
            return;
        };
        let home = tempfile::tempdir().unwrap();
        let open = || Store::open_postgres(PgTarget::parse(&pg.url, None).unwrap(), home.path());
        let (listening, recording) = (open().unwrap(), open().unwrap());
        let woken = listening.watch_inbox().unwrap().unwrap();
        let message = crate::store::tests::direct_message;
        listening.inbox_record(message("telegram:2")).await.unwrap();
        assert!(
            tokio::time::timeout(Duration::from_millis(500), woken.notified())
                .await
                .is_err(),
            "woken by what it recorded itself"
        );
        recording.inbox_record(message("telegram:1")).await.unwrap();
        tokio::time::timeout(Duration::from_secs(10), woken.notified())
            .await
            .expect("woken by the other connection's record");
        assert!(
            Store::open_in_memory()
                .unwrap()
                .watch_inbox()
                .unwrap()
                .is_none(),
            "nothing to hear on SQLite"
        );
    }
}
