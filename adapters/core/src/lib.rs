//! `hermes-adapter`: the narrow contract between a chat platform and the gateway daemon.
//!
//! An adapter does three things and nothing else:
//!
//! * **Receive.** It listens to its platform (its own loop: long polling, a gateway
//!   WebSocket, Socket Mode) and hands every event, normalised into an [`Inbound`], to an
//!   [`InboundSink`]. It acknowledges the platform (advances a polling offset, acks an
//!   envelope, answers a webhook) only after the sink returned, which is when the event is
//!   durably recorded (invariant 1). Presses on choices it acknowledges itself, at once,
//!   after recording, never after a trip through the daemon (Discord and Slack want an
//!   answer within 3 s).
//! * **Render and send.** Through [`PlatformSender`] it turns Markdown into its platform's
//!   markup in chunks that fit once rendered ([`PlatformSender::render`]), lays out the
//!   [`Choice`]s of a prompt, shows a working indicator, and performs [`Outbound`] actions,
//!   reporting failures as a [`SendError`] the daemon can act on.
//!   An adapter that receives over HTTP hands the daemon its [`WebhookRoute`]s instead.
//! * **Declare.** [`Capabilities`] say what the platform can do (length limit and its unit,
//!   how many choices, edits, the working indicator, rate limits and their scope), so the
//!   daemon never names a platform.
//!
//! Each adapter crate also reads its own settings ([`PlatformSettings`]), so adding a
//! platform is its crate, a line in the daemon's platform list, one cargo feature and a
//! variant of [`Platform`] (`docs/adapters.md`).
//!
//! Adapters depend on this crate (and `hermes-format`) only, never on each other or on the
//! daemon.

mod backoff;
mod capabilities;
mod capped;
mod chat;
mod console;
mod error;
mod exclusive;
mod inbound;
mod outbound;
mod record;
#[cfg(feature = "serve")]
pub mod serve;
mod settings;
mod webhook;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Idle connections a platform's HTTP client keeps open to one host for later requests.
/// reqwest keeps every one by default: a burst of sends to a thousand chats over HTTP/1
/// (a local Bot API server, the fakes) left a thousand open connections, ~20 KiB each, for
/// the pool's idle time (docs/performance.md, step 18).
pub const IDLE_CONNECTIONS_PER_HOST: usize = 16;

pub use async_trait::async_trait;
pub use tokio_util::sync::CancellationToken;

pub use backoff::Backoff;
pub use capabilities::{
    Capabilities, ChoiceLimits, LengthUnit, RateLimit, RateScope, WorkingIndicator,
};
pub use capped::{copy_capped, read_capped};
pub use chat::{Author, ChatKind, ChatRef, Platform, WORK_SHARES, work_share};
pub use console::{Console, LocalModelServer, ModelChoice, ModelSetup, ProviderOffer};
pub use error::{AdapterError, FetchError, SendError, SinkError};
pub use exclusive::{AlwaysOurs, Exclusive};
pub use inbound::{
    Attachment, CommandCall, DeliveryStatus, HANDLE_PREFIX, Inbound, InboundKind, InboundMessage,
    MediaKind, Press, Wakeup, is_handle,
};
pub use outbound::{
    Choice, ChoiceStyle, CommandSpec, Delivered, MessageBody, Outbound, OutboundFile, SendOnce,
    TurnEnd, WorkingPhase,
};
pub use record::{record_batch, record_until_done};
pub use settings::{
    Access, Common, PlatformSettings, SettingsSource, http_root, is_truthy, mask, split_list,
};
pub use webhook::{Verifier, WebhookHandler, WebhookRequest, WebhookResponse, WebhookRoute};

/// Renders for and sends to one platform. Cheap to share (`Arc`).
#[async_trait]
pub trait PlatformSender: Send + Sync {
    fn platform(&self) -> Platform;
    fn capabilities(&self) -> &Capabilities;

    /// The model's Markdown as one or more message bodies in the platform's markup, each
    /// within [`Capabilities::max_message_len`] as rendered (escapes and links included), with
    /// the Markdown of that piece as its plain fallback.
    fn render(&self, markdown: &str) -> Vec<MessageBody>;

    /// Perform one action.
    async fn send(&self, action: Outbound) -> Result<Delivered, SendError>;

