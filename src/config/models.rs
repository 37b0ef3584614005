//! The models: the providers Hermes knows by name (API root, key variables, wire dialect),
//! `model.*`, the fallback chain (`fallback_providers`, and the older `fallback_model`),
//! `auxiliary.vision.*`, `auxiliary.compression.*` with `compression.*`, and turning a
//! `provider:model` name into a model at run time (`/model`).

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::Value;

use super::yaml::YamlReader;
use super::{EnvVars, ModelConfig, Problem, Secret, VisionConfig, validate_http_url};

/// How a provider is spoken to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// OpenAI's `/chat/completions` (OpenRouter, Nous, Gemini's OpenAI endpoint, local
    /// servers…).
    OpenAi,
    /// Anthropic's `/v1/messages`.
    Anthropic,
}

/// A provider Hermes knows by name.
pub struct ProviderInfo {
    pub name: &'static str,
    /// The API root (empty: `model.base_url` must say it).
    pub base_url: &'static str,
    /// Where its key is looked for, first match wins.
    pub key_vars: &'static [&'static str],
}

/// The providers by Hermes' names (`model.provider`, `fallback_providers[].provider`,
/// `/model provider:model`).
pub const PROVIDERS: &[ProviderInfo] = &[
    ProviderInfo {
        name: "custom",
        base_url: "",
        key_vars: &["OPENAI_API_KEY"],
    },
    ProviderInfo {
        name: "openai",
        base_url: "https://api.openai.com/v1",
        key_vars: &["OPENAI_API_KEY"],
    },
    ProviderInfo {
        name: "openrouter",
        base_url: "https://openrouter.ai/api/v1",
        key_vars: &["OPENROUTER_API_KEY"],
    },
    ProviderInfo {
        name: "anthropic",
        base_url: "https://api.anthropic.com",
        key_vars: &[
            "ANTHROPIC_API_KEY",
            "ANTHROPIC_TOKEN",
            "CLAUDE_CODE_OAUTH_TOKEN",
        ],
    },
    ProviderInfo {
        name: "nous",
        base_url: "https://inference-api.nousresearch.com/v1",
        key_vars: &["NOUS_API_KEY"],
    },
    ProviderInfo {
        name: "gemini",
        base_url: "https://generativelanguage.googleapis.com/v1beta/openai",
        key_vars: &["GOOGLE_API_KEY", "GEMINI_API_KEY"],
    },
    ProviderInfo {
        name: "deepseek",
        base_url: "https://api.deepseek.com/v1",
        key_vars: &["DEEPSEEK_API_KEY"],
    },
    ProviderInfo {
        name: "groq",
        base_url: "https://api.groq.com/openai/v1",
        key_vars: &["GROQ_API_KEY"],
    },
    ProviderInfo {
        name: "xai",
        base_url: "https://api.x.ai/v1",
        key_vars: &["XAI_API_KEY"],
    },
    ProviderInfo {
        name: "zai",
        base_url: "https://api.z.ai/api/paas/v4",
        key_vars: &["GLM_API_KEY", "ZAI_API_KEY", "Z_AI_API_KEY"],
    },
    ProviderInfo {
        name: "kimi-coding",
        base_url: "https://api.moonshot.ai/v1",
        key_vars: &["KIMI_API_KEY", "KIMI_CODING_API_KEY"],
    },
    ProviderInfo {
        name: "minimax",
        base_url: "https://api.minimax.io/anthropic",
        key_vars: &["MINIMAX_API_KEY"],
    },
    ProviderInfo {
        name: "huggingface",
        base_url: "https://router.huggingface.co/v1",
        key_vars: &["HF_TOKEN"],
    },
    ProviderInfo {
        name: "ollama",
        base_url: "http://127.0.0.1:11434/v1",
        key_vars: &["OLLAMA_API_KEY"],
    },
    ProviderInfo {
        name: "lmstudio",
        base_url: "http://127.0.0.1:1234/v1",
        key_vars: &["LM_API_KEY"],
    },
];

