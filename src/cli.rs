//! The command line: `run`, `check-config`, `setup` (see `setup`), `web-url`,
//! `pairing list|approve|revoke`, `approvals list|revoke`, and `service …` (see
//! `crate::service`).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::config::{self, Loaded, Severity};
use crate::secrets;
use crate::store::{PairingError, Store};

pub use crate::reload::EXIT_CONFIG;

#[derive(Parser)]
#[command(
    name = "hermes-gateway",
    version,
    about = "Chat with an AI agent on Telegram, Discord, Slack and WhatsApp",
    after_help = "Exit status of the management commands (pairing, approvals, cron): 0 done; 1 the database could not be read or written; 2 nothing by that name, or an unknown platform. 78: the configuration has errors (run, check-config)."
)]
pub struct Cli {
    /// Hermes home with config.yaml and .env (default: $HERMES_HOME or ~/.hermes)
    #[arg(long, global = true, value_name = "DIR")]
    home: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the gateway in the foreground
    Run,
    /// Explain the effective configuration (secrets masked) and every problem in it
    CheckConfig {
        /// Also ask the model's endpoint and each platform whether they take the
        /// configured keys and tokens (needs the network)
        #[arg(long)]
        online: bool,
    },
    /// Manage DM pairing of people who are not on an allowlist
    Pairing {
        #[command(subcommand)]
        action: PairingAction,
    },
    /// Manage the standing ("always allow") approvals of dangerous-command classes
    Approvals {
        #[command(subcommand)]
        action: ApprovalsAction,
    },
    /// Scheduled jobs: list, run, pause, resume, remove
    Cron {
        #[command(subcommand)]
        action: crate::cron::cli::CronAction,
    },
    /// Run it as a systemd service: install, uninstall, start, stop, restart, status, logs
    Service {
        #[command(subcommand)]
        action: crate::service::ServiceAction,
    },
    /// Choose the model and set up Telegram, Discord, Slack and WhatsApp, each token checked
    /// against its platform before it is saved
    Setup(setup::SetupArgs),
    /// What the store holds: open conversations, queued messages; with --cluster, the
    /// nodes sharing it and the leases they hold
    Status {
        /// Also list the nodes of the shared store, their leases and their age
        #[arg(long)]
        cluster: bool,
    },
    /// The store: copy this home's SQLite database into a shared PostgreSQL store
    Store {
        #[command(subcommand)]
        action: store::StoreAction,
    },
    /// Print the address that logs a browser into the web chat (it carries the login token)
    WebUrl {
        /// Make a new login token first: every browser logged in with the old one is out
        #[arg(long)]
        rotate: bool,
    },
}

#[derive(Subcommand)]
enum ApprovalsAction {
    /// Pattern classes that run without asking
    List,
    /// Ask again for a pattern class: `approvals revoke rm-recursive`
    Revoke {
        /// The pattern class, as `approvals list` shows it (e.g. rm-recursive)
        pattern_key: String,
    },
}

#[derive(Subcommand)]
enum PairingAction {
    /// Pending codes and paired people
    List,
    /// Approve a pairing code: `pairing approve telegram ABCD2345`
    Approve {
        /// telegram, discord, slack or whatsapp
        platform: String,
        /// The code the bot gave the person
        code: String,
    },
    /// Remove a paired person
    Revoke {
        /// telegram, discord, slack or whatsapp
        platform: String,
        /// Their user id, as `pairing list` shows it
        user_id: String,
    },
}

/// The most threads the runtime runs blocking work on (file work, memory snapshots, the
/// approval reader, name lookups) at once; more waits its turn. Tokio's default, 512, let
/// a burst of new conversations start a thread each (step 18: 60–150 threads after 1,000
/// chats at once, each with a malloc arena), so the thread count followed the load. None of
/// this work waits on other blocking work, so a bound cannot deadlock; a long file search
/// holds one of these while it runs.
const BLOCKING_THREADS: usize = 16;

