//! WhatsApp Cloud API settings, with Hermes' names: `WHATSAPP_CLOUD_ACCESS_TOKEN`,
//! `WHATSAPP_CLOUD_PHONE_NUMBER_ID`, `WHATSAPP_CLOUD_APP_SECRET` (webhook signatures),
//! `WHATSAPP_CLOUD_VERIFY_TOKEN` (the subscription handshake), `WHATSAPP_CLOUD_API_VERSION`,
//! `WHATSAPP_CLOUD_ALLOWED_USERS` / `WHATSAPP_CLOUD_ALLOW_ALL_USERS`,
//! `WHATSAPP_CLOUD_HOME_CHANNEL`, `WHATSAPP_CLOUD_WEBHOOK_PATH`,
//! `WHATSAPP_CLOUD_REENGAGE_TEMPLATE`, and `platforms.whatsapp_cloud.{enabled,
//! extra.graph_base_url}`. (`WHATSAPP_CLOUD_WEBHOOK_HOST` / `_PORT` choose the daemon's HTTP
//! address and are read with `http.listen`.)

use std::sync::Arc;

use hermes_adapter::{
    Access, Adapter, AdapterError, Common, Platform, PlatformSettings, SettingsSource, http_root,
    mask,
};

use crate::WhatsAppAdapter;

/// Meta's Graph API root.
pub const DEFAULT_GRAPH_BASE: &str = "https://graph.facebook.com";
/// The Graph API version calls go to unless `WHATSAPP_CLOUD_API_VERSION` says otherwise.
pub const DEFAULT_API_VERSION: &str = "v26.0";
/// Where Meta posts events unless `WHATSAPP_CLOUD_WEBHOOK_PATH` says otherwise.
pub const DEFAULT_WEBHOOK_PATH: &str = "/whatsapp/webhook";
/// A template's language when `WHATSAPP_CLOUD_REENGAGE_TEMPLATE` names none (`name:lang`).
const DEFAULT_TEMPLATE_LANGUAGE: &str = "en_US";

/// An approved message template (sent when the 24-hour window has closed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template {
    pub name: String,
    pub language: String,
}

/// What the WhatsApp adapter needs.
#[derive(Clone)]
pub struct WhatsAppSettings {
    pub access_token: String,
    /// The business phone number the bot speaks as (Meta's id for it, not the number).
    pub phone_number_id: String,
    /// Signs Meta's webhook deliveries; without it the webhook refuses everything (503).
    pub app_secret: Option<String>,
    /// What Meta's subscription handshake must present.
    pub verify_token: Option<String>,
    pub api_version: String,
    /// `https://graph.facebook.com`, or a fake in tests.
    pub graph_base_url: String,
    pub webhook_path: String,
    pub reengage_template: Option<Template>,
    /// Who may talk to it, the mention rule (none: the Cloud API has direct conversations
    /// only), the home channel.
    pub common: Common,
}

impl std::fmt::Debug for WhatsAppSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WhatsAppSettings")
            .field("access_token", &mask(&self.access_token))
            .field("phone_number_id", &self.phone_number_id)
            .field("graph_base_url", &self.graph_base_url)
            .field("api_version", &self.api_version)
            .finish_non_exhaustive()
    }
}