/// Other spellings people use for the same providers.
const ALIASES: &[(&str, &str)] = &[
    ("openai-api", "openai"),
    ("claude", "anthropic"),
    ("google", "gemini"),
    ("local", "ollama"),
    ("kimi", "kimi-coding"),
    ("glm", "zai"),
];

/// The provider named `name` (any case, aliases included).
pub fn provider(name: &str) -> Option<&'static ProviderInfo> {
    let name = name.trim().to_ascii_lowercase();
    let name = ALIASES
        .iter()
        .find(|(alias, _)| *alias == name)
        .map_or(name.as_str(), |(_, real)| real);
    PROVIDERS.iter().find(|p| p.name == name)
}

/// The dialect of a provider at `base_url`: Anthropic's for the `anthropic` provider and for
/// any API root ending in `/anthropic` (as Hermes decides), else OpenAI's.
pub fn dialect_for(provider: &str, base_url: &str) -> Dialect {
    let root = base_url.trim_end_matches('/');
    if provider == "anthropic"
        || root.ends_with("/anthropic")
        || reqwest::Url::parse(root)
            .ok()
            .and_then(|u| u.host_str().map(|h| h == "api.anthropic.com"))
            .unwrap_or(false)
    {
        Dialect::Anthropic
    } else {
        Dialect::OpenAi
    }
}

