//! A fake Telegram Bot API: `/bot<token>/<method>` with case-insensitive method names, a full
//! `getMe`, long-polling `getUpdates` that holds the request until an update arrives, and
//! `sendMessage`/`editMessageText`/`sendChatAction`/`answerCallbackQuery`. Every call is
//! recorded; faults (429, markup rejection) can be scripted.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::{Path, State};
use axum::routing::post;
use axum::{Json, Router};
use serde_json::{Value, json};
use tokio::sync::Notify;

mod files;

use files::download;

pub const BOT_ID: i64 = 999_000;
pub const BOT_USERNAME: &str = "hermes_test_bot";

/// One recorded API call.
#[derive(Debug, Clone)]
pub struct Call {
    /// Lower-cased method name.
    pub method: String,
    pub params: Value,
    pub at: Instant,
}

/// A scripted answer to the next call of a method.
#[derive(Debug, Clone)]
pub enum Fault {
    /// HTTP 429 with `parameters.retry_after`.
    RetryAfter(u64),
    /// HTTP 400 "can't parse entities" when the call uses `parse_mode`.
    RejectMarkup,
    /// HTTP 500 Internal Server Error.
    ServerError,
    /// HTTP 401 Unauthorized (a revoked or wrong token).
    Unauthorized,
    /// HTTP 400 for a photo Telegram cannot take as a photo (too wide, too tall).
    PhotoInvalid,
}

#[derive(Default)]
struct Inner {
    calls: Vec<Call>,
    /// The webhook set with `setWebhook` and not deleted since: `getUpdates` is refused
    /// while there is one, as Telegram does.
    webhook: Option<String>,
    /// Updates not yet confirmed by an offset.
    queue: Vec<Value>,
    /// Updates served regardless of the offset (to simulate redelivery).
    forced: VecDeque<Value>,
    /// Update ids served, in order.
    served: Vec<i64>,
    next_update_id: i64,
    next_message_id: i64,
    faults: Vec<(String, Fault)>,
    /// Receivers of every call as it is recorded (see [`FakeTelegram::subscribe`]).
    subscribers: Vec<tokio::sync::mpsc::UnboundedSender<Call>>,
    /// When each `getUpdates` request arrived (calls are recorded when they are answered).
    poll_arrivals: Vec<Instant>,
    /// Files people sent, by `file_id`: served by `getFile` and `/file/bot<token>/<path>`.
    files: std::collections::HashMap<String, Vec<u8>>,
    /// How many times each file was downloaded.
    downloads: std::collections::HashMap<String, usize>,
    /// Files the bot uploaded, in order.
    sent_files: Vec<SentFile>,
    /// `getUpdates` hangs without answering (a platform alive but deaf).
    stalled: bool,
    /// It acts as a local Bot API server: `getFile` serves files past 20 MB.
    local_server: bool,
    /// ... started with `--local`: `getFile` names an absolute path under this directory,
    /// where the file is written, and nothing is served over HTTP.
    local_files: Option<std::path::PathBuf>,
}

/// The public Bot API's `getFile` limit.
const PUBLIC_DOWNLOAD_LIMIT: usize = 20 * 1024 * 1024;

/// A file the bot sent (`sendPhoto`, `sendDocument`, `sendVoice`, `sendAudio`).
#[derive(Debug, Clone)]
pub struct SentFile {
    /// The method, lower-case (`sendphoto`, …).
    pub method: String,
    pub chat_id: i64,
    pub name: String,
    pub bytes: Vec<u8>,
    pub caption: Option<String>,
}

#[derive(Clone)]
pub struct FakeTelegram {
    /// The bot this fake is (`getMe`); [`BOT_ID`] unless started as another.
    pub bot_id: i64,
    inner: Arc<Mutex<Inner>>,
    news: Arc<Notify>,
    pub addr: SocketAddr,
    /// Connection resets armed on its HTTP server.
    resets: crate::reset::Resets,
}

impl FakeTelegram {
    pub async fn start() -> FakeTelegram {
        FakeTelegram::start_as(BOT_ID).await
    }

