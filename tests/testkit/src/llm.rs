//! A fake OpenAI-compatible LLM: `POST /v1/chat/completions` streaming SSE deltas the way
//! OpenAI does. Answers come from a script (text, tool calls, HTTP errors, delays); when the
//! script is empty it answers "echo: <last user text>". Every request body is recorded, and
//! streams dropped by the client before they finished are counted.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use serde_json::{Value, json};

/// One scripted answer.
#[derive(Debug, Clone)]
pub enum Reply {
    Text(String),
    /// A call of `name` with JSON `arguments`.
    ToolCall {
        name: String,
        arguments: Value,
    },
    /// Text cut off by the output limit (`finish_reason: length`).
    Truncated(String),
    /// Several tool calls in one step: (name, arguments) each.
    ToolCalls(Vec<(String, Value)>),
    /// An HTTP error status (with `Retry-After` seconds when given).
    Error {
        status: u16,
        retry_after: Option<u64>,
    },
    /// An HTTP error status whose body's `error.message` is `message` (what a provider
    /// says about a bad key, for one).
    ErrorSaying {
        status: u16,
        message: String,
    },
    /// Wait, then answer (before the headers: the client is connected and hears nothing).
    Delayed(Duration, Box<Reply>),
    /// A text written slowly: `pieces` of it, one every `every`.
    Paced {
        text: String,
        pieces: usize,
        every: Duration,
    },
}

impl Reply {
    pub fn text(t: impl Into<String>) -> Reply {
        Reply::Text(t.into())
    }
    pub fn terminal(command: &str) -> Reply {
        Reply::ToolCall {
            name: "terminal".into(),
            arguments: json!({"command": command}),
        }
    }
}

/// When one request arrived and when its answer stream ended (same index as
/// [`FakeLlm::requests`]).
#[derive(Debug, Clone, Copy)]
pub struct Timing {
    pub arrived: Instant,
    /// The last event was handed to the server; `None` for error answers and for streams
    /// not finished (yet, or ever).
    pub finished: Option<Instant>,
}

#[derive(Default)]
struct Inner {
    script: VecDeque<Reply>,
    requests: Vec<Value>,
    timings: Vec<Timing>,
    /// What `/audio/transcriptions` answers (`None`: a 500).
    transcript: Option<String>,
    transcriptions: Vec<Transcription>,
}

/// One `/audio/transcriptions` request, from its multipart form.
#[derive(Debug, Clone, Default)]
pub struct Transcription {
    pub authorization: Option<String>,
    pub model: Option<String>,
    pub response_format: Option<String>,
    /// The bytes of the `file` part.
    pub audio: Vec<u8>,
}

#[derive(Clone)]
pub struct FakeLlm {
    inner: Arc<Mutex<Inner>>,
    dropped_streams: Arc<AtomicUsize>,
    pub addr: SocketAddr,
}

impl FakeLlm {
    pub async fn start() -> FakeLlm {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let fake = FakeLlm {
            inner: Default::default(),
            dropped_streams: Default::default(),
            addr,
        };
        let app = Router::new()
            .route("/v1/chat/completions", post(complete))
            .route("/v1/audio/transcriptions", post(transcribe))
            .with_state(fake.clone());
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        fake
    }

    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// Answer speech-to-text requests with `text`.
    pub fn transcribe_as(&self, text: &str) {
        self.inner.lock().unwrap().transcript = Some(text.to_owned());
    }

    pub fn transcriptions(&self) -> Vec<Transcription> {
        self.inner.lock().unwrap().transcriptions.clone()
    }

    pub fn push(&self, reply: Reply) {
        self.inner.lock().unwrap().script.push_back(reply);
    }

    pub fn requests(&self) -> Vec<Value> {
        self.inner.lock().unwrap().requests.clone()
    }

    /// Arrival and end of each request's answer, in request order.
    pub fn timings(&self) -> Vec<Timing> {
        self.inner.lock().unwrap().timings.clone()
    }

    /// Streams the client closed before they were complete.
    pub fn dropped_streams(&self) -> usize {
        self.dropped_streams.load(Ordering::SeqCst)
    }
}

/// The content of the last user message in a request (text, or parts).
pub fn last_user_content(request: &Value) -> Value {
    request["messages"]
        .as_array()
        .and_then(|m| m.iter().rev().find(|m| m["role"] == "user"))
        .map(|m| m["content"].clone())
        .unwrap_or_default()
}

