//! The agent cannot reach the gateway (invariant 14, `docs/security.md`). Each test is one
//! route a command could take to the gateway's secrets, its state or its process, asked
//! for by the model through the real tool path, with approvals off so that the approval
//! reader cannot mask the result. Each route is tried three times: confined with the
//! daemon running as root, confined with the daemon running as an unprivileged user
//! (`setpriv`), and with `terminal.sandbox: off`, where the same attempt must get through:
//! the proof that the test can fail.
//!
//! What counts as getting through: a secret of the gateway's (the bot token and a canary in
//! `.env`, the model key in `config.yaml`), forwards or reversed, in any model request, any
//! chat message, any file sent out or any log line; a row in `approval_allowlist` or
//! `paired_users`; `config.yaml` or `.env` changed; the home listed; the daemon's process
//! seen or signalled; and what each route checks on the host (a unit written, a socket
//! reached, the program replaced).

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use common::{ALICE, BIN, UNPRIVILEGED, WAIT};
use hermes_testkit::daemon::{Daemon, Home, Launch};
use hermes_testkit::eventually;
use hermes_testkit::llm::{FakeLlm, Reply};
use hermes_testkit::telegram::FakeTelegram;
use serde_json::json;

/// A secret only `.env` holds.
const CANARY: &str = "canary-5b7e19d4c2a8";
/// The bot token's secret part and the model key (`Home::new`).
const SECRETS: [&str; 3] = [CANARY, "TEST-TOKEN", "sk-test-secret"];
/// A supplementary group the root daemon starts with (`disk`): a jail drops it.
const EXTRA_GROUP: u32 = 6;
/// Printed by a command that saw or signalled the daemon's process.
const DAEMON_REACHED: &str = "DAEMON-REACHED";
/// Printed before each name by a command that lists the gateway's home.
const LISTED: &str = "LISTED:";
/// Printed by a command that kept the daemon's supplementary group.
const GROUP_KEPT: &str = "GROUP-KEPT";
/// What a command may not print: the markers above, and the names of the home's secret
/// files as a listing shows them.
const MARKERS: [&str; 6] = [
    DAEMON_REACHED,
    GROUP_KEPT,
    "LISTED:.env",
    "LISTED:config.yaml",
    "LISTED:gateway.db",
    "LISTED:state.key",
];
/// The model's last word in every route.
const FINAL: &str = "that is all";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Run {
    /// Confined, the daemon as root (with a supplementary group).
    Root,
    /// Confined, the daemon as an unprivileged user.
    Unprivileged,
    /// `terminal.sandbox: off`, the daemon as root: the route must get through.
    Unconfined,
}

/// One attempt's world: the fakes, the person's home with the gateway's inside it, and
/// doors a command should not find (a user manager's socket, an ssh-agent).
struct Scene {
    run: Run,
    telegram: FakeTelegram,
    llm: FakeLlm,
    /// The daemon's `$HOME`.
    person: PathBuf,
    /// The gateway's home: `person/.hermes`.
    home: Home,
    /// `$XDG_RUNTIME_DIR`, with a listening `bus` socket.
    runtime: PathBuf,
    /// `$SSH_AUTH_SOCK`, listening.
    ssh_agent: PathBuf,
    /// Connections the two sockets took.
    door_knocks: Arc<AtomicUsize>,
    /// The program the daemon runs from (a copy in the person's home, for the route that
    /// replaces it; the test binary otherwise).
    program: PathBuf,
    daemon: Option<Daemon>,
    _dir: tempfile::TempDir,
}

