//! People's side: what they send (texts, replies, media, locations, stickers, contact
//! cards, reactions, button and list replies, several people at once) and what Meta
//! reports about the bot's messages (statuses), each built as Meta's webhook payload and
//! queued for delivery in order. Each message gets a new wamid, a timestamp (now unless
//! told) that opens the sender's 24-hour window, and its media served by id.

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::webhook::{ChangeOf, notification, status_object, statuses_body};
use super::{FakeWhatsApp, Inner, Outgoing, unix_now};

/// Person `n` (1, 2, …) as WhatsApp names them: their `wa_id`, `1555000000n`.
pub fn person(n: u32) -> String {
    format!("1555{n:07}")
}

/// The profile name of `wa_id`: "Person n" for the fake's people.
fn profile_name(wa_id: &str) -> String {
    let n = wa_id
        .strip_prefix("1555")
        .and_then(|n| n.parse::<u32>().ok());
    n.map_or_else(|| format!("Someone {wa_id}"), |n| format!("Person {n}"))
}

fn contact(wa_id: &str) -> Value {
    json!({"profile": {"name": profile_name(wa_id)}, "wa_id": wa_id})
}

/// A message people send, before it has an id.
struct Draft {
    from: String,
    timestamp: u64,
    /// `type` and the fields beside it (`text`, `image`, `context`, …).
    kind: &'static str,
    fields: Value,
}

fn draft(from: &str, kind: &'static str, fields: Value) -> Draft {
    Draft {
        from: from.to_owned(),
        timestamp: unix_now(),
        kind,
        fields,
    }
}

impl Inner {
    /// The message object of `draft`, with a new wamid; its sender's window opens.
    fn message_object(&mut self, draft: Draft) -> (String, Value) {
        let wamid = self.next_wamid(&draft.from);
        let mut message = json!({"from": draft.from, "id": wamid,
                                 "timestamp": draft.timestamp.to_string(), "type": draft.kind});
        for (key, value) in draft.fields.as_object().into_iter().flatten() {
            message[key] = value.clone();
        }
        let last = self.last_inbound.entry(draft.from).or_default();
        *last = (*last).max(draft.timestamp);
        (wamid, message)
    }

    /// Queue a notification of `entries` (each entry's changes, each change's messages).
    fn send_messages(&mut self, entries: Vec<Vec<Vec<Draft>>>) -> Vec<String> {
        let index = self.payloads.len();
        let mut wamids = Vec::new();
        let mut built = Vec::new();
        for changes in entries {
            let mut entry = Vec::new();
            for drafts in changes {
                let mut contacts: Vec<Value> = Vec::new();
                let mut messages = Vec::new();
                for draft in drafts {
                    let from = draft.from.clone();
                    if !contacts.iter().any(|c| c["wa_id"] == from.as_str()) {
                        contacts.push(contact(&from));
                    }
                    let (wamid, message) = self.message_object(draft);
                    self.inbound.insert(wamid.clone(), (from, index));
                    wamids.push(wamid);
                    messages.push(message);
                }
                entry.push(ChangeOf::Messages { contacts, messages });
            }
            built.push(entry);
        }
        let body = notification(&self.options, built);
        let outgoing = Outgoing {
            body: body.clone(),
            wamids: wamids.clone(),
        };
        self.payloads.push(outgoing);
        self.enqueue(body, wamids.clone());
        wamids
    }

    /// Queue one message; its wamid.
    fn send_one(&mut self, draft: Draft) -> String {
        let wamids = self.send_messages(vec![vec![vec![draft]]]);
        wamids.into_iter().next().unwrap_or_default()
    }

    /// Media people send: served by id; the fields a webhook gives it.
    fn inbound_media(&mut self, bytes: Vec<u8>, mime: &str) -> Value {
        use base64::Engine;
        let sha256 = base64::engine::general_purpose::STANDARD.encode(Sha256::digest(&bytes));
        let id = self.add_media(bytes, mime);
        json!({"mime_type": mime, "sha256": sha256, "id": id})
    }
}

