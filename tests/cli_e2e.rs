//! The command line as an operator meets it: check-config's verdict and exit status, its
//! output cut short by its reader, and the management commands' exit statuses and help.

mod common;

use common::*;

#[test]
fn an_invalid_config_exits_78_and_check_config_masks_secrets() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("config.yaml"),
        "model:\n  default: m\n  base_url: not-a-url\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join(".env"),
        "TELEGRAM_BOT_TOKEN=123:SECRETSECRET\n",
    )
    .unwrap();
    let run = std::process::Command::new(BIN)
        .args(["run", "--home"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(78));
    assert!(String::from_utf8_lossy(&run.stderr).contains("model.base_url"));

    std::fs::write(dir.path().join("config.yaml"), "model:\n  default: m\n  base_url: http://127.0.0.1:9/v1\nsecurity:\n  tirith_enabled: false\n").unwrap();
    let check = std::process::Command::new(BIN)
        .args(["check-config", "--home"])
        .arg(dir.path())
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&check.stdout);
    assert!(check.status.success(), "{out}");
    assert!(out.contains("security.tirith_enabled") && out.contains("Not used"));
    assert!(
        out.contains("123… (16 chars)") && !out.contains("SECRETSECRET"),
        "{out}"
    );
}

/// `check-config | head -1`: the command ends quietly when its reader goes away (killed by
/// SIGPIPE, as Unix tools are), not with a panic and exit status 101.
#[test]
fn check_config_cut_short_by_its_reader_ends_quietly() {
    use std::os::unix::process::ExitStatusExt;
    let dir = tempfile::tempdir().unwrap();
    let home = offline_home(dir.path());
    // The reader is gone before the command writes a byte, as when `head -1` has its
    // line: every write meets a closed pipe.
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let child = std::process::Command::new(BIN)
        .args(["check-config", "--home"])
        .arg(&home.dir)
        .stdout(writer)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_ne!(output.status.code(), Some(101), "{stderr}");
    assert_eq!(
        output.status.signal(),
        Some(13),
        "ended by SIGPIPE: {stderr}"
    );
}

/// check-config fails (78, like `run`) when no platform is enabled, and says a missing
/// `config.yaml` is missing instead of "no model name is set".
#[test]
fn check_config_fails_without_a_platform_and_names_a_missing_config_file() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join(".env"), "").unwrap();
    let check = |dir: &std::path::Path| {
        let out = std::process::Command::new(BIN)
            .args(["check-config", "--home"])
            .arg(dir)
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    };
    let (code, out) = check(dir.path());
    assert_eq!(code, Some(78), "{out}");
    assert!(out.contains("config.yaml does not exist"), "{out}");
    assert!(!out.contains("no model name is set"), "{out}");

    std::fs::write(
        dir.path().join("config.yaml"),
        "model:\n  default: m\n  base_url: http://127.0.0.1:9/v1\n",
    )
    .unwrap();
    let (code, out) = check(dir.path());
    assert_eq!(code, Some(78), "{out}");
    assert!(
        out.contains("error: platforms: no chat platform is enabled"),
        "{out}"
    );
    assert!(!out.contains("\nOK"), "{out}");
}

/// The management commands agree: 2 when nothing goes by that name or the platform is
/// unknown (listing the known ones), and `--help` says so.
#[test]
fn management_commands_say_not_found_and_unknown_platforms_alike() {
    let dir = tempfile::tempdir().unwrap();
    let home = offline_home(dir.path());
    let run = |args: &[&str]| {
        let out = std::process::Command::new(BIN)
            .args(args)
            .arg("--home")
            .arg(&home.dir)
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, err) = run(&["pairing", "approve", "matrix", "ABCD2345"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("unknown platform \"matrix\"")
            && err.contains("telegram, discord, slack, whatsapp"),
        "{err}"
    );
    for args in [
        &["pairing", "revoke", "telegram", "999"][..],
        &["approvals", "revoke", "no-such-class"],
        &["cron", "pause", "job_00000000"],
    ] {
        let (code, err) = run(args);
        assert_eq!(code, Some(2), "{args:?}: {err}");
    }
    let help = std::process::Command::new(BIN)
        .arg("--help")
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(help.contains("2 nothing by that name"), "{help}");
    let pairing = std::process::Command::new(BIN)
        .args(["pairing", "approve", "--help"])
        .output()
        .unwrap();
    let pairing = String::from_utf8_lossy(&pairing.stdout);
    assert!(
        pairing.contains("telegram, discord, slack or whatsapp"),
        "{pairing}"
    );
}

/// A home whose platform and model point at a closed port: for commands that only read it.
fn offline_home(dir: &std::path::Path) -> hermes_testkit::daemon::Home {
    hermes_testkit::daemon::Home::new(dir, "http://127.0.0.1:9", "http://127.0.0.1:9/v1", &[], "")
}

/// `check-config --online` asks the model's endpoint for its models with the key, and the
/// platform who the bot is: both answering, it says so and exits 0; a token the platform
/// refuses and a model endpoint that is down are problems, and the status is 78.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_config_online_asks_the_model_and_the_platform() {
    use hermes_testkit::telegram::Fault;
    let w = World::allow_all().await;
    let check = |home: std::path::PathBuf| {
        tokio::task::spawn_blocking(move || {
            std::process::Command::new(BIN)
                .args(["check-config", "--online", "--home"])
                .arg(home)
                .output()
                .unwrap()
        })
    };
    let good = check(w.home.dir.clone()).await.unwrap();
    let out = String::from_utf8_lossy(&good.stdout);
    assert!(good.status.success(), "{out}");
    assert!(out.contains("answers, key taken"), "{out}");
    assert!(
        out.contains("platforms.telegram: credentials taken: @hermes_test_bot"),
        "{out}"
    );

    w.telegram.fail_next("getMe", Fault::Unauthorized);
    w.set_model(
        "model:\n  provider: custom\n  default: fake-model\n  base_url: http://127.0.0.1:9/v1\n  api_key: sk-test\n",
        "",
    );
    let bad = check(w.home.dir.clone()).await.unwrap();
    let out = String::from_utf8_lossy(&bad.stdout);
    assert_eq!(bad.status.code(), Some(78), "{out}");
    assert!(out.contains("model.base_url: cannot reach"), "{out}");
    assert!(
        out.contains("platforms.telegram: Telegram refused the bot token"),
        "{out}"
    );
}

