//! `/context`: what this conversation takes of the model's context window now, estimated
//! as a turn estimates it (about four bytes a token): the system prompt (with its memory),
//! the tool definitions offered here, and the stored history a turn would load; against
//! the window of the model the chat uses, with where compression starts.

use super::commands::grouped;
use super::*;
use crate::agent::{estimated_message_tokens, estimated_tokens};

impl SessionActor {
    pub(super) async fn context_view(&mut self, author: &Author) -> String {
        let session = match self.session_id_for(author).await {
            Ok(id) => id,
            Err(text) => return text,
        };
        let choices = self.chat_choices().await;
        let agent = self.services.agent.clone();
        let model = choices
            .model
            .unwrap_or_else(|| agent.models.primary.clone());
        let (context, memory, _) = self
            .prompt_parts(&session, author, &[], String::new())
            .await;
        let system = agent.prompt.render(
            &context,
            choices.personality.as_deref(),
            choices.instructions.as_deref(),
            &memory,
        );
        let tools_ctx = ToolContext::person_turn(
            self.key.clone(),
            session.clone(),
            self.chat.clone(),
            author.clone(),
            CancellationToken::new(),
        );
        let tools = agent.tools.definitions(&tools_ctx);
        let tool_tokens: usize = tools
            .values()
            .iter()
            .map(|t| estimated_tokens(&t.to_string()))
            .sum();
        let history = self.history(&session).await;
        let history_tokens: usize = history.iter().map(estimated_message_tokens).sum();
        let (system_tokens, memory_tokens) = (estimated_tokens(&system), estimated_tokens(&memory));
        let total = system_tokens + tool_tokens + history_tokens;
        let window = model.config().context_length.max(1);
        let mut lines = vec![
            "🧩 **Context** _(estimated)_".to_owned(),
            format!(
                "Model: {}, {} tokens",
                crate::agent::models::describe(&model),
                grouped(window as u64)
            ),
            format!(
                "• System prompt: ~{} (memory ~{})",
                grouped(system_tokens as u64),
                grouped(memory_tokens as u64)
            ),
            format!(
                "• Tool definitions ({} tools): ~{}",
                tools.values().len(),
                grouped(tool_tokens as u64)
            ),
            format!(
                "• Conversation ({} messages): ~{}",
                history.len(),
                grouped(history_tokens as u64)
            ),
            format!(
                "Total: ~{} of {} ({}%)",
                grouped(total as u64),
                grouped(window as u64),
                total * 100 / window
            ),
        ];
        lines.push(match &agent.compressor {
            Some(compressor) => {
                let at = compressor.threshold_tokens(window);
                format!(
                    "Compression starts at ~{} tokens ({}%); /compress does it now.",
                    grouped(at as u64),
                    at * 100 / window
                )
            }
            None => "Compression is off (compression.enabled: false).".to_owned(),
        });
        lines.join("\n")
    }
}
