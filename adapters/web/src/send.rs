//! [`WebSender`]: the web chat's [`PlatformSender`]. A message becomes an event for the open
//! pages (the page renders the Markdown itself, safely); with no page open, a message or an
//! edit is refused as [`SendError::Unreachable`] and waits in the outbox until a page
//! connects, while a working indicator or a notice, which only matter now, are dropped.

use std::sync::{Arc, Mutex};

use hermes_adapter::{
    Attachment, Capabilities, ChoiceLimits, ChoiceStyle, CommandSpec, Delivered, FetchError,
    LengthUnit, MessageBody, Outbound, Platform, PlatformSender, RateLimit, SendError, SendOnce,
    WorkingIndicator, WorkingPhase, async_trait,
};
use serde_json::json;

use crate::files::Files;
use crate::hub::Hub;

/// The longest message one event carries, in characters (a page has no limit; long answers
/// are still cut where a reader would expect a new message).
pub const MAX_MESSAGE_LEN: usize = 16_000;

/// Sends to the open pages.
pub struct WebSender {
    hub: Arc<Hub>,
    files: Arc<Files>,
    capabilities: Capabilities,
    commands: Mutex<Vec<serde_json::Value>>,
}

impl WebSender {
    pub(crate) fn new(hub: Arc<Hub>, files: Arc<Files>) -> WebSender {
        WebSender {
            hub,
            files,
            capabilities: Capabilities {
                max_message_len: MAX_MESSAGE_LEN,
                length_unit: LengthUnit::Chars,
                choices: ChoiceLimits {
                    max: 8,
                    label_len: 80,
                },
                edits: true,
                working: Some(WorkingIndicator {
                    refresh: None,
                    needs_done: true,
                }),
                threads: false,
                // A page takes what comes; the budget only paces a streamed answer's edits.
                per_chat_rate: RateLimit {
                    per_second: 10.0,
                    burst: 20,
                },
                group_chat_rate: RateLimit {
                    per_second: 10.0,
                    burst: 20,
                },
                per_bot_rate: None,
            },
            commands: Mutex::new(Vec::new()),
        }
    }

    /// The commands the daemon registered, for the page's `/` menu.
    pub(crate) fn commands(&self) -> serde_json::Value {
        serde_json::Value::Array(
            self.commands
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone(),
        )
    }

    fn nobody() -> SendError {
        SendError::Unreachable("no web chat page is open".into())
    }

    /// Before a new message: what it was shown as, if an earlier attempt got it to the
    /// pages (its send-once key is known); [`SendError::Unreachable`] while no page is open.
    fn shown_before(&self, once: Option<&SendOnce>) -> Result<Option<Delivered>, SendError> {
        if let Some(shown) = once.and_then(|o| self.hub.shown_as(&o.key)) {
            return Ok(Some(Delivered {
                message_id: Some(shown),
            }));
        }
        if self.hub.pages() == 0 {
            return Err(Self::nobody());
        }
        Ok(None)
    }
}

fn markdown_of(body: &MessageBody) -> &str {
    body.markup.as_deref().unwrap_or(&body.plain)
}

fn style_name(style: ChoiceStyle) -> &'static str {
    match style {
        ChoiceStyle::Normal => "normal",
        ChoiceStyle::Primary => "primary",
        ChoiceStyle::Danger => "danger",
    }
}

#[async_trait]
impl PlatformSender for WebSender {
    fn platform(&self) -> Platform {
        Platform::Web
    }

    fn capabilities(&self) -> &Capabilities {
        &self.capabilities
    }

    fn render(&self, markdown: &str) -> Vec<MessageBody> {
        hermes_format::fit(markdown, MAX_MESSAGE_LEN, LengthUnit::Chars, |md| {
            md.to_owned()
        })
    }

    async fn send(&self, action: Outbound) -> Result<Delivered, SendError> {
        match action {
            Outbound::Text {
                chat,
                body,
                reply_to,
                choices,
                once,
            } => {
                if let Some(shown) = self.shown_before(once.as_ref())? {
                    return Ok(shown);
                }
                let id = self.hub.message_id();
                let choices: Vec<_> = choices
                    .iter()
                    .map(|c| json!({"id": c.id, "label": c.label, "style": style_name(c.style)}))
                    .collect();
                self.hub.publish(
                    &json!({"kind": "message", "chat": chat.chat_id, "id": id,
                        "markdown": markdown_of(&body), "reply_to": reply_to, "choices": choices}),
                    once.as_ref().map(|o| (o.key.as_str(), id.as_str())),
                    None,
                );
                Ok(Delivered {
                    message_id: Some(id),
                })
            }
            Outbound::Edit {
                chat,
                message_id,
                body,
            } => {
                if self.hub.pages() == 0 {
                    return Err(Self::nobody());
                }
                self.hub.publish(
                    &json!({"kind": "edit", "chat": chat.chat_id, "id": message_id,
                        "markdown": markdown_of(&body)}),
                    None,
                    Some(&message_id),
                );
                Ok(Delivered {
                    message_id: Some(message_id),
                })
            }
            Outbound::Working { chat, phase, .. } => {
                if self.hub.pages() > 0 && phase != WorkingPhase::Refresh {
                    self.hub.publish(
                        &json!({"kind": "working", "chat": chat.chat_id,
                            "on": phase == WorkingPhase::Start}),
                        None,
                        None,
                    );
                }
                Ok(Delivered::default())
            }
            Outbound::PressNotice { chat, text, .. } => {
                if self.hub.pages() > 0 {
                    self.hub.publish(
                        &json!({"kind": "notice", "chat": chat.chat_id, "text": text}),
                        None,
                        None,
                    );
                }
                Ok(Delivered::default())
            }
            Outbound::File {
                chat,
                file,
                reply_to,
                once,
            } => {
                if let Some(shown) = self.shown_before(once.as_ref())? {
                    return Ok(shown);
                }
                let kept = self
                    .files
                    .keep_outgoing(&file.path, &file.name, file.mime.as_deref())
                    .await
                    .map_err(|e| SendError::Rejected(format!("cannot read the file: {e}")))?;
                let id = self.hub.message_id();
                self.hub.publish(
                    &json!({"kind": "file", "chat": chat.chat_id, "id": id, "name": file.name,
                        "mime": kept.mime, "image": kept.inline_image, "url": kept.url,
                        "caption": file.caption, "reply_to": reply_to}),
                    once.as_ref().map(|o| (o.key.as_str(), id.as_str())),
                    None,
                );
                Ok(Delivered {
                    message_id: Some(id),
                })
            }
        }
    }

    async fn fetch_media(
        &self,
        attachment: &Attachment,
        max_bytes: u64,
    ) -> Result<Vec<u8>, FetchError> {
        self.files.read_upload(&attachment.handle, max_bytes).await
    }

    async fn register_commands(&self, commands: &[CommandSpec]) -> Result<(), SendError> {
        let listed = commands
            .iter()
            .map(|c| json!({"name": c.name, "description": c.description, "argument": c.argument}))
            .collect();
        *self.commands.lock().unwrap_or_else(|e| e.into_inner()) = listed;
        Ok(())
    }
}
