//! Hermes' own scheduled jobs (`$HERMES_HOME/cron/jobs.json`), taken over once, at the
//! first start that finds them: each job with its name, prompt, schedule, repeat count,
//! paused state and the chat it reports to (`origin`, or `platform[:chat_id]`). Jobs
//! delivering nowhere (`local`) or to a chat that cannot be named are left out and logged.
//! The file is left as it is; a mark in the database keeps it from being taken twice.

use std::path::Path;

use hermes_adapter::{Author, ChatKind, ChatRef, Platform};
use serde_json::Value;

use super::{Schedule, now_ms, ts};
use crate::delivery::destinations::ConfiguredHomes;
use crate::store::{CronJob, Store};

/// The mark (in `chat_settings`, under the gateway's own key).
const MARK_KEY: &str = "gateway";
const MARK: &str = "hermes_cron_imported";

/// Take over the jobs of `home/cron/jobs.json` unless done before; how many were taken.
pub async fn import_once(
    home: &Path,
    store: &Store,
    tz: &jiff::tz::TimeZone,
    homes: &ConfiguredHomes,
) -> usize {
    let path = home.join("cron").join("jobs.json");
    let Ok(text) = tokio::fs::read_to_string(&path).await else {
        return 0;
    };
    if store
        .chat_setting(MARK_KEY, MARK)
        .await
        .ok()
        .flatten()
        .is_some()
    {
        return 0;
    }
    let jobs = match serde_json::from_str::<Value>(&text) {
        Ok(Value::Object(mut o)) => o.remove("jobs").unwrap_or(Value::Null),
        Ok(list @ Value::Array(_)) => list,
        Ok(_) | Err(_) => {
            tracing::warn!(path = %path.display(), "cron: Hermes' jobs.json cannot be read; not imported");
            return 0;
        }
    };
    let mut taken = 0;
    for job in jobs.as_array().into_iter().flatten() {
        match convert(job, store, tz, homes).await {
            Ok(job) => {
                let name = job.name.clone();
                match store.cron_create(job).await {
                    Ok(()) => taken += 1,
                    Err(e) => {
                        tracing::warn!(job = %name, error = %e, "cron: a Hermes job could not be stored")
                    }
                }
            }
            Err(why) => {
                tracing::warn!(job = %job["name"], why, "cron: a Hermes job is not imported")
            }
        }
    }
    if let Err(e) = store
        .set_chat_setting(MARK_KEY, MARK, Some(now_ms().to_string()))
        .await
    {
        tracing::warn!(error = %e, "cron: could not mark Hermes' jobs as imported");
    }
    tracing::info!(taken, path = %path.display(), "cron: Hermes' scheduled jobs imported");
    taken
}

