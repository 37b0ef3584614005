//! The agent's tools: their JSON schemas for the model and their execution. Every tool run
//! gets the turn's [`ToolContext`], so an interrupt or `/stop` reaches running work, and a
//! dangerous command passes the approval broker before it runs.

mod batch;
mod output;
mod process_tool;
pub mod terminal;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hermes_adapter::{Author, ChatRef};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::approval::{ApprovalBroker, CheckContext, Gate};
use crate::config::TerminalConfig;
use crate::llm::ToolCall;
use crate::process::{MIN_CHECK_INTERVAL, Origin, ProcessRegistry, SpawnRequest};
use terminal::{CommandOutcome, Terminal};

/// What a tool knows about the turn that called it.
#[derive(Clone)]
pub struct ToolContext {
    pub session_key: String,
    pub chat: ChatRef,
    pub author: Author,
    /// Cancelled by `/stop`, an interrupting message, `/new` or shutdown.
    pub cancel: CancellationToken,
    /// Cancelled when the person sends anything while the turn runs (`process wait` returns).
    pub attention: CancellationToken,
}

/// The tools offered to the model.
pub struct Toolbox {
    terminal: Terminal,
    approvals: Arc<ApprovalBroker>,
    processes: Arc<ProcessRegistry>,
    /// What was written to each process's stdin since its last newline.
    unfinished_lines: Mutex<BTreeMap<String, String>>,
}

/// How many processes' partial stdin lines are remembered.
const MAX_UNFINISHED_LINES: usize = 256;

impl Toolbox {
    pub fn new(
        config: TerminalConfig,
        secret_env_names: Vec<String>,
        approvals: Arc<ApprovalBroker>,
        processes: Arc<ProcessRegistry>,
    ) -> Self {
        Toolbox {
            terminal: Terminal::new(config, secret_env_names),
            approvals,
            processes,
            unfinished_lines: Mutex::new(BTreeMap::new()),
        }
    }

    /// OpenAI `tools` definitions.
    pub fn definitions(&self) -> Vec<Value> {
        vec![
            json!({
                "type": "function",
                "function": {
                    "name": "terminal",
                    "description": "Run a shell command (bash -c) on the host. In the foreground it returns the exit code and output \
                                    (stdout and stderr interleaved, long output shortened in the middle). With background=true it \
                                    returns a process id at once; the chat is told when it finishes, and the `process` tool checks on it. \
                                    Dangerous commands wait for the person's approval.",
                    "parameters": {
                        "type": "object",
                        "properties": {
                            "command": {"type": "string", "description": "The command line to run."},
                            "timeout": {"type": "integer", "description": "Foreground only: seconds before the command is killed (default from config)."},
                            "workdir": {"type": "string", "description": "Working directory (default from config)."},
                            "background": {"type": "boolean", "description": "Run in the background and return at once."},
                            "check_interval": {"type": "integer", "description": "Background only: post new output to the chat at most this often (seconds, minimum 5)."},
                            "notify_on_complete": {"type": "boolean", "description": "Background only: when it finishes, start a new turn so you can continue the work."}
                        },
                        "required": ["command"]
                    }
                }
            }),
            process_tool::definition(),
        ]
    }

    /// Run one tool call; the result text goes back to the model.
    pub async fn run(&self, call: &ToolCall, ctx: &ToolContext) -> ToolResult {
        let result = self.dispatch(call, ctx).await;
        let outcome = if result.cancelled { "cancelled" } else { "ok" };
        crate::metrics::tool_call(&call.name, outcome);
        result
    }

