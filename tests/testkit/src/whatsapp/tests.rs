//! The fake against its own promises, over HTTP on 127.0.0.1: reqwest as the daemon's
//! Graph client, and a small axum server standing in for the daemon's webhook (it keeps
//! every POST's raw bytes and headers, answers the status a test sets, and verifies the
//! handshake). Here: the deliveries (signatures, Meta's serialisation, retries, batches,
//! redeliveries, the handshake), what people send, and the conformance kit's view; the
//! Graph API's own tests are in `graph_tests.rs`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{Query, State};
use axum::http::HeaderMap;
use axum::routing::post;
use hmac::{Hmac, KeyInit, Mac};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::*;
use crate::conformance::PlatformFake;
use crate::eventually;

pub(super) const WAIT: Duration = Duration::from_secs(10);

/// A POST the stand-in received: its headers and raw body.
pub(super) type Post = (HeaderMap, Vec<u8>);

/// The daemon's stand-in.
#[derive(Clone, Default)]
pub(super) struct Receiver {
    posts: Arc<Mutex<Vec<Post>>>,
    status: Arc<AtomicU16>,
}

impl Receiver {
    /// Listening, attached to `fake`, answering 200.
    pub(super) async fn attach(fake: &FakeWhatsApp) -> Receiver {
        let receiver = Receiver::default();
        receiver.answer(200);
        let app = axum::Router::new()
            .route("/whatsapp/webhook", post(received).get(handshake))
            .with_state(receiver.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        fake.attach_daemon(&listener.local_addr().unwrap().to_string());
        tokio::spawn(async move { axum::serve(listener, app).await });
        receiver
    }

    pub(super) fn answer(&self, status: u16) {
        self.status.store(status, Ordering::SeqCst);
    }

    pub(super) fn posts(&self) -> Vec<Post> {
        self.posts.lock().unwrap().clone()
    }

    /// Wait for at least `n` POSTs; their bodies parsed.
    pub(super) async fn bodies(&self, n: usize) -> Vec<Value> {
        eventually(WAIT, &format!("{n} webhook POSTs"), || {
            let posts = self.posts();
            (posts.len() >= n).then(|| {
                let parse = |(_, body): &Post| serde_json::from_slice(body).unwrap();
                posts.iter().map(parse).collect()
            })
        })
        .await
    }
}

async fn received(
    State(receiver): State<Receiver>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> axum::http::StatusCode {
    receiver
        .posts
        .lock()
        .unwrap()
        .push((headers, body.to_vec()));
    let status = receiver.status.load(Ordering::SeqCst);
    axum::http::StatusCode::from_u16(status).unwrap()
}

async fn handshake(
    Query(query): Query<HashMap<String, String>>,
) -> (axum::http::StatusCode, String) {
    let get = |k: &str| query.get(k).cloned().unwrap_or_default();
    if get("hub.mode") == "subscribe" && get("hub.verify_token") == "test-verify-token" {
        (axum::http::StatusCode::OK, get("hub.challenge"))
    } else {
        (axum::http::StatusCode::FORBIDDEN, String::new())
    }
}

pub(super) fn client() -> reqwest::Client {
    reqwest::Client::builder().no_proxy().build().unwrap()
}

/// A Graph call: (status, JSON answer).
pub(super) async fn graph(
    fake: &FakeWhatsApp,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: Option<Value>,
) -> (u16, Value) {
    let url = format!("{}{path}", fake.base_url());
    let mut request = client().request(method.parse().unwrap(), url);
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// POST `/messages` with the right token.
pub(super) async fn send(fake: &FakeWhatsApp, body: Value) -> (u16, Value) {
    graph(
        fake,
        "POST",
        "/v26.0/1000000001/messages",
        Some("EAAtest-token"),
        Some(body),
    )
    .await
}

pub(super) fn text_to(to: &str, body: &str) -> Value {
    json!({"messaging_product": "whatsapp", "recipient_type": "individual", "to": to,
           "type": "text", "text": {"body": body, "preview_url": false}})
}

pub(super) fn buttons_to(to: &str, body: &str, buttons: &[(&str, &str)]) -> Value {
    let buttons: Vec<Value> = buttons
        .iter()
        .map(|(id, title)| json!({"type": "reply", "reply": {"id": id, "title": title}}))
        .collect();
    json!({"messaging_product": "whatsapp", "to": to, "type": "interactive",
           "interactive": {"type": "button", "body": {"text": body},
                           "action": {"buttons": buttons}}})
}

pub(super) fn wamid_of(answer: &Value) -> String {
    answer["messages"][0]["id"].as_str().unwrap().to_owned()
}

/// The first message of a notification.
pub(super) fn first_message(payload: &Value) -> &Value {
    &payload["entry"][0]["changes"][0]["value"]["messages"][0]
}

/// The statuses of every notification, in order: (wamid, status, the whole object).
pub(super) fn statuses(bodies: &[Value]) -> Vec<(String, String, Value)> {
    let changes = bodies
        .iter()
        .flat_map(|b| b["entry"][0]["changes"].as_array().unwrap().clone());
    let each = changes.flat_map(|c| {
        c["value"]["statuses"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    });
    each.map(|s| {
        (
            s["id"].as_str().unwrap().to_owned(),
            s["status"].as_str().unwrap().to_owned(),
            s,
        )
    })
    .collect()
}

#[test]
fn meta_json_escapes_like_meta_and_parses_back() {
    let value = json!({"t": "café 🎉 a/b", "n": 1});
    let written = meta_json(&value);
    assert_eq!(written, br#"{"n":1,"t":"caf\u00e9 \ud83c\udf89 a\/b"}"#);
    assert_eq!(serde_json::from_slice::<Value>(&written).unwrap(), value);
    assert_eq!(person(1), "15550000001");
    assert_eq!(person(12), "15550000012");
}

#[tokio::test]
async fn deliveries_are_signed_over_the_exact_bytes_meta_writes() {
    let fake = FakeWhatsApp::start().await;
    let receiver = Receiver::attach(&fake).await;
    let alice = person(1);
    let wamid = fake.text(&alice, "café 🎉 a/b");
    let payload = receiver.bodies(1).await.remove(0);
    let (headers, raw) = receiver.posts().remove(0);
    let mut mac = Hmac::<Sha256>::new_from_slice(b"test-app-secret").unwrap();
    mac.update(&raw);
    let expected = format!("sha256={}", hex::encode(mac.finalize().into_bytes()));
    assert_eq!(headers["x-hub-signature-256"], expected.as_str());
    assert_eq!(headers["content-type"], "application/json");
    let text = String::from_utf8(raw.clone()).unwrap();
    assert!(text.is_ascii(), "{text}");
    for escaped in [r"caf\u00e9", r"\ud83c\udf89", r"a\/b"] {
        assert!(text.contains(escaped), "{escaped} in {text}");
    }
    let start = r#"{"object":"whatsapp_business_account","entry":[{"id":"2000000001","changes":[{"value":{"messaging_product":"whatsapp","metadata":{"display_phone_number":"15550000000","phone_number_id":"1000000001"},"contacts":[{"profile":{"name":"Person 1"},"wa_id":"15550000001"}],"messages":[{"from":"15550000001","id":"wamid.HBgL"#;
    assert!(text.starts_with(start), "{text}");
    // A receiver that re-serialises before checking gets another signature.
    let again = serde_json::to_vec(&payload).unwrap();
    assert_ne!(signature("test-app-secret", &again), expected);
    let change = &payload["entry"][0]["changes"][0];
    assert_eq!(change["field"], "messages");
    let message = first_message(&payload);
    assert_eq!(message["text"]["body"], "café 🎉 a/b");
    assert_eq!(
        (message["id"].as_str(), message["type"].as_str()),
        (Some(wamid.as_str()), Some("text"))
    );
    let timestamp: u64 = message["timestamp"].as_str().unwrap().parse().unwrap();
    assert!(unix_now().abs_diff(timestamp) < 5);
    eventually(WAIT, "the ack", || fake.acked(&wamid)).await;
    let deliveries = fake.deliveries();
    assert_eq!((deliveries[0].status, deliveries[0].attempt), (200, 1));
    assert_eq!(deliveries[0].body.as_bytes(), raw.as_slice());
    assert_eq!(deliveries[0].wamids, [wamid]);
}

#[tokio::test]
async fn a_delivery_not_answered_200_is_retried_a_bounded_number_of_times() {
    let fake = FakeWhatsApp::start().await;
    assert_eq!(
        fake.post_raw(b"{}".to_vec(), Signing::Good).await.0,
        0,
        "no daemon yet"
    );
    let receiver = Receiver::attach(&fake).await;
    receiver.answer(500);
    let wamid = fake.text(&person(1), "anyone?");
    eventually(WAIT, "five attempts", || {
        (fake.deliveries().len() >= 6).then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_millis(700)).await;
    let deliveries = fake.deliveries()[1..].to_vec();
    assert_eq!(deliveries.len(), 5, "no sixth attempt");
    let attempts: Vec<(u32, u16)> = deliveries.iter().map(|d| (d.attempt, d.status)).collect();
    assert_eq!(attempts, [(1, 500), (2, 500), (3, 500), (4, 500), (5, 500)]);
    for pair in deliveries.windows(2) {
        assert!(pair[1].at.duration_since(pair[0].at) >= Duration::from_millis(250));
        assert_eq!(pair[0].body, pair[1].body, "the same bytes each time");
    }
    assert!(fake.acked(&wamid).is_none());
    // Answered 200 at the third attempt: acknowledged then, and no more attempts.
    let second = fake.text(&person(1), "still there?");
    eventually(WAIT, "two attempts", || {
        (fake.deliveries().len() >= 8).then_some(())
    })
    .await;
    receiver.answer(200);
    eventually(WAIT, "the ack", || fake.acked(&second)).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let last: Vec<(u32, u16)> = fake.deliveries()[6..]
        .iter()
        .map(|d| (d.attempt, d.status))
        .collect();
    assert_eq!(last, [(1, 500), (2, 500), (3, 200)]);
}

#[tokio::test]
async fn batches_nest_and_redeliveries_repeat_the_bytes() {
    let fake = FakeWhatsApp::start().await;
    let receiver = Receiver::attach(&fake).await;
    let (a, b, c) = (person(1), person(2), person(3));
    let wamids = fake.batch(&[(&a, "one"), (&b, "two"), (&c, "three")]);
    let payload = receiver.bodies(1).await.remove(0);
    let entries = payload["entry"].as_array().unwrap();
    assert_eq!(entries.len(), 2);
    let value = &entries[0]["changes"][0]["value"];
    assert_eq!(value["messages"].as_array().unwrap().len(), 2);
    assert_eq!(
        value["contacts"][1],
        json!({"profile": {"name": "Person 2"}, "wa_id": b})
    );
    assert_eq!(
        first_message(&json!({"entry": [entries[1]]}))["text"]["body"],
        "three"
    );
    assert_eq!(value["messages"][1]["id"], wamids[1].as_str());
    fake.redeliver_last();
    fake.redeliver(&wamids[0]);
    receiver.bodies(3).await;
    let posts = receiver.posts();
    assert!(
        posts[0].1 == posts[1].1 && posts[1].1 == posts[2].1,
        "byte for byte"
    );
    assert_eq!(fake.deliveries()[2].wamids, wamids);
}

#[tokio::test]
async fn people_send_every_kind_meta_describes() {
    let fake = FakeWhatsApp::start().await;
    let receiver = Receiver::attach(&fake).await;
    let alice = person(1);
    fake.text(&alice, "hi");
    let (_, answer) = send(
        &fake,
        buttons_to(&alice, "Run it?", &[("appr:1:o", "Allow once")]),
    )
    .await;
    let prompt = wamid_of(&answer);
    fake.reply_text(&alice, "about that", &prompt);
    fake.voice(&alice, b"OggS voice".to_vec());
    fake.document(
        &alice,
        b"%PDF".to_vec(),
        "report.pdf",
        "application/pdf",
        Some("read me"),
    );
    fake.location(&alice);
    fake.sticker(&alice);
    fake.contacts_card(&alice);
    fake.reaction(&alice, &prompt, "👍");
    let press = fake.button_reply(&alice, &prompt, "appr:1:o", "Allow once");
    let bodies = receiver.bodies(11).await;
    let messages: Vec<&Value> = bodies
        .iter()
        .filter(|b| first_message(b).is_object())
        .map(first_message)
        .collect();
    let kinds: Vec<&str> = messages
        .iter()
        .map(|m| m["type"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        [
            "text",
            "text",
            "audio",
            "document",
            "location",
            "sticker",
            "contacts",
            "reaction",
            "interactive"
        ]
    );
    let context = json!({"from": "15550000000", "id": prompt});
    assert_eq!(
        (&messages[1]["context"], &messages[1]["text"]["body"]),
        (&context, &json!("about that"))
    );
    assert_eq!(messages[2]["audio"]["voice"], true);
    assert_eq!(messages[2]["audio"]["mime_type"], "audio/ogg; codecs=opus");
    assert_eq!(
        (
            messages[3]["document"]["filename"].as_str(),
            messages[3]["document"]["caption"].as_str()
        ),
        (Some("report.pdf"), Some("read me"))
    );
    let sha = messages[3]["document"]["sha256"].as_str().unwrap();
    use base64::Engine;
    assert_eq!(
        base64::engine::general_purpose::STANDARD
            .decode(sha)
            .unwrap(),
        Sha256::digest(b"%PDF").to_vec()
    );
    assert!(messages[4]["location"]["latitude"].is_f64());
    assert!(
        fake.media(messages[5]["sticker"]["id"].as_str().unwrap())
            .is_some()
    );
    assert_eq!(
        messages[6]["contacts"][0]["name"]["formatted_name"],
        "Ada Lovelace"
    );
    assert_eq!(
        messages[7]["reaction"],
        json!({"message_id": prompt, "emoji": "👍"})
    );
    assert_eq!(messages[8]["context"], context);
    assert_eq!(
        messages[8]["interactive"],
        json!({"type": "button_reply", "button_reply": {"id": "appr:1:o", "title": "Allow once"}})
    );
    assert_eq!(messages[8]["id"], press.as_str());
    // Statuses Meta reports about the bot's message.
    fake.status(&prompt, "read");
    fake.failed_status(
        &prompt,
        131026,
        "Message undeliverable",
        "Receiver is incapable of receiving this message",
    );
    let bodies = receiver.bodies(13).await;
    let reported: Vec<(String, String)> = statuses(&bodies)
        .into_iter()
        .map(|(id, s, _)| (id, s))
        .collect();
    let states = ["sent", "delivered", "read", "failed"].map(|s| (prompt.clone(), s.to_owned()));
    assert_eq!(reported, states);
    assert_eq!(statuses(&bodies)[3].2["errors"][0]["code"], 131026);
}

#[tokio::test]
async fn the_handshake_and_badly_signed_posts() {
    let fake = FakeWhatsApp::start().await;
    let receiver = Receiver::attach(&fake).await;
    let challenge = fake
        .handshake("subscribe", "test-verify-token", "1158201444")
        .await;
    assert_eq!(challenge, (200, "1158201444".to_owned()));
    assert_eq!(fake.handshake("subscribe", "wrong", "1").await.0, 403);
    let body = br#"{"object":"whatsapp_business_account","entry":[]}"#.to_vec();
    assert_eq!(fake.post_raw(body.clone(), Signing::Bad).await.0, 200);
    assert_eq!(fake.post_raw(body.clone(), Signing::Missing).await.0, 200);
    let posts = receiver.posts();
    let good = signature("test-app-secret", &body);
    let bad = posts[0].0["x-hub-signature-256"].to_str().unwrap();
    assert!(bad.starts_with("sha256=") && bad != good);
    assert!(!posts[1].0.contains_key("x-hub-signature-256"));
    let deliveries = fake.deliveries();
    assert_eq!(
        (deliveries[0].signing, deliveries[0].attempt),
        (Signing::Bad, 0)
    );
    // `deliver` serialises and signs a payload of the test's own, retrying like Meta.
    let payload = json!({"object": "whatsapp_business_account", "entry": []});
    assert_eq!(fake.deliver(&payload).await, 200);
    assert_eq!(
        receiver.posts()[2].0["x-hub-signature-256"],
        signature("test-app-secret", &meta_json(&payload)).as_str()
    );
}

#[tokio::test]
async fn the_conformance_view_of_the_fake() {
    let fake = FakeWhatsApp::start().await;
    let receiver = Receiver::attach(&fake).await;
    let alice = fake.person(1);
    assert_eq!(fake.dm_chat(&alice), alice);
    assert!(!fake.has_groups() && !fake.edits());
    assert!(
        fake.platform_yaml()
            .contains(&format!("graph_base_url: {}", fake.base_url()))
    );
    assert!(
        fake.env()
            .contains(&"WHATSAPP_CLOUD_API_VERSION=v26.0".to_owned())
    );
    fake.write(&alice, &alice, "clean up", true);
    receiver.bodies(1).await;
    let (_, answer) = send(&fake, text_to(&alice, "Hello *there*")).await;
    let body = "Run `rm -rf /tmp/x`?";
    let (_, prompt_answer) = send(
        &fake,
        buttons_to(&alice, body, &[("o", "Allow once"), ("d", "Deny")]),
    )
    .await;
    assert_eq!(fake.shown(&alice), ["Hello there", "Run rm -rf /tmp/x?"]);
    assert_eq!(fake.sent_at(&alice).len(), 2);
    assert_eq!(
        fake.sent_message(&wamid_of(&answer)).unwrap().kind,
        SentKind::Text
    );
    let prompt = fake.prompts(&alice).remove(0);
    assert_eq!(prompt.message_id, wamid_of(&prompt_answer));
    assert_eq!(
        prompt.choices,
        [
            ("Allow once".to_owned(), "o".to_owned()),
            ("Deny".into(), "d".into())
        ]
    );
    let press = fake.press(&alice, &alice, &prompt, "Deny");
    let acked = eventually(WAIT, "the press acknowledged", || fake.acknowledged(&press)).await;
    let bodies = receiver.bodies(2).await;
    let pressed = bodies
        .iter()
        .map(first_message)
        .find(|m| m["id"] == press.as_str())
        .unwrap();
    assert_eq!(
        pressed["interactive"]["button_reply"],
        json!({"id": "d", "title": "Deny"})
    );
    assert_eq!(pressed["context"]["id"], prompt.message_id.as_str());
    assert!(acked <= std::time::Instant::now());
}