/// WhatsApp's settings, or `None` when it is not enabled (no token and phone number id, or
/// `platforms.whatsapp_cloud.enabled: false`). Problems are reported against their key.
pub fn settings(source: &mut dyn SettingsSource) -> Option<Box<dyn PlatformSettings>> {
    let enabled = source.boolean("platforms.whatsapp_cloud.enabled");
    let token = source
        .string("platforms.whatsapp_cloud.token")
        .or_else(|| source.var("WHATSAPP_CLOUD_ACCESS_TOKEN"));
    let phone_number_id = source
        .var("WHATSAPP_CLOUD_PHONE_NUMBER_ID")
        .or_else(|| source.string("platforms.whatsapp_cloud.extra.phone_number_id"));
    let app_secret = source.var("WHATSAPP_CLOUD_APP_SECRET");
    let verify_token = source.var("WHATSAPP_CLOUD_VERIFY_TOKEN");
    let api_version = source
        .var("WHATSAPP_CLOUD_API_VERSION")
        .or_else(|| source.string("platforms.whatsapp_cloud.extra.api_version"));
    let base_url = source.string("platforms.whatsapp_cloud.extra.graph_base_url");
    let webhook_path = source
        .var("WHATSAPP_CLOUD_WEBHOOK_PATH")
        .or_else(|| source.string("platforms.whatsapp_cloud.extra.webhook_path"));
    let template = source.var("WHATSAPP_CLOUD_REENGAGE_TEMPLATE");
    let home_channel = Common::read_home_channel(source, "WHATSAPP_CLOUD", "whatsapp_cloud")
        .map(|number| phone_digits(&number));
    let mut access = Access::read(source, "WHATSAPP_CLOUD");
    // People write numbers as `+1 555-000 0001`; Meta names them `15550000001`.
    access.allowed = access.allowed.iter().map(|n| phone_digits(n)).collect();

    if !enabled.unwrap_or(token.is_some() && phone_number_id.is_some()) {
        return None;
    }
    let (Some(access_token), Some(phone_number_id)) = (token, phone_number_id) else {
        source.error(
            "WHATSAPP_CLOUD_ACCESS_TOKEN",
            "WhatsApp is enabled but WHATSAPP_CLOUD_ACCESS_TOKEN and WHATSAPP_CLOUD_PHONE_NUMBER_ID are not both set (Meta's app dashboard → WhatsApp → API Setup)".into(),
        );
        return None;
    };
    if !phone_number_id.chars().all(|c| c.is_ascii_digit()) {
        source.error(
            "WHATSAPP_CLOUD_PHONE_NUMBER_ID",
            format!("{phone_number_id:?} is not a phone number id (Meta's numeric id for the number, shown under API Setup, not the phone number itself)"),
        );
        return None;
    }
    if app_secret.is_none() {
        source.warning(
            "WHATSAPP_CLOUD_APP_SECRET",
            "not set: Meta's webhook deliveries cannot be verified, so the webhook answers 503 and no message comes in (App settings → Basic → App secret)".into(),
        );
    }
    if verify_token.is_none() {
        source.warning(
            "WHATSAPP_CLOUD_VERIFY_TOKEN",
            "not set: Meta's webhook subscription handshake will be refused (choose any string and enter the same in the app dashboard)".into(),
        );
    }
    let api_version = match api_version.map(|v| v.trim().to_owned()) {
        None => DEFAULT_API_VERSION.to_owned(),
        Some(v) if is_version(&v) => v,
        Some(v) => {
            source.error(
                "WHATSAPP_CLOUD_API_VERSION",
                format!("{v:?} is not a Graph API version (like {DEFAULT_API_VERSION})"),
            );
            return None;
        }
    };
    let graph_base_url = match base_url {
        None => DEFAULT_GRAPH_BASE.to_owned(),
        Some(url) => match http_root(&url) {
            Ok(root) => root,
            Err(e) => {
                source.error("platforms.whatsapp_cloud.extra.graph_base_url", e);
                return None;
            }
        },
    };
    if graph_base_url.starts_with("http://") && !is_loopback(&graph_base_url) {
        source.warning(
            "platforms.whatsapp_cloud.extra.graph_base_url",
            "is plain http to another host: the access token crosses the network unencrypted"
                .into(),
        );
    }
    let webhook_path = webhook_path.unwrap_or_else(|| DEFAULT_WEBHOOK_PATH.to_owned());
    if let Err(why) = check_path(&webhook_path) {
        source.error("WHATSAPP_CLOUD_WEBHOOK_PATH", why);
        return None;
    }
    let reengage_template = template.and_then(|t| parse_template(&t));
    Some(Box::new(WhatsAppSettings {
        access_token,
        phone_number_id,
        app_secret,
        verify_token,
        api_version,
        graph_base_url,
        webhook_path,
        reengage_template,
        common: Common {
            access,
            require_mention: false,
            home_channel,
        },
    }))
}

impl PlatformSettings for WhatsAppSettings {
    fn platform(&self) -> Platform {
        Platform::WhatsApp
    }

    fn credential(&self) -> Option<&str> {
        Some(&self.phone_number_id)
    }

    fn needs_http(&self) -> bool {
        true
    }

    fn common(&self) -> &Common {
        &self.common
    }

