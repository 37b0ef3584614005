//! The platforms this build speaks: one line each, behind its cargo feature. Everything
//! else about a platform (its settings, its adapter) lives in its crate.

use std::path::Path;

use hermes_adapter::{PlatformSettings, SettingsSource};

/// The settings of every enabled platform this build has.
pub fn read_settings(source: &mut dyn SettingsSource) -> Vec<Box<dyn PlatformSettings>> {
    let mut platforms = Vec::new();
    #[cfg(feature = "telegram")]
    platforms.extend(hermes_telegram::settings(source));
    #[cfg(feature = "discord")]
    platforms.extend(hermes_discord::settings(source));
    #[cfg(feature = "slack")]
    platforms.extend(hermes_slack::settings(source));
    #[cfg(feature = "whatsapp")]
    platforms.extend(hermes_whatsapp::settings(source));
    #[cfg(feature = "web")]
    platforms.extend(hermes_web::settings(source));
    let _ = &source; // a build with no platform features reads nothing
    platforms
}

/// The address that logs a browser into the web chat served at `base`, with the login
/// token in `home` (made if there is none yet; `rotate`: replaced by a new one, which logs
/// every browser out), and whether the token is new. `None` in a build without the web
/// chat.
pub fn web_login(home: &Path, base: &str, rotate: bool) -> Option<std::io::Result<(String, bool)>> {
    #[cfg(feature = "web")]
    {
        use hermes_web::token;
        let made = if rotate {
            token::rotate(home).map(|t| (t, true))
        } else {
            token::read(home).and_then(|had| Ok((token::ensure(home)?, had.is_none())))
        };
        Some(made.map(|(token, new)| (token::login_url(base, &token), new)))
    }
    #[cfg(not(feature = "web"))]
    {
        let _ = (home, base, rotate);
        None
    }
}
