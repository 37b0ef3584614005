//! The router: every recorded inbound event passes here. It authorises the author
//! (invariant 5: people not allowed never reach the agent, its tools or its approvals),
//! answers unknown people in a DM with a pairing code, applies the group mention rule,
//! resolves approval presses and `/approve` `/deny` at once (a turn may be parked waiting for
//! them), answers `/help`, derives the session key, and hands messages and session commands
//! to the session's actor.
//!
//! Events are dispatched concurrently per conversation and in order within one
//! ([`Router::submit`]); nothing here waits on a platform, so a slow chat never holds up
//! the others (a press's notice is handed to the adapter, which holds the press open).
//!
//! Here: dispatch, admission and routing; `access.rs`: allowlists, pairing, the mention
//! rule; `presses.rs`: presses and `/approve` `/deny`; `commands.rs`: the chat commands;
//! `tiers.rs`: admins and users (who may run which command, who may decide for others).

use std::collections::{HashMap, VecDeque};
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex};

use futures_util::FutureExt;
use hermes_adapter::{
    Author, ChatKind, ChatRef, CommandCall, Inbound, InboundKind, InboundMessage, Outbound,
    Platform, Press, Wakeup,
};
use tokio_util::task::TaskTracker;

mod access;
pub mod commands;
mod presses;
mod tiers;

use crate::approval::{ApprovalBroker, Decision, Resolution, Target, parse_choice_id};
use crate::config::Config;
use crate::session::{self, Directory, SessionInput, SessionServices, UserInput};
use crate::store::{InboxRow, InboxState, PairingRequestOutcome, TurnRecord};
use commands::Action;

pub struct Router {
    config: Arc<Config>,
    services: Arc<SessionServices>,
    approvals: Arc<ApprovalBroker>,
    directory: Directory,
    /// Conversations with events being dispatched, each with the events still to go (in
    /// order); an entry exists exactly while its dispatcher task runs.
    queues: Mutex<HashMap<String, VecDeque<InboxRow>>>,
    /// The dispatch tasks, for shutdown.
    tasks: TaskTracker,
    /// When each stranger ("platform:user") was last told that too many pairing requests
    /// wait: told again only after [`TURNED_AWAY_EVERY`], so writing again and again does
    /// not make the bot answer again and again.
    turned_away: Mutex<HashMap<String, std::time::Instant>>,
}

/// A reply to send while ending an inbox row.
struct Reply {
    chat: ChatRef,
    text: String,
    reply_to: Option<String>,
}

impl Reply {
    /// `text`, as a reply to `message` in `chat`.
    fn to(chat: &ChatRef, message: &InboundMessage, text: &str) -> Reply {
        Reply {
            chat: chat.clone(),
            text: text.to_owned(),
            reply_to: Some(message.message_id.clone()),
        }
    }
}

impl Router {
    pub fn new(
        config: Arc<Config>,
        services: Arc<SessionServices>,
        approvals: Arc<ApprovalBroker>,
    ) -> Self {
        Router {
            config,
            services,
            approvals,
            directory: Directory::default(),
            queues: Mutex::new(HashMap::new()),
            tasks: TaskTracker::new(),
            turned_away: Mutex::new(HashMap::new()),
        }
    }

    /// Dispatch a recorded event: after the events of its conversation that came before it,
    /// alongside those of other conversations.
    pub fn submit(self: &Arc<Self>, row: InboxRow) {
        let key = row.event.chat.conversation();
        let mut queues = self.queues.lock().expect("dispatch queues lock");
        if let Some(queue) = queues.get_mut(&key) {
            // Its dispatcher is running and will get to it.
            queue.push_back(row);
            return;
        }
        queues.insert(key.clone(), VecDeque::from([row]));
        drop(queues);
        let this = self.clone();
        self.tasks.spawn(async move {
            loop {
                let next = {
                    let mut queues = this.queues.lock().expect("dispatch queues lock");
                    let queue = queues.get_mut(&key).expect("a running dispatcher's queue");
                    let next = queue.pop_front();
                    if next.is_none() {
                        // Retire under the lock `submit` pushes under: nothing is left behind.
                        queues.remove(&key);
                    }
                    next
                };
                let Some(row) = next else { return };
                let (id, event) = (row.id, row.event.event_id.clone());
                // A bug in one event must not wedge its conversation: the row stays open in
                // the inbox (resumed at the next start) and the queue goes on.
                if AssertUnwindSafe(this.dispatch(row)).catch_unwind().await.is_err() {
                    tracing::error!(inbox = id, %event, "router: dispatching an event panicked; it stays open in the inbox");
                }
            }
        });
    }

    /// Wait for the dispatches under way (shutdown).
    pub async fn drained(&self) {
        self.tasks.close();
        self.tasks.wait().await;
    }

