//! `hermes-gateway service …`: the gateway as a systemd service. `install` writes the unit
//! (`unit.rs`), reloads systemd and enables and starts it (`--dry-run` prints all of that
//! instead); `uninstall`, `start`, `stop`, `restart` are `systemctl`; `status` shows
//! systemd's view and the daemon's own (from its HTTP server's `/status`); `logs` is
//! `journalctl`. A machine without systemd, or a system install without root, is told so.

pub mod unit;

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use clap::{Args, Subcommand};

use unit::{SERVICE, SYSTEM_HOME, SYSTEM_USER, Scope, UnitSpec};

#[derive(Subcommand)]
pub enum ServiceAction {
    /// Write the unit, reload systemd, enable and start it
    Install {
        #[command(flatten)]
        scope: ScopeArgs,
        /// Print the unit and the commands instead of running them
        #[arg(long)]
        dry_run: bool,
    },
    /// Stop and disable the service and remove its unit
    Uninstall {
        #[command(flatten)]
        scope: ScopeArgs,
        #[arg(long)]
        dry_run: bool,
    },
    /// systemctl start
    Start(ScopeArgs),
    /// systemctl stop
    Stop(ScopeArgs),
    /// systemctl restart
    Restart(ScopeArgs),
    /// systemd's view of the service and the daemon's own (platforms, sessions, queues)
    Status(ScopeArgs),
    /// The service's log (journalctl)
    Logs {
        #[command(flatten)]
        scope: ScopeArgs,
        /// Keep printing new lines
        #[arg(short, long)]
        follow: bool,
        /// Only lines since this time ("1 hour ago", "2026-11-24 08:00")
        #[arg(long)]
        since: Option<String>,
    },
}

/// Which service manager: the person's (default) or the machine's.
#[derive(Args, Clone, Copy, Default)]
pub struct ScopeArgs {
    /// The user service (systemctl --user); the default
    #[arg(long)]
    user: bool,
    /// The system service with its own user (needs root)
    #[arg(long, conflicts_with = "user")]
    system: bool,
}

/// Run a `service` action; `home` is the `--home` given, if any.
pub fn run(action: ServiceAction, home: Option<PathBuf>) -> ExitCode {
    let result = match action {
        ServiceAction::Install { scope, dry_run } => install(scope, home, dry_run),
        ServiceAction::Uninstall { scope, dry_run } => uninstall(scope, dry_run),
        ServiceAction::Start(scope) => systemctl_verb(scope, "start"),
        ServiceAction::Stop(scope) => systemctl_verb(scope, "stop"),
        ServiceAction::Restart(scope) => systemctl_verb(scope, "restart"),
        ServiceAction::Status(scope) => status(scope, home),
        ServiceAction::Logs {
            scope,
            follow,
            since,
        } => logs(scope, follow, since),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(why) => {
            eprintln!("hermes-gateway service: {why}");
            ExitCode::FAILURE
        }
    }
}

/// The scope asked for; without a flag, the one whose unit is installed (the user's first).
fn scope_of(args: ScopeArgs) -> Scope {
    if args.system {
        return Scope::System;
    }
    if args.user {
        return Scope::User;
    }
    let system_installed = unit::unit_path(Scope::System, Path::new("/")).exists();
    let user_installed = user_home().is_some_and(|h| unit::unit_path(Scope::User, &h).exists());
    if system_installed && !user_installed {
        Scope::System
    } else {
        Scope::User
    }
}

fn user_home() -> Option<PathBuf> {
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
}

/// `systemctl` (with `--user` for the user scope) and its arguments.
fn systemctl(scope: Scope, args: &[&str]) -> Vec<String> {
    let mut command = vec!["systemctl".to_owned()];
    if scope == Scope::User {
        command.push("--user".into());
    }
    command.extend(args.iter().map(|a| (*a).to_owned()));
    command
}

/// Run `command`; its output goes to the terminal. `Err` names what failed.
fn execute(command: &[String]) -> Result<(), String> {
    let status = Command::new(&command[0])
        .args(&command[1..])
        .status()
        .map_err(|e| missing_tool(&command[0], &e))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("`{}` failed ({status})", command.join(" ")))
    }
}

fn missing_tool(tool: &str, error: &std::io::Error) -> String {
    if error.kind() == std::io::ErrorKind::NotFound {
        format!(
            "`{tool}` is not installed: this machine does not run systemd. Run `hermes-gateway run` under the supervisor you use instead."
        )
    } else {
        format!("cannot run `{tool}`: {error}")
    }
}

fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

/// What `install` does: the unit, where it goes, and the commands after writing it.
struct Plan {
    unit_path: PathBuf,
    unit: String,
    before: Vec<Vec<String>>,
    after: Vec<Vec<String>>,
    notes: Vec<String>,
}

fn install(args: ScopeArgs, home: Option<PathBuf>, dry_run: bool) -> Result<(), String> {
    let scope = if args.system {
        Scope::System
    } else {
        Scope::User
    };
    if !args.system && !args.user && is_root() && !dry_run {
        return Err(
            "as root, say which: --system (a service with its own user; the usual choice) or --user (root's own user service)"
                .into(),
        );
    }
    if scope == Scope::System && !dry_run && !is_root() {
        return Err(
            "installing the system service needs root: sudo hermes-gateway service install --system"
                .into(),
        );
    }
    let plan = plan_install(scope, home)?;
    if dry_run {
        println!("# {} would be written:", plan.unit_path.display());
        print!("{}", plan.unit);
        println!("# then:");
        for command in plan.before.iter().chain(&plan.after) {
            println!("$ {}", command.join(" "));
        }
        for note in &plan.notes {
            println!("# {note}");
        }
        return Ok(());
    }
    for command in &plan.before {
        execute(command)?;
    }
    if let Some(dir) = plan.unit_path.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    // An edited unit (a line removed on purpose) is kept beside the new one.
    if let Ok(old) = std::fs::read_to_string(&plan.unit_path)
        && old != plan.unit
    {
        let backup = plan.unit_path.with_extension("service.bak");
        std::fs::write(&backup, old)
            .map_err(|e| format!("cannot keep the old unit as {}: {e}", backup.display()))?;
        println!("the unit there before is kept as {}", backup.display());
    }
    std::fs::write(&plan.unit_path, &plan.unit)
        .map_err(|e| format!("cannot write {}: {e}", plan.unit_path.display()))?;
    println!("wrote {}", plan.unit_path.display());
    for command in &plan.after {
        execute(command)?;
    }
    for note in &plan.notes {
        println!("{note}");
    }
    Ok(())
}

/// Work out what `install` does for `scope`; `home` is the `--home` given, if any.
fn plan_install(scope: Scope, home: Option<PathBuf>) -> Result<Plan, String> {
    let exe = std::env::current_exe()
        .and_then(|p| p.canonicalize())
        .map_err(|e| format!("cannot tell where this binary is: {e}"))?;
    let home = install_home(scope, home)?;
    let workdir = service_workdir(scope, &home)?;
    let spec = UnitSpec {
        scope,
        exe: exe.display().to_string(),
        home: home.display().to_string(),
        workdir,
    };
    for path in [Some(&spec.exe), Some(&spec.home), spec.workdir.as_ref()]
        .into_iter()
        .flatten()
    {
        unit::check_path(path).map_err(|why| format!("cannot write it into a unit: {why}"))?;
    }
    if scope == Scope::System && ["/tmp", "/var/tmp"].iter().any(|t| home.starts_with(t)) {
        // The unit gives the service a /tmp of its own (PrivateTmp): a home there would
        // be an empty directory to it, and gone at every stop.
        return Err(format!(
            "{} is under a temporary directory, which the system service sees empty (PrivateTmp=yes); choose a home elsewhere (the default is {SYSTEM_HOME})",
            home.display()
        ));
    }
    let mut notes = Vec::new();
    let mut before = Vec::new();
    let unit_path = match scope {
        Scope::User => user_unit_path(&mut notes)?,
        Scope::System => {
            prepare_system_home(&home, &mut before, &mut notes);
            unit::unit_path(Scope::System, Path::new("/"))
        }
    };
    let after = vec![
        systemctl(scope, &["daemon-reload"]),
        systemctl(scope, &["enable", "--now", SERVICE]),
    ];
    Ok(Plan {
        unit_path,
        unit: unit::render(&spec),
        before,
        after,
        notes,
    })
}

/// The service's Hermes home, absolute: the `--home` given, else the scope's default.
fn install_home(scope: Scope, home: Option<PathBuf>) -> Result<PathBuf, String> {
    Ok(match (scope, home) {
        (_, Some(home)) => absolute(&home)?,
        (Scope::User, None) => absolute(&crate::config::default_home())?,
        (Scope::System, None) => PathBuf::from(SYSTEM_HOME),
    })
}

