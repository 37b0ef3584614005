//! The events on their way to the open pages: each gets an id (this run's mark and a
//! sequence number), is kept in a ring of the latest, and is broadcast to every page's
//! stream. A page that reconnects names the last id it saw and is given what came after
//! from the ring; how many pages are open decides whether the sender takes a message now
//! or leaves it queued in the outbox.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::broadcast;

/// How many of the latest events a reconnecting page can be given, and how many bytes of
/// them at most (an answer streamed in many edits would otherwise keep many copies).
const RING: usize = 2_000;
const RING_BYTES: usize = 8 * 1024 * 1024;
/// How many sent messages are remembered by their send-once key.
const ONCE_KEYS: usize = 1_000;

/// One event for the pages: its id and its JSON.
#[derive(Debug)]
pub struct Event {
    pub seq: u64,
    pub id: String,
    pub data: String,
    /// The message an edit replaces the text of: a later edit of it makes this one
    /// worthless to a page that reconnects.
    edit_of: Option<String>,
}

struct Ring {
    next: u64,
    events: VecDeque<Arc<Event>>,
    bytes: usize,
    /// Send-once key → the message id it was shown as (a send tried again after a lost
    /// answer shows once).
    once: HashMap<String, String>,
    once_order: VecDeque<String>,
}

/// The hub of one adapter run.
pub struct Hub {
    /// This run's mark: ids of another run (before a restart) are not in the ring.
    run: String,
    ring: Mutex<Ring>,
    tx: broadcast::Sender<Arc<Event>>,
    pages: AtomicUsize,
}

/// What a page gets when it (re)connects.
pub struct Subscription {
    /// The events after the one it last saw, from the ring.
    pub replay: Vec<Arc<Event>>,
    /// Whether events it never saw are no longer in the ring.
    pub gap: bool,
    pub live: broadcast::Receiver<Arc<Event>>,
    pub guard: PageGuard,
}

/// Counts an open page while it lives.
pub struct PageGuard(Arc<Hub>);

