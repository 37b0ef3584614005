//! Model servers already running on this machine: Ollama (11434), llama.cpp's server
//! (8080), LM Studio (1234) and vLLM (8000), each asked `GET /v1/models` on loopback with a
//! short timeout. Found servers are only ever *offered* (check-config says how to use one;
//! the first run will ask the person to confirm): any local user can serve a "model" on
//! such a port, and the model drives an agent that runs commands.

use std::time::Duration;

/// How long one server may take to answer.
const PROBE_TIMEOUT: Duration = Duration::from_millis(500);
/// Probe these base URLs instead of the known ports (comma-separated; for tests).
pub const URLS_VAR: &str = "HERMES_LOCAL_MODEL_URLS";

/// At most this many model names of one server are shown.
const MODELS_SHOWN: usize = 20;

/// A model name as whoever holds the port wrote it, if it is a plain name: no control
/// characters (a newline or a terminal escape would forge output) and at most 100 characters.
fn printable_name(name: &str) -> Option<String> {
    (!name.is_empty() && name.len() <= 100 && !name.chars().any(char::is_control))
        .then(|| name.to_owned())
}

/// The servers looked for: a name and Hermes' provider for it, and where it listens.
const KNOWN: [(&str, &str, &str); 4] = [
    ("Ollama", "ollama", "http://127.0.0.1:11434/v1"),
    ("llama.cpp", "custom", "http://127.0.0.1:8080/v1"),
    ("LM Studio", "lmstudio", "http://127.0.0.1:1234/v1"),
    ("vLLM", "custom", "http://127.0.0.1:8000/v1"),
];

/// A server that answered, with the models it serves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalServer {
    pub name: String,
    /// Hermes' provider name for it (`custom` for a plain OpenAI-compatible server).
    pub provider: &'static str,
    pub base_url: String,
    pub models: Vec<String>,
}

/// Every known server that answers on this machine, in the order of [`KNOWN`] (or of
/// [`URLS_VAR`] when set), asked at once.
pub async fn find() -> Vec<LocalServer> {
    let candidates: Vec<(String, &'static str, String)> = match std::env::var(URLS_VAR) {
        Ok(urls) => urls
            .split(',')
            .map(str::trim)
            .filter(|u| !u.is_empty())
            .map(|u| (u.to_owned(), "custom", u.trim_end_matches('/').to_owned()))
            .collect(),
        Err(_) => KNOWN
            .iter()
            .map(|(name, provider, url)| (name.to_string(), *provider, url.to_string()))
            .collect(),
    };
    let Ok(client) = reqwest::Client::builder()
        .timeout(PROBE_TIMEOUT)
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        .build()
    else {
        return Vec::new();
    };
    let probes = candidates.into_iter().map(|(name, provider, base_url)| {
        let client = client.clone();
        async move {
            let answer = client.get(format!("{base_url}/models")).send().await.ok()?;
            if !answer.status().is_success() {
                return None;
            }
            let listed: serde_json::Value = answer.json().await.ok()?;
            let models = listed
                .get("data")?
                .as_array()?
                .iter()
                .filter_map(|m| m.get("id")?.as_str().and_then(printable_name))
                .take(MODELS_SHOWN)
                .collect();
            Some(LocalServer {
                name,
                provider,
                base_url,
                models,
            })
        }
    });
    futures_util::future::join_all(probes)
        .await
        .into_iter()
        .flatten()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_model_name_that_could_forge_output_is_not_shown() {
        assert_eq!(printable_name("qwen3:8b").as_deref(), Some("qwen3:8b"));
        assert_eq!(printable_name("m\n      base_url: http://evil"), None);
        assert_eq!(printable_name("\u{1b}[2Jm"), None);
        assert_eq!(printable_name(&"m".repeat(101)), None);
        assert_eq!(printable_name(""), None);
    }
}