    /// A fake for another bot (another token): its update ids count from the same start.
    pub async fn start_as(bot_id: i64) -> FakeTelegram {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let fake = FakeTelegram {
            bot_id,
            inner: Arc::new(Mutex::new(Inner {
                next_update_id: 100,
                next_message_id: 5000,
                ..Default::default()
            })),
            news: Arc::new(Notify::new()),
            addr,
            resets: Default::default(),
        };
        let app = Router::new()
            .route("/{bot}/{method}", post(handle))
            .route("/file/{bot}/{*path}", axum::routing::get(download))
            .with_state(fake.clone());
        tokio::spawn(crate::reset::serve(listener, app, fake.resets.clone()));
        fake
    }

    /// `base_url` in the python-telegram-bot form the config uses.
    pub fn base_url(&self) -> String {
        format!("http://{}/bot", self.addr)
    }

    /// A private message from `user_id`; returns the update id.
    pub fn dm(&self, user_id: i64, text: &str) -> i64 {
        let chat =
            json!({"id": user_id, "type": "private", "first_name": format!("User{user_id}")});
        self.message(chat, user_id, text, json!([]), None)
    }

    /// A group message; `mention` prefixes the bot's @handle with a mention entity.
    pub fn group(&self, chat_id: i64, user_id: i64, text: &str, mention: bool) -> i64 {
        let chat = json!({"id": chat_id, "type": "supergroup", "title": "Test group"});
        if mention {
            let handle = format!("@{BOT_USERNAME}");
            let full = format!("{handle} {text}");
            let len = handle.encode_utf16().count();
            self.message(
                chat,
                user_id,
                &full,
                json!([{"type": "mention", "offset": 0, "length": len}]),
                None,
            )
        } else {
            self.message(chat, user_id, text, json!([]), None)
        }
    }

    /// A private message carrying a file: `media` is the message's media part (e.g.
    /// `json!({"photo": [...]})`), built by [`FakeTelegram::photo`] and friends.
    pub fn dm_with(&self, user_id: i64, caption: Option<&str>, media: Value) -> i64 {
        let chat =
            json!({"id": user_id, "type": "private", "first_name": format!("User{user_id}")});
        let mut inner = self.inner.lock().unwrap();
        inner.next_update_id += 1;
        inner.next_message_id += 1;
        let id = inner.next_update_id;
        let mut message = json!({
            "message_id": inner.next_message_id, "date": 1_700_000_000, "chat": chat,
            "from": {"id": user_id, "is_bot": false, "first_name": format!("User{user_id}"), "username": format!("user{user_id}")}
        });
        if let Some(caption) = caption {
            message["caption"] = json!(caption);
        }
        for (key, value) in media.as_object().cloned().unwrap_or_default() {
            message[key] = value;
        }
        inner
            .queue
            .push(json!({"update_id": id, "message": message}));
        drop(inner);
        self.news.notify_waiters();
        id
    }

    /// A group message replying to one of the bot's messages.
    pub fn group_reply_to_bot(
        &self,
        chat_id: i64,
        user_id: i64,
        text: &str,
        bot_message_id: i64,
    ) -> i64 {
        let chat = json!({"id": chat_id, "type": "supergroup", "title": "Test group"});
        let replied = json!({"message_id": bot_message_id, "date": 0, "chat": chat, "text": "earlier",
                             "from": {"id": self.bot_id, "is_bot": true, "first_name": "Hermes", "username": BOT_USERNAME}});
        self.message(chat, user_id, text, json!([]), Some(replied))
    }

    fn message(
        &self,
        chat: Value,
        user_id: i64,
        text: &str,
        entities: Value,
        reply: Option<Value>,
    ) -> i64 {
        let mut inner = self.inner.lock().unwrap();
        inner.next_update_id += 1;
        inner.next_message_id += 1;
        let id = inner.next_update_id;
        let mut message = json!({
            "message_id": inner.next_message_id, "date": 1_700_000_000, "chat": chat, "text": text,
            "entities": entities,
            "from": {"id": user_id, "is_bot": false, "first_name": format!("User{user_id}"), "username": format!("user{user_id}")}
        });
        if let Some(reply) = reply {
            message["reply_to_message"] = reply;
        }
        inner
            .queue
            .push(json!({"update_id": id, "message": message}));
        drop(inner);
        self.news.notify_waiters();
        id
    }

