//! Tests of the process registry: its tools-facing operations, limits and notification levels.

mod support {
    use crate::config::DeliveryConfig;
    use crate::delivery::Delivery;
    use crate::process::*;
    use crate::store::Store;
    use hermes_adapter::{Author, ChatKind, ChatRef, Platform};
    use std::collections::HashMap;
    use std::sync::Arc;
    use tokio::sync::mpsc;
    use tokio_util::sync::CancellationToken;

    /// A registry whose reports go nowhere (no platform is enabled).
    pub fn registry_with(
        limits: Limits,
    ) -> (Arc<ProcessRegistry>, mpsc::UnboundedReceiver<Wakeup>) {
        let store = Store::open_in_memory().unwrap();
        let shutdown = CancellationToken::new();
        let delivery = Delivery::new(
            store,
            HashMap::new(),
            DeliveryConfig::default(),
            shutdown.clone(),
        );
        let (tx, rx) = mpsc::unbounded_channel();
        (
            ProcessRegistry::new(delivery, tx, shutdown, limits, Notifications::Concise),
            rx,
        )
    }

    pub fn request(command: &str, session: &str) -> SpawnRequest {
        SpawnRequest {
            command: command.into(),
            cwd: std::env::temp_dir(),
            env: vec![],
            origin: Origin {
                session_key: session.into(),
                chat: ChatRef {
                    platform: Platform::Telegram,
                    account: None,
                    chat_id: "1".into(),
                    thread_id: None,
                    kind: ChatKind::Direct,
                },
                author: Author {
                    user_id: "1".into(),
                    display_name: "A".into(),
                    username: None,
                    is_bot: false,
                },
            },
            check_interval: None,
            notify_on_complete: true,
            sandbox: crate::confine::Sandbox::unconfined(),
        }
    }
}

mod registry {
    use super::support::*;
    use crate::process::*;
    use std::sync::Arc;
    use std::time::Duration;
    use tokio::sync::mpsc;
    use tokio_util::sync::CancellationToken;

    fn registry() -> (Arc<ProcessRegistry>, mpsc::UnboundedReceiver<Wakeup>) {
        registry_with(Limits::default())
    }

    #[tokio::test]
    async fn write_poll_log_and_wait_work_on_a_running_process() {
        let (registry, mut wakeups) = registry();
        let (id, _) = registry
            .spawn(request(
                "echo ready; read line; echo got:$line; echo tail",
                "s1",
            ))
            .await
            .unwrap();
        let attention = CancellationToken::new();
        tokio::time::sleep(Duration::from_millis(300)).await;
        let first = registry.poll("s1", &id).unwrap();
        assert!(
            matches!(first.status, Status::Running { .. }) && first.new_output.contains("ready"),
            "{first:?}"
        );
        assert_eq!(registry.poll("s1", &id).unwrap().new_output, "");

        registry
            .write("s1", &id, "hello\n", &CancellationToken::new())
            .await
            .unwrap();
        let waited = registry
            .wait("s1", &id, Duration::from_secs(5), &attention)
            .await
            .unwrap();
        let Waited::Finished { exit, last_output } = &waited else {
            panic!("{waited:?}");
        };
        assert_eq!(exit.code, Some(0));
        assert!(last_output.contains("got:hello"), "{last_output}");
        assert_eq!(registry.log("s1", &id, 1).unwrap(), "tail");
        assert!(registry.list("s1").iter().any(|p| p.id == id));
        assert!(
            registry.poll("s2", &id).is_err(),
            "other sessions cannot see it"
        );
        let wake = tokio::time::timeout(Duration::from_secs(5), wakeups.recv())
            .await
            .unwrap()
            .unwrap();
        assert!(wake.text.contains("got:hello"));
    }

    #[tokio::test]
    async fn wait_returns_when_the_person_writes() {
        let (registry, _wakeups) = registry();
        let (id, _) = registry.spawn(request("sleep 30", "s1")).await.unwrap();
        let attention = CancellationToken::new();
        let a = attention.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(200)).await;
            a.cancel();
        });
        let waited = registry
            .wait("s1", &id, Duration::from_secs(20), &attention)
            .await
            .unwrap();
        assert!(matches!(waited, Waited::PersonWrote), "{waited:?}");
        assert_eq!(registry.kill("s1", &id).await.unwrap(), Stopped::Terminated);
    }
}

mod limits {
    use super::support::*;
    use crate::process::*;
    use std::time::Duration;
    use tokio_util::sync::CancellationToken;

