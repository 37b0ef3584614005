//! The daemon: opens the store, builds the enabled adapters, wires the sink → router →
//! session actors → delivery, resumes what an earlier run left open, supervises the
//! adapters, and runs until SIGTERM or SIGINT; then [`shut_down`] stops receiving, stops
//! background processes, lets turns and lanes stop, and exits. Work cut short stays open in
//! the inbox and the outbox and resumes on the next start.

use std::collections::HashMap;
use std::os::unix::fs::DirBuilderExt;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use hermes_adapter::{
    Accepted, Adapter, AdapterError, Backoff, DeliveryStatus, Inbound, InboundKind, InboundSink,
    Platform, SinkError, Wakeup as WakeupEvent, async_trait,
};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::agent::{AgentRuntime, Compressor, Models, SystemPrompt};
use crate::approval::ApprovalBroker;
use crate::config::{ApprovalMode, Config, SandboxMode};
use crate::confine::Confinement;
use crate::delivery::Delivery;
use crate::http;
use crate::llm::LlmClient;
use crate::media::MediaPreparer;
use crate::process::{Limits, ProcessRegistry, Wakeup};
use crate::router::Router;
use crate::session::SessionServices;
use crate::store::{InboxRow, Store};
use crate::tools::{ToolDeps, Toolbox};

/// Restarting an adapter that stopped on an error: 1 s, doubling, at most 60 s.
const ADAPTER_RESTART: Backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(60));

/// How long shutdown waits for work to stop once it is cancelled.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);
/// How long running turns get to finish when the daemon stops (or reloads) before they are
/// cancelled (the person is told, and the turn runs again after the start).
const DRAIN: Duration = Duration::from_secs(30);
/// How long the outbox gets to send what the stop left in it.
const FLUSH: Duration = Duration::from_secs(5);

/// How the daemon ended.
#[derive(Debug, PartialEq, Eq)]
pub enum Exit {
    /// Asked to stop.
    Stopped,
    /// Every platform refused its configuration (exit status 78: systemd must not
    /// restart-loop).
    ConfigRejected(String),
}

/// Records events in the inbox before the adapter acknowledges them, then hands them to
/// the router.
struct GatewaySink {
    store: Store,
    router: Arc<Router>,
    /// Woken for a chat whose sent message the platform hands back (held).
    delivery: Delivery,
}

impl GatewaySink {
    /// Record `event`; a new one is dispatched.
    async fn record(&self, event: Inbound) -> Result<Accepted, SinkError> {
        let (accepted, new) = self.write(event, false).await?;
        if let Some(row) = new {
            self.dispatch(row);
        }
        Ok(accepted)
    }

    /// Hand a new row to the router; a reply held in its chat (the person's window had
    /// closed) may go now.
    fn dispatch(&self, row: InboxRow) {
        crate::metrics::message_in(row.event.chat.platform);
        self.delivery.person_wrote(&row.event.chat);
        self.router.submit(row);
    }

    /// Write `event` to the inbox (`unsynced`: before it is on disk), returning the row
    /// to dispatch when it is new.
    async fn write(
        &self,
        event: Inbound,
        unsynced: bool,
    ) -> Result<(Accepted, Option<InboxRow>), SinkError> {
        let written = if unsynced {
            self.store.inbox_record_unsynced(event.clone()).await
        } else {
            self.store.inbox_record(event.clone()).await
        };
        match written.map_err(|e| SinkError(e.to_string()))? {
            Some(id) => Ok((Accepted::New, Some(InboxRow { id, event }))),
            None => {
                tracing::info!(event = %event.event_id, "inbox: duplicate delivery ignored");
                Ok((Accepted::Duplicate, None))
            }
        }
    }
}

#[async_trait]
impl InboundSink for GatewaySink {
    async fn accept(&self, event: Inbound) -> Result<Accepted, SinkError> {
        self.record(event).await
    }

