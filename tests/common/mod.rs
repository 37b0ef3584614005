//! Shared by the end-to-end tests: a world of fakes plus a home for the real daemon.
#![allow(dead_code)]

use std::time::Duration;

use hermes_testkit::daemon::{Daemon, Home};
use hermes_testkit::eventually;
use hermes_testkit::llm::FakeLlm;
use hermes_testkit::telegram::FakeTelegram;
#[allow(unused_imports)]
pub use hermes_testkit::telegram::visible;

pub const BIN: &str = env!("CARGO_BIN_EXE_hermes-gateway");
pub const WAIT: Duration = Duration::from_secs(15);
pub const ALICE: i64 = 4242;

pub struct World {
    pub telegram: FakeTelegram,
    pub llm: FakeLlm,
    pub home: Home,
    _dir: tempfile::TempDir,
}

impl World {
    pub async fn new(env: &[&str], yaml: &str) -> World {
        let telegram = FakeTelegram::start().await;
        let llm = FakeLlm::start().await;
        let dir = tempfile::tempdir().unwrap();
        let home = Home::new(dir.path(), &telegram.base_url(), &llm.base_url(), env, yaml);
        World {
            telegram,
            llm,
            home,
            _dir: dir,
        }
    }

    pub async fn allow_all() -> World {
        World::new(&["TELEGRAM_ALLOW_ALL_USERS=true"], "").await
    }

    /// Put `model_yaml` (a whole `model:` section) in place of the home's model, and
    /// `extra_yaml` at the end of `config.yaml` (before the daemon starts).
    pub fn set_model(&self, model_yaml: &str, extra_yaml: &str) {
        let path = self.home.dir.join("config.yaml");
        let text = std::fs::read_to_string(&path).unwrap();
        let start = text.find("model:\n").unwrap();
        let end = text.find("security:\n").unwrap();
        let text = format!("{}{model_yaml}{}{extra_yaml}", &text[..start], &text[end..]);
        std::fs::write(&path, text).unwrap();
    }

    /// Alice says `text` and the answer comes: the replies so far in her chat.
    pub async fn ask(&self, text: &str) -> Vec<String> {
        let before = self.telegram.sent_texts(ALICE).len();
        self.telegram.dm(ALICE, text);
        self.replies(ALICE, before + 1).await
    }

    pub fn start(&self) -> Daemon {
        Daemon::start(BIN, &self.home, &[])
    }

    /// Send `text` as Alice and return what the bot said after it (as shown, tags taken
    /// off), once it said `count` things.
    pub async fn said_after(&self, text: &str, count: usize) -> Vec<String> {
        let before = self.telegram.sent_texts(ALICE).len();
        self.telegram.dm(ALICE, text);
        self.replies(ALICE, before + count).await[before..]
            .iter()
            .map(|t| visible(t))
            .collect()
    }

    pub async fn replies(&self, chat: i64, count: usize) -> Vec<String> {
        let t = self.telegram.clone();
        eventually(WAIT, &format!("{count} replies in chat {chat}"), || {
            let sent = t.sent_texts(chat);
            (sent.len() >= count).then_some(sent)
        })
        .await
    }
}

/// Have Alice start a turn that runs a minute-long command; returns the command's process
/// group (on the host: the group the daemon signals) once it runs (the daemon must be
/// started).
pub async fn alice_runs_a_long_command(w: &World) -> i32 {
    let pidfile = w.home.dir.join("work/long-command-pid");
    w.llm.push(hermes_testkit::llm::Reply::terminal(&format!(
        "echo $$ > {}; sleep 60",
        pidfile.display()
    )));
    w.telegram.dm(ALICE, "sleep for a minute");
    group_of(written_pid(&pidfile).await)
}

/// The process group of running process `pid`, as the host sees it. A confined command's
/// group is led by the process the daemon spawned, outside its jail, so the pid a command
/// wrote is not its group's.
pub fn group_of(pid: i32) -> i32 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .unwrap_or_else(|e| panic!("process {pid}: {e}"));
    let rest = stat.rsplit_once(") ").expect("a stat line").1;
    rest.split_whitespace()
        .nth(2)
        .and_then(|g| g.parse().ok())
        .expect("a process group")
}

/// The host pid of the process whose pid (as it saw it, maybe inside a jail) was written to
/// `pidfile`, once the file is there.
pub async fn written_pid(pidfile: &std::path::Path) -> i32 {
    // Seen twice in a row: a process of the same number in a jail that is just ending (the
    // start-up check of the confinement runs one) is gone by the second look.
    let mut last = None;
    hermes_testkit::eventually(WAIT, "the command to start", || {
        std::fs::read_to_string(pidfile)
            .ok()?
            .trim()
            .parse::<i32>()
            .ok()?;
        let found = hermes_testkit::pids::host_pid(pidfile);
        let steady = found.filter(|pid| last == Some(*pid) && !process_gone(*pid));
        last = found;
        steady
    })
    .await
}

