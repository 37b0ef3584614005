//! The models a turn can use: the main one, the fallback chain (`fallback_providers`), and
//! any `provider:model` a chat switched to with `/model` (clients made once and kept).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::config::{ModelConfig, ModelSpec, ProviderKeys, provider, resolve_model};
use crate::llm::LlmClient;

/// How many `/model` clients are kept.
const MAX_CHOSEN: usize = 32;

pub struct Models {
    pub primary: Arc<LlmClient>,
    /// Tried in order when the model of a turn fails it.
    pub fallbacks: Vec<Arc<LlmClient>>,
    keys: ProviderKeys,
    /// Clients for `/model` choices, by the name as given.
    chosen: Mutex<HashMap<String, Arc<LlmClient>>>,
}

impl Models {
    pub fn new(primary: ModelConfig, fallbacks: Vec<ModelConfig>, keys: ProviderKeys) -> Self {
        Models {
            primary: Arc::new(LlmClient::new(primary)),
            fallbacks: fallbacks
                .into_iter()
                .map(|c| Arc::new(LlmClient::new(c)))
                .collect(),
            keys,
            chosen: Mutex::new(HashMap::new()),
        }
    }

    /// The client for a `/model` name: `provider:model`, or a model of the main model's
    /// provider (model names may hold `:` themselves, as `llama3:8b` does: the part before
    /// the first `:` counts as a provider only when it names one).
    pub fn resolve(&self, name: &str) -> Result<Arc<LlmClient>, String> {
        let name = name.trim();
        if name.is_empty() {
            return Err("no model name is given".into());
        }
        if let Some(client) = self.chosen.lock().expect("models lock").get(name) {
            return Ok(client.clone());
        }
        let main = self.primary.config();
        let spec = match name.split_once(':') {
            Some((p, model)) if provider(p).is_some() => {
                let same = provider(p).map(|info| info.name) == Some(main.provider.as_str());
                ModelSpec {
                    provider: Some(p.to_owned()),
                    model: Some(model.to_owned()),
                    // The main model's endpoint and key stay with it when only the model
                    // changes (a `custom` endpoint has no other root).
                    base_url: same.then(|| main.base_url.clone()),
                    api_key: if same { main.api_key.clone() } else { None },
                }
            }
            _ => ModelSpec {
                provider: Some(main.provider.clone()),
                model: Some(name.to_owned()),
                base_url: Some(main.base_url.clone()),
                api_key: main.api_key.clone(),
            },
        };
        let config = resolve_model(spec, &self.keys, main)?;
        if config.api_key.is_none() && main.api_key.is_some() {
            return Err(format!(
                "no API key for {} is set ({})",
                config.provider,
                provider(&config.provider)
                    .map(|p| p.key_vars.join(" or "))
                    .unwrap_or_default()
            ));
        }
        let client = Arc::new(LlmClient::new(config));
        let mut chosen = self.chosen.lock().expect("models lock");
        // Names people typed are kept, within reason (each client has its connections).
        if chosen.len() >= MAX_CHOSEN {
            chosen.clear();
        }
        chosen.insert(name.to_owned(), client.clone());
        Ok(client)
    }
}

impl Models {
    /// `client` thinking at `effort` (a chat's `/reasoning` level): the same client when it
    /// already does, else one made once and kept with the `/model` clients.
    pub fn with_effort(&self, client: &Arc<LlmClient>, effort: &str) -> Arc<LlmClient> {
        let config = client.config();
        if config.reasoning_effort.as_deref() == Some(effort) {
            return client.clone();
        }
        let name = format!("{}:{}#effort={effort}", config.provider, config.model);
        let mut chosen = self.chosen.lock().expect("models lock");
        if let Some(made) = chosen.get(&name) {
            return made.clone();
        }
        if chosen.len() >= MAX_CHOSEN {
            chosen.clear();
        }
        let made = Arc::new(LlmClient::new(ModelConfig {
            reasoning_effort: Some(effort.to_owned()),
            ..config.clone()
        }));
        chosen.insert(name, made.clone());
        made
    }
}

/// "claude-sonnet-4 (anthropic)".
pub fn describe(client: &LlmClient) -> String {
    format!("{} ({})", client.model(), client.config().provider)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Dialect, Secret};

    fn models() -> Models {
        let mut main = crate::llm::tests::model("http://127.0.0.1:9/v1");
        main.api_key = Some(Secret::new("main-key"));
        let vars = crate::config::EnvVars::new(
            [("ANTHROPIC_API_KEY".to_owned(), "ant-key".to_owned())],
            "",
        );
        let keys = ProviderKeys::from_env(&vars);
        Models::new(main, Vec::new(), keys)
    }

    #[test]
    fn names_resolve_to_a_provider_and_model() {
        let models = models();
        let claude = models.resolve("anthropic:claude-sonnet-4").unwrap();
        assert_eq!(claude.config().dialect, Dialect::Anthropic);
        assert_eq!(claude.config().base_url, "https://api.anthropic.com");
        assert_eq!(
            claude.config().api_key.as_ref().unwrap().expose(),
            "ant-key"
        );
        // A model of the main provider keeps its endpoint and key; a colon in the name
        // is part of the name.
        let local = models.resolve("llama3:8b").unwrap();
        assert_eq!(local.model(), "llama3:8b");
        assert_eq!(local.config().base_url, "http://127.0.0.1:9/v1");
        assert_eq!(
            local.config().api_key.as_ref().unwrap().expose(),
            "main-key"
        );
        // No key for that provider.
        let err = models.resolve("groq:llama-3.3").err().unwrap();
        assert!(err.contains("GROQ_API_KEY"), "{err}");
        assert!(
            models.resolve("nowhere:x").is_ok(),
            "unknown prefix = model name"
        );
        assert!(Arc::ptr_eq(
            &models.resolve("anthropic:claude-sonnet-4").unwrap(),
            &claude
        ));
    }
}
