//! `cronjob {action, job_id, schedule, prompt, name, repeat, deliver, catch_up}` (Hermes'
//! tool): create, list, update, pause, resume, remove or run now the scheduled jobs of
//! this conversation. `deliver` is where answers go: this chat (the default), `home` (the
//! platform's home channel, `/sethome`), or `platform:chat_id[:thread_id]` of a chat the
//! gateway has had a conversation in, never an arbitrary id. A job's own runs cannot create
//! jobs.

use std::sync::Arc;

use futures_util::future::BoxFuture;
use hermes_adapter::ChatRef;
use schemars::JsonSchema;
use serde::Deserialize;

use crate::cron::{Cron, Schedule, now_ms, shown, ts};
use crate::store::CronJob;
use crate::tool::{ToolContext, ToolResult, TypedTool};

pub struct CronjobTool {
    pub cron: Arc<Cron>,
    pub delivery: crate::delivery::Delivery,
    pub homes: Arc<crate::delivery::destinations::ConfiguredHomes>,
}

/// `cronjob`'s arguments.
#[derive(Deserialize, JsonSchema)]
pub struct CronjobArgs {
    action: CronAction,
    /// The job (all actions but create and list).
    job_id: Option<String>,
    schedule: Option<String>,
    /// What to do at each run, written so it stands on its own.
    prompt: Option<String>,
    name: Option<String>,
    /// How many runs, then the job stops (default: no limit; once for a one-time schedule).
    repeat: Option<i64>,
    /// Where answers go: omit for this chat, 'home' for the home channel, or platform:chat_id.
    deliver: Option<String>,
    /// A run missed while the gateway was down runs once when it is back (default true).
    catch_up: Option<bool>,
}

#[derive(Deserialize, JsonSchema, Clone, Copy, PartialEq, Debug)]
#[serde(rename_all = "snake_case")]
enum CronAction {
    Create,
    List,
    Update,
    Pause,
    Resume,
    Remove,
    Run,
}

impl TypedTool for CronjobTool {
    type Args = CronjobArgs;
    const NAME: &'static str = "cronjob";
    const TOOLSET: &'static str = "cronjob";

    fn description(&self) -> String {
        "Schedule work: each run is a fresh conversation with you that does `prompt`, and its answer is delivered to the chat. schedule: '30m' or '2h' (once, from now), 'every 30m' (recurring), a cron expression like '0 9 * * *', or a time like '2026-02-03T14:00'. Actions: create, list, update, pause, resume, remove, run (now).".into()
    }

    fn only_reads(&self, args: &CronjobArgs) -> bool {
        args.action == CronAction::List
    }

    fn call<'a>(&'a self, args: CronjobArgs, ctx: &'a ToolContext) -> BoxFuture<'a, ToolResult> {
        Box::pin(async move {
            let text = match self.act(&args, ctx).await {
                Ok(text) => text,
                Err(e) => format!("error: {e}"),
            };
            ToolResult::text(text)
        })
    }
}

impl CronjobTool {
    /// Do the `action` in `args`: the text for the model, or what went wrong.
    async fn act(&self, args: &CronjobArgs, ctx: &ToolContext) -> Result<String, String> {
        let action = args.action;
        let from_a_run = ctx.session_key.starts_with("cron:");
        if from_a_run
            && matches!(
                action,
                CronAction::Create | CronAction::Update | CronAction::Run
            )
        {
            return Err("a scheduled run cannot create or change scheduled jobs".into());
        }
        match action {
            CronAction::List => self.list(ctx).await,
            CronAction::Create => self.create(args, ctx).await,
            // Every other action is on one job.
            _ => self.change(action, args, ctx).await,
        }
    }

    /// `list`: the jobs of this conversation.
    async fn list(&self, ctx: &ToolContext) -> Result<String, String> {
        let jobs = self
            .cron
            .store
            .cron_list(Some(ctx.session_key.clone()))
            .await
            .map_err(store_error)?;
        if jobs.is_empty() {
            return Ok("No scheduled jobs in this conversation.".into());
        }
        Ok(jobs
            .iter()
            .map(|j| self.describe(j))
            .collect::<Vec<_>>()
            .join("\n"))
    }

