//! Running shell commands the one way every tool does: `bash -c` in a process group of its
//! own (so the whole group can be signalled), in the session's confinement (invariant 14),
//! without the daemon's secrets in its environment (invariant 8), killed if its handle is
//! dropped, and with stdout and stderr pumped into the caller's buffer by reader tasks.

use std::path::Path;

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::task::JoinHandle;

use crate::confine::{AgentProcess, Program, Sandbox};

/// Changes to the environment a child inherits: a variable removed (`None`) or set.
pub type EnvChanges = Vec<(String, Option<String>)>;

/// Start `command` in `cwd`, confined by `sandbox`, with `env` applied to the inherited
/// environment; stdin is piped when `with_stdin`, closed otherwise. The process is the
/// leader of its own group and is killed with it if its handle is dropped.
pub fn spawn(
    command: &str,
    cwd: &Path,
    env: &EnvChanges,
    with_stdin: bool,
    sandbox: &Sandbox,
) -> std::io::Result<AgentProcess> {
    let mut program = Program::new("bash");
    program
        .arg("-c")
        .arg(command)
        .current_dir(cwd)
        .piped_stdin(with_stdin);
    for (name, value) in env {
        match value {
            Some(value) => program.env(name, value),
            None => program.env_remove(name),
        };
    }
    sandbox.spawn(&program)
}

/// The process group a spawned child leads.
pub fn group_of(child: &AgentProcess) -> Option<Pid> {
    Some(Pid::from_raw(child.id() as i32))
}

/// Whether any process is left in a group.
pub fn group_alive(pgid: Pid) -> bool {
    killpg(pgid, None).is_ok()
}

/// Whether the process whose pid a test wrote to `pidfile` is gone (or only a zombie).
#[cfg(test)]
pub fn pid_in_file_is_gone(pidfile: &Path) -> bool {
    let pid: i32 = std::fs::read_to_string(pidfile)
        .expect("the pid file")
        .trim()
        .parse()
        .expect("a pid");
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| rest.starts_with('Z')),
    }
}

/// Signal a whole process group; a group that is already gone is not an error.
pub fn signal_group(pgid: Pid, signal: Signal) {
    if let Err(e) = killpg(pgid, signal)
        && e != nix::errno::Errno::ESRCH
    {
        tracing::warn!(error = %e, pgid = pgid.as_raw(), "could not signal a process group");
    }
}

/// Feed the child's stdout and stderr to `sink` as they arrive; the tasks end at EOF.
pub fn pump_output<F>(child: &mut AgentProcess, sink: F) -> Vec<JoinHandle<()>>
where
    F: Fn(&[u8]) + Clone + Send + 'static,
{
    let mut readers = Vec::new();
    if let Some(out) = child.stdout.take() {
        readers.push(pump(out, sink.clone()));
    }
    if let Some(err) = child.stderr.take() {
        readers.push(pump(err, sink));
    }
    readers
}

/// Feed one stream to `sink` as it arrives; the task ends at EOF.
pub fn pump<R, F>(mut stream: R, sink: F) -> JoinHandle<()>
where
    R: AsyncRead + Unpin + Send + 'static,
    F: Fn(&[u8]) + Send + 'static,
{
    tokio::spawn(async move {
        let mut chunk = [0u8; 8192];
        loop {
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => sink(&chunk[..n]),
            }
        }
    })
}

/// How waiting for a child ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Waited {
    /// With its exit code (`None`: killed by a signal).
    Exited(Option<i32>),
    TimedOut,
    Cancelled,
}

/// Wait for `child` to exit, for at most `timeout`, or until `cancel`.
pub async fn wait_for(
    child: &mut AgentProcess,
    timeout: std::time::Duration,
    cancel: &tokio_util::sync::CancellationToken,
) -> Waited {
    tokio::select! {
        status = child.wait() => Waited::Exited(status.ok().and_then(|s| s.code())),
        _ = tokio::time::sleep(timeout) => Waited::TimedOut,
        _ = cancel.cancelled() => Waited::Cancelled,
    }
}

/// Let the output readers finish what the child wrote: they end when every process
/// holding the pipes is gone, and something it left running may hold them open, so not
/// for long.
pub async fn finish_readers(readers: Vec<JoinHandle<()>>) {
    for reader in readers {
        let abort = reader.abort_handle();
        if tokio::time::timeout(std::time::Duration::from_millis(500), reader)
            .await
            .is_err()
        {
            abort.abort();
        }
    }
}
