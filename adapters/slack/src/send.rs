//! Sending to Slack: rendering (mrkdwn, chunks of at most 3,900 characters as rendered),
//! messages in the thread the conversation lives in, the choices as Block Kit buttons,
//! edits with `chat.update`, the working indicator (`assistant.threads.setStatus` where the
//! app has it, else an :eyes: reaction taken down at the end), ephemeral notices for a
//! press, slash-command answers through their `response_url`, files through the external
//! upload flow, and the files people sent (with the bot token, from Slack's own hosts only).

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::Duration;

use hermes_adapter::{
    Attachment, Capabilities, ChatRef, Choice, ChoiceLimits, ChoiceStyle, CommandSpec, Delivered,
    FetchError, LengthUnit, MessageBody, Outbound, OutboundFile, Platform, PlatformSender,
    RateLimit, SendError, SendOnce, WorkingIndicator, WorkingPhase, async_trait, read_capped,
};
use serde_json::{Value, json};
use slack_morphism::prelude::*;

use crate::client::{Client, call};
use crate::mrkdwn;
use crate::open::{Open, handle_id};

/// What the adapter promises for one message: Slack truncates `text` far above this, but
/// recommends about 4,000 characters, and a section block takes 3,000.
pub const MAX_MESSAGE_LEN: usize = 3_900;
/// The text of a section block (a prompt's text goes in one).
const SECTION_LEN: usize = 3_000;
const BUTTONS: usize = 5;
const LABEL_LEN: usize = 75;
/// The reaction shown while working, where the assistant status is not available.
const WORKING_REACTION: &str = "eyes";
/// A file download or upload may take this long.
const FILE_TIMEOUT: Duration = Duration::from_secs(300);
/// Where Slack serves the files people send.
const FILE_HOSTS: [&str; 1] = ["files.slack.com"];
/// The metadata event type, and its payload's field, that carry a message's [`SendOnce`]
/// key.
const ONCE_EVENT: &str = "hermes_outbox";
const ONCE_KEY: &str = "key";
/// How many of a chat's newest messages are searched for one an earlier attempt posted.
const LOOKBACK: u16 = 200;

/// The answers that mean the app has no assistant status (anything else may pass).
const NOT_AVAILABLE: [&str; 5] = [
    "missing_scope",
    "not_allowed_token_type",
    "unknown_method",
    "method_not_supported_for_channel_type",
    "invalid_arguments",
];
/// Whether `assistant.threads.setStatus` works for this app: not tried yet, yes, no.
const UNKNOWN: u8 = 0;
const YES: u8 = 1;
const NO: u8 = 2;

/// The sending half of the Slack adapter.
pub struct SlackSender {
    client: Arc<Client>,
    token: SlackApiToken,
    capabilities: Capabilities,
    open: Open,
    http: reqwest::Client,
    /// The Web API's host: files may come from it too (a proxy, a fake).
    api_host: Option<String>,
    assistant: AtomicU8,
    /// Filled by `register_commands`, read by the receiver for `/hermes <word>`.
    commands: crate::normalize::Commands,
}

impl SlackSender {
    pub(crate) fn new(
        client: Arc<Client>,
        token: SlackApiToken,
        open: Open,
        api_base_url: &str,
        commands: crate::normalize::Commands,
    ) -> Self {
        SlackSender {
            client,
            token,
            open,
            commands,
            http: reqwest::Client::builder()
                .pool_max_idle_per_host(hermes_adapter::IDLE_CONNECTIONS_PER_HOST)
                .redirect(reqwest::redirect::Policy::none())
                .connect_timeout(Duration::from_secs(10))
                .timeout(FILE_TIMEOUT)
                .build()
                .unwrap_or_default(),
            api_host: url::Url::parse(api_base_url)
                .ok()
                .and_then(|u| u.host_str().map(str::to_owned)),
            assistant: AtomicU8::new(UNKNOWN),
            capabilities: Capabilities {
                max_message_len: MAX_MESSAGE_LEN,
                length_unit: LengthUnit::Chars,
                choices: ChoiceLimits {
                    max: BUTTONS,
                    label_len: LABEL_LEN,
                },
                edits: true,
                // The assistant status clears itself after two minutes; a reaction stays
                // until it is taken down.
                working: Some(WorkingIndicator {
                    refresh: Some(Duration::from_secs(90)),
                    needs_done: true,
                }),
                threads: true,
                // chat.postMessage: about one message a second per channel, short bursts.
                per_chat_rate: RateLimit {
                    per_second: 1.0,
                    burst: 3,
                },
                group_chat_rate: RateLimit {
                    per_second: 1.0,
                    burst: 3,
                },
                per_bot_rate: Some(RateLimit {
                    per_second: 5.0,
                    burst: 10,
                }),
            },
        }
    }

