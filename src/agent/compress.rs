//! Context compression (Hermes' semantics): when a conversation passes
//! `compression.threshold` of the context of the model in use (the chat's `/model` choice,
//! or the fallback answering now), its middle is summarised by the
//! auxiliary model (`auxiliary.compression.*`, else the main one) and the summary takes its
//! place in the stored history; the first messages and a tail worth
//! `threshold × target_ratio` stay as they are. The originals stay in the database (hidden,
//! still searchable). Also what `/compress` and a context-overflow error run.

use std::sync::Arc;

use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::context::{cost, estimate_tokens};
use crate::config::CompressionConfig;
use crate::llm::{LlmClient, ToolDefinitions};
use crate::store::{LiveMessage, Store, StoredMessage};

pub use crate::store::SUMMARY_OPENING;
const SUMMARY_CLOSING: &str = "[End of the summary: the conversation continues below.]";

/// What the summariser is told.
const INSTRUCTIONS: &str = "You summarise the middle part of a conversation between a person and an AI agent, so the agent can continue without it. Write a compact, factual summary with these sections: Active task (what the person wants now), Progress (what was done, with the commands, files, names and numbers that matter), Pending (what is left or was asked and not answered), Resolved (questions settled, decisions made). Keep anything the agent would need to go on; drop chatter. If the part starts with an earlier summary, fold it in. Answer with the summary only.";

/// Per message, what the summariser reads at most: the head and the tail of long texts.
const READ_HEAD: usize = 4_000;
const READ_TAIL: usize = 1_500;

/// How long automatic compression of a session rests after its summary failed (Hermes:
/// ten minutes), so a failing summariser is not asked before every turn.
const REST_AFTER_FAILURE: std::time::Duration = std::time::Duration::from_secs(600);

/// The compression settings and the model that writes summaries.
pub struct Compressor {
    pub config: CompressionConfig,
    pub client: Arc<LlmClient>,
    /// Sessions whose last automatic compression failed, and when.
    failed: std::sync::Mutex<std::collections::HashMap<String, std::time::Instant>>,
    /// Sessions being compressed now (one compression per session at a time).
    running: std::sync::Mutex<std::collections::HashSet<String>>,
}

/// Takes a session off [`Compressor::running`] however its compression ends.
struct Running<'a> {
    set: &'a std::sync::Mutex<std::collections::HashSet<String>>,
    session: String,
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.set
            .lock()
            .expect("compressions lock")
            .remove(&self.session);
    }
}

/// The outcome of a compression.
#[derive(Debug)]
pub enum Compressed {
    /// `replaced` messages became one summary; tokens before and after (estimates).
    Done {
        replaced: usize,
        before: usize,
        after: usize,
    },
    /// Too short to have a middle to summarise.
    NothingToDo,
}

impl Compressor {
    /// Whether session `session_id` is being compressed now.
    pub fn is_running(&self, session_id: &str) -> bool {
        self.running
            .lock()
            .expect("compressions lock")
            .contains(session_id)
    }

    /// Compress when the conversation passes this many tokens, for a model whose context
    /// holds `context_tokens`.
    pub fn threshold_tokens(&self, context_tokens: usize) -> usize {
        (context_tokens as f64 * self.config.threshold) as usize
    }

    pub fn new(config: CompressionConfig, client: Arc<LlmClient>) -> Self {
        Compressor {
            config,
            client,
            failed: Default::default(),
            running: Default::default(),
        }
    }

    /// Summarise the middle of session `session_id` now, for a model whose context holds
    /// `context_tokens` (the tail kept is measured against it). `automatic` (before a turn,
    /// not `/compress`): only a middle of four messages or more, and not within ten minutes
    /// of a failed summary.
    pub async fn compress(
        &self,
        store: &Store,
        session_id: &str,
        cancel: &CancellationToken,
        automatic: bool,
        context_tokens: usize,
    ) -> Result<Compressed, String> {
        if automatic
            && let Some(at) = self.failed.lock().expect("failures lock").get(session_id)
            && at.elapsed() < REST_AFTER_FAILURE
        {
            return Ok(Compressed::NothingToDo);
        }
        if !self
            .running
            .lock()
            .expect("compressions lock")
            .insert(session_id.to_owned())
        {
            return match automatic {
                true => Ok(Compressed::NothingToDo),
                false => Err("this conversation is being compressed already".into()),
            };
        }
        let _running = Running {
            set: &self.running,
            session: session_id.to_owned(),
        };
        let result = self
            .summarise(store, session_id, cancel, automatic, context_tokens)
            .await;
        let mut failed = self.failed.lock().expect("failures lock");
        match &result {
            Err(_) if automatic && !cancel.is_cancelled() => {
                failed.insert(session_id.to_owned(), std::time::Instant::now());
            }
            Ok(_) => {
                failed.remove(session_id);
            }
            Err(_) => {}
        }
        result
    }

