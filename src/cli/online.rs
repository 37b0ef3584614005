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

/// The model's list of models asked with the key ([`crate::llm::check::ask_models`]):
/// reachable, key taken (a 2xx that is not a list of models is not taken as proof), and
/// the model listed.
async fn check_model(c: &Config, problems: &mut Vec<Problem>) {
    use crate::llm::check::{ModelAnswer, ask_models};
    let model = &c.model;
    if !model.is_chosen() {
        scrubbed_println!(
            "  model: none chosen yet (the web chat's form, or `hermes-gateway setup`)"
        );
        return;
    }
    let key_name = if model.api_key.is_some() {
        "model.api_key"
    } else {
        "model.provider"
    };
    match ask_models(model, CHECK_TIMEOUT).await {
        ModelAnswer::Listed { named, count } => {
            let taken = if model.api_key.is_some() {
                "key taken"
            } else {
                "no key needed"
            };
            scrubbed_println!("  model: {} answers, {taken}", model.base_url);
            if named == Some(false) {
                problems.push(Problem::warning(
                    "model.default",
                    format!(
                        "{} does not list {:?} among its {count} models; check the name",
                        model.base_url, model.model
                    ),
                ));
            }
        }
        ModelAnswer::NotAList => problems.push(Problem::warning(
            "model.base_url",
            format!(
                "{} answered, but not with a list of models (a portal or a proxy page?)",
                model.base_url
            ),
        )),
        ModelAnswer::NoList(status) => scrubbed_println!(
            "  model: {} answers, but has no list of models (HTTP {status}); the key was not tried",
            model.base_url
        ),
        ModelAnswer::Refused(status) => problems.push(Problem::error(
            key_name,
            format!(
                "{} refused the key (HTTP {status}); check it in .env or model.api_key",
                model.base_url
            ),
        )),
        ModelAnswer::Status(status) => problems.push(Problem::warning(
            "model.base_url",
            format!(
                "{} answered HTTP {status} to a list of models",
                model.base_url
            ),
        )),
        ModelAnswer::Unreachable(why) => problems.push(Problem::error(
            "model.base_url",
            format!("cannot reach {}: {why}", model.base_url),
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
