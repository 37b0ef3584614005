//! OpenAI's chat completions dialect (OpenAI, OpenRouter, Nous, Gemini's OpenAI endpoint,
//! local servers): the request body and headers, and the streamed deltas read back into a
//! [`Completion`]. OpenRouter gets its attribution headers, its cost report, and, for
//! Claude models, `cache_control` on the system prompt and the last three messages.

use std::borrow::Cow;

use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::value::RawValue;
use serde_json::{Map, Value, json};

use super::{Completion, Decoded, ToolCall, ToolDefinitions, Usage};
use crate::config::ModelConfig;

/// Keys the agent puts on messages for other dialects (Anthropic's thinking blocks): never
/// sent here.
const FOREIGN_KEYS: &[&str] = &["reasoning_blocks"];

/// The request body for `messages` with `tools` offered.
pub(super) fn body<'a>(
    config: &ModelConfig,
    messages: &'a [Value],
    tools: &'a ToolDefinitions,
    stream_options: bool,
) -> Body<'a> {
    let openrouter = config.provider == "openrouter";
    let messages = if openrouter && is_claude(&config.model) {
        let mut marked = messages.to_vec();
        mark_cache_breakpoints(&mut marked);
        Cow::Owned(marked)
    } else {
        Cow::Borrowed(messages)
    };
    let mut fields = Map::new();
    fields.insert("model".into(), json!(config.model));
    fields.insert("stream".into(), json!(true));
    // The last event then says how many tokens the call took (OpenAI's option; servers
    // that refuse it are asked without it from then on).
    if stream_options {
        fields.insert("stream_options".into(), json!({"include_usage": true}));
    }
    if let Some(max) = config.max_tokens {
        // OpenAI's newer models take only the newer name.
        let name = if config.provider == "openai" {
            "max_completion_tokens"
        } else {
            "max_tokens"
        };
        fields.insert(name.into(), json!(max));
    }
    if openrouter {
        // OpenRouter says what the call cost.
        fields.insert("usage".into(), json!({"include": true}));
    }
    // OpenRouter's Claude with reasoning wants its reasoning details sent back with tool
    // calls, which this dialect does not keep: no reasoning when tools are on offer.
    let keeps_reasoning = !(openrouter && is_claude(&config.model) && !tools.is_empty());
    if let Some(effort) = config
        .reasoning_effort
        .as_deref()
        .filter(|_| keeps_reasoning)
    {
        match (openrouter, effort) {
            (_, "none") if !openrouter => {}
            (true, "none") => {
                fields.insert("reasoning".into(), json!({"enabled": false}));
            }
            (true, effort) => {
                fields.insert("reasoning".into(), json!({"effort": openai_effort(effort)}));
            }
            (false, effort) if config.provider == "openai" => {
                fields.insert("reasoning_effort".into(), json!(openai_effort(effort)));
            }
            _ => {}
        }
    }
    Body {
        fields,
        messages,
        tools: tools.json(),
    }
}

/// A chat completions request body, serialised straight to bytes: its few small fields,
/// then the conversation and the shared tool definitions as they are (no `Value` tree of
/// the whole body, no copy of the messages or the tools).
pub(super) struct Body<'a> {
    fields: Map<String, Value>,
    messages: Cow<'a, [Value]>,
    tools: Option<&'a RawValue>,
}

impl Serialize for Body<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        for (key, value) in &self.fields {
            map.serialize_entry(key, value)?;
        }
        map.serialize_entry("messages", &Messages(&self.messages))?;
        if let Some(tools) = self.tools {
            map.serialize_entry("tools", tools)?;
        }
        map.end()
    }
}

/// The messages without the keys of other dialects ([`FOREIGN_KEYS`]).
struct Messages<'a>(&'a [Value]);

impl Serialize for Messages<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.0.iter().map(WithoutForeignKeys))
    }
}

struct WithoutForeignKeys<'a>(&'a Value);

impl Serialize for WithoutForeignKeys<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            Value::Object(message) if FOREIGN_KEYS.iter().any(|k| message.contains_key(*k)) => {
                serializer.collect_map(
                    message
                        .iter()
                        .filter(|(key, _)| !FOREIGN_KEYS.contains(&key.as_str())),
                )
            }
            other => other.serialize(serializer),
        }
    }
}

/// Hermes' levels in OpenAI's words.
fn openai_effort(effort: &str) -> &'static str {
    match effort {
        "minimal" => "minimal",
        "low" => "low",
        "medium" => "medium",
        _ => "high",
    }
}

/// The headers besides the key: OpenRouter's attribution (as Hermes sends it).
pub(super) fn headers(config: &ModelConfig) -> Vec<(&'static str, &'static str)> {
    if config.provider == "openrouter" {
        vec![
            ("HTTP-Referer", "https://hermes-agent.nousresearch.com"),
            ("X-Title", "Hermes Agent"),
        ]
    } else {
        Vec::new()
    }
}

fn is_claude(model: &str) -> bool {
    let model = model.to_ascii_lowercase();
    model.starts_with("anthropic/") || model.contains("claude")
}

