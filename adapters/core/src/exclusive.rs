//! What only one node of the gateway may do at a time: poll Telegram's `getUpdates` for one
//! bot (Telegram answers 409 to a second poller), keep one Discord shard. On one node it is
//! always this node's; on several sharing a store, the daemon holds a lease for it.

use async_trait::async_trait;

/// Something only one node may do at a time, by name (`telegram:<bot>:poll`).
#[async_trait]
pub trait Exclusive: Send + Sync {
    /// Returns once this node may do it. The number changes whenever this node got it
    /// anew: another node may have done it meanwhile, so what it keeps in the store (a
    /// polling offset) is to be read again.
    async fn acquired(&self) -> u64;

    /// Returns once this node no longer holds it under `turn` (a number [`acquired`]
    /// returned): a connection kept under it is to be closed at once.
    ///
    /// [`acquired`]: Exclusive::acquired
    async fn lost(&self, turn: u64);
}

/// A single node's: always this node's.
pub struct AlwaysOurs;

#[async_trait]
impl Exclusive for AlwaysOurs {
    async fn acquired(&self) -> u64 {
        0
    }

    async fn lost(&self, _turn: u64) {
        std::future::pending().await
    }
}
