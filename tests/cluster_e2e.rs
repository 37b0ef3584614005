//! Two daemons on one PostgreSQL store serving one Telegram bot: one polls (it holds the
//! poll lease), the other waits; the work is shared out (each node runs the chats of its
//! shares); `status --cluster` shows both and who holds what; when a node is killed
//! (`kill -9`), the other takes its leases once they lapse, answers the next message
//! once, and a message the dead node was answering is answered once by the other. The
//! lease timings are short here (1.5 s, renewed every 0.5 s).

mod common;

use std::time::{Duration, Instant};

use common::*;
use hermes_testkit::daemon::{Daemon, Home};
use hermes_testkit::eventually;
use hermes_testkit::llm::Reply;
use hermes_testkit::postgres::TestPostgres;

/// Two homes on one new database of the tests' server: node a's (the world's) and node
/// b's, with the same state key once a has made it; and the database's name.
async fn two_nodes() -> Option<(World, Home, tempfile::TempDir, String)> {
    two_nodes_with(LEASES, LEASES).await
}

/// [`two_nodes`] with this config for node a and this for node b (the lease timings
/// among them).
async fn two_nodes_with(
    yaml: &str,
    yaml_b: &str,
) -> Option<(World, Home, tempfile::TempDir, String)> {
    let server = TestPostgres::shared()?;
    let database = server.create_database();
    let url = format!("HERMES_STORE_URL={}", server.url(&database));
    let w = World::new(
        &[
            "TELEGRAM_ALLOW_ALL_USERS=true",
            &url,
            "HERMES_NODE_ID=node-a",
        ],
        yaml,
    )
    .await;
    let dir_b = tempfile::tempdir().unwrap();
    let home_b = Home::new(
        dir_b.path(),
        &w.telegram.base_url(),
        &w.llm.base_url(),
        &[
            "TELEGRAM_ALLOW_ALL_USERS=true",
            &url,
            "HERMES_NODE_ID=node-b",
        ],
        yaml_b,
    );
    Some((w, home_b, dir_b, database))
}

/// The node holding the share of the work Alice's chat falls in, as the store says.
fn runs_alices_chat(server: &TestPostgres, database: &str) -> String {
    let share = hermes_adapter::work_share(
        hermes_adapter::Platform::Telegram,
        None,
        &ALICE.to_string(),
        hermes_gateway::cluster::shares::SHARES,
    );
    let sql = format!("SELECT holder FROM leases WHERE name = 'work:{share}'");
    server.psql(server.password(), database, &sql).unwrap()
}

/// Node a and node b, the one running Alice's chat first.
fn alices_first(server: &TestPostgres, database: &str, a: Daemon, b: Daemon) -> (Daemon, Daemon) {
    match runs_alices_chat(server, database).as_str() {
        "node-a" => (a, b),
        "node-b" => (b, a),
        other => panic!("Alice's chat is held by {other:?}"),
    }
}

