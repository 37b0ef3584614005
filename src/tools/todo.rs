//! `todo {todos, merge}` with Hermes' semantics: the session's task list, kept in the
//! store so it lasts across turns and restarts. Without `todos` it is read; with them it is
//! replaced (`merge` false) or updated by id (`merge` true: known ids changed, new ones
//! appended). Items are `{id, content, status}`; statuses pending, in_progress, completed,
//! cancelled (anything else is pending); a missing id is `?`, empty content
//! `(no description)`; the last of duplicate ids wins; at most 256 items of 4,000
//! characters. The answer is the list with a summary by status.

use futures_util::future::BoxFuture;
use serde_json::{Map, Value, json};

use super::{Tool, ToolContext, ToolResult};
use crate::store::Store;

const MAX_ITEMS: usize = 256;
const MAX_ITEM_CHARS: usize = 4_000;
const STATUSES: [&str; 4] = ["pending", "in_progress", "completed", "cancelled"];

pub struct TodoTool(pub Store);

impl Tool for TodoTool {
    fn name(&self) -> &'static str {
        "todo"
    }

    fn toolset(&self) -> &'static str {
        "todo"
    }

    fn definition(&self) -> Value {
        json!({
            "type": "function",
            "function": {
                "name": self.name(),
                "description": "Your task list for this conversation: plan multi-step work and track it. Call without todos to read it. With todos: merge=false replaces the list, merge=true updates items by id and adds new ones. Keep one item in_progress at a time; order is priority.",
                "parameters": {
                    "type": "object",
                    "properties": {
                        "todos": {
                            "type": "array",
                            "items": {
                                "type": "object",
                                "properties": {
                                    "id": {"type": "string"},
                                    "content": {"type": "string"},
                                    "status": {"type": "string", "enum": STATUSES}
                                },
                                "required": ["id", "content", "status"]
                            }
                        },
                        "merge": {"type": "boolean", "description": "Update by id instead of replacing (default false)."}
                    }
                }
            }
        })
    }

    fn reads_only(&self, args: &Value) -> bool {
        args.get("todos").is_none()
    }

    fn run<'a>(&'a self, args: Value, ctx: &'a ToolContext) -> BoxFuture<'a, ToolResult> {
        Box::pin(async move {
            let stored = match self.0.todos(&ctx.session_id).await {
                Ok(items) => items,
                Err(e) => return ToolResult::text(format!("error: the list cannot be read: {e}")),
            };
            let mut list: Vec<Value> = stored
                .and_then(|t| serde_json::from_str(&t).ok())
                .unwrap_or_default();
            if let Some(given) = args.get("todos") {
                let Some(given) = given.as_array() else {
                    return ToolResult::text(
                        "error: `todos` must be a list of {id, content, status}",
                    );
                };
                let merge = args.get("merge").and_then(Value::as_bool).unwrap_or(false);
                list = update(if merge { list } else { Vec::new() }, given);
                if let Err(e) = self
                    .0
                    .set_todos(&ctx.session_id, Value::Array(list.clone()).to_string())
                    .await
                {
                    return ToolResult::text(format!("error: the list cannot be saved: {e}"));
                }
            }
            ToolResult::text(answer(&list))
        })
    }
}

/// `list` with `given` applied: known ids updated in place, new ones appended, duplicates
/// resolved to the last.
fn update(mut list: Vec<Value>, given: &[Value]) -> Vec<Value> {
    for item in given.iter().map(normalise) {
        match list.iter_mut().find(|i| i["id"] == item["id"]) {
            Some(existing) => *existing = item,
            None => list.push(item),
        }
    }
    list.truncate(MAX_ITEMS);
    list
}

/// One item as Hermes keeps it.
fn normalise(item: &Value) -> Value {
    let text = |key: &str| match item.get(key) {
        Some(Value::String(s)) => s.trim().to_owned(),
        Some(Value::Number(n)) => n.to_string(),
        _ => String::new(),
    };
    let id = text("id");
    let mut content: String = text("content").chars().take(MAX_ITEM_CHARS).collect();
    if content.is_empty() {
        content = "(no description)".into();
    }
    let status = text("status");
    let status = if STATUSES.contains(&status.as_str()) {
        status
    } else {
        "pending".into()
    };
    let mut out = Map::new();
    out.insert(
        "id".into(),
        json!(if id.is_empty() { "?".into() } else { id }),
    );
    out.insert("content".into(), json!(content));
    out.insert("status".into(), json!(status));
    Value::Object(out)
}

fn answer(list: &[Value]) -> String {
    let count = |status: &str| list.iter().filter(|i| i["status"] == status).count();
    json!({
        "todos": list,
        "summary": {
            "total": list.len(),
            "pending": count("pending"),
            "in_progress": count("in_progress"),
            "completed": count("completed"),
            "cancelled": count("cancelled"),
        }
    })
    .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn items_are_merged_by_id_and_cleaned_as_hermes_does() {
        let list = update(
            Vec::new(),
            &[
                json!({"id": "1", "content": "plan", "status": "in_progress"}),
                json!({"id": "2", "content": "", "status": "later"}),
                json!({"content": "no id"}),
            ],
        );
        assert_eq!(list[1]["content"], "(no description)");
        assert_eq!(list[1]["status"], "pending");
        assert_eq!(list[2]["id"], "?");
        let merged = update(
            list,
            &[
                json!({"id": "1", "content": "plan", "status": "completed"}),
                json!({"id": "3", "content": "ship", "status": "pending"}),
            ],
        );
        let ids: Vec<&str> = merged.iter().map(|i| i["id"].as_str().unwrap()).collect();
        assert_eq!(ids, ["1", "2", "?", "3"]);
        assert_eq!(merged[0]["status"], "completed");
        let summary: Value = serde_json::from_str(&answer(&merged)).unwrap();
        assert_eq!(summary["summary"]["completed"], 1);
        assert_eq!(summary["summary"]["total"], 4);
    }
}
