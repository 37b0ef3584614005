//! Media that came with a message, made into what the model reads before the turn starts:
//! images as image parts of the person's message (`agent.image_input_mode`), documents
//! inlined when they are short text and saved under `$HERMES_HOME/cache/documents/`
//! otherwise (`documents`), and a plain notice for what cannot be read (too large, a failed
//! download, voice without speech-to-text, video). Fetching runs in the turn's own task, so
//! it never holds up the router or another chat, and it stops with the turn.

mod documents;
mod outgoing;
mod stt;
pub mod tts;
mod vision;

use std::path::PathBuf;
use std::sync::Arc;

use base64::Engine;
use hermes_adapter::{Attachment, FetchError, MediaKind, PlatformSender};
use tokio_util::sync::CancellationToken;

pub use vision::Describer;

use documents::Documents;
use outgoing::take_media;
use stt::Transcriber;

/// The most of an image that is fetched for the model.
const MAX_IMAGE_BYTES: u64 = 10 * 1024 * 1024;
/// At most this many images go to the model with one turn, and this much of them (as sent,
/// base64 included): each goes with every model call of the turn.
const MAX_IMAGES: usize = 10;
const MAX_IMAGE_TOTAL: usize = 24 * 1024 * 1024;
/// The most of any other file that is fetched (Telegram's public Bot API serves 20 MB).
const MAX_FILE_BYTES: u64 = 20 * 1024 * 1024;

pub use crate::config::ImageInputMode;

/// What a turn's attachments became.
#[derive(Debug, Default)]
pub struct Prepared {
    /// Added to the person's text: inlined documents, where saved files are, what was sent.
    pub text: Vec<String>,
    /// Images for the model, as `data:` URLs.
    pub images: Vec<String>,
    /// For the person, at once: transcripts echoed back (`stt.echo_transcripts`), and
    /// what could not be read, and why.
    pub notices: Vec<String>,
}

/// Turns attachments into [`Prepared`] input.
pub struct MediaPreparer {
    image_input: ImageInputMode,
    documents: Documents,
    /// Speech-to-text, or why there is none (told to the person).
    stt: Result<Transcriber, String>,
    echo_transcripts: bool,
    /// Where things are, for what the agent may send.
    scene: crate::approval::Scene,
    /// Describes images in `text` mode.
    describer: Option<Arc<Describer>>,
    /// Text-to-speech, or why there is none (told to the person).
    pub speaker: Result<Arc<tts::Speaker>, String>,
}

impl MediaPreparer {
    pub fn new(
        image_input: ImageInputMode,
        documents_dir: PathBuf,
        stt: &crate::config::SttConfig,
        tts: &crate::config::TtsConfig,
        scene: crate::approval::Scene,
        describer: Option<Arc<Describer>>,
    ) -> Self {
        MediaPreparer {
            speaker: tts
                .speech
                .clone()
                .map(|config| Arc::new(tts::Speaker::new(config))),
            image_input,
            documents: Documents::new(documents_dir),
            stt: stt.openai.clone().map(Transcriber::new),
            echo_transcripts: stt.echo_transcripts,
            scene,
            describer,
        }
    }

    /// The agent's final text without its `MEDIA:` tags, and the files to send after it
    /// (private copies); what cannot be sent is said at the end of the text.
    pub async fn outgoing(&self, text: &str) -> (String, Vec<hermes_adapter::OutboundFile>) {
        if !text.contains("MEDIA:") {
            return (text.to_owned(), Vec::new());
        }
        let (owned, scene) = (text.to_owned(), self.scene.clone());
        let copies = self.scene.hermes_home.join("cache").join("outgoing");
        // Off the async threads: the files are copied, and read again for what they are.
        let taken = tokio::task::spawn_blocking(move || {
            let (mut cleaned, files) = take_media(&owned, &scene, &copies);
            // Hermes' `[[audio_as_voice]]`: the reply's audio goes as voice messages.
            let as_voice = cleaned.contains(VOICE_DIRECTIVE);
            if as_voice {
                cleaned = cleaned.replace(VOICE_DIRECTIVE, "");
            }
            let mut sendable = Vec::new();
            for file in files {
                match file {
                    Ok(mut file) => {
                        let encoding = as_voice.then(|| encoding_of(&file.path));
                        if let Some(encoding) = encoding
                            && let Some(told) = as_voice_message(&mut file, encoding)
                        {
                            cleaned.push_str("\n\n");
                            cleaned.push_str(&told);
                        }
                        sendable.push(file)
                    }
                    Err(why) => {
                        cleaned.push_str("\n\n");
                        cleaned.push_str(&why);
                    }
                }
            }
            (cleaned.trim().to_owned(), sendable)
        })
        .await;
        taken.unwrap_or_else(|_| (text.to_owned(), Vec::new()))
    }

