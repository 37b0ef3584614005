//! Starting a turn: the session opened (its history, what it kept from its first turn:
//! where and with whom, and the memories its prompt carries), the chat's own choices
//! (`/model`, `/personality`, `/verbose`), what shows while the agent works (the working
//! indicator, tool progress, notices, the answer streamed where the platform edits), and
//! the turn spawned, its files fetched in its own task first.

use super::*;
use crate::store::SessionRow;

/// What the chat chose for its turns, or the defaults.
pub(super) struct ChatChoices {
    pub(super) model: Option<Arc<crate::llm::LlmClient>>,
    pub(super) personality: Option<String>,
    /// The channel's own system prompt (`channel_overrides`).
    pub(super) instructions: Option<String>,
    pub(super) tool_progress: crate::config::ToolProgress,
    pub(super) voice: super::voice::VoiceMode,
}

/// What shows in the chat while a turn works, started before it.
struct Shown {
    notices: mpsc::UnboundedSender<String>,
    progress: Option<mpsc::UnboundedSender<String>>,
    stream: Option<mpsc::UnboundedSender<crate::llm::StreamDelta>>,
    streamed: Option<JoinHandle<stream::Streamed>>,
}

impl SessionActor {
    /// Start a turn answering `inputs` with `user_text`, continuing `carried` messages of an
    /// interrupted attempt.
    pub(super) async fn start(
        &mut self,
        inputs: Vec<UserInput>,
        user_text: String,
        carried: Vec<StoredMessage>,
        running: &mut Option<RunningTurn>,
    ) {
        if self.services.intake.is_cancelled() {
            tracing::info!(session = %self.key, "session: the daemon is stopping; this message is answered after the restart");
            return;
        }
        if !self.services.model_chosen {
            self.no_model_yet(inputs).await;
            return;
        }
        // The turn speaks for the latest input's author (in a shared session, whoever wrote
        // last): that is who the model, the tools and the processes it starts are told about.
        let author = inputs
            .last()
            .expect("a turn answers at least one input")
            .author
            .clone();
        let Some(session) = self.open_session(&inputs, &author).await else {
            return;
        };
        let regarding = inputs.last().and_then(|i| i.message_id.clone());
        let choices = self.chat_choices().await;
        let (context, memory, user_text) = self
            .prompt_parts(&session.id, &author, &inputs, user_text)
            .await;
        let shown = self
            .shown_while_working(&inputs, regarding.clone(), choices.tool_progress)
            .await;
        let usage = Arc::new(std::sync::Mutex::new(crate::llm::UsageByModel::default()));
        let input = TurnInput {
            history: self.history(&session.id).await,
            carried,
            user_text,
            images: Vec::new(),
            progress: shown.progress,
            stream: shown.stream,
            context,
            usage: usage.clone(),
            model: choices.model,
            personality: choices.personality,
            instructions: choices.instructions,
            memory,
            tool_progress: choices.tool_progress,
            notices: Some(shown.notices),
            compaction: self.compaction(&session.id),
            max_steps: None,
        };
        let tools_ctx = ToolContext {
            usage: usage.clone(),
            ..ToolContext::person_turn(
                self.key.clone(),
                session.id.clone(),
                self.chat.clone(),
                author,
                self.services.work.child_token(),
            )
        };
        let (cancel, attention) = (tools_ctx.cancel.clone(), tools_ctx.attention.clone());
        let (steer, steer_rx) = mpsc::unbounded_channel();
        let task = self.spawn_turn(input, tools_ctx, &inputs, regarding, steer_rx);
        *running = Some(RunningTurn {
            inputs,
            cancel,
            attention,
            steer,
            steered: Vec::new(),
            stop: None,
            stop_commands: Vec::new(),
            stream: shown.streamed,
            usage,
            voice: choices.voice,
            started: Instant::now(),
            task,
            _recording: self.services.tasks.token(),
        });
    }

