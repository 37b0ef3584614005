//! One agent turn: the tool-calling loop. Streams a completion, runs the tools the model
//! asks for, feeds the results back, and repeats within the iteration budget. Cancellation
//! (interrupt, `/stop`, shutdown) reaches the LLM stream and the running tool at once; the
//! turn then returns the messages it completed so far, always well-formed (every tool call
//! has its result).

mod compress;
mod context;
pub mod models;
mod prompt;
mod sub_agents;
mod turn;

pub use compress::{Compacted, Compaction, Compressed, Compressor, SUMMARY_OPENING};

/// A text's rough token count, and a stored message's, as turns estimate them.
pub fn estimated_tokens(text: &str) -> usize {
    context::estimate_tokens(text)
}

pub fn estimated_message_tokens(message: &crate::store::StoredMessage) -> usize {
    context::cost(message)
}
pub use models::Models;
pub use prompt::SystemPrompt;

use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::llm::LlmClient;
use crate::store::StoredMessage;
use crate::tools::{ToolContext, Toolbox};

/// Shared by every turn: the models, the tools, the prompt, the budget.
pub struct AgentRuntime {
    pub models: Models,
    /// Context compression, unless `compression.enabled` is off.
    pub compressor: Option<std::sync::Arc<Compressor>>,
    pub tools: Toolbox,
    pub prompt: SystemPrompt,
    pub max_iterations: u32,
    /// How long a turn waits out a provider that stopped answering
    /// (`agent.provider_outage_wait`).
    pub outage_wait: std::time::Duration,
    /// Rough token budget for history (model context length).
    pub context_tokens: usize,
    /// How images reach the model (`agent.image_input_mode`).
    pub image_input: crate::media::ImageInputMode,
    /// Tool calls shown in the chat as they start (`display.tool_progress`; a chat may
    /// choose otherwise with `/verbose`).
    pub tool_progress: crate::config::ProgressDefaults,
    /// Where each person's memories are (the system prompt carries the person's).
    pub memory: crate::tools::memory::MemoryPlaces,
    /// `agent.personalities` (`/personality`).
    pub personalities: std::collections::BTreeMap<String, String>,
    /// An auxiliary vision model set up to describe images the model refuses (`auto`).
    pub describer: Option<std::sync::Arc<crate::media::Describer>>,
}

/// The pauses between rounds of asking a provider that stopped answering (its own retries
/// come first, inside each round).
const OUTAGE_PAUSE: hermes_adapter::Backoff = hermes_adapter::Backoff::new(
    std::time::Duration::from_secs(5),
    std::time::Duration::from_secs(60),
);
/// How many times an answer cut off by the output limit is continued.
const MAX_CONTINUATIONS: u32 = 3;
/// What the model is told when its tool steps are used up (the grace call has no tools).
const GRACE: &str = "[You have used all your tool steps for this message (agent.max_turns). Tools are no longer available: answer now with what you have found, and say what is left to do.]";
/// What the model is told when its answer was cut off.
const CONTINUE: &str = "[Your answer was cut off by the output limit. Continue exactly where it stopped, without repeating anything.]";

impl AgentRuntime {
    /// A line in the chat for a tool that starts (`new`: only when the tool changes).
    fn show_progress(
        &self,
        mode: crate::config::ToolProgress,
        progress: &Option<mpsc::UnboundedSender<String>>,
        call: &crate::llm::ToolCall,
        last_tool: &mut Option<String>,
    ) {
        use crate::config::ToolProgress;
        let Some(progress) = progress else { return };
        let repeated = last_tool.as_deref() == Some(call.name.as_str());
        *last_tool = Some(call.name.clone());
        match mode {
            ToolProgress::Off => {}
            ToolProgress::New if repeated => {}
            ToolProgress::New | ToolProgress::All => {
                let _ = progress.send(progress_line(call));
            }
        }
    }

    /// What replaces images the model refused: their descriptions, or a note to say so.
    async fn describe_instead(
        &self,
        images: &[String],
        cancel: &tokio_util::sync::CancellationToken,
    ) -> String {
        const CANNOT_SEE: &str = "\n[The images could not be shown to you: this model does not accept them. Tell the person plainly that you cannot see their images with the current model.]";
        let Some(describer) = &self.describer else {
            return CANNOT_SEE.to_owned();
        };
        let mut note = String::new();
        for (i, image) in images.iter().enumerate() {
            match describer.describe(image, cancel).await {
                Ok(seen) => note.push_str(&format!("\n[Image {} shows: {seen}]", i + 1)),
                Err(e) => {
                    tracing::warn!(error = %e, "agent: the image description failed");
                    return CANNOT_SEE.to_owned();
                }
            }
        }
        note
    }

    /// At most how much stored history a turn can use (bytes of text): what a turn needs
    /// to load from the store.
    pub fn history_bytes(&self) -> usize {
        context::bytes_for(self.context_tokens)
    }
}