    /// `create`: a new job in this conversation, if there is room for it.
    async fn create(&self, args: &CronjobArgs, ctx: &ToolContext) -> Result<String, String> {
        let cron = &self.cron;
        let schedule_text = text(&args.schedule).ok_or("create needs `schedule`")?;
        let prompt = text(&args.prompt).ok_or("create needs `prompt`")?;
        let now = now_ms();
        let schedule = Schedule::parse(schedule_text, ts(now), &cron.tz)?;
        check_interval(&schedule, cron.min_interval)?;
        self.check_room(ctx).await?;
        let next = schedule
            .next_after(ts(now), &cron.tz)
            .ok_or("that time has passed")?
            .as_millisecond();
        let deliver = self.destination(text(&args.deliver), ctx).await?;
        let job = new_job(args, ctx, prompt, &schedule, deliver, next, now);
        cron.store
            .cron_create(job.clone())
            .await
            .map_err(store_error)?;
        cron.changed.notify_one();
        Ok(format!("Scheduled: {}", self.describe(&job)))
    }

    /// Refuse a new job when this conversation, or the gateway, has as many as it may.
    async fn check_room(&self, ctx: &ToolContext) -> Result<(), String> {
        let jobs = self.cron.store.cron_list(None).await.map_err(store_error)?;
        let here = jobs
            .iter()
            .filter(|j| j.origin_key == ctx.session_key)
            .count();
        if here >= MAX_JOBS_PER_CONVERSATION || jobs.len() >= MAX_JOBS {
            return Err(format!(
                "too many scheduled jobs (at most {MAX_JOBS_PER_CONVERSATION} per conversation, {MAX_JOBS} in all); remove one first"
            ));
        }
        Ok(())
    }

    /// `remove`, `pause`, `resume`, `run` or `update` the job `job_id` of this
    /// conversation.
    async fn change(
        &self,
        action: CronAction,
        args: &CronjobArgs,
        ctx: &ToolContext,
    ) -> Result<String, String> {
        let cron = &self.cron;
        let id = text(&args.job_id).ok_or_else(|| {
            format!(
                "{} needs `job_id` (see list)",
                format!("{action:?}").to_lowercase()
            )
        })?;
        let job = self.own_job(id, ctx).await?;
        let now = now_ms();
        let changed = match action {
            CronAction::Remove => {
                cron.store.cron_remove(id).await.map_err(store_error)?;
                cron.changed.notify_one();
                return Ok(format!("Removed {} ({id}).", job.name));
            }
            CronAction::Pause => job.paused(),
            CronAction::Resume => job.resumed(now, &cron.tz),
            CronAction::Run => job.run_now(now),
            CronAction::Update => self.updated(job, args, ctx, now).await?,
            CronAction::Create | CronAction::List => unreachable!("answered in act"),
        };
        cron.store
            .cron_update(changed.clone())
            .await
            .map_err(store_error)?;
        cron.changed.notify_one();
        Ok(format!("Done: {}", self.describe(&changed)))
    }

    /// The job `id` of this conversation, when the person asking may change it.
    async fn own_job(&self, id: &str, ctx: &ToolContext) -> Result<CronJob, String> {
        let job = self
            .cron
            .store
            .cron_get(id)
            .await
            .map_err(store_error)?
            .filter(|j| j.origin_key == ctx.session_key)
            .ok_or_else(|| format!("there is no job {id:?} in this conversation (see list)"))?;
        // In a shared conversation, a job is changed only by whoever created it (its runs
        // speak for them).
        if job.author.user_id != ctx.author.user_id {
            return Err(format!(
                "{id} belongs to {}; only they can change it",
                job.author.display_name
            ));
        }
        Ok(job)
    }