    async fn summarise(
        &self,
        store: &Store,
        session_id: &str,
        cancel: &CancellationToken,
        automatic: bool,
        context_tokens: usize,
    ) -> Result<Compressed, String> {
        let live = store
            .session_live(session_id)
            .await
            .map_err(|e| format!("cannot read the conversation: {e}"))?;
        let min_middle = if automatic { 4 } else { 2 };
        let Some((head_end, tail_start)) = self.middle(&live, min_middle, context_tokens) else {
            return Ok(Compressed::NothingToDo);
        };
        // What the summariser can read at once: the oldest part of a middle too long for
        // it (ending where the person spoke, never inside a tool exchange); a later
        // compression takes the rest.
        let readable = self.client.config().context_length / 2;
        let sizes: Vec<usize> = (head_end..tail_start)
            .map(|i| estimate_tokens(&transcript(&live[i..=i])))
            .collect();
        let mut end = tail_start;
        let mut size: usize = sizes.iter().sum();
        while end > head_end + 1 && (size > readable || live[end].message.role != "user") {
            end -= 1;
            size -= sizes[end - head_end];
        }
        if end < head_end + min_middle {
            return Ok(Compressed::NothingToDo);
        }
        let middle = &live[head_end..end];
        let transcript = transcript(middle);
        let request = [
            json!({"role": "system", "content": INSTRUCTIONS}),
            json!({"role": "user", "content": transcript}),
        ];
        let summary = self
            .client
            .complete(&request, &ToolDefinitions::default(), cancel)
            .await
            .map_err(|e| format!("the summary could not be written: {e}"))?;
        if let Err(e) = store
            .usage_add(
                session_id.to_owned(),
                self.client.model().to_owned(),
                summary.usage,
            )
            .await
        {
            tracing::warn!(error = %e, "agent: could not record the summary's token usage");
        }
        let text = summary.content.trim();
        if text.is_empty() {
            return Err("the summariser answered nothing".into());
        }
        let message = StoredMessage::user(format!(
            "{SUMMARY_OPENING} ({} messages), written when it grew long; the messages themselves are still in the history search.]\n\n{text}\n\n{SUMMARY_CLOSING}",
            middle.len()
        ));
        let before: usize = live.iter().map(|m| cost(&m.message)).sum();
        let after =
            before - middle.iter().map(|m| cost(&m.message)).sum::<usize>() + cost(&message);
        let replaced = store
            .session_summarise(
                session_id,
                middle[0].id,
                middle[middle.len() - 1].id,
                message,
            )
            .await
            .map_err(|e| format!("the summary could not be stored: {e}"))?;
        tracing::info!(
            session = session_id,
            replaced,
            before,
            after,
            "agent: the conversation was compressed"
        );
        Ok(Compressed::Done {
            replaced,
            before,
            after,
        })
    }

    /// Where the middle starts and ends (`live[head_end..tail_start]`): after the first
    /// `protect_first_n` messages (and the tool results of a call among them), before a
    /// tail worth `threshold × target_ratio` tokens (at least three messages, at most
    /// `protect_last_n`) that starts with a message of the person. `None` when there is
    /// no middle of two messages or more.
    fn middle(
        &self,
        live: &[LiveMessage],
        min_middle: usize,
        context_tokens: usize,
    ) -> Option<(usize, usize)> {
        let mut head_end = self.config.protect_first_n.min(live.len());
        while head_end < live.len() && live[head_end].message.role == "tool" {
            head_end += 1;
        }
        let budget =
            (self.threshold_tokens(context_tokens) as f64 * self.config.target_ratio) as usize;
        let min_tail = 3.min(self.config.protect_last_n);
        let mut tail_start = live.len();
        let mut used = 0;
        while tail_start > head_end {
            let next = cost(&live[tail_start - 1].message);
            let kept = live.len() - tail_start;
            if kept >= self.config.protect_last_n || (kept >= min_tail && used + next > budget) {
                break;
            }
            used += next;
            tail_start -= 1;
        }
        // The tail starts with the person's message: never inside a tool exchange.
        while tail_start > head_end && live[tail_start].message.role != "user" {
            tail_start -= 1;
        }
        (tail_start >= head_end + min_middle.max(2)).then_some((head_end, tail_start))
    }
}

