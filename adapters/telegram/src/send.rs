//! Sending to Telegram: rendering (HTML, chunked on the rendered length), text with the
//! choices laid out as an inline keyboard, edits, the typing indicator, notices for a press
//! the receive loop still holds open, the command menu; Telegram's errors mapped onto
//! [`SendError`].

use std::time::Duration;

use hermes_adapter::{
    Attachment, Capabilities, ChatRef, Choice, ChoiceLimits, CommandSpec, Delivered, FetchError,
    LengthUnit, MessageBody, Outbound, OutboundFile, Platform, PlatformSender, RateLimit,
    RateScope, SendError, WorkingIndicator, WorkingPhase, async_trait, copy_capped,
};
use teloxide_core::payloads::{
    EditMessageTextSetters, SendAudioSetters, SendChatActionSetters, SendDocumentSetters,
    SendMessageSetters, SendPhotoSetters, SendVoiceSetters,
};
use teloxide_core::prelude::*;
use teloxide_core::types::{
    BotCommand, ChatAction, FileId, InlineKeyboardButton, InlineKeyboardMarkup, InputFile,
    MessageId, ParseMode, ReplyParameters, ThreadId,
};
use teloxide_core::{ApiError, RequestError};

use crate::html;
use crate::press::OpenPresses;
use crate::settings::FileLimits;

/// Telegram's limit, in UTF-16 code units of the rendered text.
const MAX_MESSAGE_LEN: usize = 4096;

/// The sending half of the Telegram adapter.
pub struct TelegramSender {
    bot: Bot,
    files: Files,
    capabilities: Capabilities,
    presses: OpenPresses,
}

/// How files move: the bot with a client for files (longer timeouts), the same bot at the
/// root files are downloaded from, and what the Bot API in use allows.
pub(crate) struct Files {
    pub(crate) bot: Bot,
    pub(crate) downloads: Bot,
    pub(crate) limits: FileLimits,
}

