//! The gateway's side of an `execute_code` run: a Unix socket in the run's private
//! directory (0600) that answers newline-delimited JSON requests `{tool, args, token}` from
//! the script. Each request is checked (the run's token in constant time, the allow-list,
//! the call cap) and run as the model's own call would be, with the turn's context, so a
//! dangerous `terminal` waits for approval and `/stop` reaches it.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use serde_json::{Value, json};
use subtle::ConstantTimeEq;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};
use tokio::task::JoinSet;

use crate::tools::{Tool, ToolContext};

/// The longest request line read (a `write_file` with a big content fits).
const MAX_REQUEST: u64 = 4 * 1024 * 1024;
/// Connections one run may hold open at once (the stubs use one).
const MAX_CONNECTIONS: usize = 4;
/// How long calls still running when the run ends get to wind down (their commands'
/// groups killed, their approval prompts withdrawn) before they are dropped.
const WIND_DOWN: std::time::Duration = std::time::Duration::from_secs(5);
/// `terminal` arguments a script may not use: scripts run foreground commands only.
const FOREGROUND_ONLY: [&str; 5] = [
    "background",
    "pty",
    "notify_on_complete",
    "watch_patterns",
    "check_interval",
];

/// What every connection of one run shares.
#[derive(Clone)]
pub struct Rpc {
    /// The tools a script may call (those available now).
    pub tools: Arc<Vec<Arc<dyn Tool>>>,
    pub token: Arc<str>,
    pub ctx: ToolContext,
    /// Calls made so far (successful dispatches; refusals do not count).
    pub calls: Arc<AtomicU32>,
    pub max_calls: u32,
}

impl Rpc {
    /// Answer connections on `listener` until the run is over (`self.ctx.cancel`, which
    /// also reaches every call still running); then wait, briefly, for those calls to end
    /// the way a cancelled call ends (a command's whole group killed).
    pub async fn serve(self, listener: UnixListener) {
        let done = self.ctx.cancel.clone();
        let mut connections = JoinSet::new();
        loop {
            tokio::select! {
                _ = done.cancelled() => break,
                accepted = listener.accept() => match accepted {
                    Ok((stream, _)) if connections.len() >= MAX_CONNECTIONS => {
                        tracing::warn!("execute_code: a script opened too many tool connections; one was closed");
                        drop(stream);
                    }
                    Ok((stream, _)) => {
                        connections.spawn(self.clone().connection(stream));
                    }
                    Err(e) => {
                        // Out of descriptors, say: it may pass, so look again shortly.
                        tracing::warn!(error = %e, "execute_code: the tool socket could not accept");
                        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                    }
                },
                Some(_) = connections.join_next(), if !connections.is_empty() => {}
            }
        }
        let wound_down = async { while connections.join_next().await.is_some() {} };
        if tokio::time::timeout(WIND_DOWN, wound_down).await.is_err() {
            tracing::warn!("execute_code: a tool call did not end with its script; dropped");
            connections.abort_all();
        }
    }

