//! The daemon's one HTTP server (`http.listen`, default `127.0.0.1:8091`): the adapters'
//! webhook routes, `/healthz` (the process answers), `/readyz` (every enabled adapter has
//! talked to its platform recently; per-adapter JSON), `/status` (that, and the counts
//! `hermes-gateway service status` shows) and `/metrics` (Prometheus text; see
//! `crate::metrics`); the last two want the bearer token `HERMES_HTTP_TOKEN` when it is set. A webhook route whose secret is not
//! configured answers every request 503, and a route's handler only sees requests its
//! verifier accepted on the raw body (invariant 7, enforced here for every adapter).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get};
use hermes_adapter::{Liveness, Platform, WebhookRequest, WebhookResponse, WebhookRoute};
use serde_json::json;
use subtle::ConstantTimeEq;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

/// The largest webhook body accepted (platform events are a few KiB).
const MAX_BODY: usize = 1024 * 1024;
/// An adapter is ready when it talked to its platform within this window (long polls
/// return at least every 15 s; gateways heartbeat every ~40 s).
pub const LIVE_WITHIN: Duration = Duration::from_secs(90);

/// What `/readyz` and `/status` report on.
#[derive(Clone, Default)]
pub struct Health {
    pub adapters: Vec<(Platform, Liveness)>,
    /// For `/status`'s counts (sessions, queues); `None` in tests of the server alone.
    pub store: Option<crate::store::Store>,
    /// When set, `/status` and `/metrics` want `Authorization: Bearer <token>`.
    pub token: Option<String>,
    /// How the agent's commands are confined, said in `/readyz` and `/status`.
    pub confinement: Option<std::sync::Arc<crate::confine::Confinement>>,
    /// This node among those sharing the store (its id and the leases it holds), said in
    /// `/readyz` and `/status`; `None` on a store of one node.
    pub node: Option<NodeReport>,
}

/// What this node holds, read when asked.
pub type NodeReport = std::sync::Arc<dyn Fn() -> serde_json::Value + Send + Sync>;

impl Health {
    /// Per-adapter readiness, and whether all are ready.
    pub fn report(&self) -> (bool, serde_json::Value) {
        let adapters: Vec<_> = self
            .adapters
            .iter()
            .map(|(platform, liveness)| {
                let since = liveness.since_last_beat();
                let live = since.is_some_and(|s| s <= LIVE_WITHIN);
                json!({
                    "platform": platform,
                    "live": live,
                    "last_contact_ms_ago": since.map(|s| s.as_millis() as u64),
                })
            })
            .collect();
        let ready = adapters.iter().all(|a| a["live"] == true);
        let mut body = json!({"ready": ready, "adapters": adapters});
        if let Some(sandbox) = self.sandbox() {
            body["sandbox"] = sandbox;
        }
        if let Some(node) = &self.node {
            body["node"] = node();
        }
        (ready, body)
    }

    /// What confines the agent's commands, with a warning when they are not fully
    /// confined (`null` until the first try at start-up is done).
    fn sandbox(&self) -> Option<serde_json::Value> {
        let confinement = self.confinement.as_ref()?;
        let Some(level) = confinement.known_level() else {
            return Some(json!({"mode": confinement.mode().as_str(), "confined": null}));
        };
        let mut sandbox = json!({
            "mode": confinement.mode().as_str(),
            "confined": level.is_jailed(),
            "level": level.describe(confinement.network()),
        });
        if !level.is_jailed() {
            sandbox["warning"] = json!(level.describe(confinement.network()));
        }
        Some(sandbox)
    }

    /// Whether a request may see `/status` and `/metrics`.
    fn allows(&self, headers: &HeaderMap) -> bool {
        let Some(token) = &self.token else {
            return true;
        };
        let given = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .unwrap_or_default();
        // Compared in constant time (lengths aside).
        bool::from(given.as_bytes().ct_eq(token.as_bytes()))
    }

    /// `/metrics`: the Prometheus text, its gauges read now.
    pub async fn metrics(&self) -> String {
        let counts = match &self.store {
            Some(store) => store.status_counts().await.ok(),
            None => None,
        };
        let live: Vec<(Platform, bool)> = self
            .adapters
            .iter()
            .map(|(p, l)| (*p, l.since_last_beat().is_some_and(|s| s <= LIVE_WITHIN)))
            .collect();
        crate::metrics::render(counts.as_ref(), &live)
    }

