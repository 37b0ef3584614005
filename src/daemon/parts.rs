//! The daemon's parts, built in the order they lean on each other: the home on disk and
//! the store; the way out (delivery, approvals, background processes), with what a crash
//! left half-sent put back first; then the agent with its tools and the services every
//! conversation's actor shares.

use std::collections::HashMap;
use std::os::unix::fs::DirBuilderExt;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use hermes_adapter::{Platform, PlatformSender};
use tokio::sync::mpsc;
use tokio_util::task::TaskTracker;

use super::Stages;
use crate::agent::{AgentRuntime, Compressor, Models, SystemPrompt};
use crate::approval::ApprovalBroker;
use crate::config::{ApprovalMode, Config};
use crate::confine::Confinement;
use crate::cron::Cron;
use crate::delivery::Delivery;
use crate::delivery::destinations::ConfiguredHomes;
use crate::llm::LlmClient;
use crate::mcp::Mcp;
use crate::media::{Describer, MediaPreparer};
use crate::process::{Limits, ProcessRegistry, Wakeup};
use crate::session::SessionServices;
use crate::store::Store;
use crate::tools::delegate::{Delegations, SubAgents};
use crate::tools::memory::MemoryPlaces;
use crate::tools::{ToolDeps, Toolbox};

/// File work before anything runs, off the async worker threads: the home and the
/// places handed to the agent's commands, the workspace, the database, the prompt files.
pub(super) async fn prepare_home(config: Arc<Config>) -> anyhow::Result<(Store, SystemPrompt)> {
    tokio::task::spawn_blocking(move || -> anyhow::Result<_> {
        let home = &config.home;
        let warnings = crate::home::prepare(home, &config.database_path(), config.fix_permissions)
            .with_context(|| format!("preparing {}", home.display()))?;
        for warning in warnings {
            tracing::warn!("{warning}");
        }
        if MemoryPlaces::new(home, config.sole_person(), config.agent.memory_limits).orphaned_shared_files() {
            tracing::warn!(
                "memory: {}/memories/MEMORY.md and USER.md are no longer shown to anyone: several people may talk to this bot, and each now has memories of their own (memories/people/). Move what belongs to one person into theirs",
                home.display()
            );
        }
        // Documents people send and `execute_code`'s runs are handed to the agent's
        // commands, which can only be given a directory that exists when their
        // confinement is made.
        for handed_in in ["cache/documents", crate::confine::layout::CODE_STAGING] {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(home.join(handed_in))
                .with_context(|| format!("preparing {}/{handed_in}", home.display()))?;
        }
        let terminal = &config.terminal;
        let moved = crate::confine::workspace::prepare(home, &terminal.cwd, terminal.cwd_was_home)
            .with_context(|| format!("preparing {}", terminal.cwd.display()))?;
        if !moved.is_empty() {
            tracing::warn!(
                workspace = %terminal.cwd.display(),
                moved = %moved.join(", "),
                "the agent's commands now work in the workspace, since the gateway's home is hidden from them; what they had made in the home was moved there"
            );
        }
        let store = Store::open_at(home, config.store.postgres.clone())?;
        let prompt = SystemPrompt::load(home, config.agent.system_prompt.as_deref());
        Ok((store, prompt))
    })
    .await?
}

/// Everything that leaves the daemon for a chat, ready to send.
#[derive(Clone)]
pub(super) struct WayOut {
    pub delivery: Delivery,
    pub approvals: Arc<ApprovalBroker>,
    pub processes: Arc<ProcessRegistry>,
    /// Where things are: what approvals judge commands against and media what may be sent.
    pub scene: crate::approval::Scene,
}

