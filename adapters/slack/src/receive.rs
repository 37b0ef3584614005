//! From Slack to the sink, by either road: Socket Mode envelopes (slack-morphism's
//! listener acknowledges an envelope when its callback returns, so the callback records
//! first and returns after; a failed recording returns an error and the envelope is not
//! acknowledged) and Events API requests (the handler answers 200 once the event is
//! recorded, 500 if it could not be). Slack delivers an unacknowledged *event* again;
//! a press or a slash command it does not (the person sees an error and can try again),
//! which is why nothing slow stands before their acknowledgement. Redeliveries, retries
//! (`retry_attempt`, `X-Slack-Retry-Num`) and the double delivery of a mention are
//! recognised by the inbox from the event ids `normalize` gives.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hermes_adapter::{Accepted, Inbound, InboundKind, InboundSink, Liveness, SinkError};
use slack_morphism::errors::*;
use slack_morphism::prelude::*;
use tokio::sync::watch;

use crate::client::Client;
use crate::normalize::{self, Me};
use crate::open::{Open, Response};

/// How long a name lookup (`users.info`) may hold a recording up (Slack wants the
/// acknowledgement within 3 s).
const NAME_LOOKUP: Duration = Duration::from_millis(800);
/// How long an event waits for the adapter to know who the bot is.
const STARTING: Duration = Duration::from_secs(2);
/// Names remembered; past this the memory starts again.
const NAMES_KEPT: usize = 5_000;

/// Turns Slack events into recorded [`Inbound`]s.
pub struct Receiver {
    pub client: Arc<Client>,
    pub token: SlackApiToken,
    pub me: watch::Receiver<Option<Me>>,
    pub reply_in_thread: bool,
    pub open: Open,
    pub liveness: Liveness,
    /// Display names by user id.
    pub names: Mutex<HashMap<String, String>>,
    /// The gateway's commands, as the daemon registered them.
    pub commands: normalize::Commands,
}

/// Why an event was not recorded.
#[derive(Debug, thiserror::Error)]
pub enum NotRecorded {
    /// The bot's identity is not known yet (the adapter has not reached `auth.test`).
    #[error("the bot's identity is not known yet")]
    NotReady,
    #[error(transparent)]
    Sink(#[from] SinkError),
}

impl Receiver {
    /// A push event (a message, a mention); `Ok` once recorded or when it is not for the
    /// gateway.
    pub async fn push(
        &self,
        sink: &dyn InboundSink,
        event: &SlackPushEventCallback,
    ) -> Result<(), NotRecorded> {
        let me = self.me().await?;
        self.liveness.beat();
        let Some(mut event) = normalize::push(event, &me, self.reply_in_thread) else {
            return Ok(());
        };
        if let InboundKind::Message(m) = &mut event.kind
            && !m.addressed
            && let Some(thread) = &event.chat.thread_id
            && self.open.is_bot_thread(&event.chat.chat_id, thread).await
        {
            // A follow-up in a thread the bot answered in (on any node, before a restart
            // too) needs no mention.
            m.addressed = true;
        }
        if let InboundKind::Message(m) = &event.kind
            && m.addressed
        {
            // Only messages the gateway answers need the person's name.
            event.author.display_name = self.name_of(&event.author.user_id).await;
            if let Some(thread) = &event.chat.thread_id {
                self.open
                    .talked_in(&event.chat.chat_id, &event.author.user_id, thread)
                    .await;
            }
        }
        self.record(sink, event).await
    }

    /// Who the bot is; an event that arrives while the adapter is still starting waits a
    /// moment for `auth.test` rather than being refused at once (Slack would only try again
    /// a minute later).
    async fn me(&self) -> Result<Me, NotRecorded> {
        let mut me = self.me.clone();
        match tokio::time::timeout(STARTING, me.wait_for(Option::is_some)).await {
            Ok(Ok(known)) => known.clone().ok_or(NotRecorded::NotReady),
            _ => Err(NotRecorded::NotReady),
        }
    }

