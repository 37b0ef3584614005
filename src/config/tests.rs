use super::*;
use hermes_adapter::Platform;

const ISSUE_EXAMPLE: &str = r#"
model:
  provider: custom
  default: some-model-name
  base_url: http://127.0.0.1:9/v1
  api_key: sk-anything
  context_length: 131072
security:
  tirith_enabled: false
platforms:
  telegram:
    enabled: true
    extra:
      base_url: http://127.0.0.1:9/bot
      base_file_url: http://127.0.0.1:9/file/bot
"#;

fn env(pairs: &[(&str, &str)]) -> EnvVars {
    let text: String = pairs.iter().map(|(k, v)| format!("{k}={v}\n")).collect();
    EnvVars::new(Vec::new(), &text)
}

fn errors(loaded: &Loaded) -> Vec<String> {
    loaded.errors().map(|p| p.key.clone()).collect()
}

#[test]
fn the_hermes_example_config_runs_as_is() {
    let loaded = load_from(
        Path::new("/h"),
        ISSUE_EXAMPLE,
        &env(&[
            ("TELEGRAM_BOT_TOKEN", "123:abc"),
            ("TELEGRAM_ALLOW_ALL_USERS", "true"),
        ]),
    );
    assert!(errors(&loaded).is_empty(), "{:?}", loaded.problems);
    let config = loaded.config.unwrap();
    assert_eq!(config.model.model, "some-model-name");
    assert_eq!(config.model.base_url, "http://127.0.0.1:9/v1");
    assert_eq!(
        config.model.api_key.as_ref().unwrap().expose(),
        "sk-anything"
    );
    let telegram = config.platform(Platform::Telegram).unwrap();
    let shown = telegram.describe();
    assert!(shown.contains(&("api_url".into(), "http://127.0.0.1:9".into())));
    assert!(telegram.require_mention());
    assert!(telegram.access().allow_all);
    assert_eq!(config.agent.max_turns, 90);
    assert_eq!(config.busy_mode, BusyMode::Interrupt);
    assert_eq!(loaded.unused, vec!["security.tirith_enabled".to_string()]);
}

#[test]
fn wrong_values_name_their_key_path() {
    let yaml = "model:\n  default: m\n  base_url: nope\ndisplay:\n  busy_input_mode: sometimes\nplatforms:\n  telegram:\n    enabled: true\n";
    let loaded = load_from(
        Path::new("/h"),
        yaml,
        &env(&[("TELEGRAM_ALLOWED_USERS", "12,abc")]),
    );
    let keys = errors(&loaded);
    assert!(keys.contains(&"model.base_url".to_string()), "{keys:?}");
    assert!(
        keys.contains(&"display.busy_input_mode".to_string()),
        "{keys:?}"
    );
    assert!(
        keys.contains(&"TELEGRAM_ALLOWED_USERS".to_string()),
        "{keys:?}"
    );
    assert!(keys.contains(&"TELEGRAM_BOT_TOKEN".to_string()), "{keys:?}");
    assert!(loaded.config.is_none());
}

#[test]
fn providers_bring_their_url_and_key_variable() {
    let loaded = load_from(
        Path::new("/h"),
        "model:\n  provider: openrouter\n  default: x/y\n",
        &env(&[("OPENROUTER_API_KEY", "or-key")]),
    );
    let model = loaded.config.unwrap().model;
    assert_eq!(model.base_url, "https://openrouter.ai/api/v1");
    assert_eq!(model.api_key.unwrap().expose(), "or-key");

    let loaded = load_from(
        Path::new("/h"),
        "model:\n  provider: martian\n  default: x\n",
        &env(&[]),
    );
    assert_eq!(errors(&loaded), vec!["model.provider".to_string()]);
}

#[test]
fn the_process_environment_overrides_the_file() {
    let vars = EnvVars::new(
        vec![("HERMES_MODEL".to_string(), "from-env".to_string())],
        "HERMES_MODEL=from-file\nSOMETHING_ELSE=1\n",
    );
    let loaded = load_from(
        Path::new("/h"),
        "model:\n  default: from-yaml\n  base_url: http://x/v1\n",
        &vars,
    );
    assert_eq!(loaded.config.unwrap().model.model, "from-env");
    assert!(loaded.unused.contains(&".env SOMETHING_ELSE".to_string()));
}

