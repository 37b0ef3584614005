//! The JSON Slack sends: people's `message` and `app_mention` events (with their
//! `rich_text` blocks, files, threads, edits and deletions), the `event_callback` around
//! them, `block_actions` presses, slash-command fields, users, files, and the bot's
//! messages as the Web API returns them; in the shapes slack-morphism 2.31 parses (the
//! tests in `tests.rs` prove it), with the id and time helpers they need.

use serde_json::{Value, json};

use super::{
    APP_ID, BOT_ID, BOT_NAME, BOT_USER_ID, GROUP_NAME, Msg, OTHER_BOT_ID, TEAM_DOMAIN, TEAM_ID,
    VERIFICATION_TOKEN,
};

/// The bot token's scopes, as `missing_scope` answers name them.
pub(super) const SCOPES: &str = "app_mentions:read,channels:history,chat:write,commands,files:read,files:write,im:history,reactions:write,users:read";

pub(super) fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(1_764_000_000)
}

/// FNV-1a, for ids that look random but are not.
pub(super) fn hash(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Person `n`'s user id.
pub(super) fn person(n: u32) -> String {
    format!("U0PERSON{n}")
}

pub(super) fn uuid(n: u64, salt: &str) -> String {
    let h = hash(&format!("{salt}/{n}"));
    format!(
        "{:08x}-{:04x}-4{:03x}-a{:03x}-{:012x}",
        h >> 32,
        (h >> 16) & 0xffff,
        h & 0xfff,
        (h >> 4) & 0xfff,
        n
    )
}

pub(super) fn envelope_id(n: u64) -> String {
    uuid(n, "envelope")
}

pub(super) fn event_id(n: u64) -> String {
    format!("Ev0{n:08}")
}

pub(super) fn trigger_id(n: u64) -> String {
    format!(
        "{}.{}.{:016x}{:016x}",
        7_000_000_000_000 + n,
        1_000_000_000_002u64,
        hash(&n.to_string()),
        hash(&format!("trigger {n}"))
    )
}

/// A file name as Slack keeps it (path separators and control characters replaced).
pub(super) fn file_name(name: &str) -> String {
    let name: String = name
        .chars()
        .map(|c| {
            if c == '/' || c == '\\' || c.is_control() {
                '_'
            } else {
                c
            }
        })
        .collect();
    if name.trim().is_empty() {
        "file".into()
    } else {
        name
    }
}

/// What Slack makes of text a person typed: `&`, `<`, `>` escaped, and links (`http://`,
/// `https://`, `mailto:`) wrapped in `<…>`.
pub(super) fn escape_typed(text: &str) -> String {
    let mut out = String::new();
    let mut word = String::new();
    let flush = |word: &mut String, out: &mut String| {
        let link = ["http://", "https://", "mailto:"]
            .iter()
            .any(|p| word.starts_with(p) && word.len() > p.len());
        let escaped = escape(word);
        if link {
            out.push('<');
            out.push_str(&escaped);
            out.push('>');
        } else {
            out.push_str(&escaped);
        }
        word.clear();
    };
    for c in text.chars() {
        if c.is_whitespace() {
            flush(&mut word, &mut out);
            out.push(c);
        } else {
            word.push(c);
        }
    }
    flush(&mut word, &mut out);
    out
}

/// Slack's three escapes.
pub(super) fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

fn unescape(text: &str) -> String {
    text.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&")
}

/// The `rich_text` block Slack's clients attach to what a person typed (`text` as Slack
/// keeps it: escaped, links and mentions in `<…>`).
fn rich_text(text: &str, ts: &str) -> Value {
    let mut elements = Vec::new();
    let mut rest = text;
    while !rest.is_empty() {
        if let Some(start) = rest.strip_prefix('<')
            && let Some(end) = start.find('>')
        {
            let inner = &start[..end];
            if let Some(user) = inner.strip_prefix('@') {
                elements.push(json!({"type": "user", "user_id": user}));
            } else {
                elements.push(json!({"type": "link", "url": unescape(inner)}));
            }
            rest = &start[end + 1..];
            continue;
        }
        let first = rest.chars().next().map_or(1, char::len_utf8);
        let end = rest[first..].find('<').map_or(rest.len(), |i| i + first);
        elements.push(json!({"type": "text", "text": unescape(&rest[..end])}));
        rest = &rest[end..];
    }
    let block_id = format!("{:05x}", hash(ts) & 0xfffff);
    json!({"type": "rich_text", "block_id": block_id,
           "elements": [{"type": "rich_text_section", "elements": elements}]})
}

/// A file object as events and `files.*` answers carry it; `url` is where the fake serves
/// it (`{url}/{name}`; `{url}/download/{name}` to download).
pub(super) fn file(url: &str, id: &str, name: &str, mime: &str, size: usize, user: &str) -> Value {
    let ext = name.rsplit_once('.').map_or("binary", |(_, e)| e);
    let created = unix_now();
    json!({
        "id": id, "created": created, "timestamp": created, "name": name, "title": name,
        "mimetype": mime, "filetype": ext.to_ascii_lowercase(), "pretty_type": ext.to_ascii_uppercase(),
        "user": user, "user_team": TEAM_ID, "editable": false, "size": size, "mode": "hosted",
        "is_external": false, "external_type": "", "is_public": false,
        "public_url_shared": false, "display_as_bot": false, "username": "",
        "url_private": format!("{url}/{name}"),
        "url_private_download": format!("{url}/download/{name}"),
        "permalink": format!("https://{TEAM_DOMAIN}.slack.com/files/{user}/{id}/{name}"),
        "has_rich_preview": false, "file_access": "visible",
    })
}

/// A person's message, for the events made from it.
pub(super) struct Said<'a> {
    pub chat: &'a str,
    pub channel_type: &'a str,
    pub person: &'a str,
    pub text: &'a str,
    pub ts: &'a str,
    pub thread_ts: Option<&'a str>,
    pub parent_user: Option<&'a str>,
    pub files: &'a [Value],
    pub client_msg_id: &'a str,
}

