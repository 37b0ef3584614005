//! People's side: messages (in threads, with files), edits and deletions, other bots,
//! button presses and slash commands, each handed to the app as Slack would (envelopes in
//! Socket Mode, signed POSTs in Events API mode).

use std::time::Instant;

use serde_json::{Value, json};

use super::{BOT_USER_ID, Chan, FakeSlack, GROUP_CHANNEL, GROUP_NAME, Kind, Msg, model, mrkdwn};

impl FakeSlack {
    /// `person` writes `text` in `chat`; returns the message's ts. In the channel,
    /// `addressed` puts the bot's mention first and the message also arrives as an
    /// `app_mention`.
    pub fn message(&self, chat: &str, person: &str, text: &str, addressed: bool) -> String {
        self.post(chat, person, text, addressed, None, Vec::new())
    }

    /// A reply in the thread of `thread_ts`.
    pub fn message_in_thread(
        &self,
        chat: &str,
        person: &str,
        text: &str,
        thread_ts: &str,
        addressed: bool,
    ) -> String {
        self.post(chat, person, text, addressed, Some(thread_ts), Vec::new())
    }

    /// A message carrying files: (name, mimetype, bytes) each, served at their
    /// `url_private_download` to the bot token.
    pub fn message_with_files(
        &self,
        chat: &str,
        person: &str,
        text: &str,
        addressed: bool,
        files: Vec<(&str, &str, Vec<u8>)>,
    ) -> String {
        self.post(chat, person, text, addressed, None, files)
    }

    fn post(
        &self,
        chat: &str,
        person: &str,
        text: &str,
        addressed: bool,
        thread_ts: Option<&str>,
        files: Vec<(&str, &str, Vec<u8>)>,
    ) -> String {
        let mut inner = self.lock();
        let chan = inner
            .chan(chat)
            .unwrap_or_else(|| panic!("no Slack channel {chat}"));
        let addressed = addressed && chan == Chan::Group;
        let escaped = model::escape_typed(text);
        let text = if addressed {
            format!("<@{BOT_USER_ID}> {escaped}")
        } else {
            escaped
        };
        let ts = inner.next_ts();
        let mut objects = Vec::new();
        for (name, mime, bytes) in files {
            let id = format!("F0{:09}", inner.next_n());
            let name = model::file_name(name);
            let url = format!("{}/files/{id}", inner.base_url);
            objects.push(model::file(&url, &id, &name, mime, bytes.len(), person));
            inner.files.insert(id, (name, mime.to_owned(), bytes));
        }
        let parent = thread_ts.and_then(|t| inner.find(chat, t));
        let parent_user = parent.map(|at| inner.messages[at].user.clone());
        inner.messages.push(Msg {
            channel: chat.to_owned(),
            ts: ts.clone(),
            thread_ts: thread_ts.map(str::to_owned),
            user: person.to_owned(),
            ours: false,
            text: text.clone(),
            blocks: Value::Null,
            files: Vec::new(),
            history: Vec::new(),
            edited: Vec::new(),
            deleted: false,
            metadata: Value::Null,
            at: Instant::now(),
        });
        let n = inner.next_n();
        let said = model::Said {
            chat,
            channel_type: inner.chan_type(chat),
            person,
            text: &text,
            ts: &ts,
            thread_ts,
            parent_user: parent_user.as_deref(),
            files: &objects,
            client_msg_id: &model::uuid(n, person),
        };
        let message = model::message_event(&said);
        let mention = addressed.then(|| model::app_mention_event(&said));
        let mention_first = inner.options.mention_first;
        let mut events = vec![message];
        match mention {
            Some(m) if mention_first => events.insert(0, m),
            Some(m) => events.push(m),
            None => {}
        }
        for event in events {
            inner.emit_event(event);
        }
        ts
    }

    /// `person` edits their message `ts` in `chat` (a `message_changed` event).
    pub fn edit(&self, chat: &str, ts: &str, new_text: &str) {
        let mut inner = self.lock();
        let at = inner
            .find(chat, ts)
            .unwrap_or_else(|| panic!("no message {ts} in {chat}"));
        let new_ts = inner.next_ts();
        let before = inner.messages[at].clone();
        let text = model::escape_typed(new_text);
        let msg = &mut inner.messages[at];
        let old = std::mem::replace(&mut msg.text, text);
        msg.history.push(old);
        msg.edited.push(Instant::now());
        let after = msg.clone();
        let kind = inner.chan_type(chat);
        let event = model::message_changed(&before, &after, &new_ts, kind);
        inner.emit_event(event);
    }

    /// `person` deletes their message `ts` (a `message_deleted` event).
    pub fn delete(&self, chat: &str, ts: &str) {
        let mut inner = self.lock();
        let at = inner
            .find(chat, ts)
            .unwrap_or_else(|| panic!("no message {ts} in {chat}"));
        inner.messages[at].deleted = true;
        let before = inner.messages[at].clone();
        let new_ts = inner.next_ts();
        let event = model::message_deleted(&before, &new_ts, inner.chan_type(chat));
        inner.emit_event(event);
    }

    /// Another app's bot writes `text` in `chat` (`subtype: bot_message`); its ts.
    pub fn bot_message(&self, chat: &str, text: &str) -> String {
        let mut inner = self.lock();
        assert!(inner.chan(chat).is_some(), "no Slack channel {chat}");
        let ts = inner.next_ts();
        let event = model::other_bot_message(chat, inner.chan_type(chat), text, &ts);
        inner.emit_event(event);
        ts
    }

    /// `person` presses the button whose `value` (or `action_id`) is `choice` under the
    /// bot's message `message_ts` in `chat`; returns the press's envelope id.
    pub fn press_button(&self, chat: &str, person: &str, message_ts: &str, choice: &str) -> String {
        let mut inner = self.lock();
        let at = inner
            .find(chat, message_ts)
            .unwrap_or_else(|| panic!("no message {message_ts} in {chat}"));
        let message = inner.messages[at].clone();
        let action = mrkdwn::button(&message.blocks, choice).unwrap_or_else(|| {
            json!({"action_id": choice, "block_id": "gone", "value": choice,
                                      "text": {"type": "plain_text", "text": choice}})
        });
        let id = model::envelope_id(inner.next_n());
        let response_url = inner.response_url(&id);
        let n = inner.next_n();
        let action_ts = inner.next_ts();
        let payload = model::block_actions(&model::Press {
            chat,
            channel_name: &channel_name(chat),
            person,
            message: &message,
            action,
            action_ts: &action_ts,
            trigger_id: &model::trigger_id(n),
            response_url: &response_url,
        });
        inner.emit(id, Kind::Interactive, payload)
    }

    /// `person` runs `command` (`/hermes`) with `text` in `chat`; returns its envelope id
    /// (which names its answers in [`FakeSlack::command_responses`]).
    pub fn slash(&self, chat: &str, person: &str, command: &str, text: &str) -> String {
        let mut inner = self.lock();
        assert!(inner.chan(chat).is_some(), "no Slack channel {chat}");
        let id = model::envelope_id(inner.next_n());
        let response_url = inner.response_url(&id);
        let n = inner.next_n();
        let fields = model::command(
            chat,
            &channel_name(chat),
            person,
            command,
            text,
            &response_url,
            &model::trigger_id(n),
        );
        inner.emit(id, Kind::SlashCommand, fields)
    }
}

fn channel_name(chat: &str) -> String {
    if chat == GROUP_CHANNEL {
        GROUP_NAME.into()
    } else {
        "directmessage".into()
    }
}
