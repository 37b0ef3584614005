//! `hermes-testkit`: fakes that speak the real wire protocols on 127.0.0.1, so tests run the
//! real client crates against them, a handle to run the real daemon binary, and the
//! conformance kit every platform's fake is run through.

pub mod browser;
pub mod conformance;
pub mod crash;
pub mod daemon;
pub mod discord;
pub mod llm;
pub mod mcp;
pub mod multipart;
pub mod needs;
pub mod pids;
pub mod postgres;
pub mod reset;
pub mod slack;
pub mod soak;
pub mod telegram;
pub mod web;
pub mod webchat;
pub mod whatsapp;

use std::time::Duration;

/// A small JPEG-looking picture (the magic bytes, then 2,000 varied bytes) for the tests
/// where a person sends a photo.
pub fn sample_jpeg() -> Vec<u8> {
    let mut bytes = vec![0xff, 0xd8, 0xff, 0xe0];
    bytes.extend((0..2000u32).map(|i| (i % 251) as u8));
    bytes
}

/// Poll `check` every 20 ms until it returns `Some`, or panic after `timeout` with `what`.
pub async fn eventually<T>(
    timeout: Duration,
    what: &str,
    mut check: impl FnMut() -> Option<T>,
) -> T {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Some(v) = check() {
            return v;
        }
        if tokio::time::Instant::now() >= deadline {
            panic!("timed out after {timeout:?} waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
