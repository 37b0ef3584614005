//! `hermes-gateway cron list | run <job> | pause <job> | resume <job> | remove <job>`: the
//! scheduled jobs, from the database (the running daemon sees a change at its next look,
//! within a minute).

use std::process::ExitCode;

use clap::Subcommand;

use super::{now_ms, shown, zone};
use crate::store::Store;

#[derive(Subcommand)]
pub enum CronAction {
    /// Every job: id, name, schedule, next run, where answers go
    List,
    /// Run a job now (the running daemon starts it within a minute)
    Run {
        /// The job's id, as `cron list` shows it (job_…)
        job_id: String,
    },
    /// Stop a job from running until it is resumed
    Pause {
        /// The job's id, as `cron list` shows it (job_…)
        job_id: String,
    },
    /// Let a paused job run again
    Resume {
        /// The job's id, as `cron list` shows it (job_…)
        job_id: String,
    },
    /// Delete a job
    Remove {
        /// The job's id, as `cron list` shows it (job_…)
        job_id: String,
    },
}

pub async fn command(store: Store, action: CronAction, timezone: Option<String>) -> ExitCode {
    let tz = zone(timezone.as_deref());
    let failed = |e: String| {
        eprintln!("hermes-gateway: {e}");
        ExitCode::FAILURE
    };
    let id = match &action {
        CronAction::List => {
            return match store.cron_list(None).await {
                Ok(jobs) if jobs.is_empty() => {
                    println!("No scheduled jobs.");
                    ExitCode::SUCCESS
                }
                Ok(jobs) => {
                    for j in jobs {
                        let next = match (j.paused, j.next_run_at) {
                            (true, _) => "paused".to_owned(),
                            (false, Some(at)) => format!("next {}", shown(at, &tz)),
                            (false, None) => "finished".to_owned(),
                        };
                        println!(
                            "{}  {:?}  {}  {next}  runs {}  → {} {}",
                            j.id, j.name, j.schedule, j.runs, j.deliver.platform, j.deliver.chat_id
                        );
                    }
                    ExitCode::SUCCESS
                }
                Err(e) => failed(e.to_string()),
            };
        }
        CronAction::Run { job_id }
        | CronAction::Pause { job_id }
        | CronAction::Resume { job_id }
        | CronAction::Remove { job_id } => job_id.clone(),
    };
    let job = match store.cron_get(&id).await {
        Ok(Some(job)) => job,
        Ok(None) => {
            // 2, as `pairing` and `approvals` say nothing goes by that name (1: a failure).
            eprintln!("hermes-gateway: there is no job {id:?} (see cron list)");
            return ExitCode::from(2);
        }
        Err(e) => return failed(e.to_string()),
    };
    let now = now_ms();
    let (changed, said) = match action {
        CronAction::Remove { .. } => {
            return match store.cron_remove(&id).await {
                Ok(_) => {
                    println!("Removed {id}.");
                    ExitCode::SUCCESS
                }
                Err(e) => failed(e.to_string()),
            };
        }
        CronAction::Run { .. } => (job.run_now(now), "runs within a minute"),
        CronAction::Pause { .. } => (job.paused(), "is paused"),
        CronAction::Resume { .. } => (job.resumed(now, &tz), "runs again on its schedule"),
        CronAction::List => unreachable!("answered above"),
    };
    match store.cron_update(changed).await {
        Ok(_) => {
            println!("{id} {said}.");
            ExitCode::SUCCESS
        }
        Err(e) => failed(e.to_string()),
    }
}
