//! The LLM provider client: one model at one provider, spoken to in its dialect (OpenAI's
//! chat completions in [`openai`], Anthropic's Messages in [`anthropic`]), streamed, with
//! tool calling, retries with jittered backoff on 429/5xx/connection failures (honouring
//! `Retry-After`), and cancellation that drops the HTTP stream at once. Errors are
//! classified so the agent knows when to fall back or compress.

mod anthropic;
pub mod check;
pub mod local;
mod offer;
mod openai;
mod sse;

pub use offer::ToolDefinitions;

use std::time::Duration;

use futures_util::StreamExt;
use hermes_adapter::Backoff;
use serde_json::Value;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::config::{Dialect, ModelConfig};
use sse::SseLines;

/// A tool call the model asked for.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    /// The raw JSON arguments text, as the model wrote it.
    pub arguments: String,
}

/// One finished model response.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Completion {
    pub content: String,
    pub tool_calls: Vec<ToolCall>,
    pub finish_reason: Option<String>,
    /// The tokens it took, where the provider says.
    pub usage: Usage,
    /// What the model thought, in its provider's own blocks, to be sent back with this
    /// message while the turn goes on (Anthropic's signed thinking blocks).
    pub reasoning: Option<Value>,
}

/// Tokens a call (or a turn, or a session) took.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    pub prompt: u64,
    pub completion: u64,
    /// Of `prompt`, read from the provider's prompt cache.
    pub cached: u64,
    /// Of `prompt`, written to the provider's prompt cache (Anthropic).
    pub cache_write: u64,
    /// What it cost, in millionths of a dollar: where the provider says (OpenRouter), else
    /// at the model's list price where it is known (`config::catalog`).
    pub cost_micros: u64,
}

impl Usage {
    /// OpenAI's `usage` object (`prompt_tokens`, `completion_tokens`,
    /// `prompt_tokens_details.cached_tokens`).
    fn from_openai(usage: &Value) -> Usage {
        let number = |pointer: &str| usage.pointer(pointer).and_then(Value::as_u64).unwrap_or(0);
        let cost = usage.get("cost").and_then(Value::as_f64).unwrap_or(0.0);
        Usage {
            prompt: number("/prompt_tokens"),
            completion: number("/completion_tokens"),
            cached: number("/prompt_tokens_details/cached_tokens"),
            cache_write: number("/prompt_tokens_details/cache_write_tokens"),
            cost_micros: if cost.is_finite() && cost > 0.0 {
                (cost * 1_000_000.0).round() as u64
            } else {
                0
            },
        }
    }
}

impl std::ops::AddAssign for Usage {
    fn add_assign(&mut self, other: Usage) {
        self.prompt = self.prompt.saturating_add(other.prompt);
        self.completion = self.completion.saturating_add(other.completion);
        self.cached = self.cached.saturating_add(other.cached);
        self.cache_write = self.cache_write.saturating_add(other.cache_write);
        self.cost_micros = self.cost_micros.saturating_add(other.cost_micros);
    }
}

/// What a turn's calls took, per model (a fallback answers on another).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct UsageByModel(pub Vec<(String, Usage)>);

impl UsageByModel {
    pub fn add(&mut self, model: &str, usage: Usage) {
        match self.0.iter_mut().find(|(m, _)| m == model) {
            Some((_, total)) => *total += usage,
            None => self.0.push((model.to_owned(), usage)),
        }
    }
}

/// Why a call failed.
#[derive(Debug, thiserror::Error)]
pub enum LlmError {
    /// The turn was cancelled (interrupt, /stop, shutdown).
    #[error("cancelled")]
    Cancelled,
    /// Every attempt failed with a retryable error.
    #[error("the model provider is unreachable after {attempts} attempts: {last}")]
    Unreachable { attempts: u32, last: String },
    /// The provider refused the request (bad key, unknown model, bad request).
    #[error("the model provider refused the request (HTTP {status}): {message}")]
    Refused { status: u16, message: String },
}

impl LlmError {
    /// The conversation is longer than the model takes (compress and try again).
    pub fn is_context_overflow(&self) -> bool {
        let LlmError::Refused { status, message } = self else {
            return false;
        };
        let message = message.to_ascii_lowercase();
        matches!(status, 400 | 413 | 422)
            && [
                "context length",
                "context_length",
                "context window",
                "prompt is too long",
                "too many tokens",
                "reduce the length",
                "maximum context",
                "request_too_large",
            ]
            .iter()
            .any(|needle| message.contains(needle))
            || *status == 413
    }

