//! Telegram's settings, with the Python Hermes names: `TELEGRAM_BOT_TOKEN` (or
//! `platforms.telegram.token`), `TELEGRAM_ALLOWED_USERS` / `TELEGRAM_ALLOW_ALL_USERS`
//! (numeric user ids), `TELEGRAM_REQUIRE_MENTION` (or `platforms.telegram.extra.
//! require_mention`), `TELEGRAM_HOME_CHANNEL`, and `platforms.telegram.extra.base_url` (the
//! Bot API root; how tests reach the fake) and `.poll_timeout`.

use std::sync::Arc;
use std::time::Duration;

use hermes_adapter::{
    Access, Adapter, AdapterError, Common, Platform, PlatformSettings, SettingsSource, is_truthy,
    mask,
};

use crate::TelegramAdapter;

/// What the Telegram adapter needs.
#[derive(Clone)]
pub struct TelegramSettings {
    pub token: String,
    /// Bot API root without `/bot` (`https://api.telegram.org`, or a fake in tests).
    pub api_url: String,
    /// How long one `getUpdates` call may wait for news.
    pub poll_timeout: Duration,
    /// Who may talk to it, the mention rule, the home channel.
    pub common: Common,
}

impl std::fmt::Debug for TelegramSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TelegramSettings")
            .field("token", &mask(&self.token))
            .field("api_url", &self.api_url)
            .finish_non_exhaustive()
    }
}

/// Telegram's settings, or `None` when Telegram is not enabled (no token, or
/// `platforms.telegram.enabled: false`). Problems are reported against their key.
pub fn settings(source: &mut dyn SettingsSource) -> Option<Box<dyn PlatformSettings>> {
    let enabled = source.boolean("platforms.telegram.enabled");
    // Read even when the file has the token, so the variable is known (and scrubbed from
    // child processes).
    let env_token = source.var("TELEGRAM_BOT_TOKEN");
    let token = source.string("platforms.telegram.token").or(env_token);
    let base_url = source.string("platforms.telegram.extra.base_url");
    let require_mention = source
        .boolean("platforms.telegram.extra.require_mention")
        .or_else(|| source.boolean("telegram.require_mention"))
        .or_else(|| {
            source
                .var("TELEGRAM_REQUIRE_MENTION")
                .map(|v| is_truthy(&v))
        })
        .unwrap_or(true);
    let poll_key = "platforms.telegram.extra.poll_timeout";
    let asked = source.number(poll_key).unwrap_or(10);
    let poll_timeout = asked.clamp(1, 15);
    if poll_timeout != asked {
        source.warning(
            poll_key,
            format!("{asked} is outside 1–15 seconds; {poll_timeout} is used"),
        );
    }
    let home_channel = Common::read_home_channel(source, "TELEGRAM", "telegram");
    let access = Access::read(source, "TELEGRAM");
    for id in &access.allowed {
        if id.parse::<i64>().is_err() {
            source.error(
                "TELEGRAM_ALLOWED_USERS",
                format!("{id:?} is not a numeric Telegram user id (ask @userinfobot for yours)"),
            );
        }
    }

    if !enabled.unwrap_or(token.is_some()) {
        return None;
    }
    let Some(token) = token else {
        source.error(
            "TELEGRAM_BOT_TOKEN",
            "platforms.telegram.enabled is true but no bot token is set (put TELEGRAM_BOT_TOKEN in $HERMES_HOME/.env)".into(),
        );
        return None;
    };
    if !token.contains(':') {
        source.error(
            "TELEGRAM_BOT_TOKEN",
            "does not look like a bot token (expected <digits>:<secret>, as BotFather gives it)"
                .into(),
        );
    }
    let api_url = match base_url {
        None => "https://api.telegram.org".to_owned(),
        Some(url) => match api_root(&url) {
            Ok(root) => root,
            Err(e) => {
                source.error("platforms.telegram.extra.base_url", e);
                return None;
            }
        },
    };
    Some(Box::new(TelegramSettings {
        token,
        api_url,
        poll_timeout: Duration::from_secs(poll_timeout as u64),
        common: Common {
            access,
            require_mention,
            home_channel,
        },
    }))
}

impl PlatformSettings for TelegramSettings {
    fn platform(&self) -> Platform {
        Platform::Telegram
    }

    fn common(&self) -> &Common {
        &self.common
    }

    fn describe(&self) -> Vec<(String, String)> {
        vec![
            ("token".into(), mask(&self.token)),
            ("api_url".into(), self.api_url.clone()),
            self.common.require_mention_line(),
            self.common.home_channel_line(),
            (
                "poll_timeout".into(),
                format!("{}s", self.poll_timeout.as_secs()),
            ),
        ]
    }

    fn build(&self) -> Result<Arc<dyn Adapter>, AdapterError> {
        Ok(Arc::new(TelegramAdapter::new(self)?))
    }
}

/// Accept the python-telegram-bot form (`…/bot`) and the bare root; return the bare root.
fn api_root(url: &str) -> Result<String, String> {
    let root = hermes_adapter::http_root(url)?;
    Ok(root.strip_suffix("/bot").unwrap_or(&root).to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bare_telegram_root_is_accepted_too() {
        assert_eq!(api_root("http://h:1/").unwrap(), "http://h:1");
        assert_eq!(api_root("http://h:1/bot/").unwrap(), "http://h:1");
        assert!(api_root("ftp://h").is_err());
        assert!(api_root("not a url").is_err());
    }
}
