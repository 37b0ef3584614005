//! `execute_code` (Hermes' programmatic tool calling): the model writes a Python script that
//! imports `hermes_tools` and calls the gateway's tools from it; only what the script prints
//! goes back to the model. Each run gets a private directory (0700) holding the generated
//! stub module, the script and the tool socket ([`rpc`]), a random token, a child `python3`
//! in its own process group with stdin closed and an environment scrubbed by Hermes' rules,
//! a timeout, bounded output, and the whole group killed on timeout or `/stop`. In the
//! gateway the whole script is shown for approval first (class `execute_code`), unless
//! approvals are off or the person allowed scripts for the session or always.

mod rpc;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::future::BoxFuture;
use nix::sys::signal::Signal;
use serde_json::{Value, json};

use super::output::HeadTail;
use super::{Tool, ToolContext, ToolResult};
use crate::approval::{ApprovalBroker, Gate};
use crate::config::{CodeExecutionConfig, CodeMode};
use crate::shell::{self, Waited};
use crate::tool::TypedTool;

/// Stdout kept: 50 KB, the first 40 % and the last 60 %.
const STDOUT_LIMIT: usize = 50_000;
/// Stderr kept: its first 10 KB.
const STDERR_LIMIT: usize = 10_000;
/// How long a script gets to end after SIGTERM on a timeout before SIGKILL.
const TERM_GRACE: Duration = Duration::from_secs(5);
/// The longest script taken: it is shown whole for approval.
const MAX_SCRIPT_CHARS: usize = 20_000;
/// The tools a script may call, in the order their stubs are written.
const SANDBOX_TOOLS: [&str; 7] = [
    "read_file",
    "write_file",
    "search_files",
    "patch",
    "terminal",
    "web_search",
    "web_extract",
];
/// Variables a script keeps by prefix (Hermes' list), unless the name marks a secret.
const KEPT_PREFIXES: [&str; 15] = [
    "PATH",
    "HOME",
    "USER",
    "LANG",
    "LC_",
    "TERM",
    "TMPDIR",
    "TMP",
    "TEMP",
    "SHELL",
    "LOGNAME",
    "XDG_",
    "PYTHONPATH",
    "VIRTUAL_ENV",
    "CONDA",
];
/// Parts of a name that mark a secret (Hermes' list; checked before the kept prefixes).
const SECRET_MARKS: [&str; 12] = [
    "KEY",
    "TOKEN",
    "SECRET",
    "PASSWORD",
    "CREDENTIAL",
    "PASSWD",
    "AUTH",
    "DSN",
    "WEBHOOK",
    "CREDS",
    "BEARER",
    "APIKEY",
];
/// `HERMES_*` names a script keeps (every other `HERMES_*` is dropped).
const KEPT_HERMES: [&str; 4] = [
    "HERMES_HOME",
    "HERMES_PROFILE",
    "HERMES_CONFIG",
    "HERMES_ENV",
];

pub struct ExecuteCodeTool {
    config: CodeExecutionConfig,
    /// `terminal.cwd`: where a `project` script runs.
    cwd: PathBuf,
    /// `terminal.pass_env`: variables the operator lets children see.
    pass_env: Vec<String>,
    approvals: Arc<ApprovalBroker>,
    /// Where the script runs.
    confined: super::Confined,
    /// Where runs keep their files (`$HERMES_HOME/cache/code`).
    staging: PathBuf,
    /// The tools a script may call (the registry's own instances), where their toolsets
    /// are offered.
    sandbox: Vec<Arc<dyn Tool>>,
    toolsets: crate::config::ToolsetsConfig,
    /// The interpreter, looked up once.
    python: Option<PathBuf>,
}

