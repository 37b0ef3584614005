//! The LLM provider client: OpenAI-compatible `/chat/completions` with `stream: true`,
//! tool calling, retries with jittered backoff on 429/5xx/connection failures (honouring
//! `Retry-After`), and cancellation that drops the HTTP stream at once.

mod sse;

use std::time::Duration;

use futures_util::StreamExt;
use hermes_adapter::Backoff;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::config::ModelConfig;
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
}

/// Tokens a call (or a turn, or a session) took.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    pub prompt: u64,
    pub completion: u64,
    /// Of `prompt`, read from the provider's prompt cache.
    pub cached: u64,
}

impl Usage {
    /// OpenAI's `usage` object (`prompt_tokens`, `completion_tokens`,
    /// `prompt_tokens_details.cached_tokens`).
    fn from_openai(usage: &Value) -> Usage {
        let number = |pointer: &str| usage.pointer(pointer).and_then(Value::as_u64).unwrap_or(0);
        Usage {
            prompt: number("/prompt_tokens"),
            completion: number("/completion_tokens"),
            cached: number("/prompt_tokens_details/cached_tokens"),
        }
    }
}

impl std::ops::AddAssign for Usage {
    fn add_assign(&mut self, other: Usage) {
        self.prompt += other.prompt;
        self.completion += other.completion;
        self.cached += other.cached;
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

/// The answer's text as it arrives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StreamDelta {
    /// A new attempt: what came before is void.
    Restart,
    Text(String),
}

/// Talks to one OpenAI-compatible endpoint.
pub struct LlmClient {
    http: reqwest::Client,
    config: ModelConfig,
    /// Delays between attempts: from the first retry delay, doubling, jittered, at most 20 s.
    retry: Backoff,
    /// The provider refused `stream_options` once: it is not sent again.
    no_stream_options: std::sync::atomic::AtomicBool,
}

enum Attempt {
    Retry {
        error: String,
        after: Option<Duration>,
    },
    Fatal(LlmError),
}

impl LlmClient {
    pub fn new(config: ModelConfig) -> Self {
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .tcp_nodelay(true)
            .build()
            .unwrap_or_default();
        LlmClient {
            http,
            config,
            retry: Backoff::new(Duration::from_millis(500), Duration::from_secs(20)).jittered(),
            no_stream_options: Default::default(),
        }
    }

    pub fn model(&self) -> &str {
        &self.config.model
    }

    /// One completion for `messages` (OpenAI message objects) with `tools` offered.
    pub async fn complete(
        &self,
        messages: &[Value],
        tools: &[Value],
        cancel: &CancellationToken,
    ) -> Result<Completion, LlmError> {
        self.complete_streaming(messages, tools, cancel, None).await
    }

