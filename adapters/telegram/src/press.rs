//! Button presses are acknowledged by the adapter, never by a trip through the daemon. Once
//! the sink has recorded a press, the receive loop holds the callback query open for a
//! short window: a notice for the presser that the daemon sends in that window
//! ([`hermes_adapter::Outbound::PressNotice`]) goes out as the answer's text; otherwise the
//! press is answered without one when the window closes. Either way Telegram's spinner
//! stops within [`ACK_WINDOW`], whatever the daemon's queues and rate budgets are doing.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use teloxide_core::payloads::AnswerCallbackQuerySetters;
use teloxide_core::prelude::*;
use teloxide_core::types::CallbackQueryId;
use tokio::sync::oneshot;

/// How long a recorded press waits for the daemon's notice before it is answered bare.
pub const ACK_WINDOW: Duration = Duration::from_millis(1500);

/// Presses recorded but not answered yet, by callback query id.
#[derive(Clone, Default)]
pub(crate) struct OpenPresses(Arc<Mutex<HashMap<String, oneshot::Sender<String>>>>);

impl OpenPresses {
    /// Hold the press `id` open for a notice; call before the press is recorded.
    pub(crate) fn open(&self, id: &str) -> oneshot::Receiver<String> {
        let (tx, rx) = oneshot::channel();
        self.lock().insert(id.to_owned(), tx);
        rx
    }

    /// Answer the press `id` (recorded by the sink) within [`ACK_WINDOW`], with the notice
    /// the daemon sends meanwhile through `notice`; at once and bare without one.
    pub(crate) fn acknowledge(
        &self,
        bot: &Bot,
        id: String,
        notice: Option<oneshot::Receiver<String>>,
    ) {
        let (open, bot) = (self.clone(), bot.clone());
        tokio::spawn(async move {
            let text = match notice {
                Some(rx) => tokio::time::timeout(ACK_WINDOW, rx)
                    .await
                    .ok()
                    .and_then(Result::ok),
                None => None,
            };
            open.lock().remove(&id);
            let mut answer = bot.answer_callback_query(CallbackQueryId(id));
            if let Some(text) = text {
                answer = answer.text(text);
            }
            if let Err(e) = answer.send().await {
                tracing::warn!(error = %e, "telegram: could not answer a button press");
            }
        });
    }

    /// Hand a notice to a press still held open; `false` when it was answered already.
    pub(crate) fn answer_with(&self, id: &str, notice: String) -> bool {
        match self.lock().remove(id) {
            Some(tx) => tx.send(notice).is_ok(),
            None => false,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, oneshot::Sender<String>>> {
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}