/// The bytes of the `n`-th image part (a `data:` URL) of the last user message.
pub fn image_bytes(request: &Value, n: usize) -> Option<Vec<u8>> {
    use base64::Engine;
    let content = last_user_content(request);
    let parts = content.as_array()?;
    let url = parts.iter().filter(|p| p["type"] == "image_url").nth(n)?["image_url"]["url"]
        .as_str()?
        .to_owned();
    let data = url.split_once(";base64,")?.1;
    base64::engine::general_purpose::STANDARD.decode(data).ok()
}

/// The text of the last user message of a request.
pub fn last_user_text(request: &Value) -> String {
    request["messages"]
        .as_array()
        .and_then(|m| m.iter().rev().find(|m| m["role"] == "user"))
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default()
        .to_owned()
}

/// `POST /audio/transcriptions` (OpenAI's form: `file`, `model`, `response_format`).
async fn transcribe(
    State(fake): State<FakeLlm>,
    headers: axum::http::HeaderMap,
    body: Bytes,
) -> Response {
    let header = |name: header::HeaderName| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    let mut call = Transcription {
        authorization: header(header::AUTHORIZATION),
        ..Default::default()
    };
    let content_type = header(header::CONTENT_TYPE).unwrap_or_default();
    for part in crate::multipart::parse(&content_type, &body) {
        match part.name.as_str() {
            "file" => call.audio = part.bytes.clone(),
            "model" => call.model = Some(part.text()),
            "response_format" => call.response_format = Some(part.text()),
            _ => {}
        }
    }
    let mut inner = fake.inner.lock().unwrap();
    let format = call.response_format.clone();
    inner.transcriptions.push(call);
    match (inner.transcript.clone(), format.as_deref()) {
        (None, _) => (StatusCode::INTERNAL_SERVER_ERROR, "transcription failed").into_response(),
        (Some(text), Some("text")) => (StatusCode::OK, text).into_response(),
        (Some(text), _) => Json(json!({"text": text})).into_response(),
    }
}

async fn complete(State(fake): State<FakeLlm>, Json(body): Json<Value>) -> Response {
    let (reply, index) = {
        let mut inner = fake.inner.lock().unwrap();
        inner.requests.push(body.clone());
        inner.timings.push(Timing {
            arrived: Instant::now(),
            finished: None,
        });
        (inner.script.pop_front(), inner.timings.len() - 1)
    };
    let mut reply =
        reply.unwrap_or_else(|| Reply::Text(format!("echo: {}", last_user_text(&body))));
    let mut delay = Duration::ZERO;
    while let Reply::Delayed(d, inner) = reply {
        delay += d;
        reply = *inner;
    }
    // A paced text: the same events, each after `every`.
    let mut pace = Duration::ZERO;
    if let Reply::Paced {
        text,
        pieces,
        every,
    } = &reply
    {
        pace = *every;
        let chars: Vec<char> = text.chars().collect();
        let size = chars.len().div_ceil((*pieces).max(1)).max(1);
        let mut events = Vec::new();
        for piece in chars.chunks(size) {
            events.push(
                json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": "fake",
                       "choices": [{"index": 0, "delta": {"content": piece.iter().collect::<String>()}, "finish_reason": null}]})
                .to_string(),
            );
        }
        events.push(
            json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": "fake",
                   "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
            .to_string(),
        );
        return stream_events(&fake, index, events, delay, pace);
    }
    if let Reply::ErrorSaying { status, message } = reply {
        tokio::time::sleep(delay).await;
        let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        return (status, Json(json!({"error": {"message": message}}))).into_response();
    }
    if let Reply::Error {
        status,
        retry_after,
    } = reply
    {
        tokio::time::sleep(delay).await;
        let mut response = (StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
            Json(json!({"error": {"message": format!("scripted failure {status}"), "type": "server_error"}}))).into_response();
        if let Some(secs) = retry_after {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, secs.to_string().parse().unwrap());
        }
        return response;
    }
    let mut events = events_for(&reply);
    // With `stream_options.include_usage`, a last chunk says what the call took (fixed
    // numbers: each call 100 tokens in, 40 of them cached, and 7 out).
    if body.pointer("/stream_options/include_usage") == Some(&Value::Bool(true)) {
        let done = events.pop();
        events.push(
            json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": "fake", "choices": [],
                   "usage": {"prompt_tokens": 100, "completion_tokens": 7, "total_tokens": 107,
                             "prompt_tokens_details": {"cached_tokens": 40}}})
            .to_string(),
        );
        events.extend(done);
    }
    stream_events(&fake, index, events, delay, pace)
}

