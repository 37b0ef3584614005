//! What the outside sees of the daemon, compared byte for byte with
//! `tests/snapshots/outside.json`: every tool's JSON schema as the model is sent it, `/help`,
//! Telegram's command menu, Discord's slash commands and the words Slack's `/hermes` takes
//! as commands. A change to any of them is a decision: rerun with `UPDATE_SNAPSHOTS=1` and
//! commit the new file with the change that made it.

mod common;

use std::path::PathBuf;

use common::*;
use hermes_testkit::conformance::Kit;
use hermes_testkit::discord::FakeDiscord;
use hermes_testkit::eventually;
use hermes_testkit::llm::Reply;
use serde_json::{Value, json};

fn snapshot_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/snapshots/outside.json")
}

/// The tools offered in a Telegram DM (every tool available: a web search key is set),
/// `/help` and Telegram's menu.
async fn telegram_side() -> (Value, String, Value) {
    let w = World::new(
        &["TELEGRAM_ALLOW_ALL_USERS=true", "TAVILY_API_KEY=tvly-test"],
        "",
    )
    .await;
    w.llm.push(Reply::text("hello"));
    let _d = w.start();
    w.ask("hi").await;
    let tools = w.llm.requests()[0]["tools"].clone();
    let help = w.ask("/help").await.pop().unwrap();
    let menu = eventually(WAIT, "setMyCommands", || {
        w.telegram
            .calls("setMyCommands")
            .last()
            .map(|c| c.params["commands"].clone())
    })
    .await;
    (tools, help, menu)
}

async fn discord_commands() -> Value {
    let kit = Kit::open(FakeDiscord::start().await, BIN).await;
    let _d = kit.start();
    let fake = kit.fake.clone();
    let commands = eventually(WAIT, "the slash commands", || {
        let commands = fake.registered_commands();
        (!commands.is_empty()).then_some(commands)
    })
    .await;
    // What the daemon sent, without what the fake adds as it stores a command.
    let sent = commands.into_iter().map(|mut command| {
        if let Some(fields) = command.as_object_mut() {
            for added in ["id", "version", "application_id"] {
                fields.remove(added);
            }
        }
        command
    });
    Value::Array(sent.collect())
}

/// The words Slack's `/hermes <word>` takes as commands: what the daemon registers with
/// every platform (names and aliases), which the Slack adapter keeps as it is given.
fn slack_words() -> Vec<&'static str> {
    hermes_gateway::router::commands::specs()
        .iter()
        .flat_map(|c| std::iter::once(c.name).chain(c.aliases.iter().copied()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_the_outside_sees_matches_the_snapshot() {
    let (tools, help, menu) = telegram_side().await;
    let seen = json!({
        "tools": tools,
        "help": help.lines().collect::<Vec<_>>(),
        "telegram_menu": menu,
        "discord_commands": discord_commands().await,
        "slack_words": slack_words(),
    });
    let text = serde_json::to_string_pretty(&seen).unwrap() + "\n";
    let path = snapshot_path();
    if std::env::var_os("UPDATE_SNAPSHOTS").is_some() {
        std::fs::write(&path, &text).unwrap();
        return;
    }
    let kept = std::fs::read_to_string(&path).unwrap_or_default();
    if kept != text {
        let kept: Value = serde_json::from_str(&kept).unwrap_or(Value::Null);
        let mut differ = Vec::new();
        for key in seen.as_object().unwrap().keys() {
            if kept.get(key) != seen.get(key) {
                differ.push(key.as_str());
            }
        }
        panic!(
            "what the outside sees changed ({}); if that is meant, rerun with UPDATE_SNAPSHOTS=1 \
             and commit {}\nnow:\n{text}",
            differ.join(", "),
            path.display()
        );
    }
}
