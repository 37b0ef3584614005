//! The web chat's listener: the page and its assets, the login, the event stream down and
//! the person's messages, presses and uploads up. Every answer carries the security
//! headers; every request is checked for its `Host`, a change for its `Origin`, and all
//! but the page and the login for the session (cookie and API header). A message, press or
//! upload is answered once the sink has recorded it (invariant 1), so a page that gets no
//! answer sends it again with the same id and it counts once.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use futures_util::StreamExt;
use hermes_adapter::{
    Accepted, Attachment, Author, CancellationToken, ChatKind, ChatRef, Inbound, InboundKind,
    InboundMessage, InboundSink, MediaKind, ModelChoice, Platform, Press,
};
use serde::Deserialize;
use serde_json::json;

use crate::auth::{Access, Need, SECURITY_HEADERS};
use crate::files::{Files, shows_inline};
use crate::hub::{Event, Hub};
use crate::page;
use crate::send::WebSender;
use crate::settings::OPERATOR;

/// The largest upload taken: the media path's own cap applies after.
const MAX_UPLOAD: usize = 25 * 1024 * 1024;
/// The longest message a page may send, in bytes.
const MAX_TEXT: usize = 64 * 1024;
/// How often an idle stream carries a comment, so a dead connection is noticed.
const KEEP_ALIVE: Duration = Duration::from_secs(10);

pub(crate) struct Server {
    pub access: Access,
    pub hub: Arc<Hub>,
    pub files: Arc<Files>,
    pub sender: Arc<WebSender>,
    pub sink: Arc<dyn InboundSink>,
    pub shutdown: CancellationToken,
}

type Shared = State<Arc<Server>>;

/// The routes of the web chat.
pub(crate) fn router(server: Arc<Server>) -> Router {
    Router::new()
        .route("/", get(page::index))
        .route("/app.js", get(page::script))
        .route("/app.css", get(page::style))
        .route("/api/login", post(login))
        .route("/api/events", get(events))
        .route("/api/commands", get(commands))
        .route("/api/send", post(send))
        .route("/api/press", post(press))
        .route("/api/upload", post(upload))
        .route("/api/files/{id}", get(file))
        .route("/api/setup", get(setup).post(choose_model))
        .layer(DefaultBodyLimit::max(MAX_UPLOAD))
        .layer(axum::middleware::from_fn_with_state(server.clone(), guard))
        .with_state(server)
}

/// What each path needs; unknown paths need the session (so they leak nothing).
fn need_of(path: &str) -> Need {
    match path {
        "/" | "/app.js" | "/app.css" | "/api/login" => Need::Nothing,
        p if p.starts_with("/api/files/") => Need::Cookie,
        _ => Need::Api,
    }
}

/// Checks every request before its handler, and puts the security headers on every answer.
async fn guard(
    State(server): Shared,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let changes = !matches!(*request.method(), Method::GET | Method::HEAD);
    let need = need_of(request.uri().path());
    let mut response = match server.access.check(request.headers(), changes, need) {
        Ok(()) => next.run(request).await,
        Err(refusal) => {
            let status = StatusCode::from_u16(refusal.status()).unwrap_or(StatusCode::FORBIDDEN);
            (status, format!("{refusal:?}")).into_response()
        }
    };
    let headers = response.headers_mut();
    // A handler's own (a sent file's stricter policy) stays.
    for (name, value) in SECURITY_HEADERS {
        headers
            .entry(name)
            .or_insert(HeaderValue::from_static(value));
    }
    headers
        .entry(header::CACHE_CONTROL)
        .or_insert(HeaderValue::from_static("no-store"));
    response
}

fn problem(status: StatusCode, text: &str) -> Response {
    (status, axum::Json(json!({"error": text}))).into_response()
}

#[derive(Deserialize)]
struct Login {
    token: String,
}

async fn login(State(server): Shared, axum::Json(login): axum::Json<Login>) -> Response {
    if !server.access.is_login(&login.token) {
        say_refused_login();
        return problem(
            StatusCode::UNAUTHORIZED,
            "that is not this chat's login token",
        );
    }
    let mut response = axum::Json(json!({"session": server.access.api_session()})).into_response();
    if let Ok(cookie) = HeaderValue::from_str(&server.access.login_cookie()) {
        response.headers_mut().insert(header::SET_COOKIE, cookie);
    }
    response
}

/// A wrong login is said at most once a minute (anyone on this machine can try, and the
/// log must not be theirs to flood).
fn say_refused_login() {
    use std::sync::atomic::{AtomicU64, Ordering};
    static LAST_SAID: AtomicU64 = AtomicU64::new(0);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let last = LAST_SAID.load(Ordering::Relaxed);
    if now.saturating_sub(last) >= 60
        && LAST_SAID
            .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
    {
        tracing::warn!("web: a login with a wrong token was refused (said at most once a minute)");
    }
}