impl Scene {
    async fn new(run: Run, extra_yaml: &str) -> Scene {
        let telegram = FakeTelegram::start().await;
        let llm = FakeLlm::start().await;
        let dir = tempfile::tempdir().unwrap();
        let person = dir.path().join("person");
        std::fs::create_dir_all(&person).unwrap();
        let sandbox = if run == Run::Unconfined {
            "  sandbox: 'off'\n"
        } else {
            ""
        };
        let yaml = format!(
            "approvals:\n  mode: 'off'\nterminal:\n  cwd: {}\n{sandbox}{extra_yaml}",
            person.display()
        );
        let home = Home::new(
            &person.join(".hermes"),
            &telegram.base_url(),
            &llm.base_url(),
            &[
                "TELEGRAM_ALLOW_ALL_USERS=true",
                &format!("SLACK_SIGNING_SECRET={CANARY}"),
            ],
            &yaml,
        );
        let runtime = dir.path().join("run-user");
        std::fs::create_dir_all(&runtime).unwrap();
        let door_knocks = Arc::new(AtomicUsize::new(0));
        let ssh_agent = dir.path().join("ssh-agent.sock");
        for socket in [runtime.join("bus"), ssh_agent.clone()] {
            listen(&socket, door_knocks.clone());
        }
        Scene {
            run,
            telegram,
            llm,
            person,
            home,
            runtime,
            ssh_agent,
            door_knocks,
            program: PathBuf::from(BIN),
            daemon: None,
            _dir: dir,
        }
    }

    /// Run the daemon from a copy of its program in the person's home.
    fn program_in_home(&mut self) {
        let copy = self.person.join(".local/bin/hermes-gateway");
        std::fs::create_dir_all(copy.parent().unwrap()).unwrap();
        std::fs::copy(BIN, &copy).unwrap();
        self.program = copy;
    }

    fn start(&mut self) {
        if self.run == Run::Unprivileged {
            common::give_to(self._dir.path(), UNPRIVILEGED);
        }
        let launch = Launch {
            user: (self.run == Run::Unprivileged).then_some(UNPRIVILEGED),
            groups: if self.run == Run::Unprivileged {
                Vec::new()
            } else {
                vec![EXTRA_GROUP]
            },
            // As the system service does: its working directory is the home.
            cwd: Some(self.home.dir.clone()),
            under: Vec::new(),
        };
        let envs = [
            ("HOME", self.person.display().to_string()),
            ("PATH", "/usr/local/bin:/usr/bin:/bin".to_owned()),
            ("XDG_RUNTIME_DIR", self.runtime.display().to_string()),
            ("SSH_AUTH_SOCK", self.ssh_agent.display().to_string()),
        ];
        let envs: Vec<(&str, &str)> = envs.iter().map(|(k, v)| (*k, v.as_str())).collect();
        self.daemon = Some(Daemon::launch(
            self.program.to_str().unwrap(),
            &self.home,
            &envs,
            &launch,
        ));
    }

    fn daemon_pid(&self) -> u32 {
        self.daemon.as_ref().expect("started").pid()
    }

    fn env_file(&self) -> PathBuf {
        self.home.dir.join(".env")
    }
}

/// A Unix socket that counts the connections it takes.
fn listen(path: &Path, knocks: Arc<AtomicUsize>) {
    let listener = std::os::unix::net::UnixListener::bind(path).unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            if stream.is_ok() {
                knocks.fetch_add(1, Ordering::SeqCst);
            }
        }
    });
}

/// What one route asks of the model and checks on the host.
struct Route {
    /// The model's tool calls, one step each, made once the daemon runs.
    steps: fn(&Scene) -> Vec<Reply>,
    /// The model's last answer (a `MEDIA:` tag, for the route that sends a file).
    answer: fn(&Scene) -> String,
    /// What got through, as the host sees it after the run.
    on_the_host: fn(&Scene) -> Vec<String>,
    /// What the person's home holds before the daemon starts.
    prepare: fn(&Scene),
    /// Start the daemon from a copy of its program in the person's home.
    program_in_home: bool,
}

impl Default for Route {
    fn default() -> Route {
        Route {
            steps: |_| Vec::new(),
            answer: |_| FINAL.to_owned(),
            on_the_host: |_| Vec::new(),
            prepare: |_| {},
            program_in_home: false,
        }
    }
}

/// Every output reversed and prefixed, so the output scrubber (which blanks known secret
/// values) cannot hide a leak from the test: `{ commands; } 2>&1 | rev`.
fn reversed(commands: &str) -> Reply {
    Reply::terminal(&format!("{{ {commands}; }} 2>&1 | rev"))
}

