//! The sink every adapter records into: an event is written to the inbox (on disk) before
//! the adapter acknowledges it, and only then handed to the router; a batch is written
//! with one sync for all; cursors and delivery reports go to the store. Chatter the mention
//! rule turns away whoever wrote it is not written at all.

use std::sync::Arc;

use hermes_adapter::{
    Accepted, Console, DeliveryStatus, Inbound, InboundSink, Platform, SinkError, async_trait,
};

use crate::delivery::Delivery;
use crate::router::Router;
use crate::store::{InboxRow, Store};

/// Records events in the inbox before the adapter acknowledges them, then hands them to
/// the router.
pub(super) struct GatewaySink {
    pub(super) store: Store,
    /// The nodes sharing the store: what only one of them may do.
    pub(super) cluster: Arc<crate::cluster::Cluster>,
    /// What this node's router has had (several nodes on one store: see `work.rs`).
    pub(super) dispatched: Arc<super::work::Dispatched>,
    pub(super) router: Arc<Router>,
    /// Woken for a chat whose sent message the platform hands back (held).
    pub(super) delivery: Delivery,
    /// The operator's questions (the web chat's model setup).
    pub(super) console: Arc<dyn Console>,
}

impl GatewaySink {
    /// Record `event`; a new one is dispatched.
    pub(super) async fn record(&self, event: Inbound) -> Result<Accepted, SinkError> {
        if self.is_chatter(&event) {
            return Ok(Accepted::New);
        }
        let reserved = self.reserve(&event);
        let (accepted, new) = self.write(event, false).await?;
        if let Some(row) = new {
            self.dispatch(row, reserved);
        }
        Ok(accepted)
    }

    /// Whether `event` is chatter in a group that the router would turn away unread
    /// ([`Router::is_chatter`]): counted, and not stored, since a stranger's or a member's
    /// words not meant for the bot are not kept, and ignoring a redelivery again is all
    /// that dedupe would do for it.
    fn is_chatter(&self, event: &Inbound) -> bool {
        if !self.router.is_chatter(event) {
            return false;
        }
        crate::metrics::message_in(event.chat.platform);
        tracing::trace!(event = %event.event_id, "inbox: group message not addressed to the bot, not kept");
        true
    }

    /// On a store other nodes share, speak for `event` before writing it, so the worker
    /// does not hand its row over as well (`work.rs`).
    fn reserve(&self, event: &Inbound) -> Option<super::work::Reserved> {
        self.cluster.is_shared().then(|| {
            self.dispatched
                .reserve(&event.event_id, self.cluster.shares().of(&event.chat))
        })
    }

    /// Hand a new row to the router; a reply held in its chat (the person's window had
    /// closed) may go now.
    fn dispatch(&self, row: InboxRow, reserved: Option<super::work::Reserved>) {
        if let Some(reserved) = reserved {
            let share = self.cluster.shares().of(&row.event.chat);
            if !self.cluster.shares().sink_may_hand_over(share) {
                // Another node holds the chat's share: it picks the row up from the store
                // (so would this node, once it takes the share over). Or this node has
                // just taken it over: its first look hands the row over after the older
                // ones. Or it is giving the share up: the next holder picks the row up.
                return;
            }
            reserved.hand_over();
        }
        crate::metrics::message_in(row.event.chat.platform);
        self.delivery.person_wrote(&row.event.chat);
        self.router.submit(row);
    }

    /// Write `event` to the inbox (`unsynced`: before it is on disk), returning the row
    /// to dispatch when it is new.
    async fn write(
        &self,
        event: Inbound,
        unsynced: bool,
    ) -> Result<(Accepted, Option<InboxRow>), SinkError> {
        let written = if unsynced {
            self.store.inbox_record_unsynced(event.clone()).await
        } else {
            self.store.inbox_record(event.clone()).await
        };
        match written.map_err(|e| SinkError(e.to_string()))? {
            Some(id) => Ok((Accepted::New, Some(InboxRow { id, event }))),
            None => {
                tracing::info!(event = %event.event_id, "inbox: duplicate delivery ignored");
                Ok((Accepted::Duplicate, None))
            }
        }
    }
}

#[async_trait]
impl InboundSink for GatewaySink {
    async fn accept(&self, event: Inbound) -> Result<Accepted, SinkError> {
        self.record(event).await
    }

    async fn lets_in(&self, platform: Platform, user_id: &str) -> bool {
        self.router.is_allowed(platform, user_id).await
    }

