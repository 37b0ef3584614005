//! The file tools with Hermes' names and arguments: `read_file` (numbered lines, ranges,
//! a size cap, no binaries), `write_file`, `patch` (an exact string replaced, unique unless
//! `replace_all`, or a unified diff applied) and `search_files` (content by regex or names
//! by glob, `.gitignore` respected). Paths are relative to `terminal.cwd` (`~` is the home).
//! The filesystem work runs off the runtime's threads and stops waiting when the turn is
//! stopped. Every path is judged as written and as it really is (links followed): some
//! places are never for these tools (`/proc`, `/sys`, `/dev`, the gateway's own home,
//! private keys and credentials, the gateway's binary and service units, anything that is
//! not a regular file); a write elsewhere that is sensitive (shell rc files, `/etc`…)
//! passes the approval gate as the command it amounts to (`cat > <path>`), so the person
//! decides as they would for the terminal.

mod edit;
mod open;
mod read;
mod search;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::{ToolContext, ToolResult, gate_with};
use crate::approval::detect::{Danger, classes};
use crate::approval::{ApprovalBroker, Scene};

pub use edit::{PatchTool, WriteFileTool};
pub use read::ReadFileTool;
pub use search::SearchFilesTool;

/// What the file tools share: where relative paths start, the places to protect, and the
/// approval gate.
pub struct Files {
    pub cwd: PathBuf,
    pub approvals: Arc<ApprovalBroker>,
    /// The home, the gateway's home and the working directory, resolved.
    pub scene: Scene,
    /// `terminal.confine_writes`: the directories (resolved) a write may go to without
    /// asking; `None` when writes are not confined.
    pub roots: Option<Vec<PathBuf>>,
}

/// Reading or writing.
#[derive(Clone, Copy, PartialEq)]
enum Access {
    Read,
    Write,
}

impl Files {
    pub fn new(cwd: PathBuf, hermes_home: PathBuf, approvals: Arc<ApprovalBroker>) -> Self {
        let real = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
        let mut scene = Scene::of_this_process(real(&hermes_home), real(&cwd));
        scene.home = real(&scene.home);
        // The other gateways' homes in this process (profiles) are as off limits.
        scene.other_homes = approvals
            .scene()
            .other_homes
            .iter()
            .map(|h| real(h))
            .collect();
        Files {
            cwd: scene.cwd.clone(),
            approvals,
            scene,
            roots: None,
        }
    }

    /// Writes outside the working directory and `allowed` wait for approval.
    pub fn confined(mut self, allowed: &[PathBuf]) -> Self {
        let real = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
        let mut roots = vec![self.cwd.clone()];
        roots.extend(allowed.iter().map(|p| real(p)));
        self.roots = Some(roots);
        self
    }

    /// The path to work on (links followed), or why not, for the model.
    fn checked(&self, typed: &Path, access: Access) -> Result<PathBuf, String> {
        let real = real_path(typed, access)?;
        for path in [typed, real.as_path()] {
            if let Some(why) = refusal(path, access, &self.scene) {
                tracing::warn!(path = %path.display(), "tools: a file tool was refused a protected place");
                return Err(format!(
                    "{} is off limits to the file tools: {why}",
                    typed.display()
                ));
            }
        }
        match std::fs::metadata(&real) {
            Ok(meta) if !(meta.is_file() || meta.is_dir() && access == Access::Read) => {
                Err(format!("{} is not a regular file", typed.display()))
            }
            _ => Ok(real),
        }
    }
    /// The file a call's `path` names, links followed (as it would be written), for
    /// running calls on different files together.
    fn scope(&self, path: &str) -> Option<PathBuf> {
        let typed = self.resolve(path);
        Some(real_path(&typed, Access::Write).unwrap_or(typed))
    }

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
        let outside = write
            && self
                .roots
                .as_ref()
                .is_some_and(|roots| !roots.iter().any(|root| path.starts_with(root)));
        let extra = if outside {
            vec![Danger::of(&classes::WRITE_OUTSIDE)]
        } else {
            Vec::new()
        };
        gate_with(&self.approvals, &command, extra, ctx, (&self.cwd, false)).await
    }
}

