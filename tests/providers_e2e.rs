//! Providers end to end (the real daemon, the fake Telegram, the fake LLM in both
//! dialects): Anthropic's Messages API spoken natively (tools, signed thinking, prompt
//! caching, a byte-identical system prompt), OpenRouter's headers and cache marks, and the
//! fallback chain after a provider that stays down or runs out of credit.

mod common;

use std::time::Duration;

use common::*;
use hermes_testkit::llm::{Reply, anthropic_tool_results, cache_control_count};
use serde_json::{Value, json};

fn anthropic_model(w: &World, model: &str, agent_yaml: &str) {
    w.set_model(
        &format!(
            "model:\n  provider: anthropic\n  default: {model}\n  base_url: {}\n  max_attempts: 2\n",
            w.llm.anthropic_base_url()
        ),
        agent_yaml,
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anthropic_runs_a_tool_round_trip_with_thinking_and_prompt_caching() {
    let w = World::new(
        &[
            "TELEGRAM_ALLOW_ALL_USERS=true",
            "ANTHROPIC_API_KEY=sk-ant-api03-test-key",
        ],
        "",
    )
    .await;
    anthropic_model(
        &w,
        "claude-sonnet-4-5",
        "agent:\n  reasoning_effort: medium\n",
    );
    w.llm.push(Reply::ThinkingThenTool {
        thinking: "I should list the files.".into(),
        name: "terminal".into(),
        arguments: json!({"command": "echo from-the-tool"}),
    });
    w.llm.push(Reply::Thinking {
        thinking: "The tool said it.".into(),
        text: "The tool printed from-the-tool.".into(),
    });
    let _d = w.start();
    assert_eq!(
        w.ask("what does the tool print?").await,
        ["The tool printed from-the-tool."]
    );
    let requests = w.llm.requests();
    assert_eq!(requests.len(), 2, "both calls passed the API's checks");
    let first = &requests[0];
    assert_eq!(
        w.llm.header(0, "x-api-key").as_deref(),
        Some("sk-ant-api03-test-key")
    );
    assert!(w.llm.header(0, "anthropic-version").is_some());
    assert_eq!(
        w.llm.header(0, "content-type").as_deref(),
        Some("application/json")
    );
    assert_eq!(first["thinking"]["budget_tokens"], 8_000);
    assert_eq!(first["system"][0]["cache_control"]["type"], "ephemeral");
    assert_eq!(first["tools"][0]["name"], "terminal");
    assert!(first["tools"][0]["input_schema"].is_object());
    // The follow-up replays the signed thinking before the call and answers it.
    let second = &requests[1];
    let assistant = &second["messages"][1]["content"];
    assert_eq!(assistant[0]["type"], "thinking", "{assistant}");
    assert_eq!(assistant[1]["type"], "tool_use");
    let results = anthropic_tool_results(second);
    assert_eq!(results.len(), 1);
    assert!(results[0].1.contains("from-the-tool"), "{results:?}");
    assert!(cache_control_count(second) <= 4);
    assert!(cache_control_count(second) >= 2);

    // Cache reads and writes are counted.
    let usage = w.ask("/usage").await;
    let usage = usage.last().unwrap();
    assert!(usage.contains("written to the cache"), "{usage}");
    assert!(usage.contains("from the cache"), "{usage}");
    // Anthropic states no cost: the model's list price gives one.
    assert!(
        usage.contains(", under $0.0001") || usage.contains(", $0."),
        "{usage}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_system_prompt_is_byte_identical_across_turns() {
    let w = World::new(&["TELEGRAM_ALLOW_ALL_USERS=true"], "").await;
    // A `custom` endpoint whose root ends in /anthropic speaks Anthropic's dialect.
    w.set_model(
        &format!(
            "model:\n  provider: custom\n  default: claude-haiku-4-5\n  base_url: {}\n  api_key: sk-ant-api03-own\n",
            w.llm.anthropic_base_url()
        ),
        "",
    );
    let _d = w.start();
    w.ask("first").await;
    w.ask("second").await;
    w.ask("third").await;
    let requests = w.llm.requests();
    assert_eq!(requests.len(), 3);
    let system: Vec<String> = requests.iter().map(|r| r["system"].to_string()).collect();
    assert_eq!(system[0], system[1]);
    assert_eq!(system[1], system[2]);
    // Each call's conversation starts with the one before it, so its prefix is cached.
    let turns = |i: usize| requests[i]["messages"].as_array().unwrap().clone();
    let strip = |m: &Value| {
        let mut m = m.clone();
        for block in m["content"].as_array_mut().into_iter().flatten() {
            block.as_object_mut().unwrap().remove("cache_control");
        }
        m
    };
    let (earlier, later) = (turns(1), turns(2));
    for (a, b) in earlier.iter().zip(&later) {
        assert_eq!(strip(a), strip(b));
    }
    assert_eq!(later.len(), earlier.len() + 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openrouter_gets_its_headers_and_cache_marks_for_claude() {
    let w = World::new(
        &[
            "TELEGRAM_ALLOW_ALL_USERS=true",
            "OPENROUTER_API_KEY=sk-or-test",
        ],
        "",
    )
    .await;
    w.set_model(
        &format!(
            "model:\n  provider: openrouter\n  default: anthropic/claude-sonnet-4\n  base_url: {}\n",
            w.llm.base_url()
        ),
        "",
    );
    let _d = w.start();
    w.ask("hello").await;
    assert_eq!(
        w.llm.header(0, "authorization").as_deref(),
        Some("Bearer sk-or-test")
    );
    assert_eq!(
        w.llm.header(0, "http-referer").as_deref(),
        Some("https://hermes-agent.nousresearch.com")
    );
    assert_eq!(w.llm.header(0, "x-title").as_deref(), Some("Hermes Agent"));
    let request = &w.llm.requests()[0];
    assert_eq!(request["model"], "anthropic/claude-sonnet-4");
    assert_eq!(
        request["messages"][0]["content"][0]["cache_control"]["type"],
        "ephemeral"
    );
    assert_eq!(request["usage"], json!({"include": true}));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_primary_that_stays_down_hands_the_turn_to_the_fallback_and_says_so_once() {
    let w = World::allow_all().await;
    w.set_model(
        &format!(
            "model:\n  provider: custom\n  default: main-model\n  base_url: {url}\n  api_key: k\n  max_attempts: 2\n\
             fallback_providers:\n  - provider: custom\n    model: backup-model\n    base_url: {url}\n    api_key: k2\n",
            url = w.llm.base_url()
        ),
        "",
    );
    for _ in 0..2 {
        w.llm.push(Reply::Error {
            status: 500,
            retry_after: Some(0),
        });
    }
    w.llm.push(Reply::terminal("echo on-the-backup"));
    w.llm.push(Reply::text("answered by the backup"));
    let _d = w.start();
    w.telegram.dm(ALICE, "hello");
    let replies = w.replies(ALICE, 2).await;
    assert!(
        replies[0].contains("main-model") && replies[0].contains("backup-model"),
        "{replies:?}"
    );
    assert_eq!(replies[1], "answered by the backup");
    settle().await;
    assert_eq!(w.telegram.sent_texts(ALICE).len(), 2, "told once");
    let models: Vec<String> = w
        .llm
        .requests()
        .iter()
        .map(|r| r["model"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        models,
        ["main-model", "main-model", "backup-model", "backup-model"]
    );
    assert_eq!(
        w.llm.header(2, "authorization").as_deref(),
        Some("Bearer k2")
    );
    // The next turn tries the main model again.
    assert_eq!(w.ask("again").await.len(), 3);
    assert_eq!(w.llm.requests()[4]["model"], "main-model");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn out_of_credit_falls_back_at_once_even_across_dialects() {
    let w = World::new(
        &[
            "TELEGRAM_ALLOW_ALL_USERS=true",
            "BACKUP_ANTHROPIC=sk-ant-api03-backup",
        ],
        "",
    )
    .await;
    w.set_model(
        &format!(
            "model:\n  provider: custom\n  default: main-model\n  base_url: {}\n  api_key: k\n  max_attempts: 3\n\
             fallback_model:\n  provider: anthropic\n  model: claude-haiku-4-5\n  base_url: {}\n  key_env: BACKUP_ANTHROPIC\n",
            w.llm.base_url(),
            w.llm.anthropic_base_url()
        ),
        "",
    );
    w.llm.push(Reply::ErrorSaying {
        status: 402,
        message: "Insufficient credits".into(),
    });
    w.llm.push(Reply::text("from claude"));
    let _d = w.start();
    w.telegram.dm(ALICE, "hello");
    let replies = w.replies(ALICE, 2).await;
    assert!(replies[0].contains("out of credit"), "{replies:?}");
    assert_eq!(replies[1], "from claude");
    let requests = w.llm.requests();
    assert_eq!(requests.len(), 2, "a 402 is not retried");
    assert_eq!(requests[1]["model"], "claude-haiku-4-5");
    assert_eq!(
        w.llm.header(1, "x-api-key").as_deref(),
        Some("sk-ant-api03-backup")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_grace_call_on_anthropic_writes_the_tool_steps_as_text() {
    let w = World::new(
        &[
            "TELEGRAM_ALLOW_ALL_USERS=true",
            "ANTHROPIC_API_KEY=sk-ant-api03-test-key",
        ],
        "",
    )
    .await;
    // Claude 4.7 thinks adaptively.
    anthropic_model(
        &w,
        "claude-opus-4-7",
        "agent:\n  max_turns: 1\n  reasoning_effort: high\n",
    );
    w.llm.push(Reply::terminal("echo step"));
    w.llm.push(Reply::text("here is where I got to"));
    let _d = w.start();
    assert_eq!(w.ask("do a lot").await, ["here is where I got to"]);
    let requests = w.llm.requests();
    assert_eq!(requests.len(), 2, "the grace call passed the API's checks");
    assert_eq!(requests[0]["thinking"]["type"], "adaptive");
    assert_eq!(requests[0]["output_config"]["effort"], "high");
    assert!(requests[1].get("tools").is_none());
    assert!(
        requests[1]["messages"]
            .to_string()
            .contains("[tool result]")
    );
}

/// A provider down for a while: the person is told once, the turn keeps asking, and it is
/// answered when the provider is back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_down_for_a_while_is_waited_out_and_the_person_told_once() {
    let w = World::allow_all().await;
    w.llm.go_down(Duration::from_secs(6), 503);
    let _d = w.start();
    w.telegram.dm(ALICE, "hello");
    let replies = w.replies(ALICE, 2).await;
    assert!(
        replies[0].contains("keep trying") && replies[0].contains("/stop"),
        "{replies:?}"
    );
    assert_eq!(replies[1], "echo: hello");
    settle().await;
    assert_eq!(w.telegram.sent_texts(ALICE).len(), 2, "told once");
    assert!(w.llm.requests().len() > 3, "asked again after its retries");
}

/// `/stop` ends a turn that waits for a provider that stays down; nothing more is asked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_ends_a_turn_waiting_for_a_provider_that_stays_down() {
    let w = World::allow_all().await;
    w.llm.go_down(Duration::from_secs(600), 500);
    let _d = w.start();
    w.telegram.dm(ALICE, "hello");
    assert!(w.replies(ALICE, 1).await[0].contains("keep trying"));
    w.telegram.dm(ALICE, "/stop");
    assert_eq!(w.replies(ALICE, 2).await[1], "⏹ Stopped.");
    let asked = w.llm.requests().len();
    tokio::time::sleep(Duration::from_secs(6)).await;
    assert_eq!(w.llm.requests().len(), asked, "nothing asked after /stop");
    assert_eq!(w.telegram.sent_texts(ALICE).len(), 2);
}

/// The model provider's faults, one after another in one conversation: a 429 with
/// `Retry-After`, a 500, Anthropic's 529 "overloaded", a stream that stalls mid-answer, a
/// stream that breaks mid-answer. Each turn is answered once, with no notice to the person
/// (the retries are silent), and the broken attempt's words never show.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_kind_of_provider_fault_is_retried_silently_and_answered_once() {
    let w = World::allow_all().await;
    let config = w.home.dir.join("config.yaml");
    let yaml = std::fs::read_to_string(&config).unwrap().replace(
        "  max_attempts: 3\n",
        "  max_attempts: 3\n  stream_idle_timeout: 1\n",
    );
    std::fs::write(&config, yaml).unwrap();
    let faults = [
        Reply::Error {
            status: 429,
            retry_after: Some(1),
        },
        Reply::Error {
            status: 500,
            retry_after: None,
        },
        Reply::Error {
            status: 529,
            retry_after: None,
        },
        // Headers and a few words, then nothing for longer than the idle timeout.
        Reply::Delayed(Duration::from_secs(30), Box::new(Reply::text("never"))),
        Reply::StreamError {
            after_text: "half an ans".into(),
        },
    ];
    let _d = w.start();
    for (n, fault) in faults.into_iter().enumerate() {
        w.llm.push(fault);
        w.llm.push(Reply::text(format!("answer {n}")));
        let shown = w.ask(&format!("question {n}")).await;
        assert_eq!(shown.last().unwrap(), &format!("answer {n}"), "{shown:?}");
    }
    settle().await;
    let shown = w.telegram.sent_texts(ALICE);
    assert_eq!(
        shown,
        (0..5).map(|n| format!("answer {n}")).collect::<Vec<_>>()
    );
    assert_eq!(w.llm.requests().len(), 10, "one retry each");
}

/// A provider that refuses the key: the person is told once, plainly (not "refused the
/// request: the model provider refused the request"), and the operator's log says it at
/// WARN.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_key_is_said_once_to_the_person_and_at_warn_to_the_operator() {
    let w = World::allow_all().await;
    w.llm.push(Reply::ErrorSaying {
        status: 401,
        message: "Incorrect API key provided.".into(),
    });
    let mut d = w.start();
    w.telegram.dm(ALICE, "hello");
    let notice = w.replies(ALICE, 1).await.remove(0);
    assert_eq!(
        notice.to_lowercase().matches("refused the request").count(),
        1,
        "{notice}"
    );
    assert!(
        notice.starts_with(
            "⚠️ The model provider refused the request (HTTP 401): Incorrect API key provided."
        ),
        "{notice}"
    );
    d.terminate();
    let log = d.log_text();
    assert!(
        log.lines().any(|l| l.contains("WARN")
            && l.contains("HTTP 401")
            && l.contains("the person was told")),
        "{log}"
    );
}

/// `model.max_concurrent_calls`: beyond it, calls wait for a place instead of each holding
/// a connection (and its request body) at once; every one is answered in the end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_beyond_the_models_limit_wait_their_turn() {
    let w = World::allow_all().await;
    w.set_model(
        &format!(
            "model:\n  provider: custom\n  default: fake-model\n  base_url: {}\n  max_concurrent_calls: 2\n",
            w.llm.base_url()
        ),
        "",
    );
    w.llm.answer_by_default(|_| {
        Reply::Delayed(Duration::from_millis(300), Box::new(Reply::text("done")))
    });
    let _d = w.start();
    let chats: Vec<i64> = (0..5).map(|i| 9_100 + i).collect();
    for &chat in &chats {
        w.telegram.dm(chat, "hello");
    }
    for &chat in &chats {
        assert_eq!(w.replies(chat, 1).await, ["done"]);
    }
    let timings = w.llm.timings();
    assert_eq!(timings.len(), 5);
    let most_at_once = timings
        .iter()
        .map(|t| {
            timings
                .iter()
                .filter(|o| o.arrived <= t.arrived && o.finished.is_none_or(|end| end > t.arrived))
                .count()
        })
        .max()
        .unwrap();
    assert!(most_at_once <= 2, "{most_at_once} calls in flight at once");
}
