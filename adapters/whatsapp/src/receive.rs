//! One verified webhook delivery, start to finish: read Meta's payload, keep each contact's
//! 24-hour window (before the messages, so a recorded message never lacks its window),
//! record the messages with one sync, and report what became of the gateway's own
//! messages (statuses) to the outbox. Only when all of that is durable does Meta get its
//! 200; otherwise it gets a 500 and sends the delivery again (the inbox recognises what it
//! already has by `wamid`). A body that is not Meta's JSON gets a 400.

use std::collections::HashMap;
use std::sync::Arc;

use hermes_adapter::{
    DeliveryStatus, Inbound, InboundSink, Liveness, Platform, SinkError, WebhookResponse,
};

use crate::graph::OUTSIDE_WINDOW;
use crate::model::{Payload, Status};
use crate::normalize::{self, Normalized};
use crate::window::{Windows, now_secs};

/// Turns deliveries into recorded events.
pub struct Receiver {
    pub phone_number_id: String,
    pub windows: Arc<Windows>,
    pub liveness: Liveness,
}

/// What one delivery holds for this number.
#[derive(Default)]
struct Delivery {
    events: Vec<Inbound>,
    /// The newest message time per contact.
    opened: HashMap<String, u64>,
    statuses: Vec<Status>,
}

impl Receiver {
    /// Handle a verified `POST` body.
    pub async fn deliver(&self, sink: &dyn InboundSink, body: &[u8]) -> WebhookResponse {
        let payload: Payload = match serde_json::from_slice(body) {
            Ok(payload) => payload,
            Err(e) => {
                tracing::warn!(error = %e, "whatsapp: a signed delivery is not Meta's JSON; refused with 400");
                return WebhookResponse::text(400, "unreadable payload");
            }
        };
        self.liveness.beat();
        if payload.object != "whatsapp_business_account" {
            tracing::info!(object = %payload.object, "whatsapp: a delivery that is not about a WhatsApp business account; ignored");
            return WebhookResponse::text(200, "");
        }
        let delivery = self.read(payload);
        match self.record(sink, delivery).await {
            Ok(()) => WebhookResponse::text(200, ""),
            Err(e) => {
                tracing::error!(error = %e, "whatsapp: a delivery could not be recorded; Meta will send it again");
                WebhookResponse::text(500, "not recorded")
            }
        }
    }

    fn read(&self, payload: Payload) -> Delivery {
        let mut delivery = Delivery::default();
        for change in payload.entry.into_iter().flat_map(|e| e.changes) {
            if change.field != "messages" {
                tracing::debug!(field = %change.field, "whatsapp: a change that is not about messages; ignored");
                continue;
            }
            let value = change.value;
            let number = &value.metadata.phone_number_id;
            if !number.is_empty() && *number != self.phone_number_id {
                tracing::info!(
                    phone_number_id = %number,
                    "whatsapp: a delivery for another number of this app; ignored (this gateway speaks as WHATSAPP_CLOUD_PHONE_NUMBER_ID={})",
                    self.phone_number_id
                );
                continue;
            }
            for error in &value.errors {
                tracing::warn!(error = %error.line(), "whatsapp: Meta reports a problem with the number or the app");
            }
            let names: HashMap<&str, &str> = value
                .contacts
                .iter()
                .map(|c| (c.wa_id.as_str(), c.profile.name.as_str()))
                .collect();
            for message in &value.messages {
                if message.from.is_empty() || message.id.is_empty() {
                    tracing::warn!("whatsapp: a message without its sender or id; ignored");
                    continue;
                }
                let at = message
                    .timestamp
                    .parse::<u64>()
                    .unwrap_or_else(|_| now_secs());
                let newest = delivery.opened.entry(message.from.clone()).or_default();
                *newest = (*newest).max(at);
                let name = names.get(message.from.as_str()).copied();
                match normalize::message(&self.phone_number_id, message, name) {
                    Normalized::Event(event) => delivery.events.push(*event),
                    Normalized::Skipped(what) => {
                        tracing::debug!(what, message = %message.id, "whatsapp: not a message to answer");
                    }
                }
            }
            delivery.statuses.extend(value.statuses);
        }
        delivery
    }

    async fn record(&self, sink: &dyn InboundSink, delivery: Delivery) -> Result<(), SinkError> {
        for (wa_id, at) in &delivery.opened {
            self.windows.opened(wa_id, *at).await?;
        }
        if !delivery.events.is_empty() {
            let count = delivery.events.len();
            let results = sink.accept_batch(delivery.events).await;
            if results.len() < count {
                return Err(SinkError("the batch stopped early".into()));
            }
            for result in results {
                result?;
            }
        }
        for status in delivery.statuses {
            let report = self.status(&status).await;
            if let Some(report) = report {
                sink.delivery_report(Platform::WhatsApp, status.id.clone(), report)
                    .await?;
            }
        }
        Ok(())
    }

    /// A status as the outbox's report; a failure logged with Meta's code and reason.
    async fn status(&self, status: &Status) -> Option<DeliveryStatus> {
        Some(match status.status.as_str() {
            "sent" => DeliveryStatus::Sent,
            "delivered" => DeliveryStatus::Delivered,
            "read" => DeliveryStatus::Read,
            "failed" => {
                let reasons: Vec<String> = status.errors.iter().map(|e| e.line()).collect();
                let reason = if reasons.is_empty() {
                    "Meta gave no reason".to_owned()
                } else {
                    reasons.join("; ")
                };
                if status.errors.iter().any(|e| e.code == Some(OUTSIDE_WINDOW)) {
                    // Judged by when the message went (the status comes later, maybe to
                    // another node: the store keeps sends a week); else by the status's
                    // own time.
                    let (contact, at) =
                        self.windows.recipient(&status.id).await.unwrap_or_else(|| {
                            let at = status.timestamp.parse().unwrap_or_else(|_| now_secs());
                            (status.recipient_id.clone(), at)
                        });
                    self.windows.refused(&contact, at).await;
                    tracing::warn!(to = %status.recipient_id, message = %status.id, %reason,
                        "whatsapp: Meta did not deliver a reply because the 24-hour window had closed; it is held until they write again");
                    DeliveryStatus::Held(reason)
                } else {
                    tracing::error!(to = %status.recipient_id, message = %status.id, %reason,
                        "whatsapp: Meta could not deliver a reply");
                    DeliveryStatus::Failed(reason)
                }
            }
            other => {
                tracing::debug!(status = other, message = %status.id, "whatsapp: a status the gateway does not track");
                return None;
            }
        })
    }
}
