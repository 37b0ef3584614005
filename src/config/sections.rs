//! The sections of the configuration that `load_from` reads in turn: the models (main,
//! vision, fallbacks, compression), the agent, busy mode, access, sessions, delivery,
//! approvals, background processes and the platforms; then what was left unread and the
//! names of the variables that hold secrets.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use hermes_adapter::PlatformSettings;

use super::yaml::{YamlReader, split_list};
use super::*;

/// The models the configuration names, and the keys they use.
pub(super) struct Models {
    /// `None`: no usable model (said in the problems).
    pub main: Option<ModelConfig>,
    pub provider_keys: ProviderKeys,
    pub vision: Option<VisionConfig>,
    pub fallbacks: Vec<ModelConfig>,
    pub compression: Option<CompressionConfig>,
    /// Variables the fallbacks take their keys from.
    pub key_env_names: Vec<String>,
}

pub(super) fn read_models(
    y: &mut YamlReader,
    env: &EnvVars,
    problems: &mut Vec<Problem>,
) -> Models {
    let (model, provider_keys) = match models::read_model(y, env, problems) {
        Some((model, keys)) => (Some(model), keys),
        None => (None, ProviderKeys::default()),
    };
    let vision = model
        .as_ref()
        .map(|main| models::read_vision(y, main, problems));
    let mut key_env_names = Vec::new();
    let fallbacks = model
        .as_ref()
        .map(|main| {
            models::read_fallbacks(y, env, &provider_keys, main, problems, &mut key_env_names)
        })
        .unwrap_or_default();
    let compression = model
        .as_ref()
        .map(|main| models::read_compression(y, main, problems));
    Models {
        main: model,
        provider_keys,
        vision,
        fallbacks,
        compression,
        key_env_names,
    }
}

/// `agent.*` and what belongs with it (toolsets, web search, schedules, speech-to-text,
/// streaming, tool progress, images).
pub(super) fn read_agent(
    y: &mut YamlReader,
    env: &EnvVars,
    model: Option<&ModelConfig>,
    problems: &mut Vec<Problem>,
) -> AgentConfig {
    let personalities = models::read_personalities(y, problems);
    AgentConfig {
        max_turns: env
            .value("HERMES_MAX_ITERATIONS")
            .and_then(|v| match v.parse() {
                Ok(n) => Some(n),
                Err(_) => {
                    problems.push(Problem::error(
                        "HERMES_MAX_ITERATIONS",
                        format!("expected a whole number, found {v:?}"),
                    ));
                    None
                }
            })
            .or_else(|| y.number("agent.max_turns", problems).map(|n| n as u32))
            .unwrap_or(90)
            .max(1),
        system_prompt: y.string("agent.system_prompt", problems),
        channel_overrides: super::channels::read_channel_overrides(y, problems),
        toolsets: read_toolsets(y, problems),
        web: read_web(y, env, problems),
        cron_min_interval: y.number("cron.min_interval", problems).unwrap_or(60).max(1) as i64,
        provider_outage_wait: Duration::from_secs(
            y.number("agent.provider_outage_wait", problems)
                .unwrap_or(900),
        ),
        clarify_timeout: Duration::from_secs(
            y.number("agent.clarify_timeout", problems)
                .unwrap_or(3_600)
                .max(1),
        ),
        timezone: y.string("timezone", problems).filter(|tz| {
            let known = jiff::tz::TimeZone::get(tz).is_ok();
            if !known {
                problems.push(Problem::warning(
                    "timezone",
                    format!(
                        "{tz:?} is not a time zone this host knows; scheduled jobs use the host's"
                    ),
                ));
            }
            known
        }),
        personalities,
        stt: read_stt(y, env, model.map(|m| m.provider.as_str()), problems),
        tts: read_tts(y, env, model.map(|m| m.provider.as_str()), problems),
        streaming: read_streaming(y, problems),
        tool_progress: read_tool_progress(y, problems),
        memory_limits: read_memory_limits(y, problems),
        titles: match model {
            Some(main) => models::read_titles(y, main, problems),
            None => TitleConfig {
                enabled: false,
                model: None,
                language: None,
            },
        },
        image_input: match y.string("agent.image_input_mode", problems) {
            None => ImageInputMode::Auto,
            Some(mode) => ImageInputMode::parse(&mode).unwrap_or_else(|| {
                problems.push(Problem::error(
                    "agent.image_input_mode",
                    format!("{mode:?} is not an image input mode; use auto, native or text"),
                ));
                ImageInputMode::Auto
            }),
        },
    }
}

