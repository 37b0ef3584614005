//! Peeling wrappers (`sudo`, `env`, `nohup`, `timeout`, `xargs`, …) off a command line to
//! reach the command that really runs; flags on the wrappers themselves (`sudo -S`, `env -S`)
//! are judged on the way.

use std::path::PathBuf;

use super::super::classes as c;
use super::super::words::{Arg, Unknown};
use super::{Verdict, program, text_is};

/// Strips wrappers (`sudo`, `env`, `nohup`, `timeout`, `xargs`, …) off a command line.
#[derive(Default)]
pub(super) struct Peel {
    pub(super) cwd: Option<PathBuf>,
    pub(super) detached: bool,
    /// The command runs on what `xargs` reads.
    pub(super) via_xargs: bool,
}

impl Peel {
    /// The command line that really runs, or `None` when there is none to judge.
    pub(super) fn run(&mut self, argv: &[Arg], verdict: &mut Verdict) -> Option<Vec<Arg>> {
        let mut argv: Vec<Arg> = argv.to_vec();
        for _ in 0..16 {
            let first = argv.first()?;
            let Some(name) = program(first) else {
                return Some(argv);
            };
            let rest = &argv[1..];
            let skip = match name.as_str() {
                "sudo" | "doas" => sudo_options(rest, verdict),
                "env" => self.env(rest, verdict)?,
                "nohup" | "setsid" | "disown" | "systemd-run" | "daemonize"
                | "start-stop-daemon" => {
                    self.detached = true;
                    options_then_command(
                        rest,
                        &["-p", "--property", "-u", "--unit", "-E", "--setenv"],
                    )
                }
                "time" | "exec" | "builtin" | "nice" | "ionice" | "stdbuf" | "unbuffer"
                | "caffeinate" | "chronic" | "busybox" | "toybox" | "strace" | "ltrace"
                | "catchsegv" | "firejail" | "proxychains" | "proxychains4" | "torsocks"
                | "eatmydata" | "fakeroot" | "faketime" | "ifne" | "sg" => options_then_command(
                    rest,
                    &["-n", "-c", "-a", "-o", "-e", "-i", "-p", "-s", "-u", "-g"],
                ),
                "command" => {
                    if rest.iter().any(|a| text_is(a, &["-v", "-V"])) {
                        return None;
                    }
                    options_then_command(rest, &[])
                }
                "timeout" => {
                    let start =
                        options_then_command(rest, &["-s", "--signal", "-k", "--kill-after"]);
                    start + 1 // the duration
                }
                "chrt" | "taskset" | "numactl" => {
                    let start = options_then_command(rest, &["-c", "-p"]);
                    if name == "numactl" { start } else { start + 1 }
                }
                "flock" => {
                    if let Some(code) = option_value(rest, &["-c", "--command"]) {
                        verdict.add(&c::SHELL_C);
                        verdict.nested.push(code);
                        return None;
                    }
                    options_then_command(rest, &["-w", "--timeout", "-E", "--conflict-exit-code"])
                        + 1
                }
                "watch" => options_then_command(rest, &["-n", "--interval", "-d", "--differences"]),
                "xargs" => {
                    let start = options_then_command(
                        rest,
                        &[
                            "-I",
                            "-i",
                            "-n",
                            "-P",
                            "-L",
                            "-l",
                            "-s",
                            "-d",
                            "-E",
                            "-e",
                            "-a",
                            "--arg-file",
                            "--delimiter",
                            "--max-args",
                            "--max-procs",
                            "--replace",
                            "--max-lines",
                            "--max-chars",
                            "--eof",
                        ],
                    );
                    // What xargs reads from its input becomes more arguments.
                    let mut inner: Vec<Arg> = rest[start.min(rest.len())..].to_vec();
                    if inner.is_empty() {
                        return None;
                    }
                    inner.push(Arg::unknown(Unknown::Variable));
                    self.via_xargs = true;
                    argv = inner;
                    continue;
                }
                _ => return Some(argv),
            };
            if skip + 1 > argv.len() {
                return None;
            }
            argv = argv[skip + 1..].to_vec();
        }
        Some(argv)
    }

