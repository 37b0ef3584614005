//! `stt.*` and `tts.*` (Hermes' names): which speech-to-text and text-to-speech provider,
//! its endpoint, model and key; a provider Hermes names but the gateway does not build is a
//! warning, and the reason the person will be told.

use super::yaml::YamlReader;
use super::*;

/// `stt.*`: the provider (Hermes' names), its endpoint and key.
pub(super) fn read_stt(
    y: &mut YamlReader,
    env: &EnvVars,
    main_provider: Option<&str>,
    problems: &mut Vec<Problem>,
) -> SttConfig {
    let enabled = y.boolean("stt.enabled", problems).unwrap_or(true);
    let echo_transcripts = y
        .boolean("stt_echo_transcripts", problems)
        .or_else(|| y.boolean("stt.echo_transcripts", problems))
        .unwrap_or(true);
    let provider = y
        .string("stt.provider", problems)
        .map(|p| p.trim().to_ascii_lowercase());
    let language = y
        .string("stt.language", problems)
        .filter(|l| !l.trim().is_empty());
    const HOW: &str = "set `stt.provider: openai` (VOICE_TOOLS_OPENAI_KEY), `groq` (GROQ_API_KEY) or `local` (a Whisper-compatible server, `stt.local.base_url`) in config.yaml";
    let url = |y: &mut YamlReader,
               key: &str,
               env_name: &str,
               default: &str,
               problems: &mut Vec<Problem>| {
        let url = y
            .string(key, problems)
            .or_else(|| env.value(env_name))
            .unwrap_or_else(|| default.into());
        if let Err(e) = validate_http_url(&url) {
            problems.push(Problem::error(key, e));
        }
        url.trim_end_matches('/').to_owned()
    };
    let openai = match (enabled, provider.as_deref()) {
        (false, _) => Err("speech-to-text is turned off (`stt.enabled: false`)".to_owned()),
        (true, None | Some("openai")) => {
            let model = y
                .string("stt.openai.model", problems)
                .or_else(|| env.value("STT_OPENAI_MODEL"))
                .unwrap_or_else(|| "whisper-1".into());
            let base_url = url(
                y,
                "stt.openai.base_url",
                "STT_OPENAI_BASE_URL",
                "https://api.openai.com/v1",
                problems,
            );
            let api_key = y
                .string("stt.openai.api_key", problems)
                .or_else(|| env.value("VOICE_TOOLS_OPENAI_KEY"))
                .or_else(|| {
                    // OPENAI_API_KEY only when it is known to be OpenAI's: a `custom`
                    // provider reads it for its own endpoint, and that key must not go to
                    // another service with people's voices.
                    (main_provider == Some("openai"))
                        .then(|| env.value("OPENAI_API_KEY"))
                        .flatten()
                });
            match api_key {
                Some(key) => Ok(SttOpenAi {
                    provider: "openai".into(),
                    base_url,
                    api_key: Some(Secret::new(key)),
                    model,
                    language,
                }),
                None => Err(format!(
                    "speech-to-text has no API key; to enable it, {HOW}"
                )),
            }
        }
        (true, Some("groq")) => {
            let base_url = url(
                y,
                "stt.groq.base_url",
                "GROQ_BASE_URL",
                "https://api.groq.com/openai/v1",
                problems,
            );
            let model = env
                .value("STT_GROQ_MODEL")
                .unwrap_or_else(|| "whisper-large-v3-turbo".into());
            match env.value("GROQ_API_KEY") {
                Some(key) => Ok(SttOpenAi {
                    provider: "groq".into(),
                    base_url,
                    api_key: Some(Secret::new(key)),
                    model,
                    language,
                }),
                None => Err("speech-to-text uses Groq, but GROQ_API_KEY is not set in .env".into()),
            }
        }
        (true, Some("local")) => {
            let base_url = url(
                y,
                "stt.local.base_url",
                "HERMES_LOCAL_STT_URL",
                "http://127.0.0.1:8000/v1",
                problems,
            );
            Ok(SttOpenAi {
                provider: "local".into(),
                base_url,
                api_key: None,
                model: y
                    .string("stt.local.model", problems)
                    .unwrap_or_else(|| "base".into()),
                language: y
                    .string("stt.local.language", problems)
                    .filter(|l| !l.trim().is_empty())
                    .or(language),
            })
        }
        (true, Some(other)) => {
            problems.push(Problem::warning(
                "stt.provider",
                format!("{other:?} is not built into hermes-gateway; voice messages are not transcribed (use openai, groq or local)"),
            ));
            Err(format!(
                "the speech-to-text provider {other:?} is not available here; to enable it, {HOW}"
            ))
        }
    };
    SttConfig {
        openai,
        echo_transcripts,
    }
}