/// The agent's working directory that the system unit must keep writable; `Err` when it
/// is a system directory.
fn service_workdir(scope: Scope, home: &Path) -> Result<Option<String>, String> {
    // The agent's working directory must stay writable under the system unit's sandbox:
    // the one config.yaml names, if it names one (else it is the service user's home,
    // which is writable already). Never a default taken from the installer's own
    // environment.
    let workdir = match scope {
        Scope::System => crate::config::read_key(home, "terminal.cwd"),
        Scope::User => None,
    };
    if let Some(dir) = &workdir {
        let dir = dir.trim_end_matches('/');
        let system_dirs = [
            "", "/etc", "/usr", "/bin", "/sbin", "/lib", "/lib64", "/boot", "/var", "/proc",
            "/sys", "/dev", "/run", "/root", "/home",
        ];
        if system_dirs.contains(&dir) {
            return Err(format!(
                "terminal.cwd is {dir:?}: the system service will not make that writable; give the agent a directory of its own"
            ));
        }
    }
    Ok(workdir)
}

/// Where the user unit goes; a note is added when the service would stop at logout.
fn user_unit_path(notes: &mut Vec<String>) -> Result<PathBuf, String> {
    let user_home = user_home().ok_or("HOME is not set")?;
    if lingering() == Some(false) {
        notes.push(
            "lingering is off: the service stops when you log out. On a server, run `sudo loginctl enable-linger $USER`."
                .into(),
        );
    }
    Ok(unit::unit_path(Scope::User, &user_home))
}

/// For the system service: the commands that make its user and `home` (into `before`),
/// and what the person is told (into `notes`).
fn prepare_system_home(home: &Path, before: &mut Vec<Vec<String>>, notes: &mut Vec<String>) {
    let exists = Command::new("id")
        .arg("-u")
        .arg(SYSTEM_USER)
        .output()
        .is_ok_and(|o| o.status.success());
    if !exists {
        before.push(
            [
                "useradd",
                "--system",
                "--user-group",
                "--home-dir",
                SYSTEM_HOME,
                "--no-create-home",
                "--shell",
                "/usr/sbin/nologin",
                SYSTEM_USER,
            ]
            .map(str::to_owned)
            .to_vec(),
        );
    }
    // systemd makes its state directory; another home is made here, the user's.
    if home != Path::new(SYSTEM_HOME) {
        let owner = format!("{SYSTEM_USER}:{SYSTEM_USER}");
        before.push(vec![
            "install".into(),
            "-d".into(),
            "-o".into(),
            SYSTEM_USER.into(),
            "-g".into(),
            SYSTEM_USER.into(),
            "-m".into(),
            "0700".into(),
            home.display().to_string(),
        ]);
        notes.push(format!("{} belongs to {owner}", home.display()));
    }
    notes.push(format!(
        "put config.yaml and .env in {} (owned by {SYSTEM_USER}, mode 0600), then `hermes-gateway service restart --system`",
        home.display()
    ));
}

fn absolute(path: &Path) -> Result<PathBuf, String> {
    std::path::absolute(path).map_err(|e| format!("{}: {e}", path.display()))
}

/// Whether this user's services keep running after logout; `None` when it cannot be told.
fn lingering() -> Option<bool> {
    let user = std::env::var("USER").ok()?;
    let out = Command::new("loginctl")
        .args(["show-user", &user, "--property=Linger", "--value"])
        .output()
        .ok()?;
    match String::from_utf8_lossy(&out.stdout).trim() {
        "yes" => Some(true),
        "no" => Some(false),
        _ => None,
    }
}

