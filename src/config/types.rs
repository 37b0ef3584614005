//! The effective configuration, as the rest of the daemon reads it: one type per section,
//! with the key names it comes from. Loading and validation live in `config/mod.rs`.

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use hermes_adapter::{Platform, PlatformSettings};

/// A secret value (token, API key): never printed in full.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Self {
        Secret(value.into())
    }

    /// The secret itself, for the one place that must send it.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// A masked form for logs and `check-config`: first three characters and the length.
    pub fn masked(&self) -> String {
        hermes_adapter::mask(&self.0)
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.masked())
    }
}

/// One thing wrong (or worth knowing) about the configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The key path (`model.base_url`) or variable name (`TELEGRAM_ALLOWED_USERS`).
    pub key: String,
    pub message: String,
    pub severity: Severity,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Severity {
    Error,
    Warning,
}

impl Problem {
    pub fn error(key: impl Into<String>, message: impl Into<String>) -> Self {
        Problem {
            key: key.into(),
            message: message.into(),
            severity: Severity::Error,
        }
    }

    pub fn warning(key: impl Into<String>, message: impl Into<String>) -> Self {
        Problem {
            key: key.into(),
            message: message.into(),
            severity: Severity::Warning,
        }
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let level = match self.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
        };
        write!(f, "{level}: {}: {}", self.key, self.message)
    }
}

/// What happens to a message that arrives while the agent is working in that session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BusyMode {
    /// Cancel the running turn and answer the earlier and the new text together.
    Interrupt,
    /// Answer the new text in its own turn once the running one ends.
    Queue,
    /// Hand the new text to the running turn at its next tool boundary.
    Steer,
}

impl BusyMode {
    pub fn as_str(self) -> &'static str {
        match self {
            BusyMode::Interrupt => "interrupt",
            BusyMode::Queue => "queue",
            BusyMode::Steer => "steer",
        }
    }
}

/// The LLM provider.
#[derive(Debug, Clone)]
pub struct ModelConfig {
    /// The provider's name (see [`super::PROVIDERS`]).
    pub provider: String,
    pub model: String,
    /// The API root, ending before `/chat/completions`.
    pub base_url: String,
    pub api_key: Option<Secret>,
    /// How it is spoken to (Anthropic's Messages or OpenAI's chat completions).
    pub dialect: super::Dialect,
    pub context_length: usize,
    /// The output cap asked for (`model.max_tokens`; Anthropic needs one, so it has a
    /// per-model default there).
    pub max_tokens: Option<u32>,
    /// `agent.reasoning_effort`: thinking where the model has it.
    pub reasoning_effort: Option<String>,
    /// Attempts per LLM call on 429/5xx/connection errors (the first try included).
    pub max_attempts: u32,
    /// Longest silence allowed inside a streaming response before it counts as failed.
    pub stream_idle_timeout: Duration,
    /// Calls to this model in flight at once (`model.max_concurrent_calls`); more wait
    /// their turn, holding nothing but their place (see `llm::LlmClient`).
    pub max_concurrent_calls: usize,
}

impl ModelConfig {
    /// Whether a model is chosen: none is while a first run waits for the web chat's setup
    /// form (every message is then answered with how to choose one).
    pub fn is_chosen(&self) -> bool {
        !self.model.is_empty()
    }
}

/// The auxiliary vision model (`auxiliary.vision.*`): describes images for a model that
/// cannot see them. Unset parts come from the main model.
#[derive(Debug, Clone)]
pub struct VisionConfig {
    pub model: ModelConfig,
    /// Set in `config.yaml` (a model or an endpoint of its own), so worth asking when the
    /// main model has just refused an image.
    pub configured: bool,
}

