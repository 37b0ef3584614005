//! [`WhatsAppSender`], the [`PlatformSender`]: text in parts of at most 4,096 characters,
//! approval prompts as up to three reply buttons, files uploaded to Meta then sent by media
//! id, the read receipt with the typing indicator, and media fetched by id. Before any
//! free-form message the contact's 24-hour window is checked: outside it nothing is sent
//! free-form, the re-engagement template goes out once (when one is configured), and the
//! lane holds the reply until the person writes again.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hermes_adapter::{
    Attachment, Capabilities, ChatRef, Choice, ChoiceLimits, Delivered, FetchError, LengthUnit,
    MessageBody, Outbound, OutboundFile, Platform, PlatformSender, RateLimit, SendError,
    WorkingIndicator, WorkingPhase, async_trait, is_handle,
};
use serde_json::{Value, json};

use crate::graph::Graph;
use crate::markdown;
use crate::settings::Template;
use crate::window::{Window, Windows, now_secs};

/// The longest text message Meta takes, in characters.
pub const MAX_MESSAGE_LEN: usize = 4096;
/// The longest body of a message with reply buttons.
const BUTTONS_BODY_LEN: usize = 1024;
/// Reply buttons per message, and the longest title.
const BUTTONS: ChoiceLimits = ChoiceLimits {
    max: 3,
    label_len: 20,
};
/// More choices than buttons go in an interactive list (Hermes does the same): its rows,
/// and the longest row title (the rest of a longer label is the row's description).
const LIST: ChoiceLimits = ChoiceLimits {
    max: 10,
    label_len: 24,
};
/// A row's description, at most.
const LIST_DESCRIPTION_LEN: usize = 72;
/// The list's button and its one section (Hermes' words).
const LIST_BUTTON: &str = "Choose";
const LIST_SECTION: &str = "Options";
/// The typing indicator fades after 25 s; shown again before that.
const TYPING_REFRESH: Duration = Duration::from_secs(20);
/// What sits above the buttons when the prompt itself went out as a text message first.
const BUTTONS_LEAD: &str = "Choose an answer:";
/// Long prompts whose text went out but whose buttons did not, remembered at most.
const PROMPT_TEXTS_KEPT: usize = 256;

/// Sends to WhatsApp through the Graph API.
pub struct WhatsAppSender {
    graph: Arc<Graph>,
    phone_number_id: String,
    windows: Arc<Windows>,
    template: Option<Template>,
    capabilities: Capabilities,
    /// A long prompt goes out as text and then its buttons; when the buttons failed, the
    /// retry must not send the text again. Keyed by chat and text.
    prompt_texts_sent: Mutex<HashMap<(String, String), String>>,
}

impl WhatsAppSender {
    pub fn new(
        graph: Arc<Graph>,
        phone_number_id: &str,
        windows: Arc<Windows>,
        template: Option<Template>,
    ) -> WhatsAppSender {
        WhatsAppSender {
            graph,
            phone_number_id: phone_number_id.to_owned(),
            windows,
            template,
            capabilities: Capabilities {
                max_message_len: MAX_MESSAGE_LEN,
                length_unit: LengthUnit::Chars,
                choices: LIST,
                edits: false,
                working: Some(WorkingIndicator {
                    refresh: Some(TYPING_REFRESH),
                    needs_done: false,
                }),
                threads: false,
                // Meta's pair rate: about one message every 6 s to the same person after
                // a burst (131056 beyond it).
                per_chat_rate: RateLimit {
                    per_second: 1.0 / 6.0,
                    burst: 20,
                },
                group_chat_rate: RateLimit {
                    per_second: 1.0 / 6.0,
                    burst: 20,
                },
                // Throughput: about 80 messages a second per business number.
                per_bot_rate: Some(RateLimit {
                    per_second: 80.0,
                    burst: 80,
                }),
            },
            prompt_texts_sent: Mutex::new(HashMap::new()),
        }
    }

    fn messages_path(&self) -> String {
        format!("{}/messages", self.phone_number_id)
    }

    /// POST one message to `to`; its wamid.
    async fn post_message(&self, to: &str, mut message: Value) -> Result<String, SendError> {
        message["messaging_product"] = json!("whatsapp");
        message["recipient_type"] = json!("individual");
        message["to"] = json!(to);
        let answer = self.graph.post(&self.messages_path(), &message).await;
        let answer = match answer {
            Ok(answer) => answer,
            Err(SendError::OutsideWindow(why)) => {
                self.windows.refused(to, now_secs()).await;
                return Err(self.held(to, why).await);
            }
            Err(e) => return Err(e),
        };
        let wamid = answer["messages"][0]["id"].as_str().ok_or_else(|| {
            SendError::Transient("the Graph API answered without a message id".into())
        })?;
        self.windows.sent(wamid, to, now_secs());
        Ok(wamid.to_owned())
    }