impl TelegramSender {
    pub(crate) fn new(bot: Bot, files: Files, presses: OpenPresses) -> Self {
        TelegramSender {
            bot,
            files,
            presses,
            capabilities: Capabilities {
                max_message_len: MAX_MESSAGE_LEN,
                length_unit: LengthUnit::Utf16,
                choices: ChoiceLimits {
                    max: 8,
                    label_len: 64,
                },
                edits: true,
                working: Some(WorkingIndicator {
                    refresh: Some(Duration::from_secs(4)),
                    needs_done: false,
                }),
                threads: true,
                // Telegram: about one message a second per chat with short bursts; twenty a
                // minute in groups; about thirty a second for the whole bot.
                per_chat_rate: RateLimit {
                    per_second: 1.0,
                    burst: 3,
                },
                group_chat_rate: RateLimit {
                    per_second: 20.0 / 60.0,
                    burst: 3,
                },
                per_bot_rate: Some(RateLimit {
                    per_second: 30.0,
                    burst: 30,
                }),
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

    fn render(&self, markdown: &str) -> Vec<MessageBody> {
        hermes_format::fit(markdown, MAX_MESSAGE_LEN, LengthUnit::Utf16, html::render)
    }

    async fn send(&self, action: Outbound) -> Result<Delivered, SendError> {
        match action {
            Outbound::Text {
                chat,
                body,
                reply_to,
                choices,
                // Telegram has neither an idempotency key nor a way to list the bot's own messages:
                // a message resent after a crash may show twice (invariant 2).
                once: _,
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
                if !choices.is_empty() {
                    request = request.reply_markup(self.keyboard(&choices));
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
            // Typing fades by itself after five seconds or with the next message.
            Outbound::Working {
                phase: WorkingPhase::Done(_),
                ..
            } => Ok(Delivered::default()),
            Outbound::Working { chat, .. } => {
                let mut request = self
                    .bot
                    .send_chat_action(chat_id(&chat)?, ChatAction::Typing);
                if let Some(thread) = thread_id(&chat) {
                    request = request.message_thread_id(thread);
                }
                request.send().await.map_err(map_error)?;
                Ok(Delivered::default())
            }
            Outbound::PressNotice { press_id, text, .. } => {
                if !self.presses.answer_with(&press_id, text) {
                    tracing::debug!(
                        press = %press_id,
                        "telegram: the press was answered already; its notice is dropped"
                    );
                }
                Ok(Delivered::default())
            }
            Outbound::File {
                chat,
                file,
                reply_to,
                ..
            } => self.send_file(&chat, &file, reply_to.as_deref()).await,
        }
    }

    /// `getFile`, then the download, stopped as soon as it passes `max_bytes`.
    async fn fetch_media(
        &self,
        attachment: &Attachment,
        max_bytes: u64,
    ) -> Result<Vec<u8>, FetchError> {
        let mut bytes = Vec::new();
        self.fetch_media_to(attachment, max_bytes, &mut bytes)
            .await?;
        Ok(bytes)
    }

    fn large_downloads(&self) -> Option<u64> {
        let limits = self.files.limits;
        (limits != FileLimits::PUBLIC).then_some(limits.download_max)
    }

    /// `getFile`, then the download (or, in local mode, the server's file read from disk)
    /// written to `out`, stopped as soon as it passes `max_bytes`.
    async fn fetch_media_to(
        &self,
        attachment: &Attachment,
        max_bytes: u64,
        out: &mut (dyn tokio::io::AsyncWrite + Unpin + Send),
    ) -> Result<u64, FetchError> {
        use teloxide_core::net::Download;

        let max_bytes = max_bytes.min(self.files.limits.download_max);
        if let Some(size) = attachment.size.filter(|&s| s > max_bytes) {
            return Err(FetchError::TooLarge {
                size,
                max: max_bytes,
            });
        }
        let file = self
            .files
            .bot
            .get_file(FileId(attachment.handle.clone()))
            .send()
            .await
            .map_err(|e| match e {
                // Telegram's own API past 20 MB (a `base_url` that is not a local server).
                RequestError::Api(ApiError::Unknown(why)) if why.contains("file is too big") => {
                    FetchError::TooLarge {
                        size: attachment.size.unwrap_or(0),
                        max: FileLimits::PUBLIC.download_max,
                    }
                }
                e => FetchError::Failed(map_error(e)),
            })?;
        let declared = Some(u64::from(file.meta.size)).filter(|&s| s > 0);
        if self.files.limits.local_mode {
            return copy_local(&file.path, declared, max_bytes, out).await;
        }
        // The URL names the token: keep it out of the error.
        copy_capped(
            self.files.downloads.download_file_stream(&file.path),
            declared,
            max_bytes,
            out,
            |e| SendError::Transient(format!("the download failed: {}", e.without_url())),
        )
        .await
    }

    async fn register_commands(&self, commands: &[CommandSpec]) -> Result<(), SendError> {
        let menu: Vec<BotCommand> = commands
            .iter()
            .map(|c| BotCommand::new(c.name, c.description))
            .collect();
        self.bot
            .set_my_commands(menu)
            .send()
            .await
            .map_err(map_error)?;
        Ok(())
    }
}

impl TelegramSender {
    /// A file as what it is: images as photos, `.ogg`/`.opus` as voice, other audio as
    /// audio, the rest as documents.
    async fn send_file(
        &self,
        chat: &ChatRef,
        file: &OutboundFile,
        reply_to: Option<&str>,
    ) -> Result<Delivered, SendError> {
        if !file.path.is_file() {
            // Gone since it was queued: retrying would not bring it back.
            return Err(SendError::Rejected(format!(
                "{} is no longer there",
                file.name
            )));
        }
        let size = std::fs::metadata(&file.path).map(|m| m.len()).unwrap_or(0);
        let max = self.files.limits.upload_max;
        if size > max {
            return Err(SendError::Rejected(format!(
                "it is {} MB, and {} takes files up to {} MB from a bot",
                size.div_ceil(1024 * 1024),
                if self.files.limits == FileLimits::PUBLIC {
                    "Telegram"
                } else {
                    "the local Bot API server"
                },
                max / (1024 * 1024)
            )));
        }
        let chat_id = chat_id(chat)?;
        let input = || InputFile::file(file.path.clone()).file_name(file.name.clone());
        let reply = reply_to
            .and_then(|r| r.parse().ok())
            .map(|id| ReplyParameters::new(MessageId(id)).allow_sending_without_reply());
        let thread = thread_id(chat);
        let caption = file.caption.clone();
        macro_rules! send_as {
            ($method:ident) => {{
                let mut request = self.files.bot.$method(chat_id, input());
                if let Some(caption) = caption.clone() {
                    request = request.caption(caption);
                }
                if let Some(reply) = reply.clone() {
                    request = request.reply_parameters(reply);
                }
                if let Some(thread) = thread {
                    request = request.message_thread_id(thread);
                }
                request.send().await.map_err(map_error)
            }};
        }
        let sent = match FileKind::of(file) {
            // A picture Telegram will not take as a photo (its size, its proportions) goes
            // as a document, as in Hermes; anything else that failed is not retried here.
            FileKind::Photo => match send_as!(send_photo) {
                Err(SendError::Rejected(why)) => {
                    tracing::info!(file = %file.name, why = %why, "telegram: the photo was refused; sending it as a document");
                    send_as!(send_document)
                }
                sent => sent,
            },
            FileKind::Voice => send_as!(send_voice),
            FileKind::Audio => send_as!(send_audio),
            FileKind::Document => send_as!(send_document),
        }?;
        Ok(Delivered {
            message_id: Some(sent.id.0.to_string()),
        })
    }

    /// Two choices a row.
    fn keyboard(&self, choices: &[Choice]) -> InlineKeyboardMarkup {
        let limit = self.capabilities.choices.label_len;
        InlineKeyboardMarkup::new(choices.chunks(2).map(|row| {
            row.iter()
                .map(|c| {
                    let label = c.label_within(limit).unwrap_or(&c.label);
                    InlineKeyboardButton::callback(label.to_owned(), c.id.clone())
                })
                .collect::<Vec<_>>()
        }))
    }
}

/// How Telegram shows a file.
enum FileKind {
    Photo,
    Voice,
    Audio,
    Document,
}

impl FileKind {
    fn of(file: &OutboundFile) -> FileKind {
        // Marked a voice message by the gateway: Ogg/Opus, checked (`sendVoice`).
        if file.voice {
            return FileKind::Voice;
        }
        let extension = std::path::Path::new(&file.name)
            .extension()
            .and_then(|e| e.to_str())
            .map(str::to_ascii_lowercase)
            .unwrap_or_default();
        match extension.as_str() {
            "png" | "jpg" | "jpeg" | "gif" | "webp" => FileKind::Photo,
            "ogg" | "opus" => FileKind::Voice,
            "mp3" | "m4a" | "wav" | "flac" | "aac" => FileKind::Audio,
            _ => FileKind::Document,
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

pub(crate) fn chat_id(chat: &ChatRef) -> Result<ChatId, SendError> {
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

pub(crate) fn map_error(error: RequestError) -> SendError {
    match error {
        RequestError::RetryAfter(wait) => SendError::RateLimited {
            retry_after: wait.duration(),
            scope: RateScope::Chat,
        },
        RequestError::Api(ApiError::CantParseEntities(why)) => SendError::MarkupRejected(why),
        RequestError::Api(ApiError::InvalidToken) => {
            SendError::Unauthorized("Telegram refused the bot token".into())
        }
        RequestError::Api(e @ (ApiError::MessageIsTooLong | ApiError::EditedMessageIsTooLong)) => {
            SendError::TooLong(e.to_string())
        }
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

/// Files of the gateway's and Hermes' own that a local Bot API server never names.
const SECRET_NAMES: &[&str] = &[
    ".env",
    "config.yaml",
    "state.key",
    "auth.json",
    "web-token",
    ".anthropic_oauth.json",
    "honcho.json",
];

/// A local Bot API server's file (`--local`: `getFile` names a path on its disk) copied
/// to `out`, refusing more than `max_bytes`. Only an absolute path without `..` is read:
/// the server names its own files, nothing else.
async fn copy_local(
    path: &str,
    declared: Option<u64>,
    max_bytes: u64,
    out: &mut (dyn tokio::io::AsyncWrite + Unpin + Send),
) -> Result<u64, FetchError> {
    let path = std::path::Path::new(path);
    let plain = path.is_absolute()
        && path
            .components()
            .all(|c| !matches!(c, std::path::Component::ParentDir));
    // A server that names a gateway's own file, a key, or the kernel's files is not
    // believed: the path is judged where it really leads too.
    let real = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let secret = [path, real.as_path()].iter().any(|p| {
        let name = p.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        SECRET_NAMES.contains(&name)
            || name.starts_with("gateway.db")
            || name.starts_with("state.db")
            || p.components()
                .any(|c| c.as_os_str() == ".ssh" || c.as_os_str() == ".hermes")
            || ["/proc", "/sys", "/dev"].iter().any(|k| p.starts_with(k))
    });
    if !plain || secret {
        return Err(FetchError::Failed(SendError::Rejected(format!(
            "the local Bot API server named {path:?}, which is not a path of its files (is `local_mode` right?)"
        ))));
    }
    let file = tokio::fs::File::open(&real).await.map_err(|e| {
        SendError::Rejected(format!(
            "the local Bot API server's file could not be read ({e}); local mode needs its files on this machine"
        ))
    })?;
    let on_disk = file.metadata().await.map(|m| m.len()).ok();
    copy_capped(
        tokio_util::io::ReaderStream::new(file),
        on_disk.or(declared),
        max_bytes,
        out,
        |e| SendError::Transient(format!("reading the file failed: {e}")),
    )
    .await
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

#[cfg(test)]
mod tests {
    use super::*;

    fn sender(limits: FileLimits) -> TelegramSender {
        let bot = Bot::new("123:TEST").set_api_url("http://127.0.0.1:9".parse().unwrap());
        let files = Files {
            bot: bot.clone(),
            downloads: bot.clone(),
            limits,
        };
        TelegramSender::new(bot, files, OpenPresses::default())
    }

    fn file_of(dir: &std::path::Path, size: u64) -> OutboundFile {
        let path = dir.join("dump.bin");
        // Sparse: the size without the bytes.
        std::fs::File::create(&path).unwrap().set_len(size).unwrap();
        OutboundFile {
            path,
            name: "dump.bin".into(),
            mime: None,
            caption: None,
            voice: false,
        }
    }

    #[tokio::test]
    async fn a_file_past_the_bot_apis_upload_limit_is_refused_before_sending() {
        let dir = tempfile::tempdir().unwrap();
        let chat = ChatRef {
            platform: Platform::Telegram,
            account: None,
            chat_id: "1".into(),
            thread_id: None,
            kind: hermes_adapter::ChatKind::Direct,
        };
        let public = sender(FileLimits::PUBLIC);
        let big = file_of(dir.path(), 51 * 1024 * 1024);
        let refused = public.send_file(&chat, &big, None).await;
        let Err(SendError::Rejected(why)) = refused else {
            panic!("{refused:?}")
        };
        assert!(
            why.contains("it is 51 MB, and Telegram takes files up to 50 MB"),
            "{why}"
        );
        // A local server takes it: the upload is tried (and fails: nothing listens).
        let local = sender(FileLimits::local(false));
        let tried = local.send_file(&chat, &big, None).await;
        assert!(
            !matches!(&tried, Err(SendError::Rejected(why)) if why.contains("takes files")),
            "{tried:?}"
        );
    }
}