/// Which toolsets the agent is offered (Hermes' `toolsets`, `platform_toolsets`,
/// `agent.disabled_toolsets`). A name is a toolset (`terminal`, `file`, `todo`, `memory`,
/// `session_search`…) or a preset that means all of them (`hermes-cli`, `hermes-gateway`,
/// `hermes-<platform>`, `all`).
#[derive(Debug, Clone, Default)]
pub struct ToolsetsConfig {
    /// `toolsets`; `None`: all.
    pub default: Option<Vec<String>>,
    /// `platform_toolsets.<platform>`, in place of `toolsets` there.
    pub per_platform: std::collections::BTreeMap<String, Vec<String>>,
    /// `agent.disabled_toolsets`: never offered.
    pub disabled: Vec<String>,
}

impl ToolsetsConfig {
    /// Whether toolset `toolset` is offered on `platform`.
    pub fn offers(&self, platform: &str, toolset: &str) -> bool {
        if self.disabled.iter().any(|d| d == toolset) {
            return false;
        }
        let chosen = self.per_platform.get(platform).or(self.default.as_ref());
        match chosen {
            None => true,
            Some(names) => names
                .iter()
                .any(|n| n == toolset || n == "all" || n.starts_with("hermes-")),
        }
    }
}

/// The agent loop.
#[derive(Debug, Clone)]
pub struct AgentConfig {
    /// Tool-calling iterations allowed per turn (`agent.max_turns`).
    pub max_turns: u32,
    /// Extra system prompt text (`agent.system_prompt`).
    pub system_prompt: Option<String>,
    /// Per channel a model and a system prompt (`<platform>.channel_overrides`).
    pub channel_overrides: super::ChannelOverrides,
    /// Which toolsets are offered where.
    pub toolsets: ToolsetsConfig,
    /// The web search service (`web.backend`, else the first key found).
    pub web: Option<WebConfig>,
    /// How long `clarify` waits for the person (`agent.clarify_timeout`, 3600 s).
    pub clarify_timeout: Duration,
    /// How long a turn waits for a model provider (and its fallbacks) that stopped
    /// answering before it gives up (`agent.provider_outage_wait`, 900 s).
    pub provider_outage_wait: Duration,
    /// The shortest interval of a recurring scheduled job, seconds (`cron.min_interval`).
    pub cron_min_interval: i64,
    /// `timezone` (IANA, as in Hermes): scheduled jobs' wall clock; the host's when unset.
    pub timezone: Option<String>,
    /// `agent.personalities`: name → prompt text (`/personality`).
    pub personalities: std::collections::BTreeMap<String, String>,
    /// How images reach the model (`agent.image_input_mode`).
    pub image_input: ImageInputMode,
    /// Speech-to-text for voice messages (`stt.*`).
    pub stt: SttConfig,
    /// Text-to-speech for voice replies and `text_to_speech` (`tts.*`).
    pub tts: TtsConfig,
    /// Tool calls shown in the chat as they start (`display.tool_progress`, per platform).
    pub tool_progress: ProgressDefaults,
    /// Answers shown as they are written (`streaming.*`); `None` when off.
    pub streaming: Option<StreamingConfig>,
    /// How much each memory file holds (`memory.memory_char_limit`, `memory.user_char_limit`).
    pub memory_limits: MemoryLimits,
    /// Sessions titled automatically (`auxiliary.title_generation.*`).
    pub titles: super::TitleConfig,
}

/// `streaming.*` (Hermes names): the answer appears as one message edited in place.
#[derive(Debug, Clone, PartialEq)]
pub struct StreamingConfig {
    /// Time between edits (`streaming.edit_interval`, default 1 s; the chat's budget may
    /// space them further).
    pub edit_interval: Duration,
    /// Characters written before the message first appears (`streaming.buffer_threshold`).
    pub buffer_threshold: usize,
    /// Shown at the end while the answer is being written (`streaming.cursor`).
    pub cursor: String,
}

/// Which tool calls each platform's chats see unless a chat chose (`/verbose`): Hermes'
/// order, `display.platforms.<platform>.tool_progress`, then `display.tool_progress`, then
/// the platform's own default (Telegram, Slack and WhatsApp off: a progress message there
/// is one more message; Discord and the rest all).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProgressDefaults {
    pub global: Option<ToolProgress>,
    pub per_platform: Vec<(Platform, ToolProgress)>,
}

