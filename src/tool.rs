//! One tool, as every tool of the gateway and every MCP server's tool is one: the
//! [`Tool`] trait (name, toolset, JSON schema, availability, whether a call only reads,
//! and the run), what a run is given ([`ToolContext`]: the turn's chat, author and
//! cancellation) and what it answers ([`ToolResult`]). The registry and the gateway's own
//! tools are in `tools`; this module depends on none of them, so MCP and the agent can
//! name a tool without reaching into the registry.

use std::sync::Arc;

use futures_util::future::BoxFuture;
use hermes_adapter::{Author, ChatRef};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::approval::CheckContext;

/// What a tool knows about the turn that called it.
#[derive(Clone)]
pub struct ToolContext {
    pub session_key: String,
    /// The open session's id (its todo list, its own search results).
    pub session_id: String,
    pub chat: ChatRef,
    pub author: Author,
    /// Cancelled by `/stop`, an interrupting message, `/new` or shutdown.
    pub cancel: CancellationToken,
    /// Cancelled when the person sends anything while the turn runs (`process wait` returns).
    pub attention: CancellationToken,
    /// Where the tokens of model calls made for this turn are added up (a sub-agent's
    /// count toward the session that delegated).
    pub usage: Arc<std::sync::Mutex<crate::llm::UsageByModel>>,
    /// 0 for a person's turn; a sub-agent's turn is one deeper than the turn that
    /// delegated to it (and is offered fewer tools, see `tools::CHILD_BLOCKED`).
    pub depth: u32,
}

impl ToolContext {
    /// What the approval broker needs to know of this turn, for work in `workdir`.
    pub fn check<'a>(&'a self, workdir: &'a std::path::Path, background: bool) -> CheckContext<'a> {
        CheckContext {
            session_key: &self.session_key,
            chat: &self.chat,
            cancel: &self.cancel,
            workdir,
            background,
        }
    }

    /// A turn in a Telegram DM, for tests of single tools.
    #[cfg(test)]
    pub(crate) fn for_tests() -> ToolContext {
        ToolContext {
            session_key: "test".into(),
            session_id: "s-test".into(),
            chat: ChatRef {
                platform: hermes_adapter::Platform::Telegram,
                account: None,
                chat_id: "1".into(),
                thread_id: None,
                kind: hermes_adapter::ChatKind::Direct,
            },
            author: Author {
                user_id: "1".into(),
                display_name: "Tess".into(),
                username: None,
                is_bot: false,
            },
            cancel: CancellationToken::new(),
            attention: CancellationToken::new(),
            usage: Default::default(),
            depth: 0,
        }
    }
}

/// One tool the model can call.
pub trait Tool: Send + Sync {
    fn name(&self) -> &'static str;
    /// Hermes' toolset it belongs to (`terminal`, `file`, `todo`, `memory`…).
    fn toolset(&self) -> &'static str;
    /// The OpenAI function definition offered to the model.
    fn definition(&self) -> Value;
    /// Why the tool cannot be offered now (a missing key or binary), if so.
    fn unavailable(&self) -> Option<String> {
        None
    }
    /// Whether the tool is offered in this turn (beyond toolsets and availability).
    fn offered_in(&self, _ctx: &ToolContext) -> bool {
        true
    }
    /// Whether this call only reads, so it may run alongside the step's other reading
    /// calls.
    fn reads_only(&self, _args: &Value) -> bool {
        false
    }
    /// The one file this call works on (links followed), when it works on one file only:
    /// such calls run together when their paths do not overlap (Hermes' path-scoped
    /// `read_file`, `write_file`, `patch`). It may touch the filesystem, so it is called
    /// off the runtime's threads.
    fn path_scope(&self, _args: &Value) -> Option<std::path::PathBuf> {
        None
    }
    fn run<'a>(&'a self, args: Value, ctx: &'a ToolContext) -> BoxFuture<'a, ToolResult>;
}

/// A tool's answer to the model.
#[derive(Debug, Clone)]
pub struct ToolResult {
    pub text: String,
    /// The run was stopped by the turn's cancellation.
    pub cancelled: bool,
}

impl ToolResult {
    pub fn text(text: impl Into<String>) -> Self {
        ToolResult {
            text: text.into(),
            cancelled: false,
        }
    }
}
