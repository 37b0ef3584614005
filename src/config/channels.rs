//! `channel_overrides` (Hermes' names): per channel, thread or forum a model and a system
//! prompt in place of the defaults. Written under a platform's block: `discord:`, else
//! `platforms.discord`, else `gateway.platforms.discord` (the first that has the key wins
//! whole, as in Hermes), keyed by the platform's channel id.

use hermes_adapter::{ChatRef, Platform};
use serde_json::Value;

use super::Problem;
use super::yaml::YamlReader;

/// One channel's choices. A chat's own `/model` still comes first.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ChannelOverride {
    /// The model, as `/model` takes it: `provider:model`, or a model of the main provider.
    pub model: Option<String>,
    /// In place of `agent.system_prompt`.
    pub system_prompt: Option<String>,
}

/// Every platform's channel overrides.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ChannelOverrides(Vec<(Platform, String, ChannelOverride)>);

impl ChannelOverrides {
    /// The override for `chat`: its thread's own first, then its channel's (a thread or a
    /// forum post inherits its channel's). Ids only, as Hermes matches them.
    pub fn for_chat(&self, chat: &ChatRef) -> Option<&ChannelOverride> {
        let find = |id: &str| {
            self.0
                .iter()
                .find(|(p, channel, _)| *p == chat.platform && channel == id)
                .map(|(_, _, o)| o)
        };
        chat.thread_id
            .as_deref()
            .and_then(find)
            .or_else(|| find(&chat.chat_id))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// Read every platform's `channel_overrides`.
pub(super) fn read_channel_overrides(
    y: &mut YamlReader,
    problems: &mut Vec<Problem>,
) -> ChannelOverrides {
    let mut all = Vec::new();
    for platform in Platform::ALL {
        let name = platform.as_str();
        let places = [
            format!("{name}.channel_overrides"),
            format!("platforms.{name}.channel_overrides"),
            format!("gateway.platforms.{name}.channel_overrides"),
        ];
        let Some((key, map)) = places
            .iter()
            .find_map(|key| y.get(key).cloned().map(|v| (key.clone(), v)))
        else {
            continue;
        };
        let Value::Object(map) = map else {
            problems.push(Problem::error(
                key,
                "expected a mapping of channel ids to {model, provider, system_prompt}",
            ));
            continue;
        };
        for (channel, entry) in map {
            let at = format!("{key}.{channel}");
            if let Some(read) = read_entry(&at, &entry, problems) {
                all.push((platform, channel.trim().to_owned(), read));
            }
        }
    }
    ChannelOverrides(all)
}

/// One entry; `None` (reported) when it says nothing usable.
fn read_entry(at: &str, entry: &Value, problems: &mut Vec<Problem>) -> Option<ChannelOverride> {
    let Value::Object(fields) = entry else {
        problems.push(Problem::warning(
            at,
            "not a mapping of model, provider and system_prompt; ignored",
        ));
        return None;
    };
    let mut text = |field: &str| match fields.get(field) {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.trim().to_owned()).filter(|s| !s.is_empty()),
        Some(_) => {
            problems.push(Problem::error(
                format!("{at}.{field}"),
                "expected a text value",
            ));
            None
        }
    };
    let (model, provider, system_prompt) = (text("model"), text("provider"), text("system_prompt"));
    for unknown in fields
        .keys()
        .filter(|k| !matches!(k.as_str(), "model" | "provider" | "system_prompt"))
    {
        problems.push(Problem::warning(
            format!("{at}.{unknown}"),
            "not a channel override (model, provider and system_prompt are); ignored",
        ));
    }
    let model = match (provider, model) {
        (Some(provider), Some(model)) => {
            if super::provider(&provider).is_none() {
                problems.push(Problem::error(
                    format!("{at}.provider"),
                    format!("{provider:?} is not a provider I know"),
                ));
                return None;
            }
            Some(format!("{provider}:{model}"))
        }
        (Some(_), None) => {
            problems.push(Problem::warning(
                format!("{at}.provider"),
                "a provider without a model: name the model too (the channel keeps the default model)",
            ));
            None
        }
        (None, model) => model,
    };
    if model.is_none() && system_prompt.is_none() {
        return None;
    }
    Some(ChannelOverride {
        model,
        system_prompt,
    })
}