const LEASES: &str = "store:\n  lease_ttl: 1.5\n  lease_renew: 0.5\n";
const HOLDS: &str = "cluster: this node holds the lease";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_node_polls_and_another_takes_over_when_it_dies() {
    let Some(server) = TestPostgres::shared() else {
        return;
    };
    let (w, home_b, _dir_b, _) = two_nodes().await.unwrap();
    let mut a = w.start();
    eventually(WAIT, "node a holds the poll lease", || {
        a.log_text().contains(HOLDS).then_some(())
    })
    .await;
    let b = start_second_node(&w.home, &home_b).await;

    w.llm.push(Reply::text("from the poller"));
    assert_eq!(w.ask("hello").await, ["from the poller"]);
    settle().await;
    assert!(
        !b.log_text().contains(HOLDS),
        "b polled while a held the lease"
    );

    let status = std::process::Command::new(BIN)
        .args(["status", "--cluster", "--home"])
        .arg(&home_b.dir)
        .output()
        .unwrap();
    let shown = String::from_utf8_lossy(&status.stdout);
    assert!(status.status.success(), "{shown}");
    assert!(
        shown.contains("node node-a") && shown.contains("node node-b"),
        "{shown}"
    );
    let lease = format!("lease telegram:{}:poll", hermes_testkit::telegram::BOT_ID);
    let line = shown
        .lines()
        .find(|l| l.starts_with(&lease))
        .unwrap_or_else(|| panic!("{shown}"));
    assert!(line.contains("held by node-a"), "{line}");

    // The poller dies; the other takes over once the lease lapses, and answers.
    let killed = Instant::now();
    a.kill();
    eventually(
        Duration::from_secs(10),
        "node b takes the poll lease",
        || b.log_text().contains(HOLDS).then_some(()),
    )
    .await;
    let taken = killed.elapsed();
    eprintln!("failover (kill -9 → the other node polls): {taken:?}");
    assert!(taken < Duration::from_secs(5), "took {taken:?}");
    w.llm.push(Reply::text("from the other node"));
    assert_eq!(
        w.ask("are you there?").await,
        ["from the poller", "from the other node"]
    );
    settle().await;
    assert_eq!(w.telegram.sent_texts(ALICE).len(), 2, "answered once");
    assert!(
        !b.log_text().contains(server.password()),
        "the password reached the log"
    );
}

/// Said by a node that has taken shares of the work.
const TAKES: &str = "cluster: this node takes shares of the work over";

/// The world's node started, once it does the work (alone, it takes every share).
async fn start_working(w: &World) -> Daemon {
    let a = w.start();
    eventually(WAIT, "node a does the work", || {
        a.log_text().contains(TAKES).then_some(())
    })
    .await;
    a
}

/// Node b started with a copy of node a's state key (every node of one store signs and
/// checks with the same key), once it is up.
async fn start_second_node(home_a: &Home, home_b: &Home) -> Daemon {
    std::fs::copy(home_a.dir.join("state.key"), home_b.dir.join("state.key")).unwrap();
    let b = Daemon::start(BIN, home_b, &[]);
    eventually(WAIT, "node b is up", || {
        b.log_text()
            .contains("hermes-gateway is running")
            .then_some(())
    })
    .await;
    b
}

/// A kit of `fake`'s platform whose daemon is node a of a new database of the tests'
/// server (with `yaml`), everyone let in; the server (which stops when the last holder
/// lets go: keep it), the database's name and node b's `.env` lines. `None` without
/// PostgreSQL.
async fn kit_of_node_a<F: hermes_testkit::conformance::PlatformFake>(
    fake: F,
    yaml: &str,
) -> Option<(
    hermes_testkit::conformance::Kit<F>,
    std::sync::Arc<TestPostgres>,
    String,
    Vec<String>,
)> {
    let server = TestPostgres::shared()?;
    let database = server.create_database();
    let shared = vec![
        format!("{}=true", fake.allow_all_var()),
        format!("HERMES_STORE_URL={}", server.url(&database)),
    ];
    let node = |id: &str| {
        let mut lines = shared.clone();
        lines.push(format!("HERMES_NODE_ID={id}"));
        lines
    };
    let kit = hermes_testkit::conformance::Kit::new(fake, BIN, &node("node-a"), yaml).await;
    Some((kit, server, database, node("node-b")))
}

/// Node b of a kit's platform on node a's store (with `env_b` besides the platform's own
/// lines, and `yaml`), once it is up; its home lives as long as the directory returned.
async fn second_node_of<F: hermes_testkit::conformance::PlatformFake>(
    kit: &hermes_testkit::conformance::Kit<F>,
    env_b: Vec<String>,
    yaml: &str,
) -> (Daemon, tempfile::TempDir) {
    let dir_b = tempfile::tempdir().unwrap();
    let mut lines_b = kit.fake.env();
    lines_b.extend(env_b);
    let lines_b: Vec<&str> = lines_b.iter().map(String::as_str).collect();
    let home_b = Home::with_platform(
        dir_b.path(),
        &kit.llm.base_url(),
        &kit.fake.platform_yaml(),
        &lines_b,
        yaml,
    );
    (start_second_node(&kit.home, &home_b).await, dir_b)
}

