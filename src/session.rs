//! The session actor: one tokio task per session key that owns the conversation. It runs one
//! agent turn at a time (invariant 3), decides what a message arriving mid-turn does (busy
//! modes interrupt / queue / steer), and handles `/stop`, `/new` and `/status` at once, even
//! while a turn runs. Its handle is an unbounded channel sender kept in the router's
//! [`Directory`]; an idle actor retires by removing itself from it under the same lock the
//! router sends under, so no message is ever left with a retired actor.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hermes_adapter::{Author, ChatRef, WorkingPhase};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::agent::{AgentRuntime, TurnInput, TurnOutcome};
use crate::approval::ApprovalBroker;
use crate::config::BusyMode;
use crate::delivery::Delivery;
use crate::process::ProcessRegistry;
use crate::store::{InboxState, NewOutboxRow, Store, StoredMessage, TurnRecord};
use crate::tools::ToolContext;

/// How long an actor without work lives on.
const IDLE_RETIRE: Duration = Duration::from_secs(600);

/// What the router hands an actor.
#[derive(Debug)]
pub enum SessionInput {
    Message(UserInput),
    Command {
        inbox_id: i64,
        message_id: String,
        author: Author,
        command: SessionCommand,
    },
}

/// A message for the agent: from a person, or from the gateway itself (a background process
/// finished with `notify_on_complete`), which has no inbox row.
#[derive(Debug, Clone)]
pub struct UserInput {
    pub inbox_id: Option<i64>,
    /// The platform's id of the message, to reply to; `None` for the gateway's own inputs.
    pub message_id: Option<String>,
    /// Who wrote it (for the gateway's own inputs: whoever started the work). In a shared
    /// session each message has its own author.
    pub author: Author,
    pub text: String,
}

/// Commands that act on the session itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionCommand {
    /// Stop the running turn (and background processes when configured).
    Stop,
    /// Stop the running turn and every background process of the session.
    StopAll,
    New,
    Status,
}

/// Everything actors share.
pub struct SessionServices {
    pub store: Store,
    pub delivery: Delivery,
    pub agent: Arc<AgentRuntime>,
    pub busy_mode: BusyMode,
    pub approvals: Arc<ApprovalBroker>,
    pub processes: Arc<ProcessRegistry>,
    /// `/stop` also kills background processes.
    pub stop_kills_background: bool,
    /// Cancelled on daemon shutdown; every turn's token is a child of it.
    pub shutdown: CancellationToken,
}

/// Session key → the actor's inbox.
pub type Directory = Arc<Mutex<HashMap<String, mpsc::UnboundedSender<SessionInput>>>>;

/// Hand `input` to the session's actor, starting one if needed.
pub fn route(
    directory: &Directory,
    services: &Arc<SessionServices>,
    key: &str,
    chat: &ChatRef,
    input: SessionInput,
) {
    let mut actors = directory.lock().expect("directory lock");
    let input = match actors.get(key) {
        Some(tx) => match tx.send(input) {
            Ok(()) => return,
            Err(mpsc::error::SendError(input)) => input, // the actor died; start another
        },
        None => input,
    };
    let (tx, rx) = mpsc::unbounded_channel();
    let _ = tx.send(input);
    actors.insert(key.to_owned(), tx);
    let actor = SessionActor {
        key: key.to_owned(),
        chat: chat.clone(),
        services: services.clone(),
        directory: directory.clone(),
        rx,
        session_id: None,
        queued: VecDeque::new(),
        interrupting: Vec::new(),
    };
    tokio::spawn(actor.run());
}

/// Why a running turn was cancelled by the actor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StopReason {
    /// A new message interrupts it (busy mode `interrupt`).
    Interrupt,
    /// `/stop`: the command's inbox id and message id.
    Stop { inbox_id: i64 },
    /// `/new` or `/reset`.
    Reset,
}

struct RunningTurn {
    inputs: Vec<UserInput>,
    cancel: CancellationToken,
    /// Cancelled when the person writes while the turn runs.
    attention: CancellationToken,
    steer: mpsc::UnboundedSender<String>,
    /// Inputs handed to the turn as steering, in order.
    steered: Vec<UserInput>,
    stop: Option<StopReason>,
    started: Instant,
    task: JoinHandle<(TurnOutcome, mpsc::UnboundedReceiver<String>)>,
}