#[test]
fn a_missing_platform_is_not_an_error_here_but_has_platform_says_so() {
    let loaded = load_from(
        Path::new("/h"),
        "model:\n  default: m\n  base_url: http://x/v1\n",
        &env(&[]),
    );
    assert!(!loaded.config.unwrap().has_platform());
}

#[test]
fn secrets_are_masked_in_debug_output() {
    let s = Secret::new("123456:supersecret");
    assert!(!format!("{s:?}").contains("supersecret"));
    assert_eq!(s.masked(), "123… (18 chars)");
}

#[test]
fn broken_yaml_is_an_error_on_the_file() {
    let loaded = load_from(Path::new("/h"), "model: [unclosed\n", &env(&[]));
    assert!(errors(&loaded).contains(&"config.yaml".to_string()));
}

#[test]
fn approvals_default_to_manual_with_five_minutes_and_off_warns() {
    let base = "model:\n  default: m\n  base_url: http://x/v1\n";
    let config = load_from(Path::new("/h"), base, &env(&[])).config.unwrap();
    assert_eq!(config.approvals.mode, ApprovalMode::Manual);
    assert_eq!(config.approvals.timeout, Duration::from_secs(300));

    let loaded = load_from(
        Path::new("/h"),
        &format!("{base}approvals:\n  mode: off\n  timeout: 20\n"),
        &env(&[]),
    );
    assert!(
        loaded
            .problems
            .iter()
            .any(|p| p.key == "approvals.mode" && p.severity == Severity::Warning)
    );
    let config = loaded.config.unwrap();
    assert_eq!(config.approvals.mode, ApprovalMode::Off);
    assert_eq!(config.approvals.timeout, Duration::from_secs(20));

    let loaded = load_from(
        Path::new("/h"),
        &format!("{base}approvals:\n  mode: sometimes\n"),
        &env(&[]),
    );
    assert_eq!(errors(&loaded), vec!["approvals.mode".to_string()]);
}

#[test]
fn background_notification_levels_come_from_yaml_or_the_environment() {
    use crate::config::Notifications;
    let base = "model:\n  default: m\n  base_url: http://x/v1\n";
    let config = load_from(Path::new("/h"), base, &env(&[])).config.unwrap();
    assert_eq!(config.processes.notifications, Notifications::Concise);
    let yaml = format!("{base}display:\n  background_process_notifications: result\n");
    let config = load_from(Path::new("/h"), &yaml, &env(&[])).config.unwrap();
    assert_eq!(config.processes.notifications, Notifications::Result);
    let config = load_from(
        Path::new("/h"),
        &yaml,
        &env(&[("HERMES_BACKGROUND_NOTIFICATIONS", "off")]),
    )
    .config
    .unwrap();
    assert_eq!(config.processes.notifications, Notifications::Off);
    let loaded = load_from(
        Path::new("/h"),
        &format!("{base}display:\n  background_process_notifications: loud\n"),
        &env(&[]),
    );
    assert_eq!(
        errors(&loaded),
        vec!["display.background_process_notifications".to_string()]
    );
}

#[test]
fn delivery_retries_for_a_day_unless_max_age_says_otherwise() {
    let base = "model:\n  default: m\n  base_url: http://x/v1\n";
    let config = load_from(Path::new("/h"), base, &env(&[])).config.unwrap();
    assert_eq!(config.delivery.max_age, Duration::from_secs(86_400));

    let loaded = load_from(
        Path::new("/h"),
        &format!("{base}delivery:\n  max_age: 7200\n  max_attempts: 12\n"),
        &env(&[]),
    );
    assert!(
        loaded
            .problems
            .iter()
            .any(|p| p.key == "delivery.max_attempts" && p.severity == Severity::Warning),
        "{:?}",
        loaded.problems
    );
    assert_eq!(
        loaded.config.unwrap().delivery.max_age,
        Duration::from_secs(7200)
    );
}

