//! Dangerous-command approval (invariant 6): `patterns` decides what is dangerous; `broker`
//! parks the tool call, asks the chat, and waits for an allowed person's decision, the
//! timeout, or the turn's cancellation; `prompt` is what the chat sees. Silence denies.

mod broker;
pub mod patterns;
mod prompt;

pub use broker::{ApprovalBroker, CheckContext, Gate, Resolution, Target};
pub use prompt::{Decision, parse_choice_id};
