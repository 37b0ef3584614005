//! The first run: `hermes-gateway run` with an empty `HOME` makes `~/.hermes` with a
//! commented configuration and the web chat on, answers that no model is chosen yet, offers
//! the model server it finds on this machine (here the fake, at a port the test names), and
//! once the person chooses one in the page, writes `config.yaml` and `.env`, reloads, and
//! answers with it; `check-config` then accepts what was written. With no server, the form's
//! choice is tried against its endpoint before anything is written.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use hermes_testkit::conformance::{PlatformFake, WAIT};
use hermes_testkit::eventually;
use hermes_testkit::llm::{FakeLlm, Reply, last_user_text};
use hermes_testkit::webchat::{Client, FakeWebPage, free_port};
use serde_json::json;

const BINARY: &str = env!("CARGO_BIN_EXE_hermes-gateway");

/// `hermes-gateway run` with nothing but `HOME` (and the test's ports); killed when dropped.
struct FirstRun {
    child: Child,
    log: PathBuf,
    home: PathBuf,
    port: u16,
}

impl Drop for FirstRun {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl FirstRun {
    fn start(dir: &Path, local_urls: &str) -> FirstRun {
        let port = free_port();
        let log = dir.join("daemon.log");
        let child = Command::new(BINARY)
            .arg("run")
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", dir)
            .env("HERMES_LOCAL_MODEL_URLS", local_urls)
            .env("HERMES_WEB_LISTEN", format!("127.0.0.1:{port}"))
            // The webhook server's default port may be taken by another test.
            .env("WHATSAPP_CLOUD_WEBHOOK_PORT", "0")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        FirstRun {
            child,
            log,
            home: dir.join(".hermes"),
            port,
        }
    }

    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The token the daemon made, once it made it.
    async fn token(&self) -> String {
        let path = self.home.join("web-token");
        eventually(WAIT, "the login token", || {
            std::fs::read_to_string(&path)
                .ok()
                .filter(|t| t.trim().len() == 43)
        })
        .await
        .trim()
        .to_owned()
    }

