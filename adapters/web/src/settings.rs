//! The web chat's settings: `platforms.web.enabled`, `web.listen` (default
//! `127.0.0.1:8090`; `HERMES_WEB_LISTEN` wins), `web.public_url` (the `https://` address a TLS terminator in front
//! serves it at), and the login token the daemon keeps in the home.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use hermes_adapter::{
    Access, Adapter, AdapterError, Common, Platform, PlatformSettings, SettingsSource, mask,
};

use crate::WebAdapter;

/// Where the web chat listens unless `web.listen` says otherwise.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8090";
/// The one person of the web chat: whoever holds the login token, the operator.
pub const OPERATOR: &str = "operator";

/// What the web chat needs.
#[derive(Clone)]
pub struct WebSettings {
    pub listen: SocketAddr,
    /// The address people reach it at through a TLS terminator, if not on this machine.
    pub public_url: Option<String>,
    /// The login token; `None` until the daemon has made it (`check-config` before the
    /// first start).
    pub token: Option<String>,
    /// The gateway's home: uploads and files sent are kept under it.
    pub home: PathBuf,
    pub common: Common,
}

impl std::fmt::Debug for WebSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebSettings")
            .field("listen", &self.listen)
            .field("public_url", &self.public_url)
            .field("token", &self.token.as_deref().map(mask))
            .finish_non_exhaustive()
    }
}

impl WebSettings {
    /// The address of the page, as a browser on this machine (or behind the public URL)
    /// opens it.
    pub fn base_url(&self) -> String {
        match &self.public_url {
            Some(url) => url.trim_end_matches('/').to_owned(),
            None if self.listen.ip().is_unspecified() => {
                format!("http://127.0.0.1:{}", self.listen.port())
            }
            None => format!("http://{}", self.listen),
        }
    }
}

/// The web chat's settings, or `None` when it is not enabled.
pub fn settings(source: &mut dyn SettingsSource) -> Option<Box<dyn PlatformSettings>> {
    let enabled = source.boolean("platforms.web.enabled");
    // The variable wins (a service unit, a test), as Hermes' variables do over the file.
    let in_file = source.string("web.listen");
    let listen_text = source.var("HERMES_WEB_LISTEN").or(in_file);
    let public_url = source
        .string("web.public_url")
        .filter(|u| !u.trim().is_empty());
    if enabled != Some(true) {
        return None;
    }
    let text = listen_text.unwrap_or_else(|| DEFAULT_LISTEN.to_owned());
    let Ok(listen) = text.parse::<SocketAddr>() else {
        source.error(
            "web.listen",
            format!("{text:?} is not an address to listen on (expected host:port, e.g. {DEFAULT_LISTEN})"),
        );
        return None;
    };
    if let Some(url) = &public_url
        && !(url.starts_with("https://") || url.starts_with("http://"))
    {
        source.error(
            "web.public_url",
            format!("{url:?} must be the https:// address the chat is served at"),
        );
        return None;
    }
    if !listen.ip().is_loopback()
        && !public_url
            .as_deref()
            .is_some_and(|u| u.starts_with("https://"))
    {
        source.error(
            "web.listen",
            format!("{listen} is reachable from other machines, and the web chat runs commands on this one: keep it on 127.0.0.1, or put a TLS terminator in front and set web.public_url to its https:// address (docs/web-chat.md)"),
        );
        return None;
    }
    let Some(home) = source.home().map(|h| h.to_path_buf()) else {
        source.error(
            "platforms.web.enabled",
            "the web chat needs the gateway's home for its login token".into(),
        );
        return None;
    };
    let token = match crate::token::read(&home) {
        Ok(token) => token,
        Err(e) => {
            source.error("web-token", e.to_string());
            return None;
        }
    };
    Some(Box::new(WebSettings {
        listen,
        public_url,
        token,
        home,
        common: Common {
            access: Access {
                allowed: vec![OPERATOR.to_owned()],
                allow_all: false,
            },
            require_mention: false,
            home_channel: None,
        },
    }))
}

impl PlatformSettings for WebSettings {
    fn platform(&self) -> Platform {
        Platform::Web
    }

    fn own_listener(&self) -> Option<std::net::SocketAddr> {
        Some(self.listen)
    }

    fn common(&self) -> &Common {
        &self.common
    }

    fn describe(&self) -> Vec<(String, String)> {
        vec![
            ("listen".into(), self.listen.to_string()),
            ("url".into(), self.base_url()),
            (
                "login token".into(),
                // Masked, and so a token rotated since shows as a change to reload.
                match &self.token {
                    Some(token) => format!(
                        "{} in web-token (`hermes-gateway web-url` prints the address)",
                        mask(token)
                    ),
                    None => "made at the first start".into(),
                },
            ),
        ]
    }

    fn address(&self) -> Option<String> {
        Some(self.base_url())
    }

    fn build(&self) -> Result<Arc<dyn Adapter>, AdapterError> {
        Ok(Arc::new(WebAdapter::new(self)?))
    }
}
