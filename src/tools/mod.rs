//! The agent's tools: their JSON schemas for the model and their execution. Every tool run
//! takes the turn's cancellation token, so an interrupt or `/stop` reaches running work.

mod output;
pub mod terminal;

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::config::TerminalConfig;
use crate::llm::ToolCall;
use terminal::{CommandOutcome, Terminal};

/// The tools offered to the model.
pub struct Toolbox {
    terminal: Terminal,
}

impl Toolbox {
    pub fn new(config: TerminalConfig, secret_env_names: Vec<String>) -> Self {
        Toolbox {
            terminal: Terminal::new(config, secret_env_names),
        }
    }

    /// OpenAI `tools` definitions.
    pub fn definitions(&self) -> Vec<Value> {
        vec![json!({
            "type": "function",
            "function": {
                "name": "terminal",
                "description": "Run a shell command (bash -c) on the host and return its exit code and output \
                                (stdout and stderr interleaved, long output shortened in the middle).",
                "parameters": {
                    "type": "object",
                    "properties": {
                        "command": {"type": "string", "description": "The command line to run."},
                        "timeout": {"type": "integer", "description": "Seconds before the command is killed (default from config)."},
                        "workdir": {"type": "string", "description": "Working directory (default from config)."}
                    },
                    "required": ["command"]
                }
            }
        })]
    }

    /// Run one tool call; the result text goes back to the model.
    pub async fn run(&self, call: &ToolCall, cancel: &CancellationToken) -> ToolResult {
        let args: Value = match serde_json::from_str(if call.arguments.trim().is_empty() {
            "{}"
        } else {
            &call.arguments
        }) {
            Ok(v) => v,
            Err(e) => {
                return ToolResult::error(format!(
                    "error: the arguments are not valid JSON ({e}); send an object like {{\"command\": \"ls\"}}"
                ));
            }
        };
        match call.name.as_str() {
            "terminal" => {
                let Some(command) = args
                    .get("command")
                    .and_then(Value::as_str)
                    .filter(|c| !c.trim().is_empty())
                else {
                    return ToolResult::error(
                        "error: `command` is required and must be a non-empty string",
                    );
                };
                let timeout = args.get("timeout").and_then(Value::as_u64);
                let workdir = args.get("workdir").and_then(Value::as_str);
                let outcome = self.terminal.run(command, workdir, timeout, cancel).await;
                ToolResult {
                    cancelled: matches!(outcome, CommandOutcome::Cancelled { .. }),
                    text: outcome.describe(),
                }
            }
            other => ToolResult::error(format!(
                "error: there is no tool named {other:?}; available: terminal"
            )),
        }
    }
}

/// A tool's answer to the model.
#[derive(Debug, Clone)]
pub struct ToolResult {
    pub text: String,
    /// The run was stopped by the turn's cancellation.
    pub cancelled: bool,
}

impl ToolResult {
    fn error(text: impl Into<String>) -> Self {
        ToolResult {
            text: text.into(),
            cancelled: false,
        }
    }
}