    /// A webhook another program (or an earlier run in webhook mode) left set.
    pub fn leave_webhook(&self, url: &str) {
        self.inner.lock().unwrap().webhook = Some(url.to_owned());
    }

    /// The updates waiting to be fetched, taken out of the queue: what Telegram posts to a
    /// webhook instead, for a test to post as Telegram would.
    pub fn take_queued(&self) -> Vec<Value> {
        std::mem::take(&mut self.inner.lock().unwrap().queue)
    }

    /// `user_id` presses a button with `data` under the bot's message `message_id` in `chat_id`.
    pub fn press(&self, chat_id: i64, user_id: i64, message_id: i64, data: &str) -> i64 {
        let mut inner = self.inner.lock().unwrap();
        inner.next_update_id += 1;
        let id = inner.next_update_id;
        let chat = if chat_id > 0 {
            json!({"id": chat_id, "type": "private", "first_name": format!("User{chat_id}")})
        } else {
            json!({"id": chat_id, "type": "supergroup", "title": "Test group"})
        };
        inner.queue.push(json!({"update_id": id, "callback_query": {
            "id": format!("cbq{id}"), "chat_instance": "ci", "data": data,
            "from": {"id": user_id, "is_bot": false, "first_name": format!("User{user_id}")},
            "message": {"message_id": message_id, "date": 0, "chat": chat, "text": "prompt",
                        "from": {"id": self.bot_id, "is_bot": true, "first_name": "Hermes", "username": BOT_USERNAME}}
        }}));
        drop(inner);
        self.news.notify_waiters();
        id
    }

    /// Successful `sendMessage` calls to `chat_id` that carried buttons: (message id, params).
    pub fn prompts(&self, chat_id: i64) -> Vec<(i64, Value)> {
        self.calls("sendMessage")
            .into_iter()
            .filter(|c| {
                c.params["chat_id"].as_i64() == Some(chat_id)
                    && c.params["_ok"] == json!(true)
                    && c.params.get("reply_markup").is_some()
            })
            .map(|c| (c.params["_message_id"].as_i64().unwrap_or(0), c.params))
            .collect()
    }

    /// The `callback_data` of the button labelled `label` in a prompt.
    pub fn button_data(prompt: &Value, label: &str) -> String {
        prompt["reply_markup"]["inline_keyboard"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|row| row.as_array().cloned().unwrap_or_default())
            .find(|b| b["text"] == label)
            .and_then(|b| b["callback_data"].as_str().map(str::to_owned))
            .unwrap_or_else(|| panic!("no button {label:?} in {prompt}"))
    }

    /// Serve an already delivered update again, ignoring the bot's offset.
    pub fn redeliver(&self, update_id: i64) {
        let mut inner = self.inner.lock().unwrap();
        let update = inner
            .served_update(update_id)
            .expect("update was served before");
        inner.forced.push_back(update);
        drop(inner);
        self.news.notify_waiters();
    }

    /// Script a fault for the next call of `method` (lower-case).
    pub fn fail_next(&self, method: &str, fault: Fault) {
        self.inner
            .lock()
            .unwrap()
            .faults
            .push((method.to_ascii_lowercase(), fault));
    }

    /// Forget every scripted fault not yet used.
    /// Make `getUpdates` hang without answering (`true`) or answer again (`false`).
    pub fn stall_polls(&self, stalled: bool) {
        self.inner.lock().unwrap().stalled = stalled;
    }

    pub fn clear_faults(&self) {
        self.inner.lock().unwrap().faults.clear();
    }

    pub fn calls(&self, method: &str) -> Vec<Call> {
        let method = method.to_ascii_lowercase();
        self.inner
            .lock()
            .unwrap()
            .calls
            .iter()
            .filter(|c| c.method == method)
            .cloned()
            .collect()
    }

    /// Texts of every successful `sendMessage` to `chat_id`.
    pub fn sent_texts(&self, chat_id: i64) -> Vec<String> {
        self.inner
            .lock()
            .unwrap()
            .calls
            .iter()
            .filter(|c| {
                c.method == "sendmessage"
                    && c.params["chat_id"].as_i64() == Some(chat_id)
                    && c.params["_ok"] == json!(true)
            })
            .map(|c| c.params["text"].as_str().unwrap_or_default().to_owned())
            .collect()
    }

