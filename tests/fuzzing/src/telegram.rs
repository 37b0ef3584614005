//! `telegram_update`: the bytes as a Bot API `Update` (and as a `getUpdates` list of them),
//! each normalised as the polling loop does.

use hermes_adapter::Platform;
use hermes_telegram::{BotIdentity, normalize};
use teloxide_core::types::Update;

use crate::sink::check;

/// The bot of the seed corpus (the testkit's fake Telegram bot).
fn me() -> BotIdentity {
    BotIdentity {
        id: 999_000,
        username: "hermes_test_bot".into(),
    }
}

/// How many events the bytes made.
pub fn run(data: &[u8]) -> usize {
    let mut updates: Vec<Update> = serde_json::from_slice::<Vec<Update>>(data).unwrap_or_default();
    if let Ok(update) = serde_json::from_slice::<Update>(data) {
        updates.push(update);
    }
    let me = me();
    let mut made = 0;
    for update in &updates {
        if let Some(event) = normalize(update, &me) {
            check(&event, Platform::Telegram, "telegram:");
            made += 1;
        }
    }
    made
}
