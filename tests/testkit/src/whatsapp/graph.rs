//! The Graph API routes: the bearer token and the version on every call, `/messages` (sends
//! of every kind with Meta's limits and error codes, read receipts, the 24-hour window,
//! scripted faults, the statuses that follow a send), `/media` uploads, media lookups and
//! the download URL they hand out. Every call is recorded.

use std::time::{Duration, Instant};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{DefaultBodyLimit, Path, State};
use axum::http::{HeaderMap, Method, Uri, header};
use axum::routing::get;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::{
    Call, FakeWhatsApp, Inner, MediaSource, RE_ENGAGEMENT, Read, SentKind, SentMessage, TEXT_LIMIT,
    Upload, WINDOW, WindowError, unix_now, webhook,
};

/// How long after a send its statuses come.
const STATUS_DELAY: Duration = Duration::from_millis(50);
/// Meta's "invalid parameter" code, and the one for interactive messages.
const INVALID: u32 = 100;
const NOT_VALID: u32 = 131_009;
const WINDOW_DETAILS: &str = "Message failed to send because more than 24 hours have passed since the customer last replied to this number.";

/// What the fake answers.
struct Answer {
    status: u16,
    body: Value,
}

/// A Graph error body: `{"error":{"message","type","code","error_data"?,"fbtrace_id"}}`.
fn graph_error(status: u16, code: u32, message: &str, details: Option<&str>) -> Answer {
    let mut error = json!({"message": message, "type": "OAuthException", "code": code,
                           "fbtrace_id": "Afake"});
    if let Some(details) = details {
        error["error_data"] = json!({"messaging_product": "whatsapp", "details": details});
    }
    Answer {
        status,
        body: json!({ "error": error }),
    }
}

/// 400, code 100.
fn invalid(message: &str) -> Answer {
    graph_error(400, INVALID, &format!("(#100) {message}"), None)
}

/// 400, code 131009, with Meta's `details`.
fn not_valid(details: &str) -> Answer {
    let message = "(#131009) Parameter value is not valid";
    graph_error(400, NOT_VALID, message, Some(details))
}

fn unauthorized() -> Answer {
    let message = "Invalid OAuth access token - Cannot parse access token";
    graph_error(401, 190, message, None)
}

fn respond(status: u16, content_type: &str, body: Vec<u8>) -> axum::response::Response {
    let status = axum::http::StatusCode::from_u16(status)
        .unwrap_or(axum::http::StatusCode::INTERNAL_SERVER_ERROR);
    let mut builder = axum::http::Response::builder()
        .status(status)
        .header(header::CONTENT_TYPE, content_type);
    if status == axum::http::StatusCode::UNAUTHORIZED {
        let challenge = r#"OAuth "Facebook Platform" "invalid_token" "Invalid OAuth access token""#;
        builder = builder.header(header::WWW_AUTHENTICATE, challenge);
    }
    let built = builder.body(Body::from(body));
    built.unwrap_or_else(|_| axum::http::Response::new(Body::empty()))
}

fn json_response(answer: Answer) -> axum::response::Response {
    respond(
        answer.status,
        "application/json; charset=UTF-8",
        answer.body.to_string().into_bytes(),
    )
}

pub(super) fn router(fake: FakeWhatsApp) -> Router {
    Router::new()
        .route("/media-download/{id}", get(download))
        .fallback(graph)
        .layer(DefaultBodyLimit::max(128 * 1024 * 1024))
        .with_state(fake)
}

fn bearer_ok(headers: &HeaderMap, token: &str) -> bool {
    let auth = headers.get(header::AUTHORIZATION);
    let auth = auth.and_then(|v| v.to_str().ok()).unwrap_or_default();
    auth.strip_prefix("Bearer ")
        .is_some_and(|t| t.trim() == token)
}

impl Inner {
    fn record(&mut self, method: &Method, path: &str, auth_ok: bool, body: Value, answer: &Answer) {
        let code = answer.body["error"]["code"].as_u64();
        self.calls.push(Call {
            method: method.to_string(),
            path: path.to_owned(),
            auth_ok,
            body,
            status: answer.status,
            error_code: code.and_then(|c| u32::try_from(c).ok()),
            at: Instant::now(),
        });
    }
}

