//! Telegram's webhook mode end to end (Hermes' `TELEGRAM_WEBHOOK_URL` and
//! `TELEGRAM_WEBHOOK_SECRET`): the daemon sets the webhook with its secret and never polls;
//! a post without the secret, or with another, is refused; an update is in the inbox before
//! the 200, and Telegram's redelivery of it is answered once. In polling mode a webhook left
//! behind is removed first, keeping what it had not delivered.

mod common;

use common::*;
use hermes_testkit::eventually;
use hermes_testkit::llm::Reply;

const URL: &str = "https://bot.example.com/tg-hook";
const SECRET: &str = "hook_secret-1";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn updates_come_through_the_secret_webhook_and_are_recorded_before_the_200() {
    let url = format!("TELEGRAM_WEBHOOK_URL={URL}");
    let secret = format!("TELEGRAM_WEBHOOK_SECRET={SECRET}");
    let w = World::new(&["TELEGRAM_ALLOW_ALL_USERS=true", &url, &secret], "").await;
    let d = w.start();
    let addr = eventually(WAIT, "the HTTP address", || d.http_addr()).await;
    let set = eventually(WAIT, "setWebhook", || {
        w.telegram.calls("setwebhook").into_iter().next()
    })
    .await;
    assert_eq!(set.params["url"], URL, "{}", set.params);
    assert_eq!(set.params["secret_token"], SECRET, "{}", set.params);

    w.llm.push(Reply::text("hello through the hook"));
    w.telegram.dm(ALICE, "hi");
    let update = w.telegram.take_queued().remove(0);
    let http = reqwest::Client::new();
    let post = |secret: Option<&str>| {
        let mut request = http.post(format!("http://{addr}/tg-hook")).json(&update);
        if let Some(secret) = secret {
            request = request.header("X-Telegram-Bot-Api-Secret-Token", secret);
        }
        request.send()
    };
    assert_eq!(post(None).await.unwrap().status(), 403);
    assert_eq!(post(Some("hook_secret-2")).await.unwrap().status(), 403);
    let inbox = || -> i64 {
        let db = rusqlite::Connection::open(w.home.dir.join("gateway.db")).unwrap();
        db.query_row("SELECT count(*) FROM inbox", [], |r| r.get(0))
            .unwrap()
    };
    assert_eq!(inbox(), 0, "a refused post recorded nothing");
    assert_eq!(post(Some(SECRET)).await.unwrap().status(), 200);
    assert_eq!(inbox(), 1, "recorded before the 200");
    assert_eq!(w.replies(ALICE, 1).await, ["hello through the hook"]);

    // Telegram sends it again (its answer was lost): one row, one answer.
    assert_eq!(post(Some(SECRET)).await.unwrap().status(), 200);
    settle().await;
    assert_eq!(inbox(), 1);
    assert_eq!(w.telegram.sent_texts(ALICE).len(), 1);
    assert!(
        w.telegram.calls("getupdates").is_empty(),
        "no polling in webhook mode"
    );
    assert!(!d.log_text().contains(SECRET), "the secret reached the log");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn polling_removes_a_webhook_left_behind_and_keeps_its_updates() {
    let w = World::allow_all().await;
    w.telegram.leave_webhook("https://old.example.com/hook");
    w.llm.push(Reply::text("polled"));
    w.telegram.dm(ALICE, "written while the webhook was set");
    let d = w.start();
    assert_eq!(w.replies(ALICE, 1).await, ["polled"]);
    let deleted = w.telegram.calls("deletewebhook");
    assert_eq!(deleted.len(), 1, "{deleted:?}");
    assert_eq!(deleted[0].params["drop_pending_updates"], false);
    drop(d);

    // Without a webhook, polling starts with no call to remove one.
    let w = World::allow_all().await;
    w.llm.push(Reply::text("polled"));
    let _d = w.start();
    w.telegram.dm(ALICE, "hi");
    w.replies(ALICE, 1).await;
    assert!(w.telegram.calls("deletewebhook").is_empty());
}

/// `check-config` with the webhook's settings in `.env`: its stdout and whether it passed.
fn check_config(env: &str) -> (bool, String) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("config.yaml"),
        "model:\n  default: m\n  base_url: http://127.0.0.1:9/v1\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join(".env"),
        format!("TELEGRAM_BOT_TOKEN=123:SECRETSECRET\n{env}"),
    )
    .unwrap();
    let check = std::process::Command::new(BIN)
        .args(["check-config", "--home"])
        .arg(dir.path())
        .output()
        .unwrap();
    (
        check.status.success(),
        String::from_utf8_lossy(&check.stdout).into_owned()
            + &String::from_utf8_lossy(&check.stderr),
    )
}

#[test]
fn a_webhook_needs_an_https_url_and_a_secret_telegram_accepts() {
    let (ok, out) = check_config(&format!("TELEGRAM_WEBHOOK_URL={URL}\n"));
    assert!(!ok && out.contains("TELEGRAM_WEBHOOK_SECRET"), "{out}");
    let (ok, out) = check_config(&format!(
        "TELEGRAM_WEBHOOK_URL=http://bot.example.com/hook\nTELEGRAM_WEBHOOK_SECRET={SECRET}\n"
    ));
    assert!(!ok && out.contains("HTTPS"), "{out}");
    let (ok, out) = check_config(&format!(
        "TELEGRAM_WEBHOOK_URL={URL}\nTELEGRAM_WEBHOOK_SECRET=has spaces\n"
    ));
    assert!(!ok && out.contains("A-Z a-z 0-9 _ -"), "{out}");
    let (ok, out) = check_config(&format!(
        "TELEGRAM_WEBHOOK_URL={URL}\nTELEGRAM_WEBHOOK_SECRET={SECRET}\n"
    ));
    assert!(ok && out.contains(URL), "{out}");
    assert!(!out.contains(SECRET), "the secret was shown: {out}");
}
