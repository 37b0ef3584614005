//! A fake WhatsApp Business Cloud API (Meta's Graph API) and Meta's webhook deliveries.
//!
//! The Graph API side (`graph.rs`): `POST /{version}/{phone_number_id}/messages` (text,
//! interactive buttons and lists, templates, media by id or link, read receipts with the
//! typing indicator), `POST /{version}/{phone_number_id}/media` (multipart uploads), `GET
//! /{version}/{media_id}` and the download URL it hands out, every one behind `Authorization:
//! Bearer`, with Meta's error bodies, limits and the 24-hour customer service window.
//!
//! The webhook side (`webhook.rs`): what people do (`people.rs`) and the statuses of the
//! bot's messages (`sent`, `delivered`, `failed`) are POSTed to the daemon's
//! [`Options::webhook_path`], serialised as Meta does (`\uXXXX` for every non-ASCII character,
//! `\/`) and signed with `X-Hub-Signature-256`, one at a time in order, each retried like
//! Meta retries a delivery that was not answered 200.
//!
//! The world: the business number ([`Options::phone_number_id`],
//! [`Options::display_phone_number`]) and people ([`person`]): `15550000001` is "Person 1".
//! WhatsApp (Cloud API) has no group chats and no edits; a chat is the person's `wa_id`.
//! Everything the bot sent, every read receipt, upload, download and Graph call is kept for
//! tests; failures can be scripted ([`FakeWhatsApp::fail_next`]).

mod format;
mod graph;
#[cfg(test)]
mod graph_tests;
mod people;
#[cfg(test)]
mod tests;
mod webhook;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::Value;
use tokio::sync::mpsc::UnboundedSender;

use crate::conformance::{ShownPrompt, WorkingEvent};

pub use format::visible;
pub use people::person;
pub use webhook::{Delivery, Signing, meta_json, signature};

/// The WhatsApp Business Account id that `entry[].id` carries.
pub const WABA_ID: &str = "2000000001";
/// Meta refuses a longer `text.body` (in characters).
pub const TEXT_LIMIT: usize = 4096;
/// The customer service window: free-form messages only this long after the person wrote.
pub const WINDOW: Duration = Duration::from_secs(24 * 60 * 60);
/// Meta's code for a free-form message outside the window.
pub const RE_ENGAGEMENT: u32 = 131_047;

/// How a free-form message outside the 24-hour window fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WindowError {
    /// Accepted (200 with a wamid), then a `failed` status webhook with code 131047, as Meta
    /// usually does.
    #[default]
    Async,
    /// Refused at once: HTTP 400 with Graph error code 131047.
    Sync,
}

/// How the fake behaves; [`Options::default`] suits most tests.
#[derive(Debug, Clone)]
pub struct Options {
    pub api_version: String,
    pub phone_number_id: String,
    pub display_phone_number: String,
    pub access_token: String,
    /// Signs the webhook deliveries (`X-Hub-Signature-256`).
    pub app_secret: String,
    /// The verify token the daemon is given (`WHATSAPP_CLOUD_VERIFY_TOKEN`), for
    /// [`FakeWhatsApp::handshake`].
    pub verify_token: String,
    /// Refuse free-form messages to people who did not write within 24 hours.
    pub enforce_window: bool,
    pub window_error: WindowError,
    /// Post `sent` then `delivered` for every message accepted.
    pub auto_statuses: bool,
    /// Where deliveries go on the daemon's HTTP server.
    pub webhook_path: String,
    /// Attempts per delivery (Meta retries one not answered 200), and the pause between.
    pub delivery_attempts: u32,
    pub retry_delay: Duration,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            api_version: "v26.0".into(),
            phone_number_id: "1000000001".into(),
            display_phone_number: "15550000000".into(),
            access_token: "EAAtest-token".into(),
            app_secret: "test-app-secret".into(),
            verify_token: "test-verify-token".into(),
            enforce_window: true,
            window_error: WindowError::Async,
            auto_statuses: true,
            webhook_path: "/whatsapp/webhook".into(),
            delivery_attempts: 5,
            retry_delay: Duration::from_millis(300),
        }
    }
}

