//! `delegate_task` (Hermes' sub-agents): a goal (or a batch of up to
//! `delegation.max_concurrent_children` tasks, run together) handed to fresh agents. Each
//! child is a turn of its own with no history, no memory, a budget of
//! `delegation.max_iterations` tool steps and fewer tools (no memory, clarify,
//! send_message, cronjob, execute_code; `delegate_task` only above
//! `delegation.max_spawn_depth`); its dangerous commands wait in the session's approval
//! queue like the parent's, its tokens count toward the session, and the parent's
//! cancellation reaches it. A delegation still running after
//! `delegation.background_after_seconds` goes on in the background ([`background`]) and
//! reports back into the conversation through the inbox when it is done.

pub mod background;

use std::sync::{Arc, Weak};
use std::time::Instant;

use futures_util::future::{BoxFuture, join_all};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

pub use background::Delegations;

use schemars::JsonSchema;

use crate::config::DelegationConfig;
use crate::llm::UsageByModel;
use crate::store::RecordedDelegation;
use crate::tool::{ToolContext, ToolResult, TypedTool};

/// The one loop in the daemon that is real: the agent runs tools, and this tool runs the
/// agent. It is this seam, implemented by `agent::AgentRuntime` and handed down to the
/// tool (weakly: the runtime owns its tools), so `tools` never imports `agent`.
pub trait SubAgents: Send + Sync {
    /// Run `child` as a fresh turn in `ctx` (no history, no memory, its own budget).
    fn run_child(&self, child: ChildTurn, ctx: ToolContext) -> BoxFuture<'_, ChildEnd>;
}

/// A sub-agent's turn, as the delegating tool asks for it.
pub struct ChildTurn {
    /// The task as the child reads it ([`child_prompt`]).
    pub prompt: String,
    /// Who and where, for its system prompt.
    pub context: String,
    /// Where the tokens of its model calls are added up.
    pub usage: Arc<std::sync::Mutex<UsageByModel>>,
    /// Tool steps it may take (`delegation.max_iterations`).
    pub max_steps: u32,
    /// The model it runs on: `delegation.model` (a name, resolved as `/model` resolves
    /// one) when set, else the delegating turn's model now (`None`: the main one).
    pub model_name: Option<String>,
    pub model: Option<Arc<crate::llm::LlmClient>>,
}

/// How a sub-agent's turn ended.
#[derive(Debug)]
pub enum ChildOutcome {
    Answered(String),
    /// The step budget ran out; the text says so.
    BudgetExhausted(String),
    /// The provider stayed unreachable or refused; the text says why.
    Failed(String),
    /// Cancelled from outside (a stop, or its time ran out).
    Cancelled,
}

/// A sub-agent's end, with the model calls it made.
#[derive(Debug)]
pub struct ChildEnd {
    pub outcome: ChildOutcome,
    pub api_calls: usize,
}

/// One sub-task.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize, JsonSchema)]
pub struct Task {
    pub goal: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<String>,
    /// This task's role, over the call's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<Role>,
}

/// Hermes' sub-agent roles: a `leaf` (the default) works and cannot delegate; an
/// `orchestrator` may delegate again, within `delegation.max_spawn_depth` (else it is a
/// leaf, as in Hermes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    Leaf,
    Orchestrator,
}

/// What a batch of children came to.
pub struct Batch {
    /// Hermes' result object: `{results: [...], total_duration_seconds}`.
    pub report: Value,
    /// The children's tokens, by model.
    pub usage: UsageByModel,
}

pub struct DelegateTool {
    pub config: DelegationConfig,
    /// The runtime children run on (the one this tool belongs to).
    pub agent: Weak<dyn SubAgents>,
    pub background: Arc<Delegations>,
}