/// Node a started first (it does the work), then node b with a's state key, once the two
/// share the work out (a gives shares up, b takes them).
async fn start_a_then_b(w: &World, home_b: &Home) -> (Daemon, Daemon) {
    let a = start_working(w).await;
    let b = start_second_node(&w.home, home_b).await;
    eventually(WAIT, "a and b share the work out", || {
        let given = a.log_text().matches("gives a share of the work up").count();
        (given == 8 && b.log_text().contains(TAKES)).then_some(())
    })
    .await;
    // b has handed over what was open in its shares (one look: 100 ms).
    settle().await;
    (a, b)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_the_dead_node_was_answering_is_answered_once_by_the_other() {
    let Some(server) = TestPostgres::shared() else {
        return;
    };
    let (w, home_b, _dir_b, database) = two_nodes().await.unwrap();
    let (a, b) = start_a_then_b(&w, &home_b).await;
    let runner = runs_alices_chat(&server, &database);
    let (mut a, _b) = alices_first(&server, &database, a, b);

    // a (the node running Alice's chat) is answering (the model takes its time) when it
    // dies.
    w.llm.push(Reply::Delayed(
        Duration::from_secs(30),
        Box::new(Reply::text("from the dead node")),
    ));
    w.llm.push(Reply::text("from the other node"));
    w.telegram.dm(ALICE, "what is the plan?");
    eventually(WAIT, "node a asks the model", || {
        (w.llm.requests().len() == 1).then_some(())
    })
    .await;
    a.kill();
    assert_eq!(w.replies(ALICE, 1).await, ["from the other node"]);
    assert_ne!(runs_alices_chat(&server, &database), runner);
    settle().await;
    assert_eq!(w.telegram.sent_texts(ALICE).len(), 1, "answered once");
    let asked = w.llm.requests();
    assert_eq!(asked.len(), 2, "the turn ran again on b, once");
    assert_eq!(
        hermes_testkit::llm::last_user_text(&asked[1]),
        "what is the plan?"
    );
}

/// The messages each node runs, as its router counted them.
async fn handed(daemon: &Daemon) -> u64 {
    handed_on(daemon, "telegram").await
}

/// The messages of `platform` each node runs, as its router counted them.
async fn handed_on(daemon: &Daemon, platform: &str) -> u64 {
    let addr = eventually(WAIT, "the node's HTTP address", || daemon.http_addr()).await;
    let text = reqwest::get(format!("http://{addr}/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    text.lines()
        .find(|l| {
            l.starts_with(&format!(
                "hermes_messages_in_total{{platform=\"{platform}\"}}"
            ))
        })
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
        .unwrap_or(0)
}

/// Telegram in webhook mode, two nodes behind a load balancer: an update posted to the
/// node that does not hold its chat's share is recorded there and answered, once, by the
/// node that does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_another_node_receives_is_answered_by_the_node_holding_its_chat() {
    const HOOK: &str = "https://bot.example.com/tg-hook";
    const SECRET: &str = "hook_secret-1";
    let Some(server) = TestPostgres::shared() else {
        return;
    };
    let database = server.create_database();
    let url = format!("HERMES_STORE_URL={}", server.url(&database));
    let hook = format!("TELEGRAM_WEBHOOK_URL={HOOK}");
    let secret = format!("TELEGRAM_WEBHOOK_SECRET={SECRET}");
    let env = |node: &'static str| {
        vec![
            "TELEGRAM_ALLOW_ALL_USERS=true".to_owned(),
            url.clone(),
            hook.clone(),
            secret.clone(),
            format!("HERMES_NODE_ID={node}"),
        ]
    };
    let env_a = env("node-a");
    let w = World::new(
        &env_a.iter().map(String::as_str).collect::<Vec<_>>(),
        LEASES,
    )
    .await;
    let dir_b = tempfile::tempdir().unwrap();
    let env_b = env("node-b");
    let home_b = Home::new(
        dir_b.path(),
        &w.telegram.base_url(),
        &w.llm.base_url(),
        &env_b.iter().map(String::as_str).collect::<Vec<_>>(),
        LEASES,
    );
    let (a, b) = start_a_then_b(&w, &home_b).await;
    let (runner, receiver) = alices_first(&server, &database, a, b);
    let addr = eventually(WAIT, "the receiver's HTTP address", || receiver.http_addr()).await;

    // Telegram delivers the update to the receiver (the load balancer chose it); the node
    // holding Alice's chat answers.
    w.llm.push(Reply::text("answered by the chat's node"));
    w.telegram.dm(ALICE, "hello");
    let update = w.telegram.take_queued().remove(0);
    let posted = reqwest::Client::new()
        .post(format!("http://{addr}/tg-hook"))
        .header("X-Telegram-Bot-Api-Secret-Token", SECRET)
        .json(&update)
        .send()
        .await
        .unwrap();
    assert_eq!(posted.status(), 200);
    assert_eq!(w.replies(ALICE, 1).await, ["answered by the chat's node"]);
    settle().await;
    assert_eq!(w.telegram.sent_texts(ALICE).len(), 1, "answered once");
    assert_eq!(w.llm.requests().len(), 1, "one turn");
    assert_eq!(handed(&runner).await, 1, "the chat's node ran the turn");
    assert_eq!(handed(&receiver).await, 0, "the receiver ran no turn");
}

/// Once each of `people` has an answer (within `bound`), and a little more time for
/// answers that would come twice.
async fn every_person_answered(w: &World, people: &[i64], bound: Duration) {
    let t = w.telegram.clone();
    eventually(bound, "every person answered", || {
        people
            .iter()
            .all(|&p| !t.sent_texts(p).is_empty())
            .then_some(())
    })
    .await;
    settle().await;
}

/// The conversations are spread over the nodes: with two nodes up, each runs the chats of
/// its shares, and each person is answered once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_nodes_share_the_conversations_out_and_each_person_is_answered_once() {
    const PEOPLE: i64 = 24;
    let Some(_server) = TestPostgres::shared() else {
        return;
    };
    let (w, home_b, _dir_b, _) = two_nodes().await.unwrap();
    let (a, b) = start_a_then_b(&w, &home_b).await;
    let people: Vec<i64> = (0..PEOPLE).map(|i| 20_000 + i).collect();
    for &person in &people {
        w.llm.push(Reply::text("hello"));
        w.telegram.dm(person, &format!("hi from {person}"));
    }
    every_person_answered(&w, &people, Duration::from_secs(30)).await;
    for &person in &people {
        assert_eq!(
            w.telegram.sent_texts(person).len(),
            1,
            "{person} answered once"
        );
    }
    let (on_a, on_b) = (handed(&a).await, handed(&b).await);
    assert_eq!(on_a + on_b, PEOPLE as u64, "one turn each");
    assert!(on_a > 0 && on_b > 0, "a ran {on_a}, b ran {on_b}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_node_that_wakes_after_losing_the_work_sends_nothing_and_stops() {
    let Some(server) = TestPostgres::shared() else {
        return;
    };
    let (w, home_b, _dir_b, database) = two_nodes().await.unwrap();
    let (a, b) = start_a_then_b(&w, &home_b).await;
    let runner = runs_alices_chat(&server, &database);
    // a: the node running Alice's chat.
    let (mut a, _b) = alices_first(&server, &database, a, b);

    // a's answer comes from the model while a is paused; b takes the work over meanwhile.
    w.llm.push(Reply::Delayed(
        Duration::from_secs(3),
        Box::new(Reply::text("from the paused node")),
    ));
    w.llm.push(Reply::text("from the other node"));
    w.telegram.dm(ALICE, "what is the plan?");
    eventually(WAIT, "node a asks the model", || {
        (w.llm.requests().len() == 1).then_some(())
    })
    .await;
    let asked = Instant::now();
    a.pause(true);
    assert_eq!(w.replies(ALICE, 1).await, ["from the other node"]);
    assert_ne!(runs_alices_chat(&server, &database), runner);
    // Woken once the model's answer to it is waiting on its socket: its turn would end now.
    tokio::time::sleep(Duration::from_millis(3_500).saturating_sub(asked.elapsed())).await;
    a.pause(false);
    let status = eventually(Duration::from_secs(10), "node a stops", || a.exited()).await;
    assert_eq!(status, 75, "{}", a.log_text());
    settle().await;
    assert_eq!(
        w.telegram.sent_texts(ALICE),
        ["from the other node"],
        "the paused node sent nothing after it woke"
    );
}

/// A batch of updates is dispatched once all of it is recorded, while the working node
/// looks for open rows every 100 ms and hands over what it finds: a row's turn may end
/// before the batch is dispatched. Each message must still be answered once (found by
/// hermes-bench --postgres: 1,463 of 2,000 replies doubled at 1,000 chats).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_of_one_long_batch_are_answered_once_each() {
    const PEOPLE: i64 = 300;
    let Some(server) = TestPostgres::shared() else {
        return;
    };
    let url = format!("HERMES_STORE_URL={}", server.url(&server.create_database()));
    let yaml = format!(
        "{LEASES}delivery:\n  rate_per_second: 1000\n  burst: 1000\n  bot_rate_per_second: 100000\n  bot_burst: 100000\n"
    );
    let w = World::new(
        &[
            "TELEGRAM_ALLOW_ALL_USERS=true",
            &url,
            "HERMES_NODE_ID=node-a",
        ],
        &yaml,
    )
    .await;
    let _a = start_working(&w).await;
    // Held back, then served at once: getUpdates hands out 100 a call.
    w.telegram.stall_polls(true);
    let people: Vec<i64> = (0..PEOPLE).map(|i| 10_000 + i).collect();
    for &person in &people {
        w.telegram.dm(person, &format!("hello from {person}"));
    }
    w.telegram.stall_polls(false);
    every_person_answered(&w, &people, Duration::from_secs(60)).await;
    settle().await;
    let doubled: Vec<i64> = people
        .iter()
        .copied()
        .filter(|&p| w.telegram.sent_texts(p).len() > 1)
        .collect();
    assert!(
        doubled.is_empty(),
        "{} of {PEOPLE} people were answered more than once (first: {:?})",
        doubled.len(),
        doubled.first()
    );
    assert_eq!(w.llm.requests().len(), PEOPLE as usize, "one turn each");
}

