//! Meta's 24-hour customer-service window, per contact: free-form messages (text, buttons,
//! media) may go to a person only within 24 hours of their last message. The time of each
//! contact's last inbound message is kept durably (the sink's cursors, written before the
//! message itself is recorded), so a restart still knows. A refusal from Meta (131047)
//! closes a contact's window until they write again (kept durably too: the time of the
//! refused send), and the re-engagement template is sent at most once per closed window.
//! With a store, both are read from it at every check, since another node sharing the
//! store may have received the contact's newest message, or Meta's refusal.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use hermes_adapter::{InboundSink, Platform, SinkError};

/// How long the window stays open after a person's message.
pub const WINDOW: Duration = Duration::from_secs(24 * 60 * 60);
/// Held back from the end of the window: a message sent in its last minute may arrive late.
const MARGIN: Duration = Duration::from_secs(60);
/// How long after a template that could not be sent (Meta did not answer) another may go.
const TEMPLATE_RETRY: Duration = Duration::from_secs(60 * 60);
/// How many recent sends are remembered by their wamid (to whom each went).
const REMEMBERED_SENDS: usize = 10_000;
/// How long a send's recipient is kept in the store (Meta's statuses come within days).
const SENDS_KEPT_FOR: Duration = Duration::from_secs(7 * 24 * 60 * 60);

/// Whether a free-form message may go to a contact now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Window {
    Open,
    /// Closed since `last` (unix seconds of their last message; `None` = never wrote or
    /// Meta refused since).
    Closed {
        last: Option<u64>,
    },
    /// Nothing is known (no message from them on record): Meta decides.
    Unknown,
}

#[derive(Default)]
struct Contact {
    /// Unix seconds of the last message from them; `None` until loaded or seen.
    last_inbound: Option<u64>,
    /// Unix seconds of the newest send Meta refused as outside the window.
    refused_at: Option<u64>,
    /// Unix seconds when the re-engagement template last went to them.
    reengaged_at: Option<u64>,
}

impl Contact {
    /// Meta refused a message to them as outside the window since their last message.
    fn refused(&self) -> bool {
        self.refused_at
            .is_some_and(|refused| self.last_inbound.is_none_or(|last| last < refused))
    }
}

/// The last [`REMEMBERED_SENDS`] sends: wamid → (to whom, unix seconds), oldest first.
#[derive(Default)]
struct RecentSends {
    by_id: HashMap<String, (String, u64)>,
    order: VecDeque<String>,
}

/// The windows of every contact of one business number.
pub struct Windows {
    phone_number_id: String,
    sink: OnceLock<Arc<dyn InboundSink>>,
    contacts: Mutex<HashMap<String, Contact>>,
    /// Recent sends: wamid → the `wa_id` it went to (Meta's statuses name the recipient by
    /// its own id, which is not always the number the gateway sent to) and when.
    sends: Mutex<RecentSends>,
}

/// Unix seconds now.
pub fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

impl Windows {
    pub fn new(phone_number_id: &str) -> Windows {
        Windows {
            phone_number_id: phone_number_id.to_owned(),
            sink: OnceLock::new(),
            contacts: Mutex::new(HashMap::new()),
            sends: Mutex::new(RecentSends::default()),
        }
    }

    /// Where the times are kept (the daemon's sink; given once it exists).
    pub fn attach(&self, sink: Arc<dyn InboundSink>) {
        let _ = self.sink.set(sink);
    }

    fn key(&self, what: &str, wa_id: &str) -> String {
        format!("{what}:{}:{wa_id}", self.phone_number_id)
    }

    /// `wa_id` wrote at `at` (Meta's timestamp): keep it durably if it is their latest.
    pub async fn opened(&self, wa_id: &str, at: u64) -> Result<(), SinkError> {
        self.load(wa_id).await;
        let newer = {
            let mut contacts = self.contacts.lock().expect("windows lock");
            let contact = contacts.entry(wa_id.to_owned()).or_default();
            let newer = contact.last_inbound.is_none_or(|last| at > last);
            if newer {
                contact.last_inbound = Some(at);
            }
            newer
        };
        match (newer, self.sink.get()) {
            (true, Some(sink)) => {
                sink.save_cursor(
                    Platform::WhatsApp,
                    &self.key("window", wa_id),
                    at.to_string(),
                )
                .await
            }
            _ => Ok(()),
        }
    }

