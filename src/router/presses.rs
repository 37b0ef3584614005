//! Choices pressed and `/approve` `/deny`: a press answers a question the agent asked
//! (`clarify`) or decides an approval, by its choice id; a text command decides the oldest
//! approval waiting in the chat. Neither goes through the conversation's actor: a turn may
//! be parked waiting for it.

use super::*;

/// What a user (not an admin, where tiers are on) is told when they would allow a command
/// for good.
const ALWAYS_IS_FOR_ADMINS: &str =
    "⛔ Only an admin can allow a command for good here; use Allow once, or /approve session.";

impl Router {
    /// A choice of an approval prompt (or a stale one) was pressed. The adapter has
    /// acknowledged the press already; the notice for the presser is handed to it without
    /// waiting.
    pub(super) async fn press(
        &self,
        id: i64,
        chat: &ChatRef,
        author: &Author,
        press: &Press,
        allowed: bool,
    ) {
        // A choice of a question the agent asked (`clarify`).
        let question = allowed
            .then(|| self.services.clarify.press(chat, &press.choice_id))
            .flatten();
        let (state, note, notice) = match parse_choice_id(&press.choice_id) {
            _ if question.is_some() => (
                InboxState::Done,
                "question answered by button",
                question.unwrap_or_default(),
            ),
            _ if !allowed => (
                InboxState::Refused,
                "button press from someone not allowed",
                "You are not allowed to approve commands here.".to_owned(),
            ),
            None => (
                InboxState::Refused,
                "unknown button",
                "This button is no longer active.".to_owned(),
            ),
            Some((_, Decision::Always))
                if !self.tier(chat, &author.user_id).may_approve_always() =>
            {
                (
                    InboxState::Refused,
                    "standing approval pressed by a user",
                    ALWAYS_IS_FOR_ADMINS.to_owned(),
                )
            }
            Some((approval, decision)) => {
                let admin = self.tier(chat, &author.user_id).is_admin();
                match self
                    .approvals
                    .resolve(chat, Target::Id(approval), decision, author, admin)
                    .await
                {
                    Resolution::Resolved { outcome, .. } => {
                        (InboxState::Done, "approval decided by button", outcome)
                    }
                    Resolution::NothingPending => (
                        InboxState::Refused,
                        "approval no longer pending",
                        "This request is no longer waiting (it was decided or expired).".to_owned(),
                    ),
                    Resolution::OtherChat => (
                        InboxState::Refused,
                        "approval from another chat",
                        "This button belongs to another chat.".to_owned(),
                    ),
                    Resolution::NotYours { owner } => (
                        InboxState::Refused,
                        "approval pressed by someone other than its asker",
                        format!("Only {owner} can decide this request: it is for their command."),
                    ),
                }
            }
        };
        if !allowed {
            tracing::warn!(user = %author.user_id, "router: approval button pressed by someone not allowed");
        }
        // Where a message cannot be edited (WhatsApp) the outcome follows the prompt as a
        // message of its own in this chat, which the presser sees: a notice would say it
        // twice.
        let decided = matches!(state, InboxState::Done);
        if let Some(sender) = self.services.delivery.sender(chat.platform).cloned()
            && (!decided || sender.capabilities().edits)
        {
            let notice = Outbound::PressNotice {
                chat: chat.clone(),
                press_id: press.press_id.clone(),
                text: notice,
            };
            tokio::spawn(async move {
                if let Err(e) = sender.send(notice).await {
                    tracing::debug!(error = %e, "router: the press notice was not shown");
                }
            });
        }
        self.end(id, state, note, None).await;
    }

    /// `/approve` or `/deny` as text: on the prompt it replies to (like pressing one of its
    /// buttons), else on the oldest delivered request of the sender's own session.
    pub(super) async fn decide_by_text(
        &self,
        id: i64,
        chat: &ChatRef,
        author: &Author,
        decision: Decision,
        message: &InboundMessage,
    ) {
        let message_id = &message.message_id;
        let (target, nothing) = match &message.reply_to {
            Some(prompt) => (
                Target::Prompt(prompt.clone()),
                "The message you replied to is not a request waiting for approval (it was decided or expired, or it is not a prompt).",
            ),
            None => (
                Target::OldestOf(session_key(chat, &author.user_id, &self.config.sessions)),
                "None of your commands is waiting for approval here.",
            ),
        };
        let tier = self.tier(chat, &author.user_id);
        if decision == Decision::Always && !tier.may_approve_always() {
            let reply = Reply {
                chat: chat.clone(),
                text: ALWAYS_IS_FOR_ADMINS.to_owned(),
                reply_to: Some(message_id.to_owned()),
            };
            return self
                .end(
                    id,
                    InboxState::Refused,
                    "standing approval by a user",
                    Some(reply),
                )
                .await;
        }
        let admin = tier.is_admin();
        let (state, text) = match self
            .approvals
            .resolve(chat, target, decision, author, admin)
            .await
        {
            Resolution::Resolved { outcome, .. } => (InboxState::Done, outcome),
            Resolution::NothingPending | Resolution::OtherChat => {
                (InboxState::Refused, nothing.to_owned())
            }
            Resolution::NotYours { owner } => (
                InboxState::Refused,
                format!("Only {owner} can decide that request: it is for their command."),
            ),
        };
        let reply = Reply {
            chat: chat.clone(),
            text,
            reply_to: Some(message_id.to_owned()),
        };
        self.end(id, state, "approval command", Some(reply)).await;
    }
}
