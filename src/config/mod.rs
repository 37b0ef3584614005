//! Configuration: `$HERMES_HOME/config.yaml` plus `$HERMES_HOME/.env`, read with the key and
//! variable names of the Python Hermes gateway so an existing setup works unchanged.
//!
//! Loading never stops at the first problem: it collects every [`Problem`] with the key path
//! (or variable name) it concerns, so `check-config` can explain all of them at once.

mod channels;
pub mod edit;
mod env;
mod known_keys;
mod mcp;
mod models;
mod pg_target;
mod sections;
mod serving;
mod source;
mod types;
mod yaml;

pub use channels::{ChannelOverride, ChannelOverrides};
pub use env::{EnvSource, EnvVars, is_truthy};
pub use mcp::{McpServerConfig, McpTransport};
pub mod catalog;
mod voice;
pub use models::{
    CompressionConfig, Dialect, ModelSpec, PROVIDERS, ProviderInfo, ProviderKeys, TitleConfig,
    dialect_for, is_loopback_url, provider, resolve as resolve_model,
};
pub use pg_target::{PgTarget, is_postgres_url};
pub use serving::{Holdings, Serving, Taken, bot_fingerprint};
pub use types::*;
use voice::{read_stt, read_tts};

use std::path::{Path, PathBuf};
use std::time::Duration;

use yaml::YamlReader;

/// The outcome of reading the configuration.
pub struct Loaded {
    /// `None` when there are errors.
    pub config: Option<Config>,
    pub problems: Vec<Problem>,
    /// Keys in `config.yaml` (and variables in `.env`) that hermes-gateway does not use.
    pub unused: Vec<String>,
    /// The values of the secrets the configuration holds (keys and tokens from the
    /// environment, `.env` and `config.yaml`), for [`crate::secrets::scrub`] to blank, even
    /// when the configuration has errors.
    pub secret_values: Vec<Secret>,
    /// `store.*` alone, for the management commands, which need no model or platform:
    /// `None` when the store's own settings have errors (never SQLite in place of a
    /// PostgreSQL URL that did not read).
    pub store: Option<StoreConfig>,
}

impl Loaded {
    /// Have [`crate::secrets::scrub`] blank the configuration's secrets from here on.
    pub fn remember_secrets(&self) {
        crate::secrets::remember(self.secret_values.iter().map(|s| s.expose().to_owned()));
    }

    pub fn errors(&self) -> impl Iterator<Item = &Problem> {
        self.problems
            .iter()
            .filter(|p| p.severity == Severity::Error)
    }
}

/// `logging.level` in `home`'s `config.yaml`, if it says one: the log filter when neither
/// `HERMES_LOG` nor `RUST_LOG` is set (read before the rest, since logging starts first).
pub fn logging_level(home: &Path) -> Option<String> {
    read_key(home, "logging.level")
}

/// One key of `home`'s `config.yaml` as written there (not defaulted), if it says one.
pub fn read_key(home: &Path, key: &str) -> Option<String> {
    let text = std::fs::read_to_string(home.join("config.yaml")).ok()?;
    let mut y = YamlReader::parse(&text).ok()?;
    y.string(key, &mut Vec::new())
        .filter(|l| !l.trim().is_empty())
}

/// The default home: `$HERMES_HOME`, else `~/.hermes`.
pub fn default_home() -> PathBuf {
    if let Some(home) = std::env::var_os("HERMES_HOME").filter(|h| !h.is_empty()) {
        return PathBuf::from(home);
    }
    let user_home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("."));
    user_home.join(".hermes")
}

/// Read `config.yaml` and `.env` from `home`, with the real process environment.
pub fn load(home: &Path) -> Loaded {
    let read = |name: &str| -> Result<String, Problem> {
        match std::fs::read_to_string(home.join(name)) {
            Ok(text) => Ok(text),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(String::new()),
            Err(e) => Err(Problem::error(
                home.join(name).display().to_string(),
                format!("cannot read: {e}"),
            )),
        }
    };
    let mut problems = Vec::new();
    let yaml_text = read("config.yaml").unwrap_or_else(|p| {
        problems.push(p);
        String::new()
    });
    let dotenv_text = read(".env").unwrap_or_else(|p| {
        problems.push(p);
        String::new()
    });
    let env = EnvVars::new(crate::secrets::environment(), &dotenv_text);
    let mut loaded = load_from(home, &yaml_text, &env);
    if !home.join("config.yaml").exists() {
        // The model is the first thing missing without the file: say what is missing.
        for p in &mut loaded.problems {
            if p.key == "model.default" {
                p.message = format!(
                    "{} does not exist, so no model is set; create it (the README's example) or set HERMES_MODEL",
                    home.join("config.yaml").display()
                );
            }
        }
    }
    problems.append(&mut loaded.problems);
    loaded.problems = problems;
    if loaded.errors().next().is_some() {
        loaded.config = None;
    }
    loaded
}

