//! Files people send, end to end: the real daemon fetches them through teloxide from the fake
//! Bot API (`getFile`, then the file URL) and hands the model what it can read.

mod common;

use common::*;
use hermes_testkit::daemon::Daemon;
use hermes_testkit::eventually;
use hermes_testkit::llm::Reply;
use serde_json::Value;

/// The content of the last user message of the `n`-th model request (0-based).
fn user_content(w: &World, n: usize) -> Value {
    let requests = w.llm.requests();
    let messages = requests[n]["messages"].as_array().unwrap().clone();
    messages.iter().rev().find(|m| m["role"] == "user").unwrap()["content"].clone()
}

async fn model_asked(w: &World, count: usize) {
    let llm = w.llm.clone();
    eventually(WAIT, "the model to be asked", || {
        (llm.requests().len() >= count).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_photo_with_a_caption_reaches_the_model_as_an_image_part() {
    let w = World::allow_all().await;
    w.llm.push(Reply::text("a test pattern"));
    let _d = w.start();
    let photo = w.telegram.photo(hermes_testkit::sample_jpeg());
    w.telegram.dm_with(ALICE, Some("what is this?"), photo);
    assert_eq!(w.replies(ALICE, 1).await, ["a test pattern"]);
    let content = user_content(&w, 0);
    let parts = content.as_array().expect("content parts");
    assert_eq!(parts[0]["type"], "text");
    assert!(parts[0]["text"].as_str().unwrap().contains("what is this?"));
    assert_eq!(parts[1]["type"], "image_url");
    let url = parts[1]["image_url"]["url"].as_str().unwrap();
    use base64::Engine;
    let data = url.strip_prefix("data:image/jpeg;base64,").expect(url);
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(data)
        .unwrap();
    assert_eq!(
        bytes,
        hermes_testkit::sample_jpeg(),
        "the bytes the person sent"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_that_refuses_images_answers_without_them_and_says_so() {
    let w = World::allow_all().await;
    w.llm.push(Reply::ErrorSaying {
        status: 400,
        message: "this model does not support image input".into(),
    });
    w.llm
        .push(Reply::text("I can't see images with this model."));
    let _d = w.start();
    let photo = w.telegram.photo(hermes_testkit::sample_jpeg());
    w.telegram.dm_with(ALICE, Some("look"), photo);
    assert_eq!(
        w.replies(ALICE, 1).await,
        ["I can't see images with this model."]
    );
    let retried = user_content(&w, 1);
    let text = retried.as_str().expect("plain text, no image parts");
    assert!(
        text.contains("look") && text.contains("cannot see their images"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_short_text_document_is_inlined_and_a_binary_one_saved_for_the_tools() {
    let w = World::allow_all().await;
    w.llm.push(Reply::text("read the notes"));
    w.llm.push(Reply::text("read the report"));
    let _d = w.start();
    // About 60 KB of text.
    let notes: String = (0..2500)
        .map(|i| format!("line {i:04} of the notes\n"))
        .collect();
    assert!(notes.len() > 50_000 && notes.len() < 100 * 1024);
    let doc = w
        .telegram
        .document("notes.txt", "text/plain", notes.clone().into_bytes());
    w.telegram.dm_with(ALICE, None, doc);
    w.replies(ALICE, 1).await;
    let text = user_content(&w, 0).as_str().unwrap().to_owned();
    assert!(text.contains("notes.txt") && text.contains("line 2499 of the notes"));

    let pdf: Vec<u8> = b"%PDF-1.7\n\x00\x01binary".to_vec();
    let doc = w
        .telegram
        .document("report.pdf", "application/pdf", pdf.clone());
    w.telegram.dm_with(ALICE, Some("summarise it"), doc);
    w.replies(ALICE, 2).await;
    let text = user_content(&w, 1).as_str().unwrap().to_owned();
    let path = text
        .split("saved at ")
        .nth(1)
        .and_then(|rest| rest.split(".]").next())
        .unwrap_or_else(|| panic!("{text}"));
    assert!(path.starts_with(&w.home.dir.join("cache/documents").display().to_string()));
    assert_eq!(std::fs::read(path).unwrap(), pdf);
}

/// Where the model was told the document of request `n` is kept.
fn saved_path(w: &World, n: usize) -> std::path::PathBuf {
    let text = user_content(w, n).as_str().unwrap().to_owned();
    let path = text
        .split("saved at ")
        .nth(1)
        .and_then(|rest| rest.split(".]").next())
        .unwrap_or_else(|| panic!("{text}"));
    path.into()
}

/// Alice sends a 21 MB document (past the public Bot API's 20 MB and what the gateway
/// holds in memory); once answered, it is kept whole under `cache/documents`. Its file id.
async fn a_big_document_is_kept_whole(w: &World) -> String {
    let bytes: Vec<u8> = (0..21 * 1024 * 1024u32).map(|i| (i % 253) as u8).collect();
    let doc = w
        .telegram
        .document("dataset.bin", "application/octet-stream", bytes.clone());
    let file_id = doc["document"]["file_id"].as_str().unwrap().to_owned();
    w.telegram.dm_with(ALICE, Some("load it"), doc);
    w.replies(ALICE, 1).await;
    let path = saved_path(w, 0);
    assert!(path.starts_with(w.home.dir.join("cache/documents")));
    assert!(std::fs::read(&path).unwrap() == bytes, "the whole file");
    file_id
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn through_a_local_bot_api_server_a_document_past_20_mb_is_kept_on_disk() {
    let w = World::allow_all().await;
    w.telegram.act_as_local_server(None);
    let _d = w.start();
    let file_id = a_big_document_is_kept_whole(&w).await;
    assert_eq!(w.telegram.downloads(&file_id), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_local_mode_the_servers_file_is_read_from_disk() {
    // `local_mode` joins the `extra:` of the Telegram section the home writes.
    let w = World::new(
        &["TELEGRAM_ALLOW_ALL_USERS=true"],
        "      local_mode: true\n",
    )
    .await;
    let server_files = w.home.dir.join("bot-api-server");
    w.telegram.act_as_local_server(Some(server_files.clone()));
    let _d = w.start();
    let file_id = a_big_document_is_kept_whole(&w).await;
    assert_eq!(
        w.telegram.downloads(&file_id),
        0,
        "read from disk, not downloaded"
    );
    // A small photo goes the same way.
    let photo = w.telegram.photo(hermes_testkit::sample_jpeg());
    w.telegram.dm_with(ALICE, Some("and this"), photo);
    let replies = w.replies(ALICE, 2).await;
    assert!(!replies[1].contains("could not"), "{replies:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_cannot_be_read_gets_a_plain_answer_and_no_model_call() {
    let w = World::allow_all().await;
    let _d = w.start();
    let huge = w.telegram.document(
        "huge.bin",
        "application/octet-stream",
        vec![7u8; 21 * 1024 * 1024],
    );
    let file_id = huge["document"]["file_id"].as_str().unwrap().to_owned();
    w.telegram.dm_with(ALICE, None, huge);
    let notice = w.replies(ALICE, 1).await.remove(0);
    assert!(
        notice.contains("huge.bin") && notice.contains("too large"),
        "{notice}"
    );
    assert_eq!(
        w.telegram.downloads(&file_id),
        0,
        "refused before downloading"
    );

    let voice = w.telegram.voice(vec![1, 2, 3]);
    w.telegram.dm_with(ALICE, None, voice);
    let notice = w.replies(ALICE, 2).await.remove(1);
    assert!(notice.contains("speech-to-text"), "{notice}");
    settle().await;
    assert!(w.llm.requests().is_empty(), "nothing for the model to read");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_that_cannot_be_read_is_told_and_the_caption_still_answered() {
    let w = World::allow_all().await;
    let _d = w.start();
    // A voice note with a caption: the caption is answered, the voice gets a notice.
    let voice = w.telegram.voice(vec![1, 2, 3]);
    w.telegram.dm_with(ALICE, Some("and also this"), voice);
    model_asked(&w, 1).await;
    let replies = w.replies(ALICE, 2).await;
    assert!(
        replies.iter().any(|r| r.contains("speech-to-text")),
        "{replies:?}"
    );
    assert!(
        replies.iter().any(|r| r == "echo: and also this"),
        "{replies:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_voice_note_is_transcribed_echoed_and_answered() {
    let w = World::new(
        &[
            "TELEGRAM_ALLOW_ALL_USERS=true",
            "VOICE_TOOLS_OPENAI_KEY=sk-voice-test-0123456789",
        ],
        "",
    )
    .await;
    configure(
        &w,
        &format!("stt:\n  openai:\n    base_url: {}\n", w.llm.base_url()),
    );
    w.llm.transcribe_as("turn on the lights");
    w.llm.push(Reply::text("lights on"));
    let _d = w.start();
    let audio: Vec<u8> = (0..5000u32).map(|i| (i % 253) as u8).collect();
    let voice = w.telegram.voice(audio.clone());
    w.telegram.dm_with(ALICE, None, voice);
    let replies = w.replies(ALICE, 2).await;
    assert!(
        replies[0].contains("turn on the lights"),
        "the echo first: {replies:?}"
    );
    assert_eq!(replies[1], "lights on");
    let text = user_content(&w, 0).as_str().unwrap().to_owned();
    assert!(text.contains("\"turn on the lights\""), "{text}");
    let calls = w.llm.transcriptions();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].model.as_deref(), Some("whisper-1"));
    assert_eq!(calls[0].response_format.as_deref(), Some("text"));
    assert_eq!(
        calls[0].authorization.as_deref(),
        Some("Bearer sk-voice-test-0123456789")
    );
    assert_eq!(calls[0].audio, audio, "the voice note's bytes");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn media_tags_send_files_after_the_text_and_never_a_secret() {
    let w = World::allow_all().await;
    let dir = w.home.dir.join("work");
    let chart = dir.join("chart.png");
    let report = dir.join("report.pdf");
    let memo = dir.join("memo.ogg");
    std::fs::write(&chart, b"\x89PNG chart").unwrap();
    std::fs::write(&report, b"%PDF report").unwrap();
    std::fs::write(&memo, b"OggS memo").unwrap();
    w.llm.push(Reply::text(format!(
        "Here is the chart.\nMEDIA:{}\nThe report: `MEDIA:{}`\nMEDIA:{}\nAnd the keys: MEDIA:{}",
        chart.display(),
        report.display(),
        memo.display(),
        w.home.dir.join(".env").display()
    )));
    let _d = w.start();
    w.telegram.dm(ALICE, "send me the files");
    let t = w.telegram.clone();
    let files = eventually(WAIT, "three files", || {
        let sent = t.sent_files(ALICE);
        (sent.len() >= 3).then_some(sent)
    })
    .await;
    let text = w.replies(ALICE, 1).await.remove(0);
    assert!(text.starts_with("Here is the chart."), "{text}");
    assert!(!text.contains("MEDIA:"), "{text}");
    assert!(text.contains("not sent to chats"), "{text}");
    let sent: Vec<(&str, &str, &[u8])> = files
        .iter()
        .map(|f| (f.method.as_str(), f.name.as_str(), f.bytes.as_slice()))
        .collect();
    assert_eq!(
        sent,
        [
            ("sendphoto", "chart.png", &b"\x89PNG chart"[..]),
            ("senddocument", "report.pdf", &b"%PDF report"[..]),
            ("sendvoice", "memo.ogg", &b"OggS memo"[..]),
        ]
    );
    // The text went out before the files.
    let text_at = w.telegram.calls("sendMessage")[0].at;
    let photo_at = w.telegram.calls("sendPhoto")[0].at;
    assert!(text_at <= photo_at);
    settle().await;
    assert_eq!(w.telegram.sent_files(ALICE).len(), 3, "the .env never went");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_album_is_one_message() {
    let w = World::allow_all().await;
    w.llm.push(Reply::text("two pictures"));
    let _d = w.start();
    let mut first = w.telegram.photo(hermes_testkit::sample_jpeg());
    first["media_group_id"] = "album-1".into();
    let mut second = w.telegram.photo(vec![0xff, 0xd8, 0xff, 0xe1, 1, 2, 3]);
    second["media_group_id"] = "album-1".into();
    w.telegram.dm_with(ALICE, Some("compare these"), first);
    // The second item comes a moment later, as Telegram sends them.
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    w.telegram.dm_with(ALICE, None, second);
    assert_eq!(w.replies(ALICE, 1).await, ["two pictures"]);
    settle().await;
    assert_eq!(w.llm.requests().len(), 1, "one turn for the album");
    let content = user_content(&w, 0);
    let parts = content.as_array().expect("content parts");
    let images = parts.iter().filter(|p| p["type"] == "image_url").count();
    assert_eq!(images, 2, "{content}");
    assert!(parts[0]["text"].as_str().unwrap().contains("compare these"));
}

/// Append `yaml` to the test home's config.
fn configure(w: &World, yaml: &str) {
    let config = w.home.dir.join("config.yaml");
    let mut text = std::fs::read_to_string(&config).unwrap();
    // An `auxiliary:` the home has already (it turns titles off) takes the new lines.
    match yaml.split_once("auxiliary:\n") {
        Some((before, auxiliary)) if text.contains("\nauxiliary:\n") => {
            text = text.replacen("\nauxiliary:\n", &format!("\nauxiliary:\n{auxiliary}"), 1);
            text.push_str(before);
        }
        _ => text.push_str(yaml),
    }
    std::fs::write(&config, text).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_text_mode_a_vision_model_describes_the_photo_first() {
    let w = World::allow_all().await;
    configure(
        &w,
        "agent:\n  image_input_mode: text\nauxiliary:\n  vision:\n    model: fake-vision\n",
    );
    w.llm.push(Reply::text("A red square on white."));
    w.llm.push(Reply::text("It is a red square."));
    let _d = w.start();
    let photo = w.telegram.photo(hermes_testkit::sample_jpeg());
    w.telegram.dm_with(ALICE, Some("what is it?"), photo);
    assert_eq!(w.replies(ALICE, 1).await, ["It is a red square."]);
    let requests = w.llm.requests();
    assert_eq!(requests[0]["model"], "fake-vision");
    assert!(
        requests[0]["messages"]
            .to_string()
            .contains("data:image/jpeg;base64,")
    );
    let text = user_content(&w, 1).as_str().expect("text only").to_owned();
    assert!(
        text.contains("what is it?") && text.contains("A red square on white."),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_auto_mode_a_refused_image_is_described_by_the_vision_model() {
    let w = World::allow_all().await;
    configure(&w, "auxiliary:\n  vision:\n    model: fake-vision\n");
    w.llm.push(Reply::ErrorSaying {
        status: 400,
        message: "image input is not supported".into(),
    });
    w.llm.push(Reply::text("A cat on a sofa."));
    w.llm.push(Reply::text("That is a cat."));
    let _d = w.start();
    let photo = w.telegram.photo(hermes_testkit::sample_jpeg());
    w.telegram.dm_with(ALICE, Some("look"), photo);
    assert_eq!(w.replies(ALICE, 1).await, ["That is a cat."]);
    let requests = w.llm.requests();
    assert_eq!(requests.len(), 3);
    assert_eq!(requests[1]["model"], "fake-vision");
    let text = user_content(&w, 2).as_str().expect("text only").to_owned();
    assert!(text.contains("A cat on a sofa."), "{text}");
}

/// A turn that runs `echo one` and `echo two` with `display.tool_progress: mode`, until its
/// answer ("done") is in the chat; the daemon is returned to keep it running.
async fn two_commands_with_progress(mode: &str) -> (World, Daemon) {
    let w = World::allow_all().await;
    configure(&w, &format!("display:\n  tool_progress: {mode}\n"));
    w.llm.push(Reply::terminal("echo one"));
    w.llm.push(Reply::terminal("echo two"));
    w.llm.push(Reply::text("done"));
    let daemon = w.start();
    w.telegram.dm(ALICE, "run two things");
    let t = w.telegram.clone();
    eventually(WAIT, "the answer", || {
        t.sent_texts(ALICE)
            .contains(&"done".to_string())
            .then_some(())
    })
    .await;
    (w, daemon)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_progress_is_one_message_edited_as_tools_start() {
    let (w, _d) = two_commands_with_progress("all").await;
    let sent = w.telegram.sent_texts(ALICE);
    assert_eq!(sent.len(), 2, "{sent:?}");
    assert!(
        sent[0].contains("terminal") && sent[0].contains("echo one"),
        "{sent:?}"
    );
    let progress_id = w.telegram.calls("sendMessage")[0].params["_message_id"]
        .as_i64()
        .unwrap();
    let t = w.telegram.clone();
    let edited = eventually(WAIT, "the progress edit", || {
        t.calls("editMessageText")
            .into_iter()
            .filter(|c| c.params["message_id"].as_i64() == Some(progress_id))
            .filter_map(|c| c.params["text"].as_str().map(str::to_owned))
            .find(|text| text.contains("echo two"))
    })
    .await;
    assert!(edited.contains("echo one"), "{edited}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_progress_new_shows_a_tool_once_while_it_repeats() {
    let (w, _d) = two_commands_with_progress("new").await;
    settle().await;
    let sent = w.telegram.sent_texts(ALICE);
    assert!(
        sent[0].contains("echo one") && !sent[0].contains("echo two"),
        "{sent:?}"
    );
    assert!(w.telegram.calls("editMessageText").is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_steer_mode_a_photo_waits_for_its_own_turn() {
    let w = World::allow_all().await;
    configure(&w, "display:\n  busy_input_mode: steer\n");
    w.llm.push(Reply::terminal("sleep 1"));
    w.llm.push(Reply::text("slept"));
    w.llm.push(Reply::text("a test pattern"));
    let _d = w.start();
    w.telegram.dm(ALICE, "sleep a second");
    model_asked(&w, 1).await;
    let photo = w.telegram.photo(hermes_testkit::sample_jpeg());
    w.telegram.dm_with(ALICE, Some("and this?"), photo);
    assert_eq!(w.replies(ALICE, 2).await, ["slept", "a test pattern"]);
    let content = user_content(&w, 2);
    let parts = content.as_array().expect("the photo in its own turn");
    assert!(parts.iter().any(|p| p["type"] == "image_url"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_carries_at_most_ten_images() {
    let w = World::allow_all().await;
    w.llm.push(Reply::text("many pictures"));
    let _d = w.start();
    for n in 0..11 {
        let mut photo = w.telegram.photo(hermes_testkit::sample_jpeg());
        photo["media_group_id"] = "big-album".into();
        let caption = (n == 0).then_some("all of these");
        w.telegram.dm_with(ALICE, caption, photo);
    }
    let replies = w.replies(ALICE, 2).await;
    assert!(
        replies.iter().any(|r| r.contains("at most 10 images")),
        "{replies:?}"
    );
    assert!(
        replies.contains(&"many pictures".to_string()),
        "{replies:?}"
    );
    let content = user_content(&w, 0);
    let images = content
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["type"] == "image_url")
        .count();
    assert_eq!(images, 10);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_photo_telegram_refuses_goes_as_a_document() {
    let w = World::allow_all().await;
    w.llm.push(w.home.reply_sending(
        "panorama.png",
        b"\x89PNG a very wide picture",
        "Here it is.",
    ));
    w.telegram
        .fail_next("sendphoto", hermes_testkit::telegram::Fault::PhotoInvalid);
    let _d = w.start();
    w.ask("send the panorama").await;
    let sent = hermes_testkit::eventually(WAIT, "the picture as a document", || {
        w.telegram.sent_files(ALICE).into_iter().next()
    })
    .await;
    assert_eq!(sent.method, "senddocument");
    assert_eq!(sent.bytes, b"\x89PNG a very wide picture");
    assert_eq!(
        w.telegram.calls("sendphoto").len(),
        1,
        "the photo was tried first"
    );
}
