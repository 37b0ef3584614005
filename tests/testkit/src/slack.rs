//! A fake Slack: the Web API under `/api/{method}` (the methods the gateway uses, with
//! Slack's tokens, errors, block validation and rate limits), uploads and downloads of
//! files, `response_url`s, and both ways Slack hands an app what people do: Socket Mode (a
//! WebSocket reached through `apps.connections.open`, envelopes that must be acknowledged)
//! and the Events API (signed HTTP POSTs to the daemon's `/slack/events`,
//! `/slack/interactions` and `/slack/commands`). It speaks the shapes the real
//! slack-morphism 2.31 parses (the tests in `tests.rs` and `client_tests.rs` prove it).
//!
//! The world: one team ([`TEAM_ID`]) with a channel ([`GROUP_CHANNEL`]) and a DM with each
//! person ([`FakeSlack::person`], [`FakeSlack::dm_chat`]). People's messages, the bot's
//! messages (with their threads and edit history), ephemeral messages, reactions, assistant
//! statuses, files both ways and the answers to slash commands are kept; every Web API call
//! is recorded; faults and rate limits can be scripted.
//!
//! Like Slack, the fake escapes `&`, `<` and `>` in what people write and wraps the links
//! they paste in `<…>`; a message with files has the subtype `file_share`; a mention in a
//! channel arrives twice (a `message` and an `app_mention`, with different event ids); and
//! the bot's own posts come back as `message` events carrying its `bot_id`
//! ([`Options::echo_own`]). Events API envelopes that are not acknowledged are delivered
//! again with `retry_attempt` / `X-Slack-Retry-Num`; presses and slash commands are not
//! (Slack shows the person an error instead), they are only marked as expired.

mod api;
mod blocks;
#[cfg(test)]
mod client_tests;
mod conformance;
mod events;
mod model;
mod mrkdwn;
mod people;
mod socket;
#[cfg(test)]
mod tests;

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::conformance::WorkingEvent;

pub use events::{Delivery, Signing, sign};
pub use mrkdwn::visible;
pub use socket::Ack;

pub const TEAM_ID: &str = "T0HERMES";
pub const TEAM_DOMAIN: &str = "hermes-test";
/// The bot's user id and its bot id (what its messages carry as `bot_id`).
pub const BOT_USER_ID: &str = "U0BOT";
pub const BOT_ID: &str = "B0BOT";
pub const BOT_NAME: &str = "hermes";
pub const APP_ID: &str = "A0HERMES";
/// Another app's bot, for [`FakeSlack::bot_message`].
pub const OTHER_BOT_ID: &str = "B0OTHERBOT";
/// The bot token (`SLACK_BOT_TOKEN`): every Web API method but `apps.connections.open`.
pub const BOT_TOKEN: &str = "xoxb-1000000000001-2000000000002-HermesTestBotToken4fQx";
/// The app-level token (`SLACK_APP_TOKEN`): only `apps.connections.open`.
pub const APP_TOKEN: &str = "xapp-1-A0HERMES-3000000000003-7d9e1f0a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6";
/// The signing secret of the Events API (`SLACK_SIGNING_SECRET`).
pub const SIGNING_SECRET: &str = "8f742231b10e8888abcd99edabcdef85";
/// The deprecated verification token Slack still puts in payloads.
pub const VERIFICATION_TOKEN: &str = "fAkEvErIfIcAtIoNtOkEn01";
/// The channel the bot is in, and its name.
pub const GROUP_CHANNEL: &str = "C0GENERAL";
pub const GROUP_NAME: &str = "general";
/// What the adapter promises per message, in characters as shown.
pub const MAX_LEN: usize = 3900;
/// Slack refuses a longer `text` with `msg_too_long`.
pub const TEXT_LIMIT: usize = 40_000;

/// How people's events reach the app.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Over the Socket Mode WebSocket.
    Socket,
    /// POSTed to the daemon's HTTP server (see [`crate::conformance::PlatformFake::attach_daemon`]).
    Events,
}

