//! The system prompt: a short description of the setting, `SOUL.md` and `AGENTS.md` from
//! `$HERMES_HOME` when present (as in Hermes), `agent.system_prompt`, and the session context.

use std::path::Path;

/// The parts of the system prompt that do not change between turns (read once at start).
pub struct SystemPrompt {
    base: String,
}

impl SystemPrompt {
    pub fn load(home: &Path, extra: Option<&str>) -> Self {
        let mut base = String::from(
            "You are Hermes, an AI agent people talk to through a chat app. Answer in the language \
             of the person. Keep answers readable on a phone; use Markdown sparingly. You can run \
             shell commands on the host with the `terminal` tool.",
        );
        for name in ["SOUL.md", "AGENTS.md"] {
            if let Ok(text) = std::fs::read_to_string(home.join(name))
                && !text.trim().is_empty()
            {
                base.push_str("\n\n");
                base.push_str(text.trim());
            }
        }
        if let Some(extra) = extra.filter(|e| !e.trim().is_empty()) {
            base.push_str("\n\n");
            base.push_str(extra.trim());
        }
        // The skills index, as Hermes shows it (read at start: the prompt stays the same).
        let skills = crate::tools::skills::index(home);
        if !skills.is_empty() {
            base.push_str("\n\n");
            base.push_str(&skills);
        }
        SystemPrompt { base }
    }

    /// The prompt for a session: the same text for the same `context` and `personality`,
    /// byte for byte, so the provider's prompt cache keeps hitting.
    pub fn render(&self, context: &str, personality: Option<&str>, memory: &str) -> String {
        let mut text = self.base.clone();
        if let Some(p) = personality {
            text.push_str(&format!("\n\n## Personality\n{}", p.trim()));
        }
        if !memory.trim().is_empty() {
            text.push_str("\n\n");
            text.push_str(memory.trim());
        }
        text.push_str(&format!("\n\n## Current session\n{context}"));
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn soul_agents_and_config_text_join_the_prompt() {
        let home = tempfile::tempdir().unwrap();
        std::fs::write(home.path().join("SOUL.md"), "You are cheerful.\n").unwrap();
        std::fs::write(home.path().join("AGENTS.md"), "Use metric units.").unwrap();
        let prompt = SystemPrompt::load(home.path(), Some("Answer briefly."));
        let text = prompt.render("Platform: telegram.", None, "");
        let soul = text.find("You are cheerful.").unwrap();
        let agents = text.find("Use metric units.").unwrap();
        let extra = text.find("Answer briefly.").unwrap();
        assert!(soul < agents && agents < extra);
        assert!(text.ends_with("## Current session\nPlatform: telegram."));
        let bare = SystemPrompt::load(&home.path().join("missing"), None).render("x", None, "");
        assert!(bare.starts_with("You are Hermes"));
    }
}
