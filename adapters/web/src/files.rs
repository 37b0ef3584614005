//! Files through the web chat: what the person uploads (kept under
//! `$HERMES_HOME/web/uploads/` until the daemon fetched it into its media path) and what
//! the agent sends (copied to `$HERMES_HOME/web/files/`, served at an unguessable address
//! to the logged-in browser). Names on disk are random ids, never the names people gave;
//! files older than a week are removed at start.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use hermes_adapter::{FetchError, SendError};

/// How long an uploaded or sent file is kept.
const KEPT: Duration = Duration::from_secs(7 * 24 * 3600);

/// Image types a page may show inline (never SVG: it can carry script).
const INLINE_IMAGES: [&str; 4] = ["image/png", "image/jpeg", "image/gif", "image/webp"];

/// The web chat's file folders.
pub struct Files {
    uploads: PathBuf,
    sent: PathBuf,
}

/// A file kept for a page.
pub struct Kept {
    pub url: String,
    pub mime: String,
    pub inline_image: bool,
}

/// Whether `id` is one of ours: 32 lowercase hex digits (nothing that could name another
/// path).
pub fn is_file_id(id: &str) -> bool {
    id.len() == 32
        && id
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

fn new_id() -> String {
    format!("{:032x}", rand::random::<u128>())
}

impl Files {
    pub fn new(home: &Path) -> Files {
        let web = home.join("web");
        Files {
            uploads: web.join("uploads"),
            sent: web.join("files"),
        }
    }

    /// Make the folders (0700) and remove files older than a week.
    pub async fn prepare(&self) -> std::io::Result<()> {
        use std::os::unix::fs::PermissionsExt;
        if let Some(web) = self.uploads.parent() {
            tokio::fs::create_dir_all(web).await?;
            tokio::fs::set_permissions(web, std::fs::Permissions::from_mode(0o700)).await?;
        }
        for dir in [&self.uploads, &self.sent] {
            tokio::fs::create_dir_all(dir).await?;
            tokio::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).await?;
            let mut entries = tokio::fs::read_dir(dir).await?;
            while let Some(entry) = entries.next_entry().await? {
                let old = entry
                    .metadata()
                    .await
                    .ok()
                    .and_then(|m| m.modified().ok())
                    .and_then(|t| SystemTime::now().duration_since(t).ok())
                    .is_some_and(|age| age > KEPT);
                if old {
                    let _ = tokio::fs::remove_file(entry.path()).await;
                }
            }
        }
        Ok(())
    }

    /// Keep an upload's bytes; its id is the attachment's handle.
    pub async fn keep_upload(&self, bytes: &[u8]) -> std::io::Result<String> {
        let id = new_id();
        tokio::fs::write(self.uploads.join(&id), bytes).await?;
        Ok(id)
    }

    /// An upload's bytes, by the handle [`Files::keep_upload`] gave.
    pub async fn read_upload(&self, handle: &str, max_bytes: u64) -> Result<Vec<u8>, FetchError> {
        if !is_file_id(handle) {
            return Err(FetchError::Failed(SendError::Rejected(
                "not an upload of this web chat".into(),
            )));
        }
        let path = self.uploads.join(handle);
        let size = tokio::fs::metadata(&path)
            .await
            .map_err(|e| {
                FetchError::Failed(SendError::Rejected(format!("the upload is gone: {e}")))
            })?
            .len();
        if size > max_bytes {
            return Err(FetchError::TooLarge {
                size,
                max: max_bytes,
            });
        }
        tokio::fs::read(&path)
            .await
            .map_err(|e| FetchError::Failed(SendError::Transient(e.to_string())))
    }

    /// Copy a file the agent sends where the page can fetch it; its type is the one given,
    /// else the picture type its name says, else unknown.
    pub async fn keep_outgoing(
        &self,
        path: &Path,
        name: &str,
        mime: Option<&str>,
    ) -> std::io::Result<Kept> {
        let id = new_id();
        let mime = mime
            .filter(|m| !m.is_empty())
            .or_else(|| image_type_of(name))
            .unwrap_or("application/octet-stream")
            .to_ascii_lowercase();
        tokio::fs::copy(path, self.sent.join(&id)).await?;
        tokio::fs::write(self.sent.join(format!("{id}.type")), &mime).await?;
        Ok(Kept {
            url: format!("/api/files/{id}"),
            inline_image: INLINE_IMAGES.contains(&mime.as_str()),
            mime,
        })
    }

    /// A sent file's bytes and type, by its id.
    pub async fn read_outgoing(&self, id: &str) -> Option<(Vec<u8>, String)> {
        if !is_file_id(id) {
            return None;
        }
        let bytes = tokio::fs::read(self.sent.join(id)).await.ok()?;
        let mime = tokio::fs::read_to_string(self.sent.join(format!("{id}.type")))
            .await
            .unwrap_or_else(|_| "application/octet-stream".into());
        Some((bytes, mime))
    }
}

/// The picture type a file name says, for the types a page shows inline.
fn image_type_of(name: &str) -> Option<&'static str> {
    let extension = name.rsplit_once('.')?.1.to_ascii_lowercase();
    match extension.as_str() {
        "png" => Some("image/png"),
        "jpg" | "jpeg" => Some("image/jpeg"),
        "gif" => Some("image/gif"),
        "webp" => Some("image/webp"),
        _ => None,
    }
}

/// Whether a page may show a file of type `mime` inline.
pub fn shows_inline(mime: &str) -> bool {
    INLINE_IMAGES.contains(&mime)
}