#[test]
fn speech_to_text_needs_the_openai_provider_and_a_key() {
    let base = "model:\n  default: m\n  base_url: http://x/v1\n";
    let load = |yaml: &str, vars: &[(&str, &str)]| {
        load_from(Path::new("/h"), &format!("{base}{yaml}"), &env(vars))
    };
    let none = load("", &[]).config.unwrap().agent.stt;
    assert!(none.openai.unwrap_err().contains("VOICE_TOOLS_OPENAI_KEY"));
    assert!(none.echo_transcripts);
    // A custom provider's OPENAI_API_KEY is for its endpoint: never sent to OpenAI.
    let custom = load("", &[("OPENAI_API_KEY", "sk-for-the-custom-endpoint")]);
    assert!(custom.config.unwrap().agent.stt.openai.is_err());

    let stt = load(
        "stt:\n  echo_transcripts: false\n  openai:\n    model: gpt-4o-mini-transcribe\n",
        &[
            ("VOICE_TOOLS_OPENAI_KEY", "sk-v"),
            ("STT_OPENAI_BASE_URL", "http://stt/v1/"),
        ],
    )
    .config
    .unwrap()
    .agent
    .stt;
    let openai = stt.openai.unwrap();
    assert_eq!(
        (
            openai.base_url.as_str(),
            openai.model.as_str(),
            openai.api_key.as_ref().unwrap().expose()
        ),
        ("http://stt/v1", "gpt-4o-mini-transcribe", "sk-v")
    );
    assert!(!stt.echo_transcripts);

    // Groq: its own key and Hermes' default model.
    let groq = load("stt:\n  provider: groq\n", &[("GROQ_API_KEY", "gsk-1")])
        .config
        .unwrap()
        .agent
        .stt
        .openai
        .unwrap();
    assert_eq!(
        (groq.base_url.as_str(), groq.model.as_str()),
        ("https://api.groq.com/openai/v1", "whisper-large-v3-turbo")
    );
    assert!(
        load("stt:\n  provider: groq\n", &[])
            .config
            .unwrap()
            .agent
            .stt
            .openai
            .unwrap_err()
            .contains("GROQ_API_KEY")
    );
    // Local: a Whisper-compatible server on this machine, no key.
    let local = load(
        "stt:\n  provider: local\n  local:\n    base_url: http://127.0.0.1:9000/v1\n    language: pt\n",
        &[("OPENAI_API_KEY", "sk-o")],
    )
    .config
    .unwrap()
    .agent
    .stt
    .openai
    .unwrap();
    assert_eq!(local.base_url, "http://127.0.0.1:9000/v1");
    assert_eq!(
        (local.model.as_str(), local.language.as_deref()),
        ("base", Some("pt"))
    );
    assert!(local.api_key.is_none(), "no key goes to a local server");

    let other = load("stt:\n  provider: mistral\n", &[]);
    assert!(
        other
            .problems
            .iter()
            .any(|p| p.key == "stt.provider" && p.severity == Severity::Warning)
    );
    let why = other.config.unwrap().agent.stt.openai.unwrap_err();
    assert!(why.contains("\"mistral\" is not available here"), "{why}");
}

#[test]
fn text_to_speech_is_the_openai_compatible_provider_or_said_plainly() {
    let base = "model:\n  default: m\n  base_url: http://x/v1\n";
    let load = |yaml: &str, vars: &[(&str, &str)]| {
        load_from(Path::new("/h"), &format!("{base}{yaml}"), &env(vars))
    };
    let unset = load("", &[]).config.unwrap().agent.tts.speech.unwrap_err();
    assert!(unset.contains("tts.provider: openai"), "{unset}");
    let tts = load(
        "tts:\n  provider: openai\n  speed: 1.5\n  openai:\n    base_url: http://speech/v1/\n    voice: nova\n",
        &[("VOICE_TOOLS_OPENAI_KEY", "sk-v")],
    )
    .config
    .unwrap()
    .agent
    .tts
    .speech
    .unwrap();
    assert_eq!(
        (
            tts.base_url.as_str(),
            tts.model.as_str(),
            tts.voice.as_str(),
            tts.speed,
            tts.max_text_length
        ),
        (
            "http://speech/v1",
            "gpt-4o-mini-tts",
            "nova",
            Some(1.5),
            4_096
        )
    );
    // A custom endpoint's OPENAI_API_KEY never goes to OpenAI with a person's words.
    let keyless = load(
        "tts:\n  provider: openai\n",
        &[("OPENAI_API_KEY", "sk-for-the-custom-endpoint")],
    );
    assert!(keyless.config.unwrap().agent.tts.speech.is_err());
    let edge = load("tts:\n  provider: edge\n", &[]);
    assert!(edge.problems.iter().any(|p| p.key == "tts.provider"));
    let why = edge.config.unwrap().agent.tts.speech.unwrap_err();
    assert!(
        why.contains("\"edge\" is not built into hermes-gateway"),
        "{why}"
    );
}

