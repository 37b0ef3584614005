//! Tools from MCP servers (`mcp_servers`, Hermes' names), through the official Rust SDK
//! (`rmcp`). Each server is connected at boot in the background (or, with `lazy`, when a
//! turn first needs tools); its tools are offered as `mcp__<server>__<tool>` in toolset
//! `mcp-<server>` while it is healthy and hidden while it is not. A server that fails to
//! start or dies is logged, shown in `/status` and `check-config`, and tried again at a
//! later turn (backing off); the other servers and tools keep working. Stdio servers are
//! children of the daemon in their own process group with a minimal environment (Hermes'
//! safe list plus their configured `env`), stopped with the daemon.

mod connection;
mod tool;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub use tool::McpTool;

use crate::config::McpServerConfig;
use crate::tool::Tool;
use connection::Connection;

/// The first wait before a failed server is tried again; it doubles up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_secs(5);
const MAX_BACKOFF: Duration = Duration::from_secs(300);

/// Where a server stands.
#[derive(Debug, Clone)]
pub enum Health {
    /// Not started yet (`lazy`, or boot still under way).
    NotStarted,
    Starting,
    /// Connected, offering this many tools.
    Ready(usize),
    /// Failed to start or died; why, and when it may be tried again.
    Failed {
        why: String,
        retry_at: Instant,
    },
}

/// A connection that lived this long before its server stopped counts as a success: the
/// failures it follows are forgotten.
const STABLE: Duration = Duration::from_secs(60);
/// How long a turn waits for a server being started again.
const RESTART_WAIT: Duration = Duration::from_secs(2);
/// How often a connected server is looked at for having stopped.
const WATCH_EVERY: Duration = Duration::from_secs(1);

/// One configured server.
pub struct Server {
    pub config: McpServerConfig,
    /// Where a stdio server runs.
    confinement: Arc<crate::confine::Confinement>,
    health: Mutex<Health>,
    failures: Mutex<u32>,
    connection: tokio::sync::Mutex<Option<Connection>>,
    tools: Mutex<Vec<Arc<McpTool>>>,
    /// The daemon is stopping: a server that ends now (its jail or process group going
    /// with the daemon) is not a failure.
    stopping: Arc<std::sync::atomic::AtomicBool>,
}

/// Every configured MCP server.
pub struct Mcp {
    /// Swapped whole by [`Mcp::reload`]; read as a snapshot.
    servers: Mutex<Arc<Vec<Arc<Server>>>>,
    /// Set when the servers of now stop (the daemon's end, or a reload replacing them):
    /// they end without counting as failures.
    stopping: Mutex<Arc<std::sync::atomic::AtomicBool>>,
    confinement: Arc<crate::confine::Confinement>,
}

/// What `/reload_mcp` changed, by server name.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Reloaded {
    pub reconnected: Vec<String>,
    pub added: Vec<String>,
    pub removed: Vec<String>,
    /// Servers connected now, and the tools they offer.
    pub servers: usize,
    pub tools: usize,
}

impl Mcp {
    pub fn new(
        configs: Vec<McpServerConfig>,
        confinement: Arc<crate::confine::Confinement>,
    ) -> Arc<Mcp> {
        let stopping = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let servers = Self::servers_for(configs, &confinement, &stopping);
        Arc::new(Mcp {
            stopping: Mutex::new(stopping),
            servers: Mutex::new(Arc::new(servers)),
            confinement,
        })
    }

    fn servers_for(
        configs: Vec<McpServerConfig>,
        confinement: &Arc<crate::confine::Confinement>,
        stopping: &Arc<std::sync::atomic::AtomicBool>,
    ) -> Vec<Arc<Server>> {
        configs
            .into_iter()
            .map(|config| {
                Arc::new(Server {
                    config,
                    confinement: confinement.clone(),
                    health: Mutex::new(Health::NotStarted),
                    failures: Mutex::new(0),
                    connection: tokio::sync::Mutex::new(None),
                    tools: Mutex::new(Vec::new()),
                    stopping: stopping.clone(),
                })
            })
            .collect()
    }

