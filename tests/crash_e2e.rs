//! The crash harness (`hermes_testkit::crash`) in CI: the daemon with all four platforms,
//! killed with SIGKILL at each kind of moment and restarted, loses no message, shows none
//! twice where the platform can tell a resend (Discord, Slack), runs no approval that was
//! waiting and tells its chat; and the same with three nodes on one PostgreSQL store, where
//! kills and pauses fall on any node. `HERMES_CRASH_KILLS` sets the number of kills (10
//! here; `hermes-bench crash [--nodes 3]` runs hundreds on the release binary).

use hermes_testkit::crash::{Plan, run};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kills_at_every_kind_of_moment_lose_nothing_and_show_nothing_twice() {
    let kills = std::env::var("HERMES_CRASH_KILLS")
        .ok()
        .and_then(|k| k.parse().ok())
        .unwrap_or(10);
    let plan = Plan {
        binary: env!("CARGO_BIN_EXE_hermes-gateway").to_owned(),
        kills,
        chats: 2,
        seed: std::env::var("HERMES_CRASH_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(0x0063_7261_7368),
        verbose: true,
        nodes: 1,
    };
    let report = run(&plan).await;
    println!("{}", report.table());
    let problems = report.problems();
    assert!(problems.is_empty(), "{problems:#?}\n{}", report.table());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_nodes_killed_and_paused_at_random_lose_nothing_and_show_nothing_twice() {
    // (Held for the run, which makes its database there.)
    let Some(_server) = hermes_testkit::postgres::TestPostgres::shared() else {
        return;
    };
    let kills = std::env::var("HERMES_CRASH_KILLS")
        .ok()
        .and_then(|k| k.parse().ok())
        .unwrap_or(10);
    let plan = Plan {
        binary: env!("CARGO_BIN_EXE_hermes-gateway").to_owned(),
        kills,
        // Five people on each of the four platforms: 20 conversations at once.
        chats: 5,
        seed: std::env::var("HERMES_CRASH_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(0x0063_6c75_7374),
        verbose: true,
        nodes: 3,
    };
    let report = run(&plan).await;
    println!("{}", report.table());
    let problems = report.problems();
    assert!(problems.is_empty(), "{problems:#?}\n{}", report.table());
    assert!(report.failovers_ms.len() >= 2, "{}", report.table());
}