    /// Each event recorded in order without waiting for the disk, then one sync for all of
    /// them; only then are the new ones dispatched (and the adapter acknowledges them).
    async fn accept_batch(&self, mut events: Vec<Inbound>) -> Vec<Result<Accepted, SinkError>> {
        if events.len() == 1 {
            // One synced write beats an unsynced one and a sync.
            return vec![self.record(events.remove(0)).await];
        }
        let mut results = Vec::with_capacity(events.len());
        let mut new = Vec::new();
        for event in events {
            if self.is_chatter(&event) {
                results.push(Ok(Accepted::New));
                continue;
            }
            let reserved = self.reserve(&event);
            match self.write(event, true).await {
                Ok((accepted, row)) => {
                    new.extend(row.map(|row| (row, reserved)));
                    results.push(Ok(accepted));
                }
                Err(e) => {
                    results.push(Err(e));
                    break;
                }
            }
        }
        if let Err(e) = self.store.sync().await {
            // Recorded, not known to be on disk: say so for all, and let the adapter record
            // them again (a second record is recognised as a duplicate).
            tracing::error!(error = %e, "inbox: could not sync a batch of events");
            for result in results.iter_mut() {
                *result = Err(SinkError(e.to_string()));
            }
        }
        for (row, reserved) in new {
            self.dispatch(row, reserved);
        }
        results
    }

    async fn load_cursor(
        &self,
        platform: Platform,
        key: &str,
    ) -> Result<Option<String>, SinkError> {
        self.store
            .load_cursor(platform.as_str(), key)
            .await
            .map_err(|e| SinkError(e.to_string()))
    }

    async fn save_cursor(
        &self,
        platform: Platform,
        key: &str,
        cursor: String,
    ) -> Result<(), SinkError> {
        self.store
            .save_cursor(platform.as_str(), key, cursor)
            .await
            .map_err(|e| SinkError(e.to_string()))
    }

    async fn remember(
        &self,
        platform: Platform,
        key: &str,
        value: String,
        ttl: std::time::Duration,
    ) -> Result<(), SinkError> {
        let ttl_ms = i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX);
        self.store
            .remember(platform.as_str(), key, value, ttl_ms)
            .await
            .map_err(|e| SinkError(e.to_string()))
    }

    async fn recall(&self, platform: Platform, key: &str) -> Result<Option<String>, SinkError> {
        self.store
            .recall(platform.as_str(), key)
            .await
            .map_err(|e| SinkError(e.to_string()))
    }

    async fn delivery_report(
        &self,
        platform: Platform,
        platform_message_id: String,
        status: DeliveryStatus,
    ) -> Result<(), SinkError> {
        if let DeliveryStatus::Failed(why) = &status {
            tracing::warn!(%platform, message = %platform_message_id, why, "delivery: the platform could not deliver a message");
        }
        let undelivered = matches!(status, DeliveryStatus::Failed(_) | DeliveryStatus::Held(_));
        let row = self
            .store
            .outbox_delivery_report(
                platform,
                platform_message_id.clone(),
                status,
                self.delivery.hold_max_age(),
            )
            .await
            .map_err(|e| SinkError(e.to_string()))?;
        match row {
            // A failure for a message not (yet) known as sent: the operator hears of it.
            None if undelivered => {
                tracing::warn!(%platform, message = %platform_message_id, "delivery: the platform could not deliver a message the outbox does not know as sent");
            }
            None => {
                tracing::debug!(%platform, message = %platform_message_id, "delivery: report for a message we do not know");
            }
            Some((chat, true)) => self.delivery.wake(&chat),
            Some((_, false)) => {}
        }
        Ok(())
    }

    async fn platform_reachable(&self, platform: Platform) {
        self.delivery.platform_reachable(platform).await;
    }

    fn console(&self) -> Option<Arc<dyn Console>> {
        Some(self.console.clone())
    }

    fn node_id(&self) -> Option<String> {
        self.cluster.node_id().map(str::to_owned)
    }

    fn exclusive(&self, name: &str) -> Arc<dyn hermes_adapter::Exclusive> {
        self.cluster.exclusive(name)
    }

    fn exclusive_in(
        &self,
        group: &str,
        index: u32,
        size: u32,
    ) -> Arc<dyn hermes_adapter::Exclusive> {
        self.cluster.exclusive_in(group, index, size)
    }
}
