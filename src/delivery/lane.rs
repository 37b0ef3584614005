//! One chat's lane: reads the chat's pending outbox rows and sends them one at a time, in
//! order, each through the chat's budget until it is sent or has failed for good (a row
//! with choices is claimed first, see `store::outbox`). `retry_after` holds
//! back the chat or the whole bot (as the platform scoped it), transient failures back off,
//! a rejected markup falls back to plain text, and an edit whose message cannot be edited
//! goes out as a new message. A revoked token leaves the row queued for after the fix, and
//! a reply the platform may not take yet (outside WhatsApp's 24-hour window) is held, with
//! the chat's later replies behind it, until the person writes again or, at the latest, ten
//! minutes later, for up to a week.
//! Failures that may pass (outages, rate limits, a refused token) are retried until the row
//! has waited `delivery.max_age`; only then is it marked failed. A row the platform has is
//! recorded as sent before the lane moves on, so it is never sent twice.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures_util::FutureExt;
use hermes_adapter::{Backoff, ChatRef, Outbound, PlatformSender, SendError, SendOnce};
use tokio::sync::Notify;

use super::{ChatKey, Delivery};
use crate::store::OutboxRow;

/// How long an idle lane waits for more work before it ends.
const LANE_IDLE: Duration = Duration::from_secs(30);
/// Retrying a transient failure: 0.5 s, doubling, at most 30 s.
const RETRY: Backoff = Backoff::new(Duration::from_millis(500), Duration::from_secs(30));
/// Failed attempts after which a file is given up (and the person told).
const FILE_ATTEMPTS: u32 = 5;
/// How long a platform that refused the bot's credentials is left alone.
const UNAUTHORIZED_PAUSE: Duration = Duration::from_secs(60);
/// How often a chat whose reply is held (outside WhatsApp's 24-hour window) is looked at
/// again when nothing wakes it sooner (a new message of theirs wakes it at once).
const HOLD_RECHECK: Duration = Duration::from_secs(600);
/// How long a held reply waits for the person to write again (however short
/// `delivery.max_age` is): an answer they come back for days later is still theirs.
pub(super) const HOLD_MAX_AGE: Duration = Duration::from_secs(7 * 24 * 60 * 60);

pub(super) struct Lane {
    pub(super) delivery: Delivery,
    pub(super) key: ChatKey,
    pub(super) chat: ChatRef,
    pub(super) notify: Arc<Notify>,
    /// This lane has held a reply: the rows it takes up afterwards get a fresh
    /// `delivery.max_age` for passing failures, counted from when they were taken up (a
    /// reply that waited days for the person must not fail on the first outage after).
    pub(super) was_held: AtomicBool,
}

/// What to do after a failed attempt.
enum Next {
    /// Try again at once (changed: plain text instead of markup, a new message instead of
    /// an edit).
    Now,
    /// Try again after this long (the budget holds a rate-limited chat back by itself).
    Wait(Duration),
    /// Put the row back and leave the chat alone for a while.
    Requeue,
    /// The platform may not take it yet (the person's window has closed): put it back and
    /// look again when the chat is woken.
    Hold,
    /// Failed for good.
    GiveUp,
}

/// How long a row has waited: its age when the lane took it up, plus the lane's own clock
/// since (which tests can run fast).
struct Age {
    at_start: Duration,
    started: tokio::time::Instant,
}

impl Age {
    fn of(row: &OutboxRow) -> Age {
        let waited_ms = crate::store::now_ms().saturating_sub(row.created_at).max(0);
        Age {
            at_start: Duration::from_millis(waited_ms as u64),
            started: tokio::time::Instant::now(),
        }
    }

    fn now(&self) -> Duration {
        self.at_start + self.started.elapsed()
    }
}

/// One row's attempts so far.
struct Attempt {
    age: Age,
    /// What is sent: the row as a platform action, changed by failures (plain text, a new
    /// message in place of an edit).
    action: Outbound,
    count: u32,
    retry: Backoff,
    /// Markup was refused once: a refreshed row goes plain too.
    plain_only: bool,
    maybe_sent: bool,
}