struct SessionActor {
    key: String,
    chat: ChatRef,
    services: Arc<SessionServices>,
    directory: Directory,
    rx: mpsc::UnboundedReceiver<SessionInput>,
    /// The open session's id, once known.
    session_id: Option<String>,
    /// Turns waiting for the running one (busy mode `queue`).
    queued: VecDeque<Vec<UserInput>>,
    /// Messages that interrupted the running turn, to be answered together with it.
    interrupting: Vec<UserInput>,
}

impl SessionActor {
    async fn run(mut self) {
        let mut running: Option<RunningTurn> = None;
        loop {
            tokio::select! {
                input = self.rx.recv() => match input {
                    Some(input) => self.handle(input, &mut running).await,
                    None => break,
                },
                ended = join(&mut running) => {
                    let turn = running.take().expect("a turn was running");
                    match self.turn_ended(turn, ended).await {
                        Some(resume) => self.start(resume.inputs, resume.user_text, resume.carried, &mut running).await,
                        None => self.start_next(&mut running).await,
                    }
                }
                _ = tokio::time::sleep(IDLE_RETIRE), if running.is_none() => {
                    let mut actors = self.directory.lock().expect("directory lock");
                    if self.rx.is_empty() {
                        actors.remove(&self.key);
                        return;
                    }
                }
            }
        }
    }

    async fn handle(&mut self, input: SessionInput, running: &mut Option<RunningTurn>) {
        match input {
            SessionInput::Message(message) => match running {
                None => {
                    let text = message.text.clone();
                    self.start(vec![message], text, Vec::new(), running).await
                }
                Some(turn) => {
                    // Whatever the busy mode, a tool waiting on a process stops waiting.
                    turn.attention.cancel();
                    self.busy(turn, message);
                }
            },
            SessionInput::Command {
                inbox_id,
                message_id,
                author,
                command,
            } => {
                self.command(inbox_id, message_id, &author, command, running)
                    .await;
            }
        }
    }

    /// A message arrived while `turn` runs: apply the busy mode.
    fn busy(&mut self, turn: &mut RunningTurn, message: UserInput) {
        match self.services.busy_mode {
            BusyMode::Interrupt => {
                tracing::info!(session = %self.key, "session: new message interrupts the running turn");
                if turn.stop.is_none() {
                    turn.stop = Some(StopReason::Interrupt);
                }
                turn.cancel.cancel();
                self.interrupting.push(message);
            }
            BusyMode::Queue => self.queued.push_back(vec![message]),
            BusyMode::Steer => {
                if turn.steer.send(message.text.clone()).is_ok() {
                    turn.steered.push(message);
                } else {
                    self.queued.push_back(vec![message]);
                }
            }
        }
    }

    async fn command(
        &mut self,
        inbox_id: i64,
        message_id: String,
        author: &Author,
        command: SessionCommand,
        running: &mut Option<RunningTurn>,
    ) {
        match command {
            SessionCommand::Stop | SessionCommand::StopAll => {
                if command == SessionCommand::StopAll || self.services.stop_kills_background {
                    let killed = self.services.processes.kill_session(&self.key).await;
                    if killed > 0 {
                        tracing::info!(session = %self.key, killed, "session: background processes killed by /stop");
                    }
                }
                let waiting = self.drop_waiting();
                match running {
                    Some(turn) => {
                        // Answered when the turn has really ended (see `turn_ended`).
                        turn.stop = Some(StopReason::Stop { inbox_id });
                        turn.cancel.cancel();
                        self.finish(waiting, InboxState::Done, "stopped", None)
                            .await;
                    }
                    None => {
                        self.finish(waiting, InboxState::Done, "stopped", None)
                            .await;
                        self.say(inbox_id, &message_id, "Nothing is running right now.")
                            .await;
                    }
                }
            }
            SessionCommand::New => {
                let mut cleared = self.drop_waiting();
                if let Some(turn) = running {
                    turn.stop = Some(StopReason::Reset);
                    turn.cancel.cancel();
                }
                cleared.push(inbox_id);
                self.services.approvals.forget_session(&self.key);
                if let Err(e) = self.services.store.session_end(&self.key, "reset").await {
                    tracing::error!(error = %e, "session: could not end the session");
                }
                self.session_id = None;
                let reply = "✨ New session started. Earlier messages are forgotten; what would you like to do?";
                self.finish(
                    cleared,
                    InboxState::Done,
                    "reset",
                    Some((reply.to_owned(), Some(message_id))),
                )
                .await;
            }
            SessionCommand::Status => {
                let text = self.status(author, running.as_ref()).await;
                self.say(inbox_id, &message_id, &text).await;
            }
        }
    }

