//! The conformance kit (`hermes_testkit::conformance`) with the daemon on the PostgreSQL
//! store (`HERMES_STORE_URL`, a new database of the tests' server per scenario), against
//! the Telegram fake: every query a turn, a press, a restart or a refused send makes, on
//! the second engine.

use hermes_testkit::telegram::FakeTelegram;

hermes_testkit::conformance_suite!(
    postgres: FakeTelegram::start(),
    env!("CARGO_BIN_EXE_hermes-gateway")
);
