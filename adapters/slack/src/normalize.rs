//! Slack events (slack-morphism's models) → the gateway's [`Inbound`]: DMs and channels, the
//! thread an answer goes to (`reply_in_thread`), whether the bot is addressed (a DM or a
//! mention; a follow-up in a thread it answered in is the receiver's to tell, from the
//! store), the mention stripped, Slack's entities
//! decoded, files; button presses and `/hermes` commands. Edits, deletions and bot messages
//! are not for the gateway.
//!
//! A mention arrives twice when the app subscribes to both `message.channels` and
//! `app_mention` (with two `event_id`s); events are therefore known by channel and `ts`,
//! so the inbox records the message once.

use std::sync::{Arc, RwLock};

use hermes_adapter::{
    Attachment, Author, ChatKind, ChatRef, CommandCall, CommandSpec, Inbound, InboundKind,
    InboundMessage, MediaKind, Platform, Press,
};
use slack_morphism::prelude::*;

use crate::open;

/// The bot, as `auth.test` names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Me {
    pub user_id: String,
}

/// The words `/hermes <word>` takes as the gateway's commands (their names and aliases),
/// as the daemon registered them (`register_commands`, at start-up); other text, and any
/// text before the daemon registered them, is a question.
#[derive(Clone, Default)]
pub struct Commands(Arc<RwLock<Vec<String>>>);

impl Commands {
    pub fn set(&self, specs: &[CommandSpec]) {
        let words = specs
            .iter()
            .flat_map(|c| std::iter::once(c.name).chain(c.aliases.iter().copied()))
            .map(str::to_ascii_lowercase)
            .collect();
        *self.0.write().unwrap_or_else(|e| e.into_inner()) = words;
    }

    /// Whether `word` (any case, with or without its slash) is one of them.
    pub fn contains(&self, word: &str) -> bool {
        let word = word.trim_start_matches('/').to_ascii_lowercase();
        let words = self.0.read().unwrap_or_else(|e| e.into_inner());
        words.contains(&word)
    }
}

/// A message the gateway answers, from whichever event carried it.
struct Said<'a> {
    team: &'a str,
    channel: &'a str,
    /// `im`, `mpim`, `channel`, `group`, if the event says.
    channel_type: Option<&'a str>,
    user: &'a str,
    ts: &'a str,
    thread_ts: Option<&'a str>,
    text: &'a str,
    files: &'a [SlackFile],
    /// The event is an `app_mention`.
    mention_event: bool,
}

/// A push event as an [`Inbound`]; `None` for what the gateway does not answer.
pub fn push(event: &SlackPushEventCallback, me: &Me, reply_in_thread: bool) -> Option<Inbound> {
    let team = event.team_id.to_string();
    let said = match &event.event {
        SlackEventCallbackBody::Message(m) => {
            let allowed_subtype = match &m.subtype {
                None => true,
                Some(SlackMessageEventType::FileShare)
                | Some(SlackMessageEventType::ThreadBroadcast) => true,
                Some(_) => false,
            };
            if !allowed_subtype || m.sender.bot_id.is_some() || m.hidden == Some(true) {
                return None;
            }
            let content = m.content.as_ref();
            let Some(user) = m.sender.user.as_ref() else {
                tracing::warn!(ts = %m.origin.ts, "slack: a message without an author; not answered");
                return None;
            };
            Said {
                team: &team,
                channel: m.origin.channel.as_ref()?.0.as_str(),
                channel_type: m.origin.channel_type.as_ref().map(|t| t.0.as_str()),
                user: user.0.as_str(),
                ts: m.origin.ts.0.as_str(),
                thread_ts: m.origin.thread_ts.as_ref().map(|t| t.0.as_str()),
                text: content.and_then(|c| c.text.as_deref()).unwrap_or(""),
                files: content.and_then(|c| c.files.as_deref()).unwrap_or(&[]),
                mention_event: false,
            }
        }
        SlackEventCallbackBody::AppMention(m) => Said {
            team: &team,
            channel: m.channel.0.as_str(),
            channel_type: None,
            user: m.user.0.as_str(),
            ts: m.origin.ts.0.as_str(),
            thread_ts: m.origin.thread_ts.as_ref().map(|t| t.0.as_str()),
            text: m.content.text.as_deref().unwrap_or(""),
            files: m.content.files.as_deref().unwrap_or(&[]),
            mention_event: true,
        },
        other => {
            tracing::debug!(event = ?std::mem::discriminant(other), "slack: an event the gateway does not answer");
            return None;
        }
    };
    message(said, me, reply_in_thread)
}