/// The outbox and what writes to it. Rows caught mid-send go back in the queue first, so
/// a stale prompt among them is settled (rewritten, no live choices) before any lane
/// could send it; processes a dead daemon left are reaped; then the lanes start. With a
/// `gate` (several nodes on one store), lanes run only while it says this node does the
/// work, and that recovery waits until this node takes the work over (`work.rs`).
pub(super) async fn way_out(
    config: &Config,
    store: &Store,
    senders: HashMap<Platform, Arc<dyn PlatformSender>>,
    stages: &Stages,
    gate: Option<crate::delivery::SendGate>,
) -> (WayOut, mpsc::UnboundedReceiver<Wakeup>) {
    let delivery = Delivery::new(
        store.clone(),
        senders,
        config.delivery.clone(),
        stages.sending.clone(),
    );
    let scene =
        crate::approval::Scene::of_this_process(config.home.clone(), config.terminal.cwd.clone())
            .with_other_homes(&config.serving.other_homes);
    let approvals = Arc::new(ApprovalBroker::new(
        store.clone(),
        delivery.clone(),
        config.approvals.clone(),
        scene.clone(),
    ));
    if config.approvals.mode == ApprovalMode::Off {
        tracing::warn!("approvals.mode is off: dangerous commands run without asking anyone");
    }
    say_tiers(config);
    let shared = gate.is_some();
    if let Some(gate) = gate {
        delivery.only_while(gate);
    } else {
        delivery.recover(|_| true).await;
        approvals.expire_leftovers(|_| true).await;
    }
    let (wakeup_tx, wakeups) = mpsc::unbounded_channel::<Wakeup>();
    let processes = ProcessRegistry::new(
        delivery.clone(),
        wakeup_tx,
        stages.work.clone(),
        Limits::default(),
        config.processes.notifications,
    );
    if !shared {
        processes.reap_orphans(|_| true).await;
    }
    delivery.start();
    let out = WayOut {
        delivery,
        approvals,
        processes,
        scene,
    };
    // Background processes that finished with `notify_on_complete`.
    (out, wakeups)
}

/// What the agent and the conversations are made of, beyond the way out.
pub(super) struct Parts {
    pub services: Arc<SessionServices>,
    pub cron: Arc<Cron>,
    pub homes: Arc<ConfiguredHomes>,
    pub mcp: Arc<Mcp>,
    pub delegations: Arc<Delegations>,
    pub confinement: Arc<Confinement>,
}