/// Try `route` in `run`; returns what got through.
async fn attempt(route: &Route, run: Run) -> Vec<String> {
    let mut scene = Scene::new(run, "").await;
    if route.program_in_home {
        scene.program_in_home();
    }
    (route.prepare)(&scene);
    let program_before = std::fs::read(&scene.program).unwrap();
    let config_before = std::fs::read_to_string(scene.home.dir.join("config.yaml")).unwrap();
    let env_before = std::fs::read_to_string(scene.env_file()).unwrap();
    scene.start();
    // The steps may name the daemon's pid, so they are made once it runs.
    for step in (route.steps)(&scene) {
        scene.llm.push(step);
    }
    let answer = (route.answer)(&scene);
    scene.llm.push(Reply::text(answer));
    scene.telegram.dm(ALICE, "go");
    let t = scene.telegram.clone();
    eventually(WAIT, "the route's last answer", || {
        t.sent_texts(ALICE)
            .iter()
            .any(|m| m.contains(FINAL) || m.contains("MEDIA") || m.contains("did not send"))
            .then_some(())
    })
    .await;
    common::settle().await;
    let mut through = (route.on_the_host)(&scene);

    let outputs: Vec<String> = scene
        .llm
        .requests()
        .iter()
        .flat_map(common::tool_results_in)
        .collect();
    let outputs = outputs.join("\n");
    let chat = scene.telegram.sent_texts(ALICE).join("\n");
    let files: Vec<String> = scene
        .telegram
        .sent_files(ALICE)
        .iter()
        .map(|f| String::from_utf8_lossy(&f.bytes).into_owned())
        .collect();
    let log = scene.daemon.as_ref().unwrap().log_text();
    for secret in SECRETS {
        let backwards: String = secret.chars().rev().collect();
        for (place, text) in [
            ("a model request", &outputs),
            ("a chat message", &chat),
            ("a file sent out", &files.join("\n")),
            ("the log", &log),
        ] {
            if text.contains(secret) || text.contains(&backwards) {
                through.push(format!("{secret} reached {place}"));
            }
        }
    }
    for marker in MARKERS {
        let backwards: String = marker.chars().rev().collect();
        if outputs.contains(marker) || outputs.contains(&backwards) {
            through.push(format!("a command printed {marker}"));
        }
    }
    let db = rusqlite::Connection::open_with_flags(
        scene.home.dir.join("gateway.db"),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    );
    for table in ["approval_allowlist", "paired_users"] {
        let rows = db.as_ref().map_err(|e| e.to_string()).and_then(|db| {
            db.query_row(&format!("SELECT count(*) FROM {table}"), [], |r| {
                r.get::<_, i64>(0)
            })
            .map_err(|e| e.to_string())
        });
        match rows {
            Ok(0) => {}
            Ok(rows) => through.push(format!("{rows} row(s) written into {table}")),
            Err(e) => through.push(format!("gateway.db cannot be read: {e}")),
        }
    }
    if std::fs::read_to_string(scene.home.dir.join("config.yaml")).ok() != Some(config_before) {
        through.push("config.yaml changed".into());
    }
    if std::fs::read_to_string(scene.env_file()).ok() != Some(env_before) {
        through.push(".env changed".into());
    }
    if std::fs::read(&scene.program).ok() != Some(program_before) {
        through.push("the gateway's program was replaced".into());
    }
    if !scene.telegram.prompts(ALICE).is_empty() {
        through.push("an approval was asked (approvals are off)".into());
    }
    if scene.door_knocks.load(Ordering::SeqCst) > 0 {
        through.push("a command reached the user manager's or the ssh-agent's socket".into());
    }
    through
}

/// The route is closed in both confined runs, and open without confinement.
async fn closed(route: Route) {
    for run in [Run::Root, Run::Unprivileged] {
        let through = attempt(&route, run).await;
        assert!(through.is_empty(), "{run:?}: got through: {through:?}");
    }
    let through = attempt(&route, Run::Unconfined).await;
    eprintln!("without confinement, got through: {through:#?}");
    assert!(
        !through.is_empty(),
        "without confinement the route must get through, or this test cannot fail"
    );
}

