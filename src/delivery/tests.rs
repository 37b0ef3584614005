//! Delivery against a scripted platform, on tokio's paused clock: outages as long as the
//! configured age, records that fail, and what the platform ends up with.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hermes_adapter::{
    Capabilities, ChatKind, ChatRef, ChoiceLimits, Delivered, LengthUnit, MessageBody, Outbound,
    Platform, PlatformSender, RateLimit, SendError, async_trait,
};
use tokio_util::sync::CancellationToken;

use super::Delivery;
use crate::config::DeliveryConfig;
use crate::store::Store;

/// A platform that answers each send with the next scripted result (then success), and
/// keeps the text of every message it accepted.
struct ScriptedPlatform {
    capabilities: Capabilities,
    script: Mutex<VecDeque<Result<(), SendError>>>,
    /// Fail every send with this once the script is used up.
    then: Mutex<Option<SendError>>,
    accepted: Mutex<Vec<String>>,
    attempts: Mutex<u32>,
    /// When set, each send waits for a permit of it (the platform answers when the test
    /// says).
    gate: Mutex<Option<Arc<tokio::sync::Semaphore>>>,
    /// Sends running now, and the most ever at once.
    in_flight: Mutex<(u32, u32)>,
    /// Each chat's messages go by a method of their own (to test per-method waits).
    method_per_chat: bool,
}

impl ScriptedPlatform {
    fn new() -> Arc<Self> {
        let fast = RateLimit {
            per_second: 1000.0,
            burst: 1000,
        };
        Arc::new(ScriptedPlatform {
            capabilities: Capabilities {
                max_message_len: 4096,
                length_unit: LengthUnit::Chars,
                choices: ChoiceLimits::NONE,
                edits: true,
                working: None,
                threads: false,
                per_chat_rate: fast,
                group_chat_rate: fast,
                per_bot_rate: None,
            },
            script: Mutex::new(VecDeque::new()),
            then: Mutex::new(None),
            accepted: Mutex::new(Vec::new()),
            attempts: Mutex::new(0),
            gate: Mutex::new(None),
            in_flight: Mutex::new((0, 0)),
            method_per_chat: false,
        })
    }

    fn fail_next(&self, n: usize, error: SendError) {
        let mut script = self.script.lock().unwrap();
        script.extend((0..n).map(|_| Err(error.clone())));
    }

    fn fail_always(&self, error: SendError) {
        *self.then.lock().unwrap() = Some(error);
    }

    fn accepted(&self) -> Vec<String> {
        self.accepted.lock().unwrap().clone()
    }

    fn attempts(&self) -> u32 {
        *self.attempts.lock().unwrap()
    }
}

#[async_trait]
impl PlatformSender for ScriptedPlatform {
    fn platform(&self) -> Platform {
        Platform::Telegram
    }

    fn capabilities(&self) -> &Capabilities {
        &self.capabilities
    }

    fn method_of(&self, action: &Outbound) -> Option<&'static str> {
        if !self.method_per_chat {
            return None;
        }
        Some(if action.chat().chat_id == "42" {
            "chat.postMessage"
        } else {
            "chat.update"
        })
    }

    fn methods(&self) -> &'static [&'static str] {
        &["chat.postMessage", "chat.update"]
    }

    /// One body per paragraph (enough to make a reply of several parts).
    fn render(&self, markdown: &str) -> Vec<MessageBody> {
        markdown.split("\n\n").map(MessageBody::plain).collect()
    }

    async fn send(&self, action: Outbound) -> Result<Delivered, SendError> {
        *self.attempts.lock().unwrap() += 1;
        let gate = self.gate.lock().unwrap().clone();
        if let Some(gate) = gate {
            {
                let mut in_flight = self.in_flight.lock().unwrap();
                in_flight.0 += 1;
                in_flight.1 = in_flight.1.max(in_flight.0);
            }
            let _answered = gate.acquire().await.unwrap();
            self.in_flight.lock().unwrap().0 -= 1;
        }
        let scripted = self.script.lock().unwrap().pop_front();
        let result = match scripted {
            Some(result) => result,
            None => match self.then.lock().unwrap().clone() {
                Some(error) => Err(error),
                None => Ok(()),
            },
        };
        result?;
        let Outbound::Text { body, .. } = action else {
            panic!("only messages are sent here");
        };
        let mut accepted = self.accepted.lock().unwrap();
        accepted.push(body.plain);
        Ok(Delivered {
            message_id: Some(accepted.len().to_string()),
        })
    }
}

