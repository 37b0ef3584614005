//! Fuzz target `whatsapp_webhook`: a WhatsApp webhook delivery through the adapter's route
//! (`hermes_fuzzing::whatsapp_webhook`).

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| hermes_fuzzing::whatsapp_webhook(data));