/// One Hermes job as the gateway's.
async fn convert(
    job: &Value,
    store: &Store,
    tz: &jiff::tz::TimeZone,
    homes: &ConfiguredHomes,
) -> Result<CronJob, String> {
    let text = |v: &Value| {
        v.as_str()
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
    };
    let prompt = text(&job["prompt"]).ok_or("no prompt")?;
    let schedule = &job["schedule"];
    let schedule_text = match schedule["kind"].as_str() {
        Some("cron") => text(&schedule["expr"]).ok_or("a cron job without expr")?,
        Some("interval") => format!(
            "every {}m",
            schedule["minutes"]
                .as_u64()
                .ok_or("an interval without minutes")?
        ),
        Some("once") => text(&schedule["run_at"]).ok_or("a one-shot job without run_at")?,
        _ => text(schedule).ok_or("no schedule")?,
    };
    let now = now_ms();
    let parsed = Schedule::parse(&schedule_text, ts(now), tz)?;
    let next = parsed
        .next_after(ts(now), tz)
        .map(|t| t.as_millisecond())
        .ok_or("its one time has passed")?;
    let origin = &job["origin"];
    let deliver = text(&job["deliver"]).unwrap_or_else(|| "origin".into());
    let (platform, chat_id, thread) = match deliver.as_str() {
        "local" => return Err("it delivers nowhere (local)".into()),
        "origin" => (
            text(&origin["platform"]),
            text(&origin["chat_id"]).or_else(|| origin["chat_id"].as_i64().map(|n| n.to_string())),
            text(&origin["thread_id"]),
        ),
        other => {
            let mut parts = other.splitn(3, ':');
            (
                parts.next().map(str::to_owned),
                parts.next().map(str::to_owned),
                parts.next().map(str::to_owned),
            )
        }
    };
    let platform = platform
        .as_deref()
        .and_then(Platform::parse)
        .ok_or("no platform it reports to")?;
    let deliver = match &chat_id {
        // A bare platform (`"deliver": "telegram"`): Hermes sends to its home channel.
        None => crate::delivery::destinations::home(platform, store, homes).await?,
        Some(chat_id) => store
            .chat_seen(platform, chat_id, thread.as_deref(), None)
            .await
            .map_err(|e| e.to_string())?
            .unwrap_or(ChatRef {
                platform,
                account: None,
                chat_id: chat_id.clone(),
                thread_id: thread,
                kind: ChatKind::Direct,
            }),
    };
    let chat_id = deliver.chat_id.clone();
    let user_id = text(&origin["user_id"]).unwrap_or_else(|| chat_id.clone());
    let repeat = job["repeat"]["times"]
        .as_i64()
        .map(|times| times - job["repeat"]["completed"].as_i64().unwrap_or(0))
        .filter(|left| *left > 0);
    Ok(CronJob {
        id: text(&job["id"])
            .map(|id| format!("job_{id}"))
            .unwrap_or_else(|| format!("job_{:08x}", rand::random::<u32>())),
        name: text(&job["name"]).unwrap_or_else(|| prompt.chars().take(40).collect()),
        prompt,
        schedule: parsed.text(),
        author: Author {
            user_id,
            display_name: text(&origin["user_name"]).unwrap_or_else(|| "Hermes".into()),
            username: None,
            is_bot: false,
        },
        origin_key: format!("{}:hermes-import", platform.as_str()),
        deliver,
        repeat,
        runs: job["repeat"]["completed"].as_i64().unwrap_or(0),
        paused: job["enabled"].as_bool() == Some(false),
        catch_up: true,
        next_run_at: Some(next),
        last_run_at: None,
        created_at: now,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn hermes_jobs_are_taken_over_once() {
        let home = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(home.path().join("cron")).unwrap();
        std::fs::write(
            home.path().join("cron/jobs.json"),
            r#"{"jobs": [
                {"id": "a1", "name": "morning", "prompt": "news summary",
                 "schedule": {"kind": "cron", "expr": "0 9 * * *", "display": "0 9 * * *"},
                 "repeat": {"times": null, "completed": 3}, "enabled": true,
                 "deliver": "origin", "origin": {"platform": "telegram", "chat_id": "42", "user_id": "42"}},
                {"id": "b2", "name": "hourly", "prompt": "check disk",
                 "schedule": {"kind": "interval", "minutes": 60}, "enabled": false,
                 "deliver": "slack:C1", "origin": null},
                {"id": "c3", "name": "quiet", "prompt": "x",
                 "schedule": {"kind": "interval", "minutes": 5}, "deliver": "local"},
                {"id": "d4", "name": "digest", "prompt": "weekly digest",
                 "schedule": {"kind": "interval", "minutes": 10080}, "deliver": "discord"},
                {"id": "e5", "name": "nowhere", "prompt": "y",
                 "schedule": {"kind": "interval", "minutes": 60}, "deliver": "whatsapp"}
            ]}"#,
        )
        .unwrap();
        let store = Store::open_in_memory().unwrap();
        let utc = jiff::tz::TimeZone::UTC;
        // A bare platform reports to its home channel (and is left out without one).
        let homes = ConfiguredHomes::from([(Platform::Discord, "777".to_owned())]);
        assert_eq!(import_once(home.path(), &store, &utc, &homes).await, 3);
        assert_eq!(
            import_once(home.path(), &store, &utc, &homes).await,
            0,
            "once"
        );
        let jobs = store.cron_list(None).await.unwrap();
        let morning = jobs.iter().find(|j| j.name == "morning").unwrap();
        assert_eq!(morning.schedule, "0 9 * * *");
        assert_eq!((morning.runs, morning.repeat), (3, None));
        assert_eq!(morning.deliver.chat_id, "42");
        let hourly = jobs.iter().find(|j| j.name == "hourly").unwrap();
        assert_eq!(hourly.schedule, "every 1h");
        assert!(hourly.paused);
        assert_eq!(hourly.deliver.platform, Platform::Slack);
        let digest = jobs.iter().find(|j| j.name == "digest").unwrap();
        assert_eq!(
            (digest.deliver.platform, digest.deliver.chat_id.as_str()),
            (Platform::Discord, "777")
        );
    }
}
