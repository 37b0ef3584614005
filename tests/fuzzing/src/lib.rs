//! `hermes-fuzzing`: the fuzz targets for what hermes-gateway reads from outside, one
//! function per target, each taking any bytes. A function panics only when an invariant
//! is broken (a finding; the message says which); anything else the input does (a parse
//! error, a refused request) is an ordinary outcome.
//!
//! * [`telegram_update`]: a Bot API `Update` (or a list of them) → `hermes_telegram::normalize`.
//! * [`whatsapp_webhook`]: a `POST` body through the WhatsApp adapter's webhook route.
//! * [`slack_webhook`]: a body through the Slack adapter's Events API routes.
//! * [`discord_frame`]: a gateway frame → serenity's models → the Discord adapter's
//!   normalisation.
//! * [`markdown`]: a reply through each platform's render path and the chunker.
//!
//! It owns these functions and their corpus replay (`tests/corpus_replay.rs`, on stable, in
//! CI). The cargo-fuzz crate that drives them with libFuzzer is `fuzz/` at the root of the
//! repository, with the seed corpora in `fuzz/corpus/<target>/` and inputs that once found
//! something in `fuzz/regressions/<target>/`.

mod discord;
mod markdown;
mod sink;
mod slack;
mod telegram;
mod whatsapp;

/// Runs a target on one input and tells how much it reached (events recorded, message
/// bodies made): what the corpus replay checks the seeds by.
pub type Run = fn(&[u8]) -> usize;

/// Every target by name.
pub const TARGETS: [(&str, Run); 5] = [
    ("telegram_update", telegram::run),
    ("whatsapp_webhook", whatsapp::run),
    ("slack_webhook", slack::run),
    ("discord_frame", discord::run),
    ("markdown", markdown::run),
];

/// A Telegram `Update` (and `Vec<Update>`) from the bytes, each normalised.
pub fn telegram_update(data: &[u8]) {
    telegram::run(data);
}

/// The bytes as a WhatsApp webhook delivery: forged signatures refused, then the handler.
pub fn whatsapp_webhook(data: &[u8]) {
    whatsapp::run(data);
}

/// The bytes as a body of each Slack Events API route.
pub fn slack_webhook(data: &[u8]) {
    slack::run(data);
}

/// The bytes as a Discord gateway frame.
pub fn discord_frame(data: &[u8]) {
    discord::run(data);
}

/// The bytes as the model's Markdown, rendered and split for every platform.
pub fn markdown(data: &[u8]) {
    markdown::run(data);
}

/// A current-thread runtime with a paused clock (timers fire as soon as nothing else can
/// run), for the webhook routes.
fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .expect("a tokio runtime")
}

/// Up to `n` bytes of `data` in lower-case hex (a signature that is not one).
fn hex(data: &[u8], n: usize) -> String {
    data.iter().take(n).map(|b| format!("{b:02x}")).collect()
}