impl ExecuteCodeTool {
    /// `registry`: the gateway's other tools; those a script may call are taken from it,
    /// where `toolsets` offers them.
    pub fn new(
        config: CodeExecutionConfig,
        (cwd, pass_env, staging): (PathBuf, Vec<String>, PathBuf),
        approvals: Arc<ApprovalBroker>,
        confined: super::Confined,
        registry: &[Arc<dyn Tool>],
        toolsets: crate::config::ToolsetsConfig,
    ) -> Self {
        let sandbox = SANDBOX_TOOLS
            .iter()
            .filter_map(|name| registry.iter().find(|t| t.name() == *name).cloned())
            .collect();
        let python = find_python(config.mode);
        ExecuteCodeTool {
            config,
            cwd,
            pass_env,
            approvals,
            confined,
            staging,
            sandbox,
            toolsets,
            python,
        }
    }

    /// The tools a script may call now on `platform` (`None`: on some platform): their
    /// toolset offered there, available (web tools only with their key).
    fn callable(&self, platform: Option<hermes_adapter::Platform>) -> Vec<Arc<dyn Tool>> {
        self.sandbox
            .iter()
            .filter(|t| t.unavailable().is_none())
            .filter(|t| match platform {
                Some(p) => self.toolsets.offers(p.as_str(), t.toolset()),
                None => true,
            })
            .cloned()
            .collect()
    }

    /// Run `code` once it is approved: its files staged, `python3` started confined, its
    /// tool calls served until it ends, and what it printed reported.
    async fn execute(&self, code: &str, ctx: &ToolContext) -> Value {
        let Some(python) = &self.python else {
            return failed("python3 was not found on this host");
        };
        if let Some(refused) = self.approve(code, ctx).await {
            return refused;
        }
        let tools = self.callable(Some(ctx.chat.platform));
        let (run, listener) = match self.stage(code, &tools).await {
            Ok(staged) => staged,
            Err(failure) => return failure,
        };
        // After the run's files exist: Landlock alone takes what is on disk now.
        let confinement = match self.confined.sandbox(ctx).await {
            Ok(sandbox) => sandbox,
            Err(refused) => return failed(&refused),
        };
        let token = random_token();
        let (program, cwd) = self.program(python, &run, &token);
        let started = Instant::now();
        let mut child = match confinement.spawn(&program) {
            Ok(child) => child,
            Err(e) => {
                return failed(&format!(
                    "could not start {} in {}: {e}",
                    python.display(),
                    cwd.display()
                ));
            }
        };
        let group = shell::group_of(&child);
        let Capture {
            stdout,
            stderr,
            readers,
        } = capture(&mut child);
        let calls = Arc::new(AtomicU32::new(0));
        // The script's calls end with it: their token is cancelled when the run is over
        // (and with the turn's).
        let calls_end = ctx.cancel.child_token();
        let server = tokio::spawn(
            rpc::Rpc {
                tools: Arc::new(tools),
                token: token.into(),
                ctx: ToolContext {
                    cancel: calls_end.clone(),
                    ..ctx.clone()
                },
                calls: calls.clone(),
                max_calls: self.config.max_tool_calls,
            }
            .serve(listener),
        );

        let end = shell::wait_for(&mut child, self.config.timeout, &ctx.cancel).await;
        stop_group(group, end, &mut child).await;
        let _ = child.wait().await;
        // Calls the script left running (a command it started) end now, group and all.
        calls_end.cancel();
        let _ = server.await;
        shell::finish_readers(readers).await;
        let duration = started.elapsed();
        let result = self.report(end, &stdout, &stderr, &calls, duration);
        tokio::task::spawn_blocking(move || drop(run));
        result
    }

    /// The run's files written (off the runtime's threads) and its tool socket opened; the
    /// result to give back when either fails.
    async fn stage(
        &self,
        code: &str,
        tools: &[Arc<dyn Tool>],
    ) -> Result<(Staging, tokio::net::UnixListener), Value> {
        // Files written (and, at the end, removed) off the runtime's threads.
        let module = stub_module(tools);
        let script = code.to_owned();
        let staging = self.staging.clone();
        let run =
            match tokio::task::spawn_blocking(move || Staging::create(&staging, &script, &module))
                .await
                .map_err(std::io::Error::other)
                .and_then(|made| made)
            {
                Ok(run) => run,
                Err(e) => return Err(failed(&format!("could not prepare the script: {e}"))),
            };
        let listener = match run.listen() {
            Ok(listener) => listener,
            Err(e) => return Err(failed(&format!("could not open the tool socket: {e}"))),
        };
        Ok((run, listener))
    }

