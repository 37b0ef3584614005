//! `search_files {pattern, target, path, file_glob, limit, offset, output_mode, context}`:
//! `target: content` finds lines matching a regex (`output_mode` content, files_only or
//! count), `target: files` finds files whose name matches a glob. The walk is `ignore`'s
//! (ripgrep's): `.gitignore` and hidden files respected, binaries and large files skipped,
//! and bounded in files, matches and time; the turn's cancellation stops it.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use futures_util::future::BoxFuture;
use schemars::JsonSchema;
use serde::Deserialize;
use tokio_util::sync::CancellationToken;

use super::{Files, blocking, given, looks_binary};
use crate::tool::{ToolContext, ToolResult, TypedTool};

const DEFAULT_LIMIT: u64 = 50;
const MAX_LIMIT: u64 = 500;
/// Files larger than this are not searched inside.
const MAX_FILE_BYTES: u64 = 5 * 1024 * 1024;
/// A walk stops after this many files, or this long.
const MAX_FILES: usize = 50_000;
const MAX_TIME: Duration = Duration::from_secs(20);
/// A matching line is shown up to this many characters.
const MAX_LINE_CHARS: usize = 300;

pub struct SearchFilesTool(pub Arc<Files>);

/// `search_files`'s arguments.
#[derive(Deserialize, JsonSchema)]
pub struct SearchArgs {
    /// A regex (content) or a glob such as *.rs (files).
    pattern: String,
    target: Option<SearchTarget>,
    /// Where to search (default: the working directory).
    path: Option<String>,
    /// content: only files whose name matches this glob (e.g. *.py).
    file_glob: Option<String>,
    /// Most results (default 50).
    limit: Option<i64>,
    /// Results to skip (for the next page).
    offset: Option<i64>,
    output_mode: Option<OutputMode>,
    /// content: lines shown around each match (at most 5).
    context: Option<i64>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
enum SearchTarget {
    Content,
    Files,
}

#[derive(Deserialize, JsonSchema, Clone, Copy, PartialEq)]
#[serde(rename_all = "snake_case")]
enum OutputMode {
    Content,
    FilesOnly,
    Count,
}

impl TypedTool for SearchFilesTool {
    type Args = SearchArgs;
    const NAME: &'static str = "search_files";
    const TOOLSET: &'static str = "file";

    fn description(&self) -> String {
        "Search files. target=content (default): lines matching the regex `pattern`, as path:line:text. target=files: files whose name matches the glob `pattern` (newest first). .gitignore'd and hidden files are skipped.".into()
    }

    fn only_reads(&self, _args: &SearchArgs) -> bool {
        true
    }

    fn call<'a>(&'a self, args: SearchArgs, ctx: &'a ToolContext) -> BoxFuture<'a, ToolResult> {
        Box::pin(async move {
            let query = match Query::from_args(args, &self.0) {
                Ok(q) => q,
                Err(e) => return ToolResult::text(format!("error: {e}")),
            };
            let mut query = query;
            query.root = match self.0.checked(&query.root, super::Access::Read) {
                Ok(real) => real,
                Err(e) => return ToolResult::text(format!("error: {e}")),
            };
            if let Some(refused) = self.0.gate(&query.root, false, ctx).await {
                return refused;
            }
            let cancel = ctx.cancel.clone();
            let files = self.0.clone();
            match blocking(&ctx.cancel, move || Ok(query.run(&cancel, &files))).await {
                Ok(text) => ToolResult::text(text),
                Err(e) => ToolResult::text(format!("error: {e}")),
            }
        })
    }
}

enum Target {
    Content {
        regex: regex::Regex,
        mode: OutputMode,
        context: usize,
        file_glob: Option<glob::Pattern>,
    },
    Files(glob::Pattern),
}

struct Query {
    root: std::path::PathBuf,
    target: Target,
    limit: usize,
    offset: usize,
}

impl Query {
    fn from_args(args: SearchArgs, files: &Files) -> Result<Query, String> {
        let pattern = given(&args.pattern).ok_or("`pattern` is required")?;
        let root = files.resolve(args.path.as_deref().and_then(given).unwrap_or("."));
        let glob = |text: &str| {
            glob::Pattern::new(text).map_err(|e| format!("{text:?} is not a glob: {e}"))
        };
        let count = |n: Option<i64>, default: u64| n.map_or(default, |n| n.max(0).unsigned_abs());
        let target = match args.target.unwrap_or(SearchTarget::Content) {
            SearchTarget::Files => Target::Files(glob(pattern)?),
            SearchTarget::Content => Target::Content {
                regex: regex::RegexBuilder::new(pattern)
                    .size_limit(1 << 20)
                    .build()
                    .map_err(|e| format!("{pattern:?} is not a regex: {e}"))?,
                mode: args.output_mode.unwrap_or(OutputMode::Content),
                context: count(args.context, 0).min(5) as usize,
                file_glob: args
                    .file_glob
                    .as_deref()
                    .and_then(given)
                    .map(glob)
                    .transpose()?,
            },
        };
        Ok(Query {
            root,
            target,
            limit: count(args.limit, DEFAULT_LIMIT).clamp(1, MAX_LIMIT) as usize,
            offset: count(args.offset, 0) as usize,
        })
    }

