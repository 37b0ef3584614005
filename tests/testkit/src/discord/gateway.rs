//! The gateway WebSocket: one task per socket (JSON text frames, no compression), one
//! session with its dispatch log, and the controls tests use to break connections.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc::{UnboundedSender, unbounded_channel};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;

use super::{BOT_ID, FakeDiscord, Inner, TOKEN, model};

pub(super) const GUILDS: u64 = 1;
pub(super) const GUILD_MESSAGES: u64 = 1 << 9;
pub(super) const DIRECT_MESSAGES: u64 = 1 << 12;
pub(super) const MESSAGE_CONTENT: u64 = 1 << 15;
/// GUILD_MEMBERS, GUILD_PRESENCES, MESSAGE_CONTENT.
pub(super) const PRIVILEGED: u64 = (1 << 1) | (1 << 8) | MESSAGE_CONTENT;

/// What a socket's task is told to do.
pub(super) enum Out {
    Frame(Value),
    /// Send a close frame with this code, then hang up.
    Close(u16, &'static str),
    /// Hang up without a close frame (a network drop).
    Drop,
}

struct Session {
    id: String,
    intents: u64,
    seq: u64,
    /// Every dispatch of the session, in order (what a RESUME replays from).
    log: Vec<Value>,
}

struct Socket {
    tx: UnboundedSender<Out>,
    /// Identified or resumed on this socket.
    authed: bool,
}

/// The gateway's side of the world.
#[derive(Default)]
pub(super) struct State {
    session: Option<Session>,
    /// Events made before the first IDENTIFY, delivered after its READY.
    held: Vec<(String, Value)>,
    identified_once: bool,
    identifies: Vec<u64>,
    resumes: usize,
    heartbeats: usize,
    stop_acking: bool,
    sockets: HashMap<u64, Socket>,
    next_socket: u64,
    /// The socket the session's dispatches go to.
    live: Option<u64>,
}

impl State {
    /// Log a dispatch in the session and send it to the attached socket, if the session's
    /// intents let it through.
    pub(super) fn dispatch(&mut self, t: &str, mut d: Value) {
        if !self.identified_once {
            self.held.push((t.to_owned(), d));
            return;
        }
        let Some(session) = self.session.as_mut() else {
            return;
        };
        let in_guild = d.get("guild_id").is_some();
        let needed = match t {
            "GUILD_CREATE" | "THREAD_CREATE" => GUILDS,
            "MESSAGE_CREATE" | "MESSAGE_UPDATE" if in_guild => GUILD_MESSAGES,
            "MESSAGE_CREATE" | "MESSAGE_UPDATE" => DIRECT_MESSAGES,
            _ => 0,
        };
        if session.intents & needed != needed {
            return;
        }
        let own = d["author"]["id"] == BOT_ID;
        let mentioned = d["mentions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|u| u["id"] == BOT_ID);
        if t.starts_with("MESSAGE_")
            && in_guild
            && session.intents & MESSAGE_CONTENT == 0
            && !own
            && !mentioned
        {
            for (key, empty) in [("content", json!("")), ("embeds", json!([]))] {
                d[key] = empty;
            }
            d["attachments"] = json!([]);
            d["components"] = json!([]);
        }
        session.seq += 1;
        let frame = json!({"op": 0, "s": session.seq, "t": t, "d": d});
        session.log.push(frame.clone());
        if let Some(socket) = self.live.and_then(|l| self.sockets.get(&l)) {
            let _ = socket.tx.send(Out::Frame(frame));
        }
    }

    fn send(&self, socket: u64, out: Out) {
        if let Some(s) = self.sockets.get(&socket) {
            let _ = s.tx.send(out);
        }
    }

    fn close(&mut self, socket: u64, code: u16, reason: &'static str) {
        self.send(socket, Out::Close(code, reason));
        self.detach(socket);
    }

    fn detach(&mut self, socket: u64) {
        if self.live == Some(socket) {
            self.live = None;
        }
    }

    /// Make `socket` the one the session's dispatches go to (hanging up an earlier one).
    fn attach(&mut self, socket: u64) {
        if let Some(old) = self.live.filter(|&l| l != socket) {
            self.send(old, Out::Drop);
        }
        self.live = Some(socket);
        if let Some(s) = self.sockets.get_mut(&socket) {
            s.authed = true;
        }
    }
}

fn token_ok(token: &Value) -> bool {
    let token = token.as_str().unwrap_or_default();
    token.strip_prefix("Bot ").unwrap_or(token) == TOKEN
}

impl Inner {
    /// One frame from a client.
    fn on_frame(&mut self, socket: u64, text: &str) {
        let Ok(frame) = serde_json::from_str::<Value>(text) else {
            return self.gw.close(socket, 4002, "Error while decoding payload.");
        };
        let d = &frame["d"];
        let authed = self.gw.sockets.get(&socket).is_some_and(|s| s.authed);
        match frame["op"].as_u64() {
            Some(1) => {
                self.gw.heartbeats += 1;
                if !self.gw.stop_acking {
                    let ack = json!({"op": 11, "s": null, "t": null, "d": null});
                    self.gw.send(socket, Out::Frame(ack));
                }
            }
            Some(2) if authed => self.gw.close(socket, 4005, "Already authenticated."),
            Some(2) => self.identify(socket, d),
            Some(6) => self.resume(socket, d),
            Some(3 | 4 | 8 | 31) if !authed => self.gw.close(socket, 4003, "Not authenticated."),
            Some(3 | 4 | 8 | 31) => {}
            _ => self.gw.close(socket, 4001, "Unknown opcode."),
        }
    }