    /// The servers now.
    fn servers(&self) -> Arc<Vec<Arc<Server>>> {
        self.servers.lock().expect("mcp servers lock").clone()
    }

    /// Stop every server and connect `configs` in their place (`/reload_mcp`, with the
    /// configuration read again), waiting for each within its `connect_timeout`; what
    /// changed, by name. A turn running meanwhile keeps the tools it was offered (calls to
    /// a stopped server fail as a stopped server's do).
    pub async fn reload(&self, configs: Vec<McpServerConfig>) -> Reloaded {
        let stopping = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let new = Arc::new(Self::servers_for(configs, &self.confinement, &stopping));
        let old = std::mem::replace(
            &mut *self.servers.lock().expect("mcp servers lock"),
            new.clone(),
        );
        std::mem::replace(
            &mut *self.stopping.lock().expect("mcp stopping lock"),
            stopping,
        )
        .store(true, std::sync::atomic::Ordering::Relaxed);
        futures_util::future::join_all(old.iter().map(|s| s.stop())).await;
        futures_util::future::join_all(new.iter().map(|s| s.ensure())).await;
        let names = |list: &[Arc<Server>]| -> Vec<String> {
            list.iter().map(|s| s.config.name.clone()).collect()
        };
        let (before, after) = (names(&old), names(&new));
        let mut reloaded = Reloaded {
            reconnected: after
                .iter()
                .filter(|n| before.contains(n))
                .cloned()
                .collect(),
            added: after
                .iter()
                .filter(|n| !before.contains(n))
                .cloned()
                .collect(),
            removed: before
                .iter()
                .filter(|n| !after.contains(n))
                .cloned()
                .collect(),
            ..Reloaded::default()
        };
        for server in new.iter() {
            if let Health::Ready(tools) = server.health() {
                reloaded.servers += 1;
                reloaded.tools += tools;
            }
        }
        reloaded
    }

    /// Connect the servers that start at boot, each in a task of its own.
    pub fn start(self: &Arc<Self>) {
        for server in self.servers().iter().filter(|s| !s.config.lazy) {
            let server = server.clone();
            tokio::spawn(async move { server.ensure().await });
        }
    }

    /// Before a turn: the servers not started yet (lazy ones, or ones the boot has not
    /// reached) are started and waited for, and those still connecting are waited for
    /// (each within its `connect_timeout`), so the turn has their tools; the failed ones whose
    /// wait is over are started again in the background and waited for at most
    /// [`RESTART_WAIT`] (a server that hangs costs a turn that little, once per backoff).
    /// `cancel` (the turn's) ends the wait.
    pub async fn prepare(&self, cancel: &tokio_util::sync::CancellationToken) {
        let mut first_starts = Vec::new();
        let mut restarts = Vec::new();
        let mut connecting = Vec::new();
        for server in self.servers().iter() {
            match server.health() {
                // A server the boot has not reached yet starts now (the boot's own start
                // then finds it connected): the first turns have its tools.
                Health::NotStarted => first_starts.push(server.clone()),
                // One connecting holds its connection's lock until it is done: the turn
                // waits for that, within the server's connect_timeout.
                Health::Starting => {
                    let server = server.clone();
                    connecting.push(async move {
                        let limit = server.config.connect_timeout + Duration::from_secs(1);
                        let _ = tokio::time::timeout(limit, server.connection.lock()).await;
                    });
                }
                Health::Failed { retry_at, .. } if Instant::now() >= retry_at => {
                    let server = server.clone();
                    restarts.push(tokio::spawn(async move { server.ensure().await }));
                }
                _ => {}
            }
        }
        let restarted = async {
            let _ =
                tokio::time::timeout(RESTART_WAIT, futures_util::future::join_all(restarts)).await;
        };
        let started = futures_util::future::join_all(first_starts.iter().map(|s| s.ensure()));
        let connected = futures_util::future::join_all(connecting);
        tokio::select! {
            _ = futures_util::future::join3(started, restarted, connected) => {}
            _ = cancel.cancelled() => {}
        }
    }

