//! What runs beside the conversations once the daemon is wired: background processes'
//! wake-ups recorded in the inbox, the scheduler, MCP servers, delegations a stopped run
//! left, the HTTP server, the pruning of old bookkeeping, and the one try of the
//! confinement, said once the platforms had their first word.

use std::sync::Arc;
use std::time::Duration;

use hermes_adapter::{
    Adapter, ChatRef, Inbound, InboundKind, InboundSink, Liveness, Wakeup as WakeupEvent,
};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::parts::Parts;
use super::sink::GatewaySink;
use crate::config::{Config, SandboxMode};
use crate::confine::Confinement;
use crate::http;
use crate::process::Wakeup;
use crate::store::{Retention, Store};
use crate::tools::delegate::SubAgents;

/// Background processes that finished with `notify_on_complete` start a turn: recorded in
/// the inbox first, so a crash cannot lose them.
pub(super) fn relay_wakeups(
    tasks: &TaskTracker,
    mut wakeups: mpsc::UnboundedReceiver<Wakeup>,
    sink: Arc<GatewaySink>,
    intake: CancellationToken,
) {
    tasks.spawn(async move {
        while let Some(wakeup) = tokio::select! {
            _ = intake.cancelled() => None,
            w = wakeups.recv() => w,
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
            if let Err(e) = sink.record(event).await {
                tracing::error!(error = %e, "could not record a background process wake-up");
            }
        }
    });
}

/// The scheduler (Hermes' own jobs taken over once; each due run recorded in the inbox
/// like any event), MCP servers that start at boot (their tools appear as each is ready),
/// and delegations a stopped run left going (run again; they report back).
pub(super) async fn start_agents_work(
    tasks: &TaskTracker,
    config: &Config,
    store: &Store,
    parts: &Parts,
    sink: Arc<GatewaySink>,
    intake: &CancellationToken,
    shared: bool,
) {
    crate::cron::import::import_once(&config.home, store, &parts.cron.tz, &parts.homes).await;
    tasks.spawn(parts.cron.clone().run(sink.clone(), intake.clone()));
    parts.mcp.start();
    // With other nodes on the store, each share's delegations are run again by the node
    // that takes the share over (`work.rs`).
    if !shared {
        resume_delegations(parts, config)(Arc::new(|_: &ChatRef| true)).await;
    }
}

/// Runs again the delegations a stopped run left going in the chats a filter says.
pub(super) type ResumeDelegations = Arc<
    dyn Fn(
            Arc<dyn Fn(&ChatRef) -> bool + Send + Sync>,
        ) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>
        + Send
        + Sync,
>;

/// [`ResumeDelegations`] for this daemon's delegations and agent.
pub(super) fn resume_delegations(parts: &Parts, config: &Config) -> ResumeDelegations {
    let delegations = parts.delegations.clone();
    let agent = Arc::downgrade(&parts.services.agent) as std::sync::Weak<dyn SubAgents>;
    let settings = config.delegation.clone();
    Arc::new(move |mine| {
        let (delegations, agent, settings) = (delegations.clone(), agent.clone(), settings.clone());
        Box::pin(async move {
            crate::tools::delegate::background::resume(&delegations, agent, settings, &*mine).await;
        })
    })
}

/// The first pruning waits this long after the start, so it never slows the start down.
const FIRST_PRUNE_AFTER: Duration = Duration::from_secs(60);
/// Then pruning runs this often.
const PRUNE_EVERY: Duration = Duration::from_secs(3600);
/// Rows of each kind one store call deletes: other chats' writes pass in between.
const PRUNE_BATCH: usize = 500;
/// How long a platform may redeliver an event (Meta retries WhatsApp webhooks for up to
/// seven days; Telegram keeps updates a day, Slack retries for an hour).
const REDELIVERY_WINDOW: Duration = Duration::from_secs(7 * 24 * 3600);

