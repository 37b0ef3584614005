//! The process registry: background commands started by the `terminal` tool. Each runs in
//! its own process group with a bounded rolling output buffer (200 KB). At most 64 are
//! tracked; finished ones are kept 30 minutes. A watcher per process posts into the
//! originating chat when it finishes (and, with `check_interval`, when it prints), through
//! the normal delivery path; with `notify_on_complete` the completion also starts an agent
//! turn in that session. Shutdown kills every process the daemon started.

mod output;
mod watcher;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hermes_adapter::{Author, ChatRef};
use nix::sys::signal::Signal;
use nix::unistd::Pid;
use tokio::io::AsyncWriteExt;
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use crate::config::Notifications;
use crate::delivery::Delivery;
use crate::shell;
use crate::store::{RecordedProcess, Store};
use output::RollingOutput;
use watcher::Watcher;

pub const MIN_CHECK_INTERVAL: Duration = Duration::from_secs(5);

/// How much the registry keeps.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Processes tracked at once (running or recently finished).
    pub max_tracked: usize,
    /// Output kept per process, in bytes.
    pub output_capacity: usize,
    /// How long a finished process stays listed.
    pub finished_ttl: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_tracked: 64,
            output_capacity: 200 * 1024,
            finished_ttl: Duration::from_secs(30 * 60),
        }
    }
}

/// What each notification level posts.
impl Notifications {
    fn progress(self) -> bool {
        matches!(self, Notifications::Concise | Notifications::All)
    }

    fn completion(self, exit: &ExitInfo) -> bool {
        match self {
            Notifications::Off => false,
            Notifications::Error => exit.code != Some(0),
            _ => true,
        }
    }

    fn tail_lines(self) -> usize {
        if self == Notifications::All { 40 } else { 15 }
    }
}
const KILL_GRACE: Duration = Duration::from_secs(3);
/// How long a write waits for a process to take its input.
const WRITE_TIMEOUT: Duration = Duration::from_secs(10);

/// Where a process was started from; its reports go back there.
#[derive(Debug, Clone)]
pub struct Origin {
    pub session_key: String,
    pub chat: ChatRef,
    pub author: Author,
}

/// A request to start a background process.
pub struct SpawnRequest {
    pub command: String,
    pub cwd: PathBuf,
    /// Variables to remove from the child's environment (secrets).
    pub env: crate::shell::EnvChanges,
    pub origin: Origin,
    pub check_interval: Option<Duration>,
    pub notify_on_complete: bool,
    /// The session's confinement (the process holds it while it runs).
    pub sandbox: crate::confine::Sandbox,
}

/// How a process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExitInfo {
    /// Exit code, or `None` when a signal ended it.
    pub code: Option<i32>,
    pub signal: Option<i32>,
    pub elapsed: Duration,
    /// It left processes running in its group when it ended; they were stopped (nothing
    /// would have tracked them).
    pub stopped_leftovers: bool,
}

impl ExitInfo {
    pub fn describe(&self) -> String {
        let how = match (self.code, self.signal) {
            (Some(code), _) => format!("exit code {code}"),
            (None, Some(sig)) => format!("killed by signal {sig}"),
            _ => "ended".into(),
        };
        if self.stopped_leftovers {
            format!("{how}; the processes it left running were stopped")
        } else {
            how
        }
    }
}

/// A completion that should start an agent turn (`notify_on_complete`).
#[derive(Debug, Clone)]
pub struct Wakeup {
    /// The process that finished (what makes the wake-up unique).
    pub process_id: String,
    pub origin: Origin,
    pub text: String,
}

/// Where a process stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Running { elapsed: Duration },
    Finished(ExitInfo),
}

/// One process, for `list`.
#[derive(Debug, Clone)]
pub struct ProcessSummary {
    pub id: String,
    /// Its process group (the shell's pid).
    pub pgid: i32,
    pub command: String,
    pub status: Status,
}

/// What `poll` found.
#[derive(Debug, Clone)]
pub struct Polled {
    pub status: Status,
    /// Output since the previous poll.
    pub new_output: String,
    /// Some of it rolled out of the buffer before it could be read.
    pub lost_output: bool,
}

