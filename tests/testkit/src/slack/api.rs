//! The Web API under `/api/{method}` (GET with a query, POST with a JSON, form or multipart
//! body; answers `{"ok":true,…}` or `{"ok":false,"error":…}` with HTTP 200, as Slack
//! does), tokens by kind, scripted faults, the per-channel pace of `chat.postMessage`,
//! Block Kit validation, and the routes beside it: `POST /upload/{file}` (what
//! `files.getUploadURLExternal` hands out), `GET /files/{id}/…` (files people sent, for
//! the bot token only) and `POST /response/{n}` (`response_url`s).

use std::time::{Duration, Instant};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, Method, Uri, header};
use axum::routing::any;
use serde_json::{Map, Value, json};

use super::blocks::validate_blocks;
use super::{
    APP_TOKEN, BOT_TOKEN, BOT_USER_ID, Call, Chan, Ephemeral, FakeSlack, FaultKind, Inner, Msg,
    SentFile, TEXT_LIMIT, Upload, model,
};
use crate::conformance::WorkingEvent;

/// The methods the fake knows.
const METHODS: [&str; 15] = [
    "auth.test",
    "apps.connections.open",
    "chat.postMessage",
    "chat.update",
    "chat.postEphemeral",
    "chat.delete",
    "reactions.add",
    "reactions.remove",
    "assistant.threads.setStatus",
    "files.getUploadURLExternal",
    "files.completeUploadExternal",
    "users.info",
    "conversations.info",
    "conversations.history",
    "conversations.replies",
];

/// What the fake answers.
pub(super) struct Answer {
    status: u16,
    body: Value,
    headers: Vec<(&'static str, String)>,
    refused: bool,
}

/// `{"ok":false,"error":…}` (HTTP 200, as Slack answers every refusal but a rate limit).
pub(super) fn fail(error: &str) -> Answer {
    failure(json!({"ok": false, "error": error}))
}

pub(super) fn failure(body: Value) -> Answer {
    Answer {
        status: 200,
        body,
        headers: Vec::new(),
        refused: false,
    }
}

/// 429 with `Retry-After`, as Slack limits.
fn too_many(retry_after: u64) -> Answer {
    Answer {
        status: 429,
        body: json!({"ok": false, "error": "ratelimited"}),
        headers: vec![("retry-after", retry_after.to_string())],
        refused: true,
    }
}

pub(super) fn router(fake: FakeSlack) -> Router {
    Router::new()
        .route("/api/{method}", any(api))
        .route("/upload/{file_id}", any(upload))
        .route("/files/{id}/{*rest}", any(download))
        .route("/response/{n}", any(response))
        .with_state(fake)
}

fn reply(
    status: u16,
    content_type: &str,
    body: Vec<u8>,
    headers: &[(&str, String)],
) -> axum::response::Response {
    let status = axum::http::StatusCode::from_u16(status)
        .unwrap_or(axum::http::StatusCode::INTERNAL_SERVER_ERROR);
    let mut builder = axum::http::Response::builder()
        .status(status)
        .header(header::CONTENT_TYPE, content_type);
    for (name, value) in headers {
        builder = builder.header(*name, value);
    }
    let built = builder.body(Body::from(body));
    built.unwrap_or_else(|_| axum::http::Response::new(Body::empty()))
}

const JSON: &str = "application/json; charset=utf-8";

fn html(status: u16, text: &str) -> axum::response::Response {
    let page =
        format!("<!DOCTYPE html><html><head><title>Slack</title></head><body>{text}</body></html>");
    reply(status, "text/html; charset=utf-8", page.into_bytes(), &[])
}

fn form(bytes: &[u8]) -> Map<String, Value> {
    let pairs = form_urlencoded::parse(bytes);
    pairs
        .map(|(k, v)| (k.into_owned(), Value::String(v.into_owned())))
        .collect()
}

fn header_text(headers: &HeaderMap, name: header::HeaderName) -> Option<String> {
    let value = headers.get(name)?.to_str().ok()?;
    Some(value.to_owned())
}

fn bearer(headers: &HeaderMap) -> Option<String> {
    let auth = header_text(headers, header::AUTHORIZATION)?;
    auth.strip_prefix("Bearer ").map(|t| t.trim().to_owned())
}

async fn api(
    State(fake): State<FakeSlack>,
    Path(method): Path<String>,
    http: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> axum::response::Response {
    let content_type = header_text(&headers, header::CONTENT_TYPE).unwrap_or_default();
    let mut params = uri.query().map(|q| form(q.as_bytes())).unwrap_or_default();
    let mut bad_body = None;
    let lower = content_type.to_ascii_lowercase();
    if lower.starts_with("application/json") {
        match serde_json::from_slice::<Value>(&body) {
            Ok(Value::Object(map)) => params.extend(map),
            _ if body.is_empty() => {}
            _ => bad_body = Some("invalid_json"),
        }
    } else if lower.starts_with("multipart/form-data") {
        for part in crate::multipart::parse(&content_type, &body) {
            if part.filename.is_none() {
                params.insert(part.name.clone(), Value::String(part.text()));
            }
        }
    } else if !body.is_empty() {
        params.extend(form(&body));
    }
    let token = bearer(&headers).or_else(|| {
        params
            .get("token")
            .and_then(Value::as_str)
            .map(str::to_owned)
    });
    let answer = {
        let mut inner = fake.lock();
        inner.api_call(
            &method,
            http.as_str(),
            params,
            &content_type,
            token,
            bad_body,
        )
    };
    let slow = fake.lock().slow_answers.get(&method).copied();
    if let Some(delay) = slow {
        // Done (a message is visible) before the caller hears so.
        tokio::time::sleep(delay).await;
    }
    if answer.body.is_null() {
        let html_body = "<html><body>Service unavailable</body></html>"
            .as_bytes()
            .to_vec();
        return reply(answer.status, "text/html", html_body, &answer.headers);
    }
    let body = answer.body.to_string().into_bytes();
    reply(answer.status, JSON, body, &answer.headers)
}

/// Parameters as Slack reads them: strings from a query or form, any JSON from a JSON body.
struct Params<'a>(&'a Map<String, Value>);

impl Params<'_> {
    /// A non-empty string (numbers and booleans as written).
    fn str(&self, key: &str) -> Option<String> {
        let s = match self.0.get(key)? {
            Value::String(s) => s.clone(),
            Value::Number(n) => n.to_string(),
            Value::Bool(b) => b.to_string(),
            _ => return None,
        };
        (!s.is_empty()).then_some(s)
    }