    /// The command of a run: `python` on the run's script, in the working directory of
    /// the mode (returned too, for the message when it cannot start), with the script's
    /// environment only.
    fn program(
        &self,
        python: &Path,
        run: &Staging,
        token: &str,
    ) -> (crate::confine::Program, PathBuf) {
        let cwd = match self.config.mode {
            CodeMode::Project => self.cwd.clone(),
            CodeMode::Strict => run.workdir().to_path_buf(),
        };
        let mut program = crate::confine::Program::new(python);
        program
            .arg(run.dir().join("script.py"))
            .current_dir(&cwd)
            .env_clear()
            .envs(self.child_env(run.dir(), &run.socket(), token));
        (program, cwd)
    }

    /// What goes back to the model once the run is over: how it ended, what it printed
    /// (with stderr when it failed), how many tools it called and how long it took.
    fn report(
        &self,
        end: Waited,
        stdout: &Mutex<HeadTail>,
        stderr: &Mutex<HeadTail>,
        calls: &AtomicU32,
        duration: Duration,
    ) -> Value {
        let stdout = stdout
            .lock()
            .map(|s| s.clone())
            .unwrap_or_else(|_| HeadTail::split(0, 0));
        let stderr_text = stderr.lock().map(|s| s.text()).unwrap_or_default();
        let mut output = stdout.text_marked(|omitted, total| {
            format!("\n... [OUTPUT TRUNCATED - {omitted} bytes omitted out of {total} total] ...\n")
        });
        let mut result = json!({
            "status": "success",
            "exit_code": Value::Null,
            "tool_calls_made": calls.load(Ordering::SeqCst),
            "duration_seconds": super::output::seconds(duration),
            "stdout_truncated": stdout.omitted() > 0,
            "stdout_bytes_captured": stdout.total() - stdout.omitted(),
            "stdout_bytes_total": stdout.total(),
            "stdout_bytes_omitted": stdout.omitted(),
        });
        self.say_end(end, &stderr_text, &mut result, &mut output);
        result["output"] = json!(output);
        result
    }

    /// Mark `result` and `output` with how the run ended: its exit code (and stderr, when
    /// it failed), a timeout, or the person stopping it.
    fn say_end(&self, end: Waited, stderr_text: &str, result: &mut Value, output: &mut String) {
        match end {
            Waited::Exited(code) => {
                result["exit_code"] = json!(code);
                if code != Some(0) {
                    result["status"] = json!("error");
                    result["error"] = json!(if stderr_text.trim().is_empty() {
                        format!("the script exited with {code:?}")
                    } else {
                        stderr_text.to_owned()
                    });
                    if !stderr_text.trim().is_empty() {
                        output.push_str("\n--- stderr ---\n");
                        output.push_str(stderr_text);
                    }
                }
            }
            Waited::TimedOut => {
                let why = format!(
                    "Script timed out after {}s and was killed.",
                    self.config.timeout.as_secs()
                );
                result["status"] = json!("timeout");
                result["exit_code"] = json!(124);
                output.push_str(&format!("\n{why}"));
                result["error"] = json!(why);
            }
            Waited::Cancelled => {
                result["status"] = json!("interrupted");
                result["exit_code"] = json!(130);
                output.push_str("\n[execution interrupted — the person stopped the task]");
            }
        }
    }

    /// The whole script, shown for approval: `Some(result)` when it must not run.
    async fn approve(&self, code: &str, ctx: &ToolContext) -> Option<Value> {
        match self
            .approvals
            .check_script(ctx.check(&self.cwd, false), code)
            .await
        {
            Gate::Run => None,
            Gate::Refused(why) => Some(json!({
                "status": "error",
                "error": why,
                "output": "",
                "tool_calls_made": 0,
            })),
        }
    }