    fn session(&self) -> SlackClientSession<'_, crate::client::Connector> {
        self.client.open_session(&self.token)
    }

    async fn text(
        &self,
        chat: &ChatRef,
        body: &MessageBody,
        reply_to: Option<&str>,
        choices: &[Choice],
        once: Option<&SendOnce>,
    ) -> Result<Delivered, SendError> {
        let text = content(body);
        // A command's private answer goes through its response URL (only the person sees
        // it); once that is gone (a restart, or 30 minutes) it is dropped, never posted in
        // the channel instead. A question asked with `/hermes` is answered in the channel,
        // as a message that can be edited and streamed.
        if let Some((id, true)) = reply_to.and_then(handle_id) {
            let Some(response) = self.open.response_for(id).await else {
                tracing::info!(
                    command = id,
                    "slack: a private answer could no longer be delivered; dropped"
                );
                return Ok(Delivered::default());
            };
            return self.respond(&response.url, &text).await;
        }
        let mut message = SlackMessageContent::new().with_text(text.clone());
        if !choices.is_empty() {
            message = message.with_blocks(blocks(&text, choices)?);
        }
        if let Some(once) = once {
            if once.maybe_sent
                && let Some(ts) = self.posted_before(chat, &once.key).await?
            {
                tracing::info!(key = %once.key, "slack: the message was posted by an earlier attempt; not posted again");
                return Ok(Delivered {
                    message_id: Some(ts),
                });
            }
            // Slack has no idempotency key: the message carries its key, so that a later
            // attempt can find it ([`SlackSender::posted_before`]).
            let payload = [(ONCE_KEY.to_owned(), once.key.clone())].into();
            message = message.with_metadata(SlackMessageMetadata {
                event_type: ONCE_EVENT.to_owned(),
                event_payload: Some(payload),
            });
        }
        let mut request =
            SlackApiChatPostMessageRequest::new(chat.chat_id.as_str().into(), message);
        if let Some(thread) = &chat.thread_id {
            request = request.with_thread_ts(thread.as_str().into());
        }
        // Noted before the post: the person can see the answer (and reply in its thread)
        // before Slack's answer to the post reaches us, and that reply needs no mention.
        if let Some(thread) = &chat.thread_id {
            self.open.answered_in(&chat.chat_id, thread).await;
        }
        let session = self.session();
        let sent = call("chat.postMessage", session.chat_post_message(&request)).await?;
        Ok(Delivered {
            message_id: Some(sent.ts.to_string()),
        })
    }

    /// The bot's message carrying `key` among the newest of the chat (or its thread): one
    /// an earlier attempt posted though its answer never came back. Where the history
    /// cannot be read (a missing scope), nothing is found and the message is posted.
    async fn posted_before(&self, chat: &ChatRef, key: &str) -> Result<Option<String>, SendError> {
        let session = self.session();
        let channel: SlackChannelId = chat.chat_id.as_str().into();
        let messages = match &chat.thread_id {
            Some(thread) => {
                let request =
                    SlackApiConversationsRepliesRequest::new(channel, thread.as_str().into())
                        .with_limit(LOOKBACK);
                call(
                    "conversations.replies",
                    session.conversations_replies(&request),
                )
                .await
                .map(|answer| answer.messages)
            }
            None => {
                let request = SlackApiConversationsHistoryRequest::new()
                    .with_channel(channel)
                    .with_limit(LOOKBACK)
                    .with_include_all_metadata(true);
                call(
                    "conversations.history",
                    session.conversations_history(&request),
                )
                .await
                .map(|answer| answer.messages)
            }
        };
        let messages = match messages {
            Ok(messages) => messages,
            Err(SendError::Rejected(why)) => {
                tracing::warn!(why = %why, "slack: cannot read the chat's history to find a message an earlier attempt may have posted; posting it (it may show twice)");
                return Ok(None);
            }
            Err(e) => return Err(e),
        };
        let carries_key = |m: &SlackHistoryMessage| {
            m.content.metadata.as_ref().is_some_and(|meta| {
                meta.event_type == ONCE_EVENT
                    && meta
                        .event_payload
                        .as_ref()
                        .and_then(|p| p.get(ONCE_KEY))
                        .is_some_and(|k| k == key)
            })
        };
        Ok(messages
            .iter()
            .find(|m| carries_key(m))
            .map(|m| m.origin.ts.to_string()))
    }

    /// A private answer on a slash command's `response_url`.
    async fn respond(&self, url: &str, text: &str) -> Result<Delivered, SendError> {
        let answer = self
            .http
            .post(url)
            .timeout(Duration::from_secs(30))
            .json(&json!({"text": text, "response_type": "ephemeral", "replace_original": false}))
            .send()
            .await
            .map_err(|e| {
                SendError::Transient(format!("Slack response_url: {}", e.without_url()))
            })?;
        let status = answer.status();
        let body = answer.text().await.unwrap_or_default();
        // Slack answers `ok` as text, or JSON with `ok: false` and an error.
        let refused = serde_json::from_str::<Value>(&body)
            .ok()
            .filter(|v| v.get("ok") == Some(&Value::Bool(false)))
            .map(|v| {
                v.get("error")
                    .and_then(Value::as_str)
                    .unwrap_or("refused")
                    .to_owned()
            });
        match refused {
            _ if status.is_server_error() => Err(SendError::Transient(format!(
                "Slack response_url: HTTP {status}"
            ))),
            Some(error) => Err(SendError::Rejected(format!("Slack response_url: {error}"))),
            None if status.is_success() => Ok(Delivered::default()),
            None => Err(SendError::Rejected(format!(
                "Slack response_url: HTTP {status}"
            ))),
        }
    }

    async fn edit(
        &self,
        chat: &ChatRef,
        ts: &str,
        body: &MessageBody,
    ) -> Result<Delivered, SendError> {
        let message = SlackMessageContent::new()
            .with_text(content(body))
            .with_blocks(Vec::new());
        let request =
            SlackApiChatUpdateRequest::new(chat.chat_id.as_str().into(), message, ts.into());
        let session = self.session();
        call("chat.update", session.chat_update(&request)).await?;
        Ok(Delivered {
            message_id: Some(ts.to_owned()),
        })
    }

    async fn working(
        &self,
        chat: &ChatRef,
        regarding: Option<&str>,
        phase: WorkingPhase,
    ) -> Result<Delivered, SendError> {
        let status = match phase {
            WorkingPhase::Start | WorkingPhase::Refresh => "is thinking…",
            WorkingPhase::Done(_) => "",
        };
        if let Some(thread) = &chat.thread_id
            && self.assistant.load(Ordering::Relaxed) != NO
        {
            let request = SlackApiAssistantThreadsSetStatusRequest::new(
                chat.chat_id.as_str().into(),
                status.to_owned(),
                thread.as_str().into(),
            );
            let session = self.session();
            match call(
                "assistant.threads.setStatus",
                session.assistant_threads_set_status(&request),
            )
            .await
            {
                Ok(_) => {
                    self.assistant.store(YES, Ordering::Relaxed);
                    return Ok(Delivered::default());
                }
                // The app cannot: a reaction from now on.
                Err(SendError::Rejected(why))
                    if NOT_AVAILABLE
                        .iter()
                        .any(|code| why.contains(&format!(": {code}"))) =>
                {
                    tracing::info!(error = %why, "slack: no assistant status for this app; showing a reaction instead");
                    self.assistant.store(NO, Ordering::Relaxed);
                }
                // A passing failure: a reaction this time.
                Err(e) => {
                    tracing::debug!(error = %e, "slack: assistant status failed; a reaction instead")
                }
            }
        }
        let Some(ts) = regarding.filter(|ts| !ts.is_empty() && !ts.contains(':')) else {
            return Ok(Delivered::default());
        };
        let session = self.session();
        let result = match phase {
            WorkingPhase::Start | WorkingPhase::Refresh => {
                let add = SlackApiReactionsAddRequest::new(
                    chat.chat_id.as_str().into(),
                    WORKING_REACTION.into(),
                    ts.into(),
                );
                call("reactions.add", session.reactions_add(&add))
                    .await
                    .map(|_| ())
            }
            WorkingPhase::Done(_) => {
                let remove = SlackApiReactionsRemoveRequest::new(WORKING_REACTION.into())
                    .with_channel(chat.chat_id.as_str().into())
                    .with_timestamp(ts.into());
                call("reactions.remove", session.reactions_remove(&remove))
                    .await
                    .map(|_| ())
            }
        };
        match result {
            // Shown already (a refresh), or gone already.
            Err(SendError::Rejected(why))
                if why.ends_with(": already_reacted") || why.ends_with(": no_reaction") =>
            {
                Ok(Delivered::default())
            }
            other => other.map(|()| Delivered::default()),
        }
    }

    async fn notice(
        &self,
        chat: &ChatRef,
        press_id: &str,
        text: &str,
    ) -> Result<Delivered, SendError> {
        let Some(user) = self.open.presser(press_id).await else {
            tracing::debug!(
                press = press_id,
                "slack: who pressed is not known any more; notice dropped"
            );
            return Ok(Delivered::default());
        };
        let mut request = SlackApiChatPostEphemeralRequest::new(
            chat.chat_id.as_str().into(),
            user.as_str().into(),
            SlackMessageContent::new().with_text(mrkdwn::escape(text)),
        );
        if let Some(thread) = &chat.thread_id {
            request = request.with_thread_ts(thread.as_str().into());
        }
        let session = self.session();
        call("chat.postEphemeral", session.chat_post_ephemeral(&request)).await?;
        Ok(Delivered::default())
    }

    async fn file(&self, chat: &ChatRef, file: &OutboundFile) -> Result<Delivered, SendError> {
        let bytes = tokio::fs::read(&file.path).await.map_err(|e| {
            SendError::Rejected(format!("cannot read {}: {e}", file.path.display()))
        })?;
        let session = self.session();
        let ask = SlackApiFilesGetUploadUrlExternalRequest::new(file.name.clone(), bytes.len());
        let target = call(
            "files.getUploadURLExternal",
            session.get_upload_url_external(&ask),
        )
        .await?;
        let upload = SlackApiFilesUploadViaUrlRequest::new(
            target.upload_url.clone(),
            bytes,
            file.mime
                .clone()
                .unwrap_or_else(|| "application/octet-stream".into()),
        );
        call("files upload", session.files_upload_via_url(&upload)).await?;
        let mut complete = SlackApiFilesCompleteUploadExternalRequest::new(vec![
            SlackApiFilesComplete::new(target.file_id.clone()).with_title(file.name.clone()),
        ])
        .with_channel_id(chat.chat_id.as_str().into());
        if let Some(thread) = &chat.thread_id {
            complete = complete.with_thread_ts(thread.as_str().into());
        }
        if let Some(caption) = &file.caption {
            complete = complete.with_initial_comment(mrkdwn::escape(caption));
        }
        call(
            "files.completeUploadExternal",
            session.files_complete_upload_external(&complete),
        )
        .await?;
        Ok(Delivered {
            message_id: Some(target.file_id.to_string()),
        })
    }
}