impl ProgressDefaults {
    pub fn for_platform(&self, platform: Platform) -> ToolProgress {
        if let Some((_, mode)) = self.per_platform.iter().find(|(p, _)| *p == platform) {
            return *mode;
        }
        self.global.unwrap_or(match platform {
            Platform::Telegram | Platform::Slack | Platform::WhatsApp => ToolProgress::Off,
            _ => ToolProgress::All,
        })
    }
}

/// `display.tool_progress` (Hermes semantics): one message per turn, edited as its tools
/// start; `new` adds a line only when the tool changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolProgress {
    Off,
    New,
    All,
}

/// Speech-to-text (`stt.*`, Hermes names). The providers built in all speak OpenAI's
/// `/audio/transcriptions`: `openai`, `groq`, and `local` (a Whisper-compatible server on
/// this machine, such as faster-whisper-server).
#[derive(Debug, Clone)]
pub struct SttConfig {
    /// Usable: enabled, a provider built in, and its key. Otherwise why not, for the person.
    pub openai: Result<SttOpenAi, String>,
    /// Echo the transcript to the person (`stt.echo_transcripts`, default true).
    pub echo_transcripts: bool,
}

/// An OpenAI-compatible `/audio/transcriptions` endpoint.
#[derive(Debug, Clone)]
pub struct SttOpenAi {
    /// The provider's name (`openai`, `groq`, `local`).
    pub provider: String,
    pub base_url: String,
    /// `None`: a local server that takes none.
    pub api_key: Option<Secret>,
    pub model: String,
    /// The spoken language when known (`stt.local.language`, `stt.language`).
    pub language: Option<String>,
}

/// Text-to-speech (`tts.*`, Hermes names). Built in: `openai`, any OpenAI-compatible
/// `/audio/speech` endpoint.
#[derive(Debug, Clone)]
pub struct TtsConfig {
    /// Usable: the `openai` provider and its key. Otherwise why not, for the person.
    pub speech: Result<TtsOpenAi, String>,
}

/// An OpenAI-compatible `/audio/speech` endpoint (`tts.openai.*`).
#[derive(Debug, Clone)]
pub struct TtsOpenAi {
    pub base_url: String,
    pub api_key: Secret,
    /// `tts.openai.model` (gpt-4o-mini-tts).
    pub model: String,
    /// `tts.openai.voice` (alloy).
    pub voice: String,
    /// `tts.openai.speed` (or `tts.speed`), sent when not 1.
    pub speed: Option<f64>,
    /// The most text spoken at once (`tts.openai.max_text_length`, 4096).
    pub max_text_length: usize,
}

/// The `terminal` tool.
#[derive(Debug, Clone)]
pub struct TerminalConfig {
    pub cwd: PathBuf,
    pub timeout: Duration,
    /// Output kept per command (head and tail), in characters.
    pub max_output_chars: usize,
    /// Environment variables passed to commands even though they look like secrets.
    pub pass_env: Vec<String>,
    /// `terminal.confine_writes`: a file tool's write outside `cwd` and `allowed_roots`
    /// waits for approval.
    pub confine_writes: bool,
    /// `terminal.allowed_roots`: more directories writes may go to when confined.
    pub allowed_roots: Vec<PathBuf>,
    /// The working directory used to be the gateway's home (now `workspace` in it).
    pub cwd_was_home: bool,
    /// `terminal.sandbox`: how commands are confined.
    pub sandbox: SandboxMode,
    /// `terminal.network`: commands may use the network (default true).
    pub network: bool,
    /// `terminal.sandbox_expose`: places the confinement would hide that the operator
    /// hands to commands on purpose (a Docker socket, the ssh-agent).
    pub sandbox_expose: Vec<PathBuf>,
}

/// `terminal.sandbox`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SandboxMode {
    /// Confine where the kernel allows; otherwise run unconfined and warn loudly (default).
    Auto,
    /// Refuse to run commands that cannot be confined.
    Required,
    /// Never confine (said at start-up).
    Off,
}

