//! The daemon's side of `/restart` and `/platform` ([`crate::session::Operator`]): a
//! restart is remembered in the store (whom to tell once back) and then stops intake, and
//! [`super::run`] ends with [`super::Exit::Restart`] for the caller to start it again; a
//! pause flips the platform's switch its supervisor watches (`adapters::supervise`) and is
//! said where systemd's status and `/platform list` read which platforms are off.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use hermes_adapter::{ChatRef, Liveness, Platform};
use serde::{Deserialize, Serialize};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::http::LIVE_WITHIN;
use crate::store::Store;

/// Where the chat to tell after a restart is remembered (`adapter_memory`, as `gateway`).
const RESTART_NOTICE: &str = "restart:notice";
/// How long that is kept: a restart that takes longer tells nobody.
const NOTICE_KEPT: Duration = Duration::from_secs(600);
/// What that chat is told once back.
pub(super) const BACK: &str = "♻ Gateway restarted successfully. Your session continues.";

/// The chat that asked for a restart, and its command.
#[derive(Serialize, Deserialize)]
pub(super) struct Asked {
    pub chat: ChatRef,
    pub message_id: String,
}

pub(super) struct DaemonOperator {
    pub store: Store,
    /// The daemon's intake: a restart stops it.
    pub intake: CancellationToken,
    /// Set when the stop is a restart.
    pub restart: Arc<AtomicBool>,
    /// Each platform's pause switch (`true`: paused).
    pub switches: HashMap<Platform, watch::Sender<bool>>,
    pub livenesses: Vec<(Platform, Liveness)>,
    /// The platforms that are off, with why (also systemd's status).
    pub off: crate::systemd::Refused,
    /// This gateway tells systemd how the process is doing (see `Serving`).
    pub speaks_for_process: bool,
}

impl DaemonOperator {
    fn platform(&self, name: &str) -> Result<Platform, String> {
        let platform = Platform::parse(name).ok_or_else(|| format!("Unknown platform: {name}"))?;
        if !self.switches.contains_key(&platform) {
            return Err(format!("{platform} is not enabled here."));
        }
        Ok(platform)
    }
}

impl crate::session::Operator for DaemonOperator {
    fn restart(&self, chat: &ChatRef, message_id: &str) {
        let asked = Asked {
            chat: chat.clone(),
            message_id: message_id.to_owned(),
        };
        let (store, intake, restart) = (
            self.store.clone(),
            self.intake.clone(),
            self.restart.clone(),
        );
        let speaks_for_process = self.speaks_for_process;
        tokio::spawn(async move {
            let value = serde_json::to_string(&asked).unwrap_or_default();
            let kept = NOTICE_KEPT.as_millis() as i64;
            if let Err(e) = store.remember("gateway", RESTART_NOTICE, value, kept).await {
                tracing::warn!(error = %e, "restart: whom to tell once back is not kept; restarting anyway");
            }
            restart.store(true, Ordering::SeqCst);
            // systemd hears a reload, not a stop (from the gateway that speaks for the
            // process; another profile's restart is its own business).
            if speaks_for_process {
                crate::systemd::reloading();
            }
            intake.cancel();
        });
    }

    fn platforms(&self) -> Vec<(String, String)> {
        let off = self.off.lock().expect("off lock").clone();
        self.livenesses
            .iter()
            .map(|(platform, liveness)| {
                let state = match off.get(platform) {
                    Some(why) if why == "paused" => {
                        format!("PAUSED. Resume with `/platform resume {platform}`.")
                    }
                    Some(why) => format!("off ({why})"),
                    None => match liveness.since_last_beat() {
                        None => "not connected".to_owned(),
                        Some(s) if s > LIVE_WITHIN => format!("silent for {} s", s.as_secs()),
                        Some(_) => "connected".to_owned(),
                    },
                };
                (platform.to_string(), state)
            })
            .collect()
    }

    fn pause(&self, name: &str) -> Result<(), String> {
        let platform = self.platform(name)?;
        let mut off = self.off.lock().expect("off lock");
        match off.get(&platform) {
            Some(why) if why == "paused" => return Err(format!("{platform} is already paused.")),
            Some(why) => return Err(format!("{platform} is off already ({why}).")),
            None => {}
        }
        off.insert(platform, "paused".into());
        self.switches[&platform].send_replace(true);
        tracing::info!(%platform, "platform paused from the chat");
        Ok(())
    }

    fn resume(&self, name: &str) -> Result<(), String> {
        let platform = self.platform(name)?;
        let mut off = self.off.lock().expect("off lock");
        if off.get(&platform).is_none_or(|why| why != "paused") {
            return Err(format!("{platform} is not paused — nothing to resume."));
        }
        off.remove(&platform);
        self.switches[&platform].send_replace(false);
        tracing::info!(%platform, "platform resumed from the chat");
        Ok(())
    }
}

/// The chat that asked for the restart this start follows, once (forgotten as it is read).
pub(super) async fn asked_before_restart(store: &Store) -> Option<Asked> {
    let value = store.recall("gateway", RESTART_NOTICE).await.ok()??;
    let _ = store
        .remember("gateway", RESTART_NOTICE, String::new(), 0)
        .await;
    serde_json::from_str(&value).ok()
}