/// `display.tool_progress` and `display.platforms.<platform>.tool_progress` (Hermes'
/// values: off, new, all, verbose; `true`/`false`).
fn read_tool_progress(y: &mut YamlReader, problems: &mut Vec<Problem>) -> ProgressDefaults {
    let mut mode = |y: &mut YamlReader, key: &str| match y.string(key, problems).as_deref() {
        None => None,
        Some("off") | Some("false") => Some(ToolProgress::Off),
        Some("new") => Some(ToolProgress::New),
        Some("all") | Some("verbose") | Some("true") | Some("log") => Some(ToolProgress::All),
        Some(other) => {
            problems.push(Problem::error(
                key,
                format!("{other:?} is not a progress mode; use off, new or all"),
            ));
            None
        }
    };
    let global = mode(y, "display.tool_progress");
    let per_platform = hermes_adapter::Platform::ALL
        .iter()
        .filter_map(|p| {
            mode(
                y,
                &format!("display.platforms.{}.tool_progress", p.as_str()),
            )
            .map(|m| (*p, m))
        })
        .collect();
    ProgressDefaults {
        global,
        per_platform,
    }
}

/// `GATEWAY_MULTIPLEX_PROFILES` (Hermes' truthy and falsy words; anything else is
/// ignored, and said), then `multiplex_profiles`, then `gateway.multiplex_profiles`.
pub(super) fn read_multiplex(
    y: &mut YamlReader,
    env: &EnvVars,
    problems: &mut Vec<Problem>,
) -> bool {
    if let Some(value) = env.value("GATEWAY_MULTIPLEX_PROFILES") {
        match value.trim().to_ascii_lowercase().as_str() {
            "1" | "true" | "yes" | "on" => return true,
            "0" | "false" | "no" | "off" => return false,
            _ => problems.push(Problem::warning(
                "GATEWAY_MULTIPLEX_PROFILES",
                format!("{value:?} is neither true nor false; ignored"),
            )),
        }
    }
    let top = y.boolean("multiplex_profiles", problems);
    top.or_else(|| y.boolean("gateway.multiplex_profiles", problems))
        .unwrap_or(false)
}

/// `memory.memory_char_limit` and `memory.user_char_limit` (Hermes' defaults 2,200 and
/// 1,375 characters). Below 100 an entry hardly fits: such a value is refused.
fn read_memory_limits(y: &mut YamlReader, problems: &mut Vec<Problem>) -> MemoryLimits {
    let defaults = MemoryLimits::default();
    let mut limit = |key: &str, default: usize| match y.number(key, problems) {
        None => default,
        Some(n) if n >= 100 => n.min(1_000_000) as usize,
        Some(n) => {
            problems.push(Problem::error(
                key,
                format!(
                    "{n} characters hold hardly an entry; give at least 100 (default {default})"
                ),
            ));
            default
        }
    };
    MemoryLimits {
        memory: limit("memory.memory_char_limit", defaults.memory),
        user: limit("memory.user_char_limit", defaults.user),
    }
}

/// `display.busy_input_mode`: what a message does while a turn runs.
pub(super) fn read_busy_mode(y: &mut YamlReader, problems: &mut Vec<Problem>) -> BusyMode {
    match y.string("display.busy_input_mode", problems).as_deref() {
        None | Some("interrupt") => BusyMode::Interrupt,
        Some("queue") => BusyMode::Queue,
        Some("steer") => BusyMode::Steer,
        Some(other) => {
            problems.push(Problem::error(
                "display.busy_input_mode",
                format!("{other:?} is not a busy mode; use interrupt, queue or steer"),
            ));
            BusyMode::Interrupt
        }
    }
}

