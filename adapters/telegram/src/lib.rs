//! `hermes-telegram`: the Telegram adapter (teloxide-core, long polling, or a webhook when
//! `TELEGRAM_WEBHOOK_URL` is set: `webhook.rs`).
//!
//! Receiving is a hand-written `getUpdates` loop rather than teloxide's dispatcher, because
//! the offset must advance only after the gateway has recorded each update (invariant 1):
//! the dispatcher confirms updates before its handlers have run. The offset is also saved
//! through the sink, so a restart resumes where the last run stopped.

mod html;
mod normalize;
mod press;
mod send;
mod settings;
mod webhook;

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use hermes_adapter::{
    Accepted, Adapter, AdapterError, Backoff, CancellationToken, Inbound, InboundKind, InboundSink,
    Liveness, Platform, PlatformSender, WebhookRoute, async_trait, record_batch,
};
use teloxide_core::payloads::{DeleteWebhookSetters, GetUpdatesSetters, SetWebhookSetters};
use teloxide_core::prelude::*;
use teloxide_core::types::{AllowedUpdate, Update, UpdateKind};
use teloxide_core::{ApiError, RequestError};

pub use html::render as render_html;
pub use normalize::{BotIdentity, normalize};
pub use press::ACK_WINDOW;
pub use send::TelegramSender;
pub use settings::{FileLimits, TelegramSettings, WebhookSettings, settings};

use press::OpenPresses;

/// In webhook mode, how often Telegram is asked about the webhook (its liveness, and the
/// delivery errors Telegram saw).
const WEBHOOK_CHECK_EVERY: Duration = Duration::from_secs(30);

/// Reconnecting after a failed call: 1 s, doubling, at most 30 s.
const RECONNECT: Backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(30));

/// The Telegram connection: polls updates into the sink; sends through [`TelegramSender`].
pub struct TelegramAdapter {
    bot: Bot,
    sender: Arc<TelegramSender>,
    liveness: Liveness,
    poll_timeout: Duration,
    /// Presses recorded and not answered yet (shared with the sender, for notices).
    presses: OpenPresses,
    webhook: Option<WebhookSettings>,
    /// Who the bot is, once `getMe` answered (the webhook needs it for mentions).
    identity: Arc<OnceLock<BotIdentity>>,
}

impl TelegramAdapter {
    pub fn new(settings: &TelegramSettings) -> Result<Self, AdapterError> {
        let url = reqwest::Url::parse(&settings.api_url).map_err(|e| {
            AdapterError::Config(format!("bad Telegram API URL {:?}: {e}", settings.api_url))
        })?;
        // teloxide's own settings (its timeouts), with a bound on idle connections.
        let client = teloxide_core::net::default_reqwest_settings()
            .pool_max_idle_per_host(hermes_adapter::IDLE_CONNECTIONS_PER_HOST)
            .build()
            .map_err(|e| AdapterError::Config(format!("cannot build the HTTP client: {e}")))?;
        let bot = Bot::with_client(settings.token.clone(), client).set_api_url(url.clone());
        // Files move tens of megabytes: their requests get minutes, not the seconds a
        // message gets.
        let files_client = reqwest::Client::builder()
            .pool_max_idle_per_host(hermes_adapter::IDLE_CONNECTIONS_PER_HOST)
            .connect_timeout(Duration::from_secs(10))
            .timeout(if settings.files == FileLimits::PUBLIC {
                FILE_TIMEOUT
            } else {
                LOCAL_FILE_TIMEOUT
            })
            .build()
            .map_err(|e| AdapterError::Config(format!("cannot build the HTTP client: {e}")))?;
        let files_bot = Bot::with_client(settings.token.clone(), files_client).set_api_url(url);
        let files_url = reqwest::Url::parse(&settings.files_url).map_err(|e| {
            AdapterError::Config(format!(
                "bad Telegram file URL {:?}: {e}",
                settings.files_url
            ))
        })?;
        let downloads = files_bot.clone().set_api_url(files_url);
        let presses = OpenPresses::default();
        Ok(TelegramAdapter {
            sender: Arc::new(TelegramSender::new(
                bot.clone(),
                send::Files {
                    bot: files_bot,
                    downloads,
                    limits: settings.files,
                },
                presses.clone(),
            )),
            bot,
            liveness: Liveness::default(),
            poll_timeout: settings.poll_timeout,
            presses,
            webhook: settings.webhook.clone(),
            identity: Arc::new(OnceLock::new()),
        })
    }

