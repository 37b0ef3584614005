//! The daemon under systemd, end to end: the notify protocol against a datagram socket the
//! test binds (`NOTIFY_SOCKET`, `WATCHDOG_USEC`) — READY once Telegram answered, periodic
//! WATCHDOG, none while the fake platform stalls its long poll, STOPPING and exit 0 on
//! SIGTERM; and a command the agent runs never sees systemd's variables.

mod common;

use std::os::unix::net::UnixDatagram;
use std::time::{Duration, Instant};

use common::*;
use hermes_testkit::daemon::Daemon;
use hermes_testkit::llm::Reply;

/// The datagrams received so far, each with when it came.
fn drain(socket: &UnixDatagram, into: &mut Vec<(Instant, String)>) {
    let mut buf = [0u8; 4096];
    while let Ok(n) = socket.recv(&mut buf) {
        into.push((
            Instant::now(),
            String::from_utf8_lossy(&buf[..n]).into_owned(),
        ));
    }
}

/// Collect datagrams for `how_long`.
fn collect(socket: &UnixDatagram, how_long: Duration) -> Vec<(Instant, String)> {
    let mut got = Vec::new();
    let end = Instant::now() + how_long;
    while Instant::now() < end {
        drain(socket, &mut got);
        std::thread::sleep(Duration::from_millis(20));
    }
    got
}

