//! `check-config --online`: the configuration tried against the world. The model's endpoint
//! is asked for its list of models with the key, and each enabled platform is asked who the
//! bot is (`Adapter::check_credentials`), each within a few seconds; a refusal or silence
//! is a problem, so the status says whether `run` would work.

use std::time::Duration;

use hermes_adapter::AdapterError;

use super::print_line;
use crate::config::{Config, Problem};
use crate::secrets;

/// How long one check may take.
const CHECK_TIMEOUT: Duration = Duration::from_secs(10);

/// Every check, its outcome printed, its failures added to `problems`.
pub(super) async fn check(c: &Config, problems: &mut Vec<Problem>) {
    scrubbed_println!("\nOnline checks:");
    check_model(c, problems).await;
    check_platforms(c, problems).await;
}

/// The model's list of models ([`crate::llm::models_request`]) asked with the key:
/// reachable, key taken (a 2xx that is not a list of models is not taken as proof), and
/// the model listed.
async fn check_model(c: &Config, problems: &mut Vec<Problem>) {
    let model = &c.model;
    // No redirects: a key must not follow one to another host (as the model client).
    let client = match reqwest::Client::builder()
        .timeout(CHECK_TIMEOUT)
        .redirect(reqwest::redirect::Policy::none())
        .build()
    {
        Ok(client) => client,
        Err(e) => {
            problems.push(Problem::error(
                "model.base_url",
                format!("no HTTP client: {e}"),
            ));
            return;
        }
    };
    let (url, headers) = crate::llm::models_request(model);
    let request = headers
        .into_iter()
        .fold(client.get(url), |request, (name, value)| {
            request.header(name, value)
        });
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
                .and_then(|v| v.get("data").and_then(|d| d.as_array()).cloned());
            let Some(listed) = listed else {
                problems.push(Problem::warning(
                    "model.base_url",
                    format!(
                        "{} answered, but not with a list of models (a portal or a proxy page?)",
                        model.base_url
                    ),
                ));
                return;
            };
            let taken = if model.api_key.is_some() {
                "key taken"
            } else {
                "no key needed"
            };
            scrubbed_println!("  model: {} answers, {taken}", model.base_url);
            let named = listed
                .iter()
                .any(|m| m.get("id").and_then(|i| i.as_str()) == Some(model.model.as_str()));
            if !named && !listed.is_empty() {
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
