//! The fake Telegram's files: what people send (served by `getFile` and
//! `/file/bot<token>/<path>`), what the bot uploaded, and acting as a local Bot API server.

use axum::extract::{Path, State};
use serde_json::{Value, json};

use super::{FakeTelegram, SentFile};

impl FakeTelegram {
    /// Keep `bytes` as a file to serve; returns its `file_id`.
    pub fn add_file(&self, bytes: Vec<u8>) -> String {
        let mut inner = self.inner.lock().unwrap();
        let id = format!("file-{}", inner.files.len() + 1);
        inner.files.insert(id.clone(), bytes);
        id
    }

    /// The media part of a photo message: one size of the given bytes.
    pub fn photo(&self, bytes: Vec<u8>) -> Value {
        let size = bytes.len();
        let id = self.add_file(bytes);
        json!({"photo": [{"file_id": id, "file_unique_id": format!("u-{id}"), "file_size": size,
                          "width": 640, "height": 480}]})
    }

    /// The media part of a document message.
    pub fn document(&self, name: &str, mime: &str, bytes: Vec<u8>) -> Value {
        let size = bytes.len();
        let id = self.add_file(bytes);
        json!({"document": {"file_id": id, "file_unique_id": format!("u-{id}"), "file_size": size,
                            "file_name": name, "mime_type": mime}})
    }

    /// The media part of a voice note.
    pub fn voice(&self, bytes: Vec<u8>) -> Value {
        let size = bytes.len();
        let id = self.add_file(bytes);
        json!({"voice": {"file_id": id, "file_unique_id": format!("u-{id}"), "file_size": size,
                         "duration": 2, "mime_type": "audio/ogg"}})
    }

    /// Files the bot uploaded to `chat_id`, in order.
    pub fn sent_files(&self, chat_id: i64) -> Vec<SentFile> {
        self.inner
            .lock()
            .unwrap()
            .sent_files
            .iter()
            .filter(|f| f.chat_id == chat_id)
            .cloned()
            .collect()
    }

    /// Act as a local Bot API server from now on: files past 20 MB are served; with
    /// `files_dir` (its `--local` mode) `getFile` writes the file under it and names its
    /// absolute path, and HTTP downloads answer 404, as the real server's do.
    pub fn act_as_local_server(&self, files_dir: Option<std::path::PathBuf>) {
        let mut inner = self.inner.lock().unwrap();
        inner.local_server = true;
        inner.local_files = files_dir;
    }

    /// How many times a file was downloaded.
    pub fn downloads(&self, file_id: &str) -> usize {
        self.inner
            .lock()
            .unwrap()
            .downloads
            .get(file_id)
            .copied()
            .unwrap_or(0)
    }
}

/// `GET /file/bot<token>/<file_path>`: a file's bytes.
pub(super) async fn download(
    State(fake): State<FakeTelegram>,
    Path((_bot, path)): Path<(String, String)>,
) -> (axum::http::StatusCode, Vec<u8>) {
    let id = path.rsplit('/').next().unwrap_or_default().to_owned();
    let mut inner = fake.inner.lock().unwrap();
    *inner.downloads.entry(id.clone()).or_default() += 1;
    if inner.local_files.is_some() {
        return (axum::http::StatusCode::NOT_FOUND, Vec::new());
    }
    match inner.files.get(&id) {
        Some(bytes) => (axum::http::StatusCode::OK, bytes.clone()),
        None => (axum::http::StatusCode::NOT_FOUND, Vec::new()),
    }
}