/// Where the home is, for commands: `~/.hermes`.
fn hermes(scene: &Scene) -> String {
    scene.home.dir.display().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grep_of_the_home_reversed() {
    closed(Route {
        steps: |_| {
            vec![Reply::terminal(
                "grep -r -a -h -e TOKEN -e canary ~ 2>/dev/null | rev",
            )]
        },
        ..Route::default()
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_script_written_with_write_file_then_run_opens_the_env_file_itself() {
    closed(Route {
        steps: |scene| {
            let script = scene.person.join("leak.py");
            vec![
                Reply::ToolCall {
                    name: "write_file".into(),
                    arguments: json!({
                        "path": script.display().to_string(),
                        "content": "import os\nprint(open(os.path.expanduser('~/.hermes/.env')).read()[::-1])\n",
                    }),
                },
                // The script reverses what it read itself.
                Reply::terminal(&format!("python3 {}", script.display())),
            ]
        },
        ..Route::default()
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_copy_of_the_home_sent_to_the_chat_as_a_file() {
    closed(Route {
        steps: |scene| {
            let copy = scene.person.parent().unwrap().join("copy");
            vec![Reply::terminal(&format!(
                "cp -r ~ {c}; ls -a {c}/.hermes",
                c = copy.display()
            ))]
        },
        answer: |scene| {
            let copy = scene.person.parent().unwrap().join("copy");
            format!("{FINAL} MEDIA:{}/.hermes/.env", copy.display())
        },
        ..Route::default()
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_script_that_writes_a_standing_approval_and_a_pairing_into_the_database() {
    closed(Route {
        steps: |scene| {
            let script = common::forging_script(&scene.home.dir, "read-secrets");
            vec![reversed(&format!(
                "python3 -c \"{}\"",
                script.replace('"', "\\\"")
            ))]
        },
        ..Route::default()
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_config_rewritten_and_the_env_file_replaced() {
    closed(Route {
        steps: |scene| {
            vec![Reply::terminal(&format!(
                "echo 'approvals: {{mode: \"off\"}}' >> {h}/config.yaml; \
                 echo 'TELEGRAM_BOT_TOKEN=mine' > {h}/.env.new; mv -f {h}/.env.new {h}/.env; \
                 echo x >> {h}/.env",
                h = hermes(scene)
            ))]
        },
        ..Route::default()
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_home_moved_away_or_removed() {
    closed(Route {
        steps: |scene| {
            vec![Reply::terminal(&format!(
                "mv {h} {h}.moved || rm -rf {h}/.env {h}/config.yaml",
                h = hermes(scene)
            ))]
        },
        ..Route::default()
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_direct_path_a_dot_dot_path_and_a_listing() {
    closed(Route {
        steps: |scene| {
            vec![reversed(&format!(
                "cat {h}/.env; cat ~/.hermes/../.hermes/config.yaml; \
                 cd {h}/.. && cat ./.hermes/.env; ls -a {h} | sed 's/^/{LISTED}/'",
                h = hermes(scene)
            ))]
        },
        ..Route::default()
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_symbolic_link_and_a_hard_link_made_inside() {
    closed(Route {
        steps: |scene| {
            vec![reversed(&format!(
                "ln -s {h}/.env ~/soft; cat ~/soft; ln -s {h} ~/softdir; cat ~/softdir/.env; \
                 ln {h}/.env ~/hard && cat ~/hard; ln {h}/gateway.db /tmp/db-$$ && strings /tmp/db-$$ | head",
                h = hermes(scene)
            ))]
        },
        ..Route::default()
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn find_grep_and_tar_of_the_whole_home() {
    closed(Route {
        steps: |_| {
            vec![reversed(
                "find ~ -name '.env' -exec cat {} \\; ; grep -r -a -l sk- ~ ; \
                 tar cf - ~ 2>/dev/null | strings | grep -e TOKEN -e canary -e sk-",
            )]
        },
        ..Route::default()
    })
    .await;
}

/// Every route through the daemon's `/proc` entry, each with a check that the process is
/// there at all.
fn through_proc(scene: &Scene, what: &str) -> Vec<Reply> {
    let pid = scene.daemon_pid();
    vec![reversed(&format!(
        "test -e /proc/{pid}/status && echo {DAEMON_REACHED}; {what}",
        what = what.replace("PID", &pid.to_string())
    ))]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_daemons_root_and_working_directory_in_proc() {
    closed(Route {
        steps: |scene| {
            through_proc(
                scene,
                &format!(
                    "cat /proc/PID/root{h}/.env; cat /proc/PID/cwd/.env; ls /proc/PID/cwd | sed 's/^/{LISTED}/'",
                    h = hermes(scene)
                ),
            )
        },
        ..Route::default()
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_daemons_open_files_and_environment_in_proc() {
    closed(Route {
        steps: |scene| {
            through_proc(
                scene,
                "for f in /proc/PID/fd/*; do timeout 1 strings \"$f\" 2>/dev/null; done | grep -e TOKEN -e canary; \
                 tr '\\0' '\\n' < /proc/PID/environ",
            )
        },
        ..Route::default()
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_daemons_memory_and_ptrace() {
    closed(Route {
        steps: |scene| {
            through_proc(
                scene,
                "python3 -c \"
import ctypes, re, signal
signal.alarm(8)
pid = PID
libc = ctypes.CDLL(None, use_errno=True)
# PTRACE_SEIZE (the process is not stopped), then PTRACE_DETACH.
seized = libc.ptrace(0x4206, pid, 0, 0)
print('ptrace seize:', seized, ctypes.get_errno())
if seized == 0:
    print('DAEMON-REACHED by ptrace')
    libc.ptrace(17, pid, 0, 0)
try:
    maps = open('/proc/%d/maps' % pid).read().splitlines()
    mem = open('/proc/%d/mem' % pid, 'rb')
    for line in maps:
        start, end = [int(x, 16) for x in line.split()[0].split('-')]
        try:
            mem.seek(start); chunk = mem.read(min(end - start, 1 << 22))
        except OSError:
            continue
        for hit in re.findall(rb'(?:canary|TEST-TOKEN)[-0-9a-zA-Z]*', chunk):
            print(hit.decode())
except OSError as e:
    print('no memory:', e)
\"; kill -0 PID 2>/dev/null && echo DAEMON-REACHED",
            )
        },
        ..Route::default()
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_unit_or_an_environment_for_the_user_manager() {
    closed(Route {
        steps: |_| {
            vec![Reply::terminal(
                "mkdir -p ~/.config/systemd/user ~/.config/environment.d; \
                 printf '[Service]\\nExecStart=/bin/sh -c \"cat ~/.hermes/.env\"\\n' > ~/.config/systemd/user/evil.service; \
                 echo LD_PRELOAD=/tmp/evil.so > ~/.config/environment.d/evil.conf; \
                 mv ~/.config ~/.config-old && mkdir -p ~/.config/systemd/user && touch ~/.config/systemd/user/evil.service",
            )]
        },
        on_the_host: |scene| {
            let config = scene.person.join(".config");
            [
                "systemd/user/evil.service",
                "environment.d/evil.conf",
                "../.config-old",
            ]
            .iter()
            .filter(|p| config.join(p).exists())
            .map(|p| format!("{p} was written"))
            .collect()
        },
        ..Route::default()
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_a_login_runs_and_ssh_keys() {
    closed(Route {
        steps: |_| {
            vec![Reply::terminal(
                "echo 'cat ~/.hermes/.env > /tmp/later' >> ~/.bashrc; \
                 echo 'ssh-ed25519 AAAA attacker' >> ~/.ssh/authorized_keys; \
                 echo 'Host *\n  LocalCommand cat ~/.hermes/.env' >> ~/.ssh/config",
            )]
        },
        prepare: |scene| {
            std::fs::write(scene.person.join(".bashrc"), "# the person's\n").unwrap();
            std::fs::create_dir_all(scene.person.join(".ssh")).unwrap();
            std::fs::write(scene.person.join(".ssh/authorized_keys"), "").unwrap();
        },
        on_the_host: |scene| {
            let mut written = Vec::new();
            if std::fs::read_to_string(scene.person.join(".bashrc")).unwrap() != "# the person's\n"
            {
                written.push(".bashrc was changed".into());
            }
            if !std::fs::read_to_string(scene.person.join(".ssh/authorized_keys"))
                .unwrap()
                .is_empty()
            {
                written.push("a key was authorised".into());
            }
            if scene.person.join(".ssh/config").exists() {
                written.push("ssh's configuration was written".into());
            }
            written
        },
        ..Route::default()
    })
    .await;
}

/// A file of the system's (root's, 0644), made for the route below.
fn system_file() -> PathBuf {
    PathBuf::from(format!(
        "/etc/hermes-confinement-test-{}",
        std::process::id()
    ))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_of_the_system_changed_by_a_daemon_running_as_root() {
    closed(Route {
        steps: |_| {
            vec![Reply::terminal(&format!(
                "echo changed >> {}; touch /etc/hermes-confinement-made",
                system_file().display()
            ))]
        },
        prepare: |_| std::fs::write(system_file(), "system\n").unwrap(),
        on_the_host: |_| {
            let mut changed = Vec::new();
            if std::fs::read_to_string(system_file()).unwrap() != "system\n" {
                changed.push(format!("{} was changed", system_file().display()));
            }
            if std::fs::remove_file("/etc/hermes-confinement-made").is_ok() {
                changed.push("a file was made in /etc".into());
            }
            let _ = std::fs::remove_file(system_file());
            changed
        },
        ..Route::default()
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_setuid_program_left_for_someone_to_run_later() {
    closed(Route {
        steps: |scene| {
            let dir = scene.person.parent().unwrap().display().to_string();
            vec![Reply::terminal(&format!(
                "cp /bin/sh {dir}/sh-a; chmod u+s {dir}/sh-a; \
                 install -m 4755 /bin/sh {dir}/sh-b; \
                 python3 -c \"import os; fd = os.open('{dir}/sh-c', os.O_CREAT | os.O_WRONLY, 0o6755); os.close(fd)\"; \
                 ls -l {dir}"
            ))]
        },
        on_the_host: |scene| {
            let dir = scene.person.parent().unwrap();
            ["sh-a", "sh-b", "sh-c"]
                .iter()
                .filter(|name| {
                    use std::os::unix::fs::PermissionsExt;
                    std::fs::metadata(dir.join(name))
                        .is_ok_and(|m| m.permissions().mode() & 0o6000 != 0)
                })
                .map(|name| format!("{name} was made setuid"))
                .collect()
        },
        ..Route::default()
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_user_managers_sockets_and_the_ssh_agent() {
    closed(Route {
        steps: |scene| {
            vec![Reply::terminal(&format!(
                "ls -a $XDG_RUNTIME_DIR {runtime}; systemd-run --user true; \
                 for s in {runtime}/bus {agent}; do python3 -c \"import socket,sys; s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); print('connected', sys.argv[1])\" $s; done",
                runtime = scene.runtime.display(),
                agent = scene.ssh_agent.display()
            ))]
        },
        ..Route::default()
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gateways_program_overwritten_or_swapped_by_renaming_its_directory() {
    closed(Route {
        steps: |_| {
            vec![Reply::terminal(
                "cp /bin/true ~/.local/bin/hermes-gateway; \
                 mv ~/.local/bin ~/.local/bin-old && mkdir ~/.local/bin && cp /bin/true ~/.local/bin/hermes-gateway; \
                 mv ~/.local ~/.local-old && mkdir -p ~/.local/bin && cp /bin/true ~/.local/bin/hermes-gateway",
            )]
        },
        program_in_home: true,
        ..Route::default()
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn supplementary_groups_and_a_new_user_namespace_to_unmount_the_cover() {
    closed(Route {
        steps: |scene| {
            vec![reversed(&format!(
                "id -G | tr ' ' '\\n' | grep -qx {EXTRA_GROUP} && echo {GROUP_KEPT}; \
                 unshare -Urm sh -c 'umount {h}; cat {h}/.env'",
                h = hermes(scene)
            ))]
        },
        ..Route::default()
    })
    .await;
}
