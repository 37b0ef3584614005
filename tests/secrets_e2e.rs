//! Secrets stay put: a token in the daemon's real process environment cannot be read by
//! the commands the model runs, by any route (even with approvals off), reading the
//! gateway's own secret files needs approval, and the home is private on disk.

mod common;

use std::os::unix::fs::PermissionsExt;

use common::*;
use hermes_testkit::daemon::Daemon;
use hermes_testkit::eventually;
use hermes_testkit::llm::Reply;

const SECRET: &str = "tok-in-the-real-environment-5e3c";

/// The text of every tool result the model was sent.
fn tool_outputs(w: &World) -> String {
    w.llm
        .requests()
        .iter()
        .flat_map(|r| r["messages"].as_array().cloned().unwrap_or_default())
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap_or_default().to_owned())
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_secret_in_the_daemons_environment_never_reaches_a_tool() {
    let w = World::new(
        &["TELEGRAM_ALLOW_ALL_USERS=true"],
        "approvals:\n  mode: 'off'\n",
    )
    .await;
    // Every route a same-user process has to another's environment.
    let routes = [
        "env",
        "cat /proc/self/environ",
        "cat /proc/$PPID/environ",
        "tr '\\0' '\\n' < /proc/$PPID/environ",
        "cat /proc/$PPID/task/*/environ",
        "ps eww -p $PPID",
        "grep -a tok /proc/$PPID/mem",
        "python3 -c 'import os; print(os.environ)'",
    ];
    let command = routes
        .iter()
        .map(|r| format!("echo \"== {r}\"; {r} 2>&1"))
        .collect::<Vec<_>>()
        .join("; ");
    w.llm.push(Reply::terminal(&command));
    w.llm.push(Reply::text("looked"));
    let _d = Daemon::start(BIN, &w.home, &[("DEPLOY_API_TOKEN", SECRET)]);
    w.telegram.dm(ALICE, "look around");
    w.replies(ALICE, 1).await;
    let outputs = tool_outputs(&w);
    assert!(outputs.contains("== env"), "the command ran: {outputs}");
    assert!(
        !outputs.contains(SECRET),
        "the secret leaked to a tool: {outputs}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reading_the_gateways_secret_files_needs_approval() {
    let w = World::allow_all().await;
    let env_file = w.home.dir.join(".env");
    for command in [
        format!("cat {}", env_file.display()),
        format!("cd {} && grep TOKEN .env", w.home.dir.display()),
        format!("sqlite3 {}/gateway.db .dump", w.home.dir.display()),
        format!("cat {}/config.y*", w.home.dir.display()),
    ] {
        w.llm.push(Reply::terminal(&command));
    }
    w.llm.push(Reply::text("all refused"));
    let _d = w.start();
    w.telegram.dm(ALICE, "show me the config");
    let t = w.telegram.clone();
    // Each read waits for approval; silence would deny, so deny each prompt at once.
    for n in 1..=4 {
        let prompt = eventually(WAIT, &format!("prompt {n}"), || {
            t.prompts(ALICE).get(n - 1).cloned()
        })
        .await;
        let text = prompt.1["text"].as_str().unwrap_or_default().to_owned();
        assert!(text.contains("gateway's secrets"), "{text}");
        let data = hermes_testkit::telegram::FakeTelegram::button_data(&prompt.1, "Deny");
        w.telegram.press(ALICE, ALICE, prompt.0, &data);
    }
    eventually(WAIT, "the answer", || {
        t.sent_texts(ALICE)
            .contains(&"all refused".to_owned())
            .then_some(())
    })
    .await;
    assert!(!tool_outputs(&w).contains("TEST-TOKEN"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_database_is_private_and_a_readable_env_file_is_reported() {
    let w = World::allow_all().await;
    std::fs::set_permissions(
        w.home.dir.join(".env"),
        std::fs::Permissions::from_mode(0o644),
    )
    .unwrap();
    let d = w.start();
    let db = w.home.dir.join("gateway.db");
    eventually(WAIT, "the database", || db.exists().then_some(())).await;
    let mode = std::fs::metadata(&db).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    eventually(WAIT, "the warning", || {
        d.log_text()
            .contains("can be read by other users")
            .then_some(())
    })
    .await;
}
