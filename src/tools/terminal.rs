//! The `terminal` tool: `bash -c` in its own process group, with a scrubbed environment
//! (no provider keys or platform tokens, invariant 8), a timeout, bounded output, and the
//! whole group killed on timeout or cancellation so nothing it started lingers.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use tokio_util::sync::CancellationToken;

use super::output::HeadTail;
use crate::config::TerminalConfig;
use crate::confine::Sandbox;
use crate::shell::{self, Waited};

/// How a command ended.
#[derive(Debug)]
pub enum CommandOutcome {
    Exited {
        code: Option<i32>,
        output: String,
        elapsed: Duration,
        /// The command left processes running in its group (`server &`); they were stopped,
        /// since nothing would track them.
        stopped_leftovers: bool,
    },
    TimedOut {
        after: Duration,
        output: String,
    },
    Cancelled {
        output: String,
    },
    FailedToStart(String),
}

/// What systemd hands the daemon itself: a child with these could tell systemd the daemon
/// is ready or alive.
const SERVICE_MANAGER_VARS: [&str; 6] = [
    "NOTIFY_SOCKET",
    "WATCHDOG_USEC",
    "WATCHDOG_PID",
    "LISTEN_FDS",
    "LISTEN_PID",
    "LISTEN_FDNAMES",
];

impl CommandOutcome {
    /// The text the model reads.
    pub fn describe(&self) -> String {
        match self {
            CommandOutcome::Exited {
                code,
                output,
                stopped_leftovers,
                ..
            } => {
                let code = code
                    .map(|c| c.to_string())
                    .unwrap_or_else(|| "killed by a signal".into());
                let leftovers = if *stopped_leftovers {
                    "\nnote: processes the command left running in the background were stopped; \
                     run a server or any long-running command with background=true to keep it \
                     (it is then tracked and can be polled, written to and killed)"
                } else {
                    ""
                };
                format!("exit code: {code}{leftovers}\n{output}")
            }
            CommandOutcome::TimedOut { after, output } => format!(
                "timed out after {}s; the command and everything it started were killed\n{output}",
                after.as_secs()
            ),
            CommandOutcome::Cancelled { output } => {
                format!(
                    "interrupted: the person stopped this command; it and everything it started were killed\n{output}"
                )
            }
            CommandOutcome::FailedToStart(why) => {
                format!("error: could not start the command: {why}")
            }
        }
    }
}

/// Runs foreground commands.
pub struct Terminal {
    config: TerminalConfig,
    secret_env_names: Vec<String>,
}

impl Terminal {
    pub fn new(config: TerminalConfig, secret_env_names: Vec<String>) -> Self {
        Terminal {
            config,
            secret_env_names,
        }
    }

    /// The working directory for a command.
    pub fn workdir(&self, requested: Option<&str>) -> PathBuf {
        requested
            .map(PathBuf::from)
            .unwrap_or_else(|| self.config.cwd.clone())
    }

    /// What a child's environment needs changed: secret variables still in this process's
    /// environment removed (and systemd's, so a command cannot speak for the daemon), and the ones `terminal.pass_env` lets through (taken out of
    /// the process at start-up, see [`crate::secrets`]) put back.
    pub fn child_env(&self) -> shell::EnvChanges {
        let mut changes: shell::EnvChanges = std::env::vars_os()
            .filter_map(|(name, _)| name.into_string().ok())
            .filter(|name| self.is_secret(name) || SERVICE_MANAGER_VARS.contains(&name.as_str()))
            .map(|name| (name, None))
            .collect();
        for name in &self.config.pass_env {
            if let Some(value) = crate::secrets::get(name) {
                changes.push((name.clone(), Some(value.to_owned())));
            }
        }
        changes
    }

    /// Whether a variable must not reach child processes.
    fn is_secret(&self, name: &str) -> bool {
        if self.config.pass_env.iter().any(|p| p == name) {
            return false;
        }
        self.secret_env_names.iter().any(|s| s == name) || crate::secrets::is_secret_name(name)
    }