    /// The script's environment: what Hermes lets through, plus the socket and token.
    fn child_env(&self, dir: &Path, socket: &Path, token: &str) -> Vec<(String, String)> {
        let mut env: Vec<(String, String)> = std::env::vars()
            .filter(|(name, _)| script_keeps(name))
            .filter(|(name, _)| name != "PYTHONPATH")
            .collect();
        for name in &self.pass_env {
            if let Some(value) = crate::secrets::get(name) {
                env.push((name.clone(), value.to_owned()));
            }
        }
        let pythonpath = match std::env::var("PYTHONPATH") {
            Ok(existing) if !existing.is_empty() => format!("{}:{existing}", dir.display()),
            _ => dir.display().to_string(),
        };
        env.extend([
            ("PYTHONPATH".into(), pythonpath),
            ("HERMES_RPC_SOCKET".into(), socket.display().to_string()),
            ("HERMES_RPC_TOKEN".into(), token.to_owned()),
            ("PYTHONDONTWRITEBYTECODE".into(), "1".into()),
            ("PYTHONIOENCODING".into(), "utf-8".into()),
            ("PYTHONUTF8".into(), "1".into()),
        ]);
        env
    }
}

/// `execute_code`'s arguments.
#[derive(serde::Deserialize, schemars::JsonSchema)]
pub struct ExecuteCodeArgs {
    /// The Python script.
    code: String,
}

impl TypedTool for ExecuteCodeTool {
    type Args = ExecuteCodeArgs;
    const NAME: &'static str = "execute_code";
    const TOOLSET: &'static str = "code_execution";

    fn description(&self) -> String {
        let names: Vec<&str> = self.callable(None).iter().map(|t| t.name()).collect();
        format!(
            "Run a Python script that calls tools programmatically, to collapse a job of many steps into one call. \
             `from hermes_tools import {}, json_parse, shell_quote, retry`; each tool function takes the tool's \
             arguments as keyword arguments and returns its result (parsed JSON where the result is JSON, else text). \
             terminal runs foreground commands only. Only what the script prints is returned to you, so print a \
             short summary. Limits: {} s, {} tool calls, 50 KB of output.",
            names.join(", "),
            self.config.timeout.as_secs(),
            self.config.max_tool_calls,
        )
    }

    fn why_unavailable(&self) -> Option<String> {
        self.python
            .is_none()
            .then(|| "python3 is not installed on this host".to_owned())
    }

    fn call<'a>(
        &'a self,
        args: ExecuteCodeArgs,
        ctx: &'a ToolContext,
    ) -> BoxFuture<'a, ToolResult> {
        Box::pin(async move {
            let code = args.code.as_str();
            if code.trim().is_empty() {
                return ToolResult::text("error: `code` must be the Python script to run");
            }
            if code.chars().count() > MAX_SCRIPT_CHARS {
                return ToolResult::text(format!(
                    "error: the script is longer than {MAX_SCRIPT_CHARS} characters; it is shown whole for approval, so keep it shorter"
                ));
            }
            let result = self.execute(code, ctx).await;
            ToolResult {
                cancelled: result["status"] == "interrupted" || ctx.cancel.is_cancelled(),
                text: result.to_string(),
            }
        })
    }
}

/// A run's files: the script, its `hermes_tools` module and the tool socket in a private
/// directory under the gateway's home (`cache/code`: commands see it read-only, so none can
/// plant a link there for the daemon to write through), and, for a `strict` run, an empty
/// working directory in `/tmp`. Both removed when dropped.
struct Staging {
    files: tempfile::TempDir,
    workdir: tempfile::TempDir,
}

