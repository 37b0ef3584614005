//! A fake Discord: the REST API under `/api/v10` (messages, edits, typing, threads,
//! interaction callbacks and webhooks, global commands, the gateway URL), the attachment CDN,
//! and the gateway WebSocket (HELLO, heartbeats, IDENTIFY → READY + GUILD_CREATE, RESUME with
//! replay, op 7 / op 9), speaking the shapes the real serenity 0.12.5 parses. It owns the
//! world the bot lives in: one guild with a text channel and a thread, DMs with people, the
//! messages of both sides, interactions and their answers. Every REST call is recorded;
//! faults and rate limits can be scripted, and every answer carries per-route bucket headers.
//!
//! Gateway sessions work as Discord's do: a session keeps the log of its dispatches; while
//! no socket is attached, events are only logged, and a RESUME replays what the client has
//! not seen. A fresh IDENTIFY starts a new session without the old one's events. Events made
//! before the very first IDENTIFY are held and delivered after its READY, so a test may write
//! as soon as it started the daemon. Dispatches follow the session's intents (GUILDS,
//! GUILD_MESSAGES, DIRECT_MESSAGES) and MESSAGE_CONTENT blanks what Discord blanks.

mod gateway;
mod inspect;
mod model;
mod rest;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::conformance::{ShownPrompt, WorkingEvent};
use model::Chan;

/// The bot's user id; the application id is the same, as on Discord.
pub const BOT_ID: &str = "900000000000000001";
pub const APP_ID: &str = BOT_ID;
pub const BOT_NAME: &str = "hermes_test_bot";
/// The bot token (`base64(BOT_ID).<timestamp>.<hmac>` in form, like a real one).
pub const TOKEN: &str = "OTAwMDAwMDAwMDAwMDAwMDAx.GfakeT.TEST-TOKEN-hermes-gateway";
/// (With two shards it falls in shard 1: `(id >> 22) % 2`; DMs are shard 0's.)
pub const GUILD_ID: &str = "300000000004194305";
/// The guild's text channel.
pub const GROUP_CHANNEL: &str = "300000000000000002";
/// A public thread in [`GROUP_CHANNEL`] that exists from the start.
pub const THREAD_CHANNEL: &str = "300000000000000003";
/// Discord's message limit, in characters.
pub const MAX_LEN: usize = 2000;

/// How the fake behaves; [`Options::default`] suits most tests.
#[derive(Debug, Clone)]
pub struct Options {
    /// HELLO's heartbeat interval.
    pub heartbeat_interval_ms: u64,
    /// Requests per bucket (per route and major parameter) and window, as the headers say;
    /// a request over it is answered 429.
    pub bucket_limit: u32,
    pub bucket_window: Duration,
    /// How long an interaction may wait for its first callback (Discord: 3 s).
    pub interaction_window: Duration,
    /// The privileged intents enabled "in the developer portal"; asking for others closes
    /// the gateway with 4014.
    pub privileged_intents: u64,
    /// The shards `GET /gateway/bot` recommends; an IDENTIFY for another count (or none
    /// when more than one is needed) is closed with 4010 / 4011, as Discord does.
    pub shards: u32,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            heartbeat_interval_ms: 1000,
            bucket_limit: 50,
            bucket_window: Duration::from_secs(1),
            interaction_window: Duration::from_secs(3),
            privileged_intents: gateway::PRIVILEGED,
            shards: 1,
        }
    }
}

/// One recorded REST (or CDN) call.
#[derive(Debug, Clone)]
pub struct Call {
    pub method: String,
    /// Without `/api/v10` and without the query.
    pub path: String,
    pub query: String,
    /// The JSON body, or a form's `payload_json`; `Null` when there was none.
    pub body: Value,
    /// A form's parts (files and `payload_json`).
    pub parts: Vec<crate::multipart::Part>,
    pub status: u16,
    /// Answered by a scripted fault or a rate limit instead of being carried out.
    pub refused: bool,
    pub at: Instant,
}