impl SandboxMode {
    pub fn as_str(self) -> &'static str {
        match self {
            SandboxMode::Auto => "auto",
            SandboxMode::Required => "required",
            SandboxMode::Off => "off",
        }
    }
}

/// Who may talk to the agent.
#[derive(Debug, Clone, Default)]
pub struct AccessConfig {
    /// `GATEWAY_ALLOWED_USERS`.
    pub gateway_allowed: Vec<String>,
    /// `GATEWAY_ALLOW_ALL_USERS`.
    pub gateway_allow_all: bool,
    /// Each platform's admin and user tiers (Hermes' slash access); a platform not here
    /// has none.
    pub tiers: std::collections::BTreeMap<hermes_adapter::Platform, Tiers>,
}

/// Who is an admin, and what the others may run, in direct chats and in groups
/// (`platforms.<p>.allow_admin_from`, `user_allowed_commands`, `group_allow_admin_from`,
/// `group_user_allowed_commands`, also under `platforms.<p>.extra`).
#[derive(Debug, Clone, Default)]
pub struct Tiers {
    pub direct: TierScope,
    pub group: TierScope,
}

/// One scope's tiers: on when at least one admin is listed (Hermes' rule: with no admin
/// listed every allowed person is an admin).
#[derive(Debug, Clone, Default)]
pub struct TierScope {
    pub admins: Vec<String>,
    /// The commands a non-admin may run besides `/help` and `/whoami`; `None`: every
    /// command that is not the admins' (see `router::commands`).
    pub user_commands: Option<Vec<String>>,
}

impl TierScope {
    pub fn enabled(&self) -> bool {
        !self.admins.is_empty()
    }
}

/// How conversations are split into sessions.
#[derive(Debug, Clone)]
pub struct SessionConfig {
    /// Each member of a group has their own session (`group_sessions_per_user`, default on).
    pub group_sessions_per_user: bool,
    /// Each member of a thread has their own session (`thread_sessions_per_user`, default off).
    pub thread_sessions_per_user: bool,
}

impl SessionConfig {
    /// Whether each person in `chat` has a session of their own there (a direct chat is
    /// one person's anyway, so `false`: its session is the chat's).
    pub fn per_person(&self, chat: &hermes_adapter::ChatRef) -> bool {
        match (chat.kind, &chat.thread_id) {
            (hermes_adapter::ChatKind::Direct, _) => false,
            (_, Some(_)) => self.thread_sessions_per_user,
            (_, None) => self.group_sessions_per_user,
        }
    }

    /// Whether the conversation in `chat` is shared by everyone in it (a group or thread
    /// without sessions per person), so a command on it changes it for the others too.
    pub fn shared(&self, chat: &hermes_adapter::ChatRef) -> bool {
        chat.kind != hermes_adapter::ChatKind::Direct && !self.per_person(chat)
    }
}

/// Whether dangerous commands need a person's OK.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApprovalMode {
    /// Ask in the chat (default).
    Manual,
    /// Never ask (logged as a warning at startup).
    Off,
}

/// Dangerous-command approvals (`approvals.*`).
#[derive(Debug, Clone)]
pub struct ApprovalConfig {
    pub mode: ApprovalMode,
    /// How long a prompt waits before the command is denied.
    pub timeout: Duration,
    /// `approvals.deny`: globs (fnmatch, case-insensitive) of commands refused outright,
    /// never prompted, even with `approvals.mode: off`.
    pub deny: Vec<String>,
    /// `command_allowlist` (top level, as in Hermes): standing approvals, each a class (its
    /// key or description) or a command (exact, or a glob) that needs no prompt.
    pub allowlist: Vec<String>,
}

/// A web search and page-reading service Hermes knows (its key names).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WebBackend {
    /// `TAVILY_API_KEY` (`TAVILY_BASE_URL`).
    Tavily,
    /// `EXA_API_KEY` (`EXA_BASE_URL`).
    Exa,
    /// `FIRECRAWL_API_KEY`, and `FIRECRAWL_API_URL` for a self-hosted one.
    Firecrawl,
}

