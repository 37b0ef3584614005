//! Streamed answers, end to end: the fake model writes slowly, the fake Bot API sees one
//! message edited in place; `/stop` and `kill -9` in the middle of it.

mod common;

use std::time::Duration;

use common::*;
use hermes_testkit::eventually;
use hermes_testkit::llm::Reply;
use hermes_testkit::telegram::Call;

const INTERVAL: Duration = Duration::from_millis(400);

async fn streaming_world() -> World {
    World::new(
        &["TELEGRAM_ALLOW_ALL_USERS=true"],
        "streaming:\n  enabled: true\n  edit_interval: 0.4\n  buffer_threshold: 5\n",
    )
    .await
}

fn paced(text: &str, pieces: usize, every_ms: u64) -> Reply {
    Reply::Paced {
        text: text.to_owned(),
        pieces,
        every: Duration::from_millis(every_ms),
    }
}

/// Edits of one message, in order.
fn edits_of(w: &World, message_id: i64) -> Vec<Call> {
    w.telegram
        .calls("editMessageText")
        .into_iter()
        .filter(|c| c.params["message_id"].as_i64() == Some(message_id))
        .collect()
}

/// The id of the first message the bot sent to Alice.
async fn first_message(w: &World) -> i64 {
    let t = w.telegram.clone();
    eventually(WAIT, "the streamed message", || {
        t.calls("sendMessage")
            .first()
            .and_then(|c| c.params["_message_id"].as_i64())
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streamed_answer_is_one_message_edited_until_it_is_whole() {
    let w = streaming_world().await;
    let answer = "The quick brown fox jumps over the lazy dog, then keeps running far away.";
    w.llm.push(paced(answer, 10, 200));
    let _d = w.start();
    w.telegram.dm(ALICE, "tell me a story");
    let id = first_message(&w).await;
    let t = w.telegram.clone();
    let edits = eventually(WAIT, "the final edit", || {
        let edits = edits_of(&w, id);
        edits
            .last()
            .is_some_and(|e| visible(e.params["text"].as_str().unwrap_or_default()) == answer)
            .then_some(edits)
    })
    .await;
    settle().await;
    assert_eq!(t.calls("sendMessage").len(), 1, "one message, edited");
    assert!(
        edits.len() >= 2,
        "edited as it was written: {}",
        edits.len()
    );
    for pair in edits.windows(2) {
        let gap = pair[1].at.duration_since(pair[0].at);
        // The final edit follows the end of the answer at once; the others wait.
        if pair[1].params["text"]
            .as_str()
            .unwrap_or_default()
            .contains('▉')
        {
            assert!(
                gap >= INTERVAL - Duration::from_millis(50),
                "edits {gap:?} apart"
            );
        }
    }
    let first = t.calls("sendMessage")[0].params["text"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        first.ends_with('▉'),
        "the cursor while it is written: {first}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_mid_stream_marks_the_message_stopped() {
    let w = streaming_world().await;
    w.llm.push(paced(&"word ".repeat(60), 30, 200));
    let _d = w.start();
    w.telegram.dm(ALICE, "go on and on");
    let id = first_message(&w).await;
    w.telegram.dm(ALICE, "/stop");
    let t = w.telegram.clone();
    let last = eventually(WAIT, "the stopped mark", || {
        edits_of(&w, id)
            .into_iter()
            .filter_map(|e| e.params["text"].as_str().map(visible))
            .find(|text| text.contains("Stopped"))
    })
    .await;
    assert!(last.starts_with("word"), "{last}");
    assert!(!last.contains('▉'), "{last}");
    settle().await;
    assert_eq!(t.sent_texts(ALICE).len(), 1, "no separate stop message");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_mid_stream_is_finished_in_the_same_message() {
    let w = streaming_world().await;
    w.llm.push(paced(&"half ".repeat(60), 30, 200));
    let mut d = w.start();
    w.telegram.dm(ALICE, "a long answer please");
    let id = first_message(&w).await;
    eventually(WAIT, "an edit", || {
        (!edits_of(&w, id).is_empty()).then_some(())
    })
    .await;
    d.kill();
    drop(d);

    w.llm.push(Reply::text("The whole answer, written again."));
    let _again = w.start();
    let t = w.telegram.clone();
    eventually(WAIT, "the answer finished in place", || {
        edits_of(&w, id)
            .iter()
            .filter_map(|e| e.params["text"].as_str().map(visible))
            .any(|text| text == "The whole answer, written again.")
            .then_some(())
    })
    .await;
    settle().await;
    assert_eq!(t.calls("sendMessage").len(), 1, "never a second copy");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupted_stream_is_replaced_by_the_answer_to_both_messages() {
    let w = streaming_world().await;
    w.llm.push(paced(&"first ".repeat(60), 30, 200));
    w.llm.push(Reply::text("One answer to both."));
    let _d = w.start();
    w.telegram.dm(ALICE, "first question");
    let id = first_message(&w).await;
    w.telegram.dm(ALICE, "actually, this instead");
    let t = w.telegram.clone();
    eventually(WAIT, "the answer in the same message", || {
        edits_of(&w, id)
            .iter()
            .filter_map(|e| e.params["text"].as_str().map(visible))
            .any(|text| text == "One answer to both.")
            .then_some(())
    })
    .await;
    settle().await;
    assert_eq!(
        t.calls("sendMessage").len(),
        1,
        "the partial text was replaced"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streamed_answer_of_only_files_loses_its_cursor() {
    let w = streaming_world().await;
    let chart = w.home.dir.join("work").join("chart.png");
    std::fs::write(&chart, b"\x89PNG chart").unwrap();
    w.llm
        .push(paced(&format!("MEDIA:{}", chart.display()), 6, 150));
    let _d = w.start();
    w.telegram.dm(ALICE, "the chart please");
    let id = first_message(&w).await;
    let t = w.telegram.clone();
    eventually(WAIT, "the chart", || {
        (!t.sent_files(ALICE).is_empty()).then_some(())
    })
    .await;
    eventually(WAIT, "the cursor gone", || {
        edits_of(&w, id)
            .last()
            .and_then(|e| e.params["text"].as_str().map(visible))
            .filter(|text| !text.contains('▉'))
    })
    .await;
}
