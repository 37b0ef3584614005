//! The Events API on the daemon's HTTP server: `POST /slack/events`, `/slack/interactions`
//! and `/slack/commands`. The daemon mounts a route only with its signing secret and hands
//! a request to its handler only after [`SlackSignature`] accepted the raw body (Slack's
//! `v0` HMAC-SHA256, constant-time, with a 5-minute window on the timestamp). A handler
//! answers 200 once the event is recorded (Slack waits 3 s), 500 when it could not be
//! (Slack tries again), and 400 for a body it cannot read.

use std::sync::Arc;

use hermes_adapter::{
    InboundSink, Verifier, WebhookHandler, WebhookRequest, WebhookResponse, WebhookRoute,
    async_trait,
};
use slack_morphism::prelude::*;
use slack_morphism::signature_verifier::SlackEventSignatureVerifier;

use crate::receive::{NotRecorded, Receiver};

/// Where the signing secret is set, for the daemon's messages.
const SECRET_NAME: &str = "SLACK_SIGNING_SECRET";

/// Slack's request signature.
pub struct SlackSignature;

impl Verifier for SlackSignature {
    fn verify(&self, secret: &str, request: &WebhookRequest) -> bool {
        let (Some(signature), Some(timestamp)) = (
            request.header(SlackEventSignatureVerifier::SLACK_SIGNED_HASH_HEADER),
            request.header(SlackEventSignatureVerifier::SLACK_SIGNED_TIMESTAMP),
        ) else {
            return false;
        };
        let Ok(body) = std::str::from_utf8(&request.body) else {
            return false;
        };
        let verifier = SlackEventSignatureVerifier::new(&SlackSigningSecret::new(secret.into()));
        match verifier.verify(signature, body, timestamp) {
            Ok(()) => true,
            Err(e) => {
                // The HTTP server says the refusal (once a minute per source); this is why.
                tracing::debug!(error = %e, "slack: a request with a bad signature or an old timestamp was refused");
                false
            }
        }
    }
}

/// Which of the three routes.
#[derive(Clone, Copy)]
enum Kind {
    Events,
    Interactions,
    Commands,
}

struct Handler {
    kind: Kind,
    receiver: Arc<Receiver>,
    sink: Arc<dyn InboundSink>,
}

/// The three routes; not mounted by the daemon when `secret` is `None`.
pub fn routes(
    receiver: Arc<Receiver>,
    sink: Arc<dyn InboundSink>,
    secret: Option<String>,
    needed: bool,
) -> Vec<WebhookRoute> {
    [
        ("/slack/events", Kind::Events),
        ("/slack/interactions", Kind::Interactions),
        ("/slack/commands", Kind::Commands),
    ]
    .into_iter()
    .map(|(path, kind)| WebhookRoute {
        path: path.to_owned(),
        secret_name: SECRET_NAME,
        secret: secret.clone(),
        needed,
        verifier: Arc::new(SlackSignature),
        handler: Arc::new(Handler {
            kind,
            receiver: receiver.clone(),
            sink: sink.clone(),
        }),
    })
    .collect()
}

#[async_trait]
impl WebhookHandler for Handler {
    async fn handle(&self, request: WebhookRequest) -> WebhookResponse {
        if request.method != "POST" {
            return WebhookResponse::text(405, "POST only");
        }
        let recorded = match self.kind {
            Kind::Events => match serde_json::from_slice::<SlackPushEvent>(&request.body) {
                Ok(SlackPushEvent::UrlVerification(check)) => {
                    return WebhookResponse::text(200, check.challenge);
                }
                Ok(SlackPushEvent::EventCallback(event)) => {
                    self.receiver.push(self.sink.as_ref(), &event).await
                }
                Ok(SlackPushEvent::AppRateLimited(limited)) => {
                    tracing::warn!(
                        ?limited,
                        "slack: Slack is holding back events for this app (app_rate_limited)"
                    );
                    Ok(())
                }
                Err(e) => return unreadable("event", &e),
            },
            Kind::Interactions => {
                let Some(payload) = form_field(&request.body, "payload") else {
                    return WebhookResponse::text(400, "no payload");
                };
                match serde_json::from_str::<SlackInteractionEvent>(&payload) {
                    Ok(event) => self.receiver.interaction(self.sink.as_ref(), &event).await,
                    Err(e) => return unreadable("interaction", &e),
                }
            }
            // Slack checks the certificate of a commands URL now and then.
            Kind::Commands if form_field(&request.body, "ssl_check").is_some() => {
                return WebhookResponse::text(200, "");
            }
            Kind::Commands => match command(&request.body) {
                Ok(event) => self.receiver.command(self.sink.as_ref(), &event).await,
                Err(e) => return unreadable("command", &e),
            },
        };
        match recorded {
            Ok(()) => WebhookResponse::text(200, ""),
            Err(NotRecorded::NotReady) => WebhookResponse::text(503, "not ready"),
            Err(NotRecorded::Sink(e)) => {
                tracing::error!(error = %e, "slack: an event could not be recorded; Slack will send it again");
                WebhookResponse::text(500, "not recorded")
            }
        }
    }
}

fn unreadable(what: &str, error: &serde_json::Error) -> WebhookResponse {
    tracing::warn!(%error, "slack: a signed {what} could not be read; refused");
    WebhookResponse::text(400, format!("unreadable {what}"))
}

/// One field of a form-encoded body.
fn form_field(body: &[u8], name: &str) -> Option<String> {
    url::form_urlencoded::parse(body)
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.into_owned())
}

/// A slash command's form as slack-morphism's model.
fn command(body: &[u8]) -> Result<SlackCommandEvent, serde_json::Error> {
    let fields: serde_json::Map<String, serde_json::Value> = url::form_urlencoded::parse(body)
        .map(|(k, v)| (k.into_owned(), serde_json::Value::String(v.into_owned())))
        .collect();
    serde_json::from_value(serde_json::Value::Object(fields))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_form_reads_as_the_model() {
        let body = b"team_id=T1&channel_id=C1&user_id=U1&command=%2Fhermes&text=status&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2F1&trigger_id=13.1";
        let event = command(body).unwrap();
        assert_eq!(event.command.0, "/hermes");
        assert_eq!(event.text.as_deref(), Some("status"));
        assert_eq!(
            form_field(b"payload=%7B%7D&x=1", "payload").as_deref(),
            Some("{}")
        );
    }
}
