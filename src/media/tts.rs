//! Text-to-speech through an OpenAI-compatible `/audio/speech` endpoint (Hermes
//! `tts.provider: openai`, `tts.openai.*`): the text, stripped of Markdown and cut to the
//! provider's limit, goes up as JSON asking for Ogg/Opus (what Telegram and WhatsApp show as
//! a voice message); what comes back is checked for what it is, never assumed, and kept
//! where the caller says. Bounded in time and size.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::config::TtsOpenAi;

/// How long one synthesis may take.
const TIMEOUT: Duration = Duration::from_secs(120);
/// The most audio read (a minute of Opus is well under 1 MB).
const MAX_AUDIO: usize = 25 * 1024 * 1024;

/// How audio bytes are encoded, by their first bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    /// Opus in an Ogg container: a voice message on Telegram and WhatsApp.
    OggOpus,
    /// Ogg with another codec (Vorbis).
    OggOther,
    Mp3,
    Wav,
    Flac,
    Unknown,
}

impl Encoding {
    pub fn of(bytes: &[u8]) -> Encoding {
        let head = &bytes[..bytes.len().min(512)];
        if head.starts_with(b"OggS") {
            return if head.windows(8).any(|w| w == b"OpusHead") {
                Encoding::OggOpus
            } else {
                Encoding::OggOther
            };
        }
        if head.starts_with(b"ID3") || (head.len() > 1 && head[0] == 0xff && head[1] & 0xe0 == 0xe0)
        {
            return Encoding::Mp3;
        }
        if head.starts_with(b"RIFF") && head.get(8..12) == Some(b"WAVE") {
            return Encoding::Wav;
        }
        if head.starts_with(b"fLaC") {
            return Encoding::Flac;
        }
        Encoding::Unknown
    }

    /// The file's extension and MIME type.
    pub fn file_kind(self) -> (&'static str, &'static str) {
        match self {
            Encoding::OggOpus => ("ogg", "audio/ogg"),
            Encoding::OggOther => ("ogg", "audio/ogg"),
            Encoding::Mp3 => ("mp3", "audio/mpeg"),
            Encoding::Wav => ("wav", "audio/wav"),
            Encoding::Flac => ("flac", "audio/flac"),
            Encoding::Unknown => ("bin", "application/octet-stream"),
        }
    }

    /// What it is, for the person ("MP3").
    pub fn describe(self) -> &'static str {
        match self {
            Encoding::OggOpus => "Ogg/Opus",
            Encoding::OggOther => "Ogg (not Opus)",
            Encoding::Mp3 => "MP3",
            Encoding::Wav => "WAV",
            Encoding::Flac => "FLAC",
            Encoding::Unknown => "of an unknown kind",
        }
    }
}

/// Speech made from a text.
#[derive(Debug)]
pub struct Spoken {
    pub path: PathBuf,
    pub encoding: Encoding,
}

pub struct Speaker {
    http: reqwest::Client,
    config: TtsOpenAi,
}

impl Speaker {
    pub fn new(config: TtsOpenAi) -> Self {
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .timeout(TIMEOUT)
            .build()
            .unwrap_or_default();
        Speaker { http, config }
    }

    /// The provider, for the tool's answer.
    pub fn provider(&self) -> &'static str {
        "openai"
    }

    /// `text` (Markdown) spoken, as a file in `dir`; the error is for the person.
    pub async fn speak(&self, text: &str, dir: &Path) -> Result<Spoken, String> {
        let spoken = speakable(text);
        let input: String = spoken.chars().take(self.config.max_text_length).collect();
        if input.trim().is_empty() {
            return Err("there are no words to speak".into());
        }
        let mut body = serde_json::json!({
            "model": self.config.model,
            "voice": self.config.voice,
            "input": input,
            "response_format": "opus",
        });
        if let Some(speed) = self.config.speed {
            body["speed"] = serde_json::json!(speed);
        }
        let response = self
            .http
            .post(format!("{}/audio/speech", self.config.base_url))
            .bearer_auth(self.config.api_key.expose())
            .json(&body)
            .send()
            .await
            .map_err(|e| {
                format!(
                    "cannot reach the text-to-speech service: {}",
                    e.without_url()
                )
            })?;
        let status = response.status();
        if !status.is_success() {
            let detail = response.text().await.unwrap_or_default();
            let detail: String = crate::secrets::scrub(&detail).chars().take(200).collect();
            return Err(format!(
                "the text-to-speech service answered {status}: {}",
                detail.trim()
            ));
        }
        let audio = read_capped(response).await?;
        let encoding = Encoding::of(&audio);
        let (extension, _) = encoding.file_kind();
        let path = dir.join(format!(
            "tts_{}_{:08x}.{extension}",
            crate::store::now_ms(),
            rand::random::<u32>()
        ));
        let (dir, file, bytes) = (dir.to_path_buf(), path.clone(), audio);
        tokio::task::spawn_blocking(move || {
            std::fs::create_dir_all(&dir)?;
            prune_spoken(&dir);
            crate::home::write_private(&file, &bytes)
        })
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| format!("cannot keep the audio: {e}"))?;
        Ok(Spoken { path, encoding })
    }
}

