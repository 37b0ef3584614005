//! Discord's REST API through the project's own reqwest client, for the handful of endpoints
//! the gateway uses.
//!
//! Why not serenity's `Http`: in serenity 0.12.5 a custom REST root (`HttpBuilder::proxy`)
//! is ignored while its rate limiter is on (the limiter builds requests without it, so they
//! go to discord.com), and with the limiter off a 429 comes back without its `Retry-After`.
//! Here every call goes to the configured root, Discord's `X-RateLimit-*` headers are
//! followed per bucket (a bucket that is used up is waited out before the next call), and
//! every 429 becomes a [`SendError::RateLimited`] with the wait Discord asked for, which the
//! daemon's delivery honours.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use hermes_adapter::{FetchError, RateScope, SendError, read_capped};
use reqwest::header::{AUTHORIZATION, HeaderMap, HeaderValue};
use reqwest::{Method, StatusCode};
use serde_json::Value;

/// How long one ordinary call may take.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a file upload or download may take.
pub(crate) const FILE_TIMEOUT: Duration = Duration::from_secs(300);
/// Where Discord serves attachments.
const CDN_HOSTS: [&str; 2] = ["cdn.discordapp.com", "media.discordapp.net"];
/// A used-up bucket shorter than this is waited out here; a longer wait is handed back to
/// the caller as [`SendError::RateLimited`], so a delivery lane is not held inside a call.
const WAIT_HERE: Duration = Duration::from_secs(5);
/// Discord's error body is short; a longer one is cut in messages.
const ERROR_TEXT_MAX: usize = 300;

/// A file in a multipart upload.
pub(crate) struct Upload {
    pub name: String,
    pub bytes: Vec<u8>,
    pub mime: Option<String>,
}

/// What a call carries.
pub(crate) enum Body {
    Empty,
    Json(Value),
    /// `payload_json` and the files as `files[n]`.
    Multipart(Value, Vec<Upload>),
}

/// Rate-limit state learnt from Discord's headers.
#[derive(Default)]
struct Limits {
    /// Route → the bucket Discord said it belongs to.
    buckets: HashMap<String, String>,
    /// Bucket and major parameters (or the route, before its bucket is known) → used up
    /// until. Discord limits a bucket per channel, server or webhook: a bucket used up in
    /// one channel does not hold another.
    blocked: HashMap<String, Instant>,
    /// Every call is held until then (a global 429).
    global: Option<Instant>,
}

impl Limits {
    /// Where a route's limit is kept: its bucket with the route's major parameters.
    fn bucket_of(&self, route: &str) -> String {
        match self.buckets.get(route) {
            Some(bucket) => format!("{bucket}@{}", major_parameters(route)),
            None => route.to_owned(),
        }
    }
}

/// The REST client.
pub(crate) struct Rest {
    client: reqwest::Client,
    files: reqwest::Client,
    /// `{root}/api/v10`.
    api: String,
    /// The REST root's host: files may come from it too (a proxy, a fake).
    root_host: Option<String>,
    auth: HeaderValue,
    limits: Mutex<Limits>,
}

impl Rest {
    pub(crate) fn new(root: &str, token: &str) -> Result<Rest, String> {
        let mut auth = HeaderValue::from_str(&format!("Bot {token}"))
            .map_err(|_| "the bot token has characters a header cannot carry".to_owned())?;
        auth.set_sensitive(true);
        let build = |timeout| {
            reqwest::Client::builder()
                .pool_max_idle_per_host(hermes_adapter::IDLE_CONNECTIONS_PER_HOST)
                // Discord does not redirect API calls, and a CDN file that redirects
                // elsewhere is not fetched.
                .redirect(reqwest::redirect::Policy::none())
                .connect_timeout(Duration::from_secs(10))
                .timeout(timeout)
                .user_agent(concat!(
                    "DiscordBot (https://github.com/hermes-gateway, ",
                    env!("CARGO_PKG_VERSION"),
                    ")"
                ))
                .build()
                .map_err(|e| format!("cannot build the HTTP client: {e}"))
        };
        Ok(Rest {
            client: build(CALL_TIMEOUT)?,
            files: build(FILE_TIMEOUT)?,
            api: format!("{}/api/v10", root.trim_end_matches('/')),
            root_host: reqwest::Url::parse(root)
                .ok()
                .and_then(|u| u.host_str().map(str::to_owned)),
            auth,
            limits: Mutex::new(Limits::default()),
        })
    }

