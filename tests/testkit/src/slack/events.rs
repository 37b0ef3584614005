//! The Events API: what people do is POSTed to the daemon's HTTP server, one POST at a
//! time in order, signed as Slack signs (`X-Slack-Request-Timestamp`, `X-Slack-Signature:
//! v0=hex(hmac_sha256(secret, "v0:{ts}:{body}"))`): events as JSON to `/slack/events`,
//! presses as a form's `payload` to `/slack/interactions`, slash commands as form fields
//! to `/slack/commands`. An event left without a 2xx answer is delivered again with
//! `X-Slack-Retry-Num` and `X-Slack-Retry-Reason` (at once after 3 s without an answer,
//! else after [`super::Options::retry_delay`]), unless the answer said `X-Slack-No-Retry:
//! 1`. Tests can also POST anything, signed well, badly, stale or not at all.

use std::time::{Duration, Instant};

use hmac::{Hmac, KeyInit, Mac};
use serde_json::{Value, json};
use sha2::Sha256;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender};

use super::{FakeSlack, Inner, Kind, SIGNING_SECRET, VERIFICATION_TOKEN, model};

/// The longest a POST may take before the fake stops waiting for it at all.
const LONGEST: Duration = Duration::from_secs(60);

/// How a POST is signed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signing {
    /// With [`SIGNING_SECRET`] and the current time.
    Valid,
    /// With another secret.
    BadSignature,
    /// Correctly, but ten minutes ago (outside Slack's five-minute window).
    Stale,
    /// Without the two headers.
    Missing,
}

/// One POST to the daemon.
#[derive(Debug, Clone)]
pub struct Delivery {
    /// The envelope it carried; empty for the test's own posts ([`FakeSlack::post_event`]…).
    pub id: String,
    pub kind: Kind,
    pub path: String,
    /// `X-Slack-Retry-Num` and `X-Slack-Retry-Reason`, on a retry.
    pub retry_num: Option<u32>,
    pub retry_reason: Option<String>,
    pub signing: Signing,
    /// The daemon's status; `None` while waiting, or when no answer came (no connection).
    pub status: Option<u16>,
    pub body: String,
    pub at: Instant,
    pub answered_in: Option<Duration>,
}

/// The Events API's side of the world.
#[derive(Default)]
pub(super) struct State {
    /// The daemon's HTTP address (`127.0.0.1:PORT`).
    pub(super) daemon: Option<String>,
    /// Envelopes (indexes) for the sender task, in order.
    pub(super) tx: Option<UnboundedSender<usize>>,
    deliveries: Vec<Delivery>,
}

impl State {
    pub(super) fn enqueue(&mut self, at: usize) {
        if let Some(tx) = &self.tx {
            let _ = tx.send(at);
        }
    }
}

/// Slack's signature of `body` sent at `timestamp` (Unix seconds): `v0=<hex>`.
pub fn sign(secret: &str, timestamp: &str, body: &[u8]) -> String {
    let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(secret.as_bytes()) else {
        return String::new();
    };
    mac.update(b"v0:");
    mac.update(timestamp.as_bytes());
    mac.update(b":");
    mac.update(body);
    format!("v0={}", hex::encode(mac.finalize().into_bytes()))
}

/// The signature headers for `body`.
fn signed(body: &[u8], signing: Signing) -> Vec<(String, String)> {
    let now = model::unix_now();
    let (ts, secret) = match signing {
        Signing::Valid => (now, SIGNING_SECRET),
        Signing::BadSignature => (now, "0000000000not0the0secret00000000"),
        Signing::Stale => (now.saturating_sub(600), SIGNING_SECRET),
        Signing::Missing => return Vec::new(),
    };
    let ts = ts.to_string();
    let signature = sign(secret, &ts, body);
    vec![
        ("X-Slack-Request-Timestamp".into(), ts),
        ("X-Slack-Signature".into(), signature),
    ]
}

const FORM: &str = "application/x-www-form-urlencoded";

fn form_of(fields: &Value) -> Vec<u8> {
    let mut form = form_urlencoded::Serializer::new(String::new());
    for (k, v) in fields.as_object().into_iter().flatten() {
        let v = v.as_str().map_or_else(|| v.to_string(), str::to_owned);
        form.append_pair(k, &v);
    }
    form.finish().into_bytes()
}

