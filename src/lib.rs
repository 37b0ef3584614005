//! hermes-gateway: a messaging gateway daemon for an AI agent.
pub mod config;
pub mod format;
pub mod llm;
pub mod store;
pub mod tools;
