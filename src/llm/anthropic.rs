//! Anthropic's Messages dialect (`POST {base}/v1/messages`): the agent's OpenAI-shaped
//! conversation turned into Anthropic's (a top-level system prompt; tool results as
//! `tool_result` blocks of a user message; consecutive messages of one role merged; images
//! as base64 blocks; the turn's thinking blocks replayed before its tool calls), prompt
//! caching with `cache_control` on the system prompt and the last three messages, extended
//! thinking from `agent.reasoning_effort`, and the streamed events read back into a
//! [`Completion`] (stop reasons mapped to OpenAI's finish reasons).

use serde_json::{Map, Value, json};

use super::{Completion, Decoded, ToolCall, Usage};
use crate::config::ModelConfig;

/// The API version every request names.
const VERSION: &str = "2023-06-01";

/// Where the request goes: `{base}/v1/messages` (a base already ending in `/v1` gets
/// `/messages`).
pub(super) fn url(base_url: &str) -> String {
    let base = base_url.trim_end_matches('/');
    if base.ends_with("/v1") {
        format!("{base}/messages")
    } else {
        format!("{base}/v1/messages")
    }
}

/// The headers, the key's included: `x-api-key` for API keys; an OAuth token
/// (`sk-ant-oat…`) goes as a bearer token with the OAuth beta, as Hermes sends it.
pub(super) fn headers(config: &ModelConfig) -> Vec<(&'static str, String)> {
    let mut headers = vec![("anthropic-version", VERSION.to_owned())];
    let mut betas: Vec<&str> = Vec::new();
    if let Some(key) = &config.api_key {
        let key = key.expose();
        if key.starts_with("sk-ant-oat") {
            headers.push(("authorization", format!("Bearer {key}")));
            betas.push("oauth-2025-04-20");
        } else {
            headers.push(("x-api-key", key.to_owned()));
        }
    }
    if thinking_budget(config).is_some() {
        betas.push("interleaved-thinking-2025-05-14");
    }
    if !betas.is_empty() {
        headers.push(("anthropic-beta", betas.join(",")));
    }
    headers
}

/// The output cap: `model.max_tokens`, else the model's own (Hermes' table), always above
/// the thinking budget.
fn max_tokens(config: &ModelConfig) -> u32 {
    let model = config.model.to_ascii_lowercase();
    let known = if ["opus-4-6", "opus-4-7", "opus-4-8"]
        .iter()
        .any(|m| model.contains(m))
    {
        128_000
    } else if model.contains("opus-4") {
        32_000
    } else if model.contains("sonnet-4") || model.contains("haiku-4") {
        64_000
    } else if model.contains("claude-3-5") || model.contains("claude-3.5") {
        8_192
    } else if model.contains("claude-3") {
        4_096
    } else {
        128_000
    };
    let cap = config.max_tokens.unwrap_or(known).max(1);
    match thinking_budget(config) {
        Some(budget) if cap <= budget => budget + 4_096,
        _ => cap,
    }
}

/// The thinking budget for `agent.reasoning_effort` (Hermes': low 4000 … xhigh 32000).
fn thinking_budget(config: &ModelConfig) -> Option<u32> {
    match config.reasoning_effort.as_deref()? {
        "minimal" | "low" => Some(4_000),
        "medium" => Some(8_000),
        "high" => Some(16_000),
        "xhigh" | "max" | "ultra" => Some(32_000),
        _ => None,
    }
}

/// The request body for the agent's `messages` (OpenAI-shaped) with `tools` (OpenAI
/// function definitions) offered.
pub(super) fn body(config: &ModelConfig, messages: &[Value], tools: &[Value]) -> Value {
    let system: Vec<&str> = messages
        .iter()
        .filter(|m| m["role"] == "system")
        .filter_map(|m| m["content"].as_str())
        .filter(|t| !t.is_empty())
        .collect();
    let mut turns = conversation(messages);
    mark_cache_breakpoints(&mut turns);
    let mut body = json!({
        "model": config.model,
        "max_tokens": max_tokens(config),
        "messages": turns,
        "stream": true,
    });
    if !system.is_empty() {
        // The system prompt is built once per session and sent byte for byte the same, so
        // this breakpoint's prefix is a cache hit on every later call.
        body["system"] = json!([{
            "type": "text",
            "text": system.join("\n\n"),
            "cache_control": {"type": "ephemeral"},
        }]);
    }
    if !tools.is_empty() {
        body["tools"] = Value::Array(tools.iter().filter_map(tool).collect());
    }
    if let Some(budget) = thinking_budget(config)
        && thinking_can_continue(&body["messages"])
    {
        body["thinking"] = json!({"type": "enabled", "budget_tokens": budget});
    }
    body
}

