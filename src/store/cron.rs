//! Scheduled jobs (`cronjob`, `hermes-gateway cron`): what to ask, when, where the answer
//! goes and who asked; the next run, moved on only by a compare-and-set on the slot it
//! replaces (so one slot is claimed once). Also the chats a job may deliver to: those the
//! gateway has had a conversation in.

use hermes_adapter::{Author, ChatKind, ChatRef, Platform};
use rusqlite::params;

use super::db::{Optional, Row};

use super::{Store, StoreError, now_ms};

/// One scheduled job.
#[derive(Debug, Clone)]
pub struct CronJob {
    pub id: String,
    pub name: String,
    pub prompt: String,
    /// As [`crate::cron::Schedule::text`] writes it.
    pub schedule: String,
    /// Where the answer goes.
    pub deliver: ChatRef,
    /// Who created it (the run speaks for them).
    pub author: Author,
    /// The conversation it was created in.
    pub origin_key: String,
    /// Runs left; `None`: no limit.
    pub repeat: Option<i64>,
    pub runs: i64,
    pub paused: bool,
    /// A slot missed while the daemon was down runs once on start (else it is skipped).
    pub catch_up: bool,
    /// Unix ms; `None`: no more runs.
    pub next_run_at: Option<i64>,
    pub last_run_at: Option<i64>,
    pub created_at: i64,
}

fn row_to_job(r: &Row<'_>) -> rusqlite::Result<CronJob> {
    let json = |i: usize| -> rusqlite::Result<String> { r.get(i) };
    Ok(CronJob {
        id: r.get(0)?,
        name: r.get(1)?,
        prompt: r.get(2)?,
        schedule: r.get(3)?,
        deliver: serde_json::from_str(&json(4)?).map_err(|e| {
            rusqlite::Error::FromSqlConversionFailure(4, rusqlite::types::Type::Text, e.into())
        })?,
        author: serde_json::from_str(&json(5)?).map_err(|e| {
            rusqlite::Error::FromSqlConversionFailure(5, rusqlite::types::Type::Text, e.into())
        })?,
        origin_key: r.get(6)?,
        repeat: r.get(7)?,
        runs: r.get(8)?,
        paused: r.get(9)?,
        catch_up: r.get(10)?,
        next_run_at: r.get(11)?,
        last_run_at: r.get(12)?,
        created_at: r.get(13)?,
    })
}

const COLUMNS: &str = "id, name, prompt, schedule, deliver, author, origin_key, repeat, runs, \
                       paused, catch_up, next_run_at, last_run_at, created_at";

impl Store {
    pub async fn cron_create(&self, job: CronJob) -> Result<(), StoreError> {
        self.call(move |conn| {
            conn.prepare_cached(&format!(
                "INSERT INTO cron_jobs ({COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)"
            ))?
            .execute(params![
                job.id,
                job.name,
                job.prompt,
                job.schedule,
                serde_json::to_string(&job.deliver).unwrap_or_default(),
                serde_json::to_string(&job.author).unwrap_or_default(),
                job.origin_key,
                job.repeat,
                job.runs,
                job.paused,
                job.catch_up,
                job.next_run_at,
                job.last_run_at,
                job.created_at,
            ])?;
            Ok(())
        })
        .await
    }

    /// The jobs (of conversation `origin_key`, when given), oldest first.
    pub async fn cron_list(&self, origin_key: Option<String>) -> Result<Vec<CronJob>, StoreError> {
        self.call(move |conn| {
            let mut stmt = conn.prepare_cached(&format!(
                "SELECT {COLUMNS} FROM cron_jobs WHERE CAST(?1 AS TEXT) IS NULL OR origin_key = ?1
                 ORDER BY created_at"
            ))?;
            let rows = stmt.query_map([origin_key], row_to_job)?;
            Ok(rows.collect::<Result<Vec<_>, _>>()?)
        })
        .await
    }

    pub async fn cron_get(&self, id: &str) -> Result<Option<CronJob>, StoreError> {
        let id = id.to_owned();
        self.call(move |conn| {
            conn.prepare_cached(&format!("SELECT {COLUMNS} FROM cron_jobs WHERE id = ?1"))?
                .query_row([id], row_to_job)
                .optional()
        })
        .await
    }

