//! `check-config --online`: the configuration tried against the world. The model's endpoint
//! is asked for its list of models with the key, and each enabled platform is asked who the
//! bot is (`Adapter::check_credentials`), each within a few seconds; a refusal or silence
//! is a problem, so the status says whether `run` would work.

use std::time::Duration;

use hermes_adapter::AdapterError;

use super::print_line;
use crate::config::{Config, Dialect, Problem};
use crate::secrets;

/// How long one check may take.
const CHECK_TIMEOUT: Duration = Duration::from_secs(10);

/// Every check, its outcome printed, its failures added to `problems`.
pub(super) async fn check(c: &Config, problems: &mut Vec<Problem>) {
    scrubbed_println!("\nOnline checks:");
    check_model(c, problems).await;
    check_platforms(c, problems).await;
}

/// `GET {base_url}/models` (Anthropic: `/v1/models`) with the key: reachable, key taken,
/// and the model listed.
async fn check_model(c: &Config, problems: &mut Vec<Problem>) {
    let model = &c.model;
    let client = match reqwest::Client::builder().timeout(CHECK_TIMEOUT).build() {
        Ok(client) => client,
        Err(e) => {
            problems.push(Problem::error(
                "model.base_url",
                format!("no HTTP client: {e}"),
            ));
            return;
        }
    };
    let request = match model.dialect {
        Dialect::OpenAi => {
            let request = client.get(format!("{}/models", model.base_url));
            match &model.api_key {
                Some(key) => request.bearer_auth(key.expose()),
                None => request,
            }
        }
        Dialect::Anthropic => {
            let request = client
                .get(format!("{}/v1/models", model.base_url))
                .header("anthropic-version", "2023-06-01");
            match &model.api_key {
                Some(key) => request.header("x-api-key", key.expose()),
                None => request,
            }
        }
    };
    let answer = match request.send().await {
        Ok(answer) => answer,
        Err(e) => {
            problems.push(Problem::error(
                "model.base_url",
                format!(
                    "cannot reach {}: {}",
                    model.base_url,
                    hermes_adapter::describe_reqwest(&e)
                ),
            ));
            return;
        }
    };
    let status = answer.status();
    match status.as_u16() {
        200..=299 => {
            let listed = answer
                .json::<serde_json::Value>()
                .await
                .ok()
                .and_then(|v| v.get("data").and_then(|d| d.as_array()).cloned())
                .unwrap_or_default();
            let named = listed
                .iter()
                .any(|m| m.get("id").and_then(|i| i.as_str()) == Some(model.model.as_str()));
            if named || listed.is_empty() {
                scrubbed_println!("  model: {} answers, key taken", model.base_url);
            } else {
                scrubbed_println!("  model: {} answers, key taken", model.base_url);
                problems.push(Problem::warning(
                    "model.default",
                    format!(
                        "{} does not list {:?} among its {} models; check the name",
                        model.base_url,
                        model.model,
                        listed.len()
                    ),
                ));
            }
        }
        401 | 403 => problems.push(Problem::error(
            if model.api_key.is_some() {
                "model.api_key"
            } else {
                "model.provider"
            },
            format!(
                "{} refused the key (HTTP {status}); check it in .env or model.api_key",
                model.base_url
            ),
        )),
        404 | 405 => {
            scrubbed_println!(
                "  model: {} answers, but has no list of models (HTTP {status}); the key was not tried",
                model.base_url
            );
        }
        _ => problems.push(Problem::warning(
            "model.base_url",
            format!(
                "{} answered HTTP {status} to a list of models",
                model.base_url
            ),
        )),
    }
}

/// Each enabled platform asked who the bot is.
async fn check_platforms(c: &Config, problems: &mut Vec<Problem>) {
    for platform in &c.platforms {
        let key = format!("platforms.{}", platform.platform().config_section());
        let adapter = match platform.build() {
            Ok(adapter) => adapter,
            Err(e) => {
                problems.push(Problem::error(key, e.to_string()));
                continue;
            }
        };
        match tokio::time::timeout(CHECK_TIMEOUT, adapter.check_credentials()).await {
            Ok(Ok(who)) => scrubbed_println!("  {key}: credentials taken: {who}"),
            Ok(Err(AdapterError::Config(why))) => problems.push(Problem::error(key, why)),
            Ok(Err(AdapterError::Other(why))) => {
                problems.push(Problem::error(key, format!("cannot be asked: {why}")))
            }
            Err(_) => problems.push(Problem::error(
                key,
                format!("no answer within {}s", CHECK_TIMEOUT.as_secs()),
            )),
        }
    }
}