    pub async fn run(
        &self,
        command: &str,
        workdir: Option<&str>,
        timeout_secs: Option<u64>,
        cancel: &CancellationToken,
        sandbox: &Sandbox,
    ) -> CommandOutcome {
        let timeout = timeout_secs
            .map(Duration::from_secs)
            .unwrap_or(self.config.timeout)
            .max(Duration::from_secs(1));
        let cwd = workdir
            .map(PathBuf::from)
            .unwrap_or_else(|| self.config.cwd.clone());
        let started = Instant::now();
        let mut child = match shell::spawn(command, &cwd, &self.child_env(), false, sandbox) {
            Ok(child) => child,
            Err(e) => {
                return CommandOutcome::FailedToStart(format!(
                    "{e} (working directory {})",
                    cwd.display()
                ));
            }
        };
        let group = shell::group_of(&child);
        let buffer = Arc::new(Mutex::new(HeadTail::new(self.config.max_output_chars)));
        let sink = buffer.clone();
        let readers = shell::pump_output(&mut child, move |bytes| {
            if let Ok(mut b) = sink.lock() {
                b.push(bytes);
            }
        });

        let end = shell::wait_for(&mut child, timeout, cancel).await;
        let mut stopped_leftovers = false;
        match (&end, group) {
            (Waited::Exited(_), Some(group)) => {
                // Whatever the command left in its group would run on untracked: stop it.
                // (The group id cannot be reused while any member lives.)
                if shell::group_alive(group) {
                    shell::signal_group(group, Signal::SIGKILL);
                    stopped_leftovers = true;
                }
            }
            (Waited::Exited(_), None) => {}
            (_, group) => {
                if let Some(group) = group {
                    shell::signal_group(group, Signal::SIGKILL);
                }
                let _ = child.wait().await;
            }
        }
        shell::finish_readers(readers).await;
        let output = buffer.lock().map(|b| b.text()).unwrap_or_default();
        match end {
            Waited::Exited(code) => CommandOutcome::Exited {
                code,
                output,
                elapsed: started.elapsed(),
                stopped_leftovers,
            },
            Waited::TimedOut => CommandOutcome::TimedOut {
                after: timeout,
                output,
            },
            Waited::Cancelled => CommandOutcome::Cancelled { output },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn terminal(timeout: u64) -> Terminal {
        Terminal::new(
            TerminalConfig {
                cwd: std::env::temp_dir(),
                timeout: Duration::from_secs(timeout),
                max_output_chars: 10_000,
                pass_env: vec!["PASSED_TOKEN".into()],
                confine_writes: false,
                allowed_roots: Vec::new(),
                cwd_was_home: false,
                sandbox: crate::config::SandboxMode::Off,
                network: true,
                sandbox_expose: Vec::new(),
            },
            vec!["MY_DOTENV_THING".into()],
        )
    }

    #[tokio::test]
    async fn output_and_exit_code_come_back() {
        let out = terminal(10)
            .run(
                "echo hello; echo oops >&2; exit 3",
                None,
                None,
                &CancellationToken::new(),
                &Sandbox::unconfined(),
            )
            .await;
        let text = out.describe();
        assert!(text.starts_with("exit code: 3"), "{text}");
        assert!(text.contains("hello") && text.contains("oops"));
    }

    #[tokio::test]
    async fn a_timeout_kills_the_whole_group() {
        let dir = tempfile::tempdir().unwrap();
        let marker = dir.path().join("child-pid");
        let cmd = format!("sleep 30 & echo $! > {}; wait", marker.display());
        let start = Instant::now();
        let out = terminal(1)
            .run(
                &cmd,
                None,
                None,
                &CancellationToken::new(),
                &Sandbox::unconfined(),
            )
            .await;
        assert!(matches!(out, CommandOutcome::TimedOut { .. }), "{out:?}");
        assert!(start.elapsed() < Duration::from_secs(5));
        // The background child was in the group and is gone too.
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(shell::pid_in_file_is_gone(&marker));
    }

    #[tokio::test]
    async fn processes_a_finished_command_left_behind_are_stopped() {
        let dir = tempfile::tempdir().unwrap();
        let marker = dir.path().join("server-pid");
        let cmd = format!(
            "sleep 30 >/dev/null 2>&1 & echo $! > {}; echo started",
            marker.display()
        );
        let out = terminal(10)
            .run(
                &cmd,
                None,
                None,
                &CancellationToken::new(),
                &Sandbox::unconfined(),
            )
            .await;
        let text = out.describe();
        assert!(text.starts_with("exit code: 0"), "{text}");
        assert!(text.contains("background=true"), "{text}");
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(shell::pid_in_file_is_gone(&marker));

        let plain = terminal(10)
            .run(
                "echo only me",
                None,
                None,
                &CancellationToken::new(),
                &Sandbox::unconfined(),
            )
            .await
            .describe();
        assert!(!plain.contains("note:"), "{plain}");
    }

    #[tokio::test]
    async fn cancelling_stops_at_once() {
        let cancel = CancellationToken::new();
        let c = cancel.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(200)).await;
            c.cancel();
        });
        let start = Instant::now();
        let out = terminal(60)
            .run("sleep 60", None, None, &cancel, &Sandbox::unconfined())
            .await;
        assert!(matches!(out, CommandOutcome::Cancelled { .. }));
        assert!(start.elapsed() < Duration::from_secs(3));
    }

    #[test]
    fn secrets_are_recognised_by_name_and_list() {
        let t = terminal(1);
        assert!(t.is_secret("TELEGRAM_BOT_TOKEN"));
        assert!(t.is_secret("OPENAI_API_KEY"));
        assert!(t.is_secret("MY_DOTENV_THING"));
        assert!(!t.is_secret("PASSED_TOKEN"));
        assert!(!t.is_secret("PATH"));
    }
}
