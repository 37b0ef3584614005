//! The end of a turn: what it answered, what it says, and the inbox states, recorded in one
//! transaction, retried until it is recorded (or the merged turn to start when it was
//! interrupted).

use hermes_adapter::Backoff;

use super::actor::joined_text;
use super::stream::Streamed;
use super::*;
use crate::store::StoreError;

/// Retrying the record of a turn's end: 0.5 s, doubling, at most 10 s.
const COMMIT_RETRY: Backoff = Backoff::new(Duration::from_millis(500), Duration::from_secs(10));
/// How long a failure to record a turn's end is retried before the turn is given up.
const COMMIT_GIVE_UP: Duration = Duration::from_secs(600);

/// What every end of a turn closes: its inbox rows (and the `/stop`s that waited for it)
/// and its streamed message.
struct Ended {
    ids: Vec<i64>,
    streamed: Streamed,
}

impl SessionActor {
    /// Record how a turn ended; returns the merged turn to start when it was interrupted.
    pub(super) async fn turn_ended(
        &mut self,
        mut turn: RunningTurn,
        ended: Option<(TurnOutcome, mpsc::UnboundedReceiver<String>)>,
    ) -> Option<Resume> {
        self.record_usage(&turn).await;
        // The stream ends with the turn (its sender went with the turn's input).
        let streamed = match turn.stream.take() {
            Some(handle) => handle.await.unwrap_or_default(),
            None => Streamed::default(),
        };
        let Some((outcome, steer_rx)) = ended else {
            self.record_panic(&turn, streamed).await;
            return None;
        };
        let inputs = self.answered_inputs(&turn, steer_rx);
        let reply_to = inputs.last().and_then(|i| i.message_id.clone());
        let mut ids: Vec<i64> = inputs.iter().filter_map(|i| i.inbox_id).collect();
        // The /stop commands end with the turn, whichever way it ended.
        ids.extend(&turn.stop_commands);
        let end = Ended { ids, streamed };
        match (outcome, turn.stop) {
            (TurnOutcome::Cancelled { messages }, Some(StopReason::Interrupt)) => {
                return Some(self.resume_interrupted(inputs, messages, end.streamed));
            }
            (TurnOutcome::Cancelled { messages }, Some(StopReason::Stop)) => {
                // A streamed answer keeps what was written, marked as stopped.
                let stopped = match end.streamed.text.trim() {
                    "" => "⏹ Stopped.".to_owned(),
                    text => format!("{text}\n\n⏹ Stopped."),
                };
                let rows = self.reply_rows(&stopped, reply_to);
                self.record_end(end, messages, rows, InboxState::Done, "stopped")
                    .await;
            }
            (_, Some(StopReason::Reset)) => {
                let outbox = match end.streamed.row {
                    Some(row) => continue_stream(
                        &self.chat,
                        self.reply_rows("⏹ Stopped (new session).", None),
                        Some(row),
                    ),
                    None => Vec::new(),
                };
                self.commit(TurnRecord::outcome(
                    end.ids,
                    InboxState::Done,
                    "reset",
                    outbox,
                ))
                .await;
            }
            (TurnOutcome::Cancelled { .. }, None) => self.tell_of_restart().await,
            (
                TurnOutcome::Answered { reply, messages }
                | TurnOutcome::BudgetExhausted { reply, messages },
                _,
            ) => {
                let asked = joined_text(&inputs);
                let reply = super::voice::with_speech(&self.headed(&reply, &inputs), &messages);
                let (voice, unspoken) = self
                    .spoken_reply(turn.voice, &reply, &inputs, &messages)
                    .await;
                let shown = match unspoken {
                    Some(why) => format!("{reply}\n\n{why}"),
                    None => reply.clone(),
                };
                let mut rows = self.answer_rows(&shown, reply_to).await;
                if let Some(voice) = voice {
                    rows.extend(self.services.delivery.rows_with_files(
                        &self.chat,
                        "",
                        vec![voice],
                        None,
                    ));
                }
                self.record_end(end, messages, rows, InboxState::Done, "answered")
                    .await;
                self.title_later(&asked, &reply);
            }
            (TurnOutcome::Failed { notice, messages }, _) => {
                // Keep what the person said, so the conversation goes on from it.
                let kept = messages.into_iter().filter(|m| m.role == "user").collect();
                let rows = self.reply_rows(&notice, reply_to);
                self.record_end(end, kept, rows, InboxState::Failed, "model unavailable")
                    .await;
            }
        }
        None
    }

