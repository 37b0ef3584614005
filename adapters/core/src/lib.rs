//! `hermes-adapter`: the narrow contract between a chat platform and the gateway daemon.
//!
//! An adapter does two things and nothing else:
//!
//! * **Receive.** It listens to its platform and hands every event, normalised into an
//!   [`Inbound`], to an [`InboundSink`]. It acknowledges the platform (advances a polling
//!   offset, answers a webhook 200) only after the sink returned, which is when the event is
//!   durably recorded (invariant 1: nothing inbound is lost).
//! * **Send.** Through [`PlatformSender`] it performs [`Outbound`] actions (text, edit, typing,
//!   button acknowledgement) and reports failures as a [`SendError`] the daemon can act on
//!   (retry after, fall back to plain text, give up with a reason).
//!
//! It declares what its platform can do in [`Capabilities`], so the daemon can chunk,
//! format and rate-limit without knowing which platform it talks to. Adapters depend on this
//! crate only, never on each other or on the daemon.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

pub use async_trait::async_trait;
pub use tokio_util::sync::CancellationToken;

/// The chat platforms the gateway speaks to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Platform {
    Telegram,
    Discord,
    Slack,
    WhatsApp,
}

impl Platform {
    /// Every platform, in a stable order (used by config and status output).
    pub const ALL: [Platform; 4] = [
        Platform::Telegram,
        Platform::Discord,
        Platform::Slack,
        Platform::WhatsApp,
    ];

    /// The lower-case name used in config keys, session keys and the store.
    pub fn as_str(self) -> &'static str {
        match self {
            Platform::Telegram => "telegram",
            Platform::Discord => "discord",
            Platform::Slack => "slack",
            Platform::WhatsApp => "whatsapp",
        }
    }

    /// The inverse of [`Platform::as_str`].
    pub fn parse(name: &str) -> Option<Platform> {
        Platform::ALL
            .into_iter()
            .find(|p| p.as_str().eq_ignore_ascii_case(name))
    }
}

impl fmt::Display for Platform {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What kind of conversation a chat is; decides session keys and mention rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ChatKind {
    /// A one-to-one conversation with the bot.
    Direct,
    /// A group, supergroup, guild channel or shared Slack channel.
    Group,
    /// A broadcast channel (the bot may read but usually does not answer).
    Channel,
}

impl ChatKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ChatKind::Direct => "dm",
            ChatKind::Group => "group",
            ChatKind::Channel => "channel",
        }
    }

    pub fn parse(s: &str) -> Option<ChatKind> {
        match s {
            "dm" => Some(ChatKind::Direct),
            "group" => Some(ChatKind::Group),
            "channel" => Some(ChatKind::Channel),
            _ => None,
        }
    }
}

/// Where a message came from and where its answer goes.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ChatRef {
    pub platform: Platform,
    /// The platform's chat/channel id, as text (Telegram ids are signed integers, Slack's are
    /// strings; text fits both).
    pub chat_id: String,
    /// A thread/topic inside the chat (Telegram forum topic, Slack `thread_ts`, Discord thread).
    pub thread_id: Option<String>,
    pub kind: ChatKind,
}

/// The person (or bot) who sent an event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sender {
    /// Stable platform user id; what allowlists and pairing refer to.
    pub user_id: String,
    /// A human name for logs, prompts and `/status`.
    pub display_name: String,
    /// The handle (`@name`), where the platform has one.
    pub username: Option<String>,
    pub is_bot: bool,
}

/// One normalised event from a platform.
#[derive(Debug, Clone)]
pub struct Inbound {
    /// Unique per platform event; the de-duplication key of the inbox
    /// (e.g. `telegram:update:123`, a Slack `event_id`, a WhatsApp `wamid`).
    pub event_id: String,
    pub chat: ChatRef,
    pub sender: Sender,
    pub kind: InboundKind,
}

/// What happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InboundKind {
    /// A message written by a person.
    Message(InboundMessage),
    /// A press on a button the gateway sent (approval prompts).
    ButtonPress(ButtonPress),
}

/// A person's message, already stripped of the bot's own @mention.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InboundMessage {
    /// The platform's id of this message (replies thread to it).
    pub message_id: String,
    /// Text or caption. Empty when the message carried nothing the gateway can read.
    pub text: String,
    /// Whether the message is addressed to the bot: a DM, an @mention, a reply to one of the
    /// bot's messages, or a command. Groups with `require_mention` only answer these.
    pub addressed: bool,
    /// Set when the message had content the gateway cannot read (a sticker, a photo without
    /// caption, …): names what it was so the person can be told.
    pub unsupported: Option<String>,
}

