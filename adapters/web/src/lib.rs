//! `hermes-web`: the web chat, the gateway's fifth platform: a page served on its own
//! loopback listener (`web.listen`), behind a login token, where the operator chats with
//! the agent with no platform account at all (`docs/web-chat.md`).
//!
//! * `auth`: the login token, the session cookie and API header, `Host`/`Origin` checks.
//! * `token`: the token's file in the home; `settings`: `platforms.web`, `web.*`.
//! * `server`: the listener's routes; `page`: the embedded page.
//! * `hub`: events on their way to the open pages; `send`: [`WebSender`].
//! * `files`: uploads in, files out.

pub mod auth;
mod files;
mod hub;
mod page;
mod send;
mod server;
mod settings;
pub mod token;

use std::sync::Arc;

use hermes_adapter::{
    Adapter, AdapterError, CancellationToken, InboundSink, Liveness, Platform, PlatformSender,
    async_trait,
};

pub use send::{MAX_MESSAGE_LEN, WebSender};
pub use settings::{DEFAULT_LISTEN, OPERATOR, WebSettings, settings};

use files::Files;
use hub::Hub;

/// The listener's limits: anyone on this machine can connect before logging in, so a
/// client has 10 s to send its headers and at most 64 connections are open at once (a
/// page holds one for its event stream).
const LIMITS: hermes_adapter::serve::Limits = hermes_adapter::serve::Limits {
    name: "web",
    header_read: std::time::Duration::from_secs(10),
    max_connections: 64,
    drain: std::time::Duration::from_secs(2),
};

/// The web chat of one gateway.
pub struct WebAdapter {
    settings: WebSettings,
    token: String,
    hub: Arc<Hub>,
    files: Arc<Files>,
    sender: Arc<WebSender>,
    liveness: Liveness,
}

impl WebAdapter {
    pub fn new(settings: &WebSettings) -> Result<WebAdapter, AdapterError> {
        let token = settings.token.clone().ok_or_else(|| {
            AdapterError::Config(format!(
                "no login token in {} (the daemon makes it when it starts)",
                token::path(&settings.home).display()
            ))
        })?;
        let hub = Hub::new();
        let files = Arc::new(Files::new(&settings.home));
        Ok(WebAdapter {
            sender: Arc::new(WebSender::new(hub.clone(), files.clone())),
            settings: settings.clone(),
            token,
            hub,
            files,
            liveness: Liveness::default(),
        })
    }
}

#[async_trait]
impl Adapter for WebAdapter {
    fn platform(&self) -> Platform {
        Platform::Web
    }

    fn sender(&self) -> Arc<dyn PlatformSender> {
        self.sender.clone()
    }

    fn liveness(&self) -> Liveness {
        self.liveness.clone()
    }

    async fn check_credentials(&self) -> Result<String, AdapterError> {
        Ok(format!(
            "the web chat at {} (`hermes-gateway web-url` prints the address to log in)",
            self.settings.base_url()
        ))
    }

    async fn run(
        &self,
        sink: Arc<dyn InboundSink>,
        shutdown: CancellationToken,
    ) -> Result<(), AdapterError> {
        if let Err(e) = self.files.prepare().await {
            return Err(AdapterError::Other(format!(
                "web: cannot prepare the folders for files under {}: {e}",
                self.settings.home.display()
            )));
        }
        let listener = tokio::net::TcpListener::bind(self.settings.listen)
            .await
            .map_err(|e| {
                AdapterError::Other(format!(
                    "web: cannot listen on {} (web.listen): {e}",
                    self.settings.listen
                ))
            })?;
        let port = listener
            .local_addr()
            .map(|a| a.port())
            .unwrap_or(self.settings.listen.port());
        let access = auth::Access::new(&self.token, port, self.settings.public_url.as_deref())
            .ok_or_else(|| {
                AdapterError::Config(
                    "the web chat's login token or web.public_url is not usable".into(),
                )
            })?;
        tracing::info!(addr = %self.settings.listen, port, "web: listening");
        self.liveness.beat();
        let server = Arc::new(server::Server {
            access,
            hub: self.hub.clone(),
            files: self.files.clone(),
            sender: self.sender.clone(),
            sink,
            shutdown: shutdown.clone(),
        });
        // The page is served by this process itself: it is alive as long as it runs.
        let liveness = self.liveness.clone();
        let beating = shutdown.clone();
        tokio::spawn(async move {
            while !beating.is_cancelled() {
                liveness.beat();
                tokio::select! {
                    _ = beating.cancelled() => {}
                    _ = tokio::time::sleep(std::time::Duration::from_secs(10)) => {}
                }
            }
        });
        hermes_adapter::serve::serve(listener, server::router(server), LIMITS, shutdown, |_| {})
            .await;
        Ok(())
    }
}