#[test]
fn logging_level_is_read_first_and_is_not_an_unused_key() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("config.yaml"),
        "model:\n  default: m\n  base_url: http://127.0.0.1:9/v1\nlogging:\n  level: debug\n",
    )
    .unwrap();
    assert_eq!(logging_level(dir.path()).as_deref(), Some("debug"));
    let loaded = load(dir.path());
    assert!(
        !loaded.unused.iter().any(|k| k.starts_with("logging")),
        "{:?}",
        loaded.unused
    );
    assert_eq!(logging_level(&dir.path().join("nowhere")), None);
}

fn with_model(model_yaml: &str, pairs: &[(&str, &str)]) -> Loaded {
    let yaml = format!(
        "{model_yaml}platforms:\n  telegram:\n    enabled: true\n    extra:\n      base_url: http://127.0.0.1:9/bot\n"
    );
    let mut vars = vec![
        ("TELEGRAM_BOT_TOKEN", "123:abc"),
        ("TELEGRAM_ALLOW_ALL_USERS", "true"),
    ];
    vars.extend_from_slice(pairs);
    load_from(Path::new("/h"), &yaml, &env(&vars))
}

#[test]
fn providers_are_known_by_name_with_their_roots_keys_and_dialects() {
    let loaded = with_model(
        "model:\n  provider: anthropic\n  default: claude-sonnet-4-5\n",
        &[("ANTHROPIC_TOKEN", "sk-ant-oat01-x")],
    );
    let model = &loaded.config.as_ref().expect("loads").model;
    assert_eq!(model.base_url, "https://api.anthropic.com");
    assert_eq!(model.dialect, Dialect::Anthropic);
    assert_eq!(model.api_key.as_ref().unwrap().expose(), "sk-ant-oat01-x");

    // Any base_url given with the anthropic provider is used as it is.
    let own = with_model(
        "model:\n  provider: anthropic\n  default: m\n  base_url: https://proxy.example/claude\n",
        &[("ANTHROPIC_API_KEY", "k")],
    );
    assert_eq!(
        own.config.unwrap().model.base_url,
        "https://proxy.example/claude"
    );

    let nous = with_model(
        "model:\n  provider: nous\n  default: Hermes-4-405B\n",
        &[("NOUS_API_KEY", "nk")],
    );
    let nous = nous.config.unwrap().model;
    assert_eq!(nous.base_url, "https://inference-api.nousresearch.com/v1");
    assert_eq!(nous.dialect, Dialect::OpenAi);

    let minimax = with_model(
        "model:\n  provider: minimax\n  default: MiniMax-M2\n",
        &[("MINIMAX_API_KEY", "mm")],
    );
    assert_eq!(minimax.config.unwrap().model.dialect, Dialect::Anthropic);

    let unknown = with_model("model:\n  provider: acme\n  default: m\n", &[]);
    assert_eq!(errors(&unknown), ["model.provider"]);
    let effort = with_model(
        "model:\n  provider: openai\n  default: m\nagent:\n  reasoning_effort: extreme\n",
        &[("OPENAI_API_KEY", "sk-1")],
    );
    assert_eq!(errors(&effort), ["agent.reasoning_effort"]);
}

#[test]
fn fallbacks_read_both_hermes_forms_and_their_keys_are_secrets() {
    let loaded = with_model(
        "model:\n  provider: openrouter\n  default: a/b\n\
         fallback_providers:\n  - provider: anthropic\n    model: claude-haiku-4-5\n  - provider: custom\n    model: local\n    base_url: http://127.0.0.1:8080/v1\n    key_env: MY_LOCAL_THING\n\
         fallback_model:\n  provider: deepseek\n  model: deepseek-chat\n",
        &[
            ("OPENROUTER_API_KEY", "or"),
            ("ANTHROPIC_API_KEY", "ant"),
            ("MY_LOCAL_THING", "local-secret-value"),
            ("DEEPSEEK_API_KEY", "ds"),
        ],
    );
    let config = loaded.config.as_ref().expect("loads");
    let chain: Vec<(&str, &str)> = config
        .fallbacks
        .iter()
        .map(|f| (f.provider.as_str(), f.model.as_str()))
        .collect();
    assert_eq!(
        chain,
        [
            ("anthropic", "claude-haiku-4-5"),
            ("custom", "local"),
            ("deepseek", "deepseek-chat")
        ]
    );
    assert_eq!(
        config.fallbacks[1].api_key.as_ref().unwrap().expose(),
        "local-secret-value"
    );
    assert!(
        config
            .secret_env_names
            .iter()
            .any(|n| n == "MY_LOCAL_THING")
    );
    assert!(
        loaded
            .secret_values
            .iter()
            .any(|s| s.expose() == "local-secret-value")
    );

    let broken = with_model(
        "model:\n  provider: custom\n  default: m\n  base_url: http://127.0.0.1:9/v1\nfallback_providers:\n  - model: x\n",
        &[],
    );
    assert_eq!(errors(&broken), ["fallback_providers[0]"]);
}

