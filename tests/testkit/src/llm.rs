//! A fake LLM on 127.0.0.1 speaking two dialects from one script: OpenAI's
//! `POST /v1/chat/completions` (SSE deltas, in [`openai`]) and Anthropic's
//! `POST /anthropic/v1/messages` (the Messages API, validated the way Anthropic does, SSE
//! events or one JSON message, in [`anthropic`]). Both answer from the same queue of
//! [`Reply`] values (text, tool calls, thinking, HTTP errors, delays, broken streams); when
//! the script is empty they answer "echo: <last user text>". This module owns the script,
//! what is recorded of every request (body, headers, arrival, end of its answer), the SSE
//! plumbing that counts streams the client dropped, and `POST /v1/audio/transcriptions`.

mod anthropic;
mod openai;
#[cfg(test)]
mod tests;

use std::collections::{HashSet, VecDeque};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use serde_json::{Value, json};

pub use anthropic::{anthropic_last_user_text, anthropic_tool_results, cache_control_count};

/// One scripted answer.
#[derive(Debug, Clone)]
pub enum Reply {
    Text(String),
    /// A call of `name` with JSON `arguments`.
    ToolCall {
        name: String,
        arguments: Value,
    },
    /// Text cut off by the output limit (`finish_reason: length`, `stop_reason: max_tokens`).
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
    /// Wait, then answer (a stream: inside it, after the headers, so the client is
    /// connected and hears nothing; an error or a JSON message: before the headers).
    Delayed(Duration, Box<Reply>),
    /// A text written slowly: `pieces` of it, one every `every`.
    Paced {
        text: String,
        pieces: usize,
        every: Duration,
    },
    /// Reasoning, then a text. Anthropic: a signed `thinking` block, then a `text` block;
    /// OpenAI: `reasoning_content` deltas, then `content` deltas.
    Thinking {
        thinking: String,
        text: String,
    },
    /// Reasoning, then a call of `name` with JSON `arguments`.
    ThinkingThenTool {
        thinking: String,
        name: String,
        arguments: Value,
    },
    /// The prompt is over the context window: the provider's HTTP 400 saying so.
    ContextOverflow,
    /// A stream that breaks: `after_text`, then an error event, and no proper end.
    /// (Anthropic without `stream`: a 529 `overloaded_error`.)
    StreamError {
        after_text: String,
    },
    /// A call of `name` whose arguments text is `arguments_text` verbatim (maybe not JSON).
    BadArguments {
        name: String,
        arguments_text: String,
    },
    /// The answer made from the request when it arrives (ids the test cannot know ahead,
    /// such as a background process's).
    Computed(Responder),
}

/// Makes an answer from a request body.
#[derive(Clone)]
pub struct Responder(pub Arc<dyn Fn(&Value) -> Reply + Send + Sync>);

impl std::fmt::Debug for Responder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Responder(..)")
    }
}

impl Reply {
    /// An answer computed from the request when it arrives.
    pub fn computed(make: impl Fn(&Value) -> Reply + Send + Sync + 'static) -> Reply {
        Reply::Computed(Responder(Arc::new(make)))
    }
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
    /// The last event was handed to the server (or the JSON message, on Anthropic without
    /// `stream`); `None` for error answers and for streams not finished (yet, or ever).
    pub finished: Option<Instant>,
}

#[derive(Default)]
struct Inner {
    script: VecDeque<Reply>,
    requests: Vec<Value>,
    /// Each request's headers, lower-cased names (same index as `requests`).
    headers: Vec<Vec<(String, String)>>,
    timings: Vec<Timing>,
    /// The `signature`s of the thinking blocks this fake handed out (Anthropic).
    signatures: HashSet<String>,
    /// What `/audio/transcriptions` answers (`None`: a 500).
    transcript: Option<String>,
    transcriptions: Vec<Transcription>,
    /// How `/audio/speech` answers.
    voice: Voice,
    speeches: Vec<Speech>,
    /// What an empty script answers (the echo when `None`).
    default: Option<Responder>,
    /// Until when every request is answered with this HTTP status (a provider outage).
    down: Option<(Instant, u16)>,
}

impl Inner {
    /// The next scripted answer for `body` (a computed one made now): the outage's error
    /// while the provider is down, then the script, then the default.
    fn next_reply(&mut self, body: &Value) -> Option<Reply> {
        if let Some((until, status)) = self.down {
            if Instant::now() < until {
                return Some(Reply::Error {
                    status,
                    retry_after: None,
                });
            }
            self.down = None;
        }
        match self.script.pop_front() {
            Some(Reply::Computed(Responder(make))) => Some(make(body)),
            Some(reply) => Some(reply),
            None => self.default.as_ref().map(|Responder(make)| make(body)),
        }
    }