/// Handled inbox rows, sent outbox rows and other ended bookkeeping older than
/// `delivery.retention` are pruned, a minute after the start and then hourly.
pub(super) fn prune_regularly(
    tasks: &TaskTracker,
    store: Store,
    keep: Duration,
    intake: CancellationToken,
) {
    let retention = Retention {
        keep,
        redelivery: REDELIVERY_WINDOW,
    };
    tasks.spawn(async move {
        let mut wait = FIRST_PRUNE_AFTER;
        loop {
            tokio::select! {
                _ = intake.cancelled() => return,
                _ = tokio::time::sleep(wait) => {}
            }
            wait = PRUNE_EVERY;
            match store.prune(retention, PRUNE_BATCH).await {
                Ok(pruned) if pruned.total() > 0 => tracing::info!(
                    inbox = pruned.inbox,
                    outbox = pruned.outbox,
                    event_ids = pruned.seen,
                    other = pruned.other,
                    retention_hours = keep.as_secs() / 3600,
                    "store: pruned old bookkeeping"
                ),
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e, "store: could not prune old bookkeeping; trying again in an hour"),
            }
        }
    });
}

/// How often the daemon looks whether a burst of turns has ended.
const QUIET_CHECK: Duration = Duration::from_secs(5);

/// Once a burst of turns is over (turns ended since the last look, none since), and again
/// once the burst's idle lanes and actors have ended (a tenth of the tasks alive at the
/// last trim gone), the memory they freed goes back to the system. glibc keeps freed
/// memory inside its arenas and returns only what lies at their tops; after a thousand
/// conversations at once, pieces still in use (an actor, a channel) pin the rest, and the
/// daemon kept its peak until it stopped (docs/performance.md, step 18). `malloc_trim`
/// gives back the free pages in the middle too. It walks the arenas under their locks, a
/// few milliseconds for a hundred MiB, so it runs off the async threads and only when
/// quiet.
pub(super) fn trim_after_bursts(tasks: &TaskTracker, intake: CancellationToken) {
    let runtime = tokio::runtime::Handle::current();
    let alive = move || runtime.metrics().num_alive_tasks();
    tasks.spawn(async move {
        let mut seen = crate::metrics::turns_ended();
        let (mut trimmed_turns, mut trimmed_tasks) = (seen, alive());
        loop {
            tokio::select! {
                _ = intake.cancelled() => return,
                _ = tokio::time::sleep(QUIET_CHECK) => {}
            }
            let now = crate::metrics::turns_ended();
            let quiet = now == seen;
            seen = now;
            let tasks = alive();
            let burst_over = now != trimmed_turns;
            let burst_gone = tasks + 100.max(trimmed_tasks / 10) <= trimmed_tasks;
            if quiet && (burst_over || burst_gone) {
                let _ = tokio::task::spawn_blocking(crate::heap::give_back).await;
                (trimmed_turns, trimmed_tasks) = (now, alive());
            } else if tasks > trimmed_tasks && !quiet {
                // A burst is running: what it ends with is measured from its top.
                trimmed_tasks = tasks;
            }
        }
    });
}

/// The HTTP server's routes: the adapters' webhooks, health, readiness, status and
/// metrics.
pub(super) fn http_app(
    config: &Config,
    adapters: &[Arc<dyn Adapter>],
    sink: Arc<dyn InboundSink>,
    store: &Store,
    parts: &Parts,
    cluster: &Arc<crate::cluster::Cluster>,
) -> axum::Router {
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
        confinement: Some(parts.confinement.clone()),
        node: cluster.node_id().is_some().then(|| {
            let cluster = cluster.clone();
            std::sync::Arc::new(move || {
                let held: Vec<_> = cluster
                    .held()
                    .into_iter()
                    .map(|(name, token)| serde_json::json!({"lease": name, "token": token}))
                    .collect();
                serde_json::json!({"id": cluster.node_id(), "holds": held})
            }) as http::NodeReport
        }),
    };
    http::app(routes, health)
}

/// What confines commands is tried once (a jail is made and a command run in it) and
/// said, in the background, once the platforms had their first word (it would only slow
/// the start down otherwise; at most 2 s); a command that comes first tries it itself.
pub(super) fn report_confinement(confinement: Arc<Confinement>, livenesses: Vec<Liveness>) {
    tokio::spawn(async move {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(2);
        while tokio::time::Instant::now() < deadline
            && !livenesses.iter().all(|l| l.since_last_beat().is_some())
        {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let level = confinement.level().await;
        match confinement.warning().await {
            None => tracing::info!(
                "commands the agent runs are {}",
                level.describe(confinement.network())
            ),
            Some(warning) if confinement.mode() == SandboxMode::Required => {
                tracing::error!("{warning}")
            }
            Some(warning) => tracing::warn!("{warning}"),
        }
    });
}