    /// Webhook mode: `setWebhook` (retried with backoff; a refused token is final), then
    /// Telegram is asked about its webhook now and then until shutdown: liveness, the
    /// delivery errors it reports, and the webhook set again if something replaced it.
    async fn serve_webhook(
        &self,
        webhook: &WebhookSettings,
        shutdown: &CancellationToken,
    ) -> Result<(), AdapterError> {
        let allowed = vec![AllowedUpdate::Message, AllowedUpdate::CallbackQuery];
        let mut backoff = RECONNECT;
        let mut reported: Option<String> = None;
        let mut set = false;
        loop {
            if !set {
                let request = self
                    .bot
                    .set_webhook(webhook.url.clone())
                    .secret_token(webhook.secret.clone())
                    .allowed_updates(allowed.clone());
                let result = tokio::select! {
                    _ = shutdown.cancelled() => return Ok(()),
                    r = request.send() => r,
                };
                match result {
                    Ok(_) => {
                        self.liveness.beat();
                        backoff.reset();
                        set = true;
                        tracing::info!(path = %webhook.path, "telegram: receiving through the webhook");
                    }
                    Err(RequestError::Api(ApiError::InvalidToken)) => {
                        return Err(AdapterError::Config(
                            "Telegram refused the bot token".into(),
                        ));
                    }
                    Err(e) => {
                        let wait = backoff.next_delay();
                        tracing::warn!(error = %e, retry_in = ?wait, "telegram: setWebhook failed");
                        if sleep_or_shutdown(wait, shutdown).await {
                            return Ok(());
                        }
                        continue;
                    }
                }
            }
            if sleep_or_shutdown(WEBHOOK_CHECK_EVERY, shutdown).await {
                return Ok(());
            }
            match self.bot.get_webhook_info().send().await {
                Ok(info) => {
                    self.liveness.beat();
                    if info.url.as_ref() != Some(&webhook.url) {
                        tracing::warn!(
                            "telegram: the webhook was changed or removed elsewhere; setting it again"
                        );
                        set = false;
                    }
                    let error = info.last_error_message.clone();
                    if error.is_some() && error != reported {
                        tracing::warn!(
                            error = error.as_deref().unwrap_or_default(),
                            pending = info.pending_update_count,
                            "telegram: Telegram reports it cannot deliver to the webhook"
                        );
                    }
                    reported = error;
                }
                Err(e) => tracing::warn!(error = %e, "telegram: getWebhookInfo failed"),
            }
        }
    }

    /// `getMe`, retried with backoff on network trouble; a refused token is final.
    async fn identify(
        &self,
        shutdown: &CancellationToken,
    ) -> Result<Option<BotIdentity>, AdapterError> {
        let mut backoff = RECONNECT;
        loop {
            let result = tokio::select! {
                _ = shutdown.cancelled() => return Ok(None),
                r = self.bot.get_me().send() => r,
            };
            match result {
                Ok(me) => {
                    self.liveness.beat();
                    let identity = BotIdentity {
                        id: me.user.id.0,
                        username: me.user.username.clone().unwrap_or_default(),
                    };
                    tracing::info!(bot = %identity.username, "telegram: connected");
                    return Ok(Some(identity));
                }
                Err(RequestError::Api(ApiError::InvalidToken)) => {
                    return Err(AdapterError::Config(
                        "Telegram refused the bot token (check TELEGRAM_BOT_TOKEN)".into(),
                    ));
                }
                Err(e) => {
                    let wait = backoff.next_delay();
                    tracing::warn!(error = %e, retry_in = ?wait, "telegram: getMe failed");
                    if sleep_or_shutdown(wait, shutdown).await {
                        return Ok(None);
                    }
                }
            }
        }
    }
}

#[async_trait]
impl Adapter for TelegramAdapter {
    async fn check_credentials(&self) -> Result<String, AdapterError> {
        match self.bot.get_me().send().await {
            Ok(me) => Ok(format!(
                "@{} (id {})",
                me.user.username.clone().unwrap_or_default(),
                me.user.id.0
            )),
            Err(RequestError::Api(ApiError::InvalidToken)) => Err(AdapterError::Config(
                "Telegram refused the bot token (check TELEGRAM_BOT_TOKEN)".into(),
            )),
            Err(e) => Err(AdapterError::Other(format!("Telegram getMe: {e}"))),
        }
    }

    fn platform(&self) -> Platform {
        Platform::Telegram
    }

    fn sender(&self) -> Arc<dyn PlatformSender> {
        self.sender.clone()
    }

    fn liveness(&self) -> Liveness {
        self.liveness.clone()
    }

