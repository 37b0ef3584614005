//! Writing the configuration for a person: the first run's `config.yaml` (commented, the
//! web chat on), and a model chosen in a form (the web chat's setup, `hermes-gateway
//! setup`): the `model:` section replaced and the rest of the file kept as written,
//! comments included, the key set in `.env`. Each file is written whole and private
//! ([`crate::home::write_private`]).

use std::io;
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
    crate::home::create(home)?;
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

    /// `yaml` with this model chosen: in its `model:` section, `provider`, `default` and
    /// `base_url` set and `api_key` removed (a chosen key lives in `.env`); every other key
    /// and comment kept as written.
    pub fn apply(&self, yaml: &str) -> String {
        let mut keys = vec![
            ("provider", Some(quoted(&self.provider))),
            ("default", Some(quoted(&self.model))),
            ("api_key", None),
        ];
        if let Some(url) = &self.base_url {
            keys.push(("base_url", Some(quoted(url))));
        }
        set_section_keys(yaml, "model", &keys)
    }
}

/// Whether `line` is a key at the margin (not indented, not a comment, not a document
/// marker).
fn margin_key(line: &str) -> bool {
    line.chars()
        .next()
        .is_some_and(|c| !c.is_whitespace() && c != '#' && c != '-' && c != '%')
}

/// `yaml` with the keys of its top-level `name:` section set (`Some`) or removed (`None`),
/// the rest as written. A flat `name: value` becomes a section; a missing section is added
/// after any `---` or directive lines at the top.
pub fn set_section_keys(yaml: &str, name: &str, keys: &[(&str, Option<String>)]) -> String {
    let head = format!("{name}:");
    let mut lines: Vec<String> = yaml
        .lines()
        .map(|l| l.trim_end_matches('\r').to_owned())
        .collect();
    let is_head = |line: &str| {
        line.starts_with(&head)
            && line[head.len()..]
                .chars()
                .next()
                .is_none_or(|c| c.is_whitespace() || c == '#')
    };
    let start = match lines.iter().position(|l| is_head(l)) {
        Some(start) => {
            // `model: name` (Hermes' older flat form) becomes a section.
            let rest = lines[start][head.len()..].trim();
            if !rest.is_empty() && !rest.starts_with('#') {
                lines[start] = head.clone();
            }
            start
        }
        None => {
            let at = lines
                .iter()
                .position(|l| {
                    !(l.starts_with("---") || l.starts_with('%') || l.starts_with('\u{feff}'))
                })
                .unwrap_or(lines.len());
            lines.insert(at, head.clone());
            at
        }
    };
    let end = lines[start + 1..]
        .iter()
        .position(|l| margin_key(l) || l.starts_with("---"))
        .map_or(lines.len(), |at| start + 1 + at);
    let child = |l: &str| !l.trim().is_empty() && !l.trim_start().starts_with('#');
    let indent: String = lines[start + 1..end]
        .iter()
        .find(|l| child(l))
        .map(|l| l.chars().take_while(|c| c.is_whitespace()).collect())
        .unwrap_or_else(|| "  ".into());
    let mut section: Vec<String> = lines[start + 1..end].to_vec();
    for (key, value) in keys {
        let own = |l: &String| {
            l.starts_with(&indent)
                && l[indent.len()..].starts_with(&format!("{key}:"))
                && !l[indent.len()..].starts_with(char::is_whitespace)
        };
        let at = section.iter().position(own);
        match (at, value) {
            (Some(at), Some(value)) => section[at] = format!("{indent}{key}: {value}"),
            (Some(at), None) => {
                section.remove(at);
            }
            (None, Some(value)) => {
                // After the section's last key, before the comments that end it.
                let last = section.iter().rposition(|l| child(l)).map_or(0, |i| i + 1);
                section.insert(last, format!("{indent}{key}: {value}"));
            }
            (None, None) => {}
        }
    }
    lines.splice(start + 1..end, section);
    let mut text = lines.join("\n");
    text.push('\n');
    text
}

/// The file at `path`, or nothing when there is none; any other error (unreadable, not
/// UTF-8) is an error, never taken as an empty file to write over.
pub fn read_or_empty(path: &Path) -> io::Result<String> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(text),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(String::new()),
        Err(e) => Err(io::Error::new(
            e.kind(),
            format!("{} cannot be read: {e}", path.display()),
        )),
    }
}

