//! MCP servers end to end: the daemon starts the testkit's stdio MCP server (rmcp's server
//! side) as a child of its own, offers its tools as `mcp__<server>__<tool>`, runs the
//! model's calls (a timeout and `/stop` end a call; the server stays usable), keeps its
//! secrets from the server, stops it with the daemon; a server that cannot start is
//! reported in `/status`, `check-config` and the log while the others keep working.

mod common;

use std::time::{Duration, Instant};

use common::*;
use hermes_testkit::eventually;
use hermes_testkit::llm::Reply;
use hermes_testkit::mcp::{STUB_VAR, serve_stdio, stub_server_command};
use serde_json::{Value, json};

/// Not a test: the MCP server the daemon starts (this binary, with only this test, which
/// is ignored otherwise; see `stub_server_command`).
#[tokio::test]
#[ignore = "the MCP server tests start, not a test"]
async fn mcp_stub_server() {
    if std::env::var(STUB_VAR).as_deref() == Ok("1") {
        serve_stdio().await;
    }
}

/// `mcp_servers` with the stub as `calc` (and `extra` lines under it), then `more`.
fn servers(extra: &str, more: &str) -> String {
    let (command, args) = stub_server_command("mcp_stub_server");
    format!(
        "mcp_servers:\n  calc:\n    command: {}\n    args: {}\n    env:\n      {STUB_VAR}: \"1\"\n{extra}{more}",
        json!(command),
        json!(args)
    )
}