/// Where and how something people did is POSTed: (path, content type, body).
fn request_of(kind: Kind, payload: &Value) -> (&'static str, &'static str, Vec<u8>) {
    match kind {
        Kind::Event => (
            "/slack/events",
            "application/json",
            payload.to_string().into_bytes(),
        ),
        Kind::Interactive => {
            let body = form_of(&json!({"payload": payload.to_string()}));
            ("/slack/interactions", FORM, body)
        }
        Kind::SlashCommand => ("/slack/commands", FORM, form_of(payload)),
    }
}

/// An HTTP answer.
struct HttpAnswer {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

/// One HTTP/1.1 POST on a fresh connection.
async fn post(
    addr: &str,
    path: &str,
    content_type: &str,
    body: &[u8],
    headers: &[(String, String)],
) -> std::io::Result<HttpAnswer> {
    let mut stream = TcpStream::connect(addr).await?;
    let mut head = format!(
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\nUser-Agent: Slackbot 1.0 (+https://api.slack.com/robots)\r\n\
         Accept: */*\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).await?;
    stream.write_all(body).await?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).await?;
    let bad = || std::io::Error::new(std::io::ErrorKind::InvalidData, "not an HTTP answer");
    parse_answer(&raw).ok_or_else(bad)
}

fn parse_answer(raw: &[u8]) -> Option<HttpAnswer> {
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = String::from_utf8_lossy(&raw[..split]);
    let mut lines = head.lines();
    let status = lines.next()?.split(' ').nth(1)?.parse().ok()?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let header = |name: &str| {
        headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    };
    let rest = &raw[split + 4..];
    let chunked =
        header("transfer-encoding").is_some_and(|v| v.to_ascii_lowercase().contains("chunked"));
    let length = header("content-length").and_then(|v| v.parse::<usize>().ok());
    let body = match (chunked, length) {
        (true, _) => dechunk(rest),
        (false, Some(length)) => rest[..length.min(rest.len())].to_vec(),
        (false, None) => rest.to_vec(),
    };
    Some(HttpAnswer {
        status,
        headers,
        body,
    })
}

fn dechunk(mut rest: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(end) = rest.windows(2).position(|w| w == b"\r\n") {
        let size = String::from_utf8_lossy(&rest[..end]);
        let size = size.split(';').next().unwrap_or_default().trim().to_owned();
        let Ok(size) = usize::from_str_radix(&size, 16) else {
            break;
        };
        rest = &rest[end + 2..];
        let take = size.min(rest.len());
        out.extend_from_slice(&rest[..take]);
        if size == 0 || take < size {
            break;
        }
        rest = rest.get(size + 2..).unwrap_or_default();
    }
    out
}

/// POST everything people do, in order, for as long as the runtime lives.
pub(super) async fn sender(fake: FakeSlack, mut rx: UnboundedReceiver<usize>) {
    while let Some(at) = rx.recv().await {
        deliver(&fake, at).await;
    }
}

/// The daemon's address, once it is known.
async fn daemon(fake: &FakeSlack) -> String {
    loop {
        if let Some(addr) = fake.lock().ev.daemon.clone() {
            return addr;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// What became of one POST: its status and whether it said `X-Slack-No-Retry: 1`.
type Outcome = Option<(u16, bool)>;

/// POST envelope `at`, again and again as Slack would until it is answered 2xx.
async fn deliver(fake: &FakeSlack, at: usize) {
    let (id, kind, payload, mut attempt, options) = {
        let inner = fake.lock();
        let Some(env) = inner.envs.get(at) else {
            return;
        };
        let options = inner.options.clone();
        (
            env.id.clone(),
            env.kind,
            env.payload.clone(),
            env.retry_attempt,
            options,
        )
    };
    let (path, content_type, body) = request_of(kind, &payload);
    let mut reason = "http_timeout";
    loop {
        let addr = daemon(fake).await;
        let retry = (attempt > 0).then_some((attempt, reason));
        let mut headers = signed(&body, Signing::Valid);
        if let Some((n, why)) = retry {
            headers.push(("X-Slack-Retry-Num".into(), n.to_string()));
            headers.push(("X-Slack-Retry-Reason".into(), why.into()));
        }
        let index = fake
            .lock()
            .start_delivery(&id, kind, path, retry, Signing::Valid, Some(at));
        let (done, outcome) = tokio::sync::oneshot::channel::<Outcome>();
        let (task_fake, task_body) = (fake.clone(), body.clone());
        tokio::spawn(async move {
            let sent = Instant::now();
            let answer = tokio::time::timeout(
                LONGEST,
                post(&addr, path, content_type, &task_body, &headers),
            )
            .await;
            let answer = answer.ok().and_then(Result::ok);
            let mut inner = task_fake.lock();
            inner.finish_delivery(index, Some(at), answer.as_ref(), sent.elapsed());
            let outcome = answer.map(|a| {
                let no_retry = a
                    .headers
                    .iter()
                    .any(|(k, v)| k == "x-slack-no-retry" && v == "1");
                (a.status, no_retry)
            });
            let _ = done.send(outcome);
        });
        let next = match tokio::time::timeout(options.redeliver_after, outcome).await {
            Ok(Ok(Some((status, _)))) if (200..300).contains(&status) => return,
            Ok(Ok(Some((_, true)))) => return,
            Ok(Ok(Some(_))) => "http_error",
            Ok(_) => "connection_failed",
            Err(_) => "http_timeout",
        };
        if kind != Kind::Event {
            // Slack does not deliver presses and commands again: the person saw an error.
            let mut inner = fake.lock();
            if let Some(env) = inner.envs.get_mut(at).filter(|e| e.acked.is_none()) {
                env.expired = true;
            }
            return;
        }
        if attempt >= options.max_redeliveries {
            return;
        }
        if next != "http_timeout" {
            tokio::time::sleep(options.retry_delay).await;
        }
        attempt += 1;
        reason = next;
        if let Some(env) = fake.lock().envs.get_mut(at) {
            env.retry_attempt = attempt;
            env.retry_reason = "timeout";
        }
    }
}

impl Inner {
    /// Record a POST about to go out; its index in the deliveries.
    fn start_delivery(
        &mut self,
        id: &str,
        kind: Kind,
        path: &str,
        retry: Option<(u32, &str)>,
        signing: Signing,
        at: Option<usize>,
    ) -> usize {
        let now = Instant::now();
        self.ev.deliveries.push(Delivery {
            id: id.to_owned(),
            kind,
            path: path.to_owned(),
            retry_num: retry.map(|(n, _)| n),
            retry_reason: retry.map(|(_, why)| why.to_owned()),
            signing,
            status: None,
            body: String::new(),
            at: now,
            answered_in: None,
        });
        if let Some(env) = at.and_then(|at| self.envs.get_mut(at)) {
            env.last_sent = Some(now);
            env.sends.push((now, retry.map_or(0, |(n, _)| n)));
        }
        self.ev.deliveries.len() - 1
    }

    /// Record the answer to POST `index` (of envelope `at`): a 2xx acknowledges it; the
    /// body of a slash command's answer, if it came in time, answers the command.
    fn finish_delivery(
        &mut self,
        index: usize,
        at: Option<usize>,
        answer: Option<&HttpAnswer>,
        took: Duration,
    ) {
        let now = Instant::now();
        let window = self.options.redeliver_after;
        let Some(delivery) = self.ev.deliveries.get_mut(index) else {
            return;
        };
        delivery.answered_in = Some(took);
        let Some(answer) = answer else {
            return;
        };
        let text = String::from_utf8_lossy(&answer.body).into_owned();
        delivery.status = Some(answer.status);
        delivery.body = text.clone();
        let Some(env) = at.and_then(|at| self.envs.get_mut(at)) else {
            return;
        };
        if !(200..300).contains(&answer.status) || env.acked.is_some() {
            return;
        }
        env.acked = Some(now);
        let body = serde_json::from_str::<Value>(&text)
            .ok()
            .filter(Value::is_object)
            .or_else(|| (!text.trim().is_empty()).then(|| json!({"text": text})));
        env.ack_payload = body.clone();
        if env.kind == Kind::SlashCommand
            && took < window
            && let Some(body) = body
        {
            let id = env.id.clone();
            self.respond(&id, body, "ack");
        }
    }
}

/// The Events API's helpers and records.
impl FakeSlack {
    /// Every POST to the daemon so far (retries and the test's own posts included).
    pub fn deliveries(&self) -> Vec<Delivery> {
        self.lock().ev.deliveries.clone()
    }

    /// POST `event` (an `event_callback`, or anything) to `/slack/events` now, signed as
    /// `signing` says, with `X-Slack-Retry-Num` when `retry_num` is given; the daemon's
    /// status and body (status 0: no answer, with the reason).
    pub async fn post_event(
        &self,
        event: &Value,
        signing: Signing,
        retry_num: Option<u32>,
    ) -> (u16, String) {
        let body = event.to_string().into_bytes();
        self.post_raw(
            Kind::Event,
            "/slack/events",
            "application/json",
            body,
            signing,
            retry_num,
        )
        .await
    }

    /// POST a press (`block_actions` payload) to `/slack/interactions` as Slack does.
    pub async fn post_interaction(
        &self,
        payload: &Value,
        signing: Signing,
        retry_num: Option<u32>,
    ) -> (u16, String) {
        let (path, content_type, body) = request_of(Kind::Interactive, payload);
        self.post_raw(
            Kind::Interactive,
            path,
            content_type,
            body,
            signing,
            retry_num,
        )
        .await
    }

    /// POST slash-command `fields` (an object of strings) to `/slack/commands`.
    pub async fn post_command(
        &self,
        fields: &Value,
        signing: Signing,
        retry_num: Option<u32>,
    ) -> (u16, String) {
        let (path, content_type, body) = request_of(Kind::SlashCommand, fields);
        self.post_raw(
            Kind::SlashCommand,
            path,
            content_type,
            body,
            signing,
            retry_num,
        )
        .await
    }

    /// Slack's `url_verification` with `challenge`, signed.
    pub async fn url_verification(&self, challenge: &str) -> (u16, String) {
        let event = json!({"token": VERIFICATION_TOKEN, "challenge": challenge,
                           "type": "url_verification"});
        self.post_event(&event, Signing::Valid, None).await
    }

    /// POST `body` to `path` on the daemon, signed as `signing` says.
    pub async fn post_raw(
        &self,
        kind: Kind,
        path: &str,
        content_type: &str,
        body: Vec<u8>,
        signing: Signing,
        retry_num: Option<u32>,
    ) -> (u16, String) {
        let Some(addr) = self.lock().ev.daemon.clone() else {
            return (0, "no daemon attached".into());
        };
        let mut headers = signed(&body, signing);
        if let Some(n) = retry_num {
            headers.push(("X-Slack-Retry-Num".into(), n.to_string()));
            headers.push(("X-Slack-Retry-Reason".into(), "http_timeout".into()));
        }
        let retry = retry_num.map(|n| (n, "http_timeout"));
        let index = self
            .lock()
            .start_delivery("", kind, path, retry, signing, None);
        let sent = Instant::now();
        let answer = tokio::time::timeout(
            Duration::from_secs(10),
            post(&addr, path, content_type, &body, &headers),
        )
        .await;
        let (answer, failure) = match answer {
            Ok(Ok(answer)) => (Some(answer), String::new()),
            Ok(Err(e)) => (None, e.to_string()),
            Err(_) => (None, "no answer within 10 s".into()),
        };
        self.lock()
            .finish_delivery(index, None, answer.as_ref(), sent.elapsed());
        match answer {
            Some(a) => (a.status, String::from_utf8_lossy(&a.body).into_owned()),
            None => (0, failure),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_read_plain_and_chunked() {
        let plain = b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\nX-Slack-No-Retry: 1\r\n\r\nhello";
        let a = parse_answer(plain).unwrap();
        assert_eq!((a.status, a.body.as_slice()), (200, &b"hello"[..]));
        assert!(a.headers.contains(&("x-slack-no-retry".into(), "1".into())));
        let chunked = b"HTTP/1.1 401 Unauthorized\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\n2;x=y\r\nde\r\n0\r\n\r\n";
        let a = parse_answer(chunked).unwrap();
        assert_eq!((a.status, a.body.as_slice()), (401, &b"abcde"[..]));
        assert!(parse_answer(b"garbage").is_none());
    }

    #[test]
    fn signatures_are_slacks() {
        // The example of Slack's documentation on verifying requests.
        let body = b"token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c";
        let signature = sign("8f742231b10e8888abcd99yyyzzz85a5", "1531420618", body);
        assert_eq!(
            signature,
            "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503"
        );
    }
}
