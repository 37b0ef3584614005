//! Reading a command the way bash will run it. The command is parsed with a real shell
//! parser (`brush-parser`) into the simple commands bash would execute — through lists,
//! pipelines, subshells, loops, functions, command and process substitutions and here-docs —
//! and each word is resolved as far as it can be before run time: quoting and escapes are
//! removed, `~`, `$HOME`, `$HERMES_HOME`, `$PWD` and `$PPID` and variables the script itself
//! sets to fixed text are filled in, and whatever is only known at run time (other variables,
//! substitutions, ANSI-C quoting) stays marked unknown so the rules can fail closed on it.
//! `cd` is followed, so a relative path is judged where it will land.

use std::collections::HashMap;
use std::ops::Range;
use std::path::PathBuf;

use brush_parser::ast::{self, CommandPrefixOrSuffixItem as Item};
use brush_parser::word::{self, Parameter, ParameterExpr, SpecialParameter, WordPiece};
use brush_parser::{Parser, ParserOptions, SourceInfo};

use super::Scene;
use super::words::{Arg, Part, Unknown, expand_braces, merge_literals, resolve};

/// How deep substitutions and nested scripts are followed before giving up (and asking).
const MAX_DEPTH: usize = 12;

/// Where a command's standard input comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Feed {
    Inherited,
    /// The output of the commands before it in a pipeline (their names, as known).
    Pipe(Vec<String>),
    HereDoc,
    HereString,
    File(Arg),
    /// `< <(…)`.
    Substitution,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    Read,
    Write,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Redirect {
    pub direction: Direction,
    pub target: Arg,
}

/// One simple command bash will run, with what is known about it.
#[derive(Debug, Clone)]
pub struct Invocation {
    /// Command word and arguments; empty for a bare assignment or redirection.
    pub argv: Vec<Arg>,
    /// `NAME=value` words before the command.
    pub assignments: Vec<(String, Arg)>,
    pub redirects: Vec<Redirect>,
    pub stdin: Feed,
    /// The working directory it runs in; `None` when only known at run time.
    pub cwd: Option<PathBuf>,
    /// Started with `&`.
    pub background: bool,
    /// Where it is in the command, in characters (top-level commands only).
    pub span: Option<Range<usize>>,
}

/// What could not be understood; each one means asking.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Problem {
    Unparsed(String),
    TooDeep,
    /// A substitution inside `${…}` (a default value or pattern that runs a command).
    HiddenSubstitution,
}

/// Everything found in a command.
#[derive(Debug, Default)]
pub struct Script {
    pub invocations: Vec<Invocation>,
    /// Functions that call themselves (a fork bomb's shape).
    pub recursive_functions: Vec<String>,
    pub problems: Vec<Problem>,
}

/// What the shell knows at a point in the script.
#[derive(Debug, Clone)]
struct State {
    /// Variables with a known value; `None` for ones the script changes at run time.
    vars: HashMap<String, Option<String>>,
    cwd: Option<PathBuf>,
}

/// A simple command being put together.
struct Parts {
    argv: Vec<Arg>,
    assignments: Vec<(String, Arg)>,
    redirects: Vec<Redirect>,
    stdin: Feed,
    span: Option<Range<usize>>,
}

impl Parts {
    /// Grow the span over a word; spans are only known for the top-level script.
    fn widen(&mut self, loc: &Option<brush_parser::TokenLocation>, depth: usize) {
        if let Some(loc) = loc.as_ref().filter(|_| depth == 0) {
            let range = loc.start.index..loc.end.index;
            self.span = Some(match self.span.take() {
                Some(s) => s.start.min(range.start)..s.end.max(range.end),
                None => range,
            });
        }
    }
}

struct Walker<'a> {
    scene: &'a Scene,
    options: ParserOptions,
    out: Script,
}