fn uninstall(args: ScopeArgs, dry_run: bool) -> Result<(), String> {
    let scope = scope_of(args);
    if scope == Scope::System && !dry_run && !is_root() {
        return Err("removing the system service needs root".into());
    }
    let user_home = user_home().unwrap_or_default();
    let path = unit::unit_path(scope, &user_home);
    let disable = systemctl(scope, &["disable", "--now", SERVICE]);
    let reload = systemctl(scope, &["daemon-reload"]);
    if dry_run {
        println!("$ {}", disable.join(" "));
        println!("$ rm {}", path.display());
        println!("$ {}", reload.join(" "));
        return Ok(());
    }
    // Disabling a unit that is not there is no reason to keep its file.
    if let Err(why) = execute(&disable) {
        eprintln!("{why}");
    }
    match std::fs::remove_file(&path) {
        Ok(()) => println!("removed {}", path.display()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(format!("cannot remove {}: {e}", path.display())),
    }
    execute(&reload)
}

fn systemctl_verb(args: ScopeArgs, verb: &str) -> Result<(), String> {
    execute(&systemctl(scope_of(args), &[verb, SERVICE]))
}

fn status(args: ScopeArgs, home: Option<PathBuf>) -> Result<(), String> {
    let scope = scope_of(args);
    let command = systemctl(scope, &["status", "--no-pager", SERVICE]);
    // `systemctl status` answers 0 (running), 3 (stopped) or 4 (no such unit): each an
    // answer. Anything else is systemd not answering (not running, no bus), which the
    // caller must hear in the exit status, after what the daemon itself says.
    let systemd = match Command::new(&command[0]).args(&command[1..]).status() {
        Ok(status) if matches!(status.code(), Some(0 | 3 | 4)) => Ok(()),
        Ok(status) => Err(format!(
            "systemd did not answer (`{}` exited with {status})",
            command.join(" ")
        )),
        Err(e) => Err(format!("systemd: {}", missing_tool("systemctl", &e))),
    };
    println!();
    let home = home.unwrap_or_else(|| match scope {
        Scope::System => PathBuf::from(SYSTEM_HOME),
        Scope::User => crate::config::default_home(),
    });
    match daemon_status(&home) {
        Ok(text) => print!("{text}"),
        Err(why) => println!("the daemon: {why}"),
    }
    systemd
}

/// The daemon's own view, from `/status` on its HTTP server.
fn daemon_status(home: &Path) -> Result<String, String> {
    if let Err(e) = std::fs::metadata(home.join("config.yaml"))
        && e.kind() == std::io::ErrorKind::PermissionDenied
    {
        return Err(format!(
            "{} is not readable by you (run with sudo)",
            home.display()
        ));
    }
    let loaded = crate::config::load(home);
    let config = loaded
        .config
        .ok_or("its configuration has errors (run `hermes-gateway check-config`)")?;
    let mut addr = config
        .http
        .listen
        .ok_or("http.listen is off, so it cannot be asked")?;
    if addr.ip().is_unspecified() {
        addr.set_ip(std::net::Ipv4Addr::LOCALHOST.into());
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let body: serde_json::Value = runtime.block_on(async {
        // Straight to this machine: never through a proxy from the environment.
        let client = reqwest::Client::builder()
            .no_proxy()
            .timeout(std::time::Duration::from_secs(5))
            .build()
            .map_err(|e| e.to_string())?;
        let mut request = client.get(format!("http://{addr}/status"));
        if let Some(token) = &config.http.token {
            request = request.bearer_auth(token.expose());
        }
        let answer = request
            .send()
            .await
            .map_err(|_| format!("not answering on {addr} (not running?)"))?;
        answer.json().await.map_err(|e| e.to_string())
    })?;
    Ok(describe_status(&body))
}

/// `/status` as lines for a person.
pub fn describe_status(status: &serde_json::Value) -> String {
    let mut out = String::from("the daemon:\n");
    for platform in status["platforms"].as_array().into_iter().flatten() {
        let name = platform["platform"].as_str().unwrap_or("?");
        let state = match platform["last_contact_ms_ago"].as_u64() {
            None => "not connected".to_owned(),
            Some(ms) if platform["live"] == true => {
                format!("live (last contact {} s ago)", ms / 1000)
            }
            Some(ms) => format!("silent for {} s", ms / 1000),
        };
        out.push_str(&format!("  {name}: {state}\n"));
    }
    let number = |key: &str| status[key].as_i64().unwrap_or(0);
    out.push_str(&format!(
        "  sessions: {}\n  messages being handled: {}\n  approvals waiting: {}\n  background processes: {}\n  outbox: {} waiting",
        number("sessions"),
        number("inbox_open"),
        number("approvals_pending"),
        number("processes_running"),
        number("outbox_pending"),
    ));
    if let Some(age) = status["outbox_oldest_s"].as_i64() {
        out.push_str(&format!(" (oldest {age} s)"));
    }
    out.push('\n');
    out
}

fn logs(args: ScopeArgs, follow: bool, since: Option<String>) -> Result<(), String> {
    let mut command = vec!["journalctl".to_owned()];
    match scope_of(args) {
        Scope::User => command.extend(["--user-unit".to_owned(), SERVICE.to_owned()]),
        Scope::System => command.extend(["--unit".to_owned(), SERVICE.to_owned()]),
    }
    command.push("--no-pager".into());
    if follow {
        command.push("--follow".into());
    }
    if let Some(since) = since {
        command.extend(["--since".to_owned(), since]);
    }
    execute(&command)
}
