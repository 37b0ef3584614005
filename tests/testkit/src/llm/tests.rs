//! The fake LLM itself, over HTTP with reqwest: Anthropic answers parsed back (event
//! order, usage, text, JSON messages, pacing, dropped and broken streams), scripted errors
//! in Anthropic's shape, recorded headers, the request helpers, and the OpenAI dialect's
//! newer replies (reasoning, raw arguments, broken streams, context overflow); plus the
//! helpers the Anthropic refusal tests (`anthropic/tests.rs`) share.

use std::time::{Duration, Instant};

use futures_util::StreamExt;
use serde_json::{Value, json};

use super::*;

pub(super) const VERSION: &str = "2023-06-01";

pub(super) fn url(fake: &FakeLlm) -> String {
    format!("{}/v1/messages", fake.anthropic_base_url())
}

/// POST `body` to the Anthropic endpoint with a key and a version.
pub(super) async fn post(fake: &FakeLlm, body: &Value) -> reqwest::Response {
    reqwest::Client::new()
        .post(url(fake))
        .header("x-api-key", "sk-ant-test")
        .header("anthropic-version", VERSION)
        .json(body)
        .send()
        .await
        .unwrap()
}

/// A request of `messages` (model, max_tokens 4096).
pub(super) fn request(messages: Value) -> Value {
    json!({"model": "claude-test", "max_tokens": 4096, "messages": messages})
}

pub(super) fn streamed(messages: Value) -> Value {
    let mut body = request(messages);
    body["stream"] = json!(true);
    body
}

/// The message of a 400 `invalid_request_error` answer to `body`.
pub(super) async fn refusal(fake: &FakeLlm, body: &Value) -> String {
    let response = post(fake, body).await;
    assert_eq!(response.status(), 400, "{body:#}");
    let error: Value = response.json().await.unwrap();
    assert_eq!(error["type"], "error");
    assert_eq!(error["error"]["type"], "invalid_request_error");
    error["error"]["message"].as_str().unwrap().to_owned()
}

/// The SSE events of a streamed answer: (event name, data).
pub(super) async fn sse(response: reqwest::Response) -> Vec<(String, Value)> {
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    let text = response.text().await.unwrap();
    text.split("\n\n")
        .filter(|e| !e.is_empty())
        .map(|e| {
            let (name, data) = e.split_once('\n').unwrap();
            let name = name.strip_prefix("event: ").unwrap().to_owned();
            let data: Value = serde_json::from_str(data.strip_prefix("data: ").unwrap()).unwrap();
            assert_eq!(data["type"], name.as_str());
            (name, data)
        })
        .collect()
}

fn names(events: &[(String, Value)]) -> Vec<&str> {
    events.iter().map(|(n, _)| n.as_str()).collect()
}

/// The concatenated deltas of kind `kind` (`text_delta` → `text`, …) of all blocks.
pub(super) fn deltas(events: &[(String, Value)], kind: &str, field: &str) -> String {
    events
        .iter()
        .filter(|(_, d)| d["delta"]["type"] == kind)
        .map(|(_, d)| d["delta"][field].as_str().unwrap())
        .collect()
}

#[tokio::test]
async fn a_streamed_text_parses_back_in_the_apis_order() {
    let fake = FakeLlm::start().await;
    let text = "All is well. ".repeat(70);
    fake.push(Reply::text(&text));
    let response = post(&fake, &streamed(json!([{"role": "user", "content": "hi"}]))).await;
    assert_eq!(response.headers()["request-id"], "req_fake1");
    let events = sse(response).await;
    assert_eq!(
        names(&events),
        [
            "message_start",
            "ping",
            "content_block_start",
            "content_block_delta",
            "content_block_delta",
            "content_block_delta",
            "content_block_stop",
            "message_delta",
            "message_stop"
        ]
    );
    let message = &events[0].1["message"];
    assert_eq!(message["id"], "msg_fake1");
    assert_eq!(message["model"], "claude-test");
    assert_eq!(
        message["usage"],
        json!({"input_tokens": 100, "cache_creation_input_tokens": 30,
               "cache_read_input_tokens": 40, "output_tokens": 1})
    );
    assert_eq!(
        events[2].1["content_block"],
        json!({"type": "text", "text": ""})
    );
    assert_eq!(deltas(&events, "text_delta", "text"), text);
    assert_eq!(events[7].1["delta"]["stop_reason"], "end_turn");
    assert_eq!(events[7].1["usage"]["output_tokens"], 7);
    assert!(fake.timings()[0].finished.is_some());

    // An empty script echoes the last text block of the last user message.
    let body = streamed(json!([{"role": "user", "content": [
        {"type": "text", "text": "first"}, {"type": "text", "text": "ok"}]}]));
    let events = sse(post(&fake, &body).await).await;
    assert_eq!(deltas(&events, "text_delta", "text"), "echo: ok");
    let pieces = events
        .iter()
        .filter(|(_, d)| d["delta"]["type"] == "text_delta")
        .count();
    assert!(pieces >= 2, "two deltas at least");
    assert_eq!(fake.requests().len(), 2);
}