/// What people do.
impl FakeWhatsApp {
    fn send(&self, draft: Draft) -> String {
        self.lock().send_one(draft)
    }

    /// `from` writes `body`; returns the message's wamid.
    pub fn text(&self, from: &str, body: &str) -> String {
        self.send(draft(from, "text", json!({"text": {"body": body}})))
    }

    /// A text written at `unix_secs` (an old message: the window counts from it).
    pub fn text_at(&self, from: &str, body: &str, unix_secs: u64) -> String {
        let mut message = draft(from, "text", json!({"text": {"body": body}}));
        message.timestamp = unix_secs;
        self.send(message)
    }

    /// A text quoting the bot's message `context_wamid` (swipe to reply).
    pub fn reply_text(&self, from: &str, body: &str, context_wamid: &str) -> String {
        let display = self.lock().options.display_phone_number.clone();
        let fields = json!({"context": {"from": display, "id": context_wamid},
                            "text": {"body": body}});
        self.send(draft(from, "text", fields))
    }

    /// A photo with an optional caption; its bytes are served by the id it carries.
    pub fn image(&self, from: &str, bytes: Vec<u8>, mime: &str, caption: Option<&str>) -> String {
        let mut inner = self.lock();
        let mut image = inner.inbound_media(bytes, mime);
        if let Some(caption) = caption {
            image["caption"] = json!(caption);
        }
        inner.send_one(draft(from, "image", json!({ "image": image })))
    }

    /// A voice note (Ogg Opus).
    pub fn voice(&self, from: &str, bytes: Vec<u8>) -> String {
        let mut inner = self.lock();
        let mut audio = inner.inbound_media(bytes, "audio/ogg; codecs=opus");
        audio["voice"] = json!(true);
        inner.send_one(draft(from, "audio", json!({ "audio": audio })))
    }

    /// A document with its file name and an optional caption.
    pub fn document(
        &self,
        from: &str,
        bytes: Vec<u8>,
        filename: &str,
        mime: &str,
        caption: Option<&str>,
    ) -> String {
        let mut inner = self.lock();
        let mut document = inner.inbound_media(bytes, mime);
        document["filename"] = json!(filename);
        if let Some(caption) = caption {
            document["caption"] = json!(caption);
        }
        inner.send_one(draft(from, "document", json!({ "document": document })))
    }

    /// A shared location.
    pub fn location(&self, from: &str) -> String {
        let location = json!({"latitude": 51.5007292, "longitude": -0.1246254,
                              "name": "Big Ben", "address": "London SW1A 0AA, UK"});
        self.send(draft(from, "location", json!({ "location": location })))
    }

    /// A (static WebP) sticker.
    pub fn sticker(&self, from: &str) -> String {
        let webp =
            b"RIFF\x1a\0\0\0WEBPVP8L\x0d\0\0\0\x2f\0\0\0\x10\x07\x10\x11\x11\x88\x88\xfe\x07\0"
                .to_vec();
        let mut inner = self.lock();
        let mut sticker = inner.inbound_media(webp, "image/webp");
        sticker["animated"] = json!(false);
        inner.send_one(draft(from, "sticker", json!({ "sticker": sticker })))
    }

    /// A shared contact card.
    pub fn contacts_card(&self, from: &str) -> String {
        let card = json!({"name": {"formatted_name": "Ada Lovelace", "first_name": "Ada",
                                   "last_name": "Lovelace"},
                          "phones": [{"phone": "+44 20 7946 0000", "type": "CELL",
                                      "wa_id": "442079460000"}]});
        self.send(draft(from, "contacts", json!({ "contacts": [card] })))
    }