/// One platform's settings as `yaml_text` and `env` make them, for `setup`, which checks a
/// token against its platform before saving it: the settings, or what is wrong.
pub fn read_platform(
    home: &Path,
    yaml_text: &str,
    env: &EnvVars,
    platform: hermes_adapter::Platform,
) -> Result<std::sync::Arc<dyn hermes_adapter::PlatformSettings>, String> {
    let mut problems = Vec::new();
    let mut y =
        YamlReader::parse(yaml_text).map_err(|e| format!("config.yaml is not valid YAML: {e}"))?;
    let (platforms, _) = sections::read_platforms(&mut y, env, home, &mut problems);
    // Its own errors: against its variables (`TELEGRAM_…`) or its section.
    let section = platform.config_section();
    let (prefix, key) = (
        format!("{}_", section.to_ascii_uppercase()),
        format!("platforms.{section}"),
    );
    let errors: Vec<String> = problems
        .iter()
        .filter(|p| p.severity == Severity::Error)
        .filter(|p| p.key.starts_with(&prefix) || p.key.starts_with(&key))
        .map(|p| p.to_string())
        .collect();
    match platforms.into_iter().find(|p| p.platform() == platform) {
        Some(settings) if errors.is_empty() => Ok(settings),
        _ if !errors.is_empty() => Err(errors.join("; ")),
        _ => Err(format!("{platform} is not enabled by these settings")),
    }
}

/// The variables hermes-gateway reads (for the "not used" report on `.env`).
const KNOWN_VARIABLES: &[&str] = &[
    "GATEWAY_ALLOWED_USERS",
    "GATEWAY_ALLOW_ALL_USERS",
    "OPENAI_API_KEY",
    "OPENROUTER_API_KEY",
    "HERMES_MODEL",
    "HERMES_MAX_ITERATIONS",
    "MESSAGING_CWD",
    "HERMES_BACKGROUND_NOTIFICATIONS",
    "TERMINAL_CWD",
    "TAVILY_API_KEY",
    "TAVILY_BASE_URL",
    "EXA_API_KEY",
    "EXA_BASE_URL",
    "FIRECRAWL_API_KEY",
    "FIRECRAWL_API_URL",
    "HERMES_STORE_URL",
    "HERMES_STORE_PASSWORD",
    "HERMES_NODE_ID",
    "GATEWAY_MULTIPLEX_PROFILES",
];