/// Every Graph call: `/{version}/{node}[/{edge}]`.
async fn graph(
    State(fake): State<FakeWhatsApp>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> axum::response::Response {
    let path = uri.path().to_owned();
    let content_type = headers.get(header::CONTENT_TYPE);
    let content_type = content_type
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let is_upload = content_type.starts_with("multipart/form-data");
    let recorded = if is_upload {
        upload_summary(content_type, &body)
    } else {
        serde_json::from_slice(&body).unwrap_or(Value::Null)
    };
    let mut inner = fake.lock();
    let auth_ok = bearer_ok(&headers, &inner.options.access_token);
    let answer = if auth_ok {
        route(&mut inner, &method, &path, content_type, &body)
    } else {
        unauthorized()
    };
    inner.record(&method, &path, auth_ok, recorded, &answer);
    json_response(answer)
}

fn route(
    inner: &mut Inner,
    method: &Method,
    path: &str,
    content_type: &str,
    body: &[u8],
) -> Answer {
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    let version = segments.first().copied().unwrap_or_default();
    if version != inner.options.api_version {
        return invalid(&format!(
            "Unknown path components: /{version} (this fake speaks {})",
            inner.options.api_version
        ));
    }
    let phone = inner.options.phone_number_id.clone();
    match (method.as_str(), &segments[1..]) {
        ("POST", [node, "messages"]) if *node == phone => {
            match serde_json::from_slice::<Value>(body) {
                Ok(request) => messages(inner, &request),
                Err(_) => invalid("The parameter messaging_product is required."),
            }
        }
        ("POST", [node, "media"]) if *node == phone => upload(inner, content_type, body),
        ("GET", [node]) if *node == phone => Answer {
            status: 200,
            body: json!({"verified_name": "Hermes Test", "code_verification_status": "VERIFIED",
                         "display_phone_number": inner.options.display_phone_number,
                         "quality_rating": "GREEN", "platform_type": "CLOUD_API",
                         "throughput": {"level": "STANDARD"}, "id": phone}),
        },
        ("GET", [id]) => media_info(inner, id),
        ("DELETE", [id]) if inner.media.remove(*id).is_some() => Answer {
            status: 200,
            body: json!({"success": true}),
        },
        (_, nodes) => {
            let node = nodes.first().copied().unwrap_or_default();
            let message = format!(
                "Unsupported {method} request. Object with ID '{node}' does not exist, cannot be loaded due to missing permissions, or does not support this operation."
            );
            let mut answer = graph_error(400, INVALID, &message, None);
            answer.body["error"]["type"] = json!("GraphMethodException");
            answer.body["error"]["error_subcode"] = json!(33);
            answer
        }
    }
}

// ---- /messages ----

/// A scripted fault for this call, if one is due.
fn fault(inner: &mut Inner, is_read: bool) -> Option<Answer> {
    let due = inner
        .faults
        .iter_mut()
        .find(|f| f.left > 0 && (f.reads_too || !is_read))?;
    due.left -= 1;
    let answer = graph_error(due.status, due.code, &due.message, Some(&due.message));
    inner.faults.retain(|f| f.left > 0);
    Some(answer)
}

fn messages(inner: &mut Inner, request: &Value) -> Answer {
    let is_read = request.get("status").is_some();
    if let Some(answer) = fault(inner, is_read) {
        return answer;
    }
    if request["messaging_product"] != "whatsapp" {
        return invalid("The parameter messaging_product is required.");
    }
    if is_read {
        return read_receipt(inner, request);
    }
    let to = request["to"].as_str().unwrap_or_default();
    let wa_id: String = to.chars().filter(char::is_ascii_digit).collect();
    if wa_id.is_empty() {
        return invalid("The parameter to is required.");
    }
    if request
        .get("recipient_type")
        .is_some_and(|t| t != "individual")
    {
        return invalid("Param recipient_type must be individual");
    }
    let context = match request.get("context") {
        None => None,
        Some(c) => match c["message_id"].as_str() {
            Some(id) if !id.is_empty() => Some(id.to_owned()),
            _ => return invalid("Param context['message_id'] is required"),
        },
    };
    let draft = match parse_send(inner, request) {
        Ok(draft) => draft,
        Err(answer) => return answer,
    };
    let free_form = draft.kind != SentKind::Template;
    let last = inner.last_inbound.get(&wa_id).copied();
    let outside = last.is_none_or(|t| unix_now().saturating_sub(t) > WINDOW.as_secs());
    let refused = free_form && inner.options.enforce_window && outside;
    let sync_refusal = refused && inner.options.window_error == WindowError::Sync;
    let wamid = if sync_refusal {
        String::new()
    } else {
        inner.next_wamid(&wa_id)
    };
    inner.sent.push(SentMessage {
        chat: wa_id.clone(),
        wamid: wamid.clone(),
        kind: draft.kind.clone(),
        text: draft.text,
        buttons: draft.buttons,
        template: draft.template,
        context,
        request: request.clone(),
        at: Instant::now(),
        failed: refused.then_some(RE_ENGAGEMENT),
    });
    if sync_refusal {
        let message = "(#131047) Re-engagement message";
        return graph_error(400, RE_ENGAGEMENT, message, Some(WINDOW_DETAILS));
    }
    let statuses: Vec<Value> = if refused {
        let errors = json!([{"code": RE_ENGAGEMENT, "title": "Re-engagement message",
            "message": "Re-engagement message", "error_data": {"details": WINDOW_DETAILS}}]);
        vec![webhook::status_object(
            &wamid,
            "failed",
            &wa_id,
            Some(errors),
        )]
    } else if inner.options.auto_statuses {
        let each = ["sent", "delivered"].into_iter();
        let statuses = each.map(|s| webhook::status_object(&wamid, s, &wa_id, None));
        statuses.collect()
    } else {
        Vec::new()
    };
    // Queued now, so they come before anything queued after this send, but sent a moment
    // later, once the daemon has had the answer naming the wamid.
    let not_before = Instant::now() + STATUS_DELAY;
    for status in statuses {
        let body = webhook::statuses_body(&inner.options, vec![status]);
        inner.enqueue_after(body, Vec::new(), Some(not_before));
    }
    let mut message = json!({ "id": wamid });
    if draft.kind == SentKind::Template {
        message["message_status"] = json!("accepted");
    }
    Answer {
        status: 200,
        body: json!({"messaging_product": "whatsapp",
                     "contacts": [{"input": to, "wa_id": wa_id}],
                     "messages": [message]}),
    }
}

fn read_receipt(inner: &mut Inner, request: &Value) -> Answer {
    if request["status"] != "read" {
        return invalid("Param status must be read");
    }
    let id = request["message_id"].as_str().unwrap_or_default();
    let Some((from, _)) = inner.inbound.get(id).cloned() else {
        return invalid("Invalid parameter: message_id is not a message this number received");
    };
    let typing = match request.get("typing_indicator") {
        None => false,
        Some(t) if t["type"] == "text" => true,
        Some(_) => return invalid("Param typing_indicator['type'] must be text"),
    };
    let read = Read {
        message_id: id.to_owned(),
        typing,
        at: Instant::now(),
    };
    inner.reads.push((from, read));
    Answer {
        status: 200,
        body: json!({"success": true}),
    }
}

/// What a send carries.
struct Draft {
    kind: SentKind,
    text: String,
    buttons: Vec<(String, String)>,
    template: Option<(String, String)>,
}

fn draft(kind: SentKind, text: &str) -> Draft {
    Draft {
        kind,
        text: text.to_owned(),
        buttons: Vec::new(),
        template: None,
    }
}

fn chars(value: &Value) -> usize {
    value.as_str().map_or(0, |s| s.chars().count())
}

fn parse_send(inner: &Inner, request: &Value) -> Result<Draft, Answer> {
    let kind = request["type"].as_str().unwrap_or("text");
    match kind {
        "text" => {
            let body = &request["text"]["body"];
            let Some(text) = body.as_str().filter(|b| !b.is_empty()) else {
                return Err(invalid("The parameter text['body'] is required."));
            };
            if chars(body) > TEXT_LIMIT {
                let message =
                    format!("Param text['body'] must be at most {TEXT_LIMIT} characters long.");
                return Err(invalid(&message));
            }
            Ok(draft(SentKind::Text, text))
        }
        "interactive" => interactive(&request["interactive"]),
        "template" => {
            let template = &request["template"];
            let name = template["name"].as_str().filter(|n| !n.is_empty());
            let language = template["language"]["code"]
                .as_str()
                .filter(|c| !c.is_empty());
            let (Some(name), Some(language)) = (name, language) else {
                return Err(invalid(
                    "Param template['name'] and template['language']['code'] are required.",
                ));
            };
            let mut sent = draft(SentKind::Template, "");
            sent.template = Some((name.to_owned(), language.to_owned()));
            Ok(sent)
        }
        "image" | "audio" | "video" | "document" | "sticker" => media(inner, kind, &request[kind]),
        other => Err(invalid(&format!(
            "Param type must be one of {{AUDIO, CONTACTS, DOCUMENT, IMAGE, INTERACTIVE, LOCATION, REACTION, STICKER, TEMPLATE, TEXT, VIDEO}} - got \"{other}\"."
        ))),
    }
}

fn interactive(interactive: &Value) -> Result<Draft, Answer> {
    let list = match interactive["type"].as_str() {
        Some("button") => false,
        Some("list") => true,
        _ => {
            return Err(invalid(
                "Param interactive['type'] must be one of {BUTTON, LIST}",
            ));
        }
    };
    let body = &interactive["body"]["text"];
    let body_limit = if list { 4096 } else { 1024 };
    let Some(text) = body.as_str().filter(|t| !t.is_empty()) else {
        return Err(not_valid("Param interactive['body']['text'] is required"));
    };
    if chars(body) > body_limit {
        let details = format!("Body text length invalid. Min length: 1, Max length: {body_limit}");
        return Err(not_valid(&details));
    }
    if let Some(header) = interactive.get("header")
        && header["type"] == "text"
        && !(1..=60).contains(&chars(&header["text"]))
    {
        return Err(not_valid(
            "Header text length invalid. Min length: 1, Max length: 60",
        ));
    }
    if let Some(footer) = interactive.get("footer")
        && !(1..=60).contains(&chars(&footer["text"]))
    {
        return Err(not_valid(
            "Footer text length invalid. Min length: 1, Max length: 60",
        ));
    }
    let choices = if list {
        list_rows(&interactive["action"])?
    } else {
        reply_buttons(&interactive["action"])?
    };
    let mut sent = draft(SentKind::Interactive { list }, text);
    sent.buttons = choices;
    Ok(sent)
}

fn unique(choices: &[(String, String)]) -> bool {
    let mut ids: Vec<&String> = choices.iter().map(|(id, _)| id).collect();
    let mut titles: Vec<&String> = choices.iter().map(|(_, t)| t).collect();
    ids.sort();
    ids.dedup();
    titles.sort();
    titles.dedup();
    ids.len() == choices.len() && titles.len() == choices.len()
}

fn reply_buttons(action: &Value) -> Result<Vec<(String, String)>, Answer> {
    let buttons = action["buttons"].as_array().cloned().unwrap_or_default();
    if !(1..=3).contains(&buttons.len()) {
        return Err(not_valid("Buttons count invalid. Min: 1, Max: 3"));
    }
    let mut choices = Vec::new();
    for button in &buttons {
        let reply = &button["reply"];
        if button["type"] != "reply" {
            return Err(not_valid("Button type invalid. Must be reply"));
        }
        if !(1..=20).contains(&chars(&reply["title"])) {
            return Err(not_valid(
                "Button title length invalid. Min length: 1, Max length: 20",
            ));
        }
        if !(1..=256).contains(&chars(&reply["id"])) {
            return Err(not_valid(
                "Button id length invalid. Min length: 1, Max length: 256",
            ));
        }
        let id = reply["id"].as_str().unwrap_or_default().to_owned();
        let title = reply["title"].as_str().unwrap_or_default().to_owned();
        choices.push((id, title));
    }
    if !unique(&choices) {
        return Err(not_valid("Buttons must have unique ids and titles"));
    }
    Ok(choices)
}

fn list_rows(action: &Value) -> Result<Vec<(String, String)>, Answer> {
    if !(1..=20).contains(&chars(&action["button"])) {
        return Err(not_valid(
            "Button text length invalid. Min length: 1, Max length: 20",
        ));
    }
    let sections = action["sections"].as_array().cloned().unwrap_or_default();
    if !(1..=10).contains(&sections.len()) {
        return Err(not_valid("Sections count invalid. Min: 1, Max: 10"));
    }
    let mut choices = Vec::new();
    for row in sections
        .iter()
        .flat_map(|s| s["rows"].as_array().cloned().unwrap_or_default())
    {
        if !(1..=24).contains(&chars(&row["title"])) || !(1..=200).contains(&chars(&row["id"])) {
            return Err(not_valid("Row title (1-24) or id (1-200) length invalid"));
        }
        if chars(&row["description"]) > 72 {
            return Err(not_valid("Row description length invalid. Max length: 72"));
        }
        let id = row["id"].as_str().unwrap_or_default().to_owned();
        let title = row["title"].as_str().unwrap_or_default().to_owned();
        choices.push((id, title));
    }
    if !(1..=10).contains(&choices.len()) || !unique(&choices) {
        return Err(not_valid(
            "Rows count invalid (1-10, unique ids and titles)",
        ));
    }
    Ok(choices)
}

fn media(inner: &Inner, kind: &str, object: &Value) -> Result<Draft, Answer> {
    if !object.is_object() {
        return Err(invalid(&format!("The parameter {kind} is required.")));
    }
    let source = match (object["id"].as_str(), object["link"].as_str()) {
        (Some(id), None) if inner.media.contains_key(id) => MediaSource::Id(id.to_owned()),
        (Some(_), None) => return Err(invalid("Invalid media id")),
        (None, Some(link)) if link.starts_with("https://") || link.starts_with("http://") => {
            MediaSource::Link(link.to_owned())
        }
        (None, Some(_)) => {
            return Err(invalid(&format!("Param {kind}['link'] is not a valid URI")));
        }
        _ => {
            return Err(invalid(&format!(
                "Param {kind} must have exactly one of id or link"
            )));
        }
    };
    let caption = object["caption"].as_str().map(str::to_owned);
    if caption.is_some() && matches!(kind, "audio" | "sticker") {
        return Err(invalid(&format!("Param {kind}['caption'] is not allowed")));
    }
    // Meta's voice note: audio only, a boolean.
    if let Some(voice) = object.get("voice")
        && (kind != "audio" || !voice.is_boolean())
    {
        return Err(invalid(&format!("Param {kind}['voice'] is not valid")));
    }
    let filename = object["filename"].as_str().map(str::to_owned);
    if filename.is_some() && kind != "document" {
        return Err(invalid(&format!("Param {kind}['filename'] is not allowed")));
    }
    let text = caption.clone().unwrap_or_default();
    let kind = SentKind::Media {
        media_type: kind.to_owned(),
        source,
        caption,
        filename,
        voice: object["voice"].as_bool().unwrap_or(false),
    };
    Ok(draft(kind, &text))
}

// ---- media ----

/// What a multipart upload's call records: its text fields, and the file's name and size.
fn upload_summary(content_type: &str, body: &[u8]) -> Value {
    let mut summary = serde_json::Map::new();
    for part in crate::multipart::parse(content_type, body) {
        let value = match &part.filename {
            Some(name) => json!({"filename": name, "size": part.bytes.len()}),
            None => json!(part.text()),
        };
        summary.insert(part.name.clone(), value);
    }
    Value::Object(summary)
}

fn upload(inner: &mut Inner, content_type: &str, body: &[u8]) -> Answer {
    let parts = crate::multipart::parse(content_type, body);
    let field = |name: &str| parts.iter().find(|p| p.name == name);
    if field("messaging_product").map(|p| p.text()).as_deref() != Some("whatsapp") {
        return invalid("The parameter messaging_product is required.");
    }
    let Some(mime) = field("type").map(|p| p.text()).filter(|t| !t.is_empty()) else {
        return invalid("The parameter type is required.");
    };
    let Some(file) = field("file").filter(|p| p.filename.is_some()) else {
        return invalid("The parameter file is required.");
    };
    let media_id = inner.add_media(file.bytes.clone(), &mime);
    inner.uploads.push(Upload {
        media_id: media_id.clone(),
        filename: file.filename.clone(),
        mime,
        bytes: file.bytes.clone(),
        at: Instant::now(),
    });
    Answer {
        status: 200,
        body: json!({ "id": media_id }),
    }
}

fn media_info(inner: &Inner, id: &str) -> Answer {
    let Some(media) = inner.media.get(id) else {
        let message = format!(
            "Unsupported get request. Object with ID '{id}' does not exist, cannot be loaded due to missing permissions, or does not support this operation."
        );
        return graph_error(400, INVALID, &message, None);
    };
    let url = format!("{}/media-download/{id}?ext=1&hash=x", inner.base_url);
    Answer {
        status: 200,
        body: json!({"messaging_product": "whatsapp", "url": url, "mime_type": media.mime,
                     "sha256": hex::encode(Sha256::digest(&media.bytes)),
                     "file_size": media.bytes.len(), "id": id}),
    }
}

/// The URL a media lookup hands out: the bytes, to the bearer token only.
async fn download(
    State(fake): State<FakeWhatsApp>,
    Path(id): Path<String>,
    uri: Uri,
    headers: HeaderMap,
) -> axum::response::Response {
    let mut inner = fake.lock();
    let auth_ok = bearer_ok(&headers, &inner.options.access_token);
    let media = inner.media.get(&id).cloned();
    let answer = match (&media, auth_ok) {
        (_, false) => unauthorized(),
        (None, true) => graph_error(404, INVALID, "(#100) Media not found", None),
        (Some(_), true) => Answer {
            status: 200,
            body: Value::Null,
        },
    };
    inner.record(&Method::GET, uri.path(), auth_ok, Value::Null, &answer);
    match media {
        Some(media) if answer.status == 200 => {
            *inner.downloads.entry(id).or_default() += 1;
            respond(200, &media.mime, media.bytes)
        }
        _ => json_response(answer),
    }
}
