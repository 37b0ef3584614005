//! Anthropic's Messages dialect (`POST {base}/v1/messages`): the agent's OpenAI-shaped
//! conversation turned into Anthropic's (a top-level system prompt; tool results as
//! `tool_result` blocks of a user message; consecutive messages of one role merged; images
//! as base64 blocks; the turn's thinking blocks replayed before its tool calls), prompt
//! caching with `cache_control` on the system prompt and the last three messages, thinking
//! from `agent.reasoning_effort` as Hermes asks for it (adaptive on Claude 4.6 and later,
//! a budget on older models), and the streamed events read back into a [`Completion`]
//! (stop reasons mapped to OpenAI's finish reasons).

use serde_json::{Map, Value, json};

use super::{Completion, Decoded, ToolCall, Usage};
use crate::config::ModelConfig;

/// The API version every request names.
const VERSION: &str = "2023-06-01";

/// What an OAuth (subscription) token's requests must open the system prompt with, as
/// Hermes and Claude Code send it: Anthropic routes those requests by this identity.
const OAUTH_IDENTITY: &str = "You are Claude Code, Anthropic's official CLI for Claude.";

/// Where the request goes: `{base}/v1/messages` (a base already ending in `/v1` gets
/// `/messages`).
pub(crate) fn url(base_url: &str) -> String {
    let base = base_url.trim_end_matches('/');
    if base.ends_with("/v1") {
        format!("{base}/messages")
    } else {
        format!("{base}/v1/messages")
    }
}

fn is_oauth(config: &ModelConfig) -> bool {
    config
        .api_key
        .as_ref()
        .is_some_and(|k| k.expose().starts_with("sk-ant-oat"))
}

/// Whether the endpoint is Anthropic's own (others speaking the dialect, such as MiniMax,
/// take the key as a bearer token too).
fn is_anthropic_host(config: &ModelConfig) -> bool {
    reqwest::Url::parse(&config.base_url)
        .ok()
        .and_then(|u| u.host_str().map(|h| h == "api.anthropic.com"))
        .unwrap_or(false)
}

/// The headers, the key's included: `x-api-key` for API keys; an OAuth token
/// (`sk-ant-oat…`) goes as a bearer token with Claude Code's identity, as Hermes sends it.
pub(crate) fn headers(config: &ModelConfig) -> Vec<(&'static str, String)> {
    let mut headers = vec![("anthropic-version", VERSION.to_owned())];
    let mut betas: Vec<&str> = Vec::new();
    if let Some(key) = &config.api_key {
        let key = key.expose();
        if is_oauth(config) {
            headers.push(("authorization", format!("Bearer {key}")));
            headers.push(("user-agent", "claude-code/2.1.0 (external, cli)".into()));
            headers.push(("x-app", "cli".into()));
            betas.extend(["claude-code-20250219", "oauth-2025-04-20"]);
        } else {
            headers.push(("x-api-key", key.to_owned()));
            if !is_anthropic_host(config) {
                headers.push(("authorization", format!("Bearer {key}")));
            }
        }
    }
    if matches!(thinking(config), Some(Thinking::Budget(_))) {
        betas.push("interleaved-thinking-2025-05-14");
    }
    if !betas.is_empty() {
        headers.push(("anthropic-beta", betas.join(",")));
    }
    headers
}

/// The model's own output cap (Hermes' table; unknown models get the newest models' cap).
fn model_cap(model: &str) -> u32 {
    let model = model.to_ascii_lowercase();
    if ["opus-4-6", "opus-4-7", "opus-4-8"]
        .iter()
        .any(|m| model.contains(m))
    {
        128_000
    } else if model.contains("opus-4") {
        32_000
    } else if ["sonnet-4", "haiku-4", "claude-3-7", "claude-3.7"]
        .iter()
        .any(|m| model.contains(m))
    {
        64_000
    } else if model.contains("claude-3-5") || model.contains("claude-3.5") {
        8_192
    } else if model.contains("claude-3") {
        4_096
    } else {
        128_000
    }
}

/// The output cap: `model.max_tokens`, else the model's own; a thinking budget gets room
/// above it.
fn max_tokens(config: &ModelConfig) -> u32 {
    let cap = config
        .max_tokens
        .unwrap_or_else(|| model_cap(&config.model))
        .max(1);
    match thinking(config) {
        Some(Thinking::Budget(budget)) if cap <= budget => budget + 4_096,
        _ => cap,
    }
}

