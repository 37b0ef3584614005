//! From serenity's gateway to the sink: events in Discord's order, recorded before anything
//! is acknowledged.
//!
//! serenity dispatches every gateway event to its handlers in a task of its own, so two
//! messages read one after the other can reach a handler in either order. The handler here
//! only forwards; [`Recorder`] gathers what arrived together, puts it back in Discord's order
//! (message and interaction ids are snowflakes, ordered by creation time), works out where
//! each event lives (DM, channel, thread: from the channels the gateway announced, else
//! `GET /channels/{id}`), opens a thread for a mention when `DISCORD_AUTO_THREAD` is on, and
//! records the batch with one sync. Only then are presses and slash commands acknowledged
//! (within Discord's 3 s), so an interaction is never confirmed and then lost. After each
//! READY (a session that replays nothing) it fetches what the gap hid (`backfill`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hermes_adapter::{
    Accepted, Backoff, CancellationToken, Inbound, InboundKind, InboundSink, Liveness, Platform,
    SendError, async_trait, record_batch,
};
use reqwest::Method;
use serde_json::{Value, json};
use serenity::client::{Context, RawEventHandler};
use serenity::model::application::Interaction;
use serenity::model::channel::{ChannelType, GuildChannel, Message};
use serenity::model::event::Event;
use tokio::sync::{mpsc, watch};

use crate::interactions::Interactions;
use crate::normalize::{self, Identity, Place, Reading};
use crate::rest::{Body, Rest};
use crate::seen::{Seen, SeenChannel};

/// A batch is closed once no event has come for this long: the handler tasks of events read
/// together have arrived by then, in whatever order they ran.
const GATHER: Duration = Duration::from_millis(15);
/// ...or once it has gathered this long, so a steady stream of events is still recorded.
/// While a burst goes on, every task spawned for it lands before the burst ends, however
/// late the runtime runs it; a fixed window after the first event could close between two
/// messages of the burst and record the later one first.
const MAX_GATHER: Duration = Duration::from_millis(100);
/// Channels remembered (ids → kind); past this the memory starts again (lookups refill it).
const CHANNELS_KEPT: usize = 20_000;
/// Looking a channel up again after a passing failure: 250 ms, doubling, three tries.
const LOOKUP_RETRY: Backoff = Backoff::new(Duration::from_millis(250), Duration::from_secs(2));
const LOOKUP_ATTEMPTS: u32 = 3;

/// serenity's handler: forwards every event to the recorder, in whatever order serenity's
/// tasks run.
pub(crate) struct Forward(pub mpsc::UnboundedSender<Event>);

#[async_trait]
impl RawEventHandler for Forward {
    async fn raw_event(&self, _ctx: Context, event: Event) {
        let _ = self.0.send(event);
    }
}

/// Turns gateway events into recorded [`Inbound`]s.
pub(crate) struct Recorder {
    /// The shard whose events these are (each keeps a cursor of its own).
    pub shard: crate::Shard,
    pub rest: Arc<Rest>,
    pub interactions: Interactions,
    pub identity: watch::Sender<Option<Identity>>,
    pub reading: Reading,
    pub auto_thread: bool,
    pub liveness: Liveness,
    /// What each channel seen so far is.
    pub channels: Mutex<HashMap<String, Place>>,
    /// The newest message recorded per channel (the adapter's cursor).
    pub seen: Mutex<Seen>,
}

/// What one batch of gateway events made.
#[derive(Default)]
pub(crate) struct Batch {
    pub(crate) inbound: Vec<Inbound>,
    acks: Vec<PendingAck>,
    /// (channel, server, message id) of each message, noted once recorded.
    messages: Vec<(u64, Option<u64>, u64)>,
    /// A READY came: a new session, which replays nothing from before it. Where each known
    /// channel stood then (taken before this batch's own messages are noted).
    catch_up: Option<Vec<(u64, SeenChannel)>>,
}

