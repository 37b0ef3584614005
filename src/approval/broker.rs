//! The approval broker. A dangerous `terminal` call asks [`ApprovalBroker::check`], which
//! returns at once for harmless commands and for pattern classes already approved (for the
//! session, or always). Otherwise it records the request, queues the prompt (choices where
//! the platform has them, `/approve` `/deny` text always; see [`super::prompt`]), and waits
//! for [`ApprovalBroker::resolve`] (a press or a text command from an allowed person in that
//! chat), the timeout, or the turn's cancellation (`/stop`, an interrupting message).
//! Whoever removes the pending entry under the lock owns the outcome, so a press and a
//! timeout can never both win. The decision is recorded first; then the prompt is settled
//! through the outbox (rewritten if it has not gone out, else edited behind it in the
//! chat's lane), so an outcome never overtakes its prompt and a decided prompt never goes
//! out with live choices.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

use hermes_adapter::{ChatRef, ChoiceLimits};
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use super::patterns::{Danger, detect};
use super::prompt::{self, Decision, human_duration};
use crate::config::{ApprovalConfig, ApprovalMode};
use crate::delivery::Delivery;
use crate::store::Store;

/// Which pending request a decision is for.
#[derive(Debug, Clone, Copy)]
pub enum Target {
    /// The request a button belongs to.
    Id(i64),
    /// The oldest request waiting in the chat (text commands).
    Oldest,
}

/// What became of a decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resolution {
    Resolved {
        id: i64,
    },
    /// Nothing (or not this request) is waiting: decided or expired already.
    NothingPending,
    /// The request belongs to another chat.
    OtherChat,
}

/// Whether the tool may run the command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Gate {
    Run,
    /// Not run; the text tells the model why.
    Refused(String),
}

struct Verdict {
    decision: Decision,
    by: String,
}

struct Pending {
    chat: ChatRef,
    decide: oneshot::Sender<Verdict>,
}

/// Where a check comes from.
pub struct CheckContext<'a> {
    pub session_key: &'a str,
    pub chat: &'a ChatRef,
    pub cancel: &'a CancellationToken,
}

pub struct ApprovalBroker {
    store: Store,
    delivery: Delivery,
    config: ApprovalConfig,
    pending: Mutex<HashMap<i64, Pending>>,
    /// Pattern classes approved "for this session", by session key.
    session_allowed: Mutex<HashMap<String, HashSet<&'static str>>>,
}

enum Ending {
    Decided(Verdict),
    Expired,
    Cancelled,
}

impl ApprovalBroker {
    pub fn new(store: Store, delivery: Delivery, config: ApprovalConfig) -> Self {
        ApprovalBroker {
            store,
            delivery,
            config,
            pending: Mutex::new(HashMap::new()),
            session_allowed: Mutex::new(HashMap::new()),
        }
    }

    /// May `command` run in this session? Waits for a person when it is dangerous.
    pub async fn check(&self, ctx: CheckContext<'_>, command: &str) -> Gate {
        if self.config.mode == ApprovalMode::Off {
            return Gate::Run;
        }
        let dangers = detect(command);
        if dangers.is_empty() {
            return Gate::Run;
        }
        let keys: Vec<&'static str> = dangers.iter().map(|d| d.key).collect();
        let session_ok = {
            let allowed = self.session_allowed.lock().expect("session approvals lock");
            allowed
                .get(ctx.session_key)
                .is_some_and(|set| keys.iter().all(|k| set.contains(k)))
        };
        if session_ok {
            tracing::info!(command, "approval: covered by a session approval");
            return Gate::Run;
        }
        match self.store.allowlist_covers(&keys).await {
            Ok(true) => {
                tracing::info!(command, "approval: covered by the standing allowlist");
                return Gate::Run;
            }
            Ok(false) => {}
            Err(e) => tracing::error!(error = %e, "approval: cannot read the allowlist; asking"),
        }
        match self.ask(&ctx, command, &dangers).await {
            Ok(gate) => gate,
            Err(e) => {
                tracing::error!(error = %e, "approval: could not ask; the command is not run");
                Gate::Refused(format!(
                    "The command was NOT run: the approval request could not be sent ({e})."
                ))
            }
        }
    }