/// How the fake behaves; [`Options::default`] suits most tests.
#[derive(Debug, Clone)]
pub struct Options {
    pub mode: Mode,
    /// Whether the app has the assistant feature: `assistant.threads.setStatus` works;
    /// otherwise it answers `missing_scope` (needed `assistant:write`).
    pub assistant: bool,
    /// At most this many `chat.postMessage` per channel within a second; more is answered
    /// 429 with `Retry-After: 1`. `None`: no limit.
    pub post_per_second: Option<u32>,
    /// How long an envelope may wait for its acknowledgement (Socket Mode) or a POST for
    /// its answer (Events API) before Slack delivers it again (events) or gives up
    /// (presses, commands): 3 s.
    pub redeliver_after: Duration,
    /// How many times an event is delivered again at most (Slack: 3).
    pub max_redeliveries: u32,
    /// Events API: how long after a refused POST (non-2xx, no connection) the retry comes.
    /// A POST left without an answer is retried at once, as Slack does.
    pub retry_delay: Duration,
    /// The bot's own posts and edits come back as `message` events, as they do on Slack.
    pub echo_own: bool,
    /// A mention in a channel arrives as `app_mention` first, then as `message`.
    pub mention_first: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            mode: Mode::Socket,
            assistant: false,
            post_per_second: None,
            redeliver_after: Duration::from_secs(3),
            max_redeliveries: 3,
            retry_delay: Duration::from_secs(1),
            echo_own: true,
            mention_first: false,
        }
    }
}

/// One recorded Web API call.
#[derive(Debug, Clone)]
pub struct Call {
    /// The API method (`chat.postMessage`).
    pub method: String,
    /// `GET` or `POST`.
    pub http: String,
    /// The parameters, merged from the query and the JSON or form body (form and query
    /// values are strings).
    pub params: Value,
    pub content_type: String,
    /// The token it carried (`Authorization: Bearer …` or a `token` parameter).
    pub token: Option<String>,
    pub status: u16,
    /// Slack's `error` when `ok` was false.
    pub error: Option<String>,
    /// Answered by a scripted fault or a rate limit instead of being carried out.
    pub refused: bool,
    pub at: Instant,
}

/// One of the bot's messages, as [`FakeSlack::raw_messages`] gives them.
#[derive(Debug, Clone)]
pub struct SentMessage {
    pub channel: String,
    pub ts: String,
    pub thread_ts: Option<String>,
    /// The current text and blocks (after edits; `Null` when it has no blocks).
    pub text: String,
    pub blocks: Value,
    /// Earlier texts, oldest first.
    pub history: Vec<String>,
    /// Files shared with it: (name, bytes).
    pub files: Vec<(String, Vec<u8>)>,
    pub deleted: bool,
    pub at: Instant,
    /// When each edit came.
    pub edited: Vec<Instant>,
}

/// A message only one person sees.
#[derive(Debug, Clone)]
pub struct Ephemeral {
    pub channel: String,
    pub user: String,
    pub ts: String,
    pub thread_ts: Option<String>,
    pub text: String,
    pub blocks: Value,
    /// `chat.postEphemeral`, `response_url` or `ack` (a slash command's Socket Mode ack,
    /// or the body of its HTTP answer).
    pub via: &'static str,
    pub at: Instant,
}

/// A file the bot shared.
#[derive(Debug, Clone)]
pub struct SentFile {
    pub file_id: String,
    pub channel: String,
    pub thread_ts: Option<String>,
    pub name: String,
    pub title: Option<String>,
    pub comment: Option<String>,
    pub bytes: Vec<u8>,
    /// The `length` announced to `files.getUploadURLExternal`.
    pub length: usize,
    pub at: Instant,
}

/// What kind of envelope (or POST) carried something people did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// An `event_callback` (`events_api`; `/slack/events`).
    Event,
    /// A `block_actions` press (`interactive`; `/slack/interactions`).
    Interactive,
    /// A slash command (`slash_commands`; `/slack/commands`).
    SlashCommand,
}

/// Something people did, as it was handed to the app: an envelope in Socket Mode, POSTs
/// in Events API mode (their attempts in [`FakeSlack::deliveries`]).
#[derive(Debug, Clone)]
pub struct Envelope {
    /// The envelope id (Socket Mode); the same id names it in Events API mode.
    pub id: String,
    pub kind: Kind,
    /// The `event_callback`, the `block_actions` payload, or the command's fields.
    pub payload: Value,
    pub event_id: Option<String>,
    /// When it was sent and with which `retry_attempt`, each time.
    pub sends: Vec<(Instant, u32)>,
    /// When it was first acknowledged (an ack frame; a 2xx answer).
    pub acked: Option<Instant>,
    /// The `payload` of the ack frame, or the body of the HTTP answer.
    pub ack_payload: Option<Value>,
    /// A press or command not acknowledged in time: the person saw an error.
    pub expired: bool,
}