    /// No model is chosen yet: each message is answered with how to choose one.
    async fn no_model_yet(&self, inputs: Vec<UserInput>) {
        let text = "No model is chosen yet, so I cannot answer. The operator chooses one in \
                    the web chat's form (`hermes-gateway web-url` prints its address: a model \
                    server on this machine, or a provider and its key) or with \
                    `hermes-gateway setup` in a terminal.";
        for input in inputs {
            if let Some(inbox_id) = input.inbox_id {
                let reply = Some((text.to_owned(), input.message_id.clone()));
                self.finish(vec![inbox_id], InboxState::Done, "no model", reply)
                    .await;
            }
        }
    }

    /// The open session for `author`'s turn; when the store cannot give it, the inputs are
    /// answered with the error and `None`.
    async fn open_session(&mut self, inputs: &[UserInput], author: &Author) -> Option<SessionRow> {
        let opened = self
            .services
            .store
            .session_open(&self.key, &self.chat, Some(&author.user_id))
            .await;
        match opened {
            Ok(session) => {
                self.session_id = Some(session.id.clone());
                Some(session)
            }
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
                None
            }
        }
    }

    /// The session's newest history, as much as the model's context can take.
    pub(super) async fn history(&self, session_id: &str) -> Vec<StoredMessage> {
        self.services
            .store
            .session_tail(session_id, self.services.agent.history_bytes())
            .await
            .unwrap_or_default()
    }

    /// The chat's model, personality and tool progress, where it chose them.
    pub(super) async fn chat_choices(&self) -> ChatChoices {
        let settings =
            super::chat_commands::ChatSettings::load(&self.services.store, &self.key).await;
        let agent = &self.services.agent;
        let channel = self.services.channel_overrides.for_chat(&self.chat);
        // The chat's `/model` first, then its channel's, then the main model (as
        // `chat_model` has it).
        let usable = |name: &str| {
            agent
                .models
                .resolve(name)
                .inspect_err(|e| tracing::warn!(session = %self.key, model = name, error = %e, "session: a model chosen for this chat cannot be used; falling back"))
                .ok()
        };
        let model = settings
            .model
            .as_deref()
            .and_then(usable)
            .or_else(|| channel.and_then(|c| c.model.as_deref()).and_then(usable));
        // The chat's reasoning effort applies to whichever model it uses.
        let model = match settings.reasoning.as_deref() {
            Some(effort) => {
                let base = model.unwrap_or_else(|| agent.models.primary.clone());
                Some(agent.models.with_effort(&base, effort))
            }
            None => model,
        };
        ChatChoices {
            model,
            personality: settings
                .personality
                .as_deref()
                .and_then(|name| agent.personalities.get(name).cloned()),
            instructions: channel.and_then(|c| c.system_prompt.clone()),
            tool_progress: settings
                .verbose
                .unwrap_or(agent.tool_progress.for_platform(self.chat.platform)),
            voice: settings.voice,
        }
    }

    /// The system prompt's context and memories, kept from the session's first turn, and
    /// the user text, named by its author when someone other than the session's opener
    /// wrote it.
    pub(super) async fn prompt_parts(
        &self,
        session_id: &str,
        author: &Author,
        inputs: &[UserInput],
        user_text: String,
    ) -> (String, String, String) {
        let store = &self.services.store;
        let kept = store.session_kept(session_id).await.unwrap_or_else(|e| {
            tracing::warn!(error = %e, "session: cannot read what the session kept");
            Default::default()
        });
        // A person's memories, in a conversation of their own; none in one the chat shares.
        let own = self.chat.kind == hermes_adapter::ChatKind::Direct
            || self.key.ends_with(&format!(":{}", author.user_id));
        let memory_dir = own.then(|| {
            self.services
                .agent
                .memory
                .dir_for(self.chat.platform, &author.user_id)
        });
        let limits = self.services.agent.memory.limits();
        let memory = session_memory(store, session_id, kept.memory, memory_dir, limits).await;
        // Where and with whom, as the session's first turn found it: the system prompt
        // stays the same bytes for the whole session. Someone else writing in a shared
        // session is named in the message instead.
        let (context, person) = self.session_context(session_id, kept.context, author).await;
        let user_text = match inputs.first() {
            Some(first)
                if first.author.user_id != person
                    && inputs
                        .iter()
                        .all(|i| i.author.user_id == first.author.user_id) =>
            {
                format!("{}: {user_text}", first.author.display_name)
            }
            _ => user_text,
        };
        (context, memory, user_text)
    }

    /// How the session's stored history is compressed, when compression is on.
    fn compaction(&self, session_id: &str) -> Option<crate::agent::Compaction> {
        let agent = &self.services.agent;
        agent
            .compressor
            .clone()
            .map(|compressor| crate::agent::Compaction {
                compressor,
                store: self.services.store.clone(),
                session_id: session_id.to_owned(),
                history_bytes: agent.history_bytes(),
            })
    }

    /// Notices, tool progress (unless off) and, where the platform edits, the streamed
    /// answer; a turn answering in place of an earlier attempt (an interrupt, a crash)
    /// continues that attempt's message.
    async fn shown_while_working(
        &mut self,
        inputs: &[UserInput],
        regarding: Option<String>,
        tool_progress: crate::config::ToolProgress,
    ) -> Shown {
        let services = &self.services;
        let notices = spawn_notices(
            &services.tasks,
            services.delivery.clone(),
            self.chat.clone(),
            regarding.clone(),
        );
        let progress = (tool_progress != crate::config::ToolProgress::Off).then(|| {
            spawn_progress(
                &services.tasks,
                services.delivery.clone(),
                self.chat.clone(),
                regarding.clone(),
            )
        });
        let can_edit = services
            .delivery
            .sender(self.chat.platform)
            .is_some_and(|s| s.capabilities().edits);
        let Some(config) = services.streaming.clone().filter(|_| can_edit) else {
            return Shown {
                notices,
                progress,
                stream: None,
                streamed: None,
            };
        };
        let inbox_ids: Vec<i64> = inputs.iter().filter_map(|i| i.inbox_id).collect();
        let earlier = match self.stream_row.take() {
            Some(row) => Some(row),
            None => services
                .store
                .outbox_stream_row(inbox_ids.clone())
                .await
                .unwrap_or_default(),
        };
        let (deltas, handle) = stream::spawn_stream(
            &services.tasks,
            services.delivery.clone(),
            self.chat.clone(),
            regarding,
            config,
            earlier,
            inbox_ids.first().copied(),
        );
        Shown {
            notices,
            progress,
            stream: Some(deltas),
            streamed: Some(handle),
        }
    }

    /// The turn in a task of its own, the working indicator shown while it runs and its
    /// files fetched first.
    fn spawn_turn(
        &self,
        input: TurnInput,
        tools_ctx: ToolContext,
        inputs: &[UserInput],
        regarding: Option<String>,
        mut steer_rx: mpsc::UnboundedReceiver<String>,
    ) -> JoinHandle<(TurnOutcome, mpsc::UnboundedReceiver<String>)> {
        let services = &self.services;
        let agent = services.agent.clone();
        let working = spawn_working(
            &services.tasks,
            services.delivery.clone(),
            self.chat.clone(),
            regarding.clone(),
            tools_ctx.cancel.clone(),
        );
        let media = TurnMedia {
            attachments: inputs.iter().flat_map(|i| i.attachments.clone()).collect(),
            preparer: services.media.clone(),
            delivery: services.delivery.clone(),
            chat: self.chat.clone(),
            reply_to: regarding,
            cancel: tools_ctx.cancel.clone(),
        };
        services.tasks.spawn(async move {
            // Dropped however the turn ends, a panic included (read as a failure): the
            // indicator never outlives it.
            let outcome = match media.prepare(input).await {
                Ok(input) => agent.run_turn(input, tools_ctx, &mut steer_rx).await,
                Err(nothing_to_read) => nothing_to_read,
            };
            if let Some(working) = working {
                let _ = working.send(turn_end(&outcome));
            }
            (outcome, steer_rx)
        })
    }

    /// Where the conversation happens and with whom, as kept from the session's first turn
    /// (who opened it then): the text for the system prompt and that person's id.
    async fn session_context(
        &self,
        session_id: &str,
        kept: Option<String>,
        opener: &Author,
    ) -> (String, String) {
        #[derive(serde::Serialize, serde::Deserialize)]
        struct Context {
            text: String,
            person: String,
        }
        let now = Context {
            text: self.context_for(opener),
            person: opener.user_id.clone(),
        };
        let fresh = serde_json::to_string(&now).unwrap_or_default();
        let store = &self.services.store;
        let kept = match kept {
            Some(kept) => kept,
            None => store
                .keep_for_session(session_id, Kept::Context, fresh.clone())
                .await
                .unwrap_or(fresh),
        };
        match serde_json::from_str::<Context>(&kept) {
            Ok(kept) => (kept.text, kept.person),
            Err(_) => (now.text, now.person),
        }
    }

    /// "Platform: telegram. Chat: group -100. Person: Alice (@alice)." and, in a session
    /// the chat's members share, how others' messages look.
    fn context_for(&self, person: &Author) -> String {
        let handle = person
            .username
            .as_deref()
            .map(|u| format!(" (@{u})"))
            .unwrap_or_default();
        let shared = self.chat.kind != hermes_adapter::ChatKind::Direct
            && !self.key.ends_with(&format!(":{}", person.user_id));
        let others = if shared {
            " Others in this chat share the conversation: a message from anyone else starts with their name."
        } else {
            ""
        };
        format!(
            "Platform: {}. Chat: {} {}. Person: {}{handle}.{others}",
            self.chat.platform,
            match self.chat.kind {
                hermes_adapter::ChatKind::Direct => "direct message",
                hermes_adapter::ChatKind::Group => "group",
                hermes_adapter::ChatKind::Channel => "channel",
            },
            self.chat.chat_id,
            person.display_name,
        )
    }
}

