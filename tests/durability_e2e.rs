//! Replies that cannot be lost, end to end: the database failing under the daemon (made to
//! fail from outside with a trigger, as a full disk would), commands racing a turn's end,
//! and a new bot token on an old database.

mod common;

use std::time::Duration;

use common::*;
use hermes_testkit::daemon::Home;
use hermes_testkit::eventually;
use hermes_testkit::llm::Reply;
use hermes_testkit::telegram::FakeTelegram;

/// A second connection to the daemon's database, as the test's hand on it.
fn database(w: &World) -> rusqlite::Connection {
    let conn = rusqlite::Connection::open(w.home.dir.join("gateway.db")).unwrap();
    conn.busy_timeout(Duration::from_secs(10)).unwrap();
    conn
}

/// Inbox rows still waiting to be handled.
fn open_inbox_rows(w: &World) -> i64 {
    database(w)
        .query_row(
            "SELECT COUNT(*) FROM inbox WHERE state = 'received'",
            [],
            |r| r.get(0),
        )
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_stop_does_not_leave_the_first_one_open() {
    let w = World::allow_all().await;
    let _d = w.start();
    alice_runs_a_long_command(&w).await;
    w.telegram.dm(ALICE, "/stop");
    w.telegram.dm(ALICE, "/stop");
    let replies = w.replies(ALICE, 1).await;
    assert_eq!(replies[0], "⏹ Stopped.");
    eventually(WAIT, "every inbox row to be handled", || {
        (open_inbox_rows(&w) == 0).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_whose_record_fails_is_recorded_when_the_database_recovers() {
    let w = World::allow_all().await;
    let d = w.start();
    w.telegram.dm(ALICE, "warm up");
    assert_eq!(w.replies(ALICE, 1).await, ["echo: warm up"]);

    let db = database(&w);
    db.execute_batch(
        "CREATE TRIGGER refuse_done BEFORE UPDATE OF state ON inbox
         WHEN NEW.state = 'done'
         BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END;",
    )
    .unwrap();
    w.telegram.dm(ALICE, "hello");
    eventually(WAIT, "the failed record to be logged", || {
        d.log_text()
            .contains("could not record the end of a turn")
            .then_some(())
    })
    .await;
    assert_eq!(w.telegram.sent_texts(ALICE).len(), 1, "nothing sent yet");

    db.execute_batch("DROP TRIGGER refuse_done").unwrap();
    let replies = w.replies(ALICE, 2).await;
    assert_eq!(replies[1], "echo: hello");
    settle().await;
    assert_eq!(w.telegram.sent_texts(ALICE).len(), 2);
    assert_eq!(w.llm.requests().len(), 2, "the turn was not run again");
    assert_eq!(open_inbox_rows(&w), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_bot_token_on_an_old_database_loses_none_of_the_new_bots_messages() {
    let w = World::allow_all().await;
    let mut d = w.start();
    // The first bot's polling offset and event ids end up past the second bot's ids.
    for n in 1..=3 {
        w.telegram.dm(ALICE, &format!("to the first bot {n}"));
        w.replies(ALICE, n).await;
    }
    d.terminate();

    // Another token, another bot: its update ids count from where the first bot's began.
    let other = FakeTelegram::start_as(777_000).await;
    Home::new(
        &w.home.dir,
        &other.base_url(),
        &w.llm.base_url(),
        &["TELEGRAM_ALLOW_ALL_USERS=true"],
        "",
    );
    let _d = w.start();
    other.dm(ALICE, "to the second bot");
    let t = other.clone();
    let replies = eventually(WAIT, "the second bot's reply", || {
        let sent = t.sent_texts(ALICE);
        (!sent.is_empty()).then_some(sent)
    })
    .await;
    assert_eq!(replies, ["echo: to the second bot"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_update_redelivered_while_its_first_copy_is_answered_is_answered_once() {
    let w = World::allow_all().await;
    w.llm.push(Reply::Delayed(
        Duration::from_millis(1500),
        Box::new(Reply::text("slow answer")),
    ));
    let _d = w.start();
    let update = w.telegram.dm(ALICE, "take your time");
    let llm = w.llm.clone();
    eventually(WAIT, "the model to be asked", || {
        (!llm.requests().is_empty()).then_some(())
    })
    .await;
    // Telegram serves it again (a lost confirmation) while the turn still runs.
    w.telegram.redeliver(update);
    let t = w.telegram.clone();
    eventually(WAIT, "the redelivery", || {
        (t.times_served(update) >= 2).then_some(())
    })
    .await;
    assert_eq!(w.replies(ALICE, 1).await, ["slow answer"]);
    settle().await;
    assert_eq!(w.telegram.sent_texts(ALICE).len(), 1);
    assert_eq!(w.llm.requests().len(), 1, "the copy started no second turn");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_update_that_cannot_be_recorded_holds_back_the_rest_of_its_batch() {
    let w = World::allow_all().await;
    let d = w.start();
    w.telegram.dm(ALICE, "warm up");
    w.replies(ALICE, 1).await;
    let db = database(&w);
    db.execute_batch(
        "CREATE TRIGGER refuse_poison BEFORE INSERT ON inbox WHEN NEW.chat_id = '-100778'
         BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END;",
    )
    .unwrap();
    // One getUpdates answer with three updates; the middle one cannot be recorded.
    w.telegram.group(-100_777, ALICE, "first", true);
    w.telegram.group(-100_778, ALICE, "poison", true);
    w.telegram.group(-100_779, ALICE, "third", true);
    eventually(WAIT, "the failed record to be logged", || {
        d.log_text()
            .contains("cannot record an event")
            .then_some(())
    })
    .await;
    let chats = |db: &rusqlite::Connection| -> Vec<String> {
        let mut stmt = db.prepare("SELECT chat_id FROM inbox ORDER BY id").unwrap();
        stmt.query_map([], |r| r.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect()
    };
    let warm_up = ALICE.to_string();
    assert_eq!(
        chats(&db),
        [warm_up.as_str(), "-100777"],
        "nothing after the failure"
    );

    db.execute_batch("DROP TRIGGER refuse_poison").unwrap();
    eventually(WAIT, "the rest of the batch", || {
        (chats(&db).len() == 4).then_some(())
    })
    .await;
    assert_eq!(
        chats(&db),
        [warm_up.as_str(), "-100777", "-100778", "-100779"]
    );
    for chat in [-100_777, -100_778, -100_779] {
        w.replies(chat, 1).await;
    }
}

/// Another program holds the database's write lock (a backup tool, `sqlite3` left in a
/// transaction) for longer than the daemon waits for it: the update is not acknowledged to
/// Telegram, the operator is told, and the message is answered once the lock is gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_locked_by_another_program_holds_messages_back_until_it_is_free() {
    let w = World::allow_all().await;
    let d = w.start();
    w.telegram.dm(ALICE, "warm up");
    w.replies(ALICE, 1).await;
    // The warm-up's own last writes (its inbox row handled, its outbox row sent) land
    // first; queued behind the lock, each would wait out the busy timeout before the new
    // event is even tried.
    eventually(WAIT, "the warm-up to be recorded as done", || {
        let pending: i64 = database(&w)
            .query_row(
                "SELECT (SELECT COUNT(*) FROM inbox WHERE state = 'received') \
                      + (SELECT COUNT(*) FROM outbox WHERE state IN ('pending', 'sending'))",
                [],
                |r| r.get(0),
            )
            .unwrap();
        (pending == 0).then_some(())
    })
    .await;
    let db = database(&w);
    db.execute_batch("BEGIN EXCLUSIVE").unwrap();
    w.telegram.dm(ALICE, "while locked");
    eventually(Duration::from_secs(40), "the operator to be told", || {
        d.log_text()
            .contains("cannot record an event")
            .then_some(())
    })
    .await;
    assert_eq!(
        w.telegram.sent_texts(ALICE).len(),
        1,
        "nothing answered yet"
    );
    db.execute_batch("COMMIT").unwrap();
    let t = w.telegram.clone();
    let replies = eventually(Duration::from_secs(60), "the answer", || {
        let sent = t.sent_texts(ALICE);
        (sent.len() >= 2).then_some(sent)
    })
    .await;
    assert_eq!(replies[1], "echo: while locked");
    settle().await;
    assert_eq!(w.telegram.sent_texts(ALICE).len(), 2);
    assert_eq!(w.llm.requests().len(), 2, "asked once");
}

/// On demand, as root (it mounts a 4 MiB tmpfs): the home's disk fills up under the daemon.
/// The message is not acknowledged to Telegram, the operator is told, and once space
/// returns it is answered, once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "mounts a tmpfs (root); run with --ignored"]
async fn a_full_disk_holds_messages_back_and_the_daemon_recovers_when_space_returns() {
    use std::io::Write;
    use std::process::{Command, Stdio};

    struct Mounted(std::path::PathBuf);
    impl Drop for Mounted {
        fn drop(&mut self) {
            let _ = Command::new("umount").arg("-l").arg(&self.0).status();
        }
    }
    let mount = tempfile::tempdir().unwrap();
    let mounted = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=4m", "tmpfs"])
        .arg(mount.path())
        .status()
        .unwrap();
    assert!(
        mounted.success(),
        "cannot mount a tmpfs (this test needs root)"
    );
    let _unmount = Mounted(mount.path().to_path_buf());
    let telegram = FakeTelegram::start().await;
    let llm = hermes_testkit::llm::FakeLlm::start().await;
    let home = Home::new(
        &mount.path().join("home"),
        &telegram.base_url(),
        &llm.base_url(),
        &["TELEGRAM_ALLOW_ALL_USERS=true"],
        "",
    );
    // The log goes elsewhere: it must tell of the full disk.
    let log_dir = tempfile::tempdir().unwrap();
    let log = log_dir.path().join("daemon.log");
    let mut daemon = Command::new(BIN)
        .arg("run")
        .arg("--home")
        .arg(&home.dir)
        .env("HERMES_LOG", "info")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let answers = |n: usize| {
        let t = telegram.clone();
        eventually(Duration::from_secs(60), "the answers", move || {
            let sent = t.sent_texts(ALICE);
            (sent.len() >= n).then_some(sent)
        })
    };
    telegram.dm(ALICE, "warm up");
    answers(1).await;
    let filler_path = mount.path().join("filler");
    let mut filler = std::fs::File::create(&filler_path).unwrap();
    while filler.write_all(&[0u8; 16 * 1024]).is_ok() {}
    drop(filler);
    telegram.dm(ALICE, "on a full disk");
    let told = eventually(Duration::from_secs(60), "the operator to be told", || {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        text.lines()
            .find(|l| l.contains("full") && (l.contains("ERROR") || l.contains("WARN")))
            .map(str::to_owned)
    })
    .await;
    println!("told: {told}");
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        telegram.sent_texts(ALICE).len(),
        1,
        "nothing answered on a full disk"
    );
    std::fs::remove_file(&filler_path).unwrap();
    let replies = answers(2).await;
    assert_eq!(replies[1], "echo: on a full disk");
    settle().await;
    assert_eq!(telegram.sent_texts(ALICE).len(), 2);
    assert_eq!(llm.requests().len(), 2, "asked once");
    let _ = daemon.kill();
    let _ = daemon.wait();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn words_not_meant_for_the_bot_are_not_kept() {
    const STRANGER: i64 = 777;
    const GROUP: i64 = -100_200;
    let w = World::new(&[&format!("TELEGRAM_ALLOWED_USERS={ALICE}")], "").await;
    w.llm.push(Reply::text("hello Alice"));
    let _d = w.start();
    w.telegram
        .group(GROUP, ALICE, "chatter between members", false);
    w.telegram
        .group(GROUP, STRANGER, "a stranger's chatter", false);
    w.telegram.dm(STRANGER, "my secret words");
    w.telegram.group(GROUP, ALICE, "hello bot", true);
    assert_eq!(w.replies(GROUP, 1).await, ["hello Alice"]);
    let pairing = w.replies(STRANGER, 1).await;
    assert!(pairing[0].contains("pairing code"), "{pairing:?}");
    eventually(WAIT, "every inbox row to be handled", || {
        (open_inbox_rows(&w) == 0).then_some(())
    })
    .await;

    let db = database(&w);
    let kept: Vec<(String, String)> = db
        .prepare(
            "SELECT chat_id, outcome FROM inbox
             WHERE text IS NULL AND payload IS NULL
               AND NOT EXISTS (SELECT 1 FROM inbox_payloads WHERE inbox_id = inbox.id)
             ORDER BY id",
        )
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(
        kept,
        [
            (STRANGER.to_string(), "pairing code issued".to_owned()),
            (GROUP.to_string(), "answered".to_owned())
        ],
        "no row for the chatter, and the rows there keep no one's words"
    );
    let inbox: i64 = db
        .query_row("SELECT count(*) FROM inbox", [], |r| r.get(0))
        .unwrap();
    assert_eq!(inbox, 2);
}