/// A press on an inline/interactive button.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ButtonPress {
    /// The id the platform needs to acknowledge the press (Telegram callback query id,
    /// Discord interaction token, Slack `trigger_id`/`response_url`).
    pub press_id: String,
    /// The message that carries the button, if the platform says.
    pub message_id: Option<String>,
    /// The button's payload, as sent in [`Button::data`].
    pub data: String,
}

/// How the platform measures its message length limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LengthUnit {
    /// Unicode scalar values (Rust `char`s).
    Chars,
    /// UTF-16 code units (Telegram counts these).
    Utf16,
    /// UTF-8 bytes.
    Bytes,
}

impl LengthUnit {
    /// The length of `text` in this unit.
    pub fn measure(self, text: &str) -> usize {
        match self {
            LengthUnit::Chars => text.chars().count(),
            LengthUnit::Utf16 => text.encode_utf16().count(),
            LengthUnit::Bytes => text.len(),
        }
    }

    /// The length of one character in this unit.
    pub fn of_char(self, c: char) -> usize {
        match self {
            LengthUnit::Chars => 1,
            LengthUnit::Utf16 => c.len_utf16(),
            LengthUnit::Bytes => c.len_utf8(),
        }
    }
}

/// The markup language a platform renders.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MarkupDialect {
    /// Telegram `parse_mode=HTML` (b, i, s, u, code, pre, a, blockquote).
    TelegramHtml,
    /// Discord's Markdown subset (passes most CommonMark through).
    DiscordMarkdown,
    /// Slack `mrkdwn`.
    SlackMrkdwn,
    /// WhatsApp `*bold*` `_italic_` `~strike~` and monospace.
    WhatsApp,
    /// No markup at all.
    Plain,
}

/// What a platform can do; the daemon adapts chunking, formatting and prompts to it.
#[derive(Debug, Clone)]
pub struct Capabilities {
    /// The longest message the platform accepts, in `length_unit`.
    pub max_message_len: usize,
    pub length_unit: LengthUnit,
    pub markup: MarkupDialect,
    /// Inline buttons on messages (approval prompts render as buttons).
    pub buttons: bool,
    /// Messages can be edited after sending.
    pub edits: bool,
    /// How often a typing indicator must be re-sent to stay visible; `None` = no typing.
    pub typing_refresh: Option<Duration>,
    /// Threads/topics inside a chat are addressable.
    pub threads: bool,
    /// Default send budget of a direct chat: sustained messages per second and burst size
    /// (the platform's published limits; config may override).
    pub per_chat_rate: RateLimit,
    /// The same for group chats (Telegram allows fewer messages per minute in groups).
    pub group_chat_rate: RateLimit,
}

/// A sustained rate with a small burst, for a token bucket.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RateLimit {
    pub per_second: f64,
    pub burst: u32,
}

/// A button under a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Button {
    pub label: String,
    /// Opaque payload that comes back in [`ButtonPress::data`]; keep it short (Telegram allows
    /// 64 bytes).
    pub data: String,
}

/// A message body in the platform's markup, with the plain text to fall back to when the
/// platform rejects the markup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MessageBody {
    /// Text in the platform's [`MarkupDialect`]; `None` means send `plain` only.
    pub markup: Option<String>,
    /// The same content without markup.
    pub plain: String,
}

impl MessageBody {
    /// A body with no markup.
    pub fn plain(text: impl Into<String>) -> Self {
        MessageBody {
            markup: None,
            plain: text.into(),
        }
    }
}

/// One action toward a platform.
#[derive(Debug, Clone)]
pub enum Outbound {
    /// Send a new message.
    Text {
        chat: ChatRef,
        body: MessageBody,
        /// Platform message id to reply to (first chunk of an answer).
        reply_to: Option<String>,
        buttons: Vec<Button>,
    },
    /// Replace the text (and drop the buttons) of a message the gateway sent.
    Edit {
        chat: ChatRef,
        message_id: String,
        body: MessageBody,
    },
    /// Show "typing…" in the chat.
    Typing { chat: ChatRef },
    /// Acknowledge a button press (stops the client's spinner), optionally with a short notice
    /// shown to the presser only.
    AnswerButton {
        /// The chat the button is in (the press is answered on that chat's platform and budget).
        chat: ChatRef,
        press_id: String,
        notice: Option<String>,
    },
}

impl Outbound {
    /// The chat this action touches.
    pub fn chat(&self) -> &ChatRef {
        match self {
            Outbound::Text { chat, .. }
            | Outbound::Edit { chat, .. }
            | Outbound::Typing { chat }
            | Outbound::AnswerButton { chat, .. } => chat,
        }
    }
}

