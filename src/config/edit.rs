//! Writing the configuration for a person: the first run's `config.yaml` (commented, the
//! web chat on), and a model chosen in a form (the web chat's setup, `hermes-gateway
//! setup`): the `model:` section replaced and the rest of the file kept as written,
//! comments included, the key set in `.env`. Each file is written whole and private
//! ([`crate::home::write_private`]).

use std::io;
use std::os::unix::fs::DirBuilderExt;
use std::path::Path;

/// The `config.yaml` a first run writes: the web chat on, answers streamed, no model yet
/// (the web chat's form or `hermes-gateway setup` chooses one).
pub const FIRST_RUN_CONFIG: &str = "\
# hermes-gateway configuration, written by the first run. The same keys as the Python
# Hermes gateway; docs/configuration.md lists them. Secrets go in .env beside this file.
#
# No model is chosen yet: open the web chat (`hermes-gateway web-url` prints its address)
# and choose one there, or run `hermes-gateway setup`. Either writes the model: section.

platforms:
  # The web chat: a page on this machine where you talk to the agent (docs/web-chat.md).
  web:
    enabled: true
  # Telegram, Discord, Slack and WhatsApp are on once their tokens are in .env
  # (`hermes-gateway setup` checks each token and writes it).

web:
  listen: 127.0.0.1:8090        # the web chat's address; keep it on loopback

streaming:
  enabled: true                 # answers shown as they are written, where a platform edits
";

/// A new home's `.env`.
const FIRST_RUN_ENV: &str = "\
# Secrets for hermes-gateway: API keys and bot tokens, one NAME=value per line.
# Never share this file; it is readable by you alone.
";

/// On a first run (no `config.yaml`): make the home (0700) and write the starter
/// `config.yaml` and an empty `.env` (each 0600, an existing `.env` kept). `true` when it
/// wrote the configuration.
pub fn first_run(home: &Path) -> io::Result<bool> {
    let config = home.join("config.yaml");
    if config.exists() {
        return Ok(false);
    }
    if !home.exists() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(home)?;
    }
    let env = home.join(".env");
    if !env.exists() {
        crate::home::write_private(&env, FIRST_RUN_ENV.as_bytes())?;
    }
    crate::home::write_private(&config, FIRST_RUN_CONFIG.as_bytes())?;
    Ok(true)
}

/// A model to write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelWrite {
    pub provider: String,
    pub model: String,
    pub base_url: Option<String>,
    /// The `.env` variable and the key it keeps.
    pub key: Option<(String, String)>,
}

/// Why a value cannot be written as given.
fn plain(what: &str, value: &str, max: usize) -> Result<(), String> {
    if value.trim().is_empty() {
        return Err(format!("the {what} is empty"));
    }
    if value.len() > max || value.chars().any(char::is_control) {
        return Err(format!(
            "the {what} is not a plain line of at most {max} characters"
        ));
    }
    Ok(())
}

/// A YAML double-quoted string of `value` (which has no control characters).
fn quoted(value: &str) -> String {
    format!("\"{}\"", value.replace('\\', "\\\\").replace('"', "\\\""))
}

impl ModelWrite {
    /// What is wrong with it, in words for the person (never showing the key).
    pub fn check(&self) -> Result<(), String> {
        plain("provider", &self.provider, 40)?;
        plain("model name", &self.model, 200)?;
        if let Some(url) = &self.base_url {
            plain("base URL", url, 500)?;
            super::validate_http_url(url)?;
        }
        if let Some((var, key)) = &self.key {
            let name_ok = !var.is_empty()
                && var
                    .bytes()
                    .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_');
            if !name_ok {
                return Err("the key's variable name is not a plain NAME".into());
            }
            let key_ok = !key.is_empty()
                && key.len() <= 4096
                && key.bytes().all(|b| {
                    b.is_ascii_graphic() && !matches!(b, b'"' | b'\'' | b'\\' | b'$' | b'#')
                });
            if !key_ok {
                return Err(
                    "the key has spaces, quotes or other characters no API key has; paste it again"
                        .into(),
                );
            }
        }
        Ok(())
    }

    /// The `model:` section.
    pub fn section(&self) -> String {
        let mut block = format!(
            "model:\n  provider: {}\n  default: {}\n",
            quoted(&self.provider),
            quoted(&self.model)
        );
        if let Some(url) = &self.base_url {
            block.push_str(&format!("  base_url: {}\n", quoted(url)));
        }
        block
    }
}

