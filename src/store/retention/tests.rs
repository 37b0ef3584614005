use std::time::Duration;

use hermes_adapter::{
    Author, ChatKind, ChatRef, Inbound, InboundKind, InboundMessage, MessageBody, Platform,
};

use super::*;
use crate::store::{InboxState, NewOutboxRow};

const WEEK: Duration = Duration::from_secs(7 * 24 * 3600);

fn chat() -> ChatRef {
    ChatRef {
        platform: Platform::Discord,
        account: None,
        chat_id: "c1".into(),
        thread_id: None,
        kind: ChatKind::Group,
    }
}

fn message(event_id: &str, text: &str) -> Inbound {
    Inbound {
        event_id: event_id.into(),
        chat: chat(),
        author: Author {
            user_id: "7".into(),
            display_name: "Ada".into(),
            username: None,
            is_bot: false,
        },
        kind: InboundKind::Message(InboundMessage {
            message_id: event_id.into(),
            text: text.into(),
            addressed: true,
            ..Default::default()
        }),
    }
}

fn reply(text: &str) -> NewOutboxRow {
    NewOutboxRow {
        chat: chat(),
        body: MessageBody::plain(text),
        reply_to: None,
        choices: Vec::new(),
        file: None,
        edit_of: None,
    }
}

async fn count(store: &Store, table: &'static str) -> i64 {
    store
        .sql_for_tests(move |conn| {
            conn.query_row(&format!("SELECT count(*) FROM {table}"), params![], |r| {
                r.get(0)
            })
        })
        .await
        .unwrap()
}

/// Record a message and end it answered: its inbox id.
async fn handled(store: &Store, event_id: &str) -> i64 {
    let id = store
        .inbox_record(message(event_id, "hello"))
        .await
        .unwrap()
        .unwrap();
    store
        .inbox_finish(vec![id], InboxState::Done, "answered")
        .await
        .unwrap();
    id
}

/// Let the clock pass the rows' millisecond, so an age of zero covers them.
async fn tick() {
    tokio::time::sleep(Duration::from_millis(3)).await;
}

fn at_once(redelivery: Duration) -> Retention {
    Retention {
        keep: Duration::ZERO,
        redelivery,
    }
}

async fn handled_rows_go_in_batches_and_a_redelivered_event_is_still_recognised(store: Store) {
    for n in 0..5 {
        handled(&store, &format!("dc:{n}")).await;
    }
    let open = store
        .inbox_record(message("dc:open", "not yet handled"))
        .await
        .unwrap();
    let sent = store.outbox_enqueue(vec![reply("sent")]).await.unwrap()[0];
    store
        .outbox_mark_sent(sent, Some("m1".into()))
        .await
        .unwrap();
    store.outbox_enqueue(vec![reply("queued")]).await.unwrap();
    tick().await;

    let pruned = store.prune(at_once(WEEK), 2).await.unwrap();
    assert_eq!((pruned.inbox, pruned.outbox), (5, 1), "{pruned:?}");
    assert_eq!(count(&store, "inbox").await, 1, "the open row stays");
    assert_eq!(store.inbox_unfinished().await.unwrap()[0].id, open.unwrap());
    assert_eq!(count(&store, "outbox").await, 1, "the queued reply stays");
    assert_eq!(count(&store, "seen_events").await, 5);
    assert_eq!(
        store.inbox_record(message("dc:3", "hello")).await.unwrap(),
        None,
        "a pruned event redelivered within the window is a duplicate"
    );

    // Past the redelivery window the id goes too, and the event would be new again.
    let pruned = store.prune(at_once(Duration::ZERO), 2).await.unwrap();
    assert_eq!(pruned.seen, 5, "{pruned:?}");
    assert_eq!(count(&store, "seen_events").await, 0);
    assert!(
        store
            .inbox_record(message("dc:3", "hello"))
            .await
            .unwrap()
            .is_some()
    );
}

async fn rows_younger_than_the_age_stay(store: Store) {
    handled(&store, "dc:1").await;
    let sent = store.outbox_enqueue(vec![reply("sent")]).await.unwrap()[0];
    store.outbox_mark_sent(sent, None).await.unwrap();
    tick().await;
    let pruned = store
        .prune(
            Retention {
                keep: Duration::from_secs(3600),
                redelivery: WEEK,
            },
            100,
        )
        .await
        .unwrap();
    assert_eq!(pruned, Pruned::default());
    assert_eq!(count(&store, "inbox").await, 1);
    assert_eq!(count(&store, "outbox").await, 1);
}

