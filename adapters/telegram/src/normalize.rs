//! Telegram updates into [`Inbound`] events: chat kind, sender, text or caption, whether the
//! bot was addressed (DM, @mention, reply to the bot, command), with the bot's @mention
//! stripped from the text.

use hermes_adapter::{
    Attachment, Author, ChatKind, ChatRef, Inbound, InboundKind, InboundMessage,
    MediaKind as MediaKind_, Platform, Press,
};
use teloxide_core::types::{
    Chat, FileMeta, MaybeInaccessibleMessage, MediaKind, Message, MessageEntityKind, MessageKind,
    Update, UpdateKind, User,
};

/// Who the bot is (from `getMe`).
#[derive(Debug, Clone)]
pub struct BotIdentity {
    pub id: u64,
    /// Without the leading `@`.
    pub username: String,
}

/// The event in an update, or `None` for updates the gateway does not handle (edits, service
/// messages, other bots, channel posts).
pub fn normalize(update: &Update, me: &BotIdentity) -> Option<Inbound> {
    // Update ids count per bot: the bot's id keeps two bots' updates apart.
    let event_id = format!("telegram:{}:{}", me.id, update.id.0);
    match &update.kind {
        UpdateKind::Message(message) => normalize_message(event_id, message, me),
        UpdateKind::CallbackQuery(query) => {
            let (chat, message_id) = match query.message.as_ref()? {
                MaybeInaccessibleMessage::Regular(m) => (chat_ref(&m.chat, topic(m)), m.id),
                MaybeInaccessibleMessage::Inaccessible(m) => {
                    (chat_ref(&m.chat, None), m.message_id)
                }
            };
            Some(Inbound {
                event_id,
                chat,
                author: author(&query.from),
                kind: InboundKind::Press(Press {
                    press_id: query.id.0.clone(),
                    message_id: Some(message_id.0.to_string()),
                    choice_id: query.data.clone().unwrap_or_default(),
                }),
            })
        }
        _ => None,
    }
}

fn normalize_message(event_id: String, message: &Message, me: &BotIdentity) -> Option<Inbound> {
    let MessageKind::Common(common) = &message.kind else {
        return None; // service message: member joined, title changed, …
    };
    let from = message.from.as_ref()?;
    if from.is_bot {
        return None;
    }
    let chat = chat_ref(&message.chat, topic(message));
    let raw_text = message.text().or(message.caption());
    let attachments = attachments(&common.media_kind);
    let unsupported =
        (raw_text.is_none() && attachments.is_empty()).then(|| describe_media(&common.media_kind));
    let (text, addressed) = match raw_text {
        Some(text) => addressing(message, text, me, chat.kind == ChatKind::Direct),
        None => (
            String::new(),
            chat.kind == ChatKind::Direct || replies_to_bot(message, me),
        ),
    };
    Some(Inbound {
        event_id,
        chat,
        author: author(from),
        kind: InboundKind::Message(InboundMessage {
            message_id: message.id.0.to_string(),
            text,
            addressed,
            attachments,
            unsupported,
            reply_to: message.reply_to_message().map(|r| r.id.0.to_string()),
        }),
    })
}

/// Strip the bot's @mention and decide whether the message is addressed to the bot.
fn addressing(message: &Message, text: &str, me: &BotIdentity, direct: bool) -> (String, bool) {
    let handle = format!("@{}", me.username);
    let mut addressed = direct || replies_to_bot(message, me);
    for entity in entities(message) {
        match &entity.kind {
            MessageEntityKind::Mention if entity.text.eq_ignore_ascii_case(&handle) => {
                addressed = true
            }
            MessageEntityKind::TextMention { user } if user.id.0 == me.id => addressed = true,
            MessageEntityKind::BotCommand if entity.offset == 0 => {
                // `/cmd` is for every bot in the group; `/cmd@other_bot` is not for us.
                match entity.text.split_once('@') {
                    None => addressed = true,
                    Some((_, bot)) if bot.eq_ignore_ascii_case(&me.username) => addressed = true,
                    Some(_) => {}
                }
            }
            _ => {}
        }
    }
    let cleaned = if me.username.is_empty() {
        text.trim().to_owned()
    } else {
        remove_handle(text, &handle)
    };
    (cleaned, addressed)
}

