//! `hermes-gateway setup`: the terminal twin of the web chat's setup. It chooses the model
//! (a server found on this machine, or a provider and its key), then, for each of the four
//! platforms, takes its token, checks it against the platform (`Adapter::check_credentials`:
//! Telegram `getMe`, Discord `/users/@me` and the Message Content intent, Slack
//! `auth.test` and, for Socket Mode, `apps.connections.open`, WhatsApp the phone number id)
//! and only then writes it into `.env` (whole and private). It says what it cannot do for
//! the person (BotFather, the Discord portal, the Slack manifest, Meta's webhook), never
//! shows a secret, and with `--non-interactive` takes every answer from its flags and every
//! secret from the environment (the `.env` names), so nothing secret is on a command line.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use dialoguer::{Confirm, Input, Password, Select};
use hermes_adapter::{AdapterError, ModelChoice, Platform};

use crate::config::{self, EnvVars, PROVIDERS};

/// How long one platform may take to say whether it takes a token.
const CHECK_TIMEOUT: Duration = Duration::from_secs(15);

/// The answers `setup` can be given on its command line.
#[derive(clap::Args, Debug, Default)]
pub struct SetupArgs {
    /// Ask nothing: answers from these flags, secrets from the environment under their
    /// .env names (OPENROUTER_API_KEY, TELEGRAM_BOT_TOKEN, SLACK_APP_TOKEN, …)
    #[arg(long)]
    non_interactive: bool,
    /// The model's provider, by Hermes' name (openrouter, anthropic, openai, ollama, custom, …)
    #[arg(long)]
    provider: Option<String>,
    /// The model's name as the provider knows it
    #[arg(long)]
    model: Option<String>,
    /// The model's API root (needed for custom)
    #[arg(long)]
    base_url: Option<String>,
    /// The platforms to set up (telegram, discord, slack, whatsapp), comma-separated
    #[arg(long, value_delimiter = ',')]
    platforms: Vec<String>,
    /// Who may talk to the bot on the platforms set up now (their user ids, comma-separated)
    #[arg(long)]
    allowed_users: Option<String>,
    /// WhatsApp: the business phone number's id (Meta's app dashboard → WhatsApp → API Setup)
    #[arg(long)]
    whatsapp_phone_number_id: Option<String>,
}

/// One platform's questions.
struct Step {
    platform: Platform,
    title: &'static str,
    /// What the person does first, where the gateway cannot.
    before: &'static str,
    /// (variable, question, secret) asked in order; a variable another answer made
    /// unneeded is skipped ([`needed`]).
    asks: &'static [(&'static str, &'static str, bool)],
    allow_var: &'static str,
    /// What is left to do once the token is saved.
    after: &'static str,
}

