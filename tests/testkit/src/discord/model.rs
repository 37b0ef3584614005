//! The JSON Discord sends: users, members, channels, messages, interactions, READY and
//! GUILD_CREATE, in the shapes serenity 0.12.5 parses (the tests in `tests.rs` prove it),
//! and the snowflake and timestamp helpers they need.

use serde_json::{Value, json};

use super::{APP_ID, BOT_ID, BOT_NAME, GROUP_CHANNEL, GUILD_ID, Inner, Msg, THREAD_CHANNEL};

/// Discord's epoch (2015-01-01) in Unix milliseconds: a snowflake's top bits count from it.
const DISCORD_EPOCH_MS: u64 = 1_420_070_400_000;
/// People's user ids are this plus n; their DM channels [`DM_BASE`] plus n.
pub(super) const PERSON_BASE: u64 = 100_000_000_000_000_000;
pub(super) const DM_BASE: u64 = 200_000_000_000_000_000;
/// The bot's permissions in the guild (view, send, threads, history, embeds, files).
const BOT_PERMISSIONS: &str = "563364418145280";

/// Where a channel id leads.
#[derive(Debug, Clone)]
pub(super) enum Chan {
    /// A DM with this person (user id).
    Dm(String),
    /// The guild's text channel.
    Text,
    /// A public thread of `parent`.
    Thread {
        parent: String,
        name: String,
        archive: u64,
        created_ms: u64,
    },
}

impl Chan {
    pub(super) fn in_guild(&self) -> bool {
        !matches!(self, Chan::Dm(_))
    }
}

pub(super) fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(DISCORD_EPOCH_MS)
}

/// A snowflake made now, at least `last + 1` (so ids keep increasing).
pub(super) fn snowflake(last: u64) -> u64 {
    (now_ms().saturating_sub(DISCORD_EPOCH_MS) << 22).max(last + 1)
}

/// When a snowflake was made, in Unix milliseconds.
pub(super) fn snowflake_ms(id: u64) -> u64 {
    (id >> 22) + DISCORD_EPOCH_MS
}

/// RFC 3339 with microseconds and `+00:00`, as Discord writes times.
pub(super) fn timestamp(ms: u64) -> String {
    let (days, rest) = ((ms / 86_400_000) as i64, ms % 86_400_000);
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    let (h, m, s, milli) = (
        rest / 3_600_000,
        rest / 60_000 % 60,
        rest / 1000 % 60,
        rest % 1000,
    );
    format!("{year:04}-{month:02}-{day:02}T{h:02}:{m:02}:{s:02}.{milli:03}000+00:00")
}