pub fn main() -> ExitCode {
    let cli = Cli::parse();
    if !matches!(cli.command, Command::Run | Command::CheckConfig { .. }) {
        // A command whose output is cut short (`cron list | head -1`) ends quietly, as Unix
        // tools do, instead of panicking on the closed pipe. Not the daemon (a socket a
        // peer closed must not end it), nor check-config, which talks to MCP servers over
        // pipes: its own output ends the same way through `scrubbed_println!`.
        default_sigpipe();
    }
    let given_home = cli.home.clone();
    // Absolute, so what is protected is recognised whatever the daemon's working directory.
    let home = cli
        .home
        .clone()
        .map(|h| config::absolute(&h.to_string_lossy()))
        .unwrap_or_else(config::default_home);
    init_logging(config::logging_level(&home));
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .max_blocking_threads(BLOCKING_THREADS)
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("hermes-gateway: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match cli.command {
        Command::Run => {
            let code = runtime.block_on(run(home));
            // `run` has drained what matters (turns recorded, lanes stopped, within its
            // deadline); the idle tasks left (thousands of session actors after a busy day)
            // go with the process instead of being torn down one by one.
            runtime.shutdown_background();
            code
        }
        Command::CheckConfig { online } => check_config(home, online, &runtime),
        Command::Pairing { action } => runtime.block_on(pairing(home, action)),
        Command::Approvals { action } => runtime.block_on(approvals(home, action)),
        Command::Cron { action } => runtime.block_on(async {
            match open_store(&home).await {
                Ok(store) => {
                    let timezone = config::read_key(&home, "timezone");
                    crate::cron::cli::command(store, action, timezone).await
                }
                Err(code) => code,
            }
        }),
        // Its own defaults for the home (a system service lives in /var/lib).
        Command::Service { action } => crate::service::run(action, given_home),
        Command::Store { action } => runtime.block_on(store::run(&home, action)),
        Command::Status { cluster } => runtime.block_on(async {
            match open_store(&home).await {
                Ok(opened) => store::status(opened, cluster).await,
                Err(code) => code,
            }
        }),
        Command::WebUrl { rotate } => web_url(&home, rotate),
        Command::Setup(args) => setup::run(home, args, &runtime),
    }
}

/// `web-url`: the web chat's login address, on stdout only (a person asked for it).
fn web_url(home: &std::path::Path, rotate: bool) -> ExitCode {
    let loaded = config::load(home);
    let address = loaded.config.as_ref().and_then(web_address);
    let Some(address) = address else {
        report(&loaded);
        eprintln!(
            "hermes-gateway: the web chat is not enabled in {}/config.yaml (platforms:\n  web:\n    enabled: true)",
            home.display()
        );
        return ExitCode::from(EXIT_NOT_FOUND);
    };
    match crate::platforms::web_login(home, &address, rotate) {
        Some(Ok((login, _))) => {
            println!("{login}");
            if rotate {
                eprintln!(
                    "A new login token: a running gateway takes it when reloaded (SIGHUP) or restarted (`hermes-gateway service restart`); browsers logged in before must then open this address again."
                );
            }
            ExitCode::SUCCESS
        }
        Some(Err(e)) => {
            eprintln!("hermes-gateway: the web chat's login token: {e}");
            ExitCode::FAILURE
        }
        None => {
            eprintln!("hermes-gateway: this build has no web chat (cargo feature `web`)");
            ExitCode::from(EXIT_NOT_FOUND)
        }
    }
}

/// Where the web chat is served, when it is on.
fn web_address(config: &config::Config) -> Option<String> {
    config
        .platform(hermes_adapter::Platform::Web)
        .and_then(|web| web.address())
}

/// Where to log into the web chat, for the person who started the daemon at a terminal:
/// on stderr only then, never into the journal or a log file.
fn say_web_url(login: &str) {
    if std::io::IsTerminal::is_terminal(&std::io::stderr()) {
        eprintln!("\n  Web chat: {login}\n");
    }
}

