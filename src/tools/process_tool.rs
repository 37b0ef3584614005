//! The `process` tool: list, poll, log, wait, kill and write to the background processes of
//! the calling conversation. The registry answers with data; what the model reads is written
//! here.

use std::time::Duration;

use serde_json::{Value, json};

use super::ToolContext;
use crate::process::{Polled, ProcessRegistry, ProcessSummary, Status, Stopped, Waited};

/// The longest `wait` allowed.
const MAX_WAIT: Duration = Duration::from_secs(180);

/// The `process` tool's definition (its name given by the tool).
pub fn definition(name: &str) -> Value {
    json!({
        "type": "function",
        "function": {
            "name": name,
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
        return list(&registry.list(key));
    }
    let Some(id) = args.get("id").and_then(Value::as_str) else {
        return format!("error: action {action:?} needs an `id` (see action `list`)");
    };
    let result = match action {
        "poll" => registry.poll(key, id).map(|p| polled(id, &p)),
        "log" => registry
            .log(
                key,
                id,
                args.get("lines").and_then(Value::as_u64).unwrap_or(50) as usize,
            )
            .map(|text| {
                if text.is_empty() {
                    "(no output yet)".into()
                } else {
                    text
                }
            }),
        "wait" => {
            let secs = args.get("timeout").and_then(Value::as_u64).unwrap_or(30);
            let timeout = Duration::from_secs(secs).min(MAX_WAIT);
            tokio::select! {
                r = registry.wait(key, id, timeout, &ctx.attention) => r.map(|w| waited(id, &w, timeout)),
                _ = ctx.cancel.cancelled() => Ok(format!("{id}: stopped waiting (the turn was stopped); the process is still running")),
            }
        }
        "kill" => registry.kill(key, id).await.map(|s| stopped(id, s)),
        "write" => match args.get("data").and_then(Value::as_str) {
            Some(data) => registry
                .write(key, id, data, &ctx.cancel)
                .await
                .map(|n| format!("wrote {n} bytes to {id}")),
            None => return "error: write needs `data`".into(),
        },
        other => {
            return format!(
                "error: unknown action {other:?}; use list, poll, log, wait, kill or write"
            );
        }
    };
    result.unwrap_or_else(|e| format!("error: {e}"))
}

fn status(status: &Status) -> String {
    match status {
        Status::Finished(exit) => format!(
            "finished ({}) after {}s",
            exit.describe(),
            exit.elapsed.as_secs()
        ),
        Status::Running { elapsed } => format!("running for {}s", elapsed.as_secs()),
    }
}

fn list(processes: &[ProcessSummary]) -> String {
    if processes.is_empty() {
        return "No background processes in this conversation.".into();
    }
    processes
        .iter()
        .map(|p| {
            let command: String = p.command.chars().take(200).collect();
            format!("{} [pid {}] {}: {command}", p.id, p.pgid, status(&p.status))
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn polled(id: &str, p: &Polled) -> String {
    let lost = if p.lost_output {
        "\n[some output rolled out of the 200 KB buffer]"
    } else {
        ""
    };
    let new = if p.new_output.is_empty() {
        "(no new output)"
    } else {
        &p.new_output
    };
    format!("{id}: {}{lost}\nnew output:\n{new}", status(&p.status))
}

fn waited(id: &str, w: &Waited, timeout: Duration) -> String {
    match w {
        Waited::Finished { exit, last_output } => format!(
            "{id} finished: {} after {}s\nlast output:\n{last_output}",
            exit.describe(),
            exit.elapsed.as_secs()
        ),
        Waited::StillRunning => {
            format!("{id} is still running after waiting {}s", timeout.as_secs())
        }
        Waited::PersonWrote => format!(
            "{id}: stopped waiting because the person sent a message; the process is still running"
        ),
    }
}

fn stopped(id: &str, s: Stopped) -> String {
    match s {
        Stopped::AlreadyFinished => format!("{id} had already finished"),
        Stopped::Terminated => format!("{id} stopped (SIGTERM)"),
        Stopped::Killed => format!("{id} did not stop on SIGTERM and was killed (SIGKILL)"),
    }
}
