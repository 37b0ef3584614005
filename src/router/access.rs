//! Who may come in: the gateway's and the platform's allowlists, pairing codes for
//! strangers in a DM (told once in a while, not at every message), and the mention rule in
//! groups.

use super::*;

/// How often a stranger hears that too many pairing requests wait (as pairing reminders).
const TURNED_AWAY_EVERY: std::time::Duration = std::time::Duration::from_secs(600);
/// At most this many strangers are remembered; past it (a flood) nobody is told.
const TURNED_AWAY_KEPT: usize = 4096;

impl Router {
    /// Whether `author` should hear (now) that too many pairing requests wait: once per
    /// [`TURNED_AWAY_EVERY`].
    pub(super) fn first_turn_away(&self, chat: &ChatRef, author: &Author) -> bool {
        let now = std::time::Instant::now();
        let key = format!("{}:{}", chat.platform, author.user_id);
        let mut told = self.turned_away.lock().expect("turned-away lock");
        if told.len() >= TURNED_AWAY_KEPT {
            told.retain(|_, at| now.duration_since(*at) < TURNED_AWAY_EVERY);
        }
        match told.get(&key) {
            Some(at) if now.duration_since(*at) < TURNED_AWAY_EVERY => false,
            _ if told.len() >= TURNED_AWAY_KEPT => false,
            _ => {
                told.insert(key, now);
                true
            }
        }
    }

    /// Someone not allowed wrote: a pairing code in a DM, silence in a group.
    pub(super) async fn stranger(
        &self,
        id: i64,
        chat: &ChatRef,
        author: &Author,
        message_id: &str,
    ) {
        if chat.kind != ChatKind::Direct {
            return self
                .end(id, InboxState::Ignored, "sender not allowed (group)", None)
                .await;
        }
        let outcome = self
            .services
            .store
            .pairing_request(
                chat.platform.as_str(),
                &author.user_id,
                &author.display_name,
                &chat.chat_id,
            )
            .await;
        let (state, note, text) = match outcome {
            Ok(PairingRequestOutcome::Issued(code)) => (
                InboxState::Refused,
                "pairing code issued",
                Some(pairing_text(chat.platform, &code, false)),
            ),
            Ok(PairingRequestOutcome::Remind(code)) => (
                InboxState::Refused,
                "pairing code reminded",
                Some(pairing_text(chat.platform, &code, true)),
            ),
            Ok(PairingRequestOutcome::AlreadyReminded) => {
                (InboxState::Refused, "pairing code sent recently", None)
            }
            Ok(PairingRequestOutcome::TooMany) => (
                InboxState::Refused,
                "too many pairing requests",
                self.first_turn_away(chat, author).then(|| {
                    "Too many pairing requests are waiting right now; please try again later."
                        .to_owned()
                }),
            ),
            Err(e) => {
                tracing::error!(error = %e, "router: pairing store failed");
                (
                    InboxState::Failed,
                    "pairing store failed",
                    Some("Sorry, I can't process pairing requests right now.".to_owned()),
                )
            }
        };
        tracing::info!(user = %author.user_id, platform = %chat.platform, note, "router: message from a person who is not allowed");
        let reply = text.map(|text| Reply {
            chat: chat.clone(),
            text,
            reply_to: Some(message_id.to_owned()),
        });
        self.end(id, state, note, reply).await;
    }

    /// Whether `user_id` may talk to the bot on `platform`: allowed by an allowlist (or
    /// everyone is), or paired (false, logged, when the store cannot say).
    pub async fn is_allowed(&self, platform: Platform, user_id: &str) -> bool {
        let gateway = &self.config.access;
        let here = self.config.platform(platform).map(|p| p.access());
        if gateway.gateway_allow_all || here.is_some_and(|a| a.allow_all) {
            return true;
        }
        let listed = gateway.gateway_allowed.iter().any(|u| u == user_id)
            || here.is_some_and(|a| a.allowed.iter().any(|u| u == user_id));
        if listed {
            return true;
        }
        match self
            .services
            .store
            .pairing_is_approved(platform.as_str(), user_id)
            .await
        {
            Ok(paired) => paired,
            Err(e) => {
                tracing::error!(error = %e, "router: cannot check pairing; refusing");
                false
            }
        }
    }

    /// Whether `event` is chatter the mention rule turns away whoever wrote it ([`Router::needs_mention`]).
    pub fn is_chatter(&self, event: &Inbound) -> bool {
        matches!(&event.kind, InboundKind::Message(m) if self.needs_mention(&event.chat, m))
    }

    /// Whether the mention rule turns `message` away: in a group or channel, not addressed
    /// to the bot, on a platform that wants a mention.
    pub(super) fn needs_mention(&self, chat: &ChatRef, message: &InboundMessage) -> bool {
        chat.kind != ChatKind::Direct && !message.addressed && self.require_mention(chat.platform)
    }

    fn require_mention(&self, platform: Platform) -> bool {
        self.config
            .platform(platform)
            .is_none_or(|p| p.require_mention())
    }
}

fn pairing_text(platform: Platform, code: &str, reminder: bool) -> String {
    let opening = if reminder {
        "You still need to be paired with this bot."
    } else {
        "Hi! I don't know you yet, so I can't answer."
    };
    format!(
        "{opening}\n\nYour pairing code: `{code}`\n\nAsk the owner of this bot to run:\n`hermes-gateway pairing approve {platform} {code}`\n\nThe code is valid for one hour."
    )
}
