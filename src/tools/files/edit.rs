//! `write_file {path, content}` (creates the directories, replaces the file) and `patch`:
//! `mode: replace` swaps `old_string` for `new_string` (it must be found exactly once unless
//! `replace_all`), `mode: patch` applies a unified diff (`patch`). Both answer with the
//! change as a unified diff, shortened.

use std::path::Path;
use std::sync::Arc;

use futures_util::future::BoxFuture;
use schemars::JsonSchema;
use serde::Deserialize;

use super::{Files, blocking, given, looks_binary};
use crate::tool::{ToolContext, ToolResult, TypedTool};

/// The largest file these tools write or edit.
const MAX_FILE_BYTES: usize = 10 * 1024 * 1024;
/// How much of a change's diff the model is shown.
const MAX_DIFF_CHARS: usize = 4_000;

pub struct WriteFileTool(pub Arc<Files>);

/// `write_file`'s arguments.
#[derive(Deserialize, JsonSchema)]
pub struct WriteFileArgs {
    /// File path (relative to the working directory, or absolute).
    path: String,
    /// The whole new content.
    content: String,
}

impl TypedTool for WriteFileTool {
    type Args = WriteFileArgs;
    const NAME: &'static str = "write_file";
    const TOOLSET: &'static str = "file";

    fn description(&self) -> String {
        "Write a text file, replacing it if it exists (directories are created). For small changes to an existing file use patch.".into()
    }

    fn file_scope(&self, args: &WriteFileArgs) -> Option<std::path::PathBuf> {
        self.0.scope(&args.path)
    }

    fn call<'a>(&'a self, args: WriteFileArgs, ctx: &'a ToolContext) -> BoxFuture<'a, ToolResult> {
        Box::pin(async move {
            let Some(path) = given(&args.path) else {
                return ToolResult::text("error: `path` is required");
            };
            let content = args.content;
            if content.len() > MAX_FILE_BYTES {
                return ToolResult::text(format!(
                    "error: the content is larger than {MAX_FILE_BYTES} bytes"
                ));
            }
            let typed = self.0.resolve(path);
            let path = match self.0.checked(&typed, super::Access::Write) {
                Ok(real) => real,
                Err(e) => return ToolResult::text(format!("error: {e}")),
            };
            if let Some(refused) = self.0.gate(&path, true, ctx).await {
                return refused;
            }
            if ctx.cancel.is_cancelled() {
                return ToolResult {
                    text: "The file was NOT written: the task was stopped.".into(),
                    cancelled: true,
                };
            }
            let shown = path.display().to_string();
            let written = blocking(&ctx.cancel, move || {
                let before = std::fs::metadata(&path).ok();
                super::open::write(&path, content.as_bytes()).map_err(|e| e.to_string())?;
                Ok((before.is_some(), content.len(), content.lines().count()))
            })
            .await;
            ToolResult::text(match written {
                Ok((replaced, bytes, lines)) => format!(
                    "{} {shown}: {bytes} bytes, {lines} lines",
                    if replaced { "replaced" } else { "created" }
                ),
                Err(e) => format!("error: cannot write {shown}: {e}"),
            })
        })
    }
}

pub struct PatchTool(pub Arc<Files>);

/// `patch`'s arguments.
#[derive(Deserialize, JsonSchema)]
pub struct PatchArgs {
    /// replace (default) or patch.
    mode: Option<PatchMode>,
    /// File path.
    path: String,
    /// replace: the exact text to replace.
    old_string: Option<String>,
    /// replace: the text to put in its place.
    new_string: Option<String>,
    /// replace: every occurrence (default: it must be unique).
    replace_all: Option<bool>,
    /// patch: the unified diff.
    patch: Option<String>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
enum PatchMode {
    Replace,
    Patch,
}

impl TypedTool for PatchTool {
    type Args = PatchArgs;
    const NAME: &'static str = "patch";
    const TOOLSET: &'static str = "file";

    fn description(&self) -> String {
        "Edit a text file. mode=replace: replace old_string (copied exactly from the file, found once unless replace_all) with new_string. mode=patch: apply a unified diff (--- a/file, +++ b/file, @@ hunks). Answers with the change as a diff.".into()
    }

    fn file_scope(&self, args: &PatchArgs) -> Option<std::path::PathBuf> {
        self.0.scope(&args.path)
    }

