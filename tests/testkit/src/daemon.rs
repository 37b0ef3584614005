//! Runs the real `hermes-gateway` binary in a temporary `$HERMES_HOME` wired to the fakes.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// A home directory with `config.yaml` and `.env`.
pub struct Home {
    pub dir: PathBuf,
}

impl Home {
    /// Wait (at most `within`) until every reply the daemon wrote has been marked sent. A
    /// SIGKILL before that mark sends the message again after the restart (invariant 2's
    /// known window), so a test that counts messages across a kill waits for this first.
    pub async fn outbox_drained(&self, within: std::time::Duration) {
        crate::eventually(within, "the outbox to be drained", || {
            (self.outbox_open()? == 0).then_some(())
        })
        .await
    }

    /// The model's answer `text` sending a file: `bytes` written as `name` in the daemon's
    /// working directory (`work/`), and its `MEDIA:` tag on a line after the text.
    pub fn reply_sending(&self, name: &str, bytes: &[u8], text: &str) -> crate::llm::Reply {
        let path = self.dir.join("work").join(name);
        std::fs::write(&path, bytes).unwrap();
        crate::llm::Reply::text(format!("{text}\nMEDIA:{}", path.display()))
    }

    /// The owner approves pairing `code` on `platform` with `binary pairing approve`, as a
    /// person at the terminal would; panics with its error when refused.
    pub fn approve_pairing(&self, binary: &str, platform: &str, code: &str) {
        let out = Command::new(binary)
            .args(["pairing", "approve", platform, code, "--home"])
            .arg(&self.dir)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Outbox rows not yet marked sent (`pending` or `sending`); `None` while the database
    /// cannot be read (not made yet, or locked).
    pub fn outbox_open(&self) -> Option<i64> {
        let conn = rusqlite::Connection::open(self.dir.join("gateway.db")).ok()?;
        conn.query_row(
            "SELECT count(*) FROM outbox WHERE state IN ('pending', 'sending')",
            [],
            |r| r.get(0),
        )
        .ok()
    }

    /// A home for a daemon talking to the fake Telegram at `telegram_url` and the fake LLM
    /// at `llm_url`; `env` lines go to `.env`, `extra_yaml` is appended to `config.yaml`.
    pub fn new(
        dir: &Path,
        telegram_url: &str,
        llm_url: &str,
        env: &[&str],
        extra_yaml: &str,
    ) -> Home {
        let platform = format!(
            "  telegram:\n    enabled: true\n    extra:\n      base_url: {telegram_url}\n      poll_timeout: 2\n"
        );
        let mut dotenv = vec!["TELEGRAM_BOT_TOKEN=123456:TEST-TOKEN"];
        dotenv.extend_from_slice(env);
        Home::with_platform(dir, llm_url, &platform, &dotenv, extra_yaml)
    }

    /// A home for any platform: `platform_yaml` is its section under `platforms:` (indented
    /// two spaces), `env` the `.env` lines (its token among them).
    pub fn with_platform(
        dir: &Path,
        llm_url: &str,
        platform_yaml: &str,
        env: &[&str],
        extra_yaml: &str,
    ) -> Home {
        std::fs::create_dir_all(dir).unwrap();
        let workdir = dir.join("work");
        std::fs::create_dir_all(&workdir).unwrap();
        // The working directory joins a `terminal:` section the test brings, if any (YAML
        // refuses a key given twice).
        let cwd = format!("  cwd: {}\n", workdir.display());
        let (terminal, extra_yaml) = match extra_yaml.find("terminal:\n") {
            Some(at) if at == 0 || extra_yaml[..at].ends_with('\n') => {
                let after = at + "terminal:\n".len();
                let merged = if extra_yaml.contains("  cwd:") {
                    extra_yaml.to_owned()
                } else {
                    format!("{}{cwd}{}", &extra_yaml[..after], &extra_yaml[after..])
                };
                (String::new(), merged)
            }
            _ => (format!("terminal:\n{cwd}"), extra_yaml.to_owned()),
        };
        // Likewise `security:` (the tests turn Hermes' tirith off).
        let (security, extra_yaml) = match extra_yaml.find("security:\n") {
            Some(at) if at == 0 || extra_yaml[..at].ends_with('\n') => {
                let after = at + "security:\n".len();
                let merged = format!(
                    "{}  tirith_enabled: false\n{}",
                    &extra_yaml[..after],
                    &extra_yaml[after..]
                );
                (String::new(), merged)
            }
            _ => (
                "security:\n  tirith_enabled: false\n".to_owned(),
                extra_yaml,
            ),
        };
        // Sessions are not titled (that is a model call of its own, which would take the
        // replies tests queue), unless a test's `auxiliary:` speaks of titles.
        let (auxiliary, extra_yaml) = match extra_yaml.find("auxiliary:\n") {
            Some(_) if extra_yaml.contains("title_generation") => (String::new(), extra_yaml),
            Some(at) if at == 0 || extra_yaml[..at].ends_with('\n') => {
                let after = at + "auxiliary:\n".len();
                let merged = format!(
                    "{}  title_generation:\n    enabled: false\n{}",
                    &extra_yaml[..after],
                    &extra_yaml[after..]
                );
                (String::new(), merged)
            }
            _ => (
                "auxiliary:\n  title_generation:\n    enabled: false\n".to_owned(),
                extra_yaml,
            ),
        };
        let yaml = format!(
            "model:\n  provider: custom\n  default: fake-model\n  base_url: {llm_url}\n  api_key: sk-test-secret\n  context_length: 131072\n  max_attempts: 3\n\
             {security}\
             {auxiliary}\
             http:\n  listen: 127.0.0.1:0\n\
             {terminal}\
             platforms:\n{platform_yaml}{extra_yaml}"
        );
        std::fs::write(dir.join("config.yaml"), yaml).unwrap();
        let mut dotenv = String::new();
        for line in env {
            dotenv.push_str(line);
            dotenv.push('\n');
        }
        std::fs::write(dir.join(".env"), dotenv).unwrap();
        Home {
            dir: dir.to_path_buf(),
        }
    }
}

/// A running daemon; killed when dropped.
pub struct Daemon {
    child: Child,
    pub log: PathBuf,
}

/// How a daemon is started, beyond its home and environment.
#[derive(Debug, Clone, Default)]
pub struct Launch {
    /// As this user id (and group id of the same number), with no supplementary groups,
    /// through `setpriv` (the tests run as root).
    pub user: Option<u32>,
    /// With these supplementary groups (as root), through `setpriv`.
    pub groups: Vec<u32>,
    /// In this working directory (else the test's).
    pub cwd: Option<PathBuf>,
    /// Under this command: the daemon's program and arguments follow it.
    pub under: Vec<String>,
}

impl Daemon {
    /// Start `binary run --home <home>` with `envs` added to its environment.
    pub fn start(binary: &str, home: &Home, envs: &[(&str, &str)]) -> Daemon {
        Daemon::launch(binary, home, envs, &Launch::default())
    }