/// What a turn works on.
pub struct TurnInput {
    /// The session's stored history (oldest first).
    pub history: Vec<StoredMessage>,
    /// Messages of an interrupted earlier attempt at this turn, carried over.
    pub carried: Vec<StoredMessage>,
    /// The new user text.
    pub user_text: String,
    /// Images that came with it (`data:` URLs), sent as image parts of its message.
    pub images: Vec<String>,
    /// Where to say which tool starts (`display.tool_progress`), one line each.
    pub progress: Option<mpsc::UnboundedSender<String>>,
    /// Where the answer's text goes as it is written (`streaming.*`).
    pub stream: Option<mpsc::UnboundedSender<crate::llm::StreamDelta>>,
    /// Who and where, for the system prompt.
    pub context: String,
    /// Where the tokens of the turn's model calls are added up.
    pub usage: std::sync::Arc<std::sync::Mutex<crate::llm::UsageByModel>>,
    /// The chat's model (`/model`), in place of the main one.
    pub model: Option<std::sync::Arc<LlmClient>>,
    /// The chat's personality text (`/personality`), for the system prompt.
    pub personality: Option<String>,
    /// The channel's own system prompt (`channel_overrides`), in place of
    /// `agent.system_prompt`.
    pub instructions: Option<String>,
    /// The memories the session's system prompt carries (taken at its first turn).
    pub memory: String,
    /// Which tool calls are shown (`display.tool_progress`, or the chat's `/verbose`).
    pub tool_progress: crate::config::ToolProgress,
    /// Where to tell the person something during the turn (a fallback), one message each.
    pub notices: Option<mpsc::UnboundedSender<String>>,
    /// How the session's stored history is compressed, when compression is on.
    pub compaction: Option<Compaction>,
    /// Tool steps this turn may take, in place of `agent.max_turns` (a sub-agent's
    /// `delegation.max_iterations`).
    pub max_steps: Option<u32>,
}

/// How a turn ended. Each variant carries the turn's new messages (the user's included).
#[derive(Debug)]
pub enum TurnOutcome {
    /// The model answered.
    Answered {
        reply: String,
        messages: Vec<StoredMessage>,
    },
    /// The iteration budget ran out; `reply` says so.
    BudgetExhausted {
        reply: String,
        messages: Vec<StoredMessage>,
    },
    /// The provider stayed unreachable or refused; `notice` is for the person.
    Failed {
        notice: String,
        messages: Vec<StoredMessage>,
    },
    /// Cancelled from outside.
    Cancelled { messages: Vec<StoredMessage> },
}

impl AgentRuntime {
    /// Run one turn. `steer` delivers texts the person sent meanwhile (busy mode `steer`);
    /// they join the conversation at the next tool boundary.
    pub async fn run_turn(
        &self,
        input: TurnInput,
        tools_ctx: ToolContext,
        steer: &mut mpsc::UnboundedReceiver<String>,
    ) -> TurnOutcome {
        let started = std::time::Instant::now();
        let outcome = self.turn(input, tools_ctx, steer).await;
        crate::metrics::turn(started.elapsed());
        outcome
    }
}

/// "💻 terminal: `ls -la`": the tool and what it was asked, on one short line.
fn progress_line(call: &crate::llm::ToolCall) -> String {
    let args: Value = serde_json::from_str(&call.arguments).unwrap_or(Value::Null);
    let text = |key: &str| args.get(key).and_then(Value::as_str).unwrap_or_default();
    let (icon, detail) = match call.name.as_str() {
        "terminal" => ("💻", text("command").to_owned()),
        "process" => ("⚙️", format!("{} {}", text("action"), text("id"))),
        _ => ("⚡", String::new()),
    };
    let first_line = detail.lines().next().unwrap_or_default().trim();
    let mut short: String = first_line.chars().take(40).collect();
    if short.len() < detail.trim().len() {
        short.push('…');
    }
    if short.trim().is_empty() {
        format!("{icon} {}", call.name)
    } else {
        format!("{icon} {}: `{}`", call.name, short.replace('`', "'"))
    }
}

/// A message's text and images as OpenAI content parts.
fn image_parts(text: &str, images: &[String]) -> Value {
    let mut parts = vec![json!({"type": "text", "text": text})];
    parts.extend(
        images
            .iter()
            .map(|url| json!({"type": "image_url", "image_url": {"url": url}})),
    );
    Value::Array(parts)
}

/// A stored message as an OpenAI chat message.
fn to_wire(m: &StoredMessage) -> Value {
    let mut v = json!({"role": m.role, "content": m.content.clone().unwrap_or_default()});
    if let Some(calls) = &m.tool_calls {
        v["tool_calls"] = serde_json::from_str(calls).unwrap_or(Value::Array(vec![]));
        if m.content.is_none() {
            v["content"] = Value::Null;
        }
    }
    if let Some(id) = &m.tool_call_id {
        v["tool_call_id"] = json!(id);
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_messages_keep_their_call_ids_on_the_wire() {
        let m = StoredMessage {
            role: "tool".into(),
            content: Some("ok".into()),
            tool_calls: None,
            tool_call_id: Some("c1".into()),
            tool_name: Some("terminal".into()),
        };
        assert_eq!(
            to_wire(&m),
            json!({"role": "tool", "content": "ok", "tool_call_id": "c1"})
        );
    }
}
