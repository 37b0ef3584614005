//! The fake against serenity 0.12.5 itself: every gateway payload parsed with serenity's
//! `GatewayEvent`, the REST answers through serenity's `Http`, and a real serenity `Client`
//! identifying, resuming and identifying again; plus the protocol's refusals over raw
//! sockets.

use std::collections::HashMap;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use serenity::all::{
    ButtonStyle, Channel, ChannelId, ChannelType, Command, CommandDataOptionValue,
    CommandOptionType, CreateActionRow, CreateAttachment, CreateButton, CreateCommand,
    CreateCommandOption, CreateInteractionResponse, CreateInteractionResponseFollowup,
    CreateInteractionResponseMessage, CreateMessage, CreateThread, EditInteractionResponse, Event,
    GatewayIntents, GetMessages, Http, HttpBuilder, Interaction, MessageFlags, MessageId,
    MessageType,
};
use serenity::model::event::GatewayEvent;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_tungstenite::tungstenite::Message;

use super::*;
use crate::conformance::PlatformFake;

const WAIT: Duration = Duration::from_secs(10);
const ALL: u64 =
    gateway::GUILDS | gateway::GUILD_MESSAGES | gateway::DIRECT_MESSAGES | gateway::MESSAGE_CONTENT;

fn http(fake: &FakeDiscord) -> Http {
    HttpBuilder::new(TOKEN)
        .proxy(fake.api_base_url())
        .ratelimiter_disabled(true)
        .application_id(APP_ID.parse::<u64>().unwrap().into())
        .build()
}

fn channel(id: &str) -> ChannelId {
    ChannelId::new(id.parse().unwrap())
}

/// A frame as serenity's shard parses it; a dispatch's event.
fn parse(frame: &Value) -> Event {
    match serde_json::from_value::<GatewayEvent>(frame.clone()) {
        Ok(GatewayEvent::Dispatch(_, event)) => event,
        other => panic!("not a dispatch serenity parses: {other:?}\n{frame:#}"),
    }
}

/// A raw gateway client.
struct Ws(
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>,
);

impl Ws {
    async fn connect(fake: &FakeDiscord) -> Ws {
        let url = format!("{}/?v=10&encoding=json", fake.gateway_url());
        let (ws, _) = tokio_tungstenite::connect_async(url).await.unwrap();
        let mut ws = Ws(ws);
        let hello = ws.frame().await;
        assert!(matches!(
            serde_json::from_value::<GatewayEvent>(hello).unwrap(),
            GatewayEvent::Hello(1000)
        ));
        ws
    }

    /// The next text frame; `Err` with the close code (0: closed without one).
    async fn next(&mut self) -> Result<Value, u16> {
        loop {
            match tokio::time::timeout(WAIT, self.0.next())
                .await
                .expect("a frame in time")
            {
                Some(Ok(Message::Text(text))) => return Ok(serde_json::from_str(&text).unwrap()),
                Some(Ok(Message::Close(frame))) => return Err(frame.map_or(0, |f| f.code.into())),
                Some(Ok(_)) => {}
                Some(Err(_)) | None => return Err(0),
            }
        }
    }

    async fn frame(&mut self) -> Value {
        self.next().await.expect("a frame, not a close")
    }

    /// The next dispatch, which must be `t`; serenity's parse of it.
    async fn dispatch(&mut self, t: &str) -> (Value, Event) {
        let frame = self.frame().await;
        assert_eq!(frame["t"], t, "{frame:#}");
        let event = parse(&frame);
        (frame, event)
    }

    async fn send(&mut self, frame: Value) {
        self.0.send(Message::Text(frame.to_string())).await.unwrap();
    }

    async fn identify(&mut self, intents: u64) -> String {
        let d = json!({"token": format!("Bot {TOKEN}"), "intents": intents,
                       "properties": {"os": "linux", "browser": "t", "device": "t"}});
        self.send(json!({"op": 2, "d": d})).await;
        let (frame, _) = self.dispatch("READY").await;
        frame["d"]["session_id"].as_str().unwrap().to_owned()
    }
}