    /// What its model calls took, however it ended (`/usage`), per model.
    async fn record_usage(&self, turn: &RunningTurn) {
        let usage = std::mem::take(&mut *turn.usage.lock().expect("usage lock"));
        let Some(session) = self.session_id.clone() else {
            return;
        };
        for (model, usage) in usage.0 {
            if usage == crate::llm::Usage::default() {
                continue;
            }
            if let Err(e) = self
                .services
                .store
                .usage_add(session.clone(), model, usage)
                .await
            {
                tracing::warn!(error = %e, "session: could not record the turn's token usage");
            }
        }
    }

    /// The turn's task panicked: its inputs (and the `/stop`s that waited for it) fail,
    /// and the person is told.
    async fn record_panic(&mut self, turn: &RunningTurn, streamed: Streamed) {
        let mut ids: Vec<i64> = turn.inputs.iter().filter_map(|i| i.inbox_id).collect();
        ids.extend(&turn.stop_commands);
        let reply_to = turn.inputs.last().and_then(|i| i.message_id.clone());
        let notice =
            "⚠️ Something went wrong inside the gateway while answering; please try again.";
        let outbox = continue_stream(&self.chat, self.reply_rows(notice, reply_to), streamed.row);
        self.commit(TurnRecord::outcome(
            ids,
            InboxState::Failed,
            "turn panicked",
            outbox,
        ))
        .await;
    }

    /// The inputs the turn answered: its own and the steering texts it read; those it
    /// never read run as the next turn.
    fn answered_inputs(
        &mut self,
        turn: &RunningTurn,
        mut steer_rx: mpsc::UnboundedReceiver<String>,
    ) -> Vec<UserInput> {
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
        inputs
    }

    /// An interrupted turn: the earlier and the new text are answered together, continuing
    /// the partial work (which already holds the earlier text), in the streamed message.
    fn resume_interrupted(
        &mut self,
        mut merged: Vec<UserInput>,
        carried: Vec<StoredMessage>,
        streamed: Streamed,
    ) -> Resume {
        let user_text = joined_text(&self.interrupting);
        self.stream_row = streamed.row;
        if !carried.is_empty() {
            // What the files became is in the carried messages already; only images (not
            // kept in messages) are fetched again.
            for input in &mut merged {
                input
                    .attachments
                    .retain(|a| a.kind == hermes_adapter::MediaKind::Image);
            }
        }
        merged.append(&mut self.interrupting);
        Resume {
            inputs: merged,
            user_text,
            carried,
        }
    }

    /// Shutdown cut the turn: its inbox rows stay open and it runs again after the start.
    /// The person hears why the answer is late (the outbox is flushed before the daemon
    /// exits, or sends it after the restart).
    async fn tell_of_restart(&self) {
        tracing::info!(session = %self.key, "session: turn cancelled by shutdown; it will resume after restart");
        let notice = "⏹ I was interrupted by a restart of the gateway; I'll go on with your message as soon as it is back.";
        if let Err(e) = self.services.delivery.reply(&self.chat, notice, None).await {
            tracing::error!(error = %e, "session: could not queue the restart notice");
        }
    }

    /// Record a turn's end: its messages, what it says (continuing its streamed message),
    /// and its inputs' state.
    async fn record_end(
        &mut self,
        end: Ended,
        messages: Vec<StoredMessage>,
        rows: Vec<NewOutboxRow>,
        state: InboxState,
        outcome: &str,
    ) {
        let record = TurnRecord {
            session_id: self.session_id.clone(),
            messages,
            outbox: continue_stream(&self.chat, rows, end.streamed.row),
            inbox_ids: end.ids,
            state,
            outcome: outcome.into(),
            chat: Some(self.chat.clone()),
        };
        self.commit(record).await;
    }

    /// The agent's answer: its text, then the files it named with `MEDIA:` tags, in order.
    pub(super) async fn answer_rows(
        &self,
        markdown: &str,
        reply_to: Option<String>,
    ) -> Vec<NewOutboxRow> {
        let (text, files) = self.services.media.outgoing(markdown).await;
        self.services
            .delivery
            .rows_with_files(&self.chat, &text, files, reply_to)
    }

