//! The loop of one turn: call the model (the chat's, then each fallback when it fails the
//! turn), run the tools it asks for, feed the results back, until it answers or the steps
//! run out (then one grace call without tools). A conversation past the compression
//! threshold is compressed first; a context-overflow error compresses and tries again once.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::context::{cost, estimate_tokens, fit_tool_results, trim_history};
use super::{
    AgentRuntime, CONTINUE, GRACE, MAX_CONTINUATIONS, TurnInput, TurnOutcome, image_parts, to_wire,
};
use crate::llm::{LlmClient, LlmError, ToolDefinitions};
use crate::store::StoredMessage;
use crate::tools::ToolContext;

/// One turn as it goes: the conversation it sends, the models it may use and which one it
/// is on, and what it has to remember between calls.
struct Turn {
    input: TurnInput,
    cancel: CancellationToken,
    system: String,
    /// What the system prompt takes of a model's context.
    system_tokens: usize,
    tools: ToolDefinitions,
    /// The chat's model (or the main one), then the fallback chain.
    chain: Vec<Arc<LlmClient>>,
    current: usize,
    history: Vec<StoredMessage>,
    /// This turn's messages: an interrupted attempt's, the person's, then the steps'.
    new_messages: Vec<StoredMessage>,
    /// The person's message of this turn: it carries the images on the wire (the stored
    /// text says what was sent; the history keeps no image bytes).
    with_images: usize,
    images: Vec<String>,
    /// Anthropic's thinking blocks of this turn's assistant messages (by index), sent back
    /// with them while the turn goes on.
    reasoning: HashMap<usize, Value>,
    /// An answer cut off by the output limit, so far (Hermes: up to three continuations,
    /// then the joined text is the answer).
    partial: String,
    continuations: u32,
    steps: u32,
    max_steps: u32,
    /// Compressed once already (or tried and failed): a context overflow does not again.
    compacted: bool,
    /// A provider outage waited out: when it began and how many pauses so far.
    outage: Option<(std::time::Instant, u32)>,
    /// The person was told of an outage, of a fallback (once a turn each).
    told_outage: bool,
    told_fallback: bool,
    last_tool: Option<String>,
}

/// What a stage of the turn leads to.
enum Next {
    /// Call a model again.
    Call,
    End(TurnOutcome),
}

impl Turn {
    /// The turn ends cancelled, with the messages it has so far.
    fn cancelled(&mut self) -> Next {
        Next::End(TurnOutcome::Cancelled {
            messages: std::mem::take(&mut self.new_messages),
        })
    }

    /// What the conversation may take of `llm`'s context; the rest is for the answer.
    fn budget(&self, llm: &LlmClient) -> usize {
        llm.config()
            .context_length
            .saturating_sub(self.system_tokens)
            * 3
            / 4
    }

    /// The request for the next call: the system prompt, the history this turn's own
    /// messages leave room for, those messages (images and thinking blocks with theirs),
    /// and a cut-off answer to go on from.
    fn wire(&mut self, budget: usize) -> Vec<Value> {
        let used = fit_tool_results(&mut self.new_messages, budget);
        let kept = trim_history(&self.history, budget.saturating_sub(used));
        let mut wire = vec![json!({"role": "system", "content": self.system})];
        wire.extend(kept.iter().copied().map(to_wire));
        wire.extend(self.new_messages.iter().enumerate().map(|(i, m)| {
            let mut message = to_wire(m);
            if i == self.with_images && !self.images.is_empty() {
                message["content"] = image_parts(m.content.as_deref().unwrap_or(""), &self.images);
            }
            if let Some(blocks) = self.reasoning.get(&i) {
                message["reasoning_blocks"] = blocks.clone();
            }
            message
        }));
        if !self.partial.is_empty() {
            wire.push(json!({"role": "assistant", "content": self.partial}));
            wire.push(json!({"role": "user", "content": CONTINUE}));
        }
        wire
    }
}