fn sse_event(event: &Event) -> SseEvent {
    SseEvent::default()
        .id(event.id.clone())
        .data(event.data.clone())
}

/// The event stream: what the page missed since the id it names, then everything new, until
/// it goes or the daemon stops. A page opening is someone to deliver to: what waited goes.
async fn events(State(server): Shared, headers: HeaderMap) -> Response {
    let last = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let subscription = server.hub.subscribe(last.as_deref());
    let sink = server.sink.clone();
    tokio::spawn(async move { sink.platform_reachable(Platform::Web).await });
    let gap = subscription
        .gap
        .then(|| Ok::<_, Infallible>(SseEvent::default().data(json!({"kind": "gap"}).to_string())));
    let replay: Vec<_> = subscription
        .replay
        .iter()
        .map(|e| Ok(sse_event(e)))
        .collect();
    let live = futures_util::stream::unfold(
        (subscription.live, subscription.guard),
        |(mut live, guard)| async move {
            match live.recv().await {
                Ok(event) => Some((Ok(sse_event(&event)), (live, guard))),
                // Too slow to keep up, or the hub is gone: the page reconnects and is given
                // what it missed from the ring.
                Err(_) => None,
            }
        },
    );
    let stream = futures_util::stream::iter(gap.into_iter().chain(replay))
        .chain(live)
        .take_until(server.shutdown.clone().cancelled_owned());
    Sse::new(stream)
        .keep_alive(KeepAlive::new().interval(KEEP_ALIVE))
        .into_response()
}

async fn commands(State(server): Shared) -> Response {
    axum::Json(server.sender.commands()).into_response()
}

