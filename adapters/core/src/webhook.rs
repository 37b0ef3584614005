//! Webhooks: how an adapter that receives over HTTP (WhatsApp Cloud, the Slack Events API)
//! hands the daemon its routes. The daemon owns the one HTTP server. Invariant 7 lives
//! here, not in each adapter: a route whose secret is not configured refuses every request
//! (503, naming the setting), and a request reaches the route's handler only after
//! [`WebhookRoute::verify`] accepted it on the raw body.

use std::sync::Arc;

/// An HTTP request as a webhook sees it: the raw body, untouched, for signature checks.
#[derive(Debug, Clone)]
pub struct WebhookRequest {
    pub method: String,
    /// The query string without `?` (WhatsApp's verification handshake is a GET with one).
    pub query: String,
    /// Header names in lower case.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl WebhookRequest {
    /// The first value of a header (name in any case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// What a webhook answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookResponse {
    pub status: u16,
    pub content_type: &'static str,
    pub body: Vec<u8>,
}

impl WebhookResponse {
    /// A status with a short text body.
    pub fn text(status: u16, text: impl Into<String>) -> WebhookResponse {
        WebhookResponse {
            status,
            content_type: "text/plain; charset=utf-8",
            body: text.into().into_bytes(),
        }
    }

    /// A JSON body with status 200.
    pub fn json(value: &serde_json::Value) -> WebhookResponse {
        WebhookResponse {
            status: 200,
            content_type: "application/json",
            body: value.to_string().into_bytes(),
        }
    }
}

/// Checks that a request really comes from the platform (an HMAC of the raw body, a
/// verification token).
pub trait Verifier: Send + Sync {
    /// `true` when `request` is authentic under `secret`.
    fn verify(&self, secret: &str, request: &WebhookRequest) -> bool;

    /// What a request [`Verifier::verify`] refused is answered (WhatsApp's handshake wants
    /// a 403; a bad signature is a 401).
    fn refusal(&self, request: &WebhookRequest) -> WebhookResponse {
        let _ = request;
        WebhookResponse::text(401, "signature does not match")
    }
}

/// Handles an authenticated request: records the events through the sink and answers once
/// they are recorded (invariant 1).
#[crate::async_trait]
pub trait WebhookHandler: Send + Sync {
    async fn handle(&self, request: WebhookRequest) -> WebhookResponse;
}

/// One route on the daemon's HTTP server.
#[derive(Clone)]
pub struct WebhookRoute {
    /// The path, e.g. `/whatsapp/webhook`.
    pub path: String,
    /// Where the operator sets the secret (`WHATSAPP_CLOUD_APP_SECRET`), for messages.
    pub secret_name: &'static str,
    /// The secret; `None` = not configured, so the route refuses everything (fail closed).
    pub secret: Option<String>,
    /// Whether the adapter receives through this route as configured (the Events API,
    /// WhatsApp's webhooks), or only offers it (Slack in Socket Mode): without its secret a
    /// needed route is a problem the operator is warned of, an offered one is said once.
    pub needed: bool,
    pub verifier: Arc<dyn Verifier>,
    pub handler: Arc<dyn WebhookHandler>,
}

impl WebhookRoute {
    /// Whether `request` may reach the handler: only with a configured secret that the
    /// verifier accepts.
    pub fn verify(&self, request: &WebhookRequest) -> bool {
        self.secret
            .as_deref()
            .is_some_and(|secret| self.verifier.verify(secret, request))
    }
}
