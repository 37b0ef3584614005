//! Discord's validation of what a bot sends: message content length, components (action
//! rows of buttons) and application commands, answered with Discord's error codes.

use serde_json::Value;

use super::{Failure, invalid};
use crate::discord::MAX_LEN;

pub(super) fn check_content(content: &str) -> Result<(), Failure> {
    if content.chars().count() > MAX_LEN {
        let message = "Must be 2000 or fewer in length.";
        return Err(invalid("content", "BASE_TYPE_MAX_LENGTH", message));
    }
    Ok(())
}

/// Action rows (type 1) of 1 to 5 buttons (type 2) with a style, a label or emoji, and a
/// unique `custom_id` of at most 100 characters (or a `url` for link buttons).
pub(super) fn check_components(components: &Value) -> Result<(), Failure> {
    let Some(rows) = components.as_array() else {
        let message = "Only iterables may be used in a ListType";
        return Err(invalid("components", "MODEL_TYPE_CONVERT", message));
    };
    if rows.len() > 5 {
        let message = "Must be 5 or fewer in length.";
        return Err(invalid("components", "BASE_TYPE_MAX_LENGTH", message));
    }
    let mut ids: Vec<String> = Vec::new();
    for (r, row) in rows.iter().enumerate() {
        let at = |rest: &str| format!("components.{r}{rest}");
        if row["type"] != 1 {
            return Err(invalid(
                &at(".type"),
                "BASE_TYPE_CHOICES",
                "Value must be one of {1}.",
            ));
        }
        let items = row["components"].as_array().cloned().unwrap_or_default();
        if !(1..=5).contains(&items.len()) {
            let message = "Must be between 1 and 5 in length.";
            return Err(invalid(&at(".components"), "BASE_TYPE_BAD_LENGTH", message));
        }
        for (c, item) in items.iter().enumerate() {
            let at = |field: &str| at(&format!(".components.{c}.{field}"));
            if item["type"] != 2 {
                continue;
            }
            let style = item["style"].as_u64().unwrap_or(0);
            if !(1..=6).contains(&style) {
                let message = "Value must be one of {1, 2, 3, 4, 5, 6}.";
                return Err(invalid(&at("style"), "BASE_TYPE_CHOICES", message));
            }
            let label = item["label"].as_str();
            if label.is_some_and(|l| l.chars().count() > 80) {
                let message = "Must be 80 or fewer in length.";
                return Err(invalid(&at("label"), "BASE_TYPE_MAX_LENGTH", message));
            }
            if label.is_none() && item.get("emoji").is_none() {
                let message = "This field is required";
                return Err(invalid(&at("label"), "BASE_TYPE_REQUIRED", message));
            }
            if style == 5 || style == 6 {
                continue;
            }
            let id = item["custom_id"].as_str().unwrap_or_default();
            if !(1..=100).contains(&id.chars().count()) {
                let message = "Must be between 1 and 100 in length.";
                return Err(invalid(&at("custom_id"), "BASE_TYPE_BAD_LENGTH", message));
            }
            if ids.iter().any(|known| known == id) {
                let message = "Component custom id cannot be duplicated";
                return Err(invalid(
                    &at("custom_id"),
                    "COMPONENT_CUSTOM_ID_DUPLICATED",
                    message,
                ));
            }
            ids.push(id.to_owned());
        }
    }
    Ok(())
}

/// A command's (or option's) name: 1-32 lower-case letters, digits, `-` or `_`; and, for a
/// slash command or option, a description of 1-100 characters.
pub(super) fn check_command(at: &str, command: &Value, described: bool) -> Result<(), Failure> {
    let name = command["name"].as_str().unwrap_or_default();
    let ok = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '-' | '_');
    if !(1..=32).contains(&name.chars().count()) || !name.chars().all(ok) {
        let message = "Command name is invalid";
        return Err(invalid(
            &format!("{at}.name"),
            "APPLICATION_COMMAND_INVALID_NAME",
            message,
        ));
    }
    let description = command["description"].as_str().unwrap_or_default();
    if described && !(1..=100).contains(&description.chars().count()) {
        let message = "Must be between 1 and 100 in length.";
        return Err(invalid(
            &format!("{at}.description"),
            "BASE_TYPE_BAD_LENGTH",
            message,
        ));
    }
    Ok(())
}
