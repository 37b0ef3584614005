//! `hermes-slack`: the Slack adapter, on slack-morphism, both ways Slack apps receive:
//! Socket Mode (the adapter dials out; no public endpoint) and the Events API (signed
//! requests to the daemon's HTTP server). Web API calls go to the configured
//! `api_base_url` through a connector that speaks HTTPS and plain HTTP.
//!
//! * `receive`: events → recorded [`hermes_adapter::Inbound`]s, acknowledged (envelope
//!   ack, HTTP 200) only once recorded; the Socket Mode callbacks.
//! * `webhook`: the three Events API routes and Slack's signature check.
//! * `normalize`: slack-morphism's models → the contract's types.
//! * `send`: [`SlackSender`], the [`PlatformSender`].
//! * `mrkdwn`: the Slack `Dialect`; `open`: presses, response URLs and bot threads kept in
//!   memory; `client`: the client and its errors; `settings`: `SLACK_*`, `platforms.slack.*`.

mod client;
mod mrkdwn;
mod normalize;
mod open;
mod receive;
mod send;
mod settings;
mod webhook;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hermes_adapter::{
    Adapter, AdapterError, Backoff, CancellationToken, InboundSink, Liveness, Platform,
    PlatformSender, SendError, WebhookRoute, async_trait,
};
use slack_morphism::errors::SlackClientError;
use slack_morphism::prelude::*;
use tokio::sync::watch;

pub use mrkdwn::render as render_mrkdwn;
pub use send::{MAX_MESSAGE_LEN, SlackSender};
pub use settings::{Mode, SlackSettings, settings};

use client::{Client, call, map_error};
use normalize::Me;
use open::Open;
use receive::{Receiver, SocketState};

/// Retrying a failed `auth.test`: 1 s, doubling, at most 30 s.
const RECONNECT: Backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(30));
/// How often the Web API is asked `auth.test` to show the connection is alive (Socket
/// Mode's pings are slack-morphism's own; the Events API has nothing to poll).
const LIVENESS_EVERY: Duration = Duration::from_secs(30);

/// The Slack connection.
pub struct SlackAdapter {
    settings: SlackSettings,
    client: Arc<Client>,
    token: SlackApiToken,
    sender: Arc<SlackSender>,
    liveness: Liveness,
    me: watch::Sender<Option<Me>>,
    receiver: Arc<Receiver>,
}

impl SlackAdapter {
    pub fn new(settings: &SlackSettings) -> Result<Self, AdapterError> {
        let client = Arc::new(client::build(&settings.api_base_url));
        let token = SlackApiToken::new(settings.bot_token.clone().into());
        let open = Open::default();
        let liveness = Liveness::default();
        let (me, me_rx) = watch::channel(None);
        let commands = normalize::Commands::default();
        Ok(SlackAdapter {
            sender: Arc::new(SlackSender::new(
                client.clone(),
                token.clone(),
                open.clone(),
                &settings.api_base_url,
                commands.clone(),
            )),
            receiver: Arc::new(Receiver {
                client: client.clone(),
                token: token.clone(),
                me: me_rx,
                reply_in_thread: settings.reply_in_thread,
                open,
                liveness: liveness.clone(),
                names: Mutex::new(HashMap::new()),
                commands,
            }),
            settings: settings.clone(),
            client,
            token,
            liveness,
            me,
        })
    }

    /// `auth.test`: who the bot is; a refused token is final, anything else is retried.
    async fn identify(&self, shutdown: &CancellationToken) -> Result<Option<Me>, AdapterError> {
        let mut backoff = RECONNECT;
        let session = self.client.open_session(&self.token);
        loop {
            let result = tokio::select! {
                _ = shutdown.cancelled() => return Ok(None),
                r = call("auth.test", session.auth_test()) => r,
            };
            match result {
                Ok(me) => {
                    self.liveness.beat();
                    tracing::info!(team = %me.team, bot = ?me.user, "slack: connected");
                    return Ok(Some(Me {
                        user_id: me.user_id.to_string(),
                    }));
                }
                Err(SendError::Unauthorized(why)) => {
                    return Err(AdapterError::Config(format!(
                        "Slack refused the bot token: {why}"
                    )));
                }
                Err(e) => {
                    let wait = match &e {
                        SendError::RateLimited { retry_after, .. } => *retry_after,
                        _ => backoff.next_delay(),
                    };
                    tracing::warn!(error = %e, retry_in = ?wait, "slack: cannot reach the Web API");
                    tokio::select! {
                        _ = shutdown.cancelled() => return Ok(None),
                        _ = tokio::time::sleep(wait) => {}
                    }
                }
            }
        }
    }

    /// The app-level token works for Socket Mode (`apps.connections.open`).
    async fn check_app_token(&self, app_token: &SlackApiToken) -> Result<(), AdapterError> {
        let session = self.client.open_session(app_token);
        let opened = tokio::time::timeout(
            Duration::from_secs(30),
            session.apps_connections_open(&SlackApiAppsConnectionOpenRequest::new()),
        )
        .await
        .map_err(|_| AdapterError::Other("slack: apps.connections.open did not answer".into()))?;
        match opened {
            Ok(_) => Ok(()),
            Err(SlackClientError::ApiError(e))
                if matches!(
                    e.code.as_str(),
                    "invalid_auth"
                        | "not_authed"
                        | "not_allowed_token_type"
                        | "token_revoked"
                        | "missing_scope"
                ) =>
            {
                Err(AdapterError::Config(format!(
                    "Slack refused SLACK_APP_TOKEN for Socket Mode ({}): it must be an app-level token (xapp-…) with connections:write",
                    e.code
                )))
            }
            Err(e) => Err(AdapterError::Other(format!(
                "slack: apps.connections.open failed: {}",
                map_error("apps.connections.open", e)
            ))),
        }
    }

