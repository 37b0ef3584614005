//! What the Messages API refuses before it answers, with the real API's messages: the
//! `x-api-key` (or `Authorization: Bearer`) and `anthropic-version` headers; then the body:
//! `model`, `max_tokens`, `messages`; `system` and `tools` shapes; each message's role,
//! content and blocks (text, image, tool_use, tool_result, thinking, redacted_thinking);
//! the first message from the user; `thinking` and its budget; at most 4 `cache_control`
//! markers; each `tool_use` answered by a `tool_result` in the next message and each
//! `tool_result` answering one in the message before; and, thinking on, the signed
//! thinking block that must open the assistant turn a final `tool_result` answers.

use std::collections::HashSet;

use axum::http::HeaderMap;
use base64::Engine;
use serde_json::Value;

use super::{Rejection, cache_control_count};

type Check = Result<(), Rejection>;

fn invalid(message: impl Into<String>) -> Check {
    Err(Rejection::invalid(message))
}

/// A key (`x-api-key`, or `Authorization: Bearer …`) and `anthropic-version`.
pub(super) fn check_headers(headers: &HeaderMap) -> Check {
    let value = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
            .filter(|v| !v.is_empty())
    };
    let bearer = value("authorization").is_some_and(|v| {
        v.get(..7)
            .is_some_and(|p| p.eq_ignore_ascii_case("bearer "))
            && !v[7..].trim().is_empty()
    });
    if value("x-api-key").is_none() && !bearer {
        return Err(Rejection {
            status: 401,
            kind: "authentication_error",
            message: "x-api-key header is required".into(),
        });
    }
    if value("anthropic-version").is_none() {
        return invalid("anthropic-version: header is required");
    }
    Ok(())
}

/// The body of a request, given the thinking signatures this fake handed out.
pub(super) fn check_body(body: &Value, signatures: &HashSet<String>) -> Check {
    if !body.is_object() {
        return invalid("Input should be a valid dictionary");
    }
    if !body["model"].is_string() {
        return invalid("model: Field required");
    }
    let Some(max_tokens) = body["max_tokens"].as_u64().filter(|&n| n >= 1) else {
        return invalid("max_tokens: Field required");
    };
    let Some(messages) = body["messages"].as_array().filter(|m| !m.is_empty()) else {
        return invalid("messages: at least one message is required");
    };
    check_system(&body["system"])?;
    check_tools(&body["tools"])?;
    for (n, message) in messages.iter().enumerate() {
        check_message(n, message, n + 1 == messages.len())?;
    }
    if messages[0]["role"] != "user" {
        return invalid("messages: first message must use the \"user\" role");
    }
    let last = &messages[messages.len() - 1];
    if last["role"] == "assistant" && final_text(&last["content"]).ends_with(char::is_whitespace) {
        return invalid("messages: final assistant content cannot end with trailing whitespace");
    }
    let thinking = check_thinking(body, max_tokens)?;
    let marked = cache_control_count(body);
    if marked > 4 {
        return invalid(format!(
            "A maximum of 4 blocks with cache_control may be provided. Found {marked}."
        ));
    }
    check_pairing(messages)?;
    let has_tool_blocks = messages.iter().any(|m| {
        m["content"].as_array().is_some_and(|blocks| {
            blocks
                .iter()
                .any(|b| matches!(b["type"].as_str(), Some("tool_use" | "tool_result")))
        })
    });
    if has_tool_blocks && body["tools"].as_array().is_none_or(|t| t.is_empty()) {
        return invalid(
            "Requests which include `tool_use` or `tool_result` blocks must define tools.",
        );
    }
    if thinking {
        check_thinking_block(messages, signatures)?;
    }
    Ok(())
}

/// The text a content ends with: the string, or its last block's text.
fn final_text(content: &Value) -> &str {
    match content {
        Value::String(text) => text,
        Value::Array(blocks) => blocks
            .last()
            .filter(|b| b["type"] == "text")
            .and_then(|b| b["text"].as_str())
            .unwrap_or_default(),
        _ => "",
    }
}

/// `system`: a string, or a list of text blocks.
fn check_system(system: &Value) -> Check {
    match system {
        Value::Null | Value::String(_) => Ok(()),
        Value::Array(blocks) => {
            for (k, block) in blocks.iter().enumerate() {
                if block["type"] != "text" {
                    return invalid(format!("system.{k}.type: Input should be 'text'"));
                }
                match block["text"].as_str() {
                    None => return invalid(format!("system.{k}.text: Field required")),
                    Some("") => return invalid("system: text content blocks must be non-empty"),
                    Some(_) => {}
                }
            }
            Ok(())
        }
        _ => invalid("system: Input should be a valid list"),
    }
}