    /// JSON, parsed when it came as a string (form bodies carry `blocks` that way).
    fn json(&self, key: &str) -> Option<Value> {
        match self.0.get(key)? {
            Value::String(s) => Some(serde_json::from_str(s).unwrap_or(Value::String(s.clone()))),
            Value::Null => None,
            other => Some(other.clone()),
        }
    }
}

impl Inner {
    fn api_call(
        &mut self,
        method: &str,
        http: &str,
        params: Map<String, Value>,
        content_type: &str,
        token: Option<String>,
        bad_body: Option<&str>,
    ) -> Answer {
        let at = Instant::now();
        let answer = self.answer(method, &params, token.as_deref(), bad_body);
        let error = answer.body.get("error").and_then(Value::as_str);
        self.calls.push(Call {
            method: method.to_owned(),
            http: http.to_owned(),
            params: Value::Object(params),
            content_type: content_type.to_owned(),
            token,
            status: answer.status,
            error: error.map(str::to_owned),
            refused: answer.refused,
            at,
        });
        answer
    }

    fn answer(
        &mut self,
        method: &str,
        params: &Map<String, Value>,
        token: Option<&str>,
        bad_body: Option<&str>,
    ) -> Answer {
        if !METHODS.contains(&method) {
            return fail("unknown_method");
        }
        if let Some(error) = bad_body {
            return fail(error);
        }
        let wants_app = method == "apps.connections.open";
        match token {
            None | Some("") => return fail("not_authed"),
            Some(t) if t == BOT_TOKEN || t == APP_TOKEN => {
                if (t == APP_TOKEN) != wants_app {
                    return fail("not_allowed_token_type");
                }
            }
            Some(_) => return fail("invalid_auth"),
        }
        if let Some(scripted) = self.scripted(method) {
            return scripted;
        }
        let p = Params(params);
        let result = match method {
            "auth.test" => Ok(model::auth_test()),
            "apps.connections.open" => Ok(self.connections_open()),
            "chat.postMessage" => self.post_message(&p),
            "chat.update" => self.update(&p),
            "chat.postEphemeral" => self.post_ephemeral(&p),
            "chat.delete" => self.delete_message(&p),
            "reactions.add" => self.react(&p, true),
            "reactions.remove" => self.react(&p, false),
            "assistant.threads.setStatus" => self.set_status(&p),
            "files.getUploadURLExternal" => self.upload_url(&p),
            "files.completeUploadExternal" => self.complete_upload(&p),
            "users.info" => self.users_info(&p),
            "conversations.history" => self.history(&p, false),
            "conversations.replies" => self.history(&p, true),
            _ => self.conversations_info(&p),
        };
        match result {
            Ok(mut body) => {
                body["ok"] = json!(true);
                Answer {
                    status: 200,
                    body,
                    headers: Vec::new(),
                    refused: false,
                }
            }
            Err(answer) => answer,
        }
    }

