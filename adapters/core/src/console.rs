//! What a platform the operator uses (the web chat) may ask of the gateway besides
//! messages: which model answers, and choosing one. The daemon implements [`Console`] (it
//! owns the configuration and writes it); an adapter only shows and forwards.

use serde::{Deserialize, Serialize};

/// A model server found running on this machine, offered for the person to confirm (any
/// local user could serve a "model" on such a port).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LocalModelServer {
    pub name: String,
    pub provider: String,
    pub base_url: String,
    pub models: Vec<String>,
}

/// A provider the setup form offers, with where its key goes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProviderOffer {
    pub name: String,
    /// Its API root; empty for `custom` (the person gives one).
    pub base_url: String,
    /// The `.env` variable its key is kept in; `None` when it needs none.
    pub key_var: Option<String>,
}

/// The model in use, or what could be chosen.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelSetup {
    /// `provider / model` of the model in use; `None` while none is chosen.
    pub chosen: Option<String>,
    pub local: Vec<LocalModelServer>,
    pub providers: Vec<ProviderOffer>,
}

/// A choice from the setup form.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelChoice {
    pub provider: String,
    pub model: String,
    #[serde(default)]
    pub base_url: Option<String>,
    #[serde(default)]
    pub api_key: Option<String>,
}

/// The gateway's side of the operator's questions.
#[crate::async_trait]
pub trait Console: Send + Sync {
    async fn model_setup(&self) -> ModelSetup;
    /// Try `choice` with a real call to its endpoint; when it answers, write it into the
    /// configuration and apply it. `Ok` says what was set, `Err` what is wrong, in words
    /// for the person (never the key).
    async fn choose_model(&self, choice: ModelChoice) -> Result<String, String>;
}
