//! Confinement of every process started on the agent's behalf (`terminal`, background
//! processes, `execute_code`, MCP stdio servers, and whatever those start): the one module
//! every spawn site goes through (invariant 14, `docs/security.md`).
//!
//! A session's commands share one *jail* ([`Jail`]): user, mount, PID and IPC namespaces
//! (and a network namespace with `terminal.network: false`) held open by a small holder
//! process ([`holder`]), in which the gateway's home does not exist and the doors the
//! daemon's user holds are closed ([`layout`]); each command joins it ([`enter`]) with no
//! capability, `no_new_privs` and a Landlock ruleset ([`rules`]). Where the kernel refuses
//! user namespaces, Landlock alone does what it can; where neither works, `auto` runs
//! commands unconfined and says so loudly, `required` refuses them.

mod enter;
pub mod holder;
pub mod layout;
pub mod rules;
pub mod seccomp;
pub mod spawn;
pub mod workspace;

use std::collections::{HashMap, HashSet};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
use tokio::process::{Child, ChildStdin, ChildStdout};

pub use holder::HOLDER_ARG;
use holder::HolderSpec;
use layout::{Facts, Layout};
pub use spawn::{AgentProcess, Program};

use crate::config::{SandboxMode, TerminalConfig};

/// A jail nobody used for this long is let go (a new command makes a new one).
const JAIL_IDLE: Duration = Duration::from_secs(300);
/// The longest a holder may take to build its jail.
const HOLDER_TIMEOUT: Duration = Duration::from_secs(10);
/// Variables that lead to doors a confined command must not find: the user's D-Bus (in
/// the runtime directory), the ssh-agent.
const DOOR_VARIABLES: &[&str] = &["DBUS_SESSION_BUS_ADDRESS", "SSH_AUTH_SOCK"];

/// What confines commands on this host, found by trying it once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Level {
    /// A jail per session, with Landlock on top where the kernel has it.
    Jailed {
        landlock: Option<i32>,
        /// The jail has a `/proc` of its own (the daemon is not even listed).
        own_proc: bool,
        /// What this host leaves open all the same (an old Landlock, a daemon running as
        /// root without Landlock, protected places reached through links).
        open: Vec<String>,
    },
    /// Landlock alone: this host refuses user namespaces (`why`).
    LandlockOnly { abi: i32, why: String },
    /// Nothing: neither works here (`why`).
    Unconfined { why: String },
    /// `terminal.sandbox: off`.
    Off,
}

impl Level {
    /// The start-up line: what is in force.
    pub fn describe(&self, network: bool) -> String {
        let network = if network {
            "network shared"
        } else {
            "no network"
        };
        match self {
            Level::Jailed {
                landlock,
                own_proc,
                open,
            } => {
                let proc = if *own_proc {
                    ""
                } else {
                    " (the host's /proc: the daemon is listed, not reachable)"
                };
                let landlock = match landlock {
                    Some(abi) => format!(" + Landlock ABI {abi}"),
                    None => " (no Landlock on this kernel)".to_owned(),
                };
                let mut line =
                    format!("confined: user, mount and PID namespaces{proc}{landlock}, {network}");
                if !open.is_empty() {
                    line.push_str("; but ");
                    line.push_str(&open.join("; "));
                }
                line
            }
            Level::LandlockOnly { abi, why } => {
                let scoped = if *abi >= rules::SCOPES_ABI {
                    ""
                } else {
                    ", without scoping signals (the daemon can be signalled)"
                };
                format!(
                    "partly confined: Landlock ABI {abi} only ({why}){scoped}; see docs/security.md for what that leaves open"
                )
            }
            Level::Unconfined { why } => format!(
                "NOT confined: {why}; commands the agent runs can read the gateway's secrets"
            ),
            Level::Off => "NOT confined: terminal.sandbox is off; commands the agent runs can read the gateway's secrets".into(),
        }
    }

    /// Whether commands get the full confinement.
    pub fn is_jailed(&self) -> bool {
        matches!(self, Level::Jailed { .. })
    }
}

/// Why a command may not run at all (`terminal.sandbox: required` without a jail).
#[derive(Debug, Clone, thiserror::Error)]
#[error("{0}")]
pub struct Refused(pub String);