#[test]
fn compression_and_personalities_take_hermes_names_and_defaults() {
    let loaded = with_model(
        "model:\n  provider: custom\n  default: m\n  base_url: http://127.0.0.1:9/v1\n\
         compression:\n  threshold: 0.7\n  target_ratio: 5\n\
         auxiliary:\n  compression:\n    model: cheap-model\n\
         agent:\n  personalities:\n    Pirate: Talk like a pirate.\n    teacher:\n      system_prompt: Explain.\n",
        &[],
    );
    let config = loaded.config.as_ref().expect("loads");
    let c = &config.compression;
    assert!(c.enabled);
    assert_eq!((c.threshold, c.target_ratio), (0.7, 0.8), "clamped");
    assert_eq!((c.protect_first_n, c.protect_last_n), (3, 20));
    assert_eq!(c.model.model, "cheap-model");
    assert_eq!(c.model.base_url, "http://127.0.0.1:9/v1");
    assert_eq!(
        config.agent.personalities.keys().collect::<Vec<_>>(),
        ["pirate", "teacher"]
    );
}

#[test]
fn memory_limits_take_hermes_names_and_defaults() {
    let base = "model:\n  provider: custom\n  default: m\n  base_url: http://127.0.0.1:9/v1\n";
    let loaded = with_model(base, &[]);
    let limits = loaded.config.expect("loads").agent.memory_limits;
    assert_eq!((limits.memory, limits.user), (2_200, 1_375));
    let loaded = with_model(
        &format!("{base}memory:\n  memory_char_limit: 4000\n  user_char_limit: 800\n"),
        &[],
    );
    let limits = loaded.config.expect("loads").agent.memory_limits;
    assert_eq!((limits.memory, limits.user), (4_000, 800));
    let tiny = with_model(&format!("{base}memory:\n  user_char_limit: 5\n"), &[]);
    assert_eq!(errors(&tiny), ["memory.user_char_limit"]);
}

#[test]
fn a_key_never_goes_to_another_providers_host() {
    // MiniMax speaks Anthropic's dialect, but Anthropic's key is not MiniMax's.
    let loaded = with_model(
        "model:\n  provider: minimax\n  default: MiniMax-M2\n  max_tokens: 1000\n\
         fallback_providers:\n  - provider: custom\n    model: other\n    base_url: https://proxy.example/anthropic\n",
        &[
            ("ANTHROPIC_API_KEY", "sk-ant-api03-secret"),
            ("MINIMAX_API_KEY", "mm-key"),
        ],
    );
    let config = loaded.config.expect("loads");
    assert_eq!(config.model.api_key.unwrap().expose(), "mm-key");
    assert_eq!(config.model.max_tokens, Some(1000));
    assert!(config.fallbacks[0].api_key.is_none());
    assert_eq!(
        config.fallbacks[0].max_tokens, None,
        "the cap was the main model's"
    );
    // Anthropic's own API as a `custom` endpoint takes Anthropic's key, not OpenAI's.
    let own = with_model(
        "model:\n  provider: custom\n  default: claude-sonnet-4-5\n  base_url: https://api.anthropic.com\n",
        &[("ANTHROPIC_API_KEY", "ant"), ("OPENAI_API_KEY", "oai")],
    );
    assert_eq!(own.config.unwrap().model.api_key.unwrap().expose(), "ant");
}

#[test]
fn a_relative_working_directory_is_made_absolute() {
    let loaded = with_model(
        "model:\n  provider: custom\n  default: m\n  base_url: http://127.0.0.1:9/v1\nterminal:\n  cwd: .\n",
        &[],
    );
    let cwd = loaded.config.expect("loads").terminal.cwd;
    assert!(cwd.is_absolute(), "{}", cwd.display());
    assert_eq!(cwd, std::fs::canonicalize(".").unwrap());
}

