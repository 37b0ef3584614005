//! The agent's tools, as Hermes organises them: a registry of [`Tool`]s, each with its
//! name, toolset, JSON schema, availability (a tool whose key or binary is missing is not
//! offered) and whether a call only reads (so a step's reading calls run together). Every
//! tool run gets the turn's [`ToolContext`], so an interrupt or `/stop` reaches running
//! work; a dangerous command or a write to a sensitive file passes the approval broker
//! first ([`gate`]); a failure reaches the model as an error result, never a crashed turn.

mod batch;
pub mod clarify;
mod code;
mod cronjob;
pub mod delegate;
mod files;
pub mod memory;
pub(crate) mod output;
mod process_tool;
mod send_message;
mod session_search;
mod shell_tools;
pub mod skills;
pub mod speech;
pub mod terminal;
mod todo;
pub mod web;

use std::sync::Arc;

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::approval::{ApprovalBroker, Gate};
use crate::config::TerminalConfig;
use crate::llm::{ToolCall, ToolDefinitions};
use crate::process::ProcessRegistry;
pub use crate::tool::{Tool, ToolContext, ToolResult};
pub use shell_tools::Shell;

/// Tools a sub-agent never gets (Hermes: it has no memory, cannot ask the person, send
/// messages, schedule work or run scripts).
const CHILD_BLOCKED: [&str; 5] = [
    "memory",
    "clarify",
    "send_message",
    "cronjob",
    "execute_code",
];

/// What the tools are built from.
pub struct ToolDeps {
    pub terminal: TerminalConfig,
    /// Names of secret variables, kept from commands.
    pub secret_env_names: Vec<String>,
    pub approvals: Arc<ApprovalBroker>,
    pub processes: Arc<ProcessRegistry>,
    pub store: crate::store::Store,
    /// `$HERMES_HOME` (skills, code staging).
    pub home: std::path::PathBuf,
    /// Where each person's memories are.
    pub memory: memory::MemoryPlaces,
    /// Which toolsets each platform offers.
    pub toolsets: crate::config::ToolsetsConfig,
    /// The scheduler's jobs.
    pub cron: Arc<crate::cron::Cron>,
    /// Sends for `send_message`.
    pub delivery: crate::delivery::Delivery,
    /// The configured home channels.
    pub homes: Arc<crate::delivery::destinations::ConfiguredHomes>,
    /// Questions waiting for the person.
    pub clarify: Arc<clarify::Clarify>,
    /// The web search service (`web_search`, `web_extract`; hidden without a key).
    pub web: Arc<web::Web>,
    /// `code_execution.*` (`execute_code`).
    pub code_execution: crate::config::CodeExecutionConfig,
    /// `delegation.*` (`delegate_task`).
    pub delegation: crate::config::DelegationConfig,
    /// The runtime these tools belong to (sub-agents run on it).
    pub agent: std::sync::Weak<dyn delegate::SubAgents>,
    /// Delegations running in the background.
    pub delegations: Arc<delegate::Delegations>,
    /// Files named in messages (`send_message`).
    pub media: Arc<crate::media::MediaPreparer>,
    /// Where the agent's commands run (`terminal`, `process`, `execute_code`).
    pub confinement: Arc<crate::confine::Confinement>,
}

/// The confinement as the tools that start processes use it.
#[derive(Clone)]
pub struct Confined {
    pub confinement: Arc<crate::confine::Confinement>,
    /// Where the person is told, once per session, that commands cannot run here.
    pub delivery: crate::delivery::Delivery,
}