async fn a_sent_row_a_queued_edit_or_a_waiting_prompt_refers_to_stays(store: Store) {
    let ids = store
        .outbox_enqueue(vec![
            reply("edited later"),
            reply("a prompt"),
            reply("plain"),
        ])
        .await
        .unwrap();
    for id in &ids {
        store.outbox_mark_sent(*id, None).await.unwrap();
    }
    let mut edit = reply("the edit");
    edit.edit_of = Some(ids[0]);
    let edit = store.outbox_enqueue(vec![edit]).await.unwrap()[0];
    let approval = store
        .approval_create("k", &chat(), "rm -rf /tmp/x", &["rm-recursive"])
        .await
        .unwrap();
    store.approval_set_prompt(approval, ids[1]).await.unwrap();
    tick().await;

    let pruned = store.prune(at_once(WEEK), 100).await.unwrap();
    assert_eq!(pruned.outbox, 1, "only the plain row goes: {pruned:?}");
    assert_eq!(pruned.other, 0, "the waiting approval stays");
    let left: Vec<i64> = store
        .sql_for_tests(|conn| {
            let mut stmt = conn.prepare("SELECT id FROM outbox ORDER BY id")?;
            let ids = stmt.query_map(params![], |r| r.get(0))?;
            Ok(ids.collect::<Result<_, _>>()?)
        })
        .await
        .unwrap();
    assert_eq!(left, vec![ids[0], ids[1], edit]);

    // Decided, the approval and its prompt go (once a newer approval holds the largest id).
    store
        .approval_decide(approval, "denied", Some("Ada".into()))
        .await
        .unwrap();
    store
        .approval_create("k", &chat(), "rm -rf /tmp/y", &["rm-recursive"])
        .await
        .unwrap();
    tick().await;
    let pruned = store.prune(at_once(WEEK), 100).await.unwrap();
    assert_eq!((pruned.outbox, pruned.other), (1, 1), "{pruned:?}");
}

async fn the_newest_row_stays_so_no_id_is_handed_out_twice(store: Store) {
    let mut last = 0;
    for n in 0..3 {
        last = handled(&store, &format!("dc:{n}")).await;
    }
    let approval = store
        .approval_create("k", &chat(), "rm -rf /tmp/x", &["rm-recursive"])
        .await
        .unwrap();
    store
        .approval_decide(approval, "denied", None)
        .await
        .unwrap();
    tick().await;
    let pruned = store.prune(at_once(WEEK), 100).await.unwrap();
    assert_eq!((pruned.inbox, pruned.other), (2, 0), "{pruned:?}");
    // An old `/undo` mark or a stream row names inbox ids; an old prompt's buttons name
    // the approval's id: new rows must not take them.
    let next = store
        .inbox_record(message("dc:new", "hello"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(next, last + 1);
    let next_approval = store
        .approval_create("k", &chat(), "rm -rf /tmp/y", &["rm-recursive"])
        .await
        .unwrap();
    assert_eq!(next_approval, approval + 1);
}

async fn the_streamed_answer_of_a_turn_still_running_stays(store: Store) {
    let running = store
        .inbox_record(message("dc:1", "a long question"))
        .await
        .unwrap()
        .unwrap();
    let streamed = store
        .outbox_enqueue_streamed(vec![reply("the answer so far")], Some(running))
        .await
        .unwrap()[0];
    store.outbox_mark_sent(streamed, None).await.unwrap();
    store.outbox_enqueue(vec![reply("newer")]).await.unwrap();
    tick().await;
    let pruned = store.prune(at_once(WEEK), 100).await.unwrap();
    assert_eq!(pruned.outbox, 0, "{pruned:?}");
    assert_eq!(
        store.outbox_stream_row(vec![running]).await.unwrap(),
        Some(streamed)
    );
}

async fn the_inbox_keeps_no_words_and_a_payload_only_until_the_event_is_handled(store: Store) {
    let answered = store
        .inbox_record(message("dc:1", "a question"))
        .await
        .unwrap()
        .unwrap();
    store
        .inbox_record(message("dc:2", "still open"))
        .await
        .unwrap()
        .unwrap();
    store
        .inbox_finish(vec![answered], InboxState::Done, "answered")
        .await
        .unwrap();
    let rows: Vec<(String, bool, bool)> = store
        .sql_for_tests(|conn| {
            let mut stmt = conn.prepare(
                "SELECT event_id, text IS NOT NULL OR payload IS NOT NULL,
                    EXISTS (SELECT 1 FROM inbox_payloads WHERE inbox_id = inbox.id)
                 FROM inbox ORDER BY id",
            )?;
            let rows = stmt.query_map(params![], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?;
            Ok(rows.collect::<Result<_, _>>()?)
        })
        .await
        .unwrap();
    assert_eq!(
        rows,
        vec![("dc:1".into(), false, false), ("dc:2".into(), false, true)]
    );
    assert_eq!(count(&store, "inbox_payloads").await, 1);
}

crate::store::on_both_engines!(
    handled_rows_go_in_batches_and_a_redelivered_event_is_still_recognised,
    rows_younger_than_the_age_stay,
    a_sent_row_a_queued_edit_or_a_waiting_prompt_refers_to_stays,
    the_newest_row_stays_so_no_id_is_handed_out_twice,
    the_streamed_answer_of_a_turn_still_running_stays,
    the_inbox_keeps_no_words_and_a_payload_only_until_the_event_is_handled,
);