    /// `update`: `job` with what `args` gives in place of its own.
    async fn updated(
        &self,
        mut job: CronJob,
        args: &CronjobArgs,
        ctx: &ToolContext,
        now: i64,
    ) -> Result<CronJob, String> {
        let cron = &self.cron;
        if let Some(prompt) = text(&args.prompt) {
            job.prompt = prompt.to_owned();
        }
        if let Some(name) = text(&args.name) {
            job.name = name.to_owned();
        }
        if let Some(repeat) = args.repeat {
            job.repeat = (repeat > 0).then_some(repeat);
        }
        if let Some(deliver) = text(&args.deliver) {
            job.deliver = self.destination(Some(deliver), ctx).await?;
        }
        if let Some(schedule_text) = text(&args.schedule) {
            let schedule = Schedule::parse(schedule_text, ts(now), &cron.tz)?;
            check_interval(&schedule, cron.min_interval)?;
            job.next_run_at = schedule
                .next_after(ts(now), &cron.tz)
                .map(|t| t.as_millisecond());
            job.schedule = schedule.text();
        }
        Ok(job)
    }

    /// Where a job's answers go (see [`super::destinations`]).
    async fn destination(
        &self,
        deliver: Option<&str>,
        ctx: &ToolContext,
    ) -> Result<ChatRef, String> {
        let chat = crate::delivery::destinations::resolve(
            deliver,
            &ctx.chat,
            &ctx.author.user_id,
            &self.cron.store,
            &self.homes,
        )
        .await?;
        if self.delivery.sender(chat.platform).is_none() {
            return Err(format!("{} is not connected here", chat.platform));
        }
        Ok(chat)
    }

    fn describe(&self, job: &CronJob) -> String {
        let next = match (job.paused, job.next_run_at) {
            (true, _) => "paused".to_owned(),
            (false, Some(at)) => format!("next {}", shown(at, &self.cron.tz)),
            (false, None) => "finished".to_owned(),
        };
        format!(
            "{} \"{}\" — {} — {next}, {} run(s) so far{} — to {} {}",
            job.id,
            job.name,
            job.schedule,
            job.runs,
            job.repeat
                .map(|r| format!(", {r} left"))
                .unwrap_or_default(),
            job.deliver.platform,
            job.deliver.chat_id
        )
    }
}

/// A string argument, trimmed; `None` when it is missing or blank.
fn text(given: &Option<String>) -> Option<&str> {
    given.as_deref().map(str::trim).filter(|s| !s.is_empty())
}

/// What the model is told when the store fails.
fn store_error(e: crate::store::StoreError) -> String {
    format!("the jobs cannot be reached: {e}")
}

/// The job `create` makes: `prompt` on `schedule`, first run at `next` (Unix ms), made
/// `now`, with the optional arguments (`name`, `repeat`, `catch_up`) from `args`.
fn new_job(
    args: &CronjobArgs,
    ctx: &ToolContext,
    prompt: &str,
    schedule: &Schedule,
    deliver: ChatRef,
    next: i64,
    now: i64,
) -> CronJob {
    // A one-time schedule runs once unless told otherwise.
    let repeat = args
        .repeat
        .filter(|r| *r > 0)
        .or((!schedule.recurring()).then_some(1));
    CronJob {
        id: format!("job_{:08x}", rand::random::<u32>()),
        name: text(&args.name)
            .map(str::to_owned)
            .unwrap_or_else(|| prompt.chars().take(40).collect()),
        prompt: prompt.to_owned(),
        schedule: schedule.text(),
        deliver,
        author: ctx.author.clone(),
        origin_key: ctx.session_key.clone(),
        repeat,
        runs: 0,
        paused: false,
        catch_up: args.catch_up.unwrap_or(true),
        next_run_at: Some(next),
        last_run_at: None,
        created_at: now,
    }
}

/// At most this many jobs per conversation, and in all.
const MAX_JOBS_PER_CONVERSATION: usize = 20;
const MAX_JOBS: usize = 200;

/// A recurring job runs at most once per `min` seconds (`cron.min_interval`, a minute):
/// each run is a model turn, with its cost.
fn check_interval(schedule: &Schedule, min: i64) -> Result<(), String> {
    match schedule {
        Schedule::Every(seconds) if *seconds < min => {
            Err(format!("a recurring job runs at most every {min} seconds"))
        }
        _ => Ok(()),
    }
}
