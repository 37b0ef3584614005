//! The daemon: opens the store, builds the enabled adapters, wires the sink → router →
//! session actors → delivery, resumes what an earlier run left open, supervises the
//! adapters, and runs until SIGTERM or SIGINT; then [`shut_down`] stops receiving, stops
//! background processes, lets turns and lanes stop, and exits. Work cut short stays open in
//! the inbox and the outbox and resumes on the next start.
//!
//! [`run`] reads as the wiring diagram of `docs/architecture.md`; the parts are built in
//! `parts.rs`, the adapters supervised in `adapters.rs`, events recorded by `sink.rs`, and
//! what runs beside the conversations started by `background.rs`.

mod adapters;
mod background;
mod console;
mod operator;
mod parts;
mod sink;
mod work;

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::config::Config;
use crate::delivery::Delivery;
use crate::http;
use crate::process::ProcessRegistry;
use crate::router::Router;
use crate::session::SessionServices;
use crate::store::Store;

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
    /// Asked from a chat (`/restart`) to start again: drained as for a stop.
    Restart,
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

/// Run until `intake` is cancelled (then drain: see [`shut_down`]).
pub async fn run(config: Config, intake: CancellationToken) -> anyhow::Result<Exit> {
    let stages = Stages {
        intake,
        work: CancellationToken::new(),
        sending: CancellationToken::new(),
    };
    let config = Arc::new(config);
    let (store, prompt) = parts::prepare_home(config.clone()).await?;
    let adapters = adapters::build_adapters(&config)?;
    // Bound before anything starts, so a taken port is a clear startup error.
    let listener = match config.http.listen {
        Some(addr) => Some(http::bind(addr, config.http.listen_key).await?),
        None => None,
    };
    let senders = adapters::senders(&adapters);
    let tasks = TaskTracker::new();
    let cluster = match &config.store.postgres {
        Some(_) => crate::cluster::Cluster::shared(
            {
                let store = store.clone();
                tokio::task::spawn_blocking(move || store.of_its_own()).await??
            },
            config.store.node_id.clone(),
            crate::cluster::Timings {
                ttl: config.store.lease_ttl,
                renew: config.store.lease_renew,
            },
            stages.intake.clone(),
            tasks.clone(),
        ),
        None => crate::cluster::Cluster::single(),
    };
    // With others on the store, this node sends a chat's messages only while it holds
    // the chat's share of the work.
    let gate = cluster.is_shared().then(|| {
        let shares = cluster.shares().clone();
        Arc::new(move |chat: &hermes_adapter::ChatRef| shares.may_send(chat))
            as crate::delivery::SendGate
    });
    let (out, wakeups) = parts::way_out(&config, &store, senders.clone(), &stages, gate).await;
    let parts = parts::agent_and_sessions(&config, &store, prompt, &out, &stages);
    parts::sweep_idle_jails(parts.confinement.clone(), &stages);
    let router = Arc::new(Router::new(
        config.clone(),
        parts.services.clone(),
        out.approvals.clone(),
    ));

    let dispatched = Arc::new(work::Dispatched::default());
    let sink = Arc::new(sink::GatewaySink {
        store: store.clone(),
        cluster: cluster.clone(),
        dispatched: dispatched.clone(),
        router: router.clone(),
        delivery: out.delivery.clone(),
        console: Arc::new(console::GatewayConsole {
            home: config.home.clone(),
            model: config.model.clone(),
            choosing: tokio::sync::Mutex::new(()),
        }),
    });
    // Delegations report through the sink: attached before a share taken over runs its
    // delegations again.
    parts.delegations.attach(sink.clone());

    // Events an earlier run recorded but did not finish come first (with others on the
    // store: those of each share of the work, once this node takes it).
    if cluster.is_shared() {
        tasks.spawn(work::work(
            cluster.clone(),
            store.clone(),
            router.clone(),
            out.clone(),
            background::resume_delegations(&parts, &config),
            dispatched.clone(),
            stages.intake.clone(),
        ));
    } else {
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
    }
    // Before anything can bring a command in (Slack's `/hermes` words come with them).
    adapters::register_commands(&tasks, senders);
    background::relay_wakeups(&tasks, wakeups, sink.clone(), stages.intake.clone());
    background::trim_after_bursts(&tasks, stages.intake.clone());
    background::prune_regularly(
        &tasks,
        store.clone(),
        config.delivery.retention,
        stages.intake.clone(),
    );
    background::start_agents_work(
        &tasks,
        &config,
        &store,
        &parts,
        sink.clone(),
        &stages.intake,
        cluster.is_shared(),
    )
    .await;
    if let Some(listener) = listener {
        let app = background::http_app(&config, &adapters, sink.clone(), &store, &parts, &cluster);
        tasks.spawn(http::serve(listener, app, stages.intake.clone()));
    }
    let livenesses: Vec<hermes_adapter::Liveness> = adapters.iter().map(|a| a.liveness()).collect();
    // `/restart` and `/platform`: the switches each supervisor watches, and where the
    // platforms that are off are said.
    let switches: std::collections::HashMap<_, _> = adapters
        .iter()
        .map(|a| (a.platform(), tokio::sync::watch::channel(false).0))
        .collect();
    let off = crate::systemd::Refused::default();
    let restart = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let platforms: Vec<_> = adapters
        .iter()
        .map(|a| (a.platform(), a.liveness()))
        .collect();
    let mut refusals = adapters::start(
        &tasks,
        adapters,
        sink,
        &stages.intake,
        &switches,
        off.clone(),
        config.serving.speaks_for_process,
    );
    let _ = parts
        .services
        .operator
        .set(Arc::new(operator::DaemonOperator {
            store: store.clone(),
            intake: stages.intake.clone(),
            restart: restart.clone(),
            switches,
            livenesses: platforms,
            off,
            speaks_for_process: config.serving.speaks_for_process,
        }));
    if let Some(asked) = operator::asked_before_restart(&store).await {
        let rows = out
            .delivery
            .reply_rows(&asked.chat, operator::BACK, Some(asked.message_id));
        let record = crate::store::TurnRecord::outcome(
            Vec::new(),
            crate::store::InboxState::Done,
            "restarted",
            rows,
        )
        .in_chat(&asked.chat);
        if let Err(e) = out.delivery.commit(record).await {
            tracing::warn!(error = %e, "restart: the chat that asked is not told it is back");
        }
    }
    let model = if config.model.is_chosen() {
        config.model.model.as_str()
    } else {
        "(none chosen yet)"
    };
    tracing::info!(model, "hermes-gateway is running");
    background::report_confinement(parts.confinement.clone(), livenesses);

    // Run until asked to stop, or until every platform has refused its configuration.
    let exit = tokio::select! {
        _ = stages.intake.cancelled() => match restart.load(std::sync::atomic::Ordering::SeqCst) {
            true => Exit::Restart,
            false => Exit::Stopped,
        },
        why = refusals.all_refused() => Exit::ConfigRejected(why),
    };
    // systemd hears of the stop from the gateway that speaks for the process.
    if config.serving.speaks_for_process {
        crate::systemd::stopping();
    }
    shut_down(
        &stages,
        &out.processes,
        &tasks,
        &router,
        &parts.services,
        &out.delivery,
        &store,
    )
    .await;
    Ok(exit)
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
    stages.intake.cancel();
    sessions.mcp.stopping();
    // A turn waiting for an approval waits for a press that cannot come now: it is
    // cancelled at once (and asked again after the start) instead of holding the drain.
    let waiting = sessions.approvals.stop_taking_decisions();
    if waiting > 0 {
        tracing::info!(
            waiting,
            "shutting down: turns waiting for approval are stopped; they ask again after the start"
        );
    }
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
    if let Err(e) = store.checkpoint_at_stop().await {
        tracing::warn!(error = %e, "shutdown: the WAL could not be folded into the database; the next start does it");
    }
}