/// The agent (models, compression, tools) and the services its conversations share.
pub(super) fn agent_and_sessions(
    config: &Config,
    store: &Store,
    prompt: SystemPrompt,
    out: &WayOut,
    stages: &Stages,
) -> Parts {
    let describer = Describer::needed(&config.vision, config.agent.image_input).map(Arc::new);
    let clarify =
        crate::tools::clarify::Clarify::new(out.delivery.clone(), config.agent.clarify_timeout);
    let cron = Cron::new(
        store.clone(),
        crate::cron::zone(config.agent.timezone.as_deref()),
        config.agent.cron_min_interval,
    );
    let media = Arc::new(MediaPreparer::new(
        config.agent.image_input,
        config.home.join("cache").join("documents"),
        &config.agent.stt,
        &config.agent.tts,
        out.scene.clone(),
        describer.clone(),
    ));
    let homes: Arc<ConfiguredHomes> = Arc::new(
        config
            .platforms
            .iter()
            .filter_map(|p| Some((p.platform(), p.home_channel()?.to_owned())))
            .collect(),
    );
    let delegations = Delegations::new(store.clone(), stages.work.clone());
    let confinement = Arc::new(Confinement::new(
        &config.terminal,
        &config.home,
        &config.serving.other_homes,
    ));
    let mcp = Mcp::new(config.mcp_servers.clone(), confinement.clone());
    let memory = MemoryPlaces::new(
        &config.home,
        config.sole_person(),
        config.agent.memory_limits,
    );
    let agent = Arc::new_cyclic(|agent: &std::sync::Weak<AgentRuntime>| AgentRuntime {
        models: Models::new(
            config.model.clone(),
            config.fallbacks.clone(),
            config.provider_keys.clone(),
        ),
        compressor: compressor(config),
        personalities: config.agent.personalities.clone(),
        tools: Toolbox::new(ToolDeps {
            terminal: config.terminal.clone(),
            secret_env_names: config.secret_env_names.clone(),
            approvals: out.approvals.clone(),
            processes: out.processes.clone(),
            store: store.clone(),
            home: config.home.clone(),
            memory: memory.clone(),
            toolsets: config.agent.toolsets.clone(),
            cron: cron.clone(),
            delivery: out.delivery.clone(),
            clarify: clarify.clone(),
            web: crate::tools::web::Web::new(config.agent.web.clone()),
            code_execution: config.code_execution.clone(),
            delegation: config.delegation.clone(),
            agent: agent.clone() as std::sync::Weak<dyn SubAgents>,
            delegations: delegations.clone(),
            media: media.clone(),
            homes: homes.clone(),
            confinement: confinement.clone(),
        })
        .with_mcp(mcp.clone()),
        memory,
        prompt,
        max_iterations: config.agent.max_turns,
        outage_wait: config.agent.provider_outage_wait,
        context_tokens: config.model.context_length,
        image_input: config.agent.image_input,
        tool_progress: config.agent.tool_progress.clone(),
        describer,
    });
    let services = Arc::new(SessionServices {
        clarify,
        store: store.clone(),
        delivery: out.delivery.clone(),
        agent,
        busy_mode: config.busy_mode,
        model_chosen: config.model.is_chosen(),
        approvals: out.approvals.clone(),
        processes: out.processes.clone(),
        stop_kills_background: config.processes.stop_kills_background,
        delegations: delegations.clone(),
        mcp: mcp.clone(),
        streaming: config.agent.streaming.clone(),
        channel_overrides: config.agent.channel_overrides.clone(),
        media,
        work: stages.work.clone(),
        intake: stages.intake.clone(),
        tasks: TaskTracker::new(),
        confinement: confinement.clone(),
        operator: std::sync::OnceLock::new(),
        titles: config.agent.titles.enabled.then(|| crate::session::Titles {
            model: config
                .agent
                .titles
                .model
                .clone()
                .map(|m| Arc::new(LlmClient::new(m))),
            language: config.agent.titles.language.clone(),
        }),
        home: config.home.clone(),
    });
    Parts {
        services,
        cron,
        homes,
        mcp,
        delegations,
        confinement,
    }
}

/// Context compression, unless `compression.enabled` is off.
fn compressor(config: &Config) -> Option<Arc<Compressor>> {
    config.compression.enabled.then(|| {
        Arc::new(Compressor::new(
            config.compression.clone(),
            Arc::new(LlmClient::new(config.compression.model.clone())),
        ))
    })
}

/// Idle jails are let go every minute, even when no command asks for one.
pub(super) fn sweep_idle_jails(confinement: Arc<Confinement>, stages: &Stages) {
    let intake = stages.intake.clone();
    tokio::spawn(async move {
        let mut every = tokio::time::interval(Duration::from_secs(60));
        loop {
            tokio::select! {
                _ = every.tick() => confinement.release_idle(),
                _ = intake.cancelled() => return,
            }
        }
    });
}

/// Each platform's admin tiers, said at start: where none is listed every allowed person
/// may run every command (Hermes' rule), which the operator should know.
fn say_tiers(config: &Config) {
    for settings in &config.platforms {
        let platform = settings.platform();
        let tiers = config.access.tiers.get(&platform);
        let on = |scope: Option<&crate::config::TierScope>| scope.map_or(0, |s| s.admins.len());
        let (direct, group) = (on(tiers.map(|t| &t.direct)), on(tiers.map(|t| &t.group)));
        if direct == 0 && group == 0 {
            tracing::info!(
                %platform,
                "tiers: off — every allowed person is an admin (set platforms.{platform}.allow_admin_from and group_allow_admin_from to have users)"
            );
        } else {
            tracing::info!(%platform, direct_admins = direct, group_admins = group, "tiers: on");
        }
    }
}
