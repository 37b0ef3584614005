//! The adapter's cursor: per channel it has seen messages in, the newest message id (and
//! the server, which REST messages do not say), saved through the sink, so `backfill` knows
//! where to start after a fresh IDENTIFY.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

/// Channels remembered (the most recently active ones).
pub(crate) const CHANNELS_KEPT: usize = 100;

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
    pub(crate) channels: HashMap<u64, SeenChannel>,
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

    /// Every remembered channel, the most recently active first, with where to start.
    /// (A channel quiet for a week may still have a message from last night.)
    pub(crate) fn to_fetch(&self) -> Vec<(u64, SeenChannel)> {
        let mut channels: Vec<_> = self.channels.iter().map(|(id, c)| (*id, *c)).collect();
        channels.sort_by_key(|(_, c)| std::cmp::Reverse(c.last));
        channels
    }
}
