//! Which commands need a person's approval, and why. Three layers, and a command is flagged
//! when any of them flags it (normalising or parsing can only add findings):
//!
//! 1. **Bytes**: control or invisible characters (terminal escapes, bidi overrides,
//!    zero-width characters, backspace) need approval by themselves: they can make what a
//!    person reads differ from what bash runs.
//! 2. **Structure** ([`script`], [`rules`], [`paths`]): the command is parsed as bash parses
//!    it, each simple command is judged by its command word and arguments, and where the
//!    command word or the code a shell runs is only known at run time the answer is to ask.
//! 3. **Text** ([`text`]): Hermes-style regexes on the raw and the normalised text.

pub mod classes;
mod paths;
mod rules;
mod script;
mod text;
mod words;

#[cfg(test)]
mod tests;

use std::ops::Range;
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};

pub use classes::{Class, named};
pub use paths::{Place, protected_places};
pub use text::normalise;

/// Longest command judged by parsing; longer ones are asked about as they are.
const MAX_COMMAND_CHARS: usize = 128 * 1024;
/// Deepest bracket nesting parsed; deeper commands are asked about as they are.
const MAX_BRACKET_NESTING: usize = 64;
/// Stack for the parser thread: the parser recurses once per nesting level.
const PARSER_STACK_BYTES: usize = 64 * 1024 * 1024;
/// How many levels of nested code (`sh -c '…'`, `trap '…'`) are followed.
const MAX_NESTING: usize = 4;

/// Why a command was flagged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Danger {
    /// Stable name of the class; what "for this session" and "always" approve.
    pub key: &'static str,
    pub description: &'static str,
    /// The flagged part of the command, in characters, when known.
    pub span: Option<Range<usize>>,
}

impl Danger {
    /// A finding of `class` without a place in the command.
    pub fn of(class: &classes::Class) -> Danger {
        Danger {
            key: class.key,
            description: class.description,
            span: None,
        }
    }

    /// A command that could not be checked at all: it needs approval.
    pub fn unchecked() -> Danger {
        Danger::of(&classes::UNPARSED)
    }
}

/// What a command is judged against: where it runs and who runs it.
#[derive(Debug, Clone)]
pub struct Scene {
    /// The working directory the command starts in.
    pub cwd: PathBuf,
    pub home: PathBuf,
    pub hermes_home: PathBuf,
    /// The homes of the other gateways this process runs (profiles): as off limits as
    /// the own one.
    pub other_homes: Vec<PathBuf>,
    /// The gateway's own process id (`$PPID` of the command).
    pub gateway_pid: u32,
    /// The gateway executable's file name.
    pub gateway_name: String,
}

impl Scene {
    /// The scene for this process: `HOME`, its pid and executable name.
    pub fn of_this_process(hermes_home: PathBuf, cwd: PathBuf) -> Scene {
        let home = std::env::var_os("HOME")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("/root"));
        let gateway_name = std::env::current_exe()
            .ok()
            .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
            .unwrap_or_else(|| "hermes-gateway".to_owned());
        Scene {
            cwd,
            home,
            hermes_home,
            other_homes: Vec::new(),
            gateway_pid: std::process::id(),
            gateway_name,
        }
    }

    /// The same, with the homes of the other gateways this process runs.
    pub fn with_other_homes(mut self, other_homes: &[PathBuf]) -> Scene {
        self.other_homes = other_homes.to_vec();
        self
    }

    /// Every gateway home of this process, the own one first.
    pub fn gateway_homes(&self) -> impl Iterator<Item = &PathBuf> {
        std::iter::once(&self.hermes_home).chain(&self.other_homes)
    }

    /// Whether `path` lies in a gateway's home (its secrets, its database, its chats'
    /// files) and not in the working directory set up inside this gateway's own home.
    pub fn in_gateway_home(&self, path: &Path) -> bool {
        let in_workdir = self.cwd != self.hermes_home
            && self.cwd.starts_with(&self.hermes_home)
            && path.starts_with(&self.cwd);
        !in_workdir && self.gateway_homes().any(|home| path.starts_with(home))
    }
}

/// Every class `command` falls in when run in `scene` (empty when it is harmless), each
/// once, in the order found.
/// What an `execute_code` script shows that needs its own approval beyond running a
/// script at all: hidden characters, Hermes' text patterns (a `rm -rf` in a string), and
/// the places whose mention means the script reaches for the gateway's secrets or another
/// process's memory. (A script is not shell; this reads its text, it cannot follow what
/// the script computes: the person approving the script is the guard.)
pub fn script_dangers(script: &str, scene: &Scene) -> Vec<Danger> {
    let mut found = Found::default();
    surface(script, &mut found);
    // The gateway's home by its path (the working directory inside it is the agent's own),
    // by name, and its secret files by name.
    static SECRET_NAMES: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(
            r#"(?i)\bhermes_home\b|/\.hermes\b|(?:^|[/'"\s])\.env\b|\bgateway\.db\b|\bconfig\.yaml\b"#,
        )
        .expect("valid regex")
    });
    static PROC: std::sync::LazyLock<regex::Regex> =
        std::sync::LazyLock::new(|| regex::Regex::new(r"/proc/").expect("valid regex"));
    let workdir = scene.cwd.to_string_lossy().into_owned();
    // Every gateway home of the process (profiles): a mention of one that is not the way
    // into this gateway's own working directory.
    let home_mention = scene
        .gateway_homes()
        .map(|home| home.to_string_lossy().into_owned())
        .filter(|home| !home.is_empty())
        .find_map(|home| {
            script.match_indices(home.as_str()).find(|(at, _)| {
                !(scene.cwd.starts_with(&scene.hermes_home) && script[*at..].starts_with(&workdir))
            })
        })
        .map(|(at, text)| at..at + text.len());
    let by_name = SECRET_NAMES.find(script).map(|m| m.range());
    let span = |bytes: std::ops::Range<usize>| {
        let start = script[..bytes.start].chars().count();
        Some(start..start + script[bytes].chars().count())
    };
    if let Some(bytes) = home_mention.or(by_name) {
        found.add(&classes::GATEWAY_SECRET, span(bytes));
    }
    if let Some(m) = PROC.find(script) {
        found.add(&classes::PROCESS_MEMORY, span(m.range()));
    }
    found.0
}

