//! The Anthropic dialect: `POST /anthropic/v1/messages`, the Messages API. A request is
//! checked first (headers, then body, in [`checks`], refused the way the real API refuses
//! it, without using up the script); then the next scripted [`Reply`] is answered as the
//! API's SSE events (`message_start` … `message_stop`) with `"stream": true`, else as one
//! JSON message. Thinking blocks carry signatures this fake remembers (a later request
//! must pass them back); errors carry Anthropic's `{"type":"error","error":{…}}` body, and
//! every answer a `request-id` header. Also the helpers tests read Anthropic requests with.

mod checks;
#[cfg(test)]
mod tests;

use std::time::Duration;

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::{FakeLlm, Reply, halves, pieces, stream_frames, undelayed};

/// A request refused before it is answered: HTTP status, error type, message.
#[derive(Debug)]
struct Rejection {
    status: u16,
    kind: &'static str,
    message: String,
}

impl Rejection {
    /// A 400 `invalid_request_error`.
    fn invalid(message: impl Into<String>) -> Rejection {
        Rejection {
            status: 400,
            kind: "invalid_request_error",
            message: message.into(),
        }
    }
}

impl IntoResponse for Rejection {
    fn into_response(self) -> Response {
        error_response(self.status, self.kind, &self.message)
    }
}

/// Anthropic's error body with HTTP `status`.
fn error_response(status: u16, kind: &str, message: &str) -> Response {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let body = json!({"type": "error", "error": {"type": kind, "message": message}});
    (status, Json(body)).into_response()
}

/// The `error.type` Anthropic gives with an HTTP status.
fn error_kind(status: u16) -> &'static str {
    match status {
        400 => "invalid_request_error",
        401 => "authentication_error",
        402 => "billing_error",
        403 => "permission_error",
        404 => "not_found_error",
        413 => "request_too_large",
        429 => "rate_limit_error",
        529 => "overloaded_error",
        _ => "api_error",
    }
}

/// `POST /anthropic/v1/messages`.
pub(super) async fn messages(
    State(fake): State<FakeLlm>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let parsed = serde_json::from_slice::<Value>(&body);
    let request = match &parsed {
        Ok(request) => request.clone(),
        Err(_) => Value::String(String::from_utf8_lossy(&body).into_owned()),
    };
    let (index, verdict) = {
        let mut inner = fake.inner.lock().unwrap();
        let index = inner.record(request.clone(), &headers);
        let verdict = checks::check_headers(&headers)
            .and_then(|()| match &parsed {
                Ok(request) => checks::check_body(request, &inner.signatures),
                Err(e) => Err(Rejection::invalid(format!(
                    "There was an error parsing the body: {e}"
                ))),
            })
            // Only a request that passes uses up a scripted answer.
            .map(|()| inner.next_reply(&request));
        (index, verdict)
    };
    let mut response = match verdict {
        Err(rejection) => rejection.into_response(),
        Ok(reply) => answer(&fake, index, &request, reply).await,
    };
    let id = HeaderValue::from_str(&format!("req_fake{}", index + 1)).unwrap();
    response.headers_mut().insert("request-id", id);
    response
}

/// One content block of an answer.
enum Block {
    Text(String),
    Thinking {
        thinking: String,
        signature: String,
    },
    /// `input` is the JSON text of the arguments (verbatim: maybe not JSON at all).
    ToolUse {
        id: String,
        name: String,
        input: String,
    },
}

impl Block {
    /// As a block of a JSON (not streamed) message.
    fn to_json(&self) -> Value {
        match self {
            Block::Text(text) => json!({"type": "text", "text": text}),
            Block::Thinking {
                thinking,
                signature,
            } => json!({"type": "thinking", "thinking": thinking, "signature": signature}),
            Block::ToolUse { id, name, input } => {
                // Arguments that are not JSON are handed over as a string.
                let input = serde_json::from_str(input).unwrap_or_else(|_| json!(input));
                json!({"type": "tool_use", "id": id, "name": name, "input": input})
            }
        }
    }
}

