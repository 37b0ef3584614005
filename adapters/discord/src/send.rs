//! Sending to Discord: rendering (Discord Markdown, chunked at 2,000 characters), messages
//! with a reply reference and the choices as buttons, edits, the typing indicator, answers
//! to slash commands and notices for presses (through the interaction's webhook), files as
//! attachments, the slash-command list; every request through [`Rest`].

use std::sync::Arc;
use std::time::Duration;

use hermes_adapter::{
    Attachment, Capabilities, ChatRef, Choice, ChoiceLimits, ChoiceStyle, CommandSpec, Delivered,
    FetchError, LengthUnit, MessageBody, Outbound, OutboundFile, Platform, PlatformSender,
    RateLimit, SendError, SendOnce, TurnEnd, WorkingIndicator, WorkingPhase, async_trait,
};
use reqwest::Method;
use serde_json::{Value, json};
use tokio::sync::watch;

use crate::interactions::{Interactions, handle_id};
use crate::markdown;
use crate::normalize::{ASK, Identity, channel_of};
use crate::rest::{Body, Rest, Upload};

/// Discord's limit on a message's content, in characters.
pub const MAX_MESSAGE_LEN: usize = 2000;
/// Buttons in one action row, and a button label's length.
/// The largest file Discord takes from a bot in any server (10 MiB since 2024; boosted
/// servers take more, which the bot cannot count on).
const MAX_UPLOAD_BYTES: u64 = 10 * 1024 * 1024;
const BUTTONS_PER_ROW: usize = 5;
const LABEL_LEN: usize = 80;
/// Discord's flag for a message only the person sees.
const EPHEMERAL: u64 = 1 << 6;
/// How long a notice or an answer waits for its interaction to be acknowledged.
const ACK_WAIT: Duration = Duration::from_secs(5);
/// The reactions that show a turn: working, answered, failed (Hermes' own), URL-encoded.
const REACTION_WORKING: &str = "%F0%9F%91%80"; // 👀
const REACTION_ANSWERED: &str = "%E2%9C%85"; // ✅
const REACTION_FAILED: &str = "%E2%9D%8C"; // ❌
/// How long command registration waits for the gateway to say who the bot is.
const IDENTITY_WAIT: Duration = Duration::from_secs(120);

/// The sending half of the Discord adapter.
pub struct DiscordSender {
    rest: Arc<Rest>,
    capabilities: Capabilities,
    interactions: Interactions,
    identity: watch::Receiver<Option<Identity>>,
    /// `DISCORD_REACTIONS`: a turn shows as reactions on the message it answers.
    reactions: bool,
    /// Channels where the bot may not react (Missing Permissions): not tried again there,
    /// so a turn does not cost three refused calls.
    unreactive: std::sync::Mutex<std::collections::HashSet<String>>,
}

/// Discord's "Missing Permissions" and "Missing Access".
const NOT_ALLOWED: [&str; 2] = ["(code 50013)", "(code 50001)"];
/// At most this many channels are remembered as refusing reactions.
const UNREACTIVE_KEPT: usize = 10_000;

impl DiscordSender {
    pub(crate) fn new(
        rest: Arc<Rest>,
        interactions: Interactions,
        identity: watch::Receiver<Option<Identity>>,
        reactions: bool,
    ) -> Self {
        DiscordSender {
            rest,
            interactions,
            identity,
            reactions,
            unreactive: Default::default(),
            capabilities: Capabilities {
                max_message_len: MAX_MESSAGE_LEN,
                length_unit: LengthUnit::Chars,
                choices: ChoiceLimits {
                    max: BUTTONS_PER_ROW,
                    label_len: LABEL_LEN,
                },
                edits: true,
                // Typing shows for about ten seconds or until the bot's next message; the 👀
                // reaction stays until taken down.
                working: Some(WorkingIndicator {
                    refresh: Some(Duration::from_secs(8)),
                    needs_done: reactions,
                }),
                threads: true,
                // Discord: five messages per five seconds in a channel; about fifty requests
                // a second for the whole bot. The headers of each answer refine both.
                per_chat_rate: RateLimit {
                    per_second: 1.0,
                    burst: 5,
                },
                group_chat_rate: RateLimit {
                    per_second: 1.0,
                    burst: 5,
                },
                per_bot_rate: Some(RateLimit {
                    per_second: 45.0,
                    burst: 45,
                }),
            },
        }
    }

