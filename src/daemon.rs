//! The daemon: opens the store, builds the enabled adapters, wires the sink → router →
//! session actors → delivery, resumes what an earlier run left open, and runs until SIGTERM
//! or SIGINT; then it stops receiving, lets turns and lanes stop, and exits. Work cut short
//! stays open in the inbox and the outbox and resumes on the next start.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use hermes_adapter::{
    Accepted, Adapter, AdapterError, Inbound, InboundSink, Platform, SinkError, async_trait,
};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::agent::{AgentRuntime, SystemPrompt};
use crate::approval::ApprovalBroker;
use crate::config::{ApprovalMode, Config};
use crate::delivery::Delivery;
use crate::llm::LlmClient;
use crate::process::{Limits, ProcessRegistry, Wakeup};
use crate::router::Router;
use crate::session::SessionServices;
use crate::store::{InboxRow, Store};
use crate::tools::Toolbox;

/// How the daemon ended.
#[derive(Debug, PartialEq, Eq)]
pub enum Exit {
    /// Asked to stop.
    Stopped,
    /// A platform refused the configuration (exit status 78: systemd must not restart-loop).
    ConfigRejected(String),
}

/// Records events in the inbox before the adapter acknowledges them, then queues them for
/// the router.
struct GatewaySink {
    store: Store,
    router: mpsc::UnboundedSender<InboxRow>,
}

#[async_trait]
impl InboundSink for GatewaySink {
    async fn accept(&self, event: Inbound) -> Result<Accepted, SinkError> {
        let id = self
            .store
            .inbox_record(event.clone())
            .await
            .map_err(|e| SinkError(e.to_string()))?;
        match id {
            Some(id) => {
                let _ = self.router.send(InboxRow { id, event });
                Ok(Accepted::New)
            }
            None => {
                tracing::info!(event = %event.event_id, "inbox: duplicate delivery ignored");
                Ok(Accepted::Duplicate)
            }
        }
    }

    async fn load_cursor(&self, platform: Platform) -> Result<Option<String>, SinkError> {
        self.store
            .load_cursor(platform.as_str())
            .await
            .map_err(|e| SinkError(e.to_string()))
    }

    async fn save_cursor(&self, platform: Platform, cursor: String) -> Result<(), SinkError> {
        self.store
            .save_cursor(platform.as_str(), cursor)
            .await
            .map_err(|e| SinkError(e.to_string()))
    }
}

fn build_adapters(config: &Config) -> anyhow::Result<Vec<Box<dyn Adapter>>> {
    let mut adapters: Vec<Box<dyn Adapter>> = Vec::new();
    #[cfg(feature = "telegram")]
    if let Some(t) = &config.telegram {
        let adapter = hermes_telegram::TelegramAdapter::new(hermes_telegram::TelegramSettings {
            token: t.token.expose().to_owned(),
            api_url: t.api_url.clone(),
            poll_timeout: t.poll_timeout,
        })
        .map_err(|e| anyhow::anyhow!("{e}"))?;
        adapters.push(Box::new(adapter));
    }
    #[cfg(not(feature = "telegram"))]
    if config.telegram.is_some() {
        anyhow::bail!(
            "Telegram is configured but this build has no Telegram support (feature `telegram`)"
        );
    }
    Ok(adapters)
}