    /// Every call from now on, as it is recorded (for benchmarks that must not rescan
    /// [`FakeTelegram::calls`]). A `getUpdates` call is recorded when it is answered.
    pub fn subscribe(&self) -> tokio::sync::mpsc::UnboundedReceiver<Call> {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        self.inner.lock().unwrap().subscribers.push(tx);
        rx
    }

    /// When each `getUpdates` request arrived, in order.
    pub fn poll_arrivals(&self) -> Vec<Instant> {
        self.inner.lock().unwrap().poll_arrivals.clone()
    }

    /// How many times an update id was served.
    pub fn times_served(&self, update_id: i64) -> usize {
        self.inner
            .lock()
            .unwrap()
            .served
            .iter()
            .filter(|&&id| id == update_id)
            .count()
    }
}

impl Inner {
    /// Hand the last recorded call to the subscribers that are still listening.
    fn publish_last(&mut self) {
        if let Some(call) = self.calls.last() {
            self.subscribers.retain(|s| s.send(call.clone()).is_ok());
        }
    }

    fn served_update(&self, update_id: i64) -> Option<Value> {
        self.calls
            .iter()
            .filter(|c| c.method == "getupdates")
            .flat_map(|c| c.params["_served"].as_array().cloned().unwrap_or_default())
            .find(|u| u["update_id"].as_i64() == Some(update_id))
    }
}

fn ok(result: Value) -> Json<Value> {
    Json(json!({"ok": true, "result": result}))
}