impl WebBackend {
    pub fn as_str(self) -> &'static str {
        match self {
            WebBackend::Tavily => "tavily",
            WebBackend::Exa => "exa",
            WebBackend::Firecrawl => "firecrawl",
        }
    }
}

/// The web tools' service.
#[derive(Debug, Clone)]
pub struct WebConfig {
    pub backend: WebBackend,
    /// The service's root (its public one unless set).
    pub base_url: String,
    /// `None` only for a self-hosted Firecrawl without a key.
    pub key: Option<Secret>,
}

/// Where an `execute_code` script runs (`code_execution.mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CodeMode {
    /// In the terminal's working directory, with the active virtual environment's python.
    Project,
    /// In the run's private directory, with the host's python.
    Strict,
}

/// `code_execution.*` (Hermes names and defaults).
#[derive(Debug, Clone)]
pub struct CodeExecutionConfig {
    pub mode: CodeMode,
    /// `code_execution.timeout` (300 s): then the script's group is stopped.
    pub timeout: Duration,
    /// `code_execution.max_tool_calls` (50) per script.
    pub max_tool_calls: u32,
}

/// `delegation.*` (Hermes names and defaults).
#[derive(Debug, Clone)]
pub struct DelegationConfig {
    /// Tasks in one batch, run together (`delegation.max_concurrent_children`, 3).
    pub max_concurrent_children: usize,
    /// Tool steps of each child (`delegation.max_iterations`, 50).
    pub max_iterations: u32,
    /// How deep children may delegate again (`delegation.max_spawn_depth`, 1: not at all).
    pub max_spawn_depth: u32,
    /// The longest summary a child hands back (`delegation.max_summary_chars`, 24,000).
    pub max_summary_chars: usize,
    /// `delegation.child_timeout_seconds` (0: none; at least 30 s otherwise).
    pub child_timeout: Option<Duration>,
    /// A delegation still running after this long goes on in the background and reports
    /// back into the conversation (`delegation.background_after_seconds`, 30).
    pub background_after: Duration,
    /// The model every sub-agent uses (`delegation.provider` and `delegation.model`, as
    /// `/model` names one); `None`: the model the delegating turn answers with.
    pub model: Option<String>,
    /// Whether a child may be an orchestrator that delegates again
    /// (`delegation.orchestrator_enabled`, default true; within `max_spawn_depth`).
    pub orchestrator_enabled: bool,
}

/// Background processes (`processes.*`, `display.background_process_notifications`).
#[derive(Debug, Clone)]
pub struct ProcessConfig {
    /// `/stop` also kills the session's background processes (otherwise only `/stop all`).
    pub stop_kills_background: bool,
    /// What watchers post in the chat.
    pub notifications: Notifications,
}

/// Send budget overrides: per chat (`delivery.rate_per_second`, `delivery.burst`) and for a
/// whole bot (`delivery.bot_rate_per_second`, `delivery.bot_burst`).
#[derive(Debug, Clone)]
pub struct DeliveryConfig {
    pub rate_per_second: Option<f64>,
    pub burst: Option<u32>,
    pub bot_rate_per_second: Option<f64>,
    pub bot_burst: Option<u32>,
    /// How long a message that cannot be sent yet (the platform or the network is down,
    /// rate limits, refused credentials) is retried before it is marked failed.
    pub max_age: Duration,
    /// How long handled inbox rows, sent outbox rows and other ended bookkeeping are kept
    /// (`delivery.retention`, seconds).
    pub retention: Duration,
    /// Sends to one platform in flight at once (`delivery.max_concurrent_sends`); more
    /// wait for a place, holding no connection.
    pub max_concurrent_sends: usize,
}

