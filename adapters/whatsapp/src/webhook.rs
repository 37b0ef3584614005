//! The webhook on the daemon's HTTP server (`WHATSAPP_CLOUD_WEBHOOK_PATH`, default
//! `/whatsapp/webhook`). The daemon answers 503 while `WHATSAPP_CLOUD_APP_SECRET` is not
//! set and hands a request to the handler only once [`MetaSignature`] accepted it:
//! a `POST` by its `X-Hub-Signature-256` (HMAC-SHA256 of the raw body with the app
//! secret, compared in constant time), Meta's subscription handshake (`GET` with
//! `hub.mode=subscribe`) by its verify token, which the handler then answers with the raw
//! `hub.challenge`.

use std::sync::Arc;

use hermes_adapter::{
    InboundSink, Verifier, WebhookHandler, WebhookRequest, WebhookResponse, WebhookRoute,
    async_trait,
};
use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;
use subtle::ConstantTimeEq;

use crate::receive::Receiver;

/// Where the secret is set, for the daemon's messages.
const SECRET_NAME: &str = "WHATSAPP_CLOUD_APP_SECRET";
const SIGNATURE_HEADER: &str = "x-hub-signature-256";

/// Meta's request authentication.
pub struct MetaSignature {
    pub verify_token: Option<String>,
}

impl Verifier for MetaSignature {
    fn verify(&self, secret: &str, request: &WebhookRequest) -> bool {
        match request.method.as_str() {
            "GET" => {
                let (mode, token) = (
                    query_value(&request.query, "hub.mode"),
                    query_value(&request.query, "hub.verify_token"),
                );
                match (&self.verify_token, mode.as_deref(), token) {
                    (Some(expected), Some("subscribe"), Some(given)) => {
                        same(expected.as_bytes(), given.as_bytes())
                    }
                    _ => false,
                }
            }
            _ => signed(secret, request),
        }
    }

    fn refusal(&self, request: &WebhookRequest) -> WebhookResponse {
        if request.method == "GET" {
            WebhookResponse::text(403, "verify token does not match")
        } else {
            WebhookResponse::text(401, "signature does not match")
        }
    }
}

/// `X-Hub-Signature-256: sha256=<hex>` over the raw body.
fn signed(secret: &str, request: &WebhookRequest) -> bool {
    let Some(signature) = request
        .header(SIGNATURE_HEADER)
        .and_then(|h| h.trim().strip_prefix("sha256="))
        .and_then(|hex_digest| hex::decode(hex_digest).ok())
    else {
        return false;
    };
    let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(secret.as_bytes()) else {
        return false;
    };
    mac.update(&request.body);
    mac.verify_slice(&signature).is_ok()
}

/// Constant-time equality of two tokens (their lengths aside).
fn same(a: &[u8], b: &[u8]) -> bool {
    bool::from(a.ct_eq(b))
}

fn query_value(query: &str, name: &str) -> Option<String> {
    url::form_urlencoded::parse(query.as_bytes())
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.into_owned())
}

struct Handler {
    receiver: Arc<Receiver>,
    sink: Arc<dyn InboundSink>,
}

/// The webhook route; answers 503 while `app_secret` is `None`.
pub fn route(
    path: &str,
    app_secret: Option<String>,
    verify_token: Option<String>,
    receiver: Arc<Receiver>,
    sink: Arc<dyn InboundSink>,
) -> WebhookRoute {
    WebhookRoute {
        needed: true,
        path: path.to_owned(),
        secret_name: SECRET_NAME,
        secret: app_secret,
        verifier: Arc::new(MetaSignature { verify_token }),
        handler: Arc::new(Handler { receiver, sink }),
    }
}

#[async_trait]
impl WebhookHandler for Handler {
    async fn handle(&self, request: WebhookRequest) -> WebhookResponse {
        match request.method.as_str() {
            "GET" => {
                tracing::info!("whatsapp: Meta's webhook subscription handshake succeeded");
                let challenge = query_value(&request.query, "hub.challenge").unwrap_or_default();
                WebhookResponse::text(200, challenge)
            }
            "POST" => {
                self.receiver
                    .deliver(self.sink.as_ref(), &request.body)
                    .await
            }
            _ => WebhookResponse::text(405, "GET or POST only"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(method: &str, query: &str, headers: &[(&str, &str)], body: &[u8]) -> WebhookRequest {
        WebhookRequest {
            method: method.into(),
            query: query.into(),
            headers: headers
                .iter()
                .map(|(n, v)| (n.to_string(), v.to_string()))
                .collect(),
            body: body.to_vec(),
        }
    }

    fn sign(secret: &str, body: &[u8]) -> String {
        let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).unwrap();
        mac.update(body);
        format!("sha256={}", hex::encode(mac.finalize().into_bytes()))
    }

    #[test]
    fn only_the_raw_body_signed_with_the_app_secret_passes() {
        let verifier = MetaSignature {
            verify_token: Some("vt".into()),
        };
        // Meta's own bytes: escapes a re-serialised body would lose.
        let body = br#"{"text":"caf\u00e9 a\/b"}"#;
        let good = sign("s3cret", body);
        assert!(verifier.verify(
            "s3cret",
            &request("POST", "", &[("x-hub-signature-256", &good)], body)
        ));
        let reserialised =
            serde_json::to_vec(&serde_json::from_slice::<serde_json::Value>(body).unwrap())
                .unwrap();
        assert!(!verifier.verify(
            "s3cret",
            &request("POST", "", &[("x-hub-signature-256", &good)], &reserialised)
        ));
        assert!(!verifier.verify(
            "other",
            &request("POST", "", &[("x-hub-signature-256", &good)], body)
        ));
        assert!(!verifier.verify("s3cret", &request("POST", "", &[], body)));
        assert!(!verifier.verify(
            "s3cret",
            &request("POST", "", &[("x-hub-signature-256", "sha256=zz")], body)
        ));
    }

    #[test]
    fn the_handshake_needs_the_verify_token() {
        let verifier = MetaSignature {
            verify_token: Some("vt".into()),
        };
        let get = |q: &str| request("GET", q, &[], b"");
        assert!(verifier.verify(
            "s",
            &get("hub.mode=subscribe&hub.verify_token=vt&hub.challenge=42")
        ));
        assert!(!verifier.verify(
            "s",
            &get("hub.mode=subscribe&hub.verify_token=no&hub.challenge=42")
        ));
        assert!(!verifier.verify("s", &get("hub.mode=unsubscribe&hub.verify_token=vt")));
        assert_eq!(verifier.refusal(&get("")).status, 403);
        let unset = MetaSignature { verify_token: None };
        assert!(!unset.verify(
            "s",
            &get("hub.mode=subscribe&hub.verify_token=&hub.challenge=1")
        ));
    }
}