/// `first` and the events that follow it until none has come for [`GATHER`] (at most
/// [`MAX_GATHER`] in all), in Discord's order.
async fn gather(first: Event, events: &mut mpsc::UnboundedReceiver<Event>) -> Vec<Event> {
    let cap = tokio::time::Instant::now() + MAX_GATHER;
    let mut gathered = vec![first];
    loop {
        let quiet = (tokio::time::Instant::now() + GATHER).min(cap);
        match tokio::time::timeout_at(quiet, events.recv()).await {
            Ok(Some(event)) => gathered.push(event),
            // Quiet for long enough, the cap reached, or the handler gone.
            Ok(None) | Err(_) => break,
        }
    }
    gathered.sort_by_key(order);
    gathered
}

/// An interaction to acknowledge once recorded.
struct PendingAck {
    id: String,
    token: String,
    /// The callback: 6 = the press is taken (no visible change), 5 = an answer will follow.
    callback: Value,
}

impl Recorder {
    /// Record events until shutdown.
    pub(crate) async fn run(
        self: Arc<Self>,
        mut events: mpsc::UnboundedReceiver<Event>,
        sink: Arc<dyn InboundSink>,
        shutdown: CancellationToken,
    ) {
        self.load_cursor(sink.as_ref()).await;
        loop {
            let first = tokio::select! {
                _ = shutdown.cancelled() => return,
                e = events.recv() => match e { Some(e) => e, None => return },
            };
            let events_read = gather(first, &mut events).await;
            self.liveness.beat();
            let mut batch = Batch::default();
            for event in events_read {
                self.take(event, sink.as_ref(), &mut batch).await;
            }
            let catch_up = batch.catch_up.take();
            if !self.commit(sink.as_ref(), batch, &shutdown).await {
                return;
            }
            if let Some(channels) = catch_up {
                // In a task of its own: presses and commands arriving meanwhile are
                // recorded and acknowledged within Discord's 3 s.
                let (this, sink, stop) = (self.clone(), sink.clone(), shutdown.clone());
                tokio::spawn(async move { this.backfill(sink.as_ref(), channels, &stop).await });
            }
        }
    }

    /// Record a batch, then acknowledge its interactions and note its messages. `false`
    /// when shutdown came first.
    pub(crate) async fn commit(
        &self,
        sink: &dyn InboundSink,
        batch: Batch,
        shutdown: &CancellationToken,
    ) -> bool {
        if !self.record(sink, batch.inbound, shutdown).await {
            return false;
        }
        for ack in batch.acks {
            let (rest, interactions) = (self.rest.clone(), self.interactions.clone());
            tokio::spawn(async move { acknowledge(&rest, &interactions, ack).await });
        }
        let changed = {
            let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
            let mut changed = false;
            for (channel, guild, id) in batch.messages {
                changed |= seen.note(channel, guild, id);
            }
            changed.then(|| seen.to_json())
        };
        if let (Some(cursor), Some(key)) = (changed, self.cursor_key())
            && let Err(e) = sink.save_cursor(Platform::Discord, &key, cursor).await
        {
            tracing::warn!(error = %e, "discord: could not save the newest message ids");
        }
        true
    }

    /// The cursor belongs to the bot's shard: another token starts from its own, and the
    /// shards, which may run on different nodes, each keep their channels' (shard 0's is
    /// the bot's cursor of before shards).
    fn cursor_key(&self) -> Option<String> {
        let shard = self.shard.index;
        self.identity.borrow().as_ref().map(|me| match shard {
            0 => format!("bot{}", me.user_id),
            n => format!("bot{}:shard{n}", me.user_id),
        })
    }

    async fn load_cursor(&self, sink: &dyn InboundSink) {
        let Some(key) = self.cursor_key() else { return };
        match sink.load_cursor(Platform::Discord, &key).await {
            Ok(Some(saved)) => {
                *self.seen.lock().unwrap_or_else(|e| e.into_inner()) = Seen::parse(&saved);
            }
            Ok(None) => {}
            Err(e) => {
                tracing::warn!(error = %e, "discord: could not read the newest message ids; nothing from before this start will be fetched")
            }
        }
    }

