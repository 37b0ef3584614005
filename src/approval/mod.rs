//! Dangerous-command approval (invariant 6): `detect` decides what is dangerous (by parsing
//! the command as bash will run it, with a text layer under it); `broker` parks the tool
//! call, asks the chat, and waits for an allowed person's decision, the timeout, or the
//! turn's cancellation; `prompt` is what the chat sees. Silence denies.

mod broker;
pub mod detect;
mod prompt;

pub use broker::{ApprovalBroker, CheckContext, Gate, Resolution, Target};
pub use detect::Scene;
pub use prompt::{Decision, parse_choice_id};