    /// A scripted fault for `method`, used up by one.
    fn scripted(&mut self, method: &str) -> Option<Answer> {
        let at = self.faults.iter().position(|f| f.method == method)?;
        let fault = &mut self.faults[at];
        fault.left = fault.left.saturating_sub(1);
        let kind = fault.kind.clone();
        if fault.left == 0 {
            self.faults.remove(at);
        }
        let mut answer = match kind {
            FaultKind::RateLimit(secs) => too_many(secs),
            FaultKind::Error(body) => failure(body),
            // A `Null` body is answered as an HTML error page.
            FaultKind::Http(status) => Answer {
                status,
                body: Value::Null,
                headers: Vec::new(),
                refused: true,
            },
        };
        answer.refused = true;
        Some(answer)
    }

    fn channel(&self, p: &Params, key: &str) -> Result<(String, Chan), Answer> {
        let id = p.str(key).unwrap_or_default();
        match self.chan(&id) {
            Some(chan) => Ok((id, chan)),
            None => Err(fail("channel_not_found")),
        }
    }

    fn connections_open(&mut self) -> Value {
        self.connection_opens += 1;
        let ticket = self.sock.issue_ticket();
        json!({"url": format!("{}/link/?ticket={ticket}&app_id={}", self.ws_url, super::APP_ID)})
    }

    /// Whether `chat.postMessage` may post in `channel` now (the per-second pace).
    fn paced(&mut self, channel: &str) -> bool {
        let Some(limit) = self.options.post_per_second else {
            return true;
        };
        let now = Instant::now();
        let recent = self.posts.entry(channel.to_owned()).or_default();
        while recent
            .front()
            .is_some_and(|t| now.duration_since(*t) >= Duration::from_secs(1))
        {
            recent.pop_front();
        }
        if recent.len() >= limit as usize {
            return false;
        }
        recent.push_back(now);
        true
    }

    fn post_message(&mut self, p: &Params) -> Result<Value, Answer> {
        let (channel, _) = self.channel(p, "channel")?;
        let text = p.str("text").unwrap_or_default();
        let blocks = p.json("blocks");
        if let Some(blocks) = &blocks {
            validate_blocks(blocks)?;
        }
        let has_blocks = blocks
            .as_ref()
            .and_then(Value::as_array)
            .is_some_and(|b| !b.is_empty());
        if text.trim().is_empty() && !has_blocks && p.json("attachments").is_none() {
            return Err(fail("no_text"));
        }
        if text.chars().count() > TEXT_LIMIT {
            return Err(fail("msg_too_long"));
        }
        if !self.paced(&channel) {
            return Err(too_many(1));
        }
        let thread = p.str("thread_ts");
        let blocks = blocks.unwrap_or(Value::Null);
        let at = self.post_ours(&channel, thread, text, blocks, Vec::new());
        if let Some(metadata) = p.json("metadata") {
            self.messages[at].metadata = metadata;
        }
        let m = &self.messages[at];
        Ok(json!({"channel": channel, "ts": m.ts, "message": model::bot_message(m)}))
    }

