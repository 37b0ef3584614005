//! A sink that keeps what an adapter hands it until the fuzz function takes it, and the
//! invariants every recorded event must keep whatever the platform sent.

use std::sync::{Mutex, MutexGuard};

use hermes_adapter::{
    Accepted, DeliveryStatus, Inbound, InboundSink, Platform, SinkError, async_trait,
};

/// Records events and delivery reports in memory; cursors are taken and forgotten (a fuzz
/// run sees millions of contacts, and no state may carry from one input to the next).
#[derive(Default)]
pub struct Recording {
    events: Mutex<Vec<Inbound>>,
    reports: Mutex<Vec<(String, DeliveryStatus)>>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // A finding panics while the lock may be held; the next input must still run.
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

impl Recording {
    /// What was recorded since the last call.
    pub fn take(&self) -> (Vec<Inbound>, Vec<(String, DeliveryStatus)>) {
        (
            std::mem::take(&mut *lock(&self.events)),
            std::mem::take(&mut *lock(&self.reports)),
        )
    }
}

#[async_trait]
impl InboundSink for Recording {
    async fn accept(&self, event: Inbound) -> Result<Accepted, SinkError> {
        lock(&self.events).push(event);
        Ok(Accepted::New)
    }

    async fn load_cursor(
        &self,
        _platform: Platform,
        _key: &str,
    ) -> Result<Option<String>, SinkError> {
        Ok(None)
    }

    async fn remember(
        &self,
        _platform: Platform,
        _key: &str,
        _value: String,
        _ttl: std::time::Duration,
    ) -> Result<(), SinkError> {
        Ok(())
    }

    async fn recall(&self, _platform: Platform, _key: &str) -> Result<Option<String>, SinkError> {
        Ok(None)
    }

    async fn save_cursor(
        &self,
        _platform: Platform,
        _key: &str,
        _cursor: String,
    ) -> Result<(), SinkError> {
        Ok(())
    }

    async fn delivery_report(
        &self,
        _platform: Platform,
        platform_message_id: String,
        status: DeliveryStatus,
    ) -> Result<(), SinkError> {
        lock(&self.reports).push((platform_message_id, status));
        Ok(())
    }
}

/// What an event must be, from any input: on its platform, known by an id with the
/// platform's prefix (the inbox's de-duplication key), and stored and read back unchanged
/// (the inbox keeps events as JSON).
pub fn check(event: &Inbound, platform: Platform, prefix: &str) {
    assert_eq!(
        event.chat.platform, platform,
        "an event of the wrong platform: {event:?}"
    );
    assert!(
        event.event_id.starts_with(prefix) && event.event_id.len() > prefix.len(),
        "an event id without its {prefix:?} prefix: {event:?}"
    );
    let json = serde_json::to_string(event)
        .unwrap_or_else(|e| panic!("an event that cannot be stored ({e}): {event:?}"));
    let back: Inbound = serde_json::from_str(&json)
        .unwrap_or_else(|e| panic!("a stored event that cannot be read back ({e}): {json}"));
    assert_eq!(&back, event, "an event changed through its stored JSON");
}

/// A webhook answer is 200, or a refusal the platform understands (4xx / 5xx).
pub fn check_status(status: u16, route: &str) {
    assert!(
        status == 200 || (400..600).contains(&status),
        "{route} answered {status}"
    );
}