/// Who may talk to the bot on every platform (`GATEWAY_ALLOWED_USERS`, `…_ALLOW_ALL_USERS`).
pub(super) fn read_access(
    y: &mut YamlReader,
    env: &EnvVars,
    problems: &mut Vec<Problem>,
) -> AccessConfig {
    let mut tiers = std::collections::BTreeMap::new();
    for platform in hermes_adapter::Platform::ALL {
        let read = read_tiers(y, platform.config_section(), problems);
        if read.direct.enabled() || read.group.enabled() {
            tiers.insert(platform, read);
        }
    }
    AccessConfig {
        gateway_allowed: env
            .value("GATEWAY_ALLOWED_USERS")
            .map(|v| split_list(&v))
            .unwrap_or_default(),
        gateway_allow_all: env
            .value("GATEWAY_ALLOW_ALL_USERS")
            .is_some_and(|v| is_truthy(&v)),
        tiers,
    }
}

/// One platform's tiers, from `platforms.<name>.<key>` or `platforms.<name>.extra.<key>`
/// (Hermes reads both). A direct chat without its own `user_allowed_commands` takes the
/// group's (Hermes' rule); admins are never shared between the scopes.
fn read_tiers(y: &mut YamlReader, name: &str, problems: &mut Vec<Problem>) -> super::Tiers {
    let mut list = |key: &str| {
        let direct = y.list(&format!("platforms.{name}.{key}"), problems);
        let extra = y.list(&format!("platforms.{name}.extra.{key}"), problems);
        direct.or(extra)
    };
    let commands = |given: Option<Vec<String>>| {
        given.map(|names| {
            names
                .iter()
                .map(|c| c.trim().trim_start_matches('/').to_lowercase())
                .filter(|c| !c.is_empty())
                .collect::<Vec<_>>()
        })
    };
    let direct_admins = list("allow_admin_from").unwrap_or_default();
    let direct_commands = commands(list("user_allowed_commands"));
    let group_admins = list("group_allow_admin_from").unwrap_or_default();
    let group_commands = commands(list("group_user_allowed_commands"));
    super::Tiers {
        direct: super::TierScope {
            admins: direct_admins,
            user_commands: direct_commands.or_else(|| group_commands.clone()),
        },
        group: super::TierScope {
            admins: group_admins,
            user_commands: group_commands,
        },
    }
}

/// Whether group and thread members each have a session of their own.
pub(super) fn read_sessions(y: &mut YamlReader, problems: &mut Vec<Problem>) -> SessionConfig {
    SessionConfig {
        group_sessions_per_user: y
            .boolean("group_sessions_per_user", problems)
            .unwrap_or(true),
        thread_sessions_per_user: y
            .boolean("thread_sessions_per_user", problems)
            .unwrap_or(false),
    }
}

/// `delivery.*`: the send budgets and how long a reply is retried.
pub(super) fn read_delivery(y: &mut YamlReader, problems: &mut Vec<Problem>) -> DeliveryConfig {
    let mut rate = |key: &str, problems: &mut Vec<Problem>| {
        y.string(key, problems)
            .and_then(|v| match v.parse::<f64>() {
                Ok(r) if r > 0.0 => Some(r),
                _ => {
                    problems.push(Problem::error(
                        key,
                        format!("expected a positive number, found {v:?}"),
                    ));
                    None
                }
            })
    };
    let rate_per_second = rate("delivery.rate_per_second", problems);
    let bot_rate_per_second = rate("delivery.bot_rate_per_second", problems);
    let delivery = DeliveryConfig {
        rate_per_second,
        bot_rate_per_second,
        burst: y
            .number("delivery.burst", problems)
            .map(|b| b.max(1) as u32),
        bot_burst: y
            .number("delivery.bot_burst", problems)
            .map(|b| b.max(1) as u32),
        max_age: seconds_at_least(y, "delivery.max_age", 60, problems)
            .unwrap_or(DEFAULT_DELIVERY_MAX_AGE),
        retention: seconds_at_least(y, "delivery.retention", MIN_RETENTION.as_secs(), problems)
            .unwrap_or(DEFAULT_RETENTION),
        max_concurrent_sends: y
            .number("delivery.max_concurrent_sends", problems)
            .unwrap_or(DEFAULT_CONCURRENT_SENDS as u64)
            .clamp(1, 10_000) as usize,
    };
    if y.get("delivery.max_attempts").is_some() {
        problems.push(Problem::warning(
            "delivery.max_attempts",
            "no longer used: a reply is retried until it is sent or `delivery.max_age` passes",
        ));
    }
    delivery
}

