//! Sessions: one actor (a tokio task) per session key owns the conversation. It runs one
//! agent turn at a time (invariant 3), decides what a message arriving mid-turn does (busy
//! modes interrupt / queue / steer), and handles `/stop`, `/new` and `/status` at once, even
//! while a turn runs.
//!
//! This file holds what the router sees: the inputs, the [`SessionHandle`] kept in the
//! [`Directory`], and [`route`]. The actor itself is split by concern: `actor` (its loop,
//! busy modes, starting turns, the working indicator), `commands` (`/stop`, `/new`,
//! `/status`), `ending` (recording how a turn ended, in one transaction).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hermes_adapter::{Author, ChatRef, TurnEnd, WorkingPhase};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tokio_util::task::task_tracker::TaskTrackerToken;

use crate::agent::{AgentRuntime, TurnInput, TurnOutcome};
use crate::approval::ApprovalBroker;
use crate::config::BusyMode;
use crate::delivery::Delivery;
use crate::process::ProcessRegistry;
use crate::store::{InboxState, Kept, NewOutboxRow, Store, StoredMessage, TurnRecord};
use crate::tools::ToolContext;
pub use operator::Operator;
pub use titles::Titles;

mod actor;
mod chat_commands;
mod commands;
mod context_view;
mod earlier;
mod ending;
mod operator;
mod reloads;
mod side;
mod starting;
mod stream;
mod titles;
mod voice;

/// How long an actor without work lives on: as long as an idle delivery lane. It keeps
/// nothing a turn needs (each turn opens its session from the store), so an idle one is
/// only its task and its channel (about 1.8 KiB), and a new one costs a spawn.
const IDLE_RETIRE: Duration = Duration::from_secs(30);

/// What the router hands an actor.
#[derive(Debug)]
pub enum SessionInput {
    Message(UserInput),
    Command {
        inbox_id: i64,
        message_id: String,
        author: Author,
        command: SessionCommand,
        /// Whether it runs while a turn runs (`router::commands` declares it).
        while_busy: WhileBusy,
    },
}

/// What the person is told when a command that waits for a turn comes while one runs
/// (a history edit would race it).
const BUSY: &str =
    "⏳ I'm still working on your last message. Wait for my answer, or /stop it first.";

/// What a command does while a turn runs in its conversation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WhileBusy {
    /// It runs at once (`/stop`, `/status`, …).
    Runs,
    /// It is refused with a word to wait (it edits the history the turn is writing).
    Refused,
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
    /// Files that came with it (fetched when its turn starts).
    pub attachments: Vec<hermes_adapter::Attachment>,
}

/// Commands that act on the session itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionCommand {
    /// Stop the running turn (and background processes when configured).
    Stop,
    /// Stop the running turn and every background process of the session.
    StopAll,
    New,
    Status,
    /// The tokens the session and today took.
    Usage,
    /// Show or switch the chat's model (`provider:model`; empty: show).
    Model(String),
    /// Run the last message again.
    Retry,
    /// Take the last exchange back.
    Undo,
    /// Summarise the earlier part of the conversation now.
    Compress,
    /// Show or set the session's title.
    Title(String),
    /// This chat becomes its platform's home channel.
    SetHome,
    /// Show or choose the chat's personality.
    Personality(String),
    /// Show or choose how much tool progress the chat sees.
    Verbose(String),
    /// List this conversation's earlier sessions (`full`, `search <words>`).
    Sessions(String),
    /// Take an earlier session up again (its number, id or title).
    Resume(String),
    /// Run a prompt in a fresh session beside this one.
    Background(String),
    /// A prompt for a turn of its own after the running one.
    Queue(String),
    /// Words for the running turn, after its next tool call.
    Steer(String),
    /// Show or set the chat's reasoning effort.
    Reasoning(String),
    /// Show or set when the chat hears its replies.
    Voice(String),
    /// What the conversation takes of the model's context.
    Context,
    /// Drain the daemon and start it again.
    Restart,
    /// The profile's name and home.
    Profile,
    /// Connect the MCP servers again from the configuration as it reads now.
    ReloadMcp,
    /// Scan the skills again.
    ReloadSkills,
    /// The platforms' states, or pause or resume one.
    Platform(String),
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
    /// Delegations running in the background (`/stop` and `/new` cancel the session's).
    pub delegations: Arc<crate::tools::delegate::Delegations>,
    /// The MCP servers (`/status` shows them; stopped at shutdown).
    pub mcp: Arc<crate::mcp::Mcp>,
    /// Questions the agent asked (`clarify`), answered by the person's next message.
    pub clarify: Arc<crate::tools::clarify::Clarify>,
    /// Turns the files people send into what the model reads.
    pub media: Arc<crate::media::MediaPreparer>,
    /// A model is chosen; while none is (a first run), every message is answered with how
    /// to choose one.
    pub model_chosen: bool,
    /// Answers shown as they are written (`streaming.*`), where the platform edits.
    pub streaming: Option<crate::config::StreamingConfig>,
    /// Per channel a model and a system prompt (`channel_overrides`).
    pub channel_overrides: crate::config::ChannelOverrides,
    /// The daemon's `work` stage: cancelled at shutdown once running turns had their time
    /// to finish; every turn's token is a child of it.
    pub work: CancellationToken,
    /// The daemon's `intake` stage: cancelled when the daemon stops taking messages (the
    /// start of a shutdown or a reload): no new turn starts; what waits stays open in the
    /// inbox for the next start.
    pub intake: CancellationToken,
    /// Turns (until their end is recorded) and working indicators, so shutdown can wait
    /// for them.
    pub tasks: TaskTracker,
    /// How the agent's commands are confined (`/status` says it).
    pub confinement: Arc<crate::confine::Confinement>,
    /// How sessions are titled automatically; `None`: they are not.
    pub titles: Option<titles::Titles>,
    /// `$HERMES_HOME` (`/reload_mcp` reads its configuration again).
    pub home: std::path::PathBuf,
    /// The daemon, for `/restart` and `/platform` (set once its adapters run).
    pub operator: std::sync::OnceLock<Arc<dyn Operator>>,
}

