//! The platforms this build speaks: one line each, behind its cargo feature. Everything
//! else about a platform (its settings, its adapter) lives in its crate.

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
    let _ = &source; // a build with no platform features reads nothing
    platforms
}