/// Logging, filtered by `HERMES_LOG`, `RUST_LOG`, else `logging.level` (`configured`),
/// else `info`.
fn init_logging(configured: Option<String>) {
    use tracing_subscriber::EnvFilter;
    let wanted = std::env::var("HERMES_LOG")
        .or_else(|_| std::env::var("RUST_LOG"))
        .ok()
        .or(configured)
        .unwrap_or_else(|| "info".to_owned());
    // serenity and slack-morphism log whole payloads (message text, interaction tokens,
    // response URLs) in their info spans and debug lines: only their warnings, unless the
    // operator asks for them by name.
    let mut wanted = wanted;
    for noisy in ["serenity", "slack_morphism"] {
        if !wanted.contains(noisy) {
            wanted.push_str(&format!(",{noisy}=warn"));
        }
    }
    let filter = EnvFilter::try_new(&wanted)
        .unwrap_or_else(|_| EnvFilter::new("info,serenity=warn,slack_morphism=warn"));
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    // Under systemd, structured entries to the journal; else lines on stderr (colours only
    // for a person at a terminal, never into a log file).
    let journal = crate::journal::wanted()
        .then(crate::journal::JournalLayer::new)
        .flatten();
    match journal {
        Some(journal) => {
            let _ = tracing_subscriber::registry()
                .with(filter)
                .with(journal)
                .try_init();
        }
        None => {
            let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
            let _ = tracing_subscriber::fmt()
                .with_env_filter(filter)
                .with_ansi(ansi)
                .with_writer(ScrubbedStderr)
                .try_init();
        }
    }
    // A panic message can quote anything (a payload, a URL): it goes through the log, and
    // so through the scrubber, instead of straight to stderr.
    std::panic::set_hook(Box::new(|info| {
        tracing::error!(panic = %info, "a task panicked");
    }));
}

/// Log output: each formatted line passes [`secrets::scrub`] on its way to stderr.
struct ScrubbedStderr;

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for ScrubbedStderr {
    type Writer = ScrubbedLine;

    fn make_writer(&'a self) -> ScrubbedLine {
        ScrubbedLine(Vec::new())
    }
}

/// One log event, written out (scrubbed) when the formatter is done with it.
struct ScrubbedLine(Vec<u8>);

impl std::io::Write for ScrubbedLine {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for ScrubbedLine {
    fn drop(&mut self) {
        let text = String::from_utf8_lossy(&self.0);
        let _ = std::io::Write::write_all(
            &mut std::io::stderr().lock(),
            secrets::scrub(&text).as_bytes(),
        );
    }
}

fn report(loaded: &Loaded) {
    loaded.remember_secrets();
    for problem in &loaded.problems {
        eprintln!("{}", secrets::scrub(&problem.to_string()));
    }
}

async fn run(home: PathBuf) -> ExitCode {
    match config::edit::first_run(&home) {
        Ok(true) => eprintln!(
            "hermes-gateway: first run: made {} with a starter config.yaml (the web chat on, no model yet)",
            home.display()
        ),
        Ok(false) => {}
        Err(e) => {
            eprintln!(
                "hermes-gateway: first run: cannot make {}: {e}",
                home.display()
            );
            return ExitCode::from(EXIT_CONFIG);
        }
    }
    let mut loaded = config::load(&home);
    // The web chat's token is made before the daemon reads its settings (the daemon owns
    // the home's files); a token made now means the settings are read again.
    let mut login = None;
    if let Some(address) = loaded.config.as_ref().and_then(web_address) {
        match crate::platforms::web_login(&home, &address, false) {
            Some(Ok((url, made))) => {
                login = Some(url);
                if made {
                    loaded = config::load(&home);
                }
            }
            Some(Err(e)) => {
                eprintln!("hermes-gateway: cannot make the web chat's login token: {e}");
                return ExitCode::from(EXIT_CONFIG);
            }
            None => {}
        }
    }
    report(&loaded);
    let Some(config) = loaded.config else {
        eprintln!(
            "hermes-gateway: the configuration in {} has errors (see above); run `hermes-gateway check-config`",
            home.display()
        );
        return ExitCode::from(EXIT_CONFIG);
    };
    if config.multiplex_profiles {
        if let Some(login) = &login {
            say_web_url(login);
        }
        return crate::profiles::serve(crate::profiles::gather(&home, config)).await;
    }
    if !config.has_platform() {
        eprintln!(
            "hermes-gateway: no chat platform is configured.\n\
             Turn the web chat on (platforms:\n  web:\n    enabled: true in config.yaml), run `hermes-gateway setup`, \
             or set TELEGRAM_BOT_TOKEN (from @BotFather) in {}/.env, and TELEGRAM_ALLOWED_USERS (your numeric user id) \
             or TELEGRAM_ALLOW_ALL_USERS=true.",
            home.display()
        );
        return ExitCode::from(EXIT_CONFIG);
    }
    if let Some(login) = &login {
        say_web_url(login);
    }
    crate::reload::run(home, config).await
}

/// `println!`, with the line passed through [`secrets::scrub`] first: check-config's output
/// is pasted into bug reports, so every line of it is scrubbed.
macro_rules! scrubbed_println {
    ($($arg:tt)*) => {
        print_line(&secrets::scrub(&format!($($arg)*)))
    };
}

mod online;
mod setup;
mod store;

/// One line of output; when the reader has gone (`check-config | head -1`), the process
/// ends by SIGPIPE as Unix tools do, instead of panicking.
fn print_line(line: &str) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    if let Err(e) = writeln!(out, "{line}")
        && e.kind() == std::io::ErrorKind::BrokenPipe
    {
        default_sigpipe();
        let _ = nix::sys::signal::raise(nix::sys::signal::Signal::SIGPIPE);
        std::process::exit(141);
    }
}