/// `store.*`: where the gateway keeps its state, and how the nodes sharing it agree.
#[derive(Debug, Clone)]
pub struct StoreConfig {
    /// `store.url` / `HERMES_STORE_URL` (`postgres://…`): the shared PostgreSQL store;
    /// `None`: SQLite at `$HERMES_HOME/gateway.db`.
    pub postgres: Option<super::PgTarget>,
    /// `store.node_id` / `HERMES_NODE_ID`: this daemon's name among the nodes of one store
    /// (default: the host's name).
    pub node_id: String,
    /// `store.lease_ttl` (seconds): how long a lease lasts unless renewed.
    pub lease_ttl: Duration,
    /// `store.lease_renew` (seconds): how often the holder renews it.
    pub lease_renew: Duration,
}

/// The default `store.lease_ttl`: a failover waits at most about this long.
pub const DEFAULT_LEASE_TTL: Duration = Duration::from_secs(15);
/// The default `store.lease_renew`.
pub const DEFAULT_LEASE_RENEW: Duration = Duration::from_secs(5);

/// The default `delivery.retention`: a week, as long as a platform may redeliver an event.
pub const DEFAULT_RETENTION: Duration = Duration::from_secs(7 * 24 * 3600);
/// The shortest `delivery.retention`: an hour, so a reply and its report stay together.
pub const MIN_RETENTION: Duration = Duration::from_secs(3600);

/// The default `delivery.max_concurrent_sends`: far above what a platform's bot budget
/// lets through over the internet (Telegram 30 a second, each send ~0.1 s), few enough
/// that a burst of replies shares a handful of connections instead of opening one each.
pub const DEFAULT_CONCURRENT_SENDS: usize = 32;

/// The default `delivery.max_age`: a day.
pub const DEFAULT_DELIVERY_MAX_AGE: Duration = Duration::from_secs(24 * 3600);

impl Default for DeliveryConfig {
    fn default() -> Self {
        DeliveryConfig {
            rate_per_second: None,
            burst: None,
            bot_rate_per_second: None,
            bot_burst: None,
            max_age: DEFAULT_DELIVERY_MAX_AGE,
            retention: DEFAULT_RETENTION,
            max_concurrent_sends: DEFAULT_CONCURRENT_SENDS,
        }
    }
}

/// The daemon's HTTP server (webhooks, `/healthz`, `/readyz`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpConfig {
    /// Where it listens; `None` = no server (`http.listen: off`).
    pub listen: Option<std::net::SocketAddr>,
    /// The key that set the address, for a clear error when it cannot be bound.
    pub listen_key: &'static str,
    /// `HERMES_HTTP_TOKEN` / `http.token`: when set, `/status` and `/metrics` want it as a
    /// bearer token.
    pub token: Option<Secret>,
}

/// The default address: local only; a reverse proxy publishes webhooks.
pub const DEFAULT_HTTP_LISTEN: &str = "127.0.0.1:8091";

/// The whole effective configuration.
#[derive(Debug, Clone)]
pub struct Config {
    pub home: PathBuf,
    pub model: ModelConfig,
    /// Tried in order when the main model fails a turn (`fallback_providers`).
    pub fallbacks: Vec<ModelConfig>,
    /// The keys of the known providers, for `/model provider:model`.
    pub provider_keys: super::ProviderKeys,
    /// `compression.*`.
    pub compression: super::CompressionConfig,
    /// The model that describes images (`auxiliary.vision.*`).
    pub vision: VisionConfig,
    pub agent: AgentConfig,
    pub busy_mode: BusyMode,
    pub terminal: TerminalConfig,
    pub access: AccessConfig,
    pub sessions: SessionConfig,
    pub delivery: DeliveryConfig,
    pub store: StoreConfig,
    pub http: HttpConfig,
    /// The enabled platforms, each read by its adapter crate (see `crate::platforms`).
    pub platforms: Vec<Arc<dyn PlatformSettings>>,
    pub approvals: ApprovalConfig,
    pub processes: ProcessConfig,
    pub code_execution: CodeExecutionConfig,
    pub delegation: DelegationConfig,
    /// `mcp_servers`: the enabled MCP servers.
    pub mcp_servers: Vec<super::McpServerConfig>,
    /// Names of every secret value, so tools can scrub them from child environments.
    pub secret_env_names: Vec<String>,
    /// `security.fix_permissions` (default on): at start, a home or secret file of the
    /// daemon's user that others can read is made private (0700/0600), and the operator
    /// told; off, only told.
    pub fix_permissions: bool,
    /// `gateway.multiplex_profiles` (or `GATEWAY_MULTIPLEX_PROFILES`): this home's daemon
    /// also serves every profile under `profiles/`, each with its own configuration.
    pub multiplex_profiles: bool,
    /// What this configuration is in the process (set when profiles share it).
    pub serving: super::Serving,
}