    /// `env [options] [NAME=value]… command`; `None` when it runs nothing or hides it.
    fn env(&mut self, rest: &[Arg], verdict: &mut Verdict) -> Option<usize> {
        let mut i = 0;
        while i < rest.len() {
            let Some(text) = rest[i].text() else { break };
            if text == "--" {
                return Some(i + 1);
            }
            if text == "-S" || text.starts_with("--split-string") || text.starts_with("-S") {
                // The command is a string split at run time.
                verdict.add(&c::SHELL_C);
                if let Some(code) = rest.get(i + 1).and_then(Arg::text) {
                    verdict.nested.push(code);
                }
                return None;
            }
            if text == "-u" || text == "--unset" {
                i += 2;
                continue;
            }
            if text == "-C" || text == "--chdir" {
                self.cwd = None;
                i += 2;
                continue;
            }
            if text.starts_with('-') {
                i += 1;
                continue;
            }
            if let Some((name, _)) = text.split_once('=') {
                if matches!(name, "DOCKER_HOST" | "DOCKER_CONTEXT" | "CONTAINER_HOST") {
                    verdict.add(&c::DOCKER_REMOTE);
                }
                i += 1;
                continue;
            }
            break;
        }
        Some(i)
    }
}

/// `sudo [options] command`: flags that read a password without a terminal, or open a
/// root shell, are flagged; returns how many words the options take.
fn sudo_options(rest: &[Arg], verdict: &mut Verdict) -> usize {
    let with_value = [
        "-u",
        "-g",
        "-C",
        "-D",
        "-h",
        "-p",
        "-r",
        "-t",
        "-T",
        "-U",
        "--user",
        "--group",
        "--chdir",
        "--host",
        "--prompt",
        "--role",
        "--type",
        "--command-timeout",
        "--other-user",
        "--close-from",
    ];
    let mut i = 0;
    while i < rest.len() {
        let Some(text) = rest[i].text() else { break };
        if text == "--" {
            return i + 1;
        }
        if !text.starts_with('-') {
            break;
        }
        if text.starts_with("--") {
            let long = text.split('=').next().unwrap_or(&text).to_owned();
            if long.starts_with("--st")
                || long.starts_with("--a")
                || long == "--shell"
                || long == "--login"
            {
                verdict.add(&c::SUDO_FLAGS);
            }
            if with_value.contains(&long.as_str()) && !text.contains('=') {
                i += 1;
            }
        } else {
            let letters = &text[1..];
            if letters.contains(['S', 'A', 's', 'i']) {
                verdict.add(&c::SUDO_FLAGS);
            }
            if let Some(last) = letters.chars().last()
                && "ugCDhprtTU".contains(last)
            {
                i += 1;
            }
        }
        i += 1;
    }
    i
}

/// Index of the first word after the options (skipping the values of `with_value`).
fn options_then_command(rest: &[Arg], with_value: &[&str]) -> usize {
    let mut i = 0;
    while i < rest.len() {
        let Some(text) = rest[i].text() else { break };
        if text == "--" {
            return i + 1;
        }
        if !text.starts_with('-') || text == "-" {
            break;
        }
        if with_value.contains(&text.as_str()) {
            i += 1;
        }
        i += 1;
    }
    i
}

/// The value given to an option (`-c CODE` or `-cCODE` / `--command=CODE`).
pub(super) fn option_value(args: &[Arg], names: &[&str]) -> Option<String> {
    for (i, arg) in args.iter().enumerate() {
        let Some(text) = arg.text() else { continue };
        for name in names {
            if text == *name {
                return Some(args.get(i + 1).and_then(Arg::text).unwrap_or_default());
            }
            if let Some(value) = text.strip_prefix(&format!("{name}=")) {
                return Some(value.to_owned());
            }
        }
    }
    None
}
