//! Interactions the adapter has recorded and acknowledged (button presses and slash
//! commands), with the token Discord gave for answering them. A token is valid for 15
//! minutes; the daemon only ever refers to an interaction by id (`Press::press_id`, a
//! command's `respond_via`), so tokens never reach the store or the logs.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::watch;

/// How long Discord accepts answers to an interaction (15 minutes, with a margin).
pub(crate) const TOKEN_LIFETIME: Duration = Duration::from_secs(14 * 60);

/// How a command's handle is written in `respond_via` / `reply_to`: its answers are seen by
/// everyone in the channel, or (the second form) only by the person who asked.
pub(crate) const HANDLE_PREFIX: &str = "handle:interaction:";
pub(crate) const PRIVATE_HANDLE_PREFIX: &str = "handle:interaction-private:";

struct Open {
    token: String,
    opened: Instant,
    /// The answer is only visible to the person (`flags: 64`).
    ephemeral: bool,
    /// The deferred reply was filled in (the first answer edits it; later ones follow up).
    original_filled: bool,
    /// Set once Discord took the acknowledgement (answers may only follow it).
    acked: watch::Sender<bool>,
}

/// What answering an interaction needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Answer {
    pub token: String,
    pub ephemeral: bool,
    /// The deferred reply is still to be filled in (this is the first answer).
    pub first: bool,
}

/// The open interactions, shared by the receive loop and the sender.
#[derive(Clone, Default)]
pub(crate) struct Interactions {
    open: Arc<Mutex<HashMap<String, Open>>>,
    /// Messages sent as interaction answers → their interaction's token (edits of such a
    /// message go through the interaction's webhook).
    messages: Arc<Mutex<HashMap<String, (String, Instant)>>>,
}

impl Interactions {
    /// Remember an interaction about to be recorded.
    pub(crate) fn open(&self, id: &str, token: &str, ephemeral: bool) {
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        open.retain(|_, o| o.opened.elapsed() < TOKEN_LIFETIME);
        open.entry(id.to_owned()).or_insert_with(|| Open {
            token: token.to_owned(),
            opened: Instant::now(),
            ephemeral,
            original_filled: false,
            acked: watch::channel(false).0,
        });
    }

    /// Discord took the acknowledgement.
    pub(crate) fn acknowledged(&self, id: &str) {
        if let Some(open) = self.open.lock().unwrap_or_else(|e| e.into_inner()).get(id) {
            open.acked.send_replace(true);
        }
    }

    /// Whether the interaction was acknowledged already (a redelivered event).
    pub(crate) fn is_acknowledged(&self, id: &str) -> bool {
        self.open
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(id)
            .is_some_and(|o| *o.acked.borrow())
    }

    /// The token for the next answer, once the interaction is acknowledged (waiting at most
    /// `wait`); `None` when it is unknown (a restart), expired or never acknowledged.
    pub(crate) async fn answer(&self, id: &str, wait: Duration) -> Option<Answer> {
        let mut acked = {
            let open = self.open.lock().unwrap_or_else(|e| e.into_inner());
            let o = open.get(id)?;
            if o.opened.elapsed() >= TOKEN_LIFETIME {
                return None;
            }
            o.acked.subscribe()
        };
        if !*acked.borrow() {
            let waited = tokio::time::timeout(wait, acked.wait_for(|done| *done)).await;
            if !matches!(waited, Ok(Ok(_))) {
                return None;
            }
        }
        let open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        let o = open.get(id)?;
        Some(Answer {
            token: o.token.clone(),
            ephemeral: o.ephemeral,
            first: !o.original_filled,
        })
    }

    /// The deferred reply was filled in: later answers follow up. Only called once Discord
    /// took it, so a failed first answer is tried again as the first.
    pub(crate) fn original_filled(&self, id: &str) {
        if let Some(open) = self
            .open
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get_mut(id)
        {
            open.original_filled = true;
        }
    }

    /// A message was sent as an answer with `token`.
    pub(crate) fn answered_with(&self, message_id: &str, token: &str) {
        let mut messages = self.messages.lock().unwrap_or_else(|e| e.into_inner());
        messages.retain(|_, (_, at)| at.elapsed() < TOKEN_LIFETIME);
        messages.insert(message_id.to_owned(), (token.to_owned(), Instant::now()));
    }

    /// The token of the interaction a message answered, while it is still valid.
    pub(crate) fn token_of_message(&self, message_id: &str) -> Option<String> {
        let messages = self.messages.lock().unwrap_or_else(|e| e.into_inner());
        messages
            .get(message_id)
            .filter(|(_, at)| at.elapsed() < TOKEN_LIFETIME)
            .map(|(token, _)| token.clone())
    }
}

/// The interaction id in a `reply_to` handle, and whether its answers are private.
pub(crate) fn handle_id(reply_to: &str) -> Option<(&str, bool)> {
    reply_to
        .strip_prefix(PRIVATE_HANDLE_PREFIX)
        .map(|id| (id, true))
        .or_else(|| reply_to.strip_prefix(HANDLE_PREFIX).map(|id| (id, false)))
}

/// The handle a command's answers are addressed to.
pub(crate) fn handle(id: &str, private: bool) -> String {
    let prefix = if private {
        PRIVATE_HANDLE_PREFIX
    } else {
        HANDLE_PREFIX
    };
    format!("{prefix}{id}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn answers_wait_for_the_acknowledgement_and_the_first_fills_the_deferral() {
        let open = Interactions::default();
        open.open("1", "tok", true);
        assert_eq!(open.answer("1", Duration::from_millis(20)).await, None);
        let later = open.clone();
        let waiter = tokio::spawn(async move { later.answer("1", Duration::from_secs(5)).await });
        open.acknowledged("1");
        let first = waiter.await.unwrap().unwrap();
        assert!(first.first && first.ephemeral && first.token == "tok");
        // A first answer that did not go through is tried again as the first.
        assert!(open.answer("1", Duration::ZERO).await.unwrap().first);
        open.original_filled("1");
        assert!(!open.answer("1", Duration::ZERO).await.unwrap().first);
        assert_eq!(open.answer("2", Duration::ZERO).await, None, "unknown");
        assert_eq!(handle_id(&handle("77", false)), Some(("77", false)));
        assert_eq!(handle_id(&handle("78", true)), Some(("78", true)));
    }
}