/// The fields a `message` and an `app_mention` share.
fn said_fields(said: &Said, kind: &str) -> Value {
    let mut event = json!({
        "type": kind, "user": said.person, "text": said.text, "ts": said.ts,
        "event_ts": said.ts, "channel": said.chat, "team": TEAM_ID,
        "client_msg_id": said.client_msg_id, "blocks": [rich_text(said.text, said.ts)],
    });
    if let Some(thread) = said.thread_ts {
        event["thread_ts"] = json!(thread);
        if let Some(parent) = said.parent_user {
            event["parent_user_id"] = json!(parent);
        }
    }
    if !said.files.is_empty() {
        event["files"] = json!(said.files);
        event["upload"] = json!(false);
        event["display_as_bot"] = json!(false);
    }
    event
}

pub(super) fn message_event(said: &Said) -> Value {
    let mut event = said_fields(said, "message");
    event["channel_type"] = json!(said.channel_type);
    if !said.files.is_empty() {
        event["subtype"] = json!("file_share");
    }
    event
}

pub(super) fn app_mention_event(said: &Said) -> Value {
    said_fields(said, "app_mention")
}

/// A stored message as the inner `message` / `previous_message` of an edit or deletion.
fn inner_message(m: &Msg) -> Value {
    let mut inner = json!({"type": "message", "user": m.user, "text": m.text, "ts": m.ts,
                           "team": TEAM_ID, "blocks": [rich_text(&m.text, &m.ts)]});
    if let Some(thread) = &m.thread_ts {
        inner["thread_ts"] = json!(thread);
    }
    inner
}

/// `message` with `subtype: message_changed`.
pub(super) fn message_changed(before: &Msg, after: &Msg, ts: &str, channel_type: &str) -> Value {
    let mut message = inner_message(after);
    message["edited"] = json!({"user": after.user, "ts": ts});
    json!({"type": "message", "subtype": "message_changed", "hidden": true,
           "channel": after.channel, "channel_type": channel_type, "ts": ts, "event_ts": ts,
           "message": message, "previous_message": inner_message(before)})
}

/// `message` with `subtype: message_deleted`.
pub(super) fn message_deleted(before: &Msg, ts: &str, channel_type: &str) -> Value {
    json!({"type": "message", "subtype": "message_deleted", "hidden": true,
           "channel": before.channel, "channel_type": channel_type, "ts": ts, "event_ts": ts,
           "deleted_ts": before.ts, "previous_message": inner_message(before)})
}

/// Another app's bot posting (`subtype: bot_message`).
pub(super) fn other_bot_message(chat: &str, channel_type: &str, text: &str, ts: &str) -> Value {
    json!({"type": "message", "subtype": "bot_message", "text": escape(text), "ts": ts,
           "event_ts": ts, "bot_id": OTHER_BOT_ID, "username": "otherbot", "app_id": "A0OTHER",
           "channel": chat, "channel_type": channel_type})
}