/// `tools`: each a name of `[a-zA-Z0-9_-]{1,128}` and an object `input_schema` (server
/// tools, `type` like `web_search_20250305`, need no schema); names unique.
fn check_tools(tools: &Value) -> Check {
    let tools = match tools {
        Value::Null => return Ok(()),
        Value::Array(tools) => tools,
        _ => return invalid("tools: Input should be a valid list"),
    };
    let mut names = HashSet::new();
    for (n, tool) in tools.iter().enumerate() {
        let Some(name) = tool["name"].as_str() else {
            return invalid(format!("tools.{n}.name: Field required"));
        };
        let pattern = (1..=128).contains(&name.len())
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        if !pattern {
            return invalid(format!(
                "tools.{n}.name: String should match pattern '^[a-zA-Z0-9_-]{{1,128}}$'"
            ));
        }
        let server_tool = tool["type"]
            .as_str()
            .is_some_and(|t| t != "custom" && t.contains("_20"));
        let schema = &tool["input_schema"];
        let schema_ok = schema.is_object() && schema["type"] == "object";
        if !(server_tool || schema_ok) {
            return invalid(format!(
                "tools.{n}.input_schema: Input should be a valid dictionary or object"
            ));
        }
        if !names.insert(name) {
            return invalid("tools: Tool names must be unique.");
        }
    }
    Ok(())
}

/// One message: its role, and non-empty content of known blocks (the final message may be
/// an empty assistant one, a prefill).
fn check_message(n: usize, message: &Value, last: bool) -> Check {
    let role = match message["role"].as_str() {
        Some(role @ ("user" | "assistant")) => role,
        Some(_) => {
            return invalid(format!(
                "messages.{n}.role: Input should be 'user' or 'assistant'"
            ));
        }
        None => return invalid(format!("messages.{n}.role: Field required")),
    };
    let may_be_empty = last && role == "assistant";
    let empty = || {
        invalid(format!(
            "messages.{n}: all messages must have non-empty content except for the optional final assistant message"
        ))
    };
    let blocks = match &message["content"] {
        Value::Null => return invalid(format!("messages.{n}.content: Field required")),
        Value::String(text) if text.is_empty() => {
            return if may_be_empty { Ok(()) } else { empty() };
        }
        Value::String(text) if text.trim().is_empty() && !may_be_empty => {
            return invalid("messages: text content blocks must contain non-whitespace text");
        }
        Value::String(_) => return Ok(()),
        Value::Array(blocks) if blocks.is_empty() => {
            return if may_be_empty { Ok(()) } else { empty() };
        }
        Value::Array(blocks) => blocks,
        _ => {
            return invalid(format!(
                "messages.{n}.content: Input should be a valid list"
            ));
        }
    };
    for (m, block) in blocks.iter().enumerate() {
        check_block(&format!("messages.{n}.content.{m}"), block)?;
    }
    // Whitespace-only text is refused when the message has no other text.
    let texts: Vec<&str> = blocks
        .iter()
        .filter(|b| b["type"] == "text")
        .filter_map(|b| b["text"].as_str())
        .collect();
    if !texts.is_empty() && texts.iter().all(|t| t.trim().is_empty()) && !may_be_empty {
        return invalid("messages: text content blocks must contain non-whitespace text");
    }
    Ok(())
}

/// A string field `field` of a block at `at` (`at` ends with the block's tag).
fn string_field<'a>(at: &str, block: &'a Value, field: &str) -> Result<&'a str, Rejection> {
    match &block[field] {
        Value::String(s) => Ok(s),
        Value::Null => Err(Rejection::invalid(format!("{at}.{field}: Field required"))),
        _ => Err(Rejection::invalid(format!(
            "{at}.{field}: Input should be a valid string"
        ))),
    }
}