async fn handle(
    State(fake): State<FakeTelegram>,
    Path((bot, method)): Path<(String, String)>,
    headers: axum::http::HeaderMap,
    body: axum::body::Bytes,
) -> (axum::http::StatusCode, Json<Value>) {
    use axum::http::StatusCode;
    if !bot.starts_with("bot") {
        return (
            StatusCode::NOT_FOUND,
            Json(json!({"ok": false, "error_code": 404, "description": "Not Found"})),
        );
    }
    let method = method.to_ascii_lowercase();
    let content_type = headers
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let mut params: Value = serde_json::from_slice(&body).unwrap_or(json!({}));
    // Uploads come as a form: its fields become the params, its file is kept.
    let mut upload = None;
    for part in crate::multipart::parse(&content_type, &body) {
        match &part.filename {
            Some(name) => {
                params["_file_field"] = json!(part.name);
                upload = Some(SentFile {
                    method: method.to_ascii_lowercase(),
                    name: name.clone(),
                    bytes: part.bytes.clone(),
                    chat_id: 0,
                    caption: None,
                });
            }
            None => params[part.name.as_str()] = json!(part.text()),
        }
    }
    match method.as_str() {
        "setwebhook" => {
            fake.inner.lock().unwrap().webhook = params["url"].as_str().map(str::to_owned)
        }
        "deletewebhook" => fake.inner.lock().unwrap().webhook = None,
        "getupdates" if fake.inner.lock().unwrap().webhook.is_some() => {
            fake.inner.lock().unwrap().calls.push(Call {
                method,
                params,
                at: Instant::now(),
            });
            return (
                StatusCode::CONFLICT,
                Json(json!({"ok": false, "error_code": 409,
                    "description": "Conflict: can't use getUpdates method while webhook is active; use deleteWebhook to delete the webhook first"})),
            );
        }
        "getupdates" => return (StatusCode::OK, get_updates(&fake, params).await),
        _ => {}
    }
    let fault = {
        let mut inner = fake.inner.lock().unwrap();
        let pos = inner.faults.iter().position(|(m, _)| *m == method);
        pos.map(|p| inner.faults.remove(p).1)
    };
    let answer = match (fault, &params.get("parse_mode")) {
        (Some(Fault::RetryAfter(secs)), _) => Some((
            StatusCode::TOO_MANY_REQUESTS,
            json!({"ok": false, "error_code": 429, "description": format!("Too Many Requests: retry after {secs}"), "parameters": {"retry_after": secs}}),
        )),
        (Some(Fault::Unauthorized), _) => Some((
            StatusCode::UNAUTHORIZED,
            json!({"ok": false, "error_code": 401, "description": "Unauthorized"}),
        )),
        (Some(Fault::ServerError), _) => Some((
            StatusCode::INTERNAL_SERVER_ERROR,
            json!({"ok": false, "error_code": 500, "description": "Internal Server Error"}),
        )),
        (Some(Fault::PhotoInvalid), _) => Some((
            StatusCode::BAD_REQUEST,
            json!({"ok": false, "error_code": 400, "description": "Bad Request: PHOTO_INVALID_DIMENSIONS"}),
        )),
        (Some(Fault::RejectMarkup), Some(_)) => Some((
            StatusCode::BAD_REQUEST,
            json!({"ok": false, "error_code": 400, "description": "Bad Request: can't parse entities: Unsupported start tag \"x\" at byte offset 0"}),
        )),
        _ => None,
    };
    params["_ok"] = json!(answer.is_none());
    let mut inner = fake.inner.lock().unwrap();
    if let (Some(mut file), None) = (upload, &answer) {
        file.chat_id = params["chat_id"]
            .as_str()
            .and_then(|c| c.parse().ok())
            .or_else(|| params["chat_id"].as_i64())
            .unwrap_or(0);
        file.caption = params["caption"].as_str().map(str::to_owned);
        inner.sent_files.push(file);
    }
    if answer.is_none() && method == "sendmessage" {
        params["_message_id"] = json!(inner.next_message_id + 1);
    }
    inner.calls.push(Call {
        method: method.clone(),
        params: params.clone(),
        at: Instant::now(),
    });
    inner.publish_last();
    if let Some((status, body)) = answer {
        return (status, Json(body));
    }
    let result = match method.as_str() {
        "getme" => {
            json!({"id": fake.bot_id, "is_bot": true, "first_name": "Hermes", "username": BOT_USERNAME,
                          "can_join_groups": true, "can_read_all_group_messages": false,
                          "supports_inline_queries": false, "can_connect_to_business": false, "has_main_web_app": false})
        }
        "getfile" => {
            let id = params["file_id"].as_str().unwrap_or_default().to_owned();
            match inner.files.get(&id) {
                Some(bytes) if bytes.len() > PUBLIC_DOWNLOAD_LIMIT && !inner.local_server => {
                    return (
                        StatusCode::BAD_REQUEST,
                        Json(
                            json!({"ok": false, "error_code": 400, "description": "Bad Request: file is too big"}),
                        ),
                    );
                }
                Some(bytes) => {
                    let path = match &inner.local_files {
                        Some(dir) => {
                            let path = dir.join("documents").join(&id);
                            std::fs::create_dir_all(dir.join("documents")).unwrap();
                            std::fs::write(&path, bytes).unwrap();
                            path.display().to_string()
                        }
                        None => format!("documents/{id}"),
                    };
                    json!({"file_id": id, "file_unique_id": format!("u-{id}"),
                           "file_size": bytes.len(), "file_path": path})
                }
                None => {
                    return (
                        StatusCode::BAD_REQUEST,
                        Json(
                            json!({"ok": false, "error_code": 400, "description": "Bad Request: invalid file_id"}),
                        ),
                    );
                }
            }
        }
        "getwebhookinfo" => {
            json!({"url": "", "has_custom_certificate": false, "pending_update_count": 0})
        }
        "sendphoto" | "senddocument" | "sendvoice" | "sendaudio" => {
            inner.next_message_id += 1;
            let chat_id = params["chat_id"]
                .as_str()
                .and_then(|c| c.parse::<i64>().ok())
                .unwrap_or(0);
            json!({"message_id": inner.next_message_id, "date": 1_700_000_000,
                   "chat": {"id": chat_id, "type": "private", "first_name": "Someone"},
                   "document": {"file_id": "sent", "file_unique_id": "sent"},
                   "from": {"id": fake.bot_id, "is_bot": true, "first_name": "Hermes", "username": BOT_USERNAME}})
        }
        "sendmessage" | "editmessagetext" => {
            inner.next_message_id += 1;
            let id = if method == "sendmessage" {
                inner.next_message_id
            } else {
                params["message_id"].as_i64().unwrap_or(0)
            };
            let chat_id = params["chat_id"].as_i64().unwrap_or(0);
            let chat = if chat_id > 0 {
                json!({"id": chat_id, "type": "private", "first_name": "Someone"})
            } else {
                json!({"id": chat_id, "type": "supergroup", "title": "Test group"})
            };
            json!({"message_id": id, "date": 1_700_000_000, "chat": chat, "text": params["text"],
                   "from": {"id": fake.bot_id, "is_bot": true, "first_name": "Hermes", "username": BOT_USERNAME}})
        }
        _ => json!(true),
    };
    (StatusCode::OK, ok(result))
}