/// SIGPIPE back to its default action (the process ends), which Rust's runtime ignores.
fn default_sigpipe() {
    // SAFETY: setting the default action installs no handler of ours.
    let _ = unsafe {
        nix::sys::signal::signal(
            nix::sys::signal::Signal::SIGPIPE,
            nix::sys::signal::SigHandler::SigDfl,
        )
    };
}

/// `check-config`: explain the effective configuration (secrets masked) and every problem
/// in it (with `online`, also what the model's endpoint and the platforms say of the keys);
/// fails with [`EXIT_CONFIG`] when there is an error.
fn check_config(home: PathBuf, online: bool, runtime: &tokio::runtime::Runtime) -> ExitCode {
    let loaded = config::load(&home);
    loaded.remember_secrets();
    let mut problems = loaded.problems.clone();
    scrubbed_println!("hermes-gateway configuration from {}", home.display());
    if let Some(c) = &loaded.config {
        print_effective_settings(c, runtime, &mut problems);
        if online {
            runtime.block_on(online::check(c, &mut problems));
        }
    }
    if loaded.config.as_ref().is_some_and(|c| c.multiplex_profiles) {
        print_profiles(&home);
    }
    let unchosen = loaded.config.as_ref().is_some_and(|c| !c.model.is_chosen());
    if unchosen || (loaded.config.is_none() && problems.iter().any(|p| p.key == "model.default")) {
        runtime.block_on(offer_local_servers());
    }
    print_unused(&loaded.unused);
    print_problems(&problems);
    if problems.iter().any(|p| p.severity == Severity::Error) {
        ExitCode::from(EXIT_CONFIG)
    } else {
        scrubbed_println!("\nOK");
        ExitCode::SUCCESS
    }
}

/// With `multiplex_profiles`: each profile this home's daemon would serve, and whether
/// it can (each is checked in full with `check-config --home <its directory>`).
fn print_profiles(home: &std::path::Path) {
    scrubbed_println!("\nProfiles served beside this home (multiplex_profiles):");
    let found = crate::profiles::discover(home);
    if found.is_empty() {
        scrubbed_println!(
            "  none yet: a directory under {}/profiles/ is one",
            home.display()
        );
    }
    for (name, dir) in found {
        let loaded = config::load(&dir);
        loaded.remember_secrets();
        let errors = loaded.errors().count();
        let state = match &loaded.config {
            None => format!(
                "not started: {errors} error(s); run `hermes-gateway check-config --home {}`",
                dir.display()
            ),
            Some(c) if !c.has_platform() => "not started: it enables no chat platform".into(),
            Some(c) => {
                let platforms: Vec<String> = c
                    .platforms
                    .iter()
                    .map(|p| p.platform().to_string())
                    .collect();
                format!("serves {}", platforms.join(", "))
            }
        };
        scrubbed_println!("  {name} ({}): {state}", dir.display());
    }
}

/// The "Effective settings" part of check-config; problems found on the way (the sandbox
/// cannot be had) are added to `problems`.
fn print_effective_settings(
    c: &config::Config,
    runtime: &tokio::runtime::Runtime,
    problems: &mut Vec<config::Problem>,
) {
    scrubbed_println!("\nEffective settings:");
    print_model_settings(c);
    let confinement = print_agent_and_terminal(c, runtime, problems);
    print_platforms(c, problems);
    if !c.mcp_servers.is_empty() {
        print_mcp_servers(c, runtime, &confinement, problems);
    }
}

