//! Several gateways in one process (Hermes' `gateway.multiplex_profiles`): the home the
//! process was started with, and every profile under its `profiles/` directory, each a
//! gateway of its own (its configuration and `.env`, bots, model, personality, memory,
//! allowlists, pairings, store and agent), run side by side, each stopped and reloaded
//! with the process's signals.
//!
//! Nothing is shared but the process. Each gateway's agent finds the other homes hidden as
//! its own is (`Serving::other_homes`: the confinement covers them, the file tools refuse
//! them, no file of theirs is sent to a chat), and a profile's commands work in its own
//! `workspace` unless it names a place of its own. One gateway speaks to systemd, and the
//! process lives as long as that one. What one profile holds is refused to the others, at
//! start and at every reload, with why: a bot (one token cannot be polled twice), a
//! PostgreSQL store (conversations would mix), an HTTP address.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::config::{self, Config, Holdings, Serving};
use crate::secrets;

/// The default profile's name (the home the process was started with).
pub const DEFAULT: &str = "default";

/// One gateway of the process.
pub struct Profile {
    pub name: String,
    pub home: PathBuf,
    pub config: Config,
}

/// The profiles under `root/profiles/`, by name: directories named as Hermes names them
/// (`[a-z0-9][a-z0-9_-]{0,63}`, not `default`). Nothing needs registering.
pub fn discover(root: &Path) -> Vec<(String, PathBuf)> {
    let Ok(entries) = std::fs::read_dir(root.join("profiles")) else {
        return Vec::new();
    };
    let mut found: Vec<(String, PathBuf)> = entries
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter_map(|e| {
            let name = e.file_name().to_str()?.to_owned();
            valid_name(&name).then(|| (name, e.path()))
        })
        .collect();
    found.sort();
    found
}

fn valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    let first_ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    first_ok
        && name.len() <= 64
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-')
        && name != DEFAULT
}

/// The gateways to run: the default (when it enables a platform) and each profile whose
/// configuration can run, each told its place (`Serving`). What is left out is said on
/// standard error, as a start's configuration problems are.
pub fn gather(root: &Path, default: Config) -> Vec<Profile> {
    let mut profiles = vec![Profile {
        name: DEFAULT.into(),
        home: root.to_path_buf(),
        config: default,
    }];
    for (name, home) in discover(root) {
        let loaded = config::load(&home);
        loaded.remember_secrets();
        for problem in &loaded.problems {
            eprintln!(
                "hermes-gateway: profile {name}: {}",
                secrets::scrub(&problem.to_string())
            );
        }
        match loaded.config {
            Some(config) => profiles.push(Profile { name, home, config }),
            None => eprintln!(
                "hermes-gateway: profile {name} is not started: its configuration has errors (above; `hermes-gateway check-config --home {}` explains them)",
                home.display()
            ),
        }
    }
    take_places(root, profiles)
}

