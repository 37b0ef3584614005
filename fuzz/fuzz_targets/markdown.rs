//! Fuzz target `markdown`: a reply rendered and split for every platform
//! (`hermes_fuzzing::markdown`).

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| hermes_fuzzing::markdown(data));