#[tokio::test]
async fn without_stream_the_answer_is_one_json_message() {
    let fake = FakeLlm::start().await;
    fake.push(Reply::terminal("ls"));
    fake.push(Reply::Thinking {
        thinking: "hmm".into(),
        text: "done".into(),
    });
    let body = request(json!([{"role": "user", "content": "list"}]));
    let message: Value = post(&fake, &body).await.json().await.unwrap();
    assert_eq!(message["type"], "message");
    assert_eq!(message["stop_reason"], "tool_use");
    assert_eq!(message["usage"]["output_tokens"], 7);
    assert_eq!(message["content"][0]["type"], "tool_use");
    assert_eq!(message["content"][0]["input"], json!({"command": "ls"}));
    let message: Value = post(&fake, &body).await.json().await.unwrap();
    let content = &message["content"];
    assert_eq!(content[0]["type"], "thinking");
    assert_eq!(content[0]["thinking"], "hmm");
    assert!(
        content[0]["signature"]
            .as_str()
            .unwrap()
            .starts_with("sig-")
    );
    assert_eq!(content[1], json!({"type": "text", "text": "done"}));
    assert_eq!(message["stop_reason"], "end_turn");
}

#[tokio::test]
async fn scripted_errors_carry_anthropics_body() {
    let fake = FakeLlm::start().await;
    fake.push(Reply::Error {
        status: 529,
        retry_after: Some(3),
    });
    fake.push(Reply::ContextOverflow);
    fake.push(Reply::ErrorSaying {
        status: 401,
        message: "invalid x-api-key".into(),
    });
    let body = streamed(json!([{"role": "user", "content": "hi"}]));
    let response = post(&fake, &body).await;
    assert_eq!(response.status(), 529);
    assert_eq!(response.headers()["retry-after"], "3");
    assert_eq!(response.headers()["request-id"], "req_fake1");
    let error: Value = response.json().await.unwrap();
    assert_eq!(error["type"], "error");
    assert_eq!(error["error"]["type"], "overloaded_error");
    assert_eq!(
        refusal(&fake, &body).await,
        "prompt is too long: 9000 tokens > 8192 maximum"
    );
    let response = post(&fake, &body).await;
    assert_eq!(response.status(), 401);
    assert_eq!(
        response.json::<Value>().await.unwrap()["error"],
        json!({"type": "authentication_error", "message": "invalid x-api-key"})
    );
    assert!(fake.timings().iter().all(|t| t.finished.is_none()));
}

#[tokio::test]
async fn a_broken_stream_and_raw_arguments() {
    let fake = FakeLlm::start().await;
    fake.push(Reply::StreamError {
        after_text: "Part".into(),
    });
    fake.push(Reply::BadArguments {
        name: "terminal".into(),
        arguments_text: "{\"command\": \"ls".into(),
    });
    let body = streamed(json!([{"role": "user", "content": "hi"}]));
    let events = sse(post(&fake, &body).await).await;
    assert_eq!(
        names(&events),
        [
            "message_start",
            "ping",
            "content_block_start",
            "content_block_delta",
            "content_block_delta",
            "error"
        ]
    );
    assert_eq!(deltas(&events, "text_delta", "text"), "Part");
    assert_eq!(
        events[5].1,
        json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
    );
    let events = sse(post(&fake, &body).await).await;
    assert_eq!(
        deltas(&events, "input_json_delta", "partial_json"),
        "{\"command\": \"ls"
    );
}

#[tokio::test]
async fn a_paced_answer_is_paced_and_a_dropped_stream_counted() {
    let fake = FakeLlm::start().await;
    fake.push(Reply::Paced {
        text: "one two three".into(),
        pieces: 3,
        every: Duration::from_millis(60),
    });
    fake.push(Reply::Delayed(
        Duration::from_secs(30),
        Box::new(Reply::text("never")),
    ));
    let body = streamed(json!([{"role": "user", "content": "hi"}]));
    let started = Instant::now();
    let events = sse(post(&fake, &body).await).await;
    assert!(started.elapsed() >= Duration::from_millis(180));
    assert_eq!(deltas(&events, "text_delta", "text"), "one two three");
    assert_eq!(
        events
            .iter()
            .filter(|(n, _)| n == "content_block_delta")
            .count(),
        3
    );
    // Headers arrive, then nothing: the client gives up.
    let response = post(&fake, &body).await;
    assert_eq!(response.status(), 200);
    let mut stream = response.bytes_stream();
    assert!(
        tokio::time::timeout(Duration::from_millis(100), stream.next())
            .await
            .is_err()
    );
    drop(stream);
    crate::eventually(Duration::from_secs(5), "the drop counted", || {
        (fake.dropped_streams() == 1).then_some(())
    })
    .await;
}

