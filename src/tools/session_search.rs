//! `session_search {query, limit}`: the person's own earlier conversations on this
//! platform that mention the words, best first, one line each with the session's title,
//! its date and the best matching text; the current conversation's earlier part that
//! compression summarised (or `/undo` took back) is searched too, since the model no
//! longer sees it. Other people's conversations are never searched, and outside a direct
//! chat only that chat's.

use futures_util::future::BoxFuture;
use schemars::JsonSchema;
use serde::Deserialize;

use crate::store::Store;
use crate::tool::{ToolContext, ToolResult, TypedTool};

pub struct SessionSearchTool(pub Store);

/// `session_search`'s arguments.
#[derive(Deserialize, JsonSchema)]
pub struct SessionSearchArgs {
    /// Words to look for (all must appear).
    query: String,
    /// How many sessions (default 3, at most 10).
    limit: Option<u64>,
}

impl TypedTool for SessionSearchTool {
    type Args = SessionSearchArgs;
    const NAME: &'static str = "session_search";
    const TOOLSET: &'static str = "session_search";

    fn description(&self) -> String {
        "Search this person's earlier conversations with you, and the earlier part of this one that was summarised, for words, to recall what was said or decided. Answers with the matching sessions, best first.".into()
    }

    fn only_reads(&self, _args: &SessionSearchArgs) -> bool {
        true
    }

    fn call<'a>(
        &'a self,
        args: SessionSearchArgs,
        ctx: &'a ToolContext,
    ) -> BoxFuture<'a, ToolResult> {
        Box::pin(async move {
            let query = args.query.as_str();
            if query.trim().is_empty() {
                return ToolResult::text("error: `query` is required");
            }
            let limit = args.limit.unwrap_or(3).clamp(1, 10) as usize;
            let hits = match self
                .0
                .search_own_sessions(
                    query,
                    ctx.chat.platform.as_str(),
                    &ctx.author.user_id,
                    &ctx.session_id,
                    // Outside a direct chat, only this chat's sessions: a group never
                    // hears what was said in private.
                    (ctx.chat.kind != hermes_adapter::ChatKind::Direct)
                        .then_some(ctx.chat.chat_id.as_str()),
                    limit,
                )
                .await
            {
                Ok(hits) => hits,
                Err(e) => return ToolResult::text(format!("error: the search failed: {e}")),
            };
            if hits.is_empty() {
                return ToolResult::text(format!("No earlier conversation mentions {query:?}."));
            }
            let lines: Vec<String> = hits
                .iter()
                .map(|h| {
                    let title = if h.session_id == ctx.session_id {
                        "this conversation, its summarised earlier part"
                    } else {
                        h.title.as_deref().unwrap_or("untitled")
                    };
                    format!(
                        "- {title} ({}): {}",
                        day(h.started_at),
                        h.snippet.replace('\n', " ")
                    )
                })
                .collect();
            ToolResult::text(lines.join("\n"))
        })
    }
}

/// A UTC day as `YYYY-MM-DD` (session ids carry the same).
fn day(ms: i64) -> String {
    let days = ms.div_euclid(86_400_000);
    let (y, m, d) = crate::store::civil_from_days(days);
    format!("{y:04}-{m:02}-{d:02}")
}
