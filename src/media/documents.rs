//! Documents people send: short text files go to the model inline; anything else is saved
//! under `$HERMES_HOME/cache/documents/` (private, pruned after a day and kept within a count
//! and a size) and the model is told the path, so its tools can open it.

use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::PathBuf;
use std::time::{Duration, SystemTime};

/// Text files up to this size are given to the model inline.
const INLINE_MAX: usize = 100 * 1024;
/// Saved documents older than this are removed.
const KEEP_FOR: Duration = Duration::from_secs(24 * 3600);
/// At most this many saved documents, and this many bytes of them; the oldest go first.
const KEEP_FILES: usize = 200;
const KEEP_BYTES: u64 = 512 * 1024 * 1024;
/// A document written as it comes is refused when it would leave less than this free.
const DISK_RESERVE: u64 = 1024 * 1024 * 1024;
/// Where documents written as they come are kept (pruned after a day only).
const LARGE: &str = "large";

/// File extensions read as text whatever the MIME type says.
const TEXT_EXTENSIONS: &[&str] = &[
    "txt", "md", "markdown", "csv", "tsv", "json", "jsonl", "yaml", "yml", "toml", "xml", "html",
    "htm", "css", "js", "ts", "py", "rs", "go", "java", "c", "h", "cpp", "hpp", "sh", "log", "ini",
    "cfg", "conf", "sql", "rb", "php", "kt", "swift",
];

/// Where documents are kept.
pub struct Documents {
    dir: PathBuf,
}

impl Documents {
    pub fn new(dir: PathBuf) -> Self {
        Documents { dir }
    }

    /// What the model is told about a document: its text, or where it was saved.
    pub async fn take(
        &self,
        name: &str,
        mime: Option<&str>,
        bytes: Vec<u8>,
    ) -> Result<String, String> {
        if bytes.len() <= INLINE_MAX
            && is_text_like(name, mime)
            && let Ok(text) = std::str::from_utf8(&bytes)
            && !text.contains('\0')
        {
            let fence = fence_for(text);
            return Ok(format!(
                "[The person sent the file {name}:]\n{fence}\n{}\n{fence}",
                text.trim_end()
            ));
        }
        let dir = self.dir.clone();
        let file_name = kept_name(name);
        let size = bytes.len() as u64;
        let path = tokio::task::spawn_blocking(move || save(&dir, &file_name, &bytes))
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| format!("saving it failed: {e}"))?;
        Ok(saved_note(name, size, &path))
    }

    /// A new file (0600) for a document of `size` bytes that is written as it comes (too
    /// large to hold), in `large/` (kept a day, outside the count and size the others are
    /// kept within, so one such file does not push every other document out, nor the next
    /// one it); and how many bytes it may take: what leaves [`DISK_RESERVE`] free (the
    /// store lives on that disk too). Refused when `size` does not fit that.
    pub async fn create(
        &self,
        name: &str,
        size: u64,
    ) -> Result<(PathBuf, tokio::fs::File, u64), String> {
        let (documents, dir) = (self.dir.clone(), self.dir.join(LARGE));
        let file_name = kept_name(name);
        let made = tokio::task::spawn_blocking(move || {
            // Both directories the gateway's own, not links elsewhere (what is pruned in
            // them is deleted).
            private_dir(&documents)
                .and_then(|()| private_dir(&dir))
                .map_err(|e| format!("saving it failed: {e}"))?;
            remove_older_than(&dir, KEEP_FOR, ours);
            let room = free_bytes(&dir).map_or(u64::MAX, |free| free.saturating_sub(DISK_RESERVE));
            if size > room {
                return Err(format!(
                    "there is not enough free disk space to keep it ({} MB can be used)",
                    room / (1024 * 1024)
                ));
            }
            let path = dir.join(file_name);
            let file = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&path)
                .map_err(|e| format!("saving it failed: {e}"))?;
            Ok((path, file, room))
        })
        .await
        .map_err(|e| e.to_string())??;
        Ok((made.0, tokio::fs::File::from_std(made.1), made.2))
    }
}

