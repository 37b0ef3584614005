//! The system prompt: a short description of the setting, `SOUL.md` and `AGENTS.md` from
//! `$HERMES_HOME` when present (as in Hermes), `agent.system_prompt`, the skills index, and
//! the session context.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::tools::skills::Skill;

/// The parts of the system prompt that do not change between turns (read once at start;
/// the skills again on `/reload_skills`).
pub struct SystemPrompt {
    base: String,
    /// `agent.system_prompt`, unless a channel has its own.
    instructions: Option<String>,
    home: PathBuf,
    /// The skills found, and their index as the prompt carries it.
    skills: Mutex<(Vec<Skill>, String)>,
}

/// What `/reload_skills` found: the names (with descriptions) added and removed, and how
/// many there are now.
#[derive(Debug, Default, PartialEq)]
pub struct SkillsReloaded {
    pub added: Vec<(String, String)>,
    pub removed: Vec<(String, String)>,
    pub total: usize,
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
        // The skills index, as Hermes shows it (read at start, so the prompt stays the
        // same, and again only when asked).
        let skills = crate::tools::skills::scan(home);
        let index = crate::tools::skills::index_of(&skills);
        SystemPrompt {
            base,
            instructions: extra
                .map(str::trim)
                .filter(|e| !e.is_empty())
                .map(str::to_owned),
            home: home.to_path_buf(),
            skills: Mutex::new((skills, index)),
        }
    }

    /// Scan the skills again (blocking: files): later turns' prompts carry the new index.
    pub fn reload_skills(&self) -> SkillsReloaded {
        let found = crate::tools::skills::scan(&self.home);
        let index = crate::tools::skills::index_of(&found);
        let mut skills = self.skills.lock().expect("skills lock");
        let named = |list: &[Skill], other: &[Skill]| -> Vec<(String, String)> {
            list.iter()
                .filter(|s| !other.iter().any(|o| o.name == s.name))
                .map(|s| (s.name.clone(), s.description.clone()))
                .collect()
        };
        let reloaded = SkillsReloaded {
            added: named(&found, &skills.0),
            removed: named(&skills.0, &found),
            total: found.len(),
        };
        *skills = (found, index);
        reloaded
    }

    /// The prompt for a session: the same text for the same `context` and `personality`,
    /// byte for byte, so the provider's prompt cache keeps hitting. `instructions` (a
    /// channel's own system prompt) stand in place of `agent.system_prompt`.
    pub fn render(
        &self,
        context: &str,
        personality: Option<&str>,
        instructions: Option<&str>,
        memory: &str,
    ) -> String {
        let mut text = self.base.clone();
        if let Some(instructions) = instructions
            .map(str::trim)
            .filter(|i| !i.is_empty())
            .or(self.instructions.as_deref())
        {
            text.push_str("\n\n");
            text.push_str(instructions);
        }
        {
            let skills = self.skills.lock().expect("skills lock");
            if !skills.1.is_empty() {
                text.push_str("\n\n");
                text.push_str(&skills.1);
            }
        }
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
        let text = prompt.render("Platform: telegram.", None, None, "");
        let soul = text.find("You are cheerful.").unwrap();
        let agents = text.find("Use metric units.").unwrap();
        let extra = text.find("Answer briefly.").unwrap();
        assert!(soul < agents && agents < extra);
        assert!(text.ends_with("## Current session\nPlatform: telegram."));
        let bare =
            SystemPrompt::load(&home.path().join("missing"), None).render("x", None, None, "");
        assert!(bare.starts_with("You are Hermes"));
        // A channel's own system prompt stands in place of the configured one.
        let channel = prompt.render("Platform: discord.", None, Some("You serve #dev."), "");
        assert!(channel.contains("You are cheerful.") && channel.contains("You serve #dev."));
        assert!(!channel.contains("Answer briefly."));
    }

    #[test]
    fn skills_are_read_again_when_asked() {
        let home = tempfile::tempdir().unwrap();
        let skill = |name: &str| {
            let dir = home.path().join("skills/tools").join(name);
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(
                dir.join("SKILL.md"),
                format!("---\nname: {name}\ndescription: Does {name}\n---\nbody\n"),
            )
            .unwrap();
            dir
        };
        let old = skill("alpha");
        let prompt = SystemPrompt::load(home.path(), None);
        assert!(
            prompt
                .render("x", None, None, "")
                .contains("- alpha: Does alpha")
        );
        skill("beta");
        std::fs::remove_dir_all(old).unwrap();
        assert!(
            prompt.render("x", None, None, "").contains("alpha"),
            "the same prompt until asked"
        );
        let reloaded = prompt.reload_skills();
        assert_eq!(
            reloaded.added,
            [("beta".to_owned(), "Does beta".to_owned())]
        );
        assert_eq!(
            reloaded.removed,
            [("alpha".to_owned(), "Does alpha".to_owned())]
        );
        assert_eq!(reloaded.total, 1);
        let text = prompt.render("x", None, None, "");
        assert!(text.contains("- beta: Does beta") && !text.contains("alpha"));
    }
}
