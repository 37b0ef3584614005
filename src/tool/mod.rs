//! One tool, as every tool of the gateway and every MCP server's tool is one: the
//! [`Tool`] trait (name, toolset, JSON schema, availability, whether a call only reads,
//! and the run), what a run is given ([`ToolContext`]: the turn's chat, author and
//! cancellation) and what it answers ([`ToolResult`]). The gateway's own tools are each
//! declared once as a [`TypedTool`]: a name, a description and a Rust type for the
//! arguments, from which the schema is derived and into which the model's arguments are
//! read ([`args`]). The registry and the tools are in `tools`; this module depends on none
//! of them, so MCP and the agent can name a tool without reaching into the registry.

pub mod args;

use std::sync::Arc;

use futures_util::future::BoxFuture;
use hermes_adapter::{Author, ChatRef};
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
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
    /// A sub-agent given Hermes' `role: orchestrator` (and the depth for it): it may
    /// delegate again. A leaf may not.
    pub orchestrator: bool,
    /// The model the turn answers with now (the chat's choice, or the fallback that took
    /// over): sub-agents run on it. `None`: the main model.
    pub model: Option<Arc<crate::llm::LlmClient>>,
}

impl ToolContext {
    /// A person's turn (depth 0, on the main model until the turn says otherwise) in
    /// session `session_id` under `session_key`, cancelled by `cancel`.
    pub fn person_turn(
        session_key: String,
        session_id: String,
        chat: ChatRef,
        author: Author,
        cancel: CancellationToken,
    ) -> ToolContext {
        ToolContext {
            session_key,
            session_id,
            chat,
            author,
            cancel,
            attention: CancellationToken::new(),
            usage: Default::default(),
            depth: 0,
            orchestrator: false,
            model: None,
        }
    }

    /// What the approval broker needs to know of this turn, for work in `workdir`.
    pub fn check<'a>(&'a self, workdir: &'a std::path::Path, background: bool) -> CheckContext<'a> {
        CheckContext {
            session_key: &self.session_key,
            chat: &self.chat,
            asker: &self.author,
            cancel: &self.cancel,
            workdir,
            background,
        }
    }

    /// A turn in a Telegram DM, for tests of single tools.
    #[cfg(test)]
    pub(crate) fn for_tests() -> ToolContext {
        ToolContext::person_turn(
            "test".into(),
            "s-test".into(),
            ChatRef {
                platform: hermes_adapter::Platform::Telegram,
                account: None,
                chat_id: "1".into(),
                thread_id: None,
                kind: hermes_adapter::ChatKind::Direct,
            },
            Author {
                user_id: "1".into(),
                display_name: "Tess".into(),
                username: None,
                is_bot: false,
            },
            CancellationToken::new(),
        )
    }
}

/// One tool the model can call.
pub trait Tool: Send + Sync {
    fn name(&self) -> &'static str;
    /// Hermes' toolset it belongs to (`terminal`, `file`, `todo`, `memory`…).
    fn toolset(&self) -> &'static str;
    /// The OpenAI function definition offered to the model. Fixed for the life of the
    /// tool: the toolbox makes it once per set of offered tools and shares it.
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

/// A gateway tool, declared once: its name, toolset and description, and its arguments as
/// a type whose JSON schema is derived ([`args::parameters`]) and into which the model's
/// arguments are read after Hermes' repairs ([`args::read`]). Every `TypedTool` is a
/// [`Tool`]; a call whose arguments do not fit is answered with an error naming the
/// argument, and never reaches [`TypedTool::call`].
pub trait TypedTool: Send + Sync + 'static {
    /// The arguments, as `serde` reads them and `schemars` describes them (field docs are
    /// the descriptions the model reads).
    type Args: DeserializeOwned + JsonSchema + Send + 'static;
    const NAME: &'static str;
    /// Hermes' toolset it belongs to (`terminal`, `file`, `todo`, `memory`…).
    const TOOLSET: &'static str;
    /// What the model is told the tool does.
    fn description(&self) -> String;
    /// Why the tool cannot be offered now (a missing key or binary), if so.
    fn why_unavailable(&self) -> Option<String> {
        None
    }
    /// Whether the tool is offered in this turn (beyond toolsets and availability).
    fn offered_to(&self, _ctx: &ToolContext) -> bool {
        true
    }
    /// Whether this call only reads (see [`Tool::reads_only`]).
    fn only_reads(&self, _args: &Self::Args) -> bool {
        false
    }
    /// The one file this call works on (see [`Tool::path_scope`]).
    fn file_scope(&self, _args: &Self::Args) -> Option<std::path::PathBuf> {
        None
    }
    fn call<'a>(&'a self, args: Self::Args, ctx: &'a ToolContext) -> BoxFuture<'a, ToolResult>;
}