/// `yaml` with its top-level `name:` section (the line and those indented under it, with
/// the comments among them) replaced by `block`; added at the top when it has none.
pub fn replace_section(yaml: &str, name: &str, block: &str) -> String {
    let head = format!("{name}:");
    let lines: Vec<&str> = yaml.lines().collect();
    let starts = |line: &str| {
        line.starts_with(&head)
            && line[head.len()..]
                .chars()
                .next()
                .is_none_or(|c| c.is_whitespace() || c == '#')
    };
    let Some(start) = lines.iter().position(|l| starts(l)) else {
        return format!("{block}\n{yaml}");
    };
    // The section ends at the next line that starts at the margin with a key.
    let end = lines[start + 1..]
        .iter()
        .position(|l| {
            l.chars()
                .next()
                .is_some_and(|c| !c.is_whitespace() && c != '#')
        })
        .map_or(lines.len(), |at| start + 1 + at);
    let mut out: Vec<String> = lines[..start].iter().map(|l| l.to_string()).collect();
    out.push(block.trim_end().to_owned());
    out.extend(lines[end..].iter().map(|l| l.to_string()));
    let mut text = out.join("\n");
    text.push('\n');
    text
}

/// `env` with `var` set to `value` (the line replaced where it is, else added).
pub fn set_var(env: &str, var: &str, value: &str) -> String {
    let line = format!("{var}={value}");
    let mut found = false;
    let mut out: Vec<String> = env
        .lines()
        .map(|l| {
            let named = l
                .trim_start()
                .trim_start_matches("export ")
                .split_once('=')
                .is_some_and(|(name, _)| name.trim() == var);
            if named && !found {
                found = true;
                line.clone()
            } else {
                l.to_owned()
            }
        })
        .collect();
    if !found {
        out.push(line);
    }
    let mut text = out.join("\n");
    text.push('\n');
    text
}

/// Write `choice` into `home`'s `config.yaml` and `.env`.
pub fn write_model(home: &Path, choice: &ModelWrite) -> io::Result<()> {
    choice
        .check()
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    if let Some((var, key)) = &choice.key {
        let env_path = home.join(".env");
        let env = std::fs::read_to_string(&env_path).unwrap_or_default();
        crate::home::write_private(&env_path, set_var(&env, var, key).as_bytes())?;
    }
    let config_path = home.join("config.yaml");
    let yaml = std::fs::read_to_string(&config_path).unwrap_or_default();
    let written = replace_section(&yaml, "model", &choice.section());
    crate::home::write_private(&config_path, written.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_model_section_is_replaced_and_the_rest_kept_as_written() {
        let yaml = "# top\nmodel:\n  provider: custom   # a comment\n  # inside\n  default: old\nagent:\n  max_turns: 3\n";
        let choice = ModelWrite {
            provider: "ollama".into(),
            model: "llama3.2:3b".into(),
            base_url: Some("http://127.0.0.1:11434/v1".into()),
            key: None,
        };
        let written = replace_section(yaml, "model", &choice.section());
        assert_eq!(
            written,
            "# top\nmodel:\n  provider: \"ollama\"\n  default: \"llama3.2:3b\"\n  base_url: \"http://127.0.0.1:11434/v1\"\nagent:\n  max_turns: 3\n"
        );
        let none = replace_section(
            "platforms:\n  web:\n    enabled: true\n",
            "model",
            &choice.section(),
        );
        assert!(none.starts_with("model:\n  provider: \"ollama\""), "{none}");
        assert!(
            none.ends_with("platforms:\n  web:\n    enabled: true\n"),
            "{none}"
        );
        // `models:` is another section.
        let other = replace_section("models:\n  x: 1\n", "model", "model:\n  default: a\n");
        assert!(other.contains("models:\n  x: 1"), "{other}");
    }

    #[test]
    fn a_key_replaces_its_line_or_is_added_and_odd_values_are_refused() {
        assert_eq!(
            set_var(
                "# c\nOPENROUTER_API_KEY=old\nOTHER=1\n",
                "OPENROUTER_API_KEY",
                "new"
            ),
            "# c\nOPENROUTER_API_KEY=new\nOTHER=1\n"
        );
        assert_eq!(set_var("", "K", "v"), "K=v\n");
        let mut choice = ModelWrite {
            provider: "openrouter".into(),
            model: "a/b".into(),
            base_url: None,
            key: Some(("OPENROUTER_API_KEY".into(), "sk-or-v1-abc".into())),
        };
        assert_eq!(choice.check(), Ok(()));
        choice.key = Some(("OPENROUTER_API_KEY".into(), "sk\nEVIL=1".into()));
        assert!(choice.check().is_err(), "a newline would add a variable");
        choice.key = None;
        choice.model = "a\nmodel: evil".into();
        assert!(choice.check().is_err());
        choice.model = "ok".into();
        choice.base_url = Some("file:///etc/passwd".into());
        assert!(choice.check().is_err());
    }

    #[test]
    fn a_first_run_makes_a_private_home_with_the_web_chat_on_and_no_model() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join(".hermes");
        assert!(first_run(&home).unwrap());
        assert!(!first_run(&home).unwrap(), "once");
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&home), 0o700);
        assert_eq!(mode(&home.join("config.yaml")), 0o600);
        assert_eq!(mode(&home.join(".env")), 0o600);
        let loaded = crate::config::load(&home);
        let config = loaded.config.expect("the starter configuration runs");
        assert!(!config.model.is_chosen());
        assert!(config.platform(hermes_adapter::Platform::Web).is_some());
    }
}
