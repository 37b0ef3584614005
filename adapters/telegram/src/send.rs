//! Sending to Telegram: text (HTML with the plain fallback decided by the daemon), edits,
//! typing, button acknowledgements; Telegram's errors mapped onto [`SendError`].

use std::time::Duration;

use hermes_adapter::{
    Button, Capabilities, ChatRef, Delivered, LengthUnit, MarkupDialect, MessageBody, Outbound,
    Platform, PlatformSender, RateLimit, SendError, async_trait,
};
use teloxide_core::payloads::{
    AnswerCallbackQuerySetters, EditMessageTextSetters, SendChatActionSetters, SendMessageSetters,
};
use teloxide_core::prelude::*;
use teloxide_core::types::{
    CallbackQueryId, ChatAction, InlineKeyboardButton, InlineKeyboardMarkup, MessageId, ParseMode,
    ReplyParameters, ThreadId,
};
use teloxide_core::{ApiError, RequestError};

/// The sending half of the Telegram adapter.
pub struct TelegramSender {
    bot: Bot,
    capabilities: Capabilities,
}

impl TelegramSender {
    pub fn new(bot: Bot) -> Self {
        TelegramSender {
            bot,
            capabilities: Capabilities {
                max_message_len: 4096,
                length_unit: LengthUnit::Utf16,
                markup: MarkupDialect::TelegramHtml,
                buttons: true,
                edits: true,
                typing_refresh: Some(Duration::from_secs(4)),
                threads: true,
                // Telegram: about one message a second per chat with short bursts; twenty a
                // minute in groups.
                per_chat_rate: RateLimit {
                    per_second: 1.0,
                    burst: 3,
                },
                group_chat_rate: RateLimit {
                    per_second: 20.0 / 60.0,
                    burst: 3,
                },
            },
        }
    }
}

#[async_trait]
impl PlatformSender for TelegramSender {
    fn platform(&self) -> Platform {
        Platform::Telegram
    }

    fn capabilities(&self) -> &Capabilities {
        &self.capabilities
    }

    async fn send(&self, action: Outbound) -> Result<Delivered, SendError> {
        match action {
            Outbound::Text {
                chat,
                body,
                reply_to,
                buttons,
            } => {
                let (text, html) = pick(&body);
                let mut request = self.bot.send_message(chat_id(&chat)?, text);
                if html {
                    request = request.parse_mode(ParseMode::Html);
                }
                if let Some(id) = reply_to.as_deref().and_then(|r| r.parse().ok()) {
                    request = request.reply_parameters(
                        ReplyParameters::new(MessageId(id)).allow_sending_without_reply(),
                    );
                }
                if let Some(thread) = thread_id(&chat) {
                    request = request.message_thread_id(thread);
                }
                if !buttons.is_empty() {
                    request = request.reply_markup(keyboard(&buttons));
                }
                let sent = request.send().await.map_err(map_error)?;
                Ok(Delivered {
                    message_id: Some(sent.id.0.to_string()),
                })
            }
            Outbound::Edit {
                chat,
                message_id,
                body,
            } => {
                let id: i32 = message_id.parse().map_err(|_| {
                    SendError::Rejected(format!("bad Telegram message id {message_id:?}"))
                })?;
                let (text, html) = pick(&body);
                let mut request = self
                    .bot
                    .edit_message_text(chat_id(&chat)?, MessageId(id), text);
                if html {
                    request = request.parse_mode(ParseMode::Html);
                }
                match request.send().await {
                    Ok(_) | Err(RequestError::Api(ApiError::MessageNotModified)) => Ok(Delivered {
                        message_id: Some(message_id),
                    }),
                    Err(e) => Err(map_error(e)),
                }
            }
            Outbound::Typing { chat } => {
                let mut request = self
                    .bot
                    .send_chat_action(chat_id(&chat)?, ChatAction::Typing);
                if let Some(thread) = thread_id(&chat) {
                    request = request.message_thread_id(thread);
                }
                request.send().await.map_err(map_error)?;
                Ok(Delivered::default())
            }
            Outbound::AnswerButton {
                press_id, notice, ..
            } => {
                let mut request = self.bot.answer_callback_query(CallbackQueryId(press_id));
                if let Some(notice) = notice {
                    request = request.text(notice);
                }
                request.send().await.map_err(map_error)?;
                Ok(Delivered::default())
            }
        }
    }
}

/// The text to send and whether it is HTML.
fn pick(body: &MessageBody) -> (String, bool) {
    match &body.markup {
        Some(html) => (html.clone(), true),
        None => (body.plain.clone(), false),
    }
}

fn chat_id(chat: &ChatRef) -> Result<ChatId, SendError> {
    chat.chat_id
        .parse()
        .map(ChatId)
        .map_err(|_| SendError::Rejected(format!("bad Telegram chat id {:?}", chat.chat_id)))
}

fn thread_id(chat: &ChatRef) -> Option<ThreadId> {
    chat.thread_id
        .as_deref()?
        .parse()
        .ok()
        .map(|t| ThreadId(MessageId(t)))
}

/// Two buttons a row.
fn keyboard(buttons: &[Button]) -> InlineKeyboardMarkup {
    InlineKeyboardMarkup::new(buttons.chunks(2).map(|row| {
        row.iter()
            .map(|b| InlineKeyboardButton::callback(b.label.clone(), b.data.clone()))
            .collect::<Vec<_>>()
    }))
}

fn map_error(error: RequestError) -> SendError {
    match error {
        RequestError::RetryAfter(wait) => SendError::RateLimited {
            retry_after: wait.duration(),
        },
        RequestError::Api(ApiError::CantParseEntities(why)) => SendError::MarkupRejected(why),
        RequestError::Api(ApiError::Unknown(text)) if looks_transient(&text) => {
            SendError::Transient(text)
        }
        RequestError::Api(api) => SendError::Rejected(api.to_string()),
        RequestError::MigrateToChatId(to) => {
            SendError::Rejected(format!("the group moved to chat {to}"))
        }
        RequestError::Network(e) => SendError::Transient(e.to_string()),
        RequestError::InvalidJson { source, .. } => {
            SendError::Transient(format!("unreadable answer: {source}"))
        }
        RequestError::Io(e) => SendError::Transient(e.to_string()),
    }
}

fn looks_transient(text: &str) -> bool {
    let lower = text.to_ascii_lowercase();
    [
        "internal server error",
        "bad gateway",
        "gateway timeout",
        "service unavailable",
        "too many requests",
    ]
    .iter()
    .any(|needle| lower.contains(needle))
}