#[test]
fn tiers_are_read_from_a_platforms_section_or_its_extra_with_hermes_fallback() {
    let yaml = format!(
        "{ISSUE_EXAMPLE}    group_allow_admin_from: [\"7\", 8]\n    group_user_allowed_commands: \"/Status, new\"\n  whatsapp_cloud:\n    enabled: false\n    extra:\n      allow_admin_from: \"15550001\"\n"
    );
    let loaded = load_from(
        Path::new("/tmp/h"),
        &yaml,
        &env(&[("TELEGRAM_BOT_TOKEN", "1:x")]),
    );
    let config = loaded.config.expect("loads");
    let telegram = &config.access.tiers[&Platform::Telegram];
    assert_eq!(telegram.group.admins, ["7", "8"]);
    assert_eq!(
        telegram.group.user_commands.as_deref(),
        Some(&["status".to_string(), "new".to_string()][..])
    );
    assert!(
        !telegram.direct.enabled(),
        "admins are not shared between scopes"
    );
    assert_eq!(
        telegram.direct.user_commands, telegram.group.user_commands,
        "a direct chat takes the group's commands (Hermes)"
    );
    assert_eq!(
        config.access.tiers[&Platform::WhatsApp].direct.admins,
        ["15550001"]
    );
    assert!(!config.access.tiers.contains_key(&Platform::Discord));
    assert!(
        !loaded
            .unused
            .iter()
            .any(|k| k.contains("admin") || k.contains("allowed_commands")),
        "{:?}",
        loaded.unused
    );
}

#[test]
fn dotenv_variables_the_file_names_are_used_and_a_clamped_value_is_said() {
    let yaml = ISSUE_EXAMPLE.replace(
        "      base_file_url: http://127.0.0.1:9/file/bot\n",
        "      base_file_url: http://127.0.0.1:9/file/bot\n      poll_timeout: 99\nmcp_servers:\n  tools:\n    command: tool-server\n    env:\n      TOKEN: \"${MCP_TOKEN}\"\n    headers:\n      X-Key: \"${env:OTHER_KEY}\"\n",
    );
    let loaded = load_from(
        Path::new("/h"),
        &yaml,
        &env(&[
            ("TELEGRAM_BOT_TOKEN", "1:x"),
            ("MCP_TOKEN", "t"),
            ("OTHER_KEY", "k"),
            ("LEFT_OVER", "x"),
        ]),
    );
    assert!(
        !loaded
            .unused
            .iter()
            .any(|k| k.contains("MCP_TOKEN") || k.contains("OTHER_KEY")),
        "{:?}",
        loaded.unused
    );
    assert!(
        loaded.unused.contains(&".env LEFT_OVER".to_string()),
        "{:?}",
        loaded.unused
    );
    let clamped = loaded
        .problems
        .iter()
        .find(|p| p.key == "platforms.telegram.extra.poll_timeout")
        .expect("the clamp is said");
    assert!(
        clamped.message.contains("99") && clamped.message.contains("15 is used"),
        "{clamped}"
    );
}

#[test]
fn a_typo_under_model_is_a_problem_naming_the_key_meant_and_a_hermes_setting_is_not() {
    let yaml = ISSUE_EXAMPLE.replace("model:\n", "model:\n  defualt: my-model\n  api_kye: sk-1\n");
    let loaded = load_from(
        Path::new("/h"),
        &yaml,
        &env(&[("TELEGRAM_BOT_TOKEN", "1:x")]),
    );
    let said = |key: &str| {
        loaded
            .problems
            .iter()
            .find(|p| p.key == key)
            .map(ToString::to_string)
            .unwrap_or_default()
    };
    assert!(
        said("model.defualt").contains("did you mean `model.default`"),
        "{:?}",
        loaded.problems
    );
    assert!(said("model.api_kye").contains("did you mean `model.api_key`"));
    assert!(said("security.tirith_enabled").is_empty());
    assert!(
        loaded
            .unused
            .contains(&"security.tirith_enabled".to_string())
    );
}

