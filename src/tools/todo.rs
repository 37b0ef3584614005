//! `todo {todos, merge}` with Hermes' semantics: the session's task list, kept in the
//! store so it lasts across turns and restarts. Without `todos` it is read; with them it is
//! replaced (`merge` false) or updated by id (`merge` true: known ids changed, new ones
//! appended). Items are `{id, content, status}`; statuses pending, in_progress, completed,
//! cancelled (anything else is pending); a missing id is `?`, empty content
//! `(no description)`; the last of duplicate ids wins; at most 256 items of 4,000
//! characters. The answer is the list with a summary by status.

use futures_util::future::BoxFuture;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::store::Store;
use crate::tool::{ToolContext, ToolResult, TypedTool};

const MAX_ITEMS: usize = 256;
const MAX_ITEM_CHARS: usize = 4_000;
const STATUSES: [&str; 4] = ["pending", "in_progress", "completed", "cancelled"];

pub struct TodoTool(pub Store);

/// `todo`'s arguments.
#[derive(Deserialize, JsonSchema)]
pub struct TodoArgs {
    todos: Option<Vec<TodoItem>>,
    /// Update by id instead of replacing (default false).
    merge: Option<bool>,
}

/// One item as the model sends it. Hermes declares every key required but keeps an item
/// that misses one (see [`normalise`]), so they are read as optional.
#[derive(Deserialize, JsonSchema)]
#[schemars(extend("required" = ["id", "content", "status"]))]
struct TodoItem {
    id: Option<String>,
    content: Option<String>,
    #[schemars(extend("enum" = STATUSES))]
    status: Option<String>,
}

impl TypedTool for TodoTool {
    type Args = TodoArgs;
    const NAME: &'static str = "todo";
    const TOOLSET: &'static str = "todo";

    fn description(&self) -> String {
        "Your task list for this conversation: plan multi-step work and track it. Call without todos to read it. With todos: merge=false replaces the list, merge=true updates items by id and adds new ones. Keep one item in_progress at a time; order is priority.".into()
    }

    fn only_reads(&self, args: &TodoArgs) -> bool {
        args.todos.is_none()
    }

    fn call<'a>(&'a self, args: TodoArgs, ctx: &'a ToolContext) -> BoxFuture<'a, ToolResult> {
        Box::pin(async move {
            let stored = match self.0.todos(&ctx.session_id).await {
                Ok(items) => items,
                Err(e) => return ToolResult::text(format!("error: the list cannot be read: {e}")),
            };
            let mut list: Vec<Value> = stored
                .and_then(|t| serde_json::from_str(&t).ok())
                .unwrap_or_default();
            if let Some(given) = args.todos {
                let merge = args.merge.unwrap_or(false);
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
fn update(mut list: Vec<Value>, given: Vec<TodoItem>) -> Vec<Value> {
    for item in given.into_iter().map(normalise) {
        match list.iter_mut().find(|i| i["id"] == item["id"]) {
            Some(existing) => *existing = item,
            None => list.push(item),
        }
    }
    list.truncate(MAX_ITEMS);
    list
}

/// One item as Hermes keeps it.
fn normalise(item: TodoItem) -> Value {
    let text = |given: Option<String>| given.map(|s| s.trim().to_owned()).unwrap_or_default();
    let id = text(item.id);
    let mut content: String = text(item.content).chars().take(MAX_ITEM_CHARS).collect();
    if content.is_empty() {
        content = "(no description)".into();
    }
    let status = text(item.status);
    let status = if STATUSES.contains(&status.as_str()) {
        status
    } else {
        "pending".into()
    };
    json!({
        "id": if id.is_empty() { "?".into() } else { id },
        "content": content,
        "status": status,
    })
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

    fn items(given: &[Value]) -> Vec<TodoItem> {
        given
            .iter()
            .map(|v| serde_json::from_value(v.clone()).unwrap())
            .collect()
    }

    #[test]
    fn items_are_merged_by_id_and_cleaned_as_hermes_does() {
        let list = update(
            Vec::new(),
            items(&[
                json!({"id": "1", "content": "plan", "status": "in_progress"}),
                json!({"id": "2", "content": "", "status": "later"}),
                json!({"content": "no id"}),
            ]),
        );
        assert_eq!(list[1]["content"], "(no description)");
        assert_eq!(list[1]["status"], "pending");
        assert_eq!(list[2]["id"], "?");
        let merged = update(
            list,
            items(&[
                json!({"id": "1", "content": "plan", "status": "completed"}),
                json!({"id": "3", "content": "ship", "status": "pending"}),
            ]),
        );
        let ids: Vec<&str> = merged.iter().map(|i| i["id"].as_str().unwrap()).collect();
        assert_eq!(ids, ["1", "2", "?", "3"]);
        assert_eq!(merged[0]["status"], "completed");
        let summary: Value = serde_json::from_str(&answer(&merged)).unwrap();
        assert_eq!(summary["summary"]["completed"], 1);
        assert_eq!(summary["summary"]["total"], 4);
    }
}
