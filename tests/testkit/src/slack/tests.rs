//! The fake against slack-morphism 2.31's own models: every Socket Mode frame and every
//! event, press and command parsed with its types over a raw WebSocket; the protocol's
//! tickets, acknowledgements, redeliveries and queue; the Web API's refusals over raw HTTP.
//! (`client_tests.rs` drives the real slack-morphism client and listener.)

use std::collections::HashMap;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use slack_morphism::prelude::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_tungstenite::tungstenite::Message;

use super::*;
use crate::conformance::PlatformFake;

pub(super) const WAIT: Duration = Duration::from_secs(10);

/// One HTTP/1.1 request on a fresh connection: (status, headers lower-cased, body).
pub(super) async fn raw(
    fake: &FakeSlack,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> (u16, HashMap<String, String>, Vec<u8>) {
    let mut s = tokio::net::TcpStream::connect(fake.http_addr)
        .await
        .unwrap();
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nHost: slack\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        head += &format!("{k}: {v}\r\n");
    }
    s.write_all(format!("{head}\r\n").as_bytes()).await.unwrap();
    s.write_all(body).await.unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out).await.unwrap();
    let split = out.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
    let head = String::from_utf8_lossy(&out[..split]).to_string();
    let mut lines = head.lines();
    let status = lines.next().unwrap().split(' ').nth(1).unwrap();
    let headers = lines
        .filter_map(|l| l.split_once(": "))
        .map(|(k, v)| (k.to_ascii_lowercase(), v.to_owned()))
        .collect();
    (status.parse().unwrap(), headers, out[split + 4..].to_vec())
}

/// A Web API call with a JSON body: (status, answer).
pub(super) async fn api(
    fake: &FakeSlack,
    token: Option<&str>,
    method: &str,
    body: Value,
) -> (u16, Value) {
    let auth = token.map(|t| format!("Bearer {t}"));
    let mut headers = vec![("Content-Type", "application/json; charset=utf-8")];
    if let Some(auth) = &auth {
        headers.push(("Authorization", auth));
    }
    let path = format!("/api/{method}");
    let (status, _, body) = raw(fake, "POST", &path, &headers, body.to_string().as_bytes()).await;
    (status, serde_json::from_slice(&body).unwrap_or(Value::Null))
}

/// The bot's call.
pub(super) async fn bot(fake: &FakeSlack, method: &str, body: Value) -> Value {
    api(fake, Some(BOT_TOKEN), method, body).await.1
}

/// Blocks with a prompt and two buttons.
pub(super) fn prompt_blocks() -> Value {
    json!([
        {"type": "section", "text": {"type": "mrkdwn", "text": "Run `rm -rf /tmp/x`?"}},
        {"type": "actions", "block_id": "approval", "elements": [
            {"type": "button", "action_id": "once", "value": "once", "style": "primary",
             "text": {"type": "plain_text", "text": "Allow once"}},
            {"type": "button", "action_id": "deny", "value": "deny", "style": "danger",
             "text": {"type": "plain_text", "text": "Deny"}}]}
    ])
}

/// A raw Socket Mode client.
struct Ws(
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>,
);

impl Ws {
    async fn url(fake: &FakeSlack) -> String {
        let (_, answer) = api(fake, Some(APP_TOKEN), "apps.connections.open", json!({})).await;
        answer["url"].as_str().unwrap().to_owned()
    }

    async fn connect(fake: &FakeSlack) -> Ws {
        let (ws, _) = tokio_tungstenite::connect_async(Ws::url(fake).await)
            .await
            .unwrap();
        let mut ws = Ws(ws);
        let hello = ws.frame().await;
        let SlackSocketModeEvent::Hello(hello) = parse(&hello) else {
            panic!("not a hello: {hello:#}")
        };
        assert_eq!(hello.connection_info.app_id.to_string(), APP_ID);
        ws
    }

