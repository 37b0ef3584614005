//! The turn loop's recovery, end to end (the real daemon, the fake Telegram and the fake
//! LLM): an answer cut off by the output limit is continued, a misspelled tool name is
//! repaired, and the same call twice in one step runs once.

mod common;

use common::*;
use hermes_testkit::llm::Reply;
use serde_json::{Value, json};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_cut_off_by_the_output_limit_is_continued() {
    let w = World::allow_all().await;
    w.llm.push(Reply::Truncated("The first half, ".into()));
    w.llm.push(Reply::Truncated("the second half, ".into()));
    w.llm.push(Reply::text("and the end."));
    let _d = w.start();
    w.telegram.dm(ALICE, "tell me everything");
    let replies = w.replies(ALICE, 1).await;
    assert_eq!(replies, ["The first half, the second half, and the end."]);
    let requests = w.llm.requests();
    assert_eq!(requests.len(), 3);
    let messages = requests[2]["messages"].as_array().unwrap();
    let n = messages.len();
    assert_eq!(
        messages[n - 2],
        json!({"role": "assistant", "content": "The first half, the second half, "})
    );
    assert_eq!(messages[n - 1]["role"], "user");
    assert!(
        messages[n - 1]["content"]
            .as_str()
            .unwrap()
            .contains("cut off"),
        "{}",
        messages[n - 1]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fourth_cut_off_ends_the_turn_with_what_was_written() {
    let w = World::allow_all().await;
    for part in ["one ", "two ", "three ", "four"] {
        w.llm.push(Reply::Truncated(part.into()));
    }
    let _d = w.start();
    w.telegram.dm(ALICE, "count");
    assert_eq!(w.replies(ALICE, 1).await, ["one two three four"]);
    settle().await;
    assert_eq!(w.llm.requests().len(), 4, "three continuations, no more");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_misspelled_tool_name_is_repaired() {
    let w = World::allow_all().await;
    w.llm.push(Reply::ToolCall {
        name: "TerminalTool".into(),
        arguments: json!({"command": "echo repaired-and-run"}),
    });
    w.llm.push(Reply::text("done"));
    let _d = w.start();
    w.telegram.dm(ALICE, "run it");
    assert_eq!(w.replies(ALICE, 1).await, ["done"]);
    let results = tool_results(&w);
    assert_eq!(results.len(), 1);
    assert!(results[0].contains("repaired-and-run"), "{results:?}");
    let last = w.llm.requests().last().cloned().unwrap();
    let called: Vec<Value> = last["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["tool_calls"].as_array().cloned())
        .flatten()
        .collect();
    assert_eq!(
        called[0]["function"]["name"], "terminal",
        "the history says which tool ran"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_call_twice_in_one_step_runs_once() {
    let w = World::allow_all().await;
    let log = w.home.dir.join("work").join("runs.log");
    let command = json!({"command": format!("echo ran >> {}", log.display())});
    w.llm.push(Reply::ToolCalls(vec![
        ("terminal".into(), command.clone()),
        ("terminal".into(), command),
    ]));
    w.llm.push(Reply::text("done"));
    let _d = w.start();
    w.telegram.dm(ALICE, "append once");
    assert_eq!(w.replies(ALICE, 1).await, ["done"]);
    assert_eq!(std::fs::read_to_string(&log).unwrap(), "ran\n", "run once");
    let results = tool_results(&w);
    assert_eq!(results.len(), 2, "each call has its result");
    assert_eq!(results[0], results[1]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_last_step_gets_a_grace_call_without_tools_to_answer() {
    let w = World::new(
        &["TELEGRAM_ALLOW_ALL_USERS=true"],
        "agent:\n  max_turns: 2\n",
    )
    .await;
    w.llm.push(Reply::terminal("echo first"));
    w.llm.push(Reply::terminal("echo second"));
    w.llm.push(Reply::text("Here is what I found so far."));
    let _d = w.start();
    w.telegram.dm(ALICE, "dig deep");
    assert_eq!(w.replies(ALICE, 1).await, ["Here is what I found so far."]);
    let requests = w.llm.requests();
    assert_eq!(requests.len(), 3);
    assert!(
        requests[2].get("tools").is_none(),
        "no tools in the grace call"
    );
    let last = requests[2]["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert!(
        last["content"].as_str().unwrap().contains("tool steps"),
        "{last}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn usage_is_counted_per_turn_and_shown_by_the_usage_command() {
    let w = World::allow_all().await;
    w.llm.push(Reply::terminal("echo one step"));
    w.llm.push(Reply::text("done"));
    let _d = w.start();
    w.telegram.dm(ALICE, "work");
    w.replies(ALICE, 1).await;
    w.telegram.dm(ALICE, "/usage");
    let shown = w.replies(ALICE, 2).await[1].clone();
    // Two model calls, each 100 tokens in (40 cached) and 7 out.
    assert!(
        shown.contains("This conversation: 200 tokens in (80 from the cache), 14 out"),
        "{shown}"
    );
    assert!(
        shown.contains("Today (UTC, every conversation): 200 tokens in"),
        "{shown}"
    );
    assert!(
        w.llm.requests()[0]["stream_options"]["include_usage"] == true,
        "usage is asked for"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_refuses_stream_options_is_asked_without_them() {
    let w = World::allow_all().await;
    w.llm.push(Reply::ErrorSaying {
        status: 400,
        message: "Unrecognized request argument supplied: stream_options".into(),
    });
    w.llm.push(Reply::text("fine without"));
    w.llm.push(Reply::text("still fine"));
    let _d = w.start();
    w.telegram.dm(ALICE, "hello");
    assert_eq!(w.replies(ALICE, 1).await, ["fine without"]);
    w.telegram.dm(ALICE, "again");
    assert_eq!(w.replies(ALICE, 2).await[1], "still fine");
    let requests = w.llm.requests();
    assert!(requests[0].get("stream_options").is_some());
    assert!(requests[1].get("stream_options").is_none());
    assert!(
        requests[2].get("stream_options").is_none(),
        "not asked again"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn arguments_that_are_not_json_get_an_error_result_the_model_can_correct() {
    let w = World::allow_all().await;
    w.llm.push(Reply::BadArguments {
        name: "terminal".into(),
        arguments_text: "{\"command\": \"echo cut".into(),
    });
    w.llm.push(Reply::terminal("echo corrected"));
    w.llm.push(Reply::text("fixed it"));
    let _d = w.start();
    assert_eq!(w.ask("run something").await, ["fixed it"]);
    let results = tool_results(&w);
    assert_eq!(results.len(), 2);
    assert!(results[0].contains("not valid JSON"), "{results:?}");
    assert!(results[1].contains("corrected"), "{results:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_only_calls_in_one_step_run_together() {
    let w = World::allow_all().await;
    // Two waits of two seconds each on processes that outlast them.
    script_two_sleeps_and_waits(&w, 9, 2);
    w.llm.push(Reply::text("both waited"));
    let _d = w.start();
    assert_eq!(w.ask("wait for both").await, ["both waited"]);
    let results = tool_results(&w);
    assert_eq!(results.len(), 4, "{results:?}");
    assert!(results[2].contains("still running"), "{results:?}");
    let timings = w.llm.timings();
    let waited = timings[2].arrived - timings[1].finished.unwrap();
    assert!(
        waited < std::time::Duration::from_millis(3_500),
        "two 2 s waits took {waited:?}: they did not run together"
    );
    w.ask("/stop all").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_reaches_every_call_running_together() {
    let w = World::allow_all().await;
    script_two_sleeps_and_waits(&w, 20, 60);
    let _d = w.start();
    w.telegram.dm(ALICE, "wait for both");
    let llm = w.llm.clone();
    hermes_testkit::eventually(WAIT, "the waits to start", || {
        (llm.timings().get(1)?.finished.is_some()).then_some(())
    })
    .await;
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let stopped_at = std::time::Instant::now();
    w.telegram.dm(ALICE, "/stop all");
    w.replies(ALICE, 1).await;
    assert!(
        stopped_at.elapsed() < std::time::Duration::from_secs(10),
        "the waits did not stop"
    );
    let db = rusqlite::Connection::open(w.home.dir.join("gateway.db")).unwrap();
    let stopped: i64 = hermes_testkit::eventually(WAIT, "the turn's end recorded", || {
        let n: i64 = db
            .query_row(
                "SELECT count(*) FROM messages WHERE role = 'tool' AND content LIKE '%stopped waiting%'",
                [],
                |r| r.get(0),
            )
            .ok()?;
        (n >= 2).then_some(n)
    })
    .await;
    assert_eq!(stopped, 2, "both waits were stopped");
}

/// The model starts two background `sleep`s of `sleep` seconds in one step, then waits on
/// both (`wait` seconds each) in the next: the process ids are read from the tool results
/// when that request arrives.
fn script_two_sleeps_and_waits(w: &World, sleep: u64, wait: u64) {
    w.llm.push(Reply::ToolCalls(vec![
        (
            "terminal".into(),
            json!({"command": format!("sleep {sleep}"), "background": true}),
        ),
        (
            "terminal".into(),
            json!({"command": format!("sleep {sleep} # second"), "background": true}),
        ),
    ]));
    w.llm.push(Reply::computed(move |request| {
        let ids: Vec<String> = request["messages"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["role"] == "tool")
            .filter_map(|m| {
                let text = m["content"].as_str()?;
                let start = text.find("proc_")?;
                Some(text[start..start + 17].to_owned())
            })
            .collect();
        Reply::ToolCalls(
            ids.iter()
                .map(|id| {
                    (
                        "process".to_owned(),
                        json!({"action": "wait", "id": id, "timeout": wait}),
                    )
                })
                .collect(),
        )
    }));
}
