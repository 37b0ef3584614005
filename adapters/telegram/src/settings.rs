//! Telegram's settings, with the Python Hermes names: `TELEGRAM_BOT_TOKEN` (or
//! `platforms.telegram.token`), `TELEGRAM_ALLOWED_USERS` / `TELEGRAM_ALLOW_ALL_USERS`
//! (numeric user ids), `TELEGRAM_REQUIRE_MENTION` (or `platforms.telegram.extra.
//! require_mention`), `TELEGRAM_HOME_CHANNEL`, `TELEGRAM_WEBHOOK_URL` and
//! `TELEGRAM_WEBHOOK_SECRET` (webhook mode), and `platforms.telegram.extra.base_url` (the
//! Bot API root: a local Bot API server, or the fake in tests), `.base_file_url` (where
//! files are downloaded, when not from the same root), `.local_mode` (the local server runs
//! with `--local`: files are read from its disk) and `.poll_timeout`.

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
    /// Root files are downloaded from (`base_file_url`; else `api_url`).
    pub files_url: String,
    /// What a local Bot API server allows.
    pub files: FileLimits,
    /// How long one `getUpdates` call may wait for news.
    pub poll_timeout: Duration,
    /// Who may talk to it, the mention rule, the home channel.
    pub common: Common,
    /// Receiving through a webhook instead of `getUpdates`, when `TELEGRAM_WEBHOOK_URL` is
    /// set.
    pub webhook: Option<WebhookSettings>,
}

/// The files the bot may move, and how it gets them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileLimits {
    /// The largest download (`getFile`): 20 MB from the public Bot API, 2 GiB from a local
    /// server (as Hermes counts it).
    pub download_max: u64,
    /// The largest upload: 50 MB to the public Bot API, 2,000 MB to a local server.
    pub upload_max: u64,
    /// The local server runs with `--local`: `getFile` names a path on its disk, which is
    /// read from there (the same machine, or a shared mount) instead of downloaded.
    pub local_mode: bool,
}

impl FileLimits {
    pub const PUBLIC: FileLimits = FileLimits {
        download_max: 20 * 1024 * 1024,
        upload_max: 50 * 1024 * 1024,
        local_mode: false,
    };

    /// A local Bot API server's limits (any `base_url` other than Telegram's own).
    pub fn local(local_mode: bool) -> FileLimits {
        FileLimits {
            download_max: 2 * 1024 * 1024 * 1024,
            upload_max: 2000 * 1024 * 1024,
            local_mode,
        }
    }
}

/// Telegram's webhook mode.
#[derive(Clone)]
pub struct WebhookSettings {
    /// The public HTTPS URL Telegram posts to (`TELEGRAM_WEBHOOK_URL`).
    pub url: reqwest::Url,
    /// Its path, served on the daemon's HTTP server (`/telegram` when the URL has none).
    pub path: String,
    /// Sent back by Telegram with every update (`TELEGRAM_WEBHOOK_SECRET`).
    pub secret: String,
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
    let base_file_url = source.string("platforms.telegram.extra.base_file_url");
    let local_mode = source
        .boolean("platforms.telegram.extra.local_mode")
        .unwrap_or(false);
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

    // Read even when Telegram is off, so the secret is known (and scrubbed from child
    // processes); judged only when it is on.
    let webhook_url = source
        .string("platforms.telegram.extra.webhook_url")
        .or_else(|| source.var("TELEGRAM_WEBHOOK_URL"))
        .filter(|u| !u.trim().is_empty());
    let webhook_secret = source
        .var("TELEGRAM_WEBHOOK_SECRET")
        .filter(|s| !s.is_empty());
    let webhook_port = source.var("TELEGRAM_WEBHOOK_PORT");

    if !enabled.unwrap_or(token.is_some()) {
        return None;
    }
    if webhook_port.is_some() {
        source.warning(
            "TELEGRAM_WEBHOOK_PORT",
            "not used: the webhook is served on the daemon's HTTP server (`http.listen`)".into(),
        );
    }
    let webhook = webhook_url.and_then(|url| read_webhook(source, &url, webhook_secret));
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
        None => PUBLIC_API.to_owned(),
        Some(url) => match api_root(&url) {
            Ok(root) => root,
            Err(e) => {
                source.error("platforms.telegram.extra.base_url", e);
                return None;
            }
        },
    };
    let files_url = match base_file_url {
        None => api_url.clone(),
        Some(url) => match files_root(&url) {
            Ok(root) => root,
            Err(e) => {
                source.error("platforms.telegram.extra.base_file_url", e);
                return None;
            }
        },
    };
    let files = if api_url == PUBLIC_API {
        if local_mode {
            source.warning(
                "platforms.telegram.extra.local_mode",
                "needs a local Bot API server (`base_url`); not used with Telegram's own".into(),
            );
        }
        FileLimits::PUBLIC
    } else {
        FileLimits::local(local_mode)
    };
    Some(Box::new(TelegramSettings {
        token,
        api_url,
        files_url,
        files,
        poll_timeout: Duration::from_secs(poll_timeout as u64),
        common: Common {
            access,
            require_mention,
            home_channel,
        },
        webhook,
    }))
}

