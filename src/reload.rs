//! Signals while the daemon runs: SIGTERM and SIGINT stop it; SIGHUP (`systemctl reload`)
//! reads `config.yaml` and `.env` again. A new configuration with errors is refused, with
//! the reason in the log, and the running one stays; a good one is applied by stopping the
//! daemon (its drain: nothing is lost, open work resumes) and starting it again with the new
//! configuration in the same process, after the log says which sections changed.

use std::path::PathBuf;

use tokio_util::sync::CancellationToken;

use crate::config::{self, Config};

/// What ended the daemon's run.
pub enum Next {
    /// Stop for good (SIGTERM, SIGINT, or the daemon stopped by itself).
    Stop,
    /// Start again with this configuration.
    Reload(Box<Config>),
}

/// Wait for signals on behalf of the daemon running with `current`, cancelling `shutdown`
/// when it must stop.
pub async fn watch(home: PathBuf, current: Config, shutdown: CancellationToken) -> Next {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut int), Ok(mut hup)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
        signal(SignalKind::hangup()),
    ) else {
        tracing::error!("cannot listen for signals; stopping on Ctrl-C only");
        tokio::select! {
            _ = tokio::signal::ctrl_c() => shutdown.cancel(),
            _ = shutdown.cancelled() => {}
        }
        return Next::Stop;
    };
    loop {
        tokio::select! {
            _ = term.recv() => break,
            _ = int.recv() => break,
            _ = shutdown.cancelled() => return Next::Stop,
            _ = hup.recv() => {
                if let Some(new) = read_again(&home, &current).await {
                    crate::systemd::reloading();
                    shutdown.cancel();
                    return Next::Reload(Box::new(new));
                }
            }
        }
    }
    shutdown.cancel();
    Next::Stop
}

/// The configuration as it reads now, if it can run; else `None`, with why in the log.
async fn read_again(home: &std::path::Path, current: &Config) -> Option<Config> {
    tracing::info!("SIGHUP: reading config.yaml and .env again");
    let dir = home.to_path_buf();
    let loaded = match tokio::task::spawn_blocking(move || config::load(&dir)).await {
        Ok(loaded) => loaded,
        Err(e) => {
            tracing::error!(error = %e, "reload: reading the configuration failed; the running one stays");
            return None;
        }
    };
    loaded.remember_secrets();
    for problem in &loaded.problems {
        tracing::warn!("reload: {problem}");
    }
    let Some(new) = loaded.config else {
        tracing::error!(
            "reload refused: the new configuration has errors (above; `hermes-gateway check-config` explains them); the running one stays"
        );
        return None;
    };
    if !new.has_platform() {
        tracing::error!(
            "reload refused: the new configuration enables no chat platform; the running one stays"
        );
        return None;
    }
    let changed = changed_sections(current, &new);
    if changed.is_empty() {
        tracing::info!("reload: nothing changed; the gateway keeps running as it is");
        return None;
    }
    tracing::info!(changed = %changed.join(", "), "reload: restarting the gateway with the new configuration");
    Some(new)
}

/// The sections of the configuration that differ (names only: values may be secret).
pub fn changed_sections(old: &Config, new: &Config) -> Vec<String> {
    let mut changed = Vec::new();
    let mut compare = |name: &str, a: String, b: String| {
        if a != b {
            changed.push(name.to_owned());
        }
    };
    compare(
        "model",
        format!("{:?}", old.model),
        format!("{:?}", new.model),
    );
    compare(
        "auxiliary.vision",
        format!("{:?}", old.vision),
        format!("{:?}", new.vision),
    );
    compare(
        "agent",
        format!("{:?}", old.agent),
        format!("{:?}", new.agent),
    );
    compare(
        "display.busy_input_mode",
        format!("{:?}", old.busy_mode),
        format!("{:?}", new.busy_mode),
    );
    compare(
        "terminal",
        format!("{:?}", old.terminal),
        format!("{:?}", new.terminal),
    );
    compare(
        "access (allowlists)",
        format!("{:?}", old.access),
        format!("{:?}", new.access),
    );
    compare(
        "sessions",
        format!("{:?}", old.sessions),
        format!("{:?}", new.sessions),
    );
    compare(
        "delivery",
        format!("{:?}", old.delivery),
        format!("{:?}", new.delivery),
    );
    compare("http", format!("{:?}", old.http), format!("{:?}", new.http));
    compare(
        "approvals",
        format!("{:?}", old.approvals),
        format!("{:?}", new.approvals),
    );
    compare(
        "processes",
        format!("{:?}", old.processes),
        format!("{:?}", new.processes),
    );
    // Each platform as what `check-config` shows of it (secrets masked) and its access.
    let platforms = |c: &Config| -> Vec<(String, String)> {
        c.platforms
            .iter()
            .map(|p| {
                let seen = format!("{:?} {:?}", p.describe(), p.access());
                (p.platform().to_string(), seen)
            })
            .collect()
    };
    let (before, after) = (platforms(old), platforms(new));
    for (name, seen) in &after {
        match before.iter().find(|(n, _)| n == name) {
            None => changed.push(format!("platforms.{name} (enabled)")),
            Some((_, was)) if was != seen => changed.push(format!("platforms.{name}")),
            Some(_) => {}
        }
    }
    for (name, _) in &before {
        if !after.iter().any(|(n, _)| n == name) {
            changed.push(format!("platforms.{name} (disabled)"));
        }
    }
    changed
}
