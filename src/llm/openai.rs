//! OpenAI's chat completions dialect (OpenAI, OpenRouter, Nous, Gemini's OpenAI endpoint,
//! local servers): the request body and headers, and the streamed deltas read back into a
//! [`Completion`]. OpenRouter gets its attribution headers, its cost report, and, for
//! Claude models, `cache_control` on the system prompt and the last three messages.

use serde_json::{Value, json};

use super::{Completion, Decoded, ToolCall, Usage};
use crate::config::ModelConfig;

/// Keys the agent puts on messages for other dialects (Anthropic's thinking blocks): never
/// sent here.
const FOREIGN_KEYS: &[&str] = &["reasoning_blocks"];

/// The request body for `messages` with `tools` offered.
pub(super) fn body(
    config: &ModelConfig,
    messages: &[Value],
    tools: &[Value],
    stream_options: bool,
) -> Value {
    let mut messages: Vec<Value> = messages.to_vec();
    for message in &mut messages {
        if let Some(m) = message.as_object_mut() {
            for key in FOREIGN_KEYS {
                m.remove(*key);
            }
        }
    }
    let openrouter = config.provider == "openrouter";
    if openrouter && is_claude(&config.model) {
        mark_cache_breakpoints(&mut messages);
    }
    let mut body = json!({
        "model": config.model,
        "messages": messages,
        "stream": true,
    });
    // The last event then says how many tokens the call took (OpenAI's option; servers
    // that refuse it are asked without it from then on).
    if stream_options {
        body["stream_options"] = json!({"include_usage": true});
    }
    if !tools.is_empty() {
        body["tools"] = Value::Array(tools.to_vec());
    }
    if let Some(max) = config.max_tokens {
        // OpenAI's newer models take only the newer name.
        let name = if config.provider == "openai" {
            "max_completion_tokens"
        } else {
            "max_tokens"
        };
        body[name] = json!(max);
    }
    if openrouter {
        // OpenRouter says what the call cost.
        body["usage"] = json!({"include": true});
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
            (true, "none") => body["reasoning"] = json!({"enabled": false}),
            (true, effort) => body["reasoning"] = json!({"effort": openai_effort(effort)}),
            (false, effort) if config.provider == "openai" => {
                body["reasoning_effort"] = json!(openai_effort(effort))
            }
            _ => {}
        }
    }
    body
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
        let body = body(&config, &messages, &[], true);
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
        let body = super::body(&other, &messages, &[], true);
        assert_eq!(body["messages"][0]["content"], "be brief");
    }
}