/// `store.*`: SQLite, or the PostgreSQL store of several nodes (`docs/scaling.md`). The
/// password may be in the URL, in `HERMES_STORE_PASSWORD`, or in `store.password_file`.
pub(super) fn read_store(
    y: &mut YamlReader,
    env: &EnvVars,
    home: &std::path::Path,
    problems: &mut Vec<Problem>,
) -> StoreConfig {
    let (url, url_key) = match env.value("HERMES_STORE_URL") {
        Some(url) => (Some(url), "HERMES_STORE_URL"),
        None => (y.string("store.url", problems), "store.url"),
    };
    let password_file = y.string("store.password_file", problems);
    let password = match env.value("HERMES_STORE_PASSWORD") {
        Some(password) => Some(password),
        None => password_file.and_then(|file| {
            let path = home.join(&file);
            match std::fs::read_to_string(&path) {
                Ok(text) => Some(text.trim_end_matches(['\r', '\n']).to_owned()),
                Err(e) => {
                    problems.push(Problem::error(
                        "store.password_file",
                        format!("cannot read {}: {e}", path.display()),
                    ));
                    None
                }
            }
        }),
    };
    let postgres = url.filter(|u| !u.trim().is_empty()).and_then(|url| {
        if !is_postgres_url(&url) {
            problems.push(Problem::error(
                url_key,
                "expected a postgres:// URL (leave it unset for SQLite in the home)",
            ));
            return None;
        }
        match PgTarget::parse(&url, password.as_deref()) {
            Ok(target) => Some(target),
            Err(e) => {
                problems.push(Problem::error(url_key, e));
                None
            }
        }
    });
    let node_id = env
        .value("HERMES_NODE_ID")
        .or_else(|| y.string("store.node_id", problems))
        .unwrap_or_else(|| default_node_id(home));
    let mut seconds = |key: &str, default: Duration, problems: &mut Vec<Problem>| {
        y.string(key, problems)
            .and_then(|v| match v.trim().parse::<f64>() {
                Ok(s) if s > 0.0 && s < 86_400.0 => Some(Duration::from_secs_f64(s)),
                _ => {
                    problems.push(Problem::error(
                        key,
                        format!("expected a number of seconds above 0, found {v:?}"),
                    ));
                    None
                }
            })
            .unwrap_or(default)
    };
    let lease_ttl = seconds("store.lease_ttl", DEFAULT_LEASE_TTL, problems);
    let mut lease_renew = seconds("store.lease_renew", DEFAULT_LEASE_RENEW, problems);
    if lease_renew * 2 > lease_ttl {
        lease_renew = lease_ttl / 3;
        problems.push(Problem::warning(
            "store.lease_renew",
            format!(
                "must be at most half of store.lease_ttl, or one late renewal loses the lease: {:.1} s is used",
                lease_renew.as_secs_f64()
            ),
        ));
    }
    StoreConfig {
        postgres,
        node_id,
        lease_ttl,
        lease_renew,
    }
}

/// A node's default id: the host's name and a number made from the home's path, so two
/// daemons of different homes on one host never take each other's leases for their own,
/// and a daemon restarted in place takes its own leases back at once (a new id would wait
/// for them to lapse).
fn default_node_id(home: &std::path::Path) -> String {
    let host = nix::unistd::gethostname()
        .ok()
        .and_then(|name| name.into_string().ok())
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| "node".to_owned());
    // FNV-1a: the same number for the same path in every version.
    let hash = home
        .as_os_str()
        .as_encoded_bytes()
        .iter()
        .fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
            (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
        });
    format!("{host}-{:04x}", hash & 0xffff)
}

