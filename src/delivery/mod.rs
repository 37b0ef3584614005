//! Delivery: everything the gateway says goes through here. Replies are chunked and rendered
//! for the platform, written to the outbox, and sent by one *lane* per chat, in order,
//! through that chat's rate budget; `retry_after` and transient failures are retried with
//! backoff; a markup rejection falls back to plain text. Unsent rows survive a restart
//! (invariant 2); the budget never drops a reply, only delays it (invariant 4).

mod budget;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::FutureExt;
use hermes_adapter::{
    ChatKind, ChatRef, Delivered, Outbound, Platform, PlatformSender, RateLimit, SendError,
};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::config::DeliveryConfig;
use crate::format;
use crate::store::{NewOutboxRow, OutboxRow, Store, TurnRecord};
use budget::TokenBucket;

type ChatKey = (Platform, String);

/// How long an idle lane waits for more work before it ends.
const LANE_IDLE: Duration = Duration::from_secs(30);
/// How often pending rows without a lane are looked for (rows written by another process,
/// lanes that ended on an error).
const SWEEP_EVERY: Duration = Duration::from_secs(5);

/// A cheap handle to the delivery service.
#[derive(Clone)]
pub struct Delivery {
    inner: Arc<Inner>,
}

struct Inner {
    store: Store,
    senders: HashMap<Platform, Arc<dyn PlatformSender>>,
    config: DeliveryConfig,
    /// The wake-up of each running lane.
    lanes: Mutex<HashMap<ChatKey, Arc<Notify>>>,
    budgets: Mutex<HashMap<ChatKey, TokenBucket>>,
    shutdown: CancellationToken,
    tasks: TaskTracker,
}

impl Delivery {
    pub fn new(
        store: Store,
        senders: HashMap<Platform, Arc<dyn PlatformSender>>,
        config: DeliveryConfig,
        shutdown: CancellationToken,
    ) -> Self {
        Delivery {
            inner: Arc::new(Inner {
                store,
                senders,
                config,
                lanes: Mutex::new(HashMap::new()),
                budgets: Mutex::new(HashMap::new()),
                shutdown,
                tasks: TaskTracker::new(),
            }),
        }
    }

    /// Resume pending rows from an earlier run and keep sweeping for orphans.
    pub fn start(&self) {
        let this = self.clone();
        self.inner.tasks.spawn(async move {
            loop {
                match this.inner.store.outbox_pending_chats().await {
                    Ok(chats) => {
                        for chat in chats {
                            this.wake(&chat);
                        }
                    }
                    Err(e) => tracing::error!(error = %e, "delivery: cannot read the outbox"),
                }
                tokio::select! {
                    _ = this.inner.shutdown.cancelled() => return,
                    _ = tokio::time::sleep(SWEEP_EVERY) => {}
                }
            }
        });
    }

    /// Wait for the lanes to stop after shutdown was signalled.
    pub async fn drained(&self) {
        self.inner.tasks.close();
        self.inner.tasks.wait().await;
    }

    /// The store the outbox lives in.
    pub fn store(&self) -> &Store {
        &self.inner.store
    }

    /// The sender of a platform, if it is enabled.
    pub fn sender(&self, platform: Platform) -> Option<&Arc<dyn PlatformSender>> {
        self.inner.senders.get(&platform)
    }

    /// Outbox rows for a Markdown reply: chunked and rendered for the chat's platform. The
    /// first chunk replies to `reply_to`.
    pub fn reply_rows(
        &self,
        chat: &ChatRef,
        markdown: &str,
        reply_to: Option<String>,
    ) -> Vec<NewOutboxRow> {
        let text = if markdown.trim().is_empty() {
            "(no answer)"
        } else {
            markdown
        };
        let Some(sender) = self.sender(chat.platform) else {
            return vec![NewOutboxRow {
                chat: chat.clone(),
                body: hermes_adapter::MessageBody::plain(text),
                reply_to,
                buttons: vec![],
            }];
        };
        let caps = sender.capabilities();
        format::chunk(text, caps.max_message_len, caps.length_unit)
            .into_iter()
            .enumerate()
            .map(|(i, piece)| NewOutboxRow {
                chat: chat.clone(),
                body: format::render(&piece, caps.markup),
                reply_to: if i == 0 { reply_to.clone() } else { None },
                buttons: vec![],
            })
            .collect()
    }

    /// Queue a Markdown reply and start sending it.
    pub async fn reply(
        &self,
        chat: &ChatRef,
        markdown: &str,
        reply_to: Option<String>,
    ) -> Result<Vec<i64>, crate::store::StoreError> {
        self.queue(self.reply_rows(chat, markdown, reply_to)).await
    }