    /// Handle one recorded event. Never fails: every path ends the inbox row or hands it on.
    async fn dispatch(&self, row: InboxRow) {
        let InboxRow { id, event } = row;
        let Inbound {
            chat, author, kind, ..
        } = &event;
        let command_text;
        let message = match kind {
            InboundKind::Wakeup(wakeup) => return self.wake(id, chat, author, wakeup).await,
            InboundKind::Press(press) => {
                let allowed = self.is_allowed(chat.platform, &author.user_id).await;
                return self.press(id, chat, author, press, allowed).await;
            }
            InboundKind::Message(m) => m,
            InboundKind::Command(CommandCall {
                name,
                args,
                respond_via,
            }) => {
                // A native command is the same as its text form.
                command_text = InboundMessage {
                    message_id: respond_via.clone().unwrap_or_default(),
                    text: format!("/{name} {args}"),
                    addressed: true,
                    ..Default::default()
                };
                &command_text
            }
        };
        if self.admit(id, chat, author, message).await {
            self.handle_message(id, chat, author, message).await;
        }
    }

    /// Whether a message gets any further: its author is allowed (a stranger in a DM gets
    /// a pairing code), a group message is addressed to the bot where the mention rule
    /// says so, and there is something to read. A message turned away is ended here.
    async fn admit(
        &self,
        id: i64,
        chat: &ChatRef,
        author: &Author,
        message: &InboundMessage,
    ) -> bool {
        let reply = |text: &str| Some(Reply::to(chat, message, text));
        if !self.is_allowed(chat.platform, &author.user_id).await {
            self.stranger(id, chat, author, &message.message_id).await;
            return false;
        }
        if self.needs_mention(chat, message) {
            self.end(
                id,
                InboxState::Ignored,
                "group message not addressed to the bot",
                None,
            )
            .await;
            return false;
        }
        if let Some(what) = &message.unsupported {
            let text = format!(
                "I can only read text (and captions) for now, so I can't open {what}. Please describe it in words."
            );
            self.end(id, InboxState::Refused, "unsupported content", reply(&text))
                .await;
            return false;
        }
        if message.text.trim().is_empty() && message.attachments.is_empty() {
            self.end(
                id,
                InboxState::Refused,
                "empty message",
                reply("Yes? Write your question after the mention."),
            )
            .await;
            return false;
        }
        true
    }

    /// An admitted message: a chat command ([`commands::COMMANDS`]) is answered here or
    /// handed to the conversation's actor; anything else goes to the actor for the agent.
    async fn handle_message(
        &self,
        id: i64,
        chat: &ChatRef,
        author: &Author,
        message: &InboundMessage,
    ) {
        let reply = |text: &str| Some(Reply::to(chat, message, text));
        let text = message.text.trim();
        let (command, args) = split_command(text);
        let found = command.as_deref().and_then(commands::find);
        let shared = self.config.sessions.shared(chat);
        if let Some(command) = found
            && !self.tier(chat, &author.user_id).may_run(command, shared)
        {
            tracing::info!(user = %author.user_id, command = command.name, "router: a command refused to a user (admin only here)");
            let text = format!(
                "⛔ /{} is for the admins here. /whoami shows what you can run.",
                command.name
            );
            return self
                .end(
                    id,
                    InboxState::Refused,
                    "command refused by tier",
                    reply(&text),
                )
                .await;
        }
        let input = match found.map(|c| (c, &c.action)) {
            Some((_, Action::Help)) => {
                return self
                    .end(id, InboxState::Done, "help", reply(commands::help_text()))
                    .await;
            }
            Some((_, Action::Commands)) => {
                let Ok(page) = (if args.is_empty() {
                    Ok(1)
                } else {
                    args.parse::<usize>()
                }) else {
                    return self
                        .end(
                            id,
                            InboxState::Refused,
                            "bad /commands",
                            reply("Usage: `/commands [page]`"),
                        )
                        .await;
                };
                let home = self.config.home.clone();
                let skills = tokio::task::spawn_blocking(move || {
                    crate::tools::skills::scan(&home)
                        .into_iter()
                        .map(|s| (s.name, s.description))
                        .collect::<Vec<_>>()
                })
                .await
                .unwrap_or_default();
                let text = commands::commands_page(page, commands::PER_PAGE, &skills);
                return self
                    .end(id, InboxState::Done, "commands", reply(&text))
                    .await;
            }
            Some((_, Action::WhoAmI)) => {
                let text = self
                    .tier(chat, &author.user_id)
                    .describe(chat, &author.user_id, shared);
                return self.end(id, InboxState::Done, "whoami", reply(&text)).await;
            }
            Some((_, Action::Approve)) => {
                let Some(decision) = Decision::from_approve_args(args) else {
                    return self
                        .end(
                            id,
                            InboxState::Refused,
                            "bad /approve",
                            reply("Use /approve, /approve session or /approve always."),
                        )
                        .await;
                };
                return self
                    .decide_by_text(id, chat, author, decision, message)
                    .await;
            }
            Some((_, Action::Deny)) => {
                let reason = (!args.is_empty()).then(|| args.to_owned());
                return self
                    .decide_by_text(id, chat, author, Decision::Deny(reason), message)
                    .await;
            }
            Some((command, Action::Session(make))) => SessionInput::Command {
                inbox_id: id,
                message_id: message.message_id.clone(),
                author: author.clone(),
                command: make(args),
                while_busy: command.while_busy,
            },
            None => SessionInput::Message(UserInput {
                inbox_id: Some(id),
                message_id: Some(message.message_id.clone()),
                author: author.clone(),
                text: text.to_owned(),
                attachments: message.attachments.clone(),
            }),
        };
        let key = session_key(chat, &author.user_id, &self.config.sessions);
        session::route(&self.directory, &self.services, &key, chat, input).await;
    }