/// Each profile in turn takes its place (the default first, then by name): it keeps off
/// what the ones before it hold (`Config::take_place`: a bot served already is dropped, a
/// PostgreSQL store, or an HTTP address its webhooks need, leaves it out) and holds the
/// rest, which the later ones and every reload keep off in turn; one enabling no platform
/// then is not started. Each is told the homes it must keep out of (the root's, which holds
/// every profile, and each other profile's); a profile whose commands would work in the
/// daemon's `$HOME` or another gateway's home works in its own `workspace`; the first that
/// runs speaks to systemd.
fn take_places(root: &Path, profiles: Vec<Profile>) -> Vec<Profile> {
    let homes: Vec<PathBuf> = profiles.iter().map(|p| p.home.clone()).collect();
    let person_home = std::env::var_os("HOME").map(PathBuf::from);
    let held = Holdings::default();
    let mut kept: Vec<Profile> = Vec::new();
    for mut profile in profiles {
        let mut others: Vec<PathBuf> = homes
            .iter()
            .filter(|h| **h != profile.home)
            .cloned()
            .collect();
        if profile.home != root && !others.iter().any(|h| h == root) {
            others.insert(0, root.to_path_buf());
        }
        let cwd = &profile.config.terminal.cwd;
        let shared_cwd = !cwd.starts_with(&profile.home)
            && (Some(cwd) == person_home.as_ref() || others.iter().any(|h| cwd.starts_with(h)));
        profile.config.serving = Serving {
            profile: (profile.name != DEFAULT).then(|| profile.name.clone()),
            other_homes: others,
            speaks_for_process: false,
            works_apart: profile.name != DEFAULT && shared_cwd,
            held: held.clone(),
        };
        match profile.config.take_place() {
            Ok(said) => {
                for line in said {
                    eprintln!("hermes-gateway: profile {}: {line}", profile.name);
                }
            }
            Err(why) => {
                eprintln!(
                    "hermes-gateway: profile {} is not started: {why}",
                    profile.name
                );
                continue;
            }
        }
        if !profile.config.has_platform() {
            if profile.name != DEFAULT {
                eprintln!(
                    "hermes-gateway: profile {} is not started: it enables no chat platform",
                    profile.name
                );
            }
            held.set(profile.config.serving.name(), None);
            continue;
        }
        kept.push(profile);
    }
    if let Some(first) = kept.first_mut() {
        first.config.serving.speaks_for_process = true;
    }
    kept
}