impl Staging {
    /// The run's files in a new directory under `staging`.
    fn create(staging: &Path, code: &str, module: &str) -> std::io::Result<Staging> {
        use std::io::Write;
        use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(staging)?;
        let files = tempfile::Builder::new()
            .prefix("hermes_sandbox_")
            .tempdir_in(staging)?;
        std::fs::set_permissions(files.path(), std::fs::Permissions::from_mode(0o700))?;
        for (name, text) in [("hermes_tools.py", module), ("script.py", code)] {
            std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .custom_flags(libc::O_NOFOLLOW)
                .open(files.path().join(name))?
                .write_all(text.as_bytes())?;
        }
        let workdir = tempfile::Builder::new()
            .prefix("hermes_sandbox_work_")
            .tempdir()?;
        Ok(Staging { files, workdir })
    }

    /// Where a `strict` run works.
    fn workdir(&self) -> &Path {
        self.workdir.path()
    }

    fn dir(&self) -> &Path {
        self.files.path()
    }

    fn socket(&self) -> PathBuf {
        self.dir().join("rpc.sock")
    }

    fn listen(&self) -> std::io::Result<tokio::net::UnixListener> {
        use std::os::unix::fs::PermissionsExt;
        let listener = tokio::net::UnixListener::bind(self.socket())?;
        std::fs::set_permissions(self.socket(), std::fs::Permissions::from_mode(0o600))?;
        Ok(listener)
    }
}

/// The `hermes_tools` module for a run: the fixed client and helpers, then one function per
/// tool the script may call.
fn stub_module(tools: &[Arc<dyn Tool>]) -> String {
    let mut module = include_str!("hermes_tools.py").to_owned();
    for tool in tools {
        let stub = match tool.name() {
            "read_file" => {
                "def read_file(path, offset=1, limit=500):\n    return _call(\"read_file\", {\"path\": path, \"offset\": offset, \"limit\": limit})\n"
            }
            "write_file" => {
                "def write_file(path, content):\n    return _call(\"write_file\", {\"path\": path, \"content\": content})\n"
            }
            "search_files" => {
                "def search_files(pattern, target=\"content\", path=\".\", file_glob=None, limit=50, offset=None, output_mode=None, context=None):\n    return _call(\"search_files\", {\"pattern\": pattern, \"target\": target, \"path\": path, \"file_glob\": file_glob, \"limit\": limit, \"offset\": offset, \"output_mode\": output_mode, \"context\": context})\n"
            }
            "patch" => {
                "def patch(path, old_string=None, new_string=None, replace_all=False, mode=\"replace\", patch=None):\n    return _call(\"patch\", {\"path\": path, \"old_string\": old_string, \"new_string\": new_string, \"replace_all\": replace_all, \"mode\": mode, \"patch\": patch})\n"
            }
            "terminal" => {
                "def terminal(command, timeout=None, workdir=None):\n    return _call(\"terminal\", {\"command\": command, \"timeout\": timeout, \"workdir\": workdir})\n"
            }
            "web_search" => {
                "def web_search(query, limit=5):\n    return _call(\"web_search\", {\"query\": query, \"limit\": limit})\n"
            }
            "web_extract" => {
                "def web_extract(urls, char_limit=None):\n    return _call(\"web_extract\", {\"urls\": urls, \"char_limit\": char_limit})\n"
            }
            _ => continue,
        };
        module.push_str("\n\n");
        module.push_str(stub);
    }
    module
}

/// Whether a script keeps variable `name` (Hermes' rules: a secret-looking name never;
/// Hermes' own `HERMES_HOME`-style names and the usual shell and Python ones do).
fn script_keeps(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    if SECRET_MARKS.iter().any(|m| upper.contains(m)) {
        return false;
    }
    if upper.starts_with("HERMES_") {
        return KEPT_HERMES.contains(&upper.as_str());
    }
    KEPT_PREFIXES.iter().any(|p| upper.starts_with(p))
}

/// `python3` from the active virtual environment in `project` mode, else from `PATH`.
fn find_python(mode: CodeMode) -> Option<PathBuf> {
    if mode == CodeMode::Project
        && let Some(venv) = std::env::var_os("VIRTUAL_ENV")
    {
        let candidate = PathBuf::from(venv).join("bin").join("python3");
        if is_executable(&candidate) {
            return Some(candidate);
        }
    }
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|dir| dir.join("python3"))
        .find(|p| is_executable(p))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// 32 random bytes, URL-safe base64.
