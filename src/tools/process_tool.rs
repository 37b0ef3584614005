//! The `process` tool: list, poll, log, wait, kill and write to the background processes of
//! the calling conversation.

use std::time::Duration;

use serde_json::{Value, json};

use super::ToolContext;
use crate::process::ProcessRegistry;

/// The longest `wait` allowed.
const MAX_WAIT: Duration = Duration::from_secs(180);

pub fn definition() -> Value {
    json!({
        "type": "function",
        "function": {
            "name": "process",
            "description": "Manage background processes started with terminal(background=true) in this conversation.",
            "parameters": {
                "type": "object",
                "properties": {
                    "action": {"type": "string", "enum": ["list", "poll", "log", "wait", "kill", "write"],
                               "description": "list: all processes; poll: status and output since the last poll; log: last lines; wait: until it ends (bounded); kill: SIGTERM then SIGKILL; write: send text to its stdin."},
                    "id": {"type": "string", "description": "Process id (proc_…); not needed for list."},
                    "lines": {"type": "integer", "description": "log: how many lines (default 50)."},
                    "timeout": {"type": "integer", "description": "wait: seconds (default 30, at most 180)."},
                    "data": {"type": "string", "description": "write: the text to send (add \\n for Enter)."}
                },
                "required": ["action"]
            }
        }
    })
}

pub async fn run(registry: &ProcessRegistry, args: &Value, ctx: &ToolContext) -> String {
    let action = args
        .get("action")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let key = ctx.session_key.as_str();
    if action == "list" {
        return registry.list(key);
    }
    let Some(id) = args.get("id").and_then(Value::as_str) else {
        return format!("error: action {action:?} needs an `id` (see action `list`)");
    };
    let result = match action {
        "poll" => registry.poll(key, id),
        "log" => registry.log(
            key,
            id,
            args.get("lines").and_then(Value::as_u64).unwrap_or(50) as usize,
        ),
        "wait" => {
            let secs = args.get("timeout").and_then(Value::as_u64).unwrap_or(30);
            let timeout = Duration::from_secs(secs).min(MAX_WAIT);
            tokio::select! {
                r = registry.wait(key, id, timeout, &ctx.attention) => r,
                _ = ctx.cancel.cancelled() => Ok(format!("{id}: stopped waiting (the turn was stopped); the process is still running")),
            }
        }
        "kill" => registry.kill(key, id).await,
        "write" => match args.get("data").and_then(Value::as_str) {
            Some(data) => registry.write(key, id, data).await,
            None => Err("error: write needs `data`".into()),
        },
        other => Err(format!(
            "unknown action {other:?}; use list, poll, log, wait, kill or write"
        )),
    };
    result.unwrap_or_else(|e| {
        if e.starts_with("error") {
            e
        } else {
            format!("error: {e}")
        }
    })
}