    /// Free-form messages may go to `to` now; else the reason, after the re-engagement
    /// template went out where it should.
    async fn check_window(&self, to: &str) -> Result<(), SendError> {
        match self.windows.state(to, now_secs()).await {
            Window::Open | Window::Unknown => Ok(()),
            Window::Closed { last } => {
                let why = match last {
                    Some(last) => format!(
                        "{to} last wrote {} hours ago, outside WhatsApp's 24-hour window",
                        now_secs().saturating_sub(last) / 3600
                    ),
                    None => format!("Meta says {to} is outside WhatsApp's 24-hour window"),
                };
                Err(self.held(to, why).await)
            }
        }
    }

    /// The error that holds a reply for `to`, after sending the re-engagement template
    /// once per closed window.
    async fn held(&self, to: &str, why: String) -> SendError {
        let Some(template) = &self.template else {
            return SendError::OutsideWindow(format!(
                "{why}; the reply waits until they write again (set WHATSAPP_CLOUD_REENGAGE_TEMPLATE to an approved template to ask them to)"
            ));
        };
        if !self.windows.take_reengagement(to, now_secs()).await {
            return SendError::OutsideWindow(format!(
                "{why}; the template {} went out already, and the reply waits until they write again",
                template.name
            ));
        }
        let message = json!({
            "messaging_product": "whatsapp",
            "recipient_type": "individual",
            "to": to,
            "type": "template",
            "template": {"name": template.name, "language": {"code": template.language}},
        });
        match self.graph.post(&self.messages_path(), &message).await {
            Ok(_) => {
                tracing::info!(to, template = %template.name, "whatsapp: sent the re-engagement template to reopen the 24-hour window");
                SendError::OutsideWindow(format!(
                    "{why}; sent the template {} and the reply waits until they write again",
                    template.name
                ))
            }
            Err(e) => {
                // Refused for good (not approved, a wrong name): not again for this closed
                // window. No answer: it may have gone; another try in an hour.
                if !matches!(e, SendError::Rejected(_) | SendError::Unauthorized(_)) {
                    self.windows.template_unsent(to, now_secs()).await;
                }
                tracing::error!(to, template = %template.name, error = %e, "whatsapp: the re-engagement template was refused");
                SendError::OutsideWindow(format!(
                    "{why}; the template {} was refused ({e}), and the reply waits until they write again",
                    template.name
                ))
            }
        }
    }

    async fn text(
        &self,
        chat: &ChatRef,
        body: &MessageBody,
        reply_to: Option<&str>,
        choices: &[Choice],
    ) -> Result<Delivered, SendError> {
        let to = chat.chat_id.as_str();
        self.check_window(to).await?;
        let text = body.markup.as_deref().unwrap_or(&body.plain);
        let context = reply_to
            .filter(|id| !is_handle(id) && !id.is_empty())
            .map(|id| json!({"message_id": id}));
        // Up to three short choices as reply buttons; more, or longer ones, as a list.
        let as_buttons: Option<Vec<Value>> = (choices.len() <= BUTTONS.max)
            .then(|| {
                choices
                    .iter()
                    .map(|choice| {
                        let title = choice.label_within(BUTTONS.label_len)?;
                        Some(json!({"type": "reply", "reply": {"id": choice.id, "title": title}}))
                    })
                    .collect()
            })
            .flatten();
        let rows: Vec<Value> = match &as_buttons {
            Some(_) => Vec::new(),
            None => choices.iter().take(LIST.max).map(list_row).collect(),
        };
        let buttons = as_buttons.unwrap_or_default();
        let mut message = if buttons.is_empty() && rows.is_empty() {
            json!({"type": "text", "text": {"body": text, "preview_url": false}})
        } else {
            // A prompt too long to sit above its choices goes first as a text of its own.
            let body_text = if text.chars().count() <= BUTTONS_BODY_LEN {
                text.to_owned()
            } else {
                self.send_prompt_text(to, text, context.clone()).await?;
                BUTTONS_LEAD.to_owned()
            };
            let (kind, action) = if rows.is_empty() {
                ("button", json!({"buttons": buttons}))
            } else {
                (
                    "list",
                    json!({"button": LIST_BUTTON, "sections": [{"title": LIST_SECTION, "rows": rows}]}),
                )
            };
            json!({"type": "interactive", "interactive": {
                "type": kind,
                "body": {"text": body_text},
                "action": action,
            }})
        };
        if let Some(context) = context {
            message["context"] = context;
        }
        let wamid = self.post_message(to, message).await?;
        if !buttons.is_empty() || !rows.is_empty() {
            self.prompt_texts_sent
                .lock()
                .expect("prompt lock")
                .remove(&(to.to_owned(), text.to_owned()));
        }
        Ok(Delivered {
            message_id: Some(wamid),
        })
    }