/// A session's compression, for one turn (or `/compress`): the compressor, the store, and
/// how much history a turn loads.
pub struct Compaction {
    pub compressor: Arc<Compressor>,
    pub store: Store,
    pub session_id: String,
    /// What a turn loads of the history (bytes).
    pub history_bytes: usize,
}

/// A compression's result with the history a turn continues with.
pub type Compacted = Option<Vec<StoredMessage>>;

impl Compaction {
    /// The threshold for the model answering now (see [`Compressor::threshold_tokens`]).
    pub fn threshold_tokens(&self, context_tokens: usize) -> usize {
        self.compressor.threshold_tokens(context_tokens)
    }

    /// Compress now, for the model answering now; the shorter history to go on with, or
    /// `None` when there was nothing to compress. `automatic`: see
    /// [`Compressor::compress`].
    pub async fn run(
        &self,
        cancel: &CancellationToken,
        automatic: bool,
        context_tokens: usize,
    ) -> Result<Compacted, String> {
        match self
            .compressor
            .compress(
                &self.store,
                &self.session_id,
                cancel,
                automatic,
                context_tokens,
            )
            .await?
        {
            Compressed::NothingToDo => Ok(None),
            Compressed::Done { .. } => self
                .store
                .session_tail(&self.session_id, self.history_bytes)
                .await
                .map(Some)
                .map_err(|e| format!("cannot read the conversation: {e}")),
        }
    }
}

/// The middle as text for the summariser: each message with its role, long ones cut to
/// their head and tail.
fn transcript(middle: &[LiveMessage]) -> String {
    let mut out = String::new();
    for m in middle {
        let m = &m.message;
        let who = match (m.role.as_str(), &m.tool_name) {
            ("tool", Some(tool)) => format!("tool result ({tool})"),
            (role, _) => role.to_owned(),
        };
        out.push_str(&format!(
            "[{who}]\n{}\n",
            shortened(m.content.as_deref().unwrap_or(""))
        ));
        if let Some(calls) = &m.tool_calls {
            out.push_str(&format!("[tool calls] {}\n", shortened(calls)));
        }
        out.push('\n');
    }
    out
}

fn shortened(text: &str) -> String {
    if text.len() <= READ_HEAD + READ_TAIL {
        return text.to_owned();
    }
    let head = text.floor_char_boundary(READ_HEAD);
    let tail = text.ceil_char_boundary(text.len() - READ_TAIL);
    format!("{} […] {}", &text[..head], &text[tail..])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn compressor() -> Compressor {
        let model = crate::llm::tests::model("http://127.0.0.1:9/v1");
        Compressor::new(
            CompressionConfig {
                enabled: true,
                threshold: 0.5,
                target_ratio: 0.2,
                protect_first_n: 3,
                protect_last_n: 20,
                model: model.clone(),
            },
            Arc::new(LlmClient::new(model)),
        )
    }

    fn live(roles: &[&str]) -> Vec<LiveMessage> {
        roles
            .iter()
            .enumerate()
            .map(|(i, role)| LiveMessage {
                id: i as i64 + 1,
                message: StoredMessage {
                    role: (*role).into(),
                    content: Some("x".repeat(400)),
                    tool_calls: None,
                    tool_call_id: None,
                    tool_name: None,
                },
            })
            .collect()
    }

    #[test]
    fn the_middle_never_splits_a_tool_exchange() {
        // Budget: 2000 × 0.5 × 0.2 = 200 tokens, about two messages of 104.
        let c = compressor();
        let msgs = live(&[
            "user",
            "assistant",
            "tool",
            "tool",
            "user",
            "assistant",
            "user",
            "assistant",
            "tool",
            "assistant",
            "user",
            "assistant",
        ]);
        let (head_end, tail_start) = c.middle(&msgs, 2, 2_000).unwrap();
        assert_eq!(head_end, 4, "the head takes the results of its call");
        assert_eq!(msgs[tail_start].message.role, "user");
        assert!(msgs.len() - tail_start >= 3);
        assert!(
            c.middle(&msgs[..5], 2, 2_000).is_none(),
            "nothing in the middle"
        );
    }
}
