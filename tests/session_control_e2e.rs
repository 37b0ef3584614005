//! The commands that steer a conversation, end to end with Hermes' texts: `/sessions` and
//! `/resume` (earlier sessions listed, found and taken up again, never another
//! conversation's), `/queue` and `/steer` while a turn runs, and `/background` (`/bg`,
//! `/btw`) beside the conversation.

mod common;

use common::*;
use hermes_testkit::llm::{Reply, last_user_text};

/// Another person, in a direct chat of their own.
const BOB: i64 = 5151;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn earlier_sessions_are_listed_searched_and_resumed() {
    let w = World::allow_all().await;
    let _d = w.start();
    w.ask("plan the trip to Lisbon").await;
    w.ask("/title Lisbon trip").await;
    w.ask("/new").await;
    w.ask("the budget for next year").await;
    w.ask("/title Budget").await;
    w.ask("/new").await;
    w.ask("weekly chores").await;

    let listed = w.ask("/sessions").await.last().map(|t| visible(t)).unwrap();
    let (budget, lisbon) = (
        listed.find("Budget").expect("listed"),
        listed.find("Lisbon trip").expect("listed"),
    );
    assert!(
        listed.contains("Named Sessions") && budget < lisbon,
        "{listed}"
    );
    assert!(
        !listed.contains("weekly chores"),
        "the open session is not listed"
    );
    let found = w
        .ask("/sessions search lisbon")
        .await
        .last()
        .map(|t| visible(t))
        .unwrap();
    assert!(
        found.contains("Lisbon trip") && !found.contains("Budget"),
        "{found}"
    );

    let resumed = w.ask("/resume 2").await.last().map(|t| visible(t)).unwrap();
    assert!(
        resumed.starts_with("↻ Resumed session") && resumed.contains("Lisbon trip"),
        "{resumed}"
    );
    assert!(resumed.contains("(1 message)"), "{resumed}");
    w.ask("what did I plan?").await;
    let request = w.llm.requests().last().cloned().unwrap();
    assert!(said(&request, "plan the trip to Lisbon"), "{request}");
    assert!(!said(&request, "weekly chores"), "{request}");

    let by_title = w
        .ask("/resume budget")
        .await
        .last()
        .map(|t| visible(t))
        .unwrap();
    assert!(by_title.contains("Budget"), "{by_title}");
    let again = w
        .ask("/resume Budget")
        .await
        .last()
        .map(|t| visible(t))
        .unwrap();
    assert!(again.starts_with("📌 Already on session"), "{again}");
    let missing = w.ask("/resume 9").await.last().map(|t| visible(t)).unwrap();
    assert!(missing.contains("out of range"), "{missing}");
    let nothing = w
        .ask("/resume no such thing")
        .await
        .last()
        .map(|t| visible(t))
        .unwrap();
    assert!(
        nothing.starts_with("No session found matching"),
        "{nothing}"
    );
    // The chores session was left, not lost: it is listed with `full`.
    let full = w
        .ask("/sessions full")
        .await
        .last()
        .map(|t| visible(t))
        .unwrap();
    assert!(full.contains("weekly chores"), "{full}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_persons_sessions_are_not_reachable() {
    let w = World::allow_all().await;
    let _d = w.start();
    w.telegram.dm(BOB, "bob's secret plan");
    w.replies(BOB, 1).await;
    w.telegram.dm(BOB, "/title Secret");
    w.replies(BOB, 2).await;
    w.telegram.dm(BOB, "/new");
    let bobs = w.replies(BOB, 3).await;
    assert!(bobs[2].contains("New session"), "{bobs:?}");
    let listed = w
        .ask("/sessions full")
        .await
        .last()
        .map(|t| visible(t))
        .unwrap();
    assert!(listed.starts_with("No sessions found"), "{listed}");
    let searched = w
        .ask("/sessions search secret")
        .await
        .last()
        .map(|t| visible(t))
        .unwrap();
    assert!(searched.starts_with("No sessions found"), "{searched}");
    let stolen = w
        .ask("/resume Secret")
        .await
        .last()
        .map(|t| visible(t))
        .unwrap();
    assert!(stolen.starts_with("No session found matching"), "{stolen}");
    w.ask("what plan?").await;
    assert!(!said(w.llm.requests().last().unwrap(), "secret plan"));
}

/// Alice's turn runs a command for a few seconds (its pid written first).
async fn alice_runs_a_slow_command(w: &World, seconds: u32) {
    let pidfile = w.home.dir.join("work/slow-pid");
    w.llm.push(Reply::terminal(&format!(
        "echo $$ > {}; sleep {seconds}; echo slept",
        pidfile.display()
    )));
    w.telegram.dm(ALICE, "do the slow thing");
    written_pid(&pidfile).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn steer_joins_the_running_turn_and_queue_waits_for_it() {
    let w = World::allow_all().await;
    let _d = w.start();
    alice_runs_a_slow_command(&w, 3).await;
    let steered = w.ask("/steer also count the files").await;
    assert!(
        steered.last().unwrap().starts_with(
            "⏩ Steer queued — arrives after the next tool call: 'also count the files'"
        ),
        "{steered:?}"
    );
    let queued = w.ask("/queue then write a haiku").await;
    assert_eq!(queued.last().unwrap(), "Queued for the next turn.");
    w.llm.push(Reply::text("done with the slow thing"));
    // The turn's answer, then the queued prompt's own turn.
    let replies = w.replies(ALICE, 4).await;
    assert_eq!(replies[2], "done with the slow thing");
    assert_eq!(replies[3], "echo: then write a haiku");
    let requests = w.llm.requests();
    let after_tool = &requests[1];
    assert!(said(after_tool, "slept"), "{after_tool}");
    assert!(
        said(after_tool, "also count the files"),
        "the steer reached the running turn: {after_tool}"
    );
    assert_eq!(last_user_text(&requests[2]), "then write a haiku");
    // With nothing running, /queue and /steer are plain messages.
    assert_eq!(w.ask("/queue now").await.last().unwrap(), "echo: now");
    assert_eq!(w.ask("/steer here").await.last().unwrap(), "echo: here");
    let usage = w.ask("/queue").await;
    assert_eq!(visible(usage.last().unwrap()), "Usage: /queue <prompt>");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn background_runs_beside_the_conversation_and_answers_headed() {
    let w = World::allow_all().await;
    let _d = w.start();
    w.ask("remember the code word tangerine").await;
    let replies = w.said_after("/bg what is the code word?", 2).await;
    assert!(
        replies[0].starts_with("🔄 Background task started: \"what is the code word?\""),
        "{replies:?}"
    );
    assert_eq!(
        replies[1],
        "✅ Background task complete\nPrompt: \"what is the code word?\"\n\necho: what is the code word?"
    );
    let background = w.llm.requests().last().cloned().unwrap();
    assert!(
        !said(&background, "tangerine"),
        "a fresh session, without this conversation: {background}"
    );
    // And the conversation goes on without the background exchange.
    w.ask("and now?").await;
    let next = w.llm.requests().last().cloned().unwrap();
    assert!(said(&next, "tangerine"));
    assert!(!said(&next, "what is the code word"), "{next}");
    let btw = w.ask("/btw").await;
    assert!(visible(btw.last().unwrap()).starts_with("Usage: /background <prompt>"));
}