    /// The bot's application id, once the gateway has said it.
    fn application_id(&self) -> Option<String> {
        self.identity
            .borrow()
            .as_ref()
            .map(|i| i.application_id.clone())
    }

    fn refuses_reactions(&self, channel: &str) -> bool {
        let unreactive = self.unreactive.lock().unwrap_or_else(|e| e.into_inner());
        unreactive.contains(channel)
    }

    /// Typing while the turn runs (it fades by itself); with reactions on, 👀 on the message
    /// being answered, replaced by ✅ or ❌ when the turn ends (nothing after a stop).
    async fn working(
        &self,
        chat: &ChatRef,
        regarding: Option<&str>,
        phase: WorkingPhase,
    ) -> Result<Delivered, SendError> {
        if !matches!(phase, WorkingPhase::Done(_)) {
            let typing = format!("/channels/{}/typing", channel_of(chat));
            self.rest.call(Method::POST, &typing, Body::Empty).await?;
        }
        let Some(reactions) = regarding
            .filter(|_| self.reactions)
            .and_then(|id| reactions_of(chat, id))
        else {
            return Ok(Delivered::default());
        };
        let channel = channel_of(chat).to_owned();
        // Not asked again where refused; an end still takes down a 👀 put up before.
        if self.refuses_reactions(&channel) && phase == WorkingPhase::Start {
            return Ok(Delivered::default());
        }
        match phase {
            WorkingPhase::Start => {
                let working = format!("{reactions}/{REACTION_WORKING}/@me");
                if let Err(e) = self.rest.call(Method::PUT, &working, Body::Empty).await {
                    if let SendError::Rejected(why) = &e
                        && NOT_ALLOWED.iter().any(|code| why.ends_with(code))
                    {
                        tracing::info!(%channel, "discord: the bot may not add reactions here; a turn shows as typing only");
                        let mut unreactive =
                            self.unreactive.lock().unwrap_or_else(|e| e.into_inner());
                        if unreactive.len() >= UNREACTIVE_KEPT {
                            unreactive.clear();
                        }
                        unreactive.insert(channel);
                    }
                    return Err(e);
                }
            }
            WorkingPhase::Refresh => {}
            WorkingPhase::Done(end) => {
                // The mark is shown even when taking 👀 down failed.
                let working = format!("{reactions}/{REACTION_WORKING}/@me");
                let removed = self.rest.call(Method::DELETE, &working, Body::Empty).await;
                let mark = match end {
                    TurnEnd::Answered => REACTION_ANSWERED,
                    TurnEnd::Failed => REACTION_FAILED,
                    TurnEnd::Stopped => return removed.map(|_| Delivered::default()),
                };
                let marked = format!("{reactions}/{mark}/@me");
                self.rest.call(Method::PUT, &marked, Body::Empty).await?;
                removed?;
            }
        }
        Ok(Delivered::default())
    }