    /// Start `binary run --home <home>` as `launch` says, with `envs` added to its
    /// environment.
    pub fn launch(binary: &str, home: &Home, envs: &[(&str, &str)], launch: &Launch) -> Daemon {
        let log = home.dir.join(format!(
            "daemon-{}.log",
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos()
        ));
        let file = std::fs::File::create(&log).unwrap();
        let mut cmd = if let Some((program, args)) = launch.under.split_first() {
            let mut under = Command::new(program);
            under.args(args).arg(binary);
            under
        } else if launch.user.is_some() || !launch.groups.is_empty() {
            let mut setpriv = Command::new("setpriv");
            match launch.user {
                Some(uid) => setpriv.args([
                    format!("--reuid={uid}"),
                    format!("--regid={uid}"),
                    "--clear-groups".into(),
                ]),
                None => setpriv.arg(format!(
                    "--groups={}",
                    launch
                        .groups
                        .iter()
                        .map(u32::to_string)
                        .collect::<Vec<_>>()
                        .join(",")
                )),
            };
            setpriv.arg("--").arg(binary);
            setpriv
        } else {
            Command::new(binary)
        };
        if let Some(cwd) = &launch.cwd {
            cmd.current_dir(cwd);
        }
        cmd.arg("run")
            .arg("--home")
            .arg(&home.dir)
            .env("HERMES_LOG", "info,hermes_gateway=debug")
            .stdout(Stdio::null())
            .stderr(file);
        for (k, v) in envs {
            cmd.env(k, v);
        }
        Daemon {
            child: cmd.spawn().expect("spawn daemon"),
            log,
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Its exit status once it has exited (`None` while it runs; -1 for a signal).
    pub fn exited(&mut self) -> Option<i32> {
        match self.child.try_wait() {
            Ok(Some(status)) => Some(status.code().unwrap_or(-1)),
            _ => None,
        }
    }

    /// Stop it (`SIGSTOP`: a pause the process does not see coming) or let it go on
    /// (`SIGCONT`).
    pub fn pause(&self, paused: bool) {
        let signal = if paused { "-STOP" } else { "-CONT" };
        let _ = Command::new("kill")
            .arg(signal)
            .arg(self.child.id().to_string())
            .status();
    }

    /// Kill at once (a crash).
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// SIGTERM and wait for the exit status.
    pub fn terminate(&mut self) -> Option<i32> {
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(self.child.id().to_string())
            .status();
        for _ in 0..100 {
            if let Ok(Some(status)) = self.child.try_wait() {
                return status.code();
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        self.kill();
        None
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The address the daemon's HTTP server listens on, once it has said so in its log.
    pub fn http_addr(&self) -> Option<String> {
        let log = self.log_text();
        let line = log.lines().find(|l| l.contains("http: listening"))?;
        let addr = line.split("addr=").nth(1)?.split_whitespace().next()?;
        Some(addr.to_owned())
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        self.kill();
    }
}
