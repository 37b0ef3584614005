//! Meta's webhook deliveries to the daemon: the notification envelope (`object`, `entry`,
//! `changes`, `value`) in Meta's key order, serialised as Meta serialises (compact, `\uXXXX`
//! for every non-ASCII character, `\/` for `/`) and signed (`X-Hub-Signature-256:
//! sha256=<hex HMAC-SHA256(app secret, raw body)>`); the sender task that POSTs them one at
//! a time in order, each attempted again (bounded) until the daemon answers 200; the
//! subscription handshake; and unsigned or badly signed POSTs for tests.

use std::time::{Duration, Instant};

use hmac::{Hmac, KeyInit, Mac};
use serde::Serialize;
use serde_json::{Value, json};
use sha2::Sha256;
use tokio::sync::mpsc::UnboundedReceiver;

use super::{FakeWhatsApp, Options, Outgoing, WABA_ID, unix_now};

/// How long one POST may take before it counts as unanswered.
const POST_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a queued delivery waits for a daemon to be attached.
const ATTACH_WAIT: Duration = Duration::from_secs(30);

/// How a POST is signed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signing {
    /// With the app secret.
    Good,
    /// With another secret.
    Bad,
    /// Without `X-Hub-Signature-256`.
    Missing,
}

/// One POST (attempt) to the daemon.
#[derive(Debug, Clone)]
pub struct Delivery {
    /// The raw body, exactly as sent.
    pub body: String,
    /// People's message ids it carried.
    pub wamids: Vec<String>,
    /// 1 for the first attempt; 0 for a test's own [`FakeWhatsApp::post_raw`].
    pub attempt: u32,
    pub signing: Signing,
    /// The daemon's status; 0 when no answer came (no daemon, no connection, timeout).
    pub status: u16,
    /// The daemon's answer, or why there was none.
    pub answer: String,
    /// When it was sent, and when the answer came.
    pub at: Instant,
    pub answered_at: Option<Instant>,
}

/// `json` as Meta writes it: compact, every non-ASCII character as `\uXXXX` (lowercase hex,
/// surrogate pairs beyond the BMP) and `/` as `\/`.
pub fn meta_json(value: &impl Serialize) -> Vec<u8> {
    let compact = serde_json::to_string(value).unwrap_or_default();
    let mut out = String::with_capacity(compact.len() + 16);
    // Outside strings JSON is ASCII without `/`, so escaping every character is escaping
    // inside strings only.
    for c in compact.chars() {
        if c == '/' {
            out.push_str("\\/");
        } else if c.is_ascii() {
            out.push(c);
        } else {
            let mut units = [0u16; 2];
            for unit in c.encode_utf16(&mut units) {
                out.push_str(&format!("\\u{unit:04x}"));
            }
        }
    }
    out.into_bytes()
}

/// The `X-Hub-Signature-256` value of `body`: `sha256=<lowercase hex>`.
pub fn signature(app_secret: &str, body: &[u8]) -> String {
    let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(app_secret.as_bytes()) else {
        return String::new();
    };
    mac.update(body);
    format!("sha256={}", hex::encode(mac.finalize().into_bytes()))
}

// ---- The envelope, in Meta's order ----

#[derive(Serialize)]
struct Notification {
    object: &'static str,
    entry: Vec<Entry>,
}

#[derive(Serialize)]
struct Entry {
    id: &'static str,
    changes: Vec<Change>,
}

#[derive(Serialize)]
struct Change {
    value: ChangeValue,
    field: &'static str,
}

#[derive(Serialize)]
struct Metadata {
    display_phone_number: String,
    phone_number_id: String,
}

#[derive(Serialize)]
struct ChangeValue {
    messaging_product: &'static str,
    metadata: Metadata,
    #[serde(skip_serializing_if = "Option::is_none")]
    contacts: Option<Vec<Value>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    messages: Option<Vec<Value>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    statuses: Option<Vec<Value>>,
}

/// What one `change` carries.
pub(super) enum ChangeOf {
    /// People's messages with their senders' `contacts` entries.
    Messages {
        contacts: Vec<Value>,
        messages: Vec<Value>,
    },
    Statuses(Vec<Value>),
}