/// One HTTP/1.1 request on a fresh connection: (status, headers lower-cased, body).
async fn raw(
    fake: &FakeDiscord,
    method: &str,
    path: &str,
    auth: bool,
    content_type: &str,
    body: &[u8],
) -> (u16, HashMap<String, String>, Vec<u8>) {
    let mut s = tokio::net::TcpStream::connect(fake.http_addr)
        .await
        .unwrap();
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nHost: discord\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    if auth {
        head += &format!("Authorization: Bot {TOKEN}\r\n");
    }
    if !content_type.is_empty() {
        head += &format!("Content-Type: {content_type}\r\n");
    }
    s.write_all(format!("{head}\r\n").as_bytes()).await.unwrap();
    s.write_all(body).await.unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out).await.unwrap();
    let split = out.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
    let head = String::from_utf8_lossy(&out[..split]).to_string();
    let mut lines = head.lines();
    let status = lines
        .next()
        .unwrap()
        .split(' ')
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    let headers = lines
        .filter_map(|l| l.split_once(": "))
        .map(|(k, v)| (k.to_ascii_lowercase(), v.to_owned()))
        .collect();
    (status, headers, out[split + 4..].to_vec())
}

fn json_of(body: &[u8]) -> Value {
    serde_json::from_slice(body).unwrap()
}

