//! The OpenAI dialect: `POST /v1/chat/completions` answering each scripted [`Reply`] as
//! OpenAI's SSE chunks (`data: {chat.completion.chunk}` … `data: [DONE]`), reasoning as
//! `reasoning_content` deltas, the usage chunk when `stream_options.include_usage` asks,
//! and errors as `{"error":{…}}` bodies.

use std::time::Duration;

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::{FakeLlm, Reply, halves, last_user_text, pieces, stream_frames, undelayed};

pub(super) async fn complete(
    State(fake): State<FakeLlm>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Response {
    let (reply, index) = {
        let mut inner = fake.inner.lock().unwrap();
        let index = inner.record(body.clone(), &headers);
        (inner.next_reply(&body), index)
    };
    let reply = reply.unwrap_or_else(|| Reply::Text(format!("echo: {}", last_user_text(&body))));
    let (delay, reply) = undelayed(reply);
    let error = |status: u16, body: Value| {
        let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        (status, Json(body)).into_response()
    };
    match reply {
        // A paced text: the same events, each after `every`.
        Reply::Paced {
            text,
            pieces: count,
            every,
        } => {
            let size = text.chars().count().div_ceil(count.max(1)).max(1);
            let mut events: Vec<String> = pieces(&text, size)
                .into_iter()
                .map(|piece| chunk(json!({"content": piece}), Value::Null))
                .collect();
            events.push(chunk(json!({}), json!("stop")));
            serve(&fake, index, events, delay, every)
        }
        Reply::ErrorSaying { status, message } => {
            tokio::time::sleep(delay).await;
            error(status, json!({"error": {"message": message}}))
        }
        Reply::Error {
            status,
            retry_after,
        } => {
            tokio::time::sleep(delay).await;
            let mut response = error(
                status,
                json!({"error": {"message": format!("scripted failure {status}"), "type": "server_error"}}),
            );
            if let Some(secs) = retry_after {
                response
                    .headers_mut()
                    .insert(header::RETRY_AFTER, secs.to_string().parse().unwrap());
            }
            response
        }
        Reply::ContextOverflow => {
            tokio::time::sleep(delay).await;
            error(
                400,
                json!({"error": {
                    "message": "This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens. Please reduce the length of the messages.",
                    "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}}),
            )
        }
        Reply::StreamError { after_text } => {
            // The text, then an error event, and the stream just ends (no finish, no [DONE]).
            let mut events = vec![chunk(json!({"role": "assistant"}), Value::Null)];
            events.push(chunk(json!({"content": after_text}), Value::Null));
            events.push(
                json!({"error": {"message": "overloaded", "type": "server_error"}}).to_string(),
            );
            serve(&fake, index, events, delay, Duration::ZERO)
        }
        reply => {
            let mut events = events_for(&reply);
            // With `stream_options.include_usage`, a last chunk says what the call took
            // (fixed numbers: each call 100 tokens in, 40 of them cached, and 7 out).
            if body.pointer("/stream_options/include_usage") == Some(&Value::Bool(true)) {
                events.push(
                    json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": "fake", "choices": [],
                           "usage": {"prompt_tokens": 100, "completion_tokens": 7, "total_tokens": 107,
                                     "prompt_tokens_details": {"cached_tokens": 40}}})
                    .to_string(),
                );
            }
            events.push("[DONE]".into());
            serve(&fake, index, events, delay, Duration::ZERO)
        }
    }
}

/// `events` as `data:` lines: the first after `delay`, each later one (and the end) after
/// `pace`.
fn serve(
    fake: &FakeLlm,
    index: usize,
    events: Vec<String>,
    delay: Duration,
    pace: Duration,
) -> Response {
    let frames = events
        .into_iter()
        .enumerate()
        .map(|(i, event)| {
            let wait = if i == 0 { delay } else { pace };
            (wait, format!("data: {event}\n\n"))
        })
        .collect();
    stream_frames(fake, index, frames, pace)
}

/// One `chat.completion.chunk` with `delta` and `finish_reason`.
fn chunk(delta: Value, finish: Value) -> String {
    json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": "fake",
           "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
    .to_string()
}

/// A tool call (index 0, `call_1`) whose arguments text arrives in two halves.
fn tool_call(events: &mut Vec<String>, name: &str, arguments: &str) {
    let (a, b) = halves(arguments);
    events.push(chunk(
        json!({"tool_calls": [{"index": 0, "id": "call_1", "type": "function", "function": {"name": name, "arguments": a}}]}),
        Value::Null,
    ));
    events.push(chunk(
        json!({"tool_calls": [{"index": 0, "function": {"arguments": b}}]}),
        Value::Null,
    ));
    events.push(chunk(json!({}), json!("tool_calls")));
}

/// `reasoning_content` deltas (two at least, when there is something to split).
fn reasoning(events: &mut Vec<String>, thinking: &str) {
    let size = thinking.chars().count().div_ceil(2).clamp(1, 400);
    for piece in pieces(thinking, size) {
        events.push(chunk(json!({"reasoning_content": piece}), Value::Null));
    }
}

/// The chunks of a streamed answer, up to its finish (before the usage and `[DONE]`).
fn events_for(reply: &Reply) -> Vec<String> {
    let mut events = vec![chunk(json!({"role": "assistant"}), Value::Null)];
    match reply {
        Reply::Text(text) => {
            // Several deltas, split on char boundaries.
            for piece in pieces(text, 400) {
                events.push(chunk(json!({"content": piece}), Value::Null));
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
        Reply::ToolCall { name, arguments } => tool_call(&mut events, name, &arguments.to_string()),
        Reply::BadArguments {
            name,
            arguments_text,
        } => tool_call(&mut events, name, arguments_text),
        Reply::Thinking { thinking, text } => {
            reasoning(&mut events, thinking);
            for piece in pieces(text, 400) {
                events.push(chunk(json!({"content": piece}), Value::Null));
            }
            events.push(chunk(json!({}), json!("stop")));
        }
        Reply::ThinkingThenTool {
            thinking,
            name,
            arguments,
        } => {
            reasoning(&mut events, thinking);
            tool_call(&mut events, name, &arguments.to_string());
        }
        Reply::Error { .. }
        | Reply::ErrorSaying { .. }
        | Reply::Delayed(..)
        | Reply::Paced { .. }
        | Reply::ContextOverflow
        | Reply::StreamError { .. }
        | Reply::Computed(_) => {
            unreachable!("handled before streaming")
        }
    }
    events
}
