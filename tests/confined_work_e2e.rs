//! What the agent needs still works confined (invariant 14, `docs/security.md`): scripts in
//! the working directory, git, Python's venv, the system's files, a background server a
//! foreground command reaches, a document the person sent, an MCP server's cache; with the
//! daemon as root and as an unprivileged user. `terminal.network: false` cuts the network
//! and keeps the jail's own loopback. Where the kernel refuses user namespaces, `required`
//! refuses commands (the model told, the person told once) and `auto` says loudly what is
//! left; the second line of defence (signed rows) holds when confinement is off.

mod common;

use std::path::PathBuf;

use common::{ALICE, BIN, UNPRIVILEGED, WAIT, tool_results_in};
use hermes_testkit::daemon::{Daemon, Home, Launch};
use hermes_testkit::eventually;
use hermes_testkit::llm::{FakeLlm, Reply};
use hermes_testkit::mcp::{STUB_VAR, serve_stdio, stub_server_command};
use hermes_testkit::telegram::FakeTelegram;
use serde_json::json;

/// A secret only `.env` holds.
const CANARY: &str = "canary-77c1e0b5";

/// The stub MCP server this binary serves when started with it selected.
#[tokio::test]
#[ignore = "the MCP server tests start, not a test"]
async fn mcp_stub_server() {
    if std::env::var(STUB_VAR).as_deref() == Ok("1") {
        serve_stdio().await;
    }
}

/// A person's home with the gateway's home inside it (`.hermes`), its working directory the
/// person's home, and the fakes.
struct Person {
    telegram: FakeTelegram,
    llm: FakeLlm,
    person: PathBuf,
    home: Home,
    _dir: tempfile::TempDir,
}

impl Person {
    async fn new(extra_yaml: &str) -> Person {
        Person::with_env("TELEGRAM_ALLOW_ALL_USERS=true", extra_yaml).await
    }

    /// `access` is the `.env` line that says who may talk to the bot.
    async fn with_env(access: &str, extra_yaml: &str) -> Person {
        let telegram = FakeTelegram::start().await;
        let llm = FakeLlm::start().await;
        let dir = tempfile::tempdir().unwrap();
        let person = dir.path().join("person");
        std::fs::create_dir_all(person.join("work")).unwrap();
        let home = Home::new(
            &person.join(".hermes"),
            &telegram.base_url(),
            &llm.base_url(),
            &[access, &format!("SLACK_SIGNING_SECRET={CANARY}")],
            &format!(
                "approvals:\n  mode: 'off'\nterminal:\n  cwd: {}\n{extra_yaml}",
                person.display()
            ),
        );
        Person {
            telegram,
            llm,
            person,
            home,
            _dir: dir,
        }
    }

    /// Start the daemon as root, or as the unprivileged user (who then owns the homes).
    fn start(&self, unprivileged: bool) -> Daemon {
        self.start_under(unprivileged, Vec::new())
    }

    fn start_under(&self, unprivileged: bool, under: Vec<String>) -> Daemon {
        if unprivileged {
            common::give_to(self._dir.path(), UNPRIVILEGED);
        }
        let person = self.person.display().to_string();
        Daemon::launch(
            BIN,
            &self.home,
            &[
                ("HOME", person.as_str()),
                ("PATH", "/usr/local/bin:/usr/bin:/bin"),
            ],
            &Launch {
                user: unprivileged.then_some(UNPRIVILEGED),
                under,
                ..Launch::default()
            },
        )
    }

    /// Alice says `text`; the answer comes.
    async fn ask(&self, text: &str) -> Vec<String> {
        let before = self.telegram.sent_texts(ALICE).len();
        self.telegram.dm(ALICE, text);
        let t = self.telegram.clone();
        eventually(WAIT, "the answer", || {
            let sent = t.sent_texts(ALICE);
            (sent.len() > before).then_some(sent)
        })
        .await
    }
}