#[tokio::test]
async fn every_payload_parses_with_serenity() {
    let fake = FakeDiscord::start().await;
    let http = http(&fake);
    let (alice, bob) = (fake.person(1), fake.person(2));
    let dm = fake.dm_chat(&alice);
    let mut ws = Ws::connect(&fake).await;

    let session = ws.identify(ALL).await;
    assert_eq!(fake.session_id(), Some(session));
    let Event::GuildCreate(guild) = ws.dispatch("GUILD_CREATE").await.1 else {
        panic!()
    };
    assert_eq!(guild.guild.id.to_string(), GUILD_ID);
    assert_eq!(guild.guild.channels.len(), 1, "the text channel parsed");
    assert_eq!(guild.guild.threads.len(), 1, "the thread parsed");
    assert_eq!(guild.guild.roles.len(), 1);

    // People's messages: DM, guild (addressed or not), attachments, voice, thread, reply.
    let first = fake.message(&dm, &alice, "hello", true);
    let Event::MessageCreate(m) = ws.dispatch("MESSAGE_CREATE").await.1 else {
        panic!()
    };
    assert_eq!(
        (m.message.content.as_str(), m.message.guild_id),
        ("hello", None)
    );
    assert_eq!(m.message.author.id.to_string(), alice);
    assert_eq!(m.message.id.to_string(), first);

    fake.message(GROUP_CHANNEL, &alice, "what time is it?", true);
    let Event::MessageCreate(m) = ws.dispatch("MESSAGE_CREATE").await.1 else {
        panic!()
    };
    assert_eq!(m.message.content, format!("<@{BOT_ID}> what time is it?"));
    assert_eq!(m.message.mentions[0].id.to_string(), BOT_ID);
    assert!(m.message.guild_id.is_some() && m.message.member.is_some());

    fake.message(GROUP_CHANNEL, &bob, "among ourselves", false);
    let Event::MessageCreate(m) = ws.dispatch("MESSAGE_CREATE").await.1 else {
        panic!()
    };
    assert!(m.message.mentions.is_empty());

    let files = vec![
        ("notes.txt", "text/plain", b"some notes".to_vec()),
        ("my photo.png", "image/png", vec![137, 80, 78, 71]),
    ];
    fake.message_with_attachments(GROUP_CHANNEL, &alice, "look", true, files);
    let Event::MessageCreate(m) = ws.dispatch("MESSAGE_CREATE").await.1 else {
        panic!()
    };
    let attachments = &m.message.attachments;
    assert_eq!(attachments.len(), 2);
    assert_eq!(attachments[1].filename, "my_photo.png");
    assert_eq!(attachments[0].download().await.unwrap(), b"some notes");
    assert_eq!(fake.downloads(&attachments[0].id.to_string()), 1);

    fake.voice_note(&dm, &alice, vec![1, 2, 3]);
    let Event::MessageCreate(m) = ws.dispatch("MESSAGE_CREATE").await.1 else {
        panic!()
    };
    let flags = m.message.flags.unwrap();
    assert!(flags.contains(MessageFlags::IS_VOICE_MESSAGE));
    assert!(m.message.attachments[0].waveform.is_some());

    fake.message(THREAD_CHANNEL, &bob, "in the thread", true);
    let Event::MessageCreate(m) = ws.dispatch("MESSAGE_CREATE").await.1 else {
        panic!()
    };
    assert_eq!(m.message.channel_id.to_string(), THREAD_CHANNEL);

    // The bot's side through serenity's Http: a prompt with buttons (echoed on the gateway).
    let buttons = CreateActionRow::Buttons(vec![
        CreateButton::new("allow:1")
            .label("Allow once")
            .style(ButtonStyle::Success),
        CreateButton::new("deny:1")
            .label("Deny")
            .style(ButtonStyle::Danger),
    ]);
    let builder = CreateMessage::new()
        .content("Run **rm**?")
        .components(vec![buttons.clone()]);
    let prompt = channel(GROUP_CHANNEL)
        .send_message(&http, builder)
        .await
        .unwrap();
    let Event::MessageCreate(echo) = ws.dispatch("MESSAGE_CREATE").await.1 else {
        panic!()
    };
    assert_eq!(echo.message.components.len(), 1);
    let shown = fake.prompts(GROUP_CHANNEL);
    assert_eq!(shown[0].text, "Run rm?");
    assert_eq!(shown[0].choices[0], ("Allow once".into(), "allow:1".into()));

    fake.reply(GROUP_CHANNEL, &alice, "and?", &prompt.id.to_string());
    let Event::MessageCreate(m) = ws.dispatch("MESSAGE_CREATE").await.1 else {
        panic!()
    };
    assert_eq!(m.message.kind, MessageType::InlineReply);
    assert_eq!(m.message.referenced_message.unwrap().id, prompt.id);

    // A button press in the guild: acknowledged, the prompt edited, an ephemeral follow-up.
    let press = fake.press(GROUP_CHANNEL, &bob, &shown[0], "Allow once");
    let event = ws.dispatch("INTERACTION_CREATE").await.1;
    let Event::InteractionCreate(event) = event else {
        panic!()
    };
    let Interaction::Component(c) = event.interaction else {
        panic!()
    };
    assert_eq!(c.data.custom_id, "allow:1");
    assert_eq!(
        (c.user.id.to_string(), c.message.id),
        (bob.clone(), prompt.id)
    );
    assert!(c.guild_id.is_some() && c.member.is_some());
    c.create_response(&http, CreateInteractionResponse::Acknowledge)
        .await
        .unwrap();
    assert!(fake.acknowledged(&press).is_some());
    assert_eq!(fake.callbacks(&press)[0].0, 6);
    let edit = EditInteractionResponse::new()
        .content("Allowed")
        .components(vec![]);
    c.edit_response(&http, edit).await.unwrap();
    let Event::MessageUpdate(_) = ws.dispatch("MESSAGE_UPDATE").await.1 else {
        panic!()
    };
    assert!(
        fake.prompts(GROUP_CHANNEL).is_empty(),
        "the buttons are gone"
    );
    let followup = CreateInteractionResponseFollowup::new()
        .content("only you")
        .ephemeral(true);
    c.create_followup(&http, followup).await.unwrap();
    let responses = fake.interaction_responses(&press);
    assert_eq!(responses.len(), 2);
    assert_eq!(responses[0].kind, ResponseKind::Original);
    assert_eq!(responses[1].flags & 64, 64);
    let again = c.create_response(&http, CreateInteractionResponse::Acknowledge);
    assert!(again.await.is_err(), "a second callback is refused");

    // A press in a DM.
    let builder = CreateMessage::new()
        .content("Sure?")
        .components(vec![buttons]);
    channel(&dm).send_message(&http, builder).await.unwrap();
    ws.dispatch("MESSAGE_CREATE").await;
    let prompt = &fake.prompts(&dm)[0];
    fake.press(&dm, &alice, prompt, "Deny");
    let event = ws.dispatch("INTERACTION_CREATE").await.1;
    let Event::InteractionCreate(event) = event else {
        panic!()
    };
    let Interaction::Component(c) = event.interaction else {
        panic!()
    };
    assert!(c.guild_id.is_none() && c.member.is_none());
    assert_eq!(c.user.id.to_string(), alice);
    let update = CreateInteractionResponseMessage::new()
        .content("Denied")
        .components(vec![]);
    let response = CreateInteractionResponse::UpdateMessage(update);
    c.create_response(&http, response).await.unwrap();
    ws.dispatch("MESSAGE_UPDATE").await;
    assert_eq!(fake.shown(&dm), vec!["Denied"]);

    // Slash commands, registered then run in the guild and in a DM.
    let option =
        CreateCommandOption::new(CommandOptionType::String, "question", "What").required(true);
    let ask = CreateCommand::new("ask")
        .description("Ask something")
        .add_option(option);
    let registered = Command::set_global_commands(&http, vec![ask])
        .await
        .unwrap();
    assert_eq!(fake.registered_commands()[0]["name"], "ask");
    let run = fake.slash(GROUP_CHANNEL, &alice, "ask", vec![("question", "why?")]);
    let event = ws.dispatch("INTERACTION_CREATE").await.1;
    let Event::InteractionCreate(event) = event else {
        panic!()
    };
    let Interaction::Command(c) = event.interaction else {
        panic!()
    };
    assert_eq!((c.data.name.as_str(), c.data.id), ("ask", registered[0].id));
    let value = &c.data.options[0].value;
    assert_eq!(value, &CommandDataOptionValue::String("why?".into()));
    let defer = CreateInteractionResponseMessage::new();
    c.create_response(&http, CreateInteractionResponse::Defer(defer))
        .await
        .unwrap();
    assert_eq!(fake.callbacks(&run)[0].0, 5);
    let answer = EditInteractionResponse::new().content("because");
    c.edit_response(&http, answer).await.unwrap();
    ws.dispatch("MESSAGE_UPDATE").await;
    assert_eq!(fake.shown(GROUP_CHANNEL).last().unwrap(), "because");
    fake.slash(&dm, &alice, "ask", vec![("question", "here?")]);
    let event = ws.dispatch("INTERACTION_CREATE").await.1;
    let Event::InteractionCreate(event) = event else {
        panic!()
    };
    let Interaction::Command(c) = event.interaction else {
        panic!()
    };
    assert!(c.guild_id.is_none());
    assert_eq!(c.user.id.to_string(), alice);

    // Threads from a message, channels, typing, history, the gateway URL, uploads.
    let asked = fake.message(GROUP_CHANNEL, &alice, "start a thread", true);
    ws.dispatch("MESSAGE_CREATE").await;
    let asked = MessageId::new(asked.parse().unwrap());
    let thread = channel(GROUP_CHANNEL)
        .create_thread_from_message(&http, asked, CreateThread::new("topic"))
        .await
        .unwrap();
    assert_eq!(
        (thread.id.get(), thread.kind),
        (asked.get(), ChannelType::PublicThread)
    );
    let Event::ThreadCreate(_) = ws.dispatch("THREAD_CREATE").await.1 else {
        panic!()
    };
    let twice =
        channel(GROUP_CHANNEL).create_thread_from_message(&http, asked, CreateThread::new("t"));
    assert!(twice.await.is_err());
    assert_eq!(fake.threads_created(), vec![asked.to_string()]);
    for (id, private) in [
        (dm.as_str(), true),
        (GROUP_CHANNEL, false),
        (THREAD_CHANNEL, false),
    ] {
        let found = channel(id).to_channel(&http).await.unwrap();
        assert_eq!(matches!(found, Channel::Private(_)), private, "{id}");
    }
    channel(&dm).broadcast_typing(&http).await.unwrap();
    assert_eq!(fake.working(&dm).len(), 1);
    let after = GetMessages::new()
        .after(MessageId::new(first.parse().unwrap()))
        .limit(2);
    let page = channel(&dm).messages(&http, after).await.unwrap();
    assert_eq!(page.len(), 2);
    assert!(page[0].id > page[1].id, "newest first");
    assert_eq!(http.get_gateway().await.unwrap().url, fake.gateway_url());
    assert_eq!(http.get_bot_gateway().await.unwrap().shards, 1);
    assert_eq!(
        http.get_current_user().await.unwrap().id.to_string(),
        BOT_ID
    );
    let upload = CreateMessage::new().add_file(CreateAttachment::bytes(b"data".to_vec(), "r.txt"));
    let sent = channel(&dm).send_message(&http, upload).await.unwrap();
    ws.dispatch("MESSAGE_CREATE").await;
    assert_eq!(
        fake.sent_files(&dm),
        vec![("r.txt".to_owned(), b"data".to_vec())]
    );
    assert_eq!(sent.attachments[0].download().await.unwrap(), b"data");

    // Everything the session dispatched, once more.
    let all = fake.dispatches();
    assert!(all.len() > 20);
    for frame in &all {
        parse(frame);
    }
}