    async fn ask(
        &self,
        ctx: &CheckContext<'_>,
        command: &str,
        dangers: &[Danger],
    ) -> Result<Gate, crate::store::StoreError> {
        let keys: Vec<&'static str> = dangers.iter().map(|d| d.key).collect();
        let id = self
            .store
            .approval_create(ctx.session_key, ctx.chat, command, &keys)
            .await?;
        let limits = self
            .delivery
            .sender(ctx.chat.platform)
            .map_or(ChoiceLimits::NONE, |s| s.capabilities().choices);
        let choices = prompt::choices(id, limits);
        let text = prompt::prompt_text(command, dangers, self.config.timeout, !choices.is_empty());
        let (decide, decision) = oneshot::channel();
        self.pending.lock().expect("pending lock").insert(
            id,
            Pending {
                chat: ctx.chat.clone(),
                decide,
            },
        );

        let mut rows = self.delivery.reply_rows(ctx.chat, &text, None);
        if let Some(last) = rows.last_mut() {
            last.choices = choices;
        }
        let prompt_row = match self.delivery.queue(rows).await {
            Ok(ids) => ids.last().copied(),
            Err(e) => {
                self.pending.lock().expect("pending lock").remove(&id);
                let _ = self.store.approval_decide(id, "cancelled", None).await;
                return Err(e);
            }
        };
        if let Some(row) = prompt_row {
            self.store.approval_set_prompt(id, row).await?;
        }
        tracing::info!(id, command, "approval: waiting for a person");

        let ending = tokio::select! {
            verdict = decision => match verdict {
                Ok(v) => Ending::Decided(v),
                Err(_) => Ending::Cancelled,
            },
            _ = tokio::time::sleep(self.config.timeout) => Ending::Expired,
            _ = ctx.cancel.cancelled() => Ending::Cancelled,
        };
        // A decision may have been taken just as the wait ended: it wins if it got there first.
        let ending = match ending {
            Ending::Decided(v) => Ending::Decided(v),
            other => match self.pending.lock().expect("pending lock").remove(&id) {
                Some(_) => other,
                None => Ending::Cancelled,
            },
        };
        Ok(self
            .conclude(id, ctx, command, dangers, prompt_row, ending)
            .await)
    }

    async fn conclude(
        &self,
        id: i64,
        ctx: &CheckContext<'_>,
        command: &str,
        dangers: &[Danger],
        prompt_row: Option<i64>,
        ending: Ending,
    ) -> Gate {
        let keys: Vec<&'static str> = dangers.iter().map(|d| d.key).collect();
        let window = human_duration(self.config.timeout);
        let (state, by, line, gate) = match ending {
            Ending::Decided(Verdict { decision, by }) => {
                let gate = match &decision {
                    Decision::Deny(reason) => Gate::Refused(match reason {
                        Some(r) => format!("The person denied this command; it was NOT run. Their reason: {r}"),
                        None => "The person denied this command; it was NOT run. Do not run it another way; ask what they want instead.".into(),
                    }),
                    _ => Gate::Run,
                };
                match &decision {
                    Decision::Session => {
                        let mut allowed =
                            self.session_allowed.lock().expect("session approvals lock");
                        allowed
                            .entry(ctx.session_key.to_owned())
                            .or_default()
                            .extend(keys.iter().copied());
                    }
                    Decision::Always => {
                        for d in dangers {
                            if let Err(e) = self
                                .store
                                .allowlist_add(d.key, d.description, command, &by)
                                .await
                            {
                                tracing::error!(error = %e, "approval: could not save the standing approval");
                            }
                        }
                    }
                    _ => {}
                }
                let state = decision.state();
                let mut line = format!("{} by {by}.", decision.acknowledgement());
                if let Decision::Deny(Some(reason)) = &decision {
                    line = format!("❌ Denied by {by}: {reason}");
                }
                if decision == Decision::Always {
                    line.push_str(&format!(
                        " (undo with `hermes-gateway approvals revoke {}`)",
                        keys.join(" ")
                    ));
                }
                (state, Some(by), line, gate)
            }
            Ending::Expired => (
                "expired",
                None,
                format!("⌛ Expired: nobody answered within {window}, so the command was NOT run."),
                Gate::Refused(format!(
                    "Nobody approved this command within {window}, so it was NOT run. Tell the person; they can ask you to try again."
                )),
            ),
            Ending::Cancelled => (
                "cancelled",
                None,
                "⏹ Cancelled: the task was stopped, so the command was NOT run.".to_owned(),
                Gate::Refused("The command was NOT run: the task was stopped.".into()),
            ),
        };
        if let Err(e) = self.store.approval_decide(id, state, by).await {
            tracing::error!(error = %e, "approval: could not record the decision");
        }
        tracing::info!(id, state, "approval: decided");
        self.show_outcome(ctx.chat, prompt_row, &line).await;
        gate
    }