    /// The next text frame; `Err` with the close code (0: closed without one).
    async fn next(&mut self) -> Result<Value, u16> {
        loop {
            match tokio::time::timeout(WAIT, self.0.next())
                .await
                .expect("a frame in time")
            {
                Some(Ok(Message::Text(text))) => return Ok(serde_json::from_str(&text).unwrap()),
                Some(Ok(Message::Close(frame))) => return Err(frame.map_or(0, |f| f.code.into())),
                Some(Ok(_)) => {}
                Some(Err(_)) | None => return Err(0),
            }
        }
    }

    async fn frame(&mut self) -> Value {
        self.next().await.expect("a frame, not a close")
    }

    /// Nothing arrives within `d`.
    async fn quiet(&mut self, d: Duration) -> bool {
        tokio::time::timeout(d, self.0.next()).await.is_err()
    }

    /// The next frame, which must be an `events_api` envelope: it and its callback.
    async fn event(&mut self) -> (Value, SlackPushEventCallback) {
        let frame = self.frame().await;
        match parse(&frame) {
            SlackSocketModeEvent::EventsApi(e) => {
                assert!(!e.envelope_params.accepts_response_payload);
                (frame, e.payload)
            }
            other => panic!("not an events_api envelope: {other:?}"),
        }
    }

    /// The same, acknowledged.
    async fn event_acked(&mut self) -> (Value, SlackPushEventCallback) {
        let (frame, callback) = self.event().await;
        self.ack(&frame).await;
        (frame, callback)
    }

    async fn ack(&mut self, frame: &Value) {
        let ack = json!({"envelope_id": frame["envelope_id"]});
        self.0.send(Message::Text(ack.to_string())).await.unwrap();
    }
}

/// A Socket Mode frame as slack-morphism's listener reads it. Its `SlackSocketModeEvent`
/// cannot be named outside the crate (the crate's own `socket_mode` module shadows
/// `models::socket_mode`), so the envelope is mirrored here, field for field, and the
/// payloads are parsed with slack-morphism's own types; `client_tests.rs` runs the real
/// listener over the same frames.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, serde::Deserialize)]
#[serde(tag = "type")]
enum SlackSocketModeEvent {
    #[serde(rename = "hello")]
    Hello(Hello),
    #[serde(rename = "disconnect")]
    Disconnect(Disconnect),
    #[serde(rename = "events_api")]
    EventsApi(Envelope<SlackPushEventCallback>),
    #[serde(rename = "interactive")]
    Interactive(Envelope<SlackInteractionEvent>),
    #[serde(rename = "slash_commands")]
    SlashCommands(Envelope<SlackCommandEvent>),
}

#[derive(Debug, serde::Deserialize)]
struct Hello {
    connection_info: ConnectionInfo,
    #[allow(dead_code)]
    num_connections: u32,
    #[allow(dead_code)]
    debug_info: DebugInfo,
}

#[derive(Debug, serde::Deserialize)]
struct ConnectionInfo {
    app_id: SlackAppId,
}

#[derive(Debug, serde::Deserialize)]
struct DebugInfo {
    #[allow(dead_code)]
    host: String,
    #[allow(dead_code)]
    started: Option<String>,
    #[allow(dead_code)]
    build_number: Option<u64>,
    #[allow(dead_code)]
    approximate_connection_time: Option<u64>,
}

#[derive(Debug, serde::Deserialize)]
struct Disconnect {
    reason: String,
    #[allow(dead_code)]
    debug_info: DebugInfo,
}

#[derive(Debug, serde::Deserialize)]
struct EnvelopeParams {
    envelope_id: String,
    accepts_response_payload: bool,
}

#[derive(Debug, serde::Deserialize)]
struct Envelope<P> {
    #[serde(flatten)]
    envelope_params: EnvelopeParams,
    payload: P,
}

fn parse(frame: &Value) -> SlackSocketModeEvent {
    serde_json::from_value(frame.clone()).unwrap_or_else(|e| panic!("{e}: {frame:#}"))
}