    /// A button press (other interactions are not for the gateway).
    pub async fn interaction(
        &self,
        sink: &dyn InboundSink,
        event: &SlackInteractionEvent,
    ) -> Result<(), NotRecorded> {
        self.liveness.beat();
        let SlackInteractionEvent::BlockActions(actions) = event else {
            return Ok(());
        };
        let Some(event) = normalize::press(actions) else {
            return Ok(());
        };
        if let InboundKind::Press(press) = &event.kind {
            // Before recording: the daemon may send its notice before the sink returns.
            self.open
                .press(&press.press_id, &event.author.user_id)
                .await;
        }
        self.record(sink, event).await
    }

    /// `/hermes …`.
    pub async fn command(
        &self,
        sink: &dyn InboundSink,
        event: &SlackCommandEvent,
    ) -> Result<(), NotRecorded> {
        self.liveness.beat();
        // Only a command's private answers go through the response URL.
        if normalize::is_private(event, &self.commands) {
            self.open
                .response(
                    event.trigger_id.as_ref(),
                    Response {
                        url: event.response_url.0.to_string(),
                    },
                )
                .await;
        }
        let thread = self
            .open
            .last_thread(event.channel_id.as_ref(), event.user_id.as_ref())
            .await;
        self.record(sink, normalize::command(event, thread, &self.commands))
            .await
    }

    async fn record(&self, sink: &dyn InboundSink, event: Inbound) -> Result<(), NotRecorded> {
        match sink.accept(event).await? {
            Accepted::New => {}
            Accepted::Duplicate => {
                tracing::debug!("slack: a redelivered event was recorded before")
            }
        }
        Ok(())
    }