fn message(said: Said, me: &Me, reply_in_thread: bool) -> Option<Inbound> {
    if said.user == me.user_id {
        return None;
    }

    let direct = matches!(said.channel_type, Some("im")) || said.channel.starts_with('D');
    let mention = format!("<@{}>", me.user_id);
    let mentioned = said.mention_event || said.text.contains(&mention);
    let addressed = direct || mentioned;
    // In a channel the answer goes in the thread of the message (which is the thread's
    // session); a DM is one conversation unless the person wrote in a thread.
    let thread = match (direct, said.thread_ts) {
        (_, Some(thread)) => Some(thread.to_owned()),
        (false, None) if reply_in_thread => Some(said.ts.to_owned()),
        _ => None,
    };
    // The mention goes; the person's line breaks (pasted code, logs) stay.
    let text = decode(said.text.replace(&mention, "").trim());
    let attachments = said
        .files
        .iter()
        .filter_map(|f| {
            let url = f.url_private_download.as_ref().or(f.url_private.as_ref())?;
            let mime = f.mimetype.as_ref().map(|m| m.0.to_string());
            Some(Attachment {
                kind: MediaKind::from_mime(mime.as_deref()),
                mime,
                name: f.name.clone(),
                size: None,
                handle: url.to_string(),
            })
        })
        .collect();
    Some(Inbound {
        event_id: format!("slack:{}:{}:{}", said.team, said.channel, said.ts),
        chat: ChatRef {
            platform: Platform::Slack,
            account: Some(said.team.to_owned()),
            chat_id: said.channel.to_owned(),
            thread_id: thread,
            kind: if direct {
                ChatKind::Direct
            } else {
                ChatKind::Group
            },
        },
        author: person(said.user),
        kind: InboundKind::Message(InboundMessage {
            message_id: said.ts.to_owned(),
            text,
            addressed,
            attachments,
            ..Default::default()
        }),
    })
}

/// A press on one of the bot's buttons; `None` for other interactions.
pub fn press(event: &SlackInteractionBlockActionsEvent) -> Option<Inbound> {
    let team = event.team.id.to_string();
    let presser = event.user.as_ref()?;
    let user = presser.id.to_string();
    let action = event.actions.as_ref()?.first()?;
    let choice = action
        .value
        .clone()
        .unwrap_or_else(|| action.action_id.to_string());
    let (channel, message_ts) = match &event.container {
        SlackInteractionActionContainer::Message(m) => (
            m.channel_id
                .as_ref()
                .map(|c| c.to_string())
                .or_else(|| event.channel.as_ref().map(|c| c.id.to_string()))?,
            m.message_ts.to_string(),
        ),
        _ => return None,
    };
    let thread = event
        .message
        .as_ref()
        .and_then(|m| m.origin.thread_ts.as_ref().map(|t| t.to_string()));
    let press_id = event.trigger_id.to_string();
    Some(Inbound {
        event_id: format!("slack:{team}:press:{press_id}"),
        chat: ChatRef {
            platform: Platform::Slack,
            account: Some(team.clone()),
            kind: if channel.starts_with('D') {
                ChatKind::Direct
            } else {
                ChatKind::Group
            },
            chat_id: channel,
            thread_id: thread,
        },
        author: Author {
            display_name: presser
                .name
                .clone()
                .or_else(|| presser.username.clone())
                .unwrap_or_else(|| user.clone()),
            ..person(&user)
        },
        kind: InboundKind::Press(Press {
            press_id,
            message_id: Some(message_ts),
            choice_id: choice,
        }),
    })
}

/// `/hermes <text>`: a gateway command by its first word, else a question; a command's
/// answer goes through its `response_url` (handle `slack-response-private:<trigger id>`).
/// Slack sends slash commands without a thread, so a command in a channel acts where the
/// person last talked to the bot there (`thread`: their latest thread in that channel).
pub fn command(event: &SlackCommandEvent, thread: Option<String>, commands: &Commands) -> Inbound {
    let team = event.team_id.to_string();
    let channel = event.channel_id.to_string();
    let id = event.trigger_id.to_string();
    let text = event.text.as_deref().unwrap_or("").trim();
    let (first, rest) = text.split_once(char::is_whitespace).unwrap_or((text, ""));
    let first = first.trim_start_matches('/').to_ascii_lowercase();
    let handle = open::handle(&id, is_private(event, commands));
    let kind = if commands.contains(&first) {
        InboundKind::Command(CommandCall {
            name: first,
            args: rest.trim().to_owned(),
            respond_via: Some(handle),
        })
    } else {
        InboundKind::Message(InboundMessage {
            message_id: handle,
            text: decode(text),
            addressed: true,
            ..Default::default()
        })
    };
    Inbound {
        event_id: format!("slack:{team}:command:{id}"),
        chat: ChatRef {
            platform: Platform::Slack,
            account: Some(team.clone()),
            kind: if channel.starts_with('D') {
                ChatKind::Direct
            } else {
                ChatKind::Group
            },
            chat_id: channel,
            thread_id: thread,
        },
        author: person(event.user_id.as_ref()),
        kind,
    }
}

/// Whether a command's answers are only for the person: all but a question.
pub fn is_private(event: &SlackCommandEvent, commands: &Commands) -> bool {
    let text = event.text.as_deref().unwrap_or("").trim();
    let first = text.split_whitespace().next().unwrap_or("");
    commands.contains(first)
}

fn person(user: &str) -> Author {
    Author {
        user_id: user.to_owned(),
        display_name: user.to_owned(),
        username: None,
        is_bot: false,
    }
}

/// Slack's three entities back to characters (`&amp;` last, so `&amp;lt;` stays `&lt;`).
pub fn decode(text: &str) -> String {
    text.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&")
}