    /// A prompt too long for a message with buttons: its text first, once.
    async fn send_prompt_text(
        &self,
        to: &str,
        text: &str,
        context: Option<Value>,
    ) -> Result<(), SendError> {
        let key = (to.to_owned(), text.to_owned());
        if self
            .prompt_texts_sent
            .lock()
            .expect("prompt lock")
            .contains_key(&key)
        {
            return Ok(());
        }
        let mut message = json!({"type": "text", "text": {"body": text, "preview_url": false}});
        if let Some(context) = context {
            message["context"] = context;
        }
        let wamid = self.post_message(to, message).await?;
        let mut sent = self.prompt_texts_sent.lock().expect("prompt lock");
        if sent.len() >= PROMPT_TEXTS_KEPT {
            // Prompts given up long ago; at worst a retry shows a text twice.
            sent.clear();
        }
        sent.insert(key, wamid);
        Ok(())
    }

    /// The read receipt with the typing indicator, on the message being answered.
    async fn typing(&self, regarding: Option<&str>) -> Result<Delivered, SendError> {
        let Some(message_id) = regarding.filter(|id| !is_handle(id)) else {
            return Ok(Delivered::default());
        };
        let body = json!({
            "messaging_product": "whatsapp",
            "status": "read",
            "message_id": message_id,
            "typing_indicator": {"type": "text"},
        });
        self.graph.post(&self.messages_path(), &body).await?;
        Ok(Delivered::default())
    }

    async fn file(
        &self,
        chat: &ChatRef,
        file: &OutboundFile,
        reply_to: Option<&str>,
    ) -> Result<Delivered, SendError> {
        let to = chat.chat_id.as_str();
        self.check_window(to).await?;
        let mime = file
            .mime
            .clone()
            .unwrap_or_else(|| mime_by_name(&file.name).to_owned());
        let kind = media_type(&mime);
        let limit = size_limit(kind);
        let size = tokio::fs::metadata(&file.path)
            .await
            .map_err(|e| SendError::Rejected(format!("cannot read {}: {e}", file.name)))?
            .len();
        if size > limit {
            return Err(SendError::Rejected(format!(
                "{} is {} MB; WhatsApp takes {kind} files up to {} MB",
                file.name,
                size.div_ceil(1_000_000),
                limit / 1_000_000
            )));
        }
        let bytes = tokio::fs::read(&file.path)
            .await
            .map_err(|e| SendError::Rejected(format!("cannot read {}: {e}", file.name)))?;
        let part = reqwest::multipart::Part::bytes(bytes)
            .file_name(file.name.clone())
            .mime_str(&mime)
            .map_err(|e| SendError::Rejected(format!("bad MIME type {mime:?}: {e}")))?;
        let form = reqwest::multipart::Form::new()
            .text("messaging_product", "whatsapp")
            .text("type", mime.clone())
            .part("file", part);
        let uploaded = self
            .graph
            .post_form(&format!("{}/media", self.phone_number_id), form)
            .await?;
        let media_id = uploaded["id"]
            .as_str()
            .ok_or_else(|| SendError::Transient("the upload answered without a media id".into()))?;
        let mut media = json!({"id": media_id});
        if kind != "audio"
            && let Some(caption) = &file.caption
        {
            media["caption"] = json!(caption);
        }
        if kind == "document" {
            media["filename"] = json!(file.name);
        }
        // A voice message (Ogg/Opus, checked by the gateway): Meta's voice-note bubble.
        if kind == "audio" && file.voice {
            media["voice"] = json!(true);
        }
        let mut message = json!({"type": kind});
        message[kind] = media;
        if let Some(id) = reply_to.filter(|id| !is_handle(id)) {
            message["context"] = json!({"message_id": id});
        }
        let wamid = self.post_message(to, message).await?;
        Ok(Delivered {
            message_id: Some(wamid),
        })
    }
}

/// A choice as a list row: its label as the title when it fits in 24 characters; else its
/// short label (or the label cut) as the title and the whole label as the description.
fn list_row(choice: &Choice) -> Value {
    let full = choice.label.chars().count() <= LIST.label_len;
    let title: String = match (full, &choice.short_label) {
        (true, _) => choice.label.clone(),
        (false, Some(short)) if short.chars().count() <= LIST.label_len => short.clone(),
        _ => choice.label.chars().take(LIST.label_len).collect(),
    };
    let mut row = json!({"id": choice.id, "title": title});
    if !full {
        let description: String = choice.label.chars().take(LIST_DESCRIPTION_LEN).collect();
        row["description"] = json!(description);
    }
    row
}

