//! The systemd unit, written once: `service install` renders it for this machine, and the
//! files in `deploy/` are the same template rendered with the documented defaults (a test
//! keeps them equal). Every line says why it is there.

use std::fmt::Write;
use std::path::{Path, PathBuf};

/// The unit's name.
pub const SERVICE: &str = "hermes-gateway.service";
/// The dedicated user (and group) of the system service.
pub const SYSTEM_USER: &str = "hermes-gateway";
/// The system service's home: its `StateDirectory=`.
pub const SYSTEM_HOME: &str = "/var/lib/hermes-gateway";
/// How long systemd waits without a watchdog ping before it restarts the daemon.
pub const WATCHDOG_SEC: u32 = 60;
/// How long a stop may take: running turns get 30 s to finish, then their ends are recorded
/// and the outbox is flushed (about 45 s at most).
pub const STOP_TIMEOUT_SEC: u32 = 60;

/// Which systemd instance runs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// The person's own service manager (`systemctl --user`).
    User,
    /// The machine's (`/etc/systemd/system`, a dedicated user).
    System,
}

/// What the unit is rendered with.
#[derive(Debug, Clone)]
pub struct UnitSpec {
    pub scope: Scope,
    /// The binary (`ExecStart=`).
    pub exe: String,
    /// The Hermes home (`--home`).
    pub home: String,
    /// The agent's working directory (`terminal.cwd`), writable under the system unit.
    pub workdir: Option<String>,
}

impl UnitSpec {
    /// The documented defaults, as in `deploy/`: the user unit runs `~/.cargo/bin`'s binary
    /// on `~/.hermes`; the system unit `/usr/local/bin`'s on its state directory.
    pub fn documented(scope: Scope) -> UnitSpec {
        match scope {
            Scope::User => UnitSpec {
                scope,
                exe: "%h/.cargo/bin/hermes-gateway".into(),
                home: "%h/.hermes".into(),
                workdir: None,
            },
            Scope::System => UnitSpec {
                scope,
                exe: "/usr/local/bin/hermes-gateway".into(),
                home: SYSTEM_HOME.into(),
                // The service user's HOME, where the agent works unless terminal.cwd says.
                workdir: None,
            },
        }
    }
}

/// Where the unit file goes.
pub fn unit_path(scope: Scope, user_home: &Path) -> PathBuf {
    match scope {
        Scope::User => user_home.join(".config/systemd/user").join(SERVICE),
        Scope::System => Path::new("/etc/systemd/system").join(SERVICE),
    }
}

