//! `hermes-discord`: the Discord adapter. serenity's client keeps the gateway WebSocket
//! (identify, heartbeats, a gateway that stops acknowledging them noticed and reconnected,
//! resume after a drop, a fresh identify after an invalid session); its models parse the
//! events. REST goes through the project's own client ([`rest`]), because serenity 0.12.5
//! either ignores a custom REST root or hides Discord's 429s (see that module).
//!
//! * `receive`: gateway events → recorded [`hermes_adapter::Inbound`]s, in Discord's order,
//!   interactions acknowledged after recording; `backfill`: what a gap in the gateway (or a
//!   stopped daemon) hid, fetched over REST after each READY.
//! * `normalize`: serenity's models → the contract's types.
//! * `send`: [`DiscordSender`], the [`PlatformSender`].
//! * `markdown`: Discord Markdown rendering; `interactions`: open interaction tokens.
//! * `settings`: `DISCORD_*` and `platforms.discord.*`.

mod backfill;
/// For the fuzz targets only: a gateway frame through the adapter's normalisation.
#[doc(hidden)]
pub mod fuzzing;
mod interactions;
mod markdown;
mod normalize;
mod receive;
mod rest;
mod seen;
mod send;
mod settings;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hermes_adapter::{
    Adapter, AdapterError, Backoff, CancellationToken, InboundSink, Liveness, Platform,
    PlatformSender, SendError, async_trait,
};
use reqwest::Method;
use serde_json::Value;
use serenity::gateway::{ConnectionStage, GatewayError};
use serenity::http::HttpBuilder;
use serenity::model::gateway::GatewayIntents;
use tokio::sync::{mpsc, watch};

pub use markdown::render as render_markdown;
pub use normalize::Identity;
pub use send::{DiscordSender, MAX_MESSAGE_LEN};
pub use settings::{DiscordSettings, settings};

use interactions::Interactions;
use normalize::Reading;
use receive::{Forward, Recorder};
use rest::{Body, Rest};

/// Reconnecting after a failed call: 1 s, doubling, at most 30 s.
const RECONNECT: Backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(30));
/// How often the shard's heartbeat round trip is looked at for liveness.
const LIVENESS_POLL: Duration = Duration::from_secs(1);
/// The most shards followed (Discord recommends one per 1,000 servers).
const MAX_SHARDS: u32 = 64;

/// What the gateway must send: servers and their channels, messages in servers and DMs,
/// and their text (a privileged intent, switched on in the developer portal).
fn intents() -> GatewayIntents {
    GatewayIntents::GUILDS
        | GatewayIntents::GUILD_MESSAGES
        | GatewayIntents::DIRECT_MESSAGES
        | GatewayIntents::MESSAGE_CONTENT
}

/// The Discord connection.
pub struct DiscordAdapter {
    token: String,
    api_base_url: String,
    rest: Arc<Rest>,
    sender: Arc<DiscordSender>,
    liveness: Liveness,
    interactions: Interactions,
    identity: watch::Sender<Option<Identity>>,
    reading: Reading,
    auto_thread: bool,
}

impl DiscordAdapter {
    pub fn new(settings: &DiscordSettings) -> Result<Self, AdapterError> {
        let rest = Arc::new(
            Rest::new(&settings.api_base_url, &settings.token).map_err(AdapterError::Config)?,
        );
        let interactions = Interactions::default();
        let (identity, identity_rx) = watch::channel(None);
        Ok(DiscordAdapter {
            token: settings.token.clone(),
            api_base_url: settings.api_base_url.clone(),
            sender: Arc::new(DiscordSender::new(
                rest.clone(),
                interactions.clone(),
                identity_rx,
                settings.reactions,
            )),
            rest,
            liveness: Liveness::default(),
            interactions,
            identity,
            reading: Reading {
                free_response_channels: settings.free_response_channels.clone(),
                ignore_no_mention: settings.ignore_no_mention,
                allowed: settings
                    .common
                    .access
                    .allowed
                    .iter()
                    .chain(&settings.gateway_access.allowed)
                    .cloned()
                    .collect(),
                allow_all: settings.common.access.allow_all || settings.gateway_access.allow_all,
            },
            auto_thread: settings.auto_thread,
        })
    }

    /// Who the bot is (`GET /users/@me`) and where its gateway is (`GET /gateway/bot`),
    /// retried with backoff on passing trouble; a refused token is final.
    async fn discover(
        &self,
        shutdown: &CancellationToken,
    ) -> Result<Option<(Identity, Gateway)>, AdapterError> {
        let mut backoff = RECONNECT;
        loop {
            let result = tokio::select! {
                _ = shutdown.cancelled() => return Ok(None),
                r = self.discover_once() => r,
            };
            match result {
                Ok(found) => return Ok(Some(found)),
                Err(SendError::Unauthorized(_)) => {
                    return Err(AdapterError::Config(
                        "Discord refused the bot token (check DISCORD_BOT_TOKEN)".into(),
                    ));
                }
                Err(e) => {
                    let wait = match &e {
                        SendError::RateLimited { retry_after, .. } => *retry_after,
                        _ => backoff.next_delay(),
                    };
                    tracing::warn!(error = %e, retry_in = ?wait, "discord: cannot reach the API");
                    tokio::select! {
                        _ = shutdown.cancelled() => return Ok(None),
                        _ = tokio::time::sleep(wait) => {}
                    }
                }
            }
        }
    }

