//! Where a message lives and who wrote it: [`Platform`], [`ChatKind`], [`ChatRef`] (the
//! conversation, which is also where its answer goes) and [`Author`].

use std::fmt;

use serde::{Deserialize, Serialize};

/// The chat platforms the gateway speaks to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Platform {
    Telegram,
    Discord,
    Slack,
    WhatsApp,
    /// The gateway's own chat page in a browser (`adapters/web`).
    Web,
}

impl Platform {
    /// Every platform, in a stable order (used by config and status output).
    pub const ALL: [Platform; 5] = [
        Platform::Telegram,
        Platform::Discord,
        Platform::Slack,
        Platform::WhatsApp,
        Platform::Web,
    ];

    /// The lower-case name used in config keys, session keys and the store.
    pub fn as_str(self) -> &'static str {
        match self {
            Platform::Telegram => "telegram",
            Platform::Discord => "discord",
            Platform::Slack => "slack",
            Platform::WhatsApp => "whatsapp",
            Platform::Web => "web",
        }
    }

    /// Its section under `platforms:` in `config.yaml` (Hermes' names: the WhatsApp Cloud
    /// API's is `whatsapp_cloud`).
    pub fn config_section(self) -> &'static str {
        match self {
            Platform::WhatsApp => "whatsapp_cloud",
            other => other.as_str(),
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ChatKind {
    /// A one-to-one conversation with the bot.
    #[serde(rename = "dm")]
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

/// A conversation: where a message came from, and, as the adapter set it, where its answer
/// goes. An adapter that answers in threads (Slack's `thread_ts`) puts the thread here even
/// for a message that started it, so the question and every answer share one `ChatRef` and
/// one session.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ChatRef {
    pub platform: Platform,
    /// The account or workspace the chat belongs to: a Slack `team_id`, a Discord guild id, a
    /// WhatsApp business phone number id. `None` where the bot token already names it
    /// (Telegram).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub account: Option<String>,
    /// The platform's chat/channel id, as text (Telegram ids are signed integers, Slack's are
    /// strings; text fits both).
    pub chat_id: String,
    /// A thread/topic inside the chat (Telegram forum topic, Slack `thread_ts`, Discord
    /// thread).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread_id: Option<String>,
    pub kind: ChatKind,
}

impl ChatRef {
    /// A stable identity of the conversation (platform, account, chat, thread): what session
    /// keys and dispatch order are derived from. The same conversation always gives the same
    /// text, whatever the message in it.
    pub fn conversation(&self) -> String {
        let mut key = format!("{}:{}", self.platform, self.kind.as_str());
        if let Some(account) = &self.account {
            key.push(':');
            key.push_str(account);
        }
        key.push(':');
        key.push_str(&self.chat_id);
        if let Some(thread) = &self.thread_id {
            key.push(':');
            key.push_str(thread);
        }
        key
    }

    /// Whether `other` is the same chat: where approvals are decided. Two different threads
    /// are different chats; a side that names no thread (a press some platforms report
    /// without its thread) matches the whole chat.
    pub fn same_chat(&self, other: &ChatRef) -> bool {
        let threads = match (&self.thread_id, &other.thread_id) {
            (Some(mine), Some(theirs)) => mine == theirs,
            _ => true,
        };
        self.platform == other.platform
            && self.account == other.account
            && self.chat_id == other.chat_id
            && threads
    }
}

/// The person (or bot) who wrote one event. Every event carries its own author, so a shared
/// conversation shows each message's writer, not the first one's.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Author {
    /// Stable platform user id; what allowlists and pairing refer to.
    pub user_id: String,
    /// A human name for logs, prompts and `/status`.
    pub display_name: String,
    /// The handle (`@name`), where the platform has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub username: Option<String>,
    #[serde(default)]
    pub is_bot: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn platform_names_round_trip() {
        for p in Platform::ALL {
            assert_eq!(Platform::parse(p.as_str()), Some(p));
        }
        assert_eq!(Platform::parse("TELEGRAM"), Some(Platform::Telegram));
        assert_eq!(Platform::parse("irc"), None);
    }

    #[test]
    fn another_thread_of_the_channel_is_another_chat() {
        let thread = |id: Option<&str>| ChatRef {
            platform: Platform::Discord,
            account: None,
            chat_id: "300".into(),
            thread_id: id.map(str::to_owned),
            kind: ChatKind::Group,
        };
        assert!(thread(Some("a")).same_chat(&thread(Some("a"))));
        assert!(!thread(Some("a")).same_chat(&thread(Some("b"))));
        assert!(thread(Some("a")).same_chat(&thread(None)));
        assert!(thread(None).same_chat(&thread(Some("a"))));
    }

    #[test]
    fn a_conversation_names_its_account_and_thread() {
        let mut chat = ChatRef {
            platform: Platform::Slack,
            account: Some("T1".into()),
            chat_id: "C9".into(),
            thread_id: Some("1700.1".into()),
            kind: ChatKind::Group,
        };
        assert_eq!(chat.conversation(), "slack:group:T1:C9:1700.1");
        chat.account = None;
        chat.thread_id = None;
        assert_eq!(chat.conversation(), "slack:group:C9");
    }
}