/// The model, its fallbacks and compression.
fn print_model_settings(c: &config::Config) {
    scrubbed_println!("  model.provider = {}", c.model.provider);
    scrubbed_println!("  model.default = {}", c.model.model);
    scrubbed_println!("  model.base_url = {}", c.model.base_url);
    scrubbed_println!(
        "  model.api_key = {}",
        c.model
            .api_key
            .as_ref()
            .map_or("(none)".into(), |k| k.masked())
    );
    scrubbed_println!(
        "  model dialect = {}",
        match c.model.dialect {
            crate::config::Dialect::OpenAi => "OpenAI chat completions",
            crate::config::Dialect::Anthropic => "Anthropic Messages",
        }
    );
    scrubbed_println!("  model.context_length = {}", c.model.context_length);
    if let Some(effort) = &c.model.reasoning_effort {
        scrubbed_println!("  agent.reasoning_effort = {effort}");
    }
    for (i, f) in c.fallbacks.iter().enumerate() {
        scrubbed_println!(
            "  fallback {} = {} ({}) at {}, key {}",
            i + 1,
            f.model,
            f.provider,
            f.base_url,
            f.api_key.as_ref().map_or("(none)".into(), |k| k.masked())
        );
    }
    scrubbed_println!(
        "  compression = {}",
        if c.compression.enabled {
            format!(
                "on at {:.0}% of the context, summaries by {}",
                c.compression.threshold * 100.0,
                c.compression.model.model
            )
        } else {
            "off".into()
        }
    );
}

/// The agent's and the terminal's settings, with the sandbox tried for real; its warning,
/// if any, goes into `problems`. Returns the confinement, for the MCP servers' check.
fn print_agent_and_terminal(
    c: &config::Config,
    runtime: &tokio::runtime::Runtime,
    problems: &mut Vec<config::Problem>,
) -> std::sync::Arc<crate::confine::Confinement> {
    scrubbed_println!("  agent.max_turns = {}", c.agent.max_turns);
    scrubbed_println!("  display.busy_input_mode = {}", c.busy_mode.as_str());
    scrubbed_println!("  terminal.cwd = {}", c.terminal.cwd.display());
    scrubbed_println!("  terminal.timeout = {}s", c.terminal.timeout.as_secs());
    // Tried for real: a jail is made and a command run in it.
    let confinement = std::sync::Arc::new(crate::confine::Confinement::new(
        &c.terminal,
        &c.home,
        &c.serving.other_homes,
    ));
    let level = runtime.block_on(confinement.level()).clone();
    scrubbed_println!(
        "  terminal.sandbox = {} ({})",
        c.terminal.sandbox.as_str(),
        level.describe(c.terminal.network)
    );
    if let Some(warning) = runtime.block_on(confinement.warning()) {
        problems.push(match c.terminal.sandbox {
            crate::config::SandboxMode::Required => {
                crate::config::Problem::error("terminal.sandbox", warning)
            }
            _ => crate::config::Problem::warning("terminal.sandbox", warning),
        });
    }
    confinement
}

/// The database, the HTTP listener, each chat platform and who may use it.
fn print_platforms(c: &config::Config, problems: &mut Vec<config::Problem>) {
    match &c.store.postgres {
        Some(target) => scrubbed_println!(
            "  store = {} (PostgreSQL; node {}, leases {:.1} s renewed every {:.1} s)",
            target.shown(),
            c.store.node_id,
            c.store.lease_ttl.as_secs_f64(),
            c.store.lease_renew.as_secs_f64()
        ),
        None => scrubbed_println!("  database = {}", c.database_path().display()),
    }
    match c.http.listen {
        Some(addr) => {
            scrubbed_println!(
                "  http.listen = {addr} (webhooks, /healthz, /readyz, /status, /metrics)"
            )
        }
        None => scrubbed_println!("  http.listen = off"),
    }
    for platform in hermes_adapter::Platform::ALL {
        match c.platform(platform) {
            Some(settings) => {
                scrubbed_println!("  platforms.{platform}: enabled");
                for (key, value) in settings.describe() {
                    scrubbed_println!("    {key} = {value}");
                }
                let access = settings.access();
                scrubbed_println!(
                    "    allowed users = {:?}{}",
                    access.allowed,
                    if access.allow_all {
                        " (everyone is allowed)"
                    } else {
                        ""
                    }
                );
            }
            None => scrubbed_println!("  platforms.{platform}: off"),
        }
    }
    let a = &c.access;
    scrubbed_println!(
        "  allowed users on every platform: {:?}, allow all: {}",
        a.gateway_allowed,
        a.gateway_allow_all
    );
    if !c.has_platform() {
        problems.push(config::Problem::error(
            "platforms",
            "no chat platform is enabled, so `run` would exit (78): set TELEGRAM_BOT_TOKEN (or another platform's token) in .env",
        ));
    }
}

