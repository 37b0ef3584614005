//! Fuzz target `telegram_update`: a Telegram Bot API update, normalised
//! (`hermes_fuzzing::telegram_update`).

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| hermes_fuzzing::telegram_update(data));
