//! Dangerous-command approvals end to end: prompts with buttons on the fake Telegram, decisions
//! by button and by command, timeouts, restarts, and who may decide.

mod common;

use std::path::PathBuf;
use std::time::Duration;

use common::*;
use hermes_testkit::eventually;
use hermes_testkit::llm::Reply;
use hermes_testkit::telegram::Fault;
use serde_json::Value;

/// A directory with a file in it, for commands to delete (in the working directory: the
/// rest of the home is hidden from commands).
fn victim(w: &World, name: &str) -> PathBuf {
    let dir = w.home.dir.join("work").join(name);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("precious.txt"), "data").unwrap();
    dir
}

/// The parameters of every edit of a message.
fn edits(w: &World, message_id: i64) -> Vec<Value> {
    w.telegram
        .calls("editMessageText")
        .into_iter()
        .filter(|c| c.params["message_id"].as_i64() == Some(message_id))
        .map(|c| c.params)
        .collect()
}

async fn edit_containing(w: &World, message_id: i64, needle: &str) -> String {
    let w2 = (w.telegram.clone(), needle.to_owned());
    eventually(WAIT, &format!("an edit with {needle:?}"), || {
        w2.0.calls("editMessageText")
            .into_iter()
            .filter(|c| c.params["message_id"].as_i64() == Some(message_id))
            .filter_map(|c| c.params["text"].as_str().map(str::to_owned))
            .find(|t| t.contains(&w2.1))
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approve_by_button_runs_exactly_the_shown_command() {
    let w = World::allow_all().await;
    let target = victim(&w, "victim");
    let command = format!("rm -rf {}", target.display());
    w.llm.push(Reply::terminal(&command));
    w.llm.push(Reply::text("deleted"));
    let _d = w.start();
    w.telegram.dm(ALICE, "clean up");
    let p = prompt(&w, ALICE, 1).await;
    let text = p.1["text"].as_str().unwrap();
    assert!(
        text.contains(&command) && text.contains("recursive delete"),
        "{text}"
    );
    assert!(target.exists(), "nothing runs before the decision");

    press(&w, ALICE, ALICE, &p, "Allow once");
    assert_eq!(w.replies(ALICE, 2).await[1], "deleted");
    assert!(!target.exists());
    assert!(tool_results(&w)[0].starts_with("exit code: 0"));
    let acks = w.telegram.calls("answerCallbackQuery");
    // The presser is told the outcome the prompt and the model were told.
    assert_eq!(acks[0].params["text"], "✅ Allowed once by User4242.");
    edit_containing(&w, p.0, "Allowed once by User4242").await;
    let edited = edits(&w, p.0);
    assert!(
        edited.iter().all(|e| e.get("reply_markup").is_none()),
        "the edit drops the buttons: {edited:?}"
    );
    assert!(
        edited[0]["text"].as_str().unwrap().contains(&command),
        "the edited prompt still shows the command"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approve_by_text_command_runs_the_command() {
    let w = World::allow_all().await;
    let target = victim(&w, "victim");
    w.llm
        .push(Reply::terminal(&format!("rm -rf {}", target.display())));
    w.llm.push(Reply::text("done"));
    let _d = w.start();
    w.telegram.dm(ALICE, "clean up");
    prompt(&w, ALICE, 1).await;
    w.telegram.dm(ALICE, "/approve");
    let replies = w.replies(ALICE, 3).await;
    assert!(
        replies.contains(&"✅ Allowed once by User4242.".to_string()),
        "{replies:?}"
    );
    assert!(replies.contains(&"done".to_string()), "{replies:?}");
    assert!(!target.exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn always_allow_persists_across_a_restart_and_can_be_revoked() {
    let w = World::allow_all().await;
    let first = victim(&w, "first");
    let second = victim(&w, "second");
    w.llm
        .push(Reply::terminal(&format!("rm -rf {}", first.display())));
    w.llm.push(Reply::text("one"));
    let mut d = w.start();
    w.telegram.dm(ALICE, "delete the first");
    let p = prompt(&w, ALICE, 1).await;
    press(&w, ALICE, ALICE, &p, "Always allow");
    assert_eq!(w.replies(ALICE, 2).await[1], "one");
    d.terminate();

    let list = std::process::Command::new(BIN)
        .args(["approvals", "list", "--home"])
        .arg(&w.home.dir)
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&list.stdout).contains("rm-recursive"));

    w.llm
        .push(Reply::terminal(&format!("rm -rf {}", second.display())));
    w.llm.push(Reply::text("two"));
    let _d = w.start();
    w.telegram.dm(ALICE, "delete the second");
    let replies = w.replies(ALICE, 3).await;
    assert_eq!(replies[2], "two");
    assert!(!second.exists());
    assert_eq!(w.telegram.prompts(ALICE).len(), 1, "no second prompt");

    let revoke = std::process::Command::new(BIN)
        .args(["approvals", "revoke", "rm-recursive", "--home"])
        .arg(&w.home.dir)
        .output()
        .unwrap();
    assert!(revoke.status.success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deny_by_button_tells_the_model_and_runs_nothing() {
    let w = World::allow_all().await;
    let target = victim(&w, "victim");
    w.llm
        .push(Reply::terminal(&format!("rm -rf {}", target.display())));
    w.llm.push(Reply::text("ok, I left it alone"));
    let _d = w.start();
    w.telegram.dm(ALICE, "clean up");
    let p = prompt(&w, ALICE, 1).await;
    press(&w, ALICE, ALICE, &p, "Deny");
    assert_eq!(w.replies(ALICE, 2).await[1], "ok, I left it alone");
    assert!(target.exists());
    assert!(
        tool_results(&w)[0].contains("denied"),
        "{:?}",
        tool_results(&w)
    );
    edit_containing(&w, p.0, "Denied by User4242").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silence_denies_after_the_timeout() {
    let w = World::new(
        &["TELEGRAM_ALLOW_ALL_USERS=true"],
        "approvals:\n  timeout: 2\n",
    )
    .await;
    let target = victim(&w, "victim");
    w.llm
        .push(Reply::terminal(&format!("rm -rf {}", target.display())));
    w.llm.push(Reply::text("nobody answered, so I did nothing"));
    let _d = w.start();
    w.telegram.dm(ALICE, "clean up");
    let p = prompt(&w, ALICE, 1).await;
    assert!(p.1["text"].as_str().unwrap().contains("2 seconds"));
    assert_eq!(
        w.replies(ALICE, 2).await[1],
        "nobody answered, so I did nothing"
    );
    assert!(target.exists());
    assert!(tool_results(&w)[0].contains("NOT run"));
    edit_containing(&w, p.0, "Expired").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_press_from_someone_not_allowed_is_refused() {
    let w = World::new(&["TELEGRAM_ALLOWED_USERS=4242"], "").await;
    let group = -100_555;
    let mallory = 666;
    let target = victim(&w, "victim");
    w.llm
        .push(Reply::terminal(&format!("rm -rf {}", target.display())));
    w.llm.push(Reply::text("done"));
    let _d = w.start();
    w.telegram.group(group, ALICE, "clean up", true);
    let p = prompt(&w, group, 1).await;
    press(&w, group, mallory, &p, "Allow once");
    let t = w.telegram.clone();
    let ack = eventually(WAIT, "the refusal", || {
        t.calls("answerCallbackQuery").first().cloned()
    })
    .await;
    assert!(ack.params["text"].as_str().unwrap().contains("not allowed"));
    settle().await;
    assert!(target.exists(), "Mallory's press did nothing");

    press(&w, group, ALICE, &p, "Allow once");
    assert_eq!(w.replies(group, 2).await[1], "done");
    assert!(!target.exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn allowing_once_never_covers_another_command() {
    let w = World::allow_all().await;
    let first = victim(&w, "first");
    let second = victim(&w, "second");
    w.llm
        .push(Reply::terminal(&format!("rm -rf {}", first.display())));
    w.llm
        .push(Reply::terminal(&format!("rm -rf {}", second.display())));
    w.llm.push(Reply::text("both handled"));
    let _d = w.start();
    w.telegram.dm(ALICE, "delete both");
    let p1 = prompt(&w, ALICE, 1).await;
    press(&w, ALICE, ALICE, &p1, "Allow once");
    let p2 = prompt(&w, ALICE, 2).await;
    assert!(!first.exists());
    assert!(
        second.exists(),
        "the second command waits for its own decision"
    );
    assert!(p2.1["text"].as_str().unwrap().contains("second"));
    press(&w, ALICE, ALICE, &p2, "Deny");
    let t = w.telegram.clone();
    eventually(WAIT, "the answer", || {
        t.sent_texts(ALICE)
            .contains(&"both handled".to_string())
            .then_some(())
    })
    .await;
    assert!(second.exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn allowing_for_the_session_covers_that_pattern_only() {
    let w = World::allow_all().await;
    let first = victim(&w, "first");
    let second = victim(&w, "second");
    let file = w.home.dir.join("open.txt");
    std::fs::write(&file, "x").unwrap();
    w.llm
        .push(Reply::terminal(&format!("rm -rf {}", first.display())));
    w.llm
        .push(Reply::terminal(&format!("rm -rf {}", second.display())));
    w.llm
        .push(Reply::terminal(&format!("chmod 777 {}", file.display())));
    w.llm.push(Reply::text("finished"));
    let _d = w.start();
    w.telegram.dm(ALICE, "tidy up");
    let p1 = prompt(&w, ALICE, 1).await;
    press(&w, ALICE, ALICE, &p1, "Allow for this session");
    let p2 = prompt(&w, ALICE, 2).await;
    assert!(
        !first.exists() && !second.exists(),
        "the session approval covered the second rm -rf"
    );
    assert!(
        p2.1["text"].as_str().unwrap().contains("chmod 777"),
        "a different pattern asks again"
    );
    press(&w, ALICE, ALICE, &p2, "Deny");
    let t = w.telegram.clone();
    eventually(WAIT, "the answer", || {
        t.sent_texts(ALICE)
            .contains(&"finished".to_string())
            .then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_while_waiting_for_approval_denies_it() {
    let w = World::allow_all().await;
    let target = victim(&w, "victim");
    w.llm
        .push(Reply::terminal(&format!("rm -rf {}", target.display())));
    let _d = w.start();
    w.telegram.dm(ALICE, "clean up");
    let p = prompt(&w, ALICE, 1).await;
    w.telegram.dm(ALICE, "/stop");
    let replies = w.replies(ALICE, 2).await;
    assert_eq!(replies[1], "⏹ Stopped.");
    edit_containing(&w, p.0, "Cancelled").await;
    press(&w, ALICE, ALICE, &p, "Allow once");
    settle().await;
    assert!(target.exists(), "a late press runs nothing");
    assert_eq!(w.llm.requests().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_expires_pending_approvals_and_runs_nothing() {
    let w = World::allow_all().await;
    let target = victim(&w, "victim");
    w.llm
        .push(Reply::terminal(&format!("rm -rf {}", target.display())));
    let mut first = w.start();
    w.telegram.dm(ALICE, "clean up");
    let p = prompt(&w, ALICE, 1).await;
    first.kill();

    w.llm.push(Reply::text("I did not delete anything"));
    let _second = w.start();
    // Said by editing the prompt, or in a new message when the crash came before the
    // prompt's message id was recorded.
    let (t, prompt_id) = (w.telegram.clone(), p.0);
    eventually(WAIT, "the restart notice", || {
        let edited = t.calls("editMessageText").into_iter().any(|c| {
            c.params["message_id"].as_i64() == Some(prompt_id)
                && c.params["text"]
                    .as_str()
                    .unwrap_or_default()
                    .contains("restarted")
        });
        (edited || t.sent_texts(ALICE).iter().any(|m| m.contains("restarted"))).then_some(())
    })
    .await;
    let t = w.telegram.clone();
    eventually(WAIT, "the re-run answer", || {
        t.sent_texts(ALICE)
            .contains(&"I did not delete anything".to_string())
            .then_some(())
    })
    .await;
    press(&w, ALICE, ALICE, &p, "Allow once");
    settle().await;
    assert!(target.exists());
    assert_eq!(
        w.telegram.prompts(ALICE).len(),
        1,
        "the stale prompt is never sent again"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writing_a_dangerous_command_into_a_background_shell_asks_too() {
    let w = World::allow_all().await;
    let target = victim(&w, "victim");
    w.llm.push(Reply::ToolCall {
        name: "terminal".into(),
        arguments: serde_json::json!({"command": "bash", "background": true}),
    });
    w.llm.push(Reply::text("shell started"));
    let _d = w.start();
    w.telegram.dm(ALICE, "open a shell");
    w.replies(ALICE, 1).await;
    let text = w.llm.requests()[1]["messages"].to_string();
    let start = text.find("proc_").unwrap();
    let id = text[start..start + 17].to_owned();

    // Split across two writes: `r`, then `m -rf …` and the newline that runs it.
    w.llm.push(Reply::ToolCall {
        name: "process".into(),
        arguments: serde_json::json!({"action": "write", "id": id, "data": "r"}),
    });
    w.llm.push(Reply::ToolCall {
        name: "process".into(),
        arguments: serde_json::json!({"action": "write", "id": id, "data": format!("m -rf {}\n", target.display())}),
    });
    w.llm.push(Reply::text("it was refused"));
    w.telegram.dm(ALICE, "now delete it through the shell");
    let p = prompt(&w, ALICE, 1).await;
    press(&w, ALICE, ALICE, &p, "Deny");
    let t = w.telegram.clone();
    eventually(WAIT, "the answer", || {
        t.sent_texts(ALICE)
            .contains(&"it was refused".to_string())
            .then_some(())
    })
    .await;
    assert!(target.exists());
    w.telegram.dm(ALICE, "/stop all");
}

/// Alice's colleague, allowed too.
const BOB: i64 = 5151;

/// Alice and Bob both allowed, in a group that gets several messages and edits: Telegram's
/// group budget (one every three seconds) is not what these tests are about.
async fn alice_and_bob() -> World {
    World::new(
        &["TELEGRAM_ALLOWED_USERS=4242,5151"],
        "delivery:\n  rate_per_second: 10\n  burst: 5\n",
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_text_command_replying_to_a_prompt_acts_on_that_prompt() {
    let bob = BOB;
    let w = alice_and_bob().await;
    let group = -100_889;
    let alices = victim(&w, "alices");
    let bobs = victim(&w, "bobs");
    w.llm
        .push(Reply::terminal(&format!("rm -rf {}", alices.display())));
    w.llm
        .push(Reply::terminal(&format!("rm -rf {}", bobs.display())));
    w.llm.push(Reply::text("alice's turn ended"));
    let _d = w.start();
    w.telegram.group(group, ALICE, "delete mine", true);
    let alices_prompt = prompt(&w, group, 1).await;
    w.telegram.group(group, bob, "delete mine too", true);
    let bobs_prompt = prompt(&w, group, 2).await;

    // Bob answers Alice's prompt: it is hers to decide, so he is told so and it waits on.
    w.telegram
        .group_reply_to_bot(group, bob, "/deny", alices_prompt.0);
    let t = w.telegram.clone();
    eventually(WAIT, "Bob told whose request it is", || {
        t.sent_texts(group)
            .iter()
            .any(|s| s.contains(&format!("Only User{ALICE} can decide that request")))
            .then_some(())
    })
    .await;
    settle().await;
    assert!(
        edits(&w, alices_prompt.0).is_empty(),
        "Bob's reply decided Alice's request"
    );

    // Alice answers her own prompt by replying to it: her request is decided, Bob's waits.
    w.telegram
        .group_reply_to_bot(group, ALICE, "/deny", alices_prompt.0);
    eventually(WAIT, "Alice's turn to end", || {
        t.sent_texts(group)
            .contains(&"alice's turn ended".to_string())
            .then_some(())
    })
    .await;
    settle().await;
    assert!(alices.exists() && bobs.exists());
    assert!(
        !edits(&w, alices_prompt.0).is_empty(),
        "Alice's prompt shows the outcome"
    );
    assert!(
        edits(&w, bobs_prompt.0).is_empty(),
        "Bob's request still waits"
    );

    // A reply to something that is not a waiting prompt decides nothing.
    w.telegram
        .group_reply_to_bot(group, bob, "/approve", alices_prompt.0);
    eventually(WAIT, "the refusal", || {
        t.sent_texts(group)
            .iter()
            .any(|s| s.contains("not a request waiting for approval"))
            .then_some(())
    })
    .await;
    settle().await;
    assert!(bobs.exists(), "a stale reply approved another request");
    w.telegram.group(group, bob, "/stop", true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn text_commands_act_on_the_senders_own_session_only() {
    let bob = BOB;
    let w = alice_and_bob().await;
    let group = -100_888;
    let first = victim(&w, "first");
    let second = victim(&w, "second");
    w.llm
        .push(Reply::terminal(&format!("rm -rf {}", first.display())));
    let _d = w.start();
    w.telegram.group(group, ALICE, "delete the first", true);
    prompt(&w, group, 1).await;

    // Bob has nothing waiting: his /approve must not approve Alice's request.
    w.telegram.group(group, bob, "/approve", true);
    let t = w.telegram.clone();
    eventually(WAIT, "Bob is told nothing of his waits", || {
        t.sent_texts(group)
            .iter()
            .any(|s| s.contains("None of your commands is waiting"))
            .then_some(())
    })
    .await;
    settle().await;
    assert!(first.exists(), "Bob's /approve decided Alice's request");

    w.llm
        .push(Reply::terminal(&format!("rm -rf {}", second.display())));
    w.llm.push(Reply::text("first refused"));
    w.llm.push(Reply::text("second done"));
    w.telegram.group(group, bob, "delete the second", true);
    prompt(&w, group, 2).await;
    w.telegram.group(group, ALICE, "/deny not that one", true);
    eventually(WAIT, "Alice's answer", || {
        t.sent_texts(group)
            .contains(&"first refused".to_string())
            .then_some(())
    })
    .await;
    assert!(first.exists() && second.exists());
    w.telegram.group(group, bob, "/approve", true);
    eventually(WAIT, "Bob's deletion", || (!second.exists()).then_some(())).await;
    assert!(first.exists(), "Alice's denied request never runs");
    let requests = w.llm.requests();
    assert!(
        requests
            .iter()
            .any(|r| r["messages"].to_string().contains("not that one")),
        "the reason reaches the model"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approvals_off_runs_dangerous_commands_without_asking() {
    let w = World::new(
        &["TELEGRAM_ALLOW_ALL_USERS=true"],
        "approvals:\n  mode: off\n",
    )
    .await;
    let target = victim(&w, "victim");
    w.llm
        .push(Reply::terminal(&format!("rm -rf {}", target.display())));
    w.llm.push(Reply::text("gone"));
    let d = w.start();
    w.telegram.dm(ALICE, "delete it");
    assert_eq!(w.replies(ALICE, 1).await[0], "gone");
    assert!(!target.exists());
    assert!(w.telegram.prompts(ALICE).is_empty());
    assert!(
        d.log_text().contains("approvals.mode is off"),
        "the operator is warned"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupting_message_denies_a_pending_approval() {
    let w = World::allow_all().await;
    let target = victim(&w, "victim");
    w.llm
        .push(Reply::terminal(&format!("rm -rf {}", target.display())));
    w.llm.push(Reply::text("ok, something else then"));
    let _d = w.start();
    w.telegram.dm(ALICE, "clean up");
    let p = prompt(&w, ALICE, 1).await;
    w.telegram.dm(ALICE, "wait, don't delete anything");
    assert_eq!(w.replies(ALICE, 2).await[1], "ok, something else then");
    edit_containing(&w, p.0, "Cancelled").await;
    assert!(target.exists());
    let last = w.llm.requests().last().unwrap()["messages"].to_string();
    assert!(
        last.contains("NOT run") && last.contains("don't delete anything"),
        "{last}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_press_is_acknowledged_at_once_even_when_the_chats_budget_is_spent() {
    // One message every twenty seconds: the prompt takes the only token.
    let w = World::new(
        &["TELEGRAM_ALLOW_ALL_USERS=true"],
        "delivery:\n  rate_per_second: 0.05\n  burst: 1\n",
    )
    .await;
    let target = victim(&w, "budget");
    w.llm
        .push(Reply::terminal(&format!("rm -rf {}", target.display())));
    w.llm.push(Reply::text("done"));
    let _d = w.start();
    w.telegram.dm(ALICE, "clean up");
    let p = prompt(&w, ALICE, 1).await;
    let pressed = std::time::Instant::now();
    press(&w, ALICE, ALICE, &p, "Allow once");
    let t = w.telegram.clone();
    let ack = eventually(WAIT, "the press to be answered", || {
        t.calls("answerCallbackQuery").first().cloned()
    })
    .await;
    let waited = ack.at.duration_since(pressed);
    assert!(
        waited < Duration::from_secs(3),
        "the press was answered after {waited:?}; the platform wants it within 3 s"
    );
    eventually(WAIT, "the approved command", || {
        (!target.exists()).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prompt_decided_before_it_went_out_never_shows_live_buttons() {
    let w = World::allow_all().await;
    let target = victim(&w, "early");
    w.llm
        .push(Reply::terminal(&format!("rm -rf {}", target.display())));
    w.llm.push(Reply::text("done"));
    // Telegram holds the prompt back for a moment.
    w.telegram.fail_next("sendMessage", Fault::RetryAfter(3));
    let _d = w.start();
    w.telegram.dm(ALICE, "clean up");
    let t = w.telegram.clone();
    eventually(WAIT, "the held-back prompt", || {
        t.calls("sendMessage").first().cloned()
    })
    .await;
    // A text approval cannot act on a prompt nobody has seen yet (its refusal queues
    // behind the prompt)…
    w.telegram.dm(ALICE, "/approve");
    settle().await;
    assert!(target.exists(), "an unseen prompt was approved");
    // …but /stop decides it while it waits to go out.
    w.telegram.dm(ALICE, "/stop");
    eventually(WAIT, "the refusal", || {
        t.sent_texts(ALICE)
            .iter()
            .any(|s| s.contains("None of your commands is waiting"))
            .then_some(())
    })
    .await;
    settle().await;
    assert!(target.exists(), "a stopped request ran");
    assert!(
        w.telegram.prompts(ALICE).is_empty(),
        "a decided prompt went out with live buttons"
    );
    let shown = w
        .telegram
        .calls("sendMessage")
        .into_iter()
        .find(|c| {
            c.params["_ok"] == true
                && visible(c.params["text"].as_str().unwrap_or("")).contains("needs your OK")
        })
        .expect("the prompt was sent");
    assert!(
        visible(shown.params["text"].as_str().unwrap()).contains("Cancelled"),
        "the prompt went out showing its outcome: {}",
        shown.params["text"]
    );
}

/// Only allowed people decide, only in the chat of the prompt: a group member who is not
/// allowed cannot decide by `/approve`, `/deny`, a message or a button, and a press of the
/// prompt's button sent from another chat is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn strangers_and_other_chats_cannot_decide() {
    let w = World::new(
        &["TELEGRAM_ALLOWED_USERS=4242"],
        "delivery:\n  rate_per_second: 10\n  burst: 5\n",
    )
    .await;
    let group = -100_777;
    let mallory = 666;
    let target = victim(&w, "victim");
    w.llm
        .push(Reply::terminal(&format!("rm -rf {}", target.display())));
    w.llm.push(Reply::text("done"));
    let _d = w.start();
    w.telegram.group(group, ALICE, "clean up", true);
    let p = prompt(&w, group, 1).await;

    w.telegram.group(group, mallory, "/approve", true);
    w.telegram.group(group, mallory, "/approve always", true);
    w.telegram.group(group, mallory, "yes, run it", true);
    press(&w, group, mallory, &p, "Allow once");
    // Alice's own press, but arriving from her DM instead of the group.
    press(&w, ALICE, ALICE, &p, "Always allow");
    let t = w.telegram.clone();
    eventually(WAIT, "both presses refused", || {
        (t.calls("answerCallbackQuery").len() >= 2).then_some(())
    })
    .await;
    settle().await;
    assert!(target.exists(), "someone other than Alice decided");
    let acks: Vec<String> = w
        .telegram
        .calls("answerCallbackQuery")
        .iter()
        .map(|c| c.params["text"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert!(acks.iter().any(|a| a.contains("not allowed")), "{acks:?}");
    assert!(acks.iter().any(|a| a.contains("another chat")), "{acks:?}");
    assert_eq!(
        w.llm.requests().len(),
        1,
        "Mallory's messages never reach the agent"
    );

    press(&w, group, ALICE, &p, "Allow once");
    eventually(WAIT, "the approved run", || {
        (!target.exists()).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prompt_that_cannot_be_recorded_leaves_no_live_buttons() {
    let w = World::allow_all().await;
    let target = victim(&w, "kept");
    let _d = w.start();
    w.telegram.dm(ALICE, "warm up");
    w.replies(ALICE, 1).await;
    // Tying a request to its prompt fails, as a full disk would make it.
    let db = rusqlite::Connection::open(w.home.dir.join("gateway.db")).unwrap();
    db.busy_timeout(Duration::from_secs(10)).unwrap();
    db.execute_batch(
        "CREATE TRIGGER refuse_prompt BEFORE UPDATE OF prompt_outbox_id ON approvals
         BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END;",
    )
    .unwrap();
    w.llm
        .push(Reply::terminal(&format!("rm -rf {}", target.display())));
    w.llm.push(Reply::text("could not ask"));
    w.telegram.dm(ALICE, "delete it");
    let t = w.telegram.clone();
    eventually(WAIT, "the turn's answer", || {
        t.sent_texts(ALICE)
            .contains(&"could not ask".to_string())
            .then_some(())
    })
    .await;
    settle().await;
    assert!(target.exists(), "the command ran");
    assert!(
        tool_results(&w).iter().any(|r| r.contains("NOT run")),
        "{:?}",
        tool_results(&w)
    );
    // The prompt says what happened, and any copy of it that went out with buttons was
    // edited since (an edit without buttons takes them away).
    let texts: Vec<String> = ["sendMessage", "editMessageText"]
        .iter()
        .flat_map(|m| w.telegram.calls(m))
        .filter_map(|c| c.params["text"].as_str().map(str::to_owned))
        .collect();
    assert!(
        texts.iter().any(|t| t.contains("could not be recorded")),
        "{texts:?}"
    );
    for (message_id, _) in w.telegram.prompts(ALICE) {
        let edits = edits(&w, message_id);
        assert!(
            edits.iter().any(|e| e.get("reply_markup").is_none()),
            "prompt {message_id} kept its buttons"
        );
    }
}

/// With no admins listed, a member's "Always allow" in a group stands for their own
/// commands: Alice's next delete runs without asking, Bob's asks.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_members_standing_approval_covers_only_their_own_commands() {
    let w = alice_and_bob().await;
    let group = -100_887;
    let (first, second, bobs) = (
        victim(&w, "first"),
        victim(&w, "second"),
        victim(&w, "bobs"),
    );
    for (dir, answer) in [
        (&first, "first done"),
        (&second, "second done"),
        (&bobs, "bob's done"),
    ] {
        w.llm
            .push(Reply::terminal(&format!("rm -rf {}", dir.display())));
        w.llm.push(Reply::text(answer));
    }
    let _d = w.start();
    let t = w.telegram.clone();
    let said = |text: &'static str| {
        let t = t.clone();
        move || t.sent_texts(group).iter().any(|s| s == text).then_some(())
    };
    w.telegram.group(group, ALICE, "delete the first", true);
    let alices = prompt(&w, group, 1).await;
    press(&w, group, ALICE, &alices, "Always allow");
    eventually(WAIT, "Alice's first turn", said("first done")).await;
    w.telegram.group(group, ALICE, "delete the second", true);
    eventually(WAIT, "Alice's second turn", said("second done")).await;
    assert!(!second.exists(), "Alice's standing approval covers her");
    assert_eq!(t.prompts(group).len(), 1, "Alice was not asked again");

    w.telegram.group(group, BOB, "delete mine", true);
    prompt(&w, group, 2).await;
    settle().await;
    assert!(bobs.exists(), "Alice's standing approval covered Bob");
}

/// A stop while a command waits for approval does not wait out the 30 s drain (no press
/// can arrive during a stop): the prompt says the gateway restarts, and after the start
/// the turn runs again and asks again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_while_an_approval_waits_is_quick_and_the_turn_asks_again_after_the_start() {
    let w = World::allow_all().await;
    let target = victim(&w, "later");
    w.llm
        .push(Reply::terminal(&format!("rm -rf {}", target.display())));
    let mut d = w.start();
    w.telegram.dm(ALICE, "clean up");
    let first = prompt(&w, ALICE, 1).await;
    let stopping = std::time::Instant::now();
    d.terminate();
    let took = stopping.elapsed();
    assert!(took < Duration::from_secs(10), "the stop took {took:?}");
    edit_containing(&w, first.0, "restarting").await;
    assert!(target.exists());

    w.llm
        .push(Reply::terminal(&format!("rm -rf {}", target.display())));
    w.llm.push(Reply::text("done"));
    let _again = w.start();
    let second = prompt(&w, ALICE, 2).await;
    press(&w, ALICE, ALICE, &second, "Allow once");
    eventually(WAIT, "the command, after the start", || {
        (!target.exists()).then_some(())
    })
    .await;
}