    /// Show the outcome under the prompt (dropping its choices) through the outbox, or in a
    /// message of its own when there is no prompt row.
    async fn show_outcome(&self, chat: &ChatRef, prompt_row: Option<i64>, line: &str) {
        let settled = match prompt_row {
            Some(row) => self.delivery.settle(row, line).await,
            None => self.delivery.reply(chat, line, None).await.map(|_| ()),
        };
        if let Err(e) = settled {
            tracing::error!(error = %e, "approval: could not show the outcome");
        }
    }

    /// A decision from an allowed person in `chat` (the router checked who they are).
    pub fn resolve(
        &self,
        chat: &ChatRef,
        target: Target,
        decision: Decision,
        by: &str,
    ) -> Resolution {
        let mut pending = self.pending.lock().expect("pending lock");
        let same_chat = |p: &Pending| p.chat.same_chat(chat);
        let id = match target {
            Target::Id(id) => match pending.get(&id) {
                None => return Resolution::NothingPending,
                Some(p) if !same_chat(p) => return Resolution::OtherChat,
                Some(_) => id,
            },
            Target::Oldest => match pending
                .iter()
                .filter(|(_, p)| same_chat(p))
                .map(|(id, _)| *id)
                .min()
            {
                Some(id) => id,
                None => return Resolution::NothingPending,
            },
        };
        let entry = pending.remove(&id).expect("present");
        let _ = entry.decide.send(Verdict {
            decision,
            by: by.to_owned(),
        });
        Resolution::Resolved { id }
    }

    /// Forget "for this session" approvals (`/new`).
    pub fn forget_session(&self, session_key: &str) {
        self.session_allowed
            .lock()
            .expect("session approvals lock")
            .remove(session_key);
    }

    /// Startup: approvals an earlier run left pending expire; nothing runs on its own. Call
    /// it before delivery starts, so stale prompts are withdrawn before they could be sent.
    pub async fn expire_leftovers(&self) {
        let leftovers = match self.store.approvals_pending().await {
            Ok(l) => l,
            Err(e) => {
                tracing::error!(error = %e, "approval: cannot read pending approvals");
                return;
            }
        };
        for p in leftovers {
            let _ = self.store.approval_decide(p.id, "expired", None).await;
            let mut preview: String = p.command.chars().take(200).collect();
            if preview.len() < p.command.len() {
                preview.push('…');
            }
            let line = format!(
                "⌛ The gateway restarted while `{preview}` was waiting for approval, so it was NOT run."
            );
            tracing::info!(id = p.id, "approval: expired by restart");
            // A prompt still in the outbox goes out settled, without live choices.
            self.show_outcome(&p.chat, p.prompt_outbox_id, &line).await;
        }
    }
}
