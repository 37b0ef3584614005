//! Fuzz target `discord_frame`: a Discord gateway frame through the adapter's normalisation
//! (`hermes_fuzzing::discord_frame`).

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| hermes_fuzzing::discord_frame(data));