    /// `/status`: the platforms as `/readyz` sees them, and what the store holds.
    pub async fn status(&self) -> serde_json::Value {
        let (ready, readiness) = self.report();
        let mut status = json!({"ready": ready, "platforms": readiness["adapters"]});
        if let Some(sandbox) = self.sandbox() {
            status["sandbox"] = sandbox;
        }
        if let Some(node) = &self.node {
            status["node"] = node();
        }
        if let Some(store) = &self.store {
            match store.status_counts().await {
                Ok(counts) => {
                    if let (Some(target), serde_json::Value::Object(counts)) =
                        (status.as_object_mut(), json!(counts))
                    {
                        target.extend(counts);
                    }
                }
                Err(e) => status["store_error"] = json!(e.to_string()),
            }
        }
        status
    }
}

/// Bind the listening socket; the error names the key that chose the address.
pub async fn bind(addr: SocketAddr, key: &str) -> anyhow::Result<TcpListener> {
    TcpListener::bind(addr).await.map_err(|e| {
        anyhow::anyhow!(
            "cannot listen on {addr} (set by {key}): {e}; choose a free address with {key}"
        )
    })
}

/// The server's routes: health, readiness, and the webhook routes that have their secret.
pub fn app(routes: Vec<WebhookRoute>, health: Health) -> Router {
    let (for_status, for_metrics) = (health.clone(), health.clone());
    let mut app = Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route(
            "/status",
            get(move |headers: HeaderMap| {
                let health = for_status.clone();
                async move {
                    if !health.allows(&headers) {
                        return (StatusCode::UNAUTHORIZED, "bearer token needed").into_response();
                    }
                    axum::Json(health.status().await).into_response()
                }
            }),
        )
        .route(
            "/metrics",
            get(move |headers: HeaderMap| {
                let health = for_metrics.clone();
                async move {
                    if !health.allows(&headers) {
                        return (StatusCode::UNAUTHORIZED, "bearer token needed").into_response();
                    }
                    (
                        [(
                            header::CONTENT_TYPE,
                            "application/openmetrics-text; version=1.0.0; charset=utf-8",
                        )],
                        health.metrics().await,
                    )
                        .into_response()
                }
            }),
        )
        .route(
            "/readyz",
            get(move || {
                let health = health.clone();
                async move {
                    let (ready, body) = health.report();
                    let status = if ready {
                        StatusCode::OK
                    } else {
                        StatusCode::SERVICE_UNAVAILABLE
                    };
                    (status, axum::Json(body))
                }
            }),
        );
    let mut taken: Vec<String> = ["/healthz", "/readyz", "/status", "/metrics"]
        .map(str::to_owned)
        .to_vec();
    // The routes refusing everything for want of a secret, said once per secret.
    let mut unset: std::collections::BTreeMap<(&str, bool), Vec<String>> = Default::default();
    for route in routes {
        let path = route.path.clone();
        if taken.contains(&path) {
            // Two routes on one path would stop the server from starting at all.
            tracing::error!(%path, "http: two webhooks want the same path; the second is not mounted");
            continue;
        }
        taken.push(path.clone());
        if route.secret.is_none() {
            let paths = unset.entry((route.secret_name, route.needed)).or_default();
            paths.push(path.clone());
            app = app.route(&path, any(unconfigured).with_state(route.secret_name));
            continue;
        }
        tracing::info!(path = %route.path, "http: webhook mounted");
        app = app.route(&path, any(webhook).with_state(Arc::new(route)));
    }
    for ((secret_name, needed), paths) in unset {
        let paths = paths.join(", ");
        if needed {
            tracing::warn!(%paths, "http: refusing every request (503) because {secret_name} is not set");
        } else {
            tracing::info!(%paths, "http: not used as configured, and refusing every request (503) without {secret_name}");
        }
    }
    app.layer(DefaultBodyLimit::max(MAX_BODY))
}

/// The server's limits: a client has 10 s to send a request's headers; at most 256
/// connections at once; 5 s to finish on shutdown.
const LIMITS: hermes_adapter::serve::Limits = hermes_adapter::serve::Limits {
    name: "http",
    header_read: Duration::from_secs(10),
    max_connections: 256,
    drain: Duration::from_secs(5),
};
/// A request, its body included, is answered within this long or refused (408), so a
/// client that sends its body slowly holds nothing for long.
const REQUEST_TIME: Duration = Duration::from_secs(30);