/// One of the bot's messages, as [`FakeDiscord::raw_messages`] gives them.
#[derive(Debug, Clone)]
pub struct SentMessage {
    pub id: String,
    pub channel_id: String,
    /// The current content (after edits).
    pub content: String,
    /// Action rows as sent (`[]` when none).
    pub components: Value,
    /// The message this one replies to.
    pub reference: Option<String>,
    pub allowed_mentions: Option<Value>,
    /// Uploaded files: (name, bytes).
    pub files: Vec<(String, Vec<u8>)>,
    /// Earlier contents, oldest first.
    pub history: Vec<String>,
    pub flags: u64,
    /// The interaction it answers, if any.
    pub interaction: Option<String>,
    pub at: Instant,
}

/// How an interaction was answered through its webhook.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResponseKind {
    /// `PATCH /webhooks/{app}/{token}/messages/@original`.
    Original,
    /// `POST /webhooks/{app}/{token}` (or an edit of a follow-up).
    Followup,
}

/// One webhook answer to an interaction.
#[derive(Debug, Clone)]
pub struct Response {
    pub kind: ResponseKind,
    pub message_id: String,
    pub content: Option<String>,
    pub flags: u64,
    pub components: Option<Value>,
    pub at: Instant,
}

/// A stored message.
#[derive(Debug, Clone)]
struct Msg {
    id: u64,
    channel: String,
    guild: bool,
    author: String,
    content: String,
    mentions_bot: bool,
    attachments: Vec<Value>,
    files: Vec<(String, Vec<u8>)>,
    components: Value,
    reference: Option<String>,
    allowed_mentions: Option<Value>,
    flags: u64,
    history: Vec<String>,
    edited_ms: Option<u64>,
    /// Seen only by the person who pressed (flag 64).
    ephemeral: bool,
    interaction: Option<String>,
    /// The `nonce` it was posted with.
    nonce: Option<String>,
    at: Instant,
}

impl Msg {
    /// A deferred answer nobody has filled in yet ("Bot is thinking…").
    fn loading(&self) -> bool {
        self.flags & 128 != 0
    }
}

/// An interaction people started.
#[derive(Debug, Clone)]
struct Interaction {
    token: String,
    channel: String,
    /// The message whose button was pressed.
    message: Option<u64>,
    created: Instant,
    callbacks: Vec<(u8, Value, Instant)>,
    responses: Vec<Response>,
    /// What `@original` edits.
    original: Option<u64>,
}

/// A scripted answer.
#[derive(Debug, Clone)]
enum FaultKind {
    RateLimit { retry_after: f64, global: bool },
    Status(u16),
}

#[derive(Debug, Clone)]
struct Fault {
    path: String,
    left: usize,
    kind: FaultKind,
}

struct Inner {
    options: Options,
    base_url: String,
    ws_url: String,
    last_id: u64,
    calls: Vec<Call>,
    faults: Vec<Fault>,
    /// Bucket key → (window start, requests in it).
    buckets: HashMap<String, (Instant, u32)>,
    /// Threads made from messages: id → channel.
    threads: BTreeMap<String, Chan>,
    messages: Vec<Msg>,
    interactions: HashMap<String, Interaction>,
    /// Attachment id → (name, content type, bytes), served by the CDN.
    files: HashMap<String, (String, String, Vec<u8>)>,
    downloads: HashMap<String, usize>,
    commands: Vec<Value>,
    typing: Vec<(String, Instant)>,
    /// The bot's reactions now: (message id, emoji).
    reactions: Vec<(String, String)>,
    /// Each reaction the bot put on (`+👀`) or took off (`-👀`): (message id, change).
    reaction_log: Vec<(String, String)>,
    /// POSTs whose path contains the text answer after the delay (their effect is at once).
    slow: Vec<(String, Duration)>,
    /// Messages not posted again because their nonce was seen (`enforce_nonce`).
    nonce_hits: usize,
    gw: gateway::State,
}