    /// `conversations.history` (the channel's messages, newest first; thread replies only
    /// as their parent) or `conversations.replies` (a thread: its parent, then its
    /// replies, oldest first), at most `limit` (default 100).
    fn history(&mut self, p: &Params, thread: bool) -> Result<Value, Answer> {
        let (channel, _) = self.channel(p, "channel")?;
        let limit: usize = p.str("limit").and_then(|l| l.parse().ok()).unwrap_or(100);
        let of_channel = self
            .messages
            .iter()
            .filter(|m| m.channel == channel && !m.deleted);
        let messages: Vec<Value> = if thread {
            let ts = p.str("ts").ok_or_else(|| fail("invalid_arguments"))?;
            let in_thread = |m: &&Msg| m.ts == ts || m.thread_ts.as_deref() == Some(&ts);
            let found: Vec<&Msg> = of_channel.filter(in_thread).collect();
            if found.is_empty() {
                return Err(fail("thread_not_found"));
            }
            found
                .iter()
                .take(limit)
                .map(|m| model::history_message(m))
                .collect()
        } else {
            let top =
                of_channel.filter(|m| m.thread_ts.is_none() || m.thread_ts.as_ref() == Some(&m.ts));
            let mut top: Vec<&Msg> = top.collect();
            top.reverse();
            top.iter()
                .take(limit)
                .map(|m| model::history_message(m))
                .collect()
        };
        Ok(json!({"messages": messages, "has_more": false}))
    }

    fn update(&mut self, p: &Params) -> Result<Value, Answer> {
        let (channel, _) = self.channel(p, "channel")?;
        let ts = p.str("ts").unwrap_or_default();
        let at = self
            .find(&channel, &ts)
            .ok_or_else(|| fail("message_not_found"))?;
        if !self.messages[at].ours {
            return Err(fail("cant_update_message"));
        }
        let text = p.str("text");
        let blocks = p.json("blocks");
        if let Some(blocks) = &blocks {
            validate_blocks(blocks)?;
        }
        if text.is_none() && blocks.is_none() && p.json("attachments").is_none() {
            return Err(fail("no_text"));
        }
        if text
            .as_ref()
            .is_some_and(|t| t.chars().count() > TEXT_LIMIT)
        {
            return Err(fail("msg_too_long"));
        }
        let edit_ts = self.next_ts();
        let before = model::bot_message(&self.messages[at]);
        let msg = &mut self.messages[at];
        let old = msg.text.clone();
        if let Some(text) = text {
            msg.text = text;
        }
        msg.history.push(old);
        if let Some(blocks) = blocks {
            msg.blocks = blocks;
        }
        msg.edited.push(Instant::now());
        let m = msg.clone();
        if self.options.echo_own {
            let kind = self.chan_type(&channel);
            self.emit_event(model::own_message_changed(&before, &m, &edit_ts, kind));
        }
        let mut message = model::bot_message(&m);
        message["edited"] = json!({"user": BOT_USER_ID, "ts": edit_ts});
        Ok(json!({"channel": channel, "ts": m.ts, "text": m.text, "message": message}))
    }

    fn post_ephemeral(&mut self, p: &Params) -> Result<Value, Answer> {
        let (channel, chan) = self.channel(p, "channel")?;
        let user = p.str("user").unwrap_or_default();
        let member = match chan {
            Chan::Dm(person) => person == user,
            Chan::Group => user
                .strip_prefix("U0PERSON")
                .is_some_and(|n| n.parse::<u32>().is_ok()),
        };
        if !member {
            return Err(fail("user_not_in_channel"));
        }
        let text = p.str("text").unwrap_or_default();
        let blocks = p.json("blocks");
        if let Some(blocks) = &blocks {
            validate_blocks(blocks)?;
        }
        if text.trim().is_empty() && blocks.is_none() {
            return Err(fail("no_text"));
        }
        if text.chars().count() > TEXT_LIMIT {
            return Err(fail("msg_too_long"));
        }
        let ts = self.next_ts();
        self.ephemerals.push(Ephemeral {
            channel,
            user,
            ts: ts.clone(),
            thread_ts: p.str("thread_ts"),
            text,
            blocks: blocks.unwrap_or(Value::Null),
            via: "chat.postEphemeral",
            at: Instant::now(),
        });
        Ok(json!({"message_ts": ts}))
    }

