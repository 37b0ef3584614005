//! A fake web search service speaking Tavily's API: `POST /search` answers the results it
//! was given (`title`, `url`, `content`), `POST /extract` answers each URL's page text
//! ("Page text of <url>", or a failure for a URL containing `fail`). Requests are recorded
//! with their `Authorization` header.

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
            .with_state(fake.clone());
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        fake
    }

    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr.expect("started"))
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
