//! Discord events (serenity's models) → the gateway's [`Inbound`]: where a message lives (DM,
//! server channel, thread), who wrote it, whether it is addressed to the bot (DM, mention,
//! reply to the bot, a free-response channel, a thread the bot opened), the bot's mention
//! stripped, attachments; button presses and slash commands.

use hermes_adapter::{
    Attachment, Author, ChatKind, ChatRef, CommandCall, Inbound, InboundKind, InboundMessage,
    MediaKind, Platform, Press,
};
use serenity::model::application::{
    CommandDataOptionValue, CommandInteraction, ComponentInteraction,
};
use serenity::model::channel::{Message, MessageFlags, MessageType};
use serenity::model::user::User;

use crate::interactions;

/// The bot, as READY and `/users/@me` name it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    pub user_id: String,
    pub application_id: String,
    pub name: String,
    /// Said by the gateway's READY; before it, `application_id` is a guess (the bot's user
    /// id, which older applications do not share).
    pub from_ready: bool,
}

/// What kind of channel an event happened in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Place {
    Direct,
    /// A server text channel (or anything that is not a thread).
    Channel,
    /// A thread; `owner` is who opened it.
    Thread {
        parent: String,
        owner: Option<String>,
    },
}

/// How the adapter reads messages (from its settings).
#[derive(Debug, Clone, Default)]
pub struct Reading {
    /// Channels where every message is for the bot.
    pub free_response_channels: Vec<String>,
    /// Ids in the allowlists (`DISCORD_ALLOWED_USERS`, `GATEWAY_ALLOWED_USERS`): other bots
    /// are only heard when listed here (no bot-to-bot loops by accident).
    pub allowed: Vec<String>,
    /// Everyone is allowed (`…_ALLOW_ALL_USERS`).
    pub allow_all: bool,
    /// `DISCORD_IGNORE_NO_MENTION` (Hermes' default true): in a server, a message that
    /// mentions people but not the bot is not for it, outside free-response channels.
    pub ignore_no_mention: bool,
}

impl Reading {
    /// Whether `user` is on an allowlist (or everyone is allowed). The daemon still decides
    /// who is answered; this only keeps the adapter from acting for strangers on its own
    /// (opening threads).
    pub fn is_allowed(&self, user: &str) -> bool {
        self.allow_all || self.allowed.iter().any(|u| u == user)
    }
}

/// Whether the message mentions the bot itself (not a reply, not a free channel).
pub fn mentions(msg: &Message, me: &Identity) -> bool {
    msg.mentions.iter().any(|u| u.id.to_string() == me.user_id)
}

/// The command that is really a question (`/ask <question>`): recorded as a message.
pub const ASK: &str = "ask";

/// Whether a command's answers are only for the person who ran it: all but `/ask` (as in
/// Hermes) and `/retry`, whose answer is the conversation's, like the one it replaces.
pub fn is_private(command: &str) -> bool {
    !(command.eq_ignore_ascii_case(ASK) || command.eq_ignore_ascii_case("retry"))
}

/// Where a channel's messages (and their answers) go.
pub fn chat_ref(place: &Place, channel_id: &str, guild_id: Option<String>) -> ChatRef {
    let (chat_id, thread_id, kind) = match place {
        Place::Direct => (channel_id.to_owned(), None, ChatKind::Direct),
        Place::Channel => (channel_id.to_owned(), None, ChatKind::Group),
        Place::Thread { parent, .. } => {
            (parent.clone(), Some(channel_id.to_owned()), ChatKind::Group)
        }
    };
    ChatRef {
        platform: Platform::Discord,
        account: guild_id,
        chat_id,
        thread_id,
        kind,
    }
}

/// The channel a [`ChatRef`] sends to: the thread where there is one.
pub fn channel_of(chat: &ChatRef) -> &str {
    chat.thread_id.as_deref().unwrap_or(&chat.chat_id)
}