    pub(super) fn reply_rows(&self, markdown: &str, reply_to: Option<String>) -> Vec<NewOutboxRow> {
        self.services
            .delivery
            .reply_rows(&self.chat, markdown, reply_to)
    }

    /// Record the end of a turn. A transaction that fails in a way that may pass (a locked
    /// or full disk) is retried for up to [`COMMIT_GIVE_UP`]: until then the conversation
    /// waits, since what comes next builds on it. Then, or at once for a failure that will
    /// not pass, the turn's messages are marked failed and the person is told. Shutdown ends
    /// the retries too; the inbox rows are still open then, so the turn runs again after the
    /// restart.
    pub(super) async fn commit(&self, record: TurnRecord) {
        let work = &self.services.work;
        let started = tokio::time::Instant::now();
        let mut retry = COMMIT_RETRY;
        let mut tries_in_shutdown = 0;
        loop {
            let error = match self.services.delivery.commit(record.clone()).await {
                Ok(_) => return,
                Err(StoreError::Closed) => {
                    tracing::error!(session = %self.key, "session: the store has stopped; the end of a turn is not recorded (it runs again after a restart)");
                    return;
                }
                Err(e) => e,
            };
            if work.is_cancelled() {
                tries_in_shutdown += 1;
                if tries_in_shutdown >= 3 {
                    tracing::error!(error = %error, session = %self.key, "session: could not record the end of a turn before shutdown; it runs again after the restart");
                    return;
                }
            } else if !error.may_pass() || started.elapsed() >= COMMIT_GIVE_UP {
                return self.give_up(record, error).await;
            }
            let wait = retry.next_delay();
            tracing::error!(error = %error, session = %self.key, retry_in = ?wait, "session: could not record the end of a turn; retrying (the conversation waits)");
            tokio::select! {
                _ = work.cancelled(), if tries_in_shutdown == 0 => {}
                _ = tokio::time::sleep(wait) => {}
            }
        }
    }

    /// The end of a turn cannot be recorded: mark what it answered failed and say so (one
    /// try; if that fails too, the rows stay open and the turn runs again after a restart).
    async fn give_up(&self, record: TurnRecord, error: StoreError) {
        tracing::error!(error = %error, session = %self.key, "session: giving up on recording the end of a turn; its messages are marked failed");
        let notice = "⚠️ I could not save this conversation (database error), so my answer was lost. Please send your message again.";
        let reply_to = record.outbox.first().and_then(|r| r.reply_to.clone());
        let fallback = TurnRecord::outcome(
            record.inbox_ids,
            InboxState::Failed,
            "could not record the turn",
            self.reply_rows(notice, reply_to),
        );
        if let Err(e) = self.services.delivery.commit(fallback).await {
            tracing::error!(error = %e, session = %self.key, "session: could not mark the turn failed either; it runs again after a restart");
        }
    }

    /// End inbox rows, optionally with a reply (`(text, message to reply to)`).
    pub(super) async fn finish(
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
        self.commit(TurnRecord::outcome(ids, state, outcome, outbox).in_chat(&self.chat))
            .await;
    }

    pub(super) async fn say(&self, inbox_id: i64, message_id: &str, text: &str) {
        self.finish(
            vec![inbox_id],
            InboxState::Done,
            "command",
            Some((text.to_owned(), Some(message_id.to_owned()))),
        )
        .await;
    }
}

/// A streamed answer's last word: the first message of `rows` becomes the final edit of the
/// streamed message (which may never have gone out: then it is sent as a new one).
fn continue_stream(
    chat: &ChatRef,
    mut rows: Vec<NewOutboxRow>,
    row: Option<i64>,
) -> Vec<NewOutboxRow> {
    let Some(row) = row else { return rows };
    match rows.iter_mut().find(|r| r.file.is_none()) {
        Some(first) => {
            first.edit_of = Some(row);
            first.reply_to = None;
        }
        // Only files: the streamed message still loses its cursor.
        None => rows.insert(
            0,
            NewOutboxRow {
                chat: chat.clone(),
                body: hermes_adapter::MessageBody::plain("📎"),
                reply_to: None,
                choices: Vec::new(),
                file: None,
                edit_of: Some(row),
            },
        ),
    }
    rows
}
