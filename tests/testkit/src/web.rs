//! A fake web search service speaking three APIs Hermes uses, each answering the results
//! it was given and, for each URL read, "Page text of <url>" (or a failure for a URL
//! containing `fail`):
//! - Tavily at the root: `POST /search`, `POST /extract`;
//! - Exa under `/exa` (see [`FakeSearch::exa_url`]): `POST /search`, `POST /contents`;
//! - Firecrawl under `/firecrawl`: `POST /v1/search`, `POST /v1/scrape` (one URL each).
//!
//! Requests are recorded with their credential (`Authorization`, or Exa's `x-api-key`).

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::extract::State;
use axum::http::HeaderMap;
use axum::routing::post;
use axum::{Json, Router};
use serde_json::{Value, json};

#[derive(Clone, Default)]
pub struct FakeSearch {
    inner: Arc<Mutex<Inner>>,
    pub addr: Option<SocketAddr>,
}

#[derive(Default)]
struct Inner {
    results: Vec<Value>,
    requests: Vec<(String, Option<String>, Value)>,
}

impl FakeSearch {
    pub async fn start() -> FakeSearch {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let fake = FakeSearch {
            addr: Some(listener.local_addr().expect("addr")),
            ..Default::default()
        };
        let app = Router::new()
            .route("/search", post(search))
            .route("/extract", post(extract))
            .route("/exa/search", post(exa_search))
            .route("/exa/contents", post(exa_contents))
            .route("/firecrawl/v1/search", post(firecrawl_search))
            .route("/firecrawl/v1/scrape", post(firecrawl_scrape))
            .with_state(fake.clone());
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        fake
    }

    /// Tavily's root.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr.expect("started"))
    }

    /// Exa's root (`EXA_BASE_URL`).
    pub fn exa_url(&self) -> String {
        format!("{}/exa", self.base_url())
    }

    /// Firecrawl's root (`FIRECRAWL_API_URL`).
    pub fn firecrawl_url(&self) -> String {
        format!("{}/firecrawl", self.base_url())
    }

    /// What `/search` answers: (title, url, content) each.
    pub fn results(&self, results: &[(&str, &str, &str)]) {
        self.inner.lock().unwrap().results = results
            .iter()
            .map(|(title, url, content)| json!({"title": title, "url": url, "content": content, "score": 0.9}))
            .collect();
    }

    /// (path, Authorization header, body) of each request.
    pub fn requests(&self) -> Vec<(String, Option<String>, Value)> {
        self.inner.lock().unwrap().requests.clone()
    }
}

fn record(fake: &FakeSearch, path: &str, headers: &HeaderMap, body: &Value) {
    let auth = headers
        .get("authorization")
        .or_else(|| headers.get("x-api-key"))
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    fake.inner
        .lock()
        .unwrap()
        .requests
        .push((path.to_owned(), auth, body.clone()));
}

async fn search(
    State(fake): State<FakeSearch>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Json<Value> {
    record(&fake, "/search", &headers, &body);
    let results = fake.inner.lock().unwrap().results.clone();
    Json(json!({"query": body["query"], "results": results, "response_time": 0.1}))
}

async fn extract(
    State(fake): State<FakeSearch>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Json<Value> {
    record(&fake, "/extract", &headers, &body);
    let urls: Vec<String> = body["urls"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|u| u.as_str().map(str::to_owned))
        .collect();
    let (failed, read): (Vec<String>, Vec<String>) =
        urls.into_iter().partition(|u| u.contains("fail"));
    Json(json!({
        "results": read.iter().map(|u| json!({"url": u, "raw_content": format!("Page text of {u}")})).collect::<Vec<_>>(),
        "failed_results": failed.iter().map(|u| json!({"url": u, "error": "timeout"})).collect::<Vec<_>>(),
    }))
}

/// The URLs of a request, split into those read and those that fail.
fn read_and_failed(urls: &Value) -> (Vec<String>, Vec<String>) {
    urls.as_array()
        .into_iter()
        .flatten()
        .filter_map(|u| u.as_str().map(str::to_owned))
        .partition(|u| !u.contains("fail"))
}

async fn exa_search(
    State(fake): State<FakeSearch>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Json<Value> {
    record(&fake, "/exa/search", &headers, &body);
    let results: Vec<Value> = fake
        .inner
        .lock()
        .unwrap()
        .results
        .iter()
        .map(
            |r| json!({"id": r["url"], "title": r["title"], "url": r["url"], "text": r["content"]}),
        )
        .collect();
    Json(json!({"requestId": "r1", "results": results}))
}

async fn exa_contents(
    State(fake): State<FakeSearch>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Json<Value> {
    record(&fake, "/exa/contents", &headers, &body);
    let (read, failed) = read_and_failed(&body["urls"]);
    Json(json!({
        "results": read.iter().map(|u| json!({"id": u, "url": u, "title": "", "text": format!("Page text of {u}")})).collect::<Vec<_>>(),
        "statuses": read.iter().map(|u| json!({"id": u, "status": "success"}))
            .chain(failed.iter().map(|u| json!({"id": u, "status": "error", "error": {"tag": "CRAWL_TIMEOUT"}})))
            .collect::<Vec<_>>(),
    }))
}

async fn firecrawl_search(
    State(fake): State<FakeSearch>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Json<Value> {
    record(&fake, "/firecrawl/v1/search", &headers, &body);
    let data: Vec<Value> = fake
        .inner
        .lock()
        .unwrap()
        .results
        .iter()
        .map(|r| json!({"title": r["title"], "url": r["url"], "description": r["content"]}))
        .collect();
    Json(json!({"success": true, "data": data}))
}

async fn firecrawl_scrape(
    State(fake): State<FakeSearch>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Json<Value> {
    record(&fake, "/firecrawl/v1/scrape", &headers, &body);
    let url = body["url"].as_str().unwrap_or_default();
    if url.contains("fail") {
        return Json(json!({"success": false, "error": "timeout"}));
    }
    Json(
        json!({"success": true, "data": {"markdown": format!("Page text of {url}"),
                                          "metadata": {"sourceURL": url}}}),
    )
}