    async fn status(&mut self, author: &Author, running: Option<&RunningTurn>) -> String {
        let store = &self.services.store;
        let session = store
            .session_open(&self.key, &self.chat, Some(&author.user_id))
            .await;
        let mut lines = vec!["📊 Status".to_owned()];
        match session {
            Ok(s) => {
                self.session_id = Some(s.id.clone());
                lines.push(format!("Session: {} ({} messages)", s.id, s.message_count));
            }
            Err(e) => lines.push(format!("Session: unavailable ({e})")),
        }
        lines.push(format!("Model: {}", self.services.agent.llm.model()));
        lines.push(match running {
            Some(t) => format!("Agent: working for {}s", t.started.elapsed().as_secs()),
            None => "Agent: idle".to_owned(),
        });
        if !self.queued.is_empty() {
            lines.push(format!("Queued: {} message(s)", self.queued.len()));
        }
        lines.push(format!("Busy mode: {}", self.services.busy_mode.as_str()));
        lines.join("\n")
    }

    /// Inbox ids of everything waiting (queued or interrupting), now dropped.
    fn drop_waiting(&mut self) -> Vec<i64> {
        let mut ids: Vec<i64> = self
            .queued
            .drain(..)
            .flatten()
            .filter_map(|i| i.inbox_id)
            .collect();
        ids.extend(self.interrupting.drain(..).filter_map(|i| i.inbox_id));
        ids
    }

    /// Start a turn answering `inputs` with `user_text`, continuing `carried` messages of an
    /// interrupted attempt.
    async fn start(
        &mut self,
        inputs: Vec<UserInput>,
        user_text: String,
        carried: Vec<StoredMessage>,
        running: &mut Option<RunningTurn>,
    ) {
        let store = &self.services.store;
        // The turn speaks for the latest input's author (in a shared session, whoever wrote
        // last): that is who the model, the tools and the processes it starts are told about.
        let author = inputs
            .last()
            .expect("a turn answers at least one input")
            .author
            .clone();
        let session = match store
            .session_open(&self.key, &self.chat, Some(&author.user_id))
            .await
        {
            Ok(s) => s,
            Err(e) => {
                tracing::error!(error = %e, "session: cannot open the session");
                let ids = inputs.iter().filter_map(|i| i.inbox_id).collect();
                let reply_to = inputs.last().and_then(|i| i.message_id.clone());
                let notice = "⚠️ I could not open this conversation's history (database error); please try again.";
                self.finish(
                    ids,
                    InboxState::Failed,
                    "store error",
                    Some((notice.to_owned(), reply_to)),
                )
                .await;
                return;
            }
        };
        self.session_id = Some(session.id.clone());
        let history = store
            .session_messages(&session.id)
            .await
            .unwrap_or_default();
        let cancel = self.services.shutdown.child_token();
        let (steer, mut steer_rx) = mpsc::unbounded_channel();
        let input = TurnInput {
            history,
            carried,
            user_text,
            context: self.context(&inputs),
        };
        let agent = self.services.agent.clone();
        let regarding = inputs.last().and_then(|i| i.message_id.clone());
        let working = spawn_working(
            self.services.delivery.clone(),
            self.chat.clone(),
            regarding,
            cancel.clone(),
        );
        let attention = CancellationToken::new();
        let tools_ctx = ToolContext {
            session_key: self.key.clone(),
            chat: self.chat.clone(),
            author,
            cancel: cancel.clone(),
            attention: attention.clone(),
        };
        let task = tokio::spawn(async move {
            let outcome = agent.run_turn(input, tools_ctx, &mut steer_rx).await;
            working.cancel();
            (outcome, steer_rx)
        });
        *running = Some(RunningTurn {
            inputs,
            cancel,
            attention,
            steer,
            steered: Vec::new(),
            stop: None,
            started: Instant::now(),
            task,
        });
    }