    /// Each event recorded in order without waiting for the disk, then one sync for all of
    /// them; only then are the new ones dispatched (and the adapter acknowledges them).
    async fn accept_batch(&self, mut events: Vec<Inbound>) -> Vec<Result<Accepted, SinkError>> {
        if events.len() == 1 {
            // One synced write beats an unsynced one and a sync.
            return vec![self.record(events.remove(0)).await];
        }
        let mut results = Vec::with_capacity(events.len());
        let mut new = Vec::new();
        for event in events {
            match self.write(event, true).await {
                Ok((accepted, row)) => {
                    new.extend(row);
                    results.push(Ok(accepted));
                }
                Err(e) => {
                    results.push(Err(e));
                    break;
                }
            }
        }
        if let Err(e) = self.store.sync().await {
            // Recorded, not known to be on disk: say so for all, and let the adapter record
            // them again (a second record is recognised as a duplicate).
            tracing::error!(error = %e, "inbox: could not sync a batch of events");
            for result in results.iter_mut() {
                *result = Err(SinkError(e.to_string()));
            }
        }
        for row in new {
            self.dispatch(row);
        }
        results
    }

    async fn load_cursor(
        &self,
        platform: Platform,
        key: &str,
    ) -> Result<Option<String>, SinkError> {
        self.store
            .load_cursor(platform.as_str(), key)
            .await
            .map_err(|e| SinkError(e.to_string()))
    }

    async fn save_cursor(
        &self,
        platform: Platform,
        key: &str,
        cursor: String,
    ) -> Result<(), SinkError> {
        self.store
            .save_cursor(platform.as_str(), key, cursor)
            .await
            .map_err(|e| SinkError(e.to_string()))
    }

    async fn delivery_report(
        &self,
        platform: Platform,
        platform_message_id: String,
        status: DeliveryStatus,
    ) -> Result<(), SinkError> {
        if let DeliveryStatus::Failed(why) = &status {
            tracing::warn!(%platform, message = %platform_message_id, why, "delivery: the platform could not deliver a message");
        }
        let undelivered = matches!(status, DeliveryStatus::Failed(_) | DeliveryStatus::Held(_));
        let row = self
            .store
            .outbox_delivery_report(
                platform,
                platform_message_id.clone(),
                status,
                self.delivery.hold_max_age(),
            )
            .await
            .map_err(|e| SinkError(e.to_string()))?;
        match row {
            // A failure for a message not (yet) known as sent: the operator hears of it.
            None if undelivered => {
                tracing::warn!(%platform, message = %platform_message_id, "delivery: the platform could not deliver a message the outbox does not know as sent");
            }
            None => {
                tracing::debug!(%platform, message = %platform_message_id, "delivery: report for a message we do not know");
            }
            Some((chat, true)) => self.delivery.wake(&chat),
            Some((_, false)) => {}
        }
        Ok(())
    }
}

/// The adapters of the enabled platforms (see `crate::platforms`).
fn build_adapters(config: &Config) -> anyhow::Result<Vec<Arc<dyn Adapter>>> {
    config
        .platforms
        .iter()
        .map(|p| {
            p.build()
                .map_err(|e| anyhow::anyhow!("{}: {e}", p.platform()))
        })
        .collect()
}

/// Run one adapter until `intake` stops, restarting it with backoff when it stops on an error.
/// Returns the reason when the platform refused the configuration (restarting cannot help).
async fn supervise(
    adapter: Arc<dyn Adapter>,
    sink: Arc<dyn InboundSink>,
    intake: CancellationToken,
) -> Option<String> {
    let platform = adapter.platform();
    let mut restart = ADAPTER_RESTART;
    loop {
        match adapter.run(sink.clone(), intake.clone()).await {
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
                    _ = tokio::time::sleep(wait) => {}
                }
            }
        }
    }
}