fn message_of(callback: &SlackPushEventCallback) -> SlackMessageEvent {
    match &callback.event {
        SlackEventCallbackBody::Message(m) => m.clone(),
        other => panic!("not a modelled message event: {other:?}"),
    }
}

fn text_of(m: &SlackMessageEvent) -> String {
    let content = m.content.as_ref().expect("content");
    content.text.clone().unwrap_or_default()
}

#[tokio::test]
async fn every_frame_and_payload_parses_with_slack_morphism() {
    let fake = FakeSlack::start().await;
    let (alice, bob) = (fake.person(1), fake.person(2));
    let dm = fake.dm_chat(&alice);
    assert_eq!((alice.as_str(), dm.as_str()), ("U0PERSON1", "D0PERSON1"));
    let mut ws = Ws::connect(&fake).await;
    assert_eq!((fake.connections(), fake.connects()), (1, 1));

    // A DM, escaped and with its link wrapped as Slack does; a rich_text block.
    let first = fake.message(&dm, &alice, "hello <there> & https://example.com/x", true);
    let (frame, callback) = ws.event_acked().await;
    assert_eq!(
        (
            frame["retry_attempt"].clone(),
            frame["retry_reason"].clone()
        ),
        (json!(0), json!(""))
    );
    assert_eq!(callback.team_id.to_string(), TEAM_ID);
    let m = message_of(&callback);
    assert_eq!(
        m.origin.channel_type.as_ref().map(|t| t.to_string()),
        Some("im".into())
    );
    assert_eq!(m.origin.ts.to_string(), first);
    assert_eq!(
        m.sender.user.as_ref().map(|u| u.to_string()),
        Some(alice.clone())
    );
    assert_eq!(
        text_of(&m),
        "hello &lt;there&gt; &amp; <https://example.com/x>"
    );
    let blocks = m.content.as_ref().and_then(|c| c.blocks.clone()).unwrap();
    assert!(matches!(blocks[0], SlackBlock::RichText(_)), "{blocks:?}");
    assert!(m.subtype.is_none());
    ws.ack(&frame).await;
    let id = frame["envelope_id"].as_str().unwrap();
    crate::eventually(WAIT, "the ack", || fake.acked(id)).await;

    // A mention in the channel: a message and an app_mention, different event ids.
    let asked = fake.message(GROUP_CHANNEL, &alice, "what time is it?", true);
    let (_, message) = ws.event_acked().await;
    let (_, mention) = ws.event_acked().await;
    let m = message_of(&message);
    assert_eq!(text_of(&m), format!("<@{BOT_USER_ID}> what time is it?"));
    assert_eq!(
        m.origin.channel_type.as_ref().map(|t| t.to_string()),
        Some("channel".into())
    );
    let SlackEventCallbackBody::AppMention(a) = &mention.event else {
        panic!("not an app_mention: {mention:?}")
    };
    assert_eq!(
        (a.user.to_string(), a.channel.to_string()),
        (alice.clone(), GROUP_CHANNEL.to_owned())
    );
    assert_eq!(a.origin.ts.to_string(), asked);
    assert_ne!(message.event_id, mention.event_id);

    fake.message(GROUP_CHANNEL, &bob, "among ourselves", false);
    let (_, c) = ws.event_acked().await;
    assert_eq!(text_of(&message_of(&c)), "among ourselves");

    // In a thread: both events carry thread_ts.
    let reply = fake.message_in_thread(GROUP_CHANNEL, &bob, "me too", &asked, true);
    let (_, c) = ws.event_acked().await;
    let m = message_of(&c);
    assert_eq!(
        m.origin.thread_ts.as_ref().map(|t| t.to_string()),
        Some(asked.clone())
    );
    assert_eq!(m.origin.ts.to_string(), reply);
    let (_, c) = ws.event_acked().await;
    let SlackEventCallbackBody::AppMention(a) = &c.event else {
        panic!()
    };
    assert_eq!(
        a.origin.thread_ts.as_ref().map(|t| t.to_string()),
        Some(asked.clone())
    );

    // Files: subtype file_share, url_private_download served to the bot token.
    let files = vec![("notes.txt", "text/plain", b"some notes".to_vec())];
    fake.message_with_files(&dm, &alice, "see attached", false, files);
    let (_, c) = ws.event_acked().await;
    let m = message_of(&c);
    assert_eq!(m.subtype, Some(SlackMessageEventType::FileShare));
    let file = &m.content.as_ref().unwrap().files.as_ref().unwrap()[0];
    assert_eq!(file.name.as_deref(), Some("notes.txt"));
    assert_eq!(
        file.mimetype.as_ref().map(|m| m.to_string()),
        Some("text/plain".into())
    );
    let url = file.url_private_download.clone().unwrap();
    let auth = format!("Bearer {BOT_TOKEN}");
    let (status, _, bytes) = raw(&fake, "GET", url.path(), &[("Authorization", &auth)], b"").await;
    assert_eq!((status, bytes.as_slice()), (200, &b"some notes"[..]));
    assert_eq!(fake.downloads(&file.id.0), 1);
    let (status, headers, _) = raw(&fake, "GET", url.path(), &[], b"").await;
    assert_eq!(
        (status, headers["content-type"].as_str()),
        (403, "text/html; charset=utf-8")
    );

    // An edit, a deletion, another bot.
    fake.edit(&dm, &first, "hello again");
    let (_, c) = ws.event_acked().await;
    let m = message_of(&c);
    assert_eq!(m.subtype, Some(SlackMessageEventType::MessageChanged));
    let edited = m.message.unwrap();
    assert_eq!(edited.content.unwrap().text.as_deref(), Some("hello again"));
    assert_eq!(edited.ts.to_string(), first);
    assert!(edited.edited.is_some());
    let before = m.previous_message.unwrap().content.unwrap().text.unwrap();
    assert!(before.starts_with("hello &lt;there&gt;"), "{before}");
    fake.delete(&dm, &first);
    let (_, c) = ws.event_acked().await;
    let m = message_of(&c);
    assert_eq!(m.subtype, Some(SlackMessageEventType::MessageDeleted));
    assert_eq!(m.deleted_ts.map(|t| t.to_string()), Some(first.clone()));
    fake.bot_message(GROUP_CHANNEL, "beep");
    let (_, c) = ws.event_acked().await;
    let m = message_of(&c);
    assert_eq!(m.subtype, Some(SlackMessageEventType::BotMessage));
    assert_eq!(
        m.sender.bot_id.map(|b| b.to_string()),
        Some(OTHER_BOT_ID.into())
    );

    // The bot's own post comes back with its bot_id and no subtype.
    let posted = bot(
        &fake,
        "chat.postMessage",
        json!({"channel": GROUP_CHANNEL,
        "thread_ts": asked, "text": "Run it?", "blocks": prompt_blocks()}),
    )
    .await;
    assert_eq!(posted["ok"], true, "{posted}");
    let (_, c) = ws.event_acked().await;
    let m = message_of(&c);
    assert_eq!(m.sender.bot_id.map(|b| b.to_string()), Some(BOT_ID.into()));
    assert_eq!(
        m.sender.user.map(|u| u.to_string()),
        Some(BOT_USER_ID.into())
    );
    assert!(m.subtype.is_none());

    // A press: block_actions with the button, the message and a response_url.
    let prompt = fake.prompts(GROUP_CHANNEL).pop().unwrap();
    assert_eq!(prompt.text, "Run rm -rf /tmp/x?");
    assert_eq!(prompt.message_id, posted["ts"].as_str().unwrap());
    let press = fake.press(GROUP_CHANNEL, &alice, &prompt, "Allow once");
    let frame = ws.frame().await;
    assert_eq!(frame["envelope_id"], press.as_str());
    let SlackSocketModeEvent::Interactive(i) = parse(&frame) else {
        panic!("{frame:#}")
    };
    let SlackInteractionEvent::BlockActions(b) = i.payload else {
        panic!("not block_actions")
    };
    let action = &b.actions.as_ref().unwrap()[0];
    assert_eq!(action.action_id.to_string(), "once");
    assert_eq!(action.value.as_deref(), Some("once"));
    assert_eq!(
        action.block_id.as_ref().map(|b| b.to_string()),
        Some("approval".into())
    );
    assert_eq!(
        b.user.as_ref().map(|u| u.id.to_string()),
        Some(alice.clone())
    );
    assert_eq!(
        b.channel.as_ref().map(|c| c.id.to_string()),
        Some(GROUP_CHANNEL.into())
    );
    let SlackInteractionActionContainer::Message(container) = &b.container else {
        panic!()
    };
    assert_eq!(container.message_ts.to_string(), prompt.message_id);
    let message = b.message.as_ref().unwrap();
    let blocks = message.content.blocks.as_ref().unwrap();
    assert!(matches!(blocks[1], SlackBlock::Actions(_)), "{blocks:?}");
    assert_eq!(
        message.origin.thread_ts.as_ref().map(|t| t.to_string()),
        Some(asked.clone())
    );
    assert!(b.response_url.is_some());
    ws.ack(&frame).await;
    crate::eventually(WAIT, "the press acked", || fake.acknowledged(&press)).await;

    // A slash command: accepts a response payload.
    let command = fake.slash(GROUP_CHANNEL, &bob, "/hermes", "status");
    let frame = ws.frame().await;
    let SlackSocketModeEvent::SlashCommands(c) = parse(&frame) else {
        panic!("{frame:#}")
    };
    assert!(c.envelope_params.accepts_response_payload);
    assert_eq!(c.envelope_params.envelope_id, command);
    assert_eq!(
        (c.payload.command.to_string(), c.payload.text.as_deref()),
        ("/hermes".into(), Some("status"))
    );
    assert_eq!(c.payload.user_id.to_string(), bob);
    let ack = json!({"envelope_id": command, "payload": {"text": "All *good*", "response_type": "ephemeral"}});
    ws.0.send(Message::Text(ack.to_string())).await.unwrap();
    crate::eventually(WAIT, "the command's answer", || {
        fake.command_responses(&command).first().map(|r| r.via)
    })
    .await;
    let notices = fake.ephemerals(GROUP_CHANNEL);
    assert_eq!(
        (notices[0].user.as_str(), notices[0].text.as_str()),
        (bob.as_str(), "All *good*")
    );

    // Refresh: a disconnect frame, then the socket closes.
    fake.disconnect_all();
    let SlackSocketModeEvent::Disconnect(d) = parse(&ws.frame().await) else {
        panic!()
    };
    assert_eq!(d.reason, "refresh_requested");
    assert_eq!(ws.next().await, Err(1000));
    assert_eq!(fake.connections(), 0);
}

