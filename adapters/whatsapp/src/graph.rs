//! The Graph API client: JSON calls to `{graph_base_url}/{version}/…` with the bearer token,
//! media uploads and downloads, and Meta's error codes turned into [`SendError`]s the
//! delivery lane acts on (a closed 24-hour window, pair and throughput rate limits, a
//! refused token, outages). The token goes only to the Graph API and to the download links
//! it hands out; no redirect is followed.

use std::time::Duration;

use hermes_adapter::{FetchError, RateScope, SendError, read_capped};
use reqwest::header::{AUTHORIZATION, HeaderValue};
use serde_json::Value;

/// A JSON call's time limit.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);
/// An upload's or download's time limit.
const FILE_TIMEOUT: Duration = Duration::from_secs(180);
/// How long to wait after Meta's throughput limit (130429; about 80 messages a second per
/// number) before the next call.
const THROUGHPUT_WAIT: Duration = Duration::from_secs(2);
/// How long to leave one person alone after the pair rate limit (131056: about one message
/// every six seconds to the same number, after a burst).
const PAIR_WAIT: Duration = Duration::from_secs(6);
/// How long to leave the whole number alone after an account-level limit (4, 80007, 131048).
const ACCOUNT_WAIT: Duration = Duration::from_secs(60);

/// Where Meta serves media downloads (`lookaside.fbsbx.com` today).
const META_MEDIA_HOSTS: [&str; 4] = ["fbsbx.com", "facebook.com", "fbcdn.net", "whatsapp.net"];

/// Meta's code for "more than 24 hours since the person last wrote".
pub const OUTSIDE_WINDOW: i64 = 131047;

/// The Graph API for one business phone number.
pub struct Graph {
    client: reqwest::Client,
    files: reqwest::Client,
    /// `{graph_base_url}/{version}`.
    api: String,
    /// Scheme, host and port of the Graph API: download links elsewhere must be https.
    origin: Option<String>,
    auth: HeaderValue,
}

impl Graph {
    pub fn new(base_url: &str, version: &str, token: &str) -> Result<Graph, String> {
        let mut auth = HeaderValue::from_str(&format!("Bearer {token}"))
            .map_err(|_| "the access token has characters a header cannot carry".to_owned())?;
        auth.set_sensitive(true);
        let build = |timeout| {
            reqwest::Client::builder()
                .pool_max_idle_per_host(hermes_adapter::IDLE_CONNECTIONS_PER_HOST)
                .redirect(reqwest::redirect::Policy::none())
                .connect_timeout(Duration::from_secs(10))
                .timeout(timeout)
                .user_agent(concat!("hermes-gateway/", env!("CARGO_PKG_VERSION")))
                .build()
                .map_err(|e| format!("cannot build the HTTP client: {e}"))
        };
        Ok(Graph {
            client: build(CALL_TIMEOUT)?,
            files: build(FILE_TIMEOUT)?,
            api: format!("{}/{version}", base_url.trim_end_matches('/')),
            origin: origin(base_url),
            auth,
        })
    }

    /// `GET /{version}/{path}`.
    pub async fn get(&self, path: &str) -> Result<Value, SendError> {
        let request = self.client.get(format!("{}/{path}", self.api));
        self.json(path, request).await
    }

    /// `POST /{version}/{path}` with a JSON body.
    pub async fn post(&self, path: &str, body: &Value) -> Result<Value, SendError> {
        let request = self.client.post(format!("{}/{path}", self.api)).json(body);
        self.json(path, request).await
    }

    /// `POST /{version}/{path}` with a multipart form (media uploads).
    pub async fn post_form(
        &self,
        path: &str,
        form: reqwest::multipart::Form,
    ) -> Result<Value, SendError> {
        let request = self
            .files
            .post(format!("{}/{path}", self.api))
            .multipart(form);
        self.json(path, request).await
    }

    async fn json(&self, what: &str, request: reqwest::RequestBuilder) -> Result<Value, SendError> {
        let response = request
            .header(AUTHORIZATION, self.auth.clone())
            .send()
            .await
            .map_err(|e| {
                SendError::Transient(format!(
                    "Graph API {what}: {}",
                    hermes_adapter::describe_reqwest(&e)
                ))
            })?;
        let status = response.status().as_u16();
        let text = response.text().await.map_err(|e| {
            SendError::Transient(format!(
                "Graph API {what}: {}",
                hermes_adapter::describe_reqwest(&e)
            ))
        })?;
        let body: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        if (200..300).contains(&status) && body.get("error").is_none() {
            return Ok(body);
        }
        Err(classify(status, &body))
    }

    /// The bytes behind a download link the Graph API gave, at most `max`, with the token.
    pub async fn download(
        &self,
        url: &str,
        declared: Option<u64>,
        max: u64,
    ) -> Result<Vec<u8>, FetchError> {
        if !self.may_carry_token(url) {
            return Err(FetchError::Failed(SendError::Rejected(
                "the media link is neither https nor on the Graph API's host; not fetched".into(),
            )));
        }
        if let Some(size) = declared.filter(|&size| size > max) {
            return Err(FetchError::TooLarge { size, max });
        }
        let response = self
            .files
            .get(url)
            .header(AUTHORIZATION, self.auth.clone())
            .send()
            .await
            .map_err(|e| {
                SendError::Transient(format!(
                    "media download: {}",
                    hermes_adapter::describe_reqwest(&e)
                ))
            })?;
        let status = response.status();
        if !status.is_success() {
            return Err(FetchError::Failed(if status.is_server_error() {
                SendError::Transient(format!("media download: HTTP {status}"))
            } else {
                SendError::Rejected(format!("media download: HTTP {status}"))
            }));
        }
        let length = response.content_length();
        read_capped(response.bytes_stream(), length.or(declared), max, |e| {
            SendError::Transient(format!(
                "media download: {}",
                hermes_adapter::describe_reqwest(&e)
            ))
        })
        .await
    }

