//! Finding, from the host, a process a confined command told about. Inside its jail a
//! command sees its own PID namespace: `echo $$ > file` writes the pid it has there, which
//! names another process (or none) on the host. The host's `/proc/<pid>/status` lists each
//! process's pid in every namespace it is in (`NSpid:`), so the host pid is the one whose
//! innermost pid is the one written, inside one of the test's own jails: a jail of the
//! daemon whose home holds the file hides that home's `config.yaml` (other daemons' jails
//! and the host show it).

use std::path::{Path, PathBuf};

/// The host pid of the process that `pidfile` names (written from inside a jail, or
/// not); `pidfile` lies in a daemon's home (in its `work` directory). Panics when the file
/// cannot be read; `None` when no such process runs.
pub fn host_pid(pidfile: &Path) -> Option<i32> {
    let written: i32 = std::fs::read_to_string(pidfile)
        .unwrap_or_else(|e| panic!("{}: {e}", pidfile.display()))
        .trim()
        .parse()
        .unwrap_or_else(|e| panic!("{}: {e}", pidfile.display()));
    let config = daemon_home(pidfile).map(|home| home.join("config.yaml"));
    let in_its_jail = |pid: i32, nspid: &[i32]| {
        let Some(config) = config.as_ref().and_then(|c| c.strip_prefix("/").ok()) else {
            return false;
        };
        let root = PathBuf::from(format!("/proc/{pid}/root"));
        // Its root must be there to look through (the process still runs), and the file
        // must be missing inside, not just out of reach.
        nspid.len() > 1
            && std::fs::metadata(&root).is_ok()
            && matches!(
                std::fs::metadata(root.join(config)),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound
            )
    };
    let processes = processes();
    // While the daemon has a jail (its holder lives on for minutes after a command), only
    // a process in one counts: a small pid names some host process too.
    let jailed = processes
        .iter()
        .any(|(pid, nspid)| in_its_jail(*pid, nspid));
    processes
        .iter()
        .filter(|(_, nspid)| nspid.last() == Some(&written))
        .find(|(pid, nspid)| {
            if jailed {
                in_its_jail(*pid, nspid)
            } else {
                nspid.len() == 1
            }
        })
        .map(|(pid, _)| *pid)
}

/// The daemon home a path lies in: the nearest directory above it with a `config.yaml`.
fn daemon_home(path: &Path) -> Option<PathBuf> {
    path.ancestors()
        .skip(1)
        .find(|dir| dir.join("config.yaml").is_file())
        .map(Path::to_path_buf)
}

/// Every process: its host pid and its pid in each PID namespace, the host's first.
fn processes() -> Vec<(i32, Vec<i32>)> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| {
            let pid = e.file_name().to_string_lossy().parse::<i32>().ok()?;
            let status = std::fs::read_to_string(e.path().join("status")).ok()?;
            let nspid = status
                .lines()
                .find_map(|l| l.strip_prefix("NSpid:"))?
                .split_whitespace()
                .filter_map(|n| n.parse().ok())
                .collect();
            Some((pid, nspid))
        })
        .collect()
}