impl Config {
    pub fn database_path(&self) -> PathBuf {
        self.home.join("gateway.db")
    }

    /// Whether any platform is configured.
    /// The one person this bot is for, when the configuration names exactly one and lets
    /// nobody else in by allowlist (pairing may add others, who are then not this person):
    /// their memories keep Hermes' layout.
    pub fn sole_person(&self) -> Option<(Platform, String)> {
        if self.access.gateway_allow_all {
            return None;
        }
        let mut people = std::collections::BTreeSet::new();
        for settings in &self.platforms {
            let access = settings.access();
            if access.allow_all {
                return None;
            }
            let platform = settings.platform();
            for user in access.allowed.iter().chain(&self.access.gateway_allowed) {
                people.insert((platform, user.clone()));
            }
        }
        let mut people = people.into_iter();
        match (people.next(), people.next()) {
            (Some(one), None) => Some(one),
            _ => None,
        }
    }

    pub fn has_platform(&self) -> bool {
        !self.platforms.is_empty()
    }

    /// An enabled platform's settings.
    pub fn platform(&self, platform: Platform) -> Option<&dyn PlatformSettings> {
        self.platforms
            .iter()
            .find(|p| p.platform() == platform)
            .map(|p| p.as_ref())
    }
}

/// What watchers post in the chat (`display.background_process_notifications`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Notifications {
    /// Progress (with `check_interval`) and completion with the last few lines (default).
    Concise,
    /// Progress and completion with more output.
    All,
    /// Completion only.
    Result,
    /// Completion only, and only when the command failed.
    Error,
    /// Nothing (wake-up turns still happen).
    Off,
}

impl Notifications {
    pub fn parse(value: &str) -> Option<Notifications> {
        Some(match value {
            "concise" => Notifications::Concise,
            "all" => Notifications::All,
            "result" => Notifications::Result,
            "error" => Notifications::Error,
            "off" | "false" => Notifications::Off,
            _ => return None,
        })
    }
}

/// How images reach the model (Hermes `agent.image_input_mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImageInputMode {
    /// As image parts; when the provider refuses them, they are described by the auxiliary
    /// vision model if one is set up, else the turn goes on without them and says so.
    Auto,
    /// As image parts, always.
    Native,
    /// Described by an auxiliary vision model first (`auxiliary.vision.*`).
    Text,
}

impl ImageInputMode {
    pub fn parse(value: &str) -> Option<ImageInputMode> {
        match value.trim().to_ascii_lowercase().as_str() {
            "auto" => Some(ImageInputMode::Auto),
            "native" => Some(ImageInputMode::Native),
            "text" => Some(ImageInputMode::Text),
            _ => None,
        }
    }
}

/// How many characters each memory file may hold (`memory.memory_char_limit`,
/// `memory.user_char_limit`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryLimits {
    pub memory: usize,
    pub user: usize,
}

impl Default for MemoryLimits {
    /// Hermes' defaults.
    fn default() -> Self {
        MemoryLimits {
            memory: 2_200,
            user: 1_375,
        }
    }
}

impl MemoryLimits {
    /// The limit of the memory file `index` (0: the agent's notes, 1: about the person).
    pub fn of(&self, index: usize) -> usize {
        if index == 0 { self.memory } else { self.user }
    }
}
