//! `mcp_servers` (Hermes' names): each server a stdio command (`command`, `args`, `env`) or
//! an HTTP endpoint (`url`, `headers`), with `timeout` (per call, 300 s), `connect_timeout`
//! (60 s), `enabled`, `tools.include` / `tools.exclude`, `supports_parallel_tool_calls`, and
//! the gateway's own `lazy` (start at the first turn rather than at boot). `${VAR}` and
//! `${env:VAR}` in `env`, `headers`, `args` and `url` are read from `.env` and the
//! environment, as Hermes does.

use std::time::Duration;

use serde_json::Value;

use super::env::EnvVars;
use super::yaml::YamlReader;
use super::{Problem, validate_http_url};

/// How the gateway reaches an MCP server.
#[derive(Debug, Clone, PartialEq)]
pub enum McpTransport {
    /// A child process speaking MCP on its stdin and stdout.
    Stdio {
        command: String,
        args: Vec<String>,
        /// Set on top of the few variables every server gets (`PATH`, `HOME`…).
        env: Vec<(String, String)>,
    },
    /// A Streamable HTTP endpoint.
    Http {
        url: String,
        headers: Vec<(String, String)>,
    },
}

/// One entry of `mcp_servers`.
#[derive(Debug, Clone, PartialEq)]
pub struct McpServerConfig {
    /// The key under `mcp_servers`.
    pub name: String,
    pub transport: McpTransport,
    /// Longest a tool call may take (`timeout`, 300 s).
    pub timeout: Duration,
    /// Longest the connection and its handshake may take (`connect_timeout`, 60 s).
    pub connect_timeout: Duration,
    /// `tools.include`: only these tools (wins over `exclude`).
    pub include: Vec<String>,
    /// `tools.exclude`: every tool but these.
    pub exclude: Vec<String>,
    /// `supports_parallel_tool_calls`: its calls may run together with a step's reads.
    pub parallel: bool,
    /// `lazy`: started when a turn first needs tools, not at boot.
    pub lazy: bool,
}

impl McpServerConfig {
    /// The values that hold credentials (variables and headers named as secrets, and
    /// `Authorization`/`Cookie` headers), for the scrubber.
    pub fn secret_values(&self) -> Vec<String> {
        let pairs = match &self.transport {
            McpTransport::Stdio { env, .. } => env,
            McpTransport::Http { headers, .. } => headers,
        };
        pairs
            .iter()
            .filter(|(name, _)| {
                let name = name.replace('-', "_");
                crate::secrets::holds_secret_value(&name)
                    || ["AUTHORIZATION", "PROXY_AUTHORIZATION", "COOKIE"]
                        .contains(&name.to_ascii_uppercase().as_str())
            })
            .map(|(_, v)| v.clone())
            .collect()
    }
}

/// `mcp_servers`: the enabled servers, in the file's order.
pub(super) fn read_mcp_servers(
    y: &mut YamlReader,
    env: &EnvVars,
    problems: &mut Vec<Problem>,
) -> Vec<McpServerConfig> {
    let Some(value) = y.get("mcp_servers").cloned() else {
        return Vec::new();
    };
    let Value::Object(servers) = value else {
        problems.push(Problem::error(
            "mcp_servers",
            "expected a mapping of server name: settings",
        ));
        return Vec::new();
    };
    let mut out = Vec::new();
    for (name, entry) in servers {
        if let Some(server) = read_server(name, entry, env, problems) {
            out.push(server);
        }
    }
    out
}

/// The server `name` of `mcp_servers`; `None` when it is disabled, or wrong (with the
/// problem added to `problems`).
fn read_server(
    name: String,
    entry: Value,
    env: &EnvVars,
    problems: &mut Vec<Problem>,
) -> Option<McpServerConfig> {
    let key = format!("mcp_servers.{name}");
    let Value::Object(settings) = entry else {
        problems.push(Problem::error(key, "expected the server's settings"));
        return None;
    };
    if !boolish(settings.get("enabled")).unwrap_or(true) {
        return None;
    }
    let server = Entry {
        key,
        settings: &settings,
        env,
    };
    let transport = server.transport(problems)?;
    if matches!(
        settings.get("transport").and_then(Value::as_str),
        Some("sse")
    ) {
        problems.push(Problem::warning(
            format!("{}.transport", server.key),
            "the old SSE transport is not supported; the server is reached over Streamable HTTP",
        ));
    }
    Some(McpServerConfig {
        timeout: server.seconds("timeout", 300, problems),
        connect_timeout: server.seconds("connect_timeout", 60, problems),
        include: server.names("include"),
        exclude: server.names("exclude"),
        parallel: boolish(settings.get("supports_parallel_tool_calls")).unwrap_or(false),
        lazy: boolish(settings.get("lazy")).unwrap_or(false),
        name,
        transport,
    })
}