impl Inner {
    fn next_id(&mut self) -> u64 {
        self.last_id = model::snowflake(self.last_id);
        self.last_id
    }

    /// What a channel id leads to.
    fn chan(&self, id: &str) -> Option<Chan> {
        match id {
            GROUP_CHANNEL => return Some(Chan::Text),
            THREAD_CHANNEL => return Some(model::standing_thread()),
            _ => {}
        }
        if let Some(thread) = self.threads.get(id) {
            return Some(thread.clone());
        }
        let n = id.parse::<u64>().ok()?.checked_sub(model::DM_BASE)?;
        (n > 0 && n < model::PERSON_BASE).then(|| Chan::Dm((model::PERSON_BASE + n).to_string()))
    }

    fn find(&self, id: &str) -> Option<&Msg> {
        let id = id.parse::<u64>().ok()?;
        self.messages.iter().find(|m| m.id == id)
    }

    fn find_mut(&mut self, id: u64) -> Option<&mut Msg> {
        self.messages.iter_mut().find(|m| m.id == id)
    }

    /// Every thread, for GUILD_CREATE.
    fn thread_objects(&self) -> Vec<Value> {
        let mut all = vec![model::standing_thread_json()];
        all.extend(self.threads.iter().map(|(id, c)| model::channel(id, c)));
        all
    }

    /// The bot's visible messages in `chat`, in order.
    fn shown_in(&self, chat: &str) -> impl Iterator<Item = &Msg> {
        self.messages.iter().filter(move |m| {
            m.channel == chat && m.author == BOT_ID && !m.ephemeral && !m.loading()
        })
    }
}

/// The fake; clones share one world.
#[derive(Clone)]
pub struct FakeDiscord {
    inner: Arc<Mutex<Inner>>,
    /// The REST + CDN server and the gateway listener.
    pub http_addr: SocketAddr,
    pub ws_addr: SocketAddr,
    /// Connection resets armed on its HTTP server.
    resets: crate::reset::Resets,
}

impl FakeDiscord {
    /// A fake with [`Options::default`], listening on two ports of 127.0.0.1.
    pub async fn start() -> FakeDiscord {
        FakeDiscord::start_with(Options::default()).await
    }

