//! `web_search {query, limit}` and `web_extract {urls, char_limit}` (Hermes' names),
//! through the service Hermes would pick (`web.backend`, else the first key found): Tavily
//! (`TAVILY_API_KEY`), Exa (`EXA_API_KEY`) or Firecrawl (`FIRECRAWL_API_KEY`,
//! `FIRECRAWL_API_URL` for a self-hosted one); hidden without one. Pages are fetched by
//! the service, never by the daemon, so a prompt-injected URL cannot reach the host's own
//! network. Long pages are cut to their head and tail.

use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use serde_json::{Value, json};

use super::output::items;
use crate::config::{WebBackend, WebConfig};
use crate::tool::{ToolContext, ToolResult, TypedTool};
use schemars::JsonSchema;
use serde::Deserialize;

/// The search service.
pub struct Web {
    http: reqwest::Client,
    config: Option<WebConfig>,
}

/// One search result.
struct Hit {
    title: String,
    url: String,
    snippet: String,
}

/// One page read, or why not.
struct Page {
    url: String,
    text: Result<String, String>,
}

impl Web {
    pub fn new(config: Option<WebConfig>) -> Arc<Self> {
        Arc::new(Web {
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(60))
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .unwrap_or_default(),
            config,
        })
    }

    fn unavailable(&self) -> Option<String> {
        self.config.is_none().then(|| {
            "no web search key (TAVILY_API_KEY, EXA_API_KEY or FIRECRAWL_API_KEY)".to_owned()
        })
    }

    async fn post(&self, endpoint: &str, body: Value) -> Result<Value, String> {
        let config = self.config.as_ref().ok_or("no search key")?;
        let mut request = self
            .http
            .post(format!("{}/{endpoint}", config.base_url))
            .json(&body);
        if let Some(key) = &config.key {
            request = match config.backend {
                WebBackend::Exa => request.header("x-api-key", key.expose()),
                WebBackend::Tavily | WebBackend::Firecrawl => request.bearer_auth(key.expose()),
            };
        }
        let response = request
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

    /// Up to `limit` results for `query`.
    async fn search(&self, query: &str, limit: u64) -> Result<Vec<Hit>, String> {
        let backend = self.config.as_ref().ok_or("no search key")?.backend;
        let text = |v: &Value| v.as_str().unwrap_or_default().replace('\n', " ");
        let hits = match backend {
            WebBackend::Tavily => {
                let answer = self
                    .post("search", json!({"query": query, "max_results": limit}))
                    .await?;
                items(&answer["results"])
                    .map(|r| Hit {
                        title: text(&r["title"]),
                        url: text(&r["url"]),
                        snippet: text(&r["content"]),
                    })
                    .collect()
            }
            WebBackend::Exa => {
                let body = json!({"query": query, "numResults": limit,
                                  "contents": {"text": {"maxCharacters": 500}}});
                let answer = self.post("search", body).await?;
                items(&answer["results"])
                    .map(|r| Hit {
                        title: text(&r["title"]),
                        url: text(&r["url"]),
                        snippet: text(r.get("summary").unwrap_or(&r["text"])),
                    })
                    .collect()
            }
            WebBackend::Firecrawl => {
                let answer = self
                    .post("v1/search", json!({"query": query, "limit": limit}))
                    .await?;
                items(&answer["data"])
                    .map(|r| Hit {
                        title: text(&r["title"]),
                        url: text(&r["url"]),
                        snippet: text(&r["description"]),
                    })
                    .collect()
            }
        };
        Ok(hits)
    }

    /// Each URL's text (or why it could not be read).
    async fn extract(&self, urls: &[&str]) -> Result<Vec<Page>, String> {
        let backend = self.config.as_ref().ok_or("no search key")?.backend;
        let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
        match backend {
            WebBackend::Tavily => {
                let answer = self.post("extract", json!({"urls": urls})).await?;
                let read = items(&answer["results"]).map(|r| Page {
                    url: text(&r["url"]),
                    text: Ok(r["raw_content"]
                        .as_str()
                        .or_else(|| r["content"].as_str())
                        .unwrap_or_default()
                        .to_owned()),
                });
                let failed = items(&answer["failed_results"]).map(|f| Page {
                    url: text(&f["url"]),
                    text: Err(f["error"].as_str().unwrap_or("failed").to_owned()),
                });
                Ok(read.chain(failed).collect())
            }
            WebBackend::Exa => {
                let answer = self
                    .post("contents", json!({"urls": urls, "text": true}))
                    .await?;
                let read = items(&answer["results"]).map(|r| Page {
                    url: text(&r["url"]),
                    text: Ok(text(&r["text"])),
                });
                let failed = items(&answer["statuses"])
                    .filter(|s| s["status"] == "error")
                    .map(|s| Page {
                        url: text(&s["id"]),
                        text: Err(s["error"]["tag"].as_str().unwrap_or("failed").to_owned()),
                    });
                Ok(read.chain(failed).collect())
            }
            WebBackend::Firecrawl => {
                let pages = futures_util::future::join_all(urls.iter().map(|url| async move {
                    let text = match self
                        .post("v1/scrape", json!({"url": url, "formats": ["markdown"]}))
                        .await
                    {
                        Ok(answer) if answer["success"] != false => answer["data"]["markdown"]
                            .as_str()
                            .map(str::to_owned)
                            .ok_or_else(|| "no text".to_owned()),
                        Ok(answer) => Err(answer["error"].as_str().unwrap_or("failed").to_owned()),
                        Err(e) => Err(e),
                    };
                    Page {
                        url: url.to_string(),
                        text,
                    }
                }))
                .await;
                Ok(pages)
            }
        }
    }
}