/// One recorded HTTP call to the fake's server.
#[derive(Debug, Clone)]
pub struct Call {
    pub method: String,
    /// The path, query excluded (`/v26.0/1000000001/messages`).
    pub path: String,
    /// It carried `Authorization: Bearer <access_token>`.
    pub auth_ok: bool,
    /// The JSON body; for an upload, its form fields with the file's name and size;
    /// `Null` when there was none.
    pub body: Value,
    pub status: u16,
    /// The Graph error code of a refusal.
    pub error_code: Option<u32>,
    pub at: Instant,
}

/// Where a media message's file comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MediaSource {
    /// A media id from `/media`.
    Id(String),
    Link(String),
}

/// What kind of message the bot sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SentKind {
    Text,
    /// Reply buttons, or a list (`list` true) whose rows are the message's `buttons`.
    Interactive {
        list: bool,
    },
    Template,
    Media {
        media_type: String,
        source: MediaSource,
        caption: Option<String>,
        filename: Option<String>,
        /// Audio sent as a voice note (`"voice": true`).
        voice: bool,
    },
}

/// One message the bot sent (accepted, or refused by the window).
#[derive(Debug, Clone)]
pub struct SentMessage {
    /// The person's `wa_id`.
    pub chat: String,
    /// Empty when refused at once ([`WindowError::Sync`]).
    pub wamid: String,
    pub kind: SentKind,
    /// The text body, the interactive body text or the caption, as sent.
    pub text: String,
    /// (id, title) of each reply button (or list row).
    pub buttons: Vec<(String, String)>,
    /// (name, language code) of a template.
    pub template: Option<(String, String)>,
    /// The `context.message_id` it replies to.
    pub context: Option<String>,
    /// The request body.
    pub request: Value,
    pub at: Instant,
    /// The error code when the window refused it ([`RE_ENGAGEMENT`]).
    pub failed: Option<u32>,
}

/// A read receipt (with the typing indicator when `typing`).
#[derive(Debug, Clone)]
pub struct Read {
    pub message_id: String,
    pub typing: bool,
    pub at: Instant,
}

/// A file the bot uploaded to `/media`.
#[derive(Debug, Clone)]
pub struct Upload {
    pub media_id: String,
    pub filename: Option<String>,
    /// The form's `type`.
    pub mime: String,
    pub bytes: Vec<u8>,
    pub at: Instant,
}

/// A file the fake serves by media id (uploaded by the bot, or sent by a person).
#[derive(Debug, Clone)]
struct Media {
    mime: String,
    bytes: Vec<u8>,
}

/// A scripted refusal of `/messages` calls.
#[derive(Debug, Clone)]
struct Fault {
    left: usize,
    /// Also read receipts.
    reads_too: bool,
    status: u16,
    code: u32,
    message: String,
}

/// A POST waiting for the sender: the raw body and the inbound wamids it carries.
#[derive(Debug, Clone)]
struct Outgoing {
    body: Vec<u8>,
    wamids: Vec<String>,
}

struct Inner {
    options: Options,
    base_url: String,
    daemon: Option<String>,
    last_n: u64,
    calls: Vec<Call>,
    faults: Vec<Fault>,
    sent: Vec<SentMessage>,
    reads: Vec<(String, Read)>,
    uploads: Vec<Upload>,
    media: HashMap<String, Media>,
    downloads: HashMap<String, usize>,
    /// Inbound wamid → (sender, index of the payload that carried it).
    inbound: HashMap<String, (String, usize)>,
    /// The raw bodies of people's payloads, in order.
    payloads: Vec<Outgoing>,
    /// Per person, the Unix timestamp of their latest message.
    last_inbound: HashMap<String, u64>,
    deliveries: Vec<Delivery>,
    /// Inbound wamid → when a delivery carrying it was first answered 200.
    acks: HashMap<String, Instant>,
    /// The sender task's queue: each POST, and when it may go out at the earliest.
    tx: Option<UnboundedSender<(Outgoing, Option<Instant>)>>,
}

impl Inner {
    fn next_n(&mut self) -> u64 {
        self.last_n += 1;
        self.last_n
    }

    /// A new message id, unique and shaped like Meta's (`wamid.HBgL…`, base64).
    fn next_wamid(&mut self, wa_id: &str) -> String {
        use base64::Engine;
        let n = self.next_n();
        let mut raw = format!("{wa_id}\u{15}\u{2}\0\u{12}\u{18}\u{14}").into_bytes();
        raw.extend_from_slice(format!("3EB0{n:016X}").as_bytes());
        raw.extend_from_slice(&n.to_be_bytes());
        let encoded = base64::engine::general_purpose::STANDARD.encode(raw);
        format!("wamid.HBgL{encoded}")
    }

