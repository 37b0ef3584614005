//! Discord's settings, with the Python Hermes names: `DISCORD_BOT_TOKEN` (or
//! `platforms.discord.token`), `DISCORD_ALLOWED_USERS` / `DISCORD_ALLOW_ALL_USERS` (user ids),
//! `DISCORD_REQUIRE_MENTION` (default true in server channels),
//! `DISCORD_FREE_RESPONSE_CHANNELS` (channel ids where every message is for the bot),
//! `DISCORD_HOME_CHANNEL`, `DISCORD_AUTO_THREAD` (default false: Hermes turned it on
//! silently once and broke bot-to-bot setups, issues #7184/#20243), `DISCORD_REACTIONS`
//! (or `discord.reactions`; default true: 👀 on the message being answered, then ✅ or ❌), and
//! `platforms.discord.extra.api_base_url` (the REST root; how tests reach the fake and how an
//! operator points the bot at a proxy).

use std::sync::Arc;

use hermes_adapter::{
    Access, Adapter, AdapterError, Common, Platform, PlatformSettings, SettingsSource, is_truthy,
    mask, split_list,
};

/// Hermes' reading of `DISCORD_REACTIONS`: on unless it says no.
fn is_falsy(value: &str) -> bool {
    matches!(
        value.trim().to_ascii_lowercase().as_str(),
        "false" | "0" | "no" | "off"
    )
}

use crate::DiscordAdapter;

/// Discord's public REST root.
pub const DEFAULT_API_BASE: &str = "https://discord.com";

/// What the Discord adapter needs.
#[derive(Clone)]
pub struct DiscordSettings {
    pub token: String,
    /// REST root without `/api/v10` (`https://discord.com`, or a fake in tests).
    pub api_base_url: String,
    /// Channels where the bot answers without being mentioned.
    pub free_response_channels: Vec<String>,
    /// `DISCORD_IGNORE_NO_MENTION` (default true): a server message that mentions people
    /// but not the bot is not for it.
    pub ignore_no_mention: bool,
    /// A mention in a server channel opens a thread from the message; the conversation goes
    /// on there.
    pub auto_thread: bool,
    /// 👀 on the message being answered while the turn runs, then ✅ (answered) or ❌
    /// (failed); nothing after a stop. As Hermes does.
    pub reactions: bool,
    /// Who may talk to it, the mention rule, the home channel.
    pub common: Common,
    /// The gateway-wide allowlist (`GATEWAY_ALLOWED_USERS` / `GATEWAY_ALLOW_ALL_USERS`),
    /// which the adapter needs to know whom it may open threads for and which bots it hears.
    pub gateway_access: Access,
}

impl std::fmt::Debug for DiscordSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DiscordSettings")
            .field("token", &mask(&self.token))
            .field("api_base_url", &self.api_base_url)
            .finish_non_exhaustive()
    }
}

