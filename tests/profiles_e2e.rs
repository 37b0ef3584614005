//! Several profiles in one daemon (Hermes' `gateway.multiplex_profiles`), end to end: the
//! default home's gateway and a profile's under `profiles/work`, each with its own
//! Telegram bot, allowlist and memory, in one process. Bob, who may talk to the profile's
//! bot only, tries every route to Alice's side of the process: her memory, her
//! conversation, her pending approval, the default home's secrets through the terminal,
//! the file tools and a file sent to the chat, and the other bot itself.

mod common;

use std::path::{Path, PathBuf};

use common::{ALICE, BIN, WAIT, settle, tool_results_in};
use hermes_testkit::daemon::{Daemon, Home};
use hermes_testkit::eventually;
use hermes_testkit::llm::{FakeLlm, Reply};
use hermes_testkit::telegram::FakeTelegram;
use serde_json::json;

/// Bob: allowed on the profile's bot only.
const BOB: i64 = 5151;
/// What only the default profile's memory holds.
const ALICES_MEMORY: &str = "zebra-7731";
/// What only Alice's conversation holds.
const ALICES_WORDS: &str = "pineapple-plan";
/// The default home's bot token (`Home::new`) and model key: its secrets. (The log and
/// tool output scrub every profile's secrets, so these checks are the last line; the
/// canary below is what shows a file of the default home was read.)
const DEFAULT_SECRETS: [&str; 2] = ["TEST-TOKEN", "sk-test-secret"];
/// A line of the default home's `config.yaml` that is no secret (nothing scrubs it).
const ROOT_CANARY: &str = "cobalt-5512";
/// Printed before each name a listing of the default home shows.
const LISTED: &str = "LISTED:";

struct Process {
    /// The default home (Alice's bot: `alices`).
    root: Home,
    /// `root/profiles/work` (Bob's bot: `bobs`).
    work: PathBuf,
    alices: FakeTelegram,
    bobs: FakeTelegram,
    llm: FakeLlm,
    /// Where Alice's dangerous command would leave its mark.
    scratch: PathBuf,
    _dir: tempfile::TempDir,
}

impl Process {
    async fn new() -> Process {
        let (alices, bobs) = (
            FakeTelegram::start().await,
            FakeTelegram::start_as(777).await,
        );
        let llm = FakeLlm::start().await;
        let dir = tempfile::tempdir().unwrap();
        let scratch = dir.path().join("scratch");
        std::fs::create_dir_all(scratch.join("victim")).unwrap();
        let root = Home::new(
            &dir.path().join("root"),
            &alices.base_url(),
            &llm.base_url(),
            &[
                &format!("TELEGRAM_ALLOWED_USERS={ALICE}"),
                "GATEWAY_MULTIPLEX_PROFILES=true",
            ],
            &format!("agent:\n  system_prompt: The house word is {ROOT_CANARY}.\n"),
        );
        std::fs::create_dir_all(root.dir.join("memories")).unwrap();
        std::fs::write(
            root.dir.join("memories/MEMORY.md"),
            format!("Alice's door code is {ALICES_MEMORY}\n"),
        )
        .unwrap();
        let work = root.dir.join("profiles/work");
        Home::with_platform(
            &work,
            &llm.base_url(),
            &format!(
                "  telegram:\n    enabled: true\n    extra:\n      base_url: {}\n      poll_timeout: 2\n",
                bobs.base_url()
            ),
            &[
                "TELEGRAM_BOT_TOKEN=777:WORK-TOKEN",
                &format!("TELEGRAM_ALLOWED_USERS={BOB}"),
            ],
            // The attacker's best case: nothing asks before his commands run.
            "approvals:\n  mode: 'off'\n",
        );
        Process {
            root,
            work,
            alices,
            bobs,
            llm,
            scratch,
            _dir: dir,
        }
    }

    fn start(&self) -> Daemon {
        Daemon::start(BIN, &self.root, &[])
    }
}

/// Wait until `chat` on `bot` has `count` replies; they are returned.
async fn replies(bot: &FakeTelegram, chat: i64, count: usize) -> Vec<String> {
    let bot = bot.clone();
    eventually(WAIT, &format!("{count} replies to {chat}"), || {
        let said = bot.sent_texts(chat);
        (said.len() >= count).then_some(said)
    })
    .await
}

