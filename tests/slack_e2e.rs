//! Slack, end to end: the real daemon and slack-morphism against the fake Slack
//! (`hermes_testkit::slack`), in Socket Mode and over the Events API: threads, signatures,
//! retries, slash commands, 429s, reconnects, files and refused credentials. What every
//! platform owes (streaming among it) is in `conformance_slack.rs`.

use std::time::{Duration, Instant};

use hermes_testkit::conformance::{Kit, PlatformFake};
use hermes_testkit::eventually;
use hermes_testkit::llm::{Reply, image_bytes, last_user_text};
use hermes_testkit::reset::When;
use hermes_testkit::slack::{FakeSlack, GROUP_CHANNEL, Signing};
use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_hermes-gateway");
const WAIT: Duration = Duration::from_secs(15);

async fn kit(fake: FakeSlack) -> Kit<FakeSlack> {
    Kit::open(fake, BIN).await
}

async fn settle() {
    tokio::time::sleep(Duration::from_millis(800)).await;
}

async fn asked(kit: &Kit<FakeSlack>, count: usize) {
    let llm = kit.llm.clone();
    eventually(WAIT, &format!("{count} model requests"), || {
        (llm.requests().len() >= count).then_some(())
    })
    .await;
}

/// What a follow-up needs lives in the store, not in one process: after a restart (or on
/// another node) a follow-up in a thread the bot answered in still needs no mention.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follow_up_in_the_bots_thread_needs_no_mention_after_a_restart() {
    let kit = kit(FakeSlack::start().await).await;
    kit.llm.push(Reply::text("let's plan"));
    kit.llm.push(Reply::text("Lisbon it is"));
    let mut first = kit.start();
    let alice = kit.fake.person(1);
    let question = kit
        .fake
        .message(GROUP_CHANNEL, &alice, "help me plan a trip", true);
    kit.shown(GROUP_CHANNEL, 1).await;
    settle().await;
    first.kill();
    let _second = kit.start();
    kit.fake
        .message_in_thread(GROUP_CHANNEL, &alice, "to Lisbon", &question, false);
    assert_eq!(kit.shown(GROUP_CHANNEL, 2).await[1], "Lisbon it is");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mention_is_answered_in_its_thread_and_the_thread_is_one_conversation() {
    let kit = kit(FakeSlack::start().await).await;
    kit.llm.push(Reply::text("let's plan"));
    kit.llm.push(Reply::text("Lisbon it is"));
    let _d = kit.start();
    // Slack's answer to the post comes after the person can already see it (and reply).
    kit.fake
        .answer_slowly("chat.postMessage", Duration::from_secs(2));
    let alice = kit.fake.person(1);
    let question = kit
        .fake
        .message(GROUP_CHANNEL, &alice, "help me plan a trip", true);
    kit.shown(GROUP_CHANNEL, 1).await;
    let answer = kit.fake.raw_messages(GROUP_CHANNEL)[0].clone();
    assert_eq!(
        answer.thread_ts.as_deref(),
        Some(question.as_str()),
        "in the thread"
    );
    // A follow-up in that thread needs no mention and continues the same session.
    kit.fake
        .message_in_thread(GROUP_CHANNEL, &alice, "to Lisbon\nin May", &question, false);
    assert_eq!(kit.shown(GROUP_CHANNEL, 2).await[1], "Lisbon it is");
    let second = &kit.llm.requests()[1];
    assert_eq!(
        last_user_text(second),
        "to Lisbon\nin May",
        "line breaks kept"
    );
    assert!(
        second.to_string().contains("help me plan a trip"),
        "one session"
    );
    // Chatter elsewhere in the channel is not for the bot.
    kit.fake.message(GROUP_CHANNEL, &alice, "lunch?", false);
    settle().await;
    assert_eq!(kit.llm.requests().len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_api_refuses_bad_signatures_and_stale_timestamps_and_answers_a_retry_once() {
    let kit = kit(FakeSlack::start_events().await).await;
    kit.llm.push(Reply::text("first"));
    kit.llm.push(Reply::text("second"));
    let _d = kit.start();
    let alice = kit.fake.person(1);
    let dm = kit.fake.dm_chat(&alice);
    kit.fake.message(&dm, &alice, "hello", true);
    assert_eq!(kit.shown(&dm, 1).await, ["first"]);
    let delivered = kit.fake.deliveries();
    assert!(
        delivered.iter().any(|d| d.status == Some(200)),
        "{delivered:?}"
    );
    let event: Value = kit.fake.envelopes()[0].payload.clone();

    // Slack's retry of the same event (a new delivery, X-Slack-Retry-Num: 1): answered once.
    let (status, _) = kit.fake.post_event(&event, Signing::Valid, Some(1)).await;
    assert_eq!(status, 200);

    // A new message, forged or replayed from long ago: refused, nothing recorded.
    let mut forged = event.clone();
    forged["event_id"] = "Ev0FORGED".into();
    forged["event"]["ts"] = "1999999999.000100".into();
    forged["event"]["text"] = "rm everything".into();
    for signing in [Signing::BadSignature, Signing::Stale, Signing::Missing] {
        let (status, _) = kit.fake.post_event(&forged, signing, None).await;
        assert!(status == 401 || status == 403, "{signing:?}: {status}");
    }
    settle().await;
    assert_eq!(
        kit.llm.requests().len(),
        1,
        "nothing more reached the model"
    );
    assert_eq!(kit.fake.shown(&dm).len(), 1);

    // Signed, the same event goes through: the refusals were the signature's doing.
    let (status, _) = kit.fake.post_event(&forged, Signing::Valid, None).await;
    assert_eq!(status, 200);
    assert_eq!(kit.shown(&dm, 2).await[1], "second");
    assert_eq!(last_user_text(&kit.llm.requests()[1]), "rm everything");

    // Slack's handshake for the request URL.
    let (status, body) = kit.fake.url_verification("challenge-42").await;
    assert_eq!((status, body.as_str()), (200, "challenge-42"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_envelope_sent_again_is_answered_once() {
    let kit = kit(FakeSlack::start().await).await;
    kit.llm.push(Reply::text("once"));
    let _d = kit.start();
    let alice = kit.fake.person(1);
    let dm = kit.fake.dm_chat(&alice);
    kit.fake.message(&dm, &alice, "hello", true);
    assert_eq!(kit.shown(&dm, 1).await, ["once"]);
    let envelope = kit.fake.envelopes()[0].id.clone();
    assert!(kit.fake.acked(&envelope).is_some(), "acknowledged");
    assert!(
        kit.fake.redeliver(&envelope),
        "sent again with retry_attempt 1"
    );
    let fake = kit.fake.clone();
    eventually(WAIT, "the redelivery acknowledged", || {
        (fake.envelopes()[0].sends.len() >= 2
            && fake
                .acks()
                .iter()
                .filter(|a| a.envelope_id == envelope)
                .count()
                >= 2)
            .then_some(())
    })
    .await;
    settle().await;
    assert_eq!(kit.fake.shown(&dm).len(), 1, "answered once");
    assert_eq!(kit.llm.requests().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_disconnect_socket_mode_connects_again_and_nothing_is_lost() {
    let kit = kit(FakeSlack::start().await).await;
    kit.llm.push(Reply::text("first"));
    kit.llm.push(Reply::text("still here"));
    let _d = kit.start();
    let alice = kit.fake.person(1);
    let dm = kit.fake.dm_chat(&alice);
    kit.fake.message(&dm, &alice, "hello", true);
    kit.shown(&dm, 1).await;
    let opens = kit.fake.connection_opens();
    kit.fake.disconnect_all();
    kit.fake.message(&dm, &alice, "are you back?", true);
    assert_eq!(kit.shown(&dm, 2).await[1], "still here");
    assert!(
        kit.fake.connection_opens() > opens,
        "apps.connections.open again"
    );
    settle().await;
    assert_eq!(kit.fake.shown(&dm).len(), 2, "answered once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hermes_slash_commands_answer_privately_and_questions_in_the_channel() {
    for fake in [FakeSlack::start().await, FakeSlack::start_events().await] {
        let kit = kit(fake).await;
        kit.llm.push(Reply::text("*4*"));
        let _d = kit.start();
        let alice = kit.fake.person(1);
        let status = kit.fake.slash(GROUP_CHANNEL, &alice, "/hermes", "status");
        let fake = kit.fake.clone();
        let answer = eventually(WAIT, "the status answer", || {
            fake.command_responses(&status)
                .into_iter()
                .find(|r| r.via == "response_url")
        })
        .await;
        assert_eq!(answer.body["response_type"], "ephemeral");
        assert!(
            answer.body["text"]
                .as_str()
                .unwrap_or_default()
                .contains("Status")
        );
        assert!(
            kit.fake.shown(GROUP_CHANNEL).is_empty(),
            "nothing in the channel"
        );

        kit.fake
            .slash(GROUP_CHANNEL, &alice, "/hermes", "what is 2+2?");
        assert_eq!(kit.shown(GROUP_CHANNEL, 1).await, ["4"]);
        assert_eq!(last_user_text(&kit.llm.requests()[0]), "what is 2+2?");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_429_is_waited_out_for_as_long_as_slack_says() {
    let kit = kit(FakeSlack::start().await).await;
    kit.llm.push(Reply::text("after the wait"));
    let _d = kit.start();
    let alice = kit.fake.person(1);
    let dm = kit.fake.dm_chat(&alice);
    kit.fake.rate_limit_next("chat.postMessage", 1, 2);
    kit.fake.message(&dm, &alice, "hi", true);
    assert_eq!(kit.shown(&dm, 1).await, ["after the wait"]);
    let posts = kit.fake.calls("chat.postMessage");
    assert_eq!(posts.len(), 2, "{posts:?}");
    let waited = posts[1].at.duration_since(posts[0].at);
    assert!(waited >= Duration::from_secs(2), "waited {waited:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_picture_reaches_the_model_and_a_file_goes_out_in_the_thread() {
    let kit = kit(FakeSlack::start().await).await;
    kit.llm.push(
        kit.home
            .reply_sending("chart.png", b"\x89PNG chart", "A cat. Here is a chart."),
    );
    let _d = kit.start();
    let alice = kit.fake.person(1);
    let jpeg = hermes_testkit::sample_jpeg();
    kit.fake.message_with_files(
        GROUP_CHANNEL,
        &alice,
        "what is this?",
        true,
        vec![("cat.jpg", "image/jpeg", jpeg.clone())],
    );
    let fake = kit.fake.clone();
    let files = eventually(WAIT, "the file sent", || {
        let files = fake.sent_files(GROUP_CHANNEL);
        (!files.is_empty()).then_some(files)
    })
    .await;
    assert_eq!(files, [("chart.png".to_owned(), b"\x89PNG chart".to_vec())]);
    let bytes = image_bytes(&kit.llm.requests()[0], 0).expect("an image part");
    assert_eq!(
        bytes, jpeg,
        "the bytes the person sent, fetched with the bot token"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_token_and_a_missing_scope_are_named() {
    let fake = FakeSlack::start().await;
    let mut lines = fake.env();
    for line in &mut lines {
        if line.starts_with("SLACK_BOT_TOKEN=") {
            *line = "SLACK_BOT_TOKEN=xoxb-0000-wrong-token".into();
        }
    }
    lines.push("SLACK_ALLOW_ALL_USERS=true".into());
    let refused = Kit::new(fake, BIN, &[], "").await;
    // The fake's `.env` with the wrong bot token in place of the right one.
    std::fs::write(refused.home.dir.join(".env"), lines.join("\n")).unwrap();
    let daemon = refused.start();
    let log = eventually(WAIT, "the refusal", || {
        let log = daemon.log_text();
        log.contains("SLACK_BOT_TOKEN").then_some(log)
    })
    .await;
    assert!(
        !log.contains("xoxb-0000-wrong-token"),
        "the token is never logged"
    );

    let kit = kit(FakeSlack::start().await).await;
    kit.llm.push(Reply::text("never shown"));
    kit.fake.missing_scope("chat.postMessage", "chat:write");
    let daemon = kit.start();
    let alice = kit.fake.person(1);
    let dm = kit.fake.dm_chat(&alice);
    kit.fake.message(&dm, &alice, "hello", true);
    asked(&kit, 1).await;
    eventually(WAIT, "the missing scope in the log", || {
        daemon.log_text().contains("chat:write").then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_working_reaction_is_taken_down_when_the_answer_is_out() {
    let kit = kit(FakeSlack::start().await).await;
    kit.llm.push(Reply::Delayed(
        Duration::from_millis(800),
        Box::new(Reply::text("done thinking")),
    ));
    let _d = kit.start();
    let alice = kit.fake.person(1);
    let dm = kit.fake.dm_chat(&alice);
    let started = Instant::now();
    let asked_ts = kit.fake.message(&dm, &alice, "think", true);
    kit.shown(&dm, 1).await;
    let fake = kit.fake.clone();
    let events = eventually(WAIT, "the reaction added and removed", || {
        let events = fake.working(&dm);
        (events.len() >= 2).then_some(events)
    })
    .await;
    assert!(started.elapsed() < WAIT);
    use hermes_testkit::conformance::WorkingEvent;
    assert_eq!(events.first().map(|e| e.1), Some(WorkingEvent::Shown));
    assert_eq!(events.last().map(|e| e.1), Some(WorkingEvent::Ended));
    assert!(kit.fake.reactions(&dm).is_empty(), "taken down");
    let added = kit.fake.calls("reactions.add");
    assert_eq!(
        added[0].params["timestamp"],
        asked_ts.as_str(),
        "on the question"
    );
    assert_eq!(added[0].params["name"], "eyes");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mention_delivered_as_message_and_app_mention_is_one_message() {
    let kit = kit(FakeSlack::start().await).await;
    kit.llm.push(Reply::Delayed(
        Duration::from_millis(500),
        Box::new(Reply::text("once")),
    ));
    kit.llm.push(Reply::text("twice"));
    let _d = kit.start();
    let alice = kit.fake.person(1);
    kit.fake
        .message(GROUP_CHANNEL, &alice, "what time is it?", true);
    kit.shown(GROUP_CHANNEL, 1).await;
    settle().await;
    // Both events were delivered and acknowledged …
    let fake = kit.fake.clone();
    eventually(WAIT, "both events acknowledged", || {
        let envelopes = fake.envelopes();
        (envelopes.len() >= 2 && envelopes.iter().all(|e| e.acked.is_some())).then_some(())
    })
    .await;
    // … and the model saw the question once, in one turn.
    let requests = kit.llm.requests();
    let asked_in_all: usize = requests
        .iter()
        .map(|r| r.to_string().matches("what time is it?").count())
        .sum();
    assert_eq!(asked_in_all, 1, "{requests:?}");
    assert_eq!(kit.fake.shown(GROUP_CHANNEL), ["once"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn edits_deletions_and_bot_messages_are_not_answered() {
    let kit = kit(FakeSlack::start().await).await;
    kit.llm.push(Reply::text("hello"));
    let _d = kit.start();
    let alice = kit.fake.person(1);
    let dm = kit.fake.dm_chat(&alice);
    let ts = kit.fake.message(&dm, &alice, "hi", true);
    kit.shown(&dm, 1).await;
    kit.fake.edit(&dm, &ts, "hi, edited");
    kit.fake.delete(&dm, &ts);
    kit.fake.bot_message(&dm, "beep from another bot");
    settle().await;
    assert_eq!(kit.llm.requests().len(), 1, "only the message itself");
    assert_eq!(kit.fake.shown(&dm).len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_assistant_status_is_used_where_the_app_has_it() {
    let fake = FakeSlack::start_with(hermes_testkit::slack::Options {
        assistant: true,
        ..Default::default()
    })
    .await;
    let kit = kit(fake).await;
    kit.llm.push(Reply::Delayed(
        Duration::from_millis(500),
        Box::new(Reply::text("thought")),
    ));
    let _d = kit.start();
    let alice = kit.fake.person(1);
    kit.fake.message(GROUP_CHANNEL, &alice, "think", true);
    kit.shown(GROUP_CHANNEL, 1).await;
    settle().await;
    let statuses = kit.fake.calls("assistant.threads.setStatus");
    assert!(!statuses.is_empty());
    assert!(
        statuses[0].params["status"]
            .as_str()
            .unwrap_or("")
            .contains("thinking")
    );
    assert!(
        kit.fake.calls("reactions.add").is_empty(),
        "no reaction needed"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stranger_is_told_privately_and_the_prompt_then_shows_the_outcome() {
    for fake in [FakeSlack::start().await, FakeSlack::start_events().await] {
        let allowed = format!("SLACK_ALLOWED_USERS={}", fake.person(1));
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
        kit.fake
            .press(GROUP_CHANNEL, &mallory, &prompt, "Allow once");
        let told = eventually(WAIT, "the stranger's notice", || {
            fake.ephemerals(GROUP_CHANNEL)
                .into_iter()
                .find(|e| e.user == mallory)
        })
        .await;
        assert!(told.text.contains("not allowed"), "{}", told.text);
        assert!(target.exists());
        kit.fake.press(GROUP_CHANNEL, &alice, &prompt, "Allow once");
        eventually(WAIT, "the command", || (!target.exists()).then_some(())).await;
        let settled = eventually(WAIT, "the prompt settled", || {
            fake.raw_messages(GROUP_CHANNEL)
                .into_iter()
                .find(|m| m.ts == prompt.message_id && !m.history.is_empty())
        })
        .await;
        assert!(settled.text.contains("Allowed once"), "{}", settled.text);
        assert!(
            settled.blocks.as_array().is_none_or(|b| b.is_empty()),
            "the buttons are gone: {}",
            settled.blocks
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_signing_secret_the_events_routes_refuse_everything() {
    let fake = FakeSlack::start().await;
    let lines: Vec<String> = fake
        .env()
        .into_iter()
        .filter(|l| !l.starts_with("SLACK_SIGNING_SECRET="))
        .chain(["SLACK_ALLOW_ALL_USERS=true".to_owned()])
        .collect();
    let kit = Kit::new(fake, BIN, &[], "").await;
    std::fs::write(kit.home.dir.join(".env"), lines.join("\n")).unwrap();
    let daemon = kit.start();
    let addr = eventually(WAIT, "the HTTP address", || daemon.http_addr()).await;
    assert!(
        kit.fake.wait_connected(WAIT).await,
        "Socket Mode still works"
    );
    for path in ["/slack/events", "/slack/interactions", "/slack/commands"] {
        let answer = reqwest::Client::new()
            .post(format!("http://{addr}{path}"))
            .body("{}")
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), 503, "{path}");
        assert!(
            answer
                .text()
                .await
                .unwrap()
                .contains("SLACK_SIGNING_SECRET"),
            "{path} names what is missing"
        );
    }
    // Socket Mode does not use the signing secret: no warning about it at start, and the
    // three refused requests from one source are said once.
    let log = daemon.log_text();
    let warned: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("WARN") && l.contains("SLACK_SIGNING_SECRET"))
        .collect();
    assert_eq!(warned.len(), 1, "{log}");
    assert!(warned[0].contains("was refused"), "{log}");
}

/// A crash after Slack took a reply but before its answer came back: after the restart the
/// gateway finds the reply by the key in its metadata and does not post it again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_posted_just_before_a_crash_shows_once_after_the_restart() {
    let kit = kit(FakeSlack::start().await).await;
    kit.llm.push(Reply::text("only once"));
    kit.llm.push(Reply::text("only once"));
    let mut first = kit.start();
    let alice = kit.fake.person(1);
    let dm = kit.fake.dm_chat(&alice);
    kit.fake
        .answer_slowly("chat.postMessage", Duration::from_secs(60));
    kit.fake.write(&dm, &alice, "hello", true);
    kit.shown(&dm, 1).await;
    first.kill();
    kit.fake.clear_faults();
    let _second = kit.start();
    shown_once_found_by_its_key(&kit, &dm).await;
}

/// The gateway looks in `dm`'s history before posting "only once" again, finds it by the
/// key in its metadata, and posts nothing.
async fn shown_once_found_by_its_key(kit: &Kit<FakeSlack>, dm: &str) {
    let fake = kit.fake.clone();
    eventually(WAIT, "the history to be read", || {
        (!fake.calls("conversations.history").is_empty()).then_some(())
    })
    .await;
    kit.home.outbox_drained(WAIT).await;
    settle().await;
    assert_eq!(kit.fake.shown(dm), ["only once"]);
    assert_eq!(kit.fake.calls("chat.postMessage").len(), 1, "posted once");
}

/// Slack took a reply but the connection was reset before its answer came back: the
/// gateway finds the reply by the key in its metadata and does not post it again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_whose_answer_is_lost_to_a_connection_reset_shows_once() {
    let kit = kit(FakeSlack::start().await).await;
    let _d = kit.start();
    let alice = kit.fake.person(1);
    let dm = kit.fake.dm_chat(&alice);
    kit.llm.push(Reply::text("only once"));
    kit.fake.reset_next_send(When::AfterHandling);
    kit.fake.write(&dm, &alice, "hello", true);
    kit.shown(&dm, 1).await;
    shown_once_found_by_its_key(&kit, &dm).await;
    assert_eq!(
        kit.fake.resets().cut(),
        1,
        "the post's connection was reset"
    );
}