async fn get_updates(fake: &FakeTelegram, params: Value) -> Json<Value> {
    fake.inner
        .lock()
        .unwrap()
        .poll_arrivals
        .push(Instant::now());
    // A stalled poll hangs (at most two minutes, so no test waits forever).
    let stall_until = tokio::time::Instant::now() + Duration::from_secs(120);
    while fake.inner.lock().unwrap().stalled && tokio::time::Instant::now() < stall_until {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let offset = params["offset"].as_i64().unwrap_or(0);
    let timeout = Duration::from_secs(params["timeout"].as_u64().unwrap_or(0).min(30));
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let notified = fake.news.notified();
        {
            let mut inner = fake.inner.lock().unwrap();
            inner
                .queue
                .retain(|u| u["update_id"].as_i64().unwrap_or(0) >= offset);
            let mut batch: Vec<Value> = inner.forced.drain(..).collect();
            batch.extend(inner.queue.iter().cloned());
            if !batch.is_empty() || tokio::time::Instant::now() >= deadline {
                let ids: Vec<i64> = batch
                    .iter()
                    .filter_map(|u| u["update_id"].as_i64())
                    .collect();
                inner.served.extend(ids);
                let mut recorded = params.clone();
                recorded["_served"] = Value::Array(batch.clone());
                inner.calls.push(Call {
                    method: "getupdates".into(),
                    params: recorded,
                    at: Instant::now(),
                });
                inner.publish_last();
                return ok(Value::Array(batch));
            }
        }
        if tokio::time::timeout_at(deadline, notified).await.is_err() {
            continue;
        }
    }
}

/// The text Telegram shows for an HTML message: tags removed, entities decoded.
pub fn visible(html: &str) -> String {
    let mut out = String::new();
    let mut in_tag = false;
    for c in html.chars() {
        match c {
            '<' => in_tag = true,
            '>' if in_tag => in_tag = false,
            _ if !in_tag => out.push(c),
            _ => {}
        }
    }
    out.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&amp;", "&")
}

impl FakeTelegram {
    fn calls_in(&self, method: &str, chat: &str) -> Vec<Call> {
        let chat: i64 = chat.parse().unwrap_or(0);
        self.calls(method)
            .into_iter()
            .filter(|c| {
                c.params["chat_id"].as_i64() == Some(chat) && c.params["_ok"] == json!(true)
            })
            .collect()
    }
}

impl crate::conformance::PlatformFake for FakeTelegram {
    fn platform_yaml(&self) -> String {
        format!(
            "  telegram:\n    enabled: true\n    extra:\n      base_url: {}\n      poll_timeout: 2\n",
            self.base_url()
        )
    }

    fn env(&self) -> Vec<String> {
        vec!["TELEGRAM_BOT_TOKEN=123456:TEST-TOKEN".into()]
    }