#[tokio::test]
async fn envelopes_wait_for_a_socket_and_unacknowledged_events_come_again() {
    let options = Options {
        redeliver_after: Duration::from_millis(300),
        echo_own: false,
        ..Options::default()
    };
    let fake = FakeSlack::start_with(options).await;
    let alice = fake.person(1);
    let dm = fake.dm_chat(&alice);

    // Written before anyone connects: queued, then delivered after hello.
    fake.message(&dm, &alice, "early", false);
    assert!(fake.envelopes()[0].sends.is_empty());
    let mut ws = Ws::connect(&fake).await;
    let (first, _) = ws.event().await;
    for attempt in 1..=3 {
        let (again, _) = ws.event().await;
        assert_eq!(again["envelope_id"], first["envelope_id"]);
        assert_eq!(
            (
                again["retry_attempt"].clone(),
                again["retry_reason"].clone()
            ),
            (json!(attempt), json!("timeout"))
        );
    }
    assert!(
        ws.quiet(Duration::from_millis(700)).await,
        "three redeliveries at most"
    );
    ws.ack(&first).await;
    let id = first["envelope_id"].as_str().unwrap().to_owned();
    crate::eventually(WAIT, "the late ack", || fake.acked(&id)).await;
    assert_eq!(fake.envelopes()[0].sends.len(), 4);

    // A forced redelivery, acknowledged or not.
    assert!(fake.redeliver(&id));
    let (again, _) = ws.event().await;
    assert_eq!(again["retry_attempt"], 4);
    assert!(!fake.redeliver("no-such-envelope"));

    // Presses are not delivered again: they expire.
    let posted = bot(
        &fake,
        "chat.postMessage",
        json!({"channel": dm, "text": "?", "blocks": prompt_blocks()}),
    )
    .await;
    let ts = posted["ts"].as_str().unwrap();
    let press = fake.press_button(&dm, &alice, ts, "deny");
    assert_eq!(ws.frame().await["type"], "interactive");
    assert!(ws.quiet(Duration::from_millis(600)).await);
    assert!(
        fake.envelopes()
            .iter()
            .any(|e| e.id == press && e.expired && e.acked.is_none())
    );

    // A dropped socket: what comes meanwhile waits for the next one.
    fake.drop_all();
    assert_eq!(ws.next().await, Err(0));
    fake.message(&dm, &alice, "while away", false);
    let mut ws = Ws::connect(&fake).await;
    let (_, c) = ws.event().await;
    assert_eq!(text_of(&message_of(&c)), "while away");
    assert_eq!(fake.connects(), 2);
    assert_eq!(fake.acks().len(), 1);

    // Tickets are good for one connection; garbage frames are kept, not fatal.
    let url = Ws::url(&fake).await;
    let _ok = tokio_tungstenite::connect_async(url.clone()).await.unwrap();
    assert!(tokio_tungstenite::connect_async(url).await.is_err());
    let bad = format!("ws://{}/link/?ticket=999", fake.ws_addr);
    assert!(tokio_tungstenite::connect_async(bad).await.is_err());
    assert_eq!(fake.refused_connects(), 2);
    ws.0.send(Message::Text("not json".into())).await.unwrap();
    crate::eventually(WAIT, "the odd frame", || fake.other_frames().pop()).await;
}

