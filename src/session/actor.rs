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
                // The work an input or a turn's end starts is boxed: an actor spends its life
                // waiting, and its future is as large as the largest thing it awaits inline
                // (4.4 KiB per conversation when these were not boxed; now what waiting
                // holds, docs/performance.md step 18).
                input = self.rx.recv() => match input {
                    Some(input) => Box::pin(self.handle(*input, &mut running)).await,
                    None => break,
                },
                ended = join(&mut running) => {
                    let turn = running.take().expect("a turn was running");
                    Box::pin(self.after_turn(turn, ended, &work, &mut running)).await;
                }
                _ = tokio::time::sleep(IDLE_RETIRE), if running.is_none() => {
                    // Work left waiting (a queued turn that could not start) is retried first.
                    if !self.queued.is_empty() || !self.interrupting.is_empty() {
                        Box::pin(self.start_next(&mut running)).await;
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

    /// A turn ended: its end recorded, then what waits started (unless the daemon stops).
    async fn after_turn(
        &mut self,
        turn: RunningTurn,
        ended: Option<(TurnOutcome, mpsc::UnboundedReceiver<String>)>,
        work: &CancellationToken,
        running: &mut Option<RunningTurn>,
    ) {
        let resume = self.turn_ended(turn, ended).await;
        if work.is_cancelled() {
            return; // nothing new starts while the daemon stops
        }
        match resume {
            Some(resume) => {
                self.start(resume.inputs, resume.user_text, resume.carried, running)
                    .await
            }
            None => self.start_next(running).await,
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
                if while_busy == WhileBusy::Refused {
                    // It edits the history: not while a turn or a compression writes it.
                    if running.is_some() {
                        return self.say(inbox_id, &message_id, BUSY).await;
                    }
                    if self.compressing() {
                        let text = "🗜️ I'm compressing this conversation right now; try again in a moment.";
                        return self.say(inbox_id, &message_id, text).await;
                    }
                }
                self.command(inbox_id, message_id, &author, command, running)
                    .await;
            }
        }
    }

    /// Whether the session's history is being compressed right now.
    fn compressing(&self) -> bool {
        match (&self.services.agent.compressor, &self.session_id) {
            (Some(c), Some(session)) => c.is_running(session),
            _ => false,
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
