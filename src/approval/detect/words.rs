//! Words as bash will see them after expansion, as far as that is known before run time:
//! known text and marked unknown parts ([`Arg`]), brace expansion, and paths resolved from
//! a working directory.

use std::path::{Component, Path, PathBuf};

use brush_parser::word;

/// Why part of a word is not known before run time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unknown {
    /// A variable the script does not set to fixed text.
    Variable,
    /// `$!` or `$$`: a process id of the shell's own.
    OwnPid,
    /// The output of a command: `$(…)`, `` `…` ``, `<(…)`.
    Substitution,
    /// `$'…'`: escapes decoded at run time.
    AnsiC,
}

/// One piece of a resolved word.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Part {
    Lit(String),
    Unknown(Unknown),
}

/// A word as bash will see it after expansion, as far as that is known now.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Arg {
    pub parts: Vec<Part>,
}

impl Arg {
    pub fn literal(text: &str) -> Arg {
        Arg {
            parts: vec![Part::Lit(text.to_owned())],
        }
    }

    pub fn unknown(why: Unknown) -> Arg {
        Arg {
            parts: vec![Part::Unknown(why)],
        }
    }

    /// The text, when every part is known.
    pub fn text(&self) -> Option<String> {
        let mut out = String::new();
        for part in &self.parts {
            match part {
                Part::Lit(s) => out.push_str(s),
                Part::Unknown(_) => return None,
            }
        }
        Some(out)
    }

    /// The known text with `*` for every unknown part: what the word may turn out to be.
    pub fn pattern(&self) -> String {
        let mut out = String::new();
        for part in &self.parts {
            match part {
                Part::Lit(s) => out.push_str(s),
                Part::Unknown(_) => out.push('*'),
            }
        }
        out
    }

    /// Nothing of it is known (`$x`, `$(…)`).
    pub fn wholly_unknown(&self) -> bool {
        self.parts.iter().all(|p| match p {
            Part::Lit(s) => s.is_empty(),
            Part::Unknown(_) => true,
        })
    }

    pub fn has(&self, why: Unknown) -> bool {
        self.parts.contains(&Part::Unknown(why))
    }

    /// The known text, or how it looks with unknown parts shown as `…`.
    pub fn shown(&self) -> String {
        self.text()
            .unwrap_or_else(|| self.pattern().replace('*', "…"))
    }
}

/// Most words one brace expression is followed into; more means "unknown".
const MAX_BRACE_WORDS: usize = 256;

/// The words a brace expression expands to, or `None` when there are too many.
pub(super) fn expand_braces(parts: &[word::BraceExpressionOrText]) -> Option<Vec<String>> {
    use word::{BraceExpressionMember as M, BraceExpressionOrText as B};
    let mut words = vec![String::new()];
    for part in parts {
        let options: Vec<String> = match part {
            B::Text(text) => vec![text.clone()],
            B::Expr(members) => {
                let mut options = Vec::new();
                for member in members {
                    match member {
                        M::NumberSequence { start, end, .. } => {
                            if start.abs_diff(*end) as usize >= MAX_BRACE_WORDS {
                                return None;
                            }
                            let (lo, hi) = ((*start).min(*end), (*start).max(*end));
                            options.extend((lo..=hi).map(|n| n.to_string()));
                        }
                        M::CharSequence { start, end, .. } => {
                            let (lo, hi) = ((*start).min(*end), (*start).max(*end));
                            options.extend((lo..=hi).map(String::from));
                        }
                        M::Child(inner) => options.extend(expand_braces(inner)?),
                    }
                }
                options
            }
        };
        if words.len() * options.len().max(1) > MAX_BRACE_WORDS {
            return None;
        }
        words = words
            .iter()
            .flat_map(|w| options.iter().map(move |o| format!("{w}{o}")))
            .collect();
    }
    Some(words)
}

pub(super) fn merge_literals(arg: Arg) -> Arg {
    let mut parts: Vec<Part> = Vec::new();
    for part in arg.parts {
        match (parts.last_mut(), part) {
            (Some(Part::Lit(prev)), Part::Lit(next)) => prev.push_str(&next),
            (_, part) => parts.push(part),
        }
    }
    Arg { parts }
}

/// `path` as seen from `cwd`, with `.` and `..` folded (no symlinks followed).
pub fn resolve(cwd: &Path, path: &str) -> PathBuf {
    let joined = if path.starts_with('/') {
        PathBuf::from(path)
    } else {
        cwd.join(path)
    };
    let mut out = PathBuf::from("/");
    for component in joined.components() {
        match component {
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(c) => out.push(c),
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
        }
    }
    out
}