fn call(name: &str, arguments: Value) -> Reply {
    Reply::ToolCall {
        name: name.into(),
        arguments,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_servers_tools_are_called_without_its_secrets_and_it_stops_with_the_daemon() {
    let w = World::new(
        &["TELEGRAM_ALLOW_ALL_USERS=true"],
        &servers("    lazy: true\n", ""),
    )
    .await;
    let pidfile = w.home.dir.join("work/mcp.pid");
    let leftover = w.home.dir.join("work/leftover.pid");
    w.llm.push(Reply::ToolCalls(vec![
        ("mcp__calc__add".into(), json!({"a": 2, "b": 3})),
        ("mcp__calc__environment".into(), json!({})),
        (
            "mcp__calc__sleep".into(),
            json!({"ms": 0, "pidfile": pidfile.display().to_string()}),
        ),
        (
            "mcp__calc__spawn".into(),
            json!({"pidfile": leftover.display().to_string()}),
        ),
    ]));
    w.llm.push(Reply::text("five"));
    let mut d = w.start();
    assert_eq!(w.ask("what is 2 + 3?").await, ["five"]);
    let first = &w.llm.requests()[0];
    let tools = offered(first);
    for name in [
        "mcp__calc__add",
        "mcp__calc__echo",
        "mcp__calc__sleep",
        "mcp__calc__spawn",
        "mcp__calc__environment",
    ] {
        assert!(tools.contains(&name.to_owned()), "{name} in {tools:?}");
    }
    let results = tool_results(&w);
    assert_eq!(results[0], "5");
    let env = &results[1];
    assert!(env.contains(STUB_VAR) && env.contains("PATH"), "{env}");
    for secret in ["TELEGRAM_BOT_TOKEN", "OPENAI_API_KEY", "HERMES_LOG"] {
        assert!(!env.contains(secret), "{secret} reached the server: {env}");
    }
    assert_eq!(results[2], "slept");
    let running = |path| pid_in(path).expect("the server and its child run");
    let (pid, child) = (running(&pidfile), running(&leftover));
    assert!(!process_gone(pid) && !process_gone(child));
    assert_eq!(d.terminate(), Some(0));
    eventually(
        WAIT,
        "the MCP server and what it started to stop with the daemon",
        || (process_gone(pid) && process_gone(child)).then_some(()),
    )
    .await;
    // A clean stop is not an error.
    let log = d.log_text();
    assert!(!log.lines().any(|l| l.contains("ERROR")), "{log}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_cannot_start_is_reported_and_the_others_keep_working() {
    let w = World::new(
        &["TELEGRAM_ALLOW_ALL_USERS=true"],
        &servers(
            "",
            "  broken:\n    command: sh\n    args: [\"-c\", \"echo no config >&2; exit 3\"]\n",
        ),
    )
    .await;
    // check-config starts each server to check it.
    let checked = std::process::Command::new(BIN)
        .args(["--home", w.home.dir.to_str().unwrap(), "check-config"])
        .output()
        .unwrap();
    let code = checked.status.code();
    let checked = String::from_utf8_lossy(&checked.stdout);
    assert!(checked.contains("mcp_servers.calc: 7 tools"), "{checked}");
    assert!(checked.contains("mcp_servers.broken: failed:"), "{checked}");
    // `run` would go on without its tools: check-config says so and does not say OK.
    assert_eq!(code, Some(78), "{checked}");
    assert!(
        checked.contains("error: mcp_servers.broken: failed:") && !checked.contains("\nOK"),
        "{checked}"
    );

    w.llm
        .push(call("mcp__calc__echo", json!({"text": "still here"})));
    w.llm.push(Reply::text("echoed"));
    let d = w.start();
    let t = w.telegram.clone();
    let status = eventually(WAIT, "both servers settled in /status", || {
        t.dm(ALICE, "/status");
        std::thread::sleep(Duration::from_millis(300));
        t.sent_texts(ALICE)
            .into_iter()
            .rev()
            .find(|s| s.contains("calc (7 tools)") && s.contains("broken (failed:"))
    })
    .await;
    assert!(status.contains("MCP servers:"), "{status}");
    w.telegram.dm(ALICE, "echo please");
    eventually(WAIT, "the echo's answer", || {
        t.sent_texts(ALICE)
            .contains(&"echoed".to_owned())
            .then_some(())
    })
    .await;
    assert_eq!(tool_results(&w)[0], "still here");
    assert!(
        !offered(&w.llm.requests()[0])
            .iter()
            .any(|t| t.starts_with("mcp__broken"))
    );
    let log = d.log_text();
    assert!(
        log.contains("could not be started") && log.contains("broken"),
        "the log says which server failed"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_ends_at_its_timeout_or_at_stop_and_the_server_stays_usable() {
    let w = World::new(
        &["TELEGRAM_ALLOW_ALL_USERS=true"],
        &servers("    lazy: true\n    timeout: 1\n", ""),
    )
    .await;
    w.llm.push(call("mcp__calc__sleep", json!({"ms": 60000})));
    w.llm.push(Reply::text("it took too long"));
    let _d = w.start();
    let asked = Instant::now();
    assert_eq!(w.ask("sleep").await, ["it took too long"]);
    assert!(asked.elapsed() < Duration::from_secs(10));
    assert!(
        tool_results(&w)[0].contains("did not answer within 1 s"),
        "{:?}",
        tool_results(&w)
    );

    // /stop ends a call at once (the timeout is a second; this one would wait for it).
    let w2 = World::new(
        &["TELEGRAM_ALLOW_ALL_USERS=true"],
        &servers("    lazy: true\n", ""),
    )
    .await;
    let pidfile = w2.home.dir.join("work/mcp.pid");
    w2.llm.push(call(
        "mcp__calc__sleep",
        json!({"ms": 60000, "pidfile": pidfile.display().to_string()}),
    ));
    w2.llm
        .push(call("mcp__calc__echo", json!({"text": "after"})));
    w2.llm.push(Reply::text("the server still answers"));
    let _d2 = w2.start();
    w2.telegram.dm(ALICE, "sleep a minute");
    eventually(WAIT, "the call to run", || {
        std::fs::read_to_string(&pidfile).ok()
    })
    .await;
    let stopped = Instant::now();
    w2.telegram.dm(ALICE, "/stop");
    let t = w2.telegram.clone();
    eventually(WAIT, "the stop to be confirmed", || {
        t.sent_texts(ALICE)
            .iter()
            .any(|s| s.to_lowercase().contains("stop"))
            .then_some(())
    })
    .await;
    assert!(stopped.elapsed() < Duration::from_secs(5));
    let told = pidfile.with_extension("pid.cancelled");
    eventually(WAIT, "the server to be told the call was cancelled", || {
        told.exists().then_some(())
    })
    .await;
    w2.telegram.dm(ALICE, "again");
    eventually(WAIT, "the next turn's answer", || {
        t.sent_texts(ALICE)
            .contains(&"the server still answers".to_owned())
            .then_some(())
    })
    .await;
    assert_eq!(tool_results(&w2).last().unwrap(), "after");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_dies_is_hidden_then_started_again_at_a_later_turn() {
    let w = World::new(
        &["TELEGRAM_ALLOW_ALL_USERS=true"],
        &servers("    lazy: true\n", ""),
    )
    .await;
    w.llm.push(call("mcp__calc__crash", json!({})));
    w.llm.push(Reply::text("it crashed"));
    w.llm.push(Reply::text("no tools now"));
    w.llm.push(Reply::text("restarting"));
    w.llm.push(call("mcp__calc__add", json!({"a": 1, "b": 1})));
    w.llm.push(Reply::text("two"));
    let _d = w.start();
    assert_eq!(w.ask("crash it").await, ["it crashed"]);
    assert!(
        tool_results(&w)[0].starts_with("error:"),
        "{:?}",
        tool_results(&w)
    );
    let t = w.telegram.clone();
    let status = |needle: &'static str| {
        let t = t.clone();
        async move {
            eventually(WAIT, needle, || {
                t.dm(ALICE, "/status");
                std::thread::sleep(Duration::from_millis(300));
                t.sent_texts(ALICE)
                    .into_iter()
                    .rev()
                    .find(|s| s.contains(needle))
            })
            .await
        }
    };
    let said = |text: &'static str| {
        let t = t.clone();
        async move {
            eventually(WAIT, text, || {
                t.sent_texts(ALICE).iter().any(|s| s == text).then_some(())
            })
            .await
        }
    };
    status("calc (failed: the server stopped)").await;
    // Hidden while it is down.
    w.telegram.dm(ALICE, "anything?");
    said("no tools now").await;
    let asked = w
        .llm
        .requests()
        .into_iter()
        .find(|r| hermes_testkit::llm::last_user_text(r) == "anything?")
        .unwrap();
    assert!(!offered(&asked).iter().any(|t| t.starts_with("mcp__calc")));
    // After its wait (5 s after the first failure), a turn starts it again in the
    // background; a later turn has its tools.
    tokio::time::sleep(Duration::from_secs(5)).await;
    w.telegram.dm(ALICE, "wake up");
    said("restarting").await;
    status("calc (7 tools)").await;
    w.telegram.dm(ALICE, "one plus one");
    said("two").await;
    assert_eq!(tool_results(&w).last().unwrap(), "2");
}

/// A server that takes a while to start (1.5 s here) is waited for by the first turn, so a
/// message sent as the daemon starts is answered with its tools offered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_turn_waits_for_a_server_still_connecting() {
    let (command, args) = stub_server_command("mcp_stub_server");
    let mut slow = vec![
        "-c".to_owned(),
        "sleep 1.5; exec \"$0\" \"$@\"".to_owned(),
        command,
    ];
    slow.extend(args);
    let w = World::new(
        &["TELEGRAM_ALLOW_ALL_USERS=true"],
        &format!(
            "mcp_servers:\n  calc:\n    command: sh\n    args: {}\n    env:\n      {STUB_VAR}: \"1\"\n",
            json!(slow)
        ),
    )
    .await;
    w.llm.push(Reply::text("hello"));
    let _d = w.start();
    w.telegram.dm(ALICE, "hi");
    w.replies(ALICE, 1).await;
    let tools = w.llm.requests()[0]["tools"].clone();
    let names: Vec<&str> = tools
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["function"]["name"].as_str())
        .collect();
    assert!(
        names.iter().any(|n| n.starts_with("mcp__calc__")),
        "{names:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reload_mcp_connects_the_servers_as_the_configuration_now_says() {
    let w = World::new(&["TELEGRAM_ALLOW_ALL_USERS=true"], &servers("", "")).await;
    let pidfile = w.home.dir.join("work/first.pid");
    w.llm.push(call(
        "mcp__calc__sleep",
        json!({"ms": 0, "pidfile": pidfile.display().to_string()}),
    ));
    w.llm.push(Reply::text("slept"));
    let d = w.start();
    w.ask("sleep a moment").await;
    let first = pid_in(&pidfile).expect("the first server runs");
    // The operator renames the server and adds a second one.
    let path = w.home.dir.join("config.yaml");
    let text = std::fs::read_to_string(&path).unwrap();
    let (command, args) = stub_server_command("mcp_stub_server");
    let more = format!(
        "  numbers:\n    command: {}\n    args: {}\n    env:\n      {STUB_VAR}: \"1\"\n",
        json!(command),
        json!(args)
    );
    let text = text.replacen("mcp_servers:\n", &format!("mcp_servers:\n{more}"), 1);
    std::fs::write(&path, text).unwrap();
    let reloaded = visible(w.ask("/reload_mcp").await.last().unwrap());
    assert!(
        reloaded.starts_with("🔄 MCP Servers Reloaded"),
        "{reloaded}"
    );
    assert!(reloaded.contains("♻️ Reconnected: calc"), "{reloaded}");
    assert!(reloaded.contains("➕ Added: numbers"), "{reloaded}");
    assert!(
        reloaded.contains("tool(s) available from 2 server(s)"),
        "{reloaded}"
    );
    eventually(WAIT, "the first server to stop", || {
        process_gone(first).then_some(())
    })
    .await;
    w.ask("and now?").await;
    let tools = offered(w.llm.requests().last().unwrap());
    assert!(
        tools.contains(&"mcp__numbers__add".to_owned())
            && tools.contains(&"mcp__calc__add".to_owned()),
        "{tools:?}"
    );
    // The hyphenated name Hermes users type works too.
    let again = visible(w.ask("/reload-mcp").await.last().unwrap());
    assert!(again.contains("♻️ Reconnected: calc, numbers"), "{again}");
    drop(d);
}