    #[tokio::test]
    async fn a_full_registry_drops_the_longest_finished_process_and_refuses_when_all_run() {
        let (registry, _w) = registry_with(Limits {
            max_tracked: 2,
            output_capacity: 64,
            finished_ttl: Duration::from_secs(60),
        });
        let (done, _) = registry.spawn(request("true", "s")).await.unwrap();
        let attention = CancellationToken::new();
        registry
            .wait("s", &done, Duration::from_secs(5), &attention)
            .await
            .unwrap();
        let (running, _) = registry.spawn(request("sleep 30", "s")).await.unwrap();
        let (newest, _) = registry.spawn(request("sleep 30", "s")).await.unwrap();
        let list: Vec<String> = registry.list("s").into_iter().map(|p| p.id).collect();
        assert!(
            !list.contains(&done),
            "the finished one made room: {list:?}"
        );
        assert!(list.contains(&running) && list.contains(&newest));
        let refused = registry.spawn(request("sleep 30", "s")).await.unwrap_err();
        assert!(
            refused.contains("2 background processes are running"),
            "{refused}"
        );
        registry.kill_session("s").await;
    }

    #[tokio::test]
    async fn finished_processes_are_forgotten_after_the_ttl_and_output_is_bounded() {
        let (registry, _w) = registry_with(Limits {
            max_tracked: 8,
            output_capacity: 64,
            finished_ttl: Duration::from_millis(300),
        });
        let (id, _) = registry.spawn(request("seq 1 1000", "s")).await.unwrap();
        let attention = CancellationToken::new();
        registry
            .wait("s", &id, Duration::from_secs(5), &attention)
            .await
            .unwrap();
        let log = registry.log("s", &id, 1000).unwrap();
        assert!(log.len() <= 64 && log.ends_with("1000"), "{log}");
        tokio::time::sleep(Duration::from_millis(400)).await;
        assert!(registry.poll("s", &id).is_err(), "forgotten after the TTL");
    }

    #[tokio::test]
    async fn a_process_that_never_reads_cannot_hold_a_write_past_the_turn() {
        let (registry, _wakeups) = registry_with(Limits::default());
        let (id, _) = registry.spawn(request("sleep 30", "s")).await.unwrap();
        let cancel = CancellationToken::new();
        let stop = cancel.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(300)).await;
            stop.cancel();
        });
        // More than a pipe holds (64 KiB): the write blocks until the turn stops.
        let data = "x".repeat(1 << 20);
        let started = std::time::Instant::now();
        let result = registry.write("s", &id, &data, &cancel).await;
        assert!(started.elapsed() < Duration::from_secs(3));
        match result {
            Err(ProcessError::WriteStalled { written, total, .. }) => {
                assert!(written < total, "{written} of {total}");
            }
            other => panic!("{other:?}"),
        }
        registry.kill("s", &id).await.unwrap();
    }

    #[tokio::test]
    async fn stop_all_stops_a_sessions_processes_together() {
        let (registry, _wakeups) = registry_with(Limits::default());
        // Each ignores SIGTERM, so each takes the whole grace period before SIGKILL.
        for _ in 0..3 {
            registry
                .spawn(request("trap '' TERM; sleep 30 & wait", "s"))
                .await
                .unwrap();
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
        let started = std::time::Instant::now();
        assert_eq!(registry.kill_session("s").await, 3);
        let took = started.elapsed();
        // One after another would be three grace periods (9 s).
        assert!(took < Duration::from_secs(6), "{took:?}");
    }

    #[tokio::test]
    async fn what_a_finished_background_command_left_running_is_stopped() {
        let (registry, _wakeups) = registry_with(Limits::default());
        let dir = tempfile::tempdir().unwrap();
        let marker = dir.path().join("server-pid");
        let (id, _) = registry
            .spawn(request(
                &format!("sleep 30 >/dev/null 2>&1 & echo $! > {}", marker.display()),
                "s",
            ))
            .await
            .unwrap();
        let finished = registry
            .wait("s", &id, Duration::from_secs(10), &CancellationToken::new())
            .await
            .unwrap();
        let Waited::Finished { exit, .. } = finished else {
            panic!("{finished:?}");
        };
        assert!(exit.stopped_leftovers, "{exit:?}");
        assert!(exit.describe().contains("were stopped"));
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(
            crate::shell::pid_in_file_is_gone(&marker),
            "the leftover still runs"
        );
    }

    #[test]
    fn notification_levels_decide_what_is_posted() {
        let ok = ExitInfo {
            code: Some(0),
            signal: None,
            elapsed: Duration::ZERO,
            stopped_leftovers: false,
        };
        let failed = ExitInfo {
            code: Some(1),
            signal: None,
            elapsed: Duration::ZERO,
            stopped_leftovers: false,
        };
        assert!(Notifications::Concise.progress() && Notifications::Concise.completion(&ok));
        assert!(!Notifications::Result.progress() && Notifications::Result.completion(&ok));
        assert!(!Notifications::Error.completion(&ok) && Notifications::Error.completion(&failed));
        assert!(!Notifications::Off.completion(&failed) && !Notifications::Off.progress());
        assert_eq!(Notifications::parse("off"), Some(Notifications::Off));
        assert_eq!(Notifications::parse("loud"), None);
    }
}