/// Read the configuration from text (testable without files): each section in turn,
/// then the platforms, then what was left unread and what must never be shown.
pub fn load_from(home: &Path, yaml_text: &str, env: &EnvVars) -> Loaded {
    let mut problems = Vec::new();
    let mut y = match YamlReader::parse(yaml_text) {
        Ok(y) => y,
        Err(e) => {
            problems.push(Problem::error(
                "config.yaml",
                format!("not valid YAML: {e}"),
            ));
            YamlReader::parse("").expect("empty YAML parses")
        }
    };
    let p = &mut problems;
    let models = sections::read_models(&mut y, env, p);
    let agent = sections::read_agent(&mut y, env, models.main.as_ref(), p);
    let busy_mode = sections::read_busy_mode(&mut y, p);
    let terminal = read_terminal(&mut y, env, home, p);
    let access = sections::read_access(&mut y, env, p);
    let sessions = sections::read_sessions(&mut y, p);
    let delivery = sections::read_delivery(&mut y, p);
    let before = p.len();
    let store = sections::read_store(&mut y, env, home, p);
    let store_read = p[before..]
        .iter()
        .all(|problem| problem.severity != Severity::Error);
    let http = read_http(&mut y, env, p);
    // Read before anything else runs (see `logging_level`); named here so it is not listed
    // as unused.
    let _ = y.string("logging.level", p);
    let (platforms, platform_vars) = sections::read_platforms(&mut y, env, home, p);
    let approvals = sections::read_approvals(&mut y, p);
    let processes = sections::read_processes(&mut y, env, p);
    let mcp_servers = mcp::read_mcp_servers(&mut y, env, p);
    let code_execution = read_code_execution(&mut y, p);
    let delegation = read_delegation(&mut y, p);
    let fix_permissions = y.boolean("security.fix_permissions", p).unwrap_or(true);
    let multiplex_profiles = sections::read_multiplex(&mut y, env, p);
    sections::check_allowlists(&access, &platforms, p);
    let provider = models.main.as_ref().map(|m| m.provider.as_str());
    sections::check_placeholders(env, &platform_vars, &platforms, provider, p);

    let unused = sections::unused(&y, env, &platform_vars, p);
    let secret_env_names = sections::secret_env_names(env, &platform_vars, &models.key_env_names);
    let secret_values = env
        .secret_values()
        .map(str::to_owned)
        .chain(y.secret_strings())
        .chain(
            models
                .fallbacks
                .iter()
                .filter_map(|f| f.api_key.as_ref().map(|k| k.expose().to_owned())),
        )
        .chain(mcp_servers.iter().flat_map(McpServerConfig::secret_values))
        .chain(store.postgres.iter().filter_map(|t| t.password()))
        .filter(|v| !v.trim().is_empty())
        .map(Secret::new)
        .collect();

    let has_errors = problems.iter().any(|p| p.severity == Severity::Error);
    let store_alone = store_read.then(|| store.clone());
    let config = match (models.main, models.compression, has_errors) {
        (Some(model), Some(compression), false) => Some(Config {
            home: home.to_path_buf(),
            vision: models.vision.unwrap_or_else(|| VisionConfig {
                model: model.clone(),
                configured: false,
            }),
            compression,
            model,
            fallbacks: models.fallbacks,
            provider_keys: models.provider_keys,
            agent,
            busy_mode,
            terminal,
            access,
            sessions,
            delivery,
            store,
            http,
            platforms,
            approvals,
            processes,
            code_execution,
            delegation,
            mcp_servers,
            secret_env_names,
            fix_permissions,
            multiplex_profiles,
            serving: Serving::default(),
        }),
        _ => None,
    };
    Loaded {
        config,
        problems,
        unused,
        secret_values,
        store: store_alone,
    }
}

/// The toolsets Hermes names (and the presets that mean all of them).
const TOOLSETS: &[&str] = &[
    "terminal",
    "file",
    "todo",
    "memory",
    "session_search",
    "cronjob",
    "messaging",
    "skills",
    "clarify",
    "web",
    "code_execution",
    "delegation",
];

/// `toolsets`, `platform_toolsets.*`, `agent.disabled_toolsets`.
fn read_toolsets(y: &mut YamlReader, problems: &mut Vec<Problem>) -> ToolsetsConfig {
    let check = |key: &str, names: &[String], problems: &mut Vec<Problem>| {
        for name in names {
            if !TOOLSETS.contains(&name.as_str()) && name != "all" && !name.starts_with("hermes-") {
                problems.push(Problem::warning(
                    key,
                    format!(
                        "{name:?} is not a toolset here (known: {}, or a hermes-* preset); it is ignored",
                        TOOLSETS.join(", ")
                    ),
                ));
            }
        }
    };
    let default = y.list("toolsets", problems);
    if let Some(names) = &default {
        check("toolsets", names, problems);
    }
    let mut per_platform = std::collections::BTreeMap::new();
    let platforms: Vec<String> = match y.get("platform_toolsets") {
        Some(serde_json::Value::Object(map)) => map.keys().cloned().collect(),
        _ => Vec::new(),
    };
    for platform in platforms {
        let key = format!("platform_toolsets.{platform}");
        if let Some(names) = y.list(&key, problems) {
            check(&key, &names, problems);
            per_platform.insert(platform, names);
        }
    }
    let disabled = y
        .list("agent.disabled_toolsets", problems)
        .unwrap_or_default();
    ToolsetsConfig {
        default,
        per_platform,
        disabled,
    }
}