/// Run until `shutdown` is cancelled.
pub async fn run(config: Config, shutdown: CancellationToken) -> anyhow::Result<Exit> {
    let config = Arc::new(config);
    // File work before anything runs, off the async worker threads: the home, the database,
    // and the prompt files.
    let files = config.clone();
    let (store, prompt) = tokio::task::spawn_blocking(move || -> anyhow::Result<_> {
        std::fs::create_dir_all(&files.home)
            .with_context(|| format!("creating {}", files.home.display()))?;
        let store = Store::open(&files.database_path())?;
        let prompt = SystemPrompt::load(&files.home, files.agent.system_prompt.as_deref());
        Ok((store, prompt))
    })
    .await??;

    let adapters = build_adapters(&config)?;
    let senders: HashMap<_, _> = adapters
        .iter()
        .map(|a| (a.platform(), a.sender()))
        .collect();
    let delivery = Delivery::new(
        store.clone(),
        senders,
        config.delivery.clone(),
        shutdown.clone(),
    );

    let approvals = Arc::new(ApprovalBroker::new(
        store.clone(),
        delivery.clone(),
        config.approvals.clone(),
    ));
    if config.approvals.mode == ApprovalMode::Off {
        tracing::warn!("approvals.mode is off: dangerous commands run without asking anyone");
    }
    approvals.expire_leftovers().await;
    let (wakeup_tx, mut wakeup_rx) = mpsc::unbounded_channel::<Wakeup>();
    let processes = ProcessRegistry::new(
        delivery.clone(),
        wakeup_tx,
        shutdown.clone(),
        Limits::default(),
        config.processes.notifications,
    );
    processes.reap_orphans().await;
    delivery.start();
    let agent = Arc::new(AgentRuntime {
        llm: LlmClient::new(config.model.clone()),
        tools: Toolbox::new(
            config.terminal.clone(),
            config.secret_env_names.clone(),
            approvals.clone(),
            processes.clone(),
        ),
        prompt,
        max_iterations: config.agent.max_turns,
        context_tokens: config.model.context_length,
    });
    let services = Arc::new(SessionServices {
        store: store.clone(),
        delivery: delivery.clone(),
        agent,
        busy_mode: config.busy_mode,
        approvals: approvals.clone(),
        processes: processes.clone(),
        stop_kills_background: config.processes.stop_kills_background,
        shutdown: shutdown.clone(),
    });
    let router = Arc::new(Router::new(config.clone(), services, approvals));

    // Events an earlier run recorded but did not finish come first.
    let (router_tx, mut router_rx) = mpsc::unbounded_channel::<InboxRow>();
    let unfinished = store.inbox_unfinished().await?;
    if !unfinished.is_empty() {
        tracing::info!(
            count = unfinished.len(),
            "resuming messages left open by the last run"
        );
    }
    for row in unfinished {
        let _ = router_tx.send(row);
    }
    let dispatcher = router.clone();
    let router_task = tokio::spawn(async move {
        while let Some(row) = router_rx.recv().await {
            dispatcher.dispatch(row).await;
        }
    });
    // Background processes that finished with `notify_on_complete` start a turn.
    let waker = router.clone();
    let wakeup_task = tokio::spawn(async move {
        while let Some(wakeup) = wakeup_rx.recv().await {
            waker.wake(wakeup);
        }
    });

    let sink: Arc<dyn InboundSink> = Arc::new(GatewaySink {
        store: store.clone(),
        router: router_tx,
    });
    let (exit_tx, mut exit_rx) = mpsc::unbounded_channel::<Exit>();
    let mut adapter_tasks = Vec::new();
    for adapter in adapters {
        let (sink, stop, exit_tx) = (sink.clone(), shutdown.clone(), exit_tx.clone());
        let platform = adapter.platform();
        adapter_tasks.push(tokio::spawn(async move {
            match adapter.run(sink, stop).await {
                Ok(()) => {}
                Err(AdapterError::Config(why)) => {
                    tracing::error!(%platform, "{why}");
                    let _ = exit_tx.send(Exit::ConfigRejected(format!("{platform}: {why}")));
                }
                Err(AdapterError::Other(why)) => {
                    tracing::error!(%platform, "adapter stopped: {why}");
                }
            }
        }));
    }
    tracing::info!(model = %config.model.model, "hermes-gateway is running");

    let exit = tokio::select! {
        _ = shutdown.cancelled() => Exit::Stopped,
        Some(exit) = exit_rx.recv() => exit,
    };
    tracing::info!("shutting down");
    shutdown.cancel();
    processes.stop_all().await;
    for task in adapter_tasks {
        let _ = tokio::time::timeout(Duration::from_secs(5), task).await;
    }
    drop(sink);
    let _ = tokio::time::timeout(Duration::from_secs(5), delivery.drained()).await;
    router_task.abort();
    wakeup_task.abort();
    Ok(exit)
}