impl AgentRuntime {
    pub(super) async fn turn(
        &self,
        input: TurnInput,
        tools_ctx: ToolContext,
        steer: &mut mpsc::UnboundedReceiver<String>,
    ) -> TurnOutcome {
        let mut turn = self.begin(input, &tools_ctx).await;
        self.compress_first(&mut turn).await;
        while turn.steps < turn.max_steps {
            let llm = turn.chain[turn.current].clone();
            let wire = turn.wire(turn.budget(&llm));
            let result = llm
                .complete_streaming(&wire, &turn.tools, &turn.cancel, turn.input.stream.as_ref())
                .await;
            // The request's JSON copy of the conversation is rebuilt for the next call: not
            // kept while tools run (a long conversation makes it the turn's largest).
            drop(wire);
            let next = match result {
                Ok(completion) => {
                    self.answered(&mut turn, &llm, completion, &tools_ctx, steer)
                        .await
                }
                Err(LlmError::Cancelled) => turn.cancelled(),
                Err(error) => self.failed(&mut turn, &llm, error).await,
            };
            if let Next::End(outcome) = next {
                return outcome;
            }
        }
        self.grace(turn).await
    }

    /// The turn's state before its first call: its messages, prompt, tools and models.
    async fn begin(&self, mut input: TurnInput, tools_ctx: &ToolContext) -> Turn {
        let cancel = tools_ctx.cancel.clone();
        let mut new_messages = std::mem::take(&mut input.carried);
        new_messages.push(StoredMessage::user(std::mem::take(&mut input.user_text)));
        let system = self.prompt.render(
            &input.context,
            input.personality.as_deref(),
            input.instructions.as_deref(),
            &input.memory,
        );
        self.tools.prepare(&cancel).await;
        let tools = self.tools.definitions(tools_ctx);
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
        Turn {
            cancel,
            system_tokens: estimate_tokens(&system),
            system,
            tools,
            chain,
            current: 0,
            history: std::mem::take(&mut input.history),
            with_images: new_messages.len() - 1,
            new_messages,
            images: std::mem::take(&mut input.images),
            reasoning: HashMap::new(),
            partial: String::new(),
            continuations: 0,
            steps: 0,
            max_steps: input.max_steps.unwrap_or(self.max_iterations),
            compacted: false,
            outage: None,
            told_outage: false,
            told_fallback: false,
            last_tool: None,
            input,
        }
    }

    /// A conversation past the compression threshold of the model about to answer is
    /// compressed before its first call (at the turn's start, and when a fallback takes
    /// over). What did not compress now (resting, too little in the middle) may still be
    /// compressed once if the provider says the context is full.
    async fn compress_first(&self, turn: &mut Turn) {
        let Some(compaction) = &turn.input.compaction else {
            return;
        };
        let size = turn.system_tokens
            + turn
                .history
                .iter()
                .chain(&turn.new_messages)
                .map(cost)
                .sum::<usize>();
        // Against the model this turn starts on: the chat's choice may hold less (or more)
        // than the main model.
        let context = turn.chain[turn.current].config().context_length;
        if size <= compaction.threshold_tokens(context) {
            return;
        }
        match compaction.run(&turn.cancel, true, context).await {
            Ok(Some(shorter)) => {
                turn.history = shorter;
                turn.compacted = true;
            }
            Ok(None) => {}
            Err(e) => {
                turn.compacted = true;
                tracing::warn!(error = %e, "agent: compression failed")
            }
        }
    }

