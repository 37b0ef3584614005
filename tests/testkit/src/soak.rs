//! The soak: the daemon with all four platforms (the crash harness's fleet and people, no
//! kills) under a steady load for minutes, its resident memory, open descriptors, threads
//! and runtime tasks sampled from outside (`/proc` and `/metrics`); the report gives each
//! one's slope after the warm-up, so a leak shows as a number. Run by `hermes-bench soak`.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::crash::{Fleet, Rng, Writers};

/// What to run.
#[derive(Debug, Clone)]
pub struct SoakPlan {
    pub binary: String,
    pub length: Duration,
    /// Samples before this much time are not in the slopes.
    pub warmup: Duration,
    pub every: Duration,
    /// Chats per platform.
    pub chats: u32,
    pub seed: u64,
    /// The share of messages (percent) whose answer runs a tool first.
    pub tool_percent: u64,
    /// How much longer than its token each message is (bytes of ordinary words).
    pub message_bytes: usize,
    /// The model's context window the daemon is told of (tokens); `None`: 131,072.
    pub context_length: Option<u64>,
}

/// One reading of the daemon.
#[derive(Debug, Clone, Copy)]
pub struct Sample {
    pub seconds: f64,
    pub rss_kib: u64,
    /// Of which anonymous memory (the heap, stacks): what the allocator holds.
    pub anon_kib: u64,
    pub fds: u64,
    pub threads: u64,
    /// Tasks alive on the runtime (`hermes_runtime_tasks`); 0 when `/metrics` did not answer.
    pub tasks: u64,
    pub answered: usize,
}

#[derive(Debug, Clone)]
pub struct SoakReport {
    pub samples: Vec<Sample>,
    pub messages: usize,
    pub answered: usize,
    pub seconds: f64,
}

impl SoakReport {
    /// Least-squares slope per minute of `value` over the samples after the warm-up.
    pub fn slope(&self, warmup: Duration, value: impl Fn(&Sample) -> f64) -> f64 {
        let after: Vec<(f64, f64)> = self
            .samples
            .iter()
            .filter(|s| s.seconds >= warmup.as_secs_f64())
            .map(|s| (s.seconds / 60.0, value(s)))
            .collect();
        if after.len() < 2 {
            return 0.0;
        }
        let n = after.len() as f64;
        let mx = after.iter().map(|p| p.0).sum::<f64>() / n;
        let my = after.iter().map(|p| p.1).sum::<f64>() / n;
        let sxy: f64 = after.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
        let sxx: f64 = after.iter().map(|p| (p.0 - mx).powi(2)).sum();
        if sxx == 0.0 { 0.0 } else { sxy / sxx }
    }

    pub fn json(&self, warmup: Duration) -> Value {
        let round = |x: f64| (x * 100.0).round() / 100.0;
        let last = self.samples.last().copied();
        json!({
            "seconds": round(self.seconds),
            "messages": self.messages,
            "answered": self.answered,
            "per_minute": round(self.answered as f64 / (self.seconds / 60.0)),
            "samples": self.samples.len(),
            "rss_kib_last": last.map(|s| s.rss_kib),
            "rss_kib_max": self.samples.iter().map(|s| s.rss_kib).max(),
            "fds_last": last.map(|s| s.fds),
            "threads_last": last.map(|s| s.threads),
            "tasks_last": last.map(|s| s.tasks),
            "slope_after_warmup_per_minute": {
                "rss_kib": round(self.slope(warmup, |s| s.rss_kib as f64)),
                "anon_kib": round(self.slope(warmup, |s| s.anon_kib as f64)),
                "fds": round(self.slope(warmup, |s| s.fds as f64)),
                "threads": round(self.slope(warmup, |s| s.threads as f64)),
                "tasks": round(self.slope(warmup, |s| s.tasks as f64)),
            },
        })
    }
}

/// `/proc/PID/status`'s value of `field` (kB for sizes).
fn status_field(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

fn open_fds(pid: u32) -> u64 {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count() as u64)
}

async fn runtime_tasks(http: &reqwest::Client, addr: &str) -> u64 {
    let Ok(answer) = http.get(format!("http://{addr}/metrics")).send().await else {
        return 0;
    };
    let text = answer.text().await.unwrap_or_default();
    text.lines()
        .find_map(|l| l.strip_prefix("hermes_runtime_tasks "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

/// Run the soak.
pub async fn soak(plan: &SoakPlan) -> SoakReport {
    let dir = tempfile::tempdir().unwrap();
    let fleet = Fleet::start(dir.path(), &plan.binary).await;
    fleet.script_model();
    if let Some(tokens) = plan.context_length {
        fleet.set_context_length(tokens);
    }
    let daemon = fleet.start_daemon().await;
    let addr = daemon.http_addr().unwrap_or_default();
    let http = reqwest::Client::new();
    let mut rng = Rng(plan.seed);
    let mut writers = Writers::new();
    writers.tool_percent = plan.tool_percent;
    writers.filler = crate::crash::filler(plan.message_bytes);
    let started = Instant::now();
    let mut samples = Vec::new();
    let mut next_sample = started;
    while started.elapsed() < plan.length {
        writers.tick(&fleet, plan.chats, &mut rng);
        if Instant::now() >= next_sample {
            let pid = daemon.pid();
            samples.push(Sample {
                seconds: started.elapsed().as_secs_f64(),
                rss_kib: status_field(pid, "VmRSS:"),
                anon_kib: status_field(pid, "RssAnon:"),
                fds: open_fds(pid),
                threads: status_field(pid, "Threads:"),
                tasks: runtime_tasks(&http, &addr).await,
                answered: writers.answered(&fleet).1,
            });
            next_sample += plan.every;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (messages, answered) = writers.answered(&fleet);
    SoakReport {
        samples,
        messages,
        answered,
        seconds: started.elapsed().as_secs_f64(),
    }
}
