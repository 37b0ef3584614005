//! The conformance kit (`hermes_testkit::conformance`) against WhatsApp (Cloud API): the
//! fake Graph API answers the daemon's sends, and the fake signs and posts people's
//! messages to the daemon's webhook as Meta does. WhatsApp has no group chats and no edits,
//! so the kit skips the group scenario and checks a streamed answer arrives whole, once.

hermes_testkit::conformance_suite!(
    hermes_testkit::whatsapp::FakeWhatsApp::start(),
    env!("CARGO_BIN_EXE_hermes-gateway")
);