/// `tts.*`: the provider (Hermes' names; only `openai`, any OpenAI-compatible
/// `/audio/speech`, is built in), its endpoint, voice and key.
pub(super) fn read_tts(
    y: &mut YamlReader,
    env: &EnvVars,
    main_provider: Option<&str>,
    problems: &mut Vec<Problem>,
) -> TtsConfig {
    const HOW: &str = "set `tts.provider: openai` (any OpenAI-compatible /audio/speech; `tts.openai.base_url`, VOICE_TOOLS_OPENAI_KEY) in config.yaml";
    let provider = y
        .string("tts.provider", problems)
        .map(|p| p.trim().to_ascii_lowercase());
    let speech = match provider.as_deref() {
        None => Err(format!("text-to-speech is not set up; to enable it, {HOW}")),
        Some("openai") => {
            let base_url = y
                .string("tts.openai.base_url", problems)
                .unwrap_or_else(|| "https://api.openai.com/v1".into());
            if let Err(e) = validate_http_url(&base_url) {
                problems.push(Problem::error("tts.openai.base_url", e));
            }
            let api_key = y
                .string("tts.openai.api_key", problems)
                .or_else(|| env.value("VOICE_TOOLS_OPENAI_KEY"))
                .or_else(|| {
                    // OPENAI_API_KEY only when it is known to be OpenAI's: a `custom`
                    // provider reads it for its own endpoint, and that key must not go to
                    // another service with people's voices.
                    (main_provider == Some("openai"))
                        .then(|| env.value("OPENAI_API_KEY"))
                        .flatten()
                });
            let speed = y
                .float("tts.openai.speed", problems)
                .or_else(|| y.float("tts.speed", problems))
                .filter(|s| (*s - 1.0).abs() > f64::EPSILON)
                .map(|s| s.clamp(0.25, 4.0));
            let model = y
                .string("tts.openai.model", problems)
                .unwrap_or_else(|| "gpt-4o-mini-tts".into());
            let voice = y
                .string("tts.openai.voice", problems)
                .unwrap_or_else(|| "alloy".into());
            let max_text_length = y
                .number("tts.openai.max_text_length", problems)
                .filter(|n| *n > 0)
                .unwrap_or(4_096) as usize;
            match api_key {
                Some(key) => Ok(TtsOpenAi {
                    base_url: base_url.trim_end_matches('/').to_owned(),
                    api_key: Secret::new(key),
                    model,
                    voice,
                    speed,
                    max_text_length,
                }),
                None => Err(format!(
                    "text-to-speech has no API key; to enable it, {HOW}"
                )),
            }
        }
        Some(other) => {
            problems.push(Problem::warning(
                "tts.provider",
                format!("{other:?} is not built into hermes-gateway; voice replies are off (use openai: any OpenAI-compatible /audio/speech)"),
            ));
            Err(format!(
                "the text-to-speech provider {other:?} is not built into hermes-gateway; to enable voice replies, {HOW}"
            ))
        }
    };
    TtsConfig { speech }
}