    /// `from` reacts to message `wamid` with `emoji` (empty: the reaction is removed).
    pub fn reaction(&self, from: &str, wamid: &str, emoji: &str) -> String {
        let fields = json!({"reaction": {"message_id": wamid, "emoji": emoji}});
        self.send(draft(from, "reaction", fields))
    }

    /// `from` presses the reply button (`id`, `title`) of the bot's message `context_wamid`.
    pub fn button_reply(&self, from: &str, context_wamid: &str, id: &str, title: &str) -> String {
        let display = self.lock().options.display_phone_number.clone();
        let fields = json!({"context": {"from": display, "id": context_wamid},
            "interactive": {"type": "button_reply", "button_reply": {"id": id, "title": title}}});
        self.send(draft(from, "interactive", fields))
    }

    /// `from` chooses the row (`id`, `title`) of the bot's list message `context_wamid`.
    pub fn list_reply(&self, from: &str, context_wamid: &str, id: &str, title: &str) -> String {
        let display = self.lock().options.display_phone_number.clone();
        let fields = json!({"context": {"from": display, "id": context_wamid},
            "interactive": {"type": "list_reply", "list_reply": {"id": id, "title": title}}});
        self.send(draft(from, "interactive", fields))
    }

    /// Several people's texts in one POST, as Meta batches them: the first two messages in
    /// one change of the first entry, each further one in its own change of a second entry
    /// (so entries, changes and messages each come more than once with three or more).
    pub fn batch(&self, texts: &[(&str, &str)]) -> Vec<String> {
        let mut drafts = texts
            .iter()
            .map(|(from, body)| draft(from, "text", json!({"text": {"body": body}})));
        let first: Vec<Draft> = drafts.by_ref().take(2).collect();
        let rest: Vec<Vec<Draft>> = drafts.map(|d| vec![d]).collect();
        let mut entries = vec![vec![first]];
        if !rest.is_empty() {
            entries.push(rest);
        }
        self.lock().send_messages(entries)
    }

    /// The last payload people's messages came in, delivered again byte for byte.
    pub fn redeliver_last(&self) {
        let mut inner = self.lock();
        if let Some(last) = inner.payloads.last().cloned() {
            inner.enqueue(last.body, last.wamids);
        }
    }

    /// The payload that carried `wamid`, delivered again byte for byte.
    pub fn redeliver(&self, wamid: &str) {
        let mut inner = self.lock();
        let found = inner.inbound.get(wamid).map(|(_, index)| *index);
        let payload = found.and_then(|index| inner.payloads.get(index).cloned());
        let payload = payload.unwrap_or_else(|| panic!("no payload carried {wamid}"));
        inner.enqueue(payload.body, payload.wamids);
    }

    /// A status of the bot's message `wamid` (`sent`, `delivered`, `read`).
    pub fn status(&self, wamid: &str, status: &str) {
        let mut inner = self.lock();
        let recipient = recipient_of(&inner, wamid);
        let object = status_object(wamid, status, &recipient, None);
        let body = statuses_body(&inner.options, vec![object]);
        inner.enqueue(body, Vec::new());
    }

    /// A `failed` status of the bot's message `wamid` with Meta's error.
    pub fn failed_status(&self, wamid: &str, code: u32, title: &str, details: &str) {
        let mut inner = self.lock();
        let recipient = recipient_of(&inner, wamid);
        let errors = json!([{"code": code, "title": title, "message": title,
                             "error_data": {"details": details}}]);
        let object = status_object(wamid, "failed", &recipient, Some(errors));
        let body = statuses_body(&inner.options, vec![object]);
        inner.enqueue(body, Vec::new());
    }
}

/// The person the bot's message `wamid` went to.
fn recipient_of(inner: &Inner, wamid: &str) -> String {
    let sent = inner.sent.iter().find(|m| m.wamid == wamid);
    let sent = sent.unwrap_or_else(|| panic!("the bot sent no message {wamid}"));
    sent.chat.clone()
}