/// Serve `app` on `listener` until `intake` is cancelled: HTTP/1.1 with a header-read
/// timeout, a time limit per request and a cap on connections
/// ([`hermes_adapter::serve::serve`]).
pub async fn serve(listener: TcpListener, app: Router, intake: CancellationToken) {
    if let Ok(addr) = listener.local_addr() {
        tracing::info!(%addr, "http: listening");
    }
    let app = app.layer(axum::middleware::from_fn(within_request_time));
    hermes_adapter::serve::serve(listener, app, LIMITS, intake, crate::metrics::http_refused).await;
}

/// A request not answered within [`REQUEST_TIME`] (a body sent slowly) is refused.
async fn within_request_time(
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    match tokio::time::timeout(REQUEST_TIME, next.run(request)).await {
        Ok(response) => response,
        Err(_) => {
            crate::metrics::http_refused("request_time");
            (StatusCode::REQUEST_TIMEOUT, "the request took too long\n").into_response()
        }
    }
}

async fn webhook(
    State(route): State<Arc<WebhookRoute>>,
    extensions: axum::http::Extensions,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let request = WebhookRequest {
        method: method.to_string(),
        query: uri.query().unwrap_or_default().to_owned(),
        headers: headers
            .iter()
            .filter_map(|(n, v)| Some((n.as_str().to_owned(), v.to_str().ok()?.to_owned())))
            .collect(),
        body: body.to_vec(),
    };
    if !route.verify(&request) {
        say_refused(&extensions, "signature", || {
            format!(
                "http: a {} request to {} was refused: its signature or token does not match",
                request.method, route.path
            )
        });
        return to_response(route.verifier.refusal(&request));
    }
    to_response(route.handler.handle(request).await)
}

/// A webhook whose secret is not set: nothing it receives could be verified.
async fn unconfigured(
    State(secret_name): State<&'static str>,
    extensions: axum::http::Extensions,
) -> Response {
    say_refused(&extensions, "unconfigured", || {
        format!(
            "http: a webhook request was refused because {secret_name} is not set (run check-config)"
        )
    });
    (
        StatusCode::SERVICE_UNAVAILABLE,
        format!("not configured: {secret_name} is not set"),
    )
        .into_response()
}

