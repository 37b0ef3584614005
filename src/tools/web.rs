//! `web_search {query, limit}` and `web_extract {urls, char_limit}` (Hermes' names),
//! through Tavily when `TAVILY_API_KEY` is set (`TAVILY_BASE_URL` for another root);
//! hidden otherwise. Pages are fetched by the search service, never by the daemon, so a
//! prompt-injected URL cannot reach the host's own network. Long pages are cut to their
//! head and tail.

use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use serde_json::{Value, json};

use super::{Tool, ToolContext, ToolResult};
use crate::config::Secret;

/// The search service.
pub struct Web {
    http: reqwest::Client,
    base_url: String,
    key: Option<Secret>,
}

impl Web {
    pub fn new(base_url: Option<String>, key: Option<Secret>) -> Arc<Self> {
        Arc::new(Web {
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(60))
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .unwrap_or_default(),
            base_url: base_url
                .unwrap_or_else(|| "https://api.tavily.com".into())
                .trim_end_matches('/')
                .to_owned(),
            key,
        })
    }

    fn unavailable(&self) -> Option<String> {
        self.key
            .is_none()
            .then(|| "no search key (TAVILY_API_KEY)".to_owned())
    }

    async fn post(&self, endpoint: &str, body: Value) -> Result<Value, String> {
        let key = self.key.as_ref().ok_or("no search key")?;
        let response = self
            .http
            .post(format!("{}/{endpoint}", self.base_url))
            .bearer_auth(key.expose())
            .json(&body)
            .send()
            .await
            .map_err(|e| format!("the search service cannot be reached: {}", e.without_url()))?;
        let status = response.status();
        let body =
            crate::llm::read_capped(response, 4 * 1024 * 1024, Duration::from_secs(60)).await?;
        if !status.is_success() {
            return Err(format!(
                "the search service answered HTTP {}: {}",
                status.as_u16(),
                crate::llm::error_message(&String::from_utf8_lossy(&body))
            ));
        }
        serde_json::from_slice(&body).map_err(|e| format!("unreadable answer: {e}"))
    }
}

pub struct WebSearchTool(pub Arc<Web>);

impl Tool for WebSearchTool {
    fn name(&self) -> &'static str {
        "web_search"
    }

    fn toolset(&self) -> &'static str {
        "web"
    }

    fn definition(&self) -> Value {
        json!({
            "type": "function",
            "function": {
                "name": "web_search",
                "description": "Search the web. Answers with titles, URLs and short descriptions; web_extract reads pages.",
                "parameters": {
                    "type": "object",
                    "properties": {
                        "query": {"type": "string"},
                        "limit": {"type": "integer", "description": "How many results (default 5, at most 20)."}
                    },
                    "required": ["query"]
                }
            }
        })
    }

    fn unavailable(&self) -> Option<String> {
        self.0.unavailable()
    }

    fn reads_only(&self, _args: &Value) -> bool {
        true
    }

    fn run<'a>(&'a self, args: Value, _ctx: &'a ToolContext) -> BoxFuture<'a, ToolResult> {
        Box::pin(async move {
            let Some(query) = args
                .get("query")
                .and_then(Value::as_str)
                .filter(|q| !q.trim().is_empty())
            else {
                return ToolResult::text("error: `query` is required");
            };
            let limit = args
                .get("limit")
                .and_then(Value::as_u64)
                .unwrap_or(5)
                .clamp(1, 20);
            let answer = match self
                .0
                .post("search", json!({"query": query, "max_results": limit}))
                .await
            {
                Ok(a) => a,
                Err(e) => return ToolResult::text(format!("error: {e}")),
            };
            let lines: Vec<String> = answer["results"]
                .as_array()
                .into_iter()
                .flatten()
                .enumerate()
                .map(|(i, r)| {
                    format!(
                        "{}. {} — {}\n   {}",
                        i + 1,
                        r["title"].as_str().unwrap_or_default(),
                        r["url"].as_str().unwrap_or_default(),
                        r["content"].as_str().unwrap_or_default().replace('\n', " ")
                    )
                })
                .collect();
            ToolResult::text(if lines.is_empty() {
                "No results.".to_owned()
            } else {
                lines.join("\n")
            })
        })
    }
}

pub struct WebExtractTool(pub Arc<Web>);

impl Tool for WebExtractTool {
    fn name(&self) -> &'static str {
        "web_extract"
    }

    fn toolset(&self) -> &'static str {
        "web"
    }

    fn definition(&self) -> Value {
        json!({
            "type": "function",
            "function": {
                "name": "web_extract",
                "description": "Read web pages (up to 5 URLs) as text.",
                "parameters": {
                    "type": "object",
                    "properties": {
                        "urls": {"type": "array", "items": {"type": "string"}, "maxItems": 5},
                        "char_limit": {"type": "integer", "description": "Characters kept per page (default 15000, at least 2000)."}
                    },
                    "required": ["urls"]
                }
            }
        })
    }

    fn unavailable(&self) -> Option<String> {
        self.0.unavailable()
    }

    fn reads_only(&self, _args: &Value) -> bool {
        true
    }

    fn run<'a>(&'a self, args: Value, _ctx: &'a ToolContext) -> BoxFuture<'a, ToolResult> {
        Box::pin(async move {
            let urls: Vec<&str> = args
                .get("urls")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .filter(|u| u.starts_with("http://") || u.starts_with("https://"))
                .take(5)
                .collect();
            if urls.is_empty() {
                return ToolResult::text("error: `urls` needs at least one http(s) URL");
            }
            let limit = args
                .get("char_limit")
                .and_then(Value::as_u64)
                .unwrap_or(15_000)
                .clamp(2_000, 100_000) as usize;
            let answer = match self.0.post("extract", json!({"urls": urls})).await {
                Ok(a) => a,
                Err(e) => return ToolResult::text(format!("error: {e}")),
            };
            let mut pages = Vec::new();
            for r in answer["results"].as_array().into_iter().flatten() {
                let text = r["raw_content"]
                    .as_str()
                    .or_else(|| r["content"].as_str())
                    .unwrap_or_default();
                pages.push(format!(
                    "## {}\n{}",
                    r["url"].as_str().unwrap_or_default(),
                    head_and_tail(text, limit)
                ));
            }
            for f in answer["failed_results"].as_array().into_iter().flatten() {
                pages.push(format!(
                    "## {}\n(could not be read: {})",
                    f["url"].as_str().unwrap_or_default(),
                    f["error"].as_str().unwrap_or("failed")
                ));
            }
            ToolResult::text(if pages.is_empty() {
                "Nothing could be read.".to_owned()
            } else {
                pages.join("\n\n")
            })
        })
    }
}

/// `text` within `limit` characters: its head and tail with a note of what was cut.
fn head_and_tail(text: &str, limit: usize) -> String {
    let count = text.chars().count();
    if count <= limit {
        return text.to_owned();
    }
    let head: String = text.chars().take(limit * 2 / 3).collect();
    let tail: String = text.chars().skip(count - limit / 3).collect();
    format!("{head}\n[… {} characters cut …]\n{tail}", count - limit)
}
