//! The REST API under `/api/v10` and the attachment CDN: authorisation, scripted faults,
//! per-route rate-limit buckets, Discord's validation errors, and the routes themselves.

use std::time::{Duration, Instant};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, Method, Uri, header};
use axum::routing::any;
use serde_json::{Value, json};

use super::model::{self, Chan};
use super::{
    APP_ID, BOT_ID, Call, FakeDiscord, FaultKind, Inner, Msg, Response, ResponseKind, TOKEN,
};

mod checks;

use checks::{check_command, check_components, check_content};

/// A failure as Discord answers it: status and JSON body.
type Failure = (u16, Value);

/// What the fake answers.
struct Answer {
    status: u16,
    body: Option<Value>,
    headers: Vec<(&'static str, String)>,
    refused: bool,
}

impl Answer {
    fn ok(status: u16, body: Option<Value>) -> Answer {
        let (headers, refused) = (Vec::new(), false);
        Answer {
            status,
            body,
            headers,
            refused,
        }
    }
}

pub(super) fn router(fake: FakeDiscord) -> Router {
    Router::new()
        .route("/api/v10/{*path}", any(api))
        .route("/attachments/{*path}", any(cdn))
        .with_state(fake)
}

fn error(status: u16, code: u64, message: &str) -> Failure {
    (status, json!({"message": message, "code": code}))
}

/// Discord's "Invalid Form Body" with the error at `path` (dotted, e.g. `components.0.type`).
fn invalid(path: &str, code: &str, message: &str) -> Failure {
    let mut errors = json!({"_errors": [{"code": code, "message": message}]});
    for key in path.rsplit('.') {
        errors = json!({ key: errors });
    }
    (
        400,
        json!({"message": "Invalid Form Body", "code": 50035, "errors": errors}),
    )
}

/// A file name as Discord keeps it (characters a URL would need escaped become `_`).
pub(super) fn file_name(name: &str) -> String {
    let keep = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_');
    let name: String = name
        .chars()
        .map(|c| if keep(c) { c } else { '_' })
        .collect();
    if name.is_empty() { "file".into() } else { name }
}

fn mime_of(name: &str) -> &'static str {
    let ext = name
        .rsplit('.')
        .next()
        .unwrap_or_default()
        .to_ascii_lowercase();
    match ext.as_str() {
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "ogg" => "audio/ogg",
        "mp3" => "audio/mpeg",
        "txt" | "md" | "log" => "text/plain; charset=utf-8",
        "json" => "application/json",
        "pdf" => "application/pdf",
        _ => "application/octet-stream",
    }
}

fn respond(answer: Answer, content_type: &str, bytes: Vec<u8>) -> axum::response::Response {
    let status = axum::http::StatusCode::from_u16(answer.status)
        .unwrap_or(axum::http::StatusCode::INTERNAL_SERVER_ERROR);
    let mut builder = axum::http::Response::builder().status(status);
    for (name, value) in &answer.headers {
        builder = builder.header(*name, value);
    }
    let built = match answer.body {
        Some(body) => builder
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(body.to_string())),
        None if bytes.is_empty() => builder.body(Body::empty()),
        None => builder
            .header(header::CONTENT_TYPE, content_type)
            .body(Body::from(bytes)),
    };
    built.unwrap_or_else(|_| axum::http::Response::new(Body::empty()))
}

/// The route's template (ids and tokens as placeholders) and its bucket key (the template
/// with the major parameter: the channel, guild or webhook id).
fn route_of(method: &Method, segments: &[&str]) -> (String, String) {
    let (mut template, mut key) = (method.to_string(), method.to_string());
    let mut previous = "";
    for segment in segments {
        let id_like = segment.bytes().all(|b| b.is_ascii_digit()) || segment.len() > 32;
        let major = matches!(previous, "channels" | "guilds" | "webhooks");
        let shown = if id_like { ":id" } else { segment };
        template = format!("{template}/{shown}");
        key = format!("{key}/{}", if major { segment } else { shown });
        previous = segment;
    }
    (template, key)
}