/// A refused webhook request, counted in `/metrics` (`http_refused{kind=why}`) and said
/// at WARN at most once a minute per source and reason: a public path probed all day
/// would otherwise flood the log.
fn say_refused(
    extensions: &axum::http::Extensions,
    why: &'static str,
    line: impl FnOnce() -> String,
) {
    /// When each (source, reason) was last said.
    type Said =
        std::collections::HashMap<(Option<std::net::IpAddr>, &'static str), std::time::Instant>;
    static SAID: std::sync::Mutex<Option<Said>> = std::sync::Mutex::new(None);
    crate::metrics::http_refused(why);
    let source = extensions
        .get::<axum::extract::ConnectInfo<SocketAddr>>()
        .map(|p| p.0.ip());
    let now = std::time::Instant::now();
    {
        let mut said = SAID.lock().unwrap_or_else(|e| e.into_inner());
        let said = said.get_or_insert_with(Default::default);
        if said
            .get(&(source, why))
            .is_some_and(|at| now.duration_since(*at) < Duration::from_secs(60))
        {
            return;
        }
        if said.len() >= 4096 {
            // Many sources at once: start over rather than grow.
            said.clear();
        }
        said.insert((source, why), now);
    }
    let source = source.map_or("unknown".to_owned(), |ip| ip.to_string());
    tracing::warn!(%source, "{} (said once a minute per source)", line());
}

fn to_response(answer: WebhookResponse) -> Response {
    let status = StatusCode::from_u16(answer.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (
        status,
        [(header::CONTENT_TYPE, answer.content_type)],
        answer.body,
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use hermes_adapter::{Verifier, WebhookHandler, async_trait};

    struct HeaderEqualsSecret;
    impl Verifier for HeaderEqualsSecret {
        fn verify(&self, secret: &str, request: &WebhookRequest) -> bool {
            request.header("x-signature") == Some(secret)
        }
    }

    #[derive(Default)]
    struct Counting(AtomicUsize);
    #[async_trait]
    impl WebhookHandler for Counting {
        async fn handle(&self, request: WebhookRequest) -> WebhookResponse {
            self.0.fetch_add(1, Ordering::SeqCst);
            WebhookResponse::text(200, format!("got {} bytes", request.body.len()))
        }
    }

    fn route(path: &str, secret: Option<&str>, handler: Arc<Counting>) -> WebhookRoute {
        WebhookRoute {
            path: path.into(),
            secret_name: "TEST_SECRET",
            secret: secret.map(str::to_owned),
            needed: true,
            verifier: Arc::new(HeaderEqualsSecret),
            handler,
        }
    }

    async fn start(app: Router) -> String {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(serve(listener, app, CancellationToken::new()));
        format!("http://{addr}")
    }

    /// A client that connects and says nothing, and one that never finishes its headers,
    /// are both cut once the header-read time is up; meanwhile the server answers others.
    #[tokio::test]
    async fn a_silent_or_slow_client_is_cut_after_the_header_read_time() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let base = start(app(Vec::new(), Health::default())).await;
        let addr = base.trim_start_matches("http://").to_owned();
        let started = std::time::Instant::now();
        let silent = tokio::net::TcpStream::connect(&addr).await.unwrap();
        let mut slow = tokio::net::TcpStream::connect(&addr).await.unwrap();
        slow.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
            .await
            .unwrap();
        let answered = reqwest::get(format!("{base}/healthz")).await.unwrap();
        assert_eq!(answered.status(), 200);
        for mut client in [silent, slow] {
            let mut rest = Vec::new();
            tokio::time::timeout(LIMITS.header_read * 3, client.read_to_end(&mut rest))
                .await
                .expect("the server cut the connection")
                .ok();
        }
        let took = started.elapsed();
        assert!(
            took >= LIMITS.header_read - Duration::from_secs(1),
            "{took:?}"
        );
    }

    #[tokio::test]
    async fn webhooks_fail_closed_and_only_verified_requests_reach_their_handler() {
        let open = Arc::new(Counting::default());
        let unconfigured = Arc::new(Counting::default());
        let base = start(app(
            vec![
                route("/signed", Some("s3cret"), open.clone()),
                route("/unset", None, unconfigured.clone()),
            ],
            Health::default(),
        ))
        .await;
        let http = reqwest::Client::new();
        let post = |path: &str, signature: Option<&str>| {
            let mut request = http.post(format!("{base}{path}")).body("{}");
            if let Some(s) = signature {
                request = request.header("x-signature", s);
            }
            request.send()
        };
        let unset = post("/unset", Some("")).await.unwrap();
        assert_eq!(unset.status(), 503);
        assert!(
            unset
                .text()
                .await
                .unwrap()
                .contains("TEST_SECRET is not set")
        );
        assert_eq!(post("/signed", None).await.unwrap().status(), 401);
        assert_eq!(post("/signed", Some("wrong")).await.unwrap().status(), 401);
        assert_eq!(
            open.0.load(Ordering::SeqCst),
            0,
            "nothing unverified got through"
        );
        let ok = post("/signed", Some("s3cret")).await.unwrap();
        assert_eq!(ok.status(), 200);
        assert_eq!(ok.text().await.unwrap(), "got 2 bytes");
        assert_eq!(unconfigured.0.load(Ordering::SeqCst), 0);
    }

    #[tokio::test]
    async fn readiness_follows_each_adapters_last_contact_and_status_wants_the_token() {
        let liveness = Liveness::default();
        let health = Health {
            adapters: vec![(Platform::Telegram, liveness.clone())],
            store: None,
            token: Some("let-me-in".into()),
            confinement: None,
            node: None,
        };
        let base = start(app(vec![], health)).await;
        let get = |path: &'static str| reqwest::get(format!("{base}{path}"));
        assert_eq!(get("/healthz").await.unwrap().status(), 200);
        let not_yet = get("/readyz").await.unwrap();
        assert_eq!(not_yet.status(), 503);
        liveness.beat();
        let ready = get("/readyz").await.unwrap();
        assert_eq!(ready.status(), 200);
        let body: serde_json::Value = ready.json().await.unwrap();
        assert_eq!(body["adapters"][0]["platform"], "telegram");
        assert_eq!(body["adapters"][0]["live"], true);
        // With a token, /status and /metrics want it; health checks do not.
        assert_eq!(get("/status").await.unwrap().status(), 401);
        assert_eq!(get("/metrics").await.unwrap().status(), 401);
        let http = reqwest::Client::new();
        let with_token = |path: &str| {
            http.get(format!("{base}{path}"))
                .bearer_auth("let-me-in")
                .send()
        };
        let status: serde_json::Value = with_token("/status").await.unwrap().json().await.unwrap();
        assert_eq!(status["platforms"][0]["live"], true);
        let metrics = with_token("/metrics").await.unwrap().text().await.unwrap();
        assert!(
            metrics.contains("hermes_platform_live{platform=\"telegram\"} 1"),
            "{metrics}"
        );
    }
}