/// A path as one word of a unit file line: double-quoted with C escapes, `%` doubled (so
/// systemd does not read it as a specifier) and, in a command line, `$` doubled (so it
/// is not a variable). The template's own `%h` is written as it is.
fn word(path: &str, command: bool) -> String {
    if path.starts_with("%h/") && !path[1..].contains('%') {
        return path.to_owned();
    }
    let mut out = String::from("\"");
    for c in path.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '%' => out.push_str("%%"),
            '$' if command => out.push_str("$$"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Why `path` cannot go in a unit: relative, or holding a line break or another control
/// character (which would start a line of its own).
pub fn check_path(path: &str) -> Result<(), String> {
    if !(path.starts_with('/') || path.starts_with("%h/")) {
        return Err(format!("{path:?} is not an absolute path"));
    }
    if path.chars().any(char::is_control) {
        return Err(format!("{path:?} holds a control character"));
    }
    Ok(())
}

/// The unit file.
pub fn render(spec: &UnitSpec) -> String {
    let mut unit = String::new();
    header(&mut unit, spec.scope);
    unit_section(&mut unit);
    service_start(&mut unit, spec);
    service_restart_and_stop(&mut unit);
    match spec.scope {
        Scope::User => line(
            &mut unit,
            "# No privilege can be gained through setuid binaries the agent might run.\n\
             NoNewPrivileges=yes",
        ),
        Scope::System => hardening(&mut unit, spec),
    }
    install_section(&mut unit, spec.scope);
    unit
}

/// `text` and a line break, onto `unit`.
fn line(unit: &mut String, text: &str) {
    unit.push_str(text);
    unit.push('\n');
}

/// The comment at the top: what the unit is and where it goes.
fn header(unit: &mut String, scope: Scope) {
    match scope {
        Scope::User => line(
            unit,
            "# hermes-gateway as a user service: `hermes-gateway service install --user` writes this\n\
             # to ~/.config/systemd/user/. On a server, `sudo loginctl enable-linger $USER` keeps it\n\
             # running while you are logged out.",
        ),
        Scope::System => line(
            unit,
            "# hermes-gateway as a system service with its own user: `sudo hermes-gateway service\n\
             # install --system` writes this to /etc/systemd/system/. Its config.yaml and .env go in\n\
             # /var/lib/hermes-gateway.",
        ),
    }
}

/// `[Unit]`: its description and the network it needs.
fn unit_section(unit: &mut String) {
    line(unit, "[Unit]");
    line(
        unit,
        "Description=Hermes Gateway - chat with an AI agent on messaging platforms",
    );
    line(unit, "# It talks to chat platforms and the model provider.");
    line(unit, "After=network-online.target");
    line(unit, "Wants=network-online.target");
    line(unit, "");
}

/// The start of `[Service]`: how the daemon tells systemd it is ready, who it runs as
/// (the system service), and how it is started and reloaded.
fn service_start(unit: &mut String, spec: &UnitSpec) {
    line(unit, "[Service]");
    line(
        unit,
        "# The daemon says when it is ready (every platform answered once) and pings the watchdog\n\
         # only while every platform answers.\n\
         Type=notify",
    );
    line(
        unit,
        "# Only the daemon itself may notify, never a command the agent runs.\nNotifyAccess=main",
    );
    if spec.scope == Scope::System {
        let _ = writeln!(
            unit,
            "# A user of its own: the agent's commands run as this user, not as root.\n\
             User={SYSTEM_USER}\nGroup={SYSTEM_USER}\n\
             # {SYSTEM_HOME}, created and owned by that user; private to it.\n\
             StateDirectory=hermes-gateway\nStateDirectoryMode=0700\n\
             WorkingDirectory={SYSTEM_HOME}"
        );
    }
    let _ = writeln!(
        unit,
        "ExecStart={} run --home {}",
        word(&spec.exe, true),
        word(&spec.home, true)
    );
    line(
        unit,
        "# SIGHUP: read config.yaml and .env again.\nExecReload=/bin/kill -HUP $MAINPID",
    );
}

/// When systemd restarts the daemon (not for a wrong configuration), its watchdog, and
/// how it is stopped.
fn service_restart_and_stop(unit: &mut String) {
    line(
        unit,
        "# Whatever the reason it stopped, start it again after 5 s...\nRestart=always\nRestartSec=5",
    );
    line(
        unit,
        "# ...except for exit status 78: the configuration is wrong, and restarting would only\n\
         # flap. `hermes-gateway check-config` says what is wrong.\n\
         RestartPreventExitStatus=78",
    );
    let _ = writeln!(
        unit,
        "# No watchdog ping for this long (a platform alive but deaf, a hung daemon): restart.\n\
         WatchdogSec={WATCHDOG_SEC}\n\
         # ...with SIGTERM, so a daemon that still runs drains like any stop (a hung one is\n\
         # killed after TimeoutStopSec).\n\
         WatchdogSignal=SIGTERM"
    );
    let _ = writeln!(
        unit,
        "# SIGTERM to the daemon first (it finishes running turns and flushes the outbox), then\n\
         # SIGKILL to whatever is left, the agent's commands included.\n\
         KillMode=mixed\nTimeoutStopSec={STOP_TIMEOUT_SEC}"
    );
}

/// `[Install]`, after a blank line: the target that starts it.
fn install_section(unit: &mut String, scope: Scope) {
    line(unit, "");
    line(unit, "[Install]");
    match scope {
        Scope::User => line(unit, "WantedBy=default.target"),
        Scope::System => line(unit, "WantedBy=multi-user.target"),
    }
}

/// The system unit's sandbox. The agent's terminal still works in its working directory:
/// that and the home are the only writable places.
fn hardening(unit: &mut String, spec: &UnitSpec) {
    // The home exists (it is the state directory, or install made it); the working
    // directory may not exist yet, which `-` lets pass.
    let mut writable = vec![word(&spec.home, false)];
    writable.extend(spec.workdir.iter().map(|w| format!("-{}", word(w, false))));
    // A home or working directory under /home or /root needs those visible.
    let under_home = std::iter::once(&spec.home)
        .chain(spec.workdir.iter())
        .any(|w| w.starts_with("/home") || w.starts_with("/root"));
    let protect_home = if under_home {
        "# The agent works under /home: it stays visible (read-only but for ReadWritePaths).\n\
         ProtectHome=read-only"
    } else {
        "# People's home directories are invisible to it.\nProtectHome=yes"
    };
    let _ = writeln!(
        unit,
        "# --- Sandbox. Each line removes something the gateway never needs. ---\n\
         # No privilege can be gained through setuid binaries the agent might run.\n\
         NoNewPrivileges=yes\n\
         # The whole file system is read-only...\n\
         ProtectSystem=strict\n\
         # ...but for the home (database, config, cache) and the agent's working directory.\n\
         ReadWritePaths={}\n\
         {protect_home}\n\
         # /tmp of its own, emptied when it stops.\n\
         PrivateTmp=yes\n\
         # No hardware devices, only /dev/null, /dev/zero, /dev/urandom and the like.\n\
         PrivateDevices=yes\n\
         # Kernel modules, the cgroup tree, the clock and the host name cannot be changed.\n\
         # (ProtectKernelTunables= and ProtectKernelLogs= are left out: they cover parts of\n\
         # /proc, and a /proc with covered parts cannot be mounted again, so the agent's\n\
         # jail could not have a /proc of its own and would list the daemon. An ordinary\n\
         # user cannot change the tunables or read the kernel log anyway.)\n\
         ProtectKernelModules=yes\n\
         ProtectControlGroups=yes\n\
         ProtectClock=yes\n\
         ProtectHostname=yes\n\
         # Only local sockets and IP: no raw packets, no netlink.\n\
         RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6\n\
         # Only the namespaces of the agent's jail (terminal.sandbox): user, mount, PID, IPC\n\
         # and network (terminal.network: false); no realtime scheduling.\n\
         RestrictNamespaces=user mnt pid ipc net\n\
         RestrictRealtime=yes\n\
         # No setuid/setgid files can be made.\n\
         RestrictSUIDSGID=yes\n\
         # The execution domain cannot be switched.\n\
         LockPersonality=yes\n\
         # No memory both writable and executable. Remove this line if the agent must run JIT\n\
         # runtimes (node, java) in its terminal: they need such memory.\n\
         MemoryDenyWriteExecute=yes\n\
         # Only the system calls ordinary services make, for this machine's architecture, and\n\
         # those that build the agent's jail: mounts (inside its own namespaces only; the\n\
         # service has no capability to mount anything of the host's) and Landlock.\n\
         SystemCallArchitectures=native\n\
         SystemCallFilter=@system-service @mount\n\
         SystemCallFilter=landlock_create_ruleset landlock_add_rule landlock_restrict_self\n\
         SystemCallErrorNumber=EPERM\n\
         # No capabilities at all: it runs as an ordinary user.\n\
         CapabilityBoundingSet=\n\
         AmbientCapabilities=\n\
         # Files it creates are private to it.\n\
         UMask=0077",
        writable.join(" ")
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `deploy/` holds the template rendered with the documented defaults.
    #[test]
    fn the_deploy_units_are_the_template() {
        for (scope, file) in [
            (Scope::User, "hermes-gateway.service"),
            (Scope::System, "hermes-gateway-system.service"),
        ] {
            let path = Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("deploy")
                .join(file);
            let rendered = render(&UnitSpec::documented(scope));
            if std::env::var_os("HERMES_WRITE_DEPLOY").is_some() {
                std::fs::write(&path, &rendered).unwrap();
            }
            let on_disk = std::fs::read_to_string(&path).unwrap_or_default();
            assert!(
                on_disk == rendered,
                "{} differs from the template; run `HERMES_WRITE_DEPLOY=1 cargo test the_deploy_units_are_the_template`",
                path.display()
            );
        }
    }

    #[test]
    fn the_units_say_what_systemd_needs() {
        let user = render(&UnitSpec::documented(Scope::User));
        for needed in [
            "Type=notify",
            "NotifyAccess=main",
            "WatchdogSec=60",
            "Restart=always",
            "RestartSec=5",
            "RestartPreventExitStatus=78",
            "KillMode=mixed",
            "TimeoutStopSec=60",
            "ExecReload=/bin/kill -HUP $MAINPID",
            "ExecStart=%h/.cargo/bin/hermes-gateway run --home %h/.hermes",
        ] {
            assert!(
                user.lines().any(|l| l == needed),
                "user unit lacks {needed}"
            );
        }
        let system = render(&UnitSpec::documented(Scope::System));
        for needed in [
            "User=hermes-gateway",
            "StateDirectory=hermes-gateway",
            "ProtectSystem=strict",
            "ReadWritePaths=\"/var/lib/hermes-gateway\"",
            "ExecStart=\"/usr/local/bin/hermes-gateway\" run --home \"/var/lib/hermes-gateway\"",
            "ProtectHome=yes",
            "SystemCallFilter=@system-service @mount",
            "SystemCallFilter=landlock_create_ruleset landlock_add_rule landlock_restrict_self",
            // The agent's jail needs these; a unit that forbids them would leave it
            // unconfined (said loudly, but still).
            "RestrictNamespaces=user mnt pid ipc net",
            "UMask=0077",
        ] {
            assert!(
                system.lines().any(|l| l == needed),
                "system unit lacks {needed}"
            );
        }
        // A /proc with covered parts cannot be mounted again in the jail.
        for covering_proc in ["ProtectKernelTunables=yes", "ProtectKernelLogs=yes"] {
            assert!(
                !system.lines().any(|l| l == covering_proc),
                "{covering_proc}"
            );
        }
        let at_home = render(&UnitSpec {
            workdir: Some("/home/ada/projects".into()),
            ..UnitSpec::documented(Scope::System)
        });
        assert!(at_home.lines().any(|l| l == "ProtectHome=read-only"));
        assert!(
            at_home
                .lines()
                .any(|l| l == "ReadWritePaths=\"/var/lib/hermes-gateway\" -\"/home/ada/projects\"")
        );
        // A home under /home stays visible (and writable through ReadWritePaths).
        let home_at_home = render(&UnitSpec {
            home: "/home/ada/.hermes".into(),
            ..UnitSpec::documented(Scope::System)
        });
        assert!(home_at_home.lines().any(|l| l == "ProtectHome=read-only"));
        assert!(!home_at_home.lines().any(|l| l == "ProtectHome=yes"));
    }

    #[test]
    fn paths_cannot_break_out_of_their_line_or_expand() {
        let odd = render(&UnitSpec {
            scope: Scope::System,
            exe: "/opt/my tools/hermes-gateway".into(),
            home: "/srv/100% \"home\" $HOME".into(),
            workdir: None,
        });
        assert!(odd.contains(
            "ExecStart=\"/opt/my tools/hermes-gateway\" run --home \"/srv/100%% \\\"home\\\" $$HOME\""
        ), "{odd}");
        assert!(check_path("/ok/path").is_ok());
        assert!(check_path("relative").is_err());
        assert!(check_path("/a\nExecStartPre=+/bin/sh").is_err());
    }
}