impl DelegateTool {
    async fn delegate(&self, args: DelegateArgs, ctx: &ToolContext) -> ToolResult {
        let tasks = match tasks_from(args, self.config.max_concurrent_children) {
            Ok(tasks) => tasks,
            Err(why) => return ToolResult::text(format!("error: {why}")),
        };
        let Some(agent) = self.agent.upgrade() else {
            return ToolResult::text("error: the gateway is shutting down");
        };
        // The children's own token: the turn's cancellation reaches it while the turn
        // waits; once in the background, `/stop`, `/new` or shutdown does.
        let cancel = self.background.token();
        let id = format!("dlg_{:012x}", rand::random::<u64>() >> 16);
        let parent = ToolContext {
            cancel: cancel.clone(),
            // The children's own tool state (todo lists) is this delegation's.
            session_id: format!("{}/{id}", ctx.session_id),
            ..ctx.clone()
        };
        let mut batch =
            self.background
                .spawn(run_batch(agent, self.config.clone(), tasks.clone(), parent));
        let finished = tokio::select! {
            // A stop that comes with the move to the background stops it.
            biased;
            _ = ctx.cancel.cancelled() => {
                cancel.cancel();
                Some((&mut batch).await)
            }
            done = &mut batch => Some(done),
            _ = tokio::time::sleep(self.config.background_after) => None,
        };
        match finished {
            Some(Ok(batch)) => {
                if let Ok(mut usage) = ctx.usage.lock() {
                    for (model, u) in batch.usage.0 {
                        usage.add(&model, u);
                    }
                }
                ToolResult {
                    text: batch.report.to_string(),
                    cancelled: ctx.cancel.is_cancelled(),
                }
            }
            Some(Err(e)) => {
                tracing::error!(error = %e, "delegate: the sub-agents failed");
                ToolResult::text(format!("error: the sub-agents failed ({e})"))
            }
            None => {
                let record = RecordedDelegation {
                    id: id.clone(),
                    session_key: ctx.session_key.clone(),
                    session_id: ctx.session_id.clone(),
                    chat: ctx.chat.clone(),
                    author: ctx.author.clone(),
                    tasks: json!(tasks),
                };
                self.background
                    .adopt(record, cancel.clone(), batch, 0)
                    .await;
                if ctx.cancel.is_cancelled() {
                    // Stopped while it was being recorded: it ends now, like the turn.
                    cancel.cancel();
                }
                tracing::info!(delegation = %id, tasks = tasks.len(), "delegate: going on in the background");
                ToolResult::text(
                    json!({
                        "status": "dispatched",
                        "mode": "background",
                        "delegation_id": id,
                        "count": tasks.len(),
                        "goals": tasks.iter().map(|t| t.goal.clone()).collect::<Vec<_>>(),
                        "note": "The sub-agents go on in the background. Their results come back into this conversation as a new message when they finish; tell the person so and end your turn (do not wait or poll).",
                    })
                    .to_string(),
                )
            }
        }
    }
}

/// `delegate_task`'s arguments.
#[derive(serde::Deserialize, JsonSchema)]
pub struct DelegateArgs {
    /// What the agent should achieve (one task).
    goal: Option<String>,
    /// What it needs to know: files, findings, constraints.
    context: Option<String>,
    /// Several tasks run together, in place of goal/context.
    tasks: Option<Vec<Task>>,
    /// leaf (default): a worker that cannot delegate; orchestrator: may use delegate_task
    /// for workers of its own.
    role: Option<Role>,
}

impl TypedTool for DelegateTool {
    type Args = DelegateArgs;
    const NAME: &'static str = "delegate_task";
    const TOOLSET: &'static str = "delegation";

    fn description(&self) -> String {
        let nesting = if self.config.max_spawn_depth >= 2 && self.config.orchestrator_enabled {
            format!(
                "Nesting is on (max_spawn_depth={}): role='orchestrator' children may delegate again.",
                self.config.max_spawn_depth
            )
        } else {
            format!(
                "Nesting is off (max_spawn_depth={}); role='orchestrator' is forced to 'leaf'. Raise delegation.max_spawn_depth in config.yaml to enable.",
                self.config.max_spawn_depth
            )
        };
        format!(
            "Hand a self-contained sub-task to a fresh agent (or up to {} tasks to agents that work at the same time). \
             Each starts with no memory of this conversation: put everything it needs in `context`. It has the \
             terminal, file, web and skills tools but cannot ask the person anything. You get back each agent's \
             short summary. Long delegations go on in the background and report back into this conversation. \
             Sub-agents run on your current model. role: 'leaf' (default) = focused worker, cannot delegate further; \
             'orchestrator' = can use delegate_task to spawn its own workers. {nesting}",
            self.config.max_concurrent_children
        )
    }

    fn offered_to(&self, ctx: &ToolContext) -> bool {
        ctx.depth < self.config.max_spawn_depth && (ctx.depth == 0 || ctx.orchestrator)
    }

    fn call<'a>(&'a self, args: DelegateArgs, ctx: &'a ToolContext) -> BoxFuture<'a, ToolResult> {
        Box::pin(self.delegate(args, ctx))
    }
}

