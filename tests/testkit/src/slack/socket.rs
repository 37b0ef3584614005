//! Socket Mode: the WebSocket `apps.connections.open` points at (one-use tickets; `hello`
//! on connect), envelopes handed to the open sockets in turn (queued while none is open),
//! acknowledgements recorded, unacknowledged events delivered again with `retry_attempt`
//! and `retry_reason: "timeout"`, and the controls tests use to break connections.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc::{UnboundedSender, unbounded_channel};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::handshake::server::{ErrorResponse, Request, Response};
use tokio_tungstenite::tungstenite::protocol::CloseFrame;

use super::{FakeSlack, Inner, Kind, model};

/// What a socket's task is told to do.
pub(super) enum Out {
    Frame(Value),
    /// Send a close frame, then hang up.
    Close,
    /// Hang up without a close frame (a network drop).
    Drop,
}

/// One acknowledgement a client sent.
#[derive(Debug, Clone)]
pub struct Ack {
    pub envelope_id: String,
    pub socket: u64,
    pub payload: Option<Value>,
    pub at: Instant,
}

/// Socket Mode's side of the world.
#[derive(Default)]
pub(super) struct State {
    sockets: BTreeMap<u64, UnboundedSender<Out>>,
    /// Envelopes sent so far: which socket is next.
    spread: usize,
    next_socket: u64,
    connects: usize,
    /// Handshakes refused for want of a valid ticket.
    refused: usize,
    /// Ticket → used.
    tickets: HashMap<u64, bool>,
    next_ticket: u64,
    /// Envelopes (indexes) waiting for a socket.
    queue: VecDeque<usize>,
    acks: Vec<Ack>,
    /// Frames clients sent that were not acknowledgements.
    other_frames: Vec<String>,
}

impl State {
    /// A ticket for one connection.
    pub(super) fn issue_ticket(&mut self) -> u64 {
        self.next_ticket += 1;
        self.tickets.insert(self.next_ticket, false);
        self.next_ticket
    }

    /// Use up `ticket`; whether it was good.
    fn take_ticket(&mut self, ticket: Option<u64>) -> bool {
        match ticket.and_then(|t| self.tickets.get_mut(&t)) {
            Some(used) if !*used => {
                *used = true;
                true
            }
            _ => {
                self.refused += 1;
                false
            }
        }
    }
}

impl Inner {
    /// Send envelope `at` to the next open socket in turn (Slack spreads an app's events
    /// over its connections), or queue it until one opens.
    pub(super) fn send_envelope(&mut self, at: usize) {
        let open = self.sock.sockets.len().max(1);
        self.sock.spread = self.sock.spread.wrapping_add(1);
        let Some(tx) = self.sock.sockets.values().nth(self.sock.spread % open) else {
            self.envs[at].queued = true;
            self.sock.queue.push_back(at);
            return;
        };
        let env = &mut self.envs[at];
        let mut frame = json!({"envelope_id": env.id, "payload": env.payload,
                               "type": envelope_type(env.kind),
                               "accepts_response_payload": env.kind == Kind::SlashCommand});
        if env.kind == Kind::Event {
            frame["retry_attempt"] = json!(env.retry_attempt);
            frame["retry_reason"] = json!(env.retry_reason);
        }
        let _ = tx.send(Out::Frame(frame));
        let now = Instant::now();
        env.queued = false;
        env.last_sent = Some(now);
        env.sends.push((now, env.retry_attempt));
    }

    fn open_socket(&mut self, tx: UnboundedSender<Out>) -> u64 {
        let sock = &mut self.sock;
        sock.next_socket += 1;
        sock.connects += 1;
        let socket = sock.next_socket;
        let _ = tx.send(Out::Frame(model::hello(sock.sockets.len() + 1)));
        sock.sockets.insert(socket, tx);
        while let Some(at) = self.sock.queue.pop_front() {
            self.send_envelope(at);
        }
        socket
    }