const STEPS: [Step; 4] = [
    Step {
        platform: Platform::Telegram,
        title: "Telegram",
        before: "Talk to @BotFather in Telegram: /newbot, choose a name, and copy the token it gives.\n\
                 Your own numeric user id: ask @userinfobot.",
        asks: &[("TELEGRAM_BOT_TOKEN", "Bot token from @BotFather", true)],
        allow_var: "TELEGRAM_ALLOWED_USERS",
        after: "Write to your bot in Telegram once the gateway runs.",
    },
    Step {
        platform: Platform::Discord,
        title: "Discord",
        before: "In the Discord Developer Portal (discord.com/developers/applications): New Application → Bot →\n\
                 Reset Token and copy it; turn on Privileged Gateway Intents → Message Content Intent.\n\
                 Your user id: Discord settings → Advanced → Developer Mode, then right-click yourself → Copy User ID.",
        asks: &[(
            "DISCORD_BOT_TOKEN",
            "Bot token from the Developer Portal",
            true,
        )],
        allow_var: "DISCORD_ALLOWED_USERS",
        after: "Invite the bot: Developer Portal → OAuth2 → URL Generator, scopes bot and applications.commands,\n\
                permissions Send Messages, Read Message History, Add Reactions; open the URL it makes.",
    },
    Step {
        platform: Platform::Slack,
        title: "Slack",
        before: "Create the Slack app from the manifest: api.slack.com/apps → Create New App → From a manifest,\n\
                 paste deploy/slack-app-manifest.yaml (Socket Mode) or deploy/slack-app-manifest-events.yaml\n\
                 (Events API; docs/platforms/slack.md). Install it to the workspace and copy the Bot User OAuth\n\
                 Token (xoxb-…); for Socket Mode also an app-level token (xapp-…) with connections:write.",
        asks: &[
            ("SLACK_BOT_TOKEN", "Bot User OAuth Token (xoxb-…)", true),
            (
                "SLACK_APP_TOKEN",
                "App-level token for Socket Mode (xapp-…)",
                true,
            ),
            (
                "SLACK_SIGNING_SECRET",
                "Signing secret (Basic Information → App Credentials)",
                true,
            ),
        ],
        allow_var: "SLACK_ALLOWED_USERS",
        after: "Invite the bot to a channel (/invite @yourbot), or write to it directly.",
    },
    Step {
        platform: Platform::WhatsApp,
        title: "WhatsApp (Cloud API)",
        before: "In Meta's app dashboard (developers.facebook.com/apps): add WhatsApp to a Business app; under\n\
                 API Setup copy a permanent access token (a system user's) and the phone number id; the app\n\
                 secret is under App settings → Basic.",
        asks: &[
            ("WHATSAPP_CLOUD_ACCESS_TOKEN", "Access token", true),
            (
                "WHATSAPP_CLOUD_PHONE_NUMBER_ID",
                "Phone number id (digits)",
                false,
            ),
            ("WHATSAPP_CLOUD_APP_SECRET", "App secret", true),
            (
                "WHATSAPP_CLOUD_VERIFY_TOKEN",
                "A verify token of your choosing (you enter the same at Meta)",
                true,
            ),
        ],
        allow_var: "WHATSAPP_CLOUD_ALLOWED_USERS",
        after: "At Meta: WhatsApp → Configuration → Webhook: callback URL https://<your host>/whatsapp/webhook\n\
                (a TLS proxy in front of http.listen, docs/platforms/whatsapp.md), the verify token you chose,\n\
                and subscribe to messages.",
    },
];

/// Whether `var` is needed given the answers so far (Slack asks for the app token or the
/// signing secret, by the mode chosen).
fn needed(var: &str, socket_mode: bool) -> bool {
    match var {
        "SLACK_APP_TOKEN" => socket_mode,
        "SLACK_SIGNING_SECRET" => !socket_mode,
        _ => true,
    }
}

/// How the wizard talks: prompts at a terminal, or the flags and the environment.
struct Asker<'a> {
    args: &'a SetupArgs,
}

impl Asker<'_> {
    fn interactive(&self) -> bool {
        !self.args.non_interactive
    }

    /// A line of text: asked, or `given` (a flag) when not interactive.
    fn text(&self, question: &str, given: Option<&str>, default: Option<&str>) -> Option<String> {
        if !self.interactive() {
            return given.map(str::to_owned).or(default.map(str::to_owned));
        }
        let mut input = Input::<String>::new()
            .with_prompt(question)
            .allow_empty(true);
        if let Some(default) = given.or(default) {
            input = input.default(default.to_owned());
        }
        let answer = input.interact_text().unwrap_or_else(|e| stopped(e));
        Some(answer.trim().to_owned()).filter(|s| !s.is_empty())
    }

    /// A secret: asked without echo, or from the environment under `var`.
    fn secret(&self, question: &str, var: &str) -> Option<String> {
        if !self.interactive() {
            return from_environment(var);
        }
        let answer = Password::new()
            .with_prompt(question)
            .allow_empty_password(true)
            .interact()
            .unwrap_or_else(|e| stopped(e));
        Some(answer.trim().to_owned()).filter(|s| !s.is_empty())
    }

    fn yes(&self, question: &str, given: bool) -> bool {
        if !self.interactive() {
            return given;
        }
        Confirm::new()
            .with_prompt(question)
            .default(given)
            .interact()
            .unwrap_or_else(|e| stopped(e))
    }
}

