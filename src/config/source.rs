//! The [`SettingsSource`] adapter crates read their settings from: `config.yaml` through
//! the key-tracking reader, variables from `.env` and the environment, problems collected
//! against their key. It remembers which variables were read, so they are not reported as
//! unused and secret-looking ones are scrubbed from child processes.

use std::collections::BTreeSet;

use hermes_adapter::SettingsSource;

use super::yaml::YamlReader;
use super::{EnvVars, Problem};

pub(super) struct Source<'a> {
    pub(super) yaml: &'a mut YamlReader,
    pub(super) env: &'a EnvVars,
    pub(super) problems: &'a mut Vec<Problem>,
    /// Every variable a platform asked for.
    pub(super) vars_read: BTreeSet<String>,
    /// The gateway's home directory.
    pub(super) home: &'a std::path::Path,
}

impl SettingsSource for Source<'_> {
    fn string(&mut self, key: &str) -> Option<String> {
        self.yaml.string(key, self.problems)
    }

    fn boolean(&mut self, key: &str) -> Option<bool> {
        self.yaml.boolean(key, self.problems)
    }

    fn number(&mut self, key: &str) -> Option<i64> {
        self.yaml
            .number(key, self.problems)
            .map(|n| i64::try_from(n).unwrap_or(i64::MAX))
    }

    fn var(&mut self, name: &str) -> Option<String> {
        self.vars_read.insert(name.to_owned());
        self.env.value(name)
    }

    fn error(&mut self, key: &str, message: String) {
        self.problems.push(Problem::error(key, message));
    }

    fn warning(&mut self, key: &str, message: String) {
        self.problems.push(Problem::warning(key, message));
    }

    fn home(&self) -> Option<&std::path::Path> {
        Some(self.home)
    }
}
