//! A fake page of the web chat: what a browser's script does, spoken over HTTP to the
//! daemon's real listener. It logs in with the home's token (written by the fake before
//! the daemon starts), keeps the event stream open (reconnecting with `Last-Event-ID`, as
//! the page does), and posts the person's messages and presses in order, sending each again
//! with the same id until the daemon answers 200.
//!
//! The web chat has one person (the token's holder) and no groups; its "platform trouble"
//! is the page going away: a refused send is the page closed for a moment (the reply waits
//! in the outbox and arrives when it is back), a connection reset is the stream cut as a
//! message reaches it (the page gets it again on reconnecting).

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::sync::{Notify, mpsc};

use crate::conformance::{PlatformFake, ShownPrompt, WorkingEvent};
use crate::reset::{Resets, When};

/// The token the fake writes into the home (43 characters of base64url, as the daemon's).
pub const TOKEN: &str = "dGVzdC10b2tlbi1mb3ItdGhlLXdlYi1jaGF0LWZha2U";

/// One message of the bot, as the page shows it.
#[derive(Debug, Clone)]
pub struct PageMessage {
    pub id: String,
    pub markdown: String,
    /// The choices it came with, (label, id).
    pub offered: Vec<(String, String)>,
    /// A file's name and address (`/api/files/…`), for a file.
    pub file: Option<(String, String)>,
    pub at: Instant,
}

#[derive(Default)]
struct Page {
    messages: HashMap<String, Vec<PageMessage>>,
    calls: HashMap<String, Vec<Instant>>,
    working: HashMap<String, Vec<(Instant, WorkingEvent)>>,
    notices: HashMap<String, Vec<String>>,
    acked: HashMap<String, Instant>,
    last_id: Option<String>,
    /// Connections of the event stream made so far.
    connections: usize,
    /// The event stream is open now.
    streaming: bool,
    /// The page is closed until then.
    away_until: Option<Instant>,
    /// The stream is cut when the next message reaches it.
    cut_next_message: bool,
}

enum Post {
    Send {
        chat: String,
        id: String,
        text: String,
    },
    Press {
        chat: String,
        id: String,
        message_id: String,
        choice: String,
    },
}

/// A fake page; its tasks end when it is dropped.
pub struct FakeWebPage {
    port: u16,
    token: String,
    page: Arc<Mutex<Page>>,
    kick: Arc<Notify>,
    posts: mpsc::UnboundedSender<Post>,
    resets: Resets,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Drop for FakeWebPage {
    fn drop(&mut self) {
        self.tasks.iter().for_each(|t| t.abort());
    }
}

/// A logged-in client of the daemon's web chat.
#[derive(Clone)]
pub struct Client {
    http: reqwest::Client,
    base: String,
    cookie: String,
    session: String,
}

impl Client {
    /// Log in with `token`; `None` while the daemon does not answer or refuses.
    pub async fn login(base: &str, token: &str) -> Option<Client> {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(30))
            .build()
            .ok()?;
        let response = http
            .post(format!("{base}/api/login"))
            .header("origin", base)
            .json(&json!({"token": token}))
            .send()
            .await
            .ok()?;
        if !response.status().is_success() {
            return None;
        }
        let cookie = response
            .headers()
            .get("set-cookie")?
            .to_str()
            .ok()?
            .split(';')
            .next()?
            .to_owned();
        let session = response.json::<Value>().await.ok()?["session"]
            .as_str()?
            .to_owned();
        Some(Client {
            http,
            base: base.to_owned(),
            cookie,
            session,
        })
    }

    /// A request to `path` as the page makes it: the cookie and the API header, and for a
    /// change the page's Origin.
    fn request(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        let changes = method != reqwest::Method::GET;
        let request = self
            .http
            .request(method, format!("{}{path}", self.base))
            .header("cookie", &self.cookie)
            .header("x-hermes-session", &self.session);
        if changes {
            request.header("origin", &self.base)
        } else {
            request
        }
    }

    /// The status (0: no answer) and the JSON answer of `request`.
    async fn answer(request: reqwest::RequestBuilder) -> (u16, Value) {
        match request.send().await {
            Ok(response) => {
                let status = response.status().as_u16();
                (status, response.json().await.unwrap_or(Value::Null))
            }
            Err(_) => (0, Value::Null),
        }
    }

    /// GET `path` as the page does: the status (0: no answer) and the JSON answer.
    pub async fn get_json(&self, path: &str) -> (u16, Value) {
        Self::answer(self.request(reqwest::Method::GET, path)).await
    }

    /// POST `body` to `path`: the status (0: no answer) and the JSON answer.
    pub async fn post_json(&self, path: &str, body: &Value) -> (u16, Value) {
        Self::answer(self.request(reqwest::Method::POST, path).json(body)).await
    }