/// A file's MIME type by its extension (Meta checks the type an upload declares).
fn mime_by_name(name: &str) -> &'static str {
    let extension = std::path::Path::new(name)
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase)
        .unwrap_or_default();
    match extension.as_str() {
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "webp" => "image/webp",
        "gif" => "image/gif",
        "ogg" | "opus" => "audio/ogg",
        "mp3" => "audio/mpeg",
        "m4a" => "audio/mp4",
        "aac" => "audio/aac",
        "amr" => "audio/amr",
        "mp4" => "video/mp4",
        "3gp" => "video/3gpp",
        "pdf" => "application/pdf",
        "txt" | "log" | "md" => "text/plain",
        "csv" => "text/csv",
        "json" => "application/json",
        "zip" => "application/zip",
        "doc" => "application/msword",
        "docx" => "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        "xls" => "application/vnd.ms-excel",
        "xlsx" => "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
        "ppt" => "application/vnd.ms-powerpoint",
        "pptx" => "application/vnd.openxmlformats-officedocument.presentationml.presentation",
        _ => "application/octet-stream",
    }
}

/// How Meta takes a file of `mime`: pictures it can show, audio, video, else a document.
fn media_type(mime: &str) -> &'static str {
    let mime = mime.to_ascii_lowercase();
    if matches!(mime.as_str(), "image/jpeg" | "image/png") {
        "image"
    } else if mime.starts_with("audio/") {
        "audio"
    } else if matches!(mime.as_str(), "video/mp4" | "video/3gpp") {
        "video"
    } else {
        "document"
    }
}

/// Meta's size limit for each kind, in bytes.
fn size_limit(kind: &str) -> u64 {
    match kind {
        "image" => 5_000_000,
        "audio" | "video" => 16_000_000,
        _ => 100_000_000,
    }
}

#[async_trait]
impl PlatformSender for WhatsAppSender {
    fn platform(&self) -> Platform {
        Platform::WhatsApp
    }

    fn capabilities(&self) -> &Capabilities {
        &self.capabilities
    }

    fn render(&self, markdown: &str) -> Vec<MessageBody> {
        hermes_format::fit(
            markdown,
            MAX_MESSAGE_LEN,
            LengthUnit::Chars,
            markdown::render,
        )
    }

    async fn send(&self, action: Outbound) -> Result<Delivered, SendError> {
        match action {
            Outbound::Text {
                chat,
                body,
                reply_to,
                choices,
                // The Cloud API has neither an idempotency key nor a way to list sent messages:
                // a message resent after a crash may show twice (invariant 2).
                once: _,
            } => self.text(&chat, &body, reply_to.as_deref(), &choices).await,
            Outbound::Edit { .. } => Err(SendError::Rejected(
                "WhatsApp messages cannot be edited".into(),
            )),
            Outbound::Working {
                regarding, phase, ..
            } => match phase {
                WorkingPhase::Start | WorkingPhase::Refresh => {
                    self.typing(regarding.as_deref()).await
                }
                WorkingPhase::Done(_) => Ok(Delivered::default()),
            },
            // A chat is one person: the notice is a message to them, quoting their press.
            Outbound::PressNotice {
                chat,
                press_id,
                text,
            } => {
                let body = MessageBody::plain(text);
                self.text(&chat, &body, Some(&press_id), &[]).await
            }
            Outbound::File {
                chat,
                file,
                reply_to,
                ..
            } => self.file(&chat, &file, reply_to.as_deref()).await,
        }
    }

    /// `GET /{media_id}` for the short-lived link and the size, then the bytes.
    async fn fetch_media(
        &self,
        attachment: &Attachment,
        max_bytes: u64,
    ) -> Result<Vec<u8>, FetchError> {
        let id = &attachment.handle;
        if id.is_empty()
            || !id
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        {
            return Err(FetchError::Failed(SendError::Rejected(format!(
                "{id:?} is not a media id"
            ))));
        }
        let info = self.graph.get(id).await?;
        let url = info["url"]
            .as_str()
            .ok_or_else(|| SendError::Rejected("Meta gave no link for the media".into()))?;
        let declared = info["file_size"]
            .as_u64()
            .or_else(|| info["file_size"].as_str().and_then(|s| s.parse().ok()));
        self.graph.download(url, declared, max_bytes).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_go_as_the_kind_meta_can_show() {
        assert_eq!(media_type("image/png"), "image");
        assert_eq!(media_type("image/webp"), "document");
        assert_eq!(media_type("audio/ogg"), "audio");
        assert_eq!(media_type("video/mp4"), "video");
        assert_eq!(media_type("application/pdf"), "document");
        assert_eq!(size_limit("image"), 5_000_000);
        assert_eq!(media_type(mime_by_name("chart.PNG")), "image");
        assert_eq!(media_type(mime_by_name("notes.txt")), "document");
    }
}