    /// The token goes to Meta's media hosts over https, or to the Graph API's own origin
    /// (a proxy, a fake on 127.0.0.1).
    fn may_carry_token(&self, url: &str) -> bool {
        let Ok(parsed) = url::Url::parse(url) else {
            return false;
        };
        let metas = parsed.host_str().is_some_and(|host| {
            META_MEDIA_HOSTS
                .iter()
                .any(|m| host == *m || host.ends_with(&format!(".{m}")))
        });
        (parsed.scheme() == "https" && metas) || origin(url).is_some_and(|o| Some(o) == self.origin)
    }
}

/// `scheme://host:port` of a URL.
fn origin(url: &str) -> Option<String> {
    let parsed = url::Url::parse(url).ok()?;
    Some(format!(
        "{}://{}:{}",
        parsed.scheme(),
        parsed.host_str()?,
        parsed.port_or_known_default()?
    ))
}

/// Meta's error code, message and details, as one line for logs.
pub fn error_line(code: Option<i64>, message: &str, details: Option<&str>) -> String {
    let mut line = match code {
        Some(code) => format!("Meta error {code}: {message}"),
        None => message.to_owned(),
    };
    if let Some(details) = details.filter(|d| !d.is_empty() && *d != message) {
        line.push_str(&format!(" ({details})"));
    }
    line
}

/// A failed call as a [`SendError`]: Meta's code decides, the HTTP status where there is
/// none.
pub fn classify(status: u16, body: &Value) -> SendError {
    let error = &body["error"];
    let code = error["code"].as_i64();
    let message = error["message"]
        .as_str()
        .map(str::to_owned)
        .unwrap_or_else(|| format!("HTTP {status}"));
    let line = error_line(code, &message, error["error_data"]["details"].as_str());
    match (code, status) {
        (Some(OUTSIDE_WINDOW), _) => SendError::OutsideWindow(line),
        (Some(130429), _) | (None, 429) => SendError::RateLimited {
            retry_after: THROUGHPUT_WAIT,
            scope: RateScope::Bot,
        },
        (Some(131056), _) => SendError::RateLimited {
            retry_after: PAIR_WAIT,
            scope: RateScope::Chat,
        },
        (Some(4 | 80007 | 131048), _) => SendError::RateLimited {
            retry_after: ACCOUNT_WAIT,
            scope: RateScope::Bot,
        },
        (Some(0 | 10 | 190 | 200..=299), _) | (None, 401 | 403) => SendError::Unauthorized(line),
        (Some(1 | 2 | 131000 | 131016 | 133004), _) => SendError::Transient(line),
        (_, 500..) => SendError::Transient(line),
        _ => SendError::Rejected(line),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn meta(code: i64) -> Value {
        json!({"error": {"message": "m", "type": "OAuthException", "code": code,
            "error_data": {"messaging_product": "whatsapp", "details": "d"}}})
    }

    #[test]
    fn metas_codes_become_what_the_lane_acts_on() {
        assert!(
            matches!(classify(400, &meta(131047)), SendError::OutsideWindow(line) if line == "Meta error 131047: m (d)")
        );
        assert!(matches!(
            classify(400, &meta(131056)),
            SendError::RateLimited {
                scope: RateScope::Chat,
                ..
            }
        ));
        assert!(matches!(
            classify(400, &meta(130429)),
            SendError::RateLimited {
                scope: RateScope::Bot,
                ..
            }
        ));
        assert!(matches!(
            classify(401, &meta(190)),
            SendError::Unauthorized(_)
        ));
        assert!(matches!(
            classify(500, &meta(131000)),
            SendError::Transient(_)
        ));
        assert!(matches!(
            classify(502, &Value::Null),
            SendError::Transient(_)
        ));
        assert!(matches!(classify(400, &meta(100)), SendError::Rejected(_)));
    }

    #[test]
    fn the_token_goes_only_to_metas_media_hosts_or_the_graph_api_itself() {
        let graph = Graph::new("http://127.0.0.1:9", "v26.0", "t").unwrap();
        assert!(graph.may_carry_token("http://127.0.0.1:9/media/1"));
        assert!(
            graph.may_carry_token(
                "https://lookaside.fbsbx.com/whatsapp_business/attachments/?mid=1"
            )
        );
        assert!(!graph.may_carry_token("http://127.0.0.1:10/media/1"));
        assert!(!graph.may_carry_token("http://evil.example/steal"));
        assert!(!graph.may_carry_token("https://evil.example/steal"));
        assert!(!graph.may_carry_token("https://fbsbx.com.evil.example/x"));
        assert!(!graph.may_carry_token("file:///etc/passwd"));
    }
}
