//! The Graph API against its promises, over HTTP on 127.0.0.1 with reqwest as the daemon's
//! client: the 24-hour window both ways, Meta's limits, media up and down, the token and
//! version checks, read receipts and scripted faults. (The helpers are `tests.rs`'.)

use std::time::Duration;

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::tests::{
    Receiver, WAIT, buttons_to, client, first_message, graph, send, statuses, text_to, wamid_of,
};
use super::*;
use crate::conformance::PlatformFake;
use crate::eventually;

#[tokio::test]
async fn outside_the_window_a_send_is_accepted_then_fails() {
    let fake = FakeWhatsApp::start().await;
    let receiver = Receiver::attach(&fake).await;
    let bob = person(2);
    let (status, answer) = send(&fake, text_to(&bob, "hello?")).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["contacts"][0], json!({"input": bob, "wa_id": bob}));
    let refused = wamid_of(&answer);
    let bodies = receiver.bodies(1).await;
    let (id, state, object) = statuses(&bodies).remove(0);
    assert_eq!((id.as_str(), state.as_str()), (refused.as_str(), "failed"));
    assert_eq!(object["recipient_id"], bob.as_str());
    assert_eq!(object["errors"][0]["code"], 131047);
    assert_eq!(object["errors"][0]["title"], "Re-engagement message");
    assert!(
        object["errors"][0]["error_data"]["details"]
            .as_str()
            .unwrap()
            .contains("24 hours")
    );
    assert_eq!(fake.sent(&bob)[0].failed, Some(RE_ENGAGEMENT));
    assert!(fake.shown(&bob).is_empty(), "a failed message is not shown");
    // Once Bob writes, the window is open: accepted, then sent and delivered, in order.
    fake.text(&bob, "hi");
    let (status, answer) = send(&fake, text_to(&bob, "*welcome*")).await;
    assert_eq!(status, 200);
    let welcomed = wamid_of(&answer);
    // A status the test reports at once still comes after the two Meta queued first.
    fake.status(&welcomed, "read");
    let bodies = receiver.bodies(5).await;
    let states: Vec<(String, String)> = statuses(&bodies)
        .into_iter()
        .map(|(id, s, _)| (id, s))
        .collect();
    assert_eq!(
        states[1..],
        [
            (welcomed.clone(), "sent".into()),
            (welcomed.clone(), "delivered".into()),
            (welcomed, "read".into())
        ]
    );
    let sent = &statuses(&bodies)[1].2;
    assert_eq!(sent["pricing"]["category"], "service");
    assert!(sent["conversation"]["id"].is_string());
    assert_eq!(fake.shown(&bob), ["welcome"]);
    // A message written 25 hours ago opens no window; a template needs none.
    let carol = person(4);
    fake.text_at(&carol, "old", unix_now() - 25 * 3600);
    let (_, answer) = send(&fake, text_to(&carol, "late")).await;
    let late = wamid_of(&answer);
    eventually(WAIT, "the late message failed", || {
        let bodies: Vec<Value> = receiver
            .posts()
            .iter()
            .map(|(_, b)| serde_json::from_slice(b).unwrap())
            .collect();
        statuses(&bodies)
            .iter()
            .any(|(id, s, _)| *id == late && s == "failed")
            .then_some(())
    })
    .await;
    let template = json!({"messaging_product": "whatsapp", "to": person(5), "type": "template",
                          "template": {"name": "hello_world", "language": {"code": "en_US"}}});
    let (status, answer) = send(&fake, template).await;
    assert_eq!(
        (status, answer["messages"][0]["message_status"].as_str()),
        (200, Some("accepted"))
    );
    let sent = fake.sent(&person(5));
    assert_eq!(
        (sent[0].failed, sent[0].template.clone()),
        (None, Some(("hello_world".into(), "en_US".into())))
    );
}

