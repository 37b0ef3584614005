//! The gateway WebSocket: one task per socket (JSON text frames, no compression), one
//! session with its dispatch log, and the controls tests use to break connections.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc::{UnboundedSender, unbounded_channel};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;

use super::{BOT_ID, FakeDiscord, GUILD_ID, Inner, TOKEN, model};

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
    /// The shard identified or resumed on this socket.
    shard: Option<u32>,
}

/// The gateway's side of the world: one session per shard.
pub(super) struct State {
    /// The shards the bot must run (`GET /gateway/bot`'s `shards`).
    shards: u32,
    sessions: HashMap<u32, Session>,
    /// Events made before a shard's first IDENTIFY, delivered after its READY.
    held: HashMap<u32, Vec<(String, Value)>>,
    identified_once: HashSet<u32>,
    identifies: Vec<u64>,
    /// `[shard, shards]` of every IDENTIFY, in order.
    identified_shards: Vec<[u32; 2]>,
    resumes: usize,
    heartbeats: usize,
    stop_acking: bool,
    sockets: HashMap<u64, Socket>,
    next_socket: u64,
    /// The socket each shard's dispatches go to.
    live: HashMap<u32, u64>,
}

impl State {
    pub(super) fn new(shards: u32) -> State {
        State {
            shards,
            sessions: HashMap::new(),
            held: HashMap::new(),
            identified_once: HashSet::new(),
            identifies: Vec::new(),
            identified_shards: Vec::new(),
            resumes: 0,
            heartbeats: 0,
            stop_acking: false,
            sockets: HashMap::new(),
            next_socket: 0,
            live: HashMap::new(),
        }
    }

    /// The shard an event goes to: its guild's, or shard 0 for a DM.
    fn shard_of(&self, d: &Value) -> u32 {
        match d.get("guild_id").and_then(Value::as_str) {
            Some(guild) => model::shard_of_guild(guild, self.shards),
            None => 0,
        }
    }

    /// Log a dispatch in its shard's session and send it to the socket attached there, if
    /// the session's intents let it through.
    pub(super) fn dispatch(&mut self, t: &str, d: Value) {
        let shard = self.shard_of(&d);
        self.dispatch_to(shard, t, d);
    }