/// One session's jail, held open while anything uses it.
pub struct Jail {
    /// The jail's PID 1, which commands join through.
    pidfd: OwnedFd,
    /// The holder's first process, the jail's parent (it ends with the jail; tokio reaps
    /// it once this handle is dropped).
    _holder: tokio::process::Child,
    /// The holder's standard input: closing it ends the jail and everything in it.
    _lifeline: tokio::process::ChildStdin,
    /// The namespaces a command joins.
    namespaces: libc::c_int,
    /// The Landlock ruleset every command of the jail is restricted with.
    ruleset: Option<OwnedFd>,
    drop_groups: bool,
    /// The jail has a `/proc` of its own.
    own_proc: bool,
    /// Protected places reached through links (said at start-up).
    weak: Vec<String>,
}

impl Jail {
    /// Whether the holder still runs (its pidfd is readable once it ended).
    fn alive(&self) -> bool {
        let mut poll = libc::pollfd {
            fd: self.pidfd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd, no wait.
        unsafe { libc::poll(&mut poll, 1, 0) == 0 }
    }
}

/// How one command is confined: it is started with [`Sandbox::spawn`], and the sandbox is
/// kept as long as the command runs (it holds the jail open).
#[derive(Clone)]
pub struct Sandbox {
    kind: Kind,
    /// The agent's `$HOME`, when it is not the daemon's.
    agent_home: Option<PathBuf>,
}

#[derive(Clone)]
enum Kind {
    Unconfined,
    /// Landlock alone, with this command's ruleset.
    Landlocked(Arc<OwnedFd>),
    Jailed(Arc<Jail>),
}

impl Sandbox {
    /// No confinement (`terminal.sandbox: off`, or nothing works on this host).
    pub fn unconfined() -> Sandbox {
        Sandbox {
            kind: Kind::Unconfined,
            agent_home: None,
        }
    }