    async fn text(
        &self,
        chat: &ChatRef,
        body: &MessageBody,
        reply_to: Option<&str>,
        choices: &[Choice],
        once: Option<&SendOnce>,
    ) -> Result<Delivered, SendError> {
        let mut payload = json!({
            "content": content(body),
            "allowed_mentions": allowed_mentions(reply_to.is_some()),
        });
        if !choices.is_empty() {
            payload["components"] = buttons(choices);
        }
        if let Some((id, private)) = reply_to.and_then(handle_id) {
            if let Some(sent) = self.answer(id, payload.clone()).await? {
                return Ok(sent);
            }
            if private {
                // Meant for one person only: never posted in the channel instead.
                tracing::info!(
                    interaction = id,
                    "discord: a private answer could no longer be delivered (restart, or 15 minutes passed); dropped"
                );
                return Ok(Delivered::default());
            }
            // The interaction can no longer be answered: the answer goes to the channel.
            payload["allowed_mentions"] = allowed_mentions(false);
        } else if let Some(id) = reply_to.filter(|id| replyable(chat, id)) {
            payload["message_reference"] = json!({"message_id": id, "fail_if_not_exists": false});
        }
        once_only(&mut payload, once);
        let sent = self
            .rest
            .call(
                Method::POST,
                &format!("/channels/{}/messages", channel_of(chat)),
                Body::Json(payload),
            )
            .await?;
        Ok(delivered(&sent))
    }

    /// Answer a slash command through its interaction: the first answer fills in the deferred
    /// reply, later ones follow up. `None` when the interaction cannot be answered any more.
    async fn answer(
        &self,
        interaction: &str,
        mut payload: Value,
    ) -> Result<Option<Delivered>, SendError> {
        let (Some(app), Some(answer)) = (
            self.application_id(),
            self.interactions.answer(interaction, ACK_WAIT).await,
        ) else {
            return Ok(None);
        };
        let sent = if answer.first {
            let sent = self
                .rest
                .call(
                    Method::PATCH,
                    &format!("/webhooks/{app}/{}/messages/@original", answer.token),
                    Body::Json(payload),
                )
                .await?;
            self.interactions.original_filled(interaction);
            sent
        } else {
            if answer.ephemeral {
                payload["flags"] = json!(EPHEMERAL);
            }
            self.rest
                .call(
                    Method::POST,
                    &format!("/webhooks/{app}/{}", answer.token),
                    Body::Json(payload),
                )
                .await?
        };
        let delivered = delivered(&sent);
        if let Some(id) = &delivered.message_id {
            self.interactions.answered_with(id, &answer.token);
        }
        Ok(Some(delivered))
    }

    async fn edit(
        &self,
        chat: &ChatRef,
        message_id: &str,
        body: &MessageBody,
    ) -> Result<Delivered, SendError> {
        let payload = json!({
            "content": content(body),
            "components": [],
            "allowed_mentions": allowed_mentions(false),
        });
        // A message that answered a slash command is edited through the interaction while
        // its token is valid (an ephemeral one cannot be edited any other way).
        let path = match (
            self.interactions.token_of_message(message_id),
            self.application_id(),
        ) {
            (Some(token), Some(app)) => format!("/webhooks/{app}/{token}/messages/{message_id}"),
            _ => format!("/channels/{}/messages/{message_id}", channel_of(chat)),
        };
        self.rest
            .call(Method::PATCH, &path, Body::Json(payload))
            .await?;
        Ok(Delivered {
            message_id: Some(message_id.to_owned()),
        })
    }

    async fn file(
        &self,
        chat: &ChatRef,
        file: &OutboundFile,
        reply_to: Option<&str>,
        once: Option<&SendOnce>,
    ) -> Result<Delivered, SendError> {
        // Checked before the upload: Discord refuses a file past the server's limit only
        // after taking all of it.
        let size = tokio::fs::metadata(&file.path)
            .await
            .map_err(|e| SendError::Rejected(format!("cannot read {}: {e}", file.path.display())))?
            .len();
        if size > MAX_UPLOAD_BYTES {
            return Err(SendError::Rejected(format!(
                "it is {} MB, and Discord takes files up to {} MB from a bot",
                size.div_ceil(1024 * 1024),
                MAX_UPLOAD_BYTES / (1024 * 1024)
            )));
        }
        let bytes = tokio::fs::read(&file.path).await.map_err(|e| {
            SendError::Rejected(format!("cannot read {}: {e}", file.path.display()))
        })?;
        let mut payload = json!({
            "allowed_mentions": allowed_mentions(reply_to.is_some()),
            "attachments": [{"id": 0, "filename": file.name}],
        });
        if let Some(caption) = &file.caption {
            payload["content"] = json!(markdown::escape(caption));
        }
        if let Some(id) = reply_to.filter(|id| replyable(chat, id)) {
            payload["message_reference"] = json!({"message_id": id, "fail_if_not_exists": false});
        }
        once_only(&mut payload, once);
        let upload = Upload {
            name: file.name.clone(),
            bytes,
            mime: file.mime.clone(),
        };
        let sent = self
            .rest
            .call(
                Method::POST,
                &format!("/channels/{}/messages", channel_of(chat)),
                Body::Multipart(payload, vec![upload]),
            )
            .await?;
        Ok(delivered(&sent))
    }

