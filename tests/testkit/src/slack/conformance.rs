//! The fake Slack as the conformance kit sees it ([`crate::conformance::PlatformFake`]).

use std::time::Instant;

use serde_json::Value;

use super::{
    APP_TOKEN, BOT_TOKEN, Call, FakeSlack, GROUP_CHANNEL, MAX_LEN, Mode, SIGNING_SECRET, model,
    mrkdwn,
};
use crate::conformance::{ShownPrompt, WorkingEvent};

impl crate::conformance::PlatformFake for FakeSlack {
    fn platform_yaml(&self) -> String {
        let mode = match self.mode() {
            Mode::Socket => "socket",
            Mode::Events => "events",
        };
        format!(
            "  slack:\n    enabled: true\n    extra:\n      api_base_url: {}\n      mode: {mode}\n",
            self.api_base_url()
        )
    }

    fn env(&self) -> Vec<String> {
        let mut env = vec![format!("SLACK_BOT_TOKEN={BOT_TOKEN}")];
        if self.mode() == Mode::Socket {
            env.push(format!("SLACK_APP_TOKEN={APP_TOKEN}"));
        }
        env.push(format!("SLACK_SIGNING_SECRET={SIGNING_SECRET}"));
        env
    }

    fn allowlist_var(&self) -> &'static str {
        "SLACK_ALLOWED_USERS"
    }

    fn allow_all_var(&self) -> &'static str {
        "SLACK_ALLOW_ALL_USERS"
    }

    fn max_len(&self) -> usize {
        MAX_LEN
    }

    /// Characters as shown.
    fn measure(&self, shown: &str) -> usize {
        shown.chars().count()
    }

    fn person(&self, n: u32) -> String {
        model::person(n)
    }

    fn dm_chat(&self, person: &str) -> String {
        let n = person
            .strip_prefix("U0PERSON")
            .and_then(|n| n.parse::<u32>().ok());
        let n = n.unwrap_or_else(|| panic!("{person:?} is not one of the fake's people"));
        format!("D0PERSON{n}")
    }

    fn group_chat(&self) -> String {
        GROUP_CHANNEL.into()
    }

    fn write(&self, chat: &str, person: &str, text: &str, addressed: bool) {
        self.message(chat, person, text, addressed);
    }

    /// The bot's messages in the channel, thread replies included, as shown: the text of
    /// their blocks when they have any that show text, else their `text`.
    fn shown(&self, chat: &str) -> Vec<String> {
        let inner = self.lock();
        let shown = inner.shown_in(chat);
        shown.map(|m| mrkdwn::display(&m.text, &m.blocks)).collect()
    }

    fn sent_at(&self, chat: &str) -> Vec<Instant> {
        self.lock().shown_in(chat).map(|m| m.at).collect()
    }

    /// Messages whose blocks still hold buttons; a choice's id is the button's `value`,
    /// or its `action_id` when it has no value. `message_id` is the message's ts.
    fn prompts(&self, chat: &str) -> Vec<ShownPrompt> {
        let inner = self.lock();
        let prompts = inner.shown_in(chat).filter_map(|m| {
            let choices = mrkdwn::buttons(&m.blocks);
            (!choices.is_empty()).then(|| ShownPrompt {
                message_id: m.ts.clone(),
                text: mrkdwn::display(&m.text, &m.blocks),
                choices,
            })
        });
        prompts.collect()
    }

    fn press(&self, chat: &str, person: &str, prompt: &ShownPrompt, label: &str) -> String {
        let (_, choice) = prompt
            .choices
            .iter()
            .find(|(l, _)| l == label)
            .unwrap_or_else(|| panic!("no choice {label:?} in {prompt:?}"));
        self.press_button(chat, person, &prompt.message_id, choice)
    }

    /// Socket Mode: when the envelope was acknowledged; Events API: when the 2xx answer
    /// to the POST came.
    fn acknowledged(&self, press_id: &str) -> Option<Instant> {
        self.acked(press_id)
    }

    /// Reactions the bot added (shown) and removed (ended) on messages in `chat`, and
    /// assistant statuses set (shown) and cleared (ended, also when the bot answered in
    /// the thread).
    /// Every write about the channel: posts, updates, reactions, assistant statuses.
    fn chat_calls(&self, chat: &str) -> Vec<Instant> {
        let inner = self.lock();
        let about = |c: &&Call| {
            let reads = c.method.starts_with("conversations.") || c.method.starts_with("users.");
            let channel = c
                .params
                .get("channel")
                .or_else(|| c.params.get("channel_id"));
            !reads && channel.and_then(Value::as_str) == Some(chat)
        };
        inner.calls.iter().filter(about).map(|c| c.at).collect()
    }

    /// About one message a second per channel, short bursts allowed.
    fn chat_budget(&self) -> (f64, u32) {
        (1.0, 3)
    }

    fn fail_next_send(&self, status: u16) {
        self.fail_http_next("chat.postMessage", status);
    }

    fn rate_limit_next_send(&self, seconds: u64) {
        self.rate_limit_next("chat.postMessage", 1, seconds);
    }

    fn resets(&self) -> &crate::reset::Resets {
        &self.resets
    }

    fn reset_next_send(&self, when: crate::reset::When) {
        self.resets
            .arm(1, when, |_, path, _| path.ends_with("/chat.postMessage"));
    }

    fn working(&self, chat: &str) -> Vec<(Instant, WorkingEvent)> {
        let inner = self.lock();
        let found = inner.working.iter().filter(|(c, _, _)| c == chat);
        found.map(|(_, at, e)| (*at, *e)).collect()
    }

    fn needs_daemon_http(&self) -> bool {
        self.mode() == Mode::Events
    }

    fn attach_daemon(&self, http_addr: &str) {
        self.lock().ev.daemon = Some(http_addr.to_owned());
    }
}
