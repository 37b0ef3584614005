//! What the Discord end-to-end tests share: the daemon's binary, the kits on the fake
//! Discord, and waits.
#![allow(dead_code)]

use std::time::Duration;

use hermes_testkit::conformance::{Kit, PlatformFake};
use hermes_testkit::discord::FakeDiscord;
use hermes_testkit::eventually;

pub const BIN: &str = env!("CARGO_BIN_EXE_hermes-gateway");
pub const WAIT: Duration = Duration::from_secs(15);

pub async fn open_kit() -> Kit<FakeDiscord> {
    Kit::open(FakeDiscord::start().await, BIN).await
}

pub async fn kit_with(fake: FakeDiscord, env: &[&str], yaml: &str) -> Kit<FakeDiscord> {
    let mut lines = vec!["DISCORD_ALLOW_ALL_USERS=true".to_owned()];
    lines.extend(env.iter().map(|l| l.to_string()));
    Kit::new(fake, BIN, &lines, yaml).await
}

pub async fn settle() {
    tokio::time::sleep(Duration::from_millis(800)).await;
}

/// Wait for the model to have been asked `count` times.
pub async fn asked(kit: &Kit<FakeDiscord>, count: usize) {
    let llm = kit.llm.clone();
    eventually(WAIT, &format!("{count} model requests"), || {
        (llm.requests().len() >= count).then_some(())
    })
    .await;
}

/// Alice and her DM, with one exchange done so the adapter has seen the channel.
pub async fn after_one_exchange(kit: &Kit<FakeDiscord>) -> (String, String) {
    let alice = kit.fake.person(1);
    let dm = kit.fake.dm_chat(&alice);
    kit.fake.message(&dm, &alice, "hello", true);
    kit.shown(&dm, 1).await;
    (alice, dm)
}