    /// One call; the answer's JSON (`Value::Null` for 204). `path` starts with `/`.
    pub(crate) async fn call(
        &self,
        method: Method,
        path: &str,
        body: Body,
    ) -> Result<Value, SendError> {
        let route = route_key(&method, path);
        self.wait_for_bucket(&route).await?;
        let uploads = matches!(body, Body::Multipart(..));
        let client = if uploads { &self.files } else { &self.client };
        let mut request = client
            .request(method, format!("{}{path}", self.api))
            .header(AUTHORIZATION, self.auth.clone());
        request = match body {
            // Discord wants a length on a write without a body (`POST …/typing`); hyper
            // sends none over HTTP/1.1 by itself.
            Body::Empty if request_has_no_body_but_writes(&route) => {
                request.header(reqwest::header::CONTENT_LENGTH, 0)
            }
            Body::Empty => request,
            Body::Json(json) => request.json(&json),
            Body::Multipart(payload, files) => request.multipart(multipart(payload, files)?),
        };
        let response = request.send().await.map_err(|e| {
            SendError::Transient(format!(
                "Discord {route}: {}",
                hermes_adapter::describe_reqwest(&e)
            ))
        })?;
        let status = response.status();
        let headers = response.headers().clone();
        let text = response.text().await.map_err(|e| {
            SendError::Transient(format!(
                "Discord {route}: {}",
                hermes_adapter::describe_reqwest(&e)
            ))
        })?;
        let retry = self.learn(&route, status, &headers, &text);
        if status.is_success() {
            if text.trim().is_empty() {
                return Ok(Value::Null);
            }
            return serde_json::from_str(&text).map_err(|e| {
                SendError::Transient(format!("Discord {route}: an answer that is not JSON: {e}"))
            });
        }
        Err(map_failure(&route, status, &headers, &text, retry))
    }

    /// GET a file from Discord's CDN (attachment URLs are signed; no token is sent, so a
    /// URL pointing elsewhere never receives it), refusing more than `max_bytes`.
    pub(crate) async fn download(
        &self,
        url: &str,
        declared: Option<u64>,
        max_bytes: u64,
    ) -> Result<Vec<u8>, FetchError> {
        let parsed = reqwest::Url::parse(url)
            .map_err(|e| SendError::Rejected(format!("bad file URL: {e}")))?;
        let host = parsed.host_str().unwrap_or_default();
        let known = CDN_HOSTS.contains(&host) || self.root_host.as_deref() == Some(host);
        if !matches!(parsed.scheme(), "http" | "https") || !known {
            return Err(SendError::Rejected(format!(
                "a file URL must point at Discord's CDN, not {host:?}"
            ))
            .into());
        }
        if let Some(size) = declared.filter(|&size| size > max_bytes) {
            return Err(FetchError::TooLarge {
                size,
                max: max_bytes,
            });
        }
        let failed = |e: reqwest::Error| {
            SendError::Transient(format!(
                "downloading a file: {}",
                hermes_adapter::describe_reqwest(&e)
            ))
        };
        let response = self.files.get(parsed).send().await.map_err(failed)?;
        let status = response.status();
        if !status.is_success() {
            return Err(if status.is_server_error() {
                SendError::Transient(format!("downloading a file: HTTP {status}"))
            } else {
                SendError::Rejected(format!("downloading a file: HTTP {status}"))
            }
            .into());
        }
        let size = response.content_length();
        read_capped(response.bytes_stream(), size, max_bytes, failed).await
    }

