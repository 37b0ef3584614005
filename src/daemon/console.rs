//! The gateway's side of the operator's questions ([`Console`]), for the web chat: which
//! model answers, the model servers running on this machine (offered, never taken without
//! the person's confirmation), and a model chosen in the form, tried
//! ([`crate::llm::check::try_model`]), written into `config.yaml` and `.env` (private,
//! whole) and applied by a reload (SIGHUP, as `systemctl reload` does).

use std::path::PathBuf;

use hermes_adapter::{
    Console, LocalModelServer, ModelChoice, ModelSetup, ProviderOffer, async_trait,
};

use crate::config::{self, ModelConfig, PROVIDERS};
use crate::llm::check::{LOCAL_PROVIDERS, try_model};

pub(super) struct GatewayConsole {
    pub(super) home: PathBuf,
    /// The model in use.
    pub(super) model: ModelConfig,
    /// One choice at a time: two would race on reading and rewriting the files.
    pub(super) choosing: tokio::sync::Mutex<()>,
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
        let _one_at_a_time = self.choosing.lock().await;
        let write = try_model(&self.home, &choice).await?;
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
