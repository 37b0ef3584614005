//! Skills from `$HERMES_HOME/skills/` as Hermes keeps them (agentskills.io: a directory
//! per skill with a `SKILL.md` whose YAML front matter names and describes it, grouped in
//! category directories): `skills_list {category}`, `skill_view {name, file_path}` (the
//! skill's text, or one of its files, never outside its directory), and the index Hermes
//! puts in the system prompt so the model knows to load them.

use std::path::{Path, PathBuf};

use futures_util::future::BoxFuture;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use crate::tool::{ToolContext, ToolResult, TypedTool};

/// The most of a skill's file that is shown.
const MAX_CHARS: usize = 100_000;
/// How deep skills are looked for (`skills/<category>/<name>/SKILL.md`).
const MAX_DEPTH: usize = 3;

/// One skill found on disk.
#[derive(Debug, Clone, PartialEq)]
pub struct Skill {
    pub name: String,
    pub category: String,
    pub description: String,
    /// Its directory.
    pub dir: PathBuf,
}

/// Every skill under `home/skills`, by category then name.
pub fn scan(home: &Path) -> Vec<Skill> {
    let root = home.join("skills");
    let mut found = Vec::new();
    walk(&root, &root, 0, &mut found);
    found.sort_by(|a: &Skill, b: &Skill| (&a.category, &a.name).cmp(&(&b.category, &b.name)));
    found.dedup_by(|a, b| a.name == b.name);
    found
}

fn walk(root: &Path, dir: &Path, depth: usize, found: &mut Vec<Skill>) {
    if depth > MAX_DEPTH {
        return;
    }
    let manifest = dir.join("SKILL.md");
    if depth > 0 && manifest.is_file() {
        if let Some(skill) = read_skill(root, dir, &manifest) {
            found.push(skill);
        }
        return;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut dirs: Vec<PathBuf> = entries
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.path())
        .filter(|p| {
            !p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with('.'))
        })
        .collect();
    dirs.sort();
    for sub in dirs {
        walk(root, &sub, depth + 1, found);
    }
}

fn read_skill(root: &Path, dir: &Path, manifest: &Path) -> Option<Skill> {
    let text = std::fs::read_to_string(manifest).ok()?;
    let (front, _) = front_matter(&text);
    let field = |key: &str| {
        front
            .get(key)
            .and_then(Value::as_str)
            .map(|s| s.trim().to_owned())
            .filter(|s| !s.is_empty())
    };
    let dir_name = dir.file_name()?.to_string_lossy().into_owned();
    let relative = dir.strip_prefix(root).ok()?;
    let category = match relative.components().count() {
        0 | 1 => "general".to_owned(),
        _ => relative
            .components()
            .next()?
            .as_os_str()
            .to_string_lossy()
            .into_owned(),
    };
    Some(Skill {
        name: field("name").unwrap_or(dir_name),
        category,
        description: field("description").unwrap_or_default(),
        dir: dir.to_path_buf(),
    })
}

/// The YAML front matter of a markdown text (between `---` lines at its start) and the
/// rest; an empty mapping when there is none or it cannot be read.
fn front_matter(text: &str) -> (serde_json::Map<String, Value>, &str) {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let Some(rest) = text.strip_prefix("---") else {
        return (Default::default(), text);
    };
    let Some(end) = rest.find("\n---") else {
        return (Default::default(), text);
    };
    let yaml = &rest[..end];
    let body = rest[end + 4..].trim_start_matches(['-', '\r', '\n']);
    let map = serde_saphyr::from_str::<Value>(yaml)
        .ok()
        .and_then(|v| v.as_object().cloned())
        .unwrap_or_default();
    (map, body)
}

/// Hermes' skills index for the system prompt (empty without skills).
pub fn index(home: &Path) -> String {
    index_of(&scan(home))
}

/// The index of `skills` (found by [`scan`]).
pub fn index_of(skills: &[Skill]) -> String {
    if skills.is_empty() {
        return String::new();
    }
    let mut lines = Vec::new();
    let mut category = None;
    for skill in skills {
        if category != Some(&skill.category) {
            lines.push(format!("  {}:", skill.category));
            category = Some(&skill.category);
        }
        lines.push(if skill.description.is_empty() {
            format!("    - {}", skill.name)
        } else {
            format!("    - {}: {}", skill.name, skill.description)
        });
    }
    format!(
        "## Skills (mandatory)\nBefore replying, scan the skills below. If a skill matches or is even partially relevant to your task, you MUST load it with skill_view(name) and follow its instructions.\n\n<available_skills>\n{}\n</available_skills>\n\nOnly proceed without loading a skill if genuinely none are relevant to the task.",
        lines.join("\n")
    )
}

pub struct SkillsListTool(pub PathBuf);

/// `skills_list`'s arguments.
#[derive(Deserialize, JsonSchema)]
pub struct SkillsListArgs {
    /// Only this category.
    category: Option<String>,
}

impl TypedTool for SkillsListTool {
    type Args = SkillsListArgs;
    const NAME: &'static str = "skills_list";
    const TOOLSET: &'static str = "skills";

    fn description(&self) -> String {
        "List the skills you have (name, description, category).".into()
    }

    fn only_reads(&self, _args: &SkillsListArgs) -> bool {
        true
    }