/// A number of seconds at `key`, raised to `least` (and said so) when below it.
fn seconds_at_least(
    y: &mut YamlReader,
    key: &str,
    least: u64,
    problems: &mut Vec<Problem>,
) -> Option<Duration> {
    let asked = y.number(key, problems)?;
    if asked < least {
        problems.push(Problem::warning(
            key,
            format!("{asked} is below {least} seconds; {least} is used"),
        ));
    }
    Some(Duration::from_secs(asked.max(least)))
}

/// Each platform's settings, and the variables they read (theirs, not unused).
pub(super) fn read_platforms(
    y: &mut YamlReader,
    env: &EnvVars,
    home: &std::path::Path,
    problems: &mut Vec<Problem>,
) -> (Vec<Arc<dyn PlatformSettings>>, BTreeSet<String>) {
    let mut source = source::Source {
        yaml: y,
        env,
        problems,
        vars_read: BTreeSet::new(),
        home,
    };
    let platforms: Vec<Arc<dyn PlatformSettings>> = crate::platforms::read_settings(&mut source)
        .into_iter()
        .map(Arc::from)
        .collect();
    let platform_vars = source.vars_read;
    (platforms, platform_vars)
}

/// `approvals.*` and `command_allowlist`.
pub(super) fn read_approvals(y: &mut YamlReader, problems: &mut Vec<Problem>) -> ApprovalConfig {
    let approvals = ApprovalConfig {
        mode: match y.string("approvals.mode", problems).as_deref() {
            None | Some("manual") => ApprovalMode::Manual,
            // YAML 1.1 reads a bare `off` as the boolean false.
            Some("off") | Some("false") => ApprovalMode::Off,
            Some("smart") => {
                problems.push(Problem::warning(
                    "approvals.mode",
                    "`smart` (a second model decides) is not supported; asking in the chat (`manual`) instead",
                ));
                ApprovalMode::Manual
            }
            Some(other) => {
                problems.push(Problem::error(
                    "approvals.mode",
                    format!("{other:?} is not an approval mode; use manual or off"),
                ));
                ApprovalMode::Manual
            }
        },
        timeout: Duration::from_secs(
            y.number("approvals.timeout", problems)
                .unwrap_or(300)
                .max(1),
        ),
        deny: y.list("approvals.deny", problems).unwrap_or_default(),
        allowlist: y.list("command_allowlist", problems).unwrap_or_default(),
    };
    if approvals.mode == ApprovalMode::Off {
        problems.push(Problem::warning(
            "approvals.mode",
            "off: dangerous commands run without asking anyone",
        ));
    }
    approvals
}

/// Background processes: `/stop` kills them or not, and what their ends tell.
pub(super) fn read_processes(
    y: &mut YamlReader,
    env: &EnvVars,
    problems: &mut Vec<Problem>,
) -> ProcessConfig {
    ProcessConfig {
        stop_kills_background: y
            .boolean("processes.stop_kills_background", problems)
            .unwrap_or(false),
        notifications: {
            let value = env
                .value("HERMES_BACKGROUND_NOTIFICATIONS")
                .or_else(|| y.string("display.background_process_notifications", problems))
                .unwrap_or_else(|| "concise".into());
            Notifications::parse(&value.to_ascii_lowercase()).unwrap_or_else(|| {
                problems.push(Problem::error(
                    "display.background_process_notifications",
                    format!("{value:?} is not a level; use concise, all, result, error or off"),
                ));
                Notifications::Concise
            })
        },
    }
}

/// Whether `value` is still a placeholder from the example files (`123456789:replace-me`,
/// `your-model-name`, a bare `xoxb-`/`xapp-`/`sk-`) or reads like one (`your_api_key`,
/// `YOUR-TOKEN-HERE`), not something a person put there.
pub(super) fn is_placeholder(value: &str) -> bool {
    let value = value.trim().to_ascii_lowercase();
    value.contains("replace-me")
        || value.starts_with("your-")
        || value.starts_with("your_")
        || ["xoxb-", "xapp-", "xoxp-", "sk-", "sk-...", "changeme"].contains(&value.as_str())
}