    /// One gateway event: what it teaches about the bot and its channels, and the inbound
    /// event it makes, if any.
    async fn take(&self, event: Event, sink: &dyn InboundSink, batch: &mut Batch) {
        match event {
            Event::Ready(ready) => {
                let known = self
                    .seen
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .to_fetch();
                batch.catch_up = Some(known);
                let ready = ready.ready;
                tracing::info!(bot = %ready.user.name, session = %ready.session_id, "discord: connected");
                self.identity.send_replace(Some(Identity {
                    user_id: ready.user.id.to_string(),
                    application_id: ready.application.id.to_string(),
                    name: ready.user.name.clone(),
                    from_ready: true,
                }));
            }
            Event::Resumed(_) => tracing::info!("discord: resumed; missed events follow"),
            Event::GuildCreate(guild) => {
                let guild = guild.guild;
                for channel in guild.channels.values().chain(&guild.threads) {
                    self.learn(channel);
                }
            }
            Event::ChannelCreate(created) => self.learn(&created.channel),
            Event::ThreadCreate(created) => self.learn(&created.thread),
            Event::ThreadUpdate(updated) => self.learn(&updated.thread),
            Event::MessageCreate(created) => self.message(created.message, sink, batch).await,
            Event::InteractionCreate(created) => match created.interaction {
                Interaction::Component(press) => {
                    let place = self
                        .place(
                            &press.channel_id.to_string(),
                            press.guild_id.map(|g| g.to_string()),
                        )
                        .await;
                    let id = press.id.to_string();
                    self.interactions.open(&id, &press.token, true);
                    batch.acks.push(PendingAck {
                        id,
                        token: press.token.clone(),
                        callback: json!({"type": 6}),
                    });
                    batch.inbound.push(normalize::press(&press, &place));
                }
                Interaction::Command(command) => {
                    let place = self
                        .place(
                            &command.channel_id.to_string(),
                            command.guild_id.map(|g| g.to_string()),
                        )
                        .await;
                    let id = command.id.to_string();
                    let ephemeral = normalize::is_private(&command.data.name);
                    self.interactions.open(&id, &command.token, ephemeral);
                    let data = if ephemeral {
                        json!({"flags": 64})
                    } else {
                        json!({})
                    };
                    batch.acks.push(PendingAck {
                        id,
                        token: command.token.clone(),
                        callback: json!({"type": 5, "data": data}),
                    });
                    batch.inbound.push(normalize::command(&command, &place));
                }
                other => tracing::debug!(kind = ?other.kind(), "discord: interaction ignored"),
            },
            _ => {}
        }
    }

    /// A message from the gateway or fetched after a gap.
    pub(crate) async fn message(&self, msg: Message, sink: &dyn InboundSink, batch: &mut Batch) {
        let Some(me) = self.identity.borrow().clone() else {
            return;
        };
        let channel = msg.channel_id.to_string();
        let guild = msg.guild_id.map(|g| g.get());
        let place = self.place(&channel, guild.map(|g| g.to_string())).await;
        batch
            .messages
            .push((msg.channel_id.get(), guild, msg.id.get()));
        let Some(mut event) = normalize::message(&msg, &me, &place, &self.reading) else {
            return;
        };
        // A thread is opened for a mention (not a reply or a free channel), and only for
        // someone on an allowlist or approved by pairing: strangers cannot make the bot open
        // threads.
        if self.auto_thread
            && place == Place::Channel
            && normalize::mentions(&msg, &me)
            && self.may_act_for(&event.author.user_id, sink).await
            && let Some(thread) = self.open_thread(&channel, &event, &me).await
        {
            // The thread's id is the message's: the answer and the conversation go there.
            event.chat = normalize::chat_ref(&thread, &msg.id.to_string(), event.chat.account);
        }
        batch.inbound.push(event);
    }

    /// Whether the adapter may act on its own for `user` (open a thread): listed here, or
    /// let in by the gateway (approved by pairing among them).
    async fn may_act_for(&self, user: &str, sink: &dyn InboundSink) -> bool {
        self.reading.is_allowed(user) || sink.lets_in(Platform::Discord, user).await
    }