    fn call<'a>(
        &'a self,
        args: SkillsListArgs,
        _ctx: &'a ToolContext,
    ) -> BoxFuture<'a, ToolResult> {
        Box::pin(async move {
            let home = self.0.clone();
            let category = args.category;
            let skills = tokio::task::spawn_blocking(move || scan(&home))
                .await
                .unwrap_or_default();
            let lines: Vec<String> = skills
                .iter()
                .filter(|s| category.as_deref().is_none_or(|c| c == s.category))
                .map(|s| format!("- {} ({}): {}", s.name, s.category, s.description))
                .collect();
            ToolResult::text(if lines.is_empty() {
                "No skills.".to_owned()
            } else {
                lines.join("\n")
            })
        })
    }
}

pub struct SkillViewTool(pub PathBuf);

/// `skill_view`'s arguments.
#[derive(Deserialize, JsonSchema)]
pub struct SkillViewArgs {
    name: String,
    /// A file of the skill, e.g. references/api.md.
    file_path: Option<String>,
}

impl TypedTool for SkillViewTool {
    type Args = SkillViewArgs;
    const NAME: &'static str = "skill_view";
    const TOOLSET: &'static str = "skills";

    fn description(&self) -> String {
        "Load a skill's instructions (SKILL.md), or one of its files (file_path, relative to the skill).".into()
    }

    fn only_reads(&self, _args: &SkillViewArgs) -> bool {
        true
    }

    fn call<'a>(&'a self, args: SkillViewArgs, _ctx: &'a ToolContext) -> BoxFuture<'a, ToolResult> {
        Box::pin(async move {
            let home = self.0.clone();
            let done = tokio::task::spawn_blocking(move || view(&home, &args)).await;
            ToolResult::text(match done {
                Ok(Ok(text)) => text,
                Ok(Err(e)) => format!("error: {e}"),
                Err(e) => format!("error: the skill could not be read: {e}"),
            })
        })
    }
}

fn view(home: &Path, args: &SkillViewArgs) -> Result<String, String> {
    let name = Some(args.name.trim())
        .filter(|n| !n.is_empty())
        .ok_or("`name` is required")?;
    let skills = scan(home);
    let skill = skills
        .iter()
        .find(|s| s.name == name || s.dir.file_name().is_some_and(|d| d == name))
        .ok_or_else(|| {
            let names: Vec<&str> = skills.iter().map(|s| s.name.as_str()).collect();
            format!(
                "there is no skill {name:?}; the skills are: {}",
                names.join(", ")
            )
        })?;
    let file = match args.file_path.as_deref().filter(|p| !p.trim().is_empty()) {
        None => skill.dir.join("SKILL.md"),
        Some(relative) => {
            let dir = skill.dir.canonicalize().map_err(|e| e.to_string())?;
            let file = dir
                .join(relative.trim())
                .canonicalize()
                .map_err(|e| format!("{relative:?}: {e}"))?;
            if !file.starts_with(&dir) {
                return Err(format!("{relative:?} is outside the skill"));
            }
            file
        }
    };
    let text = std::fs::read_to_string(&file).map_err(|e| format!("{}: {e}", file.display()))?;
    let mut shown: String = text.chars().take(MAX_CHARS).collect();
    if shown.len() < text.len() {
        shown.push_str("\n[… cut at 100000 characters]");
    }
    Ok(shown)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn hermes_home() -> tempfile::TempDir {
        let home = tempfile::tempdir().unwrap();
        let skill = home.path().join("skills/devops/deploy-app");
        std::fs::create_dir_all(skill.join("references")).unwrap();
        std::fs::write(
            skill.join("SKILL.md"),
            "---\nname: deploy-app\ndescription: Ship the app with zero downtime\n---\n# Deploy\n1. build\n",
        )
        .unwrap();
        std::fs::write(skill.join("references/hosts.md"), "web-1, web-2").unwrap();
        let plain = home.path().join("skills/notes");
        std::fs::create_dir_all(&plain).unwrap();
        std::fs::write(plain.join("SKILL.md"), "# Notes without front matter").unwrap();
        std::fs::write(home.path().join("secret.txt"), "s3cret").unwrap();
        home
    }

    #[test]
    fn skills_are_found_listed_and_indexed_as_hermes_keeps_them() {
        let home = hermes_home();
        let skills = scan(home.path());
        let names: Vec<(&str, &str)> = skills
            .iter()
            .map(|s| (s.category.as_str(), s.name.as_str()))
            .collect();
        assert_eq!(names, [("devops", "deploy-app"), ("general", "notes")]);
        let shown = index(home.path());
        assert!(shown.starts_with("## Skills (mandatory)"), "{shown}");
        assert!(shown.contains("  devops:\n    - deploy-app: Ship the app with zero downtime"));
        assert_eq!(index(&home.path().join("none")), "");
    }

    fn viewed(args: serde_json::Value) -> SkillViewArgs {
        serde_json::from_value(args).unwrap()
    }

    #[test]
    fn a_skill_and_its_files_are_viewed_and_nothing_outside() {
        let home = hermes_home();
        let skill = view(home.path(), &viewed(json!({"name": "deploy-app"}))).unwrap();
        assert!(skill.contains("1. build"));
        let file = view(
            home.path(),
            &viewed(json!({"name": "deploy-app", "file_path": "references/hosts.md"})),
        )
        .unwrap();
        assert_eq!(file, "web-1, web-2");
        let escape = view(
            home.path(),
            &viewed(json!({"name": "deploy-app", "file_path": "../../../secret.txt"})),
        )
        .unwrap_err();
        assert!(escape.contains("outside the skill"), "{escape}");
        assert!(
            view(home.path(), &viewed(json!({"name": "nope"})))
                .unwrap_err()
                .contains("deploy-app")
        );
    }
}
