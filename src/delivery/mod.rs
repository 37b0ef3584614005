//! Delivery: the only way out. Everything the gateway says or changes in a chat (replies,
//! notices, prompts, the edit that shows a prompt's outcome) is rendered by the platform's
//! adapter, written to the outbox, and sent by one *lane* per chat ([`lane`]), in order,
//! through the chat's and the bot's rate budgets. Unsent rows survive a restart
//! (invariant 2); the budget never drops a reply, only delays it (invariant 4); working
//! indicators only take a token the budget can spare.

mod budget;
pub mod destinations;
mod lane;
#[cfg(test)]
mod tests;

use std::collections::{HashMap, HashSet};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hermes_adapter::{
    ChatKind, ChatRef, MessageBody, Outbound, Platform, PlatformSender, RateLimit, RateScope,
    WorkingPhase, is_handle,
};
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::config::DeliveryConfig;
use crate::store::{NewOutboxRow, Settled, Store, StoreError, TurnRecord};
use budget::TokenBucket;
use lane::Lane;

/// A chat's lane and budget key: platform, account, chat id.
type ChatKey = (Platform, Option<String>, String);

fn chat_key(chat: &ChatRef) -> ChatKey {
    (chat.platform, chat.account.clone(), chat.chat_id.clone())
}

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
    /// Per-chat budgets.
    chat_budgets: Mutex<HashMap<ChatKey, TokenBucket>>,
    /// Per-bot budgets, for platforms that declare one.
    bot_budgets: Mutex<HashMap<Platform, TokenBucket>>,
    /// Until when a platform's API method may not be called (`RateScope::Method`).
    method_holds: Mutex<HashMap<(Platform, &'static str), Instant>>,
    /// Places for sends in flight, per platform (`delivery.max_concurrent_sends`).
    send_places: HashMap<Platform, Arc<Semaphore>>,
    /// The last stage of stopping (`daemon::Stages::sending`): lanes stop sending.
    sending: CancellationToken,
    tasks: TaskTracker,
    /// Rows the last run may have handed to the platform without marking them sent (each
    /// chat's oldest pending row at startup): sent as maybe sent ([`SendOnce`]).
    unsure: Mutex<HashSet<i64>>,
    /// On a store shared by several nodes: whether this node sends a chat's messages now
    /// (it holds the chat's share of the work); unset on a node of its own.
    gate: std::sync::OnceLock<SendGate>,
    /// The chats with a send under way, and how many.
    in_flight: Mutex<HashMap<ChatKey, usize>>,
}

/// A send under way ([`Delivery::sending_now`]); it ends when dropped.
struct InFlight {
    delivery: Delivery,
    key: ChatKey,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let mut in_flight = self
            .delivery
            .inner
            .in_flight
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if let Some(count) = in_flight.get_mut(&self.key) {
            *count -= 1;
            if *count == 0 {
                in_flight.remove(&self.key);
            }
        }
    }
}

/// Whether this node may send a chat's messages now.
pub type SendGate = Arc<dyn Fn(&ChatRef) -> bool + Send + Sync>;

impl Delivery {
    pub fn new(
        store: Store,
        senders: HashMap<Platform, Arc<dyn PlatformSender>>,
        config: DeliveryConfig,
        sending: CancellationToken,
    ) -> Self {
        let send_places = senders
            .keys()
            .map(|&p| {
                (
                    p,
                    Arc::new(Semaphore::new(config.max_concurrent_sends.max(1))),
                )
            })
            .collect();
        Delivery {
            inner: Arc::new(Inner {
                store,
                senders,
                send_places,
                config,
                lanes: Mutex::new(HashMap::new()),
                chat_budgets: Mutex::new(HashMap::new()),
                bot_budgets: Mutex::new(HashMap::new()),
                method_holds: Mutex::new(HashMap::new()),
                sending,
                tasks: TaskTracker::new(),
                unsure: Mutex::new(HashSet::new()),
                gate: std::sync::OnceLock::new(),
                in_flight: Mutex::new(HashMap::new()),
            }),
        }
    }

