//! Platform settings belong to the platform's crate: each adapter crate reads its own keys
//! (with the Python Hermes names) from a [`SettingsSource`], names the key in every problem
//! it finds, and returns [`PlatformSettings`]: its `check-config` section, who may talk to
//! it, its mention rule and home channel, and how to build the adapter. The daemon only
//! keeps the list of platforms it was built with.

use std::fmt;
use std::sync::Arc;

use crate::{Adapter, AdapterError, Platform};

/// Where settings come from: `config.yaml` keys (dotted paths) and variables (`.env` and
/// the process environment). Reading a key marks it used; a value of the wrong type is
/// reported against its key by the source itself.
pub trait SettingsSource {
    fn string(&mut self, key: &str) -> Option<String>;
    fn boolean(&mut self, key: &str) -> Option<bool>;
    fn number(&mut self, key: &str) -> Option<i64>;
    /// A variable from `.env` or the environment (the environment wins).
    fn var(&mut self, name: &str) -> Option<String>;
    /// A problem that keeps the configuration from running, against its key or variable.
    fn error(&mut self, key: &str, message: String);
    /// Something worth knowing that does not stop the daemon.
    fn warning(&mut self, key: &str, message: String);
    /// The gateway's home directory (`~/.hermes`), where an adapter finds the files the
    /// daemon keeps for it (the web chat's login token); `None` when there is none.
    fn home(&self) -> Option<&std::path::Path> {
        None
    }
}

/// Who may talk to the bot on one platform (`{PREFIX}_ALLOWED_USERS`,
/// `{PREFIX}_ALLOW_ALL_USERS`); the gateway-wide lists come on top.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Access {
    pub allowed: Vec<String>,
    pub allow_all: bool,
}

impl Access {
    /// Read the Hermes allowlist variables with `prefix` (`TELEGRAM`, `WHATSAPP_CLOUD`).
    pub fn read(source: &mut dyn SettingsSource, prefix: &str) -> Access {
        Access {
            allowed: source
                .var(&format!("{prefix}_ALLOWED_USERS"))
                .map(|v| split_list(&v))
                .unwrap_or_default(),
            allow_all: source
                .var(&format!("{prefix}_ALLOW_ALL_USERS"))
                .is_some_and(|v| is_truthy(&v)),
        }
    }
}

/// What every platform's settings hold alike: who may talk to the bot, whether a group
/// message must address it, and where notices without a conversation go.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Common {
    pub access: Access,
    pub require_mention: bool,
    pub home_channel: Option<String>,
}

impl Common {
    /// `{prefix}_HOME_CHANNEL`, else `platforms.<name>.home_channel.chat_id` (Hermes' names).
    pub fn read_home_channel(
        source: &mut dyn SettingsSource,
        prefix: &str,
        name: &str,
    ) -> Option<String> {
        source
            .var(&format!("{prefix}_HOME_CHANNEL"))
            .or_else(|| source.string(&format!("platforms.{name}.home_channel.chat_id")))
    }

    /// The `check-config` line of the home channel.
    pub fn home_channel_line(&self) -> (String, String) {
        (
            "home_channel".into(),
            self.home_channel.clone().unwrap_or_else(|| "(none)".into()),
        )
    }

    /// The `check-config` line of the mention rule.
    pub fn require_mention_line(&self) -> (String, String) {
        ("require_mention".into(), self.require_mention.to_string())
    }
}

/// One platform's settings, read by its crate.
pub trait PlatformSettings: Send + Sync + fmt::Debug {
    fn platform(&self) -> Platform;
    /// What these settings hold alike with every platform's.
    fn common(&self) -> &Common;
    /// Who may talk to the bot here.
    fn access(&self) -> &Access {
        &self.common().access
    }
    /// In groups, answer only messages addressed to the bot.
    fn require_mention(&self) -> bool {
        self.common().require_mention
    }
    /// Where notices without a conversation go (`{PREFIX}_HOME_CHANNEL`).
    fn home_channel(&self) -> Option<&str> {
        self.common().home_channel.as_deref()
    }
    /// The `check-config` section: (key, value) pairs, secrets masked.
    fn describe(&self) -> Vec<(String, String)>;
    /// Where people open it, for a platform the gateway serves itself (the web chat's
    /// page); `None` for the others.
    fn address(&self) -> Option<String> {
        None
    }
    /// What names the bot to its platform (its token; WhatsApp's phone number id): two
    /// gateways in one process must not serve one bot (a token cannot be polled twice).
    /// Compared, never shown. `None` for a platform served on this machine only.
    fn credential(&self) -> Option<&str> {
        None
    }
    /// An address the platform listens on by itself (the web chat's page), which no other
    /// gateway of the process may take.
    fn own_listener(&self) -> Option<std::net::SocketAddr> {
        None
    }
    /// Whether the platform reaches the bot through the daemon's HTTP server (webhooks).
    fn needs_http(&self) -> bool {
        false
    }
    /// The adapter these settings make.
    fn build(&self) -> Result<Arc<dyn Adapter>, AdapterError>;
}

/// Hermes' truthy strings.
pub fn is_truthy(value: &str) -> bool {
    matches!(
        value.trim().to_ascii_lowercase().as_str(),
        "true" | "1" | "yes" | "on"
    )
}

/// A comma-separated list, trimmed, without empty items.
pub fn split_list(text: &str) -> Vec<String> {
    text.split(',')
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
        .collect()
}

/// An API root from the configuration: an http(s) URL with a host, without a trailing
/// slash (how tests point a client at a fake, and operators at a proxy). The error says
/// what is wrong with it.
pub fn http_root(url: &str) -> Result<String, String> {
    let parsed = url::Url::parse(url).map_err(|e| format!("{url:?} is not a valid URL: {e}"))?;
    if !matches!(parsed.scheme(), "http" | "https") || parsed.host_str().is_none() {
        return Err(format!(
            "{url:?} must be an http:// or https:// URL with a host"
        ));
    }
    Ok(url.trim_end_matches('/').to_owned())
}

/// A secret for logs and `check-config`: its first three characters and its length.
pub fn mask(secret: &str) -> String {
    let head: String = secret.chars().take(3).collect();
    format!("{head}… ({} chars)", secret.chars().count())
}