/// Hermes' `system_and_3` for OpenRouter's Claude: an ephemeral `cache_control` on the
/// system prompt and on the last three other messages that have text, each as the last
/// part of its content (four breakpoints, Anthropic's most).
fn mark_cache_breakpoints(messages: &mut [Value]) {
    let mut marked_others = 0;
    for message in messages.iter_mut().rev() {
        let system = message["role"] == "system";
        if !system && marked_others == 3 {
            continue;
        }
        let content = &mut message["content"];
        let parts = match content {
            Value::String(text) if !text.is_empty() => {
                *content = json!([{"type": "text", "text": text.clone()}]);
                content.as_array_mut()
            }
            Value::Array(parts) if !parts.is_empty() => Some(parts),
            _ => None,
        };
        let Some(last) = parts.and_then(|p| p.last_mut()) else {
            continue;
        };
        last["cache_control"] = json!({"type": "ephemeral"});
        if !system {
            marked_others += 1;
        }
    }
}

/// Builds a completion from streamed deltas.
#[derive(Default)]
pub(super) struct Accumulator {
    content: String,
    /// Tool calls by their stream index.
    calls: Vec<(usize, ToolCall)>,
    finish_reason: Option<String>,
    saw_finish: bool,
    usage: Usage,
}

impl Accumulator {
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

    pub(super) fn finish(mut self) -> Completion {
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
            reasoning: None,
        }
    }
}

pub(super) fn parse_full(value: &Value) -> Result<Completion, String> {
    let message = value
        .pointer("/choices/0/message")
        .ok_or("no choices in the response")?;
    let mut acc = Accumulator::default();
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

impl super::Decoder for Accumulator {
    fn event(&mut self, data: &str) -> Result<Decoded, String> {
        if data == "[DONE]" {
            return Ok(Decoded::Done);
        }
        let value: Value =
            serde_json::from_str(data).map_err(|e| format!("unreadable stream event: {e}"))?;
        if let Some(error) = value.get("error").filter(|e| !e.is_null()) {
            return Err(format!("provider error: {error}"));
        }
        let before = self.content.len();
        self.absorb(&value);
        Ok(match self.content.len() > before {
            true => Decoded::Text(self.content[before..].to_owned()),
            false => Decoded::Nothing,
        })
    }

    fn complete(&self) -> bool {
        self.saw_finish
    }

    fn finish(self: Box<Self>) -> Completion {
        Accumulator::finish(*self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn as_value(body: Body) -> Value {
        serde_json::to_value(&body).unwrap()
    }

    #[test]
    fn the_body_carries_the_tools_as_they_are_and_no_foreign_keys() {
        let config = crate::llm::tests::model("http://x");
        let messages = vec![
            json!({"role": "user", "content": "hi"}),
            json!({"role": "assistant", "content": "ok", "reasoning_blocks": [{"type": "thinking"}]}),
        ];
        let tools = ToolDefinitions::new(vec![
            json!({"type": "function", "function": {"name": "terminal", "parameters": {"type": "object"}}}),
        ]);
        let body = as_value(body(&config, &messages, &tools, true));
        assert_eq!(body["tools"], Value::Array(tools.values().to_vec()));
        assert_eq!(body["messages"][0], messages[0]);
        assert_eq!(
            body["messages"][1],
            json!({"role": "assistant", "content": "ok"})
        );
        assert_eq!(body["stream_options"], json!({"include_usage": true}));
        assert_eq!(body["model"], json!(config.model));
        let none = as_value(super::body(
            &config,
            &messages,
            &ToolDefinitions::default(),
            false,
        ));
        assert!(none.get("tools").is_none() && none.get("stream_options").is_none());
    }

    #[test]
    fn streamed_tool_call_pieces_are_joined() {
        let mut acc = Accumulator::default();
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
    fn openrouter_claude_gets_four_cache_breakpoints_and_attribution() {
        let config = ModelConfig {
            provider: "openrouter".into(),
            model: "anthropic/claude-sonnet-4".into(),
            ..crate::llm::tests::model("http://x")
        };
        let messages: Vec<Value> = std::iter::once(json!({"role": "system", "content": "be brief"}))
            .chain((0..6).map(|i| json!({"role": if i % 2 == 0 {"user"} else {"assistant"}, "content": format!("m{i}")})))
            .collect();
        let none = ToolDefinitions::default();
        let body = as_value(body(&config, &messages, &none, true));
        let marked: Vec<usize> = body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .enumerate()
            .filter(|(_, m)| m["content"].to_string().contains("cache_control"))
            .map(|(i, _)| i)
            .collect();
        assert_eq!(marked, vec![0, 4, 5, 6]);
        assert_eq!(body["usage"], json!({"include": true}));
        assert!(headers(&config).iter().any(|(name, _)| *name == "X-Title"));
        // Not Claude: untouched text.
        let other = ModelConfig {
            model: "openai/gpt-5".into(),
            ..config
        };
        let body = as_value(super::body(&other, &messages, &none, true));
        assert_eq!(body["messages"][0]["content"], "be brief");
    }
}
