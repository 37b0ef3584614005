//! Slack's settings, with the Python Hermes names where they exist: `SLACK_BOT_TOKEN`
//! (`xoxb-`), `SLACK_APP_TOKEN` (`xapp-`, Socket Mode), `SLACK_SIGNING_SECRET` (Events API),
//! `SLACK_ALLOWED_USERS` / `SLACK_ALLOW_ALL_USERS`, `SLACK_HOME_CHANNEL`, and
//! `platforms.slack.{enabled, extra.api_base_url, extra.mode, extra.reply_in_thread}`.

use std::sync::Arc;

use hermes_adapter::{
    Access, Adapter, AdapterError, Common, Platform, PlatformSettings, SettingsSource, http_root,
    mask,
};

use crate::SlackAdapter;

/// Slack's Web API root.
pub const DEFAULT_API_BASE: &str = "https://slack.com/api";

/// How events reach the adapter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Socket Mode: the adapter dials out (no public endpoint); needs the app token.
    Socket,
    /// The Events API: Slack posts to the daemon's HTTP server; needs the signing secret.
    Events,
}

/// What the Slack adapter needs.
#[derive(Clone)]
pub struct SlackSettings {
    pub bot_token: String,
    pub app_token: Option<String>,
    pub signing_secret: Option<String>,
    /// Web API root (`https://slack.com/api`, or a fake in tests); methods go to
    /// `{api_base_url}/{method}`.
    pub api_base_url: String,
    pub mode: Mode,
    /// Answers in channels go in the thread of the message that asked.
    pub reply_in_thread: bool,
    /// Who may talk to it, the mention rule (channels: only messages that mention the bot,
    /// or follow up in its threads), the home channel.
    pub common: Common,
}

impl std::fmt::Debug for SlackSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SlackSettings")
            .field("bot_token", &mask(&self.bot_token))
            .field("api_base_url", &self.api_base_url)
            .field("mode", &self.mode)
            .finish_non_exhaustive()
    }
}

/// Slack's settings, or `None` when Slack is not enabled (no bot token, or
/// `platforms.slack.enabled: false`). Problems are reported against their key.
pub fn settings(source: &mut dyn SettingsSource) -> Option<Box<dyn PlatformSettings>> {
    let enabled = source.boolean("platforms.slack.enabled");
    let env_token = source.var("SLACK_BOT_TOKEN");
    let bot_token = source.string("platforms.slack.token").or(env_token);
    let app_token = source.var("SLACK_APP_TOKEN");
    let signing_secret = source.var("SLACK_SIGNING_SECRET");
    let base_url = source.string("platforms.slack.extra.api_base_url");
    let mode = source.string("platforms.slack.extra.mode");
    let reply_in_thread = source
        .boolean("platforms.slack.extra.reply_in_thread")
        .unwrap_or(true);
    let home_channel = Common::read_home_channel(source, "SLACK", "slack");
    let access = Access::read(source, "SLACK");

    if !enabled.unwrap_or(bot_token.is_some()) {
        return None;
    }
    let Some(bot_token) = bot_token else {
        source.error(
            "SLACK_BOT_TOKEN",
            "platforms.slack.enabled is true but no bot token is set (put SLACK_BOT_TOKEN=xoxb-… in $HERMES_HOME/.env)".into(),
        );
        return None;
    };
    if !bot_token.starts_with("xoxb-") {
        source.error(
            "SLACK_BOT_TOKEN",
            "is not a bot token (it starts with xoxb-; find it under OAuth & Permissions)".into(),
        );
    }
    if let Some(app) = &app_token
        && !app.starts_with("xapp-")
    {
        source.error(
            "SLACK_APP_TOKEN",
            "is not an app-level token (it starts with xapp-; make one under Basic Information → App-Level Tokens with connections:write)".into(),
        );
    }
    let mode = match mode.as_deref().map(str::trim) {
        Some("socket") => Mode::Socket,
        Some("events") => Mode::Events,
        None if app_token.is_some() => Mode::Socket,
        None => Mode::Events,
        Some(other) => {
            source.error(
                "platforms.slack.extra.mode",
                format!("{other:?} is not a mode: use socket or events"),
            );
            return None;
        }
    };
    match mode {
        Mode::Socket if app_token.is_none() => source.error(
            "SLACK_APP_TOKEN",
            "Socket Mode needs the app-level token (xapp-…); or set platforms.slack.extra.mode: events and SLACK_SIGNING_SECRET".into(),
        ),
        Mode::Events if signing_secret.is_none() => source.error(
            "SLACK_SIGNING_SECRET",
            "the Events API needs the signing secret (Basic Information → App Credentials); without it the /slack/* routes are not mounted".into(),
        ),
        _ => {}
    }
    let api_base_url = match base_url {
        None => DEFAULT_API_BASE.to_owned(),
        Some(url) => match http_root(&url) {
            Ok(root) => root,
            Err(e) => {
                source.error("platforms.slack.extra.api_base_url", e);
                return None;
            }
        },
    };
    Some(Box::new(SlackSettings {
        bot_token,
        app_token,
        signing_secret,
        api_base_url,
        mode,
        reply_in_thread,
        common: Common {
            access,
            require_mention: true,
            home_channel,
        },
    }))
}

impl PlatformSettings for SlackSettings {
    fn platform(&self) -> Platform {
        Platform::Slack
    }

    fn credential(&self) -> Option<&str> {
        Some(&self.bot_token)
    }

    fn needs_http(&self) -> bool {
        self.mode == Mode::Events
    }

    fn common(&self) -> &Common {
        &self.common
    }

    fn describe(&self) -> Vec<(String, String)> {
        let shown = |s: &Option<String>| s.as_deref().map(mask).unwrap_or_else(|| "(none)".into());
        vec![
            ("bot_token".into(), mask(&self.bot_token)),
            ("app_token".into(), shown(&self.app_token)),
            ("signing_secret".into(), shown(&self.signing_secret)),
            ("api_base_url".into(), self.api_base_url.clone()),
            (
                "mode".into(),
                match self.mode {
                    Mode::Socket => "socket".into(),
                    Mode::Events => {
                        "events (POST /slack/events, /slack/interactions, /slack/commands)".into()
                    }
                },
            ),
            ("reply_in_thread".into(), self.reply_in_thread.to_string()),
            self.common.home_channel_line(),
        ]
    }

    fn build(&self) -> Result<Arc<dyn Adapter>, AdapterError> {
        Ok(Arc::new(SlackAdapter::new(self)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_api_root_is_an_http_url() {
        assert_eq!(http_root("http://h:1/api/").unwrap(), "http://h:1/api");
        assert!(http_root("ftp://h").is_err());
        assert!(http_root("nonsense").is_err());
    }
}