/// Spoken replies are kept this long: well past the time a reply waits to be sent
/// (`delivery.max_age`, a day unless set longer).
const KEEP_SPOKEN: std::time::Duration = std::time::Duration::from_secs(8 * 24 * 3600);

/// Remove the spoken replies (`tts_*` files) older than [`KEEP_SPOKEN`] from `dir`.
fn prune_spoken(dir: &std::path::Path) {
    super::documents::remove_older_than(dir, KEEP_SPOKEN, |name| name.starts_with("tts_"));
}

/// The body, stopped at [`MAX_AUDIO`].
async fn read_capped(mut response: reqwest::Response) -> Result<Vec<u8>, String> {
    let mut audio = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| format!("the audio did not arrive whole: {}", e.without_url()))?
    {
        if audio.len() + chunk.len() > MAX_AUDIO {
            return Err("the text-to-speech service sent more than 25 MB of audio".into());
        }
        audio.extend_from_slice(&chunk);
    }
    if audio.is_empty() {
        return Err("the text-to-speech service sent no audio".into());
    }
    Ok(audio)
}

/// Markdown as words to speak (Hermes' `_strip_markdown_for_tts`): no code blocks, links
/// as their text, no URLs, emphasis and code marks unwrapped, no heading or list marks, no
/// rules, at most one blank line in a row.
pub fn speakable(markdown: &str) -> String {
    use std::sync::LazyLock;

    use regex::Regex;
    static RULES: LazyLock<Vec<(Regex, &'static str)>> = LazyLock::new(|| {
        [
            (r"(?s)```.*?```", " "),
            (r"\[([^\]]*)\]\([^)]*\)", "$1"),
            (r"https?://\S+", ""),
            (r"\*\*([^*]+)\*\*", "$1"),
            (r"\*([^*]+)\*", "$1"),
            (r"`([^`]+)`", "$1"),
            (r"(?m)^#+[ \t]*", ""),
            (r"(?m)^[ \t]*[-*][ \t]+", ""),
            (r"(?m)^---+[ \t]*$", ""),
            (r"\n{3,}", "\n\n"),
        ]
        .into_iter()
        .map(|(pattern, with)| (Regex::new(pattern).expect("valid regex"), with))
        .collect()
    });
    let mut text = markdown.to_owned();
    for (pattern, with) in RULES.iter() {
        text = pattern.replace_all(&text, *with).into_owned();
    }
    text.trim().to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spoken_replies_are_pruned_after_a_week_and_nothing_else_is() {
        let dir = tempfile::tempdir().unwrap();
        let aged = |name: &str, age: std::time::Duration| {
            let path = dir.path().join(name);
            let file = std::fs::File::create(&path).unwrap();
            file.set_modified(std::time::SystemTime::now() - age)
                .unwrap();
            path
        };
        let day = std::time::Duration::from_secs(24 * 3600);
        let old = aged("tts_1_00000001.ogg", 9 * day);
        let recent = aged("tts_2_00000002.ogg", 2 * day);
        let not_ours = aged("notes.ogg", 30 * day);
        prune_spoken(dir.path());
        assert!(!old.exists());
        assert!(recent.exists() && not_ours.exists());
    }

    #[test]
    fn audio_is_known_by_its_first_bytes() {
        let mut opus = b"OggS\x00\x02".to_vec();
        opus.extend_from_slice(&[0; 22]);
        opus.extend_from_slice(b"OpusHead");
        assert_eq!(Encoding::of(&opus), Encoding::OggOpus);
        assert_eq!(Encoding::of(b"OggS\x00\x02vorbis"), Encoding::OggOther);
        assert_eq!(Encoding::of(b"ID3\x04rest"), Encoding::Mp3);
        assert_eq!(Encoding::of(&[0xff, 0xfb, 0x90]), Encoding::Mp3);
        assert_eq!(Encoding::of(b"RIFF\0\0\0\0WAVEfmt "), Encoding::Wav);
        assert_eq!(Encoding::of(b"<html>"), Encoding::Unknown);
    }

    #[test]
    fn markdown_becomes_words_to_speak() {
        let text = "# Plan\n\n**Go** to [the shop](https://x.y) at `9`.\n\n- milk\n- bread\n\n```\nrm -rf /\n```\nSee https://example.com now";
        assert_eq!(
            speakable(text),
            "Plan\n\nGo to the shop at 9.\n\nmilk\nbread\n\n \nSee  now"
        );
    }
}