impl Drop for PageGuard {
    fn drop(&mut self) {
        self.0.pages.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Hub {
    pub fn new() -> Arc<Hub> {
        Arc::new(Hub {
            run: format!("{:08x}", rand::random::<u32>()),
            ring: Mutex::new(Ring {
                next: 1,
                events: VecDeque::new(),
                bytes: 0,
                once: HashMap::new(),
                once_order: VecDeque::new(),
            }),
            tx: broadcast::channel(512).0,
            pages: AtomicUsize::new(0),
        })
    }

    fn ring(&self) -> std::sync::MutexGuard<'_, Ring> {
        self.ring.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// How many pages are open now.
    pub fn pages(&self) -> usize {
        self.pages.load(Ordering::SeqCst)
    }

    /// A new id for a message shown in the pages.
    pub fn message_id(&self) -> String {
        format!("m{}.{:x}", self.run, rand::random::<u64>())
    }

    /// The message id a send-once key was shown as in this run.
    pub fn shown_as(&self, once_key: &str) -> Option<String> {
        self.ring().once.get(once_key).cloned()
    }

    /// Send `data` to every open page, remembering it for the ones that reconnect; with
    /// `once`, the key is remembered as having been shown as `message_id`; an edit names
    /// the message it edits (`edit_of`), and the earlier edits of it are forgotten.
    pub fn publish(
        &self,
        data: &serde_json::Value,
        once: Option<(&str, &str)>,
        edit_of: Option<&str>,
    ) {
        let mut ring = self.ring();
        let seq = ring.next;
        ring.next += 1;
        let event = Arc::new(Event {
            seq,
            id: format!("{}.{seq}", self.run),
            data: data.to_string(),
            edit_of: edit_of.map(str::to_owned),
        });
        if let Some(edited) = edit_of {
            let before = ring.events.len();
            ring.events.retain(|e| e.edit_of.as_deref() != Some(edited));
            if ring.events.len() != before {
                ring.bytes = ring.events.iter().map(|e| e.data.len()).sum();
            }
        }
        ring.bytes += event.data.len();
        ring.events.push_back(event.clone());
        while ring.events.len() > RING || (ring.bytes > RING_BYTES && ring.events.len() > 1) {
            if let Some(old) = ring.events.pop_front() {
                ring.bytes -= old.data.len();
            }
        }
        if let Some((key, message_id)) = once {
            if ring.once_order.len() == ONCE_KEYS
                && let Some(old) = ring.once_order.pop_front()
            {
                ring.once.remove(&old);
            }
            ring.once_order.push_back(key.to_owned());
            ring.once.insert(key.to_owned(), message_id.to_owned());
        }
        // Sent under the lock, so a page subscribing sees each event once: in its replay
        // or live, never both.
        let _ = self.tx.send(event);
    }

    /// A page opens its stream, having last seen `last_id` (from this run or another).
    pub fn subscribe(self: &Arc<Self>, last_id: Option<&str>) -> Subscription {
        let ring = self.ring();
        let live = self.tx.subscribe();
        self.pages.fetch_add(1, Ordering::SeqCst);
        let guard = PageGuard(self.clone());
        let seen = last_id
            .and_then(|id| id.split_once('.'))
            .filter(|(run, _)| *run == self.run)
            .and_then(|(_, seq)| seq.parse::<u64>().ok());
        let (replay, gap) = match seen {
            Some(seen) => {
                let replay: Vec<_> = ring
                    .events
                    .iter()
                    .filter(|e| e.seq > seen)
                    .cloned()
                    .collect();
                let oldest = ring.events.front().map_or(ring.next, |e| e.seq);
                (replay, seen + 1 < oldest)
            }
            // A page new to this run had everything of the run before from the stream
            // then; of this run, it missed what was sent before it came: nothing is sent
            // while no page is open, except to pages that have since gone.
            None => (ring.events.iter().cloned().collect(), false),
        };
        Subscription {
            replay,
            gap,
            live,
            guard,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_page_that_reconnects_gets_what_came_after_its_last_event_once() {
        let hub = Hub::new();
        assert_eq!(hub.pages(), 0);
        let mut first = hub.subscribe(None);
        assert_eq!(hub.pages(), 1);
        hub.publish(&json!({"n": 1}), Some(("k1", "m1")), None);
        hub.publish(&json!({"n": 2}), None, None);
        let seen = first.live.try_recv().unwrap();
        drop(first);
        assert_eq!(hub.pages(), 0, "a page gone is not counted");
        hub.publish(&json!({"n": 3}), None, None);
        let mut again = hub.subscribe(Some(&seen.id));
        let replayed: Vec<&str> = again.replay.iter().map(|e| e.data.as_str()).collect();
        assert_eq!(replayed, [r#"{"n":2}"#, r#"{"n":3}"#]);
        assert!(!again.gap);
        assert!(again.live.try_recv().is_err(), "nothing twice");
        assert_eq!(hub.shown_as("k1").as_deref(), Some("m1"));
        // An id of an earlier run: this run's events are all new to it.
        let other = hub.subscribe(Some("deadbeef.2"));
        assert_eq!(other.replay.len(), 3);
    }

    #[test]
    fn a_reconnecting_page_gets_only_the_last_edit_of_a_message() {
        let hub = Hub::new();
        hub.publish(&json!({"kind": "message", "id": "m"}), None, None);
        for n in 0..100 {
            hub.publish(&json!({"kind": "edit", "id": "m", "n": n}), None, Some("m"));
        }
        let page = hub.subscribe(Some("deadbeef.1"));
        let replayed: Vec<&str> = page.replay.iter().map(|e| e.data.as_str()).collect();
        assert_eq!(
            replayed,
            [
                r#"{"id":"m","kind":"message"}"#,
                r#"{"id":"m","kind":"edit","n":99}"#
            ]
        );
    }
}