    /// The model answered: with text (the turn's answer, or a cut-off one to go on from),
    /// or with tool calls, which run; texts the person sent meanwhile join after them.
    async fn answered(
        &self,
        turn: &mut Turn,
        llm: &LlmClient,
        completion: crate::llm::Completion,
        tools_ctx: &ToolContext,
        steer: &mut mpsc::UnboundedReceiver<String>,
    ) -> Next {
        turn.input
            .usage
            .lock()
            .expect("usage lock")
            .add(llm.model(), completion.usage);
        turn.steps += 1;
        turn.outage = None;
        if completion.tool_calls.is_empty() {
            turn.partial.push_str(&completion.content);
            if completion.finish_reason.as_deref() == Some("length")
                && turn.continuations < MAX_CONTINUATIONS
            {
                turn.continuations += 1;
                tracing::info!(
                    continuations = turn.continuations,
                    "agent: the answer was cut off by the output limit; asking the model to go on"
                );
                return Next::Call;
            }
            let reply = std::mem::take(&mut turn.partial);
            turn.new_messages
                .push(StoredMessage::assistant(reply.clone()));
            return Next::End(TurnOutcome::Answered {
                reply,
                messages: std::mem::take(&mut turn.new_messages),
            });
        }
        if let Some(blocks) = completion.reasoning.clone() {
            turn.reasoning.insert(turn.new_messages.len(), blocks);
        }
        let text = std::mem::take(&mut turn.partial) + &completion.content;
        // The tools learn which model answers now: sub-agents run on it.
        let tools_ctx = ToolContext {
            model: Some(turn.chain[turn.current].clone()),
            ..tools_ctx.clone()
        };
        let cancelled = self
            .run_tools(
                &completion.tool_calls,
                text,
                &mut turn.new_messages,
                (turn.input.tool_progress, &turn.input.progress),
                &mut turn.last_tool,
                &tools_ctx,
            )
            .await;
        if cancelled {
            return turn.cancelled();
        }
        // Tool boundary: texts the person sent meanwhile join here.
        while let Ok(text) = steer.try_recv() {
            turn.new_messages.push(StoredMessage::user(text));
        }
        Next::Call
    }

    /// A call failed: images a model refused are described or left out; a context that
    /// overflowed is compressed once; the next model in the chain takes over; an outage
    /// is waited out; else the turn fails with a notice for the person.
    async fn failed(&self, turn: &mut Turn, llm: &LlmClient, error: LlmError) -> Next {
        if let LlmError::Refused { status, .. } = &error
            && self.images_refused(turn, &error)
        {
            // `auto`: a model that refuses images gets them described, when an auxiliary
            // vision model is set up; else it answers without them and says so.
            tracing::warn!(
                status,
                "agent: the model refused the images; going on without them"
            );
            let note = self.describe_instead(&turn.images, &turn.cancel).await;
            turn.images.clear();
            if let Some(content) = &mut turn.new_messages[turn.with_images].content {
                content.push_str(&note);
            }
            return Next::Call;
        }
        if error.is_context_overflow()
            && !std::mem::replace(&mut turn.compacted, true)
            && let Some(compaction) = &turn.input.compaction
        {
            tracing::warn!(error = %error, "agent: the conversation is too long for the model; compressing it");
            let context = llm.config().context_length;
            match compaction.run(&turn.cancel, false, context).await {
                Ok(Some(shorter)) => {
                    turn.history = shorter;
                    return Next::Call;
                }
                Ok(None) => {}
                Err(e) => tracing::warn!(error = %e, "agent: compression failed"),
            }
        }
        if (error.calls_for_fallback() || error.is_context_overflow())
            && turn.current + 1 < turn.chain.len()
        {
            self.fall_back(turn, llm, &error);
            // The next model may hold less: the conversation is measured against it.
            if !turn.compacted {
                self.compress_first(turn).await;
            }
            return Next::Call;
        }
        if matches!(error, LlmError::Unreachable { .. })
            && let Some(next) = self.wait_out_outage(turn, &error).await
        {
            return next;
        }
        // The operator needs to hear of it too: a bad key or model name is theirs to fix.
        tracing::warn!(error = %error, model = llm.model(), "agent: the turn failed; the person was told");
        Next::End(TurnOutcome::Failed {
            notice: failure_notice(&error),
            messages: std::mem::take(&mut turn.new_messages),
        })
    }

    /// Whether the model refused the turn's images (and `auto` lets it go on without).
    fn images_refused(&self, turn: &Turn, error: &LlmError) -> bool {
        matches!(
            error,
            LlmError::Refused {
                status: 400 | 415 | 422,
                ..
            }
        ) && !turn.images.is_empty()
            && self.image_input == crate::media::ImageInputMode::Auto
            && !error.is_context_overflow()
    }

