//! Fuzz target `slack_webhook`: a body on each Slack Events API route
//! (`hermes_fuzzing::slack_webhook`).

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| hermes_fuzzing::slack_webhook(data));