    /// Startup (or shares of the work taken over), before anything of the chats `mine`
    /// keeps is queued or settled: their rows a crash caught mid-send go back in the queue,
    /// and their oldest rows are sent as maybe sent.
    pub async fn recover(&self, mine: impl Fn(&ChatRef) -> bool + Clone + Send + 'static) {
        match self
            .inner
            .store
            .outbox_requeue_interrupted(mine.clone())
            .await
        {
            Ok(0) => {}
            Ok(n) => tracing::warn!(
                rows = n,
                "delivery: messages caught mid-send by the last run are sent again"
            ),
            Err(e) => tracing::error!(error = %e, "delivery: cannot requeue interrupted rows"),
        }
        match self.inner.store.outbox_heads(mine).await {
            Ok(heads) => self.inner.unsure.lock().expect("unsure lock").extend(heads),
            // Without the list, nothing is looked up: a resend may show twice on Slack.
            Err(e) => tracing::error!(error = %e, "delivery: cannot read the outbox's oldest rows"),
        }
    }

    /// Send a chat's messages only while `gate` says this node may (several nodes on one
    /// store): no lane starts otherwise, and a lane checks before each call to the
    /// platform.
    pub fn only_while(&self, gate: SendGate) {
        let _ = self.inner.gate.set(gate);
    }

    /// Whether this node may send `chat`'s messages now.
    fn may_send(&self, chat: &ChatRef) -> bool {
        self.inner.gate.get().is_none_or(|gate| gate(chat))
    }

    /// Whether a message of a chat `mine` keeps is being sent now: a share of the work
    /// this node gives up is let go in the store only once none is (the next holder would
    /// send it again).
    pub fn sends_in_flight(&self, mine: impl Fn(Platform, Option<&str>, &str) -> bool) -> bool {
        self.inner
            .in_flight
            .lock()
            .expect("in flight lock")
            .keys()
            .any(|(platform, account, chat_id)| mine(*platform, account.as_deref(), chat_id))
    }

    /// A send of chat `key`'s under way, from before the lane asks whether it may send
    /// until the row is marked sent (see [`Delivery::sends_in_flight`]).
    fn sending_now(&self, key: &ChatKey) -> InFlight {
        *self
            .inner
            .in_flight
            .lock()
            .expect("in flight lock")
            .entry(key.clone())
            .or_default() += 1;
        InFlight {
            delivery: self.clone(),
            key: key.clone(),
        }
    }

    /// Whether row `id` may have reached the platform in the last run (asked once per row).
    fn unsure(&self, id: i64) -> bool {
        self.inner.unsure.lock().expect("unsure lock").remove(&id)
    }

    /// Send what is pending from an earlier run and keep sweeping for orphans.
    pub fn start(&self) {
        let this = self.clone();
        self.inner.tasks.spawn(async move {
            loop {
                match this.inner.store.outbox_pending_chats().await {
                    // Only chats without a lane: a running lane reads the outbox again by
                    // itself, and one holding a reply must not be retried every sweep.
                    Ok(chats) => chats.iter().for_each(|chat| this.ensure_lane(chat)),
                    Err(e) => tracing::error!(error = %e, "delivery: cannot read the outbox"),
                }
                this.forget_rested_budgets();
                tokio::select! {
                    _ = this.inner.sending.cancelled() => return,
                    _ = tokio::time::sleep(SWEEP_EVERY) => {}
                }
            }
        });
    }

    /// Drop the budgets of chats that are full again: one per chat ever written to would
    /// otherwise pile up for as long as the daemon runs.
    fn forget_rested_budgets(&self) {
        let now = Instant::now();
        let mut budgets = self.inner.chat_budgets.lock().expect("budget lock");
        budgets.retain(|_, bucket| !bucket.is_rested(now));
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

    /// Markdown rendered by the chat's adapter: one body per message, each within the
    /// platform's limit as rendered.
    pub fn render(&self, chat: &ChatRef, markdown: &str) -> Vec<MessageBody> {
        // Secrets never reach a chat, whoever wrote the text (the model, a tool's output in
        // a notice, a provider's error).
        let markdown = &*crate::secrets::scrub(markdown);
        match self.sender(chat.platform) {
            Some(sender) => sender.render(markdown),
            None => vec![MessageBody::plain(markdown)],
        }
    }

    /// Outbox rows for a Markdown reply. The first message replies to `reply_to`; every
    /// part goes to an adapter's handle (a deferred interaction: its later parts are its
    /// follow-ups, private if it is).
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
        self.render(chat, text)
            .into_iter()
            .enumerate()
            .map(|(i, body)| NewOutboxRow {
                chat: chat.clone(),
                body,
                reply_to: if i == 0 || reply_to.as_deref().is_some_and(is_handle) {
                    reply_to.clone()
                } else {
                    None
                },
                choices: vec![],
                file: None,
                edit_of: None,
            })
            .collect()
    }