    /// Wait out a used-up bucket (or a global hold) when it is short; hand a long one back.
    async fn wait_for_bucket(&self, route: &str) -> Result<(), SendError> {
        let (until, scope) = {
            let limits = self.limits.lock().unwrap_or_else(|e| e.into_inner());
            let local = limits.blocked.get(&limits.bucket_of(route)).copied();
            match (limits.global, local) {
                (Some(g), Some(l)) if g >= l => (Some(g), RateScope::Bot),
                (Some(g), None) => (Some(g), RateScope::Bot),
                (_, l) => (l, scope_of(route)),
            }
        };
        let Some(until) = until else { return Ok(()) };
        let wait = until.saturating_duration_since(Instant::now());
        if wait.is_zero() {
            return Ok(());
        }
        if wait > WAIT_HERE {
            return Err(SendError::RateLimited {
                retry_after: wait,
                scope,
            });
        }
        tracing::debug!(%route, ?wait, "discord: waiting for the rate-limit bucket");
        tokio::time::sleep(wait).await;
        Ok(())
    }

    /// Remember what the headers say about the route's bucket; the wait a 429 asks for.
    fn learn(
        &self,
        route: &str,
        status: StatusCode,
        headers: &HeaderMap,
        body: &str,
    ) -> Option<Duration> {
        let now = Instant::now();
        let mut limits = self.limits.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(bucket) = header(headers, "x-ratelimit-bucket") {
            limits.buckets.insert(route.to_owned(), bucket.to_owned());
        }
        let bucket = limits.bucket_of(route);
        let reset_after = header(headers, "x-ratelimit-reset-after")
            .and_then(|v| v.parse::<f64>().ok())
            .and_then(seconds);
        let remaining =
            header(headers, "x-ratelimit-remaining").and_then(|v| v.parse::<u64>().ok());
        if status == StatusCode::TOO_MANY_REQUESTS {
            // The body says it too (and sometimes only the body does).
            let said: Value = serde_json::from_str(body).unwrap_or(Value::Null);
            let retry = [
                header(headers, "retry-after").and_then(|v| v.parse::<f64>().ok()),
                said.get("retry_after").and_then(Value::as_f64),
            ]
            .into_iter()
            .flatten()
            .filter_map(seconds)
            .max()
            .or(reset_after)
            .unwrap_or(Duration::from_secs(1));
            let global = header(headers, "x-ratelimit-global").is_some_and(|v| v == "true")
                || header(headers, "x-ratelimit-scope") == Some("global")
                || said.get("global").and_then(Value::as_bool) == Some(true);
            if global {
                limits.global = Some(now + retry);
            } else {
                limits.blocked.insert(bucket, now + retry);
            }
            return Some(retry);
        }
        match (remaining, reset_after) {
            (Some(0), Some(reset)) => {
                limits.blocked.insert(bucket, now + reset);
            }
            _ => {
                limits.blocked.remove(&bucket);
            }
        }
        None
    }
}

fn request_has_no_body_but_writes(route: &str) -> bool {
    !route.starts_with("GET")
}

fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// A positive, finite number of seconds (capped at a day) as a duration.
fn seconds(value: f64) -> Option<Duration> {
    (value.is_finite() && value >= 0.0).then(|| Duration::from_secs_f64(value.min(86_400.0)))
}

/// A route as Discord groups rate limits: the method and the path with the ids that are
/// not "major parameters" (channel, guild, webhook, interaction) replaced, and tokens hidden
/// behind a short hash (each interaction's token has limits of its own; the token itself
/// never reaches a log).
pub(crate) fn route_key(method: &Method, path: &str) -> String {
    let mut key = method.as_str().to_owned();
    let mut previous = "";
    for segment in path
        .split('?')
        .next()
        .unwrap_or("")
        .split('/')
        .filter(|s| !s.is_empty())
    {
        key.push('/');
        let major = matches!(
            previous,
            "channels" | "guilds" | "webhooks" | "interactions"
        );
        let id_like = segment.bytes().all(|b| b.is_ascii_digit());
        let token_like = segment.len() > 32;
        if token_like {
            key.push_str(&format!(":token~{:08x}", short_hash(segment)));
        } else if id_like && !major {
            key.push_str(":id");
        } else {
            key.push_str(segment);
        }
        previous = segment;
    }
    key
}

