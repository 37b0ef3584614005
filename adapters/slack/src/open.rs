//! What the adapter remembers between an event and its answer: who pressed a button (an
//! ephemeral notice needs the person), the `response_url` of a slash command (valid 30
//! minutes), the threads the bot has answered in (a follow-up there needs no mention), and
//! the thread each person last talked to the bot in. Each is written through to the store
//! (the sink's [`InboundSink::remember`]) before it is needed, so whichever node handles the
//! answer or the follow-up, after a restart too, finds it; this process keeps a copy of what
//! it saw. Without a store (before `run`), the copy is all there is.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use hermes_adapter::{InboundSink, Platform};

/// How long Slack accepts answers on a `response_url` (30 minutes, with a margin).
const RESPONSE_LIFETIME: Duration = Duration::from_secs(29 * 60);
/// How long a thread the bot answered in (or one a person talked in) is remembered in the
/// store: a follow-up a week later still needs no mention.
const THREAD_LIFETIME: Duration = Duration::from_secs(7 * 24 * 60 * 60);
/// Threads this process keeps a copy of; past this its copy starts again.
const THREADS_KEPT: usize = 10_000;

/// How a slash command's answers are addressed (`respond_via` / `reply_to`): seen by the
/// channel, or (the second form) only by the person who ran it.
pub const RESPONSE_PREFIX: &str = "handle:slack-response:";
pub const PRIVATE_RESPONSE_PREFIX: &str = "handle:slack-response-private:";

/// Where a slash command's private answers go (its `response_url`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    pub url: String,
}

#[derive(Default)]
struct Copy {
    presses: HashMap<String, (String, Instant)>,
    responses: HashMap<String, (Response, Instant)>,
    threads: HashSet<(String, String)>,
    /// (channel, person) → the thread of their latest addressed message there.
    last_thread: HashMap<(String, String), String>,
}

#[derive(Default)]
struct Inner {
    copy: Mutex<Copy>,
    store: OnceLock<Arc<dyn InboundSink>>,
}

/// Shared by the receiving side and the sender.
#[derive(Clone, Default)]
pub struct Open(Arc<Inner>);

impl Open {
    fn copy(&self) -> std::sync::MutexGuard<'_, Copy> {
        self.0.copy.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Where it is all kept from now on (the daemon's sink, given at `run`).
    pub fn attach(&self, sink: Arc<dyn InboundSink>) {
        let _ = self.0.store.set(sink);
    }

    async fn remember(&self, key: String, value: String, ttl: Duration) {
        let Some(store) = self.0.store.get() else {
            return;
        };
        if let Err(e) = store.remember(Platform::Slack, &key, value, ttl).await {
            tracing::warn!(error = %e, key, "slack: could not keep this in the store; only this node knows it");
        }
    }

    async fn recall(&self, key: &str) -> Option<String> {
        let store = self.0.store.get()?;
        match store.recall(Platform::Slack, key).await {
            Ok(value) => value,
            Err(e) => {
                tracing::warn!(error = %e, key, "slack: could not read the store");
                None
            }
        }
    }

    /// A press by `user`, known by its `press_id`.
    pub async fn press(&self, press_id: &str, user: &str) {
        {
            let mut copy = self.copy();
            copy.presses
                .retain(|_, (_, at)| at.elapsed() < RESPONSE_LIFETIME);
            copy.presses
                .insert(press_id.to_owned(), (user.to_owned(), Instant::now()));
        }
        self.remember(
            format!("press:{press_id}"),
            user.to_owned(),
            RESPONSE_LIFETIME,
        )
        .await;
    }

    /// Who made a press.
    pub async fn presser(&self, press_id: &str) -> Option<String> {
        let known = self.copy().presses.get(press_id).map(|(u, _)| u.clone());
        match known {
            Some(user) => Some(user),
            None => self.recall(&format!("press:{press_id}")).await,
        }
    }

    /// A slash command answered through `response`, known by its handle id.
    pub async fn response(&self, id: &str, response: Response) {
        {
            let mut copy = self.copy();
            copy.responses
                .retain(|_, (_, at)| at.elapsed() < RESPONSE_LIFETIME);
            copy.responses
                .insert(id.to_owned(), (response.clone(), Instant::now()));
        }
        self.remember(format!("response:{id}"), response.url, RESPONSE_LIFETIME)
            .await;
    }

    /// Where to answer a slash command, while Slack still takes answers there.
    pub async fn response_for(&self, id: &str) -> Option<Response> {
        let known = self
            .copy()
            .responses
            .get(id)
            .filter(|(_, at)| at.elapsed() < RESPONSE_LIFETIME)
            .map(|(r, _)| r.clone());
        match known {
            Some(response) => Some(response),
            None => self
                .recall(&format!("response:{id}"))
                .await
                .map(|url| Response { url }),
        }
    }

    /// The bot answers in this thread.
    pub async fn answered_in(&self, channel: &str, thread_ts: &str) {
        {
            let mut copy = self.copy();
            if copy.threads.len() >= THREADS_KEPT {
                copy.threads.clear();
            }
            copy.threads
                .insert((channel.to_owned(), thread_ts.to_owned()));
        }
        self.remember(
            format!("thread:{channel}:{thread_ts}"),
            String::new(),
            THREAD_LIFETIME,
        )
        .await;
    }

    /// `user` talked to the bot in `thread` of `channel`.
    pub async fn talked_in(&self, channel: &str, user: &str, thread: &str) {
        {
            let mut copy = self.copy();
            if copy.last_thread.len() >= THREADS_KEPT {
                copy.last_thread.clear();
            }
            copy.last_thread
                .insert((channel.to_owned(), user.to_owned()), thread.to_owned());
        }
        self.remember(
            format!("last-thread:{channel}:{user}"),
            thread.to_owned(),
            THREAD_LIFETIME,
        )
        .await;
    }

    /// The thread `user` last talked to the bot in, in `channel`: the store's word when
    /// there is one (the person may have talked through another node since).
    pub async fn last_thread(&self, channel: &str, user: &str) -> Option<String> {
        if let Some(thread) = self.recall(&format!("last-thread:{channel}:{user}")).await {
            return Some(thread);
        }
        self.copy()
            .last_thread
            .get(&(channel.to_owned(), user.to_owned()))
            .cloned()
    }

    /// Whether the bot has answered in this thread, here or on another node (or before a
    /// restart).
    pub async fn is_bot_thread(&self, channel: &str, thread_ts: &str) -> bool {
        let key = (channel.to_owned(), thread_ts.to_owned());
        if self.copy().threads.contains(&key) {
            return true;
        }
        let known = self
            .recall(&format!("thread:{channel}:{thread_ts}"))
            .await
            .is_some();
        if known {
            self.copy().threads.insert(key);
        }
        known
    }
}

/// The handle of a slash command's answers.
pub fn handle(id: &str, private: bool) -> String {
    let prefix = if private {
        PRIVATE_RESPONSE_PREFIX
    } else {
        RESPONSE_PREFIX
    };
    format!("{prefix}{id}")
}

/// The id in a handle, and whether its answers are private.
pub fn handle_id(reply_to: &str) -> Option<(&str, bool)> {
    reply_to
        .strip_prefix(PRIVATE_RESPONSE_PREFIX)
        .map(|id| (id, true))
        .or_else(|| reply_to.strip_prefix(RESPONSE_PREFIX).map(|id| (id, false)))
}