/// A notification of `entries` (each a list of changes), serialised as Meta does.
pub(super) fn notification(options: &Options, entries: Vec<Vec<ChangeOf>>) -> Vec<u8> {
    let metadata = || Metadata {
        display_phone_number: options.display_phone_number.clone(),
        phone_number_id: options.phone_number_id.clone(),
    };
    let change = |of: ChangeOf| {
        let (contacts, messages, statuses) = match of {
            ChangeOf::Messages { contacts, messages } => (Some(contacts), Some(messages), None),
            ChangeOf::Statuses(statuses) => (None, None, Some(statuses)),
        };
        Change {
            value: ChangeValue {
                messaging_product: "whatsapp",
                metadata: metadata(),
                contacts,
                messages,
                statuses,
            },
            field: "messages",
        }
    };
    let entry = entries.into_iter().map(|changes| Entry {
        id: WABA_ID,
        changes: changes.into_iter().map(change).collect(),
    });
    meta_json(&Notification {
        object: "whatsapp_business_account",
        entry: entry.collect(),
    })
}

/// A notification with `statuses` in one change.
pub(super) fn statuses_body(options: &Options, statuses: Vec<Value>) -> Vec<u8> {
    notification(options, vec![vec![ChangeOf::Statuses(statuses)]])
}

/// One status of the bot's message `wamid` to `recipient`: `sent` and `delivered` carry
/// `conversation` and `pricing`, `failed` its `errors`.
pub(super) fn status_object(
    wamid: &str,
    status: &str,
    recipient: &str,
    errors: Option<Value>,
) -> Value {
    let now = unix_now();
    let mut object = json!({"id": wamid, "status": status, "timestamp": now.to_string(),
                            "recipient_id": recipient});
    if matches!(status, "sent" | "delivered") {
        object["conversation"] = json!({"id": format!("CONVERSATION{recipient}"),
            "expiration_timestamp": (now + 24 * 60 * 60).to_string(),
            "origin": {"type": "service"}});
        object["pricing"] = json!({"billable": false, "pricing_model": "PMP",
                                   "category": "service", "type": "free_customer_service"});
    }
    if let Some(errors) = errors {
        object["errors"] = errors;
    }
    object
}

/// People's message ids in a notification.
fn wamids_of(payload: &Value) -> Vec<String> {
    let entries = payload["entry"].as_array().into_iter().flatten();
    let changes = entries.flat_map(|e| e["changes"].as_array().into_iter().flatten());
    let messages = changes.flat_map(|c| c["value"]["messages"].as_array().into_iter().flatten());
    let ids = messages.filter_map(|m| m["id"].as_str());
    ids.map(str::to_owned).collect()
}

// ---- Sending ----

/// POST everything queued, in order, for as long as the runtime lives.
pub(super) async fn sender(
    fake: FakeWhatsApp,
    mut rx: UnboundedReceiver<(Outgoing, Option<Instant>)>,
) {
    while let Some((outgoing, not_before)) = rx.recv().await {
        if let Some(at) = not_before {
            tokio::time::sleep_until(at.into()).await;
        }
        fake.post_with_retries(outgoing.body, outgoing.wamids).await;
    }
}