    /// A new media id, numeric like Meta's.
    fn next_media_id(&mut self) -> String {
        (1_000_000_000_000_000 + self.next_n()).to_string()
    }

    fn add_media(&mut self, bytes: Vec<u8>, mime: &str) -> String {
        let id = self.next_media_id();
        let mime = mime.to_owned();
        self.media.insert(id.clone(), Media { mime, bytes });
        id
    }

    /// Hand a POST to the sender task (in order after everything queued before).
    fn enqueue(&mut self, body: Vec<u8>, wamids: Vec<String>) {
        self.enqueue_after(body, wamids, None);
    }

    /// Hand a POST to the sender task, to go out no earlier than `not_before` (what is
    /// queued after it waits behind it).
    fn enqueue_after(&mut self, body: Vec<u8>, wamids: Vec<String>, not_before: Option<Instant>) {
        if let Some(tx) = &self.tx {
            let _ = tx.send((Outgoing { body, wamids }, not_before));
        }
    }

    /// The bot's messages a person sees in `chat`: texts and interactive messages that were
    /// not refused.
    fn shown_in<'a>(&'a self, chat: &'a str) -> impl Iterator<Item = &'a SentMessage> + 'a {
        self.sent.iter().filter(move |m| {
            let shows = matches!(m.kind, SentKind::Text | SentKind::Interactive { .. });
            m.chat == chat && m.failed.is_none() && shows
        })
    }
}

/// Unix seconds now.
fn unix_now() -> u64 {
    let since = SystemTime::now().duration_since(UNIX_EPOCH);
    since.map_or(0, |d| d.as_secs())
}

/// The fake; clones share one world.
#[derive(Clone)]
pub struct FakeWhatsApp {
    inner: Arc<Mutex<Inner>>,
    /// The Graph API and media download server.
    pub addr: SocketAddr,
    /// Posts the webhook deliveries.
    client: reqwest::Client,
    /// Connection resets armed on its HTTP server.
    resets: crate::reset::Resets,
}

impl FakeWhatsApp {
    /// A fake with [`Options::default`].
    pub async fn start() -> FakeWhatsApp {
        FakeWhatsApp::start_with(Options::default()).await
    }

