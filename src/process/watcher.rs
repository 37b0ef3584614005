//! The watcher of one background process: posts progress (with `check_interval`) and the
//! completion into the originating chat at the configured notification level, and hands a
//! wake-up to the router when the process was started with `notify_on_complete`.

use std::sync::Arc;
use std::time::Duration;

use super::{ProcessRegistry, Tracked, Wakeup, short, tail_chars};

/// Reports one process into its chat.
pub(super) struct Watcher {
    pub(super) registry: Arc<ProcessRegistry>,
    pub(super) tracked: Arc<Tracked>,
    pub(super) check_interval: Option<Duration>,
    pub(super) notify_on_complete: bool,
}

impl Watcher {
    pub(super) async fn run(self) {
        let t = &self.tracked;
        let mut exit = t.exit.clone();
        let mut reported = 0u64;
        let mut last_report = tokio::time::Instant::now();
        let info = loop {
            let tick = async {
                match self.check_interval {
                    Some(every) => tokio::time::sleep_until(last_report + every).await,
                    None => std::future::pending().await,
                }
            };
            let ended = tokio::select! {
                r = exit.wait_for(Option::is_some) => Some(r.ok().and_then(|v| *v)),
                _ = tick => None,
            };
            if let Some(info) = ended {
                break info;
            }
            last_report = tokio::time::Instant::now();
            let new = {
                let output = t.output.lock().expect("output lock");
                let (new, _) = output.since(reported);
                reported = output.end();
                new
            };
            if !new.trim().is_empty() && self.registry.notifications.progress() {
                let text = format!(
                    "⏳ `{}` is still running ({}s). New output:\n```\n{}\n```",
                    short(&t.command),
                    t.started.elapsed().as_secs(),
                    tail_chars(&new, 1500)
                );
                self.post(&text).await;
            }
        };
        if self.registry.work.is_cancelled() {
            return; // the daemon is stopping; nobody asked for this to end
        }
        let Some(info) = info else { return };
        // Let the readers drain what the process printed last.
        tokio::time::sleep(Duration::from_millis(100)).await;
        let notifications = self.registry.notifications;
        let last = t
            .output
            .lock()
            .expect("output lock")
            .last_lines(notifications.tail_lines());
        let last = tail_chars(&last, 1500);
        let icon = if info.code == Some(0) {
            "✅"
        } else {
            "⚠️"
        };
        let output = if last.trim().is_empty() {
            "(no output)".to_owned()
        } else {
            format!("```\n{last}\n```")
        };
        let text = format!(
            "{icon} Background process `{}` finished: {} after {}s ({}).\n{output}",
            short(&t.command),
            info.describe(),
            info.elapsed.as_secs(),
            t.id
        );
        if notifications.completion(&info) {
            self.post(&text).await;
        }
        if self.notify_on_complete {
            let wake = Wakeup {
                process_id: t.id.clone(),
                origin: t.origin.clone(),
                // Read by the model like a tool result: no secrets in it.
                text: crate::secrets::scrub(&format!(
                    "[Background process {} (`{}`) finished: {} after {}s. Last output:\n{last}\n]\nContinue the task if anything is left to do; otherwise tell the person the result.",
                    t.id,
                    short(&t.command),
                    info.describe(),
                    info.elapsed.as_secs()
                ))
                .into_owned(),
            };
            let _ = self.registry.wakeups.send(wake);
        }
    }

    async fn post(&self, text: &str) {
        if let Err(e) = self
            .registry
            .delivery
            .reply(&self.tracked.origin.chat, text, None)
            .await
        {
            tracing::error!(error = %e, "process: could not queue a report");
        }
    }
}