impl Confined {
    /// How a command of this turn's session is confined; when it may not run at all, the
    /// tool's error instead (and the person hears of it once).
    pub async fn sandbox(&self, ctx: &ToolContext) -> Result<crate::confine::Sandbox, String> {
        match self.confinement.sandbox(&ctx.session_key).await {
            Ok(sandbox) => Ok(sandbox),
            Err(refused) => {
                if self.confinement.first_refusal(&ctx.session_key) {
                    let text = format!(
                        "⚠️ I cannot run commands here: {refused}. The operator can see why with `hermes-gateway check-config`."
                    );
                    if let Err(e) = self.delivery.reply(&ctx.chat, &text, None).await {
                        tracing::error!(error = %e, "confine: could not queue the notice");
                    }
                }
                Err(refused.to_string())
            }
        }
    }
}

/// The tools offered to the model.
pub struct Toolbox {
    tools: Vec<Arc<dyn Tool>>,
    /// Their names, each written once, by its tool (name repair, metrics labels).
    names: Vec<&'static str>,
    toolsets: crate::config::ToolsetsConfig,
    /// The MCP servers' tools, as they come and go.
    mcp: Option<Arc<crate::mcp::Mcp>>,
    /// The definitions made for each set of offered tools seen, shared by the turns that
    /// offer that set (see [`Toolbox::definitions`]).
    made: std::sync::Mutex<Vec<Made>>,
}

/// Definitions made once: the tools they are of (held, so a tool dropped and another
/// made at its address cannot be mistaken for it) and the definitions.
struct Made {
    tools: Vec<Arc<dyn Tool>>,
    definitions: ToolDefinitions,
}

/// The sets of offered tools whose definitions are kept: a few per daemon (per platform's
/// toolsets, a sub-agent's fewer, MCP servers coming and going); past this many, they are
/// made afresh.
const MADE_KEPT: usize = 16;

impl Toolbox {
    /// The gateway's tools.
    pub fn new(deps: ToolDeps) -> Self {
        let ToolDeps {
            terminal: config,
            secret_env_names,
            approvals,
            processes,
            store,
            home,
            memory,
            toolsets,
            cron,
            delivery,
            homes,
            clarify,
            web,
            code_execution,
            delegation,
            agent,
            delegations,
            media,
            confinement,
        } = deps;
        let speaker = media.speaker.clone();
        let audio_dir = media.agent_audio_dir();
        let confined = Confined {
            confinement,
            delivery: delivery.clone(),
        };
        let mut files = files::Files::new(config.cwd.clone(), home.clone(), approvals.clone());
        if config.confine_writes {
            files = files.confined(&config.allowed_roots);
        }
        let files = Arc::new(files);
        let cwd = config.cwd.clone();
        let pass_env = config.pass_env.clone();
        let shell = Shell::new(
            terminal::Terminal::new(config, secret_env_names),
            approvals.clone(),
            processes,
            confined.clone(),
        );
        let mut tools: Vec<Arc<dyn Tool>> = vec![
            Arc::new(shell_tools::TerminalTool(shell.clone())),
            Arc::new(shell_tools::ProcessTool(shell)),
            Arc::new(files::ReadFileTool(files.clone())),
            Arc::new(files::WriteFileTool(files.clone())),
            Arc::new(files::PatchTool(files.clone())),
            Arc::new(files::SearchFilesTool(files)),
            Arc::new(todo::TodoTool(store.clone())),
            Arc::new(memory::MemoryTool::new(memory)),
            Arc::new(skills::SkillsListTool(home.clone())),
            Arc::new(clarify::ClarifyTool(clarify)),
            Arc::new(web::WebSearchTool(web.clone())),
            Arc::new(web::WebExtractTool(web)),
            Arc::new(skills::SkillViewTool(home.clone())),
            Arc::new(session_search::SessionSearchTool(store.clone())),
            Arc::new(cronjob::CronjobTool {
                cron,
                delivery: delivery.clone(),
                homes: homes.clone(),
            }),
            Arc::new(send_message::SendMessageTool {
                store: store.clone(),
                delivery,
                homes,
                media,
            }),
        ];
        let execute_code = code::ExecuteCodeTool::new(
            code_execution,
            (
                cwd,
                pass_env,
                home.join(crate::confine::layout::CODE_STAGING),
            ),
            approvals,
            confined,
            &tools,
            toolsets.clone(),
        );
        tools.push(Arc::new(execute_code));
        if let Ok(speaker) = &speaker {
            tools.push(Arc::new(speech::TextToSpeechTool {
                speaker: speaker.clone(),
                dir: audio_dir,
            }));
        }
        tools.push(Arc::new(delegate::DelegateTool {
            config: delegation,
            agent,
            background: delegations,
        }));
        Toolbox::with(toolsets, tools)
    }

