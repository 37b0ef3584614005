//! hermes-gateway: a messaging gateway daemon that lets people chat with an AI agent.
//!
//! See `docs/architecture.md` for the codemap and the invariants each module defends.

pub mod agent;
pub mod approval;
pub mod cli;
pub mod cluster;
pub mod config;
pub mod confine;
pub mod cron;
pub mod daemon;
pub mod delivery;
pub mod heap;
pub mod home;
pub mod http;
pub mod journal;
pub mod llm;
pub mod mcp;
pub mod media;
pub mod metrics;
pub mod nofollow;
pub mod platforms;
pub mod process;
pub mod profiles;
pub mod reload;
pub mod router;
pub mod secrets;
pub mod service;
pub mod session;
pub mod shell;
pub mod state_key;
pub mod store;
pub mod systemd;
#[cfg(test)]
mod testing;
pub mod tool;
pub mod tools;