    /// The tools of every server (each says whether it is available now).
    pub fn tools(&self) -> Vec<Arc<McpTool>> {
        self.servers()
            .iter()
            .flat_map(|s| s.tools.lock().expect("mcp tools lock").clone())
            .collect()
    }

    /// Each server and where it stands, for `/status` and `check-config`.
    pub fn health(&self) -> Vec<(String, Health)> {
        self.servers()
            .iter()
            .map(|s| (s.config.name.clone(), s.health()))
            .collect()
    }

    /// One line per server for `/status`; `None` without servers.
    pub fn status_line(&self) -> Option<String> {
        if self.servers().is_empty() {
            return None;
        }
        let parts: Vec<String> = self
            .health()
            .into_iter()
            .map(|(name, health)| format!("{name} ({})", describe(&health)))
            .collect();
        Some(format!("MCP servers: {}", parts.join(", ")))
    }

    /// Connect every server now and wait (`check-config`).
    pub async fn start_all_and_wait(&self) {
        futures_util::future::join_all(self.servers().iter().map(|s| s.ensure())).await;
    }

    /// The daemon begins to stop: servers ending from now on are not failures (no ERROR
    /// on a clean stop).
    pub fn stopping(&self) {
        self.stopping
            .lock()
            .expect("mcp stopping lock")
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// Stop every server (stdio ones and everything they started).
    pub async fn shutdown(&self) {
        self.stopping();
        futures_util::future::join_all(self.servers().iter().map(|s| s.stop())).await;
    }
}

/// A server's state in a few words.
pub fn describe(health: &Health) -> String {
    match health {
        Health::NotStarted => "not started".into(),
        Health::Starting => "starting".into(),
        Health::Ready(n) => format!("{n} tools"),
        Health::Failed { why, .. } => format!("failed: {why}"),
    }
}

impl Server {
    /// Close its connection (a stdio server stops with everything it started) and drop
    /// its tools.
    async fn stop(&self) {
        if let Some(connection) = self.connection.lock().await.take() {
            connection.close().await;
        }
        self.tools.lock().expect("mcp tools lock").clear();
    }

    pub fn health(&self) -> Health {
        self.health.lock().expect("mcp health lock").clone()
    }

    fn set_health(&self, health: Health) {
        *self.health.lock().expect("mcp health lock") = health;
    }

    /// One more failure: logged, its tools withdrawn, tried again after a wait that
    /// doubles with each failure in a row.
    fn failed(&self, why: String) {
        let failures = {
            let mut f = self.failures.lock().expect("mcp failures lock");
            *f += 1;
            *f
        };
        let wait = FIRST_BACKOFF
            .saturating_mul(1 << (failures - 1).min(10))
            .min(MAX_BACKOFF);
        if self.stopping.load(std::sync::atomic::Ordering::Relaxed) {
            tracing::info!(server = %self.config.name, why = %why, "mcp: the server ended with the daemon");
        } else {
            tracing::error!(server = %self.config.name, error = %why, retry_in_s = wait.as_secs(), "mcp: the server could not be started or stopped; its tools are not offered");
        }
        self.tools.lock().expect("mcp tools lock").clear();
        self.set_health(Health::Failed {
            why,
            retry_at: Instant::now() + wait,
        });
    }