fn random_token() -> String {
    use base64::Engine;
    let bytes: [u8; 32] = rand::random();
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// A result for a run that never started.
fn failed(why: &str) -> Value {
    json!({"status": "error", "error": why, "output": "", "tool_calls_made": 0})
}

/// A run's output as it is read: both ends of stdout and of stderr, and the tasks reading
/// them.
struct Capture {
    stdout: Arc<Mutex<HeadTail>>,
    stderr: Arc<Mutex<HeadTail>>,
    readers: Vec<tokio::task::JoinHandle<()>>,
}

/// Start reading `child`'s stdout and stderr into bounded buffers.
fn capture(child: &mut crate::confine::AgentProcess) -> Capture {
    let stdout = Arc::new(Mutex::new(HeadTail::split(
        STDOUT_LIMIT * 2 / 5,
        STDOUT_LIMIT * 3 / 5,
    )));
    // The end of stderr holds a traceback's last line: keep both ends.
    let stderr = Arc::new(Mutex::new(HeadTail::split(
        STDERR_LIMIT * 2 / 5,
        STDERR_LIMIT * 3 / 5,
    )));
    let mut readers = Vec::new();
    if let Some(out) = child.stdout.take() {
        let sink = stdout.clone();
        readers.push(shell::pump(out, move |b| {
            if let Ok(mut s) = sink.lock() {
                s.push(b)
            }
        }));
    }
    if let Some(err) = child.stderr.take() {
        let sink = stderr.clone();
        readers.push(shell::pump(err, move |b| {
            if let Ok(mut s) = sink.lock() {
                s.push(b)
            }
        }));
    }
    Capture {
        stdout,
        stderr,
        readers,
    }
}

/// Once the wait for the script is over (`end`), end what is left of its process `group`:
/// at once when it exited or was stopped; on a timeout SIGTERM first, and SIGKILL if it is
/// not gone after a grace period.
async fn stop_group(
    group: Option<nix::unistd::Pid>,
    end: Waited,
    child: &mut crate::confine::AgentProcess,
) {
    let Some(group) = group else {
        return;
    };
    match end {
        // Whatever the script left running in its group would go on untracked.
        Waited::Exited(_) => shell::signal_group(group, Signal::SIGKILL),
        Waited::TimedOut => {
            shell::signal_group(group, Signal::SIGTERM);
            if tokio::time::timeout(TERM_GRACE, child.wait())
                .await
                .is_err()
            {
                shell::signal_group(group, Signal::SIGKILL);
            }
        }
        Waited::Cancelled => shell::signal_group(group, Signal::SIGKILL),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_never_reach_a_script_and_the_usual_variables_do() {
        for dropped in [
            "OPENAI_API_KEY",
            "TELEGRAM_BOT_TOKEN",
            "GITHUB_TOKEN",
            "DB_PASSWORD",
            "SENTRY_DSN",
            "SLACK_WEBHOOK_URL",
            "HERMES_HTTP_TOKEN",
            "HERMES_SOMETHING",
            "NOTIFY_SOCKET",
            "AWS_CREDS",
            "RANDOM_THING",
            "PATH_TOKEN",
        ] {
            assert!(!script_keeps(dropped), "{dropped}");
        }
        for kept in [
            "PATH",
            "HOME",
            "LANG",
            "LC_ALL",
            "TERM",
            "TMPDIR",
            "XDG_RUNTIME_DIR",
            "VIRTUAL_ENV",
            "HERMES_HOME",
            "USER",
        ] {
            assert!(script_keeps(kept), "{kept}");
        }
    }

    #[test]
    fn the_stub_module_has_a_function_per_callable_tool_and_the_helpers() {
        let module = stub_module(&[]);
        assert!(module.contains("def json_parse"));
        assert!(module.contains("def shell_quote"));
        assert!(module.contains("def retry"));
        assert!(!module.contains("def terminal"));
    }
}