/// With no model named, check-config offers the model servers running on this machine
/// (here the fake, in place of Ollama's port), with the lines that would use one; with none
/// answering, it says where to read on. Either way the configuration is not OK yet.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_no_model_check_config_offers_the_servers_running_here() {
    let llm = hermes_testkit::llm::FakeLlm::start().await;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("config.yaml"),
        "platforms:\n  telegram:\n    enabled: true\n",
    )
    .unwrap();
    std::fs::write(dir.path().join(".env"), "TELEGRAM_BOT_TOKEN=1:x\n").unwrap();
    let check = |urls: String| {
        let home = dir.path().to_owned();
        tokio::task::spawn_blocking(move || {
            std::process::Command::new(BIN)
                .args(["check-config", "--home"])
                .arg(home)
                .env(hermes_gateway::llm::local::URLS_VAR, urls)
                .output()
                .unwrap()
        })
    };
    let found = check(format!("http://127.0.0.1:9/v1,{}", llm.base_url()))
        .await
        .unwrap();
    let out = String::from_utf8_lossy(&found.stdout);
    assert_eq!(found.status.code(), Some(78), "{out}");
    assert!(out.contains("Model servers on this machine"), "{out}");
    assert!(
        out.contains(&format!(
            "      default: fake-model\n      base_url: {}",
            llm.base_url()
        )),
        "{out}"
    );
    assert!(
        !out.contains("127.0.0.1:9/v1 serves"),
        "a closed port is not offered: {out}"
    );

    let none = check("http://127.0.0.1:9/v1".into()).await.unwrap();
    let out = String::from_utf8_lossy(&none.stdout);
    assert!(out.contains("No model server answers"), "{out}");
}

/// With `multiplex_profiles`, check-config lists the profiles the daemon would serve and
/// whether each can run.
#[test]
fn check_config_lists_the_profiles_served_beside_the_home() {
    let dir = tempfile::tempdir().unwrap();
    let model = "model:\n  default: m\n  base_url: http://127.0.0.1:9/v1\n";
    let home = dir.path();
    std::fs::write(
        home.join("config.yaml"),
        format!("{model}gateway:\n  multiplex_profiles: true\n"),
    )
    .unwrap();
    std::fs::write(
        home.join(".env"),
        "TELEGRAM_BOT_TOKEN=1:ROOT\nTELEGRAM_ALLOWED_USERS=1\n",
    )
    .unwrap();
    for (name, config) in [("work", model), ("broken", "model: [")] {
        let profile = home.join("profiles").join(name);
        std::fs::create_dir_all(&profile).unwrap();
        std::fs::write(profile.join("config.yaml"), config).unwrap();
        std::fs::write(
            profile.join(".env"),
            "TELEGRAM_BOT_TOKEN=2:WORK\nTELEGRAM_ALLOWED_USERS=2\n",
        )
        .unwrap();
    }
    let check = std::process::Command::new(BIN)
        .args(["check-config", "--home"])
        .arg(home)
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&check.stdout);
    assert!(out.contains("Profiles served beside this home"), "{out}");
    assert!(
        out.contains("work (") && out.contains("serves telegram"),
        "{out}"
    );
    assert!(
        out.contains("broken (") && out.contains("not started"),
        "{out}"
    );
}