/// `streaming.*`: off unless `streaming.enabled` (and `transport` is not `off`).
fn read_streaming(y: &mut YamlReader, problems: &mut Vec<Problem>) -> Option<StreamingConfig> {
    let enabled = y.boolean("streaming.enabled", problems).unwrap_or(false);
    let transport = y.string("streaming.transport", problems);
    let edit_interval = match y.string("streaming.edit_interval", problems) {
        None => Duration::from_secs(1),
        Some(text) => match text.trim().parse::<f64>() {
            Ok(secs) if secs.is_finite() && secs > 0.0 => {
                Duration::from_secs_f64(secs.clamp(0.1, 60.0))
            }
            _ => {
                problems.push(Problem::error(
                    "streaming.edit_interval",
                    format!("expected seconds, found {text:?}"),
                ));
                Duration::from_secs(1)
            }
        },
    };
    let buffer_threshold = y
        .number("streaming.buffer_threshold", problems)
        .unwrap_or(24) as usize;
    let cursor = y
        .string("streaming.cursor", problems)
        .unwrap_or_else(|| " ▉".into());
    match transport.as_deref() {
        None | Some("auto") | Some("edit") => {}
        Some("off") => return None,
        Some(other) => {
            problems.push(Problem::error(
                "streaming.transport",
                format!("{other:?} is not a transport; use auto, edit or off"),
            ));
            return None;
        }
    }
    enabled.then_some(StreamingConfig {
        edit_interval,
        buffer_threshold,
        cursor,
    })
}

/// A path as an absolute one: `~` is the home, a relative path starts where the daemon
/// runs, and links are resolved where it exists (the approval checks compare real paths:
/// a relative working directory would hide the gateway's secrets from them).
pub(crate) fn absolute(text: &str) -> PathBuf {
    let text = text.trim();
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let path = match (text.strip_prefix('~'), &home) {
        (Some(rest), Some(home)) if rest.is_empty() || rest.starts_with('/') => {
            home.join(rest.trim_start_matches('/'))
        }
        _ => PathBuf::from(text),
    };
    let path = if path.is_relative() {
        std::env::current_dir()
            .unwrap_or_else(|_| PathBuf::from("/"))
            .join(path)
    } else {
        path
    };
    std::fs::canonicalize(&path).unwrap_or(path)
}

fn read_terminal(
    y: &mut YamlReader,
    env: &EnvVars,
    home: &Path,
    problems: &mut Vec<Problem>,
) -> TerminalConfig {
    let configured = y
        .string("terminal.cwd", problems)
        .or_else(|| env.value("MESSAGING_CWD"))
        .or_else(|| env.value("TERMINAL_CWD"))
        .map(|text| absolute(&text))
        .or_else(|| std::env::var_os("HOME").map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from("/"));
    // The gateway's home is hidden from commands: one that was their working directory
    // (the system service's) gives them a workspace inside it instead.
    let resolved_home = std::fs::canonicalize(home).unwrap_or_else(|_| home.to_path_buf());
    let cwd_was_home = configured == resolved_home;
    let cwd = crate::home::working_directory(&resolved_home, configured);
    let sandbox = match y.string("terminal.sandbox", problems).as_deref() {
        None | Some("auto") => SandboxMode::Auto,
        Some("required") => SandboxMode::Required,
        // YAML 1.1 reads a bare `off` as the boolean false.
        Some("off") | Some("false") => SandboxMode::Off,
        Some(other) => {
            problems.push(Problem::error(
                "terminal.sandbox",
                format!("{other:?} is not a sandbox mode; use auto, required or off"),
            ));
            SandboxMode::Auto
        }
    };
    let sandbox_expose: Vec<PathBuf> = y
        .list("terminal.sandbox_expose", problems)
        .unwrap_or_default()
        .iter()
        .map(|path| absolute(path))
        .collect();
    for path in &sandbox_expose {
        if path.starts_with(&resolved_home) || resolved_home.starts_with(path) {
            problems.push(Problem::error(
                "terminal.sandbox_expose",
                format!(
                    "{} would hand the gateway's own home to the agent's commands; it is not exposed",
                    path.display()
                ),
            ));
        }
    }
    TerminalConfig {
        cwd,
        cwd_was_home,
        timeout: Duration::from_secs(y.number("terminal.timeout", problems).unwrap_or(180).max(1)),
        max_output_chars: y
            .number("terminal.max_output_chars", problems)
            .unwrap_or(50_000)
            .max(1_000) as usize,
        pass_env: y.list("terminal.pass_env", problems).unwrap_or_default(),
        confine_writes: y
            .boolean("terminal.confine_writes", problems)
            .unwrap_or(false),
        allowed_roots: y
            .list("terminal.allowed_roots", problems)
            .unwrap_or_default()
            .iter()
            .map(|root| absolute(root))
            .collect(),
        sandbox,
        network: y.boolean("terminal.network", problems).unwrap_or(true),
        sandbox_expose: sandbox_expose
            .into_iter()
            .filter(|p| !p.starts_with(&resolved_home) && !resolved_home.starts_with(p))
            .collect(),
    }
}

