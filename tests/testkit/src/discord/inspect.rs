//! What the tests read back from the fake Discord: the calls made, interactions' answers,
//! messages and files the bot sent, its registered commands, downloads, reactions and the
//! threads it opened.

use std::time::Instant;

use serde_json::Value;

use super::{BOT_ID, Call, FakeDiscord, Response, SentMessage, sent};

impl FakeDiscord {
    /// Recorded calls whose path contains `path_contains`.
    pub fn calls(&self, path_contains: &str) -> Vec<Call> {
        let inner = self.lock();
        let found = inner
            .calls
            .iter()
            .filter(|c| c.path.contains(path_contains));
        found.cloned().collect()
    }

    /// The callbacks an interaction got: (type, data, when), refused ones left out.
    pub fn callbacks(&self, interaction_id: &str) -> Vec<(u8, Value, Instant)> {
        let inner = self.lock();
        let found = inner.interactions.get(interaction_id);
        found.map(|i| i.callbacks.clone()).unwrap_or_default()
    }

    /// The webhook answers (`@original` edits and follow-ups) of an interaction.
    pub fn interaction_responses(&self, interaction_id: &str) -> Vec<Response> {
        let inner = self.lock();
        let found = inner.interactions.get(interaction_id);
        found.map(|i| i.responses.clone()).unwrap_or_default()
    }

    /// The bot's messages in `chat` as stored, in order: ephemeral ones (flag 64) and
    /// deferred answers not yet filled in (flag 128) included.
    pub fn raw_messages(&self, chat: &str) -> Vec<SentMessage> {
        let inner = self.lock();
        let found = inner.messages.iter();
        let found = found.filter(|m| m.channel == chat && m.author == BOT_ID);
        found.map(sent).collect()
    }

    /// Files the bot uploaded to `chat`: (name, bytes).
    pub fn sent_files(&self, chat: &str) -> Vec<(String, Vec<u8>)> {
        let inner = self.lock();
        inner.shown_in(chat).flat_map(|m| m.files.clone()).collect()
    }

    /// The global commands as last registered (with the ids the fake gave them).
    pub fn registered_commands(&self) -> Vec<Value> {
        self.lock().commands.clone()
    }

    /// How many times the CDN served an attachment.
    pub fn downloads(&self, attachment_id: &str) -> usize {
        let inner = self.lock();
        inner.downloads.get(attachment_id).copied().unwrap_or(0)
    }

    /// The bot's reactions on message `mid` now, in the order put on.
    pub fn reactions(&self, mid: &str) -> Vec<String> {
        let inner = self.lock();
        let on = inner.reactions.iter().filter(|(m, _)| m == mid);
        on.map(|(_, emoji)| emoji.clone()).collect()
    }

    /// How the bot's reactions on message `mid` changed: `+👀`, `-👀`, `+✅`, in order.
    pub fn reaction_changes(&self, mid: &str) -> Vec<String> {
        let inner = self.lock();
        let changes = inner.reaction_log.iter().filter(|(m, _)| m == mid);
        changes.map(|(_, change)| change.clone()).collect()
    }

    /// Threads the bot started from messages (their ids), in order.
    pub fn threads_created(&self) -> Vec<String> {
        let inner = self.lock();
        let mut ids: Vec<u64> = inner
            .threads
            .keys()
            .filter_map(|k| k.parse().ok())
            .collect();
        ids.sort_unstable();
        ids.iter().map(u64::to_string).collect()
    }
}
