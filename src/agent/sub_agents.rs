//! The agent's side of the sub-agent seam (`tools::delegate::SubAgents`): a delegated
//! task runs as a fresh turn of this runtime, with no history, no memory, no progress
//! shown, and its own step budget.

use futures_util::future::BoxFuture;
use tokio::sync::mpsc;

use super::{AgentRuntime, TurnInput, TurnOutcome};
use crate::tools::ToolContext;
use crate::tools::delegate::{ChildEnd, ChildOutcome, ChildTurn, SubAgents};

impl SubAgents for AgentRuntime {
    fn run_child(&self, child: ChildTurn, ctx: ToolContext) -> BoxFuture<'_, ChildEnd> {
        Box::pin(async move {
            let input = TurnInput {
                history: Vec::new(),
                carried: Vec::new(),
                user_text: child.prompt,
                images: Vec::new(),
                progress: None,
                stream: None,
                context: child.context,
                usage: child.usage,
                model: None,
                personality: None,
                instructions: None,
                memory: String::new(),
                tool_progress: crate::config::ToolProgress::Off,
                notices: None,
                compaction: None,
                max_steps: Some(child.max_steps),
            };
            // `delegation.model` when set (and usable), else the delegating turn's model.
            let model = match child.model_name.as_deref() {
                Some(name) => match self.models.resolve(name) {
                    Ok(client) => Some(client),
                    Err(e) => {
                        tracing::warn!(model = name, error = %e, "delegate: delegation.model cannot be used; the delegating turn's model runs the sub-agent");
                        child.model.clone()
                    }
                },
                None => child.model.clone(),
            };
            let input = TurnInput { model, ..input };
            // Nobody steers a sub-agent.
            let (_steer_tx, mut steer) = mpsc::unbounded_channel();
            let (outcome, messages) = match self.run_turn(input, ctx, &mut steer).await {
                TurnOutcome::Answered { reply, messages } => {
                    (ChildOutcome::Answered(reply), messages)
                }
                TurnOutcome::BudgetExhausted { reply, messages } => {
                    (ChildOutcome::BudgetExhausted(reply), messages)
                }
                TurnOutcome::Failed { notice, messages } => {
                    (ChildOutcome::Failed(notice), messages)
                }
                TurnOutcome::Cancelled { messages } => (ChildOutcome::Cancelled, messages),
            };
            ChildEnd {
                outcome,
                api_calls: messages.iter().filter(|m| m.role == "assistant").count(),
            }
        })
    }
}
