//! The platforms' adapters: built from the configuration, each run under a supervisor
//! (restarted with backoff when it stops on an error; a platform refusing its credentials
//! is reported and stays off), and given the chat commands for their menus.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use hermes_adapter::{Adapter, AdapterError, Backoff, InboundSink, Platform, PlatformSender};
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::config::Config;

/// Restarting an adapter that stopped on an error: 1 s, doubling, at most 60 s.
const ADAPTER_RESTART: Backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(60));

/// The adapters of the enabled platforms (see `crate::platforms`).
pub(super) fn build_adapters(config: &Config) -> anyhow::Result<Vec<Arc<dyn Adapter>>> {
    config
        .platforms
        .iter()
        .map(|p| {
            p.build()
                .map_err(|e| anyhow::anyhow!("{}: {e}", p.platform()))
        })
        .collect()
}

/// Run one adapter until `intake` stops, restarting it with backoff when it stops on an error;
/// while `paused` holds `true` (`/platform pause`) it is stopped and not restarted.
/// Returns the reason when the platform refused the configuration (restarting cannot help).
async fn supervise(
    adapter: Arc<dyn Adapter>,
    sink: Arc<dyn InboundSink>,
    intake: CancellationToken,
    mut paused: watch::Receiver<bool>,
) -> Option<String> {
    let platform = adapter.platform();
    let mut restart = ADAPTER_RESTART;
    loop {
        // Paused: wait for the word to go on (or the end).
        while *paused.borrow_and_update() {
            tokio::select! {
                _ = intake.cancelled() => return None,
                changed = paused.changed() => if changed.is_err() { return None },
            }
        }
        let running = intake.child_token();
        let run = adapter.run(sink.clone(), running.clone());
        tokio::pin!(run);
        let result = tokio::select! {
            result = &mut run => result,
            _ = until_paused(&mut paused) => {
                tracing::info!(%platform, "adapter paused (/platform pause)");
                running.cancel();
                let _ = run.await;
                restart = ADAPTER_RESTART;
                continue;
            }
        };
        match result {
            Ok(()) => return None,
            Err(AdapterError::Config(why)) => {
                tracing::error!(%platform, "{why}; this platform stays off until the configuration is fixed");
                return Some(format!("{platform}: {why}"));
            }
            Err(AdapterError::Other(why)) => {
                crate::metrics::adapter_restart(platform);
                let wait = restart.next_delay();
                tracing::error!(%platform, retry_in = ?wait, "adapter stopped: {why}; restarting");
                tokio::select! {
                    _ = intake.cancelled() => return None,
                    _ = until_paused(&mut paused) => {}
                    _ = tokio::time::sleep(wait) => {}
                }
            }
        }
    }
}

/// Returns once `paused` holds `true`; never when its switch is gone.
async fn until_paused(paused: &mut watch::Receiver<bool>) {
    if paused.wait_for(|p| *p).await.is_err() {
        std::future::pending::<()>().await;
    }
}

/// Each adapter's sender, by platform.
pub(super) fn senders(adapters: &[Arc<dyn Adapter>]) -> HashMap<Platform, Arc<dyn PlatformSender>> {
    adapters
        .iter()
        .map(|a| (a.platform(), a.sender()))
        .collect()
}

/// Every platform gets the chat commands (its menu, or its words), in the background: a
/// platform that cannot take them yet is told in the log, and works without a menu.
pub(super) fn register_commands(
    tasks: &TaskTracker,
    senders: HashMap<Platform, Arc<dyn PlatformSender>>,
) {
    let commands: Arc<[hermes_adapter::CommandSpec]> = crate::router::commands::specs().into();
    for sender in senders.into_values() {
        let commands = commands.clone();
        tasks.spawn(async move {
            if let Err(e) = sender.register_commands(&commands).await {
                tracing::warn!(platform = %sender.platform(), error = %e, "could not register the command menu");
            }
        });
    }
}

/// The platforms that refused their configuration, as they refuse.
pub(super) struct Refusals {
    reasons: mpsc::UnboundedReceiver<String>,
    enabled: usize,
    seen: Vec<String>,
}

impl Refusals {
    /// Every platform's reason, once all of them refused (the daemon cannot serve anyone);
    /// never while one still runs.
    pub(super) async fn all_refused(&mut self) -> String {
        while let Some(why) = self.reasons.recv().await {
            self.seen.push(why);
            if self.seen.len() == self.enabled {
                return self.seen.join("; ");
            }
        }
        std::future::pending().await
    }
}