    /// Start `program` in this confinement: the environment's doors removed, the agent's
    /// home, the jail joined and the restrictions taken ([`enter`]). The process keeps the
    /// sandbox (a jail stays open while it runs).
    pub fn spawn(&self, program: &Program) -> std::io::Result<AgentProcess> {
        let mut changes: Vec<(std::ffi::OsString, Option<std::ffi::OsString>)> = Vec::new();
        let confining = match &self.kind {
            Kind::Unconfined => spawn::Confining {
                jail: None,
                drop_groups: false,
                ruleset: None,
                restricted: false,
            },
            Kind::Landlocked(ruleset) => {
                changes.push(("XDG_RUNTIME_DIR".into(), None));
                spawn::Confining {
                    jail: None,
                    drop_groups: nix::unistd::getuid().is_root(),
                    ruleset: Some(ruleset.as_raw_fd()),
                    restricted: true,
                }
            }
            Kind::Jailed(jail) => spawn::Confining {
                jail: Some((jail.pidfd.as_raw_fd(), jail.namespaces)),
                drop_groups: jail.drop_groups,
                ruleset: jail.ruleset.as_ref().map(|r| r.as_raw_fd()),
                restricted: true,
            },
        };
        if !matches!(self.kind, Kind::Unconfined) {
            changes.extend(DOOR_VARIABLES.iter().map(|name| (name.into(), None)));
            if let Some(home) = &self.agent_home {
                changes.push(("HOME".into(), Some(home.clone().into_os_string())));
            }
        }
        spawn::start(program, &changes, &confining, self.clone())
    }
}

/// The configuration a jail's layout comes from.
#[derive(Clone)]
struct Inputs {
    hermes_home: PathBuf,
    /// The other gateways' homes in this process (profiles): covered as the own one.
    other_homes: Vec<PathBuf>,
    cwd: PathBuf,
    allowed_roots: Vec<PathBuf>,
    exposed: Vec<PathBuf>,
}

impl Inputs {
    /// The layout now.
    fn layout(&self) -> Layout {
        Layout::work_out(
            &Facts::of_this_process(
                &self.hermes_home,
                &self.cwd,
                &self.allowed_roots,
                &self.exposed,
            )
            .with_other_homes(&self.other_homes),
        )
    }
}

/// A jail kept for a session between its commands.
struct Kept {
    jail: Arc<Jail>,
    used: Instant,
}

/// The daemon's confinement: what is in force, and the sessions' jails.
pub struct Confinement {
    mode: SandboxMode,
    network: bool,
    /// What the layout is worked out from, again for each jail (what is on disk changes:
    /// a login makes the user manager's runtime directory, a socket comes or goes).
    inputs: Inputs,
    /// The program started as the holder (this one, `/proc/self/exe`).
    holder: PathBuf,
    /// The daemon's user and group, and what they are inside a jail.
    ids: (u32, u32, u32, u32),
    /// The agent's `$HOME` when the daemon's is the gateway's home (the system service).
    agent_home: Option<PathBuf>,
    /// Where commands work (`terminal.cwd`), resolved.
    working_directory: PathBuf,
    level: tokio::sync::OnceCell<Level>,
    jails: Mutex<HashMap<String, Kept>>,
    /// Sessions already told that commands cannot run here.
    told: Mutex<HashSet<String>>,
}

impl Confinement {
    /// The confinement `terminal` asks for, for a daemon whose home is `hermes_home`, in a
    /// process that also runs gateways at `other_homes` (profiles).
    pub fn new(
        terminal: &TerminalConfig,
        hermes_home: &Path,
        other_homes: &[PathBuf],
    ) -> Confinement {
        if terminal.sandbox != SandboxMode::Off {
            layout::make_protectable(hermes_home);
        }
        let facts = Facts::of_this_process(
            hermes_home,
            &terminal.cwd,
            &terminal.allowed_roots,
            &terminal.sandbox_expose,
        )
        .with_other_homes(other_homes);
        // Commands' `$HOME` is their working directory when the daemon's lies in a
        // gateway's home (the system service's), or when a profile works in its own
        // workspace (its files apart from the others').
        let in_a_gateway_home = |path: &PathBuf| {
            path.starts_with(&facts.hermes_home)
                || facts.other_homes.iter().any(|h| path.starts_with(h))
        };
        let works_apart = !facts.other_homes.is_empty()
            && facts.cwd == facts.hermes_home.join(crate::home::WORKSPACE);
        let agent_home = (facts.person_home.as_ref().is_some_and(in_a_gateway_home) || works_apart)
            .then(|| facts.cwd.clone());
        let (uid, gid) = (
            nix::unistd::getuid().as_raw(),
            nix::unistd::getgid().as_raw(),
        );
        let inside = |id: u32| {
            if id == 0 {
                holder::INSIDE_ID_FOR_ROOT
            } else {
                id
            }
        };
        Confinement {
            mode: terminal.sandbox,
            network: terminal.network,
            inputs: Inputs {
                hermes_home: hermes_home.to_path_buf(),
                other_homes: other_homes.to_vec(),
                cwd: terminal.cwd.clone(),
                allowed_roots: terminal.allowed_roots.clone(),
                exposed: terminal.sandbox_expose.clone(),
            },
            holder: holder::program(),
            ids: (uid, gid, inside(uid), inside(gid)),
            agent_home,
            working_directory: facts.cwd.clone(),
            level: tokio::sync::OnceCell::new(),
            jails: Mutex::new(HashMap::new()),
            told: Mutex::new(HashSet::new()),
        }
    }

    /// A confinement that confines nothing (`terminal.sandbox: off`), for tests of what
    /// spawns processes.
    pub fn disabled() -> Confinement {
        Confinement {
            mode: SandboxMode::Off,
            network: true,
            inputs: Inputs {
                hermes_home: std::env::temp_dir(),
                other_homes: Vec::new(),
                cwd: std::env::temp_dir(),
                allowed_roots: Vec::new(),
                exposed: Vec::new(),
            },
            holder: holder::program(),
            ids: (0, 0, 0, 0),
            agent_home: None,
            working_directory: std::env::temp_dir(),
            level: tokio::sync::OnceCell::new(),
            jails: Mutex::new(HashMap::new()),
            told: Mutex::new(HashSet::new()),
        }
    }

    pub fn mode(&self) -> SandboxMode {
        self.mode
    }

    pub fn network(&self) -> bool {
        self.network
    }

    /// Where commands work, and where MCP servers are started.
    pub fn working_directory(&self) -> &Path {
        &self.working_directory
    }