/// The web tools' service, as Hermes picks it: `web.backend` when set, else the first
/// service whose key is there (Tavily, Exa, Firecrawl); `None` hides the web tools.
fn read_web(y: &mut YamlReader, env: &EnvVars, problems: &mut Vec<Problem>) -> Option<WebConfig> {
    let key = |name: &str| {
        env.value(name)
            .filter(|k| !k.trim().is_empty())
            .map(Secret::new)
    };
    let root = |name: &str, default: &str, problems: &mut Vec<Problem>| match env
        .value(name)
        .filter(|u| !u.trim().is_empty())
    {
        Some(url) => match validate_http_url(&url) {
            Ok(()) => url.trim_end_matches('/').to_owned(),
            Err(why) => {
                problems.push(Problem::error(name, why));
                default.to_owned()
            }
        },
        None => default.to_owned(),
    };
    let chosen = match y.string("web.backend", problems).as_deref() {
        Some("tavily") => Some(WebBackend::Tavily),
        Some("exa") => Some(WebBackend::Exa),
        Some("firecrawl") => Some(WebBackend::Firecrawl),
        Some(other) => {
            problems.push(Problem::warning(
                "web.backend",
                format!("{other:?} is not a web backend hermes-gateway speaks (tavily, exa, firecrawl); the first key found is used"),
            ));
            None
        }
        None => None,
    };
    let backend = chosen.or_else(|| {
        if key("TAVILY_API_KEY").is_some() {
            Some(WebBackend::Tavily)
        } else if key("EXA_API_KEY").is_some() {
            Some(WebBackend::Exa)
        } else if key("FIRECRAWL_API_KEY").is_some() || env.value("FIRECRAWL_API_URL").is_some() {
            Some(WebBackend::Firecrawl)
        } else {
            None
        }
    })?;
    let (key, base_url) = match backend {
        WebBackend::Tavily => (
            key("TAVILY_API_KEY"),
            root("TAVILY_BASE_URL", "https://api.tavily.com", problems),
        ),
        WebBackend::Exa => (
            key("EXA_API_KEY"),
            root("EXA_BASE_URL", "https://api.exa.ai", problems),
        ),
        WebBackend::Firecrawl => (
            key("FIRECRAWL_API_KEY"),
            root("FIRECRAWL_API_URL", "https://api.firecrawl.dev", problems),
        ),
    };
    let self_hosted = backend == WebBackend::Firecrawl && env.value("FIRECRAWL_API_URL").is_some();
    if key.is_none() && !self_hosted {
        problems.push(Problem::warning(
            "web.backend",
            format!(
                "{} has no key ({}_API_KEY): the web tools are not offered",
                backend.as_str(),
                backend.as_str().to_ascii_uppercase()
            ),
        ));
        return None;
    }
    Some(WebConfig {
        backend,
        base_url,
        key,
    })
}

/// `code_execution.*`: where scripts run, how long and how many tool calls they may make.
fn read_code_execution(y: &mut YamlReader, problems: &mut Vec<Problem>) -> CodeExecutionConfig {
    let mode = match y.string("code_execution.mode", problems).as_deref() {
        None | Some("project") => CodeMode::Project,
        Some("strict") => CodeMode::Strict,
        Some(other) => {
            // Hermes runs an unknown mode as `project`; say so.
            problems.push(Problem::warning(
                "code_execution.mode",
                format!("{other:?} is not a mode (project or strict); using project"),
            ));
            CodeMode::Project
        }
    };
    CodeExecutionConfig {
        mode,
        timeout: Duration::from_secs(
            y.number("code_execution.timeout", problems)
                .unwrap_or(300)
                .max(1),
        ),
        max_tool_calls: y
            .number("code_execution.max_tool_calls", problems)
            .unwrap_or(50)
            .clamp(1, 10_000) as u32,
    }
}

