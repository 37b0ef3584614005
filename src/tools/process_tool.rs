//! The `process` tool: list, poll, log, wait, kill and write to the background processes of
//! the calling conversation. The registry answers with data; what the model reads is written
//! here.

use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;

use super::ToolContext;
use crate::process::{Polled, ProcessRegistry, ProcessSummary, Status, Stopped, Waited};

/// The longest `wait` allowed.
const MAX_WAIT: Duration = Duration::from_secs(180);

/// `process`'s arguments.
#[derive(Deserialize, JsonSchema)]
pub struct ProcessArgs {
    /// list: all processes; poll: status and output since the last poll; log: last lines; wait: until it ends (bounded); kill: SIGTERM then SIGKILL; write: send text to its stdin.
    pub action: Action,
    /// Process id (proc_…); not needed for list.
    pub id: Option<String>,
    /// log: how many lines (default 50).
    pub lines: Option<u64>,
    /// wait: seconds (default 30, at most 180).
    pub timeout: Option<u64>,
    /// write: the text to send (add \n for Enter).
    pub data: Option<String>,
}

#[derive(Deserialize, JsonSchema, Clone, Copy, PartialEq, Debug)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    List,
    Poll,
    Log,
    Wait,
    Kill,
    Write,
}

impl Action {
    /// Whether the action only looks.
    pub fn reads_only(self) -> bool {
        matches!(
            self,
            Action::List | Action::Poll | Action::Log | Action::Wait
        )
    }
}

pub async fn run(registry: &ProcessRegistry, args: &ProcessArgs, ctx: &ToolContext) -> String {
    let action = args.action;
    let key = ctx.session_key.as_str();
    if action == Action::List {
        return list(&registry.list(key));
    }
    let Some(id) = args.id.as_deref() else {
        return format!(
            "error: action {:?} needs an `id` (see action `list`)",
            format!("{action:?}").to_lowercase()
        );
    };
    let result = match action {
        Action::List => unreachable!("answered above"),
        Action::Poll => registry.poll(key, id).map(|p| polled(id, &p)),
        Action::Log => registry
            .log(key, id, args.lines.unwrap_or(50) as usize)
            .map(|text| {
                if text.is_empty() {
                    "(no output yet)".into()
                } else {
                    text
                }
            }),
        Action::Wait => {
            let secs = args.timeout.unwrap_or(30);
            let timeout = Duration::from_secs(secs).min(MAX_WAIT);
            tokio::select! {
                r = registry.wait(key, id, timeout, &ctx.attention) => r.map(|w| waited(id, &w, timeout)),
                _ = ctx.cancel.cancelled() => Ok(format!("{id}: stopped waiting (the turn was stopped); the process is still running")),
            }
        }
        Action::Kill => registry.kill(key, id).await.map(|s| stopped(id, s)),
        Action::Write => match args.data.as_deref() {
            Some(data) => registry
                .write(key, id, data, &ctx.cancel)
                .await
                .map(|n| format!("wrote {n} bytes to {id}")),
            None => return "error: write needs `data`".into(),
        },
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