/// Run until `intake` is cancelled (then drain: see [`shut_down`]).
pub async fn run(config: Config, intake: CancellationToken) -> anyhow::Result<Exit> {
    let stages = Stages {
        intake,
        work: CancellationToken::new(),
        sending: CancellationToken::new(),
    };
    let config = Arc::new(config);
    // File work before anything runs, off the async worker threads: the home, the database,
    // and the prompt files.
    let files = config.clone();
    let (store, prompt) = tokio::task::spawn_blocking(move || -> anyhow::Result<_> {
        let warnings = crate::home::prepare(&files.home, &files.database_path())
            .with_context(|| format!("preparing {}", files.home.display()))?;
        for warning in warnings {
            tracing::warn!("{warning}");
        }
        // Documents people send and `execute_code`'s runs are handed to the agent's
        // commands, which can only be given a directory that exists when their
        // confinement is made.
        for handed_in in ["cache/documents", crate::confine::layout::CODE_STAGING] {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(files.home.join(handed_in))
                .with_context(|| format!("preparing {}/{handed_in}", files.home.display()))?;
        }
        let terminal = &files.terminal;
        let moved =
            crate::confine::workspace::prepare(&files.home, &terminal.cwd, terminal.cwd_was_home)
                .with_context(|| format!("preparing {}", terminal.cwd.display()))?;
        if !moved.is_empty() {
            tracing::warn!(
                workspace = %terminal.cwd.display(),
                moved = %moved.join(", "),
                "the agent's commands now work in the workspace, since the gateway's home is hidden from them; what they had made in the home was moved there"
            );
        }
        let store = Store::open(&files.database_path())?;
        let prompt = SystemPrompt::load(&files.home, files.agent.system_prompt.as_deref());
        Ok((store, prompt))
    })
    .await??;

    let adapters = build_adapters(&config)?;
    // Bind before anything starts, so a taken port is a clear startup error.
    let listener = match config.http.listen {
        Some(addr) => Some(http::bind(addr, config.http.listen_key).await?),
        None => None,
    };
    let senders: HashMap<_, _> = adapters
        .iter()
        .map(|a| (a.platform(), a.sender()))
        .collect();
    let delivery = Delivery::new(
        store.clone(),
        senders.clone(),
        config.delivery.clone(),
        stages.sending.clone(),
    );

    // Where things are: what approvals judge commands against and media what may be sent.
    let scene =
        crate::approval::Scene::of_this_process(config.home.clone(), config.terminal.cwd.clone());
    let approvals = Arc::new(ApprovalBroker::new(
        store.clone(),
        delivery.clone(),
        config.approvals.clone(),
        scene.clone(),
    ));
    if config.approvals.mode == ApprovalMode::Off {
        tracing::warn!("approvals.mode is off: dangerous commands run without asking anyone");
    }
    // Rows caught mid-send go back in the queue first, so a stale prompt among them is
    // settled (rewritten, no live choices) before any lane could send it.
    delivery.recover().await;
    approvals.expire_leftovers().await;
    let (wakeup_tx, mut wakeup_rx) = mpsc::unbounded_channel::<Wakeup>();
    let processes = ProcessRegistry::new(
        delivery.clone(),
        wakeup_tx,
        stages.work.clone(),
        Limits::default(),
        config.processes.notifications,
    );
    processes.reap_orphans().await;
    delivery.start();
    let describer =
        crate::media::Describer::needed(&config.vision, config.agent.image_input).map(Arc::new);
    let models = Models::new(
        config.model.clone(),
        config.fallbacks.clone(),
        config.provider_keys.clone(),
    );
    let compressor = config.compression.enabled.then(|| {
        let summariser = config.compression.model.clone();
        Arc::new(Compressor::new(
            config.compression.clone(),
            Arc::new(LlmClient::new(summariser)),
            config.model.context_length,
        ))
    });
    let clarify =
        crate::tools::clarify::Clarify::new(delivery.clone(), config.agent.clarify_timeout);
    let cron = crate::cron::Cron::new(
        store.clone(),
        crate::cron::zone(config.agent.timezone.as_deref()),
        config.agent.cron_min_interval,
    );
    let media = Arc::new(MediaPreparer::new(
        config.agent.image_input,
        config.home.join("cache").join("documents"),
        &config.agent.stt,
        scene,
        describer.clone(),
    ));
    let homes: Arc<crate::delivery::destinations::ConfiguredHomes> = Arc::new(
        config
            .platforms
            .iter()
            .filter_map(|p| Some((p.platform(), p.home_channel()?.to_owned())))
            .collect(),
    );
    let delegations = crate::tools::delegate::Delegations::new(store.clone(), stages.work.clone());
    let confinement = Arc::new(Confinement::new(&config.terminal, &config.home));
    // Idle jails are let go even when no command asks for one.
    let idle = confinement.clone();
    let stop_sweeping = stages.intake.clone();
    tokio::spawn(async move {
        let mut every = tokio::time::interval(Duration::from_secs(60));
        loop {
            tokio::select! {
                _ = every.tick() => idle.release_idle(),
                _ = stop_sweeping.cancelled() => return,
            }
        }
    });
    let mcp = crate::mcp::Mcp::new(config.mcp_servers.clone(), confinement.clone());
    let agent = Arc::new_cyclic(|agent: &std::sync::Weak<AgentRuntime>| AgentRuntime {
        models,
        compressor,
        personalities: config.agent.personalities.clone(),
        tools: Toolbox::new(ToolDeps {
            terminal: config.terminal.clone(),
            secret_env_names: config.secret_env_names.clone(),
            approvals: approvals.clone(),
            processes: processes.clone(),
            store: store.clone(),
            home: config.home.clone(),
            toolsets: config.agent.toolsets.clone(),
            cron: cron.clone(),
            delivery: delivery.clone(),
            clarify: clarify.clone(),
            web: crate::tools::web::Web::new(config.agent.web.clone()),
            code_execution: config.code_execution.clone(),
            delegation: config.delegation.clone(),
            agent: agent.clone() as std::sync::Weak<dyn crate::tools::delegate::SubAgents>,
            delegations: delegations.clone(),
            media: media.clone(),
            homes: homes.clone(),
            confinement: confinement.clone(),
        })
        .with_mcp(mcp.clone()),
        home: config.home.clone(),
        prompt,
        max_iterations: config.agent.max_turns,
        outage_wait: config.agent.provider_outage_wait,
        context_tokens: config.model.context_length,
        image_input: config.agent.image_input,
        tool_progress: config.agent.tool_progress,
        describer: describer.clone(),
    });
    let services = Arc::new(SessionServices {
        clarify,
        store: store.clone(),
        delivery: delivery.clone(),
        agent,
        busy_mode: config.busy_mode,
        approvals: approvals.clone(),
        processes: processes.clone(),
        stop_kills_background: config.processes.stop_kills_background,
        delegations: delegations.clone(),
        mcp: mcp.clone(),
        streaming: config.agent.streaming.clone(),
        media: media.clone(),
        work: stages.work.clone(),
        intake: stages.intake.clone(),
        tasks: TaskTracker::new(),
        confinement: confinement.clone(),
    });
    let router = Arc::new(Router::new(config.clone(), services.clone(), approvals));

    // Events an earlier run recorded but did not finish come first.
    let unfinished = store.inbox_unfinished().await?;
    if !unfinished.is_empty() {
        tracing::info!(
            count = unfinished.len(),
            "resuming messages left open by the last run"
        );
    }
    for row in unfinished {
        router.submit(row);
    }
    let sink = Arc::new(GatewaySink {
        store: store.clone(),
        router: router.clone(),
        delivery: delivery.clone(),
    });
    let tasks = TaskTracker::new();
    // Background processes that finished with `notify_on_complete` start a turn; recorded
    // in the inbox first, so a crash cannot lose them.
    let (waker, stop) = (sink.clone(), stages.intake.clone());
    tasks.spawn(async move {
        while let Some(wakeup) = tokio::select! {
            _ = stop.cancelled() => None,
            w = wakeup_rx.recv() => w,
        } {
            let origin = wakeup.origin;
            let event = Inbound {
                event_id: format!("gateway:wakeup:{}", wakeup.process_id),
                chat: origin.chat,
                author: origin.author,
                kind: InboundKind::Wakeup(WakeupEvent {
                    session_key: origin.session_key,
                    text: wakeup.text,
                }),
            };
            if let Err(e) = waker.record(event).await {
                tracing::error!(error = %e, "could not record a background process wake-up");
            }
        }
    });
    // Scheduled jobs: Hermes' own taken over once; each due run recorded in the inbox like
    // any event.
    crate::cron::import::import_once(&config.home, &store, &cron.tz, &homes).await;
    tasks.spawn(cron.clone().run(sink.clone(), stages.intake.clone()));
    // MCP servers that start at boot connect in the background; their tools appear as
    // each is ready.
    mcp.start();
    // Delegations a stopped run left going in the background run again and report back.
    delegations.attach(sink.clone());
    crate::tools::delegate::background::resume(
        &delegations,
        Arc::downgrade(&services.agent) as std::sync::Weak<dyn crate::tools::delegate::SubAgents>,
        config.delegation.clone(),
    )
    .await;
    if let Some(listener) = listener {
        let sink: Arc<dyn InboundSink> = sink.clone();
        let routes = adapters
            .iter()
            .flat_map(|a| a.routes(sink.clone()))
            .collect();
        let health = http::Health {
            adapters: adapters
                .iter()
                .map(|a| (a.platform(), a.liveness()))
                .collect(),
            store: Some(store.clone()),
            token: config.http.token.as_ref().map(|t| t.expose().to_owned()),
            confinement: Some(confinement.clone()),
        };
        tasks.spawn(http::serve(
            listener,
            http::app(routes, health),
            stages.intake.clone(),
        ));
    }
    let commands: Arc<[hermes_adapter::CommandSpec]> = crate::router::commands::specs().into();
    for sender in senders.into_values() {
        let commands = commands.clone();
        tasks.spawn(async move {
            if let Err(e) = sender.register_commands(&commands).await {
                tracing::warn!(platform = %sender.platform(), error = %e, "could not register the command menu");
            }
        });
    }

    let (rejected_tx, mut rejected_rx) = mpsc::unbounded_channel::<String>();
    let enabled = adapters.len();
    let refused = crate::systemd::Refused::default();
    let livenesses: Vec<_> = adapters.iter().map(|a| a.liveness()).collect();
    tasks.spawn(crate::systemd::run(
        adapters
            .iter()
            .map(|a| (a.platform(), a.liveness()))
            .collect(),
        refused.clone(),
        stages.intake.clone(),
    ));
    for adapter in adapters {
        let (sink, stop, rejected) = (sink.clone(), stages.intake.clone(), rejected_tx.clone());
        let refused = refused.clone();
        tasks.spawn(async move {
            let platform = adapter.platform();
            if let Some(why) = supervise(adapter, sink, stop).await {
                refused.lock().expect("refused lock").insert(platform);
                let _ = rejected.send(why);
            }
        });
    }
    drop(rejected_tx);
    tracing::info!(model = %config.model.model, "hermes-gateway is running");
    // What confines commands is tried once (a jail is made and a command run in it) and
    // said, in the background, once the platforms had their first word (it would only
    // slow the start down otherwise); a command that comes first tries it itself.
    let probing = confinement.clone();
    tokio::spawn(async move {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(2);
        while tokio::time::Instant::now() < deadline
            && !livenesses.iter().all(|l| l.since_last_beat().is_some())
        {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let level = probing.level().await;
        match probing.warning().await {
            None => tracing::info!(
                "commands the agent runs are {}",
                level.describe(probing.network())
            ),
            Some(warning) if probing.mode() == SandboxMode::Required => {
                tracing::error!("{warning}")
            }
            Some(warning) => tracing::warn!("{warning}"),
        }
    });

    // Run until asked to stop, or until every platform has refused its configuration.
    let mut refusals = Vec::new();
    let exit = loop {
        tokio::select! {
            _ = stages.intake.cancelled() => break Exit::Stopped,
            Some(why) = rejected_rx.recv() => {
                refusals.push(why);
                if refusals.len() == enabled {
                    break Exit::ConfigRejected(refusals.join("; "));
                }
            }
        }
    };
    shut_down(
        &stages, &processes, &tasks, &router, &services, &delivery, &store,
    )
    .await;
    Ok(exit)
}

/// The three stages of stopping, one token each, named for what they stop; every part
/// of the daemon is handed the one it obeys, by that name.
struct Stages {
    /// Stop taking messages: adapters, the HTTP server, the scheduler and the wake-ups
    /// (cancelled by the caller of [`run`]: a signal, a reload).
    intake: CancellationToken,
    /// Cancel running work (turns, background processes, delegations) once it had its
    /// time ([`DRAIN`]).
    work: CancellationToken,
    /// Stop sending, once the outbox had its time ([`FLUSH`]).
    sending: CancellationToken,
}

/// Stop in order: no more receiving; running turns get [`DRAIN`] to finish (no new one
/// starts); then turns and background processes are cancelled and their ends recorded;
/// then the outbox gets [`FLUSH`] to send what is left; then the lanes stop. Whatever is
/// cut short stays open in the inbox and the outbox for the next start.
async fn shut_down(
    stages: &Stages,
    processes: &ProcessRegistry,
    tasks: &TaskTracker,
    router: &Router,
    sessions: &SessionServices,
    delivery: &Delivery,
    store: &Store,
) {
    crate::systemd::stopping();
    stages.intake.cancel();
    let running = sessions.tasks.len();
    if running > 0 {
        tracing::info!(
            running,
            "shutting down: waiting up to {}s for running turns to finish",
            DRAIN.as_secs()
        );
        let deadline = tokio::time::Instant::now() + DRAIN;
        while !sessions.tasks.is_empty() && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        if !sessions.tasks.is_empty() {
            tracing::warn!(
                running = sessions.tasks.len(),
                "shutting down: turns still running are cancelled; they run again after the start"
            );
        }
    }
    tracing::info!("shutting down");
    stages.work.cancel();
    processes.stop_all().await;
    sessions.delegations.wind_down(SHUTDOWN_GRACE).await;
    sessions.mcp.shutdown().await;
    tasks.close();
    sessions.tasks.close();
    let stopped = async { tokio::join!(tasks.wait(), router.drained(), sessions.tasks.wait()) };
    if tokio::time::timeout(SHUTDOWN_GRACE, stopped).await.is_err() {
        tracing::warn!("shutdown: some work did not stop in time; it resumes on the next start");
    }
    // What the turns said on their way out goes now, if the platforms take it.
    let deadline = tokio::time::Instant::now() + FLUSH;
    while tokio::time::Instant::now() < deadline {
        match store.status_counts().await {
            Ok(counts) if counts.outbox_pending > 0 => {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            _ => break,
        }
    }
    stages.sending.cancel();
    if tokio::time::timeout(SHUTDOWN_GRACE, delivery.drained())
        .await
        .is_err()
    {
        tracing::warn!("shutdown: a message was still being sent; it goes after the start");
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use hermes_adapter::{Liveness, PlatformSender};

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

    struct NoSink;

    #[async_trait]
    impl InboundSink for NoSink {
        async fn accept(&self, _: Inbound) -> Result<Accepted, SinkError> {
            Ok(Accepted::New)
        }
        async fn load_cursor(&self, _: Platform, _: &str) -> Result<Option<String>, SinkError> {
            Ok(None)
        }
        async fn save_cursor(&self, _: Platform, _: &str, _: String) -> Result<(), SinkError> {
            Ok(())
        }
        async fn delivery_report(
            &self,
            _: Platform,
            _: String,
            _: DeliveryStatus,
        ) -> Result<(), SinkError> {
            Ok(())
        }
    }

    #[tokio::test(start_paused = true)]
    async fn an_adapter_that_stops_on_an_error_is_restarted_and_a_refusal_is_reported() {
        let flaky = Arc::new(Flaky {
            runs: AtomicUsize::new(0),
            failures: 2,
            refuse: false,
        });
        let shutdown = CancellationToken::new();
        let supervisor = tokio::spawn(supervise(flaky.clone(), Arc::new(NoSink), shutdown.clone()));
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
        let why = supervise(refusing.clone(), Arc::new(NoSink), CancellationToken::new()).await;
        assert_eq!(why.as_deref(), Some("telegram: token refused"));
        assert_eq!(
            refusing.runs.load(Ordering::SeqCst),
            1,
            "a refusal is not retried"
        );
    }
}
