//! Programs a test needs that a machine may lack (systemd-analyze, Chromium, PostgreSQL). Under plain `cargo test` a missing one is said loudly on stderr and the test
//! skips what needs it; when [`EVERYTHING`] is set (`.ci/run` sets it, after installing what
//! is missing) a missing program fails the test, so CI can never pass by skipping.

use std::path::{Path, PathBuf};

/// Set to `1` to make every needed program a requirement.
pub const EVERYTHING: &str = "HERMES_TEST_EVERYTHING";

/// The path of `program` on `PATH`; `None` (said on stderr) when it is missing and skipping
/// is allowed. Panics when it is missing and [`EVERYTHING`] is set.
pub fn program(program: &str, why: &str) -> Option<PathBuf> {
    let found = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|dir| dir.join(program))
            .find(|candidate| is_executable(candidate))
    });
    if found.is_none() {
        missing(program, why);
    }
    found
}

/// Say that `thing` is not installed, so `why` is not tested; panics when [`EVERYTHING`] is
/// set.
pub fn missing(thing: &str, why: &str) {
    if std::env::var(EVERYTHING).is_ok_and(|v| v == "1") {
        panic!(
            "{thing} is needed ({why}) and is not installed, and {EVERYTHING}=1 forbids skipping"
        );
    }
    // Straight to stderr: the test harness captures `eprintln!` of a passing test.
    use std::io::Write;
    let _ = writeln!(
        std::io::stderr(),
        "\n*** SKIPPED: {thing} is not installed, so {why} was not tested. \
         Install it (or run .ci/run, which does) to test it. ***\n"
    );
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    path.metadata()
        .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_program_on_the_path_is_found_and_a_missing_one_is_none() {
        assert!(program("sh", "a shell").is_some());
        if std::env::var(EVERYTHING).is_err() {
            assert!(program("no-such-program-hermes", "nothing").is_none());
        }
    }
}
