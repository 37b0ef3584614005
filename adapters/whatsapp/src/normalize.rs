//! Meta's messages → the contract's [`Inbound`]s. Every Cloud API conversation is a direct
//! one between a person (`wa_id`) and the business number (the chat's account), so every
//! message is addressed to the bot. Reply-button presses become [`Press`]es; pictures,
//! voice notes, audio, video and documents become attachments fetched by media id; kinds
//! the gateway cannot read (stickers, locations, contact cards…) are named so the person
//! is told, and reactions are not messages to answer.

use hermes_adapter::{
    Attachment, Author, ChatKind, ChatRef, Inbound, InboundKind, InboundMessage, MediaKind,
    Platform, Press,
};

use crate::model::{Media, Message};

/// What a message becomes.
#[derive(Debug)]
pub enum Normalized {
    Event(Box<Inbound>),
    /// Not something to answer (a reaction, a system notice); why, for the log.
    Skipped(&'static str),
}

/// The inbox key of a message.
pub fn event_id(wamid: &str) -> String {
    format!("whatsapp:{wamid}")
}

/// The conversation with `wa_id` on business number `phone_number_id`.
pub fn chat(phone_number_id: &str, wa_id: &str) -> ChatRef {
    ChatRef {
        platform: Platform::WhatsApp,
        account: Some(phone_number_id.to_owned()),
        chat_id: wa_id.to_owned(),
        thread_id: None,
        kind: ChatKind::Direct,
    }
}

/// `message` from the person named `name` (their WhatsApp profile name, if Meta sent it).
pub fn message(phone_number_id: &str, message: &Message, name: Option<&str>) -> Normalized {
    let author = Author {
        user_id: message.from.clone(),
        display_name: name
            .filter(|n| !n.trim().is_empty())
            .unwrap_or(&message.from)
            .to_owned(),
        username: None,
        is_bot: false,
    };
    let reply_to = message
        .context
        .as_ref()
        .map(|c| c.id.clone())
        .filter(|id| !id.is_empty());
    let mut body = InboundMessage {
        message_id: message.id.clone(),
        addressed: true,
        reply_to: reply_to.clone(),
        ..Default::default()
    };
    match message.kind.as_str() {
        "text" => {
            body.text = message
                .text
                .as_ref()
                .map(|t| t.body.clone())
                .unwrap_or_default()
        }
        "button" => {
            body.text = message
                .button
                .as_ref()
                .map(|b| b.text.clone())
                .unwrap_or_default()
        }
        "image" | "audio" | "video" | "document" => {
            let media = match message.kind.as_str() {
                "image" => &message.image,
                "audio" => &message.audio,
                "video" => &message.video,
                _ => &message.document,
            };
            match media {
                Some(media) => {
                    body.text = media.caption.clone().unwrap_or_default();
                    body.attachments.push(attachment(&message.kind, media));
                }
                None => body.unsupported = Some(format!("a {} without its file", message.kind)),
            }
        }
        "interactive" => {
            let interactive = message.interactive.as_ref();
            let reply = interactive.and_then(|i| i.button_reply.as_ref().or(i.list_reply.as_ref()));
            match reply {
                Some(reply) => {
                    let press = Press {
                        press_id: message.id.clone(),
                        message_id: reply_to,
                        choice_id: reply.id.clone(),
                    };
                    return event(phone_number_id, message, author, InboundKind::Press(press));
                }
                None => body.unsupported = Some("a form reply".into()),
            }
        }
        "reaction" => return Normalized::Skipped("a reaction"),
        "system" => return Normalized::Skipped("a system notice (a number change)"),
        "request_welcome" => return Normalized::Skipped("a new chat opened"),
        "sticker" => body.unsupported = Some("a sticker".into()),
        "location" => body.unsupported = Some("a location".into()),
        "contacts" => body.unsupported = Some("a contact card".into()),
        "order" => body.unsupported = Some("an order".into()),
        "unsupported" | "unknown" | "" => {
            body.unsupported = Some("a kind of message WhatsApp does not pass on to bots".into())
        }
        other => body.unsupported = Some(format!("a {other} message")),
    }
    event(phone_number_id, message, author, InboundKind::Message(body))
}

fn event(
    phone_number_id: &str,
    message: &Message,
    author: Author,
    kind: InboundKind,
) -> Normalized {
    Normalized::Event(Box::new(Inbound {
        event_id: event_id(&message.id),
        chat: chat(phone_number_id, &message.from),
        author,
        kind,
    }))
}

fn attachment(kind: &str, media: &Media) -> Attachment {
    let kind = match kind {
        "image" => MediaKind::Image,
        "audio" if media.voice => MediaKind::Voice,
        // WhatsApp's own voice notes are Opus in Ogg even when the flag is missing.
        "audio"
            if media
                .mime_type
                .as_deref()
                .is_some_and(|m| m.contains("opus")) =>
        {
            MediaKind::Voice
        }
        "audio" => MediaKind::Audio,
        "video" => MediaKind::Video,
        _ => MediaKind::Document,
    };
    Attachment {
        kind,
        mime: media.mime_type.clone(),
        name: media.filename.clone(),
        size: None,
        handle: media.id.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(json: &str) -> Message {
        serde_json::from_str(json).unwrap()
    }

    fn inbound(n: Normalized) -> Inbound {
        match n {
            Normalized::Event(e) => *e,
            Normalized::Skipped(why) => panic!("skipped: {why}"),
        }
    }

    #[test]
    fn a_text_is_a_direct_addressed_message_from_its_author() {
        let m = parse(
            r#"{"from":"15551234567","id":"wamid.A","timestamp":"1","type":"text","text":{"body":"hi"},"context":{"from":"1555","id":"wamid.P"}}"#,
        );
        let e = inbound(message("100", &m, Some("Ada")));
        assert_eq!(e.event_id, "whatsapp:wamid.A");
        assert_eq!(e.chat.conversation(), "whatsapp:dm:100:15551234567");
        assert_eq!(e.author.display_name, "Ada");
        let InboundKind::Message(body) = e.kind else {
            panic!()
        };
        assert!(body.addressed);
        assert_eq!(
            (body.text.as_str(), body.reply_to.as_deref()),
            ("hi", Some("wamid.P"))
        );
    }

    #[test]
    fn media_presses_and_unreadable_kinds() {
        let voice = parse(
            r#"{"from":"1","id":"w1","type":"audio","audio":{"id":"M1","mime_type":"audio/ogg; codecs=opus","voice":true}}"#,
        );
        let InboundKind::Message(body) = inbound(message("100", &voice, None)).kind else {
            panic!()
        };
        assert_eq!(body.attachments[0].kind, MediaKind::Voice);
        assert_eq!(body.attachments[0].handle, "M1");

        let press = parse(
            r#"{"from":"1","id":"w2","type":"interactive","interactive":{"type":"button_reply","button_reply":{"id":"appr:3:o","title":"Allow once"}},"context":{"id":"wamid.prompt"}}"#,
        );
        let InboundKind::Press(p) = inbound(message("100", &press, None)).kind else {
            panic!()
        };
        assert_eq!(
            (p.choice_id.as_str(), p.message_id.as_deref()),
            ("appr:3:o", Some("wamid.prompt"))
        );

        let sticker = parse(r#"{"from":"1","id":"w3","type":"sticker","sticker":{"id":"S"}}"#);
        let InboundKind::Message(body) = inbound(message("100", &sticker, None)).kind else {
            panic!()
        };
        assert_eq!(body.unsupported.as_deref(), Some("a sticker"));

        let reaction = parse(
            r#"{"from":"1","id":"w4","type":"reaction","reaction":{"message_id":"x","emoji":"👍"}}"#,
        );
        assert!(matches!(
            message("100", &reaction, None),
            Normalized::Skipped(_)
        ));
    }
}