    /// The next model of the chain takes the turn over; the person is told once.
    fn fall_back(&self, turn: &mut Turn, llm: &LlmClient, error: &LlmError) {
        let next = &turn.chain[turn.current + 1];
        tracing::warn!(error = %error, from = llm.model(), to = next.model(), "agent: falling back to the next model");
        crate::metrics::llm_error("fallback");
        if let Some(notices) = turn.input.notices.as_ref().filter(|_| !turn.told_fallback) {
            turn.told_fallback = true;
            let _ = notices.send(format!(
                "⚠️ {} failed ({}). I'm answering this message with {} instead.",
                super::models::describe(llm),
                short_reason(error),
                super::models::describe(next),
            ));
        }
        turn.current += 1;
    }

    /// Every model is down (a provider outage, a network cut): the turn waits and asks
    /// again from the first, for up to `agent.provider_outage_wait`; /stop ends it.
    /// `None` once the wait is over.
    async fn wait_out_outage(&self, turn: &mut Turn, error: &LlmError) -> Option<Next> {
        let (since, pauses) = turn.outage.get_or_insert((std::time::Instant::now(), 0));
        let left = self.outage_wait.saturating_sub(since.elapsed());
        if left.is_zero() {
            return None;
        }
        tracing::warn!(error = %error, waited = ?since.elapsed(), "agent: no model is answering; waiting to ask again");
        let pause = super::OUTAGE_PAUSE.delay(*pauses).min(left);
        *pauses += 1;
        if let Some(notices) = turn.input.notices.as_ref().filter(|_| !turn.told_outage) {
            turn.told_outage = true;
            let _ = notices.send(format!(
                "⏳ I can't reach the model provider right now ({error}). I'll keep trying and answer as soon as it's back; /stop gives up."
            ));
        }
        tokio::select! {
            _ = turn.cancel.cancelled() => return Some(turn.cancelled()),
            _ = tokio::time::sleep(pause) => {}
        }
        turn.current = 0;
        Some(Next::Call)
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
            .map(|call| match self.tools.repair_name(&call.name) {
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
    async fn grace(&self, mut turn: Turn) -> TurnOutcome {
        let llm = turn.chain[turn.current].clone();
        let budget = turn.budget(&llm);
        let used = fit_tool_results(&mut turn.new_messages, budget);
        let kept = trim_history(&turn.history, budget.saturating_sub(used));
        let mut wire = vec![json!({"role": "system", "content": turn.system})];
        wire.extend(kept.iter().copied().map(to_wire));
        wire.extend(turn.new_messages.iter().map(to_wire));
        wire.push(json!({"role": "user", "content": GRACE}));
        let grace = llm
            .complete_streaming(
                &wire,
                &ToolDefinitions::default(),
                &turn.cancel,
                turn.input.stream.as_ref(),
            )
            .await;
        if let Ok(answer) = &grace {
            turn.input
                .usage
                .lock()
                .expect("usage lock")
                .add(llm.model(), answer.usage);
        }
        let mut messages = turn.new_messages;
        let reply = match grace {
            Ok(answer) if !answer.content.trim().is_empty() => answer.content,
            Err(LlmError::Cancelled) => return TurnOutcome::Cancelled { messages },
            _ => format!(
                "I stopped after {} tool steps without finishing (the limit is agent.max_turns). Tell me to continue if you want me to go on.",
                turn.max_steps
            ),
        };
        messages.push(StoredMessage::assistant(reply.clone()));
        TurnOutcome::BudgetExhausted { reply, messages }
    }
}

/// What the person is told when the turn fails.
fn failure_notice(error: &LlmError) -> String {
    match error {
        LlmError::Unreachable { .. } => format!(
            "⚠️ I can't reach the model provider right now ({error}). Nothing was lost: send your message again in a moment."
        ),
        _ if error.is_context_overflow() => format!(
            "⚠️ This conversation is longer than the model can take ({error}). /compress summarises the earlier part; /new starts over."
        ),
        // The error says "the model provider refused the request (HTTP …): …" itself.
        _ => format!(
            "⚠️ {}. Check the model settings (model.default, model.api_key) or /new to start over.",
            capitalised(&error.to_string())
        ),
    }
}

/// `text` with its first letter in upper case.
fn capitalised(text: &str) -> String {
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
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
