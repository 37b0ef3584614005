//! The router: every recorded inbound event passes here. It authorises the sender
//! (invariant 5: people not allowed never reach the agent), answers unknown people in a DM
//! with a pairing code, applies the group mention rule, answers `/help`, derives the session
//! key, and hands messages and session commands to the session's actor.

use std::sync::Arc;

use hermes_adapter::{ChatKind, ChatRef, Inbound, InboundKind, Outbound, Platform};

use crate::config::Config;
use crate::session::{self, Directory, SessionCommand, SessionInput, SessionServices, UserInput};
use crate::store::{InboxRow, InboxState, PairingRequestOutcome};

const HELP: &str = "I'm Hermes, an AI agent. Write to me and I'll answer; I can run commands on my host.\n\n\
/new — start a fresh conversation (also /reset)\n\
/stop — stop what I'm doing\n\
/status — what I'm doing and which model I use\n\
/help — this message";

pub struct Router {
    config: Arc<Config>,
    services: Arc<SessionServices>,
    directory: Directory,
}

impl Router {
    pub fn new(config: Arc<Config>, services: Arc<SessionServices>) -> Self {
        Router {
            config,
            services,
            directory: Directory::default(),
        }
    }

    /// Handle one recorded event. Never fails: every path ends the inbox row or hands it on.
    pub async fn dispatch(&self, row: InboxRow) {
        let InboxRow { id, event } = row;
        let Inbound {
            chat, sender, kind, ..
        } = &event;
        let store = &self.services.store;

        let allowed = self.is_allowed(chat.platform, &sender.user_id).await;
        let message = match kind {
            InboundKind::ButtonPress(press) => {
                // No buttons are live yet (approval prompts come with their broker): say so.
                let notice = if allowed {
                    "This button is no longer active."
                } else {
                    "You are not allowed to use this bot."
                };
                let _ = self
                    .services
                    .delivery
                    .direct(Outbound::AnswerButton {
                        press_id: press.press_id.clone(),
                        notice: Some(notice.into()),
                    })
                    .await;
                self.end(id, InboxState::Refused, "button not active", None)
                    .await;
                return;
            }
            InboundKind::Message(m) => m,
        };
        let reply_to = Some(message.message_id.clone());

        if !allowed {
            if chat.kind != ChatKind::Direct {
                self.end(id, InboxState::Ignored, "sender not allowed (group)", None)
                    .await;
                return;
            }
            let outcome = store
                .pairing_request(
                    chat.platform.as_str(),
                    &sender.user_id,
                    &sender.display_name,
                    &chat.chat_id,
                )
                .await;
            let (state, note, text) = match outcome {
                Ok(PairingRequestOutcome::Issued(code)) => (
                    InboxState::Refused,
                    "pairing code issued",
                    Some(pairing_text(chat.platform, &code, false)),
                ),
                Ok(PairingRequestOutcome::Remind(code)) => (
                    InboxState::Refused,
                    "pairing code reminded",
                    Some(pairing_text(chat.platform, &code, true)),
                ),
                Ok(PairingRequestOutcome::AlreadyReminded) => {
                    (InboxState::Refused, "pairing code sent recently", None)
                }
                Ok(PairingRequestOutcome::TooMany) => (
                    InboxState::Refused,
                    "too many pairing requests",
                    Some(
                        "Too many pairing requests are waiting right now; please try again later."
                            .to_owned(),
                    ),
                ),
                Err(e) => {
                    tracing::error!(error = %e, "router: pairing store failed");
                    (
                        InboxState::Failed,
                        "pairing store failed",
                        Some("Sorry, I can't process pairing requests right now.".to_owned()),
                    )
                }
            };
            tracing::info!(user = %sender.user_id, platform = %chat.platform, note, "router: message from a person who is not allowed");
            self.end(id, state, note, text.map(|t| (chat.clone(), t, reply_to)))
                .await;
            return;
        }

        if chat.kind != ChatKind::Direct
            && !message.addressed
            && self.require_mention(chat.platform)
        {
            self.end(
                id,
                InboxState::Ignored,
                "group message not addressed to the bot",
                None,
            )
            .await;
            return;
        }
        if let Some(what) = &message.unsupported {
            let text = format!(
                "I can only read text (and captions) for now, so I can't open {what}. Please describe it in words."
            );
            self.end(
                id,
                InboxState::Refused,
                "unsupported content",
                Some((chat.clone(), text, reply_to)),
            )
            .await;
            return;
        }
        let text = message.text.trim();
        if text.is_empty() {
            self.end(
                id,
                InboxState::Refused,
                "empty message",
                Some((
                    chat.clone(),
                    "Yes? Write your question after the mention.".into(),
                    reply_to,
                )),
            )
            .await;
            return;
        }

        let command = text.strip_prefix('/').map(|rest| {
            let word = rest.split_whitespace().next().unwrap_or_default();
            word.split('@')
                .next()
                .unwrap_or_default()
                .to_ascii_lowercase()
        });
        let input = match command.as_deref() {
            Some("help") | Some("start") => {
                self.end(
                    id,
                    InboxState::Done,
                    "help",
                    Some((chat.clone(), HELP.into(), reply_to)),
                )
                .await;
                return;
            }
            Some("stop") => SessionInput::Command {
                inbox_id: id,
                message_id: message.message_id.clone(),
                command: SessionCommand::Stop,
            },
            Some("new") | Some("reset") => SessionInput::Command {
                inbox_id: id,
                message_id: message.message_id.clone(),
                command: SessionCommand::New,
            },
            Some("status") => SessionInput::Command {
                inbox_id: id,
                message_id: message.message_id.clone(),
                command: SessionCommand::Status,
            },
            _ => SessionInput::Message(UserInput {
                inbox_id: id,
                message_id: message.message_id.clone(),
                text: text.to_owned(),
            }),
        };
        let key = self.session_key(chat, &sender.user_id);
        session::route(&self.directory, &self.services, &key, chat, sender, input);
    }