    /// Search as the query says and give the page asked for.
    fn run(&self, cancel: &CancellationToken, files: &Files) -> String {
        if !self.root.exists() {
            return format!("error: {} does not exist", self.root.display());
        }
        let Some(mut found) = self.walk(cancel, files) else {
            return "stopped: the turn was stopped".into();
        };
        if let Target::Files(_) = self.target {
            found.newest_first();
        }
        self.page(found)
    }

    /// Walk the tree below the root, bounded in files and time, and gather what matches;
    /// `None` when the turn was stopped.
    fn walk(&self, cancel: &CancellationToken, files: &Files) -> Option<Found> {
        let started = Instant::now();
        let mut found = Found::default();
        let mut walked = 0usize;
        let wanted = self.offset + self.limit;
        // Never into a protected place, whatever ignore files say: the walk skips them.
        let scene = files.scene.clone();
        let walk = ignore::WalkBuilder::new(&self.root)
            .follow_links(false)
            .filter_entry(move |entry| {
                super::refusal(entry.path(), super::Access::Read, &scene).is_none()
            })
            .build();
        for entry in walk {
            if cancel.is_cancelled() {
                return None;
            }
            walked += 1;
            if walked > MAX_FILES {
                found.stopped = Some(format!("stopped after {MAX_FILES} files"));
                break;
            }
            if started.elapsed() > MAX_TIME {
                found.stopped = Some(format!("stopped after {}s", MAX_TIME.as_secs()));
                break;
            }
            let Ok(entry) = entry else { continue };
            if !entry.file_type().is_some_and(|t| t.is_file()) {
                continue;
            }
            if self.look_at(&entry, &mut found, wanted) {
                break;
            }
        }
        Some(found)
    }

    /// Look at one file of the walk, keeping what matches in `found`; `true` when enough
    /// results are in (`wanted`) and the walk is to stop.
    fn look_at(&self, entry: &ignore::DirEntry, found: &mut Found, wanted: usize) -> bool {
        let path = entry.path();
        let shown = path
            .strip_prefix(&self.root)
            .unwrap_or(path)
            .display()
            .to_string();
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
        match &self.target {
            Target::Files(pattern) => {
                if name.as_deref().is_some_and(|n| pattern.matches(n)) || pattern.matches(&shown) {
                    let modified = entry
                        .metadata()
                        .ok()
                        .and_then(|m| m.modified().ok())
                        .unwrap_or(SystemTime::UNIX_EPOCH);
                    found.named.push((modified, shown));
                }
                false
            }
            Target::Content {
                regex,
                mode,
                context,
                file_glob,
            } => {
                if let Some(g) = file_glob
                    && !name.as_deref().is_some_and(|n| g.matches(n))
                    && !g.matches(&shown)
                {
                    return false;
                }
                let hits = search_file(path, regex, *context);
                found.take_hits(shown, hits, *mode, wanted)
            }
        }
    }