    /// What is in force (tried once, on first use).
    pub async fn level(&self) -> &Level {
        self.level.get_or_init(|| self.probe()).await
    }

    /// The level if it is known yet.
    pub fn known_level(&self) -> Option<&Level> {
        self.level.get()
    }

    /// A loud warning when commands are not fully confined, for start-up, `check-config`,
    /// `/status` and `/readyz`.
    pub async fn warning(&self) -> Option<String> {
        let level = self.level().await;
        if let Level::Jailed { open, .. } = level {
            return (!open.is_empty()).then(|| level.describe(self.network));
        }
        Some(match (self.mode, level) {
            (SandboxMode::Required, _) => format!(
                "terminal.sandbox is required but this host cannot confine commands ({}); the agent's commands are refused",
                level.describe(self.network)
            ),
            _ => level.describe(self.network),
        })
    }

    /// Try the confinement once: a jail, else Landlock alone, else nothing.
    async fn probe(&self) -> Level {
        if self.mode == SandboxMode::Off {
            return Level::Off;
        }
        let landlock = rules::kernel_abi();
        let why_not_jailed = match self.open_jail().await {
            Ok(jail) => {
                let own_proc = jail.own_proc;
                let mut open = jail.weak.clone();
                match landlock {
                    None if self.ids.0 == 0 => open.push(
                        "without Landlock, commands of a daemon running as root can change the system's files".into(),
                    ),
                    Some(abi) if abi < rules::SCOPES_ABI && self.network => open.push(format!(
                        "Landlock ABI {abi} cannot keep commands from the host's abstract Unix sockets (a D-Bus session bus started by dbus-launch among them)"
                    )),
                    _ => {}
                }
                match self
                    .try_run(&self.with_kind(Kind::Jailed(Arc::new(jail))))
                    .await
                {
                    Ok(()) => {
                        return Level::Jailed {
                            landlock,
                            own_proc,
                            open,
                        };
                    }
                    Err(why) => why,
                }
            }
            Err(why) => why,
        };
        tracing::debug!(why = %why_not_jailed, "confine: no jail on this host");
        let Some(abi) = landlock else {
            return Level::Unconfined {
                why: format!("{why_not_jailed}, and this kernel has no Landlock"),
            };
        };
        match self.landlocked().await {
            Ok(sandbox) => match self.try_run(&sandbox).await {
                Ok(()) => Level::LandlockOnly {
                    abi,
                    why: why_not_jailed,
                },
                Err(why) => Level::Unconfined {
                    why: format!("{why_not_jailed}; Landlock: {why}"),
                },
            },
            Err(why) => Level::Unconfined {
                why: format!("{why_not_jailed}; Landlock: {why}"),
            },
        }
    }

    /// Run `sh -c 'exit 0'` confined, to see that it works.
    async fn try_run(&self, sandbox: &Sandbox) -> Result<(), String> {
        let mut program = Program::new("/bin/sh");
        program.args(["-c", "exit 0"]).env_clear().current_dir("/");
        let process = sandbox
            .spawn(&program)
            .map_err(|e| format!("a command in it could not start: {e}"))?;
        let output = tokio::time::timeout(HOLDER_TIMEOUT, process.output())
            .await
            .map_err(|_| "a command in it did not end".to_owned())?
            .map_err(|e| format!("a command in it could not be waited for: {e}"))?;
        if output.status.success() {
            Ok(())
        } else {
            Err(format!(
                "a command in it failed ({}): {}",
                output.status,
                String::from_utf8_lossy(&output.stderr).trim()
            ))
        }
    }

    /// How a command of session `key` is confined; `Err` when it must not run.
    pub async fn sandbox(&self, key: &str) -> Result<Sandbox, Refused> {
        let level = self.level().await.clone();
        match (&level, self.mode) {
            (Level::Jailed { .. }, _) => self
                .jail_for(key)
                .await
                .map(|jail| self.with_kind(Kind::Jailed(jail))),
            (_, SandboxMode::Required) => Err(Refused(format!(
                "this command was not run: terminal.sandbox is `required` and this host cannot confine commands ({})",
                level.describe(self.network)
            ))),
            (Level::LandlockOnly { .. }, _) => self.landlocked().await.map_err(|why| {
                Refused(format!(
                    "this command was not run: it could not be confined: {why}"
                ))
            }),
            (Level::Unconfined { .. } | Level::Off, _) => Ok(Sandbox::unconfined()),
        }
    }

