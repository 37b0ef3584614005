//! Test doubles shared by the daemon's unit tests (compiled for tests only).

use std::collections::HashMap;
use std::sync::Mutex;

use hermes_adapter::{
    Accepted, DeliveryStatus, Inbound, InboundSink, Platform, SinkError, async_trait,
};

/// A sink that keeps what it is handed and what it is told to remember; cursors and
/// delivery reports go nowhere.
#[derive(Default)]
pub(crate) struct RecordingSink(Mutex<Vec<Inbound>>, Mutex<HashMap<String, String>>);

impl RecordingSink {
    /// The event ids recorded so far, in order.
    pub(crate) fn event_ids(&self) -> Vec<String> {
        let events = self.0.lock().expect("recording sink lock");
        events.iter().map(|e| e.event_id.clone()).collect()
    }
}

#[async_trait]
impl InboundSink for RecordingSink {
    async fn accept(&self, event: Inbound) -> Result<Accepted, SinkError> {
        self.0.lock().expect("recording sink lock").push(event);
        Ok(Accepted::New)
    }
    async fn load_cursor(&self, _: Platform, _: &str) -> Result<Option<String>, SinkError> {
        Ok(None)
    }
    async fn save_cursor(&self, _: Platform, _: &str, _: String) -> Result<(), SinkError> {
        Ok(())
    }
    async fn remember(
        &self,
        platform: Platform,
        key: &str,
        value: String,
        _: std::time::Duration,
    ) -> Result<(), SinkError> {
        let mut kept = self.1.lock().expect("recording sink lock");
        kept.insert(format!("{platform}:{key}"), value);
        Ok(())
    }
    async fn recall(&self, platform: Platform, key: &str) -> Result<Option<String>, SinkError> {
        let kept = self.1.lock().expect("recording sink lock");
        Ok(kept.get(&format!("{platform}:{key}")).cloned())
    }
    async fn delivery_report(
        &self,
        _: Platform,
        _: String,
        _: DeliveryStatus,
    ) -> Result<(), SinkError> {
        Ok(())
    }
}
