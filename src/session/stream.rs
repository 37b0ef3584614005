//! A streamed answer (`streaming.*`): the text as the model writes it, shown as one message
//! that appears once `buffer_threshold` characters are written and is then edited in place
//! at most every `edit_interval` (through the outbox, so the chat's budget spaces the edits
//! and an edit still waiting is rewritten rather than queued again). The message row is
//! tied to the inbox row it answers: a turn run again (after an interrupt, or a crash)
//! edits it instead of sending a second copy. The end of the turn writes the final text.

use std::time::Duration;

use hermes_adapter::ChatRef;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::task::TaskTracker;

use crate::config::StreamingConfig;
use crate::delivery::Delivery;
use crate::llm::StreamDelta;

/// Where a stream stands when its turn ends.
#[derive(Debug, Default)]
pub(super) struct Streamed {
    /// The outbox row of the streamed message, once it was queued.
    pub row: Option<i64>,
    /// The text written so far (by the latest attempt).
    pub text: String,
}

/// Start showing a turn's answer as it is written; `row` continues an earlier attempt's
/// message. Ends with the channel (when the turn's input is dropped).
pub(super) fn spawn_stream(
    tasks: &TaskTracker,
    delivery: Delivery,
    chat: ChatRef,
    reply_to: Option<String>,
    config: StreamingConfig,
    row: Option<i64>,
    answers: Option<i64>,
) -> (mpsc::UnboundedSender<StreamDelta>, JoinHandle<Streamed>) {
    let (deltas, mut rx) = mpsc::unbounded_channel();
    let handle = tasks.spawn(async move {
        let mut streamed = Streamed {
            row,
            text: String::new(),
        };
        let mut shown = String::new();
        let mut last_edit = tokio::time::Instant::now() - config.edit_interval;
        loop {
            let unshown = streamed.text != shown && !streamed.text.trim().is_empty();
            let wait = if unshown && streamed.row.is_some() {
                config.edit_interval.saturating_sub(last_edit.elapsed())
            } else {
                Duration::MAX
            };
            let next = tokio::select! {
                delta = rx.recv() => Some(delta),
                _ = tokio::time::sleep(wait), if wait != Duration::MAX => None,
            };
            match next {
                Some(Some(StreamDelta::Restart)) => streamed.text.clear(),
                Some(Some(StreamDelta::Text(text))) => streamed.text.push_str(&text),
                Some(None) => break,
                None => {}
            }
            let showing = format!("{}{}", streamed.text, config.cursor);
            match streamed.row {
                None if streamed.text.chars().count() >= config.buffer_threshold => {
                    match delivery
                        .stream_start(&chat, &showing, reply_to.clone(), answers)
                        .await
                    {
                        Ok(ids) => {
                            streamed.row = ids.first().copied();
                            shown = streamed.text.clone();
                            last_edit = tokio::time::Instant::now();
                        }
                        Err(e) => tracing::warn!(error = %e, "session: could not start the streamed message"),
                    }
                }
                Some(row)
                    if streamed.text != shown
                        && !streamed.text.trim().is_empty()
                        && last_edit.elapsed() >= config.edit_interval =>
                {
                    if let Err(e) = delivery.edit(row, &chat, &showing).await {
                        tracing::warn!(error = %e, "session: could not update the streamed message");
                    }
                    shown = streamed.text.clone();
                    last_edit = tokio::time::Instant::now();
                }
                _ => {}
            }
        }
        streamed
    });
    (deltas, handle)
}