    /// The account cannot pay for the call (402, or words to that effect).
    pub fn is_billing(&self) -> bool {
        let LlmError::Refused { status, message } = self else {
            return false;
        };
        let message = message.to_ascii_lowercase();
        *status == 402
            || [
                "credit balance",
                "insufficient credit",
                "insufficient_quota",
                "billing",
            ]
            .iter()
            .any(|needle| message.contains(needle))
    }

    /// Worth trying another model for: the provider stayed down, the account cannot pay,
    /// or it refuses this key or model.
    pub fn calls_for_fallback(&self) -> bool {
        match self {
            LlmError::Cancelled => false,
            LlmError::Unreachable { .. } => true,
            LlmError::Refused { status, message } => {
                let message = message.to_ascii_lowercase();
                self.is_billing()
                    || matches!(status, 401 | 403 | 404)
                    || [
                        "model_not_found",
                        "not a valid model",
                        "model not found",
                        "does not exist",
                    ]
                    .iter()
                    .any(|needle| message.contains(needle))
            }
        }
    }
}

/// The answer's text as it arrives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StreamDelta {
    /// A new attempt: what came before is void.
    Restart,
    Text(String),
}

/// What a stream event said.
pub(crate) enum Decoded {
    /// Text of the answer.
    Text(String),
    /// The end of the answer.
    Done,
    Nothing,
}

/// Reads one dialect's streamed events into a completion.
pub(crate) trait Decoder: Send {
    /// One event's `data`; an `Err` is an error the provider sent in the stream.
    fn event(&mut self, data: &str) -> Result<Decoded, String>;
    /// The answer said how it finished (a stream that ends after that is whole).
    fn complete(&self) -> bool;
    fn finish(self: Box<Self>) -> Completion;
}

/// Talks to one model at one provider.
pub struct LlmClient {
    http: reqwest::Client,
    config: ModelConfig,
    /// Delays between attempts: from the first retry delay, doubling, jittered, at most 20 s.
    retry: Backoff,
    /// The provider refused `stream_options` once: it is not sent again.
    no_stream_options: std::sync::atomic::AtomicBool,
    /// Places for attempts in flight (`model.max_concurrent_calls`). An attempt writes its
    /// body and opens or takes a connection only once it has one, so a call that waits
    /// holds nothing else; a retry's backoff holds none.
    in_flight: tokio::sync::Semaphore,
}

enum Attempt {
    Retry {
        error: String,
        after: Option<Duration>,
    },
    Fatal(LlmError),
}

/// Open connections to a provider kept for later calls (see [`LlmClient::new`]).
const IDLE_CONNECTIONS: usize = 32;

/// One call's request line and headers, made once for all its attempts. Its body is
/// written for each attempt and not kept: hyper drops it once it is on the socket, so a
/// call waiting for its answer holds no copy of the conversation (with a thousand calls in
/// flight the kept bodies were a fifth of the daemon's peak, docs/performance.md).
struct Request {
    url: String,
    /// Whether the body asks for `stream_options`.
    stream_options: bool,
    headers: Vec<(&'static str, String)>,
}

/// `body` as the bytes of a request; `room` is what its largest parts are known to take.
fn serialised(body: &impl serde::Serialize, room: usize) -> bytes::Bytes {
    let mut bytes = Vec::with_capacity(room + 1024);
    // Made of `Value`s and strings: map keys are strings, so it always serialises.
    serde_json::to_writer(&mut bytes, body).expect("a JSON value serialises");
    bytes.into()
}

impl LlmClient {
    pub fn new(config: ModelConfig) -> Self {
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .tcp_nodelay(true)
            // Connections kept open for the next call. Unbounded (reqwest's default), a
            // burst of a thousand calls left a thousand open connections, ~50 KiB each, for
            // the pool's idle time (step 18's heap profile).
            .pool_max_idle_per_host(IDLE_CONNECTIONS)
            // A provider's redirect must not carry the key elsewhere.
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap_or_default();
        let in_flight = tokio::sync::Semaphore::new(config.max_concurrent_calls.max(1));
        LlmClient {
            http,
            config,
            retry: Backoff::new(Duration::from_millis(500), Duration::from_secs(20)).jittered(),
            no_stream_options: Default::default(),
            in_flight,
        }
    }

    pub fn model(&self) -> &str {
        &self.config.model
    }

    pub fn config(&self) -> &ModelConfig {
        &self.config
    }

