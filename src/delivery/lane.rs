//! One chat's lane: reads the chat's pending outbox rows and sends them one at a time, in
//! order, each through the chat's budget until it is sent or has failed for good (a row
//! with choices is claimed first, see `store::outbox`). `retry_after` holds
//! back the chat or the whole bot (as the platform scoped it), transient failures back off,
//! a rejected markup falls back to plain text, and an edit whose message cannot be edited
//! goes out as a new message. A revoked token leaves the row queued for after the fix.

use std::sync::Arc;
use std::time::Duration;

use futures_util::FutureExt;
use hermes_adapter::{Backoff, ChatRef, Outbound, PlatformSender, SendError};
use tokio::sync::Notify;

use super::{ChatKey, Delivery};
use crate::store::OutboxRow;

/// How long an idle lane waits for more work before it ends.
const LANE_IDLE: Duration = Duration::from_secs(30);
/// Retrying a transient failure: 0.5 s, doubling, at most 30 s.
const RETRY: Backoff = Backoff::new(Duration::from_millis(500), Duration::from_secs(30));
/// How long a platform that refused the bot's credentials is left alone.
const UNAUTHORIZED_PAUSE: Duration = Duration::from_secs(60);

pub(super) struct Lane {
    pub(super) delivery: Delivery,
    pub(super) key: ChatKey,
    pub(super) chat: ChatRef,
    pub(super) notify: Arc<Notify>,
}

/// What became of one row.
enum Sent {
    /// Sent, or failed for good (recorded either way): go on with the next row.
    Done,
    /// Not sent and back in the queue (shutdown, revoked credentials): stop for now.
    Stop,
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
            let rows = match inner.store.outbox_pending(&self.chat).await {
                Ok(rows) => rows,
                Err(e) => {
                    tracing::error!(error = %e, "delivery: cannot read the outbox");
                    Vec::new()
                }
            };
            for row in rows {
                if inner.shutdown.is_cancelled() {
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
                if let Sent::Stop = self.deliver(&sender, row).await {
                    break 'lane;
                }
            }
            tokio::select! {
                _ = inner.shutdown.cancelled() => break,
                _ = self.notify.notified() => continue,
                _ = tokio::time::sleep(LANE_IDLE) => {}
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
        let target = match row.edit_of {
            Some(of) if sender.capabilities().edits => {
                match self.delivery.store().outbox_platform_id(of).await {
                    Ok(id) => id,
                    Err(e) => {
                        tracing::error!(error = %e, row = row.id, "delivery: cannot find the message to edit");
                        None
                    }
                }
            }
            _ => None,
        };
        match target {
            Some(message_id) => Outbound::Edit {
                chat: row.chat.clone(),
                message_id,
                body: row.body.clone(),
            },
            None => Outbound::Text {
                chat: row.chat.clone(),
                body: row.body.clone(),
                reply_to: row.reply_to.clone(),
                choices: row.choices.clone(),
            },
        }
    }

    /// Send one claimed row until it is sent or has failed for good.
    async fn deliver(&self, sender: &Arc<dyn PlatformSender>, row: OutboxRow) -> Sent {
        let inner = &self.delivery.inner;
        let store = self.delivery.store();
        let mut action = self.action_for(sender, &row).await;
        let mut attempts = row.attempts as u32;
        let mut retry = RETRY;
        let mut plain_only = false;
        let mut first = true;
        loop {
            tokio::select! {
                _ = inner.shutdown.cancelled() => return self.release(&row).await,
                _ = self.delivery.wait_budget(&row.chat) => {}
            }
            // A row may have been settled since its last attempt: send what it says now.
            if !std::mem::take(&mut first) {
                self.refresh(&row, &mut action, plain_only).await;
            }
            let error = match sender.send(action.clone()).await {
                Ok(delivered) => {
                    if let Err(e) = store.outbox_mark_sent(row.id, delivered.message_id).await {
                        tracing::error!(error = %e, row = row.id, "delivery: sent, but could not mark the row sent");
                    }
                    return Sent::Done;
                }
                Err(e) => e,
            };
            attempts += 1;
            let give_up = match (&error, &mut action) {
                (SendError::RateLimited { retry_after, scope }, _) => {
                    tracing::warn!(chat = %row.chat.chat_id, ?retry_after, ?scope, "delivery: rate limited by the platform");
                    self.delivery.block(&row.chat, scope, *retry_after);
                    false
                }
                (
                    SendError::MarkupRejected(why),
                    Outbound::Text { body, .. } | Outbound::Edit { body, .. },
                ) if body.markup.is_some() => {
                    tracing::warn!(why = %why, row = row.id, "delivery: markup rejected; sending plain text");
                    body.markup = None;
                    plain_only = true;
                    false
                }
                (SendError::Rejected(why), Outbound::Edit { body, .. }) => {
                    tracing::warn!(why = %why, row = row.id, "delivery: the message cannot be edited; sending the change as a new message");
                    action = Outbound::Text {
                        chat: row.chat.clone(),
                        body: body.clone(),
                        reply_to: None,
                        choices: Vec::new(),
                    };
                    false
                }
                (SendError::Unauthorized(why), _) => {
                    tracing::error!(platform = %row.chat.platform, why = %why, "delivery: the platform refused the bot's credentials; messages stay queued until the token is fixed");
                    self.delivery.block(
                        &row.chat,
                        &hermes_adapter::RateScope::Bot,
                        UNAUTHORIZED_PAUSE,
                    );
                    let _ = store
                        .outbox_mark_attempt(row.id, error.to_string(), false)
                        .await;
                    return self.release(&row).await;
                }
                (SendError::Transient(_), _) => attempts >= inner.config.max_attempts,
                (
                    SendError::MarkupRejected(_)
                    | SendError::Rejected(_)
                    | SendError::OutsideWindow(_)
                    | SendError::TooLong(_),
                    _,
                ) => true,
            };
            let _ = store
                .outbox_mark_attempt(row.id, error.to_string(), give_up)
                .await;
            if give_up {
                tracing::error!(error = %error, row = row.id, chat = %row.chat.chat_id, "delivery: giving up on a message");
                return Sent::Done;
            }
            if let SendError::Transient(_) = error {
                tokio::select! {
                    _ = inner.shutdown.cancelled() => return self.release(&row).await,
                    _ = tokio::time::sleep(retry.next_delay()) => {}
                }
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