/// The tasks asked for: `tasks`, or `goal` with `context`.
fn tasks_from(args: DelegateArgs, max: usize) -> Result<Vec<Task>, String> {
    let role = args.role;
    let tasks: Vec<Task> = match (args.tasks, args.goal) {
        (Some(tasks), _) if !tasks.is_empty() => tasks
            .into_iter()
            .map(|t| Task {
                role: t.role.or(role),
                ..t
            })
            .collect(),
        (_, Some(goal)) => vec![Task {
            goal,
            context: args.context,
            role,
        }],
        _ => return Err("give a goal (with its context) or a list of tasks".into()),
    };
    if tasks.iter().any(|t| t.goal.trim().is_empty()) {
        return Err("a task's goal is empty".into());
    }
    if tasks.len() > max {
        return Err(format!(
            "{} tasks, but at most {max} run at once (delegation.max_concurrent_children); send fewer",
            tasks.len()
        ));
    }
    Ok(tasks)
}

/// Run every task at once as a child of `parent`'s turn.
pub async fn run_batch(
    agent: Arc<dyn SubAgents>,
    config: DelegationConfig,
    tasks: Vec<Task>,
    parent: ToolContext,
) -> Batch {
    let started = Instant::now();
    let children = tasks
        .iter()
        .enumerate()
        .map(|(index, task)| run_child(agent.as_ref(), &config, task, index, &parent));
    let done = join_all(children).await;
    let mut usage = UsageByModel::default();
    let mut results = Vec::new();
    for (result, child_usage) in done {
        for (model, u) in child_usage.0 {
            usage.add(&model, u);
        }
        results.push(result);
    }
    Batch {
        report: json!({
            "results": results,
            "total_duration_seconds": super::output::seconds(started.elapsed()),
        }),
        usage,
    }
}

/// One child: a fresh turn with the task as its message.
async fn run_child(
    agent: &dyn SubAgents,
    config: &DelegationConfig,
    task: &Task,
    index: usize,
    parent: &ToolContext,
) -> (Value, UsageByModel) {
    let started = Instant::now();
    let usage = Arc::new(std::sync::Mutex::new(UsageByModel::default()));
    let cancel = parent.cancel.child_token();
    let depth = parent.depth + 1;
    // Hermes: an orchestrator only where nesting is on and deep enough; else a leaf.
    let orchestrator = task.role == Some(Role::Orchestrator)
        && config.orchestrator_enabled
        && depth < config.max_spawn_depth;
    let ctx = ToolContext {
        session_id: format!("{}/{}", parent.session_id, index + 1),
        cancel: cancel.clone(),
        attention: CancellationToken::new(),
        usage: usage.clone(),
        depth,
        orchestrator,
        ..parent.clone()
    };
    let child = ChildTurn {
        prompt: child_prompt(task, depth, config.max_spawn_depth, orchestrator),
        model_name: config.model.clone(),
        model: parent.model.clone(),
        context: format!(
            "You are a sub-agent working for {} (through {}); you cannot talk to them.",
            parent.author.display_name, parent.chat.platform
        ),
        usage: usage.clone(),
        max_steps: config.max_iterations,
    };
    let turn = agent.run_child(child, ctx);
    tokio::pin!(turn);
    let (end, timed_out) = match config.child_timeout {
        Some(limit) => tokio::select! {
            end = &mut turn => (end, false),
            _ = tokio::time::sleep(limit) => {
                // Cancelled rather than dropped, so what it waits on (an approval, a
                // command) ends properly.
                cancel.cancel();
                (turn.await, true)
            }
        },
        None => (turn.await, false),
    };
    let usage = std::mem::take(&mut *usage.lock().expect("usage lock"));
    let tokens: u64 = usage.0.iter().map(|(_, u)| u.prompt + u.completion).sum();
    let (status, exit_reason, summary) = match end.outcome {
        ChildOutcome::Answered(reply) if reply.trim().is_empty() => {
            ("failed", "completed", "(empty)".to_owned())
        }
        ChildOutcome::Answered(reply) => ("completed", "completed", reply),
        ChildOutcome::BudgetExhausted(reply) => ("completed", "max_iterations", reply),
        ChildOutcome::Failed(notice) => ("error", "error", notice),
        ChildOutcome::Cancelled if timed_out => (
            "timeout",
            "timeout",
            format!(
                "The sub-agent ran out of time (delegation.child_timeout_seconds, {} s).",
                config.child_timeout.map_or(0, |t| t.as_secs())
            ),
        ),
        ChildOutcome::Cancelled => (
            "interrupted",
            "interrupted",
            "The sub-agent was stopped before it finished.".to_owned(),
        ),
    };
    let api_calls = end.api_calls;
    let (summary, truncated) = capped(&summary, config.max_summary_chars);
    let mut result = json!({
        "task_index": index,
        "status": status,
        "summary": crate::secrets::scrub(&summary),
        "api_calls": api_calls,
        "duration_seconds": super::output::seconds(started.elapsed()),
        "tokens": tokens,
        "exit_reason": exit_reason,
    });
    if truncated {
        result["summary_truncated"] = json!(true);
    }
    (result, usage)
}