#[tokio::test]
async fn headers_are_recorded_for_both_dialects() {
    let fake = FakeLlm::start().await;
    post(&fake, &request(json!([{"role": "user", "content": "hi"}]))).await;
    reqwest::Client::new()
        .post(format!("{}/chat/completions", fake.base_url()))
        .bearer_auth("sk-openai")
        .json(&json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]}))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(fake.headers().len(), 2);
    assert_eq!(fake.header(0, "X-Api-Key").as_deref(), Some("sk-ant-test"));
    assert_eq!(
        fake.header(0, "anthropic-version").as_deref(),
        Some(VERSION)
    );
    assert_eq!(
        fake.header(1, "authorization").as_deref(),
        Some("Bearer sk-openai")
    );
    assert_eq!(fake.header(1, "x-api-key"), None);
    assert_eq!(fake.header(2, "authorization"), None);
    assert!(
        fake.headers()[0]
            .iter()
            .any(|(n, v)| n == "content-type" && v == "application/json")
    );
}

/// The `data:` payloads of an OpenAI stream.
async fn openai(fake: &FakeLlm, reply: Reply) -> Vec<String> {
    fake.push(reply);
    let response = reqwest::Client::new()
        .post(format!("{}/chat/completions", fake.base_url()))
        .json(
            &json!({"model": "m", "stream": true, "messages": [{"role": "user", "content": "hi"}]}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let text = response.text().await.unwrap();
    text.split("\n\n")
        .filter_map(|e| e.strip_prefix("data: "))
        .map(str::to_owned)
        .collect()
}

fn openai_deltas(data: &[String], field: &str) -> String {
    data.iter()
        .filter_map(|d| serde_json::from_str::<Value>(d).ok())
        .filter_map(|d| d["choices"][0]["delta"][field].as_str().map(str::to_owned))
        .collect()
}

#[tokio::test]
async fn the_openai_dialect_speaks_the_new_replies() {
    let fake = FakeLlm::start().await;
    let data = openai(
        &fake,
        Reply::Thinking {
            thinking: "Let me think.".into(),
            text: "Yes.".into(),
        },
    )
    .await;
    assert_eq!(openai_deltas(&data, "reasoning_content"), "Let me think.");
    assert_eq!(openai_deltas(&data, "content"), "Yes.");
    let finish: Value = serde_json::from_str(&data[data.len() - 2]).unwrap();
    assert_eq!(finish["choices"][0]["finish_reason"], "stop");
    assert_eq!(data.last().unwrap(), "[DONE]");

    let data = openai(
        &fake,
        Reply::ThinkingThenTool {
            thinking: "Look.".into(),
            name: "terminal".into(),
            arguments: json!({"command": "ls"}),
        },
    )
    .await;
    assert_eq!(openai_deltas(&data, "reasoning_content"), "Look.");
    assert!(
        data.iter()
            .any(|d| d.contains("\"finish_reason\":\"tool_calls\""))
    );

    let data = openai(
        &fake,
        Reply::BadArguments {
            name: "terminal".into(),
            arguments_text: "{not json".into(),
        },
    )
    .await;
    let arguments: String = data
        .iter()
        .filter_map(|d| serde_json::from_str::<Value>(d).ok())
        .filter_map(|d| {
            d["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"]
                .as_str()
                .map(str::to_owned)
        })
        .collect();
    assert_eq!(arguments, "{not json");

    let data = openai(
        &fake,
        Reply::StreamError {
            after_text: "Par".into(),
        },
    )
    .await;
    assert_eq!(openai_deltas(&data, "content"), "Par");
    assert_eq!(
        data.last().unwrap(),
        r#"{"error":{"message":"overloaded","type":"server_error"}}"#
    );

    // Streamed or not, the overflow is a JSON 400.
    fake.push(Reply::ContextOverflow);
    let response = reqwest::Client::new()
        .post(format!("{}/chat/completions", fake.base_url()))
        .json(
            &json!({"model": "m", "stream": true, "messages": [{"role": "user", "content": "hi"}]}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 400);
    let error: Value = response.json().await.unwrap();
    assert_eq!(
        error["error"]["message"],
        "This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens. Please reduce the length of the messages."
    );
    assert_eq!(error["error"]["code"], "context_length_exceeded");
    assert_eq!(error["error"]["type"], "invalid_request_error");
    assert_eq!(error["error"]["param"], "messages");
}

#[test]
fn the_request_helpers_read_anthropic_requests() {
    let request = json!({
        "system": [{"type": "text", "text": "s", "cache_control": {"type": "ephemeral"}}],
        "tools": [{"name": "t", "input_schema": {"type": "object"}}],
        "messages": [
            {"role": "user", "content": "first"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "a", "name": "t", "input": {}},
                                              {"type": "tool_use", "id": "b", "name": "t", "input": {}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "a", "content": [{"type": "text", "text": "one"}, {"type": "text", "text": "two"}],
                 "cache_control": {"type": "ephemeral"}},
                {"type": "tool_result", "tool_use_id": "b", "content": "three", "is_error": true},
                {"type": "text", "text": "and?"}]},
        ]
    });
    assert_eq!(anthropic_last_user_text(&request), "and?");
    assert_eq!(
        anthropic_tool_results(&request),
        vec![
            ("a".to_owned(), "one\ntwo".to_owned()),
            ("b".to_owned(), "three".to_owned())
        ]
    );
    assert_eq!(cache_control_count(&request), 2);
    assert_eq!(anthropic_last_user_text(&json!({})), "");
}
