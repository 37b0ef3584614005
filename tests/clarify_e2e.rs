//! `clarify` end to end: the agent's question reaches the chat with buttons, and a press,
//! the person's next message, or the timeout answers it.

mod common;

use common::*;
use hermes_testkit::eventually;
use hermes_testkit::llm::Reply;
use hermes_testkit::telegram::FakeTelegram;
use serde_json::json;

fn ask_colour() -> Reply {
    Reply::ToolCall {
        name: "clarify".into(),
        arguments: json!({"question": "Which colour?", "choices": ["red", "blue"]}),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_question_is_answered_by_a_button_or_by_words() {
    let w = World::allow_all().await;
    w.llm.push(ask_colour());
    w.llm.push(Reply::text("blue it is"));
    w.llm.push(ask_colour());
    w.llm.push(Reply::text("green then"));
    let _d = w.start();
    let t = w.telegram.clone();
    w.telegram.dm(ALICE, "paint the fence");
    let prompt = eventually(WAIT, "the question", || t.prompts(ALICE).first().cloned()).await;
    let text = prompt.1["text"].as_str().unwrap_or_default().to_owned();
    assert!(
        text.contains("Which colour?") && text.contains("2. blue"),
        "{text}"
    );
    let blue = FakeTelegram::button_data(&prompt.1, "blue");
    w.telegram.press(ALICE, ALICE, prompt.0, &blue);
    eventually(WAIT, "the answer", || {
        t.sent_texts(ALICE)
            .contains(&"blue it is".to_owned())
            .then_some(())
    })
    .await;
    assert!(tool_results(&w)[0].contains("The person answered: blue"));

    w.telegram.dm(ALICE, "paint the shed");
    eventually(WAIT, "the second question", || {
        t.prompts(ALICE).get(1).cloned()
    })
    .await;
    w.telegram.dm(ALICE, "green");
    eventually(WAIT, "the second answer", || {
        t.sent_texts(ALICE)
            .contains(&"green then".to_owned())
            .then_some(())
    })
    .await;
    let results = tool_results(&w);
    assert!(
        results
            .last()
            .unwrap()
            .contains("The person answered: green"),
        "{results:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unanswered_question_times_out() {
    let w = World::new(
        &["TELEGRAM_ALLOW_ALL_USERS=true"],
        "agent:\n  clarify_timeout: 1\n",
    )
    .await;
    w.llm.push(ask_colour());
    w.llm.push(Reply::text("I'll pick for you"));
    let _d = w.start();
    w.telegram.dm(ALICE, "paint it");
    let replies = w.replies(ALICE, 2).await;
    assert_eq!(replies[1], "I'll pick for you");
    assert!(tool_results(&w)[0].contains("No answer came within 1 seconds"));
}