    fn with_kind(&self, kind: Kind) -> Sandbox {
        Sandbox {
            kind,
            agent_home: self.agent_home.clone(),
        }
    }

    /// Whether session `key` must still be told that its commands cannot run here (true
    /// once per session).
    pub fn first_refusal(&self, key: &str) -> bool {
        let mut told = self.told.lock().expect("told lock");
        if told.len() > 4096 {
            told.clear();
        }
        told.insert(key.to_owned())
    }

    /// The jail of session `key`: the one it has, or a new one.
    async fn jail_for(&self, key: &str) -> Result<Arc<Jail>, Refused> {
        self.release_idle();
        if let Some(kept) = self.jails.lock().expect("jails lock").get_mut(key) {
            kept.used = Instant::now();
            return Ok(kept.jail.clone());
        }
        let jail = Arc::new(self.open_jail().await.map_err(|why| {
            Refused(format!(
                "this command was not run: its confinement could not be made: {why}"
            ))
        })?);
        let mut jails = self.jails.lock().expect("jails lock");
        // Another command of the session may have made one meanwhile: keep that one.
        let kept = jails.entry(key.to_owned()).or_insert(Kept {
            jail,
            used: Instant::now(),
        });
        Ok(kept.jail.clone())
    }

    /// Let go of the jails nobody holds and nobody used for a while, and of dead ones (the
    /// daemon calls this every minute too).
    pub fn release_idle(&self) {
        let now = Instant::now();
        self.jails.lock().expect("jails lock").retain(|_, kept| {
            kept.jail.alive()
                && (Arc::strong_count(&kept.jail) > 1 || now.duration_since(kept.used) < JAIL_IDLE)
        });
    }

    /// Start a holder and wait until its jail is built.
    async fn open_jail(&self) -> Result<Jail, String> {
        let spec = self.holder_spec().await?;
        let (mut child, mut lifeline, stdout) = self.start_holder()?;
        let mut line = serde_json::to_string(&spec).map_err(|e| e.to_string())?;
        line.push('\n');
        let talked =
            tokio::time::timeout(HOLDER_TIMEOUT, talk_to_holder(&mut lifeline, stdout, &line))
                .await;
        let (pid, own_proc) = match talked {
            Ok(Ok(found)) => found,
            Ok(Err(why)) => return Err(why),
            Err(_) => {
                // A jail half built ends with its holder (its PID 1 dies with it).
                let _ = child.start_kill();
                return Err("the jail's holder took too long".to_owned());
            }
        };
        let pidfd = join_holder(pid, &child)?;
        let ruleset = self.jail_ruleset(&spec.layout, pid).await?;
        Ok(Jail {
            pidfd,
            _holder: child,
            _lifeline: lifeline,
            namespaces: self.namespaces(),
            ruleset,
            drop_groups: spec.drop_groups,
            own_proc,
            weak: spec.layout.weak,
        })
    }

    /// What the holder is to build: the daemon's ids, the network, and the layout worked
    /// out now (off the runtime's threads: it looks at the disk).
    async fn holder_spec(&self) -> Result<HolderSpec, String> {
        let (outer_uid, outer_gid, inside_uid, inside_gid) = self.ids;
        let inputs = self.inputs.clone();
        let layout = tokio::task::spawn_blocking(move || inputs.layout())
            .await
            .map_err(|e| e.to_string())?;
        Ok(HolderSpec {
            outer_uid,
            outer_gid,
            inside_uid,
            inside_gid,
            drop_groups: outer_uid == 0,
            network: self.network,
            layout,
        })
    }

    /// Start the holder with an empty environment: its standard input is the jail's
    /// lifeline, its standard output where it speaks.
    fn start_holder(&self) -> Result<(Child, ChildStdin, ChildStdout), String> {
        let mut child = tokio::process::Command::new(&self.holder)
            .arg(HOLDER_ARG)
            .env_clear()
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .map_err(|e| format!("the jail's holder could not start: {e}"))?;
        let lifeline = child.stdin.take().expect("piped stdin");
        let stdout = child.stdout.take().expect("piped stdout");
        Ok((child, lifeline, stdout))
    }