    /// A background process finished with `notify_on_complete` (recorded in the inbox, so a
    /// crash cannot lose it): a turn in its session, answering for the inbox row.
    async fn wake(&self, id: i64, chat: &ChatRef, author: &Author, wakeup: &Wakeup) {
        // A scheduled job speaks for its creator: not once they are no longer allowed.
        if wakeup.session_key.starts_with("cron:")
            && !self.is_allowed(chat.platform, &author.user_id).await
        {
            tracing::warn!(user = %author.user_id, "router: a scheduled job of someone no longer allowed is not run");
            return self
                .end(
                    id,
                    InboxState::Refused,
                    "scheduled job of someone not allowed",
                    None,
                )
                .await;
        }
        let input = SessionInput::Message(UserInput {
            inbox_id: Some(id),
            message_id: None,
            author: author.clone(),
            text: wakeup.text.clone(),
            attachments: Vec::new(),
        });
        session::route(
            &self.directory,
            &self.services,
            &wakeup.session_key,
            chat,
            input,
        )
        .await;
    }

    async fn end(&self, id: i64, state: InboxState, note: &str, reply: Option<Reply>) {
        let delivery = &self.services.delivery;
        let outbox = reply
            .map(|r| delivery.reply_rows(&r.chat, &r.text, r.reply_to))
            .unwrap_or_default();
        if let Err(e) = delivery
            .commit(TurnRecord::outcome(vec![id], state, note, outbox))
            .await
        {
            tracing::error!(error = %e, "router: could not record an outcome");
        }
    }
}

/// `/cmd@bot args` → (`cmd`, `args`); `(None, text)` for ordinary text.
fn split_command(text: &str) -> (Option<String>, &str) {
    let Some(rest) = text.strip_prefix('/') else {
        return (None, text);
    };
    let (word, args) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
    let name = word
        .split('@')
        .next()
        .unwrap_or_default()
        .to_ascii_lowercase();
    (Some(name), args.trim())
}

/// The Hermes session key: DMs per chat; groups per chat and member (unless shared);
/// threads per thread (per member only with `thread_sessions_per_user`).
/// The conversation's stable identity ([`ChatRef::conversation`]: platform, kind, account,
/// chat, thread) is the base, so a Slack thread stays one session.
fn session_key(chat: &ChatRef, user_id: &str, sessions: &crate::config::SessionConfig) -> String {
    let base = format!("agent:main:{}", chat.conversation());
    if sessions.per_person(chat) {
        format!("{base}:{user_id}")
    } else {
        base
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::SessionConfig;

    fn chat(kind: ChatKind, thread: Option<&str>) -> ChatRef {
        ChatRef {
            platform: Platform::Telegram,
            account: None,
            chat_id: "-5".into(),
            thread_id: thread.map(str::to_owned),
            kind,
        }
    }

    #[test]
    fn session_keys_follow_the_hermes_table() {
        let per_user = SessionConfig {
            group_sessions_per_user: true,
            thread_sessions_per_user: false,
        };
        assert_eq!(
            session_key(&chat(ChatKind::Direct, None), "7", &per_user),
            "agent:main:telegram:dm:-5"
        );
        assert_eq!(
            session_key(&chat(ChatKind::Group, None), "7", &per_user),
            "agent:main:telegram:group:-5:7"
        );
        assert_eq!(
            session_key(&chat(ChatKind::Group, Some("9")), "7", &per_user),
            "agent:main:telegram:group:-5:9"
        );
        let shared = SessionConfig {
            group_sessions_per_user: false,
            thread_sessions_per_user: true,
        };
        assert_eq!(
            session_key(&chat(ChatKind::Group, None), "7", &shared),
            "agent:main:telegram:group:-5"
        );
        assert_eq!(
            session_key(&chat(ChatKind::Group, Some("9")), "7", &shared),
            "agent:main:telegram:group:-5:9:7"
        );
    }

    #[test]
    fn commands_split_from_their_arguments() {
        assert_eq!(
            split_command("/deny too risky"),
            (Some("deny".into()), "too risky")
        );
        assert_eq!(
            split_command("/Approve@hermes_bot session"),
            (Some("approve".into()), "session")
        );
        assert_eq!(split_command("/stop"), (Some("stop".into()), ""));
        assert_eq!(split_command("hello /stop"), (None, "hello /stop"));
    }
}
