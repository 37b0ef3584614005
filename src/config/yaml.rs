//! A reader over `config.yaml` that remembers which keys were consumed, so every key the
//! gateway does not use can be listed by `check-config`, and every problem names its key path.

use std::collections::BTreeSet;

use serde_json::Value;

use super::Problem;

/// The parsed file plus the set of key paths read so far.
pub struct YamlReader {
    root: Value,
    used: BTreeSet<String>,
    /// Every path asked for, there or not: the keys the gateway knows.
    asked: BTreeSet<String>,
}

impl YamlReader {
    /// Parse YAML text; an empty file is an empty mapping.
    pub fn parse(text: &str) -> Result<YamlReader, String> {
        let root = if text.trim().is_empty() {
            Value::Object(Default::default())
        } else {
            serde_saphyr::from_str::<Value>(text).map_err(|e| e.to_string())?
        };
        let root = match root {
            Value::Null => Value::Object(Default::default()),
            Value::Object(_) => root,
            _ => return Err("the top level must be a mapping of keys".into()),
        };
        Ok(YamlReader {
            root,
            used: BTreeSet::new(),
            asked: BTreeSet::new(),
        })
    }

    /// Every string stored under a key that names a secret (`api_key`, `token`,
    /// `signing_secret`…), wherever it is in the file.
    pub fn secret_strings(&self) -> Vec<String> {
        fn walk(node: &Value, key: &str, out: &mut Vec<String>) {
            match node {
                Value::Object(map) => map.iter().for_each(|(k, v)| walk(v, k, out)),
                Value::Array(items) => items.iter().for_each(|v| walk(v, key, out)),
                Value::String(s) if crate::secrets::holds_secret_value(key) => out.push(s.clone()),
                _ => {}
            }
        }
        let mut out = Vec::new();
        walk(&self.root, "", &mut out);
        out
    }

    /// The variables the file's strings name as `${NAME}` or `${env:NAME}` (MCP servers'
    /// `env`, `headers`, `args` and `url`), which `.env` then holds for it.
    pub fn referenced_variables(&self) -> BTreeSet<String> {
        fn walk(node: &Value, out: &mut BTreeSet<String>) {
            match node {
                Value::Object(map) => map.values().for_each(|v| walk(v, out)),
                Value::Array(items) => items.iter().for_each(|v| walk(v, out)),
                Value::String(s) => {
                    let mut rest = s.as_str();
                    while let Some(start) = rest.find("${") {
                        rest = &rest[start + 2..];
                        let Some(end) = rest.find('}') else { break };
                        let name = rest[..end].trim();
                        out.insert(name.strip_prefix("env:").unwrap_or(name).trim().to_owned());
                        rest = &rest[end + 1..];
                    }
                }
                _ => {}
            }
        }
        let mut out = BTreeSet::new();
        walk(&self.root, &mut out);
        out
    }

    /// The value at a dotted path if it is a text, marking it used only then (a key that
    /// may be a text or a mapping of keys read one by one, like `model`).
    pub fn text_only(&mut self, path: &str) -> Option<String> {
        self.asked.insert(path.to_owned());
        let mut node = &self.root;
        for part in path.split('.') {
            node = node.as_object()?.get(part)?;
        }
        let text = node.as_str()?.to_owned();
        self.used.insert(path.to_owned());
        Some(text)
    }

    /// The value at a dotted path, marking it used.
    pub fn get(&mut self, path: &str) -> Option<&Value> {
        if !self.asked.contains(path) {
            self.asked.insert(path.to_owned());
        }
        let mut node = &self.root;
        for part in path.split('.') {
            node = node.as_object()?.get(part)?;
        }
        if node.is_null() {
            return None;
        }
        self.used.insert(path.to_owned());
        Some(node)
    }

    /// A string (numbers are accepted as their text).
    pub fn string(&mut self, path: &str, problems: &mut Vec<Problem>) -> Option<String> {
        match self.get(path)? {
            Value::String(s) => Some(s.trim().to_owned()).filter(|s| !s.is_empty()),
            Value::Number(n) => Some(n.to_string()),
            Value::Bool(b) => Some(b.to_string()),
            _ => {
                problems.push(Problem::error(path, "expected a text value"));
                None
            }
        }
    }