    /// Note one request (body, headers, arrival); its index.
    fn record(&mut self, body: Value, headers: &HeaderMap) -> usize {
        self.requests.push(body);
        self.headers.push(
            headers
                .iter()
                .map(|(name, value)| {
                    let value = String::from_utf8_lossy(value.as_bytes()).into_owned();
                    (name.as_str().to_ascii_lowercase(), value)
                })
                .collect(),
        );
        self.timings.push(Timing {
            arrived: Instant::now(),
            finished: None,
        });
        self.timings.len() - 1
    }
}

/// How the fake `/audio/speech` answers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Voice {
    /// In the format asked for: Ogg/Opus for `opus`, else MP3.
    #[default]
    AsAsked,
    /// MP3, whatever was asked (a provider that ignores `response_format`).
    AlwaysMp3,
    /// HTTP 500.
    Failing,
}

/// One `/audio/speech` request (its JSON body and key).
#[derive(Debug, Clone)]
pub struct Speech {
    pub authorization: Option<String>,
    pub body: Value,
}

/// The start of an Ogg/Opus file: an Ogg page holding the `OpusHead` packet, then audio
/// bytes (enough for a client that checks what it was given).
pub fn ogg_opus(extra: usize) -> Vec<u8> {
    let mut bytes = b"OggS\x00\x02".to_vec();
    bytes.extend_from_slice(&[0; 20]);
    bytes.extend_from_slice(&[1, 19]);
    bytes.extend_from_slice(b"OpusHead\x01\x01\x38\x01\x80\xbb\x00\x00\x00\x00\x00");
    bytes.extend((0..extra).map(|i| (i % 251) as u8));
    bytes
}

/// The start of an MP3 file (an ID3 tag, then frames).
pub fn mp3(extra: usize) -> Vec<u8> {
    let mut bytes = b"ID3\x04\x00\x00\x00\x00\x00\x00".to_vec();
    bytes.extend_from_slice(&[0xff, 0xfb, 0x90, 0x64]);
    bytes.extend((0..extra).map(|i| (i % 251) as u8));
    bytes
}