/// Discord's settings, or `None` when Discord is not enabled (no token, or
/// `platforms.discord.enabled: false`). Problems are reported against their key.
pub fn settings(source: &mut dyn SettingsSource) -> Option<Box<dyn PlatformSettings>> {
    let enabled = source.boolean("platforms.discord.enabled");
    // Read even when the file has the token, so the variable is known (and scrubbed from
    // child processes).
    let env_token = source.var("DISCORD_BOT_TOKEN");
    let token = source.string("platforms.discord.token").or(env_token);
    let base_url = source.string("platforms.discord.extra.api_base_url");
    let require_mention = source
        .boolean("platforms.discord.extra.require_mention")
        .or_else(|| source.boolean("discord.require_mention"))
        .or_else(|| source.var("DISCORD_REQUIRE_MENTION").map(|v| is_truthy(&v)))
        .unwrap_or(true);
    let free_response_channels = source
        .var("DISCORD_FREE_RESPONSE_CHANNELS")
        .map(|v| split_list(&v))
        .unwrap_or_default();
    let ignore_no_mention = source
        .var("DISCORD_IGNORE_NO_MENTION")
        .map(|v| is_truthy(&v))
        .unwrap_or(true);
    let auto_thread = source
        .boolean("platforms.discord.extra.auto_thread")
        .or_else(|| source.var("DISCORD_AUTO_THREAD").map(|v| is_truthy(&v)))
        .unwrap_or(false);
    let reactions = source
        .boolean("platforms.discord.extra.reactions")
        .or_else(|| source.boolean("discord.reactions"))
        .or_else(|| source.var("DISCORD_REACTIONS").map(|v| !is_falsy(&v)))
        .unwrap_or(true);
    let home_channel = source
        .var("DISCORD_HOME_CHANNEL")
        .or_else(|| source.string("platforms.discord.home_channel.chat_id"));
    let access = Access::read(source, "DISCORD");
    let gateway_access = Access::read(source, "GATEWAY");
    for id in access.allowed.iter().chain(&free_response_channels) {
        if !is_snowflake(id) {
            let key = if access.allowed.contains(id) {
                "DISCORD_ALLOWED_USERS"
            } else {
                "DISCORD_FREE_RESPONSE_CHANNELS"
            };
            source.error(
                key,
                format!(
                    "{id:?} is not a Discord id (turn on Developer Mode, then right-click → Copy ID)"
                ),
            );
        }
    }

    if !enabled.unwrap_or(token.is_some()) {
        return None;
    }
    let Some(token) = token else {
        source.error(
            "DISCORD_BOT_TOKEN",
            "platforms.discord.enabled is true but no bot token is set (put DISCORD_BOT_TOKEN in $HERMES_HOME/.env)".into(),
        );
        return None;
    };
    let token = token.trim().trim_start_matches("Bot ").to_owned();
    if token.is_empty() || token.chars().any(char::is_whitespace) {
        source.error(
            "DISCORD_BOT_TOKEN",
            "does not look like a bot token (copy it from the Bot page of the developer portal)"
                .into(),
        );
        return None;
    }
    let api_base_url = match base_url {
        None => DEFAULT_API_BASE.to_owned(),
        Some(url) => match api_root(&url) {
            Ok(root) => root,
            Err(e) => {
                source.error("platforms.discord.extra.api_base_url", e);
                return None;
            }
        },
    };
    Some(Box::new(DiscordSettings {
        token,
        api_base_url,
        free_response_channels,
        ignore_no_mention,
        auto_thread,
        reactions,
        common: Common {
            access,
            require_mention,
            home_channel,
        },
        gateway_access,
    }))
}

impl PlatformSettings for DiscordSettings {
    fn platform(&self) -> Platform {
        Platform::Discord
    }

    fn credential(&self) -> Option<&str> {
        Some(&self.token)
    }

    fn common(&self) -> &Common {
        &self.common
    }

    fn describe(&self) -> Vec<(String, String)> {
        vec![
            ("token".into(), mask(&self.token)),
            ("api_base_url".into(), self.api_base_url.clone()),
            self.common.require_mention_line(),
            (
                "free_response_channels".into(),
                if self.free_response_channels.is_empty() {
                    "(none)".into()
                } else {
                    self.free_response_channels.join(", ")
                },
            ),
            ("auto_thread".into(), self.auto_thread.to_string()),
            ("reactions".into(), self.reactions.to_string()),
            self.common.home_channel_line(),
        ]
    }

    fn build(&self) -> Result<Arc<dyn Adapter>, AdapterError> {
        Ok(Arc::new(DiscordAdapter::new(self)?))
    }
}

/// A Discord id: a snowflake, digits only.
fn is_snowflake(id: &str) -> bool {
    !id.is_empty() && id.len() <= 20 && id.bytes().all(|b| b.is_ascii_digit())
}

/// Accept the root with or without `/api` or `/api/v10`; return the bare root.
fn api_root(url: &str) -> Result<String, String> {
    let root = hermes_adapter::http_root(url)?;
    let root = root.strip_suffix("/v10").unwrap_or(&root);
    Ok(root.strip_suffix("/api").unwrap_or(root).to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rest_root_is_accepted_with_or_without_its_api_path() {
        assert_eq!(api_root("http://h:1/").unwrap(), "http://h:1");
        assert_eq!(api_root("http://h:1/api/v10/").unwrap(), "http://h:1");
        assert_eq!(
            api_root("https://proxy.example/discord/api").unwrap(),
            "https://proxy.example/discord"
        );
        assert!(api_root("ftp://h").is_err());
        assert!(api_root("not a url").is_err());
    }

    #[test]
    fn ids_are_snowflakes() {
        assert!(is_snowflake("123456789012345678"));
        assert!(!is_snowflake("alice"));
        assert!(!is_snowflake(""));
    }
}
