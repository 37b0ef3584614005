//! The fake against the real slack-morphism 2.31 client: every Web API answer the adapter
//! reads parsed by the client's own request methods (errors and rate limits included), a
//! real Socket Mode listener connecting, acknowledging and reconnecting, and Events API
//! POSTs checked with slack-morphism's signature verifier and parsed with its models.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri};
use hyper_util::client::legacy::connect::HttpConnector;
use serde_json::json;
use slack_morphism::errors::SlackClientError;
use slack_morphism::prelude::*;
use slack_morphism::signature_verifier::SlackEventSignatureVerifier;
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};

use super::tests::{WAIT, prompt_blocks};
use super::*;
use crate::conformance::PlatformFake;
use crate::eventually;

type Connector = SlackClientHyperConnector<HttpConnector>;

fn client(fake: &FakeSlack) -> Arc<SlackClient<Connector>> {
    let connector = SlackClientHyperConnector::with_connector(HttpConnector::new())
        .with_slack_api_url(&fake.api_base_url());
    Arc::new(SlackClient::new(connector))
}

fn token(value: &str) -> SlackApiToken {
    SlackApiToken::new(value.to_owned().into())
}

fn api_error(result: Result<impl std::fmt::Debug, SlackClientError>) -> String {
    match result {
        Err(SlackClientError::ApiError(e)) => e.code,
        other => panic!("not an API error: {other:?}"),
    }
}

