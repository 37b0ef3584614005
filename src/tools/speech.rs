//! `text_to_speech {text}` (Hermes' tool, toolset `tts`): the text spoken by the configured
//! provider (`tts.*`), kept as a file, and handed back as Hermes hands it: a `MEDIA:` tag,
//! with `[[audio_as_voice]]` when the audio is Ogg/Opus (a voice message on Telegram and
//! WhatsApp). The answer's files are sent with it; a tag the model leaves out of its answer
//! is added to it (see `session::ending`). Offered only where text-to-speech is set up.

use std::sync::Arc;

use futures_util::future::BoxFuture;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use crate::media::tts::{Encoding, Speaker};
use crate::tool::{ToolContext, ToolResult, TypedTool};

pub struct TextToSpeechTool {
    pub speaker: Arc<Speaker>,
    /// Where its audio is kept: the working directory's `audio/` (files there may be sent).
    pub dir: std::path::PathBuf,
}

/// `text_to_speech`'s arguments.
#[derive(Deserialize, JsonSchema)]
pub struct SpeechArgs {
    /// The text to convert to speech. Provider-specific character caps apply and are
    /// enforced automatically (OpenAI 4096); over-long input is truncated.
    text: String,
}

impl TypedTool for TextToSpeechTool {
    type Args = SpeechArgs;
    const NAME: &'static str = "text_to_speech";
    const TOOLSET: &'static str = "tts";

    fn description(&self) -> String {
        "Convert text to speech audio. Returns a MEDIA: path that the platform delivers as native audio. \
         Ogg/Opus audio renders as a voice bubble on Telegram and WhatsApp; elsewhere audio is sent as a regular \
         attachment. Voice and provider are user-configured (tts.* in config.yaml), not model-selected."
            .into()
    }

    fn call<'a>(&'a self, args: SpeechArgs, _ctx: &'a ToolContext) -> BoxFuture<'a, ToolResult> {
        Box::pin(async move {
            let provider = self.speaker.provider();
            if args.text.trim().is_empty() {
                return ToolResult::text(
                    json!({"success": false, "error": "Text is required"}).to_string(),
                );
            }
            match self.speaker.speak(&args.text, &self.dir).await {
                Ok(spoken) => {
                    let path = spoken.path.display().to_string();
                    let voice = spoken.encoding == Encoding::OggOpus;
                    let media_tag = if voice {
                        format!("{}\nMEDIA:{path}", crate::media::VOICE_DIRECTIVE)
                    } else {
                        format!("MEDIA:{path}")
                    };
                    let mut answer = json!({
                        "success": true,
                        "file_path": path,
                        "media_tag": media_tag,
                        "provider": provider,
                        "voice_compatible": voice,
                    });
                    if !voice {
                        answer["note"] = json!(format!(
                            "the provider answered {} audio, not Ogg/Opus: it is sent as an audio file, not a voice message",
                            spoken.encoding.describe()
                        ));
                    }
                    ToolResult::text(answer.to_string())
                }
                Err(e) => ToolResult::text(
                    json!({"success": false, "error": format!("TTS generation failed ({provider}): {e}")})
                        .to_string(),
                ),
            }
        })
    }
}