/// One content block of a message, at `at` (`messages.N.content.M`).
fn check_block(at: &str, block: &Value) -> Check {
    let Some(kind) = block["type"].as_str() else {
        return invalid(format!(
            "{at}: Unable to extract tag using discriminator 'type'"
        ));
    };
    let tagged = format!("{at}.{kind}");
    match kind {
        "text" => check_text(&tagged, block),
        "image" => check_image(&tagged, block),
        "tool_use" => {
            string_field(&tagged, block, "id")?;
            string_field(&tagged, block, "name")?;
            if !block["input"].is_object() {
                return invalid(format!(
                    "{tagged}.input: Input should be a valid dictionary"
                ));
            }
            Ok(())
        }
        "tool_result" => {
            string_field(&tagged, block, "tool_use_id")?;
            if !(block["is_error"].is_null() || block["is_error"].is_boolean()) {
                return invalid(format!(
                    "{tagged}.is_error: Input should be a valid boolean"
                ));
            }
            match &block["content"] {
                Value::Null | Value::String(_) => Ok(()),
                Value::Array(parts) => {
                    for (k, part) in parts.iter().enumerate() {
                        let at = format!("{tagged}.content.{k}");
                        match part["type"].as_str() {
                            Some("text") => check_text(&format!("{at}.text"), part)?,
                            Some("image") => check_image(&format!("{at}.image"), part)?,
                            Some(other) => {
                                return invalid(format!(
                                    "{at}.type: Input tag '{other}' found using 'type' does not match any of the expected tags"
                                ));
                            }
                            None => {
                                return invalid(format!(
                                    "{at}: Unable to extract tag using discriminator 'type'"
                                ));
                            }
                        }
                    }
                    Ok(())
                }
                _ => invalid(format!("{tagged}.content: Input should be a valid list")),
            }
        }
        "thinking" => {
            string_field(&tagged, block, "thinking")?;
            string_field(&tagged, block, "signature")?;
            Ok(())
        }
        "redacted_thinking" => string_field(&tagged, block, "data").map(drop),
        other => invalid(format!(
            "{at}.type: Input tag '{other}' found using 'type' does not match any of the expected tags"
        )),
    }
}

/// A text block: a non-empty `text`.
fn check_text(at: &str, block: &Value) -> Check {
    if string_field(at, block, "text")?.is_empty() {
        return invalid("messages: text content blocks must be non-empty");
    }
    Ok(())
}

/// An image block: a `base64` source of a supported type whose bytes are of that type (as
/// far as their first bytes tell), or a `url` source.
fn check_image(at: &str, block: &Value) -> Check {
    let source = &block["source"];
    if !source.is_object() {
        return invalid(format!("{at}.source: Field required"));
    }
    match source["type"].as_str() {
        Some("url") => string_field(&format!("{at}.source.url"), source, "url").map(drop),
        Some("base64") => {
            let at = format!("{at}.source.base64");
            let media_type = string_field(&at, source, "media_type")?;
            if !["image/jpeg", "image/png", "image/gif", "image/webp"].contains(&media_type) {
                return invalid(format!(
                    "{at}.media_type: Input should be 'image/jpeg', 'image/png', 'image/gif' or 'image/webp'"
                ));
            }
            let data = string_field(&at, source, "data")?;
            let Ok(bytes) = base64::engine::general_purpose::STANDARD.decode(data) else {
                return invalid(format!("{at}.data: Invalid base64 data"));
            };
            match sniff(&bytes) {
                Some(found) if found != media_type => invalid(format!(
                    "{at}: The image was specified using the {media_type} media type, but the image appears to be a {found} image"
                )),
                _ => Ok(()),
            }
        }
        Some(other) => invalid(format!(
            "{at}.source.type: Input tag '{other}' found using 'type' does not match any of the expected tags"
        )),
        None => invalid(format!(
            "{at}.source: Unable to extract tag using discriminator 'type'"
        )),
    }
}

/// The image type the first bytes say, if they are one of the four.
fn sniff(bytes: &[u8]) -> Option<&'static str> {
    if bytes.starts_with(&[0xff, 0xd8, 0xff]) {
        Some("image/jpeg")
    } else if bytes.starts_with(b"\x89PNG") {
        Some("image/png")
    } else if bytes.starts_with(b"GIF8") {
        Some("image/gif")
    } else if bytes.len() >= 12 && bytes.starts_with(b"RIFF") && &bytes[8..12] == b"WEBP" {
        Some("image/webp")
    } else {
        None
    }
}

/// `thinking` (and what it rules out); whether it is on.
fn check_thinking(body: &Value, max_tokens: u64) -> Result<bool, Rejection> {
    let thinking = &body["thinking"];
    let on = match thinking["type"].as_str() {
        _ if thinking.is_null() => false,
        Some("disabled") => false,
        Some("adaptive") => true,
        Some("enabled") => {
            let Some(budget) = thinking["budget_tokens"].as_u64() else {
                return Err(Rejection::invalid(
                    "thinking.enabled.budget_tokens: Field required",
                ));
            };
            if budget < 1024 {
                return Err(Rejection::invalid(
                    "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024",
                ));
            }
            if budget >= max_tokens {
                return Err(Rejection::invalid(
                    "`max_tokens` must be greater than `thinking.budget_tokens`",
                ));
            }
            true
        }
        Some(other) => {
            return Err(Rejection::invalid(format!(
                "thinking: Input tag '{other}' found using 'type' does not match any of the expected tags"
            )));
        }
        None => {
            return Err(Rejection::invalid(
                "thinking: Unable to extract tag using discriminator 'type'",
            ));
        }
    };
    if on {
        if matches!(body["tool_choice"]["type"].as_str(), Some("any" | "tool")) {
            return Err(Rejection::invalid(
                "Thinking may not be enabled when tool_choice forces tool use.",
            ));
        }
        if body["temperature"].as_f64().is_some_and(|t| t != 1.0) {
            return Err(Rejection::invalid(
                "`temperature` may only be set to 1 when thinking is enabled.",
            ));
        }
    }
    Ok(on)
}