/// Serve `events` as an SSE stream: the first after `delay`, each later one after `pace`.
fn stream_events(
    fake: &FakeLlm,
    index: usize,
    events: Vec<String>,
    delay: Duration,
    pace: Duration,
) -> Response {
    let guard = DropCounter {
        counter: fake.dropped_streams.clone(),
        finished: false,
        timing: Some((fake.inner.clone(), index)),
    };
    let stream = futures_util::stream::unfold(
        (events.into_iter(), delay, guard),
        move |(mut events, delay, mut guard): (
            std::vec::IntoIter<String>,
            Duration,
            DropCounter,
        )| async move {
            if !delay.is_zero() {
                // The delay happens inside the stream: the client is connected and waiting.
                tokio::time::sleep(delay).await;
            }
            match events.next() {
                Some(event) => Some((
                    Ok::<Bytes, Infallible>(Bytes::from(format!("data: {event}\n\n"))),
                    (events, pace, guard),
                )),
                None => {
                    guard.disarm();
                    None
                }
            }
        },
    );
    Response::builder()
        .header(header::CONTENT_TYPE, "text/event-stream")
        .body(Body::from_stream(stream))
        .unwrap()
}

/// Counts a stream dropped before its end (the client went away).
struct DropCounter {
    counter: Arc<AtomicUsize>,
    finished: bool,
    /// Where to note the end of the stream: the request's [`Timing`].
    timing: Option<(Arc<Mutex<Inner>>, usize)>,
}

impl DropCounter {
    fn disarm(&mut self) {
        self.finished = true;
        if let Some((inner, index)) = self.timing.take() {
            inner.lock().unwrap().timings[index].finished = Some(Instant::now());
        }
    }
}

impl Drop for DropCounter {
    fn drop(&mut self) {
        if !self.finished {
            self.counter.fetch_add(1, Ordering::SeqCst);
        }
    }
}

fn events_for(reply: &Reply) -> Vec<String> {
    let chunk = |delta: Value, finish: Value| {
        json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": "fake",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
        .to_string()
    };
    let mut events = vec![chunk(json!({"role": "assistant"}), Value::Null)];
    match reply {
        Reply::Text(text) => {
            // Several deltas, split on char boundaries.
            let chars: Vec<char> = text.chars().collect();
            for piece in chars.chunks(400) {
                events.push(chunk(
                    json!({"content": piece.iter().collect::<String>()}),
                    Value::Null,
                ));
            }
            events.push(chunk(json!({}), json!("stop")));
        }
        Reply::Truncated(text) => {
            events.push(chunk(json!({"content": text}), Value::Null));
            events.push(chunk(json!({}), json!("length")));
        }
        Reply::ToolCalls(calls) => {
            for (index, (name, arguments)) in calls.iter().enumerate() {
                events.push(chunk(json!({"tool_calls": [{"index": index, "id": format!("call_{index}"), "type": "function", "function": {"name": name, "arguments": arguments.to_string()}}]}), Value::Null));
            }
            events.push(chunk(json!({}), json!("tool_calls")));
        }
        Reply::ToolCall { name, arguments } => {
            let args = arguments.to_string();
            let (a, b) = args.split_at(args.len() / 2);
            events.push(chunk(json!({"tool_calls": [{"index": 0, "id": "call_1", "type": "function", "function": {"name": name, "arguments": a}}]}), Value::Null));
            events.push(chunk(
                json!({"tool_calls": [{"index": 0, "function": {"arguments": b}}]}),
                Value::Null,
            ));
            events.push(chunk(json!({}), json!("tool_calls")));
        }
        Reply::Error { .. }
        | Reply::ErrorSaying { .. }
        | Reply::Delayed(..)
        | Reply::Paced { .. } => {
            unreachable!("handled before streaming")
        }
    }
    events.push("[DONE]".into());
    events
}