/// Run every adapter under [`supervise`] until `intake` stops; systemd is told how they do
/// (by the gateway that speaks for the process, when profiles share it).
/// `paused` has a switch per adapter's platform (`/platform pause`); `off` is where the
/// platforms that are off are said, with why (shared with the operator).
pub(super) fn start(
    tasks: &TaskTracker,
    adapters: Vec<Arc<dyn Adapter>>,
    sink: Arc<dyn InboundSink>,
    intake: &CancellationToken,
    paused: &HashMap<Platform, watch::Sender<bool>>,
    off: crate::systemd::Refused,
    speaks_for_process: bool,
) -> Refusals {
    let (rejected, reasons) = mpsc::unbounded_channel::<String>();
    let enabled = adapters.len();
    let refused = off;
    if speaks_for_process {
        tasks.spawn(crate::systemd::run(
            adapters
                .iter()
                .map(|a| (a.platform(), a.liveness()))
                .collect(),
            refused.clone(),
            intake.clone(),
        ));
    }
    for adapter in adapters {
        let (sink, intake, rejected) = (sink.clone(), intake.clone(), rejected.clone());
        let switch = match paused.get(&adapter.platform()) {
            Some(switch) => switch.subscribe(),
            None => watch::channel(false).1,
        };
        let refused = refused.clone();
        tasks.spawn(async move {
            let platform = adapter.platform();
            if let Some(why) = supervise(adapter, sink, intake, switch).await {
                refused
                    .lock()
                    .expect("refused lock")
                    .insert(platform, "configuration refused".into());
                let _ = rejected.send(why);
            }
        });
    }
    Refusals {
        reasons,
        enabled,
        seen: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use hermes_adapter::{Liveness, async_trait};

    use super::*;

    /// An adapter that fails `failures` times with `error`, then runs until shutdown.
    struct Flaky {
        runs: AtomicUsize,
        failures: usize,
        refuse: bool,
    }

    #[async_trait]
    impl Adapter for Flaky {
        fn platform(&self) -> Platform {
            Platform::Telegram
        }
        fn sender(&self) -> Arc<dyn PlatformSender> {
            unreachable!("not used by the supervisor")
        }
        fn liveness(&self) -> Liveness {
            Liveness::default()
        }
        async fn check_credentials(&self) -> Result<String, AdapterError> {
            unreachable!("not used by the supervisor")
        }
        async fn run(
            &self,
            _sink: Arc<dyn InboundSink>,
            shutdown: CancellationToken,
        ) -> Result<(), AdapterError> {
            let run = self.runs.fetch_add(1, Ordering::SeqCst);
            if self.refuse {
                return Err(AdapterError::Config("token refused".into()));
            }
            if run < self.failures {
                return Err(AdapterError::Other("connection reset".into()));
            }
            shutdown.cancelled().await;
            Ok(())
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_paused_adapter_stops_until_it_is_resumed() {
        let adapter = Arc::new(Flaky {
            runs: AtomicUsize::new(0),
            failures: 0,
            refuse: false,
        });
        let (switch, paused) = watch::channel(false);
        let shutdown = CancellationToken::new();
        let supervisor = tokio::spawn(supervise(
            adapter.clone(),
            Arc::new(crate::testing::RecordingSink::default()),
            shutdown.clone(),
            paused,
        ));
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert_eq!(adapter.runs.load(Ordering::SeqCst), 1);
        switch.send(true).unwrap();
        tokio::time::sleep(Duration::from_secs(120)).await;
        assert_eq!(
            adapter.runs.load(Ordering::SeqCst),
            1,
            "stopped, and not restarted while paused"
        );
        assert!(!supervisor.is_finished());
        switch.send(false).unwrap();
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert_eq!(adapter.runs.load(Ordering::SeqCst), 2, "running again");
        shutdown.cancel();
        assert_eq!(supervisor.await.unwrap(), None);
    }

    #[tokio::test(start_paused = true)]
    async fn an_adapter_that_stops_on_an_error_is_restarted_and_a_refusal_is_reported() {
        let flaky = Arc::new(Flaky {
            runs: AtomicUsize::new(0),
            failures: 2,
            refuse: false,
        });
        let shutdown = CancellationToken::new();
        let supervisor = tokio::spawn(supervise(
            flaky.clone(),
            Arc::new(crate::testing::RecordingSink::default()),
            shutdown.clone(),
            watch::channel(false).1,
        ));
        // Two failures: restarted after 1 s and 2 s (paused time advances by itself).
        tokio::time::sleep(Duration::from_secs(4)).await;
        assert_eq!(
            flaky.runs.load(Ordering::SeqCst),
            3,
            "restarted after each error"
        );
        shutdown.cancel();
        assert_eq!(
            supervisor.await.unwrap(),
            None,
            "a clean stop reports nothing"
        );

        let refusing = Arc::new(Flaky {
            runs: AtomicUsize::new(0),
            failures: 0,
            refuse: true,
        });
        let why = supervise(
            refusing.clone(),
            Arc::new(crate::testing::RecordingSink::default()),
            CancellationToken::new(),
            watch::channel(false).1,
        )
        .await;
        assert_eq!(why.as_deref(), Some("telegram: token refused"));
        assert_eq!(
            refusing.runs.load(Ordering::SeqCst),
            1,
            "a refusal is not retried"
        );
    }
}