    fn identify(&mut self, socket: u64, d: &Value) {
        if !token_ok(&d["token"]) {
            return self.gw.close(socket, 4004, "Authentication failed.");
        }
        let Some(intents) = d["intents"].as_u64() else {
            return self.gw.close(socket, 4013, "Invalid intent(s).");
        };
        if intents & PRIVILEGED & !self.options.privileged_intents != 0 {
            return self.gw.close(socket, 4014, "Disallowed intent(s).");
        }
        let gw = &mut self.gw;
        gw.identifies.push(intents);
        let id = format!(
            "{:016x}{:016x}",
            model::hash(&format!("session {}", gw.identifies.len())),
            model::hash(&self.ws_url)
        );
        gw.session = Some(Session {
            id: id.clone(),
            intents,
            seq: 0,
            log: Vec::new(),
        });
        gw.attach(socket);
        let first = !std::mem::replace(&mut gw.identified_once, true);
        let held = std::mem::take(&mut gw.held);
        gw.dispatch("READY", model::ready(&id, &self.ws_url));
        let guild = model::guild(self.thread_objects());
        self.gw.dispatch("GUILD_CREATE", guild);
        if first {
            for (t, d) in held {
                self.gw.dispatch(&t, d);
            }
        }
    }

    fn resume(&mut self, socket: u64, d: &Value) {
        if !token_ok(&d["token"]) {
            return self.gw.close(socket, 4004, "Authentication failed.");
        }
        let seq = d["seq"].as_u64().unwrap_or(0);
        let gw = &mut self.gw;
        let known = gw
            .session
            .as_ref()
            .is_some_and(|s| d["session_id"] == s.id.as_str());
        if !known {
            let invalid = json!({"op": 9, "s": null, "t": null, "d": false});
            return gw.send(socket, Out::Frame(invalid));
        }
        gw.resumes += 1;
        gw.attach(socket);
        let Some(session) = gw.session.as_mut() else {
            return;
        };
        let missed = session.log.iter().filter(|f| f["s"].as_u64() > Some(seq));
        let missed: Vec<Value> = missed.cloned().collect();
        session.seq += 1;
        let resumed = json!({"op": 0, "s": session.seq, "t": "RESUMED",
                             "d": {"_trace": ["[\"fake-gateway\"]"]}});
        for frame in missed.into_iter().chain([resumed]) {
            gw.send(socket, Out::Frame(frame));
        }
    }
}

/// Accept gateway sockets for as long as the runtime lives.
pub(super) async fn serve(fake: FakeDiscord, listener: TcpListener) {
    loop {
        if let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(connection(fake.clone(), stream));
        }
    }
}

async fn connection(fake: FakeDiscord, stream: TcpStream) {
    let Ok(ws) = tokio_tungstenite::accept_async(stream).await else {
        return;
    };
    let (mut sink, mut source) = ws.split();
    let (tx, mut rx) = unbounded_channel();
    let socket = {
        let mut inner = fake.lock();
        let _ = tx.send(Out::Frame(model::hello(
            inner.options.heartbeat_interval_ms,
        )));
        let gw = &mut inner.gw;
        gw.next_socket += 1;
        let socket = gw.next_socket;
        gw.sockets.insert(socket, Socket { tx, authed: false });
        socket
    };
    loop {
        tokio::select! {
            out = rx.recv() => match out {
                Some(Out::Frame(frame)) => {
                    if sink.send(Message::Text(frame.to_string())).await.is_err() {
                        break;
                    }
                }
                Some(Out::Close(code, reason)) => {
                    let frame = CloseFrame { code: code.into(), reason: reason.into() };
                    let _ = sink.send(Message::Close(Some(frame))).await;
                    break;
                }
                Some(Out::Drop) | None => break,
            },
            incoming = source.next() => match incoming {
                Some(Ok(Message::Text(text))) => fake.lock().on_frame(socket, &text),
                Some(Ok(Message::Binary(_))) => {
                    fake.lock().gw.close(socket, 4002, "Error while decoding payload.");
                }
                Some(Ok(Message::Close(_)) | Err(_)) | None => break,
                Some(Ok(_)) => {}
            },
        }
    }
    let mut inner = fake.lock();
    inner.gw.detach(socket);
    inner.gw.sockets.remove(&socket);
}

/// The gateway's controls and records.
impl FakeDiscord {
    /// Hang up every socket without a close frame (a network drop); the client resumes.
    pub fn disconnect(&self) {
        let mut inner = self.lock();
        for socket in inner.gw.sockets.values() {
            let _ = socket.tx.send(Out::Drop);
        }
        inner.gw.live = None;
    }