/// One server's settings, with what reading them needs.
struct Entry<'a> {
    /// `mcp_servers.NAME`: where its problems are reported.
    key: String,
    settings: &'a serde_json::Map<String, Value>,
    /// For the `${VAR}`s in its values.
    env: &'a EnvVars,
}

impl Entry<'_> {
    /// The string `field`, trimmed, with its variables read; `None` when missing or empty.
    fn text(&self, field: &str) -> Option<String> {
        self.settings
            .get(field)
            .and_then(Value::as_str)
            .map(|s| interpolate(s.trim(), self.env))
            .filter(|s| !s.is_empty())
    }

    /// The mapping `field` (`env`, `headers`) as name and value pairs, with the values'
    /// variables read.
    fn pairs(&self, field: &str, problems: &mut Vec<Problem>) -> Vec<(String, String)> {
        match self.settings.get(field) {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Object(map)) => map
                .iter()
                .map(|(k, v)| {
                    let v = match v {
                        Value::String(s) => s.clone(),
                        other => other.to_string(),
                    };
                    (k.clone(), interpolate(&v, self.env))
                })
                .collect(),
            Some(_) => {
                problems.push(Problem::error(
                    format!("{}.{field}", self.key),
                    "expected a mapping of name: value",
                ));
                Vec::new()
            }
        }
    }

    /// How the server is reached: `command` (stdio) or `url` (HTTP). `None` when it has
    /// neither or both, or they are wrong (with the problem added to `problems`).
    fn transport(&self, problems: &mut Vec<Problem>) -> Option<McpTransport> {
        match (self.text("command"), self.text("url")) {
            (Some(command), None) => {
                let args = self.args(problems)?;
                Some(McpTransport::Stdio {
                    command,
                    args,
                    env: self.pairs("env", problems),
                })
            }
            (None, Some(url)) => {
                if let Err(why) = validate_http_url(&url) {
                    problems.push(Problem::error(format!("{}.url", self.key), why));
                    return None;
                }
                Some(McpTransport::Http {
                    url,
                    headers: self.pairs("headers", problems),
                })
            }
            (Some(_), Some(_)) => {
                problems.push(Problem::error(
                    self.key.as_str(),
                    "has both `command` and `url`; give one (stdio or HTTP)",
                ));
                None
            }
            (None, None) => {
                problems.push(Problem::error(
                    self.key.as_str(),
                    "needs `command` (a stdio server) or `url` (an HTTP server)",
                ));
                None
            }
        }
    }

    /// A stdio server's `args`, with their variables read; `None` when they are not a list
    /// (with the problem added to `problems`).
    fn args(&self, problems: &mut Vec<Problem>) -> Option<Vec<String>> {
        match self.settings.get("args") {
            None | Some(Value::Null) => Some(Vec::new()),
            Some(Value::Array(items)) => Some(
                items
                    .iter()
                    .map(|a| match a {
                        Value::String(s) => interpolate(s, self.env),
                        other => other.to_string(),
                    })
                    .collect(),
            ),
            Some(_) => {
                problems.push(Problem::error(
                    format!("{}.args", self.key),
                    "expected a list of arguments",
                ));
                None
            }
        }
    }

    /// The duration `field` in seconds (at most a day), `default` when it is not given or
    /// not a positive number.
    fn seconds(&self, field: &str, default: u64, problems: &mut Vec<Problem>) -> Duration {
        match self.settings.get(field) {
            None | Some(Value::Null) => Duration::from_secs(default),
            Some(v) => match v.as_f64().filter(|s| *s > 0.0) {
                Some(s) => Duration::from_secs_f64(s.min(86_400.0)),
                None => {
                    problems.push(Problem::error(
                        format!("{}.{field}", self.key),
                        "expected a number of seconds",
                    ));
                    Duration::from_secs(default)
                }
            },
        }
    }

    /// The tool names in `tools.FIELD` (`include`, `exclude`).
    fn names(&self, field: &str) -> Vec<String> {
        self.settings
            .get("tools")
            .and_then(|t| t.get(field))
            .and_then(Value::as_array)
            .map(|items| {
                items
                    .iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// `true`/`false`, also as `"yes"`, `"off"`… (Hermes' `_parse_boolish`).
fn boolish(value: Option<&Value>) -> Option<bool> {
    match value? {
        Value::Bool(b) => Some(*b),
        Value::String(s) => match s.trim().to_ascii_lowercase().as_str() {
            "true" | "yes" | "on" | "1" => Some(true),
            "false" | "no" | "off" | "0" => Some(false),
            _ => None,
        },
        Value::Number(n) => Some(n.as_f64() != Some(0.0)),
        _ => None,
    }
}

/// `${VAR}` and `${env:VAR}` replaced by the variable's value (empty when unset).
fn interpolate(text: &str, env: &EnvVars) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        let Some(len) = rest[start + 2..].find('}') else {
            break;
        };
        out.push_str(&rest[..start]);
        let name = rest[start + 2..start + 2 + len].trim();
        let name = name.strip_prefix("env:").unwrap_or(name).trim();
        out.push_str(&env.value(name).unwrap_or_default());
        rest = &rest[start + 3 + len..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(yaml: &str, dotenv: &str) -> (Vec<McpServerConfig>, Vec<Problem>) {
        let mut y = YamlReader::parse(yaml).unwrap();
        let env = EnvVars::new(Vec::new(), dotenv);
        let mut problems = Vec::new();
        let servers = read_mcp_servers(&mut y, &env, &mut problems);
        (servers, problems)
    }

    #[test]
    fn hermes_server_entries_are_read_with_their_defaults_and_variables() {
        let (servers, problems) = read(
            "mcp_servers:\n  github:\n    command: npx\n    args: [\"-y\", \"@modelcontextprotocol/server-github\"]\n    env:\n      GITHUB_PERSONAL_ACCESS_TOKEN: \"${GH_TOKEN}\"\n    supports_parallel_tool_calls: true\n    tools:\n      exclude: [delete_repo]\n  remote:\n    url: https://mcp.example.com/mcp\n    headers:\n      Authorization: \"Bearer ${env:REMOTE_KEY}\"\n    timeout: 120\n    connect_timeout: 10\n    lazy: true\n  off:\n    command: nothing\n    enabled: false\n",
            "GH_TOKEN=ghp_secret\nREMOTE_KEY=sk-remote\n",
        );
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(servers.len(), 2);
        let github = &servers[0];
        assert_eq!(github.name, "github");
        assert_eq!(
            github.transport,
            McpTransport::Stdio {
                command: "npx".into(),
                args: vec!["-y".into(), "@modelcontextprotocol/server-github".into()],
                env: vec![("GITHUB_PERSONAL_ACCESS_TOKEN".into(), "ghp_secret".into())],
            }
        );
        assert!(github.parallel && !github.lazy);
        assert_eq!(github.exclude, ["delete_repo"]);
        assert_eq!(github.timeout, Duration::from_secs(300));
        assert_eq!(github.connect_timeout, Duration::from_secs(60));
        let remote = &servers[1];
        assert_eq!(
            remote.transport,
            McpTransport::Http {
                url: "https://mcp.example.com/mcp".into(),
                headers: vec![("Authorization".into(), "Bearer sk-remote".into())],
            }
        );
        assert_eq!(remote.timeout, Duration::from_secs(120));
        assert!(remote.lazy);
        assert_eq!(remote.secret_values(), ["Bearer sk-remote"]);
    }

    #[test]
    fn a_server_without_a_way_to_reach_it_is_an_error_on_its_key() {
        let (servers, problems) = read(
            "mcp_servers:\n  nothing: {}\n  both:\n    command: x\n    url: https://a.example\n  badurl:\n    url: ftp://a\n",
            "",
        );
        assert!(servers.is_empty());
        let mut keys: Vec<&str> = problems.iter().map(|p| p.key.as_str()).collect();
        keys.sort();
        assert_eq!(
            keys,
            [
                "mcp_servers.badurl.url",
                "mcp_servers.both",
                "mcp_servers.nothing"
            ]
        );
    }
}
