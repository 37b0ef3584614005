//! `delegate_task` end to end (the real daemon, the fake Telegram, the fake LLM): a batch of
//! three sub-agents working at once, each summary back in order and their tokens counted
//! for the session; the depth limit; a sub-agent's dangerous command asked in the chat;
//! `/stop` reaching the sub-agents' commands; a delegation gone to the background that a
//! restart runs again and reports into the conversation.

mod common;

use std::time::{Duration, Instant};

use common::*;
use hermes_testkit::eventually;
use hermes_testkit::llm::{Reply, last_user_text};
use serde_json::{Value, json};

fn delegate(arguments: Value) -> Reply {
    Reply::ToolCall {
        name: "delegate_task".into(),
        arguments,
    }
}

/// The task a sub-agent's request is about (the line after "Task: ").
fn task_of(request: &Value) -> String {
    let text = last_user_text(request);
    text.split("Task: ")
        .nth(1)
        .map(|rest| rest.lines().next().unwrap_or_default().to_owned())
        .unwrap_or_default()
}

/// A world where "survey the logs" delegates to a sub-agent whose answer takes 30 s, so
/// it goes to the background after 1 s; the parent then says `then`.
async fn surveying_in_the_background(then: &str) -> World {
    let w = World::new(
        &["TELEGRAM_ALLOW_ALL_USERS=true"],
        "delegation:\n  background_after_seconds: 1\n",
    )
    .await;
    w.llm.push(delegate(json!({"goal": "survey the logs"})));
    w.llm.push(Reply::Delayed(
        Duration::from_secs(30),
        Box::new(Reply::text("never heard")),
    ));
    w.llm.push(Reply::text(then));
    w
}