/// The blocks of the answer to request `index`, and its `stop_reason`.
fn blocks_for(reply: &Reply, index: usize) -> (Vec<Block>, &'static str) {
    let n = index + 1;
    let tool = |i: usize, name: &str, input: String| Block::ToolUse {
        id: format!("toolu_fake{n}_{i}"),
        name: name.to_owned(),
        input,
    };
    let thought = |thinking: &str| Block::Thinking {
        thinking: thinking.to_owned(),
        signature: format!("sig-fake{n}"),
    };
    match reply {
        Reply::Text(text) | Reply::Paced { text, .. } => {
            (vec![Block::Text(text.clone())], "end_turn")
        }
        Reply::StreamError { after_text } => (vec![Block::Text(after_text.clone())], "end_turn"),
        Reply::Truncated(text) => (vec![Block::Text(text.clone())], "max_tokens"),
        Reply::ToolCall { name, arguments } => {
            (vec![tool(0, name, arguments.to_string())], "tool_use")
        }
        Reply::ToolCalls(calls) => (
            calls
                .iter()
                .enumerate()
                .map(|(i, (name, arguments))| tool(i, name, arguments.to_string()))
                .collect(),
            "tool_use",
        ),
        Reply::BadArguments {
            name,
            arguments_text,
        } => (vec![tool(0, name, arguments_text.clone())], "tool_use"),
        Reply::Thinking { thinking, text } => (
            vec![thought(thinking), Block::Text(text.clone())],
            "end_turn",
        ),
        Reply::ThinkingThenTool {
            thinking,
            name,
            arguments,
        } => (
            vec![thought(thinking), tool(1, name, arguments.to_string())],
            "tool_use",
        ),
        Reply::Error { .. }
        | Reply::ErrorSaying { .. }
        | Reply::Delayed(..)
        | Reply::ContextOverflow
        | Reply::Computed(_) => {
            unreachable!("handled before the blocks")
        }
    }
}

/// The fixed usage of every answer: 100 tokens in (30 written to the cache, 40 read from
/// it), `output` out.
fn usage(output: u64) -> Value {
    json!({"input_tokens": 100, "cache_creation_input_tokens": 30, "cache_read_input_tokens": 40,
           "output_tokens": output})
}

/// Answer a request that passed the checks with `reply` (the echo when the script is
/// empty).
async fn answer(fake: &FakeLlm, index: usize, request: &Value, reply: Option<Reply>) -> Response {
    let reply = reply
        .unwrap_or_else(|| Reply::Text(format!("echo: {}", anthropic_last_user_text(request))));
    let (delay, reply) = undelayed(reply);
    let stream = request["stream"] == Value::Bool(true);
    let failure = match &reply {
        Reply::Error {
            status,
            retry_after,
        } => Some((*status, format!("scripted failure {status}"), *retry_after)),
        Reply::ErrorSaying { status, message } => Some((*status, message.clone(), None)),
        Reply::ContextOverflow => Some((
            400,
            "prompt is too long: 9000 tokens > 8192 maximum".to_owned(),
            None,
        )),
        Reply::StreamError { .. } if !stream => Some((529, "Overloaded".to_owned(), None)),
        _ => None,
    };
    if let Some((status, message, retry_after)) = failure {
        tokio::time::sleep(delay).await;
        let mut response = error_response(status, error_kind(status), &message);
        if let Some(secs) = retry_after {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        return response;
    }
    let (blocks, stop_reason) = blocks_for(&reply, index);
    {
        let mut inner = fake.inner.lock().unwrap();
        for block in &blocks {
            if let Block::Thinking { signature, .. } = block {
                inner.signatures.insert(signature.clone());
            }
        }
    }
    let id = format!("msg_fake{}", index + 1);
    let model = request["model"].clone();
    if !stream {
        tokio::time::sleep(delay).await;
        fake.finished(index);
        let content: Vec<Value> = blocks.iter().map(Block::to_json).collect();
        return Json(
            json!({"id": id, "type": "message", "role": "assistant", "model": model,
                           "content": content, "stop_reason": stop_reason,
                           "stop_sequence": null, "usage": usage(7)}),
        )
        .into_response();
    }
    let pace = match reply {
        Reply::Paced { pieces, every, .. } => Some((pieces, every)),
        _ => None,
    };
    let broken = matches!(reply, Reply::StreamError { .. });
    let start = json!({"type": "message_start", "message": {
        "id": id, "type": "message", "role": "assistant", "model": model, "content": [],
        "stop_reason": null, "stop_sequence": null, "usage": usage(1)}});
    let mut frames = vec![
        (delay, event(start)),
        (Duration::ZERO, event(json!({"type": "ping"}))),
    ];
    for (i, block) in blocks.iter().enumerate() {
        stream_block(&mut frames, i, block, pace);
        if broken {
            // The block is never stopped: an error event, and the stream ends.
            let error = json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}});
            frames.push((Duration::ZERO, event(error)));
            return stream_frames(fake, index, frames, Duration::ZERO);
        }
        let wait = pace.map_or(Duration::ZERO, |(_, every)| every);
        let stop = json!({"type": "content_block_stop", "index": i});
        frames.push((wait, event(stop)));
    }
    let delta = json!({"type": "message_delta",
                       "delta": {"stop_reason": stop_reason, "stop_sequence": null},
                       "usage": {"output_tokens": 7}});
    frames.push((Duration::ZERO, event(delta)));
    frames.push((Duration::ZERO, event(json!({"type": "message_stop"}))));
    stream_frames(fake, index, frames, Duration::ZERO)
}