fn bot_profile() -> Value {
    json!({"id": BOT_ID, "deleted": false, "name": BOT_NAME, "updated": 1_764_000_000,
           "app_id": APP_ID, "team_id": TEAM_ID})
}

/// The bot's message as `chat.postMessage` returns it and a press carries it.
pub(super) fn bot_message(m: &Msg) -> Value {
    let mut message = json!({"type": "message", "user": BOT_USER_ID, "bot_id": BOT_ID,
                             "app_id": APP_ID, "text": m.text, "ts": m.ts, "team": TEAM_ID,
                             "bot_profile": bot_profile()});
    if m.blocks.is_array() {
        message["blocks"] = m.blocks.clone();
    }
    if let Some(thread) = &m.thread_ts {
        message["thread_ts"] = json!(thread);
    }
    if !m.metadata.is_null() {
        message["metadata"] = m.metadata.clone();
    }
    message
}

/// A message in a conversation's history: the bot's as [`bot_message`], a person's plain.
pub(super) fn history_message(m: &Msg) -> Value {
    if m.ours {
        return bot_message(m);
    }
    let mut message = json!({"type": "message", "user": m.user, "text": m.text, "ts": m.ts,
                             "team": TEAM_ID});
    if let Some(thread) = &m.thread_ts {
        message["thread_ts"] = json!(thread);
    }
    message
}

/// The bot's own post coming back as a `message` event (no subtype; `bot_id` set).
pub(super) fn own_message_event(m: &Msg, channel_type: &str) -> Value {
    let mut event = bot_message(m);
    event["channel"] = json!(m.channel);
    event["channel_type"] = json!(channel_type);
    event["event_ts"] = json!(m.ts);
    event
}

/// The bot's own edit coming back (`message_changed`, the inner message with `bot_id`).
pub(super) fn own_message_changed(before: &Value, m: &Msg, ts: &str, channel_type: &str) -> Value {
    let mut message = bot_message(m);
    message["edited"] = json!({"user": BOT_USER_ID, "ts": ts});
    json!({"type": "message", "subtype": "message_changed", "hidden": true,
           "channel": m.channel, "channel_type": channel_type, "ts": ts, "event_ts": ts,
           "message": message, "previous_message": before})
}

/// The `event_callback` around an event.
pub(super) fn event_callback(event: Value, event_id: &str, event_time: u64) -> Value {
    json!({
        "token": VERIFICATION_TOKEN, "team_id": TEAM_ID, "context_team_id": TEAM_ID,
        "context_enterprise_id": null, "api_app_id": APP_ID, "event": event,
        "type": "event_callback", "event_id": event_id, "event_time": event_time,
        "authorizations": [{"enterprise_id": null, "team_id": TEAM_ID, "user_id": BOT_USER_ID,
                            "is_bot": true, "is_enterprise_install": false}],
        "is_ext_shared_channel": false,
        "event_context": format!("4-{:016x}", hash(event_id)),
    })
}

/// A press, for [`block_actions`].
pub(super) struct Press<'a> {
    pub chat: &'a str,
    pub channel_name: &'a str,
    pub person: &'a str,
    pub message: &'a Msg,
    /// The pressed button as it is in the message's blocks (action_id, block_id, text,
    /// value, style).
    pub action: Value,
    pub action_ts: &'a str,
    pub trigger_id: &'a str,
    pub response_url: &'a str,
}

/// The `block_actions` interaction payload.
pub(super) fn block_actions(p: &Press) -> Value {
    let mut action = json!({"type": "button", "action_ts": p.action_ts});
    for key in ["action_id", "block_id", "text", "value", "style"] {
        if let Some(v) = p.action.get(key) {
            action[key] = v.clone();
        }
    }
    let mut container = json!({"type": "message", "message_ts": p.message.ts,
                               "channel_id": p.chat, "is_ephemeral": false});
    if let Some(thread) = &p.message.thread_ts {
        container["thread_ts"] = json!(thread);
    }
    let name = p.person.to_ascii_lowercase().replace("u0", "");
    json!({
        "type": "block_actions",
        "user": {"id": p.person, "username": name, "name": name, "team_id": TEAM_ID},
        "api_app_id": APP_ID, "token": VERIFICATION_TOKEN, "container": container,
        "trigger_id": p.trigger_id, "team": {"id": TEAM_ID, "domain": TEAM_DOMAIN},
        "enterprise": null, "is_enterprise_install": false,
        "channel": {"id": p.chat, "name": p.channel_name},
        "message": bot_message(p.message), "state": {"values": {}},
        "response_url": p.response_url, "actions": [action],
    })
}