    fn delete_message(&mut self, p: &Params) -> Result<Value, Answer> {
        let (channel, _) = self.channel(p, "channel")?;
        let ts = p.str("ts").unwrap_or_default();
        let at = self
            .find(&channel, &ts)
            .ok_or_else(|| fail("message_not_found"))?;
        if !self.messages[at].ours {
            return Err(fail("cant_delete_message"));
        }
        self.messages[at].deleted = true;
        Ok(json!({"channel": channel, "ts": ts}))
    }

    fn react(&mut self, p: &Params, add: bool) -> Result<Value, Answer> {
        let (channel, _) = self.channel(p, "channel")?;
        let ts = p
            .str("timestamp")
            .ok_or_else(|| fail("no_item_specified"))?;
        let name = p.str("name").ok_or_else(|| fail("invalid_name"))?;
        self.find(&channel, &ts)
            .ok_or_else(|| fail("message_not_found"))?;
        let key = (channel.clone(), ts, name);
        let held = self.reactions.iter().position(|r| *r == key);
        match (add, held) {
            (true, Some(_)) => return Err(fail("already_reacted")),
            (false, None) => return Err(fail("no_reaction")),
            (true, None) => {
                self.reactions.push(key);
                self.record_working(&channel, WorkingEvent::Shown);
            }
            (false, Some(at)) => {
                self.reactions.remove(at);
                self.record_working(&channel, WorkingEvent::Ended);
            }
        }
        Ok(json!({}))
    }

    fn set_status(&mut self, p: &Params) -> Result<Value, Answer> {
        if !self.options.assistant {
            return Err(failure(json!({"ok": false, "error": "missing_scope",
                                      "needed": "assistant:write", "provided": model::SCOPES})));
        }
        let (channel, _) = self.channel(p, "channel_id")?;
        let thread = p
            .str("thread_ts")
            .ok_or_else(|| fail("invalid_arguments"))?;
        let status = p.0.get("status").and_then(Value::as_str);
        let status = status.ok_or_else(|| fail("invalid_arguments"))?;
        let key = (channel.clone(), thread);
        let showing = self.statuses.iter().position(|s| *s == key);
        if status.is_empty() {
            if let Some(at) = showing {
                self.statuses.remove(at);
            }
            self.record_working(&channel, WorkingEvent::Ended);
        } else {
            if showing.is_none() {
                self.statuses.push(key);
            }
            self.record_working(&channel, WorkingEvent::Shown);
        }
        Ok(json!({}))
    }

    fn upload_url(&mut self, p: &Params) -> Result<Value, Answer> {
        let name = p.str("filename").ok_or_else(|| fail("invalid_arguments"))?;
        let length = p.str("length").and_then(|l| l.parse::<usize>().ok());
        let length = length
            .filter(|&l| l > 0)
            .ok_or_else(|| fail("invalid_arguments"))?;
        let id = format!("F0{:09}", self.next_n());
        let upload = Upload {
            name: model::file_name(&name),
            length,
            bytes: None,
            completed: false,
        };
        self.uploads.insert(id.clone(), upload);
        Ok(json!({"upload_url": format!("{}/upload/{id}", self.base_url), "file_id": id}))
    }

