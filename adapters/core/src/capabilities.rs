//! What a platform can do, declared by its adapter: length limits and how they are counted,
//! how many choices fit and how long their labels may be, edits, the working indicator, and
//! the rate limits with their scope. The daemon adapts prompts, budgets and indicators to
//! these without knowing which platform it talks to.

use std::time::Duration;

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

/// How many choices a message can carry and how long a label may be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChoiceLimits {
    /// Choices per message; 0 = the platform has no buttons (text commands only).
    pub max: usize,
    /// The longest label, in characters.
    pub label_len: usize,
}

impl ChoiceLimits {
    pub const NONE: ChoiceLimits = ChoiceLimits {
        max: 0,
        label_len: 0,
    };
}

/// How a platform's working indicator behaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WorkingIndicator {
    /// How often it must be shown again to stay visible (Telegram typing fades after about
    /// five seconds); `None` = it stays until taken down.
    pub refresh: Option<Duration>,
    /// It must be taken down with [`crate::WorkingPhase::Done`] (a Slack reaction or status);
    /// `false` = it fades by itself, and `Done` is not sent.
    pub needs_done: bool,
}

/// A sustained rate with a small burst, for a token bucket.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RateLimit {
    pub per_second: f64,
    pub burst: u32,
}

/// What a rate limit (declared, or reported by the platform) applies to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RateScope {
    /// This chat only.
    Chat,
    /// Every call of the bot, whatever the chat.
    Bot,
    /// One API method (Slack's per-method tiers).
    Method(String),
}

/// What a platform can do.
#[derive(Debug, Clone)]
pub struct Capabilities {
    /// The longest message the platform accepts, in `length_unit`, measured on the rendered
    /// text.
    pub max_message_len: usize,
    pub length_unit: LengthUnit,
    pub choices: ChoiceLimits,
    /// Messages can be edited after sending.
    pub edits: bool,
    /// The platform's "working…" indicator, if it has one.
    pub working: Option<WorkingIndicator>,
    /// Threads/topics inside a chat are addressable.
    pub threads: bool,
    /// Default send budget of a direct chat (the platform's published limits; config may
    /// override).
    pub per_chat_rate: RateLimit,
    /// The same for group chats (Telegram allows fewer messages per minute in groups).
    pub group_chat_rate: RateLimit,
    /// A budget shared by every chat of the bot (Telegram: about 30 messages a second), if
    /// the platform has one.
    pub per_bot_rate: Option<RateLimit>,
}
