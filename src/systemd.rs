//! What the daemon tells systemd through `sd_notify` (nothing without `NOTIFY_SOCKET`):
//!
//! * `READY=1` once the store is open and every enabled platform has talked to its platform
//!   once, or after [`READY_WAIT`] at the latest: a platform that could not connect is named
//!   in `STATUS=` and does not hold the others back.
//! * `WATCHDOG=1` at half the watchdog period (`WATCHDOG_USEC`), and only while every running
//!   platform has talked to its platform within one period: a loop that is alive but deaf
//!   stops the pings, and systemd restarts the daemon. A platform that refused its
//!   configuration is off and not waited for.
//! * `STATUS=` a one-line summary, kept current.
//! * `STOPPING=1` when shutdown begins ([`stopping`]); `RELOADING=1` when SIGHUP restarts it
//!   in place with a new configuration ([`reloading`]), then `READY=1` again.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hermes_adapter::{Liveness, Platform};
use sd_notify::NotifyState;

use crate::http::LIVE_WITHIN;
use tokio_util::sync::CancellationToken;

/// The longest `READY=1` waits for the platforms to connect.
pub const READY_WAIT: Duration = Duration::from_secs(30);
/// How often the summary is looked at when there is no watchdog.
const STATUS_EVERY: Duration = Duration::from_secs(10);

/// Platforms that refused their configuration: off, not waited for.
pub type Refused = Arc<Mutex<HashMap<Platform, String>>>;

/// Tell systemd how the daemon is doing until `intake` stops (then the daemon says
/// STOPPING itself).
pub async fn run(adapters: Vec<(Platform, Liveness)>, refused: Refused, intake: CancellationToken) {
    if std::env::var_os("NOTIFY_SOCKET").is_none() {
        return;
    }
    let watchdog = sd_notify::watchdog_enabled();
    // A platform counts as deaf after one and a half periods without an answer (Discord
    // heartbeats every ~41 s, Slack and WhatsApp are asked every 30 s).
    let fresh_within = watchdog.map_or(LIVE_WITHIN, |w| w * 3 / 2);
    let running = |refused: &Refused| -> Vec<(Platform, Liveness)> {
        let refused = refused.lock().expect("refused lock");
        adapters
            .iter()
            .filter(|(p, _)| !refused.contains_key(p))
            .cloned()
            .collect()
    };

    // READY=1: every platform connected once, or the wait is over.
    let deadline = tokio::time::Instant::now() + READY_WAIT;
    loop {
        let all_connected = running(&refused)
            .iter()
            .all(|(_, l)| l.since_last_beat().is_some());
        if all_connected || tokio::time::Instant::now() >= deadline {
            break;
        }
        tokio::select! {
            _ = intake.cancelled() => return,
            _ = tokio::time::sleep(Duration::from_millis(100)) => {}
        }
    }
    let mut status = summary(&adapters, &refused, fresh_within);
    RELOADING.store(false, Ordering::SeqCst);
    if watchdog.is_some() {
        send(&[
            NotifyState::Ready,
            NotifyState::Watchdog,
            NotifyState::Status(&status),
        ]);
    } else {
        send(&[NotifyState::Ready, NotifyState::Status(&status)]);
    }
    tracing::info!(status = %status, "systemd: ready");

    let every = watchdog.map_or(STATUS_EVERY, |w| w / 2);
    loop {
        tokio::select! {
            _ = intake.cancelled() => return,
            _ = tokio::time::sleep(every) => {}
        }
        let now = summary(&adapters, &refused, fresh_within);
        if now != status {
            status = now;
            send(&[NotifyState::Status(&status)]);
        }
        if watchdog.is_some() {
            let deaf: Vec<Platform> = running(&refused)
                .iter()
                .filter(|(_, l)| l.since_last_beat().is_none_or(|s| s > fresh_within))
                .map(|(p, _)| *p)
                .collect();
            if deaf.is_empty() {
                send(&[NotifyState::Watchdog]);
            } else {
                tracing::warn!(platforms = ?deaf, "systemd: a platform has not answered within the watchdog period; no watchdog ping (systemd restarts the daemon if this lasts)");
            }
        }
    }
}

/// Set between `RELOADING=1` and the next `READY=1`: the stop in between is a restart in
/// place, not the end.
static RELOADING: AtomicBool = AtomicBool::new(false);

/// Shutdown has begun (unless it is a reload's).
pub fn stopping() {
    if std::env::var_os("NOTIFY_SOCKET").is_some() && !RELOADING.load(Ordering::SeqCst) {
        send(&[NotifyState::Stopping, NotifyState::Status("stopping")]);
    }
}

/// A reload was under way when a stop was asked: it is a stop after all.
pub fn reload_abandoned() {
    RELOADING.store(false, Ordering::SeqCst);
    stopping();
}

/// systemd keeps the watchdog armed through a reload, while the old daemon drains and the
/// new one connects: until the new one says `READY=1`, this pings on its behalf (for the
/// whole process, started once).
pub fn keep_watchdog_during_reloads() {
    let Some(period) = sd_notify::watchdog_enabled() else {
        return;
    };
    if std::env::var_os("NOTIFY_SOCKET").is_none() {
        return;
    }
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(period / 2).await;
            if RELOADING.load(Ordering::SeqCst) {
                send(&[NotifyState::Watchdog]);
            }
        }
    });
}

/// A reload has begun: the daemon stops and starts again with the new configuration, and
/// says `READY=1` when it is back.
pub fn reloading() {
    RELOADING.store(true, Ordering::SeqCst);
    if std::env::var_os("NOTIFY_SOCKET").is_some() {
        send(&[
            NotifyState::Reloading,
            NotifyState::Status("reloading the configuration"),
        ]);
    }
}

/// One line: each platform and whether it is live.
fn summary(adapters: &[(Platform, Liveness)], refused: &Refused, fresh_within: Duration) -> String {
    let refused = refused.lock().expect("refused lock").clone();
    let parts: Vec<String> = adapters
        .iter()
        .map(|(platform, liveness)| {
            if let Some(why) = refused.get(platform) {
                return format!("{platform} off ({why})");
            }
            match liveness.since_last_beat() {
                None => format!("{platform} not connected"),
                Some(s) if s > fresh_within => {
                    format!("{platform} silent for {} s", s.as_secs())
                }
                Some(_) => format!("{platform} live"),
            }
        })
        .collect();
    if parts.is_empty() {
        "running, no platform enabled".to_owned()
    } else {
        parts.join(", ")
    }
}

fn send(states: &[NotifyState]) {
    if let Err(e) = sd_notify::notify(states) {
        tracing::warn!(error = %e, "systemd: cannot write to NOTIFY_SOCKET");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_names_each_platform_and_its_state() {
        let live = Liveness::default();
        live.beat();
        let refused: Refused = Arc::default();
        refused
            .lock()
            .unwrap()
            .insert(Platform::Slack, "configuration refused".into());
        let adapters = vec![
            (Platform::Telegram, live),
            (Platform::Discord, Liveness::default()),
            (Platform::Slack, Liveness::default()),
        ];
        assert_eq!(
            summary(&adapters, &refused, Duration::from_secs(60)),
            "telegram live, discord not connected, slack off (configuration refused)"
        );
    }
}