    /// Message `wamid` went to `wa_id` at `at`: remembered here, and in the store (in the
    /// background: the send is done) for a node that gets Meta's status for it, or this
    /// one after a restart.
    pub fn sent(&self, wamid: &str, wa_id: &str, at: u64) {
        {
            let mut sends = self.sends.lock().expect("sends lock");
            let RecentSends { by_id, order } = &mut *sends;
            if by_id
                .insert(wamid.to_owned(), (wa_id.to_owned(), at))
                .is_none()
            {
                order.push_back(wamid.to_owned());
            }
            while order.len() > REMEMBERED_SENDS {
                if let Some(old) = order.pop_front() {
                    by_id.remove(&old);
                }
            }
        }
        if let Some(sink) = self.sink.get().cloned() {
            let key = self.key("sent", wamid);
            let value = format!("{at} {wa_id}");
            tokio::spawn(async move {
                let kept = sink
                    .remember(Platform::WhatsApp, &key, value, SENDS_KEPT_FOR)
                    .await;
                if let Err(e) = kept {
                    tracing::warn!(error = %e, "whatsapp: cannot keep a send's recipient in the store; a refusal reported to another node is judged by the status's time");
                }
            });
        }
    }

    /// Whom message `wamid` went to and when, if it is a recent send (of this node's, or
    /// of any node's from the store).
    pub async fn recipient(&self, wamid: &str) -> Option<(String, u64)> {
        let here = self
            .sends
            .lock()
            .expect("sends lock")
            .by_id
            .get(wamid)
            .cloned();
        if here.is_some() {
            return here;
        }
        let sink = self.sink.get()?;
        match sink
            .recall(Platform::WhatsApp, &self.key("sent", wamid))
            .await
        {
            Ok(Some(kept)) => {
                let (at, wa_id) = kept.split_once(' ')?;
                Some((wa_id.to_owned(), at.parse().ok()?))
            }
            Ok(None) => None,
            Err(e) => {
                tracing::warn!(error = %e, "whatsapp: cannot read a send's recipient from the store");
                None
            }
        }
    }

    /// Meta refused a message sent to `wa_id` at `at` (unix seconds) as outside the window:
    /// closed until a newer message of theirs comes, unless one came after that send
    /// (statuses arrive late and out of order).
    pub async fn refused(&self, wa_id: &str, at: u64) {
        self.load(wa_id).await;
        let newer = {
            let mut contacts = self.contacts.lock().expect("windows lock");
            let contact = contacts.entry(wa_id.to_owned()).or_default();
            let newer = contact.refused_at.is_none_or(|refused| at > refused);
            if newer {
                contact.refused_at = Some(at);
            }
            newer
        };
        if newer && let Some(sink) = self.sink.get() {
            let saved = sink
                .save_cursor(
                    Platform::WhatsApp,
                    &self.key("refused", wa_id),
                    at.to_string(),
                )
                .await;
            if let Err(e) = saved {
                tracing::warn!(error = %e, "whatsapp: cannot keep Meta's refusal in the store; only this node knows the window closed");
            }
        }
    }

    /// The window of `wa_id` at `now`.
    pub async fn state(&self, wa_id: &str, now: u64) -> Window {
        self.load(wa_id).await;
        let contacts = self.contacts.lock().expect("windows lock");
        let Some(contact) = contacts.get(wa_id) else {
            return Window::Unknown;
        };
        match contact.last_inbound {
            Some(last) if contact.refused() => Window::Closed { last: Some(last) },
            Some(last) if now.saturating_sub(last) < (WINDOW - MARGIN).as_secs() => Window::Open,
            Some(last) => Window::Closed { last: Some(last) },
            None if contact.refused() => Window::Closed { last: None },
            None => Window::Unknown,
        }
    }

