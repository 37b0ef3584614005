//! The chat commands end to end: `/model`, `/retry`, `/undo`, `/title`, `/sethome`,
//! `/personality`, `/verbose`, and `/help` naming them all.

mod common;

use common::*;
use hermes_testkit::llm::{Reply, last_user_text};

fn said(request: &serde_json::Value, text: &str) -> bool {
    request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .any(|m| m["content"].as_str().is_some_and(|c| c.contains(text)))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn model_shows_and_switches_the_chats_model() {
    let w = World::allow_all().await;
    let _d = w.start();
    let shown = w.ask("/model").await;
    assert!(shown[0].contains("fake-model (custom)"), "{shown:?}");
    let switched = w.ask("/model custom:bigger-model").await;
    assert!(
        switched[1].contains("now uses bigger-model"),
        "{switched:?}"
    );
    w.ask("hello").await;
    assert_eq!(w.llm.requests().last().unwrap()["model"], "bigger-model");
    let refused = w.ask("/model groq:llama-3.3-70b").await;
    assert!(refused[3].contains("GROQ_API_KEY"), "{refused:?}");
    let status = w.ask("/status").await;
    assert!(status[4].contains("bigger-model"), "{status:?}");
    w.ask("/model default").await;
    w.ask("hello again").await;
    assert_eq!(w.llm.requests().last().unwrap()["model"], "fake-model");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retry_asks_the_last_message_again_and_undo_takes_it_back() {
    let w = World::allow_all().await;
    let _d = w.start();
    w.ask("what is two and two").await;
    w.llm.push(Reply::text("four"));
    let replies = w.ask("/retry").await;
    assert_eq!(replies.last().unwrap(), "four");
    let retried = w.llm.requests().last().cloned().unwrap();
    assert_eq!(last_user_text(&retried), "what is two and two");
    assert!(
        !said(&retried, "echo: what is two and two"),
        "the first answer is gone: {retried}"
    );
    let undone = w.ask("/undo").await;
    assert!(undone.last().unwrap().contains("what is two and two"));
    w.ask("something else").await;
    let after = w.llm.requests().last().cloned().unwrap();
    assert!(!said(&after, "two and two"), "{after}");
    assert!(!said(&after, "four"));
    let nothing = w.ask("/undo").await;
    assert!(nothing.last().unwrap().contains("something else"));
    let empty = w.ask("/undo").await;
    assert_eq!(empty.last().unwrap(), "There's nothing to undo.");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn title_and_sethome_are_kept() {
    let w = World::allow_all().await;
    let _d = w.start();
    assert!(w.ask("/title").await[0].contains("no title yet"));
    assert_eq!(
        w.ask("/title Trip plans").await[1],
        "📝 Title set: Trip plans"
    );
    assert_eq!(w.ask("/title").await[2], "📝 Title: Trip plans");
    let home = w.ask("/sethome").await;
    assert!(home[3].contains("home channel for telegram"), "{home:?}");
    let db = rusqlite::Connection::open(w.home.dir.join("gateway.db")).unwrap();
    let chat: String = db
        .query_row(
            "SELECT chat FROM home_channels WHERE platform = 'telegram'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert!(chat.contains("\"4242\""), "{chat}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn personality_changes_the_system_prompt() {
    let w = World::new(
        &["TELEGRAM_ALLOW_ALL_USERS=true"],
        "agent:\n  personalities:\n    pirate: Talk like a pirate.\n    teacher:\n      system_prompt: Explain step by step.\n",
    )
    .await;
    let _d = w.start();
    let listed = w.ask("/personality").await;
    assert!(listed[0].contains("pirate, teacher"), "{listed:?}");
    assert!(w.ask("/personality parrot").await[1].contains("no personality"));
    assert_eq!(
        w.ask("/personality pirate").await[2],
        "🎭 Personality: pirate"
    );
    w.ask("ahoy").await;
    let system = w.llm.requests().last().unwrap()["messages"][0]["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(system.contains("Talk like a pirate."), "{system}");
    w.ask("/personality none").await;
    w.ask("hello").await;
    assert!(!said(
        w.llm.requests().last().unwrap(),
        "Talk like a pirate."
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verbose_shows_tool_progress_in_this_chat() {
    let w = World::allow_all().await;
    let _d = w.start();
    w.llm.push(Reply::terminal("echo quiet"));
    w.llm.push(Reply::text("done quietly"));
    assert_eq!(w.ask("run it").await, ["done quietly"]);
    let set = w.ask("/verbose all").await;
    assert!(set[1].contains("Tool progress here: all"), "{set:?}");
    w.llm.push(Reply::terminal("echo shown"));
    w.llm.push(Reply::text("done visibly"));
    w.telegram.dm(ALICE, "run it again");
    let replies = w.replies(ALICE, 4).await;
    assert!(
        replies[2].contains("terminal") && replies[2].contains("echo shown"),
        "{replies:?}"
    );
    assert_eq!(replies[3], "done visibly");
    let cycled = w.ask("/verbose").await;
    assert!(
        cycled.last().unwrap().contains("off"),
        "all → off: {cycled:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn help_lists_every_command() {
    use hermes_gateway::router::commands::COMMANDS;
    let w = World::allow_all().await;
    let _d = w.start();
    let help = w.ask("/help").await;
    let listed: Vec<_> = COMMANDS.iter().filter(|c| c.help.is_some()).collect();
    assert!(listed.len() >= 15, "the table lists the commands");
    for command in listed {
        let line = format!("\n/{}", command.name);
        assert!(help[0].contains(&line), "{line} in {}", help[0]);
    }
    // And the native command menu has every command with a menu entry.
    let calls = w.telegram.calls("setMyCommands");
    let menu: Vec<String> = calls.last().expect("the menu was set").params["commands"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["command"].as_str().unwrap().to_owned())
        .collect();
    let offered: Vec<_> = COMMANDS
        .iter()
        .filter(|c| c.menu.is_some())
        .map(|c| c.name)
        .collect();
    assert_eq!(menu, offered);
    // Aliases work as their command.
    let started = w.ask("/start").await;
    assert_eq!(started.last(), help.first(), "/start is /help");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_history_edit_waits_for_the_running_turn_and_status_does_not() {
    let w = World::allow_all().await;
    let _d = w.start();
    alice_runs_a_long_command(&w).await;
    let undone = w.ask("/undo").await;
    assert!(
        undone
            .last()
            .unwrap()
            .starts_with("⏳ I'm still working on your last message"),
        "{undone:?}"
    );
    let status = w.ask("/status").await;
    assert!(
        status.last().unwrap().contains("Agent: working for"),
        "{status:?}"
    );
    w.ask("/stop").await;
}