fn epoch_after(seconds: f64) -> String {
    format!("{:.3}", model::now_ms() as f64 / 1000.0 + seconds)
}

/// A 429 with Discord's headers and body.
fn too_many(retry_after: f64, global: bool, bucket: &str, limit: u32) -> Answer {
    let mut headers = vec![
        ("retry-after", format!("{}", retry_after.ceil() as u64)),
        ("x-ratelimit-limit", limit.to_string()),
        ("x-ratelimit-remaining", "0".into()),
        ("x-ratelimit-reset", epoch_after(retry_after)),
        ("x-ratelimit-reset-after", format!("{retry_after:.3}")),
        ("x-ratelimit-bucket", bucket.to_owned()),
        (
            "x-ratelimit-scope",
            if global { "global" } else { "user" }.into(),
        ),
    ];
    if global {
        headers.push(("x-ratelimit-global", "true".into()));
    }
    let body = json!({"message": "You are being rate limited.", "retry_after": retry_after,
                      "global": global});
    Answer {
        status: 429,
        body: Some(body),
        headers,
        refused: true,
    }
}

async fn api(
    State(fake): State<FakeDiscord>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> axum::response::Response {
    let path = uri.path().strip_prefix("/api/v10").unwrap_or(uri.path());
    let text = |name| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    let content_type = text(header::CONTENT_TYPE).unwrap_or_default();
    let auth = text(header::AUTHORIZATION);
    let parts = crate::multipart::parse(&content_type, &body);
    let json_body = match parts.iter().find(|p| p.name == "payload_json") {
        Some(payload) => serde_json::from_slice(&payload.bytes).ok(),
        None if parts.is_empty() && !body.is_empty() => serde_json::from_slice(&body).ok(),
        None => Some(Value::Null),
    };
    let files: Vec<(String, Vec<u8>)> = parts
        .iter()
        .filter_map(|p| Some((file_name(p.filename.as_ref()?), p.bytes.clone())))
        .collect();
    let mut call = Call {
        method: method.to_string(),
        path: path.to_owned(),
        query: uri.query().unwrap_or_default().to_owned(),
        body: json_body.clone().unwrap_or(Value::Null),
        parts,
        status: 0,
        refused: false,
        at: Instant::now(),
    };
    let (answer, late) = {
        let mut inner = fake.lock();
        let answer = match json_body {
            Some(body) => inner.answer(&method, &call, auth.as_deref(), &body, files),
            None => Answer::ok(
                400,
                Some(error(400, 50109, "The request body contains invalid JSON.").1),
            ),
        };
        call.status = answer.status;
        call.refused = answer.refused;
        // A slow answer: the request took effect; its answer comes late (or never, when
        // the client is gone by then).
        let slow = inner.slow.iter().find(|(p, _)| path.contains(p.as_str()));
        let late = slow.filter(|_| method == Method::POST).map(|(_, d)| *d);
        inner.calls.push(call);
        (answer, late)
    };
    if let Some(delay) = late {
        tokio::time::sleep(delay).await;
    }
    respond(answer, "", Vec::new())
}

/// `GET /attachments/{id}/{name}`: a file people sent or the bot uploaded (no token needed).
async fn cdn(State(fake): State<FakeDiscord>, uri: Uri) -> axum::response::Response {
    let mut inner = fake.lock();
    let path = uri.path().to_owned();
    let id = path.split('/').nth(2).unwrap_or_default().to_owned();
    let scripted = inner.scripted(&path);
    let (answer, mime, bytes) = match (scripted, inner.files.get(&id).cloned()) {
        (Some(refused), _) => (refused, String::new(), Vec::new()),
        (None, Some((_, mime, bytes))) => {
            *inner.downloads.entry(id).or_default() += 1;
            (Answer::ok(200, None), mime, bytes)
        }
        (None, None) => (
            Answer::ok(404, None),
            "text/plain".into(),
            b"Not Found".to_vec(),
        ),
    };
    inner.calls.push(Call {
        method: "GET".into(),
        path,
        query: uri.query().unwrap_or_default().to_owned(),
        body: Value::Null,
        parts: Vec::new(),
        status: answer.status,
        refused: answer.refused,
        at: Instant::now(),
    });
    respond(answer, &mime, bytes)
}

impl Inner {
    /// A scripted fault for this path, used up by one.
    fn scripted(&mut self, path: &str) -> Option<Answer> {
        // A reaction takes only a fault scripted for reactions, so one meant for a
        // channel's messages reaches them.
        let at = self.faults.iter().position(|f| {
            path.contains(&f.path)
                && (!path.contains("/reactions/") || f.path.contains("/reactions"))
        })?;
        let fault = &mut self.faults[at];
        fault.left = fault.left.saturating_sub(1);
        let kind = fault.kind.clone();
        if fault.left == 0 {
            self.faults.remove(at);
        }
        Some(match kind {
            FaultKind::RateLimit {
                retry_after,
                global,
            } => too_many(retry_after, global, "scripted", self.options.bucket_limit),
            FaultKind::Status(status) => {
                let body = json!({"message": format!("{status}: Scripted failure"), "code": 0});
                Answer {
                    status,
                    body: Some(body),
                    headers: Vec::new(),
                    refused: true,
                }
            }
        })
    }

    fn answer(
        &mut self,
        method: &Method,
        call: &Call,
        auth: Option<&str>,
        body: &Value,
        files: Vec<(String, Vec<u8>)>,
    ) -> Answer {
        let segments: Vec<&str> = call.path.split('/').filter(|s| !s.is_empty()).collect();
        // Interaction callbacks and webhooks are authorised by their token in the URL.
        let by_url = matches!(segments.first(), Some(&("interactions" | "webhooks")));
        let authorised = match auth {
            Some(value) => value == format!("Bot {TOKEN}"),
            None => by_url,
        };
        if !authorised {
            return Answer::ok(401, Some(error(401, 0, "401: Unauthorized").1));
        }
        if let Some(scripted) = self.scripted(&call.path) {
            return scripted;
        }
        let (template, key) = route_of(method, &segments);
        let bucket = format!("{:016x}", model::hash(&template));
        let (limit, window) = (self.options.bucket_limit, self.options.bucket_window);
        let now = Instant::now();
        let entry = self.buckets.entry(key).or_insert((now, 0));
        if now.duration_since(entry.0) >= window {
            *entry = (now, 0);
        }
        let reset_after = window
            .saturating_sub(now.duration_since(entry.0))
            .as_secs_f64();
        if entry.1 >= limit {
            return too_many(reset_after, false, &bucket, limit);
        }
        entry.1 += 1;
        let remaining = limit - entry.1;
        let mut answer = match self.route(method, &segments, &call.query, body, files) {
            Ok((status, body)) => Answer::ok(status, body),
            Err((status, body)) => Answer::ok(status, Some(body)),
        };
        answer.headers = vec![
            ("x-ratelimit-limit", limit.to_string()),
            ("x-ratelimit-remaining", remaining.to_string()),
            ("x-ratelimit-reset", epoch_after(reset_after)),
            ("x-ratelimit-reset-after", format!("{reset_after:.3}")),
            ("x-ratelimit-bucket", bucket),
        ];
        answer
    }

    fn route(
        &mut self,
        method: &Method,
        segments: &[&str],
        query: &str,
        body: &Value,
        files: Vec<(String, Vec<u8>)>,
    ) -> Result<(u16, Option<Value>), Failure> {
        let ok = |v: Value| Ok((200, Some(v)));
        let m = method.as_str();
        match (m, segments) {
            ("GET", ["gateway"] | ["gateway", "bot"]) => ok(json!({
                "url": self.ws_url, "shards": self.options.shards,
                "session_start_limit": {"total": 1000, "remaining": 999, "reset_after": 0,
                                        "max_concurrency": 1}})),
            ("GET", ["users", "@me"]) => ok(model::user(BOT_ID)),
            // The application's flags say which privileged intents the portal enabled
            // (GATEWAY_MESSAGE_CONTENT, 1 << 19, for the Message Content intent, 1 << 15).
            ("GET", ["applications", "@me"]) => ok(json!({
                "id": APP_ID, "name": "hermes",
                "flags": if self.options.privileged_intents & (1 << 15) != 0 { 1 << 19 } else { 0 }})),
            ("GET", ["channels", id]) => ok(model::channel(id, &self.known(id)?)),
            ("POST", ["channels", id, "messages"]) => {
                self.known(id)?;
                ok(self.create_message(id, body, files, None, false)?)
            }
            ("GET", ["channels", id, "messages"]) => ok(self.list(id, query)?),
            ("GET", ["channels", id, "messages", mid]) => {
                let found = self.find(mid).filter(|m| m.channel == *id && !m.ephemeral);
                let found = found.ok_or_else(|| error(404, 10008, "Unknown Message"))?;
                ok(model::message(self, found, false, false))
            }
            ("PATCH", ["channels", id, "messages", mid]) => {
                let mid = self.message_in(id, mid)?;
                ok(self.edit_message(mid, body)?)
            }
            ("DELETE", ["channels", id, "messages", mid]) => {
                let mid = self.message_in(id, mid)?;
                self.messages.retain(|m| m.id != mid);
                Ok((204, None))
            }
            ("POST", ["channels", id, "typing"]) => {
                self.known(id)?;
                self.typing.push((id.to_string(), Instant::now()));
                Ok((204, None))
            }
            ("PUT" | "DELETE", ["channels", id, "messages", mid, "reactions", emoji, "@me"]) => {
                let mid = self.message_in(id, mid)?.to_string();
                self.react(m == "PUT", mid, emoji)?;
                Ok((204, None))
            }
            ("POST", ["channels", id, "messages", mid, "threads"]) => {
                ok(self.start_thread(id, mid, body)?)
            }
            ("POST", ["interactions", iid, token, "callback"]) => {
                self.callback(iid, token, body, files)?;
                Ok((204, None))
            }
            (_, ["webhooks", app, token, rest @ ..]) if *app == APP_ID => {
                self.webhook(m, token, rest, body, files)
            }
            (_, ["webhooks", ..]) => Err(error(404, 10015, "Unknown Webhook")),
            ("PUT", ["applications", app, "commands"]) if *app == APP_ID => {
                ok(self.put_commands(body)?)
            }
            ("GET", ["applications", app, "commands"]) if *app == APP_ID => {
                ok(Value::Array(self.commands.clone()))
            }
            _ => Err(error(404, 0, "404: Not Found")),
        }
    }

    fn known(&self, id: &str) -> Result<Chan, Failure> {
        self.chan(id)
            .ok_or_else(|| error(404, 10003, "Unknown Channel"))
    }

    /// A message id of `chat` (404 otherwise).
    fn message_in(&self, chat: &str, mid: &str) -> Result<u64, Failure> {
        let found = self.find(mid).filter(|m| m.channel == chat);
        found
            .map(|m| m.id)
            .ok_or_else(|| error(404, 10008, "Unknown Message"))
    }

    /// Validate and post the bot's message; the REST answer.
    fn create_message(
        &mut self,
        chat: &str,
        body: &Value,
        files: Vec<(String, Vec<u8>)>,
        interaction: Option<&str>,
        ephemeral: bool,
    ) -> Result<Value, Failure> {
        let content = body["content"].as_str().unwrap_or_default().to_owned();
        check_content(&content)?;
        let components = body.get("components").cloned().unwrap_or(json!([]));
        check_components(&components)?;
        let has_embeds = body["embeds"].as_array().is_some_and(|e| !e.is_empty());
        let empty_rows = components.as_array().is_none_or(Vec::is_empty);
        if content.is_empty() && files.is_empty() && empty_rows && !has_embeds {
            return Err(error(400, 50006, "Cannot send an empty message"));
        }
        let reference = body["message_reference"]["message_id"]
            .as_str()
            .map(str::to_owned);
        if let Some(r) = &reference {
            let exists = self.find(r).is_some_and(|m| m.channel == chat);
            if !exists && body["message_reference"]["fail_if_not_exists"] != false {
                let (path, code) = ("message_reference", "MESSAGE_REFERENCE_UNKNOWN_MESSAGE");
                return Err(invalid(path, code, "Unknown message"));
            }
        }
        // `nonce` with `enforce_nonce`: the bot's message with the same nonce in the last
        // few minutes is answered instead of posting a second one.
        let nonce = match &body["nonce"] {
            Value::String(s) => Some(s.clone()),
            Value::Number(n) => Some(n.to_string()),
            _ => None,
        };
        if nonce.as_ref().is_some_and(|n| n.len() > 25) {
            return Err(invalid(
                "nonce",
                "BASE_TYPE_MAX_LENGTH",
                "Must be 25 or fewer in length.",
            ));
        }
        if body["enforce_nonce"] == true {
            let earlier = self.messages.iter().find(|m| {
                m.channel == chat
                    && m.nonce.is_some()
                    && m.nonce == nonce
                    && m.at.elapsed() < Duration::from_secs(300)
            });
            if let Some(earlier) = earlier {
                self.nonce_hits += 1;
                return Ok(model::message(self, earlier, false, false));
            }
        }
        let flags = body["flags"].as_u64().unwrap_or(0) | if ephemeral { 64 } else { 0 };
        let mut attachments = Vec::new();
        for (name, bytes) in &files {
            let id = self.next_id();
            let mime = mime_of(name);
            attachments.push(model::attachment(
                &self.base_url,
                id,
                name,
                mime,
                bytes.len(),
            ));
            let stored = (name.clone(), mime.to_owned(), bytes.clone());
            self.files.insert(id.to_string(), stored);
        }
        let msg = Msg {
            id: self.next_id(),
            channel: chat.to_owned(),
            guild: self.chan(chat).is_some_and(|c| c.in_guild()),
            author: BOT_ID.into(),
            content,
            mentions_bot: false,
            attachments,
            files,
            components,
            reference,
            allowed_mentions: body.get("allowed_mentions").cloned(),
            flags,
            history: Vec::new(),
            edited_ms: None,
            ephemeral,
            interaction: interaction.map(str::to_owned),
            nonce,
            at: Instant::now(),
        };
        Ok(self.store(msg))
    }

    /// Keep a message, tell the gateway (unless it is ephemeral); its REST form.
    fn store(&mut self, msg: Msg) -> Value {
        let answer = model::message(self, &msg, false, false);
        if !msg.ephemeral {
            let event = model::message(self, &msg, true, false);
            self.gw.dispatch("MESSAGE_CREATE", event);
        }
        self.messages.push(msg);
        answer
    }

    fn edit_message(&mut self, id: u64, body: &Value) -> Result<Value, Failure> {
        let found = self
            .find_mut(id)
            .ok_or_else(|| error(404, 10008, "Unknown Message"))?;
        if found.author != BOT_ID {
            return Err(error(
                403,
                50005,
                "Cannot edit a message authored by another user",
            ));
        }
        if let Some(content) = body.get("content") {
            check_content(content.as_str().unwrap_or_default())?;
        }
        if let Some(components) = body.get("components").filter(|c| !c.is_null()) {
            check_components(components)?;
        }
        let Some(m) = self.find_mut(id) else {
            return Err(error(404, 10008, "Unknown Message"));
        };
        if let Some(content) = body.get("content") {
            let new = content.as_str().unwrap_or_default().to_owned();
            let old = std::mem::replace(&mut m.content, new);
            if !m.loading() {
                m.history.push(old);
            }
        }
        if let Some(components) = body.get("components") {
            m.components = if components.is_null() {
                json!([])
            } else {
                components.clone()
            };
        }
        if let Some(mentions) = body.get("allowed_mentions") {
            m.allowed_mentions = Some(mentions.clone());
        }
        m.flags &= !128;
        m.edited_ms = Some(model::now_ms());
        let m = m.clone();
        if !m.ephemeral {
            let event = model::message(self, &m, true, false);
            self.gw.dispatch("MESSAGE_UPDATE", event);
        }
        Ok(model::message(self, &m, false, false))
    }

    /// `GET /channels/{id}/messages?after|before&limit`: newest first, as Discord answers.
    fn list(&self, chat: &str, query: &str) -> Result<Value, Failure> {
        self.known(chat)?;
        let param = |name: &str| {
            let pair = query
                .split('&')
                .find_map(|p| p.strip_prefix(&format!("{name}=")));
            pair.map(|v| v.parse::<u64>())
        };
        let limit = match param("limit") {
            None => 50,
            Some(Ok(n)) if (1..=100).contains(&n) => n as usize,
            Some(_) => {
                let message = "int value should be less than or equal to 100.";
                return Err(invalid("limit", "NUMBER_TYPE_MAX", message));
            }
        };
        let bad = |_| invalid("after", "NUMBER_TYPE_COERCE", "Value is not snowflake.");
        let (after, before) = (param("after").transpose().map_err(bad)?, param("before"));
        let before = before.transpose().map_err(bad)?;
        let mut found: Vec<&Msg> = self
            .messages
            .iter()
            .filter(|m| m.channel == chat && !m.ephemeral && !m.loading())
            .filter(|m| after.is_none_or(|a| m.id > a) && before.is_none_or(|b| m.id < b))
            .collect();
        found.sort_by_key(|m| m.id);
        if after.is_some() {
            found.truncate(limit);
        } else {
            found = found.split_off(found.len().saturating_sub(limit));
        }
        let newest_first = found
            .iter()
            .rev()
            .map(|m| model::message(self, m, false, false));
        Ok(Value::Array(newest_first.collect()))
    }

    /// `POST /channels/{id}/messages/{mid}/threads`: a public thread whose id is the message's.
    /// The bot's own reaction `emoji` (URL-encoded, as in the path) put on or taken off
    /// message `mid`.
    fn react(&mut self, add: bool, mid: String, emoji: &str) -> Result<(), Failure> {
        let decoded: Vec<u8> = form_urlencoded::parse(format!("e={emoji}").as_bytes())
            .next()
            .map(|(_, v)| v.into_owned().into_bytes())
            .unwrap_or_default();
        let emoji = String::from_utf8(decoded).unwrap_or_default();
        // A unicode emoji is short and not plain text; a custom one is `name:id`.
        if emoji.is_empty() || emoji.chars().count() > 8 || emoji.is_ascii() && !emoji.contains(':')
        {
            return Err(error(400, 10014, "Unknown Emoji"));
        }
        let mine = (mid.clone(), emoji.clone());
        let had = self.reactions.contains(&mine);
        if add && !had {
            self.reactions.push(mine);
        } else if !add {
            self.reactions.retain(|r| *r != mine);
        }
        if add != had {
            let sign = if add { '+' } else { '-' };
            self.reaction_log.push((mid, format!("{sign}{emoji}")));
        }
        Ok(())
    }

    fn start_thread(&mut self, chat: &str, mid: &str, body: &Value) -> Result<Value, Failure> {
        match self.known(chat)? {
            Chan::Text => {}
            _ => {
                return Err(error(
                    400,
                    50024,
                    "Cannot execute action on this channel type",
                ));
            }
        }
        let mid = self.message_in(chat, mid)?.to_string();
        if self.threads.contains_key(&mid) {
            let message = "A thread has already been created for this message";
            return Err(error(400, 160_004, message));
        }
        let name = body["name"].as_str().unwrap_or_default();
        if !(1..=100).contains(&name.chars().count()) {
            let message = "Must be between 1 and 100 in length.";
            return Err(invalid("name", "BASE_TYPE_BAD_LENGTH", message));
        }
        let archive = body["auto_archive_duration"].as_u64().unwrap_or(4320);
        if ![60, 1440, 4320, 10080].contains(&archive) {
            let message = "Value must be one of {60, 1440, 4320, 10080}.";
            return Err(invalid(
                "auto_archive_duration",
                "BASE_TYPE_CHOICES",
                message,
            ));
        }
        let thread = Chan::Thread {
            parent: chat.to_owned(),
            name: name.to_owned(),
            archive,
            created_ms: model::now_ms(),
        };
        let answer = model::channel(&mid, &thread);
        self.threads.insert(mid, thread);
        let mut event = answer.clone();
        event["newly_created"] = json!(true);
        self.gw.dispatch("THREAD_CREATE", event);
        Ok(answer)
    }

    /// `POST /interactions/{id}/{token}/callback`.
    fn callback(
        &mut self,
        iid: &str,
        token: &str,
        body: &Value,
        files: Vec<(String, Vec<u8>)>,
    ) -> Result<(), Failure> {
        let unknown = || error(404, 10062, "Unknown interaction");
        let found = self.interactions.get(iid).filter(|i| i.token == token);
        let i = found.ok_or_else(unknown)?;
        if !i.callbacks.is_empty() {
            return Err(error(
                400,
                40060,
                "Interaction has already been acknowledged.",
            ));
        }
        if i.created.elapsed() > self.options.interaction_window {
            return Err(unknown());
        }
        let (chat, pressed) = (i.channel.clone(), i.message);
        let data = body.get("data").cloned().unwrap_or(json!({}));
        let ephemeral = data["flags"].as_u64().is_some_and(|f| f & 64 != 0);
        let kind = body["type"].as_u64().unwrap_or(0);
        let original = match (kind, pressed) {
            (4, _) => {
                let answer = self.create_message(&chat, &data, files, Some(iid), ephemeral)?;
                answer["id"].as_str().and_then(|id| id.parse().ok())
            }
            (5, _) => {
                let id = self.next_id();
                let guild = self.chan(&chat).is_some_and(|c| c.in_guild());
                let flags = 128 | if ephemeral { 64 } else { 0 };
                self.messages.push(Msg {
                    id,
                    channel: chat,
                    guild,
                    author: BOT_ID.into(),
                    content: String::new(),
                    mentions_bot: false,
                    attachments: Vec::new(),
                    files: Vec::new(),
                    components: json!([]),
                    reference: None,
                    allowed_mentions: None,
                    flags,
                    history: Vec::new(),
                    edited_ms: None,
                    ephemeral,
                    interaction: Some(iid.to_owned()),
                    nonce: None,
                    at: Instant::now(),
                });
                Some(id)
            }
            (6, Some(message)) => Some(message),
            (7, Some(message)) => {
                self.edit_message(message, &data)?;
                Some(message)
            }
            (9, _) => None,
            _ => {
                let message = "Value must be one of {4, 5, 6, 7, 9} for this interaction.";
                return Err(invalid("type", "BASE_TYPE_CHOICES", message));
            }
        };
        if let Some(i) = self.interactions.get_mut(iid) {
            i.callbacks.push((kind as u8, data, Instant::now()));
            i.original = original.or(i.original);
        }
        Ok(())
    }

    /// `/webhooks/{app}/{token}…`: the interaction's original answer and follow-ups.
    fn webhook(
        &mut self,
        method: &str,
        token: &str,
        rest: &[&str],
        body: &Value,
        files: Vec<(String, Vec<u8>)>,
    ) -> Result<(u16, Option<Value>), Failure> {
        let found = self.interactions.iter().find(|(_, i)| i.token == token);
        let found = found.filter(|(_, i)| !i.callbacks.is_empty());
        let (iid, i) = found.ok_or_else(|| error(404, 10015, "Unknown Webhook"))?;
        let (iid, chat, original) = (iid.clone(), i.channel.clone(), i.original);
        let unknown = || error(404, 10008, "Unknown Message");
        let followup = |inner: &Inner, mid: &str| {
            let found = inner
                .find(mid)
                .filter(|m| m.interaction.as_deref() == Some(&iid));
            found.map(|m| m.id).ok_or_else(unknown)
        };
        let (kind, answer) = match (method, rest) {
            ("GET", ["messages", "@original"]) => {
                let m = original.and_then(|id| self.messages.iter().find(|m| m.id == id));
                return Ok((
                    200,
                    Some(model::message(self, m.ok_or_else(unknown)?, false, false)),
                ));
            }
            ("PATCH", ["messages", "@original"]) => {
                let answer = self.edit_message(original.ok_or_else(unknown)?, body)?;
                (ResponseKind::Original, answer)
            }
            ("PATCH", ["messages", mid]) => {
                let mid = followup(self, mid)?;
                (ResponseKind::Followup, self.edit_message(mid, body)?)
            }
            ("POST", []) => {
                let ephemeral = body["flags"].as_u64().is_some_and(|f| f & 64 != 0);
                let answer = self.create_message(&chat, body, files, Some(&iid), ephemeral)?;
                (ResponseKind::Followup, answer)
            }
            ("DELETE", ["messages", mid]) => {
                let mid = if *mid == "@original" {
                    original.ok_or_else(unknown)?
                } else {
                    followup(self, mid)?
                };
                self.messages.retain(|m| m.id != mid);
                return Ok((204, None));
            }
            _ => return Err(error(404, 0, "404: Not Found")),
        };
        let response = Response {
            kind,
            message_id: answer["id"].as_str().unwrap_or_default().to_owned(),
            content: body["content"].as_str().map(str::to_owned),
            flags: body["flags"].as_u64().unwrap_or(0),
            components: body.get("components").cloned(),
            at: Instant::now(),
        };
        if let Some(i) = self.interactions.get_mut(&iid) {
            i.responses.push(response);
        }
        Ok((200, Some(answer)))
    }

    /// `PUT /applications/{app}/commands`: overwrite the global commands.
    fn put_commands(&mut self, body: &Value) -> Result<Value, Failure> {
        let Some(list) = body.as_array() else {
            let message = "Only iterables may be used in a ListType";
            return Err(invalid("_root", "MODEL_TYPE_CONVERT", message));
        };
        let mut stored = Vec::new();
        for (n, command) in list.iter().enumerate() {
            let kind = command["type"].as_u64().unwrap_or(1);
            check_command(&format!("{n}"), command, kind == 1)?;
            let options = command["options"].as_array().into_iter().flatten();
            for (o, option) in options.enumerate() {
                check_command(&format!("{n}.options.{o}"), option, true)?;
            }
            let name = command["name"].as_str().unwrap_or_default();
            if stored.iter().any(|c: &Value| c["name"] == name) {
                let message = "Application command names must be unique";
                return Err(invalid(
                    &format!("{n}.name"),
                    "APPLICATION_COMMANDS_DUPLICATE_NAME",
                    message,
                ));
            }
            let known = self.commands.iter().find(|c| c["name"] == name);
            let id = known.and_then(|c| c["id"].as_str().map(str::to_owned));
            let id = id.unwrap_or_else(|| self.next_id().to_string());
            let mut c = command.clone();
            for (key, value) in [
                ("id", json!(id)),
                ("application_id", json!(APP_ID)),
                ("version", json!(self.next_id().to_string())),
                ("type", json!(kind)),
                ("default_member_permissions", Value::Null),
                ("nsfw", json!(false)),
                ("integration_types", json!([0])),
                ("contexts", Value::Null),
            ] {
                if c.get(key).is_none_or(Value::is_null) {
                    c[key] = value;
                }
            }
            c["description"] = json!(command["description"].as_str().unwrap_or_default());
            c["guild_id"] = Value::Null;
            stored.push(c);
        }
        self.commands = stored.clone();
        Ok(Value::Array(stored))
    }
}