    /// Whether the re-engagement template should go to `wa_id` now: not yet since their
    /// window closed (and at most once a day). Marks it sent; [`Windows::template_unsent`]
    /// allows another try an hour later.
    pub async fn take_reengagement(&self, wa_id: &str, now: u64) -> bool {
        let key = self.key("reengaged", wa_id);
        let stored = match self.sink.get() {
            Some(sink) => sink
                .load_cursor(Platform::WhatsApp, &key)
                .await
                .ok()
                .flatten()
                .and_then(|v| v.parse::<u64>().ok()),
            None => None,
        };
        let take = {
            let mut contacts = self.contacts.lock().expect("windows lock");
            let contact = contacts.entry(wa_id.to_owned()).or_default();
            let sent = contact.reengaged_at.max(stored);
            let last = contact.last_inbound.unwrap_or(0);
            let take =
                sent.is_none_or(|sent| sent < last || now.saturating_sub(sent) >= WINDOW.as_secs());
            if take {
                contact.reengaged_at = Some(now);
            }
            take
        };
        if take && let Some(sink) = self.sink.get() {
            let _ = sink
                .save_cursor(Platform::WhatsApp, &key, now.to_string())
                .await;
        }
        take
    }

    /// The template did not get through to Meta (no answer, a passing failure): another
    /// may go in an hour (not at once: it may have been sent after all).
    pub async fn template_unsent(&self, wa_id: &str, now: u64) {
        let retry_from = now.saturating_sub((WINDOW - TEMPLATE_RETRY).as_secs());
        if let Some(contact) = self.contacts.lock().expect("windows lock").get_mut(wa_id) {
            contact.reengaged_at = Some(retry_from);
        }
        if let Some(sink) = self.sink.get() {
            let _ = sink
                .save_cursor(
                    Platform::WhatsApp,
                    &self.key("reengaged", wa_id),
                    retry_from.to_string(),
                )
                .await;
        }
    }

    /// Read a contact's last inbound time and Meta's last refusal from the store (every
    /// time: another node may have seen newer ones); what this node saw stays when the
    /// store cannot be read.
    async fn load(&self, wa_id: &str) {
        let Some(sink) = self.sink.get() else {
            return;
        };
        let read = |what: &'static str| {
            let key = self.key(what, wa_id);
            async move {
                sink.load_cursor(Platform::WhatsApp, &key)
                    .await
                    .map(|value| value.and_then(|v| v.parse::<u64>().ok()))
            }
        };
        let (last_inbound, refused_at) = match (read("window").await, read("refused").await) {
            (Ok(last), Ok(refused)) => (last, refused),
            (Err(e), _) | (_, Err(e)) => {
                tracing::warn!(error = %e, "whatsapp: cannot read a contact's 24-hour window; going by what this node saw");
                return;
            }
        };
        let mut contacts = self.contacts.lock().expect("windows lock");
        let contact = contacts.entry(wa_id.to_owned()).or_default();
        contact.last_inbound = contact.last_inbound.max(last_inbound);
        contact.refused_at = contact.refused_at.max(refused_at);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY: u64 = 24 * 60 * 60;

    #[tokio::test]
    async fn the_window_follows_the_last_message_and_metas_refusals() {
        let windows = Windows::new("100");
        assert_eq!(windows.state("a", 1_000_000).await, Window::Unknown);
        windows.opened("a", 1_000_000).await.unwrap();
        assert_eq!(
            windows.state("a", 1_000_000 + DAY - 3600).await,
            Window::Open
        );
        assert_eq!(
            windows.state("a", 1_000_000 + DAY).await,
            Window::Closed {
                last: Some(1_000_000)
            }
        );
        // An older message does not move the window back.
        windows.opened("a", 900_000).await.unwrap();
        assert_eq!(windows.state("a", 1_000_000 + 10).await, Window::Open);
        // Meta knows better: closed until they write again (an old message redelivered
        // does not count).
        windows.refused("a", 1_000_100).await;
        let closed = |w: Window| matches!(w, Window::Closed { .. });
        assert!(closed(windows.state("a", 1_000_200).await));
        windows.opened("a", 1_000_000).await.unwrap();
        assert!(closed(windows.state("a", 1_000_200).await));
        windows.opened("a", 1_000_300).await.unwrap();
        assert_eq!(windows.state("a", 1_000_400).await, Window::Open);
        // A late refusal of a message sent before their newest one does not close it.
        windows.refused("a", 1_000_250).await;
        assert_eq!(windows.state("a", 1_000_400).await, Window::Open);
        windows.refused("never-wrote", 5).await;
        assert_eq!(
            windows.state("never-wrote", 10).await,
            Window::Closed { last: None }
        );
    }