    /// A boolean (`true`/`false`, or the strings Hermes accepts).
    pub fn boolean(&mut self, path: &str, problems: &mut Vec<Problem>) -> Option<bool> {
        match self.get(path)? {
            Value::Bool(b) => Some(*b),
            Value::String(s) => match s.trim().to_ascii_lowercase().as_str() {
                "true" | "yes" | "on" | "1" => Some(true),
                "false" | "no" | "off" | "0" => Some(false),
                _ => {
                    problems.push(Problem::error(
                        path,
                        format!("expected true or false, found {s:?}"),
                    ));
                    None
                }
            },
            other => {
                problems.push(Problem::error(
                    path,
                    format!("expected true or false, found {other}"),
                ));
                None
            }
        }
    }

    /// A non-negative whole number.
    pub fn number(&mut self, path: &str, problems: &mut Vec<Problem>) -> Option<u64> {
        let value = self.get(path)?;
        let parsed = match value {
            Value::Number(n) => n.as_u64(),
            Value::String(s) => s.trim().parse().ok(),
            _ => None,
        };
        if parsed.is_none() {
            problems.push(Problem::error(
                path,
                format!("expected a whole number, found {value}"),
            ));
        }
        parsed
    }

    /// A finite number (`1.25`, or a whole one).
    pub fn float(&mut self, path: &str, problems: &mut Vec<Problem>) -> Option<f64> {
        let text = self.string(path, problems)?;
        match text.trim().parse::<f64>() {
            Ok(v) if v.is_finite() => Some(v),
            _ => {
                problems.push(Problem::error(
                    path,
                    format!("expected a number, found {text:?}"),
                ));
                None
            }
        }
    }

    /// A list of strings (a YAML list, or one comma-separated string).
    pub fn list(&mut self, path: &str, problems: &mut Vec<Problem>) -> Option<Vec<String>> {
        match self.get(path)? {
            Value::Array(items) => {
                let mut out = Vec::new();
                for item in items {
                    match item {
                        Value::String(s) => out.push(s.trim().to_owned()),
                        Value::Number(n) => out.push(n.to_string()),
                        other => problems.push(Problem::error(
                            path,
                            format!("unexpected list item {other}"),
                        )),
                    }
                }
                Some(out)
            }
            Value::String(s) => Some(split_list(s)),
            Value::Number(n) => Some(vec![n.to_string()]),
            other => {
                problems.push(Problem::error(
                    path,
                    format!("expected a list, found {other}"),
                ));
                None
            }
        }
    }

    /// Every path asked for, whether the file has it or not.
    pub fn asked(&self) -> &BTreeSet<String> {
        &self.asked
    }

    /// Every leaf key path that was never read.
    pub fn unused(&self) -> Vec<String> {
        let mut out = Vec::new();
        collect_leaves(&self.root, String::new(), &mut out);
        out.retain(|leaf| {
            !self
                .used
                .iter()
                .any(|u| leaf == u || leaf.starts_with(&format!("{u}.")))
        });
        out
    }
}

fn collect_leaves(value: &Value, prefix: String, out: &mut Vec<String>) {
    match value {
        Value::Object(map) if !map.is_empty() => {
            for (key, child) in map {
                let path = if prefix.is_empty() {
                    key.clone()
                } else {
                    format!("{prefix}.{key}")
                };
                collect_leaves(child, path, out);
            }
        }
        _ if !prefix.is_empty() => out.push(prefix),
        _ => {}
    }
}

pub use hermes_adapter::split_list;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unread_keys_are_reported_and_read_ones_are_not() {
        let mut y = YamlReader::parse(
            "model:\n  default: m\n  extra: 1\nsecurity:\n  tirith_enabled: false\n",
        )
        .unwrap();
        let mut problems = Vec::new();
        assert_eq!(
            y.string("model.default", &mut problems).as_deref(),
            Some("m")
        );
        assert_eq!(
            y.unused(),
            vec![
                "model.extra".to_string(),
                "security.tirith_enabled".to_string()
            ]
        );
        assert!(problems.is_empty());
    }

    #[test]
    fn wrong_types_name_their_key() {
        let mut y = YamlReader::parse("agent:\n  max_turns: lots\n").unwrap();
        let mut problems = Vec::new();
        assert_eq!(y.number("agent.max_turns", &mut problems), None);
        assert_eq!(problems[0].key, "agent.max_turns");
    }

    #[test]
    fn a_non_mapping_file_is_refused() {
        assert!(YamlReader::parse("- a\n- b\n").is_err());
        assert!(YamlReader::parse("").is_ok());
    }
}
