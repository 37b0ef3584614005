//! What the daemon asks an adapter to do: [`Outbound`] actions, the semantic [`Choice`]s
//! an adapter lays out as buttons, the rendered [`MessageBody`], and what a send produced.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::chat::ChatRef;

/// A message body in the platform's markup, with the plain text to fall back to when the
/// platform rejects the markup. Made by [`crate::PlatformSender::render`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MessageBody {
    /// Text in the platform's markup; `None` means send `plain` only.
    pub markup: Option<String>,
    /// The same content without markup (the Markdown source the body was rendered from).
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

/// One option offered to the people in a chat (approve once, deny, …). The daemon says what
/// the options are; each adapter lays them out within its [`crate::ChoiceLimits`] (Telegram
/// inline keyboard, Discord action row, Slack actions block, WhatsApp reply buttons).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Choice {
    /// Comes back in [`crate::Press::choice_id`]; short (Telegram allows 64 bytes of data).
    pub id: String,
    /// The full label ("Allow for this session").
    pub label: String,
    /// A label for platforms with tight limits ("Session"); falls back to `label`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub short_label: Option<String>,
    #[serde(default)]
    pub style: ChoiceStyle,
}

impl Choice {
    /// The longest label that fits in `max` characters: the full one, else the short one,
    /// else `None` (the option must be offered as its text command instead).
    pub fn label_within(&self, max: usize) -> Option<&str> {
        std::iter::once(self.label.as_str())
            .chain(self.short_label.as_deref())
            .find(|l| l.chars().count() <= max)
    }
}

/// How an option is shown, where the platform has styles.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChoiceStyle {
    #[default]
    Normal,
    Primary,
    Danger,
}

/// The phase of a "working…" indicator tied to the message being answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkingPhase {
    /// A turn started (Telegram/Discord typing, Slack status or reaction, WhatsApp read
    /// receipt + typing).
    Start,
    /// Still working; sent every [`crate::WorkingIndicator::refresh`].
    Refresh,
    /// The turn ended, and how: remove what `Start` put up (a reaction, a status), and
    /// show how it ended where the platform does (Discord's ✅ or ❌). Platforms whose
    /// indicator fades by itself do nothing.
    Done(TurnEnd),
}

/// How a turn ended, for the indicator that showed it working.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TurnEnd {
    /// The person got an answer.
    Answered,
    /// The model or the provider failed, or the turn broke.
    Failed,
    /// Stopped or interrupted: no mark.
    Stopped,
}

/// A file to send.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutboundFile {
    pub path: PathBuf,
    pub name: String,
    pub mime: Option<String>,
    pub caption: Option<String>,
    /// Audio meant as a voice message (Hermes' `[[audio_as_voice]]`, a spoken reply): a
    /// voice bubble where the platform has one (it is Ogg/Opus then), else an audio file.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub voice: bool,
}

/// What lets a platform take one message once, though the gateway may send it twice: after
/// a crash between the platform's accept and the outbox's sent mark, or an attempt whose
/// answer never came (a timeout, a reset connection).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SendOnce {
    /// The same for every attempt at the message, across restarts (ASCII, at most 25
    /// characters: Discord's limit for a nonce).
    pub key: String,
    /// An earlier attempt may have reached the platform: look for it before posting again
    /// (Slack, which has no idempotency key); Discord's `enforce_nonce` needs no look.
    pub maybe_sent: bool,
}

/// One action toward a platform.
#[derive(Debug, Clone)]
pub enum Outbound {
    /// Send a new message.
    Text {
        chat: ChatRef,
        body: MessageBody,
        /// Platform message id (or [`crate::CommandCall::respond_via`] handle) to reply to.
        reply_to: Option<String>,
        /// Options to lay out under the message; already cut to the platform's limits.
        choices: Vec<Choice>,
        /// Makes a second attempt at this message recognisable, where the platform allows.
        once: Option<SendOnce>,
    },
    /// Replace the text (and drop the choices) of a message the gateway sent.
    Edit {
        chat: ChatRef,
        message_id: String,
        body: MessageBody,
    },
    /// A working indicator.
    Working {
        chat: ChatRef,
        /// The message being answered, where there is one (WhatsApp marks it read; Slack
        /// reacts to it).
        regarding: Option<String>,
        phase: WorkingPhase,
    },
    /// A short notice shown only to the person who pressed a choice (Telegram: the callback
    /// answer, if the adapter still holds it open; Discord: an ephemeral follow-up; Slack: an
    /// ephemeral message). The press itself was acknowledged by the adapter already; a
    /// platform that can no longer show the notice drops it.
    PressNotice {
        chat: ChatRef,
        press_id: String,
        text: String,
    },
    /// Send a file.
    File {
        chat: ChatRef,
        file: OutboundFile,
        reply_to: Option<String>,
        /// Makes a second attempt at this file recognisable, where the platform allows.
        once: Option<SendOnce>,
    },
}

impl Outbound {
    /// The chat this action touches.
    pub fn chat(&self) -> &ChatRef {
        match self {
            Outbound::Text { chat, .. }
            | Outbound::Edit { chat, .. }
            | Outbound::Working { chat, .. }
            | Outbound::PressNotice { chat, .. }
            | Outbound::File { chat, .. } => chat,
        }
    }
}

/// What a successful send produced.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Delivered {
    /// The platform's id of the message created or edited, if any.
    pub message_id: Option<String>,
}

/// A command the daemon understands, for platforms that show a command menu (Telegram
/// `setMyCommands`, Discord application commands) or take commands by word (Slack's
/// `/hermes <command>`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandSpec {
    pub name: &'static str,
    pub description: &'static str,
    /// One optional free-text argument and what it means (`/deny [reason]`).
    pub argument: Option<&'static str>,
    /// Other words for it (`start` for `help`): taken as the command where a platform reads
    /// words, never shown in a menu.
    pub aliases: &'static [&'static str],
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_label_falls_back_to_its_short_form_or_to_nothing() {
        let choice = Choice {
            id: "x".into(),
            label: "Allow for this session".into(),
            short_label: Some("Session".into()),
            style: ChoiceStyle::Primary,
        };
        assert_eq!(choice.label_within(64), Some("Allow for this session"));
        assert_eq!(choice.label_within(20), Some("Session"));
        assert_eq!(choice.label_within(5), None);
    }
}