/// The layers that read the raw text alone: hidden characters and Hermes' patterns.
fn surface(text: &str, found: &mut Found) {
    if let Some(at) = text.chars().position(hides_text) {
        found.add(&classes::CONTROL_CHARS, Some(at..at + 1));
    }
    for (class, span) in text::detect(text) {
        found.add(class, span);
    }
}

pub fn detect(command: &str, scene: &Scene) -> Vec<Danger> {
    let mut found = Found::default();
    surface(command, &mut found);
    if command.chars().count() > MAX_COMMAND_CHARS {
        found.add(&classes::TOO_LONG, None);
        return found.0;
    }
    if nesting(command) > MAX_BRACKET_NESTING {
        found.add(&classes::UNPARSED, None);
        return found.0;
    }
    // The parser is third-party code fed hostile input: it runs on a thread with a deep
    // stack of its own, and a panic in it means "ask".
    let structural = std::thread::scope(|threads| {
        std::thread::Builder::new()
            .name("approval-parse".into())
            .stack_size(PARSER_STACK_BYTES)
            .spawn_scoped(threads, || {
                std::panic::catch_unwind(AssertUnwindSafe(|| {
                    let mut inner = Found::default();
                    structure(command, scene, 0, &mut inner, true);
                    inner
                }))
            })
            .map(|handle| handle.join())
    });
    match structural {
        Ok(Ok(Ok(inner))) => {
            for danger in inner.0 {
                found.push(danger);
            }
        }
        _ => found.add(&classes::UNPARSED, None),
    }
    found.0
}

/// How deeply brackets nest at most (quotes ignored, so it may overcount; overcounting
/// only means asking).
fn nesting(command: &str) -> usize {
    let mut depth: usize = 0;
    let mut deepest = 0;
    for ch in command.chars() {
        match ch {
            '(' | '{' | '[' | '`' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            ')' | '}' | ']' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

#[derive(Default)]
struct Found(Vec<Danger>);

impl Found {
    fn add(&mut self, class: &'static Class, span: Option<Range<usize>>) {
        self.push(Danger {
            key: class.key,
            description: class.description,
            span,
        });
    }

    fn push(&mut self, danger: Danger) {
        match self.0.iter_mut().find(|d| d.key == danger.key) {
            Some(existing) => {
                if existing.span.is_none() {
                    existing.span = danger.span;
                }
            }
            None => self.0.push(danger),
        }
    }
}

fn structure(command: &str, scene: &Scene, level: usize, found: &mut Found, top: bool) {
    if level > MAX_NESTING {
        found.add(&classes::UNPARSED, None);
        return;
    }
    let script = script::analyse(command, scene);
    if !script.problems.is_empty() {
        tracing::debug!(problems = ?script.problems, "approval: command not fully understood");
        found.add(&classes::UNPARSED, None);
    }
    if !script.recursive_functions.is_empty() {
        found.add(&classes::FORK_BOMB, None);
    }
    for invocation in &script.invocations {
        let verdict = rules::judge(invocation, scene);
        let span = invocation.span.clone().filter(|_| top);
        for class in verdict.found {
            found.add(class, span.clone());
        }
        for code in verdict.nested {
            structure(&code, scene, level + 1, found, false);
        }
    }
}

/// Characters that can make the text a person reads differ from what bash runs.
pub fn hides_text(ch: char) -> bool {
    match ch {
        '\t' | '\n' => false,
        c if c.is_control() => true, // C0 (ESC, CR, BS…), DEL and C1
        '\u{200B}'..='\u{200F}'   // zero-width and direction marks
        | '\u{202A}'..='\u{202E}' // bidi embeddings and overrides
        | '\u{2060}'..='\u{2064}'
        | '\u{2066}'..='\u{2069}' // bidi isolates
        | '\u{FEFF}'
        | '\u{00AD}' => true,
        _ => false,
    }
}

#[cfg(test)]
mod script_tests {
    use super::*;

    #[test]
    fn a_script_is_flagged_for_the_gateways_secrets_and_proc_not_for_os_environ() {
        let scene = Scene {
            cwd: PathBuf::from("/srv/hermes/work"),
            ..Scene::of_this_process("/srv/hermes".into(), "/srv/hermes/work".into())
        };
        let keys = |script: &str| -> Vec<&'static str> {
            script_dangers(script, &scene)
                .iter()
                .map(|d| d.key)
                .collect()
        };
        assert!(
            keys("import os\nprint(os.environ['PATH'])\nopen('/srv/hermes/work/notes.txt')")
                .is_empty()
        );
        for secret in [
            "open(os.environ['HERMES_HOME'] + '/x')",
            "open('.env')",
            "open(home + '/.env').read()",
            "open('/srv/hermes/gateway.db', 'rb')",
            "yaml.safe_load(open('config.yaml'))",
            "open(os.path.expanduser('~/.hermes/auth.json'))",
        ] {
            assert_eq!(keys(secret), ["hermes-env"], "{secret}");
        }
        assert_eq!(keys("open('/proc/1/environ')"), ["process-environ"]);
        assert!(
            keys("import subprocess\nsubprocess.run('rm -rf /', shell=True)")
                .contains(&"rm-recursive")
        );
    }
}
