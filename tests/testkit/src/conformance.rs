//! The conformance kit: the behaviour every platform owes, written once against the small
//! [`PlatformFake`] trait that each platform's fake implements, and run for each platform by
//! one line ([`crate::conformance_suite!`]). A new platform's fake implements the trait; its
//! test file calls the macro; every scenario below then runs against the real daemon and
//! the real client crate of that platform.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::daemon::{Daemon, Home};
use crate::eventually;
use crate::llm::{FakeLlm, Reply, last_user_text};
use crate::postgres::TestPostgres;

tokio::task_local! {
    /// The store URL the kits of this task give their daemons ([`on_postgres`]), with the
    /// server kept running for them.
    static STORE: (Arc<TestPostgres>, String, Arc<AtomicBool>);
}

/// Run a scenario with its daemons on the default store (SQLite in their home).
pub async fn on_sqlite(scenario: impl Future<Output = ()>) {
    scenario.await
}

/// Run a scenario with its daemons on a new database of the tests' PostgreSQL server
/// (`HERMES_STORE_URL`); skipped, as [`crate::needs`] allows, when it is not installed.
pub async fn on_postgres(scenario: impl Future<Output = ()>) {
    let Some(server) = TestPostgres::shared() else {
        return;
    };
    let database = server.create_database();
    let url = server.url(&database);
    let started = Arc::new(AtomicBool::new(false));
    STORE
        .scope((server.clone(), url, started.clone()), scenario)
        .await;
    if started.load(Ordering::Relaxed) {
        // The daemon kept its state there, not in a SQLite file of its home.
        let recorded = server
            .psql(server.password(), &database, "SELECT count(*) FROM inbox")
            .unwrap_or_else(|e| panic!("the daemon made no store in PostgreSQL: {e}"));
        assert_ne!(recorded, "0", "no event was recorded in PostgreSQL");
    }
}

/// How long a scenario waits for something that should happen.
pub const WAIT: Duration = Duration::from_secs(15);

/// A prompt with choices, as the platform showed it.
#[derive(Debug, Clone)]
pub struct ShownPrompt {
    /// The platform's id of the message carrying the choices.
    pub message_id: String,
    /// The prompt as the person sees it.
    pub text: String,
    /// (label, choice id) of each choice.
    pub choices: Vec<(String, String)>,
}

/// A working-indicator event the platform saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkingEvent {
    Shown,
    Ended,
}

