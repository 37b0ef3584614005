//! Context compression end to end: a session that outgrows `compression.threshold` has its
//! middle summarised by the model (the fake sees the summary request) and the next call
//! carries the summary in its place; a context-overflow error compresses and retries once;
//! `/compress` does it by hand. The originals stay in the database, out of the context.

mod common;

use common::*;
use hermes_testkit::llm::{Reply, last_user_text};
use serde_json::Value;

/// Whether a request is the summariser's (its instructions are the system prompt).
fn is_summary_request(request: &Value) -> bool {
    request["messages"][0]["content"]
        .as_str()
        .is_some_and(|s| s.starts_with("You summarise"))
}

fn carries_summary(request: &Value) -> bool {
    request["messages"].as_array().unwrap().iter().any(|m| {
        m["content"]
            .as_str()
            .is_some_and(|c| c.starts_with("[Summary of the earlier conversation"))
    })
}

fn small_context(w: &World, compression: &str) {
    w.set_model(
        &format!(
            "model:\n  provider: custom\n  default: fake-model\n  base_url: {}\n  api_key: k\n  context_length: 2000\n  max_attempts: 1\n",
            w.llm.base_url()
        ),
        compression,
    );
}

/// Rows of the session's messages: (content, hidden).
fn stored(w: &World) -> Vec<(String, Option<String>)> {
    let db = rusqlite::Connection::open(w.home.dir.join("gateway.db")).unwrap();
    let mut stmt = db
        .prepare("SELECT coalesce(content, ''), hidden FROM messages ORDER BY id")
        .unwrap();
    stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_session_is_summarised_and_the_next_call_carries_the_summary() {
    let w = World::allow_all().await;
    small_context(&w, "compression:\n  protect_first_n: 1\n");
    // Echo answers, and a short summary when asked for one.
    for _ in 0..12 {
        w.llm.push(Reply::computed(|request| {
            if is_summary_request(request) {
                Reply::text("SHORT SUMMARY")
            } else {
                Reply::text(format!("echo: {}", last_user_text(request)))
            }
        }));
    }
    let _d = w.start();
    let long = "lorem ipsum dolor sit amet ".repeat(15); // ~100 tokens
    let mut summarised_at = None;
    for i in 0..6 {
        w.ask(&format!("question {i} {long}")).await;
        if summarised_at.is_none() {
            summarised_at = w.llm.requests().iter().position(is_summary_request);
        }
    }
    let at = summarised_at.expect("the session was compressed");
    let requests = w.llm.requests();
    let transcript = last_user_text(&requests[at]);
    assert!(
        transcript.contains("[user]\nquestion 1"),
        "the middle is summarised: {transcript}"
    );
    assert!(
        !transcript.contains("[user]\nquestion 0"),
        "the first message is protected"
    );
    let next = &requests[at + 1];
    assert!(carries_summary(next), "{next}");
    assert!(next.to_string().contains("SHORT SUMMARY"));
    assert!(
        last_user_text(next).starts_with("question"),
        "the person's new message comes last: {}",
        last_user_text(next)
    );
    // Every original is kept: hidden from the context, still in the database.
    let rows = stored(&w);
    assert!(
        rows.iter()
            .any(|(text, hidden)| text.starts_with("question 1")
                && hidden.as_deref() == Some("compressed"))
    );
    assert!(
        rows.iter()
            .any(|(text, hidden)| text.starts_with("question 0") && hidden.is_none())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_overflow_error_compresses_and_tries_again_once() {
    let w = World::allow_all().await;
    w.set_model(
        &format!(
            "model:\n  provider: custom\n  default: fake-model\n  base_url: {}\n  api_key: k\n  max_attempts: 1\n",
            w.llm.base_url()
        ),
        "compression:\n  protect_first_n: 1\n  protect_last_n: 2\n",
    );
    let _d = w.start();
    for i in 0..3 {
        w.ask(&format!("message {i}")).await;
    }
    w.llm.push(Reply::ContextOverflow);
    w.llm.push(Reply::text("the summary"));
    w.llm.push(Reply::text("answered after compressing"));
    let replies = w.ask("one more").await;
    assert_eq!(replies.last().unwrap(), "answered after compressing");
    let requests = w.llm.requests();
    assert_eq!(requests.len(), 6);
    assert!(is_summary_request(&requests[4]));
    assert!(carries_summary(&requests[5]));
    assert_eq!(last_user_text(&requests[5]), "one more");

    // An overflow that compressing does not cure ends the turn with a notice.
    w.llm.push(Reply::ContextOverflow);
    w.llm.push(Reply::ContextOverflow);
    let replies = w.ask("and another").await;
    let notice = replies.last().unwrap();
    assert!(notice.contains("/compress"), "{notice}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_compress_command_summarises_now() {
    let w = World::allow_all().await;
    w.set_model(
        &format!(
            "model:\n  provider: custom\n  default: fake-model\n  base_url: {}\n  api_key: k\n",
            w.llm.base_url()
        ),
        "compression:\n  protect_first_n: 1\n  protect_last_n: 2\n",
    );
    let _d = w.start();
    let short = w.ask("/compress").await;
    assert!(short[0].contains("too short"), "{short:?}");
    for i in 0..3 {
        w.ask(&format!("message {i}")).await;
    }
    w.llm.push(Reply::text("what happened so far"));
    let replies = w.ask("/compress").await;
    let answer = replies.last().unwrap();
    assert!(
        answer.starts_with("🗜️ Compressed: 3 earlier messages"),
        "{answer}"
    );
    w.ask("next").await;
    let last = w.llm.requests().last().cloned().unwrap();
    assert!(carries_summary(&last));
    let summary = last["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find_map(|m| m["content"].as_str().filter(|c| c.starts_with("[Summary")))
        .unwrap()
        .to_owned();
    assert!(summary.contains("what happened so far"), "{summary}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_summariser_is_not_asked_before_every_turn() {
    let w = World::allow_all().await;
    small_context(&w, "compression:\n  protect_first_n: 1\n");
    for _ in 0..16 {
        w.llm.push(Reply::computed(|request| {
            if is_summary_request(request) {
                Reply::ErrorSaying {
                    status: 400,
                    message: "the summariser is broken".into(),
                }
            } else {
                Reply::text(format!("echo: {}", last_user_text(request)))
            }
        }));
    }
    let _d = w.start();
    let long = "lorem ipsum dolor sit amet ".repeat(15);
    for i in 0..8 {
        let replies = w.ask(&format!("question {i} {long}")).await;
        assert!(
            replies.last().unwrap().starts_with("echo: question"),
            "every turn is answered: {replies:?}"
        );
    }
    let asked = w
        .llm
        .requests()
        .iter()
        .filter(|r| is_summary_request(r))
        .count();
    assert_eq!(asked, 1, "one failure, then a rest");
}

/// Echo answers, and a short summary when asked for one, `n` times.
fn echo_and_summarise(w: &World, n: usize) {
    for _ in 0..n {
        w.llm.push(Reply::computed(|request| {
            if is_summary_request(request) {
                Reply::text("SHORT SUMMARY")
            } else {
                Reply::text(format!("echo: {}", last_user_text(request)))
            }
        }));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compression_is_measured_against_the_model_the_chat_chose() {
    let w = World::allow_all().await;
    // The main model holds 2,000 tokens; gpt-4o, on the same endpoint, 128,000.
    small_context(&w, "compression:\n  protect_first_n: 1\n");
    echo_and_summarise(&w, 12);
    let _d = w.start();
    let chose = w.ask("/model gpt-4o").await;
    assert!(chose[0].contains("gpt-4o"), "{chose:?}");
    let long = "lorem ipsum dolor sit amet ".repeat(15); // ~100 tokens
    for i in 0..6 {
        w.ask(&format!("question {i} {long}")).await;
    }
    let requests = w.llm.requests();
    assert!(
        !requests.iter().any(is_summary_request),
        "600 tokens are far from gpt-4o's threshold"
    );
    assert!(requests.iter().all(|r| r["model"] == "gpt-4o"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fallback_that_holds_less_compresses_the_conversation_first() {
    let w = World::allow_all().await;
    w.set_model(
        &format!(
            "model:\n  provider: custom\n  default: big-model\n  base_url: {url}\n  api_key: k\n  context_length: 1000000\n  max_attempts: 1\n\
             fallback_providers:\n  - provider: custom\n    model: small-model\n    base_url: {url}\n    api_key: k\n    context_length: 2000\n",
            url = w.llm.base_url()
        ),
        "compression:\n  protect_first_n: 1\n",
    );
    echo_and_summarise(&w, 5);
    let _d = w.start();
    let long = "lorem ipsum dolor sit amet ".repeat(15);
    for i in 0..5 {
        w.ask(&format!("question {i} {long}")).await;
    }
    assert!(!w.llm.requests().iter().any(is_summary_request));
    w.llm.push(Reply::Error {
        status: 500,
        retry_after: Some(0),
    });
    echo_and_summarise(&w, 2);
    let before = w.telegram.sent_texts(ALICE).len();
    w.telegram.dm(ALICE, &format!("question 5 {long}"));
    // The fallback notice, then the answer.
    let replies = w.replies(ALICE, before + 2).await;
    assert!(
        replies.last().unwrap().starts_with("echo: question 5"),
        "{replies:?}"
    );
    let requests = w.llm.requests();
    let summary = requests
        .iter()
        .position(is_summary_request)
        .expect("compressed for the fallback's window");
    let answer = requests.last().unwrap();
    assert_eq!(answer["model"], "small-model");
    assert!(summary < requests.len() - 1);
    assert!(carries_summary(answer), "{answer}");
}