    /// The page of `found` the offset and limit ask for, with a note when there is more.
    fn page(&self, found: Found) -> String {
        let Found {
            results,
            total,
            stopped,
            ..
        } = found;
        let page: Vec<String> = results
            .into_iter()
            .skip(self.offset)
            .take(self.limit)
            .collect();
        if page.is_empty() {
            return match stopped {
                Some(why) => format!("no matches ({why})"),
                None => "no matches".into(),
            };
        }
        let mut out = page.join("\n");
        let next = self.offset + page.len();
        if total > next || stopped.is_some() {
            out.push_str(&format!(
                "\n[… {}: search again with offset {next} for more]",
                stopped.unwrap_or_else(|| format!("{total} results in all"))
            ));
        }
        out
    }
}

/// What a search found so far: the results in order (for `target: files`, the files named
/// with when each was changed, put in order at the end), how many in all, and why the walk
/// stopped early, if it did.
#[derive(Default)]
struct Found {
    results: Vec<String>,
    named: Vec<(SystemTime, String)>,
    total: usize,
    stopped: Option<String>,
}

impl Found {
    /// Keep the `hits` of file `shown` as `mode` says; `true` when enough results are in
    /// (`wanted`: a count goes through every file).
    fn take_hits(
        &mut self,
        shown: String,
        hits: Vec<String>,
        mode: OutputMode,
        wanted: usize,
    ) -> bool {
        if hits.is_empty() {
            return false;
        }
        match mode {
            OutputMode::Count => {
                self.total += 1;
                self.results.push(format!("{shown}: {}", hits.len()));
            }
            OutputMode::FilesOnly => {
                self.total += 1;
                self.results.push(shown);
            }
            OutputMode::Content => {
                for hit in hits {
                    self.total += 1;
                    if self.results.len() < wanted {
                        self.results.push(format!("{shown}:{hit}"));
                    }
                }
            }
        }
        if self.results.len() >= wanted && mode != OutputMode::Count {
            self.stopped = Some("more results may follow".into());
            return true;
        }
        false
    }

    /// The files named become the results, the most recently changed first.
    fn newest_first(&mut self) {
        self.named
            .sort_by_key(|(modified, _)| std::cmp::Reverse(*modified));
        self.total = self.named.len();
        self.results = std::mem::take(&mut self.named)
            .into_iter()
            .map(|(_, n)| n)
            .collect();
    }
}

/// The matching lines of one text file (`line:text`, with `context` lines around each as
/// `line-text`); none for a binary or large file.
fn search_file(path: &Path, regex: &regex::Regex, context: usize) -> Vec<String> {
    let Ok(meta) = std::fs::metadata(path) else {
        return Vec::new();
    };
    if meta.len() > MAX_FILE_BYTES {
        return Vec::new();
    }
    // A file swapped for a link since the walk saw it is not read.
    let Ok(bytes) = super::open::read(path) else {
        return Vec::new();
    };
    if looks_binary(&bytes) {
        return Vec::new();
    }
    let text = String::from_utf8_lossy(&bytes);
    let lines: Vec<&str> = text.lines().collect();
    let cut = |text: &str| -> String {
        let mut short: String = text.chars().take(MAX_LINE_CHARS).collect();
        if short.len() < text.len() {
            short.push('…');
        }
        short
    };
    let mut hits = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        if !regex.is_match(line) {
            continue;
        }
        if context == 0 {
            hits.push(format!("{}:{}", i + 1, cut(line)));
            continue;
        }
        let from = i.saturating_sub(context);
        let to = (i + context).min(lines.len() - 1);
        let block: Vec<String> = (from..=to)
            .map(|j| {
                let sep = if j == i { ':' } else { '-' };
                format!("{}{sep}{}", j + 1, cut(lines[j]))
            })
            .collect();
        hits.push(block.join("\n"));
    }
    hits
}
