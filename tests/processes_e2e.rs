//! Background processes end to end: reports in the chat, progress, the process tool, wake-up
//! turns, and /stop semantics.

mod common;

use serde_json::json;

use common::*;
use hermes_testkit::eventually;
use hermes_testkit::llm::{Reply, last_user_text};

fn background(command: &str, extra: serde_json::Value) -> Reply {
    let mut arguments = json!({"command": command, "background": true});
    arguments
        .as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    Reply::ToolCall {
        name: "terminal".into(),
        arguments,
    }
}

async fn message_containing(w: &World, chat: i64, needle: &str) -> String {
    let t = w.telegram.clone();
    let needle = needle.to_owned();
    eventually(WAIT, &format!("a message with {needle:?}"), || {
        t.sent_texts(chat).into_iter().find(|m| m.contains(&needle))
    })
    .await
}

/// Start the daemon with a turn that launches `sleep 60` in the background; returns the
/// daemon and the process group id (on the host), once the process runs and the turn has
/// answered.
async fn start_long_background_job(w: &World) -> (hermes_testkit::daemon::Daemon, i32) {
    let pidfile = w.home.dir.join("work/bg-pid");
    w.llm.push(background(
        &format!("echo $$ > {}; sleep 60", pidfile.display()),
        json!({}),
    ));
    w.llm.push(Reply::text("running"));
    let daemon = w.start();
    w.telegram.dm(ALICE, "start the long job");
    w.replies(ALICE, 1).await;
    let group = group_of(written_pid(&pidfile).await);
    (daemon, group)
}

/// The process id the model was told about.
fn process_id(w: &World) -> String {
    let request = w.llm.requests().last().cloned().unwrap();
    let text = request["messages"].to_string();
    let start = text.find("proc_").expect("a process id in the tool result");
    text[start..start + 17].to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_finished_background_command_is_reported_with_its_output() {
    let w = World::allow_all().await;
    w.llm
        .push(background("sleep 1; echo done-marker", json!({})));
    w.llm.push(Reply::text("started it"));
    let _d = w.start();
    w.telegram.dm(ALICE, "run it in the background");
    assert_eq!(w.replies(ALICE, 1).await[0], "started it");
    let report = message_containing(&w, ALICE, "finished").await;
    assert!(
        report.contains("exit code 0") && report.contains("done-marker"),
        "{report}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_interval_posts_progress_while_it_runs() {
    let w = World::allow_all().await;
    w.llm.push(background(
        "echo tick-one; sleep 7; echo tick-two",
        json!({"check_interval": 1}),
    ));
    w.llm.push(Reply::text("watching"));
    let _d = w.start();
    w.telegram.dm(ALICE, "watch this");
    let progress = message_containing(&w, ALICE, "still running").await;
    let output = progress
        .split("New output:")
        .nth(1)
        .expect("an output part");
    assert!(
        output.contains("tick-one") && !output.contains("tick-two"),
        "{progress}"
    );
    let tool_result = w.llm.requests()[1]["messages"].to_string();
    assert!(tool_result.contains("raised to the minimum of 5 seconds"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_process_tool_kills_a_background_process() {
    let w = World::allow_all().await;
    let (_d, pid) = start_long_background_job(&w).await;
    let id = process_id(&w);

    w.llm.push(Reply::ToolCall {
        name: "process".into(),
        arguments: json!({"action": "kill", "id": id}),
    });
    w.llm.push(Reply::text("killed it"));
    w.telegram.dm(ALICE, "kill it");
    assert_eq!(w.replies(ALICE, 2).await[1], "killed it");
    eventually(WAIT, "the group to be gone", || {
        (!group_alive(pid)).then_some(())
    })
    .await;
    let tool_result = w.llm.requests().last().unwrap()["messages"].to_string();
    assert!(tool_result.contains("stopped (SIGTERM)"), "{tool_result}");
    let report = message_containing(&w, ALICE, "finished").await;
    assert!(report.contains("signal 15"), "{report}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn notify_on_complete_starts_a_new_turn() {
    let w = World::allow_all().await;
    w.llm.push(background(
        "sleep 1; echo build-ok",
        json!({"notify_on_complete": true}),
    ));
    w.llm.push(Reply::text("building"));
    w.llm.push(Reply::text("The build finished fine."));
    let _d = w.start();
    w.telegram.dm(ALICE, "build it");
    message_containing(&w, ALICE, "The build finished fine.").await;
    let wake = &w.llm.requests()[2];
    let text = last_user_text(wake);
    assert!(
        text.contains("[Background process") && text.contains("build-ok"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_leaves_background_work_and_stop_all_kills_it() {
    let w = World::allow_all().await;
    let (_d, pid) = start_long_background_job(&w).await;

    w.telegram.dm(ALICE, "/stop");
    assert_eq!(
        w.replies(ALICE, 2).await[1],
        "Nothing is running right now."
    );
    assert!(group_alive(pid), "plain /stop keeps background processes");

    w.telegram.dm(ALICE, "/stop all");
    w.replies(ALICE, 3).await;
    eventually(WAIT, "the group to be gone", || {
        (!group_alive(pid)).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutting_down_kills_what_the_daemon_started() {
    let w = World::allow_all().await;
    let (mut d, pid) = start_long_background_job(&w).await;
    assert_eq!(d.terminate(), Some(0), "SIGTERM is a clean exit");
    eventually(WAIT, "the group to be gone", || {
        (!group_alive(pid)).then_some(())
    })
    .await;
    drop(d);

    // After the restart the chat learns its job was stopped.
    let _again = w.start();
    let notice = message_containing(&w, ALICE, "shutting down").await;
    assert!(notice.contains("was stopped"), "{notice}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_does_not_leave_background_processes_running() {
    let w = World::allow_all().await;
    let (mut d, pid) = start_long_background_job(&w).await;
    d.kill();
    // Its jail ends with the daemon (the holder's lifeline closes), and what runs in it.
    eventually(WAIT, "the jail's processes to end with the daemon", || {
        (!group_alive(pid)).then_some(())
    })
    .await;
    let _again = w.start();
    let notice = message_containing(&w, ALICE, "restarted unexpectedly").await;
    assert!(
        notice.contains("ended while the gateway was down"),
        "{notice}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_confinement_a_crash_leaves_nothing_running_after_the_restart() {
    let w = World::new(
        &["TELEGRAM_ALLOW_ALL_USERS=true"],
        "terminal:\n  sandbox: 'off'\n",
    )
    .await;
    let (mut d, pid) = start_long_background_job(&w).await;
    d.kill();
    assert!(
        group_alive(pid),
        "SIGKILL gives the daemon no chance to clean up"
    );

    let _again = w.start();
    eventually(WAIT, "the orphan to be stopped", || {
        (!group_alive(pid)).then_some(())
    })
    .await;
    let notice = message_containing(&w, ALICE, "restarted unexpectedly").await;
    assert!(notice.contains("has been stopped"), "{notice}");
}