#[tokio::test]
async fn outside_the_window_a_sync_fake_refuses_at_once() {
    let options = Options {
        window_error: WindowError::Sync,
        ..Options::default()
    };
    let fake = FakeWhatsApp::start_with(options).await;
    let receiver = Receiver::attach(&fake).await;
    let bob = person(2);
    let (status, answer) = send(&fake, text_to(&bob, "hello?")).await;
    assert_eq!(status, 400);
    assert_eq!(answer["error"]["code"], 131047);
    assert!(
        answer["error"]["error_data"]["details"]
            .as_str()
            .unwrap()
            .contains("24 hours")
    );
    let sent = fake.sent(&bob);
    assert_eq!(
        (sent[0].wamid.as_str(), sent[0].failed),
        ("", Some(RE_ENGAGEMENT))
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(receiver.posts().is_empty(), "no status for a refusal");
}

#[tokio::test]
async fn meta_s_limits_are_enforced() {
    let fake = FakeWhatsApp::start().await;
    let _receiver = Receiver::attach(&fake).await;
    let alice = person(1);
    fake.text(&alice, "hi");
    let longest: String = "é".repeat(4096);
    assert_eq!(
        send(&fake, text_to(&alice, &longest)).await.0,
        200,
        "4096 characters fit"
    );
    let (status, answer) = send(&fake, text_to(&alice, &format!("{longest}e"))).await;
    assert_eq!((status, &answer["error"]["code"]), (400, &json!(100)));
    let message = answer["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("Param text['body'] must be at most 4096 characters long."),
        "{message}"
    );
    assert_eq!(
        send(&fake, text_to(&alice, "")).await.1["error"]["code"],
        100
    );
    let mut no_product = text_to(&alice, "x");
    no_product["messaging_product"] = json!("sms");
    assert_eq!(send(&fake, no_product).await.1["error"]["code"], 100);
    let ok = buttons_to(
        &alice,
        "Run it?",
        &[("a", "Allow once"), ("s", "Session"), ("d", "Deny")],
    );
    assert_eq!(send(&fake, ok).await.0, 200);
    let refusals = [
        buttons_to(
            &alice,
            "Run it?",
            &[("a", "A"), ("b", "B"), ("c", "C"), ("d", "D")],
        ),
        buttons_to(&alice, "Run it?", &[("a", "twenty-one characters")]),
        buttons_to(&alice, "Run it?", &[("a", "Same"), ("a", "Other")]),
        buttons_to(&alice, "Run it?", &[("a", "Same"), ("b", "Same")]),
        buttons_to(&alice, "Run it?", &[]),
        buttons_to(&alice, &"x".repeat(1025), &[("a", "A")]),
        buttons_to(&alice, "Run it?", &[(&"i".repeat(257), "A")]),
    ];
    for refused in refusals {
        let (status, answer) = send(&fake, refused.clone()).await;
        assert_eq!(
            (status, &answer["error"]["code"]),
            (400, &json!(131009)),
            "{refused}"
        );
        assert_eq!(
            answer["error"]["message"],
            "(#131009) Parameter value is not valid"
        );
    }
    let twenty = buttons_to(&alice, "ok?", &[("a", "twenty characters!!!")]);
    assert_eq!(send(&fake, twenty).await.0, 200);
    let sent = fake.sent(&alice);
    assert_eq!(sent.len(), 3, "only what was accepted is kept");
    assert_eq!(sent[1].buttons[0], ("a".into(), "Allow once".into()));
    let prompts = fake.prompts(&alice);
    assert_eq!(prompts[0].choices[2], ("Deny".into(), "d".into()));
}

/// A multipart upload as the daemon makes it.
fn upload_form(fields: &[(&str, &str)], file: Option<(&str, &str, &[u8])>) -> (String, Vec<u8>) {
    let boundary = "XhermesBoundary42";
    let mut body = Vec::new();
    for (name, value) in fields {
        body.extend(
            format!(
                "--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\"\r\n\r\n{value}\r\n"
            )
            .bytes(),
        );
    }
    if let Some((name, mime, bytes)) = file {
        body.extend(format!("--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{name}\"\r\nContent-Type: {mime}\r\n\r\n").bytes());
        body.extend_from_slice(bytes);
        body.extend(b"\r\n");
    }
    body.extend(format!("--{boundary}--\r\n").bytes());
    (format!("multipart/form-data; boundary={boundary}"), body)
}

async fn upload(fake: &FakeWhatsApp, content_type: String, body: Vec<u8>) -> (u16, Value) {
    let url = format!("{}/v26.0/1000000001/media", fake.base_url());
    let request = client().post(url).bearer_auth("EAAtest-token");
    let response = request
        .header("Content-Type", content_type)
        .body(body)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap())
}

