//! The actor's loop: inputs, the end of the running turn, and retiring when idle; busy
//! modes; starting turns (with the latest input's author); the working indicator.

use super::*;

impl SessionActor {
    pub(super) async fn run(mut self) {
        let mut running: Option<RunningTurn> = None;
        let work = self.services.work.clone();
        loop {
            // On shutdown the running turn is cancelled with it and its end recorded (the
            // daemon waits for that); an idle actor simply goes with the process. What was
            // not answered stays open in the inbox for the next start.
            tokio::select! {
                input = self.rx.recv() => match input {
                    Some(input) => self.handle(*input, &mut running).await,
                    None => break,
                },
                ended = join(&mut running) => {
                    let turn = running.take().expect("a turn was running");
                    let resume = self.turn_ended(turn, ended).await;
                    if work.is_cancelled() {
                        continue; // nothing new starts while the daemon stops
                    }
                    match resume {
                        Some(resume) => self.start(resume.inputs, resume.user_text, resume.carried, &mut running).await,
                        None => self.start_next(&mut running).await,
                    }
                }
                _ = tokio::time::sleep(IDLE_RETIRE), if running.is_none() => {
                    // Work left waiting (a queued turn that could not start) is retried first.
                    if !self.queued.is_empty() || !self.interrupting.is_empty() {
                        self.start_next(&mut running).await;
                        continue;
                    }
                    let mut actors = self.directory.lock().expect("directory lock");
                    if self.rx.is_empty() {
                        actors.remove(&self.key);
                        return;
                    }
                }
            }
        }
    }

