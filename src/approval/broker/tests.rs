//! The broker's own tests: decisions, races with the timeout, who may decide.
use std::sync::Arc;
use std::time::Duration;

use super::*;

fn config(deny: &[&str], allowlist: &[&str]) -> ApprovalConfig {
    ApprovalConfig {
        mode: ApprovalMode::Manual,
        timeout: Duration::from_secs(60),
        deny: deny.iter().map(|s| s.to_string()).collect(),
        allowlist: allowlist.iter().map(|s| s.to_string()).collect(),
    }
}

fn dangers(command: &str) -> Vec<Danger> {
    let scene = Scene::of_this_process("/nonexistent/hermes".into(), "/tmp".into());
    detect::detect(command, &scene)
}

/// A broker over an in-memory store, with no platform: prompts stay queued, which is
/// all a button press needs.
fn broker(timeout: Duration) -> Arc<ApprovalBroker> {
    let store = Store::open_in_memory().unwrap();
    let delivery = Delivery::new(
        store.clone(),
        std::collections::HashMap::new(),
        crate::config::DeliveryConfig::default(),
        tokio_util::sync::CancellationToken::new(),
    );
    let config = ApprovalConfig {
        timeout,
        ..config(&[], &[])
    };
    let scene = Scene::of_this_process("/nonexistent/hermes".into(), "/tmp".into());
    Arc::new(ApprovalBroker::new(store, delivery, config, scene))
}

fn chat() -> ChatRef {
    ChatRef {
        platform: hermes_adapter::Platform::Telegram,
        account: None,
        chat_id: "42".into(),
        thread_id: None,
        kind: hermes_adapter::ChatKind::Direct,
    }
}

fn person(user_id: &str, name: &str) -> Author {
    Author {
        user_id: user_id.into(),
        display_name: name.into(),
        username: None,
        is_bot: false,
    }
}

/// Ada's turn in `session_key` asks to run `rm -rf /srv/data`; the handle answers with
/// the gate.
fn ada_asks(broker: &Arc<ApprovalBroker>, session_key: &str) -> tokio::task::JoinHandle<Gate> {
    let (broker, session_key) = (broker.clone(), session_key.to_owned());
    tokio::spawn(async move {
        let cancel = tokio_util::sync::CancellationToken::new();
        let ctx = CheckContext {
            session_key: &session_key,
            chat: &chat(),
            asker: &person("1", "Ada"),
            cancel: &cancel,
            workdir: Path::new("/tmp"),
            background: false,
        };
        broker.check(ctx, "rm -rf /srv/data").await
    })
}

/// Ada's request, waiting in a shared session: Bob can neither press it nor find it
/// with `/approve`; Ada can.
#[tokio::test]
async fn only_the_person_whose_turn_asked_decides_a_request() {
    let broker = broker(Duration::from_secs(60));
    let asking = ada_asks(&broker, "shared");
    let id = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            let listed = broker.pending.lock().unwrap().keys().next().copied();
            if let Some(id) = listed {
                break id;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("the request is made");
    let bob = person("2", "Bob");
    match broker
        .resolve(&chat(), Target::Id(id), Decision::Once, &bob, false)
        .await
    {
        Resolution::NotYours { owner } => assert_eq!(owner, "Ada"),
        _ => panic!("Bob's press decided Ada's request"),
    }
    assert!(matches!(
        broker
            .resolve(
                &chat(),
                Target::OldestOf("shared".into()),
                Decision::Always,
                &bob,
                false
            )
            .await,
        Resolution::NothingPending
    ));
    assert!(
        broker.pending.lock().unwrap().contains_key(&id),
        "still waiting"
    );
    let decided = broker
        .resolve(
            &chat(),
            Target::Id(id),
            Decision::Deny(None),
            &person("1", "Ada"),
            false,
        )
        .await;
    assert!(matches!(decided, Resolution::Resolved { .. }));
    assert!(matches!(asking.await.unwrap(), Gate::Refused(_)));
}

#[tokio::test(start_paused = true)]
async fn a_press_at_the_moment_of_the_timeout_has_one_outcome_everyone_agrees_on() {
    let timeout = Duration::from_secs(60);
    let mut seen = std::collections::BTreeSet::new();
    for offset_ms in [-1_000i64, -1, 0, 0, 0, 1, 1_000] {
        let broker = broker(timeout);
        let asking = ada_asks(&broker, "k");
        // Its prompt row is noted in the same poll that starts the request's timer.
        let id = loop {
            let listed = broker
                .pending
                .lock()
                .unwrap()
                .iter()
                .find(|(_, p)| p.prompt_row.is_some())
                .map(|(id, _)| *id);
            if let Some(id) = listed {
                break id;
            }
            tokio::task::yield_now().await;
        };
        let at = timeout.as_millis() as i64 + offset_ms;
        tokio::time::sleep(Duration::from_millis(at.max(0) as u64)).await;
        let pressed = broker
            .resolve(
                &chat(),
                Target::Id(id),
                Decision::Once,
                &person("1", "Ada"),
                false,
            )
            .await;
        let gate = asking.await.unwrap();
        let state: String = broker
            .store
            .sql_for_tests(move |conn| {
                conn.query_row("SELECT state FROM approvals WHERE id = ?1", [id], |r| {
                    r.get(0)
                })
            })
            .await
            .unwrap();
        match pressed {
            Resolution::Resolved { outcome, .. } => {
                assert!(outcome.starts_with("✅"), "{outcome}");
                assert!(
                    matches!(gate, Gate::Run),
                    "the presser was told {outcome:?}"
                );
                assert_eq!(state, "approved_once");
                seen.insert("pressed");
            }
            Resolution::NothingPending => {
                assert!(matches!(&gate, Gate::Refused(why) if why.contains("NOT run")));
                assert_eq!(state, "expired");
                seen.insert("expired");
            }
            Resolution::OtherChat | Resolution::NotYours { .. } => {
                panic!("the asker, in the same chat")
            }
        }
    }
    assert!(
        seen.contains("pressed") && seen.contains("expired"),
        "{seen:?}"
    );
}

#[test]
fn deny_rules_match_raw_and_normalised_text() {
    let c = config(&["git push --force*", "*shutdown*"], &[]);
    assert_eq!(
        denied_by_rule(&c, "git push --force origin"),
        Some("git push --force*")
    );
    assert_eq!(
        denied_by_rule(&c, "sudo SHUT'd'OWN -h now"),
        Some("*shutdown*")
    );
    assert_eq!(denied_by_rule(&c, "git push origin"), None);
}

#[test]
fn the_allowlist_names_classes_or_whole_unchained_commands() {
    let by_class = config(&[], &["recursive delete", "rm-absolute"]);
    assert!(allowlisted(
        &by_class,
        "rm -rf /tmp/x",
        &dangers("rm -rf /tmp/x")
    ));
    assert!(!allowlisted(&by_class, "rm -rf ~", &dangers("rm -rf ~")));
    let by_command = config(&[], &["docker compose down", "systemctl restart app*"]);
    let cmd = "systemctl restart app-web";
    assert!(allowlisted(&by_command, cmd, &dangers(cmd)));
    let chained = "systemctl restart app-web; rm -rf ~";
    assert!(!allowlisted(&by_command, chained, &dangers(chained)));
}