/// What the model is told about a document kept on disk.
pub fn saved_note(name: &str, size: u64, path: &std::path::Path) -> String {
    format!(
        "[The person sent the file {name} ({size} bytes); it is saved at {}.]",
        path.display()
    )
}

/// Bytes free for the gateway on the file system of `dir`; `None` when it cannot tell.
fn free_bytes(dir: &std::path::Path) -> Option<u64> {
    use std::os::unix::ffi::OsStrExt;
    let path = std::ffi::CString::new(dir.as_os_str().as_bytes()).ok()?;
    let mut stat = std::mem::MaybeUninit::<libc::statvfs>::uninit();
    // SAFETY: statvfs fills the struct on success, and only then is it read.
    if unsafe { libc::statvfs(path.as_ptr(), stat.as_mut_ptr()) } != 0 {
        return None;
    }
    // SAFETY: initialised by the successful call.
    let stat = unsafe { stat.assume_init() };
    Some(stat.f_bavail.saturating_mul(stat.f_frsize))
}

/// Create `dir` (0700) if needed and make sure it is a directory of its own, not a link
/// to somewhere else: what is pruned in it is deleted.
pub(super) fn private_dir(dir: &std::path::Path) -> std::io::Result<()> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    let meta = std::fs::symlink_metadata(dir)?;
    if !meta.is_dir() {
        return Err(std::io::Error::other(format!(
            "{} is not a directory of the gateway's own",
            dir.display()
        )));
    }
    Ok(())
}

/// Whether a file name is one the gateway gave (`<ms>-<6 hex>-<name>`): only those are
/// ever pruned.
fn ours(name: &str) -> bool {
    let mut parts = name.splitn(3, '-');
    let (Some(ms), Some(tag), Some(_)) = (parts.next(), parts.next(), parts.next()) else {
        return false;
    };
    !ms.is_empty()
        && ms.bytes().all(|b| b.is_ascii_digit())
        && tag.len() == 6
        && tag.bytes().all(|b| b.is_ascii_hexdigit())
}

/// A file name the gateway gives a kept file.
pub(super) fn kept_name(name: &str) -> String {
    format!(
        "{}-{:06x}-{}",
        crate::store::now_ms(),
        rand::random::<u32>() & 0xff_ffff,
        safe_name(name)
    )
}

/// Write the file (0600, in a 0700 directory) after pruning what is old or over the bounds.
fn save(dir: &std::path::Path, file_name: &str, bytes: &[u8]) -> std::io::Result<PathBuf> {
    private_dir(dir)?;
    prune(dir, bytes.len() as u64);
    let path = dir.join(file_name);
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)?;
    std::io::Write::write_all(&mut file, bytes)?;
    Ok(path)
}