/// A prompt could not be answered (the terminal closed, input ended): the wizard stops
/// there, and what was not saved yet is not saved.
fn stopped(e: dialoguer::Error) -> ! {
    eprintln!("\nhermes-gateway setup stopped ({e}); what was not saved yet is not saved.");
    std::process::exit(i32::from(super::EXIT_CONFIG))
}

/// A variable of the environment `setup` was started with (secrets are taken out of the
/// process's own at start-up: [`crate::secrets::environment`]).
fn from_environment(var: &str) -> Option<String> {
    crate::secrets::environment()
        .find(|(name, _)| name == var)
        .map(|(_, value)| value)
        .filter(|v| !v.trim().is_empty())
}

/// `setup`: the model, then each platform; exit 0 when everything asked for was saved,
/// [`super::EXIT_CONFIG`] when something was refused.
pub fn run(home: PathBuf, args: SetupArgs, runtime: &tokio::runtime::Runtime) -> ExitCode {
    if !args.non_interactive && !std::io::IsTerminal::is_terminal(&std::io::stdin()) {
        eprintln!(
            "hermes-gateway setup: no terminal to ask in; give the answers as flags with --non-interactive (see --help)"
        );
        return ExitCode::from(super::EXIT_CONFIG);
    }
    match config::edit::first_run(&home) {
        Ok(true) => println!("Made {} with a starter config.yaml.", home.display()),
        Ok(false) => {}
        Err(e) => {
            eprintln!("hermes-gateway setup: cannot make {}: {e}", home.display());
            return ExitCode::from(super::EXIT_CONFIG);
        }
    }
    if let Some(unknown) = args
        .platforms
        .iter()
        .find(|p| Platform::parse(p.trim()).is_none_or(|p| p == Platform::Web))
    {
        eprintln!(
            "hermes-gateway setup: {unknown:?} is not a platform setup knows (telegram, discord, slack, whatsapp)"
        );
        return ExitCode::from(super::EXIT_CONFIG);
    }
    let asker = Asker { args: &args };
    let mut refused = false;
    println!("hermes-gateway setup, in {}\n", home.display());
    if !runtime.block_on(model_step(&home, &asker)) {
        refused = true;
    }
    for step in &STEPS {
        let wanted = args
            .platforms
            .iter()
            .any(|p| Platform::parse(p.trim()) == Some(step.platform));
        println!();
        if !asker.yes(&format!("Set up {}?", step.title), wanted) {
            continue;
        }
        if !runtime.block_on(platform_step(&home, &asker, step)) {
            refused = true;
        }
    }
    println!();
    if refused {
        println!("Some answers were not saved (above). Run `hermes-gateway setup` again for them.");
        ExitCode::from(super::EXIT_CONFIG)
    } else {
        println!(
            "Saved. Start the gateway with `hermes-gateway run` (a running one takes it with `hermes-gateway service restart`, or SIGHUP);\n\
             `hermes-gateway check-config --online` checks everything again."
        );
        ExitCode::SUCCESS
    }
}