/// A person's message as an [`Inbound`]; `None` for what the gateway does not answer (its
/// own messages, system messages such as joins and pins).
pub fn message(msg: &Message, me: &Identity, place: &Place, reading: &Reading) -> Option<Inbound> {
    let author_id = msg.author.id.to_string();
    let listed_bot = reading.allowed.contains(&author_id);
    if author_id == me.user_id
        || (msg.author.bot && !listed_bot)
        || !matches!(msg.kind, MessageType::Regular | MessageType::InlineReply)
        || msg.webhook_id.is_some()
    {
        return None;
    }
    let channel = msg.channel_id.to_string();
    let mentioned = mentions(msg, me);
    let free = |id: &str| reading.free_response_channels.iter().any(|c| c == id);
    // Hermes' admission: in a server, a message mentioning another bot and not this one is
    // that bot's; one mentioning only people and not the bot is theirs (unless the channel
    // is free, or `DISCORD_IGNORE_NO_MENTION` is off).
    if place != &Place::Direct && !mentioned && !msg.mentions.is_empty() {
        let free_here = match place {
            Place::Thread { parent, .. } => free(&channel) || free(parent),
            _ => free(&channel),
        };
        let another_bot = msg.mentions.iter().any(|u| u.bot);
        if another_bot || (reading.ignore_no_mention && !free_here) {
            return None;
        }
    }
    let replied_to_bot = msg
        .referenced_message
        .as_ref()
        .is_some_and(|m| m.author.id.to_string() == me.user_id);
    let addressed = match place {
        Place::Direct => true,
        Place::Channel => mentioned || replied_to_bot || free(&channel),
        Place::Thread { parent, owner } => {
            mentioned
                || replied_to_bot
                || free(&channel)
                || free(parent)
                || owner.as_deref() == Some(me.user_id.as_str())
        }
    };
    let voice = msg
        .flags
        .is_some_and(|f| f.contains(MessageFlags::IS_VOICE_MESSAGE));
    let attachments: Vec<Attachment> = msg
        .attachments
        .iter()
        .map(|a| Attachment {
            kind: media_kind(a.content_type.as_deref(), voice),
            mime: a.content_type.clone(),
            name: Some(a.filename.clone()),
            size: Some(u64::from(a.size)),
            handle: a.url.clone(),
        })
        .collect();
    let text = strip_mention(&msg.content, &me.user_id);
    let unsupported = (text.is_empty() && attachments.is_empty())
        .then(|| {
            if !msg.sticker_items.is_empty() {
                Some("a sticker".to_owned())
            } else if msg.poll.is_some() {
                Some("a poll".to_owned())
            } else if !msg.embeds.is_empty() {
                Some("an embed".to_owned())
            } else {
                None
            }
        })
        .flatten();
    Some(Inbound {
        event_id: format!("discord:{}", msg.id),
        chat: chat_ref(place, &channel, msg.guild_id.map(|g| g.to_string())),
        author: author(
            &msg.author,
            msg.member.as_ref().and_then(|m| m.nick.clone()),
        ),
        kind: InboundKind::Message(InboundMessage {
            message_id: msg.id.to_string(),
            text,
            addressed,
            attachments,
            unsupported,
            reply_to: msg
                .message_reference
                .as_ref()
                .and_then(|r| r.message_id)
                .map(|id| id.to_string()),
        }),
    })
}

/// A press on one of the bot's buttons.
pub fn press(interaction: &ComponentInteraction, place: &Place) -> Inbound {
    let kind = InboundKind::Press(Press {
        press_id: interaction.id.to_string(),
        message_id: Some(interaction.message.id.to_string()),
        choice_id: interaction.data.custom_id.clone(),
    });
    let member = interaction.member.as_ref();
    let from = Origin {
        id: interaction.id.get(),
        channel: interaction.channel_id.get(),
        guild: interaction.guild_id.map(|g| g.get()),
        user: &interaction.user,
        nick: member.and_then(|m| m.nick.clone()),
    };
    from.event(place, kind)
}

