//! Discord, end to end: the real daemon, serenity's gateway client and the adapter's REST
//! client against the fake Discord (`hermes_testkit::discord`): slash commands, chunking,
//! typing, buttons, reconnects of every kind, 429s and files. Threads, channel overrides and
//! reactions are in `discord_channels_e2e.rs`; what every platform owes (streaming among
//! it) in `conformance_discord.rs`.

use std::time::{Duration, Instant};

use hermes_testkit::conformance::{Kit, PlatformFake};
use hermes_testkit::daemon::{Daemon, Home};
use hermes_testkit::discord::{FakeDiscord, GROUP_CHANNEL, Options, ResponseKind};
use hermes_testkit::eventually;
use hermes_testkit::llm::{FakeLlm, Reply, image_bytes, last_user_text};
use hermes_testkit::reset::When;
use hermes_testkit::telegram::FakeTelegram;

mod discord_kit;

use discord_kit::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slash_commands_are_registered_acknowledged_at_once_and_answered() {
    let kit = open_kit().await;
    kit.llm.push(Reply::text("**4**"));
    let _d = kit.start();
    let fake = kit.fake.clone();
    let names = eventually(WAIT, "the commands registered", || {
        let commands = fake.registered_commands();
        (!commands.is_empty()).then(|| {
            commands
                .iter()
                .map(|c| c["name"].as_str().unwrap_or_default().to_owned())
                .collect::<Vec<_>>()
        })
    })
    .await;
    for name in [
        "new", "reset", "stop", "status", "help", "approve", "deny", "ask",
    ] {
        assert!(names.iter().any(|n| n == name), "/{name} in {names:?}");
    }
    let alice = kit.fake.person(1);

    // `/status`: deferred as ephemeral, then answered in the deferred reply.
    let asked_at = Instant::now();
    let status = kit.fake.slash(GROUP_CHANNEL, &alice, "status", vec![]);
    let (kind, data, acked_at) = eventually(WAIT, "the status acknowledged", || {
        fake.callbacks(&status).first().cloned()
    })
    .await;
    assert_eq!(kind, 5);
    assert_eq!(data["flags"], 64, "ephemeral, as in Hermes");
    assert!(acked_at.duration_since(asked_at) < Duration::from_secs(3));
    let answer = eventually(WAIT, "the status answer", || {
        fake.interaction_responses(&status).into_iter().next()
    })
    .await;
    assert_eq!(
        answer.kind,
        ResponseKind::Original,
        "the deferred reply is filled in"
    );
    assert!(answer.content.unwrap_or_default().contains("Status"));

    // `/ask`: a question for the model, answered for everyone to see.
    let ask = kit.fake.slash(
        GROUP_CHANNEL,
        &alice,
        "ask",
        vec![("question", "what is 2+2?")],
    );
    let answer = eventually(WAIT, "the /ask answer", || {
        fake.interaction_responses(&ask)
            .into_iter()
            .find(|r| r.content.is_some())
    })
    .await;
    assert_eq!(answer.kind, ResponseKind::Original);
    assert_eq!(answer.content.as_deref(), Some("**4**"));
    assert_eq!(answer.flags & 64, 0, "not ephemeral");
    assert_eq!(fake.callbacks(&ask)[0].0, 5);
    assert_eq!(last_user_text(&kit.llm.requests()[0]), "what is 2+2?");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_answer_is_cut_at_2000_characters_and_only_the_first_part_is_a_reply() {
    let kit = open_kit().await;
    let paragraphs: String = (0..60)
        .map(|i| {
            format!("Paragraph {i}: @everyone should read *this* part, with <@&1234> too.\n\n")
        })
        .collect();
    kit.llm.push(Reply::text(paragraphs));
    let _d = kit.start();
    let alice = kit.fake.person(1);
    let dm = kit.fake.dm_chat(&alice);
    let question = kit.fake.message(&dm, &alice, "write a lot", true);
    let fake = kit.fake.clone();
    let sent = eventually(WAIT, "every part", || {
        let sent = fake.raw_messages(&dm);
        sent.last()
            .is_some_and(|m| m.content.contains("Paragraph 59"))
            .then_some(sent)
    })
    .await;
    assert!(sent.len() >= 2);
    for (n, part) in sent.iter().enumerate() {
        assert!(part.content.chars().count() <= 2000);
        let expected = (n == 0).then_some(question.as_str());
        assert_eq!(part.reference.as_deref(), expected, "part {n}");
        let mentions = part.allowed_mentions.clone().unwrap_or_default();
        assert_eq!(mentions["parse"], serde_json::json!([]), "nobody is pinged");
    }
    let all: String = kit.fake.shown(&dm).join("\n");
    for i in 0..60 {
        assert!(all.contains(&format!("Paragraph {i}:")), "paragraph {i}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typing_is_shown_again_every_eight_seconds_while_a_turn_runs() {
    let kit = open_kit().await;
    kit.llm.push(Reply::Delayed(
        Duration::from_secs(10),
        Box::new(Reply::text("that took a while")),
    ));
    let _d = kit.start();
    let alice = kit.fake.person(1);
    let dm = kit.fake.dm_chat(&alice);
    kit.fake.message(&dm, &alice, "think hard", true);
    kit.shown(&dm, 1).await;
    let typing: Vec<Instant> = kit
        .fake
        .working(&dm)
        .into_iter()
        .map(|(at, _)| at)
        .collect();
    assert!(typing.len() >= 2, "shown again: {typing:?}");
    let gap = typing[1].duration_since(typing[0]);
    assert!(
        gap >= Duration::from_secs(6) && gap <= Duration::from_secs(10),
        "refreshed about every 8 s: {gap:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_press_is_a_deferred_update_and_the_prompt_then_shows_the_outcome() {
    let fake = FakeDiscord::start().await;
    let allowed = format!("DISCORD_ALLOWED_USERS={}", fake.person(1));
    let kit = Kit::new(fake, BIN, &[allowed], "").await;
    let target = kit.victim("pressed");
    kit.llm
        .push(Reply::terminal(&format!("rm -rf {}", target.display())));
    kit.llm.push(Reply::text("done"));
    let _d = kit.start();
    let (alice, mallory) = (kit.fake.person(1), kit.fake.person(3));
    kit.fake.message(GROUP_CHANNEL, &alice, "clean up", true);
    let fake = kit.fake.clone();
    let prompt = eventually(WAIT, "the prompt", || {
        fake.prompts(GROUP_CHANNEL).first().cloned()
    })
    .await;
    let labels: Vec<&str> = prompt.choices.iter().map(|(l, _)| l.as_str()).collect();
    assert!(labels.contains(&"Deny"), "{labels:?}");
    // The prompt (on Discord tool progress shows too, as in Hermes).
    let shown = kit
        .fake
        .raw_messages(GROUP_CHANNEL)
        .into_iter()
        .find(|m| m.id == prompt.message_id)
        .expect("the prompt's message");
    let deny = &shown.components[0]["components"];
    let styles: Vec<_> = deny
        .as_array()
        .unwrap()
        .iter()
        .map(|b| (b["label"].clone(), b["style"].clone()))
        .collect();
    assert!(
        styles.iter().any(|(l, s)| l == "Deny" && s == 4),
        "Deny is red: {styles:?}"
    );

    // A stranger's press is taken, and only they are told no.
    let stranger = kit
        .fake
        .press(GROUP_CHANNEL, &mallory, &prompt, "Allow once");
    let notice = eventually(WAIT, "the stranger's notice", || {
        fake.interaction_responses(&stranger).into_iter().next()
    })
    .await;
    assert_eq!(fake.callbacks(&stranger)[0].0, 6);
    assert_eq!(notice.flags & 64, 64, "ephemeral");
    assert!(notice.content.unwrap_or_default().contains("not allowed"));
    assert!(target.exists());

    let press = kit.fake.press(GROUP_CHANNEL, &alice, &prompt, "Allow once");
    eventually(WAIT, "the command", || (!target.exists()).then_some(())).await;
    assert_eq!(fake.callbacks(&press)[0].0, 6, "a deferred update");
    let settled = eventually(WAIT, "the prompt settled", || {
        let message = fake
            .raw_messages(GROUP_CHANNEL)
            .into_iter()
            .find(|m| m.id == prompt.message_id)?;
        (!message.history.is_empty()).then_some(message)
    })
    .await;
    assert_eq!(
        settled.components,
        serde_json::json!([]),
        "the buttons are gone"
    );
    assert!(
        settled.content.contains("Allowed once"),
        "{}",
        settled.content
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_sent_while_the_connection_was_down_arrives_with_the_resume_and_is_answered_once()
{
    let kit = open_kit().await;
    kit.llm.push(Reply::text("first"));
    kit.llm.push(Reply::text("second"));
    let _d = kit.start();
    let (alice, dm) = after_one_exchange(&kit).await;
    kit.fake.disconnect();
    kit.fake.message(&dm, &alice, "are you still there?", true);
    assert_eq!(kit.shown(&dm, 2).await[1], "second");
    assert!(kit.fake.resumes() >= 1, "resumed, not identified again");
    assert_eq!(kit.fake.identifies().len(), 1);
    settle().await;
    assert_eq!(kit.fake.shown(&dm).len(), 2, "answered once");
    assert_eq!(kit.llm.requests().len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_an_invalid_session_the_missed_message_is_fetched_and_answered_once() {
    let kit = open_kit().await;
    kit.llm.push(Reply::text("first"));
    kit.llm.push(Reply::text("caught up"));
    let _d = kit.start();
    let (alice, dm) = after_one_exchange(&kit).await;
    kit.fake.invalidate_session();
    kit.fake.message(&dm, &alice, "did you miss this?", true);
    assert_eq!(kit.shown(&dm, 2).await[1], "caught up");
    assert_eq!(kit.fake.identifies().len(), 2, "a fresh IDENTIFY");
    assert_eq!(last_user_text(&kit.llm.requests()[1]), "did you miss this?");
    settle().await;
    assert_eq!(kit.fake.shown(&dm).len(), 2, "answered once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gateway_that_stops_acknowledging_heartbeats_is_left_and_nothing_is_lost() {
    let fake = FakeDiscord::start_with(Options {
        heartbeat_interval_ms: 700,
        ..Options::default()
    })
    .await;
    let kit = kit_with(fake, &[], "").await;
    kit.llm.push(Reply::text("first"));
    kit.llm.push(Reply::text("back again"));
    let _d = kit.start();
    let (alice, dm) = after_one_exchange(&kit).await;
    kit.fake.stop_acking(true);
    let fake = kit.fake.clone();
    eventually(WAIT, "the silent gateway left", || {
        (!fake.connected()).then_some(())
    })
    .await;
    kit.fake.message(&dm, &alice, "hello again", true);
    kit.fake.stop_acking(false);
    assert_eq!(kit.shown(&dm, 2).await[1], "back again");
    settle().await;
    assert_eq!(kit.fake.shown(&dm).len(), 2, "answered once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_written_while_the_daemon_was_stopped_is_answered_when_it_starts() {
    let kit = open_kit().await;
    kit.llm.push(Reply::text("first"));
    kit.llm.push(Reply::text("you wrote while I was away"));
    let mut first = kit.start();
    let (alice, dm) = after_one_exchange(&kit).await;
    // Killed once the answer is marked sent (a kill before the mark sends it again).
    kit.home.outbox_drained(WAIT).await;
    first.kill();
    let fake = kit.fake.clone();
    eventually(WAIT, "the gateway to notice", || {
        (!fake.connected()).then_some(())
    })
    .await;
    kit.fake.message(&dm, &alice, "anyone home?", true);
    let _second = kit.start();
    assert_eq!(kit.shown(&dm, 2).await[1], "you wrote while I was away");
    assert_eq!(last_user_text(&kit.llm.requests()[1]), "anyone home?");
    settle().await;
    assert_eq!(kit.fake.shown(&dm).len(), 2, "answered once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_429_is_waited_out_for_as_long_as_discord_says() {
    let kit = open_kit().await;
    kit.llm.push(Reply::text("after the wait"));
    kit.llm.push(Reply::text("after the global wait"));
    let _d = kit.start();
    let alice = kit.fake.person(1);
    let dm = kit.fake.dm_chat(&alice);
    let messages = format!("/channels/{dm}/messages");
    kit.fake.rate_limit_next(&messages, 1, 2.0, false);
    kit.fake.message(&dm, &alice, "hi", true);
    assert_eq!(kit.shown(&dm, 1).await, ["after the wait"]);
    kit.fake.rate_limit_next(&messages, 1, 1.5, true);
    kit.fake.message(&dm, &alice, "again", true);
    assert_eq!(kit.shown(&dm, 2).await[1], "after the global wait");
    let posts: Vec<_> = kit
        .fake
        .calls(&messages)
        .into_iter()
        .filter(|c| c.method == "POST")
        .collect();
    assert_eq!(posts.len(), 4, "{posts:?}");
    assert!(posts[0].refused && !posts[1].refused && posts[2].refused && !posts[3].refused);
    let waited = posts[1].at.duration_since(posts[0].at);
    assert!(waited >= Duration::from_secs(2), "waited {waited:?}");
    let waited = posts[3].at.duration_since(posts[2].at);
    assert!(waited >= Duration::from_millis(1500), "waited {waited:?}");
    // Every call reached the configured root: discord.com is not reachable from here, and
    // the fake saw discovery, the gateway URL and the sends.
    for path in ["/users/@me", "/gateway/bot", "/gateway"] {
        let calls = kit.fake.calls(path);
        assert!(calls.iter().any(|c| c.path == path), "{path}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_picture_reaches_the_model_and_a_file_goes_out_as_an_attachment() {
    let kit = open_kit().await;
    kit.llm.push(
        kit.home
            .reply_sending("chart.png", b"\x89PNG chart", "A cat. Here is a chart."),
    );
    let _d = kit.start();
    let alice = kit.fake.person(1);
    let dm = kit.fake.dm_chat(&alice);
    let jpeg = hermes_testkit::sample_jpeg();
    kit.fake.message_with_attachments(
        &dm,
        &alice,
        "what is this?",
        true,
        vec![("cat.jpg", "image/jpeg", jpeg.clone())],
    );
    let fake = kit.fake.clone();
    let files = eventually(WAIT, "the file sent", || {
        let files = fake.sent_files(&dm);
        (!files.is_empty()).then_some(files)
    })
    .await;
    assert_eq!(files, [("chart.png".to_owned(), b"\x89PNG chart".to_vec())]);
    assert_eq!(kit.fake.shown(&dm)[0], "A cat. Here is a chart.");
    let bytes = image_bytes(&kit.llm.requests()[0], 0).expect("an image part");
    assert_eq!(bytes, jpeg, "the bytes the person sent, from the CDN");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_discord_token_is_named_and_telegram_keeps_answering() {
    let telegram = FakeTelegram::start().await;
    let llm = FakeLlm::start().await;
    let fake = FakeDiscord::start().await;
    let dir = tempfile::tempdir().unwrap();
    let platforms = format!(
        "  telegram:\n    enabled: true\n    extra:\n      base_url: {}\n      poll_timeout: 2\n{}",
        telegram.base_url(),
        fake.platform_yaml()
    );
    let home = Home::with_platform(
        dir.path(),
        &llm.base_url(),
        &platforms,
        &[
            "TELEGRAM_BOT_TOKEN=123456:TEST-TOKEN",
            "TELEGRAM_ALLOW_ALL_USERS=true",
            "DISCORD_BOT_TOKEN=wrong.token.here",
        ],
        "",
    );
    llm.push(Reply::text("still here"));
    let daemon = Daemon::start(BIN, &home, &[]);
    telegram.dm(4242, "hi");
    let t = telegram.clone();
    eventually(WAIT, "Telegram's answer", || {
        (!t.sent_texts(4242).is_empty()).then_some(())
    })
    .await;
    let log = eventually(WAIT, "the refusal in the log", || {
        let log = daemon.log_text();
        log.contains("DISCORD_BOT_TOKEN").then_some(log)
    })
    .await;
    assert!(
        !log.contains("wrong.token.here"),
        "the token itself is never logged"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_messages_is_answered_in_the_order_it_was_written() {
    // serenity hands each gateway event to a task of its own; the adapter puts them back in
    // Discord's order before recording.
    let kit = kit_with(
        FakeDiscord::start().await,
        &[],
        "display:\n  busy_input_mode: queue\n",
    )
    .await;
    for n in 0..8 {
        kit.llm.push(Reply::text(format!("answer {n}")));
    }
    let _d = kit.start();
    let (alice, dm) = after_one_exchange(&kit).await;
    for n in 0..7 {
        kit.fake.message(&dm, &alice, &format!("message {n}"), true);
    }
    asked(&kit, 8).await;
    let order: Vec<String> = kit.llm.requests()[1..].iter().map(last_user_text).collect();
    let written: Vec<String> = (0..7).map(|n| format!("message {n}")).collect();
    assert_eq!(order, written);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_used_up_bucket_is_waited_out_before_discord_has_to_refuse() {
    let fake = FakeDiscord::start_with(Options {
        bucket_limit: 2,
        bucket_window: Duration::from_secs(2),
        ..Options::default()
    })
    .await;
    let kit = kit_with(fake, &[], "").await;
    let long: String = (0..250)
        .map(|i| format!("Line {i} of a long answer.\n\n"))
        .collect();
    kit.llm.push(Reply::text(long));
    let _d = kit.start();
    let alice = kit.fake.person(1);
    let dm = kit.fake.dm_chat(&alice);
    kit.fake.message(&dm, &alice, "write a lot", true);
    let fake = kit.fake.clone();
    eventually(WAIT, "every part", || {
        let shown = fake.shown(&dm);
        shown
            .last()
            .is_some_and(|m| m.contains("Line 249"))
            .then_some(())
    })
    .await;
    let posts: Vec<_> = kit
        .fake
        .calls(&format!("/channels/{dm}/messages"))
        .into_iter()
        .filter(|c| c.method == "POST")
        .collect();
    assert!(posts.len() >= 3, "{} parts", posts.len());
    assert!(
        posts.iter().all(|c| !c.refused),
        "no 429 was needed: {:?}",
        posts
            .iter()
            .map(|c| (c.at.duration_since(posts[0].at), c.refused))
            .collect::<Vec<_>>()
    );
    let third = posts[2].at.duration_since(posts[0].at);
    assert!(
        third >= Duration::from_millis(1500),
        "the bucket was waited out: {third:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_voice_message_is_fetched_from_the_cdn_transcribed_and_answered() {
    let kit = kit_with(
        FakeDiscord::start().await,
        &["VOICE_TOOLS_OPENAI_KEY=sk-voice-test-0123456789"],
        "",
    )
    .await;
    let config = kit.home.dir.join("config.yaml");
    let mut text = std::fs::read_to_string(&config).unwrap();
    text.push_str(&format!(
        "stt:\n  openai:\n    base_url: {}\n",
        kit.llm.base_url()
    ));
    std::fs::write(&config, text).unwrap();
    kit.llm.transcribe_as("turn on the lights");
    kit.llm.push(Reply::text("lights on"));
    let _d = kit.start();
    let alice = kit.fake.person(1);
    let dm = kit.fake.dm_chat(&alice);
    let audio: Vec<u8> = (0..5000u32).map(|i| (i % 253) as u8).collect();
    kit.fake.voice_note(&dm, &alice, audio.clone());
    let shown = kit.shown(&dm, 2).await;
    assert!(shown[0].contains("turn on the lights"), "echoed: {shown:?}");
    assert_eq!(shown[1], "lights on");
    let transcriptions = kit.llm.transcriptions();
    assert_eq!(transcriptions.len(), 1);
    assert_eq!(transcriptions[0].audio, audio, "the bytes from the CDN");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approve_as_text_works_on_discord_too() {
    let kit = open_kit().await;
    let target = kit.victim("by-text");
    kit.llm
        .push(Reply::terminal(&format!("rm -rf {}", target.display())));
    kit.llm.push(Reply::text("done"));
    let _d = kit.start();
    let alice = kit.fake.person(1);
    let dm = kit.fake.dm_chat(&alice);
    kit.fake.message(&dm, &alice, "clean up", true);
    let fake = kit.fake.clone();
    eventually(WAIT, "the prompt", || fake.prompts(&dm).first().cloned()).await;
    kit.fake.message(&dm, &alice, "/approve", true);
    eventually(WAIT, "the command", || (!target.exists()).then_some(())).await;
    eventually(WAIT, "the answer", || {
        fake.shown(&dm).iter().any(|s| s == "done").then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_background_process_reports_in_the_channel_it_was_started_from() {
    let kit = open_kit().await;
    kit.llm.push(Reply::ToolCall {
        name: "terminal".into(),
        arguments: serde_json::json!({"command": "sleep 1; echo done-marker", "background": true}),
    });
    kit.llm.push(Reply::text("started it"));
    let _d = kit.start();
    let alice = kit.fake.person(1);
    kit.fake
        .message(GROUP_CHANNEL, &alice, "run it in the background", true);
    let fake = kit.fake.clone();
    let report = eventually(WAIT, "the report", || {
        fake.shown(GROUP_CHANNEL)
            .into_iter()
            .find(|m| m.contains("finished"))
    })
    .await;
    assert!(report.contains("done-marker"), "{report}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn liveness_follows_the_heartbeats_discord_acknowledges() {
    let fake = FakeDiscord::start_with(Options {
        heartbeat_interval_ms: 500,
        ..Options::default()
    })
    .await;
    let kit = kit_with(fake, &[], "").await;
    let daemon = kit.start();
    assert!(kit.fake.wait_connected(WAIT).await);
    let addr = eventually(WAIT, "the HTTP address", || daemon.http_addr()).await;
    // Nothing happens but heartbeats for a while: liveness stays fresh all the same.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let ready: serde_json::Value = reqwest::get(format!("http://{addr}/readyz"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let discord = &ready["adapters"][0];
    assert_eq!(discord["platform"], "discord");
    let ago = discord["last_contact_ms_ago"].as_u64().unwrap();
    assert!(
        ago < 2000,
        "the last acknowledged heartbeat was {ago} ms ago"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gap_longer_than_one_page_is_fetched_page_after_page() {
    let kit = open_kit().await;
    kit.llm.push(Reply::text("first"));
    kit.llm.push(Reply::text("found it"));
    let _d = kit.start();
    let alice = kit.fake.person(1);
    kit.fake.message(GROUP_CHANNEL, &alice, "hello", true);
    kit.shown(GROUP_CHANNEL, 1).await;
    kit.fake.invalidate_session();
    for n in 0..130 {
        kit.fake
            .message(GROUP_CHANNEL, &alice, &format!("chatter {n}"), false);
    }
    kit.fake
        .message(GROUP_CHANNEL, &alice, "the question at the end", true);
    assert_eq!(kit.shown(GROUP_CHANNEL, 2).await[1], "found it");
    assert_eq!(
        last_user_text(&kit.llm.requests()[1]),
        "the question at the end"
    );
    let pages = kit
        .fake
        .calls(&format!("/channels/{GROUP_CHANNEL}/messages"));
    assert!(pages.iter().filter(|c| c.method == "GET").count() >= 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_first_answer_that_failed_fills_in_the_deferred_reply_when_tried_again() {
    let kit = open_kit().await;
    let _d = kit.start();
    assert!(kit.fake.wait_connected(WAIT).await);
    kit.fake.fail_next("/messages/@original", 502);
    let alice = kit.fake.person(1);
    let status = kit.fake.slash(GROUP_CHANNEL, &alice, "status", vec![]);
    let fake = kit.fake.clone();
    let answer = eventually(WAIT, "the status answer", || {
        fake.interaction_responses(&status).into_iter().next()
    })
    .await;
    assert_eq!(answer.kind, ResponseKind::Original, "not a follow-up");
    settle().await;
    assert_eq!(kit.fake.interaction_responses(&status).len(), 1);
}

/// A crash after Discord took a reply but before its answer came back: after the restart
/// the reply is posted again with the same nonce (`enforce_nonce`), and shows once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_posted_just_before_a_crash_shows_once_after_the_restart() {
    let kit = open_kit().await;
    kit.llm.push(Reply::text("only once"));
    kit.llm.push(Reply::text("only once"));
    let mut first = kit.start();
    let alice = kit.fake.person(1);
    let dm = kit.fake.dm_chat(&alice);
    let posts = format!("/channels/{dm}/messages");
    kit.fake.answer_slowly(&posts, Duration::from_secs(60));
    kit.fake.message(&dm, &alice, "hello", true);
    kit.shown(&dm, 1).await;
    first.kill();
    kit.fake.clear_faults();
    let _second = kit.start();
    shown_once_recognised_by_its_nonce(&kit, &dm).await;
}

/// The reply "only once" is posted again in `dm`, and Discord answers with the first one.
async fn shown_once_recognised_by_its_nonce(kit: &Kit<FakeDiscord>, dm: &str) {
    let fake = kit.fake.clone();
    let posts = format!("/channels/{dm}/messages");
    eventually(WAIT, "the post to be made again", || {
        (fake.calls(&posts).len() >= 2).then_some(())
    })
    .await;
    kit.home.outbox_drained(WAIT).await;
    settle().await;
    assert_eq!(kit.fake.shown(dm), ["only once"]);
    assert_eq!(kit.fake.nonce_hits(), 1, "recognised by its nonce");
}

/// Discord took a file but the connection was reset before its answer came back: the file
/// is posted again with the same nonce (`enforce_nonce`), and shows once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_whose_answer_is_lost_to_a_connection_reset_shows_once() {
    let kit = open_kit().await;
    kit.llm.push(
        kit.home
            .reply_sending("chart.png", b"\x89PNG chart", "Here is a chart."),
    );
    kit.fake
        .resets()
        .arm(1, When::AfterHandling, |method, path, body| {
            let upload = body.windows(9).any(|w| w == b"chart.png");
            method == axum::http::Method::POST && path.ends_with("/messages") && upload
        });
    let _d = kit.start();
    let alice = kit.fake.person(1);
    let dm = kit.fake.dm_chat(&alice);
    kit.fake.message(&dm, &alice, "a chart, please", true);
    let fake = kit.fake.clone();
    eventually(WAIT, "the file to be posted again", || {
        (fake.nonce_hits() >= 1).then_some(())
    })
    .await;
    kit.home.outbox_drained(WAIT).await;
    settle().await;
    assert_eq!(
        kit.fake.resets().cut(),
        1,
        "the upload's connection was reset"
    );
    assert_eq!(kit.fake.sent_files(&dm).len(), 1, "shown once");
}

/// Discord took a reply but the connection was reset before its answer came back: the
/// reply is posted again with the same nonce (`enforce_nonce`), and shows once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_whose_answer_is_lost_to_a_connection_reset_shows_once() {
    let kit = open_kit().await;
    let _d = kit.start();
    let alice = kit.fake.person(1);
    let dm = kit.fake.dm_chat(&alice);
    kit.llm.push(Reply::text("only once"));
    kit.fake.reset_next_send(When::AfterHandling);
    kit.fake.message(&dm, &alice, "hello", true);
    kit.shown(&dm, 1).await;
    shown_once_recognised_by_its_nonce(&kit, &dm).await;
    assert_eq!(
        kit.fake.resets().cut(),
        1,
        "the post's connection was reset"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_past_discords_upload_limit_is_not_uploaded_and_the_person_is_told() {
    let kit = open_kit().await;
    kit.llm.push(kit.home.reply_sending(
        "big.bin",
        &vec![7u8; 11 * 1024 * 1024],
        "Here is the dump.",
    ));
    let _d = kit.start();
    let alice = kit.fake.person(1);
    let dm = kit.fake.dm_chat(&alice);
    kit.fake.message(&dm, &alice, "send the dump", true);
    let fake = kit.fake.clone();
    let told = eventually(WAIT, "the notice", || {
        fake.shown(&dm)
            .into_iter()
            .find(|t| t.contains("could not send the file big.bin"))
    })
    .await;
    assert!(
        told.contains("it is 11 MB, and Discord takes files up to 10 MB from a bot"),
        "{told}"
    );
    assert!(kit.fake.sent_files(&dm).is_empty(), "nothing was uploaded");
}