/// A small non-cryptographic hash (FNV-1a) for bucket ids, tokens and session ids.
pub(super) fn hash(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The bot or a person.
pub(super) fn user(id: &str) -> Value {
    if id == BOT_ID {
        return json!({"id": BOT_ID, "username": BOT_NAME, "discriminator": "0",
                      "global_name": "Hermes", "avatar": null, "bot": true,
                      "public_flags": 0, "flags": 0});
    }
    let n = id
        .parse::<u64>()
        .map_or(0, |v| v.saturating_sub(PERSON_BASE));
    json!({"id": id, "username": format!("person{n}"), "discriminator": "0",
           "global_name": format!("Person {n}"), "avatar": null, "public_flags": 0})
}

/// A guild member; `with_user` for the full member (interactions, GUILD_CREATE), without for
/// the partial member of a MESSAGE_CREATE.
pub(super) fn member(id: &str, with_user: bool) -> Value {
    let mut m = json!({"roles": [], "joined_at": "2024-01-01T00:00:00.000000+00:00",
                       "premium_since": null, "deaf": false, "mute": false, "flags": 0,
                       "pending": false, "nick": null, "avatar": null,
                       "communication_disabled_until": null});
    if with_user {
        m["user"] = user(id);
    }
    m
}

/// A channel object (`GET /channels/{id}`, GUILD_CREATE, thread creation).
pub(super) fn channel(id: &str, chan: &Chan) -> Value {
    match chan {
        Chan::Dm(person) => json!({"id": id, "type": 1, "last_message_id": null, "flags": 0,
                                   "recipients": [user(person)]}),
        Chan::Text => json!({"id": id, "type": 0, "guild_id": GUILD_ID, "name": "general",
                             "position": 0, "permission_overwrites": [], "parent_id": null,
                             "topic": null, "nsfw": false, "last_message_id": null,
                             "rate_limit_per_user": 0, "flags": 0}),
        Chan::Thread {
            parent,
            name,
            archive,
            created_ms,
        } => json!({"id": id, "type": 11, "guild_id": GUILD_ID, "parent_id": parent,
                    "name": name, "owner_id": BOT_ID, "last_message_id": null,
                    "rate_limit_per_user": 0, "flags": 0, "message_count": 0,
                    "member_count": 1, "total_message_sent": 0,
                    "thread_metadata": {"archived": false, "auto_archive_duration": archive,
                                        "archive_timestamp": timestamp(*created_ms),
                                        "locked": false,
                                        "create_timestamp": timestamp(*created_ms)}}),
    }
}

/// A message; `gateway` adds what only gateway events carry (`guild_id`, `member`).
pub(super) fn message(inner: &Inner, m: &Msg, gateway: bool, nested: bool) -> Value {
    let mentions: Vec<Value> = m.mentions_bot.then(|| user(BOT_ID)).into_iter().collect();
    let mut v = json!({
        "id": m.id.to_string(), "channel_id": m.channel,
        "type": if m.reference.is_some() { 19 } else { 0 },
        "author": user(&m.author), "content": m.content,
        "timestamp": timestamp(snowflake_ms(m.id)),
        "edited_timestamp": m.edited_ms.map(timestamp),
        "tts": false, "mention_everyone": false, "mentions": mentions, "mention_roles": [],
        "attachments": m.attachments, "embeds": [], "pinned": false,
        "components": m.components, "flags": m.flags,
    });
    if let Some(reference) = &m.reference {
        v["message_reference"] = json!({"type": 0, "message_id": reference,
                                        "channel_id": m.channel});
        if m.guild {
            v["message_reference"]["guild_id"] = json!(GUILD_ID);
        }
        if !nested {
            v["referenced_message"] = inner
                .find(reference)
                .map_or(Value::Null, |r| message(inner, r, false, true));
        }
    }
    if m.interaction.is_some() {
        v["webhook_id"] = json!(APP_ID);
        v["application_id"] = json!(APP_ID);
    }
    if gateway && m.guild {
        v["guild_id"] = json!(GUILD_ID);
        v["member"] = member(&m.author, false);
    }
    v
}

/// An attachment as Discord describes it; `voice` adds a voice note's duration and waveform.
pub(super) fn attachment(base: &str, id: u64, name: &str, mime: &str, size: usize) -> Value {
    let url = format!("{base}/attachments/{id}/{name}");
    json!({"id": id.to_string(), "filename": name, "size": size, "url": url,
           "proxy_url": url, "content_type": mime})
}

/// An INTERACTION_CREATE payload: `kind` 2 (command) or 3 (component).
pub(super) struct Interaction<'a> {
    pub id: u64,
    pub kind: u8,
    pub token: &'a str,
    pub chat: &'a str,
    pub chan: &'a Chan,
    pub person: &'a str,
    pub data: Value,
    pub message: Option<Value>,
}

pub(super) fn interaction(i: Interaction<'_>) -> Value {
    let guild = i.chan.in_guild();
    let mut channel = channel(i.chat, i.chan);
    channel["permissions"] = json!(BOT_PERMISSIONS);
    let mut v = json!({
        "id": i.id.to_string(), "application_id": APP_ID, "type": i.kind, "data": i.data,
        "channel_id": i.chat, "channel": channel, "token": i.token, "version": 1,
        "app_permissions": BOT_PERMISSIONS, "locale": "en-US", "entitlements": [],
        "authorizing_integration_owners": {"0": if guild { GUILD_ID } else { "0" }},
        "context": if guild { 0 } else { 1 }, "attachment_size_limit": 26_214_400,
    });
    if guild {
        v["guild_id"] = json!(GUILD_ID);
        v["guild_locale"] = json!("en-US");
        v["member"] = member(i.person, true);
        v["member"]["permissions"] = json!("2248473465835073");
    } else {
        v["user"] = user(i.person);
    }
    if let Some(message) = i.message {
        v["message"] = message;
    }
    v
}