    /// A fake behaving as `options` say, listening on a port of 127.0.0.1.
    pub async fn start_with(options: Options) -> FakeWhatsApp {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let client = reqwest::Client::builder()
            .no_proxy()
            .user_agent("facebookexternalua")
            .build()
            .expect("an HTTP client");
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let fake = FakeWhatsApp {
            inner: Arc::new(Mutex::new(Inner {
                options,
                base_url: format!("http://{addr}"),
                daemon: None,
                last_n: 0,
                calls: Vec::new(),
                faults: Vec::new(),
                sent: Vec::new(),
                reads: Vec::new(),
                uploads: Vec::new(),
                media: HashMap::new(),
                downloads: HashMap::new(),
                inbound: HashMap::new(),
                payloads: Vec::new(),
                last_inbound: HashMap::new(),
                deliveries: Vec::new(),
                acks: HashMap::new(),
                tx: Some(tx),
            })),
            addr,
            client,
            resets: Default::default(),
        };
        let app = graph::router(fake.clone());
        tokio::spawn(crate::reset::serve(listener, app, fake.resets.clone()));
        tokio::spawn(webhook::sender(fake.clone(), rx));
        fake
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// `http://127.0.0.1:PORT`: the Graph root, without a version.
    pub fn base_url(&self) -> String {
        self.lock().base_url.clone()
    }

    pub fn options(&self) -> Options {
        self.lock().options.clone()
    }

    /// Where deliveries go from now on: the daemon's HTTP server (`127.0.0.1:PORT`).
    pub fn attach_daemon(&self, http_addr: &str) {
        self.lock().daemon = Some(http_addr.to_owned());
    }

    /// A file people send, served by the returned media id (to the bearer token).
    pub fn add_media(&self, bytes: Vec<u8>, mime: &str) -> String {
        self.lock().add_media(bytes, mime)
    }

    /// The mime type and bytes of media `id` (uploaded or added).
    pub fn media(&self, id: &str) -> Option<(String, Vec<u8>)> {
        let inner = self.lock();
        let media = inner.media.get(id)?;
        Some((media.mime.clone(), media.bytes.clone()))
    }

    // ---- What happened ----

    /// Every call to the fake's server, in order.
    pub fn calls(&self) -> Vec<Call> {
        self.lock().calls.clone()
    }

    /// The bot's messages to `chat` (a `wa_id`), refused ones included, in order.
    pub fn sent(&self, chat: &str) -> Vec<SentMessage> {
        let inner = self.lock();
        let found = inner.sent.iter().filter(|m| m.chat == chat);
        found.cloned().collect()
    }

    /// The bot's message `wamid`.
    pub fn sent_message(&self, wamid: &str) -> Option<SentMessage> {
        let inner = self.lock();
        inner.sent.iter().find(|m| m.wamid == wamid).cloned()
    }

    /// The read receipts for people's messages in `chat`, in order.
    pub fn reads(&self, chat: &str) -> Vec<Read> {
        let inner = self.lock();
        let found = inner.reads.iter().filter(|(c, _)| c == chat);
        found.map(|(_, r)| r.clone()).collect()
    }

    /// Every file uploaded to `/media`, in order.
    pub fn uploads(&self) -> Vec<Upload> {
        self.lock().uploads.clone()
    }

    /// How many times media `id` was downloaded (with the token).
    pub fn downloads(&self, id: &str) -> usize {
        self.lock().downloads.get(id).copied().unwrap_or(0)
    }

    /// When a delivery carrying people's message `wamid` was first answered 200.
    pub fn acked(&self, wamid: &str) -> Option<Instant> {
        self.lock().acks.get(wamid).copied()
    }

    // ---- Faults ----

    /// The next `n` calls of `/messages` (read receipts included) answer HTTP `status` with
    /// Graph error `code` and `message` (also its `error_data.details`). Typical: (400,
    /// 131056, "(#131056) (Business Account, Consumer Account) pair rate limit hit"), (429,
    /// 130429, "(#130429) Rate limit hit"), (500, 131000, "Something went wrong"), (401, 190,
    /// "Error validating access token: Session has expired").
    pub fn fail_next(&self, n: usize, status: u16, code: u32, message: &str) {
        self.script(n, true, status, code, message);
    }

    /// Like [`FakeWhatsApp::fail_next`], for messages only: read receipts pass.
    pub fn fail_next_sends(&self, n: usize, status: u16, code: u32, message: &str) {
        self.script(n, false, status, code, message);
    }

    fn script(&self, left: usize, reads_too: bool, status: u16, code: u32, message: &str) {
        let message = message.to_owned();
        let fault = Fault {
            left,
            reads_too,
            status,
            code,
            message,
        };
        self.lock().faults.push(fault);
    }

    /// Forget every scripted fault not yet used.
    pub fn clear_faults(&self) {
        self.lock().faults.clear();
    }
}

impl crate::conformance::PlatformFake for FakeWhatsApp {
    fn platform_yaml(&self) -> String {
        let base_url = self.base_url();
        format!(
            "  whatsapp_cloud:\n    enabled: true\n    extra:\n      graph_base_url: {base_url}\n"
        )
    }

    fn env(&self) -> Vec<String> {
        let o = self.options();
        vec![
            format!("WHATSAPP_CLOUD_ACCESS_TOKEN={}", o.access_token),
            format!("WHATSAPP_CLOUD_PHONE_NUMBER_ID={}", o.phone_number_id),
            format!("WHATSAPP_CLOUD_APP_SECRET={}", o.app_secret),
            format!("WHATSAPP_CLOUD_VERIFY_TOKEN={}", o.verify_token),
            format!("WHATSAPP_CLOUD_API_VERSION={}", o.api_version),
        ]
    }

    fn allowlist_var(&self) -> &'static str {
        "WHATSAPP_CLOUD_ALLOWED_USERS"
    }