/// A slash command's fields (form fields over HTTP, an object over Socket Mode).
pub(super) fn command(
    chat: &str,
    channel_name: &str,
    person: &str,
    command: &str,
    text: &str,
    response_url: &str,
    trigger_id: &str,
) -> Value {
    let name = person.to_ascii_lowercase().replace("u0", "");
    json!({
        "token": VERIFICATION_TOKEN, "team_id": TEAM_ID, "team_domain": TEAM_DOMAIN,
        "channel_id": chat, "channel_name": channel_name, "user_id": person, "user_name": name,
        "command": command, "text": text, "api_app_id": APP_ID,
        "is_enterprise_install": "false", "response_url": response_url, "trigger_id": trigger_id,
    })
}

/// A user as `users.info` answers.
pub(super) fn user(id: &str) -> Value {
    let bot = id == BOT_USER_ID;
    let n = id.strip_prefix("U0PERSON").unwrap_or_default();
    let (name, real) = if bot {
        (BOT_NAME.to_owned(), "Hermes".to_owned())
    } else {
        (format!("person{n}"), format!("Person {n}"))
    };
    let mut user = json!({
        "id": id, "team_id": TEAM_ID, "name": name, "deleted": false, "color": "9f69e7",
        "real_name": real, "tz": "Europe/Amsterdam", "tz_label": "Central European Time",
        "tz_offset": 3600,
        "profile": {"real_name": real, "real_name_normalized": real, "display_name": name,
                    "display_name_normalized": name, "team": TEAM_ID,
                    "avatar_hash": format!("{:012x}", hash(id) & 0xffff_ffff_ffff),
                    "first_name": real.split(' ').next(), "title": ""},
        "is_admin": false, "is_owner": false, "is_primary_owner": false,
        "is_restricted": false, "is_ultra_restricted": false, "is_bot": bot,
        "is_app_user": false, "updated": 1_764_000_000,
    });
    if bot {
        user["profile"]["bot_id"] = json!(BOT_ID);
        user["profile"]["api_app_id"] = json!(APP_ID);
    }
    user
}

/// A channel as `conversations.info` answers.
pub(super) fn conversation(id: &str, dm_with: Option<&str>) -> Value {
    match dm_with {
        Some(person) => json!({"id": id, "created": 1_764_000_000, "is_im": true,
                               "is_org_shared": false, "user": person, "is_user_deleted": false,
                               "priority": 0}),
        None => json!({"id": id, "name": GROUP_NAME, "is_channel": true, "is_group": false,
                       "is_im": false, "is_mpim": false, "is_private": false,
                       "created": 1_764_000_000, "is_archived": false, "is_general": true,
                       "name_normalized": GROUP_NAME, "is_shared": false,
                       "is_org_shared": false, "is_member": true, "creator": "U0PERSON1",
                       "topic": {"value": "", "creator": "", "last_set": 0},
                       "purpose": {"value": "", "creator": "", "last_set": 0},
                       "num_members": 4}),
    }
}

/// Socket Mode's greeting.
pub(super) fn hello(num_connections: usize) -> Value {
    json!({"type": "hello", "num_connections": num_connections,
           "debug_info": {"host": "fake", "started": "2025-11-24 16:00:00",
                          "build_number": 1, "approximate_connection_time": 18060},
           "connection_info": {"app_id": APP_ID}})
}

/// Socket Mode's `disconnect` (`refresh_requested`, `warning`, `link_disabled`).
pub(super) fn disconnect(reason: &str) -> Value {
    json!({"type": "disconnect", "reason": reason, "debug_info": {"host": "fake"}})
}

/// The `team` of `auth.test`.
pub(super) fn auth_test() -> Value {
    json!({"url": format!("https://{TEAM_DOMAIN}.slack.com/"), "team": "Hermes Test",
           "user": BOT_NAME, "team_id": TEAM_ID, "user_id": BOT_USER_ID, "bot_id": BOT_ID,
           "is_enterprise_install": false})
}