/// How a `wait` ended.
#[derive(Debug, Clone)]
pub enum Waited {
    Finished {
        exit: ExitInfo,
        last_output: String,
    },
    /// The timeout passed first.
    StillRunning,
    /// The person wrote while the agent waited.
    PersonWrote,
}

/// What `kill` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stopped {
    AlreadyFinished,
    /// It ended on SIGTERM.
    Terminated,
    /// It ignored SIGTERM and was killed with SIGKILL.
    Killed,
}

/// Why an action on a process failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ProcessError {
    #[error("no background process {0:?} in this conversation (see action `list`)")]
    NotFound(String),
    #[error("{0}: standard input is closed")]
    StdinClosed(String),
    #[error("{id}: could not write: {error}")]
    Write { id: String, error: String },
    /// The process did not take the text (it is not reading its input) before the turn
    /// was stopped or the write's time ran out.
    #[error("{id}: wrote {written} of {total} bytes; {why}")]
    WriteStalled {
        id: String,
        written: usize,
        total: usize,
        why: &'static str,
    },
}

impl Tracked {
    /// Where it stands now.
    fn status(&self) -> Status {
        match *self.exit.borrow() {
            Some(exit) => Status::Finished(exit),
            None => Status::Running {
                elapsed: self.started.elapsed(),
            },
        }
    }

    /// When the process ended (derived from its exit).
    fn finished_at(&self) -> Option<Instant> {
        self.exit.borrow().map(|e| self.started + e.elapsed)
    }
}

struct Tracked {
    id: String,
    command: String,
    origin: Origin,
    pgid: Pid,
    started: Instant,
    output: Mutex<RollingOutput>,
    /// `None` while running.
    exit: watch::Receiver<Option<ExitInfo>>,
    stdin: tokio::sync::Mutex<Option<tokio::net::unix::pipe::Sender>>,
    /// Where the last `poll` stopped.
    poll_offset: Mutex<u64>,
}

/// Tracks background processes. Cheap to share (`Arc`).
pub struct ProcessRegistry {
    processes: Mutex<HashMap<String, Arc<Tracked>>>,
    store: Store,
    limits: Limits,
    notifications: Notifications,
    delivery: Delivery,
    wakeups: mpsc::UnboundedSender<Wakeup>,
    /// The daemon's `work` stage: cancelled once running work had its time at shutdown.
    pub(crate) work: CancellationToken,
}

impl ProcessRegistry {
    pub fn new(
        delivery: Delivery,
        wakeups: mpsc::UnboundedSender<Wakeup>,
        work: CancellationToken,
        limits: Limits,
        notifications: Notifications,
    ) -> Arc<Self> {
        Arc::new(ProcessRegistry {
            store: delivery.store().clone(),
            processes: Mutex::new(HashMap::new()),
            limits,
            notifications,
            delivery,
            wakeups,
            work,
        })
    }