/// Remove the files of `dir` older than `keep` whose names `ours` recognises (what the
/// gateway named; nothing else is ever deleted).
pub(super) fn remove_older_than(
    dir: &std::path::Path,
    keep: Duration,
    ours: impl Fn(&str) -> bool,
) {
    let now = SystemTime::now();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let old = entry.metadata().is_ok_and(|meta| {
            let modified = meta.modified().unwrap_or(now);
            meta.is_file() && now.duration_since(modified).unwrap_or_default() > keep
        });
        if old && ours(&entry.file_name().to_string_lossy()) {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// Remove documents older than a day, then the oldest until one more of `incoming` bytes
/// fits within the count and the size (only files the gateway named).
pub(super) fn prune(dir: &std::path::Path, incoming: u64) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let now = SystemTime::now();
    let mut kept: Vec<(SystemTime, u64, PathBuf)> = Vec::new();
    for entry in entries.flatten() {
        if !ours(&entry.file_name().to_string_lossy()) {
            continue;
        }
        let Ok(meta) = entry.metadata() else { continue };
        if !meta.is_file() {
            continue;
        }
        let modified = meta.modified().unwrap_or(now);
        if now.duration_since(modified).unwrap_or_default() > KEEP_FOR {
            let _ = std::fs::remove_file(entry.path());
        } else {
            kept.push((modified, meta.len(), entry.path()));
        }
    }
    kept.sort();
    let mut total: u64 = kept.iter().map(|(_, len, _)| len).sum::<u64>() + incoming;
    let mut count = kept.len() + 1;
    for (_, len, path) in kept {
        if count <= KEEP_FILES && total <= KEEP_BYTES {
            break;
        }
        if std::fs::remove_file(&path).is_ok() {
            count -= 1;
            total -= len;
        }
    }
}

fn is_text_like(name: &str, mime: Option<&str>) -> bool {
    let by_mime = mime.is_some_and(|m| {
        m.starts_with("text/")
            || [
                "application/json",
                "application/xml",
                "application/x-yaml",
                "application/yaml",
                "application/toml",
                "application/javascript",
                "application/x-sh",
                "application/sql",
            ]
            .contains(&m)
    });
    let by_extension = name
        .rsplit_once('.')
        .is_some_and(|(_, ext)| TEXT_EXTENSIONS.contains(&ext.to_ascii_lowercase().as_str()));
    by_mime || by_extension
}

/// A code fence longer than any run of backticks in `text`.
fn fence_for(text: &str) -> String {
    let mut longest = 0;
    let mut run = 0;
    for c in text.chars() {
        run = if c == '`' { run + 1 } else { 0 };
        longest = longest.max(run);
    }
    "`".repeat((longest + 1).max(3))
}

/// A file name safe to put on disk: letters, digits, `.`, `-`, `_`; no leading dots; short.
fn safe_name(name: &str) -> String {
    let cleaned: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_') {
                c
            } else {
                '_'
            }
        })
        .collect();
    let trimmed = cleaned.trim_start_matches('.');
    let short: String = trimmed
        .chars()
        .rev()
        .take(100)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    if short.is_empty() {
        "document".into()
    } else {
        short
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_documents_directory_that_is_a_link_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let elsewhere = dir.path().join("elsewhere");
        std::fs::create_dir(&elsewhere).unwrap();
        let link = dir.path().join("documents");
        std::os::unix::fs::symlink(&elsewhere, &link).unwrap();
        assert!(private_dir(&link).is_err());
        assert!(private_dir(&dir.path().join("real")).is_ok());
    }

    #[tokio::test]
    async fn short_text_is_inlined_and_the_rest_saved_privately() {
        let dir = tempfile::tempdir().unwrap();
        let docs = Documents::new(dir.path().join("documents"));
        let inline = docs
            .take(
                "notes.md",
                Some("text/markdown"),
                b"# Plan\nuse ```code```".to_vec(),
            )
            .await
            .unwrap();
        assert!(
            inline.contains("# Plan") && inline.contains("````"),
            "{inline}"
        );

        let saved = docs
            .take(
                "../../etc/passwd.pdf",
                Some("application/pdf"),
                vec![0u8; 10],
            )
            .await
            .unwrap();
        let path = saved
            .split("saved at ")
            .nth(1)
            .unwrap()
            .trim_end_matches(".]");
        let path = std::path::Path::new(path);
        assert!(path.starts_with(dir.path().join("documents")), "{saved}");
        assert!(
            path.file_name()
                .unwrap()
                .to_str()
                .unwrap()
                .ends_with("_.._etc_passwd.pdf")
        );
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(path).unwrap().permissions().mode() & 0o777,
            0o600
        );
        let dir_mode = std::fs::metadata(dir.path().join("documents"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(dir_mode & 0o777, 0o700);

        let big_text = "x".repeat(INLINE_MAX + 1);
        let saved = docs
            .take("big.txt", Some("text/plain"), big_text.into_bytes())
            .await
            .unwrap();
        assert!(saved.contains("saved at"), "{saved}");
    }

    #[test]
    fn the_oldest_documents_go_when_there_are_too_many() {
        let dir = tempfile::tempdir().unwrap();
        for i in 0..KEEP_FILES + 5 {
            std::fs::write(dir.path().join(format!("{i:04}-abcdef-x")), b"x").unwrap();
        }
        // Not the gateway's: never touched.
        std::fs::write(dir.path().join("precious.txt"), b"keep").unwrap();
        prune(dir.path(), 1);
        let left = std::fs::read_dir(dir.path()).unwrap().count();
        assert_eq!(left, KEEP_FILES - 1 + 1, "room for the incoming one");
        assert!(dir.path().join("precious.txt").exists());
    }
}