#[tokio::test]
async fn every_web_api_answer_parses_with_slack_morphism() {
    let fake = FakeSlack::start_with(Options {
        assistant: true,
        ..Options::default()
    })
    .await;
    let client = client(&fake);
    let bot_token = token(BOT_TOKEN);
    let session = client.open_session(&bot_token);

    let me = session.auth_test().await.unwrap();
    assert_eq!(
        (me.user_id.to_string(), me.team_id.to_string()),
        (BOT_USER_ID.into(), TEAM_ID.into())
    );
    assert_eq!(me.bot_id.map(|b| b.to_string()), Some(BOT_ID.into()));

    let app_token = token(APP_TOKEN);
    let open = client.open_session(&app_token);
    let url = open
        .apps_connections_open(&SlackApiAppsConnectionOpenRequest::new())
        .await
        .unwrap();
    assert!(
        url.url
            .0
            .to_string()
            .starts_with(&format!("ws://{}/link/?ticket=", fake.ws_addr))
    );
    assert_eq!(fake.connection_opens(), 1);

    // A prompt with buttons in a thread, updated without them.
    let alice = fake.person(1);
    let asked = fake.message(GROUP_CHANNEL, &alice, "clean up", true);
    let blocks: Vec<SlackBlock> = serde_json::from_value(prompt_blocks()).unwrap();
    let content = SlackMessageContent::new()
        .with_text("Run it?".into())
        .with_blocks(blocks);
    let request = SlackApiChatPostMessageRequest::new(GROUP_CHANNEL.into(), content)
        .with_thread_ts(asked.clone().into());
    let posted = session.chat_post_message(&request).await.unwrap();
    assert_eq!(
        posted.message.sender.bot_id.map(|b| b.to_string()),
        Some(BOT_ID.into())
    );
    let sent = fake.raw_messages(GROUP_CHANNEL);
    assert_eq!(sent[0].thread_ts.as_deref(), Some(asked.as_str()));
    assert_eq!(sent[0].ts, posted.ts.to_string());
    assert_eq!(
        fake.prompts(GROUP_CHANNEL)[0].choices[1],
        ("Deny".into(), "deny".into())
    );
    let content = SlackMessageContent::new()
        .with_text("Allowed once".into())
        .with_blocks(vec![]);
    let update = SlackApiChatUpdateRequest::new(GROUP_CHANNEL.into(), content, posted.ts.clone());
    let updated = session.chat_update(&update).await.unwrap();
    assert_eq!(
        updated.message.content.text.as_deref(),
        Some("Allowed once")
    );
    assert!(fake.prompts(GROUP_CHANNEL).is_empty());
    assert_eq!(fake.shown(GROUP_CHANNEL), ["Allowed once"]);

    // A message too long, an unknown channel.
    let long = SlackMessageContent::new().with_text("x".repeat(40_001));
    let request = SlackApiChatPostMessageRequest::new(GROUP_CHANNEL.into(), long);
    assert_eq!(
        api_error(session.chat_post_message(&request).await),
        "msg_too_long"
    );
    let request = SlackApiChatPostMessageRequest::new(
        "C0NOPE".into(),
        SlackMessageContent::new().with_text("x".into()),
    );
    assert_eq!(
        api_error(session.chat_post_message(&request).await),
        "channel_not_found"
    );

    // An ephemeral notice, a reaction, an assistant status.
    let notice = SlackApiChatPostEphemeralRequest::new(
        GROUP_CHANNEL.into(),
        fake.person(3).into(),
        SlackMessageContent::new().with_text("Not yours to decide".into()),
    );
    session.chat_post_ephemeral(&notice).await.unwrap();
    assert_eq!(fake.ephemerals(GROUP_CHANNEL)[0].user, fake.person(3));
    let eyes =
        SlackApiReactionsAddRequest::new(GROUP_CHANNEL.into(), "eyes".into(), asked.clone().into());
    session.reactions_add(&eyes).await.unwrap();
    assert_eq!(
        api_error(session.reactions_add(&eyes).await),
        "already_reacted"
    );
    assert_eq!(
        fake.reactions(GROUP_CHANNEL),
        [(asked.clone(), "eyes".to_owned())]
    );
    let remove = SlackApiReactionsRemoveRequest::new("eyes".into())
        .with_channel(GROUP_CHANNEL.into())
        .with_timestamp(asked.clone().into());
    session.reactions_remove(&remove).await.unwrap();
    let status = SlackApiAssistantThreadsSetStatusRequest::new(
        GROUP_CHANNEL.into(),
        "is thinking...".into(),
        asked.clone().into(),
    );
    session.assistant_threads_set_status(&status).await.unwrap();
    let cleared = SlackApiAssistantThreadsSetStatusRequest::new(
        GROUP_CHANNEL.into(),
        "".into(),
        asked.clone().into(),
    );
    session
        .assistant_threads_set_status(&cleared)
        .await
        .unwrap();
    let working: Vec<WorkingEvent> = fake
        .working(GROUP_CHANNEL)
        .into_iter()
        .map(|(_, e)| e)
        .collect();
    use WorkingEvent::{Ended, Shown};
    assert_eq!(working, [Shown, Ended, Shown, Ended]);

    // A file out: upload URL, the bytes, completion in the thread.
    let bytes = b"report body".to_vec();
    let announce = SlackApiFilesGetUploadUrlExternalRequest::new("report.txt".into(), bytes.len());
    let target = session.get_upload_url_external(&announce).await.unwrap();
    let upload = SlackApiFilesUploadViaUrlRequest::new(
        target.upload_url.clone(),
        bytes.clone(),
        "text/plain".into(),
    );
    session.files_upload_via_url(&upload).await.unwrap();
    let complete = SlackApiFilesCompleteUploadExternalRequest::new(vec![
        SlackApiFilesComplete::new(target.file_id.clone()).with_title("Report".into()),
    ])
    .with_channel_id(GROUP_CHANNEL.into())
    .with_thread_ts(asked.clone().into())
    .with_initial_comment("Here it is".into());
    let completed = session
        .files_complete_upload_external(&complete)
        .await
        .unwrap();
    assert_eq!(completed.files[0].id, target.file_id);
    assert_eq!(
        fake.sent_files(GROUP_CHANNEL),
        [("report.txt".to_owned(), bytes)]
    );
    let share = &fake.file_shares()[0];
    assert_eq!(
        (share.title.as_deref(), share.thread_ts.as_deref()),
        (Some("Report"), Some(asked.as_str()))
    );
    assert_eq!(fake.shown(GROUP_CHANNEL).last().unwrap(), "Here it is");

    // People and channels.
    let user = session
        .users_info(&SlackApiUsersInfoRequest::new(alice.clone().into()))
        .await
        .unwrap();
    assert_eq!(user.user.id.to_string(), alice);
    assert_eq!(user.user.flags.is_bot, Some(false));
    let profile = user.user.profile.unwrap();
    assert_eq!(profile.display_name.as_deref(), Some("person1"));
    let request = SlackApiUsersInfoRequest::new("U0NOBODY".into());
    assert_eq!(
        api_error(session.users_info(&request).await),
        "user_not_found"
    );
    let dm = fake.dm_chat(&alice);
    let info = session
        .conversations_info(&SlackApiConversationsInfoRequest::new(dm.clone().into()))
        .await
        .unwrap();
    assert_eq!(info.channel.id.to_string(), dm);

    // Faults: a 429 with Retry-After, errors, a missing scope, an HTTP failure, bad tokens.
    fake.rate_limit_next("chat.postMessage", 1, 7);
    let hi = SlackApiChatPostMessageRequest::new(
        GROUP_CHANNEL.into(),
        SlackMessageContent::new().with_text("hi".into()),
    );
    match session.chat_post_message(&hi).await {
        Err(SlackClientError::RateLimitError(e)) => {
            assert_eq!(e.retry_after, Some(Duration::from_secs(7)))
        }
        other => panic!("not a rate limit: {other:?}"),
    }
    fake.missing_scope("chat.postMessage", "chat:write");
    assert_eq!(
        api_error(session.chat_post_message(&hi).await),
        "missing_scope"
    );
    fake.fail_http_next("chat.postMessage", 503);
    assert!(matches!(
        session.chat_post_message(&hi).await,
        Err(SlackClientError::HttpError(_))
    ));
    assert!(session.chat_post_message(&hi).await.is_ok());
    let wrong = token("xoxb-wrong");
    assert_eq!(
        api_error(client.open_session(&wrong).auth_test().await),
        "invalid_auth"
    );
    assert_eq!(api_error(open.auth_test().await), "not_allowed_token_type");

    // A slash command answered on its response_url (as the adapter does, and as
    // slack-morphism's own `respond_to_event` does).
    let command = fake.slash(GROUP_CHANNEL, &alice, "/hermes", "status");
    let url = fake.envelopes().last().unwrap().payload["response_url"].clone();
    let url: SlackResponseUrl = serde_json::from_value(url).unwrap();
    let said =
        SlackApiPostWebhookMessageRequest::new(SlackMessageContent::new().with_text("Idle".into()));
    client.respond_to_event(&url, &said).await.unwrap();
    assert_eq!(fake.command_responses(&command)[0].body["text"], "Idle");
    assert_eq!(fake.ephemerals(GROUP_CHANNEL).last().unwrap().text, "Idle");

    // Every call was made with a bearer token and recorded.
    let calls = fake.calls("");
    let api_calls = calls.iter().filter(|c| !c.method.starts_with('('));
    assert!(api_calls.clone().all(|c| c.token.is_some()));
    let gets: Vec<&str> = api_calls
        .filter(|c| c.http == "GET")
        .map(|c| c.method.as_str())
        .collect();
    assert!(
        gets.contains(&"files.getUploadURLExternal") && gets.contains(&"users.info"),
        "{gets:?}"
    );
    let post = fake.calls("chat.postMessage").into_iter().next().unwrap();
    assert_eq!(post.content_type, "application/json; charset=utf-8");
}

