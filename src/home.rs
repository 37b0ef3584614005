//! The Hermes home on disk and who may read it: the directory is created private (0700),
//! the database is created 0600 before SQLite opens it (SQLite gives its `-wal` and `-shm`
//! files the same mode), and start-up warns about any secret file, or the home itself,
//! that others can read — without changing what the operator set.

use std::fs::{DirBuilder, OpenOptions};
use std::io;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Files in the home that hold secrets: tokens and keys, sessions, pairings, approvals.
pub const SECRET_FILES: &[&str] = &[
    ".env",
    "config.yaml",
    "gateway.db",
    "gateway.db-wal",
    "gateway.db-shm",
];

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
/// Returns a warning for each secret file, or the home, that group or others can read.
pub fn prepare(home: &Path, database: &Path) -> io::Result<Vec<String>> {
    if !home.exists() {
        DirBuilder::new().recursive(true).mode(0o700).create(home)?;
    }
    if !database.exists() {
        OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(database)?;
    }
    let mut warnings = Vec::new();
    let mut check = |path: &Path, fix: &str| {
        if let Ok(meta) = std::fs::metadata(path) {
            let mode = meta.permissions().mode() & 0o777;
            if mode & 0o077 != 0 {
                warnings.push(format!(
                    "{} can be read by other users (mode {mode:03o}); it holds secrets. Run: chmod {fix} {}",
                    path.display(),
                    path.display()
                ));
            }
        }
    };
    check(home, "700");
    for name in SECRET_FILES {
        check(&home.join(name), "600");
    }
    Ok(warnings)
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
        let warnings = prepare(&home, &db).unwrap();
        assert_eq!(mode(&home), 0o700);
        assert_eq!(mode(&db), 0o600);
        assert!(warnings.is_empty(), "{warnings:?}");
    }

    #[test]
    fn secrets_others_can_read_are_reported_and_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path();
        std::fs::set_permissions(home, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::write(home.join(".env"), "TELEGRAM_BOT_TOKEN=x").unwrap();
        std::fs::set_permissions(home.join(".env"), std::fs::Permissions::from_mode(0o644))
            .unwrap();
        let warnings = prepare(home, &home.join("gateway.db")).unwrap();
        assert_eq!(warnings.len(), 2, "{warnings:?}");
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
