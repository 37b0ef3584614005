//! The conformance kit (`hermes_testkit::conformance`) against Discord: the real daemon,
//! serenity's gateway client and the adapter's REST client against the fake Discord.

use hermes_testkit::discord::FakeDiscord;

hermes_testkit::conformance_suite!(FakeDiscord::start(), env!("CARGO_BIN_EXE_hermes-gateway"));
