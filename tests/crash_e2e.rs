//! The crash harness (`hermes_testkit::crash`) in CI: the daemon with all four platforms,
//! killed with SIGKILL at each kind of moment and restarted, loses no message, shows none
//! twice where the platform can tell a resend (Discord, Slack), runs no approval that was
//! waiting and tells its chat; and the same with three nodes on one PostgreSQL store, where
//! kills and pauses fall on any node. `HERMES_CRASH_KILLS` sets the number of kills (10
//! here; `hermes-bench crash [--nodes 3]` runs hundreds on the release binary).

use hermes_testkit::crash::{Plan, Report, run};

/// The plan for `nodes` nodes with `chats` people per platform: `HERMES_CRASH_KILLS`
/// kills (10), seeded by `HERMES_CRASH_SEED` or `seed`.
fn plan(nodes: usize, chats: u32, seed: u64) -> Plan {
    let from_env = |name: &str| std::env::var(name).ok().and_then(|v| v.parse().ok());
    Plan {
        binary: env!("CARGO_BIN_EXE_hermes-gateway").to_owned(),
        kills: from_env("HERMES_CRASH_KILLS").unwrap_or(10) as usize,
        chats,
        seed: from_env("HERMES_CRASH_SEED").unwrap_or(seed),
        verbose: true,
        nodes,
    }
}

/// Run `plan`, failing on what broke an invariant.
async fn run_and_check(plan: &Plan) -> Report {
    let report = run(plan).await;
    println!("{}", report.table());
    let problems = report.problems();
    assert!(problems.is_empty(), "{problems:#?}\n{}", report.table());
    report
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kills_at_every_kind_of_moment_lose_nothing_and_show_nothing_twice() {
    run_and_check(&plan(1, 2, 0x0063_7261_7368)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_nodes_killed_and_paused_at_random_lose_nothing_and_show_nothing_twice() {
    // (Held for the run, which makes its database there.)
    let Some(_server) = hermes_testkit::postgres::TestPostgres::shared() else {
        return;
    };
    // Five people on each of the four platforms: 20 conversations at once.
    let report = run_and_check(&plan(3, 5, 0x0063_6c75_7374)).await;
    assert!(report.failovers_ms.len() >= 2, "{}", report.table());
}
