//! The crash harness: the real daemon with all four platforms enabled against their fakes,
//! people writing in many chats all the while, SIGKILL at chosen moments and a restart after
//! each; at the end, each message's answers are counted as each platform shows them.
//!
//! The moments ([`Moment`]): any time; mid-stream from the model; mid-tool; with a reply
//! in the outbox not yet sent; with a post the platform took but did not answer yet (the
//! send/sent-mark window, on Discord and Slack, which can tell a resend); inside a webhook
//! delivery (WhatsApp); with an approval waiting for a person.
//!
//! With several nodes on one PostgreSQL store ([`cluster`]), the kills and `SIGSTOP` pauses
//! fall on any node, and the time from killing the working node to the next message being
//! answered by another is measured.
//!
//! Used by `tests/crash_e2e.rs` (a few kills in CI) and by `hermes-bench crash` (hundreds, on
//! the release binary). Every wait is bounded.

mod cluster;
mod report;

pub use report::{Report, TELLS_RESENDS};

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::conformance::PlatformFake;
use crate::daemon::{Daemon, Home};
use crate::discord::FakeDiscord;
use crate::llm::{FakeLlm, Reply, last_user_text};
use crate::slack::FakeSlack;
use crate::telegram::FakeTelegram;
use crate::whatsapp::{self, FakeWhatsApp};

/// What to run.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The `hermes-gateway` binary.
    pub binary: String,
    pub kills: usize,
    /// Chats per platform that write all the time.
    pub chats: u32,
    pub seed: u64,
    /// Print a line per kill.
    pub verbose: bool,
    /// Daemons serving the same bots: 1 on SQLite; more on one PostgreSQL store (the
    /// tests' server), where kills and pauses fall on any node ([`cluster`]).
    pub nodes: usize,
}

/// When a kill comes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Moment {
    Anytime,
    MidStream,
    MidTool,
    /// A reply is in the outbox, not yet handed to the platform.
    Unsent,
    /// Discord or Slack took a post and has not answered it yet.
    Unanswered,
    /// Right after a WhatsApp message was written: its webhook delivery is under way.
    Webhook,
    /// An approval prompt is shown and nobody answered it.
    Approval,
}

const MOMENTS: [Moment; 7] = [
    Moment::Anytime,
    Moment::MidStream,
    Moment::MidTool,
    Moment::Unsent,
    Moment::Unanswered,
    Moment::Webhook,
    Moment::Approval,
];

impl Moment {
    fn name(self) -> &'static str {
        match self {
            Moment::Anytime => "anytime",
            Moment::MidStream => "mid-stream",
            Moment::MidTool => "mid-tool",
            Moment::Unsent => "reply-not-yet-sent",
            Moment::Unanswered => "post-not-yet-answered",
            Moment::Webhook => "inside-webhook-delivery",
            Moment::Approval => "approval-waiting",
        }
    }
}

/// One message a person wrote.
#[derive(Debug, Clone)]
pub(crate) struct Written {
    platform: usize,
    chat: String,
    token: String,
    approval: bool,
    /// Model calls a clean run makes for it: a tool call and an approval take two.
    calls: usize,
}

/// The four fakes, the model and the daemon's home.
pub(crate) struct Fleet {
    llm: FakeLlm,
    telegram: FakeTelegram,
    discord: FakeDiscord,
    slack: FakeSlack,
    whatsapp: FakeWhatsApp,
    home: Home,
    /// Where tools leave a mark when they start, and the approvals' victims live.
    marks: PathBuf,
    binary: String,
    /// Several nodes: the other nodes' homes, and the store they share with the first.
    others: Vec<Home>,
    store: Option<cluster::SharedStore>,
}

const NAMES: [&str; 4] = ["telegram", "discord", "slack", "whatsapp"];

