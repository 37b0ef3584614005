//! The crash harness on several nodes: daemons on one PostgreSQL store (a new database of
//! the tests' server) serving the same four fakes, with short leases (1.5 s, renewed every
//! 0.5 s); the work is shared out among the nodes (each runs the chats of its shares). At
//! each moment one node is hit, two times in three the node running the probe's chat:
//! killed (`kill -9`, restarted after up to half a second, as its service manager would)
//! or, one time in four, paused (`SIGSTOP` for longer than a lease, then `SIGCONT`: a node
//! that wakes must send nothing and stop, and is then started again). WhatsApp's webhooks
//! go to a live node that is not paused, as a load balancer's health check would have it.
//! When the node running the probe's chat is hit, a probe message is written there on
//! Telegram at once and the time until it is answered (by another node) is the failover
//! time.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{Fleet, MOMENTS, Moment, Plan, Report, Rng, Writers, finish, reach, warm_up};
use crate::daemon::Daemon;
use crate::postgres::TestPostgres;

/// The lease timings of the nodes (`config.yaml`).
pub(super) const LEASES: &str = "store:\n  lease_ttl: 1.5\n  lease_renew: 0.5\n";

/// How long a paused node stays paused: past its lease (1.5 s) and the others' takeover.
const PAUSE: Duration = Duration::from_millis(2_500);

/// How long a probe may wait for its answer after the node running its chat was hit.
const FAILOVER_WAIT: Duration = Duration::from_secs(30);

/// Node `n`'s id (`HERMES_NODE_ID`).
pub(super) fn node_id(n: usize) -> String {
    format!("node-{n}")
}

/// The store the nodes share, read with `psql`.
pub(super) struct SharedStore {
    server: Arc<TestPostgres>,
    database: String,
}

impl SharedStore {
    fn sql(&self, sql: &str) -> Option<String> {
        self.server
            .psql(self.server.password(), &self.database, sql)
            .ok()
    }

    /// Outbox rows not yet marked sent (0 while the store cannot be read).
    pub(super) fn outbox_open(&self) -> i64 {
        self.sql("SELECT count(*) FROM outbox WHERE state IN ('pending', 'sending')")
            .and_then(|n| n.parse().ok())
            .unwrap_or(0)
    }

    /// What the outbox says of the answers to `token` (a token is letters and digits).
    pub(super) fn whereabouts(&self, token: &str) -> String {
        let rows = self.sql(&format!(
            "SELECT state || ' after ' || attempts || ' attempts ' || coalesce(last_error, '')
             FROM outbox WHERE plain ~ '\\m{token}\\M'"
        ));
        format!("outbox [{}]", rows.unwrap_or_default().replace('\n', "; "))
    }

    /// The node holding the share of the work Telegram chat `chat` falls in (it runs the
    /// chat's turns and sends its answers), as the store says.
    fn runs(&self, chat: &str) -> Option<usize> {
        self.holds(hermes_adapter::work_share(
            hermes_adapter::Platform::Telegram,
            None,
            chat,
            hermes_adapter::WORK_SHARES,
        ))
    }

    /// The node running the chat of the approval asked last that still waits for a
    /// person, as the store says.
    fn runs_the_waiting_approval(&self) -> Option<usize> {
        let row = self.sql(
            "SELECT platform || '|' || coalesce(account, '') || '|' || chat_id FROM approvals
             WHERE state = 'pending' ORDER BY id DESC LIMIT 1",
        )?;
        let mut parts = row.splitn(3, '|');
        let platform = hermes_adapter::Platform::parse(parts.next()?)?;
        let account = parts.next().filter(|a| !a.is_empty());
        let chat = parts.next()?;
        self.holds(hermes_adapter::work_share(
            platform,
            account,
            chat,
            hermes_adapter::WORK_SHARES,
        ))
    }

    /// The node holding share `share`.
    fn holds(&self, share: u32) -> Option<usize> {
        let holder = self.sql(&format!(
            "SELECT holder FROM leases WHERE name = 'work:{share}'"
        ))?;
        holder.strip_prefix("node-")?.parse().ok()
    }
}

/// The nodes' daemons; `None` while one is down.
struct Nodes {
    daemons: Vec<Option<Daemon>>,
    paused: Vec<bool>,
}

impl Nodes {
    /// Start every node: the first alone (it makes the state key every node signs with),
    /// then the others with a copy of its key.
    async fn start(fleet: &Fleet) -> Nodes {
        let count = fleet.others.len() + 1;
        let mut nodes = Nodes {
            daemons: (0..count).map(|_| None).collect(),
            paused: vec![false; count],
        };
        nodes.daemons[0] = Some(start_node(fleet, 0).await);
        for other in &fleet.others {
            std::fs::copy(
                fleet.home.dir.join("state.key"),
                other.dir.join("state.key"),
            )
            .unwrap();
        }
        for node in 1..count {
            nodes.daemons[node] = Some(start_node(fleet, node).await);
        }
        nodes.attach(fleet);
        nodes
    }

    /// Webhooks go to the first node that is up and not paused.
    fn attach(&self, fleet: &Fleet) {
        let serving = self
            .daemons
            .iter()
            .zip(&self.paused)
            .filter(|(_, paused)| !**paused)
            .find_map(|(daemon, _)| daemon.as_ref()?.http_addr());
        if let Some(addr) = serving {
            fleet.whatsapp.attach_daemon(&addr);
        }
    }

    fn kill(&mut self, fleet: &Fleet, node: usize) {
        if let Some(mut daemon) = self.daemons[node].take() {
            daemon.kill();
        }
        self.paused[node] = false;
        self.attach(fleet);
    }

