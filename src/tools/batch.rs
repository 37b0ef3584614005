//! One step's tool calls, run as Hermes runs them: the same call twice runs once and both
//! get its result; calls in a row run together while each only reads (each tool says
//! which of its calls do: `process` list, poll, log, wait; `search_files`…) or works on
//! one file (`read_file`, `write_file`, `patch`) whose path, links followed, does not
//! overlap a path already in the run; everything else (the terminal, a second call on the
//! same file) runs alone, in order. Results come back in the calls' order, and the turn's
//! cancellation reaches every running call; calls after a cancelled one are not started.

use std::path::{Path, PathBuf};

use futures_util::future::join_all;
use serde_json::Value;

use super::{ToolContext, ToolResult, Toolbox};
use crate::llm::ToolCall;

/// What a call that never started says.
const NOT_RUN: &str = "not run: the turn was interrupted";

/// How a call may share a run with its neighbours.
#[derive(Debug, Clone, PartialEq)]
enum Sharing {
    /// Alone.
    Alone,
    /// With any call that reads or works on another file.
    Reads,
    /// With calls on files that do not overlap this one.
    File(PathBuf),
}

impl Toolbox {
    pub async fn run_batch(&self, calls: &[ToolCall], ctx: &ToolContext) -> Vec<ToolResult> {
        let mut results: Vec<Option<ToolResult>> = vec![None; calls.len()];
        // Each call's first identical call (itself when it is the first).
        let first: Vec<usize> = calls
            .iter()
            .enumerate()
            .map(|(i, call)| {
                calls[..i]
                    .iter()
                    .position(|c| c.name == call.name && c.arguments == call.arguments)
                    .unwrap_or(i)
            })
            .collect();
        let unique: Vec<usize> = (0..calls.len()).filter(|&i| first[i] == i).collect();
        let sharing = self
            .sharing(unique.iter().map(|&i| &calls[i]).collect(), ctx)
            .await;
        let mut next = 0;
        let mut stopped = false;
        while next < unique.len() {
            let end = run_end(&sharing, next);
            let run = &unique[next..end];
            if stopped || ctx.cancel.is_cancelled() {
                for &i in run {
                    results[i] = Some(ToolResult {
                        text: NOT_RUN.into(),
                        cancelled: true,
                    });
                }
            } else {
                if run.len() > 1 {
                    tracing::info!(calls = run.len(), "agent: running tools together");
                }
                let done = join_all(run.iter().map(|&i| {
                    tracing::info!(tool = %calls[i].name, "agent: running a tool");
                    self.run(&calls[i], ctx)
                }))
                .await;
                for (&i, result) in run.iter().zip(done) {
                    stopped |= result.cancelled;
                    results[i] = Some(result);
                }
            }
            next = end;
        }
        (0..calls.len())
            .map(|i| {
                results[first[i]].clone().unwrap_or(ToolResult {
                    text: NOT_RUN.into(),
                    cancelled: true,
                })
            })
            .collect()
    }

    /// How each call may share a run (paths are resolved off the runtime's threads; a
    /// lone call shares with nothing).
    async fn sharing(&self, calls: Vec<&ToolCall>, ctx: &ToolContext) -> Vec<Sharing> {
        if calls.len() < 2 {
            return vec![Sharing::Alone; calls.len()];
        }
        let judged: Vec<_> = calls
            .iter()
            .map(|call| {
                let args = serde_json::from_str::<Value>(&call.arguments)
                    .ok()
                    .filter(Value::is_object);
                (self.find(&call.name, ctx), args)
            })
            .collect();
        let count = judged.len();
        tokio::task::spawn_blocking(move || {
            judged
                .into_iter()
                .map(|(tool, args)| match (tool, args) {
                    (Some(tool), Some(args)) => match tool.path_scope(&args) {
                        Some(path) => Sharing::File(path),
                        None if tool.reads_only(&args) => Sharing::Reads,
                        None => Sharing::Alone,
                    },
                    // An unknown tool or unreadable arguments: alone (it answers an error).
                    _ => Sharing::Alone,
                })
                .collect()
        })
        .await
        .unwrap_or_else(|_| vec![Sharing::Alone; count])
    }
}

/// Where the run that starts at `start` ends (exclusive).
fn run_end(sharing: &[Sharing], start: usize) -> usize {
    let mut files: Vec<&Path> = Vec::new();
    match &sharing[start] {
        Sharing::Alone => return start + 1,
        Sharing::Reads => {}
        Sharing::File(path) => files.push(path),
    }
    let mut end = start + 1;
    while end < sharing.len() {
        match &sharing[end] {
            Sharing::Reads => {}
            Sharing::File(path) if !files.iter().any(|f| overlap(f, path)) => files.push(path),
            _ => break,
        }
        end += 1;
    }
    end
}

/// One path is the other or inside it.
fn overlap(a: &Path, b: &Path) -> bool {
    a.starts_with(b) || b.starts_with(a)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(p: &str) -> Sharing {
        Sharing::File(PathBuf::from(p))
    }

    #[test]
    fn calls_on_different_files_and_reads_share_a_run_and_the_rest_go_alone() {
        let steps = [
            file("/w/a.txt"),
            file("/w/b.txt"),
            Sharing::Reads,
            file("/w/a.txt"),
            Sharing::Alone,
            file("/w/dir"),
            file("/w/dir/inside.txt"),
            Sharing::Reads,
        ];
        let mut runs = Vec::new();
        let mut start = 0;
        while start < steps.len() {
            let end = run_end(&steps, start);
            runs.push(start..end);
            start = end;
        }
        assert_eq!(runs, [0..3, 3..4, 4..5, 5..6, 6..8]);
    }
}