/// What a child is told (Hermes' ephemeral prompt for a sub-agent).
fn child_prompt(task: &Task, depth: u32, max_depth: u32, orchestrator: bool) -> String {
    let mut text = String::from(
        "[You are a sub-agent: another agent handed you this task. Nobody can answer questions, so decide \
         for yourself. Work on it with your tools, then answer with a short summary, outcome first: what you \
         did, what you found, which files you changed, and any problem left.",
    );
    if orchestrator {
        text.push_str(&format!(
            " You are an orchestrator: split the work and hand parts to workers of your own with \
             delegate_task when that is faster or clearer than doing it yourself. You are at depth {depth}; \
             the delegation tree stops at max_spawn_depth={max_depth}."
        ));
        if depth + 1 >= max_depth {
            text.push_str(" Your own workers must be leaves (role 'leaf').");
        }
    }
    text.push_str("]\n\nTask: ");
    text.push_str(task.goal.trim());
    if let Some(context) = task.context.as_deref().filter(|c| !c.trim().is_empty()) {
        text.push_str("\n\nContext:\n");
        text.push_str(context.trim());
    }
    text
}

/// At most `max` characters (cut on a character boundary), and whether it was cut.
fn capped(text: &str, max: usize) -> (String, bool) {
    match text.char_indices().nth(max) {
        Some((at, _)) => (format!("{}…", &text[..at]), true),
        None => (text.to_owned(), false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The tasks a model's arguments ask for, read as the tool reads them.
    fn tasks_from(args: Value, max: usize) -> Result<Vec<Task>, String> {
        let parameters = crate::tool::args::parameters::<DelegateArgs>();
        super::tasks_from(crate::tool::args::read(args, parameters)?, max)
    }

    #[test]
    fn tasks_come_from_goal_or_a_list_within_the_limit() {
        let one = tasks_from(json!({"goal": "look", "context": "in /tmp"}), 3).unwrap();
        assert_eq!(
            one,
            [Task {
                goal: "look".into(),
                context: Some("in /tmp".into()),
                role: None,
            }]
        );
        // A task's role wins over the call's.
        let roles = tasks_from(
            json!({"role": "orchestrator", "tasks": [{"goal": "a"}, {"goal": "b", "role": "leaf"}]}),
            3,
        )
        .unwrap();
        assert_eq!(roles[0].role, Some(Role::Orchestrator));
        assert_eq!(roles[1].role, Some(Role::Leaf));
        assert!(tasks_from(json!({"goal": "a", "role": "boss"}), 3).is_err());
        let many = tasks_from(
            json!({"goal": "ignored", "tasks": [{"goal": "a"}, {"goal": "b", "context": "c"}]}),
            3,
        )
        .unwrap();
        assert_eq!(many.len(), 2);
        assert_eq!(many[1].context.as_deref(), Some("c"));
        assert!(
            tasks_from(json!({"tasks": [{"goal": "a"}, {"goal": "b"}]}), 1)
                .unwrap_err()
                .contains("at most 1")
        );
        assert!(tasks_from(json!({}), 3).is_err());
        assert!(tasks_from(json!({"goal": "  "}), 3).is_err());
        assert!(tasks_from(json!({"tasks": [{"context": "no goal"}]}), 3).is_err());
    }

    #[test]
    fn a_summary_is_cut_on_a_character_boundary() {
        assert_eq!(capped("héllo", 10), ("héllo".to_owned(), false));
        assert_eq!(capped("héllo", 2), ("hé…".to_owned(), true));
    }
}
