//! Where the agent may send to on its own (`send_message`, a scheduled job's answers): the
//! chat it is answering, a platform's home channel (set with `/sethome`, else the
//! configured `*_HOME_CHANNEL`), or `platform:chat_id[:thread_id]` of a chat where the
//! person has talked with the gateway. Never an arbitrary id, nor someone else's chat: a
//! prompt-injected model cannot make the bot write to strangers.

use std::collections::HashMap;

use hermes_adapter::{ChatKind, ChatRef, Platform};

use crate::store::Store;

/// The home channels the configuration names, by platform.
pub type ConfiguredHomes = HashMap<Platform, String>;

/// `target` as a chat: `None`/`here`/`origin` is `here`; `home` or a bare platform name
/// is that platform's home channel; else `platform:chat_id[:thread_id]` of a chat seen.
pub async fn resolve(
    target: Option<&str>,
    here: &ChatRef,
    person: &str,
    store: &Store,
    homes: &ConfiguredHomes,
) -> Result<ChatRef, String> {
    let target = target.map(str::trim).filter(|t| !t.is_empty());
    let Some(target) = target.filter(|t| !matches!(*t, "here" | "origin" | "this chat")) else {
        return Ok(here.clone());
    };
    if target == "home" {
        return home(here.platform, store, homes).await;
    }
    if let Some(platform) = Platform::parse(target) {
        return home(platform, store, homes).await;
    }
    let mut parts = target.splitn(3, ':');
    let platform = parts
        .next()
        .and_then(Platform::parse)
        .ok_or_else(|| format!("{target:?}: use home, a platform's name, or platform:chat_id"))?;
    let chat_id = parts
        .next()
        .map(|c| c.trim_start_matches('#'))
        .filter(|c| !c.is_empty())
        .ok_or("no chat id")?;
    let thread = parts.next().filter(|t| !t.is_empty());
    if let Some(chat) = store
        .chat_seen(platform, chat_id, thread, Some(person))
        .await
        .map_err(|e| e.to_string())?
    {
        return Ok(chat);
    }
    match home(platform, store, homes).await {
        Ok(home) if home.chat_id == chat_id && thread.is_none() => Ok(home),
        _ => Err(format!(
            "{target:?} is not a chat where you have talked with me (or a home channel); I can only write to those"
        )),
    }
}

/// `platform`'s home channel: `/sethome`'s, else the configured one.
pub async fn home(
    platform: Platform,
    store: &Store,
    homes: &ConfiguredHomes,
) -> Result<ChatRef, String> {
    if let Some(chat) = store
        .home_channel(platform)
        .await
        .map_err(|e| e.to_string())?
    {
        return Ok(chat);
    }
    let Some(id) = homes.get(&platform) else {
        return Err(format!(
            "{platform} has no home channel: /sethome in a chat makes it one, or set {}_HOME_CHANNEL",
            platform.as_str().to_ascii_uppercase()
        ));
    };
    Ok(store
        .chat_seen(platform, id, None, None)
        .await
        .map_err(|e| e.to_string())?
        .unwrap_or(ChatRef {
            platform,
            account: None,
            chat_id: id.clone(),
            thread_id: None,
            kind: ChatKind::Channel,
        }))
}