impl<T: TypedTool> Tool for T {
    fn name(&self) -> &'static str {
        T::NAME
    }

    fn toolset(&self) -> &'static str {
        T::TOOLSET
    }

    fn definition(&self) -> Value {
        json!({
            "type": "function",
            "function": {
                "name": T::NAME,
                "description": self.description(),
                "parameters": args::parameters::<T::Args>().clone(),
            }
        })
    }

    fn unavailable(&self) -> Option<String> {
        self.why_unavailable()
    }

    fn offered_in(&self, ctx: &ToolContext) -> bool {
        self.offered_to(ctx)
    }

    fn reads_only(&self, args: &Value) -> bool {
        read_args::<T>(args.clone()).is_ok_and(|a| self.only_reads(&a))
    }

    fn path_scope(&self, args: &Value) -> Option<std::path::PathBuf> {
        read_args::<T>(args.clone())
            .ok()
            .and_then(|a| self.file_scope(&a))
    }

    fn run<'a>(&'a self, args: Value, ctx: &'a ToolContext) -> BoxFuture<'a, ToolResult> {
        match read_args::<T>(args) {
            Ok(args) => self.call(args, ctx),
            Err(e) => Box::pin(std::future::ready(ToolResult::text(e))),
        }
    }
}

/// `args` read into `T`'s argument type, or the error the model is answered with.
fn read_args<T: TypedTool>(args: Value) -> Result<T::Args, String> {
    args::read::<T::Args>(args, args::parameters::<T::Args>()).map_err(|e| format!("error: {e}"))
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    /// A tool that counts its calls and answers with what it was given.
    #[derive(Default)]
    struct Sleep {
        calls: AtomicUsize,
    }

    #[derive(serde::Deserialize, JsonSchema)]
    struct SleepArgs {
        /// Seconds.
        seconds: u64,
        /// Only pretend.
        dry_run: Option<bool>,
    }

    impl TypedTool for Sleep {
        type Args = SleepArgs;
        const NAME: &'static str = "sleep";
        const TOOLSET: &'static str = "test";

        fn description(&self) -> String {
            "Sleep a while.".into()
        }

        fn only_reads(&self, args: &SleepArgs) -> bool {
            args.dry_run == Some(true)
        }

        fn call<'a>(&'a self, args: SleepArgs, _ctx: &'a ToolContext) -> BoxFuture<'a, ToolResult> {
            self.calls.fetch_add(1, Ordering::SeqCst);
            Box::pin(std::future::ready(ToolResult::text(format!(
                "slept {}",
                args.seconds
            ))))
        }
    }

    #[tokio::test]
    async fn a_typed_tool_is_offered_with_its_derived_schema_and_called_with_repaired_arguments() {
        let tool = Sleep::default();
        let ctx = ToolContext::for_tests();
        let definition = tool.definition();
        assert_eq!(definition["function"]["name"], "sleep");
        assert_eq!(definition["function"]["description"], "Sleep a while.");
        assert_eq!(
            definition["function"]["parameters"]["properties"]["seconds"]["description"],
            "Seconds."
        );
        assert_eq!(
            definition["function"]["parameters"]["required"],
            json!(["seconds"])
        );
        assert_eq!(
            tool.run(json!({"seconds": "3"}), &ctx).await.text,
            "slept 3"
        );
        assert!(tool.reads_only(&json!({"seconds": 1, "dry_run": "true"})));
        assert!(!tool.reads_only(&json!({"seconds": 1})));
        assert!(
            !tool.reads_only(&json!({"dry_run": true})),
            "unreadable: not a read"
        );
    }

    #[tokio::test]
    async fn arguments_that_do_not_fit_are_answered_with_an_error_and_never_reach_the_tool() {
        let tool = Sleep::default();
        let ctx = ToolContext::for_tests();
        assert_eq!(
            tool.run(json!({}), &ctx).await.text,
            "error: `seconds` is required"
        );
        let wrong = tool.run(json!({"seconds": "soon"}), &ctx).await.text;
        assert!(
            wrong.starts_with("error: `seconds`: invalid type"),
            "{wrong}"
        );
        assert_eq!(tool.calls.load(Ordering::SeqCst), 0);
    }
}