    fn dispatch_to(&mut self, shard: u32, t: &str, mut d: Value) {
        if !self.identified_once.contains(&shard) {
            self.held.entry(shard).or_default().push((t.to_owned(), d));
            return;
        }
        let Some(session) = self.sessions.get_mut(&shard) else {
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
        if let Some(socket) = self.live.get(&shard).and_then(|l| self.sockets.get(l)) {
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
        self.live.retain(|_, live| *live != socket);
    }

    /// Make `socket` the one shard `shard`'s dispatches go to (hanging up an earlier one).
    fn attach(&mut self, socket: u64, shard: u32) {
        if let Some(old) = self.live.get(&shard).copied().filter(|&l| l != socket) {
            self.send(old, Out::Drop);
        }
        self.live.insert(shard, socket);
        if let Some(s) = self.sockets.get_mut(&socket) {
            s.shard = Some(shard);
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
        let authed = self
            .gw
            .sockets
            .get(&socket)
            .is_some_and(|s| s.shard.is_some());
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
        let [shard, shards] = match d["shard"].as_array().map(|s| s.as_slice()) {
            None => [0, 1],
            Some([i, n]) => [
                i.as_u64().unwrap_or(u64::MAX) as u32,
                n.as_u64().unwrap_or(0) as u32,
            ],
            Some(_) => return self.gw.close(socket, 4010, "Invalid shard."),
        };
        if shards == 1 && self.gw.shards > 1 {
            return self.gw.close(socket, 4011, "Sharding required.");
        }
        if shards != self.gw.shards || shard >= shards {
            return self.gw.close(socket, 4010, "Invalid shard.");
        }
        let gw = &mut self.gw;
        gw.identifies.push(intents);
        gw.identified_shards.push([shard, shards]);
        let id = format!(
            "{:016x}{:016x}",
            model::hash(&format!("session {}", gw.identifies.len())),
            model::hash(&self.ws_url)
        );
        gw.sessions.insert(
            shard,
            Session {
                id: id.clone(),
                intents,
                seq: 0,
                log: Vec::new(),
            },
        );
        gw.attach(socket, shard);
        let first = gw.identified_once.insert(shard);
        let held = gw.held.remove(&shard).unwrap_or_default();
        gw.dispatch_to(
            shard,
            "READY",
            model::ready(&id, &self.ws_url, shard, shards),
        );
        if model::shard_of_guild(GUILD_ID, shards) == shard {
            let guild = model::guild(self.thread_objects());
            self.gw.dispatch_to(shard, "GUILD_CREATE", guild);
        }
        if first {
            for (t, d) in held {
                self.gw.dispatch_to(shard, &t, d);
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
            .sessions
            .iter()
            .find(|(_, s)| d["session_id"] == s.id.as_str())
            .map(|(shard, _)| *shard);
        let Some(shard) = known else {
            let invalid = json!({"op": 9, "s": null, "t": null, "d": false});
            return gw.send(socket, Out::Frame(invalid));
        };
        gw.resumes += 1;
        gw.attach(socket, shard);
        let Some(session) = gw.sessions.get_mut(&shard) else {
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
        gw.sockets.insert(socket, Socket { tx, shard: None });
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
        inner.gw.live.clear();
    }

    /// Send op 9 (not resumable) and forget the sessions: the client identifies again.
    pub fn invalidate_session(&self) {
        let mut inner = self.lock();
        let gw = &mut inner.gw;
        gw.sessions.clear();
        for (_, live) in std::mem::take(&mut gw.live) {
            let invalid = json!({"op": 9, "s": null, "t": null, "d": false});
            gw.send(live, Out::Frame(invalid));
        }
    }

    /// Send op 7: the client should reconnect and resume.
    pub fn reconnect_request(&self) {
        let mut inner = self.lock();
        let gw = &mut inner.gw;
        for (_, live) in std::mem::take(&mut gw.live) {
            let reconnect = json!({"op": 7, "s": null, "t": null, "d": null});
            gw.send(live, Out::Frame(reconnect));
        }
    }

    /// Stop (or resume) answering heartbeats.
    pub fn stop_acking(&self, stop: bool) {
        self.lock().gw.stop_acking = stop;
    }

    /// Whether a socket is attached to a session (identified or resumed, not dropped).
    pub fn connected(&self) -> bool {
        !self.lock().gw.live.is_empty()
    }

    /// The shards with a socket attached now.
    pub fn connected_shards(&self) -> Vec<u32> {
        let mut shards: Vec<u32> = self.lock().gw.live.keys().copied().collect();
        shards.sort_unstable();
        shards
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

    /// `[shard, shards]` of every IDENTIFY, in order.
    pub fn identified_shards(&self) -> Vec<[u32; 2]> {
        self.lock().gw.identified_shards.clone()
    }

    /// How many RESUMEs were answered with a replay and RESUMED.
    pub fn resumes(&self) -> usize {
        self.lock().gw.resumes
    }

    /// How many heartbeats (op 1) arrived, acknowledged or not.
    pub fn heartbeats(&self) -> usize {
        self.lock().gw.heartbeats
    }

    /// Shard 0's current session's id.
    pub fn session_id(&self) -> Option<String> {
        self.lock().gw.sessions.get(&0).map(|s| s.id.clone())
    }

    /// The current sessions' dispatches (`{op:0, s, t, d}` frames), shard by shard, each
    /// in order.
    pub fn dispatches(&self) -> Vec<Value> {
        let inner = self.lock();
        let mut shards: Vec<&u32> = inner.gw.sessions.keys().collect();
        shards.sort_unstable();
        shards
            .into_iter()
            .flat_map(|shard| inner.gw.sessions[shard].log.clone())
            .collect()
    }
}
