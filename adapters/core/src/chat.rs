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

    /// Which of `shares` parts of the work this chat falls in ([`work_share`]).
    pub fn work_share(&self, shares: u32) -> u32 {
        work_share(
            self.platform,
            self.account.as_deref(),
            &self.chat_id,
            shares,
        )
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

/// How many shares the work is split into when several nodes share a store: the same on
/// every node, since a chat's share is computed from it; enough for the work to spread
/// evenly over a handful of nodes, few enough that renewing their leases costs little.
pub const WORK_SHARES: u32 = 16;

/// Which of `shares` parts of the work a chat falls in, when several nodes share a store
/// and each runs the turns and sends the messages of the chats of its parts
/// (docs/scaling.md). The same number in every process and version: FNV-1a over the
/// platform, the account and the chat id. Not the thread: a chat's threads share its
/// outbox lane, so they share its part.
pub fn work_share(platform: Platform, account: Option<&str>, chat_id: &str, shares: u32) -> u32 {
    let fnv = |hash: u64, bytes: &[u8]| {
        bytes.iter().fold(hash, |h, b| {
            (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
        })
    };
    let mut hash = fnv(0xcbf2_9ce4_8422_2325, platform.as_str().as_bytes());
    // The separators keep ("ab", "c") and ("a", "bc") apart.
    hash = fnv(hash, &[0]);
    hash = fnv(hash, account.unwrap_or("").as_bytes());
    hash = fnv(hash, &[0]);
    hash = fnv(hash, chat_id.as_bytes());
    (hash % u64::from(shares.max(1))) as u32
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
    fn a_chats_share_of_the_work_is_fixed_and_ignores_the_thread() {
        let chat = |id: &str, thread: Option<&str>| ChatRef {
            platform: Platform::Telegram,
            account: None,
            chat_id: id.into(),
            thread_id: thread.map(str::to_owned),
            kind: ChatKind::Direct,
        };
        // Fixed numbers: every node (and every version) must put a chat in the same share.
        assert_eq!(chat("42", None).work_share(16), 12);
        assert_eq!(chat("42", Some("9")).work_share(16), 12);
        let spread: std::collections::HashSet<u32> = (0..200)
            .map(|n| chat(&n.to_string(), None).work_share(16))
            .collect();
        assert_eq!(spread.len(), 16, "chats spread over every share");
        assert_eq!(chat("42", None).work_share(0), 0);
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
