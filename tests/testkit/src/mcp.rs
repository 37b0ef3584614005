//! A small MCP server (rmcp's server side) for the daemon to start as a stdio child in
//! tests: `add`, `echo`, `sleep` (ends early when the client cancels the call), `spawn`
//! (leaves a child behind), `crash`, `environment` (the names of the variables it was given)
//! and `cache` (writes a file under `$HOME/.cache`, as servers keep caches). Tests run it by starting
//! their own test binary with one test selected (see [`stub_server_command`]), since a
//! binary of this crate is not built for another package's tests.

use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    JsonObject, ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde_json::{Value, json};

/// The variable that makes the stub test run the server.
pub const STUB_VAR: &str = "HERMES_MCP_STUB";

fn schema(v: Value) -> Arc<JsonObject> {
    match v {
        Value::Object(map) => Arc::new(map),
        _ => Arc::new(JsonObject::new()),
    }
}

fn tools() -> Vec<Tool> {
    vec![
        Tool::new(
            "add",
            "Add two numbers",
            schema(json!({
                "type": "object",
                "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
                "required": ["a", "b"]
            })),
        ),
        Tool::new(
            "echo",
            "Echo the text",
            schema(json!({"type": "object", "properties": {"text": {"type": "string"}}})),
        ),
        Tool::new(
            "sleep",
            "Sleep for ms milliseconds (the pid goes to pidfile first)",
            schema(json!({
                "type": "object",
                "properties": {"ms": {"type": "integer"}, "pidfile": {"type": "string"}}
            })),
        ),
        Tool::new(
            "spawn",
            "Start `sleep 60` in the background (its pid goes to pidfile), as wrappers such as npx leave children",
            schema(json!({"type": "object", "properties": {"pidfile": {"type": "string"}}})),
        ),
        Tool::new(
            "crash",
            "End the server at once, as a crash would",
            schema(json!({"type": "object", "properties": {}})),
        ),
        Tool::new(
            "environment",
            "The names of the environment variables this server has",
            schema(json!({"type": "object", "properties": {}})),
        ),
        Tool::new(
            "cache",
            "Write a file in the server's cache under $HOME/.cache and read it back",
            schema(json!({"type": "object", "properties": {}})),
        ),
    ]
}

struct Stub;

impl ServerHandler for Stub {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("hermes-test-mcp", "0.1.0"))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(tools()))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        tools().into_iter().find(|t| t.name == name)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let args = request.arguments.unwrap_or_default();
        let text = |t: String| Ok(CallToolResult::success(vec![ContentBlock::text(t)]).into());
        match request.name.as_ref() {
            "add" => match (
                args.get("a").and_then(Value::as_f64),
                args.get("b").and_then(Value::as_f64),
            ) {
                (Some(a), Some(b)) => text((a + b).to_string()),
                _ => Ok(
                    CallToolResult::error(vec![ContentBlock::text("a and b must be numbers")])
                        .into(),
                ),
            },
            "echo" => text(
                args.get("text")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned(),
            ),
            "sleep" => {
                if let Some(path) = args.get("pidfile").and_then(Value::as_str) {
                    let _ = std::fs::write(path, std::process::id().to_string());
                }
                let ms = args.get("ms").and_then(Value::as_u64).unwrap_or(60_000);
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_millis(ms)) => text("slept".into()),
                    _ = context.ct.cancelled() => {
                        // The test sees that the client told the server to stop.
                        if let Some(path) = args.get("pidfile").and_then(Value::as_str) {
                            let _ = std::fs::write(format!("{path}.cancelled"), "cancelled");
                        }
                        Err(ErrorData::internal_error("cancelled", None))
                    }
                }
            }
            "spawn" => {
                let child = std::process::Command::new("sleep").arg("60").spawn();
                match (child, args.get("pidfile").and_then(Value::as_str)) {
                    (Ok(child), Some(path)) => {
                        let _ = std::fs::write(path, child.id().to_string());
                        text("started".into())
                    }
                    (Err(e), _) => text(format!("could not start: {e}")),
                    (Ok(_), None) => text("started".into()),
                }
            }
            "crash" => std::process::exit(3),
            "cache" => {
                let dir = std::path::PathBuf::from(std::env::var("HOME").unwrap_or_default())
                    .join(".cache/hermes-test-mcp");
                let file = dir.join("entry");
                let written = std::fs::create_dir_all(&dir)
                    .and_then(|()| std::fs::write(&file, "cached"))
                    .and_then(|()| std::fs::read_to_string(&file));
                text(match written {
                    Ok(read) => format!("{read} at {}", file.display()),
                    Err(e) => format!("could not write {}: {e}", file.display()),
                })
            }
            "environment" => {
                let mut names: Vec<String> = std::env::vars().map(|(k, _)| k).collect();
                names.sort();
                text(names.join(" "))
            }
            other => Err(ErrorData::invalid_params(
                format!("unknown tool: {other}"),
                None,
            )),
        }
    }
}

/// Serve MCP on stdin and stdout until the client goes away.
pub async fn serve_stdio() {
    match Stub.serve(rmcp::transport::stdio()).await {
        Ok(service) => {
            let _ = service.waiting().await;
        }
        Err(e) => eprintln!("stub MCP server: {e}"),
    }
}

/// `command` and `args` that start the stub server: the running test binary with only
/// the test named `test_name` (ignored in ordinary runs; it calls [`serve_stdio`] when
/// [`STUB_VAR`] is set).
pub fn stub_server_command(test_name: &str) -> (String, Vec<String>) {
    let exe = std::env::current_exe().expect("the test binary's path");
    (
        exe.display().to_string(),
        vec![
            "--exact".into(),
            test_name.into(),
            // The stub test is ignored in ordinary runs.
            "--include-ignored".into(),
            "--nocapture".into(),
            "--quiet".into(),
            "--test-threads".into(),
            "1".into(),
        ],
    )
}
