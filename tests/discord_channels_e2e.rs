//! Discord's channels and threads, end to end against the fake Discord: a thread is a
//! conversation of its own; auto-threads (for listed and paired people); per-channel
//! models and prompts (`channel_overrides`); reactions as a turn's status.

mod discord_kit;

use discord_kit::*;
use hermes_testkit::conformance::{Kit, PlatformFake};
use hermes_testkit::discord::{FakeDiscord, GROUP_CHANNEL, THREAD_CHANNEL};
use hermes_testkit::eventually;
use hermes_testkit::llm::{Reply, last_user_text};
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thread_is_its_own_conversation_and_answers_go_to_it() {
    let kit = open_kit().await;
    kit.llm.push(Reply::text("noted"));
    kit.llm.push(Reply::text("in the thread"));
    let _d = kit.start();
    let alice = kit.fake.person(1);
    let asked_in_channel = kit
        .fake
        .message(GROUP_CHANNEL, &alice, "my name is Ada", true);
    assert_eq!(kit.shown(GROUP_CHANNEL, 1).await, ["noted"]);
    kit.fake
        .message(THREAD_CHANNEL, &alice, "what is my name?", true);
    assert_eq!(kit.shown(THREAD_CHANNEL, 1).await, ["in the thread"]);
    let second = &kit.llm.requests()[1];
    assert_eq!(last_user_text(second), "what is my name?");
    assert!(
        !second.to_string().contains("my name is Ada"),
        "the thread is a session of its own"
    );
    let answer = &kit.fake.raw_messages(GROUP_CHANNEL)[0];
    assert_eq!(answer.reference.as_deref(), Some(asked_in_channel.as_str()));
    assert_eq!(
        kit.fake.shown(GROUP_CHANNEL).len(),
        1,
        "nothing else in the channel"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_auto_thread_a_mention_opens_a_thread_where_the_conversation_goes_on() {
    let fake = FakeDiscord::start().await;
    let allowed = format!("DISCORD_ALLOWED_USERS={}", fake.person(1));
    let kit = Kit::new(fake, BIN, &["DISCORD_AUTO_THREAD=true".into(), allowed], "").await;
    kit.llm.push(Reply::text("let's talk here"));
    kit.llm.push(Reply::text("still here"));
    let _d = kit.start();
    let alice = kit.fake.person(1);
    let question = kit
        .fake
        .message(GROUP_CHANNEL, &alice, "help me plan a trip", true);
    let thread = question;
    assert_eq!(kit.shown(&thread, 1).await, ["let's talk here"]);
    assert_eq!(kit.fake.threads_created(), std::slice::from_ref(&thread));
    let answer = &kit.fake.raw_messages(&thread)[0];
    assert_eq!(
        answer.reference, None,
        "the thread starts with the question already"
    );
    assert!(
        kit.fake.shown(GROUP_CHANNEL).is_empty(),
        "the answer is in the thread"
    );
    // In a thread the bot opened, no mention is needed; the session is the same.
    kit.fake.message(&thread, &alice, "to Lisbon", false);
    assert_eq!(kit.shown(&thread, 2).await[1], "still here");
    let second = kit.llm.requests()[1].to_string();
    assert!(
        second.contains("help me plan a trip"),
        "one session: {second}"
    );
    // The reactions are on the question, which stays in the channel.
    let fake = kit.fake.clone();
    eventually(WAIT, "✅ on the question", || {
        (fake.reactions(&thread) == ["✅"]).then_some(())
    })
    .await;
    // A stranger's mention does not make the bot open threads.
    let mallory = kit.fake.person(3);
    kit.fake
        .message(GROUP_CHANNEL, &mallory, "open a thread for me", true);
    settle().await;
    assert_eq!(kit.fake.threads_created().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_auto_thread_a_person_approved_by_pairing_gets_a_thread_too() {
    let fake = FakeDiscord::start().await;
    let allowed = format!("DISCORD_ALLOWED_USERS={}", fake.person(1));
    let kit = Kit::new(fake, BIN, &["DISCORD_AUTO_THREAD=true".into(), allowed], "").await;
    kit.llm.push(Reply::text("a thread for you"));
    let _d = kit.start();
    let bob = kit.fake.person(2);
    let dm = kit.fake.dm_chat(&bob);
    kit.fake.message(&dm, &bob, "let me in", true);
    let told = kit.shown(&dm, 1).await.remove(0);
    let code = told
        .split(|c: char| !c.is_ascii_alphanumeric())
        .find(|w| {
            w.len() == 8
                && w.chars()
                    .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit())
        })
        .unwrap_or_else(|| panic!("a pairing code in {told:?}"))
        .to_owned();
    // Not yet approved: a mention opens no thread.
    kit.fake
        .message(GROUP_CHANNEL, &bob, "before approval", true);
    settle().await;
    assert!(kit.fake.threads_created().is_empty());
    kit.home.approve_pairing(BIN, "discord", &code);
    let question = kit.fake.message(GROUP_CHANNEL, &bob, "plan my week", true);
    assert_eq!(kit.shown(&question, 1).await, ["a thread for you"]);
    assert_eq!(kit.fake.threads_created(), [question]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_channel_override_gives_the_channel_and_its_threads_their_model_and_prompt() {
    let yaml = format!(
        "agent:\n  system_prompt: Follow the house rules.\n\
         discord:\n  channel_overrides:\n    \"{GROUP_CHANNEL}\":\n      model: channel-model\n      \
         system_prompt: You serve the dev channel.\n"
    );
    let kit = kit_with(FakeDiscord::start().await, &[], &yaml).await;
    for _ in 0..3 {
        kit.llm.push(Reply::text("ok"));
    }
    let _d = kit.start();
    let alice = kit.fake.person(1);
    kit.fake
        .message(GROUP_CHANNEL, &alice, "in the channel", true);
    kit.shown(GROUP_CHANNEL, 1).await;
    kit.fake
        .message(THREAD_CHANNEL, &alice, "in its thread", true);
    kit.shown(THREAD_CHANNEL, 1).await;
    let dm = kit.fake.dm_chat(&alice);
    kit.fake.message(&dm, &alice, "in private", true);
    kit.shown(&dm, 1).await;
    let requests = kit.llm.requests();
    let system = |r: &serde_json::Value| r["messages"][0]["content"].to_string();
    for (asked, place) in requests[..2].iter().zip(["the channel", "its thread"]) {
        assert_eq!(asked["model"], "channel-model", "{place}");
        assert!(
            system(asked).contains("You serve the dev channel."),
            "{place}"
        );
        assert!(!system(asked).contains("house rules"), "{place}: replaced");
    }
    assert_eq!(requests[2]["model"], "fake-model", "a DM has no override");
    assert!(system(&requests[2]).contains("Follow the house rules."));
    assert!(!system(&requests[2]).contains("dev channel"));
}

/// Wait until the bot's reactions on message `mid` changed as `expected`.
async fn reacted(kit: &Kit<FakeDiscord>, mid: &str, expected: &[&str]) {
    let fake = kit.fake.clone();
    eventually(WAIT, &format!("the reactions {expected:?}"), || {
        (fake.reaction_changes(mid) == expected).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_shows_as_eyes_then_a_check_a_cross_or_nothing_after_a_stop() {
    let kit = open_kit().await;
    kit.llm.push(Reply::text("done"));
    kit.llm.push(Reply::ErrorSaying {
        status: 401,
        message: "invalid api key".into(),
    });
    kit.llm.push(Reply::Delayed(
        Duration::from_secs(60),
        Box::new(Reply::text("too late")),
    ));
    let _d = kit.start();
    // Three people, each in a DM of their own: 👀 is shown only when the chat's sending
    // budget has room to spare, which one chat's quick exchanges would use up.
    let (alice, bob, carol) = (kit.fake.person(1), kit.fake.person(2), kit.fake.person(3));
    let dm = kit.fake.dm_chat(&alice);
    let answered = kit.fake.message(&dm, &alice, "hello", true);
    kit.shown(&dm, 1).await;
    reacted(&kit, &answered, &["+👀", "-👀", "+✅"]).await;
    let dm = kit.fake.dm_chat(&bob);
    let failed = kit.fake.message(&dm, &bob, "again", true);
    kit.shown(&dm, 1).await;
    reacted(&kit, &failed, &["+👀", "-👀", "+❌"]).await;
    let dm = kit.fake.dm_chat(&carol);
    let stopped = kit.fake.message(&dm, &carol, "think for long", true);
    asked(&kit, 3).await;
    reacted(&kit, &stopped, &["+👀"]).await;
    kit.fake.message(&dm, &carol, "/stop", true);
    reacted(&kit, &stopped, &["+👀", "-👀"]).await;
    settle().await;
    assert_eq!(
        kit.fake.reactions(&stopped),
        Vec::<String>::new(),
        "no mark after a stop"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_reactions_off_a_turn_leaves_no_reaction() {
    let kit = kit_with(FakeDiscord::start().await, &["DISCORD_REACTIONS=false"], "").await;
    kit.llm.push(Reply::text("done"));
    let _d = kit.start();
    let alice = kit.fake.person(1);
    let dm = kit.fake.dm_chat(&alice);
    let asked = kit.fake.message(&dm, &alice, "hello", true);
    kit.shown(&dm, 1).await;
    settle().await;
    assert!(kit.fake.reaction_changes(&asked).is_empty());
    assert!(!kit.fake.calls("/typing").is_empty(), "typing still shows");
}
