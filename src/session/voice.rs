//! Voice replies, with Hermes' `/voice` and texts: per chat `off` (text only, the
//! default), `on` (a spoken reply to a voice message) or `tts` (a spoken reply to every
//! message), kept with the chat's settings. A spoken reply is the answer's words (Markdown
//! stripped) through the configured text-to-speech (`tts.*`), sent as a voice message after
//! the text; when it cannot be made the person is told why, under the text. Also Hermes'
//! rule for `text_to_speech`: audio the tool made this turn goes with the answer even when
//! the model did not name it.

use hermes_adapter::{MediaKind, OutboundFile};

use super::*;
use crate::store::StoredMessage;

/// The setting's name in the store.
pub(super) const VOICE: &str = "voice";

/// When the chat hears its replies.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) enum VoiceMode {
    #[default]
    Off,
    /// A spoken reply to a voice message (`/voice on`; Hermes' `voice_only`).
    VoiceOnly,
    /// A spoken reply to every message (`/voice tts`; Hermes' `all`).
    All,
}

impl VoiceMode {
    fn stored(self) -> &'static str {
        match self {
            VoiceMode::Off => "off",
            VoiceMode::VoiceOnly => "voice_only",
            VoiceMode::All => "all",
        }
    }

    pub(super) fn read(text: &str) -> VoiceMode {
        match text {
            "voice_only" => VoiceMode::VoiceOnly,
            "all" => VoiceMode::All,
            _ => VoiceMode::Off,
        }
    }

    fn label(self) -> &'static str {
        match self {
            VoiceMode::Off => "Off (text only)",
            VoiceMode::VoiceOnly => "On (voice reply to voice messages)",
            VoiceMode::All => "TTS (voice reply to all messages)",
        }
    }
}

const HOW_IT_WORKS: &str = "**How /voice works**\n• `/voice on` — voice reply when you send a voice message\n• `/voice tts` — voice reply to *every* message\n• `/voice off` — back to text-only replies\n• `/voice status` — show the current mode\n• `/voice` (no argument) — quick toggle between on and off";

impl SessionActor {
    /// `/voice [on | off | tts | status]`.
    pub(super) async fn voice(&mut self, args: &str) -> String {
        let now = super::chat_commands::ChatSettings::load(&self.services.store, &self.key)
            .await
            .voice;
        let arg = args.trim().to_ascii_lowercase();
        let (next, reply) = match arg.as_str() {
            "status" => return format!("Voice mode: {}", now.label()),
            "on" | "enable" => (
                VoiceMode::VoiceOnly,
                "Voice mode enabled.\nI'll reply with voice when you send voice messages.\nUse /voice tts to get voice replies for all messages.".to_owned(),
            ),
            "off" | "disable" => (
                VoiceMode::Off,
                "Voice mode disabled. Text-only replies.".to_owned(),
            ),
            "tts" => (
                VoiceMode::All,
                "Auto-TTS enabled.\nAll replies will include a voice message.".to_owned(),
            ),
            "channel" | "join" | "leave" => {
                return "Voice channels are not supported on this platform.".into();
            }
            _ => {
                let next = match now {
                    VoiceMode::Off => VoiceMode::VoiceOnly,
                    _ => VoiceMode::Off,
                };
                let toggled = match next {
                    VoiceMode::Off => "Voice mode disabled.",
                    _ => "Voice mode enabled.",
                };
                (next, format!("{toggled}\n\n{HOW_IT_WORKS}"))
            }
        };
        if next != VoiceMode::Off
            && let Err(why) = &self.services.media.speaker
        {
            return format!("🔇 Voice replies are not available here: {why}.");
        }
        match self
            .services
            .store
            .set_chat_setting(&self.key, VOICE, Some(next.stored().to_owned()))
            .await
        {
            Ok(()) => reply,
            Err(e) => {
                tracing::error!(error = %e, "session: /voice could not be saved");
                "⚠️ I could not save that (database error); please try again.".into()
            }
        }
    }

    /// The answer's spoken version where the chat's voice mode asks for one (and the agent
    /// did not speak already), or why there is none; `(None, None)` when none is asked.
    pub(super) async fn spoken_reply(
        &self,
        mode: VoiceMode,
        answer: &str,
        inputs: &[UserInput],
        messages: &[StoredMessage],
    ) -> (Option<OutboundFile>, Option<String>) {
        let heard_voice = inputs.iter().any(|i| {
            i.attachments
                .iter()
                .any(|a| matches!(a.kind, MediaKind::Voice | MediaKind::Audio))
        });
        let spoke_already = messages
            .iter()
            .any(|m| m.tool_name.as_deref() == Some(TOOL));
        let wanted = match mode {
            VoiceMode::Off => false,
            VoiceMode::VoiceOnly => heard_voice,
            VoiceMode::All => true,
        };
        if !wanted || spoke_already || answer.trim().is_empty() {
            return (None, None);
        }
        // The words only: the answer's files and directives are not read out.
        let words: String = answer
            .replace(crate::media::VOICE_DIRECTIVE, "")
            .lines()
            .filter(|line| !line.contains("MEDIA:"))
            .collect::<Vec<_>>()
            .join("\n");
        match self.services.media.spoken(&words).await {
            Ok((file, told)) => (Some(file), told),
            Err(why) => {
                tracing::warn!(session = %self.key, error = %why, "session: no spoken reply");
                (
                    None,
                    Some(format!("🔇 I could not speak this reply: {why}")),
                )
            }
        }
    }
}

/// The `text_to_speech` tool's name.
const TOOL: &str = "text_to_speech";

/// Hermes' rule: audio `text_to_speech` made this turn goes with the answer, when the
/// answer names no file itself.
pub(super) fn with_speech(answer: &str, messages: &[StoredMessage]) -> String {
    if answer.contains("MEDIA:") {
        return answer.to_owned();
    }
    let tags: Vec<String> = messages
        .iter()
        .filter(|m| m.role == "tool" && m.tool_name.as_deref() == Some(TOOL))
        .filter_map(|m| serde_json::from_str::<serde_json::Value>(m.content.as_deref()?).ok())
        .filter_map(|result| result["media_tag"].as_str().map(str::to_owned))
        .collect();
    if tags.is_empty() {
        return answer.to_owned();
    }
    format!("{answer}\n{}", tags.join("\n"))
}