/// With thinking on, Anthropic wants the assistant message before a final message of tool
/// results to open with its thinking block. One without (written by another model, or
/// carried over from an interrupted turn, whose thinking is not kept) is answered without
/// thinking for this call rather than refused.
fn thinking_can_continue(turns: &Value) -> bool {
    let Some(turns) = turns.as_array() else {
        return true;
    };
    let [.., assistant, last] = turns.as_slice() else {
        return true;
    };
    let has_results = last["content"]
        .as_array()
        .is_some_and(|blocks| blocks.iter().any(|b| b["type"] == "tool_result"));
    !has_results
        || assistant["content"][0]["type"]
            .as_str()
            .is_some_and(|t| t == "thinking" || t == "redacted_thinking")
}

/// An OpenAI function definition as an Anthropic tool.
fn tool(definition: &Value) -> Option<Value> {
    let function = definition.get("function")?;
    Some(json!({
        "name": function.get("name")?,
        "description": function.get("description").cloned().unwrap_or(json!("")),
        "input_schema": function
            .get("parameters")
            .cloned()
            .unwrap_or(json!({"type": "object", "properties": {}})),
    }))
}

/// The conversation without its system messages, as Anthropic messages: alternating roles,
/// starting with the person.
fn conversation(messages: &[Value]) -> Vec<Value> {
    let mut turns: Vec<(String, Vec<Value>)> = Vec::new();
    for message in messages {
        let (role, blocks) = match message["role"].as_str().unwrap_or_default() {
            "system" => continue,
            "assistant" => ("assistant", assistant_blocks(message)),
            "tool" => ("user", vec![tool_result(message)]),
            _ => ("user", user_blocks(&message["content"])),
        };
        if blocks.is_empty() {
            continue;
        }
        match turns.last_mut() {
            Some((last, existing)) if last == role => {
                // Tool results come first in a user message; the person's words after them.
                existing.extend(blocks);
            }
            _ => turns.push((role.to_owned(), blocks)),
        }
    }
    if turns.first().is_some_and(|(role, _)| role != "user") {
        turns.insert(
            0,
            (
                "user".into(),
                vec![text_block("[The conversation so far continues below.]")],
            ),
        );
    }
    turns
        .into_iter()
        .map(|(role, content)| json!({"role": role, "content": content}))
        .collect()
}

fn text_block(text: &str) -> Value {
    json!({"type": "text", "text": text})
}