/// An entity of a message with the text it covers.
struct Entity {
    kind: MessageEntityKind,
    text: String,
    /// In UTF-16 code units, as Telegram counts.
    offset: usize,
}

/// The entities of the message's text (or caption) with their text. An entity whose
/// offsets fall outside the text or inside a character is skipped: teloxide's
/// `parse_entities` panics on one, and a malformed update must not stop the adapter (it
/// would be fetched again after every restart).
fn entities(message: &Message) -> Vec<Entity> {
    let (text, raw) = match (message.text(), message.entities()) {
        (Some(text), Some(raw)) => (text, raw),
        _ => match (message.caption(), message.caption_entities()) {
            (Some(text), Some(raw)) => (text, raw),
            _ => return Vec::new(),
        },
    };
    let units: Vec<u16> = text.encode_utf16().collect();
    let cover = |e: &teloxide_core::types::MessageEntity| {
        let covered = units.get(e.offset..e.offset.checked_add(e.length)?)?;
        Some(Entity {
            kind: e.kind.clone(),
            text: String::from_utf16(covered).ok()?,
            offset: e.offset,
        })
    };
    raw.iter().filter_map(cover).collect()
}

/// Remove every case-insensitive occurrence of `@handle` (as a whole word) from `text`,
/// keeping line breaks (the rest may be code or a list).
fn remove_handle(text: &str, handle: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = find_ignore_ascii_case(rest, handle) {
        let end = start + handle.len();
        let whole_word = rest[end..]
            .chars()
            .next()
            .is_none_or(|c| !(c.is_alphanumeric() || c == '_'));
        out.push_str(&rest[..start]);
        if whole_word {
            rest = &rest[end..];
            // Drop one space so "ask @bot now" becomes "ask now", not "ask  now".
            if rest.starts_with(' ') && (out.is_empty() || out.ends_with(' ')) {
                rest = &rest[1..];
            }
        } else {
            out.push_str(&rest[start..end]);
            rest = &rest[end..];
        }
    }
    out.push_str(rest);
    out.trim().to_owned()
}

fn find_ignore_ascii_case(haystack: &str, needle: &str) -> Option<usize> {
    let (h, n) = (haystack.as_bytes(), needle.as_bytes());
    (0..=h.len().checked_sub(n.len())?).find(|&i| h[i..i + n.len()].eq_ignore_ascii_case(n))
}

fn replies_to_bot(message: &Message, me: &BotIdentity) -> bool {
    message
        .reply_to_message()
        .and_then(|r| r.from.as_ref())
        .is_some_and(|u| u.id.0 == me.id)
}

fn topic(message: &Message) -> Option<String> {
    message
        .is_topic_message
        .then(|| message.thread_id.map(|t| t.0.0.to_string()))
        .flatten()
}

fn chat_ref(chat: &Chat, thread_id: Option<String>) -> ChatRef {
    let kind = if chat.is_private() {
        ChatKind::Direct
    } else if chat.is_channel() {
        ChatKind::Channel
    } else {
        ChatKind::Group
    };
    ChatRef {
        platform: Platform::Telegram,
        account: None,
        chat_id: chat.id.0.to_string(),
        thread_id,
        kind,
    }
}

fn author(user: &User) -> Author {
    let mut name = user.first_name.clone();
    if let Some(last) = &user.last_name {
        name.push(' ');
        name.push_str(last);
    }
    Author {
        user_id: user.id.0.to_string(),
        display_name: name,
        username: user.username.clone(),
        is_bot: user.is_bot,
    }
}

/// The largest a bot may download through the public Bot API's `getFile`.
const PUBLIC_API_FILE_LIMIT: u32 = 20 * 1024 * 1024;