/// A conversation id the page made: `c-` and up to 48 letters, digits, `-` or `_`.
fn is_chat_id(id: &str) -> bool {
    id.len() > 2
        && id.len() <= 50
        && id.starts_with("c-")
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// An id the page gave a message or upload (the same on every retry).
fn is_client_id(id: &str) -> bool {
    (8..=64).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

fn chat_ref(chat_id: &str) -> ChatRef {
    ChatRef {
        platform: Platform::Web,
        account: None,
        chat_id: chat_id.to_owned(),
        thread_id: None,
        kind: ChatKind::Direct,
    }
}

fn operator() -> Author {
    Author {
        user_id: OPERATOR.to_owned(),
        display_name: OPERATOR.to_owned(),
        username: None,
        is_bot: false,
    }
}

/// The operator's message `id` in `chat` (its event id is the page's id for it, so a message
/// sent again counts once).
fn message(
    chat: &str,
    id: String,
    text: String,
    reply_to: Option<String>,
    attachments: Vec<Attachment>,
) -> Inbound {
    Inbound {
        event_id: format!("web:{id}"),
        chat: chat_ref(chat),
        author: operator(),
        kind: InboundKind::Message(InboundMessage {
            message_id: id,
            text,
            addressed: true,
            reply_to,
            attachments,
            ..Default::default()
        }),
    }
}

/// Record `event`: 200 once it is on disk (new or a retry), 503 when it is not.
async fn record(server: &Server, mut event: Inbound) -> Response {
    // With other nodes on the store, the chat names this node: its page is served here,
    // so its turns run and its messages are sent here.
    event.chat.account = server.sink.node_id();
    match server.sink.accept(event).await {
        Ok(Accepted::New | Accepted::Duplicate) => axum::Json(json!({"ok": true})).into_response(),
        Err(e) => {
            tracing::error!(error = %e, "web: a message could not be recorded; the page will send it again");
            problem(
                StatusCode::SERVICE_UNAVAILABLE,
                "the gateway could not record it; try again",
            )
        }
    }
}

#[derive(Deserialize)]
struct Sent {
    chat: String,
    id: String,
    text: String,
    #[serde(default)]
    reply_to: Option<String>,
}

async fn send(State(server): Shared, axum::Json(sent): axum::Json<Sent>) -> Response {
    if !is_chat_id(&sent.chat) || !is_client_id(&sent.id) {
        return problem(
            StatusCode::BAD_REQUEST,
            "not a conversation or message id of this chat",
        );
    }
    if sent.text.len() > MAX_TEXT {
        return problem(
            StatusCode::PAYLOAD_TOO_LARGE,
            "the message is longer than 64 KiB",
        );
    }
    let reply_to = sent.reply_to.filter(|r| r.len() <= 64);
    let event = message(&sent.chat, sent.id, sent.text, reply_to, Vec::new());
    record(&server, event).await
}

#[derive(Deserialize)]
struct Pressed {
    chat: String,
    id: String,
    message_id: String,
    choice: String,
}

async fn press(State(server): Shared, axum::Json(pressed): axum::Json<Pressed>) -> Response {
    if !is_chat_id(&pressed.chat)
        || !is_client_id(&pressed.id)
        || pressed.message_id.len() > 64
        || pressed.choice.len() > 64
    {
        return problem(StatusCode::BAD_REQUEST, "not a choice of this chat");
    }
    let event = Inbound {
        event_id: format!("web:{}", pressed.id),
        chat: chat_ref(&pressed.chat),
        author: operator(),
        kind: InboundKind::Press(Press {
            press_id: pressed.id,
            message_id: Some(pressed.message_id),
            choice_id: pressed.choice,
        }),
    };
    record(&server, event).await
}

#[derive(Deserialize)]
struct Upload {
    chat: String,
    id: String,
    name: String,
    #[serde(default)]
    caption: String,
}

async fn upload(
    State(server): Shared,
    Query(upload): Query<Upload>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if !is_chat_id(&upload.chat) || !is_client_id(&upload.id) || upload.caption.len() > MAX_TEXT {
        return problem(
            StatusCode::BAD_REQUEST,
            "not a conversation or upload id of this chat",
        );
    }
    if body.is_empty() {
        return problem(StatusCode::BAD_REQUEST, "the file is empty");
    }
    let handle = match server.files.keep_upload(&body).await {
        Ok(handle) => handle,
        Err(e) => {
            tracing::error!(error = %e, "web: an upload could not be kept");
            return problem(
                StatusCode::INSUFFICIENT_STORAGE,
                "the gateway could not keep the file",
            );
        }
    };
    let mime = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .filter(|m| !m.is_empty() && m.len() < 128)
        .map(str::to_owned);
    let name: String = upload
        .name
        .chars()
        .filter(|c| !c.is_control())
        .take(200)
        .collect();
    let attachment = Attachment {
        kind: MediaKind::from_mime(mime.as_deref()),
        mime,
        name: Some(name),
        size: Some(body.len() as u64),
        handle,
    };
    let event = message(
        &upload.chat,
        upload.id,
        upload.caption,
        None,
        vec![attachment],
    );
    record(&server, event).await
}

/// The model in use, or the choices for one (local servers found, providers).
async fn setup(State(server): Shared) -> Response {
    match server.sink.console() {
        Some(console) => axum::Json(console.model_setup().await).into_response(),
        None => problem(StatusCode::NOT_FOUND, "this gateway has no setup here"),
    }
}

/// A model chosen in the form: tried, written and applied by the gateway, or why not.
async fn choose_model(
    State(server): Shared,
    axum::Json(choice): axum::Json<ModelChoice>,
) -> Response {
    let Some(console) = server.sink.console() else {
        return problem(StatusCode::NOT_FOUND, "this gateway has no setup here");
    };
    match console.choose_model(choice).await {
        Ok(done) => axum::Json(json!({"ok": true, "said": done})).into_response(),
        Err(why) => problem(StatusCode::UNPROCESSABLE_ENTITY, &why),
    }
}

/// A file the agent sent: shown inline when it is a plain image type, else downloaded;
/// never run as a page of this origin (`sandbox`).
async fn file(State(server): Shared, Path(id): Path<String>) -> Response {
    let Some((bytes, mime)) = server.files.read_outgoing(&id).await else {
        return problem(StatusCode::NOT_FOUND, "no such file");
    };
    let inline = shows_inline(&mime);
    let content_type = if inline {
        mime.as_str()
    } else {
        "application/octet-stream"
    };
    let mut response = bytes.into_response();
    let headers = response.headers_mut();
    if let Ok(value) = HeaderValue::from_str(content_type) {
        headers.insert(header::CONTENT_TYPE, value);
    }
    headers.insert(
        header::CONTENT_DISPOSITION,
        HeaderValue::from_static(if inline { "inline" } else { "attachment" }),
    );
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static("default-src 'none'; sandbox"),
    );
    // Another port of this host is the same site, so the cookie would go with an embedding
    // of the file there: only this origin may use it.
    headers.insert(
        "cross-origin-resource-policy",
        HeaderValue::from_static("same-origin"),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_from_the_page_name_nothing_else() {
        assert!(is_chat_id("c-abc_12-x"));
        for bad in [
            "c-",
            "abc",
            "c-../x",
            "c-a b",
            "c-\u{e9}",
            &format!("c-{}", "a".repeat(49)),
        ] {
            assert!(!is_chat_id(bad), "{bad}");
        }
        assert!(is_client_id("m-12345678"));
        assert!(!is_client_id("short"));
        assert!(!is_client_id("../../etc/passwd"));
    }
}