/// A secret variable (a token, key or secret) still holding a placeholder: an error for an
/// enabled platform's and the chosen provider's (they would refuse it, and `run` would not
/// work), a warning for one nothing uses now (a disabled platform's, another provider's).
pub(super) fn check_placeholders(
    env: &EnvVars,
    platform_vars: &BTreeSet<String>,
    platforms: &[Arc<dyn PlatformSettings>],
    provider: Option<&str>,
    problems: &mut Vec<Problem>,
) {
    let secret = |n: &&str| n.ends_with("_TOKEN") || n.ends_with("_KEY") || n.ends_with("_SECRET");
    let names = platform_vars
        .iter()
        .map(String::as_str)
        .chain(PROVIDERS.iter().flat_map(|p| p.key_vars.iter().copied()))
        .filter(secret)
        .collect::<BTreeSet<_>>();
    let chosen_keys = provider
        .and_then(super::models::provider)
        .map_or(&[][..], |p| p.key_vars);
    let in_use = |name: &str| {
        chosen_keys.contains(&name)
            || platforms.iter().any(|p| {
                let prefix = format!("{}_", p.platform().config_section().to_ascii_uppercase());
                name.starts_with(&prefix)
            })
    };
    for name in names {
        if !env.value(name).is_some_and(|v| is_placeholder(&v)) {
            continue;
        }
        if in_use(name) {
            problems.push(Problem::error(
                name,
                "still the example's placeholder: put the real value here, or remove the line",
            ));
        } else {
            problems.push(Problem::warning(
                name,
                "still the example's placeholder (not used now): remove the line or put the real value",
            ));
        }
    }
}

/// A platform nobody is allowed on answers only paired people: said.
pub(super) fn check_allowlists(
    access: &AccessConfig,
    platforms: &[Arc<dyn PlatformSettings>],
    problems: &mut Vec<Problem>,
) {
    if !access.gateway_allow_all && access.gateway_allowed.is_empty() {
        for p in platforms
            .iter()
            .filter(|p| !p.access().allow_all && p.access().allowed.is_empty())
        {
            problems.push(Problem::warning(
                format!("{}_ALLOWED_USERS", p.platform().as_str().to_ascii_uppercase()),
                "no allowlist is set: only people paired with `hermes-gateway pairing approve` can talk to the agent",
            ));
        }
    }
}

/// Keys of `config.yaml` and variables of `.env` that nothing read.
pub(super) fn unused(
    y: &YamlReader,
    env: &EnvVars,
    platform_vars: &BTreeSet<String>,
    problems: &mut Vec<Problem>,
) -> Vec<String> {
    let (mut unused, unknown) = super::known_keys::sort_unread(y.unused(), y.asked());
    problems.extend(unknown);
    let referenced = y.referenced_variables();
    unused.extend(
        env.dotenv_names()
            .filter(|name| {
                !KNOWN_VARIABLES.contains(name)
                    && !referenced.contains(*name)
                    && !PROVIDERS.iter().any(|p| p.key_vars.contains(name))
                    && !platform_vars.contains(*name)
                    && !name.starts_with("HERMES_HOME")
            })
            .map(|name| format!(".env {name}")),
    );
    unused
}

/// The variables kept from commands: every known one named like a token, key or secret,
/// every variable of `.env`, and the fallbacks' key variables.
pub(super) fn secret_env_names(
    env: &EnvVars,
    platform_vars: &BTreeSet<String>,
    key_env_names: &[String],
) -> Vec<String> {
    let mut secret_env_names: Vec<String> = KNOWN_VARIABLES
        .iter()
        .copied()
        .chain(platform_vars.iter().map(String::as_str))
        .chain(PROVIDERS.iter().flat_map(|p| p.key_vars.iter().copied()))
        .filter(|n| n.ends_with("_TOKEN") || n.ends_with("_KEY") || n.ends_with("_SECRET"))
        .map(str::to_owned)
        .collect();
    secret_env_names.extend(env.dotenv_names().map(str::to_owned));
    secret_env_names.extend(key_env_names.iter().cloned());
    secret_env_names
}