/// The blocks of a message's content of type `kind`, with their index.
fn blocks_of<'a>(message: &'a Value, kind: &'a str) -> impl Iterator<Item = (usize, &'a Value)> {
    message["content"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
        .filter(move |(_, b)| b["type"] == kind)
}

/// Each `tool_use` answered by a `tool_result` in the very next message, each `tool_result`
/// answering a `tool_use` of the message before; `tool_use` ids unique.
fn check_pairing(messages: &[Value]) -> Check {
    let mut seen = HashSet::new();
    for (n, message) in messages.iter().enumerate() {
        let previous: HashSet<&str> = match n.checked_sub(1) {
            Some(p) => blocks_of(&messages[p], "tool_use")
                .filter_map(|(_, b)| b["id"].as_str())
                .collect(),
            None => HashSet::new(),
        };
        for (m, result) in blocks_of(message, "tool_result") {
            let id = result["tool_use_id"].as_str().unwrap_or_default();
            if !previous.contains(id) {
                return invalid(format!(
                    "messages.{n}.content.{m}: unexpected `tool_use_id` found in `tool_result` blocks: {id}. Each `tool_result` block must have a corresponding `tool_use` block in the previous message."
                ));
            }
        }
        let uses: Vec<(usize, &str)> = blocks_of(message, "tool_use")
            .map(|(m, b)| (m, b["id"].as_str().unwrap_or_default()))
            .collect();
        for &(m, id) in &uses {
            if !seen.insert(id) {
                return invalid(format!(
                    "messages.{n}.content.{m}: `tool_use` ids must be unique"
                ));
            }
        }
        let answered: HashSet<&str> = messages
            .get(n + 1)
            .map(|next| {
                blocks_of(next, "tool_result")
                    .filter_map(|(_, b)| b["tool_use_id"].as_str())
                    .collect()
            })
            .unwrap_or_default();
        let missing: Vec<&str> = uses
            .iter()
            .map(|&(_, id)| id)
            .filter(|id| !answered.contains(id))
            .collect();
        if !missing.is_empty() {
            return invalid(format!(
                "messages.{n}: `tool_use` ids were found without `tool_result` blocks immediately after: {}. Each `tool_use` block must have a corresponding `tool_result` block in the next message.",
                missing.join(", ")
            ));
        }
    }
    Ok(())
}

/// Thinking on, and the request ending with `tool_result`s: the assistant message they
/// answer must open with a thinking block this fake signed (or a redacted one).
fn check_thinking_block(messages: &[Value], signatures: &HashSet<String>) -> Check {
    let last = messages.len() - 1;
    let ends_with_results =
        messages[last]["role"] == "user" && blocks_of(&messages[last], "tool_result").count() > 0;
    if !ends_with_results || last == 0 {
        return Ok(());
    }
    let n = last - 1;
    let first = match &messages[n]["content"] {
        Value::Array(blocks) => blocks.first().cloned().unwrap_or_default(),
        Value::String(_) => serde_json::json!({"type": "text"}),
        _ => Value::Null,
    };
    match first["type"].as_str().unwrap_or_default() {
        "thinking" => {
            let signature = first["signature"].as_str().unwrap_or_default();
            if !signatures.contains(signature) {
                return invalid(format!(
                    "messages.{n}.content.0: Invalid `signature` in `thinking` block"
                ));
            }
            Ok(())
        }
        "redacted_thinking" => Ok(()),
        found => invalid(format!(
            "messages.{n}.content.0.type: Expected `thinking` or `redacted_thinking`, but found `{found}`. When `thinking` is enabled, a final `assistant` message must start with a thinking block (preceeding the lastmost set of `tool_use` and `tool_result` blocks). We recommend you include thinking blocks from previous turns. To avoid this requirement, disable `thinking`. Please consult our documentation at https://docs.claude.com/en/docs/build-with-claude/extended-thinking"
        )),
    }
}