/// Discord's gateway is kept by one node (the shard's lease): the other does not connect
/// while the first lives; when it dies, the other connects once the lease lapses, fetches
/// what was written meanwhile, and answers it once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_node_keeps_discords_gateway_and_another_takes_it_over_when_it_dies() {
    use hermes_testkit::conformance::PlatformFake;
    use hermes_testkit::discord::FakeDiscord;
    let Some((kit, _server, _, env_b)) = kit_of_node_a(FakeDiscord::start().await, LEASES).await
    else {
        return;
    };
    let a = kit.start();
    eventually(WAIT, "node a connects to the gateway", || {
        (kit.fake.identifies().len() == 1).then_some(())
    })
    .await;
    let (b, _dir_b) = second_node_of(&kit, env_b, LEASES).await;

    kit.llm.push(Reply::text("from node a"));
    let person = kit.fake.person(1);
    let dm = kit.fake.dm_chat(&person);
    kit.fake.write(&dm, &person, "hello", true);
    assert_eq!(kit.shown(&dm, 1).await, ["from node a"]);
    settle().await;
    assert_eq!(kit.fake.identifies().len(), 1, "b connected beside a");

    // a dies; a message written before b connects is fetched and answered by b, once.
    let mut a = a;
    a.kill();
    kit.llm.push(Reply::text("from node b"));
    kit.fake.write(&dm, &person, "still there?", true);
    assert_eq!(kit.shown(&dm, 2).await, ["from node a", "from node b"]);
    settle().await;
    assert_eq!(kit.fake.shown(&dm).len(), 2, "answered once");
    assert_eq!(
        kit.fake.identifies().len(),
        2,
        "b connected once a was gone"
    );
    assert!(
        b.log_text()
            .contains("cluster: this node holds the lease lease=discord:"),
        "{}",
        b.log_text()
    );
}