fn watchdogs(messages: &[(Instant, String)]) -> usize {
    messages
        .iter()
        .filter(|(_, m)| m.lines().any(|l| l == "WATCHDOG=1"))
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn systemd_hears_ready_watchdog_only_while_the_platform_answers_and_stopping() {
    let w = World::allow_all().await;
    w.llm.push(Reply::terminal(
        "echo notify=[$NOTIFY_SOCKET$WATCHDOG_USEC]",
    ));
    w.llm.push(Reply::text("nowhere"));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("notify.sock");
    let socket = UnixDatagram::bind(&path).unwrap();
    socket.set_nonblocking(true).unwrap();
    let mut daemon = Daemon::start(
        BIN,
        &w.home,
        &[
            ("NOTIFY_SOCKET", path.to_str().unwrap()),
            ("WATCHDOG_USEC", "3000000"),
        ],
    );

    // READY=1, with a status naming the platform as live.
    let mut seen = Vec::new();
    wait_for(&socket, &mut seen, "READY=1", 0);
    let ready = seen.iter().find(|(_, m)| m.contains("READY=1")).unwrap();
    assert!(ready.1.contains("STATUS=telegram live"), "{}", ready.1);

    // The daemon's own view, as `service status` shows it.
    let addr = daemon.http_addr().expect("the HTTP address");
    let status: serde_json::Value = reqwest::get(format!("http://{addr}/status"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(status["platforms"][0]["platform"], "telegram", "{status}");
    assert_eq!(status["platforms"][0]["live"], true, "{status}");
    assert_eq!(status["outbox_pending"], 0, "{status}");
    assert_eq!(status["approvals_pending"], 0, "{status}");
    let shown = hermes_gateway::service::describe_status(&status);
    assert!(shown.contains("telegram: live"), "{shown}");

    // A command the agent runs cannot speak for the daemon to systemd.
    w.telegram.dm(ALICE, "where do you report to?");
    w.replies(ALICE, 1).await;
    let second = &w.llm.requests()[1];
    assert!(
        second.to_string().contains("notify=[]"),
        "NOTIFY_SOCKET reached the command: {second}"
    );

    // The scenario moved the counters.
    let metrics = metrics(&addr).await;
    let value = |series: &str| -> f64 {
        metrics
            .lines()
            .find_map(|l| l.strip_prefix(series)?.trim().parse().ok())
            .unwrap_or_else(|| panic!("no {series} in\n{metrics}"))
    };
    assert_eq!(
        value("hermes_messages_in_total{platform=\"telegram\"}"),
        1.0
    );
    assert!(value("hermes_messages_out_total{platform=\"telegram\"}") >= 1.0);
    assert_eq!(
        value("hermes_tool_calls_total{tool=\"terminal\",outcome=\"ok\"}"),
        1.0
    );
    assert_eq!(value("hermes_turn_seconds_count"), 1.0);
    assert_eq!(value("hermes_llm_request_seconds_count"), 2.0);
    assert_eq!(value("hermes_platform_live{platform=\"telegram\"}"), 1.0);
    assert_eq!(value("hermes_outbox_pending"), 0.0);

    // Pings at half the period while Telegram answers.
    let healthy = collect(&socket, Duration::from_secs(4));
    assert!(watchdogs(&healthy) >= 2, "{healthy:?}");

    // The long poll hangs: once the platform has been silent for a period, no more pings.
    w.telegram.stall_polls(true);
    // Deaf means silent for one and a half periods (4.5 s), the last poll up to 2 s old.
    collect(&socket, Duration::from_secs(8));
    let stalled = collect(&socket, Duration::from_secs(4));
    assert_eq!(watchdogs(&stalled), 0, "{stalled:?}");
    assert!(
        stalled
            .iter()
            .any(|(_, m)| m.contains("STATUS=telegram silent")),
        "the status says why: {stalled:?}"
    );

    // It answers again: the pings come back.
    w.telegram.stall_polls(false);
    let recovered = collect(&socket, Duration::from_secs(6));
    assert!(watchdogs(&recovered) >= 1, "{recovered:?}");

    // SIGTERM: STOPPING=1 and a clean exit.
    assert_eq!(daemon.terminate(), Some(0));
    let last = collect(&socket, Duration::from_millis(200));
    let all: Vec<&String> = recovered.iter().chain(&last).map(|(_, m)| m).collect();
    assert!(all.iter().any(|m| m.contains("STOPPING=1")), "{all:?}");
}

/// Send `signal` to the daemon.
fn signal(daemon: &Daemon, signal: &str) {
    std::process::Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(daemon.pid().to_string())
        .status()
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_applies_a_good_configuration_and_refuses_a_bad_one() {
    const BOB: i64 = 777;
    let w = World::new(&[&format!("TELEGRAM_ALLOWED_USERS={ALICE}")], "").await;
    w.llm.push(Reply::text("hello Bob"));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("notify.sock");
    let socket = UnixDatagram::bind(&path).unwrap();
    socket.set_nonblocking(true).unwrap();
    let daemon = Daemon::start(BIN, &w.home, &[("NOTIFY_SOCKET", path.to_str().unwrap())]);
    let mut seen = Vec::new();
    wait_for(&socket, &mut seen, "READY=1", 0);

    // Bob is not allowed: no model call for him.
    w.telegram.dm(BOB, "hi");
    w.replies(BOB, 1).await; // the pairing code
    settle().await;
    assert!(w.llm.requests().is_empty());

    // A configuration with errors is refused; the running one stays.
    let yaml = std::fs::read_to_string(w.home.dir.join("config.yaml")).unwrap();
    std::fs::write(w.home.dir.join("config.yaml"), "model: [unclosed\n").unwrap();
    signal(&daemon, "HUP");
    let log = hermes_testkit::eventually(WAIT, "the refusal", || {
        let log = daemon.log_text();
        log.contains("reload refused").then_some(log)
    })
    .await;
    assert!(!log.contains("reload: restarting"), "{log}");

    // A good one that lets everyone in is applied.
    std::fs::write(w.home.dir.join("config.yaml"), yaml).unwrap();
    let env = std::fs::read_to_string(w.home.dir.join(".env")).unwrap();
    std::fs::write(
        w.home.dir.join(".env"),
        format!("{env}\nTELEGRAM_ALLOW_ALL_USERS=true\n"),
    )
    .unwrap();
    signal(&daemon, "HUP");
    hermes_testkit::eventually(WAIT, "the reload", || {
        daemon
            .log_text()
            .contains("reload: restarting the gateway with the new configuration")
            .then_some(())
    })
    .await;
    assert!(daemon.log_text().contains("platforms.telegram"));
    let mut notices = Vec::new();
    wait_for(&socket, &mut notices, "READY=1", 0);
    let all: Vec<&String> = notices.iter().map(|(_, m)| m).collect();
    assert!(all.iter().any(|m| m.contains("RELOADING=1")), "{all:?}");
    assert!(
        !all.iter().any(|m| m.contains("STOPPING=1")),
        "a reload is not a stop: {all:?}"
    );
    w.telegram.dm(BOB, "and now?");
    let replies = w.replies(BOB, 2).await;
    assert_eq!(replies[1], "hello Bob");
}

/// The unit between `# … would be written:` and `# then:` in `install --dry-run` output.
fn unit_in(dry_run: &str) -> String {
    dry_run
        .lines()
        .skip_while(|l| !l.ends_with("would be written:"))
        .skip(1)
        .take_while(|l| *l != "# then:")
        .map(|l| format!("{l}\n"))
        .collect()
}

#[test]
fn install_dry_run_prints_a_unit_systemd_accepts_and_the_commands() {
    // Not under /tmp: the system unit's private /tmp would hide such a home (refused).
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let home = dir.path().join("hermes-home");
    for (scope, expected) in [
        (
            "--user",
            vec![
                "$ systemctl --user daemon-reload",
                "$ systemctl --user enable --now hermes-gateway.service",
            ],
        ),
        (
            "--system",
            vec![
                "$ systemctl daemon-reload",
                "$ systemctl enable --now hermes-gateway.service",
            ],
        ),
    ] {
        let out = std::process::Command::new(BIN)
            .args(["service", "install", scope, "--dry-run", "--home"])
            .arg(&home)
            .env("HOME", dir.path())
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        for line in expected {
            assert!(
                text.lines().any(|l| l == line),
                "{scope}: no `{line}` in\n{text}"
            );
        }
        let unit = unit_in(&text);
        assert!(
            unit.contains(&format!("run --home \"{}\"", home.display())),
            "{unit}"
        );
        assert!(unit.contains("Type=notify") && unit.contains("WatchdogSec=60"));
        // systemd's own check, where this machine has it.
        let file = dir.path().join("hermes-gateway.service");
        std::fs::write(&file, &unit).unwrap();
        if let Some(analyze) =
            hermes_testkit::needs::program("systemd-analyze", "the unit file's systemd check")
        {
            let verify = std::process::Command::new(analyze)
                .arg("verify")
                .arg(&file)
                .output()
                .unwrap();
            assert!(
                verify.status.success() && verify.stderr.is_empty(),
                "{scope}: systemd-analyze verify: {}",
                String::from_utf8_lossy(&verify.stderr)
            );
        }
    }
}

#[test]
fn install_refuses_a_path_that_would_break_out_of_its_unit_line() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::write(
        home.join("config.yaml"),
        "terminal:\n  cwd: \"/srv/work\\nExecStartPre=+/bin/sh -c id\"\n",
    )
    .unwrap();
    let out = std::process::Command::new(BIN)
        .args(["service", "install", "--system", "--dry-run", "--home"])
        .arg(&home)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("control character"), "{err}");
    assert!(!String::from_utf8_lossy(&out.stdout).contains("ExecStartPre"));
}

#[test]
fn without_systemd_the_service_commands_say_so() {
    let empty = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(BIN)
        .args(["service", "start", "--user"])
        .env("PATH", empty.path())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("does not run systemd"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_lets_a_running_turn_finish_and_sends_its_answer_before_exiting() {
    let w = World::allow_all().await;
    w.llm.push(Reply::Delayed(
        Duration::from_secs(2),
        Box::new(Reply::text("finished before the stop")),
    ));
    let mut d = w.start();
    w.telegram.dm(ALICE, "take your time");
    let llm = w.llm.clone();
    hermes_testkit::eventually(WAIT, "the model call", || {
        (!llm.requests().is_empty()).then_some(())
    })
    .await;
    let asked_to_stop = Instant::now();
    assert_eq!(d.terminate(), Some(0), "{}", d.log_text());
    assert!(
        asked_to_stop.elapsed() >= Duration::from_millis(1500),
        "it waited for the turn"
    );
    assert_eq!(
        w.telegram.sent_texts(ALICE),
        ["finished before the stop"],
        "the answer went out before the exit"
    );
    let open: i64 = rusqlite::Connection::open(w.home.dir.join("gateway.db"))
        .unwrap()
        .query_row(
            "SELECT count(*) FROM inbox WHERE state = 'received'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(open, 0, "nothing left to redo");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_systemd_logs_go_to_the_journal_structured_and_no_secret_is_ever_in_them() {
    const PASSWORD: &str = "hunter2-in-the-environment";
    let w = World::new(
        &["TELEGRAM_ALLOW_ALL_USERS=true"],
        "approvals:\n  mode: 'off'\n",
    )
    .await;
    // A provider error that quotes the bot token and the model's key (logged, retried)...
    w.llm.push(Reply::ErrorSaying {
        status: 500,
        message: "bad upstream for 123456:TEST-TOKEN with key sk-test-secret".into(),
    });
    // ...then a command that prints every secret it can find: the .env (the bot token),
    // config.yaml (the model's key), and the environment.
    w.llm.push(Reply::terminal(&format!(
        "cat {0}/.env {0}/config.yaml; env",
        w.home.dir.display()
    )));
    w.llm.push(Reply::text("done looking"));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("journal.sock");
    let journal = UnixDatagram::bind(&path).unwrap();
    journal.set_nonblocking(true).unwrap();
    // Read as it comes, as journald does.
    let reader = std::thread::spawn(move || collect(&journal, Duration::from_secs(8)));
    let d = Daemon::start(
        BIN,
        &w.home,
        &[
            ("JOURNAL_STREAM", "8:12345"),
            ("HERMES_JOURNAL_SOCKET", path.to_str().unwrap()),
            ("BACKUP_SERVICE_PASSWORD", PASSWORD),
        ],
    );
    w.telegram.dm(ALICE, "find the secrets");
    w.replies(ALICE, 1).await;
    let entries: Vec<String> = reader.join().unwrap().into_iter().map(|(_, e)| e).collect();
    let running = entries
        .iter()
        .find(|e| e.contains("hermes-gateway is running"))
        .unwrap_or_else(|| panic!("no start entry in {} entries", entries.len()));
    assert!(running.contains("\nPRIORITY=6\n"), "{running}");
    assert!(running.contains("\nSYSLOG_IDENTIFIER=hermes-gateway\n"));
    assert!(
        running.contains("\nMODEL=fake-model\n"),
        "fields are journal fields: {running}"
    );
    assert!(
        entries.iter().any(|e| e.contains("running a tool")),
        "debug lines too"
    );
    assert!(
        entries
            .iter()
            .any(|e| e.contains("llm: call failed") && e.contains("[REDACTED]")),
        "the provider's error is logged, blanked"
    );
    let all = entries.join("\n") + &d.log_text();
    for secret in [
        "123456:TEST-TOKEN",
        "TEST-TOKEN",
        "sk-test-secret",
        PASSWORD,
    ] {
        assert!(!all.contains(secret), "{secret} reached the log");
    }
}

/// Wait until `socket` has brought a message containing `what`; everything read is kept in
/// `seen`.
fn wait_for(socket: &UnixDatagram, seen: &mut Vec<(Instant, String)>, what: &str, from: usize) {
    let deadline = Instant::now() + WAIT;
    while !seen[from.min(seen.len())..]
        .iter()
        .any(|(_, m)| m.contains(what))
    {
        assert!(Instant::now() < deadline, "no {what}: {seen:?}");
        drain(socket, seen);
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_pings_the_watchdog_falls_back_when_the_new_one_fails_and_yields_to_a_stop() {
    let w = World::allow_all().await;
    w.llm.push(Reply::Delayed(
        Duration::from_secs(3),
        Box::new(Reply::text("slow answer")),
    ));
    w.llm.push(Reply::text("after the fallback"));
    w.llm.push(Reply::Delayed(
        Duration::from_secs(3),
        Box::new(Reply::text("answered while stopping")),
    ));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("notify.sock");
    let socket = UnixDatagram::bind(&path).unwrap();
    socket.set_nonblocking(true).unwrap();
    let mut d = Daemon::start(
        BIN,
        &w.home,
        &[
            ("NOTIFY_SOCKET", path.to_str().unwrap()),
            ("WATCHDOG_USEC", "2000000"),
        ],
    );
    let mut seen = Vec::new();
    wait_for(&socket, &mut seen, "READY=1", 0);

    // A reload to an address that is taken, while a slow turn runs.
    w.telegram.dm(ALICE, "slow");
    let llm = w.llm.clone();
    hermes_testkit::eventually(WAIT, "the model call", || {
        (!llm.requests().is_empty()).then_some(())
    })
    .await;
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let config = w.home.dir.join("config.yaml");
    let original = std::fs::read_to_string(&config).unwrap();
    let bad = original.replace(
        "listen: 127.0.0.1:0",
        &format!("listen: {}", taken.local_addr().unwrap()),
    );
    assert_ne!(bad, original);
    std::fs::write(&config, &bad).unwrap();
    signal(&d, "HUP");
    let from = seen.len();
    wait_for(&socket, &mut seen, "RELOADING=1", from);
    let reloading = seen.len();
    wait_for(&socket, &mut seen, "READY=1", reloading);
    // systemd keeps the watchdog armed through a reload: it was pinged while the turn
    // drained and the new configuration failed.
    let pings = seen[reloading..]
        .iter()
        .filter(|(_, m)| m.contains("WATCHDOG=1"))
        .count();
    assert!(pings >= 2, "{:?}", &seen[reloading..]);
    assert_eq!(
        w.replies(ALICE, 1).await,
        ["slow answer"],
        "the turn drained"
    );
    hermes_testkit::eventually(WAIT, "the fallback", || {
        d.log_text()
            .contains("the new configuration did not start; going back to the previous one")
            .then_some(())
    })
    .await;
    w.telegram.dm(ALICE, "still there?");
    assert_eq!(w.replies(ALICE, 2).await[1], "after the fallback");

    // A rotated secret is a change even though no shown section differs.
    std::fs::write(&config, &original).unwrap();
    let env = w.home.dir.join(".env");
    let dotenv = std::fs::read_to_string(&env).unwrap();
    std::fs::write(
        &env,
        format!("{dotenv}\nSOME_SERVICE_API_KEY=rotated-value\n"),
    )
    .unwrap();
    let before = seen.len();
    signal(&d, "HUP");
    wait_for(&socket, &mut seen, "READY=1", before);
    assert!(
        d.log_text().contains("values not shown"),
        "{}",
        d.log_text()
    );

    // A stop during a reload's drain is a stop.
    w.telegram.dm(ALICE, "one more slow one");
    hermes_testkit::eventually(WAIT, "the third model call", || {
        (llm.requests().len() >= 3).then_some(())
    })
    .await;
    std::fs::write(
        &env,
        format!("{dotenv}\nSOME_SERVICE_API_KEY=rotated-again\n"),
    )
    .unwrap();
    let before = seen.len();
    signal(&d, "HUP");
    wait_for(&socket, &mut seen, "RELOADING=1", before);
    assert_eq!(d.terminate(), Some(0), "{}", d.log_text());
    drain(&socket, &mut seen);
    let after: Vec<&String> = seen[before..].iter().map(|(_, m)| m).collect();
    assert!(after.iter().any(|m| m.contains("STOPPING=1")), "{after:?}");
    assert!(
        !after.iter().any(|m| m.contains("READY=1")),
        "not started again: {after:?}"
    );
    assert_eq!(w.replies(ALICE, 3).await[2], "answered while stopping");
}

/// `service status` exits non-zero when systemd does not answer (no systemd running, no
/// bus), and 0 when it answers that the unit is stopped; a stand-in `systemctl` on `PATH`
/// plays systemd either way.
#[test]
fn service_status_fails_when_systemd_does_not_answer() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let status_with = |exit: i32| {
        let fake = bin.join("systemctl");
        std::fs::write(
            &fake,
            format!("#!/bin/sh\necho 'Failed to connect to bus: Host is down' >&2\nexit {exit}\n"),
        )
        .unwrap();
        std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
        let path = format!(
            "{}:{}",
            bin.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        std::process::Command::new(env!("CARGO_BIN_EXE_hermes-gateway"))
            .args(["service", "status", "--user", "--home"])
            .arg(dir.path())
            .env("PATH", path)
            .output()
            .unwrap()
    };
    let unreachable = status_with(1);
    assert!(!unreachable.status.success(), "{unreachable:?}");
    assert!(
        String::from_utf8_lossy(&unreachable.stderr).contains("systemd did not answer"),
        "{unreachable:?}"
    );
    let stopped = status_with(3);
    assert!(stopped.status.success(), "{stopped:?}");
}

/// A system service's home under /tmp would be an empty directory to it (its /tmp is
/// private): install refuses it and says why.
#[test]
fn install_refuses_a_system_home_the_units_private_tmp_would_hide() {
    let dir = tempfile::tempdir_in("/tmp").unwrap();
    let out = std::process::Command::new(BIN)
        .args(["service", "install", "--system", "--dry-run", "--home"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("PrivateTmp"), "{err}");
    assert!(String::from_utf8_lossy(&out.stdout).is_empty());
}