impl FakeWhatsApp {
    /// The daemon's address, waiting at most `wait` for one to be attached.
    async fn daemon(&self, wait: Duration) -> Option<String> {
        let deadline = Instant::now() + wait;
        loop {
            if let Some(addr) = self.lock().daemon.clone() {
                return Some(addr);
            }
            if Instant::now() >= deadline {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// One POST of `body` to the webhook, recorded; the status (0: no answer) and answer.
    async fn post_once(
        &self,
        body: &[u8],
        wamids: &[String],
        signing: Signing,
        attempt: u32,
        wait: Duration,
    ) -> (u16, String) {
        let (secret, path) = {
            let inner = self.lock();
            (
                inner.options.app_secret.clone(),
                inner.options.webhook_path.clone(),
            )
        };
        let at = Instant::now();
        let (status, answer) = match self.daemon(wait).await {
            None => (0, "no daemon attached".to_owned()),
            Some(addr) => {
                let mut request = self
                    .client
                    .post(format!("http://{addr}{path}"))
                    .timeout(POST_TIMEOUT)
                    .header("Content-Type", "application/json")
                    .body(body.to_vec());
                match signing {
                    Signing::Good => {
                        request = request.header("X-Hub-Signature-256", signature(&secret, body));
                    }
                    Signing::Bad => {
                        let forged = signature("not-the-app-secret", body);
                        request = request.header("X-Hub-Signature-256", forged);
                    }
                    Signing::Missing => {}
                }
                match request.send().await {
                    Ok(response) => {
                        let status = response.status().as_u16();
                        (status, response.text().await.unwrap_or_default())
                    }
                    Err(e) => (0, e.to_string()),
                }
            }
        };
        let answered_at = (status != 0).then(Instant::now);
        let mut inner = self.lock();
        if status == 200 {
            let now = Instant::now();
            for wamid in wamids {
                inner.acks.entry(wamid.clone()).or_insert(now);
            }
        }
        inner.deliveries.push(Delivery {
            body: String::from_utf8_lossy(body).into_owned(),
            wamids: wamids.to_vec(),
            attempt,
            signing,
            status,
            answer: answer.clone(),
            at,
            answered_at,
        });
        (status, answer)
    }

    /// POST `body` signed, attempted again after each answer that is not 200 (no answer
    /// included) as Meta does, at most [`super::Options::delivery_attempts`] times; the last
    /// status.
    async fn post_with_retries(&self, body: Vec<u8>, wamids: Vec<String>) -> u16 {
        let (attempts, delay) = {
            let inner = self.lock();
            (
                inner.options.delivery_attempts.max(1),
                inner.options.retry_delay,
            )
        };
        let mut status = 0;
        for attempt in 1..=attempts {
            if attempt > 1 {
                tokio::time::sleep(delay).await;
            }
            let wait = if attempt == 1 {
                ATTACH_WAIT
            } else {
                Duration::ZERO
            };
            (status, _) = self
                .post_once(&body, &wamids, Signing::Good, attempt, wait)
                .await;
            if status == 200 {
                break;
            }
        }
        status
    }

    /// POST `payload` now (serialised and signed as Meta does, not queued behind people's
    /// messages), attempted again like Meta until answered 200; the last status.
    pub async fn deliver(&self, payload: &Value) -> u16 {
        self.post_with_retries(meta_json(payload), wamids_of(payload))
            .await
    }

    /// POST `body` once, signed as `signing` says; the daemon's status and answer (status 0:
    /// no answer, with the reason).
    pub async fn post_raw(&self, body: Vec<u8>, signing: Signing) -> (u16, String) {
        let wamids = serde_json::from_slice(&body)
            .map(|payload: Value| wamids_of(&payload))
            .unwrap_or_default();
        self.post_once(&body, &wamids, signing, 0, Duration::ZERO)
            .await
    }

    /// Meta's subscription handshake: `GET {webhook_path}?hub.mode=…&hub.verify_token=…&
    /// hub.challenge=…`; the daemon's status and body (0: no answer).
    pub async fn handshake(&self, mode: &str, token: &str, challenge: &str) -> (u16, String) {
        let Some(addr) = self.daemon(Duration::ZERO).await else {
            return (0, "no daemon attached".into());
        };
        let path = self.lock().options.webhook_path.clone();
        let query = form_urlencoded::Serializer::new(String::new())
            .append_pair("hub.mode", mode)
            .append_pair("hub.verify_token", token)
            .append_pair("hub.challenge", challenge)
            .finish();
        let request = self.client.get(format!("http://{addr}{path}?{query}"));
        match request.timeout(POST_TIMEOUT).send().await {
            Ok(response) => {
                let status = response.status().as_u16();
                (status, response.text().await.unwrap_or_default())
            }
            Err(e) => (0, e.to_string()),
        }
    }

    /// Every POST to the daemon so far (each attempt, and the tests' own).
    pub fn deliveries(&self) -> Vec<Delivery> {
        self.lock().deliveries.clone()
    }
}