#[async_trait]
impl PlatformSender for SlackSender {
    fn platform(&self) -> Platform {
        Platform::Slack
    }

    /// Slack has no menu to fill (the app's one `/hermes` command is in its manifest):
    /// the words `/hermes` takes as commands are kept for the receiver.
    async fn register_commands(&self, commands: &[CommandSpec]) -> Result<(), SendError> {
        self.commands.set(commands);
        Ok(())
    }

    fn capabilities(&self) -> &Capabilities {
        &self.capabilities
    }

    fn render(&self, markdown: &str) -> Vec<MessageBody> {
        hermes_format::fit(markdown, MAX_MESSAGE_LEN, LengthUnit::Chars, mrkdwn::render)
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
                let reply_to = reply_to.as_deref();
                self.text(&chat, &body, reply_to, &choices, once.as_ref())
                    .await
            }
            Outbound::Edit {
                chat,
                message_id,
                body,
            } => self.edit(&chat, &message_id, &body).await,
            Outbound::Working {
                chat,
                regarding,
                phase,
            } => self.working(&chat, regarding.as_deref(), phase).await,
            Outbound::PressNotice {
                chat,
                press_id,
                text,
            } => self.notice(&chat, &press_id, &text).await,
            Outbound::File { chat, file, .. } => self.file(&chat, &file).await,
        }
    }

    /// Slack limits each Web API method apart (its tiers): a 429 on `chat.update` (Tier 3)
    /// must not hold new messages (`chat.postMessage`), nor the other way round.
    fn method_of(&self, action: &Outbound) -> Option<&'static str> {
        match action {
            // A private answer goes to its response URL: no Web API method.
            Outbound::Text { reply_to, .. }
                if reply_to
                    .as_deref()
                    .and_then(handle_id)
                    .is_some_and(|(_, private)| private) =>
            {
                None
            }
            Outbound::Text { .. } => Some("chat.postMessage"),
            Outbound::Edit { .. } => Some("chat.update"),
            Outbound::Working {
                phase: WorkingPhase::Done(_),
                ..
            } => Some("reactions.remove"),
            Outbound::Working { .. } => Some("reactions.add"),
            Outbound::PressNotice { .. } => Some("chat.postEphemeral"),
            Outbound::File { .. } => Some("files upload"),
        }
    }

    fn methods(&self) -> &'static [&'static str] {
        &[
            "chat.postMessage",
            "chat.update",
            "reactions.add",
            "reactions.remove",
            "chat.postEphemeral",
            "files upload",
        ]
    }

    /// A file a person sent: `url_private_download` with the bot token, from Slack's file
    /// host (or the configured API host) only, so the token never goes elsewhere.
    async fn fetch_media(
        &self,
        attachment: &Attachment,
        max_bytes: u64,
    ) -> Result<Vec<u8>, FetchError> {
        let url = url::Url::parse(&attachment.handle)
            .map_err(|e| FetchError::Failed(SendError::Rejected(format!("bad file URL: {e}"))))?;
        let host = url.host_str().unwrap_or_default();
        // The bot token goes to Slack's file host over HTTPS, or to the configured API host
        // (a proxy or a fake, possibly plain HTTP); nowhere else.
        let slack = FILE_HOSTS.contains(&host) && url.scheme() == "https";
        let configured =
            self.api_host.as_deref() == Some(host) && matches!(url.scheme(), "https" | "http");
        if !(slack || configured) {
            return Err(FetchError::Failed(SendError::Rejected(format!(
                "a file URL must point at Slack's file host, not {host:?}"
            ))));
        }
        let response = self
            .http
            .get(url)
            .bearer_auth(self.token.token_value.0.as_str())
            .send()
            .await
            .map_err(|e| {
                FetchError::Failed(SendError::Transient(format!(
                    "downloading a file: {}",
                    e.without_url()
                )))
            })?;
        let status = response.status();
        if !status.is_success() {
            return Err(FetchError::Failed(if status.is_server_error() {
                SendError::Transient(format!("downloading a file: HTTP {status}"))
            } else {
                SendError::Rejected(format!(
                    "downloading a file: HTTP {status} (does the app have files:read?)"
                ))
            }));
        }
        // Without `files:read` Slack answers with its sign-in page, not the file.
        let html = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/html"));
        if html {
            return Err(FetchError::Failed(SendError::Rejected(
                "Slack sent a web page instead of the file (the app needs the files:read scope)"
                    .into(),
            )));
        }
        let size = response.content_length();
        read_capped(response.bytes_stream(), size, max_bytes, |e| {
            SendError::Transient(format!("downloading a file: {}", e.without_url()))
        })
        .await
    }
}