    /// The Landlock ruleset of the jail whose PID 1 is `pid`, where the kernel has
    /// Landlock. The rules name the jail's own places (its /dev/shm, /dev/pts, /proc are
    /// mounts of its own, other inodes than the daemon's), so they are opened through its
    /// root.
    async fn jail_ruleset(
        &self,
        layout: &Layout,
        pid: libc::pid_t,
    ) -> Result<Option<OwnedFd>, String> {
        if rules::kernel_abi().is_none() {
            return Ok(None);
        }
        let layout = layout.clone();
        let network = self.network;
        let root = PathBuf::from(format!("/proc/{pid}/root"));
        let ruleset = tokio::task::spawn_blocking(move || {
            rules::ruleset(&rules::Policy {
                layout: &layout,
                guard_reads: false,
                network,
                scope_signals: false,
                root: Some(&root),
            })
        })
        .await
        .map_err(|e| e.to_string())??;
        Ok(Some(ruleset))
    }

    /// The namespaces a command joins: the network's too when it is not shared.
    fn namespaces(&self) -> libc::c_int {
        let mut namespaces =
            libc::CLONE_NEWUSER | libc::CLONE_NEWNS | libc::CLONE_NEWPID | libc::CLONE_NEWIPC;
        if !self.network {
            namespaces |= libc::CLONE_NEWNET;
        }
        namespaces
    }

    /// Landlock alone, for one command (the ruleset is made again for each, so what the
    /// person's home holds now is what counts).
    async fn landlocked(&self) -> Result<Sandbox, String> {
        let inputs = self.inputs.clone();
        let network = self.network;
        let ruleset = tokio::task::spawn_blocking(move || {
            rules::ruleset(&rules::Policy {
                layout: &inputs.layout(),
                guard_reads: true,
                network,
                scope_signals: true,
                root: None,
            })
        })
        .await
        .map_err(|e| e.to_string())??;
        Ok(self.with_kind(Kind::Landlocked(Arc::new(ruleset))))
    }
}

/// Hand the holder its `line` (the spec) and read until it has said both its jail's pid
/// and that the jail is ready (with whether it has a `/proc` of its own).
async fn talk_to_holder(
    lifeline: &mut ChildStdin,
    stdout: ChildStdout,
    line: &str,
) -> Result<(libc::pid_t, bool), String> {
    lifeline
        .write_all(line.as_bytes())
        .await
        .map_err(|e| format!("the jail's holder: {e}"))?;
    let mut lines = tokio::io::BufReader::new(stdout).lines();
    // Two processes speak: the first gives the pid, the jail's PID 1 says when it is
    // ready; in either order.
    let (mut pid, mut ready) = (None, None);
    while pid.is_none() || ready.is_none() {
        let Some(line) = lines.next_line().await.map_err(|e| e.to_string())? else {
            return Err("the jail's holder ended without a word".to_owned());
        };
        if let Some(n) = line.strip_prefix("pid ") {
            pid = n.trim().parse::<libc::pid_t>().ok();
        } else if let Some(own_proc) = line.strip_prefix("ready own_proc=") {
            ready = Some(own_proc.trim() == "true");
        } else if let Some(why) = line.strip_prefix("error ") {
            return Err(why.to_owned());
        }
    }
    Ok((pid.unwrap_or_default(), ready.unwrap_or_default()))
}

/// A pidfd of the jail's PID 1 (`pid`), once it is sure to be the jail's: the pid is the
/// jail's only while the holder's first process (`child`) is its parent.
fn join_holder(pid: libc::pid_t, child: &Child) -> Result<OwnedFd, String> {
    // SAFETY: pidfd_open(2) on the holder's pid; the descriptor is owned from here.
    let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0u32) };
    if pidfd < 0 {
        return Err(format!(
            "the jail's holder: {}",
            std::io::Error::last_os_error()
        ));
    }
    // SAFETY: a descriptor just returned by the kernel.
    let pidfd = unsafe { OwnedFd::from_raw_fd(pidfd as i32) };
    let parent = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("PPid:"))
                .and_then(|p| p.trim().parse::<u32>().ok())
        });
    if parent.is_none() || parent != child.id() {
        return Err("the jail's holder ended while it was being joined".into());
    }
    Ok(pidfd)
}
