//! Failures in terms the daemon can act on: [`SendError`] for one send, [`SinkError`] for a
//! recording that did not happen, [`AdapterError`] for an adapter that stopped.

use std::time::Duration;

use crate::capabilities::RateScope;

/// Why a send failed.
#[derive(Debug, Clone, thiserror::Error, PartialEq)]
pub enum SendError {
    /// The platform asked us to wait (HTTP 429 / flood control); `scope` says whether the
    /// chat, the whole bot or one method is held back.
    #[error("rate limited by the platform ({scope:?}); retry after {retry_after:?}")]
    RateLimited {
        retry_after: Duration,
        scope: RateScope,
    },
    /// The platform could not parse our markup; the plain fallback should be sent instead.
    #[error("the platform rejected the message markup: {0}")]
    MarkupRejected(String),
    /// A passing failure (network, 5xx); retry with backoff.
    #[error("transient failure: {0}")]
    Transient(String),
    /// The platform refused the bot's credentials (a revoked or wrong token). Nothing will
    /// get through until the operator fixes it; the message stays queued.
    #[error("the platform refused the bot's credentials: {0}")]
    Unauthorized(String),
    /// WhatsApp: the person has not written in the last 24 hours, so only a template
    /// message may be sent.
    #[error("outside the platform's customer-service window: {0}")]
    OutsideWindow(String),
    /// Nobody is there to take it now (no web chat page is open): the message stays queued
    /// until the adapter says the platform is reachable again
    /// ([`crate::InboundSink::platform_reachable`]).
    #[error("nobody is connected to receive it: {0}")]
    Unreachable(String),
    /// The message is longer than the platform takes (the adapter's rendering should have
    /// prevented this).
    #[error("the message is too long for the platform: {0}")]
    TooLong(String),
    /// The platform refused for good (chat not found, bot blocked, message too old to edit…).
    #[error("rejected by the platform: {0}")]
    Rejected(String),
}

/// The sink could not record an event; the adapter must not acknowledge it to the platform.
#[derive(Debug, Clone, thiserror::Error)]
#[error("could not record inbound event: {0}")]
pub struct SinkError(pub String);

/// Why an adapter stopped.
#[derive(Debug, thiserror::Error)]
pub enum AdapterError {
    /// Credentials or configuration the platform refuses; restarting will not help. The
    /// daemon reports it and keeps the other platforms running.
    #[error("configuration rejected by the platform: {0}")]
    Config(String),
    /// Anything else; the daemon restarts the adapter with backoff.
    #[error("{0}")]
    Other(String),
}

/// Why an attachment could not be fetched.
#[derive(Debug, Clone, thiserror::Error, PartialEq)]
pub enum FetchError {
    /// The file is larger than the cap the daemon gave.
    #[error("the file is too large ({size} bytes; the limit is {max})")]
    TooLarge { size: u64, max: u64 },
    /// This adapter cannot fetch media (yet).
    #[error("this platform's files cannot be fetched")]
    Unsupported,
    /// The platform refused or failed.
    #[error(transparent)]
    Failed(#[from] SendError),
}