/// The requests made for sub-agents (their message starts with the sub-agent prompt).
fn child_requests(w: &World) -> Vec<Value> {
    w.llm
        .requests()
        .into_iter()
        .filter(|r| last_user_text(r).starts_with("[You are a sub-agent"))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_of_three_works_at_once_and_each_summary_comes_back_in_order() {
    let w = World::allow_all().await;
    w.llm.push(delegate(json!({"tasks": [
        {"goal": "count the apples", "context": "in the basket"},
        {"goal": "count the pears"},
        {"goal": "count the plums"},
    ]})));
    for _ in 0..3 {
        w.llm.push(Reply::computed(|request| {
            let task = task_of(request);
            Reply::Delayed(
                Duration::from_secs(2),
                Box::new(Reply::text(format!("done: {task}"))),
            )
        }));
    }
    w.llm.push(Reply::text("all three counted"));
    let _d = w.start();
    let asked = Instant::now();
    assert_eq!(w.ask("count the fruit").await, ["all three counted"]);
    let took = asked.elapsed();

    let report: Value = serde_json::from_str(&tool_results(&w)[0]).unwrap();
    let results = report["results"].as_array().unwrap();
    assert_eq!(results.len(), 3, "{report}");
    for (i, goal) in ["count the apples", "count the pears", "count the plums"]
        .iter()
        .enumerate()
    {
        assert_eq!(results[i]["task_index"], i);
        assert_eq!(results[i]["status"], "completed", "{report}");
        assert_eq!(results[i]["exit_reason"], "completed");
        assert_eq!(results[i]["summary"], format!("done: {goal}"));
        assert_eq!(results[i]["api_calls"], 1);
        assert_eq!(results[i]["tokens"], 107);
    }
    // Three 2 s answers, waited on together (one after the other would take 6 s).
    assert!(
        report["total_duration_seconds"].as_f64().unwrap() < 4.5,
        "{report}"
    );
    assert!(took < Duration::from_secs(6), "{took:?}");

    let children = child_requests(&w);
    assert_eq!(children.len(), 3);
    let apples = children
        .iter()
        .find(|r| task_of(r) == "count the apples")
        .unwrap();
    assert!(last_user_text(apples).contains("Context:\nin the basket"));
    let tools = offered(apples);
    assert!(tools.contains(&"terminal".to_owned()), "{tools:?}");
    for blocked in [
        "memory",
        "clarify",
        "send_message",
        "cronjob",
        "execute_code",
        "delegate_task",
    ] {
        assert!(
            !tools.contains(&blocked.to_owned()),
            "{blocked} offered to a sub-agent"
        );
    }
    // Every model call of the session counts: the parent's two and the children's three.
    let db = rusqlite::Connection::open(w.home.dir.join("gateway.db")).unwrap();
    let prompt: i64 = db
        .query_row("SELECT sum(prompt) FROM usage", [], |r| r.get(0))
        .unwrap();
    assert_eq!(prompt, 500);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sub_agent_cannot_delegate_again_unless_the_depth_allows() {
    let w = World::allow_all().await;
    w.llm.push(delegate(json!({"goal": "plan a trip"})));
    // The sub-agent tries anyway; it is told there is no such tool.
    w.llm.push(delegate(json!({"goal": "book the hotel"})));
    w.llm.push(Reply::text("planned without help"));
    w.llm.push(Reply::text("the trip is planned"));
    let _d = w.start();
    assert_eq!(w.ask("plan my trip").await, ["the trip is planned"]);
    let children = child_requests(&w);
    assert_eq!(children.len(), 2, "one sub-agent, two calls");
    let told = tool_results_in(&children[1]);
    assert!(
        told[0].contains("no tool named \"delegate_task\""),
        "{told:?}"
    );

    // With delegation.max_spawn_depth: 2 an orchestrator (Hermes' role) is offered
    // delegate_task; a leaf, the default, still is not.
    let deeper = World::new(
        &["TELEGRAM_ALLOW_ALL_USERS=true"],
        "delegation:\n  max_spawn_depth: 2\n",
    )
    .await;
    deeper.llm.push(delegate(json!({"tasks": [
        {"goal": "plan a trip", "role": "orchestrator"},
        {"goal": "pack the bags"}
    ]})));
    deeper.llm.push(Reply::text("planned"));
    deeper.llm.push(Reply::text("packed"));
    deeper.llm.push(Reply::text("done"));
    let _d2 = deeper.start();
    deeper.ask("plan my trip").await;
    let children = child_requests(&deeper);
    let of = |goal: &str| {
        children
            .iter()
            .find(|c| last_user_text(c).contains(goal))
            .unwrap_or_else(|| panic!("a child for {goal}"))
    };
    let planner = of("plan a trip");
    assert!(offered(planner).contains(&"delegate_task".to_owned()));
    assert!(last_user_text(planner).contains("You are an orchestrator"));
    assert!(last_user_text(planner).contains("must be leaves"));
    let packer = of("pack the bags");
    assert!(!offered(packer).contains(&"delegate_task".to_owned()));
    assert!(!last_user_text(packer).contains("orchestrator"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sub_agents_run_on_the_chats_current_model() {
    let w = World::allow_all().await;
    let _d = w.start();
    w.ask("/model custom:bigger-model").await;
    w.llm.push(delegate(json!({"goal": "count the files"})));
    w.llm.push(Reply::text("42 files"));
    w.llm.push(Reply::text("there are 42"));
    w.ask("how many files?").await;
    let children = child_requests(&w);
    assert_eq!(children.len(), 1);
    assert_eq!(children[0]["model"], "bigger-model", "not the main model");

    // delegation.model pins every sub-agent to one model.
    let pinned = World::new(
        &["TELEGRAM_ALLOW_ALL_USERS=true"],
        "delegation:\n  model: cheap-model\n",
    )
    .await;
    let _d2 = pinned.start();
    pinned
        .llm
        .push(delegate(json!({"goal": "count the files"})));
    pinned.llm.push(Reply::text("42 files"));
    pinned.llm.push(Reply::text("there are 42"));
    pinned.ask("how many files?").await;
    assert_eq!(child_requests(&pinned)[0]["model"], "cheap-model");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sub_agents_dangerous_command_is_asked_in_the_chat() {
    let w = World::allow_all().await;
    let victim = w.home.dir.join("work/victim");
    std::fs::create_dir_all(&victim).unwrap();
    w.llm.push(delegate(json!({"goal": "clean up"})));
    w.llm
        .push(Reply::terminal(&format!("rm -rf {}", victim.display())));
    w.llm.push(Reply::text("the person said no"));
    w.llm.push(Reply::text("nothing was deleted"));
    let _d = w.start();
    w.telegram.dm(ALICE, "tidy up");
    let p = prompt(&w, ALICE, 1).await;
    assert!(p.1["text"].as_str().unwrap().contains("rm -rf"));
    assert!(victim.exists());
    press(&w, ALICE, ALICE, &p, "Deny");
    assert_eq!(
        w.replies(ALICE, 2).await.last().unwrap(),
        "nothing was deleted"
    );
    assert!(victim.exists());
    let report: Value = serde_json::from_str(&tool_results(&w)[0]).unwrap();
    assert_eq!(report["results"][0]["summary"], "the person said no");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_reaches_every_sub_agents_command() {
    let w = World::allow_all().await;
    let pids: Vec<_> = (0..2)
        .map(|i| w.home.dir.join(format!("work/child-{i}.pid")))
        .collect();
    w.llm.push(delegate(
        json!({"tasks": [{"goal": "wait 0"}, {"goal": "wait 1"}]}),
    ));
    for _ in 0..2 {
        let dir = w.home.dir.join("work");
        w.llm.push(Reply::computed(move |request| {
            let task = task_of(request);
            let n = task.trim_start_matches("wait ");
            Reply::terminal(&format!(
                "echo $$ > {}/child-{n}.pid; sleep 60",
                dir.display()
            ))
        }));
    }
    let _d = w.start();
    w.telegram.dm(ALICE, "wait twice");
    let groups: Vec<i32> = {
        let mut found = Vec::new();
        for pidfile in &pids {
            found.push(group_of(written_pid(pidfile).await));
        }
        found
    };
    let stopped = Instant::now();
    w.telegram.dm(ALICE, "/stop");
    for pgid in groups {
        eventually(WAIT, "the command to be killed", || {
            (!group_alive(pgid)).then_some(())
        })
        .await;
    }
    assert!(stopped.elapsed() < Duration::from_secs(5));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_background_delegation_cut_by_a_restart_runs_again_and_reports_back() {
    // The first run of the sub-agent is cut by the kill.
    let w = surveying_in_the_background("I've started a survey in the background.").await;
    let mut d = w.start();
    let first = w.ask("survey the logs").await;
    assert_eq!(first, ["I've started a survey in the background."]);
    let dispatched: Value = serde_json::from_str(&tool_results(&w)[0]).unwrap();
    assert_eq!(dispatched["status"], "dispatched", "{dispatched}");
    assert_eq!(dispatched["mode"], "background");
    outbox_drained(&w).await;
    d.kill();
    drop(d);

    w.llm.push(Reply::text("the logs are clean"));
    w.llm
        .push(Reply::text("The survey is done: the logs are clean."));
    let _again = w.start();
    let replies = w.replies(ALICE, 2).await;
    assert_eq!(replies[1], "The survey is done: the logs are clean.");
    let requests = w.llm.requests();
    let report = last_user_text(requests.last().unwrap());
    assert!(
        report.contains(&format!(
            "background delegation {} has finished",
            dispatched["delegation_id"].as_str().unwrap()
        )) && report.contains("run again from the start")
            && report.contains("the logs are clean"),
        "{report}"
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(w.telegram.sent_texts(ALICE).len(), 2, "reported once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_ends_a_background_delegation_and_a_restart_does_not_run_it_again() {
    let w = surveying_in_the_background("Started in the background.").await;
    let mut d = w.start();
    w.ask("survey the logs").await;
    let t = w.telegram.clone();
    w.telegram.dm(ALICE, "/status");
    eventually(WAIT, "/status to show the delegation", || {
        t.sent_texts(ALICE)
            .iter()
            .any(|s| s.contains("Delegated in the background: 1"))
            .then_some(())
    })
    .await;
    w.telegram.dm(ALICE, "/stop");
    eventually(WAIT, "the stop to be confirmed", || {
        t.sent_texts(ALICE)
            .iter()
            .any(|s| s.contains("Stopped 1 delegated task batch"))
            .then_some(())
    })
    .await;
    outbox_drained(&w).await;
    d.kill();
    drop(d);
    let asked = w.llm.requests().len();
    let sent = w.telegram.sent_texts(ALICE).len();
    let _again = w.start();
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        w.llm.requests().len(),
        asked,
        "not run again after the restart"
    );
    assert_eq!(w.telegram.sent_texts(ALICE).len(), sent, "nothing reported");
}
