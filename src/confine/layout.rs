//! What a confinement hides, hands back and protects, worked out once from the
//! configuration and what is on disk: the gateway's home covered whole (its secrets, its
//! database, its logs), the few places in it the agent is meant to use handed back at their
//! own path, the doors the daemon's user holds (the user manager's runtime directory, a
//! Docker socket, an ssh-agent) closed, and the files that would let a command outlive its
//! confinement (the gateway's program, systemd's user units) kept read-only. The same
//! layout drives the mount namespace ([`super::holder`]) and the Landlock rules
//! ([`super::rules`]), so the two layers agree.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// A place inside a covered directory that the agent is given back, at the same path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HandIn {
    pub path: PathBuf,
    /// Commands may write there (the working directory); otherwise read-only.
    pub writable: bool,
}

/// The confinement's view of the file system.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Layout {
    /// Directories replaced by an empty, read-only tmpfs: the gateway's home, the journal,
    /// a secret's directory elsewhere, the sockets' directories in `/tmp`.
    pub covered: Vec<PathBuf>,
    /// Places inside `covered` directories given back at their own path.
    pub handed_in: Vec<HandIn>,
    /// Directories replaced by an empty tmpfs of the agent's own: the user manager's runtime
    /// directory (its D-Bus and systemd sockets).
    pub emptied: Vec<PathBuf>,
    /// Files (sockets included) replaced by `/dev/null`: a Docker or Podman socket, the
    /// ssh-agent, a secret file the home links to, the X server's cookie.
    pub nulled: Vec<PathBuf>,
    /// Files and directories that stay visible but cannot be changed: the gateway's program,
    /// systemd's user units and environment, what a login runs.
    pub read_only: Vec<PathBuf>,
    /// Directories between a writable root and a protected place, made mount points of
    /// their own: a mount point can be neither renamed nor removed, so the protected place
    /// cannot be swapped out by renaming a directory above it.
    pub pinned: Vec<PathBuf>,
    /// Roots commands may write below: the working directory, the person's home, the
    /// temporary directories, `terminal.allowed_roots`.
    pub writable: Vec<PathBuf>,
    /// Protected places reached through a link commands could replace: said at start-up.
    pub weak: Vec<String>,
}

/// What the layout is worked out from (gathered by [`Facts::of_this_process`]).
#[derive(Debug, Clone, Default)]
pub struct Facts {
    /// `$HERMES_HOME`, resolved.
    pub hermes_home: PathBuf,
    /// `$HERMES_HOME` as the daemon was given it (it may go through links).
    pub given_home: PathBuf,
    /// The other gateways' homes in this process (profiles), resolved: covered whole too.
    pub other_homes: Vec<PathBuf>,
    /// The daemon's `$HOME`, resolved.
    pub person_home: Option<PathBuf>,
    /// The daemon's `$HOME` as its environment says.
    pub given_person_home: Option<PathBuf>,
    /// `$XDG_CONFIG_HOME`, when set.
    pub config_home: Option<PathBuf>,
    /// The working directory of commands (`terminal.cwd`), resolved.
    pub cwd: PathBuf,
    /// `terminal.allowed_roots`.
    pub allowed_roots: Vec<PathBuf>,
    /// `terminal.sandbox_expose`: places the operator hands in on purpose.
    pub exposed: Vec<PathBuf>,
    /// The gateway's own program.
    pub program: Option<PathBuf>,
    /// `$XDG_RUNTIME_DIR`, and `/run/user/<uid>`.
    pub runtime_dirs: Vec<PathBuf>,
    /// `$SSH_AUTH_SOCK`.
    pub ssh_agent: Option<PathBuf>,
    /// systemd's `$CREDENTIALS_DIRECTORY`.
    pub credentials: Option<PathBuf>,
    /// The daemon's user id (its sockets' directories in `/tmp` carry it).
    pub uid: u32,
}

/// Sockets of container engines: whoever reaches one is root on the host.
const CONTAINER_SOCKETS: &[&str] = &[
    "/var/run/docker.sock",
    "/run/docker.sock",
    "/run/podman/podman.sock",
    "/run/containerd/containerd.sock",
    "/var/run/containerd/containerd.sock",
];