/// Each MCP server is started, asked for its tools, and stopped again, so a server that
/// cannot start is found here rather than in the first chat.
fn print_mcp_servers(
    c: &config::Config,
    runtime: &tokio::runtime::Runtime,
    confinement: &std::sync::Arc<crate::confine::Confinement>,
    problems: &mut Vec<config::Problem>,
) {
    scrubbed_println!("\nMCP servers (started to check them):");
    let mcp = crate::mcp::Mcp::new(c.mcp_servers.clone(), confinement.clone());
    let health = runtime.block_on(async {
        mcp.start_all_and_wait().await;
        let health = mcp.health();
        mcp.shutdown().await;
        health
    });
    for (name, state) in health {
        let described = crate::mcp::describe(&state);
        scrubbed_println!("  mcp_servers.{name}: {described}");
        if !matches!(state, crate::mcp::Health::Ready(_)) {
            // `run` would go on without its tools: degraded, which the operator must hear.
            problems.push(config::Problem::error(
                format!("mcp_servers.{name}"),
                format!("{described}; `run` would go on without its tools"),
            ));
        }
    }
}

/// No model is named: the model servers running on this machine, each with the lines that
/// would use it (offered, never chosen: a server on a loopback port is not proof of a model).
async fn offer_local_servers() {
    let found = crate::llm::local::find().await;
    if found.is_empty() {
        scrubbed_println!(
            "\nNo model server answers on this machine (Ollama, llama.cpp, LM Studio, vLLM); see \"Choose your model\" in the README."
        );
        return;
    }
    scrubbed_println!("\nModel servers on this machine (put one in config.yaml to use it):");
    for server in found {
        let model = server.models.first().map_or("MODEL-NAME", String::as_str);
        scrubbed_println!(
            "  {} at {} serves {}:\n    model:\n      provider: {}\n      default: {model}\n      base_url: {}",
            server.name,
            server.base_url,
            if server.models.is_empty() {
                "no model yet".to_owned()
            } else {
                server.models.join(", ")
            },
            server.provider,
            server.base_url
        );
    }
}

/// The keys hermes-gateway accepts but does not use.
fn print_unused(unused: &[String]) {
    if !unused.is_empty() {
        scrubbed_println!("\nNot used by hermes-gateway (accepted and ignored):");
        for key in unused {
            scrubbed_println!("  {key}");
        }
    }
}

/// Every problem found, errors and warnings alike.
fn print_problems(problems: &[config::Problem]) {
    if !problems.is_empty() {
        scrubbed_println!("\nProblems:");
        for p in problems {
            scrubbed_println!("  {p}");
        }
    }
}

/// Open the store of `home` (SQLite there, or the PostgreSQL its settings name) for a
/// management command.
async fn open_store(home: &std::path::Path) -> Result<Store, ExitCode> {
    let home = home.to_path_buf();
    let opened = tokio::task::spawn_blocking(move || {
        let loaded = config::load(&home);
        let Some(settings) = loaded.store else {
            for problem in loaded.problems.iter().filter(|p| {
                p.severity == config::Severity::Error
                    && (p.key.starts_with("store.") || p.key.starts_with("HERMES_STORE"))
            }) {
                eprintln!("hermes-gateway: {problem}");
            }
            return Err(crate::store::StoreError::Invalid(
                "the store's settings have errors".into(),
            ));
        };
        Store::open_at(&home, settings.postgres)
    });
    match opened.await {
        Ok(Ok(store)) => Ok(store),
        Ok(Err(e)) => {
            eprintln!("hermes-gateway: {e}");
            Err(ExitCode::FAILURE)
        }
        Err(e) => {
            eprintln!("hermes-gateway: {e}");
            Err(ExitCode::FAILURE)
        }
    }
}