/// `env` with `var` set to `value`: its last line replaced (the one that counts), earlier
/// ones removed, else a line added; an `export ` in front is kept.
pub fn set_var(env: &str, var: &str, value: &str) -> String {
    let names = |l: &str| {
        l.trim_start()
            .trim_start_matches("export ")
            .split_once('=')
            .is_some_and(|(name, _)| name.trim() == var)
    };
    let lines: Vec<&str> = env.lines().map(|l| l.trim_end_matches('\r')).collect();
    let last = lines.iter().rposition(|l| names(l));
    let mut out: Vec<String> = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        if Some(i) == last {
            let export = if l.trim_start().starts_with("export ") {
                "export "
            } else {
                ""
            };
            out.push(format!("{export}{var}={value}"));
        } else if !names(l) {
            out.push((*l).to_owned());
        }
    }
    if last.is_none() {
        out.push(format!("{var}={value}"));
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
    // Both read before either is written: an unreadable file stops it all.
    let (env_path, config_path) = (home.join(".env"), home.join("config.yaml"));
    let env = read_or_empty(&env_path)?;
    let yaml = read_or_empty(&config_path)?;
    if let Some((var, key)) = &choice.key {
        crate::home::write_private(&env_path, set_var(&env, var, key).as_bytes())?;
    }
    crate::home::write_private(&config_path, choice.apply(&yaml).as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_chosen_keys_change_and_the_rest_is_kept_as_written() {
        let choice = ModelWrite {
            provider: "ollama".into(),
            model: "llama3.2:3b".into(),
            base_url: Some("http://127.0.0.1:11434/v1".into()),
            key: None,
        };
        let yaml = "# top\r\nmodel:\r\n  provider: custom   # a comment\r\n  # inside\r\n  default: old\r\n  context_length: 32768\r\n  api_key: sk-old\r\n# about agent\r\nagent:\r\n  max_turns: 3\r\n";
        assert_eq!(
            choice.apply(yaml),
            "# top\nmodel:\n  provider: \"ollama\"\n  # inside\n  default: \"llama3.2:3b\"\n  context_length: 32768\n  base_url: \"http://127.0.0.1:11434/v1\"\n# about agent\nagent:\n  max_turns: 3\n"
        );
        // Hermes' flat form, a four-space indent, no section at all after `---`.
        assert_eq!(
            choice.apply("model: old-name\nagent: {}\n"),
            "model:\n  provider: \"ollama\"\n  default: \"llama3.2:3b\"\n  base_url: \"http://127.0.0.1:11434/v1\"\nagent: {}\n"
        );
        let four = choice.apply("model:\n    default: x\n    max_tokens: 9\n");
        assert!(
            four.contains("    default: \"llama3.2:3b\"\n    max_tokens: 9\n"),
            "{four}"
        );
        let none = choice.apply("---\nplatforms:\n  web:\n    enabled: true\n");
        assert!(
            none.starts_with("---\nmodel:\n  provider: \"ollama\""),
            "{none}"
        );
        assert!(
            none.ends_with("platforms:\n  web:\n    enabled: true\n"),
            "{none}"
        );
        // A comment, `models:` and an indented `model:` are not the section.
        let other = choice.apply("# model: no\nmodels:\n  x: 1\nagent:\n  model: keep\n");
        assert!(
            other.contains("models:\n  x: 1\nagent:\n  model: keep\n"),
            "{other}"
        );
        assert!(other.starts_with("model:\n"), "{other}");
        assert!(other.contains("\n# model: no\nmodels:\n"), "{other}");
        for yaml in [yaml, "model: a\n", "---\nplatforms: {}\n"] {
            let written = choice.apply(yaml);
            let env = crate::config::EnvVars::new(Vec::new(), "");
            let loaded = crate::config::load_from(Path::new("/nonexistent"), &written, &env);
            assert!(
                loaded
                    .problems
                    .iter()
                    .all(|p| !p.to_string().contains("YAML")),
                "{written}: {:?}",
                loaded.problems
            );
        }
    }

    #[test]
    fn an_unreadable_file_is_an_error_never_an_empty_one_to_write_over() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(".env"), b"KEY=caf\xe9\n").unwrap();
        let choice = ModelWrite {
            provider: "openrouter".into(),
            model: "m".into(),
            base_url: None,
            key: Some(("OPENROUTER_API_KEY".into(), "sk-or-1".into())),
        };
        assert!(write_model(dir.path(), &choice).is_err());
        assert_eq!(
            std::fs::read(dir.path().join(".env")).unwrap(),
            b"KEY=caf\xe9\n",
            "left as it was"
        );
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
        // The last line is the one that counts: it is replaced, the earlier ones go.
        assert_eq!(
            set_var("K=1\nK_2=x\nexport K=2\n", "K", "3"),
            "K_2=x\nexport K=3\n"
        );
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
