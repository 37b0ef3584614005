//! `.env` parsing and variable lookup: the process environment wins over `$HERMES_HOME/.env`.
//! Values from `.env` are never exported into the process environment, so they cannot leak
//! into child processes.

use std::collections::BTreeMap;

/// Where a variable's value came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EnvSource {
    Process,
    DotEnv,
}

/// Variables from the process and from `.env`.
#[derive(Debug, Clone, Default)]
pub struct EnvVars {
    dotenv: BTreeMap<String, String>,
    process: BTreeMap<String, String>,
}

impl EnvVars {
    /// Combine the process environment with the text of a `.env` file.
    pub fn new(process: impl IntoIterator<Item = (String, String)>, dotenv_text: &str) -> Self {
        EnvVars {
            dotenv: parse_dotenv(dotenv_text),
            process: process.into_iter().collect(),
        }
    }

    /// The values of every variable whose name says it holds a secret value.
    pub fn secret_values(&self) -> impl Iterator<Item = &str> {
        self.dotenv
            .iter()
            .chain(self.process.iter())
            .filter(|(name, _)| crate::secrets::holds_secret_value(name))
            .map(|(_, value)| value.as_str())
    }

    /// The value of `name` (process first), with empty values treated as unset.
    pub fn get(&self, name: &str) -> Option<(&str, EnvSource)> {
        let found = match self.process.get(name) {
            Some(v) => Some((v.as_str(), EnvSource::Process)),
            None => self
                .dotenv
                .get(name)
                .map(|v| (v.as_str(), EnvSource::DotEnv)),
        };
        found.filter(|(v, _)| !v.trim().is_empty())
    }

    pub fn value(&self, name: &str) -> Option<String> {
        self.get(name).map(|(v, _)| v.trim().to_owned())
    }

    /// Names defined in `.env` (for the "not used" report).
    pub fn dotenv_names(&self) -> impl Iterator<Item = &str> {
        self.dotenv.keys().map(String::as_str)
    }
}

/// Parse `KEY=VALUE` lines: `export` prefixes, `#` comments, single or double quotes.
pub fn parse_dotenv(text: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let line = line.strip_prefix("export ").unwrap_or(line);
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        let key = key.trim();
        if key.is_empty() || !key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            continue;
        }
        out.insert(key.to_owned(), unquote(value.trim()));
    }
    out
}

fn unquote(value: &str) -> String {
    for quote in ['"', '\''] {
        if let Some(inner) = value
            .strip_prefix(quote)
            .and_then(|v| v.strip_suffix(quote))
        {
            return if quote == '"' {
                inner.replace("\\n", "\n").replace("\\\"", "\"")
            } else {
                inner.to_owned()
            };
        }
    }
    // An unquoted value ends at an inline comment.
    match value.find(" #") {
        Some(i) => value[..i].trim_end().to_owned(),
        None => value.to_owned(),
    }
}

pub use hermes_adapter::is_truthy;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dotenv_lines_parse_like_a_shell_would() {
        let vars = parse_dotenv(
            "# comment\nexport A=1\nB=\"two words\"\nC='x#y'\nD=plain # trailing\nnot a line\n=bad\n",
        );
        assert_eq!(vars["A"], "1");
        assert_eq!(vars["B"], "two words");
        assert_eq!(vars["C"], "x#y");
        assert_eq!(vars["D"], "plain");
        assert_eq!(vars.len(), 4);
    }

    #[test]
    fn the_process_environment_wins_and_empty_means_unset() {
        let env = EnvVars::new(
            [
                ("A".to_string(), "process".to_string()),
                ("E".to_string(), " ".to_string()),
            ],
            "A=file\nB=file\nE=file",
        );
        assert_eq!(env.get("A"), Some(("process", EnvSource::Process)));
        assert_eq!(env.get("B"), Some(("file", EnvSource::DotEnv)));
        assert_eq!(env.get("E"), None);
    }
}