/// What a platform's fake offers the kit.
pub trait PlatformFake: Send + Sync + 'static {
    /// The platform's section under `platforms:` in `config.yaml` (indented two spaces),
    /// pointing the daemon at this fake.
    fn platform_yaml(&self) -> String;
    /// Top-level sections of `config.yaml` the platform needs besides (the web chat's
    /// `web.listen`).
    fn top_level_yaml(&self) -> String {
        String::new()
    }
    /// Files the platform needs in the home before the daemon starts (the web chat's
    /// login token).
    fn prepare_home(&self, dir: &std::path::Path) {
        let _ = dir;
    }
    /// The `.env` lines the platform needs (its token).
    fn env(&self) -> Vec<String>;
    /// The variables that allow people (`TELEGRAM_ALLOWED_USERS`) and everyone.
    fn allowlist_var(&self) -> &'static str;
    fn allow_all_var(&self) -> &'static str;
    /// The platform's message limit, and the length of a text as the person sees it.
    fn max_len(&self) -> usize;
    fn measure(&self, shown: &str) -> usize;
    /// How many people can write (the web chat has one: the login token's holder).
    fn people(&self) -> u32 {
        u32::MAX
    }
    /// Person `n` (1, 2, …, at most [`PlatformFake::people`]) as the platform names users.
    fn person(&self, n: u32) -> String;
    /// The direct chat with `person`, and a group chat (asked only when
    /// [`PlatformFake::has_groups`]).
    fn dm_chat(&self, person: &str) -> String;
    fn group_chat(&self) -> String;
    /// Whether the platform has group chats the bot is in (the WhatsApp Cloud API has none).
    fn has_groups(&self) -> bool {
        true
    }
    /// Whether the bot's messages can be edited (on WhatsApp they cannot).
    fn edits(&self) -> bool {
        true
    }
    /// `person` writes `text` in `chat`; in a group, `addressed` mentions the bot.
    fn write(&self, chat: &str, person: &str, text: &str, addressed: bool);
    /// What the bot's messages in `chat` show (markup removed), in order.
    fn shown(&self, chat: &str) -> Vec<String>;
    /// When each of those messages arrived.
    fn sent_at(&self, chat: &str) -> Vec<Instant>;
    /// The prompts with choices the bot sent to `chat`.
    fn prompts(&self, chat: &str) -> Vec<ShownPrompt>;
    /// `person` presses the choice labelled `label`; returns the press's id.
    fn press(&self, chat: &str, person: &str, prompt: &ShownPrompt, label: &str) -> String;
    /// Whether the platform saw the press acknowledged, and when.
    fn acknowledged(&self, press_id: &str) -> Option<Instant>;
    /// The working-indicator events in `chat`, in order.
    fn working(&self, chat: &str) -> Vec<(Instant, WorkingEvent)>;
    /// When each call touching `chat` came (sends, edits, working indicators, read
    /// receipts: everything the platform counts against the chat's limit), in order.
    fn chat_calls(&self, chat: &str) -> Vec<Instant>;
    /// The platform's limit for one chat: (calls per second, burst).
    fn chat_budget(&self) -> (f64, u32);
    /// The next message the bot sends is refused with a server error (HTTP `status`), as
    /// the platform answers when it is having a bad day.
    fn fail_next_send(&self, status: u16);
    /// The next message the bot sends is refused as over the rate limit, with the
    /// platform's hint to wait `seconds`.
    fn rate_limit_next_send(&self, seconds: u64);
    /// The connection of the next message the bot sends is reset, `when` the platform had
    /// or had not yet taken it.
    fn reset_next_send(&self, when: crate::reset::When);
    /// The connection resets armed on the fake's HTTP server.
    fn resets(&self) -> &crate::reset::Resets;
    /// Whether the fake delivers to the daemon's own HTTP server (a webhook platform), so
    /// [`Kit::start`] must tell it where that is.
    fn needs_daemon_http(&self) -> bool {
        false
    }
    /// The daemon's HTTP server listens at `http_addr` (`127.0.0.1:PORT`); called by
    /// [`Kit::start`] after every start when [`PlatformFake::needs_daemon_http`].
    fn attach_daemon(&self, _http_addr: &str) {}
}

/// A fake, a fake LLM and a home for the daemon.
pub struct Kit<F> {
    pub fake: F,
    pub llm: FakeLlm,
    pub home: Home,
    binary: String,
    _dir: tempfile::TempDir,
}

impl<F: PlatformFake> Kit<F> {
    /// A kit where `env` lines are added to the platform's (allowlists, …).
    pub async fn new(fake: F, binary: &str, env: &[String], yaml: &str) -> Kit<F> {
        let llm = FakeLlm::start().await;
        let dir = tempfile::tempdir().unwrap();
        let mut lines = fake.env();
        lines.extend_from_slice(env);
        if let Ok(url) = STORE.try_with(|(_, url, _)| url.clone()) {
            lines.push(format!("HERMES_STORE_URL={url}"));
        }
        let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
        let yaml = format!("{yaml}{}", fake.top_level_yaml());
        let home = Home::with_platform(
            dir.path(),
            &llm.base_url(),
            &fake.platform_yaml(),
            &lines,
            &yaml,
        );
        fake.prepare_home(dir.path());
        Kit {
            fake,
            llm,
            home,
            binary: binary.to_owned(),
            _dir: dir,
        }
    }

    /// A kit where everyone may talk to the bot.
    pub async fn open(fake: F, binary: &str) -> Kit<F> {
        let all = format!("{}=true", fake.allow_all_var());
        Kit::new(fake, binary, &[all], "").await
    }

    /// Start the daemon; a fake that delivers to the daemon's HTTP server learns its
    /// address (waiting at most 10 s for the daemon to say it).
    pub fn start(&self) -> Daemon {
        let _ = STORE.try_with(|(_, _, started)| started.store(true, Ordering::Relaxed));
        let daemon = Daemon::start(&self.binary, &self.home, &[]);
        if self.fake.needs_daemon_http() {
            let deadline = Instant::now() + Duration::from_secs(10);
            let addr = loop {
                if let Some(addr) = daemon.http_addr() {
                    break addr;
                }
                if Instant::now() >= deadline {
                    panic!(
                        "the daemon did not say where its HTTP server listens within 10 s:\n{}",
                        daemon.log_text()
                    );
                }
                std::thread::sleep(Duration::from_millis(20));
            };
            self.fake.attach_daemon(&addr);
        }
        daemon
    }