    /// Queue prepared rows and start sending them.
    pub async fn queue(
        &self,
        rows: Vec<NewOutboxRow>,
    ) -> Result<Vec<i64>, crate::store::StoreError> {
        let chats = chats_of(&rows);
        let ids = self.inner.store.outbox_enqueue(rows).await?;
        chats.iter().for_each(|chat| self.wake(chat));
        Ok(ids)
    }

    /// Commit the end of a turn (messages, outbox rows, inbox states in one transaction) and
    /// start sending what it queued.
    pub async fn commit(&self, record: TurnRecord) -> Result<Vec<i64>, crate::store::StoreError> {
        let chats = chats_of(&record.outbox);
        let ids = self.inner.store.finish_turn(record).await?;
        chats.iter().for_each(|chat| self.wake(chat));
        Ok(ids)
    }

    /// Make sure the chat's lane runs and looks at the outbox again.
    pub fn wake(&self, chat: &ChatRef) {
        let key = (chat.platform, chat.chat_id.clone());
        let mut lanes = self.inner.lanes.lock().expect("lanes lock");
        let notify = lanes.entry(key.clone()).or_insert_with(|| {
            let notify = Arc::new(Notify::new());
            let lane = Lane {
                delivery: self.clone(),
                key,
                chat: chat.clone(),
                notify: notify.clone(),
            };
            self.inner.tasks.spawn(lane.run());
            notify
        });
        // Under the lock, so a lane deciding to end sees this wake-up (see `Lane::run`).
        notify.notify_one();
    }

    /// Show "typing…" if the chat's budget has room to spare; never waits, never fails.
    pub fn typing(&self, chat: &ChatRef) {
        let Some(sender) = self.sender(chat.platform).cloned() else {
            return;
        };
        if sender.capabilities().typing_refresh.is_none() || !self.try_spare(chat) {
            return;
        }
        let chat = chat.clone();
        self.inner.tasks.spawn(async move {
            if let Err(SendError::RateLimited { .. }) = sender.send(Outbound::Typing { chat }).await
            {
                tracing::debug!("delivery: typing indicator rate limited");
            }
        });
    }

    /// Send an action that is not a queued message (button acknowledgement, prompt edit)
    /// through the chat's budget, retrying rate limits and transient failures a few times.
    pub async fn direct(&self, action: Outbound) -> Result<Delivered, SendError> {
        let chat = action.chat().clone();
        let sender = self
            .sender(chat.platform)
            .cloned()
            .ok_or_else(|| SendError::Rejected(format!("{} is not enabled", chat.platform)))?;
        let mut attempt = 0;
        loop {
            self.wait_budget(&chat).await;
            match sender.send(action.clone()).await {
                Err(SendError::RateLimited { retry_after }) if attempt < 3 => {
                    self.block(&chat, retry_after)
                }
                Err(SendError::Transient(_)) if attempt < 3 => {
                    tokio::time::sleep(backoff(attempt)).await
                }
                other => return other,
            }
            attempt += 1;
        }
    }

    fn limit_for(&self, chat: &ChatRef) -> RateLimit {
        let caps = self.sender(chat.platform).map(|s| s.capabilities());
        let mut limit = match (caps, chat.kind) {
            (Some(c), ChatKind::Direct) => c.per_chat_rate,
            (Some(c), _) => c.group_chat_rate,
            (None, _) => RateLimit {
                per_second: 1.0,
                burst: 1,
            },
        };
        if let Some(rate) = self.inner.config.rate_per_second {
            limit.per_second = rate;
        }
        if let Some(burst) = self.inner.config.burst {
            limit.burst = burst;
        }
        limit
    }

    fn with_bucket<T>(&self, chat: &ChatRef, f: impl FnOnce(&mut TokenBucket) -> T) -> T {
        let mut budgets = self.inner.budgets.lock().expect("budget lock");
        let bucket = budgets
            .entry((chat.platform, chat.chat_id.clone()))
            .or_insert_with(|| TokenBucket::new(self.limit_for(chat)));
        f(bucket)
    }

    fn try_spare(&self, chat: &ChatRef) -> bool {
        self.with_bucket(chat, |b| b.try_spare(Instant::now()))
    }

    fn block(&self, chat: &ChatRef, wait: Duration) {
        self.with_bucket(chat, |b| b.block_for(wait, Instant::now()));
    }