    /// The rows of an answer: its Markdown text, then each file (its caption names it).
    pub fn rows_with_files(
        &self,
        chat: &ChatRef,
        markdown: &str,
        files: Vec<hermes_adapter::OutboundFile>,
        reply_to: Option<String>,
    ) -> Vec<NewOutboxRow> {
        let mut rows = if markdown.is_empty() && !files.is_empty() {
            Vec::new()
        } else {
            self.reply_rows(chat, markdown, reply_to)
        };
        rows.extend(files.into_iter().map(|file| NewOutboxRow {
            chat: chat.clone(),
            body: hermes_adapter::MessageBody::plain(format!("[file] {}", file.name)),
            reply_to: None,
            choices: Vec::new(),
            file: Some(file),
            edit_of: None,
        }));
        rows
    }

    /// Queue a Markdown reply and start sending it.
    pub async fn reply(
        &self,
        chat: &ChatRef,
        markdown: &str,
        reply_to: Option<String>,
    ) -> Result<Vec<i64>, StoreError> {
        self.queue(self.reply_rows(chat, markdown, reply_to)).await
    }

    /// Queue the first message of a streamed answer to inbox row `answers` (see
    /// [`Store::outbox_enqueue_streamed`]) and start sending it.
    pub async fn stream_start(
        &self,
        chat: &ChatRef,
        markdown: &str,
        reply_to: Option<String>,
        answers: Option<i64>,
    ) -> Result<Vec<i64>, StoreError> {
        let rows = self.reply_rows(chat, markdown, reply_to);
        let ids = self
            .inner
            .store
            .outbox_enqueue_streamed(rows, answers)
            .await?;
        self.wake(chat);
        Ok(ids)
    }

    /// Queue prepared rows and start sending them.
    pub async fn queue(&self, rows: Vec<NewOutboxRow>) -> Result<Vec<i64>, StoreError> {
        let chats = chats_of(&rows);
        let ids = self.inner.store.outbox_enqueue(rows).await?;
        chats.iter().for_each(|chat| self.wake(chat));
        Ok(ids)
    }

    /// Commit the end of a turn (messages, outbox rows, inbox states in one transaction) and
    /// start sending what it queued.
    pub async fn commit(&self, record: TurnRecord) -> Result<Vec<i64>, StoreError> {
        let chats = chats_of(&record.outbox);
        let ids = self.inner.store.finish_turn(record).await?;
        chats.iter().for_each(|chat| self.wake(chat));
        Ok(ids)
    }

    /// Show `outcome` under the message of outbox row `row` and drop its choices: the row is
    /// rewritten if it has not gone out yet, else an edit is queued behind it in the chat's
    /// lane (so the outcome can never overtake the prompt).
    pub async fn settle(&self, row: i64, outcome: &str) -> Result<(), StoreError> {
        let this = self.clone();
        let outcome = outcome.to_owned();
        let chat = self
            .inner
            .store
            .outbox_settle(row, move |chat, markdown| {
                // The outcome under the message it settles; just the outcome when both no
                // longer fit one message.
                let mut bodies = this.render(chat, &format!("{markdown}\n\n{outcome}"));
                let alone = this.render(chat, &outcome).swap_remove(0);
                if bodies.len() != 1 {
                    bodies = vec![alone.clone()];
                }
                let body = bodies.swap_remove(0);
                // Where a sent message cannot be edited, what follows it is the outcome
                // alone, not the whole prompt again.
                let can_edit = this
                    .sender(chat.platform)
                    .is_some_and(|s| s.capabilities().edits);
                let later = if can_edit { body.clone() } else { alone };
                Settled { body, later }
            })
            .await?;
        self.wake(&chat);
        Ok(())
    }

    /// Show `markdown` in place of what the message of row `row` says (its first rendered
    /// message, when it no longer fits one), through the chat's lane.
    pub async fn edit(&self, row: i64, chat: &ChatRef, markdown: &str) -> Result<(), StoreError> {
        let body = self
            .render(chat, markdown)
            .into_iter()
            .next()
            .unwrap_or_else(|| MessageBody::plain(markdown));
        let chat = self.inner.store.outbox_edit(row, body).await?;
        self.wake(&chat);
        Ok(())
    }

    /// How long a reply the platform may not take yet is kept for (a week, or
    /// `delivery.max_age` if longer).
    pub fn hold_max_age(&self) -> Duration {
        self.inner.config.max_age.max(lane::HOLD_MAX_AGE)
    }