#[tokio::test]
async fn media_goes_up_by_form_and_comes_down_by_id_with_the_token() {
    let fake = FakeWhatsApp::start().await;
    let receiver = Receiver::attach(&fake).await;
    let alice = person(1);
    fake.text(&alice, "send me the chart");
    let png = b"\x89PNG\r\n\x1a\nfake chart".to_vec();
    let fields = [("messaging_product", "whatsapp"), ("type", "image/png")];
    let (content_type, body) = upload_form(&fields, Some(("chart.png", "image/png", &png)));
    let (status, answer) = upload(&fake, content_type, body).await;
    assert_eq!(status, 200, "{answer}");
    let id = answer["id"].as_str().unwrap().to_owned();
    let uploads = fake.uploads();
    assert_eq!(
        (uploads[0].filename.as_deref(), uploads[0].mime.as_str()),
        (Some("chart.png"), "image/png")
    );
    assert_eq!(uploads[0].bytes, png);
    let (content_type, body) =
        upload_form(&[("type", "image/png")], Some(("x.png", "image/png", b"x")));
    assert_eq!(
        upload(&fake, content_type, body).await.1["error"]["code"],
        100
    );
    let image = json!({"messaging_product": "whatsapp", "to": alice, "type": "image",
                       "image": {"id": id, "caption": "the *chart*"}});
    assert_eq!(send(&fake, image).await.0, 200);
    let sent = fake.sent(&alice).remove(0);
    let expected = SentKind::Media {
        media_type: "image".into(),
        source: MediaSource::Id(id.clone()),
        caption: Some("the *chart*".into()),
        filename: None,
        voice: false,
    };
    assert_eq!((sent.kind, sent.text.as_str()), (expected, "the *chart*"));
    let unknown = json!({"messaging_product": "whatsapp", "to": alice, "type": "image", "image": {"id": "999"}});
    assert_eq!(send(&fake, unknown).await.1["error"]["code"], 100);
    let voice_caption = json!({"messaging_product": "whatsapp", "to": alice, "type": "audio",
                               "audio": {"id": id, "caption": "no"}});
    assert_eq!(send(&fake, voice_caption).await.0, 400);
    let link = json!({"messaging_product": "whatsapp", "to": alice, "type": "document",
                      "document": {"link": "https://example.com/r.pdf", "filename": "r.pdf"}});
    assert_eq!(send(&fake, link).await.0, 200);
    // The lookup, then the download, which wants the token too.
    let (status, info) = graph(
        &fake,
        "GET",
        &format!("/v26.0/{id}"),
        Some("EAAtest-token"),
        None,
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(
        (info["mime_type"].as_str(), info["file_size"].as_u64()),
        (Some("image/png"), Some(png.len() as u64))
    );
    assert_eq!(info["sha256"], hex::encode(Sha256::digest(&png)));
    let url = info["url"].as_str().unwrap();
    assert!(
        url.starts_with(&format!("{}/media-download/{id}?", fake.base_url())),
        "{url}"
    );
    assert_eq!(
        client().get(url).send().await.unwrap().status().as_u16(),
        401
    );
    let response = client()
        .get(url)
        .bearer_auth("EAAtest-token")
        .send()
        .await
        .unwrap();
    assert_eq!(response.headers()["content-type"], "image/png");
    assert_eq!(response.bytes().await.unwrap().to_vec(), png);
    assert_eq!(fake.downloads(&id), 1);
    let (status, missing) = graph(&fake, "GET", "/v26.0/4242", Some("EAAtest-token"), None).await;
    assert_eq!((status, &missing["error"]["code"]), (400, &json!(100)));
    // What a person sends is served the same way, named in the webhook.
    fake.image(&alice, b"photo".to_vec(), "image/jpeg", Some("look"));
    let sent_image = eventually(WAIT, "the person's image", || {
        let posts = receiver.posts();
        let bodies = posts
            .iter()
            .map(|(_, b)| serde_json::from_slice::<Value>(b).unwrap());
        bodies
            .map(|b| first_message(&b).clone())
            .find(|m| m["type"] == "image")
    })
    .await;
    let image = &sent_image["image"];
    assert_eq!(
        (image["caption"].as_str(), image["mime_type"].as_str()),
        (Some("look"), Some("image/jpeg"))
    );
    let their_id = image["id"].as_str().unwrap();
    assert_eq!(
        fake.media(their_id),
        Some(("image/jpeg".into(), b"photo".to_vec()))
    );
    let (_, info) = graph(
        &fake,
        "GET",
        &format!("/v26.0/{their_id}"),
        Some("EAAtest-token"),
        None,
    )
    .await;
    assert_eq!(info["file_size"], 5);
}

#[tokio::test]
async fn the_token_the_version_and_the_number_are_checked() {
    let fake = FakeWhatsApp::start().await;
    let body = Some(text_to(&person(1), "x"));
    for token in [None, Some("EAAwrong")] {
        let (status, answer) = graph(
            &fake,
            "POST",
            "/v26.0/1000000001/messages",
            token,
            body.clone(),
        )
        .await;
        assert_eq!((status, &answer["error"]["code"]), (401, &json!(190)));
        assert_eq!(
            answer["error"]["message"],
            "Invalid OAuth access token - Cannot parse access token"
        );
        assert_eq!(answer["error"]["type"], "OAuthException");
    }
    let token = Some("EAAtest-token");
    let (status, answer) = graph(
        &fake,
        "POST",
        "/v19.0/1000000001/messages",
        token,
        body.clone(),
    )
    .await;
    assert_eq!((status, &answer["error"]["code"]), (400, &json!(100)));
    let (status, answer) = graph(&fake, "POST", "/v26.0/999/messages", token, body).await;
    assert_eq!((status, &answer["error"]["code"]), (400, &json!(100)));
    let (status, number) = graph(&fake, "GET", "/v26.0/1000000001", token, None).await;
    assert_eq!(
        (status, number["display_phone_number"].as_str()),
        (200, Some("15550000000"))
    );
    let calls = fake.calls();
    assert_eq!(calls.len(), 5);
    assert!(!calls[0].auth_ok && !calls[1].auth_ok && calls[2].auth_ok);
    assert_eq!((calls[0].status, calls[0].error_code), (401, Some(190)));
    assert_eq!(calls[2].body["text"]["body"], "x");
    assert_eq!(calls[2].path, "/v19.0/1000000001/messages");
}

#[tokio::test]
async fn read_receipts_name_a_message_the_person_sent() {
    let fake = FakeWhatsApp::start().await;
    let _receiver = Receiver::attach(&fake).await;
    let alice = person(1);
    let wamid = fake.text(&alice, "hi");
    let read = |id: &str, typing: bool| {
        let mut body = json!({"messaging_product": "whatsapp", "status": "read", "message_id": id});
        if typing {
            body["typing_indicator"] = json!({"type": "text"});
        }
        body
    };
    let (status, answer) = send(&fake, read("wamid.HBgLnope", true)).await;
    assert_eq!((status, &answer["error"]["code"]), (400, &json!(100)));
    assert_eq!(
        send(&fake, read(&wamid, false)).await,
        (200, json!({"success": true}))
    );
    assert_eq!(send(&fake, read(&wamid, true)).await.0, 200);
    let reads = fake.reads(&alice);
    let seen: Vec<(&str, bool)> = reads
        .iter()
        .map(|r| (r.message_id.as_str(), r.typing))
        .collect();
    assert_eq!(seen, [(wamid.as_str(), false), (wamid.as_str(), true)]);
    let working = fake.working(&alice);
    assert_eq!(
        working,
        [(reads[1].at, crate::conformance::WorkingEvent::Shown)]
    );
}

#[tokio::test]
async fn scripted_faults_answer_like_meta() {
    let fake = FakeWhatsApp::start().await;
    let _receiver = Receiver::attach(&fake).await;
    let alice = person(1);
    let wamid = fake.text(&alice, "hi");
    let pair = "(#131056) (Business Account, Consumer Account) pair rate limit hit";
    fake.fail_next(1, 400, 131056, pair);
    let (status, answer) = send(&fake, text_to(&alice, "one")).await;
    assert_eq!(status, 400);
    let error = &answer["error"];
    assert_eq!(
        (error["code"].as_u64(), error["message"].as_str()),
        (Some(131056), Some(pair))
    );
    assert_eq!(
        error["error_data"],
        json!({"messaging_product": "whatsapp", "details": pair})
    );
    assert_eq!(
        (error["type"].as_str(), error["fbtrace_id"].as_str()),
        (Some("OAuthException"), Some("Afake"))
    );
    assert_eq!(
        send(&fake, text_to(&alice, "two")).await.0,
        200,
        "one fault, used"
    );
    let receipt = json!({"messaging_product": "whatsapp", "status": "read", "message_id": wamid});
    fake.fail_next_sends(2, 429, 130429, "(#130429) Rate limit hit");
    assert_eq!(
        send(&fake, receipt.clone()).await.0,
        200,
        "read receipts pass"
    );
    assert_eq!(
        send(&fake, text_to(&alice, "three")).await.1["error"]["code"],
        130429
    );
    assert_eq!(send(&fake, text_to(&alice, "four")).await.0, 429);
    assert_eq!(send(&fake, text_to(&alice, "five")).await.0, 200);
    fake.fail_next(1, 500, 131000, "Something went wrong");
    assert_eq!(
        send(&fake, receipt).await.0,
        500,
        "fail_next takes read receipts too"
    );
    fake.fail_next(3, 401, 190, "Error validating access token");
    fake.clear_faults();
    assert_eq!(send(&fake, text_to(&alice, "six")).await.0, 200);
    let texts: Vec<String> = fake.sent(&alice).into_iter().map(|m| m.text).collect();
    assert_eq!(texts, ["two", "five", "six"]);
}