impl Fleet {
    /// The model's context window (tokens) the daemon is told of: a small one makes long
    /// conversations compress early (the soak's bound on memory).
    pub(crate) fn set_context_length(&self, tokens: u64) {
        let path = self.home.dir.join("config.yaml");
        let yaml = std::fs::read_to_string(&path).unwrap();
        let yaml = yaml.replace(
            "context_length: 131072",
            &format!("context_length: {tokens}"),
        );
        std::fs::write(path, yaml).unwrap();
    }

    pub(crate) async fn start(dir: &Path, binary: &str) -> Fleet {
        Fleet::start_nodes(dir, binary, None, 1).await
    }

    /// The fakes and `nodes` homes: the first in `dir`, the others in `dir/node-<n>`, all on
    /// the store at `store_url` (SQLite in the first home when `None`).
    async fn start_nodes(dir: &Path, binary: &str, store_url: Option<&str>, nodes: usize) -> Fleet {
        let llm = FakeLlm::start().await;
        let telegram = FakeTelegram::start().await;
        let discord = FakeDiscord::start().await;
        let slack = FakeSlack::start().await;
        // Meta retries a delivery for days; here, as long as a restart takes.
        let whatsapp = FakeWhatsApp::start_with(whatsapp::Options {
            delivery_attempts: 600,
            retry_delay: Duration::from_millis(100),
            ..Default::default()
        })
        .await;
        let fakes: [&dyn PlatformFake; 4] = [&telegram, &discord, &slack, &whatsapp];
        let yaml: String = fakes.iter().map(|f| f.platform_yaml()).collect();
        let mut env: Vec<String> = fakes.iter().flat_map(|f| f.env()).collect();
        env.extend(fakes.iter().map(|f| format!("{}=true", f.allow_all_var())));
        let home_of = |dir: &Path, node: usize| {
            let mut env = env.clone();
            let mut extra_yaml = "";
            if let Some(url) = store_url {
                env.push(format!("HERMES_STORE_URL={url}"));
                env.push(format!("HERMES_NODE_ID={}", cluster::node_id(node)));
                extra_yaml = cluster::LEASES;
            }
            let env: Vec<&str> = env.iter().map(String::as_str).collect();
            Home::with_platform(dir, &llm.base_url(), &yaml, &env, extra_yaml)
        };
        let home = home_of(dir, 0);
        let others = (1..nodes)
            .map(|node| home_of(&dir.join(cluster::node_id(node)), node))
            .collect();
        let marks = dir.join("marks");
        std::fs::create_dir_all(&marks).unwrap();
        Fleet {
            llm,
            telegram,
            discord,
            slack,
            whatsapp,
            home,
            marks,
            binary: binary.to_owned(),
            others,
            store: None,
        }
    }

    fn fake(&self, platform: usize) -> &dyn PlatformFake {
        match platform {
            0 => &self.telegram,
            1 => &self.discord,
            2 => &self.slack,
            _ => &self.whatsapp,
        }
    }

