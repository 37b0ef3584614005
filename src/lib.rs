//! hermes-gateway: a messaging gateway daemon for an AI agent.
pub mod config;
pub mod store;