/// The journal: the gateway's logs (and everyone else's).
const JOURNALS: &[&str] = &["/var/log/journal", "/run/log/journal"];

/// Where `execute_code` keeps a run's script, module and tool socket.
pub const CODE_STAGING: &str = "cache/code";

/// Directories of the home given back to the agent read-only: the documents people sent
/// (the model is told their paths), the skills (their scripts are run from there),
/// `execute_code`'s runs (the daemon writes there; commands only read and connect).
pub const HANDED_IN_READ_ONLY: &[&str] = &["cache/documents", "skills", CODE_STAGING];

/// Places under the person's home (or `$XDG_CONFIG_HOME`, for the first three) that a
/// command could use to start something outside the confinement at the next login or
/// restart: systemd's user units, drop-ins and environment, autostart entries.
pub const USER_MANAGER_CONFIG: &[&str] = &[
    ".config/systemd",
    ".config/environment.d",
    ".config/autostart",
    ".local/share/systemd",
];

/// What a login or a shell runs, in the home (kept read-only in a jail; the approval
/// reader asks before a write to one).
pub(crate) const SHELL_STARTUP: &[&str] = &[
    ".bashrc",
    ".bash_profile",
    ".bash_login",
    ".bash_logout",
    ".profile",
    ".zshrc",
    ".zshenv",
    ".zprofile",
    ".zlogin",
    ".kshrc",
    ".mkshrc",
    ".inputrc",
    ".config/fish/config.fish",
];

/// Besides what a login or a shell runs ([`SHELL_STARTUP`]): ssh's keys and
/// configuration (`authorized_keys`, a `LocalCommand`), and the environment PAM reads.
const LOGIN_EXTRAS: &[&str] = &[".pam_environment", ".ssh"];

/// Directories in `/tmp` where sessions keep sockets that run commands or take keystrokes
/// (X11, ICE, tmux: `<uid>` is the daemon's user).
const TMP_SOCKET_DIRS: &[&str] = &["/tmp/.X11-unix", "/tmp/.ICE-unix", "/tmp/tmux-<uid>"];

/// Make the user manager's configuration directories in the daemon's home when they are
/// missing: a place that does not exist cannot be kept read-only, and a command could make
/// it and put a unit there. (Not when the daemon's home is the gateway's, which is hidden.)
pub fn make_protectable(hermes_home: &Path) {
    use std::os::unix::fs::DirBuilderExt;
    let Some(person) = std::env::var_os("HOME").map(PathBuf::from) else {
        return;
    };
    let hermes_home = std::fs::canonicalize(hermes_home).unwrap_or(hermes_home.to_path_buf());
    if std::fs::canonicalize(&person).is_ok_and(|p| p.starts_with(&hermes_home)) {
        return;
    }
    for place in USER_MANAGER_CONFIG {
        let path = person.join(place);
        if std::fs::symlink_metadata(&path).is_err()
            && let Err(e) = std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o755)
                .create(&path)
        {
            tracing::warn!(path = %path.display(), error = %e, "confine: could not make a directory to keep read-only");
        }
    }
}