/// Where `typed` really is: links followed; for a file to be written that does not exist
/// yet, its nearest existing directory resolved and the rest added.
fn real_path(typed: &Path, access: Access) -> Result<PathBuf, String> {
    if let Ok(real) = std::fs::canonicalize(typed) {
        return Ok(real);
    }
    if access == Access::Read || std::fs::symlink_metadata(typed).is_ok() {
        // Missing, or a link to nowhere (writing through it would create its target).
        return Err(format!("{}: no such file", typed.display()));
    }
    let mut existing = typed.to_path_buf();
    let mut rest = Vec::new();
    while !existing.exists() {
        let name = existing
            .file_name()
            .ok_or_else(|| format!("{}: no such place", typed.display()))?
            .to_owned();
        rest.push(name);
        if !existing.pop() {
            break;
        }
    }
    let mut real = std::fs::canonicalize(&existing).map_err(|e| e.to_string())?;
    real.extend(rest.iter().rev());
    Ok(real)
}

/// Why the file tools may not touch `path` at all, if so.
fn refusal(path: &Path, access: Access, scene: &Scene) -> Option<&'static str> {
    use crate::approval::detect::{Place, protected_places};
    let text = path.to_string_lossy();
    if ["/proc", "/sys", "/dev"]
        .iter()
        .any(|p| text == *p || text.starts_with(&format!("{p}/")))
    {
        return Some("system pseudo-files and devices");
    }
    if scene.in_gateway_home(path) {
        return Some("the gateway's own files (its secrets, database, memories)");
    }
    const PRIVATE: &[&str] = &[
        ".ssh",
        ".gnupg",
        ".aws",
        ".azure",
        ".kube",
        ".docker/config.json",
        ".config/gcloud",
        ".password-store",
        ".netrc",
        ".git-credentials",
        ".pgpass",
    ];
    let places = protected_places(path, scene);
    if PRIVATE.iter().any(|p| path.starts_with(scene.home.join(p)))
        || places
            .iter()
            .any(|p| matches!(p, Place::Ssh | Place::Credentials | Place::BlockDevice))
    {
        return Some("private keys and credentials");
    }
    if access == Access::Write {
        let gateway = std::env::current_exe().ok();
        if gateway.as_deref() == Some(path) {
            return Some("the gateway's own program");
        }
        let units = [
            scene.home.join(".config/systemd"),
            PathBuf::from("/etc/systemd"),
            PathBuf::from("/lib/systemd"),
            PathBuf::from("/usr/lib/systemd"),
        ];
        if units.iter().any(|u| path.starts_with(u)) {
            return Some("service units");
        }
    }
    None
}

/// `text` as one single-quoted shell word.
fn shell_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', "'\\''"))
}

/// A path argument, unless it is blank.
fn given(path: &str) -> Option<&str> {
    Some(path).filter(|p| !p.trim().is_empty())
}

/// A file's first bytes look binary (a NUL among them, as git and ripgrep judge it).
fn looks_binary(head: &[u8]) -> bool {
    head.iter().take(8 * 1024).any(|&b| b == 0)
}

/// Run blocking filesystem work off the runtime's threads; a panic in it is an error
/// result, and a stopped turn stops waiting for it.
async fn blocking<T: Send + 'static>(
    cancel: &tokio_util::sync::CancellationToken,
    work: impl FnOnce() -> Result<T, String> + Send + 'static,
) -> Result<T, String> {
    tokio::select! {
        done = tokio::task::spawn_blocking(work) => {
            done.map_err(|e| format!("the file work failed: {e}"))?
        }
        _ = cancel.cancelled() => Err("stopped: the task was stopped".into()),
    }
}

#[cfg(test)]
mod tests;