#[tokio::test]
async fn the_gateway_holds_replays_and_refuses_like_discord() {
    let fake = FakeDiscord::start().await;
    let alice = fake.person(1);
    let dm = fake.dm_chat(&alice);
    fake.message(&dm, &alice, "early", false);
    let mut ws = Ws::connect(&fake).await;
    let session = ws.identify(ALL).await;
    ws.dispatch("GUILD_CREATE").await;
    let (early, _) = ws.dispatch("MESSAGE_CREATE").await;
    assert_eq!(early["d"]["content"], "early", "held until the first READY");
    assert!(fake.wait_connected(WAIT).await);

    ws.send(json!({"op": 1, "d": 3})).await;
    assert_eq!(ws.frame().await["op"], 11);
    fake.stop_acking(true);
    ws.send(json!({"op": 1, "d": 3})).await;
    let silent = tokio::time::timeout(Duration::from_millis(300), ws.0.next()).await;
    assert!(silent.is_err(), "no ack");
    assert_eq!(fake.heartbeats(), 2);
    fake.stop_acking(false);

    // A drop, a message meanwhile, a RESUME that replays it.
    let seen = early["s"].as_u64().unwrap();
    fake.disconnect();
    assert_eq!(ws.next().await, Err(0), "no close frame");
    assert!(!fake.connected());
    fake.message(&dm, &alice, "while away", false);
    let mut ws = Ws::connect(&fake).await;
    let resume = json!({"token": TOKEN, "session_id": session, "seq": seen});
    ws.send(json!({"op": 6, "d": resume})).await;
    let (missed, _) = ws.dispatch("MESSAGE_CREATE").await;
    assert_eq!(missed["d"]["content"], "while away");
    assert_eq!(missed["s"].as_u64(), Some(seen + 1));
    let (_, resumed) = ws.dispatch("RESUMED").await;
    assert!(matches!(resumed, Event::Resumed(_)));
    assert_eq!(fake.resumes(), 1);
    fake.reconnect_request();
    assert_eq!(ws.frame().await["op"], 7);

    // Unknown sessions, wrong tokens, undecodable frames, disallowed intents.
    let mut other = Ws::connect(&fake).await;
    let bogus = json!({"token": TOKEN, "session_id": "nope", "seq": 1});
    other.send(json!({"op": 6, "d": bogus})).await;
    assert_eq!(
        other.frame().await,
        json!({"op": 9, "s": null, "t": null, "d": false})
    );
    let mut wrong = Ws::connect(&fake).await;
    wrong
        .send(json!({"op": 2, "d": {"token": "Bot nope", "intents": 1}}))
        .await;
    assert_eq!(wrong.next().await, Err(4004));
    let mut garbage = Ws::connect(&fake).await;
    garbage
        .0
        .send(Message::Text("{not json".into()))
        .await
        .unwrap();
    assert_eq!(garbage.next().await, Err(4002));
    let strict = FakeDiscord::start_with(Options {
        privileged_intents: 0,
        ..Options::default()
    })
    .await;
    let mut refused = Ws::connect(&strict).await;
    let d = json!({"token": TOKEN, "intents": ALL});
    refused.send(json!({"op": 2, "d": d})).await;
    assert_eq!(refused.next().await, Err(4014));

    // An invalidated session: op 9, then a fresh IDENTIFY does not see what happened between.
    let mut ws = Ws::connect(&fake).await;
    let resume = json!({"token": TOKEN, "session_id": fake.session_id(), "seq": seen + 1});
    ws.send(json!({"op": 6, "d": resume})).await;
    ws.dispatch("RESUMED").await;
    fake.invalidate_session();
    assert_eq!(ws.frame().await["d"], false);
    fake.message(&dm, &alice, "lost", false);
    let mut ws = Ws::connect(&fake).await;
    let new_session = ws.identify(ALL).await;
    assert_ne!(new_session, session);
    ws.dispatch("GUILD_CREATE").await;
    fake.message(&dm, &alice, "after", false);
    let (after, _) = ws.dispatch("MESSAGE_CREATE").await;
    assert_eq!(after["d"]["content"], "after");
    assert_eq!(fake.identifies(), vec![ALL, ALL]);

    // Without MESSAGE_CONTENT a guild message not mentioning the bot arrives blank; without
    // GUILDS there is no GUILD_CREATE.
    let plain = FakeDiscord::start().await;
    let mut ws = Ws::connect(&plain).await;
    ws.identify(gateway::GUILD_MESSAGES).await;
    plain.message(GROUP_CHANNEL, &alice, "secret", false);
    plain.message(GROUP_CHANNEL, &alice, "for you", true);
    let (blank, _) = ws.dispatch("MESSAGE_CREATE").await;
    assert_eq!(blank["d"]["content"], "");
    let (mention, _) = ws.dispatch("MESSAGE_CREATE").await;
    assert_eq!(mention["d"]["content"], format!("<@{BOT_ID}> for you"));
}