    /// Start the daemon and tell the webhook platform where it listens (at most 15 s).
    pub(crate) async fn start_daemon(&self) -> Daemon {
        let daemon = Daemon::start(&self.binary, &self.home, &[("HERMES_LOG", "info")]);
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            if let Some(addr) = daemon.http_addr() {
                self.whatsapp.attach_daemon(&addr);
                return daemon;
            }
            assert!(
                Instant::now() < deadline,
                "the daemon did not say where it listens within 15 s:\n{}",
                daemon.log_text()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// The model: `say T` is streamed as `ok T`; `tool T` runs a short command first;
    /// `approve T` asks to delete T's victim the first time and answers after that.
    pub(crate) fn script_model(&self) {
        let marks = self.marks.clone();
        let asked: Arc<Mutex<HashMap<String, usize>>> = Default::default();
        self.llm.answer_by_default(move |request| {
            // The summary of a conversation being compressed (recognised by its instructions).
            let summarising = request["messages"][0]["content"]
                .as_str()
                .is_some_and(|system| system.starts_with("You summarise"));
            if summarising {
                return Reply::text("Summary: the person sent messages and got answers.");
            }
            let text = last_user_text(request);
            let mut words = text.split_whitespace();
            let (kind, token) = loop {
                match words.next() {
                    Some(k @ ("say" | "tool" | "approve")) => {
                        break (k, words.next().unwrap_or_default().to_owned());
                    }
                    Some(_) => continue,
                    None => return Reply::text("ok ?"),
                }
            };
            let after_tool = request["messages"]
                .as_array()
                .and_then(|m| m.last())
                .is_some_and(|m| m["role"] == "tool");
            let times = {
                let mut asked = asked.lock().unwrap();
                let n = asked.entry(token.clone()).or_default();
                *n += 1;
                *n
            };
            // A message that came while an earlier one was being answered joins it (the
            // default busy mode, `interrupt`): one answer, a line for each.
            let mut pending = pending_tokens(request);
            if pending.is_empty() {
                pending.push(token.clone());
            }
            let answer = pending
                .iter()
                .map(|t| format!("ok {t}"))
                .collect::<Vec<_>>()
                .join("\n");
            match kind {
                _ if after_tool => Reply::text(answer),
                "say" => Reply::Paced {
                    text: answer,
                    pieces: 3,
                    every: Duration::from_millis(120),
                },
                "tool" => Reply::terminal(&format!(
                    "touch {}/{token}.$$ && sleep 0.4",
                    marks.display()
                )),
                _ if times == 1 => {
                    Reply::terminal(&format!("rm -rf {}", marks.join(&token).display()))
                }
                _ => Reply::text(answer),
            }
        });
    }

    /// Outbox rows not yet sent (0 while the database cannot be read).
    pub(crate) fn outbox_open(&self) -> i64 {
        match &self.store {
            Some(store) => store.outbox_open(),
            None => self.home.outbox_open().unwrap_or(0),
        }
    }

    /// What the database says of a message and its answer: for a lost one, where it
    /// stopped (never recorded, recorded and not answered, answered and not sent…).
    fn whereabouts(&self, token: &str) -> String {
        if let Some(store) = &self.store {
            return store.whereabouts(token);
        }
        let Ok(conn) = rusqlite::Connection::open(self.home.dir.join("gateway.db")) else {
            return "no database".into();
        };
        // (what it says, the text it is about) of each row mentioning the token, kept when
        // the token is a whole word of it (`w1` is not `w12`).
        let rows = |sql: &str| -> Vec<String> {
            let found: rusqlite::Result<Vec<(String, String)>> =
                conn.prepare(sql).and_then(|mut s| {
                    let rows =
                        s.query_map([format!("%{token}%")], |r| Ok((r.get(0)?, r.get(1)?)))?;
                    rows.collect()
                });
            let found = found.unwrap_or_default();
            let found = found.into_iter().filter(|(_, text)| has_word(text, token));
            found.map(|(what, _)| what).collect()
        };
        let inbox = rows(
            "SELECT state || '/' || coalesce(outcome, ''), coalesce(text, '')
             FROM inbox WHERE text LIKE ?1",
        );
        let outbox = rows(
            "SELECT state || ' after ' || attempts || ' attempts ' || coalesce(last_error, ''),
             plain FROM outbox WHERE plain LIKE ?1",
        );
        // Meta's deliveries of it (WhatsApp only): each attempt's status, 0 = no answer.
        let posts: Vec<String> = self
            .whatsapp
            .deliveries()
            .iter()
            .filter(|d| has_word(&d.body, token))
            .map(|d| format!("#{}:{}", d.attempt, d.status))
            .collect();
        let posts = match posts.len() {
            0..=12 => posts.join(" "),
            n => format!(
                "{} … {} ({n} attempts)",
                posts[..6].join(" "),
                posts[n - 6..].join(" ")
            ),
        };
        format!("inbox {inbox:?}, outbox {outbox:?}, webhook posts [{posts}]")
    }

    fn tool_marks(&self) -> usize {
        std::fs::read_dir(&self.marks)
            .map(|d| {
                d.filter(|e| e.as_ref().is_ok_and(|e| e.path().is_file()))
                    .count()
            })
            .unwrap_or(0)
    }

    fn posts_taken(&self) -> usize {
        self.discord.calls("/messages").len() + self.slack.calls("chat.postMessage").len()
    }

    /// How many of `chat`'s shown messages answer `token` (a line `ok <token>`; an answer
    /// to messages that joined has a line for each).
    pub(crate) fn answers(&self, w: &Written) -> usize {
        let answer = format!("ok {}", w.token);
        let shown = self.fake(w.platform).shown(&w.chat);
        shown
            .iter()
            .filter(|m| m.lines().any(|line| line.trim() == answer))
            .count()
    }
}

/// Whether the answers in `shown` (lines `ok <token>`) first appear in the order of
/// `answers` (the messages' order): a later message is never answered before an earlier.
fn in_order(shown: &[String], answers: &[String]) -> bool {
    let mut seen: Vec<usize> = Vec::new();
    for line in shown.iter().flat_map(|m| m.lines()) {
        if let Some(at) = answers.iter().position(|a| a == line.trim())
            && !seen.contains(&at)
        {
            seen.push(at);
        }
    }
    seen.windows(2).all(|w| w[0] < w[1])
}

/// Whether `word` stands in `text` as a whole word (between characters that are not letters
/// or digits).
fn has_word(text: &str, word: &str) -> bool {
    text.split(|c: char| !c.is_ascii_alphanumeric())
        .any(|w| w == word)
}

/// The tokens of the people's messages this request answers: those in user messages after
/// the last answer given (an assistant message without tool calls), oldest first. This
/// relies on every turn ending in such an answer (a turn ends by answering, or by being
/// joined with the next message); a turn recorded without one would have its token
/// credited to the next answer in the chat.
fn pending_tokens(request: &Value) -> Vec<String> {
    let messages = request["messages"].as_array().cloned().unwrap_or_default();
    let since = messages
        .iter()
        .rposition(|m| {
            m["role"] == "assistant" && m["tool_calls"].as_array().is_none_or(|c| c.is_empty())
        })
        .map_or(0, |i| i + 1);
    let mut tokens = Vec::new();
    for message in &messages[since..] {
        if message["role"] != "user" {
            continue;
        }
        let text = message["content"].as_str().unwrap_or_default();
        let mut words = text.split_whitespace();
        while let Some(word) = words.next() {
            if matches!(word, "say" | "tool" | "approve")
                && let Some(token) = words.next()
                && !tokens.iter().any(|t| t == token)
            {
                tokens.push(token.to_owned());
            }
        }
    }
    tokens
}

/// About `bytes` bytes of ordinary words (none of them a message kind).
pub(crate) fn filler(bytes: usize) -> String {
    const WORDS: &str =
        "the quick brown fox jumps over a lazy dog while we talk about plans for the week ";
    WORDS.repeat(bytes / WORDS.len() + 1)[..bytes]
        .trim()
        .to_owned()
}

/// A small deterministic generator (splitmix64).
pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// The people writing: each chat sends its next message once its last is answered (or
/// after a while without an answer, as people do).
pub(crate) struct Writers {
    written: Vec<Written>,
    /// Per (platform, person): the last message and when it was written.
    last: HashMap<(usize, u32), (usize, Instant)>,
    counter: usize,
    /// The share of messages (in percent) whose answer runs a tool first.
    pub(crate) tool_percent: u64,
    /// Words written after each message's token, so a message is about this many bytes
    /// longer (people write sentences, not tokens).
    pub(crate) filler: String,
}

const PATIENCE: Duration = Duration::from_secs(10);

impl Writers {
    pub(crate) fn new() -> Writers {
        Writers {
            written: Vec::new(),
            last: HashMap::new(),
            counter: 0,
            tool_percent: 25,
            filler: String::new(),
        }
    }

    /// How many messages were written, and how many of them are answered.
    pub(crate) fn answered(&self, fleet: &Fleet) -> (usize, usize) {
        let answered = self.written.iter().filter(|w| fleet.answers(w) > 0).count();
        (self.written.len(), answered)
    }

    fn token(&mut self, platform: usize) -> String {
        self.counter += 1;
        format!("{}{}", &NAMES[platform][..1], self.counter)
    }

    fn write(&mut self, fleet: &Fleet, platform: usize, person: u32, kind: &str) -> usize {
        let fake = fleet.fake(platform);
        let who = fake.person(person);
        let chat = fake.dm_chat(&who);
        let token = self.token(platform);
        if kind == "approve" {
            let victim = fleet.marks.join(&token);
            std::fs::create_dir_all(&victim).unwrap();
            std::fs::write(victim.join("precious.txt"), "data").unwrap();
        }
        let text = format!("{kind} {token} {}", self.filler);
        fake.write(&chat, &who, text.trim_end(), true);
        self.written.push(Written {
            platform,
            chat,
            token,
            approval: kind == "approve",
            calls: if kind == "say" { 1 } else { 2 },
        });
        self.written.len() - 1
    }

    /// One round: every chat whose last message is answered (or waited too long) writes.
    pub(crate) fn tick(&mut self, fleet: &Fleet, chats: u32, rng: &mut Rng) {
        for platform in 0..4 {
            for person in 1..=chats {
                let ready = match self.last.get(&(platform, person)) {
                    None => true,
                    Some((at, when)) => {
                        when.elapsed() > PATIENCE || fleet.answers(&self.written[*at]) > 0
                    }
                };
                if ready {
                    let tool = rng.below(100) < self.tool_percent;
                    let kind = if tool { "tool" } else { "say" };
                    let at = self.write(fleet, platform, person, kind);
                    self.last.insert((platform, person), (at, Instant::now()));
                }
            }
        }
    }
}

/// Run the plan; the report says what held.
pub async fn run(plan: &Plan) -> Report {
    if plan.nodes > 1 {
        return cluster::run(plan).await;
    }
    let dir = tempfile::tempdir().unwrap();
    let fleet = Fleet::start(dir.path(), &plan.binary).await;
    fleet.script_model();
    if std::env::var_os("HERMES_CRASH_DEBUG").is_some() {
        eprintln!("crash: home kept at {}", dir.keep().display());
    }
    let started = Instant::now();
    let mut rng = Rng(plan.seed);
    let mut writers = Writers::new();
    let mut report = Report::default();
    let mut daemon = fleet.start_daemon().await;
    // The extra people: one per platform for approvals, one for webhook kills.
    let (approver, webhook_writer) = (plan.chats + 1, plan.chats + 2);
    warm_up(&fleet, &mut writers, webhook_writer).await;
    for kill in 0..plan.kills {
        let moment = MOMENTS[kill % MOMENTS.len()];
        let since = Instant::now();
        let reached = reach(
            &fleet,
            moment,
            &mut writers,
            plan,
            &mut rng,
            kill,
            approver,
            webhook_writer,
        )
        .await;
        daemon.kill();
        fleet.discord.clear_faults();
        fleet.slack.clear_faults();
        let counted = if reached { moment } else { Moment::Anytime };
        *report.moments.entry(counted.name()).or_default() += 1;
        report.kills += 1;
        if plan.verbose {
            eprintln!(
                "crash: kill {} at {} ({}) after {} ms",
                kill + 1,
                moment.name(),
                if reached { "reached" } else { "not reached" },
                since.elapsed().as_millis()
            );
        }
        if rng.below(3) == 0 {
            tokio::time::sleep(Duration::from_millis(rng.below(500))).await;
        }
        daemon = fleet.start_daemon().await;
    }
    finish(&fleet, &writers, &mut report).await;
    drop(daemon);
    report.seconds = started.elapsed().as_secs_f64();
    report
}

/// Everyone (people 1 to `people` on each platform) writes once before the first kill, and
/// is answered (at most a minute): Discord gives a bot no way to find a DM channel it has
/// never seen, so a new person's first message written while the daemon is down is beyond
/// reach (docs/reliability.md).
async fn warm_up(fleet: &Fleet, writers: &mut Writers, people: u32) {
    for platform in 0..4 {
        for person in 1..=people {
            writers.write(fleet, platform, person, "say");
        }
    }
    let warm = Instant::now() + Duration::from_secs(60);
    while writers.answered(fleet).1 < writers.written.len() && Instant::now() < warm {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Keep the people writing until `moment` comes (at most 10 s); whether it came.
#[allow(clippy::too_many_arguments)]
async fn reach(
    fleet: &Fleet,
    moment: Moment,
    writers: &mut Writers,
    plan: &Plan,
    rng: &mut Rng,
    kill: usize,
    approver: u32,
    webhook_writer: u32,
) -> bool {
    let start = Instant::now();
    let deadline = start + Duration::from_secs(10);
    let requests_before = fleet.llm.requests().len();
    let marks_before = fleet.tool_marks();
    let posts_before = fleet.posts_taken();
    let anytime = Duration::from_millis(100 + rng.below(1400));
    let platform = kill / MOMENTS.len() % 4;
    let prompts_before = {
        let fake = fleet.fake(platform);
        fake.prompts(&fake.dm_chat(&fake.person(approver))).len()
    };
    match moment {
        Moment::Unanswered => {
            fleet
                .discord
                .answer_slowly("/messages", Duration::from_secs(5));
            fleet
                .slack
                .answer_slowly("chat.postMessage", Duration::from_secs(5));
        }
        Moment::Webhook => {
            writers.write(fleet, 3, webhook_writer, "say");
            tokio::time::sleep(Duration::from_millis(rng.below(20))).await;
            return true;
        }
        Moment::Approval => {
            writers.write(fleet, platform, approver, "approve");
        }
        _ => {}
    }
    let mut last_tick = Instant::now() - Duration::from_secs(1);
    while Instant::now() < deadline {
        if last_tick.elapsed() >= Duration::from_millis(50) {
            writers.tick(fleet, plan.chats, rng);
            last_tick = Instant::now();
        }
        let came = match moment {
            Moment::Anytime => start.elapsed() >= anytime,
            Moment::MidStream => {
                let timings = fleet.llm.timings();
                timings.len() > requests_before
                    && timings[requests_before..].iter().any(|t| {
                        t.finished.is_none() && t.arrived.elapsed() > Duration::from_millis(50)
                    })
            }
            Moment::MidTool => fleet.tool_marks() > marks_before,
            Moment::Unsent => fleet.outbox_open() > 0,
            Moment::Unanswered => fleet.posts_taken() > posts_before,
            Moment::Approval => {
                let fake = fleet.fake(platform);
                fake.prompts(&fake.dm_chat(&fake.person(approver))).len() > prompts_before
            }
            Moment::Webhook => true,
        };
        if came {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    false
}

/// Stop writing, wait for every message to be answered (at most 3 minutes) and the outbox
/// to drain, then count.
async fn finish(fleet: &Fleet, writers: &Writers, report: &mut Report) {
    let deadline = Instant::now() + Duration::from_secs(180);
    while Instant::now() < deadline {
        if writers.written.iter().all(|w| fleet.answers(w) > 0) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let drained = Instant::now() + Duration::from_secs(60);
    while fleet.outbox_open() > 0 && Instant::now() < drained {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_millis(1500)).await;
    report.messages = writers.written.len();
    let mut answered_by_chat: HashMap<(usize, String), Vec<String>> = HashMap::new();
    for w in &writers.written {
        answered_by_chat
            .entry((w.platform, w.chat.clone()))
            .or_default()
            .push(format!("ok {}", w.token));
        match fleet.answers(w) {
            0 => report.lost.push(format!(
                "{}:{} ({})",
                NAMES[w.platform],
                w.token,
                fleet.whereabouts(&w.token)
            )),
            1 => report.answered_once += 1,
            _ => report
                .doubled
                .entry(NAMES[w.platform])
                .or_default()
                .push(w.token.clone()),
        }
        if w.approval {
            report.approvals += 1;
            if !fleet.marks.join(&w.token).join("precious.txt").exists() {
                report.approvals_ran.push(w.token.clone());
            }
        }
    }
    for ((platform, chat), answers) in &answered_by_chat {
        let shown = fleet.fake(*platform).shown(chat);
        if !in_order(&shown, answers) {
            // Each message shown (a line per answer), in the order the chat shows them.
            let lines: Vec<String> = shown.iter().map(|m| m.replace('\n', " + ")).collect();
            report.out_of_order.push(format!(
                "{}:{chat} (written {:?}; shown {lines:?})",
                NAMES[*platform],
                answers
                    .iter()
                    .map(|a| a.trim_start_matches("ok "))
                    .collect::<Vec<_>>()
            ));
        }
        let told = shown.iter().any(|m| m.contains("NOT run"));
        let approvals = writers
            .written
            .iter()
            .filter(|w| w.approval && w.platform == *platform && w.chat == *chat);
        if approvals.clone().next().is_some() && !told {
            report
                .approvals_untold
                .extend(approvals.map(|w| w.token.clone()));
        }
        for m in shown {
            let m = m.trim();
            let known = m.contains("NOT run")
                || m.lines()
                    .all(|line| answers.iter().any(|a| a == line.trim()));
            if !known {
                report
                    .other_shown
                    .push(format!("{}: {m}", NAMES[*platform]));
            } else if m.lines().filter(|l| l.trim().starts_with("ok ")).count() > 1 {
                report.joined += 1;
            }
        }
    }
    let expected: usize = writers.written.iter().map(|w| w.calls).sum();
    report.turns_redone = fleet.llm.requests().len().saturating_sub(expected);
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_request_answers_every_message_since_the_last_answer() {
        let request = json!({"messages": [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": "say w1"},
            {"role": "assistant", "content": "ok w1"},
            // An interrupted turn's work, carried over, then the message that interrupted.
            {"role": "user", "content": "tool w2 the quick brown fox"},
            {"role": "assistant", "content": "", "tool_calls": [{"id": "c1"}]},
            {"role": "tool", "content": "done", "tool_call_id": "c1"},
            {"role": "user", "content": "say w3"},
        ]});
        assert_eq!(pending_tokens(&request), ["w2", "w3"]);
        let fresh = json!({"messages": [{"role": "user", "content": "approve w9"}]});
        assert_eq!(pending_tokens(&fresh), ["w9"]);
        assert_eq!(filler(20), "the quick brown fox");
        assert!(has_word(r#"{"body":"say w12 the"}"#, "w12"));
        assert!(!has_word(r#"{"body":"say w12"}"#, "w1"));
        assert!(has_word("ok w3\nok w1", "w1"));
    }

    #[test]
    fn answers_shown_out_of_order_are_caught() {
        let answers: Vec<String> = ["ok w1", "ok w2", "ok w3"].map(String::from).into();
        let shown = |m: &[&str]| m.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert!(in_order(&shown(&["ok w1", "ok w2\nok w3"]), &answers));
        // A repeat of an earlier answer after a later one is a double, not disorder.
        assert!(in_order(
            &shown(&["ok w1", "ok w2", "ok w1", "ok w3"]),
            &answers
        ));
        assert!(!in_order(&shown(&["ok w2", "ok w1"]), &answers));
        assert!(!in_order(&shown(&["ok w1", "ok w3\nok w2"]), &answers));
    }
}
