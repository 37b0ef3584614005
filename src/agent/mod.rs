//! One agent turn: the tool-calling loop. Streams a completion, runs the tools the model
//! asks for, feeds the results back, and repeats within the iteration budget. Cancellation
//! (interrupt, `/stop`, shutdown) reaches the LLM stream and the running tool at once; the
//! turn then returns the messages it completed so far, always well-formed (every tool call
//! has its result).

mod context;
mod prompt;

pub use prompt::SystemPrompt;

use context::{estimate_tokens, fit_tool_results, trim_history};

use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::llm::{LlmClient, LlmError};
use crate::store::StoredMessage;
use crate::tools::{ToolContext, Toolbox};

/// Shared by every turn: the model client, the tools, the prompt, the budget.
pub struct AgentRuntime {
    pub llm: LlmClient,
    pub tools: Toolbox,
    pub prompt: SystemPrompt,
    pub max_iterations: u32,
    /// Rough token budget for history (model context length).
    pub context_tokens: usize,
    /// How images reach the model (`agent.image_input_mode`).
    pub image_input: crate::media::ImageInputMode,
    /// Tool calls shown in the chat as they start (`display.tool_progress`).
    pub tool_progress: crate::config::ToolProgress,
    /// An auxiliary vision model set up to describe images the model refuses (`auto`).
    pub describer: Option<std::sync::Arc<crate::media::Describer>>,
}

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
        progress: &Option<mpsc::UnboundedSender<String>>,
        call: &crate::llm::ToolCall,
        last_tool: &mut Option<String>,
    ) {
        use crate::config::ToolProgress;
        let Some(progress) = progress else { return };
        let repeated = last_tool.as_deref() == Some(call.name.as_str());
        *last_tool = Some(call.name.clone());
        match self.tool_progress {
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
    pub usage: std::sync::Arc<std::sync::Mutex<crate::llm::Usage>>,
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

    async fn turn(
        &self,
        input: TurnInput,
        tools_ctx: ToolContext,
        steer: &mut mpsc::UnboundedReceiver<String>,
    ) -> TurnOutcome {
        let cancel = tools_ctx.cancel.clone();
        let mut new_messages = input.carried;
        new_messages.push(StoredMessage::user(input.user_text));
        // The person's message of this turn: it carries the images on the wire (the stored
        // text says what was sent; the history keeps no image bytes).
        let with_images = new_messages.len() - 1;
        let mut images = input.images;
        let mut last_tool: Option<String> = None;
        let system = self.prompt.render(&input.context);
        // What the conversation may take of the context; the rest is for the answer.
        let budget = self.context_tokens.saturating_sub(estimate_tokens(&system)) * 3 / 4;
        let tools = self.tools.definitions();
        // An answer cut off by the output limit, so far (Hermes: up to three continuations,
        // then the joined text is the answer).
        let mut partial = String::new();
        let mut continuations = 0;

        for _iteration in 0..self.max_iterations {
            // This turn's own messages come first; the history gets what they leave.
            let used = fit_tool_results(&mut new_messages, budget);
            let history = trim_history(&input.history, budget.saturating_sub(used));
            let mut wire = vec![json!({"role": "system", "content": system})];
            wire.extend(history.iter().map(to_wire));
            wire.extend(new_messages.iter().enumerate().map(|(i, m)| {
                let mut message = to_wire(m);
                if i == with_images && !images.is_empty() {
                    message["content"] = image_parts(m.content.as_deref().unwrap_or(""), &images);
                }
                message
            }));
            if !partial.is_empty() {
                wire.push(json!({"role": "assistant", "content": partial}));
                wire.push(json!({"role": "user", "content": CONTINUE}));
            }
            let completion = match self
                .llm
                .complete_streaming(&wire, &tools, &cancel, input.stream.as_ref())
                .await
            {
                Ok(c) => {
                    *input.usage.lock().expect("usage lock") += c.usage;
                    c
                }
                Err(LlmError::Refused { status, .. })
                    if !images.is_empty()
                        && self.image_input == crate::media::ImageInputMode::Auto
                        && matches!(status, 400 | 415 | 422) =>
                {
                    // `auto`: a model that refuses images gets them described, when an
                    // auxiliary vision model is set up; else it answers without them and
                    // says so.
                    tracing::warn!(
                        status,
                        "agent: the model refused the images; going on without them"
                    );
                    let note = self.describe_instead(&images, &cancel).await;
                    images.clear();
                    if let Some(content) = &mut new_messages[with_images].content {
                        content.push_str(&note);
                    }
                    continue;
                }
                Err(LlmError::Cancelled) => {
                    return TurnOutcome::Cancelled {
                        messages: new_messages,
                    };
                }
                Err(e) => {
                    let notice = match &e {
                        LlmError::Unreachable { .. } => format!(
                            "⚠️ I can't reach the model provider right now ({e}). Nothing was lost: send your message again in a moment."
                        ),
                        _ => format!(
                            "⚠️ The model provider refused the request: {e}. Check the model settings (model.default, model.api_key) or /new to start over."
                        ),
                    };
                    return TurnOutcome::Failed {
                        notice,
                        messages: new_messages,
                    };
                }
            };
            if completion.tool_calls.is_empty() {
                partial.push_str(&completion.content);
                if completion.finish_reason.as_deref() == Some("length")
                    && continuations < MAX_CONTINUATIONS
                {
                    continuations += 1;
                    tracing::info!(
                        continuations,
                        "agent: the answer was cut off by the output limit; asking the model to go on"
                    );
                    continue;
                }
                new_messages.push(StoredMessage::assistant(partial.clone()));
                return TurnOutcome::Answered {
                    reply: partial,
                    messages: new_messages,
                };
            }
            // Names repaired where the model misspelled a tool (`Terminal`, `terminal_tool`).
            let calls: Vec<crate::llm::ToolCall> = completion
                .tool_calls
                .iter()
                .map(|call| match crate::tools::repair_name(&call.name) {
                    Some(name) if name != call.name => {
                        tracing::info!(asked = %call.name, tool = name, "agent: a misspelled tool name was repaired");
                        crate::llm::ToolCall {
                            name: name.to_owned(),
                            ..call.clone()
                        }
                    }
                    _ => call.clone(),
                })
                .collect();
            let calls_json: Vec<Value> = calls
                .iter()
                .map(|c| json!({"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}))
                .collect();
            new_messages.push(StoredMessage {
                role: "assistant".into(),
                // A continued answer that ends in tool calls keeps its earlier text.
                content: {
                    let text = std::mem::take(&mut partial) + &completion.content;
                    (!text.is_empty()).then_some(text)
                },
                tool_calls: Some(Value::Array(calls_json).to_string()),
                tool_call_id: None,
                tool_name: None,
            });
            let mut cancelled = false;
            // The same call twice in one step runs once; both get its result.
            let mut done: Vec<(&str, &str, String)> = Vec::new();
            for call in &calls {
                let earlier = done
                    .iter()
                    .find(|(name, args, _)| *name == call.name && *args == call.arguments)
                    .map(|(_, _, text)| text.clone());
                let text = if let Some(text) = earlier {
                    text
                } else if cancelled {
                    "not run: the turn was interrupted".to_owned()
                } else {
                    tracing::info!(tool = %call.name, "agent: running a tool");
                    self.show_progress(&input.progress, call, &mut last_tool);
                    let result = self.tools.run(call, &tools_ctx).await;
                    cancelled = result.cancelled || cancel.is_cancelled();
                    // Whatever a command printed, the model (and the history) never sees a
                    // secret.
                    crate::secrets::scrub(&result.text).into_owned()
                };
                done.push((&call.name, &call.arguments, text.clone()));
                new_messages.push(StoredMessage {
                    role: "tool".into(),
                    content: Some(text),
                    tool_calls: None,
                    tool_call_id: Some(call.id.clone()),
                    tool_name: Some(call.name.clone()),
                });
            }
            if cancelled {
                return TurnOutcome::Cancelled {
                    messages: new_messages,
                };
            }
            // Tool boundary: texts the person sent meanwhile join here.
            while let Ok(text) = steer.try_recv() {
                new_messages.push(StoredMessage::user(text));
            }
        }
        // Hermes' grace call: one more, without tools, so the model can say what it has.
        let used = fit_tool_results(&mut new_messages, budget);
        let history = trim_history(&input.history, budget.saturating_sub(used));
        let mut wire = vec![json!({"role": "system", "content": system})];
        wire.extend(history.iter().map(to_wire));
        wire.extend(new_messages.iter().map(to_wire));
        wire.push(json!({"role": "user", "content": GRACE}));
        let grace = self
            .llm
            .complete_streaming(&wire, &[], &cancel, input.stream.as_ref())
            .await;
        if let Ok(answer) = &grace {
            *input.usage.lock().expect("usage lock") += answer.usage;
        }
        let reply = match grace {
            Ok(answer) if !answer.content.trim().is_empty() => answer.content,
            Err(LlmError::Cancelled) => {
                return TurnOutcome::Cancelled {
                    messages: new_messages,
                };
            }
            _ => format!(
                "I stopped after {} tool steps without finishing (the limit is agent.max_turns). Tell me to continue if you want me to go on.",
                self.max_iterations
            ),
        };
        new_messages.push(StoredMessage::assistant(reply.clone()));
        TurnOutcome::BudgetExhausted {
            reply,
            messages: new_messages,
        }
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