/// 32 bits of a hash: enough to tell tokens apart, nothing to recover one from.
fn short_hash(text: &str) -> u32 {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    text.hash(&mut hasher);
    hasher.finish() as u32
}

/// The ids that key a route's limit (channel, server, webhook), from its [`route_key`].
fn major_parameters(route: &str) -> String {
    let segments: Vec<&str> = route.split('/').collect();
    segments
        .windows(2)
        .filter(|w| matches!(w[0], "channels" | "guilds" | "webhooks" | "interactions"))
        .map(|w| w[1])
        .chain(segments.iter().copied().filter(|s| s.starts_with(":token")))
        .collect::<Vec<_>>()
        .join("/")
}

/// A 429 on a channel's route, or on one interaction's, holds that conversation; elsewhere
/// the bot.
fn scope_of(route: &str) -> RateScope {
    if ["/channels/", "/interactions/", "/webhooks/"]
        .iter()
        .any(|p| route.contains(p))
    {
        RateScope::Chat
    } else {
        RateScope::Bot
    }
}

/// Discord's failure as a [`SendError`] the daemon can act on.
fn map_failure(
    route: &str,
    status: StatusCode,
    headers: &HeaderMap,
    text: &str,
    retry: Option<Duration>,
) -> SendError {
    let body: Value = serde_json::from_str(text).unwrap_or(Value::Null);
    let code = body.get("code").and_then(Value::as_u64).unwrap_or(0);
    let message = body
        .get("message")
        .and_then(Value::as_str)
        .map(str::to_owned)
        .unwrap_or_else(|| text.chars().take(ERROR_TEXT_MAX).collect());
    let what = format!(
        "Discord {route}: HTTP {} {message} (code {code})",
        status.as_u16()
    );
    match status {
        StatusCode::TOO_MANY_REQUESTS => {
            let global = body.get("global").and_then(Value::as_bool).unwrap_or(false)
                || header(headers, "x-ratelimit-global").is_some_and(|v| v == "true");
            let retry_after = body
                .get("retry_after")
                .and_then(Value::as_f64)
                .and_then(seconds)
                .into_iter()
                .chain(retry)
                .max()
                .unwrap_or(Duration::from_secs(1));
            SendError::RateLimited {
                retry_after,
                scope: if global {
                    RateScope::Bot
                } else {
                    scope_of(route)
                },
            }
        }
        StatusCode::UNAUTHORIZED => SendError::Unauthorized(what),
        StatusCode::BAD_REQUEST if text.contains("BASE_TYPE_MAX_LENGTH") => {
            SendError::TooLong(what)
        }
        s if s.is_server_error() => SendError::Transient(what),
        StatusCode::REQUEST_TIMEOUT => SendError::Transient(what),
        _ => SendError::Rejected(what),
    }
}

