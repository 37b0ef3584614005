//! `hermes-whatsapp`: the WhatsApp Business Cloud API adapter. Events come in as signed
//! webhooks on the daemon's HTTP server; messages go out with reqwest to the Graph API
//! (`{graph_base_url}/{version}/{phone_number_id}/…`). No SDK: the API is a handful of
//! JSON calls.
//!
//! * `webhook`: the route, Meta's signature and subscription handshake.
//! * `receive`: a verified delivery → windows kept, events recorded, statuses reported.
//! * `model`: Meta's payload; `normalize`: its messages → the contract's types.
//! * `window`: the 24-hour customer-service window per contact, kept durably.
//! * `send`: [`WhatsAppSender`], the [`PlatformSender`]; `markdown`: WhatsApp formatting.
//! * `graph`: the Graph API client and Meta's error codes; `settings`: `WHATSAPP_CLOUD_*`.

mod graph;
mod markdown;
mod model;
mod normalize;
mod receive;
mod send;
mod settings;
mod webhook;
mod window;

use std::sync::Arc;
use std::time::Duration;

use hermes_adapter::{
    Adapter, AdapterError, Backoff, CancellationToken, InboundSink, Liveness, Platform,
    PlatformSender, SendError, WebhookRoute, async_trait,
};

pub use markdown::render as render_whatsapp;
pub use send::{MAX_MESSAGE_LEN, WhatsAppSender};
pub use settings::{WhatsAppSettings, settings};

use graph::Graph;
use receive::Receiver;
use window::Windows;

/// Retrying a Graph API that does not answer at start: 1 s, doubling, at most 30 s.
const RECONNECT: Backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(30));
/// How often the Graph API is asked about the number to show it answers (webhooks alone
/// say nothing while nobody writes).
const LIVENESS_EVERY: Duration = Duration::from_secs(30);

/// The WhatsApp Cloud API connection of one business number.
pub struct WhatsAppAdapter {
    settings: WhatsAppSettings,
    graph: Arc<Graph>,
    sender: Arc<WhatsAppSender>,
    windows: Arc<Windows>,
    receiver: Arc<Receiver>,
    liveness: Liveness,
}

impl WhatsAppAdapter {
    pub fn new(settings: &WhatsAppSettings) -> Result<Self, AdapterError> {
        let graph = Arc::new(
            Graph::new(
                &settings.graph_base_url,
                &settings.api_version,
                &settings.access_token,
            )
            .map_err(AdapterError::Config)?,
        );
        let windows = Arc::new(Windows::new(&settings.phone_number_id));
        let liveness = Liveness::default();
        Ok(WhatsAppAdapter {
            sender: Arc::new(WhatsAppSender::new(
                graph.clone(),
                &settings.phone_number_id,
                windows.clone(),
                settings.reengage_template.clone(),
            )),
            receiver: Arc::new(Receiver {
                phone_number_id: settings.phone_number_id.clone(),
                windows: windows.clone(),
                liveness: liveness.clone(),
            }),
            settings: settings.clone(),
            graph,
            windows,
            liveness,
        })
    }

    /// Ask the Graph API about the number: the token works and the number is this app's.
    async fn check_number(&self) -> Result<String, SendError> {
        let info = self
            .graph
            .get(&format!(
                "{}?fields=display_phone_number,verified_name",
                self.settings.phone_number_id
            ))
            .await?;
        self.liveness.beat();
        Ok(info["display_phone_number"]
            .as_str()
            .unwrap_or("(number not shown)")
            .to_owned())
    }
}

#[async_trait]
impl Adapter for WhatsAppAdapter {
    async fn check_credentials(&self) -> Result<String, AdapterError> {
        match self.check_number().await {
            Ok(number) => Ok(format!(
                "{number} (phone number id {})",
                self.settings.phone_number_id
            )),
            Err(SendError::Unauthorized(why)) => Err(AdapterError::Config(format!(
                "Meta refused WHATSAPP_CLOUD_ACCESS_TOKEN for phone number id {}: {why}",
                self.settings.phone_number_id
            ))),
            Err(e) => Err(AdapterError::Other(format!("WhatsApp Graph API: {e}"))),
        }
    }

    fn platform(&self) -> Platform {
        Platform::WhatsApp
    }

    fn sender(&self) -> Arc<dyn PlatformSender> {
        self.sender.clone()
    }

    fn liveness(&self) -> Liveness {
        self.liveness.clone()
    }

    /// The webhook; answers 503 without the app secret.
    fn routes(&self, sink: Arc<dyn InboundSink>) -> Vec<WebhookRoute> {
        self.windows.attach(sink.clone());
        vec![webhook::route(
            &self.settings.webhook_path,
            self.settings.app_secret.clone(),
            self.settings.verify_token.clone(),
            self.receiver.clone(),
            sink,
        )]
    }

    async fn run(
        &self,
        sink: Arc<dyn InboundSink>,
        shutdown: CancellationToken,
    ) -> Result<(), AdapterError> {
        self.windows.attach(sink);
        let mut backoff = RECONNECT;
        loop {
            let checked = tokio::select! {
                _ = shutdown.cancelled() => return Ok(()),
                r = self.check_number() => r,
            };
            match checked {
                Ok(number) => {
                    tracing::info!(number, path = %self.settings.webhook_path, "whatsapp: connected; receiving through the webhook");
                    break;
                }
                Err(SendError::Unauthorized(why)) => {
                    return Err(AdapterError::Config(format!(
                        "Meta refused WHATSAPP_CLOUD_ACCESS_TOKEN for phone number id {}: {why}",
                        self.settings.phone_number_id
                    )));
                }
                Err(e) => {
                    let wait = backoff.next_delay();
                    tracing::warn!(error = %e, retry_in = ?wait, "whatsapp: cannot reach the Graph API");
                    tokio::select! {
                        _ = shutdown.cancelled() => return Ok(()),
                        _ = tokio::time::sleep(wait) => {}
                    }
                }
            }
        }
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return Ok(()),
                _ = tokio::time::sleep(LIVENESS_EVERY) => {}
            }
            if let Err(e) = self.check_number().await {
                tracing::warn!(error = %e, "whatsapp: the Graph API did not answer");
            }
        }
    }
}
