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

use crate::config::{self, Config, Serving, Taken};
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
    let profiles = keep_apart(profiles);
    place(root, profiles)
}

/// Each profile in turn keeps off what the ones before it hold (the default first, then
/// by name): a bot served already is dropped from the later profile, a PostgreSQL store
/// or an HTTP address it needs for webhooks leaves it out; one enabling no platform then is
/// not started. Each is then told what all the others hold, for its reloads.
fn keep_apart(profiles: Vec<Profile>) -> Vec<Profile> {
    let mut kept: Vec<Profile> = Vec::new();
    for mut profile in profiles {
        let mut taken = Taken::default();
        for earlier in &kept {
            let holds = earlier.config.holds();
            taken.bots.extend(holds.bots);
            taken.stores.extend(holds.stores);
            taken.listen.extend(holds.listen);
        }
        profile.config.serving.taken = taken;
        match profile.config.keep_apart() {
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
            continue;
        }
        kept.push(profile);
    }
    let holds: Vec<Taken> = kept.iter().map(|p| p.config.holds()).collect();
    for (i, profile) in kept.iter_mut().enumerate() {
        let mut taken = Taken::default();
        for (_, other) in holds.iter().enumerate().filter(|(j, _)| *j != i) {
            taken.bots.extend(other.bots.iter().copied());
            taken.stores.extend(other.stores.iter().cloned());
            taken.listen.extend(other.listen.iter().copied());
        }
        profile.config.serving.taken = taken;
    }
    kept
}

/// Tell each gateway its place: its name, the homes it must keep out of (the root's,
/// which holds every profile, and each other profile's), and whether it speaks to systemd
/// (the first that runs: the default, unless it enables no platform). A profile whose
/// commands would work in the daemon's `$HOME` or another gateway's home works in its own
/// `workspace` instead.
fn place(root: &Path, mut profiles: Vec<Profile>) -> Vec<Profile> {
    let homes: Vec<PathBuf> = profiles.iter().map(|p| p.home.clone()).collect();
    let person_home = std::env::var_os("HOME").map(PathBuf::from);
    for (i, profile) in profiles.iter_mut().enumerate() {
        let mut others: Vec<PathBuf> = homes
            .iter()
            .filter(|h| **h != profile.home)
            .cloned()
            .collect();
        if profile.home != root && !others.iter().any(|h| h == root) {
            others.insert(0, root.to_path_buf());
        }
        let terminal = &mut profile.config.terminal;
        let own = terminal.cwd.starts_with(&profile.home);
        let shared_cwd = !own
            && (Some(&terminal.cwd) == person_home.as_ref()
                || others.iter().any(|h| terminal.cwd.starts_with(h)));
        if profile.name != DEFAULT && shared_cwd {
            terminal.cwd = profile.home.join(crate::home::WORKSPACE);
            terminal.cwd_was_home = false;
        }
        let taken = std::mem::take(&mut profile.config.serving.taken);
        profile.config.serving = Serving {
            profile: (profile.name != DEFAULT).then(|| profile.name.clone()),
            other_homes: others,
            speaks_for_process: i == 0,
            taken,
        };
    }
    profiles
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
        let (name, stop) = (profile.name.clone(), stop.clone());
        running.spawn(
            async move {
                let code =
                    crate::reload::run_until(profile.home, profile.config, stop.clone()).await;
                if speaks {
                    stop.cancel();
                }
                (name, code)
            }
            .instrument(span),
        );
    }
    let mut status = ExitCode::SUCCESS;
    while let Some(ended) = running.join_next().await {
        match ended {
            Ok((name, code)) if code != ExitCode::SUCCESS => {
                tracing::error!(profile = %name, "a profile's gateway stopped with an error; the others go on");
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
        assert_eq!(default.other_homes, [root.join("profiles/alpha")]);
        assert_eq!(alpha.profile.as_deref(), Some("alpha"));
        assert_eq!(alpha.other_homes, [root.to_path_buf()]);
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
    fn a_reload_keeps_off_what_the_other_profiles_hold() {
        let root = tempfile::tempdir().unwrap();
        home(root.path(), "1:ROOT");
        let mut config = config::load(root.path()).config.expect("loads");
        let addr = config.http.listen.expect("the default address");
        config.serving.taken = Taken {
            bots: vec![config::bot_fingerprint(
                hermes_adapter::Platform::Telegram,
                "1:ROOT",
            )],
            stores: Vec::new(),
            listen: vec![addr],
        };
        let said = config.keep_apart().expect("kept apart");
        assert!(!config.has_platform(), "the other profile's bot is dropped");
        assert_eq!(config.http.listen, None);
        assert_eq!(said.len(), 2, "{said:?}");
    }
}
