use hermes_adapter::{Author, ChatKind, ChatRef, Platform};

use super::*;
use crate::store::CronJob;

fn job(id: &str, schedule: &str, next: i64, catch_up: bool) -> CronJob {
    CronJob {
        id: id.into(),
        name: id.into(),
        prompt: "say tick".into(),
        schedule: schedule.into(),
        deliver: ChatRef {
            platform: Platform::Telegram,
            account: None,
            chat_id: "1".into(),
            thread_id: None,
            kind: ChatKind::Direct,
        },
        author: Author {
            user_id: "1".into(),
            display_name: "Ana".into(),
            username: None,
            is_bot: false,
        },
        origin_key: "k".into(),
        repeat: None,
        runs: 0,
        paused: false,
        catch_up,
        next_run_at: Some(next),
        last_run_at: None,
        created_at: next,
    }
}

#[tokio::test]
async fn a_late_slot_runs_once_or_is_skipped_as_the_job_says_and_a_slot_is_one_event() {
    let store = crate::store::Store::open_in_memory().unwrap();
    let cron = Cron::new(store.clone(), TimeZone::UTC, 60);
    let sink = crate::testing::RecordingSink::default();
    let now = now_ms();
    let late = now - 3_600_000;
    store
        .cron_create(job("catches_up", "every 1h", late, true))
        .await
        .unwrap();
    store
        .cron_create(job("skips", "every 1h", late, false))
        .await
        .unwrap();
    for due in store.cron_due(now).await.unwrap() {
        cron.fire(&due, now, &sink).await;
    }
    let events: Vec<String> = sink.event_ids();
    assert_eq!(events, [format!("gateway:cron:catches_up:{late}")]);
    for id in ["catches_up", "skips"] {
        let moved = store.cron_get(id).await.unwrap().unwrap();
        assert!(moved.next_run_at.unwrap() > now, "{id} moved on past now");
    }
    assert_eq!(store.cron_get("catches_up").await.unwrap().unwrap().runs, 1);
    assert_eq!(store.cron_get("skips").await.unwrap().unwrap().runs, 0);

    // A slot fired again (its move on was lost) is the same event: the inbox takes it once.
    let again = job("catches_up", "every 1h", late, true);
    cron.fire(&again, now, &sink).await;
    let ids: Vec<String> = sink.event_ids();
    assert_eq!(ids[1], ids[0]);
    assert_eq!(
        store.cron_get("catches_up").await.unwrap().unwrap().runs,
        1,
        "the slot was moved on once"
    );
}

#[tokio::test]
async fn a_job_with_runs_left_stops_after_them() {
    let store = crate::store::Store::open_in_memory().unwrap();
    let cron = Cron::new(store.clone(), TimeZone::UTC, 60);
    let sink = crate::testing::RecordingSink::default();
    let now = now_ms();
    store
        .cron_create(CronJob {
            repeat: Some(1),
            ..job("once", "every 1m", now, true)
        })
        .await
        .unwrap();
    let due = store.cron_due(now).await.unwrap();
    cron.fire(&due[0], now, &sink).await;
    let done = store.cron_get("once").await.unwrap().unwrap();
    assert_eq!(
        (done.next_run_at, done.repeat, done.runs),
        (None, Some(0), 1)
    );
}