/// How many inputs wait for an actor before the router waits for it (each conversation is
/// dispatched in order, so only that conversation waits).
const INPUT_CAPACITY: usize = 32;

/// A cheap handle to a session's actor: what the router keeps and sends to.
#[derive(Clone)]
pub struct SessionHandle {
    /// Boxed: an actor's channel keeps a block of slots per actor, so small slots keep
    /// thousands of idle actors cheap.
    inputs: mpsc::Sender<Box<SessionInput>>,
}

/// Session key → the handle of its actor.
pub type Directory = Arc<Mutex<HashMap<String, SessionHandle>>>;

/// Hand `input` to the session's actor, starting one if needed.
///
/// The send happens under the directory lock an idle actor retires under, so no input is
/// ever left with a retired actor; only when the actor's inbox is full does the router wait
/// for room, outside the lock (a busy actor does not retire).
pub async fn route(
    directory: &Directory,
    services: &Arc<SessionServices>,
    key: &str,
    chat: &ChatRef,
    input: SessionInput,
) {
    let mut input = Box::new(input);
    loop {
        let handle = {
            let mut actors = directory.lock().expect("directory lock");
            let existing = actors.get(key).cloned();
            let fresh = |actors: &mut HashMap<String, SessionHandle>, input| {
                let handle = start_actor(directory, services, key, chat);
                // A new actor's inbox is empty: this cannot be full.
                let _ = handle.inputs.try_send(input);
                actors.insert(key.to_owned(), handle);
            };
            match existing {
                None => return fresh(&mut actors, input),
                Some(handle) => match handle.inputs.try_send(input) {
                    Ok(()) => return,
                    // The actor stopped: start another with this input first.
                    Err(mpsc::error::TrySendError::Closed(back)) => {
                        return fresh(&mut actors, back);
                    }
                    Err(mpsc::error::TrySendError::Full(back)) => {
                        input = back;
                        handle
                    }
                },
            }
        };
        match handle.inputs.send(input).await {
            Ok(()) => return,
            Err(mpsc::error::SendError(back)) => input = back,
        }
    }
}

/// Spawn an actor for `key`; the caller registers its handle.
fn start_actor(
    directory: &Directory,
    services: &Arc<SessionServices>,
    key: &str,
    chat: &ChatRef,
) -> SessionHandle {
    let (inputs, rx) = mpsc::channel(INPUT_CAPACITY);
    let actor = SessionActor {
        key: key.to_owned(),
        chat: chat.clone(),
        services: services.clone(),
        directory: directory.clone(),
        rx,
        session_id: None,
        queued: VecDeque::new(),
        interrupting: Vec::new(),
        stream_row: None,
        titled: Arc::default(),
    };
    // Not tracked: an idle actor holds nothing to finish. A running turn is (see
    // `RunningTurn::_recording`).
    tokio::spawn(actor.run());
    SessionHandle { inputs }
}

/// Why a running turn was cancelled by the actor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StopReason {
    /// A new message interrupts it (busy mode `interrupt`).
    Interrupt,
    /// `/stop`.
    Stop,
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
    /// Inbox rows of the `/stop` commands that cancelled it: answered, all of them, when
    /// its end is recorded.
    stop_commands: Vec<i64>,
    /// Its streamed answer, when streaming.
    stream: Option<JoinHandle<stream::Streamed>>,
    /// The tokens its model calls took, added up as they end.
    usage: Arc<std::sync::Mutex<crate::llm::UsageByModel>>,
    /// When the chat hears its replies (`/voice`), as the turn started.
    voice: voice::VoiceMode,
    started: Instant,
    task: JoinHandle<(TurnOutcome, mpsc::UnboundedReceiver<String>)>,
    /// Counts in [`SessionServices::tasks`] until the turn's end is recorded, so shutdown
    /// waits for it (idle actors are not waited for).
    _recording: TaskTrackerToken,
}

struct SessionActor {
    key: String,
    chat: ChatRef,
    services: Arc<SessionServices>,
    directory: Directory,
    rx: mpsc::Receiver<Box<SessionInput>>,
    /// The open session's id, once known.
    session_id: Option<String>,
    /// Turns waiting for the running one (busy mode `queue`).
    queued: VecDeque<Vec<UserInput>>,
    /// Messages that interrupted the running turn, to be answered together with it.
    interrupting: Vec<UserInput>,
    /// The streamed message of an interrupted turn, for the turn that answers in its place.
    stream_row: Option<i64>,
    /// The session known to have a title already (automatic titles stop asking the
    /// store after every answer).
    titled: Arc<Mutex<Option<String>>>,
}

/// A turn to start in place of an interrupted one.
struct Resume {
    inputs: Vec<UserInput>,
    user_text: String,
    carried: Vec<StoredMessage>,
}