#[tokio::test]
async fn the_web_api_refuses_and_limits_like_slack() {
    let options = Options {
        post_per_second: Some(2),
        ..Options::default()
    };
    let fake = FakeSlack::start_with(options).await;
    let post = |text: &str| json!({"channel": GROUP_CHANNEL, "text": text});
    let err = |v: Value| v["error"].as_str().unwrap_or("ok").to_owned();

    // Tokens: none, wrong, the wrong kind.
    assert_eq!(
        err(api(&fake, None, "auth.test", json!({})).await.1),
        "not_authed"
    );
    assert_eq!(
        err(api(&fake, Some("xoxb-nope"), "auth.test", json!({}))
            .await
            .1),
        "invalid_auth"
    );
    assert_eq!(
        err(api(&fake, Some(APP_TOKEN), "chat.postMessage", post("x"))
            .await
            .1),
        "not_allowed_token_type"
    );
    assert_eq!(
        err(
            api(&fake, Some(BOT_TOKEN), "apps.connections.open", json!({}))
                .await
                .1
        ),
        "not_allowed_token_type"
    );
    assert_eq!(
        err(bot(&fake, "chat.nope", json!({})).await),
        "unknown_method"
    );
    let calls = fake.calls("auth.test");
    assert_eq!(
        (calls.len(), calls[1].error.as_deref()),
        (2, Some("invalid_auth"))
    );

    // Messages Slack would not take.
    let bad = [
        (
            json!({"channel": "C0NOPE", "text": "x"}),
            "channel_not_found",
        ),
        (json!({"channel": GROUP_CHANNEL}), "no_text"),
        (
            json!({"channel": GROUP_CHANNEL, "text": "x".repeat(40_001)}),
            "msg_too_long",
        ),
        (
            json!({"channel": GROUP_CHANNEL, "text": "x", "blocks": "nope"}),
            "invalid_blocks_format",
        ),
    ];
    for (body, error) in bad {
        assert_eq!(err(bot(&fake, "chat.postMessage", body).await), error);
    }
    let long_label = json!([{"type": "actions", "elements": [{"type": "button", "action_id": "a",
        "text": {"type": "plain_text", "text": "x".repeat(76)}}]}]);
    let answer = bot(
        &fake,
        "chat.postMessage",
        json!({"channel": GROUP_CHANNEL, "text": "x", "blocks": long_label}),
    )
    .await;
    assert_eq!(answer["error"], "invalid_blocks");
    assert_eq!(
        answer["errors"][0],
        "must be less than 76 characters [json-pointer:/blocks/0/elements/0/text/text]"
    );

    // A form body with blocks as a JSON string, and a GET with a query.
    let form = format!(
        "token={BOT_TOKEN}&channel={GROUP_CHANNEL}&text=hi&blocks={}",
        form_urlencoded::byte_serialize(prompt_blocks().to_string().as_bytes()).collect::<String>()
    );
    let headers = [("Content-Type", "application/x-www-form-urlencoded")];
    let (_, _, body) = raw(
        &fake,
        "POST",
        "/api/chat.postMessage",
        &headers,
        form.as_bytes(),
    )
    .await;
    let posted: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(
        posted["message"]["blocks"][1]["type"], "actions",
        "{posted}"
    );
    let auth = format!("Bearer {BOT_TOKEN}");
    let path = format!("/api/users.info?user={}", fake.person(2));
    let (_, _, body) = raw(&fake, "GET", &path, &[("Authorization", &auth)], b"").await;
    let user: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(user["user"]["profile"]["display_name"], "person2");

    // The per-channel pace: two a second, then 429.
    assert_eq!(
        bot(&fake, "chat.postMessage", post("two")).await["ok"],
        true
    );
    let (status, headers, _) = {
        let body = post("three").to_string();
        let h = [
            ("Authorization", auth.as_str()),
            ("Content-Type", "application/json"),
        ];
        raw(&fake, "POST", "/api/chat.postMessage", &h, body.as_bytes()).await
    };
    assert_eq!((status, headers["retry-after"].as_str()), (429, "1"));
    tokio::time::sleep(Duration::from_millis(1000)).await;
    assert_eq!(
        bot(&fake, "chat.postMessage", post("later")).await["ok"],
        true
    );
    assert_eq!(
        fake.shown(GROUP_CHANNEL),
        ["Run rm -rf /tmp/x?", "two", "later"]
    );

    // Edits, reactions, ephemeral messages, statuses.
    let ts = posted["ts"].as_str().unwrap();
    let asked = fake.message(GROUP_CHANNEL, &fake.person(1), "hey", true);
    let update = |ts: &str, extra: Value| {
        let mut body = json!({"channel": GROUP_CHANNEL, "ts": ts});
        body.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        body
    };
    assert_eq!(
        err(bot(&fake, "chat.update", update(&asked, json!({"text": "x"}))).await),
        "cant_update_message"
    );
    assert_eq!(
        err(bot(
            &fake,
            "chat.update",
            update("1.000001", json!({"text": "x"}))
        )
        .await),
        "message_not_found"
    );
    let done = bot(
        &fake,
        "chat.update",
        update(ts, json!({"text": "Done", "blocks": []})),
    )
    .await;
    assert_eq!(
        (done["ok"].clone(), done["text"].clone()),
        (json!(true), json!("Done"))
    );
    assert!(fake.prompts(GROUP_CHANNEL).is_empty());
    assert_eq!(fake.raw_messages(GROUP_CHANNEL)[0].history, ["hi"]);
    let react = json!({"channel": GROUP_CHANNEL, "timestamp": asked, "name": "eyes"});
    assert_eq!(bot(&fake, "reactions.add", react.clone()).await["ok"], true);
    assert_eq!(
        err(bot(&fake, "reactions.add", react.clone()).await),
        "already_reacted"
    );
    assert_eq!(
        bot(&fake, "reactions.remove", react.clone()).await["ok"],
        true
    );
    assert_eq!(
        err(bot(&fake, "reactions.remove", react).await),
        "no_reaction"
    );
    let working: Vec<WorkingEvent> = fake
        .working(GROUP_CHANNEL)
        .into_iter()
        .map(|(_, e)| e)
        .collect();
    assert_eq!(working, [WorkingEvent::Shown, WorkingEvent::Ended]);
    let status =
        json!({"channel_id": GROUP_CHANNEL, "thread_ts": asked, "status": "is thinking..."});
    let answer = bot(&fake, "assistant.threads.setStatus", status).await;
    assert_eq!(
        (answer["error"].clone(), answer["needed"].clone()),
        (json!("missing_scope"), json!("assistant:write"))
    );
    let notice = json!({"channel": GROUP_CHANNEL, "user": fake.person(3), "text": "Not yours"});
    assert!(bot(&fake, "chat.postEphemeral", notice).await["message_ts"].is_string());
    let notice =
        json!({"channel": fake.dm_chat(&fake.person(1)), "user": fake.person(3), "text": "x"});
    assert_eq!(
        err(bot(&fake, "chat.postEphemeral", notice).await),
        "user_not_in_channel"
    );
    assert_eq!(fake.ephemerals(GROUP_CHANNEL)[0].text, "Not yours");

    // Scripted faults.
    fake.fail_next("auth.test", "account_inactive");
    assert_eq!(
        err(bot(&fake, "auth.test", json!({})).await),
        "account_inactive"
    );
    fake.missing_scope("chat.postMessage", "chat:write");
    let answer = bot(&fake, "chat.postMessage", post("x")).await;
    assert_eq!(
        (answer["error"].clone(), answer["needed"].clone()),
        (json!("missing_scope"), json!("chat:write"))
    );
    fake.fail_http_next("auth.test", 503);
    let (status, _) = api(&fake, Some(BOT_TOKEN), "auth.test", json!({})).await;
    assert_eq!(status, 503);
    assert!(fake.calls("auth.test").last().unwrap().refused);
    assert_eq!(
        bot(&fake, "auth.test", json!({})).await["user_id"],
        BOT_USER_ID
    );

    // Uploads and response_urls that do not exist; a response_url's five uses.
    let (status, _, _) = raw(&fake, "POST", "/upload/F0NOPE", &[], b"x").await;
    assert_eq!(status, 404);
    let command = fake.slash(GROUP_CHANNEL, &fake.person(1), "/hermes", "new");
    let url = fake.envelopes().last().unwrap().payload["response_url"]
        .as_str()
        .unwrap()
        .to_owned();
    let path = url
        .split_once("/response/")
        .map(|(_, n)| format!("/response/{n}"))
        .unwrap();
    let json_type = [("Content-Type", "application/json")];
    let said = json!({"text": "Started over", "response_type": "in_channel"}).to_string();
    for _ in 0..5 {
        let (status, _, body) = raw(&fake, "POST", &path, &json_type, said.as_bytes()).await;
        assert_eq!((status, body.as_slice()), (200, &b"ok"[..]));
    }
    let (status, _, body) = raw(&fake, "POST", &path, &json_type, said.as_bytes()).await;
    assert_eq!((status, body.as_slice()), (404, &b"used_url"[..]));
    assert_eq!(fake.command_responses(&command).len(), 5);
    assert_eq!(fake.shown(GROUP_CHANNEL).last().unwrap(), "Started over");
    let (status, _, _) = raw(
        &fake,
        "POST",
        "/response/999999",
        &json_type,
        said.as_bytes(),
    )
    .await;
    assert_eq!(status, 404);
}