/// An answer to a slash command or a press.
#[derive(Debug, Clone)]
pub struct CommandResponse {
    /// `response_url`, or `ack` (the Socket Mode ack's payload, or the HTTP answer's body).
    pub via: &'static str,
    pub body: Value,
    pub at: Instant,
}

/// A stored message, people's or the bot's.
#[derive(Debug, Clone)]
struct Msg {
    channel: String,
    ts: String,
    thread_ts: Option<String>,
    user: String,
    /// Sent by this fake's bot (through the Web API).
    ours: bool,
    text: String,
    blocks: Value,
    files: Vec<(String, Vec<u8>)>,
    history: Vec<String>,
    edited: Vec<Instant>,
    deleted: bool,
    /// The `metadata` it was posted with (`Null`: none).
    metadata: Value,
    at: Instant,
}

/// An envelope, in both modes.
#[derive(Debug, Clone)]
struct Env {
    id: String,
    kind: Kind,
    payload: Value,
    event_id: Option<String>,
    retry_attempt: u32,
    retry_reason: &'static str,
    sends: Vec<(Instant, u32)>,
    last_sent: Option<Instant>,
    /// Waiting for a socket.
    queued: bool,
    acked: Option<Instant>,
    ack_payload: Option<Value>,
    expired: bool,
}

/// A scripted answer.
#[derive(Debug, Clone)]
enum FaultKind {
    RateLimit(u64),
    Error(Value),
    Http(u16),
}

#[derive(Debug, Clone)]
struct Fault {
    method: String,
    left: usize,
    kind: FaultKind,
}

/// A file on its way up: announced, then its bytes, then completed.
#[derive(Debug, Clone)]
struct Upload {
    name: String,
    length: usize,
    bytes: Option<Vec<u8>>,
    completed: bool,
}

/// Where a channel id leads.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Chan {
    /// A DM with this person.
    Dm(String),
    Group,
}

struct Inner {
    options: Options,
    base_url: String,
    ws_url: String,
    /// Unix seconds when the fake started: message timestamps count from there.
    epoch: u64,
    clock: u64,
    last_n: u64,
    calls: Vec<Call>,
    faults: Vec<Fault>,
    /// Methods whose answers come this late (what they did is visible at once).
    slow_answers: HashMap<String, Duration>,
    /// Per channel, when its recent `chat.postMessage` came.
    posts: HashMap<String, VecDeque<Instant>>,
    messages: Vec<Msg>,
    ephemerals: Vec<Ephemeral>,
    /// The bot's reactions: (channel, ts, name).
    reactions: Vec<(String, String, String)>,
    /// Assistant statuses showing: (channel, thread_ts).
    statuses: Vec<(String, String)>,
    working: Vec<(String, Instant, WorkingEvent)>,
    uploads: HashMap<String, Upload>,
    sent_files: Vec<SentFile>,
    /// Files people sent (and the bot shared): id → (name, mime, bytes).
    files: HashMap<String, (String, String, Vec<u8>)>,
    downloads: HashMap<String, usize>,
    /// `response_url` number → (envelope id, uses).
    response_urls: HashMap<u64, (String, u32)>,
    responses: HashMap<String, Vec<CommandResponse>>,
    connection_opens: usize,
    envs: Vec<Env>,
    sock: socket::State,
    ev: events::State,
}

impl Inner {
    fn next_n(&mut self) -> u64 {
        self.last_n += 1;
        self.last_n
    }

    /// A new message timestamp, later than every earlier one.
    fn next_ts(&mut self) -> String {
        self.clock += 1;
        let secs = self.epoch + self.clock / 10_000;
        format!("{secs}.{:06}", (self.clock % 10_000) * 100)
    }

    fn chan(&self, id: &str) -> Option<Chan> {
        if id == GROUP_CHANNEL {
            return Some(Chan::Group);
        }
        let n: u32 = id.strip_prefix("D0PERSON")?.parse().ok()?;
        (n > 0).then(|| Chan::Dm(model::person(n)))
    }

    fn find(&self, channel: &str, ts: &str) -> Option<usize> {
        let found = self
            .messages
            .iter()
            .position(|m| m.channel == channel && m.ts == ts);
        found.filter(|&i| !self.messages[i].deleted)
    }