impl Facts {
    /// The facts of this process: its environment and what is on disk.
    pub fn of_this_process(
        hermes_home: &Path,
        cwd: &Path,
        allowed_roots: &[PathBuf],
        exposed: &[PathBuf],
    ) -> Facts {
        let resolved = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
        let env_path = |name: &str| {
            std::env::var_os(name)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        };
        let uid = nix::unistd::getuid().as_raw();
        let absolute = |p: &Path| {
            if p.is_absolute() {
                p.to_path_buf()
            } else {
                std::env::current_dir().unwrap_or_default().join(p)
            }
        };
        let mut runtime_dirs: Vec<PathBuf> = env_path("XDG_RUNTIME_DIR")
            .into_iter()
            .chain([PathBuf::from(format!("/run/user/{uid}"))])
            .filter(|p| p.is_dir())
            .map(|p| resolved(&p))
            .collect();
        runtime_dirs.dedup();
        Facts {
            hermes_home: resolved(hermes_home),
            given_home: absolute(hermes_home),
            other_homes: Vec::new(),
            person_home: env_path("HOME").map(|h| resolved(&h)),
            given_person_home: env_path("HOME"),
            config_home: env_path("XDG_CONFIG_HOME"),
            cwd: resolved(cwd),
            allowed_roots: allowed_roots.iter().map(|p| resolved(p)).collect(),
            exposed: exposed.iter().map(|p| resolved(p)).collect(),
            program: std::env::current_exe().ok().map(|p| resolved(&p)),
            runtime_dirs,
            // Taken out of the environment at start-up with the secrets (`crate::secrets`).
            ssh_agent: env_path("SSH_AUTH_SOCK")
                .or_else(|| crate::secrets::get("SSH_AUTH_SOCK").map(PathBuf::from))
                .map(|p| resolved(&p)),
            credentials: env_path("CREDENTIALS_DIRECTORY").map(|p| resolved(&p)),
            uid,
        }
    }

    /// The same, in a process that also runs gateways at `other_homes`.
    pub fn with_other_homes(mut self, other_homes: &[PathBuf]) -> Facts {
        self.other_homes = other_homes
            .iter()
            .map(|p| std::fs::canonicalize(p).unwrap_or_else(|_| p.clone()))
            .collect();
        self
    }

    /// Whether the operator hands `path` in on purpose (`terminal.sandbox_expose`).
    fn exposes(&self, path: &Path) -> bool {
        self.exposed.iter().any(|e| path.starts_with(e))
    }
}

/// Whether `path` is a real directory (not a link to one).
fn real_dir(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| m.is_dir())
}

impl Layout {
    /// Work the layout out from `facts`, looking at what exists on disk.
    pub fn work_out(facts: &Facts) -> Layout {
        let mut layout = Layout {
            covered: std::iter::once(&facts.hermes_home)
                .chain(&facts.other_homes)
                .cloned()
                .collect(),
            ..Layout::default()
        };
        layout.hand_in(facts);
        layout.cover_link_targets(facts);
        layout.close_doors(facts);
        layout.protect_startup(facts);
        layout.writable = writable_roots(facts);
        layout.say_linked_home(facts);
        layout.pinned = layout.pins();
        layout
    }

    /// Whether `path` is hidden from commands (covered, emptied or nulled), and not handed
    /// back.
    pub fn hides(&self, path: &Path) -> bool {
        let handed_back = self.handed_in.iter().any(|h| path.starts_with(&h.path));
        let hidden = self
            .covered
            .iter()
            .chain(&self.emptied)
            .chain(&self.nulled)
            .any(|p| path.starts_with(p));
        hidden && !handed_back
    }

    /// Give back the working directory when it lies inside the home (the system service's
    /// `workspace`), then what the gateway hands the agent on purpose; never through a link
    /// (one could lead anywhere, the home included).
    fn hand_in(&mut self, facts: &Facts) {
        let home = &facts.hermes_home;
        if facts.cwd.starts_with(home) && facts.cwd != *home {
            self.handed_in.push(HandIn {
                path: facts.cwd.clone(),
                writable: true,
            });
        }
        for place in HANDED_IN_READ_ONLY {
            let path = home.join(place);
            if real_dir(&path) && !facts.cwd.starts_with(&path) {
                self.handed_in.push(HandIn {
                    path,
                    writable: false,
                });
            }
        }
    }

    /// Hide what the home only links to where it lives: a directory covered, a file nulled
    /// (with a database's journal files, which SQLite keeps beside the file the link leads
    /// to).
    fn cover_link_targets(&mut self, facts: &Facts) {
        // The other gateways' homes' links too (profiles): their secrets are as secret.
        for home in std::iter::once(&facts.hermes_home).chain(&facts.other_homes) {
            self.cover_links_of(home, facts);
        }
    }