    /// A fake behaving as `options` say.
    pub async fn start_with(options: Options) -> FakeDiscord {
        let bind = || tokio::net::TcpListener::bind("127.0.0.1:0");
        let (http, ws) = (bind().await.expect("bind"), bind().await.expect("bind"));
        let http_addr = http.local_addr().expect("addr");
        let ws_addr = ws.local_addr().expect("addr");
        let shards = options.shards.max(1);
        let fake = FakeDiscord {
            inner: Arc::new(Mutex::new(Inner {
                options,
                base_url: format!("http://{http_addr}"),
                ws_url: format!("ws://{ws_addr}"),
                last_id: 0,
                calls: Vec::new(),
                faults: Vec::new(),
                buckets: HashMap::new(),
                threads: BTreeMap::new(),
                messages: Vec::new(),
                interactions: HashMap::new(),
                files: HashMap::new(),
                downloads: HashMap::new(),
                commands: Vec::new(),
                typing: Vec::new(),
                reactions: Vec::new(),
                reaction_log: Vec::new(),
                slow: Vec::new(),
                nonce_hits: 0,
                gw: gateway::State::new(shards),
            })),
            http_addr,
            ws_addr,
            resets: Default::default(),
        };
        let app = rest::router(fake.clone());
        tokio::spawn(crate::reset::serve(http, app, fake.resets.clone()));
        tokio::spawn(gateway::serve(fake.clone(), ws));
        fake
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The REST root: requests go to `{api_base_url}/api/v10/...`.
    pub fn api_base_url(&self) -> String {
        format!("http://{}", self.http_addr)
    }

    /// The gateway's WebSocket URL (what `GET /gateway` answers).
    pub fn gateway_url(&self) -> String {
        format!("ws://{}", self.ws_addr)
    }

    /// The thread that exists from the start ([`THREAD_CHANNEL`]).
    pub fn thread_chat(&self) -> String {
        THREAD_CHANNEL.into()
    }

    /// `person` writes `text` in `chat`; returns the message id. In a guild channel or
    /// thread, `addressed` puts the bot's mention first.
    pub fn message(&self, chat: &str, person: &str, text: &str, addressed: bool) -> String {
        self.post(chat, person, text, addressed, Vec::new(), None, 0)
    }

    /// A message carrying files: (name, content type, bytes) each.
    pub fn message_with_attachments(
        &self,
        chat: &str,
        person: &str,
        text: &str,
        addressed: bool,
        files: Vec<(&str, &str, Vec<u8>)>,
    ) -> String {
        self.post(chat, person, text, addressed, files, None, 0)
    }

    /// A voice message (flag 8192, an OGG attachment with duration and waveform).
    pub fn voice_note(&self, chat: &str, person: &str, bytes: Vec<u8>) -> String {
        let files = vec![("voice-message.ogg", "audio/ogg", bytes)];
        self.post(chat, person, "", false, files, None, 8192)
    }

    /// `person` replies to message `to` (for instance one of the bot's) in `chat`.
    pub fn reply(&self, chat: &str, person: &str, text: &str, to: &str) -> String {
        self.post(chat, person, text, false, Vec::new(), Some(to), 0)
    }

    #[allow(clippy::too_many_arguments)]
    fn post(
        &self,
        chat: &str,
        person: &str,
        text: &str,
        addressed: bool,
        files: Vec<(&str, &str, Vec<u8>)>,
        reference: Option<&str>,
        flags: u64,
    ) -> String {
        let mut inner = self.lock();
        let chan = inner
            .chan(chat)
            .unwrap_or_else(|| panic!("no Discord channel {chat}"));
        let guild = chan.in_guild();
        let addressed = addressed && guild;
        let content = if addressed {
            format!("<@{BOT_ID}> {text}")
        } else {
            text.to_owned()
        };
        let id = inner.next_id();
        let mut attachments = Vec::new();
        for (name, mime, bytes) in files {
            let aid = inner.next_id();
            let name = rest::file_name(name);
            let mut a = model::attachment(&inner.base_url, aid, &name, mime, bytes.len());
            if flags & 8192 != 0 {
                a["duration_secs"] = json!(2.0);
                a["waveform"] = json!("AAECAwQFBgcICQoLDA0ODw==");
            }
            attachments.push(a);
            inner
                .files
                .insert(aid.to_string(), (name, mime.to_owned(), bytes));
        }
        let msg = Msg {
            id,
            channel: chat.to_owned(),
            guild,
            author: person.to_owned(),
            content,
            mentions_bot: addressed,
            attachments,
            files: Vec::new(),
            components: json!([]),
            reference: reference.map(str::to_owned),
            allowed_mentions: None,
            flags,
            history: Vec::new(),
            edited_ms: None,
            ephemeral: false,
            interaction: None,
            nonce: None,
            at: Instant::now(),
        };
        let event = model::message(&inner, &msg, true, false);
        inner.messages.push(msg);
        inner.gw.dispatch("MESSAGE_CREATE", event);
        id.to_string()
    }

    /// `person` presses the button `custom_id` under message `message_id` in `chat`;
    /// returns the interaction id.
    pub fn press_button(
        &self,
        chat: &str,
        person: &str,
        message_id: &str,
        custom_id: &str,
    ) -> String {
        let mut inner = self.lock();
        let message = inner
            .find(message_id)
            .map(|m| model::message(&inner, m, false, false))
            .unwrap_or_else(|| panic!("no message {message_id}"));
        let data = json!({"custom_id": custom_id, "component_type": 2});
        self.interact(&mut inner, chat, person, 3, data, Some(message))
    }

    /// `person` runs the slash command `/name` with string options; returns the interaction id.
    pub fn slash(
        &self,
        chat: &str,
        person: &str,
        name: &str,
        options: Vec<(&str, &str)>,
    ) -> String {
        let mut inner = self.lock();
        let command = inner
            .commands
            .iter()
            .find(|c| c["name"] == name)
            .and_then(|c| c["id"].as_str().map(str::to_owned));
        let command = command.unwrap_or_else(|| inner.next_id().to_string());
        let options: Vec<Value> = options
            .into_iter()
            .map(|(n, v)| json!({"name": n, "type": 3, "value": v}))
            .collect();
        let data = json!({"id": command, "name": name, "type": 1, "options": options});
        self.interact(&mut inner, chat, person, 2, data, None)
    }

    fn interact(
        &self,
        inner: &mut Inner,
        chat: &str,
        person: &str,
        kind: u8,
        data: Value,
        message: Option<Value>,
    ) -> String {
        let chan = inner
            .chan(chat)
            .unwrap_or_else(|| panic!("no Discord channel {chat}"));
        let id = inner.next_id();
        let token = format!(
            "aW50ZXJhY3Rpb246{id}_{:016x}{:016x}",
            model::hash(&id.to_string()),
            model::hash(chat)
        );
        let pressed = message
            .as_ref()
            .and_then(|m| m["id"].as_str()?.parse().ok());
        let event = model::interaction(model::Interaction {
            id,
            kind,
            token: &token,
            chat,
            chan: &chan,
            person,
            data,
            message,
        });
        inner.interactions.insert(
            id.to_string(),
            Interaction {
                token,
                channel: chat.to_owned(),
                message: pressed,
                created: Instant::now(),
                callbacks: Vec::new(),
                responses: Vec::new(),
                original: None,
            },
        );
        inner.gw.dispatch("INTERACTION_CREATE", event);
        id.to_string()
    }

    /// The next `n` requests whose path contains `path_contains` answer 429.
    pub fn rate_limit_next(&self, path_contains: &str, n: usize, retry_after: f64, global: bool) {
        self.script(
            path_contains,
            n,
            FaultKind::RateLimit {
                retry_after,
                global,
            },
        );
    }

    /// The next request whose path contains `path_contains` answers `status` (500, 502…).
    pub fn fail_next(&self, path_contains: &str, status: u16) {
        self.script(path_contains, 1, FaultKind::Status(status));
    }

    fn script(&self, path: &str, left: usize, kind: FaultKind) {
        let path = path.to_owned();
        self.lock().faults.push(Fault { path, left, kind });
    }

    /// Forget every scripted fault not yet used (slow answers too).
    pub fn clear_faults(&self) {
        let mut inner = self.lock();
        inner.faults.clear();
        inner.slow.clear();
    }

    /// POSTs whose path contains `path_contains` take effect at once and answer after
    /// `delay`: a crash in between leaves the gateway not knowing the message was posted.
    pub fn answer_slowly(&self, path_contains: &str, delay: Duration) {
        self.lock().slow.push((path_contains.to_owned(), delay));
    }

    /// How many posts were answered with the earlier message of the same nonce.
    pub fn nonce_hits(&self) -> usize {
        self.lock().nonce_hits
    }
}

/// The public view of a stored message.
fn sent(m: &Msg) -> SentMessage {
    SentMessage {
        id: m.id.to_string(),
        channel_id: m.channel.clone(),
        content: m.content.clone(),
        components: m.components.clone(),
        reference: m.reference.clone(),
        allowed_mentions: m.allowed_mentions.clone(),
        files: m.files.clone(),
        history: m.history.clone(),
        flags: m.flags,
        interaction: m.interaction.clone(),
        at: m.at,
    }
}

/// The buttons of a message's action rows: (label, custom_id).
fn buttons(components: &Value) -> Vec<(String, String)> {
    let rows = components.as_array().into_iter().flatten();
    rows.flat_map(|row| row["components"].as_array().cloned().unwrap_or_default())
        .filter(|c| c["type"] == 2)
        .map(|b| {
            let text = |k: &str| b[k].as_str().unwrap_or_default().to_owned();
            (text("label"), text("custom_id"))
        })
        .collect()
}

/// A message as Discord's client shows it: Markdown markers and code fences removed,
/// backslash escapes resolved, code left as written.
pub fn visible(markdown: &str) -> String {
    let mut lines = Vec::new();
    let mut fenced = false;
    for line in markdown.split('\n') {
        let trimmed = line.trim_start();
        if trimmed.starts_with("```") && (!fenced || trimmed.trim_end() == "```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            lines.push(line.to_owned());
            continue;
        }
        let mut body = line;
        for prefix in ["### ", "## ", "# ", "-# ", ">>> ", "> "] {
            if let Some(rest) = body.strip_prefix(prefix) {
                body = rest;
                break;
            }
        }
        lines.push(inline(body));
    }
    lines.join("\n")
}

/// One line outside code blocks: (character, literal) tokens, then the markers removed.
fn inline(line: &str) -> String {
    let chars: Vec<char> = line.chars().collect();
    let mut tokens: Vec<(char, bool)> = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '\\' && chars.get(i + 1).is_some_and(char::is_ascii_punctuation) {
            tokens.push((chars[i + 1], true));
            i += 2;
        } else if c == '`' {
            let run = chars[i..].iter().take_while(|&&x| x == '`').count();
            let close = (i + run..chars.len().saturating_sub(run - 1))
                .find(|&j| chars[j..j + run].iter().all(|&x| x == '`'));
            match close {
                Some(end) => {
                    tokens.extend(chars[i + run..end].iter().map(|&x| (x, true)));
                    i = end + run;
                }
                None => {
                    tokens.extend(std::iter::repeat_n(('`', true), run));
                    i += run;
                }
            }
        } else {
            tokens.push((c, false));
            i += 1;
        }
    }
    for marker in ['*', '_', '~', '|'] {
        let at = |t: &[(char, bool)], j: usize| t.get(j) == Some(&(marker, false));
        let doubles: Vec<usize> = {
            let mut found = Vec::new();
            let mut j = 0;
            while j + 1 < tokens.len() {
                if at(&tokens, j) && at(&tokens, j + 1) {
                    found.push(j);
                    j += 2;
                } else {
                    j += 1;
                }
            }
            found
        };
        let paired = doubles.len() / 2 * 2;
        for &j in doubles[..paired].iter().rev() {
            tokens.drain(j..j + 2);
        }
    }
    for marker in ['*', '_'] {
        let space = |t: &[(char, bool)], j: Option<usize>| {
            j.and_then(|j| t.get(j))
                .is_none_or(|(c, _)| c.is_whitespace())
        };
        let word = |t: &[(char, bool)], j: Option<usize>| {
            j.and_then(|j| t.get(j))
                .is_some_and(|(c, _)| c.is_alphanumeric())
        };
        let mut remove = Vec::new();
        let mut open: Option<usize> = None;
        for j in 0..tokens.len() {
            if tokens[j] != (marker, false) {
                continue;
            }
            let (before, after) = (j.checked_sub(1), Some(j + 1));
            // `_` emphasis needs word boundaries (snake_case stays); `*` does not.
            let glued = |side| marker == '_' && word(&tokens, side);
            let closes =
                open.is_some_and(|o| j > o + 1) && !space(&tokens, before) && !glued(after);
            if closes {
                remove.extend([open.take().unwrap_or(j), j]);
            } else if !space(&tokens, after) && !glued(before) {
                open = Some(j);
            }
        }
        remove.sort_unstable();
        for j in remove.into_iter().rev() {
            tokens.remove(j);
        }
    }
    tokens.into_iter().map(|(c, _)| c).collect()
}