    /// Start a background process; returns its id (`proc_<12 hex>`).
    pub async fn spawn(self: &Arc<Self>, request: SpawnRequest) -> Result<(String, u32), String> {
        self.make_room()?;
        let mut child = shell::spawn(
            &request.command,
            &request.cwd,
            &request.env,
            true,
            &request.sandbox,
        )
        .map_err(|e| {
            format!(
                "could not start the command: {e} (in {})",
                request.cwd.display()
            )
        })?;
        let pid = child.id();
        let id = format!("proc_{:012x}", rand::random::<u64>() & 0xffff_ffff_ffff);
        let (exit_tx, exit_rx) = watch::channel(None);
        let tracked = Arc::new(Tracked {
            id: id.clone(),
            command: request.command.clone(),
            origin: request.origin,
            pgid: Pid::from_raw(pid as i32),
            started: Instant::now(),
            output: Mutex::new(RollingOutput::new(self.limits.output_capacity)),
            exit: exit_rx,
            stdin: tokio::sync::Mutex::new(child.stdin.take()),
            poll_offset: Mutex::new(0),
        });
        let t = tracked.clone();
        shell::pump_output(&mut child, move |bytes| {
            t.output.lock().expect("output lock").push(bytes)
        });
        // The waiter owns the child (and its confinement): it reaps it and publishes the
        // exit.
        let t = tracked.clone();
        let work = self.work.clone();
        let store = self.store.clone();
        tokio::spawn(async move {
            let status = tokio::select! {
                status = child.wait() => status.ok(),
                _ = work.cancelled() => {
                    shell::signal_group(t.pgid, Signal::SIGKILL);
                    let _ = child.wait().await;
                    // Still "running" as far as the registry knows: the shutdown
                    // (`stop_all`) records it and tells its chat, whichever of the two
                    // gets there first.
                    return;
                }
            };
            // What it left in its group would run on untracked (and `kill` could no longer
            // reach it once its id is free): stop it now, while the group id is still held.
            let stopped_leftovers = shell::group_alive(t.pgid);
            if stopped_leftovers {
                shell::signal_group(t.pgid, Signal::SIGKILL);
            }
            use std::os::unix::process::ExitStatusExt;
            let info = ExitInfo {
                code: status.and_then(|s| s.code()),
                signal: status.and_then(|s| s.signal()),
                elapsed: t.started.elapsed(),
                stopped_leftovers,
            };
            if !work.is_cancelled() {
                let _ = store.process_ended(&t.id, "finished").await;
            }
            let _ = exit_tx.send(Some(info));
        });
        let record = RecordedProcess {
            id: id.clone(),
            chat: tracked.origin.chat.clone(),
            command: tracked.command.clone(),
            pgid: pid as i32,
            start_ticks: start_ticks(pid as i32),
        };
        if let Err(e) = self
            .store
            .process_started(record, &tracked.origin.session_key)
            .await
        {
            tracing::error!(error = %e, "process: could not record a background process");
        }
        self.processes
            .lock()
            .expect("registry lock")
            .insert(id.clone(), tracked.clone());
        let watcher = Watcher {
            registry: self.clone(),
            tracked,
            check_interval: request.check_interval,
            notify_on_complete: request.notify_on_complete,
        };
        tokio::spawn(watcher.run());
        tracing::info!(id, pid, command = %request.command, "process: started in the background");
        Ok((id, pid))
    }

    fn get(&self, session_key: &str, id: &str) -> Result<Arc<Tracked>, ProcessError> {
        self.prune();
        let processes = self.processes.lock().expect("registry lock");
        match processes.get(id) {
            Some(t) if t.origin.session_key == session_key => Ok(t.clone()),
            _ => Err(ProcessError::NotFound(id.to_owned())),
        }
    }

    /// Drop finished processes older than the TTL.
    fn prune(&self) {
        let ttl = self.limits.finished_ttl;
        let mut processes = self.processes.lock().expect("registry lock");
        processes.retain(|_, t| t.finished_at().is_none_or(|at| at.elapsed() < ttl));
    }

    /// Free a slot for a new process: drop expired ones, then the longest-finished one.
    fn make_room(&self) -> Result<(), String> {
        self.prune();
        let mut processes = self.processes.lock().expect("registry lock");
        if processes.len() < self.limits.max_tracked {
            return Ok(());
        }
        let oldest_finished = processes
            .iter()
            .filter_map(|(id, t)| t.finished_at().map(|at| (at, id.clone())))
            .min()
            .map(|(_, id)| id);
        match oldest_finished {
            Some(id) => {
                processes.remove(&id);
                Ok(())
            }
            None => Err(format!(
                "{} background processes are running already; kill some first",
                self.limits.max_tracked
            )),
        }
    }

    /// The processes of this session, oldest first.
    pub fn list(&self, session_key: &str) -> Vec<ProcessSummary> {
        self.prune();
        let processes = self.processes.lock().expect("registry lock");
        let mut mine: Vec<&Arc<Tracked>> = processes
            .values()
            .filter(|t| t.origin.session_key == session_key)
            .collect();
        mine.sort_by_key(|t| t.started);
        mine.iter()
            .map(|t| ProcessSummary {
                id: t.id.clone(),
                pgid: t.pgid.as_raw(),
                command: t.command.clone(),
                status: t.status(),
            })
            .collect()
    }

    /// Status and the output that arrived since the last poll.
    pub fn poll(&self, session_key: &str, id: &str) -> Result<Polled, ProcessError> {
        let t = self.get(session_key, id)?;
        let status = t.status();
        let output = t.output.lock().expect("output lock");
        let mut offset = t.poll_offset.lock().expect("poll lock");
        let (new_output, lost_output) = output.since(*offset);
        *offset = output.end();
        Ok(Polled {
            status,
            new_output,
            lost_output,
        })
    }

