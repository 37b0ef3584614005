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
    // Each output reversed: tool output is scrubbed of known secrets on its way to the model,
    // which would hide a leak from this test; reversed, the secret would get through.
    let command = routes
        .iter()
        .map(|r| format!("echo \"== {r}\"; {{ {r}; }} 2>&1 | tr '\\0' '\\n' | rev"))
        .collect::<Vec<_>>()
        .join("; ");
    w.llm.push(Reply::terminal(&command));
    w.llm.push(Reply::text("looked"));
    let _d = Daemon::start(BIN, &w.home, &[("DEPLOY_API_TOKEN", SECRET)]);
    w.telegram.dm(ALICE, "look around");
    w.replies(ALICE, 1).await;
    let outputs = tool_outputs(&w);
    assert!(outputs.contains("== env"), "the command ran: {outputs}");
    let reversed: String = SECRET.chars().rev().collect();
    assert!(
        outputs.contains("=HTAP"),
        "the outputs were reversed: {outputs}"
    );
    assert!(
        !outputs.contains(&reversed) && !outputs.contains(SECRET),
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
async fn the_database_is_private_and_a_readable_env_file_is_made_private() {
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
    eventually(WAIT, "the operator told", || {
        d.log_text()
            .contains("could be read by other users (mode 644)")
            .then_some(())
    })
    .await;
    let env_mode = mode_of(&w.home.dir.join(".env"));
    assert_eq!(env_mode, 0o600, "the daemon's own .env is made private");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_fix_permissions_off_a_readable_env_file_is_only_reported() {
    let w = World::new(
        &["TELEGRAM_ALLOW_ALL_USERS=true"],
        "security:\n  fix_permissions: false\n",
    )
    .await;
    std::fs::set_permissions(
        w.home.dir.join(".env"),
        std::fs::Permissions::from_mode(0o644),
    )
    .unwrap();
    let d = w.start();
    eventually(WAIT, "the warning", || {
        d.log_text()
            .contains("can be read by other users (mode 644)")
            .then_some(())
    })
    .await;
    let env_mode = mode_of(&w.home.dir.join(".env"));
    assert_eq!(env_mode, 0o644, "the operator's choice stays");
}

/// The API key the test home configures (`model.api_key`).
const API_KEY: &str = "sk-test-secret";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_error_that_echoes_the_key_is_shown_without_it() {
    let w = World::allow_all().await;
    w.llm.push(Reply::ErrorSaying {
        status: 401,
        message: format!("Incorrect API key provided: {API_KEY}. Check it."),
    });
    let mut d = w.start();
    w.telegram.dm(ALICE, "hello");
    let notice = w.replies(ALICE, 1).await.remove(0);
    assert!(notice.contains("Incorrect API key provided"), "{notice}");
    assert!(!notice.contains(API_KEY), "{notice}");
    d.terminate();
    assert!(!d.log_text().contains(API_KEY), "{}", d.log_text());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn credentials_in_the_providers_url_reach_neither_the_chat_nor_the_log() {
    let w = World::allow_all().await;
    // Nothing listens there: the notice and the log say which URL failed.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let config = w.home.dir.join("config.yaml");
    let yaml = std::fs::read_to_string(&config).unwrap().replace(
        &w.llm.base_url(),
        &format!("http://alice:pa55word-in-url@127.0.0.1:{port}/v1"),
    );
    std::fs::write(&config, yaml).unwrap();
    let d = w.start();
    w.telegram.dm(ALICE, "hello");
    let notice = w.replies(ALICE, 1).await.remove(0);
    assert!(notice.contains("127.0.0.1"), "{notice}");
    assert!(!notice.contains("pa55word-in-url"), "{notice}");
    // The log line may land a moment after the notice went out.
    let log = hermes_testkit::eventually(WAIT, "the failure logged", || {
        let log = d.log_text();
        log.contains("llm: call failed").then_some(log)
    })
    .await;
    assert!(!log.contains("pa55word-in-url"), "{log}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_that_prints_a_configured_key_shows_the_model_a_blank() {
    let w = World::new(
        &["TELEGRAM_ALLOW_ALL_USERS=true"],
        "approvals:\n  mode: 'off'\n",
    )
    .await;
    // The key where a command can read it: config.yaml itself is hidden from commands
    // (confinement_e2e), but a copy the person made is theirs to use.
    let copy = w.home.dir.join("work/config-copy.yaml");
    std::fs::copy(w.home.dir.join("config.yaml"), &copy).unwrap();
    w.llm
        .push(Reply::terminal(&format!("grep api_key {}", copy.display())));
    w.llm.push(Reply::text("done"));
    let _d = w.start();
    w.telegram.dm(ALICE, "find the key");
    w.replies(ALICE, 1).await;
    let outputs = tool_outputs(&w);
    assert!(outputs.contains("api_key: [REDACTED]"), "{outputs}");
    assert!(!outputs.contains(API_KEY), "{outputs}");
}

/// A file's permission bits.
fn mode_of(path: &std::path::Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}