    /// Make sure the chat's lane runs and looks at the outbox again.
    pub fn wake(&self, chat: &ChatRef) {
        self.lane(chat, true);
    }

    /// Every chat `mine` keeps with rows waiting gets its lane (a node that has just taken
    /// shares of the work over from another).
    pub async fn wake_all_pending(&self, mine: impl Fn(&ChatRef) -> bool) {
        match self.inner.store.outbox_pending_chats().await {
            Ok(chats) => chats
                .iter()
                .filter(|chat| mine(chat))
                .for_each(|chat| self.wake(chat)),
            Err(e) => tracing::error!(error = %e, "delivery: cannot read the outbox"),
        }
    }

    /// Someone is there again to take `platform`'s messages (a web chat page connected):
    /// every lane of it looks again now, and every chat of it with rows waiting gets one.
    pub async fn platform_reachable(&self, platform: Platform) {
        let running: Vec<Arc<Notify>> = self
            .inner
            .lanes
            .lock()
            .expect("lanes lock")
            .iter()
            .filter(|(key, _)| key.0 == platform)
            .map(|(_, notify)| notify.clone())
            .collect();
        running.iter().for_each(|notify| notify.notify_one());
        match self.inner.store.outbox_pending_chats().await {
            Ok(chats) => chats
                .iter()
                .filter(|chat| chat.platform == platform)
                .for_each(|chat| self.wake(chat)),
            Err(e) => {
                tracing::error!(%platform, error = %e, "delivery: cannot read the outbox to send what waited")
            }
        }
    }

    /// A person wrote in `chat`: a lane running there looks again now (it may hold a reply
    /// the person's message has just made sendable: WhatsApp's window reopened). No lane
    /// is started for it.
    pub fn person_wrote(&self, chat: &ChatRef) {
        if let Some(notify) = self
            .inner
            .lanes
            .lock()
            .expect("lanes lock")
            .get(&chat_key(chat))
        {
            notify.notify_one();
        }
    }

    /// Start the chat's lane if none runs.
    fn ensure_lane(&self, chat: &ChatRef) {
        self.lane(chat, false);
    }

    /// Start the chat's lane if none runs; with `look_again`, a running one looks again.
    fn lane(&self, chat: &ChatRef, look_again: bool) {
        if !self.may_send(chat) {
            return;
        }
        let key = chat_key(chat);
        let mut lanes = self.inner.lanes.lock().expect("lanes lock");
        let mut started = false;
        let notify = lanes.entry(key.clone()).or_insert_with(|| {
            let notify = Arc::new(Notify::new());
            let lane = Lane {
                delivery: self.clone(),
                key,
                chat: chat.clone(),
                notify: notify.clone(),
                was_held: AtomicBool::new(false),
            };
            self.inner.tasks.spawn(lane.run());
            started = true;
            notify
        });
        // Under the lock, so a lane deciding to end sees this wake-up (see `Lane::run`).
        if look_again || started {
            notify.notify_one();
        }
    }

    /// Show, refresh or end the working indicator, if the budget has room to spare; never
    /// waits, never fails. The task that shows it, when one was started (an end waits for
    /// its start, so a reaction is never put up after it was taken down).
    pub fn working(
        &self,
        chat: &ChatRef,
        regarding: Option<String>,
        phase: WorkingPhase,
    ) -> Option<tokio::task::JoinHandle<()>> {
        let sender = self.sender(chat.platform).cloned()?;
        let indicator = sender.capabilities().working?;
        let owed = matches!(phase, WorkingPhase::Done(_));
        if owed && !indicator.needs_done {
            return None;
        }
        // Taking an indicator down is owed to the person: it waits for a token.
        if !owed && !self.try_spare(chat) {
            return None;
        }
        // A place among the sends in flight too; one only nice to have is not shown when
        // every place is taken.
        let place = match self.inner.send_places.get(&chat.platform) {
            Some(places) if !owed => match places.clone().try_acquire_owned() {
                Ok(place) => Some(place),
                Err(_) => return None,
            },
            _ => None,
        };
        let (chat, this) = (chat.clone(), self.clone());
        Some(self.inner.tasks.spawn(async move {
            let _place = match place {
                Some(place) => Some(place),
                None => {
                    this.wait_budget(&chat).await;
                    this.send_place(chat.platform).await
                }
            };
            let action = Outbound::Working {
                chat,
                regarding,
                phase,
            };
            if let Err(e) = sender.send(action).await {
                tracing::debug!(error = %e, "delivery: working indicator not shown");
            }
        }))
    }