    /// The last `lines` lines of output.
    pub fn log(&self, session_key: &str, id: &str, lines: usize) -> Result<String, ProcessError> {
        let t = self.get(session_key, id)?;
        let text = t
            .output
            .lock()
            .expect("output lock")
            .last_lines(lines.clamp(1, 2000));
        Ok(text)
    }

    /// Wait until the process ends, `timeout` passes, or `attention` fires (the person wrote).
    pub async fn wait(
        &self,
        session_key: &str,
        id: &str,
        timeout: Duration,
        attention: &CancellationToken,
    ) -> Result<Waited, ProcessError> {
        let t = self.get(session_key, id)?;
        let mut exit = t.exit.clone();
        let waited = tokio::select! {
            r = exit.wait_for(Option::is_some) => r.ok().and_then(|v| *v),
            _ = tokio::time::sleep(timeout) => None,
            _ = attention.cancelled() => return Ok(Waited::PersonWrote),
        };
        Ok(match waited {
            Some(exit) => Waited::Finished {
                exit,
                last_output: t.output.lock().expect("output lock").last_lines(20),
            },
            None => Waited::StillRunning,
        })
    }

    /// SIGTERM to the group, SIGKILL after a grace period.
    pub async fn kill(&self, session_key: &str, id: &str) -> Result<Stopped, ProcessError> {
        let t = self.get(session_key, id)?;
        Ok(terminate(&t).await)
    }

    /// Write to the process's standard input; returns the bytes written. A process that
    /// does not read its input cannot hold the turn: the write gives up when `cancel`
    /// fires or after [`WRITE_TIMEOUT`], saying how much went in.
    pub async fn write(
        &self,
        session_key: &str,
        id: &str,
        data: &str,
        cancel: &CancellationToken,
    ) -> Result<usize, ProcessError> {
        let t = self.get(session_key, id)?;
        let bytes = data.as_bytes();
        let deadline = tokio::time::Instant::now() + WRITE_TIMEOUT;
        let stalled = |written: usize, why: &'static str| ProcessError::WriteStalled {
            id: id.to_owned(),
            written,
            total: bytes.len(),
            why,
        };
        const NOT_READING: &str = "the process is not reading its input";
        const STOPPED: &str = "the turn was stopped";
        // An earlier write may still hold the pipe (it waits for the process to read).
        let mut stdin = tokio::select! {
            stdin = t.stdin.lock() => stdin,
            _ = cancel.cancelled() => return Err(stalled(0, STOPPED)),
            _ = tokio::time::sleep_until(deadline) => return Err(stalled(0, NOT_READING)),
        };
        let pipe = stdin
            .as_mut()
            .ok_or_else(|| ProcessError::StdinClosed(id.to_owned()))?;
        let failed = |e: std::io::Error| ProcessError::Write {
            id: id.to_owned(),
            error: e.to_string(),
        };
        let mut written = 0;
        while written < bytes.len() {
            // A pipe write either takes some bytes or none, so stopping between polls
            // loses nothing that was counted.
            tokio::select! {
                n = pipe.write(&bytes[written..]) => match n.map_err(failed)? {
                    0 => return Err(stalled(written, "the process closed its input")),
                    n => written += n,
                },
                _ = cancel.cancelled() => return Err(stalled(written, STOPPED)),
                _ = tokio::time::sleep_until(deadline) => return Err(stalled(written, NOT_READING)),
            }
        }
        pipe.flush().await.map_err(failed)?;
        Ok(written)
    }

    /// Kill every running process of a session (`/stop all`); returns how many.
    pub async fn kill_session(&self, session_key: &str) -> usize {
        let running: Vec<Arc<Tracked>> = {
            let processes = self.processes.lock().expect("registry lock");
            processes
                .values()
                .filter(|t| t.origin.session_key == session_key && t.exit.borrow().is_none())
                .cloned()
                .collect()
        };
        // Together: each may take its grace period.
        futures_util::future::join_all(running.iter().map(|t| terminate(t))).await;
        running.len()
    }

    /// Whether a process still runs in a chat `mine` keeps (a share of the work is quiet on
    /// this node only without one).
    pub fn runs_in(&self, mine: impl Fn(&ChatRef) -> bool) -> bool {
        self.processes
            .lock()
            .expect("registry lock")
            .values()
            .any(|t| t.exit.borrow().is_none() && mine(&t.origin.chat))
    }

    /// Shutdown: stop every running process, record it, and tell its chat (the message goes
    /// out from the outbox, after the restart if need be).
    pub async fn stop_all(&self) {
        let running: Vec<Arc<Tracked>> = {
            let processes = self.processes.lock().expect("registry lock");
            processes
                .values()
                .filter(|t| t.exit.borrow().is_none())
                .cloned()
                .collect()
        };
        for t in running {
            shell::signal_group(t.pgid, Signal::SIGKILL);
            let _ = self.store.process_ended(&t.id, "stopped").await;
            let text = format!(
                "⚠️ The gateway is shutting down, so the background process `{}` ({}) was stopped.",
                short(&t.command),
                t.id
            );
            self.queue_notice(&t.origin.chat, &text).await;
        }
    }

    /// Startup (or shares of the work taken over): the processes of the chats `mine` keeps
    /// that an earlier run recorded as running were cut off by a crash; stop any still
    /// alive and tell their chats.
    pub async fn reap_orphans(&self, mine: impl Fn(&ChatRef) -> bool) {
        let orphans = match self.store.processes_running().await {
            Ok(o) => o,
            Err(e) => {
                tracing::error!(error = %e, "process: cannot read recorded processes");
                return;
            }
        };
        for p in orphans.into_iter().filter(|p| mine(&p.chat)) {
            let alive = p.start_ticks.is_some() && start_ticks(p.pgid) == p.start_ticks;
            if alive {
                shell::signal_group(Pid::from_raw(p.pgid), Signal::SIGKILL);
            }
            let _ = self.store.process_ended(&p.id, "stopped").await;
            let what = if alive {
                "was still running and has been stopped"
            } else {
                "ended while the gateway was down; its result was not captured"
            };
            tracing::warn!(id = %p.id, alive, "process: orphan from an earlier run");
            let text = format!(
                "⚠️ The gateway restarted unexpectedly. The background process `{}` ({}) {what}.",
                short(&p.command),
                p.id
            );
            self.queue_notice(&p.chat, &text).await;
        }
    }

    async fn queue_notice(&self, chat: &ChatRef, text: &str) {
        if let Err(e) = self.delivery.reply(chat, text, None).await {
            tracing::error!(error = %e, "process: could not queue a notice");
        }
    }
}

