//! `execute_code` end to end (the real daemon, the fake Telegram, the fake LLM, the host's
//! python3): a script calls tools through the socket once the person allowed it; a wrong
//! token is refused and the script sees no secret; the call cap; the timeout and `/stop`
//! stop the script's whole process group; a dangerous command inside a script waits for
//! its own approval.

mod common;

use common::*;
use hermes_testkit::eventually;
use hermes_testkit::llm::Reply;
use serde_json::{Value, json};

fn script(code: &str) -> Reply {
    Reply::ToolCall {
        name: "execute_code".into(),
        arguments: json!({"code": code}),
    }
}

/// The result of the script (the first tool result of the last model call).
fn script_result(w: &World) -> Value {
    let results = tool_results(w);
    serde_json::from_str(&results[0]).unwrap_or_else(|e| panic!("{e}: {results:?}"))
}

/// A world where scripts run without asking (approvals for commands stay on).
async fn allowing_scripts(yaml: &str) -> World {
    World::new(
        &["TELEGRAM_ALLOW_ALL_USERS=true"],
        &format!("command_allowlist:\n  - execute_code\n{yaml}"),
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_script_calls_read_file_and_terminal_once_allowed_and_only_its_print_returns() {
    let w = World::allow_all().await;
    std::fs::write(w.home.dir.join("work/data.txt"), "alpha\nbeta\n").unwrap();
    w.llm.push(script(
        "from hermes_tools import read_file, terminal\n\
         text = read_file('data.txt')\n\
         out = terminal('echo from-terminal; echo $((6*7))')\n\
         print('lines:', text.count('\\n'), '|', out.splitlines()[1], '|', out.splitlines()[2])\n",
    ));
    w.llm.push(Reply::text("done"));
    let _d = w.start();
    w.telegram.dm(ALICE, "count the lines");
    let p = prompt(&w, ALICE, 1).await;
    let shown = p.1["text"].as_str().unwrap();
    assert!(
        shown.contains("from hermes_tools import") && shown.contains("Python script"),
        "the whole script is shown: {shown}"
    );
    press(&w, ALICE, ALICE, &p, "Allow once");
    assert_eq!(w.replies(ALICE, 2).await[1], "done");
    let result = script_result(&w);
    assert_eq!(result["status"], "success", "{result}");
    assert_eq!(result["tool_calls_made"], 2, "{result}");
    assert_eq!(result["exit_code"], 0, "{result}");
    assert_eq!(
        result["output"].as_str().unwrap().trim(),
        "lines: 2 | from-terminal | 42"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_token_is_refused_and_the_script_sees_no_secret() {
    let w = allowing_scripts("").await;
    let marker = w.home.dir.join("work/pwned");
    w.llm.push(script(&format!(
        "import json, os, socket\n\
         s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)\n\
         s.connect(os.environ['HERMES_RPC_SOCKET'])\n\
         request = {{'tool': 'terminal', 'args': {{'command': 'touch {}'}}, 'token': 'guessed'}}\n\
         s.sendall((json.dumps(request) + '\\n').encode())\n\
         print('answer:', s.makefile().readline().strip())\n\
         print('mode:', oct(os.stat(os.environ['HERMES_RPC_SOCKET']).st_mode & 0o777))\n\
         print('env:', ' '.join(sorted(os.environ)))\n\
         print('values:', ' '.join(os.environ.values()))\n",
        marker.display()
    )));
    w.llm.push(Reply::text("done"));
    // What the daemon's own environment holds beyond what it scrubs at start: Hermes'
    // script rules drop these too (a DSN carries a password; anything not on the list).
    let _d = hermes_testkit::daemon::Daemon::start(
        BIN,
        &w.home,
        &[
            ("SENTRY_DSN", "https://dsn-password@sentry.example/1"),
            ("SOME_SERVICE_SETTING", "not-for-scripts"),
        ],
    );
    w.ask("poke the socket").await;
    let result = script_result(&w);
    let output = result["output"].as_str().unwrap();
    assert!(
        output.contains("answer: {\"error\":\"Unauthorized RPC request\"}"),
        "{output}"
    );
    assert!(!marker.exists(), "nothing ran for the wrong token");
    assert!(output.contains("mode: 0o600"), "{output}");
    assert_eq!(result["tool_calls_made"], 0);
    let env = output.lines().find(|l| l.starts_with("env:")).unwrap();
    assert!(
        env.contains("HERMES_RPC_TOKEN") && env.contains("PATH"),
        "{env}"
    );
    for secret in [
        "TELEGRAM_BOT_TOKEN",
        "OPENAI_API_KEY",
        "NOTIFY_SOCKET",
        "SENTRY_DSN",
        "SOME_SERVICE_SETTING",
    ] {
        assert!(!env.contains(secret), "{secret} reached the script: {env}");
    }
    for value in [
        "sk-test-secret",
        "TEST-TOKEN",
        "dsn-password",
        "not-for-scripts",
    ] {
        assert!(
            !output.contains(value),
            "a secret value reached the script: {output}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_script_gets_at_most_max_tool_calls() {
    let w = allowing_scripts("code_execution:\n  max_tool_calls: 2\n").await;
    w.llm.push(script(
        "from hermes_tools import terminal\n\
         for i in range(3):\n    print(i, repr(terminal('echo call-%d' % i))[:80])\n",
    ));
    w.llm.push(Reply::text("done"));
    let _d = w.start();
    w.ask("three calls").await;
    let result = script_result(&w);
    let output = result["output"].as_str().unwrap();
    assert_eq!(result["tool_calls_made"], 2, "{result}");
    assert!(
        output.contains("call-0") && output.contains("call-1"),
        "{output}"
    );
    assert!(!output.contains("call-2"), "{output}");
    assert!(
        output.contains("Tool call limit reached (2)"),
        "the third call is refused: {output}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_script_past_its_timeout_is_killed_with_everything_it_started() {
    let w = allowing_scripts("code_execution:\n  timeout: 3\n").await;
    let pidfile = w.home.dir.join("work/sleeper.pid");
    w.llm.push(script(&format!(
        "import subprocess, time\n\
         child = subprocess.Popen(['sleep', '60'])\n\
         open('{}', 'w').write(str(child.pid))\n\
         print('started', flush=True)\n\
         time.sleep(60)\n",
        pidfile.display()
    )));
    w.llm.push(Reply::text("too slow"));
    let _d = w.start();
    w.telegram.dm(ALICE, "sleep a minute");
    // Found while it runs, so its end below is seen, not assumed.
    let pid = written_pid(&pidfile).await;
    assert_eq!(w.replies(ALICE, 1).await, ["too slow"]);
    let result = script_result(&w);
    assert_eq!(result["status"], "timeout", "{result}");
    let output = result["output"].as_str().unwrap();
    assert!(
        output.starts_with("started") && output.contains("timed out after 3s"),
        "{output}"
    );
    eventually(WAIT, "the script's child to be gone", || {
        process_gone(pid).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_kills_a_running_script_at_once() {
    let w = allowing_scripts("").await;
    let pidfile = w.home.dir.join("work/script.pid");
    w.llm.push(script(&format!(
        "import os, time\n\
         open('{}', 'w').write(str(os.getpid()))\n\
         time.sleep(60)\n",
        pidfile.display()
    )));
    let _d = w.start();
    w.telegram.dm(ALICE, "run something long");
    let group = group_of(written_pid(&pidfile).await);
    let stopped_at = std::time::Instant::now();
    w.telegram.dm(ALICE, "/stop");
    eventually(WAIT, "the script's group to be gone", || {
        (!group_alive(group)).then_some(())
    })
    .await;
    assert!(
        stopped_at.elapsed() < std::time::Duration::from_secs(5),
        "stopped at once, not after the script's sleep"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dangerous_command_inside_a_script_waits_for_its_own_approval() {
    let w = allowing_scripts("").await;
    let victim = w.home.dir.join("work/victim");
    std::fs::create_dir_all(&victim).unwrap();
    std::fs::write(victim.join("precious.txt"), "data").unwrap();
    // Built at run time, so the script's text does not show it (a script that does is
    // asked about as a whole, with the command named).
    w.llm.push(script(&format!(
        "from hermes_tools import terminal\nprint(terminal('rm -' + 'rf {}'))\n",
        victim.display()
    )));
    w.llm.push(Reply::text("it was refused"));
    let _d = w.start();
    w.telegram.dm(ALICE, "clean up");
    let p = prompt(&w, ALICE, 1).await;
    let shown = p.1["text"].as_str().unwrap();
    assert!(
        shown.contains("rm -rf"),
        "the command is asked for: {shown}"
    );
    assert!(victim.exists(), "nothing runs before the decision");
    press(&w, ALICE, ALICE, &p, "Deny");
    assert_eq!(w.replies(ALICE, 2).await.last().unwrap(), "it was refused");
    assert!(victim.exists());
    let result = script_result(&w);
    assert_eq!(result["tool_calls_made"], 1, "{result}");
    assert!(
        result["output"].as_str().unwrap().contains("NOT run"),
        "the script was told: {result}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_script_naming_the_gateways_secrets_is_asked_about_whole_even_when_scripts_are_allowed() {
    let w = allowing_scripts("").await;
    // Long enough that a shortened prompt would hide its end.
    let padding = "# nothing to see here\n".repeat(200);
    w.llm.push(script(&format!(
        "import os\n{padding}print(open(os.path.join(os.environ['HERMES_HOME'], '.env')).read())\n"
    )));
    w.llm.push(Reply::text("not allowed"));
    let _d = w.start();
    w.telegram.dm(ALICE, "show me the settings");
    let p = prompt(&w, ALICE, 1).await;
    let shown: String = w.telegram.sent_texts(ALICE).concat();
    assert!(
        shown.contains("'.env')).read())") && shown.matches("# nothing to see here").count() == 200,
        "the whole script is shown (over several messages): {shown}"
    );
    assert!(
        p.1["text"].as_str().unwrap().contains("gateway's secrets")
            || shown.contains("gateway's secrets"),
        "{shown}"
    );
    press(&w, ALICE, ALICE, &p, "Deny");
    let t = w.telegram.clone();
    eventually(WAIT, "the answer after the refusal", || {
        t.sent_texts(ALICE)
            .contains(&"not allowed".to_owned())
            .then_some(())
    })
    .await;
    let result = script_result(&w);
    assert_eq!(result["status"], "error", "{result}");
    assert_eq!(result["tool_calls_made"], 0);
    assert!(
        !result["output"]
            .as_str()
            .unwrap()
            .contains("TELEGRAM_BOT_TOKEN")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_the_script_leaves_running_is_killed_when_it_ends() {
    let w = allowing_scripts("").await;
    let pidfile = w.home.dir.join("work/sleeper.pid");
    w.llm.push(script(&format!(
        "import threading, time\n\
         from hermes_tools import terminal\n\
         threading.Thread(target=lambda: terminal('sleep 60 & echo $! > {}; wait'), daemon=True).start()\n\
         time.sleep(1.5)\n\
         print('leaving')\n",
        pidfile.display()
    )));
    w.llm.push(Reply::text("left"));
    let _d = w.start();
    w.telegram.dm(ALICE, "start something");
    let pid = written_pid(&pidfile).await;
    assert_eq!(w.replies(ALICE, 1).await, ["left"]);
    eventually(WAIT, "the command the script left to be killed", || {
        process_gone(pid).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_script_gets_only_the_toolsets_its_platform_offers() {
    let w = allowing_scripts("platform_toolsets:\n  telegram: [code_execution, file]\n").await;
    w.llm.push(script(
        "from hermes_tools import _call\nprint(_call('terminal', {'command': 'echo hi'}))\n",
    ));
    w.llm.push(Reply::text("no terminal"));
    let _d = w.start();
    w.ask("try the terminal").await;
    let output = script_result(&w)["output"].as_str().unwrap().to_owned();
    assert!(
        output.contains("not available inside execute_code") && !output.contains("exit code"),
        "{output}"
    );
}
