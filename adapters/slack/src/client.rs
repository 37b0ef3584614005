//! The slack-morphism client, and its failures in the contract's terms.
//!
//! `SlackClientHyperConnector::new()` only speaks HTTPS; the connector here speaks HTTPS
//! with the webpki roots (as reqwest does: no system certificate store needed) and plain
//! HTTP, so the configured `api_base_url` can be a local proxy or a test fake.

use std::time::Duration;

use hermes_adapter::{RateScope, SendError};
use hyper_util::client::legacy::connect::HttpConnector;
use slack_morphism::errors::*;
use slack_morphism::prelude::*;

/// The connector the adapter uses.
pub type Connector = SlackClientHyperConnector<hyper_rustls::HttpsConnector<HttpConnector>>;
/// The client the adapter uses.
pub type Client = SlackClient<Connector>;

/// How long one Web API call may take; connecting, and keeping idle connections checked.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
const KEEPALIVE: Duration = Duration::from_secs(30);

/// A client whose Web API calls go to `{api_base_url}/{method}`.
pub fn build(api_base_url: &str) -> Client {
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    http.set_connect_timeout(Some(CONNECT_TIMEOUT));
    http.set_keepalive(Some(KEEPALIVE));
    let https = hyper_rustls::HttpsConnectorBuilder::new()
        .with_webpki_roots()
        .https_or_http()
        .enable_http1()
        .enable_http2()
        .wrap_connector(http);
    SlackClient::new(
        SlackClientHyperConnector::with_connector(https).with_slack_api_url(api_base_url),
    )
}

/// One Web API call, bounded in time (slack-morphism's client sets no timeout, and a
/// half-open connection would hold a delivery lane for good).
pub async fn call<T>(
    method: &str,
    request: impl std::future::Future<Output = ClientResult<T>>,
) -> Result<T, SendError> {
    match tokio::time::timeout(CALL_TIMEOUT, request).await {
        Ok(result) => result.map_err(|e| map_error(method, e)),
        Err(_) => Err(SendError::Transient(format!(
            "Slack {method}: no answer within {}s",
            CALL_TIMEOUT.as_secs()
        ))),
    }
}

/// A Web API failure as a [`SendError`] the daemon can act on; `method` names the call.
pub fn map_error(method: &str, error: SlackClientError) -> SendError {
    match error {
        SlackClientError::RateLimitError(limit) => SendError::RateLimited {
            retry_after: limit.retry_after.unwrap_or(Duration::from_secs(1)),
            scope: RateScope::Method(method.to_owned()),
        },
        SlackClientError::ApiError(api) => {
            let code = api.code.as_str();
            let what = format!("Slack {method}: {code}");
            match code {
                "invalid_auth" | "not_authed" | "account_inactive" | "token_revoked"
                | "token_expired" => {
                    SendError::Unauthorized(format!("{what} (check SLACK_BOT_TOKEN)"))
                }
                "missing_scope" => {
                    let needed = needed_scope(api.http_response_body.as_deref());
                    SendError::Rejected(format!(
                        "{what}: the app lacks the scope {needed} (add it under OAuth & Permissions and reinstall the app)"
                    ))
                }
                "ratelimited" => SendError::RateLimited {
                    retry_after: Duration::from_secs(1),
                    scope: RateScope::Method(method.to_owned()),
                },
                "msg_too_long" | "msg_blocks_too_long" => SendError::TooLong(what),
                "invalid_blocks" | "invalid_blocks_format" => SendError::MarkupRejected(what),
                "internal_error" | "fatal_error" | "service_unavailable" | "request_timeout" => {
                    SendError::Transient(what)
                }
                _ => SendError::Rejected(what),
            }
        }
        SlackClientError::HttpError(http) if http.status_code.as_u16() == 401 => {
            SendError::Unauthorized(format!("Slack {method}: HTTP 401 (check SLACK_BOT_TOKEN)"))
        }
        SlackClientError::HttpError(http) if http.status_code.is_client_error() => {
            SendError::Rejected(format!("Slack {method}: HTTP {}", http.status_code))
        }
        // slack-morphism writes its cause with `{:?}` (a hyper_util debug dump): the
        // cause's own words are what the operator can read.
        SlackClientError::SystemError(system) => SendError::Transient(format!(
            "Slack {method}: cannot reach Slack ({})",
            short(&system.cause.as_deref().map_or_else(
                || {
                    system
                        .message
                        .clone()
                        .unwrap_or_else(|| "no reason given".into())
                },
                |cause| readable(cause)
            ))
        )),
        other => SendError::Transient(format!("Slack {method}: {}", short(&other.to_string()))),
    }
}

/// An error and its sources, in their own words (`client error (Connect): tcp connect
/// error: Connection refused (os error 111)`).
pub(crate) fn readable(error: &(dyn std::error::Error + 'static)) -> String {
    let mut words = vec![error.to_string()];
    let mut source = error.source();
    while let Some(inner) = source {
        let said = inner.to_string();
        if !words.iter().any(|w| w.contains(&said)) {
            words.push(said);
        }
        source = inner.source();
    }
    words.join(": ")
}

/// The scope a `missing_scope` answer names (`needed`), or a placeholder.
fn needed_scope(body: Option<&str>) -> String {
    body.and_then(|b| serde_json::from_str::<serde_json::Value>(b).ok())
        .and_then(|v| v.get("needed").and_then(|n| n.as_str()).map(str::to_owned))
        .unwrap_or_else(|| "(not said)".into())
}

/// An error text without bodies that could be long.
fn short(text: &str) -> String {
    text.chars().take(300).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An error with a source, as hyper_util's are.
    #[derive(Debug)]
    struct Connect(std::io::Error);

    impl std::fmt::Display for Connect {
        fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("tcp connect error")
        }
    }

    impl std::error::Error for Connect {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }

    #[test]
    fn a_network_failure_is_said_in_words_not_as_a_debug_dump() {
        let refused =
            std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "Connection refused");
        let error = SlackClientError::SystemError(
            SlackClientSystemError::new().with_cause(Box::new(Connect(refused))),
        );
        let SendError::Transient(text) = map_error("chat.postMessage", error) else {
            panic!("a network failure is passing");
        };
        assert_eq!(
            text,
            "Slack chat.postMessage: cannot reach Slack (tcp connect error: Connection refused)"
        );
    }

    fn api(code: &str, body: Option<&str>) -> SlackClientError {
        SlackClientError::ApiError(
            SlackClientApiError::new(code.into()).opt_http_response_body(body.map(str::to_owned)),
        )
    }

    #[test]
    fn slack_errors_map_onto_what_the_daemon_can_do() {
        assert!(matches!(
            map_error("chat.postMessage", api("invalid_auth", None)),
            SendError::Unauthorized(m) if m.contains("SLACK_BOT_TOKEN")
        ));
        let scope = map_error(
            "chat.postMessage",
            api(
                "missing_scope",
                Some(r#"{"ok":false,"error":"missing_scope","needed":"chat:write"}"#),
            ),
        );
        assert!(matches!(scope, SendError::Rejected(m) if m.contains("chat:write")));
        assert_eq!(
            map_error(
                "chat.update",
                SlackClientError::RateLimitError(
                    SlackRateLimitError::new().with_retry_after(Duration::from_secs(7))
                )
            ),
            SendError::RateLimited {
                retry_after: Duration::from_secs(7),
                scope: RateScope::Method("chat.update".into())
            }
        );
        assert!(matches!(
            map_error("chat.postMessage", api("msg_too_long", None)),
            SendError::TooLong(_)
        ));
    }
}