/// The webhook at `url` (`TELEGRAM_WEBHOOK_URL` or `platforms.telegram.extra.webhook_url`)
/// with its required `secret` (`TELEGRAM_WEBHOOK_SECRET`); `None` when the pair is unusable
/// (reported).
fn read_webhook(
    source: &mut dyn SettingsSource,
    url: &str,
    secret: Option<String>,
) -> Option<WebhookSettings> {
    let parsed = match reqwest::Url::parse(url.trim()) {
        Ok(parsed) if parsed.scheme() == "https" => parsed,
        Ok(_) => {
            source.error(
                "TELEGRAM_WEBHOOK_URL",
                format!("{url:?}: Telegram posts updates to HTTPS URLs only"),
            );
            return None;
        }
        Err(e) => {
            source.error("TELEGRAM_WEBHOOK_URL", format!("{url:?} is not a URL: {e}"));
            return None;
        }
    };
    let Some(secret) = secret else {
        source.error(
            "TELEGRAM_WEBHOOK_SECRET",
            "TELEGRAM_WEBHOOK_URL is set but TELEGRAM_WEBHOOK_SECRET is not: without it anyone who finds the URL could post updates as Telegram (1-256 of A-Z a-z 0-9 _ -)".into(),
        );
        return None;
    };
    let allowed = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
    if secret.len() > 256 || !secret.chars().all(allowed) {
        source.error(
            "TELEGRAM_WEBHOOK_SECRET",
            "Telegram takes 1-256 characters of A-Z a-z 0-9 _ - only".into(),
        );
        return None;
    }
    let path = match parsed.path() {
        "" | "/" => "/telegram".to_owned(),
        path => path.to_owned(),
    };
    Some(WebhookSettings {
        url: parsed,
        path,
        secret,
    })
}

impl PlatformSettings for TelegramSettings {
    fn platform(&self) -> Platform {
        Platform::Telegram
    }

    fn credential(&self) -> Option<&str> {
        Some(&self.token)
    }

    fn needs_http(&self) -> bool {
        self.webhook.is_some()
    }

    fn common(&self) -> &Common {
        &self.common
    }

    fn describe(&self) -> Vec<(String, String)> {
        vec![
            ("token".into(), mask(&self.token)),
            ("api_url".into(), self.api_url.clone()),
            (
                "files".into(),
                format!(
                    "from {}{}, up to {} MB down and {} MB up",
                    self.files_url,
                    if self.files.local_mode {
                        " (local mode: read from disk)"
                    } else {
                        ""
                    },
                    self.files.download_max / (1024 * 1024),
                    self.files.upload_max / (1024 * 1024)
                ),
            ),
            self.common.require_mention_line(),
            self.common.home_channel_line(),
            match &self.webhook {
                Some(webhook) => ("webhook".into(), webhook.url.to_string()),
                None => (
                    "poll_timeout".into(),
                    format!("{}s", self.poll_timeout.as_secs()),
                ),
            },
        ]
    }

    fn build(&self) -> Result<Arc<dyn Adapter>, AdapterError> {
        Ok(Arc::new(TelegramAdapter::new(self)?))
    }
}

/// Accept the python-telegram-bot form (`…/bot`) and the bare root; return the bare root.
/// Telegram's own Bot API root.
const PUBLIC_API: &str = "https://api.telegram.org";

fn api_root(url: &str) -> Result<String, String> {
    let root = hermes_adapter::http_root(url)?;
    Ok(root.strip_suffix("/bot").unwrap_or(&root).to_owned())
}

/// The root of `base_file_url`, which python-telegram-bot writes as `…/file/bot` (the token
/// and the file's path follow).
fn files_root(url: &str) -> Result<String, String> {
    let root = hermes_adapter::http_root(url)?;
    let root = root.strip_suffix("/bot").unwrap_or(&root);
    Ok(root.strip_suffix("/file").unwrap_or(root).to_owned())
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

    #[test]
    fn a_file_root_is_taken_in_python_telegram_bots_form_too() {
        assert_eq!(files_root("http://h:1/file/bot").unwrap(), "http://h:1");
        assert_eq!(files_root("http://h:1/file/bot/").unwrap(), "http://h:1");
        assert_eq!(files_root("http://h:1").unwrap(), "http://h:1");
        assert!(files_root("file:///srv").is_err());
    }
}
