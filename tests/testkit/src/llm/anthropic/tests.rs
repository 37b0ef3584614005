//! The Messages API's refusals over HTTP: the tool_use/tool_result pairing (a round trip
//! accepted, a missing or stray tool_result refused), each validation rule with the real
//! API's message (and the script kept), the key and version headers, and with thinking on
//! the signed thinking block a follow-up must carry back.

use serde_json::{Value, json};

use crate::llm::tests::{VERSION, deltas, post, refusal, request, sse, streamed, url};
use crate::llm::{
    FakeLlm, Reply, anthropic_last_user_text, anthropic_tool_results, cache_control_count,
};

#[tokio::test]
async fn a_tool_use_round_trip_and_a_missing_tool_result() {
    let fake = FakeLlm::start().await;
    fake.push(Reply::terminal("uptime"));
    let tools = json!([{"name": "terminal", "description": "run",
                        "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}}}]);
    let mut body = streamed(json!([{"role": "user", "content": "how long up?"}]));
    body["tools"] = tools.clone();
    let events = sse(post(&fake, &body).await).await;
    let block = &events[2].1["content_block"];
    assert_eq!(block["type"], "tool_use");
    assert_eq!(block["name"], "terminal");
    assert_eq!(block["input"], json!({}));
    let id = block["id"].as_str().unwrap().to_owned();
    assert!(id.starts_with("toolu_"));
    let partial: Vec<&str> = events
        .iter()
        .filter(|(_, d)| d["delta"]["type"] == "input_json_delta")
        .map(|(_, d)| d["delta"]["partial_json"].as_str().unwrap())
        .collect();
    assert_eq!(partial.len(), 3);
    assert_eq!(partial[0], "");
    let input: Value = serde_json::from_str(&partial.concat()).unwrap();
    assert_eq!(input, json!({"command": "uptime"}));
    let stop = events.iter().find(|(n, _)| n == "message_delta").unwrap();
    assert_eq!(stop.1["delta"]["stop_reason"], "tool_use");

    let assistant = json!({"role": "assistant", "content": [
        {"type": "text", "text": "Let me look."},
        {"type": "tool_use", "id": id, "name": "terminal", "input": input}]});
    let mut follow = streamed(json!([
        {"role": "user", "content": "how long up?"},
        assistant,
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": id, "content": "up 3 days"}]}
    ]));
    follow["tools"] = tools.clone();
    let events = sse(post(&fake, &follow).await).await;
    assert_eq!(deltas(&events, "text_delta", "text"), "echo: ");
    let recorded = &fake.requests()[1];
    assert_eq!(
        anthropic_tool_results(recorded),
        vec![(id.clone(), "up 3 days".to_owned())]
    );
    assert_eq!(anthropic_last_user_text(recorded), "");

    let mut forgot = follow.clone();
    forgot["messages"][2] = json!({"role": "user", "content": "and now?"});
    assert_eq!(
        refusal(&fake, &forgot).await,
        format!(
            "messages.1: `tool_use` ids were found without `tool_result` blocks immediately after: {id}. Each `tool_use` block must have a corresponding `tool_result` block in the next message."
        )
    );
    let mut stray = follow.clone();
    stray["messages"][2]["content"][0]["tool_use_id"] = json!("toolu_other");
    stray["messages"][2]["content"]
        .as_array_mut()
        .unwrap()
        .push(json!({"type": "tool_result", "tool_use_id": id, "content": "x"}));
    assert_eq!(
        refusal(&fake, &stray).await,
        "messages.2.content.0: unexpected `tool_use_id` found in `tool_result` blocks: toolu_other. Each `tool_result` block must have a corresponding `tool_use` block in the previous message."
    );
}

#[tokio::test]
async fn invalid_requests_are_refused_with_the_apis_messages_and_keep_the_script() {
    let fake = FakeLlm::start().await;
    fake.push(Reply::text("kept"));
    let hi = json!({"role": "user", "content": "hi"});
    let marked = json!({"type": "text", "text": "x", "cache_control": {"type": "ephemeral"}});
    let tool = |name: &str| json!({"name": name, "input_schema": {"type": "object"}, "cache_control": {"type": "ephemeral"}});
    let with = |key: &str, value: Value| {
        let mut body = request(json!([hi]));
        body[key] = value;
        body
    };
    let mut five = request(json!([{"role": "user", "content": [marked, marked]}]));
    five["system"] = json!([marked, marked]);
    five["tools"] = json!([tool("a")]);
    assert_eq!(cache_control_count(&five), 5);
    let cases = [
        (
            five,
            "A maximum of 4 blocks with cache_control may be provided. Found 5.",
        ),
        (
            request(json!([{"role": "system", "content": "be nice"}, hi])),
            "messages.0.role: Input should be 'user' or 'assistant'",
        ),
        (
            request(json!([{"role": "assistant", "content": "hello"}, hi])),
            "messages: first message must use the \"user\" role",
        ),
        (
            request(json!([{"role": "user", "content": ""}, {"role": "assistant", "content": ""}])),
            "messages.0: all messages must have non-empty content except for the optional final assistant message",
        ),
        (
            request(json!([{"role": "user", "content": [{"type": "text", "text": ""}]}])),
            "messages: text content blocks must be non-empty",
        ),
        (
            request(json!([{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}])),
            "messages.0.content.0.type: Input tag 'image_url' found using 'type' does not match any of the expected tags",
        ),
        (
            with(
                "tools",
                json!([{"type": "function", "function": {"name": "terminal", "parameters": {}}}]),
            ),
            "tools.0.name: Field required",
        ),
        (
            with(
                "tools",
                json!([{"name": "bad name", "input_schema": {"type": "object"}}]),
            ),
            "tools.0.name: String should match pattern '^[a-zA-Z0-9_-]{1,128}$'",
        ),
        (
            with("tools", json!([{"name": "t", "input_schema": "object"}])),
            "tools.0.input_schema: Input should be a valid dictionary or object",
        ),
        (
            with("system", json!([{"type": "image"}])),
            "system.0.type: Input should be 'text'",
        ),
        (with("model", Value::Null), "model: Field required"),
        (with("max_tokens", json!(0)), "max_tokens: Field required"),
        (
            with("messages", json!([])),
            "messages: at least one message is required",
        ),
        (
            with(
                "thinking",
                json!({"type": "enabled", "budget_tokens": 1000}),
            ),
            "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024",
        ),
        (
            with(
                "thinking",
                json!({"type": "enabled", "budget_tokens": 4096}),
            ),
            "`max_tokens` must be greater than `thinking.budget_tokens`",
        ),
    ];
    for (body, message) in &cases {
        assert_eq!(refusal(&fake, body).await, *message);
    }
    // Still recorded, and the scripted answer still there.
    assert_eq!(fake.requests().len(), cases.len());
    let message: Value = post(&fake, &request(json!([hi])))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(message["content"][0]["text"], "kept");
    // A final assistant message may be empty (a prefill).
    let prefill = request(json!([hi, {"role": "assistant", "content": ""}]));
    assert_eq!(post(&fake, &prefill).await.status(), 200);
}

#[tokio::test]
async fn a_key_and_a_version_are_required() {
    let fake = FakeLlm::start().await;
    let body = request(json!([{"role": "user", "content": "hi"}]));
    let client = reqwest::Client::new();
    let response = client
        .post(url(&fake))
        .header("anthropic-version", VERSION)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 401);
    assert_eq!(
        response.json::<Value>().await.unwrap(),
        json!({"type": "error", "error": {"type": "authentication_error", "message": "x-api-key header is required"}})
    );
    let response = client
        .post(url(&fake))
        .header("x-api-key", "k")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 400);
    let error: Value = response.json().await.unwrap();
    assert_eq!(
        error["error"]["message"],
        "anthropic-version: header is required"
    );
    let response = client
        .post(url(&fake))
        .bearer_auth("oauth-token")
        .header("anthropic-version", VERSION)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
}

#[tokio::test]
async fn thinking_on_the_signed_block_must_come_back_before_the_tool_results() {
    let fake = FakeLlm::start().await;
    fake.push(Reply::ThinkingThenTool {
        thinking: "The user wants the time.".into(),
        name: "terminal".into(),
        arguments: json!({"command": "date"}),
    });
    let thinking = json!({"type": "enabled", "budget_tokens": 2048});
    let mut body = streamed(json!([{"role": "user", "content": "time?"}]));
    body["thinking"] = thinking.clone();
    let events = sse(post(&fake, &body).await).await;
    assert_eq!(
        events[2].1["content_block"],
        json!({"type": "thinking", "thinking": ""})
    );
    let said = deltas(&events, "thinking_delta", "thinking");
    assert_eq!(said, "The user wants the time.");
    let signature = deltas(&events, "signature_delta", "signature");
    assert!(signature.starts_with("sig-"));
    let tool = events
        .iter()
        .find(|(_, d)| d["content_block"]["type"] == "tool_use")
        .unwrap();
    assert_eq!(tool.1["index"], 1);
    let id = tool.1["content_block"]["id"].as_str().unwrap();

    let use_block =
        json!({"type": "tool_use", "id": id, "name": "terminal", "input": {"command": "date"}});
    let follow = |assistant: Value| {
        let mut body = streamed(json!([
            {"role": "user", "content": "time?"},
            {"role": "assistant", "content": assistant},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": id, "content": "noon"}]}
        ]));
        body["thinking"] = thinking.clone();
        body["tools"] = json!([{"name": "terminal", "input_schema": {"type": "object"}}]);
        body
    };
    let without = refusal(&fake, &follow(json!([use_block]))).await;
    assert!(
        without.starts_with("messages.1.content.0.type: Expected `thinking` or `redacted_thinking`, but found `tool_use`. When `thinking` is enabled, a final `assistant` message must start with a thinking block (preceeding the lastmost set of `tool_use` and `tool_result` blocks). We recommend you include thinking blocks from previous turns."),
        "{without}"
    );
    let forged = json!({"type": "thinking", "thinking": said, "signature": "sig-forged"});
    assert_eq!(
        refusal(&fake, &follow(json!([forged, use_block]))).await,
        "messages.1.content.0: Invalid `signature` in `thinking` block"
    );
    let signed = json!({"type": "thinking", "thinking": said, "signature": signature});
    let events = sse(post(&fake, &follow(json!([signed, use_block]))).await).await;
    assert_eq!(deltas(&events, "text_delta", "text"), "echo: ");
    // Thinking off, the same history needs no thinking block.
    let mut off = follow(json!([use_block]));
    off["thinking"] = json!({"type": "disabled"});
    assert_eq!(post(&fake, &off).await.status(), 200);
}
