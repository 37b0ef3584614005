//! The Hermes home on disk and who may read it: the directory is created private (0700),
//! the database is created 0600 before SQLite opens it (SQLite gives its `-wal` and `-shm`
//! files the same mode), and at start-up a secret file, or the home itself, that others can
//! read is made private when it belongs to the daemon's user (`security.fix_permissions`,
//! on by default; the operator is told what changed), and reported otherwise.

use std::fs::{DirBuilder, OpenOptions};
use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Files in the home that hold secrets: tokens and keys, sessions, pairings, approvals.
pub const SECRET_FILES: &[&str] = &[
    ".env",
    "config.yaml",
    "gateway.db",
    "gateway.db-wal",
    "gateway.db-shm",
    "web-token",
];

/// Make the home (0700, with its parents) if it does not exist.
pub fn create(home: &Path) -> io::Result<()> {
    if !home.exists() {
        DirBuilder::new().recursive(true).mode(0o700).create(home)?;
    }
    Ok(())
}

/// How the files [`write_private`] writes beside the one it replaces begin (they hold the
/// same secrets: never moved out of the home, `confine::workspace`).
pub const WRITING_PREFIX: &str = ".hermes-write-";

/// Write `bytes` into `path` whole and private (0600): a fresh file beside it, synced, then
/// renamed over it, so a crash leaves the old file or the new, never half of one, and a
/// link in the way is replaced, never written through.
pub fn write_private(path: &Path, bytes: &[u8]) -> io::Result<()> {
    use std::io::Write;
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let beside = dir.join(format!(
        "{WRITING_PREFIX}{name}.{:016x}.tmp",
        rand::random::<u64>()
    ));
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&beside)?;
    let written = file
        .write_all(bytes)
        .and_then(|_| file.sync_all())
        .and_then(|_| std::fs::rename(&beside, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&beside);
    }
    written?;
    // The rename itself is on disk once the directory is.
    std::fs::File::open(dir).and_then(|d| d.sync_all())
}

/// The agent's own working directory in the home (`confine::workspace`), used when the
/// configured one is the home itself (the system service's `$HOME`).
pub const WORKSPACE: &str = "workspace";

/// The working directory commands get: the configured one, or the workspace when that
/// is the home itself.
pub fn working_directory(home: &Path, configured: PathBuf) -> PathBuf {
    if configured == home {
        home.join(WORKSPACE)
    } else {
        configured
    }
}

/// Create `home` (0700) if it is missing, and the database file (0600) if it is missing.
/// Then each secret file, and the home, that group or others can read: made private when
/// `fix` and it is the daemon's user's own, else reported with the command that would.
/// Returns one line per such file, for the operator.
pub fn prepare(home: &Path, database: &Path, fix: bool) -> io::Result<Vec<String>> {
    create(home)?;
    if !database.exists() {
        OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(database)?;
    }
    let me = nix::unistd::geteuid().as_raw();
    let mut said = Vec::new();
    let mut check = |path: &Path, private: u32| {
        // `symlink_metadata`: a link is never followed to chmod what it points at.
        let Ok(meta) = std::fs::symlink_metadata(path) else {
            return;
        };
        let mode = meta.permissions().mode() & 0o777;
        if mode & 0o077 == 0 || meta.file_type().is_symlink() {
            return;
        }
        let shown = path.display();
        if fix && meta.uid() == me {
            let tightened = mode & 0o700 | (private & 0o700);
            match std::fs::set_permissions(path, std::fs::Permissions::from_mode(tightened)) {
                Ok(()) => said.push(format!(
                    "{shown} could be read by other users (mode {mode:03o}); it holds secrets, so it is now {tightened:03o} (security.fix_permissions: false only warns)"
                )),
                Err(e) => said.push(format!(
                    "{shown} can be read by other users (mode {mode:03o}) and could not be made private ({e}); it holds secrets. Run: chmod {private:o} {shown}"
                )),
            }
        } else {
            let whose = if meta.uid() == me {
                ""
            } else {
                " (it is not the daemon's user's, so it is left as it is)"
            };
            said.push(format!(
                "{shown} can be read by other users (mode {mode:03o}); it holds secrets{whose}. Run: chmod {private:o} {shown}"
            ));
        }
    };
    check(home, 0o700);
    for name in SECRET_FILES {
        check(&home.join(name), 0o600);
    }
    Ok(said)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn a_new_home_and_database_are_private() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("hermes");
        let db = home.join("gateway.db");
        let warnings = prepare(&home, &db, true).unwrap();
        assert_eq!(mode(&home), 0o700);
        assert_eq!(mode(&db), 0o600);
        assert!(warnings.is_empty(), "{warnings:?}");
    }

    fn readable_home() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path();
        std::fs::set_permissions(home, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::write(home.join(".env"), "TELEGRAM_BOT_TOKEN=x").unwrap();
        std::fs::set_permissions(home.join(".env"), std::fs::Permissions::from_mode(0o644))
            .unwrap();
        std::fs::write(home.join("config.yaml"), "model: m").unwrap();
        std::fs::set_permissions(
            home.join("config.yaml"),
            std::fs::Permissions::from_mode(0o640),
        )
        .unwrap();
        dir
    }

    #[test]
    fn secrets_others_can_read_are_made_private_and_the_operator_told() {
        let dir = readable_home();
        let home = dir.path();
        let said = prepare(home, &home.join("gateway.db"), true).unwrap();
        assert_eq!(mode(home), 0o700);
        assert_eq!(mode(&home.join(".env")), 0o600);
        assert_eq!(mode(&home.join("config.yaml")), 0o600);
        assert_eq!(said.len(), 3, "{said:?}");
        assert!(
            said.iter()
                .any(|w| w.contains(".env") && w.contains("mode 644") && w.contains("now 600")),
            "{said:?}"
        );
        assert!(
            prepare(home, &home.join("gateway.db"), true)
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn with_fixing_off_secrets_others_can_read_are_reported_and_left_alone() {
        let dir = readable_home();
        let home = dir.path();
        let warnings = prepare(home, &home.join("gateway.db"), false).unwrap();
        assert_eq!(warnings.len(), 3, "{warnings:?}");
        assert!(
            warnings
                .iter()
                .any(|w| w.contains(".env") && w.contains("chmod 600"))
        );
        assert!(warnings.iter().any(|w| w.contains("chmod 700")));
        assert_eq!(
            mode(&home.join(".env")),
            0o644,
            "the operator's choice stays"
        );
    }
}
