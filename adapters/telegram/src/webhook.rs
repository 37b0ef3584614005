//! Telegram's webhook mode (`TELEGRAM_WEBHOOK_URL`, `TELEGRAM_WEBHOOK_SECRET`, Hermes'
//! names): the route on the daemon's HTTP server at the URL's path. Telegram sends the
//! secret given to `setWebhook` in `X-Telegram-Bot-Api-Secret-Token`; a request without it,
//! or with another, is refused (403, compared in constant time) before its body is read as
//! an update. An update is recorded before the 200 (invariant 1): when the sink cannot
//! record it the answer is a 500 and Telegram sends it again.

use std::sync::{Arc, OnceLock};

use hermes_adapter::{
    Accepted, InboundKind, InboundSink, Verifier, WebhookHandler, WebhookRequest, WebhookResponse,
    WebhookRoute, async_trait,
};
use subtle::ConstantTimeEq;
use teloxide_core::prelude::*;
use teloxide_core::types::Update;

use crate::normalize::{BotIdentity, normalize};
use crate::press::OpenPresses;

/// Where the secret is set, for the daemon's messages.
pub const SECRET_NAME: &str = "TELEGRAM_WEBHOOK_SECRET";
const SECRET_HEADER: &str = "x-telegram-bot-api-secret-token";

/// The header carries the secret given to `setWebhook`.
struct SecretToken;

impl Verifier for SecretToken {
    fn verify(&self, secret: &str, request: &WebhookRequest) -> bool {
        request
            .header(SECRET_HEADER)
            .is_some_and(|given| bool::from(given.as_bytes().ct_eq(secret.as_bytes())))
    }

    fn refusal(&self, _request: &WebhookRequest) -> WebhookResponse {
        WebhookResponse::text(403, "secret token does not match")
    }
}

struct Handler {
    bot: Bot,
    presses: OpenPresses,
    /// Who the bot is, once `getMe` answered (the adapter's `run` sets it).
    identity: Arc<OnceLock<BotIdentity>>,
    sink: Arc<dyn InboundSink>,
}

/// The webhook route at `path`, refusing requests without `secret`.
pub(crate) fn route(
    path: &str,
    secret: &str,
    bot: Bot,
    presses: OpenPresses,
    identity: Arc<OnceLock<BotIdentity>>,
    sink: Arc<dyn InboundSink>,
) -> WebhookRoute {
    WebhookRoute {
        needed: true,
        path: path.to_owned(),
        secret_name: SECRET_NAME,
        secret: Some(secret.to_owned()),
        verifier: Arc::new(SecretToken),
        handler: Arc::new(Handler {
            bot,
            presses,
            identity,
            sink,
        }),
    }
}

#[async_trait]
impl WebhookHandler for Handler {
    async fn handle(&self, request: WebhookRequest) -> WebhookResponse {
        if request.method != "POST" {
            return WebhookResponse::text(405, "POST only");
        }
        // Before `getMe` answered, mentions cannot be told apart: Telegram retries.
        let Some(me) = self.identity.get() else {
            return WebhookResponse::text(503, "not connected to Telegram yet");
        };
        let update: Update = match serde_json::from_slice(&request.body) {
            Ok(update) => update,
            Err(e) => {
                // Telegram would send it again forever; nothing here can ever read it.
                tracing::warn!(error = %e, bytes = request.body.len(), "telegram: the webhook got a body that is not an update; dropped");
                return WebhookResponse::text(200, "not an update");
            }
        };
        let Some(event) = normalize(&update, me) else {
            tracing::debug!(
                update = update.id.0,
                "telegram: update carries nothing for the gateway"
            );
            return WebhookResponse::text(200, "nothing for the gateway");
        };
        // A press is held open before it is recorded: the daemon may dispatch it, and send
        // its notice, before the sink has returned here.
        let press = match &event.kind {
            InboundKind::Press(press) => {
                Some((press.press_id.clone(), self.presses.open(&press.press_id)))
            }
            _ => None,
        };
        match self.sink.accept(event).await {
            Ok(accepted) => {
                if let Some((press_id, notice)) = press {
                    let notice = (accepted == Accepted::New).then_some(notice);
                    self.presses.acknowledge(&self.bot, press_id, notice);
                }
                WebhookResponse::text(200, "recorded")
            }
            Err(e) => {
                tracing::error!(error = %e, update = update.id.0, "telegram: cannot record a webhook update; Telegram sends it again");
                WebhookResponse::text(500, "not recorded; send it again")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(headers: &[(&str, &str)]) -> WebhookRequest {
        WebhookRequest {
            method: "POST".into(),
            query: String::new(),
            headers: headers
                .iter()
                .map(|(n, v)| (n.to_string(), v.to_string()))
                .collect(),
            body: b"{}".to_vec(),
        }
    }

    #[test]
    fn only_the_secret_given_to_telegram_is_accepted() {
        let secret = "s3cret_token-1";
        assert!(SecretToken.verify(
            secret,
            &request(&[("X-Telegram-Bot-Api-Secret-Token", secret)])
        ));
        assert!(!SecretToken.verify(secret, &request(&[])));
        assert!(!SecretToken.verify(
            secret,
            &request(&[("x-telegram-bot-api-secret-token", "s3cret_token-2")])
        ));
        assert!(!SecretToken.verify(
            secret,
            &request(&[("x-telegram-bot-api-secret-token", "s3cret")])
        ));
        assert_eq!(SecretToken.refusal(&request(&[])).status, 403);
    }
}
