//! WhatsApp Cloud API, end to end: the real daemon against the fake Graph API and its
//! signed webhook sender (`hermes_testkit::whatsapp`): the subscription handshake,
//! signatures, a missing app secret, redeliveries, batches, status callbacks, approvals by
//! reply button, the 24-hour window, malformed bodies, media both ways, Meta's rate limits
//! and a refused token. What every platform owes is in `conformance_whatsapp.rs`.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use hermes_testkit::conformance::{Kit, PlatformFake};
use hermes_testkit::eventually;
use hermes_testkit::llm::{Reply, image_bytes, last_user_content, last_user_text};
use hermes_testkit::whatsapp::{FakeWhatsApp, MediaSource, SentKind, Signing};
use serde_json::json;

const BIN: &str = env!("CARGO_BIN_EXE_hermes-gateway");
const WAIT: Duration = Duration::from_secs(15);
const DAY: u64 = 24 * 60 * 60;

async fn kit(fake: FakeWhatsApp) -> Kit<FakeWhatsApp> {
    Kit::open(fake, BIN).await
}

async fn settle() {
    tokio::time::sleep(Duration::from_millis(800)).await;
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// The texts the bot sent to `chat` that Meta accepted, in order.
fn texts(fake: &FakeWhatsApp, chat: &str) -> Vec<String> {
    fake.sent(chat)
        .into_iter()
        .filter(|m| m.failed.is_none() && !matches!(m.kind, SentKind::Template))
        .map(|m| m.text)
        .collect()
}

/// A text message from `from`, as Meta posts it.
fn text_payload(fake: &FakeWhatsApp, from: &str, wamid: &str, body: &str) -> Vec<u8> {
    let options = fake.options();
    let payload = json!({"object": "whatsapp_business_account", "entry": [{"id": "2000000001", "changes": [{
    "field": "messages",
    "value": {
        "messaging_product": "whatsapp",
        "metadata": {"display_phone_number": options.display_phone_number, "phone_number_id": options.phone_number_id},
        "contacts": [{"profile": {"name": "Ada"}, "wa_id": from}],
        "messages": [{"from": from, "id": wamid, "timestamp": now_secs().to_string(), "type": "text", "text": {"body": body}}],
    }}]}]});
    serde_json::to_vec(&payload).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_subscription_handshake_echoes_the_challenge_only_for_the_right_token() {
    let kit = kit(FakeWhatsApp::start().await).await;
    let _d = kit.start();
    let token = kit.fake.options().verify_token;
    assert_eq!(
        kit.fake.handshake("subscribe", &token, "1158201444").await,
        (200, "1158201444".to_owned())
    );
    assert_eq!(kit.fake.handshake("subscribe", "guess", "1").await.0, 403);
    assert_eq!(kit.fake.handshake("unsubscribe", &token, "1").await.0, 403);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unsigned_or_badly_signed_deliveries_are_refused_and_nothing_is_recorded() {
    let kit = kit(FakeWhatsApp::start().await).await;
    kit.llm.push(Reply::text("signed, so answered"));
    let _d = kit.start();
    let alice = kit.fake.person(1);
    let forged = text_payload(&kit.fake, &alice, "wamid.FORGED1", "run rm -rf /");
    let (bad, _) = kit.fake.post_raw(forged.clone(), Signing::Bad).await;
    let (missing, _) = kit.fake.post_raw(forged, Signing::Missing).await;
    assert_eq!((bad, missing), (401, 401));
    kit.fake.text(&alice, "hello");
    assert_eq!(kit.shown(&alice, 1).await, ["signed, so answered"]);
    settle().await;
    let requests = kit.llm.requests();
    assert_eq!(
        requests.len(),
        1,
        "the forged message never reached the model"
    );
    assert_eq!(last_user_text(&requests[0]), "hello");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_an_app_secret_the_webhook_answers_503_and_check_config_says_why() {
    let fake = FakeWhatsApp::start().await;
    let lines: Vec<String> = fake
        .env()
        .into_iter()
        .filter(|l| !l.starts_with("WHATSAPP_CLOUD_APP_SECRET="))
        .chain(["WHATSAPP_CLOUD_ALLOW_ALL_USERS=true".to_owned()])
        .collect();
    let kit = Kit::new(fake, BIN, &[], "").await;
    std::fs::write(kit.home.dir.join(".env"), lines.join("\n")).unwrap();
    let check = std::process::Command::new(BIN)
        .args(["check-config", "--home"])
        .arg(&kit.home.dir)
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&check.stdout).into_owned()
        + &String::from_utf8_lossy(&check.stderr);
    assert!(
        out.contains("WHATSAPP_CLOUD_APP_SECRET") && out.contains("503"),
        "{out}"
    );
    let _d = kit.start();
    let alice = kit.fake.person(1);
    let body = text_payload(&kit.fake, &alice, "wamid.NOSECRET", "hi");
    let (status, answer) = kit.fake.post_raw(body, Signing::Good).await;
    assert_eq!(status, 503);
    assert!(answer.contains("WHATSAPP_CLOUD_APP_SECRET"), "{answer}");
    settle().await;
    assert!(kit.llm.requests().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redelivered_message_is_answered_once() {
    let kit = kit(FakeWhatsApp::start().await).await;
    kit.llm.push(Reply::text("once"));
    kit.llm.push(Reply::text("twice"));
    let _d = kit.start();
    let alice = kit.fake.person(1);
    let wamid = kit.fake.text(&alice, "hello");
    kit.shown(&alice, 1).await;
    kit.fake.redeliver(&wamid);
    eventually(WAIT, "the redelivery answered 200", || {
        let deliveries = kit.fake.deliveries();
        (deliveries
            .iter()
            .filter(|d| d.wamids.contains(&wamid) && d.status == 200)
            .count()
            >= 2)
            .then_some(())
    })
    .await;
    settle().await;
    assert_eq!(texts(&kit.fake, &alice), ["once"]);
    assert_eq!(kit.llm.requests().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_from_two_people_answers_each_of_them() {
    let kit = kit(FakeWhatsApp::start().await).await;
    kit.llm.push(Reply::text("an answer"));
    kit.llm.push(Reply::text("an answer"));
    let _d = kit.start();
    let (alice, bob) = (kit.fake.person(1), kit.fake.person(2));
    kit.fake
        .batch(&[(alice.as_str(), "from alice"), (bob.as_str(), "from bob")]);
    kit.shown(&alice, 1).await;
    kit.shown(&bob, 1).await;
    settle().await;
    let mut asked: Vec<String> = kit.llm.requests().iter().map(last_user_text).collect();
    asked.sort();
    assert_eq!(asked, ["from alice", "from bob"]);
    assert_eq!(texts(&kit.fake, &alice).len(), 1);
    assert_eq!(texts(&kit.fake, &bob).len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_callbacks_land_on_the_outbox_and_a_failure_is_logged_with_metas_code() {
    let kit = kit(FakeWhatsApp::start().await).await;
    kit.llm.push(Reply::text("first"));
    kit.llm.push(Reply::text("second"));
    let daemon = kit.start();
    let alice = kit.fake.person(1);
    kit.fake.text(&alice, "one");
    kit.shown(&alice, 1).await;
    kit.fake.text(&alice, "two");
    kit.shown(&alice, 2).await;
    let sent = kit.fake.sent(&alice);
    let (first, second) = (sent[0].wamid.clone(), sent[1].wamid.clone());
    kit.fake.status(&first, "read");
    kit.fake.failed_status(
        &second,
        131026,
        "Message undeliverable",
        "the number is not on WhatsApp",
    );
    let db = kit.home.dir.join("gateway.db");
    let status_of = |wamid: &str| -> Option<(String, Option<String>)> {
        let conn = rusqlite::Connection::open(&db).ok()?;
        conn.query_row(
            "SELECT delivery_status, delivery_detail FROM outbox WHERE platform_message_id = ?1",
            [wamid],
            |r| Ok((r.get::<_, Option<String>>(0)?, r.get(1)?)),
        )
        .ok()
        .and_then(|(status, detail)| Some((status?, detail)))
    };
    eventually(WAIT, "both reports recorded", || {
        (status_of(&first).is_some_and(|(s, _)| s == "read")
            && status_of(&second).is_some_and(|(s, _)| s == "failed"))
        .then_some(())
    })
    .await;
    let (_, detail) = status_of(&second).unwrap();
    assert!(detail.unwrap().contains("131026"));
    let log = eventually(WAIT, "the failure logged", || {
        let log = daemon.log_text();
        log.contains("could not deliver a reply").then_some(log)
    })
    .await;
    assert!(log.contains("131026"), "{log}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_shows_its_four_choices_as_a_list_and_its_outcome_follows_as_a_short_message() {
    let kit = kit(FakeWhatsApp::start().await).await;
    let target = kit.victim("approved");
    kit.llm
        .push(Reply::terminal(&format!("rm -rf {}", target.display())));
    kit.llm.push(Reply::text("done"));
    let _d = kit.start();
    let alice = kit.fake.person(1);
    kit.fake.text(&alice, "clean up");
    let prompt = eventually(WAIT, "the prompt", || {
        kit.fake.prompts(&alice).first().cloned()
    })
    .await;
    // Four choices are more than three reply buttons: an interactive list (as in Hermes).
    let titles: Vec<&str> = prompt.choices.iter().map(|(t, _)| t.as_str()).collect();
    assert_eq!(
        titles,
        [
            "Allow once",
            "Allow for this session",
            "Always allow",
            "Deny"
        ]
    );
    let raw = kit
        .fake
        .sent(&alice)
        .into_iter()
        .find(|m| m.wamid == prompt.message_id)
        .expect("the prompt's message");
    assert_eq!(raw.kind, SentKind::Interactive { list: true });
    assert!(prompt.text.contains("/approve session"), "{}", prompt.text);
    kit.fake.press(&alice, &alice, &prompt, "Allow once");
    eventually(WAIT, "the command", || (!target.exists()).then_some(())).await;
    let shown = eventually(WAIT, "the answer", || {
        let shown = texts(&kit.fake, &alice);
        shown.iter().any(|s| s == "done").then_some(shown)
    })
    .await;
    let outcomes: Vec<&String> = shown
        .iter()
        .filter(|s| s.contains("Allowed once"))
        .collect();
    assert_eq!(outcomes.len(), 1, "the outcome is said once: {shown:#?}");
    assert!(
        !outcomes[0].contains("rm -rf"),
        "the outcome alone, not the prompt again: {}",
        outcomes[0]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_outside_the_window_is_held_until_the_person_writes_again() {
    let fake = FakeWhatsApp::start().await;
    let template = "WHATSAPP_CLOUD_REENGAGE_TEMPLATE=hello_again:en_GB".to_owned();
    let all = "WHATSAPP_CLOUD_ALLOW_ALL_USERS=true".to_owned();
    let kit = Kit::new(fake, BIN, &[template, all], "").await;
    kit.llm.push(Reply::text("sorry for the wait"));
    kit.llm.push(Reply::Delayed(
        Duration::from_secs(3),
        Box::new(Reply::text("welcome back")),
    ));
    let daemon = kit.start();
    let alice = kit.fake.person(1);
    // Meta delivers a message written 25 hours ago (it retries for days).
    kit.fake
        .text_at(&alice, "are you there?", now_secs() - DAY - 3600);
    let template_sent = eventually(WAIT, "the re-engagement template", || {
        kit.fake
            .sent(&alice)
            .into_iter()
            .find(|m| m.kind == SentKind::Template)
    })
    .await;
    assert_eq!(
        template_sent.template,
        Some(("hello_again".to_owned(), "en_GB".to_owned()))
    );
    eventually(WAIT, "the hold logged", || {
        daemon.log_text().contains("a reply is held").then_some(())
    })
    .await;
    // Held means left alone: not tried again every few seconds.
    tokio::time::sleep(Duration::from_secs(6)).await;
    assert!(
        texts(&kit.fake, &alice).is_empty(),
        "nothing free-form outside the window"
    );
    let db = kit.home.dir.join("gateway.db");
    let attempts: i64 = rusqlite::Connection::open(&db)
        .unwrap()
        .query_row("SELECT max(attempts) FROM outbox", [], |r| r.get(0))
        .unwrap();
    assert_eq!(attempts, 1, "one attempt while nothing changed");
    // They write again: the held reply goes at once (before the new answer is ready),
    // then the new one.
    kit.fake.text(&alice, "yes, here");
    let first = eventually(Duration::from_millis(2500), "the held reply", || {
        let shown = texts(&kit.fake, &alice);
        (!shown.is_empty()).then_some(shown)
    })
    .await;
    assert_eq!(first, ["sorry for the wait"]);
    let shown = eventually(WAIT, "both replies", || {
        let shown = texts(&kit.fake, &alice);
        (shown.len() >= 2).then_some(shown)
    })
    .await;
    assert_eq!(shown, ["sorry for the wait", "welcome back"]);
    settle().await;
    let templates = kit
        .fake
        .sent(&alice)
        .iter()
        .filter(|m| m.kind == SentKind::Template)
        .count();
    assert_eq!(templates, 1, "the template went once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metas_own_window_refusal_after_the_send_holds_the_reply_too() {
    let kit = kit(FakeWhatsApp::start().await).await;
    kit.llm.push(Reply::text("here you go"));
    kit.llm.push(Reply::text("and this"));
    let daemon = kit.start();
    let alice = kit.fake.person(1);
    // Meta's timestamps count seconds: the question is a little older than the answer.
    kit.fake.text_at(&alice, "a question", now_secs() - 2);
    kit.shown(&alice, 1).await;
    let wamid = kit.fake.sent(&alice)[0].wamid.clone();
    // Meta took the message, then reports it could not deliver it (131047).
    kit.fake.failed_status(
        &wamid,
        131047,
        "Re-engagement message",
        "more than 24 hours have passed",
    );
    eventually(WAIT, "the hold logged", || {
        daemon
            .log_text()
            .contains("24-hour window had closed")
            .then_some(())
    })
    .await;
    settle().await;
    assert_eq!(
        kit.fake.sent(&alice).len(),
        1,
        "not sent again while the window is closed"
    );
    kit.fake.text(&alice, "hello?");
    let shown = eventually(WAIT, "the held reply, then the new one", || {
        let shown = texts(&kit.fake, &alice);
        (shown.len() >= 3).then_some(shown)
    })
    .await;
    assert_eq!(shown, ["here you go", "here you go", "and this"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_json_is_refused_with_400_and_the_next_delivery_works() {
    let kit = kit(FakeWhatsApp::start().await).await;
    kit.llm.push(Reply::text("still fine"));
    let _d = kit.start();
    let (status, _) = kit
        .fake
        .post_raw(
            b"{\"object\":\"whatsapp_business_account\",\"entry\":[".to_vec(),
            Signing::Good,
        )
        .await;
    assert_eq!(status, 400);
    let alice = kit.fake.person(1);
    kit.fake.text(&alice, "hello");
    assert_eq!(kit.shown(&alice, 1).await, ["still fine"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_picture_reaches_the_model_and_a_file_goes_out() {
    let kit = kit(FakeWhatsApp::start().await).await;
    kit.llm.push(
        kit.home
            .reply_sending("chart.png", b"\x89PNG chart", "A cat. Here is a chart."),
    );
    let _d = kit.start();
    let alice = kit.fake.person(1);
    let jpeg = hermes_testkit::sample_jpeg();
    kit.fake
        .image(&alice, jpeg.clone(), "image/jpeg", Some("what is this?"));
    let sent = eventually(WAIT, "the file sent", || {
        kit.fake
            .sent(&alice)
            .into_iter()
            .find(|m| matches!(m.kind, SentKind::Media { .. }))
    })
    .await;
    let uploads = kit.fake.uploads();
    assert_eq!(uploads.len(), 1);
    assert_eq!(uploads[0].bytes, b"\x89PNG chart");
    let SentKind::Media {
        media_type, source, ..
    } = sent.kind
    else {
        unreachable!()
    };
    assert_eq!(media_type, "image");
    assert_eq!(source, MediaSource::Id(uploads[0].media_id.clone()));
    let request = &kit.llm.requests()[0];
    assert!(
        last_user_content(request)
            .to_string()
            .contains("what is this?"),
        "the caption reaches the model"
    );
    assert_eq!(
        image_bytes(request, 0).expect("an image part"),
        jpeg,
        "the bytes the person sent, fetched by media id with the token"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kinds_it_cannot_read_are_named_and_reactions_are_not_answered() {
    let kit = kit(FakeWhatsApp::start().await).await;
    let _d = kit.start();
    let alice = kit.fake.person(1);
    kit.fake.location(&alice);
    let shown = kit.shown(&alice, 1).await;
    assert!(shown[0].contains("location"), "{shown:?}");
    let wamid = kit.fake.sent(&alice)[0].wamid.clone();
    kit.fake.reaction(&alice, &wamid, "👍");
    settle().await;
    assert_eq!(kit.fake.sent(&alice).len(), 1, "a reaction is not answered");
    assert!(kit.llm.requests().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metas_rate_limit_is_waited_out_and_the_reply_goes_once() {
    let kit = kit(FakeWhatsApp::start().await).await;
    kit.llm.push(Reply::text("patience"));
    let _d = kit.start();
    let alice = kit.fake.person(1);
    kit.fake
        .fail_next_sends(1, 400, 130429, "(#130429) Rate limit hit");
    kit.fake.text(&alice, "hi");
    assert_eq!(kit.shown(&alice, 1).await, ["patience"]);
    settle().await;
    let refused = kit
        .fake
        .calls()
        .iter()
        .filter(|c| c.error_code == Some(130429))
        .count();
    assert_eq!(refused, 1);
    assert_eq!(texts(&kit.fake, &alice), ["patience"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_access_token_is_named() {
    let fake = FakeWhatsApp::start().await;
    let lines: Vec<String> = fake
        .env()
        .into_iter()
        .map(|l| {
            if l.starts_with("WHATSAPP_CLOUD_ACCESS_TOKEN=") {
                "WHATSAPP_CLOUD_ACCESS_TOKEN=EAAwrong".to_owned()
            } else {
                l
            }
        })
        .collect();
    let kit = Kit::new(fake, BIN, &[], "").await;
    std::fs::write(kit.home.dir.join(".env"), lines.join("\n")).unwrap();
    let daemon = kit.start();
    let log = eventually(WAIT, "the refusal", || {
        let log = daemon.log_text();
        log.contains("refused WHATSAPP_CLOUD_ACCESS_TOKEN")
            .then_some(log)
    })
    .await;
    assert!(!log.contains("EAAwrong"), "the token is not logged: {log}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spoken_reply_is_a_voice_note() {
    let kit = Kit::new(
        FakeWhatsApp::start().await,
        BIN,
        &[
            "WHATSAPP_CLOUD_ALLOW_ALL_USERS=true".to_owned(),
            "VOICE_TOOLS_OPENAI_KEY=sk-voice".to_owned(),
        ],
        "",
    )
    .await;
    let path = kit.home.dir.join("config.yaml");
    let yaml = std::fs::read_to_string(&path).unwrap()
        + &format!(
            "tts:\n  provider: openai\n  openai:\n    base_url: {}\n",
            kit.llm.base_url()
        );
    std::fs::write(&path, yaml).unwrap();
    let _d = kit.start();
    let alice = kit.fake.person(1);
    kit.fake.text(&alice, "/voice tts");
    kit.shown(&alice, 1).await;
    kit.fake.text(&alice, "hello");
    let sent = eventually(WAIT, "the voice note", || {
        kit.fake
            .sent(&alice)
            .into_iter()
            .find(|m| matches!(m.kind, SentKind::Media { .. }))
    })
    .await;
    let SentKind::Media {
        media_type, voice, ..
    } = sent.kind
    else {
        unreachable!()
    };
    assert_eq!((media_type.as_str(), voice), ("audio", true));
    let uploads = kit.fake.uploads();
    assert_eq!(uploads[0].mime, "audio/ogg");
    assert!(uploads[0].bytes.starts_with(b"OggS"));
    assert!(texts(&kit.fake, &alice).contains(&"echo: hello".to_owned()));
}