    pub fn with(toolsets: crate::config::ToolsetsConfig, tools: Vec<Arc<dyn Tool>>) -> Self {
        Toolbox {
            names: tools.iter().map(|t| t.name()).collect(),
            tools,
            toolsets,
            mcp: None,
            made: Default::default(),
        }
    }

    /// The MCP servers' tools are offered too.
    pub fn with_mcp(mut self, mcp: Arc<crate::mcp::Mcp>) -> Self {
        self.mcp = Some(mcp);
        self
    }

    /// Before a turn: start what starts on first use (lazy MCP servers) and try again the
    /// servers that failed a while ago.
    pub async fn prepare(&self, cancel: &CancellationToken) {
        if let Some(mcp) = &self.mcp {
            mcp.prepare(cancel).await;
        }
    }

    /// The tools offered now in the turn `ctx` (its platform's toolsets, those available,
    /// fewer for a sub-agent), in registry order, then the MCP servers' (listed only when
    /// reached).
    fn offered<'a>(&'a self, ctx: &'a ToolContext) -> impl Iterator<Item = Arc<dyn Tool>> + 'a {
        let platform = ctx.chat.platform;
        let mcp = self
            .mcp
            .iter()
            .flat_map(|m| m.tools())
            .map(|t| t as Arc<dyn Tool>);
        self.tools.iter().cloned().chain(mcp).filter(move |t| {
            self.toolsets.offers(platform.as_str(), t.toolset())
                && t.unavailable().is_none()
                && !(ctx.depth > 0 && CHILD_BLOCKED.contains(&t.name()))
                && t.offered_in(ctx)
        })
    }

    /// The gateway's tool a model meant by `name` (see [`repair_name`]).
    pub fn repair_name(&self, name: &str) -> Option<&'static str> {
        repair_name(name, &self.names)
    }

    /// OpenAI `tools` definitions for the turn `ctx`, made once per set of offered tools
    /// and shared. A tool's definition depends only on the tool (its schema and
    /// description are fixed when it is made; an MCP server's tools are new tools when it
    /// lists them again), so the same tools always have the same definitions.
    pub fn definitions(&self, ctx: &ToolContext) -> ToolDefinitions {
        let offered: Vec<Arc<dyn Tool>> = self.offered(ctx).collect();
        let same_tools = |made: &Made| {
            made.tools.len() == offered.len()
                && made
                    .tools
                    .iter()
                    .zip(&offered)
                    .all(|(a, b)| Arc::ptr_eq(a, b))
        };
        let mut made = self.made.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(found) = made.iter().find(|m| same_tools(m)) {
            return found.definitions.clone();
        }
        let definitions = ToolDefinitions::new(offered.iter().map(|t| t.definition()).collect());
        if made.len() == MADE_KEPT {
            made.remove(0);
        }
        made.push(Made {
            tools: offered,
            definitions: definitions.clone(),
        });
        definitions
    }

    fn find(&self, name: &str, ctx: &ToolContext) -> Option<Arc<dyn Tool>> {
        self.offered(ctx).find(|t| t.name() == name)
    }

    /// Run one tool call; the result text goes back to the model.
    pub async fn run(&self, call: &ToolCall, ctx: &ToolContext) -> ToolResult {
        let result = self.dispatch(call, ctx).await;
        let outcome = if result.cancelled { "cancelled" } else { "ok" };
        // The model names tools; only the names the toolbox knows become labels.
        let label = if self.names.contains(&call.name.as_str()) {
            call.name.as_str()
        } else {
            "unknown"
        };
        crate::metrics::tool_call(label, outcome);
        result
    }

    async fn dispatch(&self, call: &ToolCall, ctx: &ToolContext) -> ToolResult {
        let raw = if call.arguments.trim().is_empty() {
            "{}"
        } else {
            &call.arguments
        };
        let args: Value = match serde_json::from_str(raw) {
            Ok(v @ Value::Object(_)) => v,
            Ok(_) => {
                return ToolResult::text(
                    "error: the arguments must be a JSON object, like {\"path\": \"notes.txt\"}",
                );
            }
            Err(e) => {
                return ToolResult::text(format!(
                    "error: the arguments are not valid JSON ({e}); send an object like {{\"command\": \"ls\"}}"
                ));
            }
        };
        match self.find(&call.name, ctx) {
            Some(tool) => tool.run(args, ctx).await,
            None => {
                let names: Vec<&str> = self.offered(ctx).map(|t| t.name()).collect();
                ToolResult::text(format!(
                    "error: there is no tool named {:?}; available: {}",
                    call.name,
                    names.join(", ")
                ))
            }
        }
    }
}