/// The model: kept, a server found here, or a provider and its key; tried before it is
/// written. `false` when the choice was refused.
async fn model_step(home: &Path, asker: &Asker<'_>) -> bool {
    let args = asker.args;
    let current = config::load(home)
        .config
        .filter(|c| c.model.is_chosen())
        .map(|c| format!("{} / {}", c.model.provider, c.model.model));
    if !asker.interactive() && args.provider.is_none() && args.model.is_none() {
        return true; // nothing asked of the model
    }
    let choice = if asker.interactive() {
        let local = crate::llm::local::find().await;
        let mut options: Vec<String> = Vec::new();
        let mut picks: Vec<Option<ModelChoice>> = Vec::new();
        if let Some(current) = &current {
            options.push(format!("Keep {current}"));
            picks.push(None);
        }
        for server in &local {
            for model in server.models.iter().take(5) {
                options.push(format!(
                    "{model} from {} at {} (on this machine)",
                    server.name, server.base_url
                ));
                picks.push(Some(ModelChoice {
                    provider: server.provider.to_owned(),
                    model: model.clone(),
                    base_url: Some(server.base_url.clone()),
                    api_key: None,
                }));
            }
        }
        options.push("A provider and its key (OpenRouter, Anthropic, OpenAI, …)".into());
        println!("The model the agent thinks with:");
        let picked = Select::new()
            .items(&options)
            .default(0)
            .interact()
            .unwrap_or_else(|e| stopped(e));
        match picks.get(picked) {
            Some(None) => return true,
            Some(Some(choice)) => choice.clone(),
            None => match ask_provider(asker) {
                Some(choice) => choice,
                None => return false,
            },
        }
    } else {
        match ask_provider(asker) {
            Some(choice) => choice,
            None => return false,
        }
    };
    println!("Trying {} / {} …", choice.provider, choice.model);
    let tried = crate::llm::check::try_model(home, &choice).await;
    let write = match tried {
        Ok(write) => write,
        Err(why) => {
            println!("  not saved: {}", crate::secrets::scrub(&why));
            return false;
        }
    };
    let dir = home.to_path_buf();
    let written =
        tokio::task::spawn_blocking(move || config::edit::write_model(&dir, &write)).await;
    match written {
        Ok(Ok(())) => {
            println!("  it answers; saved in config.yaml (and its key in .env)");
            true
        }
        Ok(Err(e)) => {
            println!("  could not be written: {e}");
            false
        }
        Err(e) => {
            println!("  could not be written: {e}");
            false
        }
    }
}

/// A provider, its model, base URL and key: asked, or from the flags and environment.
fn ask_provider(asker: &Asker<'_>) -> Option<ModelChoice> {
    let args = asker.args;
    let provider = if asker.interactive() {
        let names: Vec<&str> = PROVIDERS.iter().map(|p| p.name).collect();
        let default = names.iter().position(|n| *n == "openrouter").unwrap_or(0);
        let picked = Select::new()
            .with_prompt("Provider")
            .items(&names)
            .default(default)
            .interact()
            .unwrap_or_else(|e| stopped(e));
        names[picked].to_owned()
    } else {
        let Some(provider) = args.provider.clone() else {
            println!(
                "  not saved: --model needs --provider (one of {})",
                provider_names()
            );
            return None;
        };
        provider
    };
    let Some(info) = config::provider(&provider) else {
        println!(
            "  not saved: {provider:?} is not a provider (one of {})",
            provider_names()
        );
        return None;
    };
    let provider = info.name.to_owned();
    let Some(model) = asker.text("Model name", args.model.as_deref(), None) else {
        println!("  not saved: no model name given (--model)");
        return None;
    };
    let base_default = (!info.base_url.is_empty()).then_some(info.base_url);
    let base_url = asker.text("Base URL", args.base_url.as_deref(), base_default);
    let local = crate::llm::check::LOCAL_PROVIDERS.contains(&info.name);
    let api_key = if local {
        None
    } else {
        asker.secret(&format!("API key ({})", info.key_vars[0]), info.key_vars[0])
    };
    Some(ModelChoice {
        provider,
        model,
        base_url,
        api_key,
    })
}

/// Hermes' provider names, for a message.
fn provider_names() -> String {
    PROVIDERS
        .iter()
        .map(|p| p.name)
        .collect::<Vec<_>>()
        .join(", ")
}