    async fn start_next(&mut self, running: &mut Option<RunningTurn>) {
        if running.is_some() {
            return;
        }
        let inputs = if !self.interrupting.is_empty() {
            std::mem::take(&mut self.interrupting)
        } else if let Some(inputs) = self.queued.pop_front() {
            inputs
        } else {
            return;
        };
        let text = joined_text(&inputs);
        self.start(inputs, text, Vec::new(), running).await;
    }

    /// Record how a turn ended; returns the merged turn to start when it was interrupted.
    async fn turn_ended(
        &mut self,
        turn: RunningTurn,
        ended: Option<(TurnOutcome, mpsc::UnboundedReceiver<String>)>,
    ) -> Option<Resume> {
        let Some((outcome, mut steer_rx)) = ended else {
            let ids = turn.inputs.iter().filter_map(|i| i.inbox_id).collect();
            let reply_to = turn.inputs.last().and_then(|i| i.message_id.clone());
            let notice =
                "⚠️ Something went wrong inside the gateway while answering; please try again.";
            self.finish(
                ids,
                InboxState::Failed,
                "turn panicked",
                Some((notice.to_owned(), reply_to)),
            )
            .await;
            return None;
        };
        // Steering texts the turn never read run as the next turn.
        let mut unread = 0;
        while steer_rx.try_recv().is_ok() {
            unread += 1;
        }
        let mut steered = turn.steered.clone();
        let leftover = steered.split_off(steered.len() - unread);
        if !leftover.is_empty() {
            self.queued.push_front(leftover);
        }
        let mut inputs = turn.inputs.clone();
        inputs.extend(steered);
        let ids: Vec<i64> = inputs.iter().filter_map(|i| i.inbox_id).collect();
        let reply_to = inputs.last().and_then(|i| i.message_id.clone());

        match (outcome, turn.stop) {
            (TurnOutcome::Cancelled { messages }, Some(StopReason::Interrupt)) => {
                // Answer the earlier and the new text together, continuing the partial work
                // (which already holds the earlier text).
                let user_text = joined_text(&self.interrupting);
                let mut merged = inputs;
                merged.append(&mut self.interrupting);
                return Some(Resume {
                    inputs: merged,
                    user_text,
                    carried: messages,
                });
            }
            (TurnOutcome::Cancelled { messages }, Some(StopReason::Stop { inbox_id })) => {
                let mut all = ids;
                all.push(inbox_id);
                let record = TurnRecord {
                    session_id: self.session_id.clone(),
                    messages,
                    outbox: self.reply_rows("⏹ Stopped.", reply_to),
                    inbox_ids: all,
                    state: InboxState::Done,
                    outcome: "stopped".into(),
                };
                self.commit(record).await;
            }
            (_, Some(StopReason::Reset)) => {
                self.finish(ids, InboxState::Done, "reset", None).await;
            }
            (TurnOutcome::Cancelled { .. }, None) => {
                // Shutdown: the inbox rows stay open and the turn runs again after a restart.
                tracing::info!(session = %self.key, "session: turn cancelled by shutdown; it will resume after restart");
            }
            (
                TurnOutcome::Answered { reply, messages }
                | TurnOutcome::BudgetExhausted { reply, messages },
                stop,
            ) => {
                let mut all = ids;
                if let Some(StopReason::Stop { inbox_id }) = stop {
                    all.push(inbox_id);
                }
                let record = TurnRecord {
                    session_id: self.session_id.clone(),
                    messages,
                    outbox: self.reply_rows(&reply, reply_to),
                    inbox_ids: all,
                    state: InboxState::Done,
                    outcome: "answered".into(),
                };
                self.commit(record).await;
            }
            (TurnOutcome::Failed { notice, messages }, stop) => {
                // Keep what the person said, so the conversation goes on from it.
                let kept = messages.into_iter().filter(|m| m.role == "user").collect();
                let mut all = ids;
                if let Some(StopReason::Stop { inbox_id }) = stop {
                    all.push(inbox_id);
                }
                let record = TurnRecord {
                    session_id: self.session_id.clone(),
                    messages: kept,
                    outbox: self.reply_rows(&notice, reply_to),
                    inbox_ids: all,
                    state: InboxState::Failed,
                    outcome: "model unavailable".into(),
                };
                self.commit(record).await;
            }
        }
        None
    }