    /// A notice only the presser sees: an ephemeral follow-up of the press.
    async fn notice(&self, press_id: &str, text: &str) -> Result<Delivered, SendError> {
        let (Some(app), Some(answer)) = (
            self.application_id(),
            self.interactions.answer(press_id, ACK_WAIT).await,
        ) else {
            tracing::debug!(
                press = press_id,
                "discord: the press can no longer be answered; notice dropped"
            );
            return Ok(Delivered::default());
        };
        let payload = json!({
            "content": markdown::escape(text),
            "flags": EPHEMERAL,
            "allowed_mentions": allowed_mentions(false),
        });
        let sent = self
            .rest
            .call(
                Method::POST,
                &format!("/webhooks/{app}/{}", answer.token),
                Body::Json(payload),
            )
            .await?;
        Ok(delivered(&sent))
    }
}

#[async_trait]
impl PlatformSender for DiscordSender {
    fn platform(&self) -> Platform {
        Platform::Discord
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
            Outbound::PressNotice { press_id, text, .. } => self.notice(&press_id, &text).await,
            Outbound::File {
                chat,
                file,
                reply_to,
                once,
            } => {
                self.file(&chat, &file, reply_to.as_deref(), once.as_ref())
                    .await
            }
        }
    }

    async fn fetch_media(
        &self,
        attachment: &Attachment,
        max_bytes: u64,
    ) -> Result<Vec<u8>, FetchError> {
        self.rest
            .download(&attachment.handle, attachment.size, max_bytes)
            .await
    }

    /// The daemon's commands, plus `/ask <question>`, as global application commands
    /// (one bulk overwrite, so renamed or removed commands disappear too).
    async fn register_commands(&self, commands: &[CommandSpec]) -> Result<(), SendError> {
        let mut identity = self.identity.clone();
        let app = match tokio::time::timeout(
            IDENTITY_WAIT,
            identity.wait_for(|i| i.as_ref().is_some_and(|i| i.from_ready)),
        )
        .await
        {
            Ok(Ok(identity)) => identity
                .as_ref()
                .map(|i| i.application_id.clone())
                .unwrap_or_default(),
            _ => {
                return Err(SendError::Transient(
                    "the gateway did not say who the bot is; commands not registered".into(),
                ));
            }
        };
        self.rest
            .call(
                Method::PUT,
                &format!("/applications/{app}/commands"),
                Body::Json(slash_commands(commands)),
            )
            .await?;
        tracing::info!(
            count = commands.len() + 1,
            "discord: slash commands registered"
        );
        Ok(())
    }
}

/// The application-command list for `commands`, with `/ask` added.
pub(crate) fn slash_commands(commands: &[CommandSpec]) -> Value {
    let cut = |s: &str| s.chars().take(100).collect::<String>();
    let mut list: Vec<Value> = commands
        .iter()
        .map(|c| {
            let mut command = json!({"name": c.name, "type": 1, "description": cut(c.description)});
            if let Some(argument) = c.argument {
                command["options"] = json!([{
                    "type": 3, "name": "details", "description": cut(argument), "required": false
                }]);
            }
            command
        })
        .collect();
    list.push(json!({
        "name": ASK, "type": 1, "description": "Ask the agent something",
        "options": [{"type": 3, "name": "question", "description": "Your question", "required": true}]
    }));
    Value::Array(list)
}