    /// Where spoken replies are kept until sent (`$HERMES_HOME/cache/audio`).
    fn audio_dir(&self) -> PathBuf {
        self.scene.hermes_home.join("cache").join("audio")
    }

    /// Where the agent's own audio goes (`text_to_speech`): the working directory's
    /// `audio/`, from where its files may be sent.
    pub fn agent_audio_dir(&self) -> PathBuf {
        self.scene.cwd.join("audio")
    }

    /// A spoken reply as a voice message (with what the person must know when it can only
    /// go as an audio file), or why there is none (for the person).
    pub async fn spoken(
        &self,
        text: &str,
    ) -> Result<(hermes_adapter::OutboundFile, Option<String>), String> {
        let speaker = self.speaker.as_ref().map_err(Clone::clone)?;
        let spoken = speaker.speak(text, &self.audio_dir()).await?;
        let mut file = hermes_adapter::OutboundFile {
            name: spoken
                .path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| "voice.ogg".into()),
            path: spoken.path,
            mime: Some(spoken.encoding.file_kind().1.to_owned()),
            caption: None,
            // Set by `as_voice_message` when it is Ogg/Opus.
            voice: false,
        };
        // What it is was found as it was made: not read again.
        let told = as_voice_message(&mut file, spoken.encoding);
        Ok((file, told))
    }

    /// Fetch and convert every attachment (one at a time; a cancelled turn stops here).
    pub async fn prepare(
        &self,
        sender: Option<&Arc<dyn PlatformSender>>,
        attachments: &[Attachment],
        cancel: &CancellationToken,
    ) -> Prepared {
        let mut prepared = Prepared::default();
        let mut image_bytes = 0;
        for attachment in attachments {
            if cancel.is_cancelled() {
                break;
            }
            let what = describe(attachment);
            let Some(sender) = sender else {
                prepared.notices.push(format!(
                    "⚠️ I could not open {what}: its platform is not connected."
                ));
                continue;
            };
            match kind_for_the_model(attachment) {
                MediaKind::Image => {
                    self.look(
                        sender,
                        attachment,
                        &what,
                        cancel,
                        &mut prepared,
                        &mut image_bytes,
                    )
                    .await
                }
                MediaKind::Document => {
                    self.keep_document(sender, attachment, &what, cancel, &mut prepared)
                        .await
                }
                MediaKind::Voice | MediaKind::Audio => {
                    self.listen(sender, attachment, &what, cancel, &mut prepared)
                        .await
                }
                MediaKind::Video => prepared.notices.push(format!(
                    "🎬 I can't watch {what} yet. Please describe it in words."
                )),
            }
        }
        prepared
    }
}

/// The kind `attachment` is handled as: models take only some image formats; any other
/// image is a file like any other.
fn kind_for_the_model(attachment: &Attachment) -> MediaKind {
    match attachment.kind {
        MediaKind::Image
            if !attachment.mime.as_deref().is_none_or(|m| {
                ["image/jpeg", "image/png", "image/gif", "image/webp"].contains(&m)
            }) =>
        {
            MediaKind::Document
        }
        kind => kind,
    }
}

/// `image` (a `data:` URL) for the model, with a line in the text saying it came; or a
/// notice when the turn already carries as many images, or as much of them (the
/// `image_bytes` so far), as it may.
fn attach_image(image: String, what: &str, prepared: &mut Prepared, image_bytes: &mut usize) {
    if prepared.images.len() >= MAX_IMAGES || *image_bytes + image.len() > MAX_IMAGE_TOTAL {
        // Every image goes with every model call of the turn: a turn carries only so many.
        prepared.notices.push(format!(
            "⚠️ I could not look at {what}: one message can carry at most {MAX_IMAGES} images ({} in all).",
            megabytes(MAX_IMAGE_TOTAL as u64)
        ));
    } else {
        *image_bytes += image.len();
        prepared.images.push(image);
        prepared.text.push(format!("[The person sent {what}.]"));
    }
}

