//! The loop of one turn: call the model (the chat's, then each fallback when it fails the
//! turn), run the tools it asks for, feed the results back, until it answers or the steps
//! run out (then one grace call without tools). A conversation past the compression
//! threshold is compressed first; a context-overflow error compresses and tries again once.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::context::{cost, estimate_tokens, fit_tool_results, trim_history};
use super::{
    AgentRuntime, CONTINUE, GRACE, MAX_CONTINUATIONS, TurnInput, TurnOutcome, image_parts, to_wire,
};
use crate::llm::{LlmClient, LlmError};
use crate::store::StoredMessage;
use crate::tools::ToolContext;

impl AgentRuntime {
    pub(super) async fn turn(
        &self,
        mut input: TurnInput,
        tools_ctx: ToolContext,
        steer: &mut mpsc::UnboundedReceiver<String>,
    ) -> TurnOutcome {
        let cancel = tools_ctx.cancel.clone();
        let mut new_messages = std::mem::take(&mut input.carried);
        new_messages.push(StoredMessage::user(std::mem::take(&mut input.user_text)));
        // The person's message of this turn: it carries the images on the wire (the stored
        // text says what was sent; the history keeps no image bytes).
        let with_images = new_messages.len() - 1;
        let mut images = std::mem::take(&mut input.images);
        let mut last_tool: Option<String> = None;
        let system =
            self.prompt
                .render(&input.context, input.personality.as_deref(), &input.memory);
        // What the conversation may take of a model's context; the rest is for the answer.
        let system_tokens = estimate_tokens(&system);
        let budget_of =
            |llm: &LlmClient| llm.config().context_length.saturating_sub(system_tokens) * 3 / 4;
        self.tools.prepare(&cancel).await;
        let tools = self.tools.definitions(&tools_ctx);
        // The chat's model first, then the fallback chain.
        let first = input
            .model
            .clone()
            .unwrap_or_else(|| self.models.primary.clone());
        let chain: Vec<Arc<LlmClient>> = std::iter::once(first.clone())
            .chain(
                self.models
                    .fallbacks
                    .iter()
                    .filter(|f| !Arc::ptr_eq(f, &first))
                    .cloned(),
            )
            .collect();
        let mut current = 0;
        // A provider outage waited out: when it began, how many pauses so far, and whether
        // the person was told (once a turn, as the move to a fallback is).
        let mut outage: Option<(std::time::Instant, u32)> = None;
        let (mut told_outage, mut told_fallback) = (false, false);
        let mut history = std::mem::take(&mut input.history);
        let mut compacted = false;
        if let Some(compaction) = &input.compaction {
            let size = estimate_tokens(&system)
                + history.iter().chain(&new_messages).map(cost).sum::<usize>();
            if size > compaction.threshold_tokens() {
                // What did not compress now (resting, too little in the middle) may still
                // be compressed once if the provider says the context is full.
                match compaction.run(&cancel, true).await {
                    Ok(Some(shorter)) => {
                        history = shorter;
                        compacted = true;
                    }
                    Ok(None) => {}
                    Err(e) => {
                        compacted = true;
                        tracing::warn!(error = %e, "agent: compression failed")
                    }
                }
            }
        }
        // Anthropic's thinking blocks of this turn's assistant messages (by index), sent
        // back with them while the turn goes on.
        let mut reasoning: HashMap<usize, Value> = HashMap::new();
        // An answer cut off by the output limit, so far (Hermes: up to three continuations,
        // then the joined text is the answer).
        let mut partial = String::new();
        let mut continuations = 0;
        let mut steps = 0;

        let max_steps = input.max_steps.unwrap_or(self.max_iterations);
        while steps < max_steps {
            let llm = &chain[current];
            let budget = budget_of(llm);
            // This turn's own messages come first; the history gets what they leave.
            let used = fit_tool_results(&mut new_messages, budget);
            let kept = trim_history(&history, budget.saturating_sub(used));
            let mut wire = vec![json!({"role": "system", "content": system})];
            wire.extend(kept.iter().copied().map(to_wire));
            wire.extend(new_messages.iter().enumerate().map(|(i, m)| {
                let mut message = to_wire(m);
                if i == with_images && !images.is_empty() {
                    message["content"] = image_parts(m.content.as_deref().unwrap_or(""), &images);
                }
                if let Some(blocks) = reasoning.get(&i) {
                    message["reasoning_blocks"] = blocks.clone();
                }
                message
            }));
            if !partial.is_empty() {
                wire.push(json!({"role": "assistant", "content": partial}));
                wire.push(json!({"role": "user", "content": CONTINUE}));
            }
            let result = llm
                .complete_streaming(&wire, &tools, &cancel, input.stream.as_ref())
                .await;
            // The request's JSON copy of the conversation is rebuilt for the next call: not
            // kept while tools run (a long conversation makes it the turn's largest).
            drop((wire, kept));
            let error = match result {
                Ok(completion) => {
                    input
                        .usage
                        .lock()
                        .expect("usage lock")
                        .add(llm.model(), completion.usage);
                    steps += 1;
                    outage = None;
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
                    if let Some(blocks) = completion.reasoning.clone() {
                        reasoning.insert(new_messages.len(), blocks);
                    }
                    let text = std::mem::take(&mut partial) + &completion.content;
                    let cancelled = self
                        .run_tools(
                            &completion.tool_calls,
                            text,
                            &mut new_messages,
                            (input.tool_progress, &input.progress),
                            &mut last_tool,
                            &tools_ctx,
                        )
                        .await;
                    if cancelled {
                        return TurnOutcome::Cancelled {
                            messages: new_messages,
                        };
                    }
                    // Tool boundary: texts the person sent meanwhile join here.
                    while let Ok(text) = steer.try_recv() {
                        new_messages.push(StoredMessage::user(text));
                    }
                    continue;
                }
                Err(LlmError::Cancelled) => {
                    return TurnOutcome::Cancelled {
                        messages: new_messages,
                    };
                }
                Err(e) => e,
            };
            if let LlmError::Refused { status, .. } = &error
                && !images.is_empty()
                && self.image_input == crate::media::ImageInputMode::Auto
                && matches!(status, 400 | 415 | 422)
                && !error.is_context_overflow()
            {
                // `auto`: a model that refuses images gets them described, when an
                // auxiliary vision model is set up; else it answers without them and says so.
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
            if error.is_context_overflow()
                && !std::mem::replace(&mut compacted, true)
                && let Some(compaction) = &input.compaction
            {
                tracing::warn!(error = %error, "agent: the conversation is too long for the model; compressing it");
                match compaction.run(&cancel, false).await {
                    Ok(Some(shorter)) => {
                        history = shorter;
                        continue;
                    }
                    Ok(None) => {}
                    Err(e) => tracing::warn!(error = %e, "agent: compression failed"),
                }
            }
            if (error.calls_for_fallback() || error.is_context_overflow())
                && current + 1 < chain.len()
            {
                let next = &chain[current + 1];
                tracing::warn!(error = %error, from = llm.model(), to = next.model(), "agent: falling back to the next model");
                crate::metrics::llm_error("fallback");
                if let Some(notices) = input.notices.as_ref().filter(|_| !told_fallback) {
                    told_fallback = true;
                    let _ = notices.send(format!(
                        "⚠️ {} failed ({}). I'm answering this message with {} instead.",
                        super::models::describe(llm),
                        short_reason(&error),
                        super::models::describe(next),
                    ));
                }
                current += 1;
                continue;
            }
            // Every model is down (a provider outage, a network cut): the turn waits and asks
            // again from the first, for up to `agent.provider_outage_wait`; /stop ends it.
            if matches!(error, LlmError::Unreachable { .. }) {
                let (since, pauses) = outage.get_or_insert((std::time::Instant::now(), 0));
                let left = self.outage_wait.saturating_sub(since.elapsed());
                if !left.is_zero() {
                    tracing::warn!(error = %error, waited = ?since.elapsed(), "agent: no model is answering; waiting to ask again");
                    if let Some(notices) = input.notices.as_ref().filter(|_| !told_outage) {
                        told_outage = true;
                        let _ = notices.send(format!(
                            "⏳ I can't reach the model provider right now ({error}). I'll keep trying and answer as soon as it's back; /stop gives up."
                        ));
                    }
                    let pause = super::OUTAGE_PAUSE.delay(*pauses).min(left);
                    *pauses += 1;
                    tokio::select! {
                        _ = cancel.cancelled() => {
                            return TurnOutcome::Cancelled {
                                messages: new_messages,
                            };
                        }
                        _ = tokio::time::sleep(pause) => {}
                    }
                    current = 0;
                    continue;
                }
            }
            let notice = match &error {
                LlmError::Unreachable { .. } => format!(
                    "⚠️ I can't reach the model provider right now ({error}). Nothing was lost: send your message again in a moment."
                ),
                _ if error.is_context_overflow() => format!(
                    "⚠️ This conversation is longer than the model can take ({error}). /compress summarises the earlier part; /new starts over."
                ),
                _ => format!(
                    "⚠️ The model provider refused the request: {error}. Check the model settings (model.default, model.api_key) or /new to start over."
                ),
            };
            return TurnOutcome::Failed {
                notice,
                messages: new_messages,
            };
        }
        self.grace(
            &chain[current],
            (&system, &history),
            new_messages,
            budget_of(&chain[current]),
            (&input, max_steps),
            &cancel,
        )
        .await
    }

    /// Run a step's tool calls (recorded first as the assistant's message with `text`),
    /// appending each result in the calls' order; `true` when the turn was cancelled.
    async fn run_tools(
        &self,
        asked: &[crate::llm::ToolCall],
        text: String,
        new_messages: &mut Vec<StoredMessage>,
        (mode, progress): (
            crate::config::ToolProgress,
            &Option<mpsc::UnboundedSender<String>>,
        ),
        last_tool: &mut Option<String>,
        tools_ctx: &ToolContext,
    ) -> bool {
        // Names repaired where the model misspelled a tool (`Terminal`, `terminal_tool`).
        let calls: Vec<crate::llm::ToolCall> = asked
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
            content: (!text.is_empty()).then_some(text),
            tool_calls: Some(Value::Array(calls_json).to_string()),
            tool_call_id: None,
            tool_name: None,
        });
        for call in &calls {
            self.show_progress(mode, progress, call, last_tool);
        }
        let results = self.tools.run_batch(&calls, tools_ctx).await;
        let cancelled = results.iter().any(|r| r.cancelled) || tools_ctx.cancel.is_cancelled();
        for (call, result) in calls.iter().zip(results) {
            new_messages.push(StoredMessage {
                role: "tool".into(),
                // Whatever a command printed, the model (and the history) never sees a
                // secret.
                content: Some(crate::secrets::scrub(&result.text).into_owned()),
                tool_calls: None,
                tool_call_id: Some(call.id.clone()),
                tool_name: Some(call.name.clone()),
            });
        }
        cancelled
    }

    /// Hermes' grace call: one more, without tools, so the model can say what it has.
    async fn grace(
        &self,
        llm: &LlmClient,
        (system, history): (&str, &[StoredMessage]),
        mut new_messages: Vec<StoredMessage>,
        budget: usize,
        (input, max_steps): (&TurnInput, u32),
        cancel: &tokio_util::sync::CancellationToken,
    ) -> TurnOutcome {
        let used = fit_tool_results(&mut new_messages, budget);
        let kept = trim_history(history, budget.saturating_sub(used));
        let mut wire = vec![json!({"role": "system", "content": system})];
        wire.extend(kept.iter().copied().map(to_wire));
        wire.extend(new_messages.iter().map(to_wire));
        wire.push(json!({"role": "user", "content": GRACE}));
        let grace = llm
            .complete_streaming(&wire, &[], cancel, input.stream.as_ref())
            .await;
        if let Ok(answer) = &grace {
            input
                .usage
                .lock()
                .expect("usage lock")
                .add(llm.model(), answer.usage);
        }
        let reply = match grace {
            Ok(answer) if !answer.content.trim().is_empty() => answer.content,
            Err(LlmError::Cancelled) => {
                return TurnOutcome::Cancelled {
                    messages: new_messages,
                };
            }
            _ => format!(
                "I stopped after {max_steps} tool steps without finishing (the limit is agent.max_turns). Tell me to continue if you want me to go on."
            ),
        };
        new_messages.push(StoredMessage::assistant(reply.clone()));
        TurnOutcome::BudgetExhausted {
            reply,
            messages: new_messages,
        }
    }
}

/// What went wrong, in a few words for the person.
fn short_reason(error: &LlmError) -> String {
    match error {
        LlmError::Unreachable { .. } => "it is not answering".into(),
        LlmError::Refused { status: 402, .. } => "out of credit".into(),
        LlmError::Refused { .. } if error.is_billing() => "out of credit".into(),
        LlmError::Refused { .. } if error.is_context_overflow() => {
            "the conversation is too long for it".into()
        }
        LlmError::Refused { status, .. } => format!("HTTP {status}"),
        LlmError::Cancelled => "cancelled".into(),
    }
}
