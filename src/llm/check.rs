//! Whether a model's endpoint takes its key: its list of models asked for with the key, as
//! the chat client would send it, following no redirect (a key must not follow one to
//! another host). For `check-config --online`; and a model a person chooses (the web
//! chat's setup form, `hermes-gateway setup`) is read exactly as `config.yaml` would be and
//! tried this way before anything is written ([`try_model`]).

use std::path::Path;
use std::time::Duration;

use hermes_adapter::ModelChoice;

use crate::config::edit::{ModelWrite, read_or_empty, set_var};
use crate::config::{self, EnvVars, ModelConfig};

/// How long a chosen model's endpoint may take to answer the check.
const CHOICE_TIMEOUT: Duration = Duration::from_secs(10);
/// Providers that run on this machine and need no key.
pub const LOCAL_PROVIDERS: [&str; 2] = ["ollama", "lmstudio"];

/// What the endpoint said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModelAnswer {
    /// A list of models, the key taken (or none needed); whether the model is listed
    /// (`None`: the list is empty, so it says nothing).
    Listed { named: Option<bool>, count: usize },
    /// A 2xx that is not a list of models (a portal, a proxy's page): not proof.
    NotAList,
    /// No list of models here (404/405): the key was not tried.
    NoList(u16),
    /// The key was refused (401/403).
    Refused(u16),
    /// Another status.
    Status(u16),
    /// Nothing answered: why, in a few words.
    Unreachable(String),
}

/// Ask `model`'s endpoint for its list of models within `timeout`.
pub async fn ask_models(model: &ModelConfig, timeout: Duration) -> ModelAnswer {
    let client = match reqwest::Client::builder()
        .timeout(timeout)
        .redirect(reqwest::redirect::Policy::none())
        .build()
    {
        Ok(client) => client,
        Err(e) => return ModelAnswer::Unreachable(format!("no HTTP client: {e}")),
    };
    let (url, headers) = super::models_request(model);
    let request = headers
        .into_iter()
        .fold(client.get(url), |request, (name, value)| {
            request.header(name, value)
        });
    let answer = match request.send().await {
        Ok(answer) => answer,
        Err(e) => return ModelAnswer::Unreachable(hermes_adapter::describe_reqwest(&e)),
    };
    let status = answer.status().as_u16();
    match status {
        200..=299 => {
            let listed = answer
                .json::<serde_json::Value>()
                .await
                .ok()
                .and_then(|v| v.get("data").and_then(|d| d.as_array()).cloned());
            match listed {
                Some(listed) => ModelAnswer::Listed {
                    named: (!listed.is_empty()).then(|| {
                        listed.iter().any(|m| {
                            m.get("id").and_then(|i| i.as_str()) == Some(model.model.as_str())
                        })
                    }),
                    count: listed.len(),
                },
                None => ModelAnswer::NotAList,
            }
        }
        401 | 403 => ModelAnswer::Refused(status),
        404 | 405 => ModelAnswer::NoList(status),
        _ => ModelAnswer::Status(status),
    }
}

/// The choice as it would be written, or what is wrong with it.
fn to_write(choice: &ModelChoice) -> Result<ModelWrite, String> {
    let info = config::provider(&choice.provider).ok_or_else(|| {
        format!(
            "{:?} is not a provider the gateway knows",
            choice.provider.trim()
        )
    })?;
    let provider = info.name.to_owned();
    let base_url = choice
        .base_url
        .as_deref()
        .map(str::trim)
        .filter(|u| !u.is_empty())
        .map(|u| u.trim_end_matches('/').to_owned());
    if info.base_url.is_empty() && base_url.is_none() {
        return Err("a custom provider needs its base URL (e.g. http://127.0.0.1:8080/v1)".into());
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

/// The model `write` makes of `home`'s configuration, read as a start would read it; the
/// errors of that reading otherwise.
fn read_with(home: &Path, write: &ModelWrite) -> Result<ModelConfig, String> {
    let yaml = read_or_empty(&home.join("config.yaml")).map_err(|e| e.to_string())?;
    let mut dotenv = read_or_empty(&home.join(".env")).map_err(|e| e.to_string())?;
    if let Some((var, key)) = &write.key {
        dotenv = set_var(&dotenv, var, key);
    }
    let yaml = write.apply(&yaml);
    let env = EnvVars::new(crate::secrets::environment(), &dotenv);
    let loaded = config::load_from(home, &yaml, &env);
    match loaded.config {
        Some(config) if config.model.is_chosen() => Ok(config.model),
        _ => Err(loaded
            .errors()
            .map(|p| p.to_string())
            .collect::<Vec<_>>()
            .join("; ")),
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

/// Try `choice` for `home`: valid, read as `config.yaml` would be with it, and answered by
/// its endpoint. What to write, or what is wrong, in words for the person (never the key).
pub async fn try_model(home: &Path, choice: &ModelChoice) -> Result<ModelWrite, String> {
    let write = to_write(choice)?;
    // Files read and the configuration parsed off the runtime's workers.
    let (dir, candidate) = (home.to_path_buf(), write.clone());
    let model = tokio::task::spawn_blocking(move || read_with(&dir, &candidate))
        .await
        .map_err(|e| format!("the configuration could not be read: {e}"))??;
    key_goes_where_meant(&write, &model)?;
    let answer = ask_models(&model, CHOICE_TIMEOUT).await;
    if matches!(answer, ModelAnswer::NoList(_)) && !config::is_loopback_url(&model.base_url) {
        return Err(format!(
            "{} has no list of models, so neither the key nor the model could be checked",
            model.base_url
        ));
    }
    judged(&model, answer)?;
    Ok(write)
}

/// A key already kept (in `.env`) goes only to its provider's own address unless it is
/// typed again with the choice, and no key goes over plain http to another machine: a
/// choice in the form must not be a way to send the operator's key somewhere else.
fn key_goes_where_meant(write: &ModelWrite, model: &ModelConfig) -> Result<(), String> {
    if model.api_key.is_none() {
        return Ok(());
    }
    let url = model.base_url.trim_end_matches('/');
    let own = config::provider(&write.provider)
        .is_some_and(|p| !p.base_url.is_empty() && p.base_url.trim_end_matches('/') == url);
    if write.key.is_none() && !own && !config::is_loopback_url(url) {
        return Err(format!(
            "{url} is not {}'s own address: type the key again to send it there",
            write.provider
        ));
    }
    if url.starts_with("http://") && !config::is_loopback_url(url) {
        return Err(format!(
            "{url} is plain http on another machine: a key is only sent over https"
        ));
    }
    Ok(())
}
