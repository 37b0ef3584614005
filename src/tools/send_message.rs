//! `send_message {target, message}` (Hermes' names): text to another chat the bot can
//! reach (see [`super::destinations`]): a platform's home channel, or a chat it has talked
//! in; files go with it as `MEDIA:/path` tags in the message, checked as an answer's are.
//! It goes through the outbox like any answer (rendered for the platform, within its
//! limits and budgets, not lost in a restart).

use std::sync::Arc;

use futures_util::future::BoxFuture;
use schemars::JsonSchema;
use serde::Deserialize;

use crate::delivery::Delivery;
use crate::delivery::destinations::{ConfiguredHomes, resolve};
use crate::store::Store;
use crate::tool::{ToolContext, ToolResult, TypedTool};

/// The longest message sent at once.
const MAX_CHARS: usize = 20_000;

pub struct SendMessageTool {
    pub store: Store,
    pub delivery: Delivery,
    pub homes: Arc<ConfiguredHomes>,
    /// Takes the `MEDIA:` tags out and checks their files.
    pub media: Arc<crate::media::MediaPreparer>,
}

/// `send_message`'s arguments.
#[derive(Deserialize, JsonSchema)]
pub struct SendMessageArgs {
    target: String,
    message: String,
}

impl TypedTool for SendMessageTool {
    type Args = SendMessageArgs;
    const NAME: &'static str = "send_message";
    const TOOLSET: &'static str = "messaging";

    fn description(&self) -> String {
        "Send a message to another chat: 'home' (this platform's home channel), a platform name (its home channel, e.g. 'slack'), or platform:chat_id[:thread_id] of a chat you have talked in. To send a file, put MEDIA:/path/to/file in the message. Your normal answer already goes to this chat; use this only for other chats.".into()
    }

    fn call<'a>(
        &'a self,
        args: SendMessageArgs,
        ctx: &'a ToolContext,
    ) -> BoxFuture<'a, ToolResult> {
        Box::pin(async move {
            let message = args.message.trim();
            if message.is_empty() {
                return ToolResult::text("error: `message` is required");
            }
            if message.chars().count() > MAX_CHARS {
                return ToolResult::text(format!(
                    "error: the message is longer than {MAX_CHARS} characters"
                ));
            }
            let target = args.target.trim();
            if target.is_empty() {
                return ToolResult::text("error: `target` is required");
            }
            let person = &ctx.author.user_id;
            let chat =
                match resolve(Some(target), &ctx.chat, person, &self.store, &self.homes).await {
                    Ok(chat) => chat,
                    Err(e) => return ToolResult::text(format!("error: {e}")),
                };
            if self.delivery.sender(chat.platform).is_none() {
                return ToolResult::text(format!(
                    "error: {} is not connected here, so nothing can be sent there",
                    chat.platform
                ));
            }
            let (text, files) = self.media.outgoing(message).await;
            let count = files.len();
            let rows = self.delivery.rows_with_files(&chat, &text, files, None);
            match self.delivery.queue(rows).await {
                Ok(_) => ToolResult::text(format!(
                    "queued for {} {}{} (it goes out in order, like any message){}",
                    chat.platform,
                    chat.chat_id,
                    match count {
                        0 => String::new(),
                        1 => " with 1 file".into(),
                        n => format!(" with {n} files"),
                    },
                    // What could not be sent is said in the text; the model hears it too.
                    if text.contains("⚠️") {
                        format!(
                            "; note: {}",
                            text.lines()
                                .filter(|l| l.contains("⚠️"))
                                .collect::<Vec<_>>()
                                .join(" ")
                        )
                    } else {
                        String::new()
                    },
                )),
                Err(e) => ToolResult::text(format!("error: the message was not queued: {e}")),
            }
        })
    }
}