/// `delegation.*`: how many sub-agents, how deep, how long and how much they report.
fn read_delegation(y: &mut YamlReader, problems: &mut Vec<Problem>) -> DelegationConfig {
    DelegationConfig {
        max_concurrent_children: y
            .number("delegation.max_concurrent_children", problems)
            .unwrap_or(3)
            .clamp(1, 16) as usize,
        max_iterations: y
            .number("delegation.max_iterations", problems)
            .unwrap_or(50)
            .clamp(1, 1_000) as u32,
        max_spawn_depth: y
            .number("delegation.max_spawn_depth", problems)
            .unwrap_or(1)
            .min(3) as u32,
        max_summary_chars: y
            .number("delegation.max_summary_chars", problems)
            .unwrap_or(24_000)
            .max(200) as usize,
        child_timeout: y
            .number("delegation.child_timeout_seconds", problems)
            .filter(|s| *s > 0)
            .map(|s| Duration::from_secs(s.max(30))),
        background_after: Duration::from_secs(
            y.number("delegation.background_after_seconds", problems)
                .unwrap_or(30),
        ),
        model: {
            let model = y
                .string("delegation.model", problems)
                .filter(|m| !m.trim().is_empty());
            let provider = y
                .string("delegation.provider", problems)
                .filter(|p| !p.trim().is_empty());
            match (provider, model) {
                (Some(provider), Some(model)) => Some(format!("{provider}:{model}")),
                (None, model) => model,
                (Some(provider), None) => {
                    problems.push(Problem::warning(
                        "delegation.provider",
                        format!("{provider:?} without delegation.model: sub-agents use the delegating turn's model"),
                    ));
                    None
                }
            }
        },
        orchestrator_enabled: y
            .boolean("delegation.orchestrator_enabled", problems)
            .unwrap_or(true),
    }
}

/// `http.listen` (`host:port`, or `off`); Hermes' `WHATSAPP_CLOUD_WEBHOOK_HOST` and
/// `WHATSAPP_CLOUD_WEBHOOK_PORT` name the same address and win over the file.
fn read_http(y: &mut YamlReader, env: &EnvVars, problems: &mut Vec<Problem>) -> HttpConfig {
    let token = env
        .value("HERMES_HTTP_TOKEN")
        .or_else(|| y.string("http.token", problems))
        .filter(|t| !t.trim().is_empty())
        .map(Secret::new);
    let configured = y.string("http.listen", problems);
    let off = configured
        .as_deref()
        .is_some_and(|v| matches!(v.trim(), "off" | "false" | ""));
    let (mut text, mut key) = (
        configured.unwrap_or_else(|| DEFAULT_HTTP_LISTEN.to_owned()),
        "http.listen",
    );
    let host = env.value("WHATSAPP_CLOUD_WEBHOOK_HOST");
    let port = env.value("WHATSAPP_CLOUD_WEBHOOK_PORT");
    if host.is_some() || port.is_some() {
        let (default_host, default_port) = text.rsplit_once(':').unwrap_or(("127.0.0.1", "8091"));
        text = format!(
            "{}:{}",
            host.as_deref().unwrap_or(default_host),
            port.as_deref().unwrap_or(default_port)
        );
        key = if port.is_some() {
            "WHATSAPP_CLOUD_WEBHOOK_PORT"
        } else {
            "WHATSAPP_CLOUD_WEBHOOK_HOST"
        };
    } else if off {
        return HttpConfig {
            listen: None,
            listen_key: key,
            token,
        };
    }
    let listen = match text.parse::<std::net::SocketAddr>() {
        Ok(addr) => Some(addr),
        Err(_) => {
            problems.push(Problem::error(
                key,
                format!("{text:?} is not an address to listen on (expected host:port, e.g. {DEFAULT_HTTP_LISTEN})"),
            ));
            None
        }
    };
    if let Some(addr) = listen
        && !addr.ip().is_loopback()
        && token.is_none()
    {
        problems.push(Problem::warning(
            key,
            format!("{addr} is reachable from other machines, and /status and /metrics answer anyone there: set HERMES_HTTP_TOKEN to require a bearer token"),
        ));
    }
    HttpConfig {
        listen,
        listen_key: key,
        token,
    }
}

pub(crate) fn validate_http_url(url: &str) -> Result<(), String> {
    let parsed =
        reqwest::Url::parse(url).map_err(|e| format!("{url:?} is not a valid URL: {e}"))?;
    if !matches!(parsed.scheme(), "http" | "https") || parsed.host_str().is_none() {
        return Err(format!(
            "{url:?} must be an http:// or https:// URL with a host"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests;