    fn allow_all_var(&self) -> &'static str {
        "WHATSAPP_CLOUD_ALLOW_ALL_USERS"
    }

    fn max_len(&self) -> usize {
        TEXT_LIMIT
    }

    /// Characters as shown.
    fn measure(&self, shown: &str) -> usize {
        shown.chars().count()
    }

    fn person(&self, n: u32) -> String {
        person(n)
    }

    /// On WhatsApp the chat with a person is named by their `wa_id`.
    fn dm_chat(&self, person: &str) -> String {
        person.to_owned()
    }

    fn group_chat(&self) -> String {
        panic!("the WhatsApp Cloud API has no group chats (has_groups() is false)")
    }

    fn has_groups(&self) -> bool {
        false
    }

    fn edits(&self) -> bool {
        false
    }

    fn write(&self, chat: &str, person: &str, text: &str, _addressed: bool) {
        assert_eq!(
            chat, person,
            "on WhatsApp a person writes in their own chat"
        );
        self.text(person, text);
    }

    fn shown(&self, chat: &str) -> Vec<String> {
        let inner = self.lock();
        inner.shown_in(chat).map(|m| visible(&m.text)).collect()
    }

    fn sent_at(&self, chat: &str) -> Vec<Instant> {
        self.lock().shown_in(chat).map(|m| m.at).collect()
    }

    /// Interactive messages: `message_id` is the wamid, the choices are (title, id).
    fn prompts(&self, chat: &str) -> Vec<ShownPrompt> {
        let inner = self.lock();
        let shown = inner.shown_in(chat);
        let prompts = shown.filter(|m| matches!(m.kind, SentKind::Interactive { .. }));
        prompts
            .map(|m| ShownPrompt {
                message_id: m.wamid.clone(),
                text: visible(&m.text),
                choices: m
                    .buttons
                    .iter()
                    .map(|(id, title)| (title.clone(), id.clone()))
                    .collect(),
            })
            .collect()
    }

    /// A reply to the prompt's message from `person` (in their own chat): a pressed button
    /// (or a chosen row of a list).
    fn press(&self, chat: &str, person: &str, prompt: &ShownPrompt, label: &str) -> String {
        assert_eq!(
            chat, person,
            "on WhatsApp a person presses in their own chat"
        );
        let (title, id) = prompt
            .choices
            .iter()
            .find(|(l, _)| l == label)
            .unwrap_or_else(|| panic!("no choice {label:?} in {prompt:?}"));
        let list = self
            .sent_message(&prompt.message_id)
            .is_some_and(|m| m.kind == SentKind::Interactive { list: true });
        if list {
            self.list_reply(person, &prompt.message_id, id, title)
        } else {
            self.button_reply(person, &prompt.message_id, id, title)
        }
    }

    /// When the daemon answered 200 to the delivery carrying the press.
    fn acknowledged(&self, press_id: &str) -> Option<Instant> {
        self.acked(press_id)
    }

    /// Each read receipt with the typing indicator; it fades by itself (never ended).
    /// Messages to the person and read receipts (with typing) of their messages.
    fn chat_calls(&self, chat: &str) -> Vec<Instant> {
        let mut at: Vec<Instant> = {
            let inner = self.lock();
            let about = |c: &&Call| c.path.ends_with("/messages") && c.body["to"] == chat;
            inner.calls.iter().filter(about).map(|c| c.at).collect()
        };
        at.extend(self.reads(chat).iter().map(|r| r.at));
        at.sort();
        at
    }

    /// The pair rate limit: a message every six seconds to one person, bursts of twenty.
    fn chat_budget(&self) -> (f64, u32) {
        (1.0 / 6.0, 20)
    }

    fn fail_next_send(&self, status: u16) {
        self.fail_next_sends(1, status, 131000, "Something went wrong");
    }

    fn resets(&self) -> &crate::reset::Resets {
        &self.resets
    }

    fn reset_next_send(&self, when: crate::reset::When) {
        // Read receipts go to the same endpoint, with a `status`.
        self.resets.arm(1, when, |method, path, body| {
            let receipt = serde_json::from_slice::<serde_json::Value>(body)
                .is_ok_and(|request| request.get("status").is_some());
            method == axum::http::Method::POST && path.ends_with("/messages") && !receipt
        });
    }

    fn rate_limit_next_send(&self, _seconds: u64) {
        // The Cloud API gives no wait; the pair rate limit asks for about six seconds.
        self.fail_next_sends(
            1,
            400,
            131056,
            "(#131056) (Business Account, Consumer Account) pair rate limit hit",
        );
    }

    fn working(&self, chat: &str) -> Vec<(Instant, WorkingEvent)> {
        let reads = self.reads(chat).into_iter().filter(|r| r.typing);
        reads.map(|r| (r.at, WorkingEvent::Shown)).collect()
    }

    fn needs_daemon_http(&self) -> bool {
        true
    }

    fn attach_daemon(&self, http_addr: &str) {
        FakeWhatsApp::attach_daemon(self, http_addr);
    }
}