    async fn connection(self, stream: UnixStream) {
        let (read, mut write) = stream.into_split();
        let mut reader = BufReader::new(read);
        loop {
            let mut line = Vec::new();
            let mut limited = (&mut reader).take(MAX_REQUEST + 1);
            let read = tokio::select! {
                _ = self.ctx.cancel.cancelled() => return,
                read = limited.read_until(b'\n', &mut line) => read,
            };
            match read {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
            let answer = if line.len() as u64 > MAX_REQUEST {
                json!({"error": format!("request too large (more than {MAX_REQUEST} bytes)")})
            } else {
                self.answer(&line).await
            };
            let mut out = answer.to_string();
            out.push('\n');
            if write.write_all(out.as_bytes()).await.is_err() {
                return;
            }
            if line.len() as u64 > MAX_REQUEST {
                // The rest of the oversized line cannot be told from a next request.
                return;
            }
        }
    }

    /// One request's answer: the tool's result text as a JSON string, or `{"error": …}`.
    pub async fn answer(&self, line: &[u8]) -> Value {
        let request: Value = match serde_json::from_slice(line) {
            Ok(v @ Value::Object(_)) => v,
            Ok(_) => return json!({"error": "a request is a JSON object {tool, args, token}"}),
            Err(e) => return json!({"error": format!("the request is not valid JSON: {e}")}),
        };
        let token = request["token"].as_str().unwrap_or_default();
        if !bool::from(token.as_bytes().ct_eq(self.token.as_bytes())) {
            tracing::warn!("execute_code: a tool request with a wrong token was refused");
            return json!({"error": "Unauthorized RPC request"});
        }
        let name = request["tool"].as_str().unwrap_or_default();
        let Some(tool) = self.tools.iter().find(|t| t.name() == name) else {
            let names: Vec<&str> = self.tools.iter().map(|t| t.name()).collect();
            return json!({"error": format!(
                "tool {name:?} is not available inside execute_code; available: {}",
                names.join(", ")
            )});
        };
        let mut args = match &request["args"] {
            Value::Object(map) => map.clone(),
            Value::Null => Default::default(),
            _ => return json!({"error": "args must be a JSON object"}),
        };
        if name == "terminal" {
            for key in FOREGROUND_ONLY {
                args.remove(key);
            }
        }
        let made = self.calls.fetch_add(1, Ordering::SeqCst);
        if made >= self.max_calls {
            self.calls.fetch_sub(1, Ordering::SeqCst);
            return json!({"error": format!(
                "Tool call limit reached ({}): this script may not call more tools (code_execution.max_tool_calls).",
                self.max_calls
            )});
        }
        let started = std::time::Instant::now();
        let result = tool.run(Value::Object(args), &self.ctx).await;
        tracing::info!(
            tool = name,
            ms = started.elapsed().as_millis() as u64,
            "execute_code: the script called a tool"
        );
        Value::String(crate::secrets::scrub(&result.text).into_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::ToolResult;
    use futures_util::future::BoxFuture;

    struct Echo;

    impl Tool for Echo {
        fn name(&self) -> &'static str {
            "read_file"
        }
        fn toolset(&self) -> &'static str {
            "file"
        }
        fn definition(&self) -> Value {
            json!({})
        }
        fn run<'a>(&'a self, args: Value, _ctx: &'a ToolContext) -> BoxFuture<'a, ToolResult> {
            Box::pin(async move { ToolResult::text(format!("read {}", args["path"])) })
        }
    }

    fn rpc(max_calls: u32) -> Rpc {
        Rpc {
            tools: Arc::new(vec![Arc::new(Echo) as Arc<dyn Tool>]),
            token: "right-token".into(),
            ctx: ToolContext::for_tests(),
            calls: Arc::new(AtomicU32::new(0)),
            max_calls,
        }
    }

    fn request(tool: &str, token: &str) -> Vec<u8> {
        json!({"tool": tool, "args": {"path": "a.txt"}, "token": token})
            .to_string()
            .into_bytes()
    }

    #[tokio::test]
    async fn a_request_runs_its_tool_only_with_the_runs_token() {
        let rpc = rpc(5);
        assert_eq!(
            rpc.answer(&request("read_file", "right-token")).await,
            json!("read \"a.txt\"")
        );
        for wrong in ["wrong-token", "", "right-toke", "right-token2"] {
            assert_eq!(
                rpc.answer(&request("read_file", wrong)).await,
                json!({"error": "Unauthorized RPC request"}),
                "{wrong:?}"
            );
        }
        assert_eq!(rpc.calls.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn tools_outside_the_allow_list_and_calls_past_the_cap_are_refused() {
        let rpc = rpc(2);
        let refused = rpc.answer(&request("memory", "right-token")).await;
        assert!(
            refused["error"]
                .as_str()
                .unwrap()
                .contains("not available inside execute_code"),
            "{refused}"
        );
        assert!(
            rpc.answer(&request("read_file", "right-token"))
                .await
                .is_string()
        );
        assert!(
            rpc.answer(&request("read_file", "right-token"))
                .await
                .is_string()
        );
        let capped = rpc.answer(&request("read_file", "right-token")).await;
        assert!(
            capped["error"]
                .as_str()
                .unwrap()
                .starts_with("Tool call limit reached (2)"),
            "{capped}"
        );
        assert!(rpc.answer(b"not json").await["error"].is_string());
        assert!(rpc.answer(b"[1]").await["error"].is_string());
    }
}
