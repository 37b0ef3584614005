//! `hermes-gateway setup` against the fakes: non-interactively for the model and all four
//! platforms (answers from flags, secrets from the environment), each token checked against
//! its platform before it is saved; a refused token (a wrong one, a Discord bot without the
//! Message Content intent) is said and not saved; and once interactively, in a
//! pseudo-terminal, choosing the model server found on this machine and Telegram. No secret
//! is ever shown.

use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hermes_testkit::conformance::PlatformFake;
use hermes_testkit::discord::{self, FakeDiscord};
use hermes_testkit::llm::FakeLlm;
use hermes_testkit::slack::{self, FakeSlack};
use hermes_testkit::telegram::{FakeTelegram, Fault};
use hermes_testkit::whatsapp::FakeWhatsApp;

const BINARY: &str = env!("CARGO_BIN_EXE_hermes-gateway");
const TELEGRAM_TOKEN: &str = "123456:TEST-TOKEN";

/// A home whose config.yaml points each platform at its fake (enabled by a token, as a
/// person's would be), with no model and an empty .env.
fn home_for(dir: &Path, fakes: &[&dyn PlatformFake]) {
    let mut yaml = String::from("platforms:\n");
    for fake in fakes {
        yaml.push_str(&fake.platform_yaml().replace("    enabled: true\n", ""));
    }
    std::fs::write(dir.join("config.yaml"), yaml).unwrap();
    std::fs::write(dir.join(".env"), "").unwrap();
}

fn setup(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> (Option<i32>, String) {
    let out = Command::new(BINARY)
        .arg("setup")
        .arg("--home")
        .arg(dir)
        .args(args)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code(), text)
}

