//! Per-adapter resume points (e.g. the Telegram `getUpdates` offset), each kept under its
//! platform and the key the adapter names it by (the bot's id), so a cursor of one bot is
//! never used for another.

use super::db::Optional;

use super::{Store, StoreError};

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

    crate::store::on_both_engines!(each_bot_has_its_own_cursor,);
}
