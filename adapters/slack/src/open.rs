//! What the adapter remembers between an event and its answer, in memory only: who pressed
//! a button (an ephemeral notice needs the person), the `response_url` of a slash command
//! (valid 30 minutes), and the threads the bot has answered in (a follow-up there needs no
//! mention). None of it is a secret that must survive a restart; after one, a notice is
//! dropped, a private answer is dropped, and a thread needs a mention again.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long Slack accepts answers on a `response_url` (30 minutes, with a margin).
const RESPONSE_LIFETIME: Duration = Duration::from_secs(29 * 60);
/// Threads remembered; past this the memory starts again.
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
struct Inner {
    presses: HashMap<String, (String, Instant)>,
    responses: HashMap<String, (Response, Instant)>,
    threads: HashSet<(String, String)>,
    /// (channel, person) → the thread of their latest addressed message there.
    last_thread: HashMap<(String, String), String>,
}

/// Shared by the receiving side and the sender.
#[derive(Clone, Default)]
pub struct Open(Arc<Mutex<Inner>>);

impl Open {
    fn inner(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A press by `user`, known by its `press_id`.
    pub fn press(&self, press_id: &str, user: &str) {
        let mut inner = self.inner();
        inner
            .presses
            .retain(|_, (_, at)| at.elapsed() < RESPONSE_LIFETIME);
        inner
            .presses
            .insert(press_id.to_owned(), (user.to_owned(), Instant::now()));
    }

    /// Who made a press.
    pub fn presser(&self, press_id: &str) -> Option<String> {
        self.inner().presses.get(press_id).map(|(u, _)| u.clone())
    }

    /// A slash command answered through `response`, known by its handle id.
    pub fn response(&self, id: &str, response: Response) {
        let mut inner = self.inner();
        inner
            .responses
            .retain(|_, (_, at)| at.elapsed() < RESPONSE_LIFETIME);
        inner
            .responses
            .insert(id.to_owned(), (response, Instant::now()));
    }

    /// Where to answer a slash command, while Slack still takes answers there.
    pub fn response_for(&self, id: &str) -> Option<Response> {
        self.inner()
            .responses
            .get(id)
            .filter(|(_, at)| at.elapsed() < RESPONSE_LIFETIME)
            .map(|(r, _)| r.clone())
    }

    /// The bot answered in this thread.
    pub fn answered_in(&self, channel: &str, thread_ts: &str) {
        let mut inner = self.inner();
        if inner.threads.len() >= THREADS_KEPT {
            inner.threads.clear();
        }
        inner
            .threads
            .insert((channel.to_owned(), thread_ts.to_owned()));
    }

    /// `user` talked to the bot in `thread` of `channel`.
    pub fn talked_in(&self, channel: &str, user: &str, thread: &str) {
        let mut inner = self.inner();
        if inner.last_thread.len() >= THREADS_KEPT {
            inner.last_thread.clear();
        }
        inner
            .last_thread
            .insert((channel.to_owned(), user.to_owned()), thread.to_owned());
    }

    /// The thread `user` last talked to the bot in, in `channel`.
    pub fn last_thread(&self, channel: &str, user: &str) -> Option<String> {
        self.inner()
            .last_thread
            .get(&(channel.to_owned(), user.to_owned()))
            .cloned()
    }

    /// Whether the bot has answered in this thread (since the start).
    pub fn is_bot_thread(&self, channel: &str, thread_ts: &str) -> bool {
        self.inner()
            .threads
            .contains(&(channel.to_owned(), thread_ts.to_owned()))
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