    async fn client(&self, token: &str) -> Client {
        let base = format!("http://127.0.0.1:{}", self.port);
        let deadline = Instant::now() + WAIT;
        loop {
            if let Some(client) = Client::login(&base, token).await {
                return client;
            }
            assert!(
                Instant::now() < deadline,
                "the web chat did not open:\n{}",
                self.log_text()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

fn check_config(home: &Path) -> (bool, String) {
    let out = Command::new(BINARY)
        .args(["check-config", "--home"])
        .arg(home)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_first_run_offers_the_local_server_and_answers_once_it_is_chosen() {
    let llm = FakeLlm::start().await;
    llm.push(Reply::text("Hello from the local model"));
    let dir = tempfile::tempdir().unwrap();
    let daemon = FirstRun::start(dir.path(), &llm.base_url());
    let token = daemon.token().await;
    assert_eq!(mode(&daemon.home), 0o700);
    assert_eq!(mode(&daemon.home.join("config.yaml")), 0o600);
    assert_eq!(mode(&daemon.home.join("web-token")), 0o600);
    let client = daemon.client(&token).await;
    assert_eq!(
        mode(&daemon.home.join("web")),
        0o700,
        "uploads and files are private"
    );
    assert!(
        !daemon.log_text().contains("web.listen: neither"),
        "web.listen is known even when HERMES_WEB_LISTEN wins:\n{}",
        daemon.log_text()
    );
    let page = FakeWebPage::open(daemon.port, &token).await;

    // No model yet: said in the chat, and the server found here is offered.
    page.write("c-first", "operator", "hello?", true);
    let told = eventually(WAIT, "the answer without a model", || {
        page.shown("c-first").first().cloned()
    })
    .await;
    assert!(told.contains("No model is chosen yet"), "{told}");
    assert!(llm.requests().is_empty(), "nothing was asked of any model");
    let (status, setup) = client.get_json("/api/setup").await;
    assert_eq!(status, 200);
    assert!(setup["chosen"].is_null(), "{setup}");
    let offered = &setup["local"][0];
    assert_eq!(offered["base_url"], llm.base_url().trim_end_matches('/'));
    assert!(
        offered["models"]
            .as_array()
            .unwrap()
            .contains(&json!("fake-model")),
        "{setup}"
    );

    // The person confirms it: written, reloaded, answering.
    let (status, said) = client
        .post_json(
            "/api/setup",
            &json!({"provider": offered["provider"], "model": "fake-model", "base_url": offered["base_url"]}),
        )
        .await;
    assert_eq!(status, 200, "{said}");
    let yaml = std::fs::read_to_string(daemon.home.join("config.yaml")).unwrap();
    assert!(yaml.contains("default: \"fake-model\""), "{yaml}");
    assert!(
        yaml.contains("web:\n    enabled: true"),
        "the rest kept: {yaml}"
    );
    assert_eq!(mode(&daemon.home.join("config.yaml")), 0o600);
    let log = daemon.log.clone();
    eventually(WAIT, "the reload", || {
        std::fs::read_to_string(&log)
            .ok()
            .filter(|l| l.contains("reload: restarting the gateway"))
    })
    .await;
    page.write("c-first", "operator", "hello again", true);
    eventually(WAIT, "the model's answer", || {
        page.shown("c-first")
            .iter()
            .any(|m| m == "Hello from the local model")
            .then_some(())
    })
    .await;
    assert_eq!(last_user_text(&llm.requests()[0]), "hello again");
    let (accepted, out) = check_config(&daemon.home);
    assert!(accepted, "{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_no_local_server_the_form_is_tried_before_anything_is_written() {
    let llm = FakeLlm::start().await;
    let closed = format!("http://127.0.0.1:{}/v1", free_port());
    let dir = tempfile::tempdir().unwrap();
    let daemon = FirstRun::start(dir.path(), &closed);
    let token = daemon.token().await;
    let client = daemon.client(&token).await;
    let (_, setup) = client.get_json("/api/setup").await;
    assert_eq!(setup["local"], json!([]), "nothing found here");
    assert!(
        setup["providers"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["name"] == "openrouter" && p["key_var"] == "OPENROUTER_API_KEY"),
        "{setup}"
    );
    // A key kept in .env for OpenRouter.
    let env_path = daemon.home.join(".env");
    let mut env = std::fs::read_to_string(&env_path).unwrap();
    env.push_str("OPENROUTER_API_KEY=sk-or-kept-secret\n");
    std::fs::write(&env_path, env).unwrap();
    let before = std::fs::read_to_string(daemon.home.join("config.yaml")).unwrap();
    let refused = [
        // The kept key would go to an address that is not OpenRouter's.
        json!({"provider": "openrouter", "model": "fake-model", "base_url": "https://192.0.2.1/v1"}),
        // A key over plain http to another machine.
        json!({"provider": "custom", "model": "fake-model", "base_url": "http://192.0.2.1/v1", "api_key": "sk-test-secret"}),
        json!({"provider": "custom", "model": "no-such-model", "base_url": llm.base_url(), "api_key": "sk-test-secret"}),
        json!({"provider": "custom", "model": "fake-model", "base_url": closed, "api_key": "sk-test-secret"}),
        json!({"provider": "custom", "model": "fake-model", "base_url": llm.base_url(), "api_key": "sk x\nEVIL=1"}),
        json!({"provider": "nobody", "model": "fake-model"}),
    ];
    for choice in &refused {
        let (status, said) = client.post_json("/api/setup", choice).await;
        assert_eq!(status, 422, "{choice}: {said}");
        assert!(!said.to_string().contains("sk-test-secret"), "{said}");
        assert!(!said.to_string().contains("sk-or-kept-secret"), "{said}");
    }
    assert_eq!(
        std::fs::read_to_string(daemon.home.join("config.yaml")).unwrap(),
        before,
        "nothing written for a choice that does not work"
    );
    let (status, said) = client
        .post_json(
            "/api/setup",
            &json!({"provider": "custom", "model": "fake-model", "base_url": llm.base_url(), "api_key": "sk-test-secret"}),
        )
        .await;
    assert_eq!(status, 200, "{said}");
    let env = std::fs::read_to_string(daemon.home.join(".env")).unwrap();
    assert!(env.contains("OPENAI_API_KEY=sk-test-secret"), "{env}");
    assert_eq!(mode(&daemon.home.join(".env")), 0o600);
    let (accepted, out) = check_config(&daemon.home);
    assert!(accepted, "{out}");
    assert!(!out.contains("sk-test-secret"), "{out}");
}

/// The login address is said to the person at a terminal, and never into a log: started
/// with its output to a file, the daemon writes no token there; started in a
/// pseudo-terminal (`script`), it prints the address.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_login_address_is_printed_at_a_terminal_and_never_into_a_log() {
    let Some(script) = hermes_testkit::needs::program("script", "the daemon at a terminal") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let closed = format!("http://127.0.0.1:{}/v1", free_port());
    let logged = FirstRun::start(dir.path(), &closed);
    let token = logged.token().await;
    logged.client(&token).await; // up and serving
    drop(logged);
    let log = std::fs::read_to_string(dir.path().join("daemon.log")).unwrap();
    assert!(log.contains("first run"), "{log}");
    assert!(!log.contains(&token), "the token is not in the log:\n{log}");

    let port = free_port();
    let command = format!("{BINARY} run");
    let out = dir.path().join("terminal.txt");
    let mut child = Command::new(script)
        .args(["-qfec", &command])
        .arg(&out)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", dir.path())
        .env("HERMES_LOCAL_MODEL_URLS", &closed)
        .env("HERMES_WEB_LISTEN", format!("127.0.0.1:{port}"))
        .env("WHATSAPP_CLOUD_WEBHOOK_PORT", "0")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let wanted = format!("http://127.0.0.1:{port}/#token={token}");
    let seen = eventually(WAIT, "the address on the terminal", || {
        std::fs::read_to_string(&out)
            .ok()
            .filter(|t| t.contains(&wanted))
    })
    .await;
    assert!(seen.contains("Web chat:"), "{seen}");
    // Ctrl-C at the terminal stops the daemon (killing `script` alone would hang it up,
    // which the daemon takes as SIGHUP, a reload).
    use std::io::Write;
    let _ = child.stdin.as_mut().unwrap().write_all(b"\x03");
    let deadline = Instant::now() + Duration::from_secs(10);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!(
                "the daemon did not stop on Ctrl-C:\n{}",
                std::fs::read_to_string(&out).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