    fn pause(&mut self, fleet: &Fleet, node: usize, paused: bool) {
        if let Some(daemon) = &self.daemons[node] {
            daemon.pause(paused);
        }
        self.paused[node] = paused;
        self.attach(fleet);
    }

    /// Start again every node that is down or stopped by itself (a node that found it
    /// lost the work exits with 75).
    async fn revive(&mut self, fleet: &Fleet, verbose: bool) {
        for node in 0..self.daemons.len() {
            let ended = match &mut self.daemons[node] {
                None => true,
                Some(daemon) => match daemon.exited() {
                    Some(code) => {
                        if verbose {
                            eprintln!("crash: {} stopped by itself ({code})", node_id(node));
                        }
                        true
                    }
                    None => false,
                },
            };
            if ended {
                self.daemons[node] = Some(start_node(fleet, node).await);
                self.paused[node] = false;
            }
        }
        self.attach(fleet);
    }
}

/// Start node `node`'s daemon and wait (at most 15 s) until it says where it listens.
async fn start_node(fleet: &Fleet, node: usize) -> Daemon {
    let home = if node == 0 {
        &fleet.home
    } else {
        &fleet.others[node - 1]
    };
    let daemon = Daemon::start(&fleet.binary, home, &[("HERMES_LOG", "info")]);
    let deadline = Instant::now() + Duration::from_secs(15);
    while daemon.http_addr().is_none() {
        assert!(
            Instant::now() < deadline,
            "{} did not say where it listens within 15 s:\n{}",
            node_id(node),
            daemon.log_text()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    daemon
}

/// Run the plan on `plan.nodes` nodes.
pub(super) async fn run(plan: &Plan) -> Report {
    let server = TestPostgres::shared()
        .expect("several nodes need PostgreSQL: Debian's `postgresql` package (see .ci/run)");
    let database = server.create_database();
    let url = server.url(&database);
    let dir = tempfile::tempdir().unwrap();
    let mut fleet = Fleet::start_nodes(dir.path(), &plan.binary, Some(&url), plan.nodes).await;
    fleet.store = Some(SharedStore { server, database });
    fleet.script_model();
    if std::env::var_os("HERMES_CRASH_DEBUG").is_some() {
        eprintln!("crash: homes kept under {}", dir.keep().display());
    }
    let store = fleet.store.as_ref().expect("just set");
    let started = Instant::now();
    let mut rng = Rng(plan.seed);
    let mut writers = Writers::new();
    let mut report = Report::default();
    let mut nodes = Nodes::start(&fleet).await;
    let (approver, webhook_writer, prober) = (plan.chats + 1, plan.chats + 2, plan.chats + 3);
    warm_up(&fleet, &mut writers, prober).await;
    let probe_chat = fleet.fake(0).dm_chat(&fleet.fake(0).person(prober));
    for kill in 0..plan.kills {
        let moment = MOMENTS[kill % MOMENTS.len()];
        let reached = reach(
            &fleet,
            moment,
            &mut writers,
            plan,
            &mut rng,
            kill,
            approver,
            webhook_writer,
        )
        .await;
        // The node running the probe's chat (of its share of the work).
        let worker = store.runs(&probe_chat);
        // At an approval, the node where it waits: what the person sees when that node
        // goes is the point (one that lives on keeps waiting for their press, past the
        // end of the run).
        let waits_on = (matches!(moment, Moment::Approval) && reached)
            .then(|| store.runs_the_waiting_approval())
            .flatten();
        let target = match (waits_on, worker) {
            (Some(node), _) if node < plan.nodes => node,
            (_, Some(worker)) if worker < plan.nodes && rng.below(3) < 2 => worker,
            _ => rng.below(plan.nodes as u64) as usize,
        };
        let pause = rng.below(4) == 0;
        let hit = Instant::now();
        if pause {
            nodes.pause(&fleet, target, true);
            report.pauses += 1;
        } else {
            nodes.kill(&fleet, target);
        }
        fleet.discord.clear_faults();
        fleet.slack.clear_faults();
        let counted = if reached { moment } else { Moment::Anytime };
        *report.moments.entry(counted.name()).or_default() += 1;
        report.kills += 1;
        let hit_the_worker = worker == Some(target);
        if hit_the_worker {
            // The next message, answered by another node.
            let probe = writers.write(&fleet, 0, prober, "say");
            let deadline = Instant::now() + FAILOVER_WAIT;
            while fleet.answers(&writers.written[probe]) == 0 && Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            if fleet.answers(&writers.written[probe]) > 0 {
                report.failovers_ms.push(hit.elapsed().as_millis() as u64);
            }
        }
        if plan.verbose {
            eprintln!(
                "crash: {} {} {}at {} ({}){}",
                if pause { "pause" } else { "kill" },
                node_id(target),
                if hit_the_worker {
                    "(running the probe's chat) "
                } else {
                    ""
                },
                moment.name(),
                if reached { "reached" } else { "not reached" },
                report
                    .failovers_ms
                    .last()
                    .filter(|_| hit_the_worker)
                    .map(|ms| format!("; next message answered after {ms} ms"))
                    .unwrap_or_default()
            );
        }
        if pause {
            tokio::time::sleep(PAUSE.saturating_sub(hit.elapsed())).await;
            nodes.pause(&fleet, target, false);
            // A node that wakes finds it lost its shares of the work and stops by itself.
            tokio::time::sleep(Duration::from_millis(300)).await;
        } else if rng.below(3) == 0 {
            tokio::time::sleep(Duration::from_millis(rng.below(500))).await;
        }
        nodes.revive(&fleet, plan.verbose).await;
    }
    finish(&fleet, &writers, &mut report).await;
    drop(nodes);
    report.seconds = started.elapsed().as_secs_f64();
    report
}