/// How the model is asked to think.
#[derive(Debug, PartialEq)]
enum Thinking {
    /// Claude 4.6 and later (and unknown Claude models): `adaptive`, with an effort.
    Adaptive(&'static str),
    /// Older Claude models and other models behind the dialect: a token budget.
    Budget(u32),
}

/// Thinking for `agent.reasoning_effort`, as Hermes decides it: none for `none`, Haiku and
/// Claude 3 before 3.7; adaptive for Claude models newer than the manual-budget families;
/// else a budget (low 4000 … xhigh 32000).
fn thinking(config: &ModelConfig) -> Option<Thinking> {
    const MANUAL: &[&str] = &[
        "claude-3",
        "claude-opus-4-0",
        "claude-opus-4.0",
        "claude-opus-4-1",
        "claude-opus-4.1",
        "claude-sonnet-4-0",
        "claude-sonnet-4.0",
        "claude-opus-4-2025",
        "claude-sonnet-4-2025",
        "claude-opus-4-5",
        "claude-opus-4.5",
        "claude-sonnet-4-5",
        "claude-sonnet-4.5",
        "claude-haiku-4-5",
        "claude-haiku-4.5",
    ];
    const NO_XHIGH: &[&str] = &[
        "claude-opus-4-6",
        "claude-opus-4.6",
        "claude-sonnet-4-6",
        "claude-sonnet-4.6",
    ];
    let effort = config.reasoning_effort.as_deref()?;
    let model = config.model.to_ascii_lowercase();
    let no_thinking = model.contains("haiku")
        || (model.contains("claude-3")
            && !(model.contains("claude-3-7") || model.contains("claude-3.7")));
    if effort == "none" || no_thinking {
        return None;
    }
    let claude = model.contains("claude");
    if claude && !MANUAL.iter().any(|m| model.contains(m)) {
        let level = match effort {
            "ultra" | "max" => "max",
            "xhigh" if NO_XHIGH.iter().any(|m| model.contains(m)) => "max",
            "xhigh" => "xhigh",
            "high" => "high",
            "medium" => "medium",
            _ => "low",
        };
        return Some(Thinking::Adaptive(level));
    }
    Some(Thinking::Budget(match effort {
        "minimal" | "low" => 4_000,
        "medium" => 8_000,
        "high" => 16_000,
        _ => 32_000,
    }))
}

/// The request body for the agent's `messages` (OpenAI-shaped) with `tools` (OpenAI
/// function definitions) offered.
pub(super) fn body(config: &ModelConfig, messages: &[Value], tools: &[Value]) -> Value {
    let mut system: Vec<&str> = messages
        .iter()
        .filter(|m| m["role"] == "system")
        .filter_map(|m| m["content"].as_str())
        .filter(|t| !t.is_empty())
        .collect();
    // Without tools on offer, Anthropic refuses tool blocks in the conversation (the
    // grace call at the end of the steps): they go as text.
    let mut turns = conversation(messages, tools.is_empty());
    let wanted = thinking(config);
    let thinking = wanted.filter(|_| final_turn_can_think(&mut turns, true));
    if thinking.is_none() {
        final_turn_can_think(&mut turns, false);
    }
    mark_cache_breakpoints(&mut turns);
    let mut body = json!({
        "model": config.model,
        "max_tokens": max_tokens(config),
        "messages": turns,
        "stream": true,
    });
    let oauth = is_oauth(config);
    if oauth {
        system.retain(|s| *s != OAUTH_IDENTITY);
    }
    let mut blocks: Vec<Value> = Vec::new();
    if oauth {
        blocks.push(text_block(OAUTH_IDENTITY));
    }
    if !system.is_empty() {
        // The system prompt is built once per session and sent byte for byte the same, so
        // this breakpoint's prefix is a cache hit on every later call.
        blocks.push(json!({
            "type": "text",
            "text": system.join("\n\n"),
            "cache_control": {"type": "ephemeral"},
        }));
    }
    if !blocks.is_empty() {
        body["system"] = Value::Array(blocks);
    }
    if !tools.is_empty() {
        body["tools"] = Value::Array(tools.iter().filter_map(tool).collect());
    }
    match thinking {
        Some(Thinking::Budget(budget)) => {
            body["thinking"] = json!({"type": "enabled", "budget_tokens": budget});
        }
        Some(Thinking::Adaptive(effort)) => {
            body["thinking"] = json!({"type": "adaptive", "display": "summarized"});
            body["output_config"] = json!({"effort": effort});
        }
        None => {}
    }
    body
}

/// With thinking on, Anthropic wants the final assistant turn (everything after the
/// person's last words) to open with a thinking block; with it off, that turn may hold
/// none. A turn whose first message has no thinking (written by another model, or carried
/// over from an interrupted turn, whose thinking is not kept) is answered without
/// thinking, and its thinking blocks are dropped (as they are when thinking is not
/// `wanted`). Whether thinking may be on.
fn final_turn_can_think(turns: &mut [Value], wanted: bool) -> bool {
    let is_thinking = |block: &Value| {
        matches!(
            block["type"].as_str(),
            Some("thinking" | "redacted_thinking")
        )
    };
    // The person's last words: the last user message with more than tool results.
    let start = turns
        .iter()
        .rposition(|t| {
            t["role"] == "user"
                && t["content"]
                    .as_array()
                    .is_some_and(|blocks| blocks.iter().any(|b| b["type"] != "tool_result"))
        })
        .map_or(0, |i| i + 1);
    let opens_with_thinking = wanted
        && turns[start..]
            .iter()
            .find(|t| t["role"] == "assistant")
            .is_none_or(|t| {
                t["content"][0]
                    .as_object()
                    .is_some_and(|_| is_thinking(&t["content"][0]))
            });
    if !opens_with_thinking {
        for turn in &mut turns[start..] {
            if let Some(blocks) = turn["content"].as_array_mut() {
                blocks.retain(|b| !is_thinking(b));
            }
        }
    }
    opens_with_thinking
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
/// starting with the person. `tools_as_text`: tool calls and results written as text.
fn conversation(messages: &[Value], tools_as_text: bool) -> Vec<Value> {
    let mut turns: Vec<(String, Vec<Value>)> = Vec::new();
    for message in messages {
        let (role, blocks) = match message["role"].as_str().unwrap_or_default() {
            "system" => continue,
            "assistant" => ("assistant", assistant_blocks(message, tools_as_text)),
            "tool" => ("user", vec![tool_result(message, tools_as_text)]),
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

/// A tool call id as Anthropic takes it (`^[a-zA-Z0-9_-]+$`): ids other providers minted
/// (`functions.terminal:0`) are mapped the same way in the call and its result.
fn tool_id(id: &Value) -> Value {
    let id = id.as_str().unwrap_or_default();
    let clean: String = id
        .chars()
        .map(|c| match c {
            'a'..='z' | 'A'..='Z' | '0'..='9' | '_' | '-' => c,
            _ => '_',
        })
        .collect();
    json!(if clean.is_empty() {
        "call".into()
    } else {
        clean
    })
}

/// The assistant's thinking (replayed as it came), text and tool calls.
fn assistant_blocks(message: &Value, tools_as_text: bool) -> Vec<Value> {
    let mut blocks: Vec<Value> = if tools_as_text {
        Vec::new()
    } else {
        message
            .get("reasoning_blocks")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    if let Some(text) = message["content"].as_str().filter(|t| !t.trim().is_empty()) {
        blocks.push(text_block(text));
    }
    for call in message["tool_calls"].as_array().into_iter().flatten() {
        let arguments = call["function"]["arguments"].as_str().unwrap_or("{}");
        if tools_as_text {
            blocks.push(text_block(&format!(
                "[called {} with {arguments}]",
                call["function"]["name"].as_str().unwrap_or("a tool")
            )));
            continue;
        }
        // Arguments that are not a JSON object were answered with an error result; the
        // call is replayed with empty input so the pair stays whole.
        let input = serde_json::from_str::<Value>(arguments)
            .ok()
            .filter(Value::is_object)
            .unwrap_or_else(|| json!({}));
        blocks.push(json!({
            "type": "tool_use",
            "id": tool_id(&call["id"]),
            "name": call["function"]["name"],
            "input": input,
        }));
    }
    blocks
}

fn tool_result(message: &Value, as_text: bool) -> Value {
    let text = message["content"].as_str().unwrap_or_default();
    let text = if text.is_empty() { "(no output)" } else { text };
    if as_text {
        return text_block(&format!("[tool result]\n{text}"));
    }
    json!({
        "type": "tool_result",
        "tool_use_id": tool_id(&message["tool_call_id"]),
        "content": text,
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
    input: u64,
    cache_read: u64,
    cache_written: u64,
}

impl Accumulator {
    fn usage_from(&mut self, usage: &Value) {
        let n = |key: &str| usage.get(key).and_then(Value::as_u64);
        // Anthropic counts cached tokens apart from `input_tokens`; `prompt` is everything
        // read, as OpenAI counts it. Later events repeat totals: only what they say
        // replaces what came before.
        if let Some(read) = n("cache_read_input_tokens") {
            self.cache_read = read;
        }
        if let Some(written) = n("cache_creation_input_tokens") {
            self.cache_written = written;
        }
        if let Some(input) = n("input_tokens") {
            self.input = input;
        }
        self.usage.prompt = self
            .input
            .saturating_add(self.cache_read)
            .saturating_add(self.cache_written);
        self.usage.cached = self.cache_read;
        self.usage.cache_write = self.cache_written;
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
        let tools = [
            json!({"type": "function", "function": {"name": "terminal", "parameters": {"type": "object"}}}),
        ];
        let body = body(&config, &messages, &tools);
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
        // Not Anthropic's own host (MiniMax…): as a bearer token too.
        assert!(
            headers(&config)
                .iter()
                .any(|(k, v)| *k == "authorization" && v == "Bearer sk-ant-api03-k")
        );
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
    fn thinking_is_asked_for_as_each_model_takes_it() {
        let ask = |model: &str, effort: &str, max_tokens: Option<u32>| {
            let mut config = crate::llm::tests::model("http://x");
            config.model = model.into();
            config.reasoning_effort = Some(effort.into());
            config.max_tokens = max_tokens;
            body(&config, &[json!({"role": "user", "content": "hi"})], &[])
        };
        // A budget on the older families, with room above it.
        let older = ask("claude-sonnet-4-5", "high", Some(8_000));
        assert_eq!(older["thinking"]["budget_tokens"], 16_000);
        assert!(older["max_tokens"].as_u64().unwrap() > 16_000);
        // Adaptive on 4.6 and later (xhigh only from 4.7).
        let newer = ask("claude-opus-4-7", "xhigh", None);
        assert_eq!(newer["thinking"]["type"], "adaptive");
        assert_eq!(newer["output_config"]["effort"], "xhigh");
        assert_eq!(
            ask("claude-opus-4-6", "xhigh", None)["output_config"]["effort"],
            "max"
        );
        // None where the model has none, or when asked for none.
        assert!(
            ask("claude-3-haiku", "high", None)
                .get("thinking")
                .is_none()
        );
        assert!(
            ask("claude-haiku-4-5", "high", None)
                .get("thinking")
                .is_none()
        );
        assert!(
            ask("claude-opus-4-7", "none", None)
                .get("thinking")
                .is_none()
        );
        // Other models behind the dialect get a budget.
        assert_eq!(
            ask("MiniMax-M2", "low", None)["thinking"]["budget_tokens"],
            4_000
        );
    }

    #[test]
    fn a_final_turn_without_thinking_is_answered_without_it() {
        let mut config = crate::llm::tests::model("http://x");
        config.model = "claude-sonnet-4-5".into();
        config.reasoning_effort = Some("low".into());
        let call = |id: &str, thinking: bool| {
            let mut m = json!({"role": "assistant", "content": null,
                "tool_calls": [{"id": id, "type": "function", "function": {"name": "terminal", "arguments": "{}"}}]});
            if thinking {
                m["reasoning_blocks"] =
                    json!([{"type": "thinking", "thinking": "t", "signature": "s"}]);
            }
            m
        };
        let result = |id: &str| json!({"role": "tool", "tool_call_id": id, "content": "ok"});
        // The turn's first step thought, its second did not: thinking stays on.
        let messages = vec![
            json!({"role": "user", "content": "go"}),
            call("a", true),
            result("a"),
            call("b", false),
            result("b"),
        ];
        // No tools offered (the grace call): the tool blocks go as text.
        let grace = body(&config, &messages, &[]);
        let text = grace["messages"].to_string();
        assert!(
            !text.contains("tool_use") && !text.contains("tool_result"),
            "{text}"
        );
        assert!(text.contains("[called terminal with {}]"), "{text}");
        let tools = [
            json!({"type": "function", "function": {"name": "terminal", "parameters": {"type": "object"}}}),
        ];
        let on = body(&config, &messages, &tools);
        assert_eq!(on["thinking"]["type"], "enabled");
        // A turn carried over without its thinking: off, and no thinking block left in it.
        let carried = vec![
            json!({"role": "user", "content": "go"}),
            call("a", false),
            result("a"),
            call("b", true),
            result("b"),
        ];
        let off = body(&config, &carried, &tools);
        assert!(off.get("thinking").is_none());
        assert!(
            !off["messages"].to_string().contains("\"thinking\""),
            "{}",
            off["messages"]
        );
        // Ids other providers minted are made Anthropic's shape, the same in call and result.
        let odd = vec![
            json!({"role": "user", "content": "go"}),
            call("functions.terminal:0", false),
            result("functions.terminal:0"),
        ];
        let odd = body(&config, &odd, &tools);
        assert_eq!(
            odd["messages"][1]["content"][0]["id"],
            "functions_terminal_0"
        );
        assert_eq!(
            odd["messages"][2]["content"][0]["tool_use_id"],
            "functions_terminal_0"
        );
    }
}