    fn allowlist_var(&self) -> &'static str {
        "TELEGRAM_ALLOWED_USERS"
    }

    fn allow_all_var(&self) -> &'static str {
        "TELEGRAM_ALLOW_ALL_USERS"
    }

    fn max_len(&self) -> usize {
        4096
    }

    /// Telegram counts UTF-16 code units of the text after entity parsing.
    fn measure(&self, shown: &str) -> usize {
        shown.encode_utf16().count()
    }

    fn person(&self, n: u32) -> String {
        match n {
            1 => "4242".to_owned(),
            2 => "5151".to_owned(),
            3 => "666".to_owned(),
            n => (10_000 + n).to_string(),
        }
    }

    fn dm_chat(&self, person: &str) -> String {
        person.to_owned()
    }

    fn group_chat(&self) -> String {
        "-100500".into()
    }

    fn write(&self, chat: &str, person: &str, text: &str, addressed: bool) {
        let user: i64 = person.parse().expect("a Telegram user id");
        if chat == person {
            self.dm(user, text);
        } else {
            self.group(chat.parse().expect("a chat id"), user, text, addressed);
        }
    }

    /// Each message as it reads now: its last edit's text, else its own.
    fn shown(&self, chat: &str) -> Vec<String> {
        let edits = self.calls_in("editMessageText", chat);
        self.calls_in("sendMessage", chat)
            .iter()
            .map(|c| {
                let id = &c.params["_message_id"];
                let last_edit = edits.iter().rev().find(|e| &e.params["message_id"] == id);
                let text = last_edit.unwrap_or(c).params["text"].as_str();
                visible(text.unwrap_or_default())
            })
            .collect()
    }

    fn sent_at(&self, chat: &str) -> Vec<Instant> {
        self.calls_in("sendMessage", chat)
            .iter()
            .map(|c| c.at)
            .collect()
    }

    fn prompts(&self, chat: &str) -> Vec<crate::conformance::ShownPrompt> {
        self.prompts(chat.parse().unwrap_or(0))
            .into_iter()
            .map(|(id, params)| crate::conformance::ShownPrompt {
                message_id: id.to_string(),
                text: visible(params["text"].as_str().unwrap_or_default()),
                choices: params["reply_markup"]["inline_keyboard"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .flat_map(|row| row.as_array().cloned().unwrap_or_default())
                    .map(|b| {
                        (
                            b["text"].as_str().unwrap_or_default().to_owned(),
                            b["callback_data"].as_str().unwrap_or_default().to_owned(),
                        )
                    })
                    .collect(),
            })
            .collect()
    }

    fn press(
        &self,
        chat: &str,
        person: &str,
        prompt: &crate::conformance::ShownPrompt,
        label: &str,
    ) -> String {
        let data = &prompt
            .choices
            .iter()
            .find(|(l, _)| l == label)
            .unwrap_or_else(|| panic!("no choice {label:?} in {prompt:?}"))
            .1;
        let update = self.press(
            chat.parse().expect("a chat id"),
            person.parse().expect("a user id"),
            prompt.message_id.parse().expect("a message id"),
            data,
        );
        format!("cbq{update}")
    }

    fn acknowledged(&self, press_id: &str) -> Option<Instant> {
        self.calls("answerCallbackQuery")
            .into_iter()
            .find(|c| c.params["callback_query_id"] == press_id && c.params["_ok"] == json!(true))
            .map(|c| c.at)
    }

    fn chat_calls(&self, chat: &str) -> Vec<Instant> {
        let inner = self.inner.lock().unwrap();
        let about = |c: &&Call| match &c.params["chat_id"] {
            Value::String(id) => id == chat,
            Value::Number(id) => id.to_string() == chat,
            _ => false,
        };
        inner.calls.iter().filter(about).map(|c| c.at).collect()
    }

    /// About one message a second in a chat, short bursts allowed (what the daemon
    /// declares; Telegram does not publish exact figures).
    fn chat_budget(&self) -> (f64, u32) {
        (1.0, 3)
    }

    fn fail_next_send(&self, _status: u16) {
        self.fail_next("sendMessage", Fault::ServerError);
    }

    fn rate_limit_next_send(&self, seconds: u64) {
        self.fail_next("sendMessage", Fault::RetryAfter(seconds));
    }

    fn resets(&self) -> &crate::reset::Resets {
        &self.resets
    }

    fn reset_next_send(&self, when: crate::reset::When) {
        // teloxide writes the method as `SendMessage`; Telegram ignores the case.
        self.resets.arm(1, when, |_, path, _| {
            path.to_ascii_lowercase().ends_with("/sendmessage")
        });
    }

    fn working(&self, chat: &str) -> Vec<(Instant, crate::conformance::WorkingEvent)> {
        self.calls_in("sendChatAction", chat)
            .iter()
            .map(|c| (c.at, crate::conformance::WorkingEvent::Shown))
            .collect()
    }
}
