//! `clarify {question, choices}` (Hermes' tool): the agent asks the person a question, with
//! up to four choices as buttons where the platform has them (numbered in the text
//! everywhere), and waits. A press or the person's next message answers it (the session's
//! actor hands the message here instead of applying the busy mode); after
//! `agent.clarify_timeout` the model is told no answer came; `/stop` ends the wait. One
//! question per conversation at a time.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::future::BoxFuture;
use hermes_adapter::{ChatRef, Choice, ChoiceLimits, ChoiceStyle};
use schemars::JsonSchema;
use serde::Deserialize;
use tokio::sync::oneshot;

use crate::delivery::Delivery;
use crate::tool::{ToolContext, ToolResult, TypedTool};

const MAX_CHOICES: usize = 4;

/// The questions waiting for an answer, by session key.
pub struct Clarify {
    delivery: Delivery,
    timeout: Duration,
    pending: Mutex<HashMap<String, Pending>>,
}

struct Pending {
    id: u64,
    chat: ChatRef,
    choices: Vec<String>,
    answer: oneshot::Sender<String>,
}

impl Clarify {
    pub fn new(delivery: Delivery, timeout: Duration) -> Arc<Self> {
        Arc::new(Clarify {
            delivery,
            timeout,
            pending: Mutex::new(HashMap::new()),
        })
    }

    /// `text`, written in conversation `session_key`, answers its question if one waits.
    pub fn answer_text(&self, session_key: &str, text: &str) -> bool {
        let waiting = self
            .pending
            .lock()
            .expect("clarify lock")
            .remove(session_key);
        match waiting {
            Some(p) => {
                let _ = p.answer.send(text.to_owned());
                true
            }
            None => false,
        }
    }

    /// A press of choice `choice_id` in `chat`: the notice for the presser, or `None` when
    /// it is not a question's choice.
    pub fn press(&self, chat: &ChatRef, choice_id: &str) -> Option<String> {
        let (id, n) = parse_choice_id(choice_id)?;
        let mut pending = self.pending.lock().expect("clarify lock");
        let key = pending
            .iter()
            .find(|(_, p)| p.id == id && &p.chat == chat)
            .map(|(k, _)| k.clone());
        let Some(p) = key.and_then(|k| pending.remove(&k)) else {
            return Some("This question is no longer waiting for an answer.".into());
        };
        let Some(choice) = p.choices.get(n).cloned() else {
            return Some("This choice is not one of the question's.".into());
        };
        let _ = p.answer.send(choice.clone());
        Some(format!("Answered: {choice}"))
    }

    fn withdraw(&self, session_key: &str, id: u64) {
        let mut pending = self.pending.lock().expect("clarify lock");
        if pending.get(session_key).is_some_and(|p| p.id == id) {
            pending.remove(session_key);
        }
    }
}

fn choice_id(id: u64, n: usize) -> String {
    format!("clar:{id}:{n}")
}

fn parse_choice_id(data: &str) -> Option<(u64, usize)> {
    let mut parts = data.strip_prefix("clar:")?.split(':');
    Some((parts.next()?.parse().ok()?, parts.next()?.parse().ok()?))
}

pub struct ClarifyTool(pub Arc<Clarify>);

/// `clarify`'s arguments.
#[derive(Deserialize, JsonSchema)]
pub struct ClarifyArgs {
    question: String,
    #[schemars(length(max = MAX_CHOICES))]
    choices: Option<Vec<String>>,
}

impl TypedTool for ClarifyTool {
    type Args = ClarifyArgs;
    const NAME: &'static str = "clarify";
    const TOOLSET: &'static str = "clarify";

    fn description(&self) -> String {
        "Ask the person a question and wait for the answer, when you cannot go on without it. Up to 4 short choices (they can also answer in their own words).".into()
    }

    fn call<'a>(&'a self, args: ClarifyArgs, ctx: &'a ToolContext) -> BoxFuture<'a, ToolResult> {
        Box::pin(async move { self.ask(args, ctx).await })
    }
}

impl ClarifyTool {
    async fn ask(&self, args: ClarifyArgs, ctx: &ToolContext) -> ToolResult {
        let clarify = &self.0;
        let question = args.question.trim();
        if question.is_empty() {
            return ToolResult::text("error: `question` is required");
        }
        let choices: Vec<String> = args
            .choices
            .into_iter()
            .flatten()
            .map(|c| c.trim().chars().take(100).collect::<String>())
            .filter(|c| !c.is_empty())
            .take(MAX_CHOICES)
            .collect();
        let id = rand::random::<u64>() >> 12;
        let (answer, answered) = oneshot::channel();
        {
            let mut pending = clarify.pending.lock().expect("clarify lock");
            if pending.contains_key(&ctx.session_key) {
                return ToolResult::text("error: a question is already waiting for an answer here");
            }
            pending.insert(
                ctx.session_key.clone(),
                Pending {
                    id,
                    chat: ctx.chat.clone(),
                    choices: choices.clone(),
                    answer,
                },
            );
        }
        let mut text = format!("❓ {question}");
        for (n, choice) in choices.iter().enumerate() {
            text.push_str(&format!("\n{}. {choice}", n + 1));
        }
        if !choices.is_empty() {
            text.push_str("\n\nChoose one, or answer in your own words.");
        }
        let limits = clarify
            .delivery
            .sender(ctx.chat.platform)
            .map_or(ChoiceLimits::NONE, |s| s.capabilities().choices);
        let buttons: Vec<Choice> = choices
            .iter()
            .enumerate()
            .map(|(n, label)| Choice {
                id: choice_id(id, n),
                label: label.clone(),
                short_label: Some(format!("{}", n + 1)),
                style: ChoiceStyle::Normal,
            })
            .filter(|c| c.label_within(limits.label_len).is_some())
            .take(limits.max)
            .collect();
        let mut rows = clarify.delivery.reply_rows(&ctx.chat, &text, None);
        if buttons.len() == choices.len()
            && let Some(last) = rows.last_mut()
        {
            last.choices = buttons;
        }
        if let Err(e) = clarify.delivery.queue(rows).await {
            clarify.withdraw(&ctx.session_key, id);
            return ToolResult::text(format!("error: the question could not be sent: {e}"));
        }
        let timeout = clarify.timeout;
        let result = tokio::select! {
            answer = answered => match answer {
                Ok(text) => ToolResult::text(format!("The person answered: {text}")),
                Err(_) => ToolResult::text("No answer came."),
            },
            _ = tokio::time::sleep(timeout) => ToolResult::text(format!(
                "No answer came within {}. Go on without it if you can, or say what you need.",
                match timeout.as_secs() {
                    s if s < 120 => format!("{s} seconds"),
                    s => format!("{} minutes", s / 60),
                }
            )),
            _ = ctx.cancel.cancelled() => ToolResult {
                text: "The question was withdrawn: the task was stopped.".into(),
                cancelled: true,
            },
        };
        clarify.withdraw(&ctx.session_key, id);
        result
    }
}
