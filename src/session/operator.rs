//! What a chat's admin may ask of the daemon itself, with Hermes' texts: `/restart` (drain
//! and start again in this process, the configuration read anew; the chat is told when it
//! is back) and `/platform list|pause|resume` (each platform's state; a paused platform's
//! adapter stops and is not retried until resumed or the daemon restarts). The daemon
//! implements [`Operator`] and hands it over once its adapters run.

use super::*;

/// The daemon's side of `/restart` and `/platform`.
pub trait Operator: Send + Sync {
    /// Drain and start again, telling `chat` (replying to `message_id`) once back.
    fn restart(&self, chat: &ChatRef, message_id: &str);
    /// Each enabled platform and its state in a few words.
    fn platforms(&self) -> Vec<(String, String)>;
    /// Stop `platform`'s adapter until resumed; `Err`: why not, for the person.
    fn pause(&self, platform: &str) -> Result<(), String>;
    fn resume(&self, platform: &str) -> Result<(), String>;
}

impl SessionActor {
    fn operator(&self) -> Option<Arc<dyn Operator>> {
        self.services.operator.get().cloned()
    }

    /// `/restart`.
    pub(super) async fn restart(&mut self, inbox_id: i64, message_id: String) {
        let Some(operator) = self.operator() else {
            let text = "⚠️ The gateway is still starting; try /restart again in a moment.";
            return self.say(inbox_id, &message_id, text).await;
        };
        let text = "♻ Restarting gateway. If you aren't notified within 60 seconds, restart from the console with `hermes-gateway service restart`.";
        // Answered first: the restart drains this very conversation.
        self.say(inbox_id, &message_id, text).await;
        tracing::info!(session = %self.key, "a restart was asked from the chat");
        operator.restart(&self.chat, &message_id);
    }

    /// `/platform [list | pause <name> | resume <name>]`.
    pub(super) fn platform(&self, args: &str) -> String {
        let Some(operator) = self.operator() else {
            return "⚠️ The gateway is still starting; try again in a moment.".into();
        };
        let mut words = args.split_whitespace();
        let action = words.next().unwrap_or("list").to_ascii_lowercase();
        let name = words.next().map(str::to_ascii_lowercase);
        match (action.as_str(), name) {
            ("list", _) => {
                let mut text = "**Gateway platforms**".to_owned();
                for (platform, state) in operator.platforms() {
                    text.push_str(&format!("\n  · {platform} — {state}"));
                }
                text
            }
            ("pause" | "resume", None) => format!("Usage: /platform {action} <name>"),
            ("pause", Some(name)) => match operator.pause(&name) {
                Ok(()) => format!(
                    "✓ {name} paused. Resume with `/platform resume {name}` or restart the gateway to reset."
                ),
                Err(why) => why,
            },
            ("resume", Some(name)) => match operator.resume(&name) {
                Ok(()) => format!("✓ {name} resumed — connecting again now."),
                Err(why) => why,
            },
            _ => "Usage: /platform <list|pause|resume> [name]\n  /platform list — show platform status\n  /platform pause <name> — stop a platform (no receiving, no retrying)\n  /platform resume <name> — start a paused platform again".into(),
        }
    }
}