    /// [`LlmClient::complete`], handing the text to `deltas` as it arrives (each attempt
    /// starts with [`StreamDelta::Restart`]: a retried call writes its answer anew).
    pub async fn complete_streaming(
        &self,
        messages: &[Value],
        tools: &[Value],
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

    async fn call(
        &self,
        messages: &[Value],
        tools: &[Value],
        cancel: &CancellationToken,
        deltas: Option<&mpsc::UnboundedSender<StreamDelta>>,
    ) -> Result<Completion, LlmError> {
        let mut body = json!({
            "model": self.config.model,
            "messages": messages,
            "stream": true,
        });
        // The last event then says how many tokens the call took (OpenAI's option; servers
        // that refuse it are asked without it from then on).
        if !self
            .no_stream_options
            .load(std::sync::atomic::Ordering::Relaxed)
        {
            body["stream_options"] = json!({"include_usage": true});
        }
        if !tools.is_empty() {
            body["tools"] = Value::Array(tools.to_vec());
        }
        let mut last = String::new();
        for attempt in 1..=self.config.max_attempts {
            let outcome = tokio::select! {
                _ = cancel.cancelled() => return Err(LlmError::Cancelled),
                r = self.attempt(&body, deltas) => r,
            };
            match outcome {
                Ok(completion) => {
                    let usage = completion.usage;
                    crate::metrics::llm_tokens(usage.prompt, usage.completion, usage.cached);
                    return Ok(completion);
                }
                Err(Attempt::Fatal(LlmError::Refused {
                    status: 400,
                    message,
                })) if message.contains("stream_options")
                    && body.get("stream_options").is_some() =>
                {
                    tracing::info!(
                        "llm: the provider does not take stream_options; asking without"
                    );
                    self.no_stream_options
                        .store(true, std::sync::atomic::Ordering::Relaxed);
                    if let Some(body) = body.as_object_mut() {
                        body.remove("stream_options");
                    }
                }
                Err(Attempt::Fatal(e)) => return Err(e),
                Err(Attempt::Retry { error, after }) => {
                    tracing::warn!(attempt, error = %error, "llm: call failed");
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
        body: &Value,
        deltas: Option<&mpsc::UnboundedSender<StreamDelta>>,
    ) -> Result<Completion, Attempt> {
        if let Some(deltas) = deltas {
            let _ = deltas.send(StreamDelta::Restart);
        }
        let url = format!("{}/chat/completions", self.config.base_url);
        let mut request = self.http.post(&url).json(body);
        if let Some(key) = &self.config.api_key {
            request = request.bearer_auth(key.expose());
        }
        // A provider that takes the connection and then says nothing (no headers) is given
        // as long as a silent stream would be.
        let response =
            match tokio::time::timeout(self.config.stream_idle_timeout, request.send()).await {
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
            return Err(if status.as_u16() == 429 || status.is_server_error() {
                Attempt::Retry {
                    error: format!("HTTP {}: {message}", status.as_u16()),
                    after,
                }
            } else {
                Attempt::Fatal(LlmError::Refused {
                    status: status.as_u16(),
                    message,
                })
            });
        }
        let is_stream = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.contains("text/event-stream"));
        if !is_stream {
            // Some servers ignore `stream: true`; accept a plain JSON completion too.
            let body = self
                .read_body(response, MAX_COMPLETION_BODY)
                .await
                .map_err(|error| Attempt::Retry { error, after: None })?;
            let value: Value = serde_json::from_slice(&body).map_err(|e| Attempt::Retry {
                error: format!("unreadable response: {e}"),
                after: None,
            })?;
            return parse_full(&value).map_err(|e| Attempt::Retry {
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
        let mut acc = StreamAccumulator::default();
        loop {
            let next = tokio::time::timeout(self.config.stream_idle_timeout, stream.next()).await;
            let chunk = match next {
                Err(_) => {
                    return Err(Attempt::Retry {
                        error: format!(
                            "the stream went silent for {:?}",
                            self.config.stream_idle_timeout
                        ),
                        after: None,
                    });
                }
                Ok(None) => {
                    return if acc.saw_finish {
                        Ok(acc.finish())
                    } else {
                        Err(Attempt::Retry {
                            error: "the stream ended early".into(),
                            after: None,
                        })
                    };
                }
                Ok(Some(Err(e))) => {
                    return Err(Attempt::Retry {
                        error: format!("the stream broke: {e}"),
                        after: None,
                    });
                }
                Ok(Some(Ok(bytes))) => bytes,
            };
            for data in lines.push(&chunk) {
                if data == "[DONE]" {
                    return Ok(acc.finish());
                }
                let value: Value = serde_json::from_str(&data).map_err(|e| Attempt::Retry {
                    error: format!("unreadable stream event: {e}"),
                    after: None,
                })?;
                if let Some(error) = value.get("error") {
                    return Err(Attempt::Retry {
                        error: format!("provider error: {error}"),
                        after: None,
                    });
                }
                let before = acc.content.len();
                acc.absorb(&value);
                if let Some(deltas) = deltas
                    && acc.content.len() > before
                {
                    let _ = deltas.send(StreamDelta::Text(acc.content[before..].to_owned()));
                }
            }
        }
    }
}

/// Builds a completion from streamed deltas.
#[derive(Default)]
struct StreamAccumulator {
    content: String,
    /// Tool calls by their stream index.
    calls: Vec<(usize, ToolCall)>,
    finish_reason: Option<String>,
    saw_finish: bool,
    usage: Usage,
}

impl StreamAccumulator {
    fn absorb(&mut self, event: &Value) {
        if let Some(usage) = event.get("usage").filter(|u| u.is_object()) {
            self.usage = Usage::from_openai(usage);
        }
        let Some(choice) = event.get("choices").and_then(|c| c.get(0)) else {
            return;
        };
        let delta = &choice["delta"];
        if let Some(text) = delta.get("content").and_then(Value::as_str) {
            self.content.push_str(text);
        }
        if let Some(calls) = delta.get("tool_calls").and_then(Value::as_array) {
            for call in calls {
                let index = call.get("index").and_then(Value::as_u64).unwrap_or(0) as usize;
                let slot = match self.calls.iter().position(|(i, _)| *i == index) {
                    Some(p) => &mut self.calls[p].1,
                    None => {
                        self.calls.push((
                            index,
                            ToolCall {
                                id: String::new(),
                                name: String::new(),
                                arguments: String::new(),
                            },
                        ));
                        &mut self.calls.last_mut().expect("just pushed").1
                    }
                };
                if let Some(id) = call.get("id").and_then(Value::as_str) {
                    slot.id.push_str(id);
                }
                if let Some(name) = call.pointer("/function/name").and_then(Value::as_str) {
                    slot.name.push_str(name);
                }
                if let Some(args) = call.pointer("/function/arguments").and_then(Value::as_str) {
                    slot.arguments.push_str(args);
                }
            }
        }
        if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
            self.finish_reason = Some(reason.to_owned());
            self.saw_finish = true;
        }
    }

    fn finish(mut self) -> Completion {
        self.calls.sort_by_key(|(i, _)| *i);
        let tool_calls = self
            .calls
            .into_iter()
            .enumerate()
            .map(|(n, (_, mut call))| {
                if call.id.is_empty() {
                    call.id = format!("call_{n}");
                }
                call
            })
            .collect();
        Completion {
            content: self.content,
            tool_calls,
            finish_reason: self.finish_reason,
            usage: self.usage,
        }
    }
}

fn parse_full(value: &Value) -> Result<Completion, String> {
    let message = value
        .pointer("/choices/0/message")
        .ok_or("no choices in the response")?;
    let mut acc = StreamAccumulator::default();
    let mut delta = message.clone();
    if let Some(calls) = delta.get_mut("tool_calls").and_then(Value::as_array_mut) {
        for (i, call) in calls.iter_mut().enumerate() {
            call["index"] = json!(i);
        }
    }
    acc.absorb(&json!({"choices": [{"delta": delta, "finish_reason": value.pointer("/choices/0/finish_reason")}]}));
    if let Some(usage) = value.get("usage").filter(|u| u.is_object()) {
        acc.usage = Usage::from_openai(usage);
    }
    Ok(acc.finish())
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

/// The provider's error text, from `{"error":{"message":…}}` when it has that shape.
fn error_message(body: &str) -> String {
    let parsed: Option<Value> = serde_json::from_str(body).ok();
    let message = parsed
        .as_ref()
        .and_then(|v| {
            v.pointer("/error/message")
                .or_else(|| v.get("error"))
                .or_else(|| v.get("message"))
        })
        .map(|m| {
            m.as_str()
                .map(str::to_owned)
                .unwrap_or_else(|| m.to_string())
        })
        .unwrap_or_else(|| body.chars().take(300).collect());
    if message.trim().is_empty() {
        "(no details)".into()
    } else {
        message
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
mod tests {
    use super::*;

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
    fn streamed_tool_call_pieces_are_joined() {
        let mut acc = StreamAccumulator::default();
        for event in [
            json!({"choices":[{"delta":{"role":"assistant","content":"Let me "}}]}),
            json!({"choices":[{"delta":{"content":"check."}}]}),
            json!({"choices":[{"delta":{"tool_calls":[{"index":0,"id":"c1","type":"function","function":{"name":"terminal","arguments":"{\"comm"}}]}}]}),
            json!({"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"and\":\"ls\"}"}}]}}]}),
            json!({"choices":[{"delta":{},"finish_reason":"tool_calls"}]}),
        ] {
            acc.absorb(&event);
        }
        let c = acc.finish();
        assert_eq!(c.content, "Let me check.");
        assert_eq!(
            c.tool_calls,
            vec![ToolCall {
                id: "c1".into(),
                name: "terminal".into(),
                arguments: "{\"command\":\"ls\"}".into()
            }]
        );
        assert_eq!(c.finish_reason.as_deref(), Some("tool_calls"));
    }

    #[test]
    fn a_non_streamed_answer_is_understood() {
        let c = parse_full(&json!({"choices":[{"message":{"role":"assistant","content":"hi","tool_calls":[{"id":"x","type":"function","function":{"name":"terminal","arguments":"{}"}}]},"finish_reason":"tool_calls"}]})).unwrap();
        assert_eq!(c.content, "hi");
        assert_eq!(c.tool_calls[0].name, "terminal");
    }

    #[test]
    fn provider_errors_are_summarised() {
        assert_eq!(
            error_message(r#"{"error":{"message":"bad key"}}"#),
            "bad key"
        );
        assert_eq!(error_message("oops"), "oops");
        assert_eq!(error_message(""), "(no details)");
    }
}