async fn terminate(t: &Tracked) -> Stopped {
    if t.exit.borrow().is_some() {
        return Stopped::AlreadyFinished;
    }
    shell::signal_group(t.pgid, Signal::SIGTERM);
    let mut exit = t.exit.clone();
    if tokio::time::timeout(KILL_GRACE, exit.wait_for(Option::is_some))
        .await
        .is_err()
    {
        shell::signal_group(t.pgid, Signal::SIGKILL);
        let _ = tokio::time::timeout(Duration::from_secs(2), exit.wait_for(Option::is_some)).await;
        return Stopped::Killed;
    }
    Stopped::Terminated
}

/// The start time of process `pid` in clock ticks since boot (`/proc/<pid>/stat` field
/// 22); `None` when it does not run (gone, or a zombie nobody reaped yet).
fn start_ticks(pid: i32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name, which is in parentheses and may contain spaces.
    let mut fields = stat.rsplit_once(") ")?.1.split_whitespace();
    if matches!(fields.next(), Some("Z" | "X")) {
        return None;
    }
    fields.nth(18)?.parse().ok()
}

fn short(command: &str) -> String {
    let one_line = command.lines().next().unwrap_or_default();
    let mut s: String = one_line.chars().take(80).collect();
    if s.len() < command.len() {
        s.push('…');
    }
    s.replace('`', "'")
}

fn tail_chars(text: &str, max: usize) -> String {
    let count = text.chars().count();
    if count <= max {
        return text.trim_end().to_owned();
    }
    let tail: String = text.chars().skip(count - max).collect();
    format!("…{}", tail.trim_end())
}

#[cfg(test)]
mod tests;
