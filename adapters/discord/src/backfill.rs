//! What the gateway did not deliver, fetched over REST.
//!
//! Discord replays missed events only when a session is resumed. A fresh IDENTIFY (after an
//! invalid session, after serenity restarted a shard whose heartbeats went unacknowledged,
//! or after the daemon itself was stopped or killed) starts from now, and whatever people
//! wrote in the gap would be lost. So the adapter keeps, per channel it has seen messages
//! in, the newest message id (`seen::Seen`, saved through the sink as the adapter's cursor),
//! and after every READY asks `GET /channels/{id}/messages?after=…` for what came since.
//! Those messages take the same path as the gateway's; the inbox recognises the ones it has
//! (event ids are message ids), so nothing is answered twice.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use hermes_adapter::{Backoff, CancellationToken, InboundSink, SendError};
use reqwest::Method;
use serde_json::Value;
use serenity::model::channel::Message;
use serenity::model::id::GuildId;

use crate::receive::{Batch, Recorder};
use crate::rest::Body;
use crate::seen::SeenChannel;

/// Messages older than this are not fetched again (Telegram keeps undelivered updates for
/// a day too).
pub(crate) const MAX_AGE: Duration = Duration::from_secs(24 * 3600);
/// Messages per page (Discord's most), and pages per channel after a gap.
const PAGE: usize = 100;
const PAGES: usize = 10;
/// A page that failed is asked for again, this many times in all.
const ATTEMPTS: u32 = 4;
const RETRY: Backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(8));
/// Discord's epoch (2015-01-01) in Unix milliseconds; snowflakes count from it.
const DISCORD_EPOCH_MS: u64 = 1_420_070_400_000;

impl Recorder {
    /// After a READY: fetch, per remembered channel, the messages since the newest one
    /// recorded when READY came (page after page), and record them like the gateway's.
    pub(crate) async fn backfill(
        &self,
        sink: &dyn InboundSink,
        channels: Vec<(u64, SeenChannel)>,
        shutdown: &CancellationToken,
    ) {
        let now = SystemTime::now();
        let mut fetched = 0;
        for (channel, from) in channels {
            let mut batch = Batch::default();
            let mut after = from.last;
            for page in 0..PAGES {
                let path = format!("/channels/{channel}/messages?after={after}&limit={PAGE}");
                let Some(list) = self.fetch_page(&path, shutdown).await else {
                    break;
                };
                let full = list.len() >= PAGE;
                // Discord lists the newest first.
                for value in list.into_iter().rev() {
                    match serde_json::from_value::<Message>(value) {
                        Ok(mut msg) => {
                            after = after.max(msg.id.get());
                            if too_old(msg.id.get(), now) {
                                continue;
                            }
                            msg.guild_id = from.guild.filter(|g| *g != 0).map(GuildId::new);
                            self.message(msg, sink, &mut batch).await;
                        }
                        Err(e) => {
                            tracing::warn!(%channel, error = %e, "discord: a missed message could not be read; skipped")
                        }
                    }
                }
                if !full {
                    break;
                }
                if page + 1 == PAGES {
                    tracing::warn!(%channel, "discord: more than {} messages were missed in a channel; the rest are not fetched", PAGE * PAGES);
                }
            }
            fetched += batch.inbound.len();
            if !self.commit(sink, batch, shutdown).await {
                return;
            }
        }
        if fetched > 0 {
            tracing::info!(
                count = fetched,
                "discord: fetched messages from while the gateway was away"
            );
        }
    }

    /// One page of a channel's messages; `None` when it cannot be had (after retries for
    /// passing failures), or shutdown came.
    async fn fetch_page(&self, path: &str, shutdown: &CancellationToken) -> Option<Vec<Value>> {
        let mut retry = RETRY;
        for attempt in 1..=ATTEMPTS {
            let found = tokio::select! {
                _ = shutdown.cancelled() => return None,
                r = self.rest.call(Method::GET, path, Body::Empty) => r,
            };
            let wait = match found {
                Ok(Value::Array(list)) => return Some(list),
                Ok(_) => return None,
                Err(SendError::RateLimited { retry_after, .. }) => retry_after,
                Err(SendError::Transient(_)) => retry.next_delay(),
                Err(e) => {
                    tracing::warn!(error = %e, "discord: could not fetch the messages missed in a channel");
                    return None;
                }
            };
            if attempt == ATTEMPTS {
                tracing::error!(
                    "discord: gave up fetching the messages missed in a channel; some may be lost"
                );
                return None;
            }
            tokio::select! {
                _ = shutdown.cancelled() => return None,
                _ = tokio::time::sleep(wait) => {}
            }
        }
        None
    }
}

/// Whether a snowflake was made longer than [`MAX_AGE`] before `now`.
pub(crate) fn too_old(snowflake: u64, now: SystemTime) -> bool {
    let made = DISCORD_EPOCH_MS + (snowflake >> 22);
    let now = now
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0);
    now.saturating_sub(made) > MAX_AGE.as_millis() as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::seen::{CHANNELS_KEPT, Seen};

    fn snowflake_at(unix_ms: u64) -> u64 {
        (unix_ms - DISCORD_EPOCH_MS) << 22
    }

    #[test]
    fn only_newer_messages_move_a_channel_on_and_the_cursor_round_trips() {
        let mut seen = Seen::default();
        assert!(seen.note(1, Some(9), 100));
        assert!(!seen.note(1, Some(9), 90));
        assert!(seen.note(1, None, 110));
        let again = Seen::parse(&seen.to_json());
        assert_eq!(again, seen);
        assert_eq!(
            again.channels[&1],
            SeenChannel {
                last: 110,
                guild: Some(9)
            }
        );
        assert_eq!(Seen::parse("not json"), Seen::default());
    }

    #[test]
    fn the_quietest_channel_is_forgotten_and_every_other_one_fetched() {
        let now = SystemTime::now();
        let now_ms = now.duration_since(UNIX_EPOCH).unwrap().as_millis() as u64;
        let mut seen = Seen::default();
        seen.note(500, None, snowflake_at(now_ms - 7 * 24 * 3600 * 1000));
        for channel in 1..CHANNELS_KEPT as u64 {
            seen.note(channel, None, snowflake_at(now_ms - 1000) + channel);
        }
        let fetch = seen.to_fetch();
        assert!(
            fetch.iter().any(|(id, _)| *id == 500),
            "a channel quiet for a week is still asked"
        );
        assert_eq!(fetch[0].0, CHANNELS_KEPT as u64 - 1, "newest first");
        seen.note(0, None, snowflake_at(now_ms));
        assert_eq!(seen.channels.len(), CHANNELS_KEPT);
        assert!(!seen.channels.contains_key(&500), "the quietest went");
        assert!(too_old(snowflake_at(now_ms - 25 * 3600 * 1000), now));
        assert!(!too_old(snowflake_at(now_ms - 3600 * 1000), now));
    }
}
