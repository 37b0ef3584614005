//! The gateway's side of the operator's questions ([`Console`]), for the web chat: which
//! model answers, the model servers running on this machine (offered, never taken without
//! the person's confirmation), and a model chosen in the form, which is read exactly as
//! `config.yaml` would be, tried with a real call to its endpoint, written into
//! `config.yaml` and `.env` (private, whole) and applied by a reload (SIGHUP, as
//! `systemctl reload` does).

use std::path::PathBuf;
use std::time::Duration;

use hermes_adapter::{
    Console, LocalModelServer, ModelChoice, ModelSetup, ProviderOffer, async_trait,
};

use crate::config::edit::{ModelWrite, replace_section, set_var};
use crate::config::{self, EnvVars, ModelConfig, PROVIDERS};
use crate::llm::check::{ModelAnswer, ask_models};

/// How long the chosen model's endpoint may take to answer the check.
const CHECK_TIMEOUT: Duration = Duration::from_secs(10);
/// Providers that run on this machine and need no key.
const LOCAL_PROVIDERS: [&str; 2] = ["ollama", "lmstudio"];

pub(super) struct GatewayConsole {
    pub(super) home: PathBuf,
    /// The model in use.
    pub(super) model: ModelConfig,
}

impl GatewayConsole {
    /// The choice as it would be written, or what is wrong with it.
    fn to_write(choice: &ModelChoice) -> Result<ModelWrite, String> {
        let provider = choice.provider.trim().to_ascii_lowercase();
        let info = PROVIDERS
            .iter()
            .find(|p| p.name == provider)
            .ok_or_else(|| format!("{provider:?} is not a provider the gateway knows"))?;
        let base_url = choice
            .base_url
            .as_deref()
            .map(str::trim)
            .filter(|u| !u.is_empty())
            .map(|u| u.trim_end_matches('/').to_owned());
        if info.base_url.is_empty() && base_url.is_none() {
            return Err(
                "a custom provider needs its base URL (e.g. http://127.0.0.1:8080/v1)".into(),
            );
        }
        let key = choice
            .api_key
            .as_deref()
            .map(str::trim)
            .filter(|k| !k.is_empty())
            .map(|k| (info.key_vars[0].to_owned(), k.to_owned()));
        let write = ModelWrite {
            provider,
            model: choice.model.trim().to_owned(),
            base_url,
            key,
        };
        write.check()?;
        Ok(write)
    }

    /// The model `write` makes of the configuration on disk, read as a start would read
    /// it; the errors of that reading otherwise.
    fn read_with(&self, write: &ModelWrite) -> Result<ModelConfig, String> {
        let yaml = std::fs::read_to_string(self.home.join("config.yaml")).unwrap_or_default();
        let mut dotenv = std::fs::read_to_string(self.home.join(".env")).unwrap_or_default();
        if let Some((var, key)) = &write.key {
            dotenv = set_var(&dotenv, var, key);
        }
        let yaml = replace_section(&yaml, "model", &write.section());
        let env = EnvVars::new(crate::secrets::environment(), &dotenv);
        let loaded = config::load_from(&self.home, &yaml, &env);
        match loaded.config {
            Some(config) if config.model.is_chosen() => Ok(config.model),
            _ => Err(loaded
                .errors()
                .map(|p| p.to_string())
                .collect::<Vec<_>>()
                .join("; ")),
        }
    }
}

/// What the endpoint's answer means for the person choosing.
fn judged(model: &ModelConfig, answer: ModelAnswer) -> Result<(), String> {
    let at = &model.base_url;
    match answer {
        ModelAnswer::Listed {
            named: Some(false),
            count,
        } => Err(format!(
            "{at} answers, but does not serve {:?} (it lists {count} other models); check the name",
            model.model
        )),
        ModelAnswer::Listed { .. } | ModelAnswer::NoList(_) => Ok(()),
        ModelAnswer::Refused(status) => Err(format!("{at} refused the key (HTTP {status})")),
        ModelAnswer::NotAList => Err(format!(
            "{at} answered, but not as a model API does (a portal or a proxy page?)"
        )),
        ModelAnswer::Status(status) => Err(format!("{at} answered HTTP {status}")),
        ModelAnswer::Unreachable(why) => Err(format!("cannot reach {at}: {why}")),
    }
}

#[async_trait]
impl Console for GatewayConsole {
    async fn model_setup(&self) -> ModelSetup {
        let chosen = self
            .model
            .is_chosen()
            .then(|| format!("{} / {}", self.model.provider, self.model.model));
        // Only asked while none is chosen: a probe of four ports is not free.
        let local = if chosen.is_none() {
            crate::llm::local::find()
                .await
                .into_iter()
                .map(|s| LocalModelServer {
                    name: s.name,
                    provider: s.provider.to_owned(),
                    base_url: s.base_url,
                    models: s.models,
                })
                .collect()
        } else {
            Vec::new()
        };
        let providers = PROVIDERS
            .iter()
            .map(|p| ProviderOffer {
                name: p.name.to_owned(),
                base_url: p.base_url.to_owned(),
                key_var: (!LOCAL_PROVIDERS.contains(&p.name)).then(|| p.key_vars[0].to_owned()),
            })
            .collect();
        ModelSetup {
            chosen,
            local,
            providers,
        }
    }

    async fn choose_model(&self, choice: ModelChoice) -> Result<String, String> {
        let write = Self::to_write(&choice)?;
        let model = self.read_with(&write)?;
        judged(&model, ask_models(&model, CHECK_TIMEOUT).await)?;
        let home = self.home.clone();
        let written = write.clone();
        tokio::task::spawn_blocking(move || config::edit::write_model(&home, &written))
            .await
            .map_err(|e| format!("the configuration could not be written: {e}"))?
            .map_err(|e| format!("the configuration could not be written: {e}"))?;
        tracing::info!(provider = %write.provider, model = %write.model, "setup: a model was chosen in the web chat; reloading");
        // The same path as `systemctl reload`: the new configuration is read and applied.
        let _ = nix::sys::signal::raise(nix::sys::signal::Signal::SIGHUP);
        Ok(format!(
            "{} / {} answers; the gateway is starting with it",
            write.provider, write.model
        ))
    }
}