/// The files a message carries, to fetch on demand by their `file_id`: the largest size of
/// a photo the Bot API will serve, documents (images among them, by their MIME type), voice
/// notes, audio and video.
fn attachments(media: &MediaKind) -> Vec<Attachment> {
    let file = |kind, meta: &FileMeta, mime: Option<String>, name: Option<String>| Attachment {
        kind,
        mime,
        name,
        size: Some(u64::from(meta.size)).filter(|&s| s > 0),
        handle: meta.id.0.clone(),
    };
    match media {
        MediaKind::Photo(p) => {
            let servable = p
                .photo
                .iter()
                .filter(|s| s.file.size <= PUBLIC_API_FILE_LIMIT);
            let largest = servable
                .max_by_key(|s| (s.width * s.height, s.file.size))
                .or_else(|| p.photo.iter().min_by_key(|s| s.file.size));
            largest
                .map(|s| file(MediaKind_::Image, &s.file, Some("image/jpeg".into()), None))
                .into_iter()
                .collect()
        }
        MediaKind::Document(d) => {
            let mime = mime(&d.document.mime_type);
            let kind = match &mime {
                Some(m) if m.starts_with("image/") => MediaKind_::Image,
                _ => MediaKind_::Document,
            };
            vec![file(
                kind,
                &d.document.file,
                mime,
                d.document.file_name.clone(),
            )]
        }
        MediaKind::Voice(v) => vec![file(
            MediaKind_::Voice,
            &v.voice.file,
            mime(&v.voice.mime_type).or(Some("audio/ogg".into())),
            None,
        )],
        MediaKind::Audio(a) => vec![file(
            MediaKind_::Audio,
            &a.audio.file,
            mime(&a.audio.mime_type),
            a.audio.file_name.clone(),
        )],
        MediaKind::Video(v) => vec![file(
            MediaKind_::Video,
            &v.video.file,
            mime(&v.video.mime_type),
            v.video.file_name.clone(),
        )],
        _ => Vec::new(),
    }
}

fn mime<M: ToString>(m: &Option<M>) -> Option<String> {
    m.as_ref().map(ToString::to_string)
}

