//! Which files a command must not touch without asking, judged on the path a word will
//! resolve to. A word only partly known (`~/.hermes/$f`, `/e*c/passwd`, a relative path
//! after a `cd` to an unknown place) is a pattern, and it counts when it could match a
//! protected file.

use std::path::{Path, PathBuf};

use glob::{MatchOptions, Pattern};

use super::Scene;
use super::words::{Arg, resolve};

/// What kind of protected place a path is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// The gateway's own secrets: `$HERMES_HOME/.env`, `config.yaml`, `gateway.db`.
    GatewaySecret,
    /// `/proc/<pid>/environ` or `/proc/<pid>/mem`: another process's secrets.
    ProcessMemory,
    BlockDevice,
    /// `/dev/tcp/host/port`: bash opens a network connection.
    NetworkSocket,
    /// `/etc` (and macOS's `/private/etc`).
    SystemConfig,
    /// `/boot`, `/usr`, `/bin`, `/sbin`, `/lib`.
    SystemFiles,
    Ssh,
    ShellStartup,
    Credentials,
    /// `/`, a top-level system directory or a home directory itself: no way back.
    Root,
}

/// Where a word points: one path, or a pattern of possible paths.
enum Target {
    Exact(PathBuf),
    Pattern(String),
}

use crate::confine::layout::SHELL_STARTUP;

const CREDENTIALS: &[&str] = &[
    ".netrc",
    ".pgpass",
    ".npmrc",
    ".pypirc",
    ".git-credentials",
    ".aws/credentials",
    ".docker/config.json",
    ".kube/config",
    ".config/gh/hosts.yml",
];

const GATEWAY_SECRETS: &[&str] = &[
    ".env",
    "config.yaml",
    "gateway.db",
    "gateway.db-wal",
    "gateway.db-shm",
    "auth.json",
];

const ROOT_DIRS: &[&str] = &[
    "/", "/home", "/root", "/etc", "/usr", "/var", "/bin", "/sbin", "/boot", "/lib", "/lib64",
    "/opt", "/srv", "/dev", "/proc", "/sys",
];

const BLOCK_DEVICE_PREFIXES: &[&str] = &[
    "sd", "hd", "vd", "xvd", "nvme", "mmcblk", "disk", "dm-", "md", "loop", "sr",
];

/// The protected places `arg` may point at, seen from `cwd` (`None`: unknown).
pub fn places(arg: &Arg, cwd: Option<&Path>, scene: &Scene) -> Vec<Place> {
    match target(arg, cwd) {
        Some(Target::Exact(path)) => exact_places(&path, scene),
        Some(Target::Pattern(pattern)) => pattern_places(&pattern, scene),
        None => Vec::new(),
    }
}

/// Whether `arg` is an absolute path, or may turn out to be one.
pub fn is_absolute(arg: &Arg) -> bool {
    arg.pattern().starts_with('/') || arg.pattern().starts_with('*')
}

fn target(arg: &Arg, cwd: Option<&Path>) -> Option<Target> {
    let pattern = arg.pattern();
    if pattern.is_empty() {
        return None;
    }
    let globbed = pattern.contains(['*', '?', '[']);
    if !globbed {
        return Some(match cwd {
            Some(cwd) => Target::Exact(resolve(cwd, &pattern)),
            None if pattern.starts_with('/') => Target::Exact(resolve(Path::new("/"), &pattern)),
            None => Target::Pattern(format!("*/{pattern}")),
        });
    }
    Some(Target::Pattern(if pattern.starts_with(['/', '*']) {
        pattern
    } else {
        match cwd {
            Some(cwd) => format!("{}/{pattern}", cwd.display()),
            None => format!("*/{pattern}"),
        }
    }))
}

/// The protected places a resolved path is (for checks outside commands, such as files
/// the agent asks to send).
pub fn protected_places(path: &Path, scene: &Scene) -> Vec<Place> {
    exact_places(path, scene)
}