/// One `/audio/transcriptions` request, from its multipart form.
#[derive(Debug, Clone, Default)]
pub struct Transcription {
    pub authorization: Option<String>,
    pub model: Option<String>,
    pub response_format: Option<String>,
    pub language: Option<String>,
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
            .route("/v1/chat/completions", post(openai::complete))
            .route("/v1/models", axum::routing::get(models))
            .route("/v1/audio/transcriptions", post(transcribe))
            .route("/v1/audio/speech", post(speak))
            .route("/anthropic/v1/messages", post(anthropic::messages))
            .with_state(fake.clone());
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        fake
    }

    /// The OpenAI-compatible base URL (`…/v1`; the client appends `/chat/completions`).
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// The Anthropic base URL (`…/anthropic`; the client appends `/v1/messages`).
    pub fn anthropic_base_url(&self) -> String {
        format!("http://{}/anthropic", self.addr)
    }

    /// Answer speech-to-text requests with `text`.
    pub fn transcribe_as(&self, text: &str) {
        self.inner.lock().unwrap().transcript = Some(text.to_owned());
    }

    pub fn transcriptions(&self) -> Vec<Transcription> {
        self.inner.lock().unwrap().transcriptions.clone()
    }

    /// How `/audio/speech` answers from now on.
    pub fn speak_as(&self, voice: Voice) {
        self.inner.lock().unwrap().voice = voice;
    }

    /// The `/audio/speech` requests so far.
    pub fn speeches(&self) -> Vec<Speech> {
        self.inner.lock().unwrap().speeches.clone()
    }

    pub fn push(&self, reply: Reply) {
        self.inner.lock().unwrap().script.push_back(reply);
    }

    /// Answer every request the script does not with `make(request)` (instead of the echo).
    pub fn answer_by_default(&self, make: impl Fn(&Value) -> Reply + Send + Sync + 'static) {
        self.inner.lock().unwrap().default = Some(Responder(Arc::new(make)));
    }

    /// The provider is down for `period`: every request meanwhile gets HTTP `status`.
    pub fn go_down(&self, period: Duration, status: u16) {
        self.inner.lock().unwrap().down = Some((Instant::now() + period, status));
    }

    /// Every request body to either dialect, in arrival order (Anthropic requests refused
    /// by validation included; a body that is not JSON is kept as a JSON string).
    pub fn requests(&self) -> Vec<Value> {
        self.inner.lock().unwrap().requests.clone()
    }

    /// Each request's headers, names lower-cased (same index as [`FakeLlm::requests`]).
    pub fn headers(&self) -> Vec<Vec<(String, String)>> {
        self.inner.lock().unwrap().headers.clone()
    }

    /// The value of header `name` (any case) of request `index`, if it was sent.
    pub fn header(&self, index: usize, name: &str) -> Option<String> {
        let inner = self.inner.lock().unwrap();
        let name = name.to_ascii_lowercase();
        inner
            .headers
            .get(index)?
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.clone())
    }

    /// Arrival and end of each request's answer, in request order.
    pub fn timings(&self) -> Vec<Timing> {
        self.inner.lock().unwrap().timings.clone()
    }

    /// Streams the client closed before they were complete.
    pub fn dropped_streams(&self) -> usize {
        self.dropped_streams.load(Ordering::SeqCst)
    }

    /// Note that the answer to request `index` was handed over whole.
    fn finished(&self, index: usize) {
        self.inner.lock().unwrap().timings[index].finished = Some(Instant::now());
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
async fn transcribe(State(fake): State<FakeLlm>, headers: HeaderMap, body: Bytes) -> Response {
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
            "language" => call.language = Some(part.text()),
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

/// `POST /audio/speech` (OpenAI's JSON: `model`, `voice`, `input`, `response_format`).
async fn speak(State(fake): State<FakeLlm>, headers: HeaderMap, body: Bytes) -> Response {
    let Ok(body) = serde_json::from_slice::<Value>(&body) else {
        return (StatusCode::BAD_REQUEST, "not JSON").into_response();
    };
    let mut inner = fake.inner.lock().unwrap();
    let format = body["response_format"].as_str().unwrap_or("mp3").to_owned();
    let missing = ["model", "voice", "input"]
        .iter()
        .any(|k| !body[*k].is_string());
    inner.speeches.push(Speech {
        authorization: headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned),
        body,
    });
    if missing {
        return (
            StatusCode::BAD_REQUEST,
            "model, voice and input are required",
        )
            .into_response();
    }
    let (content_type, bytes) = match (inner.voice, format.as_str()) {
        (Voice::Failing, _) => {
            return (StatusCode::INTERNAL_SERVER_ERROR, "speech failed").into_response();
        }
        (Voice::AsAsked, "opus") => ("audio/ogg", ogg_opus(2_000)),
        _ => ("audio/mpeg", mp3(2_000)),
    };
    ([(header::CONTENT_TYPE, content_type)], bytes).into_response()
}

/// A reply without its `Delayed` wrappers, and their delays added up.
fn undelayed(mut reply: Reply) -> (Duration, Reply) {
    let mut delay = Duration::ZERO;
    while let Reply::Delayed(d, inner) = reply {
        delay += d;
        reply = *inner;
    }
    (delay, reply)
}

/// `text` in pieces of at most `size` chars (split on char boundaries; none for an empty
/// text).
fn pieces(text: &str, size: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    chars
        .chunks(size.max(1))
        .map(|piece| piece.iter().collect())
        .collect()
}

/// `text` cut in two at (about) its middle, on a char boundary.
fn halves(text: &str) -> (&str, &str) {
    let mut middle = text.len() / 2;
    while !text.is_char_boundary(middle) {
        middle += 1;
    }
    text.split_at(middle)
}

/// Serve `frames` (whole SSE events) as a stream: each after its wait, then the end of the
/// stream after `tail`. A stream dropped before its end is counted; one served to its end
/// notes when in the request's [`Timing`].
fn stream_frames(
    fake: &FakeLlm,
    index: usize,
    frames: Vec<(Duration, String)>,
    tail: Duration,
) -> Response {
    let guard = DropCounter {
        counter: fake.dropped_streams.clone(),
        finished: false,
        timing: Some((fake.inner.clone(), index)),
    };
    let stream = futures_util::stream::unfold(
        (frames.into_iter(), guard),
        move |(mut frames, mut guard): (std::vec::IntoIter<(Duration, String)>, DropCounter)| async move {
            match frames.next() {
                Some((wait, frame)) => {
                    // The wait happens inside the stream: the client is connected and waiting.
                    if !wait.is_zero() {
                        tokio::time::sleep(wait).await;
                    }
                    Some((Ok::<Bytes, Infallible>(Bytes::from(frame)), (frames, guard)))
                }
                None => {
                    if !tail.is_zero() {
                        tokio::time::sleep(tail).await;
                    }
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

/// `GET /v1/models`: the one model the test homes name (`fake-model`), as OpenAI lists them
/// (with or without a key, as a local server does).
async fn models() -> axum::Json<serde_json::Value> {
    axum::Json(serde_json::json!({
        "object": "list",
        "data": [{"id": "fake-model", "object": "model", "owned_by": "testkit"}],
    }))
}