    /// A person's display name (`users.info`, remembered); the id when it cannot be had.
    async fn name_of(&self, user: &str) -> String {
        if let Some(name) = self
            .names
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(user)
        {
            return name.clone();
        }
        let session = self.client.open_session(&self.token);
        let request = SlackApiUsersInfoRequest::new(user.into());
        let found = tokio::time::timeout(NAME_LOOKUP, session.users_info(&request)).await;
        let name = match found {
            Ok(Ok(info)) => {
                let profile = info.user.profile.as_ref();
                profile
                    .and_then(|p| p.display_name.clone().filter(|n| !n.is_empty()))
                    .or_else(|| profile.and_then(|p| p.real_name.clone()))
                    .or_else(|| info.user.name.clone())
            }
            Ok(Err(e)) => {
                tracing::warn!(%user, error = %e, "slack: no display name (does the app have users:read?); the id is shown instead");
                None
            }
            Err(_) => None,
        };
        // A failed lookup is remembered too: the id stands in, and Slack is not asked again
        // for every message.
        let name = name.unwrap_or_else(|| user.to_owned());
        let mut names = self.names.lock().unwrap_or_else(|e| e.into_inner());
        if names.len() >= NAMES_KEPT {
            names.clear();
        }
        names.insert(user.to_owned(), name.clone());
        name
    }
}

/// What the Socket Mode callbacks find in the listener's user state.
pub struct SocketState {
    pub receiver: Arc<Receiver>,
    pub sink: Arc<dyn InboundSink>,
}

type Shared = SlackClientEventsUserState;

async fn state(states: &Shared) -> Option<(Arc<Receiver>, Arc<dyn InboundSink>)> {
    let states = states.read().await;
    states
        .get_user_state::<SocketState>()
        .map(|s| (s.receiver.clone(), s.sink.clone()))
}

/// An error the listener's error handler recognises: do not acknowledge the envelope.
#[derive(Debug, thiserror::Error)]
#[error("slack: the event could not be recorded; Slack will deliver it again: {0}")]
pub struct Unrecorded(pub String);

fn unrecorded(e: NotRecorded) -> Box<dyn std::error::Error + Send + Sync> {
    tracing::error!(error = %e, "slack: an event could not be recorded; leaving it unacknowledged");
    Box::new(Unrecorded(e.to_string()))
}

pub async fn on_push(
    event: SlackPushEventCallback,
    _client: Arc<Client>,
    states: Shared,
) -> UserCallbackResult<()> {
    let Some((receiver, sink)) = state(&states).await else {
        return Err(unrecorded(NotRecorded::NotReady));
    };
    receiver
        .push(sink.as_ref(), &event)
        .await
        .map_err(unrecorded)
}

pub async fn on_interaction(
    event: SlackInteractionEvent,
    _client: Arc<Client>,
    states: Shared,
) -> UserCallbackResult<SlackInteractionResponse> {
    let Some((receiver, sink)) = state(&states).await else {
        return Err(unrecorded(NotRecorded::NotReady));
    };
    receiver
        .interaction(sink.as_ref(), &event)
        .await
        .map_err(unrecorded)?;
    Ok(SlackInteractionResponse::Empty)
}

pub async fn on_command(
    event: SlackCommandEvent,
    _client: Arc<Client>,
    states: Shared,
) -> UserCallbackResult<SlackCommandEventResponse> {
    let Some((receiver, sink)) = state(&states).await else {
        return Err(unrecorded(NotRecorded::NotReady));
    };
    receiver
        .command(sink.as_ref(), &event)
        .await
        .map_err(unrecorded)?;
    // The answer comes later through the response URL; the acknowledgement shows nothing.
    Ok(SlackCommandEventResponse::new(SlackMessageContent::new()))
}

/// A Socket Mode connection said hello: the socket is alive.
pub async fn on_hello(states: Shared) {
    if let Some((receiver, _)) = state(&states).await {
        receiver.liveness.beat();
    }
    tracing::info!("slack: Socket Mode connected");
}

/// The listener's error handler: an event that could not be recorded is left
/// unacknowledged; anything else is logged in words ([`listener_trouble`]).
pub fn on_error(
    error: Box<dyn std::error::Error + Send + Sync>,
    _client: Arc<Client>,
    _states: Shared,
) -> HttpStatusCode {
    if error.downcast_ref::<Unrecorded>().is_some() {
        return HttpStatusCode::INTERNAL_SERVER_ERROR;
    }
    tracing::warn!("slack: Socket Mode: {}", listener_trouble(error));
    HttpStatusCode::OK
}

/// What went wrong in the Socket Mode listener, as the operator can read it: a network
/// failure in its causes' words (not slack-morphism's debug dump of a hyper error), and an
/// envelope that could not be read without its body (which holds people's messages).
fn listener_trouble(error: Box<dyn std::error::Error + Send + Sync>) -> String {
    match error.downcast::<SlackClientError>() {
        Ok(slack) => match *slack {
            SlackClientError::ProtocolError(protocol) => format!(
                "an envelope from or to Slack could not be read or written ({})",
                protocol.json_error
            ),
            // slack-morphism puts a frame's body in some of these ("Unexpected binary
            // received from Slack: [..]"): its first words only.
            SlackClientError::SocketModeProtocolError(protocol) => {
                match protocol.message.split_once(": ") {
                    Some((said, _)) => format!("{said} (details left out of the log)"),
                    None => protocol.message,
                }
            }
            other => crate::client::map_error("Socket Mode", other).to_string(),
        },
        Err(other) => crate::client::readable(other.as_ref()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listener_error_is_said_in_words_and_never_with_the_envelope() {
        let body = r#"{"envelope_id":"1","payload":{"event":{"text":"my private words"}}}"#;
        let json_error = serde_json::from_str::<serde_json::Value>("{").unwrap_err();
        let unreadable = SlackClientError::ProtocolError(
            SlackClientProtocolError::new(json_error).with_json_body(body.into()),
        );
        let said = listener_trouble(Box::new(unreadable));
        assert!(said.contains("could not be read"), "{said}");
        assert!(!said.contains("private words"), "{said}");
        let frame = SlackClientError::SocketModeProtocolError(
            SlackClientSocketModeProtocolError::new(format!(
                "Unexpected binary received from Slack: {:?}",
                body.as_bytes()
            )),
        );
        let said = listener_trouble(Box::new(frame));
        assert_eq!(
            said,
            "Unexpected binary received from Slack (details left out of the log)"
        );

        let refused =
            std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "Connection refused");
        let down = SlackClientError::SystemError(
            SlackClientSystemError::new().with_cause(Box::new(refused)),
        );
        let said = listener_trouble(Box::new(down));
        assert!(
            said.ends_with("Slack Socket Mode: cannot reach Slack (Connection refused)"),
            "{said}"
        );
    }
}
