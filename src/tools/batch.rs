//! One step's tool calls, run as Hermes runs them: the same call twice runs once and both
//! get its result; calls that only read (each tool says which of its calls do: `process`
//! list, poll, log, wait; `read_file`, `search_files`…) run together when they come in a
//! row; everything else (the terminal, writes) runs alone, in order. Results come back in the calls' order, and the turn's
//! cancellation reaches every running call; calls after a cancelled one are not started.

use futures_util::future::join_all;

use super::{ToolContext, ToolResult, Toolbox};
use crate::llm::ToolCall;

/// What a call that never started says.
const NOT_RUN: &str = "not run: the turn was interrupted";

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
        let mut next = 0;
        let mut stopped = false;
        while next < unique.len() {
            // A run of read-only calls, or one other call.
            let mut end = next + 1;
            if self.reads_only(&calls[unique[next]], ctx) {
                while end < unique.len() && self.reads_only(&calls[unique[end]], ctx) {
                    end += 1;
                }
            }
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
                    tracing::info!(calls = run.len(), "agent: running read-only tools together");
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
}
