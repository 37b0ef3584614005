//! Dangerous-command approval (invariant 6): `patterns` decides what is dangerous; `broker`
//! parks the tool call, asks the chat, and waits for an allowed person's decision, the
//! timeout, or the turn's cancellation. Silence denies.

mod broker;
pub mod patterns;

pub use broker::{
    ApprovalBroker, CheckContext, Choice, Gate, Resolution, Target, parse_button_data,
};