fn exact_places(path: &Path, scene: &Scene) -> Vec<Place> {
    let mut found = Vec::new();
    let text = path.to_string_lossy();
    let secret =
        |home: &PathBuf| path == home || GATEWAY_SECRETS.iter().any(|name| path == home.join(name));
    if scene.gateway_homes().any(secret) {
        found.push(Place::GatewaySecret);
    }
    let parts: Vec<&str> = text.split('/').collect();
    if parts.len() == 4 && parts[1] == "proc" && matches!(parts[3], "environ" | "mem") {
        found.push(Place::ProcessMemory);
    }
    if let Some(device) = text.strip_prefix("/dev/") {
        if BLOCK_DEVICE_PREFIXES.iter().any(|p| device.starts_with(p))
            || device.starts_with("mapper/")
            || matches!(device, "mem" | "kmem" | "port")
        {
            found.push(Place::BlockDevice);
        }
        if device.starts_with("tcp/") || device.starts_with("udp/") {
            found.push(Place::NetworkSocket);
        }
    }
    if under(path, "/etc") || under(path, "/private/etc") {
        found.push(Place::SystemConfig);
    }
    if ["/boot", "/usr", "/bin", "/sbin", "/lib", "/lib64"]
        .iter()
        .any(|d| under(path, d))
    {
        found.push(Place::SystemFiles);
    }
    for home in homes_of(path, scene) {
        if under(path, &home.join(".ssh").to_string_lossy()) {
            found.push(Place::Ssh);
        }
        if SHELL_STARTUP.iter().any(|f| path == home.join(f)) {
            found.push(Place::ShellStartup);
        }
        if CREDENTIALS.iter().any(|f| path == home.join(f)) {
            found.push(Place::Credentials);
        }
        if path == home {
            found.push(Place::Root);
        }
    }
    if ROOT_DIRS.iter().any(|d| path == Path::new(d)) {
        found.push(Place::Root);
    }
    found.dedup();
    found
}

/// The home directories `path` may be inside: the gateway's, `/root`, `/home/<user>`.
fn homes_of(path: &Path, scene: &Scene) -> Vec<PathBuf> {
    let mut homes = vec![scene.home.clone(), PathBuf::from("/root")];
    let mut components = path.components().skip(1);
    if let (Some(first), Some(user)) = (components.next(), components.next())
        && first.as_os_str() == "home"
    {
        homes.push(Path::new("/home").join(user));
    }
    homes
}

fn under(path: &Path, dir: &str) -> bool {
    path.starts_with(dir)
}

/// Example paths for each place: a pattern that matches one may point at that place.
fn examples(scene: &Scene) -> Vec<(PathBuf, Place)> {
    let mut out = Vec::new();
    for home in scene.gateway_homes() {
        out.push((home.clone(), Place::GatewaySecret));
        for name in GATEWAY_SECRETS {
            out.push((home.join(name), Place::GatewaySecret));
        }
    }
    out.push((
        PathBuf::from(format!("/proc/{}/environ", scene.gateway_pid)),
        Place::ProcessMemory,
    ));
    for device in [
        "sda", "nvme0n1", "vda", "xvda", "hda", "mmcblk0", "dm-0", "md0",
    ] {
        out.push((Path::new("/dev").join(device), Place::BlockDevice));
    }
    out.push((PathBuf::from("/dev/tcp/host/80"), Place::NetworkSocket));
    out.push((PathBuf::from("/etc/passwd"), Place::SystemConfig));
    out.push((PathBuf::from("/usr/bin/env"), Place::SystemFiles));
    for home in [scene.home.clone(), PathBuf::from("/root")] {
        out.push((home.join(".ssh/authorized_keys"), Place::Ssh));
        for f in SHELL_STARTUP {
            out.push((home.join(f), Place::ShellStartup));
        }
        for f in CREDENTIALS {
            out.push((home.join(f), Place::Credentials));
        }
        out.push((home, Place::Root));
    }
    for d in ROOT_DIRS {
        out.push((PathBuf::from(d), Place::Root));
    }
    out
}

fn pattern_places(pattern: &str, scene: &Scene) -> Vec<Place> {
    // Text that is not a valid pattern (an unclosed `[`) is taken literally, as bash does.
    let compiled = Pattern::new(pattern)
        .unwrap_or_else(|_| Pattern::new(&Pattern::escape(pattern)).expect("escaped pattern"));
    let options = MatchOptions {
        case_sensitive: true,
        require_literal_separator: false,
        require_literal_leading_dot: false,
    };
    let mut found: Vec<Place> = Vec::new();
    for (example, place) in examples(scene) {
        if !found.contains(&place) && compiled.matches_path_with(&example, options) {
            found.push(place);
        }
    }
    found
}
