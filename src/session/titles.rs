//! Sessions titled automatically, as Hermes titles them: after an answered turn of a session
//! without a title whose person wrote once or twice, a model (`auxiliary.title_generation`,
//! else the chat's own) is asked for 3–7 words from the start of the exchange, beside the
//! conversation (the answer never waits for it). The title is cleaned, cut to 80
//! characters, and set only if the session still has none: a person's `/title` wins.
//! Off with `auxiliary.title_generation.enabled: false`.

use super::*;
use crate::llm::{LlmClient, ToolDefinitions};

/// Hermes' instructions (`agent/title_generator.py`).
const PROMPT: &str = "Generate a short, descriptive title (3-7 words) for a conversation that starts with the following exchange. The title should capture the main topic or intent. Write the title in the same language the user is writing in. Return ONLY the title text, nothing else. No quotes, no punctuation at the end, no prefixes.";
/// What of each side the model reads.
const SNIPPET: usize = 500;
/// The longest title kept.
const MAX_TITLE: usize = 80;

/// How titles are written here (`None` in [`SessionServices`] when they are off).
pub struct Titles {
    /// The configured title model; `None`: the chat's own.
    pub model: Option<Arc<LlmClient>>,
    /// `auxiliary.title_generation.language`.
    pub language: Option<String>,
}

impl SessionActor {
    /// After an answered turn: title the session beside the conversation, if it wants one.
    pub(super) fn title_later(&self, asked: &str, answer: &str) {
        let (Some(titles), Some(session)) = (&self.services.titles, self.session_id.clone()) else {
            return;
        };
        // Known to have a title: no task, no store query.
        if self
            .titled
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_deref()
            == Some(&session)
        {
            return;
        }
        let titled = self.titled.clone();
        let services = self.services.clone();
        let (key, chat) = (self.key.clone(), self.chat.clone());
        let configured = titles.model.clone();
        let instructions = match &titles.language {
            Some(language) => PROMPT.replace(
                "Write the title in the same language the user is writing in.",
                &format!("Write the title in {language}."),
            ),
            None => PROMPT.to_owned(),
        };
        let exchange = format!("User: {}\n\nAssistant: {}", snippet(asked), snippet(answer));
        let store = self.services.store.clone();
        let cancel = self.services.work.child_token();
        tokio::spawn(async move {
            match store.session_wants_title(&session).await {
                Ok(true) => {}
                Ok(false) => {
                    *titled.lock().unwrap_or_else(|e| e.into_inner()) = Some(session);
                    return;
                }
                Err(e) => {
                    tracing::debug!(error = %e, "session: cannot tell whether the session wants a title");
                    return;
                }
            }
            // The configured title model, else the chat's own.
            let model = match configured {
                Some(model) => model,
                None => super::chat_commands::chat_model_of(&services, &key, &chat).await,
            };
            let request = [
                serde_json::json!({"role": "system", "content": instructions}),
                serde_json::json!({"role": "user", "content": exchange}),
            ];
            let written = match model
                .complete(&request, &ToolDefinitions::default(), &cancel)
                .await
            {
                Ok(written) => written,
                Err(e) => {
                    // As in Hermes, a failed title is not the person's problem.
                    tracing::debug!(error = %e, "session: no title written");
                    return;
                }
            };
            if let Err(e) = store
                .usage_add(session.clone(), model.model().to_owned(), written.usage)
                .await
            {
                tracing::warn!(error = %e, "session: could not record the title's token usage");
            }
            let Some(title) = cleaned(&written.content) else {
                return;
            };
            match store.session_title_if_none(&session, &title).await {
                Ok(true) => tracing::info!(session = %session, title = %title, "session: titled"),
                Ok(false) => {}
                Err(e) => tracing::warn!(error = %e, "session: could not store the title"),
            }
        });
    }
}

/// The first [`SNIPPET`] characters of a text.
fn snippet(text: &str) -> &str {
    match text.char_indices().nth(SNIPPET) {
        Some((end, _)) => &text[..end],
        None => text,
    }
}

/// A model's title as it is kept: no thinking, quotes, `Title:` prefix, control or
/// invisible characters; one line; at most [`MAX_TITLE`] characters.
fn cleaned(written: &str) -> Option<String> {
    let mut text = written.to_owned();
    while let (Some(start), Some(end)) = (text.find("<think>"), text.find("</think>")) {
        if end < start {
            break;
        }
        text.replace_range(start..end + "</think>".len(), "");
    }
    let text = text.trim().trim_matches(['"', '\'']).trim();
    let text = match text.get(..6) {
        Some(prefix) if prefix.eq_ignore_ascii_case("title:") => text[6..].trim(),
        _ => text,
    };
    let visible: String = text
        .chars()
        .filter(|c| {
            !c.is_control()
                && !matches!(c, '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{feff}')
        })
        .collect();
    let one_line = visible.split_whitespace().collect::<Vec<_>>().join(" ");
    if one_line.is_empty() {
        return None;
    }
    Some(match one_line.char_indices().nth(MAX_TITLE) {
        Some(_) => {
            let cut: String = one_line.chars().take(MAX_TITLE - 3).collect();
            format!("{cut}...")
        }
        None => one_line,
    })
}

#[cfg(test)]
mod tests {
    use super::cleaned;

    #[test]
    fn a_title_is_cleaned_as_hermes_cleans_it() {
        assert_eq!(
            cleaned("\"Trip to Lisbon\"").as_deref(),
            Some("Trip to Lisbon")
        );
        assert_eq!(
            cleaned("<think>hmm</think>\nTitle: Budget\u{202e} review\n").as_deref(),
            Some("Budget review")
        );
        assert_eq!(cleaned("  \n "), None);
        let long = cleaned(&"word ".repeat(40)).unwrap();
        assert_eq!(long.chars().count(), 80);
        assert!(long.ends_with("..."));
    }
}