    /// POST `body` to `path` as the page does; the status (0: no answer).
    pub async fn post(&self, path: &str, body: &Value) -> u16 {
        self.post_json(path, body).await.0
    }

    /// Upload `bytes` as the page does (a file chosen in `chat`); the status.
    pub async fn upload(
        &self,
        chat: &str,
        id: &str,
        name: &str,
        mime: &str,
        bytes: Vec<u8>,
    ) -> u16 {
        let request = self
            .request(reqwest::Method::POST, "/api/upload")
            .query(&[("chat", chat), ("id", id), ("name", name)])
            .header("content-type", mime)
            .body(bytes);
        Self::answer(request).await.0
    }

    /// GET `path` with the cookie only (as an `<img>` or a download link does): the status,
    /// the content type and disposition, and the bytes.
    pub async fn fetch_file(&self, path: &str) -> (u16, String, String, Vec<u8>) {
        let Ok(response) = self
            .http
            .get(format!("{}{path}", self.base))
            .header("cookie", &self.cookie)
            .send()
            .await
        else {
            return (0, String::new(), String::new(), Vec::new());
        };
        let header = |name: &str| {
            response
                .headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_owned()
        };
        let (status, kind, disposition) = (
            response.status().as_u16(),
            header("content-type"),
            header("content-disposition"),
        );
        let bytes = response
            .bytes()
            .await
            .map(|b| b.to_vec())
            .unwrap_or_default();
        (status, kind, disposition, bytes)
    }

    /// Open the event stream after `last_id`.
    pub async fn events(&self, last_id: Option<&str>) -> Option<reqwest::Response> {
        let mut request = self
            .http
            .get(format!("{}/api/events", self.base))
            .timeout(Duration::from_secs(3600))
            .header("cookie", &self.cookie)
            .header("x-hermes-session", &self.session);
        if let Some(id) = last_id {
            request = request.header("last-event-id", id);
        }
        let response = request.send().await.ok()?;
        response.status().is_success().then_some(response)
    }
}

/// A free port on loopback (bound, then let go for the daemon).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// The text of the bot's Markdown as a person reads it (emphasis and code marks gone).
fn visible(markdown: &str) -> String {
    markdown
        .replace("**", "")
        .replace("__", "")
        .replace('`', "")
}

impl FakeWebPage {
    /// A page for a daemon the kit configures: its own port, the kit's [`TOKEN`].
    pub async fn start() -> FakeWebPage {
        FakeWebPage::open(free_port(), TOKEN).await
    }

