//! What people set for their chat with commands, kept across restarts: per-conversation
//! settings (`/model`, `/personality`, `/verbose`, by session key and name) and each
//! platform's home channel (`/sethome`, in place of the configured one).

use hermes_adapter::{ChatRef, Platform};
use rusqlite::params;

use super::db::Optional;

use super::{Store, StoreError, now_ms};

impl Store {
    /// The setting `name` of conversation `session_key`.
    pub async fn chat_setting(
        &self,
        session_key: &str,
        name: &'static str,
    ) -> Result<Option<String>, StoreError> {
        let key = session_key.to_owned();
        self.call(move |conn| {
            conn.prepare_cached(
                "SELECT value FROM chat_settings WHERE session_key = ?1 AND name = ?2",
            )?
            .query_row(params![key, name], |r| r.get(0))
            .optional()
        })
        .await
    }

    /// Every setting of conversation `session_key`, as (name, value).
    pub async fn chat_settings(
        &self,
        session_key: &str,
    ) -> Result<Vec<(String, String)>, StoreError> {
        let key = session_key.to_owned();
        self.call(move |conn| {
            let mut stmt = conn
                .prepare_cached("SELECT name, value FROM chat_settings WHERE session_key = ?1")?;
            let rows = stmt.query_map([key], |r| Ok((r.get(0)?, r.get(1)?)))?;
            Ok(rows.collect::<Result<Vec<_>, _>>()?)
        })
        .await
    }

    /// Set (`Some`) or clear (`None`) the setting `name` of conversation `session_key`.
    pub async fn set_chat_setting(
        &self,
        session_key: &str,
        name: &'static str,
        value: Option<String>,
    ) -> Result<(), StoreError> {
        let key = session_key.to_owned();
        self.call(move |conn| {
            match value {
                Some(value) => conn
                    .prepare_cached(
                        "INSERT INTO chat_settings (session_key, name, value, updated_at)
                         VALUES (?1, ?2, ?3, ?4)
                         ON CONFLICT (session_key, name)
                         DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at",
                    )?
                    .execute(params![key, name, value, now_ms()])?,
                None => conn
                    .prepare_cached(
                        "DELETE FROM chat_settings WHERE session_key = ?1 AND name = ?2",
                    )?
                    .execute(params![key, name])?,
            };
            Ok(())
        })
        .await
    }

    /// The home channel set with `/sethome` for `platform`, if any.
    pub async fn home_channel(&self, platform: Platform) -> Result<Option<ChatRef>, StoreError> {
        self.call(move |conn| {
            let text: Option<String> = conn
                .prepare_cached("SELECT chat FROM home_channels WHERE platform = ?1")?
                .query_row([platform.as_str()], |r| r.get(0))
                .optional()?;
            Ok(text.and_then(|t| serde_json::from_str(&t).ok()))
        })
        .await
    }

    /// Make `chat` its platform's home channel (`set_by`: who said so).
    pub async fn set_home_channel(&self, chat: &ChatRef, set_by: &str) -> Result<(), StoreError> {
        let platform = chat.platform.as_str();
        let text = serde_json::to_string(chat).unwrap_or_default();
        let set_by = set_by.to_owned();
        self.call(move |conn| {
            conn.prepare_cached(
                "INSERT INTO home_channels (platform, chat, set_by, set_at) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT (platform) DO UPDATE
                 SET chat = excluded.chat, set_by = excluded.set_by, set_at = excluded.set_at",
            )?
            .execute(params![platform, text, set_by, now_ms()])?;
            Ok(())
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hermes_adapter::ChatKind;

    async fn settings_and_home_channels_are_kept_and_replaced(store: Store) {
        assert_eq!(store.chat_setting("k", "model").await.unwrap(), None);
        store
            .set_chat_setting("k", "model", Some("a".into()))
            .await
            .unwrap();
        store
            .set_chat_setting("k", "model", Some("b".into()))
            .await
            .unwrap();
        assert_eq!(
            store.chat_setting("k", "model").await.unwrap().as_deref(),
            Some("b")
        );
        assert_eq!(store.chat_setting("other", "model").await.unwrap(), None);
        store.set_chat_setting("k", "model", None).await.unwrap();
        assert_eq!(store.chat_setting("k", "model").await.unwrap(), None);

        let chat = ChatRef {
            platform: Platform::Slack,
            account: Some("T1".into()),
            chat_id: "C9".into(),
            thread_id: None,
            kind: ChatKind::Channel,
        };
        assert_eq!(store.home_channel(Platform::Slack).await.unwrap(), None);
        store.set_home_channel(&chat, "ana").await.unwrap();
        assert_eq!(
            store.home_channel(Platform::Slack).await.unwrap(),
            Some(chat)
        );
        assert_eq!(store.home_channel(Platform::Telegram).await.unwrap(), None);
    }

    crate::store::on_both_engines!(settings_and_home_channels_are_kept_and_replaced,);
}
