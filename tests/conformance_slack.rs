//! The conformance kit (`hermes_testkit::conformance`) against Slack, both ways Slack apps
//! receive: Socket Mode (slack-morphism's listener against the fake's WebSocket) and the
//! Events API (the fake signs and posts to the daemon's HTTP server).

mod socket_mode {
    use hermes_testkit::slack::FakeSlack;

    hermes_testkit::conformance_suite!(FakeSlack::start(), env!("CARGO_BIN_EXE_hermes-gateway"));
}

mod events_api {
    use hermes_testkit::slack::FakeSlack;

    hermes_testkit::conformance_suite!(
        FakeSlack::start_events(),
        env!("CARGO_BIN_EXE_hermes-gateway")
    );
}
