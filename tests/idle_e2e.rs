//! What an idle conversation costs the daemon, end to end: once its people stop writing,
//! its session actor and its delivery lane end (their runtime tasks are gone from
//! `/metrics`), and the next message brings the conversation back with its history.

mod common;

use std::time::{Duration, Instant};

use common::*;
use hermes_testkit::eventually;
use hermes_testkit::llm::Reply;

/// Past the 30 s after which an idle actor and an idle lane end, with room for a slow CI.
const RETIRED_WITHIN: Duration = Duration::from_secs(50);

async fn runtime_tasks(addr: &str) -> f64 {
    let metrics = metrics(addr).await;
    metrics
        .lines()
        .find_map(|l| l.strip_prefix("hermes_runtime_tasks ")?.trim().parse().ok())
        .unwrap_or_else(|| panic!("no hermes_runtime_tasks in\n{metrics}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_conversations_end_their_tasks_and_come_back_with_their_history() {
    const CHATS: i64 = 10;
    let w = World::allow_all().await;
    let d = w.start();
    let addr = eventually(WAIT, "the HTTP address", || d.http_addr()).await;
    for chat in 0..CHATS {
        w.llm.push(Reply::text(format!("hello {chat}")));
    }
    for chat in 0..CHATS {
        w.telegram
            .dm(ALICE + chat, &format!("remember the word pelican{chat}"));
    }
    for chat in 0..CHATS {
        w.replies(ALICE + chat, 1).await;
    }
    let busy = runtime_tasks(&addr).await;

    // Each conversation had an actor and a lane: both end once idle.
    let deadline = Instant::now() + RETIRED_WITHIN;
    let mut now = busy;
    while now > busy - 2.0 * CHATS as f64 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(500)).await;
        now = runtime_tasks(&addr).await;
    }
    assert!(
        now <= busy - 2.0 * CHATS as f64,
        "runtime tasks {busy} with {CHATS} conversations, still {now} after {RETIRED_WITHIN:?} idle"
    );

    // A retired conversation answers again, with what was said before.
    w.llm.push(Reply::text("it was pelican3"));
    w.telegram.dm(ALICE + 3, "which word was it?");
    assert_eq!(w.replies(ALICE + 3, 2).await[1], "it was pelican3");
    let last = w.llm.requests().last().unwrap().to_string();
    assert!(last.contains("remember the word pelican3"), "{last}");
}