    fn complete_upload(&mut self, p: &Params) -> Result<Value, Answer> {
        let files = p.json("files").and_then(|f| f.as_array().cloned());
        let files = files
            .filter(|f| !f.is_empty())
            .ok_or_else(|| fail("invalid_arguments"))?;
        let mut wanted = Vec::new();
        for f in &files {
            let id = f["id"].as_str().ok_or_else(|| fail("invalid_arguments"))?;
            let upload = self
                .uploads
                .get(id)
                .filter(|u| u.bytes.is_some() && !u.completed);
            let upload = upload.ok_or_else(|| fail("file_not_found"))?.clone();
            wanted.push((
                id.to_owned(),
                f["title"].as_str().map(str::to_owned),
                upload,
            ));
        }
        let mut channels = Vec::new();
        if let Some(id) = p.str("channel_id") {
            channels.push(id);
        } else if let Some(list) = p.json("channels") {
            let ids = match list {
                Value::Array(a) => a
                    .iter()
                    .filter_map(|v| v.as_str().map(str::to_owned))
                    .collect(),
                Value::String(s) => s.split(',').map(|c| c.trim().to_owned()).collect(),
                other => vec![other.to_string()],
            };
            channels.extend(ids);
        }
        if channels.iter().any(|c| self.chan(c).is_none()) {
            return Err(fail("channel_not_found"));
        }
        let thread = p.str("thread_ts");
        let comment = p.str("initial_comment");
        let mut objects = Vec::new();
        for (id, title, upload) in &wanted {
            let bytes = upload.bytes.clone().unwrap_or_default();
            let mime = mime_of(&upload.name);
            let url = format!("{}/files/{id}", self.base_url);
            let mut object = model::file(&url, id, &upload.name, mime, bytes.len(), BOT_USER_ID);
            object["title"] = json!(title.clone().unwrap_or_else(|| upload.name.clone()));
            objects.push(object);
            let entry = (upload.name.clone(), mime.to_owned(), bytes);
            self.files.insert(id.clone(), entry);
            if let Some(u) = self.uploads.get_mut(id) {
                u.completed = true;
            }
        }
        for channel in channels {
            let shared: Vec<(String, Vec<u8>)> = wanted
                .iter()
                .map(|(_, _, u)| (u.name.clone(), u.bytes.clone().unwrap_or_default()))
                .collect();
            let text = comment.clone().unwrap_or_default();
            self.post_ours(&channel, thread.clone(), text, Value::Null, shared);
            for (id, title, upload) in &wanted {
                self.sent_files.push(SentFile {
                    file_id: id.clone(),
                    channel: channel.clone(),
                    thread_ts: thread.clone(),
                    name: upload.name.clone(),
                    title: title.clone(),
                    comment: comment.clone(),
                    bytes: upload.bytes.clone().unwrap_or_default(),
                    length: upload.length,
                    at: Instant::now(),
                });
            }
        }
        Ok(json!({"files": objects}))
    }

    fn users_info(&mut self, p: &Params) -> Result<Value, Answer> {
        let id = p.str("user").unwrap_or_default();
        let person = id
            .strip_prefix("U0PERSON")
            .and_then(|n| n.parse::<u32>().ok());
        if id != BOT_USER_ID && person.is_none_or(|n| n == 0) {
            return Err(fail("user_not_found"));
        }
        Ok(json!({"user": model::user(&id)}))
    }

    fn conversations_info(&mut self, p: &Params) -> Result<Value, Answer> {
        let (id, chan) = self.channel(p, "channel")?;
        let with = match &chan {
            Chan::Dm(person) => Some(person.as_str()),
            Chan::Group => None,
        };
        Ok(json!({"channel": model::conversation(&id, with)}))
    }
}

fn mime_of(name: &str) -> &'static str {
    let ext = name.rsplit_once('.').map(|(_, e)| e.to_ascii_lowercase());
    match ext.as_deref().unwrap_or_default() {
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "ogg" => "audio/ogg",
        "mp3" => "audio/mpeg",
        "txt" | "md" | "log" => "text/plain",
        "json" => "application/json",
        "pdf" => "application/pdf",
        _ => "application/octet-stream",
    }
}