fn chat() -> ChatRef {
    ChatRef {
        platform: Platform::Telegram,
        account: None,
        chat_id: "42".into(),
        thread_id: None,
        kind: ChatKind::Direct,
    }
}

fn delivery(platform: &Arc<ScriptedPlatform>, max_age: Duration) -> (Delivery, Store) {
    delivery_with(
        platform,
        DeliveryConfig {
            max_age,
            ..DeliveryConfig::default()
        },
    )
}

fn delivery_with(platform: &Arc<ScriptedPlatform>, config: DeliveryConfig) -> (Delivery, Store) {
    let store = Store::open_in_memory().unwrap();
    let sender: Arc<dyn PlatformSender> = platform.clone();
    let delivery = Delivery::new(
        store.clone(),
        HashMap::from([(Platform::Telegram, sender)]),
        config,
        CancellationToken::new(),
    );
    (delivery, store)
}

/// `(state, attempts)` of an outbox row.
async fn row_state(store: &Store, id: i64) -> (String, i64) {
    store
        .sql_for_tests(move |conn| {
            conn.query_row(
                "SELECT state, attempts FROM outbox WHERE id = ?1",
                [id],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
        })
        .await
        .unwrap()
}

/// Poll the row until it leaves the queue or `within` passes on the paused clock. The test
/// never sleeps itself: the clock jumps to the lane's next timer whenever everything waits
/// (the store thread included), so a timer of ours would race the lane.
async fn settled(store: &Store, id: i64, within: Duration) -> (String, i64) {
    let start = tokio::time::Instant::now();
    for _ in 0..1_000_000 {
        let (state, attempts) = row_state(store, id).await;
        if (state != "pending" && state != "sending") || start.elapsed() >= within {
            return (state, attempts);
        }
        tokio::task::yield_now().await;
    }
    panic!("the row was polled a million times");
}

/// Poll until `span` has passed on the paused clock, checking the row stays queued.
async fn stays_pending(store: &Store, id: i64, span: Duration) -> i64 {
    let start = tokio::time::Instant::now();
    for _ in 0..1_000_000 {
        let (state, attempts) = row_state(store, id).await;
        assert_eq!(state, "pending", "after {:?}", start.elapsed());
        if start.elapsed() >= span {
            return attempts;
        }
        tokio::task::yield_now().await;
    }
    panic!("the row was polled a million times");
}

#[tokio::test(start_paused = true)]
async fn a_reply_outlives_an_outage_of_an_hour_and_goes_out_once() {
    let platform = ScriptedPlatform::new();
    // At the 30 s cap an hour of failures is ~130 attempts: far past the 12 that used to
    // mark a reply failed after about five minutes.
    platform.fail_next(130, SendError::Transient("connection refused".into()));
    let (delivery, store) = delivery(&platform, Duration::from_secs(24 * 3600));
    let ids = delivery.reply(&chat(), "the answer", None).await.unwrap();

    let (state, attempts) = settled(&store, ids[0], Duration::from_secs(2 * 3600)).await;
    assert_eq!(state, "sent");
    assert_eq!(attempts, 131);
    assert_eq!(platform.accepted(), ["the answer"]);
}

#[tokio::test(start_paused = true)]
async fn a_reply_is_marked_failed_only_once_it_is_older_than_max_age() {
    let platform = ScriptedPlatform::new();
    platform.fail_always(SendError::Transient("502 Bad Gateway".into()));
    let max_age = Duration::from_secs(3600);
    let (delivery, store) = delivery(&platform, max_age);
    let ids = delivery.reply(&chat(), "the answer", None).await.unwrap();

    let attempts = stays_pending(&store, ids[0], max_age - Duration::from_secs(120)).await;
    assert!(
        attempts > 12,
        "retried past the old attempt limit: {attempts}"
    );

    let (state, _) = settled(&store, ids[0], Duration::from_secs(600)).await;
    assert_eq!(state, "failed");
    let error: String = store
        .sql_for_tests(move |conn| {
            conn.query_row(
                "SELECT last_error FROM outbox WHERE id = ?1",
                [ids[0]],
                |r| r.get(0),
            )
        })
        .await
        .unwrap();
    assert!(error.contains("502 Bad Gateway"), "{error}");
    assert!(platform.accepted().is_empty());
}

#[tokio::test(start_paused = true)]
async fn rate_limits_and_a_refused_token_wait_too() {
    let platform = ScriptedPlatform::new();
    platform.fail_next(
        3,
        SendError::RateLimited {
            retry_after: Duration::from_secs(600),
            scope: hermes_adapter::RateScope::Chat,
        },
    );
    platform.fail_next(20, SendError::Unauthorized("401 Unauthorized".into()));
    let (delivery, store) = delivery(&platform, Duration::from_secs(24 * 3600));
    delivery.start();
    let ids = delivery.reply(&chat(), "the answer", None).await.unwrap();

    let (state, attempts) = settled(&store, ids[0], Duration::from_secs(3 * 3600)).await;
    assert_eq!((state.as_str(), attempts), ("sent", 24));
    assert_eq!(platform.accepted(), ["the answer"]);
}

// On the real clock: the paused one jumps ahead whenever the runtime waits for the store's
// thread, which makes "sent before the other's wait was over" unmeasurable.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wait_on_one_method_holds_only_that_methods_calls() {
    let mut platform = ScriptedPlatform::new();
    {
        let scripted = Arc::get_mut(&mut platform).unwrap();
        scripted.method_per_chat = true;
        // A bot-wide budget: before methods were told apart, a method's wait held it all.
        scripted.capabilities.per_bot_rate = Some(RateLimit {
            per_second: 1000.0,
            burst: 1000,
        });
    }
    // Chat 42's message (its method) is told to wait three seconds.
    platform.fail_next(
        1,
        SendError::RateLimited {
            retry_after: Duration::from_secs(3),
            scope: hermes_adapter::RateScope::Method("chat.postMessage".into()),
        },
    );
    let (delivery, store) = delivery(&platform, Duration::from_secs(24 * 3600));
    delivery.start();
    let start = std::time::Instant::now();
    let held = delivery.reply(&chat(), "held", None).await.unwrap();
    // Until chat 42 was told to wait.
    while platform.attempts() == 0 {
        assert!(
            start.elapsed() < Duration::from_secs(2),
            "the first send happens"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let other = ChatRef {
        chat_id: "43".into(),
        ..chat()
    };
    let free = delivery.reply(&other, "free", None).await.unwrap();
    while platform.accepted().is_empty() {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "the other chat is sent"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(platform.accepted(), ["free"]);
    assert!(
        start.elapsed() < Duration::from_millis(2_500),
        "another method is not held: {:?}",
        start.elapsed()
    );
    let (state, _) = settled(&store, free[0], Duration::from_secs(5)).await;
    assert_eq!(state, "sent");
    while platform.accepted().len() < 2 {
        assert!(
            start.elapsed() < Duration::from_secs(15),
            "the held one goes after its wait"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        start.elapsed() >= Duration::from_secs(3),
        "the told method waited: {:?}",
        start.elapsed()
    );
    assert_eq!(platform.accepted(), ["free", "held"]);
    let (state, _) = settled(&store, held[0], Duration::from_secs(5)).await;
    assert_eq!(state, "sent");
}

#[tokio::test(start_paused = true)]
async fn a_sent_reply_whose_record_fails_is_not_sent_again() {
    let platform = ScriptedPlatform::new();
    let (delivery, store) = delivery(&platform, Duration::from_secs(24 * 3600));
    // The database refuses to record a row as sent, as a full disk would, for a while.
    store
        .sql_for_tests(|conn| {
            conn.execute_batch(
                "CREATE TRIGGER refuse_sent BEFORE UPDATE OF state ON outbox
                 WHEN NEW.state = 'sent'
                 BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END;",
            )
        })
        .await
        .unwrap();
    delivery.start(); // the sweep that picks up pending rows every few seconds
    let ids = delivery.reply(&chat(), "the answer", None).await.unwrap();
    stays_pending(&store, ids[0], Duration::from_secs(120)).await;

    store
        .sql_for_tests(|conn| conn.execute_batch("DROP TRIGGER refuse_sent"))
        .await
        .unwrap();
    let (state, _) = settled(&store, ids[0], Duration::from_secs(600)).await;
    assert_eq!(state, "sent");
    assert_eq!(platform.accepted(), ["the answer"], "sent exactly once");
    assert_eq!(platform.attempts(), 1);
}

#[tokio::test(start_paused = true)]
async fn the_budgets_of_quiet_chats_are_forgotten() {
    let platform = ScriptedPlatform::new();
    let (delivery, _store) = delivery(&platform, Duration::from_secs(3600));
    let chats: Vec<ChatRef> = (0..50)
        .map(|n| ChatRef {
            chat_id: n.to_string(),
            ..chat()
        })
        .collect();
    for chat in &chats {
        delivery.wait_budget(chat).await;
    }
    // One chat the platform told to wait ten minutes.
    delivery.block(
        &chats[0],
        &hermes_adapter::RateScope::Chat,
        Duration::from_secs(600),
    );
    assert_eq!(delivery.inner.chat_budgets.lock().unwrap().len(), 50);

    // Not full yet: kept.
    delivery.forget_rested_budgets();
    assert_eq!(delivery.inner.chat_budgets.lock().unwrap().len(), 50);

    // A minute later the others are full again and let go; the one held back is kept.
    tokio::time::advance(Duration::from_secs(60)).await;
    delivery.forget_rested_budgets();
    assert_eq!(delivery.inner.chat_budgets.lock().unwrap().len(), 1);
    tokio::time::advance(Duration::from_secs(600)).await;
    delivery.forget_rested_budgets();
    assert!(delivery.inner.chat_budgets.lock().unwrap().is_empty());
}

#[tokio::test(start_paused = true)]
async fn every_part_of_an_answer_to_a_handle_goes_to_the_handle() {
    let platform = ScriptedPlatform::new();
    let (delivery, _store) = delivery(&platform, Duration::from_secs(3600));
    let long = "first part\n\nsecond part\n\nthird part";
    let to_message = delivery.reply_rows(&chat(), long, Some("42".into()));
    assert!(to_message.len() >= 2);
    assert_eq!(to_message[0].reply_to.as_deref(), Some("42"));
    assert!(
        to_message[1..].iter().all(|r| r.reply_to.is_none()),
        "a reply reference on the first part only"
    );
    let handle = format!("{}interaction-private:7", hermes_adapter::HANDLE_PREFIX);
    let to_handle = delivery.reply_rows(&chat(), long, Some(handle.clone()));
    assert!(
        to_handle
            .iter()
            .all(|r| r.reply_to.as_deref() == Some(handle.as_str())),
        "a private answer stays private to its last part"
    );
}

#[tokio::test(start_paused = true)]
async fn sends_to_a_platform_beyond_its_limit_wait_for_a_place() {
    let platform = ScriptedPlatform::new();
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    *platform.gate.lock().unwrap() = Some(gate.clone());
    let (delivery, store) = delivery_with(
        &platform,
        DeliveryConfig {
            max_concurrent_sends: 4,
            ..DeliveryConfig::default()
        },
    );
    let mut ids = Vec::new();
    for n in 0..40 {
        let chat = ChatRef {
            chat_id: n.to_string(),
            ..chat()
        };
        ids.extend(
            delivery
                .reply(&chat, &format!("answer {n}"), None)
                .await
                .unwrap(),
        );
    }
    // The platform answers nothing yet: the sends started are all that may be in flight.
    // The lanes wait on the store's thread, so real time is what they need: up to 10 s to
    // start their sends, then a further 300 ms in which more would start without the limit.
    let real = std::time::Instant::now;
    let started_by = real() + Duration::from_secs(10);
    while platform.attempts() < 4 && real() < started_by {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let more_by = real() + Duration::from_millis(300);
    while real() < more_by {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(
        platform.attempts(),
        4,
        "sends started while none was answered"
    );
    gate.add_permits(1_000);
    for id in ids {
        assert_eq!(settled(&store, id, Duration::from_secs(60)).await.0, "sent");
    }
    assert_eq!(platform.accepted().len(), 40);
    assert_eq!(
        platform.in_flight.lock().unwrap().1,
        4,
        "the most sends at once"
    );
}