/// The text of every tool result the model was sent in its last request, in order.
fn outputs(p: &Person) -> Vec<String> {
    p.llm
        .requests()
        .last()
        .map(tool_results_in)
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scripts_git_a_venv_and_the_system_work_in_the_confinement() {
    for unprivileged in [false, true] {
        let p = Person::new("").await;
        p.llm.push(Reply::terminal(
            "set -e; cd ~/work; printf 'print(6*7)\\n' > calc.py; python3 calc.py; \
             git init -q repo; cd repo; echo hi > f; git add f; \
             git -c user.email=a@b.c -c user.name=A commit -q -m first; git log --oneline | wc -l; cd ..; \
             python3 -m venv venv; ./venv/bin/python -c 'import sys; print(sys.prefix)'; \
             ./venv/bin/python -c \"import zipfile; z = zipfile.ZipFile('greet-1.0-py3-none-any.whl', 'w'); \
             z.writestr('greet/__init__.py', 'print(chr(103) + \\\"reetings\\\")'); \
             z.writestr('greet-1.0.dist-info/METADATA', 'Metadata-Version: 2.1\\\\nName: greet\\\\nVersion: 1.0\\\\n'); \
             z.writestr('greet-1.0.dist-info/WHEEL', 'Wheel-Version: 1.0\\\\nRoot-Is-Purelib: true\\\\nTag: py3-none-any\\\\n'); \
             z.writestr('greet-1.0.dist-info/RECORD', ''); z.close()\"; \
             ./venv/bin/pip install -q --no-index ./greet-1.0-py3-none-any.whl && ./venv/bin/python -c 'import greet'; \
             grep -c '^ID=' /etc/os-release; echo notes > ~/notes.txt; cat ~/notes.txt; \
             echo shared > /dev/shm/x-$$ && cat /dev/shm/x-$$; \
             python3 -c 'import multiprocessing; multiprocessing.Lock(); print(\"semaphore\")'; \
             python3 -c 'import pty, os; pid, fd = pty.fork(); os._exit(0) if pid == 0 else print(\"pty\")'; \
             echo 500 > /proc/self/oom_score_adj; echo ALL-OK",
        ));
        p.llm.push(Reply::text("done"));
        let _d = p.start(unprivileged);
        assert_eq!(p.ask("work").await, ["done"]);
        let output = outputs(&p).join("\n");
        assert!(output.starts_with("exit code: 0"), "{output}");
        for expected in [
            "42",
            "venv",
            "notes",
            "shared",
            "semaphore",
            "pty",
            "ALL-OK",
        ] {
            assert!(output.contains(expected), "{expected} in {output}");
        }
        assert!(p.person.join("work/repo/.git").is_dir());
    }
}

/// A port on the host's loopback nobody uses now.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A background server on a loopback port, then a foreground `curl` of it (tried for a
/// while: the server starts at its own pace).
fn server_then_curl(port: u16) -> Vec<Reply> {
    vec![
        Reply::ToolCall {
            name: "terminal".into(),
            arguments: json!({
                "command": format!("cd ~/work && echo served > page.txt && exec python3 -m http.server {port} --bind 127.0.0.1"),
                "background": true,
            }),
        },
        Reply::terminal(&format!(
            "for i in $(seq 100); do curl -sf http://127.0.0.1:{port}/page.txt && break; sleep 0.1; done"
        )),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_background_server_is_reached_by_a_foreground_curl() {
    for unprivileged in [false, true] {
        let p = Person::new("").await;
        for step in server_then_curl(free_port()) {
            p.llm.push(step);
        }
        p.llm.push(Reply::text("reached"));
        let _d = p.start(unprivileged);
        assert_eq!(p.ask("serve").await.last().unwrap(), "reached");
        let output = outputs(&p);
        assert!(output[1].contains("served"), "{output:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_network_the_host_is_out_of_reach_and_the_jails_own_loopback_works() {
    let p = Person::new("  network: false\n").await;
    for step in server_then_curl(free_port()) {
        p.llm.push(step);
    }
    // The fake model listens on the host's loopback.
    let model = p.llm.base_url();
    p.llm.push(Reply::terminal(&format!(
        "curl -s -m 3 -o /dev/null -w '%{{http_code}}' {model}/models; echo \" curl exit $?\""
    )));
    p.llm.push(Reply::text("checked"));
    let d = p.start(false);
    assert_eq!(p.ask("serve").await.last().unwrap(), "checked");
    let output = outputs(&p);
    assert!(
        output[1].contains("served"),
        "the jail's loopback: {output:?}"
    );
    assert!(
        output[2].contains("curl exit 7"),
        "the host is not reachable: {output:?}"
    );
    assert!(d.log_text().contains("no network"), "said at start-up");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_document_the_person_sent_is_read_at_the_path_the_model_was_given() {
    for unprivileged in [false, true] {
        let p = Person::new("").await;
        p.llm.push(Reply::computed(|request| {
            let said = request["messages"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|m| m["role"] == "user")
                .map(|m| m["content"].to_string())
                .collect::<Vec<_>>()
                .join(" ");
            let path = said
                .split("saved at ")
                .nth(1)
                .and_then(|rest| rest.split(".]").next())
                .unwrap_or("(no path)")
                .to_owned();
            Reply::terminal(&format!("head -c 9 '{path}'"))
        }));
        p.llm.push(Reply::text("read it"));
        let _d = p.start(unprivileged);
        let pdf = b"%PDF-1.7\n\x00\x01binary".to_vec();
        let doc = p.telegram.document("report.pdf", "application/pdf", pdf);
        p.telegram.dm_with(ALICE, Some("what is in it?"), doc);
        let t = p.telegram.clone();
        eventually(WAIT, "the answer", || {
            t.sent_texts(ALICE)
                .contains(&"read it".to_owned())
                .then_some(())
        })
        .await;
        let output = outputs(&p).join("\n");
        assert!(output.contains("%PDF-1.7"), "{output}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mcp_stdio_server_keeps_its_cache_under_the_home() {
    for unprivileged in [false, true] {
        let (command, args) = stub_server_command("mcp_stub_server");
        let p = Person::new(&format!(
            "mcp_servers:\n  calc:\n    command: {}\n    args: {}\n    env:\n      {STUB_VAR}: \"1\"\n    lazy: true\n",
            json!(command),
            json!(args)
        ))
        .await;
        p.llm.push(Reply::ToolCall {
            name: "mcp__calc__cache".into(),
            arguments: json!({}),
        });
        p.llm.push(Reply::text("cached"));
        let _d = p.start(unprivileged);
        assert_eq!(p.ask("cache something").await, ["cached"]);
        let output = outputs(&p).join("\n");
        assert!(output.starts_with("cached at"), "{output}");
        assert!(p.person.join(".cache/hermes-test-mcp/entry").is_file());
    }
}

/// Run the daemon where the kernel refuses it new user namespaces: inside a user namespace
/// whose limit is 0.
fn without_user_namespaces() -> Vec<String> {
    [
        "unshare",
        "--user",
        "--map-root-user",
        "sh",
        "-c",
        "echo 0 > /proc/sys/user/max_user_namespaces && exec \"$0\" \"$@\"",
    ]
    .map(str::to_owned)
    .to_vec()
}

async fn get(addr: &str, path: &str) -> serde_json::Value {
    reqwest::get(format!("http://{addr}{path}"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn required_refuses_commands_where_the_kernel_refuses_user_namespaces() {
    let p = Person::new("  sandbox: required\n").await;
    let marker = p.person.join("work/ran");
    for _ in 0..2 {
        p.llm
            .push(Reply::terminal(&format!("touch {}", marker.display())));
    }
    p.llm.push(Reply::text("could not"));
    let d = p.start_under(false, without_user_namespaces());
    let replies = p.ask("try twice").await;
    eventually(WAIT, "the answer", || {
        p.telegram
            .sent_texts(ALICE)
            .contains(&"could not".to_owned())
            .then_some(())
    })
    .await;
    common::settle().await;
    let output = outputs(&p);
    assert_eq!(output.len(), 2, "{output:?}");
    for result in &output {
        assert!(
            result.starts_with("error: this command was not run: terminal.sandbox is `required`"),
            "{result}"
        );
    }
    assert!(!marker.exists(), "nothing ran");
    let told: Vec<String> = p
        .telegram
        .sent_texts(ALICE)
        .into_iter()
        .filter(|m| m.contains("I cannot run commands here"))
        .collect();
    assert_eq!(told.len(), 1, "the person is told once: {replies:?}");
    assert!(d.log_text().contains("terminal.sandbox is required"));
    let addr = d.http_addr().expect("the HTTP server");
    let ready = get(&addr, "/readyz").await;
    assert_eq!(ready["sandbox"]["confined"], false, "{ready}");
    assert!(
        ready["sandbox"]["warning"]
            .as_str()
            .unwrap()
            .contains("Landlock"),
        "{ready}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_warns_loudly_and_keeps_what_landlock_can_where_user_namespaces_are_refused() {
    let p = Person::new("").await;
    p.llm.push(Reply::terminal(&format!(
        "echo made > ~/work/made.txt && cat ~/work/made.txt; \
         {{ cat {}/.env; }} 2>&1 | rev",
        p.home.dir.display()
    )));
    p.llm.push(Reply::text("done"));
    let d = p.start_under(false, without_user_namespaces());
    assert_eq!(p.ask("go").await, ["done"]);
    let output = outputs(&p).join("\n");
    assert!(output.contains("made"), "{output}");
    let backwards: String = CANARY.chars().rev().collect();
    assert!(
        !output.contains(&backwards),
        "Landlock keeps .env: {output}"
    );
    eventually(WAIT, "the warning", || {
        d.log_text()
            .lines()
            .find(|l| l.contains("WARN") && l.contains("partly confined: Landlock ABI"))
            .map(str::to_owned)
    })
    .await;
    let said = p.ask("/status").await;
    assert!(
        said.last()
            .unwrap()
            .contains("⚠️ partly confined: Landlock ABI"),
        "the chat's /status warns: {said:?}"
    );
    let addr = d.http_addr().expect("the HTTP server");
    let status = get(&addr, "/status").await;
    assert_eq!(status["sandbox"]["mode"], "auto", "{status}");
    assert!(
        status["sandbox"]["warning"]
            .as_str()
            .unwrap()
            .contains("partly confined"),
        "{status}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn start_up_and_check_config_say_what_confines_commands() {
    let p = Person::new("").await;
    let d = p.start(false);
    eventually(WAIT, "the start-up line", || {
        d.log_text()
            .contains("commands the agent runs are confined: user, mount and PID namespaces + Landlock ABI")
            .then_some(())
    })
    .await;
    let said = p.ask("/status").await;
    assert!(
        said.last()
            .unwrap()
            .contains("Commands: confined: user, mount and PID namespaces + Landlock ABI"),
        "the chat's /status says it: {said:?}"
    );
    let out = std::process::Command::new(BIN)
        .args(["check-config", "--home"])
        .arg(&p.home.dir)
        .env("HOME", &p.person)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("terminal.sandbox = auto (confined: user, mount and PID namespaces"),
        "{text}"
    );

    let off = Person::new("  sandbox: 'off'\n").await;
    let out = std::process::Command::new(BIN)
        .args(["check-config", "--home"])
        .arg(&off.home.dir)
        .env("HOME", &off.person)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("warning: terminal.sandbox: NOT confined: terminal.sandbox is off"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rows_a_command_wrote_into_the_database_are_refused_and_reported() {
    // Confinement off and approvals on: the database is within reach, and the second line
    // of defence is all there is.
    let p = Person::with_env(
        &format!("TELEGRAM_ALLOWED_USERS={ALICE}"),
        "  sandbox: 'off'\n",
    )
    .await;
    std::fs::write(
        p.home.dir.join("config.yaml"),
        std::fs::read_to_string(p.home.dir.join("config.yaml"))
            .unwrap()
            .replace("approvals:\n  mode: 'off'\n", ""),
    )
    .unwrap();
    let script = common::forging_script(&p.home.dir, "hermes-env");
    let script_file = p.person.join("work/forge.py");
    std::fs::write(&script_file, script).unwrap();
    p.llm.push(Reply::terminal(&format!(
        "python3 {}",
        script_file.display()
    )));
    p.llm.push(Reply::terminal(&format!(
        "cat {}/.env | rev",
        p.home.dir.display()
    )));
    p.llm.push(Reply::text("done"));
    let d = p.start(false);
    p.telegram.dm(ALICE, "go");
    // The forged standing approval covers nothing: the read asks.
    let t = p.telegram.clone();
    let prompt = eventually(WAIT, "the approval prompt", || {
        t.prompts(ALICE).first().cloned()
    })
    .await;
    assert!(
        prompt.1["text"]
            .as_str()
            .unwrap()
            .contains("gateway's secrets"),
        "{prompt:?}"
    );
    assert!(outputs(&p)[0].contains("written"), "the rows went in");
    eventually(WAIT, "the report", || {
        d.log_text()
            .contains("a standing approval in the database was not written by the gateway")
            .then_some(())
    })
    .await;
    // The forged pairing lets nobody in: Mallory gets a pairing code, not the agent.
    let mallory = 666;
    p.telegram.dm(mallory, "hello");
    let code = eventually(WAIT, "Mallory's answer", || {
        t.sent_texts(mallory).first().cloned()
    })
    .await;
    assert!(code.to_lowercase().contains("pairing"), "{code}");
    let out = std::process::Command::new(BIN)
        .args(["approvals", "list", "--home"])
        .arg(&p.home.dir)
        .output()
        .unwrap();
    let list = String::from_utf8_lossy(&out.stdout);
    assert!(list.contains("NOT WRITTEN BY THE GATEWAY"), "{list}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_daemon_whose_home_is_the_gateways_works_in_a_workspace_where_its_old_files_moved() {
    // The system service's shape: `$HOME` is the gateway's home, and so was the working
    // directory; what the agent made there before is still there.
    let telegram = FakeTelegram::start().await;
    let llm = FakeLlm::start().await;
    let dir = tempfile::tempdir().unwrap();
    let home_dir = dir.path().join("state");
    std::fs::create_dir_all(home_dir.join("project")).unwrap();
    std::fs::write(home_dir.join("project/notes.txt"), "old notes").unwrap();
    std::fs::write(home_dir.join("leak.py"), "print('x')").unwrap();
    let home = Home::new(
        &home_dir,
        &telegram.base_url(),
        &llm.base_url(),
        &[
            "TELEGRAM_ALLOW_ALL_USERS=true",
            &format!("SLACK_SIGNING_SECRET={CANARY}"),
        ],
        &format!(
            "approvals:\n  mode: 'off'\nterminal:\n  cwd: {}\n",
            home_dir.display()
        ),
    );
    llm.push(Reply::terminal(&format!(
        "pwd; echo \"home=$HOME\"; cat ~/project/notes.txt; echo new > ~/made.txt; \
         ls -a {h}; {{ cat {h}/.env; }} 2>&1 | rev",
        h = home_dir.display()
    )));
    llm.push(Reply::text("done"));
    let home_env = home_dir.display().to_string();
    let d = Daemon::launch(
        BIN,
        &home,
        &[("HOME", home_env.as_str())],
        &Launch {
            cwd: Some(home_dir.clone()),
            ..Launch::default()
        },
    );
    telegram.dm(ALICE, "where am I?");
    let t = telegram.clone();
    eventually(WAIT, "the answer", || {
        t.sent_texts(ALICE)
            .contains(&"done".to_owned())
            .then_some(())
    })
    .await;
    let workspace = home_dir.join("workspace");
    let output = llm
        .requests()
        .last()
        .map(tool_results_in)
        .unwrap_or_default()
        .join("\n");
    assert!(
        output.contains(&format!(
            "{}\nhome={}\nold notes",
            workspace.display(),
            workspace.display()
        )),
        "{output}"
    );
    let backwards: String = CANARY.chars().rev().collect();
    assert!(!output.contains(&backwards), "{output}");
    assert!(
        !output.contains("config.yaml"),
        "the home cannot be listed: {output}"
    );
    assert!(workspace.join("made.txt").is_file() && workspace.join("leak.py").is_file());
    assert!(!home_dir.join("project").exists() && home_dir.join(".env").exists());
    assert!(
        d.log_text().contains("moved=leak.py, project"),
        "the operator is told: {}",
        d.log_text()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sub_agents_and_a_scheduled_jobs_commands_are_confined_too() {
    let p = Person::new("").await;
    let probe = Reply::terminal(&format!(
        "test -e {}/config.yaml && echo CONFIG-VISIBLE || echo CONFIG-HIDDEN",
        p.home.dir.display()
    ));
    // A delegation: the sub-agent probes, then answers; the parent answers.
    p.llm.push(Reply::ToolCall {
        name: "delegate_task".into(),
        arguments: json!({"goal": "probe the home"}),
    });
    p.llm.push(probe.clone());
    p.llm.push(Reply::text("probed"));
    p.llm.push(Reply::text("delegated"));
    // A scheduled job: made in a turn, its run probes.
    p.llm.push(Reply::ToolCall {
        name: "cronjob".into(),
        arguments: json!({"action": "create", "schedule": "2s", "prompt": "probe the home", "name": "prober"}),
    });
    p.llm.push(Reply::text("scheduled"));
    p.llm.push(probe);
    p.llm.push(Reply::text("job done"));
    let _d = p.start(false);
    assert_eq!(p.ask("delegate a probe").await.last().unwrap(), "delegated");
    p.ask("schedule a probe").await;
    let t = p.telegram.clone();
    eventually(WAIT, "the job's answer", || {
        t.sent_texts(ALICE)
            .contains(&"job done".to_owned())
            .then_some(())
    })
    .await;
    let results: Vec<String> = p
        .llm
        .requests()
        .iter()
        .flat_map(tool_results_in)
        .filter(|r| r.contains("CONFIG-"))
        .collect();
    // Each probe's result is in the request after it (the sub-agent's, the job's).
    assert!(
        results.len() >= 2 && results.iter().all(|r| r.contains("CONFIG-HIDDEN")),
        "{results:?}"
    );
}