    async fn dispatch(&self, call: &ToolCall, ctx: &ToolContext) -> ToolResult {
        let raw = if call.arguments.trim().is_empty() {
            "{}"
        } else {
            &call.arguments
        };
        let args: Value = match serde_json::from_str(raw) {
            Ok(v) => v,
            Err(e) => {
                return ToolResult::text(format!(
                    "error: the arguments are not valid JSON ({e}); send an object like {{\"command\": \"ls\"}}"
                ));
            }
        };
        match call.name.as_str() {
            "terminal" => self.terminal(&args, ctx).await,
            "process" => {
                if args.get("action").and_then(Value::as_str) == Some("write")
                    && let Some(data) = args.get("data").and_then(Value::as_str)
                {
                    let id = args.get("id").and_then(Value::as_str).unwrap_or_default();
                    return self.write_to_process(id, data, &args, ctx).await;
                }
                ToolResult::text(process_tool::run(&self.processes, &args, ctx).await)
            }
            other => ToolResult::text(format!(
                "error: there is no tool named {other:?}; available: {}",
                TOOL_NAMES.join(", ")
            )),
        }
    }

    async fn terminal(&self, args: &Value, ctx: &ToolContext) -> ToolResult {
        let Some(command) = args
            .get("command")
            .and_then(Value::as_str)
            .filter(|c| !c.trim().is_empty())
        else {
            return ToolResult::text("error: `command` is required and must be a non-empty string");
        };
        let workdir = args.get("workdir").and_then(Value::as_str);
        let background = args
            .get("background")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let cwd = self.terminal.workdir(workdir);
        if let Some(refused) = self.refused(command, ctx, &cwd, background).await {
            return refused;
        }
        if ctx.cancel.is_cancelled() {
            // Stopped while it waited for approval: it never starts.
            return ToolResult {
                text: "The command was NOT run: the task was stopped.".into(),
                cancelled: true,
            };
        }
        if background {
            let requested = args
                .get("check_interval")
                .and_then(Value::as_u64)
                .map(Duration::from_secs);
            let check_interval = requested.map(|i| i.max(MIN_CHECK_INTERVAL));
            let request = SpawnRequest {
                command: command.to_owned(),
                cwd,
                env: self.terminal.child_env(),
                origin: Origin {
                    session_key: ctx.session_key.clone(),
                    chat: ctx.chat.clone(),
                    author: ctx.author.clone(),
                },
                check_interval,
                notify_on_complete: args
                    .get("notify_on_complete")
                    .and_then(Value::as_bool)
                    .unwrap_or(false),
            };
            return ToolResult::text(match self.processes.spawn(request).await {
                Ok((id, pid)) => {
                    let mut text = format!(
                        "started in the background as {id} (pid {pid}). The chat will be told when it finishes; use the `process` tool (poll, log, wait, kill, write) to check on it."
                    );
                    if requested.is_some_and(|r| r < MIN_CHECK_INTERVAL) {
                        text.push_str(" check_interval was raised to the minimum of 5 seconds.");
                    }
                    text
                }
                Err(e) => format!("error: {e}"),
            });
        }
        let timeout = args.get("timeout").and_then(Value::as_u64);
        let outcome = self
            .terminal
            .run(command, workdir, timeout, &ctx.cancel)
            .await;
        ToolResult {
            cancelled: matches!(outcome, CommandOutcome::Cancelled { .. }),
            text: outcome.describe(),
        }
    }
}

impl Toolbox {
    /// Text written to a process's stdin may be a command for a shell it runs: it passes the
    /// same approval check as `terminal`, judged together with whatever was written before
    /// it on the same line (so `r` then `m -rf ~\n` is judged as `rm -rf ~`).
    async fn write_to_process(
        &self,
        id: &str,
        data: &str,
        args: &Value,
        ctx: &ToolContext,
    ) -> ToolResult {
        let earlier = self
            .unfinished_lines
            .lock()
            .expect("unfinished lines lock")
            .get(id)
            .cloned()
            .unwrap_or_default();
        let line = format!("{earlier}{data}");
        let cwd = self.terminal.workdir(None);
        if let Some(refused) = self.refused(&line, ctx, &cwd, true).await {
            return refused;
        }
        let result = process_tool::run(&self.processes, args, ctx).await;
        let rest = match line.rfind('\n') {
            Some(at) => line[at + 1..].to_owned(),
            None => line,
        };
        let mut lines = self.unfinished_lines.lock().expect("unfinished lines lock");
        if rest.is_empty() {
            lines.remove(id);
        } else {
            if lines.len() >= MAX_UNFINISHED_LINES && !lines.contains_key(id) {
                // Forget the oldest shells' partial lines; a forgotten prefix is judged anew.
                if let Some(oldest) = lines.keys().next().cloned() {
                    lines.remove(&oldest);
                }
            }
            lines.insert(id.to_owned(), rest);
        }
        ToolResult::text(result)
    }