    /// The bytes of an inbound attachment, refusing files over `max_bytes` (authenticated
    /// with the bot's credentials where the platform needs it).
    async fn fetch_media(
        &self,
        attachment: &Attachment,
        max_bytes: u64,
    ) -> Result<Vec<u8>, FetchError> {
        let _ = (attachment, max_bytes);
        Err(FetchError::Unsupported)
    }

    /// The largest file the platform lets the bot download, where that is more than the
    /// gateway holds in memory (Telegram's local Bot API server: 2 GiB): a document that
    /// large is written to disk as it comes ([`PlatformSender::fetch_media_to`]). `None`:
    /// the gateway's own caps apply.
    fn large_downloads(&self) -> Option<u64> {
        None
    }

    /// An inbound attachment written to `out` as it comes, refusing more than `max_bytes`;
    /// how many bytes were written. What was written before a failure is the caller's to
    /// remove.
    async fn fetch_media_to(
        &self,
        attachment: &Attachment,
        max_bytes: u64,
        out: &mut (dyn tokio::io::AsyncWrite + Unpin + Send),
    ) -> Result<u64, FetchError> {
        use tokio::io::AsyncWriteExt;
        let bytes = self.fetch_media(attachment, max_bytes).await?;
        out.write_all(&bytes).await.map_err(capped::write_failed)?;
        Ok(bytes.len() as u64)
    }

    /// The API method `action` is sent with, where the platform limits each method apart
    /// (Slack's tiers): a [`RateScope::Method`] wait then holds only the actions of that
    /// method. `None`: one limit for everything.
    fn method_of(&self, action: &Outbound) -> Option<&'static str> {
        let _ = action;
        None
    }

    /// Every method [`PlatformSender::method_of`] names.
    fn methods(&self) -> &'static [&'static str] {
        &[]
    }

    /// Show the daemon's commands in the platform's command menu, where it has one.
    async fn register_commands(&self, commands: &[CommandSpec]) -> Result<(), SendError> {
        let _ = commands;
        Ok(())
    }
}

/// How the sink took an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Accepted {
    /// Recorded for the first time; it will be processed.
    New,
    /// Seen before (a platform redelivery); nothing more will happen.
    Duplicate,
}

/// Where adapters hand their events. Each method returns once its write is durable.
#[async_trait]
pub trait InboundSink: Send + Sync {
    async fn accept(&self, event: Inbound) -> Result<Accepted, SinkError>;

    /// Several events of one platform batch, in order, all durable when it returns (a sink
    /// may write them with one sync instead of one each). The answer holds a result per
    /// event up to and including the first failure; the events after it were not tried
    /// (the adapter records them one at a time, in order).
    async fn accept_batch(&self, events: Vec<Inbound>) -> Vec<Result<Accepted, SinkError>> {
        let mut results = Vec::with_capacity(events.len());
        for event in events {
            let result = self.accept(event).await;
            let failed = result.is_err();
            results.push(result);
            if failed {
                break;
            }
        }
        results
    }

    /// Durable per-adapter state (e.g. the Telegram polling offset), so a restart resumes
    /// where the last run stopped. `key` names whose cursor it is (the bot's id): a cursor
    /// of one bot must never be used for another.
    async fn load_cursor(&self, platform: Platform, key: &str)
    -> Result<Option<String>, SinkError>;
    async fn save_cursor(
        &self,
        platform: Platform,
        key: &str,
        cursor: String,
    ) -> Result<(), SinkError>;

    /// Keep `value` under `key` for `ttl` in the store every node shares: what an event
    /// leaves for its answer (who pressed a button, where a slash command's private answers
    /// go), which the node that sends the answer, after a restart too, reads back with
    /// [`InboundSink::recall`].
    async fn remember(
        &self,
        platform: Platform,
        key: &str,
        value: String,
        ttl: std::time::Duration,
    ) -> Result<(), SinkError>;
    /// What [`InboundSink::remember`] kept under `key`, unless it lapsed.
    async fn recall(&self, platform: Platform, key: &str) -> Result<Option<String>, SinkError>;

    /// What the platform reported about a message the gateway sent, by the platform's
    /// message id (WhatsApp sent / delivered / read / failed).
    async fn delivery_report(
        &self,
        platform: Platform,
        platform_message_id: String,
        status: DeliveryStatus,
    ) -> Result<(), SinkError>;

    /// Someone is there again to receive what the platform's sender refused with
    /// [`SendError::Unreachable`] (a web chat page connected): the replies held for it go
    /// now.
    async fn platform_reachable(&self, platform: Platform) {
        let _ = platform;
    }