fn path(p: &Path) -> String {
    p.display().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_of_one_profile_reaches_nothing_of_another() {
    let p = Process::new().await;
    let daemon = p.start();
    let root = path(&p.root.dir);

    // Alice, on the default profile: a conversation, her memory in its prompt, and a
    // dangerous command waiting for her approval.
    p.llm.push(Reply::text("noted"));
    p.alices
        .dm(ALICE, &format!("my secret is the {ALICES_WORDS}"));
    replies(&p.alices, ALICE, 1).await;
    let alices_prompt = p.llm.requests()[0].to_string();
    assert!(
        alices_prompt.contains(ALICES_MEMORY) && alices_prompt.contains(ROOT_CANARY),
        "her memory and her home's prompt are in her own prompt: {alices_prompt}"
    );
    let ran = p.scratch.join("ran");
    p.llm.push(Reply::terminal(&format!(
        "rm -rf {} && touch {}",
        path(&p.scratch.join("victim")),
        path(&ran)
    )));
    p.alices.dm(ALICE, "clean up");
    let alices = p.alices.clone();
    eventually(WAIT, "Alice's approval prompt", || {
        (!alices.prompts(ALICE).is_empty()).then_some(())
    })
    .await;
    let asked_for_alice = p.llm.requests().len();

    // Bob, on the profile: approving what waits (Alice's command is not his to approve).
    p.bobs.dm(BOB, "/approve");
    let told = replies(&p.bobs, BOB, 1).await.remove(0);
    assert!(!told.contains("approved"), "{told}");
    // The terminal, the file tools and a file sent to the chat, at the default home.
    let listing = format!("ls -a {root} {root}/memories | sed 's/^/{LISTED}/'");
    p.llm.push(Reply::terminal(&format!(
        "cat {root}/memories/MEMORY.md {root}/.env {root}/config.yaml 2>&1; {listing}"
    )));
    p.llm.push(Reply::ToolCall {
        name: "read_file".into(),
        arguments: json!({"path": format!("{root}/memories/MEMORY.md")}),
    });
    p.llm.push(Reply::ToolCall {
        name: "read_file".into(),
        arguments: json!({"path": format!("{root}/.env")}),
    });
    p.llm
        .push(Reply::text(format!("here\nMEDIA:{root}/.env\nthat is all")));
    p.bobs.dm(BOB, "go");
    let bobs = p.bobs.clone();
    let answer = eventually(WAIT, "Bob's answer", || {
        bobs.sent_texts(BOB)
            .into_iter()
            .find(|t| t.contains("that is all"))
    })
    .await;
    assert!(answer.contains("did not send"), "{answer}");
    assert!(
        p.bobs.sent_files(BOB).is_empty(),
        "no file of the default home"
    );

    // Each person on the other's bot is a stranger there: a pairing code, no model call.
    let before = p.llm.requests().len();
    p.alices.dm(BOB, "let me in");
    p.bobs.dm(ALICE, "let me in");
    let to_bob = replies(&p.alices, BOB, 1).await.remove(0);
    let to_alice = replies(&p.bobs, ALICE, 1).await.remove(0);
    assert!(to_bob.contains("pairing code") && to_alice.contains("pairing code"));
    settle().await;
    assert_eq!(p.llm.requests().len(), before, "strangers reach no model");

    // What Bob's side of the process saw: every model request made for him.
    let bobs_requests = &p.llm.requests()[asked_for_alice..];
    assert!(bobs_requests.len() >= 4, "{}", bobs_requests.len());
    let seen = bobs_requests
        .iter()
        .map(|r| r.to_string())
        .collect::<Vec<_>>()
        .join("\n");
    let outputs = bobs_requests
        .iter()
        .flat_map(tool_results_in)
        .collect::<Vec<_>>()
        .join("\n");
    let chat = p.bobs.sent_texts(BOB).join("\n");
    for (what, secret) in [
        ("Alice's memory", ALICES_MEMORY),
        ("Alice's words", ALICES_WORDS),
        ("the default home's config.yaml", ROOT_CANARY),
        ("the default bot's token", DEFAULT_SECRETS[0]),
        ("the default model key", DEFAULT_SECRETS[1]),
    ] {
        assert!(
            !seen.contains(secret),
            "{what} reached Bob's model: {outputs}"
        );
        assert!(!chat.contains(secret), "{what} reached Bob's chat");
    }
    for name in [".env", "config.yaml", "gateway.db", "memories", "MEMORY.md"] {
        assert!(
            !outputs.contains(&format!("{LISTED}{name}")),
            "the default home was listed: {outputs}"
        );
    }
    assert!(
        outputs.contains("off limits"),
        "the file tools refused: {outputs}"
    );
    // Alice's command still waits for her; nothing of Bob's ran it.
    assert!(!ran.exists(), "Alice's command ran");
    assert!(p.scratch.join("victim").exists());
    // And the profile is a gateway of its own: its own store, its own bot's cursor.
    assert!(p.work.join("gateway.db").exists());
    let log = daemon.log_text();
    assert!(log.contains("serving several profiles"), "{log}");
}