/// A slash command: `/ask` as a message to the agent, the others as commands; both answered
/// through the interaction (`interaction:<id>`).
pub fn command(interaction: &CommandInteraction, place: &Place) -> Inbound {
    let handle = interactions::handle(
        &interaction.id.to_string(),
        is_private(&interaction.data.name),
    );
    let args = interaction
        .data
        .options
        .iter()
        .filter_map(|o| match &o.value {
            CommandDataOptionValue::String(s) => Some(s.clone()),
            CommandDataOptionValue::Integer(n) => Some(n.to_string()),
            CommandDataOptionValue::Boolean(b) => Some(b.to_string()),
            CommandDataOptionValue::Number(n) => Some(n.to_string()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join(" ");
    let name = interaction.data.name.to_ascii_lowercase();
    let kind = if name == ASK {
        InboundKind::Message(InboundMessage {
            message_id: handle,
            text: args,
            addressed: true,
            ..Default::default()
        })
    } else {
        InboundKind::Command(CommandCall {
            name,
            args,
            respond_via: Some(handle),
        })
    };
    let member = interaction.member.as_ref();
    let from = Origin {
        id: interaction.id.get(),
        channel: interaction.channel_id.get(),
        guild: interaction.guild_id.map(|g| g.get()),
        user: &interaction.user,
        nick: member.and_then(|m| m.nick.clone()),
    };
    from.event(place, kind)
}

/// Where an interaction came from and who made it.
struct Origin<'a> {
    id: u64,
    channel: u64,
    guild: Option<u64>,
    user: &'a User,
    nick: Option<String>,
}

impl Origin<'_> {
    fn event(self, place: &Place, kind: InboundKind) -> Inbound {
        Inbound {
            event_id: format!("discord:i{}", self.id),
            chat: chat_ref(
                place,
                &self.channel.to_string(),
                self.guild.map(|g| g.to_string()),
            ),
            author: author(self.user, self.nick),
            kind,
        }
    }
}

fn author(user: &User, nick: Option<String>) -> Author {
    Author {
        user_id: user.id.to_string(),
        display_name: nick
            .or_else(|| user.global_name.clone())
            .unwrap_or_else(|| user.name.clone()),
        username: Some(user.name.clone()),
        is_bot: user.bot,
    }
}

/// What a file is; the audio of a voice message is a voice note.
fn media_kind(mime: Option<&str>, voice_message: bool) -> MediaKind {
    match MediaKind::from_mime(mime) {
        MediaKind::Audio if voice_message => MediaKind::Voice,
        kind => kind,
    }
}

/// The text without the bot's own mention (`<@id>` or the older `<@!id>`); the person's
/// line breaks (pasted code, logs) stay.
fn strip_mention(content: &str, bot_id: &str) -> String {
    content
        .replace(&format!("<@{bot_id}>"), "")
        .replace(&format!("<@!{bot_id}>"), "")
        .trim()
        .to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn answers_to_ask_and_retry_are_public_the_rest_private() {
        assert!(!is_private("ask") && !is_private("retry") && !is_private("Retry"));
        for command in ["new", "status", "model", "undo", "usage", "help"] {
            assert!(is_private(command), "{command}");
        }
    }

    fn me() -> Identity {
        Identity {
            user_id: "900".into(),
            application_id: "900".into(),
            name: "hermes".into(),
            from_ready: true,
        }
    }

    fn msg(extra: serde_json::Value) -> Message {
        let mut base = json!({
            "id": "1300", "channel_id": "50", "content": "hello",
            "author": {"id": "7", "username": "ada", "discriminator": "0", "global_name": "Ada", "avatar": null},
            "timestamp": "2026-11-24T00:00:00.000000+00:00", "edited_timestamp": null,
            "tts": false, "mention_everyone": false, "mentions": [], "mention_roles": [],
            "attachments": [], "embeds": [], "pinned": false, "type": 0
        });
        for (k, v) in extra.as_object().unwrap() {
            base[k] = v.clone();
        }
        serde_json::from_value(base).unwrap()
    }

    #[test]
    fn a_dm_is_addressed_and_keeps_its_text() {
        let event = message(&msg(json!({})), &me(), &Place::Direct, &Reading::default()).unwrap();
        assert_eq!(event.event_id, "discord:1300");
        assert_eq!(event.chat.kind, ChatKind::Direct);
        assert_eq!(event.author.display_name, "Ada");
        let InboundKind::Message(m) = event.kind else {
            panic!()
        };
        assert!(m.addressed);
        assert_eq!(m.text, "hello");
    }

    #[test]
    fn a_server_message_mentioning_others_but_not_the_bot_is_theirs() {
        let strict = Reading {
            ignore_no_mention: true,
            free_response_channels: vec!["51".into()],
            ..Reading::default()
        };
        let person = json!({"id": "7", "username": "bob", "discriminator": "0", "avatar": null});
        let other_bot = json!({"id": "8", "username": "helper", "discriminator": "0", "avatar": null, "bot": true});
        let to_bob = msg(json!({"guild_id": "3", "content": "<@7> lunch?", "mentions": [person]}));
        assert!(message(&to_bob, &me(), &Place::Channel, &strict).is_none());
        assert!(
            message(&to_bob, &me(), &Place::Channel, &Reading::default()).is_some(),
            "with DISCORD_IGNORE_NO_MENTION off it is read as any message"
        );
        assert!(
            message(&to_bob, &me(), &Place::Direct, &strict).is_some(),
            "never in a DM"
        );
        let in_free = msg(
            json!({"guild_id": "3", "channel_id": "51", "content": "<@7> lunch?", "mentions": [person]}),
        );
        assert!(message(&in_free, &me(), &Place::Channel, &strict).is_some());
        let to_bot = msg(
            json!({"guild_id": "3", "channel_id": "50", "content": "<@8> run", "mentions": [other_bot]}),
        );
        assert!(
            message(&to_bot, &me(), &Place::Channel, &Reading::default()).is_none(),
            "another bot's, always"
        );
        let both = msg(json!({"guild_id": "3", "content": "<@900> <@7> hi",
            "mentions": [person, {"id": "900", "username": "hermes", "discriminator": "0", "avatar": null, "bot": true}]}));
        assert!(message(&both, &me(), &Place::Channel, &strict).is_some());
    }

    #[test]
    fn in_a_channel_only_a_mention_a_reply_or_a_free_channel_addresses_the_bot() {
        let reading = Reading::default();
        let plain = message(
            &msg(json!({"guild_id": "3"})),
            &me(),
            &Place::Channel,
            &reading,
        )
        .unwrap();
        let InboundKind::Message(m) = plain.kind else {
            panic!()
        };
        assert!(!m.addressed);
        let mention = msg(json!({
            "guild_id": "3", "content": "<@900> what time is it?",
            "mentions": [{"id": "900", "username": "hermes", "discriminator": "0", "avatar": null, "bot": true}]
        }));
        let event = message(&mention, &me(), &Place::Channel, &reading).unwrap();
        assert_eq!(event.chat.account.as_deref(), Some("3"));
        let InboundKind::Message(m) = event.kind else {
            panic!()
        };
        assert!(m.addressed);
        assert_eq!(m.text, "what time is it?");
        let free = Reading {
            free_response_channels: vec!["50".into()],
            ..Reading::default()
        };
        let event = message(
            &msg(json!({"guild_id": "3"})),
            &me(),
            &Place::Channel,
            &free,
        )
        .unwrap();
        let InboundKind::Message(m) = event.kind else {
            panic!()
        };
        assert!(m.addressed);
    }

    #[test]
    fn a_thread_is_its_own_conversation_under_its_parent() {
        let place = Place::Thread {
            parent: "40".into(),
            owner: Some("900".into()),
        };
        let event = message(
            &msg(json!({"guild_id": "3"})),
            &me(),
            &place,
            &Reading::default(),
        )
        .unwrap();
        assert_eq!(event.chat.chat_id, "40");
        assert_eq!(event.chat.thread_id.as_deref(), Some("50"));
        assert_eq!(channel_of(&event.chat), "50");
        let InboundKind::Message(m) = event.kind else {
            panic!()
        };
        assert!(
            m.addressed,
            "a thread the bot opened goes on without mentions"
        );
    }

    #[test]
    fn the_mention_goes_and_line_breaks_stay() {
        assert_eq!(
            strip_mention("<@900> look:\n```\nfn main() {}\n```", "900"),
            "look:\n```\nfn main() {}\n```"
        );
    }

    #[test]
    fn its_own_and_system_messages_are_skipped() {
        let own = msg(
            json!({"author": {"id": "900", "username": "hermes", "discriminator": "0", "avatar": null, "bot": true}}),
        );
        assert!(message(&own, &me(), &Place::Direct, &Reading::default()).is_none());
        let pinned = msg(json!({"type": 6}));
        assert!(message(&pinned, &me(), &Place::Direct, &Reading::default()).is_none());
        let other_bot = msg(
            json!({"author": {"id": "77", "username": "robot", "discriminator": "0", "avatar": null, "bot": true}}),
        );
        assert!(message(&other_bot, &me(), &Place::Direct, &Reading::default()).is_none());
        let listed = Reading {
            allowed: vec!["77".into()],
            ..Reading::default()
        };
        assert!(
            message(&other_bot, &me(), &Place::Direct, &listed).is_some(),
            "a bot on the allowlist is heard"
        );
    }

    #[test]
    fn attachments_carry_their_cdn_url_and_voice_notes_are_voice() {
        let voice = msg(json!({
            "content": "", "flags": 8192,
            "attachments": [{"id": "5", "filename": "voice-message.ogg", "size": 1200,
                "url": "https://cdn/x.ogg", "proxy_url": "https://media/x.ogg", "content_type": "audio/ogg"}]
        }));
        let event = message(&voice, &me(), &Place::Direct, &Reading::default()).unwrap();
        let InboundKind::Message(m) = event.kind else {
            panic!()
        };
        assert_eq!(m.attachments[0].kind, MediaKind::Voice);
        assert_eq!(m.attachments[0].handle, "https://cdn/x.ogg");
        assert_eq!(m.unsupported, None);
        let sticker = msg(
            json!({"content": "", "sticker_items": [{"id": "1", "name": "wave", "format_type": 1}]}),
        );
        let event = message(&sticker, &me(), &Place::Direct, &Reading::default()).unwrap();
        let InboundKind::Message(m) = event.kind else {
            panic!()
        };
        assert_eq!(m.unsupported.as_deref(), Some("a sticker"));
    }
}