    /// Cursors kept in memory: the store two nodes share.
    #[derive(Default)]
    struct SharedCursors(Mutex<HashMap<String, String>>);

    #[async_trait::async_trait]
    impl InboundSink for SharedCursors {
        async fn accept(
            &self,
            _: hermes_adapter::Inbound,
        ) -> Result<hermes_adapter::Accepted, SinkError> {
            Ok(hermes_adapter::Accepted::New)
        }
        async fn load_cursor(&self, _: Platform, key: &str) -> Result<Option<String>, SinkError> {
            Ok(self.0.lock().unwrap().get(key).cloned())
        }
        async fn save_cursor(
            &self,
            _: Platform,
            key: &str,
            value: String,
        ) -> Result<(), SinkError> {
            self.0.lock().unwrap().insert(key.to_owned(), value);
            Ok(())
        }
        async fn remember(
            &self,
            _: Platform,
            key: &str,
            value: String,
            _: Duration,
        ) -> Result<(), SinkError> {
            let key = format!("memory {key}");
            self.0.lock().unwrap().insert(key, value);
            Ok(())
        }
        async fn recall(&self, _: Platform, key: &str) -> Result<Option<String>, SinkError> {
            Ok(self
                .0
                .lock()
                .unwrap()
                .get(&format!("memory {key}"))
                .cloned())
        }
        async fn delivery_report(
            &self,
            _: Platform,
            _: String,
            _: hermes_adapter::DeliveryStatus,
        ) -> Result<(), SinkError> {
            Ok(())
        }
    }

    #[tokio::test]
    async fn a_node_sees_the_window_and_the_refusals_another_node_saw() {
        let store: Arc<dyn InboundSink> = Arc::new(SharedCursors::default());
        let (a, b) = (Windows::new("100"), Windows::new("100"));
        a.attach(store.clone());
        b.attach(store);
        a.opened("p", 1_000_000).await.unwrap();
        assert_eq!(b.state("p", 1_000_010).await, Window::Open);
        // Meta's refusal reaches b; a, which sends next, knows the window is closed.
        b.refused("p", 1_000_020).await;
        assert!(matches!(
            a.state("p", 1_000_030).await,
            Window::Closed { .. }
        ));
        // The person writes again, through b: a sees the window open again.
        b.opened("p", 1_000_040).await.unwrap();
        assert_eq!(a.state("p", 1_000_050).await, Window::Open);
    }

    /// Meta's status for a send made by node a reaches node b: b knows whom it went to
    /// (Meta names the recipient by its own id) and when, so a refusal of a message sent
    /// before the person's newest one does not close their window.
    #[tokio::test]
    async fn a_node_knows_whom_and_when_another_nodes_send_went() {
        let store: Arc<dyn InboundSink> = Arc::new(SharedCursors::default());
        let (a, b) = (Windows::new("100"), Windows::new("100"));
        a.attach(store.clone());
        b.attach(store);
        a.sent("wamid.1", "+15550001", 1_000_000);
        let bound = Duration::from_secs(5);
        let seen = tokio::time::timeout(bound, async {
            loop {
                if let Some(found) = b.recipient("wamid.1").await {
                    return found;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
        .await
        .expect("b reads a's send from the store");
        assert_eq!(seen, ("+15550001".to_owned(), 1_000_000));
        assert_eq!(b.recipient("wamid.unknown").await, None);
        // A node without a store knows only its own sends.
        let alone = Windows::new("100");
        assert_eq!(alone.recipient("wamid.1").await, None);
    }

    #[tokio::test]
    async fn the_template_goes_once_per_closed_window() {
        let windows = Windows::new("100");
        windows.opened("a", 1_000).await.unwrap();
        let later = 1_000 + DAY + 5;
        assert!(windows.take_reengagement("a", later).await);
        assert!(!windows.take_reengagement("a", later + 60).await);
        windows.template_unsent("a", later + 60).await;
        assert!(
            !windows.take_reengagement("a", later + 120).await,
            "not at once"
        );
        assert!(
            windows.take_reengagement("a", later + 60 + 3600).await,
            "an hour later"
        );
        // They wrote and the window closed again: one more.
        windows.opened("a", later + 4000).await.unwrap();
        assert!(windows.take_reengagement("a", later + 4000 + DAY).await);
    }
}