pub struct WebSearchTool(pub Arc<Web>);

/// `web_search`'s arguments.
#[derive(Deserialize, JsonSchema)]
pub struct WebSearchArgs {
    query: String,
    /// How many results (default 5, at most 20).
    limit: Option<u64>,
}

impl TypedTool for WebSearchTool {
    type Args = WebSearchArgs;
    const NAME: &'static str = "web_search";
    const TOOLSET: &'static str = "web";

    fn description(&self) -> String {
        "Search the web. Answers with titles, URLs and short descriptions; web_extract reads pages."
            .into()
    }

    fn why_unavailable(&self) -> Option<String> {
        self.0.unavailable()
    }

    fn only_reads(&self, _args: &WebSearchArgs) -> bool {
        true
    }

    fn call<'a>(&'a self, args: WebSearchArgs, _ctx: &'a ToolContext) -> BoxFuture<'a, ToolResult> {
        Box::pin(async move {
            let query = args.query.as_str();
            if query.trim().is_empty() {
                return ToolResult::text("error: `query` is required");
            }
            let limit = args.limit.unwrap_or(5).clamp(1, 20);
            let hits = match self.0.search(query, limit).await {
                Ok(hits) => hits,
                Err(e) => return ToolResult::text(format!("error: {e}")),
            };
            let lines: Vec<String> = hits
                .iter()
                .enumerate()
                .map(|(i, h)| format!("{}. {} — {}\n   {}", i + 1, h.title, h.url, h.snippet))
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

/// `web_extract`'s arguments.
#[derive(Deserialize, JsonSchema)]
pub struct WebExtractArgs {
    #[schemars(length(max = 5))]
    urls: Vec<String>,
    /// Characters kept per page (default 15000, at least 2000).
    char_limit: Option<u64>,
}

impl TypedTool for WebExtractTool {
    type Args = WebExtractArgs;
    const NAME: &'static str = "web_extract";
    const TOOLSET: &'static str = "web";

    fn description(&self) -> String {
        "Read web pages (up to 5 URLs) as text.".into()
    }

    fn why_unavailable(&self) -> Option<String> {
        self.0.unavailable()
    }

    fn only_reads(&self, _args: &WebExtractArgs) -> bool {
        true
    }

    fn call<'a>(
        &'a self,
        args: WebExtractArgs,
        _ctx: &'a ToolContext,
    ) -> BoxFuture<'a, ToolResult> {
        Box::pin(async move {
            let urls: Vec<&str> = args
                .urls
                .iter()
                .map(String::as_str)
                .filter(|u| u.starts_with("http://") || u.starts_with("https://"))
                .take(5)
                .collect();
            if urls.is_empty() {
                return ToolResult::text("error: `urls` needs at least one http(s) URL");
            }
            let limit = args.char_limit.unwrap_or(15_000).clamp(2_000, 100_000) as usize;
            let pages: Vec<String> = match self.0.extract(&urls).await {
                Ok(pages) => pages
                    .into_iter()
                    .map(|p| match p.text {
                        Ok(text) => format!("## {}\n{}", p.url, head_and_tail(&text, limit)),
                        Err(why) => format!("## {}\n(could not be read: {why})", p.url),
                    })
                    .collect(),
                Err(e) => return ToolResult::text(format!("error: {e}")),
            };
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