    fn describe(&self) -> Vec<(String, String)> {
        let shown =
            |s: &Option<String>| s.as_deref().map(mask).unwrap_or_else(|| "(not set)".into());
        vec![
            ("access_token".into(), mask(&self.access_token)),
            ("phone_number_id".into(), self.phone_number_id.clone()),
            (
                "app_secret".into(),
                match &self.app_secret {
                    Some(secret) => mask(secret),
                    None => "(not set: the webhook answers 503)".into(),
                },
            ),
            ("verify_token".into(), shown(&self.verify_token)),
            ("graph_base_url".into(), self.graph_base_url.clone()),
            ("api_version".into(), self.api_version.clone()),
            (
                "webhook".into(),
                format!("GET and POST {} on the HTTP server", self.webhook_path),
            ),
            (
                "reengage_template".into(),
                self.reengage_template
                    .as_ref()
                    .map(|t| format!("{} ({})", t.name, t.language))
                    .unwrap_or_else(|| "(none: replies outside the 24-hour window wait)".into()),
            ),
            self.common.home_channel_line(),
        ]
    }

    fn build(&self) -> Result<Arc<dyn Adapter>, AdapterError> {
        Ok(Arc::new(WhatsAppAdapter::new(self)?))
    }
}

/// A phone number as Meta writes a `wa_id`: its digits only.
pub fn phone_digits(number: &str) -> String {
    let digits: String = number.chars().filter(char::is_ascii_digit).collect();
    if digits.is_empty() {
        number.trim().to_owned()
    } else {
        digits
    }
}

/// A webhook path the daemon's router can take: `/` and letters, digits, `-`, `_`, `.`,
/// and not one of the daemon's own paths.
fn check_path(path: &str) -> Result<(), String> {
    let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '/' | '-' | '_' | '.');
    if !path.starts_with('/') || path.len() < 2 || !path.chars().all(allowed) {
        return Err(format!(
            "{path:?} is not a webhook path (a / then letters, digits, -, _, . and /, like {DEFAULT_WEBHOOK_PATH})"
        ));
    }
    if matches!(path, "/healthz" | "/readyz") || path.starts_with("/slack/") {
        return Err(format!(
            "{path:?} is taken by the daemon itself; choose another"
        ));
    }
    Ok(())
}

/// Whether a URL's host is this machine.
fn is_loopback(url: &str) -> bool {
    url::Url::parse(url).is_ok_and(|u| match u.host() {
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        Some(url::Host::Domain(name)) => name == "localhost",
        None => false,
    })
}

/// `v23.0`-like.
fn is_version(text: &str) -> bool {
    text.strip_prefix('v').is_some_and(|rest| {
        let mut parts = rest.split('.');
        parts.clone().count() == 2
            && parts.all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit()))
    })
}

/// `name` or `name:language`.
fn parse_template(text: &str) -> Option<Template> {
    let text = text.trim();
    if text.is_empty() {
        return None;
    }
    let (name, language) = text
        .split_once(':')
        .unwrap_or((text, DEFAULT_TEMPLATE_LANGUAGE));
    Some(Template {
        name: name.trim().to_owned(),
        language: language.trim().to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_versions_and_templates_read_as_meta_names_them() {
        assert_eq!(phone_digits("+1 (555) 000-0001"), "15550000001");
        assert!(is_version("v23.0"));
        assert!(!is_version("23.0") && !is_version("v23") && !is_version("v2x.0"));
        assert_eq!(
            parse_template("hello_again:de"),
            Some(Template {
                name: "hello_again".into(),
                language: "de".into()
            })
        );
        assert_eq!(parse_template("hi").unwrap().language, "en_US");
        assert_eq!(
            http_root("http://127.0.0.1:9/").unwrap(),
            "http://127.0.0.1:9"
        );
        assert!(is_loopback("http://127.0.0.1:9") && !is_loopback("http://proxy.lan:80"));
        assert!(check_path("/whatsapp/webhook").is_ok());
        for bad in [
            "whatsapp",
            "/",
            "/:x",
            "/*x",
            "/a b",
            "/healthz",
            "/slack/events",
        ] {
            assert!(check_path(bad).is_err(), "{bad}");
        }
        assert!(http_root("file:///x").is_err());
    }
}