    /// One completion for `messages` (OpenAI message objects) with `tools` offered.
    pub async fn complete(
        &self,
        messages: &[Value],
        tools: &ToolDefinitions,
        cancel: &CancellationToken,
    ) -> Result<Completion, LlmError> {
        self.complete_streaming(messages, tools, cancel, None).await
    }

    /// [`LlmClient::complete`], handing the text to `deltas` as it arrives (each attempt
    /// starts with [`StreamDelta::Restart`]: a retried call writes its answer anew).
    pub async fn complete_streaming(
        &self,
        messages: &[Value],
        tools: &ToolDefinitions,
        cancel: &CancellationToken,
        deltas: Option<&mpsc::UnboundedSender<StreamDelta>>,
    ) -> Result<Completion, LlmError> {
        let started = std::time::Instant::now();
        let result = self.call(messages, tools, cancel, deltas).await;
        crate::metrics::llm_call(started.elapsed());
        match &result {
            Err(LlmError::Unreachable { .. }) => crate::metrics::llm_error("unreachable"),
            Err(LlmError::Refused { .. }) => crate::metrics::llm_error("refused"),
            _ => {}
        }
        result
    }

    fn request(&self) -> Request {
        let config = &self.config;
        match config.dialect {
            Dialect::OpenAi => {
                let mut headers: Vec<(&'static str, String)> = openai::headers(config)
                    .into_iter()
                    .map(|(k, v)| (k, v.to_owned()))
                    .collect();
                if let Some(key) = &config.api_key {
                    headers.push(("authorization", format!("Bearer {}", key.expose())));
                }
                Request {
                    url: format!("{}/chat/completions", config.base_url),
                    stream_options: !self
                        .no_stream_options
                        .load(std::sync::atomic::Ordering::Relaxed),
                    headers,
                }
            }
            Dialect::Anthropic => Request {
                url: anthropic::url(&config.base_url),
                stream_options: false,
                headers: anthropic::headers(config),
            },
        }
    }

    /// The body of one attempt of `request`.
    fn body(&self, request: &Request, messages: &[Value], tools: &ToolDefinitions) -> bytes::Bytes {
        let config = &self.config;
        match config.dialect {
            Dialect::OpenAi => {
                let body = openai::body(config, messages, tools, request.stream_options);
                serialised(&body, tools.json().map_or(0, |t| t.get().len()))
            }
            Dialect::Anthropic => serialised(&anthropic::body(config, messages, tools.values()), 0),
        }
    }

    fn decoder(&self) -> Box<dyn Decoder> {
        match self.config.dialect {
            Dialect::OpenAi => Box::<openai::Accumulator>::default(),
            Dialect::Anthropic => Box::<anthropic::Accumulator>::default(),
        }
    }

    async fn call(
        &self,
        messages: &[Value],
        tools: &ToolDefinitions,
        cancel: &CancellationToken,
        deltas: Option<&mpsc::UnboundedSender<StreamDelta>>,
    ) -> Result<Completion, LlmError> {
        let mut request = self.request();
        let mut last = String::new();
        for attempt in 1..=self.config.max_attempts {
            let outcome = tokio::select! {
                _ = cancel.cancelled() => return Err(LlmError::Cancelled),
                r = async {
                    // Never closed, so the place always comes.
                    let _place = self.in_flight.acquire().await;
                    self.attempt(&request, self.body(&request, messages, tools), deltas).await
                } => r,
            };
            match outcome {
                Ok(mut completion) => {
                    // Where the provider does not say what a call cost, its list price.
                    if completion.usage.cost_micros == 0
                        && let Some(cost) = crate::config::catalog::list_cost_micros(
                            &self.config.provider,
                            &self.config.model,
                            &crate::config::catalog::Tokens {
                                prompt: completion.usage.prompt,
                                cached: completion.usage.cached,
                                cache_write: completion.usage.cache_write,
                                completion: completion.usage.completion,
                            },
                        )
                    {
                        completion.usage.cost_micros = cost;
                    }
                    let usage = completion.usage;
                    crate::metrics::llm_tokens(usage.prompt, usage.completion, usage.cached);
                    return Ok(completion);
                }
                Err(Attempt::Fatal(LlmError::Refused {
                    status: 400,
                    message,
                })) if message.contains("stream_options") && request.stream_options => {
                    tracing::info!(
                        "llm: the provider does not take stream_options; asking without"
                    );
                    self.no_stream_options
                        .store(true, std::sync::atomic::Ordering::Relaxed);
                    request = self.request();
                }
                Err(Attempt::Fatal(e)) => return Err(e),
                Err(Attempt::Retry { error, after }) => {
                    tracing::warn!(attempt, model = %self.config.model, error = %error, "llm: call failed");
                    crate::metrics::llm_error("retry");
                    last = error;
                    if attempt == self.config.max_attempts {
                        break;
                    }
                    let wait = after.unwrap_or_else(|| self.retry.delay(attempt - 1));
                    tokio::select! {
                        _ = cancel.cancelled() => return Err(LlmError::Cancelled),
                        _ = tokio::time::sleep(wait) => {}
                    }
                }
            }
        }
        Err(LlmError::Unreachable {
            attempts: self.config.max_attempts,
            last,
        })
    }

    async fn attempt(
        &self,
        request: &Request,
        body: bytes::Bytes,
        deltas: Option<&mpsc::UnboundedSender<StreamDelta>>,
    ) -> Result<Completion, Attempt> {
        if let Some(deltas) = deltas {
            let _ = deltas.send(StreamDelta::Restart);
        }
        let mut builder = self
            .http
            .post(&request.url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body);
        // What errors name: the URL without credentials or query.
        let url = &shown_url(&request.url);
        for (name, value) in &request.headers {
            builder = builder.header(*name, value);
        }
        // A provider that takes the connection and then says nothing (no headers) is given
        // as long as a silent stream would be.
        let response =
            match tokio::time::timeout(self.config.stream_idle_timeout, builder.send()).await {
                Ok(sent) => sent.map_err(|e| Attempt::Retry {
                    error: format!("cannot reach {url}: {}", without_url(e)),
                    after: None,
                })?,
                Err(_) => {
                    return Err(Attempt::Retry {
                        error: format!(
                            "{url} sent no response within {:?}",
                            self.config.stream_idle_timeout
                        ),
                        after: None,
                    });
                }
            };
        let status = response.status();
        if !status.is_success() {
            let after = response
                .headers()
                .get(reqwest::header::RETRY_AFTER)
                .and_then(|v| v.to_str().ok())
                .and_then(retry_after);
            let body = self.read_body(response, MAX_ERROR_BODY).await;
            let text = String::from_utf8_lossy(&body.unwrap_or_default()).into_owned();
            let message = error_message(&text);
            // 529 is Anthropic's "overloaded". A 429 that says the account is out of quota
            // does not pass by waiting.
            let out_of_quota = message.contains("insufficient_quota");
            return Err(
                if (status.as_u16() == 429 && !out_of_quota) || status.is_server_error() {
                    Attempt::Retry {
                        error: format!("HTTP {}: {message}", status.as_u16()),
                        after,
                    }
                } else {
                    Attempt::Fatal(LlmError::Refused {
                        status: status.as_u16(),
                        message,
                    })
                },
            );
        }
        let is_stream = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.contains("text/event-stream"));
        if !is_stream {
            // Some servers ignore `stream: true`; accept a whole answer too.
            let body = self
                .read_body(response, MAX_COMPLETION_BODY)
                .await
                .map_err(|error| Attempt::Retry { error, after: None })?;
            let value: Value = serde_json::from_slice(&body).map_err(|e| Attempt::Retry {
                error: format!("unreadable response: {e}"),
                after: None,
            })?;
            let whole = match self.config.dialect {
                Dialect::OpenAi => openai::parse_full(&value),
                Dialect::Anthropic => anthropic::Accumulator::from_message(&value),
            };
            return whole.map_err(|e| Attempt::Retry {
                error: e,
                after: None,
            });
        }
        self.read_stream(response, deltas).await
    }

