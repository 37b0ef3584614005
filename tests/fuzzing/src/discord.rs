//! `discord_frame`: the bytes as one gateway frame, through serenity's models and the
//! adapter's normalisation (`hermes_discord::fuzzing::frame`).

use hermes_adapter::Platform;

use crate::sink::check;

/// How many events the frame made (in a DM, a channel and a thread: up to three).
pub fn run(data: &[u8]) -> usize {
    let events = hermes_discord::fuzzing::frame(data);
    for event in &events {
        check(event, Platform::Discord, "discord:");
    }
    events.len()
}
