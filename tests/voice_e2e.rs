//! Voice both ways, end to end against the fake Telegram and the fake OpenAI-compatible
//! `/audio/speech` and `/audio/transcriptions`: `/voice` (Hermes' modes and texts), spoken
//! replies as voice messages (`sendVoice`, Ogg/Opus checked), the `text_to_speech` tool,
//! a provider that answers MP3 said plainly (an audio file, never a silent fallback), a
//! failing one said under the text, and speech-to-text through `local` and `groq`.

mod common;

use common::*;
use hermes_testkit::llm::{Reply, Voice};
use serde_json::json;

const KEY: &str = "sk-voice-test-0123456789";

/// A world whose text-to-speech is the fake's `/audio/speech` (and speech-to-text its
/// transcriptions: `stt_yaml` under `stt:`, the fake's address for `URL`).
async fn speaking(stt_yaml: &str) -> World {
    let w = World::new(
        &[
            "TELEGRAM_ALLOW_ALL_USERS=true",
            &format!("VOICE_TOOLS_OPENAI_KEY={KEY}"),
            "GROQ_API_KEY=gsk-groq-test",
        ],
        "",
    )
    .await;
    let yaml = format!(
        "tts:\n  provider: openai\n  openai:\n    base_url: {url}\n    voice: nova\nstt:\n{}",
        stt_yaml.replace("URL", &w.llm.base_url()),
        url = w.llm.base_url()
    );
    let path = w.home.dir.join("config.yaml");
    let text = std::fs::read_to_string(&path).unwrap() + &yaml;
    std::fs::write(&path, text).unwrap();
    w
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn voice_tts_speaks_every_reply_as_a_voice_message() {
    let w = speaking("  enabled: false\n").await;
    let _d = w.start();
    let status = visible(w.ask("/voice status").await.last().unwrap());
    assert_eq!(status, "Voice mode: Off (text only)");
    let set = visible(w.ask("/voice tts").await.last().unwrap());
    assert_eq!(
        set,
        "Auto-TTS enabled.\nAll replies will include a voice message."
    );
    w.llm
        .push(Reply::text("**Hello** there, see [the docs](https://x.y)"));
    let replies = w.ask("say hello").await;
    assert!(replies.last().unwrap().contains("Hello"), "{replies:?}");
    let voice = hermes_testkit::eventually(WAIT, "the voice message", || {
        w.telegram.sent_files(ALICE).into_iter().next()
    })
    .await;
    assert_eq!(voice.method, "sendvoice", "a voice bubble");
    assert!(voice.bytes.starts_with(b"OggS"), "Ogg/Opus");
    let speech = w.llm.speeches();
    assert_eq!(speech.len(), 1);
    assert_eq!(
        speech[0].authorization.as_deref(),
        Some(&*format!("Bearer {KEY}"))
    );
    assert_eq!(
        speech[0].body,
        json!({"model": "gpt-4o-mini-tts", "voice": "nova",
               "input": "Hello there, see the docs", "response_format": "opus"})
    );
    let status = visible(w.ask("/voice status").await.last().unwrap());
    assert_eq!(status, "Voice mode: TTS (voice reply to all messages)");
    let off = visible(w.ask("/voice off").await.last().unwrap());
    assert_eq!(off, "Voice mode disabled. Text-only replies.");
    w.ask("and now?").await;
    assert_eq!(w.llm.speeches().len(), 1, "text only again");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn voice_on_answers_a_voice_message_with_voice_and_text_with_text() {
    let w = speaking("  openai:\n    base_url: URL\n").await;
    w.llm.transcribe_as("what time is it");
    let _d = w.start();
    let on = visible(w.ask("/voice on").await.last().unwrap());
    assert!(
        on.starts_with("Voice mode enabled.\nI'll reply with voice when you send voice messages."),
        "{on}"
    );
    w.ask("a typed question").await;
    assert!(
        w.llm.speeches().is_empty(),
        "a typed message is answered in text"
    );
    let before = w.telegram.sent_texts(ALICE).len();
    let voice = w.telegram.voice(b"some voice".to_vec());
    w.telegram.dm_with(ALICE, None, voice);
    // The transcript's echo, then the answer.
    w.replies(ALICE, before + 2).await;
    let sent = hermes_testkit::eventually(WAIT, "the spoken answer", || {
        w.telegram.sent_files(ALICE).into_iter().next()
    })
    .await;
    assert_eq!(sent.method, "sendvoice");
    assert_eq!(
        w.llm.speeches()[0].body["input"],
        "echo: \"what time is it\""
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mp3_from_the_provider_is_an_audio_file_and_said_so() {
    let w = speaking("  enabled: false\n").await;
    w.llm.speak_as(Voice::AlwaysMp3);
    let _d = w.start();
    w.ask("/voice tts").await;
    let replies = w.ask("hello").await;
    let text = visible(replies.last().unwrap());
    assert!(
        text.contains("echo: hello")
            && text.contains("goes as an audio file, not a voice message: a voice message needs Ogg/Opus audio, and this is MP3"),
        "{text}"
    );
    let sent = hermes_testkit::eventually(WAIT, "the audio file", || {
        w.telegram.sent_files(ALICE).into_iter().next()
    })
    .await;
    assert_eq!(
        sent.method, "sendaudio",
        "not a voice bubble: {}",
        sent.name
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_speech_service_is_said_under_the_text() {
    let w = speaking("  enabled: false\n").await;
    w.llm.speak_as(Voice::Failing);
    let _d = w.start();
    w.ask("/voice tts").await;
    let text = visible(w.ask("hello").await.last().unwrap());
    assert!(
        text.starts_with("echo: hello")
            && text.contains(
                "🔇 I could not speak this reply: the text-to-speech service answered 500"
            ),
        "{text}"
    );
    assert!(w.telegram.sent_files(ALICE).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_text_to_speech_tool_sends_its_audio_with_the_answer() {
    let w = speaking("  enabled: false\n").await;
    w.llm.push(Reply::ToolCall {
        name: "text_to_speech".into(),
        arguments: json!({"text": "Good morning!"}),
    });
    w.llm.push(Reply::text("Here you go."));
    let _d = w.start();
    let replies = w.ask("say good morning").await;
    assert_eq!(visible(replies.last().unwrap()), "Here you go.");
    let sent = hermes_testkit::eventually(WAIT, "the tool's audio", || {
        w.telegram.sent_files(ALICE).into_iter().next()
    })
    .await;
    assert_eq!(sent.method, "sendvoice");
    let requests = w.llm.requests();
    let tools: Vec<&str> = requests[0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["function"]["name"].as_str())
        .collect();
    assert!(tools.contains(&"text_to_speech"));
    let result = requests[1]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .unwrap()["content"]
        .as_str()
        .unwrap()
        .to_owned();
    let result: serde_json::Value = serde_json::from_str(&result).unwrap();
    assert_eq!(result["success"], true);
    assert_eq!(result["voice_compatible"], true);
    assert!(
        result["media_tag"]
            .as_str()
            .unwrap()
            .starts_with("[[audio_as_voice]]\nMEDIA:"),
        "{result}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_text_to_speech_voice_is_refused_plainly_and_the_tool_is_not_offered() {
    let w = World::allow_all().await;
    let _d = w.start();
    w.ask("hi").await;
    let refused = visible(w.ask("/voice on").await.last().unwrap());
    assert!(
        refused
            .starts_with("🔇 Voice replies are not available here: text-to-speech is not set up"),
        "{refused}"
    );
    let requests = w.llm.requests();
    assert!(!requests[0]["tools"].to_string().contains("text_to_speech"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn speech_to_text_through_a_local_server_and_groq() {
    // Local: a Whisper-compatible server here, no key sent, the language given.
    let w = World::allow_all().await;
    let path = w.home.dir.join("config.yaml");
    let text = std::fs::read_to_string(&path).unwrap()
        + &format!(
            "stt:\n  provider: local\n  local:\n    base_url: {}\n    model: small\n    language: pt\n",
            w.llm.base_url()
        );
    std::fs::write(&path, text).unwrap();
    w.llm.transcribe_as("olá");
    let _d = w.start();
    let voice = w.telegram.voice(b"voz".to_vec());
    w.telegram.dm_with(ALICE, None, voice);
    w.replies(ALICE, 2).await;
    let calls = w.llm.transcriptions();
    assert_eq!(calls.len(), 1);
    assert_eq!(
        calls[0].authorization, None,
        "no key goes to a local server"
    );
    assert_eq!(calls[0].model.as_deref(), Some("small"));
    assert_eq!(calls[0].language.as_deref(), Some("pt"));

    // Groq: its own key, Hermes' default model.
    let g = World::new(
        &[
            "TELEGRAM_ALLOW_ALL_USERS=true",
            "GROQ_API_KEY=gsk-groq-test",
            "GROQ_BASE_URL=FAKE_ADDRESS",
        ],
        "",
    )
    .await;
    let env = g.home.dir.join(".env");
    let text = std::fs::read_to_string(&env)
        .unwrap()
        .replace("FAKE_ADDRESS", &g.llm.base_url());
    std::fs::write(&env, text).unwrap();
    let path = g.home.dir.join("config.yaml");
    let text = std::fs::read_to_string(&path).unwrap() + "stt:\n  provider: groq\n";
    std::fs::write(&path, text).unwrap();
    g.llm.transcribe_as("hola");
    let _g = g.start();
    let voice = g.telegram.voice(b"voz".to_vec());
    g.telegram.dm_with(ALICE, None, voice);
    g.replies(ALICE, 2).await;
    let calls = g.llm.transcriptions();
    assert_eq!(
        calls[0].authorization.as_deref(),
        Some("Bearer gsk-groq-test")
    );
    assert_eq!(calls[0].model.as_deref(), Some("whisper-large-v3-turbo"));
}