fn describe_media(media: &MediaKind) -> String {
    match media {
        MediaKind::Photo(_) => "a photo without a caption",
        MediaKind::Sticker(_) => "a sticker",
        MediaKind::Voice(_) => "a voice message",
        MediaKind::Audio(_) => "an audio file",
        MediaKind::Video(_) | MediaKind::VideoNote(_) => "a video",
        MediaKind::Document(_) => "a file",
        MediaKind::Animation(_) => "an animation",
        MediaKind::Location(_) | MediaKind::Venue(_) => "a location",
        MediaKind::Contact(_) => "a contact",
        MediaKind::Poll(_) => "a poll",
        _ => "a kind of message",
    }
    .to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn me() -> BotIdentity {
        BotIdentity {
            id: 999,
            username: "hermes_bot".into(),
        }
    }

    fn update(json: serde_json::Value) -> Update {
        // Parse from text as the client does: teloxide borrows keys while parsing.
        serde_json::from_str(&json.to_string()).expect("valid update")
    }

    fn message(chat: serde_json::Value, text: &str, entities: serde_json::Value) -> Update {
        update(serde_json::json!({
            "update_id": 5,
            "message": {
                "message_id": 10, "date": 0, "chat": chat, "text": text, "entities": entities,
                "from": {"id": 7, "is_bot": false, "first_name": "Ada", "last_name": "L", "username": "ada"}
            }
        }))
    }

    fn group() -> serde_json::Value {
        serde_json::json!({"id": -100, "type": "supergroup", "title": "G"})
    }

    fn as_message(event: Inbound) -> InboundMessage {
        match event.kind {
            InboundKind::Message(m) => m,
            other => panic!("expected a message, got {other:?}"),
        }
    }

    /// Found by fuzzing (`fuzz/regressions/telegram_update`): teloxide's own entity parser
    /// panics on each of these; the message is kept and the bad entity ignored.
    #[test]
    fn entities_outside_the_text_or_inside_a_character_are_skipped() {
        let cases = [
            (
                "😀 @hermes_bot",
                serde_json::json!([{"type": "mention", "offset": 1, "length": 2}]),
            ),
            (
                "@hermes_bot hi",
                serde_json::json!([{"type": "mention", "offset": 0, "length": 400}]),
            ),
            (
                "/start",
                serde_json::json!([{"type": "bot_command", "offset": usize::MAX, "length": 2}]),
            ),
        ];
        for (text, entities) in cases {
            let event = normalize(&message(group(), text, entities), &me()).unwrap();
            assert!(
                !as_message(event).addressed,
                "{text}: no valid entity addresses it"
            );
        }
        let fine = serde_json::json!([{"type": "mention", "offset": 3, "length": 11}]);
        let event = normalize(&message(group(), "😀 @hermes_bot", fine), &me()).unwrap();
        assert!(
            as_message(event).addressed,
            "a mention after an emoji still counts"
        );
    }

    #[test]
    fn a_private_message_is_addressed() {
        let event = normalize(
            &message(
                serde_json::json!({"id": 7, "type": "private", "first_name": "Ada"}),
                "hi",
                serde_json::json!([]),
            ),
            &me(),
        )
        .unwrap();
        assert_eq!(event.event_id, "telegram:999:5");
        assert_eq!(event.chat.kind, ChatKind::Direct);
        assert_eq!(event.author.display_name, "Ada L");
        let m = as_message(event);
        assert!(m.addressed);
        assert_eq!(m.text, "hi");
    }

    #[test]
    fn a_group_mention_is_addressed_and_stripped() {
        let text = "@Hermes_Bot what is 2+2?";
        let event = normalize(
            &message(
                group(),
                text,
                serde_json::json!([{"type": "mention", "offset": 0, "length": 11}]),
            ),
            &me(),
        )
        .unwrap();
        assert_eq!(event.chat.kind, ChatKind::Group);
        let m = as_message(event);
        assert!(m.addressed);
        assert_eq!(m.text, "what is 2+2?");
    }

    #[test]
    fn group_chatter_and_commands_for_other_bots_are_not_addressed() {
        let plain =
            normalize(&message(group(), "hello all", serde_json::json!([])), &me()).unwrap();
        assert!(!as_message(plain).addressed);
        let other = normalize(
            &message(
                group(),
                "/help@other_bot",
                serde_json::json!([{"type": "bot_command", "offset": 0, "length": 15}]),
            ),
            &me(),
        )
        .unwrap();
        assert!(!as_message(other).addressed);
        let ours = normalize(
            &message(
                group(),
                "/stop@hermes_bot",
                serde_json::json!([{"type": "bot_command", "offset": 0, "length": 16}]),
            ),
            &me(),
        )
        .unwrap();
        let m = as_message(ours);
        assert!(m.addressed);
        assert_eq!(m.text, "/stop");
    }

    #[test]
    fn a_reply_to_the_bot_is_addressed() {
        let event = normalize(
            &update(serde_json::json!({
                "update_id": 6,
                "message": {
                    "message_id": 11, "date": 0, "chat": group(), "text": "and then?",
                    "from": {"id": 7, "is_bot": false, "first_name": "Ada"},
                    "reply_to_message": {
                        "message_id": 9, "date": 0, "chat": group(), "text": "earlier answer",
                        "from": {"id": 999, "is_bot": true, "first_name": "Hermes", "username": "hermes_bot"}
                    }
                }
            })),
            &me(),
        )
        .unwrap();
        let message = as_message(event);
        assert!(message.addressed);
        assert_eq!(message.reply_to.as_deref(), Some("9"));
    }

    #[test]
    fn files_become_attachments_and_the_largest_servable_photo_is_chosen() {
        let size = |id: &str, w: u32, bytes: u32| {
            serde_json::json!({"file_id": id, "file_unique_id": id, "file_size": bytes,
                               "width": w, "height": w})
        };
        let photo = normalize(
            &update(serde_json::json!({
                "update_id": 8,
                "message": {
                    "message_id": 13, "date": 0, "chat": {"id": 7, "type": "private", "first_name": "Ada"},
                    "from": {"id": 7, "is_bot": false, "first_name": "Ada"},
                    "photo": [size("small", 90, 1_000), size("large", 1280, 200_000),
                              size("huge", 4000, 30 * 1024 * 1024)]
                }
            })),
            &me(),
        )
        .unwrap();
        let message = as_message(photo);
        assert_eq!(message.unsupported, None);
        assert_eq!(message.attachments.len(), 1);
        assert_eq!(message.attachments[0].handle, "large");
        assert_eq!(message.attachments[0].kind, MediaKind_::Image);

        let document = normalize(
            &update(serde_json::json!({
                "update_id": 9,
                "message": {
                    "message_id": 14, "date": 0, "chat": {"id": 7, "type": "private", "first_name": "Ada"},
                    "from": {"id": 7, "is_bot": false, "first_name": "Ada"},
                    "caption": "the scan",
                    "document": {"file_id": "scan", "file_unique_id": "scan", "file_size": 5,
                                 "file_name": "scan.png", "mime_type": "image/png"}
                }
            })),
            &me(),
        )
        .unwrap();
        let message = as_message(document);
        assert_eq!(message.text, "the scan");
        let file = &message.attachments[0];
        assert_eq!(file.kind, MediaKind_::Image);
        assert_eq!(file.name.as_deref(), Some("scan.png"));
        assert_eq!(file.mime.as_deref(), Some("image/png"));
    }

    #[test]
    fn a_sticker_is_named_as_unsupported_and_bots_are_skipped() {
        let sticker = update(serde_json::json!({
            "update_id": 7,
            "message": {
                "message_id": 12, "date": 0, "chat": {"id": 7, "type": "private", "first_name": "Ada"},
                "from": {"id": 7, "is_bot": false, "first_name": "Ada"},
                "sticker": {"file_id": "f", "file_unique_id": "u", "type": "regular", "width": 1, "height": 1,
                            "is_animated": false, "is_video": false}
            }
        }));
        let m = as_message(normalize(&sticker, &me()).unwrap());
        assert_eq!(m.unsupported.as_deref(), Some("a sticker"));
        assert!(m.text.is_empty());

        let from_bot = update(serde_json::json!({
            "update_id": 8,
            "message": {"message_id": 1, "date": 0, "chat": group(), "text": "beep",
                        "from": {"id": 5, "is_bot": true, "first_name": "Other"}}
        }));
        assert!(normalize(&from_bot, &me()).is_none());
    }

    #[test]
    fn a_photo_caption_is_read_as_the_text() {
        let photo = update(serde_json::json!({
            "update_id": 11,
            "message": {
                "message_id": 13, "date": 0, "chat": {"id": 7, "type": "private", "first_name": "Ada"},
                "from": {"id": 7, "is_bot": false, "first_name": "Ada"},
                "photo": [{"file_id": "p", "file_unique_id": "u", "width": 1, "height": 1}],
                "caption": "what is in this picture?"
            }
        }));
        let m = as_message(normalize(&photo, &me()).unwrap());
        assert_eq!(m.text, "what is in this picture?");
        assert_eq!(m.unsupported, None);
    }

    #[test]
    fn a_button_press_carries_its_data_and_message() {
        let press = update(serde_json::json!({
            "update_id": 9,
            "callback_query": {
                "id": "cbq1", "chat_instance": "ci", "data": "appr:1:once",
                "from": {"id": 7, "is_bot": false, "first_name": "Ada"},
                "message": {"message_id": 44, "date": 0, "chat": {"id": 7, "type": "private", "first_name": "Ada"},
                            "text": "prompt", "from": {"id": 999, "is_bot": true, "first_name": "Hermes"}}
            }
        }));
        let event = normalize(&press, &me()).unwrap();
        assert_eq!(
            event.kind,
            InboundKind::Press(Press {
                press_id: "cbq1".into(),
                message_id: Some("44".into()),
                choice_id: "appr:1:once".into()
            })
        );
    }

    #[test]
    fn handles_are_removed_only_as_whole_words_and_lines_survive() {
        assert_eq!(
            remove_handle("@hermes_bot run\n  ls -la", "@hermes_bot"),
            "run\n  ls -la"
        );
        assert_eq!(
            remove_handle("ask @HERMES_BOT now", "@hermes_bot"),
            "ask now"
        );
        assert_eq!(
            remove_handle("ask @hermes_botany", "@hermes_bot"),
            "ask @hermes_botany"
        );
    }
}