/// The live holders of the Discord shards' leases, by shard: `(lease, holder)`.
fn shard_holders(server: &TestPostgres, database: &str) -> Vec<(String, String)> {
    let sql = "SELECT name, holder FROM leases WHERE name LIKE 'discord:%' \
               AND expires_at > CAST(extract(epoch FROM clock_timestamp()) * 1000 AS BIGINT) \
               ORDER BY name";
    let out = server.psql(server.password(), database, sql).unwrap();
    out.lines()
        .filter_map(|l| l.split_once('|'))
        .map(|(name, holder)| (name.to_owned(), holder.to_owned()))
        .collect()
}

/// A bot Discord wants on two shards: the node that starts alone connects both; once a
/// second node is up, the first lets one shard go and the second takes it, so each node
/// keeps one connection. A direct message (shard 0) and a server message (shard 1) are
/// each answered once; when the node keeping the server's shard dies, the other connects
/// that shard too and answers the next server message.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discords_shards_are_spread_over_the_nodes_and_taken_over_when_one_dies() {
    use hermes_testkit::conformance::PlatformFake;
    use hermes_testkit::discord::{FakeDiscord, Options};
    let fake = FakeDiscord::start_with(Options {
        shards: 2,
        ..Options::default()
    })
    .await;
    let Some((kit, server, database, env_b)) = kit_of_node_a(fake, LEASES).await else {
        return;
    };
    let a = kit.start();
    eventually(WAIT, "node a connects both shards", || {
        (kit.fake.connected_shards() == [0, 1]).then_some(())
    })
    .await;
    let (b, _dir_b) = second_node_of(&kit, env_b, LEASES).await;
    let holders = eventually(WAIT, "each node keeps one shard", || {
        let holders = shard_holders(&server, &database);
        let spread = holders.len() == 2 && holders[0].1 != holders[1].1;
        (spread && kit.fake.connected_shards() == [0, 1]).then_some(holders)
    })
    .await;
    assert!(
        kit.fake.identified_shards().iter().all(|&[_, of]| of == 2),
        "every connection names two shards: {:?}",
        kit.fake.identified_shards()
    );

    let person = kit.fake.person(1);
    let dm = kit.fake.dm_chat(&person);
    let server_channel = kit.fake.group_chat();
    kit.llm.push(Reply::text("in the DM"));
    kit.fake.write(&dm, &person, "hello", true);
    assert_eq!(kit.shown(&dm, 1).await, ["in the DM"]);
    kit.llm.push(Reply::text("in the server"));
    kit.fake.write(&server_channel, &person, "hello all", true);
    assert_eq!(kit.shown(&server_channel, 1).await, ["in the server"]);

    // The node keeping the server's shard (1) dies; the other connects it and answers.
    let (mut keeper, _other) = if holders[1].1 == "node-a" {
        (a, b)
    } else {
        (b, a)
    };
    let connects = kit.fake.identified_shards().len();
    keeper.kill();
    eventually(WAIT, "the other node connects shard 1", || {
        let now = kit.fake.identified_shards();
        now[connects..].contains(&[1, 2]).then_some(())
    })
    .await;
    kit.llm.push(Reply::text("still here"));
    kit.fake.write(&server_channel, &person, "anyone?", true);
    assert_eq!(
        kit.shown(&server_channel, 2).await,
        ["in the server", "still here"]
    );
    settle().await;
    assert_eq!(kit.fake.shown(&server_channel).len(), 2, "answered once");
    assert_eq!(kit.fake.shown(&dm).len(), 1, "the DM answered once");
}