/// The memories session `session_id`'s system prompt carries: taken from the memory files
/// at its first turn and kept (the prompt stays the same bytes, so it stays cached; what
/// the agent remembers now shows from the next session on, as in Hermes).
async fn session_memory(
    store: &Store,
    session_id: &str,
    kept: Option<String>,
    dir: Option<std::path::PathBuf>,
    limits: crate::tools::memory::MemoryLimits,
) -> String {
    if let Some(kept) = kept {
        return kept;
    }
    let now = match dir {
        Some(dir) => {
            tokio::task::spawn_blocking(move || crate::tools::memory::snapshot(&dir, limits))
                .await
                .unwrap_or_default()
        }
        None => String::new(),
    };
    store
        .keep_for_session(session_id, Kept::Memory, now.clone())
        .await
        .unwrap_or(now)
}

/// The files of a turn's messages, fetched in the turn's own task when it starts.
struct TurnMedia {
    attachments: Vec<hermes_adapter::Attachment>,
    preparer: Arc<crate::media::MediaPreparer>,
    delivery: crate::delivery::Delivery,
    chat: ChatRef,
    reply_to: Option<String>,
    cancel: CancellationToken,
}

impl TurnMedia {
    /// The turn's input with what the files became; what could not be read is told to the
    /// person at once. A turn left with nothing to read ends with those notices.
    async fn prepare(self, mut input: TurnInput) -> Result<TurnInput, TurnOutcome> {
        if self.attachments.is_empty() {
            return Ok(input);
        }
        let sender = self.delivery.sender(self.chat.platform).cloned();
        let prepared = self
            .preparer
            .prepare(sender.as_ref(), &self.attachments, &self.cancel)
            .await;
        if self.cancel.is_cancelled() {
            // Stopped or interrupted while fetching: nothing to tell about the files.
            return Err(TurnOutcome::Cancelled {
                messages: Vec::new(),
            });
        }
        let mut parts: Vec<String> = Vec::new();
        if !input.user_text.trim().is_empty() {
            parts.push(std::mem::take(&mut input.user_text));
        }
        parts.extend(prepared.text);
        input.user_text = parts.join("\n\n");
        input.images = prepared.images;
        if input.user_text.trim().is_empty() && input.images.is_empty() {
            return Err(TurnOutcome::Failed {
                notice: prepared.notices.join("\n\n"),
                messages: Vec::new(),
            });
        }
        for notice in prepared.notices {
            if let Err(e) = self
                .delivery
                .reply(&self.chat, &notice, self.reply_to.clone())
                .await
            {
                tracing::error!(error = %e, "session: could not queue a notice about a file");
            }
        }
        Ok(input)
    }
}