fn multipart(payload: Value, files: Vec<Upload>) -> Result<reqwest::multipart::Form, SendError> {
    let mut form = reqwest::multipart::Form::new().part(
        "payload_json",
        reqwest::multipart::Part::text(payload.to_string())
            .mime_str("application/json")
            .map_err(|e| SendError::Rejected(e.to_string()))?,
    );
    for (n, file) in files.into_iter().enumerate() {
        let mut part = reqwest::multipart::Part::bytes(file.bytes).file_name(file.name);
        if let Some(mime) = &file.mime {
            part = part
                .mime_str(mime)
                .map_err(|e| SendError::Rejected(format!("bad MIME type {mime:?}: {e}")))?;
        }
        form = form.part(format!("files[{n}]"), part);
    }
    Ok(form)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_keep_major_parameters_and_hide_the_rest() {
        assert_eq!(
            route_key(&Method::POST, "/channels/123/messages"),
            "POST/channels/123/messages"
        );
        assert_eq!(
            route_key(&Method::PATCH, "/channels/123/messages/456"),
            "PATCH/channels/123/messages/:id"
        );
        let token = "a".repeat(60);
        let callback = route_key(&Method::POST, &format!("/interactions/9/{token}/callback"));
        assert!(
            callback.starts_with("POST/interactions/9/:token~"),
            "{callback}"
        );
        assert!(!callback.contains(&token));
        let other = route_key(
            &Method::POST,
            &format!("/interactions/9/{}/callback", "b".repeat(60)),
        );
        assert_ne!(
            major_parameters(&callback),
            major_parameters(&other),
            "each interaction has limits of its own"
        );
        assert_eq!(
            route_key(&Method::GET, "/channels/5/messages?after=7&limit=50"),
            "GET/channels/5/messages"
        );
        assert_eq!(major_parameters("PATCH/channels/123/messages/:id"), "123");
    }

    #[test]
    fn a_used_up_bucket_holds_its_channel_only() {
        let rest = Rest::new("http://127.0.0.1:1", "t").unwrap();
        let mut headers = HeaderMap::new();
        headers.insert("x-ratelimit-bucket", HeaderValue::from_static("abc"));
        headers.insert("x-ratelimit-remaining", HeaderValue::from_static("0"));
        headers.insert("x-ratelimit-reset-after", HeaderValue::from_static("30"));
        let one = route_key(&Method::POST, "/channels/1/messages");
        let two = route_key(&Method::POST, "/channels/2/messages");
        rest.learn(&one, StatusCode::OK, &headers, "");
        headers.insert("x-ratelimit-remaining", HeaderValue::from_static("4"));
        rest.learn(&two, StatusCode::OK, &headers, "");
        let limits = rest.limits.lock().unwrap();
        assert!(limits.blocked.contains_key(&limits.bucket_of(&one)));
        assert!(!limits.blocked.contains_key(&limits.bucket_of(&two)));
    }

    #[test]
    fn a_429_says_how_long_and_whom() {
        let mut headers = HeaderMap::new();
        headers.insert("retry-after", HeaderValue::from_static("3"));
        let error = map_failure(
            "POST/channels/1/messages",
            StatusCode::TOO_MANY_REQUESTS,
            &headers,
            r#"{"message":"You are being rate limited.","retry_after":2.5,"global":false}"#,
            Some(Duration::from_secs(3)),
        );
        assert_eq!(
            error,
            SendError::RateLimited {
                retry_after: Duration::from_secs(3),
                scope: RateScope::Chat
            }
        );
        let global = map_failure(
            "POST/channels/1/messages",
            StatusCode::TOO_MANY_REQUESTS,
            &HeaderMap::new(),
            r#"{"retry_after":7.25,"global":true}"#,
            None,
        );
        assert_eq!(
            global,
            SendError::RateLimited {
                retry_after: Duration::from_millis(7250),
                scope: RateScope::Bot
            }
        );
    }

    #[test]
    fn discord_errors_map_onto_what_the_daemon_can_do() {
        let h = HeaderMap::new();
        assert!(matches!(
            map_failure(
                "r",
                StatusCode::UNAUTHORIZED,
                &h,
                r#"{"message":"401: Unauthorized","code":0}"#,
                None
            ),
            SendError::Unauthorized(_)
        ));
        assert!(matches!(
            map_failure(
                "r",
                StatusCode::BAD_REQUEST,
                &h,
                r#"{"code":50035,"errors":{"content":{"_errors":[{"code":"BASE_TYPE_MAX_LENGTH"}]}}}"#,
                None
            ),
            SendError::TooLong(_)
        ));
        assert!(matches!(
            map_failure("r", StatusCode::BAD_GATEWAY, &h, "<html>", None),
            SendError::Transient(_)
        ));
        assert!(matches!(
            map_failure(
                "r",
                StatusCode::NOT_FOUND,
                &h,
                r#"{"message":"Unknown Channel","code":10003}"#,
                None
            ),
            SendError::Rejected(_)
        ));
    }
}