    pub(super) async fn handle(&mut self, input: SessionInput, running: &mut Option<RunningTurn>) {
        match input {
            SessionInput::Message(message) => match running {
                // Older work that could not start goes first; this message waits its turn.
                None if !self.queued.is_empty() || !self.interrupting.is_empty() => {
                    self.queued.push_back(vec![message]);
                    self.start_next(running).await;
                }
                None => {
                    let text = message.text.clone();
                    self.start(vec![message], text, Vec::new(), running).await
                }
                Some(turn) => {
                    // A question the agent asked is answered by the person's next words.
                    if message.attachments.is_empty()
                        && self.services.clarify.answer_text(&self.key, &message.text)
                    {
                        let ids = message.inbox_id.into_iter().collect();
                        self.finish(ids, InboxState::Done, "question answered", None)
                            .await;
                        return;
                    }
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
                while_busy,
            } => {
                if while_busy == WhileBusy::Refused && running.is_some() {
                    return self.say(inbox_id, &message_id, BUSY).await;
                }
                self.command(inbox_id, message_id, &author, command, running)
                    .await;
            }
        }
    }

    /// A message arrived while `turn` runs: apply the busy mode.
    pub(super) fn busy(&mut self, turn: &mut RunningTurn, message: UserInput) {
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
                // Files cannot join a running turn: a message with files waits its turn.
                if message.attachments.is_empty() && turn.steer.send(message.text.clone()).is_ok() {
                    turn.steered.push(message);
                } else {
                    self.queued.push_back(vec![message]);
                }
            }
        }
    }

    /// Inbox ids of everything waiting (queued or interrupting), now dropped.
    pub(super) fn drop_waiting(&mut self) -> Vec<i64> {
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
            .session_tail(&session.id, self.services.agent.history_bytes())
            .await
            .unwrap_or_default();
        let cancel = self.services.work.child_token();
        let (steer, mut steer_rx) = mpsc::unbounded_channel();
        let regarding = inputs.last().and_then(|i| i.message_id.clone());
        let settings = super::chat_commands::ChatSettings::load(store, &self.key).await;
        let agent = &self.services.agent;
        let model = settings.model.as_deref().and_then(|name| {
            agent
                .models
                .resolve(name)
                .inspect_err(|e| tracing::warn!(session = %self.key, model = name, error = %e, "session: the chat's model cannot be used; using the default"))
                .ok()
        });
        let personality = settings
            .personality
            .as_deref()
            .and_then(|name| agent.personalities.get(name).cloned());
        let tool_progress = settings.verbose.unwrap_or(agent.tool_progress);
        let kept = store.session_kept(&session.id).await.unwrap_or_else(|e| {
            tracing::warn!(error = %e, "session: cannot read what the session kept");
            Default::default()
        });
        let memory = session_memory(store, &session.id, kept.memory, &agent.home).await;
        // Where and with whom, as the session's first turn found it: the system prompt
        // stays the same bytes for the whole session. Someone else writing in a shared
        // session is named in the message instead.
        let (context, person) = self
            .session_context(&session.id, kept.context, &author)
            .await;
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
        let compaction = agent
            .compressor
            .clone()
            .map(|compressor| crate::agent::Compaction {
                compressor,
                store: store.clone(),
                session_id: session.id.clone(),
                history_bytes: agent.history_bytes(),
            });
        let notices = spawn_notices(
            &self.services.tasks,
            self.services.delivery.clone(),
            self.chat.clone(),
            regarding.clone(),
        );
        let progress = (tool_progress != crate::config::ToolProgress::Off).then(|| {
            spawn_progress(
                &self.services.tasks,
                self.services.delivery.clone(),
                self.chat.clone(),
                regarding.clone(),
            )
        });
        // Streaming where the platform can edit a message; a turn answering in place of an
        // earlier attempt (an interrupt, a crash) continues that attempt's message.
        let can_edit = self
            .services
            .delivery
            .sender(self.chat.platform)
            .is_some_and(|s| s.capabilities().edits);
        let (stream, streamed) = match self.services.streaming.clone().filter(|_| can_edit) {
            Some(config) => {
                let inbox_ids: Vec<i64> = inputs.iter().filter_map(|i| i.inbox_id).collect();
                let earlier = match self.stream_row.take() {
                    Some(row) => Some(row),
                    None => store
                        .outbox_stream_row(inbox_ids.clone())
                        .await
                        .unwrap_or_default(),
                };
                let (deltas, handle) = stream::spawn_stream(
                    &self.services.tasks,
                    self.services.delivery.clone(),
                    self.chat.clone(),
                    regarding.clone(),
                    config,
                    earlier,
                    inbox_ids.first().copied(),
                );
                (Some(deltas), Some(handle))
            }
            None => (None, None),
        };
        let usage = Arc::new(std::sync::Mutex::new(crate::llm::UsageByModel::default()));
        let input = TurnInput {
            history,
            carried,
            user_text,
            images: Vec::new(),
            progress,
            stream,
            context,
            usage: usage.clone(),
            model,
            personality,
            memory,
            tool_progress,
            notices: Some(notices),
            compaction,
            max_steps: None,
        };
        let agent = self.services.agent.clone();
        let working = spawn_working(
            &self.services.tasks,
            self.services.delivery.clone(),
            self.chat.clone(),
            regarding.clone(),
            cancel.clone(),
        );
        let media = TurnMedia {
            attachments: inputs.iter().flat_map(|i| i.attachments.clone()).collect(),
            preparer: self.services.media.clone(),
            delivery: self.services.delivery.clone(),
            chat: self.chat.clone(),
            reply_to: regarding,
            cancel: cancel.clone(),
        };
        let attention = CancellationToken::new();
        let tools_ctx = ToolContext {
            session_key: self.key.clone(),
            session_id: session.id.clone(),
            chat: self.chat.clone(),
            author,
            cancel: cancel.clone(),
            attention: attention.clone(),
            usage: usage.clone(),
            depth: 0,
        };
        let task = self.services.tasks.spawn(async move {
            // Dropped however the turn ends, a panic included: the indicator never outlives it.
            let _working = working.drop_guard();
            let input = match media.prepare(input).await {
                Ok(input) => input,
                Err(nothing_to_read) => return (nothing_to_read, steer_rx),
            };
            let outcome = agent.run_turn(input, tools_ctx, &mut steer_rx).await;
            (outcome, steer_rx)
        });
        *running = Some(RunningTurn {
            inputs,
            cancel,
            attention,
            steer,
            steered: Vec::new(),
            stop: None,
            stop_commands: Vec::new(),
            stream: streamed,
            usage,
            started: Instant::now(),
            task,
            _recording: self.services.tasks.token(),
        });
    }

    /// Start the next waiting turn; one that cannot start (its inputs are answered with the
    /// error) makes way for the one after it.
    pub(super) async fn start_next(&mut self, running: &mut Option<RunningTurn>) {
        while running.is_none() {
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
    home: &std::path::Path,
) -> String {
    if let Some(kept) = kept {
        return kept;
    }
    let home = home.to_path_buf();
    let now = tokio::task::spawn_blocking(move || crate::tools::memory::snapshot(&home))
        .await
        .unwrap_or_default();
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

/// The texts of several inputs answered together; each named by its author when more than
/// one person wrote them.
pub(super) fn joined_text(inputs: &[UserInput]) -> String {
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
/// needs, and take it down when the returned token is cancelled.
fn spawn_working(
    tasks: &TaskTracker,
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
    tasks.spawn(async move {
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
