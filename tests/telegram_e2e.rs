//! End to end on Telegram: the real daemon binary, teloxide against the fake Bot API, the
//! real LLM client against the fake LLM. Every wait is bounded.

mod common;

use std::time::Duration;

use common::*;
use hermes_testkit::conformance::PlatformFake;
use hermes_testkit::daemon::Daemon;
use hermes_testkit::eventually;
use hermes_testkit::llm::{Reply, last_user_text};
use hermes_testkit::reset::When;
use hermes_testkit::telegram::Fault;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_direct_message_gets_the_models_answer() {
    let w = World::allow_all().await;
    w.llm.push(Reply::text("Hello **Alice**!"));
    let _d = w.start();
    w.telegram.dm(ALICE, "hi there");
    let replies = w.replies(ALICE, 1).await;
    assert_eq!(replies[0], "Hello <b>Alice</b>!");
    let send = &w.telegram.calls("sendMessage")[0];
    assert_eq!(send.params["parse_mode"], "HTML");
    assert_eq!(last_user_text(&w.llm.requests()[0]), "hi there");
    assert!(
        !w.telegram.calls("sendChatAction").is_empty(),
        "typing was shown while the turn ran"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typing_is_refreshed_every_four_seconds_while_a_long_turn_runs() {
    let w = World::allow_all().await;
    w.llm.push(Reply::Delayed(
        Duration::from_millis(4600),
        Box::new(Reply::text("slow answer")),
    ));
    let _d = w.start();
    w.telegram.dm(ALICE, "take your time");
    assert_eq!(w.replies(ALICE, 1).await[0], "slow answer");
    let typing = w.telegram.calls("sendChatAction");
    assert!(
        typing.len() >= 2,
        "typing was refreshed: {} actions",
        typing.len()
    );
    assert_eq!(typing[0].params["action"], "typing");
    let gap = typing[1].at.duration_since(typing[0].at);
    assert!(
        gap >= Duration::from_millis(3500),
        "not sent more often than needed: {gap:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_messages_are_answered_only_when_addressed() {
    let w = World::allow_all().await;
    let _d = w.start();
    let group = -100_777;
    w.telegram
        .group(group, ALICE, "chatting among ourselves", false);
    w.telegram.group(group, ALICE, "what is up?", true);
    let replies = w.replies(group, 1).await;
    assert_eq!(replies[0], "echo: what is up?");
    let bot_message = w.telegram.calls("sendMessage")[0].params.clone();
    // The answer replies to the mentioned message (the second one the fake created).
    assert_eq!(bot_message["reply_parameters"]["message_id"], 5002);
    let answer_id = bot_message["_message_id"]
        .as_i64()
        .expect("the bot's message id");
    w.telegram
        .group_reply_to_bot(group, ALICE, "and a follow-up", answer_id);
    let replies = w.replies(group, 2).await;
    assert_eq!(replies[1], "echo: and a follow-up");
    settle().await;
    assert_eq!(
        w.llm.requests().len(),
        2,
        "the unaddressed message never reached the model"
    );
}

/// With three codes waiting, a fourth stranger is told to try later once, not once per
/// message: writing again and again does not make the bot answer again and again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stranger_turned_away_is_told_so_once() {
    let w = World::new(&["TELEGRAM_ALLOWED_USERS=1"], "").await;
    let _d = w.start();
    for stranger in [601, 602, 603] {
        w.telegram.dm(stranger, "let me in");
        assert!(w.replies(stranger, 1).await[0].contains("pairing code"));
    }
    for n in 0..4 {
        w.telegram.dm(604, &format!("let me in {n}"));
    }
    let told = w.replies(604, 1).await;
    assert!(told[0].contains("Too many pairing requests"), "{told:?}");
    // The owner last: once answered, the fourth stranger's messages were all handled.
    w.telegram.dm(1, "hello");
    w.replies(1, 1).await;
    settle().await;
    assert_eq!(w.telegram.sent_texts(604).len(), 1, "told once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_person_gets_a_pairing_code_and_the_owner_can_approve_it() {
    let w = World::new(&["TELEGRAM_ALLOWED_USERS=1"], "").await;
    let _d = w.start();
    let stranger = 555;
    w.telegram.dm(stranger, "let me in");
    let reply = w.replies(stranger, 1).await.remove(0);
    assert!(reply.contains("pairing code"), "{reply}");
    let code = reply
        .split("<code>")
        .nth(1)
        .and_then(|r| r.split("</code>").next())
        .expect("code in <code>")
        .to_owned();
    assert_eq!(code.len(), 8);
    settle().await;
    assert!(
        w.llm.requests().is_empty(),
        "nothing from a stranger reaches the model"
    );

    w.home.approve_pairing(BIN, "telegram", &code);
    w.telegram.dm(stranger, "now?");
    let replies = w.replies(stranger, 2).await;
    assert_eq!(replies[1], "echo: now?");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_reply_is_split_under_telegrams_limit_with_code_blocks_intact() {
    let w = World::allow_all().await;
    let code: String = (0..400)
        .map(|i| format!("println!(\"line {i}\");\n"))
        .collect();
    let long = format!("Here is the program:\n\n```rust\n{code}```\n\nThat's all.");
    w.llm.push(Reply::text(long));
    let _d = w.start();
    w.telegram.dm(ALICE, "write a long program");
    let t = w.telegram.clone();
    let sent = eventually(WAIT, "the last chunk", || {
        let s = t.sent_texts(ALICE);
        s.last()
            .is_some_and(|l| l.contains("That's all."))
            .then_some(s)
    })
    .await;
    assert!(sent.len() >= 3, "{} chunks", sent.len());
    for chunk in &sent {
        // Telegram counts the limit after entity parsing: the visible text.
        assert!(
            visible(chunk).encode_utf16().count() <= 4096,
            "{} units",
            visible(chunk).encode_utf16().count()
        );
        assert_eq!(
            chunk.matches("<pre>").count(),
            chunk.matches("</pre>").count(),
            "{chunk}"
        );
    }
    assert!(sent.concat().contains("line 0") && sent.concat().contains("line 399"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rejected_markup_falls_back_to_plain_text() {
    let w = World::allow_all().await;
    w.llm.push(Reply::text("Some **bold** claim"));
    w.telegram.fail_next("sendMessage", Fault::RejectMarkup);
    let _d = w.start();
    w.telegram.dm(ALICE, "hi");
    let replies = w.replies(ALICE, 1).await;
    assert_eq!(replies[0], "Some **bold** claim");
    let calls = w.telegram.calls("sendMessage");
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[0].params["parse_mode"], "HTML");
    assert!(calls[1].params.get("parse_mode").is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_call_runs_and_its_output_goes_back_to_the_model_without_secrets() {
    let w = World::allow_all().await;
    w.llm.push(Reply::terminal("echo tool-says-hi; env"));
    w.llm.push(Reply::text("The command said hi."));
    let _d = Daemon::start(
        BIN,
        &w.home,
        &[
            ("OPENAI_API_KEY", "sk-process-secret"),
            ("HARMLESS_VAR", "visible"),
        ],
    );
    w.telegram.dm(ALICE, "run something");
    let replies = w.replies(ALICE, 1).await;
    assert_eq!(replies[0], "The command said hi.");
    let requests = w.llm.requests();
    assert_eq!(requests.len(), 2);
    let tool_message = requests[1]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .unwrap()
        .clone();
    let output = tool_message["content"].as_str().unwrap();
    assert!(output.starts_with("exit code: 0"), "{output}");
    assert!(output.contains("tool-says-hi"));
    assert!(output.contains("HARMLESS_VAR=visible"));
    assert!(
        !output.contains("sk-process-secret"),
        "provider keys never reach child processes"
    );
    assert!(
        !output.contains("TEST-TOKEN"),
        "platform tokens never reach child processes"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_message_interrupts_the_first_turn_and_only_the_merged_answer_is_sent() {
    let w = World::allow_all().await;
    w.llm.push(Reply::Delayed(
        Duration::from_secs(30),
        Box::new(Reply::text("too late")),
    ));
    w.llm.push(Reply::text("answer to both"));
    let _d = w.start();
    w.telegram.dm(ALICE, "first question");
    let l = w.llm.clone();
    eventually(WAIT, "the first LLM call", || {
        (!l.requests().is_empty()).then_some(())
    })
    .await;
    w.telegram.dm(ALICE, "actually, this instead");
    let replies = w.replies(ALICE, 1).await;
    assert_eq!(replies, vec!["answer to both".to_string()]);
    let second = &w.llm.requests()[1];
    let text = second["messages"].to_string();
    assert!(text.contains("first question") && text.contains("actually, this instead"));
    eventually(WAIT, "the first stream to be dropped", || {
        (l.dropped_streams() >= 1).then_some(())
    })
    .await;
    settle().await;
    assert_eq!(w.telegram.sent_texts(ALICE).len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_kills_a_running_command_at_once() {
    let w = World::allow_all().await;
    let _d = w.start();
    let group = alice_runs_a_long_command(&w).await;
    let stopped_at = std::time::Instant::now();
    w.telegram.dm(ALICE, "/stop");
    let replies = w.replies(ALICE, 1).await;
    assert_eq!(replies[0], "⏹ Stopped.");
    assert!(stopped_at.elapsed() < Duration::from_secs(5));
    eventually(WAIT, "the process group to be gone", || {
        (!group_alive(group)).then_some(())
    })
    .await;
    assert_eq!(
        w.llm.requests().len(),
        1,
        "no further model call after /stop"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retry_after_from_telegram_is_honoured() {
    let w = World::allow_all().await;
    w.telegram.fail_next("sendMessage", Fault::RetryAfter(2));
    let _d = w.start();
    w.telegram.dm(ALICE, "hello");
    let replies = w.replies(ALICE, 1).await;
    assert_eq!(replies[0], "echo: hello");
    let calls = w.telegram.calls("sendMessage");
    assert_eq!(calls.len(), 2);
    let waited = calls[1].at.duration_since(calls[0].at);
    assert!(
        waited >= Duration::from_millis(1900),
        "resent after {waited:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_error_is_retried_and_a_dead_model_is_explained() {
    // Given up at once rather than waited out (`providers_e2e` has the wait).
    let w = World::new(
        &["TELEGRAM_ALLOW_ALL_USERS=true"],
        "agent:\n  provider_outage_wait: 0\n",
    )
    .await;
    w.llm.push(Reply::Error {
        status: 500,
        retry_after: None,
    });
    w.llm.push(Reply::text("recovered"));
    let _d = w.start();
    w.telegram.dm(ALICE, "one");
    assert_eq!(w.replies(ALICE, 1).await[0], "recovered");
    assert_eq!(w.llm.requests().len(), 2);

    for _ in 0..3 {
        w.llm.push(Reply::Error {
            status: 503,
            retry_after: Some(0),
        });
    }
    w.telegram.dm(ALICE, "two");
    let notice = w.replies(ALICE, 2).await.remove(1);
    assert!(
        notice.contains("can't reach the model provider"),
        "{notice}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_that_sends_no_headers_times_out() {
    let w = World::new(
        &["TELEGRAM_ALLOW_ALL_USERS=true"],
        "agent:\n  provider_outage_wait: 0\n",
    )
    .await;
    let config = w.home.dir.join("config.yaml");
    let yaml = std::fs::read_to_string(&config).unwrap().replace(
        "  max_attempts: 3\n",
        "  max_attempts: 2\n  stream_idle_timeout: 1\n",
    );
    std::fs::write(&config, yaml).unwrap();
    // Connected, and then nothing for a minute, twice.
    for _ in 0..2 {
        w.llm.push(Reply::Delayed(
            Duration::from_secs(60),
            Box::new(Reply::Error {
                status: 500,
                retry_after: None,
            }),
        ));
    }
    let _d = w.start();
    w.telegram.dm(ALICE, "anyone there?");
    let notice = w.replies(ALICE, 1).await.remove(0);
    assert!(notice.contains("sent no response within"), "{notice}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_whose_tool_output_outgrows_the_context_is_cut_to_fit() {
    let w = World::allow_all().await;
    let config = w.home.dir.join("config.yaml");
    let yaml = std::fs::read_to_string(&config)
        .unwrap()
        .replace("context_length: 131072", "context_length: 8000");
    std::fs::write(&config, yaml).unwrap();
    // Three results of 9,000 characters each: more than the whole context (~32 KB).
    for n in 0..3 {
        w.llm.push(Reply::terminal(&format!(
            "echo result{n}; head -c 9000 /dev/zero | tr '\\0' x"
        )));
    }
    w.llm.push(Reply::text("built"));
    let _d = w.start();
    w.telegram.dm(ALICE, "build it");
    assert_eq!(w.replies(ALICE, 1).await, ["built"]);
    let last = w.llm.requests().pop().unwrap();
    let sent: usize = last["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["content"].as_str().map_or(0, str::len))
        .sum();
    assert!(
        sent < 8000 * 4,
        "{sent} bytes sent for a context of 8000 tokens"
    );
    let text = last["messages"].to_string();
    assert!(
        text.contains("outgrew the model's context"),
        "nothing was cut from {} bytes",
        text.len()
    );
    assert!(text.contains("result0") && text.contains("result2"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_update_delivered_twice_is_answered_once() {
    let w = World::allow_all().await;
    let _d = w.start();
    let update = w.telegram.dm(ALICE, "only once please");
    w.replies(ALICE, 1).await;
    w.telegram.redeliver(update);
    let t = w.telegram.clone();
    eventually(WAIT, "the redelivery", || {
        (t.times_served(update) >= 2).then_some(())
    })
    .await;
    settle().await;
    assert_eq!(w.telegram.sent_texts(ALICE).len(), 1);
    assert_eq!(w.llm.requests().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_daemon_killed_mid_turn_answers_after_restart() {
    let w = World::allow_all().await;
    w.llm.push(Reply::Delayed(
        Duration::from_secs(30),
        Box::new(Reply::text("never seen")),
    ));
    w.llm.push(Reply::text("answered after restart"));
    let mut first = w.start();
    w.telegram.dm(ALICE, "are you there?");
    let l = w.llm.clone();
    eventually(WAIT, "the first LLM call", || {
        (!l.requests().is_empty()).then_some(())
    })
    .await;
    first.kill();

    let _second = w.start();
    let replies = w.replies(ALICE, 1).await;
    assert_eq!(replies, vec!["answered after restart".to_string()]);
    assert_eq!(last_user_text(&w.llm.requests()[1]), "are you there?");
    settle().await;
    assert_eq!(w.telegram.sent_texts(ALICE).len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_telegram_would_not_take_is_sent_once_after_a_restart() {
    let w = World::allow_all().await;
    for _ in 0..50 {
        w.telegram.fail_next("sendMessage", Fault::ServerError);
    }
    let mut first = w.start();
    w.telegram.dm(ALICE, "hello?");
    let t = w.telegram.clone();
    eventually(WAIT, "two failed send attempts", || {
        (t.calls("sendMessage").len() >= 2).then_some(())
    })
    .await;
    first.kill();
    w.telegram.clear_faults();

    let _second = w.start();
    let replies = w.replies(ALICE, 1).await;
    assert_eq!(replies, vec!["echo: hello?".to_string()]);
    settle().await;
    assert_eq!(w.telegram.sent_texts(ALICE).len(), 1, "sent once");
    assert_eq!(
        w.llm.requests().len(),
        1,
        "the answer came from the outbox, not a second turn"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn steer_mode_hands_a_message_to_the_running_turn_at_its_next_tool_step() {
    let w = World::new(
        &["TELEGRAM_ALLOW_ALL_USERS=true"],
        "display:\n  busy_input_mode: steer\n",
    )
    .await;
    let pidfile = w.home.dir.join("work/steer-started");
    w.llm.push(Reply::terminal(&format!(
        "touch {}; sleep 2; echo slept",
        pidfile.display()
    )));
    w.llm.push(Reply::text("done, and I noted your remark"));
    let _d = w.start();
    w.telegram.dm(ALICE, "do the slow thing");
    eventually(WAIT, "the command to start", || {
        pidfile.exists().then_some(())
    })
    .await;
    w.telegram.dm(ALICE, "also mention bananas");
    let replies = w.replies(ALICE, 1).await;
    assert_eq!(replies, vec!["done, and I noted your remark".to_string()]);
    let second = &w.llm.requests()[1];
    assert_eq!(
        last_user_text(second),
        "also mention bananas",
        "the steer joined after the tool result"
    );
    settle().await;
    assert_eq!(
        w.llm.requests().len(),
        2,
        "the steered message did not start a turn of its own"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commands_work_and_new_forgets_the_conversation() {
    let w = World::allow_all().await;
    let _d = w.start();
    w.telegram.dm(ALICE, "/help");
    assert!(w.replies(ALICE, 1).await[0].contains("/stop"));
    w.telegram.dm(ALICE, "remember the word kiwi");
    w.replies(ALICE, 2).await;
    w.telegram.dm(ALICE, "/status");
    let status = w.replies(ALICE, 3).await.remove(2);
    assert!(
        status.contains("2 messages") && status.contains("fake-model"),
        "{status}"
    );
    w.telegram.dm(ALICE, "/new");
    assert!(w.replies(ALICE, 4).await[3].contains("New session"));
    w.telegram.dm(ALICE, "what word?");
    w.replies(ALICE, 5).await;
    let last = w.llm.requests().last().unwrap().clone();
    assert!(
        !last["messages"].to_string().contains("kiwi"),
        "the new session has no old history"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queue_mode_answers_each_message_in_turn() {
    let w = World::new(
        &["TELEGRAM_ALLOW_ALL_USERS=true"],
        "display:\n  busy_input_mode: queue\n",
    )
    .await;
    w.llm.push(Reply::Delayed(
        Duration::from_millis(1500),
        Box::new(Reply::text("first answer")),
    ));
    w.llm.push(Reply::text("second answer"));
    let _d = w.start();
    w.telegram.dm(ALICE, "one");
    let l = w.llm.clone();
    eventually(WAIT, "the first LLM call", || {
        (!l.requests().is_empty()).then_some(())
    })
    .await;
    w.telegram.dm(ALICE, "two");
    let replies = w.replies(ALICE, 2).await;
    assert_eq!(
        replies,
        vec!["first answer".to_string(), "second answer".to_string()]
    );
}

#[test]
fn run_without_a_platform_exits_78_and_names_the_variables() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("config.yaml"),
        "model:\n  default: m\n  base_url: http://127.0.0.1:9/v1\n",
    )
    .unwrap();
    let out = std::process::Command::new(BIN)
        .args(["run", "--home"])
        .arg(dir.path())
        .env_remove("TELEGRAM_BOT_TOKEN")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(78));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("TELEGRAM_BOT_TOKEN") && err.contains("TELEGRAM_ALLOWED_USERS"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_a_shared_group_session_each_message_speaks_for_its_own_author() {
    let w = World::new(
        &["TELEGRAM_ALLOW_ALL_USERS=true"],
        "group_sessions_per_user: false\n",
    )
    .await;
    let (group, bob) = (-100_321, 5151);
    w.llm.push(Reply::text("hello Alice"));
    w.llm.push(Reply::text("hello Bob"));
    let _d = w.start();
    w.telegram.group(group, ALICE, "hi, I'm Alice", true);
    w.replies(group, 1).await;
    w.telegram.group(group, bob, "and I'm Bob", true);
    w.replies(group, 2).await;
    let requests = w.llm.requests();
    let system = |i: usize| requests[i]["messages"][0]["content"].to_string();
    assert!(system(0).contains("Person: User4242"), "{}", system(0));
    // The system prompt stays the same bytes (prompt caches hit); Bob's message says
    // it is his.
    assert_eq!(system(1), system(0));
    assert_eq!(
        hermes_testkit::llm::last_user_text(&requests[1]),
        "User5151: and I'm Bob",
        "Bob's message is shown to the model as Alice's"
    );
    assert!(
        requests[1]["messages"]
            .to_string()
            .contains("hi, I'm Alice"),
        "one shared conversation"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chat_held_back_by_the_platform_never_holds_up_another_chat() {
    let w = World::new(&["TELEGRAM_ALLOWED_USERS=4242"], "").await;
    let (group, mallory) = (-100_777, 666);
    let _d = w.start();
    w.llm.push(Reply::text("hi"));
    w.telegram.dm(ALICE, "warm up");
    w.replies(ALICE, 1).await;
    // Telegram makes answering a press in the group wait eight seconds…
    w.telegram
        .fail_next("answerCallbackQuery", Fault::RetryAfter(8));
    w.telegram.press(group, mallory, 1, "appr:999:o");
    let t = w.telegram.clone();
    eventually(WAIT, "the press to reach Telegram", || {
        t.calls("answerCallbackQuery").first().cloned()
    })
    .await;
    // …and meanwhile Alice writes in her own chat.
    w.llm.push(Reply::text("still here"));
    let asked = std::time::Instant::now();
    w.telegram.dm(ALICE, "are you there?");
    let replies = w.replies(ALICE, 2).await;
    assert_eq!(replies[1], "still here");
    let waited = asked.elapsed();
    assert!(
        waited < Duration::from_secs(4),
        "Alice waited {waited:?} behind another chat"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_and_readiness_are_served_on_the_http_address() {
    let w = World::allow_all().await;
    let d = w.start();
    let addr = eventually(WAIT, "the HTTP server", || d.http_addr()).await;
    let health = reqwest::get(format!("http://{addr}/healthz"))
        .await
        .unwrap();
    assert_eq!(health.status(), 200);
    // Ready once Telegram has answered a poll.
    let deadline = std::time::Instant::now() + WAIT;
    let ready = loop {
        let answer = reqwest::get(format!("http://{addr}/readyz")).await.unwrap();
        let ok = answer.status() == 200;
        let body: serde_json::Value = answer.json().await.unwrap();
        if ok {
            break body;
        }
        assert!(std::time::Instant::now() < deadline, "never ready: {body}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(ready["adapters"][0]["platform"], "telegram");
}

#[test]
fn a_taken_http_port_is_a_clear_startup_error() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let w = rt.block_on(World::new(
        &[
            "TELEGRAM_ALLOW_ALL_USERS=true",
            &format!("WHATSAPP_CLOUD_WEBHOOK_PORT={port}"),
        ],
        "",
    ));
    let out = std::process::Command::new(BIN)
        .args(["run", "--home"])
        .arg(&w.home.dir)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("WHATSAPP_CLOUD_WEBHOOK_PORT") && stderr.contains(&port.to_string()),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_commands_are_offered_in_telegrams_command_menu() {
    let w = World::allow_all().await;
    let _d = w.start();
    let t = w.telegram.clone();
    let call = eventually(WAIT, "setMyCommands", || {
        t.calls("setMyCommands").first().cloned()
    })
    .await;
    let names: Vec<&str> = call.params["commands"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["command"].as_str())
        .collect();
    for expected in ["new", "stop", "status", "approve", "deny", "help"] {
        assert!(
            names.contains(&expected),
            "{expected} missing from {names:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revoked_token_is_reported_and_the_daemon_exits_78() {
    let w = World::allow_all().await;
    w.telegram.fail_next("getMe", Fault::Unauthorized);
    let mut child = std::process::Command::new(BIN)
        .args(["run", "--home"])
        .arg(&w.home.dir)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + WAIT;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the daemon kept running"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(
        status.code(),
        Some(78),
        "systemd must not restart-loop on it"
    );
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    assert!(stderr.contains("TELEGRAM_BOT_TOKEN"), "{stderr}");
}

/// A long poll whose connection is reset after Telegram handed out a message: the message
/// was never confirmed (the offset did not move past it), so the next poll fetches it again,
/// and it is answered once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_handed_out_on_a_reset_connection_is_fetched_again_and_answered_once() {
    let w = World::allow_all().await;
    let _d = w.start();
    w.telegram.dm(ALICE, "warm up");
    w.replies(ALICE, 1).await;
    // The next poll to arrive waits for news, hands out the message, and is then cut.
    w.telegram
        .resets()
        .arm(1, When::AfterHandling, |_, path, _| {
            path.to_ascii_lowercase().ends_with("/getupdates")
        });
    let t = w.telegram.clone();
    eventually(WAIT, "a poll on the armed connection", || {
        (t.resets().matched() == 1).then_some(())
    })
    .await;
    let update = w.telegram.dm(ALICE, "are you there?");
    let replies = w.replies(ALICE, 2).await;
    assert_eq!(replies[1], "echo: are you there?");
    settle().await;
    assert_eq!(
        w.telegram.resets().cut(),
        1,
        "the poll's connection was cut"
    );
    assert!(
        w.telegram.times_served(update) >= 2,
        "handed out on the cut poll, then again"
    );
    assert_eq!(w.telegram.sent_texts(ALICE).len(), 2, "answered once");
    assert_eq!(w.llm.requests().len(), 2, "one turn for it");
}