    /// A page of the web chat at `127.0.0.1:port`, logging in with `token`.
    pub async fn open(port: u16, token: &str) -> FakeWebPage {
        let base = format!("http://127.0.0.1:{port}");
        let page = Arc::new(Mutex::new(Page::default()));
        let kick = Arc::new(Notify::new());
        let resets = Resets::default();
        let (posts, queue) = mpsc::unbounded_channel();
        let tasks = vec![
            tokio::spawn(listen(
                base.clone(),
                token.to_owned(),
                page.clone(),
                kick.clone(),
                resets.clone(),
            )),
            tokio::spawn(type_in_order(base, token.to_owned(), page.clone(), queue)),
        ];
        FakeWebPage {
            port,
            token: token.to_owned(),
            page,
            kick,
            posts,
            resets,
            tasks,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Page> {
        self.page.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The page's address.
    pub fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The bot's messages in `chat`, in the order they first showed.
    pub fn messages(&self, chat: &str) -> Vec<PageMessage> {
        self.lock().messages.get(chat).cloned().unwrap_or_default()
    }

    /// The notices shown to the person in `chat`.
    pub fn notices(&self, chat: &str) -> Vec<String> {
        self.lock().notices.get(chat).cloned().unwrap_or_default()
    }

    /// How many times the event stream was opened.
    pub fn connections(&self) -> usize {
        self.lock().connections
    }

    /// A client logged in as the page is (waits at most 10 s for the daemon to listen).
    pub async fn client(&self) -> Client {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(client) = Client::login(&self.base_url(), &self.token).await {
                return client;
            }
            assert!(
                Instant::now() < deadline,
                "the web chat did not let the fake log in within 10 s"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Close the page for `how_long` (now), as a person closing the tab and coming back.
    pub fn go_away(&self, how_long: Duration) {
        self.lock().away_until = Some(Instant::now() + how_long);
        self.kick.notify_one();
    }

    /// Open the page again now.
    pub fn come_back(&self) {
        self.lock().away_until = None;
        self.kick.notify_one();
    }
}

/// Keep the event stream open: log in, connect after the last event seen, record what
/// comes, and reconnect when it ends (or the page is sent away).
async fn listen(
    base: String,
    token: String,
    page: Arc<Mutex<Page>>,
    kick: Arc<Notify>,
    resets: Resets,
) {
    let lock = || page.lock().unwrap_or_else(|e| e.into_inner());
    let mut client = None;
    loop {
        let away = lock().away_until.filter(|t| *t > Instant::now());
        if let Some(until) = away {
            tokio::select! {
                _ = tokio::time::sleep(until.saturating_duration_since(Instant::now())) => {}
                _ = kick.notified() => {}
            }
            continue;
        }
        if client.is_none() {
            client = Client::login(&base, &token).await;
        }
        let Some(c) = &client else {
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        let last = lock().last_id.clone();
        let Some(mut response) = c.events(last.as_deref()).await else {
            // Refused (a restarted gateway wants a new login) or not there: log in again.
            client = None;
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        {
            let mut page = lock();
            page.connections += 1;
            page.streaming = true;
        }
        let mut buffer = String::new();
        'stream: loop {
            let chunk = tokio::select! {
                _ = kick.notified() => break 'stream,
                chunk = response.chunk() => chunk,
            };
            let Ok(Some(chunk)) = chunk else { break };
            buffer.push_str(&String::from_utf8_lossy(&chunk));
            while let Some(end) = buffer.find("\n\n") {
                let block: String = buffer.drain(..end + 2).collect();
                let mut id = None;
                let mut data = String::new();
                for line in block.lines() {
                    if let Some(v) = line.strip_prefix("id:") {
                        id = Some(v.trim().to_owned());
                    } else if let Some(v) = line.strip_prefix("data:") {
                        data.push_str(v.strip_prefix(' ').unwrap_or(v));
                    }
                }
                let Ok(event) = serde_json::from_str::<Value>(&data) else {
                    continue;
                };
                let mut page = lock();
                if page.cut_next_message && event["kind"] == "message" {
                    page.cut_next_message = false;
                    drop(page);
                    resets.record_cut();
                    break 'stream;
                }
                apply(&mut page, &event);
                if id.is_some() {
                    page.last_id = id;
                }
            }
        }
        lock().streaming = false;
        drop(response);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn apply(page: &mut Page, event: &Value) {
    let now = Instant::now();
    let chat = event["chat"].as_str().unwrap_or_default().to_owned();
    let text = |key: &str| event[key].as_str().unwrap_or_default().to_owned();
    match event["kind"].as_str() {
        Some("message" | "file") => {
            page.calls.entry(chat.clone()).or_default().push(now);
            let messages = page.messages.entry(chat).or_default();
            if messages.iter().any(|m| m.id == event["id"]) {
                return; // shown already (a replay)
            }
            let offered = event["choices"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|c| {
                    (
                        c["label"].as_str().unwrap_or_default().to_owned(),
                        c["id"].as_str().unwrap_or_default().to_owned(),
                    )
                })
                .collect();
            let file = (event["kind"] == "file").then(|| (text("name"), text("url")));
            messages.push(PageMessage {
                id: text("id"),
                markdown: if file.is_some() {
                    text("caption")
                } else {
                    text("markdown")
                },
                offered,
                file,
                at: now,
            });
        }
        Some("edit") => {
            page.calls.entry(chat.clone()).or_default().push(now);
            if let Some(m) = page
                .messages
                .entry(chat)
                .or_default()
                .iter_mut()
                .find(|m| m.id == event["id"])
            {
                m.markdown = text("markdown");
            }
        }
        Some("working") => {
            page.calls.entry(chat.clone()).or_default().push(now);
            let phase = if event["on"] == true {
                WorkingEvent::Shown
            } else {
                WorkingEvent::Ended
            };
            page.working.entry(chat).or_default().push((now, phase));
        }
        Some("notice") => {
            let notice = text("text");
            page.notices.entry(chat).or_default().push(notice);
        }
        _ => {}
    }
}

/// Post the person's messages and presses in order, each until the daemon answers 200
/// (at most 30 s: the daemon is starting, or stopped for a restart).
async fn type_in_order(
    base: String,
    token: String,
    page: Arc<Mutex<Page>>,
    mut queue: mpsc::UnboundedReceiver<Post>,
) {
    let mut client: Option<Client> = None;
    while let Some(post) = queue.recv().await {
        // A person types into an open page, whose event stream is open already (a post
        // that wins the race with it would have its working indicator go to no page). A
        // page closed on purpose (`go_away`) posts anyway; at most 10 s are waited.
        let opened = Instant::now() + Duration::from_secs(10);
        while Instant::now() < opened {
            let ready = {
                let page = page.lock().unwrap_or_else(|e| e.into_inner());
                page.streaming || page.away_until.is_some_and(|t| t > Instant::now())
            };
            if ready {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let (path, body, press_id) = match post {
            Post::Send { chat, id, text } => (
                "/api/send",
                json!({"chat": chat, "id": id, "text": text}),
                None,
            ),
            Post::Press {
                chat,
                id,
                message_id,
                choice,
            } => (
                "/api/press",
                json!({"chat": chat, "id": id, "message_id": message_id, "choice": choice}),
                Some(id),
            ),
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if client.is_none() {
                client = Client::login(&base, &token).await;
            }
            let status = match &client {
                Some(c) => c.post(path, &body).await,
                None => 0,
            };
            if status == 401 {
                client = None; // a restarted gateway wants a new login
            }
            if status == 200 {
                if let Some(id) = &press_id {
                    page.lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .acked
                        .insert(id.clone(), Instant::now());
                }
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// An id no other message of this test run has.
fn new_id(prefix: &str) -> String {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!("{prefix}{}-{nanos:08x}-{n}", std::process::id())
}

impl PlatformFake for FakeWebPage {
    fn platform_yaml(&self) -> String {
        "  web:\n    enabled: true\n".into()
    }

    fn top_level_yaml(&self) -> String {
        format!("web:\n  listen: 127.0.0.1:{}\n", self.port)
    }

    fn prepare_home(&self, dir: &Path) {
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(dir.join("web-token"))
            .unwrap();
        file.write_all(self.token.as_bytes()).unwrap();
    }

    fn env(&self) -> Vec<String> {
        Vec::new()
    }

    fn allowlist_var(&self) -> &'static str {
        "GATEWAY_ALLOWED_USERS"
    }

    fn allow_all_var(&self) -> &'static str {
        "GATEWAY_ALLOW_ALL_USERS"
    }

    fn max_len(&self) -> usize {
        16_000
    }

    fn measure(&self, shown: &str) -> usize {
        shown.chars().count()
    }

    fn people(&self) -> u32 {
        1
    }

    fn person(&self, n: u32) -> String {
        assert_eq!(n, 1, "the web chat has one person, the token's holder");
        "operator".into()
    }

    fn dm_chat(&self, _person: &str) -> String {
        "c-kit".into()
    }

    fn group_chat(&self) -> String {
        unreachable!("the web chat has no group chats")
    }

    fn has_groups(&self) -> bool {
        false
    }

    fn write(&self, chat: &str, _person: &str, text: &str, _addressed: bool) {
        let _ = self.posts.send(Post::Send {
            chat: chat.to_owned(),
            id: new_id("m-"),
            text: text.to_owned(),
        });
    }

    fn shown(&self, chat: &str) -> Vec<String> {
        self.messages(chat)
            .iter()
            .map(|m| visible(&m.markdown))
            .collect()
    }

    fn sent_at(&self, chat: &str) -> Vec<Instant> {
        self.messages(chat).iter().map(|m| m.at).collect()
    }

    fn prompts(&self, chat: &str) -> Vec<ShownPrompt> {
        self.messages(chat)
            .into_iter()
            .filter(|m| !m.offered.is_empty())
            .map(|m| ShownPrompt {
                message_id: m.id,
                text: visible(&m.markdown),
                choices: m.offered,
            })
            .collect()
    }

    fn press(&self, chat: &str, _person: &str, prompt: &ShownPrompt, label: &str) -> String {
        let (_, choice) = prompt
            .choices
            .iter()
            .find(|(l, _)| l == label)
            .unwrap_or_else(|| panic!("no choice {label:?} in {prompt:?}"));
        let id = new_id("p-");
        let _ = self.posts.send(Post::Press {
            chat: chat.to_owned(),
            id: id.clone(),
            message_id: prompt.message_id.clone(),
            choice: choice.clone(),
        });
        id
    }

    fn acknowledged(&self, press_id: &str) -> Option<Instant> {
        self.lock().acked.get(press_id).copied()
    }

    fn working(&self, chat: &str) -> Vec<(Instant, WorkingEvent)> {
        self.lock().working.get(chat).cloned().unwrap_or_default()
    }

    fn chat_calls(&self, chat: &str) -> Vec<Instant> {
        self.lock().calls.get(chat).cloned().unwrap_or_default()
    }

    fn chat_budget(&self) -> (f64, u32) {
        (10.0, 20)
    }

    /// The page is closed for a moment: the reply waits and comes when it is back.
    fn fail_next_send(&self, _status: u16) {
        self.go_away(Duration::from_millis(300));
    }

    /// The page is closed for `seconds`.
    fn rate_limit_next_send(&self, seconds: u64) {
        self.go_away(Duration::from_secs(seconds));
    }

    /// The stream is cut as the next message reaches it.
    fn reset_next_send(&self, _when: When) {
        self.lock().cut_next_message = true;
    }

    fn resets(&self) -> &Resets {
        &self.resets
    }
}