/// The turn's progress message: the first tool line is sent as a message (a reply to the
/// message being answered), each later one edits it to show every line so far. Ends when
/// the turn drops its sender.
fn spawn_progress(
    tasks: &TaskTracker,
    delivery: Delivery,
    chat: ChatRef,
    reply_to: Option<String>,
) -> mpsc::UnboundedSender<String> {
    let (lines, mut rx) = mpsc::unbounded_channel::<String>();
    tasks.spawn(async move {
        let mut shown = String::new();
        let mut message: Option<i64> = None;
        while let Some(line) = rx.recv().await {
            if !shown.is_empty() {
                shown.push('\n');
            }
            shown.push_str(&line);
            let done = match message {
                None => match delivery.reply(&chat, &shown, reply_to.clone()).await {
                    Ok(ids) => {
                        message = ids.first().copied();
                        Ok(())
                    }
                    Err(e) => Err(e),
                },
                Some(row) => delivery.edit(row, &chat, &shown).await,
            };
            if let Err(e) = done {
                tracing::warn!(error = %e, "session: could not show tool progress");
            }
        }
    });
    lines
}

/// Notices during a turn (a fallback model took over), each its own reply to the message
/// being answered. Ends when the turn drops its sender.
fn spawn_notices(
    tasks: &TaskTracker,
    delivery: Delivery,
    chat: ChatRef,
    reply_to: Option<String>,
) -> mpsc::UnboundedSender<String> {
    let (notices, mut rx) = mpsc::unbounded_channel::<String>();
    tasks.spawn(async move {
        while let Some(text) = rx.recv().await {
            if let Err(e) = delivery.reply(&chat, &text, reply_to.clone()).await {
                tracing::warn!(error = %e, "session: could not queue a notice");
            }
        }
    });
    notices
}