/// The approval gate for a command (or the command a file tool's work amounts to):
/// `Some(result)` when it must not run.
pub(crate) async fn gate(
    approvals: &ApprovalBroker,
    command: &str,
    ctx: &ToolContext,
    workdir: &std::path::Path,
    background: bool,
) -> Option<ToolResult> {
    gate_with(approvals, command, Vec::new(), ctx, (workdir, background)).await
}

/// [`gate`], with findings of the caller's besides the command's own.
pub(crate) async fn gate_with(
    approvals: &ApprovalBroker,
    command: &str,
    extra: Vec<crate::approval::detect::Danger>,
    ctx: &ToolContext,
    (workdir, background): (&std::path::Path, bool),
) -> Option<ToolResult> {
    match approvals
        .check_with(ctx.check(workdir, background), command, extra)
        .await
    {
        Gate::Run => None,
        Gate::Refused(why) => Some(ToolResult {
            text: why,
            cancelled: ctx.cancel.is_cancelled(),
        }),
    }
}

/// The tool a model meant by `name` among `known`, as Hermes repairs names: cut at the
/// first quote or angle bracket, lower case, `-` and spaces as `_`, CamelCase as
/// snake_case, a trailing `_tool` or `tool` dropped; then the closest known name if it is
/// close enough.
fn repair_name(name: &str, known: &[&'static str]) -> Option<&'static str> {
    let cut = name
        .split(['"', '\'', '<', '>'])
        .next()
        .unwrap_or_default()
        .trim();
    let mut snake = String::new();
    for (i, c) in cut.chars().enumerate() {
        if c.is_uppercase() && i > 0 && !snake.ends_with('_') {
            snake.push('_');
        }
        match c {
            '-' | ' ' => snake.push('_'),
            c => snake.extend(c.to_lowercase()),
        }
    }
    let mut candidate = snake.as_str();
    for _ in 0..2 {
        candidate = candidate
            .strip_suffix("_tool")
            .or_else(|| candidate.strip_suffix("tool"))
            .unwrap_or(candidate)
            .trim_end_matches('_');
    }
    if let Some(exact) = known.iter().find(|t| **t == candidate) {
        return Some(exact);
    }
    // Close enough: at most one edit in five characters (Hermes' 0.7 similarity, roughly).
    known
        .iter()
        .map(|t| (t, edit_distance(t, candidate)))
        .filter(|(t, d)| *d * 10 <= t.len() * 3)
        .min_by_key(|(_, d)| *d)
        .map(|(t, _)| *t)
}

/// Levenshtein distance (tool names are short).
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (above + 1)
                .min(row[j] + 1)
                .min(diagonal + usize::from(ca != *cb));
            diagonal = above;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod name_tests {
    use super::*;

    /// The gateway's tools, as the registry names them.
    const KNOWN: [&str; 18] = [
        "terminal",
        "process",
        "read_file",
        "write_file",
        "patch",
        "search_files",
        "todo",
        "memory",
        "session_search",
        "cronjob",
        "send_message",
        "skills_list",
        "skill_view",
        "clarify",
        "web_search",
        "web_extract",
        "execute_code",
        "delegate_task",
    ];

    #[test]
    fn misspelled_tool_names_are_repaired_and_strangers_are_not() {
        for (asked, meant) in [
            ("terminal", "terminal"),
            ("Terminal", "terminal"),
            ("terminal_tool", "terminal"),
            ("TerminalTool", "terminal"),
            ("terminal\"}", "terminal"),
            ("termnal", "terminal"),
            ("Process", "process"),
            ("WebSearch", "web_search"),
            ("read-file", "read_file"),
        ] {
            assert_eq!(repair_name(asked, &KNOWN), Some(meant), "{asked}");
        }
        assert_eq!(repair_name("browser_navigate", &KNOWN), None);
        assert_eq!(repair_name("rm", &KNOWN), None);
    }

    #[tokio::test]
    async fn a_made_up_tool_name_is_counted_as_unknown_not_as_a_label_of_its_own() {
        let toolbox = Toolbox::with(Default::default(), Vec::new());
        let call = ToolCall {
            id: "1".into(),
            name: "<script>made-up".into(),
            arguments: "{}".into(),
        };
        let result = toolbox.run(&call, &ToolContext::for_tests()).await;
        assert!(result.text.contains("no tool named"), "{}", result.text);
        let text = crate::metrics::render(None, &[]);
        assert!(text.contains("tool=\"unknown\""), "{text}");
        assert!(!text.contains("made-up"), "{text}");
    }

    /// A tool offered to a person's turn only.
    struct TopOnly(&'static str);

    impl Tool for TopOnly {
        fn name(&self) -> &'static str {
            self.0
        }
        fn toolset(&self) -> &'static str {
            "test"
        }
        fn definition(&self) -> Value {
            serde_json::json!({"type": "function", "function": {"name": self.0}})
        }
        fn unavailable(&self) -> Option<String> {
            None
        }
        fn offered_in(&self, ctx: &ToolContext) -> bool {
            ctx.depth == 0 || self.0 == "always"
        }
        fn reads_only(&self, _args: &Value) -> bool {
            true
        }
        fn path_scope(&self, _args: &Value) -> Option<std::path::PathBuf> {
            None
        }
        fn run<'a>(
            &'a self,
            _args: Value,
            _ctx: &'a ToolContext,
        ) -> futures_util::future::BoxFuture<'a, ToolResult> {
            Box::pin(std::future::ready(ToolResult::text("ok")))
        }
    }

    #[test]
    fn definitions_are_made_once_per_set_of_offered_tools() {
        let toolbox = Toolbox::with(
            Default::default(),
            vec![Arc::new(TopOnly("always")), Arc::new(TopOnly("top"))],
        );
        let person = ToolContext::for_tests();
        let child = ToolContext {
            depth: 1,
            ..ToolContext::for_tests()
        };
        let first = toolbox.definitions(&person);
        assert_eq!(format!("{first:?}"), r#"["always", "top"]"#);
        // The same set: the same shared definitions, not a copy.
        assert!(toolbox.definitions(&person).same(&first));
        // Fewer tools: definitions of their own, also kept.
        let fewer = toolbox.definitions(&child);
        assert_eq!(format!("{fewer:?}"), r#"["always"]"#);
        assert!(!fewer.same(&first));
        assert!(toolbox.definitions(&child).same(&fewer));
        assert!(toolbox.definitions(&person).same(&first));
    }
}