#[test]
fn the_examples_placeholders_and_a_hosted_provider_without_a_key_are_errors() {
    let example = include_str!("../../config/config.yaml");
    let loaded = load_from(
        Path::new("/h"),
        example,
        &env(&[
            ("TELEGRAM_BOT_TOKEN", "123456789:replace-me"),
            ("SLACK_BOT_TOKEN", "xoxb-"),
        ]),
    );
    let errors: Vec<&str> = loaded
        .problems
        .iter()
        .filter(|p| p.severity == Severity::Error)
        .map(|p| p.key.as_str())
        .collect();
    for key in ["model.default", "TELEGRAM_BOT_TOKEN", "SLACK_BOT_TOKEN"] {
        assert!(errors.contains(&key), "{key}: {:?}", loaded.problems);
    }

    // A disabled platform's leftover placeholder and another provider's are only said.
    let loaded = load_from(
        Path::new("/h"),
        "model:\n  default: team-your-model\n  base_url: http://127.0.0.1:9/v1\nplatforms:\n  telegram:\n    enabled: true\n  discord:\n    enabled: false\n",
        &env(&[
            ("TELEGRAM_BOT_TOKEN", "1:x"),
            ("DISCORD_BOT_TOKEN", "your_token_here"),
            ("OPENROUTER_API_KEY", "sk-..."),
        ]),
    );
    assert!(
        !loaded
            .problems
            .iter()
            .any(|p| p.severity == Severity::Error),
        "{:?}",
        loaded.problems
    );
    for key in ["DISCORD_BOT_TOKEN", "OPENROUTER_API_KEY"] {
        assert!(
            loaded.problems.iter().any(|p| p.key == key),
            "{key}: {:?}",
            loaded.problems
        );
    }

    let hosted = "model:\n  provider: openrouter\n  default: some/model\nplatforms:\n  telegram:\n    enabled: true\n";
    let loaded = load_from(
        Path::new("/h"),
        hosted,
        &env(&[("TELEGRAM_BOT_TOKEN", "1:x")]),
    );
    let said = loaded
        .problems
        .iter()
        .find(|p| p.key == "model.provider")
        .map(ToString::to_string)
        .unwrap_or_default();
    assert!(said.contains("OPENROUTER_API_KEY"), "{:?}", loaded.problems);
    let keyed = load_from(
        Path::new("/h"),
        hosted,
        &env(&[
            ("TELEGRAM_BOT_TOKEN", "1:x"),
            ("OPENROUTER_API_KEY", "sk-or-1"),
        ]),
    );
    assert!(
        !keyed.problems.iter().any(|p| p.severity == Severity::Error),
        "{:?}",
        keyed.problems
    );
}

#[test]
fn the_store_is_sqlite_unless_a_postgres_url_is_given_and_its_password_is_a_secret() {
    let base = "model:\n  default: m\n  base_url: http://x/v1\n";
    let config = load_from(Path::new("/h"), base, &env(&[])).config.unwrap();
    assert!(config.store.postgres.is_none());
    assert_eq!(config.store.lease_ttl, DEFAULT_LEASE_TTL);

    let loaded = load_from(
        Path::new("/h"),
        &format!(
            "{base}store:\n  url: postgres://hermes@db.internal/hermes?sslmode=verify-full\n  node_id: a\n  lease_ttl: 1.5\n  lease_renew: 0.5\n"
        ),
        &env(&[("HERMES_STORE_PASSWORD", "pg-pass-123")]),
    );
    assert!(errors(&loaded).is_empty(), "{:?}", loaded.problems);
    let store = loaded.store.clone().unwrap();
    let target = store.postgres.unwrap();
    assert_eq!(target.password().as_deref(), Some("pg-pass-123"));
    assert!(!target.shown().contains("pg-pass-123"));
    assert_eq!(store.node_id, "a");
    assert_eq!(store.lease_ttl, Duration::from_millis(1500));
    assert_eq!(store.lease_renew, Duration::from_millis(500));
    assert!(
        loaded
            .secret_values
            .iter()
            .any(|s| s.expose() == "pg-pass-123"),
        "the password is blanked wherever it shows"
    );

    // The URL in the environment wins, its inline password is a secret too, and the
    // variable never reaches a child process.
    let loaded = load_from(
        Path::new("/h"),
        base,
        &env(&[("HERMES_STORE_URL", "postgres://h:inline-pw-9@db/x")]),
    );
    assert!(
        loaded
            .secret_values
            .iter()
            .any(|s| s.expose() == "inline-pw-9")
    );
    assert!(crate::secrets::is_secret_name("HERMES_STORE_URL"));

    // A URL that does not read is an error, and the management commands get no store
    // rather than SQLite in its place.
    let loaded = load_from(
        Path::new("/h"),
        &format!("{base}store:\n  url: mysql://db/x\n"),
        &env(&[]),
    );
    assert_eq!(errors(&loaded), ["store.url"]);
    assert!(loaded.store.is_none());

    // A renewal too slow for the lease is brought under it, and said so.
    let loaded = load_from(
        Path::new("/h"),
        &format!("{base}store:\n  lease_ttl: 6\n  lease_renew: 5\n"),
        &env(&[]),
    );
    assert_eq!(
        loaded.store.as_ref().unwrap().lease_renew,
        Duration::from_secs(2)
    );
    assert!(loaded.problems.iter().any(|p| p.key == "store.lease_renew"));
}

