//! The agent's working directory of its own. Under the system service the gateway's home
//! is also the service user's `$HOME` and was the default working directory, so what the
//! agent made lived among the gateway's secrets; confined, the home is hidden from it. Such
//! a daemon's commands work in `$HERMES_HOME/workspace` instead (handed into the jail,
//! their `$HOME` too), and on the first start what the agent had made in the home is moved
//! there (and the operator told).

use std::io;
use std::os::unix::fs::DirBuilderExt;
use std::path::Path;

use crate::home::WORKSPACE as DIR;

/// What a home holds of its own (the gateway's and Hermes'): it stays where it is.
const HOME_ENTRIES: &[&str] = &[
    ".env",
    ".env.example",
    "config.yaml",
    "gateway.db",
    "gateway.db-wal",
    "gateway.db-shm",
    "gateway.db-journal",
    crate::state_key::FILE,
    "auth.json",
    ".anthropic_oauth.json",
    "SOUL.md",
    "cache",
    "skills",
    "memories",
    "cron",
    "logs",
    "sessions",
    "plugins",
    "profiles",
    "hooks",
    "scripts",
    "state",
    "state.db",
    "state.db-wal",
    "state.db-shm",
    "checkpoints",
    "session-exports",
    "pastes",
    "images",
    "whatsapp",
    "gateway",
    "node",
    "node_modules",
    "hermes-agent",
    "browser_recordings",
    "honcho.json",
    "channel_directory.json",
    "gateway_state.json",
    "gateway_voice_mode.json",
    "interrupt_debug.log",
    ".hermes_history",
    ".clean_shutdown",
    // The web chat's login token and its files (uploads, files sent).
    "web-token",
    "web",
    DIR,
];

/// Names Hermes and the gateway give their own passing files (a secret file being
/// replaced: `crate::home::write_private`, the web chat's token being rotated).
const HOME_PREFIXES: &[&str] = &[
    ".update_",
    ".restart_",
    "daemon-",
    crate::home::WRITING_PREFIX,
    ".web-token",
];

/// Make the workspace `cwd` (0700) when it is missing; `moved_from_home` (commands used to
/// work in the home) moves what they made there into it. Returns the names moved.
pub fn prepare(home: &Path, cwd: &Path, moved_from_home: bool) -> io::Result<Vec<String>> {
    if cwd != home.join(DIR) || cwd.exists() {
        return Ok(Vec::new());
    }
    std::fs::DirBuilder::new().mode(0o700).create(cwd)?;
    if !moved_from_home {
        return Ok(Vec::new());
    }
    let mut moved = Vec::new();
    for entry in std::fs::read_dir(home)?.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let own = HOME_ENTRIES.contains(&name.as_str())
            || HOME_PREFIXES.iter().any(|p| name.starts_with(p));
        if own {
            continue;
        }
        std::fs::rename(entry.path(), cwd.join(&name))?;
        moved.push(name);
    }
    moved.sort();
    Ok(moved)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::home::working_directory;

    #[test]
    fn what_the_agent_made_in_the_home_moves_to_the_workspace_and_the_gateways_files_stay() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path();
        for file in [
            ".env",
            "config.yaml",
            "gateway.db",
            "web-token",
            ".web-token.new",
            ".hermes-write-.env.0123456789abcdef.tmp",
            "leak.py",
            ".bash_history",
        ] {
            std::fs::write(home.join(file), "x").unwrap();
        }
        std::fs::create_dir_all(home.join("project/src")).unwrap();
        std::fs::create_dir_all(home.join("skills/notes")).unwrap();
        std::fs::create_dir_all(home.join("web/uploads")).unwrap();
        let cwd = working_directory(home, home.to_path_buf());
        assert_eq!(cwd, home.join("workspace"));

        let moved = prepare(home, &cwd, true).unwrap();
        assert_eq!(moved, [".bash_history", "leak.py", "project"]);
        assert!(cwd.join("project/src").is_dir());
        assert!(home.join(".env").exists() && home.join("skills/notes").is_dir());
        // The web chat's token and files, and a secret file half replaced, stay hidden.
        for kept in [
            "web-token",
            ".web-token.new",
            ".hermes-write-.env.0123456789abcdef.tmp",
        ] {
            assert!(home.join(kept).exists(), "{kept} stays in the home");
        }
        assert!(home.join("web/uploads").is_dir());
        assert!(!home.join("leak.py").exists());
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&cwd).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700);

        // Once there, nothing moves again.
        std::fs::write(home.join("later.txt"), "x").unwrap();
        assert!(prepare(home, &cwd, true).unwrap().is_empty());
        assert!(home.join("later.txt").exists());
    }

    #[test]
    fn a_working_directory_elsewhere_is_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        std::fs::create_dir_all(&home).unwrap();
        let cwd = working_directory(&home, dir.path().to_path_buf());
        assert_eq!(cwd, dir.path());
        assert!(prepare(&home, &cwd, false).unwrap().is_empty());
        assert!(!home.join(DIR).exists());
    }
}