/// What a successful send produced.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Delivered {
    /// The platform's id of the message created or edited, if any.
    pub message_id: Option<String>,
}

/// Why a send failed, in terms the daemon can act on.
#[derive(Debug, Clone, thiserror::Error, PartialEq)]
pub enum SendError {
    /// The platform asked us to wait (HTTP 429 / flood control).
    #[error("rate limited by the platform; retry after {retry_after:?}")]
    RateLimited { retry_after: Duration },
    /// The platform could not parse our markup; the plain fallback should be sent instead.
    #[error("the platform rejected the message markup: {0}")]
    MarkupRejected(String),
    /// A passing failure (network, 5xx); retry with backoff.
    #[error("transient failure: {0}")]
    Transient(String),
    /// The platform refused for good (chat not found, bot blocked, message too old to edit…).
    #[error("rejected by the platform: {0}")]
    Rejected(String),
}

/// Sends [`Outbound`] actions to one platform. Cheap to share (`Arc`).
#[async_trait]
pub trait PlatformSender: Send + Sync {
    fn platform(&self) -> Platform;
    fn capabilities(&self) -> &Capabilities;
    async fn send(&self, action: Outbound) -> Result<Delivered, SendError>;
}

/// How the sink took an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Accepted {
    /// Recorded for the first time; it will be processed.
    New,
    /// Seen before (a platform redelivery); nothing more will happen.
    Duplicate,
}

/// The sink could not record an event; the adapter must not acknowledge it to the platform.
#[derive(Debug, Clone, thiserror::Error)]
#[error("could not record inbound event: {0}")]
pub struct SinkError(pub String);

/// Where adapters hand their events. Returns once the event is durably recorded.
#[async_trait]
pub trait InboundSink: Send + Sync {
    async fn accept(&self, event: Inbound) -> Result<Accepted, SinkError>;

    /// Durable per-adapter state (e.g. the Telegram polling offset), so a restart resumes
    /// where the last run stopped.
    async fn load_cursor(&self, platform: Platform) -> Result<Option<String>, SinkError>;
    async fn save_cursor(&self, platform: Platform, cursor: String) -> Result<(), SinkError>;
}

/// The last moment an adapter talked to its platform successfully; read by health checks and
/// the systemd watchdog. Cheap to clone (shared).
#[derive(Debug, Clone, Default)]
pub struct Liveness(Arc<AtomicU64>);

impl Liveness {
    /// Record a successful round trip now.
    pub fn beat(&self) {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0);
        self.0.store(now, Ordering::Relaxed);
    }

    /// Time since the last successful round trip; `None` if there was none yet.
    pub fn since_last_beat(&self) -> Option<Duration> {
        let last = self.0.load(Ordering::Relaxed);
        if last == 0 {
            return None;
        }
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0);
        Some(Duration::from_millis(now.saturating_sub(last)))
    }
}

/// Why an adapter stopped.
#[derive(Debug, thiserror::Error)]
pub enum AdapterError {
    /// Credentials or configuration the platform refuses; restarting will not help.
    #[error("configuration rejected by the platform: {0}")]
    Config(String),
    #[error("{0}")]
    Other(String),
}

/// A running platform connection: receives until `shutdown` fires.
#[async_trait]
pub trait Adapter: Send {
    fn platform(&self) -> Platform;
    /// The sending half, shared with the daemon's delivery.
    fn sender(&self) -> Arc<dyn PlatformSender>;
    fn liveness(&self) -> Liveness;
    /// Receive events and feed them to `sink` until `shutdown` is cancelled. Reconnects with
    /// backoff on its own; returns `Err` only for failures a restart cannot fix.
    async fn run(
        self: Box<Self>,
        sink: Arc<dyn InboundSink>,
        shutdown: CancellationToken,
    ) -> Result<(), AdapterError>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utf16_counts_astral_characters_twice() {
        assert_eq!(LengthUnit::Utf16.measure("a😀"), 3);
        assert_eq!(LengthUnit::Chars.measure("a😀"), 2);
        assert_eq!(LengthUnit::Bytes.measure("a😀"), 5);
    }

    #[test]
    fn platform_names_round_trip() {
        for p in Platform::ALL {
            assert_eq!(Platform::parse(p.as_str()), Some(p));
        }
        assert_eq!(Platform::parse("TELEGRAM"), Some(Platform::Telegram));
        assert_eq!(Platform::parse("irc"), None);
    }
}
