//! The shell tools: `terminal` (a command in the foreground or the background, after the
//! approval gate) and `process` (the conversation's background processes; what is written
//! to one's stdin passes the gate too, judged with the rest of its line).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::future::BoxFuture;
use schemars::JsonSchema;
use serde::Deserialize;

use super::process_tool::{self, Action, ProcessArgs};
use super::terminal::{CommandOutcome, Terminal};
use super::{ToolContext, ToolResult, gate};
use crate::approval::ApprovalBroker;
use crate::process::{MIN_CHECK_INTERVAL, Origin, ProcessRegistry, SpawnRequest};
use crate::tool::TypedTool;

/// What both shell tools use.
pub struct Shell {
    pub terminal: Terminal,
    pub approvals: Arc<ApprovalBroker>,
    pub processes: Arc<ProcessRegistry>,
    /// Where commands run confined.
    pub confinement: super::Confined,
    /// What was written to each process's stdin since its last newline.
    unfinished_lines: Mutex<BTreeMap<String, String>>,
}

/// How many processes' partial stdin lines are remembered.
const MAX_UNFINISHED_LINES: usize = 256;

impl Shell {
    pub fn new(
        terminal: Terminal,
        approvals: Arc<ApprovalBroker>,
        processes: Arc<ProcessRegistry>,
        confinement: super::Confined,
    ) -> Arc<Self> {
        Arc::new(Shell {
            terminal,
            approvals,
            processes,
            confinement,
            unfinished_lines: Mutex::new(BTreeMap::new()),
        })
    }

    /// The approval gate for `command`: `Some(result)` when it must not run.
    async fn refused(
        &self,
        command: &str,
        ctx: &ToolContext,
        workdir: &std::path::Path,
        background: bool,
    ) -> Option<ToolResult> {
        gate(&self.approvals, command, ctx, workdir, background).await
    }

    async fn terminal(&self, args: TerminalArgs, ctx: &ToolContext) -> ToolResult {
        let command = args.command.as_str();
        if command.trim().is_empty() {
            return ToolResult::text("error: `command` is required and must be a non-empty string");
        }
        let workdir = args.workdir.as_deref();
        let background = args.background.unwrap_or(false);
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
        let sandbox = match self.confinement.sandbox(ctx).await {
            Ok(sandbox) => sandbox,
            Err(refused) => return ToolResult::text(format!("error: {refused}")),
        };
        if background {
            let requested = args.check_interval.map(Duration::from_secs);
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
                notify_on_complete: args.notify_on_complete.unwrap_or(false),
                sandbox,
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
        let timeout = args.timeout;
        let outcome = self
            .terminal
            .run(command, workdir, timeout, &ctx.cancel, &sandbox)
            .await;
        ToolResult {
            cancelled: matches!(outcome, CommandOutcome::Cancelled { .. }),
            text: outcome.describe(),
        }
    }

    /// Text written to a process's stdin may be a command for a shell it runs: it passes the
    /// same approval check as `terminal`, judged together with whatever was written before
    /// it on the same line (so `r` then `m -rf ~\n` is judged as `rm -rf ~`).
    async fn write_to_process(
        &self,
        id: &str,
        data: &str,
        args: &ProcessArgs,
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
}

/// `terminal`.
pub struct TerminalTool(pub Arc<Shell>);

/// `terminal`'s arguments.
#[derive(Deserialize, JsonSchema)]
pub struct TerminalArgs {
    /// The command line to run.
    command: String,
    /// Foreground only: seconds before the command is killed (default from config).
    timeout: Option<u64>,
    /// Working directory (default from config).
    workdir: Option<String>,
    /// Run in the background and return at once.
    background: Option<bool>,
    /// Background only: post new output to the chat at most this often (seconds, minimum 5).
    check_interval: Option<u64>,
    /// Background only: when it finishes, start a new turn so you can continue the work.
    notify_on_complete: Option<bool>,
}

impl TypedTool for TerminalTool {
    type Args = TerminalArgs;
    const NAME: &'static str = "terminal";
    const TOOLSET: &'static str = "terminal";

    fn description(&self) -> String {
        "Run a shell command (bash -c) on the host. In the foreground it returns the exit code and output \
         (stdout and stderr interleaved, long output shortened in the middle). With background=true it \
         returns a process id at once; the chat is told when it finishes, and the `process` tool checks on it. \
         Dangerous commands wait for the person's approval."
            .into()
    }

    fn call<'a>(&'a self, args: TerminalArgs, ctx: &'a ToolContext) -> BoxFuture<'a, ToolResult> {
        Box::pin(self.0.terminal(args, ctx))
    }
}

/// `process`.
pub struct ProcessTool(pub Arc<Shell>);

impl TypedTool for ProcessTool {
    type Args = ProcessArgs;
    const NAME: &'static str = "process";
    const TOOLSET: &'static str = "terminal";

    fn description(&self) -> String {
        "Manage background processes started with terminal(background=true) in this conversation."
            .into()
    }

    fn only_reads(&self, args: &ProcessArgs) -> bool {
        args.action.reads_only()
    }

    fn call<'a>(&'a self, args: ProcessArgs, ctx: &'a ToolContext) -> BoxFuture<'a, ToolResult> {
        Box::pin(async move {
            if args.action == Action::Write
                && let Some(data) = args.data.as_deref()
            {
                let id = args.id.as_deref().unwrap_or_default();
                return self.0.write_to_process(id, data, &args, ctx).await;
            }
            ToolResult::text(process_tool::run(&self.0.processes, &args, ctx).await)
        })
    }
}
