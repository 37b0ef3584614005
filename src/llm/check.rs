//! Whether a model's endpoint takes its key: its list of models asked for with the key, as
//! the chat client would send it, following no redirect (a key must not follow one to
//! another host). For `check-config --online`, the web chat's setup form and `setup`.

use std::time::Duration;

use crate::config::ModelConfig;

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