    /// Remember what a channel announced by the gateway is.
    fn learn(&self, channel: &GuildChannel) {
        let place = place_of(
            channel.kind,
            channel.parent_id.map(|p| p.to_string()),
            channel.owner_id.map(|o| o.to_string()),
        );
        self.remember(channel.id.to_string(), place);
    }

    fn remember(&self, channel: String, place: Place) {
        let mut channels = self.channels.lock().unwrap_or_else(|e| e.into_inner());
        if channels.len() >= CHANNELS_KEPT {
            channels.clear();
        }
        channels.insert(channel, place);
    }

    /// What a channel is: a DM without a server; else what the gateway announced, else what
    /// `GET /channels/{id}` says (remembered). A lookup that fails reads as a plain channel.
    async fn place(&self, channel: &str, guild: Option<String>) -> Place {
        if guild.is_none() {
            return Place::Direct;
        }
        if let Some(place) = self
            .channels
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(channel)
        {
            return place.clone();
        }
        // A wrong guess misroutes the message for good (the inbox keeps it as recorded), so
        // a passing failure is tried again before falling back.
        let (mut retry, mut tries) = (LOOKUP_RETRY, 1);
        let found = loop {
            match self
                .rest
                .call(Method::GET, &format!("/channels/{channel}"), Body::Empty)
                .await
            {
                Err(SendError::Transient(_) | SendError::RateLimited { .. })
                    if tries < LOOKUP_ATTEMPTS =>
                {
                    tries += 1;
                    tokio::time::sleep(retry.next_delay()).await;
                }
                other => break other,
            }
        };
        match found {
            Ok(found) => {
                let kind = found.get("type").and_then(Value::as_u64).unwrap_or(0);
                let text = |k: &str| found.get(k).and_then(Value::as_str).map(str::to_owned);
                let place = place_of(
                    ChannelType::from(kind as u8),
                    text("parent_id"),
                    text("owner_id"),
                );
                self.remember(channel.to_owned(), place.clone());
                place
            }
            Err(e) => {
                tracing::warn!(%channel, error = %e, "discord: could not look the channel up; treating it as a plain channel");
                Place::Channel
            }
        }
    }

    /// `DISCORD_AUTO_THREAD`: open a thread from the message that mentioned the bot (its id
    /// is the message's, so a redelivered message finds the same thread).
    async fn open_thread(&self, channel: &str, event: &Inbound, me: &Identity) -> Option<Place> {
        let InboundKind::Message(message) = &event.kind else {
            return None;
        };
        let mut name: String = message.text.chars().take(60).collect();
        if name.trim().is_empty() {
            name = format!("{} and {}", event.author.display_name, me.name);
        }
        let result = self
            .rest
            .call(
                Method::POST,
                &format!(
                    "/channels/{channel}/messages/{}/threads",
                    message.message_id
                ),
                Body::Json(json!({"name": name, "auto_archive_duration": 1440})),
            )
            .await;
        match result {
            Ok(_) => {}
            // "A thread has already been created for this message": a redelivery.
            Err(SendError::Rejected(why)) if why.ends_with("(code 160004)") => {}
            Err(e) => {
                tracing::warn!(%channel, error = %e, "discord: could not open a thread; answering in the channel");
                return None;
            }
        }
        let place = Place::Thread {
            parent: channel.to_owned(),
            owner: Some(me.user_id.clone()),
        };
        self.remember(message.message_id.clone(), place.clone());
        Some(place)
    }

    /// Record the batch with one sync; what fails is retried one at a time, in order, until
    /// it is recorded. `false` when shutdown came first.
    async fn record(
        &self,
        sink: &dyn InboundSink,
        events: Vec<Inbound>,
        shutdown: &CancellationToken,
    ) -> bool {
        record_batch(sink, &events, shutdown, |i, accepted| {
            if accepted == Accepted::Duplicate {
                tracing::debug!(event = %events[i].event_id, "discord: redelivered event already recorded");
            }
        })
        .await
    }
}