    /// Wait until `chat` shows at least `count` messages.
    pub async fn shown(&self, chat: &str, count: usize) -> Vec<String> {
        eventually(WAIT, &format!("{count} messages in {chat}"), || {
            let shown = self.fake.shown(chat);
            (shown.len() >= count).then_some(shown)
        })
        .await
    }

    /// A directory the agent's `rm -rf` may target (in the working directory, which
    /// commands can reach); it exists until the command ran.
    pub fn victim(&self, name: &str) -> std::path::PathBuf {
        let dir = self.home.dir.join("work").join(name);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("precious.txt"), "data").unwrap();
        dir
    }
}

/// Nothing more happens for a while.
async fn settle() {
    tokio::time::sleep(Duration::from_millis(800)).await;
}

/// Whether the platform has a single person (the web chat: whoever holds the login
/// token), so a scenario about another person has nothing to check; said on stderr.
fn has_one_person<F: PlatformFake>(fake: &F) -> bool {
    let one = fake.people() < 2;
    if one {
        eprintln!(
            "skipped: the platform has one person (the web chat's token holder); a request without the login is refused at the door, tested with the platform itself"
        );
    }
    one
}

/// A person writes to the bot directly and gets the model's answer, once.
pub async fn a_direct_message_is_answered<F: PlatformFake>(fake: F, binary: &str) {
    let kit = Kit::open(fake, binary).await;
    kit.llm.push(Reply::text("Hello **there**"));
    let _d = kit.start();
    let alice = kit.fake.person(1);
    let chat = kit.fake.dm_chat(&alice);
    kit.fake.write(&chat, &alice, "hi", true);
    let shown = kit.shown(&chat, 1).await;
    assert_eq!(shown[0], "Hello there");
    assert_eq!(last_user_text(&kit.llm.requests()[0]), "hi");
    settle().await;
    assert_eq!(kit.fake.shown(&chat).len(), 1, "answered once");
}