#[tokio::test]
async fn rest_answers_refuse_and_limit_like_discord() {
    let fake = FakeDiscord::start().await;
    let dm = fake.dm_chat(&fake.person(1));
    let post = format!("/api/v10/channels/{dm}/messages");
    let body = |text: &str| json!({"content": text}).to_string().into_bytes();
    let ct = "application/json";

    let (status, _, answer) = raw(&fake, "POST", &post, false, ct, &body("hi")).await;
    assert_eq!(
        (status, json_of(&answer)),
        (401, json!({"message": "401: Unauthorized", "code": 0}))
    );

    let long = "x".repeat(2001);
    let (status, _, answer) = raw(&fake, "POST", &post, true, ct, &body(&long)).await;
    assert_eq!(status, 400);
    let errors = &json_of(&answer)["errors"]["content"]["_errors"][0];
    assert_eq!(errors["code"], "BASE_TYPE_MAX_LENGTH");
    assert_eq!(fake.calls("/messages").last().unwrap().status, 400);

    let (status, headers, answer) = raw(&fake, "POST", &post, true, ct, &body("hi")).await;
    assert_eq!(status, 200);
    assert_eq!(headers["content-type"], "application/json");
    assert!(headers.contains_key("x-ratelimit-bucket"));
    assert_eq!(headers["x-ratelimit-remaining"], "48");
    let sent: serenity::all::Message = serde_json::from_slice(&answer).unwrap();
    assert_eq!(sent.content, "hi");

    fake.rate_limit_next("/messages", 1, 2.5, false);
    let (status, headers, answer) = raw(&fake, "POST", &post, true, ct, &body("hi")).await;
    assert_eq!((status, headers["retry-after"].as_str()), (429, "3"));
    assert_eq!(headers["x-ratelimit-scope"], "user");
    assert_eq!(json_of(&answer)["retry_after"], 2.5);
    assert!(fake.calls("/messages").last().unwrap().refused);
    fake.rate_limit_next("/typing", 1, 1.0, true);
    let typing = format!("/api/v10/channels/{dm}/typing");
    let (status, headers, _) = raw(&fake, "POST", &typing, true, "", b"").await;
    assert_eq!(
        (status, headers["x-ratelimit-global"].as_str()),
        (429, "true")
    );
    fake.fail_next("/typing", 502);
    assert_eq!(raw(&fake, "POST", &typing, true, "", b"").await.0, 502);
    assert_eq!(raw(&fake, "POST", &typing, true, "", b"").await.0, 204);
    let unknown = "/api/v10/channels/42/messages";
    let (status, _, answer) = raw(&fake, "POST", unknown, true, ct, &body("hi")).await;
    assert_eq!(
        (status, json_of(&answer)["code"].as_u64()),
        (404, Some(10003))
    );

    // A multipart upload and the CDN (no token needed).
    let form = "--XyZ\r\nContent-Disposition: form-data; name=\"payload_json\"\r\n\r\n{\"content\":\"a file\"}\r\n--XyZ\r\nContent-Disposition: form-data; name=\"files[0]\"; filename=\"out.txt\"\r\nContent-Type: text/plain\r\n\r\nBYTES\r\n--XyZ--\r\n";
    let (status, _, answer) = raw(
        &fake,
        "POST",
        &post,
        true,
        "multipart/form-data; boundary=XyZ",
        form.as_bytes(),
    )
    .await;
    assert_eq!(status, 200);
    let url = json_of(&answer)["attachments"][0]["url"]
        .as_str()
        .unwrap()
        .to_owned();
    let path = url.trim_start_matches(&fake.api_base_url());
    let (status, headers, bytes) = raw(&fake, "GET", path, false, "", b"").await;
    assert_eq!((status, bytes.as_slice()), (200, b"BYTES".as_slice()));
    assert_eq!(headers["content-type"], "text/plain; charset=utf-8");
    assert_eq!(fake.raw_messages(&dm).last().unwrap().files[0].0, "out.txt");

    // Buckets: the limit is enforced; interactions expire.
    let tight = FakeDiscord::start_with(Options {
        bucket_limit: 2,
        interaction_window: Duration::ZERO,
        ..Options::default()
    })
    .await;
    let typing = format!("/api/v10/channels/{GROUP_CHANNEL}/typing");
    let statuses = [
        raw(&tight, "POST", &typing, true, "", b"").await.0,
        raw(&tight, "POST", &typing, true, "", b"").await.0,
        raw(&tight, "POST", &typing, true, "", b"").await.0,
    ];
    assert_eq!(statuses, [204, 204, 429]);
    let late = tight.slash(GROUP_CHANNEL, &tight.person(1), "ask", vec![]);
    tokio::time::sleep(Duration::from_millis(5)).await;
    let token = tight.lock().interactions[&late].token.clone();
    let callback = format!("/api/v10/interactions/{late}/{token}/callback");
    let (status, _, answer) = raw(&tight, "POST", &callback, false, ct, br#"{"type":5}"#).await;
    assert_eq!(
        (status, json_of(&answer)["code"].as_u64()),
        (404, Some(10062))
    );
    assert!(tight.acknowledged(&late).is_none());
}

#[tokio::test]
async fn a_serenity_client_identifies_resumes_and_identifies_again() {
    use serenity::all::{ClientBuilder, Context, RawEventHandler};

    struct Events(
        tokio::sync::mpsc::UnboundedSender<String>,
        Arc<Mutex<Vec<String>>>,
    );
    #[serenity::async_trait]
    impl RawEventHandler for Events {
        async fn raw_event(&self, _: Context, event: Event) {
            let name = match &event {
                Event::MessageCreate(m) => format!("message {}", m.message.content),
                other => other.name().unwrap_or_default(),
            };
            self.1.lock().unwrap().push(name.clone());
            let _ = self.0.send(name);
        }
    }
    let fake = FakeDiscord::start().await;
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let intents = GatewayIntents::GUILDS
        | GatewayIntents::GUILD_MESSAGES
        | GatewayIntents::DIRECT_MESSAGES
        | GatewayIntents::MESSAGE_CONTENT;
    let mut client = ClientBuilder::new_with_http(http(&fake), intents)
        .raw_event_handler(Events(tx, seen.clone()))
        .await
        .unwrap();
    assert_eq!(*client.ws_url.lock().await, fake.gateway_url());
    let shards = client.shard_manager.clone();
    tokio::spawn(async move { client.start().await });
    expect(&mut rx, "READY").await;
    expect(&mut rx, "GUILD_CREATE").await;
    let alice = fake.person(1);
    let dm = fake.dm_chat(&alice);
    fake.message(&dm, &alice, "one", false);
    expect(&mut rx, "message one").await;

    fake.disconnect();
    fake.message(&dm, &alice, "two", false);
    expect(&mut rx, "message two").await;
    assert_eq!(fake.resumes(), 1);

    fake.reconnect_request();
    fake.message(&dm, &alice, "three", false);
    expect(&mut rx, "message three").await;
    assert_eq!(fake.resumes(), 2);

    fake.invalidate_session();
    expect(&mut rx, "READY").await;
    assert_eq!(fake.identifies().len(), 2);
    fake.message(&dm, &alice, "four", false);
    expect(&mut rx, "message four").await;
    shards.shutdown_all().await;
    let seen = seen.lock().unwrap().clone();
    let messages: Vec<&String> = seen.iter().filter(|e| e.starts_with("message")).collect();
    assert_eq!(
        messages,
        [
            "message one",
            "message two",
            "message three",
            "message four"
        ]
    );
    assert_eq!(seen.iter().filter(|e| *e == "RESUMED").count(), 2);
}

/// Wait for the event named `wanted`, skipping others.
async fn expect(rx: &mut tokio::sync::mpsc::UnboundedReceiver<String>, wanted: &str) {
    loop {
        let got = tokio::time::timeout(WAIT, rx.recv()).await;
        let got = got.unwrap_or_else(|_| panic!("timed out waiting for {wanted}"));
        if got.as_deref() == Some(wanted) {
            return;
        }
    }
}

#[test]
fn what_people_see() {
    let cases = [
        ("Hello **there**", "Hello there"),
        ("*a* _b_ __c__ ~~d~~ ||e|| ***f***", "a b c d e f"),
        (
            "snake_case_name and 2 * 3 * 4",
            "snake_case_name and 2 * 3 * 4",
        ),
        (
            r"\*not\* \_this\_ a\\b \<here\>",
            r"*not* _this_ a\b <here>",
        ),
        ("`**code**` stays", "**code** stays"),
        ("# Title\n> quoted", "Title\nquoted"),
        (
            "```rust\nif a<b && *p { x }\n```\nThe end.",
            "if a<b && *p { x }\nThe end.",
        ),
    ];
    for (markdown, shown) in cases {
        assert_eq!(visible(markdown), shown, "{markdown:?}");
    }
}