    /// The bot's messages a person sees in `chat` (thread replies included), in order.
    fn shown_in<'a>(&'a self, chat: &'a str) -> impl Iterator<Item = &'a Msg> + 'a {
        let shown = self.messages.iter();
        shown.filter(move |m| m.channel == chat && m.ours && !m.deleted)
    }

    /// Hand something people did to the app; its envelope id.
    fn emit(&mut self, id: String, kind: Kind, payload: Value) -> String {
        let event_id = payload["event_id"].as_str().map(str::to_owned);
        self.envs.push(Env {
            id: id.clone(),
            kind,
            payload,
            event_id,
            retry_attempt: 0,
            retry_reason: "",
            sends: Vec::new(),
            last_sent: None,
            queued: false,
            acked: None,
            ack_payload: None,
            expired: false,
        });
        let at = self.envs.len() - 1;
        match self.options.mode {
            Mode::Socket => self.send_envelope(at),
            Mode::Events => self.ev.enqueue(at),
        }
        id
    }

    /// An event in an `event_callback`, handed to the app.
    fn emit_event(&mut self, event: Value) -> String {
        let n = self.next_n();
        let callback = model::event_callback(event, &model::event_id(n), model::unix_now());
        let id = model::envelope_id(self.next_n());
        self.emit(id, Kind::Event, callback)
    }

    /// A `response_url` answering to envelope `id`.
    fn response_url(&mut self, id: &str) -> String {
        let n = self.next_n();
        self.response_urls.insert(n, (id.to_owned(), 0));
        format!("{}/response/{n}", self.base_url)
    }

    fn record_working(&mut self, channel: &str, event: WorkingEvent) {
        self.working
            .push((channel.to_owned(), Instant::now(), event));
    }

    /// A message the bot posted (through `chat.postMessage`, a `response_url` or a file
    /// share); its index.
    fn post_ours(
        &mut self,
        channel: &str,
        thread_ts: Option<String>,
        text: String,
        blocks: Value,
        files: Vec<(String, Vec<u8>)>,
    ) -> usize {
        let ts = self.next_ts();
        if let Some(thread) = &thread_ts {
            let showing = (channel.to_owned(), thread.clone());
            if let Some(at) = self.statuses.iter().position(|s| *s == showing) {
                // Slack clears an assistant status when the app answers in the thread.
                self.statuses.remove(at);
                self.record_working(channel, WorkingEvent::Ended);
            }
        }
        self.messages.push(Msg {
            channel: channel.to_owned(),
            ts,
            thread_ts,
            user: BOT_USER_ID.into(),
            ours: true,
            text,
            blocks,
            files,
            history: Vec::new(),
            edited: Vec::new(),
            deleted: false,
            metadata: Value::Null,
            at: Instant::now(),
        });
        let at = self.messages.len() - 1;
        if self.options.echo_own {
            let event = model::own_message_event(&self.messages[at], self.chan_type(channel));
            self.emit_event(event);
        }
        at
    }

    fn chan_type(&self, channel: &str) -> &'static str {
        match self.chan(channel) {
            Some(Chan::Dm(_)) => "im",
            _ => "channel",
        }
    }

    /// An answer to a slash command or press (`response_url`, an ack's payload, the body of
    /// the HTTP answer): kept, and shown as Slack would.
    fn respond(&mut self, id: &str, body: Value, via: &'static str) {
        let now = Instant::now();
        let entry = self.responses.entry(id.to_owned()).or_default();
        entry.push(CommandResponse {
            via,
            body: body.clone(),
            at: now,
        });
        let Some(env) = self.envs.iter().find(|e| e.id == id) else {
            return;
        };
        let (channel, user, pressed) = match env.kind {
            Kind::SlashCommand => (
                env.payload["channel_id"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
                env.payload["user_id"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
                None,
            ),
            _ => (
                env.payload["channel"]["id"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
                env.payload["user"]["id"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
                env.payload["container"]["message_ts"]
                    .as_str()
                    .map(str::to_owned),
            ),
        };
        let text = body["text"].as_str().unwrap_or_default().to_owned();
        let blocks = body.get("blocks").cloned().unwrap_or(Value::Null);
        let pressed = pressed.and_then(|ts| self.find(&channel, &ts));
        if let Some(at) = pressed.filter(|_| body["delete_original"] == true) {
            self.messages[at].deleted = true;
        } else if let Some(at) = pressed.filter(|_| body["replace_original"] == true) {
            let msg = &mut self.messages[at];
            let old = std::mem::replace(&mut msg.text, text);
            msg.history.push(old);
            msg.blocks = blocks;
            msg.edited.push(now);
        } else if body["response_type"] == "in_channel" {
            let thread = body["thread_ts"].as_str().map(str::to_owned);
            self.post_ours(&channel, thread, text, blocks, Vec::new());
        } else if !text.is_empty() || blocks.is_array() {
            let ts = self.next_ts();
            self.ephemerals.push(Ephemeral {
                channel,
                user,
                ts,
                thread_ts: body["thread_ts"].as_str().map(str::to_owned),
                text,
                blocks,
                via,
                at: now,
            });
        }
    }
}

/// The fake; clones share one world.
#[derive(Clone)]
pub struct FakeSlack {
    inner: Arc<Mutex<Inner>>,
    /// The Web API, file and `response_url` server, and the Socket Mode listener.
    pub http_addr: SocketAddr,
    pub ws_addr: SocketAddr,
    /// Connection resets armed on its HTTP server.
    resets: crate::reset::Resets,
}

impl FakeSlack {
    /// A Socket Mode fake with [`Options::default`].
    pub async fn start() -> FakeSlack {
        FakeSlack::start_with(Options::default()).await
    }

    /// An Events API fake: people's events are POSTed to the daemon.
    pub async fn start_events() -> FakeSlack {
        let options = Options {
            mode: Mode::Events,
            ..Options::default()
        };
        FakeSlack::start_with(options).await
    }

    /// A fake behaving as `options` say, listening on two ports of 127.0.0.1.
    pub async fn start_with(options: Options) -> FakeSlack {
        let bind = || tokio::net::TcpListener::bind("127.0.0.1:0");
        let (http, ws) = (bind().await.expect("bind"), bind().await.expect("bind"));
        let http_addr = http.local_addr().expect("addr");
        let ws_addr = ws.local_addr().expect("addr");
        let mode = options.mode;
        let fake = FakeSlack {
            inner: Arc::new(Mutex::new(Inner {
                options,
                base_url: format!("http://{http_addr}"),
                ws_url: format!("ws://{ws_addr}"),
                epoch: model::unix_now(),
                clock: 0,
                last_n: 0,
                calls: Vec::new(),
                faults: Vec::new(),
                slow_answers: HashMap::new(),
                posts: HashMap::new(),
                messages: Vec::new(),
                ephemerals: Vec::new(),
                reactions: Vec::new(),
                statuses: Vec::new(),
                working: Vec::new(),
                uploads: HashMap::new(),
                sent_files: Vec::new(),
                files: HashMap::new(),
                downloads: HashMap::new(),
                response_urls: HashMap::new(),
                responses: HashMap::new(),
                connection_opens: 0,
                envs: Vec::new(),
                sock: socket::State::default(),
                ev: events::State::default(),
            })),
            http_addr,
            ws_addr,
            resets: Default::default(),
        };
        let app = api::router(fake.clone());
        tokio::spawn(crate::reset::serve(http, app, fake.resets.clone()));
        tokio::spawn(socket::serve(fake.clone(), ws));
        if mode == Mode::Socket {
            tokio::spawn(socket::tick(fake.clone()));
        } else {
            let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
            fake.lock().ev.tx = Some(tx);
            tokio::spawn(events::sender(fake.clone(), rx));
        }
        fake
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn mode(&self) -> Mode {
        self.lock().options.mode
    }

    /// The Web API root: methods are `{api_base_url}/{method}`.
    pub fn api_base_url(&self) -> String {
        format!("http://{}/api", self.http_addr)
    }

    // ---- What happened ----

    /// Everything handed to the app so far, in order.
    pub fn envelopes(&self) -> Vec<Envelope> {
        let inner = self.lock();
        inner.envs.iter().map(envelope).collect()
    }

    /// When envelope `id` was first acknowledged.
    pub fn acked(&self, id: &str) -> Option<Instant> {
        let inner = self.lock();
        inner.envs.iter().find(|e| e.id == id).and_then(|e| e.acked)
    }

    /// Recorded Web API calls of `method` (`""`: all), in order.
    pub fn calls(&self, method: &str) -> Vec<Call> {
        let inner = self.lock();
        let found = inner.calls.iter();
        let found = found.filter(|c| method.is_empty() || c.method == method);
        found.cloned().collect()
    }

    /// How many times `apps.connections.open` handed out a WebSocket URL.
    pub fn connection_opens(&self) -> usize {
        self.lock().connection_opens
    }

    /// The bot's messages in `chat` as stored (thread replies and deleted ones included).
    pub fn raw_messages(&self, chat: &str) -> Vec<SentMessage> {
        let inner = self.lock();
        let found = inner.messages.iter();
        let found = found.filter(|m| m.channel == chat && m.ours);
        found.map(sent).collect()
    }

    /// Messages only one person saw in `chat`.
    pub fn ephemerals(&self, chat: &str) -> Vec<Ephemeral> {
        let inner = self.lock();
        let found = inner.ephemerals.iter().filter(|e| e.channel == chat);
        found.cloned().collect()
    }

    /// Files the bot shared to `chat`: (name, bytes).
    pub fn sent_files(&self, chat: &str) -> Vec<(String, Vec<u8>)> {
        let inner = self.lock();
        let found = inner.sent_files.iter().filter(|f| f.channel == chat);
        found.map(|f| (f.name.clone(), f.bytes.clone())).collect()
    }

    /// Every file share, with its thread, title and comment.
    pub fn file_shares(&self) -> Vec<SentFile> {
        self.lock().sent_files.clone()
    }

    /// How many times the file `file_id` was downloaded with the bot token.
    pub fn downloads(&self, file_id: &str) -> usize {
        let inner = self.lock();
        inner.downloads.get(file_id).copied().unwrap_or(0)
    }

    /// The answers to slash command or press `id` (its envelope id), in order.
    pub fn command_responses(&self, id: &str) -> Vec<CommandResponse> {
        let inner = self.lock();
        inner.responses.get(id).cloned().unwrap_or_default()
    }

    /// The bot's reactions in place now: (ts, name).
    pub fn reactions(&self, chat: &str) -> Vec<(String, String)> {
        let inner = self.lock();
        let found = inner.reactions.iter().filter(|r| r.0 == chat);
        found
            .map(|(_, ts, name)| (ts.clone(), name.clone()))
            .collect()
    }

    // ---- Faults ----

    /// The next `n` calls of `method` answer 429 with `Retry-After: retry_after_secs` and
    /// `{"ok":false,"error":"ratelimited"}`.
    pub fn rate_limit_next(&self, method: &str, n: usize, retry_after_secs: u64) {
        self.script(method, n, FaultKind::RateLimit(retry_after_secs));
    }

    /// The next call of `method` answers `{"ok":false,"error":<error>}`.
    pub fn fail_next(&self, method: &str, error: &str) {
        let body = json!({"ok": false, "error": error});
        self.script(method, 1, FaultKind::Error(body));
    }

    /// The next call of `method` answers `missing_scope`, naming the scope `needed`.
    pub fn missing_scope(&self, method: &str, needed: &str) {
        let body = json!({"ok": false, "error": "missing_scope", "needed": needed,
                          "provided": model::SCOPES});
        self.script(method, 1, FaultKind::Error(body));
    }

    /// The next call of `method` answers HTTP `status` (500, 503…) with an HTML body.
    pub fn fail_http_next(&self, method: &str, status: u16) {
        self.script(method, 1, FaultKind::Http(status));
    }

    fn script(&self, method: &str, left: usize, kind: FaultKind) {
        let method = method.to_owned();
        self.lock().faults.push(Fault { method, left, kind });
    }

    /// Calls of `method` take effect at once but are answered `delay` later.
    pub fn answer_slowly(&self, method: &str, delay: Duration) {
        self.lock().slow_answers.insert(method.to_owned(), delay);
    }

    /// Forget every scripted fault not yet used.
    pub fn clear_faults(&self) {
        self.lock().faults.clear();
    }
}

fn sent(m: &Msg) -> SentMessage {
    SentMessage {
        channel: m.channel.clone(),
        ts: m.ts.clone(),
        thread_ts: m.thread_ts.clone(),
        text: m.text.clone(),
        blocks: m.blocks.clone(),
        history: m.history.clone(),
        files: m.files.clone(),
        deleted: m.deleted,
        at: m.at,
        edited: m.edited.clone(),
    }
}

fn envelope(e: &Env) -> Envelope {
    Envelope {
        id: e.id.clone(),
        kind: e.kind,
        payload: e.payload.clone(),
        event_id: e.event_id.clone(),
        sends: e.sends.clone(),
        acked: e.acked,
        ack_payload: e.ack_payload.clone(),
        expired: e.expired,
    }
}
