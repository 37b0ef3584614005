//! The file tools with Hermes' names and arguments: `read_file` (numbered lines, ranges,
//! a size cap, no binaries), `write_file`, `patch` (an exact string replaced, unique unless
//! `replace_all`, or a unified diff applied) and `search_files` (content by regex or names
//! by glob, `.gitignore` respected). Paths are relative to `terminal.cwd` (`~` is the home).
//! The filesystem work runs off the runtime's threads. A read of the gateway's secrets, or a
//! write to a sensitive place (shell rc files, `~/.ssh`, `/etc`, the gateway's home…), passes
//! the approval gate as the command it amounts to (`cat <path>`, `cat > <path>`), so the
//! person decides as they would for the terminal.

mod edit;
mod read;
mod search;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value;

use super::{ToolContext, ToolResult, gate};
use crate::approval::ApprovalBroker;

pub use edit::{PatchTool, WriteFileTool};
pub use read::ReadFileTool;
pub use search::SearchFilesTool;

/// What the file tools share: where relative paths start, and the approval gate.
pub struct Files {
    pub cwd: PathBuf,
    pub approvals: Arc<ApprovalBroker>,
}

impl Files {
    /// `path` as an absolute path: `~/…` in the home, relative ones in `terminal.cwd`.
    fn resolve(&self, path: &str) -> PathBuf {
        let path = path.trim();
        if (path == "~" || path.starts_with("~/"))
            && let Some(home) = std::env::var_os("HOME")
        {
            return PathBuf::from(home).join(path.trim_start_matches('~').trim_start_matches('/'));
        }
        let path = Path::new(path);
        if path.is_absolute() {
            path.to_path_buf()
        } else {
            self.cwd.join(path)
        }
    }

    /// The approval gate for reading (`write` false) or writing `path`.
    async fn gate(&self, path: &Path, write: bool, ctx: &ToolContext) -> Option<ToolResult> {
        let quoted = shell_quote(&path.to_string_lossy());
        let command = if write {
            format!("cat > {quoted}")
        } else {
            format!("cat {quoted}")
        };
        gate(&self.approvals, &command, ctx, &self.cwd, false).await
    }
}

/// `text` as one single-quoted shell word.
fn shell_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', "'\\''"))
}

/// The string argument `name`, when given and not empty.
fn text_arg<'a>(args: &'a Value, name: &str) -> Option<&'a str> {
    args.get(name)
        .and_then(Value::as_str)
        .filter(|s| !s.trim().is_empty())
}

/// A number argument, as Hermes' tools take them (a number or its text).
fn number_arg(args: &Value, name: &str) -> Option<u64> {
    match args.get(name)? {
        Value::Number(n) => n.as_u64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

/// A file's first bytes look binary (a NUL among them, as git and ripgrep judge it).
fn looks_binary(head: &[u8]) -> bool {
    head.iter().take(8 * 1024).any(|&b| b == 0)
}

/// Run blocking filesystem work off the runtime's threads; a panic in it is an error result.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, String> + Send + 'static,
) -> Result<T, String> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| format!("the file work failed: {e}"))?
}

#[cfg(test)]
mod tests;