/// Show the working indicator for the message being answered, refresh it as the platform
/// needs until the turn ends or is stopped, and take it down (showing how the turn ended,
/// where the platform does) when the returned sender is given the turn's end or dropped (a
/// failure). `None` when the platform shows none.
fn spawn_working(
    tasks: &TaskTracker,
    delivery: Delivery,
    chat: ChatRef,
    regarding: Option<String>,
    stopped: CancellationToken,
) -> Option<oneshot::Sender<TurnEnd>> {
    let indicator = delivery
        .sender(chat.platform)
        .and_then(|s| s.capabilities().working)?;
    let (ended, mut end) = oneshot::channel();
    tasks.spawn(async move {
        let started = delivery.working(&chat, regarding.clone(), WorkingPhase::Start);
        let mut refreshing = true;
        let end = loop {
            let refresh = async {
                match indicator.refresh {
                    Some(every) if refreshing => tokio::time::sleep(every).await,
                    _ => std::future::pending().await,
                }
            };
            tokio::select! {
                end = &mut end => break end.unwrap_or(TurnEnd::Failed),
                // Stopped: no more "typing", though the end is still to come.
                _ = stopped.cancelled(), if refreshing => refreshing = false,
                _ = refresh => {
                    delivery.working(&chat, regarding.clone(), WorkingPhase::Refresh);
                }
            }
        };
        // An end never overtakes its start (a reaction put up after it was taken down).
        if let Some(started) = started {
            let _ = started.await;
        }
        delivery.working(&chat, regarding, WorkingPhase::Done(end));
    });
    Some(ended)
}

/// How the working indicator shows a turn's end: a reply is an answer (the budget running
/// out says so in one), a stop is no mark.
fn turn_end(outcome: &TurnOutcome) -> TurnEnd {
    match outcome {
        TurnOutcome::Answered { .. } | TurnOutcome::BudgetExhausted { .. } => TurnEnd::Answered,
        TurnOutcome::Failed { .. } => TurnEnd::Failed,
        TurnOutcome::Cancelled { .. } => TurnEnd::Stopped,
    }
}
