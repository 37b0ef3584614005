//! Speech-to-text through an OpenAI-compatible `/audio/transcriptions` endpoint (Hermes
//! `stt.provider: openai`, `groq`, or `local`: a Whisper-compatible server on this
//! machine): the voice note goes up as a multipart form, the transcript comes back as text
//! (`whisper-1`) or JSON (`{"text": …}`). Bounded in time and size.

use std::time::Duration;

use crate::config::SttOpenAi;

/// How long one transcription may take.
const TIMEOUT: Duration = Duration::from_secs(120);
/// The most of an answer that is read.
const MAX_ANSWER: usize = 1024 * 1024;

pub struct Transcriber {
    http: reqwest::Client,
    config: SttOpenAi,
}

impl Transcriber {
    pub fn new(config: SttOpenAi) -> Self {
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .timeout(TIMEOUT)
            .build()
            .unwrap_or_default();
        Transcriber { http, config }
    }

    /// The transcript of `audio`; the error is for the log.
    pub async fn transcribe(
        &self,
        audio: Vec<u8>,
        file_name: &str,
        mime: &str,
    ) -> Result<String, String> {
        let text_format = self.config.model == "whisper-1";
        let boundary = format!("hermes-{:016x}", rand::random::<u64>());
        let mut body = Vec::with_capacity(audio.len() + 512);
        let field = |body: &mut Vec<u8>, name: &str, value: &str| {
            body.extend_from_slice(
                format!("--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\"\r\n\r\n{value}\r\n")
                    .as_bytes(),
            );
        };
        field(&mut body, "model", &self.config.model);
        if let Some(language) = &self.config.language {
            field(&mut body, "language", language);
        }
        field(
            &mut body,
            "response_format",
            if text_format { "text" } else { "json" },
        );
        let file_name: String = file_name
            .chars()
            .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
            .collect();
        body.extend_from_slice(
            format!(
                "--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{file_name}\"\r\nContent-Type: {mime}\r\n\r\n"
            )
            .as_bytes(),
        );
        body.extend_from_slice(&audio);
        body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());

        let mut request = self
            .http
            .post(format!("{}/audio/transcriptions", self.config.base_url));
        if let Some(key) = &self.config.api_key {
            request = request.bearer_auth(key.expose());
        }
        let response = request
            .header(
                reqwest::header::CONTENT_TYPE,
                format!("multipart/form-data; boundary={boundary}"),
            )
            .body(body)
            .send()
            .await
            .map_err(|e| {
                format!(
                    "cannot reach the speech-to-text service: {}",
                    e.without_url()
                )
            })?;
        let status = response.status();
        let bytes = crate::llm::read_capped(response, MAX_ANSWER, TIMEOUT).await?;
        let text = String::from_utf8_lossy(&bytes).into_owned();
        if !status.is_success() {
            let short: String = text.chars().take(300).collect();
            return Err(format!("HTTP {}: {short}", status.as_u16()));
        }
        let transcript = match serde_json::from_str::<serde_json::Value>(&text) {
            Ok(json) if json.get("text").is_some() => {
                json["text"].as_str().unwrap_or_default().to_owned()
            }
            _ => text,
        };
        Ok(transcript.trim().to_owned())
    }
}