/// An SSE event named after its data's `type`.
fn event(data: Value) -> String {
    format!(
        "event: {}\ndata: {data}\n\n",
        data["type"].as_str().unwrap_or("message")
    )
}

/// `text` as delta pieces: `count` of them paced, else of at most 400 chars and two at least
/// (when there are two chars); one empty piece for an empty text.
fn delta_pieces(text: &str, count: Option<usize>) -> Vec<String> {
    let chars = text.chars().count();
    let size = match count {
        Some(count) => chars.div_ceil(count.max(1)),
        None => chars.div_ceil(2).min(400),
    };
    let mut parts = pieces(text, size);
    if parts.is_empty() {
        parts.push(String::new());
    }
    parts
}

/// The `content_block_start` and `content_block_delta` events of block `i` (not its stop).
fn stream_block(
    frames: &mut Vec<(Duration, String)>,
    i: usize,
    block: &Block,
    pace: Option<(usize, Duration)>,
) {
    let now = Duration::ZERO;
    let start = |block: Value| {
        event(json!({"type": "content_block_start", "index": i, "content_block": block}))
    };
    let delta =
        |delta: Value| event(json!({"type": "content_block_delta", "index": i, "delta": delta}));
    match block {
        Block::Text(text) => {
            frames.push((now, start(json!({"type": "text", "text": ""}))));
            let every = pace.map_or(now, |(_, every)| every);
            for (k, piece) in delta_pieces(text, pace.map(|(n, _)| n))
                .into_iter()
                .enumerate()
            {
                let wait = if k == 0 { now } else { every };
                frames.push((wait, delta(json!({"type": "text_delta", "text": piece}))));
            }
        }
        Block::Thinking {
            thinking,
            signature,
        } => {
            frames.push((now, start(json!({"type": "thinking", "thinking": ""}))));
            for piece in delta_pieces(thinking, None) {
                frames.push((
                    now,
                    delta(json!({"type": "thinking_delta", "thinking": piece})),
                ));
            }
            frames.push((
                now,
                delta(json!({"type": "signature_delta", "signature": signature})),
            ));
        }
        Block::ToolUse { id, name, input } => {
            frames.push((
                now,
                start(json!({"type": "tool_use", "id": id, "name": name, "input": {}})),
            ));
            // The first delta is empty, as the real API sends it; then the two halves.
            let (a, b) = halves(input);
            for part in ["", a, b] {
                frames.push((
                    now,
                    delta(json!({"type": "input_json_delta", "partial_json": part})),
                ));
            }
        }
    }
}

/// The last message with role `user`.
fn last_user(request: &Value) -> Option<&Value> {
    request["messages"]
        .as_array()?
        .iter()
        .rev()
        .find(|m| m["role"] == "user")
}

/// The text of a string content, or of its `text` blocks (joined by newlines).
fn content_text(content: &Value) -> String {
    match content {
        Value::String(text) => text.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .filter(|b| b["type"] == "text")
            .filter_map(|b| b["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// The text of the last user message of an Anthropic request: its string content, or the
/// text of its last `text` block ("" when it has none: `tool_result`s are not user text).
pub fn anthropic_last_user_text(request: &Value) -> String {
    let Some(message) = last_user(request) else {
        return String::new();
    };
    match &message["content"] {
        Value::String(text) => text.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .rev()
            .find(|b| b["type"] == "text")
            .and_then(|b| b["text"].as_str())
            .unwrap_or_default()
            .to_owned(),
        _ => String::new(),
    }
}

/// The `tool_result` blocks of the last user message of an Anthropic request:
/// (`tool_use_id`, the text of its content) each, in order.
pub fn anthropic_tool_results(request: &Value) -> Vec<(String, String)> {
    let Some(blocks) = last_user(request).and_then(|m| m["content"].as_array()) else {
        return Vec::new();
    };
    blocks
        .iter()
        .filter(|b| b["type"] == "tool_result")
        .map(|b| {
            let id = b["tool_use_id"].as_str().unwrap_or_default().to_owned();
            (id, content_text(&b["content"]))
        })
        .collect()
}

/// How many blocks of an Anthropic request carry `cache_control`: system blocks, tools,
/// message content blocks (and the blocks inside `tool_result`s).
pub fn cache_control_count(request: &Value) -> usize {
    fn marked(block: &Value) -> usize {
        usize::from(block.get("cache_control").is_some_and(|c| !c.is_null()))
    }
    let list = |value: &Value| value.as_array().cloned().unwrap_or_default();
    let mut count: usize = list(&request["system"]).iter().map(marked).sum();
    count += list(&request["tools"]).iter().map(marked).sum::<usize>();
    for message in list(&request["messages"]) {
        for block in list(&message["content"]) {
            count += marked(&block);
            count += list(&block["content"]).iter().map(marked).sum::<usize>();
        }
    }
    count
}