/// `check-config --online` asks the platform who the bot is (and the model's endpoint for
/// its models): both take what is configured, so it says so and exits 0.
pub async fn the_credentials_check_says_who_the_bot_is<F: PlatformFake>(fake: F, binary: &str) {
    let kit = Kit::open(fake, binary).await;
    let (binary, home) = (kit.binary.clone(), kit.home.dir.clone());
    let check = tokio::task::spawn_blocking(move || {
        std::process::Command::new(binary)
            .args(["check-config", "--online", "--home"])
            .arg(home)
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let out = String::from_utf8_lossy(&check.stdout);
    assert!(check.status.success(), "{out}");
    assert!(out.contains(": credentials taken: "), "{out}");
    assert!(out.contains("answers, key taken"), "{out}");
}

/// In a group the bot answers only messages addressed to it.
pub async fn a_group_is_answered_only_when_addressed<F: PlatformFake>(fake: F, binary: &str) {
    if !fake.has_groups() {
        eprintln!("skipped: the platform has no group chats, so there is nothing to address");
        return;
    }
    let kit = Kit::open(fake, binary).await;
    kit.llm.push(Reply::text("you called?"));
    let _d = kit.start();
    let (alice, group) = (kit.fake.person(1), kit.fake.group_chat());
    kit.fake
        .write(&group, &alice, "talking among ourselves", false);
    kit.fake.write(&group, &alice, "what time is it?", true);
    assert_eq!(kit.shown(&group, 1).await[0], "you called?");
    settle().await;
    let requests = kit.llm.requests();
    assert_eq!(
        requests.len(),
        1,
        "only the addressed message reached the model"
    );
    assert_eq!(last_user_text(&requests[0]), "what time is it?");
}

/// A reply longer than the platform takes is split into messages that each fit as shown,
/// escapes and code blocks included, and nothing is lost.
pub async fn a_long_reply_is_split_under_the_limit<F: PlatformFake>(fake: F, binary: &str) {
    let kit = Kit::open(fake, binary).await;
    let max = kit.fake.max_len();
    let lines = max * 3 / 40 + 10;
    let code: String = (0..lines)
        .map(|i| format!("if a<b && c>d {{ step({i}); }}\n"))
        .collect();
    let prose: String = (0..lines)
        .map(|i| format!("Point {i} & more <here>.\n\n"))
        .collect();
    kit.llm
        .push(Reply::text(format!("{prose}```rust\n{code}```\nThe end.")));
    let _d = kit.start();
    let alice = kit.fake.person(1);
    let chat = kit.fake.dm_chat(&alice);
    kit.fake.write(&chat, &alice, "write a lot", true);
    let shown = eventually(WAIT, "the last part", || {
        let shown = kit.fake.shown(&chat);
        shown
            .last()
            .is_some_and(|l| l.contains("The end."))
            .then_some(shown)
    })
    .await;
    assert!(shown.len() >= 2, "{} messages", shown.len());
    for part in &shown {
        let length = kit.fake.measure(part);
        assert!(
            length <= max,
            "a message of {length} over the limit of {max}"
        );
    }
    let all = shown.join("\n");
    for i in 0..lines {
        assert!(all.contains(&format!("step({i})")), "code line {i} lost");
        assert!(
            all.contains(&format!("Point {i} & more <here>.")),
            "point {i} lost"
        );
    }
}

/// A dangerous command waits for a person; pressing "Allow once" is acknowledged at once
/// and runs exactly that command; the prompt then shows the outcome.
pub async fn an_approval_by_choice_is_acknowledged_and_runs<F: PlatformFake>(
    fake: F,
    binary: &str,
) {
    let kit = Kit::open(fake, binary).await;
    let target = kit.victim("approved");
    kit.llm
        .push(Reply::terminal(&format!("rm -rf {}", target.display())));
    kit.llm.push(Reply::text("done"));
    let _d = kit.start();
    let alice = kit.fake.person(1);
    let chat = kit.fake.dm_chat(&alice);
    kit.fake.write(&chat, &alice, "clean up", true);
    let prompt = eventually(WAIT, "the approval prompt", || {
        kit.fake.prompts(&chat).first().cloned()
    })
    .await;
    assert!(prompt.text.contains(&target.display().to_string()));
    assert!(target.exists(), "nothing runs before the decision");
    let pressed = Instant::now();
    let press = kit.fake.press(&chat, &alice, &prompt, "Allow once");
    let acked = eventually(WAIT, "the press acknowledged", || {
        kit.fake.acknowledged(&press)
    })
    .await;
    assert!(acked.duration_since(pressed) < Duration::from_secs(3));
    eventually(WAIT, "the command", || (!target.exists()).then_some(())).await;
    eventually(WAIT, "the answer", || {
        kit.fake
            .shown(&chat)
            .iter()
            .any(|s| s == "done")
            .then_some(())
    })
    .await;
}

/// Alice (person 1) asks the agent for something that makes it want `rm -rf target`; once
/// its prompt shows: the chat it shows in, the chat where `other` sees it (the same group,
/// or, on a platform without groups, their own chat) and the prompt.
async fn alice_asks_to_remove<F: PlatformFake>(
    kit: &Kit<F>,
    target: &std::path::Path,
    other: &str,
) -> (String, String, ShownPrompt) {
    kit.llm
        .push(Reply::terminal(&format!("rm -rf {}", target.display())));
    kit.llm.push(Reply::text("done"));
    let alice = kit.fake.person(1);
    let (chat, others_chat) = if kit.fake.has_groups() {
        let group = kit.fake.group_chat();
        (group.clone(), group)
    } else {
        (kit.fake.dm_chat(&alice), kit.fake.dm_chat(other))
    };
    kit.fake.write(&chat, &alice, "clean up", true);
    let prompt = eventually(WAIT, "the approval prompt", || {
        kit.fake.prompts(&chat).first().cloned()
    })
    .await;
    (chat, others_chat, prompt)
}

/// A press by someone who is not allowed is acknowledged but decides nothing. In a group
/// the stranger presses the prompt they see; on a platform without groups the stranger
/// answers the prompt from their own chat (a forged reply naming the prompt's message).
pub async fn a_press_by_a_stranger_is_refused<F: PlatformFake>(fake: F, binary: &str) {
    if has_one_person(&fake) {
        return;
    }
    let probe_alice = fake.person(1);
    let allow = format!("{}={probe_alice}", fake.allowlist_var());
    let kit = Kit::new(fake, binary, &[allow], "").await;
    let target = kit.victim("guarded");
    let _d = kit.start();
    let (alice, mallory) = (kit.fake.person(1), kit.fake.person(3));
    let (chat, mallory_chat, prompt) = alice_asks_to_remove(&kit, &target, &mallory).await;
    let press = kit
        .fake
        .press(&mallory_chat, &mallory, &prompt, "Allow once");
    eventually(WAIT, "the stranger's press acknowledged", || {
        kit.fake.acknowledged(&press)
    })
    .await;
    settle().await;
    assert!(target.exists(), "a stranger's press decided nothing");
    kit.fake.press(&chat, &alice, &prompt, "Allow once");
    eventually(WAIT, "Alice's decision", || {
        (!target.exists()).then_some(())
    })
    .await;
}

/// An approval is decided only by the person whose turn asked for it: another allowed
/// member's press is acknowledged but decides nothing, and their `/approve` finds nothing
/// of theirs waiting; the asker then decides. In a group both see the prompt; on a
/// platform without groups the other member answers from their own chat.
pub async fn a_press_by_another_member_is_refused<F: PlatformFake>(fake: F, binary: &str) {
    if has_one_person(&fake) {
        return;
    }
    let allow = format!(
        "{}={},{}",
        fake.allowlist_var(),
        fake.person(1),
        fake.person(2)
    );
    let kit = Kit::new(fake, binary, &[allow], "").await;
    let target = kit.victim("owned");
    let _d = kit.start();
    let (alice, bob) = (kit.fake.person(1), kit.fake.person(2));
    let (chat, bob_chat, prompt) = alice_asks_to_remove(&kit, &target, &bob).await;
    let press = kit.fake.press(&bob_chat, &bob, &prompt, "Allow once");
    eventually(WAIT, "Bob's press acknowledged", || {
        kit.fake.acknowledged(&press)
    })
    .await;
    let before = kit.fake.shown(&bob_chat).len();
    kit.fake.write(&bob_chat, &bob, "/approve", true);
    let refusal = eventually(WAIT, "Bob's /approve answered", || {
        kit.fake.shown(&bob_chat).get(before..).and_then(|new| {
            new.iter()
                .find(|s| s.contains("None of your commands"))
                .cloned()
        })
    })
    .await;
    assert!(refusal.contains("waiting for approval"), "{refusal}");
    settle().await;
    assert!(target.exists(), "another member's press decided nothing");
    kit.fake.press(&chat, &alice, &prompt, "Allow once");
    eventually(WAIT, "Alice's decision", || {
        (!target.exists()).then_some(())
    })
    .await;
}

/// With admins listed (`allow_admin_from`, `group_allow_admin_from`), the others are
/// users: a user cannot allow a command for good, cannot run an admin's command
/// (`/sethome`) and is told their tier by `/whoami`; an admin decides a user's request in
/// a group (on a platform without groups, the asker does).
pub async fn tiers_keep_admin_commands_and_standing_approvals_for_admins<F: PlatformFake>(
    fake: F,
    binary: &str,
) {
    if has_one_person(&fake) {
        return;
    }
    let (alice, bob, carol) = (fake.person(1), fake.person(2), fake.person(4));
    let allow = format!("{}={alice},{bob},{carol}", fake.allowlist_var());
    // Lines indented to the platform's own section, which `platforms:` ends with.
    let tiers =
        format!("    allow_admin_from: [\"{carol}\"]\n    group_allow_admin_from: [\"{carol}\"]\n");
    let kit = Kit::new(fake, binary, &[allow], &tiers).await;
    let target = kit.victim("tiered");
    let _d = kit.start();
    let (chat, _, prompt) = alice_asks_to_remove(&kit, &target, &bob).await;
    let press = kit.fake.press(&chat, &alice, &prompt, "Always allow");
    eventually(WAIT, "Alice's press acknowledged", || {
        kit.fake.acknowledged(&press)
    })
    .await;
    settle().await;
    assert!(target.exists(), "a user allowed a command for good");

    let bobs_chat = if kit.fake.has_groups() {
        chat.clone()
    } else {
        kit.fake.dm_chat(&bob)
    };
    let before = kit.fake.shown(&bobs_chat).len();
    kit.fake.write(&bobs_chat, &bob, "/sethome", true);
    let refused = eventually(WAIT, "Bob's /sethome answered", || {
        kit.fake
            .shown(&bobs_chat)
            .get(before..)
            .and_then(|new| new.iter().find(|s| s.contains("/sethome")).cloned())
    })
    .await;
    assert!(refused.contains("for the admins here"), "{refused}");
    let before = kit.fake.shown(&bobs_chat).len();
    kit.fake.write(&bobs_chat, &bob, "/whoami", true);
    let whoami = eventually(WAIT, "Bob's /whoami answered", || {
        kit.fake
            .shown(&bobs_chat)
            .get(before..)
            .and_then(|new| new.iter().find(|s| s.contains("Tier:")).cloned())
    })
    .await;
    assert!(whoami.contains("Tier: user"), "{whoami}");
    assert!(!whoami.contains("/sethome"), "{whoami}");

    let decider = if kit.fake.has_groups() {
        &carol
    } else {
        &alice
    };
    kit.fake.press(&chat, decider, &prompt, "Allow once");
    eventually(WAIT, "the decision", || (!target.exists()).then_some(())).await;
}

/// While a turn runs the working indicator is shown (and refreshed); once the answer is
/// out it is taken down (or fades: nothing is shown after the answer).
pub async fn the_working_indicator_is_shown_and_ended<F: PlatformFake>(fake: F, binary: &str) {
    let kit = Kit::open(fake, binary).await;
    kit.llm.push(Reply::Delayed(
        Duration::from_millis(1500),
        Box::new(Reply::text("thought about it")),
    ));
    let _d = kit.start();
    let alice = kit.fake.person(1);
    let chat = kit.fake.dm_chat(&alice);
    kit.fake.write(&chat, &alice, "think", true);
    kit.shown(&chat, 1).await;
    settle().await;
    let answered = kit.fake.sent_at(&chat)[0];
    let events = kit.fake.working(&chat);
    let shown: Vec<Instant> = events
        .iter()
        .filter(|(_, e)| *e == WorkingEvent::Shown)
        .map(|(at, _)| *at)
        .collect();
    assert!(
        shown.first().is_some_and(|at| *at < answered),
        "shown while working: {events:?}"
    );
    assert!(
        shown.iter().all(|at| *at <= answered),
        "still shown after the answer: {events:?}"
    );
    if let Some(ended) = events.iter().rposition(|(_, e)| *e == WorkingEvent::Ended) {
        let last_shown = events.iter().rposition(|(_, e)| *e == WorkingEvent::Shown);
        assert!(last_shown < Some(ended), "taken down last: {events:?}");
    }
}

/// With streaming on, the answer shows as one message that grows as the model writes,
/// edited in place until it is whole: never a second copy. On a platform without edits
/// the answer shows once it is whole, as exactly one message: never a partial copy.
pub async fn a_streamed_reply_is_one_message_edited_in_place<F: PlatformFake>(
    fake: F,
    binary: &str,
) {
    let edits = fake.edits();
    let all = format!("{}=true", fake.allow_all_var());
    let streaming = "streaming:\n  enabled: true\n  edit_interval: 0.4\n  buffer_threshold: 5\n";
    let kit = Kit::new(fake, binary, &[all], streaming).await;
    let answer = "The quick brown fox jumps over the lazy dog, then keeps running far away.";
    kit.llm.push(Reply::Paced {
        text: answer.to_owned(),
        pieces: 10,
        every: Duration::from_millis(200),
    });
    let _d = kit.start();
    let alice = kit.fake.person(1);
    let chat = kit.fake.dm_chat(&alice);
    kit.fake.write(&chat, &alice, "tell me a story", true);
    if !edits {
        let first = eventually(WAIT, "the answer", || {
            let shown = kit.fake.shown(&chat);
            (!shown.is_empty()).then_some(shown)
        })
        .await;
        assert_eq!(first, [answer], "the whole answer, as one message");
        settle().await;
        assert_eq!(kit.fake.shown(&chat), [answer], "still one message");
        return;
    }
    let partial = eventually(WAIT, "a part of the answer", || {
        let shown = kit.fake.shown(&chat);
        (shown.len() == 1 && !shown[0].is_empty() && shown[0] != answer).then(|| shown[0].clone())
    })
    .await;
    // The part shown so far, its cursor aside, is how the answer begins.
    let so_far = partial.trim_end_matches(|c: char| !c.is_alphanumeric());
    assert!(answer.starts_with(so_far), "{partial:?}");
    eventually(WAIT, "the whole answer", || {
        (kit.fake.shown(&chat) == [answer]).then_some(())
    })
    .await;
    settle().await;
    assert_eq!(kit.fake.shown(&chat), [answer], "one message, edited");
}

/// Sends, edits and working indicators together never go over the platform's limit for one
/// chat, however fast the person writes and the answers stream.
pub async fn the_chat_limit_holds_for_sends_edits_and_indicators_together<F: PlatformFake>(
    fake: F,
    binary: &str,
) {
    let all = format!("{}=true", fake.allow_all_var());
    let streaming = "streaming:\n  enabled: true\n  edit_interval: 0.05\n  buffer_threshold: 5\n";
    let kit = Kit::new(fake, binary, &[all], streaming).await;
    let (per_second, burst) = kit.fake.chat_budget();
    for n in 0..4 {
        kit.llm.push(Reply::Paced {
            text: format!("Answer {n}: a long streamed answer, written a few words at a time."),
            pieces: 24,
            every: Duration::from_millis(40),
        });
    }
    let _d = kit.start();
    let alice = kit.fake.person(1);
    let chat = kit.fake.dm_chat(&alice);
    // Each question comes as soon as the one before is answered (one arriving during an
    // answer would interrupt it, the default busy mode).
    let whole = |n: usize| {
        let shown = kit.fake.shown(&chat);
        let whole = shown
            .iter()
            .filter(|m| m.ends_with("a few words at a time."));
        (whole.count() >= n).then_some(())
    };
    for n in 0..4 {
        kit.fake
            .write(&chat, &alice, &format!("question {n}"), true);
        eventually(WAIT, &format!("answer {n}"), || whole(n + 1)).await;
    }
    settle().await;
    let calls = kit.fake.chat_calls(&chat);
    assert!(
        calls.len() > 4,
        "sends, edits and indicators: {}",
        calls.len()
    );
    // A token bucket allows at most `burst + rate × window` calls in any window (plus half
    // a second of the rate: calls delayed on their way arrive closer than they left).
    for (i, first) in calls.iter().enumerate() {
        for (j, last) in calls.iter().enumerate().skip(i) {
            let window = last.duration_since(*first).as_secs_f64();
            let allowed = f64::from(burst) + per_second * (window + 0.5);
            let made = (j - i + 1) as f64;
            assert!(
                made <= allowed,
                "{made} calls in {window:.2} s (at most {allowed:.1}): {calls:?}"
            );
        }
    }
}

/// Someone not on the allowlist reaches neither the model nor a command, in a DM or a
/// group: a DM gets a pairing code (once), a group nothing.
pub async fn a_stranger_reaches_neither_the_model_nor_a_command<F: PlatformFake>(
    fake: F,
    binary: &str,
) {
    if has_one_person(&fake) {
        return;
    }
    let owner = fake.person(1);
    let allow = format!("{}={owner}", fake.allowlist_var());
    let kit = Kit::new(fake, binary, &[allow], "").await;
    let _d = kit.start();
    let stranger = kit.fake.person(2);
    let dm = kit.fake.dm_chat(&stranger);
    for text in [
        "hello",
        "/new",
        "/approve",
        "/model other-model",
        "/usage",
        "/stop",
    ] {
        kit.fake.write(&dm, &stranger, text, true);
    }
    let group = kit.fake.has_groups().then(|| kit.fake.group_chat());
    if let Some(group) = &group {
        kit.fake.write(group, &stranger, "hello bot", true);
        kit.fake.write(group, &stranger, "/new", true);
    }
    // The owner last: once they are answered, the stranger's messages were handled.
    let owner_dm = kit.fake.dm_chat(&owner);
    kit.fake.write(&owner_dm, &owner, "it's me", true);
    kit.shown(&owner_dm, 1).await;
    settle().await;
    let requests = kit.llm.requests();
    assert_eq!(requests.len(), 1, "only the owner reached the model");
    assert_eq!(last_user_text(&requests[0]), "it's me");
    let told = kit.fake.shown(&dm);
    assert_eq!(told.len(), 1, "one pairing code, nothing else: {told:?}");
    assert!(told[0].to_lowercase().contains("pair"), "{told:?}");
    if let Some(group) = &group {
        assert_eq!(
            kit.fake.shown(group),
            Vec::<String>::new(),
            "silence in a group"
        );
    }
}

/// In a DM that has been answered once, `fault` is armed and a second message written;
/// its answer, `reply`, must show, once. Returns how long it took.
async fn answered_once_through<F: PlatformFake>(
    fake: F,
    binary: &str,
    reply: &str,
    fault: impl FnOnce(&F),
) -> (Kit<F>, Duration) {
    let kit = Kit::open(fake, binary).await;
    let daemon = kit.start();
    let alice = kit.fake.person(1);
    let chat = kit.fake.dm_chat(&alice);
    kit.fake.write(&chat, &alice, "warm up", true);
    kit.shown(&chat, 1).await;
    kit.llm.push(Reply::text(reply));
    fault(&kit.fake);
    let asked = Instant::now();
    kit.fake.write(&chat, &alice, "are you there?", true);
    let shown = kit.shown(&chat, 2).await;
    let took = asked.elapsed();
    assert_eq!(shown[1], reply);
    settle().await;
    assert_eq!(
        kit.fake.shown(&chat).len(),
        2,
        "shown once: {:?}",
        kit.fake.shown(&chat)
    );
    drop(daemon);
    (kit, took)
}

/// A send the platform refuses with a server error, then with a rate limit, is tried again
/// (after the wait the platform asked for) and shows once; the person sees no error.
pub async fn a_refused_send_is_retried_after_the_wait_and_shows_once<F: PlatformFake>(
    fake: F,
    binary: &str,
) {
    let (_, took) = answered_once_through(fake, binary, "through the storm", |fake| {
        fake.fail_next_send(502);
        fake.rate_limit_next_send(2);
    })
    .await;
    assert!(
        took >= Duration::from_secs(2),
        "the rate limit's wait was kept"
    );
}

/// A message whose connection is reset before the platform took it is sent again, and
/// shows once.
pub async fn a_send_cut_by_a_connection_reset_is_sent_again_and_shows_once<F: PlatformFake>(
    fake: F,
    binary: &str,
) {
    let (kit, _) = answered_once_through(fake, binary, "through the reset", |fake| {
        fake.reset_next_send(crate::reset::When::BeforeHandling)
    })
    .await;
    assert_eq!(
        kit.fake.resets().cut(),
        1,
        "the send's connection was reset"
    );
}

/// A daemon killed in the middle of a turn answers the message after its restart, once.
pub async fn a_restart_mid_turn_loses_nothing<F: PlatformFake>(fake: F, binary: &str) {
    let kit = Kit::open(fake, binary).await;
    kit.llm.push(Reply::Delayed(
        Duration::from_secs(30),
        Box::new(Reply::text("never seen")),
    ));
    kit.llm.push(Reply::text("answered after the restart"));
    let mut first = kit.start();
    let alice = kit.fake.person(1);
    let chat = kit.fake.dm_chat(&alice);
    kit.fake.write(&chat, &alice, "are you there?", true);
    eventually(WAIT, "the first model call", || {
        (!kit.llm.requests().is_empty()).then_some(())
    })
    .await;
    first.kill();
    let _second = kit.start();
    assert_eq!(kit.shown(&chat, 1).await[0], "answered after the restart");
    assert_eq!(last_user_text(&kit.llm.requests()[1]), "are you there?");
    settle().await;
    assert_eq!(kit.fake.shown(&chat).len(), 1, "answered once");
}

/// Every scenario of the kit as a test, for one platform: `conformance_suite!(start_fake,
/// daemon_binary)`, where `start_fake` is an async expression making the platform's fake;
/// `conformance_suite!(postgres: start_fake, daemon_binary)` runs them with the daemons on
/// the PostgreSQL store.
#[macro_export]
macro_rules! conformance_suite {
    (postgres: $start:expr, $binary:expr) => {
        $crate::conformance_suite!(@all on_postgres, $start, $binary);
    };
    ($start:expr, $binary:expr) => {
        $crate::conformance_suite!(@all on_sqlite, $start, $binary);
    };
    (@all $engine:ident, $start:expr, $binary:expr) => {
        $crate::conformance_suite!(@each $engine, $start, $binary;
            a_direct_message_is_answered,
            a_group_is_answered_only_when_addressed,
            a_long_reply_is_split_under_the_limit,
            an_approval_by_choice_is_acknowledged_and_runs,
            a_press_by_a_stranger_is_refused,
            a_press_by_another_member_is_refused,
            tiers_keep_admin_commands_and_standing_approvals_for_admins,
            a_stranger_reaches_neither_the_model_nor_a_command,
            a_refused_send_is_retried_after_the_wait_and_shows_once,
            a_send_cut_by_a_connection_reset_is_sent_again_and_shows_once,
            the_working_indicator_is_shown_and_ended,
            the_chat_limit_holds_for_sends_edits_and_indicators_together,
            a_streamed_reply_is_one_message_edited_in_place,
            a_restart_mid_turn_loses_nothing,
            the_credentials_check_says_who_the_bot_is);
    };
    (@each $engine:ident, $start:expr, $binary:expr; $($scenario:ident),*) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $scenario() {
                let fake = $start.await;
                $crate::conformance::$engine($crate::conformance::$scenario(fake, $binary)).await;
            }
        )*
    };
}