/// A delegation gone to the background runs on the node holding its chat's share. The
/// other node's restart leaves it alone (it is not that node's to run again); when the
/// holder dies, the node that takes the share over runs it again, and it reports back once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delegation_is_run_again_only_by_the_node_that_takes_its_chat_over() {
    use hermes_testkit::llm::last_user_text;
    let Some(server) = TestPostgres::shared() else {
        return;
    };
    let yaml = format!("{LEASES}delegation:\n  background_after_seconds: 1\n");
    let (w, home_b, _dir_b, database) = two_nodes_with(&yaml, &yaml).await.unwrap();
    let (a, b) = start_a_then_b(&w, &home_b).await;
    let (mut holder, mut other) = alices_first(&server, &database, a, b);
    let home_of_other: &Home = if runs_alices_chat(&server, &database) == "node-a" {
        &home_b
    } else {
        &w.home
    };
    let children = || {
        w.llm
            .requests()
            .into_iter()
            .filter(|r| last_user_text(r).starts_with("[You are a sub-agent"))
            .count()
    };
    w.llm.push(Reply::ToolCall {
        name: "delegate_task".into(),
        arguments: serde_json::json!({"goal": "survey the logs"}),
    });
    w.llm.push(Reply::Delayed(
        Duration::from_secs(60),
        Box::new(Reply::text("never heard")),
    ));
    w.llm.push(Reply::text("Started in the background."));
    assert_eq!(
        w.ask("survey the logs").await,
        ["Started in the background."]
    );
    assert_eq!(children(), 1);

    // The other node restarts: the delegation is not its own to run again.
    other.kill();
    let other = Daemon::start(BIN, home_of_other, &[]);
    eventually(WAIT, "the other node takes shares again", || {
        other.log_text().contains(TAKES).then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        children(),
        1,
        "run again by a node that does not hold its chat"
    );

    // The holder dies: the other takes Alice's chat over and runs the delegation again.
    w.llm.push(Reply::text("the logs are clean"));
    w.llm
        .push(Reply::text("The survey is done: the logs are clean."));
    holder.kill();
    let replies = w.replies(ALICE, 2).await;
    assert_eq!(replies[1], "The survey is done: the logs are clean.");
    assert_eq!(
        children(),
        2,
        "run again once, by the node that took it over"
    );
    settle().await;
    assert_eq!(w.telegram.sent_texts(ALICE).len(), 2, "reported once");
    drop(other);
}

