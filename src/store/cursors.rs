//! Per-adapter resume points (e.g. the Telegram `getUpdates` offset).

use rusqlite::OptionalExtension;

use super::{Store, StoreError};

impl Store {
    pub async fn load_cursor(&self, platform: &str) -> Result<Option<String>, StoreError> {
        let platform = platform.to_owned();
        self.call(move |conn| {
            Ok(conn
                .prepare_cached("SELECT value FROM cursors WHERE platform = ?1")?
                .query_row([platform], |r| r.get(0))
                .optional()?)
        })
        .await
    }

    pub async fn save_cursor(&self, platform: &str, value: String) -> Result<(), StoreError> {
        let platform = platform.to_owned();
        self.call(move |conn| {
            conn.prepare_cached(
                "INSERT INTO cursors (platform, value) VALUES (?1, ?2)
                 ON CONFLICT(platform) DO UPDATE SET value = excluded.value",
            )?
            .execute([platform, value])?;
            Ok(())
        })
        .await
    }
}