async fn approvals(home: PathBuf, action: ApprovalsAction) -> ExitCode {
    let store = match open_store(&home).await {
        Ok(store) => store,
        Err(code) => return code,
    };
    match action {
        ApprovalsAction::List => match store.allowlist_list().await {
            Ok(entries) if entries.is_empty() => {
                println!("No standing approvals: every dangerous command asks.");
                ExitCode::SUCCESS
            }
            Ok(entries) => {
                println!(
                    "Always allowed (pattern class — description — first approved for — by — whose commands):"
                );
                for e in entries {
                    let forged = if e.signed {
                        ""
                    } else {
                        " — NOT WRITTEN BY THE GATEWAY (its signature does not verify): ignored; revoke it"
                    };
                    let whose = if e.owner.is_empty() {
                        "everyone's"
                    } else {
                        e.owner.as_str()
                    };
                    println!(
                        "  {} — {} — {} — {} — {whose}{forged}",
                        e.pattern_key, e.description, e.example, e.added_by
                    );
                }
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("hermes-gateway: {e}");
                ExitCode::FAILURE
            }
        },
        ApprovalsAction::Revoke { pattern_key } => match store.allowlist_remove(&pattern_key).await
        {
            Ok(true) => {
                println!("{pattern_key} asks for approval again.");
                ExitCode::SUCCESS
            }
            Ok(false) => {
                eprintln!(
                    "hermes-gateway: {pattern_key} is not on the standing allowlist (see `approvals list`)"
                );
                ExitCode::from(2)
            }
            Err(e) => {
                eprintln!("hermes-gateway: {e}");
                ExitCode::FAILURE
            }
        },
    }
}

/// What the pairing commands exit with when nothing goes by that name, or the platform is
/// unknown (as `approvals` and `cron` do).
const EXIT_NOT_FOUND: u8 = 2;

async fn pairing(home: PathBuf, action: PairingAction) -> ExitCode {
    if let PairingAction::Approve { platform, .. } | PairingAction::Revoke { platform, .. } =
        &action
        && hermes_adapter::Platform::parse(platform).is_none()
    {
        let known: Vec<&str> = hermes_adapter::Platform::ALL
            .iter()
            .map(|p| p.as_str())
            .collect();
        eprintln!(
            "hermes-gateway: unknown platform {platform:?}; one of {}",
            known.join(", ")
        );
        return ExitCode::from(EXIT_NOT_FOUND);
    }
    let store = match open_store(&home).await {
        Ok(store) => store,
        Err(code) => return code,
    };
    match action {
        PairingAction::List => match store.pairing_list().await {
            Ok((pending, approved)) => {
                println!("Pending codes:");
                for p in &pending {
                    println!(
                        "  {} {} — {} (user {})",
                        p.platform, p.code, p.user_name, p.user_id
                    );
                }
                println!("Paired people:");
                for (platform, user_id, name, signed) in &approved {
                    let forged = if *signed {
                        ""
                    } else {
                        " — NOT WRITTEN BY THE GATEWAY (its signature does not verify): not let in; revoke it"
                    };
                    println!("  {platform} {user_id} — {name}{forged}");
                }
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("hermes-gateway: {e}");
                ExitCode::FAILURE
            }
        },
        PairingAction::Approve { platform, code } => match store
            .pairing_approve(&platform.to_ascii_lowercase(), &code)
            .await
        {
            Ok(approval) => {
                println!(
                    "Paired {} (user {}) on {platform}. They can write to the bot now.",
                    approval.user_name, approval.user_id
                );
                ExitCode::SUCCESS
            }
            Err(e @ (PairingError::UnknownCode(_) | PairingError::LockedOut(_))) => {
                eprintln!("hermes-gateway: {e}");
                ExitCode::from(2)
            }
            Err(e) => {
                eprintln!("hermes-gateway: {e}");
                ExitCode::FAILURE
            }
        },
        PairingAction::Revoke { platform, user_id } => match store
            .pairing_revoke(&platform.to_ascii_lowercase(), &user_id)
            .await
        {
            Ok(true) => {
                println!("Removed {user_id} from {platform}.");
                ExitCode::SUCCESS
            }
            Ok(false) => {
                eprintln!("hermes-gateway: {user_id} was not paired on {platform}");
                ExitCode::from(2)
            }
            Err(e) => {
                eprintln!("hermes-gateway: {e}");
                ExitCode::FAILURE
            }
        },
    }
}