/// What a message shows: its mrkdwn, else the plain text escaped.
fn content(body: &MessageBody) -> String {
    body.markup
        .clone()
        .unwrap_or_else(|| mrkdwn::escape(&body.plain))
}

/// A prompt as Block Kit: its text in a section, the choices as buttons (the choice id as
/// both `action_id` and `value`).
fn blocks(text: &str, choices: &[Choice]) -> Result<Vec<SlackBlock>, SendError> {
    // A section takes 3,000 characters: a longer prompt is several (code fences closed
    // and reopened), so the command to approve is shown whole.
    let mut blocks: Vec<Value> = hermes_format::chunk(text, SECTION_LEN, LengthUnit::Chars)
        .into_iter()
        .map(|part| json!({"type": "section", "text": {"type": "mrkdwn", "text": part}}))
        .collect();
    let buttons: Vec<Value> = choices
        .iter()
        .take(BUTTONS)
        .map(|c| {
            let mut button = json!({
                "type": "button",
                "action_id": c.id,
                "value": c.id,
                "text": {"type": "plain_text", "text": c.label_within(LABEL_LEN).unwrap_or(&c.id)},
            });
            match c.style {
                ChoiceStyle::Primary => button["style"] = json!("primary"),
                ChoiceStyle::Danger => button["style"] = json!("danger"),
                ChoiceStyle::Normal => {}
            }
            button
        })
        .collect();
    blocks.push(json!({"type": "actions", "elements": buttons}));
    serde_json::from_value(Value::Array(blocks))
        .map_err(|e| SendError::MarkupRejected(format!("blocks: {e}")))
}