    fn call<'a>(&'a self, args: PatchArgs, ctx: &'a ToolContext) -> BoxFuture<'a, ToolResult> {
        Box::pin(async move {
            let Some(path) = given(&args.path) else {
                return ToolResult::text("error: `path` is required");
            };
            let typed = self.0.resolve(path);
            let edit = match Edit::from_args(args) {
                Ok(edit) => edit,
                Err(e) => return ToolResult::text(format!("error: {e}")),
            };
            let path = match self.0.checked(&typed, super::Access::Write) {
                Ok(real) => real,
                Err(e) => return ToolResult::text(format!("error: {e}")),
            };
            if let Some(refused) = self.0.gate(&path, true, ctx).await {
                return refused;
            }
            if ctx.cancel.is_cancelled() {
                return ToolResult {
                    text: "The file was NOT changed: the task was stopped.".into(),
                    cancelled: true,
                };
            }
            let shown = path.display().to_string();
            match blocking(&ctx.cancel, move || edit.apply(&path)).await {
                Ok(diff) => ToolResult::text(format!("patched {shown}\n{diff}")),
                Err(e) => ToolResult::text(format!("error: {shown} was not changed: {e}")),
            }
        })
    }
}

/// One `patch` call's change.
enum Edit {
    Replace { old: String, new: String, all: bool },
    Diff(String),
}

impl Edit {
    fn from_args(args: PatchArgs) -> Result<Edit, String> {
        // Without a mode, a diff alone is a patch.
        let mode = args
            .mode
            .unwrap_or(if args.patch.is_some() && args.old_string.is_none() {
                PatchMode::Patch
            } else {
                PatchMode::Replace
            });
        match mode {
            PatchMode::Replace => {
                let old = args.old_string.ok_or("replace needs `old_string`")?;
                if old.is_empty() {
                    return Err(
                        "`old_string` is empty; use write_file to write a whole file".into(),
                    );
                }
                Ok(Edit::Replace {
                    old,
                    new: args.new_string.ok_or("replace needs `new_string`")?,
                    all: args.replace_all.unwrap_or(false),
                })
            }
            PatchMode::Patch => Ok(Edit::Diff(args.patch.ok_or("mode patch needs `patch`")?)),
        }
    }

    /// Apply to the file at `path`; the change as a diff.
    fn apply(self, path: &Path) -> Result<String, String> {
        let size = std::fs::metadata(path).map_err(|e| e.to_string())?.len();
        if size > MAX_FILE_BYTES as u64 {
            return Err(format!("it is larger than {MAX_FILE_BYTES} bytes"));
        }
        let bytes = super::open::read(path).map_err(|e| e.to_string())?;
        if looks_binary(&bytes) {
            return Err("it is a binary file".into());
        }
        let before = String::from_utf8(bytes).map_err(|_| "it is not UTF-8 text")?;
        let after = match self {
            Edit::Replace { old, new, all } => {
                let found = before.matches(old.as_str()).count();
                match (found, all) {
                    (0, _) => {
                        return Err(
                            "old_string was not found (it must match the file exactly, spaces and line breaks included; read_file shows the text)"
                                .into(),
                        );
                    }
                    (n, _) if n == 1 || all => {
                        // The result's size is known before it is built.
                        let grown = before.len() - n * old.len() + n * new.len();
                        if grown > MAX_FILE_BYTES {
                            return Err(format!(
                                "the result would be larger than {MAX_FILE_BYTES} bytes"
                            ));
                        }
                        before.replace(old.as_str(), &new)
                    }
                    (n, _) => {
                        return Err(format!(
                            "old_string is found {n} times; add surrounding lines to make it unique, or set replace_all"
                        ));
                    }
                }
            }
            Edit::Diff(text) => {
                let patch = diffy::Patch::from_str(&text)
                    .map_err(|e| format!("the diff cannot be read: {e}"))?;
                diffy::apply(&before, &patch)
                    .map_err(|e| format!("the diff does not apply: {e}"))?
            }
        };
        if after == before {
            return Ok("(no change)".into());
        }
        super::open::write(path, after.as_bytes()).map_err(|e| e.to_string())?;
        let diff = diffy::create_patch(&before, &after).to_string();
        let mut shown: String = diff.chars().take(MAX_DIFF_CHARS).collect();
        if shown.len() < diff.len() {
            shown.push_str("\n[… diff shortened]");
        }
        Ok(shown)
    }
}
