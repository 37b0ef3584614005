//! One bench world: the testkit fakes, a temporary `$HERMES_HOME` wired to them, and the
//! daemon process started from outside the way systemd would, with its exit watched on a
//! thread so the moment it ends is known to the millisecond. Also the observer that turns
//! the fake Telegram's calls into "update served" times and replies.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use hermes_testkit::daemon::Home;
use hermes_testkit::llm::FakeLlm;
use hermes_testkit::telegram::{Call, FakeTelegram};
use tokio::sync::{mpsc, watch};

/// `.env` lines: everyone may talk to the bot (no pairing in the way).
const ENV: &[&str] = &["TELEGRAM_ALLOW_ALL_USERS=true"];
/// The per-chat and per-bot send budgets opened up, so the budget is not what is measured
/// (daemons before step 3 had no bot budget and ignore the `bot_*` keys).
const YAML: &str = "delivery:\n  rate_per_second: 1000\n  burst: 1000\n  bot_rate_per_second: 100000\n  bot_burst: 100000\n";

pub struct World {
    pub telegram: FakeTelegram,
    pub llm: FakeLlm,
    pub home: Home,
    pub observer: Observer,
}

impl World {
    pub async fn new() -> World {
        World::with_settings("", &[], "").await
    }

    /// A world whose daemon has these `terminal:` lines (two spaces in) and this further
    /// YAML in its config, and these `.env` lines besides everyone being let in.
    pub async fn with_settings(terminal: &str, env: &[String], extra_yaml: &str) -> World {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let telegram = FakeTelegram::start().await;
        let llm = FakeLlm::start().await;
        let dir = std::env::temp_dir().join(format!(
            "hermes-bench-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        let mut yaml = format!("{YAML}{extra_yaml}");
        if !terminal.is_empty() {
            yaml.push_str(&format!("terminal:\n{terminal}"));
        }
        let mut lines: Vec<&str> = ENV.to_vec();
        lines.extend(env.iter().map(String::as_str));
        let home = Home::new(&dir, &telegram.base_url(), &llm.base_url(), &lines, &yaml);
        let observer = Observer::new(telegram.subscribe());
        World {
            telegram,
            llm,
            home,
            observer,
        }
    }

    /// Start the daemon; `log` gets its stderr.
    pub fn spawn(&self, binary: &Path) -> Result<Process, String> {
        spawn_in(binary, &self.home.dir)
    }

    /// Another node of the world's daemon on its shared store: a home of its own next to
    /// the world's (same fakes, settings and state key), these `.env` lines added.
    pub fn spawn_node(&self, binary: &Path, n: usize, env: &[String]) -> Result<Process, String> {
        let dir = PathBuf::from(format!("{}-node{n}", self.home.dir.display()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).map_err(|e| format!("node {n}'s home: {e}"))?;
        for file in ["config.yaml", ".env", "state.key"] {
            let from = self.home.dir.join(file);
            if from.exists() {
                std::fs::copy(&from, dir.join(file))
                    .map_err(|e| format!("node {n}'s {file}: {e}"))?;
            }
        }
        // The node's own lines replace the world's of the same name.
        let own_key = |line: &str| {
            let key = line.split('=').next().unwrap_or_default();
            env.iter().any(|e| e.split('=').next() == Some(key))
        };
        let world = std::fs::read_to_string(dir.join(".env")).unwrap_or_default();
        let mut dotenv = String::new();
        for line in world
            .lines()
            .filter(|l| !own_key(l))
            .chain(env.iter().map(String::as_str))
        {
            dotenv.push_str(line);
            dotenv.push('\n');
        }
        std::fs::write(dir.join(".env"), dotenv).map_err(|e| format!("node {n}'s .env: {e}"))?;
        spawn_in(binary, &dir)
    }

    /// When the first `getUpdates` after `since` arrived at the fake, waiting up to `timeout`.
    pub async fn first_poll_after(&self, since: Instant, timeout: Duration) -> Option<Instant> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(at) = self
                .telegram
                .poll_arrivals()
                .into_iter()
                .find(|&at| at >= since)
            {
                return Some(at);
            }
            if Instant::now() >= deadline {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }

    /// Remove the home, unless `HERMES_BENCH_KEEP` is set (to read the daemon's log after).
    pub fn remove(&self) {
        if std::env::var_os("HERMES_BENCH_KEEP").is_some() {
            eprintln!("bench: home kept at {}", self.home.dir.display());
            return;
        }
        let _ = std::fs::remove_dir_all(&self.home.dir);
        // And the homes of further nodes (`spawn_node`), beside it.
        let (Some(parent), Some(name)) = (self.home.dir.parent(), self.home.dir.file_name()) else {
            return;
        };
        let prefix = format!("{}-node", name.to_string_lossy());
        for entry in std::fs::read_dir(parent).into_iter().flatten().flatten() {
            if entry.file_name().to_string_lossy().starts_with(&prefix) {
                let _ = std::fs::remove_dir_all(entry.path());
            }
        }
    }
}

/// Start a daemon on home `dir`; `dir/daemon.log` gets its stderr.
fn spawn_in(binary: &Path, dir: &Path) -> Result<Process, String> {
    let log = dir.join("daemon.log");
    let file = std::fs::File::create(&log).map_err(|e| format!("daemon log: {e}"))?;
    let started = Instant::now();
    let mut child = Command::new(binary)
        .arg("run")
        .arg("--home")
        .arg(dir)
        .env(
            "HERMES_LOG",
            std::env::var("HERMES_BENCH_LOG").unwrap_or_else(|_| "warn".into()),
        )
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(file)
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", binary.display()))?;
    let pid = child.id();
    let (tx, exit) = watch::channel(None);
    std::thread::spawn(move || {
        let status = child.wait();
        let at = Instant::now();
        let _ = tx.send(Some(Exit {
            at,
            code: status.ok().and_then(|s| s.code()),
        }));
    });
    Ok(Process {
        pid,
        started,
        exit,
        log,
    })
}

#[derive(Debug, Clone, Copy)]
pub struct Exit {
    pub at: Instant,
    pub code: Option<i32>,
}

/// The running daemon; SIGKILLed when dropped if it is still running.
pub struct Process {
    pub pid: u32,
    pub started: Instant,
    exit: watch::Receiver<Option<Exit>>,
    pub log: PathBuf,
}

impl Process {
    pub fn exited(&self) -> Option<Exit> {
        *self.exit.borrow()
    }

    pub fn signal(&self, signal: libc::c_int) {
        if self.exited().is_none() {
            // SAFETY: kill only sends a signal; the pid is our unreaped or just-reaped child.
            unsafe {
                libc::kill(self.pid as libc::pid_t, signal);
            }
        }
    }

    /// SIGTERM, then wait up to `timeout` for the exit: (time to exit, exit code).
    pub async fn terminate(
        &mut self,
        timeout: Duration,
    ) -> Result<(Duration, Option<i32>), String> {
        let sent = Instant::now();
        self.signal(libc::SIGTERM);
        let exit = match tokio::time::timeout(timeout, self.exit.wait_for(Option::is_some)).await {
            Ok(Ok(exit)) => *exit,
            _ => None,
        };
        match exit {
            Some(exit) => Ok((exit.at.saturating_duration_since(sent), exit.code)),
            None => {
                self.signal(libc::SIGKILL);
                Err(format!("no exit within {timeout:?} of SIGTERM; killed"))
            }
        }
    }

    /// The last `lines` lines of the daemon's stderr.
    pub fn log_tail(&self, lines: usize) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    /// Lines of the daemon's stderr at WARN or above.
    pub fn log_problems(&self) -> usize {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter(|l| l.contains("WARN") || l.contains("ERROR"))
            .count()
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.signal(libc::SIGKILL);
    }
}

/// A successful `sendMessage` seen by the fake Telegram.
#[derive(Debug, Clone)]
pub struct Sent {
    pub chat: i64,
    pub text: String,
    pub at: Instant,
}

/// Follows the fake Telegram's calls as they happen.
pub struct Observer {
    calls: mpsc::UnboundedReceiver<Call>,
    /// When `getUpdates` first handed out each update id.
    served: HashMap<i64, Instant>,
}

impl Observer {
    fn new(calls: mpsc::UnboundedReceiver<Call>) -> Observer {
        Observer {
            calls,
            served: HashMap::new(),
        }
    }

    /// The next successful `sendMessage`, or `None` if none came before `deadline`.
    pub async fn next_sent(&mut self, deadline: Instant) -> Option<Sent> {
        loop {
            let call = tokio::time::timeout_at(deadline.into(), self.calls.recv())
                .await
                .ok()??;
            match call.method.as_str() {
                "getupdates" => {
                    for update in call.params["_served"].as_array().into_iter().flatten() {
                        if let Some(id) = update["update_id"].as_i64() {
                            self.served.entry(id).or_insert(call.at);
                        }
                    }
                }
                "sendmessage" if call.params["_ok"] == true => {
                    return Some(Sent {
                        chat: call.params["chat_id"].as_i64().unwrap_or(0),
                        text: call.params["text"].as_str().unwrap_or_default().to_owned(),
                        at: call.at,
                    });
                }
                _ => {}
            }
        }
    }

    /// When update `id` was first served by `getUpdates` (known once a later call was seen).
    pub fn served_at(&self, id: i64) -> Option<Instant> {
        self.served.get(&id).copied()
    }
}