    /// One frame from a client: an acknowledgement `{"envelope_id": …, "payload"?: …}`.
    fn on_frame(&mut self, socket: u64, text: &str) {
        let frame = serde_json::from_str::<Value>(text).ok();
        let Some(id) = frame.as_ref().and_then(|f| f["envelope_id"].as_str()) else {
            self.sock.other_frames.push(text.to_owned());
            return;
        };
        let now = Instant::now();
        let payload = frame.as_ref().and_then(|f| f.get("payload").cloned());
        self.sock.acks.push(Ack {
            envelope_id: id.to_owned(),
            socket,
            payload: payload.clone(),
            at: now,
        });
        let window = self.options.redeliver_after;
        let Some(env) = self.envs.iter_mut().find(|e| e.id == id) else {
            return;
        };
        if env.acked.is_some() {
            return;
        }
        env.acked = Some(now);
        env.ack_payload = payload.clone();
        let in_time = env
            .last_sent
            .is_some_and(|t| now.duration_since(t) < window);
        if env.kind == Kind::SlashCommand
            && in_time
            && let Some(payload) = payload
        {
            let id = env.id.clone();
            self.respond(&id, payload, "ack");
        }
    }

    /// Deliver again what waited too long for its ack (events; presses and commands only
    /// expire, as on Slack).
    fn tick(&mut self, now: Instant) {
        let window = self.options.redeliver_after;
        let max = self.options.max_redeliveries;
        for at in 0..self.envs.len() {
            let env = &mut self.envs[at];
            let late = env
                .last_sent
                .is_some_and(|t| now.duration_since(t) >= window);
            if env.acked.is_some() || env.queued || !late {
                continue;
            }
            if env.kind != Kind::Event {
                env.expired = true;
                continue;
            }
            if env.retry_attempt >= max {
                continue;
            }
            env.retry_attempt += 1;
            env.retry_reason = "timeout";
            self.send_envelope(at);
        }
    }
}

fn envelope_type(kind: Kind) -> &'static str {
    match kind {
        Kind::Event => "events_api",
        Kind::Interactive => "interactive",
        Kind::SlashCommand => "slash_commands",
    }
}

/// Check for late envelopes every 50 ms, for as long as the runtime lives.
pub(super) async fn tick(fake: FakeSlack) {
    loop {
        tokio::time::sleep(Duration::from_millis(50)).await;
        fake.lock().tick(Instant::now());
    }
}

/// Accept sockets for as long as the runtime lives.
pub(super) async fn serve(fake: FakeSlack, listener: TcpListener) {
    loop {
        if let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(connection(fake.clone(), stream));
        }
    }
}

fn ticket_of(request: &Request) -> Option<u64> {
    let query = request.uri().query()?;
    let mut pairs = form_urlencoded::parse(query.as_bytes());
    let ticket = pairs.find(|(k, _)| k == "ticket")?.1;
    ticket.parse().ok()
}

async fn connection(fake: FakeSlack, stream: TcpStream) {
    // The callback's type is tungstenite's.
    #[allow(clippy::result_large_err)]
    let check = |request: &Request, response: Response| -> Result<Response, ErrorResponse> {
        if fake.lock().sock.take_ticket(ticket_of(request)) {
            return Ok(response);
        }
        let mut refused = ErrorResponse::new(Some("invalid or used ticket".into()));
        *refused.status_mut() = tokio_tungstenite::tungstenite::http::StatusCode::UNAUTHORIZED;
        Err(refused)
    };
    let handshake = tokio_tungstenite::accept_hdr_async(stream, check);
    let Ok(Ok(ws)) = tokio::time::timeout(Duration::from_secs(10), handshake).await else {
        return;
    };
    let (mut sink, mut source) = ws.split();
    let (tx, mut rx) = unbounded_channel();
    let socket = fake.lock().open_socket(tx);
    loop {
        tokio::select! {
            out = rx.recv() => match out {
                Some(Out::Frame(frame)) => {
                    if sink.send(Message::Text(frame.to_string())).await.is_err() {
                        break;
                    }
                }
                Some(Out::Close) => {
                    let frame = CloseFrame { code: 1000u16.into(), reason: "".into() };
                    let _ = sink.send(Message::Close(Some(frame))).await;
                    break;
                }
                Some(Out::Drop) | None => break,
            },
            incoming = source.next() => match incoming {
                Some(Ok(Message::Text(text))) => fake.lock().on_frame(socket, &text),
                Some(Ok(Message::Close(_)) | Err(_)) | None => break,
                Some(Ok(_)) => {}
            },
        }
    }
    fake.lock().sock.sockets.remove(&socket);
}

