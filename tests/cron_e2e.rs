//! Scheduled jobs end to end: a job created in the chat runs on time as a turn of its own
//! and answers in the chat; killed and restarted, the daemon runs a slot once (a run
//! recorded before the kill is not run again; a slot that fell due while it was down runs
//! once on start); `hermes-gateway cron list` shows the jobs.

mod common;

use std::time::Duration;

use common::*;
use hermes_testkit::llm::{Reply, last_user_text};
use serde_json::json;

/// Scripted answers: a job's run answers "tick <n>", anything else is echoed.
fn script(w: &World) {
    for _ in 0..20 {
        w.llm.push(Reply::computed(|request| {
            let text = last_user_text(request);
            if text.starts_with("[Scheduled job") {
                let run = text
                    .split("run ")
                    .nth(1)
                    .and_then(|r| r.split('.').next())
                    .unwrap_or("?")
                    .to_owned();
                Reply::text(format!("tick {run}"))
            } else {
                Reply::text(format!("echo: {text}"))
            }
        }));
    }
}

fn ticks(w: &World) -> Vec<String> {
    w.telegram
        .sent_texts(ALICE)
        .into_iter()
        .filter(|t| t.starts_with("tick"))
        .collect()
}

fn create(schedule: &str) -> Reply {
    Reply::ToolCall {
        name: "cronjob".into(),
        arguments: json!({"action": "create", "schedule": schedule, "prompt": "say tick", "name": "ticker"}),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_created_in_chat_runs_once_and_a_restart_does_not_run_it_again() {
    let w = World::allow_all().await;
    w.llm.push(create("2s"));
    script(&w);
    let mut d = w.start();
    let answer = w.ask("remind me in two seconds").await;
    assert!(answer[0].starts_with("echo:"), "{answer:?}");
    let results = tool_results(&w);
    assert!(results[0].starts_with("Scheduled: job_"), "{results:?}");
    let t = w.telegram.clone();
    hermes_testkit::eventually(WAIT, "the job's answer", || {
        t.sent_texts(ALICE)
            .iter()
            .any(|s| s == "tick 1")
            .then_some(())
    })
    .await;
    outbox_drained(&w).await;
    let job_runs = || {
        w.llm
            .requests()
            .iter()
            .filter(|r| last_user_text(r).starts_with("[Scheduled job"))
            .count()
    };
    assert_eq!(job_runs(), 1);
    d.kill();
    let _d = w.start();
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(job_runs(), 1, "the slot's turn is not run again");
    assert_eq!(ticks(&w), ["tick 1"], "one run for the one slot");
    let listed = std::process::Command::new(BIN)
        .args(["--home", w.home.dir.to_str().unwrap(), "cron", "list"])
        .output()
        .unwrap();
    let listed = String::from_utf8_lossy(&listed.stdout);
    assert!(
        listed.contains("\"ticker\"") && listed.contains("finished") && listed.contains("runs 1"),
        "{listed}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slot_that_fell_due_while_the_daemon_was_down_runs_once_on_start() {
    let w = World::allow_all().await;
    w.llm.push(create("3s"));
    script(&w);
    let mut d = w.start();
    w.ask("remind me in three seconds").await;
    d.kill();
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert!(ticks(&w).is_empty());
    let _d = w.start();
    let t = w.telegram.clone();
    hermes_testkit::eventually(WAIT, "the missed run", || {
        t.sent_texts(ALICE)
            .iter()
            .any(|s| s.starts_with("tick"))
            .then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(ticks(&w), ["tick 1"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recurring_job_runs_until_paused() {
    // Recurring jobs run at most once a minute unless the operator says otherwise.
    let w = World::new(
        &["TELEGRAM_ALLOW_ALL_USERS=true"],
        "cron:\n  min_interval: 1\n",
    )
    .await;
    w.llm.push(create("every 1s"));
    script(&w);
    let _d = w.start();
    w.ask("tick every second").await;
    let t = w.telegram.clone();
    hermes_testkit::eventually(WAIT, "two runs", || {
        let n = t
            .sent_texts(ALICE)
            .iter()
            .filter(|s| s.starts_with("tick"))
            .count();
        (n >= 2).then_some(())
    })
    .await;
    let id = w
        .llm
        .requests()
        .iter()
        .flat_map(|r| r["messages"].as_array().cloned().unwrap_or_default())
        .filter_map(|m| m["content"].as_str().map(str::to_owned))
        .find_map(|c| {
            c.strip_prefix("Scheduled: ")
                .and_then(|rest| rest.split_whitespace().next())
                .map(str::to_owned)
        })
        .expect("the job's id");
    let paused = std::process::Command::new(BIN)
        .args(["--home", w.home.dir.to_str().unwrap(), "cron", "pause", &id])
        .output()
        .unwrap();
    assert!(paused.status.success(), "{paused:?}");
    // A run already recorded may still answer; then no more.
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    let after_pause = ticks(&w).len();
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(ticks(&w).len(), after_pause, "paused");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_are_bounded_and_only_their_creator_changes_them() {
    let w = World::allow_all().await;
    w.llm.push(Reply::ToolCalls(vec![
        (
            "cronjob".into(),
            json!({"action": "create", "schedule": "every 5s", "prompt": "spam"}),
        ),
        (
            "cronjob".into(),
            json!({"action": "create", "schedule": "every 2h", "prompt": "report", "deliver": "telegram:777"}),
        ),
    ]));
    w.llm.push(Reply::text("tried"));
    let _d = w.start();
    w.ask("schedule things").await;
    let results = tool_results(&w);
    assert!(
        results[0].contains("at most every 60 seconds"),
        "{results:?}"
    );
    assert!(
        results[1].contains("not a chat where you have talked"),
        "{results:?}"
    );
}

/// The id of the job a request's tool results say was scheduled.
fn scheduled_id(request: &serde_json::Value) -> String {
    tool_results_in(request)
        .iter()
        .find_map(|c| {
            c.strip_prefix("Scheduled: ")
                .and_then(|rest| rest.split_whitespace().next())
                .map(str::to_owned)
        })
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_is_listed_changed_paused_resumed_and_removed_in_chat_only_by_its_creator() {
    let w = World::new(
        &["TELEGRAM_ALLOW_ALL_USERS=true"],
        "group_sessions_per_user: false\n",
    )
    .await;
    let (group, bob) = (-100_500, 5151);
    w.llm.push(Reply::ToolCall {
        name: "cronjob".into(),
        arguments: json!({"action": "create", "schedule": "every 2h", "prompt": "report", "name": "reporter"}),
    });
    w.llm.push(Reply::text("made"));
    // Bob, in the same shared conversation, cannot change Alice's job.
    w.llm.push(Reply::computed(|request| Reply::ToolCall {
        name: "cronjob".into(),
        arguments: json!({"action": "pause", "job_id": scheduled_id(request)}),
    }));
    w.llm.push(Reply::text("refused"));
    w.llm.push(Reply::computed(|request| {
        let id = scheduled_id(request);
        let act = |action: &str, extra: serde_json::Value| {
            let mut args = json!({"action": action, "job_id": id});
            for (k, v) in extra.as_object().unwrap() {
                args[k] = v.clone();
            }
            ("cronjob".to_owned(), args)
        };
        Reply::ToolCalls(vec![
            act(
                "update",
                json!({"prompt": "a new report", "schedule": "every 3h"}),
            ),
            act("pause", json!({})),
            ("cronjob".to_owned(), json!({"action": "list"})),
            act("resume", json!({})),
            act("remove", json!({})),
            (
                "cronjob".to_owned(),
                json!({"action": "list", "note": "again"}),
            ),
        ])
    }));
    w.llm.push(Reply::text("all done"));
    let _d = w.start();
    w.telegram
        .group(group, ALICE, "schedule a report every two hours", true);
    w.replies(group, 1).await;
    w.telegram.group(group, bob, "pause that job", true);
    w.replies(group, 2).await;
    let refused = tool_results(&w);
    assert!(
        refused
            .last()
            .unwrap()
            .contains("belongs to User4242; only they can change it"),
        "{refused:?}"
    );
    w.telegram
        .group(group, ALICE, "change it, then remove it", true);
    assert_eq!(w.replies(group, 3).await[2], "all done");
    let results = tool_results(&w);
    let last6 = &results[results.len() - 6..];
    assert!(
        last6[0].starts_with("Done:") && last6[0].contains("every 3h"),
        "{last6:?}"
    );
    assert!(
        last6[1].starts_with("Done:") && last6[1].contains("paused"),
        "{last6:?}"
    );
    assert!(
        last6[2].contains("reporter") && last6[2].contains("paused"),
        "{last6:?}"
    );
    assert!(
        last6[3].starts_with("Done:") && !last6[3].contains("paused"),
        "{last6:?}"
    );
    assert!(last6[4].starts_with("Removed reporter"), "{last6:?}");
    assert!(!last6[5].contains("reporter"), "{last6:?}");
}