fn secrets() -> Vec<&'static str> {
    vec![
        TELEGRAM_TOKEN,
        discord::TOKEN,
        slack::BOT_TOKEN,
        slack::APP_TOKEN,
        "sk-test-secret",
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn non_interactively_every_token_is_checked_then_saved() {
    let (llm, telegram, discord_fake, slack_fake, whatsapp) = (
        FakeLlm::start().await,
        FakeTelegram::start().await,
        FakeDiscord::start().await,
        FakeSlack::start().await,
        FakeWhatsApp::start().await,
    );
    let dir = tempfile::tempdir().unwrap();
    home_for(
        dir.path(),
        &[&telegram, &discord_fake, &slack_fake, &whatsapp],
    );
    let wa = whatsapp.options();
    let llm_url = llm.base_url();
    let home = dir.path().to_path_buf();
    let given = wa.clone();
    let (code, out) = tokio::task::spawn_blocking(move || {
        let wa = given;
        setup(
            &home,
            &[
                "--non-interactive",
                "--provider",
                "custom",
                "--model",
                "fake-model",
                "--base-url",
                &llm_url,
                "--platforms",
                "telegram,discord,slack,whatsapp",
                "--allowed-users",
                "42",
                "--whatsapp-phone-number-id",
                &wa.phone_number_id,
            ],
            &[
                ("OPENAI_API_KEY", "sk-test-secret"),
                ("TELEGRAM_BOT_TOKEN", TELEGRAM_TOKEN),
                ("DISCORD_BOT_TOKEN", discord::TOKEN),
                ("SLACK_BOT_TOKEN", slack::BOT_TOKEN),
                ("SLACK_APP_TOKEN", slack::APP_TOKEN),
                ("WHATSAPP_CLOUD_ACCESS_TOKEN", &wa.access_token),
                ("WHATSAPP_CLOUD_APP_SECRET", &wa.app_secret),
                ("WHATSAPP_CLOUD_VERIFY_TOKEN", &wa.verify_token),
                ("WHATSAPP_CLOUD_API_VERSION", &wa.api_version),
            ],
        )
    })
    .await
    .unwrap();
    assert_eq!(code, Some(0), "{out}");
    for said in [
        "it answers; saved in config.yaml",
        "telegram takes it",
        "Message Content intent on",
        "Socket Mode token accepted",
        "whatsapp takes it",
        "BotFather",
        "OAuth2 → URL Generator",
        "slack-app-manifest",
        "/whatsapp/webhook",
    ] {
        assert!(out.contains(said), "{said:?} in:\n{out}");
    }
    for secret in secrets() {
        assert!(!out.contains(secret), "a secret shown:\n{out}");
    }
    let env = std::fs::read_to_string(dir.path().join(".env")).unwrap();
    for line in [
        format!("TELEGRAM_BOT_TOKEN={TELEGRAM_TOKEN}"),
        "TELEGRAM_ALLOWED_USERS=42".to_owned(),
        format!("DISCORD_BOT_TOKEN={}", discord::TOKEN),
        format!("SLACK_APP_TOKEN={}", slack::APP_TOKEN),
        format!("WHATSAPP_CLOUD_PHONE_NUMBER_ID={}", wa.phone_number_id),
        "OPENAI_API_KEY=sk-test-secret".to_owned(),
    ] {
        assert!(env.lines().any(|l| l == line), "{line} in .env");
    }
    let mode = std::fs::metadata(dir.path().join(".env"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    let check = Command::new(BINARY)
        .args(["check-config", "--home"])
        .arg(dir.path())
        .env("WHATSAPP_CLOUD_API_VERSION", &wa.api_version)
        .output()
        .unwrap();
    assert!(
        check.status.success(),
        "{}",
        String::from_utf8_lossy(&check.stdout)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_token_is_said_and_not_saved() {
    let telegram = FakeTelegram::start().await;
    let discord_fake = FakeDiscord::start_with(discord::Options {
        // The portal's Message Content toggle left off.
        privileged_intents: 0,
        ..Default::default()
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    home_for(dir.path(), &[&telegram, &discord_fake]);
    telegram.fail_next("getMe", Fault::Unauthorized);
    let home = dir.path().to_path_buf();
    let (code, out) = tokio::task::spawn_blocking(move || {
        setup(
            &home,
            &["--non-interactive", "--platforms", "telegram,discord"],
            &[
                ("TELEGRAM_BOT_TOKEN", TELEGRAM_TOKEN),
                ("DISCORD_BOT_TOKEN", discord::TOKEN),
            ],
        )
    })
    .await
    .unwrap();
    assert_eq!(code, Some(78), "{out}");
    assert!(out.contains("Telegram not saved"), "{out}");
    assert!(out.contains("Message Content intent is off"), "{out}");
    assert!(out.contains("Privileged Gateway Intents"), "{out}");
    for secret in secrets() {
        assert!(!out.contains(secret), "a secret shown:\n{out}");
    }
    let env = std::fs::read_to_string(dir.path().join(".env")).unwrap();
    assert!(!env.contains("TOKEN"), "nothing saved: {env}");
}

/// A program's output through a pseudo-terminal (`script`), and its keyboard.
struct Terminal {
    child: std::process::Child,
    seen: Arc<Mutex<Vec<u8>>>,
}

impl Terminal {
    fn wait_for(&self, text: &str) {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let seen = String::from_utf8_lossy(&self.seen.lock().unwrap()).into_owned();
            if seen.contains(text) {
                return;
            }
            assert!(Instant::now() < deadline, "{text:?} never shown:\n{seen}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn keys(&mut self, keys: &str) {
        let stdin = self.child.stdin.as_mut().unwrap();
        stdin.write_all(keys.as_bytes()).unwrap();
        stdin.flush().unwrap();
    }

    fn transcript(&self) -> String {
        String::from_utf8_lossy(&self.seen.lock().unwrap()).into_owned()
    }
}

impl Drop for Terminal {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interactively_in_a_terminal_the_found_server_and_telegram_are_set_up() {
    let Some(script) = hermes_testkit::needs::program("script", "setup in a pseudo-terminal")
    else {
        return;
    };
    let llm = FakeLlm::start().await;
    let telegram = FakeTelegram::start().await;
    let dir = tempfile::tempdir().unwrap();
    home_for(dir.path(), &[&telegram]);
    let command = format!("{BINARY} setup --home {}", dir.path().display());
    let mut child = Command::new(script)
        .args(["-qfec", &command, "/dev/null"])
        .env("HERMES_LOCAL_MODEL_URLS", llm.base_url())
        .env("TERM", "dumb")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let mut stdout = child.stdout.take().unwrap();
    let sink = seen.clone();
    std::thread::spawn(move || {
        let mut buffer = [0u8; 4096];
        while let Ok(n) = stdout.read(&mut buffer) {
            if n == 0 {
                break;
            }
            sink.lock().unwrap().extend_from_slice(&buffer[..n]);
        }
    });
    let mut t = Terminal { child, seen };
    let answers = tokio::task::spawn_blocking(move || {
        t.wait_for("fake-model from");
        t.keys("\r"); // the server found here, offered first
        t.wait_for("saved in config.yaml");
        t.wait_for("Set up Telegram?");
        t.keys("y");
        t.wait_for("Bot token from @BotFather");
        t.keys(&format!("{TELEGRAM_TOKEN}\r"));
        t.wait_for("Who may talk to the bot");
        t.keys("42\r");
        t.wait_for("Set up Discord?");
        t.keys("n");
        t.wait_for("Set up Slack?");
        t.keys("n");
        t.wait_for("Set up WhatsApp");
        t.keys("n");
        t.wait_for("Saved. Start the gateway");
        t.transcript()
    })
    .await
    .unwrap();
    assert!(answers.contains("telegram takes it"), "{answers}");
    assert!(
        !answers.contains(TELEGRAM_TOKEN),
        "the token was shown:\n{answers}"
    );
    let env = std::fs::read_to_string(dir.path().join(".env")).unwrap();
    assert!(
        env.contains(&format!("TELEGRAM_BOT_TOKEN={TELEGRAM_TOKEN}")),
        "{env}"
    );
    assert!(env.contains("TELEGRAM_ALLOWED_USERS=42"), "{env}");
    let yaml = std::fs::read_to_string(dir.path().join("config.yaml")).unwrap();
    assert!(yaml.contains("default: \"fake-model\""), "{yaml}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mistaken_answer_is_said_and_nothing_is_saved() {
    let telegram = FakeTelegram::start().await;
    let dir = tempfile::tempdir().unwrap();
    home_for(dir.path(), &[&telegram]);
    let home = dir.path().to_path_buf();
    let (code, out) = tokio::task::spawn_blocking(move || {
        let unknown_platform = setup(
            &home,
            &["--non-interactive", "--platforms", "telegramm"],
            &[],
        );
        let unknown_provider = setup(
            &home,
            &["--non-interactive", "--provider", "nobody", "--model", "m"],
            &[],
        );
        let odd_value = setup(
            &home,
            &[
                "--non-interactive",
                "--platforms",
                "telegram",
                "--allowed-users",
                "42 # me",
            ],
            &[("TELEGRAM_BOT_TOKEN", TELEGRAM_TOKEN)],
        );
        (
            [unknown_platform.0, unknown_provider.0, odd_value.0],
            format!(
                "{}\n{}\n{}",
                unknown_platform.1, unknown_provider.1, odd_value.1
            ),
        )
    })
    .await
    .unwrap();
    assert_eq!(code, [Some(78); 3], "{out}");
    assert!(out.contains("\"telegramm\" is not a platform"), "{out}");
    assert!(out.contains("\"nobody\" is not a provider"), "{out}");
    assert!(out.contains("TELEGRAM_ALLOWED_USERS has a space"), "{out}");
    let env = std::fs::read_to_string(dir.path().join(".env")).unwrap();
    assert_eq!(env, "", "nothing saved");
}
