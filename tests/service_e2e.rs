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
    let deadline = Instant::now() + WAIT;
    while !seen
        .iter()
        .any(|(_, m): &(Instant, String)| m.contains("READY=1"))
    {
        assert!(
            Instant::now() < deadline,
            "no READY=1: {seen:?}\n{}",
            daemon.log_text()
        );
        drain(&socket, &mut seen);
        std::thread::sleep(Duration::from_millis(20));
    }
    let ready = seen.iter().find(|(_, m)| m.contains("READY=1")).unwrap();
    assert!(ready.1.contains("STATUS=telegram live"), "{}", ready.1);

    // A command the agent runs cannot speak for the daemon to systemd.
    w.telegram.dm(ALICE, "where do you report to?");
    w.replies(ALICE, 1).await;
    let second = &w.llm.requests()[1];
    assert!(
        second.to_string().contains("notify=[]"),
        "NOTIFY_SOCKET reached the command: {second}"
    );

    // Pings at half the period while Telegram answers.
    let healthy = collect(&socket, Duration::from_secs(4));
    assert!(watchdogs(&healthy) >= 2, "{healthy:?}");

    // The long poll hangs: once the platform has been silent for a period, no more pings.
    w.telegram.stall_polls(true);
    collect(&socket, Duration::from_secs(6));
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