    async fn discover_once(&self) -> Result<(Identity, Gateway), SendError> {
        let me = self
            .rest
            .call(Method::GET, "/users/@me", Body::Empty)
            .await?;
        let gateway = self
            .rest
            .call(Method::GET, "/gateway/bot", Body::Empty)
            .await?;
        let text = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).map(str::to_owned);
        let user_id = text(&me, "id")
            .ok_or_else(|| SendError::Transient("/users/@me answered without an id".into()))?;
        let url = text(&gateway, "url")
            .ok_or_else(|| SendError::Transient("/gateway/bot answered without a url".into()))?;
        let identity = Identity {
            // Bots made since 2019 have their application's id; READY says for sure.
            application_id: user_id.clone(),
            user_id,
            name: text(&me, "username").unwrap_or_default(),
            from_ready: false,
        };
        // Discord's recommendation, which it also enforces: a bot in more servers than one
        // shard may carry is refused a connection without shards.
        let shards = gateway
            .get("shards")
            .and_then(Value::as_u64)
            .map_or(1, |n| n.clamp(1, u64::from(MAX_SHARDS)) as u32);
        Ok((identity, Gateway { url, shards }))
    }
}

impl DiscordAdapter {
    /// Whether the application may read message content: its flags carry
    /// GATEWAY_MESSAGE_CONTENT (1 << 19) or, for an unverified bot, its limited form
    /// (1 << 18), as the portal's toggle sets them.
    async fn message_content_intent(&self) -> Result<bool, SendError> {
        let application = self
            .rest
            .call(Method::GET, "/applications/@me", Body::Empty)
            .await?;
        let flags = application
            .get("flags")
            .and_then(Value::as_u64)
            .unwrap_or(0);
        Ok(flags & (1 << 19 | 1 << 18) != 0)
    }
}

#[async_trait]
impl Adapter for DiscordAdapter {
    async fn check_credentials(&self) -> Result<String, AdapterError> {
        match self.discover_once().await {
            Ok((identity, _)) => {
                let who = format!("{} (id {})", identity.name, identity.user_id);
                match self.message_content_intent().await {
                    Ok(true) => Ok(format!("{who}; Message Content intent on")),
                    Ok(false) => Err(AdapterError::Config(format!(
                        "{who} cannot read messages: the Message Content intent is off (Discord Developer Portal → your application → Bot → Privileged Gateway Intents → Message Content Intent)"
                    ))),
                    Err(e) => Ok(format!(
                        "{who}; the Message Content intent could not be checked: {e}"
                    )),
                }
            }
            Err(SendError::Unauthorized(_)) => Err(AdapterError::Config(
                "Discord refused the bot token (check DISCORD_BOT_TOKEN)".into(),
            )),
            Err(e) => Err(AdapterError::Other(format!("Discord: {e}"))),
        }
    }

    fn platform(&self) -> Platform {
        Platform::Discord
    }

    fn sender(&self) -> Arc<dyn PlatformSender> {
        self.sender.clone()
    }

    fn liveness(&self) -> Liveness {
        self.liveness.clone()
    }

    async fn run(
        &self,
        sink: Arc<dyn InboundSink>,
        shutdown: CancellationToken,
    ) -> Result<(), AdapterError> {
        let Some((identity, gateway)) = self.discover(&shutdown).await? else {
            return Ok(());
        };
        self.liveness.beat();
        let bot = identity.user_id.clone();
        self.identity.send_if_modified(|known| {
            // READY of an earlier run knows the application id better.
            if known.is_none() {
                *known = Some(identity);
                true
            } else {
                false
            }
        });
        // One gateway connection per shard across the nodes of one store, each kept by
        // whichever node holds its lease; the nodes spread the shards among themselves.
        let group = format!("discord:{bot}:shard");
        let shards = (0..gateway.shards).map(|index| {
            let lease = sink.exclusive_in(&group, index, gateway.shards);
            let shard = Shard {
                index,
                of: gateway.shards,
            };
            self.keep_shard(&sink, &gateway.url, shard, lease, &shutdown)
        });
        futures_util::future::try_join_all(shards).await?;
        Ok(())
    }
}

/// Where the gateway is, and how many shards the bot must run.
struct Gateway {
    url: String,
    shards: u32,
}

/// One shard of the bot's gateway connections: guilds' events go to shard
/// `(guild_id >> 22) % of`, direct messages to shard 0.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Shard {
    pub index: u32,
    pub of: u32,
}

/// How one gateway connection ended (besides an error).
enum Connection {
    /// Shut down.
    Ended,
    /// The shard's lease went to another node; the connection was closed.
    LeaseLost,
}