/// The keys of every known provider found in the environment when the configuration was
/// read: what `/model provider:model` and the fallback entries use.
#[derive(Debug, Clone, Default)]
pub struct ProviderKeys(BTreeMap<&'static str, Secret>);

impl ProviderKeys {
    pub fn from_env(env: &EnvVars) -> Self {
        let mut keys = BTreeMap::new();
        for p in PROVIDERS {
            if let Some(value) = p
                .key_vars
                .iter()
                .find_map(|var| env.value(var).filter(|v| !v.is_empty()))
            {
                keys.insert(p.name, Secret::new(value));
            }
        }
        ProviderKeys(keys)
    }

    pub fn get(&self, provider: &str) -> Option<&Secret> {
        self.0.get(provider)
    }
}

/// A model entry as written (`model.*`, one `fallback_providers` entry, or `/model`).
#[derive(Debug, Default)]
pub struct ModelSpec {
    pub provider: Option<String>,
    pub model: Option<String>,
    pub base_url: Option<String>,
    pub api_key: Option<Secret>,
}

/// Build a model from `spec`; what it leaves out comes from the provider's defaults, the
/// keys in the environment, and `like` (limits and timeouts).
pub fn resolve(
    spec: ModelSpec,
    keys: &ProviderKeys,
    like: &ModelConfig,
) -> Result<ModelConfig, String> {
    let name = spec.provider.unwrap_or_else(|| like.provider.clone());
    let Some(info) = provider(&name) else {
        let names: Vec<&str> = PROVIDERS.iter().map(|p| p.name).collect();
        return Err(format!(
            "{name:?} is not a provider I know; use one of {} (custom = any OpenAI-compatible API with a base_url)",
            names.join(", ")
        ));
    };
    let model = spec
        .model
        .filter(|m| !m.trim().is_empty())
        .ok_or("no model name is given")?;
    let base_url = spec
        .base_url
        .or_else(|| (!info.base_url.is_empty()).then(|| info.base_url.to_owned()))
        .ok_or_else(|| format!("provider {:?} needs a base URL", info.name))?;
    validate_http_url(&base_url)?;
    let base_url = base_url.trim_end_matches('/').to_owned();
    let dialect = dialect_for(info.name, &base_url);
    // A key goes only where it belongs: a provider's own, or, for a `custom` endpoint that
    // is Anthropic's own API, Anthropic's. Never one provider's key to another's host.
    let anthropic_host = reqwest::Url::parse(&base_url)
        .ok()
        .and_then(|u| u.host_str().map(|h| h == "api.anthropic.com"))
        .unwrap_or(false);
    let api_key = spec.api_key.or_else(|| match (info.name, anthropic_host) {
        ("custom", true) => keys.get("anthropic").cloned(),
        (name, _) => keys.get(name).cloned(),
    });
    let model = model.trim().to_owned();
    // Another model's window is its own (compression is measured against it), not the
    // one set for `like`.
    let context_length = if model == like.model {
        like.context_length
    } else {
        super::catalog::context_window(&model).unwrap_or(DEFAULT_CONTEXT_WINDOW)
    };
    Ok(ModelConfig {
        provider: info.name.to_owned(),
        context_length,
        // An output cap set for one model does not fit another.
        max_tokens: like.max_tokens.filter(|_| model == like.model),
        model,
        base_url,
        api_key,
        dialect,
        ..like.clone()
    })
}

/// A model's context window when neither the configuration nor `config::catalog` knows it.
pub const DEFAULT_CONTEXT_WINDOW: usize = 131_072;

/// `model.*` (with `HERMES_MODEL` and the older flat `model: name`).
pub(super) fn read_model(
    y: &mut YamlReader,
    env: &EnvVars,
    problems: &mut Vec<Problem>,
) -> Option<(ModelConfig, ProviderKeys)> {
    let keys = ProviderKeys::from_env(env);
    // Older Hermes configs say `model: name`.
    let flat_name = y.text_only("model");
    let provider = y
        .string("model.provider", problems)
        .unwrap_or_else(|| "custom".into())
        .to_ascii_lowercase();
    let model = env
        .value("HERMES_MODEL")
        .or(flat_name)
        .or_else(|| y.string("model.default", problems))
        .or_else(|| y.string("model.name", problems));
    let base_url = y.string("model.base_url", problems);
    let api_key = y.string("model.api_key", problems).map(Secret::new);
    let limits = ModelConfig {
        provider: provider.clone(),
        // The main model's own (its `max_tokens` stays with it).
        model: model.clone().unwrap_or_default().trim().to_owned(),
        base_url: String::new(),
        api_key: None,
        dialect: Dialect::OpenAi,
        // The configured window, else the model's known one, else a common one.
        context_length: y
            .number("model.context_length", problems)
            .map(|n| n as usize)
            .or_else(|| model.as_deref().and_then(super::catalog::context_window))
            .unwrap_or(DEFAULT_CONTEXT_WINDOW),
        max_attempts: y
            .number("model.max_attempts", problems)
            .unwrap_or(4)
            .clamp(1, 20) as u32,
        stream_idle_timeout: Duration::from_secs(
            y.number("model.stream_idle_timeout", problems)
                .unwrap_or(120)
                .max(1),
        ),
        max_concurrent_calls: y
            .number("model.max_concurrent_calls", problems)
            .unwrap_or(DEFAULT_CONCURRENT_CALLS)
            .clamp(1, 10_000) as usize,
        max_tokens: y.number("model.max_tokens", problems).map(|n| n as u32),
        reasoning_effort: read_effort(y, problems),
    };
    let Some(model) = model else {
        // With the web chat on, the gateway runs and its page asks for a model (a first
        // run); anywhere else, nobody could be answered.
        if y.boolean("platforms.web.enabled", problems) == Some(true) {
            problems.push(Problem::warning(
                "model.default",
                "no model is chosen yet: the web chat shows a form to choose one (or run `hermes-gateway setup`)",
            ));
            return Some((limits, keys));
        }
        problems.push(Problem::error(
            "model.default",
            "no model name is set (or set HERMES_MODEL)",
        ));
        return None;
    };
    if super::sections::is_placeholder(&model) {
        problems.push(Problem::error(
            "model.default",
            format!("{model:?} is the example's placeholder: put the name of the model your provider serves here"),
        ));
    }
    let spec = ModelSpec {
        provider: Some(provider),
        model: Some(model),
        base_url,
        api_key,
    };
    match resolve(spec, &keys, &limits) {
        Ok(model) => {
            check_key(&model, problems);
            Some((model, keys))
        }
        Err(e) => {
            let key = if e.contains("provider") && !e.contains("base URL") {
                "model.provider"
            } else {
                "model.base_url"
            };
            problems.push(Problem::error(key, e));
            None
        }
    }
}

/// Calls to one model in flight at once, unless `model.max_concurrent_calls` says.
/// Each waits for its answer holding a connection (~40 KiB over HTTP/1, docs/performance.md);
/// a provider's rate limits come long before this many.
pub const DEFAULT_CONCURRENT_CALLS: u64 = 64;

/// A hosted provider without a key, or with the example's placeholder for one, would
/// refuse every request: a problem. A local server (a `custom` endpoint, Ollama, LM Studio,
/// any loopback address) may need none.
fn check_key(model: &ModelConfig, problems: &mut Vec<Problem>) {
    if let Some(key) = &model.api_key
        && super::sections::is_placeholder(key.expose())
    {
        problems.push(Problem::error(
            "model.api_key",
            "still the example's placeholder: put your provider's key here (or in .env)",
        ));
    }
    let local = matches!(model.provider.as_str(), "custom" | "ollama" | "lmstudio")
        || is_loopback_url(&model.base_url);
    if model.api_key.is_none() && !local {
        let vars = provider(&model.provider).map_or(&[][..], |p| p.key_vars);
        problems.push(Problem::error(
            "model.provider",
            format!(
                "provider {} needs a key: set {} in .env (or model.api_key)",
                model.provider,
                vars.join(" or ")
            ),
        ));
    }
}

/// `agent.reasoning_effort` (Hermes' levels; empty = the provider's default).
fn read_effort(y: &mut YamlReader, problems: &mut Vec<Problem>) -> Option<String> {
    const LEVELS: &[&str] = &[
        "none", "minimal", "low", "medium", "high", "xhigh", "max", "ultra",
    ];
    let effort = y
        .string("agent.reasoning_effort", problems)?
        .to_ascii_lowercase();
    if LEVELS.contains(&effort.as_str()) {
        Some(effort)
    } else {
        problems.push(Problem::error(
            "agent.reasoning_effort",
            format!(
                "{effort:?} is not a level; use one of {}",
                LEVELS.join(", ")
            ),
        ));
        None
    }
}

/// `fallback_providers` (a list) or the older `fallback_model` (one entry or a list): each
/// entry `provider`, `model`, and optionally `base_url`, `api_key` or `key_env`.
pub(super) fn read_fallbacks(
    y: &mut YamlReader,
    env: &EnvVars,
    keys: &ProviderKeys,
    main: &ModelConfig,
    problems: &mut Vec<Problem>,
    secret_names: &mut Vec<String>,
) -> Vec<ModelConfig> {
    let mut entries: Vec<(String, Value)> = Vec::new();
    for key in ["fallback_providers", "fallback_model"] {
        match y.get(key).cloned() {
            None => {}
            Some(Value::Array(items)) => entries.extend(
                items
                    .into_iter()
                    .enumerate()
                    .map(|(i, v)| (format!("{key}[{i}]"), v)),
            ),
            Some(entry @ Value::Object(_)) => entries.push((key.to_owned(), entry)),
            Some(_) => problems.push(Problem::error(
                key,
                "expected an entry with provider and model, or a list of them",
            )),
        }
    }
    let mut chain = Vec::new();
    for (path, entry) in entries {
        let text = |field: &str| {
            entry
                .get(field)
                .and_then(Value::as_str)
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
        };
        let api_key = match (text("api_key"), text("key_env")) {
            (Some(key), _) => Some(Secret::new(key)),
            (None, Some(var)) => match env.value(&var).filter(|v| !v.is_empty()) {
                Some(key) => {
                    // Whatever its name, the variable holds a key: scrubbed from output
                    // and kept from child processes like the others.
                    secret_names.push(var);
                    Some(Secret::new(key))
                }
                None => {
                    problems.push(Problem::warning(
                        format!("{path}.key_env"),
                        format!("{var} is not set: this fallback has no key"),
                    ));
                    None
                }
            },
            (None, None) => None,
        };
        if text("provider").is_none() {
            problems.push(Problem::error(
                &path,
                "has no provider (each entry needs provider and model)",
            ));
            continue;
        }
        let spec = ModelSpec {
            provider: text("provider"),
            model: text("model"),
            base_url: text("base_url"),
            api_key,
        };
        match resolve(spec, keys, main) {
            Ok(mut model) => {
                if let Some(n) = entry.get("context_length").and_then(Value::as_u64) {
                    model.context_length = n as usize;
                }
                chain.push(model)
            }
            Err(e) => problems.push(Problem::error(path.clone(), e)),
        }
    }
    chain
}

/// `auxiliary.<task>.*`: a model, endpoint, key and timeout of its own, each falling back
/// on the main model's (an endpoint of its own uses only its own key).
fn read_auxiliary(
    y: &mut YamlReader,
    task: &str,
    main: &ModelConfig,
    problems: &mut Vec<Problem>,
) -> (ModelConfig, bool) {
    let model = y
        .string(&format!("auxiliary.{task}.model"), problems)
        .filter(|m| !m.trim().is_empty());
    let base_url = y
        .string(&format!("auxiliary.{task}.base_url"), problems)
        .filter(|u| !u.trim().is_empty());
    if let Some(url) = &base_url
        && let Err(e) = validate_http_url(url)
    {
        problems.push(Problem::error(format!("auxiliary.{task}.base_url"), e));
    }
    let api_key = y
        .string(&format!("auxiliary.{task}.api_key"), problems)
        .filter(|k| !k.trim().is_empty())
        .map(Secret::new)
        // An endpoint of its own gets no other key: the main model's key is for the main
        // endpoint only.
        .or_else(|| match &base_url {
            Some(_) => None,
            None => main.api_key.clone(),
        });
    let timeout = y
        .number(&format!("auxiliary.{task}.timeout"), problems)
        .unwrap_or(120)
        .max(5);
    let configured = model.is_some() || base_url.is_some();
    let base_url = base_url
        .map(|u| u.trim_end_matches('/').to_owned())
        .unwrap_or_else(|| main.base_url.clone());
    let own_endpoint = base_url != main.base_url;
    let model = ModelConfig {
        model: model.unwrap_or_else(|| main.model.clone()),
        // An endpoint of its own is any OpenAI-compatible API (or Anthropic's dialect by
        // its root), not the main provider's.
        provider: if own_endpoint {
            "custom".into()
        } else {
            main.provider.clone()
        },
        dialect: if own_endpoint {
            dialect_for("custom", &base_url)
        } else {
            main.dialect
        },
        base_url,
        api_key,
        stream_idle_timeout: Duration::from_secs(timeout),
        ..main.clone()
    };
    (model, configured)
}

/// Sessions titled automatically after their first exchanges
/// (`auxiliary.title_generation.*`, Hermes' names).
#[derive(Debug, Clone)]
pub struct TitleConfig {
    /// `auxiliary.title_generation.enabled` (default true).
    pub enabled: bool,
    /// The model that writes titles when one is configured; `None`: the chat's own.
    pub model: Option<ModelConfig>,
    /// `auxiliary.title_generation.language`: titles in this language, else the person's.
    pub language: Option<String>,
}

pub(super) fn read_titles(
    y: &mut YamlReader,
    main: &ModelConfig,
    problems: &mut Vec<Problem>,
) -> TitleConfig {
    let enabled = y
        .boolean("auxiliary.title_generation.enabled", problems)
        .unwrap_or(true);
    let (model, configured) = read_auxiliary(y, "title_generation", main, problems);
    TitleConfig {
        enabled,
        model: configured.then_some(model),
        language: y
            .string("auxiliary.title_generation.language", problems)
            .filter(|l| !l.trim().is_empty()),
    }
}

/// `auxiliary.vision.*`.
pub(super) fn read_vision(
    y: &mut YamlReader,
    main: &ModelConfig,
    problems: &mut Vec<Problem>,
) -> VisionConfig {
    let (model, configured) = read_auxiliary(y, "vision", main, problems);
    VisionConfig { model, configured }
}

/// `compression.*` (Hermes' names and defaults) with its summariser,
/// `auxiliary.compression.*`.
#[derive(Debug, Clone)]
pub struct CompressionConfig {
    pub enabled: bool,
    /// Compress when the conversation passes this share of the context (0.50).
    pub threshold: f64,
    /// What the kept tail may take, as a share of the threshold (0.20).
    pub target_ratio: f64,
    /// Messages at the start that are never summarised (3).
    pub protect_first_n: usize,
    /// Messages at the end kept as they are, at most (20).
    pub protect_last_n: usize,
    /// The model that writes the summary.
    pub model: ModelConfig,
}

pub(super) fn read_compression(
    y: &mut YamlReader,
    main: &ModelConfig,
    problems: &mut Vec<Problem>,
) -> CompressionConfig {
    let share = |y: &mut YamlReader,
                 key: &str,
                 default: f64,
                 range: (f64, f64),
                 problems: &mut Vec<Problem>| {
        match y.string(key, problems) {
            None => default,
            Some(text) => match text.parse::<f64>() {
                Ok(v) if v.is_finite() => v.clamp(range.0, range.1),
                _ => {
                    problems.push(Problem::error(
                        key,
                        format!("expected a number, found {text:?}"),
                    ));
                    default
                }
            },
        }
    };
    let enabled = y.boolean("compression.enabled", problems).unwrap_or(true);
    let threshold = share(y, "compression.threshold", 0.50, (0.10, 0.95), problems);
    let target_ratio = share(y, "compression.target_ratio", 0.20, (0.10, 0.80), problems);
    let protect_first_n = y
        .number("compression.protect_first_n", problems)
        .unwrap_or(3) as usize;
    let protect_last_n = y
        .number("compression.protect_last_n", problems)
        .unwrap_or(20)
        .max(1) as usize;
    let (model, _) = read_auxiliary(y, "compression", main, problems);
    CompressionConfig {
        enabled,
        threshold,
        target_ratio,
        protect_first_n,
        protect_last_n,
        model,
    }
}

/// `agent.personalities`: name → the text added to the system prompt (a string, or a
/// mapping with `system_prompt`, as Hermes writes them).
pub(super) fn read_personalities(
    y: &mut YamlReader,
    problems: &mut Vec<Problem>,
) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let Some(value) = y.get("agent.personalities").cloned() else {
        return out;
    };
    let Value::Object(map) = value else {
        problems.push(Problem::error(
            "agent.personalities",
            "expected a mapping of name: prompt",
        ));
        return out;
    };
    for (name, entry) in map {
        let text = match &entry {
            Value::String(s) => Some(s.clone()),
            Value::Object(o) => o
                .get("system_prompt")
                .or_else(|| o.get("prompt"))
                .and_then(Value::as_str)
                .map(str::to_owned),
            _ => None,
        };
        match text.filter(|t| !t.trim().is_empty()) {
            Some(text) => {
                out.insert(name.to_ascii_lowercase(), text);
            }
            None => problems.push(Problem::warning(
                format!("agent.personalities.{name}"),
                "has no prompt text; ignored",
            )),
        }
    }
    out
}

/// Whether `url` names this machine (`localhost`, a loopback address).
pub fn is_loopback_url(url: &str) -> bool {
    reqwest::Url::parse(url)
        .ok()
        .and_then(|u| u.host_str().map(str::to_owned))
        .is_some_and(|host| {
            host == "localhost"
                || host
                    .trim_matches(['[', ']'])
                    .parse::<std::net::IpAddr>()
                    .is_ok_and(|ip| ip.is_loopback())
        })
}