    fn cover_links_of(&mut self, home: &Path, facts: &Facts) {
        for entry in std::fs::read_dir(home).into_iter().flatten().flatten() {
            if !entry.file_type().is_ok_and(|t| t.is_symlink()) {
                continue;
            }
            let Ok(target) = std::fs::canonicalize(entry.path()) else {
                continue;
            };
            // Within the home already; or the working directory (a `workspace` link).
            if target.starts_with(home) || facts.cwd.starts_with(&target) {
                continue;
            }
            if target.is_dir() {
                self.covered.push(target);
            } else {
                for suffix in ["", "-wal", "-shm", "-journal"] {
                    let mut file = target.clone().into_os_string();
                    file.push(suffix);
                    let file = PathBuf::from(file);
                    if suffix.is_empty() || file.exists() {
                        self.nulled.push(file);
                    }
                }
            }
        }
    }

    /// Close the doors the daemon's user holds: systemd's credentials, the journal and the
    /// sockets' directories in `/tmp` covered, the runtime directories emptied, the
    /// container engines' sockets, the ssh-agent and the X server's cookie nulled; all but
    /// what the operator exposes on purpose.
    fn close_doors(&mut self, facts: &Facts) {
        if let Some(credentials) = &facts.credentials {
            self.covered.push(credentials.clone());
        }
        let socket_dirs = TMP_SOCKET_DIRS
            .iter()
            .map(|d| PathBuf::from(d.replace("<uid>", &facts.uid.to_string())));
        for dir in JOURNALS.iter().map(PathBuf::from).chain(socket_dirs) {
            if real_dir(&dir) && !facts.exposes(&dir) {
                self.covered.push(dir);
            }
        }
        for runtime in &facts.runtime_dirs {
            if !facts.exposes(runtime) {
                self.emptied.push(runtime.clone());
            }
        }
        let mut sockets: Vec<PathBuf> = CONTAINER_SOCKETS.iter().map(PathBuf::from).collect();
        sockets.extend(facts.ssh_agent.clone());
        if let Some(person) = &facts.person_home {
            sockets.push(person.join(".Xauthority"));
        }
        for socket in sockets {
            let inside_emptied = self.emptied.iter().any(|e| socket.starts_with(e));
            if socket.exists() && !facts.exposes(&socket) && !inside_emptied && !self.hides(&socket)
            {
                self.nulled.push(socket);
            }
        }
    }

    /// Keep read-only what nobody inside may write: the program, the user manager's
    /// configuration, what a login runs.
    fn protect_startup(&mut self, facts: &Facts) {
        if let Some(program) = &facts.program
            && !program.starts_with(&facts.hermes_home)
        {
            self.protect(facts, program.clone(), program.clone());
        }
        if let (Some(person), Some(given)) = (&facts.person_home, &facts.given_person_home) {
            let login = SHELL_STARTUP.iter().chain(LOGIN_EXTRAS);
            for place in USER_MANAGER_CONFIG.iter().chain(login) {
                self.protect(facts, person.join(place), given.join(place));
            }
            if let Some(config) = &facts.config_home
                && !config.starts_with(given.join(".config"))
            {
                for place in ["systemd", "environment.d", "autostart"] {
                    self.protect(facts, config.join(place), config.join(place));
                }
            }
        }
    }

    /// Keep `path` (`given`, as the environment names it) read-only when it exists, is not
    /// exposed and is not hidden anyway; where `given` is a link, that is said, since a
    /// command could put another in its place.
    fn protect(&mut self, facts: &Facts, path: PathBuf, given: PathBuf) {
        if std::fs::symlink_metadata(&given).is_err() || facts.exposes(&path) || self.hides(&path) {
            return;
        }
        let real = std::fs::canonicalize(&given).unwrap_or(path);
        if real != given {
            self.weak.push(format!(
                "{} is a link (to {}): it is kept read-only, but a command could put another in its place",
                given.display(),
                real.display()
            ));
        }
        self.read_only.push(real);
    }

