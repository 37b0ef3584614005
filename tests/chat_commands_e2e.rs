//! The chat commands end to end: `/model`, `/retry`, `/undo`, `/title`, `/sethome`,
//! `/personality`, `/verbose`, and `/help` naming them all.

mod common;

use common::*;
use std::time::Duration;

use hermes_testkit::llm::{Reply, last_user_text};

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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reasoning_sets_how_much_the_chats_model_thinks() {
    use hermes_testkit::llm::Reply;
    let w = World::new(
        &[
            "TELEGRAM_ALLOW_ALL_USERS=true",
            "ANTHROPIC_API_KEY=sk-ant-api03-test-key",
        ],
        "",
    )
    .await;
    w.set_model(
        &format!(
            "model:\n  provider: anthropic\n  default: claude-sonnet-4-5\n  base_url: {}\n",
            w.llm.anthropic_base_url()
        ),
        "agent:\n  reasoning_effort: medium\n",
    );
    let _d = w.start();
    let shown = visible(w.ask("/reasoning").await.last().unwrap());
    assert!(
        shown.contains("Effort: medium") && shown.contains("Scope: global config"),
        "{shown}"
    );
    w.llm.push(Reply::text("thought a lot"));
    let set = visible(w.ask("/reasoning high").await.last().unwrap());
    assert!(
        set.starts_with("🧠 ✓ Reasoning effort set to high"),
        "{set}"
    );
    w.ask("think hard").await;
    let hard = w.llm.requests().last().cloned().unwrap();
    assert_eq!(hard["thinking"]["budget_tokens"], 16_000, "{hard}");
    w.ask("/reasoning none").await;
    w.llm.push(Reply::text("no thinking"));
    w.ask("quick one").await;
    let quick = w.llm.requests().last().cloned().unwrap();
    assert!(quick.get("thinking").is_none(), "{quick}");
    w.ask("/reasoning reset").await;
    w.llm.push(Reply::text("back to medium"));
    w.ask("again").await;
    let again = w.llm.requests().last().cloned().unwrap();
    assert_eq!(again["thinking"]["budget_tokens"], 8_000);
    let bad = visible(w.ask("/reasoning loud").await.last().unwrap());
    assert!(bad.starts_with("⚠️ Unknown argument: loud"), "{bad}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn context_shows_what_the_conversation_takes_of_the_window() {
    let w = World::allow_all().await;
    let _d = w.start();
    w.ask(&"a long question ".repeat(200)).await;
    let shown = visible(w.ask("/context").await.last().unwrap());
    assert!(shown.starts_with("🧩 Context (estimated)"), "{shown}");
    assert!(
        shown.contains("Model: fake-model (custom), 131,072 tokens"),
        "{shown}"
    );
    assert!(shown.contains("• Conversation (2 messages): ~"), "{shown}");
    assert!(shown.contains("tools): ~"), "{shown}");
    assert!(
        shown.contains("Compression starts at ~65,536 tokens (50%)"),
        "{shown}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commands_lists_commands_and_skills_a_page_at_a_time() {
    let w = World::allow_all().await;
    let skill = w.home.dir.join("skills/research/arxiv");
    std::fs::create_dir_all(&skill).unwrap();
    std::fs::write(
        skill.join("SKILL.md"),
        "---\nname: arxiv\ndescription: Search arXiv papers\n---\nUse the API.\n",
    )
    .unwrap();
    let _d = w.start();
    let first = visible(w.ask("/commands").await.last().unwrap());
    assert!(first.starts_with("📚 Commands ("), "{first}");
    assert!(first.contains("/commands 2"), "{first}");
    let mut last = String::new();
    for page in 2..=5 {
        last = visible(w.ask(&format!("/commands {page}")).await.last().unwrap());
        if !last.contains("next →") {
            break;
        }
    }
    assert!(last.contains("arxiv — Search arXiv papers"), "{last}");
    let bad = visible(w.ask("/commands two").await.last().unwrap());
    assert_eq!(bad, "Usage: /commands [page]");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reload_skills_finds_new_and_removed_skills_for_later_turns() {
    let w = World::allow_all().await;
    let skill = |name: &str| {
        let dir = w.home.dir.join("skills/tools").join(name);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("SKILL.md"),
            format!("---\nname: {name}\ndescription: Does {name}\n---\nbody\n"),
        )
        .unwrap();
        dir
    };
    let old = skill("alpha");
    let _d = w.start();
    let none = visible(w.ask("/reload_skills").await.last().unwrap());
    assert_eq!(
        none,
        "🔄 Skills Reloaded\n\nNo new skills detected.\n\n📚 1 skill(s) available"
    );
    skill("beta");
    std::fs::remove_dir_all(old).unwrap();
    let changed = visible(w.ask("/reload-skills").await.last().unwrap());
    assert!(
        changed.contains("➕ Added Skills:\n- beta: Does beta")
            && changed.contains("➖ Removed Skills:\n- alpha: Does alpha")
            && changed.ends_with("📚 1 skill(s) available"),
        "{changed}"
    );
    w.ask("hello").await;
    let system = w.llm.requests().last().unwrap()["messages"][0]["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        system.contains("- beta: Does beta") && !system.contains("alpha"),
        "{system}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_is_titled_after_its_first_exchange_unless_the_person_titled_it() {
    let titling = |request: &serde_json::Value| {
        request["messages"][0]["content"]
            .as_str()
            .is_some_and(|s| s.starts_with("Generate a short, descriptive title"))
    };
    let w = World::new(
        &["TELEGRAM_ALLOW_ALL_USERS=true"],
        "auxiliary:\n  title_generation:\n    enabled: true\n",
    )
    .await;
    for _ in 0..8 {
        w.llm.push(Reply::computed(move |request| {
            if titling(request) {
                Reply::text("\"Trip to Lisbon\"")
            } else {
                Reply::text(format!("echo: {}", last_user_text(request)))
            }
        }));
    }
    let _d = w.start();
    w.ask("plan the trip to Lisbon").await;
    hermes_testkit::eventually(WAIT, "the session to be titled", || {
        w.llm.requests().iter().any(titling).then_some(())
    })
    .await;
    let asked = w.llm.requests().into_iter().find(|r| titling(r)).unwrap();
    assert_eq!(
        last_user_text(&asked),
        "User: plan the trip to Lisbon\n\nAssistant: echo: plan the trip to Lisbon"
    );
    hermes_testkit::eventually(WAIT, "the title to be kept", || {
        let db = rusqlite::Connection::open(w.home.dir.join("gateway.db")).ok()?;
        db.query_row("SELECT title FROM sessions", [], |r| {
            r.get::<_, Option<String>>(0)
        })
        .ok()
        .flatten()
    })
    .await;
    let title = visible(w.ask("/title").await.last().unwrap());
    assert!(title.contains("Trip to Lisbon"), "{title}");

    // A session the person titled first is not titled again.
    w.ask("/new").await;
    w.ask("/title Mine").await;
    let before = w.llm.requests().iter().filter(|r| titling(r)).count();
    w.ask("something else").await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        w.llm.requests().iter().filter(|r| titling(r)).count(),
        before
    );
    let mine = visible(w.ask("/title").await.last().unwrap());
    assert!(mine.contains("Mine"), "{mine}");
}