    fn routes(&self, sink: Arc<dyn InboundSink>) -> Vec<WebhookRoute> {
        match &self.webhook {
            Some(webhook) => vec![webhook::route(
                &webhook.path,
                &webhook.secret,
                self.bot.clone(),
                self.presses.clone(),
                self.identity.clone(),
                sink,
            )],
            None => Vec::new(),
        }
    }

    async fn run(
        &self,
        sink: Arc<dyn InboundSink>,
        shutdown: CancellationToken,
    ) -> Result<(), AdapterError> {
        let Some(me) = self.identify(&shutdown).await? else {
            return Ok(());
        };
        let _ = self.identity.set(me.clone());
        if let Some(webhook) = &self.webhook {
            return self.serve_webhook(webhook, &shutdown).await;
        }
        // The offset and event ids belong to this bot: another token (another bot) starts
        // from its own offset, and its update ids cannot collide with this one's.
        let cursor_key = format!("bot{}", me.id);
        let mut offset: i32 = match sink.load_cursor(Platform::Telegram, &cursor_key).await {
            Ok(cursor) => cursor.and_then(|c| c.parse().ok()).unwrap_or(0),
            Err(e) => return Err(AdapterError::Other(e.to_string())),
        };
        let mut backoff = RECONNECT;
        let poll_secs = self.poll_timeout.as_secs().max(1) as u32;
        // One poller per bot across the nodes of one store (Telegram refuses a second).
        let poller = sink.exclusive(&format!("telegram:{}:poll", me.id));
        let mut turn = None;
        loop {
            let now_ours = tokio::select! {
                _ = shutdown.cancelled() => return Ok(()),
                t = poller.acquired() => t,
            };
            if turn.is_some_and(|turn| turn != now_ours) {
                // Another node polled meanwhile: go on from the offset it reached.
                match sink.load_cursor(Platform::Telegram, &cursor_key).await {
                    Ok(cursor) => {
                        offset = cursor.and_then(|c| c.parse().ok()).unwrap_or(offset);
                    }
                    Err(e) => return Err(AdapterError::Other(e.to_string())),
                }
                tracing::info!(offset, "telegram: polling on this node again");
            }
            turn = Some(now_ours);
            let request = self
                .bot
                .get_updates()
                .offset(offset)
                .timeout(poll_secs)
                .allowed_updates(vec![AllowedUpdate::Message, AllowedUpdate::CallbackQuery]);
            let result = tokio::select! {
                _ = shutdown.cancelled() => return Ok(()),
                r = request.send() => r,
            };
            let mut updates = match result {
                Ok(updates) => {
                    self.liveness.beat();
                    backoff.reset();
                    updates
                }
                Err(RequestError::Api(ApiError::InvalidToken)) => {
                    return Err(AdapterError::Config(
                        "Telegram refused the bot token".into(),
                    ));
                }
                Err(RequestError::Api(e)) if webhook_is_set(&e) => {
                    // Left from webhook mode (or by another program): removed, keeping what
                    // Telegram had not delivered yet, and polled again at once.
                    tracing::warn!(
                        "telegram: a webhook was set, so Telegram refused getUpdates; removing it to poll"
                    );
                    if let Err(e) = self
                        .bot
                        .delete_webhook()
                        .drop_pending_updates(false)
                        .send()
                        .await
                    {
                        let wait = backoff.next_delay();
                        tracing::warn!(error = %e, retry_in = ?wait, "telegram: deleteWebhook failed");
                        if sleep_or_shutdown(wait, &shutdown).await {
                            return Ok(());
                        }
                    }
                    continue;
                }
                Err(RequestError::RetryAfter(wait)) => {
                    tracing::warn!(wait = ?wait.duration(), "telegram: getUpdates rate limited");
                    if sleep_or_shutdown(wait.duration(), &shutdown).await {
                        return Ok(());
                    }
                    continue;
                }
                Err(e) => {
                    let wait = backoff.next_delay();
                    tracing::warn!(error = %e, retry_in = ?wait, "telegram: getUpdates failed");
                    if sleep_or_shutdown(wait, &shutdown).await {
                        return Ok(());
                    }
                    continue;
                }
            };
            // An album comes as one update per item: give the rest a moment to arrive,
            // reading again from the same offset (nothing is confirmed until recorded).
            for _ in 0..ALBUM_ROUNDS {
                if !ends_in_album(&updates) {
                    break;
                }
                if sleep_or_shutdown(ALBUM_WAIT, &shutdown).await {
                    return Ok(());
                }
                let again = self
                    .bot
                    .get_updates()
                    .offset(offset)
                    .timeout(0)
                    .allowed_updates(vec![AllowedUpdate::Message, AllowedUpdate::CallbackQuery]);
                match again.send().await {
                    Ok(more) if more.len() > updates.len() => updates = more,
                    _ => break,
                }
            }
            let before = offset;
            let mut events: Vec<(Inbound, Option<String>)> = Vec::new();
            for update in &updates {
                match normalize(update, &me) {
                    Some(event) => events.push((event, album_of(update))),
                    None => tracing::debug!(
                        update = update.id.0,
                        "telegram: update carries nothing for the gateway"
                    ),
                }
            }
            let events = merge_albums(events);
            // A press is held open before it is recorded: the daemon may dispatch it, and
            // send its notice, before the sink has even returned here.
            let mut notices: Vec<_> = events
                .iter()
                .map(|event| match &event.kind {
                    InboundKind::Press(press) => Some(self.presses.open(&press.press_id)),
                    _ => None,
                })
                .collect();
            // The whole batch is recorded with one sync; what failed is recorded one at a
            // time, in order. The offset must not pass an update the sink has not recorded.
            let all = record_batch(sink.as_ref(), &events, &shutdown, |i, accepted| {
                if let (InboundKind::Press(press), Some(notice)) =
                    (&events[i].kind, notices[i].take())
                {
                    // Recorded: answer it now, whatever the daemon is doing (a redelivered
                    // press has no notice coming).
                    let notice = (accepted == Accepted::New).then_some(notice);
                    self.presses
                        .acknowledge(&self.bot, press.press_id.clone(), notice);
                }
            })
            .await;
            if !all {
                return Ok(());
            }
            if let Some(last) = updates.last() {
                offset = offset.max(last.id.0 as i32 + 1);
            }
            if offset != before
                && let Err(e) = sink
                    .save_cursor(Platform::Telegram, &cursor_key, offset.to_string())
                    .await
            {
                tracing::warn!(error = %e, "telegram: could not save the polling offset");
            }
        }
    }
}