    /// A whole (non-streamed) body, at most `max` bytes, read within the idle timeout.
    async fn read_body(&self, response: reqwest::Response, max: usize) -> Result<Vec<u8>, String> {
        read_capped(response, max, self.config.stream_idle_timeout).await
    }

    async fn read_stream(
        &self,
        response: reqwest::Response,
        deltas: Option<&mpsc::UnboundedSender<StreamDelta>>,
    ) -> Result<Completion, Attempt> {
        let mut stream = response.bytes_stream();
        let mut lines = SseLines::default();
        let mut decoder = self.decoder();
        let retry = |error: String| Attempt::Retry { error, after: None };
        // A provider that streams without end cannot fill the daemon.
        let mut read = 0usize;
        loop {
            let next = tokio::time::timeout(self.config.stream_idle_timeout, stream.next()).await;
            let chunk = match next {
                Err(_) => {
                    return Err(retry(format!(
                        "the stream went silent for {:?}",
                        self.config.stream_idle_timeout
                    )));
                }
                Ok(None) => {
                    return if decoder.complete() {
                        Ok(decoder.finish())
                    } else {
                        Err(retry("the stream ended early".into()))
                    };
                }
                Ok(Some(Err(e))) => return Err(retry(format!("the stream broke: {e}"))),
                Ok(Some(Ok(bytes))) => bytes,
            };
            read = read.saturating_add(chunk.len());
            if read > MAX_COMPLETION_BODY {
                return Err(retry(format!(
                    "the stream passed {MAX_COMPLETION_BODY} bytes"
                )));
            }
            for data in lines.push(&chunk) {
                match decoder.event(&data).map_err(retry)? {
                    Decoded::Done => return Ok(decoder.finish()),
                    Decoded::Text(text) => {
                        if let Some(deltas) = deltas {
                            let _ = deltas.send(StreamDelta::Text(text));
                        }
                    }
                    Decoded::Nothing => {}
                }
            }
        }
    }
}

/// A whole response body, refused once it passes `max` bytes or takes longer than
/// `within` (a provider that trickles or floods cannot hold or fill the daemon).
pub(crate) async fn read_capped(
    response: reqwest::Response,
    max: usize,
    within: Duration,
) -> Result<Vec<u8>, String> {
    let read = async {
        let mut body = Vec::new();
        let mut chunks = response.bytes_stream();
        while let Some(chunk) = chunks.next().await {
            let chunk = chunk.map_err(|e| format!("the response broke: {}", e.without_url()))?;
            if body.len() + chunk.len() > max {
                return Err(format!("the response is larger than {max} bytes"));
            }
            body.extend_from_slice(&chunk);
        }
        Ok(body)
    };
    tokio::time::timeout(within, read)
        .await
        .map_err(|_| format!("the response was not complete within {within:?}"))?
}

/// The most of an error response that is read (its message is shown, shortened).
const MAX_ERROR_BODY: usize = 64 * 1024;
/// The most of a non-streamed completion that is read.
const MAX_COMPLETION_BODY: usize = 16 * 1024 * 1024;

/// A `Retry-After` of seconds, at most a minute. Anything else (an HTTP date, `NaN`, text)
/// is ignored: the backoff decides.
fn retry_after(value: &str) -> Option<Duration> {
    let seconds = value.trim().parse::<f64>().ok().filter(|s| s.is_finite())?;
    Some(Duration::from_secs_f64(seconds.clamp(0.0, 60.0)))
}

/// Where a model's list of models is asked for, with the headers its chat requests carry
/// (the key as that dialect sends it: a bearer key, Anthropic's `x-api-key`, or an
/// Anthropic OAuth token): for [`check::ask_models`].
pub fn models_request(config: &ModelConfig) -> (String, Vec<(&'static str, String)>) {
    match config.dialect {
        Dialect::OpenAi => {
            let headers = config
                .api_key
                .iter()
                .map(|key| ("authorization", format!("Bearer {}", key.expose())))
                .collect();
            (format!("{}/models", config.base_url), headers)
        }
        Dialect::Anthropic => {
            let url = anthropic::url(&config.base_url);
            let url = format!("{}/models", url.trim_end_matches("/messages"));
            (url, anthropic::headers(config))
        }
    }
}

/// The provider's error text, from `{"error":{"message":…}}` when it has that shape, with
/// its `code` or `type` and, from OpenRouter, the upstream provider's own words
/// (`error.metadata.raw`), so errors can be told apart.
pub(crate) fn error_message(body: &str) -> String {
    let parsed: Option<Value> = serde_json::from_str(body).ok();
    let text = |v: &Value| {
        v.as_str()
            .map(str::to_owned)
            .unwrap_or_else(|| v.to_string())
    };
    let mut message = parsed
        .as_ref()
        .and_then(|v| {
            v.pointer("/error/message")
                .or_else(|| v.get("error").filter(|e| !e.is_object()))
                .or_else(|| v.get("message"))
        })
        .map(text)
        .unwrap_or_else(|| body.chars().take(300).collect());
    if let Some(error) = parsed.as_ref().and_then(|v| v.get("error")) {
        for key in ["code", "type"] {
            if let Some(kind) = error.get(key).filter(|k| !k.is_null()).map(text)
                && !message.contains(&kind)
            {
                message.push_str(&format!(" ({kind})"));
            }
        }
        if let Some(raw) = error.pointer("/metadata/raw").map(text) {
            let raw: String = raw.chars().take(500).collect();
            message.push_str(&format!(": {}", error_message(&raw)));
        }
    }
    if message.trim().is_empty() {
        "(no details)".into()
    } else {
        message
    }
}

/// `url` for messages: no user, password or query (they can carry keys).
fn shown_url(url: &str) -> String {
    match reqwest::Url::parse(url) {
        Ok(mut parsed) => {
            let _ = parsed.set_username("");
            let _ = parsed.set_password(None);
            parsed.set_query(None);
            parsed.to_string()
        }
        Err(_) => "the provider".into(),
    }
}

/// reqwest errors print the URL; keep the reason only (URLs can carry keys in query strings).
fn without_url(error: reqwest::Error) -> String {
    let source = std::error::Error::source(&error).map(|s| s.to_string());
    let mut text = error.without_url().to_string();
    if let Some(source) = source {
        text.push_str(&format!(" ({source})"));
    }
    text
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A model for unit tests.
    pub(crate) fn model(base_url: &str) -> ModelConfig {
        ModelConfig {
            provider: "custom".into(),
            model: "m".into(),
            base_url: base_url.into(),
            api_key: None,
            dialect: crate::config::dialect_for("custom", base_url),
            context_length: 100_000,
            max_tokens: None,
            reasoning_effort: None,
            max_attempts: 1,
            stream_idle_timeout: Duration::from_secs(5),
            max_concurrent_calls: 64,
        }
    }

    #[test]
    fn errors_are_classified_for_fallback_and_compression() {
        let refused = |status, message: &str| LlmError::Refused {
            status,
            message: message.into(),
        };
        assert!(
            refused(400, "This model's maximum context length is 8192 tokens.")
                .is_context_overflow()
        );
        assert!(
            refused(400, "prompt is too long: 9000 tokens > 8192 maximum").is_context_overflow()
        );
        assert!(!refused(400, "bad tool schema").is_context_overflow());
        assert!(refused(402, "pay up").is_billing());
        assert!(
            refused(
                400,
                "Your credit balance is too low to access the Anthropic API."
            )
            .is_billing()
        );
        assert!(refused(401, "bad key").calls_for_fallback());
        assert!(!refused(400, "bad tool schema").calls_for_fallback());
        assert!(!LlmError::Cancelled.calls_for_fallback());
    }

    #[test]
    fn retry_after_takes_seconds_and_nothing_else() {
        assert_eq!(retry_after("2"), Some(Duration::from_secs(2)));
        assert_eq!(retry_after(" 0.5 "), Some(Duration::from_millis(500)));
        assert_eq!(retry_after("3600"), Some(Duration::from_secs(60)));
        assert_eq!(retry_after("-1"), Some(Duration::ZERO));
        for junk in [
            "NaN",
            "nan",
            "inf",
            "-inf",
            "Wed, 21 Oct 2026 07:28:00 GMT",
            "",
        ] {
            assert_eq!(retry_after(junk), None, "{junk}");
        }
    }

    #[test]
    fn provider_errors_are_summarised() {
        assert_eq!(
            error_message(r#"{"error":{"message":"bad key"}}"#),
            "bad key"
        );
        assert_eq!(error_message("oops"), "oops");
        assert_eq!(error_message(""), "(no details)");
        // OpenRouter's wrapper keeps the upstream's words, and codes are kept.
        let wrapped = r#"{"error":{"message":"Provider returned error","code":400,"metadata":{"raw":"{\"type\":\"error\",\"error\":{\"type\":\"invalid_request_error\",\"message\":\"prompt is too long: 210000 tokens > 200000 maximum\"}}"}}}"#;
        let message = error_message(wrapped);
        assert!(message.contains("prompt is too long"), "{message}");
        assert!(
            LlmError::Refused {
                status: 400,
                message
            }
            .is_context_overflow()
        );
        let openai = r#"{"error":{"message":"Too long.","type":"invalid_request_error","code":"context_length_exceeded"}}"#;
        assert!(error_message(openai).contains("context_length_exceeded"));
    }

    #[test]
    fn urls_in_messages_lose_their_credentials() {
        assert_eq!(
            shown_url("https://user:pw@host.example/v1/chat/completions?key=k"),
            "https://host.example/v1/chat/completions"
        );
    }
}
