//! Block Kit as Slack checks it: at most 50 blocks, known block types, text objects of the
//! right type and length (section 3,000, header 150, button label 75, markdown 12,000 in
//! all), 1 to 25 elements in an `actions` block, unique `block_id`s and `action_id`s;
//! `invalid_blocks` naming the first problem the way Slack does (`… [json-pointer:/blocks/0/text]`).

use std::collections::HashSet;

use serde_json::{Value, json};

use super::api::{Answer, fail, failure};

/// `invalid_blocks` with Slack's message for the first problem found.
pub(super) fn validate_blocks(blocks: &Value) -> Result<(), Answer> {
    let Some(list) = blocks.as_array() else {
        return Err(fail("invalid_blocks_format"));
    };
    match blocks_problem(list) {
        None => Ok(()),
        Some(problem) => Err(failure(json!({
            "ok": false, "error": "invalid_blocks", "errors": [problem],
            "response_metadata": {"messages": [format!("[ERROR] {problem}")]},
        }))),
    }
}

/// A text object: its type allowed, its text 1..=`max` characters.
fn text_problem(t: &Value, at: &str, max: usize, plain_only: bool) -> Option<String> {
    let kind = t["type"].as_str();
    let allowed = kind == Some("plain_text") || (!plain_only && kind == Some("mrkdwn"));
    if !allowed {
        return Some(format!(
            "must be a valid enum value [json-pointer:{at}/type]"
        ));
    }
    let Some(text) = t["text"].as_str() else {
        return Some(format!("missing required field: text [json-pointer:{at}]"));
    };
    let length = text.chars().count();
    if length == 0 {
        return Some(format!(
            "must be more than 0 characters [json-pointer:{at}/text]"
        ));
    }
    (length > max).then(|| {
        format!(
            "must be less than {} characters [json-pointer:{at}/text]",
            max + 1
        )
    })
}

fn too_long(v: &Value, max: usize) -> bool {
    v.as_str().is_some_and(|s| s.chars().count() > max)
}

/// The first problem Slack would name in `blocks`, if any.
fn blocks_problem(list: &[Value]) -> Option<String> {
    if list.len() > 50 {
        return Some("no more than 50 items allowed [json-pointer:/blocks]".into());
    }
    let mut block_ids = HashSet::new();
    let mut markdown = 0;
    for (i, b) in list.iter().enumerate() {
        let at = format!("/blocks/{i}");
        let Some(kind) = b["type"].as_str() else {
            return Some(format!("missing required field: type [json-pointer:{at}]"));
        };
        if let Some(id) = b.get("block_id") {
            let Some(id) = id.as_str().filter(|id| !id.is_empty() && id.len() <= 255) else {
                return Some(format!(
                    "must be a string of 1 to 255 characters [json-pointer:{at}/block_id]"
                ));
            };
            if !block_ids.insert(id.to_owned()) {
                return Some(format!("duplicate block_id [json-pointer:{at}/block_id]"));
            }
        }
        let problem = match kind {
            "section" => {
                let fields = b["fields"].as_array();
                if b.get("text").is_none() && fields.is_none() {
                    Some(format!(
                        "must provide either text or fields [json-pointer:{at}]"
                    ))
                } else if let Some(p) = b
                    .get("text")
                    .and_then(|t| text_problem(t, &format!("{at}/text"), 3000, false))
                {
                    Some(p)
                } else if fields.is_some_and(|f| f.len() > 10) {
                    Some(format!(
                        "no more than 10 items allowed [json-pointer:{at}/fields]"
                    ))
                } else {
                    let fields = fields.into_iter().flatten().enumerate();
                    fields
                        .filter_map(|(j, f)| {
                            text_problem(f, &format!("{at}/fields/{j}"), 2000, false)
                        })
                        .next()
                }
            }
            "header" => text_problem(&b["text"], &format!("{at}/text"), 150, true),
            "markdown" => {
                markdown += b["text"].as_str().map_or(0, |t| t.chars().count());
                match b["text"].as_str() {
                    None | Some("") => Some(format!(
                        "must be more than 0 characters [json-pointer:{at}/text]"
                    )),
                    Some(_) if markdown > 12_000 => Some(format!(
                        "cumulative length of markdown blocks must be less than 12001 characters [json-pointer:{at}/text]"
                    )),
                    Some(_) => None,
                }
            }
            "actions" => actions_problem(b, &at),
            "context" => match b["elements"].as_array() {
                Some(e) if !e.is_empty() && e.len() <= 10 => None,
                _ => Some(format!(
                    "must provide 1 to 10 elements [json-pointer:{at}/elements]"
                )),
            },
            "divider" | "image" | "rich_text" | "input" | "file" | "video" | "table" => None,
            other => Some(format!(
                "unsupported block type {other:?} [json-pointer:{at}/type]"
            )),
        };
        if problem.is_some() {
            return problem;
        }
    }
    None
}

fn actions_problem(b: &Value, at: &str) -> Option<String> {
    let elements = match b["elements"].as_array() {
        Some(e) if !e.is_empty() && e.len() <= 25 => e,
        _ => {
            return Some(format!(
                "must provide 1 to 25 elements [json-pointer:{at}/elements]"
            ));
        }
    };
    let mut action_ids = HashSet::new();
    for (j, e) in elements.iter().enumerate() {
        let at = format!("{at}/elements/{j}");
        if let Some(id) = e.get("action_id") {
            if id.as_str().is_none_or(|id| id.is_empty()) || too_long(id, 255) {
                return Some(format!(
                    "must be a string of 1 to 255 characters [json-pointer:{at}/action_id]"
                ));
            }
            if !action_ids.insert(id.to_string()) {
                return Some(format!("duplicate action_id [json-pointer:{at}/action_id]"));
            }
        }
        if e["type"] != "button" {
            continue;
        }
        if let Some(p) = text_problem(&e["text"], &format!("{at}/text"), 75, true) {
            return Some(p);
        }
        if too_long(&e["value"], 2000) {
            return Some(format!(
                "must be less than 2001 characters [json-pointer:{at}/value]"
            ));
        }
        let style = e.get("style").map(|s| s.as_str());
        if style.is_some_and(|s| !matches!(s, Some("primary" | "danger"))) {
            return Some(format!(
                "must be a valid enum value [json-pointer:{at}/style]"
            ));
        }
    }
    None
}