    fn chat_limit(&self, chat: &ChatRef) -> RateLimit {
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

    fn bot_limit(&self, platform: Platform) -> Option<RateLimit> {
        let config = &self.inner.config;
        let declared = self.sender(platform)?.capabilities().per_bot_rate;
        let configured = config.bot_rate_per_second.map(|per_second| RateLimit {
            per_second,
            burst: config.bot_burst.unwrap_or(per_second.ceil() as u32),
        });
        configured.or(declared).map(|mut limit| {
            if let Some(burst) = config.bot_burst {
                limit.burst = burst;
            }
            limit
        })
    }

    fn with_chat_bucket<T>(&self, chat: &ChatRef, f: impl FnOnce(&mut TokenBucket) -> T) -> T {
        let mut budgets = self.inner.chat_budgets.lock().expect("budget lock");
        let bucket = budgets
            .entry(chat_key(chat))
            .or_insert_with(|| TokenBucket::new(self.chat_limit(chat)));
        f(bucket)
    }

    /// Run `f` on the platform's bot-wide bucket; `None` when it has none.
    fn with_bot_bucket<T>(
        &self,
        platform: Platform,
        f: impl FnOnce(&mut TokenBucket) -> T,
    ) -> Option<T> {
        let mut budgets = self.inner.bot_budgets.lock().expect("budget lock");
        let bucket = match budgets.entry(platform) {
            std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::hash_map::Entry::Vacant(e) => {
                e.insert(TokenBucket::new(self.bot_limit(platform)?))
            }
        };
        Some(f(bucket))
    }

    fn try_spare(&self, chat: &ChatRef) -> bool {
        let now = Instant::now();
        self.with_chat_bucket(chat, |b| b.try_spare(now))
            && self
                .with_bot_bucket(chat.platform, |b| b.try_spare(now))
                .unwrap_or(true)
    }

    /// The platform said to wait: hold back the chat, one API method of the bot (when
    /// the adapter names its actions' methods), or the whole bot.
    fn block(&self, chat: &ChatRef, scope: &RateScope, wait: Duration) {
        let now = Instant::now();
        if let RateScope::Method(method) = scope
            && let Some(method) = self.known_method(chat.platform, method)
        {
            let until = now + wait;
            let mut holds = self.inner.method_holds.lock().expect("holds lock");
            let held = holds.entry((chat.platform, method)).or_insert(until);
            *held = (*held).max(until);
            return;
        }
        let bot_wide = matches!(scope, RateScope::Bot | RateScope::Method(_))
            && self
                .with_bot_bucket(chat.platform, |b| b.block_for(wait, now))
                .is_some();
        if !bot_wide {
            self.with_chat_bucket(chat, |b| b.block_for(wait, now));
        }
    }

    /// `method` as the adapter names its actions' methods, when it names them: a method
    /// it never names (or none at all) holds the whole bot instead.
    fn known_method(&self, platform: Platform, method: &str) -> Option<&'static str> {
        self.sender(platform)?
            .methods()
            .iter()
            .copied()
            .find(|m| *m == method)
    }

    /// Wait until `method` of `platform` may be called again (a 429 on it).
    async fn wait_method(&self, platform: Platform, method: Option<&'static str>) {
        let Some(method) = method else { return };
        loop {
            let until = self
                .inner
                .method_holds
                .lock()
                .expect("holds lock")
                .get(&(platform, method))
                .copied();
            match until {
                Some(until) if until > Instant::now() => tokio::time::sleep_until(until).await,
                _ => return,
            }
        }
    }

    /// Wait for a token of the chat's budget, then of the bot's.
    async fn wait_budget(&self, chat: &ChatRef) {
        loop {
            let wait = self.with_chat_bucket(chat, |b| b.reserve(Instant::now()));
            if wait.is_zero() {
                break;
            }
            tokio::time::sleep(wait).await;
        }
        loop {
            let wait = self
                .with_bot_bucket(chat.platform, |b| b.reserve(Instant::now()))
                .unwrap_or_default();
            if wait.is_zero() {
                return;
            }
            tokio::time::sleep(wait).await;
        }
    }

    /// Wait for a place among the platform's sends in flight; held while one send runs.
    async fn send_place(&self, platform: Platform) -> Option<OwnedSemaphorePermit> {
        let places = self.inner.send_places.get(&platform)?.clone();
        places.acquire_owned().await.ok()
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