/// Parse and walk `command` as bash would run it in `scene`.
pub fn analyse(command: &str, scene: &Scene) -> Script {
    let mut vars = HashMap::new();
    vars.insert(
        "HOME".to_owned(),
        Some(scene.home.to_string_lossy().into_owned()),
    );
    vars.insert(
        "HERMES_HOME".to_owned(),
        Some(scene.hermes_home.to_string_lossy().into_owned()),
    );
    vars.insert(
        "PWD".to_owned(),
        Some(scene.cwd.to_string_lossy().into_owned()),
    );
    vars.insert("PPID".to_owned(), Some(scene.gateway_pid.to_string()));
    let mut state = State {
        vars,
        cwd: Some(scene.cwd.clone()),
    };
    let mut walker = Walker {
        scene,
        options: ParserOptions::default(),
        out: Script::default(),
    };
    walker.script(command, &mut state, 0);
    walker.out
}

impl Walker<'_> {
    fn script(&mut self, text: &str, state: &mut State, depth: usize) {
        if depth > MAX_DEPTH {
            self.out.problems.push(Problem::TooDeep);
            return;
        }
        let mut parser = Parser::new(
            std::io::BufReader::new(text.as_bytes()),
            &self.options,
            &SourceInfo::default(),
        );
        match parser.parse_program() {
            Ok(program) => {
                for list in &program.complete_commands {
                    self.compound_list(list, state, depth);
                }
            }
            Err(e) => self.out.problems.push(Problem::Unparsed(e.to_string())),
        }
    }

    /// A nested script (a substitution's text) found inside the current one.
    fn nested(&mut self, text: &str, state: &State, depth: usize) {
        let mut inner = state.clone();
        self.script(text, &mut inner, depth + 1);
    }

    fn compound_list(&mut self, list: &ast::CompoundList, state: &mut State, depth: usize) {
        for ast::CompoundListItem(and_or, separator) in &list.0 {
            let background = matches!(separator, ast::SeparatorOperator::Async);
            if background {
                // A background job runs in a subshell: its `cd` does not move us.
                let mut inner = state.clone();
                self.and_or(and_or, &mut inner, depth, true);
            } else {
                self.and_or(and_or, state, depth, false);
            }
        }
    }

    fn and_or(&mut self, list: &ast::AndOrList, state: &mut State, depth: usize, bg: bool) {
        self.pipeline(&list.first, state, depth, bg);
        for next in &list.additional {
            let (ast::AndOr::And(p) | ast::AndOr::Or(p)) = next;
            self.pipeline(p, state, depth, bg);
        }
    }

    fn pipeline(&mut self, pipeline: &ast::Pipeline, state: &mut State, depth: usize, bg: bool) {
        if pipeline.seq.len() == 1 {
            self.command(&pipeline.seq[0], state, Feed::Inherited, depth, bg);
            return;
        }
        let mut upstream: Vec<String> = Vec::new();
        for (i, command) in pipeline.seq.iter().enumerate() {
            let feed = if i == 0 {
                Feed::Inherited
            } else {
                Feed::Pipe(upstream.clone())
            };
            // Each part of a pipeline runs in a subshell of its own.
            let mut inner = state.clone();
            let first = self.out.invocations.len();
            self.command(command, &mut inner, feed, depth, bg);
            for invocation in &self.out.invocations[first..] {
                if let Some(name) = invocation.argv.first() {
                    upstream.push(name.shown());
                }
            }
        }
    }

    fn command(
        &mut self,
        command: &ast::Command,
        state: &mut State,
        feed: Feed,
        depth: usize,
        bg: bool,
    ) {
        match command {
            ast::Command::Simple(simple) => self.simple(simple, state, feed, depth, bg),
            ast::Command::Compound(compound, redirects) => {
                let first = self.out.invocations.len();
                self.compound(compound, state, depth);
                let redirects = redirects
                    .as_ref()
                    .map(|r| r.0.as_slice())
                    .unwrap_or_default();
                let mut stdin = feed;
                let mut found = Vec::new();
                for redirect in redirects {
                    self.redirect(redirect, state, depth, &mut found, &mut stdin);
                }
                // What feeds or receives the group feeds or receives every command in it.
                for invocation in &mut self.out.invocations[first..] {
                    invocation.redirects.extend(found.iter().cloned());
                    if invocation.stdin == Feed::Inherited {
                        invocation.stdin = stdin.clone();
                    }
                }
                if !found.is_empty() {
                    self.out.invocations.push(Invocation {
                        argv: Vec::new(),
                        assignments: Vec::new(),
                        redirects: found,
                        stdin,
                        cwd: state.cwd.clone(),
                        background: bg,
                        span: None,
                    });
                }
            }
            ast::Command::Function(definition) => {
                let name = definition.fname.value.clone();
                let first = self.out.invocations.len();
                let mut inner = state.clone();
                let ast::FunctionBody(body, redirects) = &definition.body;
                self.compound(body, &mut inner, depth);
                if let Some(redirects) = redirects {
                    let mut found = Vec::new();
                    let mut stdin = Feed::Inherited;
                    for redirect in &redirects.0 {
                        self.redirect(redirect, &inner, depth, &mut found, &mut stdin);
                    }
                    for invocation in &mut self.out.invocations[first..] {
                        invocation.redirects.extend(found.iter().cloned());
                    }
                }
                let calls_itself = self.out.invocations[first..]
                    .iter()
                    .any(|i| i.argv.first().and_then(Arg::text).as_deref() == Some(&name));
                if calls_itself {
                    self.out.recursive_functions.push(name);
                }
            }
            ast::Command::ExtendedTest(test) => self.extended_test(&test.expr, state, depth),
        }
    }

    fn extended_test(&mut self, expr: &ast::ExtendedTestExpr, state: &State, depth: usize) {
        use ast::ExtendedTestExpr as E;
        match expr {
            E::And(a, b) | E::Or(a, b) => {
                self.extended_test(a, state, depth);
                self.extended_test(b, state, depth);
            }
            E::Not(a) | E::Parenthesized(a) => self.extended_test(a, state, depth),
            E::UnaryTest(_, w) => {
                self.word(w, state, depth);
            }
            E::BinaryTest(_, a, b) => {
                self.word(a, state, depth);
                self.word(b, state, depth);
            }
        }
    }

    fn compound(&mut self, compound: &ast::CompoundCommand, state: &mut State, depth: usize) {
        use ast::CompoundCommand as C;
        match compound {
            C::BraceGroup(group) => self.compound_list(&group.list, state, depth),
            C::Subshell(sub) => {
                let mut inner = state.clone();
                self.compound_list(&sub.list, &mut inner, depth);
            }
            C::Arithmetic(a) => self.arithmetic(&a.expr.value, state, depth),
            C::ArithmeticForClause(f) => {
                for expr in [&f.initializer, &f.condition, &f.updater]
                    .into_iter()
                    .flatten()
                {
                    self.arithmetic(&expr.value, state, depth);
                }
                self.conditional(state, |w, s| w.compound_list(&f.body.list, s, depth));
            }
            C::ForClause(f) => {
                for value in f.values.iter().flatten() {
                    self.word(value, state, depth);
                }
                state.vars.insert(f.variable_name.clone(), None);
                self.conditional(state, |w, s| w.compound_list(&f.body.list, s, depth));
            }
            C::CaseClause(case) => {
                self.word(&case.value, state, depth);
                for item in &case.cases {
                    for pattern in &item.patterns {
                        self.word(pattern, state, depth);
                    }
                    if let Some(list) = &item.cmd {
                        self.conditional(state, |w, s| w.compound_list(list, s, depth));
                    }
                }
            }
            C::IfClause(clause) => {
                self.compound_list(&clause.condition, state, depth);
                self.conditional(state, |w, s| w.compound_list(&clause.then, s, depth));
                for branch in clause.elses.iter().flatten() {
                    self.conditional(state, |w, s| {
                        if let Some(condition) = &branch.condition {
                            w.compound_list(condition, s, depth);
                        }
                        w.compound_list(&branch.body, s, depth);
                    });
                }
            }
            C::WhileClause(ast::WhileOrUntilClauseCommand(condition, body, _))
            | C::UntilClause(ast::WhileOrUntilClauseCommand(condition, body, _)) => {
                self.conditional(state, |w, s| {
                    w.compound_list(condition, s, depth);
                    w.compound_list(&body.list, s, depth);
                });
            }
        }
    }

    /// Walk code that may or may not run: whatever it changes is unknown afterwards.
    fn conditional(&mut self, state: &mut State, walk: impl FnOnce(&mut Self, &mut State)) {
        let mut inner = state.clone();
        walk(self, &mut inner);
        for (name, value) in inner.vars {
            if state.vars.get(&name) != Some(&value) {
                state.vars.insert(name, None);
            }
        }
        if inner.cwd != state.cwd {
            state.cwd = None;
        }
    }

    fn arithmetic(&mut self, text: &str, state: &State, depth: usize) {
        if text.contains("$(") || text.contains('`') {
            self.word_text(text, state, depth);
        }
    }

    fn simple(
        &mut self,
        simple: &ast::SimpleCommand,
        state: &mut State,
        feed: Feed,
        depth: usize,
        bg: bool,
    ) {
        let mut parts = Parts {
            argv: Vec::new(),
            assignments: Vec::new(),
            redirects: Vec::new(),
            stdin: feed,
            span: None,
        };
        for item in simple.prefix.iter().flat_map(|p| p.0.iter()) {
            self.item(item, state, depth, &mut parts);
        }
        if let Some(w) = &simple.word_or_name {
            parts.widen(&w.loc, depth);
            let args = self.words(w, state, depth);
            if args.len() > 1 {
                // Brace expansion made the command word: it is only known at run time.
                parts.argv.push(Arg::unknown(Unknown::Variable));
            }
            parts.argv.extend(args);
        }
        for item in simple.suffix.iter().flat_map(|s| s.0.iter()) {
            self.item(item, state, depth, &mut parts);
        }
        let Parts {
            argv,
            assignments,
            redirects,
            stdin,
            span,
        } = parts;
        let invocation = Invocation {
            argv,
            assignments,
            redirects,
            stdin,
            cwd: state.cwd.clone(),
            background: bg,
            span,
        };
        self.apply_effects(&invocation, state);
        self.out.invocations.push(invocation);
    }

    fn item(&mut self, item: &Item, state: &State, depth: usize, parts: &mut Parts) {
        match item {
            Item::Word(w) => {
                parts.widen(&w.loc, depth);
                let args = self.words(w, state, depth);
                parts.argv.extend(args);
            }
            Item::AssignmentWord(assignment, w) => {
                parts.widen(&w.loc, depth);
                let value = self.assignment_value(&assignment.value, state, depth);
                let name = match &assignment.name {
                    ast::AssignmentName::VariableName(n) => n.clone(),
                    ast::AssignmentName::ArrayElementName(n, _) => n.clone(),
                };
                if !parts.argv.is_empty() {
                    // `declare x=…`, `export x=…`, `local x=…`: an argument as well.
                    let arg = self.word(w, state, depth);
                    parts.argv.push(arg);
                }
                parts.assignments.push((name, value));
            }
            Item::IoRedirect(redirect) => {
                self.redirect(
                    redirect,
                    state,
                    depth,
                    &mut parts.redirects,
                    &mut parts.stdin,
                );
            }
            Item::ProcessSubstitution(_, subshell) => {
                let mut inner = state.clone();
                self.compound_list(&subshell.list, &mut inner, depth);
                parts.argv.push(Arg::unknown(Unknown::Substitution));
            }
        }
    }

    /// What a command changes for the commands after it: variables and the directory.
    fn apply_effects(&self, invocation: &Invocation, state: &mut State) {
        if invocation.argv.is_empty() {
            for (name, value) in &invocation.assignments {
                state.vars.insert(name.clone(), value.text());
            }
            return;
        }
        let name = invocation.argv[0].text().unwrap_or_default();
        let args = &invocation.argv[1..];
        match name.as_str() {
            "cd" | "pushd" => {
                let target = args.iter().find(|a| {
                    a.text()
                        .is_none_or(|t| !t.starts_with('-') || t == "-" || t == "--")
                });
                state.cwd = match target {
                    None => Some(self.scene.home.clone()),
                    Some(arg) => match arg.text() {
                        Some(t) if t != "-" => state.cwd.as_ref().map(|cwd| resolve(cwd, &t)),
                        _ => None,
                    },
                };
            }
            "popd" => state.cwd = None,
            "export" | "declare" | "typeset" | "local" | "readonly" => {
                for (var, value) in &invocation.assignments {
                    state.vars.insert(var.clone(), value.text());
                }
                for arg in args {
                    if let Some(t) = arg.text()
                        && !t.starts_with('-')
                        && !t.contains('=')
                    {
                        // `declare -n`, `export X` keep or bind at run time: stop trusting it.
                        if name != "export" {
                            state.vars.insert(t, None);
                        }
                    }
                }
            }
            "read" | "unset" | "mapfile" | "readarray" | "getopts" | "printf" => {
                for arg in args {
                    if let Some(t) = arg.text()
                        && !t.starts_with('-')
                    {
                        state.vars.insert(t, None);
                    }
                }
            }
            _ => {}
        }
        // `$PWD` follows the directory.
        let pwd = state.cwd.as_ref().map(|c| c.to_string_lossy().into_owned());
        state.vars.insert("PWD".to_owned(), pwd);
        // `eval`, `source` and friends may change anything.
        if matches!(name.as_str(), "eval" | "source" | "." | "set" | "shift") {
            for value in state.vars.values_mut() {
                *value = None;
            }
            if name != "set" && name != "shift" {
                state.cwd = None;
            }
        }
    }

    fn redirect(
        &mut self,
        redirect: &ast::IoRedirect,
        state: &State,
        depth: usize,
        found: &mut Vec<Redirect>,
        stdin: &mut Feed,
    ) {
        use ast::{IoFileRedirectKind as K, IoFileRedirectTarget as T, IoRedirect as R};
        match redirect {
            R::File(fd, kind, target) => {
                let direction = match kind {
                    K::Read => Direction::Read,
                    K::DuplicateInput => Direction::Read,
                    K::Write | K::Append | K::Clobber | K::ReadAndWrite | K::DuplicateOutput => {
                        Direction::Write
                    }
                };
                let into_stdin = direction == Direction::Read && fd.is_none_or(|fd| fd == 0);
                match target {
                    T::Filename(w) => {
                        let arg = self.word(w, state, depth);
                        if into_stdin && matches!(kind, K::Read) {
                            *stdin = Feed::File(arg.clone());
                        }
                        found.push(Redirect {
                            direction,
                            target: arg,
                        });
                    }
                    T::Duplicate(w) => {
                        let arg = self.word(w, state, depth);
                        // `>&2` duplicates a descriptor; `>& file` writes a file.
                        let is_fd = arg
                            .text()
                            .is_some_and(|t| t == "-" || t.chars().all(|c| c.is_ascii_digit()));
                        if !is_fd {
                            found.push(Redirect {
                                direction,
                                target: arg,
                            });
                        }
                    }
                    T::Fd(_) => {}
                    T::ProcessSubstitution(_, subshell) => {
                        let mut inner = state.clone();
                        self.compound_list(&subshell.list, &mut inner, depth);
                        if into_stdin {
                            *stdin = Feed::Substitution;
                        }
                    }
                }
            }
            R::HereDocument(fd, doc) => {
                if doc.requires_expansion {
                    // Quotes are plain text in a here-doc; only `$`, `` ` `` and `\` act.
                    let escaped = doc.doc.value.replace('\'', "\\'").replace('"', "\\\"");
                    self.word_text(&escaped, state, depth);
                }
                if fd.is_none_or(|fd| fd == 0) {
                    *stdin = Feed::HereDoc;
                }
            }
            R::HereString(fd, w) => {
                self.word(w, state, depth);
                if fd.is_none_or(|fd| fd == 0) {
                    *stdin = Feed::HereString;
                }
            }
            R::OutputAndError(w, _) => {
                let arg = self.word(w, state, depth);
                found.push(Redirect {
                    direction: Direction::Write,
                    target: arg,
                });
            }
        }
    }

    fn assignment_value(
        &mut self,
        value: &ast::AssignmentValue,
        state: &State,
        depth: usize,
    ) -> Arg {
        match value {
            ast::AssignmentValue::Scalar(w) => self.word(w, state, depth),
            ast::AssignmentValue::Array(items) => {
                for (key, w) in items {
                    if let Some(key) = key {
                        self.word(key, state, depth);
                    }
                    self.word(w, state, depth);
                }
                Arg::unknown(Unknown::Variable)
            }
        }
    }

    fn word(&mut self, word: &ast::Word, state: &State, depth: usize) -> Arg {
        self.word_text(&word.value, state, depth)
    }

    /// A command's word, brace expansion included: `{/,}etc/passwd` is two words, and
    /// `{rm,-rf,~}` is three.
    fn words(&mut self, word: &ast::Word, state: &State, depth: usize) -> Vec<Arg> {
        let text = &word.value;
        if !(text.contains('{') && (text.contains(',') || text.contains(".."))) {
            return vec![self.word(word, state, depth)];
        }
        let expanded = word::parse_brace_expansions(text, &self.options)
            .ok()
            .flatten()
            .and_then(|parts| expand_braces(&parts));
        match expanded {
            Some(words) if words.len() > 1 => words
                .iter()
                .map(|w| self.word_text(w, state, depth))
                .collect(),
            Some(_) => vec![self.word(word, state, depth)],
            // Too many words to list: what they are is only known at run time.
            None => vec![Arg::unknown(Unknown::Variable)],
        }
    }

    /// Resolve a word's text; substitutions in it are walked as scripts of their own.
    fn word_text(&mut self, text: &str, state: &State, depth: usize) -> Arg {
        match word::parse(text, &self.options) {
            Ok(pieces) => {
                let mut arg = Arg::default();
                for piece in pieces {
                    self.piece(&piece.piece, state, depth, &mut arg);
                }
                merge_literals(arg)
            }
            Err(e) => {
                self.out.problems.push(Problem::Unparsed(e.to_string()));
                Arg::unknown(Unknown::Substitution)
            }
        }
    }

    fn piece(&mut self, piece: &WordPiece, state: &State, depth: usize, arg: &mut Arg) {
        match piece {
            WordPiece::Text(s) | WordPiece::SingleQuotedText(s) => {
                arg.parts.push(Part::Lit(s.clone()));
            }
            WordPiece::EscapeSequence(s) => {
                let unescaped = s.strip_prefix('\\').unwrap_or(s);
                if unescaped != "\n" {
                    arg.parts.push(Part::Lit(unescaped.to_owned()));
                }
            }
            WordPiece::AnsiCQuotedText(_) => arg.parts.push(Part::Unknown(Unknown::AnsiC)),
            WordPiece::DoubleQuotedSequence(inner)
            | WordPiece::GettextDoubleQuotedSequence(inner) => {
                for p in inner {
                    self.piece(&p.piece, state, depth, arg);
                }
            }
            WordPiece::TildePrefix(user) => {
                if user.is_empty() {
                    arg.parts
                        .push(Part::Lit(self.scene.home.to_string_lossy().into_owned()));
                } else {
                    arg.parts.push(Part::Unknown(Unknown::Variable));
                }
            }
            WordPiece::ParameterExpansion(expr) => {
                arg.parts.push(self.parameter(expr, state));
            }
            WordPiece::CommandSubstitution(inner)
            | WordPiece::BackquotedCommandSubstitution(inner) => {
                self.nested(inner, state, depth);
                arg.parts.push(Part::Unknown(Unknown::Substitution));
            }
            WordPiece::ArithmeticExpression(expr) => {
                self.arithmetic(&expr.value, state, depth);
                arg.parts.push(Part::Unknown(Unknown::Variable));
            }
        }
    }

    fn parameter(&mut self, expr: &ParameterExpr, state: &State) -> Part {
        let rendered = format!("{expr:?}");
        // A default value or pattern is text that may hold `$(…)`: it would run at expansion.
        if rendered.contains("$(") || rendered.contains('`') || rendered.contains("<(") {
            self.out.problems.push(Problem::HiddenSubstitution);
            return Part::Unknown(Unknown::Substitution);
        }
        match expr {
            ParameterExpr::Parameter {
                parameter: Parameter::Named(name),
                indirect: false,
            } => match state.vars.get(name) {
                Some(Some(value)) => Part::Lit(value.clone()),
                _ => Part::Unknown(Unknown::Variable),
            },
            ParameterExpr::Parameter {
                parameter:
                    Parameter::Special(
                        SpecialParameter::ProcessId | SpecialParameter::LastBackgroundProcessId,
                    ),
                indirect: false,
            } => Part::Unknown(Unknown::OwnPid),
            _ => Part::Unknown(Unknown::Variable),
        }
    }
}