/// The web chat's page is served by one node, on its own machine: a chat of the page is
/// run and answered by that node, whichever node holds the share its id alone would fall
/// in (there, the reply would wait for a page on the other node, forever).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_web_chat_is_run_by_the_node_serving_its_page() {
    use hermes_testkit::conformance::PlatformFake;
    use hermes_testkit::webchat::FakeWebPage;
    let Some(server) = TestPostgres::shared() else {
        return;
    };
    let page = FakeWebPage::start().await;
    let yaml_b = format!("{}{}{LEASES}", page.platform_yaml(), page.top_level_yaml());
    let (w, home_b, dir_b, database) = two_nodes_with(LEASES, &yaml_b).await.unwrap();
    page.prepare_home(dir_b.path());
    let (a, b) = start_a_then_b(&w, &home_b).await;
    // A chat whose share, by its id alone, node a holds.
    let holder = |share: u32| {
        let sql = format!("SELECT holder FROM leases WHERE name = 'work:{share}'");
        server.psql(server.password(), &database, &sql).unwrap()
    };
    let chat = (0..64)
        .map(|n| format!("c-cluster-{n}"))
        .find(|chat| {
            let share = hermes_adapter::work_share(
                hermes_adapter::Platform::Web,
                None,
                chat,
                hermes_gateway::cluster::shares::SHARES,
            );
            holder(share) == "node-a"
        })
        .expect("a chat of node a's shares");

    w.llm.push(Reply::text("from the page's own node"));
    page.write(&chat, "operator", "hello", true);
    let shown = eventually(WAIT, "the page shows the reply", || {
        let shown = page.messages(&chat);
        (!shown.is_empty()).then_some(shown)
    })
    .await;
    assert_eq!(shown[0].markdown, "from the page's own node");
    assert_eq!(handed_on(&b, "web").await, 1, "run by the page's node");
    assert_eq!(handed_on(&a, "web").await, 0);
    settle().await;
    assert_eq!(page.messages(&chat).len(), 1, "shown once");
}

