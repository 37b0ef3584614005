//! The agent's own tools end to end: a todo list that lasts across turns, memory that
//! reaches the next session's system prompt (and not the current one's: it stays cached),
//! and session_search over the person's own earlier conversations only.

mod common;

use common::*;
use hermes_testkit::llm::Reply;
use serde_json::json;

const BOB: i64 = 5151;

fn call(name: &str, arguments: serde_json::Value) -> Reply {
    Reply::ToolCall {
        name: name.into(),
        arguments,
    }
}

fn system_of(request: &serde_json::Value) -> String {
    request["messages"][0]["content"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_todo_list_lasts_across_turns() {
    let w = World::allow_all().await;
    w.llm.push(call(
        "todo",
        json!({"todos": [
            {"id": "1", "content": "read the logs", "status": "in_progress"},
            {"id": "2", "content": "write the fix", "status": "pending"}
        ]}),
    ));
    w.llm.push(Reply::text("planned"));
    w.llm.push(call(
        "todo",
        json!({"todos": [{"id": "1", "content": "read the logs", "status": "completed"}], "merge": true}),
    ));
    w.llm.push(Reply::text("updated"));
    w.llm.push(call("todo", json!({})));
    w.llm.push(Reply::text("here it is"));
    let _d = w.start();
    w.ask("plan the work").await;
    w.ask("the logs are read").await;
    w.ask("show the list").await;
    let list: serde_json::Value = serde_json::from_str(tool_results(&w).last().unwrap()).unwrap();
    assert_eq!(list["todos"][0]["status"], "completed");
    assert_eq!(list["todos"][1]["content"], "write the fix");
    assert_eq!(list["summary"]["pending"], 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_reaches_the_next_sessions_prompt() {
    // A bot for one person: Hermes' layout, `memories/USER.md`.
    let w = World::new(&[&format!("TELEGRAM_ALLOWED_USERS={ALICE}")], "").await;
    w.llm.push(call(
        "memory",
        json!({"action": "add", "target": "user", "content": "Name: Ana; prefers metric units"}),
    ));
    w.llm.push(Reply::text("I'll remember"));
    let _d = w.start();
    w.ask("I'm Ana and I like metric units").await;
    let requests = w.llm.requests();
    assert!(
        !system_of(&requests[1]).contains("Name: Ana"),
        "the session's prompt stays as it began"
    );
    let file = std::fs::read_to_string(w.home.dir.join("memories/USER.md")).unwrap();
    assert_eq!(file, "Name: Ana; prefers metric units");
    w.ask("/new").await;
    w.ask("hello again").await;
    let system = system_of(w.llm.requests().last().unwrap());
    assert!(system.contains("## About the person"), "{system}");
    assert!(
        system.contains("Name: Ana; prefers metric units"),
        "{system}"
    );
}

/// Where several people may talk to the bot, what Alice told it is kept in her own
/// memories: her next session's prompt carries it, Bob's never does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_persons_memory_never_reaches_anothers_prompt() {
    let w = World::allow_all().await;
    w.llm.push(call(
        "memory",
        json!({"action": "add", "target": "user", "content": "Ana's door code is 4711"}),
    ));
    w.llm.push(Reply::text("I'll remember"));
    let _d = w.start();
    w.ask("remember my door code 4711").await;
    let own = w
        .home
        .dir
        .join(format!("memories/people/telegram_{ALICE}/USER.md"));
    assert_eq!(
        std::fs::read_to_string(own).unwrap(),
        "Ana's door code is 4711"
    );
    assert!(!w.home.dir.join("memories/USER.md").exists());

    w.telegram.dm(BOB, "hello");
    w.replies(BOB, 1).await;
    let bobs = system_of(w.llm.requests().last().unwrap());
    assert!(!bobs.contains("4711"), "{bobs}");
    w.ask("/new").await;
    w.ask("hello again").await;
    let alices = system_of(w.llm.requests().last().unwrap());
    assert!(alices.contains("Ana's door code is 4711"), "{alices}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_search_finds_the_persons_own_earlier_words_only() {
    let w = World::allow_all().await;
    let _d = w.start();
    w.ask("the zebra budget is forty thousand").await;
    w.ask("/new").await;
    w.telegram.dm(BOB, "my zebra secret is the moon");
    w.replies(BOB, 1).await;
    w.llm
        .push(call("session_search", json!({"query": "zebra"})));
    w.llm.push(Reply::text("found it"));
    w.ask("what did I say about the zebra?").await;
    let results = tool_results(&w);
    assert_eq!(results.len(), 1);
    assert!(results[0].contains("[zebra] budget"), "{results:?}");
    assert!(
        !results[0].contains("moon"),
        "another person's words: {results:?}"
    );
    assert!(
        !results[0].contains("what did I say"),
        "not the current conversation: {results:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_platform_offers_its_toolsets() {
    let w = World::new(
        &["TELEGRAM_ALLOW_ALL_USERS=true"],
        "platform_toolsets:\n  telegram: [terminal, todo]\nagent:\n  disabled_toolsets: [todo]\n",
    )
    .await;
    let _d = w.start();
    w.ask("hello").await;
    let offered: Vec<String> = w.llm.requests()[0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(offered, ["terminal", "process"]);
    // A tool not offered here is refused like an unknown one.
    w.llm
        .push(call("read_file", json!({"path": "/etc/hostname"})));
    w.llm.push(Reply::text("no such tool"));
    w.ask("read it").await;
    let results = tool_results(&w);
    assert!(results[0].contains("no tool named"), "{results:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_message_reaches_the_home_channel_and_no_stranger() {
    let w = World::allow_all().await;
    let _d = w.start();
    w.ask("/sethome").await;
    let report = w.home.dir.join("work/report.txt");
    std::fs::write(&report, "all 512 tests passed\n").unwrap();
    w.llm.push(Reply::ToolCalls(vec![
        (
            "send_message".into(),
            json!({"target": "home", "message": "the build is green"}),
        ),
        (
            "send_message".into(),
            json!({"target": "home", "message": format!("the report MEDIA:{}", report.display())}),
        ),
        (
            "send_message".into(),
            json!({"target": "telegram:999999", "message": "hi stranger"}),
        ),
    ]));
    w.llm.push(Reply::text("told them"));
    w.telegram
        .dm(BOB, "tell the home channel the build is green");
    w.replies(BOB, 1).await;
    let t = w.telegram.clone();
    hermes_testkit::eventually(WAIT, "the message in the home channel", || {
        t.sent_texts(ALICE)
            .contains(&"the build is green".to_owned())
            .then_some(())
    })
    .await;
    let results = tool_results(&w);
    assert!(
        results[0].starts_with("queued for telegram 4242"),
        "{results:?}"
    );
    assert!(
        results[1].starts_with("queued for telegram 4242 with 1 file"),
        "{results:?}"
    );
    assert!(
        results[2].contains("not a chat where you have talked"),
        "{results:?}"
    );
    let t = w.telegram.clone();
    let sent = hermes_testkit::eventually(WAIT, "the report in the home channel", || {
        t.sent_files(ALICE).into_iter().next()
    })
    .await;
    assert_eq!(sent.name, "report.txt");
    assert_eq!(sent.bytes, b"all 512 tests passed\n");
    assert!(w.telegram.sent_texts(999_999).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skills_from_a_hermes_home_are_indexed_listed_and_viewed() {
    let w = World::allow_all().await;
    let skill = w.home.dir.join("skills/writing/release-notes");
    std::fs::create_dir_all(&skill).unwrap();
    std::fs::write(
        skill.join("SKILL.md"),
        "---\nname: release-notes\ndescription: Write release notes our way\n---\nStart with the headline change.\n",
    )
    .unwrap();
    w.llm.push(Reply::ToolCalls(vec![
        ("skills_list".into(), json!({})),
        ("skill_view".into(), json!({"name": "release-notes"})),
    ]));
    w.llm.push(Reply::text("following the skill"));
    let _d = w.start();
    w.ask("write the release notes").await;
    let system = system_of(&w.llm.requests()[0]);
    assert!(
        system.contains(
            "<available_skills>\n  writing:\n    - release-notes: Write release notes our way"
        ),
        "{system}"
    );
    let results = tool_results(&w);
    assert_eq!(
        results[0],
        "- release-notes (writing): Write release notes our way"
    );
    assert!(
        results[1].contains("Start with the headline change."),
        "{results:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn web_tools_need_a_key_and_search_and_read_through_the_service() {
    let search = hermes_testkit::web::FakeSearch::start().await;
    search.results(&[("Rust 2026", "https://example.org/rust", "What is new")]);
    let w = World::new(
        &[
            "TELEGRAM_ALLOW_ALL_USERS=true",
            "TAVILY_API_KEY=tvly-test-key",
            &format!("TAVILY_BASE_URL={}", search.base_url()),
        ],
        "",
    )
    .await;
    w.llm.push(Reply::ToolCalls(vec![
        ("web_search".into(), json!({"query": "rust news"})),
        (
            "web_extract".into(),
            json!({"urls": ["https://example.org/rust", "https://example.org/fail", "file:///etc/passwd"]}),
        ),
    ]));
    w.llm.push(Reply::text("read it"));
    let _d = w.start();
    w.ask("what's new in rust?").await;
    let offered = w.llm.requests()[0]["tools"].to_string();
    assert!(offered.contains("web_search") && offered.contains("web_extract"));
    let results = tool_results(&w);
    assert!(
        results[0].starts_with("1. Rust 2026 — https://example.org/rust"),
        "{results:?}"
    );
    assert!(
        results[1].contains("Page text of https://example.org/rust"),
        "{results:?}"
    );
    assert!(
        results[1].contains("could not be read: timeout"),
        "{results:?}"
    );
    let requests = search.requests();
    assert!(
        requests
            .iter()
            .all(|r| r.1.as_deref() == Some("Bearer tvly-test-key"))
    );
    let extract = requests.iter().find(|r| r.0 == "/extract").unwrap();
    assert_eq!(
        extract.2["urls"].as_array().unwrap().len(),
        2,
        "only http(s) URLs"
    );

    // Without a key the tools are not offered.
    let plain = World::allow_all().await;
    let _p = plain.start();
    plain.ask("hello").await;
    assert!(
        !plain.llm.requests()[0]["tools"]
            .to_string()
            .contains("web_search")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exa_and_firecrawl_keys_bring_the_web_tools_through_their_apis() {
    let search = hermes_testkit::web::FakeSearch::start().await;
    search.results(&[("Rust 2026", "https://example.org/rust", "What is new")]);
    for (env, path, credential) in [
        (
            vec![
                "EXA_API_KEY=exa-test-key".to_owned(),
                format!("EXA_BASE_URL={}", search.exa_url()),
            ],
            "/exa/",
            "exa-test-key",
        ),
        (
            vec![
                "FIRECRAWL_API_KEY=fc-test-key".to_owned(),
                format!("FIRECRAWL_API_URL={}", search.firecrawl_url()),
            ],
            "/firecrawl/",
            "Bearer fc-test-key",
        ),
    ] {
        let mut vars = vec!["TELEGRAM_ALLOW_ALL_USERS=true"];
        vars.extend(env.iter().map(String::as_str));
        let w = World::new(&vars, "").await;
        w.llm.push(Reply::ToolCalls(vec![
            (
                "web_search".into(),
                json!({"query": "rust news", "limit": 3}),
            ),
            (
                "web_extract".into(),
                json!({"urls": ["https://example.org/rust", "https://example.org/fail"]}),
            ),
        ]));
        w.llm.push(Reply::text("read it"));
        let _d = w.start();
        w.ask("what's new in rust?").await;
        let results = tool_results(&w);
        assert!(
            results[0].starts_with("1. Rust 2026 — https://example.org/rust\n   What is new"),
            "{path}: {results:?}"
        );
        assert!(
            results[1]
                .contains("## https://example.org/rust\nPage text of https://example.org/rust"),
            "{path}: {results:?}"
        );
        assert!(
            results[1].contains("## https://example.org/fail\n(could not be read:"),
            "{path}: {results:?}"
        );
        let requests: Vec<_> = search
            .requests()
            .into_iter()
            .filter(|r| r.0.starts_with(path))
            .collect();
        assert!(requests.len() >= 2, "{path}: {requests:?}");
        assert!(
            requests.iter().all(|r| r.1.as_deref() == Some(credential)),
            "{path}: {requests:?}"
        );
    }
}