    fn reply_rows(&self, markdown: &str, reply_to: Option<String>) -> Vec<NewOutboxRow> {
        self.services
            .delivery
            .reply_rows(&self.chat, markdown, reply_to)
    }

    async fn commit(&self, record: TurnRecord) {
        if let Err(e) = self.services.delivery.commit(record).await {
            tracing::error!(error = %e, session = %self.key, "session: could not record the end of a turn");
        }
    }

    /// End inbox rows, optionally with a reply (`(text, message to reply to)`).
    async fn finish(
        &self,
        ids: Vec<i64>,
        state: InboxState,
        outcome: &str,
        reply: Option<(String, Option<String>)>,
    ) {
        if ids.is_empty() && reply.is_none() {
            return;
        }
        let outbox = match reply {
            Some((text, reply_to)) => self.reply_rows(&text, reply_to),
            None => Vec::new(),
        };
        self.commit(TurnRecord::outcome(ids, state, outcome, outbox))
            .await;
    }

    async fn say(&self, inbox_id: i64, message_id: &str, text: &str) {
        self.finish(
            vec![inbox_id],
            InboxState::Done,
            "command",
            Some((text.to_owned(), Some(message_id.to_owned()))),
        )
        .await;
    }

    /// Where the conversation happens and who is speaking (the author of the latest input;
    /// everyone else who contributed to this turn is named too).
    fn context(&self, inputs: &[UserInput]) -> String {
        let latest = &inputs
            .last()
            .expect("a turn answers at least one input")
            .author;
        let handle = latest
            .username
            .as_deref()
            .map(|u| format!(" (@{u})"))
            .unwrap_or_default();
        let mut others: Vec<&str> = inputs
            .iter()
            .map(|i| i.author.display_name.as_str())
            .filter(|name| *name != latest.display_name)
            .collect();
        others.dedup();
        let also = if others.is_empty() {
            String::new()
        } else {
            format!(" Also writing in this turn: {}.", others.join(", "))
        };
        format!(
            "Platform: {}. Chat: {} {}. Person: {}{handle}.{also}",
            self.chat.platform,
            match self.chat.kind {
                hermes_adapter::ChatKind::Direct => "direct message",
                hermes_adapter::ChatKind::Group => "group",
                hermes_adapter::ChatKind::Channel => "channel",
            },
            self.chat.chat_id,
            latest.display_name,
        )
    }
}

/// A turn to start in place of an interrupted one.
struct Resume {
    inputs: Vec<UserInput>,
    user_text: String,
    carried: Vec<StoredMessage>,
}

/// The texts of several inputs answered together; each named by its author when more than
/// one person wrote them.
fn joined_text(inputs: &[UserInput]) -> String {
    let several = inputs
        .iter()
        .any(|i| i.author.user_id != inputs[0].author.user_id);
    inputs
        .iter()
        .map(|i| match several {
            true => format!("{}: {}", i.author.display_name, i.text),
            false => i.text.clone(),
        })
        .collect::<Vec<_>>()
        .join("\n\n")
}

/// The running turn's result, or pending forever when none runs.
async fn join(
    running: &mut Option<RunningTurn>,
) -> Option<(TurnOutcome, mpsc::UnboundedReceiver<String>)> {
    match running {
        Some(turn) => (&mut turn.task).await.ok(),
        None => std::future::pending().await,
    }
}

/// Show the working indicator for the message being answered, refresh it as the platform
/// needs, and take it down when the returned token is cancelled.
fn spawn_working(
    delivery: Delivery,
    chat: ChatRef,
    regarding: Option<String>,
    turn: CancellationToken,
) -> CancellationToken {
    let stop = turn.child_token();
    let Some(indicator) = delivery
        .sender(chat.platform)
        .and_then(|s| s.capabilities().working)
    else {
        return stop;
    };
    let done = stop.clone();
    tokio::spawn(async move {
        delivery.working(&chat, regarding.clone(), WorkingPhase::Start);
        loop {
            let refresh = async {
                match indicator.refresh {
                    Some(every) => tokio::time::sleep(every).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = done.cancelled() => break,
                _ = refresh => delivery.working(&chat, regarding.clone(), WorkingPhase::Refresh),
            }
        }
        delivery.working(&chat, regarding, WorkingPhase::Done);
    });
    stop
}