/// Run every gateway until each has stopped (the process's signals reach them all; each
/// reloads its own configuration on SIGHUP). The exit status is the first failure's, else
/// success.
pub async fn serve(profiles: Vec<Profile>) -> ExitCode {
    if profiles.is_empty() {
        eprintln!(
            "hermes-gateway: multiplex_profiles is on, but neither this home nor a profile under its profiles/ enables a chat platform"
        );
        return ExitCode::from(crate::reload::EXIT_CONFIG);
    }
    let names: Vec<&str> = profiles.iter().map(|p| p.name.as_str()).collect();
    tracing::info!(profiles = %names.join(", "), "serving several profiles in this process");
    // The process lives as long as the gateway that speaks to systemd: when it ends, the
    // others are stopped too (systemd would otherwise see a process that stopped
    // reporting, and restart it whole anyway).
    let stop = CancellationToken::new();
    let mut running = tokio::task::JoinSet::new();
    for profile in profiles {
        let span = tracing::info_span!("profile", name = %profile.name);
        let speaks = profile.config.serving.speaks_for_process;
        let held = profile.config.serving.held.clone();
        let (name, stop) = (profile.name.clone(), stop.clone());
        running.spawn(
            async move {
                // However it ends (a panic too), the end of the one that speaks for the
                // process ends the others.
                let _ends_all = speaks.then(|| stop.clone().drop_guard());
                let me = profile.config.serving.name().to_owned();
                let code = crate::reload::run_until(profile.home, profile.config, stop).await;
                // What it held is free again.
                held.set(&me, None);
                (name, code)
            }
            .instrument(span),
        );
    }
    let mut status = ExitCode::SUCCESS;
    while let Some(ended) = running.join_next().await {
        match ended {
            Ok((name, code)) if code != ExitCode::SUCCESS => {
                tracing::error!(profile = %name, "a profile's gateway stopped with an error");
                if status == ExitCode::SUCCESS {
                    status = code;
                }
            }
            Ok(_) => {}
            Err(e) => {
                tracing::error!(error = %e, "a profile's gateway failed");
                status = ExitCode::FAILURE;
            }
        }
    }
    status
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn profiles_are_the_directories_named_as_hermes_names_them() {
        let root = tempfile::tempdir().unwrap();
        for dir in ["work", "home-2", "default", "Caps", "-dash", "a_b"] {
            std::fs::create_dir_all(root.path().join("profiles").join(dir)).unwrap();
        }
        std::fs::write(root.path().join("profiles/file"), "").unwrap();
        let names: Vec<String> = discover(root.path()).into_iter().map(|(n, _)| n).collect();
        assert_eq!(names, ["a_b", "home-2", "work"]);
        assert!(!valid_name(&"x".repeat(65)));
    }

    fn home(dir: &Path, token: &str) {
        std::fs::create_dir_all(dir).unwrap();
        std::fs::write(
            dir.join("config.yaml"),
            "model:\n  provider: custom\n  default: m\n  base_url: http://127.0.0.1:9/v1\n",
        )
        .unwrap();
        std::fs::write(
            dir.join(".env"),
            format!("TELEGRAM_BOT_TOKEN={token}\nTELEGRAM_ALLOWED_USERS=1\n"),
        )
        .unwrap();
    }

    #[test]
    fn each_profile_keeps_out_of_the_others_and_a_bot_is_served_once() {
        let root = tempfile::tempdir().unwrap();
        let root = root.path();
        home(root, "1:ROOT");
        home(&root.join("profiles/alpha"), "2:ALPHA");
        home(&root.join("profiles/beta"), "1:ROOT"); // the default's bot again
        home(&root.join("profiles/gamma"), "3:GAMMA");
        std::fs::write(root.join("profiles/gamma/config.yaml"), "model: [").unwrap();
        let default = config::load(root).config.expect("the default loads");
        let profiles = gather(root, default);
        let names: Vec<&str> = profiles.iter().map(|p| p.name.as_str()).collect();
        // beta lost its only platform (the default's bot); gamma does not load.
        assert_eq!(names, ["default", "alpha"]);
        let (default, alpha) = (&profiles[0].config.serving, &profiles[1].config.serving);
        assert_eq!(default.profile, None);
        assert!(default.speaks_for_process && !alpha.speaks_for_process);
        // The homes of profiles that do not run are kept out of too.
        let (alpha_home, beta_home) = (root.join("profiles/alpha"), root.join("profiles/beta"));
        assert_eq!(default.other_homes, [alpha_home, beta_home.clone()]);
        assert_eq!(alpha.profile.as_deref(), Some("alpha"));
        assert_eq!(alpha.other_homes, [root.to_path_buf(), beta_home]);
        // Both would listen on the default address: the later one goes without.
        assert!(profiles[0].config.http.listen.is_some());
        assert_eq!(profiles[1].config.http.listen, None);
        // Its commands work in its own workspace, not in the daemon's `$HOME`.
        assert_eq!(
            profiles[1].config.terminal.cwd,
            root.join("profiles/alpha/workspace")
        );
    }

    #[test]
    fn a_reload_keeps_off_what_the_other_profiles_hold_now() {
        let root = tempfile::tempdir().unwrap();
        home(root.path(), "1:ROOT");
        let mut config = config::load(root.path()).config.expect("loads");
        let addr = config.http.listen.expect("the default address");
        let held = Holdings::default();
        config.serving.held = held.clone();
        config.serving.profile = Some("later".into());
        // Another profile took the same bot and address since this one started.
        held.set(
            "other",
            Some(config::Taken {
                bots: vec![config::bot_fingerprint(
                    hermes_adapter::Platform::Telegram,
                    "1:ROOT",
                )],
                stores: Vec::new(),
                listen: vec![addr],
            }),
        );
        let said = config.take_place().expect("kept apart");
        assert!(!config.has_platform(), "the other profile's bot is dropped");
        assert_eq!(config.http.listen, None);
        assert_eq!(said.len(), 2, "{said:?}");
        // Once the other stops, what it held is free.
        held.set("other", None);
        let mut again = config::load(root.path()).config.expect("loads");
        again.serving.held = held.clone();
        again.serving.profile = Some("later".into());
        assert!(again.take_place().expect("taken").is_empty());
        assert!(again.has_platform());
    }
}