/// The person's text and images; an empty text is not sent (Anthropic refuses empty text
/// blocks).
fn user_blocks(content: &Value) -> Vec<Value> {
    match content {
        Value::String(text) if !text.trim().is_empty() => vec![text_block(text)],
        Value::Array(parts) => parts
            .iter()
            .filter_map(|part| match part["type"].as_str()? {
                "text" => part["text"]
                    .as_str()
                    .filter(|t| !t.trim().is_empty())
                    .map(text_block),
                "image_url" => image_block(part["image_url"]["url"].as_str()?),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// A `data:` URL as a base64 image block; any other URL by reference.
fn image_block(url: &str) -> Option<Value> {
    if let Some(rest) = url.strip_prefix("data:") {
        let (media_type, data) = rest.split_once(";base64,")?;
        return Some(json!({
            "type": "image",
            "source": {"type": "base64", "media_type": media_type, "data": data},
        }));
    }
    Some(json!({"type": "image", "source": {"type": "url", "url": url}}))
}

/// The assistant's thinking (replayed as it came), text and tool calls.
fn assistant_blocks(message: &Value) -> Vec<Value> {
    let mut blocks: Vec<Value> = message
        .get("reasoning_blocks")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if let Some(text) = message["content"].as_str().filter(|t| !t.trim().is_empty()) {
        blocks.push(text_block(text));
    }
    for call in message["tool_calls"].as_array().into_iter().flatten() {
        let arguments = call["function"]["arguments"].as_str().unwrap_or("{}");
        // Arguments that are not a JSON object were answered with an error result; the
        // call is replayed with empty input so the pair stays whole.
        let input = serde_json::from_str::<Value>(arguments)
            .ok()
            .filter(Value::is_object)
            .unwrap_or_else(|| json!({}));
        blocks.push(json!({
            "type": "tool_use",
            "id": call["id"],
            "name": call["function"]["name"],
            "input": input,
        }));
    }
    blocks
}

fn tool_result(message: &Value) -> Value {
    let text = message["content"].as_str().unwrap_or_default();
    json!({
        "type": "tool_result",
        "tool_use_id": message["tool_call_id"],
        "content": if text.is_empty() { "(no output)" } else { text },
    })
}

/// `cache_control` on the last cacheable block of each of the last three messages
/// (Hermes' `system_and_3`; the system prompt has the fourth).
fn mark_cache_breakpoints(turns: &mut [Value]) {
    for turn in turns.iter_mut().rev().take(3) {
        let Some(blocks) = turn["content"].as_array_mut() else {
            continue;
        };
        // Thinking blocks cannot carry one.
        if let Some(block) = blocks
            .iter_mut()
            .rev()
            .find(|b| !matches!(b["type"].as_str(), Some("thinking" | "redacted_thinking")))
        {
            block["cache_control"] = json!({"type": "ephemeral"});
        }
    }
}

/// One content block as it streams in.
enum Block {
    Text(String),
    Thinking {
        thinking: String,
        signature: String,
    },
    Redacted(Value),
    ToolUse {
        id: String,
        name: String,
        json: String,
    },
    Other,
}

/// Builds a completion from the streamed events.
#[derive(Default)]
pub(super) struct Accumulator {
    blocks: Vec<Block>,
    stop_reason: Option<String>,
    stopped: bool,
    usage: Usage,
}

impl Accumulator {
    fn usage_from(&mut self, usage: &Value) {
        let n = |key: &str| usage.get(key).and_then(Value::as_u64);
        if let Some(input) = n("input_tokens") {
            let read = n("cache_read_input_tokens").unwrap_or(0);
            let written = n("cache_creation_input_tokens").unwrap_or(0);
            // Anthropic counts cached tokens apart; `prompt` is everything read, as OpenAI
            // counts it.
            self.usage.prompt = input + read + written;
            self.usage.cached = read;
            self.usage.cache_write = written;
        }
        if let Some(output) = n("output_tokens") {
            self.usage.completion = output;
        }
    }

    fn start(&mut self, block: &Value) {
        self.blocks.push(match block["type"].as_str() {
            Some("text") => Block::Text(block["text"].as_str().unwrap_or_default().to_owned()),
            Some("thinking") => Block::Thinking {
                thinking: block["thinking"].as_str().unwrap_or_default().to_owned(),
                signature: block["signature"].as_str().unwrap_or_default().to_owned(),
            },
            Some("redacted_thinking") => Block::Redacted(block.clone()),
            Some("tool_use") => Block::ToolUse {
                id: block["id"].as_str().unwrap_or_default().to_owned(),
                name: block["name"].as_str().unwrap_or_default().to_owned(),
                json: String::new(),
            },
            _ => Block::Other,
        });
    }

    /// A delta for the current block; the text it adds to the answer, if any.
    fn delta(&mut self, delta: &Value) -> Option<String> {
        let text = |key: &str| delta[key].as_str().unwrap_or_default();
        match (self.blocks.last_mut()?, delta["type"].as_str()?) {
            (Block::Text(t), "text_delta") => {
                t.push_str(text("text"));
                Some(text("text").to_owned())
            }
            (Block::Thinking { thinking, .. }, "thinking_delta") => {
                thinking.push_str(text("thinking"));
                None
            }
            (Block::Thinking { signature, .. }, "signature_delta") => {
                signature.push_str(text("signature"));
                None
            }
            (Block::ToolUse { json, .. }, "input_json_delta") => {
                json.push_str(text("partial_json"));
                None
            }
            _ => None,
        }
    }

    /// The message in Anthropic's whole (non-streamed) form.
    pub(super) fn from_message(message: &Value) -> Result<Completion, String> {
        let mut acc = Accumulator::default();
        let blocks = message["content"]
            .as_array()
            .ok_or("no content in the response")?;
        for block in blocks {
            acc.start(block);
            if let Some(Block::ToolUse { json, .. }) = acc.blocks.last_mut() {
                *json = block["input"].to_string();
            }
        }
        acc.usage_from(&message["usage"]);
        acc.stop_reason = message["stop_reason"].as_str().map(str::to_owned);
        Ok(acc.done())
    }

    fn done(self) -> Completion {
        let mut content = String::new();
        let mut tool_calls = Vec::new();
        let mut reasoning = Vec::new();
        for block in self.blocks {
            match block {
                Block::Text(text) => content.push_str(&text),
                Block::Thinking {
                    thinking,
                    signature,
                } => reasoning.push(
                    json!({"type": "thinking", "thinking": thinking, "signature": signature}),
                ),
                Block::Redacted(block) => reasoning.push(block),
                Block::ToolUse { id, name, json } => tool_calls.push(ToolCall {
                    id,
                    name,
                    arguments: if json.trim().is_empty() {
                        "{}".into()
                    } else {
                        json
                    },
                }),
                Block::Other => {}
            }
        }
        Completion {
            content,
            tool_calls,
            finish_reason: self.stop_reason.as_deref().map(finish_reason),
            usage: self.usage,
            reasoning: (!reasoning.is_empty()).then_some(Value::Array(reasoning)),
        }
    }
}

/// Anthropic's stop reasons in OpenAI's words (as Hermes maps them).
fn finish_reason(stop: &str) -> String {
    match stop {
        "tool_use" => "tool_calls",
        "max_tokens" | "model_context_window_exceeded" => "length",
        "refusal" => "content_filter",
        _ => "stop",
    }
    .to_owned()
}

impl super::Decoder for Accumulator {
    fn event(&mut self, data: &str) -> Result<Decoded, String> {
        let event: Map<String, Value> =
            serde_json::from_str(data).map_err(|e| format!("unreadable stream event: {e}"))?;
        match event
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or_default()
        {
            "message_start" => self.usage_from(&event["message"]["usage"]),
            "content_block_start" => self.start(&event["content_block"]),
            "content_block_delta" => {
                if let Some(text) = self.delta(&event["delta"]).filter(|t| !t.is_empty()) {
                    return Ok(Decoded::Text(text));
                }
            }
            "message_delta" => {
                if let Some(stop) = event["delta"]["stop_reason"].as_str() {
                    self.stop_reason = Some(stop.to_owned());
                }
                self.usage_from(&event["usage"]);
            }
            "message_stop" => {
                self.stopped = true;
                return Ok(Decoded::Done);
            }
            "error" => {
                return Err(format!(
                    "provider error: {}",
                    super::error_message(&Value::Object(event).to_string())
                ));
            }
            _ => {} // ping, content_block_stop, and kinds added later
        }
        Ok(Decoded::Nothing)
    }

    fn complete(&self) -> bool {
        self.stopped || self.stop_reason.is_some()
    }

    fn finish(self: Box<Self>) -> Completion {
        self.done()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::Decoder;

    #[test]
    fn the_conversation_becomes_anthropic_messages() {
        let messages = vec![
            json!({"role": "system", "content": "be brief"}),
            json!({"role": "user", "content": "list files"}),
            json!({"role": "assistant", "content": null, "reasoning_blocks": [{"type": "thinking", "thinking": "hm", "signature": "s1"}],
                   "tool_calls": [{"id": "t1", "type": "function", "function": {"name": "terminal", "arguments": "{\"command\":\"ls\"}"}},
                                  {"id": "t2", "type": "function", "function": {"name": "terminal", "arguments": "{oops"}}]}),
            json!({"role": "tool", "tool_call_id": "t1", "content": "a b"}),
            json!({"role": "tool", "tool_call_id": "t2", "content": ""}),
            json!({"role": "user", "content": "also this"}),
            json!({"role": "user", "content": [{"type": "text", "text": "see"}, {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]}),
        ];
        let config = crate::llm::tests::model("http://x/anthropic");
        let body = body(&config, &messages, &[]);
        assert_eq!(body["system"][0]["text"], "be brief");
        let turns = body["messages"].as_array().unwrap();
        assert_eq!(turns.len(), 3, "{turns:#?}");
        assert_eq!(turns[1]["content"][0]["type"], "thinking");
        assert_eq!(turns[1]["content"][1]["input"], json!({"command": "ls"}));
        assert_eq!(turns[1]["content"][2]["input"], json!({}));
        let last = turns[2]["content"].as_array().unwrap();
        let kinds: Vec<&str> = last.iter().map(|b| b["type"].as_str().unwrap()).collect();
        assert_eq!(
            kinds,
            ["tool_result", "tool_result", "text", "text", "image"]
        );
        assert_eq!(last[1]["content"], "(no output)");
        assert_eq!(last[4]["source"]["media_type"], "image/png");
        let marks = body.to_string().matches("cache_control").count();
        assert_eq!(marks, 4, "system + three messages");
    }

    #[test]
    fn streamed_events_make_a_completion() {
        let mut acc = Accumulator::default();
        let mut shown = String::new();
        for event in [
            json!({"type": "message_start", "message": {"usage": {"input_tokens": 10, "cache_read_input_tokens": 40, "cache_creation_input_tokens": 30, "output_tokens": 1}}}),
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": ""}}),
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "let me see"}}),
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "sig"}}),
            json!({"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}}),
            json!({"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "Checking."}}),
            json!({"type": "content_block_start", "index": 2, "content_block": {"type": "tool_use", "id": "toolu_1", "name": "terminal", "input": {}}}),
            json!({"type": "content_block_delta", "index": 2, "delta": {"type": "input_json_delta", "partial_json": "{\"command\":"}}),
            json!({"type": "content_block_delta", "index": 2, "delta": {"type": "input_json_delta", "partial_json": "\"ls\"}"}}),
            json!({"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 7}}),
        ] {
            if let Decoded::Text(t) = acc.event(&event.to_string()).unwrap() {
                shown.push_str(&t);
            }
        }
        assert!(matches!(
            acc.event(r#"{"type":"message_stop"}"#).unwrap(),
            Decoded::Done
        ));
        let c = Box::new(acc).finish();
        assert_eq!(shown, "Checking.");
        assert_eq!(c.content, "Checking.");
        assert_eq!(c.finish_reason.as_deref(), Some("tool_calls"));
        assert_eq!(c.tool_calls[0].arguments, "{\"command\":\"ls\"}");
        assert_eq!(
            c.reasoning.unwrap()[0]["signature"],
            json!("sig"),
            "thinking is kept to replay"
        );
        assert_eq!(
            (
                c.usage.prompt,
                c.usage.cached,
                c.usage.cache_write,
                c.usage.completion
            ),
            (80, 40, 30, 7)
        );
    }

    #[test]
    fn oauth_tokens_go_as_bearer_and_keys_as_x_api_key() {
        let mut config = crate::llm::tests::model("http://x");
        config.api_key = Some(crate::config::Secret::new("sk-ant-api03-k"));
        assert!(headers(&config).contains(&("x-api-key", "sk-ant-api03-k".to_owned())));
        config.api_key = Some(crate::config::Secret::new("sk-ant-oat01-t"));
        let h = headers(&config);
        assert!(h.contains(&("authorization", "Bearer sk-ant-oat01-t".to_owned())));
        assert!(
            h.iter()
                .any(|(k, v)| *k == "anthropic-beta" && v.contains("oauth"))
        );
        assert_eq!(
            url("https://api.minimax.io/anthropic"),
            "https://api.minimax.io/anthropic/v1/messages"
        );
        assert_eq!(url("http://h/v1/"), "http://h/v1/messages");
    }

    #[test]
    fn thinking_budget_stays_below_the_output_cap() {
        let mut config = crate::llm::tests::model("http://x");
        config.model = "claude-3-haiku".into();
        config.reasoning_effort = Some("high".into());
        let body = body(&config, &[json!({"role": "user", "content": "hi"})], &[]);
        assert_eq!(body["thinking"]["budget_tokens"], 16_000);
        assert!(body["max_tokens"].as_u64().unwrap() > 16_000);
    }
}