/// Tell Discord the interaction is taken (it shows an error after 3 s otherwise); one quick
/// retry for a passing failure.
async fn acknowledge(rest: &Rest, interactions: &Interactions, ack: PendingAck) {
    if interactions.is_acknowledged(&ack.id) {
        return;
    }
    let path = format!("/interactions/{}/{}/callback", ack.id, ack.token);
    for attempt in 0..2 {
        match rest
            .call(Method::POST, &path, Body::Json(ack.callback.clone()))
            .await
        {
            Ok(_) => {
                interactions.acknowledged(&ack.id);
                return;
            }
            // Already acknowledged (a redelivered interaction): answers may follow.
            Err(SendError::Rejected(why)) if why.ends_with("(code 40060)") => {
                interactions.acknowledged(&ack.id);
                return;
            }
            Err(SendError::Transient(why)) if attempt == 0 => {
                tracing::debug!(interaction = %ack.id, %why, "discord: acknowledging again");
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
            Err(e) => {
                tracing::warn!(interaction = %ack.id, error = %e, "discord: could not acknowledge an interaction");
                return;
            }
        }
    }
}

fn place_of(kind: ChannelType, parent: Option<String>, owner: Option<String>) -> Place {
    match kind {
        ChannelType::Private | ChannelType::GroupDm => Place::Direct,
        ChannelType::PublicThread | ChannelType::PrivateThread | ChannelType::NewsThread => {
            match parent {
                Some(parent) => Place::Thread { parent, owner },
                None => Place::Channel,
            }
        }
        _ => Place::Channel,
    }
}

/// Where an event goes in a batch: what teaches the bot about itself and its channels
/// first, then messages and interactions by id (creation time).
fn order(event: &Event) -> u64 {
    match event {
        Event::MessageCreate(created) => created.message.id.get(),
        Event::InteractionCreate(created) => created.interaction.id().get(),
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn created(id: u64) -> Event {
        serde_json::from_value(json!({"t": "MESSAGE_CREATE", "d": {
            "id": id.to_string(), "channel_id": "50", "content": "hi",
            "author": {"id": "7", "username": "ada", "discriminator": "0", "avatar": null},
            "timestamp": "2026-11-24T00:00:00.000000+00:00", "edited_timestamp": null,
            "tts": false, "mention_everyone": false, "mentions": [], "mention_roles": [],
            "attachments": [], "embeds": [], "pinned": false, "type": 0
        }}))
        .unwrap()
    }

    /// A burst whose first message's handler task runs last (after 20 ms, past a fixed
    /// 15 ms window) is still recorded as one batch, in Discord's order.
    #[tokio::test(start_paused = true)]
    async fn a_burst_is_gathered_whole_and_ordered_however_late_a_task_runs() {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let sender = tokio::spawn(async move {
            tx.send(created(1002)).unwrap();
            tokio::time::sleep(Duration::from_millis(10)).await;
            tx.send(created(1003)).unwrap();
            tokio::time::sleep(Duration::from_millis(10)).await;
            tx.send(created(1001)).unwrap();
            // A message long after the burst is the next batch's.
            tokio::time::sleep(Duration::from_millis(500)).await;
            tx.send(created(1004)).unwrap();
        });
        let first = rx.recv().await.unwrap();
        let batch: Vec<u64> = gather(first, &mut rx).await.iter().map(order).collect();
        assert_eq!(batch, [1001, 1002, 1003]);
        let first = rx.recv().await.unwrap();
        let next: Vec<u64> = gather(first, &mut rx).await.iter().map(order).collect();
        assert_eq!(next, [1004]);
        sender.await.unwrap();
    }

    /// A steady stream is cut into batches of at most MAX_GATHER.
    #[tokio::test(start_paused = true)]
    async fn a_steady_stream_is_still_recorded_batch_by_batch() {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let sender = tokio::spawn(async move {
            for id in 0..50u64 {
                if tx.send(created(2000 + id)).is_err() {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        });
        let first = rx.recv().await.unwrap();
        let started = tokio::time::Instant::now();
        let batch = gather(first, &mut rx).await;
        assert!(started.elapsed() <= MAX_GATHER + GATHER);
        assert!(batch.len() < 50, "{}", batch.len());
        sender.abort();
    }
}
