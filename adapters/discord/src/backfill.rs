//! What the gateway did not deliver, fetched over REST.
//!
//! Discord replays missed events only when a session is resumed. A fresh IDENTIFY (after an
//! invalid session, after serenity restarted a shard whose heartbeats went unacknowledged,
//! or after the daemon itself was stopped or killed) starts from now, and whatever people
//! wrote in the gap would be lost. So the adapter keeps, per channel it has seen messages
//! in, the newest message id ([`Seen`], saved through the sink as the adapter's cursor),
//! and after every READY asks `GET /channels/{id}/messages?after=…` for what came since.
//! Those messages take the same path as the gateway's; the inbox recognises the ones it has
//! (event ids are message ids), so nothing is answered twice.

use std::collections::HashMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

/// Channels remembered (the most recently active ones).
const CHANNELS_KEPT: usize = 100;
/// Messages older than this are not fetched again (Telegram keeps undelivered updates for
/// a day too).
pub(crate) const MAX_AGE: Duration = Duration::from_secs(24 * 3600);
/// Messages fetched per channel after a gap.
pub(crate) const PER_CHANNEL: usize = 50;
/// Discord's epoch (2015-01-01) in Unix milliseconds; snowflakes count from it.
const DISCORD_EPOCH_MS: u64 = 1_420_070_400_000;

/// One channel's newest message seen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct SeenChannel {
    pub last: u64,
    /// The server it belongs to (REST messages do not say); `None` for a DM.
    #[serde(default)]
    pub guild: Option<u64>,
}

/// The newest message seen in each recently active channel.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Seen {
    channels: HashMap<u64, SeenChannel>,
}

impl Seen {
    /// Read a saved cursor; a cursor that does not parse is started afresh.
    pub(crate) fn parse(saved: &str) -> Seen {
        serde_json::from_str(saved).unwrap_or_default()
    }

    pub(crate) fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// Note a message; `true` when it is newer than what was known.
    pub(crate) fn note(&mut self, channel: u64, guild: Option<u64>, message: u64) -> bool {
        let entry = self
            .channels
            .entry(channel)
            .or_insert(SeenChannel { last: 0, guild });
        if message <= entry.last {
            return false;
        }
        entry.last = message;
        entry.guild = guild.or(entry.guild);
        if self.channels.len() > CHANNELS_KEPT {
            // Forget the channel that has been quiet longest.
            if let Some(quietest) = self
                .channels
                .iter()
                .min_by_key(|(_, c)| c.last)
                .map(|(id, _)| *id)
            {
                self.channels.remove(&quietest);
            }
        }
        true
    }

    /// The channels active within [`MAX_AGE`], newest first, with where to start.
    pub(crate) fn to_fetch(&self, now: SystemTime) -> Vec<(u64, SeenChannel)> {
        let mut channels: Vec<_> = self
            .channels
            .iter()
            .filter(|(_, c)| !too_old(c.last, now))
            .map(|(id, c)| (*id, *c))
            .collect();
        channels.sort_by_key(|(_, c)| std::cmp::Reverse(c.last));
        channels
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
    fn quiet_channels_are_forgotten_and_old_ones_not_fetched() {
        let now = SystemTime::now();
        let now_ms = now.duration_since(UNIX_EPOCH).unwrap().as_millis() as u64;
        let mut seen = Seen::default();
        for channel in 0..=CHANNELS_KEPT as u64 {
            seen.note(channel, None, snowflake_at(now_ms - 1000) + channel);
        }
        assert_eq!(seen.channels.len(), CHANNELS_KEPT);
        assert!(!seen.channels.contains_key(&0), "the quietest went");
        seen.note(500, None, snowflake_at(now_ms - 25 * 3600 * 1000));
        let fetch = seen.to_fetch(now);
        assert!(
            fetch.iter().all(|(id, _)| *id != 500),
            "a day-old channel is not fetched"
        );
        assert_eq!(fetch[0].0, CHANNELS_KEPT as u64, "newest first");
    }
}
