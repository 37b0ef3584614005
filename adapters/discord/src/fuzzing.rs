//! A hook for the fuzz targets (`tests/fuzzing`), not part of the adapter's API: one gateway
//! frame, as the WebSocket delivers it, through serenity's models and the adapter's own
//! normalisation, with a fixed bot and every kind of channel. No network, no state.

use hermes_adapter::Inbound;
use serenity::model::application::Interaction;
use serenity::model::event::{Event, GatewayEvent};

use crate::normalize::{self, Identity, Place, Reading};

/// The bot the frames are read for (the testkit's fake Discord bot).
pub const BOT_ID: &str = "900000000000000001";

/// The events a frame makes in a DM, a server channel and a thread the bot opened; none
/// for a frame serenity cannot parse or the gateway does not turn into events.
pub fn frame(bytes: &[u8]) -> Vec<Inbound> {
    let Ok(GatewayEvent::Dispatch(_, event)) = serde_json::from_slice::<GatewayEvent>(bytes) else {
        return Vec::new();
    };
    let me = Identity {
        user_id: BOT_ID.into(),
        application_id: BOT_ID.into(),
        name: "hermes_test_bot".into(),
        from_ready: true,
    };
    // A listed bot, so bots' messages are read too.
    let reading = Reading {
        free_response_channels: vec!["300000000000000004".into()],
        allowed: vec!["100000000000000009".into()],
        allow_all: false,
        ignore_no_mention: true,
    };
    let places = [
        Place::Direct,
        Place::Channel,
        Place::Thread {
            parent: "300000000000000002".into(),
            owner: Some(BOT_ID.into()),
        },
    ];
    let mut made = Vec::new();
    for place in &places {
        match &event {
            Event::MessageCreate(created) => {
                let _ = normalize::mentions(&created.message, &me);
                made.extend(normalize::message(&created.message, &me, place, &reading));
            }
            Event::InteractionCreate(created) => match &created.interaction {
                Interaction::Component(press) => made.push(normalize::press(press, place)),
                Interaction::Command(command) => made.push(normalize::command(command, place)),
                _ => {}
            },
            _ => {}
        }
    }
    made
}
