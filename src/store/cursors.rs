//! What adapters keep in the store: resume points (e.g. the Telegram `getUpdates` offset),
//! each under its platform and the key the adapter names it by (the bot's id), so a cursor
//! of one bot is never used for another; and memories that lapse (`adapter_memory`): what
//! an event leaves for its answer (a Slack press's presser, a `response_url`), read by
//! whichever node sends the answer, also after a restart.

use rusqlite::params;

use super::db::Optional;

use super::{Store, StoreError, now_ms};

impl Store {
    pub async fn load_cursor(
        &self,
        platform: &str,
        key: &str,
    ) -> Result<Option<String>, StoreError> {
        let (platform, key) = (platform.to_owned(), key.to_owned());
        self.call(move |conn| {
            conn.prepare_cached("SELECT value FROM cursors WHERE platform = ?1 AND key = ?2")?
                .query_row([platform, key], |r| r.get(0))
                .optional()
        })
        .await
    }

    pub async fn save_cursor(
        &self,
        platform: &str,
        key: &str,
        value: String,
    ) -> Result<(), StoreError> {
        let (platform, key) = (platform.to_owned(), key.to_owned());
        // Relaxed: a cursor lost with the power only makes the platform send updates again,
        // which the inbox recognises by their event ids.
        self.call_relaxed(move |conn| {
            conn.prepare_cached(
                "INSERT INTO cursors (platform, key, value) VALUES (?1, ?2, ?3)
                 ON CONFLICT(platform, key) DO UPDATE SET value = excluded.value",
            )?
            .execute([platform, key, value])?;
            Ok(())
        })
        .await
    }

    /// Keep `value` under (`platform`, `key`) for `ttl_ms`, replacing what was there.
    pub async fn remember(
        &self,
        platform: &str,
        key: &str,
        value: String,
        ttl_ms: i64,
    ) -> Result<(), StoreError> {
        let (platform, key) = (platform.to_owned(), key.to_owned());
        let expires_at = now_ms().saturating_add(ttl_ms);
        self.call(move |conn| {
            conn.prepare_cached(
                "INSERT INTO adapter_memory (platform, key, value, expires_at) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT(platform, key) DO UPDATE
                 SET value = excluded.value, expires_at = excluded.expires_at",
            )?
            .execute(params![platform, key, value, expires_at])?;
            Ok(())
        })
        .await
    }

    /// What is kept under (`platform`, `key`), unless it lapsed.
    pub async fn recall(&self, platform: &str, key: &str) -> Result<Option<String>, StoreError> {
        let (platform, key) = (platform.to_owned(), key.to_owned());
        let now = now_ms();
        self.call(move |conn| {
            conn.prepare_cached(
                "SELECT value FROM adapter_memory
                 WHERE platform = ?1 AND key = ?2 AND expires_at > ?3",
            )?
            .query_row(params![platform, key, now], |r| r.get(0))
            .optional()
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use crate::store::Store;

    async fn each_bot_has_its_own_cursor(store: Store) {
        store
            .save_cursor("telegram", "bot1", "500".into())
            .await
            .unwrap();
        store
            .save_cursor("telegram", "bot1", "501".into())
            .await
            .unwrap();
        assert_eq!(
            store
                .load_cursor("telegram", "bot1")
                .await
                .unwrap()
                .as_deref(),
            Some("501")
        );
        assert_eq!(store.load_cursor("telegram", "bot2").await.unwrap(), None);
    }

    async fn a_memory_is_recalled_until_it_lapses_and_then_pruned(store: Store) {
        store
            .remember("slack", "press:1", "U1".into(), 60_000)
            .await
            .unwrap();
        store
            .remember("slack", "press:2", "U2".into(), -1)
            .await
            .unwrap();
        assert_eq!(
            store.recall("slack", "press:1").await.unwrap().as_deref(),
            Some("U1")
        );
        assert_eq!(
            store.recall("slack", "press:2").await.unwrap(),
            None,
            "lapsed"
        );
        assert_eq!(store.recall("discord", "press:1").await.unwrap(), None);
        store
            .remember("slack", "press:1", "U3".into(), 60_000)
            .await
            .unwrap();
        assert_eq!(
            store.recall("slack", "press:1").await.unwrap().as_deref(),
            Some("U3"),
            "replaced"
        );
        let pruned = store
            .prune_batch(
                crate::store::Retention {
                    keep: std::time::Duration::from_secs(3600),
                    redelivery: std::time::Duration::from_secs(3600),
                },
                100,
            )
            .await
            .unwrap();
        assert_eq!(pruned.other, 1, "the lapsed memory is deleted");
        assert!(store.recall("slack", "press:1").await.unwrap().is_some());
    }

    crate::store::on_both_engines!(
        each_bot_has_its_own_cursor,
        a_memory_is_recalled_until_it_lapses_and_then_pruned,
    );
}