/// `POST /upload/{file_id}`: the bytes of an announced file (the raw body, or the `file`
/// part of a form).
async fn upload(
    State(fake): State<FakeSlack>,
    Path(file_id): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> axum::response::Response {
    let content_type = header_text(&headers, header::CONTENT_TYPE).unwrap_or_default();
    let bytes = if content_type
        .to_ascii_lowercase()
        .starts_with("multipart/form-data")
    {
        let parts = crate::multipart::parse(&content_type, &body);
        let file = parts
            .into_iter()
            .find(|p| p.filename.is_some() || p.name == "file");
        file.map(|p| p.bytes).unwrap_or_default()
    } else {
        body.to_vec()
    };
    let mut inner = fake.lock();
    let length = bytes.len();
    let status = match inner.uploads.get_mut(&file_id) {
        Some(upload) if !upload.completed => {
            upload.bytes = Some(bytes);
            200
        }
        _ => 404,
    };
    inner.record_side_call(
        "(upload)",
        json!({"file": file_id, "bytes": length}),
        &content_type,
        status,
    );
    match status {
        200 => reply(
            200,
            "text/plain; charset=utf-8",
            format!("OK - {length}").into_bytes(),
            &[],
        ),
        _ => reply(
            404,
            "text/plain; charset=utf-8",
            b"file_not_found".to_vec(),
            &[],
        ),
    }
}

/// `GET /files/{id}/{name}` and `/files/{id}/download/{name}`: a file, for the bot token.
async fn download(
    State(fake): State<FakeSlack>,
    Path((id, rest)): Path<(String, String)>,
    headers: HeaderMap,
) -> axum::response::Response {
    let authorised = bearer(&headers).as_deref() == Some(BOT_TOKEN);
    let mut inner = fake.lock();
    let file = inner.files.get(&id).cloned();
    let status = match (&file, authorised) {
        (_, false) => 403,
        (None, true) => 404,
        (Some(_), true) => 200,
    };
    inner.record_side_call("(download)", json!({"file": id, "path": rest}), "", status);
    match (file, status) {
        (Some((name, mime, bytes)), 200) => {
            *inner.downloads.entry(id).or_default() += 1;
            let disposition = format!("attachment; filename=\"{}\"", name.replace('"', "_"));
            reply(200, &mime, bytes, &[("content-disposition", disposition)])
        }
        (_, 404) => html(404, "File not found"),
        _ => html(403, "You need to sign in to see this page."),
    }
}

/// `POST /response/{n}`: a `response_url` (at most 5 uses), JSON or a form's `payload`.
async fn response(
    State(fake): State<FakeSlack>,
    Path(n): Path<String>,
    body: Bytes,
) -> axum::response::Response {
    let parsed = match serde_json::from_slice::<Value>(&body) {
        Ok(v) if v.is_object() => Some(v),
        _ => {
            let fields = form(&body);
            let payload = fields.get("payload").and_then(Value::as_str);
            payload
                .and_then(|p| serde_json::from_str::<Value>(p).ok())
                .filter(Value::is_object)
        }
    };
    let mut inner = fake.lock();
    let known = n
        .parse::<u64>()
        .ok()
        .and_then(|n| inner.response_urls.get_mut(&n));
    let (status, text) = match (known, &parsed) {
        (None, _) => (404, "expired_url"),
        (Some((_, uses)), _) if *uses >= 5 => (404, "used_url"),
        (Some(_), None) => (400, "invalid_payload"),
        (Some(_), Some(body))
            if body.get("text").is_none()
                && body.get("blocks").is_none()
                && body["delete_original"] != true =>
        {
            (400, "no_text")
        }
        (Some((id, uses)), Some(_)) => {
            *uses += 1;
            let id = id.clone();
            inner.respond(&id, parsed.clone().unwrap_or_default(), "response_url");
            (200, "ok")
        }
    };
    let params = json!({"n": n, "body": parsed});
    inner.record_side_call("(response_url)", params, "application/json", status);
    reply(
        status,
        "text/plain; charset=utf-8",
        text.as_bytes().to_vec(),
        &[],
    )
}

impl Inner {
    /// A call to a route beside the Web API, recorded under a name in parentheses.
    fn record_side_call(&mut self, method: &str, params: Value, content_type: &str, status: u16) {
        self.calls.push(Call {
            method: method.to_owned(),
            http: if method == "(download)" {
                "GET"
            } else {
                "POST"
            }
            .into(),
            params,
            content_type: content_type.to_owned(),
            token: None,
            status,
            error: None,
            refused: status != 200,
            at: Instant::now(),
        });
    }
}