/// One platform: its token(s) checked against it, then saved. `false` when refused.
async fn platform_step(home: &Path, asker: &Asker<'_>, step: &Step) -> bool {
    println!("{}", step.before);
    let socket_mode = step.platform != Platform::Slack
        || if asker.interactive() {
            Select::new()
                .with_prompt("How Slack reaches the gateway")
                .items([
                    "Socket Mode (no public address needed)",
                    "Events API (a public https address)",
                ])
                .default(0)
                .interact()
                .map(|i| i == 0)
                .unwrap_or_else(|e| stopped(e))
        } else {
            from_environment("SLACK_APP_TOKEN").is_some()
        };
    let mut answers: Vec<(String, String)> = Vec::new();
    for (var, question, secret) in step.asks {
        if !needed(var, socket_mode) {
            continue;
        }
        let given = if *secret {
            asker.secret(question, var)
        } else {
            let flag = (*var == "WHATSAPP_CLOUD_PHONE_NUMBER_ID")
                .then_some(asker.args.whatsapp_phone_number_id.as_deref())
                .flatten();
            asker.text(question, flag, None)
        };
        match given {
            Some(value) => answers.push((var.to_string(), value)),
            None => {
                println!("  {} not saved: no {var} given", step.title);
                return false;
            }
        }
    }
    let allowed = asker.text(
        "Who may talk to the bot (user ids, comma-separated; empty: pairing codes)",
        asker.args.allowed_users.as_deref(),
        None,
    );
    if let Some(allowed) = allowed {
        answers.push((step.allow_var.to_owned(), allowed));
    }
    if let Some((var, why)) = answers
        .iter()
        .find_map(|(var, value)| unfit_for_env(value).map(|why| (var, why)))
    {
        println!("  {} not saved: {var} {why}", step.title);
        return false;
    }
    if let Err(why) = check_platform(home, step.platform, &answers).await {
        println!(
            "  {} not saved: {}",
            step.title,
            crate::secrets::scrub(&why)
        );
        return false;
    }
    let written = save_vars(home, &answers);
    match written {
        Ok(()) => {
            println!("  saved in .env\n{}", step.after);
            true
        }
        Err(e) => {
            println!("  {} could not be saved: {e}", step.title);
            false
        }
    }
}

/// Ask the platform whether it takes `answers` (with the rest of the configuration as it
/// is): who the bot is, or why not.
async fn check_platform(
    home: &Path,
    platform: Platform,
    answers: &[(String, String)],
) -> Result<(), String> {
    // The secrets being checked are scrubbed from anything printed from here on.
    crate::secrets::remember(answers.iter().map(|(_, v)| v.clone()));
    let read =
        |name: &str| config::edit::read_or_empty(&home.join(name)).map_err(|e| e.to_string());
    let yaml = read("config.yaml")?;
    let mut dotenv = read(".env")?;
    for (var, value) in answers {
        dotenv = config::edit::set_var(&dotenv, var, value);
    }
    let env = EnvVars::new(crate::secrets::environment(), &dotenv);
    let settings = config::read_platform(home, &yaml, &env, platform)?;
    let adapter = settings.build().map_err(|e| e.to_string())?;
    match tokio::time::timeout(CHECK_TIMEOUT, adapter.check_credentials()).await {
        Ok(Ok(who)) => {
            println!("  {platform} takes it: {}", crate::secrets::scrub(&who));
            Ok(())
        }
        Ok(Err(AdapterError::Config(why))) => Err(why),
        Ok(Err(AdapterError::Other(why))) => Err(format!("{platform} cannot be asked: {why}")),
        Err(_) => Err(format!(
            "{platform} did not answer within {} s",
            CHECK_TIMEOUT.as_secs()
        )),
    }
}

/// Why `value` cannot be a line of `.env` as it is (it would be read back as something
/// else: cut at a `#`, unquoted, expanded), if it cannot.
fn unfit_for_env(value: &str) -> Option<&'static str> {
    if value.chars().any(char::is_control) {
        Some("has a line break or another control character")
    } else if value
        .chars()
        .any(|c| c.is_whitespace() || matches!(c, '"' | '\'' | '\\' | '$' | '#'))
    {
        Some(
            "has a space, a quote, `$`, `\\` or `#`, which .env would not read back as typed; choose another",
        )
    } else {
        None
    }
}

/// Set `answers` in `.env`, whole and private.
fn save_vars(home: &Path, answers: &[(String, String)]) -> std::io::Result<()> {
    let path = home.join(".env");
    let mut dotenv = config::edit::read_or_empty(&path)?;
    for (var, value) in answers {
        if let Some(why) = unfit_for_env(value) {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("{var} {why}"),
            ));
        }
        dotenv = config::edit::set_var(&dotenv, var, value);
    }
    crate::home::write_private(&path, dotenv.as_bytes())
}