    /// Say when the home is reached through a link in a writable place: the link itself
    /// could be replaced by a home of the command's making, read at the next start.
    fn say_linked_home(&mut self, facts: &Facts) {
        for link in links_on_the_way(&facts.given_home) {
            if self.writable.iter().any(|w| link.starts_with(w)) {
                self.weak.push(format!(
                    "the gateway's home is reached through {}, a link in a place commands can write: a command could put another home in its place for the next start; give the daemon the real path ({})",
                    link.display(),
                    facts.hermes_home.display()
                ));
            }
        }
    }

    /// Every directory between a writable root and a protected place, shallowest first
    /// (each is pinned).
    fn pins(&self) -> Vec<PathBuf> {
        let protected: Vec<PathBuf> = self
            .covered
            .iter()
            .chain(&self.nulled)
            .chain(&self.read_only)
            .cloned()
            .collect();
        let mut pinned = Vec::new();
        for place in &protected {
            for root in &self.writable {
                if place == root || !place.starts_with(root) {
                    continue;
                }
                let mut dir = place.parent();
                while let Some(d) = dir {
                    if d == root || !d.starts_with(root) {
                        break;
                    }
                    pinned.push(d.to_path_buf());
                    dir = d.parent();
                }
            }
        }
        pinned.sort_by_key(|p| p.components().count());
        pinned.dedup();
        pinned
    }
}

/// Where commands may write: the working directory, the person's home, the temporary
/// directories, `terminal.allowed_roots` and what is exposed; nothing inside the gateway's
/// home but a working directory handed in.
fn writable_roots(facts: &Facts) -> Vec<PathBuf> {
    let home = &facts.hermes_home;
    let mut writable = vec![facts.cwd.clone()];
    writable.extend(facts.person_home.iter().filter(|p| **p != *home).cloned());
    writable.extend(["/tmp", "/var/tmp", "/dev/shm"].map(PathBuf::from));
    writable.extend(facts.allowed_roots.iter().cloned());
    writable.extend(facts.exposed.iter().cloned());
    // Nothing inside the home, but a working directory handed in.
    writable.retain(|w| !w.starts_with(home) || (*w == facts.cwd && w != home));
    dedup_roots(writable)
}

/// The links on the way to `path` (itself included).
fn links_on_the_way(path: &Path) -> Vec<PathBuf> {
    path.ancestors()
        .filter(|a| std::fs::symlink_metadata(a).is_ok_and(|m| m.file_type().is_symlink()))
        .map(Path::to_path_buf)
        .collect()
}