/// What the listener saw, as lines.
type Seen = UnboundedSender<String>;

async fn seen(state: &SlackClientEventsUserState, line: String) {
    let state = state.read().await;
    if let Some(tx) = state.get_user_state::<Seen>() {
        let _ = tx.send(line);
    }
}

async fn on_push(
    event: SlackPushEventCallback,
    _: Arc<SlackClient<Connector>>,
    state: SlackClientEventsUserState,
) -> UserCallbackResult<()> {
    let line = match &event.event {
        SlackEventCallbackBody::Message(m) => {
            format!(
                "message {}",
                m.content
                    .as_ref()
                    .and_then(|c| c.text.clone())
                    .unwrap_or_default()
            )
        }
        SlackEventCallbackBody::AppMention(m) => {
            format!("mention {}", m.content.text.clone().unwrap_or_default())
        }
        other => format!("other {other:?}"),
    };
    seen(&state, line).await;
    Ok(())
}

async fn on_interaction(
    event: SlackInteractionEvent,
    _: Arc<SlackClient<Connector>>,
    state: SlackClientEventsUserState,
) -> UserCallbackResult<()> {
    let line = match &event {
        SlackInteractionEvent::BlockActions(b) => {
            let action = b.actions.as_ref().and_then(|a| a.first());
            format!(
                "press {}",
                action.map(|a| a.action_id.to_string()).unwrap_or_default()
            )
        }
        other => format!("other {other:?}"),
    };
    seen(&state, line).await;
    Ok(())
}

