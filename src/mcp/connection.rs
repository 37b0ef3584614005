//! One live connection to an MCP server: a stdio child in its own process group (stderr
//! drained into the log) or a Streamable HTTP session; the handshake and the tool listing
//! bounded by `connect_timeout`; closed with the whole group stopped.

use std::time::Duration;

use nix::sys::signal::Signal;
use nix::unistd::Pid;
use rmcp::model::{ClientCapabilities, ClientConfig, Implementation, ProtocolVersion};
use rmcp::service::{Peer, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{RoleClient, ServiceExt};
use serde_json::Value;
use tokio::io::AsyncBufReadExt;

use crate::config::{McpServerConfig, McpTransport};

/// Variables every stdio server gets from the daemon (Hermes' safe list); everything
/// else it needs is in its `env`.
const SAFE_ENV: [&str; 8] = [
    "PATH", "HOME", "USER", "LANG", "LC_ALL", "TERM", "SHELL", "TMPDIR",
];
/// How long a closing server gets before its group is killed.
const CLOSE_GRACE: Duration = Duration::from_secs(5);
/// The longest line of a server's stderr that is logged.
const STDERR_LINE: usize = 500;

/// A tool as the server lists it.
pub struct ListedTool {
    pub name: String,
    pub description: String,
    /// The JSON schema of its arguments.
    pub input_schema: Value,
}

pub struct Connection {
    service: RunningService<RoleClient, ClientConfig>,
    /// A stdio server's process (the leader of its group), confined.
    process: Option<crate::confine::AgentProcess>,
}

impl Connection {
    /// Connect, shake hands and list the tools, within `connect_timeout`; a stdio server
    /// runs in a confinement of its own.
    pub async fn open(
        config: &McpServerConfig,
        confinement: &crate::confine::Confinement,
    ) -> Result<(Connection, Vec<ListedTool>), String> {
        let limit = config.connect_timeout;
        let (service, process) =
            match &config.transport {
                McpTransport::Stdio { command, args, env } => {
                    let sandbox = confinement
                        .sandbox(&format!("mcp:{}", config.name))
                        .await
                        .map_err(|refused| refused.to_string())?;
                    let mut program = crate::confine::Program::new(command);
                    program
                        .args(args)
                        .current_dir(confinement.working_directory())
                        .env_clear()
                        .envs(SAFE_ENV.iter().filter_map(|name| {
                            std::env::var(name).ok().map(|value| (*name, value))
                        }))
                        .envs(std::env::vars().filter(|(name, _)| name.starts_with("XDG_")))
                        .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
                        .piped_stdin(true);
                    let mut process = sandbox
                        .spawn(&program)
                        .map_err(|e| format!("could not start {command:?}: {e}"))?;
                    let (Some(stdout), Some(stdin)) = (process.stdout.take(), process.stdin.take())
                    else {
                        return Err(format!("could not start {command:?}: no pipes"));
                    };
                    if let Some(stderr) = process.stderr.take() {
                        drain_stderr(&config.name, stderr);
                    }
                    // A server that cannot shake hands is killed with its group when
                    // `process` is dropped.
                    (handshake((stdout, stdin), limit).await?, Some(process))
                }
                McpTransport::Http { url, headers } => {
                    let mut custom = std::collections::HashMap::new();
                    for (name, value) in headers {
                        let name = reqwest::header::HeaderName::from_bytes(name.as_bytes())
                            .map_err(|e| format!("header {name:?}: {e}"))?;
                        let value = reqwest::header::HeaderValue::from_str(value)
                            .map_err(|_| format!("header {name}: not a valid header value"))?;
                        custom.insert(name, value);
                    }
                    let transport = StreamableHttpClientTransport::from_config(
                        StreamableHttpClientTransportConfig::with_uri(url.as_str())
                            .custom_headers(custom),
                    );
                    (handshake(transport, limit).await?, None)
                }
            };
        let connection = Connection { service, process };
        let listed = match tokio::time::timeout(limit, connection.peer().list_all_tools()).await {
            Ok(Ok(tools)) => tools,
            Ok(Err(e)) => {
                connection.close().await;
                return Err(format!("listing its tools failed: {e}"));
            }
            Err(_) => {
                connection.close().await;
                return Err(format!(
                    "listing its tools took longer than {} s",
                    limit.as_secs()
                ));
            }
        };
        let tools = listed
            .into_iter()
            .map(|t| ListedTool {
                name: t.name.to_string(),
                description: t.description.map(|d| d.to_string()).unwrap_or_default(),
                input_schema: Value::Object((*t.input_schema).clone()),
            })
            .collect();
        Ok((connection, tools))
    }

    pub fn peer(&self) -> Peer<RoleClient> {
        self.service.peer().clone()
    }

    /// The server went away (its stdout closed, or the session ended).
    pub fn is_closed(&self) -> bool {
        self.service.peer().is_transport_closed()
    }

    /// End the session; a stdio server gets [`CLOSE_GRACE`], then its whole group is
    /// killed (wrappers such as `npx` leave children behind a leader that exits).
    pub async fn close(mut self) {
        let _ = self.service.close_with_timeout(CLOSE_GRACE).await;
        if let Some(group) = self.process.as_ref().map(|p| Pid::from_raw(p.id() as i32)) {
            crate::shell::signal_group(group, Signal::SIGTERM);
            tokio::time::sleep(Duration::from_millis(200)).await;
            if crate::shell::group_alive(group) {
                crate::shell::signal_group(group, Signal::SIGKILL);
            }
        }
    }
}

/// The MCP handshake, within `limit` (Hermes' `connect_timeout`).
async fn handshake<T, E, A>(
    transport: T,
    limit: Duration,
) -> Result<RunningService<RoleClient, ClientConfig>, String>
where
    T: rmcp::transport::IntoTransport<RoleClient, E, A>,
    E: std::error::Error + Send + Sync + 'static,
{
    let client = ClientConfig::new(
        ClientCapabilities::default(),
        Implementation::new("hermes-gateway", env!("CARGO_PKG_VERSION")),
    )
    // The newest protocol version that still has the `initialize` handshake.
    .with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE);
    match tokio::time::timeout(limit, client.serve(transport)).await {
        Ok(Ok(service)) => Ok(service),
        Ok(Err(e)) => Err(format!("the MCP handshake failed: {e}")),
        Err(_) => Err(format!(
            "it did not answer the MCP handshake within {} s",
            limit.as_secs()
        )),
    }
}

/// Log what a stdio server writes on stderr (it would block once the pipe is full).
fn drain_stderr(server: &str, stderr: tokio::net::unix::pipe::Receiver) {
    let server = server.to_owned();
    tokio::spawn(async move {
        let mut lines = tokio::io::BufReader::new(stderr).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            let line: String = line.chars().take(STDERR_LINE).collect();
            tracing::info!(server = %server, "mcp server: {}", crate::secrets::scrub(&line));
        }
    });
}