impl crate::conformance::PlatformFake for FakeDiscord {
    fn platform_yaml(&self) -> String {
        format!(
            "  discord:\n    enabled: true\n    extra:\n      api_base_url: {}\n",
            self.api_base_url()
        )
    }

    fn env(&self) -> Vec<String> {
        vec![format!("DISCORD_BOT_TOKEN={TOKEN}")]
    }

    fn allowlist_var(&self) -> &'static str {
        "DISCORD_ALLOWED_USERS"
    }

    fn allow_all_var(&self) -> &'static str {
        "DISCORD_ALLOW_ALL_USERS"
    }

    fn max_len(&self) -> usize {
        MAX_LEN
    }

    /// Discord counts characters.
    fn measure(&self, shown: &str) -> usize {
        shown.chars().count()
    }

    fn person(&self, n: u32) -> String {
        (model::PERSON_BASE + u64::from(n)).to_string()
    }

    fn dm_chat(&self, person: &str) -> String {
        let id = person.parse::<u64>().ok();
        let n = id.and_then(|id| id.checked_sub(model::PERSON_BASE));
        let n = n.unwrap_or_else(|| panic!("{person:?} is not one of the fake's people"));
        (model::DM_BASE + n).to_string()
    }

    fn group_chat(&self) -> String {
        GROUP_CHANNEL.into()
    }

    fn write(&self, chat: &str, person: &str, text: &str, addressed: bool) {
        self.message(chat, person, text, addressed);
    }

    fn shown(&self, chat: &str) -> Vec<String> {
        let inner = self.lock();
        inner.shown_in(chat).map(|m| visible(&m.content)).collect()
    }

    fn sent_at(&self, chat: &str) -> Vec<Instant> {
        self.lock().shown_in(chat).map(|m| m.at).collect()
    }

    fn prompts(&self, chat: &str) -> Vec<ShownPrompt> {
        let inner = self.lock();
        let prompts = inner.shown_in(chat).filter_map(|m| {
            let choices = buttons(&m.components);
            (!choices.is_empty()).then(|| ShownPrompt {
                message_id: m.id.to_string(),
                text: visible(&m.content),
                choices,
            })
        });
        prompts.collect()
    }

    fn press(&self, chat: &str, person: &str, prompt: &ShownPrompt, label: &str) -> String {
        let (_, custom_id) = prompt
            .choices
            .iter()
            .find(|(l, _)| l == label)
            .unwrap_or_else(|| panic!("no choice {label:?} in {prompt:?}"));
        self.press_button(chat, person, &prompt.message_id, custom_id)
    }

    fn acknowledged(&self, press_id: &str) -> Option<Instant> {
        let inner = self.lock();
        let interaction = inner.interactions.get(press_id)?;
        interaction.callbacks.first().map(|(_, _, at)| *at)
    }

    /// Discord's typing indicator fades by itself: only `Shown` events.
    /// Posts, edits and typing in the channel (refused ones too: Discord counts them).
    fn chat_calls(&self, chat: &str) -> Vec<Instant> {
        let prefix = format!("/channels/{chat}/");
        let inner = self.lock();
        // Reactions are limited by a route of their own (a quarter second each), not by
        // the channel's five messages in five seconds.
        let about = |c: &&Call| {
            c.path.starts_with(&prefix) && c.method != "GET" && !c.path.contains("/reactions/")
        };
        inner.calls.iter().filter(about).map(|c| c.at).collect()
    }

    /// Five requests per five seconds per channel.
    fn chat_budget(&self) -> (f64, u32) {
        (1.0, 5)
    }

    fn fail_next_send(&self, status: u16) {
        self.fail_next("/messages", status);
    }

    fn rate_limit_next_send(&self, seconds: u64) {
        self.rate_limit_next("/messages", 1, seconds as f64, false);
    }

    fn resets(&self) -> &crate::reset::Resets {
        &self.resets
    }

    fn reset_next_send(&self, when: crate::reset::When) {
        self.resets.arm(1, when, |method, path, _| {
            method == axum::http::Method::POST && path.ends_with("/messages")
        });
    }

    fn working(&self, chat: &str) -> Vec<(Instant, WorkingEvent)> {
        let inner = self.lock();
        let typing = inner.typing.iter().filter(|(c, _)| c == chat);
        typing.map(|(_, at)| (*at, WorkingEvent::Shown)).collect()
    }
}
