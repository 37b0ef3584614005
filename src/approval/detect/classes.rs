//! The classes of dangerous command: a stable key (what "for this session" and "always"
//! approve, and what `command_allowlist` may name) and the description the person sees,
//! worded as Hermes words it where Hermes has the class, so an allowlist written for
//! Hermes (by key or by description) keeps working.

/// One class of danger.
#[derive(Debug, PartialEq, Eq)]
pub struct Class {
    pub key: &'static str,
    pub description: &'static str,
}

macro_rules! classes {
    ($($name:ident = $key:literal, $description:literal;)*) => {
        $(pub const $name: Class = Class { key: $key, description: $description };)*
        /// Every class, for lookups by key or description.
        pub const ALL: &[&Class] = &[$(&$name),*];
    };
}

classes! {
    RM_ROOT = "rm-root", "delete in root path";
    RM_RECURSIVE = "rm-recursive", "recursive delete";
    RM_ABSOLUTE = "rm-absolute", "delete an absolute path";
    RM_DYNAMIC = "rm-dynamic", "delete a path only known at run time";
    CHMOD_777 = "chmod-777", "world/other-writable permissions";
    SETUID = "setuid", "set the setuid/setgid bit";
    CHOWN_ROOT = "chown-root", "recursive chown to root";
    MKFS = "mkfs", "format filesystem";
    DISK_WIPE = "disk-wipe", "wipe or repartition a disk";
    DD = "dd", "disk copy";
    BLOCK_DEVICE = "block-device", "write to block device";
    SQL_DROP = "sql-drop", "SQL DROP";
    SQL_DELETE = "sql-delete", "SQL DELETE without WHERE";
    SQL_TRUNCATE = "sql-truncate", "SQL TRUNCATE";
    ETC_WRITE = "etc-write", "overwrite system config";
    SYSTEM_WRITE = "system-write", "write into system files (/usr, /boot, /bin, /lib)";
    SSH_WRITE = "ssh-write", "write to ~/.ssh";
    RC_WRITE = "rc-write", "overwrite a shell startup file";
    WRITE_DYNAMIC = "write-dynamic", "write to a file only known at run time";
    CREDENTIALS_WRITE = "credentials-write", "overwrite a credentials file";
    GATEWAY_SECRET = "hermes-env", "read or change the gateway's secrets (.env, config.yaml, gateway.db)";
    PROCESS_MEMORY = "process-environ", "read a process's environment or memory";
    SYSTEMCTL = "systemctl", "stop/restart system service";
    POWER = "power", "system shutdown/reboot";
    KILL_ALL = "kill-all", "kill all processes";
    KILL_GATEWAY = "kill-gateway", "kill hermes/gateway process (self-termination)";
    KILL_DYNAMIC = "kill-dynamic", "kill a process chosen at run time";
    PKILL_9 = "pkill-9", "force kill processes";
    KILLALL_REGEX = "killall-regex", "kill processes by regex (killall -r)";
    GATEWAY_CONTROL = "gateway-control", "stop, restart or reconfigure the hermes gateway";
    GATEWAY_DETACH = "gateway-detach", "start gateway outside systemd";
    DOCKER_LIFECYCLE = "docker-lifecycle", "docker restart/stop/kill/down (container lifecycle)";
    DOCKER_REMOTE = "docker-remote", "docker against a remote host or context";
    GIT_DESTRUCTIVE = "git-destructive", "git history or work-tree destruction (reset --hard, force push, clean -f, branch -D)";
    FORK_BOMB = "fork-bomb", "fork bomb";
    SHELL_C = "shell-c", "shell command via -c flag";
    SCRIPT_C = "script-c", "script execution via -e/-c flag";
    PIPE_SHELL = "pipe-shell", "pipe remote content to shell";
    DECODE_SHELL = "decode-shell", "pipe decoded content to shell (possible command obfuscation)";
    STDIN_SHELL = "stdin-shell", "shell fed commands from a pipe";
    SHELL_HEREDOC = "shell-heredoc", "shell execution via heredoc or here-string";
    SCRIPT_STDIN = "script-stdin", "interpreter fed code on stdin";
    DYNAMIC_SCRIPT = "dynamic-script", "run a script only known at run time";
    EVAL = "eval", "eval builds a command at run time";
    DYNAMIC_COMMAND = "dynamic-command", "the command name is only known at run time";
    SUDO_FLAGS = "sudo-flags", "sudo with privilege flag (stdin/askpass/shell/login)";
    CRONTAB = "crontab", "schedule commands to run later (crontab/at)";
    REVERSE_SHELL = "reverse-shell", "connect a shell or file descriptor to the network";
    XARGS_RM = "xargs-rm", "xargs with rm";
    FIND_EXEC = "find-rm", "find -exec/-execdir rm";
    FIND_DELETE = "find-delete", "find -delete";
    CONTROL_CHARS = "control-chars", "contains control or invisible characters that can hide what runs";
    UNPARSED = "unparsed", "could not be read as a shell command, so it cannot be checked";
    TOO_LONG = "too-long", "too long to check";
    EXECUTE_CODE = "execute_code", "run a Python script that can call the agent's tools";
    WRITE_OUTSIDE = "write-outside-roots", "write a file outside the working directory (terminal.confine_writes)";
}

/// The class with this key or (case-insensitively) this description.
pub fn named(name: &str) -> Option<&'static Class> {
    let name = name.trim();
    ALL.iter()
        .copied()
        .find(|c| c.key == name || c.description.eq_ignore_ascii_case(name))
}