    /// Send op 9 (not resumable) and forget the session: the client identifies again.
    pub fn invalidate_session(&self) {
        let mut inner = self.lock();
        let gw = &mut inner.gw;
        gw.session = None;
        if let Some(live) = gw.live.take() {
            let invalid = json!({"op": 9, "s": null, "t": null, "d": false});
            gw.send(live, Out::Frame(invalid));
        }
    }

    /// Send op 7: the client should reconnect and resume.
    pub fn reconnect_request(&self) {
        let mut inner = self.lock();
        let gw = &mut inner.gw;
        if let Some(live) = gw.live.take() {
            let reconnect = json!({"op": 7, "s": null, "t": null, "d": null});
            gw.send(live, Out::Frame(reconnect));
        }
    }

    /// Stop (or resume) answering heartbeats.
    pub fn stop_acking(&self, stop: bool) {
        self.lock().gw.stop_acking = stop;
    }

    /// Whether a socket is attached to the session (identified or resumed, not dropped).
    pub fn connected(&self) -> bool {
        self.lock().gw.live.is_some()
    }

    /// Wait (at most `timeout`) until [`FakeDiscord::connected`]; whether it is.
    pub async fn wait_connected(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        while !self.connected() {
            if Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        true
    }

    /// The intents of every IDENTIFY, in order.
    pub fn identifies(&self) -> Vec<u64> {
        self.lock().gw.identifies.clone()
    }

    /// How many RESUMEs were answered with a replay and RESUMED.
    pub fn resumes(&self) -> usize {
        self.lock().gw.resumes
    }

    /// How many heartbeats (op 1) arrived, acknowledged or not.
    pub fn heartbeats(&self) -> usize {
        self.lock().gw.heartbeats
    }

    /// The current session's id.
    pub fn session_id(&self) -> Option<String> {
        self.lock().gw.session.as_ref().map(|s| s.id.clone())
    }

    /// The current session's dispatches (`{op:0, s, t, d}` frames), in order.
    pub fn dispatches(&self) -> Vec<Value> {
        let inner = self.lock();
        let log = inner.gw.session.as_ref().map(|s| s.log.clone());
        log.unwrap_or_default()
    }
}
