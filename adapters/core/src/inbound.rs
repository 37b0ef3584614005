//! What adapters hand the daemon: one [`Inbound`] per platform event. Every type here is
//! serde-serialisable, because the inbox stores events as a versioned JSON payload: a field
//! added to the contract later needs no database migration (give it `#[serde(default)]`).

use serde::{Deserialize, Serialize};

use crate::chat::{Author, ChatRef};

/// One normalised event from a platform.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Inbound {
    /// Unique per platform event; the de-duplication key of the inbox
    /// (e.g. `telegram:123`, a Slack `event_id`, a WhatsApp `wamid`).
    pub event_id: String,
    pub chat: ChatRef,
    /// Who wrote or pressed it.
    pub author: Author,
    pub kind: InboundKind,
}

/// What happened.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum InboundKind {
    /// A message written by a person.
    Message(InboundMessage),
    /// A press on one of the choices the gateway offered (approval prompts). The adapter has
    /// already acknowledged it to the platform by the time the daemon sees it.
    Press(Press),
    /// A native, structured command (Discord application command, Slack slash command). Text
    /// `/cmd` messages stay [`InboundKind::Message`]; the router treats both alike.
    Command(CommandCall),
    /// Work the gateway records for itself so a crash cannot lose it (a background process
    /// finished with `notify_on_complete`): a turn in the named session.
    Wakeup(Wakeup),
}

/// A person's message, already stripped of the bot's own @mention.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct InboundMessage {
    /// The platform's id of this message (replies thread to it).
    pub message_id: String,
    /// Text or caption. Empty when the message carried nothing the gateway can read.
    pub text: String,
    /// Whether the message is addressed to the bot: a DM, an @mention, a reply to one of the
    /// bot's messages, or a command. Groups with `require_mention` only answer these.
    pub addressed: bool,
    /// Files, pictures and voice notes that came with it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attachments: Vec<Attachment>,
    /// Set when the message had content the gateway cannot read (a sticker, a location, …):
    /// names what it was so the person can be told.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unsupported: Option<String>,
    /// The platform's id of the message this one replies to, if it is a reply (`/approve`
    /// as a reply to a prompt acts on that prompt).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply_to: Option<String>,
}

/// A file that came with a message; its bytes are fetched on demand through
/// [`crate::PlatformSender::fetch_media`] with `handle`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attachment {
    pub kind: MediaKind,
    /// The MIME type, where the platform says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime: Option<String>,
    /// The file name, where the platform says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Size in bytes, where the platform says (checked against the cap before fetching).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
    /// What the adapter needs to fetch it: a Telegram `file_id`, a WhatsApp media id, a URL.
    pub handle: String,
}

/// What an attachment is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MediaKind {
    Image,
    Voice,
    Audio,
    Video,
    Document,
}

impl MediaKind {
    /// What a file is, by its MIME type (a document when it says nothing better).
    pub fn from_mime(mime: Option<&str>) -> MediaKind {
        let mime = mime.unwrap_or("").to_ascii_lowercase();
        if mime.starts_with("image/") {
            MediaKind::Image
        } else if mime.starts_with("audio/") {
            MediaKind::Audio
        } else if mime.starts_with("video/") {
            MediaKind::Video
        } else {
            MediaKind::Document
        }
    }
}

/// A press on a choice.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Press {
    /// The platform's id of the press (Telegram callback query id, Discord interaction id,
    /// Slack `trigger_id`); what [`crate::Outbound::PressNotice`] refers to.
    pub press_id: String,
    /// The message that carries the choice, if the platform says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_id: Option<String>,
    /// The chosen option's id, as sent in [`crate::Choice::id`].
    pub choice_id: String,
}

/// A structured command.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommandCall {
    /// The command's name without `/`, lower-case.
    pub name: String,
    /// Its arguments as one line of text.
    #[serde(default)]
    pub args: String,
    /// Where the answer goes: passed back as the `reply_to` of the answer's
    /// [`crate::Outbound::Text`]. A message id, or an adapter's handle for an interaction it
    /// has deferred; a handle starts with [`HANDLE_PREFIX`], and then every part of the
    /// answer is addressed to it (a private answer must stay private to its last part).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub respond_via: Option<String>,
}

/// How an adapter's handle for an answer (a deferred interaction, a response URL) begins,
/// so the daemon can tell it from a message id.
pub const HANDLE_PREFIX: &str = "handle:";

/// Whether a `reply_to` is an adapter's handle rather than a message id.
pub fn is_handle(reply_to: &str) -> bool {
    reply_to.starts_with(HANDLE_PREFIX)
}

/// Work the gateway owes itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Wakeup {
    /// The session the turn runs in.
    pub session_key: String,
    /// What the agent is told.
    pub text: String,
}

/// What the platform said became of a message the gateway sent (WhatsApp status webhooks).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeliveryStatus {
    Sent,
    Delivered,
    Read,
    /// The platform could not deliver it; the reason as the platform gave it.
    Failed(String),
    /// The platform did not deliver it for a reason that passes (WhatsApp: the person's
    /// 24-hour window had closed): the gateway queues it again, to go out when it can.
    Held(String),
}

impl DeliveryStatus {
    /// The word stored in the outbox.
    pub fn as_str(&self) -> &'static str {
        match self {
            DeliveryStatus::Sent => "sent",
            DeliveryStatus::Delivered => "delivered",
            DeliveryStatus::Read => "read",
            DeliveryStatus::Failed(_) => "failed",
            DeliveryStatus::Held(_) => "held",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chat::{ChatKind, Platform};

    #[test]
    fn an_event_round_trips_through_json_and_old_payloads_still_read() {
        let event = Inbound {
            event_id: "telegram:1".into(),
            chat: ChatRef {
                platform: Platform::Telegram,
                account: None,
                chat_id: "42".into(),
                thread_id: None,
                kind: ChatKind::Direct,
            },
            author: Author {
                user_id: "7".into(),
                display_name: "Ada".into(),
                username: None,
                is_bot: false,
            },
            kind: InboundKind::Message(InboundMessage {
                message_id: "100".into(),
                text: "hi".into(),
                addressed: true,
                ..Default::default()
            }),
        };
        let json = serde_json::to_string(&event).unwrap();
        assert_eq!(serde_json::from_str::<Inbound>(&json).unwrap(), event);
        // A payload written before `attachments` existed still reads.
        let older = r#"{"event_id":"e","chat":{"platform":"slack","chat_id":"C1","kind":"group"},
            "author":{"user_id":"U1","display_name":"Bo"},
            "kind":{"type":"message","message_id":"1","text":"x","addressed":false}}"#;
        let read: Inbound = serde_json::from_str(older).unwrap();
        assert_eq!(read.chat.platform, Platform::Slack);
    }
}