    /// Until shutdown, ask `auth.test` now and then so liveness shows the Web API answers.
    async fn keep_alive(&self, shutdown: &CancellationToken) {
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(LIVENESS_EVERY) => {}
            }
            let session = self.client.open_session(&self.token);
            match call("auth.test", session.auth_test()).await {
                Ok(_) => self.liveness.beat(),
                Err(e) => tracing::warn!(error = %e, "slack: the Web API did not answer"),
            }
        }
    }
}

#[async_trait]
impl Adapter for SlackAdapter {
    /// `auth.test` for the bot token and, in Socket Mode, `apps.connections.open` for the
    /// app-level token.
    async fn check_credentials(&self) -> Result<String, AdapterError> {
        let session = self.client.open_session(&self.token);
        let me = match call("auth.test", session.auth_test()).await {
            Ok(me) => me,
            Err(SendError::Unauthorized(why)) => {
                return Err(AdapterError::Config(format!(
                    "Slack refused the bot token: {why}"
                )));
            }
            Err(e) => return Err(AdapterError::Other(e.to_string())),
        };
        let who = format!(
            "{} in {} (user {})",
            me.user.as_deref().unwrap_or("the bot"),
            me.team,
            me.user_id
        );
        match (self.settings.mode, &self.settings.app_token) {
            (Mode::Socket, Some(app)) => {
                self.check_app_token(&SlackApiToken::new(app.clone().into()))
                    .await?;
                Ok(format!("{who}; Socket Mode token accepted"))
            }
            (Mode::Socket, None) => Err(AdapterError::Config(
                "Socket Mode needs SLACK_APP_TOKEN".into(),
            )),
            (Mode::Events, _) => Ok(who),
        }
    }

    fn platform(&self) -> Platform {
        Platform::Slack
    }

    fn sender(&self) -> Arc<dyn PlatformSender> {
        self.sender.clone()
    }

    fn liveness(&self) -> Liveness {
        self.liveness.clone()
    }

    /// The Events API routes, in either mode (needed in the Events API's); without the
    /// signing secret they refuse every request.
    fn routes(&self, sink: Arc<dyn InboundSink>) -> Vec<WebhookRoute> {
        self.receiver.open.attach(sink.clone());
        webhook::routes(
            self.receiver.clone(),
            sink,
            self.settings.signing_secret.clone(),
            self.settings.mode == Mode::Events,
        )
    }

    async fn run(
        &self,
        sink: Arc<dyn InboundSink>,
        shutdown: CancellationToken,
    ) -> Result<(), AdapterError> {
        self.receiver.open.attach(sink.clone());
        let Some(me) = self.identify(&shutdown).await? else {
            return Ok(());
        };
        let bot = me.user_id.clone();
        self.me.send_replace(Some(me));
        let app_token = match (self.settings.mode, &self.settings.app_token) {
            (Mode::Socket, Some(app)) => SlackApiToken::new(app.clone().into()),
            (Mode::Socket, None) => {
                return Err(AdapterError::Config(
                    "Socket Mode needs SLACK_APP_TOKEN".into(),
                ));
            }
            (Mode::Events, _) => {
                tracing::info!("slack: receiving through the Events API on /slack/events");
                self.keep_alive(&shutdown).await;
                return Ok(());
            }
        };
        self.check_app_token(&app_token).await?;
        let environment = Arc::new(
            SlackClientEventsListenerEnvironment::new(self.client.clone())
                .with_error_handler(receive::on_error)
                .with_user_state(SocketState {
                    receiver: self.receiver.clone(),
                    sink: sink.clone(),
                }),
        );
        // One Socket Mode connection for the app across the nodes of one store, kept by
        // whichever node holds its lease: Slack spreads an app's events over its open
        // connections, so with several a person's later message could be recorded, and
        // answered, before their earlier one. Events Slack sends while no node is
        // connected come back as its retries (recognised by their event ids).
        let lease = sink.exclusive(&format!("slack:{bot}:socket"));
        let keeping_alive = self.keep_alive(&shutdown);
        tokio::pin!(keeping_alive);
        loop {
            let turn = tokio::select! {
                _ = &mut keeping_alive => return Ok(()),
                turn = lease.acquired() => turn,
            };
            let callbacks = SlackSocketModeListenerCallbacks::new()
                .with_hello_events(|_hello, _client, states| async move {
                    receive::on_hello(states).await
                })
                .with_push_events(receive::on_push)
                .with_interaction_events(receive::on_interaction)
                .with_command_events(receive::on_command);
            let listener = SlackClientSocketModeListener::new(
                &SlackClientSocketModeConfig::new().with_max_connections_count(1),
                environment.clone(),
                callbacks,
            );
            listener
                .listen_for(&app_token)
                .await
                .map_err(|e| AdapterError::Other(format!("slack: Socket Mode: {e}")))?;
            listener.start().await;
            let lost = tokio::select! {
                _ = &mut keeping_alive => false,
                _ = lease.lost(turn) => true,
            };
            listener.shutdown().await;
            if !lost {
                return Ok(());
            }
            tracing::warn!(
                "slack: this node no longer holds the Socket Mode connection's lease; it closed its connection (another node keeps it)"
            );
        }
    }
}