/// What became of one row.
enum Sent {
    /// Sent, or failed for good (recorded either way): go on with the next row.
    Done,
    /// Not sent and back in the queue (shutdown, revoked credentials): stop for now.
    Stop,
    /// Not sent and back in the queue until the chat is woken (a reply held outside
    /// WhatsApp's window): the rows after it wait too, so the order stays.
    Held,
}

impl Lane {
    pub(super) async fn run(self) {
        let inner = &self.delivery.inner;
        let Some(sender) = self.delivery.sender(self.chat.platform).cloned() else {
            tracing::warn!(platform = %self.chat.platform, "delivery: messages wait for a platform that is not enabled");
            inner.lanes.lock().expect("lanes lock").remove(&self.key);
            return;
        };
        'lane: loop {
            // Take the wake-up we were started or woken with before reading the outbox: rows
            // queued from here on wake us again.
            let _ = self.notify.notified().now_or_never();
            let mut held = false;
            let rows = match inner.store.outbox_pending(&self.chat).await {
                Ok(rows) => rows,
                Err(e) => {
                    tracing::error!(error = %e, "delivery: cannot read the outbox");
                    Vec::new()
                }
            };
            for row in rows {
                if inner.sending.is_cancelled() {
                    break 'lane;
                }
                // A prompt is claimed first and sent as it reads then: a decision taken
                // since it was read has rewritten it (no live choices after a decision).
                let row = if row.choices.is_empty() {
                    row
                } else {
                    match inner.store.outbox_claim(row.id).await {
                        Ok(Some(row)) => row,
                        Ok(None) => continue, // no longer pending
                        Err(e) => {
                            tracing::error!(error = %e, row = row.id, "delivery: cannot claim a row");
                            break;
                        }
                    }
                };
                // Boxed: a lane spends most of its life waiting for work, and its future is
                // as large as the largest thing it awaits inline (2.7 KiB per chat with the
                // send inline, docs/performance.md step 18).
                match Box::pin(self.deliver(&sender, row)).await {
                    Sent::Done => {}
                    Sent::Stop => break 'lane,
                    Sent::Held => {
                        held = true;
                        break;
                    }
                }
            }
            let idle = if held { HOLD_RECHECK } else { LANE_IDLE };
            tokio::select! {
                _ = inner.sending.cancelled() => break,
                _ = self.notify.notified() => continue,
                _ = tokio::time::sleep(idle) => {}
            }
            if held {
                continue;
            }
            // End only if nobody woke us since: `wake` notifies under the same lock.
            let mut lanes = inner.lanes.lock().expect("lanes lock");
            if self.notify.notified().now_or_never().is_some() {
                continue;
            }
            lanes.remove(&self.key);
            return;
        }
        inner.lanes.lock().expect("lanes lock").remove(&self.key);
    }

    /// The action a row stands for: a message, or an edit of the message an earlier row
    /// sent (a new message when that one cannot be edited).
    async fn action_for(&self, sender: &Arc<dyn PlatformSender>, row: &OutboxRow) -> Outbound {
        if let Some(file) = &row.file {
            return Outbound::File {
                chat: row.chat.clone(),
                file: file.clone(),
                reply_to: row.reply_to.clone(),
                once: None,
            };
        }
        let sent_as = match row.edit_of {
            Some(of) => match self.delivery.store().outbox_platform_id(of).await {
                Ok(id) => id,
                Err(e) => {
                    tracing::error!(error = %e, row = row.id, "delivery: cannot find the message to edit");
                    None
                }
            },
            None => None,
        };
        match sent_as {
            Some(message_id) if sender.capabilities().edits => Outbound::Edit {
                chat: row.chat.clone(),
                message_id,
                body: row.body.clone(),
            },
            // Where messages cannot be edited, the change is a new message quoting the one
            // it changes, as that was actually delivered.
            quoted => Outbound::Text {
                chat: row.chat.clone(),
                body: row.body.clone(),
                reply_to: quoted.or_else(|| row.reply_to.clone()),
                choices: row.choices.clone(),
                once: None,
            },
        }
    }

    /// Send one claimed row until it is sent, has failed for good, or has waited longer
    /// than `delivery.max_age` through failures that may pass (outages, rate limits, a
    /// refused token).
    async fn deliver(&self, sender: &Arc<dyn PlatformSender>, row: OutboxRow) -> Sent {
        let inner = &self.delivery.inner;
        let mut attempt = Attempt {
            age: Age::of(&row),
            action: self.action_for(sender, &row).await,
            count: row.attempts as u32,
            retry: RETRY,
            plain_only: false,
            // Whether an earlier attempt (in the last run, or one whose answer never came)
            // may have posted the message already.
            maybe_sent: self.delivery.unsure(row.id) || row.attempts > 0,
        };
        let mut first = true;
        loop {
            tokio::select! {
                _ = inner.sending.cancelled() => return self.release(&row).await,
                _ = self.delivery.wait_budget(&row.chat) => {}
            }
            // A method the platform limits apart, told to wait: only its calls wait.
            let method = sender.method_of(&attempt.action);
            tokio::select! {
                _ = inner.sending.cancelled() => return self.release(&row).await,
                _ = self.delivery.wait_method(row.chat.platform, method) => {}
            }
            // A row may have been settled since its last attempt: send what it says now.
            if !std::mem::take(&mut first) {
                self.refresh(&row, &mut attempt.action, attempt.plain_only)
                    .await;
            }
            if let Outbound::Text { once, .. } | Outbound::File { once, .. } = &mut attempt.action {
                *once = Some(SendOnce {
                    key: once_key(&row),
                    maybe_sent: attempt.maybe_sent,
                });
            }
            // A place among the platform's sends in flight, held for this one call only:
            // a burst of replies shares a few connections instead of opening one each.
            let place = tokio::select! {
                _ = inner.sending.cancelled() => return self.release(&row).await,
                place = self.delivery.send_place(row.chat.platform) => place,
            };
            // Counted as under way before the question, so a node giving the chat's share
            // up either sees this send or has already said no.
            let in_flight = self.delivery.sending_now(&self.key);
            if !self.delivery.may_send(&row.chat) {
                // Another node sends now (this one lost the chat's share of the work, a
                // pause): the row goes back, unsent by this node.
                drop(place);
                return self.release(&row).await;
            }
            let sent = sender.send(attempt.action.clone()).await;
            drop(place);
            let error = match sent {
                Ok(delivered) => return self.mark_sent(&row, delivered.message_id).await,
                Err(e) => e,
            };
            attempt.maybe_sent |= matches!(error, SendError::Transient(_));
            attempt.count += 1;
            let next = self.next_after(&row, &error, &mut attempt);
            let waited = attempt.age.now();
            let give_up = self.gives_up(&next, &attempt, waited);
            if let Err(e) = self
                .delivery
                .store()
                .outbox_mark_attempt(row.id, error.to_string(), give_up)
                .await
            {
                tracing::error!(error = %e, row = row.id, "delivery: could not record a failed attempt");
            }
            // Not under way while it waits to try again.
            drop(in_flight);
            if give_up {
                self.give_up(&row, &attempt, &error, waited).await;
                return Sent::Done;
            }
            if let Some(sent) = self
                .after_failure(&row, next, &error, attempt.count, waited)
                .await
            {
                return sent;
            }
        }
    }

    /// What a failed attempt calls for; a row that can go in another form (plain text for
    /// refused markup, a new message for an edit refused) is changed to it.
    fn next_after(&self, row: &OutboxRow, error: &SendError, attempt: &mut Attempt) -> Next {
        match (error, &mut attempt.action) {
            (SendError::RateLimited { retry_after, scope }, _) => {
                crate::metrics::rate_limited(row.chat.platform);
                self.delivery.block(&row.chat, scope, *retry_after);
                Next::Wait(*retry_after)
            }
            (
                SendError::MarkupRejected(why),
                Outbound::Text { body, .. } | Outbound::Edit { body, .. },
            ) if body.markup.is_some() => {
                tracing::warn!(why = %why, row = row.id, "delivery: markup rejected; sending plain text");
                body.markup = None;
                attempt.plain_only = true;
                Next::Now
            }
            (SendError::Rejected(why), Outbound::Edit { body, .. }) => {
                tracing::warn!(why = %why, row = row.id, "delivery: the message cannot be edited; sending the change as a new message");
                attempt.action = Outbound::Text {
                    chat: row.chat.clone(),
                    body: body.clone(),
                    reply_to: None,
                    choices: Vec::new(),
                    once: None,
                };
                Next::Now
            }
            (SendError::Unauthorized(_), _) => {
                self.delivery.block(
                    &row.chat,
                    &hermes_adapter::RateScope::Bot,
                    UNAUTHORIZED_PAUSE,
                );
                Next::Requeue
            }
            (SendError::Transient(_), _) => Next::Wait(attempt.retry.next_delay()),
            (SendError::OutsideWindow(_) | SendError::Unreachable(_), _) => Next::Hold,
            (SendError::MarkupRejected(_) | SendError::Rejected(_) | SendError::TooLong(_), _) => {
                Next::GiveUp
            }
        }
    }

    /// Whether the row has failed for good: said so, or waited through failures that may
    /// pass for longer than `delivery.max_age` (a held reply: the hold's own limit).
    fn gives_up(&self, next: &Next, attempt: &Attempt, waited: Duration) -> bool {
        let max_age = self.delivery.inner.config.max_age;
        // A file that keeps failing is more likely too big or too slow for the link than
        // held up by an outage: it must not hold the chat's queue for a day.
        let is_file = matches!(attempt.action, Outbound::File { .. });
        match next {
            Next::GiveUp => true,
            Next::Now => false,
            Next::Wait(_) if is_file && attempt.count >= FILE_ATTEMPTS => true,
            Next::Wait(_) | Next::Requeue => {
                let since = if self.was_held.load(Ordering::Relaxed) {
                    attempt.age.started.elapsed()
                } else {
                    waited
                };
                since >= max_age
            }
            Next::Hold => waited >= max_age.max(HOLD_MAX_AGE),
        }
    }

    /// The row failed for good (recorded already): the operator is told, and the person
    /// too when it was a file.
    async fn give_up(
        &self,
        row: &OutboxRow,
        attempt: &Attempt,
        error: &SendError,
        waited: Duration,
    ) {
        if let Outbound::File { file, .. } = &attempt.action {
            let notice = format!("⚠️ I could not send the file {}: {error}.", file.name);
            if let Err(e) = self.delivery.reply(&row.chat, &notice, None).await {
                tracing::error!(error = %e, "delivery: could not queue a notice");
            }
        }
        tracing::error!(
            error = %error, row = row.id, chat = %row.chat.chat_id, attempts = attempt.count,
            waited_s = waited.as_secs(),
            "delivery: giving up on a message; it is marked failed"
        );
    }

    /// After a failure that may pass: hold the row, put it back, or wait before the next
    /// attempt (`None`: try again).
    async fn after_failure(
        &self,
        row: &OutboxRow,
        next: Next,
        error: &SendError,
        attempts: u32,
        waited: Duration,
    ) -> Option<Sent> {
        let inner = &self.delivery.inner;
        match next {
            Next::Now | Next::GiveUp => None,
            Next::Hold => {
                if matches!(error, SendError::Unreachable(_)) {
                    // Nobody is there (no web chat page open): the usual state, not trouble.
                    if attempts == 1 {
                        tracing::info!(row = row.id, chat = %row.chat.chat_id, "delivery: nobody is connected to take the reply; it waits until someone is");
                    }
                } else if attempts.is_power_of_two() {
                    tracing::warn!(
                        error = %error, row = row.id, chat = %row.chat.chat_id, attempts,
                        waited_s = waited.as_secs(), gives_up_after_s = inner.config.max_age.max(HOLD_MAX_AGE).as_secs(),
                        "delivery: a reply is held until the platform takes it again; the chat's later replies wait behind it"
                    );
                }
                self.was_held.store(true, Ordering::Relaxed);
                self.release(row).await;
                Some(Sent::Held)
            }
            Next::Requeue => {
                tracing::error!(
                    platform = %row.chat.platform, error = %error, row = row.id, attempts,
                    waited_s = waited.as_secs(), gives_up_after_s = inner.config.max_age.as_secs(),
                    "delivery: the platform refused the bot's credentials; messages stay queued until the token is fixed"
                );
                Some(self.release(row).await)
            }
            Next::Wait(wait) => {
                // Said once, then at doubling intervals: an outage of a day is a few lines,
                // not thousands.
                if matches!(error, SendError::Unreachable(_)) {
                    // Nobody is there (no web chat page open): the usual state, not trouble.
                    if attempts == 1 {
                        tracing::info!(row = row.id, chat = %row.chat.chat_id, "delivery: nobody is connected to take the reply; it waits until someone is");
                    }
                } else if attempts.is_power_of_two() {
                    tracing::warn!(
                        error = %error, row = row.id, chat = %row.chat.chat_id, attempts,
                        retry_in = ?wait, waited_s = waited.as_secs(),
                        gives_up_after_s = inner.config.max_age.as_secs(),
                        "delivery: a message waits for the platform"
                    );
                }
                // A rate limit is waited out by the chat's budget.
                if let SendError::Transient(_) = error {
                    tokio::select! {
                        _ = inner.sending.cancelled() => return Some(self.release(row).await),
                        _ = tokio::time::sleep(wait) => {}
                    }
                }
                None
            }
        }
    }

    /// Record that the platform has the row. Until that is recorded the chat's queue
    /// waits: moving on would leave the row pending, and it would be sent again.
    async fn mark_sent(&self, row: &OutboxRow, message_id: Option<String>) -> Sent {
        let inner = &self.delivery.inner;
        let mut retry = RETRY;
        loop {
            let Err(e) = self
                .delivery
                .store()
                .outbox_mark_sent(row.id, message_id.clone())
                .await
            else {
                crate::metrics::message_out(row.chat.platform);
                return Sent::Done;
            };
            if inner.sending.is_cancelled() {
                tracing::error!(error = %e, row = row.id, "delivery: sent, but could not record it before shutdown; it may be sent again after the restart");
                return Sent::Stop;
            }
            let wait = retry.next_delay();
            tracing::error!(error = %e, row = row.id, retry_in = ?wait, "delivery: sent, but could not record it; the chat's queue waits until it is recorded");
            tokio::select! {
                _ = inner.sending.cancelled() => {}
                _ = tokio::time::sleep(wait) => {}
            }
        }
    }

    /// Before a retry of a new message: take what the row says now, so a prompt decided
    /// while its send was being retried goes out decided, without live choices.
    async fn refresh(&self, row: &OutboxRow, action: &mut Outbound, plain_only: bool) {
        let Outbound::Text { body, choices, .. } = action else {
            return;
        };
        match self.delivery.store().outbox_content(row.id).await {
            Ok(Some((now, now_choices))) => {
                *body = now;
                *choices = now_choices;
                if plain_only {
                    body.markup = None;
                }
            }
            Ok(None) => {}
            Err(e) => tracing::warn!(error = %e, row = row.id, "delivery: cannot re-read a row"),
        }
    }

    /// Put the row back in the queue and stop the lane.
    async fn release(&self, row: &OutboxRow) -> Sent {
        if let Err(e) = self.delivery.store().outbox_release(row.id).await {
            tracing::error!(error = %e, row = row.id, "delivery: could not requeue a row");
        }
        Sent::Stop
    }
}

/// The key of a row's message for [`SendOnce`]: its id and its creation time (hex; at most
/// 25 characters), so a new database's row 1 is not taken for an old one's.
fn once_key(row: &OutboxRow) -> String {
    format!("h{:x}.{:x}", row.id, row.created_at)
}