impl MediaPreparer {
    /// An image, fetched: described in words (`agent.image_input_mode: text`), else
    /// given to the model as it is while the turn has room for it (`image_bytes` is how
    /// much of that room the turn's images take so far).
    async fn look(
        &self,
        sender: &Arc<dyn PlatformSender>,
        attachment: &Attachment,
        what: &str,
        cancel: &CancellationToken,
        prepared: &mut Prepared,
        image_bytes: &mut usize,
    ) {
        match fetch(sender, attachment, MAX_IMAGE_BYTES, cancel).await {
            Ok(bytes) => {
                let mime = attachment
                    .mime
                    .clone()
                    .filter(|m| m.starts_with("image/"))
                    .unwrap_or_else(|| "image/jpeg".into());
                let data = base64::engine::general_purpose::STANDARD.encode(&bytes);
                let image = format!("data:{mime};base64,{data}");
                if self.image_input == ImageInputMode::Text {
                    self.describe_image(&image, what, cancel, prepared).await;
                } else {
                    attach_image(image, what, prepared, image_bytes);
                }
            }
            Err(why) => prepared.notices.push(could_not_open(what, &why)),
        }
    }

    /// `image` (a `data:` URL) described in words by the vision model, for the text.
    async fn describe_image(
        &self,
        image: &str,
        what: &str,
        cancel: &CancellationToken,
        prepared: &mut Prepared,
    ) {
        let described = match &self.describer {
            Some(describer) => describer.describe(image, cancel).await,
            None => Err("no vision model".into()),
        };
        match described {
            Ok(seen) => prepared
                .text
                .push(format!("[The person sent {what}. It shows: {seen}]")),
            Err(e) => {
                tracing::warn!(error = %e, "media: the image description failed");
                prepared.notices.push(format!(
                    "⚠️ I could not look at {what}: the image description failed (check `auxiliary.vision`)."
                ));
            }
        }
    }

    /// A document, fetched and kept: inlined when it is short text, else saved.
    async fn keep_document(
        &self,
        sender: &Arc<dyn PlatformSender>,
        attachment: &Attachment,
        what: &str,
        cancel: &CancellationToken,
        prepared: &mut Prepared,
    ) {
        // Larger than the gateway holds in memory, where the platform serves that much
        // (Telegram's local Bot API server): written to disk as it comes.
        if let Some(max) = sender.large_downloads().filter(|&max| max > MAX_FILE_BYTES)
            && attachment.size.is_none_or(|size| size > MAX_FILE_BYTES)
        {
            match self
                .keep_large_document(sender, attachment, max, cancel)
                .await
            {
                Ok(note) => prepared.text.push(note),
                Err(why) => prepared.notices.push(could_not_open(what, &why)),
            }
            return;
        }
        match fetch(sender, attachment, MAX_FILE_BYTES, cancel).await {
            Ok(bytes) => {
                let name = attachment.name.as_deref().unwrap_or("document");
                match self
                    .documents
                    .take(name, attachment.mime.as_deref(), bytes)
                    .await
                {
                    Ok(text) => prepared.text.push(text),
                    Err(e) => prepared
                        .notices
                        .push(format!("⚠️ I could not keep {what} ({e}).")),
                }
            }
            Err(why) => prepared.notices.push(could_not_open(what, &why)),
        }
    }

    /// A document past what is held in memory, written to a file of its own as it comes
    /// (up to `max`); what the model is told, or why it could not be kept (a file left half
    /// written is removed).
    async fn keep_large_document(
        &self,
        sender: &Arc<dyn PlatformSender>,
        attachment: &Attachment,
        max: u64,
        cancel: &CancellationToken,
    ) -> Result<String, String> {
        let name = attachment.name.as_deref().unwrap_or("document");
        let size = attachment.size.unwrap_or(0);
        if size > max {
            return Err(too_large(size, max));
        }
        let (path, mut file, room) = self.documents.create(name, size).await?;
        let written = tokio::select! {
            r = sender.fetch_media_to(attachment, max.min(room), &mut file) => r.map_err(fetch_failed),
            _ = cancel.cancelled() => Err("the turn was stopped".into()),
        };
        drop(file);
        match written {
            Ok(written) => Ok(documents::saved_note(name, written, &path)),
            Err(why) => {
                if let Err(e) = tokio::fs::remove_file(&path).await {
                    tracing::warn!(path = %path.display(), error = %e, "media: a half-written document could not be removed");
                }
                Err(why)
            }
        }
    }