    /// The approval gate: `Some(result)` when `command` must not run.
    async fn refused(
        &self,
        command: &str,
        ctx: &ToolContext,
        workdir: &std::path::Path,
        background: bool,
    ) -> Option<ToolResult> {
        let check = CheckContext {
            session_key: &ctx.session_key,
            chat: &ctx.chat,
            cancel: &ctx.cancel,
            workdir,
            background,
        };
        match self.approvals.check(check, command).await {
            Gate::Run => None,
            Gate::Refused(why) => Some(ToolResult {
                text: why,
                cancelled: ctx.cancel.is_cancelled(),
            }),
        }
    }
}

/// The tools the agent has.
const TOOL_NAMES: [&str; 2] = ["terminal", "process"];

/// The tool a model meant by `name`, as Hermes repairs names: cut at the first quote or
/// angle bracket, lower case, `-` and spaces as `_`, CamelCase as snake_case, a trailing
/// `_tool` or `tool` dropped; then the closest known name if it is close enough.
pub fn repair_name(name: &str) -> Option<&'static str> {
    let cut = name
        .split(['"', '\'', '<', '>'])
        .next()
        .unwrap_or_default()
        .trim();
    let mut snake = String::new();
    for (i, c) in cut.chars().enumerate() {
        if c.is_uppercase() && i > 0 && !snake.ends_with('_') {
            snake.push('_');
        }
        match c {
            '-' | ' ' => snake.push('_'),
            c => snake.extend(c.to_lowercase()),
        }
    }
    let mut candidate = snake.as_str();
    for _ in 0..2 {
        candidate = candidate
            .strip_suffix("_tool")
            .or_else(|| candidate.strip_suffix("tool"))
            .unwrap_or(candidate)
            .trim_end_matches('_');
    }
    if let Some(exact) = TOOL_NAMES.iter().find(|t| **t == candidate) {
        return Some(exact);
    }
    // Close enough: at most one edit in five characters (Hermes' 0.7 similarity, roughly).
    TOOL_NAMES
        .iter()
        .map(|t| (t, edit_distance(t, candidate)))
        .filter(|(t, d)| *d * 10 <= t.len() * 3)
        .min_by_key(|(_, d)| *d)
        .map(|(t, _)| *t)
}

/// Levenshtein distance (tool names are short).
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (above + 1)
                .min(row[j] + 1)
                .min(diagonal + usize::from(ca != *cb));
            diagonal = above;
        }
    }
    row[b.len()]
}

/// Whether `name` is one of the agent's tools.
pub fn is_known(name: &str) -> bool {
    TOOL_NAMES.contains(&name)
}

/// A tool's answer to the model.
#[derive(Debug, Clone)]
pub struct ToolResult {
    pub text: String,
    /// The run was stopped by the turn's cancellation.
    pub cancelled: bool,
}

impl ToolResult {
    fn text(text: impl Into<String>) -> Self {
        ToolResult {
            text: text.into(),
            cancelled: false,
        }
    }
}

#[cfg(test)]
mod name_tests {
    use super::*;

    #[test]
    fn misspelled_tool_names_are_repaired_and_strangers_are_not() {
        for (asked, meant) in [
            ("terminal", "terminal"),
            ("Terminal", "terminal"),
            ("terminal_tool", "terminal"),
            ("TerminalTool", "terminal"),
            ("terminal\"}", "terminal"),
            ("termnal", "terminal"),
            ("Process", "process"),
        ] {
            assert_eq!(repair_name(asked), Some(meant), "{asked}");
        }
        assert_eq!(repair_name("web_search"), None);
        assert_eq!(repair_name("rm"), None);
    }
}
