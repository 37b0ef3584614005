//! Prometheus metrics, served as text on `/metrics`. Counters and histograms are bumped
//! where things happen (one process-wide set, so any module can count without plumbing);
//! the gauges (sessions, queues, approvals, processes, platform liveness) are read from the
//! store and the adapters when scraped. Label values are fixed names (platforms, tools,
//! outcomes, error kinds), never text from a chat.

use std::sync::LazyLock;
use std::time::Duration;

use hermes_adapter::Platform;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// What the store holds right now (`Store::status_counts`): the gauges below and `/status`.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct StatusCounts {
    pub sessions: i64,
    pub inbox_open: i64,
    pub approvals_pending: i64,
    pub processes_running: i64,
    pub outbox_pending: i64,
    /// Seconds the oldest waiting row has waited.
    pub outbox_oldest_s: Option<i64>,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PlatformLabel {
    platform: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindLabel {
    kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ToolLabel {
    tool: String,
    outcome: String,
}

/// Every metric the daemon keeps.
struct Metrics {
    registry: Registry,
    messages_in: Family<PlatformLabel, Counter>,
    messages_out: Family<PlatformLabel, Counter>,
    rate_limited: Family<PlatformLabel, Counter>,
    adapter_restarts: Family<PlatformLabel, Counter>,
    platform_live: Family<PlatformLabel, Gauge>,
    turn_seconds: Histogram,
    llm_seconds: Histogram,
    llm_errors: Family<KindLabel, Counter>,
    llm_tokens: Family<KindLabel, Counter>,
    tool_calls: Family<ToolLabel, Counter>,
    approvals: Family<KindLabel, Counter>,
    http_refused: Family<KindLabel, Counter>,
    sessions: Gauge,
    inbox_open: Gauge,
    approvals_pending: Gauge,
    processes_running: Gauge,
    outbox_pending: Gauge,
    outbox_oldest_seconds: Gauge,
    runtime_tasks: Gauge,
}

static METRICS: LazyLock<Metrics> = LazyLock::new(|| {
    let mut registry = Registry::with_prefix("hermes");
    let metrics = Metrics {
        messages_in: Family::default(),
        messages_out: Family::default(),
        rate_limited: Family::default(),
        adapter_restarts: Family::default(),
        platform_live: Family::default(),
        // 50 ms to about 14 min.
        turn_seconds: Histogram::new(exponential_buckets(0.05, 2.0, 15)),
        llm_seconds: Histogram::new(exponential_buckets(0.05, 2.0, 13)),
        llm_errors: Family::default(),
        llm_tokens: Family::default(),
        tool_calls: Family::default(),
        approvals: Family::default(),
        http_refused: Family::default(),
        sessions: Gauge::default(),
        inbox_open: Gauge::default(),
        approvals_pending: Gauge::default(),
        processes_running: Gauge::default(),
        outbox_pending: Gauge::default(),
        outbox_oldest_seconds: Gauge::default(),
        runtime_tasks: Gauge::default(),
        registry: Registry::default(),
    };
    registry.register(
        "messages_in",
        "Events recorded from people, per platform",
        metrics.messages_in.clone(),
    );
    registry.register(
        "messages_out",
        "Messages and edits the platforms accepted, per platform",
        metrics.messages_out.clone(),
    );
    registry.register(
        "rate_limited",
        "Sends a platform held back with a rate limit, per platform",
        metrics.rate_limited.clone(),
    );
    registry.register(
        "adapter_restarts",
        "Times a platform's connection stopped on an error and was started again",
        metrics.adapter_restarts.clone(),
    );
    registry.register(
        "platform_live",
        "1 when the platform answered within 90 s",
        metrics.platform_live.clone(),
    );
    registry.register(
        "turn_seconds",
        "How long a turn took, from its start to its answer",
        metrics.turn_seconds.clone(),
    );
    registry.register(
        "llm_request_seconds",
        "How long a model call took, retries included",
        metrics.llm_seconds.clone(),
    );
    registry.register(
        "llm_errors",
        "Failed model calls by kind (retry: one failed attempt; unreachable, refused)",
        metrics.llm_errors.clone(),
    );
    registry.register(
        "llm_tokens",
        "Tokens the model calls took, by kind (prompt, completion, cached: the part of prompt read from the provider's cache)",
        metrics.llm_tokens.clone(),
    );
    registry.register(
        "tool_calls",
        "Tool calls by tool and outcome",
        metrics.tool_calls.clone(),
    );
    registry.register(
        "approvals",
        "Approval requests by outcome",
        metrics.approvals.clone(),
    );
    registry.register(
        "http_refused",
        "HTTP connections and requests refused, by why (connections over the cap, request_time)",
        metrics.http_refused.clone(),
    );
    registry.register(
        "sessions_open",
        "Conversations with an open session",
        metrics.sessions.clone(),
    );
    registry.register(
        "inbox_open",
        "Events recorded and not yet handled",
        metrics.inbox_open.clone(),
    );
    registry.register(
        "approvals_pending",
        "Approval requests waiting for a person",
        metrics.approvals_pending.clone(),
    );
    registry.register(
        "background_processes",
        "Background processes running",
        metrics.processes_running.clone(),
    );
    registry.register(
        "outbox_pending",
        "Messages waiting to be sent",
        metrics.outbox_pending.clone(),
    );
    registry.register(
        "outbox_oldest_seconds",
        "How long the oldest waiting message has waited",
        metrics.outbox_oldest_seconds.clone(),
    );
    registry.register(
        "runtime_tasks",
        "Tasks alive on the daemon's async runtime (a leak shows as steady growth)",
        metrics.runtime_tasks.clone(),
    );
    Metrics {
        registry,
        ..metrics
    }
});

fn platform(platform: Platform) -> PlatformLabel {
    PlatformLabel {
        platform: platform.as_str().to_owned(),
    }
}

fn kind(kind: &str) -> KindLabel {
    KindLabel {
        kind: kind.to_owned(),
    }
}

/// An event from a person was recorded.
pub fn message_in(on: Platform) {
    METRICS.messages_in.get_or_create(&platform(on)).inc();
}

/// A platform accepted a message or an edit.
pub fn message_out(on: Platform) {
    METRICS.messages_out.get_or_create(&platform(on)).inc();
}

/// A platform held a send back.
pub fn rate_limited(on: Platform) {
    METRICS.rate_limited.get_or_create(&platform(on)).inc();
}

/// A platform's connection is started again after an error.
pub fn adapter_restart(on: Platform) {
    METRICS.adapter_restarts.get_or_create(&platform(on)).inc();
}

/// A turn ended after `took`.
pub fn turn(took: Duration) {
    METRICS.turn_seconds.observe(took.as_secs_f64());
    TURNS_ENDED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
}

/// Turns ended since the start (what tells the daemon it has gone quiet). Counted here:
/// the turn histogram's own count is readable only in prometheus-client's tests.
static TURNS_ENDED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// How many turns have ended since the start.
pub fn turns_ended() -> u64 {
    TURNS_ENDED.load(std::sync::atomic::Ordering::Relaxed)
}

/// A model call ended after `took`.
pub fn llm_call(took: Duration) {
    METRICS.llm_seconds.observe(took.as_secs_f64());
}

/// A model call failed: `retry` (one attempt), `unreachable`, `refused`.
pub fn llm_error(what: &'static str) {
    METRICS.llm_errors.get_or_create(&kind(what)).inc();
}

/// Tokens a model call took, where the provider said.
pub fn llm_tokens(prompt: u64, completion: u64, cached: u64) {
    for (what, n) in [
        ("prompt", prompt),
        ("completion", completion),
        ("cached", cached),
    ] {
        if n > 0 {
            METRICS.llm_tokens.get_or_create(&kind(what)).inc_by(n);
        }
    }
}

/// A tool ran: `ok` or `cancelled`. The model names tools, so the caller passes a name
/// the toolbox knows, or `unknown`: labels stay few.
pub fn tool_call(tool: &str, outcome: &'static str) {
    METRICS
        .tool_calls
        .get_or_create(&ToolLabel {
            tool: tool.to_owned(),
            outcome: outcome.to_owned(),
        })
        .inc();
}

/// An approval request ended (`approved_once`, `denied`, `expired`, …).
pub fn approval(outcome: &'static str) {
    METRICS.approvals.get_or_create(&kind(outcome)).inc();
}

/// The HTTP server refused a connection or a request (`connections`, `request_time`).
pub fn http_refused(why: &'static str) {
    METRICS.http_refused.get_or_create(&kind(why)).inc();
}

/// The text exposition, with the gauges set from `counts` and `live` (each platform and
/// whether it answered recently).
pub fn render(counts: Option<&StatusCounts>, live: &[(Platform, bool)]) -> String {
    if let Some(c) = counts {
        METRICS.sessions.set(c.sessions);
        METRICS.inbox_open.set(c.inbox_open);
        METRICS.approvals_pending.set(c.approvals_pending);
        METRICS.processes_running.set(c.processes_running);
        METRICS.outbox_pending.set(c.outbox_pending);
        METRICS
            .outbox_oldest_seconds
            .set(c.outbox_oldest_s.unwrap_or(0));
    }
    if let Ok(runtime) = tokio::runtime::Handle::try_current() {
        let alive = runtime.metrics().num_alive_tasks();
        METRICS
            .runtime_tasks
            .set(i64::try_from(alive).unwrap_or(i64::MAX));
    }
    // Platforms a reload turned off leave the series.
    METRICS.platform_live.clear();
    for (on, is_live) in live {
        METRICS
            .platform_live
            .get_or_create(&platform(*on))
            .set(i64::from(*is_live));
    }
    let mut text = String::new();
    if let Err(e) = prometheus_client::encoding::text::encode(&mut text, &METRICS.registry) {
        tracing::error!(error = %e, "metrics: cannot encode");
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_and_gauges_come_out_as_prometheus_text() {
        message_in(Platform::Telegram);
        tool_call("terminal", "ok");
        tool_call("unknown", "ok");
        let text = render(
            Some(&StatusCounts {
                outbox_pending: 3,
                ..Default::default()
            }),
            &[(Platform::Telegram, true)],
        );
        assert!(
            text.contains("hermes_messages_in_total{platform=\"telegram\"}"),
            "{text}"
        );
        assert!(text.contains("hermes_tool_calls_total{tool=\"terminal\",outcome=\"ok\"}"));
        assert!(
            text.contains("tool=\"unknown\""),
            "a made-up tool name is not a label"
        );
        assert!(text.contains("hermes_outbox_pending 3"));
        assert!(text.contains("hermes_platform_live{platform=\"telegram\"} 1"));
        assert!(text.ends_with("# EOF\n"));
    }
}
