//! Scheduled jobs run inside the daemon. The scheduler sleeps until the next job is due (at
//! most a minute, or until a job changes), then, for each due job, records its run in the
//! inbox as a gateway event (`gateway:cron:<job>:<slot>`, so a slot recorded twice after a
//! crash is one run) and only then moves the job on by a compare-and-set on that slot. The
//! run is an agent turn in a fresh session of its own (`cron:<job>:<slot>`), speaking for
//! the job's creator, answered in the job's delivery chat. A slot missed while the daemon
//! was down runs once on start, or is skipped for a job that says so.

pub mod cli;
pub mod import;
pub mod schedule;

use std::sync::Arc;
use std::time::Duration;

use hermes_adapter::{Inbound, InboundKind, InboundSink, Wakeup as WakeupEvent};
use jiff::Timestamp;
use jiff::tz::TimeZone;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

pub use schedule::Schedule;

use crate::store::{CronJob, Store};

/// The longest the scheduler sleeps without looking again.
const MAX_SLEEP: Duration = Duration::from_secs(60);

/// What the scheduler and the `cronjob` tool share.
pub struct Cron {
    pub store: Store,
    /// `timezone` (IANA; the host's when unset).
    pub tz: TimeZone,
    /// Rung when a job is created or changed, so the scheduler looks again.
    pub changed: Notify,
    /// The shortest interval of a recurring job, in seconds (`cron.min_interval`, 60).
    pub min_interval: i64,
}

impl Cron {
    pub fn new(store: Store, tz: TimeZone, min_interval: i64) -> Arc<Self> {
        Arc::new(Cron {
            store,
            tz,
            changed: Notify::new(),
            min_interval: min_interval.max(1),
        })
    }

    /// Run due jobs until `stop`.
    pub async fn run(self: Arc<Self>, sink: Arc<dyn InboundSink>, stop: CancellationToken) {
        loop {
            let now = now_ms();
            let mut trouble = false;
            match self.store.cron_due(now).await {
                Ok(due) => {
                    for job in due {
                        trouble |= !self.fire(&job, now, sink.as_ref()).await;
                    }
                }
                Err(e) => {
                    trouble = true;
                    tracing::error!(error = %e, "cron: cannot read the due jobs");
                }
            }
            let next = self.store.cron_next_due().await.ok().flatten();
            let mut sleep = next
                .map(|at| Duration::from_millis(at.saturating_sub(now_ms()).max(0) as u64))
                .unwrap_or(MAX_SLEEP)
                .min(MAX_SLEEP);
            if trouble {
                // A job that cannot be recorded or moved on is tried again, not in a spin.
                sleep = sleep.max(Duration::from_secs(5));
            }
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = self.changed.notified() => {}
                _ = tokio::time::sleep(sleep) => {}
            }
        }
    }

    /// Record `job`'s due run (unless it is a missed slot the job skips), then move it on;
    /// `false` when that could not be done.
    async fn fire(&self, job: &CronJob, now: i64, sink: &dyn InboundSink) -> bool {
        let Some(slot) = job.next_run_at else {
            return true;
        };
        let schedule = match Schedule::parse(&job.schedule, ts(now), &self.tz) {
            Ok(s) => s,
            Err(e) => {
                tracing::error!(job = %job.id, error = %e, "cron: the job's schedule cannot be read; it is paused");
                let paused = CronJob {
                    paused: true,
                    ..job.clone()
                };
                return self.store.cron_update(paused).await.is_ok();
            }
        };
        // Missed while the daemon was down (more than a minute late): run once, or skip.
        let late = now - slot > 60_000;
        let run = !late || job.catch_up;
        if run {
            let event = Inbound {
                event_id: format!("gateway:cron:{}:{slot}", job.id),
                chat: job.deliver.clone(),
                author: job.author.clone(),
                kind: InboundKind::Wakeup(WakeupEvent {
                    session_key: format!("cron:{}:{slot}", job.id),
                    text: run_text(job),
                }),
            };
            if let Err(e) = sink.accept(event).await {
                // Not recorded: the job stays due and is tried again at the next look.
                tracing::error!(job = %job.id, error = %e, "cron: could not record a run");
                return false;
            }
            tracing::info!(job = %job.id, name = %job.name, late, "cron: a run is recorded");
        } else {
            tracing::info!(job = %job.id, "cron: a slot missed while the daemon was down is skipped");
        }
        let runs_left = job.repeat.map(|r| r - i64::from(run));
        let next = match runs_left {
            Some(left) if left <= 0 => None,
            _ => schedule
                .next_after(ts(now.max(slot)), &self.tz)
                .map(|t| t.as_millisecond()),
        };
        if let Err(e) = self.store.cron_advance(&job.id, slot, next, run).await {
            tracing::error!(job = %job.id, error = %e, "cron: could not move the job on (the run is recorded once)");
            return false;
        }
        true
    }
}

impl CronJob {
    /// Paused: it does not run until resumed.
    pub fn paused(self) -> CronJob {
        CronJob {
            paused: true,
            ..self
        }
    }

    /// Running again on its schedule from `now` (a next run still ahead is kept).
    pub fn resumed(self, now: i64, tz: &TimeZone) -> CronJob {
        let next = self.next_run_at.filter(|at| *at > now).or_else(|| {
            Schedule::parse(&self.schedule, ts(now), tz)
                .ok()
                .and_then(|s| s.next_after(ts(now), tz))
                .map(|t| t.as_millisecond())
        });
        CronJob {
            paused: false,
            next_run_at: next,
            ..self
        }
    }

    /// Due now (at least one run left for it).
    pub fn run_now(self, now: i64) -> CronJob {
        CronJob {
            paused: false,
            next_run_at: Some(now),
            repeat: self.repeat.map(|r| r.max(1)),
            ..self
        }
    }
}

/// What the agent is told when a job runs.
fn run_text(job: &CronJob) -> String {
    format!(
        "[Scheduled job \"{}\" ({}), run {}. Do what it asks now; your answer is delivered to the chat. Do not create scheduled jobs from here.]\n\n{}",
        job.name,
        job.id,
        job.runs + 1,
        job.prompt
    )
}

pub fn now_ms() -> i64 {
    crate::store::now_ms()
}

/// Unix milliseconds as a timestamp (the epoch for what cannot be one).
pub fn ts(ms: i64) -> Timestamp {
    Timestamp::from_millisecond(ms).unwrap_or(Timestamp::UNIX_EPOCH)
}

/// The time zone named by `timezone` (IANA), the host's when unset or unknown.
pub fn zone(name: Option<&str>) -> TimeZone {
    match name.filter(|n| !n.trim().is_empty()) {
        Some(name) => TimeZone::get(name.trim()).unwrap_or_else(|e| {
            tracing::warn!(timezone = name, error = %e, "cron: unknown time zone; using the host's");
            TimeZone::system()
        }),
        None => TimeZone::system(),
    }
}

/// `ms` as a time in `tz` for people (`2026-11-24 09:00 WET`).
pub fn shown(ms: i64, tz: &TimeZone) -> String {
    ts(ms)
        .to_zoned(tz.clone())
        .strftime("%Y-%m-%d %H:%M %Z")
        .to_string()
}

#[cfg(test)]
mod tests;
