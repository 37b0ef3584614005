//! Words for the agent that do not wait their turn the usual way, with Hermes' commands and
//! texts: `/queue <prompt>` (a turn of its own after the running one, whatever the busy
//! mode), `/steer <prompt>` (into the running turn, after its next tool call) and
//! `/background <prompt>` (`/bg`, `/btw`: a fresh session of its own beside this one, its
//! answer headed with the prompt in this chat). The command's inbox row stays open until
//! the turn that answers it ends, so a restart answers it as any message.

use super::*;

/// What a background session's key adds to the conversation's key (then the inbox id of
/// the command that started it, so the same command always finds the same session).
const BACKGROUND: &str = ":bg:";

/// A prompt's first 60 characters, as Hermes shows it in its notices.
fn preview(prompt: &str) -> String {
    match prompt.char_indices().nth(60) {
        Some((end, _)) => format!("{}...", &prompt[..end]),
        None => prompt.to_owned(),
    }
}

impl SessionActor {
    /// A command's prompt as the person's message (its inbox row answered with the turn).
    fn prompt_input(inbox_id: i64, message_id: &str, author: &Author, prompt: &str) -> UserInput {
        UserInput {
            inbox_id: Some(inbox_id),
            message_id: Some(message_id.to_owned()),
            author: author.clone(),
            text: prompt.to_owned(),
            attachments: Vec::new(),
        }
    }

    /// Say `text` in reply to the command without ending its inbox row (the turn does).
    async fn acknowledge(&self, message_id: &str, text: &str) {
        self.finish(
            Vec::new(),
            InboxState::Done,
            "acknowledged",
            Some((text.to_owned(), Some(message_id.to_owned()))),
        )
        .await;
    }

    /// `/queue <prompt>`: after the running turn (and what already waits), as a turn of its
    /// own; at once when nothing runs.
    pub(super) async fn queue(
        &mut self,
        inbox_id: i64,
        message_id: String,
        author: &Author,
        prompt: &str,
        running: &mut Option<RunningTurn>,
    ) {
        if prompt.is_empty() {
            return self
                .say(inbox_id, &message_id, "Usage: /queue <prompt>")
                .await;
        }
        let input = Self::prompt_input(inbox_id, &message_id, author, prompt);
        if running.is_none() {
            return Box::pin(self.handle(SessionInput::Message(input), running)).await;
        }
        self.queued.push_back(vec![input]);
        let depth = self.queued.len();
        let text = if depth <= 1 {
            "Queued for the next turn.".to_owned()
        } else {
            format!("Queued for the next turn. ({depth} queued)")
        };
        self.acknowledge(&message_id, &text).await;
    }

    /// `/steer <prompt>`: into the running turn, read after its next tool call (without
    /// interrupting it); a normal message when nothing runs.
    pub(super) async fn steer(
        &mut self,
        inbox_id: i64,
        message_id: String,
        author: &Author,
        prompt: &str,
        running: &mut Option<RunningTurn>,
    ) {
        let Some(turn) = running.as_mut() else {
            if prompt.is_empty() {
                let text =
                    "Usage: /steer <prompt>  (no agent is running; sending as a normal message)";
                return self.say(inbox_id, &message_id, text).await;
            }
            let input = Self::prompt_input(inbox_id, &message_id, author, prompt);
            return Box::pin(self.handle(SessionInput::Message(input), running)).await;
        };
        if prompt.is_empty() {
            return self
                .say(inbox_id, &message_id, "Usage: /steer <prompt>")
                .await;
        }
        let input = Self::prompt_input(inbox_id, &message_id, author, prompt);
        // A tool waiting on a process stops waiting, as for any word mid-turn.
        turn.attention.cancel();
        if turn.steer.send(prompt.to_owned()).is_err() {
            // The turn is ending: the words become the next turn.
            self.queued.push_back(vec![input]);
            let text = "Agent still starting — /steer queued for the next turn.";
            return self.acknowledge(&message_id, text).await;
        }
        turn.steered.push(input);
        let text = format!(
            "⏩ Steer queued — arrives after the next tool call: '{}'",
            preview(prompt)
        );
        self.acknowledge(&message_id, &text).await;
    }

    /// `/background <prompt>`: a fresh session beside this conversation (no history, the
    /// same tools and model) runs it; its answer comes here, headed with the prompt.
    pub(super) async fn background(
        &mut self,
        inbox_id: i64,
        message_id: String,
        author: &Author,
        prompt: &str,
    ) {
        if prompt.is_empty() {
            let text = "Usage: /background <prompt>\nExample: /background Summarize the top HN stories today\n\nRuns the prompt in a separate session. You can keep chatting — the result will appear here when done.";
            return self.say(inbox_id, &message_id, text).await;
        }
        if self.key.contains(BACKGROUND) {
            let text = "A background task cannot start another one; ask for it in the chat.";
            return self.say(inbox_id, &message_id, text).await;
        }
        let key = format!("{}{BACKGROUND}{inbox_id}", self.key);
        let text = format!(
            "🔄 Background task started: \"{}\"\nTask ID: bg_{inbox_id}\nYou can keep chatting — results will appear when done.",
            preview(prompt)
        );
        self.acknowledge(&message_id, &text).await;
        let input = Self::prompt_input(inbox_id, &message_id, author, prompt);
        route(
            &self.directory,
            &self.services,
            &key,
            &self.chat,
            SessionInput::Message(input),
        )
        .await;
    }

    /// A background session's answer, headed as Hermes heads it; other answers as they are.
    pub(super) fn headed(&self, answer: &str, inputs: &[UserInput]) -> String {
        if !self.key.contains(BACKGROUND) {
            return answer.to_owned();
        }
        let prompt = inputs.first().map(|i| i.text.as_str()).unwrap_or_default();
        let body = match answer.trim() {
            "" => "(No response generated)",
            text => text,
        };
        format!(
            "✅ Background task complete\nPrompt: \"{}\"\n\n{body}",
            preview(prompt)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::preview;

    #[test]
    fn a_preview_is_the_first_sixty_characters() {
        assert_eq!(preview("short"), "short");
        let long = "é".repeat(70);
        assert_eq!(preview(&long), format!("{}...", "é".repeat(60)));
    }
}