/// The `n`-th prompt with buttons (1-based) in `chat`: its message id and its message.
pub async fn prompt(w: &World, chat: i64, n: usize) -> (i64, serde_json::Value) {
    let t = w.telegram.clone();
    eventually(WAIT, &format!("prompt {n}"), || {
        t.prompts(chat).get(n - 1).cloned()
    })
    .await
}

/// `user` presses the button labelled `label` on `prompt` in `chat`.
pub fn press(w: &World, chat: i64, user: i64, prompt: &(i64, serde_json::Value), label: &str) {
    let data = hermes_testkit::telegram::FakeTelegram::button_data(&prompt.1, label);
    w.telegram.press(chat, user, prompt.0, &data);
}

/// Every reply the daemon wrote has been marked sent (see `Home::outbox_drained`).
pub async fn outbox_drained(w: &World) {
    w.home.outbox_drained(WAIT).await
}

/// Nothing more arrives in `chat` for a while (used after the expected replies).
pub async fn settle() {
    tokio::time::sleep(Duration::from_millis(800)).await;
}

/// Whether any process is left in process group `pgid`.
pub fn group_alive(pgid: i32) -> bool {
    std::fs::read_dir("/proc").unwrap().flatten().any(|entry| {
        let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        let Some(rest) = stat.rsplit_once(") ").map(|(_, r)| r) else {
            return false;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        fields.len() > 2 && fields[0] != "Z" && fields[2] == pgid.to_string()
    })
}

/// The tool results the model was shown in its last request, in order.
pub fn tool_results(w: &World) -> Vec<String> {
    w.llm
        .requests()
        .last()
        .map(tool_results_in)
        .unwrap_or_default()
}

/// The tool results a model request carries, in order.
pub fn tool_results_in(request: &serde_json::Value) -> Vec<String> {
    request["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// The daemon's `/metrics` text.
pub async fn metrics(addr: &str) -> String {
    reqwest::get(format!("http://{addr}/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

/// The names of the tools a model request offers.
pub fn offered(request: &serde_json::Value) -> Vec<String> {
    request["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["function"]["name"].as_str().map(str::to_owned))
        .collect()
}

/// Whether the process a command wrote its pid to `path` is gone (or only a zombie).
pub fn written_process_gone(path: &std::path::Path) -> bool {
    pid_in(path).is_none_or(process_gone)
}

/// Whether process `pid` is gone (or only a zombie).
pub fn process_gone(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| rest.starts_with('Z')),
    }
}

/// The host pid of the process a command or a script wrote its pid (as it saw it) to
/// `path`; `None` once it no longer runs.
pub fn pid_in(path: &std::path::Path) -> Option<i32> {
    hermes_testkit::pids::host_pid(path)
}

/// A Python script that writes, as a command with the database in reach would, a standing
/// approval of `pattern` and a paired stranger (`telegram` `666`, "Mallory") into the
/// `gateway.db` of `home`, without the gateway's signatures; it prints `written`.
pub fn forging_script(home: &std::path::Path, pattern: &str) -> String {
    format!(
        "import sqlite3\n\
         db = sqlite3.connect('{}/gateway.db')\n\
         db.execute(\"INSERT INTO approval_allowlist (pattern_key, description, example, added_by, added_at) VALUES ('{pattern}', 'x', 'cat .env', 'model', 0)\")\n\
         db.execute(\"INSERT INTO paired_users (platform, user_id, user_name, approved_at) VALUES ('telegram', '666', 'Mallory', 0)\")\n\
         db.commit()\n\
         print('written')\n",
        home.display()
    )
}

/// The uid (and gid) the tests that run the daemon as an unprivileged user give it
/// (`setpriv`); no such account needs to exist.
#[allow(dead_code)]
pub const UNPRIVILEGED: u32 = 4711;

/// Makes `dir` and everything in it owned by `uid` (group `uid` too), for a daemon run as
/// that user.
#[allow(dead_code)]
pub fn give_to(dir: &std::path::Path, uid: u32) {
    let status = std::process::Command::new("chown")
        .args(["-R", &format!("{uid}:{uid}")])
        .arg(dir)
        .status()
        .expect("chown runs");
    assert!(status.success(), "chown -R {uid} {}", dir.display());
}

/// Whether any message of a model request holds `text`.
pub fn said(request: &serde_json::Value, text: &str) -> bool {
    request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .any(|m| m["content"].as_str().is_some_and(|c| c.contains(text)))
}