impl DiscordAdapter {
    /// Keep shard `shard`'s connection whenever this node holds its lease, until shutdown
    /// or an error.
    async fn keep_shard(
        &self,
        sink: &Arc<dyn InboundSink>,
        gateway_url: &str,
        shard: Shard,
        lease: Arc<dyn hermes_adapter::Exclusive>,
        shutdown: &CancellationToken,
    ) -> Result<(), AdapterError> {
        loop {
            let turn = tokio::select! {
                _ = shutdown.cancelled() => return Ok(()),
                turn = lease.acquired() => turn,
            };
            let lost = lease.lost(turn);
            match self
                .connect(sink, gateway_url, shard, shutdown, lost)
                .await?
            {
                Connection::Ended => return Ok(()),
                Connection::LeaseLost => {
                    tracing::warn!(
                        shard = shard.index,
                        "discord: this node no longer holds the shard's lease; it closed its connection (another node keeps it)"
                    );
                }
            }
        }
    }

    /// Keep shard `shard`'s gateway connection until shutdown, an error, or `lost`
    /// resolves. Events are recorded by a recorder of its own, which reads the shard's
    /// cursor afresh (another node may have moved it on meanwhile).
    async fn connect(
        &self,
        sink: &Arc<dyn InboundSink>,
        gateway_url: &str,
        shard: Shard,
        shutdown: &CancellationToken,
        lost: impl std::future::Future<Output = ()>,
    ) -> Result<Connection, AdapterError> {
        // serenity's own REST client is only used by the client builder (`GET /gateway`):
        // its rate limiter is off so the configured root is honoured.
        let http = HttpBuilder::new(&self.token)
            .proxy(self.api_base_url.clone())
            .ratelimiter_disabled(true)
            .build();
        let (events_tx, events_rx) = mpsc::unbounded_channel();
        let mut client = serenity::client::ClientBuilder::new_with_http(http, intents())
            .raw_event_handler(Forward(events_tx))
            .await
            .map_err(|e| AdapterError::Other(format!("discord: cannot build the client: {e}")))?;
        *client.ws_url.lock().await = gateway_url.to_owned();

        let stop = shutdown.child_token();
        // Whichever way this ends (an error, another shard's error dropping it), the
        // recorder and the heartbeat watch stop with it.
        let _stop_on_drop = stop.clone().drop_guard();
        let recorder = Arc::new(Recorder {
            shard,
            rest: self.rest.clone(),
            interactions: self.interactions.clone(),
            identity: self.identity.clone(),
            reading: self.reading.clone(),
            auto_thread: self.auto_thread,
            liveness: self.liveness.clone(),
            channels: Mutex::new(HashMap::new()),
            seen: Mutex::new(Default::default()),
        });
        let mut recording = tokio::spawn(recorder.run(events_rx, sink.clone(), stop.clone()));
        let watching = tokio::spawn(watch_heartbeats(
            client.shard_manager.clone(),
            self.liveness.clone(),
            stop.clone(),
        ));
        let manager = client.shard_manager.clone();
        let mut lease_lost = false;
        let result = tokio::select! {
            _ = shutdown.cancelled() => {
                manager.shutdown_all().await;
                Ok(())
            }
            _ = lost => {
                manager.shutdown_all().await;
                lease_lost = true;
                Ok(())
            }
            r = client.start_shard(shard.index, shard.of) => r,
            // The recorder only ends with shutdown; if it ended otherwise (a bug), events
            // would be read and dropped: stop, and let the daemon start the adapter again.
            _ = &mut recording => {
                manager.shutdown_all().await;
                Err(serenity::Error::Other("the event recorder stopped"))
            }
        };
        stop.cancel();
        // (A finished handle must not be awaited again.)
        if !recording.is_finished() {
            let _ = recording.await;
        }
        let _ = watching.await;
        match result {
            Ok(()) if lease_lost => Ok(Connection::LeaseLost),
            Ok(()) => Ok(Connection::Ended),
            Err(serenity::Error::Gateway(GatewayError::InvalidAuthentication)) => Err(
                AdapterError::Config("Discord refused the bot token (check DISCORD_BOT_TOKEN)".into()),
            ),
            Err(serenity::Error::Gateway(GatewayError::DisallowedGatewayIntents)) => {
                Err(AdapterError::Config(
                    "Discord refused the Message Content intent: switch on \"Message Content Intent\" on the Bot page of the developer portal".into(),
                ))
            }
            Err(e) => Err(AdapterError::Other(format!("discord: the gateway stopped: {e}"))),
        }
    }
}

/// Liveness is the last heartbeat Discord acknowledged: serenity records the round trip of
/// each acknowledged heartbeat, so a new value means a new acknowledgement.
async fn watch_heartbeats(
    manager: Arc<serenity::gateway::ShardManager>,
    liveness: Liveness,
    stop: CancellationToken,
) {
    let mut last = None;
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(LIVENESS_POLL) => {}
        }
        let runners = manager.runners.lock().await;
        for info in runners.values() {
            if info.stage == ConnectionStage::Connected
                && info.latency.is_some()
                && info.latency != last
            {
                last = info.latency;
                liveness.beat();
            }
        }
    }
}