async fn on_command(
    event: SlackCommandEvent,
    _: Arc<SlackClient<Connector>>,
    state: SlackClientEventsUserState,
) -> UserCallbackResult<SlackCommandEventResponse> {
    let text = event.text.clone().unwrap_or_default();
    seen(&state, format!("command {} {text}", event.command)).await;
    let content = SlackMessageContent::new().with_text(format!("ran {text}"));
    Ok(SlackCommandEventResponse::new(content))
}

/// slack-morphism's hello event (its type cannot be named outside the crate, so this is
/// generic and reads it back through serde).
async fn on_hello<E: serde::Serialize>(
    event: E,
    _: Arc<SlackClient<Connector>>,
    state: SlackClientEventsUserState,
) {
    let hello = serde_json::to_value(&event).unwrap_or_default();
    let line = format!(
        "hello {} {}",
        hello["connection_info"]["app_id"]
            .as_str()
            .unwrap_or_default(),
        hello["debug_info"]["host"].as_str().unwrap_or_default()
    );
    seen(&state, line).await;
}

/// Whatever the listener could not handle (a frame it could not parse, among others).
static LISTENER_ERRORS: Mutex<Vec<String>> = Mutex::new(Vec::new());

fn on_error(
    error: Box<dyn std::error::Error + Send + Sync>,
    _: Arc<SlackClient<Connector>>,
    _: SlackClientEventsUserState,
) -> HttpStatusCode {
    let mut errors = LISTENER_ERRORS.lock().unwrap_or_else(|e| e.into_inner());
    errors.push(error.to_string());
    HttpStatusCode::OK
}

async fn expect(rx: &mut UnboundedReceiver<String>, wanted: &str) {
    expect_all(rx, &[wanted]).await;
}