    /// This node's id among the nodes sharing the store; `None` where the gateway is one
    /// node. A platform served on this machine only (the web chat's page) names it as the
    /// account of its chats, so they are run and sent here.
    fn node_id(&self) -> Option<String> {
        None
    }

    /// Whether the gateway lets `user_id` on `platform` in: on an allowlist, or approved
    /// by pairing (`hermes-gateway pairing approve`). An adapter that acts on its own for
    /// people (Discord opening a thread) asks this. `false` where the sink cannot say.
    async fn lets_in(&self, platform: Platform, user_id: &str) -> bool {
        let _ = (platform, user_id);
        false
    }

    /// What only one node may do at a time (`telegram:<bot>:poll`): always this node's
    /// where the gateway is one node.
    fn exclusive(&self, name: &str) -> Arc<dyn Exclusive> {
        let _ = name;
        Arc::new(AlwaysOurs)
    }

    /// Member `index` of a group of `size` such things the nodes spread among themselves
    /// (`discord:<bot>:shard` → the lease `discord:<bot>:shard:<index>`): a node takes more
    /// than its fair part of the group only when a member stays free, and gives its surplus
    /// up while every member has a holder. Always this node's where the gateway is one node.
    fn exclusive_in(&self, group: &str, index: u32, size: u32) -> Arc<dyn Exclusive> {
        let _ = (group, index, size);
        Arc::new(AlwaysOurs)
    }

    /// The gateway's side of the operator's questions (the model in use, choosing one),
    /// for a platform the operator uses; `None` where the gateway offers none.
    fn console(&self) -> Option<std::sync::Arc<dyn Console>> {
        None
    }
}

/// The last moment an adapter talked to its platform successfully; read by health checks and
/// the systemd watchdog. Cheap to clone (shared).
#[derive(Debug, Clone, Default)]
pub struct Liveness(Arc<AtomicU64>);

impl Liveness {
    /// Record a successful round trip now.
    pub fn beat(&self) {
        self.0.store(now_ms(), Ordering::Relaxed);
    }

    /// Time since the last successful round trip; `None` if there was none yet.
    pub fn since_last_beat(&self) -> Option<Duration> {
        let last = self.0.load(Ordering::Relaxed);
        (last != 0).then(|| Duration::from_millis(now_ms().saturating_sub(last)))
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// A platform connection. `run` may be called again after it returned an
/// [`AdapterError::Other`]: the daemon supervises adapters and restarts them with backoff.
#[async_trait]
pub trait Adapter: Send + Sync {
    fn platform(&self) -> Platform;
    /// The sending half, shared with the daemon's delivery.
    fn sender(&self) -> Arc<dyn PlatformSender>;
    fn liveness(&self) -> Liveness;
    /// The routes it receives on, mounted on the daemon's HTTP server (none for adapters
    /// that receive by their own connection).
    fn routes(&self, sink: Arc<dyn InboundSink>) -> Vec<WebhookRoute> {
        let _ = sink;
        Vec::new()
    }
    /// Ask the platform once whether the credentials work (`check-config --online`): who
    /// the bot is, [`AdapterError::Config`] when the platform refuses them, and
    /// [`AdapterError::Other`] when it cannot be asked (network, outage).
    async fn check_credentials(&self) -> Result<String, AdapterError>;
    /// Receive events and feed them to `sink` until `shutdown` is cancelled. Reconnects with
    /// backoff on its own; returns `Err` for failures it cannot get past by itself.
    async fn run(
        &self,
        sink: Arc<dyn InboundSink>,
        shutdown: CancellationToken,
    ) -> Result<(), AdapterError>;
}

/// A reqwest error in a few words, without its URL (URLs can carry keys; and they make a
/// log line long): what went wrong, and the HTTP status when there was one.
#[cfg(feature = "reqwest")]
pub fn describe_reqwest(error: &reqwest::Error) -> String {
    let kind = if error.is_timeout() {
        "timed out"
    } else if error.is_connect() {
        "could not connect"
    } else if error.is_body() || error.is_decode() {
        "the answer broke off"
    } else {
        "request failed"
    };
    match error.status() {
        Some(status) => format!("{kind} (HTTP {status})"),
        None => kind.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utf16_counts_astral_characters_twice() {
        assert_eq!(LengthUnit::Utf16.measure("a😀"), 3);
        assert_eq!(LengthUnit::Chars.measure("a😀"), 2);
        assert_eq!(LengthUnit::Bytes.measure("a😀"), 5);
    }
}
