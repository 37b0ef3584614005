//! The approval broker. A dangerous `terminal` call asks [`ApprovalBroker::check`], which
//! returns at once for harmless commands and for pattern classes already approved (for the
//! session, or always). Otherwise it records the request, sends the prompt (buttons where the
//! platform has them, `/approve` `/deny` text always), and waits for [`ApprovalBroker::resolve`]
//! (a button or a text command from an allowed person in that chat), the timeout, or the
//! turn's cancellation (`/stop`, an interrupting message). Whoever removes the pending entry
//! under the lock owns the outcome, so a press and a timeout can never both win. The
//! decision is recorded first, then the prompt is edited to show it.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::time::Duration;

use hermes_adapter::{Button, ChatRef, MessageBody, Outbound};
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use super::patterns::{Danger, detect};
use crate::config::{ApprovalConfig, ApprovalMode};
use crate::delivery::Delivery;
use crate::format;
use crate::store::Store;

/// The longest command shown in a prompt.
const PREVIEW_CHARS: usize = 3000;

/// A person's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Choice {
    Once,
    Session,
    Always,
    Deny(Option<String>),
}

impl Choice {
    /// The short code in button data.
    fn code(&self) -> &'static str {
        match self {
            Choice::Once => "o",
            Choice::Session => "s",
            Choice::Always => "a",
            Choice::Deny(_) => "d",
        }
    }

    fn from_code(code: &str) -> Option<Choice> {
        Some(match code {
            "o" => Choice::Once,
            "s" => Choice::Session,
            "a" => Choice::Always,
            "d" => Choice::Deny(None),
            _ => return None,
        })
    }

    /// Parse `/approve [session|always]` arguments.
    pub fn from_approve_args(args: &str) -> Option<Choice> {
        match args.trim().to_ascii_lowercase().as_str() {
            "" | "once" => Some(Choice::Once),
            "session" => Some(Choice::Session),
            "always" => Some(Choice::Always),
            _ => None,
        }
    }

    /// What the presser is told.
    pub fn acknowledgement(&self) -> &'static str {
        match self {
            Choice::Once => "✅ Allowed once",
            Choice::Session => "✅ Allowed for this session",
            Choice::Always => "✅ Always allowed",
            Choice::Deny(_) => "❌ Denied",
        }
    }
}

/// Button data for approval `id` and `choice`: `appr:<id>:<code>` (well under 64 bytes).
pub fn button_data(id: i64, choice: &Choice) -> String {
    format!("appr:{id}:{}", choice.code())
}