/// HELLO, with the heartbeat interval.
pub(super) fn hello(interval_ms: u64) -> Value {
    json!({"op": 10, "s": null, "t": null,
           "d": {"heartbeat_interval": interval_ms, "_trace": ["[\"fake-gateway\"]"]}})
}

/// READY's payload for shard `shard` of `shards`; the guild is listed in its own shard's.
pub(super) fn ready(session_id: &str, ws_url: &str, shard: u32, shards: u32) -> Value {
    let mut me = user(BOT_ID);
    me["verified"] = json!(true);
    me["mfa_enabled"] = json!(false);
    me["email"] = Value::Null;
    let guilds = if shard_of_guild(GUILD_ID, shards) == shard {
        json!([{"id": GUILD_ID, "unavailable": true}])
    } else {
        json!([])
    };
    json!({"v": 10, "user": me, "guilds": guilds,
           "session_id": session_id, "resume_gateway_url": ws_url, "session_type": "normal",
           "shard": [shard, shards], "application": {"id": APP_ID, "flags": 565_248},
           "private_channels": [], "relationships": [], "user_settings": {},
           "_trace": ["[\"fake-gateway\"]"]})
}

/// The shard a guild's events go to: `(guild_id >> 22) % shards` (Discord's rule).
pub(super) fn shard_of_guild(guild: &str, shards: u32) -> u32 {
    let id: u64 = guild.parse().unwrap_or(0);
    ((id >> 22) % u64::from(shards.max(1))) as u32
}

/// GUILD_CREATE's payload: the guild, its text channel and its threads.
pub(super) fn guild(threads: Vec<Value>) -> Value {
    let everyone = json!({"id": GUILD_ID, "name": "@everyone", "color": 0,
                          "colors": {"primary_color": 0, "secondary_color": null,
                                     "tertiary_color": null},
                          "hoist": false, "icon": null, "unicode_emoji": null, "position": 0,
                          "permissions": "2248473465835073", "managed": false,
                          "mentionable": false, "flags": 0});
    let mut g = json!({
        "id": GUILD_ID, "name": "Hermes test guild", "icon": null, "icon_hash": null,
        "splash": null, "discovery_splash": null, "owner_id": format!("{}", PERSON_BASE + 1),
        "afk_channel_id": null, "afk_timeout": 300, "widget_enabled": false,
        "widget_channel_id": null, "verification_level": 0,
        "default_message_notifications": 1, "explicit_content_filter": 0,
        "roles": [everyone], "emojis": [], "features": [], "mfa_level": 0,
        "application_id": null, "system_channel_id": GROUP_CHANNEL, "system_channel_flags": 0,
        "rules_channel_id": null, "max_presences": null, "max_members": 500_000,
        "vanity_url_code": null, "description": null, "banner": null, "premium_tier": 0,
    });
    let extra = json!({
        "premium_subscription_count": 0, "preferred_locale": "en-US",
        "public_updates_channel_id": null, "max_video_channel_users": 25,
        "max_stage_video_channel_users": 50, "nsfw_level": 0, "stickers": [],
        "premium_progress_bar_enabled": false, "safety_alerts_channel_id": null,
        "incidents_data": null, "joined_at": "2024-01-01T00:00:00.000000+00:00",
        "large": false, "unavailable": false, "member_count": 4, "voice_states": [],
        "members": [member(BOT_ID, true)],
        "channels": [channel(GROUP_CHANNEL, &Chan::Text)],
        "threads": threads, "presences": [], "stage_instances": [],
        "guild_scheduled_events": [], "soundboard_sounds": [], "lazy": true,
    });
    for (key, value) in extra.as_object().into_iter().flatten() {
        g[key] = value.clone();
    }
    g
}

/// The pre-existing thread in the group channel.
pub(super) fn standing_thread() -> Chan {
    Chan::Thread {
        parent: GROUP_CHANNEL.into(),
        name: "standing thread".into(),
        archive: 1440,
        created_ms: 1_704_067_200_000,
    }
}

/// The thread id [`THREAD_CHANNEL`] as a channel object.
pub(super) fn standing_thread_json() -> Value {
    channel(THREAD_CHANNEL, &standing_thread())
}