/// Whether Telegram refused `getUpdates` because a webhook is set (409: "can't use
/// getUpdates method while webhook is active"; teloxide names it only when the text is
/// exactly its own).
fn webhook_is_set(error: &ApiError) -> bool {
    match error {
        ApiError::CantGetUpdates => true,
        ApiError::Unknown(text) => text.contains("webhook is active"),
        _ => false,
    }
}

/// How long one file upload or download may take.
const FILE_TIMEOUT: Duration = Duration::from_secs(300);
/// The same through a local Bot API server, which moves up to 2 GB.
const LOCAL_FILE_TIMEOUT: Duration = Duration::from_secs(3600);

/// How long to wait for the rest of an album, and how many times.
const ALBUM_WAIT: Duration = Duration::from_millis(800);
const ALBUM_ROUNDS: usize = 3;

/// The album (media group) a message belongs to.
fn album_of(update: &Update) -> Option<String> {
    match &update.kind {
        UpdateKind::Message(m) => m.media_group_id().map(|g| g.0.clone()),
        _ => None,
    }
}

fn ends_in_album(updates: &[Update]) -> bool {
    updates.last().is_some_and(|u| album_of(u).is_some())
}

/// The items of one album as one message: the first item's event (its id), every item's
/// files, and the captions joined.
fn merge_albums(events: Vec<(Inbound, Option<String>)>) -> Vec<Inbound> {
    let mut merged: Vec<(Inbound, Option<String>)> = Vec::new();
    for (event, album) in events {
        if let (Some(album), Some((first, Some(first_album)))) = (&album, merged.last_mut())
            && album == first_album
            && first.chat == event.chat
            && let (InboundKind::Message(into), InboundKind::Message(item)) =
                (&mut first.kind, event.kind.clone())
        {
            into.attachments.extend(item.attachments);
            if !item.text.is_empty() {
                if !into.text.is_empty() {
                    into.text.push_str("\n\n");
                }
                into.text.push_str(&item.text);
            }
            into.addressed |= item.addressed;
            into.unsupported = None;
            continue;
        }
        merged.push((event, album));
    }
    merged.into_iter().map(|(event, _)| event).collect()
}

/// Sleep; returns true if shutdown came first.
async fn sleep_or_shutdown(wait: Duration, shutdown: &CancellationToken) -> bool {
    tokio::select! {
        _ = shutdown.cancelled() => true,
        _ = tokio::time::sleep(wait) => false,
    }
}