    async fn wait_budget(&self, chat: &ChatRef) {
        loop {
            let wait = self.with_bucket(chat, |b| b.reserve(Instant::now()));
            if wait.is_zero() {
                return;
            }
            tokio::time::sleep(wait).await;
        }
    }
}

/// Sends one chat's pending rows in order.
struct Lane {
    delivery: Delivery,
    key: ChatKey,
    chat: ChatRef,
    notify: Arc<Notify>,
}

impl Lane {
    async fn run(self) {
        let inner = &self.delivery.inner;
        let Some(sender) = self.delivery.sender(self.chat.platform).cloned() else {
            tracing::warn!(platform = %self.chat.platform, "delivery: messages wait for a platform that is not enabled");
            inner.lanes.lock().expect("lanes lock").remove(&self.key);
            return;
        };
        loop {
            // Take the wake-up we were started or woken with before reading the outbox.
            let _ = self.notify.notified().now_or_never();
            let rows = match inner
                .store
                .outbox_pending_for(self.chat.platform, &self.chat.chat_id)
                .await
            {
                Ok(rows) => rows,
                Err(e) => {
                    tracing::error!(error = %e, "delivery: cannot read the outbox");
                    Vec::new()
                }
            };
            for row in rows {
                if inner.shutdown.is_cancelled() {
                    break;
                }
                self.deliver(&sender, row).await;
            }
            tokio::select! {
                _ = inner.shutdown.cancelled() => break,
                _ = self.notify.notified() => continue,
                _ = tokio::time::sleep(LANE_IDLE) => {}
            }
            // End only if nobody woke us since: `wake` notifies under the same lock.
            let mut lanes = inner.lanes.lock().expect("lanes lock");
            if self.notify.notified().now_or_never().is_some() {
                continue;
            }
            lanes.remove(&self.key);
            return;
        }
        inner.lanes.lock().expect("lanes lock").remove(&self.key);
    }

    /// Send one row until it is sent or has failed for good.
    async fn deliver(&self, sender: &Arc<dyn PlatformSender>, row: OutboxRow) {
        let inner = &self.delivery.inner;
        let mut body = row.body.clone();
        let mut attempts = row.attempts as u32;
        loop {
            tokio::select! {
                _ = inner.shutdown.cancelled() => return,
                _ = self.delivery.wait_budget(&row.chat) => {}
            }
            let action = Outbound::Text {
                chat: row.chat.clone(),
                body: body.clone(),
                reply_to: row.reply_to.clone(),
                buttons: row.buttons.clone(),
            };
            let result = sender.send(action).await;
            let error = match result {
                Ok(delivered) => {
                    if let Err(e) = inner
                        .store
                        .outbox_mark_sent(row.id, delivered.message_id)
                        .await
                    {
                        tracing::error!(error = %e, row = row.id, "delivery: sent, but could not mark the row sent");
                    }
                    return;
                }
                Err(e) => e,
            };
            attempts += 1;
            let give_up = match &error {
                SendError::RateLimited { retry_after } => {
                    tracing::warn!(chat = %row.chat.chat_id, ?retry_after, "delivery: rate limited by the platform");
                    self.delivery.block(&row.chat, *retry_after);
                    false
                }
                SendError::MarkupRejected(why) if body.markup.is_some() => {
                    tracing::warn!(why = %why, row = row.id, "delivery: markup rejected; sending plain text");
                    body.markup = None;
                    false
                }
                SendError::Transient(_) => attempts >= inner.config.max_attempts,
                SendError::MarkupRejected(_) | SendError::Rejected(_) => true,
            };
            let _ = inner
                .store
                .outbox_mark_attempt(row.id, error.to_string(), give_up)
                .await;
            if give_up {
                tracing::error!(error = %error, row = row.id, chat = %row.chat.chat_id, "delivery: giving up on a message");
                return;
            }
            if let SendError::Transient(_) = error {
                tokio::select! {
                    _ = inner.shutdown.cancelled() => return,
                    _ = tokio::time::sleep(backoff(attempts)) => {}
                }
            }
        }
    }
}

/// The distinct chats some rows go to.
fn chats_of(rows: &[NewOutboxRow]) -> Vec<ChatRef> {
    let mut chats: Vec<ChatRef> = Vec::new();
    for row in rows {
        if !chats.contains(&row.chat) {
            chats.push(row.chat.clone());
        }
    }
    chats
}

/// 0.5 s, 1 s, 2 s … capped at 30 s.
fn backoff(attempt: u32) -> Duration {
    Duration::from_millis(500u64.saturating_mul(1 << attempt.min(6))).min(Duration::from_secs(30))
}
