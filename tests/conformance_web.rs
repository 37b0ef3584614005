//! The conformance kit (`hermes_testkit::conformance`) against the web chat: a fake page
//! logs in with the home's token, keeps the event stream open and posts the person's
//! messages and presses to the daemon's own listener. The web chat has one person and no
//! groups, so the kit skips the scenarios about strangers, other members and groups (the
//! door itself is tested in `web_e2e`); its platform trouble is the page going away.

hermes_testkit::conformance_suite!(
    hermes_testkit::webchat::FakeWebPage::start(),
    env!("CARGO_BIN_EXE_hermes-gateway")
);
