//! The daemon's life in this process: signals, stops and reloads. SIGTERM and SIGINT stop
//! it (drained: see `daemon::shut_down`). SIGHUP (`systemctl reload`) reads `config.yaml`
//! and `.env` again: a configuration with errors is refused, with the reason in the log,
//! and the running one stays; a good one is applied by draining the daemon and starting it
//! again in this process. If the new configuration then fails to start (its tokens
//! refused, its address taken), the previous one is started again. The signal streams live
//! as long as the process, so a stop that arrives during a reload's drain is not lost: it
//! turns the reload into a stop.

use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use tokio_util::sync::CancellationToken;

use crate::config::{self, Config};
use crate::daemon::{self, Exit};
use crate::secrets;

/// EX_CONFIG: configuration problem; systemd units list it in RestartPreventExitStatus.
pub const EXIT_CONFIG: u8 = 78;

/// What a signal asks for.
enum Asked {
    Stop,
    Reload,
}

/// The process's signal streams, made once.
struct Signals {
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
    hup: tokio::signal::unix::Signal,
}

impl Signals {
    fn new() -> std::io::Result<Signals> {
        use tokio::signal::unix::{SignalKind, signal};
        Ok(Signals {
            term: signal(SignalKind::terminate())?,
            int: signal(SignalKind::interrupt())?,
            hup: signal(SignalKind::hangup())?,
        })
    }

    async fn next(&mut self) -> Asked {
        tokio::select! {
            _ = self.term.recv() => Asked::Stop,
            _ = self.int.recv() => Asked::Stop,
            _ = self.hup.recv() => Asked::Reload,
        }
    }
}

/// Run the daemon with `config` from `home` until it is stopped, applying reloads.
pub async fn run(home: PathBuf, config: Config) -> ExitCode {
    run_until(home, config, CancellationToken::new()).await
}

/// The same, stopped also when `stop` is cancelled (the process's other gateways end it:
/// see `profiles::serve`).
pub async fn run_until(home: PathBuf, mut config: Config, stop: CancellationToken) -> ExitCode {
    let mut signals = match Signals::new() {
        Ok(signals) => signals,
        Err(e) => {
            eprintln!("hermes-gateway: cannot listen for signals: {e}");
            return ExitCode::FAILURE;
        }
    };
    // One gateway tells systemd about the process (the others are profiles beside it).
    let speaks = config.serving.speaks_for_process;
    if speaks {
        crate::systemd::keep_watchdog_during_reloads();
    }
    let mut files = fingerprint(&home);
    // The configuration that ran before a reload, to go back to if the new one fails.
    let mut previous: Option<(Config, u64)> = None;
    loop {
        let intake = CancellationToken::new();
        let running = daemon::run(config.clone(), intake.clone());
        tokio::pin!(running);
        let mut next: Option<(Config, u64)> = None;
        let mut stop_asked = false;
        let exit = loop {
            tokio::select! {
                exit = &mut running => break exit,
                _ = stop.cancelled(), if !stop_asked => {
                    stop_asked = true;
                    next = None;
                    intake.cancel();
                }
                asked = signals.next() => match asked {
                    Asked::Stop => {
                        stop_asked = true;
                        if next.take().is_some() {
                            tracing::warn!("a stop was asked during the reload: stopping instead");
                            if speaks {
                                crate::systemd::reload_abandoned();
                            }
                        }
                        intake.cancel();
                    }
                    Asked::Reload if intake.is_cancelled() => {
                        tracing::info!("SIGHUP while stopping: ignored");
                    }
                    Asked::Reload => {
                        if let Some(new) = read_again(&home, &config, files, false).await {
                            if speaks {
                                crate::systemd::reloading();
                            }
                            next = Some(new);
                            intake.cancel();
                        }
                    }
                },
            }
        };
        let failed = match exit {
            Ok(Exit::Stopped) => None,
            // From a chat: the configuration as it reads now, else the one that ran.
            Ok(Exit::Restart) if stop_asked => {
                if speaks {
                    crate::systemd::reload_abandoned();
                }
                None
            }
            Ok(Exit::Restart) => {
                if next.is_none() {
                    next = Some(
                        read_again(&home, &config, files, true)
                            .await
                            .unwrap_or_else(|| (config.clone(), files)),
                    );
                }
                None
            }
            Ok(Exit::ConfigRejected(why)) => Some((EXIT_CONFIG, why)),
            Err(e) => Some((1, format!("{e:#}"))),
        };
        match (failed, next, previous.take()) {
            (None, Some((new, new_files)), _) => {
                previous = Some((std::mem::replace(&mut config, new), files));
                files = new_files;
            }
            (None, None, _) => return ExitCode::SUCCESS,
            (Some((_, why)), _, Some((old, old_files))) => {
                tracing::error!(
                    error = %secrets::scrub(&why),
                    "reload: the new configuration did not start; going back to the previous one"
                );
                // What the new one would have held is the previous one's again.
                old.serving.held.set(old.serving.name(), Some(old.holds()));
                if speaks {
                    crate::systemd::reloading();
                }
                config = old;
                files = old_files;
            }
            (Some((code, why)), _, None) => {
                eprintln!("hermes-gateway: {}", secrets::scrub(&why));
                return ExitCode::from(code);
            }
        }
    }
}

/// A fingerprint of `config.yaml` and `.env` as they are on disk (so a rotated secret,
/// which the logged sections cannot show, still counts as a change).
fn fingerprint(home: &Path) -> u64 {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    // The web chat's login token too: a rotated one is a change to apply.
    for name in ["config.yaml", ".env", "web-token"] {
        std::fs::read(home.join(name))
            .unwrap_or_default()
            .hash(&mut hasher);
    }
    hasher.finish()
}

/// The configuration as it reads now, with its fingerprint, if it can run and differs
/// from `current` (or, for a `restart`, even when it does not); else `None`, with why in
/// the log.
async fn read_again(
    home: &Path,
    current: &Config,
    files: u64,
    restart: bool,
) -> Option<(Config, u64)> {
    tracing::info!(restart, "reading config.yaml and .env again");
    let dir = home.to_path_buf();
    let (loaded, new_files) = match tokio::task::spawn_blocking(move || {
        (config::load(&dir), fingerprint(&dir))
    })
    .await
    {
        Ok(read) => read,
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
    // Its place among the process's gateways stays; which profiles run is decided at start,
    // and what the others hold stays theirs.
    let mut new = new;
    new.serving = current.serving.clone();
    match new.take_place() {
        Ok(said) => {
            for line in said {
                tracing::warn!("reload: {line}");
            }
        }
        Err(why) => {
            tracing::error!("reload refused: {why}; the running configuration stays");
            return None;
        }
    }
    if new.multiplex_profiles != current.multiplex_profiles {
        tracing::warn!(
            "reload: multiplex_profiles changed; the profiles served change at the next start"
        );
    }
    if !new.has_platform() {
        tracing::error!(
            "reload refused: the new configuration enables no chat platform; the running one stays"
        );
        return None;
    }
    if current.model.is_chosen() && !new.model.is_chosen() {
        tracing::error!(
            "reload refused: the new configuration names no model (model.default); the running one stays"
        );
        return None;
    }
    let mut changed = changed_sections(current, &new);
    if changed.is_empty() && new_files != files {
        changed.push("values not shown (a secret, or a setting not listed)".into());
    }
    if changed.is_empty() && !restart {
        tracing::info!("reload: nothing changed; the gateway keeps running as it is");
        return None;
    }
    tracing::info!(changed = %changed.join(", "), "reload: restarting the gateway with the new configuration");
    Some((new, new_files))
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
