//! One MCP server's tool as a gateway [`Tool`]: named `mcp__<server>__<tool>` (Hermes'
//! names), in toolset `mcp-<server>`, offered only while its server's session is open; a
//! call is bounded by the server's `timeout`, and `/stop` ends it at once (rmcp tells the
//! server the request was cancelled).

use futures_util::future::BoxFuture;
use rmcp::RoleClient;
use rmcp::model::{CallToolRequestParams, ContentBlock};
use rmcp::service::{Peer, ServiceError};
use serde_json::{Value, json};

use super::connection::ListedTool;
use crate::config::McpServerConfig;
use crate::tool::{Tool, ToolContext, ToolResult};

/// The most text of a result handed to the model.
const MAX_RESULT_CHARS: usize = 100_000;
/// The longest function name providers take (OpenAI's limit).
const MAX_NAME: usize = 64;
/// The most of a server's description of a tool offered to the model.
const MAX_DESCRIPTION: usize = 1_024;

pub struct McpTool {
    /// `mcp__<server>__<tool>`.
    name: &'static str,
    /// `mcp-<server>`.
    toolset: &'static str,
    server: String,
    /// The tool's name on its server.
    remote: String,
    description: String,
    schema: Value,
    parallel: bool,
    timeout: std::time::Duration,
    peer: Peer<RoleClient>,
}

impl McpTool {
    pub(super) fn new(
        config: &McpServerConfig,
        listed: ListedTool,
        peer: Peer<RoleClient>,
    ) -> Self {
        let name = intern(short(format!(
            "mcp__{}__{}",
            sanitize(&config.name),
            sanitize(&listed.name)
        )));
        let toolset = intern(format!("mcp-{}", config.name));
        McpTool {
            name,
            toolset,
            server: config.name.clone(),
            remote: listed.name,
            description: listed.description.chars().take(MAX_DESCRIPTION).collect(),
            schema: listed.input_schema,
            parallel: config.parallel,
            timeout: config.timeout,
            peer,
        }
    }

    async fn call(&self, args: Value, ctx: &ToolContext) -> ToolResult {
        let Value::Object(arguments) = args else {
            return ToolResult::text("error: the arguments must be a JSON object");
        };
        let request = CallToolRequestParams::new(self.remote.clone()).with_arguments(arguments);
        let call = tokio::time::timeout(self.timeout, self.peer.call_tool(request));
        let outcome = tokio::select! {
            outcome = call => outcome,
            _ = ctx.cancel.cancelled() => {
                return ToolResult {
                    text: format!("interrupted: the person stopped the task; {} was told to stop", self.name),
                    cancelled: true,
                };
            }
        };
        let text = match outcome {
            Err(_) => format!(
                "error: {} did not answer within {} s (mcp_servers.{}.timeout)",
                self.name,
                self.timeout.as_secs(),
                self.server
            ),
            Ok(Err(ServiceError::TransportClosed)) => format!(
                "error: the MCP server {:?} stopped; its tools are unavailable until it is back",
                self.server
            ),
            Ok(Err(ServiceError::McpError(e))) => {
                format!("error: the MCP server refused the call: {}", e.message)
            }
            Ok(Err(e)) => format!("error: the call to the MCP server failed: {e}"),
            Ok(Ok(result)) => {
                let text = content_text(&result.content, result.structured_content.as_ref());
                if result.is_error == Some(true) {
                    format!("error: {text}")
                } else {
                    text
                }
            }
        };
        ToolResult::text(capped(text))
    }
}

impl Tool for McpTool {
    fn name(&self) -> &'static str {
        self.name
    }

    fn toolset(&self) -> &'static str {
        self.toolset
    }

    fn definition(&self) -> Value {
        let mut schema = self.schema.clone();
        if !schema.is_object() || schema.get("type").is_none() {
            schema = json!({"type": "object", "properties": {}});
        }
        json!({
            "type": "function",
            "function": {
                "name": self.name,
                "description": format!("[MCP server {}] {}", self.server, self.description),
                "parameters": schema,
            }
        })
    }

    fn unavailable(&self) -> Option<String> {
        self.peer
            .is_transport_closed()
            .then(|| format!("the MCP server {:?} is not running", self.server))
    }

    fn reads_only(&self, _args: &Value) -> bool {
        // Hermes' opt-in: `supports_parallel_tool_calls` lets a server's calls run
        // together with a step's other reading calls.
        self.parallel
    }

    fn run<'a>(&'a self, args: Value, ctx: &'a ToolContext) -> BoxFuture<'a, ToolResult> {
        Box::pin(self.call(args, ctx))
    }
}

/// `name` as a `&'static str` (the registry's names are): each distinct name is kept
/// once for the life of the process, so a server that reconnects reuses its names.
fn intern(name: String) -> &'static str {
    static NAMES: std::sync::Mutex<std::collections::BTreeSet<&'static str>> =
        std::sync::Mutex::new(std::collections::BTreeSet::new());
    let mut names = NAMES.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(known) = names.get(name.as_str()) {
        return known;
    }
    let leaked: &'static str = Box::leak(name.into_boxed_str());
    names.insert(leaked);
    leaked
}

/// `name` within [`MAX_NAME`]: a longer one keeps its start and ends with a hash of the
/// whole, so two long names stay apart.
fn short(name: String) -> String {
    if name.len() <= MAX_NAME {
        return name;
    }
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    name.hash(&mut hasher);
    format!("{}_{:08x}", &name[..MAX_NAME - 9], hasher.finish() as u32)
}

/// `[A-Za-z0-9_]` only, as Hermes makes MCP names.
fn sanitize(part: &str) -> String {
    part.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// A result's content as text for the model.
fn content_text(content: &[ContentBlock], structured: Option<&Value>) -> String {
    let mut parts: Vec<String> = Vec::new();
    for block in content {
        match block {
            ContentBlock::Text(t) => parts.push(t.text.clone()),
            ContentBlock::Image(i) => {
                parts.push(format!("[an image ({}) the tool returned]", i.mime_type))
            }
            ContentBlock::Audio(a) => {
                parts.push(format!("[audio ({}) the tool returned]", a.mime_type))
            }
            ContentBlock::Resource(r) => parts.push(r.get_text()),
            ContentBlock::ResourceLink(l) => parts.push(format!("[resource: {}]", l.uri)),
            _ => parts.push("[content of a kind the gateway cannot show]".into()),
        }
    }
    if parts.is_empty()
        && let Some(v) = structured
    {
        parts.push(v.to_string());
    }
    parts.join("\n")
}

fn capped(text: String) -> String {
    match text.char_indices().nth(MAX_RESULT_CHARS) {
        Some((at, _)) => format!(
            "{}\n[… the result was cut at {MAX_RESULT_CHARS} characters]",
            &text[..at]
        ),
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_keep_only_what_providers_accept() {
        assert_eq!(sanitize("my-server.v2"), "my_server_v2");
        assert_eq!(sanitize("read_file"), "read_file");
        assert_eq!(short("mcp__a__b".into()), "mcp__a__b");
        let long = |tail: &str| short(format!("mcp__server__{}{tail}", "x".repeat(80)));
        assert_eq!(long("1").len(), MAX_NAME);
        assert_ne!(long("1"), long("2"));
    }
}
