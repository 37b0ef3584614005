//! The crash harness (`hermes_testkit::crash`) in CI: the daemon with all four platforms,
//! killed with SIGKILL at each kind of moment and restarted, loses no message, shows none
//! twice where the platform can tell a resend (Discord, Slack), runs no approval that was
//! waiting and tells its chat. `HERMES_CRASH_KILLS` sets the number of kills (10 here;
//! `hermes-bench crash` runs hundreds on the release binary).

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
    };
    let report = run(&plan).await;
    println!("{}", report.table());
    let problems = report.problems();
    assert!(problems.is_empty(), "{problems:#?}\n{}", report.table());
}