/// Slack in Socket Mode, two nodes: one connection for the app across them (Slack spreads
/// an app's events over its connections, so with several a later message could be
/// answered before an earlier one). A burst from one person is answered in order; when
/// the node keeping the connection dies, the other connects and answers what was written
/// meanwhile, once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slacks_socket_mode_is_one_connection_across_the_nodes_and_keeps_a_persons_order() {
    use hermes_testkit::conformance::PlatformFake;
    use hermes_testkit::llm::last_user_text;
    use hermes_testkit::slack::FakeSlack;
    let yaml = format!("{LEASES}display:\n  busy_input_mode: queue\n");
    let Some((kit, _server, _, env_b)) = kit_of_node_a(FakeSlack::start().await, &yaml).await
    else {
        return;
    };
    let a = kit.start();
    assert!(kit.fake.wait_connected(WAIT).await, "node a connects");
    let (b, _dir_b) = second_node_of(&kit, env_b, &yaml).await;
    settle().await;
    assert_eq!(kit.fake.connections(), 1, "one connection for both nodes");

    let person = kit.fake.person(1);
    let dm = kit.fake.dm_chat(&person);
    for k in 0..5 {
        kit.llm.push(Reply::text(format!("answer {k}")));
    }
    for k in 0..5 {
        kit.fake.write(&dm, &person, &format!("burst {k}"), true);
    }
    assert_eq!(kit.shown(&dm, 5).await.len(), 5);
    let seen: Vec<String> = kit.llm.requests().iter().map(last_user_text).collect();
    let expected: Vec<String> = (0..5).map(|k| format!("burst {k}")).collect();
    assert_eq!(
        seen, expected,
        "the model saw the person's messages in order"
    );

    // The node keeping the connection dies: the other connects and answers.
    let holder = if b.log_text().contains("lease=slack:") {
        b
    } else {
        a
    };
    let mut holder = holder;
    let connects = kit.fake.connects();
    holder.kill();
    kit.llm.push(Reply::text("still here"));
    kit.fake.write(&dm, &person, "anyone?", true);
    assert_eq!(kit.shown(&dm, 6).await[5], "still here");
    assert!(kit.fake.connects() > connects, "the other node connected");
    settle().await;
    assert_eq!(kit.fake.shown(&dm).len(), 6, "answered once");
    assert_eq!(kit.fake.connections(), 1);
}

/// A turn waiting for a person's approval keeps its chat's share on its node (its event
/// is closed by then, so it does not look busy): when a second node joins, the first gives
/// other shares up, not that one, and the press is answered where the turn waits. Before,
/// the share moved, the other node expired the approval, and the command never ran.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_share_with_an_approval_waiting_stays_with_its_node_when_another_joins() {
    let Some(server) = TestPostgres::shared() else {
        return;
    };
    let (w, home_b, _dir_b, database) = two_nodes().await.unwrap();
    // A person whose chat falls in the share given up first (the highest).
    let share_of = |person: i64| {
        hermes_adapter::work_share(
            hermes_adapter::Platform::Telegram,
            None,
            &person.to_string(),
            hermes_gateway::cluster::shares::SHARES,
        )
    };
    let person = (5000..6000).find(|&p| share_of(p) == 15).unwrap();
    let _a = start_working(&w).await;
    let target = w.home.dir.join("work").join("victim");
    std::fs::create_dir_all(&target).unwrap();
    let command = format!("rm -rf {}", target.display());
    w.llm.push(Reply::terminal(&command));
    w.llm.push(Reply::text("deleted"));
    w.telegram.dm(person, "clean up");
    let asked = prompt(&w, person, 1).await;

    let b = start_second_node(&w.home, &home_b).await;
    eventually(WAIT, "b takes shares", || {
        b.log_text().contains(TAKES).then_some(())
    })
    .await;
    settle().await;
    let sql = "SELECT holder FROM leases WHERE name = 'work:15'";
    let holder = server.psql(server.password(), &database, sql).unwrap();
    assert_eq!(holder, "node-a", "the share whose approval waits stayed");
    press(&w, person, person, &asked, "Allow once");
    assert_eq!(w.replies(person, 2).await[1], "deleted");
    assert!(!target.exists(), "the command ran");
}