/// Parse button data made by [`button_data`].
pub fn parse_button_data(data: &str) -> Option<(i64, Choice)> {
    let mut parts = data.strip_prefix("appr:")?.split(':');
    let id = parts.next()?.parse().ok()?;
    let choice = Choice::from_code(parts.next()?)?;
    Some((id, choice))
}

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
    choice: Choice,
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
        let prompt = self.prompt_text(command, dangers);
        let (decide, decision) = oneshot::channel();
        self.pending.lock().expect("pending lock").insert(
            id,
            Pending {
                chat: ctx.chat.clone(),
                decide,
            },
        );

        let buttons = self.buttons_for(ctx.chat, id);
        let mut rows = self.delivery.reply_rows(ctx.chat, &prompt, None);
        if let Some(last) = rows.last_mut() {
            last.buttons = buttons;
        }
        let sent = self.delivery.queue(rows).await;
        let prompt_row = match sent {
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
            .conclude(
                id, ctx, command, &prompt, &keys, dangers, prompt_row, ending,
            )
            .await)
    }

    #[allow(clippy::too_many_arguments)]
    async fn conclude(
        &self,
        id: i64,
        ctx: &CheckContext<'_>,
        command: &str,
        prompt: &str,
        keys: &[&'static str],
        dangers: &[Danger],
        prompt_row: Option<i64>,
        ending: Ending,
    ) -> Gate {
        let window = human_duration(self.config.timeout);
        let (state, by, line, gate) = match ending {
            Ending::Decided(Verdict { choice, by }) => {
                let gate = match &choice {
                    Choice::Deny(reason) => Gate::Refused(match reason {
                        Some(r) => format!("The person denied this command; it was NOT run. Their reason: {r}"),
                        None => "The person denied this command; it was NOT run. Do not run it another way; ask what they want instead.".into(),
                    }),
                    _ => Gate::Run,
                };
                match &choice {
                    Choice::Session => {
                        let mut allowed =
                            self.session_allowed.lock().expect("session approvals lock");
                        allowed
                            .entry(ctx.session_key.to_owned())
                            .or_default()
                            .extend(keys.iter().copied());
                    }
                    Choice::Always => {
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
                let state = match &choice {
                    Choice::Once => "approved_once",
                    Choice::Session => "approved_session",
                    Choice::Always => "approved_always",
                    Choice::Deny(_) => "denied",
                };
                let mut line = format!("{} by {by}.", choice.acknowledgement());
                if let Choice::Deny(Some(reason)) = &choice {
                    line = format!("❌ Denied by {by}: {reason}");
                }
                if choice == Choice::Always {
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
        self.show_outcome(ctx.chat, prompt, prompt_row, &line).await;
        gate
    }

    /// Edit the prompt to show the outcome (dropping its buttons), or say it in a new message
    /// when the prompt cannot be edited.
    async fn show_outcome(
        &self,
        chat: &ChatRef,
        prompt: &str,
        prompt_row: Option<i64>,
        line: &str,
    ) {
        let platform_id = match prompt_row {
            Some(row) => self.store.outbox_platform_id(row).await.ok().flatten(),
            None => None,
        };
        let can_edit = self
            .delivery
            .sender(chat.platform)
            .is_some_and(|s| s.capabilities().edits);
        if let (Some(message_id), true) = (platform_id, can_edit) {
            let markup = self
                .delivery
                .sender(chat.platform)
                .map(|s| s.capabilities().markup);
            let text = format!("{prompt}\n\n{line}");
            let body = markup
                .map(|m| format::render(&text, m))
                .unwrap_or_else(|| MessageBody::plain(text));
            let edit = Outbound::Edit {
                chat: chat.clone(),
                message_id,
                body,
            };
            match self.delivery.direct(edit).await {
                Ok(_) => return,
                Err(e) => {
                    tracing::warn!(error = %e, "approval: could not edit the prompt; sending the outcome instead")
                }
            }
        }
        if let Err(e) = self.delivery.reply(chat, line, None).await {
            tracing::error!(error = %e, "approval: could not send the outcome");
        }
    }

    fn buttons_for(&self, chat: &ChatRef, id: i64) -> Vec<Button> {
        let has_buttons = self
            .delivery
            .sender(chat.platform)
            .is_some_and(|s| s.capabilities().buttons);
        if !has_buttons {
            return Vec::new();
        }
        [
            ("Allow once", Choice::Once),
            ("Allow for this session", Choice::Session),
            ("Always allow", Choice::Always),
            ("Deny", Choice::Deny(None)),
        ]
        .into_iter()
        .map(|(label, choice)| Button {
            label: label.into(),
            data: button_data(id, &choice),
        })
        .collect()
    }

    fn prompt_text(&self, command: &str, dangers: &[Danger]) -> String {
        let mut preview: String = command.chars().take(PREVIEW_CHARS).collect();
        if preview.len() < command.len() {
            preview.push_str("\n… (shortened)");
        }
        let fence = if preview.contains("```") {
            "~~~"
        } else {
            "```"
        };
        let why: Vec<&str> = dangers.iter().map(|d| d.description).collect();
        format!(
            "⚠️ **Hermes wants to run a command that needs your OK**\n\n{fence}\n{preview}\n{fence}\n\n\
             Why it was flagged: {}\n\n\
             Answer with the buttons, or `/approve`, `/approve session`, `/approve always`, `/deny [reason]`.\n\
             If you don't answer within {} it will NOT run.",
            why.join("; "),
            human_duration(self.config.timeout)
        )
    }

    /// A decision from an allowed person in `chat` (the router checked who they are).
    pub fn resolve(&self, chat: &ChatRef, target: Target, choice: Choice, by: &str) -> Resolution {
        let mut pending = self.pending.lock().expect("pending lock");
        let same_chat =
            |p: &Pending| p.chat.platform == chat.platform && p.chat.chat_id == chat.chat_id;
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
            choice,
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
            // A prompt still in the outbox must not go out with live buttons.
            if let Some(row) = p.prompt_outbox_id
                && let Err(e) = self
                    .store
                    .outbox_withdraw(row, "approval expired by restart")
                    .await
            {
                tracing::error!(error = %e, "approval: could not withdraw a stale prompt");
            }
            self.show_outcome(&p.chat, "⚠️ Approval request", p.prompt_outbox_id, &line)
                .await;
        }
    }
}

fn human_duration(d: Duration) -> String {
    let secs = d.as_secs();
    if secs >= 60 && secs.is_multiple_of(60) {
        let m = secs / 60;
        format!("{m} minute{}", if m == 1 { "" } else { "s" })
    } else {
        format!("{secs} seconds")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn button_data_round_trips_and_fits_telegram() {
        for choice in [
            Choice::Once,
            Choice::Session,
            Choice::Always,
            Choice::Deny(None),
        ] {
            let data = button_data(1_234_567_890, &choice);
            assert!(data.len() <= 64);
            assert_eq!(parse_button_data(&data), Some((1_234_567_890, choice)));
        }
        assert_eq!(parse_button_data("appr:x:o"), None);
        assert_eq!(parse_button_data("other"), None);
    }

    #[test]
    fn approve_arguments_are_understood() {
        assert_eq!(Choice::from_approve_args(""), Some(Choice::Once));
        assert_eq!(
            Choice::from_approve_args(" Session "),
            Some(Choice::Session)
        );
        assert_eq!(Choice::from_approve_args("always"), Some(Choice::Always));
        assert_eq!(Choice::from_approve_args("everything"), None);
        assert_eq!(human_duration(Duration::from_secs(300)), "5 minutes");
        assert_eq!(human_duration(Duration::from_secs(2)), "2 seconds");
    }
}