    /// Notice, soon, when the server behind `peer` stops.
    fn watch(self: &Arc<Self>, peer: rmcp::service::Peer<rmcp::RoleClient>, since: Instant) {
        let server = Arc::downgrade(self);
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(WATCH_EVERY).await;
                let Some(server) = server.upgrade() else {
                    return;
                };
                if !matches!(server.health(), Health::Ready(_)) {
                    return;
                }
                if peer.is_transport_closed() {
                    if since.elapsed() >= STABLE {
                        *server.failures.lock().expect("mcp failures lock") = 0;
                    }
                    server.failed("the server stopped".into());
                    return;
                }
            }
        });
    }

    /// Connected, unless it is already, or it fails (then logged and backed off).
    async fn ensure(self: &Arc<Self>) {
        let mut connection = self.connection.lock().await;
        if connection.as_ref().is_some_and(|c| !c.is_closed()) {
            return;
        }
        // Stopped for good (the daemon's end, or replaced by a reload): never again.
        if self.stopping.load(std::sync::atomic::Ordering::Relaxed) {
            return;
        }
        if let Some(dead) = connection.take() {
            dead.close().await;
        }
        self.set_health(Health::Starting);
        let name = &self.config.name;
        tracing::info!(server = %name, "mcp: connecting");
        match Connection::open(&self.config, &self.confinement).await {
            Ok((open, listed)) => {
                let mut tools: Vec<Arc<McpTool>> = Vec::new();
                for listed in listed.into_iter().filter(|t| self.wanted(&t.name)) {
                    let tool = McpTool::new(&self.config, listed, open.peer());
                    if tools.iter().any(|t| t.name() == tool.name()) {
                        tracing::warn!(server = %name, tool = tool.name(), "mcp: two tools have this name once made safe; the second is left out");
                        continue;
                    }
                    tools.push(Arc::new(tool));
                }
                tracing::info!(server = %name, tools = tools.len(), "mcp: connected");
                self.set_health(Health::Ready(tools.len()));
                *self.tools.lock().expect("mcp tools lock") = tools;
                self.watch(open.peer(), Instant::now());
                *connection = Some(open);
            }
            Err(why) => self.failed(crate::secrets::scrub(&why).into_owned()),
        }
    }

    /// Whether `tool` passes `tools.include` / `tools.exclude`.
    fn wanted(&self, tool: &str) -> bool {
        if !self.config.include.is_empty() {
            return self.config.include.iter().any(|t| t == tool);
        }
        !self.config.exclude.iter().any(|t| t == tool)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::McpTransport;

    fn server(include: &[&str], exclude: &[&str]) -> Arc<Server> {
        let config = McpServerConfig {
            name: "s".into(),
            transport: McpTransport::Stdio {
                command: "true".into(),
                args: Vec::new(),
                env: Vec::new(),
            },
            timeout: Duration::from_secs(1),
            connect_timeout: Duration::from_secs(1),
            include: include.iter().map(|t| t.to_string()).collect(),
            exclude: exclude.iter().map(|t| t.to_string()).collect(),
            parallel: false,
            lazy: true,
        };
        Mcp::new(
            vec![config],
            Arc::new(crate::confine::Confinement::disabled()),
        )
        .servers()[0]
            .clone()
    }

    #[test]
    fn include_wins_over_exclude_and_exclude_leaves_the_rest() {
        let only = server(&["read"], &["read", "write"]);
        assert!(only.wanted("read") && !only.wanted("write") && !only.wanted("list"));
        let but = server(&[], &["delete_repo"]);
        assert!(but.wanted("list") && !but.wanted("delete_repo"));
    }

    #[test]
    fn failures_in_a_row_wait_longer_up_to_the_cap() {
        let s = server(&[], &[]);
        let waits: Vec<u64> = (0..12)
            .map(|_| {
                s.failed("down".into());
                match s.health() {
                    Health::Failed { retry_at, .. } => retry_at
                        .saturating_duration_since(Instant::now())
                        .as_secs_f64()
                        .round() as u64,
                    other => panic!("{other:?}"),
                }
            })
            .collect();
        assert_eq!(&waits[..4], [5, 10, 20, 40]);
        assert_eq!(*waits.last().unwrap(), MAX_BACKOFF.as_secs());
    }
}