    /// A voice note or audio file, transcribed; the transcript goes in quoted (as Hermes
    /// does) and, with `stt.echo_transcripts`, back to the person.
    async fn listen(
        &self,
        sender: &Arc<dyn PlatformSender>,
        attachment: &Attachment,
        what: &str,
        cancel: &CancellationToken,
        prepared: &mut Prepared,
    ) {
        let transcriber = match &self.stt {
            Ok(t) => t,
            Err(why) => {
                prepared.notices.push(format!(
                    "🎤 I can't listen to {what}: {why}. Please type your message."
                ));
                return;
            }
        };
        let audio = match fetch(sender, attachment, MAX_FILE_BYTES, cancel).await {
            Ok(audio) => audio,
            Err(why) => return prepared.notices.push(could_not_open(what, &why)),
        };
        let mime = attachment.mime.as_deref().unwrap_or("audio/ogg");
        let name = attachment.name.clone().unwrap_or_else(|| {
            let extension = mime.rsplit('/').next().unwrap_or("ogg");
            format!("voice.{extension}")
        });
        let heard = tokio::select! {
            r = transcriber.transcribe(audio, &name, mime) => r,
            _ = cancel.cancelled() => return,
        };
        match heard {
            Ok(text) if !text.is_empty() => {
                if self.echo_transcripts {
                    prepared.notices.push(format!("🎙️ \"{text}\""));
                }
                prepared.text.push(format!("\"{text}\""));
            }
            Ok(_) => prepared
                .notices
                .push(format!("🎤 I could not make out any words in {what}.")),
            Err(e) => {
                tracing::warn!(error = %e, "media: transcription failed");
                prepared.notices.push(format!(
                    "⚠️ I could not transcribe {what}: the speech-to-text service failed. Please try again, or type it."
                ));
            }
        }
    }
}

/// Hermes' directive: the reply's audio files go as voice messages.
pub const VOICE_DIRECTIVE: &str = "[[audio_as_voice]]";

/// What a file's first bytes say it is (blocking: a read).
fn encoding_of(path: &std::path::Path) -> tts::Encoding {
    use std::io::Read;
    let mut head = vec![0; 512];
    let read = std::fs::File::open(path)
        .and_then(|mut f| f.read(&mut head))
        .unwrap_or(0);
    head.truncate(read);
    tts::Encoding::of(&head)
}

/// Mark an audio file encoded as `encoding` to go as a voice message. A voice message is
/// Ogg/Opus: a file of another kind goes as an audio file, and what is returned says so
/// (never silently).
fn as_voice_message(
    file: &mut hermes_adapter::OutboundFile,
    encoding: tts::Encoding,
) -> Option<String> {
    let audio = matches!(
        encoding,
        tts::Encoding::OggOpus
            | tts::Encoding::OggOther
            | tts::Encoding::Mp3
            | tts::Encoding::Wav
            | tts::Encoding::Flac
    );
    if !audio {
        return None; // not audio: sent as what it is
    }
    if encoding == tts::Encoding::OggOpus {
        file.voice = true;
        file.mime = Some("audio/ogg".into());
        return None;
    }
    Some(format!(
        "🔊 {} goes as an audio file, not a voice message: a voice message needs Ogg/Opus audio, and this is {}.",
        file.name,
        encoding.describe()
    ))
}

/// Fetch with a cap; the error says what to tell the person.
async fn fetch(
    sender: &Arc<dyn PlatformSender>,
    attachment: &Attachment,
    max: u64,
    cancel: &CancellationToken,
) -> Result<Vec<u8>, String> {
    let fetched = tokio::select! {
        r = sender.fetch_media(attachment, max) => r,
        _ = cancel.cancelled() => return Err("the turn was stopped".into()),
    };
    fetched.map_err(fetch_failed)
}

/// What to tell the person about a fetch that failed.
fn fetch_failed(e: FetchError) -> String {
    match e {
        FetchError::TooLarge { size, max } => too_large(size, max),
        FetchError::Unsupported => "this platform's files cannot be fetched".into(),
        FetchError::Failed(e) => {
            tracing::warn!(error = %e, "media: a download failed");
            format!("the download failed: {e}")
        }
    }
}

fn too_large(size: u64, max: u64) -> String {
    if size == 0 {
        // The platform refused it by its size, which it did not say.
        return format!("it is too large (the limit is {})", megabytes(max));
    }
    format!(
        "it is too large ({}; the limit is {})",
        megabytes(size),
        megabytes(max)
    )
}

fn could_not_open(what: &str, why: &str) -> String {
    format!("⚠️ I could not open {what}: {why}.")
}

fn megabytes(bytes: u64) -> String {
    format!("{:.1} MB", bytes as f64 / (1024.0 * 1024.0))
}

/// "the photo", "the file report.pdf", "the voice message".
fn describe(attachment: &Attachment) -> String {
    let name = attachment.name.as_deref().map(|n| format!(" {n}"));
    match attachment.kind {
        MediaKind::Image => match name {
            Some(name) => format!("the image{name}"),
            None => "a photo".into(),
        },
        MediaKind::Document => format!("the file{}", name.unwrap_or_default()),
        MediaKind::Voice => "your voice message".into(),
        MediaKind::Audio => format!("the audio{}", name.unwrap_or_default()),
        MediaKind::Video => "videos".into(),
    }
}