/// The roots, each once, none inside another.
fn dedup_roots(mut roots: Vec<PathBuf>) -> Vec<PathBuf> {
    roots.sort_by_key(|p| p.components().count());
    let mut kept: Vec<PathBuf> = Vec::new();
    for root in roots {
        if !kept.iter().any(|k| root.starts_with(k)) {
            kept.push(root);
        }
    }
    kept
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(dir: &Path) -> Facts {
        let person = dir.join("person");
        let home = person.join(".hermes");
        std::fs::create_dir_all(home.join("cache/documents")).unwrap();
        std::fs::create_dir_all(home.join("skills")).unwrap();
        std::fs::create_dir_all(person.join(".config/systemd/user")).unwrap();
        std::fs::create_dir_all(person.join(".cargo/bin")).unwrap();
        std::fs::write(person.join(".cargo/bin/hermes-gateway"), "").unwrap();
        Facts {
            given_home: home.clone(),
            hermes_home: home,
            person_home: Some(person.clone()),
            given_person_home: Some(person.clone()),
            cwd: person.clone(),
            program: Some(person.join(".cargo/bin/hermes-gateway")),
            ..Facts::default()
        }
    }

    #[test]
    fn the_home_is_covered_and_its_documents_and_skills_handed_back_read_only() {
        let dir = tempfile::tempdir().unwrap();
        let f = facts(dir.path());
        let layout = Layout::work_out(&f);
        assert_eq!(layout.covered[0], f.hermes_home);
        assert!(layout.hides(&f.hermes_home.join(".env")));
        assert!(layout.hides(&f.hermes_home.join("gateway.db-wal")));
        assert!(!layout.hides(&f.hermes_home.join("cache/documents/report.pdf")));
        let documents = f.hermes_home.join("cache/documents");
        assert!(layout.handed_in.contains(&HandIn {
            path: documents,
            writable: false
        }));
        assert!(!layout.hides(&f.cwd));
    }

    #[test]
    fn a_profiles_jail_covers_every_other_home_and_hands_back_only_its_own() {
        let dir = tempfile::tempdir().unwrap();
        let root = facts(dir.path()).hermes_home;
        let (own, other) = (root.join("profiles/work"), root.join("profiles/home"));
        for home in [&own, &other] {
            std::fs::create_dir_all(home.join("cache/documents")).unwrap();
            std::fs::create_dir_all(home.join("workspace")).unwrap();
        }
        let f = Facts {
            hermes_home: own.clone(),
            given_home: own.clone(),
            cwd: own.join("workspace"),
            ..facts(dir.path())
        }
        .with_other_homes(&[root.clone(), other.clone()]);
        let layout = Layout::work_out(&f);
        assert!(layout.hides(&root.join(".env")), "the home it lives in");
        assert!(
            layout.hides(&other.join("memories/MEMORY.md")),
            "a sibling profile"
        );
        assert!(layout.hides(&other.join("cache/documents/x.pdf")));
        assert!(layout.hides(&own.join(".env")), "its own secrets too");
        assert!(!layout.hides(&own.join("workspace/notes.txt")));
        assert!(!layout.hides(&own.join("cache/documents/x.pdf")));
        assert!(
            layout.hides(&root.join("cache/documents/x.pdf")),
            "the default profile's documents"
        );
    }

    #[test]
    fn the_program_and_the_user_units_are_read_only_and_the_directories_above_pinned() {
        let dir = tempfile::tempdir().unwrap();
        let f = facts(dir.path());
        let layout = Layout::work_out(&f);
        let person = f.person_home.clone().unwrap();
        assert!(layout.read_only.contains(f.program.as_ref().unwrap()));
        assert!(layout.read_only.contains(&person.join(".config/systemd")));
        // Renaming ~/.cargo/bin away and putting another program in its place is what
        // the pins stop.
        assert!(layout.pinned.contains(&person.join(".cargo")));
        assert!(layout.pinned.contains(&person.join(".cargo/bin")));
        assert!(layout.pinned.contains(&person.join(".config")));
        for root in &layout.writable {
            assert!(
                !layout.pinned.contains(root),
                "a writable root is not pinned"
            );
        }
    }

    #[test]
    fn a_working_directory_inside_the_home_is_handed_in_writable() {
        let dir = tempfile::tempdir().unwrap();
        let mut f = facts(dir.path());
        f.person_home = Some(f.hermes_home.clone());
        f.cwd = f.hermes_home.join("workspace");
        let layout = Layout::work_out(&f);
        assert!(layout.handed_in.contains(&HandIn {
            path: f.cwd.clone(),
            writable: true
        }));
        assert!(!layout.hides(&f.cwd.join("notes.txt")));
        assert!(layout.hides(&f.hermes_home.join("config.yaml")));
        assert!(layout.writable.iter().any(|w| f.cwd.starts_with(w)));
        assert!(
            !layout.writable.contains(&f.hermes_home),
            "{:?}",
            layout.writable
        );
    }

    #[test]
    fn what_a_login_runs_and_ssh_are_read_only_and_a_link_among_them_is_said() {
        let dir = tempfile::tempdir().unwrap();
        let f = facts(dir.path());
        let person = f.person_home.clone().unwrap();
        std::fs::write(person.join(".bashrc"), "").unwrap();
        std::fs::create_dir(person.join(".ssh")).unwrap();
        let dotfiles = dir.path().join("dotfiles");
        std::fs::create_dir(&dotfiles).unwrap();
        std::fs::write(dotfiles.join("profile"), "").unwrap();
        std::os::unix::fs::symlink(dotfiles.join("profile"), person.join(".profile")).unwrap();
        let layout = Layout::work_out(&f);
        assert!(layout.read_only.contains(&person.join(".bashrc")));
        assert!(layout.read_only.contains(&person.join(".ssh")));
        assert!(layout.read_only.contains(&dotfiles.join("profile")));
        assert!(
            layout.weak.iter().any(|w| w.contains(".profile is a link")),
            "{:?}",
            layout.weak
        );
    }

    #[test]
    fn a_home_reached_through_a_link_in_the_persons_home_is_said() {
        let dir = tempfile::tempdir().unwrap();
        let mut f = facts(dir.path());
        let person = f.person_home.clone().unwrap();
        let real = dir.path().join("data-hermes");
        std::fs::rename(&f.hermes_home, &real).unwrap();
        std::os::unix::fs::symlink(&real, person.join(".hermes")).unwrap();
        f.hermes_home = real.clone();
        f.given_home = person.join(".hermes");
        let layout = Layout::work_out(&f);
        assert_eq!(layout.covered[0], real);
        assert!(
            layout.weak.iter().any(|w| w.contains("reached through")),
            "{:?}",
            layout.weak
        );
    }

    #[test]
    fn a_handed_in_place_that_is_a_link_is_not_handed_in() {
        let dir = tempfile::tempdir().unwrap();
        let f = facts(dir.path());
        let elsewhere = dir.path().join("my-skills");
        std::fs::create_dir(&elsewhere).unwrap();
        std::fs::remove_dir(f.hermes_home.join("skills")).unwrap();
        std::os::unix::fs::symlink(&elsewhere, f.hermes_home.join("skills")).unwrap();
        let layout = Layout::work_out(&f);
        assert!(
            !layout.handed_in.iter().any(|h| h.path.ends_with("skills")),
            "{layout:?}"
        );
        // …and what it leads to is hidden, as every place the home links to.
        let elsewhere = std::fs::canonicalize(elsewhere).unwrap();
        assert!(layout.covered.contains(&elsewhere), "{layout:?}");
    }

    #[test]
    fn the_daemon_users_tmux_directory_in_tmp_is_covered() {
        let dir = tempfile::tempdir().unwrap();
        let mut f = facts(dir.path());
        // A user id nobody has, so the directory is this test's own.
        f.uid = 4_242_421;
        let tmux = PathBuf::from("/tmp/tmux-4242421");
        std::fs::create_dir_all(&tmux).unwrap();
        let layout = Layout::work_out(&f);
        let _ = std::fs::remove_dir(&tmux);
        assert!(layout.covered.contains(&tmux), "{layout:?}");
    }

    #[test]
    fn a_secret_the_home_links_to_is_hidden_where_it_lives() {
        let dir = tempfile::tempdir().unwrap();
        let f = facts(dir.path());
        let elsewhere = dir.path().join("secrets.env");
        std::fs::write(&elsewhere, "TOKEN=x").unwrap();
        std::os::unix::fs::symlink(&elsewhere, f.hermes_home.join(".env")).unwrap();
        let layout = Layout::work_out(&f);
        let elsewhere = std::fs::canonicalize(elsewhere).unwrap();
        assert!(layout.nulled.contains(&elsewhere), "{layout:?}");
    }

    #[test]
    fn sockets_and_the_runtime_directory_are_closed_unless_exposed() {
        let dir = tempfile::tempdir().unwrap();
        let mut f = facts(dir.path());
        let runtime = dir.path().join("run-user");
        std::fs::create_dir_all(&runtime).unwrap();
        let agent = dir.path().join("agent.sock");
        std::fs::write(&agent, "").unwrap();
        f.runtime_dirs = vec![runtime.clone()];
        f.ssh_agent = Some(agent.clone());
        let layout = Layout::work_out(&f);
        assert!(layout.emptied.contains(&runtime));
        assert!(layout.nulled.contains(&agent));

        f.exposed = vec![agent.clone(), runtime.clone()];
        let layout = Layout::work_out(&f);
        assert!(!layout.emptied.contains(&runtime));
        assert!(!layout.nulled.contains(&agent));
    }
}