#[test]
fn tool_progress_defaults_per_platform_as_hermes_has_them() {
    use hermes_adapter::Platform;
    let base = "model:\n  provider: custom\n  default: m\n  base_url: http://127.0.0.1:9/v1\n";
    let defaults = with_model(base, &[])
        .config
        .expect("loads")
        .agent
        .tool_progress;
    assert_eq!(defaults.for_platform(Platform::Telegram), ToolProgress::Off);
    assert_eq!(defaults.for_platform(Platform::Slack), ToolProgress::Off);
    assert_eq!(defaults.for_platform(Platform::WhatsApp), ToolProgress::Off);
    assert_eq!(defaults.for_platform(Platform::Discord), ToolProgress::All);
    let set = with_model(
        &format!("{base}display:\n  tool_progress: new\n  platforms:\n    slack:\n      tool_progress: all\n"),
        &[],
    )
    .config
    .expect("loads")
    .agent
    .tool_progress;
    assert_eq!(
        set.for_platform(Platform::Slack),
        ToolProgress::All,
        "the platform's own first"
    );
    assert_eq!(
        set.for_platform(Platform::Discord),
        ToolProgress::New,
        "then the global one"
    );
}

#[test]
fn channel_overrides_are_read_as_hermes_writes_them_thread_first() {
    use hermes_adapter::{ChatKind, ChatRef, Platform};
    let base = "model:\n  provider: custom\n  default: m\n  base_url: http://127.0.0.1:9/v1\n";
    let yaml = format!(
        "{base}discord:\n  channel_overrides:\n    \"100\":\n      model: big\n      system_prompt: Channel.\n    \
         200:\n      provider: anthropic\n      model: claude-sonnet-4\n      toolsets: [web]\n    \
         \"300\":\n      provider: openrouter\n    \"400\": not a mapping\n\
         gateway:\n  platforms:\n    discord:\n      channel_overrides:\n        \"100\":\n          model: hidden\n"
    );
    let loaded = with_model(&yaml, &[]);
    let overrides = loaded.config.expect("loads").agent.channel_overrides;
    let chat = |chat_id: &str, thread_id: Option<&str>| ChatRef {
        platform: Platform::Discord,
        account: None,
        chat_id: chat_id.into(),
        thread_id: thread_id.map(Into::into),
        kind: ChatKind::Group,
    };
    let channel = overrides
        .for_chat(&chat("100", None))
        .expect("the channel's");
    assert_eq!(
        channel.model.as_deref(),
        Some("big"),
        "the top-level block wins whole"
    );
    assert_eq!(channel.system_prompt.as_deref(), Some("Channel."));
    // A thread inherits its channel's; its own entry comes first.
    assert_eq!(overrides.for_chat(&chat("100", Some("999"))), Some(channel));
    let own = overrides
        .for_chat(&chat("100", Some("200")))
        .expect("the thread's own");
    assert_eq!(own.model.as_deref(), Some("anthropic:claude-sonnet-4"));
    assert_eq!(own.system_prompt, None);
    assert_eq!(
        overrides.for_chat(&chat("300", None)),
        None,
        "a provider alone is not used"
    );
    let slack = ChatRef {
        platform: Platform::Slack,
        ..chat("100", None)
    };
    assert_eq!(overrides.for_chat(&slack), None, "per platform");
    let said = |key: &str| loaded.problems.iter().any(|p| p.key == key);
    assert!(
        said("discord.channel_overrides.200.toolsets"),
        "{:?}",
        loaded.problems
    );
    assert!(said("discord.channel_overrides.300.provider"));
    assert!(said("discord.channel_overrides.400"));
}