/// What a message shows: its markup (Discord Markdown), else the plain text escaped.
fn content(body: &MessageBody) -> String {
    body.markup
        .clone()
        .unwrap_or_else(|| markdown::escape(&body.plain))
}

/// Puts the message's key on `payload` as its `nonce` with `enforce_nonce`: posted again
/// with the same nonce within a few minutes, Discord answers with the first message
/// instead of showing a second.
fn once_only(payload: &mut Value, once: Option<&SendOnce>) {
    if let Some(once) = once {
        payload["nonce"] = json!(once.key);
        payload["enforce_nonce"] = json!(true);
    }
}

/// Nobody is pinged by what the model wrote: no `@everyone`/`@here`, no roles, no users;
/// only the person replied to, where the message is a reply.
fn allowed_mentions(replied_user: bool) -> Value {
    json!({"parse": [], "replied_user": replied_user})
}

/// The choices as buttons, five to an action row.
fn buttons(choices: &[Choice]) -> Value {
    let rows: Vec<Value> = choices
        .chunks(BUTTONS_PER_ROW)
        .take(5)
        .map(|row| {
            let buttons: Vec<Value> = row
                .iter()
                .map(|c| {
                    let style = match c.style {
                        ChoiceStyle::Primary => 1,
                        ChoiceStyle::Normal => 2,
                        ChoiceStyle::Danger => 4,
                    };
                    let label = c.label_within(LABEL_LEN).unwrap_or(&c.id);
                    json!({"type": 2, "style": style, "label": label, "custom_id": c.id})
                })
                .collect();
            json!({"type": 1, "components": buttons})
        })
        .collect();
    Value::Array(rows)
}

fn delivered(sent: &Value) -> Delivered {
    Delivered {
        message_id: sent.get("id").and_then(Value::as_str).map(str::to_owned),
    }
}

/// Where the reactions of message `id` are (`/channels/{channel}/messages/{id}/reactions`):
/// the message a thread was opened from lives in the parent channel. `None` for what is
/// not a message id (a slash command's handle).
fn reactions_of(chat: &ChatRef, id: &str) -> Option<String> {
    if id.is_empty() || !id.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let channel = if chat.thread_id.as_deref() == Some(id) {
        &chat.chat_id
    } else {
        channel_of(chat)
    };
    Some(format!("/channels/{channel}/messages/{id}/reactions"))
}

/// Whether a message can carry a reply to `id`: a message id, and not the message a thread
/// was opened from (it lives in the parent channel; the thread already starts with it).
fn replyable(chat: &ChatRef, id: &str) -> bool {
    !id.is_empty()
        && id.bytes().all(|b| b.is_ascii_digit())
        && chat.thread_id.as_deref() != Some(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn choices_become_styled_buttons_in_rows_of_five() {
        let choice = |id: &str, style| Choice {
            id: id.into(),
            label: format!("Label {id}"),
            short_label: None,
            style,
        };
        let rows = buttons(&[
            choice("a", ChoiceStyle::Primary),
            choice("b", ChoiceStyle::Normal),
            choice("c", ChoiceStyle::Danger),
        ]);
        assert_eq!(rows.as_array().unwrap().len(), 1);
        let row = &rows[0]["components"];
        assert_eq!(row[0]["style"], 1);
        assert_eq!(row[2]["style"], 4);
        assert_eq!(row[2]["custom_id"], "c");
    }

    #[test]
    fn the_model_cannot_ping_anyone() {
        let mentions = allowed_mentions(false);
        assert_eq!(mentions["parse"], json!([]));
    }

    #[test]
    fn slash_commands_carry_their_argument_and_ask() {
        let list = slash_commands(&[CommandSpec {
            name: "deny",
            description: "Refuse",
            argument: Some("reason"),
            aliases: &[],
        }]);
        assert_eq!(list[0]["options"][0]["name"], "details");
        assert_eq!(list[1]["name"], "ask");
        assert_eq!(list[1]["options"][0]["required"], true);
    }
}