    /// Replace a job's editable fields (name, prompt, schedule, deliver, repeat, paused,
    /// next run); `false` when there is no such job.
    pub async fn cron_update(&self, job: CronJob) -> Result<bool, StoreError> {
        self.call(move |conn| {
            let n = conn
                .prepare_cached(
                    "UPDATE cron_jobs SET name = ?2, prompt = ?3, schedule = ?4, deliver = ?5,
                        repeat = ?6, paused = ?7, next_run_at = ?8
                     WHERE id = ?1",
                )?
                .execute(params![
                    job.id,
                    job.name,
                    job.prompt,
                    job.schedule,
                    serde_json::to_string(&job.deliver).unwrap_or_default(),
                    job.repeat,
                    job.paused,
                    job.next_run_at,
                ])?;
            Ok(n > 0)
        })
        .await
    }

    pub async fn cron_remove(&self, id: &str) -> Result<bool, StoreError> {
        let id = id.to_owned();
        self.call(move |conn| {
            Ok(conn
                .prepare_cached("DELETE FROM cron_jobs WHERE id = ?1")?
                .execute([id])?
                > 0)
        })
        .await
    }

    /// Active jobs whose next run is at or before `now_ms`.
    pub async fn cron_due(&self, now_ms: i64) -> Result<Vec<CronJob>, StoreError> {
        self.call(move |conn| {
            let mut stmt = conn.prepare_cached(&format!(
                "SELECT {COLUMNS} FROM cron_jobs
                 WHERE paused = 0 AND next_run_at IS NOT NULL AND next_run_at <= ?1
                 ORDER BY next_run_at"
            ))?;
            let rows = stmt.query_map([now_ms], row_to_job)?;
            Ok(rows.collect::<Result<Vec<_>, _>>()?)
        })
        .await
    }

    /// The earliest next run of an active job.
    pub async fn cron_next_due(&self) -> Result<Option<i64>, StoreError> {
        self.call(|conn| {
            conn
                .prepare_cached(
                    "SELECT min(next_run_at) FROM cron_jobs WHERE paused = 0 AND next_run_at IS NOT NULL",
                )?
                .query_row(params![], |r| r.get(0))
        })
        .await
    }

    /// Move job `id` on from `slot` to `next` (`ran`: the slot's run was recorded, so it
    /// counts); nothing when the job has moved on from that slot already. `true` when this
    /// call moved it.
    pub async fn cron_advance(
        &self,
        id: &str,
        slot: i64,
        next: Option<i64>,
        ran: bool,
    ) -> Result<bool, StoreError> {
        let id = id.to_owned();
        self.call(move |conn| {
            let n = conn
                .prepare_cached(
                    "UPDATE cron_jobs SET next_run_at = ?3,
                        runs = runs + ?4,
                        last_run_at = CASE WHEN ?4 = 1 THEN ?5 ELSE last_run_at END,
                        repeat = CASE WHEN repeat IS NOT NULL AND ?4 = 1 THEN repeat - 1 ELSE repeat END
                     WHERE id = ?1 AND next_run_at = ?2",
                )?
                .execute(params![id, slot, next, ran as i64, now_ms()])?;
            Ok(n > 0)
        })
        .await
    }

    /// A chat of `platform` the gateway has had a conversation in (with `person`, when
    /// given), as it knows it.
    pub async fn chat_seen(
        &self,
        platform: Platform,
        chat_id: &str,
        thread_id: Option<&str>,
        person: Option<&str>,
    ) -> Result<Option<ChatRef>, StoreError> {
        let chat_id = chat_id.to_owned();
        let thread_id = thread_id.map(str::to_owned);
        let person = person.map(str::to_owned);
        self.call(move |conn| {
            Ok(conn
                .prepare_cached(
                    "SELECT chat_kind, account FROM sessions
                     WHERE platform = ?1 AND chat_id = ?2 AND thread_id IS NOT DISTINCT FROM ?3
                       AND (CAST(?4 AS TEXT) IS NULL OR user_id = ?4)
                     ORDER BY started_at DESC LIMIT 1",
                )?
                .query_row(
                    params![platform.as_str(), chat_id, thread_id, person],
                    |r| Ok((r.get::<_, String>(0)?, r.get::<_, Option<String>>(1)?)),
                )
                .optional()?
                .map(|(kind, account)| ChatRef {
                    platform,
                    account,
                    chat_id: chat_id.clone(),
                    thread_id: thread_id.clone(),
                    kind: ChatKind::parse(&kind).unwrap_or(ChatKind::Group),
                }))
        })
        .await
    }
}