/// Socket Mode's controls and records.
impl FakeSlack {
    /// Send `{"type":"disconnect","reason":"refresh_requested"}` on every socket, then close
    /// them; the client opens a new connection.
    pub fn disconnect_all(&self) {
        self.disconnect_all_because("refresh_requested");
    }

    /// Send `disconnect` with `reason` on every socket and close them `close_after` later,
    /// as Slack warns a while before it refreshes a connection (envelopes still go to them
    /// meanwhile; slack-morphism connects anew at once and drops what arrives on a socket
    /// it was told to leave, so those come again after the redelivery timeout).
    pub fn send_disconnect(&self, reason: &str, close_after: Duration) {
        let inner = self.lock();
        let ids: Vec<u64> = inner.sock.sockets.keys().copied().collect();
        for tx in inner.sock.sockets.values() {
            let _ = tx.send(Out::Frame(model::disconnect(reason)));
        }
        drop(inner);
        let fake = self.clone();
        let close = move || {
            let mut inner = fake.lock();
            for id in &ids {
                if let Some(tx) = inner.sock.sockets.remove(id) {
                    let _ = tx.send(Out::Close);
                }
            }
        };
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn(async move {
                    tokio::time::sleep(close_after).await;
                    close();
                });
            }
            Err(_) => close(),
        }
    }

    /// [`FakeSlack::disconnect_all`] with another reason (`warning`, `link_disabled`).
    pub fn disconnect_all_because(&self, reason: &str) {
        let mut inner = self.lock();
        let sockets = std::mem::take(&mut inner.sock.sockets);
        for tx in sockets.values() {
            let _ = tx.send(Out::Frame(model::disconnect(reason)));
            let _ = tx.send(Out::Close);
        }
    }

    /// Hang up every socket without a frame (a network drop).
    pub fn drop_all(&self) {
        let mut inner = self.lock();
        let sockets = std::mem::take(&mut inner.sock.sockets);
        for tx in sockets.values() {
            let _ = tx.send(Out::Drop);
        }
    }

    /// Sockets open now.
    pub fn connections(&self) -> usize {
        self.lock().sock.sockets.len()
    }

    /// Sockets opened since the start.
    pub fn connects(&self) -> usize {
        self.lock().sock.connects
    }

    /// Handshakes refused (no ticket, an unknown one, or one already used).
    pub fn refused_connects(&self) -> usize {
        self.lock().sock.refused
    }

    /// Wait (at most `timeout`) until a socket is open; whether one is.
    pub async fn wait_connected(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        while self.connections() == 0 {
            if Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        true
    }

    /// Deliver envelope `id` again now (with `retry_attempt` + 1), acknowledged or not;
    /// whether it exists.
    pub fn redeliver(&self, id: &str) -> bool {
        let mut inner = self.lock();
        let Some(at) = inner.envs.iter().position(|e| e.id == id) else {
            return false;
        };
        let env = &mut inner.envs[at];
        env.retry_attempt += 1;
        env.retry_reason = "timeout";
        match inner.options.mode {
            super::Mode::Socket => inner.send_envelope(at),
            super::Mode::Events => inner.ev.enqueue(at),
        }
        true
    }

    /// Every acknowledgement received, in order (duplicates and unknown ids included).
    pub fn acks(&self) -> Vec<Ack> {
        self.lock().sock.acks.clone()
    }

    /// Frames clients sent that were not acknowledgements.
    pub fn other_frames(&self) -> Vec<String> {
        self.lock().sock.other_frames.clone()
    }
}