/// Every line of `wanted`, in any order: envelopes spread over two sockets arrive in no
/// set order (as on Slack).
async fn expect_all(rx: &mut UnboundedReceiver<String>, wanted: &[&str]) {
    let mut missing: Vec<&str> = wanted.to_vec();
    while !missing.is_empty() {
        let line = tokio::time::timeout(WAIT, rx.recv())
            .await
            .unwrap_or_else(|_| panic!("in time: {missing:?}"))
            .expect("open");
        missing.retain(|w| *w != line);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_socket_mode_listener_connects_acknowledges_and_reconnects() {
    let fake = FakeSlack::start().await;
    let (tx, mut rx) = unbounded_channel::<String>();
    let environment = SlackClientEventsListenerEnvironment::new(client(&fake))
        .with_error_handler(on_error)
        .with_user_state(tx);
    let callbacks = SlackSocketModeListenerCallbacks::new()
        .with_hello_events(on_hello)
        .with_push_events(on_push)
        .with_interaction_events(on_interaction)
        .with_command_events(on_command);
    let config = SlackClientSocketModeConfig::new().with_initial_backoff_in_seconds(1);
    let listener = SlackClientSocketModeListener::new(&config, Arc::new(environment), callbacks);
    listener.listen_for(&token(APP_TOKEN)).await.unwrap();
    listener.start().await;
    assert!(fake.wait_connected(WAIT).await);
    expect(&mut rx, &format!("hello {APP_ID} fake")).await;
    eventually(WAIT, "the second connection", || {
        (fake.connections() == 2).then_some(())
    })
    .await;
    assert_eq!(fake.connection_opens(), 2);

    let alice = fake.person(1);
    let dm = fake.dm_chat(&alice);
    fake.message(&dm, &alice, "hi", true);
    expect(&mut rx, "message hi").await;
    let first = fake.envelopes()[0].clone();
    eventually(WAIT, "the ack", || fake.acked(&first.id)).await;

    fake.message(GROUP_CHANNEL, &alice, "there?", true);
    expect_all(
        &mut rx,
        &[
            &format!("message <@{BOT_USER_ID}> there?"),
            &format!("mention <@{BOT_USER_ID}> there?"),
        ],
    )
    .await;

    let posted = tests::bot(
        &fake,
        "chat.postMessage",
        json!({"channel": dm, "text": "?", "blocks": prompt_blocks()}),
    )
    .await;
    expect(&mut rx, "message ?").await;
    let prompt = fake.prompts(&dm).pop().unwrap();
    assert_eq!(prompt.message_id, posted["ts"].as_str().unwrap());
    let pressed = Instant::now();
    let press = fake.press(&dm, &alice, &prompt, "Deny");
    expect(&mut rx, "press deny").await;
    let acked = eventually(WAIT, "the press acked", || fake.acknowledged(&press)).await;
    assert!(acked.duration_since(pressed) < Duration::from_secs(3));

    let command = fake.slash(&dm, &alice, "/hermes", "status");
    expect(&mut rx, "command /hermes status").await;
    eventually(WAIT, "the command's ack payload", || {
        fake.command_responses(&command).pop()
    })
    .await;
    assert_eq!(fake.ephemerals(&dm).last().unwrap().text, "ran status");

    // A refresh: both sockets get `disconnect`, the listener opens new ones.
    fake.disconnect_all();
    eventually(WAIT, "two new connections", || {
        (fake.connects() >= 4 && fake.connections() == 2).then_some(())
    })
    .await;
    assert!(fake.connection_opens() >= 4);
    fake.message(&dm, &alice, "after the refresh", false);
    expect(&mut rx, "message after the refresh").await;

    // A warning: `disconnect`, the sockets closed two seconds later; the listener replaces
    // them at once (before the close: it parsed the frame).
    let before = fake.connects();
    fake.send_disconnect("warning", Duration::from_secs(2));
    eventually(
        Duration::from_millis(1500),
        "new sockets before the close",
        || (fake.connects() >= before + 2).then_some(()),
    )
    .await;
    eventually(WAIT, "the old sockets closed", || {
        (fake.connections() == 2).then_some(())
    })
    .await;

    // A network drop: the listener notices and connects again.
    let before = fake.connects();
    fake.drop_all();
    eventually(WAIT, "a reconnection after the drop", || {
        (fake.connects() > before && fake.connections() >= 1).then_some(())
    })
    .await;
    fake.message(&dm, &alice, "after the drop", false);
    expect(&mut rx, "message after the drop").await;
    eventually(WAIT, "every envelope acknowledged", || {
        fake.envelopes()
            .iter()
            .all(|e| e.acked.is_some())
            .then_some(())
    })
    .await;
    assert!(
        fake.envelopes().iter().all(|e| e.sends.len() == 1),
        "none delivered twice"
    );
    assert_eq!(fake.refused_connects(), 0);
    listener.shutdown().await;
    let errors = LISTENER_ERRORS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    let unparsed: Vec<&String> = errors
        .iter()
        .filter(|e| e.contains("JSON protocol error"))
        .collect();
    assert!(
        unparsed.is_empty(),
        "frames the listener could not parse: {unparsed:?}"
    );
}

/// An answer the stand-in daemon gives: (status, delay, body, `X-Slack-No-Retry`).
type Scripted = (u16, Duration, String, bool);

/// A stand-in for the daemon's HTTP server: every request kept, answered as scripted.
#[derive(Clone, Default)]
struct Daemon {
    seen: Arc<Mutex<Vec<(String, HeaderMap, Bytes)>>>,
    /// Answers for the next requests: (status, delay, body, no-retry).
    script: Arc<Mutex<Vec<Scripted>>>,
}

async fn daemon_route(
    State(d): State<Daemon>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> axum::response::Response {
    d.seen
        .lock()
        .unwrap()
        .push((uri.path().to_owned(), headers, body.clone()));
    let next = {
        let mut script = d.script.lock().unwrap();
        (!script.is_empty()).then(|| script.remove(0))
    };
    let (status, delay, text, no_retry) =
        next.unwrap_or((200, Duration::ZERO, String::new(), false));
    tokio::time::sleep(delay).await;
    let mut builder = axum::http::Response::builder().status(StatusCode::from_u16(status).unwrap());
    if no_retry {
        builder = builder.header("x-slack-no-retry", "1");
    }
    if text.starts_with('{') {
        builder = builder.header("content-type", "application/json");
    }
    builder.body(axum::body::Body::from(text)).unwrap()
}

async fn daemon() -> (Daemon, String) {
    let d = Daemon::default();
    let app = axum::Router::new()
        .fallback(daemon_route)
        .with_state(d.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (d, addr)
}

fn header<'h>(headers: &'h HeaderMap, name: &str) -> &'h str {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
}

fn verify(headers: &HeaderMap, body: &Bytes) -> Result<(), String> {
    let verifier =
        SlackEventSignatureVerifier::new(&SlackSigningSecret::new(SIGNING_SECRET.into()));
    let body = std::str::from_utf8(body).unwrap();
    verifier
        .verify(
            header(headers, "x-slack-signature"),
            body,
            header(headers, "x-slack-request-timestamp"),
        )
        .map_err(|e| e.to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_api_posts_are_signed_ordered_retried_and_parse() {
    let fake = FakeSlack::start_with(Options {
        mode: Mode::Events,
        redeliver_after: Duration::from_millis(500),
        retry_delay: Duration::from_millis(100),
        ..Options::default()
    })
    .await;
    assert!(fake.needs_daemon_http());
    assert!(fake.platform_yaml().contains("mode: events"));
    assert!(!fake.env().iter().any(|l| l.starts_with("SLACK_APP_TOKEN")));
    let alice = fake.person(1);
    let dm = fake.dm_chat(&alice);
    // Written before the daemon is known: held, then POSTed in order.
    for n in 0..4 {
        fake.message(&dm, &alice, &format!("m{n}"), false);
    }
    let (d, addr) = daemon().await;
    fake.attach_daemon(&addr);
    eventually(WAIT, "four posts", || {
        (d.seen.lock().unwrap().len() == 4).then_some(())
    })
    .await;
    for (n, (path, headers, body)) in d.seen.lock().unwrap().iter().enumerate() {
        assert_eq!(path, "/slack/events");
        assert_eq!(header(headers, "content-type"), "application/json");
        verify(headers, body).unwrap();
        let SlackPushEvent::EventCallback(callback) = serde_json::from_slice(body).unwrap() else {
            panic!("not an event_callback")
        };
        let SlackEventCallbackBody::Message(m) = callback.event else {
            panic!()
        };
        assert_eq!(m.content.unwrap().text.unwrap(), format!("m{n}"));
    }

    // A refused POST is retried with X-Slack-Retry-Num, a slow one at once, X-Slack-No-Retry
    // is honoured.
    d.script.lock().unwrap().extend([
        (500, Duration::ZERO, String::new(), false),
        (200, Duration::from_millis(1200), String::new(), false),
        (200, Duration::ZERO, String::new(), false),
    ]);
    fake.message(&dm, &alice, "retried", false);
    eventually(WAIT, "three attempts", || {
        (d.seen.lock().unwrap().len() == 7).then_some(())
    })
    .await;
    let seen = d.seen.lock().unwrap().clone();
    let retries: Vec<(&str, &str)> = seen[4..]
        .iter()
        .map(|(_, h, _)| {
            (
                header(h, "x-slack-retry-num"),
                header(h, "x-slack-retry-reason"),
            )
        })
        .collect();
    assert_eq!(
        retries,
        [("", ""), ("1", "http_error"), ("2", "http_timeout")]
    );
    let last = fake.envelopes().last().unwrap().clone();
    eventually(WAIT, "acknowledged by the slow answer", || {
        fake.acked(&last.id)
    })
    .await;
    d.script
        .lock()
        .unwrap()
        .push((503, Duration::ZERO, String::new(), true));
    fake.message(&dm, &alice, "not again", false);
    eventually(WAIT, "the refused post", || {
        (d.seen.lock().unwrap().len() == 8).then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(d.seen.lock().unwrap().len(), 8, "X-Slack-No-Retry honoured");

    // A press and a slash command: forms slack-morphism parses; the command's answer body
    // shown to the person.
    let posted = tests::bot(
        &fake,
        "chat.postMessage",
        json!({"channel": dm, "text": "?", "blocks": prompt_blocks()}),
    )
    .await;
    let ts = posted["ts"].as_str().unwrap();
    let pressed = Instant::now();
    let press = fake.press_button(&dm, &alice, ts, "once");
    let acked = eventually(WAIT, "the press answered", || fake.acknowledged(&press)).await;
    assert!(acked.duration_since(pressed) < Duration::from_secs(3));
    d.script.lock().unwrap().push((
        200,
        Duration::ZERO,
        r#"{"text":"Working on it"}"#.into(),
        false,
    ));
    let command = fake.slash(&dm, &alice, "/hermes", "stop");
    eventually(WAIT, "the command's answer", || {
        fake.command_responses(&command).pop()
    })
    .await;
    assert_eq!(fake.ephemerals(&dm).last().unwrap().text, "Working on it");
    let seen = d.seen.lock().unwrap().clone();
    let by_path = |p: &str| seen.iter().find(|(path, _, _)| path == p).cloned().unwrap();
    let (_, headers, body) = by_path("/slack/interactions");
    verify(&headers, &body).unwrap();
    let form: HashMap<String, String> = form_urlencoded::parse(&body).into_owned().collect();
    let SlackInteractionEvent::BlockActions(b) = serde_json::from_str(&form["payload"]).unwrap()
    else {
        panic!("not block_actions")
    };
    assert_eq!(b.actions.unwrap()[0].action_id.to_string(), "once");
    let (_, headers, body) = by_path("/slack/commands");
    verify(&headers, &body).unwrap();
    let form: HashMap<String, String> = form_urlencoded::parse(&body).into_owned().collect();
    let command_event: SlackCommandEvent = serde_json::from_value(json!(form)).unwrap();
    assert_eq!(
        (
            command_event.command.to_string(),
            command_event.text.as_deref()
        ),
        ("/hermes".into(), Some("stop"))
    );

    // The test's own posts: url_verification, and signatures slack-morphism refuses.
    let (status, _) = fake.url_verification("c0ffee").await;
    assert_eq!(status, 200);
    let (_, headers, body) = d.seen.lock().unwrap().last().unwrap().clone();
    verify(&headers, &body).unwrap();
    let SlackPushEvent::UrlVerification(v) = serde_json::from_slice(&body).unwrap() else {
        panic!()
    };
    assert_eq!(v.challenge, "c0ffee");
    let event = fake.envelopes()[0].payload.clone();
    for (signing, refused) in [
        (Signing::BadSignature, true),
        (Signing::Stale, true),
        (Signing::Valid, false),
    ] {
        fake.post_event(&event, signing, Some(1)).await;
        let (_, headers, body) = d.seen.lock().unwrap().last().unwrap().clone();
        assert_eq!(header(&headers, "x-slack-retry-num"), "1");
        assert_eq!(verify(&headers, &body).is_err(), refused, "{signing:?}");
    }
    fake.post_event(&event, Signing::Missing, None).await;
    let (_, headers, _) = d.seen.lock().unwrap().last().unwrap().clone();
    assert!(headers.get("x-slack-signature").is_none());
    let mine = fake
        .deliveries()
        .into_iter()
        .filter(|d| d.id.is_empty())
        .count();
    assert_eq!(mine, 5);
}
