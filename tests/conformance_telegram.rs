//! The conformance kit (`hermes_testkit::conformance`) against Telegram: the real daemon and
//! teloxide against the fake Bot API.

use hermes_testkit::telegram::FakeTelegram;

hermes_testkit::conformance_suite!(FakeTelegram::start(), env!("CARGO_BIN_EXE_hermes-gateway"));