    async fn is_allowed(&self, platform: Platform, user_id: &str) -> bool {
        let access = &self.config.access;
        if access
            .platform_allow_all
            .get(&platform)
            .copied()
            .unwrap_or(false)
            || access.gateway_allow_all
        {
            return true;
        }
        let listed = access
            .platform_allowed
            .get(&platform)
            .is_some_and(|l| l.iter().any(|u| u == user_id))
            || access.gateway_allowed.iter().any(|u| u == user_id);
        if listed {
            return true;
        }
        match self
            .services
            .store
            .pairing_is_approved(platform.as_str(), user_id)
            .await
        {
            Ok(paired) => paired,
            Err(e) => {
                tracing::error!(error = %e, "router: cannot check pairing; refusing");
                false
            }
        }
    }

    fn require_mention(&self, platform: Platform) -> bool {
        match platform {
            Platform::Telegram => self
                .config
                .telegram
                .as_ref()
                .is_none_or(|t| t.require_mention),
            _ => true,
        }
    }

    /// The Hermes session key: DMs per chat; groups per chat and member (unless shared);
    /// threads per thread (per member only with `thread_sessions_per_user`).
    pub fn session_key(&self, chat: &ChatRef, user_id: &str) -> String {
        let base = format!(
            "agent:main:{}:{}:{}",
            chat.platform,
            chat.kind.as_str(),
            chat.chat_id
        );
        let sessions = &self.config.sessions;
        match (chat.kind, &chat.thread_id) {
            (ChatKind::Direct, None) => base,
            (ChatKind::Direct, Some(thread)) => format!("{base}:{thread}"),
            (_, Some(thread)) if sessions.thread_sessions_per_user => {
                format!("{base}:{thread}:{user_id}")
            }
            (_, Some(thread)) => format!("{base}:{thread}"),
            (_, None) if sessions.group_sessions_per_user => format!("{base}:{user_id}"),
            (_, None) => base,
        }
    }

    async fn end(
        &self,
        id: i64,
        state: InboxState,
        note: &str,
        reply: Option<(ChatRef, String, Option<String>)>,
    ) {
        let record = crate::store::TurnRecord {
            session_id: None,
            messages: Vec::new(),
            outbox: reply
                .as_ref()
                .map(|(chat, text, reply_to)| {
                    self.services
                        .delivery
                        .reply_rows(chat, text, reply_to.clone())
                })
                .unwrap_or_default(),
            inbox_ids: vec![id],
            state,
            outcome: note.to_owned(),
        };
        match self.services.store.finish_turn(record).await {
            Ok(_) => {
                if let Some((chat, _, _)) = reply {
                    self.services.delivery.wake(&chat);
                }
            }
            Err(e) => tracing::error!(error = %e, "router: could not record an outcome"),
        }
    }
}

fn pairing_text(platform: Platform, code: &str, reminder: bool) -> String {
    let opening = if reminder {
        "You still need to be paired with this bot."
    } else {
        "Hi! I don't know you yet, so I can't answer."
    };
    format!(
        "{opening}\n\nYour pairing code: `{code}`\n\nAsk the owner of this bot to run:\n`hermes-gateway pairing approve {platform} {code}`\n\nThe code is valid for one hour."
    )
}
