//! The admin's commands on the daemon itself, end to end: `/restart` drains and starts the
//! gateway again in the same process and tells the chat once it is back; `/platform`
//! lists the platforms and pauses one (its adapter stops: nothing is received); both are
//! the admins' where admins are listed.

mod common;

use std::time::Duration;

use common::*;

/// Lists Alice's id (`ALICE`) or another as the admins of direct chats.
fn admins(w: &World, admin: &str) {
    let path = w.home.dir.join("config.yaml");
    let text = std::fs::read_to_string(&path).unwrap();
    let text = text.replacen(
        "      poll_timeout: 2\n",
        &format!("      poll_timeout: 2\n      allow_admin_from: [\"{admin}\"]\n"),
        1,
    );
    std::fs::write(&path, text).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_drains_starts_again_and_says_it_is_back() {
    let w = World::allow_all().await;
    admins(&w, &ALICE.to_string());
    let mut daemon = w.start();
    let pid = daemon.pid();
    w.ask("hello").await;
    let before = w.telegram.sent_texts(ALICE).len();
    let replies = w.said_after("/restart", 2).await;
    assert!(
        replies[0].starts_with("♻ Restarting gateway."),
        "{replies:?}"
    );
    assert_eq!(
        replies[1],
        "♻ Gateway restarted successfully. Your session continues."
    );
    assert!(daemon.exited().is_none(), "the same process goes on");
    assert_eq!(daemon.pid(), pid);
    assert!(
        daemon
            .log_text()
            .contains("reading config.yaml and .env again"),
        "the configuration was read again"
    );
    // The conversation goes on, and the /restart is not run a second time.
    let after = w.ask("still there?").await;
    assert_eq!(after.last().unwrap(), "echo: still there?");
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(w.telegram.sent_texts(ALICE).len(), before + 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn platform_lists_and_pauses_and_only_admins_may() {
    let w = World::allow_all().await;
    admins(&w, "1");
    let _d = w.start();
    // Alice is not the admin here.
    let refused = w.ask("/restart").await;
    assert!(
        visible(refused.last().unwrap()).starts_with("⛔ /restart is for the admins here."),
        "{refused:?}"
    );
    let refused = w.ask("/platform pause telegram").await;
    assert!(visible(refused.last().unwrap()).starts_with("⛔ /platform"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_platform_receives_nothing() {
    let w = World::allow_all().await;
    admins(&w, &ALICE.to_string());
    let _d = w.start();
    let listed = visible(w.ask("/platform").await.last().unwrap());
    assert_eq!(listed, "Gateway platforms\n· telegram — connected");
    let unknown = visible(w.ask("/platform pause myspace").await.last().unwrap());
    assert_eq!(unknown, "Unknown platform: myspace");
    let not_enabled = visible(w.ask("/platform pause slack").await.last().unwrap());
    assert_eq!(not_enabled, "slack is not enabled here.");
    let nothing = visible(w.ask("/platform resume telegram").await.last().unwrap());
    assert_eq!(nothing, "telegram is not paused — nothing to resume.");
    let paused = visible(w.ask("/platform pause telegram").await.last().unwrap());
    assert!(paused.starts_with("✓ telegram paused."), "{paused}");
    // Polling stops: a message sent now is not fetched.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let polls = w.telegram.calls("getupdates").len();
    let answered = w.telegram.sent_texts(ALICE).len();
    w.telegram.dm(ALICE, "anyone there?");
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(w.telegram.calls("getupdates").len(), polls, "no polling");
    assert_eq!(w.telegram.sent_texts(ALICE).len(), answered);
}
